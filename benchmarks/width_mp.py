"""MessagePassingRegressor's test R^2 against the width of one hidden layer.

Usage:
    OPENBLAS_NUM_THREADS=1 python benchmarks/width_mp.py [--widths 16 64 128 256 512]
        [--epochs 20 100] [--seeds 0 1 2]

Two small regression problems: ``sin(2x)`` on 200 points ``x ~ U(-2, 2)`` with
noise 0.1 (tested on the noise-free curve at 400 points), and sklearn's
``make_friedman1`` (10 features, 500 training and 500 test rows, noise 1).
Each network has one hidden layer of LeakyReLU(0.1) units, batches of 16, 3
iterations per batch visit and the paper's priors (message_passing.md §7);
``noise_std`` is 0.1 for the curve and 0.2 for Friedman's (standardised
targets).  Prints the mean test R^2 over the seeds (prior means and batch
order) and the mean fit seconds, per width and number of epochs.

The factor graph's weight marginals are fully factorised: a wide layer's
output is a sum of many weakly informed terms, each example's message to one
weight is correspondingly weak, and the means move towards the fit slowly
(Gaussian loopy belief propagation on many correlated weights).  The script
shows how much more training wide layers need.
"""

import argparse
import time

import numpy as np
from sklearn.datasets import make_friedman1
from sklearn.metrics import r2_score

from skbayesnn import MessagePassingRegressor


def problems():
    rng = np.random.default_rng(0)
    x = rng.uniform(-2.0, 2.0, size=(200, 1))
    y = np.sin(2.0 * x[:, 0]) + 0.1 * rng.normal(size=200)
    x_test = np.linspace(-2.0, 2.0, 400)[:, None]
    yield "sin(2x), 1 feature", x, y, x_test, np.sin(2.0 * x_test[:, 0]), 0.1
    X, y = make_friedman1(n_samples=1000, noise=1.0, random_state=0)
    yield "friedman1, 10 features", X[:500], y[:500], X[500:], y[500:], 0.2


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--widths", type=int, nargs="+", default=[16, 64, 128, 256, 512])
    parser.add_argument("--epochs", type=int, nargs="+", default=[20, 100])
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    args = parser.parse_args()
    # compile (or load) the Numba kernel outside the timings
    MessagePassingRegressor((4,), max_epochs=1).fit(np.ones((8, 1)) * np.arange(8)[:, None],
                                                    np.arange(8.0))
    for name, X, y, X_test, y_test, noise in problems():
        print(f"{name}: {len(X)} training rows; test R^2, mean over seeds {args.seeds}")
        print(f"{'width':>6}" + "".join(f"{f'{e} epochs':>22}" for e in args.epochs))
        for width in args.widths:
            cells = []
            for epochs in args.epochs:
                r2, secs = [], []
                for seed in args.seeds:
                    t = time.perf_counter()
                    model = MessagePassingRegressor((width,), max_epochs=epochs, batch_size=16,
                                                    noise_std=noise, random_state=seed)
                    model.fit(X, y)
                    secs.append(time.perf_counter() - t)
                    r2.append(r2_score(y_test, model.predict(X_test)))
                cells.append(f"{np.mean(r2):>14.3f} ({np.mean(secs):4.1f} s)")
            print(f"{width:>6}" + "".join(cells), flush=True)
        print()


if __name__ == "__main__":
    main()
