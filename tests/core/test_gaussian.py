"""Gaussian algebra in natural parameters and the GMA moments (skbayesnn.core.gaussian).

References: message_passing.md §1 (natural parameters, product, division,
safe_division, min_rho, EMA, moment matching) and §8 (guards); tagi.md §2
(Gaussian multiplication approximation, Eqs. 3-6).

Monte Carlo comparisons use 5 standard errors (``assert_mc_close``), so each of
the few dozen comparisons below fails by chance with probability about 6e-7.
"""

import warnings
import zlib

import numpy as np
import pytest
from scipy import integrate, stats

from skbayesnn._testing import assert_mc_close, mc_moments
from skbayesnn.core.gaussian import (
    damp,
    from_natural,
    gaussian_division,
    gaussian_product,
    min_precision,
    moment_match_mixture,
    moments_to_natural,
    product_cross_cov,
    product_mean,
    product_normalizer_log,
    product_product_cov,
    product_var,
    to_natural,
)

# Floating-point errors (overflow, 0/0, x/0) raise inside these blocks; underflow
# to zero is harmless and allowed.
_raise_fp = dict(over="raise", invalid="raise", divide="raise")


# ----------------------------------------------------------------------------
# 1. natural parameters and products
# ----------------------------------------------------------------------------
def test_to_natural_closed_form_and_round_trip(rng):
    tau, rho = to_natural(2.0, 4.0)
    assert tau == 0.5 and rho == 0.25
    mean = rng.normal(scale=10.0, size=(50, 3))
    var = 10.0 ** rng.uniform(-6, 6, size=(50, 3))
    tau, rho = to_natural(mean, var)
    np.testing.assert_allclose(rho * var, 1.0, rtol=1e-15)
    m2, v2 = from_natural(tau, rho)
    np.testing.assert_allclose(m2, mean, rtol=1e-14)
    np.testing.assert_allclose(v2, var, rtol=1e-15)
    t3, r3 = to_natural(m2, v2)
    np.testing.assert_allclose(t3, tau, rtol=1e-14)
    np.testing.assert_allclose(r3, rho, rtol=1e-15)


def test_infinite_variance_is_zero_precision_and_back():
    with np.errstate(**_raise_fp):
        tau, rho = to_natural(np.array([3.0, -1e8, 0.0]), np.inf)
        assert np.all(tau == 0.0) and np.all(rho == 0.0)
        assert tau.shape == (3,) and rho.shape == (3,)
        # rho == 0 is G(0, 0): mean 0, var inf, whatever tau is (documented).
        mean, var = from_natural(np.array([0.0, 5.0, -2.0]), np.array([0.0, 0.0, 0.0]))
    np.testing.assert_array_equal(mean, 0.0)
    np.testing.assert_array_equal(var, np.inf)


def test_point_mass_and_overflowing_precision_give_inf_not_nan():
    with np.errstate(**_raise_fp):
        tau, rho = to_natural(np.array([2.0, -2.0, 0.0, 1.0]), np.array([0.0, 0.0, 0.0, 1e-320]))
        mean, var = from_natural(np.array([1.0, 1e-320]), np.array([np.inf, 1e-320]))
    np.testing.assert_array_equal(rho, np.inf)
    np.testing.assert_array_equal(tau, [np.inf, -np.inf, 0.0, np.inf])
    np.testing.assert_array_equal(var, [0.0, np.inf])
    np.testing.assert_allclose(mean, [0.0, 1.0], rtol=1e-12)


@pytest.mark.parametrize(
    "m1,v1,m2,v2",
    [(0.3, 1.0, -1.2, 0.5), (4.0, 1e-3, 3.9, 1e3), (-50.0, 2.0, 60.0, 3.0), (0.0, 1.0, 0.0, 1.0)],
)
def test_product_of_densities_matches_scipy_pointwise(m1, v1, m2, v2):
    # N(x; m1, v1) N(x; m2, v2) = N(m1; m2, v1 + v2) N(x; m, v)  (message_passing.md §1)
    t1, r1 = to_natural(m1, v1)
    t2, r2 = to_natural(m2, v2)
    mean, var = from_natural(*gaussian_product(t1, r1, t2, r2))
    log_z = product_normalizer_log(m1, v1, m2, v2)
    x = np.linspace(min(m1, m2) - 5, max(m1, m2) + 5, 201)
    lhs = stats.norm.logpdf(x, m1, np.sqrt(v1)) + stats.norm.logpdf(x, m2, np.sqrt(v2))
    rhs = log_z + stats.norm.logpdf(x, mean, np.sqrt(var))
    np.testing.assert_allclose(rhs, lhs, rtol=1e-12, atol=1e-9)
    # The normaliser itself, as a density of m1 and as the integral of the product.
    assert log_z == pytest.approx(stats.norm.logpdf(m1, m2, np.sqrt(v1 + v2)), rel=1e-13)
    assert product_normalizer_log(m2, v2, m1, v1) == pytest.approx(log_z, rel=1e-14)


