"""Compiled CPU kernel of PBP's sequential ADF epoch and EP prior sweep.

PBP updates the posterior after every single data point (pbp.md §4.1): a
forward pass, ``log Z`` and its gradients, an update of every weight and of the
noise Gamma.  On NumPy arrays each step is ~40 small array operations whose
fixed cost (~1 µs each) dominates a 1x50 network, so 40 epochs of 7,000 rows
would take minutes.  This module runs the same arithmetic compiled by Numba, one
call per epoch, with scalar loops and no temporaries.  :mod:`.pbp` stays the
reference and the array-namespace (GPU) path; the tests check that the two agree
to rounding.

Messages.  Every unit carries ``(rho, mu, var)``: the probability of being
non-zero and the total mean and variance of its value.  With Gaussian messages
(PBP) ``rho = 1`` throughout.  With spike-and-slab messages (SSPBP, pbp.md §6)
a linear layer's output is ``(1 - rho) delta_0 + rho N(slab_mean, slab_var)``
with ``rho = 1 - prod_i (1 - rho_i)`` over its inputs (§6.3), and a ReLU turns
the slab into a spike plus a truncated normal (§6.4).  A linear layer's total
mean and variance only depend on its inputs' total moments (the formula of
pbp.md §2.1 with ``E z = rho m``, ``Var z = rho (m^2 + v) - rho^2 m^2``), so the
weight gradients have PBP's form in both cases; the spike-and-slab case adds a
gradient with respect to each layer's scalar ``rho``.  With bias units every
``rho`` is exactly 1 (§6.6) and the two coincide.

Layout follows :mod:`.pbp`: layer ``l`` is a mean and a variance matrix of shape
``(n_out, n_in + 1)`` with the bias in the last column (``(n_out, n_in)``
without biases), and the layer input is scaled by ``sqrt(s)``,
``s = 1 / n_columns`` (pbp.md §1.1).  Updates happen in place.
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit

# Same constants as skbayesnn.core.activations / skbayesnn.inference.pbp.
_A_MAX = 50.0
_LOG_2PI = math.log(2.0 * math.pi)
_INV_SQRT_2 = 1.0 / math.sqrt(2.0)
_INV_SQRT_2PI = 1.0 / math.sqrt(2.0 * math.pi)
_MAX_EXP_ARG = 700.0
_MAX_CAVITY_VAR = 1e6
# Below this standardised mean the inverse Mills ratio comes from a continued
# fraction (pbp.md §2.2's reference switches to an asymptotic series at -30).
_MILLS_CF_BELOW = -3.0


@njit(cache=True, error_model="numpy")
def _inverse_mills_ratio(a, pdf, cdf):
    """``(gamma, a + gamma, 1 - gamma (a + gamma))`` with ``gamma = phi(a)/Phi(a)``,
    given ``pdf = phi(a)`` and ``cdf = Phi(a)``.

    The last two are the mean offset and the variance factor of ``N(a, 1)``
    truncated to ``(0, inf)`` (pbp.md §2.2).  For ``a >= -3`` the direct ratio
    (a few ulp).  Below, ``Phi(a)`` heads for underflow and both offsets cancel,
    so everything comes from Laplace's continued fraction
    ``Phi(-x)/phi(x) = 1/(x + 1/(x + 2/(x + 3/(x + ...))))``, ``x = -a``: with its
    tails ``D = x + 2/D2``, ``D2 = x + 3/D3``, ``gamma = x + 1/D``,
    ``a + gamma = 1/D`` and ``1 - gamma (a + gamma) = (x + 4/D2 - 3/D3)/(D^2 D2)``,
    all free of cancellation.  ``10 + 500/x^2`` terms reach float64 accuracy for
    every ``x >= 3`` (checked against 40-digit arithmetic).
    """
    if a >= _MILLS_CF_BELOW:
        gamma = pdf / cdf
        a_plus_g = a + gamma
        return gamma, a_plus_g, 1.0 - gamma * a_plus_g
    x = -a
    t = x  # the tail D_k = x + k / D_{k+1}, started deep enough to have converged
    d3 = x
    d2 = x
    for k in range(10 + int(500.0 / (x * x)), 1, -1):
        d3 = d2
        d2 = t
        t = x + k / t
    # now t = D (k = 2), d2 = D2, d3 = D3
    return x + 1.0 / t, 1.0 / t, (x + 4.0 / d2 - 3.0 / d3) / (t * t * d2)


@njit(cache=True, error_model="numpy")
def _relu_parts(mean, var):
    """``(mr, vr, cdf, ccdf, pdf_over_std, a, std)`` of ``ReLU(N(mean, var))``.

    The same numbers as ``core.activations._relu_core`` and
    ``pbp._relu_backward_terms``: ``a = mean/std`` clipped to ``[-50, 50]``,
    the inverse Mills ratio ``gamma = phi(a)/Phi(a)`` without cancellation,
    ``mr = E[ReLU]``, ``vr = Var[ReLU]`` (pbp.md §2.2).
    """
    if var > 0.0:
        std = math.sqrt(var)
        lim = _A_MAX * std
        a = min(max(mean, -lim), lim) / std
    else:
        std = 0.0
        a = _A_MAX if mean > 0.0 else -_A_MAX
    # One erfc: the tail probability Phi(-|a|) directly, the other side as its
    # complement (>= 1/2, so no cancellation).
    tail = 0.5 * math.erfc(abs(a) * _INV_SQRT_2)
    if a < 0.0:
        cdf, ccdf = tail, 1.0 - tail
    else:
        cdf, ccdf = 1.0 - tail, tail
    pdf = _INV_SQRT_2PI * math.exp(-0.5 * a * a)
    gamma, a_plus_g, trunc = _inverse_mills_ratio(a, pdf, cdf)
    if a < 0.0:
        mr = std * cdf * a_plus_g
    else:
        mr = mean * cdf + std * pdf
    trunc = min(max(trunc, 0.0), 1.0)
    factor = min(max(cdf * (trunc + ccdf * a_plus_g * a_plus_g), 0.0), 1.0)
    vr = var * factor
    pdf_over_std = pdf / std if std > 0.0 else 0.0
    return mr, vr, cdf, ccdf, pdf_over_std, a, std


@njit(cache=True, error_model="numpy")
def _log_normal(r2, var):
    return -0.5 * (_LOG_2PI + math.log(var)) - 0.5 * r2 / var


@njit(cache=True, error_model="numpy")
def _log1m(p):
    """``log(1 - p)``, ``-inf`` at ``p = 1`` (no spike)."""
    return math.log1p(-p) if p < 1.0 else -math.inf


@njit(cache=True, error_model="numpy")
def _logaddexp(a, b):
    if a == -math.inf:
        return b
    if b == -math.inf:
        return a
    hi = max(a, b)
    return hi + math.log1p(math.exp(-abs(a - b)))


@njit(cache=True, error_model="numpy")
def _gamma_update(lz0, lz1, lz2, a, b):
    """Minka's Gamma ADF update (pbp.md §3.3), as ``pbp.gamma_adf_update``."""
    den_a = math.exp(min(lz2 - 2.0 * lz1 + lz0, _MAX_EXP_ARG)) * (a + 1.0) / a - 1.0
    den_b = (
        math.exp(min(lz2 - lz1, _MAX_EXP_ARG)) * (a + 1.0) / b
        - math.exp(min(lz1 - lz0, _MAX_EXP_ARG)) * a / b
    )
    a_new = 1.0 / den_a if den_a != 0.0 else math.inf
    b_new = 1.0 / den_b if den_b != 0.0 else math.inf
    return a_new, b_new


