"""The compiled batch-visit kernel runs the same arithmetic as the array engine.

:func:`skbayesnn.inference.message_passing.kernel.visit_kernel` replaces the
per-example array functions on NumPy (message_passing.md §6 schedule, §5
messages, §8 guards).  Every output factor and both memory modes are trained
over several batches and epochs with both paths from the same state and RNG;
posterior means and variances, predictions and the fallback count must agree
to rounding.
"""

import numpy as np
import pytest
from scipy import special as sp

from skbayesnn import MessagePassingClassifier, MessagePassingRegressor
from skbayesnn.core.gaussian import from_natural, min_precision, truncated_gaussian_moments
from skbayesnn.inference.message_passing import kernel, network


def _train(kind, per_example, use_kernel, *, sizes, alpha=0.1, bias=True, nb=3, bs=7, epochs=3,
           n_iter=2, regularize=False, **factor):
    r = np.random.default_rng(0)
    n = nb * bs
    X = r.normal(size=(n, sizes[0]))
    st = network.init_state(list(sizes), rng=np.random.default_rng(1), xp=np, alpha=alpha,
                            bias=bias)
    network.add_batches(st, nb)
    if kind == "gaussian":
        T = np.sin(X @ r.normal(size=(sizes[0], sizes[-1]))) + 0.1 * r.normal(size=(n, sizes[-1]))
        out = network.regression_output(0.16)
    else:
        T = r.integers(0, sizes[-1], size=n)
        out = network.classification_output(
            kind, sizes[-1], noise_var=0.01, regularize=regularize, **factor
        )
    batches = [(k, X[k * bs:(k + 1) * bs], T[k * bs:(k + 1) * bs]) for k in range(nb)]
    g = np.random.default_rng(3)
    for e in range(1, epochs + 1):
        network.run_epoch(st, batches, output=out, n_iter=n_iter, rng=g, epoch=e,
                          per_example=per_example, use_kernel=use_kernel)
    return st, network.predict_moments(st, X)


def _assert_close(a, b, rtol=1e-10):
    assert a.n_layers == b.n_layers
    moments = zip(network.posterior_moments(a), network.posterior_moments(b))
    for (wa, va, ba, bva), (wb, vb, bb, bvb) in moments:
        for x, y in ((wa, wb), (va, vb), (ba, bb), (bva, bvb)):
            np.testing.assert_allclose(y, x, rtol=rtol, atol=rtol * np.max(np.abs(x)))
    for x, y in zip(a.slots_w[0], b.slots_w[0]):
        np.testing.assert_allclose(y[1], x[1], rtol=rtol, atol=rtol * np.max(np.abs(x[1])))


@pytest.mark.parametrize("per_example", [True, False])
@pytest.mark.parametrize("kind", ["gaussian", "regression", "argmax", "softmax"])
def test_kernel_matches_array_engine(kind, per_example):
    sizes = (3, 6, 5, 4) if kind != "gaussian" else (3, 6, 5, 2)
    a, (ma, va) = _train(kind, per_example, False, sizes=sizes)
    b, (mb, vb) = _train(kind, per_example, True, sizes=sizes)
    _assert_close(a, b)
    np.testing.assert_allclose(mb, ma, rtol=1e-10, atol=1e-10)
    np.testing.assert_allclose(vb, va, rtol=1e-10)
    # training moved the posterior away from the prior (the comparison is not vacuous)
    prior_var = 1.0 / a.prior_w[1][1]
    assert np.all(network.posterior_moments(a)[1][1] < prior_var)


@pytest.mark.parametrize("use_kernel", [True, False])
def test_one_iteration_per_visit_is_the_same_in_both_memory_modes(use_kernel):
    # With one iteration an example's message is never divided out again, so
    # "per_example" computes what "per_batch" does (train_batch therefore runs
    # it as "per_batch": no b x P storage, see the tracemalloc test).  Checked
    # below train_batch, on _ActiveBatch in both modes: the fits differ only by
    # the order in which the batch's product is summed.
    def fit(per_example, sizes=(3, 6, 5, 2), nb=3, bs=7, epochs=3):
        r = np.random.default_rng(0)
        X = r.normal(size=(nb * bs, sizes[0]))
        T = np.sin(X @ r.normal(size=(sizes[0], sizes[-1])))
        out = network.regression_output(0.16)
        st = network.init_state(list(sizes), rng=np.random.default_rng(1), xp=np, alpha=0.1)
        network.add_batches(st, nb)
        g = np.random.default_rng(3)
        for e in range(1, epochs + 1):
            for k in g.permutation(nb):
                Xb, Tb = X[k * bs:(k + 1) * bs], T[k * bs:(k + 1) * bs]
                active = network._ActiveBatch(st, k, bs, per_example)
                order = g.permutation(bs)
                if use_kernel:
                    network._visit_kernel(active, Xb, Tb, order, 1, out.kernel_spec)
                else:
                    for i in order:
                        active.step(Xb[[i]], Tb[[i]], np.array([i]), out)
                network._commit(st, active, network.ema_rate(e))
            network.recompute_posterior(st)
        return st

    _assert_close(fit(True), fit(False), rtol=1e-12)
    # and through train_batch, against the other path (kernel vs arrays)
    sizes = (3, 6, 5, 2)
    a, _ = _train("gaussian", True, use_kernel, sizes=sizes, n_iter=1)
    c, _ = _train("gaussian", True, not use_kernel, sizes=sizes, n_iter=1)
    _assert_close(a, c, rtol=1e-10)


