"""Tests of skbayesnn.metrics: closed forms against quadrature and Monte Carlo,
statistical checks on synthetic calibrated data with stated tolerances, hand
computations, scikit-learn agreement, scorers in model selection, bad input."""

import math
import pickle

import numpy as np
import pytest
from scipy import integrate, special, stats
from sklearn import config_context
from sklearn.base import BaseEstimator, RegressorMixin
from sklearn.compose import TransformedTargetRegressor
from sklearn.linear_model import LinearRegression, LogisticRegression
from sklearn.metrics import brier_score_loss, log_loss, r2_score
from sklearn.metrics import get_scorer as sk_get_scorer
from sklearn.model_selection import GridSearchCV, KFold, cross_val_score, cross_validate
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler

from skbayesnn import metrics as M
from skbayesnn._testing import assert_mc_close
from skbayesnn.distributions import (
    CategoricalPredictive,
    GaussianMixturePredictive,
    NormalPredictive,
)

# The closed forms agree with adaptive quadrature run at epsrel=1e-10 to ~1e-14
# (largest measured relative difference 7e-15); 1e-9 leaves a factor 10 over the
# quadrature's own requested accuracy and still catches any error in a formula.
CRPS_QUAD_RTOL = 1e-9


# --------------------------------------------------------------------------- helpers
def crps_by_quadrature(cdf, sf, y, lo, hi, points=()):
    """int (F(x) - 1[x >= y])^2 dx = int_lo^y F^2 + int_y^hi (1 - F)^2, by adaptive
    quadrature (relative tolerance 1e-10); [lo, hi] = centres -+ 40 sd leaves out
    tails contributing < 1e-300."""
    pts_left = [p for p in points if lo < p < y]
    pts_right = [p for p in points if y < p < hi]
    kw = dict(epsabs=0.0, epsrel=1e-10, limit=500)
    left, _ = integrate.quad(lambda x: cdf(x) ** 2, lo, y, points=pts_left or None, **kw)
    right, _ = integrate.quad(lambda x: sf(x) ** 2, y, hi, points=pts_right or None, **kw)
    return left + right


def mixture_cdf(x, means, stds, weights):
    return float(np.sum(weights * stats.norm.cdf(x, means, stds)))


def mixture_sf(x, means, stds, weights):
    return float(np.sum(weights * stats.norm.sf(x, means, stds)))


# ------------------------------------------------------------------------------ NLPD
def test_gaussian_nlpd_equals_scipy_logpdf(rng):
    y = rng.normal(size=50)
    mu = rng.normal(size=50)
    sd = rng.uniform(0.1, 3.0, size=50)
    expected = -np.mean(stats.norm.logpdf(y, mu, sd))
    assert M.gaussian_nlpd(y, mu, sd) == pytest.approx(expected, rel=1e-12)
    w = rng.uniform(0.0, 2.0, size=50)
    expected_w = -np.average(stats.norm.logpdf(y, mu, sd), weights=w)
    assert M.gaussian_nlpd(y, mu, sd, sample_weight=w) == pytest.approx(expected_w, rel=1e-12)
    # the constant 0.5 log(2 pi) is included (natural log)
    assert M.gaussian_nlpd([0.0], [0.0], [1.0]) == pytest.approx(0.5 * math.log(2 * math.pi))


def test_nlpd_of_distribution_objects(rng):
    y = rng.normal(size=40)
    mu = rng.normal(size=40)
    var = rng.uniform(0.2, 2.0, size=40)
    assert M.nlpd(y, NormalPredictive(mu, var)) == pytest.approx(
        M.gaussian_nlpd(y, mu, np.sqrt(var)), rel=1e-12
    )
    # any object with logpdf, e.g. a frozen scipy distribution (Student t)
    t = stats.t(df=3.0, loc=mu, scale=np.sqrt(var))
    assert M.nlpd(y, t) == pytest.approx(-np.mean(t.logpdf(y)), rel=1e-12)


def test_nlpd_of_mixture_matches_logsumexp(rng):
    n, k = 30, 4
    y = rng.normal(size=n)
    means = rng.normal(size=(n, k))
    vars_ = rng.uniform(0.1, 1.5, size=(n, k))
    w = rng.dirichlet(np.ones(k))
    dist = GaussianMixturePredictive(means, vars_, w)
    logp = special.logsumexp(
        stats.norm.logpdf(y[:, None], means, np.sqrt(vars_)) + np.log(w), axis=1
    )
    assert M.nlpd(y, dist) == pytest.approx(-np.mean(logp), rel=1e-10)


# ------------------------------------------------------------------------------ CRPS
CRPS_CASES = [  # (y, mu, sd): z from -6 to 6, scales from 1e-3 to 50
    (0.0, 0.0, 1.0),
    (1.3, 0.2, 0.7),
    (-4.0, 1.0, 2.0),
    (10.0, -2.0, 50.0),
    (0.5, 0.499, 1e-3),
    (3.0, 0.0, 0.5),
    (-0.3, 0.4, 0.05),
]


@pytest.mark.parametrize("y, mu, sd", CRPS_CASES)
def test_crps_gaussian_matches_quadrature(y, mu, sd):
    expected = crps_by_quadrature(
        lambda x: stats.norm.cdf(x, mu, sd),
        lambda x: stats.norm.sf(x, mu, sd),
        y,
        mu - 40 * sd,
        mu + 40 * sd,
        points=(mu,),
    )
    assert M.crps_gaussian([y], [mu], [sd]) == pytest.approx(expected, rel=CRPS_QUAD_RTOL)


def test_crps_gaussian_zero_std_is_absolute_error(rng):
    y = rng.normal(size=20)
    mu = rng.normal(size=20)
    assert M.crps_gaussian(y, mu, np.zeros(20)) == pytest.approx(np.mean(np.abs(y - mu)), 1e-14)
    # continuity as std -> 0: CRPS - |y - mu| = O(sd) (it is <= sd / sqrt(pi) in absolute value)
    for sd in (1e-2, 1e-5, 1e-9):
        val = M.crps_gaussian(y, mu, np.full(20, sd))
        assert abs(val - np.mean(np.abs(y - mu))) <= sd
    # a zero std inside a batch of positive ones only affects its own sample
    sd = rng.uniform(0.5, 1.0, size=20)
    sd[3] = 0.0
    w = np.zeros(20)
    w[3] = 1.0
    assert M.crps_gaussian(y, mu, sd, sample_weight=w) == pytest.approx(abs(y[3] - mu[3]))


def test_crps_gaussian_weighted_and_scalars(rng):
    y = rng.normal(size=30)
    mu = rng.normal(size=30)
    sd = rng.uniform(0.2, 2.0, size=30)
    per = np.array([M.crps_gaussian([a], [b], [c]) for a, b, c in zip(y, mu, sd)])
    w = rng.uniform(0.0, 3.0, size=30)
    assert M.crps_gaussian(y, mu, sd, sample_weight=w) == pytest.approx(
        np.average(per, weights=w), rel=1e-12
    )
    # scalar mean/std broadcast over the samples
    assert M.crps_gaussian(y, 0.0, 1.0) == pytest.approx(
        M.crps_gaussian(y, np.zeros(30), np.ones(30)), rel=1e-14
    )


MIXTURE_CASES = [
    # (y, means, stds, weights)
    (0.3, [-1.0, 0.5, 2.0], [0.5, 1.0, 0.3], [0.2, 0.5, 0.3]),
    (5.0, [-1.0, 0.5, 2.0], [0.5, 1.0, 0.3], [0.2, 0.5, 0.3]),
    (-2.0, [0.0, 0.1], [2.0, 0.01], [0.9, 0.1]),
    (1.0, [0.0, 3.0, -3.0, 1.1], [1.0, 1.0, 1.0, 0.2], [0.25, 0.25, 0.25, 0.25]),
]


@pytest.mark.parametrize("y, means, stds, weights", MIXTURE_CASES)
def test_crps_mixture_matches_quadrature(y, means, stds, weights):
    means, stds, weights = map(np.asarray, (means, stds, weights))
    lo = min(means - 40 * stds)
    hi = max(means + 40 * stds)
    expected = crps_by_quadrature(
        lambda x: mixture_cdf(x, means, stds, weights),
        lambda x: mixture_sf(x, means, stds, weights),
        y,
        lo,
        hi,
        points=tuple(means),
    )
    got = M.crps_gaussian_mixture([y], means[None], stds[None], weights)
    assert got == pytest.approx(expected, rel=CRPS_QUAD_RTOL)