@njit(cache=True, error_model="numpy")
def _slab(rho, mean, var):
    """Slab of the spike-and-slab with ``P(z != 0) = rho`` and total moments
    ``(mean, var)`` (the KL projection of pbp.md §6.2), slab variance floored at 0."""
    if rho <= 0.0:
        return 0.0, 0.0
    sm = mean / rho
    return sm, max(var / rho - (1.0 - rho) * sm * sm, 0.0)


@njit(cache=True, error_model="numpy")
def _output_log_z(y, rho, mean, var, noise_var, spike_slab):
    """``log Z`` of one point and, for ``noise_var`` of the current Gamma, the
    gradients with respect to the output's ``(mean, var, rho)`` and the squared
    residual of the noise update's guard.

    Gaussian: ``log N(y | mean, var + noise_var)`` (pbp.md §2.3).  Spike and
    slab: ``log[(1 - rho) N(y | 0, noise) + rho N(y | slab_mean, slab_var +
    noise)]`` (§6.5), differentiated through the slab parameters
    ``slab_mean = mean/rho``, ``slab_var = var/rho - (1 - rho) slab_mean^2``.
    """
    if not spike_slab:
        v_tot = var + noise_var
        r = y - mean
        g_mean = r / v_tot
        g_var = 0.5 * (r * g_mean - 1.0) / v_tot
        return _log_normal(r * r, v_tot), g_mean, g_var, 0.0, r * r
    sm, sv = _slab(rho, mean, var)
    v1 = sv + noise_var
    r = y - sm
    log_n1 = _log_normal(r * r, v1)
    log_n0 = _log_normal(y * y, noise_var)
    if rho > 0.0:
        log_z = _logaddexp(_log1m(rho) + log_n0, math.log(rho) + log_n1)
    else:
        log_z = log_n0
    # As pbp_spike_slab.log_z_grads: the ratios N/Z clipped (the spike may fit
    # 700 nats better than a slab of weight 1: inf times a zero factor below
    # was NaN), the slab's gradients divided by rho (h_*) and converted
    # without division (_slab_to_total_grads).
    ratio0 = math.exp(min(log_n0 - log_z, _MAX_EXP_ARG))
    ratio1 = math.exp(min(log_n1 - log_z, _MAX_EXP_ARG))
    h_mean = ratio1 * r / v1
    h_var = ratio1 * 0.5 * (r * r / v1 - 1.0) / v1
    g_rho, g_mean, g_var = _slab_to_total_grads(rho, sm, sv, ratio1 - ratio0, h_mean, h_var)
    return log_z, g_mean, g_var, g_rho, _mixture_residual2(y, rho, r, log_n0, log_n1, log_z)