@pytest.mark.parametrize(
    "options",
    [
        dict(alpha=0.0),  # ReLU: point mass on the negative side (§5.6)
        dict(bias=False),
        dict(sizes=(4, 3)),  # no hidden layer: the first-layer factor alone (§5.4)
        dict(sizes=(3, 8, 8, 8, 3), kind="argmax", regularize=True),
        # the argmax factor's constants (s^2, gamma^2) reach both paths
        dict(sizes=(3, 6, 4), kind="argmax", regularize=True, argmax_noise=1.0, reg_var=0.5),
    ],
)
def test_kernel_matches_array_engine_variants(options):
    options = dict(options)
    kind = options.pop("kind", "gaussian")
    sizes = options.pop("sizes", (3, 6, 5, 2))
    for per_example in (True, False):
        a, (ma, va) = _train(kind, per_example, False, sizes=sizes, **options)
        b, (mb, vb) = _train(kind, per_example, True, sizes=sizes, **options)
        _assert_close(a, b)
        np.testing.assert_allclose(vb, va, rtol=1e-10)
        assert a.n_fallback == b.n_fallback


def test_kernel_special_functions_match_scipy():
    x = np.concatenate([np.linspace(0.0, 40.0, 20001), np.geomspace(1.0, 1e200, 200)])
    ours = np.array([kernel._erfcx_nonneg(v) for v in x])
    np.testing.assert_allclose(ours, sp.erfcx(x), rtol=2e-15)
    t = np.linspace(-80.0, 8.0, 20001)
    np.testing.assert_allclose([kernel.ndtr(v) for v in t[-2000:]], sp.ndtr(t[-2000:]),
                               rtol=1e-15)
    # the truncation mass log Phi(t) (of N(t, 1) on x >= 0), and its scaled
    # form scale exp(-q) that the LeakyReLU messages compare without a log
    parts = np.array([kernel._trunc_standard(v, True) for v in t])
    np.testing.assert_allclose(parts[:, 0], sp.log_ndtr(t), rtol=5e-14)
    np.testing.assert_allclose(np.log(parts[:, 1]) - parts[:, 2], parts[:, 0], rtol=1e-15,
                               atol=1e-15)
    assert np.all((parts[:, 1] > 0.39 / (1.0 + np.abs(t))) & (parts[:, 1] <= 1.0))
    # where Phi(t) is a normal float; exp(-t^2 / 2) is conditioned by t^2 (the
    # rounding of t^2 alone), so the relative tolerance is a few t^2 ulp
    shown = t > -37.0
    got = parts[shown, 1] * np.exp(-parts[shown, 2])
    eps = np.finfo(float).eps
    assert np.all(np.abs(got / sp.ndtr(t[shown]) - 1.0) <= 4e-15 + 2.0 * t[shown] ** 2 * eps)


def test_kernel_arithmetic_exp_and_log_are_within_one_ulp():
    # The kernel's exp and log (fdlibm's algorithms in arithmetic only, so that
    # the LeakyReLU layers' loops vectorise) against NumPy's over their whole
    # range: within 1 ulp of the result, subnormal results included (in units
    # of the smallest subnormal there), and the IEEE special values exactly.
    rng = np.random.default_rng(0)
    x = np.concatenate([rng.uniform(-750.0, 712.0, 200_000), rng.uniform(-5.0, 5.0, 100_000),
                        rng.uniform(-745.2, -700.0, 20_000), np.linspace(-1e-6, 1e-6, 2001),
                        [709.78, 709.7827, 709.79, -745.13, -745.14, -1e308, 1e308, 0.0, -0.0,
                         np.inf, -np.inf, np.nan]])
    got = np.array([kernel._exp(v) for v in x])
    with np.errstate(over="ignore"):
        ref = np.exp(x)
    tiny = np.finfo(float).tiny
    normal = np.isfinite(ref) & (ref >= tiny)
    assert np.all(np.abs(got[normal] - ref[normal]) <= np.spacing(ref[normal]))
    sub = (ref < tiny) & (ref > 0.0)
    assert sub.sum() > 1000 and np.all(np.abs(got[sub] - ref[sub]) <= 5e-324)
    other = ~(normal | sub)
    np.testing.assert_array_equal(got[other], ref[other])
    x = np.concatenate([np.exp(rng.uniform(-744.0, 709.0, 200_000)),
                        rng.uniform(0.5, 2.0, 100_000), rng.uniform(0.0, 1e-308, 20_000),
                        [1.0, 5e-324, 1e-310, tiny, 1e308, np.sqrt(2.0), np.sqrt(0.5), 0.0,
                         -0.0, -1.0, np.inf, -np.inf, np.nan]])
    got = np.array([kernel._log(v) for v in x])
    with np.errstate(divide="ignore", invalid="ignore"):
        ref = np.log(x)
    finite = np.isfinite(ref) & (ref != 0.0)
    assert np.all(np.abs(got[finite] - ref[finite]) <= np.spacing(np.abs(ref[finite])))
    np.testing.assert_array_equal(got[~finite], ref[~finite])


