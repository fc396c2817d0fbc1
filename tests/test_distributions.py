"""Tests of skbayesnn.distributions: closed forms, scipy.stats references, Monte Carlo."""

import warnings

import numpy as np
import pytest
from numpy.testing import assert_allclose, assert_array_equal
from scipy import integrate, stats
from scipy.special import logsumexp

from skbayesnn._testing import assert_mc_close, mc_moments
from skbayesnn.distributions import (
    CategoricalPredictive,
    GaussianMixturePredictive,
    NormalPredictive,
)
from skbayesnn.metrics import coverage

RTOL = 1e-12
N_MC = 200_000  # Monte Carlo draws; comparisons at 5 standard errors (assert_mc_close)


@pytest.fixture
def normal(rng):
    mean = rng.normal(size=(6, 2)) * 3
    ep = rng.uniform(0.1, 2.0, size=(6, 2))
    al = rng.uniform(0.1, 2.0, size=(6, 2))
    return NormalPredictive(mean, epistemic_var=ep, aleatoric_var=al)


def _mixture(rng, n=4, k=3):
    means = rng.normal(size=(n, k)) * 3
    vars_ = rng.uniform(0.05, 2.0, size=(n, k))
    weights = rng.dirichlet(np.ones(k), size=n)
    return means, vars_, weights


# --------------------------------------------------------------------------- Normal


def test_normal_matches_scipy_norm(normal, rng):
    ref = stats.norm(loc=normal.mean(), scale=normal.std())
    y = rng.normal(size=(3, 6, 2)) * 4  # extra leading axis broadcasts
    assert_allclose(normal.logpdf(y), ref.logpdf(y), rtol=RTOL)
    assert_allclose(normal.pdf(y), ref.pdf(y), rtol=RTOL)
    assert_allclose(normal.cdf(y), ref.cdf(y), rtol=RTOL)
    assert_allclose(normal.logcdf(y), ref.logcdf(y), rtol=RTOL)
    assert_allclose(normal.sf(y), ref.sf(y), rtol=RTOL)
    q = rng.uniform(size=(6, 2))
    assert_allclose(normal.ppf(q), ref.ppf(q), rtol=RTOL)
    assert_allclose(normal.entropy(), ref.entropy(), rtol=RTOL)
    for lo, hi in zip(normal.interval(0.9), ref.interval(0.9)):
        assert_allclose(lo, hi, rtol=RTOL)
    # far tails: logcdf stays finite where cdf underflows, sf has no cancellation
    far = NormalPredictive(0.0, 1.0)
    assert_allclose(far.logcdf(-40.0), stats.norm.logcdf(-40.0), rtol=RTOL)
    assert_allclose(far.sf(12.0), stats.norm.sf(12.0), rtol=RTOL)


def test_normal_to_scipy_agrees(normal, rng):
    frozen = normal.to_scipy()
    y = rng.normal(size=(6, 2))
    assert_allclose(frozen.logpdf(y), normal.logpdf(y), rtol=RTOL)
    assert_allclose(frozen.cdf(y), normal.cdf(y), rtol=RTOL)
    assert_allclose(frozen.var(), normal.var(), rtol=RTOL)


@pytest.mark.parametrize("confidence", [0.0, 0.5, 0.8, 0.95, 0.999999])
def test_normal_interval_has_nominal_probability(normal, confidence):
    lo, hi = normal.interval(confidence)
    assert_allclose(normal.cdf(hi) - normal.cdf(lo), confidence, rtol=0, atol=1e-14)
    assert_allclose(0.5 * (lo + hi), normal.mean(), rtol=1e-14, atol=1e-14)  # central


def test_normal_interval_array_confidence_and_limits():
    d = NormalPredictive([0.0, 0.0, 0.0], 4.0)
    lo, hi = d.interval([0.5, 0.95, 1.0])
    assert_allclose(hi[:2], 2.0 * stats.norm.ppf([0.75, 0.975]), rtol=RTOL)
    assert hi[2] == np.inf and lo[2] == -np.inf


def test_normal_rvs_moments_and_reproducibility(normal):
    draws = normal.rvs(N_MC, random_state=0)
    assert draws.shape == (N_MC, 6, 2)
    mean, var, se_mean, se_var = mc_moments(draws)
    assert_mc_close(normal.mean(), mean, se_mean, what="rvs mean")
    assert_mc_close(normal.var(), var, se_var, what="rvs var")
    assert_array_equal(normal.rvs(5, random_state=3), normal.rvs(5, random_state=3))
    assert_array_equal(
        normal.rvs(5, random_state=np.random.RandomState(3)),
        normal.rvs(5, random_state=np.random.RandomState(3)),
    )
    assert_array_equal(
        normal.rvs(5, random_state=np.random.default_rng(3)),
        normal.rvs(5, random_state=np.random.default_rng(3)),
    )
    assert not np.array_equal(normal.rvs(5, random_state=3), normal.rvs(5, random_state=4))
    assert normal.rvs(random_state=0).shape == normal.shape
    assert normal.rvs((2, 3), random_state=0).shape == (2, 3, 6, 2)


