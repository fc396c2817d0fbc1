"""Inference engines, one module per method, built on :mod:`skbayesnn.core`."""
