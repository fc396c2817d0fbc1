"""Spike-and-slab messages (skbayesnn.core.spike_slab) against pbp.md §6.2-§6.4:
closed forms, Monte Carlo, quadrature, extreme inputs and the strict namespace."""

import math

import numpy as np
import pytest
from scipy import integrate, stats

from skbayesnn._backend import asnumpy
from skbayesnn._testing import StrictArray, assert_mc_close, mc_moments
from skbayesnn.core.linear import linear_moments
from skbayesnn.core.spike_slab import (
    rectified_slab,
    slab_probability,
    slab_probability_grad,
    spike_slab_linear,
    spike_slab_moments,
    spike_slab_project,
    spike_slab_relu,
)

_raise_fp = dict(over="raise", invalid="raise", divide="raise")


def _bernoulli_se(p, n):
    return math.sqrt(max(p * (1.0 - p), 0.0) / n)


# ---------------------------------------------------------------------------
# projection (pbp.md §6.2)
# ---------------------------------------------------------------------------


def test_moments_closed_form_and_projection_round_trips(rng):
    # By hand: rho = 1/4, slab N(2, 1): E = 0.5, Var = E[Z^2] - E^2 = 0.25 * 5 - 0.25 = 1.
    mean, var = spike_slab_moments(0.25, 2.0, 1.0)
    assert float(mean) == 0.5 and float(var) == 1.0
    rho, m, v = spike_slab_project(0.25, 0.5, 1.0)
    assert (float(rho), float(m), float(v)) == (0.25, 2.0, 1.0)
    # Round trips both ways on random messages (rho in (0, 1], slab variance >= 0).
    rho = np.concatenate([rng.uniform(1e-3, 1.0, size=200), [1.0, 1e-12]])
    m = rng.normal(scale=3.0, size=rho.size)
    v = np.concatenate([rng.uniform(0.0, 4.0, size=rho.size - 1), [0.0]])
    mean, var = spike_slab_moments(rho, m, v)
    np.testing.assert_allclose(var, rho * (m**2 + v) - rho**2 * m**2, rtol=1e-12, atol=1e-15)
    r2, m2, v2 = spike_slab_project(rho, mean, var)
    np.testing.assert_array_equal(r2, rho)
    np.testing.assert_allclose(m2, m, rtol=1e-13)
    # The slab variance is a difference Var/rho - (1 - rho) m^2: absolute error
    # ~eps (m^2 + v) relative to the larger term.
    np.testing.assert_allclose(v2, v, rtol=1e-12, atol=1e-13 * np.max(m**2 + v))
    mean3, var3 = spike_slab_moments(r2, m2, v2)
    np.testing.assert_allclose(mean3, mean, rtol=1e-14)
    np.testing.assert_allclose(var3, var, rtol=1e-12, atol=1e-15)


def test_projection_guards_rho_zero_and_rounding():
    with np.errstate(**_raise_fp):
        rho, m, v = spike_slab_project(
            np.array([0.0, 0.0, 0.5]), [0.0, 1e-300, 1.0], [0.0, 0.0, 0.2]
        )
    np.testing.assert_array_equal(rho, [0.0, 0.0, 0.5])
    # rho = 0: no slab, reported as N(0, 0) (no 0/0).
    np.testing.assert_array_equal(m[:2], 0.0)
    np.testing.assert_array_equal(v[:2], 0.0)
    # Var < rho (1 - rho) m~^2 (here 0.2 < 0.5): floored at 0, not negative.
    assert m[2] == 2.0 and v[2] == 0.0
    # A point mass: P(Z != 0) = 1, E = 3, Var = 0 is the slab N(3, 0).
    assert tuple(float(t) for t in spike_slab_project(1.0, 3.0, 0.0)) == (1.0, 3.0, 0.0)


# ---------------------------------------------------------------------------
# linear layer (pbp.md §6.3)
# ---------------------------------------------------------------------------


