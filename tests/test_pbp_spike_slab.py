"""Spike-and-slab PBP (skbayesnn.inference.pbp_spike_slab) against pbp.md §6."""

import math

import numpy as np
import pytest
from scipy import integrate, stats
from scipy.special import logsumexp

from skbayesnn._backend import asnumpy
from skbayesnn._testing import StrictArray
from skbayesnn.core.spike_slab import spike_slab_relu
from skbayesnn.inference import pbp
from skbayesnn.inference import pbp_spike_slab as sspbp


def _random_net(rng, sizes, *, bias, mean_scale=1.5, mean_shift=0.0, var_range=(0.02, 1.0)):
    """Layers with varied means and variances; ``bias`` adds PBP's bias column.

    A negative ``mean_shift`` switches most ReLUs off, so that without biases
    the spike carries real mass from the second layer on."""
    means, variances = [], []
    extra = 1 if bias else 0
    for n_in, n_out in zip(sizes[:-1], sizes[1:]):
        means.append(mean_scale * rng.normal(size=(n_out, n_in + extra)) + mean_shift)
        variances.append(rng.uniform(*var_range, size=(n_out, n_in + extra)))
    return means, variances


def _central_differences(means, variances, x, y, a, b, bias, h=1e-5):
    def log_z():
        return float(sspbp.log_z_grads(means, variances, x, y, a, b, bias=bias)[0])

    out = []
    for params in (means, variances):
        grads = []
        for p in params:
            g = np.empty_like(p)
            for idx in np.ndindex(p.shape):
                orig = p[idx]
                p[idx] = orig + h
                up = log_z()
                p[idx] = orig - h
                down = log_z()
                p[idx] = orig
                g[idx] = (up - down) / (2 * h)
            grads.append(g)
        out.append(grads)
    return out


# ---------------------------------------------------------------------------
# (a) with bias units SSPBP is PBP (pbp.md §6.6)
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("sizes", [[3, 6, 4, 1], [4, 6, 5, 1], [2, 8, 1]])
def test_with_bias_units_sspbp_equals_pbp(rng, sizes):
    means, variances = _random_net(rng, sizes, bias=True)
    X = rng.normal(size=(9, sizes[0]))
    rho, slab_m, slab_v, layer_rho = sspbp.forward(means, variances, X)
    m_ref, v_ref = pbp.forward(means, variances, X)
    # The bias input has rho = 1, so every linear output is a slab with
    # probability exactly 1 and its slab is PBP's Gaussian.
    assert np.all(rho == 1.0) and all(np.all(r == 1.0) for r in layer_rho)
    assert [r.shape for r in layer_rho] == [(9,)] * (len(sizes) - 1)
    np.testing.assert_allclose(slab_m, m_ref, rtol=1e-13, atol=1e-15)
    np.testing.assert_allclose(slab_v, v_ref, rtol=1e-13)
    for i, (y, a, b) in enumerate([(0.4, 6.0, 6.0), (-1.3, 9.0, 2.0), (2.5, 3.0, 0.5)]):
        got = sspbp.log_z_grads(means, variances, X[i], y, a, b)
        want = pbp.log_z_grads(means, variances, X[i], y, a, b)
        for k in (0, 3, 4):  # log Z, log Z1, log Z2
            np.testing.assert_allclose(got[k], want[k], rtol=1e-14)
        for gs, ws in ((got[1], want[1]), (got[2], want[2])):
            for g, w in zip(gs, ws):
                assert g.shape == w.shape
                np.testing.assert_allclose(g, w, rtol=1e-12, atol=1e-14 * np.abs(w).max())


