"""TAGIClassifier and the hierarchical binary-tree class encoding (tagi.md §8)."""

import numpy as np
import pytest
from scipy.stats import norm
from sklearn.datasets import load_iris
from sklearn.utils.estimator_checks import parametrize_with_checks

from skbayesnn import TAGIClassifier
from skbayesnn.inference.tagi import ClassTree, forward


@parametrize_with_checks([TAGIClassifier(hidden_layer_sizes=(20,), max_epochs=10, random_state=0)])
def test_sklearn_compatible_estimator(estimator, check):
    check(estimator)


@pytest.mark.parametrize(
    "K, n_nodes", [(2, 1), (3, 3), (4, 3), (8, 7), (10, 11), (16, 15), (17, 20)]
)
def test_tree_has_one_node_per_distinct_proper_prefix(K, n_nodes):
    tree = ClassTree.build(K)
    depth = tree.nodes.shape[1]
    prefixes = {format(c, f"0{depth}b")[:h] for c in range(K) for h in range(depth)}
    assert tree.n_nodes == n_nodes == len(prefixes)
    # Every class has a distinct path (node, sign) sequence, and the root is shared.
    paths = {tuple(zip(tree.nodes[c], tree.signs[c])) for c in range(K)}
    assert len(paths) == K and np.all(tree.nodes[:, 0] == 0)


def test_targets_mark_exactly_the_path():
    tree = ClassTree.build(10)
    y = np.array([0, 3, 9, 9])
    Y, mask = tree.targets(y, np)
    assert np.all(mask.sum(axis=1) == 4)
    for row, c in enumerate(y):
        np.testing.assert_array_equal(np.flatnonzero(mask[row]), np.sort(tree.nodes[c]))
        np.testing.assert_array_equal(Y[row, tree.nodes[c]], tree.signs[c])
        assert np.all(Y[row, ~mask[row]] == 0)


def test_proba_is_the_probit_integral_and_a_distribution(rng):
    # One node: p(class 0) = E[Phi(y / alpha)], y ~ N(m, v) = Phi(m / sqrt(alpha^2 + v)).
    tree = ClassTree.build(2)
    m, v, alpha = 0.4, 0.5, 1 / 3
    p = tree.proba(np.array([[m]]), np.array([[v]]), alpha)
    z = np.random.default_rng(0).standard_normal(400_000)
    mc = norm.cdf((m + np.sqrt(v) * z) / alpha)
    assert abs(p[0, 0] - mc.mean()) < 5 * mc.std() / np.sqrt(z.size)
    np.testing.assert_allclose(p[0, 0], norm.cdf(m / np.sqrt(alpha**2 + v)), rtol=1e-12)
    # Full tree: the path products already sum to one (Phi(z) + Phi(-z) = 1 at
    # every node), so renormalisation changes nothing; for K = 10 it is needed.
    for K in (8, 10):
        tree = ClassTree.build(K)
        mean, var = rng.normal(size=(6, tree.n_nodes)), rng.uniform(0, 2, size=(6, tree.n_nodes))
        p = tree.proba(mean, var, alpha)
        np.testing.assert_allclose(p.sum(axis=1), 1.0, rtol=1e-13)
        raw = np.prod(
            norm.cdf(tree.signs * mean[:, tree.nodes] / np.sqrt(alpha**2 + var[:, tree.nodes])),
            axis=-1,
        )
        np.testing.assert_allclose(p, raw / raw.sum(axis=1, keepdims=True), rtol=1e-10)
        if K == 8:
            np.testing.assert_allclose(raw.sum(axis=1), 1.0, rtol=1e-12)


def test_proba_noise_only_changes_the_probit_variance():
    # Binary problem, one node: p(first class) = Phi(m / sqrt(alpha^2 + v [+ sigma_v^2]))
    # with (m, v) the network's output moments; training is the same either way.
    X, y = load_iris(return_X_y=True)
    X, y = X[y < 2], y[y < 2]
    kw = dict(hidden_layer_sizes=(8,), sigma_v=0.5, alpha=0.1, max_epochs=5, random_state=0)
    noisy = TAGIClassifier(**kw).fit(X, y)
    plain = TAGIClassifier(proba_noise=False, **kw).fit(X, y)
    for a, b in zip(noisy.posterior_.weight_means, plain.posterior_.weight_means):
        np.testing.assert_array_equal(a, b)
    m, v = forward(noisy.posterior_, noisy.x_scaler_.transform(X))
    p0 = norm.cdf(m[:, 0] / np.sqrt(0.1**2 + v[:, 0] + 0.5**2))
    np.testing.assert_allclose(noisy.predict_proba(X)[:, 0], p0, rtol=1e-10)
    np.testing.assert_allclose(
        plain.predict_proba(X)[:, 0], norm.cdf(m[:, 0] / np.sqrt(0.1**2 + v[:, 0])), rtol=1e-10
    )
    # With the noise, no probability passes Phi(|m| / sigma_v); without it, the
    # confident rows get sharper.
    assert np.all(np.abs(p0 - 0.5) <= np.abs(norm.cdf(np.abs(m[:, 0]) / 0.5) - 0.5))
    top = plain.predict_proba(X).max(axis=1)
    assert np.all(top >= noisy.predict_proba(X).max(axis=1)) and top.max() > norm.cdf(2.0)


