"""``python -m skbayesnn.benchmarks``: the diabetes comparison table (README)."""

from .diabetes import main

main()
