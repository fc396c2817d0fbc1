"""Spike-and-slab PBP (SSPBP): forward messages, mixture log Z and its gradients.

Ott & Williamson (2022), as extracted in shared/methods/pbp.md §6.  SSPBP is PBP
(:mod:`skbayesnn.inference.pbp`) with every activation message a spike-and-slab
``(1 - rho) delta_0 + rho N(m~, v~)`` instead of a Gaussian (pbp.md §6.2); the
weights keep PBP's factorised Gaussian posterior, and the ADF update of the
weights (pbp.md §3.1), the noise Gamma update (§3.3), the prior EP (§3.4) and
the guards are PBP's, fed with the mixture normalisers of :func:`noise_log_z`
and the gradients of :func:`log_z_grads` (pbp.md §6.5).

Representation.  The layers are PBP's: per layer a mean matrix ``M`` and a
variance matrix ``V``.  With ``bias=True`` (PBP's network) they have shape
``(n_out, n_in + 1)``, the last column is the bias (a weight on a constant
input 1, a spike-and-slab input with ``rho = 1``) and the scaling is
``s = 1 / (n_in + 1)``; with ``bias=False`` (the bias-free networks of
pbp.md §1.1, §6.7) they have shape ``(n_out, n_in)``, there is no constant
input and ``s = 1 / n_in``.  In both cases ``s = 1 / M.shape[1]`` and the layer
computes ``a = sqrt(s) M z``.  The network input is deterministic: a slab with
``rho = 1`` and variance 0, so the first layer's output is Gaussian (pbp.md §6.1).

With bias units every linear output has ``rho = 1`` exactly and SSPBP *is* PBP
(pbp.md §6.6); the code takes that path without special cases (the rho
gradients are then exactly 0).  Without biases the split between spike and slab
changes from the second layer on (pbp.md §6.7).

Contents

* :func:`forward` -- SSPBP's messages (pbp.md §6.3-§6.4) and the per-layer slab
  probabilities ``rho_lin`` (the Table 3.2 diagnostic, pbp.md §7.8);
* :func:`noise_log_z` -- the mixture ``log Z``, ``log Z1``, ``log Z2`` (pbp.md §6.5);
* :func:`log_z_grads` -- ``log Z`` and its closed-form gradients with respect to
  every ``M`` and ``V`` (no autodiff), in the return convention of
  :func:`skbayesnn.inference.pbp.log_z_grads`.

Backward pass.  Each unit's message is parametrised by ``(rho, E, Var)``, its
slab probability and total mean and variance.  A linear layer maps the inputs'
``(E, Var)`` exactly as PBP does (so the weight gradients are PBP's formulas,
pbp.md §3.2, given ``dlogZ/dE`` and ``dlogZ/dVar`` of its outputs), and its
``rho_lin = 1 - prod_i (1 - rho_i)`` does not depend on the weights.  The slab
``(m~, v~) = (E / rho, Var / rho - (1 - rho) (E / rho)^2)`` and the ReLU, ``(rho,
E, Var) -> (rho Phi, rho mu_R, rho Var_R + rho (1 - rho) mu_R^2)`` with ``mu_R``,
``Var_R`` the moments of ``ReLU(N(m~, v~))``, are differentiated in closed form
(:func:`_relu_backward`, :func:`_slab_to_total_grads`; the derivation is in
their docstrings).

Everything runs on the array namespace of its inputs (NumPy, CuPy or the test
suite's strict namespace), in float64.  PBP's Gaussian messages, with or without
biases, are :func:`skbayesnn.inference.pbp.forward`; the compiled CPU kernel
(:mod:`.pbp_kernel`) runs the same spike-and-slab updates point by point.
"""


from __future__ import annotations

import math
from typing import NamedTuple

from .._backend import array_namespace
from ..core.linear import linear_moments, linear_moments_vjp
from ..core.spike_slab import (
    rectified_slab,
    slab_probability,
    slab_probability_grad,
    spike_slab_moments,
    spike_slab_project,
)

__all__ = [
    "SpikeSlabLayerCache",
    "forward",
    "noise_log_z",
    "log_z_grads",
]

_LOG_2PI = math.log(2.0 * math.pi)
# Largest argument given to exp for the responsibilities N_k / Z of the mixture
# (they can only exceed 1/(1 - rho) or 1/rho where that weight is 0 or 1
# exactly; the clip keeps such a gradient finite).
_MAX_EXP_ARG = 700.0


