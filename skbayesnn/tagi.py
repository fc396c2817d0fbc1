"""TAGI estimators: approximate Gaussian inference for MLP regression and classification."""

from __future__ import annotations

from numbers import Integral, Real

import numpy as np
from sklearn.base import is_classifier
from sklearn.utils._param_validation import Interval, StrOptions

from .base import (
    MAX_SCALE,
    MIN_SCALE,
    BaseBayesianClassifier,
    BaseBayesianRegressor,
    PartialFitMixin,
    check_hidden_layer_sizes,
)
from ._backend import asnumpy, to_device
from .core.activations import ACTIVATIONS
from .inference import tagi


_TAGI_CONSTRAINTS = {
    "hidden_layer_sizes": ["array-like", Interval(Integral, 1, None, closed="left")],
    "activation": [StrOptions(set(ACTIVATIONS) - {"identity"})],
    "sigma_v": [Interval(Real, MIN_SCALE, MAX_SCALE, closed="both")],
    "batch_size": [Interval(Integral, 1, None, closed="left")],
    "max_epochs": [Interval(Integral, 1, None, closed="left")],
    "gain_w": [Interval(Real, 0, None, closed="neither")],
    "gain_b": [Interval(Real, 0, None, closed="neither")],
    "init": [StrOptions({"he", "xavier"})],
    "shuffle": ["boolean"],
    "max_abs_z": [Interval(Real, 0, None, closed="neither"), None],
}

_EARLY_STOPPING_CONSTRAINTS = {
    "early_stopping": ["boolean"],
    "validation_fraction": [Interval(Real, 0, 1, closed="neither")],
    "n_iter_no_change": [Interval(Integral, 1, None, closed="left")],
}


class _Diverged(ValueError):
    """A pass left the posterior not finite (the posterior is restored)."""


