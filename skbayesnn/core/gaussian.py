"""Elementwise algebra of univariate Gaussians, on any array namespace.

Every function works elementwise on arrays of any shape (NumPy broadcasting) and
takes its namespace from its array arguments
(:func:`skbayesnn._backend.array_namespace`), so the same code runs on NumPy,
CuPy and the test-suite's strict namespace.  Integer inputs are promoted to
float64; floating arrays keep their dtype (float64 is the library default; a
float32 array stays float32, also next to Python scalars).

Contents
--------
* Natural parameters (message_passing.md §1): ``G(x; tau, rho)`` is the Gaussian
  with precision ``rho = 1/var`` and precision-mean ``tau = mean/var``.
  ``G(0, 0)`` is the improper uniform density, the neutral "no information"
  message.  :func:`to_natural`, :func:`from_natural`, :func:`gaussian_product`,
  :func:`gaussian_division` (with the ``safe_division`` guard),
  :func:`product_normalizer_log`, :func:`moments_to_natural`,
  :func:`min_precision` (``min_rho``), :func:`damp` (EMA) and
  :func:`moment_match_mixture`.
* The Gaussian multiplication approximation (GMA) of TAGI (tagi.md §2,
  Eqs. 3-6): :func:`product_mean`, :func:`product_var`,
  :func:`product_cross_cov`, :func:`product_product_cov`.

Numerical guards (message_passing.md §8)
----------------------------------------
No function divides by a value that may be zero or overflow: denominators are
masked with ``xp.where`` *before* dividing, so no floating-point warnings are
raised (CuPy has no ``errstate``, so the code must not rely on one).  A quotient
whose exact value exceeds the largest float is returned as ``+-inf``.
"""

from __future__ import annotations

import math

import numpy as np

from .._backend import array_namespace, special

__all__ = [
    "to_natural",
    "from_natural",
    "gaussian_product",
    "gaussian_division",
    "product_normalizer_log",
    "moments_to_natural",
    "min_precision",
    "damp",
    "moment_match_mixture",
    "weighted_sum_backward",
    "truncated_gaussian_moments",
    "product_mean",
    "product_var",
    "product_cross_cov",
    "product_product_cov",
]

_LOG_2PI = math.log(2.0 * math.pi)


# ----------------------------------------------------------------------------
# helpers
# ----------------------------------------------------------------------------
def _as_float(xp, *args):
    """Arrays of ``args`` in namespace ``xp``, all of one floating dtype.

    The dtype is that of the array arguments (Python scalars follow it, so a
    float32 array stays float32 next to a Python float); it is float64 when
    there are no array arguments or they are not floating.
    """
    arrays = [xp.asarray(a) for a in args]
    dtypes = [a.dtype for a, arg in zip(arrays, args) if not isinstance(arg, (int, float))]
    dtype = xp.result_type(*dtypes) if dtypes else xp.dtype(xp.float64)
    if dtype.kind != "f":
        dtype = xp.dtype(xp.float64)
    return [a if a.dtype == dtype else a.astype(dtype) for a in arrays]


def _float_max(xp, *arrays):
    """Largest finite value of the result dtype of ``arrays`` (a Python float)."""
    return float(xp.finfo(xp.result_type(*arrays)).max)


def _broadcast(xp, *arrays):
    """Broadcast to a common shape, returning writeable arrays (not read-only views)."""
    shapes = {a.shape for a in arrays}
    if len(shapes) == 1:
        return tuple(arrays)
    views = xp.broadcast_arrays(*arrays)
    return tuple(a if a.shape == b.shape else b.copy() for a, b in zip(arrays, views))


