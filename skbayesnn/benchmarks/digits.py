"""The README's classification table: the library's classifiers on sklearn's digits.

Prints test accuracy, expected calibration error (15 bins, top label) and
categorical NLL on one fixed stratified 75/25 split, next to sklearn's
``MLPClassifier`` with the same hidden layers.  The data ship with scikit-learn.
TAGI's hyperparameters are the ones ``benchmarks/digits_tagi.py`` chose by
3-fold cross-validated log-loss on the training part (for seed 0).
"""

from __future__ import annotations

import time

from sklearn.datasets import load_digits
from sklearn.model_selection import train_test_split
from sklearn.neural_network import MLPClassifier

from ..metrics import categorical_nll, expected_calibration_error


def available_classifiers(random_state=0):
    """``(name, estimator)`` pairs: the reference first, then the library's."""
    from .. import TAGIClassifier

    return [
        (
            "sklearn MLPClassifier (reference)",
            MLPClassifier((100, 100), max_iter=500, random_state=random_state),
        ),
        (
            "TAGIClassifier",
            TAGIClassifier(
                (100, 100), sigma_v=0.2, alpha=0.2, gain_w=0.25, random_state=random_state
            ),
        ),
    ]


def run(random_state=0):
    """Fit every classifier; returns ``[(name, accuracy, ece, nll, seconds), ...]``."""
    X, y = load_digits(return_X_y=True)
    X_train, X_test, y_train, y_test = train_test_split(
        X, y, test_size=0.25, stratify=y, random_state=0
    )
    rows = []
    for name, model in available_classifiers(random_state):
        start = time.perf_counter()
        model.fit(X_train, y_train)
        seconds = time.perf_counter() - start
        p = model.predict_proba(X_test)
        acc = float((model.classes_[p.argmax(axis=1)] == y_test).mean())
        rows.append(
            (name, acc, expected_calibration_error(y_test, p), categorical_nll(y_test, p), seconds)
        )
    return rows


def format_table(rows):
    head = f"{'classifier (100, 100) ReLU':<36} {'acc':>8} {'ECE':>8} {'NLL':>8} {'fit s':>8}"
    lines = [head, "-" * len(head)]
    for name, acc, ece, nll, seconds in rows:
        lines.append(f"{name:<36} {acc:>8.4f} {ece:>8.4f} {nll:>8.4f} {seconds:>8.2f}")
    return "\n".join(lines)


def main():
    print("sklearn load_digits, fixed stratified 75/25 split (random_state=0): test metrics")
    print(format_table(run()))