def test_product_normalizer_equals_integral_of_product():
    m1, v1, m2, v2 = 0.7, 0.4, -0.5, 1.3
    z, _ = integrate.quad(
        lambda x: stats.norm.pdf(x, m1, np.sqrt(v1)) * stats.norm.pdf(x, m2, np.sqrt(v2)),
        -np.inf, np.inf, epsabs=0, epsrel=1e-12,
    )
    assert np.exp(product_normalizer_log(m1, v1, m2, v2)) == pytest.approx(z, rel=1e-9)


def test_product_normalizer_limits():
    with np.errstate(**_raise_fp):
        out = product_normalizer_log(
            np.array([1.0, 1.0, 2.0, 1e200]),
            np.array([np.inf, 0.0, 0.0, 1e-300]),
            np.array([0.0, 1.0, 1.0, -1e200]),
            np.array([1.0, 0.0, 0.0, 0.0]),
        )
    np.testing.assert_array_equal(out, [-np.inf, np.inf, -np.inf, -np.inf])


# ----------------------------------------------------------------------------
# 2. division and its guard
# ----------------------------------------------------------------------------
def test_division_inverts_product(rng):
    t1, r1 = rng.normal(size=100), rng.uniform(0.1, 5.0, size=100)
    t2, r2 = rng.normal(size=100), rng.uniform(0.1, 5.0, size=100)
    tau, rho, invalid = gaussian_division(*gaussian_product(t1, r1, t2, r2), t2, r2)
    assert not invalid.any()
    np.testing.assert_allclose(tau, t1, rtol=1e-12, atol=1e-13)
    np.testing.assert_allclose(rho, r1, rtol=1e-12)
    # and the other way round: multiply the quotient back.
    q = gaussian_division(t1 + t2, r1 + r2 + 1.0, t2, r2)
    tau, rho = gaussian_product(q[0], q[1], t2, r2)
    np.testing.assert_allclose(rho, r1 + r2 + 1.0, rtol=1e-13)
    np.testing.assert_allclose(tau, t1 + t2, rtol=1e-12, atol=1e-13)


def test_division_guard_within_tolerance_clamps_to_uniform_unflagged():
    # rho1 - rho2 in [-tol, 0]: precision clamped to 0 and the result is G(0, 0).
    tau, rho, invalid = gaussian_division(
        np.array([1.0, 2.0, 3.0]), np.array([2.0, 2.0, 1.95]),
        np.array([0.5, 0.1, -1.0]), np.array([2.05, 2.0, 2.0]), tol=0.1,
    )
    np.testing.assert_array_equal(rho, 0.0)
    np.testing.assert_array_equal(tau, 0.0)
    assert not invalid.any()
    # with tol = 0 an exact tie is still fine (clamped, not flagged)
    tau, rho, invalid = gaussian_division(1.0, 2.0, 0.5, 2.0)
    assert (tau, rho, bool(invalid)) == (0.0, 0.0, False)


def test_division_guard_beyond_tolerance_is_flagged():
    tau, rho, invalid = gaussian_division(
        np.array([1.0, 1.0, 1.0, 1.0]), np.array([1.0, 1.0, 3.0, np.nan]),
        np.array([0.0, 0.0, 0.0, 0.0]), np.array([1.2, 1.05, 1.0, 1.0]), tol=0.1,
    )
    np.testing.assert_array_equal(invalid, [True, False, False, True])
    np.testing.assert_array_equal(rho, [0.0, 0.0, 2.0, 0.0])
    np.testing.assert_array_equal(tau, [0.0, 0.0, 1.0, 0.0])


@pytest.mark.parametrize("tol", [0.0, 1e-3, 0.5])
def test_division_never_returns_negative_precision(rng, tol):
    r1, r2 = rng.uniform(0, 2, size=2000), rng.uniform(0, 2, size=2000)
    t1, t2 = rng.normal(size=2000), rng.normal(size=2000)
    tau, rho, invalid = gaussian_division(t1, r1, t2, r2, tol=tol)
    assert np.all(rho >= 0)
    assert np.all(tau[rho == 0] == 0)
    np.testing.assert_array_equal(invalid, r1 - r2 < -tol)
    proper = r1 - r2 > 0
    np.testing.assert_array_equal(rho[proper], (r1 - r2)[proper])
    np.testing.assert_array_equal(tau[proper], (t1 - t2)[proper])


