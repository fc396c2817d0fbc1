"""Benchmark data: the UCI regression splits and the cubic toy problem.

The UCI regression benchmark of Hernández-Lobato & Adams (2015), reused by
MC-dropout, deep ensembles, TAGI and most later Bayesian-neural-network papers,
is nine datasets, each with 20 fixed random 90%/10% train/test splits (5 for
protein-tertiary-structure).  Results are only comparable on those exact
splits, so :func:`load_uci` reads them from files rather than re-drawing them.
Nothing is downloaded: the files must already be on disk, in the layout below,
under a *data home* folder chosen by :func:`get_data_home`.

Layout of ``<data_home>/<name>/`` (whitespace-separated text; tabs, trailing
spaces and blank trailing lines are tolerated)::

    data.txt                 one row per example, all columns numeric
    index_features.txt       0-based column indices of the inputs
    index_target.txt         0-based column index of the target
    index_train_K.txt        0-based row indices of split K's training set
    index_test_K.txt         0-based row indices of split K's test set
    n_splits.txt             number of splits K = 0, ..., n_splits - 1
    n_hidden.txt             hidden units of the protocol's 1-layer network
    n_epochs.txt             training epochs of the protocol
    feature_names.txt        optional: one input name per line

The same files inside a ``data/`` subfolder (``<data_home>/<name>/data/``, as
in the ``UCI_Datasets`` folder of the MC-dropout experiments repository) are
accepted too.

:func:`make_toy_regression` draws the 1-D cubic problem ``y = x**3 + eps``
used to illustrate predictive uncertainty (Hernández-Lobato & Adams 2015; the
TAGI paper's first experiment).
"""

from __future__ import annotations

import difflib
import functools
import numbers
import os
import warnings
from pathlib import Path

import numpy as np
from sklearn.utils import Bunch, check_random_state

__all__ = [
    "UCI_DATASETS",
    "available_uci_datasets",
    "get_data_home",
    "load_uci",
    "make_toy_regression",
    "uci_n_splits",
]

UCI_DATASETS = (
    "bostonHousing",
    "concrete",
    "energy",
    "kin8nm",
    "naval-propulsion-plant",
    "power-plant",
    "protein-tertiary-structure",
    "wine-quality-red",
    "yacht",
)

_ENV_VAR = "SKBAYESNN_DATA"
_DEFAULT_DIRNAME = "skbayesnn_data"
# Files every dataset folder must hold besides the per-split index files.
_REQUIRED_FILES = (
    "data.txt",
    "index_features.txt",
    "index_target.txt",
    "n_splits.txt",
    "n_hidden.txt",
    "n_epochs.txt",
)


# --------------------------------------------------------------------------
# Where the data live
# --------------------------------------------------------------------------


def _resolve_data_home(data_home=None):
    """Return ``(path, source)``; source says which setting chose the path."""
    if data_home is not None:
        if not isinstance(data_home, (str, os.PathLike)):
            raise TypeError(
                f"data_home must be a str or os.PathLike, got {type(data_home).__name__}."
            )
        return Path(data_home).expanduser(), "the data_home argument"
    env = os.environ.get(_ENV_VAR, "").strip()  # (a stray space is invisible in errors)
    if env:
        return Path(env).expanduser(), f"the {_ENV_VAR} environment variable"
    return (
        Path("~").expanduser() / _DEFAULT_DIRNAME,
        f"the default (~/{_DEFAULT_DIRNAME}, used when data_home is not given and "
        f"{_ENV_VAR} is not set)",
    )


def get_data_home(data_home=None):
    """Return the folder that holds the benchmark datasets.

    The folder is chosen, in this order, by the ``data_home`` argument, by the
    ``SKBAYESNN_DATA`` environment variable, or else is ``~/skbayesnn_data``.
    A leading ``~`` is expanded.  The folder is *not* created: the library only
    reads from it.

    Parameters
    ----------
    data_home : str or os.PathLike, default=None
        Explicit folder; takes precedence over the environment variable.

    Returns
    -------
    data_home : pathlib.Path
        The chosen folder (it may not exist).

    Examples
    --------
    >>> from skbayesnn.datasets import get_data_home
    >>> str(get_data_home("/data/uci"))
    '/data/uci'
    """
    return _resolve_data_home(data_home)[0]


