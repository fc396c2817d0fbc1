"""The analytic predictive against Monte Carlo and exact identities."""

import pickle

import numpy as np
import pytest

from skbayesnn._testing import assert_mc_close, mc_moments
from skbayesnn.core.posterior import GaussianMLPPosterior
from skbayesnn.core.propagate import (
    monte_carlo_predictive,
    probit_proba,
    propagate,
    sample_outputs,
)


def _posterior(sizes, var, activation="relu", seed=0):
    return GaussianMLPPosterior.from_sizes(
        sizes, weight_var=var, bias_var=var, activation=activation, random_state=seed
    )


def test_one_hidden_layer_moment_match_is_exact(rng):
    # With deterministic inputs the hidden units of the first layer are independent
    # (they depend on disjoint weight rows), so exact ReLU moments followed by the
    # exact linear moments give the exact output mean and variance: only Monte Carlo
    # error separates them.
    post = _posterior([3, 20, 1], var=0.3)
    X = rng.normal(size=(4, 3))
    mean, var = propagate(post, X, act_approx="moment_match")
    f = sample_outputs(post, X, 100_000, random_state=1)
    mc_mean, mc_var, se_m, se_v = mc_moments(f)
    assert_mc_close(mean, mc_mean, se_m, what="mean")
    assert_mc_close(var, mc_var, se_v, what="var")


@pytest.mark.parametrize("weight_var", [1e-4, 1e-3, 1e-2])
def test_two_hidden_layer_moment_match_tracks_monte_carlo(rng, weight_var):
    # From the second hidden layer on, units share inputs and are correlated and
    # non-Gaussian, which the diagonal propagation ignores: this is an
    # approximation, not an identity.  Stated tolerance (analytic_predictive.md
    # §16 check 6 saw 0.1 % and 1 % at these scales on a 3-50-50-1 net): mean error
    # below 5 % of the predictive standard deviation plus 5 MC standard errors, and
    # variance within 5 % plus 5 MC standard errors.
    post = _posterior([3, 50, 50, 1], var=weight_var, seed=3)
    X = rng.normal(size=(6, 3))
    mean, var = propagate(post, X, act_approx="moment_match")
    f = sample_outputs(post, X, 100_000, random_state=2)
    mc_mean, mc_var, se_m, se_v = mc_moments(f)
    assert np.all(np.abs(mean - mc_mean) <= 0.05 * np.sqrt(mc_var) + 5 * se_m)
    assert np.all(np.abs(var - mc_var) <= 0.05 * mc_var + 5 * se_v)


def test_moment_matching_beats_linearisation_when_variance_is_large(rng):
    # The failure mode that motivates act_approx="moment_match" (§16 check 6): with
    # wide posteriors the linearised mean stays at the mean network.
    post = _posterior([3, 50, 50, 1], var=1e-2, seed=3)
    X = rng.normal(size=(6, 3))
    f = sample_outputs(post, X, 50_000, random_state=4)
    mc_mean = f.mean(axis=0)
    err_mm = np.abs(propagate(post, X, act_approx="moment_match")[0] - mc_mean)
    err_lin = np.abs(propagate(post, X, act_approx="linearize")[0] - mc_mean)
    assert np.mean(err_mm) < np.mean(err_lin)


@pytest.mark.parametrize("activation", ["relu", "leaky_relu", "tanh", "sigmoid", "softplus"])
def test_linearized_mean_is_the_mean_network(rng, activation):
    post = _posterior([4, 16, 8, 2], var=0.5, activation=activation)
    X = rng.normal(size=(7, 4))
    mean, var = propagate(post, X, act_approx="linearize")
    np.testing.assert_allclose(mean, post.forward(X), rtol=1e-12, atol=1e-12)
    assert np.all(var >= 0)


@pytest.mark.parametrize("act_approx", ["linearize", "moment_match"])
@pytest.mark.parametrize("activation", ["relu", "tanh", "softplus"])
def test_zero_variance_gives_the_deterministic_network(rng, act_approx, activation):
    post = _posterior([4, 16, 8, 3], var=0.0, activation=activation)
    X = rng.normal(size=(5, 4))
    mean, var = propagate(post, X, act_approx=act_approx)
    np.testing.assert_allclose(mean, post.forward(X), rtol=1e-10, atol=1e-12)
    np.testing.assert_array_equal(var, 0.0)


