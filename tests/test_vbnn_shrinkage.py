"""GIG moments, normalisers, the Bessel recurrence and the EM step of VBNN's priors."""

import numpy as np
import pytest
from scipy import integrate, optimize, special

from skbayesnn.inference.vbnn.shrinkage import (
    ShrinkagePrior,
    gig_inverse_mean,
    gig_log_normalizer,
    gig_mean,
    log_kv,
)


@pytest.mark.parametrize("nu", [0.0, 0.3, 1.0, 2.5, 7.0, 40.2, 90.5, -4.5, -60.5])
@pytest.mark.parametrize("z", [0.05, 1.0, 7.0])
def test_log_kv_matches_scipy(nu, z):
    assert log_kv(nu, z) == pytest.approx(np.log(special.kv(nu, z)), rel=1e-12, abs=1e-12)


@pytest.mark.parametrize("z", [0.5, 2.0, 50.0])
def test_log_kv_is_finite_and_exact_where_k_overflows(z):
    # The order of q(tau) for a 50 x 50 layer; K itself overflows double
    # precision.  Against 50-digit mpmath (the large-order asymptote, used
    # here before, was off by 8e-4 and let a factor of 2 in K pass).
    mpmath = pytest.importorskip("mpmath")
    assert not np.isfinite(special.kv(1250.5, z))
    with mpmath.workdps(50):
        exact = float(mpmath.log(mpmath.besselk(1250.5, z)))
    assert log_kv(-1250.5, z) == pytest.approx(exact, rel=1e-13)


def _quad_moments(nu, delta, lam):
    def density(x):
        return x ** (nu - 1.0) * np.exp(-0.5 * (delta**2 / x + lam**2 * x))

    z = integrate.quad(density, 0, np.inf, limit=500)[0]
    inv = integrate.quad(lambda x: density(x) / x, 0, np.inf, limit=500)[0] / z
    mean = integrate.quad(lambda x: x * density(x), 0, np.inf, limit=500)[0] / z
    return np.log(z), mean, inv


@pytest.mark.parametrize(
    "nu, delta, lam",
    [
        (-1.5, 0.7, 0.0),
        (-3.0, 2.0, 0.0),
        (2.0, 0.0, 1.3),
        (-0.5, 0.8, 1.2),
        (-20.5, 3.0, 1.1),
        (0.5, 1.2, 0.9),
    ],
)
def test_gig_moments_match_quadrature(nu, delta, lam):
    log_z, mean, inv = _quad_moments(nu, delta, lam)
    assert gig_log_normalizer(nu, delta, lam) == pytest.approx(log_z, rel=1e-8)
    assert gig_mean(nu, delta, lam) == pytest.approx(mean, rel=1e-7)
    assert gig_inverse_mean(nu, delta, lam) == pytest.approx(inv, rel=1e-7)


def test_divergent_moments_are_infinite():
    assert gig_mean(-0.5, 1.0, 0.0) == np.inf  # IG(1/2) has no mean
    assert gig_inverse_mean(1.0, 0.0, 1.0) == np.inf  # Gamma(1) has no E[1/x]


@pytest.mark.parametrize("family", ["student_t", "laplace", "nig"])
def test_em_step_maximises_the_expected_log_prior(family, rng):
    # sum_l E_q[log GIG(tau_l | nu, delta, lam)] over the EM'd hyperparameter
    # (vbnn.md §6.1), maximised numerically for comparison.
    prior = ShrinkagePrior.build(family, [(6, 4), (5, 6), (1, 5)])
    for j, shape in enumerate(prior.shapes):
        prior.update_tau(j, rng.gamma(1.0, 0.3, size=shape))
    q = prior.q_tau

    def e_log_tau(nu_q, d_q, l_q, h=1e-6):
        # d/dnu log Z(nu, ...) = E[log x]
        return (gig_log_normalizer(nu_q + h, d_q, l_q) - gig_log_normalizer(nu_q - h, d_q, l_q)) / (
            2 * h
        )

    stats = [(float(gig_inverse_mean(*t)), float(gig_mean(*t)), float(e_log_tau(*t))) for t in q]

    def objective(value):
        delta, lam = (value, prior.lam_glob) if family == "student_t" else (prior.delta_glob, value)
        log_z = gig_log_normalizer(prior.nu_glob, delta, lam)
        return -sum(
            -log_z + (prior.nu_glob - 1) * elog - 0.5 * (delta**2 * inv + lam**2 * mean)
            for inv, mean, elog in stats
        )

    best = optimize.minimize_scalar(
        objective, bounds=(1e-4, 50.0), method="bounded", options={"xatol": 1e-10}
    )
    prior.em_step()
    found = prior.delta_glob if family == "student_t" else prior.lam_glob
    assert found == pytest.approx(best.x, rel=1e-5)


def test_gaussian_family_has_fixed_precisions():
    prior = ShrinkagePrior.build("gaussian", [(3, 4), (1, 3)], global_scale=2.0)
    np.testing.assert_allclose(prior.weight_precision(0), 4.0 / 4.0)  # fan-in / scale^2
    np.testing.assert_allclose(prior.weight_precision(1), 3.0 / 4.0)
    w_sq = [np.full((3, 4), 0.5), np.full((1, 3), 0.2)]
    expected = sum(
        np.sum(-0.5 * np.log(2 * np.pi * v) - 0.5 * w / v) for w, v in zip(w_sq, [1.0, 4.0 / 3.0])
    )
    assert prior.elbo_terms(w_sq) == pytest.approx(expected)


def test_unknown_family_is_rejected():
    with pytest.raises(ValueError, match="shrinkage"):
        ShrinkagePrior.build("horseshoe", [(2, 2)])
