"""The example scripts run and what they print holds up.

Each script of ``examples/`` runs in a subprocess (the figure backend set to
Agg, so ``plt.show()`` draws nothing); the figures it prints are read back and
checked against what its docstring claims: predictive intervals that cover
about 95% of fresh data, a noise level close to the true one, epistemic
uncertainty that grows away from the data, and so on.  The bounds are loose
enough for the sampling noise of the scripts' small data (e.g. the standard
error of a 95% coverage on 2,000 points is 0.005, but a noise level estimated
from 40 points has a standard error of about 12%), and tight enough that a
broken estimator fails them.
"""

import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from skbayesnn.datasets import make_toy_regression

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"

pytestmark = pytest.mark.skipif(
    not EXAMPLES.is_dir(), reason="examples/ is not beside the tests (installed package)"
)


def _run(name):
    env = dict(os.environ, MPLBACKEND="Agg", OPENBLAS_NUM_THREADS="1")
    result = subprocess.run(
        [sys.executable, str(EXAMPLES / name)],
        capture_output=True, text=True, env=env, timeout=600,
    )
    assert result.returncode == 0, result.stderr
    return result.stdout


def _numbers(pattern, text):
    match = re.search(pattern, text)
    assert match is not None, f"{pattern!r} not in the output:\n{text}"
    return [float(g) for g in match.groups()]


def test_bayesian_linear_regression_example():
    out = _run("plot_bayesian_linear_regression.py")
    (cov,) = _numbers(r"coverage on fresh data: ([\d.]+)", out)
    (noise,) = _numbers(r"noise std learned: ([\d.]+)", out)
    # exact posterior, well specified cubic basis: coverage is 95% up to the
    # error of the noise level learned from 40 points (true 3.0)
    assert 2.0 < noise < 4.0
    assert 0.85 < cov < 0.99


def test_message_passing_example():
    out = _run("plot_message_passing.py")
    rmse, cov = _numbers(r"test RMSE ([\d.]+) .*coverage ([\d.]+)", out)
    inside, outside = _numbers(r"inside / outside the training range: ([\d.]+) / ([\d.]+)", out)
    acc, logloss = _numbers(r"two moons: test accuracy ([\d.]+), log-loss ([\d.]+)", out)
    assert rmse < 2 * 0.05  # noise std 0.05
    assert 0.85 < cov < 0.995
    assert outside > 1.5 * inside  # epistemic std grows away from the data
    assert acc > 0.9 and logloss < 0.4  # the moons' Bayes accuracy is ~0.95


def test_pbp_streaming_example():
    out = _run("plot_pbp_regression.py")
    rows = [list(map(float, r)) for r in re.findall(
        r"^\s+(\d+)\s+([\d.]+)\s+([\d.]+)\s+([\d.]+)$", out, flags=re.M)]
    assert [r[0] for r in rows] == [800, 1600, 2400, 3200, 4000]
    nlpds = [r[1] for r in rows]
    # more streamed points never make the test NLPD worse
    assert all(b <= a for a, b in zip(nlpds, nlpds[1:]))
    nlpd_fit, cov, noise = _numbers(
        r"fit, 40 epochs: test NLPD ([\d.]+), coverage ([\d.]+), noise std ([\d.]+)", out)
    assert abs(noise - 3.0) < 0.3  # 4,000 points: the noise level is well determined
    assert 0.93 < cov < 0.97
    assert nlpd_fit <= nlpds[-1]
    inside, outside = _numbers(r"inside / outside the training range: ([\d.]+) / ([\d.]+)", out)
    assert outside > 2 * inside


def test_tagi_example():
    out = _run("plot_tagi_regression.py")
    (sigma_v,) = _numbers(r"chosen sigma_v: ([\d.]+)", out)
    (cov,) = _numbers(r"coverage on fresh data: ([\d.]+)", out)
    inside, outside = _numbers(r"inside / outside the training range: ([\d.]+) / ([\d.]+)", out)
    # the search picks a noise level within a factor 2 of the truth: noise sd 3
    # over the 20 training targets' sd, 0.115 (the grid is 0.03 to 0.2)

    _, y = make_toy_regression(n_samples=20, random_state=0)
    assert 0.5 < sigma_v / (3.0 / np.std(y)) < 2.0
    assert 0.8 < cov < 0.99  # 20 training points
    assert outside > 1.5 * inside


def test_vbnn_example():
    out = _run("plot_vbnn_regression.py")
    runs = [list(map(float, r)) for r in re.findall(
        r"RMSE ([\d.]+)\s+NLPD ([\d.-]+)\s+coverage ([\d.]+)", out)]
    assert len(runs) == 2
    for rmse, _, cov in runs:
        assert rmse < 1.2 * 0.5  # noise sd 0.5
        assert 0.9 < cov < 0.99
    weights = [float(w) for w in re.search(r"restart weights: \[([^\]]*)\]", out)[1].split()]
    assert len(weights) == 4 and abs(sum(weights) - 1.0) < 0.005  # rounded to 3 decimals
    n_units, n_weights = _numbers(r"node selection: (\d+) of 20 hidden units, (\d+) of 60", out)
    assert n_units < 20 and n_weights < 60  # the selection prunes (vbnn.md §14.3: 11 and 33)
    (gap,) = _numbers(r"sparse and full predictions: ([\d.]+)", out)
    assert gap < 0.1  # pruning keeps the predictions (noise sd 0.5)