def test_the_probit_noise_caps_the_confidence_at_the_defaults():
    # The docstring of proba_noise: with sigma_v = 0.3 and alpha = 1/3, node
    # outputs fitted exactly to their targets +-1 with no epistemic variance
    # give Phi(1 / sqrt(alpha^2 + sigma_v^2)) = Phi(2.23) = 0.987 per node and
    # 0.96-0.97 per class of the ten-class tree; without the noise, above 0.99.
    tree = ClassTree.build(10)
    Y, _ = tree.targets(np.arange(10), np)
    node = norm.cdf(1.0 / np.sqrt(1 / 9 + 0.09))
    assert round(1.0 / np.sqrt(1 / 9 + 0.09), 2) == 2.23 and round(node, 3) == 0.987
    p = tree.proba(Y, np.full_like(Y, 0.09), 1 / 3)
    np.testing.assert_array_equal(p.argmax(axis=1), np.arange(10))
    assert 0.955 <= np.diag(p).min() and np.diag(p).max() <= 0.975
    assert np.diag(tree.proba(Y, np.zeros_like(Y), 1 / 3)).min() > 0.99


def test_confident_outputs_decode_the_class():
    tree = ClassTree.build(10)
    Y, _ = tree.targets(np.arange(10), np)
    p = tree.proba(5 * Y, np.zeros_like(Y), 1 / 3)
    np.testing.assert_array_equal(p.argmax(axis=1), np.arange(10))


def test_learns_iris_with_string_labels_and_streams():
    X, y = load_iris(return_X_y=True)
    labels = np.array(["setosa", "versicolor", "virginica"])[y]
    clf = TAGIClassifier(hidden_layer_sizes=(30,), max_epochs=30, random_state=0).fit(X, labels)
    assert list(clf.classes_) == list(labels[[0, 50, 100]])
    assert np.mean(clf.predict(X) == labels) > 0.95
    dist = clf.predict_dist(X)
    np.testing.assert_allclose(dist.proba.sum(axis=1), 1.0)
    # partial_fit over the data once equals one epoch of fit without shuffling.
    one = TAGIClassifier(hidden_layer_sizes=(30,), max_epochs=1, shuffle=False, random_state=0)
    online = TAGIClassifier(hidden_layer_sizes=(30,), random_state=0)
    one.fit(X, labels)
    online.partial_fit(X, labels, classes=np.unique(labels))
    np.testing.assert_array_equal(one.predict_proba(X), online.predict_proba(X))
    assert one.n_iter_ == online.n_iter_ == 1
    with pytest.raises(ValueError, match="classes must be passed"):
        TAGIClassifier().partial_fit(X, labels)


def test_early_stopping_scores_the_held_out_log_loss_and_keeps_the_best_epoch():
    # The score after each epoch is minus sklearn's log-loss of the held-out rows;
    # the kept posterior is the best epoch's, which refitting up to it reproduces.
    from sklearn.metrics import log_loss

    X, y = load_iris(return_X_y=True)
    labels = np.array(["setosa", "versicolor", "virginica"])[y]
    kw = dict(
        hidden_layer_sizes=(10,),
        sigma_v=0.05,
        early_stopping=True,
        validation_fraction=0.3,
        n_iter_no_change=100,
        random_state=2,
    )
    a = TAGIClassifier(max_epochs=30, **kw).fit(X, labels)
    val = a.validation_indices_
    assert len(val) == 45 and len(a.validation_scores_) == a.n_iter_ == 30
    assert a.best_epoch_ == int(np.argmax(a.validation_scores_)) + 1 < 30
    best = a.validation_scores_[a.best_epoch_ - 1]
    assert best == pytest.approx(
        -log_loss(labels[val], a.predict_proba(X[val]), labels=a.classes_), rel=1e-10
    )
    b = TAGIClassifier(max_epochs=a.best_epoch_, **kw).fit(X, labels)
    np.testing.assert_allclose(b.predict_proba(X), a.predict_proba(X), rtol=0, atol=0)
    c = TAGIClassifier(max_epochs=30, **{**kw, "n_iter_no_change": 2}).fit(X, labels)
    assert c.n_iter_ == min(30, c.best_epoch_ + 2)
    # Without early stopping every row trains and the last epoch is kept.
    d = TAGIClassifier(max_epochs=4, **{**kw, "early_stopping": False}).fit(X, labels)
    assert d.best_epoch_ == d.n_iter_ == 4 and d.validation_scores_ == []


