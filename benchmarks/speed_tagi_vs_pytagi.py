"""Fit time of TAGIRegressor against the reference implementation pytagi.

Needs pytagi, which is not a dependency of skbayesnn: install it into a scratch
environment together with this package (see shared/tools/README.md), e.g.

    apt-get install -y libopenmpi-dev
    python3 -m venv ~/peers && ~/peers/bin/pip install pytagi nvidia-nccl-cu12 -e .
    export LD_LIBRARY_PATH=$(~/peers/bin/python -c "import nvidia.nccl,os;\
print(os.path.dirname(nvidia.nccl.__path__[0]+'/'))")/lib
    ~/peers/bin/python benchmarks/speed_tagi_vs_pytagi.py [--datasets ...] [--split 0]

Both run in this one process on the same UCI split: 1x50 ReLU, 40 epochs, batch 10,
standardised inputs and targets, sigma_v 0.3, one CPU thread each (threadpoolctl
for NumPy's BLAS, ``set_threads(1)`` for pytagi).  Prints median fit seconds over
``--repeats`` runs, the ratio ours / pytagi, and both test RMSEs as a sanity check
that the two learn the same thing, then the time of the process's first fit, an
untimed one before the others (it loads, or on first use compiles, TAGI's Numba
kernel).
"""

import argparse
import time

import numpy as np
from threadpoolctl import threadpool_limits

from skbayesnn import TAGIRegressor
from skbayesnn.datasets import load_uci

from _uci_cli import add_data_home, data_home, dataset_names


def fit_pytagi(X, y, epochs, batch_size, sigma_v, seed):
    from pytagi import manual_seed
    from pytagi.nn import Linear, OutputUpdater, ReLU, Sequential

    manual_seed(seed)
    net = Sequential(Linear(X.shape[1], 50), ReLU(), Linear(50, 1))
    net.set_threads(1)
    updater = OutputUpdater(net.device)
    var_y = np.full((batch_size,), sigma_v**2, dtype=np.float32)
    rng = np.random.default_rng(seed)
    Xf, yf = X.astype(np.float32), y.astype(np.float32)
    n = (len(X) // batch_size) * batch_size  # pytagi's buffers want full batches
    for _ in range(epochs):
        order = rng.permutation(len(X))[:n]
        for start in range(0, n, batch_size):
            idx = order[start : start + batch_size]
            net(Xf[idx].ravel())
            updater.update(
                output_states=net.output_z_buffer,
                mu_obs=yf[idx],
                var_obs=var_y,
                delta_states=net.input_delta_z_buffer,
            )
            net.backward()
            net.step()
    return net


def predict_pytagi(net, X, batch_size):
    # Full batches only (a ragged last batch corrupts pytagi's buffers): pad, cut.
    n = len(X)
    pad = (-n) % batch_size
    Xp = np.vstack([X, np.repeat(X[-1:], pad, axis=0)]).astype(np.float32)
    out = []
    for start in range(0, len(Xp), batch_size):
        m, _ = net(Xp[start : start + batch_size].ravel())
        out.append(np.asarray(m).copy())
    return np.concatenate(out)[:n]


def main():
    parser = argparse.ArgumentParser(description="TAGIRegressor vs pytagi fit time")
    add_data_home(parser)
    parser.add_argument("--datasets", nargs="*", default=["bostonHousing", "concrete", "kin8nm"])
    parser.add_argument("--split", type=int, default=0)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    args.data_home = data_home(parser, args)
    args.datasets = dataset_names(parser, args, args.data_home)  # all checked before any run
    cols = f"{'ours s':>9}{'pytagi s':>10}{'ratio':>8}{'ours RMSE':>11}{'pytagi RMSE':>13}"
    print(f"{'dataset':<16}{cols}")
    d = load_uci(args.datasets[0], args.split, data_home=args.data_home)
    start = time.perf_counter()
    TAGIRegressor(sigma_v=0.3, random_state=0).fit(d.X_train, d.y_train)
    first_fit = time.perf_counter() - start
    for name in args.datasets:
        d = load_uci(name, args.split, data_home=args.data_home)
        mx, sx = d.X_train.mean(0), d.X_train.std(0)
        sx[sx == 0] = 1.0
        my, sy = d.y_train.mean(), d.y_train.std()
        Xs, ys = (d.X_train - mx) / sx, (d.y_train - my) / sy
        ours_t, ref_t = [], []
        with threadpool_limits(1):
            for r in range(args.repeats):
                start = time.perf_counter()
                ours = TAGIRegressor(sigma_v=0.3, random_state=r).fit(d.X_train, d.y_train)
                ours_t.append(time.perf_counter() - start)
                start = time.perf_counter()
                net = fit_pytagi(Xs, ys, 40, 10, 0.3, r)
                ref_t.append(time.perf_counter() - start)
        ours_rmse = np.sqrt(np.mean((ours.predict(d.X_test) - d.y_test) ** 2))
        ref_pred = predict_pytagi(net, (d.X_test - mx) / sx, 10) * sy + my
        ref_rmse = np.sqrt(np.mean((ref_pred - d.y_test) ** 2))
        a, b = float(np.median(ours_t)), float(np.median(ref_t))
        print(f"{name[:15]:<16}{a:>9.2f}{b:>10.2f}{a / b:>8.2f}{ours_rmse:>11.3f}{ref_rmse:>13.3f}")
    print(
        f"first TAGIRegressor fit of the process ({args.datasets[0]}, untimed above): "
        f"{first_fit:.2f} s (includes loading, or on first use compiling, the Numba kernel)"
    )


if __name__ == "__main__":
    main()
