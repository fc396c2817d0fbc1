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
suite's strict namespace), except :func:`refine_prior`, a sequential scalar loop
that runs compiled on the host.  :func:`run_epoch` hands plain NumPy arrays to
the compiled kernel of :mod:`.pbp_kernel` (the same arithmetic one point at a
time, without the per-operation overhead of ~40 small array operations per
point); on other namespaces it loops over points (or batches) with the
functions here.

Bias-free networks (pbp.md §1.1, §6.7): ``bias=False`` drops the constant input,
so a layer is ``(n_out, n_in)`` and ``s = 1 / n_in``.

Batches (``batch_size > 1``, the GPU path).  PBP proper is sequential: each
point's update starts from the posterior left by the previous one.  A batch
update here computes every point's ADF update from the *same* posterior and
combines them as independent sites in natural parameters: per weight,
``1/v' = 1/v + sum_b (1/v_b - 1/v)`` and ``m'/v' = m/v + sum_b (m_b/v_b - m/v)``
(and the noise Gamma's shape and rate add their per-point changes).  This is
parallel ADF: exact for a linear-Gaussian model, equal to PBP for a batch of one,
and otherwise an approximation that ignores how the points of a batch would have
moved each other's cavity.  A point whose own update would be rejected
contributes nothing to that weight.  Where the points agree the sum overshoots,
as in TAGI (tagi.md §4.4): a batch whose combined update moves the outputs away
from its targets is undone and its halves are processed in turn
(:func:`_batch_update_helps`), down to single points, which are PBP.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import NamedTuple

import numpy as np

from .._backend import array_namespace, asnumpy, special
from ..core.activations import relu_moments, standardized_mean
from ..core.linear import linear_moments, linear_moments_vjp
from ..core.posterior import GaussianMLPPosterior
from . import pbp_kernel, pbp_spike_slab

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
    "guard_noise_update",
    "predictive_moments",
    "log_z_grads",
    "apply_adf_step",
    "gamma_adf_update",
    "adf_update",
    "refine_prior",
    "run_epoch",
    "MAX_PRIOR_SWEEP_RATIO",
]

