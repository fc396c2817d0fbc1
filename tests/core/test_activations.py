"""Activations: exact / quadrature moments against Monte Carlo, closed forms, invariants."""

import math

import numpy as np
import pytest
from scipy.special import expit

from skbayesnn._backend import asnumpy
from skbayesnn._testing import StrictArray, assert_mc_close, mc_moments
from skbayesnn.core.activations import (
    ACTIVATIONS,
    activation_derivative,
    activation_moments,
    activation_value,
    check_activation,
    leaky_relu_moments,
    linearized_moments,
    moment_matched_moments,
    relu_moments,
)

MC_MEANS = np.array([-40.0, -5.0, -0.3, 0.0, 0.7, 5.0, 40.0])
MC_STDS = np.array([1e-6, 1e-3, 0.5, 1.0, 3.0, 40.0, 1e3])
N_MC = 200_000
LEAKY_SLOPES = (0.01, 0.2, 0.9, 1.5)
SMOOTH = ("tanh", "sigmoid", "softplus")

# Wider grid for the invariants: var = 0, and values where every formula is still
# representable (std**2 <= 1e300).
EXT_MEANS = np.array([-1e4, -40.0, -5.0, -0.3, 0.0, 0.7, 5.0, 40.0, 1e4])
EXT_STDS = np.array([0.0, 1e-150, 1e-6, 1e-3, 0.5, 1.0, 3.0, 40.0, 1e3, 1e150])


def _grid(means, stds):
    m, s = np.meshgrid(means, stds, indexing="ij")
    return m.ravel(), s.ravel()


# ---------------------------------------------------------------------------
# Monte Carlo machinery
# ---------------------------------------------------------------------------


def _samples(name, z, m, slope):
    """Samples ``h`` of the activation and an affine map ``g = a0 + a1 * h``.

    Sigmoid and tanh saturate at +-1, where float64 samples round to the
    constant and the sample variance would be 0 although the true one is, e.g.,
    1e-47.  They are therefore sampled on the side where they are small, by the
    exact identities s(z) = 1 - s(-z) and tanh(z) = 1 - 2 s(-2z) = 2 s(2z) - 1.
    """
    one = np.ones_like(m)
    if name == "relu":
        return np.maximum(z, 0.0), 0 * one, one
    if name == "leaky_relu":
        return np.where(z > 0, z, slope * z), 0 * one, one
    if name == "softplus":
        return np.logaddexp(0.0, z), 0 * one, one
    flip = m > 0
    if name == "sigmoid":
        return expit(np.where(flip, -z, z)), np.where(flip, 1.0, 0.0), np.where(flip, -1.0, 1.0)
    assert name == "tanh"
    h = expit(np.where(flip, -2.0 * z, 2.0 * z))
    return h, np.where(flip, 1.0, -1.0), np.where(flip, -2.0, 2.0)


def _tilts(name, m, s):
    """Importance-sampling shifts (in standard deviations) for mean and variance.

    Plain Monte Carlo cannot see events rarer than ~1/N_MC, yet those carry the
    moments in the tails of the grid (a ReLU at mean/std = -13 is on with
    probability 1e-40; the variance of sigmoid(Z), Z ~ N(-40, 9), behaves like
    that of exp(Z) and lives 2 std above the mean).  There the standard normal
    draws X are shifted by c and reweighted by phi(X)/phi(X - c), an unbiased
    estimator whose samples sit where the integrand lives:

    * ReLU (mean/std = a < -3): c = |a| - 2, two std before the kink at x = |a|.
    * sigmoid / softplus (kappa = 1) and tanh (kappa = 2) on their exponential
      tail (|a| > 3 toward saturation at 0): g ~ exp(kappa z), so the mean (and
      E[X g]) lives at kappa std and the second moment at 2 kappa std from the
      mean, both capped at the kink |a|.
    Shifts below 1 are set to 0 (plain Monte Carlo is fine there).
    """
    a = m / s
    zero = np.zeros_like(m)
    if name == "relu":
        c = np.where(a < -3, -a - 2.0, 0.0)
        return c, c
    if name == "leaky_relu":
        return zero, zero
    kappa = 2.0 if name == "tanh" else 1.0
    tail = np.abs(a) > 3
    if name == "softplus":
        tail &= m < 0
    toward_kink = -np.sign(m)
    c_mean = np.where(tail, toward_kink * np.minimum(kappa * s, np.abs(a)), 0.0)
    c_var = np.where(tail, toward_kink * np.minimum(2 * kappa * s, np.abs(a)), 0.0)
    return np.where(np.abs(c_mean) >= 1, c_mean, 0.0), np.where(np.abs(c_var) >= 1, c_var, 0.0)


