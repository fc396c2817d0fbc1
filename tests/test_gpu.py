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
    assert type(state["stats_"].S).__module__.split(".")[0] == "numpy"
    reloaded = pickle.loads(pickle.dumps(gpu))
    np.testing.assert_allclose(reloaded.predict(X), cpu.predict(X), rtol=1e-8)
    reloaded.partial_fit(X[:10], y[:10])
    cpu.partial_fit(X[:10], y[:10])
    np.testing.assert_allclose(reloaded.predict(X), cpu.predict(X), rtol=1e-8)


def test_tagi_epoch_on_gpu_matches_the_cpu_kernel():
    # CuPy runs the array-namespace TAGI step; NumPy the compiled kernel.  A few
    # batches agree to rounding, including information-form combined updates.
    import cupy

    from skbayesnn.inference import tagi

    rng = np.random.default_rng(2)
    X, Y = rng.normal(size=(40, 3)), rng.normal(size=(40, 2))
    mask = rng.random((40, 2)) < 0.7
    order = rng.permutation(40)
    cpu = tagi.init_posterior([3, 16, 8, 2], gain_w=1.0, gain_b=0.1, rng=rng, xp=np)
    gpu = cpu.to_namespace(cupy)
    kw = dict(batch_size=8, min_var_ratio=0.9)
    n_cpu, _ = tagi.run_epoch(cpu, X, Y, 0.1, order=order, obs_mask=mask, **kw)
    n_gpu, _ = tagi.run_epoch(
        gpu,
        cupy.asarray(X),
        cupy.asarray(Y),
        0.1,
        order=cupy.asarray(order),
        obs_mask=cupy.asarray(mask),
        **kw,
    )
    assert n_cpu == n_gpu > 0
    for a, b in zip(cpu.weight_means + cpu.weight_vars, gpu.weight_means + gpu.weight_vars):
        np.testing.assert_allclose(asnumpy(b), a, rtol=1e-10, atol=1e-13)


def test_tagi_regressor_on_gpu_matches_cpu():
    from skbayesnn import TAGIRegressor

    rng = np.random.default_rng(3)
    X = rng.normal(size=(200, 4))
    y = np.sin(X[:, 0]) + 0.1 * rng.normal(size=200)
    kw = dict(hidden_layer_sizes=(16,), sigma_v=0.5, max_epochs=2, random_state=0)
    cpu = TAGIRegressor(**kw).fit(X, y)
    gpu = TAGIRegressor(device="cuda", **kw).fit(X, y)
    for a, b in zip(cpu.predict(X, return_std=True), gpu.predict(X, return_std=True)):
        np.testing.assert_allclose(a, b, rtol=1e-8)
