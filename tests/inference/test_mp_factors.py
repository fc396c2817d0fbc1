"""Message-passing factors against numerical integration (message_passing.md §1, §5, §8).

Every message is checked with the marginal-approximation rule of §1: the moments
of (exact factor) x (incoming Gaussians), integrated numerically (dense grids or
``scipy.integrate.quad``), are moment matched and the incoming message divided
out.  The VMP product messages (§5.2) are checked against their own definition,
``exp(E[log factor])``, also integrated numerically.  Tolerances are stated per
test; grid rules are accurate to ~1e-8 at the spacings used.
"""

import numpy as np
import pytest
from scipy import integrate, stats

from skbayesnn.core.gaussian import moments_to_natural, to_natural
from skbayesnn.inference.message_passing import activation, likelihood, linear


def _message_from_marginal(grid_axes, density, axis_index, tau_in, rho_in):
    """Moment-match the marginal of one grid axis and divide the incoming message out."""
    x = grid_axes[axis_index]
    other = tuple(i for i in range(density.ndim) if i != axis_index)
    marg = density.sum(axis=other) if other else density
    m0 = integrate.trapezoid(marg, x)
    m1 = integrate.trapezoid(marg * x, x)
    m2 = integrate.trapezoid(marg * x * x, x)
    tau, rho, ok = moments_to_natural(m0, m1, m2)
    assert ok
    return float(tau) - tau_in, float(rho) - rho_in


def _npdf(x, m, v):
    return stats.norm.pdf(x, m, np.sqrt(v))


# ----------------------------------------------------------------------------
# first layer (§5.4): exact weighted sum with observed x, 3-D grid over (w1, w2, b)
# ----------------------------------------------------------------------------
def test_first_layer_messages_match_grid_integration(rng):
    n, n_in, n_out = 2, 2, 2
    x = rng.normal(size=(n, n_in))
    w_mean = rng.normal(size=(n, n_out, n_in))
    w_var = rng.uniform(0.2, 1.0, size=(n, n_out, n_in))
    b_mean = rng.normal(size=(n, n_out))
    b_var = rng.uniform(0.2, 1.0, size=(n, n_out))
    z_mean, z_var = linear.first_layer_forward(x, w_mean, w_var, b_mean, b_var)
    tz = rng.normal(size=(n, n_out))
    rz = rng.uniform(0.5, 3.0, size=(n, n_out))
    out = linear.first_layer_backward(x, w_mean, w_var, b_mean, b_var, z_mean, z_var, tz, rz)
    tau_w, rho_w, tau_b, rho_b = out
    for e in range(n):
        for j in range(n_out):
            means = [w_mean[e, j, 0], w_mean[e, j, 1], b_mean[e, j]]
            varis = [w_var[e, j, 0], w_var[e, j, 1], b_var[e, j]]
            axes = [
                np.linspace(m - 7 * np.sqrt(v), m + 7 * np.sqrt(v), 121)
                for m, v in zip(means, varis)
            ]
            W1, W2, B = np.meshgrid(*axes, indexing="ij")
            z = x[e, 0] * W1 + x[e, 1] * W2 + B
            prior = (
                _npdf(W1, means[0], varis[0])
                * _npdf(W2, means[1], varis[1])
                * _npdf(B, means[2], varis[2])
            )
            dens = prior * _npdf(z, tz[e, j] / rz[e, j], 1.0 / rz[e, j])
            # forward message: exact moments of z under the incoming messages
            dz = [a[1] - a[0] for a in axes]
            w = prior * np.prod(dz)
            np.testing.assert_allclose(np.sum(w * z), z_mean[e, j], rtol=1e-6, atol=1e-8)
            np.testing.assert_allclose(np.sum(w * (z - z_mean[e, j]) ** 2), z_var[e, j], rtol=1e-6)
            for idx, (t_got, r_got) in enumerate(
                [
                    (tau_w[e, j, 0], rho_w[e, j, 0]),
                    (tau_w[e, j, 1], rho_w[e, j, 1]),
                    (tau_b[e, j], rho_b[e, j]),
                ]
            ):
                t_in, r_in = to_natural(means[idx], varis[idx])
                t_ref, r_ref = _message_from_marginal(axes, dens, idx, float(t_in), float(r_in))
                np.testing.assert_allclose([t_got, r_got], [t_ref, r_ref], rtol=1e-5, atol=1e-7)