def test_normal_variance_parts():
    ep = np.array([0.5, 1.0, 0.0])
    al = np.array([0.25, 0.0, 2.0])
    d = NormalPredictive([1.0, 2.0, 3.0], epistemic_var=ep, aleatoric_var=al)
    assert_allclose(d.var(), ep + al, rtol=0)
    assert_allclose(d.epistemic_var + d.aleatoric_var, d.var(), rtol=1e-15)
    # var plus one part: the other part is the difference
    d2 = NormalPredictive([0.0, 0.0], [2.0, 3.0], aleatoric_var=0.5)
    assert_allclose(d2.epistemic_var, [1.5, 2.5], rtol=1e-15)
    assert_allclose(d2.aleatoric_var, [0.5, 0.5], rtol=0)
    # one part without var: the missing part is zero
    d3 = NormalPredictive([0.0, 0.0], epistemic_var=[1.0, 2.0])
    assert_array_equal(d3.aleatoric_var, [0.0, 0.0])
    assert_array_equal(d3.var(), [1.0, 2.0])
    # var only: not separated
    d4 = NormalPredictive([0.0], [1.0])
    assert d4.epistemic_var is None and d4.aleatoric_var is None
    # consistent parts with var are accepted (rounding-level differences)
    NormalPredictive(0.0, 0.1 + 0.2, epistemic_var=0.1, aleatoric_var=0.2)


def test_normal_zero_variance_is_a_point_mass():
    d = NormalPredictive([1.0, 2.0], [0.0, 1.0])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert_array_equal(d.std(), [0.0, 1.0])
        assert_array_equal(d.ppf([0.0, 0.5]), [1.0, 2.0])
        assert_array_equal(d.ppf([1e-9, 1.0])[0], 1.0)
        lo, hi = d.interval(0.9)
        assert lo[0] == hi[0] == 1.0
        assert_array_equal(d.rvs(100, random_state=0)[:, 0], 1.0)
        assert_array_equal(d.logpdf([1.0, 2.0])[0], np.inf)
        assert_array_equal(d.logpdf([[0.5, 2.0], [1.5, 2.0]])[:, 0], -np.inf)
        assert_array_equal(d.cdf([[0.5, 2.0], [1.0, 2.0], [1.5, 2.0]])[:, 0], [0.0, 1.0, 1.0])
        assert_array_equal(d.sf([[0.5, 2.0], [1.0, 2.0]])[:, 0], [1.0, 0.0])
        assert_array_equal(d.logcdf([[0.5, 2.0], [1.5, 2.0]])[:, 0], [-np.inf, 0.0])
        assert d.entropy()[0] == -np.inf
    with pytest.raises(ValueError, match="positive variances"):
        d.to_scipy()


def test_normal_far_tails_give_their_limits_quietly():
    # (y - m) / sd overflows there: the limits, with no RuntimeWarning (sf and
    # logcdf had warned of the overflow)
    d = NormalPredictive([0.0, 0.0], [1e-300, 1.0])
    y = np.array([[1e308, 1e308], [-1e308, -1e308]])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert_array_equal(d.cdf(y), [[1.0, 1.0], [0.0, 0.0]])
        assert_array_equal(d.sf(y), [[0.0, 0.0], [1.0, 1.0]])
        assert_array_equal(d.logcdf(y), [[0.0, 0.0], [-np.inf, -np.inf]])


def test_normal_slicing_keeps_parts_consistent(normal):
    mask = np.array([True, False, True, True, False, False])
    for key in [slice(1, 4), [0, 5, 2], mask, 3, (slice(None), 1), (Ellipsis, 0)]:
        sub = normal[key]
        assert isinstance(sub, NormalPredictive)
        assert_array_equal(sub.mean(), normal.mean()[key])
        assert_array_equal(sub.var(), normal.var()[key])
        assert_array_equal(sub.epistemic_var, normal.epistemic_var[key])
        assert_array_equal(sub.aleatoric_var, normal.aleatoric_var[key])
        assert sub.shape == normal.mean()[key].shape
    assert len(normal) == 6 and normal.ndim == 2 and len(normal[1:4]) == 3
    with pytest.raises(TypeError):
        len(NormalPredictive(0.0, 1.0))
    # iteration goes over the first axis, as for arrays; a 0-d one is not iterable
    rows = list(normal)
    assert len(rows) == 6 and all(r.shape == (2,) for r in rows)
    assert_array_equal(rows[4].mean(), normal.mean()[4])
    scalars = (
        NormalPredictive(0.0, 1.0),
        GaussianMixturePredictive([0.0, 1.0], 1.0, [0.5, 0.5]),
        CategoricalPredictive([0.2, 0.8]),
    )
    for scalar in scalars:
        with pytest.raises(TypeError, match="iteration"):
            list(scalar)
    assert "NormalPredictive" in repr(normal) and "(6, 2)" in repr(normal)