def test_linear_network_input_uncertainty_first_layer_exact(rng):
    # Identity activation, one layer, random input: mean and variance exact.
    post = _posterior([3, 2], var=0.2, activation="identity")
    X, X_var = rng.normal(size=(4, 3)), rng.uniform(0.1, 1.0, size=(4, 3))
    mean, var = propagate(post, X, X_var)
    n = 200_000
    a = X + np.sqrt(X_var) * rng.standard_normal((n, 4, 3))
    # (a NumPy Generator, as every other draw of the library accepts)
    w, b = post.sample_weights(n, random_state=np.random.default_rng(5))
    f = np.einsum("ski,sni->snk", w[0], a) + b[0][:, None, :]
    mc_mean, mc_var, se_m, se_v = mc_moments(f)
    assert_mc_close(mean, mc_mean, se_m, what="mean")
    assert_mc_close(var, mc_var, se_v, what="var")


def test_return_layers_reports_consistent_moments(rng):
    post = _posterior([3, 8, 5, 1], var=0.1)
    X = rng.normal(size=(2, 3))
    mean, var, layers = propagate(post, X, act_approx="moment_match", return_layers=True)
    assert len(layers) == 2
    for layer in layers:
        assert np.all(layer["a_var"] <= layer["h_var"] + 1e-15)  # ReLU is 1-Lipschitz
        assert np.all((layer["jacobian"] >= 0) & (layer["jacobian"] <= 1))


def test_extreme_posteriors_never_produce_nan(rng):
    for var in (1e-30, 1e-6, 1.0, 1e6):
        for scale in (1e-3, 1.0, 40.0):
            post = GaussianMLPPosterior.from_sizes(
                [3, 10, 10, 1], weight_var=var, bias_var=var, mean_scale=scale, random_state=1
            )
            X = rng.normal(size=(5, 3)) * 40
            for act_approx in ("linearize", "moment_match"):
                m, v = propagate(post, X, act_approx=act_approx)
                assert np.all(np.isfinite(m)) and np.all(np.isfinite(v)) and np.all(v >= 0)


def test_probit_binary_against_monte_carlo():
    # analytic_predictive.md §16 check 5: the probit approximation is within ~0.005.
    z = np.random.default_rng(7).standard_normal(1_000_000)
    for mu, var in [(1.0, 1.0), (2.0, 9.0), (-0.5, 4.0)]:
        p = probit_proba(np.array([[mu]]), np.array([[var]]))
        mc = np.mean(1.0 / (1.0 + np.exp(-(mu + np.sqrt(var) * z))))
        assert abs(p[0, 1] - mc) < 0.006
        assert abs(p.sum() - 1.0) < 1e-15


def test_binary_probabilities_are_symmetric_in_the_tails():
    # p(class 0 | logit) = p(class 1 | -logit) exactly, so the small probability
    # keeps its relative accuracy on both sides (1 - expit(40) rounded to 0,
    # and a confident wrong prediction had log-loss inf)
    logits = np.array([[-40.0], [-8.0], [-0.3], [0.3], [8.0], [40.0]])
    p = probit_proba(logits, np.zeros_like(logits))
    np.testing.assert_array_equal(p[:, 0], p[::-1, 1])
    assert np.all(p > 0)
    np.testing.assert_allclose(p[-1, 0], np.exp(-40.0), rtol=1e-12)


def test_probit_softmax_reduces_to_softmax_without_variance(rng):
    mu = rng.normal(size=(4, 5))
    p = probit_proba(mu, np.zeros_like(mu))
    ref = np.exp(mu) / np.exp(mu).sum(axis=1, keepdims=True)
    np.testing.assert_allclose(p, ref, rtol=1e-13)
    # Variance shrinks confidence towards uniform.
    p_wide = probit_proba(mu, np.full_like(mu, 10.0))
    assert np.all(p_wide.max(axis=1) < p.max(axis=1))