class SpikeSlabLayerCache(NamedTuple):
    """What :func:`forward` keeps of one layer for the backward pass.

    ``in_rho``, ``in_mean``, ``in_var``: the layer input as slab probabilities and
    total means and variances, with the bias entry (1, 1, 0) appended when the
    network has biases; ``in_var`` is None for the deterministic network input.
    ``rho``: the slab probability of the linear output, shape ``(...,)``.
    ``pre_mean``, ``pre_var``: total mean and variance of the linear output
    ``a = sqrt(s) M z`` (PBP's linear moments, pbp.md §2.1).  ``slab_mean``,
    ``slab_var``: the slab of its projection (pbp.md §6.2).  ``relu``: the
    :class:`~skbayesnn.core.spike_slab.RectifiedSlab` of that slab for hidden
    layers, None for the output layer.
    """

    in_rho: object
    in_mean: object
    in_var: object
    rho: object
    pre_mean: object
    pre_var: object
    slab_mean: object
    slab_var: object
    relu: object


def _layer_scale(M):
    # s = 1 / n_columns, with or without the bias column (pbp.md §1.1), as
    # skbayesnn.inference.pbp.layer_scales.
    return 1.0 / M.shape[1]


def _check_layers(means, variances, n_features, bias):
    if len(means) == 0 or len(means) != len(variances):
        raise ValueError(
            f"means and variances must be non-empty lists of the same length, got "
            f"{len(means)} and {len(variances)}."
        )
    extra = 1 if bias else 0
    n_in = n_features
    for l, (M, V) in enumerate(zip(means, variances)):
        if M.ndim != 2 or M.shape != V.shape or M.shape[1] != n_in + extra:
            raise ValueError(
                f"layer {l}: means and variances must have shape (n_out, {n_in + extra}) "
                f"({'n_in + 1 with the bias column' if bias else 'n_in, bias-free'}), got "
                f"{tuple(M.shape)} and {tuple(V.shape)}."
            )
        n_in = M.shape[0]


def _append_bias(xp, mean, var, rho=None):
    """Append the constant input: mean 1, variance 0, slab probability 1."""
    ones = xp.ones(mean.shape[:-1] + (1,), dtype=xp.float64)
    mean = xp.concatenate([mean, ones], axis=-1)
    if var is not None:
        var = xp.concatenate([var, 0.0 * ones], axis=-1)
    if rho is None:
        return mean, var
    return mean, var, xp.concatenate([rho, ones], axis=-1)