# ---------------------------------------------------------------------------
# (b) bias-free: closed-form gradients against finite differences
# ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    "sizes, seed, mean_shift, regime",
    [
        ([3, 5, 4, 1], 3, -0.7, "every"),
        ([4, 6, 5, 1], 20, -0.7, "every"),
        ([3, 5, 4, 1], 2, -1.0, "sparse"),
        ([4, 6, 5, 1], 58, -1.0, "sparse"),
    ],
)
def test_bias_free_gradients_match_central_finite_differences(
    sizes, seed, mean_shift, regime, monkeypatch
):
    # pbp.md Appendix B style, every weight mean and variance.  Step h = 1e-5:
    # truncation ~h^2 |f'''| ~ 1e-10, rounding ~eps |log Z| / h ~ 1e-11, so
    # rtol 1e-6 with atol 1e-9 for gradients that are (nearly) 0.
    rng = np.random.default_rng(seed)
    means, variances = _random_net(rng, sizes, bias=False, mean_shift=mean_shift)
    x, y, a, b = 2.0 * rng.normal(size=sizes[0]), 0.3, 7.0, 2.0
    _, _, _, layer_rho, cache = sspbp.forward(means, variances, x, bias=False, return_cache=True)
    alphas = np.concatenate([c.relu.alpha for c in cache[:-1]])
    assert float(layer_rho[0]) == 1.0  # the first layer is Gaussian
    if regime == "every":
        # The hidden ReLUs sit in every regime (mostly off, mixed, mostly on) and
        # the output's spike carries real mass, so the rho path through
        # 1 - prod(1 - rho) into the last hidden ReLU matters.
        assert alphas.min() < -1.5 and alphas.max() > 1.5 and np.any(np.abs(alphas) < 1.0)
        assert float(layer_rho[-1]) < 0.5
    else:
        # Mostly-off first layer: the second hidden layer's input is mostly spike
        # too, so the rho terms of its ReLU backward (rho' = rho Phi, 1 - rho Phi,
        # the slab E/rho) matter, and the output's slab probability is small.
        # (A sparse input cannot give a slab with m/s >> 1: its slab is a
        # mixture of few active terms, with a coefficient of variation ~1.)
        assert float(layer_rho[1]) < 0.5 and float(layer_rho[2]) < 0.5
        assert alphas.min() < -1.5 and np.any(np.abs(alphas) < 0.5)
    log_z, g_m, g_v, _, _ = sspbp.log_z_grads(means, variances, x, y, a, b, bias=False)
    fd_m, fd_v = _central_differences(means, variances, x, y, a, b, bias=False)
    n_checked = 0
    for grads, fds in ((g_m, fd_m), (g_v, fd_v)):
        for g, fd, p in zip(grads, fds, means):
            assert g.shape == p.shape
            bad = ~(np.abs(g - fd) <= 1e-6 * np.abs(fd) + 1e-9)
            assert not np.any(bad), (np.argwhere(bad)[:3], g[bad][:3], fd[bad][:3])
            n_checked += g.size
    assert n_checked == 2 * sum(n_in * n_out for n_in, n_out in zip(sizes[:-1], sizes[1:]))
    # Dropping the rho path (as if rho_lin did not depend on the inputs) gives
    # gradients that are visibly wrong here: the check above exercises it.
    monkeypatch.setattr(sspbp, "slab_probability_grad", lambda rho: 0.0 * rho)
    _, w_m, w_v, _, _ = sspbp.log_z_grads(means, variances, x, y, a, b, bias=False)
    worst = max(np.max(np.abs(w - fd)) for w, fd in zip(w_m + w_v, fd_m + fd_v))
    assert worst > 1e-3


# ---------------------------------------------------------------------------
# (c) bias-free: same totals per linear layer, different split (pbp.md §6.7)
# ---------------------------------------------------------------------------