@pytest.mark.parametrize(
    "args, kwargs, match",
    [
        (([0.0, 1.0], [1.0, -1.0]), {}, "var must be >= 0"),
        (([0.0, np.nan], [1.0, 1.0]), {}, "mean contains NaN"),
        (([0.0, 1.0], [1.0, np.inf]), {}, "var contains NaN or infinite"),
        (([0.0, 1.0], [1.0, 1.0, 1.0]), {}, "shape mismatch"),
        (([0.0, 1.0],), {}, "needs var"),
        (([0.0],), {"epistemic_var": [-0.1]}, "epistemic_var must be >= 0"),
        (([0.0], [1.0]), {"epistemic_var": 0.5, "aleatoric_var": 0.6}, "must equal var"),
        (([0.0], [1.0]), {"epistemic_var": 1.5}, "epistemic_var must not exceed var"),
        ((["a"], [1.0]), {}, "mean must be a real numeric"),
        # one variance per point in another layout: it had broadcast to (3, 3)
        (([0.0, 1.0, 2.0], [[1.0], [2.0], [3.0]]), {}, r"var \(against mean\) has one value"),
        (([0.0, 1.0, 2.0],), {"epistemic_var": [[1.0], [2.0], [3.0]], "aleatoric_var": 0.1},
         r"epistemic_var \(against mean\) has one value per point"),
        ((0.0,), {"epistemic_var": [1.0, 1.0, 1.0], "aleatoric_var": [[1.0], [1.0], [1.0]]},
         r"aleatoric_var \(against epistemic_var\) has one value per point"),
    ],
)
def test_normal_invalid_input(args, kwargs, match):
    with pytest.raises(ValueError, match=match):
        NormalPredictive(*args, **kwargs)


def test_normal_invalid_quantiles(normal):
    with pytest.raises(ValueError, match=r"q must lie in \[0, 1\]"):
        normal.ppf(1.5)
    with pytest.raises(ValueError, match=r"q must lie in \[0, 1\]"):
        normal.ppf(np.nan)
    with pytest.raises(ValueError, match="confidence"):
        normal.interval(-0.1)
    # q or confidence that do not broadcast with the batch shape (6, 2): the same
    # named error as logpdf, not numpy's broadcasting message
    for call in (normal.logpdf, normal.cdf, normal.ppf, normal.interval):
        with pytest.raises(ValueError, match=r"shape mismatch.*\(5,\).*\(6, 2\)"):
            call(np.full(5, 0.5))


# --------------------------------------------------------------------------- mixture


def test_mixture_moments_closed_form_and_sampling(rng):
    means, vars_, weights = _mixture(rng)
    d = GaussianMixturePredictive(means, vars_, weights)
    mean = np.sum(weights * means, axis=1)
    second = np.sum(weights * (vars_ + means**2), axis=1)
    assert_allclose(d.mean(), mean, rtol=RTOL)
    assert_allclose(d.var(), second - mean**2, rtol=1e-10)
    draws = d.rvs(N_MC, random_state=1)
    assert draws.shape == (N_MC, 4)
    mc_mean, mc_var, se_mean, se_var = mc_moments(draws)
    assert_mc_close(d.mean(), mc_mean, se_mean, what="mixture mean")
    assert_mc_close(d.var(), mc_var, se_var, what="mixture var")
    assert_array_equal(d.rvs(7, random_state=5), d.rvs(7, random_state=5))
    assert_array_equal(
        d.rvs(7, random_state=np.random.default_rng(5)),
        d.rvs(7, random_state=np.random.default_rng(5)),
    )


def test_mixture_var_without_cancellation():
    # huge common offset: E[Y^2] - E[Y]^2 would lose every digit
    d = GaussianMixturePredictive([[1e9 - 1.0, 1e9 + 1.0]], [[1e-4, 1e-4]])
    assert_allclose(d.var(), 1.0 + 1e-4, rtol=1e-12)


def test_mixture_rvs_never_draws_zero_weight_component():
    d = GaussianMixturePredictive([[0.0, 1e6, 0.0]], 1.0, [0.5, 0.0, 0.5])
    assert np.all(np.abs(d.rvs(20_000, random_state=0)) < 100)


def test_mixture_logpdf_is_log_weighted_sum_of_normal_pdfs(rng):
    means, vars_, weights = _mixture(rng)
    d = GaussianMixturePredictive(means, vars_, weights)
    y = rng.normal(size=(5, 4)) * 3
    dens = np.sum(weights * stats.norm.pdf(y[..., None], means, np.sqrt(vars_)), axis=-1)
    assert_allclose(d.logpdf(y), np.log(dens), rtol=RTOL)
    assert_allclose(d.pdf(y), dens, rtol=RTOL)
    cdf = np.sum(weights * stats.norm.cdf(y[..., None], means, np.sqrt(vars_)), axis=-1)
    sf = np.sum(weights * stats.norm.sf(y[..., None], means, np.sqrt(vars_)), axis=-1)
    assert_allclose(d.cdf(y), cdf, rtol=RTOL)
    assert_allclose(d.sf(y), sf, rtol=RTOL)
    # (log of the summed cdf loses digits near cdf = 1, so compare on the cdf scale)
    assert_allclose(np.exp(d.logcdf(y)), cdf, rtol=RTOL)
    # far from every component the direct sum underflows; logsumexp stays exact
    far = d.logpdf(np.full(4, 200.0))
    comps = stats.norm.logpdf(200.0, means, np.sqrt(vars_)) + np.log(weights)
    assert np.all(np.isfinite(far))
    assert_allclose(far, logsumexp(comps, axis=-1), rtol=RTOL)


Q_GRID = np.concatenate(
    [[1e-6, 1e-5, 1e-3], np.linspace(0.01, 0.99, 25), [0.999, 1 - 1e-5, 1 - 1e-6]]
)