def test_first_layer_zero_input_and_uninformative_message_give_neutral_messages():
    # x_i = 0 (c_d = 0) and rho_z = 0 both give G(0, 0) exactly (§5.1, §8 item 1).
    x = np.array([[0.0, 2.0]])
    w_mean, w_var = np.ones((1, 1, 2)), np.ones((1, 1, 2))
    b_mean, b_var = np.zeros((1, 1)), np.ones((1, 1))
    zm, zv = linear.first_layer_forward(x, w_mean, w_var, b_mean, b_var)
    tw, rw, tb, rb = linear.first_layer_backward(
        x, w_mean, w_var, b_mean, b_var, zm, zv, np.array([[3.0]]), np.array([[2.0]])
    )
    assert tw[0, 0, 0] == 0 and rw[0, 0, 0] == 0 and rw[0, 0, 1] > 0
    tw, rw, tb, rb = linear.first_layer_backward(
        x, w_mean, w_var, b_mean, b_var, zm, zv, np.zeros((1, 1)), np.zeros((1, 1))
    )
    assert np.all(tw == 0) and np.all(rw == 0) and np.all(tb == 0) and np.all(rb == 0)


# ----------------------------------------------------------------------------
# hidden layer (§5.3): exact sum to p_ij, then VMP (§5.2) to W_ij and x_i
# ----------------------------------------------------------------------------
def _fit_log_gaussian(u, log_f):
    """(tau, rho) of exp(log_f) ~ exp(-rho u^2 / 2 + tau u): least-squares quadratic."""
    c2, c1, _ = np.polyfit(u, log_f, 2)
    return c1, -2.0 * c2


def test_hidden_layer_messages_match_numerical_definitions(rng):
    n_in, n_out = 3, 2
    x_mean = rng.normal(size=(1, n_in))
    x_var = rng.uniform(0.2, 1.0, size=(1, n_in))
    w_mean = rng.normal(size=(n_out, n_in))
    w_var = rng.uniform(0.1, 0.5, size=(n_out, n_in))
    b_mean = rng.normal(size=(n_out,))
    b_var = rng.uniform(0.1, 0.5, size=(n_out,))
    zm, zv = linear.hidden_layer_forward(x_mean, x_var, w_mean, w_var, b_mean, b_var)
    tz = rng.normal(size=(1, n_out))
    rz = rng.uniform(0.5, 2.0, size=(1, n_out))
    tw, rw, tb, rb, tx, rx = linear.hidden_layer_backward(
        x_mean, x_var, w_mean, w_var, b_mean, b_var, zm, zv, tz, rz
    )
    # forward: exact mean/variance of sum_i W_ij x_i + b_j for independent factors (MC, 5 SE)
    s = 400_000
    W = w_mean + np.sqrt(w_var) * rng.normal(size=(s, n_out, n_in))
    X = x_mean + np.sqrt(x_var) * rng.normal(size=(s, 1, n_in))
    Z = np.sum(W * X, axis=-1) + b_mean + np.sqrt(b_var) * rng.normal(size=(s, n_out))
    assert np.all(np.abs(Z.mean(0) - zm[0]) < 5 * Z.std(0) / np.sqrt(s))
    assert np.all(np.abs(Z.var(0) - zv[0]) < 5 * np.sqrt(np.var((Z - Z.mean(0)) ** 2, 0) / s))

    gh_x, gh_w = np.polynomial.hermite_e.hermegauss(60)
    gh_w = gh_w / gh_w.sum()
    tx_ref = np.zeros(n_in)
    rx_ref = np.zeros(n_in)
    for j in range(n_out):
        m_z, v_z = tz[0, j] / rz[0, j], 1.0 / rz[0, j]
        e_p = x_mean[0] * w_mean[j]
        v_p = (x_var[0] + x_mean[0] ** 2) * (w_var[j] + w_mean[j] ** 2) - e_p**2
        for i in range(n_in):
            # exact sum message to p: int N(p + r; m_z, v_z) N(r; rest) dr, by quadrature
            r_mean = e_p.sum() - e_p[i] + b_mean[j]
            r_var = v_p.sum() - v_p[i] + b_var[j]
            r = np.linspace(r_mean - 10 * np.sqrt(r_var), r_mean + 10 * np.sqrt(r_var), 4001)

            def log_m_p(p):
                p = np.atleast_1d(p)[:, None]
                f = _npdf(p + r, m_z, v_z) * _npdf(r, r_mean, r_var)
                return np.log(integrate.trapezoid(f, r, axis=1))

            # VMP to W_ij: log m(w) = E_x[log m_p(x w)], x ~ q(x_i) (Gauss-Hermite)
            xs = x_mean[0, i] + np.sqrt(x_var[0, i]) * gh_x
            wg = np.linspace(w_mean[j, i] - 2, w_mean[j, i] + 2, 41)
            lw = np.array([gh_w @ log_m_p(xs * w) for w in wg])
            t_ref, r_ref = _fit_log_gaussian(wg, lw)
            np.testing.assert_allclose(
                [tw[0, j, i], rw[0, j, i]], [t_ref, r_ref], rtol=1e-4, atol=1e-6
            )
            # VMP to x_i from this j: E_W[log m_p(W x)], W ~ q(W_ij)
            ws = w_mean[j, i] + np.sqrt(w_var[j, i]) * gh_x
            xg = np.linspace(x_mean[0, i] - 2, x_mean[0, i] + 2, 41)
            lx = np.array([gh_w @ log_m_p(ws * xx) for xx in xg])
            t_ref, r_ref = _fit_log_gaussian(xg, lx)
            tx_ref[i] += t_ref
            rx_ref[i] += r_ref
        # exact sum message to b_j (2-D: b and the Gaussian rest of the sum)
        rest_m, rest_v = e_p.sum(), v_p.sum()
        bg = np.linspace(b_mean[j] - 8 * np.sqrt(b_var[j]), b_mean[j] + 8 * np.sqrt(b_var[j]), 801)
        rg = np.linspace(rest_m - 8 * np.sqrt(rest_v), rest_m + 8 * np.sqrt(rest_v), 801)
        Bg, Rg = np.meshgrid(bg, rg, indexing="ij")
        dens = _npdf(Bg, b_mean[j], b_var[j]) * _npdf(Rg, rest_m, rest_v) * _npdf(Bg + Rg, m_z, v_z)
        t_in, r_in = to_natural(b_mean[j], b_var[j])
        t_ref, r_ref = _message_from_marginal([bg, rg], dens, 0, float(t_in), float(r_in))
        np.testing.assert_allclose([tb[0, j], rb[0, j]], [t_ref, r_ref], rtol=1e-5, atol=1e-7)
    np.testing.assert_allclose(tx[0], tx_ref, rtol=1e-4, atol=1e-6)
    np.testing.assert_allclose(rx[0], rx_ref, rtol=1e-4, atol=1e-6)


