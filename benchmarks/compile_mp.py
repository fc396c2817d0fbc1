"""Compilation time of the message-passing kernel in a new installation.

Usage:
    OPENBLAS_NUM_THREADS=1 python benchmarks/compile_mp.py

Runs, in a fresh Python process with an empty Numba cache (a temporary
``NUMBA_CACHE_DIR``), one-epoch ``MessagePassingRegressor`` fits of 1, 2, 3, 4,
5 and 7 hidden layers of 8 units and then a softmax
``MessagePassingClassifier`` fit, and prints each fit's seconds: the first fit
compiles the kernel, the later ones only what their arguments' types add
(networks of four to seven hidden layers pass longer per-layer tuples,
``kernel.layer_tuple``).  Then it
repeats the fits in a second process with the cache the first one wrote, as
a user's later sessions would: loading the compiled code instead.  For
comparison, each process ends with a first ``TAGIRegressor`` and
``PBPRegressor`` fit, whose kernels are compiled apart from this one.
"""

import os
import subprocess
import sys
import tempfile

FITS = r"""
import time
import warnings

import numpy as np

from skbayesnn import (MessagePassingClassifier, MessagePassingRegressor, PBPRegressor,
                       TAGIRegressor)

warnings.simplefilter("ignore", UserWarning)  # one epoch underfits
rng = np.random.default_rng(0)
X = rng.normal(size=(60, 3))
y = X[:, 0] + 0.1 * rng.normal(size=60)
fits = [(f"regressor {hidden}", MessagePassingRegressor(hidden, max_epochs=1, random_state=0), y)
        for hidden in [(8,), (8, 8), (8, 8, 8), (8,) * 4, (8,) * 5, (8,) * 7]]
fits.append(("softmax classifier (8,)",
             MessagePassingClassifier((8,), likelihood="softmax", max_epochs=1, random_state=0),
             y > 0))
fits += [("TAGIRegressor (its own kernel)", TAGIRegressor(max_epochs=1, random_state=0), y),
         ("PBPRegressor (its own kernel)", PBPRegressor(max_epochs=1, random_state=0), y)]
for name, model, target in fits:
    start = time.perf_counter()
    model.fit(X, target)
    print(f"  {name:<36} {time.perf_counter() - start:6.1f} s", flush=True)
"""


def main():
    with tempfile.TemporaryDirectory() as cache:
        env = dict(os.environ, NUMBA_CACHE_DIR=cache)
        for title in ("empty cache (a new installation):", "the cache of the first process:"):
            print(title, flush=True)
            # (run outside the working directory, which "-c" would put first
            # on the import path: the installed skbayesnn, or PYTHONPATH's)
            subprocess.run([sys.executable, "-c", FITS], env=env, cwd=cache, check=True)


if __name__ == "__main__":
    main()
