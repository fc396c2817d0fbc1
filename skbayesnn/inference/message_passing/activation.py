"""Messages of the (leaky) ReLU factor ``a = LeakyReLU_alpha(z)`` (message_passing.md §5.6).

Notation of §5.6 (the consistent one; Table 7 of the paper swaps ``a`` and ``z``,
§14 item 2): ``z`` is the pre-activation with forward message ``N(mu_z, s2_z)``
from the layer below, ``a`` the activation with backward message
``G(tau_a, rho_a)`` from the layer above.  ``alpha = 0`` is the ReLU.

Both marginal approximations (§1, §5.6 (b), (c)) need the moments of the same
"tilted" density on ``z``,

.. math::

    t(z) = N(z; \\mu_z, s^2_z)\\, N(\\phi(z); \\mu_a, s^2_a),

which splits at 0 into two truncated Gaussians: for ``z > 0`` the product
``G(tau_z + tau_a, rho_z + rho_a)`` with mass ``N(mu_z; mu_a, s2_z + s2_a)
P(z > 0)``, and for ``z < 0`` the product ``G(tau_z + alpha tau_a, rho_z +
alpha^2 rho_a)`` with mass ``N(alpha mu_z; mu_a, alpha^2 s2_z + s2_a) P(z < 0)``.
These are the ``zeta_k`` building blocks of §5.6: the ``z < 0`` part carries the
``1/alpha`` of the backward message (§14 item 1) inside its normaliser, and the
forward marginal of ``a`` is the same mixture mapped through ``a = alpha z`` on the
negative side (no ``1/alpha``, §5.6 (b)).  For ``alpha = 0`` the negative side is
the point mass at ``a = 0`` (§5.6, ReLU cases).  Everything is computed with log
weights and centred mixture moments, so no normaliser underflows.
"""

from __future__ import annotations

import math
import sys

from ..._backend import array_namespace
from ...core.activations import leaky_relu_moments
from ...core.gaussian import (
    min_precision,
    moment_match_mixture,
    product_normalizer_log,
    truncated_gaussian_moments,
)

__all__ = [
    "leaky_relu_tilted",
    "leaky_relu_forward_direct",
    "leaky_relu_forward",
    "leaky_relu_backward",
]

#: Precision floor and the paper's guard thresholds (message_passing.md §8, §10).
EPS = 1e-8
_MIN_MASS = 1e-8
_RHO_A_GUARD = 2e-8
#: Smallest variance of a direct forward message (a ReLU far in its flat part
#: has a variance that underflows; a point mass has no natural parameters).
_MIN_VAR = 1e-12
# Below this a variance has no finite reciprocal: such a marginal (ReLU deep in
# its flat part, a point mass at 0) is rejected, as a non-positive one is.
_INVERTIBLE_VAR = 1.0 / sys.float_info.max
# Relative tolerance of the forward guard rho_m >= 1/s2_z + rho_a (§5.6 (b)):
# where the tilted density lies wholly on z > 0 the two sides are equal in exact
# arithmetic (the marginal is the product of the two Gaussians), and rounding
# alone decided between the exact message and the direct fallback (69% of such
# units fell back; the CPU kernel and the array path then differed by 1e-3).
# Within the band below the bound the message is z's own, the exact one there,
# as wherever rounding makes rho_m - rho_a fall below 1/s2_z (rho_a >> 1/s2_z).
_TIE_RTOL = 64 * sys.float_info.epsilon


