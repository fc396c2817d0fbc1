"""Size of a fitted MessagePassingRegressor and the cost of a later partial_fit,
with fit's batch slots folded into one (the default) or kept (warm_start=True).

Usage: OPENBLAS_NUM_THREADS=1 python benchmarks/fitted_size_mp.py [--rows 8000] [--batch-size 16]

A (64, 64) network fitted for one epoch (one iteration per visit) on ``--rows``
synthetic rows of 8 features in batches of ``--batch-size``, so fit makes
``rows / batch_size`` slots.  Prints, for both settings, the slots held, the
pickled size and the mean time of 20 partial_fit calls of 5 rows each (every
call recomputes the posterior from all slots), and the ratios kept / folded.
"""

import argparse
import pickle
import time

import numpy as np

from skbayesnn import MessagePassingRegressor


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=8000)
    parser.add_argument("--batch-size", type=int, default=16)
    args = parser.parse_args()
    rng = np.random.default_rng(0)
    X = rng.normal(size=(args.rows, 8))
    y = np.sin(X[:, 0]) + 0.1 * rng.normal(size=args.rows)
    MessagePassingRegressor((4,), max_epochs=1).fit(X[:50], y[:50])  # load the kernel
    rows = {}
    for name, warm_start in (("folded (default)", False), ("kept (warm_start)", True)):
        model = MessagePassingRegressor((64, 64), batch_size=args.batch_size, max_epochs=1,
                                        n_iter_per_batch=1, warm_start=warm_start,
                                        random_state=0).fit(X, y)
        size = len(pickle.dumps(model))
        start = time.perf_counter()
        for k in range(20):
            model.partial_fit(X[5 * k : 5 * k + 5], y[5 * k : 5 * k + 5])
        seconds = (time.perf_counter() - start) / 20
        rows[name] = (model.state_.n_slots, size, seconds)
        print(f"{name:<20} slots after the calls {model.state_.n_slots:5d}  pickle "
              f"{size / 1e6:8.2f} MB  partial_fit {seconds * 1e3:7.2f} ms per call")
    (_, s0, t0), (_, s1, t1) = rows.values()
    print(f"kept / folded: pickle {s1 / s0:.0f} x, partial_fit {t1 / t0:.1f} x")


if __name__ == "__main__":
    main()