#: A weight update whose new variance is not above this is rejected (pbp.md §4.4).
MIN_VAR = 1e-100
#: An EP sweep over the prior factors that changes ``E_q[1/lambda]`` by more
#: than this factor, either way, is discarded (:func:`run_epoch`).
MAX_PRIOR_SWEEP_RATIO = 10.0
# Largest argument given to exp in the Gamma update: beyond it the result would
# be rejected by the guard anyway, and clipping avoids overflow warnings.
_MAX_EXP_ARG = 700.0
_LOG_2PI = math.log(2.0 * math.pi)


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
        column is the bias (no bias column when ``bias=False``).  The layer
        input is scaled by ``1/sqrt(n_columns)``.
    alpha_noise, beta_noise : float or 0-d array
        ``q(gamma) = Gamma(alpha_noise, beta_noise)`` (shape/rate) of the noise
        precision.
    alpha_prior, beta_prior : float
        ``q(lambda) = Gamma(alpha_prior, beta_prior)`` of the prior precision.
    m_hat_nat, v_hat_nat, a_hat_nat, b_hat_nat : list of arrays like ``means``
        Natural parameters of each weight's approximate prior factor (pbp.md
        §3.4): Gaussian precision-times-mean and precision, and the Gamma part in
        the Gamma natural parameters ``(alpha - 1, -beta)``.
    bias : bool, default=True
        Whether every layer has a bias unit (pbp.md §1.1; bias-free nets are the
        ones where spike-and-slab messages differ from PBP's, §6.7).
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
    bias: bool = True

    @property
    def layer_sizes(self):
        """Widths ``[n_inputs, hidden..., n_outputs]``."""
        return [self.means[0].shape[1] - int(self.bias)] + [m.shape[0] for m in self.means]


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
    bias=True,
):
    """The initial PBP state (pbp.md §4.2 and the EP factors of §3.4).

    * ``M_ij ~ N(0, 1 / n_columns)`` (``n_columns = n_in + 1`` with a bias) for
      symmetry breaking (not accounted for by any factor);
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
    bias : bool, default=True
        Give every layer a bias unit (pbp.md §1.1).

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
        shape = (n_out, n_in + int(bool(bias)))
        draw = rng.standard_normal(shape) / math.sqrt(shape[1])
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
        bool(bias),
    )


def to_posterior(means, variances, *, bias=True):
    """PBP's layers as a :class:`~skbayesnn.core.posterior.GaussianMLPPosterior`.

    The input scaling is folded into the weights (pbp.md §1.1, §2.1):
    ``W = sqrt(s) M[:, :-1]``, ``Var W = s V[:, :-1]``, ``b = sqrt(s) M[:, -1]``,
    ``Var b = s V[:, -1]`` with ``s = 1 / (n_in + 1)``, so that
    ``propagate(posterior, X, act_approx="moment_match")`` gives the moments of
    :func:`forward`.  Hidden activations are ReLU.  A bias-free net
    (``bias=False``) becomes the posterior with biases fixed at 0 (mean and
    variance 0).

    Parameters
    ----------
    means, variances : list of arrays of shape (n_out, n_in + 1)
    bias : bool, default=True
        Whether the last column of each layer is its bias.

    Returns
    -------
    GaussianMLPPosterior
        New arrays in the namespace of ``means``.
    """
    xp = array_namespace(*means)
    wm, wv, bm, bv = [], [], [], []
    for s, m, v in zip(layer_scales(means), means, variances):
        r = math.sqrt(s)
        if bias:
            wm.append(r * m[:, :-1])
            bm.append(r * m[:, -1])
            wv.append(s * v[:, :-1])
            bv.append(s * v[:, -1])
        else:
            wm.append(r * m)
            wv.append(s * v)
            bm.append(xp.zeros(m.shape[0], dtype=xp.float64))
            bv.append(xp.zeros(m.shape[0], dtype=xp.float64))
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


def forward(means, variances, X, *, bias=True, return_cache=False):
    """Moments of PBP's network output (pbp.md §2.1-§2.2).

    Each layer appends the bias entry (mean 1, variance 0) to its input (unless
    ``bias=False``) and computes ``m^a = sqrt(s) M m^z`` and
    ``v^a = s [(M o M) v^z + V (m^z)^2 + V v^z]`` with
    :func:`~skbayesnn.core.linear.linear_moments` (the scaling is applied to its
    result, which saves scaling the matrices); hidden layers then apply the exact
    rectified-Gaussian moments (:func:`~skbayesnn.core.activations.relu_moments`).

    Parameters
    ----------
    means, variances : list of arrays of shape (n_out, n_in + 1)
    X : array of shape (n_features,) or (n_samples, n_features)
        Deterministic inputs (already standardised as PBP expects).
    bias : bool, default=True
        Whether the layers have a bias column.
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
    if bias:
        ones = xp.ones(mz.shape[:-1] + (1,), dtype=xp.float64)
        zeros = xp.zeros(mz.shape[:-1] + (1,), dtype=xp.float64)
    vz = None  # the network input is deterministic: linear_moments skips a product
    cache = []
    n_layers = len(means)
    for l, (s, M, V) in enumerate(zip(layer_scales(means), means, variances)):
        in_mean = xp.concatenate([mz, ones], axis=-1) if bias else mz
        in_var = vz
        if bias and vz is not None:
            in_var = xp.concatenate([vz, zeros], axis=-1)
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


