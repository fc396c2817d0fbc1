"""Random generators from sklearn's ``random_state`` convention."""

import numpy as np
from sklearn.utils import check_random_state


def check_rng(random_state):
    """sklearn's :func:`~sklearn.utils.check_random_state`, also accepting (and
    returning as it is) a NumPy ``Generator``.

    For draws that both a ``RandomState`` and a ``Generator`` offer
    (``standard_normal``, ``normal``, ``uniform``...).  (A fit's own stream is
    a ``Generator`` seeded from its ``random_state``, ``base._make_rng``.)
    """
    if isinstance(random_state, np.random.Generator):
        return random_state
    return check_random_state(random_state)
