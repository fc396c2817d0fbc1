"""Tractable approximate Gaussian inference (TAGI) for an MLP.

Goulet, Nguyen & Amiri (2021); see shared/methods/tagi.md.  The state is a
:class:`~skbayesnn.core.posterior.GaussianMLPPosterior` (independent Gaussian
weights and biases).  One update on a batch:

1. forward: moments of every layer with the shared core
   (:func:`~skbayesnn.core.linear.linear_moments` and local linearisation of the
   activations, tagi.md §3.3), keeping what the backward pass needs;
2. output layer: Gaussian conditioning on ``y = z_out + v`` (Eq. 14);
3. backward: the layer-wise RTS-like recursion (Eqs. 15–16) in the element-wise
   matrix form of tagi.md §4.3 / §4.5, with the per-example contributions of a
   batch summed, as the reference code does (§4.4).

During training each layer's bias is carried as the last column of its weight
matrix, with a constant input 1, so one matrix product updates both (the
algebra is unchanged: a bias is a weight on a deterministic unit input).  The
functions never call NumPy directly on the arrays, so the same code runs on CuPy;
plain NumPy arrays take the compiled kernel of :mod:`.tagi_kernel` instead, which
runs the same arithmetic (tests check the two agree) without the per-operation
overhead that dominates small batches.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .._backend import array_namespace, special
from ..core.activations import jacobian_squared, linearize_unchecked, value_unchecked
from ..core.gaussian import product_normalizer_log
from ..core.linear import linear_moments
from ..core.posterior import GaussianMLPPosterior
from ..core.propagate import propagate
from . import tagi_kernel


def init_posterior(layer_sizes, *, activation="relu", gain_w=0.25, gain_b=0.01, init="he",
                   rng, xp):
    """The TAGI prior: ``var_W = gain_w / n_in``, ``var_b = gain_b``, random means.

    ``init="xavier"`` gives ``var_W = gain_w * 2 / (n_in + n_out)`` instead, the
    reference code's scaling for tanh and cdf activations (tagi.md §7).

    Prior means are drawn from the prior itself, ``mu ~ N(0, var)``, to break the
    permutation symmetry (tagi.md §7; the UCI runs of the reference code use
    ``gain_w = 0.25`` and ``gain_b = 0.01``).

    Parameters
    ----------
    layer_sizes : list of int
        ``[n_inputs, hidden..., n_outputs]``.
    rng : numpy.random.Generator
        Draws happen on the host so a seed gives the same prior on every device.
    xp : namespace
    """
    wm, wv, bm, bv = [], [], [], []
    for n_in, n_out in zip(layer_sizes[:-1], layer_sizes[1:]):
        var_w = gain_w * (2.0 / (n_in + n_out) if init == "xavier" else 1.0 / n_in)
        wm.append(xp.asarray(rng.normal(0.0, var_w**0.5, size=(n_out, n_in))))
        wv.append(xp.full((n_out, n_in), var_w))
        bm.append(xp.asarray(rng.normal(0.0, gain_b**0.5, size=n_out)))
        bv.append(xp.full(n_out, float(gain_b)))
    return GaussianMLPPosterior(wm, wv, bm, bv, activation=activation)


def forward(posterior, X):
    """Moments ``(z_mean, z_var)`` of the output latent for inputs ``X``.

    TAGI linearises the activations at the mean (tagi.md §3.3), so this is
    ``propagate(posterior, X, act_approx="linearize")``.
    """
    return propagate(posterior, X, act_approx="linearize")


def _append_column(a, column, xp):
    return xp.concatenate([a, column[: a.shape[0]]], axis=1)


def _pack(posterior, xp):
    """Per layer, weights with the bias as last column: ``(n_out, n_in + 1)``."""
    means = [
        xp.concatenate([w, b[:, None]], axis=1)
        for w, b in zip(posterior.weight_means, posterior.bias_means)
    ]
    variances = [
        xp.concatenate([w, b[:, None]], axis=1)
        for w, b in zip(posterior.weight_vars, posterior.bias_vars)
    ]
    return means, variances


def _unpack(posterior, means, variances):
    for l, (m, v) in enumerate(zip(means, variances)):
        posterior.weight_means[l], posterior.bias_means[l] = m[:, :-1], m[:, -1]
        posterior.weight_vars[l], posterior.bias_vars[l] = v[:, :-1], v[:, -1]


def _forward_packed(means, variances, x, x_sq, activations, slope, ones, zeros, xp):
    """Forward pass on packed layers (tagi.md §3.3, §4.5).

    ``x`` has the constant column appended and ``x_sq = x * x``.  Returns the
    output moments, each layer's ``(input, input ** 2)`` and each hidden layer's
    ``(z_var, jacobian)``.
    """
    a_mean, a_sq, a_var = x, x_sq, None
    inputs, hidden = [], []
    for l, (m, v) in enumerate(zip(means, variances)):
        z_mean, z_var = linear_moments(a_mean, a_var, m, v, a_mean_sq=a_sq)
        inputs.append((a_mean, a_sq))
        if l == len(means) - 1:
            break
        act_mean, act_var, jac = linearize_unchecked(xp, activations[l], z_mean, z_var, slope)
        hidden.append((z_var, jac))
        a_mean = _append_column(act_mean, ones, xp)
        a_sq = a_mean * a_mean
        a_var = _append_column(act_var, zeros, xp)
    return z_mean, z_var, inputs, hidden


def _step(
    means,
    variances,
    x,
    x_sq,
    Y,
    noise_var,
    obs_mask,
    activations,
    slope,
    min_var_ratio,
    ones,
    zeros,
    xp,
):
    """One TAGI update of the packed layers on a batch.

    Returns the number of parameter updates that used the batch-summed form and,
    for :func:`_checked_step`, the weighted squared residual
    ``sum (y - mu_z)^2 / s_y`` under the pre-update means, the weights
    ``1 / s_y`` (0 where unobserved) and the gain trace ``sum s_z / s_y``.  On a
    GPU this reads one count per layer back to the host, to skip the
    information-form combination when no parameter needs it."""
    z_mean, z_var, inputs, hidden = _forward_packed(
        means, variances, x, x_sq, activations, slope, ones, zeros, xp
    )
    # Output conditioning on y = z + v (Eq. 14) in innovation form (tagi.md §4.3):
    # delta_mu = (mu_z|y - mu_z) / s_z = (y - mu_z) / (s_z + sigma_v^2) and
    # delta_s = (s_z|y - s_z) / s_z^2 = -1 / (s_z + sigma_v^2).
    s_y = z_var + noise_var
    resid = Y - z_mean
    d_mean = resid / s_y
    d_var = -1.0 / s_y
    if obs_mask is not None:  # unobserved outputs (classification tree, §8)
        d_mean = xp.where(obs_mask, d_mean, 0.0)
        d_var = xp.where(obs_mask, d_var, 0.0)
    check = (xp.sum(resid * d_mean), -d_var, -xp.sum(z_var * d_var))
    n_kept = 0
    for l in range(len(means) - 1, -1, -1):
        a_mean, a_sq = inputs[l]
        m, v = means[l], variances[l]
        # cov(Z+_i, W_ik) = S_W,ik mu_A,k (Eq. 4): the batch-summed updates are
        # S_W (delta_mu^T mu_A) and S_W^2 (delta_s^T mu_A^2) (§4.4).  ``rel`` is the
        # relative variance change.  Where a summed batch would remove more than
        # 1 - min_var_ratio of the variance it over-counts the batch's information
        # (tagi.md §4.4: "summed variance decrements can drive S_W below 0"); that
        # parameter instead combines the rows' evidence in information form
        # (:func:`_combine_rows`).
        rel = v * (d_var.T @ a_sq)
        ok = rel >= min_var_ratio - 1.0
        if l > 0:
            # Smooth the layer below with the pre-update means (§4.4):
            # cov(Z_k, Z+_i) = s_Z,k J_k M_W,ik, so its innovations are
            # delta_mu_Z = J (delta_mu M_W) and delta_s_Z = J^2 (delta_s M_W^2),
            # the latter kept >= -1/s_Z so the smoothed variance stays >= 0
            # (s_Z > 0: it includes the bias variance, which the guard keeps > 0).
            z_var_below, jac = hidden[l - 1]
            w = m[:, :-1]
            next_mean = jac * (d_mean @ w)
            next_var = xp.maximum(
                jacobian_squared(activations[l - 1], jac) * (d_var @ (w * w)),
                -1.0 / z_var_below,
            )
        n_ok = xp.count_nonzero(ok)
        if int(n_ok) == ok.size:  # the usual case; one host sync per layer and batch
            means[l] = m + v * (d_mean.T @ a_mean)
            variances[l] = v + v * rel
        else:
            m_comb, v_comb = _combine_rows(m, v, a_mean, a_sq, d_mean, d_var, min_var_ratio, xp)
            means[l] = xp.where(ok, m + v * (d_mean.T @ a_mean), m_comb)
            variances[l] = xp.where(ok, v + v * rel, v_comb)
        n_kept = n_kept + n_ok
        if l > 0:
            d_mean, d_var = next_mean, next_var
    return (n_kept, *check)


def _sq_residual(means, x, Y, inv_s, activations, slope, ones, xp):
    """``sum (y - mu_z)^2 * inv_s`` for the packed layers at their means (the
    mean of the linearised forward pass)."""
    a = x
    for l, m in enumerate(means):
        z = a @ m.T
        if l == len(means) - 1:
            break
        a = _append_column(value_unchecked(xp, activations[l], z, slope), ones, xp)
    resid = Y - z
    return xp.sum(resid * resid * inv_s)


def _checked_step(step, residual, means, variances, x, x_sq, Y, obs_mask):
    """:func:`_step` on a batch, undone and split where it overshoots.

    The batch-summed update (tagi.md §4.4) treats the B rows as independent
    evidence about parameters they all share.  Linearised, it changes the
    batch's residuals ``r`` to ``(I - C D^-1) r``, with ``C`` the residuals'
    covariance through the parameters and ``D = diag(s_y)``; in
    ``u = D^-1/2 r`` that is ``(I - M) u`` with ``M = D^-1/2 C D^-1/2``
    positive semi-definite.  A single row is the exact one-observation update
    (Eq. 14, ``M = s_z / s_y < 1``), but where the rows agree the eigenvalues of
    ``M`` reach about B times that; past 2 the step overshoots, ``sum r^2 / s_y``
    grows instead of shrinking and batch after batch the means diverge.  So
    where the summed update increases ``sum r^2 / s_y`` the batch is restored
    and its halves are processed in turn, the posterior of the first being the
    prior of the second (recursive learning, §4.4).  No check is needed where
    the gain trace ``sum s_z / s_y`` is at most 2 (it bounds the eigenvalues
    of ``M`` up to TAGI's diagonal approximations), e.g. for a single row.
    ``step(x, x_sq, Y, obs_mask)`` is :func:`_step` on the given rows (it
    rebinds the arrays of the lists ``means``, ``variances``) and
    ``residual(x, Y, inv_s)`` :func:`_sq_residual` at the current means.
    Returns ``(n_kept, n_steps, n_split)`` as
    :func:`tagi_kernel.run_epoch_kernel`.
    """
    n_kept, n_steps, n_split = 0, 0, 0
    stack = [(0, x.shape[0])]
    while stack:
        lo, hi = stack.pop()
        rows = slice(lo, hi)
        mask = None if obs_mask is None else obs_mask[rows]
        saved = (list(means), list(variances))  # updates rebind the arrays
        kept, before, inv_s, trace = step(x[rows], x_sq[rows], Y[rows], mask)
        if hi - lo > 1 and float(trace) > 2.0:
            after = residual(x[rows], Y[rows], inv_s)
            if not bool(after <= before):  # overshoot (or not finite): undo and halve
                means[:], variances[:] = saved
                n_split += 1
                mid = lo + (hi - lo) // 2
                stack += [(mid, hi), (lo, mid)]
                continue
        n_kept = n_kept + kept
        n_steps += 1
    return n_kept, n_steps, n_split


def _combine_rows(m, v, a_mean, a_sq, d_mean, d_var, min_var_ratio, xp):
    """Combine a batch's per-row parameter updates in information form.

    Row ``i`` alone would move a parameter ``N(m, v)`` to ``N(m_i, v_i)`` with
    ``m_i = m + v a_i delta_mu_i`` and ``v_i = v + v^2 a_i^2 delta_s_i`` (tagi.md
    §4.4).  Treating the rows as independent evidence, the posterior is the
    product of the row posteriors divided by the prior ``B - 1`` times:

        1/v' = 1/v + sum_i (1/v_i - 1/v),    m' = m + v' sum_i (m_i - m) / v_i.

    To first order in the updates this is the batch sum, and ``v'`` stays in
    ``(0, v]`` however much the rows remove, so it replaces the sum where the sum
    would over-count (``v_i`` is floored at ``min_var_ratio * v``: one row never
    removes more than that).  Shapes: ``m, v`` (n_out, n_in + 1); ``a_*`` (B,
    n_in + 1); ``d_*`` (B, n_out).
    """
    v_rows = v + (v * v) * (d_var[:, :, None] * a_sq[:, None, :])  # (B, n_out, n_in + 1)
    v_rows = xp.maximum(v_rows, min_var_ratio * v)
    prec = 1.0 / v + xp.sum(1.0 / v_rows - 1.0 / v, axis=0)
    shift = xp.sum(v * (d_mean[:, :, None] * a_mean[:, None, :]) / v_rows, axis=0)
    return m + shift / prec, 1.0 / prec


def run_epoch(
    posterior,
    X,
    Y,
    noise_var,
    *,
    batch_size,
    order,
    obs_mask=None,
    min_var_ratio=1e-3,
    split_overshoot=True,
):
    """One pass over ``X[order]`` in consecutive batches, updating ``posterior``.

    Parameters
    ----------
    posterior : GaussianMLPPosterior
        Updated in place (its arrays are rebound, never written into).
    X : array of shape (n, n_inputs)
    Y : array of shape (n, n_outputs)
    noise_var : float or array of shape (n_outputs,)
        ``sigma_v ** 2`` in the units of ``Y``, one per output at most (batches
        have fewer than ``batch_size`` rows at the end of the pass and where an
        overshoot guard splits them, so a per-row array would not fit).
    batch_size : int
    order : int array of shape (n,)
        Row order of the pass.
    obs_mask : bool array of shape (n, n_outputs), optional
        Outputs to condition on (all when None).
    min_var_ratio : float, default=1e-3
        Variance guard: where a parameter's batch-summed update would leave less
        than this share of its variance, the rows' updates are combined in
        information form instead (:func:`_combine_rows`).
    split_overshoot : bool, default=True
        Undo a batch's update where it leaves the batch's squared residual
        (weighted by ``1 / s_y``) larger than before and process the batch's
        halves in turn instead (:func:`_checked_step`); False applies every
        batch's summed update as the reference code does.

    Returns
    -------
    n_combined : int
        Parameter updates that used the information-form combination.
    n_split : int
        Batches (or half-batches) undone and split.
    """
    xp = array_namespace(X, Y)
    means, variances = _pack(posterior, xp)
    activations = posterior.hidden_activations
    slope = posterior.negative_slope
    X, Y = X[order], Y[order]
    mask = None if obs_mask is None else obs_mask[order]
    if _use_kernel(X, Y, mask, noise_var):
        n_kept, n_steps, n_split = tagi_kernel.run_epoch_kernel(
            tuple(means),
            tuple(variances),
            X,
            Y,
            np.ones(Y.shape, dtype=bool) if mask is None else mask,
            batch_size,
            np.broadcast_to(np.asarray(noise_var, dtype=np.float64), (Y.shape[1],)).copy(),
            np.array([tagi_kernel.ACTIVATION_CODES[a] for a in activations] or [0]),
            float(slope),
            float(min_var_ratio),
            bool(split_overshoot),
        )
    else:
        # (columns for the batches' rows: no more than the data, whatever
        # batch_size says; 1e9 asked for 7.5 GiB)
        ones = xp.ones((min(batch_size, X.shape[0]), 1))
        zeros = xp.zeros((min(batch_size, X.shape[0]), 1))
        X = _append_column(X, xp.ones((X.shape[0], 1)), xp)
        X_sq = X * X
        n_kept, n_steps, n_split = 0, 0, 0

        def step(x, x_sq, Y, obs_mask):
            return _step(means, variances, x, x_sq, Y, noise_var, obs_mask, activations, slope,
                         min_var_ratio, ones, zeros, xp)

        def residual(x, Y, inv_s):
            return _sq_residual(means, x, Y, inv_s, activations, slope, ones, xp)

        for start in range(0, X.shape[0], batch_size):
            rows = slice(start, start + batch_size)
            batch = (X[rows], X_sq[rows], Y[rows], None if mask is None else mask[rows])
            if split_overshoot:
                kept, steps, split = _checked_step(step, residual, means, variances, *batch)
            else:
                kept, steps, split = step(*batch)[0], 1, 0
            n_kept, n_steps, n_split = n_kept + kept, n_steps + steps, n_split + split
    _unpack(posterior, means, variances)
    n_params = sum(m.size for m in means)
    return n_steps * n_params - int(n_kept), int(n_split)


def _use_kernel(X, Y, mask, noise_var):
    """The compiled kernel takes plain float64 NumPy arrays (and the noise as
    one per output)."""
    return (
        all(type(a) is np.ndarray and a.dtype == np.float64 for a in (X, Y))
        and (mask is None or (type(mask) is np.ndarray and mask.dtype == bool))
        and (np.ndim(noise_var) == 0 or type(noise_var) is np.ndarray)
    )


def update(posterior, X, Y, noise_var, *, obs_mask=None, min_var_ratio=1e-3):
    """One TAGI step on the whole batch ``(X, Y)``: forward, output conditioning,
    backward update (see :func:`run_epoch`; the batch is never split, so a
    large batch may overshoot); returns the number of parameter updates
    combined in information form."""
    xp = array_namespace(X)
    n_combined, _ = run_epoch(
        posterior,
        X,
        Y,
        noise_var,
        batch_size=X.shape[0],
        order=xp.arange(X.shape[0]),
        obs_mask=obs_mask,
        min_var_ratio=min_var_ratio,
        split_overshoot=False,
    )
    return n_combined


def mean_log_likelihood(posterior, X, Y, noise_var):
    """Mean over rows of ``sum_k log N(y_k; mu_k, s_k + noise_var)`` (the predictive LL)."""
    xp = array_namespace(X)
    z_mean, z_var = forward(posterior, X)
    return float(xp.mean(xp.sum(product_normalizer_log(Y, 0.0, z_mean, z_var + noise_var), axis=1)))


# ---------------------------------------------------------------- classification
@dataclass
class ClassTree:
    """Hierarchical binary-tree encoding of ``n_classes`` labels (tagi.md §8).

    Class ``c`` is the bit string of ``c`` with ``depth = ceil(log2 K)`` bits,
    most significant first.  Every distinct proper prefix of the K codes is an
    output node (K = 10 gives 11 nodes; a full tree K - 1).  ``nodes[c, h]`` is the
    output unit at level ``h`` on class ``c``'s path and ``signs[c, h]`` is +1 when
    the path goes to the 0-branch there and -1 for the 1-branch (the training
    target of that node).
    """

    n_classes: int
    n_nodes: int
    nodes: object  # (K, depth) int
    signs: object  # (K, depth) float, +-1

    @classmethod
    def build(cls, n_classes):
        import numpy as np

        depth = max(1, int(np.ceil(np.log2(n_classes))))
        codes = [[(c >> (depth - 1 - h)) & 1 for h in range(depth)] for c in range(n_classes)]
        index = {}  # proper prefix -> node id, in breadth-first order
        for h in range(depth):
            for code in codes:
                index.setdefault(tuple(code[:h]), len(index))
        nodes = np.array([[index[tuple(code[:h])] for h in range(depth)] for code in codes])
        signs = 1.0 - 2.0 * np.array(codes, dtype=float)
        return cls(n_classes, len(index), nodes, signs)

    def targets(self, y_index, xp):
        """Targets ``(n, n_nodes)`` (+-1 on each row's path, 0 elsewhere) and the
        boolean mask of observed nodes."""
        import numpy as np

        n = len(y_index)
        Y = np.zeros((n, self.n_nodes))
        mask = np.zeros((n, self.n_nodes), dtype=bool)
        rows = np.repeat(np.arange(n), self.nodes.shape[1])
        cols = self.nodes[y_index].ravel()
        Y[rows, cols] = self.signs[y_index].ravel()
        mask[rows, cols] = True
        return xp.asarray(Y), xp.asarray(mask)

    def proba(self, mean, var, alpha):
        """Class probabilities from Gaussian node outputs (Eq. 24), renormalised
        over the K classes (the unused leaves of a non-full tree carry mass)."""
        xp = array_namespace(mean, var)
        nodes = xp.asarray(self.nodes)
        signs = xp.asarray(self.signs)
        z = signs * mean[:, nodes] / xp.sqrt(alpha * alpha + var[:, nodes])  # (n, K, depth)
        log_p = xp.sum(special(xp).log_ndtr(z), axis=-1)
        log_p = log_p - xp.max(log_p, axis=1, keepdims=True)
        p = xp.exp(log_p)
        return p / xp.sum(p, axis=1, keepdims=True)
