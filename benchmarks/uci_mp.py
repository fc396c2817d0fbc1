"""MessagePassingRegressor on the standard UCI splits.

Usage:
    OPENBLAS_NUM_THREADS=1 python benchmarks/uci_mp.py [--data-home ../shared/uci]
        [--datasets bostonHousing ...] [--splits 20] [--n-jobs 2] [--epochs 40]
        [--epochs-large 10] [--large 5000] [--n-iter 3]
        [--tune-noise 0.1 0.2 0.4] [--tune-predictive-noise 0.2 0.3 0.4] [--cv 3]
        [--batch-size 256] [--hidden 64 64]

Protocol of message_passing.md §12.4: 2x64 LeakyReLU(0.1), batch 256, 3
iterations per batch visit, fixed noise std 0.4 in standardised target units,
EMA damping of the batch aggregates (§6), priors of §7; inputs and targets
standardised on the training part (per column).  Nothing is tuned: every split
uses these settings, the test part is used once.  The paper trains 500 epochs;
to keep the study to minutes this uses ``--epochs`` (40) and ``--epochs-large``
(10) for datasets with more than ``--large`` training rows (kin8nm).  Reports
the test RMSE and the average Gaussian test log-likelihood per point in
original units, mean ± standard error over splits (SE = std / sqrt(n_splits)),
next to this library's PBP (README, 1x50 ReLU, untuned) and TAGI (README, 1x50
ReLU, CV-tuned noise) rows.  The ``met`` column is issue 6's target: mean RMSE
no more than one standard error above the better of the two.

``--tune-noise`` departs from the paper's fixed 0.4: on every split the noise
std is chosen from the given values by ``--cv``-fold cross-validated NLPD
(``GridSearchCV`` with ``skbayesnn.metrics.neg_nlpd_scorer``) on the training
part only, then refitted on the whole training part; the test part is still
used once.  The chosen values are printed per dataset.

``--tune-predictive-noise`` (with ``--tune-noise``) chooses each
hyperparameter for what it controls: ``noise_std``, the training likelihood's
noise, by ``--cv``-fold CV RMSE (it sets how closely the mean fits), then
``predictive_noise_std``, the predictive's aleatoric part, by CV NLPD of those
same fold fits (it sets the calibration; prediction alone reads it, so no
extra fits).  A ``predictive_noise_std`` above ``noise_std`` is a tempered
likelihood (see the estimator's docstring).  The chosen pairs are printed.

``--hidden 50`` gives the one layer of 50 units of the PBP and TAGI rows (the
standard protocol of this benchmark) instead of the paper's 2x64.

``--batch-size`` departs from the paper's 256: training progresses by batch
visits (§6), and with 256 a dataset of a few hundred rows gets one or two visits
per epoch, so 40 epochs leave the network, and even more the smaller
cross-validation fits, far from converged (yacht's 3-fold CV then scores every
noise level at RMSE 4-8 and picks at random).  Batches of 32 cost the same per
epoch (the work is per example) and give 8x the visits.
"""

import argparse
import time
import warnings

import numpy as np
from joblib import Parallel, delayed
from sklearn.base import clone
from sklearn.model_selection import GridSearchCV, KFold, cross_validate

from skbayesnn import MessagePassingRegressor
from skbayesnn.datasets import load_uci, uci_n_splits
from skbayesnn.metrics import neg_nlpd_scorer, nlpd

from _uci_cli import add_data_home, data_home, dataset_names, positive_int, standard_error

# This library's PBP and TAGI rows from README.md: (RMSE, LL).
PBP = {
    "bostonHousing": (2.971, -2.554),
    "concrete": (5.672, -3.162),
    "energy": (1.820, -2.049),
    "kin8nm": (0.099, 0.894),
    "wine-quality-red": (0.634, -0.967),
    "yacht": (1.043, -1.646),
}
TAGI = {
    "bostonHousing": (2.893, -2.515),
    "concrete": (5.696, -3.162),
    "energy": (1.456, -1.822),
    "kin8nm": (0.095, 0.930),
    "wine-quality-red": (0.632, -0.960),
    "yacht": (0.803, -1.251),
}


def select_noise_pair(model, X, y, noise_grid, predictive_grid, cv):
    """``noise_std`` by CV RMSE, then ``predictive_noise_std`` by CV NLPD of the same fold fits."""
    rmse, nlpd_cv = [], []
    for noise in noise_grid:
        res = cross_validate(
            clone(model).set_params(noise_std=noise),
            X,
            y,
            cv=cv,
            scoring="neg_root_mean_squared_error",
            return_estimator=True,
            return_indices=True,
            error_score="raise",
        )
        rmse.append(-res["test_score"].mean())
        folds = list(zip(res["estimator"], res["indices"]["test"]))
        nlpd_cv.append([
            -np.mean([
                neg_nlpd_scorer(est.set_params(predictive_noise_std=b), X[va], y[va])
                for est, va in folds
            ])
            for b in predictive_grid
        ])
    i = int(np.argmin(rmse))
    return noise_grid[i], predictive_grid[int(np.argmin(nlpd_cv[i]))]


def run_split(
    name,
    split,
    data_home,
    epochs,
    n_iter,
    noise_grid=None,
    cv=3,
    batch_size=256,
    hidden=(64, 64),
    predictive_grid=None,
):
    with warnings.catch_warnings():
        # the noise searches' candidates of too small a noise say so (their
        # point), and a small data set's cross-validation folds may fit in one batch
        warnings.filterwarnings("ignore", message=".*predictive intervals")
        warnings.filterwarnings("ignore", message=".*fit in one batch")
        return _run_split(name, split, data_home, epochs, n_iter, noise_grid, cv, batch_size,
                          hidden, predictive_grid)


