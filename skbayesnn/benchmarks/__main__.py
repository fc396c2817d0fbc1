"""``python -m skbayesnn.benchmarks``: the README's comparison tables."""

import argparse

from . import diabetes, digits

TABLES = {"diabetes": diabetes.main, "digits": digits.main}

parser = argparse.ArgumentParser(
    prog="python -m skbayesnn.benchmarks",
    description="Print the README's comparison tables: regression on scikit-learn's "
    "diabetes data, classification on its digits (nothing is downloaded).",
)
parser.add_argument("tables", nargs="*", metavar="{diabetes,digits}",
                    help="which tables to print (default: both)")
args = parser.parse_args()
unknown = [name for name in args.tables if name not in TABLES]
if unknown:
    parser.error(f"unknown table(s) {unknown}; choose from {list(TABLES)}")
for k, name in enumerate(args.tables or list(TABLES)):
    if k:
        print()
    TABLES[name]()