def _has_layout_files(folder):
    return any(all((f / r).is_file() for r in _REQUIRED_FILES) for f in (folder, folder / "data"))


def _check_name(name, data_home=None):
    """``name`` if it is one of :data:`UCI_DATASETS` or a folder of the data
    home holding the layout's files (a user's own data in that layout)."""
    if not isinstance(name, str):
        raise TypeError(
            f"name must be a str, one of {list(UCI_DATASETS)}; got {type(name).__name__}."
        )
    if name in UCI_DATASETS:
        return name
    plain = name not in ("", ".", "..") and Path(name).name == name and os.sep not in name
    if plain and _has_layout_files(get_data_home(data_home) / name):
        return name
    lowered = {n.lower(): n for n in UCI_DATASETS}
    close = [lowered[name.lower()]] if name.lower() in lowered else []
    close = close or difflib.get_close_matches(name, UCI_DATASETS, n=1, cutoff=0.6)
    hint = f" Did you mean {close[0]!r}?" if close else ""
    raise ValueError(
        f"Unknown UCI dataset {name!r}.{hint} Known datasets: {', '.join(UCI_DATASETS)}; "
        f"another name must be a folder of the data home "
        f"({os.path.abspath(get_data_home(data_home))}) holding the files of the "
        f"standard layout ({', '.join(_REQUIRED_FILES)} and the split files)."
    )


def _layout_help(name):
    return (
        f"To provide the data, set the {_ENV_VAR} environment variable or pass "
        f"data_home=... pointing to a folder that contains '{name}/data.txt', "
        f"'{name}/index_features.txt', '{name}/index_target.txt', "
        f"'{name}/index_train_K.txt', '{name}/index_test_K.txt' (K = 0, ..., n_splits - 1), "
        f"'{name}/n_splits.txt', '{name}/n_hidden.txt' and '{name}/n_epochs.txt': "
        "the standard layout of the UCI regression benchmark splits "
        "(Hernandez-Lobato & Adams 2015; the UCI_Datasets folders of the MC-dropout "
        "experiments, whose '<name>/data/' subfolder is accepted too). "
        "Nothing is downloaded automatically."
    )


def _dataset_dir(name, data_home):
    """Return the folder holding ``name``'s files, or raise FileNotFoundError."""
    home, source = _resolve_data_home(data_home)
    folder = home / name
    for candidate in (folder, folder / "data"):
        if (candidate / "data.txt").is_file():
            return candidate
    if not home.is_dir():
        reason = "the data home folder does not exist"
    elif not folder.is_dir():
        reason = f"the folder {os.path.abspath(folder)} does not exist"
    else:
        reason = "neither file exists"
    raise FileNotFoundError(
        f"UCI dataset {name!r} not found: looked for {os.path.abspath(folder / 'data.txt')} "
        f"(and {os.path.abspath(folder / 'data' / 'data.txt')}) but {reason}. The data home "
        f"{os.path.abspath(home)} was chosen by {source}. {_layout_help(name)}"
    )


def _require_file(path, name):
    if not path.is_file():
        raise FileNotFoundError(
            f"UCI dataset {name!r} is incomplete: the file {os.path.abspath(path)} "
            f"does not exist. {_layout_help(name)}"
        )
    return path


# --------------------------------------------------------------------------
# Parsing (cached) and validation
# --------------------------------------------------------------------------


@functools.lru_cache(maxsize=16)
def _parse_table_cached(path, identity):
    # identity only keys the cache: an edited or replaced file is parsed again.
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)  # "input contained no data"
            # comments=None: a line starting with "#" is an error, not a
            # skipped row that would shift every later row index
            table = np.loadtxt(path, dtype=np.float64, ndmin=2, encoding="utf-8-sig",
                               comments=None)
    except ValueError as exc:
        raise ValueError(f"Could not parse {path} as a numeric table: {exc}") from None
    table.setflags(write=False)
    return table


