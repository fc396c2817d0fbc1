"""VBNNRegressor: scikit-learn behaviour, restarts, node selection, SVI, hard data."""

import copy
import warnings

import numpy as np
import pytest
from sklearn.exceptions import ConvergenceWarning
from sklearn.model_selection import GridSearchCV
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler
from sklearn.utils.estimator_checks import parametrize_with_checks

from skbayesnn import VBNNRegressor
from skbayesnn.distributions import GaussianMixturePredictive, NormalPredictive
from skbayesnn.metrics import neg_nlpd_scorer, regression_calibration_error

FAST = dict(hidden_layer_sizes=(6,), max_iter=25)


@parametrize_with_checks([VBNNRegressor(**FAST)])
def test_sklearn_compatible_estimator(estimator, check):
    check(estimator)


def _toy(rng, n=150, noise=0.1, p=2):
    X = rng.uniform(-2, 2, size=(n, p))
    y = np.sin(2 * X[:, 0]) + 0.5 * X[:, 1] + noise * rng.normal(size=n)
    return X, y


def test_learns_a_smooth_function_with_calibrated_noise(rng):
    X, y = _toy(rng, n=300)
    Xt, yt = _toy(rng, n=5000)
    reg = VBNNRegressor((20,), random_state=0).fit(X, y)
    dist = reg.predict_dist(Xt)
    rmse = np.sqrt(np.mean((dist.mean() - yt) ** 2))
    assert rmse < 0.2  # noise sd 0.1, signal sd ~0.9
    np.testing.assert_allclose(dist.var(), dist.epistemic_var + dist.aleatoric_var)
    assert 0.05**2 < np.median(dist.aleatoric_var) < 0.2**2
    # calibrated on both sides (5000 rows: coverage sd ~0.003): an epistemic
    # variance 25 times too large had passed the one-sided check (coverage 1.0)
    inside = np.abs(yt - dist.mean()) < 1.96 * dist.std()
    assert 0.93 < inside.mean() < 0.985
    assert regression_calibration_error(yt, dist) < 0.06
    mean, std = reg.predict(Xt, return_std=True)
    np.testing.assert_allclose(mean, dist.mean())
    np.testing.assert_allclose(std, dist.std())
    # The ELBO history is that of the run; the bound rises overall.
    assert reg.elbo_history_[-1] > reg.elbo_history_[0]


def test_random_state_reproduces_and_restarts_run_in_parallel_identically(rng):
    X, y = _toy(rng, n=80)
    kw = dict(hidden_layer_sizes=(5,), max_iter=15, n_restarts=3, random_state=4)
    a = VBNNRegressor(**kw).fit(X, y)
    b = VBNNRegressor(n_jobs=2, **kw).fit(X, y)
    np.testing.assert_array_equal(a.elbos_, b.elbos_)
    np.testing.assert_array_equal(a.predict(X), b.predict(X))
    assert len(set(np.round(a.elbos_, 6))) == 3  # different starts


def test_restart_weights_and_mixture_moments(rng):
    X, y = _toy(rng, n=80)
    reg = VBNNRegressor((5,), max_iter=15, n_restarts=3, ensemble_temperature=0.05, random_state=1)
    reg.fit(X, y)
    logits = 0.05 * reg.elbos_
    expected = np.exp(logits - logits.max()) / np.exp(logits - logits.max()).sum()
    np.testing.assert_allclose(reg.weights_, expected)
    dist = reg.predict_dist(X[:7])
    assert isinstance(dist, GaussianMixturePredictive)
    # Each member alone: the same model with one state.
    singles = []
    for state in reg.members_:
        one = copy.deepcopy(reg)
        one.members_, one.weights_ = [state], np.ones(1)
        singles.append(one.predict_dist(X[:7]))
    means = np.stack([s.mean() for s in singles], axis=-1)
    variances = np.stack([s.var() for s in singles], axis=-1)
    mix_mean = means @ reg.weights_
    mix_var = variances @ reg.weights_ + (means**2) @ reg.weights_ - mix_mean**2
    np.testing.assert_allclose(dist.mean(), mix_mean, rtol=1e-10)
    np.testing.assert_allclose(dist.var(), mix_var, rtol=1e-10)
    np.testing.assert_allclose(
        dist.aleatoric_var, np.stack([s.aleatoric_var for s in singles], -1) @ reg.weights_
    )


