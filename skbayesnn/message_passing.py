"""Message-passing estimators: EP-style Bayesian MLPs without double counting.

:class:`MessagePassingRegressor` and :class:`MessagePassingClassifier` train a
fully connected network with independent Gaussian weights by approximate
message passing on its factor graph (shared/methods/message_passing.md): every
training example owns one message per weight, batches are revisited with their
old messages divided out (§6), and predictions are one moment-propagating
forward pass through the weight marginals (§9).
"""

from __future__ import annotations

import copy
from numbers import Integral, Real

import joblib
import numpy as np
from sklearn.base import is_classifier
from sklearn.utils._param_validation import Interval, StrOptions
from sklearn.utils import check_scalar
from sklearn.utils.validation import check_is_fitted

from ._backend import asnumpy
from .base import (
    MAX_SCALE,
    BaseBayesianClassifier,
    BaseBayesianRegressor,
    PartialFitMixin,
    check_hidden_layer_sizes,
    warn_user,
)
from .inference.message_passing import likelihood, network

__all__ = ["MessagePassingRegressor", "MessagePassingClassifier"]


def _data_hash(X, T):
    """Hash of standardised training data and targets (a warm start checks
    that it continues the first fit's data)."""
    # (contiguous: joblib's hash includes the strides, and the same values
    # from a DataFrame or a Fortran-ordered array must match)
    return joblib.hash([np.ascontiguousarray(asnumpy(a)) for a in (X, T)])