def _read_table(path):
    """Parse a whitespace-separated numeric table, cached per path and file
    identity: inode, size, modification and status-change times (a copy with
    preserved times, ``cp -p``, still changes the inode or the ctime)."""
    st = os.stat(path)
    identity = (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)
    return _parse_table_cached(str(Path(path).resolve()), identity)


def _read_numbers(path):
    """All whitespace-separated numbers of a small file, as a flat float array."""
    try:
        text = Path(path).read_text(encoding="utf-8-sig")
    except UnicodeDecodeError as exc:
        raise ValueError(f"Could not parse {path}: not UTF-8 text ({exc}).") from None
    try:
        return np.array(text.split(), dtype=np.float64)
    except ValueError as exc:
        raise ValueError(f"Could not parse {path}: expected numbers only ({exc}).") from None


def _read_indices(path, *, n_max, what, allow_empty=False):
    """Read 0-based integer indices in [0, n_max) from ``path``."""
    values = _read_numbers(path)
    if values.size == 0 and not allow_empty:
        raise ValueError(f"{path} is empty; it must list the {what}.")
    if not np.all(np.isfinite(values)) or np.any(values != np.round(values)):
        raise ValueError(f"{path} must hold integer {what}; found non-integer values.")
    # range-checked before the integer cast, so a huge value is reported as read
    bad = (values < 0) | (values >= n_max)
    if np.any(bad):
        raise ValueError(
            f"{path} holds {what} out of range: {[int(v) for v in values[bad][:5]]} "
            f"(valid indices are 0 to {n_max - 1})."
        )
    idx = values.astype(np.intp)
    uniq, counts = np.unique(idx, return_counts=True)
    if np.any(counts > 1):
        raise ValueError(f"{path} repeats {what}: {uniq[counts > 1][:5].tolist()}.")
    return idx


def _read_count(path):
    """Read one positive integer from ``path``."""
    values = _read_numbers(path)
    if values.size != 1 or not np.isfinite(values[0]) or values[0] != round(values[0]):
        raise ValueError(f"{path} must hold exactly one integer.")
    count = int(values[0])
    if count < 1:
        raise ValueError(f"{path} must hold a positive integer, got {count}.")
    return count


def _check_split_type(split):
    if isinstance(split, (bool, np.bool_)) or not isinstance(split, numbers.Integral):
        raise TypeError(f"split must be an int, got {type(split).__name__}: {split!r}.")
    return int(split)


# --------------------------------------------------------------------------
# Public loaders
# --------------------------------------------------------------------------


def uci_n_splits(name, *, data_home=None):
    """Number of train/test splits stored for a UCI dataset.

    Parameters
    ----------
    name : str
        One of :data:`UCI_DATASETS`, or another folder of the data home in
        their layout (as for :func:`load_uci`).
    data_home : str or os.PathLike, default=None
        Folder holding the datasets; see :func:`get_data_home`.

    Returns
    -------
    n_splits : int
        The integer in ``<name>/n_splits.txt`` (20 for the standard splits,
        5 for protein-tertiary-structure).

    Raises
    ------
    FileNotFoundError
        If the dataset is not under the data home, or a split below that
        count lacks its ``index_train_K.txt`` or ``index_test_K.txt``.

    Examples
    --------
    >>> from skbayesnn.datasets import uci_n_splits
    >>> uci_n_splits("yacht")  # doctest: +SKIP
    20
    """
    name = _check_name(name, data_home)
    folder = _dataset_dir(name, data_home)
    n_splits = _read_count(_require_file(folder / "n_splits.txt", name))
    for split in range(n_splits):  # a count the split files do not back is an error here
        for part in ("train", "test"):
            _require_file(folder / f"index_{part}_{split}.txt", name)
    return n_splits