def _mc(name, m, s, x0, slope=None, chunk=7):
    """(Importance-sampled) Monte Carlo mean, variance and Stein Jacobian.

    Every estimate is a sample mean of i.i.d. terms, so its standard error is
    the sample standard deviation over sqrt(N) (``mc_moments``).  With weights
    ``w`` (1 without a shift) and draws X:

    * mean: terms w g.
    * variance, plain lanes: terms (g - mean_hat)^2 (centred: no cancellation
      for tiny std).  Shifted lanes: E[w g^2] at the variance shift minus
      mean_hat^2; the centred form would carry the heavy weights of the far side
      (w ~ e^{c^2}) on the constant mean_hat^2, and there Var/E[g^2] >= 0.2 so
      nothing cancels.  Its standard error is bounded by se(E[g^2]) +
      2 |mean_hat| se(mean) (triangle inequality; the two are correlated).
    * Stein Jacobian Cov(Z, g(Z)) / Var(Z) = E[X (g - mu)] / std, using
      E[X] = 0: plain lanes use terms X (g - mean_hat) / std -- replacing mu by
      mean_hat changes the estimate by (mu - mean_hat) mean(X) / std, a product
      of two O(N^-1/2) terms, i.e. O(1/N), far below the O(N^-1/2) standard
      error -- and shifted lanes the uncentred w X g / std (centring would again
      multiply the heavy weights by mean_hat).
    """
    c_mean, c_var = _tilts(name, m, s)
    out = {k: np.empty_like(m) for k in ("mean", "se_mean", "var", "se_var", "jac", "se_jac")}
    x0 = x0[:, None]
    for lo in range(0, m.size, chunk):
        sl = slice(lo, lo + chunk)
        mm, ss, cm, cv = m[sl], s[sl], c_mean[sl], c_var[sl]

        def draw(c):
            x = x0 + c  # shifted draws; weight phi(x) / phi(x - c)
            w = np.exp(-c * x0 - 0.5 * c * c)
            h, a0, a1 = _samples(name, (mm + ss * c) + ss * x0, mm, slope)
            return x, w, h, a0, a1

        x, w, h, a0, a1 = draw(cm)
        mu, _, se_mu, _ = mc_moments(w * h)
        plain = cm == 0
        jac, _, se_jac, _ = mc_moments(w * x * np.where(plain, h - mu, h) / ss)
        if np.any(cv != 0):
            _, wv, hv, _, _ = draw(cv)
            e2, _, se_e2, _ = mc_moments(wv * hv * hv)
        else:
            e2 = se_e2 = np.zeros_like(mm)
        cvar, _, se_cvar, _ = mc_moments((h - mu) ** 2)  # valid only where plain
        tilted = cv != 0
        var = np.where(tilted, e2 - mu * mu, cvar)
        se_var = np.where(tilted, se_e2 + 2 * np.abs(mu) * se_mu, se_cvar)
        out["mean"][sl] = a0 + a1 * mu
        out["se_mean"][sl] = np.abs(a1) * se_mu
        out["var"][sl] = a1 * a1 * var
        out["se_var"][sl] = a1 * a1 * se_var
        out["jac"][sl] = a1 * jac
        out["se_jac"][sl] = np.abs(a1) * se_jac
    return out


def _check_against_mc(name, mean_out, var_out, jac, mc, m, s):
    checks = (
        ("mean", mean_out, "mean"),
        ("variance", var_out, "var"),
        ("Stein Jacobian", jac, "jac"),
    )
    for what, actual, key in checks:
        try:
            assert_mc_close(actual, mc[key], mc["se_" + key], what=f"{what} of {name}")
        except AssertionError as err:
            bad = np.abs(actual - mc[key]) > 5 * mc["se_" + key] + 1e-9 * np.abs(mc[key])
            pts = [(float(a), float(b)) for a, b in zip(m[bad], s[bad])]
            raise AssertionError(f"{err} (failing (mean, std): {pts})") from None


