"""Helpers the scripts in ``benchmarks/`` share (``benchmarks/_uci_cli.py``):
the statistics they print and the checks of their command lines."""

import argparse
import sys
from pathlib import Path

import numpy as np
import pytest

from .test_datasets import write_dataset

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
import _uci_cli  # noqa: E402


def test_standard_error_is_the_sample_std_over_root_n(rng):
    rows = rng.normal(size=(20, 3)) * [1.0, 10.0, 0.1]
    se = _uci_cli.standard_error(rows)
    for k in range(3):
        v = rows[:, k]
        expected = np.sqrt(np.sum((v - v.mean()) ** 2) / 19) / np.sqrt(20)
        assert se[k] == pytest.approx(expected, rel=1e-12)
    # the papers' ddof=0 errors are sqrt((n - 1) / n) of these
    np.testing.assert_allclose(rows.std(axis=0) / np.sqrt(20), np.sqrt(19 / 20) * se)
    # one split has no spread to estimate: NaN, not a fake 0
    assert np.all(np.isnan(_uci_cli.standard_error(rows[:1])))


def _parser_and_home(tmp_path):
    write_dataset(tmp_path, "yacht", data=np.arange(12.0).reshape(4, 3), features=[0, 1],
                  target=2, splits=[([0, 1, 2], [3])])
    parser = argparse.ArgumentParser(prog="uci_x.py")
    parser.add_argument("--datasets", nargs="*", default=None)
    return parser, tmp_path


@pytest.mark.parametrize("names, message", [
    (["yacht", "bostonhousing"], "Did you mean 'bostonHousing'"),
    (["yacht", "concrete"], "'concrete' not found"),
])
def test_every_dataset_name_is_checked_before_any_run(tmp_path, capsys, names, message):
    # A misspelt or missing dataset after a valid one is a usage error at the
    # start (a full run takes minutes before it would reach it).
    parser, home = _parser_and_home(tmp_path)
    with pytest.raises(SystemExit) as exc:
        _uci_cli.dataset_names(parser, parser.parse_args(["--datasets", *names]), home)
    assert exc.value.code == 2
    assert message in capsys.readouterr().err
    args = parser.parse_args([])
    assert _uci_cli.dataset_names(parser, args, home) == ["yacht"]
    assert _uci_cli.dataset_names(parser, args, home, default=["yacht"]) == ["yacht"]
