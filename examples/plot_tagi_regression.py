"""
Uncertainty away from the data with TAGIRegressor
=================================================

Train a 1x100 ReLU network by TAGI on the toy problem ``y = x^3 + eps``
(tagi.md §12.1: 20 points on [-4, 4], noise standard deviation 3), choosing the
observation noise ``sigma_v`` by cross-validated NLPD, and compare the epistemic
part of the predictive inside and outside the training range.  Run with
``python examples/plot_tagi_regression.py``; the figure is drawn when matplotlib is
installed (``pip install ".[plot]"`` from a clone).
"""

import numpy as np
from sklearn.model_selection import GridSearchCV

from skbayesnn import TAGIRegressor
from skbayesnn.datasets import make_toy_regression
from skbayesnn.metrics import coverage, neg_nlpd_scorer, nlpd

X, y = make_toy_regression(n_samples=20, random_state=0)
X_new, y_new = make_toy_regression(n_samples=2000, random_state=1)

search = GridSearchCV(
    TAGIRegressor(hidden_layer_sizes=(100,), batch_size=1, max_epochs=50, random_state=0),
    {"sigma_v": [0.03, 0.06, 0.1, 0.2]},
    scoring=neg_nlpd_scorer,
    cv=4,
).fit(X, y)
model = search.best_estimator_
dist = model.predict_dist(X_new)
print(f"chosen sigma_v: {search.best_params_['sigma_v']}")
print(f"test NLPD: {nlpd(y_new, dist):.3f}")
print(f"95% interval coverage on fresh data: {coverage(y_new, dist, 0.95):.3f}")

grid = np.linspace(-6, 6, 300)[:, None]
d = model.predict_dist(grid)
inside = np.abs(grid[:, 0]) <= 4
print(
    "median epistemic std inside / outside the training range: "
    f"{np.median(np.sqrt(d.epistemic_var[inside])):.1f} / "
    f"{np.median(np.sqrt(d.epistemic_var[~inside])):.1f}"
)

try:
    import matplotlib.pyplot as plt
except ImportError:  # plotting is optional
    plt = None

if plt is not None:
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