def available_uci_datasets(data_home=None):
    """Names of the datasets present under the data home.

    A dataset counts as present when its folder holds ``data.txt``,
    ``index_features.txt``, ``index_target.txt``, ``n_splits.txt``,
    ``n_hidden.txt`` and ``n_epochs.txt`` (directly or in a ``data/``
    subfolder).  The files are not parsed.

    Parameters
    ----------
    data_home : str or os.PathLike, default=None
        Folder holding the datasets; see :func:`get_data_home`.

    Returns
    -------
    names : list of str
        Present datasets: those of :data:`UCI_DATASETS` in that order, then
        any other folder in the same layout, sorted by name; empty when the
        data home does not exist.

    Examples
    --------
    >>> from skbayesnn.datasets import available_uci_datasets
    >>> available_uci_datasets("/nonexistent/folder")
    []
    """
    home = get_data_home(data_home)
    present = [name for name in UCI_DATASETS if _has_layout_files(home / name)]
    if home.is_dir():
        present += sorted(
            entry.name for entry in home.iterdir()
            if entry.name not in UCI_DATASETS and entry.is_dir() and _has_layout_files(entry)
        )
    return present


def _describe(name, split, n_splits, n_train, n_test, n_features, n_hidden, n_epochs, folder):
    if name in UCI_DATASETS:
        title = f"UCI regression benchmark: {name}"
        source = (
            "Source: the UCI Machine Learning Repository, with the fixed train/test "
            "splits of the UCI regression benchmark (Hernandez-Lobato & Adams 2015, "
            "reused by MC-dropout, TAGI and later work)."
        )
    else:
        title = f"Dataset {name}"
        source = ("Source: a folder in the layout of the UCI regression benchmark splits "
                  "(not one of its datasets).")
    share = 100.0 * n_train / (n_train + n_test)
    return (
        f"{title}\n{'=' * len(title)}\n\n{source}\n\n"
        f"Protocol: {n_splits} fixed train/test splits of the rows (this one "
        f"{share:.0f}%/{100 - share:.0f}%); report "
        f"the mean and standard error of test RMSE and test log-likelihood over "
        f"all splits (results on other splits are not comparable). Reference "
        f"network: one hidden layer of {n_hidden} units trained for {n_epochs} epochs; "
        f"inputs and target are usually standardised with the training statistics.\n\n"
        f"This is split {split} of {n_splits}: {n_train} training and {n_test} test "
        f"examples, {n_features} features, 1 target.\n"
        f"Files: {folder}\n"
    )


