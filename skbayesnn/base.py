"""Base classes shared by every skbayesnn estimator.

The base does what is common and method-free: parameter and data validation with
scikit-learn's utilities, standardisation of ``X`` and ``y`` (predictions come back
in the original units), the array device, the random generator, ``partial_fit``
plumbing, ``predict(X, return_std=...)`` and ``predict_dist``.  A subclass only
implements the hooks that take and return *standardised* arrays:

``_fit_scaled(X, Y, xp, rng)``
    Train from scratch.
``_partial_fit_scaled(X, Y, xp, rng)``
    One incremental update (online estimators, with :class:`PartialFitMixin`).
``_warm_fit_scaled(X, Y, xp)``
    Continue the fitted model (estimators with a ``warm_start`` parameter):
    ``fit`` calls it instead of ``_fit_scaled`` on a fitted model with
    ``warm_start=True``, after checking that the network is the fitted one.
``_predict_moments_scaled(X, xp)``
    Return ``(mean, epistemic_var, aleatoric_var)``, each of shape
    ``(n_samples, n_outputs)``.

``Y`` is always 2-D inside the hooks; predictions come back with ``y``'s own
dimensions: ``(n_samples,)`` for a 1-D ``y``, ``(n_samples, n_outputs)`` for a
2-D one, also with one column (as ``LinearRegression`` does).  A single-output
estimator ravels a column ``y`` with sklearn's ``DataConversionWarning``, as
``BayesianRidge`` does.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import copy
import dataclasses
import functools
import multiprocessing
import os
import sys
import threading
import warnings
from numbers import Integral

import joblib
import numpy as np
import sklearn
from scipy.special import ndtri as _sp_ndtri
from sklearn import get_config
from sklearn.base import BaseEstimator, ClassifierMixin, RegressorMixin, _fit_context
from sklearn.exceptions import NotFittedError
from sklearn.preprocessing import StandardScaler
from sklearn.utils import check_random_state, check_scalar
from sklearn.utils._param_validation import StrOptions, validate_parameter_constraints
from sklearn.utils.multiclass import check_classification_targets, unique_labels
from sklearn.utils.validation import check_is_fitted, validate_data

from ._backend import DEVICES, asnumpy, cuda_available, get_namespace, resolve_device, to_device
from ._random import check_rng
from .distributions import CategoricalPredictive, NormalPredictive

#: Upper bound of the scale parameters that the estimators square (standard
#: deviations such as noise_std and sigma_v, and precisions): the square of a
#: larger float overflows float64.
MAX_SCALE = 1e150
#: Lower bound of the scale parameters whose square or reciprocal square the
#: estimators take (below it the square underflows).
MIN_SCALE = 1e-150


def _to_namespace(value, xp):
    """Recursively move the arrays in ``value`` (posteriors, statistics, dicts,
    lists) into namespace ``xp``; ``xp = numpy`` copies them to the host."""
    if hasattr(value, "to_namespace") and callable(value.to_namespace):
        return value.to_namespace(xp)
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return dataclasses.replace(value, **{
            f.name: _to_namespace(getattr(value, f.name), xp)
            for f in dataclasses.fields(value) if f.init
        })
    if isinstance(value, dict):
        return {k: _to_namespace(v, xp) for k, v in value.items()}
    if isinstance(value, tuple) and hasattr(value, "_fields"):  # a NamedTuple
        return type(value)(*(_to_namespace(v, xp) for v in value))
    if isinstance(value, (list, tuple)):
        return type(value)(_to_namespace(v, xp) for v in value)
    if isinstance(value, np.ndarray) or type(value).__module__.split(".")[0] == "cupy":
        return to_device(value, xp)
    return value


def _comparable(value):
    """A parameter's value in a form that ``==`` compares (array-likes as lists)."""
    if isinstance(value, (list, tuple)) or hasattr(value, "__array__"):
        return np.asarray(value).tolist()
    return value


#: A column whose values span no more than this many units in the last place
#: of its largest magnitude is taken for a constant one (rounding noise).
_CONSTANT_ULPS = 64
#: ... and a feature (X) within this many: its scale divides new inputs, so a
#: spread at the level of accumulated rounding (a recomputed constant, ~100
#: ulps) would turn an ordinary new value into an input of size 1e13 (a
#: target's scale multiplies, so there a tiny scale is harmless).  4096 ulps
#: are ~1e-12 of the size: 1e9 + U(0, 1) (4.5e6 ulps) is still scaled.
_X_CONSTANT_ULPS = 4096
#: A first ``partial_fit`` batch of fewer rows gets a warning: its standard
#: deviations, which fix the scaling for good, are then rough (20 rows: a
#: relative standard error of about 16%).
_FEW_SCALING_ROWS = 20


def _warn_few_scaling_rows(n):
    if n < _FEW_SCALING_ROWS:
        warn_user(
            f"The first partial_fit batch has {n} row(s), and its statistics fix the "
            "standardisation of the inputs (and of y for a regressor) for every later batch, "
            "so the noise and prior parameters stated in standardised units act on a scale "
            "estimated from these rows alone.  Pass a first batch of at least "
            f"{_FEW_SCALING_ROWS} representative rows.",
            UserWarning,
        )


# Where a warning is not the user's doing: this package, scikit-learn (the
# _fit_context wrapper, validation, model selection), joblib (its workers)
# and contextlib (the context managers).
_OWN_PATHS = (
    os.path.dirname(os.path.abspath(__file__)) + os.sep,
    os.path.abspath(contextlib.__file__),
)
_LIBRARY_PATHS = _OWN_PATHS + (
    os.path.dirname(os.path.abspath(sklearn.__file__)) + os.sep,
    os.path.dirname(os.path.abspath(joblib.__file__)) + os.sep,
)


#: The checks of a fitted model on its training rows (the regressors'
#: :meth:`~BaseBayesianRegressor._warn_if_noise_too_small`, the classifiers'
#: :meth:`~BaseBayesianClassifier._warn_if_confidently_wrong`) read at most
#: ``_FIT_CHECK_MAX_ROWS`` of them and need ``_FIT_CHECK_ROWS``.
_FIT_CHECK_ROWS = 50
_FIT_CHECK_MAX_ROWS = 1000


def _fit_check_chunks(n, xp):
    """Indices (in namespace ``xp``) of at most ``_FIT_CHECK_MAX_ROWS`` evenly
    spaced rows of ``n`` (sorted data stay represented), in chunks of 100, so
    that a check adds little to a fit's peak memory."""
    rows = np.unique(np.linspace(0, n - 1, min(n, _FIT_CHECK_MAX_ROWS)).astype(np.int64))
    for start in range(0, rows.size, 100):
        yield xp.asarray(rows[start:start + 100])


def share_outside_intervals(abs_z, confidence=0.95):
    """Share of the rows (axis 0) whose standardised residual ``|y - mean| /
    sd`` puts them outside their central ``confidence`` Gaussian interval:
    ``1 - confidence`` for a calibrated predictive.  It tests what an
    overconfident predictive gets wrong, whatever the residuals' shape:
    the median of ``|z|`` had called calibrated fits with uniform or
    two-valued residuals overconfident, and the root mean square one with
    ten outliers among 2000 rows
    (:meth:`BaseBayesianRegressor._warn_if_noise_too_small`)."""
    return np.mean(abs_z > _sp_ndtri(0.5 + 0.5 * confidence), axis=0)