class _TAGIMixin:
    """Network construction and the epoch loop shared by the TAGI estimators."""

    _device_attributes = ("posterior_",)
    _creation_params = ("gain_w", "gain_b", "init", "max_abs_z")

    def _network_structure(self, fitted):
        if fitted:
            return {"hidden_layer_sizes": self.posterior_.layer_sizes[1:-1],
                    "activation": self.posterior_.hidden_activations}
        sizes = check_hidden_layer_sizes(self.hidden_layer_sizes)
        return {"hidden_layer_sizes": sizes, "activation": [self.activation] * len(sizes)}

    def _init_online(self, n_features, n_outputs, xp, rng):
        sizes = [n_features, *check_hidden_layer_sizes(self.hidden_layer_sizes), n_outputs]
        self.posterior_ = tagi.init_posterior(
            sizes,
            activation=self.activation,
            gain_w=self.gain_w,
            gain_b=self.gain_b,
            init=self.init,
            rng=rng,
            xp=xp,
        )
        self.n_combined_ = 0
        self.n_split_ = 0
        self.n_iter_ = 0

    def _noise_var(self, sigma_v, xp):
        """``sigma_v ** 2``: a float, or (the regressor) one per output, in
        namespace ``xp`` (CuPy refuses host operands)."""
        s = np.asarray(sigma_v, dtype=np.float64)
        # (a 0-d array passes the parameter check as array-like: -0.3 had been
        # used as 0.3, 0 as a noise-free predictive; a square that underflows
        # is 0 too)
        # (the classifier's is a float; it has no n_outputs_)
        if s.shape not in ((), (getattr(self, "n_outputs_", 1),)) or not np.all(
                (s >= MIN_SCALE) & (s <= MAX_SCALE)):
            raise ValueError(
                "sigma_v must be a float or one value per output "
                f"({getattr(self, 'n_outputs_', 1)} here), "
                f"each in [{MIN_SCALE:g}, {MAX_SCALE:g}]; got {sigma_v!r}."
            )
        return float(s) ** 2 if s.ndim == 0 else to_device(s**2, xp)

    def _epochs(self, n, rng):
        """Yield ``(epoch, order)`` for ``max_epochs`` passes, recording ``n_iter_``."""
        for epoch in range(self.max_epochs):
            order = rng.permutation(n) if self.shuffle else np.arange(n)
            self.n_iter_ = epoch + 1
            yield epoch, order

    def _train(self, X, Y, xp, rng, *, obs_mask=None, validation_score, strata=None):
        """Run the epochs of ``fit``, with early stopping if asked (tagi.md §6).

        ``validation_score(rows)`` scores the current posterior on the given
        rows of ``X`` (higher is better).  ``strata`` (the classifier's class
        indices) stratify the validation split (:func:`_stratified_holdout`).
        """
        self.validation_scores_ = []
        self.validation_indices_ = np.array([], dtype=np.intp)
        train = np.arange(X.shape[0])
        if self.early_stopping:
            n_val = max(1, int(round(self.validation_fraction * X.shape[0])))
            if n_val >= X.shape[0]:
                raise ValueError(
                    f"validation_fraction={self.validation_fraction} leaves no training rows "
                    f"out of {X.shape[0]}."
                )
            perm = rng.permutation(X.shape[0])
            if strata is not None:
                perm, n_val = _stratified_holdout(perm, strata, n_val)
            self.validation_indices_ = np.sort(perm[:n_val])
            # (shuffle=False keeps the rows' order: it matters to TAGI)
            train = perm[n_val:] if self.shuffle else np.sort(perm[n_val:])
            val = xp.asarray(perm[:n_val])
            best_score, best = -np.inf, None
        for epoch, order in self._epochs(len(train), rng):
            try:
                self._run_epoch(X, Y, train[order], xp, obs_mask=obs_mask)
            except _Diverged:
                if not (self.early_stopping and best is not None):
                    raise
                # early stopping keeps its best epoch, which a later diverging one cannot beat
                self._log(f"epoch {epoch + 1} diverged: stopping", level=1)
                break
            if not self.early_stopping:
                self._log(f"epoch {epoch + 1}/{self.max_epochs}", level=2)
                continue
            score = float(validation_score(val))
            self.validation_scores_.append(score)
            self._log(f"epoch {epoch + 1}: validation score {score:.4f}", level=2)
            if score > best_score:
                # Updates rebind the posterior's arrays rather than writing into
                # them, so a shallow copy is a snapshot.
                best_score, best, self.best_epoch_ = (
                    score,
                    self.posterior_.to_namespace(xp),
                    epoch + 1,
                )
            elif best is not None and epoch + 1 - self.best_epoch_ >= self.n_iter_no_change:
                break
        if self.early_stopping:
            if best is None:  # every score NaN or -inf: nothing to keep
                raise ValueError(
                    f"{type(self).__name__} training diverged: the validation score was not "
                    f"finite in any of {self.n_iter_} epochs (scores "
                    f"{self.validation_scores_[:3]}...).  Reduce gain_w / gain_b or "
                    "increase sigma_v."
                )
            self.posterior_ = best
        else:
            self.best_epoch_ = self.n_iter_
        with np.errstate(over="ignore", invalid="ignore"):
            moments = tagi.forward(self.posterior_, X[train[:1000]])
        self._check_predicts_training_rows(moments, "Reduce gain_w / gain_b or increase sigma_v.")
        self._log(
            f"trained {self.n_iter_} epochs (kept {self.best_epoch_}); "
            f"{self.n_combined_} parameter updates combined in information form; "
            f"{self.n_split_} overshooting batches split"
        )

    def _run_epoch(self, X, Y, order, xp, obs_mask=None):
        """One pass; a ValueError, with the posterior as before the pass, if
        the pass leaves it not finite."""
        # run_epoch rebinds the posterior's arrays (in its lists): new lists of
        # the same arrays are a snapshot
        before = self.posterior_._replace(lambda a: a)
        n_combined, n_split = tagi.run_epoch(
            self.posterior_,
            X,
            Y,
            self._noise_var(self.sigma_v, xp),
            batch_size=self.batch_size,
            order=xp.asarray(order),
            obs_mask=obs_mask,
        )
        if not self.posterior_.is_finite():
            self.posterior_ = before
            values, which = (("inputs", "X") if is_classifier(self)
                             else ("inputs or targets", "X or y"))
            raise _Diverged(
                f"{type(self).__name__} training diverged: the weight posterior is not "
                "finite after a pass over the data.  The updates overflow with "
                f"{values} far outside the training scale (partial_fit standardises every "
                f"batch as the first) or a very large gain_w / gain_b; rescale {which}, or "
                "reduce the gains."
            )
        self.n_combined_ += n_combined
        self.n_split_ += n_split