def leaky_relu_tilted(z_mean, z_var, tau_a, rho_a, alpha):
    """The two truncated parts of ``N(z; mu_z, s2_z) N(phi(z); mu_a, s2_a)`` (§5.6).

    Parameters
    ----------
    z_mean, z_var : array_like
        Forward message of ``z`` (``z_var > 0``).
    tau_a, rho_a : array_like
        Backward message of ``a``; must have ``rho_a > 0`` (callers mask the
        others, where the tilted density is not normalisable).
    alpha : float
        Negative slope, ``>= 0``.

    Returns
    -------
    log_w : array of shape (2, ...)
        Log masses ``log int_{z>0} t`` and ``log int_{z<0} t``.
    mean, var : arrays of shape (2, ...)
        Mean and variance of ``z`` in each part.
    """
    xp = array_namespace(z_mean, z_var, tau_a, rho_a)
    tau_z = z_mean / z_var
    rho_z = 1.0 / z_var
    a_mean = tau_a / rho_a
    a_var = 1.0 / rho_a
    # z > 0: phi(z) = z.
    rho_p = rho_z + rho_a
    m_p = (tau_z + tau_a) / rho_p
    lm_p, e_p, v_p = truncated_gaussian_moments(m_p, 1.0 / rho_p)
    lw_p = product_normalizer_log(z_mean, z_var, a_mean, a_var) + lm_p
    # z < 0: phi(z) = alpha z, N(alpha z; mu_a, s2_a) = G(z; alpha tau_a, alpha^2 rho_a);
    # reflected (u = -z) to use the truncation to u > 0.
    rho_n = rho_z + alpha * alpha * rho_a
    m_n = (tau_z + alpha * tau_a) / rho_n
    lm_n, e_n, v_n = truncated_gaussian_moments(-m_n, 1.0 / rho_n)
    lw_n = product_normalizer_log(alpha * z_mean, alpha * alpha * z_var, a_mean, a_var) + lm_n
    return xp.stack([lw_p, lw_n]), xp.stack([e_p, -e_n]), xp.stack([v_p, v_n])


def leaky_relu_forward_direct(z_mean, z_var, alpha):
    """Direct forward message: the moments of ``phi(Z)``, ``Z ~ N(mu_z, s2_z)`` (§5.6 (a)).

    Used at prediction time (§9) and as the fallback of :func:`leaky_relu_forward`.

    Returns
    -------
    mean, var : arrays
        ``var`` is floored at 1e-12 so that the message has natural parameters.
    """
    xp = array_namespace(z_mean, z_var)
    mean, var, _ = leaky_relu_moments(z_mean, z_var, alpha)
    return mean, xp.maximum(var, _MIN_VAR)


def _mixture_weights(xp, log_w):
    log_m0 = xp.max(log_w, axis=0)
    finite = xp.isfinite(log_m0)
    w = xp.exp(log_w - xp.where(finite, log_m0, 0.0))
    # log m0 = max + log(sum of scaled weights)
    log_m0 = xp.where(finite, log_m0 + xp.log(xp.sum(w, axis=0)), -math.inf)
    return w, log_m0, finite


def _safe_backward(xp, tau_a, rho_a):
    """Where the backward message is usable (rho_a > 0), and safe stand-ins elsewhere."""
    ok = (rho_a > 0) & xp.isfinite(rho_a) & xp.isfinite(tau_a)
    return ok, xp.where(ok, tau_a, 0.0), xp.where(ok, rho_a, 1.0)