@pytest.fixture(scope="module")
def std_normal():
    return np.random.default_rng(20261121).standard_normal(N_MC)


@pytest.mark.parametrize("name", ["relu", *SMOOTH])
def test_moments_match_monte_carlo(std_normal, name):
    # 5 standard errors per comparison (assert_mc_close); 49 grid points x 3
    # quantities per activation.
    m, s = _grid(MC_MEANS, MC_STDS)
    mean_out, var_out, jac = moment_matched_moments(name, m, s * s)
    mc = _mc(name, m, s, std_normal)
    _check_against_mc(name, mean_out, var_out, jac, mc, m, s)


@pytest.mark.parametrize("slope", LEAKY_SLOPES)
def test_leaky_relu_moments_match_monte_carlo(std_normal, slope):
    m, s = _grid(MC_MEANS, MC_STDS)
    mean_out, var_out, jac = leaky_relu_moments(m, s * s, slope)
    mc = _mc("leaky_relu", m, s, std_normal, slope=slope)
    _check_against_mc(f"leaky_relu({slope})", mean_out, var_out, jac, mc, m, s)


def test_monte_carlo_checker_catches_a_wrong_formula(std_normal):
    # Guard against a vacuous MC test: the ReLU moments of a 5% larger variance
    # (a plausible bug) must be rejected.
    m, s = _grid(MC_MEANS[2:5], MC_STDS[2:5])
    mean_out, var_out, jac = relu_moments(m, 1.05 * s * s)
    mc = _mc("relu", m, s, std_normal)
    with pytest.raises(AssertionError):
        _check_against_mc("relu", mean_out, var_out, jac, mc, m, s)


# ---------------------------------------------------------------------------
# invariants on extreme inputs
# ---------------------------------------------------------------------------

# Lipschitz constants: Var[g(Z)] <= L^2 Var[Z] and 0 <= E[g'(Z)] <= L.
_LIPSCHITZ = {"relu": 1.0, "tanh": 1.0, "sigmoid": 0.25, "softplus": 1.0, "identity": 1.0}


@pytest.mark.parametrize("approx", ["linearize", "moment_match"])
@pytest.mark.parametrize("name", ACTIVATIONS)
def test_finite_nonnegative_and_lipschitz_on_extremes(name, approx):
    m, s = _grid(EXT_MEANS, EXT_STDS)
    v = s * s
    slopes = (0.0, 0.01, 0.5, 1.0, 2.0) if name == "leaky_relu" else (0.01,)
    for slope in slopes:
        mean_out, var_out, jac = activation_moments(
            name, m, v, approx=approx, negative_slope=slope
        )
        for arr in (mean_out, var_out, jac):
            assert arr.shape == m.shape and arr.dtype == np.float64
            assert np.all(np.isfinite(arr)), (name, approx, slope, m[~np.isfinite(arr)])
        assert np.all(var_out >= 0)
        lip = max(1.0, slope) if name == "leaky_relu" else _LIPSCHITZ[name]
        assert np.all(var_out <= lip**2 * v * (1 + 1e-9)), (name, approx, slope)
        lo = min(1.0, slope) if name == "leaky_relu" else 0.0
        assert np.all((jac >= lo * (1 - 1e-12)) & (jac <= lip * (1 + 1e-12)))
        # var = 0 is the deterministic activation, for both approximations.
        det = v == 0
        np.testing.assert_array_equal(
            mean_out[det], activation_value(name, m[det], negative_slope=slope)
        )
        np.testing.assert_array_equal(var_out[det], 0.0)
        np.testing.assert_array_equal(
            jac[det], activation_derivative(name, m[det], negative_slope=slope)
        )


