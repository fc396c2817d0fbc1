"""The shared base estimator, exercised through BayesianLinearRegressor."""

import warnings

import numpy as np
import pytest
from sklearn.base import clone, is_classifier
from sklearn.exceptions import ConvergenceWarning, DataConversionWarning
from sklearn.model_selection import GridSearchCV, cross_val_score
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import PolynomialFeatures
from sklearn.utils._param_validation import InvalidParameterError
from sklearn.utils.estimator_checks import parametrize_with_checks

from skbayesnn import (
    BayesianLinearRegressor,
    MessagePassingClassifier,
    MessagePassingRegressor,
    PBPRegressor,
    TAGIClassifier,
    TAGIRegressor,
    VBNNRegressor,
)
from skbayesnn import _backend
from skbayesnn.metrics import neg_nlpd_scorer

ESTIMATORS = [BayesianLinearRegressor()]


@parametrize_with_checks(ESTIMATORS)
def test_sklearn_compatible_estimator(estimator, check):
    check(estimator)


def _data(rng, n=200, d=3):
    X = rng.normal(size=(n, d))
    return X, X @ np.arange(1.0, d + 1) + 0.3 * rng.normal(size=n)


def test_pipeline_and_cross_val_score(rng):
    x = rng.uniform(-2, 2, size=(300, 1))
    y = x[:, 0] ** 3 - x[:, 0] + 0.2 * rng.normal(size=300)
    pipe = make_pipeline(PolynomialFeatures(3), BayesianLinearRegressor())
    pipe.fit(x, y)
    mean, std = pipe.predict(x, return_std=True)
    # The cubic basis holds the truth: residual RMSE near the noise level 0.2.
    assert np.sqrt(np.mean((mean - y) ** 2)) < 0.25
    assert np.all(std > 0.15) and np.all(std < 0.4)
    scores = cross_val_score(pipe, x, y, cv=3, scoring=neg_nlpd_scorer)
    linear = cross_val_score(BayesianLinearRegressor(), x, y, cv=3, scoring=neg_nlpd_scorer)
    assert scores.mean() > linear.mean()


def test_grid_search_with_nlpd_picks_the_better_setting(rng):
    X, y = _data(rng)
    # prior_precision=1e6 shrinks every weight to ~0 and explains nothing.
    grid = GridSearchCV(
        BayesianLinearRegressor(noise_precision="auto"),
        {"prior_precision": [1e6, 1.0]},
        scoring=neg_nlpd_scorer,
        cv=3,
    ).fit(X, y)
    assert grid.best_params_ == {"prior_precision": 1.0}
    assert np.all(np.isfinite(grid.cv_results_["mean_test_score"]))


@pytest.mark.parametrize(
    "X, y, match",
    [
        ([[1.0, np.nan], [2.0, 3.0], [0.0, 1.0]], [1.0, 2.0, 3.0], "NaN"),
        ([[1.0, np.inf], [2.0, 3.0], [0.0, 1.0]], [1.0, 2.0, 3.0], "infinity"),
        ([[1.0, 2.0], [2.0, 3.0], [0.0, 1.0]], [1.0, np.nan, 3.0], "NaN"),
        ([[1.0, 2.0], [2.0, 3.0]], [1.0, 2.0, 3.0], "inconsistent numbers of samples"),
        ([[1.0, 2.0]], [1.0], "minimum of 2 is required"),
        ([1.0, 2.0, 3.0], [1.0, 2.0, 3.0], "Expected 2D array"),
        (
            [[1.0, 2.0], [2.0, 3.0], [0, 1]],
            [[1.0, 2.0], [2.0, 3.0], [3, 4]],
            "y should be a 1d array",
        ),
        ([["a", "b"], ["c", "d"]], [1.0, 2.0], "could not convert|numeric"),
    ],
)
def test_bad_training_input_raises_a_clear_error(X, y, match):
    with pytest.raises(ValueError, match=match):
        BayesianLinearRegressor().fit(X, y)


def test_bad_prediction_input(rng):
    X, y = _data(rng)
    reg = BayesianLinearRegressor().fit(X, y)
    with pytest.raises(ValueError, match="features"):
        reg.predict(X[:, :2])
    with pytest.raises(ValueError, match="NaN"):
        reg.predict(np.full((2, 3), np.nan))
    with pytest.raises(ValueError, match="features"):
        reg.partial_fit(X[:, :2], y)


@pytest.mark.parametrize("device", ["gpu", "CUDA", 0, None])
def test_bad_device_is_rejected_at_fit(rng, device):
    X, y = _data(rng)
    with pytest.raises((ValueError, TypeError), match="'device' parameter"):
        BayesianLinearRegressor(device=device).fit(X, y)


def test_cuda_device_without_gpu_raises(rng, monkeypatch):
    monkeypatch.setattr(_backend, "_import_cupy", lambda: None)
    X, y = _data(rng)
    with pytest.raises(_backend.DeviceUnavailableError, match="CuPy"):
        BayesianLinearRegressor(device="cuda").fit(X, y)
    reg = BayesianLinearRegressor(device="auto").fit(X, y)
    assert reg.device_ == "cpu"


def test_bad_hyperparameters_are_rejected(rng):
    X, y = _data(rng)
    for bad in (-1.0, 0.0, "fixed", np.nan):
        with pytest.raises(ValueError, match="prior_precision"):
            BayesianLinearRegressor(prior_precision=bad).fit(X, y)


def test_predict_dist_units_and_return_std(rng):
    X, y = _data(rng)
    reg = BayesianLinearRegressor().fit(X, 100 * y + 50)
    dist = reg.predict_dist(X)
    mean, std = reg.predict(X, return_std=True)
    np.testing.assert_array_equal(mean, dist.mean())
    np.testing.assert_array_equal(std, dist.std())
    np.testing.assert_allclose(std**2, dist.epistemic_var + dist.aleatoric_var, rtol=1e-12)
    assert mean.shape == (200,) and abs(np.mean(mean) - np.mean(100 * y + 50)) < 1e-6 * 100


_SMALL_MODELS = [
    lambda: BayesianLinearRegressor(),
    lambda: MessagePassingRegressor((6,), max_epochs=2, random_state=0),
    lambda: TAGIRegressor(hidden_layer_sizes=(6,), max_epochs=2, random_state=0),
    lambda: PBPRegressor((6,), max_epochs=2, random_state=0),
    lambda: VBNNRegressor(hidden_layer_sizes=(3,), max_iter=3, tol=1.0, random_state=0),
    lambda: MessagePassingClassifier((6,), max_epochs=2, random_state=0),
    lambda: TAGIClassifier(hidden_layer_sizes=(6,), max_epochs=2, random_state=0),
]


@pytest.mark.parametrize("make", _SMALL_MODELS)
def test_a_feature_constant_in_training_is_ignored(rng, make):
    # The data say nothing of a constant feature's effect.  With
    # StandardScaler's scale 1, a new value of it entered the network as
    # (x_new - c) in the user's units: TAGI predicted -0.25 in one unit and
    # -222451 in a million times smaller one.  It is standardised to 0 both
    # in training and at prediction: the fits and predictions do not depend
    # on its units or on its value.
    X = rng.normal(size=(80, 2))
    y = np.sin(X[:, 0]) + 0.1 * rng.normal(size=80)
    if is_classifier(make()):
        y = (y > 0).astype(int)
    X[:, 1] = 5.0
    query = X[:4].copy()
    query[:, 1] = 6.0
    results = []
    for unit in (1.0, 1e6):
        model = make().fit(X * [1.0, unit], y)
        assert model.x_scaler_.scale_[1] == np.inf
        assert np.all(model.x_scaler_.transform(query * [1.0, unit])[:, 1] == 0.0)
        out = model.predict_proba if is_classifier(model) else model.predict
        results.append(out(query * [1.0, unit]))
        np.testing.assert_array_equal(results[-1], out(X[:4] * [1.0, unit]))
    np.testing.assert_array_equal(results[0], results[1])


def _binary_feature_data(rng):
    """A binary second feature that is 0 on the first 20 rows."""
    X = rng.normal(size=(2000, 2))
    X[:, 1] = rng.uniform(size=2000) < 0.3
    y = X[:, 0] + 5 * X[:, 1] + 0.1 * rng.normal(size=2000)
    order = np.argsort(X[:, 1], kind="stable")[:20]
    order = np.concatenate([order, np.setdiff1d(np.arange(2000), order)])
    return X[order], y[order]


@pytest.mark.parametrize("start", ["partial_fit", "fit"])
def test_a_feature_ignored_so_far_is_learned_once_a_batch_varies_it(rng, start):
    # A feature constant where the scaling was learned (the first partial_fit
    # batch, or fit's data before further partial_fit calls) is ignored, and
    # the model learns nothing of it; it kept that infinite scale for good, so
    # a streamed BayesianLinearRegressor had coef_ [0.95, 0] and R^2 0.15
    # where fit on all rows gives 0.998.  The first batch that varies it now
    # sets its scale (the RMS deviation from the constant), with a warning.
    X, y = _binary_feature_data(rng)
    model = BayesianLinearRegressor()
    getattr(model, start)(X[:20], y[:20])
    assert model.x_scaler_.scale_[1] == np.inf
    with pytest.warns(UserWarning, match=r"X column\(s\) \[1\] were constant") as record:
        model.partial_fit(X[20:40], y[20:40])
    assert record[0].filename == __file__  # (the warning points at the call)
    assert model.x_scaler_.scale_[1] == np.sqrt(np.mean(X[20:40, 1] ** 2))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for first in range(40, 2000, 20):
            model.partial_fit(X[first:first + 20], y[first:first + 20])
    np.testing.assert_allclose(model.coef_, [1.0, 5.0], atol=0.02)
    assert model.score(X, y) > 0.99


