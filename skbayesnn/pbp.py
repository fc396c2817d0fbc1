"""PBP estimator: probabilistic backpropagation for Bayesian MLP regression."""

from __future__ import annotations

import math
from numbers import Integral

import numpy as np
from sklearn.exceptions import ConvergenceWarning
from sklearn.utils._param_validation import Interval, StrOptions
from sklearn.utils.validation import check_is_fitted

from ._backend import asnumpy
from .base import (
    MIN_SCALE,
    BaseBayesianRegressor,
    check_hidden_layer_sizes,
    PartialFitMixin,
    warn_user,
)
from .distributions import GaussianMixturePredictive
from .inference import pbp, pbp_spike_slab


def _check_gamma_prior(value, name):
    """``(shape, rate)`` of a Gamma prior as two floats, shape > 1, rate > 0."""
    try:
        shape, rate = (float(v) for v in value)
    except (TypeError, ValueError):
        raise ValueError(
            f"{name} must be a pair (shape, rate) of numbers, got {value!r}."
        ) from None
    if not (math.isfinite(shape) and math.isfinite(rate) and shape > 1.0 and rate > 0.0
            and rate / (shape - 1.0) >= MIN_SCALE**2):
        raise ValueError(
            f"{name} = (shape, rate) needs a finite shape > 1 (so that the prior mean of "
            f"the variance, rate / (shape - 1), exists), a finite rate > 0 and that mean "
            f"at least {MIN_SCALE**2:g}; got {value!r}."
        )
    if shape > _MAX_GAMMA_SHAPE:
        # Minka's update (pbp.md §3.3) divides by exp(second difference of log Z)
        # (a + 1)/a - 1 ~ 1/a: rounding of ~1e-16 there moves a by ~1e-16 a^2 per
        # update, the data's own move being 1/2 (a pinned (1e14, 1.2e14) noise
        # prior drifted from variance 1.2 to 0.16 in five epochs).
        raise ValueError(
            f"{name} has shape {shape:g}; shapes above {_MAX_GAMMA_SHAPE:g} lose the "
            "precision of PBP's Gamma updates (rounding moves the shape by ~1e-16 "
            "shape^2 per update). Use a shape up to 1e6 (e.g. (1e6, 1e6 * variance) to "
            "hold a variance nearly fixed)."
        )
    return shape, rate


_MAX_GAMMA_SHAPE = 1e6