def test_early_stopping_split_is_stratified():
    # Unstratified, a rare class could be held out whole: with 36 / 2 / 2 rows
    # and seed 1 the model never trained on class 2; train_test_split's
    # stratification only keeps each class in one of the two parts, which at
    # validation_fraction=0.7 held out a 2-row class whole on every seed.
    # Every class keeps a training row, and the parts follow the classes'
    # shares.
    rng = np.random.default_rng(0)
    X = rng.normal(size=(40, 2))
    y = np.array([0] * 36 + [1] * 2 + [2] * 2)
    for fraction, n_val in ((0.2, 8), (0.7, 28)):
        for seed in range(6):
            clf = TAGIClassifier((8,), early_stopping=True, validation_fraction=fraction,
                                 max_epochs=2, random_state=seed).fit(X, y)
            held = clf.validation_indices_
            train = np.setdiff1d(np.arange(40), held)
            assert set(y[train]) == {0, 1, 2} and len(held) == n_val
            assert np.sum(y[held] == 0) in (int(fraction * 36), int(fraction * 36) + 1)
    # a class of one row trains, and the others are still stratified
    y1 = np.array([0] * 37 + [1] * 2 + [2])
    clf = TAGIClassifier((8,), early_stopping=True, validation_fraction=0.5, max_epochs=2,
                         random_state=0).fit(X, y1)
    train = np.setdiff1d(np.arange(40), clf.validation_indices_)
    assert set(y1[train]) == {0, 1, 2} and len(clf.validation_indices_) == 20


def test_stratified_holdout_breaks_ties_by_the_random_state_and_fills_the_split():
    # Equal remainders (balanced classes) went to the lowest class indices on
    # every seed: with 10 classes of 10 rows and 5% held out, classes 5-9 were
    # never validated.  And the rows still missing were handed out once per
    # class, so a split could stay short although a large class had rows left.
    from skbayesnn.tagi import _stratified_holdout

    strata = np.repeat(np.arange(10), 10)
    chosen = set()
    for seed in range(8):
        perm = np.random.default_rng(seed).permutation(100)
        out, n_val = _stratified_holdout(perm, strata, 5)
        assert n_val == 5 and len(set(strata[out[:5]])) == 5
        chosen.add(tuple(sorted(set(strata[out[:5]]))))
    assert len(chosen) > 1
    strata = np.concatenate([np.repeat(np.arange(10), 2), np.full(100, 10)])
    perm = np.random.default_rng(0).permutation(120)
    out, n_val = _stratified_holdout(perm, strata, 96)
    assert n_val == 96
    train = out[n_val:]
    assert set(strata[train]) == set(range(11))
    np.testing.assert_array_equal(np.sort(out), np.arange(120))


@pytest.mark.parametrize("proba_noise", [True, False])
def test_predict_dist_members_carry_the_mutual_information(rng, proba_noise):
    # With n_samples, predict_dist's members are the class probabilities at
    # node outputs drawn from their Gaussian predictive.  For two classes the
    # tree is one node, and Eq. 24's probit is exact over a Gaussian
    # (E Phi(z / a) = Phi(m / sqrt(a^2 + v))): the members' mean is
    # predict_proba within Monte Carlo error.
    from skbayesnn._testing import assert_members_describe_the_predictive

    X = rng.normal(size=(200, 2))
    y = np.where(X[:, 0] + 0.5 * rng.normal(size=200) > 0, "b", "a")
    clf = TAGIClassifier((8,), max_epochs=5, proba_noise=proba_noise, random_state=0).fit(X, y)
    dist = clf.predict_dist(X[:50], n_members=4000, random_state=0)
    members = dist.member_proba
    assert members.shape == (4000, 50, 2) and list(dist.classes) == ["a", "b"]
    assert_members_describe_the_predictive(clf, X[:50], dist)
