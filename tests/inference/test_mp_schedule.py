"""The batch schedule of message_passing.md §6: data are counted exactly once.

A one-layer linear network with the Gaussian likelihood (known noise) is
Bayesian linear regression.  With one weight per output and no bias the factor
graph is a tree and message passing must return the closed-form posterior
exactly, whatever the batch size, the number of epochs, iterations, damping
or memory mode: an ADF/PBP-style schedule that re-multiplies every datum each
epoch would have ``epochs`` times the data precision.  With several weights the
graph is loopy (Gaussian loopy BP): the fixed point has the exact posterior means
(Weiss & Freeman 2001), and its variances are those of the fully factorised EP
fixed point (no diagonal Gaussian can carry the exact marginals of a correlated
posterior), whatever the batching.  ``_factorised_ep`` solves that fixed point
directly, datum by datum, as an independent reference.
"""

import numpy as np
import pytest

from skbayesnn.inference.message_passing import network

NOISE = 0.25


def _data(n, d, seed=1):
    r = np.random.default_rng(seed)
    X = r.normal(size=(n, d))
    y = X @ r.normal(size=d) + 0.3 + 0.5 * r.normal(size=n)
    return X, y


def _fit(X, Y, *, bias, bs, epochs, n_iter, per_example=True, chunk=1, prior_var=2.0):
    n, d = X.shape
    st = network.init_state(
        [d, Y.shape[1]], rng=np.random.default_rng(5), xp=np, prior_var=prior_var, bias=bias
    )
    nb = -(-n // bs)
    network.add_batches(st, nb)
    batches = [(k, X[k * bs : (k + 1) * bs], Y[k * bs : (k + 1) * bs]) for k in range(nb)]
    out = network.regression_output(NOISE)
    g = np.random.default_rng(3)
    for e in range(1, epochs + 1):
        network.run_epoch(
            st,
            batches,
            output=out,
            n_iter=n_iter,
            rng=g,
            epoch=e,
            per_example=per_example,
            chunk_size=chunk,
        )
    return st


def _exact(X, y, prior_mean, prior_var):
    P0 = np.diag(1.0 / prior_var)
    P = P0 + X.T @ X / NOISE
    mean = np.linalg.solve(P, P0 @ prior_mean + X.T @ y / NOISE)
    return mean, np.diag(np.linalg.inv(P))


@pytest.mark.parametrize(
    "bs,epochs,n_iter,per_example",
    [(50, 1, 1, True), (7, 3, 1, True), (4, 10, 3, True), (1, 2, 2, True), (6, 4, 2, False)],
)
def test_single_weight_regression_equals_closed_form_posterior(bs, epochs, n_iter, per_example):
    X, y = _data(50, 1)
    # two outputs (independent weights) with different targets
    Y = np.column_stack([y, -2.0 * y + 1.0])
    st = _fit(X, Y, bias=False, bs=bs, epochs=epochs, n_iter=n_iter, per_example=per_example)
    ((w_m, w_v, _, _),) = network.posterior_moments(st)
    tau0, rho0 = st.prior_w[0]
    for j in range(2):
        # closed form: rho = rho0 + sum x^2 / beta^2, tau = tau0 + sum x y / beta^2
        rho = rho0[j, 0] + np.sum(X[:, 0] ** 2) / NOISE
        tau = tau0[j, 0] + np.sum(X[:, 0] * Y[:, j]) / NOISE
        np.testing.assert_allclose(w_m[j, 0], tau / rho, rtol=1e-10)
        np.testing.assert_allclose(w_v[j, 0], 1.0 / rho, rtol=1e-10)


def test_revisiting_batches_does_not_count_data_twice():
    X, y = _data(40, 1)
    one = _fit(X, y[:, None], bias=False, bs=10, epochs=1, n_iter=1)
    many = _fit(X, y[:, None], bias=False, bs=10, epochs=8, n_iter=3)
    for a, b in zip(network.posterior_moments(one)[0], network.posterior_moments(many)[0]):
        np.testing.assert_allclose(a, b, rtol=1e-10)
    # and the data precision is there once: posterior minus prior precision = sum x^2 / beta^2
    np.testing.assert_allclose(
        many.post_w[0][1] - many.prior_w[0][1], np.sum(X**2) / NOISE, rtol=1e-10
    )


def _factorised_ep(A, y, prior_tau, prior_rho, n_sweeps=500):
    """Fixed point of EP with one Gaussian site per datum and weight.

    Site ``n`` sends weight ``i`` the exact message of ``N(y_n; a_n . w, beta^2)``
    with every other weight at its cavity: precision ``a_ni^2 / s_ni`` and
    precision-mean ``a_ni (y_n - m_ni) / s_ni``, ``m_ni, s_ni`` the cavity mean and
    variance of ``sum_{j != i} a_nj w_j`` plus the noise.  Damped parallel sweeps.
    """
    rho_s = np.zeros_like(A)
    tau_s = np.zeros_like(A)
    for _ in range(n_sweeps):
        rho_c = prior_rho + rho_s.sum(0) - rho_s
        tau_c = prior_tau + tau_s.sum(0) - tau_s
        m_c, v_c = tau_c / rho_c, 1.0 / rho_c
        m_other = (A * m_c).sum(1, keepdims=True) - A * m_c
        s_other = NOISE + (A**2 * v_c).sum(1, keepdims=True) - A**2 * v_c
        rho_s = 0.5 * rho_s + 0.5 * A**2 / s_other
        tau_s = 0.5 * tau_s + 0.5 * A * (y[:, None] - m_other) / s_other
    rho = prior_rho + rho_s.sum(0)
    return (prior_tau + tau_s.sum(0)) / rho, 1.0 / rho


def test_several_weights_exact_means_and_batch_independent_variances():
    X, y = _data(60, 3)
    ref = _fit(X, y[:, None], bias=True, bs=60, epochs=1, n_iter=60)
    ((w_m, w_v, b_m, b_v),) = network.posterior_moments(ref)
    tau0, rho0 = ref.prior_w[0]
    prior_mean = np.r_[tau0[0] / rho0[0], 0.0]
    prior_var = np.r_[1.0 / rho0[0], 0.5]
    A = np.column_stack([X, np.ones(60)])
    mean, var = _exact(A, y, prior_mean, prior_var)
    np.testing.assert_allclose(np.r_[w_m[0], b_m], mean, rtol=0, atol=1e-9)
    got_var = np.r_[w_v[0], b_v]
    # loopy BP variances: not the exact marginals, but of the same size ...
    assert np.all(np.abs(got_var / var - 1) < 0.2)
    # ... and exactly the factorised EP fixed point, solved independently
    ep_mean, ep_var = _factorised_ep(A, y, np.r_[tau0[0], 0.0], np.r_[rho0[0], 2.0])
    np.testing.assert_allclose(ep_mean, mean, rtol=0, atol=1e-9)
    np.testing.assert_allclose(got_var, ep_var, rtol=1e-9)
    for bs, epochs in [(8, 40), (25, 30)]:
        st = _fit(X, y[:, None], bias=True, bs=bs, epochs=epochs, n_iter=3)
        ((w2, v2, b2, bv2),) = network.posterior_moments(st)
        np.testing.assert_allclose(np.r_[w2[0], b2], mean, rtol=0, atol=1e-4)
        np.testing.assert_allclose(np.r_[v2[0], bv2], got_var, rtol=1e-4)


@pytest.mark.parametrize("bias", [True, False])
def test_visits_keep_the_posterior_equal_to_prior_times_slots(rng, bias):
    """Each visit updates ``q`` by ``new slot / old slot`` (O(P)); after many
    damped visits with no refresh, ``q`` equals the product of the prior and
    every slot, and the per-epoch refresh changes it only by rounding."""
    X = rng.normal(size=(60, 3))
    y = np.tanh(X[:, :1]) + 0.1 * rng.normal(size=(60, 1))
    st = network.init_state([3, 8, 1], rng=np.random.default_rng(0), xp=np, bias=bias)
    network.add_batches(st, 6)
    g = np.random.default_rng(2)
    out = network.regression_output(0.05)
    for visit in range(40):
        k = int(g.integers(6))
        network.train_batch(st, X[10 * k : 10 * k + 10], y[10 * k : 10 * k + 10], k,
                            output=out, n_iter=2, rng=g, rate=network.ema_rate(1 + visit // 6))
    incremental = [tuple(a.copy() for a in p) for p in st.post_w + st.post_b]
    network.recompute_posterior(st)
    for (t_inc, r_inc), (t, r), (t0, r0), slots in zip(
        incremental, st.post_w + st.post_b, st.prior_w + st.prior_b, st.slots_w + st.slots_b
    ):
        np.testing.assert_allclose(t, t0 + sum(s[0] for s in slots))
        np.testing.assert_allclose(r, r0 + sum(s[1] for s in slots))
        scale = np.abs(r).max()
        np.testing.assert_allclose(r_inc, r, rtol=0, atol=1e-12 * scale)
        np.testing.assert_allclose(t_inc, t, rtol=0, atol=1e-12 * max(np.abs(t).max(), scale))


@pytest.mark.parametrize("n_iter", [1, 2, 3])
def test_batch_message_is_the_product_of_the_example_messages(rng, n_iter):
    """The slot a visit commits is ``q / cavity`` (no sum over the b x P stored
    messages, which the kernel's last iteration does not store): on the array
    path, which stores every message, it equals their product (the sum of
    natural parameters) to rounding, after any number of iterations."""
    X = rng.normal(size=(12, 3))
    y = np.tanh(X[:, :1]) + 0.1 * rng.normal(size=(12, 1))
    st = network.init_state([3, 6, 5, 1], rng=np.random.default_rng(0), xp=np)
    network.add_batches(st, 2)
    out = network.regression_output(0.05)
    g = np.random.default_rng(2)
    for k in (0, 1, 0):  # a revisit: the cavity holds the other slot
        network.train_batch(st, X[6 * k : 6 * k + 6], y[6 * k : 6 * k + 6], k, output=out,
                            n_iter=2, rng=g, use_kernel=False)
    active = network._ActiveBatch(st, 1, 6, True)
    for it in range(n_iter):
        for i in g.permutation(6):
            active.step(X[6 + i : 7 + i], y[6 + i : 7 + i], np.array([i]), out)
        if it < n_iter - 1:
            active.recompute()
    messages = [active.release_layer_message(layer, kind)
                for kind in ("w", "b") for layer in range(st.n_layers)]
    for (t, r), (mt, mr) in zip(messages, active.msg_w + active.msg_b):
        scale = np.abs(r).max()
        assert scale > 0  # the messages are not all zero
        np.testing.assert_allclose(r, mr.sum(axis=0), rtol=0, atol=1e-12 * scale)
        np.testing.assert_allclose(t, mt.sum(axis=0), rtol=0,
                                   atol=1e-12 * max(np.abs(t).max(), scale))


def test_memory_formula_counts_messages():
    sizes = [5, 8, 1]
    p = (5 + 1) * 8 + (8 + 1) * 1
    want = 16 * (p * (10 + 32 + 5) + 2 * 5 * 8 + 32 * 8)
    assert network.memory_bytes(sizes, 10, 32) == want
    want = 16 * (p * (10 + 1 + 5) + 2 * 5 * 8 + 32 * 8)
    assert network.memory_bytes(sizes, 10, 32, "per_batch") == want


def test_ema_rate_schedule():
    assert network.ema_rate(1) == 1.0
    np.testing.assert_allclose(network.ema_rate(2), 0.9 + 0.1 * np.exp(-0.3))
    assert 0.9 < network.ema_rate(100) < 0.9 + 1e-12


def test_mlp_training_fits_and_keeps_precisions_positive(rng):
    X = rng.uniform(-2, 2, size=(120, 1))
    y = np.sin(2 * X[:, 0]) + 0.1 * rng.normal(size=120)
    st = network.init_state([1, 16, 16, 1], rng=np.random.default_rng(0), xp=np, alpha=0.1)
    network.add_batches(st, 2)
    batches = [(0, X[:60], y[:60, None]), (1, X[60:], y[60:, None])]
    g = np.random.default_rng(1)
    before = np.mean((network.predict_moments(st, X)[0][:, 0] - y) ** 2)
    for e in range(1, 16):
        network.run_epoch(
            st, batches, output=network.regression_output(0.01), n_iter=3, rng=g, epoch=e
        )
    mean, var = network.predict_moments(st, X)
    mse = np.mean((mean[:, 0] - y) ** 2)
    assert mse < 0.1 * before and mse < 0.05
    for layer in range(3):
        assert np.all(st.post_w[layer][1] > 0) and np.all(np.isfinite(st.post_w[layer][0]))
    assert np.all(var > 0)


def test_engine_runs_in_the_strict_namespace(strict_xp):
    # The array engine on the strict stand-in for CuPy gives NumPy's posterior
    # and predictions (NumPy arrays run the same engine with use_kernel=False).
    xp, asarray = strict_xp
    rng = np.random.default_rng(0)
    X_np, Y_np = rng.normal(size=(12, 2)), rng.normal(size=(12, 1))

    def train(xp, X, Y, **kw):
        st = network.init_state([2, 4, 1], rng=np.random.default_rng(0), xp=xp)
        network.add_batches(st, 2)
        batches = [(0, X[:6], Y[:6]), (1, X[6:], Y[6:])]
        for epoch in (1, 2):
            network.run_epoch(st, batches, output=network.regression_output(0.1), n_iter=2,
                              rng=np.random.default_rng(epoch), epoch=epoch, **kw)
        return st, network.predict_moments(st, X)

    st, (mean, var) = train(xp, asarray(X_np), asarray(Y_np))
    ref, (mean_ref, var_ref) = train(np, X_np, Y_np, use_kernel=False)
    assert type(mean).__name__ == "StrictArray"
    np.testing.assert_allclose(np.asarray(mean), mean_ref, rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(np.asarray(var), var_ref, rtol=1e-12)
    for got, want in zip(network.posterior_moments(st), network.posterior_moments(ref)):
        for a, b in zip(got, want):
            np.testing.assert_allclose(np.asarray(a), b, rtol=1e-12, atol=1e-14)
