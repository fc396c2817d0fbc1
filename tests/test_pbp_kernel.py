"""The compiled PBP kernel (skbayesnn.inference.pbp_kernel) against the array engine."""

import math

import numpy as np
import pytest
from scipy import special

from skbayesnn.inference import pbp, pbp_kernel


def _random_net(rng, sizes, bias=True, mean_scale=1.5, var_range=(0.02, 1.0)):
    """Layers with varied means and variances, so that the hidden ReLUs sit in
    every regime (mostly off, mixed, mostly on)."""
    means, variances = [], []
    for n_in, n_out in zip(sizes[:-1], sizes[1:]):
        shape = (n_out, n_in + int(bias))
        means.append(mean_scale * rng.normal(size=shape))
        variances.append(rng.uniform(*var_range, size=shape))
    return means, variances


def _kernel_epoch(means, variances, X, y, order, a, b, *, bias=True, spike_slab=False,
                  min_var=pbp.MIN_VAR):  # fmt: skip
    Ms = tuple(m.copy() for m in means)
    Vs = tuple(v.copy() for v in variances)
    out = pbp_kernel.run_epoch_kernel(
        Ms, Vs, X, y, np.asarray(order, dtype=np.int64), a, b, bias, spike_slab, min_var
    )
    return list(Ms), list(Vs), out


def _engine_epoch(means, variances, X, y, order, a, b, *, bias=True, spike_slab=False,
                  min_var=pbp.MIN_VAR):  # fmt: skip
    n_rej, n_noise, total = 0, 0, 0.0
    for i in order:
        res = pbp.adf_update(
            means, variances, a, b, X[i], y[i], bias=bias, spike_slab=spike_slab, min_var=min_var
        )
        means, variances, a, b = res.means, res.variances, res.alpha_noise, res.beta_noise
        n_rej += int(res.n_rejected)
        n_noise += int(res.noise_rejected)
        total += float(res.log_z)
    return means, variances, (float(a), float(b), n_rej, n_noise, total)


