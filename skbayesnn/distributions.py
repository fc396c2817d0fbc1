"""Predictive distribution objects returned by the estimators' ``predict_dist``.

Three classes cover every estimator of the package:

:class:`NormalPredictive`
    Elementwise independent Gaussians (analytic predictives: TAGI, PBP,
    message passing, linearised / moment-matched MLP posteriors), optionally
    split into an epistemic (model) and an aleatoric (noise) variance.
:class:`GaussianMixturePredictive`
    A mixture of ``K`` Gaussians per test point (deep ensembles, one component
    per member; Monte Carlo predictives, one component per posterior sample).
:class:`CategoricalPredictive`
    Class probabilities of a classifier, with the total / expected entropy and
    the mutual information (epistemic part) when member or sample
    probabilities are available.

All objects hold host NumPy ``float64`` arrays (estimators move device arrays
to the host before building them), validate their input on construction and
raise :class:`ValueError` naming the problem instead of producing NaN.

Every object has a *batch shape* (``shape``): the shape of the array of
per-point distributions.  For the two continuous predictives it is the shape
of ``mean()``; for :class:`CategoricalPredictive` it is ``proba.shape[:-1]``
(its ``mean()`` is the probability vector, with the class axis last).
Indexing (``dist[key]``) applies ``key`` to the batch shape with NumPy
semantics and returns a distribution of the same class, every stored array
(variance parts, components, member probabilities) being sliced alike.

Arguments ``y``, ``q`` and ``confidence`` broadcast with the batch shape as in
NumPy, with one exception: one value per point in another layout (a column
``(n, 1)`` against the batch ``(n,)``, or the reverse) raises ``ValueError``
instead of broadcasting to ``(n, n)`` and pairing every value with every point;
to evaluate a grid of exactly ``n`` values at every point, pass it already
broadcast to ``(n, n)``.
"""

from __future__ import annotations

import math
from collections import namedtuple

import numpy as np
from scipy import special, stats

from ._random import check_rng

__all__ = [
    "NormalPredictive",
    "GaussianMixturePredictive",
    "CategoricalPredictive",
    "MixtureComponents",
]

_LOG_SQRT_2PI = 0.5 * math.log(2.0 * math.pi)
_PARTS_RTOL = 1e-10
_WEIGHTS_ATOL = 1e-8
_PROBA_ATOL = 1e-6
# Cut points (in component standard deviations) and nodes per piece of the mixture entropy.
_ENTROPY_CUTS = np.array([-12.0, -8.0, -5.0, -3.0, -1.5, 0.0, 1.5, 3.0, 5.0, 8.0, 12.0])
_ENTROPY_NODES = 12


# --------------------------------------------------------------------------- helpers


def _as_float_array(x, name):
    """Copy ``x`` into a float64 array, turning conversion errors into ValueError."""
    try:
        arr = np.array(x, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"{name} must be a real numeric array-like; {exc}") from None
    return arr


def _check_finite(arr, name):
    if not np.all(np.isfinite(arr)):
        n_bad = int(np.size(arr) - np.count_nonzero(np.isfinite(arr)))
        raise ValueError(f"{name} contains NaN or infinite values ({n_bad} of {arr.size}).")


def _check_nonnegative(arr, name):
    _check_finite(arr, name)
    if arr.size and np.min(arr) < 0:
        raise ValueError(f"{name} must be >= 0; got a minimum of {np.min(arr)!r}.")


def _broadcast_shape(named_shapes):
    """np.broadcast_shapes with an error that names every input."""
    try:
        return np.broadcast_shapes(*(s for _, s in named_shapes))
    except ValueError:
        desc = ", ".join(f"{n} {s}" for n, s in named_shapes)
        raise ValueError(
            f"shape mismatch: the shapes of {desc} do not broadcast together."
        ) from None


def _frozen(arr):
    arr = np.asarray(arr, order="C")  # copies only when needed (NumPy 1.x and 2.x)
    arr.flags.writeable = False
    return arr


def _broadcast_copy(arr, shape):
    return _frozen(np.array(np.broadcast_to(arr, shape), dtype=np.float64))


def _check_probability(q, name):
    q = _as_float_array(q, name)
    if np.any(np.isnan(q)) or np.any(q < 0) or np.any(q > 1):
        raise ValueError(f"{name} must lie in [0, 1] (and not be NaN).")
    return q


def _check_y_shape(y_shape, batch_shape, name="y"):
    """The broadcast shape, where broadcastable and not one value per point in a
    transposed or extra-axis layout: a y of shape (n, 1) against a batch (n,)
    would broadcast to (n, n), pairing every value with every point (a silent
    wrong answer)."""
    shape = _broadcast_shape([(name, y_shape), ("the distribution's batch shape", batch_shape)])
    n = math.prod(batch_shape)
    if y_shape != batch_shape and math.prod(y_shape) == n > 1 and math.prod(shape) > n:
        raise ValueError(
            f"{name} has one value per point of the distribution but shape {y_shape} against "
            f"its batch shape {batch_shape}: broadcasting would pair every value with every "
            f"point (shape {shape}). Reshape {name} to {batch_shape} for one value per point; "
            f"to evaluate every value at every point (a grid), pass {name} broadcast to "
            f"{shape} (np.broadcast_to)."
        )
    return shape


def _y_array(y, batch_shape):
    y = _as_float_array(y, "y")
    if np.any(np.isnan(y)):
        raise ValueError(f"y contains NaN ({int(np.count_nonzero(np.isnan(y)))} of {y.size}).")
    _check_y_shape(y.shape, batch_shape)
    return y


def _size_tuple(size):
    if size is None:
        return ()
    if isinstance(size, (int, np.integer)):
        size = (size,)
    try:
        size = tuple(int(s) for s in size)
    except TypeError:
        raise ValueError(f"size must be None, an int or a tuple of ints; got {size!r}.") from None
    if any(s < 0 for s in size):
        raise ValueError(f"size must be non-negative; got {size!r}.")
    return size


def _batch_index(shape, key):
    """Flat indices into a batch of ``shape`` selected by ``key`` (NumPy semantics)."""
    size = int(np.prod(shape, dtype=np.int64))
    return np.asarray(np.arange(size).reshape(shape)[key])


def _fmt(arr):
    return np.array2string(np.asarray(arr), precision=4, threshold=6, edgeitems=2)


def _choose_index(cumulative, u, last_positive):
    """Index ``k`` with ``cumulative[k-1] <= u < cumulative[k]`` along the last axis."""
    idx = np.count_nonzero(cumulative <= u[..., None], axis=-1)
    return np.minimum(idx, last_positive)


def _last_positive(weights):
    k = weights.shape[-1]
    return k - 1 - np.argmax((weights > 0)[..., ::-1], axis=-1)


# Elementwise Gaussian functions that accept zero variance (a point mass at m).


def _norm_logpdf(y, m, v):
    # (over: a z-score beyond ~1e154 squares to inf, log density -inf, as it should)
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        s = np.sqrt(v)
        d = y - m
        # scipy gives NaN for scale 0; the point-mass limit replaces it
        out = np.where(s > 0, stats.norm.logpdf(d, scale=s), np.where(d == 0, np.inf, -np.inf))
    return np.where(np.isnan(d), np.nan, out)


def _norm_cdf(y, m, v):
    # (far in the tail d / s overflows to +-inf, whose value is the limit)
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        s = np.sqrt(v)
        d = y - m
        out = np.where(s > 0, special.ndtr(d / s), (d >= 0).astype(np.float64))
    return np.where(np.isnan(d), np.nan, out)


