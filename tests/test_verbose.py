"""``verbose``: silent at 0, one summary line at 1, and a line per epoch as well at 2
for the estimators that train in epochs (as their docstrings say)."""

import numpy as np
import pytest
from sklearn.base import is_classifier

from skbayesnn import (
    MessagePassingClassifier,
    MessagePassingRegressor,
    PBPRegressor,
    TAGIClassifier,
    TAGIRegressor,
    VBNNRegressor,
)

SMALL = {
    TAGIRegressor: dict(hidden_layer_sizes=(8,), max_epochs=3),
    TAGIClassifier: dict(hidden_layer_sizes=(8,), max_epochs=3),
    PBPRegressor: dict(hidden_layer_sizes=(8,), max_epochs=3),
    MessagePassingRegressor: dict(hidden_layer_sizes=(8,), max_epochs=3, batch_size=32),
    MessagePassingClassifier: dict(hidden_layer_sizes=(8,), max_epochs=3, batch_size=32),
    VBNNRegressor: dict(n_restarts=1, max_iter=5),
}
PER_EPOCH = {VBNNRegressor: False}


@pytest.mark.parametrize("cls", list(SMALL), ids=lambda c: c.__name__)
def test_verbose_levels(cls, capsys):
    rng = np.random.default_rng(0)
    X = rng.normal(size=(60, 3))
    y = X[:, 0] - X[:, 1]
    if is_classifier(cls()):
        y = (y > 0).astype(int)
    cls(**SMALL[cls], random_state=0).fit(X, y)
    assert capsys.readouterr().out == ""
    cls(**SMALL[cls], random_state=0, verbose=1).fit(X, y)
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"[{cls.__name__}] ")
    model = cls(**SMALL[cls], random_state=0, verbose=2).fit(X, y)
    lines = capsys.readouterr().out.splitlines()
    per_epoch = model.n_iter_ if PER_EPOCH.get(cls, True) else 0
    assert len(lines) == per_epoch + 1
    assert all(line.startswith(f"[{cls.__name__}] ") for line in lines)
