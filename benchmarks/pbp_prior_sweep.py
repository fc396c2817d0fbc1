"""PBPRegressor's EP sweep over the prior (``refine_prior``) after few passes.

Usage:
    OPENBLAS_NUM_THREADS=1 python benchmarks/pbp_prior_sweep.py

sklearn's diabetes, the first 300 rows to train and the other 142 to test
(one hidden layer of 50 units, the defaults otherwise, ``random_state=0``).
Prints the test R^2 (higher is better) with and without the sweep after ``fit`` with 1, 2, 3, 5,
10 and 40 epochs (``shuffle=False``) and after ``partial_fit`` streams: the
300 rows in one call, in two calls of 150, in 10 calls of 30 and in 100 calls
of 3.  The reference code sweeps after every pass over the data (pbp.md §4);
with ``refine_prior=True`` a ``partial_fit`` call is one pass over its batch
followed by a sweep (the default, "fit", sweeps after ``fit``'s epochs only,
and its ``partial_fit`` rows are those of False).  Last, the stream of
``examples/plot_pbp_regression.py`` (``y = x^3`` plus noise of sd 3, 4000
rows in 40 calls of 100): its test NLPD on 2000 fresh rows.
"""

import warnings

from sklearn.datasets import load_diabetes

from skbayesnn import PBPRegressor
from skbayesnn.datasets import make_toy_regression
from skbayesnn.metrics import nlpd


def main():
    X, y = load_diabetes(return_X_y=True)
    X_train, y_train, X_test, y_test = X[:300], y[:300], X[300:], y[300:]
    print(f"{'training':<28}{'refine_prior=True':>18}{'False':>8}")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # (the sweeps' and small batches' advice)
        for epochs in (1, 2, 3, 5, 10, 40):
            scores = [PBPRegressor(max_epochs=epochs, shuffle=False, refine_prior=refine,
                                   random_state=0).fit(X_train, y_train).score(X_test, y_test)
                      for refine in (True, False)]
            print(f"{f'fit, {epochs} epochs':<28}{scores[0]:>18.3f}{scores[1]:>8.3f}")
        for size in (300, 150, 30, 3):
            scores = []
            for refine in (True, False):
                model = PBPRegressor(refine_prior=refine, random_state=0)
                for start in range(0, 300, size):
                    model.partial_fit(X_train[start:start + size], y_train[start:start + size])
                scores.append(model.score(X_test, y_test))
            print(f"{f'partial_fit, {300 // size} x {size} rows':<28}{scores[0]:>18.3f}"
                  f"{scores[1]:>8.3f}")
        X, y = make_toy_regression(n_samples=4000, random_state=0)
        X_test, y_test = make_toy_regression(n_samples=2000, random_state=1)
        scores = []
        for refine in (True, False):
            model = PBPRegressor((50,), refine_prior=refine, random_state=0)
            for start in range(0, 4000, 100):
                model.partial_fit(X[start:start + 100], y[start:start + 100])
            scores.append(nlpd(y_test, model.predict_dist(X_test)))
        print(f"{'cubic, 40 x 100 rows (NLPD)':<28}{scores[0]:>18.3f}{scores[1]:>8.3f}")


if __name__ == "__main__":
    main()