def test_crps_mixture_with_one_component_equals_normal(rng):
    y = rng.normal(size=25)
    mu = rng.normal(size=25)
    sd = rng.uniform(0.0, 2.0, size=25)
    ref = M.crps_gaussian(y, mu, sd)
    assert M.crps_gaussian_mixture(y, mu[:, None], sd[:, None], [1.0]) == pytest.approx(
        ref, rel=1e-12
    )
    # two identical components are the same distribution
    two = M.crps_gaussian_mixture(
        y, np.column_stack([mu, mu]), np.column_stack([sd, sd]), [0.3, 0.7]
    )
    assert two == pytest.approx(ref, rel=1e-12)
    # unnormalised weights are normalised
    assert M.crps_gaussian_mixture(
        y, np.column_stack([mu, mu]), np.column_stack([sd, sd]), [3.0, 7.0]
    ) == pytest.approx(ref, rel=1e-12)


def test_crps_mixture_of_point_masses_is_ensemble_crps(rng):
    # stds = 0: the empirical-ensemble CRPS mean|x_k - y| - 0.5 mean|x_k - x_l|, exact
    y = rng.normal(size=10)
    members = rng.normal(size=(10, 7))
    expected = np.mean(
        np.abs(members - y[:, None]).mean(1)
        - 0.5 * np.abs(members[:, :, None] - members[:, None, :]).mean((1, 2))
    )
    got = M.crps_gaussian_mixture(y, members, np.zeros((10, 7)), np.full(7, 1 / 7))
    assert got == pytest.approx(expected, rel=1e-12)


def test_crps_mixture_energy_form_monte_carlo(rng):
    # CRPS = E|X - y| - 0.5 E|X - X'| with X, X' iid from the mixture; estimated from
    # N = 400000 independent pairs, compared within 5 standard errors of the mean of
    # h = |X - y| - 0.5 |X - X'| (false-alarm probability ~6e-7).
    means = np.array([-1.0, 0.5, 2.5])
    stds = np.array([0.4, 1.2, 0.3])
    w = np.array([0.3, 0.5, 0.2])
    y = 0.8
    n = 400_000

    def draw():
        comp = rng.choice(3, size=n, p=w)
        return rng.normal(means[comp], stds[comp])

    x, x2 = draw(), draw()
    h = np.abs(x - y) - 0.5 * np.abs(x - x2)
    got = M.crps_gaussian_mixture([y], means[None], stds[None], w)
    assert_mc_close(got, h.mean(), h.std() / np.sqrt(n), n_sigma=5, what="mixture CRPS")


def test_crps_mixture_vectorised_and_chunked(rng):
    # n * K^2 large enough to be processed in 3 chunks (of 2**21 // K**2 = 1310 samples);
    # the mean over all samples equals the size-weighted mean over blocks that each
    # fit in one chunk, and single samples at the chunk boundaries equal their own call
    n, k = 3000, 40
    y = rng.normal(size=n)
    means = rng.normal(size=(n, k))
    stds = rng.uniform(0.1, 1.0, size=(n, k))
    weights = rng.dirichlet(np.ones(k), size=n)
    total = M.crps_gaussian_mixture(y, means, stds, weights)
    edges = [0, 1000, 1309, 1311, 2000, 2620, 2621, 3000]
    blocks = [
        (b - a) * M.crps_gaussian_mixture(y[a:b], means[a:b], stds[a:b], weights[a:b])
        for a, b in zip(edges[:-1], edges[1:])
    ]
    assert total == pytest.approx(sum(blocks) / n, rel=1e-12)
    i = 1309
    sw = np.zeros(n)
    sw[i] = 1.0
    single = M.crps_gaussian_mixture(y[[i]], means[[i]], stds[[i]], weights[[i]])
    assert M.crps_gaussian_mixture(y, means, stds, weights, sample_weight=sw) == (
        pytest.approx(single, rel=1e-12)
    )
    # shared (K,) weights broadcast like (n, K)
    shared = M.crps_gaussian_mixture(y[:50], means[:50], stds[:50], weights[0])
    tiled = M.crps_gaussian_mixture(y[:50], means[:50], stds[:50], np.tile(weights[0], (50, 1)))
    assert shared == pytest.approx(tiled, rel=1e-14)


def test_crps_dispatch(rng):
    y = rng.normal(size=15)
    mu = rng.normal(size=15)
    var = rng.uniform(0.1, 2.0, size=15)
    assert M.crps(y, NormalPredictive(mu, var)) == pytest.approx(
        M.crps_gaussian(y, mu, np.sqrt(var)), rel=1e-12
    )
    with pytest.raises(TypeError, match="closed forms"):
        M.crps(y, stats.t(df=3.0, loc=mu))


def test_crps_dispatch_mixture(rng):
    n, k = 15, 3
    y = rng.normal(size=n)
    means = rng.normal(size=(n, k))
    vars_ = rng.uniform(0.1, 2.0, size=(n, k))
    w = np.array([0.2, 0.3, 0.5])
    dist = GaussianMixturePredictive(means, vars_, w)
    assert M.crps(y, dist) == pytest.approx(
        M.crps_gaussian_mixture(y, means, np.sqrt(vars_), w), rel=1e-12
    )


def test_crps_of_frozen_scipy_norm(rng):
    # every frozen scipy distribution holds its own norm_gen instance, so the
    # dispatch must recognise it by name (an identity check never matched)
    y = rng.normal(size=12)
    mu = rng.normal(size=12)
    sd = rng.uniform(0.1, 2.0, size=12)
    assert M.crps(y, stats.norm(mu, sd)) == pytest.approx(
        M.crps_gaussian(y, mu, sd), rel=1e-14
    )
    # one standard normal for every sample (0-d), as in the documentation
    assert M.crps(y, stats.norm(0, 1)) == pytest.approx(M.crps_gaussian(y, 0.0, 1.0), rel=1e-14)
    with pytest.raises(TypeError, match="closed forms"):
        M.crps(y, stats.laplace(mu, sd))


def test_metrics_of_column_shaped_distributions(rng):
    # a (n, 1) predictive with 1-D y: y is reshaped to (n, 1) instead of broadcasting
    # to (n, n); every metric that takes y_dist equals its value for the (n,) predictive
    n = 25
    y = rng.normal(size=n)
    mu = rng.normal(size=n)
    var = rng.uniform(0.2, 2.0, size=n)
    flat, col = NormalPredictive(mu, var), NormalPredictive(mu[:, None], var[:, None])
    means = rng.normal(size=(n, 3))
    vars_ = rng.uniform(0.1, 1.0, size=(n, 3))
    mix_flat = GaussianMixturePredictive(means, vars_)
    mix_col = GaussianMixturePredictive(means[:, None, :], vars_[:, None, :])
    sd = np.sqrt(var)
    scipy_flat, scipy_col = stats.norm(mu, sd), stats.norm(mu[:, None], sd[:, None])
    for a, b in ((flat, col), (mix_flat, mix_col), (scipy_flat, scipy_col)):
        assert M.nlpd(y, b) == pytest.approx(M.nlpd(y, a), rel=1e-14)
        assert M.crps(y, b) == pytest.approx(M.crps(y, a), rel=1e-14)
        assert M.coverage(y, b, 0.8) == M.coverage(y, a, 0.8)
        np.testing.assert_array_equal(M.pit_values(y, b), M.pit_values(y, a))
        assert M.regression_calibration_error(y, b) == M.regression_calibration_error(y, a)
    assert M.nlpd(y, col) == pytest.approx(M.gaussian_nlpd(y, mu, np.sqrt(var)), rel=1e-12)
    np.testing.assert_allclose(M.pit_values(y, col), stats.norm.cdf(y, mu, np.sqrt(var)),
                               rtol=1e-12)
    # y given as a column works too
    assert M.nlpd(y[:, None], col) == pytest.approx(M.nlpd(y, flat), rel=1e-14)


def test_metrics_refuse_a_batch_of_another_size(rng):
    y = rng.normal(size=6)
    metrics = (M.nlpd, M.crps, M.coverage, M.pit_values, M.regression_calibration_error)
    for metric in metrics:
        with pytest.raises(ValueError, match="inconsistent lengths"):
            metric(y, NormalPredictive(np.zeros((3, 1)), 1.0))
    # A 1-D y_true against several outputs, whatever its length: a flattened
    # (n, k) one had been reshaped in C order, pairing an F-order flattening
    # with the wrong predictions (and nlpd averaged over entries, not outputs).
    Y = rng.normal(size=(6, 2))
    for dist in (NormalPredictive(np.zeros((6, 2)), 1.0),
                 GaussianMixturePredictive(np.zeros((6, 2, 3)), 1.0)):
        for metric in metrics:
            for flat in (y, Y.ravel(), Y.ravel(order="F")):
                with pytest.raises(ValueError, match=r"y_true is 1-D .* several values per "
                                   r"sample: for several outputs pass y_true of shape"):
                    metric(flat, dist)


