"""MessagePassingClassifier (argmax, one-hot regression, softmax) against
MLPClassifier on sklearn's bundled digits.

Usage:
    OPENBLAS_NUM_THREADS=1 python benchmarks/digits_mp.py [--epochs 10] [--n-iter 3]
        [--batch-size 256] [--max-abs-z 1] [--seeds 0 1 2 3 4]
        [--likelihoods argmax regression softmax]

The fixed stratified split of benchmarks/digits_tagi.py (test_size=0.25,
stratify=y, random_state=0).  Hidden layers (100, 100) for every model.
Message passing (message_passing.md §3.3, §5.8-5.11): LeakyReLU(0.1), the
priors of §7, batch 256, 3 iterations per batch visit, EMA damping (§6); the
one-hot regression uses the paper's ``beta = 0.1``; the argmax factor has its
default one-hot regularisation ``N(+-1, 0.1)`` (§5.11; without it the
(100, 100) network stays at chance); ``predict_proba`` is the
pairwise-probit argmax product (§5.11) for "argmax" and "regression" and the
probit softmax (§5.9) for "softmax".  Inputs: ``max_abs_z=1`` scales every
pixel by its training range, close to the paper's one global pixel scale
(§10; per-column standardisation, ``--max-abs-z 0``, blows the rarely lit
border pixels up to |z| of 20-40).  Nothing is tuned.  MLPClassifier((100,
100), max_iter=500) with its other defaults.  Each model is fitted with every
seed (prior means, batch order; the split stays fixed); prints the mean ±
standard error over seeds of test accuracy, top-label ECE (15 bins) and NLL,
and the mean fit time.
"""

import argparse
import time

import numpy as np
from sklearn.datasets import load_digits
from sklearn.model_selection import train_test_split
from sklearn.neural_network import MLPClassifier

from skbayesnn import MessagePassingClassifier
from skbayesnn.metrics import categorical_nll, expected_calibration_error


def evaluate(model, X_train, y_train, X_test, y_test):
    start = time.perf_counter()
    model.fit(X_train, y_train)
    seconds = time.perf_counter() - start
    p = model.predict_proba(X_test)
    acc = (model.classes_[p.argmax(axis=1)] == y_test).mean()
    return [acc, expected_calibration_error(y_test, p, classes=model.classes_),
            categorical_nll(y_test, p, classes=model.classes_), seconds]


def report(name, make_model, seeds, data):
    r = np.array([evaluate(make_model(seed), *data) for seed in seeds])
    se = r.std(axis=0, ddof=1) / np.sqrt(len(r)) if len(r) > 1 else np.zeros(4)
    cells = "".join(f"{m:>8.4f}±{e:<7.4f}" for m, e in zip(r.mean(0)[:3], se[:3]))
    print(f"{name:<36}{cells}{r[:, 3].mean():>7.1f}", flush=True)


def main():
    parser = argparse.ArgumentParser(description="Message passing on digits")
    parser.add_argument("--epochs", type=int, default=10)
    parser.add_argument("--n-iter", type=int, default=3)
    parser.add_argument("--batch-size", type=int, default=256)
    parser.add_argument("--max-abs-z", type=float, default=1.0, help="0: plain standardisation")
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2, 3, 4])
    parser.add_argument("--likelihoods", nargs="+", default=["argmax", "regression", "softmax"])
    parser.add_argument("--no-mlp", action="store_true")
    args = parser.parse_args()
    X, y = load_digits(return_X_y=True)
    X_train, X_test, y_train, y_test = train_test_split(
        X, y, test_size=0.25, stratify=y, random_state=0
    )
    data = (X_train, y_train, X_test, y_test)
    print(f"digits: {len(y_train)} train / {len(y_test)} test, seeds {args.seeds}; "
          f"MP: {args.epochs} epochs, batch {args.batch_size}, {args.n_iter} iterations/batch, "
          f"max_abs_z {args.max_abs_z or None}")
    print(f"{'model':<36}{'accuracy':>16}{'ECE':>16}{'NLL':>16}{'fit s':>7}")
    MessagePassingClassifier((4,), max_epochs=1).fit(X_train[:20], y_train[:20] % 2)  # compile
    for lik in args.likelihoods:

        def make(seed, lik=lik):
            return MessagePassingClassifier(
                (100, 100),
                likelihood=lik,
                batch_size=args.batch_size,
                max_epochs=args.epochs,
                n_iter_per_batch=args.n_iter,
                max_abs_z=args.max_abs_z or None,
                random_state=seed,
            )

        report(f"MP {lik}", make, args.seeds, data)
    if not args.no_mlp:
        report(
            "MLPClassifier (100, 100)",
            lambda seed: MLPClassifier((100, 100), max_iter=500, random_state=seed),
            args.seeds,
            data,
        )


if __name__ == "__main__":
    main()
