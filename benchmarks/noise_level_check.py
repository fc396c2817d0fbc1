"""The fixed-noise check of ``fit`` (TAGIRegressor's ``sigma_v``,
MessagePassingRegressor's ``noise_std``): training residuals against the
predictive, and what they say of the test predictive.

Usage:
    OPENBLAS_NUM_THREADS=1 python benchmarks/noise_level_check.py [--data-home ../shared/uci]

For sklearn's diabetes (fixed 80/20 split) and split 0 of wine-quality-red,
yacht and kin8nm, at the defaults and with ``sigma_v=0.1``: the spread of the
standardised residuals ``z = (y - mean) / sd`` that ``fit`` checks,
``median |z| / 0.674`` (``skbayesnn.base.noise_ratio``: 1 for a calibrated
Gaussian predictive), on the training and on the test rows; their root mean
square on the test rows; and the test coverage of the 95% intervals.  ``fit``
warns where the training ratio exceeds
``BaseBayesianRegressor._NOISE_RATIO_WARN``; the table shows how the training
ratio tracks the test's and the coverage.
"""

import argparse
import warnings

import numpy as np
from sklearn.datasets import load_diabetes
from sklearn.model_selection import train_test_split

from skbayesnn import MessagePassingRegressor, TAGIRegressor
from skbayesnn.base import noise_ratio
from skbayesnn.datasets import load_uci
from skbayesnn.metrics import coverage

from _uci_cli import add_data_home, data_home


def abs_z(model, X, y):
    dist = model.predict_dist(X)
    return np.abs(y - dist.mean()) / dist.std()


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
    print(f"{'data':<17} {'estimator':<27} {'train':>6} {'test':>6} {'rms':>6} {'cov95':>6}  "
          "warns")
    for data, (X_train, X_test, y_train, y_test) in sets.items():
        for name, make in makers.items():
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                model = make().fit(X_train, y_train)
            warned = any("too narrow" in str(w.message) for w in caught)
            z_test = abs_z(model, X_test, y_test)
            print(f"{data:<17} {name:<27} {noise_ratio(abs_z(model, X_train, y_train)):6.2f} "
                  f"{noise_ratio(z_test):6.2f} {np.sqrt(np.mean(z_test ** 2)):6.2f} "
                  f"{coverage(y_test, model.predict_dist(X_test)):6.3f}  {'yes' if warned else ''}")


if __name__ == "__main__":
    main()