# ------------------------------------------------------------------ intervals & coverage
def test_interval_coverage_and_width_by_hand():
    y = np.array([0.0, 1.0, 2.0, 3.0])
    lo = np.array([-1.0, 1.0, 2.5, -np.inf])
    hi = np.array([1.0, 2.0, 3.0, 2.0])
    # inside: yes (interior), yes (on the bound), no, no
    assert M.interval_coverage(y, lo, hi) == 0.5
    assert M.interval_coverage(y, lo, hi, sample_weight=[1, 0, 3, 0]) == 0.25
    assert M.interval_width(lo[:3], hi[:3]) == pytest.approx((2.0 + 1.0 + 0.5) / 3)
    assert M.interval_width(lo[:3], hi[:3], sample_weight=[0, 1, 1]) == pytest.approx(0.75)


def test_coverage_of_one_distribution_shared_by_all_samples():
    # A 0-d predictive applies to every sample, as in nlpd and crps.
    from skbayesnn.distributions import GaussianMixturePredictive, NormalPredictive

    y = np.array([0.1, 3.0, -0.5, 1.7])
    z = stats.norm.ppf(0.95)
    assert M.coverage(y, NormalPredictive(0.0, 1.0), 0.9) == np.mean(np.abs(y) <= z)
    mix = GaussianMixturePredictive([0.0, 0.0], [1.0, 1.0], [0.5, 0.5])
    assert M.coverage(y, mix, 0.9) == np.mean(np.abs(y) <= z)


N_COV = 20_000


@pytest.fixture
def calibrated_normal_data(rng):
    mu = rng.normal(size=N_COV)
    sd = rng.uniform(0.2, 3.0, size=N_COV)
    y = rng.normal(mu, sd)
    return y, mu, sd


@pytest.mark.parametrize("confidence", [0.5, 0.9, 0.95])
def test_coverage_of_calibrated_and_overconfident_predictives(calibrated_normal_data, confidence):
    y, mu, sd = calibrated_normal_data
    se = math.sqrt(confidence * (1 - confidence) / N_COV)  # binomial standard error
    cov = M.coverage(y, NormalPredictive(mu, sd**2), confidence)
    assert abs(cov - confidence) <= 4 * se
    # std halved: the interval mu +- z sd/2 holds y with probability 2 Phi(z/2) - 1
    z = stats.norm.ppf(0.5 + confidence / 2)
    expected_low = 2 * stats.norm.cdf(z / 2) - 1
    cov_low = M.coverage(y, NormalPredictive(mu, (sd / 2) ** 2), confidence)
    se_low = math.sqrt(expected_low * (1 - expected_low) / N_COV)
    assert abs(cov_low - expected_low) <= 4 * se_low
    assert cov_low < confidence - 0.1
    # the same through explicit bounds
    lo, hi = stats.norm.interval(confidence, mu, sd)
    assert M.interval_coverage(y, lo, hi) == pytest.approx(cov, abs=1e-12)


def test_mean_interval_width_gaussian(rng):
    mu = rng.normal(size=100)
    sd = rng.uniform(0.1, 2.0, size=100)
    dist = NormalPredictive(mu, sd**2)
    for c in (0.5, 0.95):
        expected = 2 * stats.norm.ppf(0.5 + c / 2) * sd.mean()
        assert M.mean_interval_width(dist, c) == pytest.approx(expected, rel=1e-10)


def test_coverage_of_calibrated_mixture(rng):
    # y drawn from the mixture predictive itself: 90% coverage within 4 binomial SEs
    n, k = 20_000, 3
    means = rng.normal(size=(n, k)) * 2
    vars_ = rng.uniform(0.1, 1.0, size=(n, k))
    w = np.array([0.5, 0.3, 0.2])
    comp = rng.choice(k, size=n, p=w)
    y = rng.normal(means[np.arange(n), comp], np.sqrt(vars_[np.arange(n), comp]))
    dist = GaussianMixturePredictive(means, vars_, w)
    assert abs(M.coverage(y, dist, 0.9) - 0.9) <= 4 * math.sqrt(0.9 * 0.1 / n)
    # PIT values of a calibrated predictive are uniform: 19-level calibration error
    # within the DKW bound (see test_regression_calibration_error)
    assert M.regression_calibration_error(y, dist) <= math.sqrt(math.log(2 / 1e-6) / (2 * n))


# ------------------------------------------------------------------- regression calibration
def test_pit_values_are_the_cdf(rng):
    y, mu, sd = rng.normal(size=10), rng.normal(size=10), rng.uniform(0.5, 1.0, size=10)
    np.testing.assert_allclose(
        M.pit_values(y, NormalPredictive(mu, sd**2)), stats.norm.cdf(y, mu, sd), rtol=1e-12
    )


def test_regression_calibration_error_by_hand():
    # PIT values 0.1, 0.3, 0.6, 0.95 with 3 levels (0.25, 0.5, 0.75):
    # observed frequencies 1/4, 2/4, 3/4 -> error 0
    y = stats.norm.ppf([0.1, 0.3, 0.6, 0.95])
    dist = NormalPredictive(np.zeros(4), np.ones(4))
    assert M.regression_calibration_error(y, dist, n_levels=3) == pytest.approx(0.0, abs=1e-15)
    # weights [0, 0, 1, 1] -> frequencies 0, 0, 0.5 -> mean(|.25|, |.5|, |.25|) = 1/3
    assert M.regression_calibration_error(
        y, dist, n_levels=3, sample_weight=[0, 0, 1, 1]
    ) == pytest.approx(1 / 3)


def test_regression_calibration_error_calibrated_vs_dispersed(calibrated_normal_data):
    y, mu, sd = calibrated_normal_data
    n = N_COV
    # DKW: sup_p |F_n(p) - p| <= eps with probability >= 1 - alpha, eps =
    # sqrt(log(2/alpha) / (2n)); CE is a mean of |F_n(p_j) - p_j| so CE <= eps.
    # alpha = 1e-6 gives eps = 0.0190 at n = 20000.
    eps = math.sqrt(math.log(2 / 1e-6) / (2 * n))
    assert M.regression_calibration_error(y, NormalPredictive(mu, sd**2)) <= eps
    levels = np.arange(1, 20) / 20
    for k in (0.5, 2.0):  # predictive std k * sd: under- (k < 1) and over-dispersed
        # P(PIT <= p) = P(Z <= k Phi^-1(p)) = Phi(k Phi^-1(p)); the same DKW event gives
        # |CE - CE_expected| <= eps
        expected = np.mean(np.abs(stats.norm.cdf(k * stats.norm.ppf(levels)) - levels))
        got = M.regression_calibration_error(y, NormalPredictive(mu, (k * sd) ** 2))
        assert abs(got - expected) <= eps
        assert expected > 4 * eps


# ---------------------------------------------------------------------- classification
ECE_P = np.array(
    [
        [0.70, 0.20, 0.10],  # conf .70, predicts 0
        [0.10, 0.75, 0.15],  # conf .75, predicts 1
        [0.25, 0.30, 0.45],  # conf .45, predicts 2
        [0.90, 0.05, 0.05],  # conf .90, predicts 0
        [0.05, 0.05, 0.90],  # conf .90, predicts 2
    ]
)
ECE_Y = np.array([0, 2, 2, 0, 1])  # correct: 1, 0, 1, 1, 0


def test_ece_hand_computed():
    # 5 bins of width 0.2: (.6,.8]: {0,1} acc .5 conf .725; (.4,.6]: {2} acc 1 conf .45;
    # (.8,1]: {3,4} acc .5 conf .9 -> (2 * .225 + .55 + 2 * .4) / 5 = 0.36
    assert M.expected_calibration_error(ECE_Y, ECE_P, n_bins=5) == pytest.approx(0.36)
    # weight 2 on sample 2: (|1 - 1.45| + |2 - 0.9| + |1 - 1.8|) / 6
    assert M.expected_calibration_error(
        ECE_Y, ECE_P, n_bins=5, sample_weight=[1, 1, 2, 1, 1]
    ) == pytest.approx(2.35 / 6)
    # one bin: |accuracy - mean confidence| = |0.6 - 0.74|
    assert M.expected_calibration_error(ECE_Y, ECE_P, n_bins=1) == pytest.approx(0.14)
    # string labels through classes, and permuted columns with permuted classes
    names = np.array(["a", "b", "c"])
    ref = M.expected_calibration_error(names[ECE_Y], ECE_P, n_bins=5, classes=names)
    assert ref == pytest.approx(0.36)
    perm = [2, 0, 1]
    assert M.expected_calibration_error(
        names[ECE_Y], ECE_P[:, perm], n_bins=5, classes=names[perm]
    ) == pytest.approx(0.36)


def test_ece_binary_1d_hand_computed():
    p = np.array([0.93, 0.18, 0.65, 0.28])  # P(class 1); confidences .93 .82 .65 .72
    y = np.array([1, 0, 0, 1])  # correct, correct, wrong, wrong
    # 10 bins, one sample per bin: (.07 + .18 + .65 + .72) / 4
    assert M.expected_calibration_error(y, p, n_bins=10) == pytest.approx(1.62 / 4)
    assert M.expected_calibration_error(y, np.column_stack([1 - p, p]), n_bins=10) == (
        pytest.approx(1.62 / 4)
    )


