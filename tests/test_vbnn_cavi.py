"""CAVI for VBNN: every block update is a block maximiser of the ELBO (vbnn.md §4-§6),
the closed-form predictive matches Monte Carlo from q (vbnn.md §10), and the
numerical guards hold."""

import copy

import numpy as np
import pytest

from skbayesnn.inference.vbnn import cavi, predict, svi
from skbayesnn.inference.vbnn.shrinkage import ShrinkagePrior


def _problem(seed, n=50, p=3, n_out=1):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, p))
    Y = np.sin(X[:, :1]) + 0.3 * X[:, 1:2] + 0.1 * rng.normal(size=(n, 1))
    if n_out > 1:
        Y = np.column_stack([Y[:, 0], X[:, 0] * X[:, 1] + 0.1 * rng.normal(size=n)])
    return X, (Y - Y.mean(0)) / Y.std(0)


def _state(X, Y, hidden, family, temperature, seed=1):
    sizes = [X.shape[1], *hidden, Y.shape[1]]
    prior = ShrinkagePrior.build(family, [(sizes[j + 1], sizes[j]) for j in range(len(sizes) - 1)])
    return cavi.initialize(
        X,
        Y,
        hidden,
        prior=prior,
        temperature=temperature,
        bias_var=1.0,
        alpha0=2.0,
        beta0=0.1,
        alpha0_hidden=2.0,
        beta0_hidden=0.01,
        rng=np.random.default_rng(seed),
    )


@pytest.mark.parametrize("family", ["student_t", "laplace", "nig", "gaussian"])
@pytest.mark.parametrize("hidden", [(5,), (4, 3)])
@pytest.mark.parametrize("temperature", [0.3, 0.05])
def test_no_block_update_decreases_the_elbo(family, hidden, temperature):
    # Every block of Algorithm 1, the EM step included, over several iterations
    # from random starts (vbnn.md §17).  The first sweep sets q(tau), q(psi) from
    # their prior-moment start, after which the ELBO is the exact bound.
    for seed in range(2):
        X, Y = _problem(seed, n_out=2 if seed else 1)
        state = _state(X, Y, hidden, family, temperature, seed)
        cavi.cavi_sweep(state, Y)
        values, names = [cavi.elbo(state, Y)], ["start"]

        def record(name):
            values.append(cavi.elbo(state, Y))
            names.append(name)

        for _ in range(5):
            cavi.cavi_sweep(state, Y, on_block=record)
        steps = np.diff(values)
        assert np.all(np.isfinite(values))
        worst = int(np.argmin(steps))
        assert steps[worst] >= -1e-9 * abs(values[worst]), names[worst + 1]
        assert values[-1] > values[0]


def _perturbed_elbos(state, Y, X, attr, layer, scale, rng, n=8, refresh=False):
    base = cavi.elbo(state, Y)
    gains = []
    for _ in range(n):
        other = copy.deepcopy(state)
        arr = getattr(other, attr)
        arr[layer] = arr[layer] + scale * rng.normal(size=arr[layer].shape)
        if refresh:
            cavi.forward_moments(other, X)
        gains.append(cavi.elbo(other, Y) - base)
    return np.array(gains)


def test_updates_are_stationary_points(rng):
    # Right after a block update, small perturbations of that block never raise
    # the ELBO (each update is the block maximiser, not just an ascent step).
    X, Y = _problem(3)
    state = _state(X, Y, (4, 3), "student_t", 0.2)
    for _ in range(3):
        cavi.cavi_sweep(state, Y)
    cavi.update_weights(state, 1, Y)
    assert np.all(_perturbed_elbos(state, Y, X, "m", 1, 1e-3, rng) < 0)
    cavi.update_weights(state, 2, Y)
    assert np.all(_perturbed_elbos(state, Y, X, "m", 2, 1e-3, rng) < 0)
    cavi.update_noise(state, 0, Y)
    assert np.all(_perturbed_elbos(state, Y, X, "beta", 0, 1e-4, rng) < 0)
    cavi.update_activations(state, Y)
    assert np.all(_perturbed_elbos(state, Y, X, "t", 0, 1e-3, rng, refresh=True) < 0)
    assert np.all(_perturbed_elbos(state, Y, X, "t", 1, 1e-3, rng, refresh=True) < 0)
    cavi.update_rho(state, 1)
    assert np.all(_perturbed_elbos(state, Y, X, "rho", 1, 1e-4, rng) < 0)
    cavi.update_pg(state, 0)
    assert np.all(_perturbed_elbos(state, Y, X, "A", 0, 1e-3, rng) < 0)