def test_slab_probability_and_its_gradient(rng):
    rho = rng.uniform(0.0, 1.0, size=(4, 7))
    got = slab_probability(rho)
    np.testing.assert_allclose(got, 1.0 - np.prod(1.0 - rho, axis=-1), rtol=1e-14)
    grad = slab_probability_grad(rho)
    for b in range(4):
        for i in range(7):
            others = np.delete(1.0 - rho[b], i)
            np.testing.assert_allclose(grad[b, i], np.prod(others), rtol=1e-14)
    # Central differences (the function is a polynomial of degree 1 in each rho_i,
    # so they are exact up to rounding, ~eps / h = 1e-10).
    h = 1e-6
    for i in range(7):
        up, down = rho.copy(), rho.copy()
        up[:, i] += h
        down[:, i] -= h
        fd = (slab_probability(up) - slab_probability(down)) / (2 * h)
        np.testing.assert_allclose(grad[:, i], fd, rtol=1e-8, atol=1e-9)
    # Tiny rho: 1 - prod(1 - rho) would round to 0; the log1p form keeps
    # sum(rho) - sum_{i<j} rho_i rho_j to full relative accuracy.
    tiny = np.array([1e-20, 3e-20, 2e-19])
    np.testing.assert_allclose(slab_probability(tiny), tiny.sum(), rtol=1e-15)
    assert 1.0 - np.prod(1.0 - tiny) == 0.0
    # A bias input (rho = 1) makes the output a slab with probability exactly 1
    # and every other input's gradient exactly 0 (pbp.md §6.6); no division, so
    # the bias entry's own gradient is the product of the others.
    with_bias = np.array([0.3, 0.8, 1.0, 0.0])
    assert float(slab_probability(with_bias)) == 1.0
    g = slab_probability_grad(with_bias)
    np.testing.assert_array_equal(g[[0, 1, 3]], 0.0)
    np.testing.assert_allclose(g[2], 0.7 * 0.2 * 1.0, rtol=1e-15)
    # Two rho = 1 entries: every gradient is exactly 0.
    np.testing.assert_array_equal(slab_probability_grad([1.0, 0.4, 1.0]), 0.0)
    # All inputs exactly 0: the output is exactly 0 (rho_lin = 0), gradient 1.
    assert float(slab_probability(np.zeros(3))) == 0.0
    np.testing.assert_array_equal(slab_probability_grad(np.zeros(3)), 1.0)


def _linear_case(rng, n_in=6, n_out=3):
    rho = np.array([0.5, 0.2, 0.3, 0.6, 0.1, 0.4])[:n_in]
    m = 1.5 * rng.normal(size=n_in)
    v = rng.uniform(0.1, 2.0, size=n_in)
    M = rng.normal(size=(n_out, n_in))
    V = rng.uniform(0.05, 0.5, size=(n_out, n_in))
    return rho, m, v, M, V


def test_linear_layer_is_eq_3_4_and_pbp_linear_moments_of_total_moments(rng):
    rho, m, v, M, V = _linear_case(rng)
    rho_lin, slab_m, slab_v = spike_slab_linear(rho, m, v, M, V)
    # pbp.md §6.3, eq. 3.4 (with c_j, errata §15 items 4 and 6), s = 1 here.
    e_lin = M @ (rho * m)
    c = V @ (rho * m * m) + (M * M) @ (rho * v) + V @ (rho * v)
    c = c + (M * M) @ (rho * (1 - rho) * m * m)
    p0 = np.prod(1 - rho)
    assert float(rho_lin) == pytest.approx(1 - p0, rel=1e-14)
    np.testing.assert_allclose(slab_m, e_lin / (1 - p0), rtol=1e-13)
    np.testing.assert_allclose(
        slab_v, c / (1 - p0) - p0 * (e_lin / (1 - p0)) ** 2, rtol=1e-12
    )
    # The identity behind it: eq. 3.4's mean and variance are PBP's linear
    # moments of the inputs' total moments E[z] = rho m, Var z = rho (m^2 + v) - rho^2 m^2.
    e_z, var_z = rho * m, rho * (m * m + v) - rho**2 * m * m
    h_mean, h_var = linear_moments(e_z, var_z, M, V)
    np.testing.assert_allclose(h_mean, e_lin, rtol=1e-13)
    np.testing.assert_allclose(h_var, c, rtol=1e-13)
    # A batch of inputs gives the same rows.
    rho_b = np.stack([rho, rho[::-1]])
    m_b, v_b = np.stack([m, m[::-1]]), np.stack([v, v[::-1]])
    r_b, sm_b, sv_b = spike_slab_linear(rho_b, m_b, v_b, M, V)
    assert r_b.shape == (2,) and sm_b.shape == (2, 3)
    np.testing.assert_allclose(sm_b[0], slab_m, rtol=1e-14)
    np.testing.assert_allclose(sv_b[0], slab_v, rtol=1e-14)


