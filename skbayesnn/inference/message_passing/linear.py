"""Messages of a fully connected layer ``z = W x + b`` (message_passing.md §5.1-5.4).

Stateless functions on whole batches: every array has a leading example axis
``n`` (one training branch per row, §3.1).  Weights are ``(n_out, n_in)`` as in
:mod:`skbayesnn.core.linear`; per-example weight arrays are ``(n, n_out, n_in)``
and shared ones ``(n_out, n_in)`` (they broadcast).  Messages are natural
parameters ``(tau, rho)``, moments ``(mean, var)``.

Two factor types:

* **first layer** (observed input ``x``, §5.4): a weighted sum of Gaussian
  weights with constant coefficients ``x_i``; exact messages computed from the
  EP cavities ``q(W) / m_{n->W}`` of the example;
* **hidden layer** (Gaussian input, §5.3): the inner-product factor, i.e. the
  VMP product ``p_ij = W_ij x_i`` (§5.2, expectations under the full marginals)
  fused with the exact sum ``z_j = sum_i p_ij + b_j`` (§5.1).
"""

from __future__ import annotations

from ..._backend import array_namespace
from ...core.gaussian import min_precision, product_var, weighted_sum_backward
from ...core.linear import linear_moments

__all__ = [
    "first_layer_forward",
    "first_layer_backward",
    "hidden_layer_forward",
    "hidden_layer_backward",
    "product_backward_vmp",
]

#: Precision floor of the paper (message_passing.md §8 item 3).
EPS = 1e-8


def first_layer_forward(x, w_mean, w_var, b_mean, b_var):
    """Forward message of ``z = W x + b`` with an observed input (§5.4).

    Parameters
    ----------
    x : array of shape (n, n_in)
        Observed inputs.
    w_mean, w_var : arrays of shape (n, n_out, n_in) or (n_out, n_in)
        Moments of the weights' messages into the factor (the example's
        cavities in training, the marginals at prediction, §9).
    b_mean, b_var : arrays of shape (n, n_out) or (n_out,)
        Moments of the bias messages into the factor.

    Returns
    -------
    z_mean, z_var : arrays of shape (n, n_out)
        ``sum_i x_i mu_ij + mu_b`` and ``sum_i x_i^2 s_ij + s_b`` (exact).
    """
    xp = array_namespace(x, w_mean, w_var)
    if w_mean.ndim == 2:  # shared weights: two matrix products
        return linear_moments(x, None, w_mean, w_var, b_mean, b_var)
    xe = x[:, None, :]
    z_mean = xp.sum(w_mean * xe, axis=-1) + b_mean
    z_var = xp.sum(w_var * (xe * xe), axis=-1) + b_var
    return z_mean, z_var


def first_layer_backward(x, w_mean, w_var, b_mean, b_var, z_mean, z_var, tau_z, rho_z):
    """Messages from the first-layer factor to its weights and biases (§5.4).

    Exact weighted-sum messages (§5.1) with coefficients ``x_i`` for the weights
    and 1 for the bias:
    ``D = 1 + rho_j (s2_zj - x_i^2 s2_ij)``, ``rho = x_i^2 rho_j / D``,
    ``tau = x_i (tau_j - rho_j (mu_zj - x_i mu_ij)) / D``.

    Parameters
    ----------
    x : array of shape (n, n_in)
    w_mean, w_var : arrays of shape (n, n_out, n_in) or (n_out, n_in)
        The cavities used in the forward pass.
    b_mean, b_var : arrays of shape (n, n_out) or (n_out,)
    z_mean, z_var : arrays of shape (n, n_out)
        The forward message of :func:`first_layer_forward`.
    tau_z, rho_z : arrays of shape (n, n_out)
        The message into ``z`` from the layer above.

    Returns
    -------
    tau_w, rho_w : arrays of shape (n, n_out, n_in)
    tau_b, rho_b : arrays of shape (n, n_out)
    """
    xe = x[:, None, :]
    tz, rz = tau_z[:, :, None], rho_z[:, :, None]
    tau_w, rho_w = weighted_sum_backward(
        tz, rz, z_mean[:, :, None], z_var[:, :, None], xe, w_mean, w_var
    )
    tau_b, rho_b = weighted_sum_backward(tau_z, rho_z, z_mean, z_var, 1.0, b_mean, b_var)
    return tau_w, rho_w, tau_b, rho_b


def _product_moments(x_mean, x_var, w_mean, w_var):
    """``E[p_ij]``, ``V[p_ij]`` of ``p_ij = W_ij x_i`` for independent factors (§5.3)."""
    xm = x_mean[:, None, :]
    xv = x_var[:, None, :]
    # V[p] = E[x^2]E[W^2] - E[x]^2 E[W]^2, written as a sum of non-negative terms.
    return xm * w_mean, product_var(xm, xv, w_mean, w_var)


