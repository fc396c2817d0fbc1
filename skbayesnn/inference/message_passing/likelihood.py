"""Output factors: Gaussian regression and the three classification factors (§3.3, §5.8-5.11).

Stateless batch functions; ``mean``, ``var`` are the forward messages of the
output units (shape ``(n, n_outputs)``), labels are integer class indices.
Backward messages are natural parameters ``(tau, rho)``.
"""

from __future__ import annotations

import math

from sklearn import get_config
from sklearn.utils import gen_batches

from ..._backend import array_namespace, special
from ...core.gaussian import (
    gaussian_division,
    moments_to_natural,
    to_natural,
    truncated_gaussian_moments,
    weighted_sum_backward,
)
from ...core.propagate import probit_proba

__all__ = [
    "regression_backward",
    "regression_predict",
    "argmax_proba",
    "argmax_backward",
    "softmax_proba",
    "softmax_backward",
    "one_hot",
]

#: Extra pairwise noise variance of the argmax factor (§5.11, code value 0.3).
ARGMAX_NOISE = 0.3
#: Variance of the optional one-hot regularising factors N(+-1, gamma^2) (§5.11).
ARGMAX_REG_VAR = 0.1


def one_hot(labels, n_classes, xp):
    """``(n, n_classes)`` float64 one-hot rows of integer ``labels``."""
    return (xp.asarray(labels)[:, None] == xp.arange(n_classes)[None, :]).astype(xp.float64)


# ----------------------------------------------------------------------------
# regression (§5.8)
# ----------------------------------------------------------------------------
def regression_backward(y, noise_var):
    """Backward message of the factor ``N(a; y, beta^2)``: ``G(y / beta^2, 1 / beta^2)`` (§5.8).

    Parameters
    ----------
    y : array of shape (n, n_outputs)
        Targets.
    noise_var : float or array
        ``beta^2 > 0``.

    Returns
    -------
    tau, rho : arrays of shape (n, n_outputs)
    """
    xp = array_namespace(y)
    tau, rho = to_natural(y, noise_var + 0.0 * y)
    return tau, xp.broadcast_to(rho, tau.shape) + 0.0


def regression_predict(mean, var, noise_var):
    """Predictive ``N(mu, s2 + beta^2)``, returned as its parts ``(mu, s2, beta^2)`` (§9)."""
    xp = array_namespace(mean, var)
    return mean, var, xp.full(mean.shape, float(noise_var))


