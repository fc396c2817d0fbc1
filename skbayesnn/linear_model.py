"""Exact Bayesian linear regression on the shared base and core."""

from __future__ import annotations

import math
from numbers import Real

import numpy as np
from sklearn.exceptions import ConvergenceWarning
from sklearn.utils._param_validation import Interval, StrOptions

from ._backend import asnumpy
from .base import (
    MAX_SCALE,
    BaseBayesianRegressor,
    PartialFitMixin,
    give_warnings,
    held_warnings,
    warn_user,
)
from .core import linear_gaussian as lg


class BayesianLinearRegressor(PartialFitMixin, BaseBayesianRegressor):
    """Bayesian linear regression with an exact, streaming posterior.

    The model, on standardised inputs and targets, is
    ``y = b + x^T w + eps`` with ``eps ~ N(0, 1/noise_precision)``,
    ``w ~ N(0, I/prior_precision)`` and a flat prior on the intercept ``b``.  The
    posterior and the predictive are exact Gaussians.  Precisions set to
    ``"auto"`` are chosen by maximising the exact marginal likelihood (type-II
    maximum likelihood, "evidence"), as :class:`sklearn.linear_model.BayesianRidge`
    does with its fixed-point iterations (the prior is on the standardised
    weights, and integrating the intercept out gives a noise variance about
    ``(n - g) / (n - 1 - g)`` times ``BayesianRidge``'s on standardised
    features, ``g`` the effective number of parameters: ``n / (n - 1)`` for
    ``g`` far below ``n``).

    Unlike ``BayesianRidge``, the predictive variance includes the intercept's
    posterior variance ``1/(n * noise_precision)``, and ``partial_fit`` updates the
    posterior exactly from sufficient statistics: feeding the data in batches gives
    the same posterior as one batch (for the standardisation fixed by the first
    batch).

    Parameters
    ----------
    prior_precision : float > 0 or "auto", default="auto"
        Precision of each weight on standardised features, in units of the
        standardised target.
    noise_precision : float > 0 or "auto", default="auto"
        Precision of the observation noise of the standardised target
        (``noise_precision = 4`` means a noise standard deviation of half the
        target's standard deviation).
    device : {"cpu", "cuda", "auto"}, default="cpu"
        Where the linear algebra runs (NumPy or CuPy).
    random_state : int, RandomState instance or None, default=None
        Unused by the exact computation; kept for a uniform interface.
    verbose : int, default=0
        Print the chosen precisions when positive.

    Attributes
    ----------
    coef_ : ndarray of shape (n_features,)
        Posterior mean of the weights, in original units.
    intercept_ : float
        Posterior mean of the intercept, in original units.
    coef_cov_ : ndarray of shape (n_features, n_features)
        Posterior covariance of the weights, in original units.
    prior_precision_, noise_precision_ : float
        The precisions used (fixed or fitted), in standardised units.
    log_evidence_ : float
        Log marginal likelihood of the standardised targets at those precisions.
    stats_ : LinearGaussianStats
        Sufficient statistics of the standardised data seen so far.
    posterior_ : dict
        Posterior of the standardised model (see
        :func:`skbayesnn.core.linear_gaussian.posterior`).
    n_features_in_, n_outputs_ : int
    x_scaler_, y_scaler_ : StandardScaler
    device_ : {"cpu", "cuda"}

    See Also
    --------
    sklearn.linear_model.BayesianRidge : the same model with evidence
        maximisation, a plug-in intercept and no ``partial_fit``.

    Examples
    --------
    >>> import numpy as np
    >>> from skbayesnn import BayesianLinearRegressor
    >>> rng = np.random.default_rng(0)
    >>> X = rng.normal(size=(200, 3))
    >>> y = X @ [1.0, -2.0, 0.5] + 0.1 * rng.normal(size=200)
    >>> reg = BayesianLinearRegressor().fit(X, y)
    >>> mean, std = reg.predict(X[:2], return_std=True)
    >>> reg.predict_dist(X[:2]).interval(0.95)[0].shape
    (2,)
    """

    @property
    def _fixed_noise_param(self):
        # a numeric noise_precision is not learned (base._warn_if_noise_too_small)
        return None if isinstance(self.noise_precision, str) else "noise_precision"

    def _noise_remedy(self, name):
        return ('.  Leave noise_precision="auto" (the evidence then sets it), or choose it by '
                "cross-validation.")

    _parameter_constraints: dict = {
        **BaseBayesianRegressor._parameter_constraints,
        "prior_precision": [Interval(Real, 0, MAX_SCALE, closed="right"), StrOptions({"auto"})],
        "noise_precision": [Interval(Real, 0, MAX_SCALE, closed="right"), StrOptions({"auto"})],
    }

    def __init__(
        self,
        *,
        prior_precision="auto",
        noise_precision="auto",
        device="cpu",
        random_state=None,
        verbose=0,
    ):
        self.prior_precision = prior_precision
        self.noise_precision = noise_precision
        self.device = device
        self.random_state = random_state
        self.verbose = verbose

    _device_attributes = ("stats_", "posterior_")

    def _fit_scaled(self, X, Y, xp, rng):
        self._update_posterior(lg.LinearGaussianStats.from_data(X, Y[:, 0]))

    def _init_online(self, n_features, n_outputs, xp, rng):
        self.stats_ = None

    def _partial_fit_scaled(self, X, Y, xp, rng):
        restore = self._snapshot()  # (_update_posterior rebinds its attributes)
        with np.errstate(over="ignore", invalid="ignore"):  # checked just below
            batch = lg.LinearGaussianStats.from_data(X, Y[:, 0])
            stats = batch if self.stats_ is None else self.stats_ + batch
        if not stats.is_finite():
            self._refuse_batch("this batch's sums of squares overflow in float64", restore)
        # Finite statistics can still overflow the evidence and give a predictive
        # that overflows in y's units (a first batch at 1e150, then one at 1e303):
        # checked on the result; the update's warnings are given only for a
        # batch that is kept.
        with held_warnings() as held, np.errstate(over="ignore", invalid="ignore"):
            self._update_posterior(stats)
        fitted = (self.log_evidence_, self.prior_precision_, self.noise_precision_)
        if not all(math.isfinite(v) for v in fitted):
            self._refuse_batch("with this batch the evidence overflows in float64", restore)
        self._check_batch_predictable(X, xp, restore)
        give_warnings(held)

    def _update_posterior(self, stats):
        """Compute the posterior from ``stats``; state changes only on success."""
        fixed = [
            None if p == "auto" else float(p) for p in (self.prior_precision, self.noise_precision)
        ]
        if stats.n < 2 and fixed[1] is None:
            raise ValueError(
                "noise_precision='auto' needs at least 2 samples to estimate the noise; "
                f"got {int(stats.n)}. Pass more data or a numeric noise_precision."
            )
        spec = lg.spectrum(stats)
        rank, rss = spec["rank"], spec["rss"]
        auto_noise = fixed[1] is None and spec["t"] > 0
        # Interpolation (rank n - 1 of the centred rows) leaves no residual to
        # estimate the noise from; noise-free targets at a lower rank make the
        # evidence grow without bound in the noise precision (rounding leaves
        # rss ~1e-13 t there, and fits with a noise std down to 1e-6 of the
        # target's, rss ~1e-12 t, are still fine).
        interpolating = rank >= stats.n - 1
        noise_free = not interpolating and rss <= 1e-14 * spec["t"]
        if auto_noise and noise_free:
            warn_user(
                "The inputs reproduce the centred targets exactly (noise-free targets), so "
                "the evidence has no maximum in the noise precision: the fitted noise level "
                "is the search bound, a standard deviation of about 3e-7 of the targets', "
                "not an estimate; pass a numeric noise_precision if the targets are noisy.",
                ConvergenceWarning,
            )
        lam, alpha = lg.maximize_evidence(stats, *fixed, spec=spec)
        # The noise precision on a bound of the search: no maximum found.  The lower
        # one is only reachable through partial_fit: y is scaled by the first
        # batch, so a later batch ~1e6 times wider puts the noise beyond it.
        at_bound = None
        if auto_noise and interpolating:
            bound = ", the search bound" if alpha >= lg.PRECISION_BOUND * (1.0 - 1e-9) else ""
            warn_user(
                "The inputs interpolate the centred targets (as when n_features >= "
                "n_samples - 1): no residual is left to estimate the noise from, so the "
                f"fitted noise precision ({alpha:.4g}{bound}) rests on the weights' prior "
                "alone; pass a numeric noise_precision or more samples.",
                ConvergenceWarning,
            )
        elif fixed[1] is None and not noise_free and alpha >= lg.PRECISION_BOUND * (1.0 - 1e-9):
            at_bound = (lg.PRECISION_BOUND, "may overstate the noise (targets within about "
                        "1e-6 of a linear fit); pass a numeric noise_precision.")
        elif fixed[1] is None and alpha <= (1.0 + 1e-9) / lg.PRECISION_BOUND:
            at_bound = (1 / lg.PRECISION_BOUND, "understates the noise (targets spread over "
                        "about 1e6 times the scale of the first partial_fit batch, which y is "
                        "scaled by); pass a numeric noise_precision or fit all the data at once.")
        if at_bound is not None:
            warn_user(
                f"The evidence still increases at the search bound {at_bound[0]:.4g} of the "
                "noise precision: the fitted noise level is that bound, not a maximum, and "
                f"{at_bound[1]}",
                ConvergenceWarning,
            )
        self.stats_ = stats
        self.prior_precision_, self.noise_precision_ = lam, alpha
        self.log_evidence_ = lg.log_evidence(stats, lam, alpha, spec=spec)
        self.posterior_ = lg.posterior(stats, lam, alpha, spec=spec)
        self._log(f"prior_precision={lam:.4g}, noise_precision={alpha:.4g}")
        # Coefficients in original units: y = y_mean + s_y (b + ((x - m_x)/s_x)^T w).
        s_x, m_x = self.x_scaler_.scale_, self.x_scaler_.mean_
        s_y, m_y = self.y_scaler_.scale_[0], self.y_scaler_.mean_[0]
        w = asnumpy(self.posterior_["coef_mean"])
        factor = s_y / s_x
        self.coef_ = w * factor
        self.intercept_ = float(m_y + s_y * self.posterior_["intercept_mean"] - self.coef_ @ m_x)
        self.coef_cov_ = asnumpy(self.posterior_["coef_cov"]) * np.outer(factor, factor)

    def _predict_moments_scaled(self, X, xp):
        mean, epi, ale = lg.predictive(self.posterior_, X, self.noise_precision_)
        return mean[:, None], epi[:, None], ale[:, None]
