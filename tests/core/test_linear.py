"""linear_moments against Monte Carlo and closed forms."""

import numpy as np
import pytest

from skbayesnn._testing import assert_mc_close, mc_moments
from skbayesnn.core.linear import linear_moments


def _mc_layer(rng, a_mean, a_var, wm, wv, bm, bv, n=100_000):
    # h = W a + b with everything independent; one draw of (a, W, b) per sample.
    d_in = a_mean.shape[-1]
    a = a_mean + np.sqrt(a_var) * rng.standard_normal((n, d_in))
    W = wm + np.sqrt(wv) * rng.standard_normal((n,) + wm.shape)
    b = bm + np.sqrt(bv) * rng.standard_normal((n,) + bm.shape)
    return np.einsum("ski,si->sk", W, a) + b


@pytest.mark.parametrize("input_var", [0.0, 1e-8, 0.3, 1e4])
@pytest.mark.parametrize("mean_scale", [1.0, 40.0])
@pytest.mark.parametrize("weight_var", [1e-8, 0.3, 1e4])
def test_linear_moments_match_monte_carlo(rng, input_var, mean_scale, weight_var):
    # Grid over means of +-40 and tiny/huge variances of inputs and weights.
    wm = rng.normal(size=(3, 4)) * mean_scale
    wv = weight_var * rng.uniform(0.5, 1.5, size=(3, 4))
    bm, bv = rng.normal(size=3) * mean_scale, weight_var * rng.uniform(0.0, 1.0, size=3)
    a_mean = rng.normal(size=4) * mean_scale
    a_var = np.full(4, input_var)
    mean, var = linear_moments(a_mean[None], a_var[None] if input_var else None, wm, wv, bm, bv)
    samples = _mc_layer(rng, a_mean, a_var, wm, wv, bm, bv)
    mc_mean, mc_var, se_m, se_v = mc_moments(samples)
    assert_mc_close(mean[0], mc_mean, se_m, what="mean")
    assert_mc_close(var[0], mc_var, se_v, what="var")


def test_linear_moments_closed_form_and_extremes():
    # One unit, one input: Var(w a) = vw va + vw ma^2 + va mw^2 (tagi.md §2).
    ma, va, mw, vw = 40.0, 1e-6, -40.0, 1e4
    mean, var = linear_moments(
        np.array([[ma]]), np.array([[va]]), np.array([[mw]]), np.array([[vw]])
    )
    assert mean[0, 0] == ma * mw
    np.testing.assert_allclose(var[0, 0], vw * va + vw * ma**2 + va * mw**2, rtol=1e-14)
    # Huge and tiny magnitudes stay finite and non-negative.
    rng = np.random.default_rng(1)
    for scale in (1e-150, 1e-8, 1.0, 1e8, 1e100):
        m, v = linear_moments(
            rng.normal(size=(5, 6)) * scale,
            rng.uniform(size=(5, 6)) * scale,
            rng.normal(size=(2, 6)),
            rng.uniform(size=(2, 6)),
            rng.normal(size=2),
            rng.uniform(size=2),
        )
        assert np.all(np.isfinite(m)) and np.all(np.isfinite(v)) and np.all(v >= 0)


def test_linear_moments_strict_namespace(strict_xp, rng):
    xp, asarray = strict_xp
    args = [
        rng.normal(size=(5, 4)),
        rng.uniform(size=(5, 4)),
        rng.normal(size=(3, 4)),
        rng.uniform(size=(3, 4)),
        rng.normal(size=3),
        rng.uniform(size=3),
    ]
    m_ref, v_ref = linear_moments(*args)
    m, v = linear_moments(*[asarray(a) for a in args])
    assert type(m).__name__ == "StrictArray" and type(v).__name__ == "StrictArray"
    np.testing.assert_allclose(np.asarray(m), m_ref, rtol=1e-14)
    np.testing.assert_allclose(np.asarray(v), v_ref, rtol=1e-14)


@pytest.mark.parametrize("deterministic_input", [False, True])
def test_linear_moments_vjp_matches_finite_differences(rng, deterministic_input):
    # F = sum(c_m * h_mean + c_v * h_var) for fixed random weights c, so
    # dF/dh = c; central differences of F in every parameter, step 1e-6
    # (F is quadratic in M and the input mean, so only rounding remains).
    from skbayesnn.core.linear import linear_moments_vjp

    a_mean, wm = rng.normal(size=(3, 4)), rng.normal(size=(2, 4))
    a_var = None if deterministic_input else rng.uniform(0.1, 1.0, size=(3, 4))
    wv = rng.uniform(0.1, 1.0, size=(2, 4))
    c_m, c_v = rng.normal(size=(3, 2)), rng.normal(size=(3, 2))

    def F(am, av, m, v):
        h_m, h_v = linear_moments(am, av, m, v)
        return np.sum(c_m * h_m + c_v * h_v)

    g_wm, g_wv, g_am, g_av = linear_moments_vjp(a_mean, a_var, wm, wv, c_m, c_v)
    args = [a_mean, a_var, wm, wv]
    # Weight gradients are per point: their sums over points are dF/dW.
    for k, (got, arg) in enumerate(
        [(g_am, 0), (g_av, 1), (g_wm.sum(axis=0), 2), (g_wv.sum(axis=0), 3)]
    ):
        if args[arg] is None:
            continue
        fd = np.zeros_like(args[arg])
        for idx in np.ndindex(fd.shape):
            plus = [a.copy() if a is not None else None for a in args]
            minus = [a.copy() if a is not None else None for a in args]
            plus[arg][idx] += 1e-6
            minus[arg][idx] -= 1e-6
            fd[idx] = (F(*plus) - F(*minus)) / 2e-6
        np.testing.assert_allclose(got, fd, rtol=1e-7, atol=1e-8, err_msg=str(k))
    # Point b's weight gradient only involves point b.
    one = linear_moments_vjp(a_mean[1:2], None if a_var is None else a_var[1:2], wm, wv,
                             c_m[1:2], c_v[1:2], input_grads=False)  # fmt: skip
    np.testing.assert_allclose(one[0][0], g_wm[1], rtol=1e-15)
    np.testing.assert_allclose(one[1][0], g_wv[1], rtol=1e-15)