class PBPRegressor(PartialFitMixin, BaseBayesianRegressor):
    """Bayesian MLP regression by probabilistic backpropagation (PBP).

    PBP (Hernández-Lobato & Adams, 2015) is assumed-density filtering for a ReLU
    network with an independent Gaussian over every weight: each training point
    in turn is propagated forward with exact moment matching of the ReLUs, and
    every weight's mean and variance is updated from the gradients of the
    point's log marginal likelihood; the noise precision has a Gamma posterior
    updated after every point, and after each epoch an expectation-propagation
    sweep refines the shared prior precision of the weights
    (shared/methods/pbp.md §1-5).  With ``spike_and_slab=True`` the messages
    between layers are spike-and-slab distributions (Ott & Williamson 2022,
    pbp.md §6); with bias units this is provably the same algorithm as PBP,
    without biases it differs.

    Parameters
    ----------
    hidden_layer_sizes : int or tuple of int, default=(50,)
        ReLU units of each hidden layer.
    max_epochs : int, default=40
        Passes over the training data in ``fit`` (the reference's 40, with no
        early stopping, pbp.md §4.1).
    prior : (float, float), default=(6.0, 6.0)
        ``(shape, rate)`` of the Gamma prior on the weights' shared precision;
        the prior mean of the weight variance is ``rate / (shape - 1) = 1.2``
        (pbp.md §1.2).  Weights act on inputs scaled by ``1/sqrt(fan-in + 1)``.
        Shapes above 1e6 are refused (for both priors): rounding then swamps
        PBP's Gamma updates.
    noise_prior : (float, float), default=(6.0, 6.0)
        ``(shape, rate)`` of the Gamma prior on the noise precision, in units of
        the standardised target (prior mean noise variance 1.2).
    spike_and_slab : bool, default=False
        Spike-and-slab messages (SSPBP, pbp.md §6): each unit's message is a
        point mass at 0 plus a Gaussian slab.  With ``fit_bias=True`` the
        updates and predictions are exactly PBP's (§6.6); without biases they
        differ and the predictive is a two-component mixture.
    fit_bias : bool, default=True
        Give every layer a bias unit.  ``False`` is the bias-free network of the
        SSPBP study (pbp.md §6.7), where spike-and-slab messages differ from
        Gaussian ones.
    batch_size : int, default=1
        Points per update.  1 is PBP: strictly sequential, run by a compiled
        CPU kernel.  Larger values combine the updates of each batch's points,
        all computed from the same posterior, as independent sites in natural
        parameters (parallel ADF; see :mod:`skbayesnn.inference.pbp`): fewer,
        larger array operations for a GPU, an approximation of PBP.  Where
        the points agree the summed update overshoots; a batch whose update
        moves the outputs away from its targets is undone and its halves are
        processed in turn (``n_split_``), as in TAGI.
    shuffle : bool, default=True
        A fresh random order of the rows every epoch of ``fit``.
    refine_prior : "fit" or bool, default="fit"
        Run the EP sweep over the prior factors (pbp.md §4) after every epoch of ``fit``
        ("fit"), also after every ``partial_fit`` call (True), or never (False).  The
        reference sweeps after every pass over the data, and a ``partial_fit`` call is one
        pass over its batch.  After few passes the sweep mostly hurts
        (``benchmarks/pbp_prior_sweep.py``: diabetes, 300 training rows, five row orders,
        test R^2 better with the sweep than without after one epoch of ``fit`` in 0 of 5
        orders (-2.15 against 0.45 in the first), after two in 2, after five in 5 (by up to
        0.05), after forty in 4 (by 0.01 or less); after ``partial_fit`` streams of 1 x 300,
        2 x 150, 10 x 30 and 100 x 3 rows in 0, 0, 2 and 0 of 5, with R^2 down to -2.07).
        On the cubic stream of ``examples/plot_pbp_regression.py`` (40 calls of 100 rows)
        the sweeps gave a slightly better test NLPD, 2.616 against 2.636.  ``fit`` with one
        epoch still sweeps, as the reference does: set False there.  A sweep that changes
        the prior's mean weight variance more than 10 fold is discarded
        (``n_prior_sweeps_rejected_``); those that are kept can still compound over a stream
        (a reviewer's stream of single rows of UCI concrete raised ``E[1/lambda]`` from 1.2
        to 7e5 in three passes, test RMSE 13.7 against 9.9 without sweeps).
    warm_start : bool, default=False
        When True, ``fit`` continues from the current posterior (another
        ``max_epochs`` epochs, the reference's ``re_train``), keeping the
        standardisation learned by the first fit.  The network's shape
        (``hidden_layer_sizes``, ``fit_bias``, ``spike_and_slab``) must then
        be unchanged, and so must ``prior``, ``noise_prior`` and ``device``,
        which only set up a new posterior (a ValueError otherwise, as for a
        later ``partial_fit``).  Data the model cannot take (a row of zero
        likelihood, a predictive that would overflow) are refused with a
        ValueError and leave the model as it was, as ``partial_fit`` does.
    device : {"cpu", "cuda", "auto"}, default="cpu"
        Where fitting and prediction run: NumPy on the CPU, CuPy on a CUDA GPU
        (an error when CuPy or a GPU is missing).  ``"auto"`` is the GPU when
        there is one and ``batch_size > 1``, else the CPU: with
        ``batch_size=1`` PBP takes one point at a time, which the CPU runs in
        a compiled kernel and a GPU as many small array operations per point.
    random_state : int, RandomState instance or None, default=None
        Seeds the initial weight means and the shuffling.
    verbose : int, default=0
        Progress on stdout: 1 a summary after fitting, 2 also a line per epoch.

    Attributes
    ----------
    spike_and_slab_ : bool
        The messages the model was trained with (``fit`` or the first
        ``partial_fit``); training and prediction read it, so
        ``set_params(spike_and_slab=...)`` takes effect at the next ``fit``.
    state_ : PBPState
        Weight means and variances per layer (bias in the last column, inputs
        scaled by ``1/sqrt(n_columns)``), the Gamma posteriors of the noise and
        prior precisions and the prior factors, in standardised units.
    posterior_ : GaussianMLPPosterior
        The weights as the library's common posterior (scaling folded in);
        ``propagate(posterior_, X_scaled, act_approx="moment_match")`` gives
        PBP's predictive moments.  A bias-free spike-and-slab model predicts
        with the spike-and-slab messages instead (``predict_dist`` is their
        mixture), whose moments differ from these Gaussian ones.
    noise_variance_ : float
        ``E[1/gamma] = beta / (alpha - 1)`` of the noise Gamma, in the target's
        original units (squared).
    n_iter_ : int
        Epochs run (``fit`` and ``partial_fit`` calls together).
    log_z_curve_ : list of float
        Mean ``log Z`` per point of every epoch (the predictive log density of
        each point just before its update), in the target's original units.
    n_rejected_ : int
        Weight updates rejected because the new variance was not positive and
        finite (pbp.md §4.4).
    n_noise_rejected_ : int
        Noise-Gamma updates of PBP's Gaussian stand-in not applied: for a
        residual beyond the noise sd, invalid ones or ones that overshoot the
        exact update of a zero output variance are replaced by that update (an
        outlier, mostly; with a near-zero output variance also ordinary
        residuals of 1.3 noise sds or more, where the two updates agree to
        ~1e-6); elsewhere invalid ones are discarded
        (:func:`skbayesnn.inference.pbp.guard_noise_update`).
    n_prior_skipped_ : int
        Prior factors left unchanged by the EP guards.
    n_split_ : int
        Batches (``batch_size > 1``) undone and split into halves because
        their combined update overshot, over all epochs.
    n_prior_sweeps_rejected_ : int
        EP sweeps over the prior factors discarded because they changed the
        prior's mean weight variance ``E[1/lambda]`` more than 10 fold (a
        ``ConvergenceWarning`` says so the first time): with a prior much
        tighter than the default, or epochs of few rows (small ``partial_fit``
        batches with ``refine_prior=True``), the reference's sweep diverges
        (pbp.md §3.4, §4.2); those epochs train as with
        ``refine_prior=False``.  Full fits on the UCI
        data at the default prior discard none.
    n_features_in_, n_outputs_, x_scaler_, y_scaler_, device_

    See Also
    --------
    TAGIRegressor : gradient-free Gaussian inference with batched updates.

    Notes
    -----
    The predictive distribution is Gaussian, ``N(m, v + noise_variance_)``, with
    the model part ``v`` (epistemic) and the noise part (aleatoric) separate
    (pbp.md §5).

    Examples
    --------
    >>> import numpy as np
    >>> from skbayesnn import PBPRegressor
    >>> rng = np.random.default_rng(0)
    >>> X = rng.uniform(-2, 2, size=(200, 1))
    >>> y = np.sin(2 * X[:, 0]) + 0.1 * rng.normal(size=200)
    >>> reg = PBPRegressor(hidden_layer_sizes=(30,), max_epochs=10, random_state=0).fit(X, y)
    >>> mean, std = reg.predict(X[:3], return_std=True)
    """

    _parameter_constraints: dict = {
        **BaseBayesianRegressor._parameter_constraints,
        "hidden_layer_sizes": ["array-like", Interval(Integral, 1, None, closed="left")],
        "max_epochs": [Interval(Integral, 1, None, closed="left")],
        "prior": ["array-like"],
        "noise_prior": ["array-like"],
        "spike_and_slab": ["boolean"],
        "fit_bias": ["boolean"],
        "batch_size": [Interval(Integral, 1, None, closed="left")],
        "shuffle": ["boolean"],
        "refine_prior": ["boolean", StrOptions({"fit"})],
        "warm_start": ["boolean"],
    }

    _device_attributes = ("state_",)
    _creation_params = ("prior", "noise_prior")

    def __init__(
        self,
        hidden_layer_sizes=(50,),
        *,
        max_epochs=40,
        prior=(6.0, 6.0),
        noise_prior=(6.0, 6.0),
        spike_and_slab=False,
        fit_bias=True,
        batch_size=1,
        shuffle=True,
        refine_prior="fit",
        warm_start=False,
        device="cpu",
        random_state=None,
        verbose=0,
    ):
        self.hidden_layer_sizes = hidden_layer_sizes
        self.max_epochs = max_epochs
        self.prior = prior
        self.noise_prior = noise_prior
        self.spike_and_slab = spike_and_slab
        self.fit_bias = fit_bias
        self.batch_size = batch_size
        self.shuffle = shuffle
        self.refine_prior = refine_prior
        self.warm_start = warm_start
        self.device = device
        self.random_state = random_state
        self.verbose = verbose

    def _resolve_device(self):
        # one point at a time on a GPU: many small array operations per point
        if self.device == "auto" and self.batch_size == 1:
            return "cpu"
        return super()._resolve_device()

    # ------------------------------------------------------------------ fit
    def _warm_fit_scaled(self, X, Y, xp):
        """The epochs of a warm start (``fit`` with ``warm_start=True``), or a
        ValueError for data the model cannot take, which, as in
        ``partial_fit``, leave it as it was (a warm fit on y = 1e300 had been
        kept, and every prediction overflowed)."""
        restore = self._snapshot(log_z_curve_=list(self.log_z_curve_))
        try:
            self._train_warm(X, Y, xp)
        except BaseException:  # (an interrupt too)
            restore()
            raise

    def _train_warm(self, X, Y, xp):
        n_before = len(self.log_z_curve_)
        self._train(X, Y, xp, self._rng)
        if not (np.all(np.isfinite(self.log_z_curve_[n_before:])) and all(
                bool(np.all(np.isfinite(a))) for a in self._unscaled_moments(X[:1000], xp))):
            raise ValueError(
                "PBPRegressor.fit (warm start): a row has zero likelihood under the model "
                "or the predictive would overflow on the data's own rows, so the data are "
                "refused and the model is as it was.  They are far outside the scale of "
                "the first fit's data, which they are standardised with; rescale y (or X)."
            )

    def __setstate__(self, state):
        super().__setstate__(state)
        # A model pickled before spike_and_slab_ existed was trained with the
        # parameter's value.
        if "state_" in self.__dict__ and "spike_and_slab_" not in self.__dict__:
            self.spike_and_slab_ = bool(self.spike_and_slab)
        # ... and before n_split_ existed, no batch had been split
        if "state_" in self.__dict__ and "n_split_" not in self.__dict__:
            self.n_split_ = 0

    def _network_structure(self, fitted):
        if fitted:
            return {"hidden_layer_sizes": self.state_.layer_sizes[1:-1],
                    "fit_bias": self.state_.bias, "spike_and_slab": self.spike_and_slab_}
        return {"hidden_layer_sizes": check_hidden_layer_sizes(self.hidden_layer_sizes),
                "fit_bias": bool(self.fit_bias), "spike_and_slab": bool(self.spike_and_slab)}

    def _check_warm_start(self):
        """The priors are valid, and the network the fitted one."""
        _check_gamma_prior(self.prior, "prior")
        _check_gamma_prior(self.noise_prior, "noise_prior")
        super()._check_warm_start()

    def _init_online(self, n_features, n_outputs, xp, rng):
        self.spike_and_slab_ = bool(self.spike_and_slab)
        prior_shape, prior_rate = _check_gamma_prior(self.prior, "prior")
        noise_shape, noise_rate = _check_gamma_prior(self.noise_prior, "noise_prior")
        sizes = [n_features, *check_hidden_layer_sizes(self.hidden_layer_sizes), n_outputs]
        self.state_ = pbp.init_state(
            sizes,
            rng=rng,
            xp=xp,
            alpha_prior=prior_shape,
            beta_prior=prior_rate,
            alpha_noise=noise_shape,
            beta_noise=noise_rate,
            bias=self.fit_bias,
        )
        self.n_iter_ = 0
        self.log_z_curve_ = []
        self.n_rejected_ = 0
        self.n_noise_rejected_ = 0
        self.n_prior_skipped_ = 0
        self.n_prior_sweeps_rejected_ = 0
        self.n_split_ = 0

    def _fit_scaled(self, X, Y, xp, rng):
        self._init_online(X.shape[1], Y.shape[1], xp, rng)
        self._train(X, Y, xp, rng)

    def _train(self, X, Y, xp, rng):
        """``max_epochs`` epochs on standardised data, from the current state."""
        n = X.shape[0]
        for _ in range(self.max_epochs):
            order = rng.permutation(n) if self.shuffle else np.arange(n)
            self._run_epoch(X, Y, order, xp)
        with np.errstate(over="ignore", invalid="ignore"):  # (a prior variance near 1e100)
            moments = self._predict_moments_scaled(X[:1000], xp)[:2]
        self._check_predicts_training_rows(
            moments, f"Check prior={self.prior!r} (its mean variance rate / (shape - 1) sets "
            "the weights' scale).")
        self._log(
            f"trained {self.n_iter_} epochs; noise variance {self.noise_variance_:.4g}; "
            f"{self.n_rejected_} weight updates rejected"
        )

    def _partial_fit_scaled(self, X, Y, xp, rng):
        # One pass over the batch in the given order, as one epoch of fit with
        # shuffle=False would do (with the EP sweep only for refine_prior=True).
        # run_epoch returns a new state; the curve is appended to in place.
        restore = self._snapshot(log_z_curve_=list(self.log_z_curve_))
        self._run_epoch(X, Y, np.arange(X.shape[0]), xp, online=True)
        if not np.isfinite(self.log_z_curve_[-1]):
            # Every update of such a row is rejected, but the noise and prior
            # updates would still move the model.
            self._refuse_batch("a row of this batch has zero likelihood under the model "
                               "(log Z = -inf)", restore)

    def _run_epoch(self, X, Y, order, xp, *, online=False):
        """One epoch (``pbp.run_epoch``; ``online``: a ``partial_fit`` call)
        and its bookkeeping, with a warning for the first discarded prior
        sweep (in ``partial_fit`` and a warm start held until the batch is
        kept: ``base.held_warnings``)."""
        sweep = (not online) if isinstance(self.refine_prior, str) else bool(self.refine_prior)
        self.state_, info = pbp.run_epoch(
            self.state_,
            X,
            Y[:, 0],
            order if xp is np else xp.asarray(order),
            batch_size=self.batch_size,
            spike_slab=self.spike_and_slab_,
            refine=sweep,
        )
        self.n_iter_ += 1
        self.n_rejected_ += info["n_rejected"]
        self.n_noise_rejected_ += info["n_noise_rejected"]
        self.n_prior_skipped_ += info["n_skipped"]
        self.n_split_ += info["n_split"]
        self.n_prior_sweeps_rejected_ += info["prior_sweep_rejected"]
        # log Z of a standardised target; original units: minus log(scale).
        self.log_z_curve_.append(
            info["log_z"] / X.shape[0] - float(np.log(self.y_scaler_.scale_[0]))
        )
        self._log(f"epoch {self.n_iter_}: mean log Z {self.log_z_curve_[-1]:.4f}", level=2)
        # once since the model was set up (fit, or the first partial_fit)
        if info["prior_sweep_rejected"] and self.n_prior_sweeps_rejected_ == 1:
            self._warn_prior_sweep()

    def _warn_prior_sweep(self):
        warn_user(
            "PBPRegressor: an EP sweep over the prior factors changed the prior's mean "
            f"weight variance E[1/lambda] more than {pbp.MAX_PRIOR_SWEEP_RATIO:g} fold "
            "and was discarded (that epoch "
            "kept the prior as it was, as refine_prior=False would).  This happens when "
            "the rows of an epoch or partial_fit call say little about the weights (few "
            "rows, small online batches: refine_prior='fit' does not sweep after "
            "partial_fit calls) or the prior is much tighter than the default (6, 6); "
            "n_prior_sweeps_rejected_ counts the discarded sweeps.",
            ConvergenceWarning,
        )

    # -------------------------------------------------------------- predict
    def _mixture_output(self):
        # Spike-and-slab messages without biases: the output is a spike at 0 and
        # a slab (pbp.md §6.5, §6.7); with biases it is PBP's Gaussian (§6.6).
        return self.spike_and_slab_ and not self.state_.bias

    def predict_dist(self, X):
        """Predictive distribution at ``X``, in the target's original units.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)

        Returns
        -------
        dist : NormalPredictive or GaussianMixturePredictive
            PBP's Gaussian ``N(m, v + noise_variance_)`` with its
            ``epistemic_var`` (the weights) and ``aleatoric_var`` (the noise)
            parts.  With ``spike_and_slab=True`` and ``fit_bias=False``, the
            two-component mixture ``(1 - rho) N(y_mean, noise) + rho N(m, v +
            noise)`` of pbp.md §6.5, its spike at the training mean of ``y``
            (the standardised 0); ``aleatoric_var`` is the noise variance.
        """
        if not (hasattr(self, "state_") and self._mixture_output()):
            return super().predict_dist(X)
        X, _ = self._scaled_input(X)
        s = self.state_
        with np.errstate(over="ignore", invalid="ignore"):  # checked below
            rho, slab_mean, slab_var, _ = pbp_spike_slab.forward(
                s.means, s.variances, X, bias=False
            )
        rho, slab_mean, slab_var = (asnumpy(a)[:, 0] for a in (rho, slab_mean, slab_var))
        scale, shift = self.y_scaler_.scale_[0], self.y_scaler_.mean_[0]
        noise = self.noise_variance_
        means = np.column_stack([np.full_like(slab_mean, shift), slab_mean * scale + shift])
        variances = np.column_stack(
            [np.full_like(slab_var, noise), np.maximum(slab_var, 0.0) * scale**2 + noise]
        )
        weights = np.column_stack([1.0 - rho, rho])
        self._check_finite_prediction(X, means, variances, weights)
        return GaussianMixturePredictive(means, variances, weights, aleatoric_vars=noise)

    def slab_probabilities(self, X):
        """Slab probability of every layer's linear output (spike-and-slab only).

        ``rho = 1 - prod_i (1 - rho_i)`` over the layer's inputs: the
        probability that the pre-activation is not exactly 0 (pbp.md §6.3), the
        diagnostic of the SSPBP study's Table 3.2 (pbp.md §7.8).  Exactly 1
        everywhere with bias units.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)

        Returns
        -------
        rho : ndarray of shape (n_samples, n_layers)
            One column per weight layer, the output layer last.
        """
        check_is_fitted(self)
        if not self.spike_and_slab_:
            raise ValueError("slab_probabilities needs a model fitted with spike_and_slab=True.")
        X, _ = self._scaled_input(X)
        s = self.state_
        _, _, _, layer_rho = pbp_spike_slab.forward(s.means, s.variances, X, bias=s.bias)
        return np.column_stack([asnumpy(r) for r in layer_rho])

    def _predict_moments_scaled(self, X, xp):
        s = self.state_
        mean, model_var, noise_var = pbp.predictive_moments(
            s.means, s.variances, s.alpha_noise, s.beta_noise, X, bias=s.bias
        )
        return mean[:, None], model_var[:, None], xp.full((X.shape[0], 1), float(noise_var))

    @property
    def noise_variance_(self):
        check_is_fitted(self)
        s = self.state_
        return float(s.beta_noise) / (float(s.alpha_noise) - 1.0) * self.y_scaler_.scale_[0] ** 2

    @property
    def posterior_(self):
        check_is_fitted(self)
        return pbp.to_posterior(self.state_.means, self.state_.variances, bias=self.state_.bias)