def test_sampling_matches_the_predictive(rng):
    X, y = _toy(rng, n=100)
    reg = VBNNRegressor((6,), max_iter=20, random_state=0).fit(X, y)
    dist = reg.predict_dist(X[:3])
    draws = reg.sample_predictive(X[:3], n_samples=20_000, random_state=0)
    assert draws.shape == (20_000, 3)
    from skbayesnn._testing import assert_mc_close, mc_moments

    mean, var, se_mean, se_var = mc_moments(draws)
    assert_mc_close(dist.mean(), mean, se_mean, what="mean")
    assert_mc_close(dist.var(), var, se_var, what="variance")
    again = reg.sample_predictive(X[:3], n_samples=5, random_state=0)
    np.testing.assert_array_equal(again, reg.sample_predictive(X[:3], n_samples=5, random_state=0))
    # a Generator is used directly: the same seed, the same draws; it advances
    a = reg.sample_predictive(X[:3], n_samples=5, random_state=np.random.default_rng(7))
    g = np.random.default_rng(7)
    np.testing.assert_array_equal(reg.sample_predictive(X[:3], n_samples=5, random_state=g), a)
    assert not np.array_equal(reg.sample_predictive(X[:3], n_samples=5, random_state=g), a)
    for bad, error in ((0, ValueError), (-1, ValueError), (2.5, TypeError), ("3", TypeError)):
        with pytest.raises(error, match="n_samples"):
            reg.sample_predictive(X[:3], n_samples=bad)


def test_multi_output(rng):
    X = rng.uniform(-2, 2, size=(120, 2))
    Y = np.column_stack([np.sin(2 * X[:, 0]), 100 * X[:, 1]]) + 0.1 * rng.normal(size=(120, 2))
    reg = VBNNRegressor((20,), max_iter=150, random_state=0).fit(X, Y)
    dist = reg.predict_dist(X)
    assert dist.mean().shape == dist.var().shape == (120, 2)
    # Both outputs are learned, each on its own scale (R^2 > 0.9), and the noise
    # estimates follow the scales (both have noise sd 0.1).
    r2 = 1 - np.mean((dist.mean() - Y) ** 2, axis=0) / Y.var(axis=0)
    assert np.all(r2 > 0.9)
    assert dist.aleatoric_var[0, 1] > 10 * dist.aleatoric_var[0, 0]


def test_pipeline_and_grid_search_with_nlpd(rng):
    X, y = _toy(rng, n=90)
    pipe = make_pipeline(StandardScaler(), VBNNRegressor(**FAST, random_state=0))
    assert pipe.fit(X, y).predict(X).shape == (90,)
    search = GridSearchCV(
        VBNNRegressor(**FAST, random_state=0),
        {"temperature": [0.05, 0.5]},
        scoring=neg_nlpd_scorer,
        cv=3,
    ).fit(X, y)
    # the search's scores are each setting's NLPD on the folds, fitted by hand
    from sklearn.model_selection import KFold

    by_hand = [
        np.mean([
            neg_nlpd_scorer(VBNNRegressor(**FAST, temperature=t, random_state=0)
                            .fit(X[tr], y[tr]), X[te], y[te])
            for tr, te in KFold(3).split(X)
        ])
        for t in (0.05, 0.5)
    ]
    np.testing.assert_allclose(search.cv_results_["mean_test_score"], by_hand, rtol=1e-12)
    assert search.best_params_ == {"temperature": (0.05, 0.5)[int(np.argmax(by_hand))]}