def test_a_warm_start_learns_a_feature_its_first_fit_ignored(rng):
    X, y = _binary_feature_data(rng)
    model = PBPRegressor((10,), max_epochs=5, warm_start=True, random_state=0)
    model.fit(X[:20], y[:20])
    with pytest.warns(UserWarning, match="were constant"):
        model.fit(X[20:], y[20:])
    assert model.score(X, y) > 0.95  # (ignored for good: 0.15)


@pytest.mark.parametrize("make", [
    lambda: MessagePassingRegressor((4,), max_epochs=1, random_state=0),
    lambda: TAGIRegressor(hidden_layer_sizes=(4,), max_epochs=1, random_state=0),
    lambda: PBPRegressor((4,), max_epochs=1, random_state=0),
    lambda: MessagePassingClassifier((4,), max_epochs=1, random_state=0),
    lambda: TAGIClassifier(hidden_layer_sizes=(4,), max_epochs=1, random_state=0),
])
def test_a_scale_set_later_does_not_depend_on_the_units(rng, make):
    # The scale a batch gives an ignored feature is its RMS deviation: the same
    # stream in other units of that feature gives the same model; a batch
    # that is refused leaves the scaling as it was.
    X, y = _binary_feature_data(rng)
    X, y = X[:60], y[:60]
    kw = {"classes": [0, 1]} if is_classifier(make()) else {}
    if kw:
        y = (y > np.median(y)).astype(int)
    predictions = []
    for unit in (1.0, 1e6):
        model = make()
        Xu = X * [1.0, unit]
        model.partial_fit(Xu[:20], y[:20], **kw)
        with pytest.warns(UserWarning, match="were constant"):
            model.partial_fit(Xu[20:], y[20:])
        out = model.predict_proba if kw else model.predict
        predictions.append(out(Xu))
    np.testing.assert_allclose(predictions[0], predictions[1], rtol=1e-10, atol=1e-12)
    model = make()
    model.partial_fit(X[:20], y[:20], **kw)

    def refuse(*args):
        raise ValueError("refused")

    model._partial_fit_scaled = refuse
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        with pytest.raises(ValueError, match="refused"):
            model.partial_fit(X[20:], y[20:])
    assert model.x_scaler_.scale_[1] == np.inf
    assert not [w for w in record if "were constant" in str(w.message)]  # (kept batches only)


@pytest.mark.parametrize("make, bad", [
    (lambda: BayesianLinearRegressor(), {"prior_precision": -2.0}),
    (lambda: MessagePassingRegressor((4,), batch_size=10, random_state=0),
     {"n_iter_per_batch": 0}),
    (lambda: MessagePassingRegressor((4,), batch_size=10, random_state=0),
     {"memory": "bogus"}),
    (lambda: TAGIRegressor(hidden_layer_sizes=(4,), random_state=0), {"batch_size": -5}),
    (lambda: PBPRegressor((4,), random_state=0), {"batch_size": 0}),
    (lambda: MessagePassingClassifier((4,), batch_size=10, random_state=0),
     {"n_iter_per_batch": -1}),
    (lambda: TAGIClassifier(hidden_layer_sizes=(4,), random_state=0), {"batch_size": 2.5}),
])
def test_a_later_partial_fit_checks_the_parameters(rng, make, bad):
    # sklearn's _fit_context checks them only while the estimator is unfitted:
    # set after the first call, n_iter_per_batch=0 and TAGI's batch_size=-5
    # had made a call learn nothing, memory="bogus" ran as "per_batch", and the
    # others raised math-domain, range() or Numba typing errors.  The refused
    # call leaves the model as it was.
    X, y = _data(rng, n=60)
    kw = {}
    if is_classifier(make()):
        y, kw = (y > np.median(y)).astype(int), {"classes": [0, 1]}
    model = make().partial_fit(X[:30], y[:30], **kw)
    out = model.predict_proba if kw else model.predict
    before, n_iter = out(X), getattr(model, "n_iter_", None)
    with pytest.raises(InvalidParameterError, match=f"'{next(iter(bad))}' parameter"):
        model.set_params(**bad).partial_fit(X[30:], y[30:])
    np.testing.assert_array_equal(out(X), before)
    assert getattr(model, "n_iter_", None) == n_iter


def test_a_later_partial_fit_honours_skip_parameter_validation(rng, monkeypatch):
    # As sklearn's _fit_context: no check under skip_parameter_validation.
    from sklearn import config_context

    X, y = _data(rng, n=40)
    model = TAGIRegressor(hidden_layer_sizes=(4,), random_state=0).partial_fit(X[:20], y[:20])
    calls = []
    monkeypatch.setattr(model, "_validate_params", lambda: calls.append(1))
    with config_context(skip_parameter_validation=True):
        model.partial_fit(X[20:30], y[20:30])
    assert calls == []
    model.partial_fit(X[30:], y[30:])
    assert calls == [1]


def test_a_late_scale_is_kept_with_its_batch_and_not_shared_with_copies(rng):
    # The warning of a late scale comes once the batch is kept, so a warning
    # turned into an error finds the model trained on it (it had left the
    # new scale on an untrained model); the new scaling is a new x_scaler_,
    # so a copy of the estimator keeps the old one.
    import copy

    X, y = _binary_feature_data(rng)
    quiet = TAGIRegressor(hidden_layer_sizes=(4,), random_state=0).partial_fit(X[:20], y[:20])
    strict = copy.deepcopy(quiet)
    shallow = copy.copy(quiet)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        quiet.partial_fit(X[20:60], y[20:60])
    with warnings.catch_warnings(), pytest.raises(UserWarning, match="were constant"):
        warnings.simplefilter("error")
        strict.partial_fit(X[20:60], y[20:60])
    np.testing.assert_array_equal(strict.predict(X), quiet.predict(X))
    assert shallow.x_scaler_.scale_[1] == np.inf


def test_rounding_level_drift_of_a_constant_feature_leaves_it_ignored(rng):
    # A recomputed constant drifts by ~100 ulps: as a scale (~1e-14) it turned
    # an ordinary new value into an input of 1e13 (R^2 -1.9e55).  A feature
    # whose values agree to 4096 ulps stays ignored, in fit and in a later
    # batch; beyond that it is scaled.
    X, y = _binary_feature_data(rng)
    X[:, 1] += 7.0
    drift = X[:40].copy()
    drift[:, 1] = 7.0 + np.arange(40) * 5 * np.spacing(7.0)  # up to 195 ulps
    with pytest.warns(UserWarning, match=r"X column\(s\) \[1\] vary only within") as record:
        model = BayesianLinearRegressor().fit(drift, y[:40])
    assert record[0].filename == __file__
    assert model.x_scaler_.scale_[1] == np.inf
    model = BayesianLinearRegressor().partial_fit(X[:20], y[:20])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        model.partial_fit(drift[20:], y[20:40])
    assert model.x_scaler_.scale_[1] == np.inf
    with pytest.warns(UserWarning, match="were constant"):
        model.partial_fit(X[40:60], y[40:60])
    assert 0.1 < model.x_scaler_.scale_[1] < 1.0


def test_columns_that_vary_little_around_a_large_mean_are_standardised(rng):
    # StandardScaler takes a column for a constant one where its sd is below
    # about n eps |mean|: 1e6 + 1e-8 z at 200 rows (hundreds of distinct
    # values) kept scale 1, a message passing fit scored R^2 = -1e9 and
    # BayesianLinearRegressor's predictive sd was 306 times too large, with
    # a warning that y was constant.  Such columns have their own sd now; the
    # fits equal those on z itself up to the rounding of the offset data
    # (~1% of z's resolution).
    X = rng.normal(size=(200, 2))
    z = X[:, 0] + 0.1 * rng.normal(size=200)
    y = 1e6 + 1e-8 * z
    for make in _SMALL_MODELS[:2]:
        with warnings.catch_warnings():
            warnings.filterwarnings("error", message="y is constant")
            model = make().fit(X, y)
        reference = make().fit(X, z)
        np.testing.assert_allclose(model.y_scaler_.scale_, 1e-8 * np.std(z), rtol=1e-2)
        mean, std = model.predict(X[:20], return_std=True)
        ref_mean, ref_std = reference.predict(X[:20], return_std=True)
        np.testing.assert_allclose((mean - 1e6) / 1e-8, ref_mean, atol=0.05 * np.std(z))
        np.testing.assert_allclose(std / 1e-8, ref_std, rtol=0.05)
    # A feature's scale divides new inputs, so there the bound is 4096 ulps
    # (rounding drift must not become a scale): 1e6 + 1e-2 z and 1e9 + U(0, 1)
    # are scaled by their sd, 1e6 + 1e-9 z is ignored, with a warning.
    X = rng.normal(size=(2000, 1))
    y = X[:, 0] + 0.1 * rng.normal(size=2000)
    model = BayesianLinearRegressor().fit(1e6 + 1e-2 * X, y)
    np.testing.assert_allclose(model.x_scaler_.scale_, 1e-2 * np.std(X), rtol=1e-6)
    assert model.score(1e6 + 1e-2 * X, y) > 0.98
    u = rng.uniform(size=(2000, 1))
    model = BayesianLinearRegressor().fit(1e9 + u, u[:, 0])
    np.testing.assert_allclose(model.x_scaler_.scale_, np.std(u), rtol=1e-6)
    with pytest.warns(UserWarning, match="vary only within"):
        assert BayesianLinearRegressor().fit(1e6 + 1e-9 * X, y).x_scaler_.scale_[0] == np.inf


def test_verbose_reports_and_silent_by_default(rng, capsys):
    X, y = _data(rng)
    BayesianLinearRegressor().fit(X, y)
    assert capsys.readouterr().out == ""
    reg = BayesianLinearRegressor(verbose=1).fit(X, y)
    out = capsys.readouterr().out
    assert "[BayesianLinearRegressor]" in out and f"{reg.noise_precision_:.4g}" in out


