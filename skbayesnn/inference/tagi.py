"""Tractable approximate Gaussian inference (TAGI) for an MLP.

Goulet, Nguyen & Amiri (2021); see shared/methods/tagi.md.  The state is a
:class:`~skbayesnn.core.posterior.GaussianMLPPosterior` (independent Gaussian
weights and biases).  One update on a batch:

1. forward: moments of every layer with the shared core
   (:func:`~skbayesnn.core.linear.linear_moments` and local linearisation of the
   activations, tagi.md §3.3), caching what the backward pass needs;
2. output layer: Gaussian conditioning on ``y = z_out + v`` (Eq. 14);
3. backward: the layer-wise RTS-like recursion (Eqs. 15–16) in the element-wise
   matrix form of tagi.md §4.3 / §4.5, with the per-example contributions of a
   batch summed, as the reference code does (§4.4).

The functions update the posterior's arrays and return small diagnostics; they
never call NumPy directly on the arrays, so the same code runs on CuPy.
"""

from __future__ import annotations

from dataclasses import dataclass

from .._backend import array_namespace, special
from ..core.activations import linearized_moments
from ..core.gaussian import product_normalizer_log
from ..core.linear import linear_moments
from ..core.posterior import GaussianMLPPosterior


@dataclass
class LayerCache:
    """Forward quantities of one layer kept for the backward pass (tagi.md §3.3)."""

    a_mean: object  # layer input mean (B, n_in)
    a_var: object  # layer input variance (B, n_in), None for deterministic inputs
    z_mean: object  # pre-activation mean (B, n_out)
    z_var: object  # pre-activation variance (B, n_out)
    jacobian: object  # activation Jacobian at z_mean (B, n_out); None for the output layer


