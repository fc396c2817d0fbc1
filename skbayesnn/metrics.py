"""Metrics and scorers for probabilistic predictions.

Regression metrics take either the parameters of a Gaussian predictive
(``y_mean``, ``y_std``), interval bounds, or a predictive distribution object as
returned by ``predict_dist`` (:class:`~skbayesnn.distributions.NormalPredictive`,
:class:`~skbayesnn.distributions.GaussianMixturePredictive`, or anything with the
same methods, e.g. a frozen :mod:`scipy.stats` distribution):

* :func:`gaussian_nlpd`, :func:`nlpd` -- negative log predictive density;
* :func:`crps_gaussian`, :func:`crps_gaussian_mixture`, :func:`crps` --
  continuous ranked probability score (closed forms);
* :func:`interval_coverage`, :func:`interval_width`, :func:`coverage`,
  :func:`mean_interval_width` -- empirical coverage and mean width of
  predictive intervals;
* :func:`pit_values`, :func:`regression_calibration_error` -- probability
  integral transform and quantile-calibration error.

Classification metrics take class probabilities (``predict_proba``):
:func:`expected_calibration_error`, :func:`brier_score`, :func:`categorical_nll`.

Every metric except :func:`pit_values` returns a weighted mean over samples
(``sample_weight=None`` gives equal weights) as a Python ``float``.  Inputs are
validated with scikit-learn's utilities; NaN or infinite values, negative
standard deviations and inconsistent lengths raise :class:`ValueError`.  A
predictive distribution's batch shape (``shape``, or that of ``mean()``) is
``y_true``'s: ``(n_samples,)`` (or ``(n_samples, 1)``, to which a 1-D
``y_true`` is reshaped), or ``(n_samples, n_outputs)`` for several targets
(each metric's docstring says how it treats the outputs).
Computation is on the host with NumPy/SciPy.

Scorers for ``scoring=`` in :class:`~sklearn.model_selection.GridSearchCV`,
:func:`~sklearn.model_selection.cross_val_score` and
:func:`~sklearn.model_selection.cross_validate` (greater is better, as in
scikit-learn) are instances of :class:`PredictiveScorer`: ``neg_nlpd_scorer``,
``neg_crps_scorer``, ``neg_calibration_error_scorer``,
``neg_coverage_error_scorer``, ``neg_ece_scorer``, ``neg_brier_scorer`` and
``neg_categorical_nll_scorer``.  :func:`get_scorer` resolves their names and
falls back to :func:`sklearn.metrics.get_scorer` for every other name.  Pass the
scorer objects (or ``get_scorer(name)``) to ``scoring=``: scikit-learn's own
string registry does not know these names.
"""

from __future__ import annotations

import copy
import inspect
import math
from numbers import Integral, Real

import numpy as np
from scipy import special, stats
from sklearn.metrics import brier_score_loss as _sk_brier_score_loss
from sklearn.metrics import get_scorer as _sk_get_scorer
from sklearn.metrics import get_scorer_names as _sk_get_scorer_names
from sklearn.metrics import log_loss as _sk_log_loss
from sklearn.utils import check_consistent_length
from sklearn.utils.validation import _check_sample_weight, check_array, column_or_1d

from .distributions import GaussianMixturePredictive, NormalPredictive, _renormalise_rows

__all__ = [
    "PredictiveScorer",
    "brier_score",
    "categorical_nll",
    "coverage",
    "crps",
    "crps_gaussian",
    "crps_gaussian_mixture",
    "expected_calibration_error",
    "gaussian_nlpd",
    "get_scorer",
    "get_scorer_names",
    "interval_coverage",
    "interval_width",
    "mean_interval_width",
    "neg_brier_scorer",
    "neg_calibration_error_scorer",
    "neg_categorical_nll_scorer",
    "neg_coverage_error_scorer",
    "neg_crps_scorer",
    "neg_ece_scorer",
    "neg_nlpd_scorer",
    "nlpd",
    "pit_values",
    "regression_calibration_error",
]

_INV_SQRT_PI = 1.0 / math.sqrt(math.pi)
_INV_SQRT_2PI = 1.0 / math.sqrt(2.0 * math.pi)
_ROOT_MAX = math.sqrt(np.finfo(np.float64).max)  # the largest std whose square is finite


# --------------------------------------------------------------------------- validation
def _check_y(y_true, name="y_true"):
    """1-D finite float array (a column vector ``(n, 1)`` is raveled)."""
    y = check_array(
        y_true, ensure_2d=False, dtype="numeric", input_name=name, ensure_all_finite=True
    )
    if y.ndim == 2 and y.shape[1] != 1:
        raise ValueError(
            f"{name} must be 1-D (single-output targets; nlpd, crps, coverage, pit_values and "
            "regression_calibration_error also take "
            f"several outputs); got an array of shape {y.shape}."
        )
    return column_or_1d(y, input_name=name).astype(np.float64, copy=False)


def _check_param(value, n, name, *, allow_inf=False):
    """A per-sample parameter: a scalar (broadcast) or a 1-D array of length ``n``."""
    arr = np.asarray(value)
    if arr.ndim == 0:
        arr = arr.reshape(1)
        scalar = True
    else:
        scalar = False
    arr = check_array(
        arr,
        ensure_2d=False,
        dtype="numeric",
        input_name=name,
        ensure_all_finite=not allow_inf,
    )
    if allow_inf and np.any(np.isnan(arr)):
        raise ValueError(f"Input {name} contains NaN.")
    if arr.ndim == 2 and arr.shape[1] == 1:
        arr = arr[:, 0]
    if arr.ndim != 1:
        raise ValueError(f"{name} must be 1-D or a scalar; got an array of shape {arr.shape}.")
    arr = arr.astype(np.float64, copy=False)
    if scalar:
        return np.full(n, arr[0])
    if arr.shape[0] != n:
        raise ValueError(
            f"{name} has {arr.shape[0]} entries but y_true has {n} samples "
            "(inconsistent lengths)."
        )
    return arr


def _check_std(y_std, n, name="y_std", *, strictly_positive=False):
    std = _check_param(y_std, n, name)
    if np.any(std < 0):
        raise ValueError(f"{name} must be non-negative; got a minimum of {std.min()!r}.")
    if strictly_positive and np.any(std == 0):
        raise ValueError(
            f"{name} must be strictly positive here (a zero standard deviation has no "
            "density); got zeros."
        )
    return std


def _check_weights(sample_weight, n):
    if sample_weight is None:
        return None
    sw = _check_sample_weight(
        sample_weight, np.empty((n, 0)), dtype=np.float64, ensure_non_negative=True
    )
    if not sw.max() > 0:  # (scikit-learn < 1.9 lets all-zero weights through)
        raise ValueError("sample_weight must not be all zero.")
    # only ratios matter: rescale so that sums neither overflow nor underflow
    return sw / sw.max()


def _weighted_mean(values, sample_weight):
    """Weighted mean of per-sample values as a float (``sample_weight`` validated)."""
    values = np.asarray(values, dtype=np.float64)
    if sample_weight is not None:
        keep = sample_weight > 0  # a zero weight must not turn an infinite value into NaN
        values, sample_weight = values[keep], sample_weight[keep]
    if np.any(np.isposinf(values)) and np.any(np.isneginf(values)):
        raise ValueError(
            "the per-sample values contain both +inf and -inf (e.g. a point-mass predictive "
            "that hits one target exactly and misses another); their mean is undefined."
        )
    if sample_weight is None:
        return float(np.mean(values))
    return float(np.average(values, weights=sample_weight))


