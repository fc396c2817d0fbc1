"""Element-wise activations and their Gaussian moment propagation.

Every function here is a pure function of arrays of any shape.  The array
namespace ``xp`` (NumPy, CuPy, or the strict test namespace) is taken from the
inputs with :func:`skbayesnn._backend.array_namespace`, and special functions
come from :func:`skbayesnn._backend.special`, so the same code runs on a GPU.

Two ways of pushing a Gaussian ``Z ~ N(mean, var)`` through an activation ``g``
are offered, both returning a triple ``(mean_out, var_out, jacobian)``:

* :func:`linearized_moments` -- local linearisation at the mean (TAGI,
  tagi.md §3.2; analytic predictive, analytic_predictive.md §3):
  ``g(mean)``, ``g'(mean)**2 * var`` and ``g'(mean)``.
* :func:`moment_matched_moments` -- the exact mean and variance of ``g(Z)``
  (PBP, pbp.md §2.2; message passing, message_passing.md §5.6;
  analytic_predictive.md §13.2) with the "effective Jacobian"
  ``Cov(Z, g(Z)) / Var(Z) = E[g'(Z)]`` (Stein's lemma), so that code written for
  the linearised triple can use it unchanged.

All formulas are written so that no intermediate overflows or produces an
invalid value, for every finite input (no ``np.errstate`` is needed, which CuPy
lacks): both branches of every ``xp.where`` are evaluated on safe arguments.
Negative input variances are treated as 0.
"""

from __future__ import annotations

import math
from functools import lru_cache

import numpy as np

from .._backend import array_namespace, special

__all__ = [
    "ACTIVATIONS",
    "APPROXIMATIONS",
    "check_activation",
    "activation_value",
    "activation_derivative",
    "linearized_moments",
    "relu_moments",
    "leaky_relu_moments",
    "moment_matched_moments",
    "activation_moments",
]

ACTIVATIONS = ("relu", "leaky_relu", "tanh", "sigmoid", "softplus", "identity")
APPROXIMATIONS = ("linearize", "moment_match")

_SQRT_2_OVER_PI = math.sqrt(2.0 / math.pi)
_INV_SQRT_2 = 1.0 / math.sqrt(2.0)
# |mean/std| beyond which the rectified Gaussian is deterministic in float64:
# ndtr(-50) underflows to 0 and ndtr(50) rounds to 1 (ndtr(-38.5) is already 0),
# and norm_pdf(50) underflows.  Clipping the standardised mean here keeps every
# intermediate bounded (gamma <= ~50) without changing any result.
_A_MAX = 50.0
# Choice of quadrature for the smooth activations (see _use_laguerre): plain
# Gauss-Hermite where std <= _S_SWITCH (in the natural scale of the activation)
# or where the kink at 0 lies >= 2 std + _A_FAR standard deviations away from the
# mean; the step + Gauss-Laguerre decomposition elsewhere.  Tuned on a
# 60-digit mpmath reference with 64 nodes (both rules reach <= 1e-9 relative
# error on their side of the switch).
_S_SWITCH = 1.5
_A_FAR = 8.0
# Steps |std x| up to which a difference g(m + std x) - g(m) is computed from the
# step itself (expm1 of it stays finite and far from overflow).
_NEAR_STEP = 30.0


# ---------------------------------------------------------------------------
# validation helpers
# ---------------------------------------------------------------------------


def check_activation(name):
    """Validate an activation name.

    Parameters
    ----------
    name : str
        One of :data:`ACTIVATIONS`.

    Returns
    -------
    name : str
        ``name`` unchanged.

    Raises
    ------
    ValueError
        If ``name`` is not one of :data:`ACTIVATIONS`.
    """
    if not isinstance(name, str) or name not in ACTIVATIONS:
        raise ValueError(f"activation must be one of {ACTIVATIONS}, got {name!r}.")
    return name


def _check_approx(approx):
    if not isinstance(approx, str) or approx not in APPROXIMATIONS:
        raise ValueError(f"approx must be one of {APPROXIMATIONS}, got {approx!r}.")
    return approx


def _check_slope(negative_slope):
    try:
        slope = float(negative_slope)
    except (TypeError, ValueError):
        raise ValueError(
            f"negative_slope must be a finite number >= 0, got {negative_slope!r}."
        ) from None
    if not (math.isfinite(slope) and slope >= 0.0):
        raise ValueError(f"negative_slope must be a finite number >= 0, got {negative_slope!r}.")
    return slope


def _as_float(xp, x):
    return xp.asarray(x, dtype=xp.float64)