def test_probit_softmax_properties(rng):
    # Eq. 55 is a heuristic (up to ~0.06 absolute error against Monte Carlo at
    # logit variances <= 1, see its docstring), so test what it guarantees:
    # normalised rows, symmetry, and no effect of a shift shared by logits of
    # equal variance (with unequal ones a shared shift does change it).
    mean = rng.normal(size=(20, 4))
    var = rng.uniform(0.0, 2.0, size=(20, 4))
    p = probit_proba(mean, var)
    np.testing.assert_allclose(p.sum(axis=1), 1.0, rtol=1e-14)
    perm = [2, 0, 3, 1]
    np.testing.assert_allclose(probit_proba(mean[:, perm], var[:, perm]), p[:, perm], rtol=1e-14)
    same = np.full((3, 4), 0.7)
    np.testing.assert_allclose(probit_proba(same, np.full((3, 4), 5.0)), 0.25, rtol=1e-14)
    row_var = np.repeat(var[:, :1], 4, axis=1)
    np.testing.assert_allclose(probit_proba(mean + 7.0, row_var), probit_proba(mean, row_var),
                               rtol=1e-12)
    assert np.abs(probit_proba(mean + 7.0, var) - p).max() > 0.05  # the documented limit


def test_monte_carlo_classification_head_averages_sampled_softmax(rng):
    post = _posterior([3, 10, 4], var=0.05)
    X = rng.normal(size=(5, 3))
    p_mc = monte_carlo_predictive(post, X, n_samples=500, head="classification", random_state=0)
    f = sample_outputs(post, X, 500, random_state=0)
    e = np.exp(f - f.max(axis=-1, keepdims=True))
    np.testing.assert_allclose(p_mc, (e / e.sum(axis=-1, keepdims=True)).mean(axis=0), rtol=1e-12)
    np.testing.assert_allclose(p_mc.sum(axis=1), 1.0, rtol=1e-12)


def test_monte_carlo_is_reproducible_and_validates():
    post = _posterior([2, 4, 1], var=0.1)
    X = np.ones((3, 2))
    a = monte_carlo_predictive(post, X, n_samples=50, random_state=3)
    b = monte_carlo_predictive(post, X, n_samples=50, random_state=3)
    np.testing.assert_array_equal(a[0], b[0])
    with pytest.raises(ValueError, match="head"):
        monte_carlo_predictive(post, X, head="poisson")
    with pytest.raises(ValueError, match="act_approx"):
        propagate(post, X, act_approx="unscented")


def test_posterior_validates_shapes():
    w = [np.zeros((4, 3)), np.zeros((1, 5))]
    with pytest.raises(ValueError, match="expects 5 inputs"):
        GaussianMLPPosterior(w, w, [np.zeros(4), np.zeros(1)], [np.zeros(4), np.zeros(1)])
    with pytest.raises(ValueError, match="hidden layers"):
        GaussianMLPPosterior.from_sizes([2, 3, 1]).__class__(
            [np.zeros((3, 2)), np.zeros((1, 3))],
            [np.zeros((3, 2)), np.zeros((1, 3))],
            [np.zeros(3), np.zeros(1)],
            [np.zeros(3), np.zeros(1)],
            activation=["relu", "tanh"],
        )


def test_propagate_strict_namespace(strict_xp, rng):
    xp, asarray = strict_xp
    post = _posterior([3, 6, 2], var=0.1)
    X = rng.normal(size=(4, 3))
    dev_post = post.to_namespace(xp)
    for act_approx in ("linearize", "moment_match"):
        m, v = propagate(dev_post, asarray(X), act_approx=act_approx)
        m_ref, v_ref = propagate(post, X, act_approx=act_approx)
        assert type(m).__name__ == "StrictArray"
        np.testing.assert_allclose(np.asarray(m), m_ref, rtol=1e-13)
        np.testing.assert_allclose(np.asarray(v), v_ref, rtol=1e-13)
    p = probit_proba(m, v)
    assert type(p).__name__ == "StrictArray"
    np.testing.assert_allclose(np.asarray(p), probit_proba(m_ref, v_ref), rtol=1e-13)
    # the draws come from the host generator: the same values on either namespace
    mc_m, mc_v = monte_carlo_predictive(dev_post, asarray(X), n_samples=10, random_state=0)
    assert type(mc_m).__name__ == "StrictArray"
    ref_m, ref_v = monte_carlo_predictive(post, X, n_samples=10, random_state=0)
    np.testing.assert_allclose(np.asarray(mc_m), ref_m, rtol=1e-12)
    np.testing.assert_allclose(np.asarray(mc_v), ref_v, rtol=1e-12)