# Where a call made in a worker thread or process starts: no user frame lies
# beyond these.
_WORKER_PATHS = (
    os.path.abspath(threading.__file__),
    os.path.dirname(os.path.abspath(multiprocessing.__file__)) + os.sep,
    os.path.dirname(os.path.abspath(concurrent.futures.__file__)) + os.sep,
)


def warn_user(message, category=UserWarning):
    """``warnings.warn`` attributed to the user's call: the first frame outside
    this package, scikit-learn, joblib and contextlib, however many of the
    library's own calls lie between (a fixed ``stacklevel`` pointed into the
    library wherever a method added a frame, e.g. an estimator's ``fit``
    calling the base's), so that module-based warning filters and the
    reported line work.  In a worker thread or process (``n_jobs``) that
    frame is the worker's start in the standard library: the warning then
    goes to the first frame outside this package and contextlib.

    Inside :func:`held_warnings` (this thread) the warning is held, not given.
    """
    frame = first = sys._getframe(1)
    outside_package = None
    while frame is not None:
        path = os.path.abspath(frame.f_code.co_filename)
        if outside_package is None and not path.startswith(_OWN_PATHS):
            outside_package = frame
        if not path.startswith(_LIBRARY_PATHS):
            break
        frame = frame.f_back
    if frame is None or path.startswith(_WORKER_PATHS):
        frame = outside_package or first
    give_warnings([(message, category, frame.f_code.co_filename, frame.f_lineno,
                    frame.f_globals)])


# The warnings held in this thread (held_warnings), or None.
_HELD = threading.local()


@contextlib.contextmanager
def held_warnings():
    """Context in which this thread's :func:`warn_user` warnings are held, not
    given; yields their list, for :func:`give_warnings` once the work they
    speak of is kept (a warning turned into an error then finds it done,
    not cut short), or to drop.  Thread-local: ``warnings.catch_warnings``
    swaps process-wide state, and overlapping calls in threads (``n_jobs``
    with the threading backend) had left every later warning of the process
    recorded into a list nobody read."""
    outer = getattr(_HELD, "warnings", None)
    held = []
    _HELD.warnings = held
    try:
        yield held
    finally:
        _HELD.warnings = outer


def give_warnings(held):
    """Give warnings held by :func:`held_warnings` (to an enclosing one's list,
    if any), as ``warnings.warn`` gives them: its registry, module name and
    filters."""
    outer = getattr(_HELD, "warnings", None)
    if outer is not None:
        outer.extend(held)
        return
    for message, category, filename, lineno, module_globals in held:
        # (no module_globals: warn_explicit would then ask the module's loader
        # for its source, which raises under `python -m` (__main__) or for a
        # file deleted since import; warnings.warn does not)
        warnings.warn_explicit(
            message, category, filename, lineno,
            module=module_globals.get("__name__", "<string>"),
            registry=module_globals.setdefault("__warningregistry__", {}),
        )


def fit_input_scaler(X, max_abs_z=None):
    """A ``StandardScaler`` fitted on ``X``, optionally with floored scales.

    With ``max_abs_z = c``, a feature whose standard deviation is below
    ``(max - min) / c`` is divided by ``(max - min) / c`` instead, so every
    standardised training value lies in ``[-c, c]``.  Without it, a feature that is
    nearly constant in training (a pixel that is almost always 0) turns its rare
    values into inputs of size 50-90, where a network's untrained weights dominate
    the prediction.

    A feature constant in ``X`` (its values within ``_X_CONSTANT_ULPS`` units
    in the last place, :func:`_varies`) gets an infinite scale: it is
    standardised to 0, so the model ignores it.  The data say nothing of its
    effect, and any finite scale would make
    predictions for its other values depend on the units it is given in
    (``StandardScaler``'s scale 1 does).  A later training batch in which it
    varies gives it a scale (:func:`scale_ignored_features`).
    """
    scaler, varies = _fit_standard_scaler(X, "X", ulps=_X_CONSTANT_ULPS)
    span = np.max(X, axis=0) - np.min(X, axis=0)
    if max_abs_z is not None:
        scaler.scale_ = np.maximum(scaler.scale_, span / max_abs_z)
        _check_scaling(scaler, "X")
    scaler.scale_ = np.where(varies, scaler.scale_, np.inf)
    drifting = np.flatnonzero(~varies & (span > 0))
    if drifting.size:  # (not exactly constant: say so)
        warn_user(
            f"X column(s) {drifting.tolist()} vary only within {_X_CONSTANT_ULPS} units in the "
            "last place (the level of rounding), so the model ignores them.  Subtract their "
            "mean first if that variation is real.",
            UserWarning,
        )
    return scaler


def scale_ignored_features(scaler, X, max_abs_z=None):
    """New ``scale_`` for the ignored features (infinite scale) of ``scaler``
    that take another value in the training batch ``X``, or None if none does.

    Every value the model has seen of such a feature was standardised to 0,
    so its weights have learned nothing yet, and any scale is consistent with
    the training so far: the batch's root-mean-square deviation from the
    earlier constant (``mean_``), floored as :func:`fit_input_scaler` floors
    (``max_abs_z``).  A deviation within ``_X_CONSTANT_ULPS`` units in the
    last place of the constant leaves the feature ignored (a constant 0 has
    no such margin: any later nonzero value, rounding residue or not, sets
    a scale).  Returns ``(scale, columns)``.
    """
    ignored = np.flatnonzero(np.isinf(scaler.scale_))
    if ignored.size == 0:
        return None
    centre = scaler.mean_[ignored]
    with np.errstate(over="ignore", invalid="ignore"):
        deviation = X[:, ignored] - centre
        moved = np.any(np.abs(deviation) > _X_CONSTANT_ULPS * np.spacing(np.abs(centre)),
                       axis=0)
        if not np.any(moved):
            return None
        deviation = deviation[:, moved]
        peak = np.max(np.abs(deviation), axis=0)
        # (scaled by the peak first: the squares of values near 1e154 overflow)
        rms = peak * np.sqrt(np.mean((deviation / peak) ** 2, axis=0))
    if max_abs_z is not None:
        rms = np.maximum(rms, peak / max_abs_z)
    columns = ignored[moved]
    if not np.all(np.isfinite(rms) & (rms >= np.finfo(np.float64).tiny)):
        raise ValueError(
            f"X cannot be standardised in float64: column(s) {columns.tolist()} (constant "
            "where the scaling was learned) take values whose spread overflows or underflows "
            "float64.  Rescale X (e.g. by a power of ten)."
        )
    scale = scaler.scale_.copy()
    scale[columns] = rms
    return scale, columns


