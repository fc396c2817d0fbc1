"""Fit time and accuracy of VBNNRegressor against the authors' Python VBNN.

Usage, from the repository root, with the peer venv described below (it has NumPy < 2,
which the authors' code needs, and an editable install of this working tree):

    ~/peers/vbnn-venv/bin/python benchmarks/speed_vbnn_vs_reference.py
        [--datasets bostonHousing concrete energy yacht] [--splits 0 1 2]
        [--data-home ../shared/uci] [--reference-dir ~/peers/vbnn_ref]
        [--ref-runs 10] [--ref-epochs 100] [--reference-only]

For each dataset and split, in this one process and on the same UCI split (files under
--data-home, read by skbayesnn.datasets.load_uci), it fits

* the reference: ``run_reference.fit_predict(X_train, y_train, X_test, n_hidden=50,
  seed=split)``, i.e. the authors' single-run CAVI VBNN as their test.ipynb runs it
  (helper.ELBO_Simple: 11 'laplace' inits, 5 epochs each, the best ELBO kept and trained
  for up to 100 epochs, stop at relative ELBO change < 1e-5 three times; test-time CAVI
  up to 40 iterations, tol 1e-5; T = 0.1, big_S = 0.01, Student-t(3) shrinkage
  nu = -1.5, inverse-gamma noise priors, EM on the global scale), one hidden layer of 50;
* ours: ``skbayesnn.VBNNRegressor(hidden_layer_sizes=(50,), random_state=split)`` with
  ``.fit(X_train, y_train)`` and ``.predict(X_test, return_std=True)``.

Both get the raw split; the reference standardises X on the training part and keeps y in
its units (paper App. D.2), and ours is expected to do the same internally.  Metrics are
in original y units: RMSE, Gaussian NLL = -mean log N(y | mean, var) with var the total
predictive variance (the reference's var_tot = linear part + E[noise variance]; ours
std**2), and the empirical coverage of the central 95% Gaussian interval.  Threads are
limited to one (OPENBLAS/OMP/MKL/NUMBA_NUM_THREADS=1 before any import).  It prints one row
per split and, per dataset, the mean fit seconds of each, the ratio ours / reference, and
mean RMSE / NLL / coverage.  If ``VBNNRegressor`` cannot be imported (or with
--reference-only) the reference runs alone and a message says so.

The reference is slow: pure-Python loops over data points and units (its ELBO, evaluated
every epoch, is ~45% of an epoch), about 3 s per CAVI epoch on yacht (n=277) on one core;
yacht split 0 with the defaults (55 selection epochs + 100) took ~8 CPU-minutes, more for
the larger sets.  --ref-runs 0 (one init, no selection) and a smaller --ref-epochs
shorten it.

Setting up the reference (never committed here; a scratch peer outside the repository,
from github.com/sheinkmana/V_bowtie_NN, which has no licence file):

1.  Files, copied verbatim with the stored-repository read_file tool into ~/peers/vbnn_ref
    (character counts in parentheses; both at c1c91983b32849cb602294dc02a7a0f6d8141ff4):
        toy_example/VBNN_class.py (51367)  ->  ~/peers/vbnn_ref/VBNN_class.py
        toy_example/helper.py (8982)       ->  ~/peers/vbnn_ref/helper.py
    helper.py imports jax at module level and is not used here; its ELBO_Simple logic is
    repeated in run_reference.py so that fit and predict can be timed apart.
2.  ~/peers/vbnn_ref/run_reference.py (ours, not the authors'): ``fit_predict(X_train,
    y_train, X_test, n_hidden=50, seed=0, **kw) -> (mean, var, fit_seconds,
    predict_seconds)``; kw overrides L, T, wb_mode, big_S, runs, init_epochs, epochs,
    epochs_pred, rate, rate_pred.
3.  A venv with NumPy < 2 (under NumPy 2.4 VBNN_class.py stops at its first epoch with
    "TypeError: only 0-dimensional arrays can be converted to Python scalars": it calls
    math.sqrt on 1x1 arrays) and this working tree:
        python3 -m venv ~/peers/vbnn-venv
        ~/peers/vbnn-venv/bin/pip install "numpy<2" scipy scikit-learn   # 1.26.4, 1.17.1, 1.9.1
        ~/peers/vbnn-venv/bin/pip install -e /work/main
"""

import os

for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS", "NUMBA_NUM_THREADS"):
    os.environ[_var] = "1"

import argparse  # noqa: E402
import importlib  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
import warnings  # noqa: E402
from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402
from scipy.stats import norm  # noqa: E402
from sklearn.exceptions import ConvergenceWarning  # noqa: E402

import skbayesnn  # noqa: E402
from skbayesnn.datasets import load_uci  # noqa: E402

from _uci_cli import add_data_home, data_home, dataset_names  # noqa: E402

try:
    from skbayesnn import VBNNRegressor  # noqa: E402
except ImportError:  # not written yet
    VBNNRegressor = None

HIDDEN = 50
Z95 = norm.ppf(0.975)


def import_reference(path):
    """Import ``run_reference`` from the folder ``path``.

    Parameters
    ----------
    path : str
        Folder holding run_reference.py and the authors' VBNN_class.py.

    Returns
    -------
    module
        The ``run_reference`` module.
    """
    folder = Path(path).expanduser().resolve()
    if not (folder / "run_reference.py").is_file():
        sys.exit(f"no run_reference.py in {folder}; see this script's docstring to set it up")
    sys.path.insert(0, str(folder))
    return importlib.import_module("run_reference")