def _mean_var(mean, var):
    """Namespace, float64 broadcast ``mean`` and ``var`` (None -> 0, negatives -> 0)."""
    xp = array_namespace(mean, var)
    mean = _as_float(xp, mean)
    if var is None:
        var = xp.zeros_like(mean)
    else:
        var = xp.maximum(_as_float(xp, var), 0.0)
    mean, var = xp.broadcast_arrays(mean, var)
    return xp, mean, var


# ---------------------------------------------------------------------------
# deterministic activations
# ---------------------------------------------------------------------------


def activation_value(name, x, *, negative_slope=0.01):
    """Evaluate the activation ``g(x)`` element-wise.

    Parameters
    ----------
    name : str
        One of :data:`ACTIVATIONS`.
    x : array-like
        Input of any shape.
    negative_slope : float, default=0.01
        Slope of ``"leaky_relu"`` for ``x < 0`` (finite, >= 0).

    Returns
    -------
    y : array of float64, same shape as ``x``
        ``max(x, 0)``, ``x if x > 0 else negative_slope * x``, ``tanh(x)``,
        ``1 / (1 + exp(-x))``, ``log(1 + exp(x))`` (computed as
        ``logaddexp(0, x)``) or ``x`` (a copy).
    """
    check_activation(name)
    xp = array_namespace(x)
    slope = _check_slope(negative_slope) if name == "leaky_relu" else 0.0
    return _value(xp, name, _as_float(xp, x), slope)


def _value(xp, name, x, slope):
    """``g(x)`` for a checked ``name``/``slope`` and a float64 array ``x``."""
    if name == "relu":
        return xp.maximum(x, 0.0)
    if name == "leaky_relu":
        return xp.where(x > 0, x, slope * x)
    if name == "tanh":
        return xp.tanh(x)
    if name == "sigmoid":
        return special(xp).expit(x)
    if name == "softplus":
        return xp.logaddexp(0.0, x)
    return x + 0.0  # identity (a fresh array)


def activation_derivative(name, x, *, negative_slope=0.01):
    """Evaluate the derivative ``g'(x)`` element-wise.

    The ReLU derivative at exactly 0 is 0 and the leaky ReLU derivative there is
    ``negative_slope``, matching PyTorch's autograd (analytic_predictive.md §3).

    Parameters
    ----------
    name : str
        One of :data:`ACTIVATIONS`.
    x : array-like
        Input of any shape.
    negative_slope : float, default=0.01
        Slope of ``"leaky_relu"`` for ``x <= 0`` (finite, >= 0).

    Returns
    -------
    dy : array of float64, same shape as ``x``
        ``1[x > 0]``, ``1 if x > 0 else negative_slope``,
        ``1 - tanh(x)**2``, ``s(x) (1 - s(x))`` with ``s`` the logistic
        sigmoid, ``s(x)`` (softplus) or 1 (identity).  The tanh and sigmoid
        derivatives are evaluated as ``4 s(2x) s(-2x)`` and ``s(x) s(-x)``, which
        keep full relative accuracy in the tails (``1 - tanh(x)**2`` rounds to 0
        for ``|x| > 19``).
    """
    check_activation(name)
    xp = array_namespace(x)
    slope = _check_slope(negative_slope) if name == "leaky_relu" else 0.0
    return _derivative(xp, name, _as_float(xp, x), slope)


def _derivative(xp, name, x, slope):
    """``g'(x)`` for a checked ``name``/``slope`` and a float64 array ``x``."""
    if name == "relu":
        return (x > 0).astype(x.dtype)
    if name == "leaky_relu":
        return xp.where(x > 0, 1.0, slope)
    if name == "identity":
        return xp.ones_like(x)
    expit = special(xp).expit
    if name == "tanh":
        return 4.0 * expit(2.0 * x) * expit(-2.0 * x)
    if name == "sigmoid":
        return expit(x) * expit(-x)
    return expit(x)  # softplus


def linearized_moments(name, mean, var, *, negative_slope=0.01):
    """Moments of ``g(Z)`` under local linearisation of ``g`` at the mean.

    ``g(Z) ~= g(m) + g'(m) (Z - m)`` gives ``N(g(m), g'(m)**2 var)``
    (tagi.md §3.2, analytic_predictive.md §3, Eqs. 5-6).

    Parameters
    ----------
    name : str
        One of :data:`ACTIVATIONS`.
    mean, var : array-like
        Mean and variance of ``Z`` (broadcast together; ``var=None`` means 0).
    negative_slope : float, default=0.01
        Slope of ``"leaky_relu"``.

    Returns
    -------
    mean_out : array
        ``g(mean)``.
    var_out : array
        ``jacobian**2 * var``.
    jacobian : array
        ``g'(mean)``.
    """
    check_activation(name)
    slope = _check_slope(negative_slope) if name == "leaky_relu" else 0.0
    xp, mean, var = _mean_var(mean, var)
    return linearize_unchecked(xp, name, mean, var, slope)


