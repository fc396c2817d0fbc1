"""BayesianLinearRegressor: exact Bayesian linear regression on the shared base."""

import pickle
import warnings

import numpy as np
import pytest
from scipy.stats import multivariate_normal
from sklearn.exceptions import ConvergenceWarning
from sklearn.linear_model import BayesianRidge

from skbayesnn import BayesianLinearRegressor
from skbayesnn.core import linear_gaussian as lg


def _data(rng, n=300, d=4, noise=0.5, unit_std=False):
    X = rng.normal(size=(n, d)) * rng.uniform(0.5, 3.0, size=d) + rng.normal(size=d)
    if unit_std:
        X = (X - X.mean(axis=0)) / X.std(axis=0) + rng.normal(size=d)
    y = X @ rng.normal(size=d) + 3.0 + noise * rng.normal(size=n)
    return X, y


def test_predictive_equals_bayesian_ridge_with_its_precisions(rng):
    # On features with unit standard deviation, BayesianRidge's precisions (alpha_
    # for the noise, lambda_ for the weights, original units) map to standardised
    # units by multiplying with var(y).  Our predictive then equals BayesianRidge's
    # in closed form, plus the intercept's posterior variance 1/(n alpha) that
    # BayesianRidge leaves out.
    X, y = _data(rng, unit_std=True)
    br = BayesianRidge().fit(X, y)
    var_y = y.var()
    ours = BayesianLinearRegressor(
        noise_precision=br.alpha_ * var_y, prior_precision=br.lambda_ * var_y
    ).fit(X, y)
    X_test = rng.normal(size=(50, 4)) * 2
    m_br, s_br = br.predict(X_test, return_std=True)
    m, s = ours.predict(X_test, return_std=True)
    np.testing.assert_allclose(m, m_br, rtol=1e-9, atol=1e-9)
    np.testing.assert_allclose(s**2, s_br**2 + 1.0 / (len(y) * br.alpha_), rtol=1e-9)
    np.testing.assert_allclose(ours.coef_, br.coef_, rtol=1e-9)
    np.testing.assert_allclose(ours.intercept_, br.intercept_, rtol=1e-9)
    np.testing.assert_allclose(ours.coef_cov_, br.sigma_, rtol=1e-8, atol=1e-14)


def test_auto_precisions_maximise_the_evidence(rng):
    X, y = _data(rng, n=120)
    reg = BayesianLinearRegressor().fit(X, y)
    stats = reg.stats_
    best = lg.log_evidence(stats, reg.prior_precision_, reg.noise_precision_)
    assert best == pytest.approx(reg.log_evidence_)
    for f_lam, f_alpha in [(1.05, 1), (0.95, 1), (1, 1.05), (1, 0.95), (2, 0.5)]:
        other = lg.log_evidence(stats, reg.prior_precision_ * f_lam, reg.noise_precision_ * f_alpha)
        assert other < best
    # And it is close to BayesianRidge's evidence maximiser, which differs only in
    # counting n rather than n - 1 observations for the noise and in tiny Gamma priors.
    br = BayesianRidge().fit(X, y)
    Xs = (X - X.mean(0)) / X.std(0)
    br_s = BayesianRidge().fit(Xs, (y - y.mean()) / y.std())
    np.testing.assert_allclose(reg.noise_precision_, br_s.alpha_, rtol=0.02)
    np.testing.assert_allclose(reg.predict(X), br.predict(X), rtol=0, atol=0.01 * y.std())


def test_log_evidence_equals_the_marginal_likelihood(rng):
    # Flat intercept prior as the limit of N(0, s^2), s -> infinity:
    # log p_s(y) + log(s sqrt(2 pi)) -> log evidence with the intercept integrated out.
    X = rng.normal(size=(15, 3))
    y = rng.normal(size=15)
    lam, alpha, s = 0.7, 2.5, 1e4
    cov = X @ X.T / lam + s**2 * np.ones((15, 15)) + np.eye(15) / alpha
    proper = multivariate_normal(np.zeros(15), cov).logpdf(y)
    limit = proper + np.log(s * np.sqrt(2 * np.pi))
    ours = lg.log_evidence(lg.LinearGaussianStats.from_data(X, y), lam, alpha)
    assert ours == pytest.approx(limit, abs=1e-6)