def _dist_output(values, n, what, *, shared=False):
    """Validate the per-sample array a distribution method returned.

    ``shared``: a 0-d result is the value of a 0-d distribution shared by all
    samples and is broadcast (``interval``).  Otherwise (``logpdf``, ``cdf``
    at n targets) a 0-d result for n > 1 targets is a joint, reduced value,
    e.g. of a frozen ``scipy.stats.multivariate_normal``, and is refused.
    """
    out = np.asarray(values, dtype=np.float64)
    if out.ndim == 0 and n > 1 and not shared:
        raise ValueError(
            f"{what} returned one number for {n} targets: a joint value (as of a "
            "multivariate distribution), not one per sample. Pass a distribution with one "
            "independent predictive per sample (e.g. scipy.stats.norm(mean, std))."
        )
    if out.ndim == 0:
        out = np.full(n, float(out))
    if out.size == n and out.ndim > 1:
        out = out.reshape(n)
    if out.shape != (n,):
        raise ValueError(
            f"{what} returned an array of shape {out.shape}; expected ({n},) to match "
            "y_true (single-output predictive distributions; nlpd, crps, coverage, "
            "pit_values and regression_calibration_error also take several outputs)."
        )
    return out


def _dist_batch_shape(y_dist):
    """Batch shape of ``y_dist``: its ``shape``, else the shape of its ``mean()``; or None."""
    shape = getattr(y_dist, "shape", None)
    if isinstance(shape, tuple) and all(isinstance(d, Integral) for d in shape):
        return tuple(int(d) for d in shape)
    mean = getattr(y_dist, "mean", None)
    if not callable(mean):
        return None
    try:
        return np.shape(mean())
    except Exception:  # the mean is not needed by the metric; let it fail later
        return None


def _y_like_dist(y, y_dist):
    """``y`` (1-D, ``n`` samples) reshaped to the batch shape of ``y_dist``.

    A distribution of shape ``(n, 1)`` (or any shape of size ``n``) must see
    ``y`` in its own shape, else ``y`` of shape ``(n,)`` broadcasts against it
    to ``(n, n)``.  A 0-d distribution (or one of unknown shape) gets ``y``
    unchanged and broadcasts over it.
    """
    n = y.shape[0]
    shape = _dist_batch_shape(y_dist)
    if shape is None or len(shape) == 0 or shape == y.shape:
        return y
    if sum(size > 1 for size in shape) > 1:
        # (reshaped, a flattened (n, k) y_true had been paired in C order
        # whatever its flattening, and averaged over entries, not outputs)
        raise ValueError(
            f"y_true is 1-D ({n} values) but y_dist has batch shape {shape}, several values "
            f"per sample: for several outputs pass y_true of shape {shape}, one column per "
            "output; if y_dist should hold one distribution per sample, its parameters were "
            "broadcast (e.g. an (n, 1) scale against (n,) locations)."
        )
    if math.prod(shape) != n:
        raise ValueError(
            f"y_dist describes {math.prod(shape)} predictive distributions (batch shape "
            f"{shape}) but y_true has {n} samples (inconsistent lengths; for several outputs "
            "y_true must have the predictive's shape (n_samples, n_outputs); single-output "
            "predictive distributions only)."
        )
    return y.reshape(shape)


def _output_columns(y_true, y_dist, func_name):
    """``[(y_j, y_dist[:, j])]`` for a multi-output ``y_true`` of shape ``(n, k)``,
    ``k > 1``, whose ``y_dist`` has that batch shape; None for one output."""
    y = np.asarray(y_true)
    if y.ndim != 2 or y.shape[1] == 1:
        return None
    shape = _dist_batch_shape(y_dist)
    frozen = _frozen_scipy_columns(y_dist, y.shape) if shape == y.shape else None
    if frozen is not None:
        return list(zip(y.T, frozen))
    if shape != y.shape or not hasattr(y_dist, "__getitem__"):
        raise ValueError(
            f"{func_name}: y_true has shape {y.shape} (several outputs), so y_dist must be "
            f"an indexable predictive of the same batch shape; got {type(y_dist).__name__} "
            f"of batch shape {shape}."
        )
    return [(y[:, j], y_dist[:, j]) for j in range(y.shape[1])]


def _frozen_scipy_columns(y_dist, shape):
    """The columns of a frozen scipy distribution of batch ``shape`` ``(n, k)``
    (which cannot be indexed), each frozen anew from its parameters' column;
    None for other objects."""
    dist = getattr(y_dist, "dist", None)
    if dist is None or not hasattr(y_dist, "args") or not hasattr(y_dist, "kwds"):
        return None

    def column(value, j):
        value = np.asarray(value)
        return np.broadcast_to(value, shape)[:, j] if value.ndim else value

    return [dist(*(column(a, j) for a in y_dist.args),
                 **{key: column(v, j) for key, v in y_dist.kwds.items()})
            for j in range(shape[1])]


def _mean_over_outputs(func, y_true, y_dist, *args, name=None, **kwargs):
    """``func(y_j, y_dist[:, j], *args, **kwargs)`` averaged over the outputs of a
    multi-output ``y_true`` (:func:`_output_columns`); None for one output."""
    columns = _output_columns(y_true, y_dist, name or func.__name__)
    if columns is None:
        return None
    return float(np.mean([func(y, d, *args, **kwargs) for y, d in columns]))


#: The metric of numbers (means, standard deviations, bounds) that a user
#: holding arrays wants in place of each metric of a distribution.
_ARRAY_FORMS = {
    "nlpd": "gaussian_nlpd(y_true, y_mean, y_std)",
    "crps": "crps_gaussian(y_true, y_mean, y_std)",
    "coverage": "interval_coverage(y_true, lower, upper)",
    "mean_interval_width": "interval_width(lower, upper)",
}


def _array_form_hint(func_name, y_dist):
    """The end of an error for arrays passed where a distribution was due:
    the metric of :data:`_ARRAY_FORMS` to use instead ("" if none)."""
    if func_name in _ARRAY_FORMS and isinstance(y_dist, (np.ndarray, list, tuple, Real)):
        return f" For predictions given as arrays use {_ARRAY_FORMS[func_name]}."
    return ""


def _require(y_dist, method, func_name, hint=""):
    fn = getattr(y_dist, method, None)
    if not callable(fn):
        hint += _array_form_hint(func_name, y_dist)
        raise TypeError(
            f"{func_name} needs a predictive distribution with "
            f"{'an' if method[0] in 'aeiou' else 'a'} `{method}` method (e.g. "
            f"an estimator's predict_dist(X)); got {type(y_dist).__name__}.{hint}"
        )
    return fn


def _check_confidence(confidence):
    if not isinstance(confidence, Real) or not (0.0 < float(confidence) < 1.0):
        shown = (f"an array of shape {np.shape(confidence)}" if np.ndim(confidence)
                 else repr(confidence))
        raise ValueError(f"confidence must be a float in (0, 1); got {shown}.")
    return float(confidence)


# ------------------------------------------------------------------------ log density
def gaussian_nlpd(y_true, y_mean, y_std, *, sample_weight=None):
    r"""Mean negative log predictive density of Gaussian predictives.

    .. math::

        \mathrm{NLPD} = \frac{\sum_i w_i \ell_i}{\sum_i w_i},\qquad
        \ell_i = \tfrac12\log(2\pi) + \log\sigma_i
                 + \frac{(y_i - \mu_i)^2}{2\sigma_i^2},

    i.e. the weighted mean of :math:`-\log \mathcal N(y_i \mid \mu_i, \sigma_i^2)` in
    nats (natural logarithm, constant included).  Lower is better.

    Parameters
    ----------
    y_true : array-like of shape (n_samples,)
        Observed targets.
    y_mean : array-like of shape (n_samples,) or float
        Predictive means.
    y_std : array-like of shape (n_samples,) or float
        Predictive standard deviations; must be strictly positive.
    sample_weight : array-like of shape (n_samples,), default=None
        Non-negative sample weights.

    Returns
    -------
    nlpd : float

    Raises
    ------
    ValueError
        NaN/inf in the inputs, a non-positive ``y_std``, or inconsistent lengths.

    See Also
    --------
    nlpd : the same for any predictive distribution object.

    References
    ----------
    .. [1] Quiñonero-Candela, J., Rasmussen, C. E., Sinz, F., Bousquet, O. and
       Schölkopf, B. (2006). Evaluating predictive uncertainty challenge. In
       *Machine Learning Challenges*, LNCS 3944, 1-27.

    Examples
    --------
    >>> from skbayesnn.metrics import gaussian_nlpd
    >>> round(gaussian_nlpd([0.0], [0.0], [1.0]), 6)  # 0.5 * log(2 pi)
    0.918939
    """
    y = _check_y(y_true)
    n = y.shape[0]
    mu = _check_param(y_mean, n, "y_mean")
    std = _check_std(y_std, n, strictly_positive=True)
    sw = _check_weights(sample_weight, n)
    with np.errstate(over="ignore"):  # a z-score beyond ~1e154 has NLPD inf
        values = -stats.norm.logpdf(y, mu, std)
    return _weighted_mean(values, sw)