def test_linear_layer_matches_monte_carlo(rng):
    # z_i ~ (1 - rho_i) delta_0 + rho_i N(m_i, v_i), W ~ N(M, V), h = W z; 400k draws.
    # P(h != 0) against rho_lin (binomial standard error), E h and Var h against
    # the total moments, and the moments of h | h != 0 against the projected
    # slab (that is what the KL projection matches, pbp.md §6.2); 5 standard errors.
    rho, m, v, M, V = _linear_case(rng)
    n = 400_000
    on = rng.uniform(size=(n, 6)) < rho
    z = np.where(on, m + np.sqrt(v) * rng.normal(size=(n, 6)), 0.0)
    W = M + np.sqrt(V) * rng.normal(size=(n, 3, 6))
    h = np.einsum("nki,ni->nk", W, z)
    rho_lin, slab_m, slab_v = spike_slab_linear(rho, m, v, M, V)
    total_m, total_v = spike_slab_moments(rho_lin, slab_m, slab_v)
    nonzero = h != 0
    assert np.all(nonzero == on.any(axis=1)[:, None])  # h = 0 exactly iff every z_i = 0
    p_hat = nonzero[:, 0].mean()
    assert 1.0 - float(rho_lin) > 0.05  # a real spike: P(h = 0) = 0.06
    assert_mc_close(rho_lin, p_hat, _bernoulli_se(p_hat, n), what="P(h != 0)")
    mean, var, se_m, se_v = mc_moments(h)
    assert_mc_close(total_m, mean, se_m, what="E h")
    assert_mc_close(total_v, var, se_v, what="Var h")
    mean, var, se_m, se_v = mc_moments(h[nonzero[:, 0]])
    assert_mc_close(slab_m, mean, se_m, what="E[h | h != 0]")
    assert_mc_close(slab_v, var, se_v, what="Var[h | h != 0]")


# ---------------------------------------------------------------------------
# ReLU (pbp.md §6.4)
# ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    "rho, m, v",
    [
        (0.7, 0.3, 1.0),
        (0.4, -2.0, 0.5),  # alpha = -2.83: the slab mostly rectified away
        (0.9, 1.5, 0.2),  # alpha = 3.35: mostly on
        (0.25, -0.2, 3.0),
        (1.0, 0.0, 1.0),  # a Gaussian (PBP's message)
    ],
)
def test_relu_of_spike_and_slab_matches_monte_carlo(rng, rho, m, v):
    # 1e6 draws of ReLU(Z), Z ~ (1 - rho) delta_0 + rho N(m, v): P(ReLU Z != 0)
    # against rho', the moments of ReLU Z | ReLU Z != 0 against the slab (m', v')
    # and the total moments against (rho mu_R, rho Var_R + rho (1 - rho) mu_R^2),
    # the form the SSPBP forward pass uses; 5 standard errors.
    n = 1_000_000
    on = rng.uniform(size=n) < rho
    r = np.maximum(np.where(on, m + math.sqrt(v) * rng.normal(size=n), 0.0), 0.0)
    rho_out, slab_m, slab_v = spike_slab_relu(rho, m, v)
    nonzero = r > 0
    p_hat = nonzero.mean()
    assert_mc_close(rho_out, p_hat, _bernoulli_se(p_hat, n), what="P(ReLU != 0)")
    mean, var, se_m, se_v = mc_moments(r[nonzero])
    assert_mc_close(slab_m, mean, se_m, what="E[ReLU | != 0]")
    assert_mc_close(slab_v, var, se_v, what="Var[ReLU | != 0]")
    parts = rectified_slab(m, v)
    mean, var, se_m, se_v = mc_moments(r)
    assert_mc_close(rho * parts.relu_mean, mean, se_m, what="E ReLU")
    assert_mc_close(
        rho * parts.relu_var + rho * (1 - rho) * parts.relu_mean**2, var, se_v, what="Var ReLU"
    )
    # Closed forms of pbp.md §6.4 at moderate alpha.
    alpha = m / math.sqrt(v)
    gamma = stats.norm.pdf(alpha) / stats.norm.cdf(alpha)
    np.testing.assert_allclose(rho_out, rho * stats.norm.cdf(alpha), rtol=1e-14)
    np.testing.assert_allclose(slab_m, m + math.sqrt(v) * gamma, rtol=1e-13)
    np.testing.assert_allclose(slab_v, v * (1 - gamma * alpha - gamma**2), rtol=1e-12)