def test_posterior_equals_dense_conditioning(rng):
    X = rng.normal(size=(40, 3))
    y = rng.normal(size=40)
    lam, alpha = 1.3, 0.8
    post = lg.posterior(lg.LinearGaussianStats.from_data(X, y), lam, alpha)
    # Dense Gaussian conditioning with the intercept as a parameter of tiny precision.
    Phi = np.hstack([np.ones((40, 1)), X])
    prec = np.diag([1e-12, lam, lam, lam]) + alpha * Phi.T @ Phi
    cov = np.linalg.inv(prec)
    mean = alpha * cov @ Phi.T @ y
    np.testing.assert_allclose(post["coef_mean"], mean[1:], rtol=1e-8)
    np.testing.assert_allclose(post["coef_cov"], cov[1:, 1:], rtol=1e-8)
    np.testing.assert_allclose(post["intercept_mean"], mean[0], rtol=1e-8)
    x = rng.normal(size=(5, 3))
    m, epi, ale = lg.predictive(post, x, alpha)
    phi = np.hstack([np.ones((5, 1)), x])
    np.testing.assert_allclose(m, phi @ mean, rtol=1e-8)
    np.testing.assert_allclose(epi, np.sum(phi @ cov * phi, axis=1), rtol=1e-7)
    np.testing.assert_allclose(ale, 1 / alpha)


def test_partial_fit_is_exact_and_order_free(rng):
    X, y = _data(rng, n=240)
    parts = np.array_split(np.arange(240), 4)
    a = BayesianLinearRegressor()
    for p in parts:
        a.partial_fit(X[p], y[p])
    b = BayesianLinearRegressor().partial_fit(X[parts[0]], y[parts[0]])
    rest = np.concatenate(parts[1:][::-1])
    b.partial_fit(X[rest], y[rest])
    Xt = rng.normal(size=(20, 4))
    for u, v in zip(a.predict(Xt, return_std=True), b.predict(Xt, return_std=True)):
        np.testing.assert_allclose(u, v, rtol=1e-10)
    # Scaling is fixed by the first batch; the posterior is then exact conditioning
    # on all rows, as a fit on data already scaled the same way confirms.
    sx, sy = a.x_scaler_, a.y_scaler_
    stats = lg.LinearGaussianStats.from_data(sx.transform(X), sy.transform(y[:, None])[:, 0])
    post = lg.posterior(stats, a.prior_precision_, a.noise_precision_)
    np.testing.assert_allclose(a.posterior_["coef_mean"], post["coef_mean"], rtol=1e-10)
    np.testing.assert_allclose(a.posterior_["coef_cov"], post["coef_cov"], rtol=1e-10)


def test_failed_first_partial_fit_leaves_the_estimator_unfitted():
    from sklearn.exceptions import NotFittedError

    reg = BayesianLinearRegressor()
    with pytest.raises(ValueError, match="at least 2 samples"), pytest.warns(
            UserWarning, match="y is constant"):
        reg.partial_fit([[1.0, 2.0]], [3.0])
    with pytest.raises(NotFittedError):
        reg.predict([[0.0, 0.0]])
    # The rejected row is not remembered: the next call starts from scratch.
    X = np.random.default_rng(0).normal(size=(30, 2))
    y = X @ [1.0, -1.0] + 0.1 * np.random.default_rng(1).normal(size=30)
    reg.partial_fit(X, y)
    assert reg.stats_.n == 30
    np.testing.assert_allclose(reg.x_scaler_.mean_, X.mean(axis=0))


def _direct_log_evidence(X, y, lam, alpha):
    """log p(y) with a flat intercept, from the (n - 1)-dimensional Gaussian of
    the targets projected orthogonally to the constant (lg.log_evidence is this
    minus log(n) / 2, the flat prior's normalisation)."""
    from scipy.linalg import null_space
    from scipy.stats import multivariate_normal

    Q = null_space(np.ones((1, len(y))))
    cov = Q.T @ (X @ X.T / lam + np.eye(len(y)) / alpha) @ Q
    return multivariate_normal(np.zeros(len(y) - 1), cov).logpdf(Q.T @ y) - 0.5 * np.log(len(y))