@njit(cache=True, error_model="numpy", inline="always")
def _mixture_residual2(y, rho, r, log_n0, log_n1, log_z):
    """Squared residual of a spike-and-slab output for the noise update's
    guard: ``y^2`` and the slab's ``r^2`` weighted by their posterior
    responsibilities (as ``pbp_spike_slab.log_z_grads(...,
    return_residual2=True)``)."""
    if rho >= 1.0:
        return r * r
    if rho <= 0.0:
        return y * y
    w0 = math.exp(math.log1p(-rho) + log_n0 - log_z)
    w1 = math.exp(math.log(rho) + log_n1 - log_z)
    return w0 * (y * y) + w1 * (r * r)


@njit(cache=True, error_model="numpy", inline="always")
def _slab_to_total_grads(rho, slab_mean, slab_var, g_rho_direct, h_mean, h_var):
    """``pbp_spike_slab._slab_to_total_grads``: ``(d/drho, d/dE, d/dVar)``."""
    g_rho = g_rho_direct - h_mean * slab_mean + h_var * (slab_mean * slab_mean - slab_var)
    return g_rho, h_mean - 2.0 * h_var * slab_mean * (1.0 - rho), h_var


@njit(cache=True, error_model="numpy")
def _output_log_z_k(y, rho, mean, var, noise_var, spike_slab):
    """``log Z`` only (for ``Z1``, ``Z2`` of the Gamma update)."""
    if not spike_slab:
        r = y - mean
        return _log_normal(r * r, var + noise_var)
    sm, sv = _slab(rho, mean, var)
    r = y - sm
    log_n0 = _log_normal(y * y, noise_var)
    if rho <= 0.0:
        return log_n0
    return _logaddexp(_log1m(rho) + log_n0, math.log(rho) + _log_normal(r * r, sv + noise_var))