def init_posterior(layer_sizes, *, activation="relu", gain_w=0.25, gain_b=0.01, rng, xp):
    """The TAGI prior: ``var_W = gain_w / n_in``, ``var_b = gain_b``, random means.

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
        var_w = gain_w / n_in
        wm.append(xp.asarray(rng.normal(0.0, var_w**0.5, size=(n_out, n_in))))
        wv.append(xp.full((n_out, n_in), var_w))
        bm.append(xp.asarray(rng.normal(0.0, gain_b**0.5, size=n_out)))
        bv.append(xp.full(n_out, float(gain_b)))
    return GaussianMLPPosterior(wm, wv, bm, bv, activation=activation)


def forward(posterior, X):
    """Moments of the output and the per-layer cache (tagi.md §3.3, §4.5).

    The activations are linearised at the mean, so the output moments equal
    ``propagate(posterior, X, act_approx="linearize")``.

    Returns
    -------
    z_mean, z_var : arrays of shape (B, n_outputs)
    caches : list of LayerCache, one per weight layer
    """
    a_mean, a_var = X, None
    caches = []
    hidden = posterior.hidden_activations
    last = posterior.n_layers - 1
    for l in range(posterior.n_layers):
        z_mean, z_var = linear_moments(
            a_mean,
            a_var,
            posterior.weight_means[l],
            posterior.weight_vars[l],
            posterior.bias_means[l],
            posterior.bias_vars[l],
        )
        if l < last:
            next_mean, next_var, jac = linearized_moments(
                hidden[l], z_mean, z_var, negative_slope=posterior.negative_slope
            )
        else:
            jac = None
        caches.append(LayerCache(a_mean, a_var, z_mean, z_var, jac))
        if l < last:
            a_mean, a_var = next_mean, next_var
    return z_mean, z_var, caches


def output_posterior(z_mean, z_var, Y, noise_var, obs_mask=None):
    """Condition the output units on ``y = z + v``, ``v ~ N(0, noise_var)`` (Eq. 14).

    Returns the posterior mean and variance of ``z``; where ``obs_mask`` is False
    (unobserved outputs, e.g. off-path nodes of the classification tree, §8) the
    prior is returned unchanged.
    """
    xp = array_namespace(z_mean, Y)
    s_y = z_var + noise_var
    gain = z_var / s_y
    post_mean = z_mean + gain * (Y - z_mean)
    post_var = z_var - gain * z_var
    if obs_mask is not None:
        post_mean = xp.where(obs_mask, post_mean, z_mean)
        post_var = xp.where(obs_mask, post_var, z_var)
    return post_mean, post_var


def _innovation(post_mean, post_var, prior_mean, prior_var, xp):
    """``delta_mu = (mu|y - mu)/s`` and ``delta_s = (s|y - s)/s^2`` (tagi.md §4.3).

    Units with zero prior variance carry no information about the parameters
    (their cross-covariances vanish too): their deltas are set to 0.
    """
    ok = prior_var > 0
    safe = xp.where(ok, prior_var, 1.0)
    d_mean = xp.where(ok, (post_mean - prior_mean) / safe, 0.0)
    d_var = xp.where(ok, (post_var - prior_var) / (safe * safe), 0.0)
    return d_mean, d_var


def _guarded_step(mean, var, d_mean, d_var, min_var_ratio, xp):
    """Apply ``(d_mean, d_var)`` where the new variance stays >= ``min_var_ratio * var``.

    Summing per-example variance decrements over a batch can remove more than a
    parameter's whole variance (tagi.md §4.4, "summed variance decrements can drive
    S_W below 0"); such a step over-counts the batch's information, so for that
    parameter both mean and variance keep their old values (a skipped update, as
    PBP does per weight, pbp.md §4.4).  Returns the new arrays and the skip count.
    """
    new_var = var + d_var
    ok = new_var >= min_var_ratio * var
    return xp.where(ok, mean + d_mean, mean), xp.where(ok, new_var, var), ~ok


def backward_update(posterior, caches, post_mean, post_var, *, min_var_ratio=1e-3):
    """Update the posterior in place from the output posterior (Eqs. 15–16, §4.5).

    For each layer from the top: the weights and biases producing ``Z+`` get the
    batch-summed RTS update (skipped per parameter where it would remove more than
    ``1 - min_var_ratio`` of the variance, see :func:`_guarded_step`); then the
    pre-activations of the layer below are smoothed with the *pre-update* weight
    means.

    Returns
    -------
    n_skipped : int
        Parameter updates skipped by the variance guard.
    """
    xp = array_namespace(post_mean)
    skipped = []
    for l in range(posterior.n_layers - 1, -1, -1):
        cache = caches[l]
        d_mean, d_var = _innovation(post_mean, post_var, cache.z_mean, cache.z_var, xp)
        wm, wv = posterior.weight_means[l], posterior.weight_vars[l]
        bm, bv = posterior.bias_means[l], posterior.bias_vars[l]
        # cov(Z+_i, W_ik) = S_W,ik mu_A,k (Eq. 4), so the gain is S_W mu_A / s_Z+.
        posterior.weight_means[l], posterior.weight_vars[l], skip_w = _guarded_step(
            wm,
            wv,
            wv * (d_mean.T @ cache.a_mean),
            wv * wv * (d_var.T @ (cache.a_mean * cache.a_mean)),
            min_var_ratio,
            xp,
        )
        posterior.bias_means[l], posterior.bias_vars[l], skip_b = _guarded_step(
            bm, bv, bv * xp.sum(d_mean, axis=0), bv * bv * xp.sum(d_var, axis=0), min_var_ratio, xp
        )
        skipped += [xp.sum(skip_w), xp.sum(skip_b)]
        if l == 0:
            break
        below = caches[l - 1]
        # cov(Z_k, Z+_i) = s_Z,k J_k M_W,ik with the pre-update means wm (§4.4), so
        # Z|y = Z + (s_Z J) (delta_mu M_W) and likewise for the variance.
        g = below.z_var * below.jacobian
        post_mean = below.z_mean + g * (d_mean @ wm)
        post_var = xp.maximum(below.z_var + g * g * (d_var @ (wm * wm)), 0.0)
    return int(sum(skipped))


def update(posterior, X, Y, noise_var, *, obs_mask=None, min_var_ratio=1e-3):
    """One TAGI step on a batch: forward, output conditioning, backward update.

    Parameters
    ----------
    posterior : GaussianMLPPosterior
        Updated in place.
    X : array of shape (B, n_inputs)
    Y : array of shape (B, n_outputs)
    noise_var : float or array broadcastable to (B, n_outputs)
        ``sigma_v ** 2`` in the units of ``Y``.
    obs_mask : bool array of shape (B, n_outputs), optional
        Outputs to condition on (all when None).
    min_var_ratio : float
        Variance guard of :func:`backward_update`.

    Returns
    -------
    n_skipped : int
    """
    z_mean, z_var, caches = forward(posterior, X)
    post_mean, post_var = output_posterior(z_mean, z_var, Y, noise_var, obs_mask)
    return backward_update(posterior, caches, post_mean, post_var, min_var_ratio=min_var_ratio)


def run_epoch(posterior, X, Y, noise_var, *, batch_size, order, obs_mask=None, min_var_ratio=1e-3):
    """One pass over ``X[order]`` in consecutive batches; returns the skip count."""
    n_skipped = 0
    for start in range(0, len(order), batch_size):
        idx = order[start : start + batch_size]
        mask = None if obs_mask is None else obs_mask[idx]
        n_skipped += update(
            posterior, X[idx], Y[idx], noise_var, obs_mask=mask, min_var_ratio=min_var_ratio
        )
    return n_skipped


def mean_log_likelihood(posterior, X, Y, noise_var):
    """Mean over rows of ``sum_k log N(y_k; mu_k, s_k + noise_var)`` (the predictive LL)."""
    xp = array_namespace(X)
    z_mean, z_var, _ = forward(posterior, X)
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