@pytest.mark.parametrize("n, d", [(10, 12), (10, 9), (3, 5)])
def test_exact_fit_warns_that_the_noise_level_is_not_identified(n, d):
    # With n_features >= n_samples - 1 the centred inputs interpolate any
    # target: no residual is left for the noise, which the evidence (bounded:
    # its covariance tends to X X^T / lam) weighs against the prior alone.
    # The warning says so (it used to claim, wrongly, that the evidence had no
    # maximum).  A numeric noise_precision is fine.
    from sklearn.exceptions import ConvergenceWarning

    rng = np.random.default_rng(0)
    X, y = rng.normal(size=(n, d)), rng.normal(size=n)
    with pytest.warns(ConvergenceWarning, match="no residual is left to estimate the noise"):
        reg = BayesianLinearRegressor().fit(X, y)
    # the evidence is the exact one, and no grid point of the box beats it
    Xs, ys = reg.x_scaler_.transform(X), (y - reg.y_scaler_.mean_[0]) / reg.y_scaler_.scale_[0]
    lam, alpha = reg.prior_precision_, reg.noise_precision_
    # (alpha is large here: the energy written as alpha t - alpha^2 sum(r'^2 /
    # (lam + alpha e)) cancelled, an error of eps alpha t, 2e-5 at alpha 1e10)
    assert reg.log_evidence_ == pytest.approx(_direct_log_evidence(Xs, ys, lam, alpha), rel=1e-9)
    for a in np.exp(np.arange(-30.0, 31.0, 5.0)):
        for b in np.exp(np.arange(-30.0, 31.0, 5.0)):
            assert lg.log_evidence(reg.stats_, a, b) <= reg.log_evidence_ + 1e-9
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        BayesianLinearRegressor(noise_precision=1.0).fit(X, y)
        # one sample more than the inputs can fit: the noise is identified
        X2, y2 = rng.normal(size=(d + 2, d)), rng.normal(size=d + 2)
        BayesianLinearRegressor().fit(X2, y2)
    # noise-free targets in the inputs' span warn whatever n; a tiny but real
    # noise (std 1e-6 of the target's) is identified and fitted without warning
    X3 = rng.normal(size=(200, 3))
    with pytest.warns(ConvergenceWarning, match="no maximum"):
        BayesianLinearRegressor().fit(X3, X3 @ [1.0, -2.0, 0.5])
    y3 = X3 @ [1.0, -2.0, 0.5] + 2e-6 * rng.normal(size=200)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        fitted = BayesianLinearRegressor().fit(X3, y3)
    noise = np.sqrt(fitted.predict_dist(X3[:1]).aleatoric_var[0])  # original units
    assert 1e-6 < noise < 4e-6


@pytest.mark.parametrize("case", ["fewer_rows", "one_hot", "collinear"])
def test_null_directions_of_the_design_carry_no_evidence(case):
    # Rounding left U^T r of 1e-14 to 1e-10 in the design's null directions
    # (fewer rows than columns, a full one-hot encoding beside the intercept, a
    # column the sum of two others), where it is exactly 0: the evidence then
    # grew without bound towards lam -> 0, alpha -> inf, and the fit ended in
    # that corner with weights of 1e11-1e14 (fewer rows: log evidence 4.9e9
    # against the true -333; one-hot: an all-zero row predicted -6e14).
    rng = np.random.default_rng({"fewer_rows": 4, "one_hot": 8, "collinear": 0}[case])
    if case == "fewer_rows":
        X = rng.normal(size=(20, 30))
        y = X @ rng.normal(size=30) + rng.normal(size=20)
    elif case == "one_hot":  # noise-free
        cat = rng.integers(0, 4, size=200)
        X = np.c_[np.eye(4)[cat], rng.normal(size=(200, 2))]
        y = (10 * rng.normal(size=4))[cat] + X[:, 4:] @ [3.0, -2.0]
    else:
        X = rng.normal(size=(100, 3))
        X = np.c_[X, X[:, 0] + X[:, 1]]
        y = X[:, :3] @ [1.0, -1.0, 2.0] + 1e-4 * rng.normal(size=100)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # (interpolation and noise-free fits warn)
        reg = BayesianLinearRegressor().fit(X, y)
    bound = np.exp(30.0) * (1 - 1e-9)
    assert 1 / bound < reg.prior_precision_ < bound
    assert np.max(np.abs(reg.coef_)) < 100
    if case == "fewer_rows":
        Xs = reg.x_scaler_.transform(X)
        ys = (y - reg.y_scaler_.mean_[0]) / reg.y_scaler_.scale_[0]
        direct = _direct_log_evidence(Xs, ys, reg.prior_precision_, reg.noise_precision_)
        assert reg.log_evidence_ == pytest.approx(direct, rel=1e-8)
    else:  # the fit holds on the data, and a small step off them moves it little
        scale = {"one_hot": 1e-6, "collinear": 2e-4}[case]
        assert np.sqrt(np.mean((y - reg.predict(X)) ** 2)) < scale
        step = reg.predict(X + 1e-3) - reg.predict(X)
        assert np.max(np.abs(step)) < 1e-3 * np.sum(np.abs(reg.coef_)) + scale