def test_ece_calibrated_small_overconfident_large(rng):
    n, n_bins, alpha = 20_000, 15, 1e-6
    proba = rng.dirichlet(np.ones(3), size=n)
    y = (rng.random(n)[:, None] > np.cumsum(proba, axis=1)).sum(axis=1)  # y_i ~ proba_i
    # Given the confidences (hence the bins), 1[correct_i] ~ Bernoulli(conf_i)
    # independently, so by Hoeffding and a union bound over the bins, with
    # probability >= 1 - alpha, |acc_m - conf_m| <= sqrt(log(2M/alpha) / (2 n_m)) in
    # every bin and ECE <= sqrt(log(2M/alpha)/2) * sum_m sqrt(n_m) / n (~0.06 here).
    conf = proba.max(axis=1)
    bins = np.clip(np.ceil(conf * n_bins).astype(int) - 1, 0, n_bins - 1)
    n_m = np.bincount(bins, minlength=n_bins)
    bound = math.sqrt(math.log(2 * n_bins / alpha) / 2) * np.sqrt(n_m).sum() / n
    ece = M.expected_calibration_error(y, proba, n_bins=n_bins)
    assert ece <= bound
    sharp = proba**3
    sharp /= sharp.sum(axis=1, keepdims=True)  # overconfident (temperature 1/3)
    ece_sharp = M.expected_calibration_error(y, sharp, n_bins=n_bins)
    assert ece_sharp > 2 * bound
    assert ece_sharp > 5 * ece


def test_default_classes_rule():
    # Fewer distinct labels than columns is ambiguous, as in scikit-learn's
    # log_loss: guessing range(3) scored 1-based labels 1, 2 of classes
    # [1, 2, 3] against the wrong columns (NLL 3.00 for the right 0.105).
    p3 = np.array([[0.9, 0.05, 0.05], [0.05, 0.9, 0.05], [0.05, 0.9, 0.05], [0.9, 0.05, 0.05]])
    y1 = np.array([1, 2, 2, 1])
    assert M.categorical_nll(y1, p3, classes=[1, 2, 3]) == pytest.approx(-math.log(0.9))
    assert M.expected_calibration_error(y1, p3, classes=[1, 2, 3]) == pytest.approx(0.1)
    y = np.array([0, 2, 2, 0])
    p = ECE_P[:4]
    for fn in (M.brier_score, M.categorical_nll, M.expected_calibration_error):
        for labels in (y, y1):
            with pytest.raises(ValueError, match="ambiguous; pass `classes`"):
                fn(labels, p)
    # one label with a 1-D probability of the positive class: the 0 / 1
    # convention; two columns are as ambiguous as three (labels 1 of classes
    # [1, 2] were scored against a class 0's column: NLL 2.30 for 0.127)
    pb = np.array([0.2, 0.4, 0.1])
    assert M.categorical_nll([0, 0, 0], pb) == pytest.approx(
        M.categorical_nll([0, 0, 0], pb, classes=[0, 1]), rel=1e-14)
    with pytest.raises(ValueError, match="ambiguous"):
        M.categorical_nll([1, 1, 1], np.column_stack([1 - pb, pb]))
    # as many distinct labels as columns: the sorted labels (scikit-learn's rule)
    assert M.categorical_nll(y * 10 + 5, p[:, [0, 2]] / p[:, [0, 2]].sum(1, keepdims=True)) == (
        pytest.approx(
            log_loss(y * 10 + 5, p[:, [0, 2]] / p[:, [0, 2]].sum(1, keepdims=True)), rel=1e-12
        )
    )
    with pytest.raises(ValueError, match="classes"):
        M.brier_score(np.array(["x", "y", "x", "y"]), p)


def test_brier_score_hand_and_sklearn():
    p = np.array([[0.7, 0.2, 0.1], [0.2, 0.5, 0.3], [0.1, 0.1, 0.8]])
    y = np.array([0, 2, 2])
    # sum over classes: .09+.04+.01, .04+.25+.49, .01+.01+.04
    hand = (0.14 + 0.78 + 0.06) / 3
    c3 = dict(classes=[0, 1, 2])  # (class 1 has no example)
    assert M.brier_score(y, p, **c3) == pytest.approx(hand, rel=1e-12)
    assert M.brier_score(y, p, sample_weight=[1, 0, 1], **c3) == pytest.approx(0.1, rel=1e-12)
    # scikit-learn's multiclass Brier (>= 1.7) is the same, unscaled, sum over classes
    assert M.brier_score(y, p, **c3) == pytest.approx(brier_score_loss(y, p, labels=[0, 1, 2]))
    # binary: the customary mean (p_pos - y)^2, i.e. half of the two-class sum
    pb = np.array([0.9, 0.2, 0.6])
    yb = np.array([1, 0, 0])
    assert M.brier_score(yb, pb) == pytest.approx((0.01 + 0.04 + 0.36) / 3, rel=1e-12)
    two_col = np.column_stack([1 - pb, pb])
    assert M.brier_score(yb, two_col) == pytest.approx(M.brier_score(yb, pb), rel=1e-14)
    half_sum = 0.5 * np.mean(np.sum((two_col - np.eye(2)[yb]) ** 2, axis=1))
    assert M.brier_score(yb, two_col) == pytest.approx(half_sum, rel=1e-12)
    assert M.brier_score(yb, pb) == pytest.approx(brier_score_loss(yb, pb))


def test_categorical_nll_hand_and_sklearn(rng):
    p = np.array([[0.7, 0.2, 0.1], [0.2, 0.5, 0.3], [0.1, 0.1, 0.8]])
    y = np.array([0, 2, 2])
    hand = -(math.log(0.7) + math.log(0.3) + math.log(0.8)) / 3
    c3 = dict(classes=[0, 1, 2])  # (class 1 has no example)
    assert M.categorical_nll(y, p, **c3) == pytest.approx(hand, rel=1e-12)
    w = [2.0, 1.0, 0.0]
    assert M.categorical_nll(y, p, sample_weight=w, **c3) == pytest.approx(
        -(2 * math.log(0.7) + math.log(0.3)) / 3, rel=1e-12
    )
    assert M.categorical_nll(y, p, **c3) == pytest.approx(log_loss(y, p, labels=[0, 1, 2]),
                                                          rel=1e-12)
    names = np.array(["c", "a", "b"])  # unsorted classes: columns follow `classes`
    assert M.categorical_nll(names[y], p, classes=names) == pytest.approx(hand, rel=1e-12)
    pb = rng.uniform(0.05, 0.95, size=30)
    yb = (rng.random(30) < pb).astype(int)
    assert M.categorical_nll(yb, pb) == pytest.approx(log_loss(yb, pb), rel=1e-12)


def test_classification_metrics_accept_categorical_predictive():
    names = np.array(["a", "b", "c"])
    dist = CategoricalPredictive(ECE_P, classes=names)
    assert M.expected_calibration_error(names[ECE_Y], dist, n_bins=5) == pytest.approx(0.36)
    assert M.brier_score(names[ECE_Y], dist) == pytest.approx(M.brier_score(ECE_Y, ECE_P))


# --------------------------------------------------------------- weights == repetitions
def test_integer_weights_equal_repeated_samples(rng):
    n = 40
    y = rng.normal(size=n)
    mu = rng.normal(size=n)
    sd = rng.uniform(0.3, 1.5, size=n)
    counts = rng.integers(0, 4, size=n)
    counts[0] = 1
    rep = np.repeat(np.arange(n), counts)
    d, d_rep = NormalPredictive(mu, sd**2), NormalPredictive(mu[rep], sd[rep] ** 2)
    pairs = [
        (
            M.gaussian_nlpd(y, mu, sd, sample_weight=counts),
            M.gaussian_nlpd(y[rep], mu[rep], sd[rep]),
        ),
        (
            M.crps_gaussian(y, mu, sd, sample_weight=counts),
            M.crps_gaussian(y[rep], mu[rep], sd[rep]),
        ),
        (M.nlpd(y, d, sample_weight=counts), M.nlpd(y[rep], d_rep)),
        (M.crps(y, d, sample_weight=counts), M.crps(y[rep], d_rep)),
        (M.coverage(y, d, 0.8, sample_weight=counts), M.coverage(y[rep], d_rep, 0.8)),
        (
            M.regression_calibration_error(y, d, sample_weight=counts),
            M.regression_calibration_error(y[rep], d_rep),
        ),
    ]
    proba = rng.dirichlet(np.ones(3), size=n)
    labels = rng.integers(0, 3, size=n)
    for fn in (M.brier_score, M.categorical_nll, M.expected_calibration_error):
        pairs.append((fn(labels, proba, sample_weight=counts), fn(labels[rep], proba[rep])))
    for weighted, repeated in pairs:
        assert weighted == pytest.approx(repeated, rel=1e-12)