def _varies(values, ulps=_CONSTANT_ULPS):
    """Whether each column of ``values`` spans more than ``ulps`` units in the
    last place of its largest magnitude.

    ``StandardScaler`` takes a column for a constant one when its standard
    deviation is below about ``n eps |mean|``, a bound on the rounding error of
    its variance; its two-pass variance is far more accurate than that, and
    the bound also takes columns of hundreds of distinct values (``1e6 + 1e-8
    z`` at 200 rows), which then kept scale 1: a noise level or prior in
    standardised units acted in the column's own units (R^2 -1e9 on such a
    target).
    """
    top = np.max(values, axis=0)
    bottom = np.min(values, axis=0)
    size = np.maximum(np.abs(top), np.abs(bottom))
    with np.errstate(over="ignore"):
        return (top - bottom) > ulps * np.spacing(size)


def _fit_standard_scaler(values, name, ulps=_CONSTANT_ULPS):
    """``StandardScaler().fit(values)`` with scale ``sqrt(var_)`` for every
    column that :func:`_varies` and scale 1 for the others, and the mask of
    the former; or a ValueError where the mean or the standard deviation of a
    column is not finite in float64 (values near 1e154 and beyond, whose
    squares overflow): a model fitted on such scaling would predict NaN.

    The scaler always returns arrays: sklearn's ``set_output`` configuration
    (``transform_output="pandas"`` or ``"polars"``) is for the user's
    transformers, not for this internal one (as in sklearn's own
    ``PowerTransformer``)."""
    with np.errstate(over="ignore", invalid="ignore", under="ignore"):
        scaler = StandardScaler().set_output(transform="default").fit(values)
    varies = _varies(values, ulps)
    _check_scaling(scaler, name, varies)
    scaler.scale_ = np.where(varies, np.sqrt(scaler.var_), 1.0)
    return scaler, varies


def _fit_target_scaler(Y):
    """The ``StandardScaler`` of the regression targets, with a warning for a
    constant column (to within rounding, :func:`_varies`): it gets scale 1, so
    that parameters stated in standardised units (noise levels, priors) act in
    the target's own units."""
    scaler, varies = _fit_standard_scaler(Y, "y")
    constant = np.flatnonzero(~varies)
    if constant.size:
        warn_user(
            f"y is constant (column(s) {constant.tolist()}) in the data that sets its "
            "scaling, so its scale is taken as 1: parameters stated in standardised "
            "units (noise levels, priors) then act in y's own units.  With "
            "partial_fit, make the first batch representative.",
            UserWarning,
        )
    return scaler


def _check_scaling(scaler, name, varies=None):
    bad = ~(np.isfinite(scaler.mean_) & np.isfinite(scaler.scale_))
    # A variance that overflows to inf while the mean stays finite (values
    # near 1e153-1e160, depending on n) is taken by StandardScaler for a
    # constant column and given scale 1: the model would then silently see
    # inputs of size 1e153.
    bad |= ~np.isfinite(scaler.var_)
    if np.any(bad):
        columns = np.flatnonzero(bad).tolist()
        raise ValueError(
            f"{name} cannot be standardised in float64: the mean or standard deviation of "
            f"column(s) {columns} overflows.  Rescale {name} (e.g. divide by a power of ten)."
        )
    if varies is not None:
        # A column whose values differ but whose variance underflows to 0
        # (values near 1e-170) would look constant to the model, and one whose
        # variance is subnormal (1e-158 to 1e-161) has lost digits of its scale.
        underflow = varies & (scaler.var_ < np.finfo(np.float64).tiny)
        if np.any(underflow):
            raise ValueError(
                f"{name} cannot be standardised in float64: column(s) "
                f"{np.flatnonzero(underflow).tolist()} vary but their variance underflows "
                f"float64.  Rescale {name} (e.g. multiply by a power of ten)."
            )


def check_hidden_layer_sizes(hidden_layer_sizes):
    """``hidden_layer_sizes`` as a list of positive ints, or a ValueError.

    Accepts an int (one hidden layer) or a non-empty sequence of ints, as
    sklearn's ``MLPRegressor`` does.
    """
    # The elements as given: np.atleast_1d would turn (8, True) into [8, 1].
    if isinstance(hidden_layer_sizes, np.ndarray) and hidden_layer_sizes.ndim == 0:
        hidden_layer_sizes = hidden_layer_sizes.item()
    try:
        sizes = list(hidden_layer_sizes)
    except TypeError:
        sizes = [hidden_layer_sizes]
    if not sizes or any(
        isinstance(h, (bool, np.bool_)) or not isinstance(h, (Integral, np.integer)) or h < 1
        for h in sizes
    ):
        raise ValueError(
            "hidden_layer_sizes must be a non-empty sequence of positive integers, "
            f"got {hidden_layer_sizes!r}."
        )
    return [int(h) for h in sizes]