def test_input_scaler_bounds_standardised_training_inputs(rng):
    from sklearn.preprocessing import StandardScaler

    from skbayesnn.base import fit_input_scaler

    X = rng.normal(size=(500, 4))
    X[:, 1] = 0.0
    X[3, 1] = 16.0  # a rare spike: plain standardisation maps it to ~22
    X[:, 2] = 7.0  # constant
    plain = StandardScaler().fit(X)
    assert np.abs(plain.transform(X)).max() > 20
    scaler = fit_input_scaler(X, max_abs_z=8.0)
    Z = scaler.transform(X)
    assert np.abs(Z).max() <= 8.0 + 1e-12
    np.testing.assert_allclose(scaler.mean_, plain.mean_)
    # Features spread enough keep their standard deviation; the constant one
    # is ignored (infinite scale, whatever max_abs_z).
    np.testing.assert_array_equal(scaler.scale_[[0, 3]], plain.scale_[[0, 3]])
    assert scaler.scale_[1] == 16.0 / 8.0
    assert scaler.scale_[2] == np.inf
    np.testing.assert_array_equal(fit_input_scaler(X).scale_[[0, 1, 3]], plain.scale_[[0, 1, 3]])


def _estimators_with_input_bound():
    import inspect

    import skbayesnn

    classes = [getattr(skbayesnn, name) for name in skbayesnn.__all__]
    return [
        c for c in classes if inspect.isclass(c) and "max_abs_z" in c().get_params()
    ]


@pytest.mark.parametrize(
    "estimator", _estimators_with_input_bound(), ids=lambda e: e.__name__
)
def test_max_abs_z_bounds_the_scaled_training_inputs(rng, estimator):
    # Every estimator exposing max_abs_z passes it to fit_input_scaler: the
    # standardised training inputs stay in [-c, c], and c <= 0 is refused.
    from sklearn.base import is_classifier

    X = rng.normal(size=(120, 3))
    X[:, 2] = 0.0
    X[5, 2] = 40.0
    y = (X[:, 0] > 0).astype(int) if is_classifier(estimator()) else X[:, 0]
    params = {"hidden_layer_sizes": (8,), "max_epochs": 2, "random_state": 0}
    for c in (4.0, 1.0):
        model = estimator(max_abs_z=c, **params).fit(X, y)
        Z = model.x_scaler_.transform(X)
        assert np.abs(Z).max() <= c + 1e-12
        assert np.abs(Z[:, 2]).max() > 0.9 * c  # the spike sits at the bound
    with pytest.raises(ValueError, match="max_abs_z"):
        estimator(max_abs_z=0.0, **params).fit(X, y)


@pytest.mark.parametrize(
    "make, param",
    [
        (lambda: TAGIRegressor(hidden_layer_sizes=(4,), max_epochs=1), "sigma_v"),
        (lambda: TAGIClassifier(hidden_layer_sizes=(4,), max_epochs=1), "sigma_v"),
        (lambda: TAGIClassifier(hidden_layer_sizes=(4,), max_epochs=1), "alpha"),
        (lambda: MessagePassingRegressor((4,), max_epochs=1, batch_size=16), "noise_std"),
        (
            lambda: MessagePassingRegressor(
                (4,), max_epochs=1, batch_size=16, predictive_noise_std=0.3
            ),
            "predictive_noise_std",
        ),
        (
            lambda: MessagePassingClassifier(
                (4,), likelihood="regression", max_epochs=1, batch_size=16
            ),
            "noise_std",
        ),
        (lambda: TAGIClassifier(hidden_layer_sizes=(4,), max_epochs=1), "proba_noise"),
        (lambda: VBNNRegressor(hidden_layer_sizes=(3,), max_iter=5), "predict_max_iter"),
        (lambda: VBNNRegressor(hidden_layer_sizes=(3,), max_iter=5), "predict_tol"),
    ],
    ids=lambda v: v if isinstance(v, str) else "",
)
def test_parameters_read_at_prediction_are_checked_there(rng, make, param):
    # Prediction reads these at every call; set to an invalid value after fit, they
    # must raise rather than give a predictive from, e.g., (-s)^2 = s^2.
    X = rng.normal(size=(40, 2))
    y = X[:, 0] - X[:, 1]
    model = make()
    if is_classifier(model):
        y = (y > 0).astype(int)
    model.fit(X, y)
    predict = model.predict_proba if is_classifier(model) else model.predict
    good = predict(X)
    value = getattr(model, param)
    # (a bool flag gets a string: "no" would otherwise read as True)
    bad = ["no" if isinstance(value, bool) else -value]
    if param.endswith("_std") or param == "sigma_v":
        bad.append(1e155)  # squared, it overflows float64
    for b in bad:
        model.set_params(**{param: b})
        with pytest.raises(ValueError, match=param):
            predict(X)
    model.set_params(**{param: value})
    np.testing.assert_array_equal(predict(X), good)


@pytest.mark.parametrize(
    "make, param",
    [
        (lambda **kw: TAGIRegressor(hidden_layer_sizes=(4,), max_epochs=1, **kw), "sigma_v"),
        (lambda **kw: TAGIClassifier(hidden_layer_sizes=(4,), max_epochs=1, **kw), "sigma_v"),
        (lambda **kw: MessagePassingRegressor((4,), max_epochs=1, **kw), "noise_std"),
        (lambda **kw: MessagePassingRegressor((4,), max_epochs=1, **kw),
         "predictive_noise_std"),
        (lambda **kw: MessagePassingClassifier((4,), max_epochs=1, **kw), "noise_std"),
        (lambda **kw: VBNNRegressor(hidden_layer_sizes=(3,), max_iter=2, **kw), "bias_std"),
    ],
    ids=lambda v: v if isinstance(v, str) else "",
)
def test_standard_deviations_whose_square_overflows_are_refused(rng, make, param):
    # The estimators square these; above 1e150 the square overflows float64
    # (Python raised OverflowError from float ** 2, also for the argmax
    # likelihood, which does not use noise_std).  1e149 is still accepted.
    X = rng.normal(size=(30, 2))
    y = X[:, 0]
    if is_classifier(make()):
        y = (y > 0).astype(int)
    with pytest.raises(ValueError, match=param):
        make(**{param: 1e155}).fit(X, y)
    make(**{param: 1e149})._validate_params()  # does not raise


@pytest.mark.parametrize(
    "make",
    [
        BayesianLinearRegressor,
        lambda: MessagePassingRegressor((4,), max_epochs=1),
        lambda: TAGIRegressor(hidden_layer_sizes=(4,), max_epochs=1),
        lambda: PBPRegressor((4,), max_epochs=1),
        lambda: VBNNRegressor(hidden_layer_sizes=(3,), max_iter=2),
        lambda: MessagePassingClassifier((4,), max_epochs=1),
        lambda: TAGIClassifier(hidden_layer_sizes=(4,), max_epochs=1),
    ],
)
@pytest.mark.parametrize("scaled", ["X", "y"])
@pytest.mark.parametrize("factor", [1e200, 3e153, 1e-160, 1e-170])
def test_values_whose_variance_overflows_are_refused_at_fit(rng, make, scaled, factor):
    # Columns near 1e200 are finite, so validation accepts them, but their
    # variance overflows float64: the standardisation would be NaN and every
    # prediction with it.  Near 3e153 the mean is finite and only the variance
    # overflows: StandardScaler takes the column for a constant one (scale 1)
    # and the model would see inputs of size 1e153.  Near 1e-170 the variance
    # underflows to 0, and the scaler's scale 1 would make the column look
    # constant (R^2 = 0 silently); near 1e-160 it is subnormal, and its scale
    # lost digits (mean errors of 1e-5 relative, 8% in the epistemic
    # variance).  fit must say which input to rescale.
    model = make()
    X = rng.normal(size=(30, 2))
    y = X[:, 0] - X[:, 1]
    if is_classifier(model):
        if scaled == "y":
            pytest.skip("labels are not standardised")
        y = (y > 0).astype(int)
    X, y = (X * factor, y) if scaled == "X" else (X, y * factor)
    with pytest.raises(ValueError, match=f"{scaled} cannot be standardised"):
        model.fit(X, y)
    assert not hasattr(model, "n_features_in_")  # a failed fit leaves it unfitted
    if not hasattr(model, "partial_fit"):
        return
    with pytest.raises(ValueError, match=f"{scaled} cannot be standardised"):
        if is_classifier(model):
            model.partial_fit(X, y, classes=[0, 1])
        else:
            model.partial_fit(X, y)


@pytest.mark.parametrize(
    "make",
    [
        BayesianLinearRegressor,
        lambda: MessagePassingRegressor((4,), max_epochs=1, random_state=0),
        lambda: TAGIRegressor(hidden_layer_sizes=(4,), max_epochs=1, random_state=0),
        lambda: PBPRegressor((4,), max_epochs=1, random_state=0),
        lambda: VBNNRegressor(hidden_layer_sizes=(3,), max_iter=2, n_restarts=2,
                              random_state=0),  # a mixture
        lambda: MessagePassingClassifier((4,), max_epochs=1, random_state=0),
        lambda: TAGIClassifier(hidden_layer_sizes=(4,), max_epochs=1, random_state=0),
    ],
)
def test_predictions_that_overflow_raise_instead_of_returning_nan(rng, make):
    # Finite inputs 1e160 times the training scale pass validation, but the
    # network's moments overflow (a variance ~ x^2 is inf): every estimator
    # must refuse, naming the rows, rather than return NaN probabilities or
    # a NaN mean (the classifiers returned NaN rows and predicted classes_[0]).
    model = make()
    X = rng.normal(size=(40, 2))
    y = X[:, 0] - X[:, 1] + 0.1 * rng.normal(size=40)
    if is_classifier(model):
        y = (y > 0).astype(int)
    model.fit(X, y)
    predict = model.predict_proba if is_classifier(model) else model.predict
    assert np.all(np.isfinite(predict(X)))  # in range: fine
    X_bad = X[:3].copy()
    X_bad[1] *= 1e160
    with pytest.raises(ValueError, match="cannot predict 1 of 3 rows of X"):
        predict(X_bad)
    with pytest.raises(ValueError, match="cannot predict 1 of 3 rows of X"):
        model.predict_dist(X_bad)