def test_hidden_layer_input_messages_have_precision_floor():
    # rho_z = 0: no information flows; the message to x is floored to G(0, 1e-8) (§8 item 3).
    x_mean, x_var = np.ones((1, 2)), np.ones((1, 2))
    w = np.ones((1, 2))
    zm, zv = linear.hidden_layer_forward(x_mean, x_var, w, w, np.zeros(1), np.ones(1))
    out = linear.hidden_layer_backward(
        x_mean, x_var, w, w, np.zeros(1), np.ones(1), zm, zv, np.zeros((1, 1)), np.zeros((1, 1))
    )
    tx, rx = out[4], out[5]
    np.testing.assert_array_equal(rx, 1e-8)
    np.testing.assert_array_equal(tx, 0.0)
    assert np.all(out[1] == 0) and np.all(out[3] == 0)


# ----------------------------------------------------------------------------
# (leaky) ReLU (§5.6): marginal approximations against quad
# ----------------------------------------------------------------------------
def _lrelu(z, alpha):
    return np.where(z > 0, z, alpha * z)


def _quad_moments(f, lo, hi):
    return [
        integrate.quad(lambda z, k=k: z**k * f(z), lo, 0.0, epsabs=0, epsrel=1e-12, limit=200)[0]
        + integrate.quad(lambda z, k=k: z**k * f(z), 0.0, hi, epsabs=0, epsrel=1e-12, limit=200)[0]
        for k in range(3)
    ]


_RELU_CASES = [
    # (mu_z, var_z, mu_a, var_a)
    (0.3, 1.0, 0.5, 0.5),
    (-1.0, 2.0, 0.2, 0.1),
    (2.0, 0.5, -0.5, 1.0),
    (-0.5, 1.5, -1.0, 0.3),
    (1.0, 3.0, 3.0, 2.0),
]