def value_unchecked(xp, name, x, slope):
    """:func:`activation_value` without argument checks, for inner loops
    (``name``, ``slope`` valid and ``x`` a float64 array)."""
    return _value(xp, name, x, slope)


def linearize_unchecked(xp, name, mean, var, slope):
    """:func:`linearized_moments` without argument checks, for inner loops.

    ``name`` and ``slope`` must be valid and ``mean``, ``var`` float64 arrays of
    one shape with ``var >= 0`` (TAGI's training step calls this once per layer
    and batch, where the checks cost as much as the arithmetic).
    """
    jac = _derivative(xp, name, mean, slope)
    return _value(xp, name, mean, slope), jacobian_squared(name, jac) * var, jac


def jacobian_squared(name, jac):
    """``jac ** 2``; the 0/1 ReLU Jacobian is its own square (saves an array op)."""
    return jac if name == "relu" else jac * jac


# ---------------------------------------------------------------------------
# exact rectifier moments
# ---------------------------------------------------------------------------


def standardized_mean(xp, mean, std):
    """``a = mean / std`` of a Gaussian, clipped to ``[-_A_MAX, _A_MAX]``.

    Where ``std == 0`` the result is ``+-_A_MAX`` by the sign of the mean
    (``mean == 0`` counts as negative, so that a ReLU's Jacobian there is 0).
    ``|clip(mean)| <= _A_MAX * std``, so the division cannot overflow even for a
    denormal ``std``; the clip changes no float64 result (see ``_A_MAX``).
    Returns ``(a, std > 0, std with 0 replaced by 1)``; shared by every
    rectified-Gaussian computation (here, core.spike_slab, inference.pbp).
    """
    pos = std > 0
    std_safe = xp.where(pos, std, 1.0)
    lim = _A_MAX * std
    a = xp.where(pos, xp.clip(mean, -lim, lim) / std_safe, xp.where(mean > 0, _A_MAX, -_A_MAX))
    return a, pos, std_safe


def inverse_mills_ratio(xp, a):
    """``phi(a) / Phi(a)`` without cancellation or underflow (pbp.md §2.2).

    For ``a < 0``: ``sqrt(2/pi) / erfcx(-a/sqrt(2))`` (``erfcx(x) ~ 1/(x
    sqrt(pi))`` for ``x >> 0``; it reproduces the asymptotic ``-a - 1/a + 2/a^3``).
    For ``a >= 0``, ``Phi(a) >= 1/2`` and the ratio is safe, whereas erfcx would
    overflow.  Each branch gets an argument that is safe for it.
    """
    sp = special(xp)
    a_neg = xp.minimum(a, 0.0)
    a_pos = xp.maximum(a, 0.0)
    return xp.where(
        a < 0,
        _SQRT_2_OVER_PI / sp.erfcx(-a_neg * _INV_SQRT_2),
        sp.norm_pdf(a_pos) / sp.ndtr(a_pos),
    )


def _relu_parts(xp, mean, var):
    """Standardised quantities of the rectified Gaussian (pbp.md §2.2).

    Returns ``(std, a, Phi(a), Phi(-a), gamma)`` with ``a`` from
    :func:`standardized_mean` and the inverse Mills ratio ``gamma = phi(a) /
    Phi(a)``.
    """
    sp = special(xp)
    std = xp.sqrt(var)
    a, _, _ = standardized_mean(xp, mean, std)
    cdf = sp.ndtr(a)
    ccdf = sp.ndtr(-a)  # Phi(-a) directly: 1 - Phi(a) would cancel for a >> 0
    return std, a, cdf, ccdf, inverse_mills_ratio(xp, a)


def _relu_core(xp, mean, var):
    std, a, cdf, ccdf, gamma = _relu_parts(xp, mean, var)
    # E[ReLU(Z)] = Phi(a) (m + s gamma) = m Phi(a) + s phi(a)  (pbp.md §2.2,
    # message_passing.md §5.6 eq. 5).  For a < 0 the form s Phi(a) (a + gamma)
    # is a product of non-negative factors (gamma > -a); for a >= 0 both terms of
    # m Phi(a) + s phi(a) are non-negative.  Where a was clipped, Phi and phi are
    # exactly 0/1 and 0, so the result is exactly max(m, 0).
    a_plus_g = a + gamma
    mean_out = xp.where(
        a < 0,
        std * cdf * a_plus_g,
        mean * cdf + std * special(xp).norm_pdf(xp.maximum(a, 0.0)),
    )
    # Var[ReLU(Z)] = var * Phi(a) * [ (1 - gamma (gamma + a))  +  Phi(-a) (a + gamma)^2 ]
    # (pbp.md §2.2 "equivalent form": spike at 0 plus truncated normal).  The
    # truncated-normal factor 1 - gamma (gamma + a) is in (0, 1) mathematically
    # but cancels for a << 0 (relative error ~ eps a^2 <= 3e-13 while Phi(a) is
    # representable), so it is clipped at 0.  The whole factor is <= 1 because
    # ReLU is 1-Lipschitz, so clipping at 1 only removes rounding error.
    trunc = xp.clip(1.0 - gamma * a_plus_g, 0.0, 1.0)
    factor = xp.clip(cdf * (trunc + ccdf * a_plus_g * a_plus_g), 0.0, 1.0)
    var_out = var * factor
    return mean_out, var_out, cdf


