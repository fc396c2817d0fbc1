"""PBPRegressor's EP sweep over the prior (``refine_prior``) after few passes.

Usage:
    OPENBLAS_NUM_THREADS=1 python benchmarks/pbp_prior_sweep.py

sklearn's diabetes in five row orders (order 0 as given, orders 1-4
permuted with seeds 1-4), the first 300 rows to train and the other 142 to
test (one hidden layer of 50 units, the defaults otherwise, ``random_state``
the order).  Prints the test R^2 with and without the sweep after ``fit``
with 1, 2, 5 and 40 epochs (``shuffle=False``) and after ``partial_fit``
streams: the 300 rows in one call, in two calls of 150, in 10 calls of 30
and in 100 calls of 3, and in how many orders the sweep did better.
The reference code sweeps after every pass over the data (pbp.md §4);
with ``refine_prior=True`` a ``partial_fit`` call is one pass over its batch
followed by a sweep (the default, "fit", sweeps after ``fit``'s epochs only,
and its ``partial_fit`` rows are those of False).  Last, the stream of
``examples/plot_pbp_regression.py`` (``y = x^3`` plus noise of sd 3, 4000
rows in 40 calls of 100): its test NLPD on 2000 fresh rows.
"""

import warnings

import numpy as np
from sklearn.datasets import load_diabetes

from skbayesnn import PBPRegressor
from skbayesnn.datasets import make_toy_regression
from skbayesnn.metrics import nlpd

N_ORDERS = 5


def main():
    X_all, y_all = load_diabetes(return_X_y=True)
    schemes = [("fit", e) for e in (1, 2, 5, 40)] + [("partial_fit", b) for b in (300, 150, 30, 3)]
    scores = {(scheme, refine): [] for scheme in schemes for refine in (True, False)}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # (the sweeps' and small batches' advice)
        for order in range(N_ORDERS):
            rows = (np.random.default_rng(order).permutation(len(y_all)) if order
                    else np.arange(len(y_all)))
            X, y = X_all[rows], y_all[rows]
            X_train, y_train, X_test, y_test = X[:300], y[:300], X[300:], y[300:]
            for (kind, size) in schemes:
                for refine in (True, False):
                    if kind == "fit":
                        model = PBPRegressor(max_epochs=size, shuffle=False,
                                             refine_prior=refine, random_state=order)
                        model.fit(X_train, y_train)
                    else:
                        model = PBPRegressor(refine_prior=refine, random_state=order)
                        for start in range(0, 300, size):
                            model.partial_fit(X_train[start:start + size],
                                              y_train[start:start + size])
                    scores[(kind, size), refine].append(model.score(X_test, y_test))
        print(f"diabetes, 300 training rows, test R^2 per row order 0-{N_ORDERS - 1} "
              "(higher is better)")
        print(f"{'training':<26}{'refine_prior=True':<37}{'False':<37}{'True better'}")
        for kind, size in schemes:
            name = (f"fit, {size} epochs" if kind == "fit"
                    else f"partial_fit, {300 // size} x {size} rows")
            with_, without = (np.array(scores[(kind, size), r]) for r in (True, False))
            print(f"{name:<26}{' '.join(f'{v:6.2f}' for v in with_):<37}"
                  f"{' '.join(f'{v:6.2f}' for v in without):<37}"
                  f"{int(np.sum(with_ > without))} of {N_ORDERS}")
        X, y = make_toy_regression(n_samples=4000, random_state=0)
        X_test, y_test = make_toy_regression(n_samples=2000, random_state=1)
        nlpds = []
        for refine in (True, False):
            model = PBPRegressor((50,), refine_prior=refine, random_state=0)
            for start in range(0, 4000, 100):
                model.partial_fit(X[start:start + 100], y[start:start + 100])
            nlpds.append(nlpd(y_test, model.predict_dist(X_test)))
        print(f"cubic stream, 40 x 100 rows: test NLPD {nlpds[0]:.3f} with the sweeps, "
              f"{nlpds[1]:.3f} without (lower is better)")


if __name__ == "__main__":
    main()