def test_kernel_erfcx_series_limits_and_exp_compensation():
    # erfcx on x >= 0 is one Chebyshev series in y = (x - 4)/(x + 4); it must
    # keep SciPy's accuracy where y rounds to 1 (x > 1e16) up to overflow of
    # x itself, give erfcx(inf) = 0 and pass NaN.
    x = np.concatenate([[0.0, 5e-324, 1e-300, 1e-8], np.geomspace(1e15, 1e307, 300)])
    ours = np.array([kernel._erfcx_nonneg(v) for v in x])
    np.testing.assert_allclose(ours, sp.erfcx(x), rtol=2e-15, atol=0.0)
    assert kernel._erfcx_nonneg(np.inf) == 0.0
    assert np.isnan(kernel._erfcx_nonneg(np.nan))
    # exp(-t^2/2) with t^2's rounding compensated: within 2 ulp of an 80-bit
    # reference where the plain exp(-0.5 * t * t) errs by up to t^2/2 ulp.
    t = np.linspace(-38.0, 38.0, 40001)
    ours = np.array([kernel._exp_neg_half_square(v) for v in t])
    ref = np.exp(-0.5 * np.longdouble(t) ** 2)
    normal = ref > np.finfo(float).tiny
    err = np.abs((ours[normal] - ref[normal]) / ref[normal]).astype(float)
    assert err.max() <= 2.0 * np.finfo(float).eps
    assert [kernel._exp_neg_half_square(v) for v in (40.0, 1e200, np.inf)] == [0.0, 0.0, 0.0]
    assert np.isnan(kernel._exp_neg_half_square(np.nan))


def test_kernel_truncation_mass_is_accurate_above_zero():
    # For t > 0 the tail c = erfc(t / sqrt 2) is erfcx(t / sqrt 2) exp(-t^2/2)
    # with t^2's rounding compensated, so log Phi(t) = log1p(-c/2) keeps full
    # precision into the far tail; libm's erfc of the rounded t / sqrt 2 (or an
    # uncompensated exp) errs by up to 2e-13 relative there, as does SciPy's
    # log_ndtr, so the reference is 40-digit mpmath.
    mpmath = pytest.importorskip("mpmath")
    mpmath.mp.dps = 40
    t = np.geomspace(0.5, 37.0, 40)  # (not multiples of 1/2, where t^2 is exact)
    ours = np.array([kernel._trunc_standard(v, True)[0] for v in t])
    ref = np.array([float(mpmath.log1p(-mpmath.erfc(mpmath.mpf(v) / mpmath.sqrt(2)) / 2))
                    for v in t])
    np.testing.assert_allclose(ours, ref, rtol=2e-15, atol=0.0)


def test_kernel_truncated_moments_match_the_array_function():
    # Both signs of t = mean/std take erfcx(|t| / sqrt 2): for t > 0 it gives the
    # tail c = erfc(t / sqrt 2) that serves the mass and the inverse Mills ratio,
    # for -1 < t <= 0 log Phi; both against the SciPy-based array function.
    # Relative tolerances throughout, so a log Phi that loses its tiny values for
    # t >> 0 (log(1 - c/2) instead of log1p(-c/2)) fails: measured gaps are 7e-15
    # for the moments and 2.2e-13 for log Phi at t > 8, where SciPy's log_ndtr
    # errs by 2e-13 relative and the kernel's by 4e-16 (against 60-digit
    # mpmath).  Below t = -1 the arithmetic is ill-conditioned (t + lam cancels).
    t = np.concatenate([np.linspace(-1.0, 40.0, 20001), [-1e-300, 0.0, 1e-300, 1e3]])
    var = np.full_like(t, 2.5)
    mean = t * np.sqrt(var)
    ours = np.array([kernel._trunc_moments(m, v) for m, v in zip(mean, var)])
    ref = np.stack(truncated_gaussian_moments(mean, var), axis=1)
    # (atol: SciPy gives -0.0 where log Phi is subnormal, t > 37.5; ours the value)
    np.testing.assert_allclose(ours[:, 0], ref[:, 0], rtol=1e-12, atol=1e-300)
    np.testing.assert_allclose(ours[:, 1:], ref[:, 1:], rtol=1e-13, atol=0.0)
    assert np.isnan(kernel._trunc_moments(np.nan, 1.0)).all()
    # the far tail, t < -15, takes the same asymptotic series in both
    t = np.concatenate([np.linspace(-400.0, -15.5, 2001), [-1e5, -1e150]])
    ours = np.array([kernel._trunc_moments(x, 1.0) for x in t])
    ref = np.stack(truncated_gaussian_moments(t, np.ones_like(t)), axis=1)
    np.testing.assert_allclose(ours[:, 1:], ref[:, 1:], rtol=1e-14, atol=0.0)