def _safe_ratio(xp, num, den):
    """``num / den`` without floating-point warnings (message_passing.md §8).

    Where the quotient is finite it is computed as usual.  Where ``den == 0`` or
    the exact quotient would overflow, the result is ``+-inf`` with the sign of
    ``num / den`` (``0`` when ``num == 0``).  ``inf / inf`` gives NaN.
    """
    big = _float_max(xp, num, den)
    anum = xp.abs(num)
    aden = xp.abs(den)
    # |num / den| > big  <=>  |num| > big * |den|; the right side cannot overflow
    # when |den| < 1 (clipped so that it is never evaluated above 1), and for
    # |den| >= 1 the quotient cannot overflow at all.
    overflow = (aden < 1.0) & (anum > xp.minimum(aden, 1.0) * big)
    both_inf = xp.isinf(anum) & xp.isinf(aden)
    bad = (den == 0) | overflow | both_inf
    q = num / xp.where(bad, 1.0, den)
    negative = (num < 0) != (den < 0)  # den == -0.0 counts as positive
    fill = xp.where(num == 0, 0.0, xp.where(negative, -math.inf, math.inf))
    fill = xp.where(both_inf, math.nan, fill).astype(q.dtype, copy=False)
    return xp.where(bad, fill, q)


# ----------------------------------------------------------------------------
# natural parameters (message_passing.md §1)
# ----------------------------------------------------------------------------
def to_natural(mean, var):
    """Natural parameters ``(tau, rho) = (mean / var, 1 / var)`` of ``N(mean, var)``.

    Parameters
    ----------
    mean : array_like
        Means.
    var : array_like
        Variances, ``> 0``; ``var = inf`` (no information) gives ``(0, 0)``, the
        improper uniform ``G(0, 0)`` (message_passing.md §1).  ``var = 0`` (a point
        mass) gives ``rho = inf`` and ``tau = +-inf`` (``0`` when ``mean == 0``);
        variances so small that ``1 / var`` overflows also give ``rho = inf``.

    Returns
    -------
    tau, rho : arrays
        Precision-mean and precision, broadcast to a common shape.
    """
    xp = array_namespace(mean, var)
    mean, var = _as_float(xp, mean, var)
    # tau = mean / var directly (one rounding, not mean * (1 / var)).
    rho = _safe_ratio(xp, xp.ones_like(var), var)
    tau = _safe_ratio(xp, mean, var)
    tau, rho = _broadcast(xp, tau, rho)
    return tau, rho


def from_natural(tau, rho):
    """Mean and variance ``(tau / rho, 1 / rho)`` of ``G(tau, rho)``.

    Parameters
    ----------
    tau : array_like
        Precision-means.
    rho : array_like
        Precisions.  ``rho == 0`` gives ``mean = 0`` and ``var = inf`` whatever
        ``tau`` is: ``G(tau, 0)`` is not normalisable and is read as the improper
        uniform ``G(0, 0)`` (message_passing.md §1: "mean = 0 when rho = 0").
        ``rho < 0`` (an improper message) gives the formal values
        ``tau / rho`` and a *negative* ``1 / rho``; guard such messages with
        :func:`gaussian_division` or :func:`min_precision` before reading them
        as densities.  ``rho = inf`` (a point mass) gives ``var = 0`` and, as
        ``tau`` is then ``+-inf`` or ``0`` (:func:`to_natural`), a NaN mean
        where ``tau`` is infinite: natural parameters do not keep a point
        mass's location (the engines floor precisions, message_passing.md §8,
        and never form one).

    Returns
    -------
    mean, var : arrays
        Broadcast to a common shape.  Where ``1 / rho`` or ``tau / rho`` would
        overflow the result is ``+-inf``.
    """
    xp = array_namespace(tau, rho)
    tau, rho = _as_float(xp, tau, rho)
    zero = rho == 0
    var = xp.where(zero, math.inf, _safe_ratio(xp, xp.ones_like(rho), rho))
    mean = xp.where(zero, 0.0, _safe_ratio(xp, tau, rho))
    mean, var = _broadcast(xp, mean, var)
    return mean, var


def gaussian_product(tau1, rho1, tau2, rho2):
    """Product of two Gaussian densities in natural parameters (message_passing.md §1).

    ``G(tau1, rho1) * G(tau2, rho2) \\propto G(tau1 + tau2, rho1 + rho2)``; the
    dropped constant is :func:`product_normalizer_log`.

    Returns
    -------
    tau, rho : arrays
    """
    xp = array_namespace(tau1, rho1, tau2, rho2)
    tau1, rho1, tau2, rho2 = _as_float(xp, tau1, rho1, tau2, rho2)
    return tau1 + tau2, rho1 + rho2