class _BayesianEstimatorMixin:
    """What regressors and classifiers share: device, logging, random generator,
    input scaling, pickling of device arrays."""

    _parameter_constraints: dict = {
        "device": [StrOptions(set(DEVICES))],
        "random_state": ["random_state"],
        "verbose": ["verbose"],
    }

    #: Parameters read only when the model is created (by ``fit`` or the first
    #: ``partial_fit``), besides ``device``: priors, initial scales, the input
    #: scaling.  Their values
    #: then are recorded, and a later ``partial_fit`` refuses a change, which
    #: could not take effect (:meth:`_check_structure`).
    _creation_params: tuple = ()

    #: Fitted attributes that live on the compute device (NumPy or CuPy arrays);
    #: pickling copies them to the host and loading moves them back (if a GPU is
    #: there), so a GPU-fitted model loads anywhere.
    _device_attributes: tuple = ()

    def _prediction_param(self, name):
        """Parameter ``name`` for prediction, checked against its constraints.

        Prediction reads some parameters (noise levels, link scales) at every
        call, so they may have been set after ``fit``, where ``_validate_params``
        did not see them; an invalid one raises instead of giving a wrong
        predictive.
        """
        value = getattr(self, name)
        validate_parameter_constraints(
            {name: self._parameter_constraints[name]}, {name: value},
            caller_name=type(self).__name__,
        )
        return value

    def _log(self, message, level=1):
        if self.verbose >= level:
            print(f"[{type(self).__name__}] {message}", flush=True)

    def _scale_X(self, X, xp):
        return to_device(self.x_scaler_.transform(X), xp)

    @contextlib.contextmanager
    def _training_X(self, X, xp):
        """Context of a batch that continues training (``partial_fit``, a warm
        start): yields :meth:`_scale_X` of ``X`` after giving the features
        ignored so far a scale where the batch varies them
        (:func:`scale_ignored_features`).

        The new scaling is a new ``x_scaler_`` (a copy of the estimator shares
        the old one).  A batch refused inside the block (an exception) puts
        the old one back; a kept batch is then told of in a warning, after
        the block.  The library's warnings raised inside the block (the
        update's own, :func:`held_warnings`) are given after it too, and only
        for a kept batch: a warning turned into an error
        (``simplefilter("error")``) then finds the batch taken and the model
        whole, where inside it had cut the update short or restored the old
        scaling under a batch already in the posterior.
        """
        old = self.x_scaler_
        found = scale_ignored_features(old, X, getattr(self, "max_abs_z", None))
        if found is not None:
            self.x_scaler_ = copy.copy(old)
            self.x_scaler_.scale_, columns = found
        try:
            with held_warnings() as held:
                yield self._scale_X(X, xp)
        except BaseException:
            self.x_scaler_ = old
            raise  # (a refused batch's warnings are dropped with it)
        give_warnings(held)
        if found is not None:
            warn_user(
                f"X column(s) {columns.tolist()} were constant in the data that set the input "
                "scaling, so the model has ignored them; they vary in this batch and are "
                "scaled by its root-mean-square deviation from that constant (floored by "
                "max_abs_z) from now on.",
                UserWarning,
            )

    def _continues_fit(self):
        """Whether ``fit`` continues the fitted model: ``warm_start=True``, in
        the estimators that have it, on a fitted model."""
        return bool(getattr(self, "warm_start", False)) and hasattr(self, "state_")

    @contextlib.contextmanager
    def _warm_start(self, X, xp):
        """Context of a warm ``fit``: :meth:`_check_warm_start`, then the data
        scaled as a later batch is (:meth:`_training_X`);
        yields the standardised ``X`` for ``_warm_fit_scaled``."""
        self._check_warm_start()
        with self._training_X(X, xp) as X_scaled:
            yield X_scaled

    def _check_warm_start(self):
        """Before a warm fit: the fitted network is the one the parameters ask for."""
        self._check_structure("warm_start", "set warm_start=False to fit a new one")

    def _scaled_input(self, X):
        """Check that the model is fitted, validate ``X`` against the fit and
        standardise it on the fitted device; returns ``(X_scaled, xp)``."""
        check_is_fitted(self)
        X = validate_data(self, X, reset=False, dtype=np.float64)
        xp = self._namespace()
        return self._scale_X(X, xp), xp

    def _refuse_nonfinite_training(self, **arrays):
        """A ValueError where training data hold NaN or infinity, which
        ``validate_data`` lets through under
        ``sklearn.set_config(assume_finite=True)``: a fit on them is silently
        wrong (PBP read a NaN target as a constant ``y`` and fitted it).  One
        pass over the data, little against any fit."""
        if not get_config()["assume_finite"]:
            return  # (validate_data has checked them)
        for name, values in arrays.items():
            if not np.all(np.isfinite(values)):
                raise ValueError(
                    f"{type(self).__name__} cannot train on this {name}: it contains NaN or "
                    "infinity, which sklearn.set_config(assume_finite=True) let through."
                )

    def _refuse_nan_inputs(self, X_scaled):
        """A ValueError where the (standardised) inputs hold NaN, which only
        ``sklearn.set_config(assume_finite=True)`` lets through: the overflow
        message spoke of inputs "nan training standard deviations" out.  (A
        finite input whose standardisation overflows is inf, not NaN.)"""
        nan_rows = np.isnan(asnumpy(X_scaled)).any(axis=1)
        if nan_rows.any():
            raise ValueError(
                f"{type(self).__name__} cannot predict {int(nan_rows.sum())} of "
                f"{nan_rows.size} rows of X: they contain NaN (or infinity), which "
                "sklearn.set_config(assume_finite=True) let through."
            )

    def _check_finite_prediction(self, X_scaled, *outputs):
        """Raise a clear error where a prediction overflowed (never NaN out).

        ``X_scaled``: the standardised inputs; ``outputs``: host arrays with
        one row per row of ``X``.  Finite inputs can still overflow the
        network's moments when they lie hundreds of orders of magnitude
        outside the training data.
        """
        bad = np.zeros(X_scaled.shape[0], dtype=bool)
        for out in outputs:
            out = np.asarray(out)
            bad |= ~np.isfinite(out.reshape(out.shape[0], -1)).all(axis=1)
        if bad.any():
            self._refuse_nan_inputs(X_scaled)
            z = float(np.max(np.abs(asnumpy(X_scaled)[bad])))
            if z <= 10.0:  # not the inputs: the fitted model itself
                why = (f"although their inputs lie within {z:.3g} training standard deviations "
                       "of the training mean. The fitted model's moments are too large for "
                       "float64: check its prior and initialisation parameters")
            else:
                why = (f"(their inputs reach {z:.3g} training standard deviations from the "
                       "training mean). Rescale or clip X")
            raise ValueError(
                f"{type(self).__name__} cannot predict {int(bad.sum())} of {bad.size} rows of "
                f"X: the predictive distribution overflows there {why}"
                + (", or rescale y." if hasattr(self, "y_scaler_") else ".")
            )

    def _check_predicts_training_rows(self, moments, advice):
        """After training: a finite posterior can still overflow its own forward
        pass (a huge initial weight scale or prior variance), and then it
        cannot predict even the training rows.  ``moments``: its predictive
        arrays on some training rows (computed with overflow warnings off)."""
        if not all(bool(np.all(np.isfinite(asnumpy(a)))) for a in moments):
            raise ValueError(
                f"{type(self).__name__} training diverged: the fitted network's predictive "
                f"overflows on the training inputs.  {advice}"
            )

    def _namespace(self):
        """Array namespace for the fitted device; falls back to NumPy when a model
        fitted on a GPU is used on a machine without one."""
        if self.device_ == "cuda" and not cuda_available():
            warn_user(
                f"{type(self).__name__} was fitted on a GPU but no GPU is available "
                "now; computing on the CPU.",
                RuntimeWarning,
            )
            return np
        return get_namespace(self.device_)

    def _start(self, X):
        """Resolve the device, learn the input scaling, seed the generator; returns
        the namespace.  Called by ``fit`` and by the first ``partial_fit``."""
        self.device_ = self._resolve_device()
        # Estimators without a ``max_abs_z`` parameter use plain standardisation.
        self.x_scaler_ = fit_input_scaler(X, getattr(self, "max_abs_z", None))
        self._creation_values = {name: self._creation_value(name)
                                 for name in ("device", *self._creation_params)}
        self._rng = self._make_rng()
        return get_namespace(self.device_)

    def _resolve_device(self):
        """The device ``fit`` (or a first ``partial_fit``) computes on; an
        estimator whose GPU path is the slower one overrides what ``"auto"``
        picks."""
        return resolve_device(self.device)

    def _make_rng(self):
        # A Generator seeded from sklearn's random_state convention (None, int or
        # RandomState), so one random_state reproduces a whole fit.
        seed = check_random_state(self.random_state).randint(np.iinfo(np.int32).max)
        return np.random.default_rng(seed)

    # -------------------------------------------------------------- pickling
    def __getstate__(self):
        # Device arrays go to the host so that a model trained on a GPU loads on a
        # machine without one (DESIGN.md, "Contracts").
        # A copy: on Python >= 3.11 object.__getstate__ (and so BaseEstimator's,
        # outside sklearn) returns the live __dict__, which must keep its device arrays.
        state = dict(super().__getstate__())
        for name in self._device_attributes:
            if name in state:
                state[name] = _to_namespace(state[name], np)
        return state

    def __setstate__(self, state):
        super().__setstate__(state)
        if getattr(self, "device_", "cpu") == "cuda" and cuda_available():
            xp = get_namespace("cuda")
            for name in self._device_attributes:
                if name in self.__dict__:
                    self.__dict__[name] = _to_namespace(self.__dict__[name], xp)

    #: Private attributes that fitting sets besides the ``name_`` ones.
    _fitted_private = ("_rng", "_y_ndim", "_creation_values")

    def _network_structure(self, fitted):
        """The parameters that shape the network built by ``fit`` or the first
        ``partial_fit``, as a dict: as the parameters ask now (``fitted=False``)
        or as the fitted model has them, read off its state (``True``).  An
        estimator that continues training overrides it; ``{}``: nothing to
        compare."""
        return {}

    def _creation_value(self, name):
        """Parameter ``name`` of :attr:`_creation_params` as it takes effect, in a
        form that ``==`` compares (an estimator may resolve it, e.g. a scalar
        meaning one value per layer)."""
        if name == "device":
            # Compared with the device the model was created on (device_): "auto"
            # goes on with it whatever the machine has now, and a GPU model loaded
            # where there is no GPU computes on the CPU anyway, so "cpu" is no change.
            created = self.__dict__.get("device_")
            if created is None or self.device == "auto":
                return created or self.device
            if self.device == "cpu" and created == "cuda" and not cuda_available():
                return "cuda"
            return self.device
        return _comparable(getattr(self, name))

    def _check_structure(self, action="partial_fit", remedy="call fit to start a new one"):
        """Before training continues (a later ``partial_fit``, a warm start): the
        network's parameters, and those of :attr:`_creation_params`, are those
        of the fitted model (a change could not take effect, and would
        otherwise be silently ignored)."""
        now = self._network_structure(fitted=False)
        fitted = self._network_structure(fitted=True)
        # (not recorded in models pickled before the record existed)
        created = self.__dict__.get("_creation_values", {})
        now.update({name: self._creation_value(name) for name in created})
        fitted.update(created)
        changed = [name for name in now if now[name] != fitted[name]]
        if changed:
            raise ValueError(
                f"{action} continues the fitted model ("
                + ", ".join(f"{name}={fitted[name]!r}" for name in changed)
                + "), but the parameters now ask for "
                + ", ".join(f"{name}={now[name]!r}" for name in changed)
                + f"; {remedy}."
            )

    def _clear_fitted(self):
        """Forget everything learned: at the start of ``fit``, and when a fit or
        a first ``partial_fit`` fails.

        Fitted attributes (``name_``, and :attr:`_fitted_private`) only: the
        parameters and the estimator's configuration, e.g. its metadata
        requests (``set_score_request``), stay.
        """
        params = set(self.get_params(deep=False))
        for name in list(self.__dict__):
            fitted = name.endswith("_") and not name.startswith("__")
            if name not in params and (fitted or name in self._fitted_private):
                del self.__dict__[name]