def test_moment_matched_ranges_and_jensen_on_extremes():
    m, s = _grid(EXT_MEANS, EXT_STDS)
    v = s * s
    r_mean, r_var, r_jac = relu_moments(m, v)
    # Jensen (ReLU convex): E[ReLU(Z)] >= max(E[Z], 0); exactly Var <= var.
    assert np.all(r_mean >= np.maximum(m, 0) * (1 - 1e-12))
    assert np.all(r_var <= v)
    sp_mean = moment_matched_moments("softplus", m, v)[0]
    assert np.all(sp_mean >= np.logaddexp(0, m) * (1 - 1e-12))
    sg_mean = moment_matched_moments("sigmoid", m, v)[0]
    assert np.all((sg_mean >= 0) & (sg_mean <= 1))
    th_mean = moment_matched_moments("tanh", m, v)[0]
    assert np.all((th_mean >= -1) & (th_mean <= 1))
    # Odd / reflection symmetries hold exactly on the symmetric grid.
    th_mean_neg, th_var_neg, _ = moment_matched_moments("tanh", -m, v)
    np.testing.assert_array_equal(th_mean_neg, -th_mean)
    sg_neg = moment_matched_moments("sigmoid", -m, v)
    sg = moment_matched_moments("sigmoid", m, v)
    np.testing.assert_allclose(sg_neg[0], 1 - sg[0], rtol=0, atol=1e-15)
    np.testing.assert_array_equal(sg_neg[1], sg[1])


def test_quadrature_is_continuous_across_its_switches_and_converged():
    # The smooth activations switch between Gauss-Hermite and a step +
    # Gauss-Laguerre rule at std = 1.5 and at |mean|/std = 2 std + 8; both sides
    # must agree (to 1e-8 relative), and doubling the nodes must change nothing.
    eps = 1e-12  # moves the exact moments by < 1e-10 relative
    for name in SMOOTH:
        scale = 0.5 if name == "tanh" else 1.0  # tanh works with 2 z
        s = scale * np.array([1.5 - eps, 1.5 + eps, 3.0, 3.0, 5.0, 5.0])
        a = np.array([-4.0, -4.0, -(14 - eps), -(14 + eps), -(18 - eps), -(18 + eps)])
        m = a * s
        out = moment_matched_moments(name, m, s * s)
        for q in out:
            np.testing.assert_allclose(q[0::2], q[1::2], rtol=1e-8, atol=0)
        mm, ss = _grid(MC_MEANS, MC_STDS)
        q64 = moment_matched_moments(name, mm, ss * ss, n_quadrature=64)
        q128 = moment_matched_moments(name, mm, ss * ss, n_quadrature=128)
        for x64, x128 in zip(q64, q128):
            np.testing.assert_allclose(x64, x128, rtol=1e-8, atol=1e-300)


# ---------------------------------------------------------------------------
# closed forms
# ---------------------------------------------------------------------------


def test_relu_closed_form_at_standard_normal():
    mean_out, var_out, jac = relu_moments(0.0, 1.0)
    assert mean_out == pytest.approx(1 / math.sqrt(2 * math.pi), rel=1e-14)
    assert var_out == pytest.approx(0.5 - 1 / (2 * math.pi), rel=1e-14)
    assert jac == pytest.approx(0.5, rel=1e-15)
    # Scale equivariance: ReLU(s Z) = s ReLU(Z).
    m2, v2, j2 = relu_moments(0.0, 9.0)
    assert m2 == pytest.approx(3 * mean_out, rel=1e-14)
    assert v2 == pytest.approx(9 * var_out, rel=1e-14)
    assert j2 == jac