def test_posterior_refuses_negative_variances_and_empty_layers():
    # A negative weight variance made propagate's output variance negative
    # (-8.87) and sample_weights NaN; a layer of 0 units divided by zero.
    with pytest.raises(ValueError, match="variances must be finite and >= 0"):
        GaussianMLPPosterior.from_sizes([2, 3, 1], weight_var=-1.0)
    post = GaussianMLPPosterior.from_sizes([2, 3, 1], random_state=0)
    bad = [v.copy() for v in post.bias_vars]
    bad[1][0] = -1e-3
    with pytest.raises(ValueError, match="variances must be finite and >= 0"):
        GaussianMLPPosterior(post.weight_means, post.weight_vars, post.bias_means, bad)
    with pytest.raises(ValueError, match="positive ints"):
        GaussianMLPPosterior.from_sizes([3, 0, 1])
    # NaN passed the old check (NaN < 0 is False) and propagate returned NaN.
    for field_name in ("weight_vars", "weight_means"):
        arrays = {name: [a.copy() for a in getattr(post, name)] for name in
                  ("weight_means", "weight_vars", "bias_means", "bias_vars")}
        arrays[field_name][0][0, 0] = np.nan
        with pytest.raises(ValueError, match="layer 0: weight and bias"):
            GaussianMLPPosterior(**arrays)


def test_posterior_refuses_infinite_variances_and_compares_by_identity():
    # An infinite weight variance passed the check; propagate gave 0 * inf = NaN.
    post = GaussianMLPPosterior.from_sizes([3, 2, 1], random_state=0)
    for name in ("weight_vars", "bias_vars"):
        arrays = {n: [a.copy() for a in getattr(post, n)] for n in
                  ("weight_means", "weight_vars", "bias_means", "bias_vars")}
        arrays[name][0][0] = np.inf
        with pytest.raises(ValueError, match="variances must be finite"):
            GaussianMLPPosterior(**arrays)
    # == on two posteriors raised (the dataclass compared lists of arrays)
    twin = pickle.loads(pickle.dumps(post))
    assert post != twin and post == post
    assert [post, twin].index(twin) == 1


def test_propagate_and_monte_carlo_validate_their_inputs():
    # A 1-D X gave Monte Carlo (S, 1) rows mixing sample s's weights with
    # sample t's biases; a negative X_var a negative output variance.
    post = GaussianMLPPosterior.from_sizes([3, 4, 1], weight_var=0.1, random_state=0)
    for call in (lambda X: propagate(post, X),
                 lambda X: monte_carlo_predictive(post, X, n_samples=10, random_state=0)):
        with pytest.raises(ValueError, match=r"shape \(n_samples, 3\)"):
            call(np.ones(3))
        with pytest.raises(ValueError, match=r"shape \(n_samples, 3\)"):
            call(np.ones((2, 4)))
    X = np.ones((2, 3))
    for bad in (-np.ones((2, 3)), np.full((2, 3), np.nan), np.full((2, 3), np.inf)):
        with pytest.raises(ValueError, match="X_var must be finite and >= 0"):
            propagate(post, X, bad)
    m0, v0 = propagate(post, X)
    m, v = propagate(post, X, np.zeros((2, 3)))  # zero input variance: deterministic inputs
    np.testing.assert_allclose(v, v0, rtol=1e-14)
    per_feature = np.array([0.1, 0.2, 0.3])  # one variance per feature broadcasts
    for x_var in (per_feature, per_feature[None, :]):
        np.testing.assert_allclose(propagate(post, X, x_var)[1],
                                   propagate(post, X, np.tile(per_feature, (2, 1)))[1], rtol=1e-14)
    with pytest.raises(ValueError, match="X_var must broadcast"):
        propagate(post, X, np.ones((3, 3)))
    for kwargs in (dict(n_samples=2.9), dict(n_samples=1), dict(chunk_size=0)):
        with pytest.raises(ValueError, match="n_samples|chunk_size"):
            monte_carlo_predictive(post, X, **kwargs)
    for scale in (-1.0, np.nan, np.inf):
        with pytest.raises(ValueError, match="scale"):
            probit_proba(m, v, scale=scale)