def _norm_sf(y, m, v):
    # (far in the tail d / s overflows to +-inf, whose value is the limit)
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        s = np.sqrt(v)
        d = y - m
        out = np.where(s > 0, special.ndtr(-d / s), (d < 0).astype(np.float64))
    return np.where(np.isnan(d), np.nan, out)


def _norm_logcdf(y, m, v):
    # (far in the tail d / s overflows to +-inf, whose value is the limit)
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        s = np.sqrt(v)
        d = y - m
        out = np.where(s > 0, special.log_ndtr(d / s), np.where(d >= 0, 0.0, -np.inf))
    return np.where(np.isnan(d), np.nan, out)


def _mixture_logpdf(yk, m, v, w):
    """log sum_k w_k N(y; m_k, v_k) over the last axis; +inf at a weighted point mass."""
    comp = _norm_logpdf(yk, m, v)
    w = np.broadcast_to(w, comp.shape)
    spike = np.any(np.isposinf(comp) & (w > 0), axis=-1)
    comp = np.where(np.isposinf(comp), 0.0, comp)
    out = special.logsumexp(comp, b=w, axis=-1)
    return np.where(spike, np.inf, out)


class _ReadOnlyArrays:
    """Keeps the documented read-only arrays read-only through pickle and
    ``copy.deepcopy`` (both rebuild arrays writeable; shared state would then be
    open to in-place edits that break invariants such as var = parts' sum)."""

    def __setstate__(self, state):
        self.__dict__.update(state)
        for value in self.__dict__.values():
            if isinstance(value, np.ndarray):
                value.flags.writeable = False


class _ContinuousMixin(_ReadOnlyArrays):
    """Methods shared by the two continuous predictives (need mean/var/ppf/cdf/logpdf)."""

    def std(self):
        """Predictive standard deviation, ``sqrt(var())``.

        Returns
        -------
        std : ndarray of shape ``self.shape``
        """
        return np.sqrt(self.var())

    def pdf(self, y):
        """Probability density at ``y``, ``exp(logpdf(y))``.

        Parameters
        ----------
        y : array_like
            Broadcastable with ``self.shape``.

        Returns
        -------
        pdf : ndarray
        """
        return np.exp(self.logpdf(y))

    def interval(self, confidence=0.95):
        """Central interval holding probability ``confidence``.

        Parameters
        ----------
        confidence : float or array_like in [0, 1], default=0.95
            Broadcastable with ``self.shape``.

        Returns
        -------
        lower, upper : ndarray
            ``ppf((1 - confidence) / 2)`` and ``ppf((1 + confidence) / 2)``, so that
            ``cdf(upper) - cdf(lower) == confidence`` for a continuous predictive.
        """
        c = _check_probability(confidence, "confidence")
        _check_y_shape(c.shape, self.shape, "confidence")
        alpha = 0.5 * (1.0 - c)
        return self.ppf(alpha), self.ppf(1.0 - alpha)

    @property
    def ndim(self):
        """Number of batch dimensions."""
        return len(self.shape)

    @property
    def size(self):
        """Number of predictive distributions in the batch."""
        return int(np.prod(self.shape, dtype=np.int64))

    def __len__(self):
        if not self.shape:
            raise TypeError(f"len() of a scalar (0-d) {type(self).__name__}")
        return self.shape[0]

    def __iter__(self):
        # (without it, iteration would fall back on __getitem__ and give [] for 0-d)
        if not self.shape:
            raise TypeError(f"iteration over a scalar (0-d) {type(self).__name__}")
        return (self[i] for i in range(self.shape[0]))


# --------------------------------------------------------------------------- Normal


