"""CuPy path: the same computations on a GPU agree with NumPy.

Skipped where CuPy or a GPU is missing; the strict-namespace tests in tests/core
cover the namespace discipline on every machine.
"""

import numpy as np
import pytest

from skbayesnn._backend import asnumpy, cuda_available

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not cuda_available(), reason="needs CuPy and a CUDA GPU"),
]


def test_propagate_on_gpu_matches_cpu():
    import cupy

    from skbayesnn.core.posterior import GaussianMLPPosterior
    from skbayesnn.core.propagate import propagate

    post = GaussianMLPPosterior.from_sizes([5, 32, 32, 2], weight_var=0.05, random_state=0)
    X = np.random.default_rng(0).normal(size=(64, 5))
    for act_approx in ("linearize", "moment_match"):
        m_ref, v_ref = propagate(post, X, act_approx=act_approx)
        m, v = propagate(post.to_namespace(cupy), cupy.asarray(X), act_approx=act_approx)
        np.testing.assert_allclose(asnumpy(m), m_ref, rtol=1e-10, atol=1e-12)
        np.testing.assert_allclose(asnumpy(v), v_ref, rtol=1e-10, atol=1e-12)


def test_linear_regressor_on_gpu_matches_cpu_and_pickles_to_host():
    import pickle

    from skbayesnn import BayesianLinearRegressor

    rng = np.random.default_rng(1)
    X = rng.normal(size=(300, 4))
    y = X @ [1.0, 2.0, 0.0, -1.0] + rng.normal(size=300)
    cpu = BayesianLinearRegressor().fit(X, y)
    gpu = BayesianLinearRegressor(device="cuda").fit(X, y)
    for a, b in zip(cpu.predict(X, return_std=True), gpu.predict(X, return_std=True)):
        np.testing.assert_allclose(a, b, rtol=1e-8)
    # Pickled state holds host arrays only; loading on a GPU machine moves the
    # device attributes back, so the reloaded model predicts and keeps learning.
    state = gpu.__getstate__()
    assert type(state["stats_"].xx).__module__.split(".")[0] == "numpy"
    reloaded = pickle.loads(pickle.dumps(gpu))
    np.testing.assert_allclose(reloaded.predict(X), cpu.predict(X), rtol=1e-8)
    reloaded.partial_fit(X[:10], y[:10])
    cpu.partial_fit(X[:10], y[:10])
    np.testing.assert_allclose(reloaded.predict(X), cpu.predict(X), rtol=1e-8)
