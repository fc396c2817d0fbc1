"""Tests for skbayesnn.datasets: the UCI split loader and the cubic toy problem.

The UCI files are never copied into the repository: the data-dependent tests
read them from ``shared/uci``, a sibling of the repository root, and are
skipped when that folder is absent.  Everything else runs on small dataset
folders written to ``tmp_path`` in the same layout.
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest

from skbayesnn import datasets
from skbayesnn.datasets import (
    UCI_DATASETS,
    available_uci_datasets,
    get_data_home,
    load_uci,
    make_toy_regression,
    uci_n_splits,
)

SHARED_UCI = Path(__file__).resolve().parents[1].parent / "shared" / "uci"
_NO_SHARED_REASON = (
    f"UCI benchmark files not found at {SHARED_UCI} (expected the shared/uci folder "
    "as a sibling of the repository root)"
)
PRESENT = (
    sorted(p.name for p in SHARED_UCI.iterdir() if (p / "data.txt").is_file())
    if SHARED_UCI.is_dir()
    else []
)
needs_shared = pytest.mark.skipif(not PRESENT, reason=_NO_SHARED_REASON)
PRESENT_PARAMS = PRESENT or [pytest.param(None, marks=pytest.mark.skip(reason=_NO_SHARED_REASON))]

# Train / test sizes and number of inputs of the standard splits (TAGI paper, App. E Table 3).
PAPER_SIZES = {
    "bostonHousing": (455, 51, 13),
    "concrete": (927, 103, 8),
    "energy": (691, 77, 8),
    "kin8nm": (7373, 819, 8),
    "wine-quality-red": (1439, 160, 11),
    "yacht": (277, 31, 6),
}


# --------------------------------------------------------------------------
# Helpers
# --------------------------------------------------------------------------


def _write_lines(path, values, sep="\t", trailing=" "):
    """Write numbers one row per line, with awkward but legal whitespace."""
    values = np.atleast_1d(np.asarray(values))
    with open(path, "w") as fh:
        if values.ndim == 1:
            for v in values:
                fh.write(f"{v}{trailing}\n")
        else:
            for row in values:
                fh.write(sep.join(repr(float(v)) for v in row) + trailing + "\n")
        fh.write("\n")  # blank trailing line, as in some of the real files


def write_dataset(
    root,
    name="yacht",
    *,
    data,
    features,
    target,
    splits,
    n_hidden=7,
    n_epochs=3,
    n_splits=None,
    feature_names=None,
    sep="\t",
):
    """Write a dataset folder in the standard layout; return the folder."""
    folder = Path(root) / name
    folder.mkdir(parents=True, exist_ok=True)
    _write_lines(folder / "data.txt", np.asarray(data, dtype=float), sep=sep)
    _write_lines(folder / "index_features.txt", [int(i) for i in features])
    _write_lines(folder / "index_target.txt", [int(target)])
    for k, (train, test) in enumerate(splits):
        _write_lines(folder / f"index_train_{k}.txt", [int(i) for i in train])
        _write_lines(folder / f"index_test_{k}.txt", [int(i) for i in test])
    n_splits = len(splits) if n_splits is None else n_splits
    (folder / "n_splits.txt").write_text(f"{n_splits}\n")
    (folder / "n_hidden.txt").write_text(f"{n_hidden}\n")
    (folder / "n_epochs.txt").write_text(f"{n_epochs}\n")
    if feature_names is not None:
        (folder / "feature_names.txt").write_text("\n".join(feature_names) + "\n")
    return folder


@pytest.fixture
def synthetic(tmp_path):
    """A 30x5 dataset named 'yacht' in tmp_path: features 0, 2, 4; target 1; column 3 unused."""
    rng = np.random.default_rng(0)
    data = rng.normal(size=(30, 5)) * np.array([1.0, 10.0, 1e-3, 5.0, 1e4])
    perm0, perm1 = rng.permutation(30), rng.permutation(30)
    splits = [(perm0[:25], perm0[25:]), (perm1[:27], perm1[27:])]
    folder = write_dataset(
        tmp_path, data=data, features=[0, 2, 4], target=1, splits=splits, n_hidden=11, n_epochs=9
    )
    return dict(root=tmp_path, folder=folder, data=data, splits=splits)


@pytest.fixture
def clean_env(monkeypatch, tmp_path):
    """No SKBAYESNN_DATA, and HOME pointing to an empty folder."""
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.delenv("SKBAYESNN_DATA", raising=False)
    monkeypatch.setenv("HOME", str(home))
    return home


# --------------------------------------------------------------------------
# The shared UCI files
# --------------------------------------------------------------------------


def _shared_n_splits(name):
    """n_splits.txt of a shared dataset, read independently of the loader."""
    return int(np.loadtxt(SHARED_UCI / name / "n_splits.txt"))


@pytest.mark.parametrize("name", PRESENT_PARAMS)
@pytest.mark.parametrize("which", ["first", "last"])
def test_shared_uci_split_matches_independent_reading(name, which):
    folder = SHARED_UCI / name
    n_splits = _shared_n_splits(name)  # 20, but 5 for protein-tertiary-structure
    split = 0 if which == "first" else n_splits - 1
    data = np.loadtxt(folder / "data.txt")
    features = np.atleast_1d(np.loadtxt(folder / "index_features.txt", dtype=int))
    target = int(np.loadtxt(folder / "index_target.txt", dtype=int))
    train = np.loadtxt(folder / f"index_train_{split}.txt", dtype=int)
    test = np.loadtxt(folder / f"index_test_{split}.txt", dtype=int)

    b = load_uci(name, split, data_home=SHARED_UCI)

    assert b.name == name and b.split == split
    assert b.n_splits == n_splits == uci_n_splits(name, data_home=SHARED_UCI)
    assert b.n_hidden == int(np.loadtxt(folder / "n_hidden.txt"))
    assert b.n_epochs == int(np.loadtxt(folder / "n_epochs.txt"))
    # Every row is used exactly once.
    assert len(b.train_index) + len(b.test_index) == data.shape[0]
    assert np.intersect1d(b.train_index, b.test_index).size == 0
    np.testing.assert_array_equal(
        np.sort(np.concatenate([b.train_index, b.test_index])), np.arange(data.shape[0])
    )
    # Shapes follow index_features / index_target, and the paper's table where known.
    assert b.X_train.shape == (len(train), len(features))
    assert b.X_test.shape == (len(test), len(features))
    assert b.y_train.shape == (len(train),) and b.y_test.shape == (len(test),)
    if name in PAPER_SIZES:
        assert (len(train), len(test), len(features)) == PAPER_SIZES[name]
    for arr in (b.X_train, b.X_test, b.y_train, b.y_test):
        assert arr.dtype == np.float64
    # Values: exactly the independent reading.
    np.testing.assert_array_equal(b.train_index, train)
    np.testing.assert_array_equal(b.test_index, test)
    np.testing.assert_array_equal(b.X_train, data[np.ix_(train, features)])
    np.testing.assert_array_equal(b.X_test, data[np.ix_(test, features)])
    np.testing.assert_array_equal(b.y_train, data[train, target])
    np.testing.assert_array_equal(b.y_test, data[test, target])
    assert b.feature_names is None
    assert name in b.DESCR and f"{n_splits} fixed" in b.DESCR and "90%/10%" in b.DESCR

    X_train, X_test, y_train, y_test = load_uci(
        name, split, data_home=SHARED_UCI, return_X_y=True
    )
    np.testing.assert_array_equal(X_train, b.X_train)
    np.testing.assert_array_equal(X_test, b.X_test)
    np.testing.assert_array_equal(y_train, b.y_train)
    np.testing.assert_array_equal(y_test, b.y_test)


@needs_shared
def test_available_uci_datasets_lists_the_shared_folders():
    assert available_uci_datasets(SHARED_UCI) == [n for n in UCI_DATASETS if n in PRESENT]


@pytest.mark.parametrize("name", PRESENT_PARAMS)
def test_all_splits_parse_data_once(name):
    n_splits = _shared_n_splits(name)
    datasets._parse_table_cached.cache_clear()
    tests = [load_uci(name, k, data_home=SHARED_UCI).test_index for k in range(n_splits)]
    info = datasets._parse_table_cached.cache_info()
    assert info.misses == 1 and info.hits == n_splits - 1
    # The splits really differ.
    assert not np.array_equal(np.sort(tests[0]), np.sort(tests[-1]))


# --------------------------------------------------------------------------
# Any folder in the layout loads
# --------------------------------------------------------------------------


def test_synthetic_folder_loads_exactly(synthetic):
    data = synthetic["data"]
    for k, (train, test) in enumerate(synthetic["splits"]):
        b = load_uci("yacht", k, data_home=synthetic["root"])
        np.testing.assert_array_equal(b.train_index, train)  # order kept
        np.testing.assert_array_equal(b.test_index, test)
        np.testing.assert_array_equal(b.X_train, data[np.ix_(train, [0, 2, 4])])
        np.testing.assert_array_equal(b.X_test, data[np.ix_(test, [0, 2, 4])])
        np.testing.assert_array_equal(b.y_train, data[train, 1])
        np.testing.assert_array_equal(b.y_test, data[test, 1])
        assert (b.n_splits, b.n_hidden, b.n_epochs) == (2, 11, 9)
        assert b.feature_names is None
        assert isinstance(b.n_splits, int) and isinstance(b.n_hidden, int)
    assert uci_n_splits("yacht", data_home=synthetic["root"]) == 2
    assert available_uci_datasets(synthetic["root"]) == ["yacht"]


def test_a_folder_of_any_name_in_the_layout_loads(tmp_path):
    # A user's own data in the layout load by folder name, are listed after
    # the benchmark's datasets and are described by their real split sizes.
    data = np.arange(15.0).reshape(5, 3)
    write_dataset(tmp_path, "my-data", data=data, features=[0, 1], target=2,
                  splits=[([0, 1, 2, 3], [4])])
    write_dataset(tmp_path, "energy", data=data, features=[0], target=2,
                  splits=[([0, 1, 2], [3, 4])])
    (tmp_path / "notes").mkdir()  # a folder without the layout is not a dataset
    b = load_uci("my-data", data_home=tmp_path)
    np.testing.assert_array_equal(b.X_test, [[12.0, 13.0]])
    assert b.name == "my-data" and "UCI Machine Learning Repository" not in b.DESCR
    assert "1 fixed train/test splits of the rows (this one 80%/20%)" in b.DESCR
    assert uci_n_splits("my-data", data_home=tmp_path) == 1
    assert available_uci_datasets(tmp_path) == ["energy", "my-data"]
    assert "(this one 60%/40%)" in load_uci("energy", data_home=tmp_path).DESCR
    # a path, or a folder without the files, is no dataset name
    for bad in ("notes", "../my-data", "my-data/", ".", "missing"):
        with pytest.raises(ValueError, match="Unknown UCI dataset.*standard layout"):
            load_uci(bad, data_home=tmp_path)


def test_a_data_line_starting_with_hash_is_refused(synthetic):
    # np.loadtxt skips such lines by default, which would shift every later
    # row against the index files.
    path = synthetic["folder"] / "data.txt"
    lines = path.read_text().splitlines()
    lines[3] = "#" + lines[3]
    path.write_text("\n".join(lines) + "\n")
    with pytest.raises(ValueError, match="Could not parse .*data.txt"):
        load_uci("yacht", data_home=synthetic["root"])


def test_space_separated_and_feature_names(tmp_path):
    data = np.arange(12.0).reshape(4, 3)
    write_dataset(
        tmp_path,
        "concrete",
        data=data,
        features=[2, 0],
        target=1,
        splits=[([3, 0, 1], [2])],
        feature_names=["cement age", "water"],
        sep="   ",
    )
    b = load_uci("concrete", data_home=str(tmp_path))
    assert b.feature_names == ["cement age", "water"]
    np.testing.assert_array_equal(b.X_train, [[11.0, 9.0], [2.0, 0.0], [5.0, 3.0]])
    np.testing.assert_array_equal(b.y_test, [7.0])


def test_feature_names_length_mismatch(tmp_path):
    write_dataset(
        tmp_path,
        data=np.ones((4, 3)),
        features=[0, 1],
        target=2,
        splits=[([0, 1], [2, 3])],
        feature_names=["only one"],
    )
    with pytest.raises(ValueError, match="feature_names.txt"):
        load_uci("yacht", data_home=tmp_path)


def test_byte_order_mark_is_read_and_non_utf8_names_are_refused(synthetic):
    # Windows editors start files with a UTF-8 byte order mark; the index must
    # still read as numbers.
    for name in ("index_train_0.txt", "data.txt"):
        path = synthetic["folder"] / name
        path.write_bytes(b"\xef\xbb\xbf" + path.read_bytes())
    b = load_uci("yacht", data_home=synthetic["root"])
    np.testing.assert_array_equal(b.y_train, synthetic["data"][synthetic["splits"][0][0], 1])
    # A Latin-1 names file gives an error that names the file.
    (synthetic["folder"] / "feature_names.txt").write_bytes("a\nb\xe4\nc\n".encode("latin-1"))
    with pytest.raises(ValueError, match="feature_names.txt is not UTF-8"):
        load_uci("yacht", data_home=synthetic["root"])


def test_data_subfolder_layout_is_accepted(tmp_path):
    # The MC-dropout repository keeps the files in <name>/data/.
    data = np.arange(20.0).reshape(5, 4)
    write_dataset(tmp_path / "energy", "data", data=data, features=[0, 1, 2], target=3,
                  splits=[([0, 1, 2], [3, 4])])
    b = load_uci("energy", data_home=tmp_path)
    np.testing.assert_array_equal(b.y_test, [15.0, 19.0])
    assert available_uci_datasets(tmp_path) == ["energy"]


def test_returned_arrays_are_writable_copies(synthetic):
    b = load_uci("yacht", data_home=synthetic["root"])
    expected = b.X_train.copy()
    b.X_train[:] = -1.0
    b.y_train[:] = -1.0
    again = load_uci("yacht", data_home=synthetic["root"])
    np.testing.assert_array_equal(again.X_train, expected)
    assert not np.any(again.y_train == -1.0)


def test_cache_sees_an_edited_data_file(synthetic):
    first = load_uci("yacht", data_home=synthetic["root"]).X_train.copy()
    path = synthetic["folder"] / "data.txt"
    _write_lines(path, synthetic["data"] * 2.0)
    st = os.stat(path)
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns + 10**9))
    second = load_uci("yacht", data_home=synthetic["root"]).X_train
    np.testing.assert_array_equal(second, 2.0 * first)


def test_cache_sees_a_same_size_copy_with_preserved_times(synthetic, tmp_path):
    # cp -p, rsync -t or tar x keep size and mtime: the copy still has a new
    # inode (rename, tar) or a new status-change time (written in place).
    import shutil
    import time

    path = synthetic["folder"] / "data.txt"
    load_uci("yacht", data_home=synthetic["root"])
    for in_place in (False, True):
        text = path.read_text()
        digit = next(c for c in text if c in "12345678")
        edited = tmp_path / "data.txt"
        edited.write_text(text.replace(digit, str(int(digit) + 1), 1))
        st = os.stat(path)
        os.utime(edited, ns=(st.st_atime_ns, st.st_mtime_ns))
        assert os.stat(edited).st_size == st.st_size
        if in_place:
            time.sleep(0.05)  # past the kernel's coarse ctime tick
            shutil.copyfile(edited, path)
            os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))
        else:
            os.replace(edited, path)
        assert os.stat(path).st_mtime_ns == st.st_mtime_ns
        b = load_uci("yacht", data_home=synthetic["root"])
        train = synthetic["splits"][0][0]
        data = np.loadtxt(path)
        np.testing.assert_array_equal(b.X_train, data[np.ix_(train, [0, 2, 4])])
        np.testing.assert_array_equal(b.y_train, data[train, 1])


def test_n_splits_beyond_the_split_files_is_an_error(synthetic):
    (synthetic["folder"] / "n_splits.txt").write_text("3\n")
    with pytest.raises(FileNotFoundError, match=r"index_train_2\.txt does not exist"):
        uci_n_splits("yacht", data_home=synthetic["root"])


# --------------------------------------------------------------------------
# Where the data live
# --------------------------------------------------------------------------


def test_data_home_resolution_order(clean_env, monkeypatch, tmp_path):
    home = clean_env
    default = home / "skbayesnn_data"
    assert get_data_home() == default
    assert not default.exists(), "get_data_home must not create the folder"

    monkeypatch.setenv("SKBAYESNN_DATA", "")  # empty counts as unset
    assert get_data_home() == default

    env_dir = tmp_path / "from_env"
    monkeypatch.setenv("SKBAYESNN_DATA", str(env_dir))
    assert get_data_home() == env_dir
    monkeypatch.setenv("SKBAYESNN_DATA", f" {env_dir} \n")  # stray whitespace
    assert get_data_home() == env_dir

    arg_dir = tmp_path / "from_arg"
    assert get_data_home(arg_dir) == arg_dir
    assert get_data_home(str(arg_dir)) == arg_dir
    assert isinstance(get_data_home(str(arg_dir)), Path)

    # "~" is expanded in the argument and in the environment variable.
    assert get_data_home("~/x") == home / "x"
    monkeypatch.setenv("SKBAYESNN_DATA", "~/y")
    assert get_data_home() == home / "y"
    assert not any(p.exists() for p in (env_dir, arg_dir, default, home / "x", home / "y"))


def test_loading_follows_the_resolution_order(clean_env, monkeypatch, tmp_path):
    home = clean_env

    def make(root, value):
        write_dataset(root, data=np.full((4, 2), value), features=[0], target=1,
                      splits=[([0, 1, 2], [3])])

    make(home / "skbayesnn_data", 1.0)
    make(tmp_path / "env", 2.0)
    make(tmp_path / "arg", 3.0)
    assert load_uci("yacht").y_test[0] == 1.0
    monkeypatch.setenv("SKBAYESNN_DATA", str(tmp_path / "env"))
    assert load_uci("yacht").y_test[0] == 2.0
    assert load_uci("yacht", data_home=tmp_path / "arg").y_test[0] == 3.0


@pytest.mark.parametrize("chooser", ["argument", "env", "default"])
def test_missing_dataset_error_names_path_and_setting(chooser, clean_env, monkeypatch, tmp_path):
    if chooser == "argument":
        root, source = tmp_path / "arg", "data_home argument"
        kwargs = {"data_home": root}
    elif chooser == "env":
        root, kwargs, source = tmp_path / "env", {}, "SKBAYESNN_DATA environment variable"
        monkeypatch.setenv("SKBAYESNN_DATA", str(root))
    else:
        root, kwargs, source = clean_env / "skbayesnn_data", {}, "default"
    root.mkdir()
    with pytest.raises(FileNotFoundError) as exc:
        load_uci("power-plant", **kwargs)
    msg = str(exc.value)
    assert str(root / "power-plant" / "data.txt") in msg
    assert source in msg
    assert "SKBAYESNN_DATA" in msg and "data_home" in msg
    assert "power-plant/index_train_K.txt" in msg  # says which layout to provide
    with pytest.raises(FileNotFoundError, match="power-plant"):
        uci_n_splits("power-plant", **kwargs)
    assert available_uci_datasets(kwargs.get("data_home")) == []


def test_missing_data_home_is_not_created(clean_env, tmp_path):
    missing = tmp_path / "nowhere"
    with pytest.raises(FileNotFoundError, match="does not exist"):
        load_uci("yacht", data_home=missing)
    assert available_uci_datasets(missing) == []
    assert not missing.exists()


@pytest.mark.parametrize("fname", ["n_epochs.txt", "index_target.txt", "index_test_1.txt"])
def test_missing_file_error_names_the_file(synthetic, fname):
    (synthetic["folder"] / fname).unlink()
    with pytest.raises(FileNotFoundError) as exc:
        load_uci("yacht", 1, data_home=synthetic["root"])
    assert str(synthetic["folder"] / fname) in str(exc.value)
    assert "SKBAYESNN_DATA" in str(exc.value)


# --------------------------------------------------------------------------
# Argument validation
# --------------------------------------------------------------------------


@pytest.mark.parametrize("bad", ["boston", "Yacht", "protein", "mnist", ""])
def test_unknown_name_lists_known_datasets(bad):
    with pytest.raises(ValueError, match="Unknown UCI dataset") as exc:
        load_uci(bad)
    for name in UCI_DATASETS:
        assert name in str(exc.value)


def test_unknown_name_suggests_close_match():
    with pytest.raises(ValueError, match="Did you mean 'bostonHousing'"):
        load_uci("bostonhousing")
    with pytest.raises(ValueError, match="Did you mean 'yacht'"):
        uci_n_splits("Yacht")


def test_name_must_be_str():
    with pytest.raises(TypeError, match="name"):
        load_uci(3)


@pytest.mark.parametrize("bad", [True, False, 1.0, "0", None, np.float64(0.0), np.bool_(True)])
def test_split_type_errors(synthetic, bad):
    with pytest.raises(TypeError, match="split"):
        load_uci("yacht", bad, data_home=synthetic["root"])


@pytest.mark.parametrize("bad", [-1, 2, 20])
def test_split_range_errors_name_n_splits(synthetic, bad):
    with pytest.raises(ValueError, match=r"n_splits = 2"):
        load_uci("yacht", bad, data_home=synthetic["root"])


def test_numpy_integer_split_is_accepted(synthetic):
    b = load_uci("yacht", np.int64(1), data_home=synthetic["root"])
    assert b.split == 1 and type(b.split) is int
    np.testing.assert_array_equal(b.test_index, synthetic["splits"][1][1])


# --------------------------------------------------------------------------
# Corrupt folders
# --------------------------------------------------------------------------


def _corrupt(folder, fname, text):
    (folder / fname).write_text(text)


CORRUPTIONS = {
    "train index out of range": ("index_train_0.txt", "0\n1\n30\n", "out of range"),
    "negative test index": ("index_test_0.txt", "-1\n5\n", "out of range"),
    # reported as read, not as the integer cast's overflow (-9223372036854775808)
    "huge test index": ("index_test_0.txt", "1e20\n5\n", r"range: \[100000000000000000000\]"),
    "overlapping train/test": ("index_test_0.txt", None, "overlap"),
    "repeated train index": ("index_train_0.txt", "3\n4\n3\n", "repeats"),
    "non-integer index": ("index_train_0.txt", "1.5\n2\n", "integer"),
    "non-numeric index": ("index_train_0.txt", "one\n", "numbers"),
    "empty train file": ("index_train_0.txt", "\n", "empty"),
    "NaN in data": ("data.txt", "nan", "non-finite"),
    "inf in data": ("data.txt", "inf", "non-finite"),
    "ragged data": ("data.txt", "ragged", "data.txt"),
    "target among features": ("index_target.txt", "2\n", "also"),
    "two targets": ("index_target.txt", "1\n3\n", "exactly one"),
    "feature out of range": ("index_features.txt", "0\n5\n", "out of range"),
    "zero splits": ("n_splits.txt", "0\n", "positive"),
    "bad n_hidden": ("n_hidden.txt", "50 100\n", "exactly one"),
}


@pytest.mark.parametrize("case", list(CORRUPTIONS))
def test_corrupt_folder_raises_naming_the_file(synthetic, case):
    fname, text, fragment = CORRUPTIONS[case]
    folder = synthetic["folder"]
    if case == "overlapping train/test":
        train = synthetic["splits"][0][0]
        text = f"{train[3]}\n" + "\n".join(str(i) for i in synthetic["splits"][0][1]) + "\n"
    elif fname == "data.txt":
        data = synthetic["data"].copy()
        lines = ["\t".join(repr(float(v)) for v in row) for row in data]
        if text == "ragged":
            lines[7] = "\t".join(repr(float(v)) for v in data[7, :4])
        else:
            lines[7] = lines[7].replace(repr(float(data[7, 2])), text)  # a used feature column
        text = "\n".join(lines) + "\n"
    _corrupt(folder, fname, text)
    with pytest.raises(ValueError, match=fragment) as exc:
        load_uci("yacht", 0, data_home=synthetic["root"])
    assert fname in str(exc.value)


# --------------------------------------------------------------------------
# The cubic toy problem
# --------------------------------------------------------------------------


def test_toy_defaults_and_reproducibility():
    X, y = make_toy_regression(random_state=0)
    assert X.shape == (20, 1) and y.shape == (20,)
    assert X.dtype == np.float64 and y.dtype == np.float64
    X2, y2 = make_toy_regression(random_state=0)
    np.testing.assert_array_equal(X, X2)
    np.testing.assert_array_equal(y, y2)
    X3, y3 = make_toy_regression(random_state=np.random.RandomState(0))
    np.testing.assert_array_equal(y, y3)
    X4, _ = make_toy_regression(random_state=1)
    assert not np.array_equal(X, X4)
    assert np.all((X >= -4.0) & (X <= 4.0))


def test_toy_x_within_custom_range():
    X, _ = make_toy_regression(5000, x_range=(1.5, 2.0), random_state=3)
    assert X.min() >= 1.5 and X.max() <= 2.0
    # Uniform: both ends of the range are reached (within 1% of its width).
    assert X.min() < 1.505 and X.max() > 1.995


@pytest.mark.parametrize("noise_std", [3.0, 0.5])
def test_toy_noise_has_the_requested_std(noise_std):
    n = 20_000
    X, y = make_toy_regression(n, noise_std=noise_std, random_state=42)
    resid = y - X[:, 0] ** 3
    # The sample std has standard error ~ sigma / sqrt(2n); allow 5 of them.
    assert abs(resid.std(ddof=1) - noise_std) < 5 * noise_std / np.sqrt(2 * n)
    assert abs(resid.mean()) < 5 * noise_std / np.sqrt(n)


def test_toy_noise_free_is_exactly_the_cubic():
    X, f = make_toy_regression(100, random_state=7, noise_free=True)
    np.testing.assert_array_equal(f, X[:, 0] ** 3)
    Xn, y = make_toy_regression(100, random_state=7)
    np.testing.assert_array_equal(Xn, X)  # same x with or without noise
    assert not np.array_equal(y, f)
    _, y0 = make_toy_regression(10, noise_std=0.0, random_state=7)
    X0, _ = make_toy_regression(10, noise_std=0.0, random_state=7)
    np.testing.assert_array_equal(y0, X0[:, 0] ** 3)


@pytest.mark.parametrize(
    "kwargs, error",
    [
        (dict(n_samples=0), ValueError),
        (dict(n_samples=-3), ValueError),
        (dict(n_samples=2.5), TypeError),
        (dict(n_samples=True), TypeError),
        (dict(noise_std=-0.1), ValueError),
        (dict(noise_std=np.nan), ValueError),
        (dict(noise_std="3"), TypeError),
        (dict(x_range=(1.0, 1.0)), ValueError),
        (dict(x_range=(2.0, -2.0)), ValueError),
        (dict(x_range=(0.0,)), ValueError),
        (dict(x_range=(0.0, np.inf)), ValueError),
        (dict(x_range=None), ValueError),
    ],
)
def test_toy_parameter_validation(kwargs, error):
    (name,) = kwargs  # the error names the parameter at fault
    with pytest.raises(error, match=name):
        make_toy_regression(**kwargs)