def load_uci(name, split=0, *, data_home=None, return_X_y=False):
    """Load one train/test split of a UCI regression benchmark dataset.

    Reads ``<data_home>/<name>/`` in the standard layout of the benchmark
    splits (see the module docstring); nothing is downloaded.  The parsed
    ``data.txt`` is cached per file path and modification time, so loading all
    splits of a dataset parses it once.

    Parameters
    ----------
    name : str
        One of :data:`UCI_DATASETS` (exact spelling, e.g. ``"bostonHousing"``),
        or the name of any other folder of the data home in the same layout.
    split : int, default=0
        Which split, in ``[0, n_splits)``.
    data_home : str or os.PathLike, default=None
        Folder holding the datasets; by default ``SKBAYESNN_DATA`` or
        ``~/skbayesnn_data`` (see :func:`get_data_home`).
    return_X_y : bool, default=False
        If True, return ``(X_train, X_test, y_train, y_test)``, the order of
        :func:`sklearn.model_selection.train_test_split`.

    Returns
    -------
    data : sklearn.utils.Bunch
        With attributes

        - ``X_train``, ``X_test``: float64 arrays of shape (n, n_features);
        - ``y_train``, ``y_test``: float64 arrays of shape (n,);
        - ``feature_names``: list of str from ``feature_names.txt``, or None;
        - ``n_hidden``, ``n_epochs``, ``n_splits``: ints of the protocol;
        - ``name``, ``split``: as requested;
        - ``train_index``, ``test_index``: the 0-based rows of ``data.txt``;
        - ``DESCR``: a short description of the source and protocol.

    (X_train, X_test, y_train, y_test) : tuple of ndarray
        If ``return_X_y`` is True.

    Raises
    ------
    ValueError
        If ``name`` is neither one of :data:`UCI_DATASETS` nor a folder of the
        data home with the layout's files (the message lists the known names), if
        ``split`` is out of range, or if a file is invalid (indices out of
        range or repeated, train and test overlapping, the target among the
        features, non-finite data); the message names the file.
    TypeError
        If ``split`` is not an int (bools are refused).
    FileNotFoundError
        If the dataset folder or one of its files is missing; the message gives
        the full path looked at, which setting chose it, and how to provide it.

    Examples
    --------
    >>> from skbayesnn.datasets import load_uci
    >>> data = load_uci("yacht", split=0)  # doctest: +SKIP
    >>> data.X_train.shape, data.X_test.shape  # doctest: +SKIP
    ((277, 6), (31, 6))
    >>> X_train, X_test, y_train, y_test = load_uci(
    ...     "yacht", split=3, return_X_y=True)  # doctest: +SKIP
    """
    name = _check_name(name, data_home)
    split = _check_split_type(split)
    folder = _dataset_dir(name, data_home)
    for fname in _REQUIRED_FILES:
        _require_file(folder / fname, name)

    n_splits = _read_count(folder / "n_splits.txt")
    if not 0 <= split < n_splits:
        raise ValueError(
            f"split must be in [0, n_splits) = [0, {n_splits}) for {name!r} "
            f"(n_splits = {n_splits}, from {folder / 'n_splits.txt'}); got {split}."
        )
    n_hidden = _read_count(folder / "n_hidden.txt")
    n_epochs = _read_count(folder / "n_epochs.txt")

    data_path = folder / "data.txt"
    table = _read_table(data_path)
    n_rows, n_cols = table.shape
    if n_rows == 0 or n_cols < 2:
        raise ValueError(
            f"{data_path} must hold at least one row and two columns; got shape {table.shape}."
        )

    features = _read_indices(
        folder / "index_features.txt", n_max=n_cols, what="feature column indices"
    )
    target = _read_indices(folder / "index_target.txt", n_max=n_cols, what="target column index")
    if target.size != 1:
        raise ValueError(
            f"{folder / 'index_target.txt'} must hold exactly one column index; "
            f"got {target.tolist()}."
        )
    if target[0] in features:
        raise ValueError(
            f"The target column {int(target[0])} ({folder / 'index_target.txt'}) is also "
            f"listed among the features in {folder / 'index_features.txt'}."
        )

    train_path = _require_file(folder / f"index_train_{split}.txt", name)
    test_path = _require_file(folder / f"index_test_{split}.txt", name)
    train_index = _read_indices(train_path, n_max=n_rows, what="row indices")
    test_index = _read_indices(test_path, n_max=n_rows, what="row indices")
    overlap = np.intersect1d(train_index, test_index)
    if overlap.size:
        raise ValueError(
            f"Train and test rows overlap in {train_path} and {test_path}: "
            f"{overlap.size} shared rows, e.g. {overlap[:5].tolist()}."
        )

    used = table[:, np.concatenate([features, target])]
    finite = np.isfinite(used)
    if not finite.all():
        row, col = np.argwhere(~finite)[0]
        column = int(np.concatenate([features, target])[col])
        raise ValueError(
            f"{data_path} holds non-finite values (NaN or inf) in the columns used, "
            f"first at row {int(row)}, column {column}."
        )

    feature_names = None
    names_path = folder / "feature_names.txt"
    if names_path.is_file():
        try:
            text = names_path.read_text(encoding="utf-8-sig")
        except UnicodeDecodeError as exc:
            raise ValueError(f"{names_path} is not UTF-8 text ({exc}).") from None
        feature_names = [line.strip() for line in text.splitlines() if line.strip()]
        if len(feature_names) != features.size:
            raise ValueError(
                f"{names_path} lists {len(feature_names)} names but "
                f"{folder / 'index_features.txt'} selects {features.size} features."
            )

    # Fancy indexing copies, so callers may modify the arrays without touching the cache.
    X_train = np.ascontiguousarray(table[np.ix_(train_index, features)])
    X_test = np.ascontiguousarray(table[np.ix_(test_index, features)])
    y_train = table[train_index, target[0]].copy()
    y_test = table[test_index, target[0]].copy()

    if return_X_y:
        return X_train, X_test, y_train, y_test
    return Bunch(
        X_train=X_train,
        y_train=y_train,
        X_test=X_test,
        y_test=y_test,
        feature_names=feature_names,
        n_hidden=n_hidden,
        n_epochs=n_epochs,
        n_splits=n_splits,
        name=name,
        split=split,
        train_index=train_index,
        test_index=test_index,
        DESCR=_describe(
            name,
            split,
            n_splits,
            train_index.size,
            test_index.size,
            features.size,
            n_hidden,
            n_epochs,
            folder,
        ),
    )


