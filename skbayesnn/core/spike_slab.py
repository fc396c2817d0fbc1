"""Spike-and-slab messages: projection, linear layer and ReLU (pbp.md §6.2-§6.4).

A spike-and-slab message is the distribution

.. math::

    \\tilde q(z) = (1 - \\rho)\\, \\delta_0(z) + \\rho\\, N(z \\mid \\tilde m, \\tilde v),

a point mass at 0 of weight ``1 - rho`` and a (non-truncated) Gaussian slab of
weight ``rho`` (pbp.md §6.2).  It is the message family of spike-and-slab PBP
(SSPBP); nothing here is specific to PBP, so the functions live in the core.

Every function is a pure function of arrays of the namespace of its inputs
(NumPy, CuPy or the test suite's strict namespace, found with
:func:`~skbayesnn._backend.array_namespace`), computes in float64, and, like
:mod:`skbayesnn.core.activations`, evaluates both branches of every
``xp.where`` on safe arguments, so that no finite input gives a floating-point
warning, NaN or infinity.

Contents

* :func:`spike_slab_project` -- KL projection onto the family from
  ``P(Z != 0)``, ``E[Z]``, ``Var[Z]`` (pbp.md §6.2), and its inverse
  :func:`spike_slab_moments`;
* :func:`slab_probability` -- ``1 - prod_i (1 - rho_i)``, the slab probability
  of a linear layer's output (pbp.md §6.3), and :func:`slab_probability_grad`,
  its gradient ``prod_{k != i} (1 - rho_k)`` by prefix/suffix products;
* :func:`spike_slab_linear` -- the linear layer with independent spike-and-slab
  inputs (pbp.md §6.3, eq. 3.4);
* :func:`rectified_slab` -- everything about ``ReLU(X)``, ``X ~ N(m, v)`` that
  the ReLU of a spike-and-slab and its gradients need (truncated-normal
  moments, ``Phi``, ``phi/sigma``...), and :func:`spike_slab_relu`, the ReLU of
  a spike-and-slab message (pbp.md §6.4).
"""

from __future__ import annotations

from typing import NamedTuple

from .._backend import array_namespace, special
from .activations import inverse_mills_ratio, standardized_mean
from .gaussian import _TRUNC_MEAN_SERIES, _TRUNC_VAR_SERIES, _horner
from .linear import linear_moments

__all__ = [
    "RectifiedSlab",
    "spike_slab_project",
    "spike_slab_moments",
    "slab_probability",
    "slab_probability_grad",
    "spike_slab_linear",
    "rectified_slab",
    "spike_slab_relu",
]

# The standardised mean is clipped by core.activations.standardized_mean.
# For a = mean/std < -_A_SERIES the truncated-normal moments come from their
# asymptotic series in x = 1/a^2 (below).  The closed forms a + gamma and
# 1 - gamma (a + gamma) cancel for a << 0: relative errors ~eps a^2 and ~eps a^4
# (5e-14 and 1e-11 at a = -15), whereas the series below are accurate to ~1e-16
# for every a <= -15 (checked against 50-digit arithmetic, and in the tests
# against quadrature).  The series make the slab of a rectified message exact
# even where its weight rho Phi(a) underflows, for any finite a.
_A_SERIES = 15.0


def _as_float(xp, x):
    return xp.asarray(x, dtype=xp.float64)


# ---------------------------------------------------------------------------
# the message family (pbp.md §6.2)
# ---------------------------------------------------------------------------


def spike_slab_project(p_nonzero, mean, var):
    """KL projection onto ``(1 - rho) delta_0 + rho N(m~, v~)`` (pbp.md §6.2).

    Minimising ``KL(p || q~)`` over the family matches ``P(Z != 0)``, ``E[Z]`` and
    ``Var[Z]``:

    ``rho = P(Z != 0)``, ``m~ = E[Z] / rho``, ``v~ = Var[Z] / rho - (1 - rho) m~^2``.

    Parameters
    ----------
    p_nonzero : array-like
        ``P(Z != 0)``, in ``[0, 1]``.
    mean, var : array-like
        ``E[Z]`` and ``Var[Z]`` (broadcast with ``p_nonzero``).

    Returns
    -------
    rho, slab_mean, slab_var : arrays of the broadcast shape
        ``rho`` is ``p_nonzero`` (a float64 copy).  ``slab_var`` is floored at 0:
        for a valid distribution ``Var[Z] >= rho (1 - rho) m~^2`` (Jensen on
        ``Z | Z != 0``), so only rounding can make it negative.  Where
        ``rho == 0`` the slab carries no mass and ``(0, 0)`` is returned.
    """
    xp = array_namespace(p_nonzero, mean, var)
    rho, mean, var = xp.broadcast_arrays(
        _as_float(xp, p_nonzero), _as_float(xp, mean), _as_float(xp, var)
    )
    has_slab = rho > 0
    rho_safe = xp.where(has_slab, rho, 1.0)
    slab_mean = xp.where(has_slab, mean / rho_safe, 0.0)
    slab_var = var / rho_safe - (1.0 - rho) * (slab_mean * slab_mean)
    slab_var = xp.where(has_slab, xp.maximum(slab_var, 0.0), 0.0)
    return rho + 0.0, slab_mean, slab_var


