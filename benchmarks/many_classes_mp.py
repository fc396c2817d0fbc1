"""Calibration of MessagePassingClassifier's three likelihoods as the number
of classes grows.

Usage:
    OPENBLAS_NUM_THREADS=1 python benchmarks/many_classes_mp.py [--classes 5 20 40]
        [--epochs 5] [--seed 0]

``predict_proba`` of the "argmax" and "regression" likelihoods is the paper's
pairwise-probit product (message_passing.md §5.11): ``P(c)`` proportional to
``prod_{d != c} P(a_c > a_d)``.  The pairs share ``a_c``, which the product
ignores, so it grows more confident with every class; "softmax" uses the probit
softmax (§5.9).  Data: sklearn's ``make_classification`` (3000 rows, 20
features of which 12 informative, one cluster per class, ``class_sep=1.5``;
70/30 split), and labels that are pure noise (400 rows, 4 features, 50
classes; 300 to train), where a calibrated model predicts close to ``1 / K``
(held-out NLL near ``log K``).  One hidden layer of 32 units, batch 32, the
other parameters at their defaults.  Prints held-out accuracy, top-label ECE
(15 bins), NLL, the mean of the largest probability and the fit's time per
example step (fit seconds over rows x epochs x 3 iterations per visit, after
a warm-up fit that compiles the kernel): the softmax factor integrates
numerically for every class, the others do not.
"""

import argparse
import time

import numpy as np
from sklearn.datasets import make_classification
from sklearn.model_selection import train_test_split

from skbayesnn import MessagePassingClassifier
from skbayesnn.metrics import categorical_nll, expected_calibration_error

LIKELIHOODS = ("argmax", "regression", "softmax")


def evaluate(X_train, y_train, X_test, y_test, likelihood, epochs, seed):
    model = MessagePassingClassifier((32,), likelihood=likelihood, batch_size=32,
                                     max_epochs=epochs, random_state=seed)
    start = time.perf_counter()
    model.fit(X_train, y_train)
    step_us = (time.perf_counter() - start) / (len(X_train) * epochs * 3) * 1e6
    p = model.predict_proba(X_test)
    return ((model.classes_[p.argmax(axis=1)] == y_test).mean(),
            expected_calibration_error(y_test, p, classes=model.classes_),
            categorical_nll(y_test, p, classes=model.classes_),
            p.max(axis=1).mean(), step_us)


def report(name, data, epochs, seed):
    for likelihood in LIKELIHOODS:
        acc, ece, nll, top, step_us = evaluate(*data, likelihood, epochs, seed)
        print(f"{name:<24}{likelihood:<12}{acc:>9.3f}{ece:>8.3f}{nll:>8.3f}{top:>12.3f}"
              f"{step_us:>9.1f}", flush=True)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--classes", type=int, nargs="+", default=[5, 20, 40])
    parser.add_argument("--epochs", type=int, default=5)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    # compile (or load) the kernel first, so that no fit's time includes it
    X, y = make_classification(60, 4, n_informative=3, n_redundant=0, n_classes=3,
                               random_state=0)
    for likelihood in LIKELIHOODS:
        MessagePassingClassifier((4,), likelihood=likelihood, max_epochs=1).fit(X, y)
    print(f"{'data':<24}{'likelihood':<12}{'accuracy':>9}{'ECE':>8}{'NLL':>8}{'mean max p':>12}"
          f"{'us/step':>9}")
    for k in args.classes:
        X, y = make_classification(3000, 20, n_informative=12, n_classes=k,
                                   n_clusters_per_class=1, class_sep=1.5, random_state=0)
        X_train, X_test, y_train, y_test = train_test_split(X, y, test_size=0.3, random_state=0)
        report(f"{k} classes (log K {np.log(k):.2f})", (X_train, y_train, X_test, y_test),
               args.epochs, args.seed)
    rng = np.random.default_rng(0)
    X = rng.normal(size=(400, 4))
    y = rng.integers(0, 50, size=400)
    report(f"noise, 50 (log K {np.log(50):.2f})", (X[:300], y[:300], X[300:], y[300:]),
           args.epochs, args.seed)


if __name__ == "__main__":
    main()