@njit(cache=True, error_model="numpy")
def _forward(Ms, Vs, x, bias, spike_slab, mu, var, rho, pre_m, pre_v, rho_lin, cache):
    """Forward moments of one input (pbp.md §2.1-2.2, §6.3-6.4) into the buffers.

    ``mu/var/rho[l]`` hold the inputs of layer ``l`` (level 0 is ``x``), with the
    bias entry at index ``n_in`` when ``bias``; ``pre_m/pre_v[l]`` the total
    moments of layer ``l``'s linear output, ``rho_lin[l]`` its scalar ``rho``;
    ``cache[l, :, j]`` = ``(slab_mean, slab_var, mr, vr, cdf, ccdf,
    pdf_over_std, a, std)`` of hidden unit ``j``.
    """
    n_layers = len(Ms)
    n0 = x.shape[0]
    for i in range(n0):
        mu[0, i] = x[i]
        var[0, i] = 0.0
        rho[0, i] = 1.0
    for l in range(n_layers):
        M = Ms[l]
        V = Vs[l]
        n_out, n_col = M.shape
        n_in = n_col - 1 if bias else n_col
        if bias:
            mu[l, n_in] = 1.0
            var[l, n_in] = 0.0
            rho[l, n_in] = 1.0
        s = 1.0 / n_col
        r = math.sqrt(s)
        for j in range(n_out):
            am = 0.0
            av = 0.0
            for i in range(n_col):
                mji = M[j, i]
                mi = mu[l, i]
                vi = var[l, i]
                am += mji * mi
                av += mji * mji * vi + V[j, i] * (mi * mi + vi)
            pre_m[l, j] = r * am
            pre_v[l, j] = s * av
        p = 1.0
        if spike_slab:
            # core.spike_slab.slab_probability: -expm1(sum log1p(-rho_i)), 1
            # exactly with a bias input (1 - prod rounds to 0 for rho_i < 1e-16)
            log_spike = 0.0
            for i in range(n_col):
                log_spike += _log1m(rho[l, i])
            p = -math.expm1(log_spike)
        rho_lin[l] = p
        if l == n_layers - 1:
            break
        for j in range(n_out):
            if spike_slab:
                sm, sv = _slab(p, pre_m[l, j], pre_v[l, j])
            else:
                sm, sv = pre_m[l, j], pre_v[l, j]
            mr, vr, cdf, ccdf, pos, a, std = _relu_parts(sm, sv)
            if spike_slab:
                rho[l + 1, j] = p * cdf
                mu[l + 1, j] = p * mr
                var[l + 1, j] = p * vr + p * (1.0 - p) * mr * mr
            else:
                rho[l + 1, j] = 1.0
                mu[l + 1, j] = mr
                var[l + 1, j] = vr
            c = cache[l]
            c[0, j] = sm
            c[1, j] = sv
            c[2, j] = mr
            c[3, j] = vr
            c[4, j] = cdf
            c[5, j] = ccdf
            c[6, j] = pos
            c[7, j] = a
            c[8, j] = std