@pytest.mark.parametrize("bias", [True, False])
@pytest.mark.parametrize("sizes", [[3, 1], [3, 7, 1], [2, 6, 5, 1]])
def test_kernel_epoch_equals_point_by_point_engine(rng, sizes, bias):
    means, variances = _random_net(rng, sizes, bias=bias)
    X = 2.0 * rng.normal(size=(40, sizes[0]))
    y = rng.normal(size=40)
    order = rng.permutation(40)
    got_m, got_v, got = _kernel_epoch(means, variances, X, y, order, 5.0, 3.0, bias=bias)
    ref_m, ref_v, ref = _engine_epoch(means, variances, X, y, order, 5.0, 3.0, bias=bias)
    # Same arithmetic in another order of operations: rounding only, amplified
    # a little over 40 sequential updates.
    for a, b in zip(got_m + got_v, ref_m + ref_v):
        np.testing.assert_allclose(a, b, rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(got[:2], ref[:2], rtol=1e-9)
    assert got[2:4] == ref[2:4]
    np.testing.assert_allclose(got[4], ref[4], rtol=1e-10)


def test_kernel_rejects_the_same_weights_as_the_engine(rng):
    # A threshold far above rounding level makes many updates fail; both must
    # reject exactly the same ones (pbp.md §4.4: per weight, old value kept).
    means, variances = _random_net(rng, [2, 6, 1])
    X = rng.normal(size=(30, 2))
    y = 3.0 * rng.normal(size=30)
    order = np.arange(30)
    min_var = 0.3
    got_m, got_v, got = _kernel_epoch(means, variances, X, y, order, 3.0, 0.2, min_var=min_var)
    ref_m, ref_v, ref = _engine_epoch(means, variances, X, y, order, 3.0, 0.2, min_var=min_var)
    assert got[2] == ref[2] > 0
    for a, b in zip(got_m + got_v, ref_m + ref_v):
        np.testing.assert_allclose(a, b, rtol=1e-9, atol=1e-12)
    for v, v0 in zip(got_v, variances):
        assert np.all((v > min_var) | (v == v0))


def test_spike_and_slab_with_bias_units_is_pbp(rng):
    # pbp.md §6.6: with a bias input every linear layer's spike probability is
    # exactly 0, so spike-and-slab messages reproduce PBP's updates.
    means, variances = _random_net(rng, [3, 8, 6, 1])
    X = rng.normal(size=(50, 3))
    y = rng.normal(size=50)
    order = rng.permutation(50)
    pbp_m, pbp_v, pbp_out = _kernel_epoch(means, variances, X, y, order, 6.0, 6.0)
    ss_m, ss_v, ss_out = _kernel_epoch(means, variances, X, y, order, 6.0, 6.0, spike_slab=True)
    for a, b in zip(ss_m + ss_v, pbp_m + pbp_v):
        np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(ss_out[:2], pbp_out[:2], rtol=1e-12)


@pytest.mark.parametrize("mean_shift, sparse", [(0.0, False), (-0.7, False), (-1.0, True)])
def test_kernel_spike_and_slab_without_bias_equals_the_array_engine(rng, mean_shift, sparse):
    # Two independent implementations of SSPBP's bias-free updates (the kernel's
    # fused scalar backward pass and pbp_spike_slab's array one) agree over an
    # epoch, also where the spikes carry most of the mass (mean_shift -1:
    # most ReLUs off, slab probabilities well below 1).
    from skbayesnn.inference import pbp_spike_slab

    means, variances = _random_net(rng, [3, 6, 5, 1], bias=False)
    means = [m + mean_shift for m in means]
    # Positive inputs, so that a negative shift of the means switches most
    # first-layer ReLUs off whatever the draw.
    X = 2.0 * np.abs(rng.normal(size=(25, 3)))
    y = rng.normal(size=25)
    layer_rho = pbp_spike_slab.forward(means, variances, X, bias=False)[3]
    assert (np.median(layer_rho[1]) < 0.5) == sparse
    order = rng.permutation(25)
    kw = dict(bias=False, spike_slab=True)
    got_m, got_v, got = _kernel_epoch(means, variances, X, y, order, 7.0, 2.0, **kw)
    ref_m, ref_v, ref = _engine_epoch(means, variances, X, y, order, 7.0, 2.0, **kw)
    for a, b in zip(got_m + got_v, ref_m + ref_v):
        np.testing.assert_allclose(a, b, rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(got[:2], ref[:2], rtol=1e-9)
    assert got[2:4] == ref[2:4]
    np.testing.assert_allclose(got[4], ref[4], rtol=1e-10)
    # ... and differ from Gaussian (PBP) messages in the same bias-free net.
    pbp_m, _, _ = _kernel_epoch(means, variances, X, y, order, 7.0, 2.0, bias=False)
    assert max(np.max(np.abs(a - b)) for a, b in zip(pbp_m, got_m)) > 1e-3


@pytest.mark.parametrize(
    "mean, var",
    [(0.3, 1.0), (-2.0, 0.5), (1.5, 0.2), (-0.2, 3.0), (-29.0, 1.0), (-31.0, 1.0),
     (-45.0, 1.0), (-1e3, 1.0), (40.0, 1.0), (2.0, 0.0), (-2.0, 0.0), (0.0, 1e-300)],
)  # fmt: skip
def test_relu_parts_equal_the_array_core(mean, var):
    from skbayesnn.core.activations import relu_moments

    mr, vr, cdf, ccdf, pos, a, std = pbp_kernel._relu_parts(mean, var)
    m_ref, v_ref, cdf_ref = relu_moments(np.array(mean), np.array(var))
    ccdf_ref, pos_ref = pbp._relu_backward_terms(np, np.array(mean), np.array(var))
    # Phi(a) in the far tail is conditioned by a^2: rounding a/sqrt(2) alone
    # moves erfc by ~a^2 ulp (scipy's ndtr and libm's erfc alike), and the
    # core's E[ReLU] and Var[ReLU] lose a further ~a^2 and ~a^4 ulp to the
    # cancellation in a + gamma and 1 - gamma (a + gamma), which the kernel
    # avoids (see test_inverse_mills_ratio_on_both_branches).
    eps = np.finfo(float).eps
    a2 = min(a * a, 2500.0)
    np.testing.assert_allclose([cdf, ccdf], [cdf_ref, ccdf_ref], rtol=4e-15 + 4 * a2 * eps,
                               atol=1e-300)  # fmt: skip
    np.testing.assert_allclose(mr, m_ref, rtol=4e-15 + 8 * a2 * eps, atol=1e-300)
    np.testing.assert_allclose(vr, v_ref, rtol=4e-15 + 8 * a2 * a2 * eps, atol=1e-300)
    np.testing.assert_allclose(pos, pos_ref, rtol=4e-15 + 4 * a2 * eps, atol=1e-300)


@pytest.mark.parametrize(
    "a", [2.0, 0.0, -1.0, -2.999, -3.0, -3.5, -5.0, -9.0, -29.9, -30.0, -38.0, -49.0, -50.0]
)
def test_inverse_mills_ratio_on_both_branches(a):
    # phi(a)/Phi(a) = sqrt(2/pi) / erfcx(-a/sqrt(2)) (free of underflow); the
    # direct ratio above -3 and the continued fraction below must both match it
    # to a few ulp (pbp.md §2.2 quotes 30.0332597 at a = -30).
    exact = math.sqrt(2.0 / math.pi) / special.erfcx(-a / math.sqrt(2.0))
    pdf = math.exp(-0.5 * a * a) / math.sqrt(2 * math.pi)
    gamma, a_plus_gamma, trunc = pbp_kernel._inverse_mills_ratio(a, pdf, special.ndtr(a))
    np.testing.assert_allclose(gamma, exact, rtol=2e-15)
    # The reference offsets a + gamma and 1 - gamma (a + gamma) are differences
    # that lose digits (factors k1, k2); the kernel's are either the same
    # differences (a >= -3) or cancellation-free.
    k1 = 1.0 + exact / (a + exact)
    ref_trunc = 1.0 - exact * (a + exact)
    k2 = k1 * (1.0 + exact * (a + exact) / ref_trunc)
    np.testing.assert_allclose(a_plus_gamma, a + exact, rtol=3e-15 * k1)
    np.testing.assert_allclose(trunc, ref_trunc, rtol=3e-15 * k2)
    if a == -30.0:
        assert gamma == pytest.approx(30.0332597, abs=1e-7)


def test_refine_prior_kernel_leaves_skipped_factors_untouched():
    # A factor whose cavity variance would be negative (its factor precision
    # exceeds the posterior precision) is skipped, nothing about it changes,
    # and q(lambda) moves only through the factors that are updated.
    M = (np.array([[0.4, -0.3]]),)
    V = (np.array([[0.5, 0.5]]),)
    mh = (np.zeros((1, 2)),)
    vh = (np.array([[3.0, 0.5]]),)  # 1/0.5 - 3 < 0: skipped; 1/0.5 - 0.5 > 0: updated
    ah = (np.zeros((1, 2)),)
    bh = (np.zeros((1, 2)),)
    a_lam, b_lam, n_skipped = pbp_kernel.refine_prior_kernel(M, V, mh, vh, ah, bh, 6.0, 6.0)
    assert n_skipped == 1
    assert M[0][0, 0] == 0.4 and V[0][0, 0] == 0.5 and vh[0][0, 0] == 3.0
    assert V[0][0, 1] != 0.5 and (a_lam, b_lam) != (6.0, 6.0)


@pytest.mark.parametrize("spike_slab", [False, True])
def test_kernel_guards_the_noise_of_outliers_as_the_engine(rng, spike_slab):
    # Outliers 50-2000 sds out: the Gaussian stand-in's noise update overshoots
    # and is replaced by the exact zero-variance one (pbp.guard_noise_update)
    # on both paths, at the same points.
    means, variances = _random_net(rng, [2, 6, 1], mean_scale=0.5, var_range=(0.001, 0.01))
    X = rng.normal(size=(40, 2))
    y = 0.1 * rng.normal(size=40)
    y[[5, 17, 30]] += [50.0, -300.0, 2000.0]
    order = rng.permutation(40)
    kw = dict(spike_slab=spike_slab)
    got_m, got_v, got = _kernel_epoch(means, variances, X, y, order, 30.0, 0.3, **kw)
    ref_m, ref_v, ref = _engine_epoch(means, variances, X, y, order, 30.0, 0.3, **kw)
    assert got[3] == ref[3] >= 2
    np.testing.assert_allclose(got[:2], ref[:2], rtol=1e-9)
    for a, b in zip(got_m + got_v, ref_m + ref_v):
        np.testing.assert_allclose(a, b, rtol=1e-9, atol=1e-12)
    assert got[1] / (got[0] - 1.0) < 1e6  # (the stand-in alone: 1e100 and beyond)


def test_kernel_keeps_tiny_slab_probabilities_as_the_engine():
    # A bias-free hidden unit far below 0 (rho = Phi(-9.3) ~ 7e-21): the
    # kernel computed the next layer's slab probability as 1 - prod(1 - rho),
    # which rounds to 0, and took the point for a pure spike (log Z -4497.5),
    # where the array engine (-expm1(sum log1p(-rho))) keeps the slab (log Z
    # -3410.9, predict_dist as well).
    from skbayesnn.inference import pbp_spike_slab

    means = [np.array([[-0.93]]), np.array([[1.0]])]
    variances = [np.array([[0.01]]), np.array([[1.0]])]
    x, y = np.array([1.0]), 3.0
    ref = float(pbp_spike_slab.log_z_grads(means, variances, x, y, 11.0, 0.01, bias=False)[0])
    # the mixture normaliser of pbp.md §6.5 at the output's (rho, m, v), slab kept
    from scipy import stats
    from scipy.special import logsumexp

    rho, m, v, _ = pbp_spike_slab.forward(means, variances, x[None], bias=False)
    rho, m, v = float(rho[0, 0]), float(m[0, 0]), float(v[0, 0])
    noise = 0.01 / (11.0 - 1.0)
    want = logsumexp([np.log1p(-rho) + stats.norm.logpdf(y, 0.0, np.sqrt(noise)),
                      np.log(rho) + stats.norm.logpdf(y, m, np.sqrt(v + noise))])
    assert 0.0 < rho < 1e-15 and ref == pytest.approx(want, rel=1e-12)
    kw = dict(bias=False, spike_slab=True)
    got_m, got_v, got = _kernel_epoch(means, variances, x[None], np.array([y]), [0], 11.0, 0.01,
                                      **kw)
    ref_m, ref_v, ref_out = _engine_epoch(means, variances, x[None], np.array([y]), [0], 11.0,
                                          0.01, **kw)
    np.testing.assert_allclose(got[4], ref, rtol=1e-12)
    for a, b in zip(got_m + got_v, ref_m + ref_v):
        np.testing.assert_allclose(a, b, rtol=1e-9, atol=1e-12)
    assert got[2:4] == ref_out[2:4]


def test_kernel_spike_that_fits_far_better_than_the_slab_updates_as_the_engine():
    # Every slab probability 1 (rho_out = 1): spike-and-slab is PBP exactly.
    # The spike's N(y | 0, noise) / Z then overflowed (the spike fits ~1e3
    # nats better than the slab); times its zero weight it gave NaN, and the
    # kernel rejected the first layer's update (kept 5.0, the engines 1.98).
    means = [np.array([[5.0]]), np.array([[1.0]])]
    variances = [np.array([[0.01]]), np.array([[1e-4]])]
    X, y = np.array([[1.0]]), np.array([0.0])
    results = []
    for spike_slab in (True, False):
        kw = dict(bias=False, spike_slab=spike_slab)
        results.append(_kernel_epoch(means, variances, X, y, [0], 11.0, 0.01, **kw))
        results.append(_engine_epoch(means, variances, X, y, [0], 11.0, 0.01, **kw))
    first = results[1][0][0][0, 0]
    assert first < 4.0  # the update is taken, towards y = 0 (a rejected one kept 5.0)
    for got_m, got_v, got in results:
        assert got[2] == 0
        for a, b in zip(got_m + got_v, results[1][0] + results[1][1]):
            np.testing.assert_allclose(a, b, rtol=1e-12)


def test_noise_guard_weights_the_residuals_by_responsibility():
    # An output whose slab has weight 1e-30 and lies far from y has the pure
    # spike's log Z, and must leave the noise update's guard as the spike
    # alone does.  The guard's residual was the largest over components of
    # positive weight (the slab's, ~17 against y^2 = 0.09), which moved the
    # guarded noise variance from 0.0052 to 0.085 (the reviewer's case).
    # Now both paths weight the components' residuals by responsibility.
    from scipy.stats import norm

    from skbayesnn.inference import pbp_spike_slab

    a, b, y = 11.0, 0.01, 0.3
    X, Y = np.array([[1.0]]), np.array([y])

    def net(hidden_mean):  # a bias-free ReLU unit on with probability Phi(hidden_mean)
        means = [np.array([[hidden_mean]]), np.array([[50.0]])]
        return means, [np.ones((1, 1)), np.full((1, 1), 1e-300)]

    means, variances = net(norm.ppf(1e-30))
    rho_out, slab_mean = pbp_spike_slab.forward(means, variances, X, bias=False)[:2]
    assert float(rho_out[0, 0]) == pytest.approx(1e-30, rel=1e-6)
    assert (y - float(slab_mean[0, 0])) ** 2 > 10.0  # a slab far out
    r2 = float(pbp_spike_slab.log_z_grads(means, variances, X[0], y, a, b, bias=False,
                                          return_residual2=True)[-1])
    # (the slab's responsibility is ~2e-13: it adds ~3e-12 to y^2)
    assert r2 == pytest.approx(y * y, rel=1e-9)
    kw = dict(bias=False, spike_slab=True)
    got = _kernel_epoch(means, variances, X, Y, [0], a, b, **kw)[2]
    ref = _engine_epoch(means, variances, X, Y, [0], a, b, **kw)[2]
    spike = _engine_epoch(*net(-40.0), X, Y, [0], a, b, **kw)[2]  # Phi(-40): no slab
    np.testing.assert_allclose(got[:2], ref[:2], rtol=1e-12)
    np.testing.assert_allclose(ref[:2], spike[:2], rtol=1e-9)
    assert got[3] == ref[3] == spike[3] == 1  # the guard fired for all three