@pytest.mark.parametrize(
    "make",
    [
        lambda h: MessagePassingRegressor(h, max_epochs=1),
        lambda h: TAGIRegressor(hidden_layer_sizes=h, max_epochs=1),
        lambda h: PBPRegressor(h, max_epochs=1),
        lambda h: VBNNRegressor(hidden_layer_sizes=h, max_iter=2),
        lambda h: MessagePassingClassifier(h, max_epochs=1),
        lambda h: TAGIClassifier(hidden_layer_sizes=h, max_epochs=1),
    ],
)
@pytest.mark.parametrize("sizes", [(), (0,), (4, -1), (4, True), (4, np.True_), True, 4.0,
                                   (4, 2.5), "4", ((4,),)])
def test_hidden_layer_sizes_that_are_not_positive_ints_are_refused(rng, make, sizes):
    # A bool is not a layer size, also inside a tuple (np.atleast_1d made
    # (8, True) a layer of one unit); neither is a float, a string or a nested
    # sequence.
    X = rng.normal(size=(20, 2))
    y = X[:, 0]
    model = make(sizes)
    if is_classifier(model):
        y = (y > 0).astype(int)
    with pytest.raises(ValueError, match="hidden_layer_sizes"):
        model.fit(X, y)


@pytest.mark.parametrize("sizes, want", [(4, [4]), ((4, 3), [4, 3]), ([4, np.int64(3)], [4, 3]),
                                         (np.array([5, 2]), [5, 2]), (range(2, 4), [2, 3]),
                                         (np.array(4), [4]), (np.int64(4), [4])])
def test_hidden_layer_sizes_accepts_ints_and_sequences_of_ints(sizes, want):
    from skbayesnn.base import check_hidden_layer_sizes

    got = check_hidden_layer_sizes(sizes)
    assert got == want and all(type(h) is int for h in got)


@pytest.mark.parametrize(
    "make",
    [
        lambda: MessagePassingClassifier((4,), batch_size=16, random_state=0),
        lambda: TAGIClassifier(hidden_layer_sizes=(4,), random_state=0),
    ],
)
def test_partial_fit_refuses_classes_that_differ_from_the_first_call(rng, make):
    # As sklearn's online classifiers: later calls may omit classes or repeat
    # them (in any order), but other labels raise and leave the model as it was.
    X = rng.normal(size=(30, 2))
    y = rng.integers(0, 3, size=30)
    clf = make().partial_fit(X, y, classes=[0, 1, 2])
    before = clf.predict_proba(X)
    with pytest.raises(ValueError, match="not the same as on the first call"):
        clf.partial_fit(X, y, classes=[0, 1, 2, 3])
    np.testing.assert_array_equal(clf.predict_proba(X), before)
    clf.partial_fit(X, y, classes=[2, 0, 1])
    clf.partial_fit(X, y)
    assert clf.classes_.tolist() == [0, 1, 2]


def test_failed_fit_clears_fitted_state_but_keeps_the_configuration(rng):
    # A fit that fails leaves no half-fitted model, but the estimator's own
    # configuration (its parameters, metadata requests) stays.
    import sklearn

    X = rng.normal(size=(30, 2))
    with sklearn.config_context(enable_metadata_routing=True):
        reg = MessagePassingRegressor((4,), max_epochs=1).fit(X, X[:, 0])
        reg.set_score_request(sample_weight=True)
        with pytest.raises(ValueError, match="cannot be standardised"):
            reg.fit(X * 1e200, X[:, 0])
        assert not hasattr(reg, "state_") and not hasattr(reg, "_rng")
        assert reg.get_metadata_routing().score.requests == {"sample_weight": True}
        assert reg.get_params()["hidden_layer_sizes"] == (4,)


def _device_arrays(value, seen=None):
    """Names of the device (strict-namespace) arrays anywhere inside ``value``."""
    import dataclasses

    from skbayesnn._testing import StrictArray

    seen = set() if seen is None else seen
    if id(value) in seen:
        return []
    seen.add(id(value))
    if isinstance(value, StrictArray):
        return ["array"]
    if isinstance(value, np.ndarray) or isinstance(value, (str, bytes, int, float)):
        return []
    if isinstance(value, dict):
        items = value.items()
    elif isinstance(value, (list, tuple)):
        items = enumerate(value)
    elif dataclasses.is_dataclass(value) and not isinstance(value, type):
        items = ((f.name, getattr(value, f.name)) for f in dataclasses.fields(value))
    elif hasattr(value, "__dict__") and type(value).__module__.startswith("skbayesnn"):
        items = vars(value).items()
    else:
        return []
    return [f"{k}.{inner}" for k, v in items for inner in _device_arrays(v, seen)]


@pytest.mark.parametrize(
    "make",
    [
        lambda: BayesianLinearRegressor(),
        lambda: TAGIRegressor(max_epochs=2, random_state=0),
        # (a noise per output goes to the device: CuPy refuses host operands)
        lambda: TAGIRegressor(max_epochs=2, sigma_v=[0.3], early_stopping=True,
                              random_state=0),
        lambda: PBPRegressor(max_epochs=2, random_state=0),
        lambda: PBPRegressor(max_epochs=2, spike_and_slab=True, random_state=0),
        lambda: VBNNRegressor((4,), max_iter=5, random_state=0),
        lambda: MessagePassingRegressor((8,), max_epochs=2, random_state=0),
        lambda: TAGIClassifier(max_epochs=2, random_state=0),
        lambda: MessagePassingClassifier((8,), max_epochs=2, random_state=0),
    ],
)
def test_model_fitted_on_a_device_pickles_host_arrays_only(rng, monkeypatch, make):
    # DESIGN.md "Contracts": a model fitted on a GPU loads on a machine without
    # one.  The strict namespace stands in for CuPy (its arrays are the "device"
    # arrays); the pickled state must hold none of them, anywhere, and the
    # reloaded model (moved back to the "device") predicts the same.
    import pickle

    from skbayesnn import base
    from skbayesnn._testing import STRICT_XP

    monkeypatch.setattr(base, "resolve_device", lambda device="cpu": "cuda")
    monkeypatch.setattr(base, "get_namespace", lambda device="cpu": STRICT_XP)
    monkeypatch.setattr(base, "cuda_available", lambda: True)
    X, y = _data(rng, n=60)
    est = make().set_params(device="cuda")
    if is_classifier(est):
        y = (y > np.median(y)).astype(int)
    est.fit(X, y)
    assert any(_device_arrays(vars(est))), "the fit did not run on the stand-in device"
    before = _device_arrays(vars(est))
    assert _device_arrays(est.__getstate__()) == []
    assert _device_arrays(vars(est)) == before  # pickling leaves the live model on the device
    reloaded = pickle.loads(pickle.dumps(est))
    np.testing.assert_array_equal(reloaded.predict(X), est.predict(X))
    if is_classifier(est):  # the Monte Carlo members of predict_dist, on the device
        members = est.predict_dist(X, n_members=3, random_state=0).member_proba
        np.testing.assert_array_equal(
            reloaded.predict_dist(X, n_members=3, random_state=0).member_proba, members)


@pytest.mark.parametrize("make, online", [
    (lambda: VBNNRegressor((4,), max_iter=5, random_state=0), False),
    (lambda: TAGIRegressor(max_epochs=2, random_state=0), True),
    (lambda: MessagePassingRegressor((8,), max_epochs=2, random_state=0), True),
    (lambda: BayesianLinearRegressor(), True),
    (lambda: PBPRegressor(max_epochs=2, random_state=0), True),
])
def test_multi_output_and_online_device_models_pickle_host_arrays_only(
        rng, monkeypatch, make, online):
    # As above for several outputs (VBNN's noise prior per output had stayed
    # a device array in the pickle) and after partial_fit.
    import pickle

    from skbayesnn import base
    from skbayesnn._testing import STRICT_XP

    monkeypatch.setattr(base, "resolve_device", lambda device="cpu": "cuda")
    monkeypatch.setattr(base, "get_namespace", lambda device="cpu": STRICT_XP)
    monkeypatch.setattr(base, "cuda_available", lambda: True)
    X, y = _data(rng, n=60)
    est = make().set_params(device="cuda")
    models = []
    if est._supports_multi_output:
        models.append(clone(est).fit(X, np.column_stack([y, 10.0 * y + X[:, 0]])))
    if online:
        models.append(clone(est).partial_fit(X[:30], y[:30]).partial_fit(X[30:], y[30:]))
    for model in models:
        assert _device_arrays(model.__getstate__()) == []
        reloaded = pickle.loads(pickle.dumps(model))
        np.testing.assert_array_equal(reloaded.predict(X), model.predict(X))