# --------------------------------------------------------------------------
# Toy problem
# --------------------------------------------------------------------------


def make_toy_regression(
    n_samples=20, *, noise_std=3.0, x_range=(-4.0, 4.0), random_state=None, noise_free=False
):
    """Draw the 1-D cubic regression problem ``y = x**3 + eps``.

    ``x ~ Uniform(x_range)`` and ``eps ~ N(0, noise_std**2)``: with the
    defaults, the toy problem of Hernández-Lobato & Adams (2015) used as the
    first experiment of the TAGI paper (20 points, x in [-4, 4], noise
    variance 9).

    Parameters
    ----------
    n_samples : int, default=20
        Number of points (positive).
    noise_std : float, default=3.0
        Standard deviation of the Gaussian noise (non-negative).
    x_range : tuple of two floats, default=(-4.0, 4.0)
        ``(low, high)`` with ``low < high``; x is drawn uniformly in it.
    random_state : int, RandomState instance or None, default=None
        Seed, see :func:`sklearn.utils.check_random_state`.  x is drawn before
        the noise, so the same seed gives the same x with or without noise.
    noise_free : bool, default=False
        If True, return ``y = x**3`` exactly (no noise is drawn).

    Returns
    -------
    X : ndarray of shape (n_samples, 1)
        Inputs.
    y : ndarray of shape (n_samples,)
        Targets.

    Examples
    --------
    >>> from skbayesnn.datasets import make_toy_regression
    >>> X, y = make_toy_regression(20, random_state=0)
    >>> X.shape, y.shape
    ((20, 1), (20,))
    >>> X, f = make_toy_regression(5, random_state=0, noise_free=True)
    >>> bool((f == X[:, 0] ** 3).all())
    True
    """
    if isinstance(n_samples, (bool, np.bool_)) or not isinstance(n_samples, numbers.Integral):
        raise TypeError(f"n_samples must be an int, got {type(n_samples).__name__}.")
    if n_samples < 1:
        raise ValueError(f"n_samples must be positive, got {n_samples}.")
    if isinstance(noise_std, (bool, np.bool_)) or not isinstance(noise_std, numbers.Real):
        raise TypeError(f"noise_std must be a real number, got {type(noise_std).__name__}.")
    if not np.isfinite(noise_std) or noise_std < 0:
        raise ValueError(f"noise_std must be finite and >= 0, got {noise_std}.")
    try:
        low, high = (float(v) for v in x_range)
    except (TypeError, ValueError):
        raise ValueError(
            f"x_range must be a pair (low, high) of numbers, got {x_range!r}."
        ) from None
    if not (np.isfinite(low) and np.isfinite(high) and low < high):
        raise ValueError(f"x_range must satisfy low < high (both finite), got {x_range!r}.")

    rng = check_random_state(random_state)
    x = rng.uniform(low, high, size=int(n_samples))
    y = x**3
    if not noise_free:
        y = y + noise_std * rng.standard_normal(int(n_samples))
    return x[:, None], y