@pytest.mark.parametrize(
    "means, vars_, weights",
    [
        ([0.0, 1.0, 2.5], [1.0, 0.5, 2.0], [0.2, 0.5, 0.3]),
        ([0.0, 1e3, -1e4], [1.0, 1e-4, 100.0], [0.2, 0.5, 0.3]),  # widely separated
        ([-50.0, 50.0], [1.0, 1.0], [0.5, 0.5]),  # flat cdf plateau at q = 0.5
        ([5.0, 5.0 + 1e-9], [1e-6, 1e-6], [0.999, 0.001]),
    ],
)
def test_mixture_cdf_of_ppf_is_identity(means, vars_, weights):
    d = GaussianMixturePredictive(np.array([means]), np.array([vars_]), weights)
    x = d.ppf(Q_GRID[:, None])
    assert x.shape == (Q_GRID.size, 1)
    q = Q_GRID[:, None]
    tail = np.minimum(q, 1 - q)
    assert np.all(np.abs(d.cdf(x) - q) <= 1e-9 * tail)
    upper = q > 0.5
    assert np.all(np.abs(d.sf(x) - (1 - q))[upper] <= 1e-9 * tail[upper])
    assert np.all(np.diff(x[:, 0]) >= 0)  # monotone
    assert d.ppf(0.0)[0] == -np.inf and d.ppf(1.0)[0] == np.inf


def test_mixture_ppf_vectorised_over_points(rng):
    means, vars_, weights = _mixture(rng, n=50, k=5)
    d = GaussianMixturePredictive(means, vars_, weights)
    q = rng.uniform(1e-6, 1 - 1e-6, size=50)
    assert_allclose(d.cdf(d.ppf(q)), q, rtol=1e-10, atol=0)
    lo, hi = d.interval(0.9)
    assert_allclose(d.cdf(hi) - d.cdf(lo), 0.9, rtol=0, atol=1e-12)


def test_mixture_ppf_with_point_mass_component():
    d = GaussianMixturePredictive([[0.0, 10.0]], [[0.0, 1.0]], [0.5, 0.5])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        x = d.ppf([[0.25], [0.5], [0.75]])[:, 0]
        assert x[0] == 0.0  # inside the jump of the cdf at the point mass
        assert_allclose(d.cdf(x[2]), 0.75, rtol=1e-12)
        assert d.logpdf(0.0)[0] == np.inf
        assert np.isfinite(d.logpdf(10.0)[0])
        assert d.entropy()[0] == -np.inf


def test_mixture_ppf_is_the_generalised_inverse_at_point_masses():
    # Where q falls inside a jump of the cdf, ppf(q) = inf{x: cdf(x) >= q} is the
    # point mass itself, also when the jump sits in a continuous part (where the
    # root finder used to stop a few ulp to the left, so that an interval or
    # coverage left the point out).
    q = np.linspace(0.01, 0.99, 99)
    for means, vars_, weights in (
        ([1.0, 0.0], [0.0, 1.0], [0.5, 0.5]),
        ([1.0, 0.0], [0.0, 0.0], [0.3, 0.7]),
        ([-1.0, 2.0, 0.5], [0.0, 0.0, 4.0], [0.2, 0.3, 0.5]),
    ):
        d = GaussianMixturePredictive([means], vars_, weights)
        x = d.ppf(q[:, None])[:, 0]
        assert np.all(d.cdf(x[:, None])[:, 0] >= q - 1e-12)
        left = d.cdf(np.nextafter(x, -np.inf)[:, None] - 1e-9 * (1 + np.abs(x))[:, None])
        assert np.all(left[:, 0] < q)
    d = GaussianMixturePredictive([[1.0, 0.0]], [0.0, 1.0], [0.5, 0.5])
    assert d.ppf(0.6)[0] == 1.0
    assert coverage([1.0], d, 0.2) == 1.0


def test_mixture_to_scipy_agrees(rng):
    means, vars_, weights = _mixture(rng, n=3)
    d = GaussianMixturePredictive(means, vars_, weights)
    objs = d.to_scipy()
    assert isinstance(objs, list) and len(objs) == 3
    for i, obj in enumerate(objs):
        assert isinstance(obj, stats.Mixture)
        y = np.array([-2.0, 0.3, 4.0])
        assert_allclose(obj.logpdf(y), d[i].logpdf(y), rtol=1e-12)
        assert_allclose(obj.cdf(y), d[i].cdf(y), rtol=1e-12)
        assert_allclose(obj.mean(), d.mean()[i], rtol=1e-12)
        assert_allclose(obj.variance(), d.var()[i], rtol=1e-10)
        assert_allclose(obj.entropy(), d.entropy()[i], rtol=1e-9)
    d2 = GaussianMixturePredictive(rng.normal(size=(2, 2, 3)), 1.0)
    nested = d2.to_scipy()
    assert len(nested) == 2 and len(nested[1]) == 2
    assert_allclose(nested[1][0].mean(), d2.mean()[1, 0], rtol=1e-12)
    with pytest.raises(ValueError, match="positive component variances"):
        GaussianMixturePredictive([[0.0, 1.0]], [[0.0, 1.0]]).to_scipy()


def test_mixture_entropy_against_adaptive_quadrature():
    # narrow and broad components, one far away (scipy's Mixture.entropy misses it)
    d = GaussianMixturePredictive(
        [[0.0, 1e3, -5.0], [0.0, 2.0, 4.0]], [[1.0, 1e-4, 100.0], [1.0, 0.01, 3.0]], [0.2, 0.5, 0.3]
    )
    expected = []
    for i in range(2):
        m, s = d.components.means[i], np.sqrt(d.components.vars[i])
        cuts = np.unique(np.concatenate([m + s * t for t in (-40, -10, -3, 0, 3, 10, 40)]))
        di = d[i]

        def integrand(y):
            lp = float(di.logpdf(y))
            return -np.exp(lp) * lp

        expected.append(sum(
            integrate.quad(integrand, a, b, epsabs=1e-13, epsrel=1e-12, limit=200)[0]
            for a, b in zip(cuts[:-1], cuts[1:])
        ))
    assert_allclose(d.entropy(), expected, rtol=1e-9)


