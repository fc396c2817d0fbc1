"""
Regression and classification by message passing
=================================================

``MessagePassingRegressor`` on the paper's 1-D toy problem (message_passing.md
§12.1): ``f(x) = 0.5 x + 0.2 sin(2 pi x) + 0.3 sin(4 pi x)`` observed at 200
points of ``[0, 2]`` with noise standard deviation 0.05, a 16-16 LeakyReLU
network, all points in one active batch iterated 500 times (the paper's
single-batch schedule), the noise fixed at its true value.  The script prints the
test RMSE and 95% interval coverage inside the training range and the epistemic
standard deviation inside and outside it, then fits
``MessagePassingClassifier`` with the argmax factor on two interleaved half
moons and prints accuracy and log-loss.  Run with
``python examples/plot_message_passing.py``; the figure is drawn when matplotlib
is installed (``pip install ".[plot]"`` from a clone).
"""

import numpy as np
from sklearn.datasets import make_moons
from sklearn.metrics import accuracy_score, log_loss
from sklearn.model_selection import train_test_split

from skbayesnn import MessagePassingClassifier, MessagePassingRegressor
from skbayesnn.metrics import coverage


def toy_function(x):
    return 0.5 * x + 0.2 * np.sin(2 * np.pi * x) + 0.3 * np.sin(4 * np.pi * x)


rng = np.random.default_rng(0)
X = rng.uniform(0, 2, size=(200, 1))
y = toy_function(X[:, 0]) + 0.05 * rng.normal(size=200)

# noise_std is in units of the standardised target (the estimator standardises
# y internally), so the true 0.05 is divided by the target's standard deviation.
# With a single batch every visit restarts from the prior (the cavity divides
# the batch's own message out, §6), so the iterations of one visit are what
# count: one epoch of 500 iterations, as the paper trains this problem.
model = MessagePassingRegressor(
    hidden_layer_sizes=(16, 16),
    noise_std=0.05 / y.std(),
    batch_size=200,
    max_epochs=1,
    n_iter_per_batch=500,
    random_state=0,
).fit(X, y)

X_in = rng.uniform(0, 2, size=(2000, 1))
y_in = toy_function(X_in[:, 0]) + 0.05 * rng.normal(size=2000)
dist = model.predict_dist(X_in)
rmse = np.sqrt(np.mean((dist.mean() - y_in) ** 2))
print(f"inside [0, 2]: test RMSE {rmse:.3f} (noise std 0.05), "
      f"95% coverage {coverage(y_in, dist):.3f}")

grid = np.linspace(-1, 3, 401)[:, None]
d = model.predict_dist(grid)
inside = (grid[:, 0] >= 0) & (grid[:, 0] <= 2)
print(
    "median epistemic std inside / outside the training range: "
    f"{np.median(np.sqrt(d.epistemic_var[inside])):.3f} / "
    f"{np.median(np.sqrt(d.epistemic_var[~inside])):.3f}"
)

Xc, yc = make_moons(n_samples=600, noise=0.2, random_state=0)
Xc_train, Xc_test, yc_train, yc_test = train_test_split(Xc, yc, random_state=0)
clf = MessagePassingClassifier(
    hidden_layer_sizes=(32, 32), likelihood="argmax", batch_size=50, max_epochs=20,
    random_state=0,
).fit(Xc_train, yc_train)
proba = clf.predict_proba(Xc_test)
print(
    f"two moons: test accuracy {accuracy_score(yc_test, clf.predict(Xc_test)):.3f}, "
    f"log-loss {log_loss(yc_test, proba):.3f}"
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
    ax.plot(grid[:, 0], toy_function(grid[:, 0]), "k--", label="f(x)")
    ax.scatter(X[:, 0], y, s=4, c="k", label="data")
    ax.set_xlabel("x")
    ax.set_ylabel("y")
    ax.legend()
    plt.show()
