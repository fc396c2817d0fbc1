"""Fit time of MessagePassingRegressor against sklearn's MLPRegressor (Adam).

Usage:
    OPENBLAS_NUM_THREADS=1 python benchmarks/speed_mp_vs_mlp.py [--data-home ../shared/uci]
        [--dataset kin8nm] [--split 0] [--epochs 10] [--n-iter 3] [--memory per_example]
        [--batch-size 256] [--hidden 64,64] [--match-rmse] [--cost-model] [--division-floor]

Both models: hidden layers ``--hidden`` ((64, 64)), standardised inputs and target (for
MLPRegressor by ``StandardScaler`` and ``TransformedTargetRegressor``), the same
number of epochs (MLPRegressor is kept from stopping early: ``tol=0``,
``n_iter_no_change`` above the epochs),
the same training part of one standard split, in the same process.  Message
passing uses the UCI protocol of message_passing.md §12.4 (LeakyReLU(0.1),
``--batch-size`` (256), ``--n-iter`` iterations per batch, noise std 0.4) and the compiled
kernel of ``skbayesnn.inference.message_passing.kernel`` (one example at a
time, §6); MLPRegressor its default batch of 200.  The Numba kernel is compiled
(or loaded from its cache) by a one-epoch warm-up fit before timing.  Prints
the fit times, the test RMSE of both, and the ratio ours / MLP.  With
``--match-rmse`` it then doubles MLPRegressor's epochs until its test RMSE is no
worse than ours and prints the fit-time ratio at that equal accuracy.  With
``--cost-model`` it splits the time per example step into per-weight and
per-hidden-unit costs and prints what each part alone costs per epoch of the
(64, 64) network, as a multiple of MLPRegressor's epoch.  With
``--division-floor`` it times, in the same process, the float64 divisions that
the messages need per weight and example step whatever the code around them:
one for the weight's moments (``1 / precision``, forward, §5.3/§5.4) and one
for the exact sum's message to it (``1 / (1 + rho_s v_rest)``, backward,
§5.1), alone in a vectorised loop, and prints them as a multiple of
MLPRegressor's epoch: a lower bound of the ratio at equal epochs.
"""

import argparse
import time
import warnings

import numpy as np
from sklearn.exceptions import ConvergenceWarning
from sklearn.compose import TransformedTargetRegressor
from sklearn.neural_network import MLPRegressor
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler

from skbayesnn import MessagePassingRegressor
from skbayesnn.datasets import load_uci
from skbayesnn.inference.message_passing.network import n_parameters

from _uci_cli import add_data_home, data_home


def hidden_sizes(text):
    """``--hidden``: comma-separated layer widths, as a tuple."""
    return tuple(int(width) for width in text.split(","))


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_data_home(parser)
    parser.add_argument("--dataset", default="kin8nm")
    parser.add_argument("--split", type=int, default=0)
    parser.add_argument("--epochs", type=int, default=10)
    parser.add_argument("--n-iter", type=int, default=3, help="iterations per batch visit")
    parser.add_argument("--memory", default="per_example", choices=["per_example", "per_batch"])
    parser.add_argument("--batch-size", type=int, default=256)
    parser.add_argument("--hidden", type=hidden_sizes, default=(64, 64),
                        help="both models' hidden layers, comma-separated")
    parser.add_argument("--match-rmse", action="store_true",
                        help="also time MLPRegressor at the epochs it needs for our test RMSE")
    parser.add_argument("--repeats", type=int, default=1, help="best of this many fits each")
    parser.add_argument("--cost-model", action="store_true",
                        help="fit the time per example step to weights and hidden units")
    parser.add_argument("--division-floor", action="store_true",
                        help="time the two divisions per weight and example step alone")
    args = parser.parse_args()
    args.data_home = data_home(parser, args)
    d = load_uci(args.dataset, args.split, data_home=args.data_home)

    def ours(epochs, hidden=args.hidden):
        return MessagePassingRegressor(
            hidden,
            batch_size=args.batch_size,
            max_epochs=epochs,
            n_iter_per_batch=args.n_iter,
            memory=args.memory,
            noise_std=0.4,
            random_state=0,
        )

    def mlp(epochs):
        # inputs and target standardised as ours does internally
        network = MLPRegressor(
            hidden_layer_sizes=args.hidden,
            solver="adam",
            max_iter=epochs,
            tol=0.0,
            n_iter_no_change=epochs + 1,
            random_state=0,
        )
        return TransformedTargetRegressor(make_pipeline(StandardScaler(), network),
                                          transformer=StandardScaler())

    ours(1).fit(d.X_train, d.y_train)  # compile / load the kernel
    times = {}
    rmse = {}
    for name, make in (("MessagePassingRegressor", ours), ("MLPRegressor", mlp)):
        times[name], model = timed_fit(lambda: make(args.epochs), d.X_train, d.y_train,
                                       args.repeats)
        rmse[name] = rmse_on_test(model, d)
    n = d.X_train.shape[0]
    print(f"{args.dataset} split {args.split}: {n} training rows, {args.epochs} epochs, "
          f"hidden {args.hidden}; MP: batch {args.batch_size}, {args.n_iter} iterations/batch, "
          f"{args.memory}")
    for name in times:
        print(f"{name:<24} fit {times[name]:8.2f} s  ({times[name] / args.epochs * 1e3:8.1f} "
              f"ms/epoch)  test RMSE {rmse[name]:.4f}")
    steps = n * args.epochs * args.n_iter
    print(f"MP: {times['MessagePassingRegressor'] / steps * 1e6:.1f} us per example step")
    print(f"ratio ours/MLP = {times['MessagePassingRegressor'] / times['MLPRegressor']:.1f}")
    if args.match_rmse:
        # Epochs MLPRegressor needs to reach our test RMSE (doubling up to 1600),
        # and the fit-time ratio at equal accuracy.
        target = rmse["MessagePassingRegressor"]
        epochs = args.epochs
        while epochs <= 1600:
            seconds, model = timed_fit(lambda: mlp(epochs), d.X_train, d.y_train, args.repeats)
            err = rmse_on_test(model, d)
            if err <= target:
                print(f"MLPRegressor reaches RMSE {err:.4f} <= {target:.4f} at {epochs} epochs "
                      f"in {seconds:.2f} s: ratio ours/MLP at equal accuracy = "
                      f"{times['MessagePassingRegressor'] / seconds:.2f}")
                break
            epochs *= 2
        else:
            print(f"MLPRegressor does not reach RMSE {target:.4f} within 1600 epochs")
    if args.division_floor:
        mlp_us = times["MLPRegressor"] / (n * args.epochs) * 1e6
        n_weights = n_parameters([d.X_train.shape[1], *args.hidden, 1])
        ns = division_ns()
        floor = 2 * n_weights * args.n_iter * ns * 1e-3
        print(f"float64 division: {ns:.3f} ns each (vectorised); 2 per weight and example "
              f"step, {args.n_iter} iterations: {floor:.1f} us per example and epoch = "
              f"{floor / mlp_us:.1f} x MLPRegressor's {mlp_us:.2f} us")
    if args.cost_model:
        coef = cost_model(ours, d, args.n_iter)
        # What each part alone costs per example and epoch of the timed
        # network, in units of MLPRegressor's whole epoch per example.
        mlp_us = times["MLPRegressor"] / (n * args.epochs) * 1e6
        n_weights = n_parameters([d.X_train.shape[1], *args.hidden, 1])
        for part, count, c in (("weights", n_weights, coef[0]),
                               ("hidden units", sum(args.hidden), coef[1])):
            print(f"{part} alone, {args.n_iter} iterations: {count * c * args.n_iter:.1f} us "
                  f"per example and epoch = {count * c * args.n_iter / mlp_us:.1f} x "
                  f"MLPRegressor's {mlp_us:.2f} us")


