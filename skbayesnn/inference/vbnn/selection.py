"""Node selection for VBNN by Bayesian false-discovery rate (vbnn.md §9).

Continuous shrinkage leaves no exact zeros.  Post hoc, every weight gets the
posterior probability of its sign, ``Q = Phi(|m| / s)``; the threshold ``kappa``
is the smallest ``Q`` whose estimated Bayesian FDR (the running mean of ``1 - Q``
over the weights kept) stays below the target (Li & Lin 2010; Algorithm 2).
Dropped weights become point masses at 0 (their rows and columns leave ``B``).
Hidden units left without outgoing weights lose their incoming ones, units
without incoming weights lose their outgoing ones, to a fixed point; inputs
without outgoing weights are dropped (feature selection).  The surviving
network is rebuilt smaller, so prediction costs shrink with it.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np
from scipy.special import ndtr

from ..._backend import array_namespace, asnumpy, to_device


@dataclass
class Selection:
    """Result of :func:`select`.

    Attributes
    ----------
    state : VBNNState
        The pruned network (global factors only), over the kept inputs and
        units.
    masks : list of ndarray of bool
        Kept weights per layer, ``(n_out, n_in)`` in the ORIGINAL layout.
    inputs : ndarray of bool
        Inputs with at least one kept weight.
    n_units : list of int
        Surviving units per hidden layer.
    threshold : float
        The chosen ``kappa``.
    """

    state: object
    masks: list
    inputs: np.ndarray
    n_units: list
    threshold: float


def sign_probabilities(state):
    """``Q = Phi(|m| / s)`` of every weight (bias excluded), per layer."""
    out = []
    for m, B in zip(state.m, state.B):
        mean = asnumpy(m)[:, 1:]
        sd = np.sqrt(np.maximum(np.diagonal(asnumpy(B), axis1=-2, axis2=-1)[:, 1:], 1e-300))
        out.append(ndtr(np.abs(mean) / sd))
    return out


def fdr_threshold(q, fdr):
    """The smallest ``kappa`` among the ``q`` values such that the weights with
    ``Q >= kappa`` have estimated Bayesian FDR ``mean(1 - Q) < fdr``; ``inf``
    (keep nothing) if even the most certain weight fails.

    The running mean of ``1 - Q`` over ``Q`` sorted in decreasing order is
    non-decreasing, so the kept set is a prefix of that order (vbnn.md §9 step 3).
    """
    q = np.sort(np.asarray(q, dtype=float).ravel())[::-1]
    running = np.cumsum(1.0 - q) / np.arange(1, q.size + 1)
    ok = np.nonzero(running < fdr)[0]
    if ok.size == 0:
        return np.inf
    return float(q[ok[-1]])


def structural_masks(masks):
    """Remove units without outgoing or without incoming kept weights, to a
    fixed point (vbnn.md §9 step 5).  Output units always stay."""
    masks = [m.copy() for m in masks]
    changed = True
    while changed:
        changed = False
        for j in range(len(masks) - 1):
            # Unit d of hidden layer j is row d of masks[j] (incoming) and
            # column d of masks[j + 1] (outgoing).
            no_out = ~masks[j + 1].any(axis=0)
            no_in = ~masks[j].any(axis=1)
            dead = no_out | no_in
            if np.any(masks[j][dead]) or np.any(masks[j + 1][:, dead]):
                masks[j][dead] = False
                masks[j + 1][:, dead] = False
                changed = True
    return masks


def select(state, fdr):
    """Prune ``state`` (global factors) at Bayesian FDR ``fdr``; see the module
    docstring.  Returns a :class:`Selection`."""
    xp = array_namespace(state.m[0])
    q = sign_probabilities(state)
    kappa = fdr_threshold(np.concatenate([qj.ravel() for qj in q]), fdr)
    masks = structural_masks([qj >= kappa for qj in q])
    L = len(masks) - 1
    inputs = masks[0].any(axis=0)
    units = [masks[j].any(axis=1) for j in range(L)]
    if not all(u.any() for u in units):
        raise ValueError(
            f"no path from the inputs to the output survives at fdr={fdr}; use a larger fdr."
        )
    keep_in = [inputs] + units  # kept inputs of each layer
    keep_out = units + [np.ones(masks[L].shape[0], dtype=bool)]
    m_new, B_new = [], []
    for j in range(L + 1):
        rows = np.nonzero(keep_out[j])[0]
        cols = np.nonzero(keep_in[j])[0]
        m = asnumpy(state.m[j])[rows][:, np.concatenate([[0], cols + 1])]
        B = asnumpy(state.B[j])[rows][:, np.concatenate([[0], cols + 1])][
            :, :, np.concatenate([[0], cols + 1])
        ]
        # Dropped weights inside kept units become point masses at 0: mean 0,
        # and their rows and columns of B zero (the marginal of the rest is the
        # sub-block).
        dropped = ~masks[j][np.ix_(rows, cols)]
        m[:, 1:][dropped] = 0.0
        d_idx, w_idx = np.nonzero(dropped)
        B[d_idx, w_idx + 1, :] = 0.0
        B[d_idx, :, w_idx + 1] = 0.0
        m_new.append(to_device(m, xp))
        B_new.append(to_device(B, xp))
    alpha = [to_device(asnumpy(a)[keep], xp) for a, keep in zip(state.alpha, keep_out)]
    beta = [to_device(asnumpy(b)[keep], xp) for b, keep in zip(state.beta, keep_out)]
    kept_inputs = np.nonzero(inputs)[0]
    if state.inputs is not None:
        kept_inputs = np.asarray(state.inputs)[kept_inputs]
    pruned = replace(
        state.globals_only(),
        m=m_new,
        B=B_new,
        alpha=alpha,
        beta=beta,
        prior=None,
        inputs=kept_inputs,
    )
    return Selection(pruned, masks, inputs, [int(u.sum()) for u in units], kappa)
