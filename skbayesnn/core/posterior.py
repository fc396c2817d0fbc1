"""The common currency of all estimators: a diagonal Gaussian posterior over an MLP.

Every method in skbayesnn ends with independent Gaussians over the weights and
biases of a multilayer perceptron (analytic_predictive.md §13.1): message passing
stores natural parameters, TAGI and PBP store means and variances, VBNN stores
variational factors.  Each converts to :class:`GaussianMLPPosterior`, and the
shared predictive (:func:`skbayesnn.core.propagate.propagate`) and the Monte Carlo
reference work on that object.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from .._backend import array_namespace, to_device
from .._random import check_rng
from .activations import activation_value, check_activation


@dataclass(eq=False)  # (the generated == compares lists of arrays: ambiguous truth value)
class GaussianMLPPosterior:
    """Independent Gaussian weights and biases of an MLP.

    Layer ``l`` maps ``a`` (``n_in``) to ``h = W a + b`` (``n_out``), with
    ``W[k, i] ~ N(weight_means[l][k, i], weight_vars[l][k, i])`` and
    ``b[k] ~ N(bias_means[l][k], bias_vars[l][k])``.  Hidden layers apply
    ``activation``; the last layer is linear (regression output or logits).

    Parameters
    ----------
    weight_means, weight_vars : list of arrays of shape (n_out, n_in)
    bias_means, bias_vars : list of arrays of shape (n_out,)
    activation : str or list of str, default="relu"
        Hidden activation, one name for every hidden layer or one per hidden layer
        (see :data:`skbayesnn.core.activations.ACTIVATIONS`).
    negative_slope : float, default=0.01
        Slope of ``leaky_relu`` for negative inputs.

    Examples
    --------
    >>> import numpy as np
    >>> from skbayesnn.core.posterior import GaussianMLPPosterior
    >>> post = GaussianMLPPosterior.from_sizes([3, 5, 1], weight_var=0.1, random_state=0)
    >>> post.layer_sizes
    [3, 5, 1]
    """

    weight_means: list
    weight_vars: list
    bias_means: list
    bias_vars: list
    activation: object = "relu"
    negative_slope: float = 0.01
    _hidden: list = field(init=False, repr=False)

    def __post_init__(self):
        lists = (self.weight_means, self.weight_vars, self.bias_means, self.bias_vars)
        n_layers = len(self.weight_means)
        if n_layers == 0 or any(len(v) != n_layers for v in lists):
            raise ValueError(
                "weight_means, weight_vars, bias_means and bias_vars must be non-empty "
                f"lists of equal length, got lengths {[len(v) for v in lists]}."
            )
        for l, (wm, wv, bm, bv) in enumerate(zip(*lists)):
            if wm.ndim != 2 or wv.shape != wm.shape:
                raise ValueError(
                    f"layer {l}: weight mean and variance must be 2-D arrays of equal "
                    f"shape, got {wm.shape} and {wv.shape}."
                )
            if bm.shape != (wm.shape[0],) or bv.shape != bm.shape:
                raise ValueError(
                    f"layer {l}: bias mean and variance must have shape ({wm.shape[0]},), "
                    f"got {bm.shape} and {bv.shape}."
                )
            if l > 0 and wm.shape[1] != self.weight_means[l - 1].shape[0]:
                raise ValueError(
                    f"layer {l} expects {wm.shape[1]} inputs but layer {l - 1} has "
                    f"{self.weight_means[l - 1].shape[0]} outputs."
                )
            if 0 in wm.shape:
                raise ValueError(f"layer {l} has no weights (shape {wm.shape}).")
            xp = array_namespace(wv, bv)
            # (written so that NaN and inf fail too: propagate would return NaN silently)
            if not all(bool(xp.all((v >= 0) & xp.isfinite(v))) for v in (wv, bv)):
                raise ValueError(
                    f"layer {l}: weight and bias variances must be finite and >= 0 (not NaN)."
                )
            if not (bool(xp.all(xp.isfinite(wm))) and bool(xp.all(xp.isfinite(bm)))):
                raise ValueError(f"layer {l}: weight and bias means must be finite.")
        n_hidden = n_layers - 1
        if isinstance(self.activation, str):
            hidden = [self.activation] * n_hidden
        else:
            hidden = list(self.activation)
            if len(hidden) != n_hidden:
                raise ValueError(
                    f"activation lists {len(hidden)} names for {n_hidden} hidden layers."
                )
        self._hidden = [check_activation(a) for a in hidden]

    # ------------------------------------------------------------------ shape
    @property
    def n_layers(self):
        """Number of weight layers (hidden layers + 1)."""
        return len(self.weight_means)

    @property
    def layer_sizes(self):
        """Widths ``[n_inputs, hidden..., n_outputs]``."""
        return [self.weight_means[0].shape[1]] + [w.shape[0] for w in self.weight_means]

    @property
    def hidden_activations(self):
        """Activation name of each hidden layer."""
        return list(self._hidden)

    # ------------------------------------------------------------ conversion
    def _replace(self, f):
        """Copy with ``f`` applied to every array."""
        return GaussianMLPPosterior(
            [f(w) for w in self.weight_means],
            [f(w) for w in self.weight_vars],
            [f(b) for b in self.bias_means],
            [f(b) for b in self.bias_vars],
            activation=list(self._hidden) if self._hidden else self.activation,
            negative_slope=self.negative_slope,
        )

    def is_finite(self):
        """Whether every mean and variance is finite."""
        xp = array_namespace(self.weight_means[0])
        return all(
            bool(xp.all(xp.isfinite(a)))
            for a in self.weight_means + self.weight_vars + self.bias_means + self.bias_vars
        )

    def to_namespace(self, xp):
        """Return a copy whose arrays live in namespace ``xp`` (NumPy or CuPy);
        ``to_namespace(numpy)`` copies them to the host."""
        return self._replace(lambda a: to_device(a, xp))

    @classmethod
    def from_sizes(
        cls,
        layer_sizes,
        *,
        weight_var=1.0,
        bias_var=1.0,
        mean_scale=None,
        activation="relu",
        negative_slope=0.01,
        random_state=None,
    ):
        """A posterior with random means, handy for tests and priors.

        Means are drawn ``N(0, mean_scale**2 / n_in)`` (``mean_scale=None`` gives 1,
        i.e. He-like scaling without the factor 2); variances are constant.
        """
        if len(layer_sizes) < 2 or any(int(n) < 1 for n in layer_sizes):
            raise ValueError(f"layer_sizes must be >= 2 positive ints, got {layer_sizes!r}.")
        rs = check_rng(random_state)
        wm, wv, bm, bv = [], [], [], []
        for n_in, n_out in zip(layer_sizes[:-1], layer_sizes[1:]):
            scale = (1.0 if mean_scale is None else mean_scale) / np.sqrt(n_in)
            wm.append(rs.normal(0.0, scale, size=(n_out, n_in)))
            wv.append(np.full((n_out, n_in), float(weight_var)))
            bm.append(rs.normal(0.0, scale, size=n_out))
            bv.append(np.full(n_out, float(bias_var)))
        return cls(wm, wv, bm, bv, activation=activation, negative_slope=negative_slope)

    # --------------------------------------------------------- deterministic
    def forward(self, X, weights=None, biases=None):
        """The deterministic network at the given weights (default: posterior means).

        ``weights``/``biases`` may carry a leading sample axis: ``W`` of shape
        ``(S, n_out, n_in)`` and ``b`` of shape ``(S, n_out)`` give outputs of shape
        ``(S, n, n_outputs)``.
        """
        weights = self.weight_means if weights is None else weights
        biases = self.bias_means if biases is None else biases
        h = X
        for l, (w, b) in enumerate(zip(weights, biases)):
            # (..., n, n_in) @ (..., n_in, n_out): works for one network and for a
            # stack of S sampled networks alike.
            h = h @ w.swapaxes(-1, -2) + b[..., None, :]
            if l < self.n_layers - 1:
                h = activation_value(self._hidden[l], h, negative_slope=self.negative_slope)
        return h

    def sample_weights(self, n_samples, random_state=None):
        """Draw ``n_samples`` networks from the posterior.

        Standard normal draws come from a NumPy generator on the host (so results
        are identical on every device for a given seed) and are moved to the
        posterior's namespace.

        Returns
        -------
        weights, biases : lists of arrays with a leading axis of length ``n_samples``
        """
        rs = check_rng(random_state)
        xp = array_namespace(self.weight_means[0])
        weights, biases = [], []
        for wm, wv, bm, bv in zip(
            self.weight_means, self.weight_vars, self.bias_means, self.bias_vars
        ):
            zw = to_device(rs.standard_normal((n_samples,) + tuple(wm.shape)), xp)
            zb = to_device(rs.standard_normal((n_samples,) + tuple(bm.shape)), xp)
            weights.append(wm + xp.sqrt(wv) * zw)
            biases.append(bm + xp.sqrt(bv) * zb)
        return weights, biases