def test_one_component_mixture_equals_normal(rng):
    mean = rng.normal(size=(5, 2))
    var = rng.uniform(0.1, 3.0, size=(5, 2))
    al = 0.3 * var
    mix = GaussianMixturePredictive(mean[..., None], var[..., None], aleatoric_vars=al[..., None])
    nor = NormalPredictive(mean, var, aleatoric_var=al)
    y = rng.normal(size=(5, 2))
    q = rng.uniform(size=(5, 2))
    assert mix.shape == nor.shape == (5, 2) and mix.n_components == 1
    for name in ("logpdf", "pdf", "cdf", "logcdf", "sf"):
        assert_allclose(getattr(mix, name)(y), getattr(nor, name)(y), rtol=RTOL, err_msg=name)
    for name in ("mean", "var", "std"):
        assert_allclose(getattr(mix, name)(), getattr(nor, name)(), rtol=RTOL, err_msg=name)
    assert_allclose(mix.epistemic_var, nor.epistemic_var, rtol=1e-12)
    assert_allclose(mix.aleatoric_var, nor.aleatoric_var, rtol=1e-12)
    assert_allclose(mix.ppf(q), nor.ppf(q), rtol=1e-10)
    assert_allclose(mix.entropy(), nor.entropy(), rtol=1e-10)
    for a, b in zip(mix.interval(0.8), nor.interval(0.8)):
        assert_allclose(a, b, rtol=1e-10)


def test_mixture_epistemic_aleatoric_split(rng):
    means, vars_, weights = _mixture(rng)
    al = vars_ * rng.uniform(0.0, 1.0, size=vars_.shape)
    d = GaussianMixturePredictive(means, vars_, weights, aleatoric_vars=al)
    mean = np.sum(weights * means, axis=1)
    between = np.sum(weights * (means - mean[:, None]) ** 2, axis=1)
    assert_allclose(d.epistemic_var, between + np.sum(weights * (vars_ - al), axis=1), rtol=1e-12)
    assert_allclose(d.aleatoric_var, np.sum(weights * al, axis=1), rtol=1e-12)
    assert_allclose(d.epistemic_var + d.aleatoric_var, d.var(), rtol=1e-12)
    assert_allclose(d.between_var, between, rtol=1e-12)
    # without aleatoric_vars the split is unknown (the component variances may hold
    # model uncertainty too): both parts are None, as for NormalPredictive(mean, var)
    plain = GaussianMixturePredictive(means, vars_, weights)
    assert plain.epistemic_var is None and plain.aleatoric_var is None
    assert_allclose(plain.between_var, between, rtol=1e-12)
    assert plain[1:3].epistemic_var is None
    assert_allclose(plain[1:3].between_var, between[1:3], rtol=1e-12)


def test_mixture_weights_and_shapes(rng):
    means = rng.normal(size=(3, 2, 4))  # (n, n_outputs, K): component axis last
    d = GaussianMixturePredictive(means, 1.0)
    assert d.shape == (3, 2) and d.n_components == 4 and len(d) == 3
    assert_allclose(d.components.weights, 0.25, rtol=0)
    assert_allclose(d.mean(), means.mean(axis=-1), rtol=RTOL)
    assert d.components.means.shape == d.components.vars.shape == (3, 2, 4)
    # weights within 1e-8 of summing to 1 are renormalised exactly
    w = np.array([0.5, 0.5 + 5e-9])
    d2 = GaussianMixturePredictive([[0.0, 1.0]], 1.0, w)
    assert_allclose(d2.components.weights.sum(-1), 1.0, rtol=0, atol=1e-15)
    # per-point weights
    pw = rng.dirichlet(np.ones(4), size=(3, 2))
    assert_allclose(GaussianMixturePredictive(means, 1.0, pw).mean(),
                    np.sum(pw * means, axis=-1), rtol=RTOL)


def test_mixture_slicing_keeps_components_and_parts_consistent(rng):
    means, vars_, weights = _mixture(rng, n=6)
    al = 0.5 * vars_
    d = GaussianMixturePredictive(means, vars_, weights, aleatoric_vars=al)
    for key in [slice(2, 5), [4, 0], np.arange(6) % 2 == 0, 1]:
        sub = d[key]
        assert isinstance(sub, GaussianMixturePredictive)
        assert_array_equal(sub.components.means, means[key])
        assert_array_equal(sub.components.weights, d.components.weights[key])
        assert_array_equal(sub.components.aleatoric_vars, al[key])
        assert_allclose(sub.mean(), d.mean()[key], rtol=RTOL)
        assert_allclose(sub.epistemic_var, d.epistemic_var[key], rtol=RTOL)
        assert_allclose(sub.aleatoric_var, d.aleatoric_var[key], rtol=RTOL)
        assert_allclose(sub.between_var, d.between_var[key], rtol=RTOL)
    assert "GaussianMixturePredictive" in repr(d) and "n_components=3" in repr(d)


