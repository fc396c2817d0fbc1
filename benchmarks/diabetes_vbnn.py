"""VBNNRegressor on sklearn's diabetes data, against the VBNN paper's Table 3.

Usage: python benchmarks/diabetes_vbnn.py [--splits 10] [--fdr 0.01] [--n-jobs 2]

Protocol (vbnn.md §14.1, §14.4): 10 random 90/10 splits (``train_test_split``
with ``random_state`` 0..9), one hidden layer of 20 units, the library's
defaults, no tuning.  Prints per split and as mean ± standard error over splits
the test RMSE, NLL (mean negative log predictive density) and 95% coverage of
the full model, then of the model pruned by ``select_nodes(fdr)``: hidden units
and weights kept, and its RMSE relative to the full model's.  The paper's VBNN
row: RMSE 54.5 ± 7.2, NLL 5.4 ± .15, coverage .96 ± .04 (mean ± sd over its 10
splits).
"""

import argparse
import time
import warnings

import numpy as np
from joblib import Parallel, delayed
from sklearn.datasets import load_diabetes
from sklearn.exceptions import ConvergenceWarning
from sklearn.model_selection import train_test_split
from threadpoolctl import threadpool_limits

from skbayesnn import VBNNRegressor
from skbayesnn.metrics import coverage, nlpd

from _uci_cli import positive_int, standard_error


def run_split(split, fdr):
    # VBNN runs to its max_iter cap (the paper's protocol), with a ConvergenceWarning each fit
    warnings.filterwarnings("ignore", message="VBNNRegressor", category=ConvergenceWarning)
    X, y = load_diabetes(return_X_y=True)
    X_train, X_test, y_train, y_test = train_test_split(X, y, test_size=0.1, random_state=split)
    with threadpool_limits(1):
        start = time.perf_counter()
        model = VBNNRegressor((20,), random_state=split).fit(X_train, y_train)
        seconds = time.perf_counter() - start
        dist = model.predict_dist(X_test)
        sparse = model.select_nodes(fdr=fdr)
        sparse_pred = sparse.predict(X_test)
    rmse = float(np.sqrt(np.mean((dist.mean() - y_test) ** 2)))
    sparse_rmse = float(np.sqrt(np.mean((sparse_pred - y_test) ** 2)))
    n_weights = int(sum(m.sum() for m in sparse.kept_masks_[0]))
    return dict(
        rmse=rmse,
        nll=float(nlpd(y_test, dist)),
        cov=float(coverage(y_test, dist, 0.95)),
        seconds=seconds,
        units=sparse.n_units_[0][0],
        weights=n_weights,
        features=int(sparse.selected_features_.sum()),
        sparse_rmse=sparse_rmse,
    )


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--splits", type=positive_int, default=10)
    parser.add_argument("--fdr", type=float, default=0.01)
    parser.add_argument("--n-jobs", type=int, default=2)
    args = parser.parse_args()
    rows = Parallel(n_jobs=args.n_jobs)(
        delayed(run_split)(k, args.fdr) for k in range(args.splits)
    )
    print(
        f"{'split':>5}{'RMSE':>9}{'NLL':>8}{'cov95':>7}{'fit s':>7}"
        "   sparse: units weights inputs RMSE"
    )
    for k, r in enumerate(rows):
        print(
            f"{k:>5}{r['rmse']:>9.2f}{r['nll']:>8.3f}{r['cov']:>7.3f}{r['seconds']:>7.2f}"
            f"   {r['units']:>13d}{r['weights']:>8d}/{20 * 11}{r['features']:>5d}"
            f"{r['sparse_rmse']:>8.2f}"
        )

    def stat(key):
        v = np.array([r[key] for r in rows], dtype=float)
        return v.mean(), float(standard_error(v[:, None])[0])

    (rm, rs), (nm, ns), (cm, cs) = stat("rmse"), stat("nll"), stat("cov")
    (sm, ss) = stat("sparse_rmse")
    print(
        f"mean ± SE: RMSE {rm:.2f} ± {rs:.2f} (paper 54.5), NLL {nm:.3f} ± {ns:.3f} (paper 5.4), "
        f"coverage {cm:.3f} ± {cs:.3f} (paper .96)"
    )
    print(
        f"node selection (fdr={args.fdr}): units {stat('units')[0]:.1f} of 20, weights "
        f"{stat('weights')[0]:.1f} of 220, RMSE {sm:.2f} ± {ss:.2f} = {sm / rm:.4f} x full"
    )


if __name__ == "__main__":
    main()