def test_statistics_keep_their_precision_for_batches_far_from_the_first(rng):
    # Raw sums lost it in S = sum x x^T - n x_mean x_mean^T: data 1e6
    # standard deviations from the origin of the standardisation (as later
    # partial_fit batches can be) left S with a relative error of about 1e-4
    # (1.9e-4 in a reviewer's posterior mean).  Chan's merge of centred sums
    # agrees with one centred pass to rounding.
    X = rng.normal(size=(300, 3)) + 1e6
    y = X @ [1.0, -2.0, 0.5] + 0.1 * rng.normal(size=300)
    merged = (lg.LinearGaussianStats.from_data(X[:100], y[:100])
              + lg.LinearGaussianStats.from_data(X[100:200], y[100:200])
              + lg.LinearGaussianStats.from_data(X[200:], y[200:]))
    whole = lg.LinearGaussianStats.from_data(X, y)
    # (the inputs' own rounding bounds the agreement: an ulp of 1e6, 1.2e-10,
    # in each of n = 300 centred values of size ~3 gives ~1e-7 in S, r, t)
    for a, b in zip(merged.centred(), whole.centred()):
        np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-7)
    post_merged, post_whole = lg.posterior(merged, 1.0, 100.0), lg.posterior(whole, 1.0, 100.0)
    for key in ("coef_mean", "coef_cov"):  # (the intercept cancels terms of 1e6 in any case)
        np.testing.assert_allclose(post_merged[key], post_whole[key], rtol=1e-8)


def test_a_model_pickled_with_raw_sums_still_loads():
    # Statistics pickled before the centred layout (n, x_sum, y_sum, xx, xy, yy)
    X = np.array([[0.0, 1.0], [1.0, 0.0], [2.0, 2.0], [3.0, 1.0]])
    y = np.array([0.5, 1.0, 2.5, 2.0])
    old = lg.LinearGaussianStats.__new__(lg.LinearGaussianStats)
    raw = dict(n=4.0, x_sum=X.sum(0), y_sum=y.sum(), xx=X.T @ X, xy=X.T @ y, yy=y @ y)
    old.__setstate__(raw)
    for a, b in zip(old.centred(), lg.LinearGaussianStats.from_data(X, y).centred()):
        np.testing.assert_allclose(a, b, rtol=1e-14, atol=1e-14)


def test_the_higher_of_two_evidence_maxima_is_found():
    # Columns correlated 0.9999995: the evidence has an "all noise" maximum
    # (R^2 7e-10, log evidence -1421) where the search from its usual start
    # ended, beside the right one (R^2 0.9999, +3095).
    rng = np.random.default_rng(5)
    x1, z = rng.normal(size=1000), rng.normal(size=1000)
    X = np.c_[x1, x1 + 1e-3 * z]
    y = z + 0.01 * rng.normal(size=1000)
    reg = BayesianLinearRegressor().fit(X, y)
    assert reg.score(X, y) > 0.999
    assert reg.log_evidence_ > 3000
    grad = lg.log_evidence_grad(reg.stats_, reg.prior_precision_, reg.noise_precision_)
    assert np.max(np.abs(grad)) < 1e-6


def test_predictions_are_equivariant_to_target_units(rng):
    X, y = _data(rng)
    m1, s1 = BayesianLinearRegressor().fit(X, y).predict(X, return_std=True)
    m2, s2 = BayesianLinearRegressor().fit(X, 1e6 * y - 7.0).predict(X, return_std=True)
    np.testing.assert_allclose(m2, 1e6 * m1 - 7.0, rtol=1e-9)
    np.testing.assert_allclose(s2, 1e6 * s1, rtol=1e-9)


