"""TAGIRegressor: tractable approximate Gaussian inference for MLP regression."""

from __future__ import annotations

from numbers import Integral, Real

import numpy as np
from sklearn.utils._param_validation import Interval, StrOptions

from .base import BaseBayesianRegressor, PartialFitMixin
from .core.activations import ACTIVATIONS
from .inference import tagi


class TAGIRegressor(PartialFitMixin, BaseBayesianRegressor):
    """Bayesian MLP regression by tractable approximate Gaussian inference.

    TAGI (Goulet, Nguyen & Amiri, 2021) keeps an independent Gaussian over every
    weight and bias and learns without gradients: each batch is propagated
    forward with the Gaussian multiplication approximation and linearised
    activations, the output is conditioned on the targets, and a layer-wise
    Kalman-smoother recursion updates the parameters (shared/methods/tagi.md
    §3–4).  The posterior after one batch is the prior for the next, so learning
    is online (``partial_fit``).

    Parameters
    ----------
    hidden_layer_sizes : tuple of int, default=(50,)
        Units of each hidden layer.
    activation : {"relu", "leaky_relu", "tanh", "sigmoid", "softplus"}, default="relu"
        Hidden activation (linearised at the mean, tagi.md §3.2).
    sigma_v : float > 0, default=0.3
        Standard deviation of the observation noise, in units of the
        standardised target (the paper's UCI values range from 0.07 to 0.74;
        tune it with ``GridSearchCV`` and an NLPD scorer).
    batch_size : int, default=10
        Rows per update; per-row contributions within a batch are summed
        (tagi.md §4.4).
    max_epochs : int, default=40
        Passes over the training data in ``fit``.
    gain_w : float > 0, default=0.25
        Prior weight variance ``gain_w / n_in`` (tagi.md §7: 0.25 in the UCI runs).
    gain_b : float > 0, default=0.01
        Prior bias variance.
    shuffle : bool, default=True
        Shuffle the rows before every epoch of ``fit``.
    device : {"cpu", "cuda", "auto"}, default="cpu"
    random_state : int, RandomState instance or None, default=None
        Seeds the prior means and the shuffling.
    verbose : int, default=0

    Attributes
    ----------
    posterior_ : GaussianMLPPosterior
        Means and variances of all weights and biases (standardised units).
    n_iter_ : int
        Epochs run by ``fit``.
    n_skipped_ : int
        Parameter updates skipped because a batch's summed update would have
        removed more than 99.9% of that parameter's variance (tagi.md §4.4 notes
        the reference code has no guard there).
    n_features_in_, n_outputs_, x_scaler_, y_scaler_, device_

    Examples
    --------
    >>> import numpy as np
    >>> from skbayesnn import TAGIRegressor
    >>> rng = np.random.default_rng(0)
    >>> X = rng.uniform(-2, 2, size=(200, 1))
    >>> y = np.sin(2 * X[:, 0]) + 0.1 * rng.normal(size=200)
    >>> reg = TAGIRegressor(hidden_layer_sizes=(30,), random_state=0).fit(X, y)
    >>> mean, std = reg.predict(X[:3], return_std=True)
    """

    _parameter_constraints: dict = {
        **BaseBayesianRegressor._parameter_constraints,
        "hidden_layer_sizes": ["array-like"],
        "activation": [StrOptions(set(ACTIVATIONS) - {"identity"})],
        "sigma_v": [Interval(Real, 0, None, closed="neither")],
        "batch_size": [Interval(Integral, 1, None, closed="left")],
        "max_epochs": [Interval(Integral, 1, None, closed="left")],
        "gain_w": [Interval(Real, 0, None, closed="neither")],
        "gain_b": [Interval(Real, 0, None, closed="neither")],
        "shuffle": ["boolean"],
    }

    _supports_multi_output = True
    _device_attributes = ("posterior_",)

    def __init__(
        self,
        hidden_layer_sizes=(50,),
        activation="relu",
        *,
        sigma_v=0.3,
        batch_size=10,
        max_epochs=40,
        gain_w=0.25,
        gain_b=0.01,
        shuffle=True,
        device="cpu",
        random_state=None,
        verbose=0,
    ):
        self.hidden_layer_sizes = hidden_layer_sizes
        self.activation = activation
        self.sigma_v = sigma_v
        self.batch_size = batch_size
        self.max_epochs = max_epochs
        self.gain_w = gain_w
        self.gain_b = gain_b
        self.shuffle = shuffle
        self.device = device
        self.random_state = random_state
        self.verbose = verbose

    def _hidden_sizes(self):
        sizes = list(np.atleast_1d(self.hidden_layer_sizes))
        if not sizes or any(
            isinstance(h, (bool, np.bool_)) or not isinstance(h, (Integral, np.integer)) or h < 1
            for h in sizes
        ):
            raise ValueError(
                "hidden_layer_sizes must be a non-empty sequence of positive integers, "
                f"got {self.hidden_layer_sizes!r}."
            )
        return [int(h) for h in sizes]

    def _init_online(self, n_features, n_outputs, xp, rng):
        sizes = [n_features, *self._hidden_sizes(), n_outputs]
        self.posterior_ = tagi.init_posterior(
            sizes, activation=self.activation, gain_w=self.gain_w, gain_b=self.gain_b, rng=rng, xp=xp
        )
        self.n_skipped_ = 0
        self.n_iter_ = 0

    def _run_epoch(self, X, Y, order, xp):
        self.n_skipped_ += tagi.run_epoch(
            self.posterior_, X, Y, self.sigma_v**2, batch_size=self.batch_size, order=xp.asarray(order)
        )

    def _fit_scaled(self, X, Y, xp, rng):
        self._init_online(X.shape[1], Y.shape[1], xp, rng)
        n = X.shape[0]
        for epoch in range(self.max_epochs):
            order = rng.permutation(n) if self.shuffle else np.arange(n)
            self._run_epoch(X, Y, order, xp)
            self.n_iter_ = epoch + 1
            self._log(f"epoch {epoch + 1}/{self.max_epochs}", level=2)
        self._log(f"trained {self.n_iter_} epochs; {self.n_skipped_} parameter updates skipped by the variance guard")

    def _partial_fit_scaled(self, X, Y, xp, rng):
        # One pass over the batch in the given order, as one epoch of fit with
        # shuffle=False would do.
        self._run_epoch(X, Y, np.arange(X.shape[0]), xp)

    def _predict_moments_scaled(self, X, xp):
        z_mean, z_var, _ = tagi.forward(self.posterior_, X)
        return z_mean, z_var, xp.full(z_mean.shape, float(self.sigma_v) ** 2)