@pytest.mark.parametrize(
    "make, change",
    [
        (lambda: MessagePassingRegressor((4,), batch_size=16, random_state=0),
         dict(hidden_layer_sizes=(5,))),
        (lambda: MessagePassingRegressor((4,), batch_size=16, random_state=0),
         dict(negative_slope=0.2)),
        (lambda: MessagePassingClassifier((4,), batch_size=16, random_state=0),
         dict(activation="relu")),
        (lambda: MessagePassingClassifier((4,), batch_size=16, random_state=0),
         dict(likelihood="softmax")),
        (lambda: TAGIRegressor(hidden_layer_sizes=(4,), random_state=0),
         dict(hidden_layer_sizes=(4, 4))),
        (lambda: TAGIClassifier(hidden_layer_sizes=(4,), random_state=0),
         dict(activation="tanh")),
        (lambda: PBPRegressor((4,), random_state=0), dict(fit_bias=False)),
        # parameters read only when the model is created (priors, initial
        # scales, the input scaling)
        (lambda: MessagePassingRegressor((4,), batch_size=16, random_state=0),
         dict(prior_var=[2.0, 3.0])),
        (lambda: MessagePassingRegressor((4,), batch_size=16, random_state=0),
         dict(bias_prior_var=2.0)),
        (lambda: MessagePassingClassifier((4,), batch_size=16, random_state=0),
         dict(max_abs_z=1.0)),
        (lambda: TAGIRegressor(hidden_layer_sizes=(4,), random_state=0), dict(gain_w=0.5)),
        (lambda: TAGIRegressor(hidden_layer_sizes=(4,), random_state=0), dict(init="xavier")),
        (lambda: TAGIClassifier(hidden_layer_sizes=(4,), random_state=0), dict(gain_b=2.0)),
    ],
    ids=lambda v: "-".join(v) if isinstance(v, dict) else "",
)
def test_partial_fit_refuses_a_changed_network(rng, make, change):
    # A later partial_fit continues the network built by fit or the first
    # partial_fit: a changed layer size, activation, prior or initial scale
    # cannot take effect there (it was silently ignored), so the call raises
    # and leaves the model as it was; with the parameters restored, training
    # goes on; fit starts anew.
    X = rng.normal(size=(40, 2))
    y = X[:, 0] - X[:, 1]
    model = make()
    kw = {}
    if is_classifier(model):
        y = (y > 0).astype(int)
        kw = dict(classes=[0, 1])
    model.partial_fit(X, y, **kw)
    predict = model.predict_proba if is_classifier(model) else model.predict
    before = predict(X)
    old = {name: model.get_params()[name] for name in change}
    model.set_params(**change)
    with pytest.raises(ValueError, match="partial_fit continues the fitted model"):
        model.partial_fit(X, y)
    np.testing.assert_array_equal(predict(X), before)
    model.set_params(**old).partial_fit(X, y)
    assert not np.array_equal(predict(X), before)
    model.set_params(**change).fit(X, y)
    model.partial_fit(X, y)


def test_partial_fit_accepts_changes_that_leave_the_network_as_it_is(rng):
    # With "relu" the units have no negative slope, so changing negative_slope
    # changes nothing and partial_fit goes on; many classes given up front do
    # not draw sklearn's "looks like regression" warning.
    X = rng.normal(size=(30, 2))
    y = X[:, 0]
    reg = MessagePassingRegressor((4,), activation="relu", batch_size=16, random_state=0)
    reg.partial_fit(X, y).set_params(negative_slope=0.2).partial_fit(X, y)
    assert reg.state_.alpha == 0.0
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        TAGIClassifier(hidden_layer_sizes=(4,), random_state=0).partial_fit(
            X, np.arange(30) % 3, classes=np.arange(25))


def test_multi_output_vbnn_fits_on_a_device_namespace(rng, monkeypatch):
    # The per-output noise prior is a device array there; the ELBO must not
    # call NumPy on it.  The strict namespace wraps NumPy: the same numbers.
    from skbayesnn import base
    from skbayesnn._testing import STRICT_XP

    X = rng.normal(size=(40, 2))
    Y = np.column_stack([X[:, 0], 10 * X[:, 1] + 0.1 * rng.normal(size=40)])
    cpu = VBNNRegressor((4,), max_iter=4, n_init=1, random_state=0).fit(X, Y).predict(X)
    monkeypatch.setattr(base, "resolve_device", lambda device="cpu": "cuda")
    monkeypatch.setattr(base, "get_namespace", lambda device="cpu": STRICT_XP)
    monkeypatch.setattr(base, "cuda_available", lambda: True)
    est = VBNNRegressor((4,), max_iter=4, n_init=1, random_state=0, device="cuda").fit(X, Y)
    np.testing.assert_array_equal(est.predict(X), cpu)


@pytest.mark.parametrize("classifier", [False, True])
def test_tagi_partial_fit_that_diverges_raises_and_keeps_the_model(rng, classifier):
    # partial_fit standardises every batch as the first, so nothing bounds a
    # later batch's inputs: a row at 1e155 made the posterior inf/NaN while the
    # call returned normally, and every later prediction failed.  Now the call
    # raises and the model predicts as before it; training then goes on.
    make = TAGIClassifier if classifier else TAGIRegressor
    X = rng.normal(size=(60, 2))
    y = X[:, 0]
    kw = {}
    if classifier:
        y = (y > 0).astype(int)
        kw = dict(classes=[0, 1])
    model = make(hidden_layer_sizes=(5,), random_state=0).partial_fit(X, y, **kw)
    predict = model.predict_proba if classifier else model.predict
    before = predict(X)
    with pytest.raises(ValueError, match="training diverged"):
        model.partial_fit([[1e155, 0.0], [0.0, 1.0]], y[:2])
    assert model.posterior_.is_finite()
    np.testing.assert_array_equal(predict(X), before)
    if not classifier:  # targets far out: the message names y as well
        with pytest.raises(ValueError, match="inputs or targets far outside.*rescale X or y"):
            model.partial_fit(X[:20], np.r_[1e200, y[1:20]])
        np.testing.assert_array_equal(predict(X), before)
    model.partial_fit(X, y)
    assert np.all(np.isfinite(predict(X)))
    # fit with an absurd initial weight scale: an error, not an unusable model
    with pytest.raises(ValueError, match="training diverged"):
        make(hidden_layer_sizes=(5,), gain_w=1e200, max_epochs=1, random_state=0).fit(X, y)


def test_predictive_whose_total_variance_overflows_raises(rng):
    # Each part finite (epistemic 1.1e308, aleatoric 8.3e307 in y's units near
    # 1e153) but their sum inf: predict returned std = inf with only a warning.
    X = rng.uniform(-2, 2, (100, 2))
    y = 1e153 * np.sin(2 * X[:, 0])
    reg = TAGIRegressor(hidden_layer_sizes=(10,), max_epochs=2, sigma_v=14.0,
                        random_state=0).fit(X, y)
    far = [[70.0, 70.0]]
    with pytest.raises(ValueError, match="cannot predict 1 of 1 rows.*or rescale y"):
        reg.predict(far, return_std=True)
    with pytest.raises(ValueError, match="cannot predict 1 of 1 rows"):
        reg.predict_dist(far)
    assert np.all(np.isfinite(reg.predict(X, return_std=True)[1]))


@pytest.mark.parametrize("make", [
    lambda: MessagePassingClassifier((4,), batch_size=16, random_state=0),
    lambda: TAGIClassifier(hidden_layer_sizes=(4,), random_state=0),
])
@pytest.mark.parametrize("classes, message", [
    ([0.0, 1.0, np.nan], "classes: Input y contains NaN"),
    (["a", "b", 1], "classes: Mix of label input types"),
    ([0.5, 1.5], "classes: Unknown label type"),
])
@pytest.mark.filterwarnings("ignore:invalid value encountered in cast:RuntimeWarning")  # sklearn's
def test_partial_fit_validates_classes_as_labels(rng, make, classes, message):
    # classes=[0, 1, nan] made a phantom NaN class with its own probability,
    # ["a", "b", 1] a phantom class "1": classes are checked as y is.
    X = rng.normal(size=(20, 2))
    y = np.array(["a", "b"] * 10) if isinstance(classes[0], str) else np.arange(20) % 2
    with pytest.raises(ValueError, match=message):
        make().partial_fit(X, y, classes=classes)


@pytest.mark.parametrize("make", [
    lambda: MessagePassingRegressor((4,), max_epochs=1, random_state=0),
    lambda: TAGIRegressor(hidden_layer_sizes=(4,), max_epochs=1, random_state=0),
    lambda: PBPRegressor((4,), max_epochs=1, random_state=0),
])
def test_numeric_string_targets_fit_as_numbers(rng, make):
    # Ridge's behaviour: y of numeric strings is y (it raised a NumPy
    # UFuncTypeError in the scaling check); other strings are a clear error.
    X = rng.normal(size=(30, 2))
    y = X[:, 0] - X[:, 1]
    np.testing.assert_array_equal(make().fit(X, y.astype(str)).predict(X),
                                  make().fit(X, y).predict(X))
    with pytest.raises(ValueError, match="could not convert string to float"):
        make().fit(X, np.array(["a"] * 30))


def test_extreme_prior_parameters_are_refused_with_the_parameter_named(rng):
    # Values the constraints accepted crashed deep inside (ZeroDivisionError,
    # FloatingPointError from the ELBO), or fitted a model that could not
    # predict its own training rows; they now raise a ValueError naming the
    # parameter at fit.  The bounds themselves still fit a finite model.
    X = rng.uniform(-2, 2, (60, 2))
    y = np.sin(2 * X[:, 0])
    vb = dict(hidden_layer_sizes=(5,), max_iter=5, n_init=1, random_state=0)
    for make, param in [
        (lambda: PBPRegressor((4,), max_epochs=1, prior=(1e308, 1e-308)), "prior"),
        (lambda: PBPRegressor((5, 5, 5), max_epochs=3, prior=(6, 1e100), random_state=0),
         "prior"),
        (lambda: VBNNRegressor(prior_scale=1e-200, **vb), "prior_scale"),
        (lambda: VBNNRegressor(local_scale=1e-200, **vb), "local_scale"),
        (lambda: VBNNRegressor(local_scale=1e300, **vb), "local_scale"),
        (lambda: VBNNRegressor(bias_std=1e-200, **vb), "bias_std"),
        (lambda: VBNNRegressor(temperature=1e-200, **vb), "temperature"),
    ]:
        with pytest.raises(ValueError, match=param):
            make().fit(X, y)
    # Within the bounds, a scale can still break the coordinate ascent (Laplace
    # at 1e-10: weight precisions near 1e24, a Cholesky beyond jitter); the
    # FloatingPointError became a ValueError naming the prior settings.
    with pytest.raises(ValueError, match=r"broke down .*prior_scale=1e-10"):
        VBNNRegressor(shrinkage="laplace", prior_scale=1e-10, **vb).fit(X, y)
    for kw in (dict(prior_scale=1e-150), dict(local_scale=1e150), dict(temperature=1e-150),
               dict(bias_std=1e-150)):
        assert np.all(np.isfinite(VBNNRegressor(**kw, **vb).fit(X, y).predict(X)))


