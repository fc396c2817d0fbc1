import numpy as np
import pytest

from skbayesnn._testing import strict_namespace


@pytest.fixture
def strict_xp():
    """A NumPy-backed namespace whose arrays refuse direct numpy/scipy calls (see _testing)."""
    return strict_namespace()


@pytest.fixture
def rng():
    return np.random.default_rng(20261121)