def test_bias_free_forward_differs_from_pbp_only_through_the_split():
    rng = np.random.default_rng(4)
    sizes = [4, 6, 5, 1]
    means, variances = _random_net(rng, sizes, bias=False, mean_shift=-0.7)
    X = rng.normal(size=(6, 4))
    rho, slab_m, slab_v, layer_rho, cache = sspbp.forward(
        means, variances, X, bias=False, return_cache=True
    )
    g_m, g_v, pbp_cache = pbp.forward(means, variances, X, bias=False, return_cache=True)
    pre_m = [c.pre_mean for c in pbp_cache]
    pre_v = [c.pre_var for c in pbp_cache]
    # Layer 1: a Gaussian (deterministic input), PBP's moments.
    assert np.all(layer_rho[0] == 1.0)
    np.testing.assert_allclose(cache[0].pre_mean, pre_m[0], rtol=1e-14)
    np.testing.assert_allclose(cache[0].pre_var, pre_v[0], rtol=1e-14)
    # Layer 2: the ReLU of a Gaussian has the same total moments in both, so the
    # linear output has PBP's mean and variance -- but SSPBP splits it into a
    # spike of mass 1 - rho_lin and a slab, where PBP has one Gaussian.
    np.testing.assert_allclose(cache[1].pre_mean, pre_m[1], rtol=1e-12)
    np.testing.assert_allclose(cache[1].pre_var, pre_v[1], rtol=1e-12)
    split = layer_rho[1] < 0.9  # rows where the spike has real mass
    assert split.sum() >= 3 and layer_rho[1].min() < 0.5
    np.testing.assert_allclose(cache[1].slab_mean, pre_m[1] / layer_rho[1][:, None], rtol=1e-14)
    # Layer 3: the ReLU of that spike-and-slab differs from the ReLU of PBP's
    # Gaussian with the same moments (by 5-15 % in these rows), and so does
    # everything after it, the network output included.
    rel = np.abs(cache[2].pre_mean - pre_m[2]) / np.abs(pre_m[2])
    assert np.all(rel[split] > 0.02)
    total_m = rho * slab_m
    assert np.all(np.abs(total_m - g_m)[split] > 0.02 * np.abs(g_m)[split])
    # Every layer is eq. 3.4 (pbp.md §6.3) of the previous layer's ReLU messages,
    # with s = 1/n_in: the totals are PBP's linear moments of the input totals.
    for l in (1, 2):
        below = cache[l - 1]
        r, m, v = spike_slab_relu(below.rho[:, None], below.slab_mean, below.slab_var)
        M, V = means[l], variances[l]
        s = 1.0 / M.shape[1]
        e_lin = math.sqrt(s) * (r * m) @ M.T
        c = (r * m * m) @ V.T + (r * v) @ (M * M).T + (r * v) @ V.T
        c = c + (r * (1 - r) * m * m) @ (M * M).T
        np.testing.assert_allclose(layer_rho[l], 1 - np.prod(1 - r, axis=-1), rtol=1e-13)
        np.testing.assert_allclose(cache[l].pre_mean, e_lin, rtol=1e-12)
        np.testing.assert_allclose(cache[l].pre_var, s * c, rtol=1e-12)
    # The scaling is s = 1/n_in without a bias column: one linear layer.
    x = X[0]
    m1, v1 = pbp.forward(means[:1], variances[:1], x, bias=False)
    np.testing.assert_allclose(m1, 0.5 * means[0] @ x, rtol=1e-14)
    np.testing.assert_allclose(v1, 0.25 * variances[0] @ (x * x), rtol=1e-14)


def test_layer_shapes_are_checked():
    means = [np.zeros((3, 5)), np.zeros((1, 4))]
    with pytest.raises(ValueError, match="bias column"):
        sspbp.forward(means, means, np.zeros(5), bias=True)
    with pytest.raises(ValueError, match="bias-free"):
        sspbp.forward(means, means, np.zeros(4), bias=False)
    with pytest.raises(ValueError, match="single output"):
        sspbp.log_z_grads([np.zeros((2, 3))], [np.zeros((2, 3))], np.zeros(2), 0.0, 6.0, 6.0)


