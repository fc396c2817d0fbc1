"""
Predictive intervals with BayesianLinearRegressor
=================================================

Fit an exact Bayesian linear regression on a cubic basis of the toy problem
``y = x^3 + eps`` (Hernandez-Lobato & Adams, 2015), inspect the epistemic and
aleatoric parts of the predictive variance, and check interval coverage on fresh
data.  Run with ``python examples/plot_bayesian_linear_regression.py``; the
figure is drawn when matplotlib is installed (``pip install ".[plot]"`` from a clone).
"""

import numpy as np
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import PolynomialFeatures

from skbayesnn import BayesianLinearRegressor
from skbayesnn.datasets import make_toy_regression
from skbayesnn.metrics import coverage, nlpd

X, y = make_toy_regression(n_samples=40, random_state=0)
X_new, y_new = make_toy_regression(n_samples=2000, random_state=1)

model = make_pipeline(PolynomialFeatures(3), BayesianLinearRegressor()).fit(X, y)
dist = model[-1].predict_dist(model[:-1].transform(X_new))

print(f"test NLPD: {nlpd(y_new, dist):.3f}")
print(f"95% interval coverage on fresh data: {coverage(y_new, dist, 0.95):.3f}")
print(f"noise std learned: {np.sqrt(dist.aleatoric_var[0]):.2f} (true 3.0)")

try:
    import matplotlib.pyplot as plt
except ImportError:  # plotting is optional
    plt = None

if plt is not None:
    grid = np.linspace(-6, 6, 300)[:, None]
    d = model[-1].predict_dist(model[:-1].transform(grid))
    lo, hi = d.interval(0.95)
    epi = 1.96 * np.sqrt(d.epistemic_var)
    fig, ax = plt.subplots(figsize=(6, 4))
    ax.fill_between(grid[:, 0], lo, hi, alpha=0.2, label="95% predictive")
    ax.fill_between(grid[:, 0], d.mean() - epi, d.mean() + epi, alpha=0.4, label="95% epistemic")
    ax.plot(grid[:, 0], grid[:, 0] ** 3, "k--", label="x^3")
    ax.scatter(X[:, 0], y, s=10, c="k", label="training data")
    ax.set_xlabel("x")
    ax.set_ylabel("y")
    ax.legend()
    plt.show()
