"""Moments of a linear layer ``h = W a + b`` with independent Gaussian weights.

This one formula is shared by TAGI's forward pass (tagi.md §3.3), PBP's forward
pass (pbp.md §2.1, with PBP's input scaling folded into W and b) and the analytic
predictive (analytic_predictive.md §2.4, Eq. 37, "diagonal" variant).
"""

from __future__ import annotations


def linear_moments(a_mean, a_var, w_mean, w_var, b_mean=None, b_var=None, *, a_mean_sq=None):
    """Mean and variance of ``h = W a + b`` for a batch of inputs.

    ``W`` has independent entries ``W_ki ~ N(w_mean[k, i], w_var[k, i])``, the bias
    ``b_k ~ N(b_mean[k], b_var[k])``, and the input ``a`` has independent entries
    with mean ``a_mean`` and variance ``a_var``, independent of ``W`` and ``b``.
    Then, exactly (no Gaussianity needed),

    .. math::

        E[h_k] = \\sum_i M_{ki} \\mu_i + \\mu_{b,k}, \\qquad
        Var[h_k] = \\sum_i \\big(V_{ki} \\mu_i^2 + (M_{ki}^2 + V_{ki}) s_i\\big) + v_{b,k},

    the diagonal formula of analytic_predictive.md §2.4 (Eq. 37) and tagi.md §3.3.
    Correlations between different ``h_k`` are dropped, as in TAGI, PBP and the
    analytic predictive.

    Parameters
    ----------
    a_mean : array of shape (..., n_in)
        Mean of the layer input (a batch of rows).
    a_var : array of shape (..., n_in) or None
        Variance of the layer input; None means a deterministic input, which saves
        one matrix product.
    w_mean, w_var : arrays of shape (n_out, n_in)
        Weight means and variances (variances >= 0).
    b_mean, b_var : arrays of shape (n_out,) or None
        Bias mean and variance; None means no bias (or a deterministic zero one).
    a_mean_sq : array like ``a_mean``, optional
        ``a_mean ** 2`` when the caller already has it (TAGI reuses it in its
        backward pass).

    Returns
    -------
    h_mean, h_var : arrays of shape (..., n_out)
        The variance is a sum of non-negative terms, so it is never negative.
    """
    h_mean = a_mean @ w_mean.T
    if a_mean_sq is None:
        a_mean_sq = a_mean * a_mean
    h_var = a_mean_sq @ w_var.T
    if a_var is not None:
        h_var = h_var + a_var @ (w_mean * w_mean + w_var).T
    if b_mean is not None:
        h_mean = h_mean + b_mean
    if b_var is not None:
        h_var = h_var + b_var
    # Rounding cannot make a sum of non-negative terms negative, so no clipping.
    return h_mean, h_var


def linear_moments_vjp(a_mean, a_var, w_mean, w_var, g_mean, g_var, *, input_grads=True):
    """Gradients through :func:`linear_moments` (no bias), point by point.

    For a scalar ``F`` of the outputs ``(h_mean, h_var)`` of a batch, given
    ``g_mean = dF/dh_mean`` and ``g_var = dF/dh_var`` (each ``(n_points, n_out)``),
    the derivatives of the formula of :func:`linear_moments`:

    * ``dF/dM_ki = g_mean_k mu_i + 2 g_var_k M_ki s_i``,
    * ``dF/dV_ki = g_var_k (mu_i^2 + s_i)``,
    * ``dF/dmu_i = sum_k g_mean_k M_ki + 2 g_var_k V_ki mu_i``,
    * ``dF/ds_i = sum_k g_var_k (M_ki^2 + V_ki)``

    (``mu, s`` the input mean and variance).  PBP's backward pass (pbp.md §3.2)
    and its spike-and-slab variant (§6.5) use them with their ``sqrt(s)``,
    ``s`` input scalings applied to ``g_mean``, ``g_var``.

    Parameters
    ----------
    a_mean : array of shape (n_points, n_in)
    a_var : array of shape (n_points, n_in) or None
        None for a deterministic input.
    w_mean, w_var : arrays of shape (n_out, n_in)
    g_mean, g_var : arrays of shape (n_points, n_out)
    input_grads : bool, default=True
        Also return the gradients with respect to the input moments.

    Returns
    -------
    grad_w_mean, grad_w_var : arrays of shape (n_points, n_out, n_in)
        Each point's gradients, not summed.
    grad_a_mean, grad_a_var : arrays of shape (n_points, n_in)
        Only with ``input_grads=True``.
    """
    gm, gv = g_mean[:, :, None], g_var[:, :, None]
    mu = a_mean[:, None, :]
    grad_w_mean = gm * mu
    if a_var is None:
        grad_w_var = gv * (mu * mu)
    else:
        s = a_var[:, None, :]
        grad_w_mean = grad_w_mean + 2.0 * gv * s * w_mean
        grad_w_var = gv * (mu * mu + s)
    if not input_grads:
        return grad_w_mean, grad_w_var
    grad_a_mean = g_mean @ w_mean + 2.0 * (g_var @ w_var) * a_mean
    grad_a_var = g_var @ (w_mean * w_mean + w_var)
    return grad_w_mean, grad_w_var, grad_a_mean, grad_a_var