# ---------------------------------------------------------------------------
# (d) the mixture normalisers (pbp.md §6.5)
# ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    "rho, m, v, y, a, b",
    [
        (0.7, 0.4, 0.3, 1.1, 6.0, 6.0),
        (0.2, -1.5, 2.0, -0.3, 12.0, 3.0),
        (0.97, 0.05, 0.01, 0.0, 4.0, 0.2),
        (1e-3, 3.0, 0.5, 2.8, 6.0, 1.0),
    ],
)
def test_mixture_log_z_is_the_mixture_density_and_its_integral(rho, m, v, y, a, b):
    lz = sspbp.noise_log_z(np.array([rho]), np.array([m]), np.array([v]), y, a, b)
    for k in range(3):
        noise = b / (a + k - 1)
        n0 = stats.norm.pdf(y, 0.0, math.sqrt(noise))
        direct = math.log((1 - rho) * n0 + rho * stats.norm.pdf(y, m, math.sqrt(noise + v)))
        np.testing.assert_allclose(lz[k], direct, rtol=1e-13)
        # Z = E_q[N(y | z, noise)] over the spike-and-slab z (pbp.md §6.5): the
        # spike exactly, the slab by quadrature.
        sd = math.sqrt(v)
        slab, _ = integrate.quad(
            lambda t: stats.norm.pdf(y, t, math.sqrt(noise)) * stats.norm.pdf(t, m, sd),
            m - 15 * sd,
            m + 15 * sd,
            epsabs=0,
            epsrel=1e-12,
            limit=200,
        )
        np.testing.assert_allclose(lz[k], math.log((1 - rho) * n0 + rho * slab), rtol=1e-10)


def test_mixture_log_z_limits_and_far_tails():
    m, v, y, a, b = np.array([0.3, -2.0]), np.array([0.5, 0.1]), np.array([1.2, 0.7]), 5.0, 3.0
    # rho = 1 is PBP's Gaussian normaliser; rho = 0 the spike alone.
    got = sspbp.noise_log_z(np.ones(2), m, v, y, a, b)
    want = pbp.noise_log_z(m, v, y, a, b)
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, rtol=1e-15)
    got = sspbp.noise_log_z(np.zeros(2), m, v, y, a, b)
    for k in range(3):
        np.testing.assert_allclose(got[k], stats.norm.logpdf(y, 0, math.sqrt(b / (a + k - 1))))
    # Far tails, where both densities underflow (log N ~ -1e5): logaddexp keeps
    # the value; reference scipy's logsumexp of the weighted log densities.
    rho, m, v, y = 0.6, np.array([-30.0]), np.array([1e-3]), np.array([60.0])
    lz = sspbp.noise_log_z(np.array([rho]), m, v, y, 200.0, 2.0)
    for k in range(3):
        noise = 2.0 / (200.0 + k - 1)
        logs = [
            stats.norm.logpdf(y[0], 0, math.sqrt(noise)),
            stats.norm.logpdf(y[0], m[0], math.sqrt(noise + v[0])),
        ]
        assert logs[0] < -1e5 and np.exp(logs).max() == 0.0
        np.testing.assert_allclose(lz[k], logsumexp(logs, b=[1 - rho, rho]), rtol=1e-14)


# ---------------------------------------------------------------------------
# (e) the strict namespace
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("bias", [True, False])
def test_engine_runs_in_the_strict_namespace(strict_xp, bias):
    xp, asarray = strict_xp
    rng = np.random.default_rng(7)
    means, variances = _random_net(rng, [3, 6, 4, 1], bias=bias, mean_shift=-0.5)
    s_means, s_vars = [asarray(m) for m in means], [asarray(v) for v in variances]
    X = rng.normal(size=(5, 3))

    def same(strict_out, numpy_out):
        for a, b in zip(strict_out, numpy_out):
            if isinstance(b, list):
                same(a, b)
                continue
            assert isinstance(a, StrictArray), type(a)
            np.testing.assert_allclose(asnumpy(a), b, rtol=1e-13, atol=1e-300)

    same(
        sspbp.forward(s_means, s_vars, asarray(X), bias=bias),
        sspbp.forward(means, variances, X, bias=bias),
    )
    same(
        pbp.forward(s_means, s_vars, asarray(X), bias=bias),
        pbp.forward(means, variances, X, bias=bias),
    )
    rho, m, v, _ = sspbp.forward(means, variances, X, bias=bias)
    same(
        sspbp.noise_log_z(asarray(rho), asarray(m), asarray(v), asarray(X[:, :1]), 6.0, 6.0),
        sspbp.noise_log_z(rho, m, v, X[:, :1], 6.0, 6.0),
    )
    for i in range(2):
        same(
            sspbp.log_z_grads(s_means, s_vars, asarray(X[i]), asarray(0.5), 6.0, 3.0, bias=bias),
            sspbp.log_z_grads(means, variances, X[i], 0.5, 6.0, 3.0, bias=bias),
        )