@pytest.mark.parametrize("shrinkage", ["student_t", "laplace", "nig", "gaussian"])
def test_every_prior_family_fits(shrinkage, rng):
    # CAVI never lowers the ELBO between iterations, and the fit explains most
    # of the variance (the Gaussian prior, the paper's GVBNN, fits least well).
    X, y = _toy(rng, n=100)
    reg = VBNNRegressor((8,), shrinkage=shrinkage, max_iter=150, random_state=0).fit(X, y)
    assert np.sqrt(np.mean((reg.predict(X) - y) ** 2)) < 0.7 * y.std()
    assert np.all(np.diff(reg.elbo_history_[1:]) > -1e-8 * np.abs(reg.elbo_history_[2:]))


def test_node_selection_keeps_a_subset_of_units_and_predicts_nearly_the_same(rng):
    # y depends on x0 only; x1..x4 are noise.  At fdr=0.01 the sparse model keeps
    # a strict subset of the units and x0, and predicts within 3% RMSE.  (The
    # noise inputs are usually kept too: their weights' sign probabilities are
    # near 1 here, so this does not test that irrelevant inputs are dropped.)
    X = rng.normal(size=(250, 5))
    y = np.sin(1.5 * X[:, 0]) + 0.1 * rng.normal(size=250)
    reg = VBNNRegressor((12,), random_state=0).fit(X, y)
    sparse = reg.select_nodes(fdr=0.01)
    assert sparse.selected_features_[0]
    assert sparse.n_units_[0][0] < 12
    masks = sparse.kept_masks_[0]
    assert masks[0].shape == (12, 5) and masks[1].shape == (1, 12)
    # Kept units have both incoming and outgoing weights.
    alive = masks[0].any(axis=1)
    np.testing.assert_array_equal(alive, masks[1].any(axis=0))
    assert alive.sum() == sparse.n_units_[0][0]
    Xt = rng.normal(size=(300, 5))
    yt = np.sin(1.5 * Xt[:, 0]) + 0.1 * rng.normal(size=300)
    full_rmse = np.sqrt(np.mean((reg.predict(Xt) - yt) ** 2))
    sparse_rmse = np.sqrt(np.mean((sparse.predict(Xt) - yt) ** 2))
    assert sparse_rmse < 1.03 * full_rmse
    # The original model is untouched.
    assert len(reg.members_[0].m[0]) == 12
    # A sparse copy is not selected again (its masks and inputs are in the pruned
    # layout), and refitting it gives a plain model without the stale selection.
    with pytest.raises(ValueError, match="already a sparse copy"):
        sparse.select_nodes(fdr=0.01)
    sparse.fit(X[:, :3], y)
    assert sparse.n_features_in_ == 3
    for name in ("selected_features_", "kept_masks_", "n_units_", "thresholds_"):
        assert not hasattr(sparse, name)
    assert sparse.select_nodes(fdr=0.01).selected_features_.shape == (3,)


def test_fdr_threshold_is_the_running_mean_rule():
    from skbayesnn.inference.vbnn.selection import fdr_threshold

    q = np.array([1.0, 0.999, 0.99, 0.97, 0.9, 0.6])
    # running mean of 1 - q: 0, .0005, .0037, .0103, ...
    assert fdr_threshold(q, 0.01) == 0.99
    assert fdr_threshold(q, 0.011) == 0.97
    assert fdr_threshold(q[::-1], 0.01) == 0.99  # order does not matter
    assert fdr_threshold(np.array([0.6, 0.7]), 0.01) == np.inf


