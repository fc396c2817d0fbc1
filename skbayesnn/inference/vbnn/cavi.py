"""Closed-form CAVI for the variational bow-tie network (vbnn.md §3-§7).

Layers are indexed ``j = 0..L``: layer ``j`` maps the activations ``a_j`` (``a_0 =
x``, width ``n_j``) to ``z_{j+1} = W_j a_j + b_j``; layers ``j < L`` are hidden (a
noisy, gated ReLU ``a_{j+1} ~ N(gamma * z, eta^2)``, vbnn.md §2.1) and layer ``L``
is the linear output.  The paper's layer ``l`` is ``j + 1``.

Global factors (per layer ``j``): ``q(W~_{j,d}) = N(m[j][d], B[j][d])`` over the
row ``(b, W)`` with the bias first, ``q(eta^2_{j,d}) = IG(alpha[j][d],
beta[j][d])`` and the shrinkage factors of :mod:`.shrinkage`.  Local factors (per
training row ``n`` and hidden layer ``j``): ``q(gamma) = Bern(rho)``, ``q(omega) =
PG(1, A)`` and the Gaussian chain ``q(a_{j+1} | a_j) = N(t + M a_j, S)``.

Every function here takes and returns arrays of the namespace of its inputs
(NumPy or CuPy), batched over rows and over units; the small shrinkage arrays are
handled on the host by :mod:`.shrinkage`.  Updates use the exact forms of
vbnn.md §4, including the hidden-noise update with the cross-layer covariance
that the paper drops (vbnn.md §16.1).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace

import numpy as np

from ..._backend import array_namespace, asnumpy, special, to_device
from .shrinkage import ShrinkagePrior

_HALF_LOG_2PI = 0.5 * math.log(2.0 * math.pi)


# ----------------------------------------------------------------- the state
@dataclass
class VBNNState:
    """All variational factors of a fitted (or fitting) bow-tie network.

    Global attributes are lists over layers ``j = 0..L``; local ones over hidden
    layers ``j = 0..L-1`` with a leading row axis ``N`` (``S[L-1]`` has a leading
    axis of 1: it is the same for every row).
    """

    temperature: float
    bias_var: float
    prior: ShrinkagePrior
    alpha0: list
    beta0: list
    m: list
    B: list
    alpha: list
    beta: list
    rho: list = field(default_factory=list)
    A: list = field(default_factory=list)
    t: list = field(default_factory=list)
    M: list = field(default_factory=list)
    S: list = field(default_factory=list)
    S_logdet: list = field(default_factory=list)
    Ea: list = field(default_factory=list)
    Eaa: list = field(default_factory=list)
    cross: list = field(default_factory=list)
    aug_mean: list = field(default_factory=list)
    aug_sq: list = field(default_factory=list)
    inputs: object = None  # kept input columns of a pruned network (None: all)

    @property
    def n_layers(self):
        return len(self.m)

    @property
    def sizes(self):
        return [self.m[0].shape[1] - 1] + [m.shape[0] for m in self.m]

    def noise_precision(self, j):
        """``E[eta_{j,d}^{-2}] = alpha / beta``."""
        return self.alpha[j] / self.beta[j]

    def noise_variance(self, j):
        """``E[eta_{j,d}^2] = beta / (alpha - 1)``."""
        return self.beta[j] / (self.alpha[j] - 1.0)

    def with_locals(self, **locals_):
        """A copy sharing the global factors, with other local factors."""
        return replace(self, **locals_)

    def globals_only(self):
        """A copy without the per-row local factors and moments (what a fitted
        model keeps: they take ``O(N L D^2)`` memory)."""
        return replace(self, rho=[], A=[], t=[], M=[], S=[], S_logdet=[], Ea=[], Eaa=[], cross=[],
                       aug_mean=[], aug_sq=[])

    def to_namespace(self, xp):
        """A copy with every array moved into namespace ``xp``."""

        def move(value):
            if isinstance(value, list):
                return [move(v) for v in value]
            if value is None or isinstance(value, (float, int)):
                return value
            return to_device(value, xp)

        names = (
            "m",
            "B",
            "alpha",
            "beta",
            "beta0",  # (one per output: an array)
            "rho",
            "A",
            "t",
            "M",
            "S",
            "S_logdet",
            "cross",
            "aug_mean",
            "aug_sq",
        )
        moved = replace(self, **{name: move(getattr(self, name)) for name in names})
        moved.Ea = [mu[:, 1:] for mu in moved.aug_mean]
        moved.Eaa = [A[:, 1:, 1:] for A in moved.aug_sq]
        return moved


# --------------------------------------------------------------- primitives
def pg_mean(A, xp):
    """``E[omega]`` for ``omega ~ PG(1, A)``: ``tanh(A/2) / (2A)`` (Eq. 9), with its
    series ``1/4 - A^2/48`` near 0 (vbnn.md §13.4)."""
    small = A < 1e-4
    safe = xp.where(small, 1.0, A)
    return xp.where(small, 0.25 - A * A / 48.0, xp.tanh(0.5 * safe) / (2.0 * safe))


def log_cosh(x, xp):
    """``log cosh(x)`` without overflow."""
    ax = xp.abs(x)
    return ax + xp.log1p(xp.exp(-2.0 * ax)) - math.log(2.0)


def bernoulli_entropy(p, xp):
    """``-p log p - (1-p) log(1-p)`` with ``0 log 0 = 0``."""
    tiny = xp.finfo(p.dtype).tiny
    return -(p * xp.log(xp.maximum(p, tiny)) + (1.0 - p) * xp.log(xp.maximum(1.0 - p, tiny)))


def spd_inverse(P, xp, *, jitter=1e-10):
    """Inverse and log-determinant of a stack of symmetric positive-definite
    matrices by Cholesky, after symmetrising; a relative diagonal jitter is
    added, growing tenfold, only if the factorisation fails (vbnn.md §4 "PD
    guarantee", §16)."""
    P = 0.5 * (P + P.swapaxes(-1, -2))
    eye = xp.eye(P.shape[-1], dtype=P.dtype)
    scale = xp.mean(xp.abs(xp.diagonal(P, axis1=-2, axis2=-1)), axis=-1)[..., None, None]
    added = 0.0
    for _ in range(12):
        try:
            chol = xp.linalg.cholesky(P + added * scale * eye)
            # CuPy returns NaN instead of raising.
            if bool(xp.all(xp.isfinite(chol))):
                break
        except Exception:  # NumPy's LinAlgError
            pass
        added = jitter if added == 0.0 else 10.0 * added
    else:
        raise FloatingPointError("a precision matrix is not positive definite")
    chol_inv = xp.linalg.inv(chol)
    inv = chol_inv.swapaxes(-1, -2) @ chol_inv
    logdet = 2.0 * xp.sum(xp.log(xp.diagonal(chol, axis1=-2, axis2=-1)), axis=-1)
    return inv, logdet


def second_moment(m, B):
    """``C = B + m m^T`` per unit: ``E[W~^T W~]``."""
    return B + m[:, :, None] * m[:, None, :]


def weight_squares(m, B, xp):
    """``E[W^2]`` of every weight (bias excluded), shape ``(n_out, n_in)``."""
    return xp.diagonal(B, axis1=-2, axis2=-1)[:, 1:] + m[:, 1:] ** 2


def pre_activation_moments(m, C, mu, A_tilde):
    """``E[z]`` and ``E[z^2] = Tr(C A~)`` for every row and unit, ``(N, n_out)``."""
    n = mu.shape[0]
    Ez = mu @ m.T
    Ez2 = A_tilde.reshape(n, -1) @ C.reshape(C.shape[0], -1).T
    return Ez, Ez2


# ------------------------------------------------------------------ moments
def forward_moments(state, X):
    """Moments of the chain ``q(a)`` (vbnn.md §3.1), kept in augmented form.

    Sets, per layer input ``a_j``: ``aug_mean[j] = E[a~_j]`` and ``aug_sq[j] =
    E[a~_j a~_j^T]`` with ``a~ = (1, a)``; per hidden layer output: ``cross[j+1]
    = E[a_{j+1} a~_j^T]`` (the vectors ``c`` of vbnn.md §3.1).  ``Ea``, ``Eaa``
    are views into them.  For ``j = 0`` the input is fixed, so the products of
    the recursion reduce to outer products.
    """
    xp = array_namespace(X)
    n = X.shape[0]
    aug_mean, aug_sq, cross = [], [], [None]
    mean = X
    sq = None  # E[a a^T] of the current layer input (None: deterministic input)
    for j in range(state.n_layers):
        k = mean.shape[1]
        mu = xp.ones((n, k + 1), dtype=X.dtype)
        mu[:, 1:] = mean
        A = xp.empty((n, k + 1, k + 1), dtype=X.dtype)
        A[:, 0, :] = mu
        A[:, :, 0] = mu
        A[:, 1:, 1:] = mean[:, :, None] * mean[:, None, :] if sq is None else sq
        aug_mean.append(mu)
        aug_sq.append(A)
        if j == state.n_layers - 1:
            break
        t, M, S = state.t[j], state.M[j], state.S[j]
        next_mean = t + (M @ mean[:, :, None])[:, :, 0]
        if sq is None:
            # Fixed input: a_{j+1} varies only through S.
            c = next_mean[:, :, None] * mu[:, None, :]
            sq = S + next_mean[:, :, None] * next_mean[:, None, :]
        else:
            # E[a_{j+1} a~_j^T] = t E[a~_j]^T + M E[a_j a~_j^T] (the rows of A~
            # below the first); E[a_{j+1} a_{j+1}^T] = S + E[a_{j+1} a~_j^T] (t, M)^T.
            c = t[:, :, None] * mu[:, None, :] + M @ A[:, 1:, :]
            TM = xp.concatenate([t[:, :, None], M], axis=2)
            sq = S + c @ TM.swapaxes(-1, -2)
            sq = 0.5 * (sq + sq.swapaxes(-1, -2))
        cross.append(c)
        mean = next_mean
    state.aug_mean, state.aug_sq, state.cross = aug_mean, aug_sq, cross
    state.Ea = [mu[:, 1:] for mu in aug_mean]
    state.Eaa = [A[:, 1:, 1:] for A in aug_sq]
    del xp


def layer_statistics(state, j):
    """``(mu~, A~, C, E[z], E[z^2])`` of layer ``j`` under the current factors."""
    mu, A_tilde = state.aug_mean[j], state.aug_sq[j]
    C = second_moment(state.m[j], state.B[j])
    Ez, Ez2 = pre_activation_moments(state.m[j], C, mu, A_tilde)
    return mu, A_tilde, C, Ez, Ez2


def hidden_residual(state, j, Ez2):
    """``E[(a - gamma z)^2]`` per row and unit of hidden layer ``j``: the exact form
    ``E[a^2] - 2 rho m^T c + rho E[z^2]`` (vbnn.md §4, §16.1)."""
    xp = array_namespace(Ez2)
    c = state.cross[j + 1]
    mc = xp.sum(c * state.m[j][None, :, :], axis=-1)
    Ea2 = xp.diagonal(state.Eaa[j + 1], axis1=-2, axis2=-1)
    rho = state.rho[j]
    return Ea2 - 2.0 * rho * mc + rho * Ez2, mc, c


def output_residual(Y, Ez, Ez2):
    """``E[(y - z)^2] = y^2 - 2 y E[z] + E[z^2]`` per row and output."""
    return Y * Y - 2.0 * Y * Ez + Ez2


# ------------------------------------------------------------------ updates
def update_noise(state, j, Y, *, scale=1.0):
    """``q(eta^2_j)`` (Eq. 15, exact hidden form); ``scale = N / |batch|`` in SVI
    (vbnn.md §8)."""
    xp = array_namespace(state.m[j])
    _, _, _, Ez, Ez2 = layer_statistics(state, j)
    if j == state.n_layers - 1:
        resid = output_residual(Y, Ez, Ez2)
    else:
        resid = hidden_residual(state, j, Ez2)[0]
    state.beta[j] = state.beta0[j] + 0.5 * scale * xp.sum(resid, axis=0)


def update_pg(state, j):
    """``A = sqrt(E[z^2]) / T`` of hidden layer ``j`` (Eq. 17)."""
    xp = array_namespace(state.m[j])
    Ez2 = layer_statistics(state, j)[4]
    state.A[j] = xp.sqrt(xp.maximum(Ez2, 0.0)) / state.temperature


def update_rho(state, j):
    """``q(gamma)`` of hidden layer ``j`` (Eq. 18)."""
    xp = array_namespace(state.m[j])
    Ez, Ez2 = layer_statistics(state, j)[3:]
    c = state.cross[j + 1]
    mc = xp.sum(c * state.m[j][None, :, :], axis=-1)
    prec = state.noise_precision(j)
    logit = -0.5 * prec * Ez2 + prec * mc + Ez / state.temperature
    state.rho[j] = special(xp).expit(logit)


def prior_precision_diagonal(state, j, xp):
    """``D^{-1}`` of every unit of layer ``j``: ``(1/s0^2, E[1/tau]E[1/psi], ...)``."""
    w_prec = to_device(state.prior.weight_precision(j), xp)
    bias = xp.full((w_prec.shape[0], 1), 1.0 / state.bias_var, dtype=w_prec.dtype)
    return xp.concatenate([bias, w_prec], axis=1)


def weight_natural_parameters(state, j, Y, *, scale=1.0):
    """Data terms ``(Lambda, h)`` of ``q(W~_j)``: precision without the prior and
    the linear term (Eq. 16; ``scale = N / |batch|`` in SVI)."""
    xp = array_namespace(state.m[j])
    mu, A_tilde = state.aug_mean[j], state.aug_sq[j]
    n, k = mu.shape
    T = state.temperature
    if j == state.n_layers - 1:
        prec = state.noise_precision(j)
        total = xp.sum(A_tilde, axis=0)
        Lam = prec[:, None, None] * total[None, :, :]
        h = prec[:, None] * (Y.T @ mu)
    else:
        rho = state.rho[j]
        coef = pg_mean(state.A[j], xp) / (T * T) + state.noise_precision(j) * rho
        Lam = (coef.T @ A_tilde.reshape(n, k * k)).reshape(-1, k, k)
        c = state.cross[j + 1]
        w = state.noise_precision(j) * rho
        h = xp.sum(w[:, :, None] * c, axis=0) + ((rho - 0.5) / T).T @ mu
    return scale * Lam, scale * h


def update_weights(state, j, Y):
    """``q(W~_j)``, every unit at once (Eq. 16)."""
    xp = array_namespace(state.m[j])
    Lam, h = weight_natural_parameters(state, j, Y)
    set_weights_from_natural(state, j, Lam, h, xp)


def set_weights_from_natural(state, j, Lam, h, xp):
    """``B = (D^{-1} + Lam)^{-1}``, ``m = B h``."""
    d_inv = prior_precision_diagonal(state, j, xp)
    eye = xp.eye(Lam.shape[-1], dtype=Lam.dtype)
    B, _ = spd_inverse(Lam + d_inv[:, :, None] * eye, xp)
    state.B[j] = B
    state.m[j] = (B @ h[:, :, None])[:, :, 0]


def update_shrinkage(state, j):
    """``q(tau_j)`` then ``q(psi_j)`` (Eqs. 13-14)."""
    xp = array_namespace(state.m[j])
    w_sq = asnumpy(weight_squares(state.m[j], state.B[j], xp))
    state.prior.update_tau(j, w_sq)
    state.prior.update_psi(j, w_sq)


def update_activations(state, Y, *, observed=True):
    """``q(a)`` for every row: the backward recursion of Eq. 19, then the moments.

    With ``observed=False`` (test points, vbnn.md §10.1) the output layer
    contributes nothing.
    """
    xp = array_namespace(state.m[0])
    L = state.n_layers - 1
    T = state.temperature
    n = state.rho[0].shape[0]
    t_next = G_next = M_next = None
    for j in range(L - 1, -1, -1):
        P = state.noise_precision(j)  # hidden noise precisions of a_{j+1}
        rho = state.rho[j]
        mW, mb = state.m[j][:, 1:], state.m[j][:, 0]
        width = P.shape[0]
        eye = xp.eye(width, dtype=P.dtype)
        if j == L - 1:
            if observed:
                prec_o = state.noise_precision(L)
                C_o = second_moment(state.m[L], state.B[L])
                WW, Wb = C_o[:, 1:, 1:], C_o[:, 1:, 0]
                S_inv = (P[:, None] * eye + xp.sum(prec_o[:, None, None] * WW, axis=0))[None]
                h = (Y * prec_o[None, :]) @ state.m[L][:, 1:] - (prec_o @ Wb)[None, :]
            else:
                S_inv = (P[:, None] * eye)[None]
                h = xp.zeros((n, width), dtype=P.dtype)
        else:
            rho_n = state.rho[j + 1]
            coef = state.noise_precision(j + 1) * rho_n + pg_mean(state.A[j + 1], xp) / (T * T)
            C_n = second_moment(state.m[j + 1], state.B[j + 1])
            WW, Wb = C_n[:, 1:, 1:], C_n[:, 1:, 0]
            k = WW.shape[1]
            quad = (coef @ WW.reshape(WW.shape[0], k * k)).reshape(n, k, k)
            # M^T S^-1 M = G^T M and M^T S^-1 t = G^T t with G = diag(P rho) W
            # (M = S G): the integrated-out next layer (vbnn.md §4, Eq. 19).
            S_inv = P[:, None] * eye + quad - G_next.swapaxes(-1, -2) @ M_next
            h = (
                (G_next.swapaxes(-1, -2) @ t_next[:, :, None])[:, :, 0]
                + ((rho_n - 0.5) / T) @ state.m[j + 1][:, 1:]
                - coef @ Wb
            )
        h = h + P * rho * mb
        S, logdet_prec = spd_inverse(S_inv, xp)
        G = (P * rho)[:, :, None] * mW[None, :, :]
        t = (S @ h[:, :, None])[:, :, 0]
        M = S @ G
        state.S[j], state.S_logdet[j], state.t[j], state.M[j] = S, -logdet_prec, t, M
        t_next, G_next, M_next = t, G, M
    forward_moments(state, state.Ea[0])


# --------------------------------------------------------------------- ELBO
def local_elbo_terms(state, j, Ez, Ez2):
    """Gate, Polya-Gamma and ``q(gamma)`` entropy terms of hidden layer ``j`` per row
    (vbnn.md §5 term 3), ``(N,)``."""
    xp = array_namespace(Ez)
    T = state.temperature
    rho, A = state.rho[j], state.A[j]
    Ew = pg_mean(A, xp)
    terms = (
        -math.log(2.0)
        + (rho - 0.5) * Ez / T
        - Ew * Ez2 / (2.0 * T * T)
        + 0.5 * A * A * Ew
        - log_cosh(0.5 * A, xp)
        + bernoulli_entropy(rho, xp)
    )
    return xp.sum(terms, axis=1)


def activation_entropy(state, j, n_rows):
    """Entropy of ``q(a_{j+1} | a_j)`` summed over rows (vbnn.md §5 term 4)."""
    xp = array_namespace(state.S_logdet[j])
    width = state.S[j].shape[-1]
    logdet = state.S_logdet[j]
    total = xp.sum(logdet) * (n_rows if logdet.shape[0] == 1 else 1)
    return 0.5 * float(total) + n_rows * 0.5 * width * (1.0 + math.log(2.0 * math.pi))


def noise_elbo_terms(alpha0, beta0, alpha, beta, sum_resid, n_rows):
    """Likelihood plus ``E[log p(eta^2)] - E[log q(eta^2)]`` summed over the units
    of a layer, given ``sum_n E[(a - gamma z)^2]`` (or the output residual); the
    ``E[log eta^2]`` terms cancel since ``alpha = alpha0 + N/2`` (vbnn.md §5)."""
    from scipy.special import gammaln

    xp = array_namespace(alpha)
    prec = alpha / beta
    lg = float(np.sum(gammaln(asnumpy(alpha)))) - alpha.shape[0] * float(gammaln(alpha0))
    # beta0: a float, or one per unit (the outputs' data-driven default)
    log_beta0 = math.log(beta0) if getattr(beta0, "ndim", 0) == 0 else xp.log(beta0)
    return (
        lg
        + float(
            xp.sum(
                alpha0 * log_beta0
                - alpha * xp.log(beta)
                + (beta - beta0) * prec
                - 0.5 * prec * sum_resid
            )
        )
        - alpha.shape[0] * n_rows * _HALF_LOG_2PI
    )


def elbo(state, Y, *, scale=1.0):
    """The evidence lower bound of vbnn.md §5 with all constants, for the rows the
    local factors describe; ``scale = N / |batch|`` gives SVI's noisy estimate of
    the full-data ELBO (vbnn.md §5, App. C)."""
    xp = array_namespace(state.m[0])
    L = state.n_layers - 1
    n = state.Ea[0].shape[0]
    total = 0.0
    w_sq = []
    for j in range(L + 1):
        _, _, _, Ez, Ez2 = layer_statistics(state, j)
        if j == L:
            resid = output_residual(Y, Ez, Ez2)
        else:
            resid = hidden_residual(state, j, Ez2)[0]
            total += scale * float(xp.sum(local_elbo_terms(state, j, Ez, Ez2)))
            total += scale * activation_entropy(state, j, n)
        total += noise_elbo_terms(
            state.alpha0[j],
            state.beta0[j],
            state.alpha[j],
            state.beta[j],
            scale * xp.sum(resid, axis=0),
            scale * n,
        )
        m, B = state.m[j], state.B[j]
        k = m.shape[1]
        Eb2 = B[:, 0, 0] + m[:, 0] ** 2
        total += float(
            xp.sum(
                0.5 * xp.linalg.slogdet(B)[1]
                - Eb2 / (2.0 * state.bias_var)
                - 0.5 * math.log(2.0 * math.pi * state.bias_var)
            )
        ) + m.shape[0] * 0.5 * k * (1.0 + math.log(2.0 * math.pi))
        w_sq.append(asnumpy(weight_squares(m, B, xp)))
    total += state.prior.elbo_terms(w_sq)
    return total


# ---------------------------------------------------------- initialisation
def gated_forward(m, X, temperature, xp):
    """Algorithm 3's deterministic pass with given weight means: per hidden
    layer ``rho = sigmoid(z / T)``, ``M = diag(rho) W``, ``t = rho b`` and the next
    input ``rho * z`` (vbnn.md §7.2).  Returns ``(rho, t, M, last activations)``."""
    rhos, ts, Ms = [], [], []
    z = X
    for mj in m:
        pre = z @ mj[:, 1:].T + mj[:, 0][None, :]
        rho = special(xp).expit(pre / temperature)
        rhos.append(rho)
        ts.append(rho * mj[:, 0][None, :])
        Ms.append(rho[:, :, None] * mj[None, :, 1:])
        z = rho * pre
    return rhos, ts, Ms, z


def random_hidden_means(X, hidden, init, rng, xp, temperature=1.0):
    """Hidden-layer weight means by Algorithm 3 (vbnn.md §7.2): each unit's
    hyperplane passes through a random point of the (5%-widened) box of its
    inputs; ``init="laplace"`` draws the normal direction from a Laplace of scale
    ``sqrt(2 / fan_in)``, ``"spike_slab"`` from a spike-and-slab with slab
    variance ``2 / sqrt(fan_in)`` and slab weight ``1 / (1 + sqrt(fan_in))``.
    The next layer's box is that of the gated activations ``rho * pre`` with
    ``rho = sigmoid(pre / temperature)``, as :func:`gated_forward` computes them."""
    means = []
    z = asnumpy(X)
    for width in hidden:
        fan_in = z.shape[1]
        lo, hi = z.min(axis=0), z.max(axis=0)
        pad = 0.05 * (hi - lo)
        if init == "laplace":
            W = rng.laplace(0.0, np.sqrt(2.0 / fan_in), size=(width, fan_in))
        else:
            slab = rng.random((width, fan_in)) < 1.0 / (1.0 + np.sqrt(fan_in))
            W = slab * rng.normal(0.0, np.sqrt(2.0 / np.sqrt(fan_in)), size=(width, fan_in))
        point = rng.uniform(lo - pad, hi + pad, size=(width, fan_in))
        b = -np.sum(W * point, axis=1)
        means.append(np.concatenate([b[:, None], W], axis=1))
        z = gated_forward(means[-1:], z, temperature, np)[3]  # rho * pre
    return [to_device(mj, xp) for mj in means]


def ridge_output_means(Z, Y, penalty, xp):
    """Output weight means ``(b, W)`` by ridge regression of ``Y`` on ``Z`` with an
    unpenalised intercept (vbnn.md §7.1 step 6)."""
    n, k = Z.shape
    Zt = xp.concatenate([xp.ones((n, 1), dtype=Z.dtype), Z], axis=1)
    reg = xp.eye(k + 1, dtype=Z.dtype) * penalty
    reg[0, 0] = 0.0
    coef = xp.linalg.solve(Zt.T @ Zt + reg, Zt.T @ Y)
    return coef.T


def initialize(
    X,
    Y,
    hidden,
    *,
    prior,
    temperature,
    bias_var,
    alpha0,
    beta0,
    alpha0_hidden,
    beta0_hidden,
    init="laplace",
    init_weight_var=0.01,
    init_activation_var=0.01,
    rng,
):
    """A :class:`VBNNState` for rows ``X`` (standardised) and targets ``Y``,
    initialised as in vbnn.md §7: Algorithm 3 for the hidden layers, ridge for
    the output, ``B = init_weight_var I``, ``S = init_activation_var I``, noise
    factors at their prior means and ``alpha = alpha0 + N/2`` (fixed thereafter)."""
    xp = array_namespace(X)
    n = X.shape[0]
    m_hidden = random_hidden_means(X, hidden, init, rng, xp, temperature)
    rho, t, M, z_last = gated_forward(m_hidden, X, temperature, xp)
    m_out = ridge_output_means(z_last, Y, 1.0, xp)
    m = m_hidden + [m_out]
    sizes = [X.shape[1], *hidden, Y.shape[1]]
    B = [
        xp.eye(sizes[j] + 1, dtype=X.dtype)[None] * init_weight_var
        + xp.zeros((sizes[j + 1], 1, 1), dtype=X.dtype)
        for j in range(len(m))
    ]
    a0 = [alpha0_hidden] * len(hidden) + [alpha0]
    if getattr(beta0, "ndim", 0):  # one per output (a host array)
        beta0 = xp.asarray(beta0, dtype=X.dtype)
    b0 = [beta0_hidden] * len(hidden) + [beta0]
    alpha = [xp.full((sizes[j + 1],), a0[j] + 0.5 * n, dtype=X.dtype) for j in range(len(m))]
    beta = [alpha[j] * (b0[j] / a0[j]) for j in range(len(m))]
    S = [xp.eye(w, dtype=X.dtype)[None] * init_activation_var for w in hidden]
    S_logdet = [xp.full((1,), w * math.log(init_activation_var), dtype=X.dtype) for w in hidden]
    state = VBNNState(
        temperature=float(temperature),
        bias_var=float(bias_var),
        prior=prior,
        alpha0=a0,
        beta0=b0,
        m=m,
        B=B,
        alpha=alpha,
        beta=beta,
        rho=rho,
        A=[xp.zeros_like(r) for r in rho],
        t=t,
        M=M,
        S=S,
        S_logdet=S_logdet,
    )
    forward_moments(state, X)
    return state


# -------------------------------------------------------------- Algorithm 1
def cavi_sweep(state, Y, *, em_global=True, on_block=None):
    """One iteration of Algorithm 1 (vbnn.md §6); ``on_block(name)`` is called
    after every block update (for the monotonicity tests)."""
    L = state.n_layers - 1

    def done(name):
        if on_block is not None:
            on_block(name)

    for j in range(L):
        update_shrinkage(state, j)
        done(f"shrinkage {j}")
        update_noise(state, j, Y)
        done(f"noise {j}")
        update_pg(state, j)
        done(f"pg {j}")
    update_shrinkage(state, L)
    done(f"shrinkage {L}")
    update_noise(state, L, Y)
    done(f"noise {L}")
    update_activations(state, Y)
    done("activations")
    for j in range(L):
        update_weights(state, j, Y)
        done(f"weights {j}")
        update_rho(state, j)
        done(f"rho {j}")
    update_weights(state, L, Y)
    done(f"weights {L}")
    if em_global:
        state.prior.em_step()
        done("em")


def run_cavi(
    state, Y, *, max_iter=200, tol=1e-5, patience=3, em_global=True, log=None, history=None
):
    """Algorithm 1 until the relative ELBO change stays below ``tol`` for
    ``patience`` consecutive iterations (vbnn.md §5.1) or ``max_iter`` more
    iterations.  ``history`` continues an earlier run's ELBO list.

    Returns ``(elbo_history, converged)``.
    """
    monitor = ElboMonitor(tol, patience, history)
    for _ in range(max_iter):
        cavi_sweep(state, Y, em_global=em_global)
        converged = monitor.record(elbo(state, Y))
        if log is not None:
            log(f"iteration {len(monitor.history)}: ELBO {monitor.history[-1]:.6f}")
        if converged:
            return monitor.history, True
    return monitor.history, False


class ElboMonitor:
    """The convergence rule of vbnn.md §5.1: the relative ELBO change stays below
    ``tol`` for ``patience`` consecutive iterations.  ``history`` continues an
    earlier list."""

    def __init__(self, tol, patience, history=None):
        self.tol, self.patience = tol, patience
        self.history = [] if history is None else list(history)
        self._calm = 0

    def record(self, value):
        """Append ``value``; True once converged.  A non-finite ELBO raises."""
        if not math.isfinite(value):
            raise FloatingPointError(
                f"the ELBO became {value} at iteration {len(self.history) + 1}"
            )
        if self.history:
            previous = self.history[-1]
            change = abs(value - previous) / max(abs(previous), 1e-300)
            self._calm = self._calm + 1 if change < self.tol else 0
        self.history.append(value)
        return self._calm >= self.patience