def forward(means, variances, X, *, bias=True, return_cache=False):
    """SSPBP's spike-and-slab messages through the network (pbp.md §6.3-§6.4).

    Per layer, with the input messages as slab probabilities ``rho_i`` and total
    moments ``(E_i, Var_i)`` (the bias entry ``(1, 1, 0)`` appended when
    ``bias=True``):

    * ``rho_lin = 1 - prod_i (1 - rho_i)``
      (:func:`~skbayesnn.core.spike_slab.slab_probability`);
    * the total moments of ``a = sqrt(s) M z`` are PBP's linear moments of
      ``(E, Var)`` (pbp.md §6.3, §6.7), projected onto the family
      (:func:`~skbayesnn.core.spike_slab.spike_slab_project`);
    * hidden layers: the ReLU of the spike-and-slab (pbp.md §6.4), whose total
      moments ``(rho mu_R, rho Var_R + rho (1 - rho) mu_R^2)`` feed the next
      layer.

    Parameters
    ----------
    means, variances : list of arrays
        Shape ``(n_out, n_in + 1)`` per layer with ``bias=True``, ``(n_out, n_in)``
        with ``bias=False``.
    X : array of shape (n_features,) or (n_samples, n_features)
        Deterministic inputs (``rho = 1``, variance 0).
    bias : bool, default=True
    return_cache : bool, default=False
        Also return one :class:`SpikeSlabLayerCache` per layer.

    Returns
    -------
    rho : array of shape (..., n_outputs)
        Slab probability of the output (``rho_lin`` of the last layer, repeated
        for every output unit).
    slab_mean, slab_var : arrays of shape (..., n_outputs)
        The output slab ``N(m~, v~)``.
    layer_rho : list of arrays of shape (...,)
        ``rho_lin`` of every layer's linear output (1 exactly with biases;
        pbp.md §7.8, Table 3.2, for bias-free networks).
    cache : list of SpikeSlabLayerCache
        Only when ``return_cache=True``.
    """
    xp = array_namespace(X, *means)
    mean = xp.asarray(X, dtype=xp.float64)
    _check_layers(means, variances, mean.shape[-1], bias)
    var = None
    in_rho = xp.ones_like(mean)
    layer_rho, cache = [], []
    n_layers = len(means)
    for l, (M, V) in enumerate(zip(means, variances)):
        s = _layer_scale(M)
        if bias:
            mean, var, in_rho = _append_bias(xp, mean, var, in_rho)
        rho_lin = slab_probability(in_rho)
        h_mean, h_var = linear_moments(mean, var, M, V)
        pre_mean, pre_var = math.sqrt(s) * h_mean, s * h_var
        rho, slab_mean, slab_var = spike_slab_project(rho_lin[..., None], pre_mean, pre_var)
        layer_rho.append(rho_lin)
        if l == n_layers - 1:
            if return_cache:
                cache.append(
                    SpikeSlabLayerCache(
                        in_rho, mean, var, rho_lin, pre_mean, pre_var, slab_mean, slab_var, None
                    )
                )
            break
        relu = rectified_slab(slab_mean, slab_var)
        if return_cache:
            cache.append(
                SpikeSlabLayerCache(
                    in_rho, mean, var, rho_lin, pre_mean, pre_var, slab_mean, slab_var, relu
                )
            )
        # Total moments of ReLU of the spike-and-slab: 0 with probability 1 - rho,
        # ReLU(slab) with probability rho (pbp.md §6.4); the moments of such a
        # mixture are those of spike_slab_moments with ReLU(slab)'s mean and
        # variance in place of the slab's.
        mean, var = spike_slab_moments(rho, relu.relu_mean, relu.relu_var)
        in_rho = rho * relu.cdf
    out = (rho, slab_mean, slab_var, layer_rho)
    if return_cache:
        return out + (cache,)
    return out


def _mixture_log_weights(xp, rho):
    """``(log(1 - rho), log rho)``, ``-inf`` where the weight is 0 (no warning)."""
    has_spike = rho < 1.0
    has_slab = rho > 0.0
    log_spike = xp.where(has_spike, xp.log1p(-xp.where(has_spike, rho, 0.0)), -xp.inf)
    log_slab = xp.where(has_slab, xp.log(xp.where(has_slab, rho, 1.0)), -xp.inf)
    return log_spike, log_slab


def _normal_log_pdf(xp, y, mean, var):
    r = y - mean
    return -0.5 * (_LOG_2PI + xp.log(var)) - 0.5 * (r * r) / var


def noise_log_z(rho, slab_mean, slab_var, y, alpha_noise, beta_noise):
    """``log Z``, ``log Z1``, ``log Z2`` of SSPBP's output (pbp.md §6.5).

    ``Z_k = (1 - rho) N(y | 0, b/(a + k - 1)) + rho N(y | m~, b/(a + k - 1) + v~)``
    (``a, b`` = ``alpha_noise, beta_noise``): PBP's normalisers (pbp.md §2.3, the
    noise variance ``E[1/gamma]`` under ``Gamma(a + k, b)``) of the spike-and-slab
    output, evaluated as ``logaddexp`` of the two weighted log densities, so
    neither term can underflow.  The ``-1/2 log(2 pi)`` constant is kept, as in
    :func:`skbayesnn.inference.pbp.noise_log_z`; ``rho = 1`` gives PBP's values.

    Parameters
    ----------
    rho, slab_mean, slab_var : arrays
        Output message from :func:`forward`.
    y : array-like
        Target(s), broadcast against ``slab_mean``.
    alpha_noise, beta_noise : float or 0-d array
        ``q(gamma) = Gamma(alpha_noise, beta_noise)``; ``alpha_noise > 1``.

    Returns
    -------
    log_z0, log_z1, log_z2 : arrays of the broadcast shape
    """
    xp = array_namespace(rho, slab_mean, slab_var, y, alpha_noise, beta_noise)
    rho = xp.asarray(rho, dtype=xp.float64)
    log_spike, log_slab = _mixture_log_weights(xp, rho)
    out = []
    for k in range(3):
        noise = beta_noise / (alpha_noise + (k - 1.0))
        log_n0 = _normal_log_pdf(xp, y, 0.0, noise)
        log_n1 = _normal_log_pdf(xp, y, slab_mean, noise + slab_var)
        out.append(xp.logaddexp(log_spike + log_n0, log_slab + log_n1))
    return tuple(out)