def relu_moments(mean, var):
    """Exact moments of ``ReLU(Z)`` for ``Z ~ N(mean, var)``.

    Parameters
    ----------
    mean, var : array-like
        Mean and variance of ``Z`` (broadcast together; ``var=None`` means 0,
        negative variances are treated as 0).

    Returns
    -------
    mean_out : array
        ``E[ReLU(Z)] = m Phi(a) + s phi(a)`` with ``s = sqrt(var)``, ``a = m/s``.
    var_out : array
        ``Var[ReLU(Z)]`` (pbp.md §2.2), always in ``[0, var]``.
    jacobian : array
        ``Cov(Z, ReLU(Z)) / Var(Z) = E[1[Z > 0]] = Phi(a)`` (Stein's lemma).

    Notes
    -----
    The inverse Mills ratio ``phi(a)/Phi(a)`` is computed as
    ``sqrt(2/pi) / erfcx(-a/sqrt(2))`` for ``a < 0`` so that no cancellation or
    overflow occurs for any finite input.  ``var == 0`` gives the deterministic
    ReLU: ``max(mean, 0)``, variance 0 and Jacobian ``1[mean > 0]``.
    """
    xp, mean, var = _mean_var(mean, var)
    return _relu_core(xp, mean, var)


def leaky_relu_moments(mean, var, negative_slope=0.01):
    """Exact moments of ``LeakyReLU(Z)`` for ``Z ~ N(mean, var)``.

    Uses ``LReLU_a(z) = a z + (1 - a) ReLU(z)`` (message_passing.md §5.6 (a)):

    * ``E = (1 - a) E[ReLU(Z)] + a m``,
    * ``Var = a^2 v + (1 - a)^2 Var[ReLU(Z)] + 2 a (1 - a) v Phi(m/s)``, using
      ``Cov(Z, ReLU(Z)) = v Phi(m/s)`` (Stein's lemma),
    * ``jacobian = E[LReLU'(Z)] = a + (1 - a) Phi(m/s)``.

    Parameters
    ----------
    mean, var : array-like
        Mean and variance of ``Z`` (broadcast together).
    negative_slope : float, default=0.01
        The slope ``a`` for ``z < 0``.  Any finite ``a >= 0`` is accepted; for
        ``0 <= a <= 1`` every variance term is non-negative (no cancellation),
        for ``a > 1`` the cross term is negative and the result is clipped at 0.
        ``a = 0`` is the ReLU and ``a = 1`` the identity.

    Returns
    -------
    mean_out, var_out, jacobian : arrays
    """
    slope = _check_slope(negative_slope)
    xp, mean, var = _mean_var(mean, var)
    r_mean, r_var, cdf = _relu_core(xp, mean, var)
    b = 1.0 - slope
    mean_out = b * r_mean + slope * mean
    var_out = slope * slope * var + b * b * r_var + 2.0 * slope * b * var * cdf
    if slope > 1.0:
        var_out = xp.maximum(var_out, 0.0)
    jac = slope + b * cdf
    # var == 0: the deterministic activation exactly (b m + a m may differ from m
    # by an ulp).
    det = var == 0
    mean_out = xp.where(det, xp.where(mean > 0, mean, slope * mean), mean_out)
    jac = xp.where(det, xp.where(mean > 0, 1.0, slope), jac)
    return mean_out, var_out, jac


# ---------------------------------------------------------------------------
# smooth activations: quadrature
# ---------------------------------------------------------------------------


@lru_cache(maxsize=16)
def _hermite_rule(n):
    """Probabilists' Gauss-Hermite rule normalised to the N(0, 1) measure (host)."""
    x, w = np.polynomial.hermite_e.hermegauss(n)
    return x, w / w.sum()


@lru_cache(maxsize=16)
def _laguerre_rule(n):
    """Gauss-Laguerre rule for int_0^inf e^{-u} f(u) du (host)."""
    return np.polynomial.laguerre.laggauss(n)