def predictive_moments(means, variances, alpha_noise, beta_noise, X, *, bias=True):
    """PBP's Gaussian predictive ``N(m*, v* + beta/(alpha - 1))`` (pbp.md §5).

    Parameters
    ----------
    means, variances : list of arrays
    alpha_noise, beta_noise : float or 0-d array
    X : array of shape (n_samples, n_features)
    bias : bool, default=True

    Returns
    -------
    mean, model_var : arrays of shape (n_samples,)
        Predictive mean and the epistemic variance (from the weights), in the
        standardised units the network was trained in.
    noise_var : float or 0-d array
        ``E[1/gamma] = beta_noise / (alpha_noise - 1)``.
    """
    m, v = forward(means, variances, X, bias=bias)
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
    a, pos, std_safe = standardized_mean(xp, pre_mean, xp.sqrt(pre_var))
    ccdf = sp.ndtr(-a)
    pdf_over_std = xp.where(pos, sp.norm_pdf(a) / std_safe, 0.0)
    return ccdf, pdf_over_std


def log_z_grads(means, variances, x, y, alpha_noise, beta_noise, *, bias=True,
                return_residual2=False, return_output=False):
    """``log Z`` of one data point (or of each point of a batch) and its gradients.

    Closed form, no autodiff (pbp.md §2.3, §3.2).  Output seeds
    (``v_tot = v_out + beta/(alpha - 1)``): ``dm = (y - m_out)/v_tot``,
    ``dv = -1/(2 v_tot) + (y - m_out)^2/(2 v_tot^2)``.  Through a linear layer with
    input ``(m^z, v^z)`` (bias entry included):

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
    x : array of shape (n_features,) or (n_points, n_features)
        One input, or a batch of inputs (each point's gradients are returned
        separately, along a leading axis).
    y : float, 0-d array or array of shape (n_points,)
        The target(s).
    alpha_noise, beta_noise : float or 0-d array
        ``q(gamma)``; ``alpha_noise > 1``.
    bias : bool, default=True
        Whether the layers have a bias column.

    Returns
    -------
    log_z : array of shape () or (n_points,)
        ``log N(y | m_out, v_out + beta/(alpha - 1))``.
    grad_means, grad_variances : lists of arrays
        ``dlogZ/dM`` and ``dlogZ/dV`` per layer, shaped like ``means`` (with a
        leading ``n_points`` axis for a batch).
    log_z1, log_z2 : arrays like ``log_z``
        The two extra normalisers of pbp.md §2.3 (for :func:`gamma_adf_update`).
    residual2 : array like ``log_z``
        ``(y - m_out)^2``, only with ``return_residual2=True`` (for
        :func:`guard_noise_update`).
    out_mean, out_var : arrays like ``log_z``
        The output's mean ``m_out`` and variance ``v_out`` (noise excluded),
        only with ``return_output=True`` (for :func:`adf_update`'s batch check,
        which then needs no forward pass of its own).
    """
    xp = array_namespace(x, *means)
    ndim = getattr(x, "ndim", 1)
    if ndim not in (1, 2):
        raise ValueError(
            f"x must be one input (n_features,) or a batch (n_points, n_features), got shape "
            f"{x.shape}."
        )
    if means[-1].shape[0] != 1:
        raise ValueError("PBP has a single output (pbp.md §1.1).")
    X = x[None, :] if ndim == 1 else x
    m_out, v_out, cache = forward(means, variances, X, bias=bias, return_cache=True)
    y = xp.reshape(xp.asarray(y, dtype=xp.float64), (-1, 1))
    log_z0, log_z1, log_z2 = noise_log_z(m_out, v_out, y, alpha_noise, beta_noise)
    # Output seeds (pbp.md §3.2); shape (n_points, 1).
    v_tot = v_out + beta_noise / (alpha_noise - 1.0)
    resid = y - m_out
    dm = resid / v_tot
    dv = 0.5 * (resid * dm - 1.0) / v_tot
    scales = layer_scales(means)
    n_layers = len(means)
    grad_means, grad_variances = [None] * n_layers, [None] * n_layers
    for l in range(n_layers - 1, -1, -1):
        s, c = scales[l], cache[l]
        # a = sqrt(s) h and v^a = s v^h: chain the seeds through the scaling.
        grads = linear_moments_vjp(
            c.in_mean, c.in_var, means[l], variances[l], math.sqrt(s) * dm, s * dv,
            input_grads=l > 0,
        )  # fmt: skip
        grad_means[l], grad_variances[l] = grads[0], grads[1]
        if l == 0:
            break
        # Through the ReLUs of the layer below; the bias entry (last) is
        # constant and dropped.
        d_mz, d_vz = grads[2], grads[3]
        if bias:
            d_mz, d_vz = d_mz[:, :-1], d_vz[:, :-1]
        below = cache[l - 1]
        cdf = below.out_cdf
        ccdf, pdf_over_std = _relu_backward_terms(xp, below.pre_mean, below.pre_var)
        relu_mean = below.out_mean
        dm = d_mz * cdf + d_vz * (2.0 * relu_mean * ccdf)
        dv = d_mz * (0.5 * pdf_over_std) + d_vz * (cdf - relu_mean * pdf_over_std)
    per_point = (log_z0, log_z1, log_z2) + ((resid * resid,) if return_residual2 else ())
    per_point += (m_out, v_out) if return_output else ()
    return pbp_spike_slab._log_z_grads_results(xp, ndim, grad_means, grad_variances,
                                               *per_point)