# ----------------------------------------------------------------------------
# argmax (§5.11)
# ----------------------------------------------------------------------------
def argmax_proba(mean, var, noise_var=ARGMAX_NOISE):
    """Class probabilities of the argmax factor, pairwise-probit product (§5.11).

    ``P(c) propto prod_{d != c} Phi((mu_c - mu_d) / sqrt(s2_c + s2_d + s^2))``,
    normalised over the classes; computed with log-cdfs.  The pairwise terms
    take ``(rows, K, K)`` arrays, so the rows go in chunks that fit
    scikit-learn's ``working_memory`` (``sklearn.set_config``).

    Parameters
    ----------
    mean, var : arrays of shape (n, K)
    noise_var : float, default=0.3
        The extra pairwise noise ``s^2`` of the paper's code.

    Returns
    -------
    proba : array of shape (n, K)
    """
    xp = array_namespace(mean, var)
    n, k = mean.shape
    # four float64 (K, K) temporaries per row
    rows = max(1, int(get_config()["working_memory"] * 2**20) // (32 * k * k))
    if n <= rows:
        return _argmax_proba_rows(xp, mean, var, noise_var)
    return xp.concatenate(
        [_argmax_proba_rows(xp, mean[s], var[s], noise_var) for s in gen_batches(n, rows)]
    )


def _argmax_proba_rows(xp, mean, var, noise_var):
    sp = special(xp)
    diff = mean[:, :, None] - mean[:, None, :]
    scale = xp.sqrt(var[:, :, None] + var[:, None, :] + noise_var)
    log_pair = sp.log_ndtr(diff / scale)
    k = mean.shape[1]
    eye = xp.eye(k, dtype=bool)[None, :, :]
    log_p = xp.sum(xp.where(eye, 0.0, log_pair), axis=2)
    log_p = log_p - xp.max(log_p, axis=1, keepdims=True)
    p = xp.exp(log_p)
    return p / xp.sum(p, axis=1, keepdims=True)


def argmax_backward(
    mean, var, labels, *, noise_var=ARGMAX_NOISE, regularize=False, reg_var=ARGMAX_REG_VAR
):
    """Backward messages of the argmax factor ``c = argmax(a)`` (§5.11, corrected per §14 item 5).

    For the label ``c`` and every ``i != c``: the latent ``z_i = a_c - a_i`` gets
    the forward message ``F_i = N(mu_c - mu_i, s2_c + s2_i + s^2)``; the indicator
    ``1{z_i >= 0}`` sends ``B_i = TruncMM(F_i) / F_i``; ``B_i`` goes back through
    the weighted sum (§5.1) to ``a_c`` (coefficient +1; the product over ``i``)
    and to ``a_i`` (coefficient -1), whose precision is then scaled by the
    satisfaction probability ``Phi((mu_c - mu_i) / sqrt(s2_c + s2_i + s^2))``
    (keeping the mean).  With ``regularize`` every message is multiplied by the
    one-hot factor ``N(a; +1 if i == c else -1, gamma^2)``.

    Parameters
    ----------
    mean, var : arrays of shape (n, K)
        Forward messages of the logits.
    labels : int array of shape (n,)
    noise_var : float, default=0.3
    regularize : bool, default=False
    reg_var : float, default=0.1
        ``gamma^2``.

    Returns
    -------
    tau, rho : arrays of shape (n, K)
        ``rho >= 0``.
    """
    xp = array_namespace(mean, var)
    sp = special(xp)
    k = mean.shape[1]
    hot = one_hot(labels, k, xp)
    is_c = hot > 0
    mu_c = xp.sum(mean * hot, axis=1, keepdims=True)
    v_c = xp.sum(var * hot, axis=1, keepdims=True)
    f_mean = mu_c - mean
    f_var = v_c + var + noise_var
    # Truncation 1{z >= 0}, moment matched (§5.11 step 2), divided by F.
    _, t_mean, t_var = truncated_gaussian_moments(f_mean, f_var)
    tau_t, rho_t = to_natural(t_mean, t_var)
    tau_f, rho_f = to_natural(f_mean, f_var)
    tau_b, rho_b, _ = gaussian_division(tau_t, rho_t, tau_f, rho_f)
    # To a_c: exact sum backward, coefficient +1, summed over i != c (step 3).
    tau_ci, rho_ci = weighted_sum_backward(tau_b, rho_b, f_mean, f_var, 1.0, mu_c, v_c)
    off = ~is_c
    tau_c = xp.sum(xp.where(off, tau_ci, 0.0), axis=1, keepdims=True)
    rho_c = xp.sum(xp.where(off, rho_ci, 0.0), axis=1, keepdims=True)
    # To a_i: coefficient -1 (step 4), precision scaled by P(a_c >= a_i).
    tau_i, rho_i = weighted_sum_backward(tau_b, rho_b, f_mean, f_var, -1.0, mean, var)
    sat = sp.ndtr(f_mean / xp.sqrt(f_var))
    tau_i, rho_i = tau_i * sat, rho_i * sat
    tau = xp.where(is_c, tau_c, tau_i)
    rho = xp.where(is_c, rho_c, rho_i)
    if regularize:
        target = xp.where(is_c, 1.0, -1.0)
        tau = tau + target / reg_var
        rho = rho + 1.0 / reg_var
    return tau, rho


# ----------------------------------------------------------------------------
# softmax (§5.9, §5.10)
# ----------------------------------------------------------------------------
def softmax_proba(mean, var):
    """Probit-softmax probabilities ``softmax(mu / sqrt(1 + pi s2 / 8))`` (§5.9, §14 item 3)."""
    return probit_proba(mean, var)


def _logsumexp(xp, x, axis):
    m = xp.max(x, axis=axis, keepdims=True)
    return xp.squeeze(m, axis=axis) + xp.log(xp.sum(xp.exp(x - m), axis=axis))


def softmax_backward(mean, var, labels, *, n_grid=401, width=8.0, min_mass=1e-12):
    """Backward messages of the softmax factor ``p(c | a) = softmax(a)_c`` (§5.10).

    For each logit ``d`` the marginal approximation needs
    ``m_k = int a^k N(a; mu_d, s2_d) g_d(a) da`` with
    ``g_d(a) = softmax(t_1, .., a, .., t_K)_c`` (slot ``d`` holds ``a``, the
    others their probit-scaled means ``t_j = mu_j / sqrt(1 + pi s2_j / 8)``).
    ``g_d`` is a logistic step in ``a`` located at
    ``kappa_d = log sum_{j != d} exp(t_j)``, of width ~1.  The integral is taken
    by the trapezoidal rule on the union of two uniform grids of ``n_grid``
    points: ``mu_d +- width s_d`` (the Gaussian) and ``kappa_d +- 20`` clipped to
    it (the step), evaluated in log space (log-sum-exp, §8 item 7).  The
    message is the moment-matched marginal divided by the forward message,
    ``G(0, 0)`` where ``m0 < min_mass`` (relative to the Gaussian mass) and
    with the safe division of §1 (tolerance 0.1: a precision in ``[-0.1, 0]``
    is clamped to 0, the natural mean kept; below, ``G(0, 0)``).

    Parameters
    ----------
    mean, var : arrays of shape (n, K)
        Forward messages of the logits.
    labels : int array of shape (n,)
    n_grid : int, default=401
    width : float, default=8.0
        Half width of the Gaussian grid in standard deviations.
    min_mass : float, default=1e-12

    Returns
    -------
    tau, rho : arrays of shape (n, K)
    """
    xp = array_namespace(mean, var)
    n, k = mean.shape
    hot = one_hot(labels, k, xp) > 0
    t = mean / xp.sqrt(1.0 + (math.pi / 8.0) * var)
    std = xp.sqrt(var)
    # kappa_d = log sum_{j != d} exp(t_j)
    eye = xp.eye(k, dtype=bool)[None, :, :]
    t_rows = xp.where(eye, -math.inf, t[:, None, :])  # (n, d, j) with j != d
    kappa = _logsumexp(xp, t_rows, axis=2)
    lo = mean - width * std
    hi = mean + width * std
    u = xp.linspace(0.0, 1.0, n_grid)
    g1 = lo[..., None] + (hi - lo)[..., None] * u
    k_lo = xp.clip(kappa - 20.0, lo, hi)
    k_hi = xp.clip(kappa + 20.0, lo, hi)
    g2 = k_lo[..., None] + (k_hi - k_lo)[..., None] * u
    grid = xp.sort(xp.concatenate([g1, g2], axis=-1), axis=-1)  # (n, K, G)
    # log g_d(a): slot d replaced by a.  For d == c: a - logaddexp(a, kappa_d);
    # for d != c: t_c - logaddexp(a, kappa_d) (kappa_d includes t_c).
    t_c = xp.sum(xp.where(hot, t, 0.0), axis=1, keepdims=True)
    num = xp.where(hot[..., None], grid, t_c[..., None] + 0.0 * grid)
    log_g = num - xp.logaddexp(grid, kappa[..., None])
    z = (grid - mean[..., None]) / std[..., None]
    dens = xp.exp(-0.5 * z * z + log_g) / (math.sqrt(2.0 * math.pi) * std[..., None])
    da = xp.diff(grid, axis=-1)

    def trap(f):
        return xp.sum(0.5 * (f[..., 1:] + f[..., :-1]) * da, axis=-1)

    m0 = trap(dens)
    centre = mean[..., None]
    m1c = trap(dens * (grid - centre))
    m2c = trap(dens * (grid - centre) ** 2)
    # Moments about mu_d (less cancellation), then shifted back.
    tau_m, rho_m, valid = moments_to_natural(m0, m1c, m2c, min_mass=min_mass)
    tau_m = tau_m + rho_m * mean
    tau_f, rho_f = to_natural(mean, var)
    # safe_division with tolerance 0.1 (§1, §8 item 7), as the kernel: a
    # precision in [-0.1, 0] is clamped to 0 and the natural mean kept (not
    # gaussian_division's neutral G(0, 0)).  A label logit far below the
    # others (p < 1e-7) gets a tilt exp(a) there, a push of one variance with
    # no precision, which quadrature noise puts on either side of 0; below
    # the band (or NaN), G(0, 0).
    d_rho = rho_m - rho_f
    keep = valid & (d_rho >= -0.1)
    return xp.where(keep, tau_m - tau_f, 0.0), xp.where(keep & (d_rho > 0.0), d_rho, 0.0)