# ----------------------------------------------------------------------------
# 3. moments of an unnormalised density
# ----------------------------------------------------------------------------
def _tilted_closed_form(a, b):
    # f(x) = N(x; a, b) Phi(x): Z = Phi(z), z = a / sqrt(1 + b) (probit EP moments)
    s = np.sqrt(1.0 + b)
    z = a / s
    ratio = np.exp(stats.norm.logpdf(z) - stats.norm.logcdf(z))
    mean = a + b * ratio / s
    var = b - b * b * ratio / (1.0 + b) * (z + ratio)
    return stats.norm.cdf(z), mean, var


@pytest.mark.parametrize("a,b", [(0.3, 1.0), (-2.0, 0.5), (3.0, 4.0), (-6.0, 0.2)])
@pytest.mark.parametrize("scale", [1.0, 1e-5])
def test_moments_to_natural_against_quadrature_of_tilted_density(a, b, scale):
    sd = np.sqrt(b)

    def moment(k):
        f = lambda x: scale * x**k * stats.norm.pdf(x, a, sd) * stats.norm.cdf(x)  # noqa: E731
        return integrate.quad(f, a - 14 * sd, a + 14 * sd, epsabs=0, epsrel=1e-13, limit=200)[0]

    m0, m1, m2 = moment(0), moment(1), moment(2)
    z_ref, mean_ref, var_ref = _tilted_closed_form(a, b)
    assert m0 == pytest.approx(scale * z_ref, rel=1e-9, abs=0)  # the quadrature itself is right
    # the default min_mass=1e-12 rejects the scaled far-tail case (m0 ~ 2e-13)
    assert bool(moments_to_natural(m0, m1, m2)[2]) == (m0 >= 1e-12)
    tau, rho, valid = moments_to_natural(m0, m1, m2, min_mass=0.0)
    assert bool(valid)
    mean, var = from_natural(tau, rho)
    assert mean == pytest.approx(mean_ref, rel=1e-8, abs=1e-10)
    assert var == pytest.approx(var_ref, rel=1e-7)


def test_moments_to_natural_tiny_or_bad_mass_is_invalid_without_nan():
    m0 = np.array([0.0, 1e-13, 1e-300, -1.0, 1.0, 1.0, np.inf, np.nan, 1.0, 1.0])
    m1 = np.array([0.0, 1e-13, 2e-300, 0.0, 2.0, 2.0, 1.0, 0.0, np.inf, 0.0])
    m2 = np.array([0.0, 5e-13, 5e-300, 1.0, 3.0, 4.0, 1.0, 1.0, 1.0, 1e300])
    with np.errstate(**_raise_fp):
        tau, rho, valid = moments_to_natural(m0, m1, m2)
    # only the last one (mean 0, var 1e300) is a usable density; 3.0 < 2**2 and
    # 4.0 == 2**2 (zero variance) are not.
    np.testing.assert_array_equal(valid, [False] * 9 + [True])
    np.testing.assert_array_equal(tau[:9], 0.0)
    np.testing.assert_array_equal(rho[:9], 0.0)
    assert rho[9] == pytest.approx(1e-300, rel=1e-14, abs=0) and tau[9] == 0.0
    # with min_mass=0 a consistent tiny mass is accepted and exact
    with np.errstate(**_raise_fp):
        tau, rho, valid = moments_to_natural(1e-300, 2e-300, 5e-300, min_mass=0.0)
    assert bool(valid)
    assert (rho, tau) == (pytest.approx(1.0, rel=1e-14), pytest.approx(2.0, rel=1e-14))
    # ... but zero or negative mass never is (m0 = -1, m2 = -1 has "E[x^2]" = 1 > 0)
    with np.errstate(**_raise_fp):
        tau, rho, valid = moments_to_natural([0.0, -1.0], [0.0, 0.0], [1.0, -1.0], min_mass=0.0)
    assert not valid.any() and np.all(rho == 0) and np.all(tau == 0)


def test_moments_to_natural_of_exact_gaussian_moments(rng):
    mean = rng.normal(scale=3.0, size=200)
    var = 10.0 ** rng.uniform(-3, 3, size=200)
    m0 = 10.0 ** rng.uniform(-10, 10, size=200)
    tau, rho, valid = moments_to_natural(m0, m0 * mean, m0 * (var + mean**2))
    assert valid.all()
    t_ref, r_ref = to_natural(mean, var)
    # the variance is a difference of size var + mean**2: relative error ~ eps * (1 + mean**2/var)
    tol = 1e-14 * (1 + mean**2 / var) + 1e-14
    assert np.all(np.abs(rho / r_ref - 1) <= 10 * tol)
    np.testing.assert_allclose(tau / rho, mean, rtol=1e-13, atol=1e-13)


