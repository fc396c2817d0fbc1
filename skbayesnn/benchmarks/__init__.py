"""Benchmark runners behind ``python -m skbayesnn.benchmarks``."""