@pytest.mark.parametrize(
    "args, kwargs, match",
    [
        (([[0.0, 1.0]], [[1.0, -1.0]]), {}, "vars must be >= 0"),
        (([[0.0, np.nan]], [[1.0, 1.0]]), {}, "means contains NaN"),
        (([[0.0, 1.0]], [[1.0, 1.0]], [0.5, 0.6]), {}, "weights must sum to 1"),
        (([[0.0, 1.0]], [[1.0, 1.0]], [0.5, 0.5 + 1e-6]), {}, "weights must sum to 1"),
        (([[0.0, 1.0]], [[1.0, 1.0]], [1.5, -0.5]), {}, "weights must be >= 0"),
        (([[0.0, 1.0]], [[1.0, 1.0, 1.0]]), {}, "shape mismatch"),
        (([[0.0, 1.0]], [[1.0, 1.0]], [0.2, 0.3, 0.5]), {}, "shape mismatch"),
        (([[0.0, 1.0]], [[1.0, 1.0]]), {"aleatoric_vars": 2.0}, "must not exceed vars"),
        ((0.0, 1.0), {}, "component axis"),
    ],
)
def test_mixture_invalid_input(args, kwargs, match):
    with pytest.raises(ValueError, match=match):
        GaussianMixturePredictive(*args, **kwargs)


# --------------------------------------------------------------------------- categorical


def test_categorical_entropy_hand_computed():
    p = np.array([[0.5, 0.5, 0.0], [1.0, 0.0, 0.0], [0.2, 0.3, 0.5]])
    d = CategoricalPredictive(p)
    expected = [np.log(2), 0.0, -(0.2 * np.log(0.2) + 0.3 * np.log(0.3) + 0.5 * np.log(0.5))]
    assert_allclose(d.entropy(), expected, rtol=1e-14, atol=0)
    assert_array_equal(d.mean(), p)
    assert_array_equal(d.mode(), [0, 0, 2])


def test_categorical_mutual_information():
    agree = np.array([[[0.2, 0.8]], [[0.2, 0.8]], [[0.2, 0.8]]])
    d = CategoricalPredictive([[0.2, 0.8]], member_proba=agree)
    h = -(0.2 * np.log(0.2) + 0.8 * np.log(0.8))
    assert_allclose(d.expected_entropy(), [h], rtol=1e-14)
    assert np.all(d.mutual_information() == 0.0)  # rounding clipped, never negative

    confident = np.array([[[1.0, 0.0]], [[0.0, 1.0]]])  # two members, equal weight, disagree
    d = CategoricalPredictive([[0.5, 0.5]], member_proba=confident)
    assert_array_equal(d.expected_entropy(), [0.0])
    assert_allclose(d.mutual_information(), [np.log(2)], rtol=1e-15)

    members = np.array([[[0.9, 0.1]], [[0.3, 0.7]]])
    d = CategoricalPredictive(members.mean(0), member_proba=members)
    ent = lambda p: -np.sum(p * np.log(p), axis=-1)  # noqa: E731
    expected = ent(np.array([0.6, 0.4])) - 0.5 * (ent(members[0, 0]) + ent(members[1, 0]))
    assert_allclose(d.mutual_information(), [expected], rtol=1e-13)


def test_categorical_needs_members_for_mi():
    d = CategoricalPredictive([[0.5, 0.5]])
    with pytest.raises(ValueError, match="member probabilities"):
        d.expected_entropy()
    with pytest.raises(ValueError, match="member probabilities"):
        d.mutual_information()


def test_categorical_string_labels():
    p = np.array([[0.1, 0.6, 0.3], [0.7, 0.2, 0.1]])
    d = CategoricalPredictive(p, classes=["cat", "dog", "eel"])
    assert_allclose(d.logpmf(["dog", "cat"]), np.log([0.6, 0.7]), rtol=1e-15)
    assert_allclose(d.pmf(["eel", "eel"]), [0.3, 0.1], rtol=1e-15)
    assert_allclose(d.logpmf([["eel", "dog"], ["cat", "cat"]]), np.log([[0.3, 0.2], [0.1, 0.7]]),
                    rtol=1e-15)
    assert_array_equal(d.mode(), ["dog", "cat"])
    with pytest.raises(ValueError, match="not in classes.*fox"):
        d.logpmf(["dog", "fox"])
    with pytest.raises(ValueError, match="not in classes"):
        d.logpmf([1, 0])
    # zero-probability class: -inf, no warning
    d0 = CategoricalPredictive([[1.0, 0.0]], classes=[3, 7])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert d0.logpmf([7])[0] == -np.inf


def test_categorical_rvs_frequencies(rng):
    p = np.array([[0.1, 0.6, 0.3], [0.0, 0.5, 0.5]])
    d = CategoricalPredictive(p, classes=["a", "b", "c"])
    draws = d.rvs(N_MC, random_state=2)
    assert draws.shape == (N_MC, 2)
    for j, label in enumerate(["a", "b", "c"]):
        freq = (draws == label).mean(axis=0)
        se = np.sqrt(p[:, j] * (1 - p[:, j]) / N_MC)
        assert_mc_close(p[:, j], freq, se, what=f"frequency of {label}")
    assert not np.any(draws[:, 1] == "a")  # probability 0 never drawn
    assert_array_equal(d.rvs(9, random_state=4), d.rvs(9, random_state=4))