# ----------------------------------------------------------------------------
# min_rho and damping
# ----------------------------------------------------------------------------
def test_min_precision_keeps_mean_and_floors_precision():
    tau = np.array([2.0, 3e-9, 5.0, 7.0, -4e-12])
    rho = np.array([4.0, 1e-9, 0.0, 1e-8, 2e-12])
    with np.errstate(**_raise_fp):
        t, r = min_precision(tau, rho, eps=1e-8)
    np.testing.assert_array_equal(r, [4.0, 1e-8, 1e-8, 1e-8, 1e-8])
    np.testing.assert_allclose(t / r, [0.5, 3.0, 0.0, 7e8, -2.0], rtol=1e-14)
    assert t[0] == 2.0 and t[3] == 7.0  # untouched where rho >= eps


def test_damp_is_ema_in_natural_parameters():
    t, r = damp(1.0, 2.0, 3.0, 6.0, 0.25)
    assert (t, r) == (pytest.approx(1.5), pytest.approx(3.0))
    t, r = damp(np.array([1.0, 1.0]), np.array([2.0, 2.0]), 3.0, 6.0, np.array([0.0, 1.0]))
    np.testing.assert_array_equal(t, [1.0, 3.0])
    np.testing.assert_array_equal(r, [2.0, 6.0])


# ----------------------------------------------------------------------------
# 4. Gaussian multiplication approximation (tagi.md §2) against Monte Carlo
# ----------------------------------------------------------------------------
_R_MILD = np.array(
    [[1.0, 0.5, -0.3, 0.2], [0.5, 1.0, 0.1, -0.3], [-0.3, 0.1, 1.0, 0.4], [0.2, -0.3, 0.4, 1.0]]
)
_R_STRONG = np.array(
    [[1.0, -0.95, 0.8, -0.7], [-0.95, 1.0, -0.75, 0.7], [0.8, -0.75, 1.0, -0.6],
     [-0.7, 0.7, -0.6, 1.0]]
)
_GMA_CASES = {
    "independent": ([0.5, -1.2, 0.3, 2.0], [1.0, 0.49, 2.25, 0.16], np.eye(4)),
    "correlated": ([0.5, -1.2, 0.3, 2.0], [1.0, 0.49, 2.25, 0.16], _R_MILD),
    "strong_correlation": ([3.0, 2.0, -1.0, 4.0], [1.0, 2.0, 0.5, 1.5], _R_STRONG),
    "extreme_means_mixed_variances": ([40.0, -40.0, 40.0, -40.0], [1e-8, 1e4, 1e4, 1e-8], _R_MILD),
    "extreme_means_tiny_variances": ([40.0, -40.0, -40.0, 40.0], [1e-8] * 4, _R_MILD),
    "huge_variances": ([0.0, 1.0, -2.0, 0.5], [1e4] * 4, _R_MILD),
}


@pytest.mark.parametrize("case", list(_GMA_CASES))
def test_gma_equations_3_to_6_against_monte_carlo(case):
    mu, var, corr = (np.asarray(a, dtype=float) for a in _GMA_CASES[case])
    assert np.all(np.linalg.eigvalsh(corr) > 0)
    sd = np.sqrt(var)
    cov = corr * np.outer(sd, sd)
    n = 200_000
    rng = np.random.default_rng(zlib.crc32(case.encode()))
    x = mu + (rng.standard_normal((n, 4)) @ np.linalg.cholesky(corr).T) * sd
    p12, p34 = x[:, 0] * x[:, 1], x[:, 2] * x[:, 3]

    mc_mean, mc_var, se_mean, se_var = mc_moments(p12)
    assert_mc_close(product_mean(mu[0], mu[1], cov[0, 1]), mc_mean, se_mean, what="Eq. 3")
    assert_mc_close(
        product_var(mu[0], var[0], mu[1], var[1], cov[0, 1]), mc_var, se_var, what="Eq. 6"
    )
    # Eq. 4: cov(X3, X1 X2); the MC estimate is the mean of centred cross products.
    u = (x[:, 2] - x[:, 2].mean()) * (p12 - p12.mean())
    c, _, se_c, _ = mc_moments(u)
    assert_mc_close(product_cross_cov(mu[0], mu[1], cov[0, 2], cov[1, 2]), c, se_c, what="Eq. 4")
    # Eq. 4 with X3 = X1 (TAGI's cov(W A, W))
    u = (x[:, 0] - x[:, 0].mean()) * (p12 - p12.mean())
    c, _, se_c, _ = mc_moments(u)
    assert_mc_close(
        product_cross_cov(mu[0], mu[1], var[0], cov[0, 1]), c, se_c, what="Eq. 4, X3 = X1"
    )
    # Eq. 5: cov(X1 X2, X3 X4)
    u = (p12 - p12.mean()) * (p34 - p34.mean())
    c, _, se_c, _ = mc_moments(u)
    got = product_product_cov(
        mu[0], mu[1], mu[2], mu[3], cov[0, 2], cov[0, 3], cov[1, 2], cov[1, 3]
    )
    assert_mc_close(got, c, se_c, what="Eq. 5")


