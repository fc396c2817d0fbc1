"""The ``python -m skbayesnn.benchmarks`` command line (the runs themselves are
the README's main job, not tests)."""

import subprocess
import sys


def _run(*args):
    return subprocess.run([sys.executable, "-m", "skbayesnn.benchmarks", *args],
                          capture_output=True, text=True, timeout=120)


def test_help_prints_usage_without_running_the_benchmarks():
    out = _run("--help")
    assert out.returncode == 0
    assert out.stdout.startswith("usage: python -m skbayesnn.benchmarks")
    assert "RMSE" not in out.stdout  # no table was computed


def test_an_unknown_table_is_a_usage_error():
    out = _run("diabetes", "housing")
    assert out.returncode == 2
    assert "unknown table(s) ['housing']" in out.stderr and out.stdout == ""