# ---------------------------------------------------------------------------
# closed-form backward pass
# ---------------------------------------------------------------------------


def _slab_to_total_grads(rho, slab_mean, slab_var, g_rho_direct, h_mean, h_var):
    """Gradients with respect to ``(rho, E, Var)`` from those of the slab.

    For a function ``F(rho, m, v)`` of a message's slab probability and slab
    ``m = E / rho``, ``v = Var / rho - (1 - rho) m^2`` (pbp.md §6.2):

    ``dm/drho = -m/rho``, ``dm/dE = 1/rho``, ``dm/dVar = 0``,
    ``dv/drho = (m^2 - v)/rho``, ``dv/dE = -2 m (1 - rho)/rho``, ``dv/dVar = 1/rho``.

    Every ``dF/dm`` and ``dF/dv`` met here carries a factor ``rho`` (the slab
    enters with weight ``rho``), so the caller passes ``h_mean = (dF/dm)/rho``
    and ``h_var = (dF/dv)/rho`` (``g_rho_direct = dF/drho`` at fixed ``m, v``) and
    no division occurs:

    ``dF/drho = g_rho_direct - h_mean m + h_var (m^2 - v)``,
    ``dF/dE = h_mean - 2 h_var m (1 - rho)``, ``dF/dVar = h_var``.
    """
    g_rho = g_rho_direct - h_mean * slab_mean + h_var * (slab_mean * slab_mean - slab_var)
    g_mean = h_mean - 2.0 * h_var * slab_mean * (1.0 - rho)
    return g_rho, g_mean, h_var


def _relu_backward(rho, slab_mean, slab_var, relu, g_rho_out, g_mean_out, g_var_out):
    """Gradients through the ReLU of a spike-and-slab, ``(rho, E, Var)`` to ``(rho', E', Var')``.

    With ``X ~ N(m, v)`` the slab, ``Phi = Phi(m/sqrt(v))``, ``mu = E[ReLU X]``,
    ``Var_R = Var[ReLU X]`` (pbp.md §6.4):

    ``rho' = rho Phi``, ``E' = rho mu``, ``Var' = rho Var_R + rho (1 - rho) mu^2``.

    The rectified-Gaussian identities ``dmu/dm = Phi``, ``dmu/dv = phi/(2 sigma)``,
    ``dE[ReLU^2]/dm = 2 mu``, ``dE[ReLU^2]/dv = Phi`` (pbp.md §3.2),
    ``dPhi/dm = phi/sigma``, ``dPhi/dv = -phi alpha/(2 v)`` give, divided by
    ``rho`` (see :func:`_slab_to_total_grads`):

    ``h_m = g_rho' phi/sigma + g_E' Phi + 2 g_Var' mu (1 - rho Phi)``,
    ``h_v = g_rho' dPhi/dv + g_E' phi/(2 sigma) + g_Var' (Phi - rho mu phi/sigma)``,

    and at fixed slab ``d/drho = g_rho' Phi + g_E' mu + g_Var' (Var_R + (1 - 2 rho) mu^2)``.
    With ``rho = 1`` and ``g_rho' = 0`` this is PBP's ReLU backward (pbp.md §3.2).
    """
    mu = relu.relu_mean
    # 1 - rho Phi evaluated as (1 - rho) + rho Phi(-alpha): no cancellation for Phi ~ 1.
    one_minus_rho_cdf = (1.0 - rho) + rho * relu.ccdf
    h_mean = (
        g_rho_out * relu.pdf_over_std
        + g_mean_out * relu.cdf
        + 2.0 * g_var_out * mu * one_minus_rho_cdf
    )
    h_var = (
        g_rho_out * relu.cdf_dvar
        + g_mean_out * (0.5 * relu.pdf_over_std)
        + g_var_out * (relu.cdf - rho * mu * relu.pdf_over_std)
    )
    g_rho_direct = (
        g_rho_out * relu.cdf
        + g_mean_out * mu
        + g_var_out * (relu.relu_var + (1.0 - 2.0 * rho) * (mu * mu))
    )
    return _slab_to_total_grads(rho, slab_mean, slab_var, g_rho_direct, h_mean, h_var)