@pytest.mark.parametrize("alpha", [0.0, 0.1, 0.5])
@pytest.mark.parametrize("case", _RELU_CASES)
def test_leaky_relu_backward_matches_quadrature(alpha, case):
    mz, vz, ma, va = case
    tau_a, rho_a = ma / va, 1.0 / va
    tau, rho = activation.leaky_relu_backward(
        np.array([mz]), np.array([vz]), np.array([tau_a]), np.array([rho_a]), alpha
    )
    sz = np.sqrt(vz)

    def tilted(z):  # N(z; mu_z, s2_z) N(phi(z); mu_a, s2_a), the exact factor integrated over a
        return _npdf(z, mz, vz) * _npdf(_lrelu(z, alpha), ma, va)

    m0, m1, m2 = _quad_moments(tilted, mz - 30 * sz, mz + 30 * sz)
    t_m, r_m, _ = moments_to_natural(m0, m1, m2)
    ref = (float(t_m) - mz / vz, float(r_m) - 1.0 / vz)
    if ref[1] >= 1e-8:  # otherwise the guard of §5.6 (c) applies (tested below)
        np.testing.assert_allclose([tau[0], rho[0]], ref, rtol=1e-7, atol=1e-10)


@pytest.mark.parametrize("alpha", [0.0, 0.1, 0.5])
@pytest.mark.parametrize("case", _RELU_CASES)
def test_leaky_relu_forward_matches_quadrature(alpha, case):
    mz, vz, ma, va = case
    mean, var, used = activation.leaky_relu_forward(
        np.array([mz]), np.array([vz]), np.array([ma / va]), np.array([1.0 / va]), alpha
    )
    sz = np.sqrt(vz)
    # moments of a under N(z) N(phi(z); a-message): int phi(z)^k N(z) N(phi(z)) dz
    w = [
        integrate.quad(
            lambda z, k=k: (
                _lrelu(z, alpha) ** k * _npdf(z, mz, vz) * _npdf(_lrelu(z, alpha), ma, va)
            ),
            a,
            b,
            epsabs=0,
            epsrel=1e-12,
            limit=200,
        )[0]
        for k in range(3)
        for a, b in [(mz - 30 * sz, 0.0), (0.0, mz + 30 * sz)]
    ]
    m0, m1, m2 = w[0] + w[1], w[2] + w[3], w[4] + w[5]
    t_m, r_m, _ = moments_to_natural(m0, m1, m2)
    r_msg = float(r_m) - 1.0 / va
    accept_ref = m0 > 1e-8 and float(r_m) >= 1.0 / vz + 1.0 / va
    assert bool(used[0]) == accept_ref
    if accept_ref:
        t_msg = float(t_m) - ma / va
        np.testing.assert_allclose([mean[0], var[0]], [t_msg / r_msg, 1.0 / r_msg], rtol=1e-7)
    else:  # fallback: the direct moments of phi(Z), checked by quad
        d = _quad_moments(lambda z: _npdf(z, mz, vz), mz - 30 * sz, mz + 30 * sz)
        e1 = integrate.quad(lambda z: _lrelu(z, alpha) * _npdf(z, mz, vz), -np.inf, np.inf)[0]
        e2 = integrate.quad(lambda z: _lrelu(z, alpha) ** 2 * _npdf(z, mz, vz), -np.inf, np.inf)[0]
        assert abs(d[0] - 1) < 1e-9
        np.testing.assert_allclose([mean[0], var[0]], [e1, e2 - e1**2], rtol=1e-7, atol=1e-12)


def test_leaky_relu_first_pass_uses_direct_forward_and_neutral_backward():
    z_mean, z_var = np.array([0.4, -2.0]), np.array([1.0, 0.5])
    zero = np.zeros(2)
    mean, var, used = activation.leaky_relu_forward(z_mean, z_var, zero, zero, 0.1)
    d_mean, d_var = activation.leaky_relu_forward_direct(z_mean, z_var, 0.1)
    assert not np.any(used)
    np.testing.assert_array_equal(mean, d_mean)
    np.testing.assert_array_equal(var, d_var)
    tau, rho = activation.leaky_relu_backward(z_mean, z_var, zero, zero, 0.1)
    # G(0, 0), floored: G(0, 1e-8) (§5.6 (c) guards, §8 item 3)
    np.testing.assert_array_equal(tau, 0.0)
    np.testing.assert_array_equal(rho, 1e-8)
    # tau_a < 0 with rho_a < 2e-8: also the neutral message
    tau, rho = activation.leaky_relu_backward(
        z_mean, z_var, -np.ones(2) * 1e-9, np.ones(2) * 1e-8, 0.1
    )
    np.testing.assert_array_equal(rho, 1e-8)