@njit(cache=True, error_model="numpy")
def _adf_point(
    Ms, Vs, x, y, alpha, beta, bias, spike_slab, min_var, buf, cache, g_out, g_in, rho_excl, in_m2
):
    """One PBP ADF step on ``(x, y)``, in place (pbp.md §4.5).

    Forward, ``log Z`` with the old noise Gamma, closed-form backward pass
    (pbp.md §3.2) fused with the update of every weight (§3.1; a layer's input
    gradients are taken from its old weights before they are overwritten, so all
    weights move from one gradient evaluation), per-weight rejection (§4.4), then
    the guarded Gamma update of the noise (§3.3).  Returns ``(alpha, beta,
    log_z, n_rejected, noise_rejected)``.
    """
    mu, var, rho, pre_m, pre_v = buf[0], buf[1], buf[2], buf[3], buf[4]
    rho_lin = buf[5, :, 0]
    n_layers = len(Ms)
    _forward(Ms, Vs, x, bias, spike_slab, mu, var, rho, pre_m, pre_v, rho_lin, cache)
    top = n_layers - 1
    p_out, m_out, v_out = rho_lin[top], pre_m[top, 0], pre_v[top, 0]
    log_z, g_mean, g_var, g_rho, r2 = _output_log_z(
        y, p_out, m_out, v_out, beta / (alpha - 1.0), spike_slab
    )
    lz1 = _output_log_z_k(y, p_out, m_out, v_out, beta / alpha, spike_slab)
    lz2 = _output_log_z_k(y, p_out, m_out, v_out, beta / (alpha + 1.0), spike_slab)
    g_out[0, 0] = g_mean  # d log Z / d (layer output mean)
    g_out[1, 0] = g_var  # ... / d (layer output variance)
    g_rho_lin = g_rho  # ... / d (the layer's scalar rho)
    n_rejected = 0
    for l in range(n_layers - 1, -1, -1):
        M = Ms[l]
        V = Vs[l]
        n_out, n_col = M.shape
        n_in = n_col - 1 if bias else n_col
        s = 1.0 / n_col
        r = math.sqrt(s)
        for i in range(n_col):
            g_in[0, i] = 0.0
            g_in[1, i] = 0.0
            in_m2[i] = mu[l, i] * mu[l, i] + var[l, i]  # reused by every row j
        for j in range(n_out):
            ge_r = g_out[0, j] * r
            gv = g_out[1, j]
            gv_s = gv * s
            gv_2s = 2.0 * gv_s
            if l > 0:
                for i in range(n_col):
                    mji = M[j, i]
                    g_in[0, i] += ge_r * mji + gv_2s * V[j, i] * mu[l, i]
                    g_in[1, i] += gv_s * (mji * mji + V[j, i])
            for i in range(n_col):
                mji = M[j, i]
                vji = V[j, i]
                g_m = ge_r * mu[l, i] + gv_2s * mji * var[l, i]
                g_v = gv_s * in_m2[i]
                m_new = mji + vji * g_m
                v_new = vji - vji * vji * (g_m * g_m - 2.0 * g_v)
                # Per-weight rejection (pbp.md §4.4); NaN fails the comparisons.
                ok = (v_new > min_var) & (v_new < math.inf) & (abs(m_new) < math.inf)
                M[j, i] = m_new if ok else mji
                V[j, i] = v_new if ok else vji
                n_rejected += 0 if ok else 1
        if l == 0:
            break
        # d rho_lin / d rho_i = prod_{k != i} (1 - rho_k): prefix and suffix
        # products, so a factor of 0 (the bias unit) gives exactly 0.
        if spike_slab:
            acc = 1.0
            for i in range(n_col):
                rho_excl[i] = acc
                acc *= 1.0 - rho[l, i]
            acc = 1.0
            for i in range(n_col - 1, -1, -1):
                rho_excl[i] *= acc
                acc *= 1.0 - rho[l, i]
        # Through the ReLUs of layer l - 1 (pbp.md §3.2; §6.4 for the slab).
        c = cache[l - 1]
        p = rho_lin[l - 1]
        g_rho_below = 0.0
        for i in range(n_in):
            g_mu = g_in[0, i]
            g_sig = g_in[1, i]
            mr = c[2, i]
            cdf = c[4, i]
            ccdf = c[5, i]
            pos = c[6, i]
            if not spike_slab:
                g_out[0, i] = g_mu * cdf + g_sig * 2.0 * mr * ccdf
                g_out[1, i] = g_mu * 0.5 * pos + g_sig * (cdf - mr * pos)
                continue
            g_rho_i = g_rho_lin * rho_excl[i]
            vr = c[3, i]
            # pbp_spike_slab._relu_backward: the slab's gradients divided by p
            # (ReLU(z) has mean p mr, variance p vr + p (1 - p) mr^2 and
            # P(!= 0) = p cdf), converted without division; 1 - p cdf as
            # (1 - p) + p ccdf (no cancellation for cdf ~ 1)
            a = c[7, i]
            std = c[8, i]
            d_cdf_d_sv = -0.5 * a * pos / std if std > 0.0 else 0.0
            h_m = g_rho_i * pos + g_mu * cdf + 2.0 * g_sig * mr * ((1.0 - p) + p * ccdf)
            h_v = g_rho_i * d_cdf_d_sv + g_mu * (0.5 * pos) + g_sig * (cdf - p * mr * pos)
            g_direct = g_rho_i * cdf + g_mu * mr + g_sig * (vr + (1.0 - 2.0 * p) * (mr * mr))
            g_r, g_out[0, i], g_out[1, i] = _slab_to_total_grads(
                p, c[0, i], c[1, i], g_direct, h_m, h_v)
            g_rho_below += g_r
        g_rho_lin = g_rho_below
    a_new, b_new = _gamma_update(log_z, lz1, lz2, alpha, beta)
    # pbp.guard_noise_update: beyond the noise sd, invalid or overshooting the
    # exact update of a zero output variance -> replaced by it; elsewhere
    # invalid -> discarded
    valid = math.isfinite(a_new) and math.isfinite(b_new) and a_new > 1.0 and b_new > 0.0
    a_c, b_c = alpha + 0.5, beta + 0.5 * r2
    if r2 * (alpha - 1.0) > beta and (not valid or b_new * (a_c - 1.0) > b_c * (a_new - 1.0)):
        return a_c, b_c, log_z, n_rejected, 1
    if valid:
        return a_new, b_new, log_z, n_rejected, 0
    return alpha, beta, log_z, n_rejected, 1