def test_svi_stays_close_to_cavi_at_the_same_passes(rng):
    # SVI on mini-batches of 100 reaches an accuracy close to full CAVI's with
    # the same number of passes over the data (8 passes: neither reaches the
    # noise level, 0.1, yet).
    X, y = _toy(rng, n=1000)
    Xt, yt = _toy(rng, n=300)
    kw = dict(hidden_layer_sizes=(20,), max_iter=8, random_state=0)
    svi = VBNNRegressor(solver="svi", batch_size=100, **kw).fit(X, y)
    full = VBNNRegressor(**kw).fit(X, y)
    rmse_svi = np.sqrt(np.mean((svi.predict(Xt) - yt) ** 2))
    rmse_full = np.sqrt(np.mean((full.predict(Xt) - yt) ** 2))
    assert rmse_svi < 1.5 * rmse_full
    assert rmse_svi < 0.5 * yt.std()
    assert len(svi.elbo_history_) == svi.n_iter_ <= 8


def test_hard_data_gives_finite_positive_variances(rng):
    # Targets scaled by 1e6, a constant feature, duplicated rows, many iterations.
    X, y = _toy(rng, n=60)
    X = np.column_stack([X, np.full(60, 3.0)])
    X = np.vstack([X, X[:20]])
    y = 1e6 * np.concatenate([y, y[:20]])
    reg = VBNNRegressor((8,), max_iter=300, tol=0.0, random_state=0).fit(X, y)
    dist = reg.predict_dist(X)
    assert np.all(np.isfinite(dist.mean())) and np.all(dist.var() > 0)
    # and the fit is the one of y / 1e6 in y's units (standardisation)
    small = VBNNRegressor((8,), max_iter=300, tol=0.0, random_state=0).fit(X, y / 1e6)
    small = small.predict_dist(X)
    np.testing.assert_allclose(dist.mean(), 1e6 * small.mean(), rtol=1e-8, atol=1e-8 * np.std(y))
    np.testing.assert_allclose(dist.std(), 1e6 * small.std(), rtol=1e-8)
    assert np.all(np.isfinite(reg.elbo_history_))
    for state in reg.members_:
        for B, beta in zip(state.B, state.beta):
            assert np.all(np.linalg.eigvalsh(B) > 0)
            assert np.all(beta > 0)


def test_bad_parameters_are_rejected(rng):
    X, y = _toy(rng, n=20)
    with pytest.raises(ValueError, match="noise_prior"):
        VBNNRegressor(noise_prior=(1.0, 0.1)).fit(X, y)
    with pytest.raises(ValueError, match="fdr"):
        VBNNRegressor(**FAST).fit(X, y).select_nodes(fdr=1.5)


def test_single_restart_predictive_is_gaussian(rng):
    # One restart: the Gaussian of the closed-form predictive moments (vbnn.md
    # §10.2) of the fitted state, in the target's units.
    from skbayesnn.inference.vbnn import predict

    X, y = _toy(rng, n=40)
    model = VBNNRegressor(**FAST, random_state=0).fit(X, y)
    dist = model.predict_dist(X)
    assert isinstance(dist, NormalPredictive)
    test, _ = predict.local_state(model.members_[0], model.x_scaler_.transform(X),
                                  max_iter=model.predict_max_iter, tol=model.predict_tol)
    mean, epistemic, aleatoric = predict.predictive_moments(test)
    s_y, m_y = model.y_scaler_.scale_[0], model.y_scaler_.mean_[0]
    np.testing.assert_allclose(dist.mean(), m_y + s_y * mean[:, 0], rtol=1e-12)
    np.testing.assert_allclose(dist.epistemic_var, s_y**2 * epistemic[:, 0], rtol=1e-12)
    np.testing.assert_allclose(dist.aleatoric_var, s_y**2 * aleatoric[:, 0], rtol=1e-12)


@pytest.mark.parametrize("solver", ["cavi", "svi"])
def test_fitted_model_keeps_no_per_row_arrays(rng, solver):
    # The per-row factors and moments of the training rows (O(N L D^2) memory:
    # E[a~ a~^T] is (N, D+1, D+1) per layer) are dropped after fit, also when
    # pruned, so a fitted model's size does not grow with the training set.
    import pickle

    def size(n):
        X = rng.normal(size=(n, 2))
        y = np.sin(X[:, 0]) + 0.1 * rng.normal(size=n)
        model = VBNNRegressor((6,), solver=solver, max_iter=3, random_state=0).fit(X, y)
        return (len(pickle.dumps(model)), len(pickle.dumps(model.select_nodes(fdr=0.5))))

    small, large = size(50), size(2000)
    for a, b in zip(small, large):
        assert abs(a - b) < 0.05 * a, (small, large)