class NormalPredictive(_ContinuousMixin):
    """Elementwise independent Gaussian predictive distributions.

    Parameters
    ----------
    mean : array_like of shape (n,) or (n, n_outputs)
        Predictive means (any batch shape is accepted).
    var : array_like, optional
        Total predictive variances, broadcastable with ``mean``.  Must be finite
        and ``>= 0``.  A zero variance is allowed and denotes a point mass at the
        mean (see Notes).  If omitted, ``var = epistemic_var + aleatoric_var``.
    epistemic_var, aleatoric_var : array_like, optional
        The model (epistemic) and noise (aleatoric) parts of the variance,
        broadcastable with ``mean``, finite and ``>= 0``.  At least one of
        ``var``, ``epistemic_var``, ``aleatoric_var`` must be given.

        * ``var`` and both parts: the parts must add up to ``var``
          (relative tolerance 1e-10).
        * ``var`` and one part: the other part is ``var`` minus the given one
          (which must not exceed ``var``).
        * no ``var``: a missing part is taken as zero and ``var`` is their sum.
        * ``var`` only: both parts are ``None`` (not separated).

    Attributes
    ----------
    epistemic_var, aleatoric_var : ndarray or None
        The variance parts (read-only arrays of ``shape``), or ``None`` when the
        method does not separate them.
    shape : tuple
        Batch shape (the shape of ``mean()``).
    ndim : int
        ``len(shape)``.

    Notes
    -----
    Where the variance is zero the distribution is a point mass at the mean:
    ``mean``, ``var``, ``ppf`` (which returns the mean for every ``q``),
    ``interval`` and ``rvs`` work; ``logpdf`` is ``+inf`` at the mean and
    ``-inf`` elsewhere (the limit of the Gaussian density), ``cdf`` is the step
    ``y >= mean`` and ``entropy`` is ``-inf``.  ``to_scipy`` refuses zero
    variances because ``scipy.stats.norm`` returns NaN for ``scale=0``.

    Examples
    --------
    >>> import numpy as np
    >>> from skbayesnn.distributions import NormalPredictive
    >>> d = NormalPredictive([0.0, 1.0], epistemic_var=[0.5, 1.0], aleatoric_var=0.5)
    >>> d.var()
    array([1. , 1.5])
    >>> lo, hi = d.interval(0.95)
    >>> np.round(hi - lo, 3)
    array([3.92 , 4.801])
    >>> d[1:].mean()
    array([1.])
    """

    def __init__(self, mean, var=None, *, epistemic_var=None, aleatoric_var=None):
        mean = _as_float_array(mean, "mean")
        _check_finite(mean, "mean")
        if var is None and epistemic_var is None and aleatoric_var is None:
            raise ValueError(
                "NormalPredictive needs var, or epistemic_var and/or aleatoric_var; none was given."
            )
        given = {}
        for name, value in (("var", var), ("epistemic_var", epistemic_var),
                            ("aleatoric_var", aleatoric_var)):
            if value is not None:
                arr = _as_float_array(value, name)
                _check_nonnegative(arr, name)
                given[name] = arr
        # (a (n, 1) variance against (n,) means, or against an (n,) other
        # part, would broadcast to (n, n): one value per point in another layout)
        arrays = [("mean", mean), *given.items()]
        for i, (name, arr) in enumerate(arrays[1:], start=1):
            for other, ref in arrays[:i]:
                if ref.size > 1:
                    _check_y_shape(arr.shape, ref.shape, f"{name} (against {other})")
        shape = _broadcast_shape([("mean", mean.shape)] + [(n, a.shape) for n, a in given.items()])
        mean = _broadcast_copy(mean, shape)
        given = {n: np.array(np.broadcast_to(a, shape)) for n, a in given.items()}
        var = given.get("var")
        ep = given.get("epistemic_var")
        al = given.get("aleatoric_var")

        if var is None:
            ep = np.zeros(shape) if ep is None else ep
            al = np.zeros(shape) if al is None else al
            with np.errstate(over="ignore"):
                var = ep + al
            _check_finite(var, "epistemic_var + aleatoric_var")
        elif ep is not None and al is not None:
            diff = np.abs(ep + al - var)
            if np.any(diff > _PARTS_RTOL * np.abs(var)):
                worst = float(np.max(diff / np.maximum(np.abs(var), np.finfo(float).tiny)))
                raise ValueError(
                    "epistemic_var + aleatoric_var must equal var (rtol 1e-10); largest "
                    f"relative difference {worst:.3g}."
                )
        elif ep is not None or al is not None:
            part_name, part = ("epistemic_var", ep) if ep is not None else ("aleatoric_var", al)
            other = var - part
            if np.any(other < -_PARTS_RTOL * var):
                raise ValueError(f"{part_name} must not exceed var.")
            other = np.maximum(other, 0.0)
            if ep is None:
                ep = other
            else:
                al = other

        self._mean = mean
        self._var = _frozen(var)
        self._epistemic_var = None if ep is None else _frozen(ep)
        self._aleatoric_var = None if al is None else _frozen(al)

    # -- attributes
    @property
    def shape(self):
        """Batch shape: the shape of ``mean()``."""
        return self._mean.shape

    @property
    def epistemic_var(self):
        """Epistemic (model) variance, or ``None`` when not separated."""
        return self._epistemic_var

    @property
    def aleatoric_var(self):
        """Aleatoric (noise) variance, or ``None`` when not separated."""
        return self._aleatoric_var

    # -- moments
    def mean(self):
        """Predictive mean.

        Returns
        -------
        mean : ndarray of shape ``self.shape``

        Examples
        --------
        >>> NormalPredictive([1.0, 2.0], 1.0).mean()
        array([1., 2.])
        """
        return self._mean.copy()

    def var(self):
        """Total predictive variance (epistemic + aleatoric).

        Returns
        -------
        var : ndarray of shape ``self.shape``

        Examples
        --------
        >>> NormalPredictive([1.0, 2.0], [4.0, 9.0]).std()
        array([2., 3.])
        """
        return self._var.copy()

    # -- densities and probabilities
    def logpdf(self, y):
        """Log density at ``y`` (``+inf``/``-inf`` where the variance is zero, see Notes).

        Parameters
        ----------
        y : array_like
            Broadcastable with ``self.shape``.

        Returns
        -------
        logpdf : ndarray of the broadcast shape

        Examples
        --------
        >>> float(NormalPredictive(0.0, 1.0).logpdf(0.0))  # -log(sqrt(2 pi))
        -0.9189385332046727
        """
        return _norm_logpdf(_y_array(y, self.shape), self._mean, self._var)

    def cdf(self, y):
        """Cumulative distribution function at ``y``.

        Examples
        --------
        >>> float(NormalPredictive(0.0, 1.0).cdf(0.0))
        0.5
        """
        return _norm_cdf(_y_array(y, self.shape), self._mean, self._var)

    def logcdf(self, y):
        """Log of the cdf, accurate far in the lower tail (``scipy.special.log_ndtr``).

        Examples
        --------
        >>> round(float(NormalPredictive(0.0, 1.0).logcdf(-40.0)), 2)
        -804.61
        """
        return _norm_logcdf(_y_array(y, self.shape), self._mean, self._var)

    def sf(self, y):
        """Survival function ``1 - cdf(y)``, computed without cancellation.

        Examples
        --------
        >>> float(NormalPredictive(0.0, 1.0).sf(10.0)) > 0
        True
        """
        return _norm_sf(_y_array(y, self.shape), self._mean, self._var)

    def ppf(self, q):
        """Quantile function (inverse cdf).

        Parameters
        ----------
        q : array_like in [0, 1]
            Broadcastable with ``self.shape``.

        Returns
        -------
        x : ndarray
            ``mean + std * ndtri(q)``; the mean where the variance is zero.

        Raises
        ------
        ValueError
            If some ``q`` lies outside [0, 1] or is NaN, or if ``q`` does not
            broadcast with ``self.shape`` ("shape mismatch").

        Examples
        --------
        >>> round(float(NormalPredictive(0.0, 1.0).ppf(0.975)), 6)
        1.959964
        """
        q = _check_probability(q, "q")
        _check_y_shape(q.shape, self.shape, "q")
        s = np.sqrt(self._var)
        z = special.ndtri(q)
        with np.errstate(invalid="ignore"):
            return np.where(s > 0, self._mean + s * z, np.broadcast_to(self._mean, np.shape(s * z)))

    def interval(self, confidence=0.95):
        """Central interval ``mean -/+ std * ndtri((1 + confidence) / 2)``.

        Parameters
        ----------
        confidence : float or array_like in [0, 1], default=0.95

        Returns
        -------
        lower, upper : ndarray

        Examples
        --------
        >>> lo, hi = NormalPredictive(0.0, 1.0).interval(0.95)
        >>> round(float(hi), 4)
        1.96
        """
        c = _check_probability(confidence, "confidence")
        _check_y_shape(c.shape, self.shape, "confidence")
        s = np.sqrt(self._var)
        with np.errstate(invalid="ignore"):
            half = np.where(s > 0, s * special.ndtri(0.5 + 0.5 * c), 0.0)
        return self._mean - half, self._mean + half

    def entropy(self):
        """Differential entropy ``0.5 * log(2 pi e var)`` (``-inf`` where var is zero).

        Examples
        --------
        >>> round(float(NormalPredictive(0.0, 1.0).entropy()), 6)
        1.418939
        """
        with np.errstate(divide="ignore"):
            return 0.5 + _LOG_SQRT_2PI + 0.5 * np.log(self._var)

    def rvs(self, size=None, random_state=None):
        """Draw samples.

        Parameters
        ----------
        size : None, int or tuple of ints
            ``None`` draws one sample shaped like ``mean()``; ``s`` gives shape
            ``(s, *self.shape)``; a tuple ``t`` gives ``(*t, *self.shape)``.
        random_state : None, int, numpy RandomState or Generator
            As :func:`sklearn.utils.check_random_state`, also accepting a Generator.

        Returns
        -------
        samples : ndarray

        Examples
        --------
        >>> NormalPredictive([0.0, 5.0], 1.0).rvs(3, random_state=0).shape
        (3, 2)
        """
        rng = check_rng(random_state)
        out_shape = _size_tuple(size) + self.shape
        z = rng.standard_normal(out_shape)
        return self._mean + np.sqrt(self._var) * z

    def to_scipy(self):
        """The matching frozen ``scipy.stats.norm(loc=mean, scale=std)``.

        Raises
        ------
        ValueError
            If some variance is zero (scipy.stats.norm gives NaN for ``scale=0``).

        Examples
        --------
        >>> float(NormalPredictive(1.0, 4.0).to_scipy().std())
        2.0
        """
        if np.any(self._var == 0):
            raise ValueError(
                "to_scipy needs positive variances: scipy.stats.norm returns NaN for scale=0 "
                f"({int(np.count_nonzero(self._var == 0))} zero variance(s))."
            )
        return stats.norm(loc=self.mean(), scale=self.std())

    # -- container protocol
    def __getitem__(self, key):
        idx = _batch_index(self.shape, key)
        new = object.__new__(NormalPredictive)
        for name in ("_mean", "_var", "_epistemic_var", "_aleatoric_var"):
            arr = getattr(self, name)
            setattr(new, name, None if arr is None else _frozen(arr.reshape(-1)[idx]))
        return new

    def __repr__(self):
        parts = "" if self._epistemic_var is None else ", with epistemic/aleatoric parts"
        return (
            f"NormalPredictive(shape={self.shape}, mean={_fmt(self._mean)}, "
            f"std={_fmt(np.sqrt(self._var))}{parts})"
        )