class TAGIRegressor(_TAGIMixin, PartialFitMixin, BaseBayesianRegressor):
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
    hidden_layer_sizes : int or tuple of int, default=(50,)
        Units of each hidden layer.
    activation : {"relu", "leaky_relu", "tanh", "sigmoid", "softplus"}, default="relu"
        Hidden activation (linearised at the mean, tagi.md §3.2);
        ``"leaky_relu"`` has slope 0.01 for negative inputs.
    sigma_v : float in [1e-150, 1e150] or array-like of shape (n_outputs,), default=0.3
        Standard deviation of the observation noise, in units of the
        standardised target (the paper's UCI values range from 0.07 to 0.74;
        tune it with ``GridSearchCV`` and an NLPD scorer); one per output
        where several targets are noisier than others (tagi.md §16).  Prediction reads
        it again at every call (the predictive's noise part): a value set
        after ``fit`` changes the predictive without refitting, while the
        posterior keeps what training with the old value learned.
    batch_size : int, default=10
        Rows per update; per-row contributions within a batch are summed
        (tagi.md §4.4).  The sum treats the rows as independent evidence, so a
        large batch can overshoot (move the batch's predictions past its
        targets); such a batch is undone and its halves are processed in turn
        (``n_split_`` counts them).
    max_epochs : int, default=40
        Passes over the training data in ``fit``.
    gain_w : float > 0, default=0.25
        Gain of the prior weight variance, ``gain_w / n_in`` with the default
        ``init`` (tagi.md §7: 0.25 in the UCI runs).  It is not a "vague
        prior" knob: TAGI linearises each unit at its mean, which a wide prior
        makes a poor approximation, and the fit degrades with no warning (a
        reviewer's sine: test R^2 0.96 at 0.25, -7.6 at 100).  Search it over
        values near 1 or below.
    gain_b : float > 0, default=0.01
        Prior bias variance.
    init : {"he", "xavier"}, default="he"
        Scaling of the prior weight variance: ``gain_w / n_in``, or
        ``gain_w * 2 / (n_in + n_out)`` (Glorot's, which the reference code uses
        with tanh and cdf activations; tagi.md §7).
    shuffle : bool, default=True
        Shuffle the rows before every epoch of ``fit``.
    max_abs_z : float > 0 or None, default=None
        Bound on the standardised training inputs: a feature whose standard
        deviation is below ``(max - min) / max_abs_z`` is scaled by that instead
        (see :func:`skbayesnn.base.fit_input_scaler`).  Useful for sparse or
        nearly constant features: 1 scales every feature by its training range,
        as the paper divides pixels by their range (tagi.md §12.3); None scales
        by the standard deviation alone (features constant in training are
        ignored either way).
    early_stopping : bool, default=False
        Hold out ``validation_fraction`` of the training rows, track their
        predictive log-likelihood after every epoch and keep the posterior of the
        best epoch (tagi.md §6: the epoch count acts as an empirical-Bayes choice).
        ``fit`` only: ``partial_fit`` trains on every row it is given, as
        sklearn's ``MLPRegressor`` does.
    validation_fraction : float in (0, 1), default=0.1
        Share of rows held out when ``early_stopping=True``.
    n_iter_no_change : int, default=10
        With early stopping, stop after this many epochs without a better
        validation log-likelihood.
    device : {"cpu", "cuda", "auto"}, default="cpu"
        Where fitting and prediction run: NumPy on the CPU, CuPy on a CUDA GPU
        (an error when CuPy or a GPU is missing), or the GPU when there is one.
    random_state : int, RandomState instance or None, default=None
        Seeds the prior means and the shuffling.
    verbose : int, default=0
        Progress on stdout: 1 a summary after fitting, 2 also a line per epoch.

    Attributes
    ----------
    posterior_ : GaussianMLPPosterior
        Means and variances of all weights and biases (standardised units).
    n_iter_ : int
        Epochs run (``fit`` and ``partial_fit`` calls together).
    best_epoch_ : int
        With early stopping, the epoch of ``fit`` whose posterior was kept
        (1-based); else the epochs of the last ``fit`` (later ``partial_fit``
        calls add to ``n_iter_`` only; a model trained by ``partial_fit``
        alone has none).
    validation_scores_ : list of float
        With early stopping, the mean validation log-likelihood per row after
        each epoch, in the target's original units; else empty.  Set by
        ``fit`` only (not by ``partial_fit``).
    validation_indices_ : ndarray of int
        With early stopping, the rows of the training data held out for
        validation (sorted); else empty.  Set by ``fit`` only.
    n_combined_ : int
        Parameter updates where a batch's summed update (the reference code's
        rule, tagi.md §4.4) would have removed more than 99.9% of that
        parameter's variance, so the rows' evidence was combined in information
        form instead (never a non-positive variance).
    n_split_ : int
        Batches (or half-batches) whose summed update overshot, leaving the
        batch's squared residual (weighted by the inverse predictive variance)
        larger than before; each was undone and its two halves were processed
        in turn.  Many splits mean ``batch_size`` is large for this
        ``sigma_v`` and prior (tagi.md §4.4, §13).
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

    _fixed_noise_param = "sigma_v"

    _parameter_constraints: dict = {
        **BaseBayesianRegressor._parameter_constraints,
        **_TAGI_CONSTRAINTS,
        **_EARLY_STOPPING_CONSTRAINTS,
        "sigma_v": [Interval(Real, MIN_SCALE, MAX_SCALE, closed="both"), "array-like"],
    }

    _supports_multi_output = True

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
        init="he",
        shuffle=True,
        max_abs_z=None,
        early_stopping=False,
        validation_fraction=0.1,
        n_iter_no_change=10,
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
        self.init = init
        self.shuffle = shuffle
        self.max_abs_z = max_abs_z
        self.early_stopping = early_stopping
        self.validation_fraction = validation_fraction
        self.n_iter_no_change = n_iter_no_change
        self.device = device
        self.random_state = random_state
        self.verbose = verbose

    def _fit_scaled(self, X, Y, xp, rng):
        noise_var = self._noise_var(self.sigma_v, xp)
        self._init_online(X.shape[1], Y.shape[1], xp, rng)
        # Validation LL in original units: the Jacobian of the target scaling.
        log_scale = float(np.sum(np.log(self.y_scaler_.scale_)))

        def validation_score(rows):
            ll = tagi.mean_log_likelihood(self.posterior_, X[rows], Y[rows], noise_var)
            return ll - log_scale

        self._train(X, Y, xp, rng, validation_score=validation_score)

    def _partial_fit_scaled(self, X, Y, xp, rng):
        # One pass over the batch in the given order, as one epoch of fit with
        # shuffle=False would do.
        # (the pass rebinds the posterior's arrays in its lists: new lists of the
        # same arrays are a snapshot, see _run_epoch)
        restore = self._snapshot(posterior_=self.posterior_._replace(lambda a: a))
        self._run_epoch(X, Y, np.arange(X.shape[0]), xp)
        self._check_batch_predictable(X, xp, restore)
        self.n_iter_ += 1

    def _predict_moments_scaled(self, X, xp):
        z_mean, z_var = tagi.forward(self.posterior_, X)
        noise_var = self._noise_var(self._prediction_param("sigma_v"), xp)
        return z_mean, z_var, xp.zeros(z_mean.shape) + noise_var


class TAGIClassifier(_TAGIMixin, BaseBayesianClassifier):
    """Bayesian MLP classification by TAGI with a hierarchical binary-tree output.

    Each of the K classes is a leaf of a binary tree of depth ``ceil(log2 K)``;
    the network has one output per internal node (K - 1 for a full tree, 11 for
    K = 10), trained with targets +-1 on the observed class's path only, and the
    class probability is the product of probit terms along the path, integrated
    over the Gaussian outputs (tagi.md §8, Eq. 24) and renormalised over the K
    classes.

    Parameters
    ----------
    hidden_layer_sizes : int or tuple of int, default=(100, 100)
    activation : {"relu", "leaky_relu", "tanh", "sigmoid", "softplus"}, default="relu"
        Hidden activation, as for :class:`TAGIRegressor` (``"leaky_relu"``:
        slope 0.01).
    sigma_v : float in [1e-150, 1e150], default=0.3
        Observation noise of the +-1 node targets (the paper's MNIST grid was
        0.1–0.4).  With ``proba_noise=True`` prediction reads it again at
        every call, as it reads ``alpha`` and ``proba_noise``: values set after
        ``fit`` change the probabilities without refitting.
    alpha : float > 0, default=1/3
        Scale of the probit link ``Phi(y / alpha)``.
    proba_noise : bool, default=True
        Add the observation noise ``sigma_v**2`` to the node outputs' variance
        in the probit integral of Eq. 24, as the reference code does
        (tagi.md §8).  A node's probability is then ``Phi(mean / sqrt(alpha**2
        + var + sigma_v**2))``, no sharper than ``Phi(|mean| / sigma_v)``
        whatever ``alpha``, and the model is underconfident unless ``sigma_v``
        is small: at the defaults a node fitted exactly to its target +-1 (no
        epistemic variance) gives ``Phi(2.23) = 0.987``, and a class of the
        ten-class tree (four nodes on its path) 0.96-0.97.  Tune ``alpha``
        and ``sigma_v`` by a validation log-loss (the README's digits
        benchmarks do), or set False.  With False
        the training noise only shapes the learning and ``alpha`` alone widens
        the link, so tuning ``alpha`` (with ``sigma_v`` fixed) acts like
        temperature scaling; training is the same either way, except with
        ``early_stopping=True``, whose validation log-loss (and so the epoch
        kept) reads it.
    batch_size : int, default=10
    max_epochs : int, default=40
    gain_w : float > 0, default=1.0
        Gain of the prior weight variance, ``gain_w / n_in`` with the default
        ``init`` (1 in the paper's MNIST runs).  As for
        :class:`TAGIRegressor`, not a "vague prior" knob: a wide prior makes
        TAGI's linearisation poor (three classes of two Gaussian features:
        test accuracy 0.96 at 1, 0.49 at 1000, where 40% of the training rows
        get a probability below 0.005 for their own label, which ``fit``
        warns of; ``benchmarks/noise_level_check.py``).
    gain_b : float > 0, default=0.01
    init : {"he", "xavier"}, default="he"
        Scaling of the prior weight variance: ``gain_w / n_in``, or
        ``gain_w * 2 / (n_in + n_out)`` (Glorot's, which the reference code uses
        with tanh and cdf activations; tagi.md §7).
    shuffle : bool, default=True
    max_abs_z : float > 0 or None, default=None
        Bound on the standardised training inputs: a feature whose standard
        deviation is below ``(max - min) / max_abs_z`` is scaled by that instead
        (see :func:`skbayesnn.base.fit_input_scaler`).  Useful for sparse or
        nearly constant features: 1 scales every feature by its training range,
        as the paper divides pixels by their range (tagi.md §12.3); None scales
        by the standard deviation alone (features constant in training are
        ignored either way).
    early_stopping : bool, default=False
        Hold out ``validation_fraction`` of the training rows, track their mean
        log-probability of the true class after every epoch and keep the
        posterior of the best epoch (tagi.md §6; the paper's MNIST protocol
        early-stops on a held-out part).  ``fit`` only, as for
        :class:`TAGIRegressor`.
    validation_fraction : float in (0, 1), default=0.1
    n_iter_no_change : int, default=10
        As in :class:`TAGIRegressor`.
    device : {"cpu", "cuda", "auto"}, default="cpu"
        Where fitting and prediction run: NumPy on the CPU, CuPy on a CUDA GPU
        (an error when CuPy or a GPU is missing), or the GPU when there is one.
    random_state : int, RandomState instance or None, default=None
    verbose : int, default=0
        Progress on stdout: 1 a summary after fitting, 2 also a line per epoch.

    Attributes
    ----------
    classes_ : ndarray of shape (n_classes,)
    tree_ : ClassTree
        The class encoding.
    posterior_ : GaussianMLPPosterior
    n_iter_ : int
        Epochs run (``fit`` and ``partial_fit`` calls together).
    best_epoch_ : int
    validation_scores_ : list of float
        With early stopping, the mean validation log-probability of the true
        class after each epoch; else empty.  Set by ``fit`` only.
    validation_indices_ : ndarray of int
        As in :class:`TAGIRegressor`.
    n_combined_, n_split_ : int
        As in :class:`TAGIRegressor`.
    n_features_in_, x_scaler_, device_

    Examples
    --------
    >>> from sklearn.datasets import load_iris
    >>> from skbayesnn import TAGIClassifier
    >>> X, y = load_iris(return_X_y=True)
    >>> clf = TAGIClassifier(hidden_layer_sizes=(20,), max_epochs=20, random_state=0).fit(X, y)
    >>> clf.predict_proba(X[:2]).shape
    (2, 3)
    """

    _parameter_constraints: dict = {
        **BaseBayesianClassifier._parameter_constraints,
        **_TAGI_CONSTRAINTS,
        **_EARLY_STOPPING_CONSTRAINTS,
        "alpha": [Interval(Real, 0, None, closed="neither")],
        "proba_noise": ["boolean"],
    }

    def __init__(
        self,
        hidden_layer_sizes=(100, 100),
        activation="relu",
        *,
        sigma_v=0.3,
        alpha=1.0 / 3.0,
        proba_noise=True,
        batch_size=10,
        max_epochs=40,
        gain_w=1.0,
        gain_b=0.01,
        init="he",
        shuffle=True,
        max_abs_z=None,
        early_stopping=False,
        validation_fraction=0.1,
        n_iter_no_change=10,
        device="cpu",
        random_state=None,
        verbose=0,
    ):
        self.hidden_layer_sizes = hidden_layer_sizes
        self.activation = activation
        self.sigma_v = sigma_v
        self.alpha = alpha
        self.proba_noise = proba_noise
        self.batch_size = batch_size
        self.max_epochs = max_epochs
        self.gain_w = gain_w
        self.gain_b = gain_b
        self.init = init
        self.shuffle = shuffle
        self.max_abs_z = max_abs_z
        self.early_stopping = early_stopping
        self.validation_fraction = validation_fraction
        self.n_iter_no_change = n_iter_no_change
        self.device = device
        self.random_state = random_state
        self.verbose = verbose

    def _init_online(self, n_features, n_classes, xp, rng):
        self.tree_ = tagi.ClassTree.build(n_classes)
        super()._init_online(n_features, self.tree_.n_nodes, xp, rng)

    def _fit_scaled(self, X, y_index, xp, rng):
        self._init_online(X.shape[1], len(self.classes_), xp, rng)
        Y, mask = self.tree_.targets(y_index, xp)
        y_index = xp.asarray(y_index)

        def validation_score(rows):
            p = self._predict_proba_scaled(X[rows], xp)
            true = y_index[rows][:, None] == xp.arange(p.shape[1])[None, :]
            p_true = xp.sum(xp.where(true, p, 0.0), axis=1)
            return float(xp.mean(xp.log(xp.maximum(p_true, xp.finfo(p.dtype).tiny))))

        self._train(X, Y, xp, rng, obs_mask=mask, validation_score=validation_score,
                    strata=asnumpy(y_index))

    def _partial_fit_scaled(self, X, y_index, xp, rng):
        Y, mask = self.tree_.targets(y_index, xp)
        self._run_epoch(X, Y, np.arange(X.shape[0]), xp, obs_mask=mask)
        self.n_iter_ += 1

    def _output_moments_scaled(self, X, xp):
        return tagi.forward(self.posterior_, X)

    def _overconfidence_remedy(self):
        # (base._warn_if_confidently_wrong; a wide prior: see gain_w)
        return (f"The weights' prior may be too wide for TAGI's linearisation (gain_w="
                f"{self.gain_w!r}; search values near 1 or below), or the fit diverged.  "
                "Choose gain_w, sigma_v and alpha by cross-validation, e.g. GridSearchCV with "
                "scoring='neg_log_loss'.")

    def _proba_from_outputs(self, z_mean, z_var, xp):
        # Eq. 24 on the noisy outputs, as the reference code
        if self._prediction_param("proba_noise"):
            z_var = z_var + float(self._prediction_param("sigma_v")) ** 2
        return self.tree_.proba(z_mean, z_var, self._prediction_param("alpha"))


def _stratified_holdout(perm, strata, n_val):
    """The rows ``perm`` reordered so that the first ``n_val'`` are a
    validation part stratified by ``strata``; returns ``(perm, n_val')``.

    Each class of ``c`` rows gives ``floor(f c)`` of them (``f = n_val / n``),
    and the rows still missing go to the classes of the largest remainders,
    ties broken by the classes' first positions in ``perm`` (so by the
    random state), but never all of a class's rows: every class keeps one
    training row (unstratified, or by ``train_test_split(stratify=...)``,
    which only keeps each class in one of the two parts, a rare class could
    be held out whole and never trained on).  ``n_val'`` is below ``n_val``
    only where the classes cannot give more.  A class of one row trains,
    unless every class has one row: then the split is the plain one.
    """
    n = perm.shape[0]
    classes, counts = np.unique(strata, return_counts=True)
    quota = n_val / n * counts
    take = np.minimum(np.floor(quota).astype(int), counts - 1)
    spare = n_val - int(take.sum())
    in_order = strata[perm]  # the rows' classes in the permutation's order
    first = np.array([np.argmax(in_order == c) for c in classes])
    order = np.lexsort((first, -(quota - np.floor(quota))))
    while spare > 0 and np.any(take < counts - 1):
        for k in order:
            if spare > 0 and take[k] < counts[k] - 1:
                take[k] += 1
                spare -= 1
    held = np.concatenate([perm[in_order == c][:t] for c, t in zip(classes, take)])
    if held.size == 0:  # every class a single row: the plain split
        return perm, n_val
    # (the held rows in the permutation's order, then the others in theirs)
    in_held = np.isin(perm, held)
    return np.concatenate([perm[in_held], perm[~in_held]]), int(held.size)