# ---------------------------------------------------------------------------
# updates
# ---------------------------------------------------------------------------


def apply_adf_step(means, variances, grad_means, grad_variances, *, min_var=MIN_VAR):
    """The ADF moment-matching update with PBP's per-weight rejection rule.

    For one point, ``M' = M + V dM`` and ``V' = V - V^2 (dM^2 - 2 dV)`` for every
    weight at once, from gradients taken at the old parameters (pbp.md §3.1).  A
    weight whose new variance is ``<= min_var`` or whose new mean or variance is
    not finite keeps its old mean and variance; the others keep their update
    (pbp.md §4.4 item 1).  The reference rejects NaN only; infinities are
    rejected here too.

    For a batch (gradients with a leading ``n_points`` axis), each point's update
    is computed from the same ``(M, V)`` and the points are combined as
    independent sites in natural parameters (the module docstring, "Batches"):
    with ``k_b = dM_b^2 - 2 dV_b``, point ``b`` adds ``k_b / (1 - V k_b)`` to the
    precision and ``(dM_b + M k_b) / (1 - V k_b)`` to precision times mean.  A
    point whose own update would be rejected adds nothing; the combined result
    goes through the same rejection rule.  A batch of one gives the one-point
    update up to rounding.

    Parameters
    ----------
    means, variances : lists of arrays
    grad_means, grad_variances : lists of arrays
        Shaped like ``means``, or with a leading batch axis.
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
        if gM.ndim == M.ndim:
            m_new = M + V * gM
            v_new = V - (V * V) * (gM * gM - 2.0 * gV)
        else:
            k = gM * gM - 2.0 * gV
            shrink = 1.0 - V * k  # v_b / v of each point's own update
            own = (V * shrink > min_var) & xp.isfinite(shrink) & xp.isfinite(gM)
            safe = xp.where(own, shrink, 1.0)
            d_prec = xp.sum(xp.where(own, k / safe, 0.0), axis=0)
            d_shift = xp.sum(xp.where(own, (gM + M * k) / safe, 0.0), axis=0)
            prec = 1.0 / V + d_prec
            pos = prec > 0
            v_new = xp.where(pos, 1.0 / xp.where(pos, prec, 1.0), -1.0)
            m_new = v_new * (M / V + d_shift)
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


def _valid_gamma(xp, alpha, beta):
    return xp.isfinite(alpha) & xp.isfinite(beta) & (alpha > 1.0) & (beta > 0.0)


def guard_noise_update(alpha_new, beta_new, alpha, beta, residual2):
    """Guard PBP's noise-Gamma update of one point; returns ``(alpha', beta', rejected)``.

    * For a residual beyond the noise sd (``residual2 > beta/(alpha - 1)``):
      where invalid (see below) or with a noise variance ``beta'/(alpha' - 1)``
      above that of the exact update for a zero output variance,
      ``Gamma(alpha + 1/2, beta + residual2/2)`` (conjugate), replaced by that
      update.  The Gaussian
      stand-in for the Student-t normalisers (:func:`noise_log_z`) decays like
      ``exp(-r^2)`` in the tails, so for an outlier it overshoots without
      bound: one point 1000 noise sds out sent the noise variance from 0.01 to
      1e49.  With an output variance ``v > 0`` the exact update (by
      quadrature) moves less than the conjugate one, except at shapes below
      ~2.  In 355 random ``(alpha, beta, v, r)`` with ``r`` beyond the noise
      sd, the stand-in overshot the bound in 147 (mostly beyond 5 predictive
      sds), by a median factor of 1e38 of the exact noise variance; the
      replacement was within 0.24% of it in the median and 69% at worst (shape
      1.65).
    * Elsewhere, where invalid (not finite, ``alpha' <= 1`` or ``beta' <= 0``):
      discarded, the old ``(alpha, beta)`` kept (pbp.md §4.4 recommends guarding
      ``alpha > 1``).

    Parameters
    ----------
    alpha_new, beta_new : arrays
        :func:`gamma_adf_update`'s result.
    alpha, beta : float or 0-d array
        The Gamma before the update.
    residual2 : array
        Squared residual ``(y - m_out)^2`` (for a spike-and-slab output, its
        components' squared residuals weighted by their responsibilities).

    Returns
    -------
    alpha_new, beta_new : arrays
    rejected : bool array
        Where the stand-in's update was discarded or replaced.
    """
    xp = array_namespace(alpha_new, beta_new, residual2)
    valid = _valid_gamma(xp, alpha_new, beta_new)
    a_c, b_c = alpha + 0.5, beta + 0.5 * residual2
    # beta'/(alpha' - 1) > b_c/(a_c - 1), both denominators positive where valid
    safe_a = xp.where(valid, alpha_new, 2.0)
    safe_b = xp.where(valid, beta_new, 1.0)
    tail = residual2 * (alpha - 1.0) > beta
    over = tail & (~valid | (safe_b * (a_c - 1.0) > b_c * (safe_a - 1.0)))
    alpha_out = xp.where(over, a_c, xp.where(valid, alpha_new, alpha))
    beta_out = xp.where(over, b_c, xp.where(valid, beta_new, beta))
    return alpha_out, beta_out, over | ~valid


def adf_update(
    means,
    variances,
    alpha_noise,
    beta_noise,
    x,
    y,
    *,
    bias=True,
    spike_slab=False,
    min_var=MIN_VAR,
    return_output=False,
):
    """One PBP ADF step on the data point ``(x, y)`` (or on a batch of points).

    In the reference order (pbp.md §4.5, §13): forward pass, ``log Z`` and its
    gradients, every weight updated from the same gradients with per-weight
    rejection (:func:`apply_adf_step`), then the noise Gamma updated with the
    *old* ``(alpha, beta)`` and the ``log Z_k`` of the same forward pass
    (:func:`gamma_adf_update`).

    The reference applies the Gamma update unconditionally (pbp.md §3.3).  Here
    it is guarded (:func:`guard_noise_update`, ``noise_rejected = 1``): discarded
    when the new parameters are not finite or ``alpha_new <= 1`` or ``beta_new <=
    0`` (the noise variance ``beta/(alpha - 1)`` would otherwise be negative or
    infinite and every later update NaN), and replaced by the exact update for a
    zero output variance where it overshoots that (an outlier).  Elsewhere the
    two agree.

    For a batch (``x`` of shape ``(n_points, n_features)``) the points' updates are
    combined as independent sites (:func:`apply_adf_step`); the Gamma's shape and
    rate add the changes of the points whose own update is valid.

    Parameters
    ----------
    means, variances : list of arrays of shape (n_out, n_in + 1)
    alpha_noise, beta_noise : float or 0-d array
    x : array of shape (n_features,) or (n_points, n_features)
    y : float, 0-d array or array of shape (n_points,)
    bias : bool, default=True
    spike_slab : bool, default=False
        Spike-and-slab messages (pbp.md §6): ``log Z`` and its gradients from
        :func:`skbayesnn.inference.pbp_spike_slab.log_z_grads`; the updates are
        the same.
    min_var : float, default=1e-100
        Rejection threshold of the new variances.
    return_output : bool, default=False
        Also return the output's moments before the update, from the step's
        own forward pass.

    Returns
    -------
    ADFResult
        New means and variances (new arrays), the new noise Gamma, ``log Z``
        before the update (summed over a batch), and the rejection counts.
    out_mean, out_var : arrays
        Only with ``return_output=True``: the output's mean and variance
        (noise excluded; SSPBP's total moments) at ``x`` under the old
        ``means``, ``variances``, shaped like ``y``.
    """
    grads = pbp_spike_slab.log_z_grads if spike_slab else log_z_grads
    log_z0, g_m, g_v, log_z1, log_z2, residual2, *output = grads(
        means, variances, x, y, alpha_noise, beta_noise, bias=bias, return_residual2=True,
        return_output=return_output,
    )
    xp = array_namespace(x, *means)
    new_means, new_variances, n_rejected = apply_adf_step(
        means, variances, g_m, g_v, min_var=min_var
    )
    a_new, b_new = gamma_adf_update(log_z0, log_z1, log_z2, alpha_noise, beta_noise)
    a_new, b_new, rejected = guard_noise_update(a_new, b_new, alpha_noise, beta_noise,
                                                residual2)
    n_noise = xp.sum(rejected)
    if getattr(x, "ndim", 1) == 2:
        # the points' changes add (a discarded point's is zero)
        a_new = alpha_noise + xp.sum(a_new - alpha_noise)
        b_new = beta_noise + xp.sum(b_new - beta_noise)
        ok = _valid_gamma(xp, a_new, b_new)
        n_noise = xp.where(ok, n_noise, n_noise + 1)
    else:
        ok = xp.asarray(True)
    alpha_new = xp.where(ok, a_new, alpha_noise)
    beta_new = xp.where(ok, b_new, beta_noise)
    result = ADFResult(
        new_means, new_variances, alpha_new, beta_new, xp.sum(log_z0), n_rejected, n_noise
    )
    return (result, *output) if return_output else result


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
    A result that is not a valid Gaussian and Gamma leaves the factor unchanged
    (a guard the reference does not need in practice).

    The sweep is a sequential scalar loop (``q(lambda)`` changes after every
    weight), so it runs compiled on the host
    (:func:`~skbayesnn.inference.pbp_kernel.refine_prior_kernel`) and the results
    are moved back to the namespace of ``state.means``.

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
    fields = ("means", "variances", "m_hat_nat", "v_hat_nat", "a_hat_nat", "b_hat_nat")
    host = {
        f: tuple(np.array(asnumpy(a), dtype=np.float64) for a in getattr(state, f))
        for f in fields
    }
    a_lam, b_lam, n_skipped = pbp_kernel.refine_prior_kernel(
        *(host[f] for f in fields), float(state.alpha_prior), float(state.beta_prior)
    )
    moved = {f: [xp.asarray(a) for a in host[f]] for f in fields}
    return replace(state, alpha_prior=a_lam, beta_prior=b_lam, **moved), int(n_skipped)


def _prior_mean_variance(state):
    """``E_q[1/lambda] = beta / (alpha - 1)`` of the prior precision's Gamma."""
    return float(state.beta_prior) / (float(state.alpha_prior) - 1.0)


def _output_moments(means, variances, x, bias, spike_slab):
    """Mean and variance of the network output at the rows ``x`` (the total
    moments of SSPBP's spike-and-slab output with ``spike_slab``)."""
    if spike_slab:
        rho, slab_mean, slab_var, _ = pbp_spike_slab.forward(means, variances, x, bias=bias)
        mean = rho * slab_mean
        return mean[..., 0], (rho * slab_var + (1.0 - rho) * slab_mean * mean)[..., 0]
    m, v = forward(means, variances, x, bias=bias)
    return m[..., 0], v[..., 0]


def _batch_update_helps(m0, v0, res, x, y, alpha_noise, beta_noise, bias, spike_slab):
    """Whether a batch's combined update (:func:`adf_update`, result ``res``)
    moved the output means towards the batch's targets (``m0``, ``v0``: the
    output's moments before it, from the update's own forward pass).

    The points' updates, all taken from the same posterior, add as
    independent sites; where the points agree their sum overshoots (a
    reviewer's boston fit: test RMSE 2.4 at 32 rows per batch, 6.0 at 64,
    1.2e5 at 128), as in TAGI (tagi.md §4.4, ``inference.tagi._checked_step``).
    The check is TAGI's with each row's part capped: ``sum log1p((y - m)^2 /
    s)``, ``s`` the predictive variance before the update, must not grow (nor
    become non-finite).  With TAGI's ``sum (y - m)^2 / s`` one outlier's term
    outweighed the rest, and a batch that moved it closer was kept while every
    other row got far worse (boston with 2% of its targets 30 sd out: test
    RMSE 45.5 at 128 rows per batch against 20.4 for PBP).
    """
    xp = array_namespace(x, *res.means)
    m1, _ = _output_moments(res.means, res.variances, x, bias, spike_slab)
    inv_s = 1.0 / (v0 + beta_noise / (alpha_noise - 1.0))
    before = xp.sum(xp.log1p((y - m0) ** 2 * inv_s))
    after = xp.sum(xp.log1p((y - m1) ** 2 * inv_s))
    return bool(after <= before)


def run_epoch(
    state, X, y, order, *, batch_size=1, spike_slab=False, min_var=MIN_VAR, refine=True
):
    """One epoch of PBP (pbp.md §4.1): ADF over the points in ``order``, then
    one EP sweep over the prior factors.

    NumPy arrays with ``batch_size=1`` go to the compiled kernel
    (:func:`~skbayesnn.inference.pbp_kernel.run_epoch_kernel`); other
    namespaces, or batches, use :func:`adf_update` point by point or batch by
    batch.

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
    batch_size : int, default=1
        Points per update; 1 is PBP, larger batches combine each batch's
        point updates as independent sites (module docstring, "Batches"),
        a batch whose combined update overshoots being split into halves
        (:func:`_batch_update_helps`).
    spike_slab : bool, default=False
        Spike-and-slab messages (SSPBP, pbp.md §6).
    min_var : float, default=1e-100
        Rejection threshold of :func:`apply_adf_step`.
    refine : bool, default=True
        Run :func:`refine_prior` after the ADF pass.  A sweep that changes the
        prior's mean weight variance ``E_q[1/lambda] = beta / (alpha - 1)`` by
        more than ``MAX_PRIOR_SWEEP_RATIO`` fold (or to a non-finite value) is
        discarded and the state after the ADF pass kept, as pbp.md §4.4
        discards an invalid weight update.  Not in the reference, whose prior
        is fixed at Gamma(6, 6): the random initial means of §4.2 are held by
        no prior factor, so where the data add almost no precision the cavity
        of §3.4 keeps their ``m / v`` over a near-zero precision, a mean of
        hundreds of prior standard deviations; with a prior tighter than the
        default the sequential sweep then raised ``E_q[1/lambda]`` 1e2-1e6
        fold and set the later weights to their cavities (concrete, prior
        (6, 1): test RMSE 28 against 6.6 without refinement).  At the default
        prior a sweep after a full epoch on the UCI data moves it at most ~3
        fold, but after an epoch of a few rows (online batches of 10-50) it
        can diverge too; discarding it was better there as well.

    Returns
    -------
    new_state : PBPState
    info : dict
        ``n_rejected`` (weight updates rejected), ``n_noise_rejected`` (Gamma
        updates discarded), ``n_skipped`` (prior factors skipped),
        ``prior_sweep_rejected`` (1 if the sweep was discarded), ``n_split``
        (batches split into halves), as ints, and ``log_z`` (the sum of the
        points' ``log Z`` before their updates).
    """
    arrays = list(state.means) + list(state.variances) + [X, y]
    n_split = 0
    if batch_size == 1 and all(type(a) in (np.ndarray, np.memmap) for a in arrays):
        means = tuple(np.array(m, dtype=np.float64) for m in state.means)
        variances = tuple(np.array(v, dtype=np.float64) for v in state.variances)
        a_g, b_g, n_rejected, n_noise, log_z = pbp_kernel.run_epoch_kernel(
            means,
            variances,
            np.ascontiguousarray(X, dtype=np.float64),
            np.ascontiguousarray(y, dtype=np.float64),
            np.asarray(order, dtype=np.int64),
            float(state.alpha_noise),
            float(state.beta_noise),
            bool(state.bias),
            bool(spike_slab),
            float(min_var),
        )
        means, variances = list(means), list(variances)
    else:
        # With bias units spike-and-slab messages are PBP's (pbp.md §6.6).
        spike_slab = spike_slab and not state.bias
        means, variances = state.means, state.variances
        a_g, b_g = state.alpha_noise, state.beta_noise
        n_rejected, n_noise, log_z, n_split = 0, 0, 0.0, 0
        n = order.shape[0] if hasattr(order, "shape") else len(order)
        # (a stack of row ranges: a batch whose combined update overshoots is
        # replaced by its two halves, first half on top)
        stack = [(start, min(start + batch_size, n)) for start in range(0, n, batch_size)][::-1]
        # single points' indices read on the host (one copy, not a device sync per point)
        host_order = asnumpy(order)
        while stack:
            lo, hi = stack.pop()
            if hi - lo == 1:
                i = int(host_order[lo])
                x_b, y_b = X[i], y[i]
            else:
                idx = order[lo:hi]
                x_b, y_b = X[idx], y[idx]
            res, m0, v0 = adf_update(
                means,
                variances,
                a_g,
                b_g,
                x_b,
                y_b,
                bias=state.bias,
                spike_slab=spike_slab,
                min_var=min_var,
                return_output=True,
            )
            if hi - lo > 1 and not _batch_update_helps(m0, v0, res, x_b, y_b, a_g, b_g,
                                                       state.bias, spike_slab):
                n_split += 1
                mid = lo + (hi - lo) // 2
                stack += [(mid, hi), (lo, mid)]
                continue
            means, variances = res.means, res.variances
            a_g, b_g = res.alpha_noise, res.beta_noise
            n_rejected = n_rejected + res.n_rejected
            n_noise = n_noise + res.noise_rejected
            log_z = log_z + res.log_z
    new_state = replace(state, means=means, variances=variances, alpha_noise=a_g, beta_noise=b_g)
    n_skipped, sweep_rejected = 0, 0
    if refine:
        refined, n_skipped = refine_prior(new_state)
        ratio = _prior_mean_variance(refined) / _prior_mean_variance(new_state)
        if math.isfinite(ratio) and 1.0 / MAX_PRIOR_SWEEP_RATIO <= ratio <= MAX_PRIOR_SWEEP_RATIO:
            new_state = refined
        else:
            sweep_rejected = 1
    info = dict(
        n_rejected=int(n_rejected),
        n_noise_rejected=int(n_noise),
        n_skipped=n_skipped,
        n_split=n_split,
        prior_sweep_rejected=sweep_rejected,
        log_z=float(log_z),
    )
    return new_state, info