def log_z_grads(means, variances, x, y, alpha_noise, beta_noise, *, bias=True,
                return_residual2=False, return_output=False):
    """SSPBP's ``log Z`` of one data point (or of each point of a batch) and its
    closed-form gradients (pbp.md §6.5).

    ``log Z`` is the mixture normaliser of :func:`noise_log_z`.  Its gradients
    with respect to the output message ``(rho, m~, v~)``, with
    ``v_t = b/(a - 1) + v~``, ``r = y - m~`` and the ratios ``n_1 = N(y | m~, v_t)/Z``,
    ``n_0 = N(y | 0, b/(a - 1))/Z``, are

    ``dlogZ/drho = n_1 - n_0``, ``dlogZ/dm~ = rho n_1 r/v_t``,
    ``dlogZ/dv~ = rho n_1 (r^2/v_t - 1)/(2 v_t)``,

    converted to the total moments by :func:`_slab_to_total_grads`.  Each layer
    then passes back (pbp.md §3.2 with ``(m^z, v^z)`` the input total moments
    and ``dm, dv`` the gradients with respect to its output's total moments):

    * ``dlogZ/dM_ij = dm_i sqrt(s) E_j + dv_i 2 s M_ij Var_j``,
      ``dlogZ/dV_ij = dv_i s (E_j^2 + Var_j)``;
    * ``dlogZ/dE_j = sum_i dm_i sqrt(s) M_ij + dv_i 2 s V_ij E_j``,
      ``dlogZ/dVar_j = sum_i dv_i s (M_ij^2 + V_ij)``;
    * ``dlogZ/drho_j = (sum_i dlogZ/drho_lin,i) prod_{k != j} (1 - rho_k)``
      (:func:`~skbayesnn.core.spike_slab.slab_probability_grad`), exactly 0 with
      a bias input;

    and through the ReLU of the layer below as in :func:`_relu_backward`.

    Parameters
    ----------
    means, variances : list of arrays
        Shape ``(n_out, n_in + 1)`` per layer with ``bias=True``, ``(n_out, n_in)``
        with ``bias=False``; the last layer has one output.
    x : array of shape (n_features,) or (n_points, n_features)
        One input, or a batch (each point's gradients are returned separately,
        along a leading axis, as :func:`skbayesnn.inference.pbp.log_z_grads`).
    y : float, 0-d array or array of shape (n_points,)
        The target(s).
    alpha_noise, beta_noise : float or 0-d array
        ``q(gamma)``; ``alpha_noise > 1``.
    bias : bool, default=True

    Returns
    -------
    log_z : array of shape () or (n_points,)
        The mixture ``log Z`` of pbp.md §6.5.
    grad_means, grad_variances : lists of arrays
        ``dlogZ/dM`` and ``dlogZ/dV`` per layer (with a leading batch axis for a
        batch).
    log_z1, log_z2 : arrays like ``log_z``
        The normalisers with ``alpha_noise + 1`` and ``+ 2`` (for
        :func:`skbayesnn.inference.pbp.gamma_adf_update`).
    residual2 : array like ``log_z``
        The squared residuals of the output's components (``y^2`` for the
        spike, ``(y - m~)^2`` for the slab) weighted by their posterior
        responsibilities; only with
        ``return_residual2=True`` (for :func:`skbayesnn.inference.pbp.guard_noise_update`).
    out_mean, out_var : arrays like ``log_z``
        The total mean and variance of the spike-and-slab output, only with
        ``return_output=True`` (as :func:`skbayesnn.inference.pbp.log_z_grads`).
    """
    xp = array_namespace(x, *means)
    ndim = getattr(x, "ndim", 1)
    if ndim not in (1, 2):
        raise ValueError(
            f"x must be one input (n_features,) or a batch (n_points, n_features), got shape "
            f"{x.shape}."
        )
    if means[-1].shape[0] != 1:
        raise ValueError("SSPBP has a single output (pbp.md §1.1).")
    X = x[None, :] if ndim == 1 else x
    rho_out, m_out, v_out, _, cache = forward(means, variances, X, bias=bias, return_cache=True)
    y = xp.reshape(xp.asarray(y, dtype=xp.float64), (-1, 1))
    log_z0, log_z1, log_z2 = noise_log_z(rho_out, m_out, v_out, y, alpha_noise, beta_noise)
    # Output seeds (pbp.md §6.5); shape (n_points, 1).
    noise = beta_noise / (alpha_noise - 1.0)
    v_tot = noise + v_out
    resid = y - m_out
    log_n0 = _normal_log_pdf(xp, y, 0.0, noise)
    log_n1 = _normal_log_pdf(xp, y, m_out, v_tot)
    ratio0 = xp.exp(xp.minimum(log_n0 - log_z0, _MAX_EXP_ARG))
    ratio1 = xp.exp(xp.minimum(log_n1 - log_z0, _MAX_EXP_ARG))
    h_mean = ratio1 * resid / v_tot
    h_var = ratio1 * 0.5 * (resid * resid / v_tot - 1.0) / v_tot
    g_rho, g_mean, g_var = _slab_to_total_grads(
        rho_out, m_out, v_out, ratio1 - ratio0, h_mean, h_var
    )
    n_layers = len(means)
    grad_means, grad_variances = [None] * n_layers, [None] * n_layers
    for l in range(n_layers - 1, -1, -1):
        M, V, c = means[l], variances[l], cache[l]
        s = _layer_scale(M)
        # PBP's linear-layer gradients of the total moments (pbp.md §3.2).
        grads = linear_moments_vjp(
            c.in_mean, c.in_var, M, V, math.sqrt(s) * g_mean, s * g_var, input_grads=l > 0
        )
        grad_means[l], grad_variances[l] = grads[0], grads[1]
        if l == 0:
            break
        # rho_lin is one scalar per point, shared by every output unit: its
        # gradient is the sum over units.
        d_mean_in, d_var_in = grads[2], grads[3]
        d_rho_in = xp.sum(g_rho, axis=-1, keepdims=True) * slab_probability_grad(c.in_rho)
        if bias:  # the constant input has no parameters upstream
            d_mean_in, d_var_in, d_rho_in = (
                d_mean_in[:, :-1], d_var_in[:, :-1], d_rho_in[:, :-1]
            )  # fmt: skip
        below = cache[l - 1]
        g_rho, g_mean, g_var = _relu_backward(
            below.rho[:, None],
            below.slab_mean,
            below.slab_var,
            below.relu,
            d_rho_in,
            d_mean_in,
            d_var_in,
        )
    per_point = (log_z0, log_z1, log_z2)
    if return_residual2:
        # The components' squared residuals weighted by their responsibilities:
        # the largest over components of positive weight let a far slab of
        # weight 1e-30, which leaves log Z as it is, switch the guard off.
        log_spike, log_slab = _mixture_log_weights(xp, rho_out)
        w0 = xp.exp(log_spike + log_n0 - log_z0)
        w1 = xp.exp(log_slab + log_n1 - log_z0)
        r2 = w0 * (y * y) + w1 * (resid * resid)  # (m_out: the slab's mean)
        r2 = xp.where(rho_out >= 1.0, resid * resid, xp.where(rho_out <= 0.0, y * y, r2))
        per_point += (r2,)
    if return_output:
        total_mean = rho_out * m_out
        per_point += (total_mean, rho_out * v_out + (1.0 - rho_out) * m_out * total_mean)
    return _log_z_grads_results(xp, ndim, grad_means, grad_variances, *per_point)


def _log_z_grads_results(xp, ndim, grad_means, grad_variances, log_z0, *per_point):
    """The return value of :func:`log_z_grads` (and of
    :func:`skbayesnn.inference.pbp.log_z_grads`): ``(log_z0, grad_means,
    grad_variances, *per_point)`` with the per-point ``(n_points, 1)`` arrays
    as ``(n_points,)``; for one point (``ndim`` 1 of ``x``) their length-1 axes
    summed away (indexing would give a NumPy scalar and leave the namespace)
    and the gradients' leading axis dropped."""
    if ndim == 1:
        return (xp.sum(log_z0), [g[0] for g in grad_means], [g[0] for g in grad_variances],
                *(xp.sum(a) for a in per_point))
    return (log_z0[:, 0], grad_means, grad_variances, *(a[:, 0] for a in per_point))