# ---------------------------------------------------------------------------- scorers
class FakeGaussianRegressor(RegressorMixin, BaseEstimator):
    """Least-squares line with a Gaussian predictive of std std_multiplier * residual std."""

    def __init__(self, std_multiplier=1.0):
        self.std_multiplier = std_multiplier

    def fit(self, X, y):
        A = np.column_stack([np.ones(len(X)), np.asarray(X)])
        self.coef_, *_ = np.linalg.lstsq(A, y, rcond=None)
        self.sigma_ = float(np.std(y - A @ self.coef_))
        return self

    def predict(self, X):
        return np.column_stack([np.ones(len(X)), np.asarray(X)]) @ self.coef_

    def predict_dist(self, X):
        mean = self.predict(X)
        return NormalPredictive(mean, np.full(len(mean), (self.std_multiplier * self.sigma_) ** 2))


@pytest.fixture
def linear_data(rng):
    X = rng.normal(size=(300, 2))
    y = 1.0 + X @ [2.0, -1.0] + 0.7 * rng.normal(size=300)
    return X, y


def test_cross_val_score_with_neg_nlpd_scorer(linear_data):
    X, y = linear_data
    cv = KFold(5, shuffle=True, random_state=0)
    scores = cross_val_score(FakeGaussianRegressor(), X, y, cv=cv, scoring=M.neg_nlpd_scorer)
    by_hand = []
    for train, test in cv.split(X):
        est = FakeGaussianRegressor().fit(X[train], y[train])
        mean = est.predict(X[test])
        by_hand.append(-np.mean(-stats.norm.logpdf(y[test], mean, est.sigma_)))
    np.testing.assert_allclose(scores, by_hand, rtol=1e-12)
    # mixed with scikit-learn scorer names in multi-metric evaluation
    res = cross_validate(
        FakeGaussianRegressor(), X, y, cv=cv, scoring={"nlpd": M.neg_nlpd_scorer, "r2": "r2"}
    )
    np.testing.assert_allclose(res["test_nlpd"], by_hand, rtol=1e-12)
    assert np.all(res["test_r2"] > 0.8)


def test_grid_search_picks_calibrated_std(linear_data):
    X, y = linear_data
    search = GridSearchCV(
        FakeGaussianRegressor(), {"std_multiplier": [0.2, 1.0, 5.0]}, scoring=M.neg_nlpd_scorer
    ).fit(X, y)
    assert search.best_params_ == {"std_multiplier": 1.0}
    # the CRPS and the coverage error prefer it too
    for scorer in (M.neg_crps_scorer, M.neg_coverage_error_scorer):
        s = GridSearchCV(
            FakeGaussianRegressor(), {"std_multiplier": [0.2, 1.0, 5.0]}, scoring=scorer
        ).fit(X, y)
        assert s.best_params_ == {"std_multiplier": 1.0}


def test_regression_scorers_equal_metrics(linear_data):
    X, y = linear_data
    est = FakeGaussianRegressor(std_multiplier=1.5).fit(X, y)
    dist = est.predict_dist(X)
    cov = M.coverage(y, dist, 0.95)
    assert M.neg_nlpd_scorer(est, X, y) == pytest.approx(-M.nlpd(y, dist))
    assert M.neg_crps_scorer(est, X, y) == pytest.approx(-M.crps(y, dist))
    assert M.neg_coverage_error_scorer(est, X, y) == pytest.approx(-abs(cov - 0.95))
    assert M.neg_calibration_error_scorer(est, X, y) == pytest.approx(
        -M.regression_calibration_error(y, dist)
    )
    w = np.linspace(0.0, 1.0, len(y))
    assert M.neg_nlpd_scorer(est, X, y, sample_weight=w) == pytest.approx(
        -M.nlpd(y, dist, sample_weight=w)
    )
    # a Pipeline whose last step has predict_dist is scored through it
    pipe = make_pipeline(StandardScaler(), FakeGaussianRegressor(std_multiplier=1.5)).fit(X, y)
    assert M.neg_nlpd_scorer(pipe, X, y) == pytest.approx(M.neg_nlpd_scorer(est, X, y))


def test_classifier_scorers_match_sklearn():
    rng = np.random.default_rng(3)
    X = rng.normal(size=(240, 3))
    logits = X @ rng.normal(size=(3, 3))
    y = np.array(["cat", "dog", "eel"])[(logits + rng.gumbel(size=logits.shape)).argmax(1)]
    clf = LogisticRegression()
    cv = KFold(4, shuffle=True, random_state=1)
    ours = cross_val_score(clf, X, y, cv=cv, scoring=M.neg_categorical_nll_scorer)
    sk = cross_val_score(clf, X, y, cv=cv, scoring="neg_log_loss")
    np.testing.assert_allclose(ours, sk, rtol=1e-10)
    fitted = LogisticRegression().fit(X, y)
    proba = fitted.predict_proba(X)
    assert M.neg_brier_scorer(fitted, X, y) == pytest.approx(
        -M.brier_score(y, proba, classes=fitted.classes_)
    )
    assert M.neg_ece_scorer(fitted, X, y) == pytest.approx(
        -M.expected_calibration_error(y, proba, classes=fitted.classes_)
    )


def test_scorer_sample_weight_through_metadata_routing(linear_data):
    X, y = linear_data
    w = np.random.default_rng(5).uniform(0.0, 2.0, size=len(y))
    cv = KFold(3)
    scorer = M.neg_nlpd_scorer.set_score_request(sample_weight=True)
    assert scorer is not M.neg_nlpd_scorer
    with config_context(enable_metadata_routing=True):
        res = cross_validate(
            FakeGaussianRegressor(), X, y, cv=cv, scoring=scorer, params={"sample_weight": w}
        )
    for score, (train, test) in zip(res["test_score"], cv.split(X)):
        est = FakeGaussianRegressor().fit(X[train], y[train])
        expected = -M.nlpd(y[test], est.predict_dist(X[test]), sample_weight=w[test])
        assert score == pytest.approx(expected, rel=1e-12)


def test_get_scorer_and_names(linear_data):
    X, y = linear_data
    ours = M.get_scorer("neg_nlpd")
    assert isinstance(ours, M.PredictiveScorer)
    assert ours is not M.neg_nlpd_scorer  # a copy, as scikit-learn does
    est = FakeGaussianRegressor().fit(X, y)
    assert ours(est, X, y) == M.neg_nlpd_scorer(est, X, y)
    assert pickle.loads(pickle.dumps(ours))(est, X, y) == ours(est, X, y)  # for n_jobs > 1
    names = {
        "neg_nlpd": M.neg_nlpd_scorer,
        "neg_crps": M.neg_crps_scorer,
        "neg_calibration_error": M.neg_calibration_error_scorer,
        "neg_coverage_error": M.neg_coverage_error_scorer,
        "neg_ece": M.neg_ece_scorer,
        "neg_brier": M.neg_brier_scorer,
        "neg_categorical_nll": M.neg_categorical_nll_scorer,
    }
    for name, scorer in names.items():
        got = M.get_scorer(name)
        assert got.score_func is scorer.score_func and got.response == scorer.response
    r2 = M.get_scorer("r2")
    assert type(r2) is type(sk_get_scorer("r2")) and not isinstance(r2, M.PredictiveScorer)
    assert r2(est, X, y) == pytest.approx(r2_score(y, est.predict(X)))
    with pytest.raises(ValueError, match="not a valid scoring value"):
        M.get_scorer("no_such_scorer")
    all_names = M.get_scorer_names()
    assert set(names) <= set(all_names) and "neg_log_loss" in all_names
    assert all_names == sorted(all_names)
    assert repr(M.neg_nlpd_scorer) == (
        "PredictiveScorer(nlpd, greater_is_better=False, response='predict_dist')"
    )


def test_scorer_without_response_method_raises_type_error(linear_data):
    X, y = linear_data
    reg = LinearRegression().fit(X, y)
    with pytest.raises(TypeError, match="predict_dist.*LinearRegression"):
        M.neg_nlpd_scorer(reg, X, y)
    with pytest.raises(TypeError, match="predict_proba"):
        M.neg_ece_scorer(FakeGaussianRegressor().fit(X, y), X, y)
    with pytest.raises(TypeError, match="predict_dist"):
        cross_val_score(reg, X, y, scoring=M.neg_crps_scorer, error_score="raise")


