"""Fit time of PBPRegressor against the authors' C implementation of PBP.

Usage, from the repository root (the project venv provides skbayesnn, NumPy, Numba and
threadpoolctl; the script puts the built reference on sys.path itself; PYTHONPATH=. makes it
time the working tree, since .venv holds a non-editable install that may be older):

    PYTHONPATH=. .venv/bin/python benchmarks/speed_pbp_vs_reference_c.py
        [--datasets bostonHousing concrete kin8nm] [--splits 0 1 ...] [--repeats 3]
        [--data-home ../shared/uci] [--reference-path ~/peers/pbp_c]

Both run in this one process on the same UCI split(s): 1x50 ReLU, 40 epochs, inputs and
targets standardised on the training part, one CPU thread each (OPENBLAS_NUM_THREADS,
OMP_NUM_THREADS, MKL_NUM_THREADS and NUMBA_NUM_THREADS are set to 1 before any import, and
threadpoolctl limits both OpenBLAS copies, NumPy's and the reference's, to 1).  Prints the
median fit seconds over --repeats fits (seeds 0, 1, ...; fits of the two alternate), the
ratio ours / reference, and the mean test RMSE and Gaussian test log-likelihood (original
units) of each over the repeats, so that equal accuracy is visible.  The first fit of
PBPRegressor in the process (loading, or on first use compiling, its Numba kernel) is a
separate untimed 1-epoch warm-up and is printed at the end.  On a shared 2-core box
single fits scatter by +-30% (a reference-vs-reference run gave ratios 0.73 to 1.29), so
raise --repeats before reading much into a ratio near 1.

The reference is the C version of PBP (OpenBLAS cblas_dgemv plus a Cython wrapper) in
github.com/HIPS/Probabilistic-Backpropagation, folder c/PBP_net, BSD 3-Clause, (c) 2015
J.M. Hernandez-Lobato.  It is not a dependency of skbayesnn and is never committed here;
build it as a scratch peer outside the repository:

1.  Files, copied verbatim into ~/peers/pbp_c (the stored-repository read_file tool gives
    them; character counts in parentheses):
        c/PBP_net/network.c, network.h, pnorm.c, pnorm.h, setup.py, compile.sh
            @ c23e7a7995f1fc48a3789f6d7b1a583ef6a83e9f (37140, 5382, 7876, 391, 1245, 48)
        c/PBP_net/pbp.pyx, PBP_net.py @ 3d178b8fcbc13b42ba044d010e8823eb37b89fdf (14026, 6499)
        c/test_PBP_net.py @ 92789db0881bd9bc12a697732a7f9bb3688ffc7d (1362; demo only)
        LICENSE @ 60ece68fe535b3b9d74cc71f996145e982872f2e (1469)
    as ~/peers/pbp_c/{LICENSE,test_PBP_net.py} and ~/peers/pbp_c/PBP_net/<the rest>.
2.  Python-3 edits: none to the build files.  (pbp.pyx @ c23e7a79, the other stored
    version, has `print i` in train_PBP_network: make it `print(i)`.)  The demo
    test_PBP_net.py needs `size_train = int(np.round(...))` and print(...) calls.
    setup.py's distutils imports work on Python 3.11 and, through setuptools' shim, 3.12.
3.  System BLAS and a venv on the project's Python (the extension must match the Python
    and NumPy of the venv that runs this script; /work/main/.venv is CPython 3.11.7 with
    NumPy 2.4.6):
        apt-get install -y libopenblas-dev        # 0.3.21 on Debian 12: cblas.h, -lopenblas
        /root/.pyenv/versions/3.11.7/bin/python3 -m venv ~/peers/pbpc-venv
        ~/peers/pbpc-venv/bin/pip install numpy==2.4.6 cython setuptools threadpoolctl
4.  Build (unmodified compile.sh = `python setup.py build_ext --inplace`):
        cd ~/peers/pbp_c/PBP_net && PATH=~/peers/pbpc-venv/bin:$PATH bash compile.sh
    which leaves pbp.cpython-311-x86_64-linux-gnu.so next to PBP_net.py.
5.  Check: 1x50, 40 epochs, normalize=True, np.random.seed(1), one thread: bostonHousing
    split 0 gives RMSE 2.48, LL -2.32; the mean over its 20 splits is 2.99 / -2.56 (the PBP
    paper: 3.01 / -2.57).  ~/peers/pbp_c/PATCHES.txt records all of the above.

The script imports the peer from --reference-path/PBP_net (module PBP_net, which imports
the extension pbp), seeds it with np.random.seed (its initial means and per-epoch
permutations use NumPy's global generator), gives it C-contiguous float64 arrays (its
wrapper hands `.data` to C unchecked), and sends file descriptor 1 to /dev/null during its
fit (the C code prints a progress dot per 1000 points and the wrapper the epoch number).
"""

import os

for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS", "NUMBA_NUM_THREADS"):
    os.environ[_var] = "1"