def _message_grid():
    """Forward messages of z (mean, variance) and backward messages of a (mean,
    natural parameters) from ordinary to extreme: ``zm, zv, am, ta, ra``."""
    z_means = [-1e160, -30.0, -3.0, -0.1, 0.0, 0.1, 3.0, 30.0, 1e160]
    z_vars = [1e-12, 0.5, 4.0, 1e12]
    a_means = [-5.0, 0.0, 2.0, 1e160]
    rho_as = [0.0, 1e-310, 1e-9, 3e-8, 0.3, 1.0, 30.0, 1e8]
    zm, zv, am, ra = np.array(np.meshgrid(z_means, z_vars, a_means, rho_as)).reshape(4, -1)
    return zm, zv, am, am * ra, ra


@pytest.mark.parametrize("alpha", [0.0, 0.1])
def test_kernel_direct_forward_matches_the_array_function(alpha):
    # _leaky_direct takes the moments from the truncation of z at 0 (mass,
    # mean, variance of z > 0: erfcx of |a| / sqrt 2, a = mean/std, and the
    # series below -15); from a positive mean deep into the flat part it agrees
    # with the array function, whose own error is ~a^4 ulp for a << 0.
    from skbayesnn.inference.message_passing import activation

    a = np.concatenate([np.linspace(-45.0, 4.0, 4901), -15.0 + np.array([-1e-12, 0.0, 1e-12]),
                        [-1e-300, 0.0, 1e-300, 40.0, 1e3]])
    for var in (1e-6, 0.7, 50.0):
        mean = a * np.sqrt(var)
        ours = np.array([kernel._leaky_direct(m, var, alpha) for m in mean])
        ref_m, ref_v = activation.leaky_relu_forward_direct(mean, np.full_like(mean, var), alpha)
        np.testing.assert_allclose(ours[:, 0], ref_m, rtol=1e-12, atol=1e-300)
        np.testing.assert_allclose(ours[:, 1], ref_v, rtol=1e-12, atol=1e-300)
    # beyond underflow and at zero variance: the deterministic activation
    for m, v, want in ((-1e160, 0.5, alpha * -1e160), (-2.0, 0.0, -2.0 * alpha), (2.0, 0.0, 2.0),
                       (1e300, 1e-300, 1e300)):  # (mean / std overflows)
        got_m, got_v = kernel._leaky_direct(m, v, alpha)
        assert got_m == pytest.approx(want, rel=1e-15, abs=1e-300)
        ref_m, ref_v = activation.leaky_relu_forward_direct(np.array(m), np.array(v), alpha)
        assert got_v == pytest.approx(float(ref_v), rel=1e-12, abs=1e-300)