class BaseBayesianRegressor(_BayesianEstimatorMixin, RegressorMixin, BaseEstimator):
    """Common machinery of the Bayesian regressors (see the module docstring).

    Fitted attributes set by the base
    ---------------------------------
    n_features_in_ : int
    feature_names_in_ : ndarray of str, when X has string column names
    n_outputs_ : int
    x_scaler_, y_scaler_ : StandardScaler
        Standardisation of the inputs and targets, learned on the data passed to
        ``fit`` (or to the first ``partial_fit``).  Features constant in that
        data (to 4096 ulps) get an infinite scale, so the model ignores
        them until a later training batch varies them (then they are scaled
        from it, with a warning); a constant target gets scale 1, with a
        warning.
    device_ : {"cpu", "cuda"}
        The device resolved from ``device``.
    """

    #: Whether a 2-D ``y`` with several columns is accepted.
    _supports_multi_output = False

    # ----------------------------------------------------------------- hooks
    def _fit_scaled(self, X, Y, xp, rng):  # pragma: no cover - abstract
        raise NotImplementedError

    def _partial_fit_scaled(self, X, Y, xp, rng):  # pragma: no cover - abstract
        raise NotImplementedError

    def _predict_moments_scaled(self, X, xp):  # pragma: no cover - abstract
        raise NotImplementedError

    # ------------------------------------------------------------ utilities
    def _validate_training_data(self, X, y, *, reset, min_samples):
        X, y = validate_data(
            self,
            X,
            y,
            reset=reset,
            dtype=np.float64,
            multi_output=self._supports_multi_output,
            y_numeric=True,
            ensure_min_samples=min_samples,
        )
        # y_numeric converts only object arrays: numeric strings ("1.5") arrive as
        # str, which StandardScaler would convert, but nothing else here would
        y = np.asarray(y, dtype=np.float64)
        self._refuse_nonfinite_training(X=X, y=y)
        Y = y.reshape(-1, 1) if y.ndim == 1 else y
        if reset:
            self._y_ndim = y.ndim
            self.n_outputs_ = Y.shape[1]
        elif Y.shape[1] != self.n_outputs_:
            raise ValueError(
                f"y has {Y.shape[1]} output columns but {type(self).__name__} was "
                f"fitted with {self.n_outputs_}."
            )
        return X, Y

    def _snapshot(self, **copies):
        """A function that puts the model's attributes back as they are now.
        Updates rebind attributes, so a shallow copy is a snapshot; ``copies``
        gives copies of those that an update changes in place."""
        before = {**self.__dict__, **copies}
        if "_rng" in self.__dict__ and "_rng" not in copies:
            # (the generator advances in place: a refused update that shuffled
            # had moved the model's random stream on)
            before["_rng"] = copy.deepcopy(self._rng)

        def restore():
            self.__dict__.clear()
            self.__dict__.update(before)

        return restore

    def _refuse_batch(self, why, restore):
        """``restore()`` the model as it was before a ``partial_fit`` update and
        raise a ValueError saying ``why`` the batch is refused."""
        restore()
        raise ValueError(
            f"{type(self).__name__}.partial_fit: {why}, so the batch is refused and the "
            "model is as it was.  Its values are far outside the scale of the first call's "
            "data, which every batch is standardised with; rescale y (or X)."
        )

    def _check_batch_predictable(self, X, xp, restore):
        """After a ``partial_fit`` update: the predictive, in ``y``'s units, is
        finite on the batch's own (standardised) rows ``X`` (at most 1000 of
        them); otherwise the batch is refused (:meth:`_refuse_batch`).  A batch
        far outside the first call's scale can leave a finite posterior whose
        predictive overflows everywhere."""
        if not all(bool(np.all(np.isfinite(a))) for a in self._unscaled_moments(X[:1000], xp)):
            self._refuse_batch("after this batch the predictive would overflow on the "
                               "batch's own rows", restore)

    def _scale_Y(self, Y, xp):
        return to_device(self.y_scaler_.transform(Y), xp)

    # ------------------------------------------------------------------ fit
    @_fit_context(prefer_skip_nested_validation=True)
    def fit(self, X, y):
        """Fit the model to training data (continue it, where ``warm_start=True``).

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            Training inputs (at least 2 rows).
        y : array-like of shape (n_samples,) or (n_samples, n_outputs)
            Targets; several columns only where the estimator supports them.

        Returns
        -------
        self : object
            The fitted estimator.
        """
        if self._continues_fit():  # (the estimator's warm_start says how)
            X, Y = self._validate_training_data(X, y, reset=False, min_samples=1)
            xp = self._namespace()
            with self._warm_start(X, xp) as X_scaled:
                Y = self._scale_Y(Y, xp)
                self._warm_fit_scaled(X_scaled, Y, xp)
            self._warn_if_noise_too_small(X_scaled, Y, xp)
            return self
        self._clear_fitted()  # a fit starts afresh (no attribute of an earlier fit stays)
        try:
            X, Y = self._validate_training_data(X, y, reset=True, min_samples=2)
            xp = self._start(X)
            self.y_scaler_ = _fit_target_scaler(Y)
            X, Y = self._scale_X(X, xp), self._scale_Y(Y, xp)
            self._fit_scaled(X, Y, xp, self._rng)
        except BaseException:  # (an interrupt too)
            self._clear_fitted()  # no half-fitted model that partial_fit would extend
            raise
        self._warn_if_noise_too_small(X, Y, xp)  # (after: as an error it leaves the fit)
        return self

    #: The parameter that fixes the observation noise (not learned from the
    #: data), for :meth:`_warn_if_noise_too_small`; None where it is learned.
    _fixed_noise_param = None

    #: A share of the training rows outside their 95% predictive intervals
    #: (:func:`share_outside_intervals`) above this makes the fixed noise
    #: level "too small": three times the 0.05 of a calibrated predictive.
    #: On diabetes and three UCI splits, where the training rows' share was
    #: above 0.1 the test rows' was 1.05-1.51 times it
    #: (``benchmarks/noise_level_check.py``).  For a calibrated predictive
    #: the chance of exceeding it is below 0.5% for any number of rows from
    #: 50 (``_FIT_CHECK_ROWS``; binomial, 0.05: largest at 53 rows, 0.46%).
    _NOISE_SHARE_WARN = 0.15

    def _warn_if_noise_too_small(self, X, Y, xp):
        """After ``fit`` (a warm one too): a UserWarning where more than
        :attr:`_NOISE_SHARE_WARN` of the training rows (at most 1000,
        standardised, evenly spaced; per output) lie outside their 95%
        predictive intervals, i.e. where the fixed noise level
        :attr:`_fixed_noise_param` leaves the predictive overconfident even
        on the data it was fitted to.  Not below 50 rows."""
        name = self._fixed_noise_param
        if name is None or X.shape[0] < _FIT_CHECK_ROWS:
            return
        z = []
        with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
            for chunk in _fit_check_chunks(X.shape[0], xp):
                mean, epi, ale = (asnumpy(a) for a in self._predict_moments_scaled(
                    xp.take(X, chunk, axis=0), xp))
                z.append(np.abs(asnumpy(xp.take(Y, chunk, axis=0)) - mean) / np.sqrt(epi + ale))
        share = share_outside_intervals(np.concatenate(z))
        high = np.flatnonzero(share > self._NOISE_SHARE_WARN)
        if high.size:
            which = "" if share.size == 1 else f" (output(s) {high.tolist()})"
            warn_user(
                f"{type(self).__name__}: {float(np.max(share[high])):.1%} of the training rows "
                f"lie outside their 95% predictive intervals{which} (above 15% warns): the "
                "intervals are too narrow for these data.  "
                f"{name}={getattr(self, name)!r} fixes the noise "
                f"level (in standardised units) below what they need"
                f"{self._noise_remedy(name)}",
                UserWarning,
            )

    def _noise_remedy(self, name):
        """The end of :meth:`_warn_if_noise_too_small`'s message: other causes
        and the advice."""
        return (", or the network underfits (then train longer).  Choose "
                f"{name} by cross-validation, e.g. GridSearchCV with "
                "scoring=skbayesnn.metrics.neg_nlpd_scorer.")

    # -------------------------------------------------------------- predict
    def predict_dist(self, X):
        """Predictive distribution at ``X``, in the target's original units.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)

        Returns
        -------
        dist : NormalPredictive
            Mean, variance and, separately, its ``epistemic_var`` (model
            uncertainty) and ``aleatoric_var`` (observation noise) parts; shapes
            ``(n_samples,)`` for a 1-D ``y`` in ``fit``, ``(n_samples,
            n_outputs)`` for a 2-D one (also with one column) where the
            estimator takes several outputs.
        """
        X, xp = self._scaled_input(X)
        mean, epi, ale, total = self._unscaled_moments(X, xp)
        self._check_finite_prediction(X, mean, epi, ale, total)
        return NormalPredictive(mean, epistemic_var=epi, aleatoric_var=ale)

    def _unscaled_moments(self, X, xp):
        """``(mean, epistemic_var, aleatoric_var, total_var)`` of the predictive at
        standardised rows ``X``, in ``y``'s units, computed with overflow
        warnings off (callers check them: each part finite, the total can
        still overflow)."""
        with np.errstate(over="ignore", invalid="ignore"):
            mean, epi, ale = self._original_units(*self._predict_moments_scaled(X, xp))
            return mean, epi, ale, epi + ale

    def _original_units(self, mean, epi, ale):
        """Standardised predictive moments ``(n, n_outputs)`` as host arrays in
        the target's units (variances floored at 0), with the output axis
        dropped for a 1-D ``y``."""
        scale = self.y_scaler_.scale_
        mean = asnumpy(mean) * scale + self.y_scaler_.mean_
        epi = np.maximum(asnumpy(epi), 0.0) * scale**2
        ale = np.maximum(asnumpy(ale), 0.0) * scale**2
        if self._y_ndim == 1:
            mean, epi, ale = mean[:, 0], epi[:, 0], ale[:, 0]
        return mean, epi, ale

    def predict(self, X, return_std=False):
        """Predictive mean, and optionally its standard deviation.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
        return_std : bool, default=False
            Also return the standard deviation of the full predictive (model
            uncertainty plus observation noise), as sklearn's
            ``GaussianProcessRegressor`` and ``BayesianRidge`` do.

        Returns
        -------
        y_mean : ndarray of shape (n_samples,) or (n_samples, n_outputs)
            1-D for a 1-D ``y`` in ``fit``, 2-D for a 2-D one (also with one
            column) where the estimator takes several outputs.
        y_std : ndarray of the same shape
            Only when ``return_std=True``.
        """
        dist = self.predict_dist(X)
        if return_std:
            return dist.mean(), dist.std()
        return dist.mean()

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.allow_nan = False
        tags.target_tags.single_output = True
        tags.target_tags.multi_output = self._supports_multi_output
        return tags