def test_relu_inverse_mills_ratio_and_deep_tail_asymptotics():
    from scipy.special import ndtr

    # E[ReLU(Z)] = Phi(a) (mean + std gamma): recover gamma at a = -30 and compare
    # with the value quoted in pbp.md §2.2 (30.0332597).
    mean_out, _, jac = relu_moments(-30.0, 1.0)
    assert jac == pytest.approx(ndtr(-30.0), rel=1e-14, abs=0)
    gamma = 30.0 + mean_out / ndtr(-30.0)
    assert gamma == pytest.approx(30.0332597, abs=5e-7)
    # Asymptotic series (from the Mills-ratio expansion) for a -> -inf:
    #   E[ReLU]/s   = phi(a)/a^2   (1 - 3/a^2 + 15/a^4 - 105/a^6 + 945/a^8)
    #   Var[ReLU]/s^2 = 2 phi(a)/|a|^3 (1 - 6/a^2 + 45/a^4 - 420/a^6 + 4725/a^8)
    # with truncation errors 2e-11 / 1e-10 at a = -30 and 1e-9 / 6e-9 at a = -20.
    for a, rtol in [(-30.0, 1e-9), (-20.0, 2e-8)]:
        for std in (1e-3, 1.0, 1e3):
            mean_out, var_out, _ = relu_moments(a * std, std**2)
            phi = math.exp(-0.5 * a * a) / math.sqrt(2 * math.pi)
            s1 = phi / a**2 * (1 - 3 / a**2 + 15 / a**4 - 105 / a**6 + 945 / a**8)
            s2 = 2 * phi / abs(a) ** 3 * (1 - 6 / a**2 + 45 / a**4 - 420 / a**6 + 4725 / a**8)
            assert mean_out == pytest.approx(std * s1, rel=rtol, abs=0)
            assert var_out == pytest.approx(std**2 * s2, rel=rtol, abs=0)


def test_leaky_relu_closed_form_and_limits():
    # LReLU_a(Z), Z ~ N(0, 1): mean (1 - a)/sqrt(2 pi); E[LReLU^2] = (1 + a^2)/2.
    for slope in (0.0, 0.1, 0.5, 1.0, 3.0):
        mean_out, var_out, jac = leaky_relu_moments(0.0, 1.0, slope)
        mu = (1 - slope) / math.sqrt(2 * math.pi)
        assert mean_out == pytest.approx(mu, rel=1e-14, abs=1e-16)
        assert var_out == pytest.approx((1 + slope**2) / 2 - mu**2, rel=1e-13)
        assert jac == pytest.approx((1 + slope) / 2, rel=1e-15)
    m, s = _grid(EXT_MEANS, EXT_STDS[:-1])
    v = s * s
    for q0, qr in zip(leaky_relu_moments(m, v, 0.0), relu_moments(m, v)):
        np.testing.assert_array_equal(q0, qr)
    mean1, var1, jac1 = leaky_relu_moments(m, v, 1.0)
    np.testing.assert_array_equal(mean1, m)
    np.testing.assert_array_equal(var1, v)
    np.testing.assert_array_equal(jac1, 1.0)
    ident = moment_matched_moments("identity", m, v)
    np.testing.assert_array_equal(ident[0], m)
    np.testing.assert_array_equal(ident[1], v)
    np.testing.assert_array_equal(ident[2], 1.0)


def test_sigmoid_and_softplus_lognormal_tail():
    # For mean << 0: sigmoid(z) = e^z - e^2z + O(e^3z), softplus(z) = e^z - e^2z/2 + ...,
    # so with Z ~ N(m, s^2): E ~ e^(m + s^2/2), Var ~ e^(2m + s^2)(e^(s^2) - 1), and
    # E[g'(Z)] ~ e^(m + s^2/2) (leading terms; the corrections are < 1e-7 relative
    # here, and the kink at 0 is > 10 std away).
    for name in ("sigmoid", "softplus"):
        for m, s in [(-40.0, 1e-3), (-40.0, 1.0), (-40.0, 3.0), (-60.0, 2.0)]:
            mean_out, var_out, jac = moment_matched_moments(name, m, s * s)
            e1 = math.exp(m + 0.5 * s * s)
            assert mean_out == pytest.approx(e1, rel=1e-7, abs=0)
            assert var_out == pytest.approx(e1**2 * math.expm1(s * s), rel=1e-7, abs=0)
            assert jac == pytest.approx(e1, rel=1e-7, abs=0)


def test_sigmoid_and_tanh_centre_and_monotonicity():
    # By symmetry E[s(Z)] = 1/2 and E[tanh(Z)] = 0 at mean 0 for every std, and
    # both means increase strictly with the mean of Z.
    s = np.array([0.1, 1.0, 3.0, 40.0])
    mu = moment_matched_moments("sigmoid", 0.0 * s, s * s)[0]
    np.testing.assert_allclose(mu, 0.5, rtol=0, atol=1e-15)
    np.testing.assert_array_equal(moment_matched_moments("tanh", 0.0 * s, s * s)[0], 0.0)
    m = np.linspace(-10, 10, 41)
    for std in (0.5, 3.0, 40.0):
        for name in ("sigmoid", "tanh"):
            mu = moment_matched_moments(name, m, np.full_like(m, std**2))[0]
            assert np.all(np.diff(mu) > 0)