def test_predictive_parts_and_calibration(rng):
    # Data drawn from the model: the 95% interval covers 95% within 4 binomial SE.
    X, y = _data(rng, n=4000, noise=2.0)
    reg = BayesianLinearRegressor().fit(X[:2000], y[:2000])
    dist = reg.predict_dist(X[2000:])
    np.testing.assert_allclose(dist.var(), dist.epistemic_var + dist.aleatoric_var)
    np.testing.assert_allclose(np.sqrt(dist.aleatoric_var), 2.0, rtol=0.08)
    lo, hi = dist.interval(0.95)
    cover = np.mean((y[2000:] >= lo) & (y[2000:] <= hi))
    assert abs(cover - 0.95) < 4 * np.sqrt(0.95 * 0.05 / 2000)


def test_constant_and_hard_data_give_finite_positive_variances(rng):
    X, y = _data(rng, n=50)
    X[:, 1] = 3.0  # constant feature
    X = np.vstack([X, X])  # duplicated rows
    y = np.concatenate([y, y]) * 1e6
    dist = BayesianLinearRegressor().fit(X, y).predict_dist(X)
    assert np.all(np.isfinite(dist.mean())) and np.all(dist.var() > 0)
    # the constant feature is ignored: the fit without it is the same
    X_less = np.delete(X, 1, axis=1)
    ref = BayesianLinearRegressor().fit(X_less, y).predict_dist(X_less)
    np.testing.assert_allclose(dist.mean(), ref.mean(), rtol=1e-12)
    np.testing.assert_allclose(dist.var(), ref.var(), rtol=1e-12)
    # Constant target: zero variance in y, scale 1 in the scaler, still finite.
    with pytest.warns(UserWarning, match="y is constant"):
        dist = BayesianLinearRegressor().fit(X, np.full(len(X), 5.0)).predict_dist(X)
    assert np.all(np.isfinite(dist.var())) and np.allclose(dist.mean(), 5.0)


def test_pickle_round_trip_then_predict_and_partial_fit(rng):
    X, y = _data(rng)
    reg = BayesianLinearRegressor().fit(X, y)
    reg2 = pickle.loads(pickle.dumps(reg))
    for u, v in zip(reg.predict(X, return_std=True), reg2.predict(X, return_std=True)):
        np.testing.assert_array_equal(u, v)
    reg.partial_fit(X[:20], y[:20])
    reg2.partial_fit(X[:20], y[:20])
    np.testing.assert_array_equal(reg.predict(X), reg2.predict(X))


def test_a_fixed_noise_precision_fits_one_row():
    # (noise_precision="auto" needs two rows: see
    # test_failed_first_partial_fit_leaves_the_estimator_unfitted.)  One
    # row leaves every feature constant, so ignored (infinite scale), and y
    # its own scale 1: the predictive is the row's target, with at least the
    # noise variance 1, the same at every input.
    with pytest.warns(UserWarning, match="y is constant"):  # one row: scale 1
        reg = BayesianLinearRegressor(noise_precision=1.0).partial_fit([[1.0, 2.0]], [3.0])
    mean, std = reg.predict([[0.0, 0.0], [100.0, -5.0]], return_std=True)
    np.testing.assert_array_equal(mean, [3.0, 3.0])
    assert std[0] == std[1] >= 1.0


def test_linear_gaussian_strict_namespace(strict_xp, rng):
    xp, asarray = strict_xp
    X, y = rng.normal(size=(30, 3)), rng.normal(size=30)
    stats = lg.LinearGaussianStats.from_data(asarray(X), asarray(y))
    post = lg.posterior(stats, 1.0, 2.0)
    m, epi, ale = lg.predictive(post, asarray(X), 2.0)
    ref = lg.predictive(lg.posterior(lg.LinearGaussianStats.from_data(X, y), 1.0, 2.0), X, 2.0)
    assert type(m).__name__ == "StrictArray"
    np.testing.assert_allclose(np.asarray(epi), ref[1], rtol=1e-12)


