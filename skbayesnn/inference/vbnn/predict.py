"""VBNN prediction: test-time local CAVI, closed-form moments, sampling (vbnn.md §10).

For test rows the global factors stay fixed and only the local ones ``q(a*)``,
``q(gamma*)``, ``q(omega*)`` are fitted, by the training updates without the
output likelihood (y* is unobserved, vbnn.md §10.1).  The predictive mean and
variance then follow in closed form from the moments of ``a*_L`` (vbnn.md §10.2),
and the predictive can be sampled along the chain (Eq. 25).
"""

from __future__ import annotations

import numpy as np

from ..._backend import array_namespace, asnumpy
from . import cavi


def local_state(state, X, *, max_iter=60, tol=1e-7, patience=3):
    """Fit the local factors of test rows ``X`` (standardised) with the global
    factors of ``state`` frozen.

    Initialised by Algorithm 3's gated pass with the trained weight means and
    ``S = E[eta^2] I``; then, per iteration: ``q(a*)`` backward and its moments,
    ``A*``, ``rho*`` layer by layer (vbnn.md §10.1).  Each row stops (its factors
    are frozen) once the relative change of its own local ELBO has been at
    most ``tol`` (vbnn.md §5.1: 1e-4 in the paper, see ``VBNNRegressor``'s
    ``predict_tol``) for ``patience``
    consecutive iterations, as training stops, or after ``max_iter``
    iterations, so a row's prediction does not depend on the other rows.

    Returns ``(test_state, n_iter)``; ``test_state`` shares the global factors.
    """
    xp = array_namespace(X)
    if state.inputs is not None:  # a pruned network sees its kept inputs only
        X = xp.take(X, xp.asarray(state.inputs), axis=1)
    L = state.n_layers - 1
    n = X.shape[0]
    rho, t, M, _ = cavi.gated_forward(state.m[:L], X, state.temperature, xp)
    eye = [xp.eye(state.m[j].shape[0], dtype=X.dtype) for j in range(L)]
    S = [(state.noise_variance(j)[:, None] * eye[j])[None] for j in range(L)]
    S_logdet = [xp.sum(xp.log(state.noise_variance(j)))[None] for j in range(L)]
    test = state.with_locals(
        rho=rho, A=[xp.zeros_like(r) for r in rho], t=t, M=M, S=S, S_logdet=S_logdet
    )
    cavi.forward_moments(test, X)
    for j in range(L):
        cavi.update_pg(test, j)
    previous = None
    frozen = xp.zeros((n,), dtype=bool)
    calm = xp.zeros((n,), dtype=xp.int64)  # consecutive calm iterations per row
    n_iter = 0
    for n_iter in range(1, max_iter + 1):
        kept = _local_factors(test)
        cavi.update_activations(test, None, observed=False)
        for j in range(L):
            cavi.update_pg(test, j)
            cavi.update_rho(test, j)
        if previous is not None:
            _restore_rows(test, kept, frozen, X)
        value = local_elbo_rows(test)
        if previous is not None:
            still = xp.abs(value - previous) <= tol * xp.abs(previous)
            calm = xp.where(still, calm + 1, 0)
            frozen = frozen | (calm >= patience)
            if bool(xp.all(frozen)):
                break
        previous = value
    return test, n_iter


_LOCAL_NAMES = ("rho", "A", "t", "M", "S", "S_logdet")


def _local_factors(test):
    return {name: list(getattr(test, name)) for name in _LOCAL_NAMES}


def _restore_rows(test, kept, frozen, X):
    """Put back the factors of the frozen rows (per-row arrays only: a leading
    axis of 1 is shared by all rows and identical across iterations)."""
    xp = array_namespace(X)
    for name in _LOCAL_NAMES:
        new = getattr(test, name)
        for j, (old, cur) in enumerate(zip(kept[name], new)):
            if cur.shape[0] == 1:
                continue
            mask = xp.reshape(frozen, (-1,) + (1,) * (cur.ndim - 1))
            new[j] = xp.where(mask, old, cur)
    cavi.forward_moments(test, X)