def _check_n_quadrature(n_quadrature):
    if isinstance(n_quadrature, bool) or not isinstance(n_quadrature, (int, np.integer)):
        raise ValueError(f"n_quadrature must be an integer >= 2, got {n_quadrature!r}.")
    if n_quadrature < 2:
        raise ValueError(f"n_quadrature must be an integer >= 2, got {n_quadrature!r}.")
    return int(n_quadrature)


def _use_laguerre(xp, mean, std):
    """Where the step + Gauss-Laguerre rule is used instead of Gauss-Hermite.

    Gauss-Hermite (nodes within ~10.5 standard deviations) resolves the
    activation's transition near 0, of width ~1/std in standardised units, only
    for std <= _S_SWITCH; it also stays accurate when the transition is far in
    the tail (|mean|/std >= 2 std + _A_FAR: the Gaussian tilted by
    exp(2z), which carries the tail moments, is centred 2 std from the mean, and
    the kink's contribution is ~exp(-(|a| - 2 std)^2 / 2) relative).  Laguerre
    nodes are too sparse far from 0 for a narrow Gaussian, which is exactly that
    far-tail case, so the two rules complement each other.
    """
    a_abs = xp.abs(mean) / xp.maximum(std, _S_SWITCH)
    return (std > _S_SWITCH) & (a_abs < 2.0 * std + _A_FAR)


def _sigmoid_moments_nonpositive(xp, mean, var, n):
    """``(E, Var, E[s'])`` of ``s(Z)`` (logistic) for ``Z ~ N(mean, var)``, ``mean <= 0``.

    Callers reflect positive means (``s(-z) = 1 - s(z)``), so that the mean and
    the variance are computed on the side where ``s`` is small and keep full
    relative accuracy (on the other side ``s`` rounds to 1).

    * Gauss-Hermite in the standardised variable, with the centred variance
      ``E[(s - E s)^2]`` (no cancellation), where :func:`_use_laguerre` is
      False (``std <= _S_SWITCH``, or the kink far in the tail).
    * Elsewhere (``std > _S_SWITCH``) the Gauss-Hermite integrand is a
      near-step of width ``1/std`` and 64 nodes err by tens of Monte Carlo
      standard errors at ``std = 40``.  Instead write ``s = H + R`` with ``H``
      the Heaviside step (``E[H(Z)] = Phi(m/s)`` exactly) and
      ``R(z) = s(z) - H(z)``, which decays like ``e^{-|z|}``; integrate ``R``
      over each half-line with Gauss-Laguerre, using the closed forms
      ``e^u R(u) = -s(u)``, ``e^u R(-u) = s(u)``.  Likewise
      ``(s - mu)^2 = (H - mu)^2 + R (s + H - 2 mu)`` and ``e^u s'(u) = s(u)^2``.
    """
    sp = special(xp)
    expit = sp.expit
    std = xp.sqrt(var)

    x, w = _hermite_rule(n)
    x = xp.asarray(x)
    w = xp.asarray(w)
    # --- Gauss-Hermite branch (bounded integrand: safe for every finite std) ---
    # Centred twice: g(z) - g(mean) first (exactly 0 when std is negligible, so a
    # deterministic input gets variance 0, not rounding noise), then about the
    # quadrature mean.  The difference from the exact step h = std x, as
    # s(m + h) - s(m) = -s(m + h) s(-m) expm1(-h): z = m + h rounds to m when
    # std is below ulp(m), and s(z) - s(m) would be rounding noise (where |h|
    # is large the plain difference has no cancellation and expm1 would overflow).
    step = std[..., None] * x
    z = mean[..., None] + step
    sz = expit(z)
    s0 = expit(mean)
    near = xp.abs(step) <= _NEAR_STEP
    exact = -sz * expit(-mean)[..., None] * xp.expm1(-xp.clip(step, -_NEAR_STEP, _NEAR_STEP))
    gc = xp.where(near, exact, sz - s0[..., None])
    shift = gc @ w
    gh_mean = s0 + shift
    d = gc - shift[..., None]
    gh_var = (d * d) @ w
    gh_jac = (sz * expit(-z)) @ w

    # --- step + Gauss-Laguerre branch (std floored so it never divides by 0) ---
    u, om = _laguerre_rule(n)
    u = xp.asarray(u)
    om = xp.asarray(om)
    std_l = xp.maximum(std, _S_SWITCH)[..., None]
    m = mean[..., None]
    dens_pos = sp.norm_pdf((u - m) / std_l) / std_l  # N(u; m, s^2)
    dens_neg = sp.norm_pdf((u + m) / std_l) / std_l  # N(-u; m, s^2)
    su = expit(u)
    smu = expit(-u)
    cdf = sp.ndtr(mean / std_l[..., 0])
    ccdf = sp.ndtr(-mean / std_l[..., 0])
    l_mean = cdf + (su * (dens_neg - dens_pos)) @ om
    mu = l_mean[..., None]
    l_var = (
        ccdf * l_mean * l_mean
        + cdf * (1.0 - l_mean) ** 2
        + (su * ((smu - 2.0 * mu) * dens_neg - (su + 1.0 - 2.0 * mu) * dens_pos)) @ om
    )
    l_jac = (su * su * (dens_pos + dens_neg)) @ om

    # --- far tail with a wide Gaussian: Gauss-Hermite under exponential tilting ---
    # s(z) = e^z s(-z), so E[s(Z)^k s(-Z)^j] = exp(k m + k^2 v / 2) E[s(-Y)^(k+j)]
    # with Y ~ N(m + k v, v): the tilted Gaussian, centred where the integrand's
    # mass is (k std standard deviations out, beyond the nodes of the plain
    # rule for std > _S_SWITCH), and s(-Y) ~ 1 there is smooth.  No
    # cancellation in E[s^2] - E[s]^2: their ratio is exp(-v) times a factor
    # near 1.
    lag = _use_laguerre(xp, mean, std)
    wide = std > _S_SWITCH
    # The rule for E[s^k] needs its tilted Gaussian N(m + k v, v) 8 std below
    # the kink: for the variance (k = 2) that is the far tail, where Laguerre
    # is not used; the mean and E[s'] (k = 1) take it more widely, also where
    # Laguerre nodes are too sparse for a large |m| (sigmoid(-569.5, v=225):
    # Laguerre's mean was 1e-12 of the true one).  Selected lanes have
    # exponents <= 0; other lanes get v = 0 here (mean <= 0: nothing overflows).
    tilt1 = wide & (mean + var + 8.0 * std <= 0.0)
    tilt2 = wide & ~lag
    v1 = xp.where(tilt1, var, 0.0)
    v2 = xp.where(tilt2, var, 0.0)
    one = expit(-(m + v1[..., None] + std_l * x))
    two = expit(-(m + 2.0 * v2[..., None] + std_l * x))
    t_mean = xp.exp(mean + 0.5 * v1) * (one @ w)
    t_jac = xp.exp(mean + 0.5 * v1) * ((one * one) @ w)
    t_var = xp.exp(2.0 * mean + 2.0 * v2) * ((two * two) @ w) - t_mean * t_mean

    # s(Z) lies in [0, 1], so its mean does, and E[s'] in [0, 1/4]; the clips
    # only remove quadrature/rounding error.
    mean_out = xp.clip(xp.where(tilt1, t_mean, xp.where(lag, l_mean, gh_mean)), 0.0, 1.0)
    var_out = xp.clip(xp.where(tilt2, t_var, xp.where(lag, l_var, gh_var)), 0.0, 0.25)
    jac = xp.clip(xp.where(tilt1, t_jac, xp.where(lag, l_jac, gh_jac)), 0.0, 0.25)
    return mean_out, var_out, jac