def test_partial_fit_compares_the_network_read_off_the_fitted_state(rng):
    # The fitted side comes from the model's state (layer sizes, the units'
    # slope, the likelihood), nothing recorded at fit, so it also guards
    # models pickled before the check existed; a LeakyReLU of slope 0 is relu.
    import pickle

    X = rng.normal(size=(30, 2))
    y = (X[:, 0] > 0).astype(int)
    clf = MessagePassingClassifier((4,), negative_slope=0.0, batch_size=16, random_state=0)
    clf.partial_fit(X, y, classes=[0, 1])
    clf.set_params(activation="relu").partial_fit(X, y)  # the same network
    clf = pickle.loads(pickle.dumps(clf.set_params(activation="leaky_relu", negative_slope=0.1)))
    with pytest.raises(ValueError, match=r"\(activation='relu', negative_slope=0\.0\), but the "
                       r"parameters now ask for activation='leaky_relu', negative_slope=0\.1"):
        clf.partial_fit(X, y)
    assert clf.n_iter_ == 2


def test_partial_fit_of_a_model_pickled_without_its_creation_values_goes_on(rng):
    # Models pickled before the creation parameters were recorded have no
    # record: nothing to compare, as before (the network is still compared).
    import pickle

    X = rng.normal(size=(30, 2))
    y = X[:, 0]
    reg = MessagePassingRegressor((4,), batch_size=16, random_state=0).partial_fit(X, y)
    assert reg._creation_values == {"device": "cpu", "prior_var": None, "bias_prior_var": 0.5,
                                    "max_abs_z": None}
    old = pickle.loads(pickle.dumps(reg))
    del old._creation_values
    old.set_params(prior_var=2.0).partial_fit(X, y)
    assert old.n_iter_ == 2
    with pytest.raises(ValueError, match=r"prior_var=None.*prior_var=\[2\.0, 2\.0\]"):
        reg.set_params(prior_var=2.0).partial_fit(X, y)
    # compared as they take effect: one value, or the same value per layer
    reg = MessagePassingRegressor((4,), prior_var=np.array([0.5, 0.5]), batch_size=16,
                                  random_state=0).partial_fit(X, y)
    reg.set_params(prior_var=0.5).partial_fit(X, y)
    assert reg.n_iter_ == 2


@pytest.mark.parametrize("make, column_shape", [
    (lambda: MessagePassingRegressor((4,), max_epochs=2, random_state=0), (5, 1)),
    (lambda: TAGIRegressor(hidden_layer_sizes=(4,), max_epochs=2, random_state=0), (5, 1)),
    (lambda: BayesianLinearRegressor(), (5,)),
])
def test_predictions_keep_the_dimensions_of_y(rng, make, column_shape):
    # As LinearRegression: a 1-D y gives 1-D mean and std, a column y (n, 1)
    # gives (n, 1) ones, for fit and for partial_fit (the first call decides);
    # a single-output estimator ravels a column y with sklearn's warning, as
    # BayesianRidge does.
    X = rng.normal(size=(40, 2))
    y = X[:, 0] + 0.1 * rng.normal(size=40)
    flat = make().fit(X, y)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        column = make().fit(X, y[:, None])
        online = make().partial_fit(X, y[:, None]).partial_fit(X, y)
    assert any(w.category is DataConversionWarning for w in caught) == (column_shape == (5,))
    for model, shape in ((flat, (5,)), (column, column_shape), (online, column_shape)):
        mean, std = model.predict(X[:5], return_std=True)
        assert mean.shape == std.shape == shape
        assert model.predict_dist(X[:5]).var().shape == shape
    np.testing.assert_array_equal(column.predict(X[:5]).ravel(), flat.predict(X[:5]))


@pytest.mark.parametrize("make", [
    lambda: MessagePassingRegressor((4,), max_epochs=2, random_state=0),
    lambda: TAGIRegressor(hidden_layer_sizes=(4,), max_epochs=2, random_state=0),
])
def test_a_constant_target_warns_that_its_scale_is_one(rng, make):
    # StandardScaler gives a constant y scale 1: noise_std and the like then
    # act in y's own units, so a predictive sd of order 0.1-1 comes out
    # whatever y's units; that is said, at fit and at a first partial_fit of
    # one row.  A target that varies, however little, does not warn.
    X = rng.normal(size=(40, 2))
    with pytest.warns(UserWarning, match=r"y is constant \(column\(s\) \[0\]\)"):
        make().fit(X, np.full(40, 1000.0))
    with pytest.warns(UserWarning, match="make the first batch representative"):
        make().partial_fit(X[:1], [5.0])
    with warnings.catch_warnings():
        # (such a y is noise alone, on which the fixed noise level is too
        # small: that warning is another one)
        warnings.filterwarnings("error", message="y is constant")
        model = make().fit(X, 1000.0 + 1e-6 * rng.normal(size=40))
    assert np.all(model.predict(X, return_std=True)[1] < 1e-4)
    # a spread of a few dozen ulps is taken for a constant too (scale 1): it warns;
    # an already standardised y (variance 1 up to rounding, scale 1) does not
    with pytest.warns(UserWarning, match="y is constant"):
        make().fit(X, 1000.0 + 1e-12 * rng.normal(size=40))
    with warnings.catch_warnings():
        warnings.filterwarnings("error", message="y is constant")
        for seed in range(20):
            z = np.random.default_rng(seed).normal(size=40)
            make().fit(X, (z - z.mean()) / z.std())


def test_predict_log_proba_is_the_log_of_predict_proba(rng):
    X = rng.normal(size=(60, 2))
    y = np.where(X[:, 0] > 0, "b", "a")
    for clf in (MessagePassingClassifier((4,), max_epochs=2, random_state=0),
                TAGIClassifier(hidden_layer_sizes=(4,), max_epochs=2, random_state=0)):
        clf.fit(X, y)
        np.testing.assert_array_equal(clf.predict_log_proba(X), np.log(clf.predict_proba(X)))


def test_partial_fit_with_one_class_names_the_classes_argument(rng):
    X = rng.normal(size=(10, 2))
    with pytest.raises(ValueError, match="needs at least 2 labels in classes, got 1"):
        MessagePassingClassifier((4,)).partial_fit(X, np.zeros(10), classes=[0])
    with pytest.raises(ValueError, match="samples of at least 2 classes in the data"):
        MessagePassingClassifier((4,)).fit(X, np.zeros(10))


@pytest.mark.parametrize("make", [
    lambda: BayesianLinearRegressor(),
    lambda: TAGIRegressor(hidden_layer_sizes=(8,), max_epochs=2, random_state=0),
    lambda: PBPRegressor((8,), max_epochs=2, random_state=0),
])
@pytest.mark.parametrize("level", [1e160, 1e300])
def test_partial_fit_refuses_a_batch_that_leaves_the_model_unable_to_predict(rng, make, level):
    # Targets far beyond the first call's scale: BayesianLinearRegressor's sums
    # of squares overflow (its coefficients became NaN); TAGI keeps a finite
    # posterior whose predictive overflows everywhere.  Both were accepted,
    # after which every prediction raised.  PBP rejected every update of the
    # batch (log Z = -inf) but its noise and prior updates still moved the
    # model.  The batch is refused, the model (counters included) is as it
    # was, and training goes on with ordinary data.
    X = rng.normal(size=(100, 2))
    y = X[:, 0] + 0.1 * rng.normal(size=100)
    model = make().partial_fit(X, y)
    before = model.predict(X, return_std=True)
    counters = {k: v for k, v in vars(model).items() if isinstance(v, (int, np.integer))}
    with pytest.raises(ValueError, match="the batch is refused and the model is as it was"):
        model.partial_fit(X[:10], np.full(10, level))
    for a, b in zip(model.predict(X, return_std=True), before):
        np.testing.assert_array_equal(a, b)
    assert counters == {k: v for k, v in vars(model).items() if isinstance(v, (int, np.integer))}
    model.partial_fit(X, y)
    assert np.all(np.isfinite(model.predict(X)))
    assert np.corrcoef(model.predict(X), y)[0, 1] > 0.9


def test_a_device_change_before_a_later_partial_fit_is_refused(rng, monkeypatch):
    # The device is chosen when the model is created; a later partial_fit with
    # another device went on silently on the first one.
    X = rng.normal(size=(30, 2))
    y = X[:, 0]
    reg = BayesianLinearRegressor().partial_fit(X, y)
    with pytest.raises(ValueError, match=r"\(device='cpu'\), but the parameters now ask for "
                       r"device='cuda'"):
        reg.set_params(device="cuda").partial_fit(X, y)
    reg.set_params(device="cpu").partial_fit(X, y)
    assert reg.stats_.n == 60


def test_a_batch_whose_predictive_overflows_is_refused_by_bayesian_linear_regression(rng):
    # Finite statistics, but a predictive that overflows in y's units: a first
    # batch at 1e150 (its scale), then one at 1.3e303.
    # Likewise a batch whose evidence overflows (log_evidence_ was inf), and
    # the update's warnings come only with a batch that is kept.
    import pickle

    # (which of these batches overflow depends on the data: a fixed draw)
    rng = np.random.default_rng(0)
    X = rng.normal(size=(100, 2))
    noise = 0.1 * rng.normal(size=100)
    for first, batch in ((1e150 * (X[:, 0] + noise), np.full(10, 1.3e303)),  # predictive
                         (1e150 * (X[:, 0] + noise), 1.3e303 * X[:10, 0]),  # evidence
                         (X[:, 0] + noise, 2e153 * X[:10, 0])):  # evidence
        reg = BayesianLinearRegressor().partial_fit(X, first)
        before = pickle.dumps(reg)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            with pytest.raises(ValueError, match="the batch is refused and the model is as it"):
                reg.partial_fit(X[:10], batch)
        assert caught == []
        assert pickle.dumps(reg) == before