def test_gma_independent_case_closed_form(rng):
    # TAGI: cov(W, A) = 0  =>  var(W A) = vW vA + vW mA^2 + vA mW^2  (tagi.md §2)
    mw, ma = rng.normal(scale=5, size=(2, 300))
    vw, va = 10.0 ** rng.uniform(-8, 4, size=(2, 300))
    np.testing.assert_allclose(
        product_var(mw, vw, ma, va), vw * va + vw * ma**2 + va * mw**2, rtol=1e-15
    )
    np.testing.assert_array_equal(product_mean(mw, ma), mw * ma)
    # cov(W A, W) = vW mA and cov(W A, A) = vA mW
    np.testing.assert_allclose(product_cross_cov(mw, ma, vw, 0.0), vw * ma, rtol=1e-15)
    np.testing.assert_allclose(product_cross_cov(mw, ma, 0.0, va), va * mw, rtol=1e-15)


def test_gma_eq5_reduces_to_eq6(rng):
    # cov(X1 X2, X1 X2) = var(X1 X2) for any valid 2x2 covariance
    mu1, mu2 = rng.normal(scale=3, size=(2, 100))
    v1, v2 = 10.0 ** rng.uniform(-3, 3, size=(2, 100))
    c12 = rng.uniform(-1, 1, size=100) * np.sqrt(v1 * v2)
    eq5 = product_product_cov(mu1, mu2, mu1, mu2, v1, c12, c12, v2)
    eq6 = product_var(mu1, v1, mu2, v2, c12)
    # rounding is relative to the size of the largest term, not of the result
    scale = v1 * v2 + v1 * mu2**2 + v2 * mu1**2
    assert np.all(np.abs(eq5 - eq6) <= 1e-13 * scale)


# ----------------------------------------------------------------------------
# 5. moment matching of a mixture
# ----------------------------------------------------------------------------
def test_moment_match_mixture_against_sampling(rng):
    w = np.array([0.2, 1.3, 0.5])  # unnormalised
    m = np.array([-2.0, 0.5, 3.0])
    v = np.array([0.3, 1.0, 0.05])
    n = 200_000
    k = rng.choice(3, size=n, p=w / w.sum())
    x = m[k] + np.sqrt(v[k]) * rng.standard_normal(n)
    mean, var = moment_match_mixture(w, m, v)
    mc_mean, mc_var, se_mean, se_var = mc_moments(x)
    assert_mc_close(mean, mc_mean, se_mean, what="mixture mean")
    assert_mc_close(var, mc_var, se_var, what="mixture variance")


def test_moment_match_mixture_law_of_total_variance(rng):
    w = rng.uniform(0, 1, size=(4, 5, 3))
    m = rng.normal(size=(4, 5, 3))
    v = rng.uniform(0.1, 2, size=(4, 5, 3))
    mean, var = moment_match_mixture(w, m, v)
    assert mean.shape == (4, 5) and var.shape == (4, 5)
    p = w / w.sum(-1, keepdims=True)
    ev = (p * v).sum(-1)
    vm = (p * m**2).sum(-1) - (p * m).sum(-1) ** 2
    np.testing.assert_allclose(mean, (p * m).sum(-1), rtol=1e-13)
    np.testing.assert_allclose(var, ev + vm, rtol=1e-12)
    # the axis argument and invariance to the scale of the weights
    m2, v2 = moment_match_mixture(np.moveaxis(w, -1, 0) * 1e300, np.moveaxis(m, -1, 0),
                                  np.moveaxis(v, -1, 0), axis=0)
    np.testing.assert_allclose(m2, mean, rtol=1e-14)
    np.testing.assert_allclose(v2, var, rtol=1e-14)
    m3, v3 = moment_match_mixture(w * 1e-300, m, v)
    np.testing.assert_allclose(m3, mean, rtol=1e-14)
    np.testing.assert_allclose(v3, var, rtol=1e-14)


def test_moment_match_mixture_avoids_cancellation_and_handles_degenerate_weights():
    # E[x^2] - mean^2 would lose everything here: exact answer 1e-4 + 1.
    mean, var = moment_match_mixture([1.0, 1.0], [1e8 + 1, 1e8 - 1], [1e-4, 1e-4])
    assert mean == 1e8 and var == pytest.approx(1.0001, rel=1e-12)
    with np.errstate(**_raise_fp):
        # a zero-weight G(0, 0) component is ignored; all-zero weights give G(0, 0)
        mean, var = moment_match_mixture(
            np.array([[0.0, 1.0], [0.0, 0.0]]), np.array([[0.0, 2.0], [1.0, 2.0]]),
            np.array([[np.inf, 3.0], [1.0, 1.0]]),
        )
    np.testing.assert_array_equal(mean, [2.0, 0.0])
    np.testing.assert_array_equal(var, [3.0, np.inf])


