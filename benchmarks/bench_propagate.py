"""Analytic predictive vs Monte Carlo: speed ratio and accuracy, same process.

Usage: python benchmarks/bench_propagate.py [--n 1000] [--width 50] [--var 1e-2]

A 10-in, two-hidden-layer ReLU network with a diagonal Gaussian posterior (random
means, all variances ``--var``) predicts ``--n`` inputs.  The reference is Monte
Carlo with 100,000 sampled networks on the first 20 inputs.  For each method the
script prints seconds (median of 5; one run for MC S=1000), the time ratio to the
analytic linearised pass, and the error of the output mean and standard deviation relative to the
reference predictive standard deviation (analytic_predictive.md §13.4).
"""

import argparse
import time

import numpy as np

from skbayesnn.core.posterior import GaussianMLPPosterior
from skbayesnn.core.propagate import monte_carlo_predictive, propagate


def timed(fn, repeats=5):
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - start)
    return float(np.median(times)), out


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=1000)
    parser.add_argument("--width", type=int, default=50)
    parser.add_argument("--var", type=float, default=1e-2)
    args = parser.parse_args()

    post = GaussianMLPPosterior.from_sizes(
        [10, args.width, args.width, 1], weight_var=args.var, bias_var=args.var, random_state=0
    )
    X = np.random.default_rng(1).normal(size=(args.n, 10))
    ref_mean, ref_var = monte_carlo_predictive(post, X[:20], n_samples=100_000, random_state=2)
    ref_std = np.sqrt(ref_var)

    rows = []
    for name, fn in [
        ("analytic linearize", lambda: propagate(post, X, act_approx="linearize")),
        ("analytic moment_match", lambda: propagate(post, X, act_approx="moment_match")),
        ("MC S=10", lambda: monte_carlo_predictive(post, X, n_samples=10, random_state=3)),
        ("MC S=100", lambda: monte_carlo_predictive(post, X, n_samples=100, random_state=3)),
        ("MC S=1000", lambda: monte_carlo_predictive(post, X, n_samples=1000, random_state=3)),
    ]:
        seconds, (mean, var) = timed(fn, repeats=5 if "1000" not in name else 1)
        err_mean = np.mean(np.abs(mean[:20] - ref_mean) / ref_std)
        err_std = np.mean(np.abs(np.sqrt(var[:20]) - ref_std) / ref_std)
        rows.append((name, seconds, err_mean, err_std))

    base = rows[0][1]
    print(f"{args.n} inputs, 10-{args.width}-{args.width}-1 ReLU, posterior variance {args.var:g}")
    print(
        f"{'method':<24}{'seconds':>10}{'x linearize':>13}{'|mean err|/sd':>15}{'|sd err|/sd':>13}"
    )
    for name, seconds, em, es in rows:
        print(f"{name:<24}{seconds:>10.4f}{seconds / base:>13.1f}{em:>15.4f}{es:>13.4f}")


if __name__ == "__main__":
    main()