def test_the_device_is_compared_as_it_takes_effect(rng, monkeypatch):
    # "auto" is the CPU without a GPU; a GPU model loaded where there is none
    # computes on the CPU anyway, so device="cpu" goes on with it.
    X = rng.normal(size=(30, 2))
    y = X[:, 0]
    reg = BayesianLinearRegressor(device="auto").partial_fit(X, y)
    reg.set_params(device="cpu").partial_fit(X, y)
    # "auto" goes on with the device the model was created on, even where a
    # GPU has appeared since
    monkeypatch.setattr(_backend, "cuda_available", lambda: True)
    reg.set_params(device="auto").partial_fit(X, y)
    monkeypatch.undo()
    reg.device_ = "cuda"
    reg._creation_values["device"] = "cuda"
    with pytest.warns(RuntimeWarning, match="no GPU is available"):
        reg.partial_fit(X, y)
    assert reg.stats_.n == 120


@pytest.mark.parametrize("make", [lambda: TAGIRegressor((4,), random_state=0),
                                  lambda: MessagePassingClassifier((4,), random_state=0)])
def test_a_small_first_partial_fit_batch_warns_that_it_fixes_the_scaling(rng, make):
    # A reviewer's TAGI stream of y ~ 1000 z + 5000 (noise sd 300) predicted a
    # median sd of 0.4, 187 or 560 as the first batch had 1, 2 or 20 rows:
    # their spread is the scale of sigma_v and the priors for good.
    X = rng.normal(size=(60, 3))
    y = (X[:, 0] > 0).astype(int) if is_classifier(make()) else 1000 * X[:, 0] + 5000
    extra = {"classes": [0, 1]} if is_classifier(make()) else {}
    with pytest.warns(UserWarning, match="first partial_fit batch has 2 row"):
        make().partial_fit(X[:2], y[:2], **extra)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        model = make().partial_fit(X[:20], y[:20], **extra)
        model.partial_fit(X[20:22], y[20:22])  # later batches fix nothing


@pytest.mark.parametrize("make", [lambda: TAGIRegressor((4,), max_epochs=1, random_state=0),
                                  lambda: PBPRegressor((4,), max_epochs=1, random_state=0)])
def test_nan_let_through_by_assume_finite_is_named_at_predict(rng, make):
    # sklearn's assume_finite skips the input check; the overflow message then
    # spoke of inputs "nan training standard deviations" out.
    from sklearn import config_context

    X = rng.normal(size=(50, 2))
    model = make().fit(X, X[:, 0])
    X[0, 0] = np.nan
    with config_context(assume_finite=True), np.errstate(invalid="ignore"):
        with pytest.raises(ValueError, match="1 of 50 rows of X: they contain NaN"):
            model.predict(X)
    # a finite input whose standardisation overflows keeps its own message
    X[0, 0] = 1e307
    with np.errstate(over="ignore", invalid="ignore"):
        with pytest.raises(ValueError, match="training standard deviations"):
            model.predict(X)


def test_vbnn_draws_at_a_nan_input_let_through_by_assume_finite_say_so(rng):
    from sklearn import config_context

    X = rng.normal(size=(50, 2))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = VBNNRegressor((4,), max_iter=5, random_state=0).fit(X, X[:, 0])
    X[1, 1] = np.nan
    with config_context(assume_finite=True), np.errstate(invalid="ignore"):
        with pytest.raises(ValueError, match="they contain NaN"):
            model.sample_predictive(X)


@pytest.mark.parametrize("make", [
    BayesianLinearRegressor,
    lambda: TAGIRegressor((4,), max_epochs=1, random_state=0),
    lambda: PBPRegressor((4,), max_epochs=1, random_state=0),
    lambda: VBNNRegressor((4,), max_iter=3, random_state=0),
    lambda: MessagePassingRegressor((4,), max_epochs=1, random_state=0),
    lambda: TAGIClassifier((4,), max_epochs=1, random_state=0),
    lambda: MessagePassingClassifier((4,), max_epochs=1, random_state=0),
])
def test_nan_let_through_by_assume_finite_is_refused_in_training(rng, make):
    # PBP had fitted a NaN target silently, as a "constant" y of scale 1.
    from sklearn import config_context

    X = rng.normal(size=(40, 2))
    y = (X[:, 0] > 0).astype(int) if is_classifier(make()) else X[:, 0].copy()
    extra = {"classes": [0, 1]} if is_classifier(make()) else {}
    bad = [("X", X.copy(), y)]
    bad[0][1][3, 1] = np.inf
    if not is_classifier(make()):
        y_nan = y.copy()
        y_nan[5] = np.nan
        bad.append(("y", X, y_nan))
    with config_context(assume_finite=True), np.errstate(invalid="ignore", over="ignore"):
        for name, X_bad, y_bad in bad:
            with pytest.raises(ValueError, match=f"cannot train on this {name}: it contains NaN"):
                make().fit(X_bad, y_bad)
            if hasattr(make(), "partial_fit"):
                with pytest.raises(ValueError, match=f"cannot train on this {name}"):
                    make().partial_fit(X_bad, y_bad, **extra)


def test_the_internal_scalers_ignore_the_set_output_configuration(rng):
    # transform_output="polars" had raised an ImportError without polars, and
    # "pandas" built a DataFrame in every fit and predict.
    from sklearn import config_context

    X = rng.normal(size=(40, 3))
    y = X @ [1.0, 2.0, 3.0] + 0.1 * rng.normal(size=40)
    plain = BayesianLinearRegressor().fit(X, y)
    with config_context(transform_output="pandas"):
        model = BayesianLinearRegressor().fit(X, y)
        assert type(model.x_scaler_.transform(X)) is np.ndarray
        assert type(model.y_scaler_.transform(y[:, None])) is np.ndarray
        np.testing.assert_array_equal(model.predict(X), plain.predict(X))


def test_warnings_point_at_the_users_call(rng):
    # Module-based warning filters and the reported line need the user's
    # frame: VBNN's fit (an override calling the base's) had reported
    # vbnn.py, and BayesianLinearRegressor's ConvergenceWarnings sklearn/base.py.
    X = rng.normal(size=(30, 2))
    calls = [
        (lambda: VBNNRegressor((2,), max_iter=2, random_state=0).fit(X, np.ones(30)),
         "y is constant"),
        (lambda: BayesianLinearRegressor().fit(X[:3], X[:3, 0]), "interpolate"),
        (lambda: BayesianLinearRegressor().partial_fit(X[:5], X[:5, 0] + X[:5, 1]),
         "first partial_fit batch"),
        (lambda: TAGIRegressor((2,), max_epochs=1).fit(X, np.zeros(30)), "y is constant"),
        (lambda: GridSearchCV(TAGIRegressor((2,), max_epochs=1),
                              {"sigma_v": [0.05]}, cv=2).fit(X_noisy, y_noisy), "too narrow"),
    ]
    X_noisy = rng.normal(size=(300, 2))
    y_noisy = rng.normal(size=300)
    for call, message in calls:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            call()
        found = [w for w in caught if message in str(w.message)]
        assert found, message
        assert all(w.filename == __file__ for w in found), [w.filename for w in found]
    # In worker threads no frame of the user's lies beyond the worker's start
    # in the standard library (threading, multiprocessing): the warning goes to
    # the first frame outside this package, not there.
    from joblib import parallel_backend

    with warnings.catch_warnings(record=True) as caught, parallel_backend("threading", n_jobs=2):
        warnings.simplefilter("always")
        GridSearchCV(TAGIRegressor((2,), max_epochs=1), {"sigma_v": [0.05]},
                     cv=2).fit(X_noisy, y_noisy)
    places = {w.filename for w in caught if "too narrow" in str(w.message)}
    assert places and not any("threading" in p or "multiprocessing" in p for p in places), places


@pytest.mark.parametrize("make, name, remedy", [
    (lambda v: TAGIRegressor((8,), max_epochs=5, sigma_v=v, random_state=0), "sigma_v",
     "Choose sigma_v by cross-validation"),
    (lambda v: MessagePassingRegressor((8,), max_epochs=5, noise_std=v, random_state=0),
     "noise_std", "Set predictive_noise_std"),
    (lambda v: MessagePassingRegressor((8,), max_epochs=5, predictive_noise_std=v,
                                       random_state=0), "predictive_noise_std",
     "Set predictive_noise_std"),
    (lambda v: BayesianLinearRegressor(noise_precision=1.0 / v**2), "noise_precision",
     'Leave noise_precision="auto"'),
])
def test_a_fixed_noise_level_far_below_the_residuals_warns(rng, make, name, remedy):
    # A noise level that is a parameter, not learned: TAGI's default
    # sigma_v=0.3 gave 95% intervals covering 0.59 of wine-quality-red's test
    # targets, silently.  Residuals of sd 1 (standardised) under a noise of
    # 0.1 leave most training rows outside their intervals, which warns, with
    # the remedy that fits the estimator; a noise level near theirs does not,
    # nor ten gross outliers among well-covered rows (their root mean square
    # had set off the first version of the check).
    X = rng.normal(size=(300, 2))
    y = 0.3 * X[:, 0] + rng.normal(size=300)
    with pytest.warns(UserWarning, match=rf"of the training rows lie outside their 95% "
                      rf"predictive intervals.*{name}=.* fixes the noise level.*{remedy}"):
        model = make(0.1).fit(X, y)
    if "warm_start" in model.get_params():  # a warm start is checked as well
        warm = clone(model).set_params(warm_start=True, max_epochs=1)
        with pytest.warns(UserWarning, match="predictive intervals"):
            warm.fit(X, y)
        with pytest.warns(UserWarning, match="predictive intervals"):
            warm.fit(X, y)  # (continues the first)
        assert warm.n_iter_ == 2
    with warnings.catch_warnings():
        warnings.filterwarnings("error", message=".*predictive intervals")
        make(1.0).fit(X, y)
        make(0.1).fit(X[:49], y[:49])  # too few rows to say
        y_out = y.copy()
        y_out[:10] += 40.0
        make(1.0).fit(X, y_out)