def spike_slab_moments(rho, slab_mean, slab_var):
    """Mean and variance of ``(1 - rho) delta_0 + rho N(slab_mean, slab_var)``.

    ``E[Z] = rho m~`` and ``Var[Z] = rho (m~^2 + v~) - rho^2 m~^2``, evaluated as
    ``rho v~ + rho (1 - rho) m~^2`` (non-negative terms, no cancellation).  The
    inverse of :func:`spike_slab_project`.

    Parameters
    ----------
    rho, slab_mean, slab_var : array-like
        Broadcast together; ``0 <= rho <= 1``, ``slab_var >= 0``.

    Returns
    -------
    mean, var : arrays of the broadcast shape
    """
    xp = array_namespace(rho, slab_mean, slab_var)
    rho = _as_float(xp, rho)
    slab_mean = _as_float(xp, slab_mean)
    slab_var = _as_float(xp, slab_var)
    mean = rho * slab_mean
    var = rho * slab_var + rho * (1.0 - rho) * (slab_mean * slab_mean)
    return mean, var


# ---------------------------------------------------------------------------
# linear layer (pbp.md §6.3)
# ---------------------------------------------------------------------------


def slab_probability(rho):
    """``1 - prod_i (1 - rho_i)`` over the last axis (pbp.md §6.3).

    With independent inputs ``z_i`` and continuous weights, the linear output
    ``sum_i w_i z_i`` is 0 exactly when every input is, so its slab probability
    is this scalar (the same for every output unit).

    Evaluated as ``-expm1(sum_i log1p(-rho_i))``, which keeps full relative
    accuracy when every ``rho_i`` is tiny (``1 - prod`` would cancel), and as
    exactly 1 when some ``rho_i == 1`` (a bias input, pbp.md §6.6).

    Parameters
    ----------
    rho : array of shape (..., n_in)
        Slab probabilities of the inputs, in ``[0, 1]``.

    Returns
    -------
    rho_lin : array of shape (...,)
    """
    xp = array_namespace(rho)
    rho = _as_float(xp, rho)
    is_one = rho >= 1.0
    log_spike = xp.where(is_one, 0.0, xp.log1p(-xp.where(is_one, 0.0, rho)))
    rho_lin = -xp.expm1(xp.sum(log_spike, axis=-1))
    return xp.where(xp.any(is_one, axis=-1), 1.0, rho_lin)


def slab_probability_grad(rho):
    """Gradient of :func:`slab_probability`: ``prod_{k != i} (1 - rho_k)``.

    Computed with exclusive prefix and suffix products of ``1 - rho``, without
    division, so that a factor ``1 - rho_k = 0`` (a bias unit) gives exactly 0
    for every ``i != k``.

    Parameters
    ----------
    rho : array of shape (..., n_in)

    Returns
    -------
    grad : array of shape (..., n_in)
        ``d rho_lin / d rho_i``.
    """
    xp = array_namespace(rho)
    spike = 1.0 - _as_float(xp, rho)
    one = xp.ones(spike.shape[:-1] + (1,), dtype=xp.float64)
    before = xp.concatenate([one, xp.cumprod(spike, axis=-1)[..., :-1]], axis=-1)
    after_incl = xp.flip(xp.cumprod(xp.flip(spike, axis=-1), axis=-1), axis=-1)
    after = xp.concatenate([after_incl[..., 1:], one], axis=-1)
    return before * after


