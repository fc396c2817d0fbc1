"""Exact Bayesian linear regression from sufficient statistics.

Model (in whatever units the caller works in, usually standardised):
``y = b + x^T w + eps``, ``eps ~ N(0, 1/alpha)``, ``w ~ N(0, I/lam)`` and a flat
prior on the intercept ``b``.  Integrating ``b`` out exactly leaves the centred
problem with ``n - 1`` effective observations, and adds ``1/(n alpha)`` to the
predictive variance (the intercept's posterior variance).  Everything depends on
the data only through :class:`LinearGaussianStats`, so streaming updates are exact.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from .._backend import array_namespace, to_device


@dataclass
class LinearGaussianStats:
    """Sufficient statistics ``n, sum x, sum y, sum x x^T, sum x y, sum y^2``."""

    n: float
    x_sum: object
    y_sum: float
    xx: object
    xy: object
    yy: float

    @classmethod
    def from_data(cls, X, y):
        """Statistics of rows ``X`` (n, d) and targets ``y`` (n,)."""
        xp = array_namespace(X, y)
        return cls(
            n=float(X.shape[0]),
            x_sum=xp.sum(X, axis=0),
            y_sum=float(xp.sum(y)),
            xx=X.T @ X,
            xy=X.T @ y,
            yy=float(y @ y),
        )

    def to_namespace(self, xp):
        """Copy whose arrays live in namespace ``xp`` (NumPy copies to the host)."""
        return LinearGaussianStats(
            self.n,
            to_device(self.x_sum, xp),
            self.y_sum,
            to_device(self.xx, xp),
            to_device(self.xy, xp),
            self.yy,
        )

    def is_finite(self):
        """Whether every statistic is finite (sums of squares can overflow)."""
        xp = array_namespace(self.xx)
        return all(math.isfinite(v) for v in (self.n, self.y_sum, self.yy)) and all(
            bool(xp.all(xp.isfinite(a))) for a in (self.x_sum, self.xx, self.xy)
        )

    def __add__(self, other):
        return LinearGaussianStats(
            self.n + other.n,
            self.x_sum + other.x_sum,
            self.y_sum + other.y_sum,
            self.xx + other.xx,
            self.xy + other.xy,
            self.yy + other.yy,
        )

    def centred(self):
        """``(x_bar, y_bar, S, r, t)``: means, centred scatter, cross term, residual sum.

        Callers pass standardised data, so the subtraction of the mean terms loses
        no precision.
        """
        x_bar = self.x_sum / self.n
        y_bar = self.y_sum / self.n
        S = self.xx - self.n * (x_bar[:, None] * x_bar[None, :])
        S = 0.5 * (S + S.T)
        r = self.xy - self.n * x_bar * y_bar
        t = max(self.yy - self.n * y_bar * y_bar, 0.0)
        return x_bar, y_bar, S, r, t


def spectrum(stats):
    """Eigendecomposition of the centred problem, shared by every function below.

    Returns a dict with ``x_bar``, ``y_bar``, eigenvalues ``e`` (clipped at 0) and
    eigenvectors ``U`` of the centred scatter matrix, ``rr = U^T r`` and the
    centred target sum of squares ``t``.
    """
    xp = array_namespace(stats.xx)
    x_bar, y_bar, S, r, t = stats.centred()
    e, U = xp.linalg.eigh(S)
    return dict(x_bar=x_bar, y_bar=y_bar, e=xp.maximum(e, 0.0), U=U, rr=U.T @ r, t=t)


def least_squares_fit(spec):
    """Rank and residual sum of squares of the centred least-squares fit.

    From :func:`spectrum`: the rank counts the numerically non-zero eigenvalues
    (``e_k > 1e-12 max e``) and the residual is ``t - sum_k rr_k^2 / e_k`` over
    them.  With ``rank >= n - 1`` (``n`` rows, centred) or a zero residual the
    inputs reproduce the centred targets exactly, and the evidence grows without
    bound in the noise precision.

    Returns
    -------
    rank : int
    rss : float
    """
    xp = array_namespace(spec["e"])
    e, rr, t = spec["e"], spec["rr"], spec["t"]
    if e.shape[0] == 0:
        return 0, float(t)
    keep = e > 1e-12 * float(xp.max(e))
    fitted = float(xp.sum(xp.where(keep, rr * rr / xp.where(keep, e, 1.0), 0.0)))
    return int(xp.sum(keep)), max(float(t) - fitted, 0.0)


def log_evidence(stats, prior_precision, noise_precision, *, spec=None):
    """Log marginal likelihood ``log p(y | X, alpha, lam)`` with the intercept integrated out.

    Parameters
    ----------
    stats : LinearGaussianStats
    prior_precision : float
        ``lam``, precision of each weight.
    noise_precision : float
        ``alpha``, precision of the observation noise.
    spec : dict, optional
        :func:`spectrum` of ``stats``, to reuse.
    """
    xp = array_namespace(stats.xx)
    spec = spectrum(stats) if spec is None else spec
    e, rr, t = spec["e"], spec["rr"], spec["t"]
    lam, alpha, n_eff = float(prior_precision), float(noise_precision), stats.n - 1.0
    denom = lam + alpha * e
    # Posterior mean in the eigenbasis: m' = alpha r' / (lam + alpha e).
    # Residual + prior energy  alpha ||y - X m||^2 + lam ||m||^2
    #   = alpha t - alpha^2 sum r'^2 / (lam + alpha e).
    energy = alpha * t - alpha * alpha * float(xp.sum(rr * rr / denom))
    d = e.shape[0]
    return (
        0.5 * d * math.log(lam)
        + 0.5 * n_eff * math.log(alpha)
        - 0.5 * float(xp.sum(xp.log(denom)))
        - 0.5 * energy
        - 0.5 * n_eff * math.log(2.0 * math.pi)
        - 0.5 * math.log(stats.n)
    )


def log_evidence_grad(stats, prior_precision, noise_precision, *, spec=None):
    """Gradient of :func:`log_evidence` with respect to ``(log lam, log alpha)``."""
    xp = array_namespace(stats.xx)
    spec = spectrum(stats) if spec is None else spec
    e, rr, t = spec["e"], spec["rr"], spec["t"]
    lam, alpha, n_eff = float(prior_precision), float(noise_precision), stats.n - 1.0
    r2 = rr * rr
    inv = 1.0 / (lam + alpha * e)
    d = e.shape[0]
    d_lam = (
        0.5 * d / lam - 0.5 * float(xp.sum(inv)) - 0.5 * alpha**2 * float(xp.sum(r2 * inv * inv))
    )
    d_alpha = (
        0.5 * n_eff / alpha
        - 0.5 * float(xp.sum(e * inv))
        - 0.5 * t
        + alpha * float(xp.sum(r2 * inv))
        - 0.5 * alpha**2 * float(xp.sum(r2 * e * inv * inv))
    )
    return lam * d_lam, alpha * d_alpha


_LOG_BOUND = 30.0
#: The search interval of :func:`maximize_evidence` is ``[1 / PRECISION_BOUND, PRECISION_BOUND]``.
PRECISION_BOUND = math.exp(_LOG_BOUND)


def maximize_evidence(stats, prior_precision=None, noise_precision=None, *, spec=None):
    """Type-II maximum likelihood of the precisions left as None.

    Maximises the exact :func:`log_evidence` over the logarithms of the free
    precisions with L-BFGS-B and the analytic gradient, reusing one
    eigendecomposition, to a gradient norm of about 1e-10, within
    ``[exp(-30), exp(30)]`` (``PRECISION_BOUND``: a result on the bound is
    the bound, not a maximum).

    Returns
    -------
    prior_precision, noise_precision : float
    """
    from scipy.optimize import minimize

    spec = spectrum(stats) if spec is None else spec
    t = spec["t"]
    fixed = (prior_precision, noise_precision)
    free = [p is None for p in fixed]
    if not any(free):
        return float(prior_precision), float(noise_precision)
    n_eff = max(stats.n - 1.0, 1.0)
    # Start from "explain half the variance" in standardised units.
    start = (1.0, 2.0 * n_eff / max(t, 1e-12))

    def unpack(z):
        it = iter(z)
        return [math.exp(next(it)) if f else float(p) for f, p in zip(free, fixed)]

    def objective(z):
        lam, alpha = unpack(z)
        grad = log_evidence_grad(stats, lam, alpha, spec=spec)
        return -log_evidence(stats, lam, alpha, spec=spec), [-g for g, f in zip(grad, free) if f]

    z0 = [math.log(v) for v, f in zip(start, free) if f]
    res = minimize(
        objective,
        z0,
        jac=True,
        method="L-BFGS-B",
        bounds=[(-_LOG_BOUND, _LOG_BOUND)] * len(z0),
        options=dict(ftol=0.0, gtol=1e-10, maxiter=500),
    )
    z = res.x
    # Polish: the evidence is flat near its maximum, so a line search stalls at a
    # gradient of ~1e-7; solving gradient = 0 directly pins the precisions down to
    # rounding, which makes batch and streaming fits agree to ~1e-12.
    if all(abs(v) < _LOG_BOUND - 1.0 for v in z):
        from scipy.optimize import root

        def gradient(zz):
            g = log_evidence_grad(stats, *unpack(zz), spec=spec)
            return [gi for gi, f in zip(g, free) if f]

        def worst(zz):
            return max(abs(g) for g in gradient(zz))

        # (root may report no success yet have reached a far smaller gradient;
        # it is unbounded, and along a flat direction it can run past the bounds,
        # as far as exp over- or underflows: the L-BFGS-B result then stands)
        try:
            sol = root(gradient, z, method="hybr", tol=1e-14)
        except ArithmeticError:
            sol = None
        if (sol is not None and all(abs(v) <= _LOG_BOUND for v in sol.x)
                and worst(sol.x) < worst(z)
                and -objective(sol.x)[0] >= -res.fun - 1e-9 * abs(res.fun)):
            z = sol.x
    return tuple(unpack(z))


def posterior(stats, prior_precision, noise_precision, *, spec=None):
    """Posterior of ``(b, w)``.

    Returns
    -------
    dict with ``coef_mean`` (d,), ``coef_cov`` (d, d), ``intercept_mean``,
    ``x_mean`` (d,) and ``intercept_var`` (the ``1/(n alpha)`` term), all in the
    caller's units.  The intercept's posterior given ``w`` is
    ``N(y_bar - x_bar^T w, 1/(n alpha))``.
    """
    spec = spectrum(stats) if spec is None else spec
    x_bar, y_bar, e, U = spec["x_bar"], spec["y_bar"], spec["e"], spec["U"]
    lam, alpha = float(prior_precision), float(noise_precision)
    inv = 1.0 / (lam + alpha * e)
    cov = (U * inv) @ U.T
    cov = 0.5 * (cov + cov.T)
    mean = alpha * (U @ (inv * spec["rr"]))
    return dict(
        coef_mean=mean,
        coef_cov=cov,
        intercept_mean=y_bar - float(x_bar @ mean),
        x_mean=x_bar,
        y_mean=y_bar,
        intercept_var=1.0 / (stats.n * alpha),
    )


def predictive(post, X, noise_precision):
    """Predictive mean, epistemic and aleatoric variance at rows ``X``.

    ``Var = (x - x_bar)^T C (x - x_bar) + 1/(n alpha)`` (epistemic) plus ``1/alpha``
    (aleatoric); the intercept is correlated with ``w`` only through ``x_bar``,
    which the centring absorbs exactly.
    """
    xp = array_namespace(X)
    Xc = X - post["x_mean"]
    mean = Xc @ post["coef_mean"] + post["y_mean"]
    epi = xp.sum((Xc @ post["coef_cov"]) * Xc, axis=1) + post["intercept_var"]
    ale = xp.full(X.shape[0], 1.0 / float(noise_precision))
    return mean, xp.maximum(epi, 0.0), ale