def _sigmoid_moments(xp, mean, var, n):
    neg = -xp.abs(mean)
    mu, v, jac = _sigmoid_moments_nonpositive(xp, neg, var, n)
    # s(-z) = 1 - s(z): reflect back; the variance and E[s'] are symmetric.
    return xp.where(mean > 0, 1.0 - mu, mu), v, jac


def _tanh_moments(xp, mean, var, n):
    # tanh(z) = 1 - 2 s(-2z) = 2 s(2z) - 1 and tanh is odd: with
    # Y ~ N(-2|m|, 4v), E[tanh Z] = sign(m) (1 - 2 E[s(Y)]), Var = 4 Var[s(Y)],
    # E[tanh'(Z)] = 4 E[s'(Y)].  The sigmoid on the non-positive side keeps the
    # relative accuracy of the variance in the tails (1 - tanh^2 rounds to 0).
    mu, v, jac = _sigmoid_moments_nonpositive(xp, -2.0 * xp.abs(mean), 4.0 * var, n)
    sign = xp.where(mean > 0, 1.0, xp.where(mean < 0, -1.0, 0.0))
    return sign * (1.0 - 2.0 * mu), 4.0 * v, 4.0 * jac


def _softplus_moments(xp, mean, var, n):
    """Moments of softplus(Z) = logaddexp(0, Z).

    * Gauss-Hermite with a centred variance where :func:`_use_laguerre` is False.
    * Elsewhere (``std > _S_SWITCH``): ``softplus(z) = ReLU(z) + L(|z|)``,
      ``L(u) = log1p(e^{-u})``; ReLU moments are exact (pbp.md §2.2) and the
      decaying ``L`` is integrated over both half-lines by Gauss-Laguerre with
      ``e^u L(u) = log1p(t)/t``, ``t = e^{-u}``.  Then
      ``Var = Var[ReLU] + 2 Cov(ReLU, L) + Var[L]``.
    Jacobian ``E[s(Z)]`` comes from the sigmoid moments.
    """
    sp = special(xp)
    std = xp.sqrt(var)

    x, w = _hermite_rule(n)
    x = xp.asarray(x)
    w = xp.asarray(w)
    # Gauss-Hermite is selected for std > _S_SWITCH only when |mean| >= 2 std^2,
    # so capping std at 1e100 changes no selected lane and keeps (g - mean)^2
    # finite in the unselected ones.
    std_gh = xp.minimum(std, 1e100)
    m = mean[..., None]
    step = std_gh[..., None] * x
    z = m + step
    # softplus(z) - softplus(m) = [max(z, 0) - max(m, 0)] + [L(|z|) - L(|m|)] with
    # L(u) = log1p(e^-u); the first bracket uses the exact step where both are
    # positive, so the rounding of z = m + step (~ulp(m)) does not inflate the
    # variance of a nearly linear softplus (m >> 0, tiny std).  Centred about
    # the quadrature mean afterwards.
    relu_diff = xp.where(
        z > 0, xp.where(m > 0, step, z), xp.where(m > 0, -m + 0.0 * step, 0.0 * step)
    )
    gc = relu_diff + (xp.log1p(xp.exp(-xp.abs(z))) - xp.log1p(xp.exp(-xp.abs(m))))
    # Near steps: softplus(m + h) - softplus(m) = log1p(s(m) expm1(h)) from the
    # exact step alone (L(|z|) above still rounds with z); for m > 0 through
    # softplus(z) = z + softplus(-z), h + log1p(s(-m) expm1(-h)), so that the
    # log1p argument stays above -1/2 (no cancellation); expm1 stays finite.
    near = xp.abs(step) <= _NEAR_STEP
    h = xp.clip(step, -_NEAR_STEP, _NEAR_STEP)
    gc_near = xp.where(m > 0, h + xp.log1p(sp.expit(-m) * xp.expm1(-h)),
                       xp.log1p(sp.expit(m) * xp.expm1(h)))
    gc = xp.where(near, gc_near, gc)
    shift = gc @ w
    gh_mean = xp.logaddexp(0.0, mean) + shift
    d = gc - shift[..., None]
    gh_var = (d * d) @ w

    u, om = _laguerre_rule(n)
    u = xp.asarray(u)
    om = xp.asarray(om)
    std_l = xp.maximum(std, _S_SWITCH)
    # Exact ReLU part; where the Laguerre branch is selected std > _S_SWITCH, so
    # std_l == std there.
    r_mean, r_var, _ = _relu_core(xp, mean, var)
    s = std_l[..., None]
    m = mean[..., None]
    dens_pos = sp.norm_pdf((u - m) / s) / s
    dens_neg = sp.norm_pdf((u + m) / s) / s
    t = xp.exp(-u)
    lu = xp.log1p(t)
    rho = lu / t  # e^u L(u), in (log 2, 1]
    both = dens_pos + dens_neg
    e_l = (rho * both) @ om  # E[L(|Z|)]
    e_l2 = (rho * lu * both) @ om  # E[L(|Z|)^2]
    e_lr = (rho * u * dens_pos) @ om  # E[L(|Z|) ReLU(Z)]
    l_mean = r_mean + e_l
    l_var = r_var + 2.0 * (e_lr - r_mean * e_l) + (e_l2 - e_l * e_l)

    lag = _use_laguerre(xp, mean, std)
    # softplus(z) > max(z, 0): the mean is at least E[ReLU(Z)] (clip = rounding only).
    mean_out = xp.maximum(xp.where(lag, l_mean, gh_mean), r_mean)
    var_out = xp.maximum(xp.where(lag, l_var, gh_var), 0.0)
    jac = _sigmoid_moments(xp, mean, var, n)[0]  # E[softplus'(Z)] = E[s(Z)]
    return mean_out, var_out, jac