def spike_slab_linear(rho, slab_mean, slab_var, w_mean, w_var):
    """Linear layer ``h = W z`` with independent spike-and-slab inputs (pbp.md §6.3).

    ``z_i ~ (1 - rho_i) delta_0 + rho_i N(m~_i, v~_i)`` independent, ``W_ji ~
    N(M_ji, V_ji)`` independent.  The output's slab probability is
    ``rho_lin = 1 - prod_i (1 - rho_i)`` (:func:`slab_probability`), and its
    mean and variance are exactly PBP's linear moments of the inputs' total
    moments ``E[z_i] = rho_i m~_i``, ``Var z_i = rho_i (m~_i^2 + v~_i) - rho_i^2
    m~_i^2`` (:func:`~skbayesnn.core.linear.linear_moments`): eq. 3.4,
    ``c_j = V (rho m~^2) + (M o M)(rho v~) + V (rho v~) + (M o M)(rho (1-rho) m~^2)``,
    is ``V E[z]^2 + (M o M + V) Var z`` term by term (pbp.md §15 items 4 and 6).
    The output message is their projection (:func:`spike_slab_project`).

    A bias is an input with ``rho = 1``, ``m~ = 1``, ``v~ = 0``; it makes
    ``rho_lin = 1`` (pbp.md §6.6).  PBP's input scaling ``sqrt(s)`` is folded
    into ``w_mean`` (times ``sqrt(s)``) and ``w_var`` (times ``s``) by the caller.

    Parameters
    ----------
    rho, slab_mean, slab_var : arrays of shape (..., n_in)
    w_mean, w_var : arrays of shape (n_out, n_in)

    Returns
    -------
    rho_lin : array of shape (...,)
        The output's slab probability, shared by all output units.
    slab_mean, slab_var : arrays of shape (..., n_out)
    """
    xp = array_namespace(rho, slab_mean, slab_var, w_mean, w_var)
    in_mean, in_var = spike_slab_moments(rho, slab_mean, slab_var)
    h_mean, h_var = linear_moments(in_mean, in_var, _as_float(xp, w_mean), _as_float(xp, w_var))
    rho_lin = slab_probability(rho)
    _, out_mean, out_var = spike_slab_project(rho_lin[..., None], h_mean, h_var)
    return rho_lin, out_mean, out_var


# ---------------------------------------------------------------------------
# ReLU (pbp.md §6.4)
# ---------------------------------------------------------------------------


class RectifiedSlab(NamedTuple):
    """What :func:`rectified_slab` computes about ``ReLU(X)``, ``X ~ N(m, v)``.

    ``alpha = m / sqrt(v)`` clipped to ``[-50, 50]`` (``+-50`` by the sign of
    ``m`` where ``v == 0``, ``m == 0`` counting as negative, as in
    core.activations); ``cdf = Phi(alpha)`` and ``ccdf = Phi(-alpha)``;
    ``pdf_over_std = phi(alpha) / sqrt(v)`` (0 where ``v == 0``);
    ``cdf_dvar = d Phi(m / sqrt(v)) / dv = -phi(alpha) alpha / (2 v)`` (0 where
    ``v == 0``); ``trunc_mean``, ``trunc_var``: mean and variance of ``X | X > 0``
    (``(max(m, 0), 0)`` where ``v == 0``); ``relu_mean``, ``relu_var``: mean and
    variance of ``ReLU(X)``.
    """

    std: object
    alpha: object
    cdf: object
    ccdf: object
    pdf_over_std: object
    cdf_dvar: object
    trunc_mean: object
    trunc_var: object
    relu_mean: object
    relu_var: object