# ----------------------------------------------------------------------------
# 6. namespace cleanliness
# ----------------------------------------------------------------------------
_TAU = np.array([[0.5, -3.0, 0.0, 1e-9, 2.0]])
_RHO = np.array([[2.0, 0.0, 1e-12, 1e-9, np.inf]])
_MEAN = np.array([[1.0, -2.0, 0.0, 1e8, 0.3]])
_VAR = np.array([[0.5, np.inf, 1e-200, 0.0, 2.0]])
_COL = np.array([[1.5], [-0.5], [0.1]])  # broadcasts against the rows above
_STRICT_CASES = [
    (to_natural, (_MEAN, _VAR), {}),
    (from_natural, (_TAU, _RHO), {}),
    (gaussian_product, (_TAU, _RHO, _COL, _COL**2), {}),
    (gaussian_division, (_TAU, _RHO, _COL, _COL**2), {"tol": 0.1}),
    (product_normalizer_log, (_MEAN, _VAR, _COL, _COL**2), {}),
    (moments_to_natural, (_COL**2, _MEAN, _VAR), {}),
    (min_precision, (_TAU, _RHO), {"eps": 1e-8}),
    (damp, (_TAU, _COL**2, _MEAN, _COL**2, 0.3), {}),
    (moment_match_mixture, (_COL**2 + 0 * _MEAN, _MEAN, np.abs(_MEAN) + 1), {"axis": 0}),
    (moment_match_mixture, (_COL**2 + 0 * _MEAN, _MEAN, np.abs(_MEAN) + 1), {}),
    (product_mean, (_MEAN, _COL), {}),
    (product_mean, (_MEAN, _COL, 0.2 * _COL), {}),
    (product_var, (_MEAN, _COL**2, _COL, np.abs(_MEAN)), {}),
    (product_var, (_MEAN, _COL**2, _COL, np.abs(_MEAN), 0.1 * _COL), {}),
    (product_cross_cov, (_MEAN, _COL, 0.3 * _COL, _MEAN), {}),
    (product_product_cov, (_MEAN, _COL, _MEAN, 2 * _COL, _COL, 0.1 * _COL, 0.2, _MEAN), {}),
]


@pytest.mark.parametrize(
    "fn,args,kwargs",
    _STRICT_CASES,
    ids=[f"{c[0].__name__}-{i}" for i, c in enumerate(_STRICT_CASES)],
)
def test_strict_namespace(strict_xp, fn, args, kwargs):
    xp, asarray = strict_xp
    ref = fn(*args, **kwargs)
    got = fn(*[asarray(a) if isinstance(a, np.ndarray) else a for a in args], **kwargs)
    ref = ref if isinstance(ref, tuple) else (ref,)
    got = got if isinstance(got, tuple) else (got,)
    assert len(got) == len(ref)
    for g, r in zip(got, ref):
        assert type(g).__name__ == "StrictArray"
        assert np.asarray(g).shape == np.shape(r)
        np.testing.assert_array_equal(np.asarray(g), r)


# ----------------------------------------------------------------------------
# 7. extreme inputs
# ----------------------------------------------------------------------------
def _extreme_grid():
    means = np.array([-1e8, -1.0, 0.0, 1.0, 1e8])
    vars_ = 10.0 ** np.arange(-200, 201, 50.0)
    mean, var = np.meshgrid(means, vars_, indexing="ij")
    return mean.ravel(), var.ravel()


def test_extreme_inputs_natural_parameters():
    mean, var = _extreme_grid()
    with np.errstate(**_raise_fp):
        tau, rho = to_natural(mean, var)
        assert np.all(np.isfinite(tau)) and np.all(np.isfinite(rho)) and np.all(rho > 0)
        m, v = from_natural(tau, rho)
        np.testing.assert_allclose(m, mean, rtol=1e-14)
        np.testing.assert_allclose(v, var, rtol=1e-15)
        # products with the reversed grid (tiny var against huge var, opposite means)
        t, r = gaussian_product(tau, rho, tau[::-1], rho[::-1])
        m, v = from_natural(t, r)
        assert np.all(np.isfinite(m)) and np.all(v > 0) and np.all(np.isfinite(v))
        assert np.all(v <= np.minimum(var, var[::-1]) * (1 + 1e-12))
        tq, rq, invalid = gaussian_division(t, r, tau[::-1], rho[::-1])
        assert np.all(rq >= 0) and not np.any(np.isnan(tq))
        log_z = product_normalizer_log(mean, var, mean[::-1], var[::-1])
        assert np.all(np.isfinite(log_z))
        # rho == 0 (G(0, 0)) with extreme tau: mean 0, var inf, floors to G(0, eps)
        m0, v0 = from_natural(tau, 0.0 * rho)
        assert np.all(m0 == 0) and np.all(v0 == np.inf)
        tf, rf = min_precision(tau, 0.0 * rho)
        assert np.all(tf == 0) and np.all(rf == 1e-8)
        tf, rf = min_precision(tau, rho, eps=1e-8)
        assert np.all(rf >= 1e-8) and np.all(np.isfinite(tf))
        np.testing.assert_allclose(from_natural(tf, rf)[0], mean, rtol=1e-14)
        td, rd = damp(tau, rho, tau[::-1], rho[::-1], 0.5)
        assert np.all(np.isfinite(td)) and np.all(rd > 0)


