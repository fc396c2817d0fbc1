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
"""

import argparse
import warnings

import numpy as np
from sklearn.datasets import load_diabetes
from sklearn.model_selection import train_test_split

from skbayesnn import MessagePassingRegressor, TAGIRegressor
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


if __name__ == "__main__":
    main()