@pytest.mark.parametrize("alpha", [0.0, 0.1])
def test_kernel_leaky_relu_messages_match_the_array_functions(alpha):
    # The kernel's LeakyReLU messages (§5.6 (b), (c)) weigh the two tilted parts
    # by their log-mass difference (one log, one exp: _tilted_relative and
    # _mixture_relative) and fall back to the general log-weight path where that
    # difference is not finite (a subnormal rho_a, means near overflow).  Over a
    # grid that reaches both paths, acceptance of the marginal approximation and
    # the pattern of non-finite values equal the array functions' everywhere,
    # the messages are proper (var > 0, rho >= 1e-8), and where the problem is
    # well conditioned the values agree to 1e-10.
    from skbayesnn.inference.message_passing import activation

    zm, zv, am, ta, ra = _message_grid()
    fwd = np.array([kernel._leaky_forward(*r, alpha) for r in zip(zm, zv, ta, ra)])
    bwd = np.array([kernel._leaky_backward(*r, alpha) for r in zip(zm, zv, ta, ra)])
    delta = np.array([kernel._tilted_relative(*r, alpha)[0] if r[3] > 0 else 0.0
                      for r in zip(zm, zv, ta, ra)])
    assert np.sum(~np.isfinite(delta)) > 10  # the fallback is exercised
    with np.errstate(all="ignore"):
        ref_m, ref_v, ref_ok = activation.leaky_relu_forward(zm, zv, ta, ra, alpha)
        ref_t, ref_r = activation.leaky_relu_backward(zm, zv, ta, ra, alpha)
    np.testing.assert_array_equal(fwd[:, 2].astype(bool), ref_ok)
    assert 0 < ref_ok.sum() < ref_ok.size
    for ours, ref in ((fwd[:, 0], ref_m), (fwd[:, 1], ref_v), (bwd[:, 0], ref_t),
                      (bwd[:, 1], ref_r)):
        np.testing.assert_array_equal(np.isfinite(ours), np.isfinite(ref))
    assert np.all(fwd[:, 1] > 0) and np.all(bwd[:, 1] >= 1e-8)
    good = ((np.abs(zm) <= 3.0) & (zv >= 0.5) & (zv <= 4.0) & (np.abs(am) <= 5.0)
            & (ra >= 0.3) & (ra <= 30.0))
    assert good.sum() == 90
    # the mixture of the two parts, relative and general paths, log normaliser
    # included, where both parts carry mass (|delta| < 1) as well as where one does
    rel, gen = [], []
    for r in zip(zm, zv, ta, ra):
        if not r[3] > 0:
            continue
        d, c_p, c_n, s_p, s_n, e_p, e_n, v_p, v_n = kernel._tilted_relative(*r, alpha)
        if not np.isfinite(d):
            continue
        rel.append(kernel._mixture_relative(d, c_p, c_n, s_p, s_n, e_p, e_n, v_p, v_n) + (d,))
        lw_p, lw_n, e_p, e_n, v_p, v_n = kernel._tilted(*r, alpha)
        gen.append(kernel._mixture2(lw_p, lw_n, e_p, e_n, v_p, v_n)[:3])
    rel, gen = np.array(rel), np.array(gen)
    assert np.sum(np.abs(rel[:, 3]) < 1.0) >= 20
    np.testing.assert_allclose(rel[:, 2], gen[:, 2], rtol=1e-12, atol=1e-12)
    # the forward guard m0 > 1e-8 (§5.6 (b)) flips at the same backward mean
    # (z ~ N(-10, 0.1), a's message of precision 1 at a_mean: the mass falls
    # below 1e-8 as a_mean leaves the image of z, before other guards fire)
    a_sweep = np.linspace(-20.0, 20.0, 8001)
    ones = np.ones_like(a_sweep)
    ok = [kernel._leaky_forward(-10.0, 0.1, a, 1.0, alpha)[2] for a in a_sweep]
    ref_ok = activation.leaky_relu_forward(-10.0 * ones, 0.1 * ones, a_sweep, ones, alpha)[2]
    assert 0 < ref_ok.sum() < ref_ok.size
    np.testing.assert_array_equal(ok, ref_ok)
    for ours, ref in ((fwd[:, 0], ref_m), (fwd[:, 1], ref_v), (bwd[:, 0], ref_t),
                      (bwd[:, 1], ref_r)):
        np.testing.assert_allclose(ours[good], ref[good], rtol=1e-10, atol=1e-14)


@pytest.mark.parametrize("n_units", [None, 1149, 13, 5])
@pytest.mark.parametrize("alpha", [0.0, 0.1])
def test_kernel_layer_messages_equal_the_one_unit_functions(alpha, n_units):
    # The kernel computes a layer's LeakyReLU messages in one branch-free loop
    # over its units and sends the rest to the one-unit functions
    # (_leaky_forward_layer, _leaky_backward_layer); they must be bitwise the
    # one-unit functions, with the same fallbacks, on a grid that mixes units
    # without a backward message, degenerate parts (the general path) and
    # rejected forward marginals in one layer, and on a layer without any
    # backward message (an example's first iteration: all direct).  The loops
    # run over the width rounded up to a multiple of kernel._LANES, the rest
    # padded (kernel._pad_layer): also a random selection of the grid's units
    # of other widths, with NaN in the arrays' padding.
    zm, zv, am, ta, ra = _message_grid()
    if n_units is not None:
        pick = np.random.default_rng(n_units).permutation(zm.size)[:n_units]
        zm, zv, am, ta, ra = (a[pick] for a in (zm, zv, am, ta, ra))
    n_pad = kernel._padded(zm.size)

    def padded(a):
        return np.concatenate([a, np.full(n_pad - a.size, np.nan)])

    counts = []
    for rho_a in (ra, np.zeros_like(ra)):
        tau_a = ta * (rho_a > 0)
        work = np.full((3, n_pad), np.nan)
        xm, xv = padded(zm), padded(zm)
        n_fallback = kernel._leaky_forward_layer(padded(zm), padded(zv), tau_a, rho_a, alpha,
                                                 xm, xv, work)
        xm, xv = xm[:zm.size], xv[:zm.size]
        ref, fallbacks = [], 0
        for r in zip(zm, zv, tau_a, rho_a):
            m, v, used = kernel._leaky_forward(*r, alpha)
            fallbacks += (not used) and r[3] > 0
            ref.append(kernel._moments(m / v + r[2], 1.0 / v + r[3]))
        ref = np.array(ref)
        np.testing.assert_array_equal(xm, ref[:, 0])
        np.testing.assert_array_equal(xv, ref[:, 1])
        assert n_fallback == fallbacks
        counts.append(n_fallback)
        tau, rho = padded(zm), padded(zm)
        kernel._leaky_backward_layer(padded(zm), padded(zv), tau_a, rho_a, alpha, tau, rho, work)
        tau, rho = tau[:zm.size], rho[:zm.size]
        ref = np.array([kernel._leaky_backward(*r, alpha) for r in zip(zm, zv, tau_a, rho_a)])
        np.testing.assert_array_equal(tau, ref[:, 0])
        np.testing.assert_array_equal(rho, ref[:, 1])
    # the grid falls back on some informed units; without messages nothing counts
    assert counts[0] < np.sum(ra > 0) and counts[1] == 0
    assert counts[0] > 0 or n_units is not None and n_units < 20


