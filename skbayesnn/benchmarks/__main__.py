"""``python -m skbayesnn.benchmarks``: the README's comparison tables."""

from . import diabetes, digits

diabetes.main()
print()
digits.main()