# -------------------------------------------------------------------------- bad input
def test_bad_regression_input():
    y = np.array([0.0, 1.0, 2.0])
    mu = np.zeros(3)
    sd = np.ones(3)
    with pytest.raises(ValueError, match="y_true contains NaN"):
        M.gaussian_nlpd([0.0, np.nan, 1.0], mu, sd)
    with pytest.raises(ValueError, match="y_true contains NaN"):
        M.crps_gaussian([0.0, np.nan, 1.0], mu, sd)
    with pytest.raises(ValueError, match="y_true contains NaN"):
        M.nlpd([0.0, np.nan, 1.0], NormalPredictive(mu, sd))
    with pytest.raises(ValueError, match="y_true contains infinity"):
        M.interval_coverage([0.0, np.inf, 1.0], mu - 1, mu + 1)
    with pytest.raises(ValueError, match="y_mean contains NaN"):
        M.crps_gaussian(y, [0.0, np.nan, 0.0], sd)
    with pytest.raises(ValueError, match="y_std must be non-negative"):
        M.crps_gaussian(y, mu, [1.0, -0.1, 1.0])
    with pytest.raises(ValueError, match="y_std must be non-negative"):
        M.gaussian_nlpd(y, mu, [1.0, -0.1, 1.0])
    with pytest.raises(ValueError, match="strictly positive"):
        M.gaussian_nlpd(y, mu, [1.0, 0.0, 1.0])
    with pytest.raises(ValueError, match="inconsistent lengths"):
        M.crps_gaussian(y, np.zeros(4), sd)
    with pytest.raises(ValueError, match="inconsistent lengths"):
        M.gaussian_nlpd(y, mu, np.ones(2))
    with pytest.raises(ValueError, match="sample_weight"):
        M.crps_gaussian(y, mu, sd, sample_weight=[1.0, 2.0])
    with pytest.raises(ValueError, match="[Nn]egative"):
        M.crps_gaussian(y, mu, sd, sample_weight=[1.0, -2.0, 1.0])
    with pytest.raises(ValueError, match="1-D"):
        M.crps_gaussian(np.zeros((3, 2)), mu, sd)
    with pytest.raises(ValueError, match="lower must not exceed upper"):
        M.interval_coverage(y, [1.0, 0.0, 0.0], [0.0, 1.0, 1.0])
    with pytest.raises(ValueError, match="confidence"):
        M.coverage(y, NormalPredictive(mu, sd), 1.5)
    with pytest.raises(ValueError, match="n_levels"):
        M.regression_calibration_error(y, NormalPredictive(mu, sd), n_levels=0)
    with pytest.raises(ValueError, match="inconsistent lengths"):
        M.nlpd(np.zeros(4), NormalPredictive(mu, sd))


def test_bad_mixture_input():
    y = np.zeros(2)
    means = np.zeros((2, 3))
    stds = np.ones((2, 3))
    with pytest.raises(ValueError, match="stds must be non-negative"):
        M.crps_gaussian_mixture(y, means, -stds, [0.2, 0.3, 0.5])
    with pytest.raises(ValueError, match="weights must be non-negative"):
        M.crps_gaussian_mixture(y, means, stds, [-0.2, 0.7, 0.5])
    with pytest.raises(ValueError, match="inconsistent lengths"):
        M.crps_gaussian_mixture(y, np.zeros((3, 3)), stds, [0.2, 0.3, 0.5])
    with pytest.raises(ValueError, match="shape mismatch"):
        M.crps_gaussian_mixture(y, means, stds, [0.5, 0.5])
    with pytest.raises(ValueError, match="means contains NaN"):
        M.crps_gaussian_mixture(y, np.full((2, 3), np.nan), stds, [0.2, 0.3, 0.5])


def test_bad_classification_input():
    p = ECE_P[:4]
    y = ECE_Y[:4]
    with pytest.raises(ValueError, match="classes has 2 entries but y_proba has 3 columns"):
        M.brier_score(y, p, classes=[0, 1])
    with pytest.raises(ValueError, match="not comparable with each other"):  # was a TypeError
        M.categorical_nll(np.array([0, "b"], dtype=object), [[0.5, 0.5], [0.5, 0.5]])
    with pytest.raises(ValueError, match="inconsistent numbers of samples"):
        M.categorical_nll(y, ECE_P)
    with pytest.raises(ValueError, match="1-D or 2-D"):
        M.expected_calibration_error(y, p[:, :, None])
    with pytest.raises(ValueError, match="sum to one"):
        M.categorical_nll(y, p * 0.9)
    with pytest.raises(ValueError, match=r"\[0, 1\]"):
        M.brier_score([0, 1], [0.5, 1.5])
    with pytest.raises(ValueError, match="y_proba contains NaN"):
        M.brier_score([0, 1], [0.5, np.nan])
    with pytest.raises(ValueError, match="y_true contains NaN"):
        M.categorical_nll([0.0, np.nan], [0.5, 0.5])
    with pytest.raises(ValueError, match="not in classes"):
        M.categorical_nll([0, 5, 1, 2], p, classes=[0, 1, 2])
    with pytest.raises(ValueError, match="n_bins"):
        M.expected_calibration_error(y, p, n_bins=0)
    with pytest.raises(TypeError, match="categorical_nll"):
        M.nlpd(y, object())


# --------------------------------------------------------------------------
# Edge cases found in review: infinities, extreme weights, exact bin edges
def test_zero_weight_sample_with_infinite_score_is_ignored():
    # a point mass that misses y = 1 has infinite NLPD there; with weight 0 the
    # mean is the other sample's N(0; 0, 1) NLPD (0 * inf used to give NaN)
    expected = 0.5 * math.log(2 * math.pi)
    dist = NormalPredictive(np.array([0.0, 0.0]), np.array([1.0, 0.0]))
    assert M.nlpd([0.0, 1.0], dist, sample_weight=[1, 0]) == pytest.approx(expected)
    assert M.gaussian_nlpd([0.0, 1e200], 0.0, 1.0, sample_weight=[1, 0]) == pytest.approx(expected)


def test_mixed_infinite_scores_raise():
    # a point mass that hits one target (NLPD -inf) and misses another (+inf)
    with pytest.raises(ValueError, match=r"\+inf and -inf"):
        M.nlpd([0.0, 1.0], NormalPredictive(np.zeros(2), np.zeros(2)))


def test_huge_and_tiny_weights_give_the_unweighted_mean():
    y = np.array([0.0, 1.0])
    unweighted = M.crps_gaussian(y, 0.0, 1.0)
    for w in (1e308, 1e-320):  # the sum overflows / the weights are subnormal
        assert M.crps_gaussian(y, 0.0, 1.0, sample_weight=[w, w]) == pytest.approx(
            unweighted, rel=1e-12
        )


def test_crps_mixture_overflow_raises():
    # y - mean overflows (the CRPS is ~2e308); it used to be clamped to 0.0
    with pytest.raises(ValueError, match="overflowed"):
        M.crps_gaussian_mixture([1e308], [[-1e308, -1e308]], [[1.0, 1.0]], [0.5, 0.5])
    # a mixture whose own variance overflows is refused when it is built
    with pytest.raises(ValueError, match="variance overflows"):
        M.crps_gaussian_mixture([0.0], [[-1e308, 1e308]], [[1.0, 1.0]], [0.5, 0.5])
    # ... but a far component of weight zero counts for nothing: N(1e307, 1) at
    # its own mean has CRPS (sqrt(2) - 1) / sqrt(pi)
    value = M.crps_gaussian_mixture([1e307], [[1e307, -1e307]], [[1.0, 1.0]], [1.0, 0.0])
    assert value == pytest.approx((np.sqrt(2.0) - 1.0) / np.sqrt(np.pi), rel=1e-12)
    dist = GaussianMixturePredictive([[0.0, 1e200]], [[1.0, 1.0]], [1.0, 0.0])
    assert dist.var()[0] == 1.0


def test_interval_width_of_a_degenerate_infinite_interval_is_zero():
    assert M.interval_width([-np.inf, 0.0], [-np.inf, 1.0]) == pytest.approx(0.5)