@njit(cache=True, error_model="numpy")
def _buffers(Ms, n_features, bias):
    n_layers = len(Ms)
    width = n_features + 1
    for M in Ms:
        width = max(width, M.shape[0] + 1)
    buf = np.zeros((6, n_layers + 1, width))
    cache = np.zeros((max(n_layers - 1, 1), 9, width))
    return buf, cache, np.zeros((2, width)), np.zeros((2, width)), np.zeros(width), np.zeros(width)


@njit(cache=True, error_model="numpy")
def run_epoch_kernel(Ms, Vs, X, y, order, alpha, beta, bias, spike_slab, min_var):
    """ADF over the rows ``order`` of ``(X, y)``, updating ``Ms``/``Vs`` in place.

    Returns ``(alpha, beta, n_rejected, n_noise_rejected, sum_log_z)``.
    """
    buf, cache, g_out, g_in, rho_excl, in_m2 = _buffers(Ms, X.shape[1], bias)
    n_rejected = 0
    n_noise = 0
    total = 0.0
    for t in range(order.shape[0]):
        k = order[t]
        alpha, beta, log_z, n_rej, noise_rej = _adf_point(
            Ms, Vs, X[k], y[k], alpha, beta, bias, spike_slab, min_var,
            buf, cache, g_out, g_in, rho_excl, in_m2,
        )  # fmt: skip
        n_rejected += n_rej
        n_noise += noise_rej
        total += log_z
    return alpha, beta, n_rejected, n_noise, total


@njit(cache=True, error_model="numpy")
def refine_prior_kernel(Ms, Vs, m_hat, v_hat, a_hat, b_hat, a_lam, b_lam):
    """The sequential EP sweep over the prior factors (pbp.md §3.4), in place.

    The arithmetic and guards of ``pbp.refine_prior``, weight by weight in
    layer, row, column order.  Returns ``(alpha_prior, beta_prior, n_skipped)``.
    """
    n_skipped = 0
    for l in range(len(Ms)):
        M, V, mh, vh, ah, bh = Ms[l], Vs[l], m_hat[l], v_hat[l], a_hat[l], b_hat[l]
        n_out, n_col = M.shape
        for j in range(n_out):
            for i in range(n_col):
                vi = V[j, i]
                mi = M[j, i]
                prec_cav = 1.0 / vi - vh[j, i]
                a_cav = a_lam - ah[j, i]
                b_cav = b_lam + bh[j, i]
                if not (prec_cav > 0.0 and b_cav > 0.0 and a_cav > 1.0):
                    n_skipped += 1
                    continue
                v_cav = 1.0 / prec_cav
                if not v_cav < _MAX_CAVITY_VAR:
                    n_skipped += 1
                    continue
                mp_cav = mi / vi - mh[j, i]
                m_cav = mp_cav * v_cav
                m2 = m_cav * m_cav
                v0 = v_cav + b_cav / (a_cav - 1.0)
                v1 = v_cav + b_cav / a_cav
                v2 = v_cav + b_cav / (a_cav + 1.0)
                lz0 = -0.5 * math.log(v0) - 0.5 * m2 / v0
                lz1 = -0.5 * math.log(v1) - 0.5 * m2 / v1
                lz2 = -0.5 * math.log(v2) - 0.5 * m2 / v2
                # The ADF identity of §3.1, m + v dm and v - v^2 (dm^2 - 2 dv) with
                # dm = -m/v0, dv = -1/(2 v0) + m^2/(2 v0^2), simplified: dm^2 - 2 dv
                # = 1/v0 exactly, so the m^2/v0^2 terms, which cancelled
                # catastrophically for a cavity mean of 1e9 (a variance of 1e-10
                # came out as 1e9), are not formed.
                shrink = (b_cav / (a_cav - 1.0)) / v0  # prior variance / v0
                m_new = m_cav * shrink
                v_new = v_cav * shrink
                a_new, b_new = _gamma_update(lz0, lz1, lz2, a_cav, b_cav)
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
                mh[j, i] = m_new / v_new - mp_cav
                vh[j, i] = 1.0 / v_new - prec_cav
                ah[j, i] = a_new - a_cav
                bh[j, i] = b_cav - b_new
                M[j, i] = m_new
                V[j, i] = v_new
                a_lam = a_new
                b_lam = b_new
    return a_lam, b_lam, n_skipped