def gaussian_scores(y, mean, var):
    """RMSE, Gaussian NLL and 95% coverage of predictions.

    Parameters
    ----------
    y, mean, var : ndarray of shape (n,)
        Targets, predictive means and total predictive variances.

    Returns
    -------
    rmse, nll, coverage : float
    """
    y, mean, sd = (np.asarray(a, dtype=np.float64).reshape(-1) for a in (y, mean, var))
    sd = np.sqrt(sd)
    rmse = float(np.sqrt(np.mean((y - mean) ** 2)))
    nll = float(-np.mean(norm.logpdf(y, mean, sd)))
    coverage = float(np.mean(np.abs(y - mean) <= Z95 * sd))
    return rmse, nll, coverage


def run_reference(ref, d, seed, ref_kw):
    """Fit and predict with the reference on one split; seconds and scores."""
    mean, var, fit_s, _ = ref.fit_predict(d.X_train, d.y_train, d.X_test, n_hidden=HIDDEN,
                                          seed=seed, **ref_kw)
    return fit_s, gaussian_scores(d.y_test, mean, var)


def run_ours(d, seed):
    """Fit and predict with VBNNRegressor on one split; seconds and scores."""
    model = VBNNRegressor(hidden_layer_sizes=(HIDDEN,), random_state=seed)
    start = time.perf_counter()
    with warnings.catch_warnings():  # (it runs to its max_iter cap, as the reference)
        warnings.filterwarnings("ignore", message="VBNNRegressor", category=ConvergenceWarning)
        model.fit(d.X_train, d.y_train)
    fit_s = time.perf_counter() - start
    mean, std = model.predict(d.X_test, return_std=True)  # std includes the noise
    return fit_s, gaussian_scores(d.y_test, mean, np.asarray(std) ** 2)


def _fmt(res):
    if res is None:
        return f"{'-':>8}{'-':>7}{'-':>7}{'-':>6}"
    fit_s, (rmse, nll, cov) = res
    return f"{fit_s:8.1f}{rmse:7.2f}{nll:7.2f}{cov:6.2f}"


def main():
    parser = argparse.ArgumentParser(description="VBNNRegressor vs the authors' VBNN")
    add_data_home(parser)
    parser.add_argument("--datasets", nargs="*",
                        default=["bostonHousing", "concrete", "energy", "yacht"])
    parser.add_argument("--splits", nargs="*", type=int, default=[0, 1, 2])
    parser.add_argument("--reference-dir", default="~/peers/vbnn_ref")
    parser.add_argument("--ref-runs", type=int, default=None,
                        help="extra random inits of the reference (its default: 10)")
    parser.add_argument("--ref-epochs", type=int, default=None,
                        help="max CAVI epochs of the reference (its default: 100)")
    parser.add_argument("--reference-only", action="store_true")
    args = parser.parse_args()
    args.data_home = data_home(parser, args)
    args.datasets = dataset_names(parser, args, args.data_home)  # all checked before any run

    ref = import_reference(args.reference_dir)
    ref_kw = {}
    if args.ref_runs is not None:
        ref_kw["runs"] = args.ref_runs
    if args.ref_epochs is not None:
        ref_kw["epochs"] = args.ref_epochs
    if int(np.__version__.split(".")[0]) >= 2:
        print(f"warning: NumPy {np.__version__}; the authors' VBNN code needs NumPy < 2 "
              "(see the docstring for the peer venv)")
    ours_ok = VBNNRegressor is not None and not args.reference_only
    if VBNNRegressor is None:
        print(f"skbayesnn {skbayesnn.__version__} ({Path(skbayesnn.__file__).parent}) has no "
              "VBNNRegressor: running the reference alone")
    elif args.reference_only:
        print("--reference-only: running the reference alone")
    print(f"ours: skbayesnn {skbayesnn.__version__} from {Path(skbayesnn.__file__).parent}")
    print(f"reference: {Path(ref.__file__).parent}, options {dict(ref.DEFAULTS, **ref_kw)}")
    print(f"1x{HIDDEN}, one thread each; fit seconds, test RMSE, Gaussian NLL, 95% coverage")
    head = f"{'fit s':>8}{'RMSE':>7}{'NLL':>7}{'cov':>6}"
    print(f"{'':<20} |{'ours':^28} |{'reference':^28} |{'ours/':>7}")
    print(f"{'dataset':<15}{'split':>5} |{head} |{head} |{'ref':>7}")

    for name in args.datasets:
        rows = []
        for split in args.splits:
            d = load_uci(name, split, data_home=args.data_home)
            r = run_reference(ref, d, split, ref_kw)
            o = run_ours(d, split) if ours_ok else None
            ratio = f"{o[0] / r[0]:7.3f}" if o else f"{'-':>7}"
            print(f"{name:<15}{split:>5} |{_fmt(o)} |{_fmt(r)} |{ratio}", flush=True)
            rows.append((o, r))
        ref_fit = np.mean([r[0] for _, r in rows])
        ref_sc = np.mean([r[1] for _, r in rows], axis=0)
        line = (f"{name} mean over splits {args.splits}: reference fit {ref_fit:.1f} s, "
                f"RMSE {ref_sc[0]:.3f}, NLL {ref_sc[1]:.3f}, coverage {ref_sc[2]:.2f}")
        if ours_ok:
            our_fit = np.mean([o[0] for o, _ in rows])
            our_sc = np.mean([o[1] for o, _ in rows], axis=0)
            line += (f"; ours fit {our_fit:.1f} s, RMSE {our_sc[0]:.3f}, NLL {our_sc[1]:.3f}, "
                     f"coverage {our_sc[2]:.2f}; fit ratio ours/reference "
                     f"{our_fit / ref_fit:.3f}")
        print(line, flush=True)


if __name__ == "__main__":
    main()