def test_extreme_inputs_moments_and_mixtures():
    mean, var = _extreme_grid()
    with np.errstate(**_raise_fp):
        for m0 in (1e-10, 1.0, 1e10):
            tau, rho, valid = moments_to_natural(m0, m0 * mean, m0 * (var + mean * mean))
            assert not np.any(np.isnan(tau)) and np.all(rho >= 0) and np.all(np.isfinite(rho))
            assert np.all(tau[~valid] == 0) and np.all(rho[~valid] == 0)
            # wherever the variance is not lost to cancellation it is recovered
            ok = var > 1e-6 * mean**2
            assert valid[ok].all()
            np.testing.assert_allclose(1 / rho[ok], var[ok], rtol=1e-8)
        w = np.linspace(0.1, 1.0, mean.size)
        mm, mv = moment_match_mixture(w, mean, var)
        assert np.isfinite(mm) and np.isfinite(mv) and mv > 0
        # GMA with representable results (var up to 1e100, so var1 * var2 <= 1e200)
        small = var <= 1e100
        m1, v1, m2, v2 = mean[small], var[small], mean[small][::-1], var[small][::-1]
        pv = product_var(m1, v1, m2, v2)
        assert np.all(np.isfinite(pv)) and np.all(pv >= 0)
        pv = product_var(m1, v1, m2, v2, -0.999 * np.sqrt(v1 * v2))
        assert np.all(np.isfinite(pv)) and np.all(pv >= 0)
        pm = product_mean(m1, m2, 0.5 * np.sqrt(v1 * v2))
        assert np.all(np.isfinite(pm))


# ----------------------------------------------------------------------------
# weighted-sum backward message and truncated Gaussians (message_passing.md §5.1, §5.11)
# ----------------------------------------------------------------------------
def test_weighted_sum_backward_matches_grid_marginal(rng):
    from skbayesnn.core.gaussian import weighted_sum_backward

    for _ in range(5):
        c = rng.normal(size=2) * 2
        m = rng.normal(size=2)
        v = rng.uniform(0.2, 2.0, size=2)
        tau_s, rho_s = rng.normal(), rng.uniform(0.3, 3.0)
        s_mean, s_var = c @ m, c**2 @ v
        tau, rho = weighted_sum_backward(tau_s, rho_s, s_mean, s_var, c[0], m[0], v[0])
        g = [np.linspace(mi - 9 * np.sqrt(vi), mi + 9 * np.sqrt(vi), 1001) for mi, vi in zip(m, v)]
        A, B = np.meshgrid(*g, indexing="ij")
        dens = (
            stats.norm.pdf(A, m[0], np.sqrt(v[0]))
            * stats.norm.pdf(B, m[1], np.sqrt(v[1]))
            * stats.norm.pdf(c[0] * A + c[1] * B, tau_s / rho_s, 1 / np.sqrt(rho_s))
        )
        marg = dens.sum(axis=1)
        mom = [integrate.trapezoid(marg * g[0] ** k, g[0]) for k in range(3)]
        t_m, r_m, _ = moments_to_natural(*mom)
        np.testing.assert_allclose(
            [tau, rho], [float(t_m) - m[0] / v[0], float(r_m) - 1 / v[0]], rtol=1e-7, atol=1e-10
        )
    # c = 0 or rho_s = 0: the neutral message G(0, 0)
    assert weighted_sum_backward(1.0, 2.0, 0.5, 1.0, 0.0, 0.3, 0.4) == (0.0, 0.0)
    tau, rho = weighted_sum_backward(0.0, 0.0, 0.5, 1.0, 2.0, 0.3, 0.2)
    assert tau == 0.0 and rho == 0.0