def timed_fit(make, X, y, repeats=1, quiet=False):
    """Best fit seconds of ``repeats`` fresh ``make()`` models, and the last model.

    ``quiet`` also silences UserWarnings: the cost model's one-epoch fits of
    deep narrow networks underfit, and the noise check says so for each."""
    best = np.inf
    for _ in range(repeats):
        model = make()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ConvergenceWarning)
            if quiet:
                warnings.simplefilter("ignore", UserWarning)
            start = time.perf_counter()
            model.fit(X, y)
            best = min(best, time.perf_counter() - start)
    return best, model


def rmse_on_test(model, d):
    return float(np.sqrt(np.mean((model.predict(d.X_test) - d.y_test) ** 2)))


def division_ns(size=4096, repeats=20000):
    """Best time of one float64 division ``1 / x`` in a loop that LLVM
    vectorises (Numba, as the kernel), in nanoseconds."""
    from numba import njit

    @njit(error_model="numpy")  # (Python's model checks for 0 and stays scalar)
    def reciprocals(x, y, repeats):
        for _ in range(repeats):
            for i in range(x.shape[0]):
                y[i] = 1.0 / x[i]

    x = np.random.default_rng(0).uniform(1.0, 2.0, size)
    y = np.empty_like(x)
    reciprocals(x, y, 1)
    best = np.inf
    for _ in range(5):
        start = time.perf_counter()
        reciprocals(x, y, repeats)
        best = min(best, time.perf_counter() - start)
    return best / (size * repeats) * 1e9


def cost_model(ours, d, n_iter, n_rows=2048):
    """Least-squares split of the time per example step into per-weight,
    per-hidden-unit, per-layer and fixed costs (best of three one-epoch fits of
    ``ours(1, hidden)``); returns the four coefficients in microseconds."""
    X, y = d.X_train[:n_rows], d.y_train[:n_rows]
    archs = [(128,), (256,), (16, 112), (64, 64), (32, 32, 32, 32), (8,) * 16, (128, 128)]
    rows, times = [], []
    for hidden in archs:
        n_weights = n_parameters([X.shape[1], *hidden, 1])
        best, _ = timed_fit(lambda: ours(1, hidden), X, y, repeats=3, quiet=True)
        rows.append([n_weights, sum(hidden), len(hidden), 1.0])
        times.append(best / (len(X) * n_iter) * 1e6)
        print(f"hidden {str(hidden):<52} weights {n_weights:6d}  {times[-1]:6.1f} us/step")
    coef, *_ = np.linalg.lstsq(np.array(rows), np.array(times), rcond=None)
    print(f"per weight {coef[0] * 1e3:.2f} ns, per hidden unit {coef[1] * 1e3:.0f} ns, "
          f"per hidden layer {coef[2] * 1e3:.0f} ns, fixed {coef[3]:.2f} us")
    return coef


if __name__ == "__main__":
    main()
