"""skbayesnn: Bayesian neural network estimators with a scikit-learn API."""

__version__ = "0.1.0.dev0"

from .linear_model import BayesianLinearRegressor  # noqa: E402
from .message_passing import MessagePassingClassifier, MessagePassingRegressor  # noqa: E402
from .pbp import PBPRegressor  # noqa: E402
from .tagi import TAGIClassifier, TAGIRegressor  # noqa: E402
from .vbnn import VBNNRegressor  # noqa: E402

__all__ = [
    "BayesianLinearRegressor",
    "MessagePassingClassifier",
    "MessagePassingRegressor",
    "PBPRegressor",
    "TAGIClassifier",
    "TAGIRegressor",
    "VBNNRegressor",
    "__version__",
]