# ---------------------------------------------------------------------------
# linearisation
# ---------------------------------------------------------------------------

_REFERENCE_G = {
    "relu": lambda x: np.where(x > 0, x, 0.0),
    "leaky_relu": lambda x: np.where(x > 0, x, 0.1 * x),
    "tanh": np.tanh,
    "sigmoid": lambda x: 1.0 / (1.0 + np.exp(-x)),
    "softplus": lambda x: np.log(1.0 + np.exp(x)),
    "identity": lambda x: x,
}


@pytest.mark.parametrize("name", ACTIVATIONS)
def test_linearized_moments_are_value_and_derivative_at_the_mean(rng, name):
    # Moderate points away from the kink at 0, where the naive references are exact
    # enough and central differences (step 1e-6, error ~1e-10) apply.
    x = rng.uniform(0.05, 6.0, size=40) * rng.choice([-1.0, 1.0], size=40)
    var = rng.uniform(0.0, 4.0, size=40)
    mean_out, var_out, jac = linearized_moments(name, x, var, negative_slope=0.1)
    np.testing.assert_allclose(mean_out, _REFERENCE_G[name](x), rtol=1e-13, atol=1e-15)
    h = 1e-6
    fd = (
        activation_value(name, x + h, negative_slope=0.1)
        - activation_value(name, x - h, negative_slope=0.1)
    ) / (2 * h)
    np.testing.assert_allclose(jac, fd, rtol=1e-7, atol=1e-9)
    np.testing.assert_array_equal(var_out, jac**2 * var)
    np.testing.assert_array_equal(jac, activation_derivative(name, x, negative_slope=0.1))
    moments = activation_moments(name, x, var, approx="linearize", negative_slope=0.1)
    for a, b in zip(moments, (mean_out, var_out, jac)):
        np.testing.assert_array_equal(a, b)


def test_derivative_at_the_kink_and_in_the_tails():
    assert activation_derivative("relu", 0.0) == 0.0  # torch convention
    assert activation_derivative("leaky_relu", 0.0, negative_slope=0.2) == 0.2
    _, v, j = linearized_moments("relu", 0.0, 1.0)
    assert j == 0.0 and v == 0.0
    # The tanh / sigmoid derivatives keep their relative accuracy far out, where
    # 1 - tanh^2 would round to 0: tanh'(x) = 4 e^-2|x| (1 + O(e^-2|x|)).
    for x in (-40.0, 40.0):
        tanh_d, sigmoid_d = (activation_derivative(name, x) for name in ("tanh", "sigmoid"))
        assert tanh_d == pytest.approx(4 * math.exp(-80.0), rel=1e-14, abs=0)
        assert sigmoid_d == pytest.approx(math.exp(-40.0), rel=1e-14, abs=0)
    assert activation_value("softplus", 800.0) == 800.0  # no overflow
    assert activation_value("softplus", -800.0) == 0.0


