"""Array backend: NumPy on the CPU, CuPy on a CUDA GPU.

Every numerical routine of :mod:`skbayesnn.core` takes its array namespace
``xp`` from here, so the same code runs on both devices.  The special functions
that NumPy lacks (normal cdf/log-cdf, ``erfcx``, ``expit``) come from
:mod:`scipy.special` or :mod:`cupyx.scipy.special` through :func:`special`.
"""

from __future__ import annotations

import math
from types import SimpleNamespace

import numpy as np

DEVICES = ("cpu", "cuda", "auto")

_LOG_SQRT_2PI = 0.5 * math.log(2.0 * math.pi)
_INV_SQRT_2PI = 1.0 / math.sqrt(2.0 * math.pi)


class DeviceUnavailableError(RuntimeError):
    """Raised when ``device="cuda"`` is requested but CuPy or a GPU is missing."""


def _import_cupy():
    try:
        import cupy
    except Exception:  # ImportError, or a broken CUDA installation
        return None
    return cupy


def cuda_available():
    """Return True when CuPy imports and sees at least one CUDA device."""
    cupy = _import_cupy()
    if cupy is None:
        return False
    try:
        return cupy.cuda.runtime.getDeviceCount() > 0
    except Exception:
        return False


def validate_device(device):
    """Check a ``device`` argument and return it unchanged.

    Raises
    ------
    TypeError
        If ``device`` is not a string.
    ValueError
        If it is not one of ``"cpu"``, ``"cuda"``, ``"auto"``.
    """
    if not isinstance(device, str):
        raise TypeError(
            f"device must be one of {DEVICES} (a string), got {device!r} of type "
            f"{type(device).__name__}."
        )
    if device not in DEVICES:
        raise ValueError(f"device must be one of {DEVICES}, got {device!r}.")
    return device


def resolve_device(device="cpu"):
    """Map ``"cpu" | "cuda" | "auto"`` to the concrete device ``"cpu"`` or ``"cuda"``.

    ``"auto"`` picks ``"cuda"`` when CuPy and a GPU are present, else ``"cpu"``.

    Raises
    ------
    DeviceUnavailableError
        If ``"cuda"`` is requested and CuPy is not installed or no GPU is visible.
    """
    validate_device(device)
    if device == "cpu":
        return "cpu"
    if device == "auto":
        return "cuda" if cuda_available() else "cpu"
    if _import_cupy() is None:
        raise DeviceUnavailableError(
            'device="cuda" needs CuPy, which is not installed. Install the "gpu" extra '
            '(`pip install "skbayesnn[gpu]"`, or `pip install ".[gpu]"` from a clone) or '
            'the cupy wheel matching your CUDA version, or use device="cpu".'
        )
    if not cuda_available():
        raise DeviceUnavailableError(
            'device="cuda" was requested but CuPy sees no CUDA GPU. Use device="cpu" '
            'or device="auto".'
        )
    return "cuda"


def get_namespace(device="cpu"):
    """Return the array module (``numpy`` or ``cupy``) for ``device``."""
    if resolve_device(device) == "cuda":
        return _import_cupy()
    return np


def array_namespace(*arrays):
    """Return the namespace the given arrays live in.

    An array that provides ``__skbayesnn_namespace__`` (used by the test-suite's
    strict stand-in for a GPU namespace) names its own; CuPy arrays give
    ``cupy``; anything else (NumPy arrays, Python scalars, None) gives ``numpy``.
    """
    for a in arrays:
        ns = getattr(a, "__skbayesnn_namespace__", None)
        if ns is not None:
            return ns
    for a in arrays:
        if type(a).__module__.split(".")[0] == "cupy":
            return _import_cupy()
    return np


def asnumpy(x):
    """Copy ``x`` to a NumPy array on the host (no copy if it already is one)."""
    if x is None:
        return None
    to_host = getattr(x, "__skbayesnn_asnumpy__", None)
    if callable(to_host):
        return to_host()
    if type(x).__module__.split(".")[0] == "cupy":
        return x.get()  # device -> host copy
    return np.asarray(x)


def to_device(x, xp):
    """Move ``x`` (NumPy or device array) into namespace ``xp``."""
    if x is None:
        return None
    if xp is np:
        return asnumpy(x)
    return xp.asarray(x)


def special(xp):
    """Special functions for namespace ``xp``.

    Returns a namespace with ``ndtr`` (standard normal cdf), ``log_ndtr``,
    ``ndtri``, ``erfcx``, ``expit``, ``norm_pdf`` and ``norm_logpdf``.
    """
    ns = getattr(xp, "__skbayesnn_special__", None)
    if ns is not None:
        return ns
    if xp is np:
        from scipy import special as sp
    else:
        from cupyx.scipy import special as sp

    def norm_pdf(x):
        return _INV_SQRT_2PI * xp.exp(-0.5 * x * x)

    def norm_logpdf(x):
        return -0.5 * x * x - _LOG_SQRT_2PI

    return SimpleNamespace(
        ndtr=sp.ndtr,
        log_ndtr=sp.log_ndtr,
        ndtri=sp.ndtri,
        erfcx=sp.erfcx,
        expit=sp.expit,
        norm_pdf=norm_pdf,
        norm_logpdf=norm_logpdf,
    )