# --------------------------------------------------------------------------- mixture

MixtureComponents = namedtuple("MixtureComponents", ["means", "vars", "weights", "aleatoric_vars"])
MixtureComponents.__doc__ = """Per-component parameters of a :class:`GaussianMixturePredictive`.

All arrays have shape ``(*shape, n_components)`` (weights broadcast to it);
``aleatoric_vars`` is ``None`` when not given."""


def _log_density_terms(log_coef, z):
    """``log w_k N(y; m_k, s_k^2)`` from ``z = (y - m_k) / s_k`` (``-inf`` where
    ``z^2`` overflows: a component too far away to count)."""
    with np.errstate(over="ignore"):
        return log_coef + stats.norm.logpdf(z)


def _logsumexp_last(a):
    """``log sum exp`` over the last axis, ``-inf`` (not NaN) where every term is."""
    a_max = a.max(axis=-1)
    shift = np.where(np.isfinite(a_max), a_max, 0.0)
    with np.errstate(divide="ignore"):
        return np.log(np.exp(a - shift[..., None]).sum(axis=-1)) + shift


def _entropy_on_cuts(rel, s, log_coef, pos, ref):
    """Mixture entropy per row by Gauss-Legendre on the pieces between the
    cuts ``rel_k + s_k t`` of the components of positive weight (``rel``: means
    relative to the reference component ``ref``, whose cuts the zero-weight
    components take: pieces of zero width)."""
    nodes, gl_w = special.roots_legendre(_ENTROPY_NODES)
    r, k = rel.shape
    cut_m = np.where(pos, rel, 0.0)
    cut_s = np.where(pos, s, s[np.arange(r), ref][:, None])
    inv_s = 1.0 / s
    n_pieces = k * _ENTROPY_CUTS.size - 1
    out = np.zeros(r)
    # Temporaries of (rows, pieces, nodes, k) elements, at most ~2e6: rows in
    # chunks, and for many components the pieces of a row too (K pieces per
    # component, so one row alone is O(K^2)).
    budget = 2_000_000 // (nodes.size * k)
    chunk = max(1, budget // n_pieces)
    piece_chunk = max(1, min(n_pieces, budget))
    for start in range(0, r, chunk):
        sl = slice(start, start + chunk)
        c = cut_m[sl].shape[0]
        cuts = np.sort((cut_m[sl][:, :, None] + cut_s[sl][:, :, None] * _ENTROPY_CUTS)
                       .reshape(c, -1), axis=1)
        for p0 in range(0, n_pieces, piece_chunk):
            p1 = min(p0 + piece_chunk, n_pieces)
            lo, hi = cuts[:, p0:p1], cuts[:, p0 + 1:p1 + 1]
            half = 0.5 * (hi - lo)  # (c, pieces)
            y = (0.5 * (hi + lo))[..., None] + half[..., None] * nodes
            z = (y.reshape(c, -1, 1) - rel[sl][:, None, :]) * inv_s[sl][:, None, :]
            logp = _logsumexp_last(_log_density_terms(log_coef[sl][:, None, :], z))
            integrand = special.entr(np.exp(logp)).reshape(c, half.shape[1], nodes.size)
            out[sl] += np.sum(half * (integrand @ gl_w), axis=1)
    return out


def _entropy_by_component(m, s, log_coef, w):
    """Mixture entropy per row as ``-sum_k w_k E_k[log p]``, each expectation
    over its component's window of +-12 standard deviations, in the
    component's own frame (offsets from its mean; other means enter as exact
    differences), cut where any component's cuts fall inside the window.  For
    the rare rows whose components lie too far apart (relative to their
    widths) for cuts on one axis."""
    nodes, gl_w = special.roots_legendre(_ENTROPY_NODES)
    out = np.zeros(m.shape[0])
    for i in range(m.shape[0]):
        keep = w[i] > 0
        for c in np.flatnonzero(keep):
            d = m[i] - m[i, c]  # means relative to component c
            lim = 12.0 * s[i, c]
            cuts = (d[keep, None] + s[i, keep, None] * _ENTROPY_CUTS).ravel()
            cuts = np.unique(np.clip(np.concatenate([cuts, [-lim, lim]]), -lim, lim))
            half = 0.5 * np.diff(cuts)
            off = (0.5 * (cuts[1:] + cuts[:-1]))[:, None] + half[:, None] * nodes
            logp = _logsumexp_last(_log_density_terms(log_coef[i], (off[..., None] - d) / s[i]))
            density = np.exp(stats.norm.logpdf(off / s[i, c])) / s[i, c]
            out[i] -= w[i, c] * np.sum(half * ((density * logp) @ gl_w))
    return out


class GaussianMixturePredictive(_ContinuousMixin):
    """Per test point, a mixture of ``K`` Gaussians.

    Used for ensembles (one component per member) and Monte Carlo predictives
    (one component per posterior sample).

    Parameters
    ----------
    means : array_like of shape (n, K) or (n, n_outputs, K)
        Component means; the component axis is always the LAST axis, the
        leading axes form the batch shape.
    vars : array_like
        Component variances, broadcastable with ``means``, finite and ``>= 0``.
        A zero variance is a point-mass component (allowed; see Notes).
    weights : array_like of shape (K,) or broadcastable to ``means``, optional
        Mixture weights, ``>= 0`` and summing to 1 over the last axis within
        1e-8 (they are renormalised).  Equal weights ``1/K`` if omitted.
    aleatoric_vars : array_like, optional
        The noise part of each component's variance (``0 <= aleatoric_vars <=
        vars``); the rest of ``vars`` is epistemic.

    Attributes
    ----------
    components : MixtureComponents
        ``(means, vars, weights, aleatoric_vars)``, broadcast to ``(*shape, K)``.
    n_components : int
        ``K``.
    epistemic_var, aleatoric_var : ndarray or None
        With ``aleatoric_vars``: ``aleatoric_var = sum_k w_k aleatoric_vars_k``
        and ``epistemic_var = between_var + sum_k w_k (vars_k -
        aleatoric_vars_k)``, so that ``epistemic_var + aleatoric_var ==
        var()``.  Without ``aleatoric_vars`` both are ``None`` (not separated,
        as for :class:`NormalPredictive` built from ``var`` only): the
        components' own variances may hold model uncertainty too, so the
        spread of their means alone is not the epistemic variance.
    between_var : ndarray
        Variance of the component means, ``sum_k w_k (m_k - mean)^2`` (always
        available; a lower bound on the epistemic variance when the component
        variances are pure noise).
    shape : tuple
        Batch shape.

    Notes
    -----
    ``ppf`` brackets each quantile between the smallest and largest component
    quantile (the mixture cdf lies between them) and solves ``cdf(x) = q``
    (``sf(x) = 1 - q`` for ``q > 0.5``, for accuracy in the upper tail) with
    :func:`scipy.optimize.elementwise.find_root` (Chandrupatla's method, to
    about machine precision in ``x``).

    Point-mass components (zero variance) give ``logpdf = +inf`` at their
    location, a jump in the cdf, and ``entropy = -inf``; ``ppf`` then returns
    the generalised inverse and ``cdf(ppf(q)) == q`` no longer holds at jumps.

    Examples
    --------
    >>> import numpy as np
    >>> from skbayesnn.distributions import GaussianMixturePredictive
    >>> d = GaussianMixturePredictive([[-1.0, 1.0]], [[0.5, 0.5]], aleatoric_vars=0.25)
    >>> d.mean(), d.var()
    (array([0.]), array([1.5]))
    >>> d.epistemic_var, d.aleatoric_var, d.between_var
    (array([1.25]), array([0.25]), array([1.]))
    >>> round(float(d.cdf(d.ppf(0.9))[0]), 12)
    0.9
    """

    def __init__(self, means, vars, weights=None, *, aleatoric_vars=None):  # noqa: A002
        means = _as_float_array(means, "means")
        variances = _as_float_array(vars, "vars")
        _check_finite(means, "means")
        _check_nonnegative(variances, "vars")
        if means.ndim == 0:
            raise ValueError(
                "means must have at least one axis (the component axis, which is last)."
            )
        named = [("means", means.shape), ("vars", variances.shape)]
        if weights is not None:
            weights = _as_float_array(weights, "weights")
            _check_nonnegative(weights, "weights")
            named.append(("weights", weights.shape))
        if aleatoric_vars is not None:
            aleatoric_vars = _as_float_array(aleatoric_vars, "aleatoric_vars")
            _check_nonnegative(aleatoric_vars, "aleatoric_vars")
            named.append(("aleatoric_vars", aleatoric_vars.shape))
        full = _broadcast_shape(named)
        if len(full) == 0 or full[-1] == 0:
            raise ValueError("the mixture needs at least one component (last axis of means).")
        k = full[-1]
        if weights is None:
            weights = np.full(full, 1.0 / k)
        else:
            weights = np.array(np.broadcast_to(weights, full))
            total = weights.sum(axis=-1)
            if np.any(np.abs(total - 1.0) > _WEIGHTS_ATOL):
                raise ValueError(
                    "weights must sum to 1 over the component (last) axis within 1e-8; got sums "
                    f"between {total.min()!r} and {total.max()!r}."
                )
            weights = weights / total[..., None]
        if aleatoric_vars is not None:
            aleatoric_vars = np.array(np.broadcast_to(aleatoric_vars, full))
            v_full = np.broadcast_to(variances, full)
            if np.any(aleatoric_vars > v_full * (1.0 + _PARTS_RTOL)):
                raise ValueError("aleatoric_vars must not exceed vars (component by component).")
            aleatoric_vars = _frozen(np.minimum(aleatoric_vars, v_full))

        self._means = _broadcast_copy(means, full)
        self._vars = _broadcast_copy(variances, full)
        self._weights = _frozen(weights)
        self._aleatoric_vars = aleatoric_vars

        w, m = self._weights, self._means
        mean = np.sum(w * m, axis=-1)
        with np.errstate(over="ignore", invalid="ignore"):
            dev2 = (m - mean[..., None]) ** 2
            # a zero-weight component counts for nothing, however far away
            between = np.sum(np.where(w > 0, w * dev2, 0.0), axis=-1)
            var = np.sum(w * self._vars, axis=-1) + between
        if not np.all(np.isfinite(var)):
            raise ValueError(
                "the mixture's variance overflows float64: its component means are too far "
                "apart (or its variances too large)."
            )
        self._mean = _frozen(mean)
        self._var = _frozen(var)
        self._between_var = _frozen(between)
        if aleatoric_vars is None:
            self._epistemic_var = self._aleatoric_var = None
        else:
            self._epistemic_var = _frozen(
                between + np.sum(w * (self._vars - aleatoric_vars), axis=-1)
            )
            self._aleatoric_var = _frozen(np.sum(w * aleatoric_vars, axis=-1))

    # -- attributes
    @property
    def shape(self):
        """Batch shape (``means.shape[:-1]``)."""
        return self._mean.shape

    @property
    def n_components(self):
        """Number of mixture components ``K``."""
        return self._means.shape[-1]

    @property
    def components(self):
        """Component parameters as a :class:`MixtureComponents` named tuple."""
        return MixtureComponents(self._means, self._vars, self._weights, self._aleatoric_vars)

    @property
    def epistemic_var(self):
        """Epistemic variance, or ``None`` without ``aleatoric_vars`` (see the class docstring)."""
        return self._epistemic_var

    @property
    def aleatoric_var(self):
        """Aleatoric variance, or ``None`` without ``aleatoric_vars``."""
        return self._aleatoric_var

    @property
    def between_var(self):
        """Variance of the component means ``sum_k w_k (m_k - mean)^2``.

        Examples
        --------
        >>> GaussianMixturePredictive([[-1.0, 1.0]], 0.5).between_var
        array([1.])
        """
        return self._between_var

    # -- moments
    def mean(self):
        """Mixture mean ``sum_k w_k m_k``.

        Examples
        --------
        >>> GaussianMixturePredictive([[0.0, 2.0]], 1.0, [0.25, 0.75]).mean()
        array([1.5])
        """
        return self._mean.copy()

    def var(self):
        """Mixture variance by the law of total variance, ``sum_k w_k (v_k + (m_k - mean)^2)``.

        Examples
        --------
        >>> GaussianMixturePredictive([[0.0, 2.0]], 1.0).var()
        array([2.])
        """
        return self._var.copy()

    # -- densities and probabilities
    def _yk(self, y):
        return _y_array(y, self.shape)[..., None]

    def logpdf(self, y):
        """Log density ``logsumexp_k(log w_k + log N(y; m_k, v_k))`` (scipy.special.logsumexp).

        Parameters
        ----------
        y : array_like
            Broadcastable with ``self.shape``.

        Returns
        -------
        logpdf : ndarray

        Examples
        --------
        >>> d = GaussianMixturePredictive([[0.0, 0.0]], [[1.0, 1.0]])
        >>> round(float(d.logpdf(0.0)[0]), 6)
        -0.918939
        """
        return _mixture_logpdf(self._yk(y), self._means, self._vars, self._weights)

    def cdf(self, y):
        """Mixture cdf ``sum_k w_k Phi((y - m_k) / s_k)``.

        Examples
        --------
        >>> float(GaussianMixturePredictive([[-1.0, 1.0]], 1.0).cdf(0.0)[0])
        0.5
        """
        return np.sum(self._weights * _norm_cdf(self._yk(y), self._means, self._vars), axis=-1)

    def logcdf(self, y):
        """Log cdf ``logsumexp_k(log w_k + log Phi(.))``, accurate in the lower tail.

        Examples
        --------
        >>> d = GaussianMixturePredictive([[0.0]], [[1.0]])
        >>> round(float(d.logcdf(-40.0)[0]), 2)
        -804.61
        """
        comp = _norm_logcdf(self._yk(y), self._means, self._vars)
        return special.logsumexp(comp, b=np.broadcast_to(self._weights, comp.shape), axis=-1)

    def sf(self, y):
        """Survival function ``sum_k w_k Phi(-(y - m_k) / s_k)``.

        Examples
        --------
        >>> float(GaussianMixturePredictive([[-1.0, 1.0]], 1.0).sf(0.0)[0])
        0.5
        """
        return np.sum(self._weights * _norm_sf(self._yk(y), self._means, self._vars), axis=-1)

    def ppf(self, q):
        """Quantile function, solved numerically (see Notes of the class).

        Parameters
        ----------
        q : array_like in [0, 1]
            Broadcastable with ``self.shape``.

        Returns
        -------
        x : ndarray
            ``cdf(x) == q`` to about 1e-12 relative (continuous mixtures),
            unless the spacing of floats at ``x`` is coarser: components
            whose means are far from 0 against their spread (``1e10`` with
            sd 1: 3e-7 at ``q = 0.1``) are resolved only to that spacing.

        Examples
        --------
        >>> d = GaussianMixturePredictive([[-10.0, 10.0]], 1.0, [0.3, 0.7])
        >>> float(np.round(d.cdf(d.ppf(0.2)), 12)[0])
        0.2
        """
        from scipy.optimize.elementwise import find_root

        q = _check_probability(q, "q")
        shape = _check_y_shape(q.shape, self.shape, "q")
        k = self.n_components
        qf = np.broadcast_to(q, shape).reshape(-1)
        m = np.broadcast_to(self._means, shape + (k,)).reshape(-1, k)
        v = np.broadcast_to(self._vars, shape + (k,)).reshape(-1, k)
        w = np.broadcast_to(self._weights, shape + (k,)).reshape(-1, k)
        s = np.sqrt(v)
        with np.errstate(invalid="ignore"):
            cq = np.where(s > 0, m + s * special.ndtri(qf)[:, None], m)
        pos = w > 0
        lo = np.where(pos, cq, np.inf).min(axis=-1)
        hi = np.where(pos, cq, -np.inf).max(axis=-1)
        out = np.where(qf >= 1.0, hi, lo)

        def excess(x, j):
            # Increasing in x, zero at the quantile; uses sf above the median.
            j = j.astype(np.intp)
            xk = x[..., None]
            qj = qf[j]
            lower = np.sum(w[j] * _norm_cdf(xk, m[j], v[j]), axis=-1) - qj
            upper = (1.0 - qj) - np.sum(w[j] * _norm_sf(xk, m[j], v[j]), axis=-1)
            out = np.where(qj <= 0.5, lower, upper)
            # Far in the lower tail the cdf underflows (ndtr is 0 below -37.7):
            # there log cdf - log q, from log_ndtr.
            tiny = qj < 1e-300
            if np.any(tiny):
                jt = j[tiny]
                with np.errstate(divide="ignore"):
                    out[tiny] = special.logsumexp(
                        np.log(w[jt]) + _norm_logcdf(xk[tiny], m[jt], v[jt]), axis=-1
                    ) - np.log(qj[tiny])
            return out

        todo = np.flatnonzero((qf > 0) & (qf < 1) & (lo < hi))
        if todo.size:
            f_lo = excess(lo[todo], todo)
            f_hi = excess(hi[todo], todo)
            out[todo[f_lo >= 0]] = lo[todo[f_lo >= 0]]
            at_hi = (f_lo < 0) & (f_hi <= 0)
            out[todo[at_hi]] = hi[todo[at_hi]]
            todo = todo[(f_lo < 0) & (f_hi > 0)]
        if todo.size:
            # fatol=0: the default (tiny) stops where |cdf - q| < 2e-308, i.e. at
            # once for q below ~1e-292.
            res = find_root(excess, (lo[todo], hi[todo]), args=(todo,),
                            tolerances=dict(fatol=0.0))
            if not np.all(res.success):  # cannot happen with a valid bracket
                raise RuntimeError("GaussianMixturePredictive.ppf: root finding did not converge.")
            out[todo] = res.x
            # Where q falls in the jump of a point mass (a zero-variance
            # component), the root finder stops a few ulp left of it, where
            # cdf < q; the generalised inverse is the point itself.
            atom = (v[todo] == 0) & (w[todo] > 0)
            if atom.any():
                x = out[todo]
                at = np.where(atom & (m[todo] >= x[:, None]), m[todo], np.inf).min(axis=-1)
                near = np.isfinite(at) & (at - x <= 1e-9 * (1.0 + np.abs(at)))
                near[near] = (excess(x[near], todo[near]) < 0) & (
                    excess(at[near], todo[near]) >= 0
                )
                out[todo[near]] = at[near]
        return out.reshape(shape)

    def entropy(self):
        """Differential entropy ``-int p(y) log p(y) dy`` by piecewise Gauss-Legendre quadrature.

        There is no closed form.  For each point the real line is cut at
        ``m_k + s_k * t`` for every component ``k`` of positive weight and
        ``t`` in ``{0, +-1.5, +-3, +-5, +-8, +-12}``, and ``-p log p`` is
        integrated on every piece with 12 Gauss-Legendre nodes, so narrow,
        broad and widely separated components are all resolved (relative
        error below 1e-10 in our checks against adaptive quadrature; mass
        beyond 12 standard deviations of every component is ignored).  The
        cuts are placed relative to the heaviest component (the entropy does
        not change with a shift), and where a component lies more than 1e6 of
        its standard deviations from it, the entropy is computed as ``-sum_k
        w_k E_k[log p]``, each expectation in its component's own frame, so
        that means like 1e16 or components 1e100 apart keep their shape.  This
        is more reliable than ``scipy.stats.Mixture.entropy``, whose adaptive
        integration can miss a narrow, far-away component.  The cost is
        ``O(K^2)`` per point, so this is slow for mixtures with hundreds of
        components.  ``-inf`` where a component with positive weight has zero
        variance.

        Returns
        -------
        entropy : ndarray of shape ``self.shape``

        Examples
        --------
        >>> d = GaussianMixturePredictive([[-50.0, 50.0]], 1.0)  # two far-apart halves
        >>> round(float(d.entropy()[0] - np.log(2)), 6)  # = entropy of N(0, 1)
        1.418939
        """
        k = self.n_components
        m = self._means.reshape(-1, k)
        v = self._vars.reshape(-1, k)
        w = self._weights.reshape(-1, k)
        pos = w > 0
        spike = np.any((v == 0) & pos, axis=-1)  # answer -inf; the rest is finite junk
        s = np.where(v > 0, np.sqrt(v), 1.0)
        with np.errstate(divide="ignore"):
            log_coef = np.where(pos, np.log(w), -np.inf) - np.log(s)
        ref = np.argmax(w, axis=1)
        rel = m - m[np.arange(m.shape[0]), ref][:, None]
        far = np.any(pos & (np.abs(rel) > 1e6 * s), axis=1)
        out = np.empty(m.shape[0])
        if not far.all():
            out[~far] = _entropy_on_cuts(rel[~far], s[~far], log_coef[~far], pos[~far],
                                         ref[~far])
        if far.any():
            out[far] = _entropy_by_component(m[far], s[far], log_coef[far], w[far])
        out = np.where(spike, -np.inf, out)
        return out.reshape(self.shape)

    def rvs(self, size=None, random_state=None):
        """Draw samples: pick a component by weight, then draw from it.

        Parameters
        ----------
        size : None, int or tuple of ints
            ``None`` gives one draw shaped like ``mean()``; otherwise
            ``(*size, *self.shape)``.
        random_state : None, int, numpy RandomState or Generator

        Returns
        -------
        samples : ndarray

        Examples
        --------
        >>> d = GaussianMixturePredictive([[0.0, 100.0]], 1.0, [1.0, 0.0])
        >>> bool(np.all(d.rvs(1000, random_state=0) < 50))
        True
        """
        rng = check_rng(random_state)
        out_shape = _size_tuple(size) + self.shape
        u = rng.random(out_shape)
        z = rng.standard_normal(out_shape)
        cw = np.cumsum(self._weights, axis=-1)
        idx = _choose_index(cw, u, _last_positive(self._weights))[..., None]
        full = out_shape + (self.n_components,)
        m = np.take_along_axis(np.broadcast_to(self._means, full), idx, axis=-1)[..., 0]
        v = np.take_along_axis(np.broadcast_to(self._vars, full), idx, axis=-1)[..., 0]
        return m + np.sqrt(v) * z

    def to_scipy(self):
        """Per-point ``scipy.stats.Mixture`` objects of ``scipy.stats.Normal`` components.

        SciPy's new random-variable infrastructure (checked with SciPy 1.17)
        cannot hold an *array* of mixtures in one object: ``scipy.stats.Mixture``
        requires every component to have scalar parameters ("All elements of
        `components` must have scalar shapes") and takes one weight vector.  So
        this returns nested Python lists shaped like ``self.shape`` (a list of
        ``n`` for shape ``(n,)``, a list of ``n`` lists of ``n_outputs`` for
        ``(n, n_outputs)``, a single object for a 0-d batch), each entry a
        ``Mixture`` of the components with positive weight.  Building them costs
        a Python loop over points, so use it for inspection and reference
        checks rather than bulk evaluation.

        Raises
        ------
        ValueError
            If a component with positive weight has zero variance (not
            representable by ``scipy.stats.Normal``).

        Examples
        --------
        >>> d = GaussianMixturePredictive([[0.0, 2.0], [1.0, 3.0]], 1.0)
        >>> objs = d.to_scipy()
        >>> len(objs), round(float(objs[1].mean()), 12)
        (2, 2.0)
        """
        pos = self._weights > 0
        if np.any(pos & (self._vars == 0)):
            raise ValueError(
                "to_scipy needs positive component variances: scipy.stats.Normal cannot "
                "represent a zero-variance component."
            )
        k = self.n_components
        m = self._means.reshape(-1, k)
        s = np.sqrt(self._vars).reshape(-1, k)
        w = self._weights.reshape(-1, k)
        flat = []
        for i in range(m.shape[0]):
            keep = np.flatnonzero(w[i] > 0)
            comps = [stats.Normal(mu=float(m[i, j]), sigma=float(s[i, j])) for j in keep]
            flat.append(stats.Mixture(comps, weights=w[i, keep]))
        if not self.shape:
            return flat[0]
        arr = np.empty(len(flat), dtype=object)
        arr[:] = flat
        return arr.reshape(self.shape).tolist()

    # -- container protocol
    def __getitem__(self, key):
        idx = _batch_index(self.shape, key)
        k = self.n_components
        new = object.__new__(GaussianMixturePredictive)
        for name in ("_means", "_vars", "_weights", "_aleatoric_vars"):
            arr = getattr(self, name)
            setattr(new, name, None if arr is None else _frozen(arr.reshape(-1, k)[idx]))
        for name in ("_mean", "_var", "_between_var", "_epistemic_var", "_aleatoric_var"):
            arr = getattr(self, name)
            setattr(new, name, None if arr is None else _frozen(arr.reshape(-1)[idx]))
        return new

    def __repr__(self):
        parts = "" if self._aleatoric_vars is None else ", with aleatoric_vars"
        return (
            f"GaussianMixturePredictive(shape={self.shape}, n_components={self.n_components}, "
            f"mean={_fmt(self._mean)}, std={_fmt(np.sqrt(self._var))}{parts})"
        )


# --------------------------------------------------------------------------- categorical


def _renormalise_rows(p, total):
    """``p`` (float64, class axis last) with the rows whose sum ``total`` is off
    1 by more than its own rounding (``C`` ulp) divided by it; a new array.

    Dividing a row of exact fractions ``k/M`` (ensemble votes) whose float sum
    is ``1 - 1ulp`` would move ``k/M`` by an ulp, across a calibration bin's
    edge (:func:`skbayesnn.metrics.expected_calibration_error`).
    """
    out = np.array(p, dtype=np.float64)
    off = np.abs(total - 1.0) > p.shape[-1] * np.finfo(np.float64).eps
    out[off] /= total[off][..., None]
    return out


def _check_simplex(p, name):
    _check_finite(p, name)
    if p.size and np.min(p) < 0:
        raise ValueError(f"{name} must be >= 0; got a minimum of {np.min(p)!r}.")
    total = p.sum(axis=-1)
    if np.any(np.abs(total - 1.0) > _PROBA_ATOL):
        raise ValueError(
            f"{name} must sum to 1 over classes (last axis) within 1e-6; got sums between "
            f"{total.min()!r} and {total.max()!r}."
        )
    return _renormalise_rows(p, total)


class CategoricalPredictive(_ReadOnlyArrays):
    """Categorical predictive distribution of a classifier.

    Parameters
    ----------
    proba : array_like of shape (n, C)
        Class probabilities (the classifier's ``predict_proba``): finite,
        ``>= 0``, rows summing to 1 within 1e-6 (renormalised).  Any batch
        shape ``(..., C)`` is accepted; the class axis is last.
    classes : array_like of shape (C,), optional
        Class labels in column order (any distinct values, e.g. strings).
        Defaults to ``arange(C)``.
    member_proba : array_like of shape (S, n, C), optional
        Class probabilities of ``S`` ensemble members or Monte Carlo samples;
        each row must be a probability vector and their mean over the first
        axis must equal ``proba`` (within 1e-6).  Needed for
        :meth:`expected_entropy` and :meth:`mutual_information`.

    Attributes
    ----------
    classes : ndarray of shape (C,)
    n_classes : int
    member_proba : ndarray or None
    shape : tuple
        Batch shape (``proba.shape[:-1]``).

    Examples
    --------
    >>> import numpy as np
    >>> from skbayesnn.distributions import CategoricalPredictive
    >>> members = [[[1.0, 0.0]], [[0.0, 1.0]]]  # two confident members disagree
    >>> d = CategoricalPredictive([[0.5, 0.5]], ["no", "yes"], member_proba=members)
    >>> d.mutual_information() / np.log(2)
    array([1.])
    >>> d.logpmf(["yes"])
    array([-0.69314718])
    """

    def __init__(self, proba, classes=None, *, member_proba=None):
        proba = _as_float_array(proba, "proba")
        if proba.ndim == 0 or proba.shape[-1] == 0:
            raise ValueError("proba must have a non-empty class axis (the last axis).")
        proba = _check_simplex(proba, "proba")
        c = proba.shape[-1]
        if classes is None:
            classes = np.arange(c)
        else:
            classes = np.array(classes)
            if classes.ndim != 1 or classes.shape[0] != c:
                raise ValueError(
                    f"classes must be a 1-d array of length {c} (the number of columns of "
                    f"proba); got shape {classes.shape}."
                )
            if np.unique(classes).shape[0] != c:
                raise ValueError("classes must be distinct.")
        if member_proba is not None:
            member_proba = _as_float_array(member_proba, "member_proba")
            if member_proba.shape[1:] != proba.shape or member_proba.shape[0] == 0:
                raise ValueError(
                    f"shape mismatch: member_proba must have shape (S, *{proba.shape}) with "
                    f"S >= 1; got {member_proba.shape}."
                )
            member_proba = _check_simplex(member_proba, "member_proba")
            gap = np.abs(member_proba.mean(axis=0) - proba)
            if gap.size and np.max(gap) > _PROBA_ATOL:
                raise ValueError(
                    "proba must equal the mean of member_proba over its first axis (within "
                    f"1e-6); largest difference {np.max(gap):.3g}."
                )
            member_proba = _frozen(member_proba)
        self._proba = _frozen(proba)
        self._classes = _frozen(classes)
        self._member_proba = member_proba

    # -- attributes
    @property
    def proba(self):
        """Class probabilities, shape ``(*shape, n_classes)`` (read-only)."""
        return self._proba

    @property
    def classes(self):
        """Class labels in column order."""
        return self._classes

    @property
    def n_classes(self):
        """Number of classes ``C``."""
        return self._proba.shape[-1]

    @property
    def member_proba(self):
        """Member / sample probabilities ``(S, *shape, C)``, or ``None``."""
        return self._member_proba

    @property
    def shape(self):
        """Batch shape (``proba.shape[:-1]``)."""
        return self._proba.shape[:-1]

    @property
    def ndim(self):
        """Number of batch dimensions."""
        return len(self.shape)

    # -- summaries
    def mean(self):
        """Mean class-probability vector (equal to :attr:`proba`).

        Examples
        --------
        >>> CategoricalPredictive([[0.2, 0.8]]).mean()
        array([[0.2, 0.8]])
        """
        return self._proba.copy()

    def mode(self):
        """Most probable class label for each point (``classes[argmax(proba)]``).

        Examples
        --------
        >>> CategoricalPredictive([[0.2, 0.8], [0.9, 0.1]], ["a", "b"]).mode()
        array(['b', 'a'], dtype='<U1')
        """
        return self._classes[np.argmax(self._proba, axis=-1)]

    def _label_index(self, y):
        y = np.asarray(y)
        classes = self._classes
        order = np.argsort(classes, kind="stable")
        sorted_classes = classes[order]
        try:
            pos = np.searchsorted(sorted_classes, y)
            pos = np.clip(pos, 0, len(classes) - 1)
            found = np.asarray(sorted_classes[pos] == y, dtype=bool)
            if found.shape != np.shape(pos):
                raise TypeError
        except (TypeError, ValueError):
            found = np.zeros(y.shape, dtype=bool)
            pos = np.zeros(y.shape, dtype=np.intp)
        if not np.all(found):
            bad = np.unique(y[~found])[:5]
            raise ValueError(
                f"y contains labels that are not in classes: {bad.tolist()} (classes are "
                f"{classes.tolist()})."
            )
        _check_y_shape(y.shape, self.shape)
        return order[pos]

    def logpmf(self, y):
        """Log probability of the labels ``y`` (``-inf`` for a zero-probability class).

        Parameters
        ----------
        y : array_like of labels from :attr:`classes`
            Broadcastable with ``self.shape``.

        Raises
        ------
        ValueError
            If a label is not in :attr:`classes`.

        Examples
        --------
        >>> d = CategoricalPredictive([[0.25, 0.75]], ["cat", "dog"])
        >>> d.logpmf(["dog"])
        array([-0.28768207])
        """
        idx = self._label_index(y)
        shape = np.broadcast_shapes(idx.shape, self.shape)
        p = np.broadcast_to(self._proba, shape + (self.n_classes,))
        idx = np.broadcast_to(idx, shape)[..., None]
        with np.errstate(divide="ignore"):
            return np.log(np.take_along_axis(p, idx, axis=-1)[..., 0])

    def pmf(self, y):
        """Probability of the labels ``y``; see :meth:`logpmf`.

        Examples
        --------
        >>> CategoricalPredictive([[0.25, 0.75]], ["cat", "dog"]).pmf(["cat"])
        array([0.25])
        """
        return np.exp(self.logpmf(y))

    def entropy(self):
        """Total predictive entropy ``-sum_c p_c log p_c`` (nats; ``0 log 0 = 0``).

        Examples
        --------
        >>> CategoricalPredictive([[0.5, 0.5], [1.0, 0.0]]).entropy() / np.log(2)
        array([1., 0.])
        """
        return special.entr(self._proba).sum(axis=-1)

    def expected_entropy(self):
        """Mean entropy of the members' predictions (aleatoric uncertainty).

        Raises
        ------
        ValueError
            If the object was built without ``member_proba``.

        Examples
        --------
        >>> d = CategoricalPredictive([[0.5, 0.5]], member_proba=[[[0.5, 0.5]], [[0.5, 0.5]]])
        >>> d.expected_entropy() / np.log(2)
        array([1.])
        """
        if self._member_proba is None:
            raise ValueError(
                "expected_entropy needs member probabilities: build the CategoricalPredictive "
                "with member_proba (ensemble members or Monte Carlo samples)."
            )
        return special.entr(self._member_proba).sum(axis=-1).mean(axis=0)

    def mutual_information(self):
        """Mutual information: the entropy of the members' mean minus
        :meth:`expected_entropy` (epistemic part).

        The members' mean may differ from :attr:`proba` (renormalised) by up to
        1e-6, which the entropy's steep slope near 0 would turn into a spurious
        ~1e-5, so it is not ``entropy() - expected_entropy()`` to that order.

        Non-negative by Jensen's inequality; tiny negative rounding is clipped at 0.

        Raises
        ------
        ValueError
            If the object was built without ``member_proba``.

        Examples
        --------
        >>> d = CategoricalPredictive([[0.5, 0.5]], member_proba=[[[0.5, 0.5]], [[0.5, 0.5]]])
        >>> d.mutual_information()
        array([0.])
        """
        if self._member_proba is None:
            raise ValueError(
                "mutual_information needs member probabilities: build the CategoricalPredictive "
                "with member_proba (ensemble members or Monte Carlo samples)."
            )
        total = special.entr(self._member_proba.mean(axis=0)).sum(axis=-1)
        return np.maximum(total - self.expected_entropy(), 0.0)

    def rvs(self, size=None, random_state=None):
        """Draw class labels.

        Parameters
        ----------
        size : None, int or tuple of ints
            ``None`` gives one label per point (shape ``self.shape``); otherwise
            ``(*size, *self.shape)``.
        random_state : None, int, numpy RandomState or Generator

        Returns
        -------
        labels : ndarray of ``classes.dtype``

        Examples
        --------
        >>> CategoricalPredictive([[0.0, 1.0]], ["a", "b"]).rvs(3, random_state=0)[:, 0]
        array(['b', 'b', 'b'], dtype='<U1')
        """
        rng = check_rng(random_state)
        out_shape = _size_tuple(size) + self.shape
        u = rng.random(out_shape)
        idx = _choose_index(np.cumsum(self._proba, axis=-1), u, _last_positive(self._proba))
        return self._classes[idx]

    def to_scipy(self):
        """Per-point frozen ``scipy.stats.multinomial(1, p)`` distributions.

        A categorical draw is a one-trial multinomial: its ``pmf`` takes one-hot
        vectors in the column order of :attr:`classes` and ``rvs`` returns them.
        Returned as nested lists shaped like ``self.shape`` (a single object for
        a 0-d batch).

        Examples
        --------
        >>> objs = CategoricalPredictive([[0.25, 0.75]]).to_scipy()
        >>> float(objs[0].pmf([0, 1]))
        0.75
        """
        c = self.n_classes
        flat = [stats.multinomial(1, row) for row in self._proba.reshape(-1, c)]
        if not self.shape:
            return flat[0]
        arr = np.empty(len(flat), dtype=object)
        arr[:] = flat
        return arr.reshape(self.shape).tolist()

    # -- container protocol
    def __len__(self):
        if not self.shape:
            raise TypeError("len() of a scalar (0-d) CategoricalPredictive")
        return self.shape[0]

    def __iter__(self):
        if not self.shape:
            raise TypeError("iteration over a scalar (0-d) CategoricalPredictive")
        return (self[i] for i in range(self.shape[0]))

    def __getitem__(self, key):
        idx = _batch_index(self.shape, key)
        c = self.n_classes
        new = object.__new__(CategoricalPredictive)
        new._proba = _frozen(self._proba.reshape(-1, c)[idx])
        new._classes = self._classes
        new._member_proba = None
        if self._member_proba is not None:
            s = self._member_proba.shape[0]
            new._member_proba = _frozen(self._member_proba.reshape(s, -1, c)[:, idx])
        return new

    def __repr__(self):
        members = (
            "" if self._member_proba is None
            else f", n_members={self._member_proba.shape[0]}"
        )
        return (
            f"CategoricalPredictive(shape={self.shape}, classes={_fmt(self._classes)}"
            f"{members})"
        )