def gaussian_division(tau1, rho1, tau2, rho2, *, tol=0.0):
    """Quotient ``G(tau1, rho1) / G(tau2, rho2)`` with the safe-division guard.

    In natural parameters division subtracts, ``G(tau1 - tau2, rho1 - rho2)``,
    which is a proper density only when ``rho1 > rho2`` (message_passing.md §1).
    The guard (``safe_division(g1, g2, tol)`` of §1, §8):

    * ``rho1 - rho2 > 0``: the exact quotient;
    * ``-tol <= rho1 - rho2 <= 0``: the precision is clamped to
      ``max(0, rho1 - rho2) = 0`` and the result is ``G(0, 0)`` (``tau = 0`` as
      well), the neutral message; rounding-level improperness is expected here
      and is **not** reported;
    * ``rho1 - rho2 < -tol`` (or NaN): an improper result beyond tolerance.  It is
      replaced by ``G(0, 0)`` and **reported** in ``invalid``, so that callers can
      skip and count the update.

    The returned precision is therefore never negative.

    Parameters
    ----------
    tau1, rho1 : array_like
        The numerator (typically a marginal).
    tau2, rho2 : array_like
        The denominator (typically the message being divided out).
    tol : float or array_like, default=0.0
        Non-negative tolerance on ``rho1 - rho2`` (the softmax factor of the paper
        uses 0.1, message_passing.md §8 item 7).

    Returns
    -------
    tau, rho : arrays
        The guarded quotient, ``rho >= 0``.
    invalid : bool array
        True where ``rho1 - rho2 < -tol`` or is NaN (the result there is
        ``G(0, 0)``).
    """
    xp = array_namespace(tau1, rho1, tau2, rho2, tol)
    tau1, rho1, tau2, rho2 = _as_float(xp, tau1, rho1, tau2, rho2)
    # (a Python number is checked on the host: no copy and sync per call on a GPU)
    negative = tol < 0 if isinstance(tol, (int, float)) else bool(xp.any(xp.asarray(tol) < 0))
    if negative:
        raise ValueError("gaussian_division needs tol >= 0.")
    d_rho = rho1 - rho2
    d_tau = tau1 - tau2
    proper = d_rho > 0
    invalid = ~(d_rho >= -tol)  # NaN compares False, so it is flagged
    rho = xp.where(proper, d_rho, 0.0)
    tau = xp.where(proper, d_tau, 0.0)
    tau, rho, invalid = _broadcast(xp, tau, rho, invalid)
    return tau, rho, invalid


def product_normalizer_log(mean1, var1, mean2, var2):
    """Log normaliser of the product of two Gaussian densities (message_passing.md §1).

    .. math::

        N(x; m_1, v_1) N(x; m_2, v_2) = N(m_1; m_2, v_1 + v_2)\\, N(x; m, v),

    with ``(m, v)`` given by :func:`gaussian_product`; this returns
    ``log N(m1; m2, v1 + v2)``.

    Parameters
    ----------
    mean1, var1, mean2, var2 : array_like
        Moments of the two factors, ``var >= 0`` (``inf`` allowed).

    Returns
    -------
    log_z : array
        ``-inf`` when ``v1 + v2 = inf``; when ``v1 + v2 = 0`` it is ``+inf`` if
        the means coincide and ``-inf`` otherwise.  NaN for negative total
        variance.
    """
    xp = array_namespace(mean1, var1, mean2, var2)
    mean1, var1, mean2, var2 = _as_float(xp, mean1, var1, mean2, var2)
    s = var1 + var2
    d = mean1 - mean2
    pos = s > 0
    s_safe = xp.where(pos, s, 1.0)
    # z = d / sqrt(s), squared without overflow (§8: no warnings).
    z = _safe_ratio(xp, d, xp.sqrt(s_safe))
    root_big = math.sqrt(_float_max(xp, z))
    small = xp.abs(z) < root_big
    z_safe = xp.where(small, z, 0.0)
    z2 = xp.where(small, z_safe * z_safe, math.inf)
    log_z = -0.5 * (_LOG_2PI + xp.log(s_safe)) - 0.5 * z2
    degenerate = xp.where(d == 0, math.inf, -math.inf).astype(log_z.dtype, copy=False)
    log_z = xp.where(s == 0, degenerate, xp.where(pos, log_z, math.nan))
    return log_z