def local_elbo_rows(test):
    """The predictive (local) ELBO of vbnn.md App. B.2 per row: hidden
    likelihoods, gates and the entropy of ``q(a*)``, up to constants."""
    xp = array_namespace(test.m[0])
    total = 0.0
    for j in range(test.n_layers - 1):
        _, _, _, Ez, Ez2 = cavi.layer_statistics(test, j)
        resid = cavi.hidden_residual(test, j, Ez2)[0]
        total = total + cavi.local_elbo_terms(test, j, Ez, Ez2)
        total = (
            total + 0.5 * test.S_logdet[j] - 0.5 * xp.sum(test.noise_precision(j) * resid, axis=1)
        )
    return total


def predictive_moments(test):
    """Closed-form predictive ``(mean, epistemic var, aleatoric var)`` per row and
    output (vbnn.md §10.2): ``m^T mu~``, ``Tr(C A~) - (m^T mu~)^2`` and
    ``E[eta^2] = beta / (alpha - 1)``."""
    xp = array_namespace(test.m[0])
    L = test.n_layers - 1
    _, _, _, Ez, Ez2 = cavi.layer_statistics(test, L)
    epistemic = xp.maximum(Ez2 - Ez * Ez, 0.0)
    aleatoric = xp.broadcast_to(test.noise_variance(L)[None, :], Ez.shape)
    return Ez, epistemic, aleatoric


def sample_predictive(test, n_samples, rng):
    """Draws of ``y*`` by Eq. 25: output weights and noise from ``q``, then the
    activations along the chain ``q(a_{l} | a_{l-1})``, then the observation.

    ``rng`` is a NumPy Generator; returns an array ``(n_samples, N, n_outputs)``
    in the namespace of the state.  Each draw's output weights and noise come
    from a generator of its own seed (:func:`sample_given_output`), so rows in
    chunks can share them without holding every draw's weights at once.
    """
    seeds = rng.integers(np.iinfo(np.int64).max, size=n_samples)
    return sample_given_output(test, output_factor_sampler(test), seeds, rng)


def _cholesky(xp, a):
    """``xp.linalg.cholesky(a)``, with NumPy's ``LinAlgError`` where the factor
    is not finite: CuPy returns NaN where NumPy raises, and the draws would
    then be NaN on a GPU only."""
    chol = xp.linalg.cholesky(a)
    if not bool(xp.all(xp.isfinite(chol))):
        raise np.linalg.LinAlgError("Matrix is not positive definite")
    return chol


def output_factor_sampler(state):
    """A function of a Generator that draws the output weights ``(n_out, k)``
    and noise variances ``(n_out,)`` from ``q`` (global factors only: ``state``
    may be the fitted state or a prediction's local one)."""
    xp = array_namespace(state.m[0])
    L = state.n_layers - 1
    # B may be singular after node selection (dropped weights are point masses).
    k_out = state.B[L].shape[-1]
    jitter = 1e-12 * xp.max(xp.abs(state.B[L])) * xp.eye(k_out, dtype=state.B[L].dtype)
    chol_B = _cholesky(xp, state.B[L] + jitter)
    n_out, k = state.m[L].shape
    alpha = asnumpy(state.alpha[L])

    def draw(rng):
        w = state.m[L] + (chol_B @ xp.asarray(rng.standard_normal((n_out, k, 1))))[:, :, 0]
        # eta^2 ~ IG(alpha, beta): beta / Gamma(alpha, 1).
        return w, state.beta[L] / xp.asarray(rng.gamma(shape=alpha))

    return draw


def sample_given_output(test, draw_output, seeds, rng):
    """Draws of ``y*`` at the rows of the local state ``test``: per seed, the
    output factors of ``draw_output(default_rng(seed))``
    (:func:`output_factor_sampler`), the activations along the chain (from
    ``rng``), then the observation."""
    xp = array_namespace(test.m[0])
    L = test.n_layers - 1
    n = test.Ea[0].shape[0]
    chol_S = [_cholesky(xp, test.S[j]) for j in range(L)]
    out = []
    for seed in seeds:
        w, eta2 = draw_output(np.random.default_rng(seed))
        a = test.Ea[0]
        for j in range(L):
            eps = xp.asarray(rng.standard_normal((n, test.t[j].shape[1], 1)))
            a = test.t[j] + (test.M[j] @ a[:, :, None])[:, :, 0] + (chol_S[j] @ eps)[:, :, 0]
        mean = a @ w[:, 1:].T + w[:, 0][None, :]
        noise = xp.asarray(rng.standard_normal((n, w.shape[0]))) * xp.sqrt(eta2)[None, :]
        out.append(mean + noise)
    return xp.stack(out)