def test_wide_gaussians_far_in_the_saturated_tail_keep_relative_accuracy():
    # |m| >= 2 v + 8 std with std > 1.5: the plain Gauss-Hermite rule missed the
    # mass of the tail moments (k std standard deviations out), e.g. a relative
    # error of 0.23 in Var[s(Z)] at (m, v) = (-200, 64) and 6e-2 in Var[tanh Z]
    # at (-80, 12.25).  Closed forms: the lognormal ones of the test above,
    # whose corrections are below exp(m + 5 v / 2) < 1e-16 relative here;
    # tanh(z) = 2 s(2 z) - 1, so Var[tanh Z] = 4 Var[s(2 Z)].
    for m, s in [(-200.0, 8.0), (-100.0, 5.0), (-60.0, 3.0)]:
        mean_out, var_out, jac = moment_matched_moments("sigmoid", m, s * s)
        e1 = math.exp(m + 0.5 * s * s)
        assert mean_out == pytest.approx(e1, rel=1e-9, abs=0)
        assert var_out == pytest.approx(e1**2 * math.expm1(s * s), rel=1e-9, abs=0)
        assert jac == pytest.approx(e1, rel=1e-9, abs=0)
    # Beyond that band the mean and E[s'] still take the tilted rule where its
    # Gaussian is 8 std below the kink: at (-569.5, 225) Laguerre's mean was
    # 1e-12 of the true one (corrections below exp(m + 3 v / 2) = e^-232).
    mean_out, _, jac = moment_matched_moments("sigmoid", -569.5, 225.0)
    assert mean_out == pytest.approx(math.exp(-569.5 + 112.5), rel=1e-9, abs=0)
    assert jac == pytest.approx(math.exp(-569.5 + 112.5), rel=1e-9, abs=0)
    for m, v in [(-80.0, 12.25), (-60.0, 9.0)]:
        mean_out, var_out, _ = moment_matched_moments("tanh", m, v)
        e1 = math.exp(2 * m + 2 * v)  # E[s(2 Z)], 2 Z ~ N(2 m, 4 v)
        assert mean_out == -1.0  # -1 + 2 e1 rounds to -1
        assert var_out == pytest.approx(4.0 * e1**2 * math.expm1(4 * v), rel=1e-9, abs=0)


@pytest.mark.parametrize("name", ["sigmoid", "tanh", "softplus"])
def test_tiny_variances_keep_the_delta_method_to_rounding(name):
    # Var[g(Z)] = g'(m)^2 v (1 + O(v)).  With std below ulp(m), m + std x rounds
    # to m and g(z) - g(m) was rounding noise: relative errors of 5e-5 at
    # v = 1e-24 (sigmoid), 1e-2 at 1e-30 (softplus), and 0 or 3 v at 1e-300.
    m = np.array([-40.0, -5.0, -0.3, 0.3, 1.0, 5.0, 40.0])
    d = activation_derivative(name, m)
    for var in (1e-20, 1e-30, 1e-100, 1e-300):
        mean_out, var_out, jac = moment_matched_moments(name, m, np.full_like(m, var))
        np.testing.assert_allclose(var_out, d**2 * var, rtol=1e-12)
        np.testing.assert_allclose(mean_out, activation_value(name, m), rtol=1e-15)
        np.testing.assert_allclose(jac, d, rtol=1e-12)


def test_moment_matching_tends_to_the_deterministic_activation(rng):
    x = rng.uniform(0.01, 6, size=30) * rng.choice([-1.0, 1.0], size=30)
    x[0] = 0.0
    for name in ACTIVATIONS:
        g = activation_value(name, x, negative_slope=0.1)
        d = activation_derivative(name, x, negative_slope=0.1)
        for var in (1e-8, 1e-12, 1e-16):
            mean_out, var_out, jac = moment_matched_moments(
                name, x, np.full_like(x, var), negative_slope=0.1
            )
            # |E g(Z) - g(m)| <= sup|g''| var / 2 where g is smooth (below
            # 1e-3 * sqrt(var) + var here), std * phi(0) ~ 0.4 std at a kink
            smooth = x != 0 if name in ("relu", "leaky_relu") else np.ones_like(x, bool)
            np.testing.assert_allclose(mean_out[smooth], g[smooth], rtol=0,
                                       atol=1e-3 * math.sqrt(var) + var)
            np.testing.assert_allclose(mean_out[~smooth], g[~smooth], rtol=0,
                                       atol=0.5 * math.sqrt(var) + var)
            np.testing.assert_allclose(jac[smooth], d[smooth], rtol=1e-3, atol=1e-12)
            # Var / var -> g'(m)^2 away from the kink (delta method).
            np.testing.assert_allclose(
                var_out[smooth] / var, d[smooth] ** 2, rtol=1e-3, atol=1e-12
            )


# ---------------------------------------------------------------------------
# namespace cleanliness and errors
# ---------------------------------------------------------------------------


