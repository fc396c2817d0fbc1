"""Device selection and special functions."""

import numpy as np
import pytest
from scipy import special as sp

from skbayesnn import _backend
from skbayesnn._backend import (
    DeviceUnavailableError,
    array_namespace,
    asnumpy,
    get_namespace,
    resolve_device,
    special,
    validate_device,
)


def test_cpu_and_auto_resolve_without_gpu(monkeypatch):
    monkeypatch.setattr(_backend, "_import_cupy", lambda: None)
    assert resolve_device("cpu") == "cpu"
    assert resolve_device("auto") == "cpu"
    assert get_namespace("cpu") is np


def test_cuda_without_cupy_names_the_fix(monkeypatch):
    monkeypatch.setattr(_backend, "_import_cupy", lambda: None)
    with pytest.raises(DeviceUnavailableError, match=r"skbayesnn\[gpu\]"):
        resolve_device("cuda")


def test_cuda_without_gpu_is_reported(monkeypatch):
    class FakeCupy:
        class cuda:
            class runtime:
                @staticmethod
                def getDeviceCount():
                    return 0

    monkeypatch.setattr(_backend, "_import_cupy", lambda: FakeCupy)
    with pytest.raises(DeviceUnavailableError, match="no CUDA GPU"):
        resolve_device("cuda")
    assert resolve_device("auto") == "cpu"


@pytest.mark.parametrize("bad", [1, None, ["cpu"], b"cpu"])
def test_non_string_device_is_a_type_error(bad):
    with pytest.raises(TypeError, match="device must be one of"):
        validate_device(bad)


@pytest.mark.parametrize("bad", ["gpu", "CPU", "cuda:0", ""])
def test_unknown_device_string_is_a_value_error(bad):
    with pytest.raises(ValueError, match="device must be one of"):
        validate_device(bad)


def test_special_functions_match_scipy():
    x = np.linspace(-40, 40, 161)
    s = special(np)
    np.testing.assert_array_equal(s.ndtr(x), sp.ndtr(x))
    np.testing.assert_array_equal(s.log_ndtr(x), sp.log_ndtr(x))
    np.testing.assert_array_equal(s.erfcx(x), sp.erfcx(x))
    from scipy.stats import norm

    np.testing.assert_allclose(s.norm_pdf(x), norm.pdf(x), rtol=1e-14, atol=0)
    np.testing.assert_allclose(s.norm_logpdf(x), norm.logpdf(x), rtol=1e-14)


def test_array_namespace_and_asnumpy(strict_xp):
    xp, asarray = strict_xp
    a = asarray(np.arange(3.0))
    assert array_namespace(a) is xp
    assert array_namespace(np.zeros(2), 1.0) is np
    host = asnumpy(a)
    assert type(host) is np.ndarray and np.array_equal(host, [0, 1, 2])
    assert asnumpy(None) is None


def test_strict_namespace_catches_direct_numpy_calls(strict_xp):
    # The guard the core's namespace tests rely on must itself work.
    xp, asarray = strict_xp
    a = asarray(np.ones(3))
    with pytest.raises(TypeError, match="numpy.where"):
        np.where(a > 0, a, 0)
    with pytest.raises(TypeError, match="special"):
        sp.ndtr(a)
    assert type(xp.where(a > 0, a, 0)).__name__ == "StrictArray"


def test_strict_namespace_refuses_what_cupy_refuses(strict_xp):
    # Host data mixed into device code fail on CuPy; the stand-in must fail
    # there too, or such code passes every test here and breaks on a GPU.
    xp, asarray = strict_xp
    dev = asarray(np.ones(3))
    host = np.ones(3)
    for call in (lambda: xp.maximum(dev, host), lambda: xp.concatenate([dev, host]),
                 lambda: xp.where(host > 0, dev, 0.0), lambda: host * dev[0]):
        with pytest.raises(TypeError, match="host"):
            call()
    with pytest.raises(ValueError, match="host"):
        dev[:2] = host[:2]
    dev[:2] = 2.0  # (scalars are fine, as on CuPy)
    assert type(dev[0]).__name__ == "StrictArray" and dev[0].ndim == 0 and float(dev[0]) == 2.0
    assert type(xp.asarray(host)).__name__ == "StrictArray"  # the way onto the device
    # take converts host indices, as CuPy's does, but not a host array
    assert float(xp.take(dev, np.array([0]))[0]) == 2.0
    with pytest.raises(TypeError, match="host"):
        xp.take(host, asarray(np.array([0])))
    assert float(xp.maximum(dev, np.float64(3.0))[0]) == 3.0  # NumPy scalars are scalars
    # CuPy's Cholesky returns NaN where NumPy's raises
    bad = asarray(np.array([[1.0, 2.0], [2.0, 1.0]]))
    assert bool(xp.all(xp.isnan(xp.linalg.cholesky(bad))))
    good = asarray(np.array([[2.0, 1.0], [1.0, 2.0]]))
    np.testing.assert_allclose(asnumpy(xp.linalg.cholesky(good)),
                               np.linalg.cholesky(asnumpy(good)))
