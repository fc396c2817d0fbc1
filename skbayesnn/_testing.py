"""A strict stand-in for a GPU array namespace, for tests on machines without one.

:func:`strict_namespace` returns ``(xp, asarray)``: ``xp`` behaves like NumPy,
but its arrays are :class:`StrictArray` objects that refuse to be handed to
NumPy functions or SciPy special functions directly, as CuPy arrays would on a
GPU.  Running a core routine with ``xp`` therefore proves it reaches every
operation through the namespace it was given (``xp.exp``, ``xp.where``,
``special(xp).ndtr``...) and never through ``numpy`` or ``scipy`` directly.
Operators (``a + b``, ``a @ b``) and array methods remain allowed, as on CuPy.

It also refuses what CuPy refuses, so that code mixing the host and the device
fails here as it would on a GPU: NumPy arrays as operands of the namespace's
functions (``xp.maximum(dev, host)``, ``xp.concatenate([dev, host])``; only
``xp.asarray`` and its kin take host data), a NumPy array assigned into a slice
(``dev[:2] = host``); indexing out one element gives a 0-d device array, not a
NumPy scalar (so ``host * dev[i]`` is refused too); and ``xp.linalg.cholesky``
returns NaN for a matrix that is not positive definite, as CuPy's does, where
NumPy raises.
"""

from __future__ import annotations

import types

import numpy as np
from scipy import special as _sp


def _unwrap(obj):
    if isinstance(obj, StrictArray):
        return obj.view(np.ndarray)
    if isinstance(obj, (list, tuple)):
        return type(obj)(_unwrap(o) for o in obj)
    if isinstance(obj, dict):
        return {k: _unwrap(v) for k, v in obj.items()}
    return obj


def _wrap(obj):
    if isinstance(obj, np.ndarray) and not isinstance(obj, StrictArray):
        return obj.view(StrictArray)
    if isinstance(obj, np.generic):
        return np.asarray(obj).view(StrictArray)
    if isinstance(obj, tuple):
        return tuple(_wrap(o) for o in obj)
    if isinstance(obj, list):
        return [_wrap(o) for o in obj]
    return obj


def _is_numpy_ufunc(ufunc):
    return getattr(np, ufunc.__name__, None) is ufunc


class StrictArray(np.ndarray):
    """NumPy array subclass that behaves like a device array (see module doc)."""

    __skbayesnn_namespace__ = None  # set below to the strict namespace

    def __skbayesnn_asnumpy__(self):
        return np.array(self.view(np.ndarray))

    def __array_function__(self, func, types_, args, kwargs):
        raise TypeError(
            f"numpy.{func.__name__} was called directly on a device array; core code "
            "must use the namespace it was given (xp)."
        )

    def __array_ufunc__(self, ufunc, method, *inputs, **kwargs):
        if not _is_numpy_ufunc(ufunc):
            raise TypeError(
                f"{ufunc.__name__} (not a NumPy ufunc) was called directly on a device "
                "array; use skbayesnn._backend.special(xp)."
            )
        host = [type(a).__name__ for a in inputs
                if isinstance(a, np.ndarray) and not isinstance(a, StrictArray)]
        if host:
            # CuPy refuses NumPy array operands ("Unsupported type"): a host
            # array must be moved to the device first (to_device(a, xp)).
            raise TypeError(
                f"{ufunc.__name__} mixes a device array with a host array ({host[0]}); "
                "move it to the device first."
            )
        if "out" in kwargs:
            kwargs["out"] = _unwrap(kwargs["out"])
        result = getattr(ufunc, method)(*_unwrap(inputs), **kwargs)
        return _wrap(result)

    def __float__(self):
        return float(self.view(np.ndarray))

    def __getitem__(self, key):
        # CuPy gives a 0-d device array for one element, NumPy a host scalar
        return _wrap(super().__getitem__(_unwrap(key)))

    def __setitem__(self, key, value):
        if isinstance(value, np.ndarray) and not isinstance(value, StrictArray) and value.ndim:
            # CuPy: "non-scalar numpy.ndarray cannot be used for fill"
            raise ValueError("a host (NumPy) array cannot be assigned into a device array; "
                             "move it to the device first.")
        super().__setitem__(_unwrap(key), _unwrap(value))


#: The namespace's functions that take host data (CuPy's ``asarray`` and kin).
_HOST_INPUT = frozenset({"asarray", "array", "asanyarray", "ascontiguousarray"})


def _host_operand(obj):
    """The first NumPy (host) array in ``obj`` (nested in lists, tuples), or None."""
    if isinstance(obj, np.ndarray) and not isinstance(obj, StrictArray):
        return obj
    if isinstance(obj, (list, tuple)):
        for item in obj:
            found = _host_operand(item)
            if found is not None:
                return found
    return None


def _cholesky_like_cupy(a, *args, **kwargs):
    # NaN where NumPy raises LinAlgError (CuPy does not check)
    try:
        return np.linalg.cholesky(a, *args, **kwargs)
    except np.linalg.LinAlgError:
        return np.full(np.shape(a), np.nan)


