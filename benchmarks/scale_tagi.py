"""TAGIRegressor fit time against the number of rows: fitted power-law exponent.

Usage: python benchmarks/scale_tagi.py [--n0 1000] [--epochs 5] [--repeats 3]

Fits 1x50 ReLU TAGI (batch 10) on synthetic data with 8 features at n0, 2 n0,
4 n0 and 8 n0 rows in one process, prints the median fit seconds, the ratio to the
smallest size, and the slope of log(seconds) against log(n) (1.0 = linear).  An
untimed fit first loads (or compiles) the Numba kernel, which otherwise adds about
0.2 s to the first timed fit.
"""

import argparse
import time

import numpy as np

from skbayesnn import TAGIRegressor


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n0", type=int, default=1000)
    parser.add_argument("--epochs", type=int, default=5)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    rng = np.random.default_rng(0)
    sizes = [args.n0 * k for k in (1, 2, 4, 8)]
    X = rng.normal(size=(sizes[-1], 8))
    y = np.sin(X @ rng.normal(size=8)) + 0.1 * rng.normal(size=sizes[-1])
    TAGIRegressor(max_epochs=1).fit(X[:100], y[:100])  # load the kernel, untimed
    seconds = []
    for n in sizes:
        times = []
        for r in range(args.repeats):
            start = time.perf_counter()
            TAGIRegressor(max_epochs=args.epochs, random_state=r).fit(X[:n], y[:n])
            times.append(time.perf_counter() - start)
        seconds.append(float(np.median(times)))
    slope = np.polyfit(np.log(sizes), np.log(seconds), 1)[0]
    print(f"{'rows':>8}{'seconds':>10}{'ratio':>8}")
    for n, s in zip(sizes, seconds):
        print(f"{n:>8}{s:>10.3f}{s / seconds[0]:>8.2f}")
    print(f"fitted exponent (log seconds vs log rows): {slope:.3f}")


if __name__ == "__main__":
    main()