def _truncated_reference(alpha):
    """(E[X | X > 0], Var[X | X > 0]) for X ~ N(alpha, 1), by quadrature.

    For alpha < -1 the tail is integrated in the variable w = c X with
    c = -alpha, where the density of X | X > 0 is proportional to
    exp(-w - w^2 / (2 c^2)) on w >= 0 (no underflow for any c):
    E[X | X > 0] = E[w] / c, Var = Var[w] / c^2.  For
    alpha >= -1, scipy's truncnorm (no deep tail involved).
    """
    if alpha >= -1.0:
        mean, var = stats.truncnorm.stats(-alpha, np.inf, loc=alpha, scale=1.0, moments="mv")
        return float(mean), float(var)
    c = -alpha

    def moment(k):
        return integrate.quad(
            lambda w: w**k * math.exp(-w - w * w / (2 * c * c)),
            0,
            np.inf,
            epsabs=0,
            epsrel=1e-13,
            limit=200,
        )[0]

    z, e1, e2 = moment(0), moment(1), moment(2)
    ew = e1 / z
    return ew / c, (e2 / z - ew * ew) / (c * c)


def test_truncated_slab_is_accurate_for_every_alpha():
    # The truncated-normal slab of pbp.md §6.4 for alpha from +45 down to -1e8,
    # across the switch to the asymptotic series at alpha = -15.  Tolerances:
    # 1e-12 for the mean; 2e-11 for the variance, whose closed form
    # 1 - gamma (alpha + gamma) cancels as alpha -> -15 (relative error ~eps
    # alpha^4 ~ 1e-11 there); quadrature is good to ~1e-13.
    alphas = [45.0, 10.0, 2.0, 0.5, 0.0, -0.7, -1.5, -3.0, -8.0, -12.0, -14.9, -15.0]
    alphas += [-15.1, -20.0, -38.0, -60.0, -1e3, -1e5, -1e8]
    for alpha in alphas:
        parts = rectified_slab(alpha, 1.0)
        want_m, want_v = _truncated_reference(alpha)
        np.testing.assert_allclose(parts.trunc_mean, want_m, rtol=1e-12, err_msg=str(alpha))
        np.testing.assert_allclose(parts.trunc_var, want_v, rtol=2e-11, err_msg=str(alpha))
        # Scale invariance: N(alpha s, s^2) gives s times the mean, s^2 the variance.
        scaled = rectified_slab(alpha * 1e-3, 1e-6)
        np.testing.assert_allclose(scaled.trunc_mean, 1e-3 * parts.trunc_mean, rtol=1e-14)
        np.testing.assert_allclose(scaled.trunc_var, 1e-6 * parts.trunc_var, rtol=1e-13)
    # The asymptotics of pbp.md §2.2: gamma ~ -a - 1/a + 2/a^3, so E[X|X>0] ~ -1/a.
    assert float(rectified_slab(-1e200, 1.0).trunc_mean) == pytest.approx(1e-200, rel=1e-15, abs=0)
    assert float(rectified_slab(-1e100, 1.0).trunc_var) == pytest.approx(1e-200, rel=1e-15, abs=0)


def test_rectified_slab_derivative_fields_match_finite_differences():
    # The partial derivatives the SSPBP backward pass uses (pbp.md §3.2):
    # d mu_R/dm = Phi, d mu_R/dv = phi/(2 sigma), d Phi(m/sigma)/dm = phi/sigma,
    # d Phi/dv = cdf_dvar, d E[ReLU^2]/dv = Phi.  Central differences, h = 1e-6:
    # truncation ~h^2 = 1e-12, rounding ~eps / h = 1e-10 (hence atol 1e-9).
    h = 1e-6
    for m, v in [(0.3, 1.0), (-1.7, 0.6), (2.5, 0.4), (-0.05, 2.0)]:
        p = rectified_slab(m, v)

        def at(mm, vv):
            q = rectified_slab(mm, vv)
            return np.array([q.relu_mean, q.cdf, q.relu_var + q.relu_mean**2])

        d_m = (at(m + h, v) - at(m - h, v)) / (2 * h)
        d_v = (at(m, v + h) - at(m, v - h)) / (2 * h)
        np.testing.assert_allclose(d_m[:2], [p.cdf, p.pdf_over_std], rtol=1e-7, atol=1e-9)
        np.testing.assert_allclose(d_m[2], 2 * p.relu_mean, rtol=1e-7, atol=1e-9)
        np.testing.assert_allclose(
            d_v, [0.5 * p.pdf_over_std, p.cdf_dvar, p.cdf], rtol=1e-7, atol=1e-9
        )
        # And the totals are those of core.activations' rectified Gaussian.
        assert float(p.relu_mean) == pytest.approx(p.cdf * p.trunc_mean, rel=1e-15)