def test_every_public_function_stays_in_the_given_namespace(strict_xp, rng):
    xp, asarray = strict_xp
    m = np.concatenate([rng.normal(scale=3, size=12), [0.0, -40.0, 40.0]])
    v = np.concatenate([rng.uniform(0, 9, size=12), [0.0, 1600.0, 2.0]])
    sm, sv = asarray(m), asarray(v)

    def same(strict_out, numpy_out):
        strict_out = strict_out if isinstance(strict_out, tuple) else (strict_out,)
        numpy_out = numpy_out if isinstance(numpy_out, tuple) else (numpy_out,)
        for a, b in zip(strict_out, numpy_out):
            assert isinstance(a, StrictArray), type(a)
            # Equal up to rounding: the strict namespace's norm_pdf is an
            # algebraically equal but differently rounded formula.
            np.testing.assert_allclose(asnumpy(a), b, rtol=1e-13, atol=1e-300)

    same(relu_moments(sm, sv), relu_moments(m, v))
    same(leaky_relu_moments(sm, sv, 0.2), leaky_relu_moments(m, v, 0.2))
    for name in ACTIVATIONS:
        same(activation_value(name, sm), activation_value(name, m))
        same(activation_derivative(name, sm), activation_derivative(name, m))
        same(linearized_moments(name, sm, sv), linearized_moments(name, m, v))
        same(moment_matched_moments(name, sm, sv), moment_matched_moments(name, m, v))
        for approx in ("linearize", "moment_match"):
            same(
                activation_moments(name, sm, sv, approx=approx),
                activation_moments(name, m, v, approx=approx),
            )


def test_invalid_names_raise_value_error_listing_the_options():
    assert check_activation("tanh") == "tanh"
    for bad in ("gelu", "ReLU", None):
        with pytest.raises(ValueError) as err:
            check_activation(bad)
        for valid in ACTIVATIONS:
            assert valid in str(err.value)
    with pytest.raises(ValueError, match="relu"):
        activation_value("swish", np.zeros(2))
    with pytest.raises(ValueError, match="relu"):
        activation_moments("swish", np.zeros(2), np.ones(2))
    with pytest.raises(ValueError) as err:
        activation_moments("relu", np.zeros(2), np.ones(2), approx="unscented")
    assert "linearize" in str(err.value) and "moment_match" in str(err.value)
    with pytest.raises(ValueError, match="negative_slope"):
        leaky_relu_moments(np.zeros(2), np.ones(2), -0.1)
    with pytest.raises(ValueError, match="n_quadrature"):
        moment_matched_moments("tanh", np.zeros(2), np.ones(2), n_quadrature=1)


def test_standardized_mean_clips_and_signs_point_masses():
    from skbayesnn.core.activations import standardized_mean

    mean = np.array([1.0, -2.0, 1e300, 3.0, 0.0, -1.0])
    std = np.array([2.0, 4.0, 1e-300, 0.0, 0.0, 0.0])
    a, pos, std_safe = standardized_mean(np, mean, std)
    # 1e300 / 1e-300 is clipped to 50 (up to the rounding of 50 * 1e-300 / 1e-300).
    np.testing.assert_allclose(a, [0.5, -0.5, 50.0, 50.0, -50.0, -50.0], rtol=1e-15)
    np.testing.assert_array_equal(pos, [True, True, True, False, False, False])
    np.testing.assert_array_equal(std_safe, [2.0, 4.0, 1e-300, 1.0, 1.0, 1.0])


def test_inverse_mills_ratio_is_accurate_in_both_tails():
    from scipy.stats import norm

    from skbayesnn.core.activations import inverse_mills_ratio

    a = np.array([-3.0, -1.0, 0.0, 0.5, 4.0, 30.0])
    np.testing.assert_allclose(inverse_mills_ratio(np, a), norm.pdf(a) / norm.cdf(a), rtol=1e-13)
    # Deep negative tail, where pdf/cdf underflows: the asymptotic series
    # -a - 1/a + 2/a^3 - 10/a^5 + 74/a^7 (relative error below 1e-13 here).
    a = np.array([-40.0, -100.0, -1e4])
    series = -a - 1 / a + 2 / a**3 - 10 / a**5 + 74 / a**7
    np.testing.assert_allclose(inverse_mills_ratio(np, a), series, rtol=1e-12)