def test_aleatoric_variance_is_the_inverse_gamma_mean(rng):
    # The predictive noise is E[eta^2] of q(eta^2) = IG(alpha, beta), i.e.
    # beta / (alpha - 1) (vbnn.md §10.1), in the target's units: checked against
    # scipy's inverse gamma, so an off-by-one (beta / alpha, 2% here) fails.
    from scipy import stats

    X = rng.normal(size=(80, 2))
    y = np.sin(X[:, 0]) + 0.2 * rng.normal(size=80)
    model = VBNNRegressor((5,), max_iter=5, random_state=0).fit(X, y)
    state = model.members_[0]
    expected = stats.invgamma(state.alpha[-1], scale=state.beta[-1]).mean()
    expected = expected * model.y_scaler_.scale_[0] ** 2
    dist = model.predict_dist(X[:4])
    np.testing.assert_allclose(dist.aleatoric_var, np.broadcast_to(expected, (4,)), rtol=1e-12)


def test_each_output_gets_its_own_data_driven_noise_prior():
    # noise_prior=None sets beta0 from a linear fit's residual variance; with
    # several outputs the worst output's set every output's prior, and a
    # nearly linear output got a noise sd 23 times its own (10.2 against
    # 0.45, training RMSE doubled).  Each output's noise now stays within a
    # factor 1.5 of a fit on that output alone (the joint fit shares hidden
    # units, so not equal).
    rng = np.random.default_rng(0)
    X = rng.uniform(-2, 2, size=(80, 2))
    Y = np.column_stack([np.sin(2 * X[:, 0]), 100 * X[:, 1] + 5]) + 0.1 * rng.normal(size=(80, 2))
    joint = VBNNRegressor(hidden_layer_sizes=(6,), random_state=0).fit(X, Y)
    sd = np.sqrt(joint.predict_dist(X[:1]).aleatoric_var[0])
    for k in range(2):
        alone = VBNNRegressor(hidden_layer_sizes=(6,), random_state=0).fit(X, Y[:, k])
        sd_alone = np.sqrt(alone.predict_dist(X[:1]).aleatoric_var[0])
        assert 1 / 1.5 < sd[k] / sd_alone < 1.5, (k, sd[k], sd_alone)


@pytest.mark.parametrize("n, batch_size, sizes", [(199, 100, [100, 99]), (201, 100, [67, 67, 67]),
                                                  (50, 100, [50])])
def test_svi_epoch_visits_every_row_once(rng, monkeypatch, n, batch_size, sizes):
    # max_iter counts passes over the data: an epoch's batches cover every row
    # once, at most batch_size each (the last partial batch used to be dropped:
    # with 199 rows an epoch saw 100).
    from skbayesnn.inference.vbnn import svi

    seen, step = [], svi.svi_step

    def spy(state, X, Y, *args, **kwargs):
        seen.append(X.shape[0])
        return step(state, X, Y, *args, **kwargs)

    monkeypatch.setattr(svi, "svi_step", spy)
    X = rng.uniform(-2, 2, (n, 2))
    reg = VBNNRegressor(hidden_layer_sizes=(3,), solver="svi", batch_size=batch_size, max_iter=2,
                        tol=0.0, n_init=1, random_state=0).fit(X, np.sin(2 * X[:, 0]))
    assert reg.n_iter_ == 2 and seen == sizes * 2