@pytest.mark.parametrize("t", [-3.0, -14.0, -16.0, -30.0, -51.0, -80.0, -300.0])
def test_truncated_gaussian_moments_in_the_far_tail_against_quadrature(t):
    # N(t, 1) on x >= 0 has density proportional to exp(t x - x^2 / 2) there
    # (the factor exp(-t^2/2), which underflows, cancels); quadrature to 1e-13.
    from skbayesnn.core.gaussian import truncated_gaussian_moments

    def moment(k):
        return integrate.quad(lambda x: x**k * np.exp(t * x - 0.5 * x * x), 0, np.inf,
                              epsabs=0, epsrel=1e-13, limit=200)[0]

    m0, m1, m2 = moment(0), moment(1), moment(2)
    mean = m1 / m0
    var = m2 / m0 - mean**2  # cancels by at most a factor ~2: var ~ mean^2 ~ 1/t^2
    _, tm, tv = truncated_gaussian_moments(np.array([t]), np.array([1.0]))
    # the direct forms cancel (variance error 1e-10 at t = -30, measured against
    # 50-digit arithmetic) and a three-term series is off by 3e-8 at t = -51;
    # below t = -15 the 16-term series is exact to rounding
    np.testing.assert_allclose(tm, mean, rtol=1e-12)
    np.testing.assert_allclose(tv, var, rtol=1e-11)


def test_truncated_gaussian_moments_keep_float32_and_its_accuracy():
    # computed in float64 and rounded: float32 arithmetic lost ~10% of the
    # variance in the tail (t = -45) and warned of an overflowing cast
    from skbayesnn.core.gaussian import truncated_gaussian_moments

    t = np.array([-45.0, -14.0, -3.0, 0.5, 6.0])
    with np.errstate(**_raise_fp):
        out32 = truncated_gaussian_moments(t.astype(np.float32), np.ones(5, np.float32))
    out64 = truncated_gaussian_moments(t, np.ones(5))
    for a, b in zip(out32, out64):
        assert a.dtype == np.float32
        np.testing.assert_allclose(a, b.astype(np.float32), rtol=1e-6)
    # beyond float32's range: log mass -inf, variance floored at float32's tiny
    with np.errstate(**_raise_fp):
        lm, _, tv = truncated_gaussian_moments(np.float32([-1e30]), np.ones(1, np.float32))
    assert lm[0] == -np.inf and tv[0] == np.finfo(np.float32).tiny


def test_truncated_gaussian_moments_against_scipy_and_extremes():
    from skbayesnn.core.gaussian import truncated_gaussian_moments

    mean = np.array([-30.0, -8.0, -1.0, 0.0, 0.7, 5.0, 40.0])
    var = np.array([1.0, 4.0, 0.5, 2.0, 1.0, 3.0, 1.0])
    lm, tm, tv = truncated_gaussian_moments(mean, var)
    s = np.sqrt(var)
    d = stats.truncnorm(-mean / s, np.inf, loc=mean, scale=s)
    np.testing.assert_allclose(lm, stats.norm.logcdf(mean / s), rtol=1e-12)
    np.testing.assert_allclose(tm, d.mean(), rtol=1e-8)
    np.testing.assert_allclose(tv, d.var(), rtol=1e-6)
    # the asymptotic branch (t < -15) joins the direct one continuously
    # (the moments themselves change by ~2e-12 relative over the 2e-12 step)
    lo = truncated_gaussian_moments(np.array([-15.0 + 1e-12]), 1.0)
    hi = truncated_gaussian_moments(np.array([-15.0 - 1e-12]), 1.0)
    np.testing.assert_allclose(lo[1], hi[1], rtol=1e-12)
    np.testing.assert_allclose(lo[2], hi[2], rtol=1e-11)
    with np.errstate(**_raise_fp):
        lm, tm, tv = truncated_gaussian_moments(np.array([-1e150, -1e5, 1e5, 1e150]), 1.0)
    assert np.all(np.isfinite(lm)) and np.all(tm >= 0) and np.all(tv > 0) and np.all(tv <= 1)


def test_truncated_moments_where_mean_over_std_overflows():
    # t = mean / std beyond float64: far above 0 the truncation removes
    # nothing (it returned mean inf and variance NaN at t = 1e600); far below,
    # the truncated mean is std / |t| (the series argument was capped at 1e100:
    # 1e-100 instead of 1e-200).  No warning either way.
    from skbayesnn.core.gaussian import truncated_gaussian_moments as tgm

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        log_mass, mean, var = tgm(np.array([1e300, 50.0]), np.array([1e-300, 1.0]))
        np.testing.assert_array_equal(mean, [1e300, 50.0])
        np.testing.assert_array_equal(var, [1e-300, 1.0])
        np.testing.assert_array_equal(log_mass, [0.0, 0.0])
        _, mean, var = tgm(np.array([-1e200, -1e300]), np.array([1.0, 1e-300]))
    np.testing.assert_allclose(mean[0], 1e-200, rtol=1e-12)
    assert mean[1] == 0.0 and np.all(var <= 1e-300) and np.all(var >= 0)


def test_division_tolerance_must_be_non_negative():
    from skbayesnn.core.gaussian import gaussian_division

    assert not gaussian_division(1.0, 2.0, 0.0, 1.95, tol=0.1)[2]
    with pytest.raises(ValueError, match="tol >= 0"):
        gaussian_division(1.0, 2.0, 0.0, 1.95, tol=-0.1)
