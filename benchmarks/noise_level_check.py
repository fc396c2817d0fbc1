"""The fixed-noise check of ``fit`` (TAGIRegressor's ``sigma_v``,
MessagePassingRegressor's ``noise_std``): training residuals against the
predictive, and what they say of the test predictive.

Usage:
    OPENBLAS_NUM_THREADS=1 python benchmarks/noise_level_check.py [--data-home ../shared/uci]

For sklearn's diabetes (fixed 80/20 split) and split 0 of wine-quality-red,
yacht and kin8nm, at the defaults and with ``sigma_v=0.1``: the root mean
square of the standardised residuals ``(y - mean) / sd`` on the training rows
and on the test rows, and the test coverage of the 95% intervals.  ``fit``
warns where the training ratio exceeds 1.4
(``BaseBayesianRegressor._NOISE_RATIO_WARN``); the table shows how the
training ratio tracks the test ratio and the coverage.
"""

import argparse
import warnings

import numpy as np
from sklearn.datasets import load_diabetes
from sklearn.model_selection import train_test_split

from skbayesnn import MessagePassingRegressor, TAGIRegressor
from skbayesnn.datasets import load_uci
from skbayesnn.metrics import coverage

from _uci_cli import add_data_home, data_home


def ratio(model, X, y):
    dist = model.predict_dist(X)
    return float(np.sqrt(np.mean((y - dist.mean()) ** 2 / dist.var())))


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_data_home(parser)
    args = parser.parse_args()
    home = data_home(parser, args)
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
    print(f"{'data':<17} {'estimator':<27} {'train':>6} {'test':>6} {'cov95':>6}  warns")
    for data, (X_train, X_test, y_train, y_test) in sets.items():
        for name, make in makers.items():
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                model = make().fit(X_train, y_train)
            warned = any("too narrow" in str(w.message) for w in caught)
            print(f"{data:<17} {name:<27} {ratio(model, X_train, y_train):6.2f} "
                  f"{ratio(model, X_test, y_test):6.2f} "
                  f"{coverage(y_test, model.predict_dist(X_test)):6.3f}  {'yes' if warned else ''}")


if __name__ == "__main__":
    main()
