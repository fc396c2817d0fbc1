"""TAGIClassifier against sklearn's MLPClassifier on sklearn's bundled digits.

Usage: python benchmarks/digits_tagi.py [--epochs 40] [--sigma-v 0.2 0.3]

Fixed stratified 75/25 split (random_state=0), 2x100 ReLU for both.  Prints test
accuracy, expected calibration error (15 bins, top label), categorical NLL and fit
seconds.
"""

import argparse
import time

from sklearn.datasets import load_digits
from sklearn.model_selection import train_test_split
from sklearn.neural_network import MLPClassifier

from skbayesnn import TAGIClassifier
from skbayesnn.metrics import categorical_nll, expected_calibration_error


def report(name, model, X_train, y_train, X_test, y_test):
    start = time.perf_counter()
    model.fit(X_train, y_train)
    seconds = time.perf_counter() - start
    p = model.predict_proba(X_test)
    acc = (model.classes_[p.argmax(axis=1)] == y_test).mean()
    print(
        f"{name:<34}{acc:>9.4f}{expected_calibration_error(y_test, p):>9.4f}"
        f"{categorical_nll(y_test, p):>9.4f}{seconds:>9.2f}"
    )


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--epochs", type=int, default=40)
    parser.add_argument("--sigma-v", type=float, nargs="*", default=[0.1, 0.2, 0.3])
    args = parser.parse_args()
    X, y = load_digits(return_X_y=True)
    X_train, X_test, y_train, y_test = train_test_split(
        X, y, test_size=0.25, stratify=y, random_state=0
    )
    print(f"{'model':<34}{'acc':>9}{'ECE':>9}{'NLL':>9}{'fit s':>9}")
    report(
        "MLPClassifier (100, 100)",
        MLPClassifier((100, 100), max_iter=500, random_state=0),
        X_train,
        y_train,
        X_test,
        y_test,
    )
    for sv in args.sigma_v:
        report(
            f"TAGIClassifier (100, 100) sv={sv}",
            TAGIClassifier((100, 100), sigma_v=sv, max_epochs=args.epochs, random_state=0),
            X_train,
            y_train,
            X_test,
            y_test,
        )


if __name__ == "__main__":
    main()
