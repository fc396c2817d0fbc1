"""Global-local N-GIG shrinkage priors of VBNN (vbnn.md §2.2, §4, §5, §6.1, §12).

A weight ``W[l, d, d']`` of layer ``l`` has prior ``N(0, tau_l psi[l, d, d'])``
with a global scale ``tau_l ~ GIG(nu_glob, delta_glob, lam_glob)`` per layer and a
local scale ``psi ~ GIG(nu_loc, delta_loc_l, lam_loc_l)`` per weight.  The mean
field factors ``q(tau_l)``, ``q(psi)`` stay GIG; their closed-form CAVI updates
(Eqs. 13-14), their contribution to the ELBO (vbnn.md §5) and the EM step for the
global hyperparameter (§6.1) live here.

``GIG(x | nu, delta, lam) ∝ x^(nu-1) exp(-(delta^2 / x + lam^2 x) / 2)``; ``lam = 0``
is the inverse gamma ``IG(-nu, delta^2 / 2)``, ``delta = 0`` the gamma
``Gamma(nu, rate lam^2 / 2)``.

These arrays are small (one entry per weight) and the Bessel functions of the
general GIG have no CuPy counterpart, so this module works on host NumPy arrays.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
from scipy import special

FAMILIES = ("student_t", "laplace", "nig", "gaussian")


# ------------------------------------------------------------------ Bessel K
def log_kv(nu, z):
    """``log K_nu(z)`` for real order ``nu`` and ``z > 0``, stable for large orders.

    ``K`` is even in its order; from the fractional part ``f`` of ``|nu|`` the
    upward recurrence ``K_{m+1} = K_{m-1} + (2m / z) K_m`` (stable: ``K`` grows
    with the order) runs on the ratios ``K_{m+1} / K_m``, so no ``K`` itself
    overflows even for the orders ``-D_l D_{l-1} / 2`` of ``q(tau)``.
    """
    nu = np.abs(np.asarray(nu, dtype=float))
    z = np.asarray(z, dtype=float)
    nu, z = np.broadcast_arrays(nu, z)
    f = nu - np.floor(nu)
    n_steps = np.floor(nu).astype(int)
    # log K_f and log K_{f+1} from scipy (exponentially scaled: log kve - z).
    log_k = np.log(special.kve(f, z)) - z
    out = log_k.copy()
    if np.any(n_steps > 0):
        ratio = special.kve(f + 1.0, z) / special.kve(f, z)  # K_{f+1} / K_f
        order = f.copy()
        for step in range(int(n_steps.max())):
            active = step < n_steps
            out = np.where(active, out + np.log(ratio), out)
            order = order + 1.0
            ratio = 1.0 / ratio + 2.0 * order / z  # K_{m+1}/K_m from K_m/K_{m-1}
    return out


def kv_ratio(nu, z):
    """``K_{nu+1}(z) / K_nu(z)``."""
    return np.exp(log_kv(np.asarray(nu, dtype=float) + 1.0, z) - log_kv(nu, z))


# --------------------------------------------------------------- GIG moments
def _gig_cases(nu, delta, lam):
    """Broadcast float arrays ``(nu, delta, lam)`` and the masks of the three
    cases of vbnn.md §12: inverse gamma (``lam = 0``), gamma (``delta = 0``) and
    the general GIG."""
    nu, delta, lam = np.broadcast_arrays(*(np.asarray(a, dtype=float) for a in (nu, delta, lam)))
    ig = lam == 0
    ga = (delta == 0) & ~ig
    return nu, delta, lam, ig, ga, ~(ig | ga)


def gig_log_normalizer(nu, delta, lam):
    """``log ∫ x^(nu-1) exp(-(delta^2/x + lam^2 x)/2) dx`` (vbnn.md §5)."""
    nu, delta, lam, ig, ga, gen = _gig_cases(nu, delta, lam)
    out = np.empty(nu.shape)
    out[ig] = special.gammaln(-nu[ig]) + nu[ig] * np.log(0.5 * delta[ig] ** 2)
    out[ga] = special.gammaln(nu[ga]) - nu[ga] * np.log(0.5 * lam[ga] ** 2)
    z = lam[gen] * delta[gen]
    out[gen] = np.log(2.0) + log_kv(nu[gen], z) + nu[gen] * np.log(delta[gen] / lam[gen])
    return out


def gig_mean(nu, delta, lam):
    """``E[x]`` under ``GIG(nu, delta, lam)`` (vbnn.md §12); ``inf`` where it diverges."""
    nu, delta, lam, ig, ga, gen = _gig_cases(nu, delta, lam)
    out = np.empty(nu.shape)
    with np.errstate(divide="ignore"):
        out[ig] = np.where(nu[ig] < -1, delta[ig] ** 2 / (-2.0 * nu[ig] - 2.0), np.inf)
    out[ga] = 2.0 * nu[ga] / lam[ga] ** 2
    out[gen] = delta[gen] / lam[gen] * kv_ratio(nu[gen], lam[gen] * delta[gen])
    return out


def gig_inverse_mean(nu, delta, lam):
    """``E[1/x]`` under ``GIG(nu, delta, lam)`` (vbnn.md §12)."""
    nu, delta, lam, ig, ga, gen = _gig_cases(nu, delta, lam)
    out = np.empty(nu.shape)
    out[ig] = -2.0 * nu[ig] / delta[ig] ** 2
    with np.errstate(divide="ignore"):
        out[ga] = np.where(nu[ga] > 1, lam[ga] ** 2 / (2.0 * (nu[ga] - 1.0)), np.inf)
    d, lm, n = delta[gen], lam[gen], nu[gen]
    out[gen] = lm / d * kv_ratio(n, lm * d) - 2.0 * n / d**2
    return out


def gig_kl_terms(nu, delta, lam, nu_q, delta_q, lam_q):
    """``E_q[log p(x)] - E_q[log q(x)]`` for ``p = GIG(nu, delta, lam)`` and
    ``q = GIG(nu_q, delta_q, lam_q)``, WITHOUT the ``(nu - nu_q) E_q[log x]`` term.

    That term cancels exactly against the weight prior's ``-E[log tau]/2`` (or
    ``-E[log psi]/2``) terms in the ELBO, since ``nu - nu_q`` is the number of
    weights over 2 (vbnn.md §5, "Simplification"); the caller drops both.
    """
    e_inv = gig_inverse_mean(nu_q, delta_q, lam_q)
    out = -gig_log_normalizer(nu, delta, lam) + gig_log_normalizer(nu_q, delta_q, lam_q)
    out = out + 0.5 * (np.asarray(delta_q) ** 2 - np.asarray(delta) ** 2) * e_inv
    lam_gap = np.asarray(lam_q) ** 2 - np.asarray(lam) ** 2
    if np.any(lam_gap != 0):
        out = out + 0.5 * lam_gap * gig_mean(nu_q, delta_q, lam_q)
    return out


def _prior_inverse_moment(nu, delta, lam):
    """``E[1/x]`` under the prior, or ``1/E[x]`` where that is infinite (the
    Laplace prior's gamma with ``nu = 1``): the starting value of the moments
    before the first CAVI update of ``q``."""
    inv = float(gig_inverse_mean(nu, delta, lam))
    return inv if np.isfinite(inv) else 1.0 / float(gig_mean(nu, delta, lam))


# ------------------------------------------------------------------ the prior
@dataclass
class ShrinkagePrior:
    """Hyperparameters and variational factors of the weight prior, per layer.

    ``shapes[l] = (D_l, D_{l-1})``.  The local scale of layer ``l`` is scaled by
    ``1/sqrt(D_{l-1})`` and the global one by ``1/sqrt(L)`` (vbnn.md §7.1 step 0).

    Attributes
    ----------
    family : {"student_t", "laplace", "nig", "gaussian"}
    nu_glob, delta_glob, lam_glob : float
        Prior of every ``tau_l``; ``delta_glob`` (IG) or ``lam_glob`` (gamma,
        inverse Gaussian) is updated by :meth:`em_step`.
    nu_loc : float
    delta_loc, lam_loc : list of float
        Prior of ``psi`` in each layer.
    q_tau : list of (nu, delta, lam)
    q_psi : list of (nu, delta array, lam)
        The variational factors (set by the first :meth:`update_tau` /
        :meth:`update_psi`; until then the moments are the prior's).
    inv_tau, inv_psi : list
        Current ``E[1/tau_l]`` (float) and ``E[1/psi_l]`` (array per weight).
    gaussian_var : list of float
        For ``family="gaussian"``: the fixed prior variance of each layer.
    """

    family: str
    shapes: list
    nu_glob: float = 0.0
    delta_glob: float = 0.0
    lam_glob: float = 0.0
    nu_loc: float = 0.0
    delta_loc: list = field(default_factory=list)
    lam_loc: list = field(default_factory=list)
    q_tau: list = field(default_factory=list)
    q_psi: list = field(default_factory=list)
    inv_tau: list = field(default_factory=list)
    inv_psi: list = field(default_factory=list)
    gaussian_var: list = field(default_factory=list)

    @classmethod
    def build(cls, family, shapes, *, global_scale=1.0, local_scale=1.0):
        """Priors for layers of weight shapes ``shapes = [(D_l, D_{l-1}), ...]``.

        ``global_scale`` and ``local_scale`` set the prior scales before the
        depth and fan-in scaling (vbnn.md §7.1, §13.1): the IG scale ``delta``
        for ``student_t``, the square root of the mixing variable's mean for
        ``nig`` and the inverse rate for ``laplace``; for ``gaussian`` the prior
        variance of a weight is ``(global_scale * local_scale)^2 / D_{l-1}``.
        """
        if family not in FAMILIES:
            raise ValueError(f"shrinkage must be one of {FAMILIES}, got {family!r}.")
        n_layers = len(shapes)
        n_hidden = max(n_layers - 1, 1)
        c = [local_scale / np.sqrt(fan_in) for _, fan_in in shapes]
        prior = cls(family, [tuple(s) for s in shapes])
        if family == "gaussian":
            prior.gaussian_var = [(global_scale * ci) ** 2 for ci in c]
            prior.inv_tau = [1.0] * n_layers
            prior.inv_psi = [np.full(s, 1.0 / v) for s, v in zip(prior.shapes, prior.gaussian_var)]
            return prior
        if family == "student_t":
            # IG-IG, Student-t marginals with 3 degrees of freedom (the authors'
            # choice, vbnn.md §2.2): nu = -1.5, lam = 0; EM on delta_glob.
            prior.nu_glob = prior.nu_loc = -1.5
            prior.delta_glob, prior.lam_glob = global_scale / np.sqrt(n_hidden), 0.0
            prior.delta_loc, prior.lam_loc = list(c), [0.0] * n_layers
        elif family == "laplace":
            # Gamma mixing with nu = 1: Laplace marginals of scale 1/lam (Table 1);
            # an exponential prior on tau, EM on lam_glob.
            prior.nu_glob = prior.nu_loc = 1.0
            prior.delta_glob, prior.lam_glob = 0.0, np.sqrt(n_hidden) / global_scale
            prior.delta_loc, prior.lam_loc = [0.0] * n_layers, [1.0 / ci for ci in c]
        else:
            # "nig": inverse-Gaussian mixing, nu = -1/2 (App. E; vbnn.md §16.9),
            # E[x] = delta / lam; EM on lam_glob.
            prior.nu_glob = prior.nu_loc = -0.5
            prior.delta_glob = global_scale / np.sqrt(n_hidden)
            prior.lam_glob = 1.0 / prior.delta_glob
            prior.delta_loc, prior.lam_loc = list(c), [1.0 / ci for ci in c]
        for (d_out, d_in), dl, ll in zip(prior.shapes, prior.delta_loc, prior.lam_loc):
            # The nu-hats are fixed by conjugacy (Eqs. 13-14); delta-hats start at
            # the prior's and are set by the first updates.  (vbnn.md §7.1 step 4
            # draws the initial E[tau] from the prior instead; with the NIG's
            # shape -nu = 1/2 that draw has no mean and can start a layer at any
            # scale, and the restarts differ through Algorithm 3 anyway.)
            prior.q_tau.append(
                (prior.nu_glob - 0.5 * d_out * d_in, prior.delta_glob, prior.lam_glob)
            )
            prior.q_psi.append((prior.nu_loc - 0.5, np.full((d_out, d_in), float(dl)), ll))
            prior.inv_tau.append(
                _prior_inverse_moment(prior.nu_glob, prior.delta_glob, prior.lam_glob)
            )
            prior.inv_psi.append(
                np.full((d_out, d_in), _prior_inverse_moment(prior.nu_loc, dl, ll))
            )
        return prior

    def weight_precision(self, layer):
        """Prior precision ``E[1/tau_l] E[1/psi_l]`` of each weight of layer ``l``."""
        return self.inv_tau[layer] * self.inv_psi[layer]

    # ---------------------------------------------------------------- updates
    def update_tau(self, layer, w_sq):
        """``q(tau_l)`` given ``E[W^2]`` of the layer (Eq. 13)."""
        if self.family == "gaussian":
            return
        nu_q = self.q_tau[layer][0]
        delta_q = float(np.sqrt(self.delta_glob**2 + np.sum(self.inv_psi[layer] * w_sq)))
        self.q_tau[layer] = (nu_q, delta_q, self.lam_glob)
        self.inv_tau[layer] = float(gig_inverse_mean(*self.q_tau[layer]))

    def update_psi(self, layer, w_sq):
        """``q(psi_l)`` given ``E[W^2]`` of the layer (Eq. 14)."""
        if self.family == "gaussian":
            return
        nu_q = self.q_psi[layer][0]
        delta_q = np.sqrt(self.inv_tau[layer] * w_sq + self.delta_loc[layer] ** 2)
        self.q_psi[layer] = (nu_q, delta_q, self.lam_loc[layer])
        self.inv_psi[layer] = gig_inverse_mean(*self.q_psi[layer])

    def em_step(self):
        """EM update of the global hyperparameter (vbnn.md §6.1).

        Maximises ``sum_l E_q[log GIG(tau_l | nu, delta, lam)]`` over ``delta``
        (``student_t``) or ``lam`` (``laplace``, ``nig``) in closed form.
        """
        if self.family == "gaussian":
            return
        n = len(self.shapes)
        if self.family == "student_t":
            inv = sum(float(gig_inverse_mean(*q)) for q in self.q_tau)
            self.delta_glob = float(np.sqrt(-2.0 * self.nu_glob * n / inv))
        elif self.family == "laplace":
            mean = sum(float(gig_mean(*q)) for q in self.q_tau)
            self.lam_glob = float(np.sqrt(2.0 * n * self.nu_glob / mean))
        else:
            # The paper's factor 2 is an erratum (vbnn.md §6.1, §16.8).
            mean = sum(float(gig_mean(*q)) for q in self.q_tau)
            self.lam_glob = float(n * self.delta_glob / mean)

    # ------------------------------------------------------------------- ELBO
    def elbo_terms(self, w_sq):
        """The prior's part of the ELBO given ``E[W^2]`` of each layer (vbnn.md §5).

        The weight prior ``E[log N(W | 0, tau psi)]`` plus the ``tau`` and ``psi``
        blocks ``E[log p] - E[log q]``, with the ``E[log tau]``, ``E[log psi]``
        terms cancelled (valid once :meth:`update_tau` and :meth:`update_psi`
        have run).
        """
        total = 0.0
        for layer, ws in enumerate(w_sq):
            ws = np.asarray(ws)
            if self.family == "gaussian":
                v = self.gaussian_var[layer]
                total += float(np.sum(-0.5 * np.log(2 * np.pi * v) - 0.5 * ws / v))
                continue
            total += float(
                np.sum(-0.5 * np.log(2 * np.pi) - 0.5 * self.weight_precision(layer) * ws)
            )
            total += float(
                gig_kl_terms(self.nu_glob, self.delta_glob, self.lam_glob, *self.q_tau[layer])
            )
            total += float(
                np.sum(
                    gig_kl_terms(
                        self.nu_loc, self.delta_loc[layer], self.lam_loc[layer], *self.q_psi[layer]
                    )
                )
            )
        return total