def moments_to_natural(m0, m1, m2, *, min_mass=1e-12):
    """Moment-matched Gaussian of an unnormalised density (message_passing.md §1).

    Given the moments ``m_k = \\int x^k f(x) dx`` (k = 0, 1, 2) of a non-negative
    function ``f``, returns the natural parameters of ``N(mu, s2)`` with
    ``mu = m1 / m0`` and ``s2 = m2 / m0 - mu**2``, i.e. ``rho = 1 / s2`` and
    ``tau = mu / s2``.

    Guards (message_passing.md §8: the softmax factor uses ``m0 < 1e-12 ->
    G(0, 0)``): the result is ``G(0, 0)`` and ``valid`` is False wherever

    * ``m0 < min_mass`` or ``m0 <= 0`` (too little mass to trust the ratios),
    * any moment is non-finite, or a ratio ``m_k / m0`` overflows,
    * ``s2 <= 0`` (``m2 / m0 <= mu**2``: not the moments of a density, or all
      precision lost to cancellation), or ``1 / s2`` overflows.

    Denominators are masked before dividing, so tiny or zero ``m0`` produces
    neither NaN nor a warning.  Note that ``s2`` is a difference of two numbers
    of size ``m2 / m0``; when ``s2 / mu**2`` approaches machine precision the
    result is inaccurate (or flagged invalid).

    Parameters
    ----------
    m0, m1, m2 : array_like
        Zeroth, first and second moments.
    min_mass : float, default=1e-12
        Smallest accepted normaliser ``m0``.

    Returns
    -------
    tau, rho : arrays
        Natural parameters (``(0, 0)`` where invalid).
    valid : bool array
    """
    xp = array_namespace(m0, m1, m2)
    m0, m1, m2 = _as_float(xp, m0, m1, m2)
    finite = xp.isfinite(m0) & xp.isfinite(m1) & xp.isfinite(m2)
    ok = finite & (m0 > 0) & (m0 >= min_mass)
    m0s = xp.where(ok, m0, 1.0)
    mu = _safe_ratio(xp, xp.where(ok, m1, 0.0), m0s)
    e2 = _safe_ratio(xp, xp.where(ok, m2, 1.0), m0s)
    ok = ok & xp.isfinite(mu) & xp.isfinite(e2) & (e2 > 0)
    e2 = xp.where(ok, e2, 1.0)
    # |mu| < sqrt(E[x^2]) is necessary for s2 > 0 and keeps mu**2 from overflowing.
    ok = ok & (xp.abs(mu) < xp.sqrt(e2))
    mu = xp.where(ok, mu, 0.0)
    s2 = e2 - mu * mu
    ok = ok & (s2 > 0)
    tau, rho = to_natural(mu, xp.where(ok, s2, 1.0))
    ok = ok & xp.isfinite(rho) & xp.isfinite(tau)
    tau = xp.where(ok, tau, 0.0)
    rho = xp.where(ok, rho, 0.0)
    tau, rho, ok = _broadcast(xp, tau, rho, ok)
    return tau, rho, ok


