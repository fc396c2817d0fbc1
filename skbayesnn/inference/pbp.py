"""Probabilistic backpropagation (PBP): the inference engine.

Hernández-Lobato & Adams (2015), as extracted in shared/methods/pbp.md.  PBP is
assumed-density filtering (ADF) for a Bayesian ReLU MLP with one regression
output, Gaussian noise of precision ``gamma ~ Gamma(alpha_noise, beta_noise)`` and
a shared prior precision ``lambda ~ Gamma(alpha_prior, beta_prior)`` on every
weight (pbp.md §0-§1).

Representation (pbp.md §1.1, §2.1).  Layer ``l`` keeps a mean matrix ``M`` and a
variance matrix ``V`` of shape ``(n_out, n_in + 1)``; the last column is the bias,
a weight on a constant input 1, and the layer input is scaled by
``sqrt(s)``, ``s = 1 / (n_in + 1)``.  Folding the scaling into the weights gives a
:class:`~skbayesnn.core.posterior.GaussianMLPPosterior` with
``W = sqrt(s) M[:, :-1]``, ``Var W = s V[:, :-1]`` (likewise the bias), on which
``propagate(..., act_approx="moment_match")`` gives PBP's forward moments
(:func:`to_posterior`, :func:`from_posterior`).

Contents

* :func:`forward` -- moments of every layer (pbp.md §2.1-2.2) with the shared
  :func:`~skbayesnn.core.linear.linear_moments` and
  :func:`~skbayesnn.core.activations.relu_moments`, for one point or a batch;
* :func:`noise_log_z` -- ``log Z``, ``log Z1``, ``log Z2`` (pbp.md §2.3);
* :func:`log_z_grads` -- ``log Z`` and its closed-form gradients with respect to
  every ``M`` and ``V`` (pbp.md §3.2), no autodiff;
* :func:`apply_adf_step` -- the moment-matching update (pbp.md §3.1) with the
  per-weight rejection rule (pbp.md §4.4);
* :func:`gamma_adf_update` -- Minka's Gamma ADF rule (pbp.md §3.3);
* :func:`adf_update` -- one data point: the two above in the reference order;
* :func:`refine_prior` -- the sequential EP sweep over the prior factors
  (pbp.md §3.4);
* :func:`init_state` -- the initialisation of pbp.md §4.2, and :func:`run_epoch`
  -- one epoch of the schedule of pbp.md §4.1.

Everything runs on the array namespace of its inputs (NumPy, CuPy or the test
suite's strict namespace), except :func:`refine_prior`, which is a sequential
scalar loop in the reference and runs on the host (it moves the arrays with
:func:`~skbayesnn._backend.asnumpy` and back with ``xp.asarray``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import NamedTuple

import numpy as np

from .._backend import array_namespace, asnumpy, special
from ..core.activations import relu_moments
from ..core.linear import linear_moments
from ..core.posterior import GaussianMLPPosterior

__all__ = [
    "MIN_VAR",
    "PBPState",
    "LayerCache",
    "ADFResult",
    "layer_scales",
    "init_state",
    "to_posterior",
    "from_posterior",
    "forward",
    "noise_log_z",
    "predictive_moments",
    "log_z_grads",
    "apply_adf_step",
    "gamma_adf_update",
    "adf_update",
    "refine_prior",
    "run_epoch",
]

#: A weight update whose new variance is not above this is rejected (pbp.md §4.4).
MIN_VAR = 1e-100
# EP guard of the reference: a prior factor is skipped when its cavity variance
# is not in (0, 1e6) (pbp.md §3.4, §4.4 item 3).
_MAX_CAVITY_VAR = 1e6
# Largest argument given to exp in the Gamma update: beyond it the result would
# be rejected by the guard anyway, and clipping avoids overflow warnings.
_MAX_EXP_ARG = 700.0
_LOG_2PI = math.log(2.0 * math.pi)
# Clip of the standardised mean m/s in the ReLU derivatives, as in
# core.activations (phi(50) underflows to 0 and Phi(50) rounds to 1).
_A_MAX = 50.0


# ---------------------------------------------------------------------------
# state and representation
# ---------------------------------------------------------------------------


@dataclass
class PBPState:
    """Everything PBP learns (pbp.md §1.3, §3.4).

    Parameters
    ----------
    means, variances : list of arrays of shape (n_out, n_in + 1)
        Per layer, the means ``M`` and variances ``V`` of the weights; the last
        column is the bias.  The layer input is scaled by ``1/sqrt(n_in + 1)``.
    alpha_noise, beta_noise : float or 0-d array
        ``q(gamma) = Gamma(alpha_noise, beta_noise)`` (shape/rate) of the noise
        precision.
    alpha_prior, beta_prior : float
        ``q(lambda) = Gamma(alpha_prior, beta_prior)`` of the prior precision.
    m_hat_nat, v_hat_nat, a_hat_nat, b_hat_nat : list of arrays like ``means``
        Natural parameters of each weight's approximate prior factor (pbp.md
        §3.4): Gaussian precision-times-mean and precision, and the Gamma part in
        the Gamma natural parameters ``(alpha - 1, -beta)``.
    """

    means: list
    variances: list
    alpha_noise: object
    beta_noise: object
    alpha_prior: float
    beta_prior: float
    m_hat_nat: list
    v_hat_nat: list
    a_hat_nat: list
    b_hat_nat: list

    @property
    def layer_sizes(self):
        """Widths ``[n_inputs, hidden..., n_outputs]``."""
        return [self.means[0].shape[1] - 1] + [m.shape[0] for m in self.means]


class LayerCache(NamedTuple):
    """What :func:`forward` keeps of one layer for the backward pass.

    ``in_mean``/``in_var`` are the layer input with the bias entry (mean 1,
    variance 0) appended; ``in_var`` is None for the (deterministic) network
    input.  ``pre_mean``/``pre_var`` are the moments of ``a = W [z; 1] sqrt(s)``,
    and for hidden layers ``out_mean``/``out_var``/``out_cdf`` are the ReLU
    moments and ``Phi(m/s)`` (None for the output layer).
    """

    in_mean: object
    in_var: object
    pre_mean: object
    pre_var: object
    out_mean: object
    out_var: object
    out_cdf: object


class ADFResult(NamedTuple):
    """Result of :func:`adf_update`.

    ``n_rejected`` (number of weights that kept their old mean and variance) and
    ``noise_rejected`` (1 if the Gamma update was discarded, else 0) are 0-d
    arrays of the namespace, so that a loop over data points does not have to
    synchronise with a GPU; convert them with ``int`` when needed.
    """

    means: list
    variances: list
    alpha_noise: object
    beta_noise: object
    log_z: object
    n_rejected: object
    noise_rejected: object


def layer_scales(means):
    """The input scaling ``s = 1 / (n_in + 1)`` of every layer (pbp.md §1.1).

    Parameters
    ----------
    means : list of arrays of shape (n_out, n_in + 1)

    Returns
    -------
    list of float
        ``s`` per layer; the layer computes ``a = sqrt(s) M [z; 1]``.
    """
    return [1.0 / m.shape[1] for m in means]


def init_state(
    layer_sizes,
    *,
    rng,
    xp=np,
    alpha_prior=6.0,
    beta_prior=6.0,
    alpha_noise=6.0,
    beta_noise=6.0,
):
    """The initial PBP state (pbp.md §4.2 and the EP factors of §3.4).

    * ``M_ij ~ N(0, 1 / (n_in + 1))`` for symmetry breaking (not accounted for by
      any factor);
    * ``V_ij = beta_prior / (alpha_prior - 1)`` (the prior variance, 1.2 by
      default);
    * every prior factor starts as ``N(0, beta_prior / (alpha_prior - 1))``
      (``v_hat_nat = (alpha_prior - 1)/beta_prior``, the rest 0), so that
      ``q(lambda) = p(lambda)``.

    The defaults ``Gamma(6, 6)`` for both precisions are those of the reference
    code for standardised targets (pbp.md §1.2).

    Parameters
    ----------
    layer_sizes : sequence of int
        ``[n_inputs, hidden..., 1]``; PBP has one output (pbp.md §1.1).
    rng : numpy.random.Generator
        Draws happen on the host, so a seed gives the same state on every
        device.
    xp : namespace, default=numpy
        Namespace of the returned arrays.
    alpha_prior, beta_prior : float, default=6.0
        Prior ``Gamma(alpha, beta)`` of the weight precision; ``alpha_prior > 1``.
    alpha_noise, beta_noise : float, default=6.0
        Prior ``Gamma(alpha, beta)`` of the noise precision; ``alpha_noise > 1``.

    Returns
    -------
    PBPState
    """
    sizes = [int(n) for n in layer_sizes]
    if len(sizes) < 2 or min(sizes) < 1:
        raise ValueError(
            f"layer_sizes must list at least two positive widths, got {layer_sizes!r}."
        )
    if sizes[-1] != 1:
        raise ValueError(f"PBP has a single output (pbp.md §1.1), got layer_sizes={layer_sizes!r}.")
    for name, a, b in (("prior", alpha_prior, beta_prior), ("noise", alpha_noise, beta_noise)):
        if not (float(a) > 1.0 and float(b) > 0.0 and math.isfinite(a) and math.isfinite(b)):
            raise ValueError(
                f"alpha_{name} must be > 1 and beta_{name} > 0 (finite), got {a!r} and {b!r}."
            )
    prior_var = float(beta_prior) / (float(alpha_prior) - 1.0)
    means, variances, m_hat, v_hat, a_hat, b_hat = [], [], [], [], [], []
    for n_in, n_out in zip(sizes[:-1], sizes[1:]):
        shape = (n_out, n_in + 1)
        draw = rng.standard_normal(shape) / math.sqrt(n_in + 1)
        means.append(xp.asarray(draw, dtype=xp.float64))
        variances.append(xp.full(shape, prior_var, dtype=xp.float64))
        m_hat.append(xp.zeros(shape, dtype=xp.float64))
        v_hat.append(xp.full(shape, 1.0 / prior_var, dtype=xp.float64))
        a_hat.append(xp.zeros(shape, dtype=xp.float64))
        b_hat.append(xp.zeros(shape, dtype=xp.float64))
    return PBPState(
        means,
        variances,
        float(alpha_noise),
        float(beta_noise),
        float(alpha_prior),
        float(beta_prior),
        m_hat,
        v_hat,
        a_hat,
        b_hat,
    )


def to_posterior(means, variances):
    """PBP's layers as a :class:`~skbayesnn.core.posterior.GaussianMLPPosterior`.

    The input scaling is folded into the weights (pbp.md §1.1, §2.1):
    ``W = sqrt(s) M[:, :-1]``, ``Var W = s V[:, :-1]``, ``b = sqrt(s) M[:, -1]``,
    ``Var b = s V[:, -1]`` with ``s = 1 / (n_in + 1)``, so that
    ``propagate(posterior, X, act_approx="moment_match")`` gives the moments of
    :func:`forward`.  Hidden activations are ReLU.

    Parameters
    ----------
    means, variances : list of arrays of shape (n_out, n_in + 1)

    Returns
    -------
    GaussianMLPPosterior
        New arrays in the namespace of ``means``.
    """
    wm, wv, bm, bv = [], [], [], []
    for s, m, v in zip(layer_scales(means), means, variances):
        r = math.sqrt(s)
        wm.append(r * m[:, :-1])
        bm.append(r * m[:, -1])
        wv.append(s * v[:, :-1])
        bv.append(s * v[:, -1])
    return GaussianMLPPosterior(wm, wv, bm, bv, activation="relu")


def from_posterior(posterior):
    """Inverse of :func:`to_posterior`: PBP's ``(means, variances)`` lists.

    Parameters
    ----------
    posterior : GaussianMLPPosterior
        With ReLU hidden activations (not checked: PBP only has ReLU).

    Returns
    -------
    means, variances : lists of arrays of shape (n_out, n_in + 1)
    """
    xp = array_namespace(posterior.weight_means[0])
    means, variances = [], []
    for wm, wv, bm, bv in zip(
        posterior.weight_means, posterior.weight_vars, posterior.bias_means, posterior.bias_vars
    ):
        s = 1.0 / (wm.shape[1] + 1)
        r = math.sqrt(s)
        means.append(xp.concatenate([wm, bm[:, None]], axis=1) / r)
        variances.append(xp.concatenate([wv, bv[:, None]], axis=1) / s)
    return means, variances


# ---------------------------------------------------------------------------
# forward pass and log Z
# ---------------------------------------------------------------------------


def forward(means, variances, X, *, return_cache=False):
    """Moments of PBP's network output (pbp.md §2.1-§2.2).

    Each layer appends the bias entry (mean 1, variance 0) to its input and
    computes ``m^a = sqrt(s) M m^z`` and ``v^a = s [(M o M) v^z + V (m^z)^2 + V v^z]``
    with :func:`~skbayesnn.core.linear.linear_moments` (the scaling is applied to
    its result, which saves scaling the matrices); hidden layers then apply the
    exact rectified-Gaussian moments (:func:`~skbayesnn.core.activations.relu_moments`).

    Parameters
    ----------
    means, variances : list of arrays of shape (n_out, n_in + 1)
    X : array of shape (n_features,) or (n_samples, n_features)
        Deterministic inputs (already standardised as PBP expects).
    return_cache : bool, default=False
        Also return one :class:`LayerCache` per layer, for :func:`log_z_grads`.

    Returns
    -------
    m_out, v_out : arrays of shape (..., n_outputs)
        Mean and variance of the output ``a^(L)`` (before the noise).
    cache : list of LayerCache
        Only when ``return_cache=True``.
    """
    xp = array_namespace(X, *means)
    mz = xp.asarray(X, dtype=xp.float64)
    ones = xp.ones(mz.shape[:-1] + (1,), dtype=xp.float64)
    zeros = xp.zeros(mz.shape[:-1] + (1,), dtype=xp.float64)
    vz = None  # the network input is deterministic: linear_moments skips a product
    cache = []
    n_layers = len(means)
    for l, (s, M, V) in enumerate(zip(layer_scales(means), means, variances)):
        in_mean = xp.concatenate([mz, ones], axis=-1)
        in_var = None if vz is None else xp.concatenate([vz, zeros], axis=-1)
        h_mean, h_var = linear_moments(in_mean, in_var, M, V)
        pre_mean = math.sqrt(s) * h_mean
        pre_var = s * h_var
        if l == n_layers - 1:
            if return_cache:
                cache.append(LayerCache(in_mean, in_var, pre_mean, pre_var, None, None, None))
            mz, vz = pre_mean, pre_var
            break
        mz, vz, cdf = relu_moments(pre_mean, pre_var)
        if return_cache:
            cache.append(LayerCache(in_mean, in_var, pre_mean, pre_var, mz, vz, cdf))
    if return_cache:
        return mz, vz, cache
    return mz, vz


def noise_log_z(m_out, v_out, y, alpha_noise, beta_noise):
    """``log Z``, ``log Z1``, ``log Z2`` of the noise model (pbp.md §2.3).

    ``Z_k = N(y | m_out, v_out + beta / (alpha + k - 1))``: the Student-t marginal
    over the noise precision ``gamma ~ Gamma(alpha + k, beta)`` replaced by a
    Gaussian with the noise variance ``E[1/gamma]`` (HL&A eq. 12).  The
    ``-1/2 log(2 pi)`` constant, which the reference code drops, is kept (it
    cancels in every ratio used by :func:`gamma_adf_update`), so ``log Z`` is PBP's
    predictive log density of ``y``.

    Parameters
    ----------
    m_out, v_out : arrays
        Output moments from :func:`forward`.
    y : array-like
        Target(s), broadcast against ``m_out``.
    alpha_noise, beta_noise : float or 0-d array
        ``q(gamma) = Gamma(alpha_noise, beta_noise)``; ``alpha_noise > 1``.

    Returns
    -------
    log_z0, log_z1, log_z2 : arrays of the broadcast shape
    """
    xp = array_namespace(m_out, v_out, y, alpha_noise, beta_noise)
    r2 = (y - m_out) ** 2
    out = []
    for k in range(3):
        v_tot = v_out + beta_noise / (alpha_noise + (k - 1.0))
        out.append(-0.5 * (_LOG_2PI + xp.log(v_tot)) - 0.5 * r2 / v_tot)
    return tuple(out)


def predictive_moments(means, variances, alpha_noise, beta_noise, X):
    """PBP's Gaussian predictive ``N(m*, v* + beta/(alpha - 1))`` (pbp.md §5).

    Parameters
    ----------
    means, variances : list of arrays
    alpha_noise, beta_noise : float or 0-d array
    X : array of shape (n_samples, n_features)

    Returns
    -------
    mean, model_var : arrays of shape (n_samples,)
        Predictive mean and the epistemic variance (from the weights), in the
        standardised units the network was trained in.
    noise_var : float or 0-d array
        ``E[1/gamma] = beta_noise / (alpha_noise - 1)``.
    """
    m, v = forward(means, variances, X)
    return m[..., 0], v[..., 0], beta_noise / (alpha_noise - 1.0)


# ---------------------------------------------------------------------------
# closed-form backward pass
# ---------------------------------------------------------------------------


def _relu_backward_terms(xp, pre_mean, pre_var):
    """``(1 - Phi(m/s), phi(m/s) / s)`` of the rectified Gaussian (pbp.md §3.2).

    ``m/s`` is clipped to ``[-50, 50]`` as in core.activations (no change to any
    result in float64), and the complement is ``Phi(-m/s)``, not ``1 - Phi``,
    to keep its relative accuracy for ``m/s >> 0``.
    """
    sp = special(xp)
    std = xp.sqrt(pre_var)
    pos = std > 0
    std_safe = xp.where(pos, std, 1.0)
    lim = _A_MAX * std
    a = xp.where(
        pos, xp.clip(pre_mean, -lim, lim) / std_safe, xp.where(pre_mean > 0, _A_MAX, -_A_MAX)
    )
    ccdf = sp.ndtr(-a)
    pdf_over_std = xp.where(pos, sp.norm_pdf(a) / std_safe, 0.0)
    return ccdf, pdf_over_std


def log_z_grads(means, variances, x, y, alpha_noise, beta_noise):
    """``log Z`` for one data point and its gradients (pbp.md §2.3, §3.2).

    Closed form, no autodiff.  Output seeds (``v_tot = v_out + beta/(alpha - 1)``):
    ``dm = (y - m_out)/v_tot``, ``dv = -1/(2 v_tot) + (y - m_out)^2/(2 v_tot^2)``.
    Through a linear layer with input ``(m^z, v^z)`` (bias entry included):

    * ``dlogZ/dM_ij = dm_i sqrt(s) m^z_j + dv_i 2 s M_ij v^z_j``,
    * ``dlogZ/dV_ij = dv_i s ((m^z_j)^2 + v^z_j)``,
    * ``dlogZ/dm^z_j = sum_i dm_i sqrt(s) M_ij + dv_i 2 s V_ij m^z_j``,
    * ``dlogZ/dv^z_j = sum_i dv_i s (M_ij^2 + V_ij)``;

    through a ReLU (``alpha = m^a/sigma``): ``dm^z/dm^a = Phi``,
    ``dm^z/dv^a = phi/(2 sigma)``, ``dv^z/dm^a = 2 m^z (1 - Phi)``,
    ``dv^z/dv^a = Phi - m^z phi/sigma``.

    Parameters
    ----------
    means, variances : list of arrays of shape (n_out, n_in + 1)
        The last layer has one output.
    x : array of shape (n_features,)
        One input.
    y : float or 0-d array
        Its target.
    alpha_noise, beta_noise : float or 0-d array
        ``q(gamma)``; ``alpha_noise > 1``.

    Returns
    -------
    log_z : 0-d array
        ``log N(y | m_out, v_out + beta/(alpha - 1))``.
    grad_means, grad_variances : lists of arrays like ``means``
        ``dlogZ/dM`` and ``dlogZ/dV`` per layer.
    log_z1, log_z2 : 0-d arrays
        The two extra normalisers of pbp.md §2.3 (for :func:`gamma_adf_update`).
    """
    xp = array_namespace(x, *means)
    if getattr(x, "ndim", 1) != 1:
        raise ValueError(f"x must be one input of shape (n_features,), got shape {x.shape}.")
    if means[-1].shape[0] != 1:
        raise ValueError("PBP has a single output (pbp.md §1.1).")
    m_out, v_out, cache = forward(means, variances, x, return_cache=True)
    y = xp.asarray(y, dtype=xp.float64)
    log_z0, log_z1, log_z2 = noise_log_z(m_out, v_out, y, alpha_noise, beta_noise)
    # Output seeds (pbp.md §3.2); shape (1,).
    v_tot = v_out + beta_noise / (alpha_noise - 1.0)
    resid = y - m_out
    dm = resid / v_tot
    dv = 0.5 * (resid * dm - 1.0) / v_tot
    scales = layer_scales(means)
    n_layers = len(means)
    grad_means, grad_variances = [None] * n_layers, [None] * n_layers
    for l in range(n_layers - 1, -1, -1):
        s, M, V = scales[l], means[l], variances[l]
        c = cache[l]
        r = math.sqrt(s)
        mz, vz = c.in_mean, c.in_var
        dm_col, dv_col = dm[:, None], dv[:, None]
        g_m = r * dm_col * mz
        if vz is None:
            g_v = s * dv_col * (mz * mz)
        else:
            g_m = g_m + (2.0 * s) * dv_col * vz * M
            g_v = s * dv_col * (mz * mz + vz)
        grad_means[l], grad_variances[l] = g_m, g_v
        if l == 0:
            break
        # Gradients with respect to this layer's input moments; the bias entry
        # (last) is constant and dropped.
        d_mz = (r * (dm @ M) + (2.0 * s) * (dv @ V) * mz)[:-1]
        d_vz = (s * (dv @ (M * M + V)))[:-1]
        below = cache[l - 1]
        cdf = below.out_cdf
        ccdf, pdf_over_std = _relu_backward_terms(xp, below.pre_mean, below.pre_var)
        relu_mean = below.out_mean
        dm = d_mz * cdf + d_vz * (2.0 * relu_mean * ccdf)
        dv = d_mz * (0.5 * pdf_over_std) + d_vz * (cdf - relu_mean * pdf_over_std)
    # One output: sum the length-1 axis to 0-d arrays (indexing would give a
    # NumPy scalar and leave the namespace).
    return xp.sum(log_z0), grad_means, grad_variances, xp.sum(log_z1), xp.sum(log_z2)


# ---------------------------------------------------------------------------
# updates
# ---------------------------------------------------------------------------


def apply_adf_step(means, variances, grad_means, grad_variances, *, min_var=MIN_VAR):
    """The ADF moment-matching update with PBP's per-weight rejection rule.

    ``M' = M + V dM`` and ``V' = V - V^2 (dM^2 - 2 dV)`` for every weight at once,
    from gradients taken at the old parameters (pbp.md §3.1).  A weight whose
    new variance is ``<= min_var`` or whose new mean or variance is not finite
    keeps its old mean and variance; the others keep their update (pbp.md §4.4
    item 1).  The reference rejects NaN only; infinities are rejected here too.

    Parameters
    ----------
    means, variances, grad_means, grad_variances : lists of arrays
    min_var : float, default=1e-100

    Returns
    -------
    new_means, new_variances : lists of new arrays
    n_rejected : 0-d integer array
        Number of weights whose update was rejected.
    """
    xp = array_namespace(*means)
    new_means, new_variances = [], []
    n_rejected = 0
    for M, V, gM, gV in zip(means, variances, grad_means, grad_variances):
        m_new = M + V * gM
        v_new = V - (V * V) * (gM * gM - 2.0 * gV)
        # NaN fails every comparison, so ``v_new > min_var`` also rejects NaN.
        ok = (v_new > min_var) & xp.isfinite(v_new) & xp.isfinite(m_new)
        new_means.append(xp.where(ok, m_new, M))
        new_variances.append(xp.where(ok, v_new, V))
        n_rejected = n_rejected + xp.sum(~ok)
    return new_means, new_variances, n_rejected


def gamma_adf_update(log_z0, log_z1, log_z2, alpha, beta):
    """Minka's ADF update of a Gamma factor from three normalisers (pbp.md §3.3).

    For the tilted ``s(g) ∝ f(g) Gamma(g | alpha, beta)`` with
    ``Z_k = ∫ f(g) Gamma(g | alpha + k, beta) dg``,
    ``E_s[g] = (alpha/beta) Z1/Z0`` and ``E_s[g^2] = alpha (alpha+1)/beta^2 Z2/Z0``;
    matching ``Gamma(alpha', beta')`` to these moments gives

    ``alpha' = 1 / (exp(log Z2 - 2 log Z1 + log Z0) (alpha + 1)/alpha - 1)``,
    ``beta' = 1 / (exp(log Z2 - log Z1) (alpha + 1)/beta - exp(log Z1 - log Z0) alpha/beta)``.

    Exact when the ``Z_k`` are exact; PBP feeds it the Gaussian approximations of
    :func:`noise_log_z` (or of the prior factors in :func:`refine_prior`).

    Parameters
    ----------
    log_z0, log_z1, log_z2 : arrays or floats
    alpha, beta : arrays or floats
        The current Gamma (shape/rate).

    Returns
    -------
    alpha_new, beta_new : arrays
        Not guarded: where the tilted moments are not those of a Gamma (the
        second difference of ``log Z_k`` too negative), ``alpha_new`` comes out
        negative or infinite.  :func:`adf_update` guards the result.
    """
    xp = array_namespace(log_z0, log_z1, log_z2, alpha, beta)
    e_ratio = xp.exp(xp.minimum(log_z2 - 2.0 * log_z1 + log_z0, _MAX_EXP_ARG))
    e21 = xp.exp(xp.minimum(log_z2 - log_z1, _MAX_EXP_ARG))
    e10 = xp.exp(xp.minimum(log_z1 - log_z0, _MAX_EXP_ARG))
    den_a = e_ratio * (alpha + 1.0) / alpha - 1.0
    den_b = e21 * (alpha + 1.0) / beta - e10 * alpha / beta
    # Masked denominators: a zero one gives +inf (rejected by callers' guards),
    # without a division-by-zero warning.
    alpha_new = xp.where(den_a != 0, 1.0 / xp.where(den_a != 0, den_a, 1.0), xp.inf)
    beta_new = xp.where(den_b != 0, 1.0 / xp.where(den_b != 0, den_b, 1.0), xp.inf)
    return alpha_new, beta_new


def adf_update(means, variances, alpha_noise, beta_noise, x, y, *, min_var=MIN_VAR):
    """One PBP ADF step on the data point ``(x, y)``.

    In the reference order (pbp.md §4.5, §13): forward pass, ``log Z`` and its
    gradients, every weight updated from the same gradients with per-weight
    rejection (:func:`apply_adf_step`), then the noise Gamma updated with the
    *old* ``(alpha, beta)`` and the ``log Z_k`` of the same forward pass
    (:func:`gamma_adf_update`).

    The reference applies the Gamma update unconditionally (pbp.md §3.3).  Here
    it is discarded (``noise_rejected = 1``) when the new parameters are not
    finite or ``alpha_new <= 1`` or ``beta_new <= 0``: the noise variance
    ``beta/(alpha - 1)`` would otherwise be negative or infinite and every later
    update NaN (pbp.md §4.4 recommends guarding ``alpha > 1``).  Where the
    reference update is valid the two agree.

    Parameters
    ----------
    means, variances : list of arrays of shape (n_out, n_in + 1)
    alpha_noise, beta_noise : float or 0-d array
    x : array of shape (n_features,)
    y : float or 0-d array
    min_var : float, default=1e-100
        Rejection threshold of the new variances.

    Returns
    -------
    ADFResult
        New means and variances (new arrays), the new noise Gamma, ``log Z``
        before the update, and the rejection counts.
    """
    log_z0, g_m, g_v, log_z1, log_z2 = log_z_grads(means, variances, x, y, alpha_noise, beta_noise)
    xp = array_namespace(x, *means)
    new_means, new_variances, n_rejected = apply_adf_step(
        means, variances, g_m, g_v, min_var=min_var
    )
    a_new, b_new = gamma_adf_update(log_z0, log_z1, log_z2, alpha_noise, beta_noise)
    ok = xp.isfinite(a_new) & xp.isfinite(b_new) & (a_new > 1.0) & (b_new > 0.0)
    alpha_new = xp.where(ok, a_new, alpha_noise)
    beta_new = xp.where(ok, b_new, beta_noise)
    return ADFResult(new_means, new_variances, alpha_new, beta_new, log_z0, n_rejected, xp.sum(~ok))


def _gamma_update_scalar(lz0, lz1, lz2, a, b):
    """:func:`gamma_adf_update` on Python floats (for the host EP loop)."""
    den_a = math.exp(min(lz2 - 2.0 * lz1 + lz0, _MAX_EXP_ARG)) * (a + 1.0) / a - 1.0
    den_b = (
        math.exp(min(lz2 - lz1, _MAX_EXP_ARG)) * (a + 1.0) / b
        - math.exp(min(lz1 - lz0, _MAX_EXP_ARG)) * a / b
    )
    a_new = 1.0 / den_a if den_a != 0.0 else math.inf
    b_new = 1.0 / den_b if den_b != 0.0 else math.inf
    return a_new, b_new


def _refine_sweep(m, v, mh, vh, ah, bh, a_lam, b_lam):
    """The sequential EP sweep of pbp.md §3.4 on Python lists (in place).

    Returns the final ``(alpha, beta)`` of ``q(lambda)`` and the number of
    skipped factors.
    """
    n_skipped = 0
    log = math.log
    for i in range(len(m)):
        vi, mi = v[i], m[i]
        # cavity: q / f_i in natural parameters
        prec_cav = 1.0 / vi - vh[i]
        a_cav = a_lam - ah[i]  # (alpha - 1 - a_hat) + 1
        b_cav = b_lam + bh[i]  # -(-beta - b_hat)
        if not (prec_cav > 0.0 and b_cav > 0.0 and a_cav > 1.0):
            n_skipped += 1
            continue
        v_cav = 1.0 / prec_cav
        if not v_cav < _MAX_CAVITY_VAR:
            n_skipped += 1
            continue
        mp_cav = mi / vi - mh[i]
        m_cav = mp_cav * v_cav
        # Tilted normalisers of the factor N(w | 0, 1/lambda), the Student-t over
        # lambda replaced by a Gaussian with variance E[1/lambda] under
        # Gamma(a_cav + k, b_cav), k = 0, 1, 2 (the 2 pi constant cancels).
        m2 = m_cav * m_cav
        v0 = v_cav + b_cav / (a_cav - 1.0)
        v1 = v_cav + b_cav / a_cav
        v2 = v_cav + b_cav / (a_cav + 1.0)
        lz0 = -0.5 * log(v0) - 0.5 * m2 / v0
        lz1 = -0.5 * log(v1) - 0.5 * m2 / v1
        lz2 = -0.5 * log(v2) - 0.5 * m2 / v2
        dm = -m_cav / v0
        dv = -0.5 / v0 + 0.5 * m2 / (v0 * v0)
        m_new = m_cav + v_cav * dm
        v_new = v_cav - v_cav * v_cav * (dm * dm - 2.0 * dv)
        a_new, b_new = _gamma_update_scalar(lz0, lz1, lz2, a_cav, b_cav)
        # Guard (not in the reference, which cannot reach here with an invalid
        # q(lambda) in practice): keep the factor when the result is invalid.
        if not (
            v_new > 0.0
            and math.isfinite(m_new)
            and math.isfinite(v_new)
            and math.isfinite(a_new)
            and math.isfinite(b_new)
            and a_new > 1.0
            and b_new > 0.0
        ):
            n_skipped += 1
            continue
        # new factor = new q / cavity (natural parameters)
        mh[i] = m_new / v_new - mp_cav
        vh[i] = 1.0 / v_new - prec_cav
        ah[i] = a_new - a_cav
        bh[i] = b_cav - b_new
        m[i], v[i] = m_new, v_new
        a_lam, b_lam = a_new, b_new  # q(lambda) is overwritten immediately
    return a_lam, b_lam, n_skipped


def refine_prior(state):
    """One EP sweep over the prior factors (pbp.md §3.4), after an epoch.

    Every weight ``i`` in turn (layer by layer, row by row, column by column, as
    the reference Theano code): remove its approximate prior factor from ``q``
    to get the cavity (Gaussian over ``w_i`` and ``q(lambda)``), skip the factor
    unless the cavity variance is in ``(0, 1e6)``, ``beta_cav > 0`` and
    ``alpha_cav > 1``; otherwise moment-match the tilted
    ``N(w_i | 0, 1/lambda) x cavity`` (Gaussian part by the ADF identity of §3.1,
    Gamma part by :func:`gamma_adf_update`), store the new factor as new ``q`` /
    cavity and overwrite ``q(w_i)`` and ``q(lambda)`` before the next weight.

    The sweep is a sequential scalar loop (``q(lambda)`` changes after every
    weight), so it runs on the host with Python floats and the results are
    moved back to the namespace of ``state.means``.

    Parameters
    ----------
    state : PBPState

    Returns
    -------
    new_state : PBPState
        New arrays; ``state`` is not modified.
    n_skipped : int
        Number of factors left unchanged by the guards.
    """
    xp = array_namespace(*state.means)
    shapes = [tuple(m.shape) for m in state.means]

    def flat(arrays):
        return np.concatenate([asnumpy(a).ravel() for a in arrays]).tolist()

    m, v = flat(state.means), flat(state.variances)
    mh, vh = flat(state.m_hat_nat), flat(state.v_hat_nat)
    ah, bh = flat(state.a_hat_nat), flat(state.b_hat_nat)
    a_lam, b_lam, n_skipped = _refine_sweep(
        m, v, mh, vh, ah, bh, float(state.alpha_prior), float(state.beta_prior)
    )

    def unflat(values):
        out, start = [], 0
        host = np.asarray(values, dtype=np.float64)
        for shape in shapes:
            size = int(np.prod(shape))
            out.append(xp.asarray(host[start : start + size].reshape(shape)))
            start += size
        return out

    new_state = replace(
        state,
        means=unflat(m),
        variances=unflat(v),
        m_hat_nat=unflat(mh),
        v_hat_nat=unflat(vh),
        a_hat_nat=unflat(ah),
        b_hat_nat=unflat(bh),
        alpha_prior=a_lam,
        beta_prior=b_lam,
    )
    return new_state, n_skipped


def run_epoch(state, X, y, order, *, min_var=MIN_VAR, refine=True):
    """One epoch of PBP (pbp.md §4.1): ADF over the points in ``order``, then
    one EP sweep over the prior factors.

    Parameters
    ----------
    state : PBPState
    X : array of shape (n_samples, n_features)
        Standardised inputs, in the namespace of the state.
    y : array of shape (n_samples,)
        Standardised targets.
    order : sequence of int
        Indices of the points, in the order they are processed (a fresh random
        permutation every epoch in the reference).
    min_var : float, default=1e-100
        Rejection threshold of :func:`apply_adf_step`.
    refine : bool, default=True
        Run :func:`refine_prior` after the ADF pass.

    Returns
    -------
    new_state : PBPState
    info : dict
        ``n_rejected`` (weight updates rejected), ``n_noise_rejected`` (Gamma
        updates discarded) and ``n_skipped`` (prior factors skipped), as ints.
    """
    means, variances = state.means, state.variances
    a_g, b_g = state.alpha_noise, state.beta_noise
    n_rejected, n_noise = 0, 0
    for i in order:
        i = int(i)
        res = adf_update(means, variances, a_g, b_g, X[i], y[i], min_var=min_var)
        means, variances, a_g, b_g = res.means, res.variances, res.alpha_noise, res.beta_noise
        n_rejected = n_rejected + res.n_rejected
        n_noise = n_noise + res.noise_rejected
    new_state = replace(state, means=means, variances=variances, alpha_noise=a_g, beta_noise=b_g)
    n_skipped = 0
    if refine:
        new_state, n_skipped = refine_prior(new_state)
    info = dict(n_rejected=int(n_rejected), n_noise_rejected=int(n_noise), n_skipped=n_skipped)
    return new_state, info
