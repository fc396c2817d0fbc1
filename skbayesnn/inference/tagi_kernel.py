"""Compiled CPU kernel of one TAGI epoch (the same update as :mod:`.tagi`).

On NumPy arrays a TAGI step on a batch of 10 rows is dominated by the ~1 µs
fixed cost of each of the ~45 array operations it needs (forward moments,
output conditioning, batch-summed backward update, variance guard).  This module
runs the same arithmetic as :func:`skbayesnn.inference.tagi._step` compiled by
Numba, one call per epoch: matrix products still go to BLAS, the element-wise
steps become loops.  The array-namespace implementation stays
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
def _copy_block(dst, src):
    """``dst[:m, :n] = src`` for ``src`` of shape ``(m, n)``, as loops: the
    slice assignment compiled the formatting of its broadcasting error, 2.3
    of the 7.8 s that the first fit in a new installation spent compiling."""
    for i in range(src.shape[0]):
        for j in range(src.shape[1]):
            dst[i, j] = src[i, j]


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
def _kernel_step(
    means, variances, X, Y, mask, lo, hi, noise_var, codes, slope, min_var_ratio, split
):
    """One TAGI update of ``means``/``variances`` (in place) on rows ``lo:hi``.

    Returns ``(n_kept, checked, before, inv_s, saved_m, saved_v)``: the number
    of parameter updates that used the batch-summed form; whether the update
    must be checked for an overshoot (``split``, more than one row and a gain
    trace ``sum s_z / s_y`` above 2, see ``tagi._checked_step``); then the
    weighted squared residual ``sum (y - mu_z)^2 / s_y`` under the pre-update
    means, the weights ``1 / s_y`` (0 where unobserved) and copies of the
    pre-update layers (the layers themselves when not checked).
    """
    n_layers = len(means)
    n_features = X.shape[1]
    n_kept = 0
    B = hi - lo
    # Layer inputs with the constant 1 appended (its variance column is 0).
    a_mean = np.ones((B, n_features + 1))
    _copy_block(a_mean, X[lo:hi])
    a_var = np.zeros((B, n_features + 1))
    a_means = [a_mean]
    z_vars = [a_var]  # placeholders keep the lists typed; hidden entries follow
    jacs = [a_var]
    # forward (tagi.md §3.3): linear moments, then linearised activations
    for l in range(n_layers):
        W, V = means[l], variances[l]
        z_mean = a_mean @ W.T
        z_var = (a_mean * a_mean) @ V.T
        if l > 0:
            z_var += a_var @ (W * W + V).T
        if l == n_layers - 1:
            break
        n_out = W.shape[0]
        a_mean = np.ones((B, n_out + 1))
        a_var = np.zeros((B, n_out + 1))
        jac = np.empty((B, n_out))
        for i in range(B):
            for j in range(n_out):
                g, dg = _activation(codes[l], z_mean[i, j], slope)
                a_mean[i, j] = g
                jac[i, j] = dg
                a_var[i, j] = dg * dg * z_var[i, j]
        a_means.append(a_mean)
        z_vars.append(z_var)
        jacs.append(jac)
    # output conditioning in innovation form (tagi.md §4.3, Eq. 14)
    n_out = z_mean.shape[1]
    d_mean = np.zeros((B, n_out))
    d_var = np.zeros((B, n_out))
    inv_s = np.zeros((B, n_out))
    before = 0.0
    trace = 0.0
    for i in range(B):
        for j in range(n_out):
            if mask[lo + i, j]:
                r = Y[lo + i, j] - z_mean[i, j]
                s = z_var[i, j] + noise_var[j]
                d_mean[i, j] = r / s
                d_var[i, j] = -1.0 / s
                inv_s[i, j] = 1.0 / s
                before += r * r / s
                trace += z_var[i, j] / s
    checked = split and B > 1 and trace > 2.0
    saved_m = [m.copy() if checked else m for m in means]
    saved_v = [v.copy() if checked else v for v in variances]
    # backward (Eqs. 15-16, §4.4-4.5), top layer first
    for l in range(n_layers - 1, -1, -1):
        W, V = means[l], variances[l]
        a_mean = a_means[l]
        if l > 0:  # smooth the layer below with the pre-update means
            s_mean = d_mean @ W
            s_var = d_var @ (W * W)
            jac, z_var_below = jacs[l], z_vars[l]
            n_below = jac.shape[1]
            below_mean = np.empty((B, n_below))
            below_var = np.empty((B, n_below))
            for i in range(B):
                for k in range(n_below):
                    J = jac[i, k]
                    below_mean[i, k] = J * s_mean[i, k]
                    below_var[i, k] = max(J * J * s_var[i, k], -1.0 / z_var_below[i, k])
        g_mean = d_mean.T @ a_mean
        g_var = d_var.T @ (a_mean * a_mean)
        n_out, n_in1 = W.shape
        for j in range(n_out):
            for k in range(n_in1):
                v = V[j, k]
                rel = v * g_var[j, k]
                if rel >= min_var_ratio - 1.0:  # the batch-summed update (tagi._step)
                    W[j, k] += v * g_mean[j, k]
                    V[j, k] = v + v * rel
                    n_kept += 1
                else:  # over-counted: combine the rows' evidence (tagi._combine_rows)
                    prec = 1.0 / v
                    shift = 0.0
                    for i in range(B):
                        a = a_mean[i, k]
                        v_i = max(v + v * v * a * a * d_var[i, j], min_var_ratio * v)
                        prec += 1.0 / v_i - 1.0 / v
                        shift += v * a * d_mean[i, j] / v_i
                    W[j, k] += shift / prec
                    V[j, k] = 1.0 / prec
        if l > 0:
            d_mean, d_var = below_mean, below_var
    return n_kept, checked, before, inv_s, saved_m, saved_v


@njit(cache=True)
def _kernel_sq_residual(means, X, Y, inv_s, lo, hi, codes, slope):
    """``sum (y - mu_z)^2 * inv_s`` on rows ``lo:hi`` (the network at the
    posterior means, as the linearised forward pass gives it)."""
    n_layers = len(means)
    n_features = X.shape[1]
    B = hi - lo
    a_mean = np.ones((B, n_features + 1))
    _copy_block(a_mean, X[lo:hi])
    for l in range(n_layers):
        z_mean = a_mean @ means[l].T
        if l == n_layers - 1:
            break
        n_out = z_mean.shape[1]
        a_mean = np.ones((B, n_out + 1))
        for i in range(B):
            for j in range(n_out):
                a_mean[i, j] = _activation(codes[l], z_mean[i, j], slope)[0]
    total = 0.0
    for i in range(B):
        for j in range(z_mean.shape[1]):
            if inv_s[i, j] > 0.0:
                r = Y[lo + i, j] - z_mean[i, j]
                total += r * r * inv_s[i, j]
    return total


@njit(cache=True)
def run_epoch_kernel(
    means, variances, X, Y, mask, batch_size, noise_var, codes, slope, min_var_ratio, split
):
    """One pass over the rows of ``X`` in order, updating ``means``/``variances``
    (tuples of packed layer matrices) in place.

    ``mask`` is a boolean ``(n, n_outputs)`` array of observed outputs (all True
    for regression), ``noise_var`` a float64 ``(n_outputs,)`` array.  With
    ``split``, a batch whose summed update leaves the batch's weighted squared
    residual ``sum (y - mu_z)^2 / s_y`` larger than before (an overshoot) is
    undone and its two halves are processed
    in turn, each checked the same way (:func:`skbayesnn.inference.tagi._checked_step`).
    Returns ``(n_kept, n_steps, n_split)``: parameter updates that used the
    batch-summed form (the rest used the information-form combination), updates
    applied, and batches undone and split.  Matrix products go to BLAS; the
    element-wise steps are loops, so no temporaries are made for them.
    """
    n = X.shape[0]
    n_kept = 0
    n_steps = 0
    n_split = 0
    for start in range(0, n, batch_size):
        stack = [(start, min(start + batch_size, n))]
        while len(stack) > 0:
            lo, hi = stack.pop()
            kept, checked, before, inv_s, saved_m, saved_v = _kernel_step(
                means, variances, X, Y, mask, lo, hi, noise_var, codes, slope, min_var_ratio, split
            )
            if checked:
                after = _kernel_sq_residual(means, X, Y, inv_s, lo, hi, codes, slope)
                if not after <= before:  # overshoot (or not finite): undo and halve
                    for l in range(len(means)):
                        _copy_block(means[l], saved_m[l])
                        _copy_block(variances[l], saved_v[l])
                    n_split += 1
                    mid = lo + (hi - lo) // 2
                    stack.append((mid, hi))
                    stack.append((lo, mid))
                    continue
            n_kept += kept
            n_steps += 1
    return n_kept, n_steps, n_split