def min_precision(tau, rho, eps=1e-8):
    """Precision floor ``min_rho(g, eps)`` of message_passing.md §1 (§8 item 3).

    Keeps the mean ``tau / rho`` and sets ``rho <- max(rho, eps)``.  Elements
    with ``rho == 0`` (``G(0, 0)`` or an unnormalisable ``G(tau, 0)``) become
    ``G(0, eps)``, mean 0, as :func:`from_natural` reads them.  Negative (improper)
    precisions are raised to ``eps`` keeping their formal mean ``tau / rho``.

    Parameters
    ----------
    tau, rho : array_like
        Natural parameters.
    eps : float, default=1e-8
        Precision floor (1e-8 throughout the paper).

    Returns
    -------
    tau, rho : arrays
    """
    xp = array_namespace(tau, rho, eps)
    tau, rho = _as_float(xp, tau, rho)
    low = rho < eps
    mean = xp.where(rho == 0, 0.0, _safe_ratio(xp, tau, rho))
    tau_out = xp.where(low, mean * eps, tau)
    rho_out = xp.where(low, eps, rho)
    tau_out, rho_out = _broadcast(xp, tau_out, rho_out)
    return tau_out, rho_out


def damp(tau_old, rho_old, tau_new, rho_new, rate):
    """Damped update: EMA in natural parameters (message_passing.md §1, §8 item 6).

    ``EMA(g_old, g_new, beta) = G((1 - beta) tau_old + beta tau_new,
    (1 - beta) rho_old + beta rho_new)``.

    Parameters
    ----------
    tau_old, rho_old, tau_new, rho_new : array_like
        The current and the proposed message.
    rate : float or array_like
        The update rate ``beta`` in ``[0, 1]``: 1 takes the new message, 0 keeps
        the old one.  A convex combination of non-negative precisions is
        non-negative.

    Returns
    -------
    tau, rho : arrays
    """
    xp = array_namespace(tau_old, rho_old, tau_new, rho_new, rate)
    tau_old, rho_old, tau_new, rho_new, rate = _as_float(
        xp, tau_old, rho_old, tau_new, rho_new, rate
    )
    keep = 1.0 - rate
    return keep * tau_old + rate * tau_new, keep * rho_old + rate * rho_new


def moment_match_mixture(weights, means, vars, axis=-1):  # noqa: A002 (public name)
    """The single Gaussian with the mean and variance of a Gaussian mixture.

    For the mixture ``sum_k w_k N(m_k, v_k)`` with weights normalised along
    ``axis``: ``mean = sum_k w_k m_k`` and, by the law of total variance,
    ``var = sum_k w_k (v_k + (m_k - mean)^2)``, computed in that centred form
    (no cancellation of ``E[x^2] - mean^2``).

    Parameters
    ----------
    weights : array_like
        Non-negative, unnormalised component weights; broadcast against
        ``means`` and ``vars``.  They are divided by their maximum before being
        summed, so very large or very small weights do not overflow.
    means, vars : array_like
        Component means and variances (``vars >= 0``).
    axis : int, default=-1
        The component axis; it is reduced.

    Returns
    -------
    mean, var : arrays
        Where all weights along ``axis`` are zero the result is
        ``(0, inf)``, the neutral ``G(0, 0)``.  Zero-weight components are
        ignored entirely (an infinite variance there does not propagate).
    """
    xp = array_namespace(weights, means, vars)
    w, m, v = _as_float(xp, weights, means, vars)
    w, m, v = xp.broadcast_arrays(w, m, v)
    w_max = xp.max(w, axis=axis, keepdims=True)
    w = w / xp.where(w_max > 0, w_max, 1.0)
    total = xp.sum(w, axis=axis, keepdims=True)
    has_mass = total > 0
    w = w / xp.where(has_mass, total, 1.0)
    used = w > 0
    mean = xp.sum(xp.where(used, w * xp.where(used, m, 0.0), 0.0), axis=axis, keepdims=True)
    dev = xp.where(used, m - mean, 0.0)
    spread = xp.where(used, v, 0.0) + dev * dev
    var = xp.sum(xp.where(used, w * spread, 0.0), axis=axis, keepdims=True)
    mean = xp.where(has_mass, mean, 0.0)
    var = xp.where(has_mass, var, math.inf)
    return xp.squeeze(mean, axis=axis), xp.squeeze(var, axis=axis)


