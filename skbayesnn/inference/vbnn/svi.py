"""Stochastic variational inference for VBNN (SVBNN, vbnn.md §8).

Each step draws a mini-batch without replacement, fits its local factors by
CAVI with the global factors frozen, forms the intermediate global factors the
CAVI formulas would give if the batch were the whole data set repeated
``N / |batch|`` times, and moves the global natural parameters a Robbins-Monro
step ``rho_t = (1 + t)^-k``, ``t = 1, 2, ...``, towards them (Eq. 20-21).  The shrinkage factors
``q(tau)``, ``q(psi)`` are updated fully from ``q(W)`` at every step, as in the
paper.

The noise factors ``q(eta^2) = IG(alpha, beta)`` have natural parameter
``-beta`` for the sufficient statistic ``1/eta^2`` (``alpha`` is fixed at
``alpha0 + N/2``), so ``beta`` is blended linearly: the standard natural-gradient
step.  The paper and the authors' code blend ``1/beta`` instead (vbnn.md §8 step
9, §16.5); the two agree at the fixed point.
"""

from __future__ import annotations

import numpy as np

from ..._backend import array_namespace
from . import cavi


def fit_batch_locals(state, X, Y, *, max_iter=40, tol=1e-4):
    """Local factors of the rows ``X``, ``Y`` with the global ones frozen.

    Starts from Algorithm 3's gated pass with the current weight means and
    ``S = E[eta^2] I`` (vbnn.md §8 step 2), then alternates ``A``, ``q(a)``,
    ``rho`` until the batch ELBO changes by less than ``tol`` (relative).
    Returns a state sharing the global factors.
    """
    xp = array_namespace(X)
    L = state.n_layers - 1
    rho, t, M, _ = cavi.gated_forward(state.m[:L], X, state.temperature, xp)
    S = [
        (state.noise_variance(j)[:, None] * xp.eye(rho[j].shape[1], dtype=X.dtype))[None]
        for j in range(L)
    ]
    S_logdet = [xp.sum(xp.log(state.noise_variance(j)))[None] for j in range(L)]
    local = state.with_locals(
        rho=rho, A=[xp.zeros_like(r) for r in rho], t=t, M=M, S=S, S_logdet=S_logdet
    )
    cavi.forward_moments(local, X)
    previous = None
    for _ in range(max_iter):
        for j in range(L):
            cavi.update_pg(local, j)
        cavi.update_activations(local, Y)
        for j in range(L):
            cavi.update_rho(local, j)
        value = cavi.elbo(local, Y)
        if previous is not None and abs(value - previous) <= tol * abs(previous):
            break
        previous = value
    return local


def svi_step(state, X, Y, n_total, step, *, em_global=True, local_max_iter=40, local_tol=1e-4):
    """One SVI step on the batch ``X``, ``Y``; updates ``state`` in place and
    returns the noisy ELBO estimate of the batch (before the global step)."""
    xp = array_namespace(X)
    L = state.n_layers - 1
    scale = n_total / X.shape[0]
    for j in range(L + 1):
        cavi.update_shrinkage(state, j)
    local = fit_batch_locals(state, X, Y, max_iter=local_max_iter, tol=local_tol)
    noisy = cavi.elbo(local, Y, scale=scale)
    for j in range(L + 1):
        # Intermediate q(eta^2_j): beta-hat with the scaled sums (step 8), in a
        # copy of the beta list, which `local` shares with `state`: the global
        # beta moves only by the step below, and q(W~_j) reads the current one.
        hat = local.with_locals(beta=list(local.beta))
        cavi.update_noise(hat, j, Y, scale=scale)
        beta_hat = hat.beta[j]
        # Intermediate q(W~_j) in natural parameters; the prior precision is
        # not scaled (step 8).
        Lam, h = cavi.weight_natural_parameters(local, j, Y, scale=scale)
        d_inv = cavi.prior_precision_diagonal(state, j, xp)
        eye = xp.eye(Lam.shape[-1], dtype=Lam.dtype)
        prec_hat = Lam + d_inv[:, :, None] * eye
        prec_old, _ = cavi.spd_inverse(state.B[j], xp)
        h_old = (prec_old @ state.m[j][:, :, None])[:, :, 0]
        prec = (1.0 - step) * prec_old + step * prec_hat
        lin = (1.0 - step) * h_old + step * h
        B, _ = cavi.spd_inverse(prec, xp)
        state.B[j] = B
        state.m[j] = (B @ lin[:, :, None])[:, :, 0]
        state.beta[j] = (1.0 - step) * state.beta[j] + step * beta_hat
    if em_global:
        state.prior.em_step()
    return noisy


def run_svi(
    X,
    Y,
    hidden,
    *,
    rng,
    batch_size=100,
    forgetting_rate=0.75,
    max_epochs=200,
    tol=1e-5,
    patience=3,
    em_global=True,
    local_max_iter=40,
    local_tol=1e-4,
    **init_kwargs,
):
    """SVI from the initialisation of the first batch (vbnn.md §8 step 2).

    An epoch is one pass over a random permutation of the rows in
    ``ceil(n / batch_size)`` batches as equal as possible (every row once; at
    most ``batch_size`` rows each); the convergence criterion of CAVI is
    applied to the epoch means of the noisy ELBO.  Returns ``(state,
    epoch_elbos, converged)``.
    """
    xp = array_namespace(X)
    n = X.shape[0]
    batch_size = min(batch_size, n)
    first = xp.asarray(rng.permutation(n)[:batch_size])
    state = cavi.initialize(X[first], Y[first], hidden, rng=rng, **init_kwargs)
    # alpha = alpha0 + N/2 for the full data (step 7), and beta scaled with it:
    # the first batch's E[1/eta^2] = alpha/beta is kept (alpha alone made the
    # noise precision N/B times the batch's)
    full = [a - 0.5 * batch_size + 0.5 * n for a in state.alpha]
    state.beta = [b * (a_full / a) for a, a_full, b in zip(state.alpha, full, state.beta)]
    state.alpha = full
    monitor, t = cavi.ElboMonitor(tol, patience), 0
    for _ in range(max_epochs):
        order = rng.permutation(n)
        values = []
        for batch in np.array_split(order, -(-n // batch_size)):
            rows = xp.asarray(batch)
            # rho_t = (1 + t)^-k from t = 1 (vbnn.md §8 step 3; the authors'
            # 1 / (2 + epoch)^k): the first step keeps part of the initialisation
            step = (2.0 + t) ** (-forgetting_rate)
            values.append(
                svi_step(
                    state,
                    X[rows],
                    Y[rows],
                    n,
                    step,
                    em_global=em_global,
                    local_max_iter=local_max_iter,
                    local_tol=local_tol,
                )
            )
            t += 1
        if monitor.record(sum(values) / len(values)):
            return state, monitor.history, True
    return state, monitor.history, False
