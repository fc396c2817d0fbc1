"""How the predictive's epistemic part shrinks with more data, per estimator.

Usage:
    OPENBLAS_NUM_THREADS=1 python benchmarks/variance_split.py

Data: ``y = x @ (1, -2, 0.5) + 3 + N(0, 0.5^2)`` with three standard normal
inputs; training sets of 300, 1000 and 3000 rows, one test set of 5000 rows.
Prints, per training size and estimator, the median over the test rows of the
noise standard deviation (``sqrt(aleatoric_var)``, the truth is 0.5), of the
epistemic standard deviation (``sqrt(epistemic_var)``) and the 95% interval
coverage of the total.  The epistemic part of an estimator whose weights'
uncertainty is all of it shrinks like ``1/sqrt(n)``; VBNN's also holds its
hidden units' noise, which does not shrink (the user guide, "Predictive
distributions").
"""

import warnings

import numpy as np

from skbayesnn import BayesianLinearRegressor, PBPRegressor, VBNNRegressor
from skbayesnn.metrics import coverage

COEF = np.array([1.0, -2.0, 0.5])


def data(rng, n):
    X = rng.normal(size=(n, 3))
    return X, X @ COEF + 3.0 + 0.5 * rng.normal(size=n)


def main():
    rng = np.random.default_rng(0)
    X_test, y_test = data(rng, 5000)
    makers = {
        "BayesianLinearRegressor": BayesianLinearRegressor,
        "PBPRegressor (50,)": lambda: PBPRegressor(random_state=0),
        "VBNNRegressor (10,)": lambda: VBNNRegressor((10,), max_iter=60, random_state=0),
    }
    print(f"{'n':>5}  {'estimator':<24} {'noise sd':>9} {'epistemic sd':>13} {'cov95':>6}")
    for n in (300, 1000, 3000):
        X, y = data(rng, n)
        for name, make in makers.items():
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")  # (VBNN's max_iter cap)
                dist = make().fit(X, y).predict_dist(X_test)
            print(f"{n:>5}  {name:<24} {np.sqrt(np.median(dist.aleatoric_var)):9.3f} "
                  f"{np.sqrt(np.median(dist.epistemic_var)):13.3f} "
                  f"{coverage(y_test, dist):6.3f}")


if __name__ == "__main__":
    main()