def weighted_sum_backward(tau_s, rho_s, sum_mean, sum_var, coef, term_mean, term_var):
    """Exact message to one summand of a weighted-sum factor (message_passing.md §5.1).

    For the factor ``delta(s - sum_k c_k v_k)`` with Gaussian messages
    ``N(v_k; mu_k, s_k^2)`` into it, ``sum_mean = sum_k c_k mu_k`` and
    ``sum_var = sum_k c_k^2 s_k^2`` (the forward message of ``s``, which includes
    the term of ``v_d`` itself), and the message ``G(tau_s, rho_s)`` into ``s``
    from the other side, the exact message to ``v_d`` in the natural form of §5.1:

    .. math::

        D = 1 + \\rho_s (\\sigma_s^2 - c_d^2 \\sigma_d^2), \\quad
        \\rho = c_d^2 \\rho_s / D, \\quad
        \\tau = c_d (\\tau_s - \\rho_s (\\mu_s - c_d \\mu_d)) / D.

    The natural form handles ``c_d = 0`` and ``rho_s = 0`` (both give the
    neutral ``G(0, 0)``) without dividing by small numbers.

    Parameters
    ----------
    tau_s, rho_s : array_like
        Message into the sum ``s`` (``rho_s >= 0``).
    sum_mean, sum_var : array_like
        Moments of the forward message of ``s`` (all terms, ``v_d`` included).
    coef : array_like
        The constant coefficients ``c_d``.
    term_mean, term_var : array_like
        Moments of the message of ``v_d`` into the factor.

    Returns
    -------
    tau, rho : arrays
        The message to ``v_d``; ``rho >= 0``.  The variance of the other terms,
        ``sum_var - c_d^2 term_var``, is non-negative by construction and is
        clipped at 0 against rounding.
    """
    xp = array_namespace(tau_s, rho_s, sum_mean, sum_var, coef, term_mean, term_var)
    tau_s, rho_s, sum_mean, sum_var, coef, term_mean, term_var = _as_float(
        xp, tau_s, rho_s, sum_mean, sum_var, coef, term_mean, term_var
    )
    rest_var = xp.maximum(sum_var - coef * coef * term_var, 0.0)
    rest_mean = sum_mean - coef * term_mean
    den = 1.0 + rho_s * rest_var  # >= 1
    rho = coef * coef * rho_s / den
    tau = coef * (tau_s - rho_s * rest_mean) / den
    return tau, rho


# Beyond this standardised distance below the truncation point the truncated
# Gaussian's standardised mean t + lam and variance factor 1 - lam (lam + t) are
# taken from their asymptotic series: the direct forms cancel, with relative
# errors ~eps a^2 and ~eps a^4 (5e-14 and 1e-11 at a = 15), the series below are
# accurate to ~1e-16 for every a >= 15.
_TRUNC_ASYMPTOTIC = 15.0
# With c = -a and x = 1/c^2, the inverse Mills ratio gamma = phi(a)/Phi(a) has
#   a + gamma = (1/c) sum_n T_n x^n,           (standardised truncated mean)
#   1 - gamma (a + gamma) = x sum_n W_n x^n,   (standardised truncated variance)
# from the Mills-ratio expansion Phi(a)/phi(a) ~ (1/c) sum_n (-1)^n (2n-1)!! x^n
# (coefficients computed symbolically).  Terms beyond these are < 1e-17 relative
# at c = 15 and smaller for larger c.
_TRUNC_MEAN_SERIES = (
    1.0,
    -2.0,
    10.0,
    -74.0,
    706.0,
    -8162.0,
    110410.0,
    -1708394.0,
    29752066.0,
    -576037442.0,
    12277827850.0,
    -285764591114.0,
    7213364729026.0,
    -196316804255522.0,
    5731249477826890.0,
    -178676789473121834.0,
)
_TRUNC_VAR_SERIES = (
    1.0,
    -6.0,
    50.0,
    -518.0,
    6354.0,
    -89782.0,
    1435330.0,
    -25625910.0,
    505785122.0,
    -10944711398.0,
    257834384850.0,
    -6572585595622.0,
    180334118225650.0,
    -5300553714899094.0,
    166206234856979810.0,
    -5538980473666776854.0,
)