@pytest.mark.parametrize("alpha", [0.0, 0.1])
def test_leaky_relu_extreme_inputs_finite_with_floored_precision(alpha):
    vals = np.array([-1e8, -1e3, -40.0, 0.0, 40.0, 1e3, 1e8])
    mz, ma = np.meshgrid(vals, vals, indexing="ij")
    for vz in [1e-10, 1.0, 1e10]:
        for va in [1e-10, 1.0, 1e10]:
            args = (mz, np.full_like(mz, vz), ma / va, np.full_like(ma, 1.0 / va), alpha)
            with np.errstate(all="ignore"):
                tau, rho = activation.leaky_relu_backward(*args)
                mean, var, _ = activation.leaky_relu_forward(*args)
            assert np.all(np.isfinite(tau)) and np.all(rho >= 1e-8) and np.all(np.isfinite(rho))
            assert np.all(np.isfinite(mean)) and np.all(var > 0) and np.all(np.isfinite(var))


# ----------------------------------------------------------------------------
# output factors (§5.8-5.11)
# ----------------------------------------------------------------------------
def test_argmax_two_classes_matches_exact_pairwise_factor():
    # K = 2: the argmax factor with pairwise noise s^2 is Phi((a_c - a_i) / s);
    # the message to a_c is then the exact marginal approximation (2-D grid).
    mean = np.array([[0.3, 0.8]])
    var = np.array([[1.2, 0.7]])
    s2 = likelihood.ARGMAX_NOISE
    tau, rho = likelihood.argmax_backward(mean, var, np.array([0]))
    ac = np.linspace(mean[0, 0] - 9 * np.sqrt(var[0, 0]), mean[0, 0] + 9 * np.sqrt(var[0, 0]), 1201)
    ai = np.linspace(mean[0, 1] - 9 * np.sqrt(var[0, 1]), mean[0, 1] + 9 * np.sqrt(var[0, 1]), 1201)
    A, B = np.meshgrid(ac, ai, indexing="ij")
    dens = (
        _npdf(A, mean[0, 0], var[0, 0])
        * _npdf(B, mean[0, 1], var[0, 1])
        * stats.norm.cdf((A - B) / np.sqrt(s2))
    )
    t_in, r_in = to_natural(mean[0], var[0])
    t_c, r_c = _message_from_marginal([ac, ai], dens, 0, t_in[0], r_in[0])
    np.testing.assert_allclose([tau[0, 0], rho[0, 0]], [t_c, r_c], rtol=1e-6)
    # to a_i: the exact message, precision scaled by P(a_c >= a_i) (§5.11 step 4, §14 item 5)
    t_i, r_i = _message_from_marginal([ac, ai], dens, 1, t_in[1], r_in[1])
    sat = stats.norm.cdf((mean[0, 0] - mean[0, 1]) / np.sqrt(var[0].sum() + s2))
    np.testing.assert_allclose([tau[0, 1], rho[0, 1]], [t_i * sat, r_i * sat], rtol=1e-6)
    # predictive: exact for K = 2
    p = likelihood.argmax_proba(mean, var)
    np.testing.assert_allclose(p[0, 0], sat, rtol=1e-12)
    # regularisation multiplies by N(a; +-1, gamma^2)
    tau_r, rho_r = likelihood.argmax_backward(mean, var, np.array([0]), regularize=True)
    g2 = likelihood.ARGMAX_REG_VAR
    np.testing.assert_allclose(tau_r - tau, [[1 / g2, -1 / g2]])
    np.testing.assert_allclose(rho_r - rho, [[1 / g2, 1 / g2]])


def test_argmax_messages_never_negative_and_label_gets_pushed_up(rng):
    mean = rng.normal(scale=5, size=(200, 4))
    var = rng.uniform(1e-6, 10, size=(200, 4))
    labels = rng.integers(0, 4, size=200)
    tau, rho = likelihood.argmax_backward(mean, var, labels)
    assert np.all(np.isfinite(tau)) and np.all(rho >= 0)
    # the message to the label logit has mean above its forward mean (it must win)
    c = np.arange(200)
    pos = rho[c, labels] > 1e-3
    assert np.all(tau[c, labels][pos] / rho[c, labels][pos] > mean[c, labels][pos] - 1e-9)