@pytest.mark.parametrize("first_layer", [True, False])
def test_kernel_weight_moments_keep_the_precision_floor(first_layer):
    # The compiled forward loops (_first_forward, _forward_layer) turn each
    # weight's cavity (first layer) or marginal (hidden layers) into moments
    # with selects around one division instead of calling _moments; every
    # class of precision (above and below the 1e-8 floor of §8 item 3,
    # negative, zero, subnormal) must give what from_natural(min_precision(.))
    # gives, and the layer's output moments follow.  70 weights along the
    # inner loop: its vectorised body runs as well as its scalar remainder.
    rho = np.tile([2.0, 1e-9, -3.0, 0.0, 5e-9, 1e-8, 7.0, 1e-310, 5e-324, -1e-310], 7)
    tau = np.tile([1.0, 1.0, 1.0, 2.0, -0.5, 0.5, -3.5, 1e-310, 0.0, 1e-300], 7)
    # two rows: a hidden layer's 2 outputs of 70 inputs, or the first layer's
    # 2 inputs of 70 outputs (the kernel's transposed first layer)
    q_t, q_r = np.stack([tau, -2.0 * tau]), np.stack([rho, 3.0 * rho])
    wm, wv = np.empty_like(q_t), np.empty_like(q_t)
    if first_layer:  # the example's messages at m = 1 are divided out
        msg_t = np.zeros((2,) + q_t.shape)
        msg_r = np.zeros((2,) + q_t.shape)
        msg_t[1], msg_r[1] = 0.25, 0.5
        q_t, q_r = q_t + msg_t[1], q_r + msg_r[1]
        ref_m, ref_v = from_natural(*min_precision(q_t - msg_t[1], q_r - msg_r[1]))
        x = np.array([0.75, -1.5])
        b_m, b_v = np.linspace(-1.0, 1.0, 70), np.linspace(0.5, 2.0, 70)
        zm, zv = np.empty(70), np.empty(70)
        kernel._first_forward(q_t, q_r, msg_t, msg_r, 1, True, x, wm, wv, b_m, b_v, zm, zv)
        ref_zm, ref_zv = x @ ref_m + b_m, x**2 @ ref_v + b_v
    else:
        ref_m, ref_v = from_natural(*min_precision(q_t, q_r))
        xm = np.linspace(-1.0, 2.0, tau.size)
        xv = np.full_like(xm, 0.5)
        b_m, b_v = np.array([0.5, -1.0]), np.array([1.0, 2.0])
        zm, zv = np.empty(2), np.empty(2)
        kernel._forward_layer(q_t, q_r, xm, xv, wm, wv, b_m, b_v, zm, zv)
        ref_zm, ref_zv = ref_m @ xm + b_m, ref_v @ xm**2 + (ref_m**2 + ref_v) @ xv + b_v
    # (atol: a subnormal mean, e.g. -1e-310 / -3, keeps more digits here than in
    # min_precision's mean * 1e-8 / 1e-8)
    np.testing.assert_allclose(wm, ref_m, rtol=1e-15, atol=1e-300)
    np.testing.assert_allclose(wv, ref_v, rtol=1e-15)
    np.testing.assert_allclose(zm, ref_zm, rtol=1e-14)
    np.testing.assert_allclose(zv, ref_zv, rtol=1e-14)


