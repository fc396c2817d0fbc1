"""Command-line pieces the UCI benchmark scripts share: where the data are, and
checked counts.

The data folder is, in this order, ``--data-home``, the ``SKBAYESNN_DATA``
environment variable, or the project's ``../shared/uci`` beside the repository.
"""

import argparse
import os
from pathlib import Path

import numpy as np

from skbayesnn.datasets import available_uci_datasets, uci_n_splits

#: The project's copy of the UCI data, beside the repository.
SHARED_UCI = Path(__file__).resolve().parents[1].parent / "shared" / "uci"


def positive_int(text):
    """An argparse type: an int >= 1."""
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be a positive integer, got {value}")
    return value


def add_data_home(parser):
    parser.add_argument(
        "--data-home",
        default=None,
        help="folder of the UCI datasets (default: $SKBAYESNN_DATA if set, else "
        f"{SHARED_UCI})",
    )


def data_home(parser, args):
    """The data folder as a string; a usage error if it does not exist."""
    if args.data_home is not None:
        home, source = Path(args.data_home).expanduser(), "--data-home"
    elif os.environ.get("SKBAYESNN_DATA", "").strip():
        home = Path(os.environ["SKBAYESNN_DATA"].strip()).expanduser()
        source = "SKBAYESNN_DATA"
    else:
        home, source = SHARED_UCI, "the default"
    if not home.is_dir():
        parser.error(f"the UCI data folder {home} ({source}) does not exist")
    return str(home)


def dataset_names(parser, args, home, default=None):
    """``--datasets``, else ``default``, else every dataset in ``home``.

    Every name is checked before any is run (a misspelt or missing one is a
    usage error at the start, not a traceback after the others' runs)."""
    names = args.datasets or default or available_uci_datasets(home)
    if not names:
        parser.error(f"no UCI datasets under {home}")
    for name in names:
        try:
            uci_n_splits(name, data_home=home)
        except (ValueError, FileNotFoundError) as exc:
            parser.error(str(exc).split(" To provide the data")[0])
    return names


def standard_error(rows):
    """Standard error of the mean over the rows (splits), per column:
    ``std(ddof=1) / sqrt(n)``, NaN for a single row (no spread to estimate).

    The published tables' errors (PBP, MC-dropout, TAGI) use ``ddof=0``: theirs
    are ``sqrt((n - 1) / n)`` times ours for the same values (0.975 at 20 splits).
    """
    rows = np.asarray(rows, dtype=float)
    if len(rows) < 2:
        return np.full(rows.shape[1:], np.nan)
    return rows.std(axis=0, ddof=1) / np.sqrt(len(rows))