def test_softmax_backward_matches_quadrature_of_the_probit_integrand():
    mean = np.array([[0.5, -0.3, 1.2], [4.0, -6.0, 0.0]])
    var = np.array([[1.0, 0.5, 2.0], [30.0, 0.1, 400.0]])
    labels = np.array([2, 0])
    tau, rho = likelihood.softmax_backward(mean, var, labels)
    t = mean / np.sqrt(1 + np.pi * var / 8)
    for e in range(2):
        for d in range(3):

            def g(a, e=e, d=d):
                tt = t[e].copy()
                tt[d] = a
                return np.exp(tt[labels[e]] - np.logaddexp.reduce(tt))

            s = np.sqrt(var[e, d])
            f = lambda a, e=e, d=d: _npdf(a, mean[e, d], var[e, d]) * g(a)  # noqa: E731
            pts = [mean[e, d], np.log(np.exp(np.delete(t[e], d)).sum())]
            lo, hi = mean[e, d] - 12 * s, mean[e, d] + 12 * s
            pts = sorted(p for p in pts if lo < p < hi)
            m = [
                integrate.quad(
                    lambda a, k=k: (a - mean[e, d]) ** k * f(a),
                    lo,
                    hi,
                    points=pts,
                    limit=400,
                    epsabs=0,
                    epsrel=1e-9,
                )[0]
                for k in range(3)
            ]
            t_m, r_m, _ = moments_to_natural(*m)
            t_m = float(t_m) + float(r_m) * mean[e, d]
            ref = (t_m - mean[e, d] / var[e, d], float(r_m) - 1 / var[e, d])
            # The engine integrates on a grid (§5.10): to 1e-13 on the first row;
            # on the second (variances up to 400) its spacing of ~0.8 sd leaves
            # up to 2e-4.
            rtol, atol = (1e-8, 1e-12) if e == 0 else (5e-4, 1e-6)
            np.testing.assert_allclose([tau[e, d], rho[e, d]], ref, rtol=rtol, atol=atol)


def test_softmax_proba_uses_the_square_root_probit():
    # §14 item 3: t = mu / sqrt(1 + pi s2 / 8)
    mean = np.array([[1.0, 0.0, -0.5]])
    var = np.array([[4.0, 1.0, 2.0]])
    p = likelihood.softmax_proba(mean, var)
    t = mean / np.sqrt(1.0 + np.pi * var / 8.0)
    np.testing.assert_allclose(p, np.exp(t) / np.exp(t).sum(axis=1, keepdims=True), rtol=1e-12)
    # the note's worked values (§14 item 3), to their printed precision
    np.testing.assert_allclose(p, [[0.525, 0.281, 0.194]], atol=2e-3)


def test_regression_message_is_the_likelihood():
    y = np.array([[1.0, -2.0]])
    tau, rho = likelihood.regression_backward(y, 0.25)
    np.testing.assert_allclose(tau, y / 0.25)
    np.testing.assert_allclose(rho, 4.0)


def test_factors_run_in_the_strict_namespace(strict_xp):
    # Every factor through the strict stand-in for CuPy (no direct NumPy call
    # on a device array) gives the NumPy results, output by output.
    xp, asarray = strict_xp
    rng = np.random.default_rng(0)
    data = dict(
        x=rng.normal(size=(2, 3)), xv=rng.uniform(0.1, 1, size=(2, 3)),
        wm=rng.normal(size=(4, 3)), wv=rng.uniform(0.1, 1, size=(4, 3)),
        bm=np.zeros(4), bv=np.ones(4), tz=rng.normal(size=(2, 4)), rz=np.ones((2, 4)),
        labels=np.array([0, 3]),
    )

    def run(a):
        x, xv, wm, wv, bm, bv, tz, rz, labels = (a[k] for k in data)
        zm, zv = linear.hidden_layer_forward(x, xv, wm, wv, bm, bv)
        out = [zm, zv]
        out += linear.hidden_layer_backward(x, xv, wm, wv, bm, bv, zm, zv, tz, rz)
        out += linear.first_layer_backward(
            x, wm[None] + 0 * x[:, None, :1], wv[None] + 0 * x[:, None, :1], bm, bv, zm, zv,
            tz, rz,
        )
        out += activation.leaky_relu_backward(zm, zv, tz, rz, 0.1)
        out += activation.leaky_relu_forward(zm, zv, tz, rz, 0.1)
        out += likelihood.argmax_backward(zm, zv, labels, regularize=True)
        out.append(likelihood.argmax_proba(zm, zv))
        out += likelihood.softmax_backward(zm, zv, labels)
        out.append(likelihood.softmax_proba(zm, zv))
        out += likelihood.regression_backward(zm, 0.5)
        return out

    strict = run({k: asarray(v) for k, v in data.items()})
    reference = run(data)
    assert len(strict) == len(reference)
    for s_out, ref in zip(strict, reference):
        assert type(s_out).__name__ == "StrictArray"
        np.testing.assert_allclose(np.asarray(s_out), ref, rtol=1e-12, atol=1e-300)