def test_a_fit_stopped_by_max_iter_warns(rng):
    # As sklearn's iterative estimators: converged_ False for a restart means
    # a ConvergenceWarning naming max_iter and tol; a converged fit is silent.
    from sklearn.exceptions import ConvergenceWarning

    X = rng.uniform(-2, 2, size=(80, 2))
    y = np.sin(2 * X[:, 0]) + 0.1 * rng.normal(size=80)
    with pytest.warns(ConvergenceWarning, match=r"2 of 2 restart\(s\) stopped at max_iter=3"):
        model = VBNNRegressor((6,), max_iter=3, n_restarts=2, random_state=0).fit(X, y)
    assert not np.any(model.converged_)
    with warnings.catch_warnings():
        warnings.simplefilter("error", ConvergenceWarning)
        model = VBNNRegressor((6,), tol=1e-2, random_state=0).fit(X, y)
    assert np.all(model.converged_)


def test_deep_network_predictions_are_those_of_the_converged_local_cavi():
    # A test row's local CAVI approaches its fixed point while its local ELBO
    # (of size ~50) barely moves: with the paper's relative tolerance 1e-4 the
    # rows of this (10, 10, 10) network stopped after ~12 iterations with
    # predictive means up to 0.6 sd from the converged ones (3% of the rows
    # beyond 0.1 sd).  The default stops within 0.05 sd of the fixed point
    # (measured 0.008 sd), reached by 3000 iterations at tolerance 1e-13.
    rng = np.random.default_rng(1)
    X = rng.uniform(-2, 2, (300, 2))
    y = 0.1 * X[:, 0] ** 2 + 10 * np.sin(X[:, 0]) + 0.5 * rng.normal(size=300)
    Xt = rng.uniform(-2, 2, (300, 2))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # (stopped at max_iter: the fit is not the point)
        model = VBNNRegressor((10, 10, 10), random_state=0, max_iter=100, n_init=3).fit(X, y)
    mean, std = model.predict(Xt, return_std=True)
    model.set_params(predict_max_iter=3000, predict_tol=1e-13)
    converged, converged_std = model.predict(Xt, return_std=True)
    assert np.max(np.abs(mean - converged) / std) < 0.05
    np.testing.assert_allclose(std, converged_std, rtol=0.05)


def test_under_em_the_prior_scales_are_only_starting_values():
    # The docstrings of prior_scale and local_scale: a weight's prior depends
    # on the two only through their product, and EM (em_global=True, the
    # student_t default) re-estimates the global hyperparameter, so either is
    # a starting value (here the fits agree with the default to 1e-3 sd and
    # with each other to 1e-6 sd); without EM the scale is the prior's (a
    # change of ~0.09 sd), and the gaussian family has no EM (6.8 sd).
    rng = np.random.default_rng(0)
    X = rng.normal(size=(120, 3))
    y = np.sin(X[:, 0]) + 0.3 * X[:, 1] + 0.1 * rng.normal(size=120)
    kw = dict(hidden_layer_sizes=(6,), random_state=0, max_iter=60)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        mean, std = VBNNRegressor(**kw).fit(X, y).predict(X, return_std=True)
        shifts = {}
        for name, params in (("prior", dict(prior_scale=1e-3)), ("local", dict(local_scale=1e-3)),
                             ("fixed", dict(prior_scale=1e-3, em_global=False))):
            shifts[name] = VBNNRegressor(**kw, **params).fit(X, y).predict(X) - mean
        gaussian = VBNNRegressor(shrinkage="gaussian", **kw)
        shifts["gaussian"] = (gaussian.set_params(prior_scale=1e-3).fit(X, y).predict(X)
                              - gaussian.set_params(prior_scale=None).fit(X, y).predict(X))
    assert np.max(np.abs(shifts["prior"]) / std) < 1e-3
    assert np.max(np.abs(shifts["prior"] - shifts["local"]) / std) < 1e-6
    assert np.max(np.abs(shifts["fixed"]) / std) > 0.05
    assert np.max(np.abs(shifts["gaussian"]) / std) > 1.0