def rectified_slab(slab_mean, slab_var):
    """The rectified Gaussian ``ReLU(X)``, ``X ~ N(m, v)``, as spike and truncated slab.

    ``ReLU(X)`` is 0 with probability ``Phi(-alpha)`` and otherwise distributed as
    ``X | X > 0``, whose mean and variance are (pbp.md §6.4)

    ``trunc_mean = m + sqrt(v) gamma``, ``trunc_var = v (1 - gamma (alpha + gamma))``

    with ``alpha = m / sqrt(v)`` and the inverse Mills ratio
    ``gamma = phi(alpha) / Phi(alpha)``.  For ``alpha < 0``, ``gamma`` is
    ``sqrt(2/pi) / erfcx(-alpha/sqrt(2))`` (no underflow, as core.activations),
    ``trunc_mean`` is evaluated as ``sqrt(v) (alpha + gamma)`` (both factors
    positive), and for ``alpha < -15`` both moments come from their asymptotic
    series in ``1/alpha^2`` (``alpha + gamma = -1/alpha + 2/alpha^3 - ...``,
    ``1 - gamma (alpha + gamma) = 1/alpha^2 - 6/alpha^4 + ...``), which avoid the
    cancellation of the closed forms, so the truncated slab is accurate for any
    finite input -- also where its weight ``Phi(alpha)`` underflows.

    Parameters
    ----------
    slab_mean, slab_var : array-like
        ``m`` and ``v`` (broadcast together; negative variances count as 0).

    Returns
    -------
    RectifiedSlab
        Arrays of the broadcast shape.  ``relu_mean = Phi trunc_mean`` and
        ``relu_var = Phi trunc_var + Phi Phi(-alpha) trunc_mean^2`` (spike plus
        truncated normal, pbp.md §2.2), evaluated as ``v`` times a factor
        clipped to ``[0, 1]`` so that it cannot overflow.
    """
    xp = array_namespace(slab_mean, slab_var)
    sp = special(xp)
    mean, var = xp.broadcast_arrays(_as_float(xp, slab_mean), _as_float(xp, slab_var))
    var = xp.maximum(var, 0.0)
    std = xp.sqrt(var)
    alpha, pos, std_safe = standardized_mean(xp, mean, std)
    var_safe = xp.where(pos, var, 1.0)
    cdf = sp.ndtr(alpha)
    ccdf = sp.ndtr(-alpha)
    pdf = sp.norm_pdf(alpha)
    pdf_over_std = xp.where(pos, pdf / std_safe, 0.0)
    cdf_dvar = xp.where(pos, -0.5 * (pdf * alpha) / var_safe, 0.0)

    # Three branches for the standardised truncated moments u = (E[X|X>0]) / std
    # (= alpha + gamma) and f = Var[X|X>0] / v (= 1 - gamma (alpha + gamma)).
    series = pos & (mean < -_A_SERIES * std)
    negative = alpha < 0
    # (i) -_A_SERIES <= alpha < 0: gamma through erfcx.
    a_neg = xp.clip(alpha, -_A_SERIES, 0.0)
    gamma_neg = inverse_mills_ratio(xp, a_neg)
    u_neg = a_neg + gamma_neg
    f_neg = xp.clip(1.0 - gamma_neg * u_neg, 0.0, 1.0)
    # (ii) alpha < -_A_SERIES: asymptotic series; q = 1/c = std/|m| from the
    # unclipped mean, so the result does not depend on the clip of alpha.
    q = xp.where(series, std / xp.where(series, -mean, 1.0), 0.0)
    x = q * q
    u_ser = q * _horner(_TRUNC_MEAN_SERIES, x)
    f_ser = x * _horner(_TRUNC_VAR_SERIES, x)
    # (iii) alpha >= 0: Phi(alpha) >= 1/2, gamma = phi/Phi directly.
    a_pos = xp.maximum(alpha, 0.0)
    gamma_pos = inverse_mills_ratio(xp, a_pos)
    u_pos = a_pos + gamma_pos
    f_pos = xp.clip(1.0 - gamma_pos * u_pos, 0.0, 1.0)

    u = xp.where(series, u_ser, xp.where(negative, u_neg, u_pos))
    f = xp.where(series, f_ser, xp.where(negative, f_neg, f_pos))
    # For alpha >= 0 use m + std gamma (no cancellation); for alpha < 0, std u.
    # Where v == 0 this gives max(m, 0): u_pos * 0 = 0 and m + 0.
    trunc_mean = xp.where(negative, std * u, mean + std * gamma_pos)
    trunc_var = var * f
    relu_mean = cdf * trunc_mean
    # Var ReLU(X) = v Phi [f + Phi(-alpha) u^2], the factor in [0, 1] (ReLU is
    # 1-Lipschitz); clipping only removes rounding (as core.activations).
    relu_var = var * xp.clip(cdf * (f + ccdf * (u * u)), 0.0, 1.0)
    return RectifiedSlab(
        std, alpha, cdf, ccdf, pdf_over_std, cdf_dvar, trunc_mean, trunc_var, relu_mean, relu_var
    )


def spike_slab_relu(rho, slab_mean, slab_var):
    """ReLU of a spike-and-slab message, projected back onto the family (pbp.md §6.4).

    ``ReLU((1 - rho) delta_0 + rho N(m~, v~))`` is 0 with probability
    ``1 - rho Phi(alpha)`` and otherwise a normal truncated to ``(0, inf)``; its
    KL projection (:func:`spike_slab_project`) keeps the spike and replaces the
    truncated normal by the Gaussian with its mean and variance:

    ``rho' = rho Phi(alpha)``, ``m' = m~ + sqrt(v~) gamma``,
    ``v' = v~ (1 - gamma alpha - gamma^2)``,

    ``alpha = m~ / sqrt(v~)``, ``gamma = phi(alpha) / Phi(alpha)`` (evaluated
    stably by :func:`rectified_slab`).

    Parameters
    ----------
    rho, slab_mean, slab_var : array-like
        Broadcast together; ``0 <= rho <= 1``.

    Returns
    -------
    rho_out, slab_mean_out, slab_var_out : arrays of the broadcast shape
        Finite for every finite input.  Where ``v~ == 0`` the ReLU is
        deterministic: ``rho' = rho`` and slab ``(m~, 0)`` if ``m~ > 0``, else
        ``rho' = 0`` and slab ``(0, 0)``.
    """
    xp = array_namespace(rho, slab_mean, slab_var)
    r = rectified_slab(slab_mean, slab_var)
    return _as_float(xp, rho) * r.cdf, r.trunc_mean, r.trunc_var