class _MessagePassingMixin:
    """Training loop shared by the regressor and the classifier."""

    def _network_structure(self, fitted):
        # The units' slope says the activation too ("relu" is the LeakyReLU of
        # slope 0, whatever negative_slope says).
        if fitted:
            sizes, alpha = list(self.state_.sizes[1:-1]), self.state_.alpha
        else:
            sizes, alpha = check_hidden_layer_sizes(self.hidden_layer_sizes), self._alpha()
        return {"hidden_layer_sizes": sizes,
                "activation": "relu" if alpha == 0.0 else "leaky_relu",
                "negative_slope": alpha}

    _common_constraints: dict = {
        "hidden_layer_sizes": ["array-like", Interval(Integral, 1, None, closed="left")],
        "activation": [StrOptions({"leaky_relu", "relu"})],
        "negative_slope": [Interval(Real, 0, 1, closed="left")],
        "prior_var": [None, Interval(Real, 0, None, closed="neither"), "array-like"],
        "bias_prior_var": [Interval(Real, 0, None, closed="neither")],
        "batch_size": [Interval(Integral, 1, None, closed="left")],
        "max_epochs": [Interval(Integral, 1, None, closed="left")],
        "n_iter_per_batch": [Interval(Integral, 1, None, closed="left"), "array-like", callable],
        "memory": [StrOptions({"per_example", "per_batch"})],
        "damping": ["boolean"],
        "max_abs_z": [Interval(Real, 0, None, closed="neither"), None],
        "warm_start": ["boolean"],
    }
    _device_attributes = ("state_",)
    _creation_params = ("prior_var", "bias_prior_var", "max_abs_z")

    def _creation_value(self, name):
        if name == "prior_var" and self.prior_var is not None:
            # one value per weight layer: 0.5 and [0.5, 0.5] are the same prior
            try:
                return self._prior_var(len(check_hidden_layer_sizes(self.hidden_layer_sizes)) + 1)
            except ValueError:  # changed layers: the network comparison says so
                pass
        return super()._creation_value(name)

    def _alpha(self):
        return 0.0 if self.activation == "relu" else float(self.negative_slope)

    def _resolve_device(self):
        # One example at a time (§6): on a GPU every step is many small array
        # operations, where the CPU runs the compiled kernel; "auto" picks the CPU.
        return "cpu" if self.device == "auto" else super()._resolve_device()

    def _check_schedule(self):
        """Every entry of a sequence ``n_iter_per_batch`` checked before any
        epoch runs (a callable's values only when asked for)."""
        schedule = self.n_iter_per_batch
        if not (isinstance(schedule, Integral) or callable(schedule)):
            for epoch in range(1, max(np.size(np.asarray(schedule, dtype=object)), 1) + 1):
                self._n_iter(epoch)

    def _n_iter(self, epoch):
        schedule = self.n_iter_per_batch
        if isinstance(schedule, Integral):
            return int(schedule)
        if callable(schedule):
            n_iter = schedule(epoch)
            where = f"n_iter_per_batch({epoch}) must return"
        else:  # a sequence, one entry per epoch, the last one repeated
            values = np.asarray(schedule, dtype=object)
            if values.ndim != 1 or values.size == 0:
                raise ValueError(
                    "n_iter_per_batch must be an int, a callable or a 1-D sequence of "
                    f"positive ints; got {schedule!r}."
                )
            index = min(epoch, values.size) - 1
            n_iter = values[index]
            where = f"n_iter_per_batch[{index}] must be"
        if isinstance(n_iter, bool) or not isinstance(n_iter, Integral) or n_iter < 1:
            raise ValueError(f"{where} a positive int, got {n_iter!r}.")
        return int(n_iter)

    def _prior_var(self, n_layers):
        """``prior_var`` as None, a float or one positive float per weight layer."""
        if self.prior_var is None:
            return None
        prior_var = np.asarray(self.prior_var, dtype=np.float64)
        if prior_var.ndim == 0:  # a float (checked by the constraints) or a 0-d array
            prior_var = np.full(n_layers, prior_var)
        if prior_var.shape != (n_layers,) or not np.all(np.isfinite(prior_var) & (prior_var > 0)):
            raise ValueError(
                f"prior_var must be a positive float or {n_layers} positive floats, one per "
                f"weight layer; got {self.prior_var!r}."
            )
        return prior_var.tolist()

    def _init_state(self, n_features, n_outputs, xp, rng):
        sizes = [n_features, *check_hidden_layer_sizes(self.hidden_layer_sizes), n_outputs]
        self.state_ = network.init_state(
            sizes,
            rng=rng,
            xp=xp,
            alpha=self._alpha(),
            prior_var=self._prior_var(len(sizes) - 1),
            bias_var=self.bias_prior_var,
        )
        self.n_iter_ = 0

    def _batches(self, X, T, order, first):
        """The rows ``order`` of ``(X, T)`` cut into ``batch_size`` slots
        ``first, first + 1, ...``."""
        X, T = X[order], T[order]
        return [
            (first + k, X[s : s + self.batch_size], T[s : s + self.batch_size])
            for k, s in enumerate(range(0, X.shape[0], self.batch_size))
        ]

    def _new_batches(self, X, T, xp, order):
        """:meth:`_batches` appended to the state as new slots."""
        batches = self._batches(X, T, order, self.state_.n_slots)
        network.add_batches(self.state_, len(batches))
        return batches

    def _epochs(self, batches, n_epochs, rng, *, first_visit=False):
        """``n_epochs`` passes over ``batches``; ``first_visit``: the batches are
        new slots visited once (``partial_fit``), so they get epoch 1's schedule:
        no damping of an empty slot (§6) and ``n_iter_per_batch(1)``; else
        they are ``fit``'s, whose epochs (``state_.fit_epochs``) the schedule
        counts."""
        self._check_schedule()
        out = self._output()
        st = self.state_
        for _ in range(n_epochs):
            self.n_iter_ += 1
            if not first_visit:
                st.fit_epochs += 1
            epoch = 1 if first_visit else st.fit_epochs
            network.run_epoch(
                self.state_,
                batches,
                output=out,
                n_iter=self._n_iter(epoch),
                rng=rng,
                epoch=epoch,
                damping=self.damping,
                per_example=self.memory == "per_example",
            )
            if not network.is_finite(self.state_):
                where = ("this partial_fit batch, which is refused" if first_visit
                         else f"epoch {self.n_iter_}")
                values = "inputs"
                if first_visit:  # (a classifier's labels are not scaled)
                    values = (("inputs" if is_classifier(self) else "inputs or targets")
                              + " (every batch is standardised with the first call's scaling)")
                raise ValueError(
                    f"{type(self).__name__} training diverged: the weight posterior is not "
                    f"finite after {where}.  The messages overflow with extreme "
                    f"{values}{self._divergence_hint()}."
                )
            self._log(f"epoch {self.n_iter_}", level=2)
        self._log(
            f"trained {self.n_iter_} epochs over {self.state_.n_slots} batch slots; "
            f"{self.state_.n_fallback} LeakyReLU forward fallbacks"
        )

    def _train_new(self, X, T, xp, rng, n_epochs, first_visit=False):
        """Epochs over ``(X, T)`` shuffled into new slots; returns the order."""
        order = rng.permutation(X.shape[0])
        batches = self._new_batches(X, T, xp, order if xp is np else xp.asarray(order))
        self._epochs(batches, n_epochs, rng, first_visit=first_visit)
        return order

    def _train_fit(self, X, T, xp, rng):
        """``fit``'s epochs over new batch slots.

        Without ``warm_start`` the slots are then folded into one
        (``network.fold_slots``): nothing visits fit's batches one by one again
        (their data are not kept), and one slot in place of ``B`` keeps a
        fitted model's size, and the work of each later ``partial_fit``,
        independent of the number of batches.  With it they are kept, with
        the order that cut the data into them, for :meth:`_fit_warm`.
        """
        if X.shape[0] <= self.batch_size and self.max_epochs > 1:
            # (200 rows of sin(2x) + N(0, 0.1^2): test R^2 0.626 at the defaults,
            # 0.639 with 100 epochs; 0.901 with batch_size=32, and with one
            # epoch of 60 iterations)
            warn_user(
                f"{type(self).__name__}: all {X.shape[0]} rows fit in one batch (batch_size="
                f"{self.batch_size}), and every epoch restarts that batch from the prior "
                f"(§6), so max_epochs={self.max_epochs} adds little over one epoch.  Use a "
                "batch_size below the number of rows (e.g. a tenth of them), or max_epochs=1 "
                "with more n_iter_per_batch.",
                UserWarning,
            )
        order = self._train_new(X, T, xp, rng, self.max_epochs)
        st = self.state_
        if self.warm_start:
            st.fit_order, st.fit_batch_size = order, self.batch_size
            st.fit_data_hash = _data_hash(X, T)
        else:
            network.fold_slots(st, 0)

    def _fit_warm(self, X, T, xp):
        """``max_epochs`` more epochs over the first fit's batches (standardised
        ``X``, targets ``T``), each slot's old message divided out on its visit
        as in ``fit``: the same data counted once, the epoch count (damping,
        ``n_iter_per_batch``) and the random stream continued.  A failure
        leaves the model as it was (the network was checked by the base's
        ``fit``)."""
        st = self.state_
        if st.fit_order is None:
            raise ValueError(
                f"{type(self).__name__}.fit with warm_start=True continues a fit made with "
                "warm_start=True, which keeps its batches' messages; this model's fit folded "
                "them (warm_start was False), or it was trained by partial_fit alone.  Fit "
                "a new model with warm_start=True (sklearn.base.clone(model).fit(X, y)), or "
                "use partial_fit to add data."
            )
        if self.batch_size != st.fit_batch_size or _data_hash(X, T) != st.fit_data_hash:
            raise ValueError(
                f"{type(self).__name__}.fit with warm_start=True continues the first fit on "
                "its own data, cut into the same batches: X and y must be that fit's (rows in "
                f"the same order) and batch_size {st.fit_batch_size}.  Use partial_fit to add "
                "new data, or warm_start=False to fit a new model."
            )
        order = st.fit_order if xp is np else xp.asarray(st.fit_order)
        before = (copy.deepcopy(st), self.n_iter_, copy.deepcopy(self._rng))
        try:
            self._epochs(self._batches(X, T, order, 0), self.max_epochs, self._rng)
        except BaseException:  # (an interrupt too: no epoch half-applied)
            self.state_, self.n_iter_, self._rng = before
            raise
        return self

    def _train_online(self, X, T, xp, rng):
        """One ``partial_fit`` call: new slots, visited once, then folded into the
        single slot of all online data (``network.fold_slots``), so memory and
        time per call do not grow with the number of calls."""
        st = self.state_
        first_new, n_iter, n_fallback = st.n_slots, self.n_iter_, st.n_fallback
        rng_before = copy.deepcopy(rng)
        posterior_before = network.copy_posterior(st)
        try:
            self._train_new(X, T, xp, rng, 1, first_visit=True)
        except BaseException:
            # e.g. divergence, or an interrupt: drop this call's slots, so the
            # model is the one before the call, bit for bit, random stream
            # included (later calls and predictions still work; a batch half
            # visited would otherwise be folded in by the next call)
            network.drop_slots(st, first_new, posterior_before)
            self.n_iter_, st.n_fallback = n_iter, n_fallback
            self._rng = rng_before
            raise
        if st.online_slot is None:
            st.online_slot = first_new
        network.fold_slots(st, st.online_slot)

    @property
    def posterior_(self):
        check_is_fitted(self)
        return network.to_posterior(self.state_)

    def memory_bytes(self, n_samples):
        """Message storage of a fit with the current parameters on ``n_samples``
        rows of the fitted data's features and outputs, in bytes.

        ``16 * (P * (B + m + 5) + 2 * P_1 + b * H)``, with ``P`` the weights
        and biases, ``P_1`` the first layer's weights, ``B = ceil(n_samples /
        batch_size)`` batch slots, ``b = min(batch_size, n_samples)`` rows of
        the active batch, ``H`` hidden units, and ``m = b`` example messages
        per weight for ``memory="per_example"``, ``m = 1`` for
        ``"per_batch"`` (message_passing.md §11; the terms are listed in
        :mod:`skbayesnn.inference.message_passing.network`).
        With one iteration per visit (``n_iter_per_batch`` 1 in every epoch of
        ``fit``, with ``warm_start`` of the next warm fit too) no example's
        message is divided out again, so ``"per_example"`` needs only the
        ``"per_batch"`` storage, and the formula is that one (``partial_fit``
        takes epoch 1's iterations only, so for it the formula may overstate).
        ``fit`` ends with its batches folded into one slot (without
        ``warm_start``; with it the ``B`` slots stay), and ``partial_fit``
        keeps all its calls' data in one more: a ``partial_fit`` call of
        ``n_samples`` rows after a ``fit`` without ``warm_start`` holds
        ``memory_bytes(n_samples)`` plus these two slots, ``32 * P`` bytes.
        Needs a fitted model (the numbers of features and outputs).
        """
        check_is_fitted(self)
        n_samples = check_scalar(n_samples, "n_samples", Integral, min_val=1)
        hidden = check_hidden_layer_sizes(self.hidden_layer_sizes)
        sizes = [self.state_.sizes[0], *hidden, self.state_.sizes[-1]]
        n_batches = -(-n_samples // self.batch_size)
        memory = self.memory
        # the epochs whose schedule can differ: all for a callable, a
        # sequence's entries (its last one is repeated), one for an int
        schedule = self.n_iter_per_batch
        # (a warm fit continues the epochs: those of the next one count too)
        last = self.max_epochs + (self.state_.fit_epochs if self.warm_start else 0)
        if callable(schedule):
            n_distinct = last
        elif isinstance(schedule, Integral):
            n_distinct = 1
        else:
            n_distinct = min(last, max(len(schedule), 1))
        if all(self._n_iter(e) == 1 for e in range(1, n_distinct + 1)):
            memory = "per_batch"  # one iteration per visit stores no per-example messages
        return network.memory_bytes(sizes, n_batches, min(self.batch_size, n_samples), memory)


# The parameters both estimators share, in three pieces so that each
# docstring lists its parameters in the signature's order (numpydoc).
_SIZES_DOC = """
    hidden_layer_sizes : int or tuple of int, default=(64, 64)
        Units of each hidden layer.  The weight marginals are fully factorised,
        and on small data sets layers of several hundred units fit poorly: on
        200 points of a 1-D curve that 16-128 units fit (R^2 above 0.98), one
        layer of 512 stays near R^2 = 0 (``benchmarks/width_mp.py``).
"""

_ACTIVATION_DOC = """    activation : {"leaky_relu", "relu"}, default="leaky_relu"
        Hidden units' activation, with the messages of §5.6; ``"relu"`` is
        the LeakyReLU with ``negative_slope`` 0.
    negative_slope : float, default=0.1
        Slope of the LeakyReLU for negative inputs (the paper's 0.1).
"""

_TRAINING_DOC = """    prior_var : float, array-like of float or None, default=None
        Prior variance of every weight, or one per weight layer (the override
        of §15 item 7); None uses the layer-wise formulas of message_passing.md
        §7 (``1.5 / d_in`` for the first layer).  Prior means are drawn from
        the spectral ``N(0, l^2)`` of §3.2 (``random_state``).
    bias_prior_var : float, default=0.5
        Prior variance of every bias, ``N(0, bias_prior_var)`` (§7).
    batch_size : int, default=256
        Examples per batch slot (§6).  Training advances by batch visits at a
        cost per example that does not depend on the batch size, so on a few
        hundred rows smaller batches (e.g. 32) converge in far fewer epochs.
        With a single batch every visit restarts from the prior: use
        ``max_epochs=1`` and many ``n_iter_per_batch``.
    max_epochs : int, default=20
        Passes over the batches in ``fit``.
    n_iter_per_batch : int, sequence of int or callable, default=3
        Iterations over the active batch on each visit; a sequence gives one
        value per epoch (the last one repeated), a callable maps the (1-based)
        epoch to a positive int, e.g. ``lambda e: (e + 1) // 2`` (§6).
        ``partial_fit`` visits its new batches as epoch 1 (no damping, the
        first epoch's iterations).
    memory : {"per_example", "per_batch"}, default="per_example"
        ``"per_example"`` stores one message per weight for every example of the
        active batch (the paper); ``"per_batch"`` only the active batch's
        running message (use it when ``batch_size`` times the parameter count
        does not fit).  ``"per_batch"`` changes the algorithm: with no old
        message to divide out, each iteration of a visit restarts from the
        cavity (assumed density filtering), so iterations after the first only
        refine the hidden units' messages, and the fit is usually less
        accurate (user guide, "Memory").  A visit of one iteration never
        revisits an example, so both are then the same computation and store
        the same (no per-example messages).  See :meth:`memory_bytes`.
    damping : bool, default=True
        EMA damping of the weights' batch aggregates, rate ``0.9 + 0.1
        exp(-0.3 (e-1))`` (§6; the biases' aggregates are not damped, as in
        the paper's code).
    max_abs_z : float > 0 or None, default=None
        Bound on the standardised training inputs: a feature whose standard
        deviation is below ``(max - min) / max_abs_z`` is scaled by that instead
        (see :func:`skbayesnn.base.fit_input_scaler`).  1 scales every feature by
        its training range, close to the paper's one global scale for all pixels
        (message_passing.md §10); None scales by the standard deviation alone
        (features constant in training are ignored either way).
    warm_start : bool, default=False
        Keep ``fit``'s batch messages, so that a later ``fit`` with the same
        ``X``, ``y`` and ``batch_size`` runs ``max_epochs`` more epochs over the
        same batches, dividing each batch's old message out on its visit (the
        data counted once, as in one longer fit: the same result for the same
        ``random_state``).  It costs ``16 P`` bytes per batch (``P`` weights
        and biases) after the fit, where otherwise fit's batches are folded
        into one message (nothing revisits them), and a warm fit holds a copy
        of them besides, to restore the model if it fails.  The warm epochs
        continue the fit's count (the iteration schedule and the damping of
        §6; ``partial_fit`` calls in between are not counted).  Other data go
        to ``partial_fit``; a changed network or other data raise a
        ValueError.  This is narrower than the ``warm_start`` of sklearn's
        ``MLPRegressor`` (go on from the last solution, on any data): here a
        fit on other data would count the first fit's data a second time, and
        a fit without ``warm_start`` keeps nothing to continue.
    device : {"cpu", "cuda", "auto"}, default="cpu"
        Where fitting and prediction run: NumPy on the CPU, CuPy on a CUDA GPU
        (an error when CuPy or a GPU is missing).  ``"auto"`` is the CPU: the
        schedule of §6 takes one example at a time, which the CPU runs in a
        compiled kernel and a GPU as many small array operations, each a
        kernel launch, per example and layer.
    random_state : int, RandomState instance or None, default=None
        Seeds the prior means, the batches and the example order.
    verbose : int, default=0
        Progress on stdout: 1 a summary after fitting, 2 also a line per epoch.
"""


class MessagePassingRegressor(_MessagePassingMixin, PartialFitMixin, BaseBayesianRegressor):
    # The parameter list is shared with the classifier, so the docstring is
    # assembled (an expression is not a docstring; __doc__ must be assigned).
    __doc__ = (
        """Bayesian MLP regression by approximate message passing (EP-style).

    Parameters
    ----------"""
        + _SIZES_DOC
        + _ACTIVATION_DOC
        + """    noise_std : float, default=0.4
        Fixed observation noise ``s`` of the training likelihood
        ``N(y; f, s^2)``, in units of the standardised target (the paper's UCI
        value; §10, §12.4).  Not learned.
    predictive_noise_std : float or None, default=None
        ``beta`` of the predictive ``N(mu, sigma^2 + beta^2)``, standardised
        units; None: ``beta = noise_std``.  Prediction reads it (and, when
        None, ``noise_std``) at every call, so it can be set after ``fit``
        (``set_params``) without refitting; an invalid value raises there.
        A value above ``noise_std`` amounts to a tempered ("cold")
        likelihood: as a function of ``f``,
        ``N(y; f, s^2)`` is proportional to ``N(y; f, beta^2)^(1/T)`` with
        ``T = s^2 / beta^2 < 1``.  A small training noise fits the mean more
        closely, but the factorised posterior's ``sigma^2`` is then too small
        to cover the errors, and the larger ``beta`` restores the calibration.
        Choose ``noise_std`` for the accuracy of the mean and
        ``predictive_noise_std`` for the log-likelihood, e.g. by
        cross-validation on the training part (``benchmarks/uci_mp.py
        --tune-predictive-noise``).
"""
        + _TRAINING_DOC
        + """
    Attributes
    ----------
    state_ : skbayesnn.inference.message_passing.network.MPState
        Prior, batch-slot messages and marginals of every layer (standardised
        units).
    posterior_ : GaussianMLPPosterior
        The weight and bias marginals as the library's common posterior
        (standardised units; ``sample_weights`` draws networks from it, §15
        item 5); ``propagate(posterior_, X_scaled, act_approx="moment_match")``
        is the predictive of §9.
    n_iter_ : int
        Epochs run (each ``partial_fit`` call counts one, a warm ``fit`` its
        ``max_epochs``).
    n_features_in_, n_outputs_, x_scaler_, y_scaler_, device_
    feature_names_in_ : ndarray of str
        Where ``X`` had string column names (a DataFrame), as in sklearn.

    Notes
    -----
    ``y`` may have several columns (targets), each standardised on its own,
    with the one ``noise_std`` in those units; :meth:`predict` then returns
    ``(n_samples, n_outputs)``.  The predictive is ``N(mu, sigma^2 +
    beta^2)``: ``sigma^2`` from the weights (``epistemic_var`` of
    :meth:`predict_dist`) and ``beta^2`` the noise (``aleatoric_var``;
    ``beta`` is ``predictive_noise_std``, by default ``noise_std``).
    ``partial_fit`` adds each call's rows as new batch
    slots and visits them once, undamped; earlier slots are not revisited
    (their data are not stored), so no row of a call is counted twice; rows
    passed again in a later call are new observations (for several passes
    over one dataset use ``fit`` with ``max_epochs``).  All online
    batches are then kept as one aggregate slot, so a call costs the same
    however many came before.  A fit whose posterior becomes non-finite
    (extreme inputs; a tiny ``noise_std`` can do it) raises a ValueError, and so does a prediction
    that overflows (inputs ~1e150 training standard deviations out).

    Examples
    --------
    >>> import numpy as np
    >>> from skbayesnn import MessagePassingRegressor
    >>> rng = np.random.default_rng(0)
    >>> X = rng.uniform(-2, 2, size=(100, 1))
    >>> y = np.sin(2 * X[:, 0]) + 0.1 * rng.normal(size=100)
    >>> reg = MessagePassingRegressor(hidden_layer_sizes=(16,), batch_size=20,
    ...                               max_epochs=10, random_state=0).fit(X, y)
    >>> mean, std = reg.predict(X[:3], return_std=True)
    """
    )

    _supports_multi_output = True
    _parameter_constraints: dict = {
        **BaseBayesianRegressor._parameter_constraints,
        **_MessagePassingMixin._common_constraints,
        "noise_std": [Interval(Real, 0, MAX_SCALE, closed="right")],
        "predictive_noise_std": [None, Interval(Real, 0, MAX_SCALE, closed="right")],
    }

    def __init__(
        self,
        hidden_layer_sizes=(64, 64),
        *,
        activation="leaky_relu",
        negative_slope=0.1,
        noise_std=0.4,
        predictive_noise_std=None,
        prior_var=None,
        bias_prior_var=0.5,
        batch_size=256,
        max_epochs=20,
        n_iter_per_batch=3,
        memory="per_example",
        damping=True,
        max_abs_z=None,
        warm_start=False,
        device="cpu",
        random_state=None,
        verbose=0,
    ):
        self.hidden_layer_sizes = hidden_layer_sizes
        self.activation = activation
        self.negative_slope = negative_slope
        self.noise_std = noise_std
        self.predictive_noise_std = predictive_noise_std
        self.prior_var = prior_var
        self.bias_prior_var = bias_prior_var
        self.batch_size = batch_size
        self.max_epochs = max_epochs
        self.n_iter_per_batch = n_iter_per_batch
        self.memory = memory
        self.damping = damping
        self.max_abs_z = max_abs_z
        self.warm_start = warm_start
        self.device = device
        self.random_state = random_state
        self.verbose = verbose

    def _output(self):
        return network.regression_output(float(self.noise_std) ** 2)

    @property
    def _fixed_noise_param(self):
        # the predictive's noise (base._warn_if_noise_too_small)
        return "noise_std" if self.predictive_noise_std is None else "predictive_noise_std"

    def _noise_remedy(self, name):
        return (", or the network underfits (then train longer).  Set "
                "predictive_noise_std, which prediction reads (no refit), and choose it (and "
                "noise_std) by cross-validation, e.g. GridSearchCV with "
                "scoring=skbayesnn.metrics.neg_nlpd_scorer.")

    def _divergence_hint(self):
        return (f", or with a very small noise_std (here {self.noise_std!r}); rescale the "
                "data or increase noise_std")

    def _init_online(self, n_features, n_outputs, xp, rng):
        self._init_state(n_features, n_outputs, xp, rng)

    def _fit_scaled(self, X, Y, xp, rng):
        self._init_state(X.shape[1], Y.shape[1], xp, rng)
        self._train_fit(X, Y, xp, rng)

    def _partial_fit_scaled(self, X, Y, xp, rng):
        self._train_online(X, Y, xp, rng)

    def _warm_fit_scaled(self, X, Y, xp):
        self._fit_warm(X, Y, xp)

    def _predict_moments_scaled(self, X, xp):
        mean, var = network.predict_moments(self.state_, X)
        name = "noise_std" if self.predictive_noise_std is None else "predictive_noise_std"
        beta = self._prediction_param(name)
        return likelihood.regression_predict(mean, var, float(beta) ** 2)


class MessagePassingClassifier(_MessagePassingMixin, BaseBayesianClassifier):
    __doc__ = (
        """Bayesian MLP classification by approximate message passing (EP-style).

    Parameters
    ----------"""
        + _SIZES_DOC
        + """    likelihood : {"argmax", "regression", "softmax"}, default="argmax"
        The training factor on the class logits (§3.3, §5.9-5.11): the argmax
        factor (AM-MP), Gaussian regression on one-hot targets (R-MP), or the
        softmax factor (numerical integration: the trapezoidal rule on 802
        points per class and example step, so its cost grows with the
        classes: with one layer of 32 units an example step took 19 µs
        against 6 µs for "argmax" with 5 classes, 116-121 against 12 with 40;
        ``benchmarks/many_classes_mp.py``).
"""
        + _ACTIVATION_DOC
        + """    noise_std : float, default=0.1
        ``beta`` of the one-hot regression factor (``likelihood="regression"``).
    regularize : bool, default=True
        Argmax only: multiply the messages by one-hot factors
        ``N(a; +-1, regularize_var)`` (§5.11; the setting of the paper's MNIST and
        CIFAR-10 argmax runs).  The argmax factor alone is invariant to adding
        a constant to every logit, so nothing holds the common level of the
        logits; with hidden layers (whose forward messages use the full
        weight marginals, §5.2, so each example's own pushes feed back into
        its next message) that level can drift without bound: on digits with
        plain per-column standardisation (``max_abs_z=None``) a network with
        two hidden layers stays at chance accuracy (0.951 with ``max_abs_z=1``,
        which bounds the inputs).  Any
        anchor stops the drift; ``False`` is kept for the paper's
        "augfree" variant and single-layer models.
    argmax_noise_var : float >= 0, default=0.3
        The extra pairwise noise variance ``s^2`` of the argmax factor (§5.11,
        the paper's code value), in training (``likelihood="argmax"``) and in
        the pairwise-probit ``predict_proba`` of ``"argmax"`` and
        ``"regression"``.
    regularize_var : float > 0, default=0.1
        Variance ``gamma^2`` of the one-hot regularising factors
        ``N(a; +-1, gamma^2)`` (``regularize=True``).
"""
        + _TRAINING_DOC
        + """
    Attributes
    ----------
    classes_ : ndarray of shape (n_classes,)
    likelihood_ : str
        The training factor, fixed at ``fit`` (or the first ``partial_fit``);
        ``predict_proba`` uses it, so a ``set_params(likelihood=...)`` takes
        effect at the next ``fit`` (a later ``partial_fit`` refuses it, as a
        changed layer size).
    state_ : skbayesnn.inference.message_passing.network.MPState
    posterior_ : GaussianMLPPosterior
        The weight and bias marginals as the library's common posterior
        (standardised units; ``sample_weights`` draws networks from it, §15
        item 5); ``propagate(posterior_, X_scaled, act_approx="moment_match")``
        is the predictive of §9.
    n_iter_ : int
        Epochs run (each ``partial_fit`` call counts one, a warm ``fit`` its
        ``max_epochs``).
    n_features_in_, x_scaler_, device_

    Notes
    -----
    ``predict_proba``: the pairwise-probit argmax product (§5.11) for
    ``"argmax"`` and ``"regression"`` (on the predictive Gaussians including
    ``noise_std**2`` for the latter), the probit softmax (§5.9) for
    ``"softmax"``.  The pairwise product treats the ``K - 1`` comparisons of
    a class as independent although they share its logit, so it grows more
    confident with every class.  ``benchmarks/many_classes_mp.py`` (one layer
    of 32 units on ``make_classification``, held-out NLL): with 5 classes
    argmax is the best calibrated (ECE 0.009, softmax 0.056); with 20 classes
    its NLL is 1.39 against 0.83 for softmax, with 40 classes 4.49 against
    1.56, and on 50 classes of pure-noise labels 17.6 against 4.0 (``log 50
    = 3.9``).  Training shares the limit: the argmax factor's message to the
    label's logit is the product of ``K - 1`` pairwise messages from one
    cavity (§5.11 step 3).  For ``K`` tied logits ``N(0, 1)`` (noise 0.3, no
    regulariser) it gives the logit a marginal precision of 1.77 against the
    exact 1.66 with 3 classes, 4.4 against 2.7 with 10 and 19.8 against 4.5
    with 50 (the exact tilted marginal is a one-dimensional integral there).
    With more than about ten classes prefer ``"softmax"``.
    """
    )

    def _network_structure(self, fitted):
        likelihood = self.likelihood_ if fitted else self.likelihood
        return {**super()._network_structure(fitted), "likelihood": likelihood}

    _parameter_constraints: dict = {
        **BaseBayesianClassifier._parameter_constraints,
        **_MessagePassingMixin._common_constraints,
        "likelihood": [StrOptions({"argmax", "regression", "softmax"})],
        "noise_std": [Interval(Real, 0, MAX_SCALE, closed="right")],
        "regularize": ["boolean"],
        "argmax_noise_var": [Interval(Real, 0, None, closed="left")],
        "regularize_var": [Interval(Real, 0, None, closed="neither")],
    }

    def __init__(
        self,
        hidden_layer_sizes=(64, 64),
        *,
        likelihood="argmax",
        activation="leaky_relu",
        negative_slope=0.1,
        noise_std=0.1,
        regularize=True,
        argmax_noise_var=0.3,
        regularize_var=0.1,
        prior_var=None,
        bias_prior_var=0.5,
        batch_size=256,
        max_epochs=20,
        n_iter_per_batch=3,
        memory="per_example",
        damping=True,
        max_abs_z=None,
        warm_start=False,
        device="cpu",
        random_state=None,
        verbose=0,
    ):
        self.hidden_layer_sizes = hidden_layer_sizes
        self.likelihood = likelihood
        self.activation = activation
        self.negative_slope = negative_slope
        self.noise_std = noise_std
        self.regularize = regularize
        self.argmax_noise_var = argmax_noise_var
        self.regularize_var = regularize_var
        self.prior_var = prior_var
        self.bias_prior_var = bias_prior_var
        self.batch_size = batch_size
        self.max_epochs = max_epochs
        self.n_iter_per_batch = n_iter_per_batch
        self.memory = memory
        self.damping = damping
        self.max_abs_z = max_abs_z
        self.warm_start = warm_start
        self.device = device
        self.random_state = random_state
        self.verbose = verbose

    def _output(self):
        return network.classification_output(
            self.likelihood_,
            len(self.classes_),
            noise_var=float(self.noise_std) ** 2,
            regularize=bool(self.regularize),
            argmax_noise=float(self.argmax_noise_var),
            reg_var=float(self.regularize_var),
        )

    def _divergence_hint(self):
        """The likelihood's variance parameter that can make its messages
        overflow, for the divergence error."""
        if self.likelihood_ == "regression":
            name = "noise_std"
        elif self.likelihood_ == "argmax" and self.regularize:
            name = "regularize_var"
        else:
            return "; rescale the data"
        return (f", or with a very small {name} (here {getattr(self, name)!r}); rescale the "
                f"data or increase {name}")

    def _overconfidence_remedy(self):
        # (base._warn_if_confidently_wrong; the class Notes measure the
        # pairwise product's overconfidence with many classes)
        # (more epochs do not help: a reviewer's binary data with 10% of the
        # labels flipped kept the argmax likelihood's share near 5% from 5 to
        # 60 epochs, and its test log-loss near 0.7 against the softmax's 0.41)
        advice = ("Choose the likelihood and the priors by cross-validation, e.g. GridSearchCV "
                  "with scoring='neg_log_loss'.")
        if self.likelihood_ == "softmax":
            return advice
        if len(self.classes_) > 10:
            return (f"The {self.likelihood_} likelihood's pairwise-probit product grows more "
                    f"confident with every class ({len(self.classes_)} here): prefer "
                    f"likelihood='softmax' above about ten classes.  {advice}")
        return f"Try likelihood='softmax' (here {self.likelihood_!r}).  {advice}"

    def _init_online(self, n_features, n_classes, xp, rng):
        self.likelihood_ = self.likelihood
        self._init_state(n_features, n_classes, xp, rng)

    def _labels(self, y_index, xp):
        return y_index if xp is np else xp.asarray(y_index)

    def _fit_scaled(self, X, y_index, xp, rng):
        self._init_online(X.shape[1], len(self.classes_), xp, rng)
        self._train_fit(X, self._labels(y_index, xp), xp, rng)

    def _partial_fit_scaled(self, X, y_index, xp, rng):
        self._train_online(X, self._labels(y_index, xp), xp, rng)

    def _warm_fit_scaled(self, X, y_index, xp):
        self._fit_warm(X, self._labels(y_index, xp), xp)

    def _output_moments_scaled(self, X, xp):
        return network.predict_moments(self.state_, X)

    def _proba_from_outputs(self, mean, var, xp):
        if self.likelihood_ == "softmax":
            return likelihood.softmax_proba(mean, var)
        if self.likelihood_ == "regression":
            var = var + float(self._prediction_param("noise_std")) ** 2
        return likelihood.argmax_proba(mean, var, float(self._prediction_param("argmax_noise_var")))