def _horner(coefficients, x):
    """``sum_n coefficients[n] x^n`` by Horner's rule (arrays or floats; the
    message-passing kernel compiles this same function with Numba)."""
    n = len(coefficients)
    out = coefficients[n - 1] + 0.0 * x
    for i in range(n - 2, -1, -1):
        out = out * x + coefficients[i]
    return out


def truncated_gaussian_moments(mean, var):
    """Moments of ``N(x; mean, var)`` restricted to ``x >= 0``.

    The EP moment match of an indicator ``1{x >= 0}`` (message_passing.md §5.11
    step 2, and the rectified parts of the LeakyReLU marginals of §5.6).  With
    ``t = mean / std`` and the inverse Mills ratio ``lam = phi(t) / Phi(t)``
    (computed as ``sqrt(2/pi) / erfcx(-t / sqrt(2))``, §8 item 9, so it neither
    underflows nor cancels):

    * ``log_mass = log Phi(t)``,
    * ``t_mean = mean + std * lam``,
    * ``t_var = var * (1 - lam * (lam + t))``.

    Parameters
    ----------
    mean : array_like
        Means.
    var : array_like
        Variances, ``> 0`` and finite.

    Returns
    -------
    log_mass, t_mean, t_var : arrays
        The log probability of ``x >= 0`` and the mean and variance of the
        truncated density; ``t_mean >= 0`` and ``0 < t_var <= var`` (rounding
        aside, the variance factor is clipped to ``[tiny, 1]``).
    """
    xp = array_namespace(mean, var)
    mean, var = _as_float(xp, mean, var)
    # The tail arithmetic is tuned to float64 (in float32 the direct forms lose
    # ~10% at t = -14): lower precisions are computed in float64 and rounded.
    dtype = mean.dtype
    mean, var = xp.asarray(mean, dtype=xp.float64), xp.asarray(var, dtype=xp.float64)
    sp = special(xp)
    std = xp.sqrt(var)
    with np.errstate(over="ignore"):  # |t| = inf: handled below
        t = mean / std
    log_mass = sp.log_ndtr(t)
    far = t < -_TRUNC_ASYMPTOTIC
    # Beyond t = 40 the truncation removes less than Phi(-40) ~ 1e-350: nothing.
    clear = t > 40.0
    # The direct branch sees only -_TRUNC_ASYMPTOTIC - 1 <= t <= 40 (no overflow).
    t_d = xp.clip(t, -_TRUNC_ASYMPTOTIC - 1.0, 40.0)
    lam = math.sqrt(2.0 / math.pi) / sp.erfcx(-t_d * (1.0 / math.sqrt(2.0)))
    # Mean: mean + std lam = std (t + lam), and t + lam > 0; for t << 0 both terms
    # cancel, so use the series in 1/a^2 (a = -t) there (a^2 may overflow: 1/a^2 = 0).
    a = xp.maximum(-t, 1.0)
    with np.errstate(over="ignore"):
        ia2 = 1.0 / (a * a)
    t_plus_lam = xp.where(far, _horner(_TRUNC_MEAN_SERIES, ia2) / a, t_d + lam)
    factor = xp.where(far, ia2 * _horner(_TRUNC_VAR_SERIES, ia2), 1.0 - lam * (lam + t_d))
    factor = xp.where(clear, 1.0, xp.clip(factor, float(xp.finfo(dtype).tiny), 1.0))
    out = (log_mass, xp.where(clear, mean, std * t_plus_lam), var * factor)
    if dtype == xp.float64:
        return out
    # rounding to a narrower type: a log mass below its range is -inf, as it should be
    with np.errstate(over="ignore"):
        return tuple(xp.asarray(o, dtype=dtype) for o in out)