def moment_matched_moments(name, mean, var, *, negative_slope=0.01, n_quadrature=64):
    """Gaussian moment matching: the exact mean and variance of ``g(Z)``.

    Exact closed forms for ``"relu"``, ``"leaky_relu"`` and ``"identity"``
    (pbp.md §2.2, message_passing.md §5.6); quadrature for ``"tanh"``,
    ``"sigmoid"`` and ``"softplus"`` (analytic_predictive.md §13.2).

    Parameters
    ----------
    name : str
        One of :data:`ACTIVATIONS`.
    mean, var : array-like
        Mean and variance of ``Z`` (broadcast together; ``var=None`` means 0,
        negative variances are treated as 0).
    negative_slope : float, default=0.01
        Slope of ``"leaky_relu"`` (see :func:`leaky_relu_moments`).
    n_quadrature : int, default=64
        Number of quadrature nodes for the smooth activations.

    Returns
    -------
    mean_out : array
        ``E[g(Z)]``.
    var_out : array
        ``Var[g(Z)] >= 0``.
    jacobian : array
        ``E[g'(Z)] = Cov(Z, g(Z)) / Var(Z)`` (Stein's lemma); ``g'(mean)`` when
        ``var == 0``.

    Notes
    -----
    Quadrature for the smooth activations: where ``std <= 1.5`` (in the natural
    scale of the activation: ``2 std`` for tanh) a Gauss-Hermite rule
    (``numpy.polynomial.hermite_e.hermegauss``, built on the host once and moved
    with ``xp.asarray``) with the centred variance ``E[(g - E g)^2]``.  For larger
    ``std`` the activation looks like a step (or a kink) on the Gauss-Hermite
    grid, and 64 nodes miss the mean of ``tanh`` at ``std = 40`` by ~0.05 (20
    Monte Carlo standard errors of 1e5 samples).  There the step (Heaviside for
    sigmoid/tanh, ReLU for softplus) is integrated exactly and the exponentially
    decaying remainder by Gauss-Laguerre on each half-line -- except far in the
    saturated tail, where Laguerre nodes are too sparse: there the sigmoid's
    moments come from Gauss-Hermite under exponential tilting (``s(z) = e^z
    s(-z)``, so ``E[s(Z)^k] = exp(k m + k^2 v/2) E[s(-Y)^k]`` with ``Y ~ N(m +
    k v, v)`` centred where the mass is), for the mean and ``E[s']`` where
    ``m + v + 8 std <= 0`` and for the variance where ``m + 2 v + 8 std <= 0``.
    Differences ``g(m + h) - g(m)`` over the exact step ``h = std x`` come from
    identities in ``h`` (``expm1``, ``log1p``), since ``m + h`` rounds to ``m``
    for tiny variances, so that ``Var = g'(m)^2 v`` holds to rounding down to
    ``v = 1e-300``.  Against mpmath quadrature the relative error is below
    ~1e-9 in every case checked (means -80..40, std 1e-6..1e3).  Sigmoid and
    tanh are evaluated on the reflected side (``s(-z) = 1 - s(z)``, tanh odd)
    so that tiny variances in the saturated tails keep their relative accuracy.
    """
    check_activation(name)
    if name == "relu":
        return relu_moments(mean, var)
    if name == "leaky_relu":
        return leaky_relu_moments(mean, var, negative_slope)
    xp, mean, var = _mean_var(mean, var)
    if name == "identity":
        return mean + 0.0, var + 0.0, xp.ones_like(mean)
    n = _check_n_quadrature(n_quadrature)
    if name == "sigmoid":
        mean_out, var_out, jac = _sigmoid_moments(xp, mean, var, n)
    elif name == "tanh":
        mean_out, var_out, jac = _tanh_moments(xp, mean, var, n)
    else:
        mean_out, var_out, jac = _softplus_moments(xp, mean, var, n)
    # var == 0: return the deterministic activation exactly (the quadrature
    # would leave rounding noise of order eps * |g| in the variance).
    det = var == 0
    g0 = activation_value(name, mean)
    d0 = activation_derivative(name, mean)
    return (
        xp.where(det, g0, mean_out),
        xp.where(det, 0.0, var_out),
        xp.where(det, d0, jac),
    )


def activation_moments(name, mean, var, *, approx="linearize", negative_slope=0.01):
    """Push ``Z ~ N(mean, var)`` through activation ``name``.

    Parameters
    ----------
    name : str
        One of :data:`ACTIVATIONS`.
    mean, var : array-like
        Mean and variance of ``Z`` (broadcast together).
    approx : {"linearize", "moment_match"}, default="linearize"
        ``"linearize"``: :func:`linearized_moments` (TAGI / analytic predictive);
        ``"moment_match"``: :func:`moment_matched_moments` (PBP / message passing).
    negative_slope : float, default=0.01
        Slope of ``"leaky_relu"``.

    Returns
    -------
    mean_out, var_out, jacobian : arrays

    Raises
    ------
    ValueError
        For an unknown activation or ``approx``.
    """
    check_activation(name)
    _check_approx(approx)
    if approx == "linearize":
        return linearized_moments(name, mean, var, negative_slope=negative_slope)
    return moment_matched_moments(name, mean, var, negative_slope=negative_slope)
