"""How far a classifier's Monte Carlo members' mean lies from predict_proba's
closed form, and which of the two predicts the test labels better.

Usage:
    OPENBLAS_NUM_THREADS=1 python benchmarks/members_vs_closed_form.py
        [--n-members 2000] [--epochs 10]

``predict_dist(X, n_members=M)`` returns the mean over ``M`` members (class
probabilities at network outputs drawn from their Gaussian predictive, the
likelihood's noise included); ``predict_proba`` a closed form over the same
Gaussian: the renormalised pairwise-probit product for the argmax and
one-hot regression likelihoods (message_passing.md §5.11), the probit softmax
for the softmax one (§5.9), TAGI's tree of probits (tagi.md).  For two
classes the argmax, regression and TAGI forms are exact, so the two differ
only by Monte Carlo error; otherwise the closed forms approximate the mean.

Cases: sklearn's digits on the fixed stratified split of
``benchmarks/digits_mp.py`` (10 classes; hidden (100, 100), ``max_abs_z=1``,
batch 32), trained on its first 150 and on all 1347 training rows, and
two-class moons (200 rows, noise 0.2; 40 training rows, hidden (16,), batch
20, 5 epochs) evaluated on 300 points drawn uniformly from [-3, 4]^2, where
most lie far from the data (moons' test labels do not exist there, so only
the gaps are printed).  Prints per case and likelihood the largest and median
(over test rows) of the largest absolute gap over classes, the share of rows
whose argmax differs and, on digits, the test NLL and accuracy of both.
"""

import argparse
import warnings

import numpy as np
from sklearn.datasets import load_digits, make_moons
from sklearn.model_selection import train_test_split

from skbayesnn import MessagePassingClassifier, TAGIClassifier
from skbayesnn.metrics import categorical_nll


def gaps(model, X, n_members):
    closed = model.predict_proba(X)
    members = model.predict_dist(X, n_members=n_members, random_state=0).proba
    gap = np.abs(closed - members).max(axis=1)
    flipped = np.mean(closed.argmax(axis=1) != members.argmax(axis=1))
    return closed, members, gap, flipped


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n-members", type=int, default=2000)
    parser.add_argument("--epochs", type=int, default=10)
    args = parser.parse_args()
    warnings.simplefilter("ignore", UserWarning)  # few-row fits: the noise check's advice

    X, y = load_digits(return_X_y=True)
    X_train, X_test, y_train, y_test = train_test_split(
        X, y, test_size=0.25, stratify=y, random_state=0)
    print(f"{'case':<22}{'model':<14}{'max gap':>9}{'median':>9}{'argmax':>8}"
          f"{'NLL closed':>12}{'NLL members':>13}{'acc closed':>12}{'acc members':>13}")
    for n in (150, len(X_train)):
        models = {lik: MessagePassingClassifier((100, 100), likelihood=lik, max_abs_z=1.0,
                                                max_epochs=args.epochs, batch_size=32,
                                                random_state=0)
                  for lik in ("argmax", "regression", "softmax")}
        models["TAGI"] = TAGIClassifier((100, 100), max_epochs=args.epochs, random_state=0)
        for name, model in models.items():
            model.fit(X_train[:n], y_train[:n])
            closed, members, gap, flipped = gaps(model, X_test, args.n_members)
            codes = np.searchsorted(model.classes_, y_test)
            print(f"{f'digits, {n} rows':<22}{name:<14}{gap.max():9.3f}{np.median(gap):9.3f}"
                  f"{flipped:8.3f}{categorical_nll(codes, closed):12.4f}"
                  f"{categorical_nll(codes, members):13.4f}"
                  f"{np.mean(closed.argmax(1) == codes):12.4f}"
                  f"{np.mean(members.argmax(1) == codes):13.4f}")

    X, y = make_moons(200, noise=0.2, random_state=0)
    grid = np.random.default_rng(1).uniform(-3, 4, size=(300, 2))
    for lik in ("argmax", "regression", "softmax"):
        model = MessagePassingClassifier((16,), likelihood=lik, batch_size=20, max_epochs=5,
                                         random_state=0).fit(X[:40], y[:40])
        _, _, gap, flipped = gaps(model, grid, 10 * args.n_members)
        print(f"{'moons, 40 rows':<22}{lik:<14}{gap.max():9.3f}{np.median(gap):9.3f}"
              f"{flipped:8.3f}")


if __name__ == "__main__":
    main()