def test_prediction_in_chunks_equals_all_rows_at_once(rng, monkeypatch):
    # The rows' local CAVIs are independent: predicting in chunks (memory
    # bounded by the chunk, not the number of test rows) changes nothing.
    import skbayesnn.vbnn as vbnn_module

    X = rng.normal(size=(80, 2))
    y = np.sin(X[:, 0]) + 0.1 * rng.normal(size=80)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = VBNNRegressor((4, 3), n_restarts=2, random_state=0, max_iter=20).fit(X, y)
    whole = model.predict_dist(X)
    monkeypatch.setattr(vbnn_module, "_PREDICT_CHUNK", 7)
    chunked = model.predict_dist(X)
    for name in ("mean", "var"):
        np.testing.assert_allclose(getattr(chunked, name)(), getattr(whole, name)(), rtol=1e-13)
    np.testing.assert_allclose(chunked.epistemic_var, whole.epistemic_var, rtol=1e-12)


def test_prediction_chunks_shrink_with_the_widest_layer(rng, monkeypatch):
    # A chunk holds (rows, D + 1, D + 1) arrays, D the widest layer, inputs
    # included: 1024 rows of 300 inputs had peaked at 2.4 GB.  The chunk's
    # rows follow a byte budget, and the chunks' results are the whole's.
    import skbayesnn.vbnn as vbnn_module

    X = rng.normal(size=(60, 40))
    y = X[:, 0] + 0.1 * rng.normal(size=60)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = VBNNRegressor((3,), random_state=0, max_iter=5).fit(X, y)
    state = model.members_[0]
    assert vbnn_module._chunk_rows(state) == 1024  # 41 x 41 within the budget
    monkeypatch.setattr(vbnn_module, "_PREDICT_CHUNK_BYTES", 8 * 41 * 41 * 9)
    assert vbnn_module._chunk_rows(state) == 9
    monkeypatch.setattr(vbnn_module, "_PREDICT_CHUNK_BYTES", 1)
    assert vbnn_module._chunk_rows(state) == 1
    monkeypatch.setattr(vbnn_module, "_PREDICT_CHUNK_BYTES", 8 * 41 * 41 * 9)
    chunked = model.predict_dist(X)
    monkeypatch.setattr(vbnn_module, "_PREDICT_CHUNK_BYTES", 2**40)
    whole = model.predict_dist(X)
    np.testing.assert_allclose(chunked.mean(), whole.mean(), rtol=1e-13)
    np.testing.assert_allclose(chunked.var(), whole.var(), rtol=1e-12)


def test_a_sparse_copy_refitted_warns_that_it_fits_the_full_network(rng):
    # The selection is not a parameter: fitting the copy again brought back
    # every unit without a word (and clone or cross_val_score of it do too).
    X = rng.normal(size=(80, 3))
    y = np.sin(X[:, 0]) + 0.1 * rng.normal(size=80)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        full = VBNNRegressor((6,), random_state=0, max_iter=20).fit(X, y)
        sparse = full.select_nodes(0.5)
        with pytest.warns(UserWarning, match="select_nodes trains the full network"):
            sparse.fit(X, y)
    assert not hasattr(sparse, "selected_features_")


def test_draws_that_overflow_are_refused_as_predictions_are(rng):
    X = rng.normal(size=(60, 2))
    y = X[:, 0] + 0.1 * rng.normal(size=60)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        model = VBNNRegressor((6,), random_state=0, max_iter=20).fit(X, y)
    with pytest.raises(ValueError, match="not finite"):
        model.sample_predictive(X * 1e155, random_state=0)
    with pytest.raises(ValueError):
        model.predict(X * 1e155)
    # two hidden layers at 1e300: a raw FloatingPointError of the local CAVI
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        deep = VBNNRegressor((6, 5), random_state=0, max_iter=10).fit(X, y)
    with pytest.raises(ValueError, match="far outside the training scale"):
        deep.predict(X * 1e300)