def leaky_relu_forward(z_mean, z_var, tau_a, rho_a, alpha):
    """Forward message ``m_{f->a}`` by marginal approximation, with guards (§5.6 (b)).

    The marginal of ``a`` is moment-matched to the tilted density (see the
    module docstring) and divided by the backward message ``G(tau_a, rho_a)``.
    Guards (§5.6, §8 item 2): the direct message (:func:`leaky_relu_forward_direct`)
    is used instead wherever the backward message is ``G(0, 0)`` (first pass),
    the normaliser ``m0 <= 1e-8``, a result is not finite, or the marginal
    precision is below ``rho_z + rho_a`` (the new message would be less precise
    than the incoming forward message of ``z``).

    Parameters
    ----------
    z_mean, z_var : array_like
        Forward message of ``z``.
    tau_a, rho_a : array_like
        Backward message of ``a`` (``G(0, 0)`` allowed).
    alpha : float
        Negative slope.

    Returns
    -------
    mean, var : arrays
        Moments of the forward message of ``a`` (``var > 0``).
    used_marginal : bool array
        Where the marginal approximation was accepted.
    """
    xp = array_namespace(z_mean, z_var, tau_a, rho_a)
    d_mean, d_var = leaky_relu_forward_direct(z_mean, z_var, alpha)
    ok, tau_s, rho_s = _safe_backward(xp, tau_a, rho_a)
    log_w, mean, var = leaky_relu_tilted(z_mean, z_var, tau_s, rho_s, alpha)
    # a = z on the positive side, a = alpha z on the negative side.
    scale = xp.stack([xp.ones_like(z_mean), alpha + 0.0 * z_mean])
    w, log_m0, finite = _mixture_weights(xp, log_w)
    m_mean, m_var = moment_match_mixture(w, scale * mean, scale * scale * var, axis=0)
    invertible = m_var > _INVERTIBLE_VAR
    rho_m = 1.0 / xp.where(invertible, m_var, 1.0)
    tau_m = m_mean * rho_m
    rho_z = 1.0 / z_var
    # An accepted message is at least as precise as z's own in exact arithmetic;
    # below that it is rounding (the tie band, or rho_m - rho_a when rho_a >> rho_z)
    tie = rho_m - rho_s < rho_z
    rho_msg = xp.where(tie, rho_z, rho_m - rho_s)
    tau_msg = xp.where(tie, z_mean * rho_z, tau_m - tau_s)
    accept = (
        ok
        & finite
        & (log_m0 > math.log(_MIN_MASS))
        & invertible
        & xp.isfinite(rho_m - rho_s)
        & xp.isfinite(tau_m - tau_s)
        & (rho_m >= (rho_z + rho_s) * (1.0 - _TIE_RTOL))
    )
    rho_safe = xp.where(accept, rho_msg, 1.0)
    m_acc = tau_msg / rho_safe
    v_acc = 1.0 / rho_safe
    accept = accept & xp.isfinite(m_acc) & (v_acc > 0) & xp.isfinite(v_acc)
    mean_out = xp.where(accept, m_acc, d_mean)
    var_out = xp.where(accept, v_acc, d_var)
    return mean_out, var_out, accept


def leaky_relu_backward(z_mean, z_var, tau_a, rho_a, alpha, *, eps=EPS):
    """Backward message ``m_{f->z}`` by marginal approximation, with guards (§5.6 (c)).

    The marginal of ``z`` is moment-matched to the tilted density and divided by
    the forward message ``N(mu_z, s2_z)``.  Guards (§5.6 (c), §8 items 2-3):

    * the marginal precision is raised to at least ``rho_z + eps``, so the
      message precision is at least ``eps``;
    * where anything is not finite, or the backward message is uninformative
      (``rho_a == 0``, or ``tau_a < 0`` with ``rho_a < 2e-8``), the message is
      ``G(0, 0)``;
    * finally ``min_rho(., eps)``.

    Parameters
    ----------
    z_mean, z_var : array_like
        Forward message of ``z``.
    tau_a, rho_a : array_like
        Backward message of ``a``.
    alpha : float
        Negative slope.
    eps : float, default=1e-8

    Returns
    -------
    tau, rho : arrays
        The message to ``z``; ``rho >= eps``.
    """
    xp = array_namespace(z_mean, z_var, tau_a, rho_a)
    ok, tau_s, rho_s = _safe_backward(xp, tau_a, rho_a)
    ok = ok & ~((tau_a < 0) & (rho_a < _RHO_A_GUARD))
    log_w, mean, var = leaky_relu_tilted(z_mean, z_var, tau_s, rho_s, alpha)
    w, _, finite = _mixture_weights(xp, log_w)
    m_mean, m_var = moment_match_mixture(w, mean, var, axis=0)
    rho_z = 1.0 / z_var
    tau_z = z_mean * rho_z
    rho_m = xp.maximum(rho_z + eps, 1.0 / xp.where(m_var > 0, m_var, math.inf))
    tau_m = m_mean * rho_m
    tau, rho = tau_m - tau_z, rho_m - rho_z
    good = ok & finite & xp.isfinite(tau) & xp.isfinite(rho)
    tau = xp.where(good, tau, 0.0)
    rho = xp.where(good, rho, 0.0)
    return min_precision(tau, rho, eps)