def nlpd(y_true, y_dist, *, sample_weight=None):
    r"""Mean negative log predictive density of a predictive distribution.

    .. math::

        \mathrm{NLPD} = -\frac{\sum_i w_i \log p_i(y_i)}{\sum_i w_i}

    where :math:`\log p_i` is ``y_dist.logpdf`` (natural logarithm).  Works for any
    object with a vectorised ``logpdf`` -- :class:`~skbayesnn.distributions.NormalPredictive`,
    :class:`~skbayesnn.distributions.GaussianMixturePredictive` or a frozen
    :mod:`scipy.stats` distribution.  A zero density gives ``inf``.

    Parameters
    ----------
    y_true : array-like of shape (n_samples,) or (n_samples, n_outputs)
    y_dist : predictive distribution over ``n_samples`` targets
        Must provide a vectorised ``logpdf``.  For one output its batch
        shape (``shape``, or the shape of ``mean()``) has ``n_samples``
        elements, e.g. ``(n_samples,)`` or ``(n_samples, 1)``, and a 1-D
        ``y_true`` is reshaped to it; for several outputs it is ``(n_samples,
        n_outputs)``, ``y_true``'s shape (a 1-D ``y_true`` is refused).
    sample_weight : array-like of shape (n_samples,), default=None

    Returns
    -------
    nlpd : float
        For several outputs, the sum of the outputs' NLPDs: the NLPD of the
        joint predictive of independent outputs (as a fitted multi-output
        model predicts them).

    Raises
    ------
    TypeError
        If ``y_dist`` has no ``logpdf`` (e.g. a categorical predictive: use
        :func:`categorical_nll`).

    See Also
    --------
    gaussian_nlpd : closed form from means and standard deviations.
    """
    _require(y_dist, "logpdf", "nlpd", " For class probabilities use categorical_nll.")
    columns = _output_columns(y_true, y_dist, "nlpd")
    if columns is None:
        columns = [(y_true, y_dist)]
    with np.errstate(invalid="ignore"):  # inf + -inf: checked just below
        lp = sum(_logpdf_values(y, d) for y, d in columns)  # joint, per sample
    sw = _check_weights(sample_weight, lp.shape[0])
    if np.any(np.isnan(lp) & (True if sw is None else sw > 0)):
        raise ValueError(
            "the joint density of a sample's outputs is undefined: one output's point-mass "
            "predictive hits its target (+inf) and another's misses (-inf)."
        )
    return -_weighted_mean(lp, sw)


def _logpdf_values(y_true, y_dist):
    """``y_dist.logpdf(y_true)`` per sample, validated (one output)."""
    y = _check_y(y_true)
    lp = _dist_output(y_dist.logpdf(_y_like_dist(y, y_dist)), y.shape[0],
                      f"{type(y_dist).__name__}.logpdf")
    if np.any(np.isnan(lp)):
        raise ValueError("y_dist.logpdf returned NaN.")
    return lp


# ------------------------------------------------------------------------------ CRPS
def _expected_abs_normal(mu, s):
    r"""``A(mu, s^2) = E|X|`` for ``X ~ N(mu, s^2)``: ``mu(2 Phi(mu/s) - 1) + 2 s phi(mu/s)``."""
    pos = s > 0
    with np.errstate(over="ignore"):  # z or z^2 = inf: phi(z) = 0, as it should
        z = np.divide(mu, s, out=np.zeros_like(mu), where=pos)
        # (s times a factor <= 0.8: no overflow for a finite s up to 1.8e308)
        val = mu * (2.0 * special.ndtr(z) - 1.0) + s * (2.0 * _INV_SQRT_2PI * np.exp(-0.5 * z * z))
    return np.where(pos, val, np.abs(mu))


def crps_gaussian(y_true, y_mean, y_std, *, sample_weight=None):
    r"""Mean continuous ranked probability score of Gaussian predictives.

    For a predictive CDF :math:`F` and an observation :math:`y`,
    :math:`\mathrm{CRPS}(F, y) = \int_{-\infty}^{\infty} (F(x) - \mathbb 1[x \ge y])^2\,dx`.
    For :math:`F = \mathcal N(\mu, \sigma^2)` it has the closed form [1]_

    .. math::

        \mathrm{CRPS} = \sigma\left[z\,(2\Phi(z) - 1) + 2\varphi(z)
                        - \frac{1}{\sqrt\pi}\right], \qquad z = \frac{y - \mu}{\sigma},

    and for :math:`\sigma = 0` (a point forecast) it reduces to the absolute error
    :math:`|y - \mu|`.  The CRPS has the units of ``y``; lower is better.  Returns
    the weighted mean over samples.

    Parameters
    ----------
    y_true : array-like of shape (n_samples,)
    y_mean : array-like of shape (n_samples,) or float
    y_std : array-like of shape (n_samples,) or float
        Non-negative predictive standard deviations (zeros allowed).
    sample_weight : array-like of shape (n_samples,), default=None

    Returns
    -------
    crps : float

    References
    ----------
    .. [1] Gneiting, T. and Raftery, A. E. (2007). Strictly proper scoring rules,
       prediction, and estimation. *JASA* 102(477), 359-378, eq. (21).

    Examples
    --------
    >>> from skbayesnn.metrics import crps_gaussian
    >>> crps_gaussian([1.0, -2.0], [0.0, 0.0], [0.0, 0.0])  # absolute error
    1.5
    """
    y = _check_y(y_true)
    n = y.shape[0]
    mu = _check_param(y_mean, n, "y_mean")
    std = _check_std(y_std, n)
    sw = _check_weights(sample_weight, n)
    # CRPS = E|X - y| - E|X - X'| / 2 = A(y - mu, std) - std / sqrt(pi)
    return _weighted_mean(_expected_abs_normal(y - mu, std) - std * _INV_SQRT_PI, sw)


def _mixture_from_stds(means, stds, weights, n):
    """A :class:`GaussianMixturePredictive` of components ``N(means, stds**2)``.

    ``stds`` and ``weights`` are checked here (the weights are normalised over the
    last axis), as is the number of rows (1 or ``n``) of each 2-D argument; the
    mixture validates the rest (finite means, broadcasting shapes).
    """

    def as_array(value, name):
        return check_array(
            np.atleast_1d(np.asarray(value)), ensure_2d=False, allow_nd=True,
            dtype="numeric", input_name=name,
        ).astype(np.float64, copy=False)

    sd = as_array(stds, "stds")
    if np.any(sd < 0):
        raise ValueError(f"stds must be non-negative; got a minimum of {sd.min()!r}.")
    w = as_array(weights, "weights")
    if np.any(w < 0):
        raise ValueError(f"weights must be non-negative; got a minimum of {w.min()!r}.")
    total = w.sum(axis=-1, keepdims=True)
    if np.any(total <= 0):
        raise ValueError("weights must have a positive sum over the components.")
    for name, arr in (("means", np.asarray(means)), ("stds", sd), ("weights", w)):
        if arr.ndim >= 2 and arr.shape[0] not in (1, n):
            raise ValueError(
                f"{name} has {arr.shape[0]} rows but y_true has {n} samples "
                "(inconsistent lengths); the component axis is the last one."
            )
    if np.any(sd > _ROOT_MAX):
        raise ValueError(
            f"stds above {_ROOT_MAX:.3g} overflow as variances (vars = stds**2); got a "
            f"maximum of {sd.max()!r}. Rescale the targets."
        )
    try:
        return GaussianMixturePredictive(np.atleast_1d(means), sd * sd, w / total)
    except ValueError as exc:
        raise ValueError(
            f"{exc} (vars = stds**2; the component axis is the last one)"
        ) from None