class _StrictModule(types.SimpleNamespace):
    """Module proxy: functions unwrap StrictArrays, call NumPy, wrap the result."""

    def __init__(self, module, special=None):
        super().__init__()
        self._module = module
        self.__skbayesnn_special__ = special

    def __getattr__(self, name):
        attr = getattr(self._module, name)
        if isinstance(attr, types.ModuleType):
            return _StrictModule(attr)
        if self._module is np.linalg and name == "cholesky":
            attr = _cholesky_like_cupy
        if callable(attr) and not isinstance(attr, type):

            def call(*args, **kwargs):
                if name not in _HOST_INPUT:
                    # (take's indices may be on the host: CuPy converts them)
                    host = _host_operand(args[:1] if name == "take" else args)
                    if host is None:
                        host = _host_operand(tuple(
                            v for k, v in kwargs.items() if (name, k) != ("take", "indices")))
                    if host is not None:
                        raise TypeError(
                            f"xp.{name} got a host (NumPy) array {host.shape} among device "
                            "arrays; CuPy refuses it: move it to the device first."
                        )
                return _wrap(attr(*_unwrap(args), **_unwrap(kwargs)))

            call.__name__ = name
            return call
        return attr

    def __repr__(self):
        return f"<strict namespace over {self._module.__name__}>"


def _strict_special():
    def f(fn):
        return lambda *a, **k: _wrap(fn(*_unwrap(a), **_unwrap(k)))

    def norm_pdf(x):
        return _wrap(np.exp(-0.5 * _unwrap(x) ** 2) / np.sqrt(2 * np.pi))

    def norm_logpdf(x):
        return _wrap(-0.5 * _unwrap(x) ** 2 - 0.5 * np.log(2 * np.pi))

    return types.SimpleNamespace(
        ndtr=f(_sp.ndtr),
        log_ndtr=f(_sp.log_ndtr),
        ndtri=f(_sp.ndtri),
        erfcx=f(_sp.erfcx),
        expit=f(_sp.expit),
        norm_pdf=norm_pdf,
        norm_logpdf=norm_logpdf,
    )


STRICT_XP = _StrictModule(np, special=_strict_special())
StrictArray.__skbayesnn_namespace__ = STRICT_XP


def strict_namespace():
    """Return the strict namespace and a function that moves NumPy data into it."""
    return STRICT_XP, STRICT_XP.asarray


def mc_moments(samples, axis=0):
    """Monte Carlo mean and variance with their standard errors.

    Returns ``(mean, var, se_mean, se_var)`` along ``axis``.  The standard error
    of the sample variance uses the fourth central moment,
    ``se_var = sqrt((m4 - var**2) / n)``, which is valid for any distribution
    with finite fourth moment (rectified Gaussians included).
    """
    samples = np.asarray(samples, dtype=np.float64)
    n = samples.shape[axis]
    mean = samples.mean(axis=axis)
    centred = samples - np.expand_dims(mean, axis)
    var = (centred**2).mean(axis=axis)
    m4 = (centred**4).mean(axis=axis)
    se_mean = np.sqrt(var / n)
    se_var = np.sqrt(np.maximum(m4 - var**2, 0.0) / n)
    return mean, var, se_mean, se_var


def assert_mc_close(actual, mc_value, mc_se, n_sigma=5.0, rtol=1e-9, atol=1e-300, what=""):
    """Assert ``|actual - mc_value| <= n_sigma * mc_se + rtol * |mc_value| + atol``.

    ``n_sigma = 5`` keeps the false-alarm rate of one comparison near 6e-7, so a
    grid of a few hundred comparisons fails by chance with probability < 1e-3.
    ``rtol``/``atol`` only absorb floating-point rounding where the Monte Carlo
    standard error is exactly zero (e.g. a ReLU that is off for every sample).
    """
    actual = np.asarray(actual, dtype=np.float64)
    mc_value = np.asarray(mc_value, dtype=np.float64)
    tol = n_sigma * np.asarray(mc_se) + rtol * np.abs(mc_value) + atol
    bad = ~(np.abs(actual - mc_value) <= tol)
    if np.any(bad):
        idx = np.argwhere(bad)[:5]
        raise AssertionError(
            f"{what}: {int(bad.sum())} of {bad.size} values differ from Monte Carlo by more "
            f"than {n_sigma} standard errors; first at {idx.tolist()}: actual="
            f"{np.atleast_1d(actual)[tuple(idx[0])] if actual.ndim else actual}, "
            f"mc={np.atleast_1d(mc_value)[tuple(idx[0])] if mc_value.ndim else mc_value}"
        )


def assert_members_describe_the_predictive(clf, X, dist, exact_mean=True):
    """A classifier's ``predict_dist(X, n_members=S)`` ``dist`` against its
    ``predict_proba``: the members' mean equals it within 5 Monte Carlo
    standard errors where the closed form is exact in expectation
    (``exact_mean``), the entropy splits exactly into expected entropy and
    mutual information, and the mutual information is >= 0 and not all 0."""
    members = dist.member_proba
    if exact_mean:
        assert_mc_close(clf.predict_proba(X), members.mean(axis=0),
                        members.std(axis=0) / np.sqrt(members.shape[0]), what="members' mean")
    entropy = -np.sum(dist.proba * np.log(dist.proba), axis=1)
    np.testing.assert_allclose(dist.expected_entropy() + dist.mutual_information(), entropy,
                               rtol=1e-10, atol=1e-13)
    info = dist.mutual_information()
    assert np.all(info >= 0) and np.any(info > 0)