def _fitted(estimator):
    """Whether ``estimator`` is fitted, as sklearn's ``check_is_fitted`` says."""
    try:
        check_is_fitted(estimator)
    except NotFittedError:
        return False
    return True


def _checks_parameters_when_fitted(partial_fit):
    """Wraps a ``partial_fit`` decorated with sklearn's ``_fit_context``, which
    checks the parameters only while the estimator is unfitted: a later call
    then ran ``set_params``' values unchecked (``n_iter_per_batch=0`` learned
    nothing, ``batch_size=0`` raised a bare ``range()`` error).  Outside it,
    because inside it ``skip_parameter_validation`` is set for nested calls,
    and the user's setting of it is honoured as there."""
    @functools.wraps(partial_fit)
    def checked(self, *args, **kwargs):
        if not get_config()["skip_parameter_validation"] and _fitted(self):
            self._validate_params()
        return partial_fit(self, *args, **kwargs)

    return checked


class PartialFitMixin:
    """``partial_fit`` for estimators that learn online.

    The first call fixes the standardisation of ``X`` and ``y`` from its batch
    (later batches are scaled the same way, since an online model cannot be
    re-standardised), creates the random generator and calls ``_init_online``;
    every call then passes its standardised batch to ``_partial_fit_scaled``.
    Make the first batch representative (fewer than 20 rows warn): with one
    row the target's scale is 1 and hyperparameters stated "in standardised
    units" then act in its own units; a feature constant in the first batch is
    ignored until a batch varies it, which then sets its scale.  A first call
    that fails leaves the estimator unfitted.
    """

    def _init_online(self, n_features, n_outputs, xp, rng):
        """Create the initial (prior) state; override where needed."""

    @_checks_parameters_when_fitted
    @_fit_context(prefer_skip_nested_validation=True)
    def partial_fit(self, X, y):
        """Update the model with one batch of data.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
        y : array-like of shape (n_samples,) or (n_samples, n_outputs)
            Several columns only where the estimator supports them.

        Returns
        -------
        self : object
        """
        first = not hasattr(self, "x_scaler_")
        try:
            X, Y = self._validate_training_data(X, y, reset=first, min_samples=1)
            if first:
                _warn_few_scaling_rows(X.shape[0])
                xp = self._start(X)
                self.y_scaler_ = _fit_target_scaler(Y)
                self._init_online(X.shape[1], Y.shape[1], xp, self._rng)
            else:
                self._check_structure()
                xp = self._namespace()
            with self._training_X(X, xp) as X_scaled:
                self._partial_fit_scaled(X_scaled, self._scale_Y(Y, xp), xp, self._rng)
        except BaseException:
            if first:  # leave no half-built model behind: it is still unfitted
                self._clear_fitted()
            raise
        return self