@pytest.mark.parametrize("n_bins", [6, 7, 12, 14])
def test_ece_confidence_on_a_bin_edge_goes_to_the_lower_bin(n_bins):
    # bins are ((m-1)/M, m/M]: a confidence of exactly k/M (an ensemble vote)
    # belongs to bin k; np.linspace rounds some edges one ulp below k/M, which
    # pooled it with bin k+1.  A correct sample at k/M and a wrong one in bin
    # k+1 give (1 - k/M)/2 + upper/2 apart, |1 - k/M - upper|/2 pooled.
    for k in range(n_bins // 2 + 1, n_bins):
        conf = k / n_bins
        upper = (k + 0.5) / n_bins
        proba = np.array([[conf, 1 - conf], [upper, 1 - upper]])
        expected = 0.5 * (1 - conf) + 0.5 * upper
        assert M.expected_calibration_error([0, 1], proba, n_bins=n_bins) == pytest.approx(
            expected
        )


def test_one_categorical_distribution_serves_every_sample():
    # A CategoricalPredictive of batch shape () is one distribution for all
    # samples, as a 0-d NormalPredictive is for the continuous metrics; its
    # two probabilities were read as two samples' binary probabilities.
    from skbayesnn.distributions import CategoricalPredictive

    d = CategoricalPredictive([0.3, 0.7], classes=["a", "b"])
    np.testing.assert_allclose(M.categorical_nll(["b", "a"], d), -(np.log(0.7) + np.log(0.3)) / 2)
    np.testing.assert_allclose(M.categorical_nll(["b"], d), -np.log(0.7))
    np.testing.assert_allclose(M.brier_score(["b", "b"], d), 0.09)
    d3 = CategoricalPredictive([0.2, 0.3, 0.5], classes=[0, 1, 2])
    np.testing.assert_allclose(M.categorical_nll([2, 2, 0], d3),
                               -(2 * np.log(0.5) + np.log(0.2)) / 3)


def test_multi_output_metrics_score_every_output(rng):
    # A multi-output model predicts independent outputs: NLPD is the joint
    # one (the sum over outputs), CRPS and coverage the mean over outputs.
    # They raised "y_true must be 1-D", so GridSearchCV scored NaN everywhere.
    n, k = 40, 3
    mean = rng.normal(size=(n, k))
    var = rng.uniform(0.2, 2.0, size=(n, k))
    y = mean + np.sqrt(var) * rng.normal(size=(n, k))
    dist = NormalPredictive(mean, var)
    w = rng.uniform(0.5, 2.0, size=n)
    logp = stats.norm.logpdf(y, mean, np.sqrt(var))
    assert M.nlpd(y, dist) == pytest.approx(-np.mean(logp.sum(axis=1)), rel=1e-12)
    assert M.nlpd(y, dist, sample_weight=w) == pytest.approx(
        -np.average(logp.sum(axis=1), weights=w), rel=1e-12)
    assert M.crps(y, dist) == pytest.approx(
        M.crps_gaussian(y.ravel(), mean.ravel(), np.sqrt(var).ravel()), rel=1e-12)
    lo, hi = stats.norm.interval(0.9, mean, np.sqrt(var))
    inside = (lo <= y) & (y <= hi)
    assert M.coverage(y, dist, 0.9, sample_weight=w) == pytest.approx(
        np.average(inside.mean(axis=1), weights=w), rel=1e-12)
    mix = GaussianMixturePredictive(np.stack([mean, mean + 1], -1), np.stack([var, var], -1),
                                    np.full((n, k, 2), 0.5))
    assert M.nlpd(y, mix) == pytest.approx(-np.mean(mix.logpdf(y).sum(axis=1)), rel=1e-12)
    with pytest.raises(ValueError, match="same batch shape"):
        M.nlpd(y, NormalPredictive(mean[:, :2], var[:, :2]))
    assert M.mean_interval_width(dist, 0.9, sample_weight=w) == pytest.approx(
        np.average((hi - lo).mean(axis=1), weights=w), rel=1e-12)
    # a point mass that hits one output and one that misses another: the joint
    # density is undefined (inf + -inf), an error rather than NaN
    with pytest.raises(ValueError, match="undefined"):
        point = NormalPredictive(np.zeros((2, 2)), [[0.0, 0.0], [1.0, 1.0]])
        M.nlpd([[0.0, 1.0], [0.0, 0.0]], point)
    # (a sample of weight 0 is left out first, as for one output)
    assert M.nlpd([[0.0, 1.0], [0.0, 0.0]], point, sample_weight=[0.0, 1.0]) == pytest.approx(
        -2 * stats.norm.logpdf(0.0), rel=1e-12)
    # a single-output predictive of shape (1, n) is not n outputs
    row = NormalPredictive(mean[:, 0][None, :], var[:, 0][None, :])
    assert M.mean_interval_width(row, 0.9, sample_weight=w) == pytest.approx(
        np.average(hi[:, 0] - lo[:, 0], weights=w), rel=1e-12)
    # and one sample of k outputs, with its one weight, is the mean over its
    # outputs (its weight had been refused: k expected)
    one = NormalPredictive(mean[:1], var[:1])
    assert M.mean_interval_width(one, 0.9, sample_weight=[2.0]) == pytest.approx(
        np.mean(hi[0] - lo[0]), rel=1e-12)


def test_grid_search_scores_a_multi_output_model(rng):
    from skbayesnn import TAGIRegressor

    X = rng.normal(size=(60, 3))
    y = X[:, 0] - X[:, 1] + 0.1 * rng.normal(size=60)
    Y = np.c_[y, -y + 0.3 * rng.normal(size=60)]
    search = GridSearchCV(TAGIRegressor((8,), max_epochs=3, random_state=0),
                          {"sigma_v": [0.1, 0.3, 3.0]}, cv=3,
                          scoring=M.neg_nlpd_scorer).fit(X, Y)
    scores = search.cv_results_["mean_test_score"]
    assert np.all(np.isfinite(scores))
    assert search.best_params_["sigma_v"] != 3.0  # noise ten times too large loses


# ------------------------------------------------------------------- review fixes (stop 23)
def test_scorers_look_through_searches_and_use_return_std(linear_data):
    # Nested cross-validation (a GridSearchCV scored by the outer loop) and
    # sklearn's return_std regressors scored NaN: the scorer found no predict_dist.
    from sklearn.linear_model import BayesianRidge

    X, y = linear_data
    inner = GridSearchCV(FakeGaussianRegressor(), {"std_multiplier": [0.2, 1.0, 5.0]},
                         scoring=M.neg_nlpd_scorer, cv=3).fit(X[:200], y[:200])
    assert M.neg_nlpd_scorer(inner, X[200:], y[200:]) == pytest.approx(
        M.neg_nlpd_scorer(inner.best_estimator_, X[200:], y[200:]), rel=0, abs=0)
    scores = cross_val_score(inner, X, y, cv=3, scoring=M.neg_nlpd_scorer, error_score="raise")
    assert np.all(np.isfinite(scores))
    ridge = BayesianRidge().fit(X[:200], y[:200])
    mean, std = ridge.predict(X[200:], return_std=True)
    assert M.neg_nlpd_scorer(ridge, X[200:], y[200:]) == pytest.approx(
        -M.gaussian_nlpd(y[200:], mean, std), rel=1e-14)
    assert M.neg_crps_scorer(ridge, X[200:], y[200:]) == pytest.approx(
        -M.crps_gaussian(y[200:], mean, std), rel=1e-14)
    # predict(**kwargs) would pass return_std on untransformed: refused, not guessed
    ttr = TransformedTargetRegressor(BayesianRidge()).fit(X, y)
    with pytest.raises(TypeError, match="return_std.*TransformedTargetRegressor has none"):
        M.neg_nlpd_scorer(ttr, X, y)


def test_calibration_error_and_pit_take_several_outputs(rng):
    mean = rng.normal(size=(400, 2))
    y = mean + rng.normal(size=(400, 2)) * [1.0, 3.0]
    d = NormalPredictive(mean, np.ones((400, 2)))
    u = M.pit_values(y, d)
    assert u.shape == (400, 2)
    np.testing.assert_allclose(u, stats.norm.cdf(y - mean), rtol=1e-14)
    per_output = [M.regression_calibration_error(y[:, j], d[:, j]) for j in range(2)]
    assert M.regression_calibration_error(y, d) == pytest.approx(np.mean(per_output), rel=1e-14)
    assert per_output[1] > 3 * per_output[0]  # the too narrow second output


def test_a_joint_value_is_not_copied_to_every_sample(rng):
    # A frozen multivariate normal returns one joint log density: nlpd was n
    # times too large and every PIT value the joint cdf.
    mu = rng.normal(size=4)
    y = mu + rng.normal(size=4)
    joint = stats.multivariate_normal(mu, np.eye(4))
    for func in (M.nlpd, M.pit_values, M.regression_calibration_error):
        with pytest.raises(ValueError, match="one number for 4 targets"):
            func(y, joint)
    # a 0-d distribution's interval is shared by all samples, as before
    assert M.coverage(y - mu, NormalPredictive(0.0, 1e-300)) == 0.0
    assert M.coverage([0.0, 0.0], NormalPredictive(0.0, 1.0)) == 1.0


def test_all_zero_weights_are_refused_whatever_sklearn_does(monkeypatch):
    # scikit-learn < 1.9 (the dependency allows 1.7) lets all-zero weights
    # through its _check_sample_weight: NaN or ZeroDivisionError followed.
    monkeypatch.setattr(M, "_check_sample_weight",
                        lambda sw, X, **kw: np.asarray(sw, dtype=np.float64))
    y = np.array([0.0, 1.0, 2.0])
    d = NormalPredictive(np.zeros(3), 1.0)
    calls = [
        lambda sw: M.expected_calibration_error([0, 1, 1], [0.2, 0.7, 0.9], sample_weight=sw),
        lambda sw: M.regression_calibration_error(y, d, sample_weight=sw),
        lambda sw: M.gaussian_nlpd(y, np.zeros(3), np.ones(3), sample_weight=sw),
    ]
    for call in calls:
        with pytest.raises(ValueError, match="all zero"):
            call(np.zeros(3))
    assert M.gaussian_nlpd(y, np.zeros(3), np.ones(3), sample_weight=[0.0, 0.0, 1.0]) == (
        pytest.approx(0.5 * np.log(2 * np.pi) + 2.0, rel=1e-14))


def test_ece_vote_fractions_stay_in_their_bins_with_three_classes():
    # 2/6 + 3/6 + 1/6 sums to 1 - 1ulp; dividing by it moved 3/6 to 0.5 + 1ulp,
    # into the upper bin (ECE 0.2 instead of 0.7).
    P = np.array([[2 / 6, 3 / 6, 1 / 6], [0.05, 0.9, 0.05]])
    assert P[0].sum() != 1.0
    expected = 0.5 * abs(1 - 0.5) + 0.5 * abs(0 - 0.9)
    assert M.expected_calibration_error([1, 0], P, n_bins=2, classes=[0, 1, 2]) == pytest.approx(
        expected, rel=1e-14)
    off = np.array([[0.2, 0.3, 0.5 + 5e-7]])  # off by more than rounding: still renormalised
    assert M.brier_score([2], off, classes=[0, 1, 2]) == pytest.approx(
        M.brier_score([2], off / off.sum(), classes=[0, 1, 2]), rel=1e-14)


def test_crps_at_huge_standard_deviations():
    # 2 s overflowed for s = 1e308; the mixture's s**2 above 1.3e154
    s = 1e308
    assert M.crps_gaussian([0.0], [0.0], [s]) == pytest.approx(
        s * (np.sqrt(2.0) - 1.0) / np.sqrt(np.pi), rel=1e-14)
    with pytest.raises(ValueError, match="overflow as variances"):
        M.crps_gaussian_mixture([0.0], [0.0], [1e160], [1.0])


def test_coverage_error_scorer_does_not_let_outputs_cancel(rng):
    # One output's intervals far too wide (coverage 1), the other's far too
    # narrow: |mean coverage - 0.95| was small, the mean of the errors is not.
    n = 4000
    mean = np.zeros((n, 2))
    y = rng.normal(size=(n, 2))
    # (sd 0.839: 90% coverage, 5 points short, as the wide output is 5 over)
    d = NormalPredictive(mean, np.column_stack([np.full(n, 100.0), np.full(n, 0.839 ** 2)]))
    per_output = [abs(M.coverage(y[:, j], d[:, j]) - 0.95) for j in range(2)]
    assert M._abs_coverage_error(y, d) == pytest.approx(np.mean(per_output), rel=1e-14)
    assert abs(M.coverage(y, d) - 0.95) < 0.01 < 0.04 < M._abs_coverage_error(y, d)


def test_far_tails_give_their_limits_without_floating_point_errors():
    # A z-score whose square overflows has log density -inf and CRPS |y - m|;
    # the overflow raised FloatingPointError under np.seterr(over="raise").
    with np.errstate(over="raise", divide="raise", invalid="raise"):
        assert NormalPredictive(0.0, 1.0).logpdf(1e200) == -np.inf
        assert GaussianMixturePredictive([[0.0, 1.0]], 1.0).logpdf(1e200)[0] == -np.inf
        assert M.nlpd([1e200], NormalPredictive(0.0, 1.0)) == np.inf
        assert M.crps_gaussian([1.0], [0.0], [1e-320]) == pytest.approx(1.0, rel=1e-12)


def test_calibration_error_of_point_masses_uses_the_randomised_pit(rng):
    # u = F(y) is 1 for a point mass at y, so a perfect point forecast scored
    # the worst error, 0.5.  With the randomised PIT's share at a jump it is 0,
    # and a calibrated predictive with atoms scores near 0 (DKW bound).
    y = np.arange(10.0)
    assert M.regression_calibration_error(y, NormalPredictive(y, 0.0)) == pytest.approx(
        0.0, abs=1e-15)
    n = 4000
    atoms = np.array([-1.0, 0.0, 2.0])
    probs = np.array([0.2, 0.5, 0.3])
    draws = atoms[rng.choice(3, size=n, p=probs)]
    calibrated = GaussianMixturePredictive(np.tile(atoms, (n, 1)), 0.0, probs)
    assert M.regression_calibration_error(draws, calibrated) < np.sqrt(np.log(2 / 1e-3) / (2 * n))
    wrong = GaussianMixturePredictive(np.tile(atoms, (n, 1)), 0.0, probs[::-1])
    assert M.regression_calibration_error(draws, wrong) > 0.05
    # a density narrower than the floats' spacing at y is not a point mass:
    # its step to the next float is matched by the step beyond (the share
    # had doubled the error of a calibrated predictive, 0.155 against 0.081)
    centres = 1e6 + rng.normal(size=200)
    ys = centres + 1e-10 * rng.normal(size=200)
    narrow = NormalPredictive(centres, np.full(200, 1e-20))
    plain = np.mean(np.abs((M.pit_values(ys, narrow)[:, None] <= np.arange(1, 20) / 20)
                           .mean(axis=0) - np.arange(1, 20) / 20))
    assert M.regression_calibration_error(ys, narrow) == pytest.approx(plain, rel=1e-14)
    # continuous predictives: the indicator of u <= p_j, as before
    z = rng.normal(size=n)
    d = NormalPredictive(np.zeros(n), 4.0)
    levels = np.arange(1, 20) / 20
    direct = np.mean(np.abs((M.pit_values(z, d)[:, None] <= levels).mean(axis=0) - levels))
    assert M.regression_calibration_error(z, d) == pytest.approx(direct, rel=1e-14)


def test_crps_of_mixtures_with_huge_or_zero_weight_components():
    # v_k + v_l overflowed for variances near the float limit, and a far
    # component of weight 0 gave 0 * inf = NaN: valid mixtures that nlpd and
    # the single Gaussian handle were refused.
    huge = M.crps([0.0], NormalPredictive([0.0], [1e308]))
    assert np.isfinite(huge)
    assert M.crps([0.0], GaussianMixturePredictive([[0.0]], [[1e308]])) == pytest.approx(
        huge, rel=1e-14)
    far = GaussianMixturePredictive([[-1e308, 0.0, 1e308]], 1.0, [0.0, 1.0, 0.0])
    assert M.crps([0.0], far) == pytest.approx(M.crps([0.0], NormalPredictive([0.0], [1.0])),
                                               rel=1e-14)


def test_mean_interval_width_refuses_more_than_two_batch_dimensions():
    # (they were flattened into samples without a word)
    with pytest.raises(ValueError, match="batch shape"):
        M.mean_interval_width(NormalPredictive(np.zeros((2, 2, 2)), 1.0))


def test_multi_output_metrics_take_frozen_scipy_distributions(rng):
    # The docs accept frozen scipy distributions, and batch shape (n, k) for
    # several outputs; such a distribution cannot be indexed, and was refused.
    y = rng.normal(size=(30, 2))
    mean = rng.normal(size=(30, 2))
    sd = np.array([1.0, 2.5])
    frozen = stats.norm(mean, sd)
    ours = NormalPredictive(mean, np.broadcast_to(sd**2, (30, 2)))
    for metric in (M.nlpd, M.crps, M.coverage, M.regression_calibration_error):
        assert metric(y, frozen) == pytest.approx(metric(y, ours), rel=1e-12)
    t = stats.t(df=[[3.0, 5.0]], loc=mean, scale=sd)  # parameters broadcast, keywords
    per_column = sum(-np.mean(stats.t(df, mean[:, j], sd[j]).logpdf(y[:, j]))
                     for j, df in enumerate((3.0, 5.0)))
    assert M.nlpd(y, t) == pytest.approx(per_column, rel=1e-12)


def test_mistaken_arguments_name_the_metric_that_fits_them(rng):
    # Arrays where a distribution is expected point to the metric of arrays;
    # a regression predictive given to a class metric says what it is (it
    # had failed inside NumPy: "unsupported operand ... NormalPredictive").
    y = rng.normal(size=20)
    mean, std = y + 0.1, np.full(20, 0.5)
    for call, want in (
        (lambda: M.nlpd(y, mean), r"gaussian_nlpd\(y_true, y_mean, y_std\)"),
        (lambda: M.crps(y, mean), r"crps_gaussian\(y_true, y_mean, y_std\)"),
        (lambda: M.coverage(y, mean - std, mean + std), r"interval_coverage\(y_true, lower"),
        (lambda: M.mean_interval_width(mean), r"interval_width\(lower, upper\)"),
    ):
        with pytest.raises(TypeError, match=want):
            call()
    dist = NormalPredictive(mean, std**2)
    labels = (y > 0).astype(int)
    for metric in (M.expected_calibration_error, M.brier_score, M.categorical_nll):
        with pytest.raises(TypeError, match="NormalPredictive, a regression predictive"):
            metric(labels, dist)
    with pytest.raises(ValueError, match=r"got an array of shape \(20,\)"):
        M.coverage(y, dist, mean)