# ---------------------------------------------------------------------------
# (f) extreme inputs
# ---------------------------------------------------------------------------


def test_dead_hidden_layer_leaves_the_spike_alone():
    # Bias-free 2-3-2-1: every first-layer pre-activation at m/s ~ -5000, so
    # every ReLU is off (rho' = rho Phi underflows to exactly 0), the second
    # layer's output is exactly 0 (rho_lin = 0), and so is the network's.
    # log Z is the spike's N(y | 0, b/(a - 1)); no parameter can change it.
    first = np.array([[-60.0, 1.0], [-80.0, 2.0], [-100.0, 0.0]])
    means = [first, np.ones((2, 3)), np.ones((1, 2))]
    variances = [np.full((3, 2), 1e-4), np.full((2, 3), 0.5), np.full((1, 2), 0.5)]
    x, y, a, b = np.array([1.0, 0.0]), 0.7, 6.0, 3.0
    rho, slab_m, slab_v, layer_rho = sspbp.forward(means, variances, x, bias=False)
    assert [float(r) for r in layer_rho] == [1.0, 0.0, 0.0]
    assert float(rho[0]) == 0.0 and float(slab_m[0]) == 0.0 and float(slab_v[0]) == 0.0
    log_z, g_m, g_v, log_z1, log_z2 = sspbp.log_z_grads(means, variances, x, y, a, b, bias=False)
    np.testing.assert_allclose(log_z, stats.norm.logpdf(y, 0, math.sqrt(b / (a - 1))), rtol=1e-15)
    np.testing.assert_allclose(log_z2, stats.norm.logpdf(y, 0, math.sqrt(b / (a + 1))), rtol=1e-15)
    for g in g_m + g_v:
        np.testing.assert_array_equal(g, 0.0)


@pytest.mark.parametrize("bias", [True, False])
def test_extreme_regimes_give_finite_values(bias):
    # Hidden units from m/s = -1e4 through -20 (rho' ~ 1e-89: a tiny but
    # non-zero slab) to +60 (rho' = 1 exactly) and a target far from the
    # output; with bias=False the output's slab probability is 1 - 1e-89-ish or
    # exactly 1 (where the spike density dominates Z).  Every value is finite
    # (RuntimeWarnings are errors in this test suite).
    extra = 1 if bias else 0
    first_m = np.array([[-1e4, 0.0], [-20.0, 0.0], [-25.0, 0.0], [60.0, 0.0]])
    first_v = np.array([[1.0, 1.0], [1.0, 1.0], [1.0, 1.0], [1.0, 1.0]])
    x = np.array([math.sqrt(2.0 + extra), 0.0])  # sqrt(s) x = (1, 0)
    if bias:
        first_m = np.concatenate([first_m, np.zeros((4, 1))], axis=1)
        first_v = np.concatenate([first_v, np.zeros((4, 1))], axis=1)
    for last_unit_on in (False, True):
        fm = first_m.copy()
        if not last_unit_on:
            fm[3, 0] = -60.0
        out_m = np.full((1, 4 + extra), 3.0)
        out_v = np.full((1, 4 + extra), 1e-3)
        means, variances = [fm, out_m], [first_v, out_v]
        rho, slab_m, slab_v, layer_rho = sspbp.forward(means, variances, x, bias=bias)
        if not bias:
            if last_unit_on:
                assert float(layer_rho[1]) == 1.0
            else:
                assert 0.0 < float(layer_rho[1]) < 1e-80
        for y in (0.0, 1e3):
            lz, g_m, g_v, lz1, lz2 = sspbp.log_z_grads(
                means, variances, x, y, 50.0, 0.01, bias=bias
            )
            for t in [lz, lz1, lz2] + g_m + g_v:
                assert np.all(np.isfinite(t))
            direct = sspbp.noise_log_z(rho, slab_m, slab_v, y, 50.0, 0.01)[0]
            np.testing.assert_allclose(lz, direct[0], rtol=1e-15)
