"""Compiled CPU kernel of one batch visit of the message-passing engine.

The paper's schedule (message_passing.md §6) processes the examples of the
active batch one at a time: a forward pass (§5.3, §5.4, §5.6 (b)), the output
factor (§5.8-5.11) and a backward pass (§5.3, §5.4, §5.6 (c)) whose messages to
the weights replace the example's old ones in the marginals.  On NumPy arrays
one such step is ~100 small array operations whose fixed cost dominates (a few
ms per example).  :func:`visit_kernel` runs every iteration of one visit
compiled by Numba, with scalar loops and the same arithmetic and guards as the
array functions of :mod:`.linear`, :mod:`.activation` and :mod:`.likelihood`
(the array path stays the reference and the path for CuPy and strict
namespaces; ``tests/inference/test_mp_kernel.py`` checks that the two agree to
rounding).  The scalar special functions below (``erfcx`` on ``x >= 0``,
``ndtr``) agree with SciPy's to a few ulp, and ``exp`` and ``log`` in arithmetic
(so that loops over units vectorise) with NumPy's to 1 ulp.

Layout follows :class:`~skbayesnn.inference.message_passing.network._ActiveBatch`:
per layer ``(n_out, n_in)`` weight and ``(n_out,)`` bias arrays (tuples over
layers), per-example messages ``(n_m, n_out, n_in)`` (``n_m = n`` with
``memory="per_example"``, 1 with ``"per_batch"``) and the stored backward
messages of the hidden layers ``(n, d)``; everything is updated in place.  The
first layer's weight arrays are transposed, ``(n_in, n_out)`` and ``(n_m, n_in,
n_out)`` (:func:`_first_forward`; ``network._visit_kernel`` transposes).
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit

# Numba's on-disk cache freezes these imported constants and tracks only this
# file: after editing them in development, clear __pycache__/kernel.*.nb[ic]
# (the tests comparing the kernel with the array functions catch a stale cache;
# an installed upgrade rewrites this file and so invalidates the cache).
from ...core import gaussian
from ...core.gaussian import _TRUNC_ASYMPTOTIC, _TRUNC_MEAN_SERIES, _TRUNC_VAR_SERIES
from .activation import _INVERTIBLE_VAR, _TIE_RTOL

# The array code's series evaluation, compiled (one function serves both).
# Inlined by Numba, not by LLVM (_INLINE): a call that passes the coefficient
# array counts its references, and that call kept the unit loops scalar.
_horner = njit(cache=True, error_model="numpy", inline="always")(gaussian._horner)
# (as arrays: a tuple indexed in a loop compiles to branches, which keep a
# loop calling it scalar)
_TRUNC_MEAN_C = np.array(_TRUNC_MEAN_SERIES)
_TRUNC_VAR_C = np.array(_TRUNC_VAR_SERIES)

#: Output factor codes of :func:`visit_kernel`.
REGRESSION, ONE_HOT_REGRESSION, ARGMAX, SOFTMAX = 0, 1, 2, 3

_EPS = 1e-8  # precision floor (§8 item 3)
_LOG_MIN_MASS = math.log(1e-8)  # LeakyReLU forward guard (§5.6, §10)
_RHO_A_GUARD = 2e-8
_MIN_VAR = 1e-12
_LOG_2PI = math.log(2.0 * math.pi)
_SQRT_2_OVER_PI = math.sqrt(2.0 / math.pi)
_INV_SQRT_2 = 1.0 / math.sqrt(2.0)
_INV_SQRT_PI = 1.0 / math.sqrt(math.pi)
_SQRT_2PI = math.sqrt(2.0 * math.pi)
_INV_SQRT_2PI = 1.0 / _SQRT_2PI
_TINY = np.finfo(np.float64).tiny
_ROOT_BIG = math.sqrt(np.finfo(np.float64).max)
# The forward weight loop (_forward_layer): reassociated sums and fused
# multiply-adds let LLVM vectorise it; no flag that assumes finite values.
_LOOP_MATH = {"reassoc", "contract"}
# The functions of an example step (_sweep's callees) allocate nothing (their
# workspaces come from visit_kernel) and are compiled without Numba's reference
# counting of arrays, which costs an atomic increment and decrement per array
# argument and view in every call.  With the per-call allocations that the
# workspaces replaced, that was 19% of the step of a network of 16 layers of 8
# units; at (64, 64) benchmarks/speed_mp_vs_mlp.py shows no difference beyond
# its noise.  "_nrt" is a private option of Numba's CPU
# target; where a version lacks it they compile with reference counting.  (A
# callee without the option takes its first caller's, and one compiled version
# serves every caller of a signature: the functions that take arrays carry it
# themselves, so that it does not depend on which caller compiled them first.)
try:
    from numba.core.cpu import CPUTargetOptions
except ImportError:  # pragma: no cover
    CPUTargetOptions = None
_NO_NRT = {"_nrt": False} if hasattr(CPUTargetOptions, "_nrt") else {}
# The special functions that the LeakyReLU unit loops call must be inlined
# into them, or the loops would not vectorise.  LLVM inlines them
# ("forceinline": its alwaysinline attribute), each compiled once.  Numba's
# own inlining (inline="always") copied and typed a callee's IR anew at every
# call site, recursively: 13 s of the 35 s that the first fit in a new
# installation spent compiling (benchmarks/compile_mp.py).  A callee without
# the option takes its first caller's, as with _NO_NRT, so the few plain
# functions these call carry it too.  Where Numba lacks the option, Numba
# inlines them as before.
_INLINE = ({"forceinline": True} if hasattr(CPUTargetOptions, "forceinline")
           else {"inline": "always"})
# Doubles per vector of the widest instruction set the kernel is compiled for
# (AVX-512): the LeakyReLU loops' unit of vectorisation (_pad_layer).
_LANES = 8


# ----------------------------------------------------------------------------
# scalar special functions
# ----------------------------------------------------------------------------
# Chebyshev coefficients of (1 + 2x) erfcx(x) in y = (x - 4) / (x + 4), the
# map of x in [0, inf] onto [-1, 1] where this product is smooth, so that one
# series serves every x >= 0 (the form of Shepherd & Laframboise, Math. Comp.
# 36, 1981).  Computed with 50-digit mpmath at 80 Chebyshev nodes; terms
# after the 25th are below 1e-17.  Worst relative error of :func:`_erfcx_nonneg`
# 6.1e-16 against mpmath on [0, 40] (SciPy's: 9.1e-16), 3.8e-16 above 0.2.
_ERFCX_K = 4.0
_ERFCX_CHEB = np.array([
    1.1774832005374487,
    -0.007260796620301901,
    -0.081265123236185,
    0.06009212804122225,
    -0.02875393558027666,
    0.01059566336347286,
    -0.003136927294554264,
    0.0007456494372536184,
    -0.0001369696503010054,
    1.7183861600300937e-05,
    -7.158364623450346e-07,
    -2.4261399442449534e-07,
    5.5765709395703566e-08,
    -2.1057869513809494e-09,
    -1.1717889351884957e-09,
    1.9098355172456688e-10,
    1.408871764208813e-11,
    -6.901108320480815e-12,
    9.167958364111294e-14,
    2.1454508286554553e-13,
    -1.4716575027010623e-14,
    -6.668675118770408e-15,
    7.504598509880083e-16,
    2.22009300666632e-16,
    -3.1704898956330886e-17,
])


@njit(cache=True, error_model="numpy", **_INLINE)
def _erfcx_nonneg(x):
    """``erfcx(x)`` for ``x >= 0`` (NaN passes), ``erfcx(inf) = 0``.

    Clenshaw's recurrence of the series above: arithmetic only, no branch, so
    that a loop over units vectorises (libm's ``erfc`` and ``exp`` do not).
    """
    x_c = 1e300 if x > 1e300 else x  # y = 1 exactly there, and at inf
    y = (x_c - _ERFCX_K) / (x_c + _ERFCX_K)
    y2 = y + y
    b1 = 0.0
    b2 = 0.0
    for k in range(_ERFCX_CHEB.shape[0] - 1, 0, -1):
        b1, b2 = _ERFCX_CHEB[k] + y2 * b1 - b2, b1
    return 0.5 * (_ERFCX_CHEB[0] + y * b1 - b2) / (0.5 + x)


# exp and log in arithmetic and selects only (fdlibm's e_exp.c and e_log.c:
# reduction by k ln 2 with ln 2 in two parts, their minimax coefficients, the
# power of 2 built from its bits), so that a loop over units that takes them
# vectorises; libm's exp and log are calls that keep such a loop scalar (the
# LeakyReLU layers' 3-4 per unit took a quarter of their time).  At most 1 ulp
# from NumPy's over the whole range, subnormal results included
# (tests/inference/test_mp_kernel.py).
_LN2_HI = 6.93147180369123816490e-01  # k * _LN2_HI is exact for |k| < 2^11
_LN2_LO = 1.90821492927058770002e-10
_INV_LN2 = 1.44269504088896338700e00
_EXP_MAX = 7.09782712893383973096e02  # exp overflows above
_EXP_P1, _EXP_P2, _EXP_P3, _EXP_P4, _EXP_P5 = (
    1.66666666666666019037e-01, -2.77777777770155933842e-03, 6.61375632143793436117e-05,
    -1.65339022054652515390e-06, 4.13813679705723846039e-08)
_LOG_LG1, _LOG_LG2, _LOG_LG3, _LOG_LG4, _LOG_LG5, _LOG_LG6, _LOG_LG7 = (
    6.666666666666735130e-01, 3.999999999940941908e-01, 2.857142874366239149e-01,
    2.222219843214978396e-01, 1.818357216161805012e-01, 1.531383769920937332e-01,
    1.479819860511658591e-01)
_SQRT2 = math.sqrt(2.0)


@njit(cache=True, error_model="numpy", **_INLINE)
def _pow2(k):
    """``2.0 ** k`` for an integer-valued float ``k`` in [-1022, 1023], from its bits."""
    return np.int64((np.int64(k) + 1023) << 52).view(np.float64)


@njit(cache=True, error_model="numpy", **_INLINE)
def _exp(x):
    """``exp(x)``, arithmetic only (see above)."""
    xc = min(max(x, -746.0), 710.0)
    k = math.floor(xc * _INV_LN2 + 0.5)
    hi = xc - k * _LN2_HI
    lo = k * _LN2_LO
    r = hi - lo
    r2 = r * r
    c = r - r2 * (_EXP_P1 + r2 * (_EXP_P2 + r2 * (_EXP_P3 + r2 * (_EXP_P4 + r2 * _EXP_P5))))
    y = 1.0 - ((lo - (r * c) / (2.0 - c)) - hi)
    k1 = math.floor(0.5 * k)  # two factors: 2^k alone is not normal below -1022
    y = y * _pow2(k1) * _pow2(k - k1)
    y = math.inf if x > _EXP_MAX else y
    return x if x != x else y


@njit(cache=True, error_model="numpy", **_INLINE)
def _log(x):
    """``log(x)``, arithmetic only (see above)."""
    sub = x < _TINY  # subnormal: scaled into the normal range first
    bits = np.float64(x * 18014398509481984.0 if sub else x).view(np.int64)  # x 2^54
    e = np.float64((bits >> 52) - 1023) - (54.0 if sub else 0.0)
    m = np.int64((bits & 0xFFFFFFFFFFFFF) | 0x3FF0000000000000).view(np.float64)  # [1, 2)
    big = m > _SQRT2
    m = 0.5 * m if big else m
    e = e + 1.0 if big else e
    f = m - 1.0
    s = f / (2.0 + f)
    z = s * s
    w = z * z
    r = (z * (_LOG_LG1 + w * (_LOG_LG3 + w * (_LOG_LG5 + w * _LOG_LG7)))
         + w * (_LOG_LG2 + w * (_LOG_LG4 + w * _LOG_LG6)))
    hfsq = 0.5 * f * f
    y = e * _LN2_HI - ((hfsq - (s * (hfsq + r) + e * _LN2_LO)) - f)
    y = -math.inf if x == 0.0 else y
    y = math.nan if x < 0.0 else y
    return x if (x == math.inf or x != x) else y


@njit(cache=True, error_model="numpy", **_INLINE)
def _exp_neg_half_square(t):
    """``exp(-t^2 / 2)`` with the rounding error of ``t^2`` compensated (Dekker's split)."""
    t2 = t * t
    c = 134217729.0 * t
    hi = c - (c - t)
    lo = t - hi
    err = ((hi * hi - t2) + 2.0 * hi * lo) + lo * lo  # t^2 = t2 + err
    # (0 where it underflows, and where the split would overflow, |t| > 1e300)
    return 0.0 if t2 > 1.5e3 else _exp(-0.5 * t2) * (1.0 - 0.5 * err)


@njit(cache=True, error_model="numpy")
def ndtr(t):
    """Standard normal cdf ``Phi(t)``."""
    return 0.5 * math.erfc(-t * _INV_SQRT_2)


# ----------------------------------------------------------------------------
# Gaussian algebra (core.gaussian, elementwise)
# ----------------------------------------------------------------------------
@njit(cache=True, error_model="numpy")
def _moments(tau, rho):
    """``from_natural(min_precision(tau, rho, 1e-8))`` (§1, §8 item 3)."""
    if rho < _EPS:
        mean = 0.0 if rho == 0.0 else tau / rho
        tau = mean * _EPS
        rho = _EPS
    return tau / rho, 1.0 / rho


@njit(cache=True, error_model="numpy", **_INLINE)
def _min_precision(tau, rho):
    """``min_rho(G(tau, rho), 1e-8)`` (§1)."""
    if rho < _EPS:
        mean = 0.0 if rho == 0.0 else tau / rho
        return mean * _EPS, _EPS
    return tau, rho


@njit(cache=True, error_model="numpy")
def _wsum_backward(tau_s, rho_s, sum_mean, sum_var, coef, term_mean, term_var):
    """Exact message to one summand of a weighted sum (§5.1, ``weighted_sum_backward``)."""
    rest_var = max(sum_var - coef * coef * term_var, 0.0)
    rest_mean = sum_mean - coef * term_mean
    den = 1.0 + rho_s * rest_var
    return coef * (tau_s - rho_s * rest_mean) / den, coef * coef * rho_s / den


@njit(cache=True, error_model="numpy", **_INLINE)
def _trunc_standard_inline(t, with_log):
    """Truncation of N(t, 1) to x >= 0: ``(log_mass, scale, q, t_plus_lam, factor)``.

    The mass ``Phi(t)`` is ``scale * exp(-q)`` with ``scale`` in ``(0.39 / (1 +
    |t|), 1]``, so a ratio of masses needs no logarithm (:func:`_tilted_relative`);
    its log, ``log_mass``, only ``with_log`` (else 0).  The truncated mean is
    ``t_plus_lam = t + phi(t) / Phi(t)`` and the variance ``factor = 1 - lam (lam
    + t)`` (times the variance of the untruncated Gaussian).  Both signs of
    ``t`` take ``erfcx(|t| / sqrt 2)``; both (and the far tail's series) are
    computed and the one that applies selected, so that a loop over units
    vectorises.
    """
    e = _erfcx_nonneg(abs(t) * _INV_SQRT_2)
    # t > 0: the tail c = 2 Phi(-t) = erfc(t / sqrt 2) is accurate, Phi(t) = 1 -
    # c/2 >= 1/2 has no cancellation, and exp(-t^2/2) serves c and the ratio
    # lam = phi(t)/Phi(t).
    g = _exp_neg_half_square(t)
    c = e * g
    scale_p = 1.0 - 0.5 * c
    lam_p = _INV_SQRT_2PI * g / scale_p
    # t <= 0: Phi(t) = erfcx(-t / sqrt 2) / 2 * exp(-t^2 / 2): no underflow, and
    # lam shares erfcx; below -_TRUNC_ASYMPTOTIC the series of core.gaussian
    # (the direct forms cancel)
    lam_n = _SQRT_2_OVER_PI / e
    a = max(-t, 1.0)  # (a * a may overflow: 1 / a^2 = 0, the limit)
    ia2 = 1.0 / (a * a)
    far = t < -_TRUNC_ASYMPTOTIC
    pos = t > 0.0
    lam = lam_p if pos else lam_n
    t_plus_lam = _horner(_TRUNC_MEAN_C, ia2) / a if far else t + lam
    factor = ia2 * _horner(_TRUNC_VAR_C, ia2) if far else 1.0 - lam * (lam + t)
    factor = min(max(factor, _TINY), 1.0)
    scale = scale_p if pos else 0.5 * e
    q = 0.0 if pos else 0.5 * t * t
    log_mass = 0.0
    if with_log:
        log_mass = math.log1p(-0.5 * c) if pos else math.log(scale) - q
    return log_mass, scale, q, t_plus_lam, factor


@njit(cache=True, error_model="numpy")
def _trunc_standard(t, with_log):
    """:func:`_trunc_standard_inline` as a function of its own, for the scalar paths
    (the ``_inline`` form is inlined where a loop must vectorise, :data:`_INLINE`)."""
    return _trunc_standard_inline(t, with_log)


@njit(cache=True, error_model="numpy")
def _trunc_moments(mean, var):
    """``truncated_gaussian_moments``: log mass, mean, variance of N(mean, var) on x >= 0."""
    std = math.sqrt(var)
    log_mass, _, _, t_plus_lam, factor = _trunc_standard(mean / std, True)
    return log_mass, std * t_plus_lam, var * factor


@njit(cache=True, error_model="numpy")
def _normalizer_log(mean1, var1, mean2, var2):
    """``product_normalizer_log``: ``log N(m1; m2, v1 + v2)``."""
    s = var1 + var2
    d = mean1 - mean2
    if s > 0.0:
        z = d / math.sqrt(s)
        z2 = z * z if abs(z) < _ROOT_BIG else math.inf
        return -0.5 * (_LOG_2PI + math.log(s)) - 0.5 * z2
    if s == 0.0:
        return math.inf if d == 0.0 else -math.inf
    return math.nan


@njit(cache=True, error_model="numpy", **_INLINE)
def _two_component_moments(w0, w1, m0, m1, v0, v1):
    """Mean and (centred) variance of ``w0 N(m0, v0) + w1 N(m1, v1)`` for
    normalised weights; a zero-weight component is ignored entirely (its
    moments may be infinite), as in ``moment_match_mixture``."""
    mean = 0.0
    if w0 > 0.0:
        mean += w0 * m0
    if w1 > 0.0:
        mean += w1 * m1
    var = 0.0
    if w0 > 0.0:
        dev = m0 - mean
        var += w0 * (v0 + dev * dev)
    if w1 > 0.0:
        dev = m1 - mean
        var += w1 * (v1 + dev * dev)
    return mean, var


@njit(cache=True, error_model="numpy")
def _mixture2(lw0, lw1, m0, m1, v0, v1):
    """Mixture weights and moment match of two components (``_mixture_weights`` and
    ``moment_match_mixture``).  Returns ``(mean, var, log_m0, finite)``."""
    if lw0 != lw0 or lw1 != lw1:
        top = math.nan
    else:
        top = max(lw0, lw1)
    finite = math.isfinite(top)
    shift = top if finite else 0.0
    w0 = math.exp(lw0 - shift)
    w1 = math.exp(lw1 - shift)
    log_m0 = top + math.log(w0 + w1) if finite else -math.inf
    w_max = max(w0, w1) if (w0 == w0 and w1 == w1) else math.nan
    den = w_max if w_max > 0.0 else 1.0
    w0 = w0 / den
    w1 = w1 / den
    total = w0 + w1
    has_mass = total > 0.0
    den = total if has_mass else 1.0
    w0 = w0 / den
    w1 = w1 / den
    mean, var = _two_component_moments(w0, w1, m0, m1, v0, v1)
    if not has_mass:
        mean = 0.0
        var = math.inf
    return mean, var, log_m0, finite


# ----------------------------------------------------------------------------
# (leaky) ReLU factor (§5.6)
# ----------------------------------------------------------------------------
# A layer's messages are one loop over its units (:func:`_leaky_forward_layer`,
# :func:`_leaky_backward_layer`) of the one-unit functions' common path, which
# is arithmetic and selects only (erfcx a series, exp and log the arithmetic
# ones above), so that LLVM vectorises it; the units that need another path
# (the general one of a degenerate part, a rejected forward marginal, no
# backward message) take the one-unit functions in a second, scalar loop.  On
# the inputs of a kin8nm fit's fourth epoch (64 units) this takes 41 and 40 ns
# per unit for the forward and backward messages; the earlier form, in stages
# around libm's exp and log, 61 and 56 (a scratch benchmark).


@njit(cache=True, error_model="numpy", **_INLINE)
def _tilted_setup(z_mean, z_var, tau_a, rho_a, alpha):
    """Arithmetic of ``leaky_relu_tilted`` before the truncations.

    The part ``z > 0`` is ``G(tau_z + tau_a, rho_z + rho_a)`` truncated at 0,
    the part ``z < 0`` (reflected) ``G(-(tau_z + alpha tau_a), rho_z + alpha^2
    rho_a)``.  Returns their standardised truncation points, standard
    deviations and variances ``(t_p, std_p, var_p, t_n, std_n, var_n)``, the
    Gaussian normalisers' exponents ``gq_k = d_k^2 / (2 s_k)`` and ``sq_k =
    sqrt(s_k)`` (``s_k``, ``d_k``: variance and mean difference of ``N(phi(z);
    mu_a, s2_a)`` against the forward message), and the backward message's
    moments ``(a_mean, a_var)``.
    """
    tau_z = z_mean / z_var
    rho_z = 1.0 / z_var
    a_mean = tau_a / rho_a
    a_var = 1.0 / rho_a
    rho_p = rho_z + rho_a
    m_p = (tau_z + tau_a) / rho_p
    var_p = 1.0 / rho_p
    std_p = math.sqrt(var_p)
    rho_n = rho_z + alpha * alpha * rho_a
    m_n = (tau_z + alpha * tau_a) / rho_n
    var_n = 1.0 / rho_n
    std_n = math.sqrt(var_n)
    s_p = z_var + a_var
    d_p = z_mean - a_mean
    s_n = alpha * alpha * z_var + a_var
    d_n = alpha * z_mean - a_mean
    return (m_p / std_p, std_p, var_p, -m_n / std_n, std_n, var_n,
            0.5 * (d_p * d_p / s_p), 0.5 * (d_n * d_n / s_n), math.sqrt(s_p), math.sqrt(s_n),
            a_mean, a_var)  # fmt: skip


@njit(cache=True, error_model="numpy")
def _tilted(z_mean, z_var, tau_a, rho_a, alpha):
    """``leaky_relu_tilted``: log masses, means and variances of the two parts."""
    t_p, std_p, var_p, t_n, std_n, var_n, _, _, _, _, a_mean, a_var = _tilted_setup(
        z_mean, z_var, tau_a, rho_a, alpha
    )
    lm_p, _, _, tpl_p, f_p = _trunc_standard(t_p, True)
    lm_n, _, _, tpl_n, f_n = _trunc_standard(t_n, True)
    lw_p = _normalizer_log(z_mean, z_var, a_mean, a_var) + lm_p
    lw_n = _normalizer_log(alpha * z_mean, alpha * alpha * z_var, a_mean, a_var) + lm_n
    return lw_p, lw_n, std_p * tpl_p, -(std_n * tpl_n), var_p * f_p, var_n * f_n


@njit(cache=True, error_model="numpy", **_INLINE)
def _tilted_relative_inline(z_mean, z_var, tau_a, rho_a, alpha):
    """The two parts of :func:`_tilted` with their masses relative to each other.

    Returns ``(delta, g_p, g_n, h_p, h_n, e_p, e_n, v_p, v_n)``: part ``k``
    has mass ``h_k exp(g_k) / sqrt(2 pi)`` and ``delta = lw_n - lw_p`` is the
    log of the ratio of the two.  The truncation masses enter as ``scale
    exp(-q)`` (:func:`_trunc_standard`), so ``delta`` takes one ``log`` and the
    mixture (:func:`_mixture_relative`) one ``exp``, where :func:`_tilted` and
    :func:`_mixture2` take five ``log`` and two ``exp``.  ``delta`` is not
    finite where a part is degenerate; callers then take the general path.
    """
    t_p, std_p, var_p, t_n, std_n, var_n, gq_p, gq_n, sq_p, sq_n, _, _ = _tilted_setup(
        z_mean, z_var, tau_a, rho_a, alpha
    )
    _, sc_p, q_p, tpl_p, f_p = _trunc_standard_inline(t_p, False)
    _, sc_n, q_n, tpl_n, f_n = _trunc_standard_inline(t_n, False)
    h_p = sc_p / sq_p
    h_n = sc_n / sq_n
    g_p = -q_p - gq_p
    g_n = -q_n - gq_n
    return ((g_n - g_p) + _log(h_n / h_p), g_p, g_n, h_p, h_n, std_p * tpl_p,
            -(std_n * tpl_n), var_p * f_p, var_n * f_n)  # fmt: skip


@njit(cache=True, error_model="numpy")
def _tilted_relative(z_mean, z_var, tau_a, rho_a, alpha):
    """:func:`_tilted_relative_inline` as a function of its own, for the scalar paths
    (the ``_inline`` form is inlined where a loop must vectorise, :data:`_INLINE`)."""
    return _tilted_relative_inline(z_mean, z_var, tau_a, rho_a, alpha)


@njit(cache=True, error_model="numpy", **_INLINE)
def _direct_combine(z_mean, z_var, alpha, std, scale, q, t_plus_lam, factor):
    """Moments of LeakyReLU(N(z_mean, z_var)) from :func:`_trunc_standard` at
    ``t = z_mean / std`` (§5.6 (a)).

    With ``P = Phi(t) = scale exp(-q)`` and the truncated part's mean ``m_t =
    std t_plus_lam`` and variance ``v_t = z_var factor``: ``E[ReLU] = P m_t``,
    ``Var[ReLU] = P v_t + P (1 - P) m_t^2`` (no cancellation), and
    ``LReLU = alpha z + (1 - alpha) ReLU`` with ``Cov(z, ReLU) = z_var P``.
    ``z_var <= 0`` is the deterministic activation.  The variance is floored at
    1e-12, so that the message has natural parameters.
    """
    if z_var <= 0.0:
        return (z_mean if z_mean > 0.0 else alpha * z_mean), _MIN_VAR
    if t_plus_lam == math.inf:  # z_mean / std overflowed: z > 0, LReLU(z) = z
        return z_mean, max(z_var, _MIN_VAR)
    cdf = scale if q == 0.0 else scale * _exp(-q)
    m_t = std * t_plus_lam
    mr = cdf * m_t
    vr = cdf * (z_var * factor + (1.0 - cdf) * m_t * m_t)
    b = 1.0 - alpha
    mean = b * mr + alpha * z_mean
    var = alpha * alpha * z_var + b * b * vr + 2.0 * alpha * b * z_var * cdf
    return mean, max(var, _MIN_VAR)


@njit(cache=True, error_model="numpy", **_INLINE)
def _leaky_direct_inline(z_mean, z_var, alpha):
    """``leaky_relu_forward_direct``: moments of LeakyReLU(N(z_mean, z_var)) (§5.6 (a)).

    Through the truncation of ``z`` at 0 (:func:`_trunc_standard`: erfcx and
    the far-tail series where ``Phi`` underflows; the array function's
    arithmetic).  PBP's rectified moments take a continued fraction below a
    standardised mean of -3 (40-65 dependent divisions between -6 and -3),
    where a quarter of a trained network's units sit.
    """
    std = math.sqrt(z_var)
    _, scale, q, t_plus_lam, factor = _trunc_standard_inline(z_mean / std, False)
    return _direct_combine(z_mean, z_var, alpha, std, scale, q, t_plus_lam, factor)


@njit(cache=True, error_model="numpy")
def _leaky_direct(z_mean, z_var, alpha):
    """:func:`_leaky_direct_inline` as a function of its own, for the scalar paths
    (the ``_inline`` form is inlined where a loop must vectorise, :data:`_INLINE`)."""
    return _leaky_direct_inline(z_mean, z_var, alpha)


@njit(cache=True, error_model="numpy", **_INLINE)
def _mixture_relative_inline(delta, g_p, g_n, h_p, h_n, m0, m1, v0, v1):
    """Moment match of the two parts of :func:`_tilted_relative` (finite ``delta``).

    Returns ``(mean, var, log_m0)`` of the mixture ``N(m0, v0) + exp(delta) N(m1,
    v1)`` and its log normaliser (the backward message, which does not read
    ``log_m0``, lets the compiler drop its ``log``).
    """
    e = _exp(-abs(delta))
    neg = delta <= 0.0
    w0 = 1.0 if neg else e
    w1 = e if neg else 1.0
    g_top = g_p if neg else g_n
    h_top = h_p if neg else h_n
    total = w0 + w1  # in [1, 2]
    mean, var = _two_component_moments(w0 / total, w1 / total, m0, m1, v0, v1)
    # log(total h_top exp(g_top) / sqrt(2 pi)) with one log
    return mean, var, g_top + _log(total * h_top) - 0.5 * _LOG_2PI


@njit(cache=True, error_model="numpy")
def _mixture_relative(delta, g_p, g_n, h_p, h_n, m0, m1, v0, v1):
    """:func:`_mixture_relative_inline` as a function of its own, for the scalar paths
    (the ``_inline`` form is inlined where a loop must vectorise, :data:`_INLINE`)."""
    return _mixture_relative_inline(delta, g_p, g_n, h_p, h_n, m0, m1, v0, v1)


@njit(cache=True, error_model="numpy", **_INLINE)
def _forward_accept(z_mean, z_var, tau_a, rho_a, m_mean, m_var, log_m0):
    """The guards of the marginal approximation (§5.6 (b), §8) on the moments
    ``m_mean``, ``m_var`` and log normaliser of the moment-matched tilted
    density: ``(mean, var, accepted)`` of the message ``marginal / backward``.

    Arithmetic and comparisons only, so that a loop over units vectorises
    (the values are meaningless where not ``accepted``)."""
    invertible = m_var > _INVERTIBLE_VAR
    rho_m = 1.0 / (m_var if invertible else 1.0)
    tau_m = m_mean * rho_m
    rho_z = 1.0 / z_var
    # (activation._TIE_RTOL: within the band below the bound, or where rounding
    # makes rho_m - rho_a fall below rho_z, z's own message)
    tie = rho_m - rho_a < rho_z
    rho_msg = rho_z if tie else rho_m - rho_a
    tau_msg = z_mean * rho_z if tie else tau_m - tau_a
    m_acc = tau_msg / rho_msg
    v_acc = 1.0 / rho_msg
    accept = ((log_m0 > _LOG_MIN_MASS) & invertible & math.isfinite(rho_m - rho_a)
              & math.isfinite(tau_m - tau_a) & (rho_m >= (rho_z + rho_a) * (1.0 - _TIE_RTOL))
              & math.isfinite(m_acc) & (v_acc > 0.0) & math.isfinite(v_acc))
    return m_acc, v_acc, accept


@njit(cache=True, error_model="numpy")
def _forward_message(z_mean, z_var, tau_a, rho_a, alpha,
                     delta, g_p, g_n, h_p, h_n, e_p, e_n, v_p, v_n):  # fmt: skip
    """``leaky_relu_forward`` from the unit's :func:`_tilted_relative` (read only
    where ``rho_a > 0``): marginal approximation with its guards (§5.6 (b)).

    Returns ``(mean, var, accepted)``.
    """
    if _forward_ok(tau_a, rho_a):
        if math.isfinite(delta):
            m_mean, m_var, log_m0 = _mixture_relative(delta, g_p, g_n, h_p, h_n, e_p,
                                                      alpha * e_n, v_p, alpha * alpha * v_n)
            finite = True
        else:
            lw_p, lw_n, e_p, e_n, v_p, v_n = _tilted(z_mean, z_var, tau_a, rho_a, alpha)
            m_mean, m_var, log_m0, finite = _mixture2(
                lw_p, lw_n, e_p, alpha * e_n, v_p, alpha * alpha * v_n
            )
        m_acc, v_acc, accept = _forward_accept(z_mean, z_var, tau_a, rho_a, m_mean, m_var,
                                               log_m0)
        if finite and accept:
            return m_acc, v_acc, True
    d_mean, d_var = _leaky_direct(z_mean, z_var, alpha)
    return d_mean, d_var, False


@njit(cache=True, error_model="numpy", **_INLINE)
def _backward_ok(tau_a, rho_a):
    """Whether the message of ``a`` makes the tilted density usable (§5.6 (c), §8)."""
    ok = rho_a > 0.0 and math.isfinite(rho_a) and math.isfinite(tau_a)
    return ok and not (tau_a < 0.0 and rho_a < _RHO_A_GUARD)


@njit(cache=True, error_model="numpy")
def _backward_marginal(z_mean, z_var, tau_a, rho_a, alpha,
                       delta, g_p, g_n, h_p, h_n, e_p, e_n, v_p, v_n):  # fmt: skip
    """Moments of the marginal of ``z`` (the moment-matched tilted density) from
    the unit's :func:`_tilted_relative`, or its general path where ``delta`` is
    not finite: ``(mean, var, finite)``."""
    if math.isfinite(delta):
        m_mean, m_var, _ = _mixture_relative(delta, g_p, g_n, h_p, h_n, e_p, e_n, v_p, v_n)
        return m_mean, m_var, True
    lw_p, lw_n, e_p, e_n, v_p, v_n = _tilted(z_mean, z_var, tau_a, rho_a, alpha)
    m_mean, m_var, _, finite = _mixture2(lw_p, lw_n, e_p, e_n, v_p, v_n)
    return m_mean, m_var, finite


@njit(cache=True, error_model="numpy", **_INLINE)
def _backward_from_marginal(z_mean, z_var, m_mean, m_var, usable):
    """``leaky_relu_backward``'s message ``marginal / forward message`` with its
    guards (§5.6 (c)): 0 where the message of ``a`` or the marginal was not
    ``usable`` or the result is not finite, the precision floored (§8 item 3)."""
    tau = 0.0
    rho = 0.0
    if usable:
        rho_z = 1.0 / z_var
        tau_z = z_mean * rho_z
        rho_m = max(rho_z + _EPS, 1.0 / (m_var if m_var > 0.0 else math.inf))
        tau_m = m_mean * rho_m
        t = tau_m - tau_z
        r = rho_m - rho_z
        if math.isfinite(t) and math.isfinite(r):
            tau = t
            rho = r
    return _min_precision(tau, rho)


@njit(cache=True, error_model="numpy")
def _leaky_forward(z_mean, z_var, tau_a, rho_a, alpha):
    """``leaky_relu_forward`` of one unit (§5.6 (b)); the kernel runs
    :func:`_leaky_forward_layer`.  Returns ``(mean, var, accepted)``."""
    if not rho_a > 0.0:  # no backward message: the direct one
        d_mean, d_var = _leaky_direct(z_mean, z_var, alpha)
        return d_mean, d_var, False
    delta, g_p, g_n, h_p, h_n, e_p, e_n, v_p, v_n = _tilted_relative(
        z_mean, z_var, tau_a, rho_a, alpha
    )
    return _forward_message(z_mean, z_var, tau_a, rho_a, alpha,
                            delta, g_p, g_n, h_p, h_n, e_p, e_n, v_p, v_n)  # fmt: skip


@njit(cache=True, error_model="numpy")
def _leaky_backward(z_mean, z_var, tau_a, rho_a, alpha):
    """``leaky_relu_backward`` of one unit (§5.6 (c)); the kernel runs
    :func:`_leaky_backward_layer`."""
    ok = _backward_ok(tau_a, rho_a)
    m_mean, m_var, finite = 0.0, 0.0, False
    if ok:
        delta, g_p, g_n, h_p, h_n, e_p, e_n, v_p, v_n = _tilted_relative(
            z_mean, z_var, tau_a, rho_a, alpha
        )
        m_mean, m_var, finite = _backward_marginal(z_mean, z_var, tau_a, rho_a, alpha, delta,
                                                   g_p, g_n, h_p, h_n, e_p, e_n, v_p, v_n)
    return _backward_from_marginal(z_mean, z_var, m_mean, m_var, ok and finite)


@njit(cache=True, error_model="numpy", **_INLINE)
def _forward_ok(tau_a, rho_a):
    """Whether the unit has a backward message to approximate with (§5.6 (b))."""
    return rho_a > 0.0 and math.isfinite(rho_a) and math.isfinite(tau_a)


@njit(cache=True, error_model="numpy", **_INLINE)
def _forward_common(z_mean, z_var, tau_a, rho_a, alpha):
    """:func:`_leaky_forward`'s usual path, without branches: ``(mean, var,
    ok)``, the message of the accepted marginal approximation where ``ok``
    (a backward message, a finite ``delta``, the guards passed); elsewhere the
    values are meaningless and :func:`_leaky_forward` gives the message."""
    delta, g_p, g_n, h_p, h_n, e_p, e_n, v_p, v_n = _tilted_relative_inline(
        z_mean, z_var, tau_a, rho_a, alpha
    )
    m_mean, m_var, log_m0 = _mixture_relative_inline(delta, g_p, g_n, h_p, h_n, e_p,
                                                     alpha * e_n, v_p, alpha * alpha * v_n)
    m_acc, v_acc, accept = _forward_accept(z_mean, z_var, tau_a, rho_a, m_mean, m_var, log_m0)
    return m_acc, v_acc, accept & math.isfinite(delta) & _forward_ok(tau_a, rho_a)


@njit(cache=True, error_model="numpy", inline="always")
def _padded(n):
    """``n`` rounded up to a multiple of :data:`_LANES`."""
    return -(-n // _LANES) * _LANES


@njit(cache=True, error_model="numpy", inline="always")
def _pad_layer(zm, zv, ta, ra, work):
    """Prepare a layer's unit loops: ``(n_pad, t_a, r_a)``, the layer's width
    ``n = ta.shape[0]`` rounded up to a multiple of :data:`_LANES` and the
    backward messages ``ta``, ``ra`` continued to that length, with standard
    units (``z ~ N(0, 1)``, backward message ``N(0, 1)``) from ``n`` on in
    ``zm``, ``zv`` and in rows 1, 2 of ``work`` (which then hold the
    messages).

    LLVM vectorises the unit loops :data:`_LANES` units at a time and runs
    the rest in a scalar copy of the loop, about 10 times slower per unit (a
    layer of 12 units took longer than one of 16), so the loops run over the
    padded length; the padding's results are never read."""
    n = ta.shape[0]
    n_pad = _padded(n)
    if n_pad == n:
        return n, ta, ra
    t_a, r_a = work[1], work[2]
    for k in range(n):
        t_a[k] = ta[k]
        r_a[k] = ra[k]
    for k in range(n, n_pad):
        zm[k] = 0.0
        zv[k] = 1.0
        t_a[k] = 0.0
        r_a[k] = 1.0
    return n_pad, t_a, r_a


@njit(cache=True, error_model="numpy", **_NO_NRT)
def _leaky_forward_layer(zm, zv, ta, ra, alpha, xm, xv, work):
    """Forward messages of a layer's units (§5.6 (b)) and the next layer's input
    marginals ``q(x) = forward x stored backward`` (§5.3), floored, in ``xm``,
    ``xv``.  ``ta``, ``ra``: the stored backward messages (0 on an example's
    first iteration of a visit, where every message is the direct one); their
    length is the layer's width ``n``.  ``zm``, ``zv``, ``xm``, ``xv`` have at
    least ``n`` rounded up to a multiple of :data:`_LANES` entries, those from
    ``n`` on scratch (:func:`_pad_layer`), and ``work`` is a workspace of 3
    such rows.  Bitwise :func:`_leaky_forward` unit by unit.

    Returns the fallbacks to the direct message where the backward message
    was informative (as counted by the array engine).
    """
    n = ta.shape[0]
    informed = False
    for k in range(n):
        informed = informed or ra[k] > 0.0
    n_pad, t_a, r_a = _pad_layer(zm, zv, ta, ra, work)
    n_fallback = 0
    if informed:
        for k in range(n_pad):  # vectorised
            xm[k], xv[k], accepted = _forward_common(zm[k], zv[k], t_a[k], r_a[k], alpha)
            work[0, k] = 1.0 if accepted else 0.0
        for k in range(n):  # the other paths (rarely taken)
            if work[0, k] == 0.0:
                xm[k], xv[k], used = _leaky_forward(zm[k], zv[k], ta[k], ra[k], alpha)
                if ra[k] > 0.0 and not used:
                    n_fallback += 1
    else:
        for k in range(n_pad):  # vectorised
            xm[k], xv[k] = _leaky_direct_inline(zm[k], zv[k], alpha)
    for k in range(n):
        am, av = xm[k], xv[k]
        xm[k], xv[k] = _moments(am / av + ta[k], 1.0 / av + ra[k])
    return n_fallback


@njit(cache=True, error_model="numpy", **_INLINE)
def _backward_common(z_mean, z_var, tau_a, rho_a, alpha):
    """:func:`_leaky_backward` without branches where ``delta`` is finite or
    the message of ``a`` unusable: ``(tau, rho, general)``; where ``general``
    the values are meaningless and :func:`_leaky_backward` gives the message."""
    delta, g_p, g_n, h_p, h_n, e_p, e_n, v_p, v_n = _tilted_relative_inline(
        z_mean, z_var, tau_a, rho_a, alpha
    )
    m_mean, m_var, _ = _mixture_relative_inline(delta, g_p, g_n, h_p, h_n, e_p, e_n, v_p, v_n)
    usable = _backward_ok(tau_a, rho_a)
    finite = math.isfinite(delta)
    tau, rho = _backward_from_marginal(z_mean, z_var, m_mean, m_var, usable & finite)
    return tau, rho, usable & (not finite)


@njit(cache=True, error_model="numpy", **_NO_NRT)
def _leaky_backward_layer(zm, zv, ta, ra, alpha, tau, rho, work):
    """Backward messages of a layer's units (§5.6 (c)) into ``tau``, ``rho``;
    the arrays' lengths and ``work`` as in :func:`_leaky_forward_layer`.
    Bitwise :func:`_leaky_backward` unit by unit."""
    n = ta.shape[0]
    n_pad, t_a, r_a = _pad_layer(zm, zv, ta, ra, work)
    for k in range(n_pad):  # vectorised
        tau[k], rho[k], other = _backward_common(zm[k], zv[k], t_a[k], r_a[k], alpha)
        work[0, k] = 1.0 if other else 0.0
    for k in range(n):  # the general path (rarely taken)
        if work[0, k] > 0.0:
            tau[k], rho[k] = _leaky_backward(zm[k], zv[k], ta[k], ra[k], alpha)


# ----------------------------------------------------------------------------
# output factors (§5.8-5.11)
# ----------------------------------------------------------------------------
@njit(cache=True, error_model="numpy", **_NO_NRT)
def _argmax_backward(mean, var, c, noise_var, regularize, reg_var, tau, rho):
    """``argmax_backward`` for one example with label ``c`` (§5.11, §14 item 5)."""
    k = mean.shape[0]
    mu_c = mean[c]
    v_c = var[c]
    tau_c = 0.0
    rho_c = 0.0
    for i in range(k):
        f_mean = mu_c - mean[i]
        f_var = v_c + var[i] + noise_var
        _, t_mean, t_var = _trunc_moments(f_mean, f_var)
        d_rho = 1.0 / t_var - 1.0 / f_var
        d_tau = t_mean / t_var - f_mean / f_var
        if d_rho > 0.0:
            tau_b, rho_b = d_tau, d_rho
        else:
            tau_b, rho_b = 0.0, 0.0
        if i == c:
            continue
        t_ci, r_ci = _wsum_backward(tau_b, rho_b, f_mean, f_var, 1.0, mu_c, v_c)
        tau_c += t_ci
        rho_c += r_ci
        t_i, r_i = _wsum_backward(tau_b, rho_b, f_mean, f_var, -1.0, mean[i], var[i])
        sat = ndtr(f_mean / math.sqrt(f_var))
        tau[i] = t_i * sat
        rho[i] = r_i * sat
    tau[c] = tau_c
    rho[c] = rho_c
    if regularize:
        for i in range(k):
            target = 1.0 if i == c else -1.0
            tau[i] = tau[i] + target / reg_var
            rho[i] = rho[i] + 1.0 / reg_var


@njit(cache=True, error_model="numpy", fastmath={"reassoc"}, **_NO_NRT)
def _trapezoid_moments(grid, dens, centre):
    """The trapezoidal rule's integrals of ``dens``, ``dens (a - centre)`` and
    ``dens (a - centre)^2`` over the sorted points ``grid`` (the sums
    reassociated, so that LLVM vectorises them)."""
    m0 = 0.0
    m1 = 0.0
    m2 = 0.0
    for q in range(1, grid.shape[0]):
        da = grid[q] - grid[q - 1]
        dev = grid[q] - centre
        dev_prev = grid[q - 1] - centre
        f1 = dens[q] * dev
        f1_prev = dens[q - 1] * dev_prev
        m0 += 0.5 * (dens[q] + dens[q - 1]) * da
        m1 += 0.5 * (f1 + f1_prev) * da
        m2 += 0.5 * (f1 * dev + f1_prev * dev_prev) * da
    return m0, m1, m2


@njit(cache=True, error_model="numpy")
def output_workspace(n_out, n_grid):
    """The output factors' workspace for ``n_out`` outputs and a softmax grid
    of ``n_grid`` points (allocated once per visit: the functions of an
    example step allocate nothing, see :func:`visit_kernel`)."""
    return np.empty((4, max(2 * n_grid, n_out)))


@njit(cache=True, error_model="numpy", **_NO_NRT)
def _softmax_backward(mean, var, c, u, width, min_mass, tau, rho, work):
    """``softmax_backward`` for one example with label ``c`` (§5.10); ``work``:
    a workspace from :func:`output_workspace`.

    The trapezoidal rule on the merged (sorted) union of the two uniform grids
    ``u`` of the array function; moments about ``mu_d``; safe division with
    tolerance 0.1.  The integrand is evaluated in one vectorised loop (two of
    the arithmetic exp per point, where logaddexp's log and exp and the
    density's exp took three libm calls) and summed in another: 4-4.6 times
    faster per example step (``benchmarks/many_classes_mp.py``, 5 to 50
    classes), the same messages to rounding
    (``tests/inference/test_mp_factors.py``).
    """
    k = mean.shape[0]
    g = u.shape[0]
    t = work[3, :k]
    for j in range(k):
        t[j] = mean[j] / math.sqrt(1.0 + (math.pi / 8.0) * var[j])
    g1 = work[0, :g]
    g2 = work[0, g:2 * g]
    grid = work[1, :2 * g]
    dens = work[2, :2 * g]
    for d in range(k):
        std = math.sqrt(var[d])
        top = -math.inf
        for j in range(k):
            if j != d and t[j] > top:
                top = t[j]
        acc = 0.0
        for j in range(k):
            if j != d:
                acc += math.exp(t[j] - top)
        kappa = top + math.log(acc)
        lo = mean[d] - width * std
        hi = mean[d] + width * std
        k_lo = min(max(kappa - 20.0, lo), hi)
        k_hi = min(max(kappa + 20.0, lo), hi)
        for q in range(g):
            g1[q] = lo + (hi - lo) * u[q]
            g2[q] = k_lo + (k_hi - k_lo) * u[q]
        # merge the two sorted grids (np.sort of their concatenation)
        p1 = 0
        p2 = 0
        for q in range(2 * g):
            if p2 >= g or (p1 < g and g1[p1] <= g2[p2]):
                grid[q] = g1[p1]
                p1 += 1
            else:
                grid[q] = g2[p2]
                p2 += 1
        norm = _SQRT_2PI * std
        t_c = t[c]
        for q in range(2 * g):  # the densities, vectorised (the arithmetic exp)
            a = grid[q]
            num = a if d == c else t_c
            # N(a; mu_d, s_d^2) exp(num) / (exp(a) + exp(kappa)), the sum's
            # larger term taken out (logaddexp without its log)
            z = (a - mean[d]) / std
            dens[q] = (_exp(-0.5 * z * z + (num - max(a, kappa)))
                       / ((1.0 + _exp(-abs(a - kappa))) * norm))
        m0, m1, m2 = _trapezoid_moments(grid, dens, mean[d])
        # moments_to_natural (§1) with its guards
        tau_m = 0.0
        rho_m = 0.0
        valid = (
            math.isfinite(m0)
            and math.isfinite(m1)
            and math.isfinite(m2)
            and m0 > 0.0
            and m0 >= min_mass
        )
        if valid:
            mu = m1 / m0
            e2 = m2 / m0
            valid = math.isfinite(mu) and math.isfinite(e2) and e2 > 0.0
            valid = valid and abs(mu) < math.sqrt(e2)
            if valid:
                s2 = e2 - mu * mu
                valid = s2 > 0.0
                if valid:
                    tau_m = mu / s2
                    rho_m = 1.0 / s2
                    valid = math.isfinite(tau_m) and math.isfinite(rho_m)
        if valid:
            tau_m = tau_m + rho_m * mean[d]
            d_rho = rho_m - 1.0 / var[d]
            d_tau = tau_m - mean[d] / var[d]
            if d_rho > 0.0:
                tau[d] = d_tau
                rho[d] = d_rho
            elif d_rho >= -0.1:  # safe division: precision clamped, tau kept
                tau[d] = d_tau
                rho[d] = 0.0
            else:
                tau[d] = 0.0
                rho[d] = 0.0
        else:
            tau[d] = 0.0
            rho[d] = 0.0


@njit(cache=True, error_model="numpy", **_NO_NRT)
def _output(kind, z_m, z_v, Y, labels, i, noise_var, regularize, reg_var, am_noise, u, width,
            min_mass, tau, rho, work):
    """Backward messages of the output factor for example ``i`` into ``tau``, ``rho``."""
    k = z_m.shape[0]
    if kind == REGRESSION:  # §5.8: G(y / beta^2, 1 / beta^2)
        for j in range(k):
            tau[j] = Y[i, j] / noise_var
            rho[j] = 1.0 / noise_var
    elif kind == ONE_HOT_REGRESSION:  # R-MP, one-hot targets (§3.3)
        for j in range(k):
            tau[j] = (1.0 if labels[i] == j else 0.0) / noise_var
            rho[j] = 1.0 / noise_var
    elif kind == ARGMAX:
        _argmax_backward(z_m, z_v, labels[i], am_noise, regularize, reg_var, tau, rho)
    else:
        _softmax_backward(z_m, z_v, labels[i], u, width, min_mass, tau, rho, work)


# ----------------------------------------------------------------------------
# one visit of a batch (§6)
# ----------------------------------------------------------------------------
@njit(cache=True, error_model="numpy", **_NO_NRT)
def _replace_b(q_t, q_r, m_t, m_r, m, j, t_new, r_new, read_old, store):
    """EP replacement ``q <- q x new / old`` of a bias (§5.3, §6); ``old`` is
    read only if ``read_old`` (else it is 1) and ``new`` stored only if ``store``."""
    if read_old:
        q_t[j] = q_t[j] + (t_new - m_t[m, j])
        q_r[j] = q_r[j] + (r_new - m_r[m, j])
    else:
        q_t[j] = q_t[j] + t_new
        q_r[j] = q_r[j] + r_new
    if store:
        m_t[m, j] = t_new
        m_r[m, j] = r_new


@njit(cache=True, error_model="numpy", **_NO_NRT)
def _bias_moments(q_tb, q_rb, msg_tb, msg_rb, m, cavity, b_m, b_v):
    """Moments of the example's bias cavities ``q / m_{n->b}`` (§5.3, §5.4), or
    of the marginals where the example has no message yet (not ``cavity``)."""
    for j in range(q_tb.shape[0]):
        tb = q_tb[j]
        rb = q_rb[j]
        if cavity:
            tb -= msg_tb[m, j]
            rb -= msg_rb[m, j]
        b_m[j], b_v[j] = _moments(tb, rb)


@njit(cache=True, error_model="numpy", inline="always")
def _weight_moments(tw, rw):
    """``_moments(tw, rw)`` (the §8 floor) as selects around one division, so
    that the weight loops calling it vectorise (inlined into them, with their
    flags)."""
    # a subnormal precision is scaled by 2^600 first, so that its reciprocal
    # stays finite and tw * inv is still tw / rw
    scale = 2.0**600 if abs(rw) < 2.0**-900 else 1.0
    inv = 1.0 / (rw * scale)
    var = 1.0 / _EPS if rw < _EPS else inv
    mu = (tw * scale) * inv if rw != 0.0 else 0.0
    return mu, var


@njit(cache=True, error_model="numpy", fastmath=_LOOP_MATH, **_NO_NRT)
def _forward_layer(qt, qr, xm, xv, wm, wv, b_m, b_v, zm, zv):
    """Forward message of a hidden layer's weighted sums (§5.3).

    Each weight's moments, of its marginal (VMP: no cavity), go to ``wm``,
    ``wv``; ``zm``, ``zv`` get the sums' moments for inputs of moments ``xm``,
    ``xv`` and bias moments ``b_m``, ``b_v``.

    The sums may be reassociated (``_LOOP_MATH``), so that LLVM vectorises the
    loop.  The only call is the inlined :func:`_weight_moments`: Numba hands a
    function's flags to the helpers it compiles for it (and the same loop as a
    helper called once per output ran the whole fit about 15% slower).
    """
    d_out, d_in = qt.shape
    for j in range(d_out):
        qt_j, qr_j, wm_j, wv_j = qt[j], qr[j], wm[j], wv[j]
        acc_m = 0.0
        acc_v = 0.0
        for k in range(d_in):
            mu, var = _weight_moments(qt_j[k], qr_j[k])
            wm_j[k] = mu
            wv_j[k] = var
            acc_m += xm[k] * mu
            acc_v += (xm[k] * xm[k]) * var + xv[k] * (mu * mu + var)
        zm[j] = acc_m + b_m[j]
        zv[j] = acc_v + b_v[j]


@njit(cache=True, error_model="numpy", inline="always")
def _replace_w(q_t, q_r, row_t, row_r, k, t_new, r_new, read_old, keep):
    """EP replacement of weight ``k``'s message in its marginal ``q_t``, ``q_r``
    (§6), the example's messages in ``row_t``, ``row_r``: with ``keep``
    (``read_old or store``) the old message is divided out where
    ``read_old`` and the new one written there, else only multiplied in.

    ``keep`` decides for a whole loop, which LLVM then compiles once for each
    value; ``read_old`` only selects what to divide out (``x - 0.0`` is ``x``:
    bitwise as not dividing), and the new message is written even where no
    later iteration reads it.  Branches on both flags compiled to slower loops
    (1.6 ns per weight of a 64 x 64 layer against 1.2-1.35, a scratch
    benchmark; as one helper for both weight loops, 30 against 25 µs per
    example step on kin8nm) unless the flags were compile-time constants,
    which took a compilation of the kernel per combination.
    """
    if keep:
        old_t = row_t[k]
        old_r = row_r[k]
        q_t[k] += t_new - (old_t if read_old else 0.0)
        q_r[k] += r_new - (old_r if read_old else 0.0)
        row_t[k] = t_new
        row_r[k] = r_new
    else:
        q_t[k] += t_new
        q_r[k] += r_new


@njit(cache=True, error_model="numpy", **_NO_NRT)
def _hidden_backward(qt, qr, q_tb, q_rb, mt, mr, msg_tb, msg_rb, m, read_old, store, bias, xm,
                     xv, wm, wv, b_m, b_v, zm, zv, tau_z, rho_z, bt, br, x_sq):
    """Messages of the inner-product factor to weights, biases and inputs (§5.3).

    The weights' messages replace the example's old ones in the marginals
    (§6); the inputs' messages are written to ``bt``, ``br`` (floored, §8 item 3).
    ``x_sq``: workspace of at least the layer's input width.
    """
    d_out, d_in = qt.shape
    keep = read_old or store  # (_replace_w)
    for k in range(d_in):
        x_sq[k] = xv[k] + xm[k] * xm[k]
        bt[k] = 0.0
        br[k] = 0.0
    for j in range(d_out):
        tz = tau_z[j]
        rz = rho_z[j]
        zmj = zm[j]
        zvj = zv[j]
        qt_j, qr_j, wm_j, wv_j = qt[j], qr[j], wm[j], wv[j]
        row_t, row_r = mt[m, j], mr[m, j]
        for k in range(d_in):
            mu = wm_j[k]
            var = wv_j[k]
            xmk = xm[k]
            xvk = xv[k]
            e_p = xmk * mu
            v_p = max(xvk * var + xvk * (mu * mu) + var * (xmk * xmk), 0.0)
            # exact sum backward to p_jk (§5.1), coefficient 1
            inv = 1.0 / (1.0 + rz * max(zvj - v_p, 0.0))
            t_p = (tz - rz * (zmj - e_p)) * inv
            r_p = rz * inv
            # VMP messages to W (§5.2) and to the inputs (summed over j)
            t_w = t_p * xmk
            r_w = r_p * x_sq[k]
            bt[k] += t_p * mu
            br[k] += r_p * (var + mu * mu)
            _replace_w(qt_j, qr_j, row_t, row_r, k, t_w, r_w, read_old, keep)
        if bias:
            t_b, r_b = _wsum_backward(tz, rz, zmj, zvj, 1.0, b_m[j], b_v[j])
            _replace_b(q_tb, q_rb, msg_tb, msg_rb, m, j, t_b, r_b, read_old, store)
    for k in range(d_in):
        bt[k], br[k] = _min_precision(bt[k], br[k])


@njit(cache=True, error_model="numpy", fastmath=_LOOP_MATH, **_NO_NRT)
def _first_forward(qt, qr, mt, mr, m, cavity, x, wm, wv, b_m, b_v, zm, zv):
    """:func:`_forward_layer` of the first layer (observed inputs ``x``, §5.4),
    on the transposed layout ``(n_in, n_out)`` of the kernel's first layer.

    The loop over the outputs is the inner one: with a handful of inputs a
    loop over them is too short for LLVM's vector body (8 inputs: 2.3 against
    0.8 ns per weight for 32).
    """
    d_in, d_out = qt.shape
    for j in range(d_out):
        zm[j] = 0.0
        zv[j] = 0.0
    for k in range(d_in):
        qt_k, qr_k, wm_k, wv_k = qt[k], qr[k], wm[k], wv[k]
        mt_k, mr_k = mt[m, k], mr[m, k]
        xk = x[k]
        xk2 = xk * xk
        for j in range(d_out):
            tw = qt_k[j]
            rw = qr_k[j]
            if cavity:
                tw -= mt_k[j]
                rw -= mr_k[j]
            mu, var = _weight_moments(tw, rw)
            wm_k[j] = mu
            wv_k[j] = var
            zm[j] += xk * mu
            zv[j] += xk2 * var
    for j in range(d_out):
        zm[j] += b_m[j]
        zv[j] += b_v[j]


@njit(cache=True, error_model="numpy", **_NO_NRT)
def _first_backward(qt, qr, q_tb, q_rb, mt, mr, msg_tb, msg_rb, m, read_old, store, bias, x,
                    wm, wv, b_m, b_v, zm, zv, tau_z, rho_z):
    """Exact weighted-sum messages of the first layer to its weights and biases
    (§5.4), on the transposed layout of :func:`_first_forward`."""
    d_in, d_out = qt.shape
    keep = read_old or store  # (_replace_w)
    for k in range(d_in):
        qt_k, qr_k, wm_k, wv_k = qt[k], qr[k], wm[k], wv[k]
        row_t, row_r = mt[m, k], mr[m, k]
        c = x[k]
        c2 = c * c
        for j in range(d_out):
            rz = rho_z[j]
            inv = 1.0 / (1.0 + rz * max(zv[j] - c2 * wv_k[j], 0.0))
            t_w = c * (tau_z[j] - rz * (zm[j] - c * wm_k[j])) * inv
            r_w = c2 * rz * inv
            _replace_w(qt_k, qr_k, row_t, row_r, j, t_w, r_w, read_old, keep)
    if bias:
        for j in range(d_out):
            t_b, r_b = _wsum_backward(tau_z[j], rho_z[j], zm[j], zv[j], 1.0, b_m[j], b_v[j])
            _replace_b(q_tb, q_rb, msg_tb, msg_rb, m, j, t_b, r_b, read_old, store)


@njit(cache=True, error_model="numpy", **_NO_NRT)
def _product_with_messages(src, msg, dst):
    """``dst = (msg[0] + msg[1] + ...) + src`` elementwise, in that order
    (``msg`` stacks the examples' messages on its first axis).

    Written as loops: the same sum in NumPy's array syntax took 3.6 s of the
    kernel's first compilation.  ``reshape`` makes views of the contiguous
    arrays (and raises for others rather than work on a copy).
    """
    n = dst.size
    out = dst.reshape(n)
    first = src.reshape(n)
    stacked = msg.reshape((msg.shape[0], n))
    for k in range(n):
        out[k] = stacked[0, k]
    for m in range(1, stacked.shape[0]):
        for k in range(n):
            out[k] += stacked[m, k]
    for k in range(n):
        out[k] += first[k]


@njit(cache=True, error_model="numpy", **_NO_NRT)
def _copy_into(dst, src):
    """``dst[...] = src`` for contiguous arrays of one shape, as a loop (see
    :func:`_product_with_messages`: the slice assignment compiled its
    broadcasting error message, 2.6 s)."""
    n = dst.size
    out = dst.reshape(n)
    values = src.reshape(n)
    for k in range(n):
        out[k] = values[k]


@njit(cache=True, error_model="numpy")
def _recompute(cavities, marginals_and_messages, n_layers, bias):
    """Marginals from scratch, cavity x all example messages (§6, once per iteration).

    ``cavities``: lists over layers ``(cav_tw, cav_rw, cav_tb, cav_rb)``;
    ``marginals_and_messages``: ``(q_tw, q_rw, q_tb, q_rb, msg_tw, msg_rw,
    msg_tb, msg_rb)``, as in :func:`visit_kernel`.  Without biases their
    marginals stay the cavities (no message is written to them, and their
    message arrays are uninitialised).
    """
    cav_tw, cav_rw, cav_tb, cav_rb = cavities
    q_tw, q_rw, q_tb, q_rb, msg_tw, msg_rw, msg_tb, msg_rb = marginals_and_messages
    # Summed in the marginals themselves: a copy or a temporary of a layer's
    # size would add to the peak memory of a fit.
    for layer in range(n_layers):
        _product_with_messages(cav_tw[layer], msg_tw[layer], q_tw[layer])
        _product_with_messages(cav_rw[layer], msg_rw[layer], q_rw[layer])
        if bias:
            _product_with_messages(cav_tb[layer], msg_tb[layer], q_tb[layer])
            _product_with_messages(cav_rb[layer], msg_rb[layer], q_rb[layer])


@njit(cache=True, error_model="numpy")
def _sweep(data, caches, read_old, store):
    """One iteration of :func:`visit_kernel`: every example of the batch once.

    ``read_old``: the examples have messages to divide out; ``store``: their
    new messages are kept for a later iteration.  The per-layer entries of
    ``data`` and ``caches`` are lists, so that this function, the largest to
    compile, is compiled once for networks of every depth.
    Returns the LeakyReLU forward fallbacks.
    """
    (q_tw, q_rw, q_tb, q_rb, msg_tw, msg_rw, msg_tb, msg_rb, back_t, back_r, n_layers, X, Y,
     labels, order, per_example, bias, alpha, kind, noise_var, regularize, reg_var, am_noise, u,
     width, min_mass) = data
    w_m, w_v, b_m, b_v, z_m, z_v, x_m, x_v, tau_z, rho_z, work, x_sq, out_work = caches
    n_fallback = 0
    for s in range(order.shape[0]):
        i = order[s]
        m = i if per_example else 0
        # ---- forward: first layer, EP cavities of the example (§5.4)
        # (without biases no bias message is written, so none is read)
        _bias_moments(q_tb[0], q_rb[0], msg_tb[0], msg_rb[0], m, read_old and bias, b_m[0],
                      b_v[0])
        _first_forward(q_tw[0], q_rw[0], msg_tw[0], msg_rw[0], m, read_old, X[i], w_m[0],
                       w_v[0], b_m[0], b_v[0], z_m[0], z_v[0])
        # ---- forward: hidden layers (§5.6 (b), §5.3)
        for layer in range(1, n_layers):
            xm, xv = x_m[layer], x_v[layer]
            n_fallback += _leaky_forward_layer(z_m[layer - 1], z_v[layer - 1],
                                               back_t[layer - 1][i], back_r[layer - 1][i],
                                               alpha, xm, xv, work)
            _bias_moments(q_tb[layer], q_rb[layer], msg_tb[layer], msg_rb[layer], m,
                          read_old and bias, b_m[layer], b_v[layer])
            # VMP on the weight marginals: no cavity (§5.3)
            _forward_layer(q_tw[layer], q_rw[layer], xm, xv, w_m[layer], w_v[layer], b_m[layer],
                           b_v[layer], z_m[layer], z_v[layer])
        # ---- output factor (§5.8-5.11)
        _output(kind, z_m[n_layers - 1], z_v[n_layers - 1], Y, labels, i, noise_var,
                regularize, reg_var, am_noise, u, width, min_mass, tau_z, rho_z, out_work)
        # ---- backward: hidden layers, top first (§5.3, §5.6 (c))
        for layer in range(n_layers - 1, 0, -1):
            bt = back_t[layer - 1][i]
            br = back_r[layer - 1][i]
            _hidden_backward(q_tw[layer], q_rw[layer], q_tb[layer], q_rb[layer],
                             msg_tw[layer], msg_rw[layer], msg_tb[layer], msg_rb[layer],
                             m, read_old, store, bias, x_m[layer], x_v[layer], w_m[layer],
                             w_v[layer], b_m[layer], b_v[layer], z_m[layer], z_v[layer],
                             tau_z, rho_z, bt, br, x_sq)
            _leaky_backward_layer(z_m[layer - 1], z_v[layer - 1], bt, br, alpha, tau_z, rho_z,
                                  work)
        # ---- backward: first layer, exact weighted sum (§5.4, §5.1)
        _first_backward(q_tw[0], q_rw[0], q_tb[0], q_rb[0], msg_tw[0], msg_rw[0],
                        msg_tb[0], msg_rb[0], m, read_old, store, bias, X[i], w_m[0], w_v[0],
                        b_m[0], b_v[0], z_m[0], z_v[0], tau_z, rho_z)
    return n_fallback


#: Length granularity of :func:`visit_kernel`'s per-layer tuples.
LAYER_TUPLE_STEP = 4


def layer_tuple(arrays, ndim):
    """``arrays`` as a tuple for :func:`visit_kernel`, padded with empty arrays
    of ``ndim`` dimensions to a multiple of :data:`LAYER_TUPLE_STEP` entries
    (at least one).

    Numba compiles the kernel once per tuple length (4.5 s each, then cached
    on disk: the rest of the kernel takes lists, :func:`_sweep`), so that
    without padding a search over the number of hidden layers compiled it once
    per depth; padded, networks of one to three hidden layers share one
    compilation, four to seven the next."""
    arrays = tuple(arrays)
    n = max(len(arrays), 1)
    size = -(-n // LAYER_TUPLE_STEP) * LAYER_TUPLE_STEP
    return arrays + (np.zeros((0,) * ndim),) * (size - len(arrays))


@njit(cache=True, error_model="numpy")
def _layer_list(arrays, n_layers):
    """The first ``n_layers`` arrays of a padded per-layer tuple
    (:func:`layer_tuple`) as a list, whose type does not depend on the depth."""
    return [arrays[layer] for layer in range(n_layers)]


@njit(cache=True, error_model="numpy")
def visit_kernel(
    cav_tw, cav_rw, cav_tb, cav_rb,
    q_tw, q_rw, q_tb, q_rb,
    msg_tw, msg_rw, msg_tb, msg_rb,
    back_t, back_r, n_layers,
    X, Y, labels, order, n_iter, per_example, bias, alpha,
    kind, noise_var, regularize, reg_var, am_noise, u, width, min_mass,
):  # fmt: skip
    """All iterations of one visit of the active batch (§6 steps 1-2), in place.

    Parameters
    ----------
    cav_tw, cav_rw, cav_tb, cav_rb : tuples over layers of arrays
        The batch's cavities ``prior x other slots`` (weights ``(n_out, n_in)``,
        the first layer's ``(n_in, n_out)``; biases ``(n_out,)``).
    q_tw, q_rw, q_tb, q_rb : tuples of arrays
        Working marginals, equal to the cavities on entry.
    msg_tw, msg_rw, msg_tb, msg_rb : tuples of arrays
        Example messages ``(n_m, n_out, n_in)`` (the first layer's ``(n_m, n_in,
        n_out)``) / ``(n_m, n_out)`` (``n_m = n`` per example, 1 per batch),
        uninitialised on entry: an example's message
        is written in its first iteration and read from its second; the last
        iteration's is not kept (it may overwrite the slot, which nothing
        reads again: the batch's product is the marginal over the cavity), and
        ``per_example=False`` never touches them.
    back_t, back_r : tuples of arrays ``(n, d)``
        Stored backward messages to each hidden layer's input (entry ``l``:
        layer ``l + 1``'s input; entry ``n_layers - 1`` is never read).
    n_layers : int
        The network's layers; every tuple above may be longer, padded by
        :func:`layer_tuple` (entries from ``n_layers`` on are never read).
    X : array of shape (n, n_in)
    Y : array of shape (n, n_out)
        Regression targets (``kind == REGRESSION``).
    labels : int array of shape (n,)
        Class indices (the classification kinds).
    order : int array of shape (n,)
        Example order (the same for every iteration).
    n_iter : int
    per_example, bias : bool
    alpha : float
        LeakyReLU slope.
    kind : int
        :data:`REGRESSION`, :data:`ONE_HOT_REGRESSION`, :data:`ARGMAX` or
        :data:`SOFTMAX`.
    noise_var, regularize, reg_var, am_noise : output-factor parameters
    u, width, min_mass : the softmax integration grid ``linspace(0, 1, n_grid)``,
        half width and minimum mass.

    Returns
    -------
    n_fallback : int
        LeakyReLU forward fallbacks to the direct message with an informative
        backward message (as counted by the array engine).
    """
    n_fallback = 0
    # per-layer caches of the current example
    w_m = [np.empty_like(cav_tw[layer]) for layer in range(n_layers)]
    w_v = [np.empty_like(cav_tw[layer]) for layer in range(n_layers)]
    b_m = [np.empty_like(cav_tb[layer]) for layer in range(n_layers)]
    b_v = [np.empty_like(cav_tb[layer]) for layer in range(n_layers)]
    # (the hidden layers' sums and the inputs they feed padded for the
    # LeakyReLU loops, _pad_layer; the output layer's sums not: _output)
    z_m = [np.empty(_padded(cav_tb[layer].shape[0]) if layer < n_layers - 1
                    else cav_tb[layer].shape[0]) for layer in range(n_layers)]
    z_v = [np.empty(z_m[layer].shape[0]) for layer in range(n_layers)]
    x_m = [np.empty(_padded(cav_tw[layer].shape[1])) for layer in range(n_layers)]
    x_v = [np.empty(_padded(cav_tw[layer].shape[1])) for layer in range(n_layers)]
    width_max = 1
    for layer in range(n_layers):
        width_max = max(width_max, _padded(cav_tw[layer].shape[0]),
                        _padded(cav_tw[layer].shape[1]))
    tau_z = np.empty(width_max)  # message into the current layer's outputs
    rho_z = np.empty(width_max)
    work = np.empty((3, width_max))  # the LeakyReLU layers' workspace
    # (the per-layer arrays as lists: _sweep's types do not depend on the depth)
    data = (_layer_list(q_tw, n_layers), _layer_list(q_rw, n_layers),
            _layer_list(q_tb, n_layers), _layer_list(q_rb, n_layers),
            _layer_list(msg_tw, n_layers), _layer_list(msg_rw, n_layers),
            _layer_list(msg_tb, n_layers), _layer_list(msg_rb, n_layers),
            _layer_list(back_t, n_layers), _layer_list(back_r, n_layers),
            n_layers, X, Y, labels, order, per_example, bias, alpha, kind, noise_var, regularize,
            reg_var, am_noise, u, width, min_mass)
    cavities = (_layer_list(cav_tw, n_layers), _layer_list(cav_rw, n_layers),
                _layer_list(cav_tb, n_layers), _layer_list(cav_rb, n_layers))
    x_sq = np.empty(width_max)  # _hidden_backward's
    out_work = output_workspace(cav_tb[n_layers - 1].shape[0], u.shape[0])
    caches = (w_m, w_v, b_m, b_v, z_m, z_v, x_m, x_v, tau_z, rho_z, work, x_sq, out_work)
    for it in range(n_iter):
        # An example's old message exists from its second iteration on, and a
        # new one is stored only if a later iteration divides it out again:
        # the batch's product is the last marginal over the cavity (network.
        # _ActiveBatch.release_layer_message), so "per_batch" stores no messages.
        read_old = per_example and it > 0
        store = per_example and it < n_iter - 1
        if not per_example and it > 0:  # restart from the cavity (memory="per_batch")
            for layer in range(n_layers):
                _copy_into(q_tw[layer], cav_tw[layer])
                _copy_into(q_rw[layer], cav_rw[layer])
                _copy_into(q_tb[layer], cav_tb[layer])
                _copy_into(q_rb[layer], cav_rb[layer])
        n_fallback += _sweep(data, caches, read_old, store)
        if store:  # from scratch before the next iteration (per_batch restarts instead)
            _recompute(cavities, data[:8], n_layers, bias)
    return n_fallback