@pytest.mark.parametrize("alpha", [0.0, 0.1])
def test_leaky_forward_is_warning_free_over_a_wide_sweep(alpha):
    # A ReLU deep in its flat part has a marginal whose variance has no finite
    # reciprocal: it is rejected for the direct message (as the kernel does)
    # without an overflow warning on the array path (CuPy's path).
    import warnings

    from skbayesnn.inference.message_passing import kernel

    r = np.random.default_rng(0)
    n = 20000
    z_mean = r.uniform(-300, 5, n)
    z_var = 10 ** r.uniform(-3, 3, n)
    tau_a = r.normal(size=n) * 10 ** r.uniform(-3, 3, n)
    rho_a = 10 ** r.uniform(-4, 4, n)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        mean, var, accepted = activation.leaky_relu_forward(z_mean, z_var, tau_a, rho_a, alpha)
    assert np.all(np.isfinite(mean)) and np.all(var > 0)
    ref = np.array([kernel._leaky_forward(*args, alpha)
                    for args in zip(z_mean[:2000], z_var[:2000], tau_a[:2000], rho_a[:2000])])
    np.testing.assert_array_equal(accepted[:2000], ref[:, 2].astype(bool))
    np.testing.assert_allclose(mean[:2000], ref[:, 0], rtol=1e-9, atol=1e-300)


def test_leaky_relu_forward_accepts_the_exact_tie_of_a_wholly_positive_unit(rng):
    # Where z lies wholly above 0 the tilted density is the product of the two
    # Gaussians, so the marginal's precision equals rho_z + rho_a exactly and
    # the message is z's own forward message.  The guard rho_m >= rho_z + rho_a
    # was decided by rounding there: 69% fell back to the direct message.
    z_mean = rng.uniform(2.0, 5.0, size=500)
    z_var = rng.uniform(1e-3, 1e-2, size=500)
    a_mean = z_mean + rng.normal(size=500) * np.sqrt(z_var)
    a_var = rng.uniform(1e-3, 1e-1, size=500)
    tau_a, rho_a = to_natural(a_mean, a_var)
    mean, var, used = activation.leaky_relu_forward(z_mean, z_var, tau_a, rho_a, 0.1)
    assert np.all(used)
    np.testing.assert_allclose(mean, z_mean, rtol=1e-9)
    np.testing.assert_allclose(var, z_var, rtol=1e-9)


def test_leaky_relu_forward_is_never_broader_than_z_at_extreme_precision_ratios(rng):
    # A tolerance relative to rho_z + rho_a let a message through whose
    # precision rho_m - rho_a was rounding noise when rho_a >> rho_z (variance
    # 1024 and mean 6.5 for z's N(0.03, 4.96), rho_a / rho_z = 2e12).  Within the
    # tie band the message is now z's own; beyond it, the direct fallback.
    z_mean, z_var = rng.uniform(-1.0, 3.0, size=2000), rng.uniform(0.1, 5.0, size=2000)
    ratio = 10.0 ** rng.uniform(2.0, 13.0, size=2000)
    rho_a = ratio / z_var
    a_mean = np.abs(z_mean) + 8.0 / np.sqrt(rho_a) + rng.uniform(0.0, 2.0, size=2000)
    mean, var, used = activation.leaky_relu_forward(z_mean, z_var, a_mean * rho_a, rho_a, 0.1)
    assert np.all(var[used] <= z_var[used] * (1 + 1e-9))
    case = [np.array([v]) for v in (0.03161243920640686, 4.960950789133827, 4965508.802237666,
                                    389547937033.7841)]
    mean, var, used = activation.leaky_relu_forward(*case, 0.1)
    assert var[0] < 5.0 and (not used[0] or abs(mean[0] - 0.0316) < 1e-6)


