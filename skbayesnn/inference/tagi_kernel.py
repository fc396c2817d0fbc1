"""Compiled CPU kernel of one TAGI epoch (the same update as :mod:`.tagi`).

On NumPy arrays a TAGI step on a batch of 10 rows is dominated by the ~1 µs
fixed cost of each of the ~45 array operations it needs (forward moments,
output conditioning, batch-summed backward update, variance guard).  This module
runs the same arithmetic as :func:`skbayesnn.inference.tagi._step` as plain loops
compiled by Numba, one call per epoch.  The array-namespace implementation stays
the reference (and the GPU path); ``tests/test_tagi.py`` checks that the two agree
to rounding.  Layout and algebra follow :mod:`.tagi`: each layer's bias is the
last column of its packed ``(n_out, n_in + 1)`` mean and variance matrices.
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit

from ..core.activations import ACTIVATIONS

#: Activation name -> code understood by the kernel.
ACTIVATION_CODES = {name: i for i, name in enumerate(ACTIVATIONS)}


@njit(cache=True)
def _expit(x):
    if x >= 0.0:
        return 1.0 / (1.0 + math.exp(-x))
    e = math.exp(x)
    return e / (1.0 + e)


@njit(cache=True)
def _activation(code, x, slope):
    """``(g(x), g'(x))`` as :func:`skbayesnn.core.activations.activation_value`
    and ``activation_derivative`` define them (codes follow ``ACTIVATIONS``)."""
    if code == 0:  # relu
        return (x, 1.0) if x > 0.0 else (0.0, 0.0)
    if code == 1:  # leaky_relu
        return (x, 1.0) if x > 0.0 else (slope * x, slope)
    if code == 2:  # tanh; derivative 4 s(2x) s(-2x) keeps accuracy in the tails
        return math.tanh(x), 4.0 * _expit(2.0 * x) * _expit(-2.0 * x)
    if code == 3:  # sigmoid
        return _expit(x), _expit(x) * _expit(-x)
    if code == 4:  # softplus = logaddexp(0, x)
        return max(x, 0.0) + math.log1p(math.exp(-abs(x))), _expit(x)
    return x, 1.0  # identity


@njit(cache=True)
def run_epoch_kernel(
    means, variances, X, Y, mask, batch_size, noise_var, codes, slope, min_var_ratio
):
    """One pass over the rows of ``X`` in order, updating ``means``/``variances``
    (tuples of packed layer matrices) in place.

    ``mask`` is a boolean ``(n, n_outputs)`` array of observed outputs (all True
    for regression).  Returns the number of parameter updates applied (the rest
    were skipped by the variance guard).
    """
    n_layers = len(means)
    n = X.shape[0]
    a_mean = []  # layer inputs with the constant 1 appended
    a_var = []
    z_mean = []
    z_var = []
    jac = []
    d_mean = []
    d_var = []
    for l in range(n_layers):
        n_out, n_in1 = means[l].shape
        a_mean.append(np.ones((batch_size, n_in1)))
        a_var.append(np.zeros((batch_size, n_in1 - 1)))
        z_mean.append(np.empty((batch_size, n_out)))
        z_var.append(np.empty((batch_size, n_out)))
        jac.append(np.empty((batch_size, n_out)))
        d_mean.append(np.empty((batch_size, n_out)))
        d_var.append(np.empty((batch_size, n_out)))
    n_kept = 0
    for start in range(0, n, batch_size):
        B = min(batch_size, n - start)
        a0 = a_mean[0]
        for i in range(B):
            for k in range(X.shape[1]):
                a0[i, k] = X[start + i, k]
        # forward (tagi.md §3.3): linear moments, then linearised activations
        for l in range(n_layers):
            W, V = means[l], variances[l]
            n_out, n_in1 = W.shape
            am, av, zm, zv = a_mean[l], a_var[l], z_mean[l], z_var[l]
            for i in range(B):
                for j in range(n_out):
                    sm = 0.0
                    sv = 0.0
                    for k in range(n_in1):
                        a = am[i, k]
                        sm += W[j, k] * a
                        sv += V[j, k] * a * a
                    if l > 0:
                        for k in range(n_in1 - 1):
                            sv += av[i, k] * (W[j, k] * W[j, k] + V[j, k])
                    zm[i, j] = sm
                    zv[i, j] = sv
            if l < n_layers - 1:
                nm, nv, J = a_mean[l + 1], a_var[l + 1], jac[l]
                for i in range(B):
                    for j in range(n_out):
                        g, dg = _activation(codes[l], zm[i, j], slope)
                        nm[i, j] = g
                        J[i, j] = dg
                        nv[i, j] = dg * dg * zv[i, j]
        # output conditioning in innovation form (tagi.md §4.3, Eq. 14)
        top = n_layers - 1
        zm, zv, dm, dv = z_mean[top], z_var[top], d_mean[top], d_var[top]
        for i in range(B):
            for j in range(zm.shape[1]):
                if mask[start + i, j]:
                    s = zv[i, j] + noise_var
                    dm[i, j] = (Y[start + i, j] - zm[i, j]) / s
                    dv[i, j] = -1.0 / s
                else:
                    dm[i, j] = 0.0
                    dv[i, j] = 0.0
        # backward (Eqs. 15-16, §4.4-4.5), top layer first
        for l in range(n_layers - 1, -1, -1):
            W, V = means[l], variances[l]
            n_out, n_in1 = W.shape
            am, dm, dv = a_mean[l], d_mean[l], d_var[l]
            if l > 0:  # smooth the layer below with the pre-update means
                bm, bv, J, zvb = d_mean[l - 1], d_var[l - 1], jac[l - 1], z_var[l - 1]
                for i in range(B):
                    for k in range(n_in1 - 1):
                        sm = 0.0
                        sv = 0.0
                        for j in range(n_out):
                            w = W[j, k]
                            sm += dm[i, j] * w
                            sv += dv[i, j] * w * w
                        bm[i, k] = J[i, k] * sm
                        bv[i, k] = max(J[i, k] * J[i, k] * sv, -1.0 / zvb[i, k])
            for j in range(n_out):
                for k in range(n_in1):
                    gm = 0.0
                    gv = 0.0
                    for i in range(B):
                        a = am[i, k]
                        gm += dm[i, j] * a
                        gv += dv[i, j] * a * a
                    v = V[j, k]
                    rel = v * gv
                    if rel >= min_var_ratio - 1.0:  # the variance guard of tagi._step
                        W[j, k] += v * gm
                        V[j, k] = v + v * rel
                        n_kept += 1
    return n_kept