def test_exact_hidden_noise_update_beats_the_papers_form():
    # The paper's hidden beta drops Cov(a_{l-1}, a_{l,d}) (vbnn.md §16.1): for the
    # second hidden layer it is not the block optimum, so its ELBO is lower.
    X, Y = _problem(4)
    state = _state(X, Y, (4, 3), "student_t", 0.3)
    for _ in range(4):
        cavi.cavi_sweep(state, Y)
    j = 1
    cavi.update_noise(state, j, Y)
    exact = cavi.elbo(state, Y)
    mu, _, C, Ez, Ez2 = cavi.layer_statistics(state, j)
    Ea = state.Ea[j + 1]
    Ea2 = np.diagonal(state.Eaa[j + 1], axis1=-2, axis2=-1)
    rho = state.rho[j]
    paper_resid = Ea2 - 2.0 * rho * Ez * Ea + rho * Ez2  # m^T E[a~] E[a] for m^T E[a a~]
    paper = copy.deepcopy(state)
    paper.beta[j] = state.beta0[j] + 0.5 * paper_resid.sum(axis=0)
    assert not np.allclose(paper.beta[j], state.beta[j], rtol=1e-3)
    assert cavi.elbo(paper, Y) < exact
    # For the first hidden layer (a_0 = x fixed) the two forms coincide.
    mu0, _, _, Ez0, Ez20 = cavi.layer_statistics(state, 0)
    resid0 = cavi.hidden_residual(state, 0, Ez20)[0]
    paper0 = np.diagonal(state.Eaa[1], axis1=-2, axis2=-1) - 2 * state.rho[0] * Ez0 * state.Ea[1]
    np.testing.assert_allclose(resid0, paper0 + state.rho[0] * Ez20, rtol=1e-10, atol=1e-12)
    del mu, C, Ea, mu0


@pytest.mark.parametrize("hidden", [(6,), (5, 4)])
def test_closed_form_predictive_matches_monte_carlo(hidden):
    # Mean and variance of vbnn.md §10.2 against draws of Eq. 25 from the same q,
    # within four Monte Carlo standard errors (the variance's estimated from the
    # draws: the predictive is not Gaussian).
    X, Y = _problem(5, n=80)
    state = _state(X, Y, hidden, "student_t", 0.2)
    cavi.run_cavi(state, Y, max_iter=30)
    Xt = np.random.default_rng(9).normal(size=(4, X.shape[1]))
    test, _ = predict.local_state(state.globals_only(), Xt)
    mean, epi, ale = predict.predictive_moments(test)
    n_draws = 40_000
    draws = predict.sample_predictive(test, n_draws, np.random.default_rng(2))
    var = epi + ale
    se_mean = np.sqrt(var / n_draws)
    se_var = ((draws - draws.mean(0)) ** 2).std(0) / np.sqrt(n_draws)
    assert np.all(np.abs(draws.mean(0) - mean) < 4 * se_mean)
    assert np.all(np.abs(draws.var(0) - var) < 4 * se_var)
    assert np.all(epi > 0) and np.all(ale > 0)


def test_spd_inverse_adds_jitter_only_when_needed():
    rng = np.random.default_rng(0)
    A = rng.normal(size=(3, 4, 4))
    P = A @ A.swapaxes(-1, -2) + np.eye(4)
    inv, logdet = cavi.spd_inverse(P, np)
    np.testing.assert_allclose(inv, np.linalg.inv(P), rtol=1e-10)
    np.testing.assert_allclose(logdet, np.linalg.slogdet(P)[1], rtol=1e-12)
    singular = np.ones((1, 3, 3))  # rank one: needs jitter
    inv, _ = cavi.spd_inverse(singular, np)
    assert np.all(np.isfinite(inv))
    np.testing.assert_allclose(inv, inv.swapaxes(-1, -2))
    assert np.all(np.linalg.eigvalsh(inv) > 0)


def test_pg_mean_and_log_cosh_are_stable():
    A = np.array([0.0, 1e-8, 1e-3, 1.0, 50.0, 1e4])
    expected = np.where(A < 1e-6, 0.25, np.tanh(A / 2) / (2 * np.where(A == 0, 1, A)))
    np.testing.assert_allclose(cavi.pg_mean(A, np), expected, rtol=1e-9)
    x = np.array([0.0, 1.0, 800.0, -800.0])
    np.testing.assert_allclose(
        cavi.log_cosh(x, np), [0.0, np.log(np.cosh(1.0)), 800 - np.log(2), 800 - np.log(2)]
    )