def test_extreme_inputs_stay_finite_and_consistent():
    # Every finite input, no floating-point error (overflow, 0/0, division by 0):
    # means and variances from 0 and denormal to 1e300, rho from 0 to 1.
    means = np.array([-1e300, -1e10, -1e3, -40.0, -15.0, -1e-300, 0.0, 1e-300, 40.0, 1e10, 1e300])
    variances = np.array([0.0, 5e-324, 1e-300, 1e-10, 1.0, 1e10, 1e300])
    rhos = np.array([0.0, 1e-300, 0.5, 1.0])
    r, m, v = np.meshgrid(rhos, means, variances, indexing="ij")
    with np.errstate(**_raise_fp):
        rho_out, slab_m, slab_v = spike_slab_relu(r, m, v)
        parts = rectified_slab(m, v)
    for a in (rho_out, slab_m, slab_v) + tuple(parts):
        assert np.all(np.isfinite(a))
    assert np.all((rho_out >= 0) & (rho_out <= r))
    assert np.all(slab_m >= 0) and np.all((slab_v >= 0) & (slab_v <= v))
    assert np.all((parts.relu_var >= 0) & (parts.relu_var <= v))
    # Deterministic slab (v = 0): the ReLU itself.
    det = v == 0
    np.testing.assert_array_equal(slab_m[det], np.maximum(m[det], 0.0))
    np.testing.assert_array_equal(rho_out[det], np.where(m[det] > 0, r[det], 0.0))
    # Very negative alpha: the slab weight underflows to exactly 0.
    assert np.all(rho_out[(m < 0) & (np.abs(m) > 40 * np.sqrt(v))] == 0.0)
    # The linear layer with every input a spike (rho = 0), or tiny rho.
    M, V = np.ones((2, 3)), np.full((2, 3), 0.5)
    with np.errstate(**_raise_fp):
        rl, sm, sv = spike_slab_linear(np.zeros(3), np.zeros(3), np.zeros(3), M, V)
        rl_t, sm_t, sv_t = spike_slab_linear(np.full(3, 1e-300), np.ones(3), np.ones(3), M, V)
    assert float(rl) == 0.0 and np.all(sm == 0) and np.all(sv == 0)
    np.testing.assert_allclose(rl_t, 3e-300, rtol=1e-14)
    np.testing.assert_allclose(sm_t, 1.0, rtol=1e-12)  # E[h | h != 0]: one input on
    assert np.all(np.isfinite(sv_t))


# ---------------------------------------------------------------------------
# namespace
# ---------------------------------------------------------------------------


def test_every_function_stays_in_the_given_namespace(strict_xp, rng):
    xp, asarray = strict_xp
    rho = np.concatenate([rng.uniform(0, 1, size=10), [0.0, 1.0, 1e-300]])
    m = np.concatenate([rng.normal(scale=3, size=10), [-40.0, 0.0, -1e4]])
    v = np.concatenate([rng.uniform(0, 4, size=10), [1.0, 0.0, 1.0]])
    M, V = rng.normal(size=(4, 13)), rng.uniform(0.1, 1, size=(4, 13))

    def same(strict_out, numpy_out):
        strict_out = strict_out if isinstance(strict_out, tuple) else (strict_out,)
        numpy_out = numpy_out if isinstance(numpy_out, tuple) else (numpy_out,)
        assert len(strict_out) == len(numpy_out)
        for a, b in zip(strict_out, numpy_out):
            assert isinstance(a, StrictArray), type(a)
            # The strict norm_pdf is a differently rounded formula.
            np.testing.assert_allclose(asnumpy(a), b, rtol=1e-13, atol=1e-300)

    s_rho, s_m, s_v = asarray(rho), asarray(m), asarray(v)
    same(spike_slab_moments(s_rho, s_m, s_v), spike_slab_moments(rho, m, v))
    e, var = spike_slab_moments(rho, m, v)
    same(spike_slab_project(s_rho, asarray(e), asarray(var)), spike_slab_project(rho, e, var))
    same(slab_probability(s_rho), slab_probability(rho))
    same(slab_probability_grad(s_rho), slab_probability_grad(rho))
    same(
        spike_slab_linear(s_rho, s_m, s_v, asarray(M), asarray(V)),
        spike_slab_linear(rho, m, v, M, V),
    )
    same(tuple(rectified_slab(s_m, s_v)), tuple(rectified_slab(m, v)))
    same(spike_slab_relu(s_rho, s_m, s_v), spike_slab_relu(rho, m, v))