def _run_split(name, split, data_home, epochs, n_iter, noise_grid, cv, batch_size, hidden,
               predictive_grid):
    d = load_uci(name, split, data_home=data_home)
    start = time.perf_counter()
    model = MessagePassingRegressor(
        tuple(hidden),
        activation="leaky_relu",
        negative_slope=0.1,
        noise_std=0.4,
        batch_size=batch_size,
        max_epochs=epochs,
        n_iter_per_batch=n_iter,
        random_state=split,
    )
    if noise_grid and predictive_grid:
        noise, beta = select_noise_pair(
            model, d.X_train, d.y_train, list(noise_grid), list(predictive_grid),
            KFold(cv, shuffle=True, random_state=split),
        )
        model.set_params(noise_std=noise, predictive_noise_std=beta).fit(d.X_train, d.y_train)
    elif noise_grid:
        search = GridSearchCV(
            model,
            {"noise_std": list(noise_grid)},
            scoring=neg_nlpd_scorer,
            cv=KFold(cv, shuffle=True, random_state=split),
        )
        model = search.fit(d.X_train, d.y_train).best_estimator_
    else:
        model.fit(d.X_train, d.y_train)
    seconds = time.perf_counter() - start
    dist = model.predict_dist(d.X_test)
    rmse = float(np.sqrt(np.mean((dist.mean() - d.y_test) ** 2)))
    ll = -float(nlpd(d.y_test, dist))
    beta = model.predictive_noise_std
    return rmse, ll, seconds, model.noise_std, model.noise_std if beta is None else beta


def main():
    parser = argparse.ArgumentParser(description="Message passing on the UCI benchmark splits")
    add_data_home(parser)
    parser.add_argument("--datasets", nargs="*", default=None)
    parser.add_argument("--splits", type=positive_int, default=None,
                        help="first K splits (default: all)")
    parser.add_argument("--n-jobs", type=int, default=2)
    parser.add_argument("--epochs", type=int, default=40)
    parser.add_argument("--epochs-large", type=int, default=10)
    parser.add_argument("--large", type=int, default=5000, help="rows above which a dataset "
                        "gets --epochs-large")
    parser.add_argument("--n-iter", type=int, default=3)
    parser.add_argument("--batch-size", type=int, default=256)
    parser.add_argument("--hidden", type=int, nargs="+", default=[64, 64],
                        help="hidden layer sizes (the paper's 64 64; PBP and TAGI use 50)")
    parser.add_argument("--tune-noise", type=float, nargs="*", default=None,
                        help="noise std grid chosen per split by CV NLPD on the training part")
    parser.add_argument("--tune-predictive-noise", type=float, nargs="*", default=None,
                        help="predictive noise std grid; with --tune-noise, noise_std is "
                        "chosen by CV RMSE and this by CV NLPD")
    parser.add_argument("--cv", type=int, default=3)
    args = parser.parse_args()
    args.data_home = data_home(parser, args)
    if args.tune_predictive_noise and not args.tune_noise:
        parser.error("--tune-predictive-noise needs --tune-noise")
    names = dataset_names(parser, args, args.data_home)
    MessagePassingRegressor((4,), max_epochs=1).fit(np.ones((8, 2)), np.arange(8.0))  # compile
    print(f"{'dataset':<17}{'epochs':>6}{'RMSE':>16}{'PBP':>7}{'TAGI':>7}{'met':>5}"
          f"{'LL':>16}{'PBP':>7}{'TAGI':>7}{'s/split':>9}")
    for name in names:
        n = uci_n_splits(name, data_home=args.data_home)
        n = min(n, args.splits) if args.splits is not None else n
        rows = load_uci(name, 0, data_home=args.data_home).X_train.shape[0]
        epochs = args.epochs_large if rows > args.large else args.epochs
        res = Parallel(n_jobs=args.n_jobs)(
            delayed(run_split)(
                name,
                k,
                args.data_home,
                epochs,
                args.n_iter,
                args.tune_noise,
                args.cv,
                args.batch_size,
                args.hidden,
                args.tune_predictive_noise,
            )
            for k in range(n)
        )
        r = np.array(res, dtype=float)
        chosen = np.unique(r[:, 3:5], axis=0, return_counts=True)
        se = standard_error(r)
        pbp = PBP.get(name, (np.nan, np.nan))
        tagi = TAGI.get(name, (np.nan, np.nan))
        # issue 6's target: mean RMSE within one (our) standard error of the better of the two
        best = min(pbp[0], tagi[0])
        met = "yes" if r[:, 0].mean() - best <= se[0] else "no"
        print(
            f"{name[:16]:<17}{epochs:>6}{r[:, 0].mean():>9.4g}±{se[0]:<6.2g}{pbp[0]:>7.3f}"
            f"{tagi[0]:>7.3f}{met:>5}{r[:, 1].mean():>9.3f}±{se[1]:<6.3f}{pbp[1]:>7.3f}"
            f"{tagi[1]:>7.3f}{r[:, 2].mean():>9.1f}  noise_std[/predictive] "
            + ", ".join(
                (f"{v:g}" if v == b else f"{v:g}/{b:g}") + f" x{c}" for (v, b), c in zip(*chosen)
            ),
            flush=True,
        )


if __name__ == "__main__":
    main()