def test_the_noise_check_does_not_call_calibrated_non_gaussian_residuals_too_narrow(rng):
    # Uniform and two-valued residuals at the right variance: their 95%
    # intervals cover every row (the median of |z|, the check's second
    # version, had called them overconfident in 6 and 20 of 20 fits).
    X = rng.normal(size=(2000, 2))
    for noise in (rng.uniform(-1.0, 1.0, size=2000) * np.sqrt(3.0),
                  np.where(rng.random(2000) < 0.5, -1.0, 1.0)):
        y = X @ [1.0, 2.0] + 0.5 * noise
        scale = np.std(y)
        model = BayesianLinearRegressor(noise_precision=(scale / 0.5) ** 2)
        with warnings.catch_warnings():
            warnings.filterwarnings("error", message=".*predictive intervals")
            model.fit(X, y)
        assert model.score(X, y) > 0.9


def _three_sign_classes(rng, n):
    X = rng.normal(size=(n, 2))
    return X, (X[:, 0] > 0).astype(int) + (X[:, 1] > 0)


def test_a_classifier_confidently_wrong_on_its_training_rows_warns(rng):
    # A reviewer's TAGIClassifier(gain_w=1000): training accuracy 0.52 with
    # most rows given P > 0.999, half of them wrongly, and no word.  Its own
    # label below 0.01 / (K - 1) in 40% of the training rows warns, with the
    # estimator's remedy; the default prior (none such row) and too few rows
    # to say do not.
    X, y = _three_sign_classes(rng, 200)
    make = lambda g: TAGIClassifier((16,), max_epochs=5, gain_w=g, random_state=0)  # noqa: E731
    with pytest.warns(UserWarning, match=r"% of the training rows get a probability below "
                      r"0.005 for their own label.*too wide.*gain_w=1000"):
        model = make(1000.0).fit(X, y)
    assert model.score(X, y) < 0.7
    with warnings.catch_warnings():
        warnings.filterwarnings("error", message=".*their own label")
        assert make(1.0).fit(X, y).score(X, y) > 0.9
        make(1000.0).fit(X[:49], y[:49])  # too few rows to say


@pytest.mark.parametrize("n_classes", [2, 3, 10])
def test_the_classifier_check_holds_for_calibrated_and_fires_for_sharpened_probabilities(
        rng, n_classes):
    # Its threshold against the true class probabilities: labels drawn from
    # them give their own label a probability below 0.01 / (K - 1) in at most
    # 1% of the rows in expectation (here 2000 rows; the check warns above 6%),
    # so no warning, whatever K; the same probabilities sharpened (logits times
    # 10, a confidently wrong model) do warn.
    model = TAGIClassifier((2,), max_epochs=1, random_state=0).fit(
        rng.normal(size=(20, 2)), np.arange(20) % n_classes)
    logits = 2.0 * rng.normal(size=(2000, n_classes))
    true = np.exp(logits) / np.exp(logits).sum(axis=1, keepdims=True)
    codes = np.array([rng.choice(n_classes, p=p) for p in true])
    rows = np.arange(2000.0)[:, None]  # the "inputs" index the rows

    def sharpened(temperature):
        def proba(X, xp):
            p = np.exp(logits[X[:, 0].astype(int)] * temperature)
            return p / p.sum(axis=1, keepdims=True)
        return proba

    own = true[np.arange(2000), codes]
    assert np.mean(own < 0.01 / (n_classes - 1)) <= 0.01 + 3 * np.sqrt(0.01 / 2000)
    model._predict_proba_scaled = sharpened(1.0)
    with warnings.catch_warnings():
        warnings.filterwarnings("error", message=".*their own label")
        model._warn_if_confidently_wrong(rows, codes, np)
    model._predict_proba_scaled = sharpened(10.0)
    with pytest.warns(UserWarning, match="their own label"):
        model._warn_if_confidently_wrong(rows, codes, np)


def test_message_passing_many_classes_overconfidence_advises_softmax(rng):
    # The argmax likelihood's pairwise product on 40 classes: 16% of the
    # training rows (50% of the test rows) below 0.01 / 39 for their own
    # label after 10 epochs (benchmarks/noise_level_check.py, where the
    # softmax likelihood, too slow for a test with 40 classes, has none); the
    # warning advises the softmax.  A warm start is checked too.
    from sklearn.datasets import make_classification

    X, y = make_classification(1000, 20, n_informative=10, n_classes=40,
                               n_clusters_per_class=1, random_state=0)
    warm = MessagePassingClassifier((32,), max_epochs=5, warm_start=True, random_state=0)
    with pytest.warns(UserWarning, match=r"their own label.*argmax likelihood's pairwise-probit "
                      r"product.*\(40 here\): prefer likelihood='softmax'"):
        warm.fit(X, y)
    with pytest.warns(UserWarning, match="their own label"):
        warm.set_params(max_epochs=1).fit(X, y)  # (continues the first)
    assert warm.n_iter_ == 6


def test_a_later_batchs_warning_as_an_error_finds_the_batch_taken(rng):
    # BayesianLinearRegressor's ConvergenceWarning, raised inside the batch's
    # update, had met the scaling's rollback as an error: the old scaler came
    # back (the third feature ignored again) while the batch stayed in the
    # statistics, and predictions were wrong (-0.12 for a true -2.67).
    w = np.array([1.0, 2.0, 3.0])
    X1, X2 = rng.normal(size=(50, 3)), rng.normal(size=(50, 3))
    X1[:, 2] = 0.0
    model = BayesianLinearRegressor()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model.partial_fit(X1, X1 @ w)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with pytest.raises(ConvergenceWarning, match="noise-free"):
            model.partial_fit(X2, X2 @ w)
    assert model.stats_.n == 100 and np.isfinite(model.x_scaler_.scale_[2])
    np.testing.assert_allclose(model.predict(X2[:5]), X2[:5] @ w, rtol=1e-4, atol=1e-4)


def test_auto_device_is_the_cpu_for_one_example_at_a_time(rng, monkeypatch):
    # Message passing (and PBP with batch_size=1) take one example at a time:
    # the CPU's compiled kernel, where a GPU runs many small array operations
    # per example.  "auto" picks the CPU for them even with a GPU present;
    # the batched methods take the GPU.
    monkeypatch.setattr(_backend, "cuda_available", lambda: True)
    X = rng.normal(size=(40, 2))
    y = X[:, 0]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = MessagePassingRegressor((4,), max_epochs=1, device="auto").fit(X, y)
        assert model.device_ == "cpu"
        model = PBPRegressor((4,), max_epochs=1, device="auto").fit(X, y)
        assert model.device_ == "cpu"
    assert MessagePassingClassifier(device="auto")._resolve_device() == "cpu"
    for batched in (PBPRegressor(batch_size=8, device="auto"), TAGIRegressor(device="auto"),
                    BayesianLinearRegressor(device="auto")):
        assert batched._resolve_device() == "cuda"


def test_held_warnings_keep_the_process_warnings_and_module_filters(rng, monkeypatch):
    # A later batch's warnings are held until it is kept.  Holding them with
    # warnings.catch_warnings swapped process-wide state: partial_fit calls
    # overlapping in threads (first in, first out) left every later warning of
    # the process recorded into a list nobody read.  And the warnings given
    # after the batch follow module filters, as warnings.warn's do.
    import re
    import threading
    import time

    X = rng.normal(size=(50, 3))
    y = X @ [1.0, 2.0, 3.0]  # noise-free: a ConvergenceWarning in each update
    models = [BayesianLinearRegressor() for _ in range(2)]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for model in models:
            model.partial_fit(X, y)
    real = BayesianLinearRegressor._update_posterior

    def slow(self, stats):
        time.sleep(0.1 if self is models[0] else 0.2)  # (the first in leaves first)
        return real(self, stats)

    monkeypatch.setattr(BayesianLinearRegressor, "_update_posterior", slow)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        filters, show = list(warnings.filters), warnings.showwarning
        first = threading.Thread(target=models[0].partial_fit, args=(X, y))
        first.start()
        time.sleep(0.05)
        second = threading.Thread(target=models[1].partial_fit, args=(X, y))
        second.start()
        first.join()
        second.join()
        assert warnings.filters == filters and warnings.showwarning is show
    with pytest.warns(UserWarning, match="after"):
        warnings.warn("after")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        warnings.filterwarnings("ignore", module=re.escape(__name__))
        models[0].partial_fit(X, y)
    assert not [w for w in caught if "noise-free" in str(w.message)]
    with pytest.warns(ConvergenceWarning, match="noise-free"):
        models[0].partial_fit(X, y)


def test_warnings_work_in_a_module_run_with_python_m(tmp_path):
    # The warning is given through warnings.warn_explicit; with the caller's
    # module globals it asked __main__'s loader for the source, which raises
    # under `python -m` (ImportError, even with -W ignore) and cleared the fit.
    import subprocess
    import sys

    package = tmp_path / "pkg"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "run.py").write_text(
        "import numpy as np\n"
        "from skbayesnn import BayesianLinearRegressor\n"
        "X = np.arange(6.0).reshape(3, 2) + [[0, 1], [0, 3], [0, 2]]\n"
        "model = BayesianLinearRegressor().fit(X, X[:, 0])\n"
        "print(model.noise_precision_ > 0)\n"
    )
    for flag in ("ignore", "always"):
        done = subprocess.run([sys.executable, "-W", flag, "-m", "pkg.run"], cwd=tmp_path,
                              capture_output=True, text=True, timeout=120)
        assert done.returncode == 0, done.stderr
        assert done.stdout.strip() == "True"
        assert ("interpolate" in done.stderr) == (flag == "always")
        assert "run.py:4" in done.stderr or flag == "ignore"