class BaseBayesianClassifier(_BayesianEstimatorMixin, ClassifierMixin, BaseEstimator):
    """Common machinery of the Bayesian classifiers.

    Labels of any type are mapped to ``0..n_classes-1`` through ``classes_``;
    inputs are standardised as for the regressors.  A subclass implements

    ``_fit_scaled(X, y_index, xp, rng)``
        Train from scratch on standardised inputs and integer class indices.
    ``_partial_fit_scaled(X, y_index, xp, rng)``
        One incremental update (with :meth:`partial_fit`).
    ``_init_online(n_features, n_classes, xp, rng)``
        Create the prior state before the first ``partial_fit``.
    ``_output_moments_scaled(X, xp)``
        Mean and variance of the network's outputs (the weights'
        uncertainty), each of shape ``(n_samples, n_outputs)``.
    ``_proba_from_outputs(mean, var, xp)``
        Class probabilities, shape ``(n_samples, n_classes)``, for outputs of
        that Gaussian, the likelihood's own noise included: at the outputs'
        moments :meth:`predict_proba`, at outputs drawn from them (``var``
        0) :meth:`predict_dist`'s members.
    """

    def _validate_labels(self, X, y, *, reset, min_samples):
        X, y = validate_data(
            self, X, y, reset=reset, dtype=np.float64, ensure_min_samples=min_samples
        )
        check_classification_targets(y)
        self._refuse_nonfinite_training(X=X)
        return X, y

    def _set_classes(self, classes, name="y"):
        if np.ndim(classes) != 1:
            raise ValueError(
                f"classes must be a 1-D array-like of labels, got shape {np.shape(classes)}."
            )
        try:  # NaN, continuous values, strings mixed with numbers (fit's y: checked)
            if name != "y":
                with warnings.catch_warnings():
                    # (many distinct labels "look like regression": here they are classes)
                    warnings.simplefilter("ignore", UserWarning)
                    check_classification_targets(classes)
            classes = unique_labels(classes)
        except ValueError as exc:
            if name == "y":
                raise
            raise ValueError(f"{name}: {exc}") from exc
        if classes.shape[0] < 2:
            where = "samples of at least 2 classes in the data" if name == "y" else (
                f"at least 2 labels in {name}")
            raise ValueError(
                f"{type(self).__name__} needs {where}, got {classes.shape[0]} class."
            )
        self.classes_ = classes

    def _encode(self, y):
        index = np.searchsorted(self.classes_, y)
        index = np.clip(index, 0, len(self.classes_) - 1)
        unknown = self.classes_[index] != y
        if np.any(unknown):
            raise ValueError(
                f"y contains labels not in classes_ {self.classes_.tolist()}: "
                f"{np.unique(y[unknown]).tolist()}"
            )
        return index

    @_fit_context(prefer_skip_nested_validation=True)
    def fit(self, X, y):
        """Fit the classifier (continue it, where ``warm_start=True``).

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
        y : array-like of shape (n_samples,)
            Class labels (numbers or strings), at least two distinct values.

        Returns
        -------
        self : object
        """
        if self._continues_fit():  # (the estimator's warm_start says how)
            X, y = self._validate_labels(X, y, reset=False, min_samples=1)
            xp = self._namespace()
            codes = self._encode(y)
            with self._warm_start(X, xp) as X_scaled:
                self._warm_fit_scaled(X_scaled, codes, xp)
            self._warn_if_confidently_wrong(X_scaled, codes, xp)
            return self
        self._clear_fitted()  # a fit starts afresh (no attribute of an earlier fit stays)
        try:
            X, y = self._validate_labels(X, y, reset=True, min_samples=2)
            self._set_classes(y)
            xp = self._start(X)
            X, codes = self._scale_X(X, xp), self._encode(y)
            self._fit_scaled(X, codes, xp, self._rng)
        except BaseException:  # (an interrupt too)
            self._clear_fitted()  # no half-fitted model that partial_fit would extend
            raise
        self._warn_if_confidently_wrong(X, codes, xp)  # (after, as the regressors')
        return self

    #: A calibrated classifier gives a row's own label a probability below
    #: ``0.01 / (n_classes - 1)`` in at most 1% of the rows (the classes below
    #: that probability occur, together, at most ``n_classes - 1`` times it);
    #: a share of the training rows above this warns.  For a calibrated one
    #: the chance of exceeding it is below 0.5% for any number of rows from 50
    #: (binomial, 0.01: largest at 66 rows, 0.44%).
    _WRONG_SHARE_WARN = 0.06

    def _warn_if_confidently_wrong(self, X, codes, xp):
        """After ``fit`` (a warm one too): a UserWarning where more than
        :attr:`_WRONG_SHARE_WARN` of the training rows (at most 1000,
        standardised, evenly spaced) give their own label a probability below
        ``0.01 / (n_classes - 1)``: probabilities confidently wrong on the
        data the model was fitted to (a prior too wide for the
        linearisation, a diverged fit, an overconfident likelihood), which
        predicting the training rows would not show.  Not below 50 rows."""
        n_classes = len(self.classes_)
        if X.shape[0] < _FIT_CHECK_ROWS:
            return
        below = 0.01 / (n_classes - 1)
        own = []
        with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
            for chunk in _fit_check_chunks(X.shape[0], xp):
                proba = asnumpy(self._predict_proba_scaled(xp.take(X, chunk, axis=0), xp))
                own.append(np.take_along_axis(proba, codes[asnumpy(chunk)][:, None], axis=1))
        share = float(np.mean(np.concatenate(own) < below))
        if share > self._WRONG_SHARE_WARN:
            warn_user(
                f"{type(self).__name__}: {share:.1%} of the training rows get a probability "
                f"below {below:.2g} for their own label (a calibrated classifier: at most 1% "
                f"of them; above {self._WRONG_SHARE_WARN:.0%} warns): the probabilities are "
                "confidently wrong even on the data the model was fitted to.  "
                f"{self._overconfidence_remedy()}",
                UserWarning,
            )

    def _overconfidence_remedy(self):
        """The end of :meth:`_warn_if_confidently_wrong`'s message."""
        return ("Choose the prior and noise parameters by cross-validation, e.g. "
                "GridSearchCV with scoring='neg_log_loss'.")

    @_checks_parameters_when_fitted
    @_fit_context(prefer_skip_nested_validation=True)
    def partial_fit(self, X, y, classes=None):
        """Update the classifier with one batch.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
        y : array-like of shape (n_samples,)
        classes : array-like of shape (n_classes,), default=None
            All labels that can ever occur; required on the first call (as for
            sklearn's online classifiers).  On later calls it may be omitted;
            if given, it must name the same labels as ``classes_``.  The first
            call also fixes the input standardisation.

        Returns
        -------
        self : object
        """
        first = not hasattr(self, "classes_")
        try:
            X, y = self._validate_labels(X, y, reset=first, min_samples=1)
            if first:
                if classes is None:
                    raise ValueError("classes must be passed on the first call to partial_fit.")
                self._set_classes(classes, "classes")
                _warn_few_scaling_rows(X.shape[0])
                xp = self._start(X)
                self._init_online(X.shape[1], len(self.classes_), xp, self._rng)
            else:
                self._check_structure()
                if classes is not None and not np.array_equal(np.unique(classes),
                                                              self.classes_):
                    raise ValueError(
                        f"classes={np.unique(classes).tolist()} is not the same as on the first "
                        f"call to partial_fit, classes_={self.classes_.tolist()}."
                    )
                xp = self._namespace()
            with self._training_X(X, xp) as X_scaled:
                self._partial_fit_scaled(X_scaled, self._encode(y), xp, self._rng)
        except BaseException:
            if first:
                self._clear_fitted()
            raise
        return self

    def predict_proba(self, X):
        """Predictive class probabilities.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)

        Returns
        -------
        proba : ndarray of shape (n_samples, n_classes)
            Columns in the order of ``classes_``.
        """
        X, xp = self._scaled_input(X)
        with np.errstate(over="ignore", invalid="ignore"):  # checked below, with a clear error
            proba = asnumpy(self._predict_proba_scaled(X, xp))
        self._check_finite_prediction(X, proba)
        return proba

    def predict_log_proba(self, X):
        """Logarithm of :meth:`predict_proba` (``-inf`` where a probability is 0).

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)

        Returns
        -------
        log_proba : ndarray of shape (n_samples, n_classes)
            Columns in the order of ``classes_``.
        """
        with np.errstate(divide="ignore"):
            return np.log(self.predict_proba(X))

    def predict(self, X):
        """Most probable class of each row.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)

        Returns
        -------
        y : ndarray of shape (n_samples,)
        """
        proba = self.predict_proba(X)
        return self.classes_[np.argmax(proba, axis=1)]

    def predict_dist(self, X, n_members=None, random_state=None):
        """Predictive categorical distribution (probabilities, entropy, sampling).

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
        n_members : int or None, default=None
            With an int, the distribution also carries that many Monte Carlo
            members, for :meth:`~skbayesnn.distributions.CategoricalPredictive.expected_entropy`
            and :meth:`~skbayesnn.distributions.CategoricalPredictive.mutual_information`
            (the epistemic part of the entropy): the class probabilities given
            the network's outputs drawn from their Gaussian predictive (the
            weights' uncertainty), the likelihood's own noise included.  Its
            probabilities are then the members' mean.  For two classes the
            argmax and one-hot regression likelihoods' closed form (and TAGI's
            trees of 2, 4, 8... classes) is, in expectation, that mean; the
            softmax's probit and, with more classes, the renormalised pairwise
            or tree probits approximate it.  Where the predictive is wide (few
            training rows, inputs far from the data) the two can differ by
            tenths, and so can their argmax (:meth:`predict`).  In the cases
            of ``benchmarks/members_vs_closed_form.py``
            :meth:`predict_proba`'s test log-loss was the lower one with the
            argmax and regression likelihoods and within 0.02 of the members'
            with TAGI and with a fitted softmax.  The members take
            ``8 n_members n_samples n_classes``
            bytes, and the draws and the probabilities' temporaries about as
            much again.
        random_state : int, RandomState instance, Generator or None, default=None
            Seeds the draws of ``n_members``.

        Returns
        -------
        dist : CategoricalPredictive
        """
        if n_members is None:
            return CategoricalPredictive(self.predict_proba(X), classes=self.classes_)
        if isinstance(n_members, bool):
            raise TypeError(f"n_members must be an int, got {n_members!r}.")
        n_members = check_scalar(n_members, "n_members", Integral, min_val=1)
        X, xp = self._scaled_input(X)
        with np.errstate(over="ignore", invalid="ignore"):  # checked below
            mean, var = (asnumpy(a) for a in self._output_moments_scaled(X, xp))
        self._check_finite_prediction(X, mean, var)
        # drawn on the host: the same members on every device for one seed
        rng = check_rng(random_state)
        n, k = mean.shape
        draws = mean + np.sqrt(np.maximum(var, 0.0)) * rng.standard_normal((n_members, n, k))
        with np.errstate(over="ignore", invalid="ignore"):  # (one call for all members)
            z = xp.asarray(draws.reshape(-1, k))
            members = asnumpy(self._proba_from_outputs(z, xp.zeros(z.shape), xp))
        del draws
        members = members.reshape(n_members, n, -1)
        self._check_finite_prediction(X, members.transpose(1, 0, 2))
        return CategoricalPredictive(members.mean(axis=0), classes=self.classes_,
                                     member_proba=members)

    def _output_moments_scaled(self, X, xp):  # pragma: no cover - abstract
        raise NotImplementedError

    def _proba_from_outputs(self, mean, var, xp):  # pragma: no cover - abstract
        raise NotImplementedError

    def _predict_proba_scaled(self, X, xp):
        """Class probabilities at standardised ``X`` (see the class docstring)."""
        return self._proba_from_outputs(*self._output_moments_scaled(X, xp), xp)

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.allow_nan = False
        return tags