def _crps_mixture_values(y, dist):
    """Per-sample closed-form CRPS of the mixture ``dist`` at the 1-D ``y``."""
    n = y.shape[0]
    k = dist.n_components
    comps = dist.components
    rows = comps.means.reshape(-1, k).shape[0]
    if rows not in (1, n):
        raise ValueError(
            f"the mixture describes {rows} samples but y_true has {n} (inconsistent "
            "lengths); the component axis is the last one."
        )
    mu, var, w = (np.broadcast_to(a.reshape(-1, k), (n, k))
                  for a in (comps.means, comps.vars, comps.weights))
    out = np.empty(n)
    chunk = max(1, (1 << 21) // (k * k))
    for start in range(0, n, chunk):
        sl = slice(start, min(start + chunk, n))
        m, v, ww = mu[sl], var[sl], w[sl]
        # differences of means near the float limit overflow: checked below
        # (a zero-weight component adds nothing, however far or wide it is:
        # 0 * inf would be NaN; hypot keeps sqrt(v_k + v_l) finite for
        # variances near the float limit)
        with np.errstate(over="ignore", invalid="ignore"):
            sd = np.sqrt(v)
            term1 = np.sum(np.where(ww > 0, ww * _expected_abs_normal(y[sl, None] - m, sd), 0.0),
                           axis=1)
            dmu = m[:, :, None] - m[:, None, :]
            pair = _expected_abs_normal(dmu, np.hypot(sd[:, :, None], sd[:, None, :]))
            wkl = ww[:, :, None] * ww[:, None, :]
            term2 = np.sum(np.where(wkl > 0, wkl * pair, 0.0), axis=(1, 2))
            out[sl] = term1 - 0.5 * term2
    if not np.all(np.isfinite(out)):
        raise ValueError(
            "crps_gaussian_mixture overflowed: component means, stds or y_true are too "
            "large in magnitude (differences beyond ~1e308)."
        )
    # Round-off can make a perfect point forecast slightly negative.
    return np.maximum(out, 0.0)


def crps_gaussian_mixture(y_true, means, stds, weights, *, sample_weight=None):
    r"""Mean CRPS of Gaussian-mixture predictives, in closed form.

    With the energy form of the CRPS,
    :math:`\mathrm{CRPS}(F, y) = \mathbb E|X - y| - \tfrac12\mathbb E|X - X'|` for
    independent :math:`X, X' \sim F` [1]_, and
    :math:`A(\mu, s^2) = \mathbb E|Z|,\ Z\sim\mathcal N(\mu, s^2)
    = \mu\,(2\Phi(\mu/s) - 1) + 2s\,\varphi(\mu/s)`,
    the mixture :math:`F = \sum_k w_k \mathcal N(\mu_k, \sigma_k^2)` has [2]_

    .. math::

        \mathrm{CRPS}(F, y) = \sum_k w_k A(y - \mu_k, \sigma_k^2)
          - \frac12 \sum_{k, l} w_k w_l A(\mu_k - \mu_l, \sigma_k^2 + \sigma_l^2).

    :math:`A(\mu, 0) = |\mu|`, so point masses (``stds == 0``) are allowed.  With a
    single component this equals :func:`crps_gaussian`.  Cost is
    :math:`O(n K^2)` time, computed in chunks of samples so memory stays
    :math:`O(K^2)` per chunk (fine for :math:`K \lesssim 100`).

    Parameters
    ----------
    y_true : array-like of shape (n_samples,)
    means : array-like of shape (n_samples, n_components) or (n_components,)
        Component means (component axis last).
    stds : array-like of shape (n_samples, n_components) or (n_components,)
        Non-negative component standard deviations.
    weights : array-like of shape (n_components,) or (n_samples, n_components)
        Non-negative mixture weights; normalised to sum to one over the
        components.
    sample_weight : array-like of shape (n_samples,), default=None

    Returns
    -------
    crps : float

    References
    ----------
    .. [1] Gneiting, T. and Raftery, A. E. (2007). Strictly proper scoring rules,
       prediction, and estimation. *JASA* 102(477), 359-378, eq. (20).
    .. [2] Grimit, E. P., Gneiting, T., Berrocal, V. J. and Johnson, N. A. (2006).
       The continuous ranked probability score for circular variables and its
       application to mesoscale forecast ensemble verification. *Quarterly Journal
       of the Royal Meteorological Society* 132, 2925-2942.
    """
    y = _check_y(y_true)
    dist = _mixture_from_stds(means, stds, weights, y.shape[0])
    sw = _check_weights(sample_weight, y.shape[0])
    return _weighted_mean(_crps_mixture_values(y, dist), sw)


def _is_scipy_frozen_norm(y_dist):
    # Each frozen distribution holds its own norm_gen instance: compare by name.
    return getattr(getattr(y_dist, "dist", None), "name", None) == "norm"


def _flat(a):
    a = np.asarray(a, dtype=np.float64)
    return a if a.ndim == 0 else a.reshape(-1)


def crps(y_true, y_dist, *, sample_weight=None):
    r"""Mean CRPS of a Gaussian or Gaussian-mixture predictive distribution.

    Dispatches on the type of ``y_dist``:

    * :class:`~skbayesnn.distributions.NormalPredictive` (or a frozen
      ``scipy.stats.norm``) -> :func:`crps_gaussian` with ``y_dist.mean()`` and
      ``y_dist.std()``;
    * :class:`~skbayesnn.distributions.GaussianMixturePredictive` ->
      :func:`crps_gaussian_mixture` with the component means, ``sqrt`` of the
      component variances and the weights (``y_dist.components``).

    Parameters
    ----------
    y_true : array-like of shape (n_samples,) or (n_samples, n_outputs)
    y_dist : NormalPredictive, GaussianMixturePredictive or frozen scipy.stats.norm
        With a batch of ``n_samples`` elements (e.g. ``(n_samples,)`` or
        ``(n_samples, 1)``), or 0-d (one distribution for every sample; one
        output only); for several outputs, the batch shape ``(n_samples,
        n_outputs)``.
    sample_weight : array-like of shape (n_samples,), default=None

    Returns
    -------
    crps : float
        For several outputs, the mean over outputs.

    Raises
    ------
    TypeError
        For any other distribution type (no closed form implemented).
    """
    per_output = _mean_over_outputs(crps, y_true, y_dist, sample_weight=sample_weight)
    if per_output is not None:
        return per_output
    if isinstance(y_dist, GaussianMixturePredictive):
        y = _check_y(y_true)
        _y_like_dist(y, y_dist)  # the batch must describe the n samples
        sw = _check_weights(sample_weight, y.shape[0])
        return _weighted_mean(_crps_mixture_values(y, y_dist), sw)
    if isinstance(y_dist, NormalPredictive) or _is_scipy_frozen_norm(y_dist):
        y = _check_y(y_true)
        _y_like_dist(y, y_dist)
        return crps_gaussian(
            y, _flat(y_dist.mean()), _flat(y_dist.std()), sample_weight=sample_weight
        )
    raise TypeError(
        "crps has closed forms for NormalPredictive and GaussianMixturePredictive "
        f"(or a frozen scipy.stats.norm); got {type(y_dist).__name__}."
        f"{_array_form_hint('crps', y_dist)}"
    )


# -------------------------------------------------------------------------- intervals
def _check_bounds(lower, upper, n):
    lo = _check_param(lower, n, "lower", allow_inf=True)
    hi = _check_param(upper, n, "upper", allow_inf=True)
    if np.any(lo > hi):
        raise ValueError(
            f"lower must not exceed upper; {int(np.sum(lo > hi))} interval(s) are inverted."
        )
    return lo, hi


def interval_coverage(y_true, lower, upper, *, sample_weight=None):
    r"""Fraction of targets inside their predictive intervals.

    .. math::

        \mathrm{coverage} = \frac{\sum_i w_i\,\mathbb 1[l_i \le y_i \le u_i]}{\sum_i w_i}.

    A calibrated central :math:`100c\%` interval has coverage :math:`c` in
    expectation (binomial standard error :math:`\sqrt{c(1-c)/n}`).

    Parameters
    ----------
    y_true : array-like of shape (n_samples,)
    lower, upper : array-like of shape (n_samples,) or float
        Interval bounds (infinite bounds allowed, ``lower <= upper``).
    sample_weight : array-like of shape (n_samples,), default=None

    Returns
    -------
    coverage : float in [0, 1]
    """
    y = _check_y(y_true)
    n = y.shape[0]
    lo, hi = _check_bounds(lower, upper, n)
    sw = _check_weights(sample_weight, n)
    return _weighted_mean((lo <= y) & (y <= hi), sw)


def interval_width(lower, upper, *, sample_weight=None):
    r"""Mean width :math:`\sum_i w_i (u_i - l_i) / \sum_i w_i` of intervals.

    Parameters
    ----------
    lower, upper : array-like of shape (n_samples,)
        Interval bounds, ``lower <= upper`` (an infinite bound gives ``inf``).
    sample_weight : array-like of shape (n_samples,), default=None

    Returns
    -------
    width : float
    """
    shape = np.shape(lower)
    if len(shape) not in (1, 2):
        raise ValueError(f"lower must be 1-D; got an array of shape {shape}.")
    lo, hi = _check_bounds(lower, upper, shape[0])
    sw = _check_weights(sample_weight, shape[0])
    with np.errstate(invalid="ignore"):
        width = np.where(lo == hi, 0.0, hi - lo)  # [-inf, -inf] has width 0, not NaN
    return _weighted_mean(width, sw)


def coverage(y_true, y_dist, confidence=0.95, *, sample_weight=None):
    r"""Coverage of the central ``confidence`` intervals of a predictive distribution.

    Uses ``lower, upper = y_dist.interval(confidence)`` (equal tails) and returns
    :func:`interval_coverage`.

    Parameters
    ----------
    y_true : array-like of shape (n_samples,) or (n_samples, n_outputs)
    y_dist : predictive distribution with ``interval(confidence)``
        For one output its batch shape has ``n_samples`` elements; for
        several, it is ``y_true``'s ``(n_samples, n_outputs)`` (see
        :func:`nlpd`).
    confidence : float in (0, 1), default=0.95
    sample_weight : array-like of shape (n_samples,), default=None

    Returns
    -------
    coverage : float in [0, 1]
        For several outputs, the mean over outputs (the weighted fraction of
        all targets covered).
    """
    # (the distribution first: coverage(y, lower, upper) is the likelier mistake)
    interval = _require(y_dist, "interval", "coverage")
    confidence = _check_confidence(confidence)
    per_output = _mean_over_outputs(coverage, y_true, y_dist, confidence,
                                    sample_weight=sample_weight)
    if per_output is not None:
        return per_output
    y = _check_y(y_true)
    _y_like_dist(y, y_dist)  # the batch must describe the n samples
    lo, hi = interval(confidence)
    n = y.shape[0]
    lo = _dist_output(lo, n, "y_dist.interval (lower)", shared=True)
    hi = _dist_output(hi, n, "y_dist.interval (upper)", shared=True)
    return interval_coverage(y, lo, hi, sample_weight=sample_weight)


def mean_interval_width(y_dist, confidence=0.95, *, sample_weight=None):
    r"""Mean width of the central ``confidence`` intervals of ``y_dist``.

    Parameters
    ----------
    y_dist : predictive distribution with ``interval(confidence)``
    confidence : float in (0, 1), default=0.95
    sample_weight : array-like of shape (n_samples,), default=None

    Returns
    -------
    width : float
        For a Gaussian, :math:`2\,\Phi^{-1}((1+c)/2)` times the mean standard
        deviation.  For a predictive of batch shape ``(n_samples,
        n_outputs)``, the mean over outputs.
    """
    # (the distribution first: coverage(y, lower, upper) is the likelier mistake)
    interval = _require(y_dist, "interval", "mean_interval_width")
    confidence = _check_confidence(confidence)
    lo, hi = interval(confidence)
    lo = np.asarray(lo, dtype=np.float64)
    hi = np.asarray(hi, dtype=np.float64)
    if lo.ndim > 2:
        raise ValueError(
            "mean_interval_width: y_dist's batch shape must be (n_samples,) or (n_samples, "
            f"n_outputs); its intervals have shape {lo.shape}."
        )
    # Several outputs: their mean.  A (1, k) batch is one sample of k outputs,
    # unless k sample weights say it is a row of k samples (unweighted, the
    # two means are the same); one weight for it had been refused.
    row_of_samples = (lo.ndim == 2 and lo.shape[0] == 1 and sample_weight is not None
                      and np.size(sample_weight) == lo.shape[1])
    if lo.ndim == 2 and lo.shape[1] > 1 and not row_of_samples:
        return float(np.mean([interval_width(lo[:, j], hi[:, j], sample_weight=sample_weight)
                              for j in range(lo.shape[1])]))
    return interval_width(lo.reshape(-1), hi.reshape(-1), sample_weight=sample_weight)


def _abs_coverage_error(y_true, y_dist, confidence=0.95, *, sample_weight=None):
    """``|coverage(y_true, y_dist, confidence) - confidence|`` (for the scorer);
    for several outputs the mean of the outputs' errors (an over- and an
    under-covering output must not cancel)."""
    per_output = _mean_over_outputs(_abs_coverage_error, y_true, y_dist, confidence,
                                    name="coverage", sample_weight=sample_weight)
    if per_output is not None:
        return per_output
    cov = coverage(y_true, y_dist, confidence, sample_weight=sample_weight)
    return abs(cov - float(confidence))


# ------------------------------------------------------------------------ calibration
def pit_values(y_true, y_dist):
    r"""Probability integral transform :math:`u_i = F_i(y_i)` (``y_dist.cdf(y_true)``).

    For a calibrated predictive the PIT values are uniform on [0, 1] [1]_.

    Parameters
    ----------
    y_true : array-like of shape (n_samples,) or (n_samples, n_outputs)
    y_dist : predictive distribution with ``cdf``
        For one output its batch shape has ``n_samples`` elements, and a 1-D
        ``y_true`` is reshaped to it; for several, it is ``y_true``'s
        ``(n_samples, n_outputs)`` (see :func:`nlpd`).

    Returns
    -------
    pit : ndarray of shape (n_samples,) or (n_samples, n_outputs)

    References
    ----------
    .. [1] Gneiting, T., Balabdaoui, F. and Raftery, A. E. (2007). Probabilistic
       forecasts, calibration and sharpness. *JRSS B* 69(2), 243-268.
    """
    cdf = _require(y_dist, "cdf", "pit_values")
    columns = _output_columns(y_true, y_dist, "pit_values")
    if columns is not None:
        return np.column_stack([pit_values(y, d) for y, d in columns])
    y = _check_y(y_true)
    u = _dist_output(cdf(_y_like_dist(y, y_dist)), y.shape[0], f"{type(y_dist).__name__}.cdf")
    if np.any(np.isnan(u)):
        raise ValueError("y_dist.cdf returned NaN.")
    return u


def regression_calibration_error(y_true, y_dist, *, n_levels=19, sample_weight=None):
    r"""Quantile-calibration error of a regression predictive distribution.

    With PIT values :math:`u_i = F_i(y_i)` (:func:`pit_values`) and the nominal
    levels :math:`p_j = j / (L + 1)`, :math:`j = 1..L` (``L = n_levels``; the
    default gives 0.05, 0.10, ..., 0.95), the observed frequency of each level is
    :math:`\hat p_j = \sum_i w_i \mathbb 1[u_i \le p_j] / \sum_i w_i` and

    .. math::

        \mathrm{CE} = \frac1L \sum_{j=1}^{L} |\hat p_j - p_j|,

    the mean absolute gap of the calibration curve of Kuleshov et al. [1]_ (who
    use squared gaps).  A calibrated predictive has :math:`\mathbb E\hat p_j = p_j`,
    so CE tends to 0 as :math:`n \to \infty`; on finite calibrated data it is of
    order :math:`\sqrt{p_j(1-p_j)/n}`, and by the DKW inequality
    :math:`\mathrm{CE} \le \sqrt{\log(2/\alpha) / (2n)}` with probability at least
    :math:`1-\alpha`.  Over-dispersed (too wide) predictives push the PIT values
    towards 1/2 and give :math:`\hat p_j < p_j` below the median and
    :math:`\hat p_j > p_j` above; under-dispersed the opposite.
    Where a predictive has a point mass at :math:`y_i` (zero variance, or a
    mixture component of zero variance) the indicator is replaced by its
    expectation under the randomised PIT (Czado, Gneiting & Held 2009), so that
    a perfect point forecast scores 0.
    The value lies in [0, 0.5].

    Parameters
    ----------
    y_true : array-like of shape (n_samples,) or (n_samples, n_outputs)
    y_dist : predictive distribution with ``cdf`` (see :func:`pit_values`)
    n_levels : int >= 1, default=19
    sample_weight : array-like of shape (n_samples,), default=None

    Returns
    -------
    error : float
        For several outputs, the mean over outputs.

    References
    ----------
    .. [1] Kuleshov, V., Fenner, N. and Ermon, S. (2018). Accurate uncertainties
       for deep learning using calibrated regression. *ICML*, PMLR 80, 2796-2804.
    """
    if isinstance(n_levels, bool) or not isinstance(n_levels, Integral) or n_levels < 1:
        raise ValueError(f"n_levels must be a positive integer; got {n_levels!r}.")
    per_output = _mean_over_outputs(regression_calibration_error, y_true, y_dist,
                                    n_levels=n_levels, sample_weight=sample_weight)
    if per_output is not None:
        return per_output
    u = pit_values(y_true, y_dist)
    sw = _check_weights(sample_weight, u.shape[0])
    levels = np.arange(1, n_levels + 1) / (n_levels + 1)
    # Where F jumps at y (a point mass; u = F(y) is then not uniform however
    # calibrated the predictive) the randomised PIT F(y-) + U (F(y) - F(y-))
    # is, and its chance of being <= p_j is this share (Czado, Gneiting & Held
    # 2009); elsewhere the share is the indicator u <= p_j.  A perfect point
    # forecast scored the worst error, 0.5.
    y = _check_y(y_true)
    u_left = pit_values(np.nextafter(y, -np.inf), y_dist)
    u_right = pit_values(np.nextafter(y, np.inf), y_dist)
    jump = (u - u_left)[:, None]
    # (a step to the next float that the step beyond it matches is a density
    # narrower than the floats' spacing, not a point mass)
    atom = (jump > 0) & ((u_right - u)[:, None] <= 1e-3 * jump)
    with np.errstate(divide="ignore", invalid="ignore"):
        share = np.clip((levels[None, :] - u_left[:, None]) / jump, 0.0, 1.0)
    below = np.where(atom, share, u[:, None] <= levels[None, :])
    if sw is None:
        observed = below.mean(axis=0)
    else:
        observed = (sw @ below) / sw.sum()
    return float(np.mean(np.abs(observed - levels)))


# ------------------------------------------------------------------------ classifiers
def _check_proba(y_true, y_proba, classes):
    """Validate labels and probabilities.

    Returns ``(y_index, proba, classes)`` with ``proba`` float64 of shape
    ``(n, C)`` (rows renormalised after validation) and ``y_index`` in ``0..C-1``.
    """
    if (not hasattr(y_proba, "proba") and not hasattr(y_proba, "__array__")
            and callable(getattr(y_proba, "logpdf", None))):
        raise TypeError(
            f"y_proba must be class probabilities (predict_proba(X), or a classifier's "
            f"predict_dist(X)); got {type(y_proba).__name__}, a regression predictive: "
            "use nlpd, crps, coverage or regression_calibration_error on it."
        )
    if classes is None and hasattr(y_proba, "proba") and not isinstance(y_proba, np.ndarray):
        classes = getattr(y_proba, "classes", None)
    y = column_or_1d(
        check_array(y_true, ensure_2d=False, dtype=None, input_name="y_true"),
        input_name="y_true",
    )
    if hasattr(y_proba, "proba") and not isinstance(y_proba, np.ndarray):
        if np.ndim(y_proba.proba) == 1:  # batch shape (): one distribution for every sample
            y_proba = np.broadcast_to(y_proba.proba, (y.shape[0], y_proba.proba.shape[0]))
        else:
            y_proba = y_proba.proba
    p = check_array(
        y_proba, ensure_2d=False, allow_nd=True, dtype="numeric", input_name="y_proba"
    )
    check_consistent_length(y, p)
    if p.ndim == 2 and p.shape[1] == 1:
        p = p[:, 0]
    if p.ndim == 1:
        p = np.column_stack([1.0 - p, p])
        binary_1d = True
    elif p.ndim == 2:
        binary_1d = False
    else:
        raise ValueError(f"y_proba must be 1-D or 2-D; got an array of shape {p.shape}.")
    n, n_classes = p.shape
    if n_classes < 2:
        raise ValueError("y_proba must describe at least two classes.")
    # rows must sum to one within 1e-6, or ~10 C ulp for low-precision input
    eps = np.finfo(p.dtype if p.dtype.kind == "f" else np.float64).eps
    tol = max(1e-6, 10.0 * n_classes * eps)
    p = p.astype(np.float64, copy=False)
    if np.any(p < 0) or np.any(p > 1):
        raise ValueError(
            f"y_proba must lie in [0, 1]; got values in [{p.min()!r}, {p.max()!r}]."
        )
    row_sums = p.sum(axis=1)
    if not binary_1d and np.any(np.abs(row_sums - 1.0) > tol):
        worst = float(row_sums[np.argmax(np.abs(row_sums - 1.0))])
        raise ValueError(
            f"the rows of y_proba must sum to one (tolerance {tol:g}); one sums to {worst!r}."
        )
    p = _renormalise_rows(p, row_sums)

    if classes is not None:
        classes = column_or_1d(np.asarray(classes), input_name="classes")
        if classes.shape[0] != n_classes:
            raise ValueError(
                f"classes has {classes.shape[0]} entries but y_proba has {n_classes} "
                "columns (wrong shape)."
            )
        if np.unique(classes).shape[0] != n_classes:
            raise ValueError("classes must not contain duplicates.")
    else:
        try:
            uniq = np.unique(y)
        except TypeError:  # e.g. ints and strs mixed in an object array
            raise ValueError("the labels in y_true are not comparable with each other; "
                             "pass labels of one type.") from None
        if uniq.shape[0] == n_classes:
            classes = uniq
        elif binary_1d and (
            y.dtype.kind in "biu"
            or (y.dtype.kind == "f" and np.all(np.isfinite(y)) and np.all(y == np.round(y)))
        ) and np.all((y == 0) | (y == 1)):
            # one label, with a 1-D probability of the positive class: the
            # 0 / 1 convention of such probabilities (two columns are as
            # ambiguous as more: labels 1 of classes [1, 2] were scored
            # against the column of a class 0)
            classes = np.arange(2)
        else:
            # Which columns the labels are is ambiguous (labels 1 and 2 of three
            # columns may be classes [0, 1, 2] or [1, 2, 3]): guessing range(3)
            # scored 1-based labels against shifted columns.  scikit-learn's
            # log_loss refuses this too.
            raise ValueError(
                f"y_proba has {n_classes} columns but y_true has {uniq.shape[0]} distinct "
                f"labels {uniq[:10].tolist()}, so which column is which class is ambiguous; "
                "pass `classes` (the labels of the columns, e.g. the estimator's classes_)."
            )
    if y.dtype.kind == "f" and np.any(np.isnan(y)):
        raise ValueError("Input y_true contains NaN.")
    sorter = np.argsort(classes, kind="stable")
    sorted_classes = classes[sorter]
    try:
        pos = np.searchsorted(sorted_classes, y)
    except TypeError:
        raise ValueError("the labels in y_true are not comparable with classes.") from None
    pos = np.clip(pos, 0, n_classes - 1)
    found = sorted_classes[pos] == y
    if not np.all(found):
        missing = np.unique(y[~found])[:10].tolist()
        raise ValueError(f"y_true contains labels not in classes: {missing}.")
    return sorter[pos], p, classes


def expected_calibration_error(
    y_true, y_proba, *, n_bins=15, classes=None, sample_weight=None
):
    r"""Top-label expected calibration error (ECE) of class probabilities.

    For each sample let the confidence be :math:`c_i = \max_k p_{ik}` and the
    prediction :math:`\hat y_i = \arg\max_k p_{ik}` (first maximum on ties).
    Samples are grouped into ``n_bins`` equal-width bins
    :math:`B_m = ((m-1)/M, m/M]` of confidence (:math:`c = 0` goes to the first
    bin) and

    .. math::

        \mathrm{ECE} = \sum_{m=1}^{M} \frac{W_m}{W}\,
                       \left|\mathrm{acc}(B_m) - \mathrm{conf}(B_m)\right|,

    where :math:`W_m` is the total sample weight in bin :math:`m`, :math:`W` the
    total weight, and :math:`\mathrm{acc}`/:math:`\mathrm{conf}` are the weighted
    means of :math:`\mathbb 1[\hat y_i = y_i]` and :math:`c_i` in the bin (Guo et
    al. [1]_, Naeini et al. [2]_).  Empty bins contribute nothing.  The value lies
    in [0, 1]; lower is better.  On finite calibrated data ECE is biased upwards,
    roughly by :math:`\sum_m (W_m/W)\sqrt{2\,\mathrm{acc}_m(1-\mathrm{acc}_m)/(\pi n_m)}`.

    Parameters
    ----------
    y_true : array-like of shape (n_samples,)
        True labels.
    y_proba : array-like of shape (n_samples, n_classes) or (n_samples,)
        Class probabilities (rows sum to one), columns in the order of
        ``classes``.  A 1-D array is the probability of the positive class
        ``classes[1]`` of a binary problem; its top-label confidence is
        :math:`\max(p, 1-p)`.  A :class:`~skbayesnn.distributions.CategoricalPredictive`
        is accepted too (its ``proba`` and ``classes`` are used).
    n_bins : int >= 1, default=15
    classes : array-like of shape (n_classes,), default=None
        Labels of the columns of ``y_proba``.  When None: the sorted unique labels
        of ``y_true``, which must be ``n_classes`` many (as scikit-learn's
        ``log_loss`` requires), except that with a 1-D ``y_proba`` labels 0 and
        1 are classes ``[0, 1]`` even if one is missing; otherwise
        ``ValueError``.  Pass the estimator's ``classes_`` to be safe.
    sample_weight : array-like of shape (n_samples,), default=None

    Returns
    -------
    ece : float

    References
    ----------
    .. [1] Guo, C., Pleiss, G., Sun, Y. and Weinberger, K. Q. (2017). On
       calibration of modern neural networks. *ICML*, PMLR 70, 1321-1330.
    .. [2] Naeini, M. P., Cooper, G. F. and Hauskrecht, M. (2015). Obtaining well
       calibrated probabilities using Bayesian binning. *AAAI*, 2901-2907.
    """
    if isinstance(n_bins, bool) or not isinstance(n_bins, Integral) or n_bins < 1:
        raise ValueError(f"n_bins must be a positive integer; got {n_bins!r}.")
    y_idx, p, _ = _check_proba(y_true, y_proba, classes)
    n = y_idx.shape[0]
    sw = _check_weights(sample_weight, n)
    w = np.ones(n) if sw is None else sw
    conf = p.max(axis=1)
    correct = (p.argmax(axis=1) == y_idx).astype(np.float64)
    edges = np.arange(n_bins + 1) / n_bins  # exactly fl(m / M), unlike linspace
    # bin m holds (edges[m], edges[m+1]]; conf == 0 goes to bin 0
    bins = np.clip(np.searchsorted(edges, conf, side="left") - 1, 0, n_bins - 1)
    mass = np.bincount(bins, weights=w, minlength=n_bins)
    acc_sum = np.bincount(bins, weights=w * correct, minlength=n_bins)
    conf_sum = np.bincount(bins, weights=w * conf, minlength=n_bins)
    return float(np.sum(np.abs(acc_sum - conf_sum)) / mass.sum())


def brier_score(y_true, y_proba, *, classes=None, sample_weight=None):
    r"""Brier score of class probabilities (lower is better).

    Multiclass (``n_classes >= 3``): the original definition of Brier (1950),

    .. math::

        \mathrm{BS} = \frac{\sum_i w_i \sum_{k=1}^{C} (p_{ik} - \mathbb 1[y_i = k])^2}
                           {\sum_i w_i} \in [0, 2].

    Binary (1-D ``y_proba`` or two columns): the customary
    :math:`\sum_i w_i (p_{i} - \mathbb 1[y_i = \text{classes}[1]])^2 / \sum_i w_i
    \in [0, 1]`, which is *half* the two-class sum above.

    This is :func:`sklearn.metrics.brier_score_loss` with its default
    ``scale_by_half="auto"`` (scikit-learn >= 1.7), which this function wraps after
    mapping the labels through ``classes``.  Note the factor of two between the
    binary and the multiclass conventions when comparing across problems.

    Parameters
    ----------
    y_true : array-like of shape (n_samples,)
    y_proba : array-like of shape (n_samples, n_classes) or (n_samples,)
        See :func:`expected_calibration_error`.
    classes : array-like of shape (n_classes,), default=None
        Labels of the columns; default as in :func:`expected_calibration_error`.
    sample_weight : array-like of shape (n_samples,), default=None

    Returns
    -------
    brier : float

    References
    ----------
    .. [1] Brier, G. W. (1950). Verification of forecasts expressed in terms of
       probability. *Monthly Weather Review* 78(1), 1-3.
    """
    y_idx, p, _ = _check_proba(y_true, y_proba, classes)
    n, n_classes = p.shape
    sw = _check_weights(sample_weight, n)
    return float(
        _sk_brier_score_loss(
            y_idx,
            p,
            labels=np.arange(n_classes),
            sample_weight=sw,
            scale_by_half=n_classes == 2,
        )
    )


def categorical_nll(y_true, y_proba, *, classes=None, sample_weight=None):
    r"""Mean negative log-likelihood (log loss) of class probabilities.

    .. math::

        \mathrm{NLL} = -\frac{\sum_i w_i \log p_{i, y_i}}{\sum_i w_i}

    in nats; wraps :func:`sklearn.metrics.log_loss` after mapping the labels
    through ``classes``, so probabilities are clipped at machine epsilon (a zero
    probability for the true class costs :math:`-\log\epsilon \approx 36`, not
    infinity).

    Parameters
    ----------
    y_true : array-like of shape (n_samples,)
    y_proba : array-like of shape (n_samples, n_classes) or (n_samples,)
        See :func:`expected_calibration_error`.
    classes : array-like of shape (n_classes,), default=None
        Labels of the columns; default as in :func:`expected_calibration_error`.
    sample_weight : array-like of shape (n_samples,), default=None

    Returns
    -------
    nll : float
    """
    y_idx, p, _ = _check_proba(y_true, y_proba, classes)
    sw = _check_weights(sample_weight, p.shape[0])
    return float(_sk_log_loss(y_idx, p, labels=np.arange(p.shape[1]), sample_weight=sw))


# --------------------------------------------------------------------------- scorers
_RESPONSES = ("predict_dist", "predict_proba")


class PredictiveScorer:
    """Scorer ``scorer(estimator, X, y)`` for probabilistic predictions.

    Calls ``estimator.<response>(X)`` (``predict_dist`` or ``predict_proba``) and
    returns ``sign * score_func(y, prediction, **kwargs)`` with ``sign = +1`` when
    ``greater_is_better`` else ``-1``, so that greater is always better, as
    scikit-learn's model selection expects.  For ``response="predict_proba"`` the
    estimator's ``classes_`` are passed as ``classes=`` when the metric accepts it.

    When the estimator lacks ``response`` but is a
    :class:`~sklearn.pipeline.Pipeline` whose final step has it, ``X`` is
    transformed by the preceding steps and the final step is asked; a fitted
    search (``GridSearchCV`` ...) is scored through its ``best_estimator_``.
    For ``"predict_dist"``, a regressor whose ``predict`` takes ``return_std``
    is read as ``NormalPredictive(mean, std**2)``: scikit-learn's
    ``BayesianRidge`` and ``ARDRegression`` include the noise in that std, but
    ``GaussianProcessRegressor`` leaves out its ``alpha`` (the std is the
    latent function's unless the kernel has a ``WhiteKernel``), and would then
    be scored as a far too narrow predictive.

    Parameters
    ----------
    score_func : callable
        ``score_func(y_true, prediction, *, sample_weight=None, **kwargs)``.
    greater_is_better : bool
        False for losses (the scorer then returns the negated loss).
    response : {"predict_dist", "predict_proba"}, default="predict_dist"
    **kwargs
        Extra keyword arguments of ``score_func`` (e.g. ``confidence=0.9``).

    Examples
    --------
    >>> from skbayesnn.metrics import PredictiveScorer, coverage
    >>> PredictiveScorer(coverage, greater_is_better=True, confidence=0.9)
    PredictiveScorer(coverage, greater_is_better=True, response='predict_dist', confidence=0.9)
    """

    def __init__(self, score_func, *, greater_is_better, response="predict_dist", **kwargs):
        if not callable(score_func):
            raise TypeError(f"score_func must be callable; got {score_func!r}.")
        if response not in _RESPONSES:
            raise ValueError(f"response must be one of {_RESPONSES}; got {response!r}.")
        self._score_func = score_func
        self._greater_is_better = bool(greater_is_better)
        self._sign = 1.0 if greater_is_better else -1.0
        self._response = response
        self._kwargs = kwargs
        self._sample_weight_request = None

    @property
    def score_func(self):
        return self._score_func

    @property
    def greater_is_better(self):
        return self._greater_is_better

    @property
    def response(self):
        return self._response

    @property
    def kwargs(self):
        return dict(self._kwargs)

    def _response_method(self, estimator):
        """The estimator's ``response`` method, looking through a Pipeline's
        final step and a fitted search's ``best_estimator_`` (nested
        cross-validation); for ``predict_dist``, a regressor whose ``predict``
        takes ``return_std`` (sklearn's BayesianRidge, ARDRegression,
        GaussianProcessRegressor) gives a :class:`NormalPredictive`."""
        method = self._find_response(estimator)
        if method is None:
            raise TypeError(
                f"{self!r} needs an estimator with a `{self._response}` method (or a Pipeline "
                "or fitted search ending in one"
                + ("; or a regressor whose predict takes return_std"
                   if self._response == "predict_dist" else "")
                + f"); {type(estimator).__name__} has none."
            )
        return method

    def _find_response(self, estimator):
        method = getattr(estimator, self._response, None)
        if callable(method):
            return method
        from sklearn.pipeline import Pipeline

        if isinstance(estimator, Pipeline) and len(estimator.steps) > 0:
            final = self._find_response(estimator.steps[-1][1])
            if final is None or len(estimator.steps) == 1:
                return final
            head = estimator[:-1]
            return lambda X: final(head.transform(X))
        best = getattr(estimator, "best_estimator_", None)
        if best is not None:
            return self._find_response(best)
        predict = getattr(estimator, "predict", None)
        # (a named parameter: a **kwargs predict, as TransformedTargetRegressor's,
        # would pass return_std on without transforming the std)
        with_std = callable(predict) and _names(predict, "return_std")
        if self._response == "predict_dist" and with_std:
            def normal_predictive(X):
                mean, std = predict(X, return_std=True)
                return NormalPredictive(mean, np.square(np.asarray(std, dtype=np.float64)))

            return normal_predictive
        return None

    def __call__(self, estimator, X, y, sample_weight=None):
        """Score ``estimator`` on ``(X, y)``; greater is better."""
        prediction = self._response_method(estimator)(X)
        kwargs = dict(self._kwargs)
        if (
            self._response == "predict_proba"
            and "classes" not in kwargs
            and getattr(estimator, "classes_", None) is not None
            and _accepts(self._score_func, "classes")
        ):
            kwargs["classes"] = estimator.classes_
        if sample_weight is not None:
            kwargs["sample_weight"] = sample_weight
        return self._sign * float(self._score_func(y, prediction, **kwargs))

    def __repr__(self):
        name = getattr(self._score_func, "__name__", repr(self._score_func))
        extra = "".join(f", {k}={v!r}" for k, v in self._kwargs.items())
        return (
            f"PredictiveScorer({name}, greater_is_better={self._greater_is_better}, "
            f"response={self._response!r}{extra})"
        )

    # ---- metadata routing (sample_weight), as scikit-learn's scorers
    def set_score_request(self, *, sample_weight=None):
        """Request ``sample_weight`` under metadata routing.

        Unlike scikit-learn's scorers this returns a *new* scorer, so the shared
        module-level instances are never modified.

        Parameters
        ----------
        sample_weight : bool, str or None
            ``True`` to receive ``sample_weight`` (or an alias string).

        Returns
        -------
        scorer : PredictiveScorer
        """
        new = copy.copy(self)
        new._kwargs = dict(self._kwargs)
        new._sample_weight_request = sample_weight
        return new

    def get_metadata_routing(self):
        """Metadata request of this scorer (``score``: ``sample_weight``)."""
        from sklearn.utils.metadata_routing import MetadataRequest

        request = MetadataRequest(owner=self)
        request.score.add_request(param="sample_weight", alias=self._sample_weight_request)
        return request


def _parameters(func):
    """``func``'s parameters by name ({} where it has no signature)."""
    try:
        return inspect.signature(func).parameters
    except (TypeError, ValueError):
        return {}


def _names(func, name):
    """Whether ``func`` has a parameter called ``name``."""
    return name in _parameters(func)


def _accepts(func, name):
    """Whether ``func`` takes ``name`` as a keyword (by name or ``**kwargs``)."""
    params = _parameters(func)
    return name in params or any(p.kind is p.VAR_KEYWORD for p in params.values())


neg_nlpd_scorer = PredictiveScorer(nlpd, greater_is_better=False)
neg_crps_scorer = PredictiveScorer(crps, greater_is_better=False)
neg_calibration_error_scorer = PredictiveScorer(
    regression_calibration_error, greater_is_better=False
)
neg_coverage_error_scorer = PredictiveScorer(
    _abs_coverage_error, greater_is_better=False, confidence=0.95
)
neg_ece_scorer = PredictiveScorer(
    expected_calibration_error, greater_is_better=False, response="predict_proba"
)
neg_brier_scorer = PredictiveScorer(
    brier_score, greater_is_better=False, response="predict_proba"
)
neg_categorical_nll_scorer = PredictiveScorer(
    categorical_nll, greater_is_better=False, response="predict_proba"
)

_SCORERS = {
    "neg_nlpd": neg_nlpd_scorer,
    "neg_crps": neg_crps_scorer,
    "neg_calibration_error": neg_calibration_error_scorer,
    "neg_coverage_error": neg_coverage_error_scorer,
    "neg_ece": neg_ece_scorer,
    "neg_brier": neg_brier_scorer,
    "neg_categorical_nll": neg_categorical_nll_scorer,
}


def get_scorer(scoring):
    """Scorer by name: ours for ``"neg_nlpd"``, ``"neg_crps"``,
    ``"neg_calibration_error"``, ``"neg_coverage_error"``, ``"neg_ece"``,
    ``"neg_brier"``, ``"neg_categorical_nll"``; otherwise
    :func:`sklearn.metrics.get_scorer` (any scikit-learn name, a callable, or None).

    Like scikit-learn, a name returns a fresh copy of the scorer.

    Parameters
    ----------
    scoring : str, callable or None

    Returns
    -------
    scorer : callable
    """
    if isinstance(scoring, str) and scoring in _SCORERS:
        return copy.deepcopy(_SCORERS[scoring])
    return _sk_get_scorer(scoring)


def get_scorer_names():
    """Sorted names accepted by :func:`get_scorer` (ours and scikit-learn's).

    Returns
    -------
    names : list of str
    """
    return sorted(set(_SCORERS) | set(_sk_get_scorer_names()))