def test_categorical_to_scipy_and_slicing(rng):
    members = rng.dirichlet(np.ones(3), size=(4, 5))  # (S, n, C)
    d = CategoricalPredictive(members.mean(0), ["x", "y", "z"], member_proba=members)
    objs = d.to_scipy()
    assert len(objs) == 5
    for i, obj in enumerate(objs):
        assert_allclose(obj.pmf(np.eye(3)), d.proba[i], rtol=1e-14)
    for key in [slice(1, 4), [4, 0], np.array([True, False, True, False, True])]:
        sub = d[key]
        assert_array_equal(sub.proba, d.proba[key])
        assert_array_equal(sub.member_proba, d.member_proba[:, key])
        assert_allclose(sub.mutual_information(), d.mutual_information()[key], rtol=1e-14)
        assert_array_equal(sub.classes, d.classes)
    assert len(d) == 5 and "CategoricalPredictive" in repr(d)
    assert [row.proba.tolist() for row in d] == d.proba.tolist()


def test_categorical_renormalises_within_tolerance():
    d = CategoricalPredictive([[0.5, 0.5 + 5e-7]])
    assert_allclose(d.proba.sum(-1), 1.0, rtol=0, atol=1e-15)


@pytest.mark.parametrize(
    "args, kwargs, match",
    [
        (([[0.5, 0.6]],), {}, "proba must sum to 1"),
        (([[1.2, -0.2]],), {}, "proba must be >= 0"),
        (([[np.nan, 1.0]],), {}, "proba contains NaN"),
        (([[0.5, 0.5]], ["a"]), {}, "classes must be a 1-d array of length 2"),
        (([[0.5, 0.5]], ["a", "a"]), {}, "classes must be distinct"),
        (([[0.5, 0.5]],), {"member_proba": [[0.5, 0.5]]}, "shape mismatch"),
        (([[0.5, 0.5]],), {"member_proba": [[[0.9, 0.1]], [[0.9, 0.1]]]},
         "mean of member_proba"),
        (([[0.5, 0.5]],), {"member_proba": [[[0.9, 0.2]], [[0.1, 0.8]]]},
         "member_proba must sum to 1"),
    ],
)
def test_categorical_invalid_input(args, kwargs, match):
    with pytest.raises(ValueError, match=match):
        CategoricalPredictive(*args, **kwargs)


@pytest.mark.parametrize(
    "dist",
    [NormalPredictive(np.zeros(2), np.ones(2)),
     GaussianMixturePredictive(np.zeros((2, 2)), np.ones((2, 2)))],
)
@pytest.mark.parametrize("method", ["logpdf", "pdf", "cdf", "sf", "logcdf"])
def test_nan_y_raises(dist, method):
    if not hasattr(dist, method):
        pytest.skip(f"no {method}")
    with pytest.raises(ValueError, match="NaN"):
        getattr(dist, method)(np.array([0.0, np.nan]))


def test_mixture_entropy_is_shift_invariant_and_ignores_zero_weights():
    # Entropy does not change with a shift: a component at 1e16 with sd 1 has
    # N(0, 1)'s (absolute cut points collapsed there: 1.47, 11.7 at 1e17);
    # components 1e100 apart with sd 1 add log 2 (it gave 0); a zero-weight
    # component 1e160 away counts for nothing (it gave NaN).
    h = NormalPredictive(0.0, 1.0).entropy()
    for c in (1e13, 1e16, 1e17, -3e300):
        np.testing.assert_allclose(GaussianMixturePredictive([[c]], [[1.0]]).entropy(), h,
                                   rtol=1e-12)
    np.testing.assert_allclose(GaussianMixturePredictive([[-1e100, 1e100]], 1.0).entropy(),
                               h + np.log(2), rtol=1e-12)
    with np.errstate(all="raise"):
        got = GaussianMixturePredictive([[0.0, 1e160]], [[1.0, 1.0]], [1.0, 0.0]).entropy()
    np.testing.assert_allclose(got, h, rtol=1e-12)
    for shift in (5e15, 1e12):
        a = GaussianMixturePredictive([[shift, shift + 10.0]], [[1.0, 4.0]], [0.3, 0.7])
        b = GaussianMixturePredictive([[0.0, 10.0]], [[1.0, 4.0]], [0.3, 0.7])
        np.testing.assert_allclose(a.entropy(), b.entropy(), rtol=1e-10)


def test_mixture_entropy_two_quadratures_agree():
    # The cuts on one axis (most rows) and the per-component frames (rows with
    # components far apart relative to their widths) are two routes to the
    # same integral: on ordinary mixtures, with and without zero weights,
    # they agree to 1e-13.
    from skbayesnn import distributions

    rng = np.random.default_rng(0)
    m = 3 * rng.normal(size=(40, 4))
    s = np.sqrt(rng.uniform(0.01, 4.0, size=(40, 4)))
    w = rng.dirichlet(np.ones(4), size=40)
    w[::2, 0] = 0.0
    w /= w.sum(axis=1, keepdims=True)
    with np.errstate(divide="ignore"):
        log_coef = np.log(w) - np.log(s)
    ref = np.argmax(w, axis=1)
    rel = m - m[np.arange(40), ref][:, None]
    on_cuts = distributions._entropy_on_cuts(rel, s, log_coef, w > 0, ref)
    by_component = distributions._entropy_by_component(m, s, log_coef, w)
    np.testing.assert_allclose(on_cuts, by_component, rtol=1e-13)