def test_sampling_in_chunks_shares_each_draws_output_weights(monkeypatch):
    # sample_predictive fits the rows' local factors chunk by chunk (all rows
    # at once took 6 times predict's memory); each draw's output weights and
    # noise stay shared by all rows, so two equal rows in different chunks
    # keep the correlation they have unchunked (independent weights per
    # chunk would make it ~0).  Monte Carlo: 4000 draws, the correlation's
    # standard error ~0.015.
    import skbayesnn.vbnn as vbnn_module

    rng = np.random.default_rng(0)
    X = rng.normal(size=(30, 2))
    y = X[:, 0] + 0.05 * rng.normal(size=30)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        model = VBNNRegressor((4,), random_state=0, max_iter=50).fit(X, y)
    X_test = 3 * rng.normal(size=(8, 2))
    X_test = np.vstack([X_test, X_test[:1]])  # row 8 = row 0
    whole = model.sample_predictive(X_test, 4000, random_state=1)
    monkeypatch.setattr(vbnn_module, "_PREDICT_CHUNK_BYTES", 800)  # 4 rows per chunk
    assert vbnn_module._chunk_rows(model.members_[0]) == 4
    chunked = model.sample_predictive(X_test, 4000, random_state=1)
    corr = [np.corrcoef(d[:, 0], d[:, 8])[0, 1] for d in (whole, chunked)]
    assert corr[0] > 0.2 and abs(corr[1] - corr[0]) < 0.06
    dist = model.predict_dist(X_test)
    assert np.all(np.abs(chunked.mean(axis=0) - dist.mean()) < 4 * dist.std() / np.sqrt(4000))
    np.testing.assert_allclose(chunked.std(axis=0), dist.std(), rtol=0.06)


def test_noise_prior_default_where_a_linear_fit_interpolates(rng):
    # With n_samples <= n_features + 1 the linear fit's residual variance, a
    # quarter of which is beta0, is rounding: beta0 sat on its floor 1e-4
    # and the noise sd came out 0.0085 for targets of sd 0.19.  A quarter of
    # y's variance takes its place, with a warning.
    X = rng.uniform(-2, 2, size=(3, 3))
    y = np.sin(2 * X[:, 0]) + 0.3 * X[:, 1] + 0.1 * rng.normal(size=3)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        model = VBNNRegressor((4,), random_state=0, max_iter=50).fit(X, y)
    assert any("interpolates the data" in str(w.message) for w in caught)
    assert model.predict_dist(X[:1]).aleatoric_var[0] > (0.25 * y.std()) ** 2
    with warnings.catch_warnings():  # more rows than that: the fit's residual, no warning
        warnings.simplefilter("error", UserWarning)
        warnings.simplefilter("ignore", ConvergenceWarning)
        X5 = rng.uniform(-2, 2, size=(5, 3))
        VBNNRegressor((4,), random_state=0, max_iter=5).fit(X5, X5[:, 0] + rng.normal(size=5))


def test_a_cholesky_that_returns_nan_raises_as_numpys_does():
    # CuPy's cholesky returns NaN for a matrix that is not positive definite,
    # where NumPy raises LinAlgError: the predictive's draws had then been NaN
    # on a GPU only.  Both raise now.
    from types import SimpleNamespace

    from skbayesnn.inference.vbnn.predict import _cholesky

    bad = np.array([[1.0, 2.0], [2.0, 1.0]])
    nan_linalg = SimpleNamespace(cholesky=lambda a: np.full_like(a, np.nan))
    like_cupy = SimpleNamespace(linalg=nan_linalg, all=np.all, isfinite=np.isfinite)
    for xp in (np, like_cupy):
        with pytest.raises(np.linalg.LinAlgError):
            _cholesky(xp, bad)
    good = np.array([[2.0, 1.0], [1.0, 2.0]])
    np.testing.assert_allclose(_cholesky(np, good) @ _cholesky(np, good).T, good)