import argparse  # noqa: E402
import contextlib  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402
from threadpoolctl import threadpool_limits  # noqa: E402

import skbayesnn  # noqa: E402
from skbayesnn.datasets import load_uci  # noqa: E402

from skbayesnn import PBPRegressor  # noqa: E402

from _uci_cli import add_data_home, data_home, dataset_names  # noqa: E402

HIDDEN, EPOCHS = 50, 40


def import_reference(path):
    folder = Path(path).expanduser().resolve() / "PBP_net"
    if not (folder / "PBP_net.py").is_file():
        sys.exit(f"no PBP_net/PBP_net.py under {path}: build the peer (see this docstring)")
    sys.path.insert(0, str(folder))
    try:
        import PBP_net
    except ImportError as exc:
        sys.exit(f"cannot import the reference from {folder} ({exc}); build it with compile.sh")
    return PBP_net


@contextlib.contextmanager
def silenced_stdout():
    sys.stdout.flush()
    saved, devnull = os.dup(1), os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, 1)
    try:
        yield
    finally:
        sys.stdout.flush()
        os.dup2(saved, 1)
        os.close(devnull)
        os.close(saved)


def gaussian_scores(y, mean, var):
    rmse = float(np.sqrt(np.mean((y - mean) ** 2)))
    ll = float(np.mean(-0.5 * np.log(2 * np.pi * var) - 0.5 * (y - mean) ** 2 / var))
    return rmse, ll


def run_reference(ref, d, seed):
    X_train = np.ascontiguousarray(d.X_train, dtype=np.float64)
    y_train = np.ascontiguousarray(d.y_train, dtype=np.float64)
    X_test = np.ascontiguousarray(d.X_test, dtype=np.float64)
    np.random.seed(seed)
    with silenced_stdout():
        start = time.perf_counter()
        net = ref.PBP_net(X_train, y_train, [HIDDEN], n_epochs=EPOCHS, normalize=True)
        seconds = time.perf_counter() - start
    m, v, v_noise = net.predict(X_test)
    return seconds, gaussian_scores(d.y_test, m, v + v_noise)


def run_ours(d, seed, epochs=EPOCHS):
    start = time.perf_counter()
    model = PBPRegressor(hidden_layer_sizes=(HIDDEN,), max_epochs=epochs, random_state=seed)
    model.fit(d.X_train, d.y_train)
    seconds = time.perf_counter() - start
    mean, std = model.predict(d.X_test, return_std=True)  # std includes the noise
    return seconds, gaussian_scores(d.y_test, np.asarray(mean), np.asarray(std) ** 2)


def main():
    parser = argparse.ArgumentParser(description="PBPRegressor vs the HIPS C PBP: fit time")
    add_data_home(parser)
    parser.add_argument("--datasets", nargs="*", default=["bostonHousing", "concrete", "kin8nm"])
    parser.add_argument("--splits", nargs="*", type=int, default=[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--reference-path", default="~/peers/pbp_c")
    args = parser.parse_args()
    args.data_home = data_home(parser, args)
    args.datasets = dataset_names(parser, args, args.data_home)  # all checked before any run
    ref = import_reference(args.reference_path)
    print(f"ours: skbayesnn {skbayesnn.__version__} from {Path(skbayesnn.__file__).parent}")
    print(f"reference: {Path(ref.__file__).parent}")
    print(f"1x{HIDDEN} ReLU, {EPOCHS} epochs, one thread each; median of {args.repeats} fits "
          "(seconds), mean test RMSE / LL over them")
    print(f"{'dataset':<16}{'split':>5}{'ours s':>9}{'ref s':>9}{'ratio':>7}"
          f"{'ours RMSE':>11}{'ref RMSE':>10}{'ours LL':>9}{'ref LL':>9}")
    warmup = None
    with threadpool_limits(1):
        for name in args.datasets:
            for split in args.splits:
                d = load_uci(name, split, data_home=args.data_home)
                if warmup is None:
                    warmup = run_ours(d, 0, epochs=1)[0]
                ours_t, ref_t, ours_s, ref_s = [], [], [], []
                for seed in range(args.repeats):
                    t, s = run_reference(ref, d, seed)
                    ref_t.append(t)
                    ref_s.append(s)
                    t, s = run_ours(d, seed)
                    ours_t.append(t)
                    ours_s.append(s)
                a, b = float(np.median(ours_t)), float(np.median(ref_t))
                (orr, ol), (rr, rl) = np.mean(ours_s, axis=0), np.mean(ref_s, axis=0)
                print(
                    f"{name[:15]:<16}{split:>5}{a:>9.2f}{b:>9.2f}{a / b:>7.2f}{orr:>11.3f}"
                    f"{rr:>10.3f}{ol:>9.3f}{rl:>9.3f}",
                    flush=True,
                )
    if warmup is not None:
        print(f"first PBPRegressor fit of the process (1 epoch, untimed warm-up): {warmup:.2f} s "
              "(includes loading, or on first use compiling, the Numba kernel)")


if __name__ == "__main__":
    main()
