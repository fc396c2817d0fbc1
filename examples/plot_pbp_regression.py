"""
Streaming regression with PBPRegressor
======================================

Probabilistic backpropagation learns one data point at a time, so it can be fed
a stream: here the toy problem ``y = x^3 + eps`` (tagi.md §12.1, noise standard
deviation 3) arrives in chunks of 100 points and ``partial_fit`` updates the
posterior after each chunk.  The script prints how the test NLPD, the 95%
interval coverage and the estimated noise level evolve, compares the result with
40 epochs of ``fit`` on the same points, then compares the epistemic standard
deviation inside and outside the training range.  Run with
``python examples/plot_pbp_regression.py``; the figure is drawn when matplotlib is
installed (``pip install ".[plot]"`` from a clone).
"""

import numpy as np

from skbayesnn import PBPRegressor
from skbayesnn.datasets import make_toy_regression
from skbayesnn.metrics import coverage, nlpd

X_stream, y_stream = make_toy_regression(n_samples=4000, random_state=0)
X_test, y_test = make_toy_regression(n_samples=2000, random_state=1)

model = PBPRegressor(hidden_layer_sizes=(50,), random_state=0)
print("points seen   test NLPD   95% coverage   noise std (true 3)")
for start in range(0, 4000, 100):
    # The first call fixes the standardisation, so it should see representative
    # data; later chunks are scaled the same way.
    model.partial_fit(X_stream[start : start + 100], y_stream[start : start + 100])
    if (start + 100) % 800 == 0:
        dist = model.predict_dist(X_test)
        print(
            f"{start + 100:>11d}   {nlpd(y_test, dist):>9.3f}   {coverage(y_test, dist):>12.3f}"
            f"   {np.sqrt(model.noise_variance_):>18.2f}"
        )

# One pass of ADF never revisits the early points, whose residuals (from a
# barely trained network) inflated the noise estimate; fit() makes 40 passes
# with the prior refined after each, as the reference code does.
full = PBPRegressor(hidden_layer_sizes=(50,), random_state=0).fit(X_stream, y_stream)
dist = full.predict_dist(X_test)
print(
    f"fit, 40 epochs: test NLPD {nlpd(y_test, dist):.3f}, coverage "
    f"{coverage(y_test, dist):.3f}, noise std {np.sqrt(full.noise_variance_):.2f}"
)

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
    ax.scatter(X_stream[:200, 0], y_stream[:200], s=4, c="k", label="data (first 200)")
    ax.set_xlabel("x")
    ax.set_ylabel("y")
    ax.legend()
    plt.show()