def test_entropy_of_many_components_in_piece_chunks(rng):
    # With K >= ~124 components one row's pieces are split into chunks (a row
    # alone took O(K^2) memory: 2.8 GB at K = 600); the chunks must add up.
    k = 150
    same = GaussianMixturePredictive(np.full((1, k), 2.0), np.full((1, k), 3.0),
                                     rng.dirichlet(np.ones(k)))
    assert_allclose(same.entropy(), 0.5 * np.log(2 * np.pi * np.e * 3.0), rtol=1e-10)
    d = GaussianMixturePredictive(rng.normal(size=(1, k)) * 5, rng.uniform(0.01, 2.0, (1, k)))
    draws = d.rvs(N_MC, random_state=0)[:, 0]
    neg_logp = -d.logpdf(draws[:, None])[:, 0]
    mean, _, se, _ = mc_moments(neg_logp)
    assert_mc_close(d.entropy()[0], mean, se, what="entropy")


def test_y_with_one_value_per_point_in_another_layout_is_refused():
    # (n, 1) against a batch (n,) broadcast to (n, n): every y paired with
    # every point, a silent wrong logpdf / cdf / coverage.
    d = NormalPredictive([0.0, 1.0, 2.0], 1.0)
    column = np.array([[0.0], [1.0], [2.0]])
    for method in (d.logpdf, d.cdf, d.pdf, d.sf):
        with pytest.raises(ValueError, match=r"Reshape y to \(3,\)"):
            method(column)
    assert d.logpdf(column.ravel()).shape == (3,)
    assert d.logpdf(np.zeros((4, 1))).shape == (4, 3)  # a grid of other size still broadcasts
    d2 = NormalPredictive(column, 1.0)
    with pytest.raises(ValueError, match=r"Reshape y to \(3, 1\)"):
        d2.cdf(column.ravel())
    mix = GaussianMixturePredictive([[0.0, 1.0], [2.0, 3.0]], 1.0)
    with pytest.raises(ValueError, match="Reshape y"):
        mix.logpdf([[0.0], [1.0]])
    cat = CategoricalPredictive([[0.5, 0.5], [0.2, 0.8]], ["a", "b"])
    with pytest.raises(ValueError, match="Reshape y"):
        cat.logpmf([["a"], ["b"]])
    assert NormalPredictive([0.0], 1.0).logpdf([[0.0]]).shape == (1, 1)  # one point: no pairing
    with pytest.raises(ValueError, match=r"Reshape q to \(3,\)"):
        d.ppf(np.full((3, 1), 0.5))
    with pytest.raises(ValueError, match="Reshape confidence"):
        d.interval(np.full((3, 1), 0.5))
    with pytest.raises(ValueError, match="Reshape q"):
        mix.ppf([[0.5], [0.5]])
    # a grid of exactly n values at every point: passed already broadcast
    grid = np.broadcast_to(column, (3, 3))
    np.testing.assert_allclose(d.logpdf(grid), stats.norm.logpdf(grid, [0.0, 1.0, 2.0], 1.0),
                               rtol=1e-14)


def test_overflowing_variance_parts_are_refused():
    with pytest.raises(ValueError, match="epistemic_var \\+ aleatoric_var contains"):
        NormalPredictive([0.0], epistemic_var=1e308, aleatoric_var=1e308)


def test_mixture_ppf_far_in_the_lower_tail():
    # find_root's default fatol (2.2e-308) stopped at once below q ~ 1e-292:
    # cdf(ppf(1e-307)) was 9% off and ppf(1e-310) the bracket end (70% off).
    d = GaussianMixturePredictive([[0.0, 3.0]], [[1.0, 0.25]], [0.3, 0.7])
    for q in (1e-280, 1e-300, 1e-305, 1e-307):
        x = d.ppf(q)[0]
        # the lower tail is the first component's: 0.3 Phi(x) = q
        assert_allclose(0.3 * stats.norm.cdf(x), q, rtol=1e-9, atol=0)


@pytest.mark.parametrize("copy", ["pickle", "deepcopy"])
def test_arrays_stay_read_only_after_copies(copy):
    import copy as copy_module
    import pickle

    def dup(obj):
        return pickle.loads(pickle.dumps(obj)) if copy == "pickle" else copy_module.deepcopy(obj)

    objects = [
        NormalPredictive([0.0, 1.0], epistemic_var=[0.5, 1.0], aleatoric_var=0.5),
        GaussianMixturePredictive([[0.0, 1.0]], [[1.0, 2.0]]),
        CategoricalPredictive([[0.5, 0.5]], member_proba=[[[0.4, 0.6]], [[0.6, 0.4]]]),
    ]
    for obj in objects:
        twin = dup(obj)
        arrays = [v for v in vars(twin).values() if isinstance(v, np.ndarray)]
        assert arrays
        for arr in arrays:
            with pytest.raises(ValueError, match="read-only"):
                arr.flat[0] = 100.0
    twin = dup(objects[0])
    assert_allclose(twin.var(), [1.0, 1.5], rtol=0)


def test_mutual_information_is_zero_when_members_agree():
    # proba may differ from the members' mean by up to 1e-6 (renormalised);
    # the entropy's slope near 0 made that a spurious 1.3e-5 nats.
    members = [[[0.0, 1.0]]] * 3
    d = CategoricalPredictive([[9e-7, 1 - 9e-7]], member_proba=members)
    assert d.mutual_information()[0] == 0.0