@pytest.mark.parametrize("bias", [True, False])
@pytest.mark.parametrize("n_iter", [1, 2, 3])
def test_kernel_never_reads_a_message_before_writing_it(n_iter, bias):
    # The kernel takes its example-message arrays uninitialised from a
    # workspace kept across visits (network._ActiveBatch): an example's old
    # message is read only from its second iteration on, after its first
    # wrote it, and without biases no bias message at all.  Filled with NaN,
    # the arrays must not change any bit of the fit.
    sizes = [3, 6, 5, 2]
    r = np.random.default_rng(0)
    X = r.normal(size=(14, 3))
    Y = np.sin(X @ r.normal(size=(3, 2)))
    out = network.regression_output(0.16)

    def fit(workspace):
        st = network.init_state(sizes, rng=np.random.default_rng(1), xp=np, bias=bias)
        network.add_batches(st, 2)
        g = np.random.default_rng(3)
        for k in (0, 1, 0, 1):
            if workspace is not None:
                for buf in workspace.values():
                    buf[...] = np.nan
            network.train_batch(st, X[7 * k : 7 * k + 7], Y[7 * k : 7 * k + 7], k, output=out,
                                n_iter=n_iter, rng=g, use_kernel=True, workspace=workspace)
        return st

    workspace = {}
    st_nan, st_ref = fit(workspace), fit(None)
    assert len(workspace) == 4 * len(sizes[1:])  # the buffers were used (and NaN-filled)
    for (t, r_), (t_ref, r_ref) in zip(st_nan.post_w + st_nan.post_b,
                                       st_ref.post_w + st_ref.post_b):
        np.testing.assert_array_equal(t, t_ref)
        np.testing.assert_array_equal(r_, r_ref)
    assert network.is_finite(st_nan)


def test_use_kernel_true_refuses_other_schedules():
    st = network.init_state([2, 1], rng=np.random.default_rng(0), xp=np)
    network.add_batches(st, 1)
    X = np.ones((4, 2))
    with pytest.raises(ValueError, match="kernel"):
        network.train_batch(st, X, np.ones((4, 1)), 0, output=network.regression_output(1.0),
                            n_iter=1, rng=np.random.default_rng(0), chunk_size=2,
                            use_kernel=True)


@pytest.mark.parametrize(
    "est",
    [
        MessagePassingRegressor((8,), max_epochs=2, batch_size=16, random_state=0),
        MessagePassingClassifier((8,), likelihood="argmax", max_epochs=2, batch_size=16,
                                 random_state=0),
    ],
)
def test_estimators_use_the_kernel_with_the_same_result(est, monkeypatch):
    r = np.random.default_rng(0)
    X = r.normal(size=(40, 3))
    y = X[:, 0] - X[:, 1] if isinstance(est, MessagePassingRegressor) else (X[:, 0] > 0)
    calls = []
    visit = kernel.visit_kernel
    monkeypatch.setattr(kernel, "visit_kernel", lambda *a: calls.append(1) or visit(*a))
    fast = est.fit(X, y)
    assert len(calls) == 2 * 3  # every visit of every epoch ran compiled
    ref_state = fast.state_
    monkeypatch.setattr(network, "_kernel_ready", lambda *a: False)
    slow = type(est)(**est.get_params()).fit(X, y)
    _assert_close(slow.state_, ref_state)


def test_kernel_and_array_path_agree_where_hidden_units_tie(monkeypatch):
    # Confident backward messages to wholly positive units put the LeakyReLU
    # forward guard on an exact tie, which rounding decided differently on the
    # two paths (predict_proba 1e-3 apart, 1860 against 1861 fallbacks).
    rng = np.random.default_rng(0)
    X = rng.normal(size=(150, 4))
    y = (X[:, 0] + X[:, 1] ** 2 > 1).astype(int) + (X[:, 2] > 0.5)

    def fit():
        return MessagePassingClassifier((16, 16), likelihood="regression", batch_size=32,
                                        max_epochs=3, random_state=0).fit(X, y)

    compiled = fit()
    monkeypatch.setattr(network, "_kernel_ready", lambda *args: False)
    arrays = fit()
    assert compiled.state_.n_fallback == arrays.state_.n_fallback
    np.testing.assert_allclose(compiled.predict_proba(X), arrays.predict_proba(X), rtol=1e-9,
                               atol=1e-12)


def test_networks_of_one_to_three_hidden_layers_share_one_compiled_signature(monkeypatch):
    # Numba compiles visit_kernel once per argument type, and a tuple's length
    # is part of its type: unpadded, every depth of a search over
    # hidden_layer_sizes cost a new compilation (about 10 s).  Padded
    # (kernel.layer_tuple), 1-3 hidden layers share one, 4-7 the next.
    from numba import typeof

    seen = {}
    visit = kernel.visit_kernel

    def spy(*args):
        seen.setdefault(hidden, set()).add(tuple(typeof(a) for a in args))
        return visit(*args)

    monkeypatch.setattr(kernel, "visit_kernel", spy)
    r = np.random.default_rng(0)
    X = r.normal(size=(30, 3))
    y = X[:, 0] + 0.1 * r.normal(size=30)
    depths = [(5,), (5, 4), (5, 4, 3), (5, 4, 3, 2), (5,) * 5, (5,) * 7]
    for hidden in depths:
        MessagePassingRegressor(hidden, max_epochs=1, batch_size=10, noise_std=1.0,
                                random_state=0).fit(X, y)
    assert all(len(seen[h]) == 1 for h in depths)
    assert len(set.union(*(seen[h] for h in depths[:3]))) == 1
    assert len(set.union(*(seen[h] for h in depths[3:]))) == 1
    assert seen[depths[3]] != seen[depths[0]]
    # the padding is never read: the deepest network of a bucket fits as
    # the unpadded kernel would (the array path, same arithmetic)
    fast = MessagePassingRegressor((5, 4, 3), max_epochs=2, batch_size=10,
                                   random_state=0).fit(X, y)
    monkeypatch.setattr(network, "_kernel_ready", lambda *a: False)
    slow = MessagePassingRegressor((5, 4, 3), max_epochs=2, batch_size=10,
                                   random_state=0).fit(X, y)
    _assert_close(slow.state_, fast.state_)


