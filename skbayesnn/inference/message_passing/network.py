"""Fully connected message-passing network: priors, batch schedule, prediction.

The engine of message_passing.md §3-§9 for an MLP
``x -> Linear -> LeakyReLU -> ... -> Linear -> output factor``.

Storage (§4, §6).  For every weight layer the state keeps the prior, one
aggregated message per batch slot (the product of its examples' messages) and
the posterior ``q = prior x prod_slots``.  While a batch is *active* its slot is
divided out (the cavity ``prior x other slots``) and, with
``memory="per_example"`` (the paper's schedule), every example of the batch owns
one message per weight, replaced (old divided out, new multiplied in) each time
the example is revisited, so no datum is counted twice.  When the batch is left
its examples' messages are multiplied into the slot, damped by the EMA of §6
(their product is the marginal over the cavity, so it is read off ``q``).
``memory="per_batch"`` keeps no per-example weight messages: each iteration over
the active batch restarts from the cavity and rebuilds the batch's message
example by example (ADF inside the batch, EP across batches); the formula
below counts one extra message per weight for it.  A visit of one iteration never
divides an example's message out again, so it runs as ``"per_batch"`` in either
mode.

Memory in float64 natural parameters (16 bytes per message), with ``P`` the
number of weights and biases, ``P_1`` the first layer's weights, ``B`` the
number of batch slots, ``b`` the rows of the active batch (the batch size, or
fewer rows) and ``H`` the number of hidden units: ``16 * (P * (B + m + 5) + 2 *
P_1 + b * H)`` bytes, with ``m = b`` example messages per weight for
``memory="per_example"`` and ``m = 1`` for ``"per_batch"``.  Per weight: the
prior, the posterior, ``B`` slots, the active batch's cavity and marginal,
``m`` example messages and the kernel's moments of the parameter; ``2
P_1``: the kernel's transposed copies of the first layer's cavity and
marginal; ``b * H``: the stored backward messages to the hidden units (the
kernel's other scratch is a few arrays of a layer's width).
(:func:`memory_bytes` evaluates it.)

Compiled path.  On NumPy float64 arrays with the paper's one-example-at-a-time
schedule (``chunk_size=1``) :func:`train_batch` runs the iterations of a visit
in the Numba kernel of :mod:`.kernel` (the same arithmetic and guards); the
array functions remain the reference and the path of CuPy and other
namespaces (``use_kernel=False`` forces them).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from ...core.gaussian import damp, from_natural, min_precision, to_natural
from ...core.posterior import GaussianMLPPosterior
from ...core.propagate import propagate
from . import activation, kernel, likelihood, linear

__all__ = [
    "MPState",
    "init_state",
    "prior_variances",
    "n_parameters",
    "memory_bytes",
    "ema_rate",
    "recompute_posterior",
    "train_batch",
    "run_epoch",
    "add_batches",
    "fold_slots",
    "copy_posterior",
    "drop_slots",
    "is_finite",
    "predict_moments",
    "posterior_moments",
    "to_posterior",
    "regression_output",
    "classification_output",
]

EPS = 1e-8
#: Empirical LeakyReLU(0.1) output statistics of the code's prior (§7).
_PRIOR_A = 0.44958619556324186
_PRIOR_B = 0.8040586726631379


def prior_variances(sizes, target=1.5):
    """Prior weight variances of §7: ``target / d_in`` for the first layer and
    ``(target - min(1, d_out/d_in) b) / (d_in a + b)`` after a LeakyReLU (the
    code's formula, §14 item 7)."""
    out = []
    for k, (d_in, d_out) in enumerate(zip(sizes[:-1], sizes[1:])):
        if k == 0:
            out.append(target / d_in)
        else:
            out.append((target - min(1.0, d_out / d_in) * _PRIOR_B) / (d_in * _PRIOR_A + _PRIOR_B))
    return out


def n_parameters(sizes):
    """Weights and biases of a fully connected network with layer ``sizes``."""
    return sum((a + 1) * b for a, b in zip(sizes[:-1], sizes[1:]))


def memory_bytes(sizes, n_batches, batch_size, memory="per_example"):
    """Bytes of message storage (module docstring formula) for layer ``sizes``
    and ``batch_size`` rows in the active batch."""
    p = n_parameters(sizes)
    h = sum(sizes[1:-1])
    m = batch_size if memory == "per_example" else 1
    return 16 * (p * (n_batches + m + 5) + 2 * sizes[0] * sizes[1] + batch_size * h)


def ema_rate(epoch):
    """Update rate of the batch-aggregate EMA, ``0.9 + 0.1 exp(-0.3 (e - 1))`` (§6)."""
    return 0.9 + 0.1 * math.exp(-0.3 * (epoch - 1))


@dataclass
class MPState:
    """Messages of a fully connected network (natural parameters, shapes per layer).

    ``prior_w[l]``, ``post_w[l]``: ``(tau, rho)`` of shape ``(n_out, n_in)``;
    ``slots_w[l]``: list over batch slots of ``(tau, rho)``; the same for biases
    with shape ``(n_out,)``.
    """

    sizes: list
    alpha: float
    bias: bool
    prior_w: list
    prior_b: list
    slots_w: list = field(default_factory=list)
    slots_b: list = field(default_factory=list)
    post_w: list = field(default_factory=list)
    post_b: list = field(default_factory=list)
    n_fallback: int = 0
    #: The slot that holds every ``partial_fit`` batch since the last ``fit``
    #: (:func:`fold_slots`); None before the first.
    online_slot: int | None = None
    #: A fit that keeps its batches for a warm start: the row order that cut
    #: its data into slots ``0..B-1``, the batch size and a hash of the
    #: (standardised) data; None otherwise.
    fit_order: object = None
    fit_batch_size: int | None = None
    fit_data_hash: str | None = None
    #: Epochs run over ``fit``'s batch slots (``partial_fit`` calls not
    #: counted): the epoch of the §6 schedule and damping that a warm fit
    #: continues.
    fit_epochs: int = 0

    @property
    def xp(self):
        """The array namespace of the messages (not stored, so the state pickles)."""
        from ..._backend import array_namespace

        return array_namespace(self.prior_w[0][0])

    @property
    def n_layers(self):
        return len(self.sizes) - 1

    @property
    def n_slots(self):
        return len(self.slots_w[0]) if self.slots_w else 0


def init_state(sizes, *, rng, xp, alpha=0.1, prior_var=None, bias_var=0.5, bias=True):
    """Prior of §7 (spectral random means, layer-wise variances, bias N(0, 0.5)).

    Parameters
    ----------
    sizes : list of int
        ``[n_in, hidden..., n_out]``.
    rng : numpy Generator
        Draws the prior means ``N(0, l^2)``, ``l = min(1, sqrt(d_out/d_in)) / sqrt(d_in)``.
    xp : namespace
    alpha : float
        LeakyReLU slope.
    prior_var : None, float or list of float
        Weight prior variances; None for :func:`prior_variances`.
    bias_var : float
    bias : bool
        Without biases the bias messages stay ``G(0, inf)`` (a fixed 0).
    """
    if prior_var is None:
        pv = prior_variances(sizes)
    elif np.ndim(prior_var) == 0:
        pv = [float(prior_var)] * (len(sizes) - 1)
    else:
        pv = [float(v) for v in prior_var]
    prior_w, prior_b = [], []
    for (d_in, d_out), v in zip(zip(sizes[:-1], sizes[1:]), pv):
        scale = min(1.0, math.sqrt(d_out / d_in)) / math.sqrt(d_in)
        mean = xp.asarray(rng.normal(scale=scale, size=(d_out, d_in)))
        prior_w.append(to_natural(mean, xp.full((d_out, d_in), v)))
        if bias:
            prior_b.append(to_natural(xp.zeros(d_out), xp.full(d_out, float(bias_var))))
        else:  # a bias fixed at 0: infinite precision is avoided by a huge one
            prior_b.append((xp.zeros(d_out), xp.full(d_out, 1e300)))
    state = MPState(list(sizes), float(alpha), bool(bias), prior_w, prior_b)
    state.slots_w = [[] for _ in prior_w]
    state.slots_b = [[] for _ in prior_b]
    state.post_w = [(t + 0.0, r + 0.0) for t, r in prior_w]
    state.post_b = [(t + 0.0, r + 0.0) for t, r in prior_b]
    return state


def recompute_posterior(state):
    """``q = prior x prod(slots)`` from scratch (§6, §8 item 4).

    :func:`train_batch` updates the posterior incrementally (``q x new slot /
    old slot``), which costs ``O(P)`` per visit instead of ``O(B P)`` for ``B``
    slots; the epoch loops call this once per epoch so that rounding cannot
    accumulate (the paper's "full recompilation", applied to the slots).
    """
    for layer in range(state.n_layers):
        for post, prior, slots in (
            (state.post_w, state.prior_w, state.slots_w),
            (state.post_b, state.prior_b, state.slots_b),
        ):
            tau, rho = prior[layer]
            tau, rho = tau + 0.0, rho + 0.0
            for t, r in slots[layer]:
                tau = tau + t
                rho = rho + r
            post[layer] = (tau, rho)


def add_batches(state, n_new):
    """Append ``n_new`` empty (``G(0, 0)``) batch slots."""
    xp = state.xp
    for layer in range(state.n_layers):
        shape_w = state.prior_w[layer][0].shape
        shape_b = state.prior_b[layer][0].shape
        for _ in range(n_new):
            state.slots_w[layer].append((xp.zeros(shape_w), xp.zeros(shape_w)))
            state.slots_b[layer].append((xp.zeros(shape_b), xp.zeros(shape_b)))


def fold_slots(state, target):
    """Add every slot after ``target`` into slot ``target`` and drop them.

    The posterior, ``prior x prod(slots)``, is unchanged; only the ability to
    revisit the folded batches one by one is given up.  Online training
    (``partial_fit``) never revisits its batches, so it keeps them as one slot:
    memory and the per-epoch :func:`recompute_posterior` stay constant however
    many calls are made.
    """
    for slots in (state.slots_w, state.slots_b):
        for layer in range(state.n_layers):
            tau, rho = slots[layer][target]
            for t, r in slots[layer][target + 1 :]:
                tau = tau + t
                rho = rho + r
            slots[layer][target + 1 :] = []
            slots[layer][target] = (tau, rho)


def copy_posterior(state):
    """Copies of the posterior's natural parameters ``(post_w, post_b)``, for
    :func:`drop_slots` (the visits update them in place)."""
    return tuple([(t + 0.0, r + 0.0) for t, r in post] for post in (state.post_w, state.post_b))


def drop_slots(state, first, posterior=None):
    """Remove slots ``first, first + 1, ...`` and undo their visits (undoes
    :func:`add_batches`): the posterior is ``posterior``, a
    :func:`copy_posterior` taken before they were added, or else rebuilt from
    the other slots (equal up to rounding)."""
    for slots in (state.slots_w, state.slots_b):
        for layer_slots in slots:
            del layer_slots[first:]
    if posterior is None:
        recompute_posterior(state)
    else:
        state.post_w, state.post_b = posterior


def is_finite(state):
    """Whether every posterior natural parameter is finite (a diverged fit is not)."""
    xp = state.xp
    return all(
        bool(xp.all(xp.isfinite(a)))
        for post in (state.post_w, state.post_b)
        for pair in post
        for a in pair
    )


def _moments(tau, rho):
    return from_natural(*min_precision(tau, rho, EPS))


class _ActiveBatch:
    """Messages and caches of the active batch (§4 per-layer state, §6 step 1)."""

    def __init__(self, state, slot, n, per_example, *, workspace=None, zero_messages=True):
        xp = state.xp
        self.state, self.slot, self.n, self.per_example = state, slot, n, per_example
        # ``workspace``: a dict that keeps the message arrays from one visit to
        # the next (fresh ones of b x P cost page faults on first touch);
        # ``zero_messages=False`` for the kernel, which writes an example's
        # message before it first reads it (and reads no bias message when
        # there are no biases).
        self.workspace, self.zero_messages = workspace, zero_messages
        # LeakyReLU forward fallbacks of the array path, summed in the
        # namespace (read once per visit: no device sync per example step)
        self.n_fallback = 0
        # After a kernel visit the example messages are scratch: the last
        # iteration's are not stored and the first layer's are laid out
        # transposed (_visit_kernel); only the marginals q are results.
        self.cav_w, self.cav_b = [], []
        for layer in range(state.n_layers):
            tw, rw = state.post_w[layer]
            sw, sr = state.slots_w[layer][slot]
            self.cav_w.append((tw - sw, rw - sr))
            tb, rb = state.post_b[layer]
            sb, sbr = state.slots_b[layer][slot]
            self.cav_b.append((tb - sb, rb - sbr))
        self.reset_messages()
        # backward messages to each hidden layer's input, per example (§5.3, §5.6)
        self.back = [(xp.zeros((n, d)), xp.zeros((n, d))) for d in state.sizes[1:-1]]

    def _messages(self, key, shape):
        """Example messages of ``shape`` (zero if ``zero_messages``), from the workspace."""
        xp, ws = self.state.xp, self.workspace
        if ws is None:
            return xp.zeros(shape) if self.zero_messages else xp.empty(shape)
        buf = ws.get(key)
        if buf is None or buf.shape[0] < shape[0] or buf.shape[1:] != shape[1:]:
            # (release a smaller one first: a short batch visited before a
            # full one held both, beyond memory_bytes)
            buf = ws[key] = None
            buf = ws[key] = xp.empty(shape)
        out = buf[: shape[0]]
        if self.zero_messages:
            out[...] = 0.0
        return out

    def reset_messages(self):
        """Marginals back to the cavities; example messages zero, or
        uninitialised for the kernel (``zero_messages=False``) (§6 step 1).

        With ``memory="per_batch"`` no example message is stored (the batch's
        product is :meth:`release_layer_message`); the kernel still takes one array
        per weight layer.
        """
        st = self.state
        n = self.n if self.per_example else 1
        self.msg_w = [(self._messages(("wt", k), (n,) + t.shape),
                       self._messages(("wr", k), (n,) + t.shape))
                      for k, (t, _) in enumerate(st.prior_w)]
        self.msg_b = [(self._messages(("bt", k), (n,) + t.shape),
                       self._messages(("br", k), (n,) + t.shape))
                      for k, (t, _) in enumerate(st.prior_b)]
        self.q_w = [(t + 0.0, r + 0.0) for t, r in self.cav_w]
        self.q_b = [(t + 0.0, r + 0.0) for t, r in self.cav_b]

    def recompute(self):
        """Marginals from scratch: cavity x all example messages (§6, once per iteration)."""
        xp = self.state.xp
        for layer in range(self.state.n_layers):
            for q, cav, msg in (
                (self.q_w, self.cav_w, self.msg_w),
                (self.q_b, self.cav_b, self.msg_b),
            ):
                q[layer] = (
                    cav[layer][0] + xp.sum(msg[layer][0], axis=0),
                    cav[layer][1] + xp.sum(msg[layer][1], axis=0),
                )

    def release_layer_message(self, layer, kind="w"):
        """The product of the batch's example messages to one layer's weights
        (``"w"``) or biases (``"b"``), ``q / cavity`` (§6 step 3), dropping the
        batch's marginal and cavity of it (the batch is done with them: the
        commit then needs no memory beyond the visit's).

        The marginal is the cavity times every example's current message, so
        this is their product without a sum over ``b x P`` stored messages
        (which ``memory="per_batch"`` does not keep, and the kernel's last
        iteration does not store).
        """
        q, cav = (self.q_w, self.cav_w) if kind == "w" else (self.q_b, self.cav_b)
        (qt, qr), (ct, cr) = q[layer], cav[layer]
        q[layer] = cav[layer] = None
        return qt - ct, qr - cr

    def _replace(self, q, msg, layer, idx, tau_new, rho_new):
        """EP replacement: q <- q x new / old; store new (§5.3)."""
        xp = self.state.xp
        if self.per_example:
            t_old, r_old = msg[layer]
            tq = q[layer][0] + xp.sum(tau_new - t_old[idx], axis=0)
            rq = q[layer][1] + xp.sum(rho_new - r_old[idx], axis=0)
            t_old[idx] = tau_new
            r_old[idx] = rho_new
        else:  # no example messages (memory="per_batch")
            tq = q[layer][0] + xp.sum(tau_new, axis=0)
            rq = q[layer][1] + xp.sum(rho_new, axis=0)
        q[layer] = (tq, rq)

    def _own(self, msg, layer, idx):
        if self.per_example:
            return msg[layer][0][idx], msg[layer][1][idx]
        return 0.0, 0.0

    def step(self, x, target, idx, output):
        """Forward then backward pass for the examples ``idx`` (§6 step 2)."""
        st = self.state
        xp = st.xp
        alpha = st.alpha
        ctx = []
        # first layer: EP cavities of the examples (§5.4)
        ot, orr = self._own(self.msg_w, 0, idx)
        w_m, w_v = _moments(self.q_w[0][0] - ot, self.q_w[0][1] - orr)
        ot, orr = self._own(self.msg_b, 0, idx)
        b_m, b_v = _moments(self.q_b[0][0] - ot, self.q_b[0][1] - orr)
        if w_m.ndim == 2:
            w_m, w_v = w_m[None], w_v[None]
        z_m, z_v = linear.first_layer_forward(x, w_m, w_v, b_m, b_v)
        ctx.append((x, w_m, w_v, b_m, b_v, z_m, z_v))
        for layer in range(1, st.n_layers):
            tb, rb = self.back[layer - 1]
            ta, ra = tb[idx], rb[idx]
            a_m, a_v, used = activation.leaky_relu_forward(z_m, z_v, ta, ra, alpha)
            self.n_fallback = self.n_fallback + xp.sum(~used & (ra > 0))
            # input marginal q(x) = forward x stored backward (§5.3), floored
            tf, rf = to_natural(a_m, a_v)
            x_m, x_v = _moments(tf + ta, rf + ra)
            w_m, w_v = _moments(*self.q_w[layer])
            ot, orr = self._own(self.msg_b, layer, idx)
            b_m, b_v = _moments(self.q_b[layer][0] - ot, self.q_b[layer][1] - orr)
            prev = (z_m, z_v)
            z_m, z_v = linear.hidden_layer_forward(x_m, x_v, w_m, w_v, b_m, b_v)
            ctx.append((x_m, x_v, w_m, w_v, b_m, b_v, z_m, z_v, prev))
        tau_z, rho_z = output(z_m, z_v, target)
        for layer in range(st.n_layers - 1, 0, -1):
            x_m, x_v, w_m, w_v, b_m, b_v, zm, zv, prev = ctx[layer]
            tw, rw, tb_, rb_, tx, rx = linear.hidden_layer_backward(
                x_m, x_v, w_m, w_v, b_m, b_v, zm, zv, tau_z, rho_z
            )
            self._replace(self.q_w, self.msg_w, layer, idx, tw, rw)
            if st.bias:
                self._replace(self.q_b, self.msg_b, layer, idx, tb_, rb_)
            bt, br = self.back[layer - 1]
            bt[idx] = tx
            br[idx] = rx
            tau_z, rho_z = activation.leaky_relu_backward(prev[0], prev[1], tx, rx, alpha)
        x, w_m, w_v, b_m, b_v, zm, zv = ctx[0]
        tw, rw, tb_, rb_ = linear.first_layer_backward(x, w_m, w_v, b_m, b_v, zm, zv, tau_z, rho_z)
        self._replace(self.q_w, self.msg_w, 0, idx, tw, rw)
        if st.bias:
            self._replace(self.q_b, self.msg_b, 0, idx, tb_, rb_)


def _commit(state, active, rate):
    """Deactivate: slot <- EMA(slot, product of the batch's messages) (§6 step 3).

    Weights are damped with ``rate``; biases are not (as in the paper's code).
    Precisions of the slot are kept non-negative (the batch's messages are,
    and so is a convex combination of them; this only removes the rounding of
    ``q / cavity``).
    """
    xp = state.xp
    for layer in range(state.n_layers):
        # One layer at a time, releasing the batch's arrays of it as it goes
        # (all layers' batch messages at once added ~2.5 times 16 P bytes to
        # the peak of a fit, beyond memory_bytes).
        w_t, w_r = active.release_layer_message(layer, "w")
        old_t, old_r = state.slots_w[layer][active.slot]
        t, r = damp(old_t, old_r, w_t, w_r, rate)
        del w_t, w_r, old_t, old_r
        _replace_slot(state.slots_w, state.post_w, layer, active.slot, t, xp.maximum(r, 0.0))
        del t, r
        if state.bias:
            t, r = active.release_layer_message(layer, "b")
            _replace_slot(state.slots_b, state.post_b, layer, active.slot, t,
                          xp.maximum(r, 0.0))


def _replace_slot(slots, post, layer, slot, tau, rho):
    """Store a batch's new slot and update the posterior by ``new / old``.

    ``O(P)``, not a product over all ``B`` slots (:func:`recompute_posterior`).
    """
    old_t, old_r = slots[layer][slot]
    slots[layer][slot] = (tau, rho)
    q_t, q_r = post[layer]
    post[layer] = (q_t + (tau - old_t), q_r + (rho - old_r))


def _kernel_ready(state, X, output, chunk_size):
    """Whether a visit can run in the compiled kernel (:mod:`.kernel`).

    NumPy float64 arrays, the paper's one-example-at-a-time schedule and an
    output factor the kernel knows (``output.kernel_spec``).
    """
    return (
        state.xp is np
        and chunk_size == 1
        and getattr(output, "kernel_spec", None) is not None
        and isinstance(X, np.ndarray)
        and X.dtype == np.float64
        and all(t.dtype == np.float64 for t, _ in state.post_w)
    )


def _visit_kernel(active, X, target, order, n_iter, spec):
    """Run the iterations of one visit in :func:`.kernel.visit_kernel` (§6 step 2)."""
    st = active.state
    kind = spec["kind"]
    if kind == kernel.REGRESSION:
        Y = np.ascontiguousarray(target, dtype=np.float64)
        labels = np.zeros(1, dtype=np.int64)
    else:
        Y = np.zeros((1, 1))
        labels = np.ascontiguousarray(target, dtype=np.int64)

    # The kernel's first layer is transposed, (n_in, n_out), so that its loops
    # run over the outputs (kernel._first_forward); its example messages are
    # the kernel's own (uninitialised) arrays, viewed in that shape.
    def first_transposed(pairs):
        return [tuple(np.ascontiguousarray(a.T) for a in pairs[0])] + list(pairs[1:])

    def layers(pairs, ndim):  # both parts; one compiled signature for most depths
        return tuple(kernel.layer_tuple([pair[part] for pair in pairs], ndim) for part in (0, 1))

    cav_w = first_transposed(active.cav_w)
    q_w = first_transposed(active.q_w)
    msg_w = [tuple(a.reshape(a.shape[0], a.shape[2], a.shape[1]) for a in active.msg_w[0])]
    msg_w += active.msg_w[1:]
    # (one entry per hidden layer, and a dummy for the output layer, so that
    # they are padded in step with the other tuples)
    back = list(active.back) + [(np.zeros((0, 0)), np.zeros((0, 0)))]
    n_fb = kernel.visit_kernel(
        *layers(cav_w, 2),
        *layers(active.cav_b, 1),
        *layers(q_w, 2),
        *layers(active.q_b, 1),
        *layers(msg_w, 3),
        *layers(active.msg_b, 2),
        *layers(back, 2),
        len(active.cav_w),
        np.ascontiguousarray(X),
        Y,
        labels,
        np.ascontiguousarray(order, dtype=np.int64),
        int(n_iter),
        bool(active.per_example),
        bool(st.bias),
        float(st.alpha),
        int(kind),
        float(spec.get("noise_var", 1.0)),
        bool(spec.get("regularize", False)),
        float(spec.get("reg_var", likelihood.ARGMAX_REG_VAR)),
        float(spec.get("argmax_noise", likelihood.ARGMAX_NOISE)),
        np.linspace(0.0, 1.0, int(spec.get("n_grid", 401))),
        float(spec.get("width", 8.0)),
        float(spec.get("min_mass", 1e-12)),
    )
    active.q_w[0] = None  # (stale: release it before its transposed copy is made)
    active.q_w[0] = tuple(np.ascontiguousarray(a.T) for a in q_w[0])
    st.n_fallback += int(n_fb)


def train_batch(
    state,
    X,
    target,
    slot,
    *,
    output,
    n_iter,
    rng,
    rate=1.0,
    per_example=True,
    chunk_size=1,
    use_kernel=None,
    workspace=None,
):
    """Visit batch ``slot`` with data ``(X, target)`` for ``n_iter`` iterations (§6).

    Parameters
    ----------
    state : MPState
    X : array of shape (b, n_in)
    target : array
        Whatever ``output`` takes (targets or class indices), first axis ``b``.
    slot : int
        The batch's slot.
    output : callable
        ``output(z_mean, z_var, target) -> (tau, rho)``: the output factor's
        backward messages (likelihood module).  Callables made by
        :func:`regression_output` and :func:`classification_output` also
        carry a ``kernel_spec`` for the compiled kernel.
    n_iter : int
        Iterations (passes over every example of the batch).
    rng : numpy Generator
        Draws the example order (one order for all iterations).
    rate : float
        EMA update rate of the slot (1 = no damping).
    per_example : bool
        ``memory="per_example"`` (True) or ``"per_batch"``.  With ``n_iter=1``
        the two are the same computation and the visit runs as ``"per_batch"``.
    chunk_size : int
        Examples processed together from the same marginals (1 = the paper's
        sequential schedule, the only one the estimators use).  Larger chunks
        are undamped parallel EP updates: on an 8-64-64-1 network on kin8nm,
        chunks of 64 or 256 overflowed to non-finite marginals within two
        epochs (chunks of 16 did not), and on the array path they were slower
        per example than the compiled kernel.
    use_kernel : bool or None, default=None
        Run the iterations in the compiled CPU kernel (:mod:`.kernel`, the same
        arithmetic).  None: whenever possible (NumPy float64 arrays,
        ``chunk_size=1`` and an output with a ``kernel_spec``); False: the
        array functions (the reference, and the path of other namespaces).
    workspace : dict or None, default=None
        Keeps the example-message arrays for the next visit (:func:`run_epoch`
        passes one per epoch); None allocates them for this visit.
    """
    xp = state.xp
    n = X.shape[0]
    if n_iter == 1:
        # A single iteration never divides an example's message out again, so
        # "per_example" is "per_batch" (the same messages, the batch's product
        # accumulated as they come) without the b x P message storage.
        per_example = False
    ready = _kernel_ready(state, X, output, chunk_size)
    if use_kernel and not ready:
        raise ValueError("the compiled kernel needs NumPy float64 arrays, chunk_size=1 "
                         "and an output factor with a kernel_spec")
    compiled = ready and use_kernel is not False
    active = _ActiveBatch(state, slot, n, per_example, workspace=workspace,
                          zero_messages=not compiled)
    order = rng.permutation(n)
    if compiled:
        _visit_kernel(active, X, target, order, n_iter, output.kernel_spec)
        _commit(state, active, rate)
        return
    order_x = xp.asarray(order) if xp is not np else order  # (one copy to the device)
    for it in range(n_iter):
        if not per_example and it > 0:
            active.reset_messages()
        for start in range(0, n, chunk_size):
            idx_x = order_x[start : start + chunk_size]
            active.step(X[idx_x], target[idx_x], idx_x, output)
        if per_example and it < n_iter - 1:  # the last marginals are only read by the commit
            active.recompute()
    state.n_fallback += int(active.n_fallback)
    _commit(state, active, rate)


def run_epoch(
    state,
    batches,
    *,
    output,
    n_iter,
    rng,
    epoch,
    damping=True,
    per_example=True,
    chunk_size=1,
    use_kernel=None,
):
    """One epoch: every ``(slot, X, target)`` in ``batches``, in random order (§6),
    then the posterior refreshed from the slots.

    ``damping``: EMA rate :func:`ema_rate` of ``epoch`` for the slots (False: 1,
    no damping).  ``use_kernel`` as in :func:`train_batch`.
    """
    rate = ema_rate(epoch) if damping else 1.0
    workspace = {}
    for k in rng.permutation(len(batches)):
        slot, Xb, tb = batches[k]
        train_batch(
            state,
            Xb,
            tb,
            slot,
            output=output,
            n_iter=n_iter,
            rng=rng,
            rate=rate,
            per_example=per_example,
            chunk_size=chunk_size,
            use_kernel=use_kernel,
            workspace=workspace,
        )
    recompute_posterior(state)


def posterior_moments(state):
    """Means and variances of every weight and bias marginal: lists ``[(w_m, w_v, b_m, b_v)]``."""
    out = []
    for layer in range(state.n_layers):
        w_m, w_v = from_natural(*state.post_w[layer])
        b_m, b_v = from_natural(*state.post_b[layer])
        out.append((w_m, w_v, b_m, b_v))
    return out


def to_posterior(state):
    """The weight and bias marginals as the library's common
    :class:`~skbayesnn.core.posterior.GaussianMLPPosterior` (LeakyReLU hidden
    units with the state's slope)."""
    layers = posterior_moments(state)
    return GaussianMLPPosterior(
        [w_m for w_m, _, _, _ in layers],
        [w_v for _, w_v, _, _ in layers],
        [b_m for _, _, b_m, _ in layers],
        [b_v for _, _, _, b_v in layers],
        activation="leaky_relu",
        negative_slope=float(state.alpha),
    )


def predict_moments(state, X):
    """Prediction branch (§9): moments of the output units through the marginals.

    Direct moment matching for the activations (§5.6 (a)): the shared analytic
    predictive, ``propagate(to_posterior(state), X, act_approx="moment_match")``
    (message_passing.md §9 is that computation).  The marginals are
    the prior times every slot, the last-visited batch's included as its
    damped aggregate: one posterior whatever the visiting order (the authors'
    code predicts right after a visit, from that batch's undamped messages;
    the two differ by the damping rate, 1 - 0.9 at most).

    Returns
    -------
    mean, var : arrays of shape (n, n_out)
    """
    return propagate(to_posterior(state), X, act_approx="moment_match")


def regression_output(noise_var):
    """Output callable of the Gaussian likelihood (§5.8)."""

    def output(z_mean, z_var, y):
        return likelihood.regression_backward(y, noise_var)

    output.kernel_spec = {"kind": kernel.REGRESSION, "noise_var": float(noise_var)}
    return output


def classification_output(kind, n_classes, *, noise_var=0.01, regularize=False,
                          argmax_noise=likelihood.ARGMAX_NOISE,
                          reg_var=likelihood.ARGMAX_REG_VAR):
    """Output callable of a classification factor on integer labels (§3.3).

    Parameters
    ----------
    kind : {"argmax", "regression", "softmax"}
        The argmax factor (§5.11), Gaussian regression on one-hot targets
        (R-MP, §5.8) or the softmax factor (§5.10).
    n_classes : int
    noise_var : float, default=0.01
        ``beta^2`` of the one-hot regression.
    regularize : bool, default=False
        The argmax factor's one-hot regularisation (§5.11).
    argmax_noise : float, default=0.3
        The argmax factor's extra pairwise noise variance ``s^2`` (§5.11).
    reg_var : float, default=0.1
        Variance ``gamma^2`` of the regularising factors ``N(a; +-1, gamma^2)``.

    Returns
    -------
    output : callable
        ``output(z_mean, z_var, labels) -> (tau, rho)``, with a ``kernel_spec``.
    """
    from ..._backend import array_namespace

    def output(z_mean, z_var, labels):
        if kind == "argmax":
            return likelihood.argmax_backward(z_mean, z_var, labels, noise_var=argmax_noise,
                                              regularize=regularize, reg_var=reg_var)
        if kind == "softmax":
            return likelihood.softmax_backward(z_mean, z_var, labels)
        hot = likelihood.one_hot(labels, n_classes, array_namespace(z_mean))
        return likelihood.regression_backward(hot, noise_var)

    codes = {
        "argmax": kernel.ARGMAX,
        "softmax": kernel.SOFTMAX,
        "regression": kernel.ONE_HOT_REGRESSION,
    }
    output.kernel_spec = {
        "kind": codes[kind],
        "noise_var": float(noise_var),
        "regularize": bool(regularize),
        "argmax_noise": float(argmax_noise),
        "reg_var": float(reg_var),
    }
    return output