@pytest.mark.parametrize("solver", ["cavi", "svi"])
def test_engine_runs_in_the_strict_namespace(strict_xp, solver):
    # The GPU path: every array operation goes through the namespace (the strict
    # stand-in refuses direct NumPy calls, as CuPy arrays would); results equal
    # NumPy's.
    from skbayesnn.inference.vbnn import selection

    xp, asarray = strict_xp
    X, Y = _problem(6, n=40)

    def run(X, Y):
        if solver == "svi":
            sizes = [X.shape[1], 4, 3, 1]
            prior = ShrinkagePrior.build("nig", [(sizes[j + 1], sizes[j]) for j in range(3)])
            state, _, _ = svi.run_svi(
                X, Y, (4, 3), rng=np.random.default_rng(0), batch_size=10, max_epochs=2,
                prior=prior, temperature=0.2, bias_var=1.0, alpha0=2.0, beta0=0.1,
                alpha0_hidden=2.0, beta0_hidden=0.01,
            )
        else:
            state = _state(X, Y, (4, 3), "student_t", 0.2)
            cavi.run_cavi(state, Y, max_iter=3)
        state = state.globals_only()
        test, _ = predict.local_state(state, X[:5])
        pruned = selection.select(state, 0.5).state
        return state, predict.predictive_moments(test), predict.local_state(pruned, X[:5])[0]

    ref_state, ref_moments, ref_pruned = run(X, Y)
    dev_state, dev_moments, dev_pruned = run(asarray(X), asarray(Y))
    for a, b in zip(ref_moments, dev_moments):
        assert type(b).__name__ == "StrictArray"
        np.testing.assert_allclose(np.asarray(b), a, rtol=1e-9, atol=1e-12)
    for a, b in zip(ref_state.m + ref_state.B, dev_state.m + dev_state.B):
        np.testing.assert_allclose(np.asarray(b), a, rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(np.asarray(dev_pruned.Ea[-1]), ref_pruned.Ea[-1], rtol=1e-9)


def test_svi_step_moves_the_noise_factors_by_the_step_size():
    # vbnn.md §8 step 9: beta <- (1 - l) beta + l beta-hat.  The intermediate
    # beta-hat is what a full step (l = 1) gives from the same state and batch;
    # a step of 0.1 must move every beta a tenth of the way there (it used to
    # land on beta-hat: the intermediate factor shared the global list).
    from skbayesnn.inference.vbnn import svi

    X, Y = _problem(6, n=60)
    state = _state(X, Y, (4, 3), "student_t", 0.2)
    cavi.run_cavi(state, Y, max_iter=2)
    state = state.globals_only()
    old = [b.copy() for b in state.beta]
    full, part = copy.deepcopy(state), copy.deepcopy(state)
    svi.svi_step(full, X[:20], Y[:20], 60, 1.0, em_global=False)
    svi.svi_step(part, X[:20], Y[:20], 60, 0.1, em_global=False)
    for b_old, b_hat, b in zip(old, full.beta, part.beta):
        assert not np.allclose(b_hat, b_old, rtol=1e-3)  # the batch does move it
        np.testing.assert_allclose(b, 0.9 * b_old + 0.1 * b_hat, rtol=1e-10)


def test_svi_first_step_keeps_part_of_the_initialisation(monkeypatch):
    # l_t = (1 + t)^-k from t = 1 (vbnn.md §8 step 3), so the steps are
    # 2^-k, 3^-k, ...; a first step of 1 would discard the initial globals.
    from skbayesnn.inference.vbnn import svi

    steps = []
    monkeypatch.setattr(svi, "svi_step", lambda *a, **k: steps.append(a[4]) or 0.0)
    X, Y = _problem(6, n=40)
    sizes = [X.shape[1], 4, 1]
    prior = ShrinkagePrior.build("nig", [(sizes[j + 1], sizes[j]) for j in range(2)])
    svi.run_svi(X, Y, (4,), rng=np.random.default_rng(0), batch_size=10, max_epochs=1,
                forgetting_rate=0.75, prior=prior, temperature=0.2, bias_var=1.0, alpha0=2.0,
                beta0=0.1, alpha0_hidden=2.0, beta0_hidden=0.01)
    np.testing.assert_allclose(steps, [(1.0 + t) ** -0.75 for t in range(1, 5)])


def test_algorithm_3_boxes_are_those_of_the_gated_activations():
    # vbnn.md §7.2: layer l's hyperplanes pass through random points of the box
    # of z_{l-1} = rho * pre with rho = sigmoid(pre / T), the activations
    # gated_forward computes (the box used to be built at T = 1).
    class Recorder:
        def __init__(self):
            self.rng, self.boxes = np.random.default_rng(0), []

        def uniform(self, low, high, size):
            self.boxes.append((low, high))
            return self.rng.uniform(low, high, size)

        def __getattr__(self, name):
            return getattr(self.rng, name)

    X, _ = _problem(6, n=50)
    T = 0.1
    rec = Recorder()
    m = cavi.random_hidden_means(X, (5, 4), "laplace", rec, np, temperature=T)
    z1 = cavi.gated_forward(m[:1], X, T, np)[3]
    lo, hi = z1.min(axis=0), z1.max(axis=0)
    np.testing.assert_allclose(rec.boxes[1][0], lo - 0.05 * (hi - lo), rtol=1e-12, atol=1e-15)
    np.testing.assert_allclose(rec.boxes[1][1], hi + 0.05 * (hi - lo), rtol=1e-12, atol=1e-15)


def test_svi_starts_from_the_first_batch_noise_precision():
    # SVI initialises on its first batch of B rows and sets alpha = alpha0 +
    # N/2 for the full data (vbnn.md §8 step 7).  beta must be scaled with it:
    # alone, alpha made E[1/eta^2] = alpha/beta N/B times the batch's, a noise
    # level sqrt(B/N) times too small for the first steps.
    X, Y = _problem(2, n=200)  # 3 features
    kw = dict(prior=ShrinkagePrior.build("student_t", [(4, 3), (1, 4)]), temperature=0.2,
              bias_var=1.0, alpha0=2.0, beta0=0.1, alpha0_hidden=2.0, beta0_hidden=0.01)
    state, _, _ = svi.run_svi(X, Y, (4,), rng=np.random.default_rng(0), batch_size=20,
                              max_epochs=0, **kw)
    rng = np.random.default_rng(0)
    first = rng.permutation(200)[:20]
    batch = cavi.initialize(X[first], Y[first], (4,), rng=rng, **kw)
    for j in range(2):
        np.testing.assert_allclose(state.alpha[j], batch.alpha[j] + 90.0, rtol=1e-15)
        np.testing.assert_allclose(state.alpha[j] / state.beta[j], batch.alpha[j] / batch.beta[j],
                                   rtol=1e-14)


def _gig_sample(nu, delta, lam, size, rng):
    """Draws of GIG(nu, delta, lam) (density prop. to x^(nu-1) exp(-(delta^2/x +
    lam^2 x) / 2)), with its inverse-gamma and gamma limits."""
    from scipy import stats

    if lam == 0:
        return stats.invgamma.rvs(-nu, scale=delta * delta / 2, size=size, random_state=rng)
    if delta == 0:
        return stats.gamma.rvs(nu, scale=2 / lam**2, size=size, random_state=rng)
    return (delta / lam) * stats.geninvgauss.rvs(nu, delta * lam, size=size, random_state=rng)


def _gig_logpdf(x, nu, delta, lam):
    from scipy import stats

    if lam == 0:
        return stats.invgamma.logpdf(x, -nu, scale=delta * delta / 2)
    if delta == 0:
        return stats.gamma.logpdf(x, nu, scale=2 / lam**2)
    return stats.geninvgauss.logpdf(x / (delta / lam), nu, delta * lam) - np.log(delta / lam)


def _monte_carlo_elbo(st, X, Y, family, temperature, n_draws, rng):
    """E_q[log p(Y, W, tau, psi, eta, a, gates) - log q] from draws of q, with
    scipy's densities only (the gates' likelihood in the same Polya-Gamma
    bound as the ELBO, vbnn.md §5): an independent check of ``cavi.elbo``.
    Returns the mean and its standard error."""
    from scipy import stats

    total = np.zeros(n_draws)
    prior = st.prior
    n_layers = st.n_layers - 1
    draws = []
    for j in range(n_layers + 1):
        m, B = st.m[j], st.B[j]
        n_out, k = m.shape
        w = m[None] + np.einsum("dij,sdj->sdi", np.linalg.cholesky(B),
                                rng.normal(size=(n_draws, n_out, k)))
        total -= sum(stats.multivariate_normal.logpdf(w[:, d], m[d], B[d]) for d in range(n_out))
        total += stats.norm.logpdf(w[:, :, 0], 0, np.sqrt(st.bias_var)).sum(1)
        if family == "gaussian":
            total += stats.norm.logpdf(w[:, :, 1:], 0, np.sqrt(prior.gaussian_var[j])).sum((1, 2))
        else:
            nu, delta, lam = prior.q_tau[j]
            tau = _gig_sample(nu, delta, lam, n_draws, rng)
            total += (_gig_logpdf(tau, prior.nu_glob, prior.delta_glob, prior.lam_glob)
                      - _gig_logpdf(tau, nu, delta, lam))
            nu, deltas, lam = prior.q_psi[j]
            psi = np.empty((n_draws, n_out, k - 1))
            for a in range(n_out):
                for b in range(k - 1):
                    psi[:, a, b] = _gig_sample(nu, deltas[a, b], lam, n_draws, rng)
                    total += (_gig_logpdf(psi[:, a, b], prior.nu_loc, prior.delta_loc[j],
                                          prior.lam_loc[j])
                              - _gig_logpdf(psi[:, a, b], nu, deltas[a, b], lam))
            total += stats.norm.logpdf(w[:, :, 1:], 0, np.sqrt(tau[:, None, None] * psi)).sum(
                (1, 2))
        alpha, beta = st.alpha[j], st.beta[j]
        beta0 = np.broadcast_to(st.beta0[j], (n_out,))
        eta2 = np.stack([stats.invgamma.rvs(alpha[d], scale=beta[d], size=n_draws,
                                            random_state=rng) for d in range(n_out)], 1)
        for d in range(n_out):
            total += (stats.invgamma.logpdf(eta2[:, d], st.alpha0[j], scale=beta0[d])
                      - stats.invgamma.logpdf(eta2[:, d], alpha[d], scale=beta[d]))
        draws.append((w, eta2))
    for n in range(X.shape[0]):
        a = np.broadcast_to(X[n], (n_draws, X.shape[1]))
        for j in range(n_layers + 1):
            w, eta2 = draws[j]
            z = np.einsum("sdi,si->sd", w[:, :, 1:], a) + w[:, :, 0]
            if j == n_layers:
                total += stats.norm.logpdf(Y[n][None], z, np.sqrt(eta2)).sum(1)
                break
            t, M = st.t[j][n], st.M[j][n]
            S = st.S[j][0 if st.S[j].shape[0] == 1 else n]
            mean = t[None] + a @ M.T
            a_new = mean + rng.normal(size=(n_draws, len(t))) @ np.linalg.cholesky(S).T
            total -= stats.multivariate_normal.logpdf(a_new - mean, np.zeros(len(t)), S)
            rho, A = st.rho[j][n], st.A[j][n]
            g = (rng.random((n_draws, len(t))) < rho).astype(float)
            total -= np.where(g > 0, np.log(np.maximum(rho, 1e-300)),
                              np.log(np.maximum(1 - rho, 1e-300))).sum(1)
            total += stats.norm.logpdf(a_new, g * z, np.sqrt(eta2)).sum(1)
            e_omega = np.tanh(A / 2) / (2 * A)
            total += ((g - 0.5) * z / temperature - np.log(2)
                      - (np.log(np.cosh(A / 2))
                         + e_omega / 2 * (z**2 / temperature**2 - A**2))).sum(1)
            a = a_new
    return total.mean(), total.std() / np.sqrt(n_draws)


@pytest.mark.parametrize("family", ["student_t", "laplace", "nig", "gaussian"])
def test_the_elbo_equals_a_monte_carlo_estimate_from_q(family):
    # The monotonicity and stationarity tests above would pass with a wrong
    # ELBO formula that the updates also followed; this one evaluates the
    # ELBO (vbnn.md §5, with the exact hidden-noise residual of §16.1) by
    # sampling q and scoring the joint with scipy's densities.  Tiny model
    # (4 rows, hidden (3, 2), 2 outputs), after three sweeps (activations
    # refreshed, the gates' A and rho one update behind); within 5 Monte
    # Carlo standard errors (each about 0.018 nats, of an ELBO near -45; one
    # gate's log 2 left out would be 0.69).
    rng = np.random.default_rng(0)
    X = rng.normal(size=(4, 2))
    Y = np.column_stack([np.sin(X[:, 0]), X[:, 1]]) + 0.2 * rng.normal(size=(4, 2))
    sizes = [2, 3, 2, 2]
    prior = ShrinkagePrior.build(family, [(sizes[j + 1], sizes[j]) for j in range(3)],
                                 global_scale=0.8, local_scale=1.3)
    temperature = 0.5
    st = cavi.initialize(X, Y, (3, 2), prior=prior, temperature=temperature, bias_var=1.5,
                         alpha0=2.0, beta0=0.3, alpha0_hidden=2.0, beta0_hidden=0.05,
                         rng=np.random.default_rng(1))
    for _ in range(3):
        cavi.cavi_sweep(st, Y)
    cavi.update_activations(st, Y)
    mean, se = _monte_carlo_elbo(st, X, Y, family, temperature, 100_000, rng)
    assert abs(cavi.elbo(st, Y) - mean) < 5 * se