def hidden_layer_forward(x_mean, x_var, w_mean, w_var, b_mean, b_var):
    """Forward message of the inner-product factor ``z = W x + b`` (§5.3).

    Parameters
    ----------
    x_mean, x_var : arrays of shape (n, n_in)
        Moments of the input marginals ``q(x_i) = f_i b_i`` (forward message
        times this layer's previous backward message, §5.3).
    w_mean, w_var : arrays of shape (n_out, n_in) or (n, n_out, n_in)
        Moments of the weight marginals (VMP, §5.2: no cavity).
    b_mean, b_var : arrays of shape (n, n_out) or (n_out,)
        Moments of the bias cavities.

    Returns
    -------
    z_mean, z_var : arrays of shape (n, n_out)
        ``sum_i E[p_ij] + mu_b`` and ``sum_i V[p_ij] + s_b``.
    """
    if w_mean.ndim == 2:
        return linear_moments(x_mean, x_var, w_mean, w_var, b_mean, b_var)
    xp = array_namespace(x_mean, w_mean)
    e_p, v_p = _product_moments(x_mean, x_var, w_mean, w_var)
    return xp.sum(e_p, axis=-1) + b_mean, xp.sum(v_p, axis=-1) + b_var


def product_backward_vmp(tau_c, rho_c, a_mean, a_sq):
    """VMP message from ``c = a b`` to ``b`` (§5.2, Matchbox).

    ``tau_b = tau_c E[a]``, ``rho_b = rho_c E[a^2]``: the Gaussian
    ``exp(E_a[log G(a b; tau_c, rho_c)])``.

    Parameters
    ----------
    tau_c, rho_c : array_like
        Message into the product ``c``.
    a_mean, a_sq : array_like
        ``E[a]`` and ``E[a^2]`` under the marginal of the other factor.

    Returns
    -------
    tau_b, rho_b : arrays
    """
    return tau_c * a_mean, rho_c * a_sq


def hidden_layer_backward(
    x_mean, x_var, w_mean, w_var, b_mean, b_var, z_mean, z_var, tau_z, rho_z, *, eps=EPS
):
    """Messages from the inner-product factor to weights, bias and inputs (§5.3).

    With ``E[p_ij]``, ``V[p_ij]`` as in the forward pass and the message
    ``G(tau_j, rho_j)`` into ``z_j``:

    * to ``p_ij`` (exact sum, §5.1): ``D_ij = 1 + rho_j (s2_zj - V[p_ij])``,
      ``rho^p = rho_j / D_ij``, ``tau^p = (tau_j - rho_j (mu_zj - E[p_ij])) / D_ij``;
    * to ``W_ij`` (VMP, §5.2): ``(tau^p E[x_i], rho^p E[x_i^2])``;
    * to ``x_i`` (VMP, summed over ``j``): ``(sum_j tau^p E[W_ij],
      sum_j rho^p E[W_ij^2])``, then ``min_rho(., eps)`` (§8 item 3);
    * to ``b_j`` (exact sum, §5.1, from the cavity of ``b_j``).

    Parameters
    ----------
    x_mean, x_var, w_mean, w_var, b_mean, b_var :
        As in :func:`hidden_layer_forward`.
    z_mean, z_var : arrays of shape (n, n_out)
        The forward message it returned.
    tau_z, rho_z : arrays of shape (n, n_out)
        The message into ``z`` from above.
    eps : float, default=1e-8
        Precision floor of the messages to the inputs.

    Returns
    -------
    tau_w, rho_w : arrays of shape (n, n_out, n_in)
    tau_b, rho_b : arrays of shape (n, n_out)
    tau_x, rho_x : arrays of shape (n, n_in)
    """
    xp = array_namespace(x_mean, w_mean, tau_z)
    e_p, v_p = _product_moments(x_mean, x_var, w_mean, w_var)
    tau_p, rho_p = weighted_sum_backward(
        tau_z[:, :, None], rho_z[:, :, None], z_mean[:, :, None], z_var[:, :, None], 1.0, e_p, v_p
    )
    x_sq = x_var + x_mean * x_mean
    tau_w, rho_w = product_backward_vmp(tau_p, rho_p, x_mean[:, None, :], x_sq[:, None, :])
    w_sq = w_var + w_mean * w_mean
    tau_x = xp.sum(tau_p * w_mean, axis=1)
    rho_x = xp.sum(rho_p * w_sq, axis=1)
    # The floor keeps the message's mean; §5.3's special case (every message
    # into z uninformative -> G(0, eps)) is not singled out: it needs forward
    # variances beyond 1/(2e-8), a network that has already diverged.
    tau_x, rho_x = min_precision(tau_x, rho_x, eps)
    tau_b, rho_b = weighted_sum_backward(tau_z, rho_z, z_mean, z_var, 1.0, b_mean, b_var)
    return tau_w, rho_w, tau_b, rho_b, tau_x, rho_x