# ----------------------------------------------------------------------------
# Gaussian multiplication approximation (tagi.md §2, Eqs. 3-6)
# ----------------------------------------------------------------------------
def product_mean(mu1, mu2, cov12=0.0):
    """``E[X1 X2] = mu1 mu2 + cov(X1, X2)`` for jointly Gaussian X (tagi.md §2 Eq. 3).

    Parameters
    ----------
    mu1, mu2 : array_like
        Means.
    cov12 : array_like, default=0
        ``cov(X1, X2)``; 0 is TAGI's case (weights independent of activations).

    Returns
    -------
    array
    """
    xp = array_namespace(mu1, mu2, cov12)
    mu1, mu2, cov12 = _as_float(xp, mu1, mu2, cov12)
    return mu1 * mu2 + cov12


def product_var(mu1, var1, mu2, var2, cov12=0.0):
    """``var(X1 X2)`` for jointly Gaussian X (tagi.md §2 Eq. 6).

    ``var1 var2 + cov12^2 + 2 cov12 mu1 mu2 + var1 mu2^2 + var2 mu1^2``; with
    ``cov12 = 0`` (TAGI's independent case) ``var1 var2 + var1 mu2^2 + var2 mu1^2``,
    a sum of non-negative terms.

    Parameters
    ----------
    mu1, var1, mu2, var2 : array_like
        Moments of the two factors.
    cov12 : array_like, default=0
        ``cov(X1, X2)``, with ``cov12**2 <= var1 var2``.

    Returns
    -------
    array
        The variance, clipped at 0: with strong negative correlation and large
        means the cross term cancels the others and rounding could otherwise
        leave a tiny negative number.
    """
    xp = array_namespace(mu1, var1, mu2, var2, cov12)
    mu1, var1, mu2, var2, cov12 = _as_float(xp, mu1, var1, mu2, var2, cov12)
    v = var1 * var2 + var1 * (mu2 * mu2) + var2 * (mu1 * mu1)
    v = v + cov12 * (cov12 + 2.0 * mu1 * mu2)
    return xp.maximum(v, 0.0)


def product_cross_cov(mu1, mu2, cov13, cov23):
    """``cov(X3, X1 X2) = cov(X1, X3) mu2 + cov(X2, X3) mu1`` (tagi.md §2 Eq. 4).

    TAGI's uses: ``cov(W A, W) = var_W mu_A`` (``X3 = X1 = W``, ``cov23 = 0``) and
    ``cov(W A, A) = var_A mu_W``.

    Parameters
    ----------
    mu1, mu2 : array_like
        Means of X1 and X2.
    cov13, cov23 : array_like
        ``cov(X1, X3)`` and ``cov(X2, X3)``.

    Returns
    -------
    array
    """
    xp = array_namespace(mu1, mu2, cov13, cov23)
    mu1, mu2, cov13, cov23 = _as_float(xp, mu1, mu2, cov13, cov23)
    return cov13 * mu2 + cov23 * mu1


def product_product_cov(mu1, mu2, mu3, mu4, c13, c14, c23, c24):
    """``cov(X1 X2, X3 X4)`` for jointly Gaussian X (tagi.md §2 Eq. 5).

    ``c13 c24 + c14 c23 + c13 mu2 mu4 + c14 mu2 mu3 + c23 mu1 mu4 + c24 mu1 mu3``
    with ``cij = cov(Xi, Xj)``.  With ``X3 = X1`` and ``X4 = X2`` it reduces to
    :func:`product_var` (Eq. 6).

    Parameters
    ----------
    mu1, mu2, mu3, mu4 : array_like
        Means.
    c13, c14, c23, c24 : array_like
        Cross-covariances.

    Returns
    -------
    array
    """
    xp = array_namespace(mu1, mu2, mu3, mu4, c13, c14, c23, c24)
    mu1, mu2, mu3, mu4, c13, c14, c23, c24 = _as_float(
        xp, mu1, mu2, mu3, mu4, c13, c14, c23, c24
    )
    return (
        c13 * c24
        + c14 * c23
        + c13 * (mu2 * mu4)
        + c14 * (mu2 * mu3)
        + c23 * (mu1 * mu4)
        + c24 * (mu1 * mu3)
    )