def test_softmax_message_to_a_hopeless_label_logit_is_a_tilt():
    # A label logit far below the others (label probability 1e-7 to 1e-10):
    # softmax_c ~ exp(a_c - kappa), which tilts a_c's Gaussian by exp(a), a
    # push of one variance with (next to) no precision: natural mean 1.  The
    # quadrature puts the precision change just above or below 0, and the
    # guard's neutral G(0, 0) dropped the push for mu_c = -9, -10, -14; the
    # safe division of §1 clamps the precision only.  Both paths agree.
    from skbayesnn.inference.message_passing import kernel

    for mu_c in (-8.0, -9.0, -10.0, -11.0, -14.0):
        mean = np.array([[mu_c, 10.0, 0.0]])
        var = np.ones((1, 3))
        tau, rho = likelihood.softmax_backward(mean, var, np.array([0]))
        k_tau, k_rho = np.empty(3), np.empty(3)
        kernel._softmax_backward(mean[0], var[0], 0, np.linspace(0.0, 1.0, 401), 8.0, 1e-12,
                                 k_tau, k_rho, kernel.output_workspace(3, 401))
        assert abs(tau[0, 0] - 1.0) < 0.01 and 0.0 <= rho[0, 0] < 1e-4
        np.testing.assert_allclose(k_tau, tau[0], rtol=1e-6, atol=1e-9)
        np.testing.assert_allclose(k_rho, rho[0], rtol=1e-6, atol=1e-9)


def test_kernel_softmax_messages_equal_the_array_function():
    # The compiled softmax factor (§5.10) evaluates the integrand with the
    # kernel's arithmetic exp and without logaddexp's log, and sums the
    # trapezoids in another order; on logits from tied to 60 apart, variances
    # from 1e-4 to 1e3 and 2 to 40 classes its messages equal the array
    # function's to rounding (relative to the natural parameters they are the
    # difference of).
    from skbayesnn.inference.message_passing import kernel

    rng = np.random.default_rng(0)
    u = np.linspace(0.0, 1.0, 401)
    checked, worst = 0, 0.0
    for k in (2, 3, 10, 40):
        for _ in range(12):
            mean = rng.normal(size=(1, k)) * rng.choice([0.1, 3.0, 20.0])
            var = np.exp(rng.uniform(np.log(1e-4), np.log(1e3), size=(1, k)))
            label = rng.integers(k)
            tau, rho = likelihood.softmax_backward(mean, var, np.array([label]))
            k_tau, k_rho = np.empty(k), np.empty(k)
            kernel._softmax_backward(mean[0], var[0], label, u, 8.0, 1e-12, k_tau, k_rho,
                                     kernel.output_workspace(k, u.size))
            # (the message is marginal / forward message: a difference of
            # natural parameters of the size of (|mean| + 1) / var, rounded)
            scale = (np.abs(mean[0]) + 1.0) / var[0]
            for ours, ref in ((k_tau, tau[0]), (k_rho, rho[0])):
                err = np.abs(ours - ref) / (1e-10 * np.abs(ref) + 1e-12 * scale)
                worst = max(worst, np.max(err))
            checked += np.count_nonzero(rho)
    assert worst <= 1.0  # within rtol 1e-10, atol 1e-12 of that size
    assert checked > 500  # informative messages, not just the guards' zeros


def test_argmax_message_to_the_label_logit_is_overconfident_with_many_classes():
    # The MessagePassingClassifier Notes: K tied logits N(0, 1), noise 0.3, no
    # regulariser.  Given a_c the K - 1 comparisons are independent, so the
    # exact tilted marginal of a_c is N(a) Phi(a / sqrt(1.3))^(K-1), a 1-D
    # integral; the product of K - 1 pairwise messages from one cavity is
    # exact for K = 2 and over-confident beyond (1.77 / 1.66, 4.4 / 2.7,
    # 19.8 / 4.5 for K = 3, 10, 50).
    from scipy.integrate import trapezoid
    from scipy.stats import norm

    a = np.linspace(-12, 12, 200001)
    for K, ours, exact in ((2, 1.383, 1.383), (3, 1.77, 1.66), (10, 4.4, 2.7), (50, 19.8, 4.5)):
        tau, rho = likelihood.argmax_backward(np.zeros((1, K)), np.ones((1, K)), np.array([0]),
                                              noise_var=0.3, regularize=False)
        dens = norm.pdf(a) * norm.cdf(a / np.sqrt(1.3)) ** (K - 1)
        m0 = trapezoid(dens, a)
        mu = trapezoid(a * dens, a) / m0
        precision = 1.0 / (trapezoid(a * a * dens, a) / m0 - mu**2)
        assert round(rho[0, 0] + 1.0, 3 if K == 2 else 2 - (K >= 10)) == ours
        assert round(precision, 3 if K == 2 else 2 - (K >= 10)) == exact
