"""VBNN: variational Bayesian bow-tie networks with shrinkage priors."""

from __future__ import annotations

import contextlib
import copy
from numbers import Integral, Real

import numpy as np
from joblib import Parallel, delayed
from sklearn.base import _fit_context
from sklearn.exceptions import ConvergenceWarning
from sklearn.utils._param_validation import Interval, StrOptions
from sklearn.utils.validation import check_is_fitted, check_scalar

from ._backend import asnumpy
from .base import MAX_SCALE, MIN_SCALE, BaseBayesianRegressor, check_hidden_layer_sizes, warn_user
from .distributions import GaussianMixturePredictive
from .inference.vbnn import cavi, predict, selection, svi
from .inference.vbnn.shrinkage import FAMILIES, ShrinkagePrior

#: Test rows per local CAVI in prediction (``VBNNRegressor._member_moments``).
_PREDICT_CHUNK = 1024
#: Bytes of one ``(rows, D + 1, D + 1)`` float64 array of a prediction chunk
#: (``D`` the widest layer, inputs included): the chunk has fewer rows where
#: the layers are wide (300 inputs at 1024 rows had peaked at 2.4 GB).
_PREDICT_CHUNK_BYTES = 2**26


def _chunk_rows(state):
    """Rows per prediction chunk of a restart's ``state`` (:data:`_PREDICT_CHUNK_BYTES`)."""
    widest = max(state.sizes) + 1
    return int(max(1, min(_PREDICT_CHUNK, _PREDICT_CHUNK_BYTES // (8 * widest * widest))))


class VBNNRegressor(BaseBayesianRegressor):
    """Bayesian ReLU-like network fitted by closed-form variational inference.

    The bow-tie network of Sheinkman & Wade (vbnn.md §2) relaxes each ReLU into
    a stochastic unit ``a ~ N(gamma z, eta^2)`` with a gate ``gamma ~
    Bern(sigmoid(z / T))``; a Pólya-Gamma augmentation makes the model
    conditionally linear-Gaussian, so every factor of the structured mean-field
    posterior (full-covariance Gaussian weights per unit, a Gaussian chain over
    each row's activations, gates, noise and shrinkage scales) has a closed-form
    coordinate-ascent (CAVI) update (vbnn.md §4).  Weights carry global-local
    shrinkage priors; the global scale is set by EM.  Prediction fits the test
    rows' local factors with the global ones frozen and returns the closed-form
    Gaussian predictive (vbnn.md §10).  Several random restarts combine into a
    mixture weighted by ``exp(ensemble_temperature * ELBO)`` (vbnn.md §11).

    Parameters
    ----------
    hidden_layer_sizes : tuple of int, default=(50,)
    shrinkage : {"student_t", "laplace", "nig", "gaussian"}, default="student_t"
        Prior on the weights (vbnn.md §2.2, Table 1): inverse-gamma mixing
        (Student-t marginals with 3 degrees of freedom, the authors' choice),
        gamma mixing (Laplace), inverse-Gaussian mixing (normal-inverse
        Gaussian), or a plain Gaussian of variance ``prior_scale^2 / fan_in``
        (the paper's GVBNN baseline).
    temperature : float > 0, default=0.1
        Gate temperature ``T``; small values make the unit close to a ReLU
        (vbnn.md §10.5).
    solver : {"cavi", "svi"}, default="cavi"
        Full-batch coordinate ascent (Algorithm 1) or stochastic VI with
        mini-batches and Robbins-Monro steps (vbnn.md §8).
    batch_size : int, default=100
        Rows per SVI step, at most: an epoch splits the rows into
        ``ceil(n_samples / batch_size)`` batches as equal as possible.
    forgetting_rate : float in (0.5, 1], default=0.75
        SVI step sizes ``(1 + t)^-forgetting_rate``.
    max_iter : int, default=200
        CAVI iterations, or SVI epochs (passes over the data).  200 is the
        authors' cap; on small data sets CAVI is often still raising the ELBO
        slowly there (a relative change per iteration of about 5e-4 to 2e-3 on
        the diabetes data and in the example), and a ``ConvergenceWarning``
        says so.
    tol : float, default=1e-5
        Convergence when the relative ELBO change stays below ``tol`` for
        ``n_iter_no_change`` consecutive iterations (vbnn.md §5.1).
    n_iter_no_change : int, default=3
        Also the patience of prediction's local CAVI (``predict_tol``); read
        there at every call.
    n_init : int, default=10
        Random initialisations screened per restart: each runs
        ``init_max_iter`` CAVI iterations and the one with the highest ELBO is
        trained on (the authors' code screens 11 for 5 iterations).  CAVI
        converges to a local optimum, and a poor random start can leave the
        output weights shrunk to 0; screening avoids most of them.  Ignored by
        ``solver="svi"``.
    init_max_iter : int, default=5
    n_restarts : int, default=1
        Independent fits from different random initialisations, run in
        parallel (``n_jobs``) and combined as a mixture (vbnn.md §11).  The
        weights follow the ELBO, which on small data with deep networks can
        favour a collapsed restart that predicts the mean (a reviewer's 150
        rows and three hidden layers of 8: weight 0.999 on a restart of test
        R^2 0 beside one of 0.92); check ``elbos_`` and the restarts' fits there.
    ensemble_temperature : float > 0, default=0.1
        ``zeta`` in the restart weights ``exp(zeta * ELBO)``; the paper uses
        values in (0, 0.1].
    em_global : bool, default=True
        EM update of the global prior hyperparameter (vbnn.md §6.1).
    init : {"laplace", "spike_slab"}, default="laplace"
        Random initialisation of the hidden weights (Algorithm 3).
    prior_scale : float > 0 or None, default=None
        Scale of the global prior (``delta_glob`` for ``student_t``); None uses
        the authors' data-driven ``min(sqrt(max |OLS coefficient|), 10)`` on
        the standardised data.  With ``em_global=True`` and ``student_t`` or
        ``laplace``, EM re-estimates the one global hyperparameter it sets,
        so it is only EM's starting value (which local optimum CAVI reaches
        can still depend on it): search over it with ``em_global=False``.
        ``nig`` re-estimates ``lam_glob`` and keeps the ``delta_glob`` this
        sets; ``gaussian`` has no EM, and this is its prior.
    local_scale : float > 0, default=1.0
        Scale of the local priors before the ``1/sqrt(fan_in)`` scaling.  A
        weight's prior depends on it and ``prior_scale`` only through their
        product, so under EM (``student_t``, ``laplace``) it is a starting
        value as well.
    bias_std : float > 0, default=1.0
        Prior standard deviation of the biases (standardised units).
    noise_prior : (float, float) or None, default=None
        ``(alpha0, beta0)`` of the inverse-gamma prior on the output noise
        variance in standardised units; None uses ``alpha0 = 2`` and ``beta0 =``
        a quarter of the residual variance of a linear fit (the authors'
        default, vbnn.md §13.1), for each output its own; where the fit
        interpolates (``n_samples <= n_features + 1``), with a warning, a
        quarter of ``y``'s variance.
    hidden_noise_prior : (float, float), default=(2.0, 0.01)
        ``(alpha0_h, beta0_h)`` of the hidden units' noise variances.
    predict_max_iter : int, default=60
        Local CAVI iterations for test rows.  Prediction reads it (and
        ``predict_tol``) at every call, so both can be changed after ``fit``;
        an invalid value raises there.
    predict_tol : float, default=1e-7
        A test row stops once the relative change of its local ELBO has stayed
        at most ``predict_tol`` for ``n_iter_no_change`` consecutive
        iterations.  The paper's 1e-4 (vbnn.md §5.1) stopped the rows of a
        (10, 10, 10) network after about 12 iterations with predictive means up
        to 0.6 sd from their converged values (the local ELBO, of size ~50,
        barely moves while they approach); 1e-7 takes about 60 iterations
        there (0.01 sd).  With one hidden layer they differed by up to 0.011
        sd (UCI energy, split 0), and the UCI table moved in its last digit.
    n_jobs : int or None, default=None
        Parallel restarts (joblib).
    device : {"cpu", "cuda", "auto"}, default="cpu"
        Where fitting and prediction run: NumPy on the CPU, CuPy on a CUDA GPU
        (an error when CuPy or a GPU is missing), or the GPU when there is one.
    random_state : int, RandomState instance or None, default=None
    verbose : int, default=0
        Progress on stdout: a summary of the restarts after fitting when positive.

    Attributes
    ----------
    members_ : list of VBNNState
        The fitted global factors of each restart.
    elbos_ : ndarray of shape (n_restarts,)
        Final ELBO of each restart (standardised targets).
    weights_ : ndarray of shape (n_restarts,)
        Mixture weights, ``softmax(ensemble_temperature * elbos_)``.
    elbo_history_ : list of float
        ELBO after every iteration of the best restart.
    elbo_histories_ : list of list of float
        The same for every restart.
    n_iter_ : int
        Iterations (CAVI sweeps, or SVI epochs) of the longest restart's kept
        run, its ``init_max_iter`` screening iterations included.
    converged_ : ndarray of bool
        Whether each restart met the convergence criterion (a
        ``ConvergenceWarning`` says when one did not).
    n_features_in_, n_outputs_, x_scaler_, y_scaler_, device_

    Notes
    -----
    Targets are standardised internally and predictions reported in original
    units (the paper leaves ``y`` unscaled; the predictive is equivariant up to
    the data-driven prior defaults).  A CAVI iteration costs ``O(N L D^3)`` and
    the fit holds ``O(N L D^2)`` numbers (vbnn.md §6.2); use ``solver="svi"``
    for large ``N``.

    Examples
    --------
    >>> import numpy as np
    >>> from skbayesnn import VBNNRegressor
    >>> rng = np.random.default_rng(0)
    >>> X = rng.uniform(-2, 2, size=(150, 2))
    >>> y = np.sin(2 * X[:, 0]) + 0.1 * rng.normal(size=150)
    >>> reg = VBNNRegressor(hidden_layer_sizes=(10,), random_state=0).fit(X, y)
    >>> mean, std = reg.predict(X[:3], return_std=True)
    """

    _parameter_constraints: dict = {
        **BaseBayesianRegressor._parameter_constraints,
        "hidden_layer_sizes": ["array-like", Interval(Integral, 1, None, closed="left")],
        "shrinkage": [StrOptions(set(FAMILIES))],
        "temperature": [Interval(Real, MIN_SCALE, MAX_SCALE, closed="both")],
        "solver": [StrOptions({"cavi", "svi"})],
        "batch_size": [Interval(Integral, 1, None, closed="left")],
        "forgetting_rate": [Interval(Real, 0.5, 1, closed="right")],
        "max_iter": [Interval(Integral, 1, None, closed="left")],
        "tol": [Interval(Real, 0, None, closed="left")],
        "n_iter_no_change": [Interval(Integral, 1, None, closed="left")],
        "n_init": [Interval(Integral, 1, None, closed="left")],
        "init_max_iter": [Interval(Integral, 1, None, closed="left")],
        "n_restarts": [Interval(Integral, 1, None, closed="left")],
        "ensemble_temperature": [Interval(Real, 0, None, closed="neither")],
        "em_global": ["boolean"],
        "init": [StrOptions({"laplace", "spike_slab"})],
        "prior_scale": [Interval(Real, MIN_SCALE, MAX_SCALE, closed="both"), None],
        "local_scale": [Interval(Real, MIN_SCALE, MAX_SCALE, closed="both")],
        "bias_std": [Interval(Real, MIN_SCALE, MAX_SCALE, closed="both")],
        "noise_prior": ["array-like", None],
        "hidden_noise_prior": ["array-like"],
        "predict_max_iter": [Interval(Integral, 1, None, closed="left")],
        "predict_tol": [Interval(Real, 0, None, closed="left")],
        "n_jobs": [Integral, None],
    }

    _supports_multi_output = True
    _device_attributes = ("members_",)

    def __init__(
        self,
        hidden_layer_sizes=(50,),
        *,
        shrinkage="student_t",
        temperature=0.1,
        solver="cavi",
        batch_size=100,
        forgetting_rate=0.75,
        max_iter=200,
        tol=1e-5,
        n_iter_no_change=3,
        n_init=10,
        init_max_iter=5,
        n_restarts=1,
        ensemble_temperature=0.1,
        em_global=True,
        init="laplace",
        prior_scale=None,
        local_scale=1.0,
        bias_std=1.0,
        noise_prior=None,
        hidden_noise_prior=(2.0, 0.01),
        predict_max_iter=60,
        predict_tol=1e-7,
        n_jobs=None,
        device="cpu",
        random_state=None,
        verbose=0,
    ):
        self.hidden_layer_sizes = hidden_layer_sizes
        self.shrinkage = shrinkage
        self.temperature = temperature
        self.solver = solver
        self.batch_size = batch_size
        self.forgetting_rate = forgetting_rate
        self.max_iter = max_iter
        self.tol = tol
        self.n_iter_no_change = n_iter_no_change
        self.n_init = n_init
        self.init_max_iter = init_max_iter
        self.n_restarts = n_restarts
        self.ensemble_temperature = ensemble_temperature
        self.em_global = em_global
        self.init = init
        self.prior_scale = prior_scale
        self.local_scale = local_scale
        self.bias_std = bias_std
        self.noise_prior = noise_prior
        self.hidden_noise_prior = hidden_noise_prior
        self.predict_max_iter = predict_max_iter
        self.predict_tol = predict_tol
        self.n_jobs = n_jobs
        self.device = device
        self.random_state = random_state
        self.verbose = verbose

    # ------------------------------------------------------------------ fit
    def _settings(self, X, Y):
        """Hyperparameters resolved from the parameters and the (standardised)
        data: the authors' data-driven defaults (vbnn.md §7.1, §13.1)."""
        hidden = check_hidden_layer_sizes(self.hidden_layer_sizes)
        hidden_noise = _check_ig_prior(self.hidden_noise_prior, "hidden_noise_prior")
        Xh, Yh = asnumpy(X), asnumpy(Y)
        coef, resid_var = _linear_fit(Xh, Yh)
        if self.noise_prior is None:
            if Xh.shape[0] <= Xh.shape[1] + 1:
                # The linear fit interpolates: its residual is rounding, and the
                # floored prior gave predictive sds 25-90 times too small (3 rows).
                resid_var = Yh.var(axis=0)
                warn_user(
                    "VBNNRegressor: with n_samples <= n_features + 1 a linear fit "
                    "interpolates the data, so the noise prior's default takes a quarter of "
                    "y's variance instead of the fit's residual variance; pass noise_prior "
                    "to set it.",
                    UserWarning,
                )
            # A quarter of the linear fit's residual variance, per output (one
            # output's worst fit would otherwise set every output's noise),
            # floored so that a perfectly linear target leaves a proper prior.
            beta0 = np.maximum(np.asarray(resid_var, dtype=float) / 4.0, 1e-4)
            noise = (2.0, float(beta0[0]) if beta0.size == 1 else beta0)
        else:
            noise = _check_ig_prior(self.noise_prior, "noise_prior")
        scale = self.prior_scale
        if scale is None:
            scale = float(min(np.sqrt(max(np.max(np.abs(coef)), 1e-3)), 10.0))
        sizes = [X.shape[1], *hidden, Y.shape[1]]
        return dict(
            hidden=hidden,
            sizes=sizes,
            shrinkage=self.shrinkage,
            global_scale=scale,
            local_scale=float(self.local_scale),
            temperature=float(self.temperature),
            bias_var=float(self.bias_std) ** 2,
            alpha0=noise[0],
            beta0=noise[1],
            alpha0_hidden=hidden_noise[0],
            beta0_hidden=hidden_noise[1],
            init=self.init,
            solver=self.solver,
            max_iter=self.max_iter,
            tol=float(self.tol),
            patience=self.n_iter_no_change,
            n_init=self.n_init,
            init_max_iter=self.init_max_iter,
            em_global=self.em_global,
            batch_size=self.batch_size,
            forgetting_rate=float(self.forgetting_rate),
        )

    def _fit_scaled(self, X, Y, xp, rng):
        settings = self._settings(X, Y)
        seeds = rng.integers(np.iinfo(np.int32).max, size=self.n_restarts)
        # (no worker processes for one restart: starting them cost 1 s)
        n_jobs = 1 if xp is not np or self.n_restarts == 1 else self.n_jobs
        try:
            results = Parallel(n_jobs=n_jobs)(
                delayed(_fit_member)(X, Y, settings, int(seed)) for seed in seeds
            )
        except FloatingPointError as error:
            # (a precision matrix beyond repair or a non-finite ELBO: seen with
            # prior scales near the bounds, e.g. laplace with prior_scale=1e-10)
            raise ValueError(
                f"VBNN's coordinate ascent broke down ({error}); check the prior and "
                f"noise settings: shrinkage={self.shrinkage!r}, em_global={self.em_global!r}, "
                f"prior_scale={self.prior_scale!r} (used: {settings['global_scale']:.4g}), "
                f"local_scale={self.local_scale!r}, bias_std={self.bias_std!r}, "
                f"noise_prior={self.noise_prior!r}, temperature={self.temperature!r}."
            ) from error
        self.members_ = [r[0] for r in results]
        self.elbo_histories_ = [r[1] for r in results]
        self.converged_ = np.array([r[2] for r in results])
        self.elbos_ = np.array([h[-1] for h in self.elbo_histories_])
        logits = self.ensemble_temperature * (self.elbos_ - self.elbos_.max())
        self.weights_ = np.exp(logits) / np.sum(np.exp(logits))
        self.elbo_history_ = self.elbo_histories_[int(np.argmax(self.elbos_))]
        self.n_iter_ = max(len(h) for h in self.elbo_histories_)
        if not np.all(self.converged_):
            warn_user(
                f"VBNNRegressor: {int(np.sum(~self.converged_))} of {self.n_restarts} "
                f"restart(s) stopped at max_iter={self.max_iter} before the relative ELBO "
                f"change stayed below tol={self.tol:g} (converged_ says which); raise "
                "max_iter or tol.",
                ConvergenceWarning,
            )
        self._log(
            f"{self.n_restarts} restart(s): final ELBOs {np.round(self.elbos_, 3)}, "
            f"weights {np.round(self.weights_, 3)}, iterations "
            f"{[len(h) for h in self.elbo_histories_]}"
        )

    # -------------------------------------------------------------- predict
    def _local_state_params(self):
        """``local_state``'s ``max_iter``, ``tol`` and ``patience``, read (and
        checked) at every call."""
        return {"max_iter": self._prediction_param("predict_max_iter"),
                "tol": self._prediction_param("predict_tol"),
                "patience": self._prediction_param("n_iter_no_change")}

    def _member_moments(self, X, xp):
        """Per restart, the standardised predictive ``(mean, epistemic, aleatoric)``.

        The rows' local CAVIs are independent, so they run in chunks of
        ``_PREDICT_CHUNK`` rows, fewer for wide layers (:func:`_chunk_rows`):
        their state holds ``(n, D, D)`` arrays per layer (20,000 rows, one
        hidden layer of 50: a peak resident size of 1.67 GB at once, 0.32 GB in
        chunks, from 0.24 GB before predicting).
        """
        out = []
        params = self._local_state_params()
        for state in self.members_:
            with _far_inputs_refused():
                parts = [predict.predictive_moments(test)
                         for test in _local_states(state, X, params)]
            out.append(tuple(xp.concatenate([part[k] for part in parts], axis=0) for k in range(3)))
        return out

    def _predict_moments_scaled(self, X, xp):
        ((mean, epi, ale),) = self._member_moments(X, xp)
        return mean, epi, ale

    def predict_dist(self, X):
        """Predictive distribution at ``X``, in the target's original units.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)

        Returns
        -------
        dist : NormalPredictive or GaussianMixturePredictive
            With one restart, the closed-form Gaussian of vbnn.md §10.2 with its
            ``epistemic_var`` (weights and activations: it includes the hidden
            units' noise, so it does not vanish with more data) and
            ``aleatoric_var`` (the output noise ``E[eta^2]``).  With several, their mixture with
            weights ``weights_`` (vbnn.md §11), the same two parts separated.
        """
        if not hasattr(self, "members_") or len(self.members_) == 1:
            return super().predict_dist(X)
        X, xp = self._scaled_input(X)
        with np.errstate(over="ignore", invalid="ignore"):  # checked below
            members = [self._original_units(*m) for m in self._member_moments(X, xp)]
        # The component axis goes last (GaussianMixturePredictive's layout).
        means, epi, ale = (np.stack(parts, axis=-1) for parts in zip(*members))
        with np.errstate(over="ignore"):
            total = epi + ale  # (each part finite, their sum can overflow)
        self._check_finite_prediction(X, means, epi, ale, total)
        return GaussianMixturePredictive(means, total, self.weights_, aleatoric_vars=ale)

    def sample_predictive(self, X, n_samples=1, random_state=None):
        """Draws from the predictive by Eq. 25 (mixture members drawn by weight).

        Parameters
        ----------
        X : array-like of shape (n_samples_X, n_features)
        n_samples : int, default=1
        random_state : int, RandomState or Generator instance or None, default=None
            A NumPy ``Generator`` is used (and advanced) directly, as by the
            distributions' ``rvs``; the others seed one as scikit-learn does.

        Returns
        -------
        draws : ndarray of shape (n_samples, n_samples_X) or
            (n_samples, n_samples_X, n_outputs)
        """
        from sklearn.utils import check_random_state

        check_scalar(n_samples, "n_samples", Integral, min_val=1)
        Xs, _ = self._scaled_input(X)
        self._refuse_nan_inputs(Xs)
        params = self._local_state_params()
        if isinstance(random_state, np.random.Generator):
            rng = random_state
        else:
            seed = check_random_state(random_state).randint(np.iinfo(np.int32).max)
            rng = np.random.default_rng(seed)
        counts = rng.multinomial(n_samples, self.weights_)
        draws = []
        for state, count in zip(self.members_, counts):
            if count == 0:
                continue
            # Each draw's output weights and noise are shared by all rows (drawn
            # from its own seed in every chunk); the rows' local factors are
            # fitted and sampled chunk by chunk, as in prediction (all rows at
            # once took 6 times predict's memory).
            seeds = rng.integers(np.iinfo(np.int64).max, size=int(count))
            draw_output = predict.output_factor_sampler(state)
            with _far_inputs_refused(), np.errstate(over="ignore", invalid="ignore"):
                # (non-finite draws: checked below)
                parts = [asnumpy(predict.sample_given_output(test, draw_output, seeds, rng))
                         for test in _local_states(state, Xs, params)]
            draws.append(np.concatenate(parts, axis=1))
        draws = np.concatenate(draws, axis=0)[rng.permutation(n_samples)]
        with np.errstate(over="ignore", invalid="ignore"):  # checked below
            draws = draws * self.y_scaler_.scale_ + self.y_scaler_.mean_
        if not np.all(np.isfinite(draws)):
            # (as predict refuses such inputs: the draws were NaN, with only
            # numpy's warnings)
            raise ValueError(
                "VBNNRegressor.sample_predictive: the draws are not finite; the inputs are "
                "far outside the training scale.  Rescale or clip X."
            )
        return draws[..., 0] if self._y_ndim == 1 else draws

    # ------------------------------------------------------- node selection
    def select_nodes(self, fdr=0.01):
        """A sparse copy of the model by Bayesian false-discovery-rate selection.

        Keeps a weight when the posterior probability of its sign, ``Q =
        Phi(|m| / s)``, passes the threshold whose estimated Bayesian FDR is
        below ``fdr``; then removes hidden units left without incoming or
        outgoing weights and inputs without outgoing weights (vbnn.md §9,
        Algorithm 2).  The copy predicts with the surviving units only.

        Parameters
        ----------
        fdr : float in (0, 1), default=0.01

        Returns
        -------
        sparse : VBNNRegressor
            A fitted copy with, in addition, ``kept_masks_`` (per restart, per
            layer, boolean ``(n_out, n_in)`` of kept weights, in the original
            layout), ``n_units_`` (surviving units per hidden layer, per
            restart), ``selected_features_`` (boolean, inputs used by any
            restart) and ``thresholds_`` (the chosen ``kappa`` per restart).

        Notes
        -----
        The selection is made on a fitted model and is not a parameter: the
        copy's parameters are the model's, so ``clone``, ``cross_val_score``
        or ``GridSearchCV`` of the copy, or fitting it again (which warns),
        train the full network.  To score the sparse model, fit the full one
        on each training part and call ``select_nodes`` on it.
        """
        check_is_fitted(self)
        if not 0.0 < fdr < 1.0:
            raise ValueError(f"fdr must lie in (0, 1), got {fdr!r}.")
        if hasattr(self, "selected_features_"):
            raise ValueError(
                "This model is already a sparse copy made by select_nodes; call "
                "select_nodes on the fitted model it came from, with the fdr wanted."
            )
        sparse = copy.deepcopy(self)
        sparse.members_, sparse.kept_masks_, sparse.n_units_, sparse.thresholds_ = [], [], [], []
        features = np.zeros(self.n_features_in_, dtype=bool)
        for state in self.members_:
            result = selection.select(state, fdr)
            sparse.members_.append(result.state)
            sparse.kept_masks_.append(result.masks)
            sparse.n_units_.append(result.n_units)
            sparse.thresholds_.append(result.threshold)
            features |= result.inputs
        sparse.selected_features_ = features
        return sparse

    @_fit_context(prefer_skip_nested_validation=True)
    def fit(self, X, y):
        """Fit the model (a :meth:`select_nodes` copy is refitted as the full network).

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
        y : array-like of shape (n_samples,) or (n_samples, n_outputs)

        Returns
        -------
        self : object
            The fitted estimator.
        """
        if hasattr(self, "selected_features_"):
            warn_user(
                "VBNNRegressor.fit on a sparse copy made by select_nodes trains the full "
                "network of its parameters (the selection is not one of them); call "
                "select_nodes on the new fit for a sparse model.",
                UserWarning,
            )
        return super().fit(X, y)

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.non_deterministic = False
        return tags


# ----------------------------------------------------------------- helpers
def _local_states(state, X, params):
    """The local states (``predict.local_state``) of a restart's ``state`` at
    the rows of ``X``, chunk by chunk (:func:`_chunk_rows`)."""
    rows = _chunk_rows(state)
    for start in range(0, X.shape[0], rows):
        yield predict.local_state(state, X[start:start + rows], **params)[0]


@contextlib.contextmanager
def _far_inputs_refused():
    """A prediction's local CAVI that breaks down (a precision matrix not
    positive definite, for inputs ~1e300 through two hidden layers) raises
    the ValueError of inputs far outside the training scale."""
    try:
        yield
    except FloatingPointError as error:
        raise ValueError(
            f"VBNNRegressor cannot predict at these inputs ({error}): they are far outside "
            "the training scale.  Rescale or clip X."
        ) from error


def _fit_member(X, Y, settings, seed):
    """One restart: screen ``n_init`` random initialisations for ``init_max_iter``
    CAVI iterations each and keep the one with the highest ELBO (the authors'
    model choice, vbnn.md §11), then run CAVI (or SVI) to the end.  Returns the
    global factors, the ELBO history and whether it converged."""
    rng = np.random.default_rng(seed)
    sizes = settings["sizes"]

    def make_prior():
        return ShrinkagePrior.build(
            settings["shrinkage"],
            [(sizes[j + 1], sizes[j]) for j in range(len(sizes) - 1)],
            global_scale=settings["global_scale"],
            local_scale=settings["local_scale"],
        )

    common = dict(
        temperature=settings["temperature"],
        bias_var=settings["bias_var"],
        alpha0=settings["alpha0"],
        beta0=settings["beta0"],
        alpha0_hidden=settings["alpha0_hidden"],
        beta0_hidden=settings["beta0_hidden"],
        init=settings["init"],
    )
    run = dict(tol=settings["tol"], patience=settings["patience"], em_global=settings["em_global"])
    if settings["solver"] == "svi":
        state, history, converged = svi.run_svi(
            X,
            Y,
            settings["hidden"],
            rng=rng,
            batch_size=settings["batch_size"],
            forgetting_rate=settings["forgetting_rate"],
            max_epochs=settings["max_iter"],
            prior=make_prior(),
            **run,
            **common,
        )
        return state.globals_only(), history, converged
    best = None
    screen = min(settings["init_max_iter"], settings["max_iter"])
    for _ in range(settings["n_init"]):
        state = cavi.initialize(X, Y, settings["hidden"], rng=rng, prior=make_prior(), **common)
        history, converged = cavi.run_cavi(state, Y, max_iter=screen, **run)
        if best is None or history[-1] > best[1][-1]:
            best = (state, history, converged)
    state, history, converged = best
    if not converged and settings["max_iter"] > len(history):
        more, converged = cavi.run_cavi(
            state, Y, max_iter=settings["max_iter"] - len(history), history=history, **run
        )
        history = more
    return state.globals_only(), history, converged


def _linear_fit(X, Y):
    """Least-squares coefficients and residual variance per output (a tiny
    ridge keeps it defined when features are collinear or outnumber rows)."""
    n, p = X.shape
    Xt = np.column_stack([np.ones(n), X])
    reg = 1e-6 * n * np.eye(p + 1)
    reg[0, 0] = 0.0
    coef = np.linalg.solve(Xt.T @ Xt + reg, Xt.T @ Y)
    resid = Y - Xt @ coef
    return coef[1:], resid.var(axis=0)


def _check_ig_prior(value, name):
    arr = np.asarray(value, dtype=float)
    if arr.shape != (2,) or not np.all(np.isfinite(arr)) or np.any(arr <= 0):
        raise ValueError(f"{name} must be two positive numbers (shape, scale), got {value!r}.")
    if arr[0] <= 1.0:
        raise ValueError(f"{name}: the shape must exceed 1 for a finite prior mean, got {arr[0]}.")
    return float(arr[0]), float(arr[1])


__all__ = ["VBNNRegressor"]