def test_evidence_maximum_does_not_depend_on_the_batching():
    # The polishing root-solve reached a gradient of 1e-13 but reported no
    # success, and was thrown away: two batchings of the same data then gave
    # prior precisions 4.1115268066 and 4.1115267078 (gradient 1.8e-7).
    rng = np.random.default_rng(0)
    X = rng.normal(size=(60, 4)) * [1, 10, 0.1, 3] + [5, -3, 100, 0]
    y = X @ [1.0, -0.2, 3.0, 0.0] + 7 + 0.5 * rng.normal(size=60)
    a = BayesianLinearRegressor().partial_fit(X[:10], y[:10]).partial_fit(X[10:], y[10:])
    b = BayesianLinearRegressor()
    for rows in np.array_split(np.arange(60), 6):
        b.partial_fit(X[rows], y[rows])
    np.testing.assert_allclose([a.prior_precision_, a.noise_precision_],
                               [b.prior_precision_, b.noise_precision_], rtol=1e-11)
    grad = lg.log_evidence_grad(a.stats_, a.prior_precision_, a.noise_precision_)
    assert np.max(np.abs(grad)) < 1e-10


def test_precision_at_the_search_bound_warns_and_huge_ones_are_refused():
    # Residuals of 1.5e-7 of y's scale: the evidence would want a noise
    # precision above the search bound exp(30), so the value is the bound
    # (noise sd 2.9e-7, twice the truth) and fit says so; a precision whose
    # square overflows is refused.
    rng = np.random.default_rng(0)
    z = rng.normal(size=200)
    e = rng.normal(size=200)
    e -= e.mean()
    e -= (e @ z) / (z @ z) * z
    y = z + 1.5e-7 * e / e.std()
    with pytest.warns(ConvergenceWarning, match="search bound"):
        reg = BayesianLinearRegressor().fit(z[:, None], y)
    assert reg.noise_precision_ == pytest.approx(np.exp(30.0), rel=1e-12)
    with pytest.raises(ValueError, match="noise_precision"):
        BayesianLinearRegressor(noise_precision=1e155).fit(z[:, None], y)
    BayesianLinearRegressor(noise_precision=1e150)._validate_params()  # the bound itself


def test_precisions_stay_within_the_search_interval():
    # Pure-noise targets: the evidence keeps rising as the prior precision
    # grows (no signal), and the unbounded polishing root-solve ran past the
    # bound exp(30) (to 1e18, and 4e22 elsewhere) when accepted for its
    # smaller gradient.  The predictions do not care, the attribute does.
    for seed in range(20):
        rng = np.random.default_rng(seed)
        n, d = int(rng.integers(20, 200)), int(rng.integers(1, 8))
        X, y = rng.normal(size=(n, d)), rng.normal(size=n)
        for reg in (BayesianLinearRegressor().fit(X, y),
                    BayesianLinearRegressor().partial_fit(X[: n // 2], y[: n // 2])
                    .partial_fit(X[n // 2:], y[n // 2:])):
            for value in (reg.prior_precision_, reg.noise_precision_):
                assert np.exp(-30.0) * (1 - 1e-12) <= value <= np.exp(30.0) * (1 + 1e-12)


def test_batch_far_wider_than_the_first_is_fitted_or_warned_at_the_lower_bound():
    # y is scaled by the first partial_fit batch.  A later batch 1e6 times
    # wider sent the polishing root-solve to exp(>709) (OverflowError); one
    # 1e10 times wider wants a noise precision below the bound exp(-30),
    # which gave no warning.
    rng = np.random.default_rng(0)
    X = rng.normal(size=(50, 2))
    y = X @ [1.0, 2.0] + 0.1 * rng.normal(size=50)
    wide = y + 1e6 * rng.normal(size=50)
    reg = BayesianLinearRegressor().partial_fit(X, y).partial_fit(X, wide)
    lam, alpha = reg.prior_precision_, reg.noise_precision_
    best = lg.log_evidence(reg.stats_, lam, alpha)
    for factor in (0.99, 1.01):  # a maximum, not a point the search stopped at
        assert lg.log_evidence(reg.stats_, lam, alpha * factor) < best
        # (the noise swamps the slope: the evidence is flat in the prior to 1e-15)
        assert lg.log_evidence(reg.stats_, lam * factor, alpha) < best + 1e-12 * abs(best)
    with pytest.warns(ConvergenceWarning, match="search bound .* understates the noise"):
        reg = BayesianLinearRegressor().partial_fit(X, y).partial_fit(X, y + 1e10 * wide)
    assert reg.noise_precision_ == pytest.approx(np.exp(-30.0), rel=1e-9, abs=0)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a numeric noise precision: nothing to warn of
        BayesianLinearRegressor(noise_precision=1e-20).partial_fit(X, y).partial_fit(X, wide)
