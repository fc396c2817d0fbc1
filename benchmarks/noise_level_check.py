"""The fixed-noise check of ``fit`` (TAGIRegressor's ``sigma_v``,
MessagePassingRegressor's ``noise_std``): the training rows outside their 95%
predictive intervals, and what they say of the test rows.

Usage:
    OPENBLAS_NUM_THREADS=1 python benchmarks/noise_level_check.py [--data-home ../shared/uci]

For sklearn's diabetes (fixed 80/20 split) and split 0 of wine-quality-red,
yacht and kin8nm, at the defaults and with ``sigma_v=0.1``: the share of the
training rows and of the test rows outside their central 95% predictive
intervals (``skbayesnn.base.share_outside_intervals``, 0.05 for a calibrated
predictive), their ratio, and whether ``fit`` warned: it does where the
training share exceeds ``BaseBayesianRegressor._NOISE_SHARE_WARN``.

Then the classifiers' check: the share of the training and of the test rows
that get a probability below ``0.01 / (n_classes - 1)`` for their own label
(at most 0.01 for a calibrated classifier), test accuracy, and whether ``fit``
warned (training share above ``BaseBayesianClassifier._WRONG_SHARE_WARN``):
TAGIClassifier with ``gain_w`` 1 and 1000 on three classes of two Gaussian
features (the signs of two features; 200 rows each), and
MessagePassingClassifier (one layer of 32 units, 10 epochs) with the argmax
and softmax likelihoods on 5 and 40 classes of ``make_classification``
(20 features, 10 informative; 1000 rows each).
"""

import argparse
import warnings

import numpy as np
from sklearn.datasets import load_diabetes, make_classification
from sklearn.model_selection import train_test_split

from skbayesnn import (
    MessagePassingClassifier,
    MessagePassingRegressor,
    TAGIClassifier,
    TAGIRegressor,
)
from skbayesnn.base import share_outside_intervals

from _uci_cli import add_data_home, data_home


def outside(model, X, y):
    dist = model.predict_dist(X)
    return float(share_outside_intervals(np.abs(y - dist.mean()) / dist.std()))


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_data_home(parser)
    args = parser.parse_args()
    home = data_home(parser, args)
    from skbayesnn.datasets import load_uci

    X, y = load_diabetes(return_X_y=True)
    sets = {"diabetes": train_test_split(X, y, test_size=0.2, random_state=0)}
    for name in ("wine-quality-red", "yacht", "kin8nm"):
        d = load_uci(name, 0, data_home=home)
        sets[name] = (d.X_train, d.X_test, d.y_train, d.y_test)
    makers = {
        "TAGIRegressor()": lambda: TAGIRegressor(random_state=0),
        "TAGIRegressor(sigma_v=0.1)": lambda: TAGIRegressor(sigma_v=0.1, random_state=0),
        "MessagePassingRegressor()": lambda: MessagePassingRegressor(random_state=0),
    }
    print("share of rows outside their 95% predictive intervals (0.05 if calibrated)")
    print(f"{'data':<17} {'estimator':<27} {'train':>6} {'test':>6} {'ratio':>6}  warns")
    for data, (X_train, X_test, y_train, y_test) in sets.items():
        for name, make in makers.items():
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                model = make().fit(X_train, y_train)
            warned = any("predictive intervals" in str(w.message) for w in caught)
            train, test = outside(model, X_train, y_train), outside(model, X_test, y_test)
            ratio = f"{test / train:6.2f}" if train > 0 else f"{'-':>6}"
            print(f"{data:<17} {name:<27} {train:6.3f} {test:6.3f} {ratio}  "
                  f"{'yes' if warned else ''}")
    classifiers()


def own_label_below(model, X, y):
    """Share of rows whose own label gets a probability below 0.01 / (K - 1)."""
    proba = model.predict_proba(X)
    own = proba[np.arange(len(y)), np.searchsorted(model.classes_, y)]
    return float(np.mean(own < 0.01 / (len(model.classes_) - 1)))


def classifiers():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(400, 2))
    y = (X[:, 0] > 0).astype(int) + (X[:, 1] > 0)
    sets = {"3 classes": ((X[:200], X[200:], y[:200], y[200:]), {
        f"TAGIClassifier(gain_w={g:g})": (lambda g=g: TAGIClassifier(
            hidden_layer_sizes=(16,), max_epochs=5, gain_w=g, random_state=0))
        for g in (1.0, 1000.0)})}
    for k in (5, 40):
        X, y = make_classification(2000, 20, n_informative=10, n_classes=k,
                                   n_clusters_per_class=1, random_state=0)
        sets[f"{k} classes"] = ((X[:1000], X[1000:], y[:1000], y[1000:]), {
            f"MP({lik})": (lambda lik=lik: MessagePassingClassifier(
                (32,), likelihood=lik, max_epochs=10, random_state=0))
            for lik in ("argmax", "softmax")})
    print("\nshare of rows whose own label gets a probability below 0.01 / (K - 1) "
          "(at most 0.01 if calibrated)")
    print(f"{'data':<11} {'estimator':<29} {'train':>6} {'test':>6} {'acc':>6}  warns")
    for data, ((X_train, X_test, y_train, y_test), makers) in sets.items():
        for name, make in makers.items():
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                model = make().fit(X_train, y_train)
            warned = any("their own label" in str(w.message) for w in caught)
            print(f"{data:<11} {name:<29} {own_label_below(model, X_train, y_train):6.3f} "
                  f"{own_label_below(model, X_test, y_test):6.3f} "
                  f"{model.score(X_test, y_test):6.3f}  {'yes' if warned else ''}")


if __name__ == "__main__":
    main()