def test_the_example_step_allocates_nothing():
    # The functions of an example step take their workspaces from the visit
    # (kernel._NO_NRT: they are compiled without Numba's reference counting),
    # so Numba's count of allocations during a fit does not grow with the
    # examples of its one batch visit.  The count is kept only in a process
    # started with NUMBA_NRT_STATS=1.  Softmax and a hidden layer: the output
    # factor's and the hidden layers' workspaces.
    import os
    import subprocess
    import sys
    from pathlib import Path

    code = """
import warnings
import numpy as np
from numba.core.runtime import rtsys
from skbayesnn import MessagePassingClassifier
warnings.simplefilter("ignore")
rng = np.random.default_rng(0)
X = rng.normal(size=(120, 3))
y = (X[:, 0] > 0).astype(int) + (X[:, 1] > 0.5)
counts = []
for n in (20, 20, 120):  # (the first fit compiles or loads the kernel)
    model = MessagePassingClassifier((6,), likelihood="softmax", batch_size=n, max_epochs=1,
                                     random_state=0)
    before = rtsys.get_allocation_stats().alloc if counts else 0
    model.fit(X[:n], y[:n])
    counts.append(rtsys.get_allocation_stats().alloc - before)
print(*counts[1:])
"""
    root = Path(kernel.__file__).resolve().parents[3]
    env = dict(os.environ, NUMBA_NRT_STATS="1", PYTHONPATH=str(root))
    out = subprocess.run([sys.executable, "-c", code], env=env, cwd=root, capture_output=True,
                         text=True, check=True).stdout
    few_rows, more_rows = (int(c) for c in out.split())
    assert few_rows == more_rows > 0


def test_the_kernel_sums_messages_in_order_and_refuses_strided_arrays():
    # _recompute's sum and the per_batch restart's copy are loops over
    # contiguous arrays seen flat: (msg[0] + msg[1] + ...) + cavity in that
    # order, bitwise, and a strided array raises instead of being copied (a
    # write to a copy would be lost).
    rng = np.random.default_rng(0)
    for shape in [(5,), (4, 3)]:
        src = rng.normal(size=shape)
        msg = rng.normal(size=(6,) + shape) * 10.0 ** rng.integers(-8, 9, size=(6,) + shape)
        dst = np.empty(shape)
        kernel._product_with_messages(src, msg, dst)
        expected = msg[0].copy()
        for row in msg[1:]:
            expected += row
        np.testing.assert_array_equal(dst, expected + src)
        copy = np.empty(shape)
        kernel._copy_into(copy, src)
        np.testing.assert_array_equal(copy, src)
    with pytest.raises(NotImplementedError):
        kernel._copy_into(np.empty((3, 4)).T, np.ones((4, 3)))


def test_one_compilation_of_the_sweep_serves_every_depth_and_iteration(tmp_path):
    # The per-layer arrays reach _sweep as lists, whose type does not depend
    # on the depth, and its flags read_old and store are run-time values
    # (_replace_w), so that a network of another depth bucket recompiles
    # only visit_kernel (benchmarks/compile_mp.py: 4.5 s against 15 s with a
    # _sweep per depth bucket and per value of store).  In a process with an
    # empty Numba cache, so that every function is compiled and not loaded.
    import os
    import subprocess
    import sys
    from pathlib import Path

    code = """
import warnings
import numpy as np
from skbayesnn import MessagePassingRegressor
from skbayesnn.inference.message_passing import kernel
warnings.simplefilter("ignore")
rng = np.random.default_rng(0)
X = rng.normal(size=(30, 3))
y = X[:, 0] + 0.1 * rng.normal(size=30)
for hidden in [(5,), (5,) * 5]:
    for memory in ["per_example", "per_batch"]:
        MessagePassingRegressor(hidden, max_epochs=1, batch_size=10, memory=memory,
                                random_state=0).fit(X, y)
print(len(kernel.visit_kernel.signatures), len(kernel._sweep.signatures),
      len(kernel._hidden_backward.signatures), len(kernel._first_backward.signatures))
"""
    root = Path(kernel.__file__).resolve().parents[3]
    env = dict(os.environ, NUMBA_CACHE_DIR=str(tmp_path), PYTHONPATH=str(root))
    out = subprocess.run([sys.executable, "-c", code], env=env, cwd=tmp_path,
                         capture_output=True, text=True, check=True).stdout
    assert out.split() == ["2", "1", "1", "1"]
