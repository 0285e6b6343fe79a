"""PVEC (exact Bingham sampling, Alg 2) and PROJ (Alg 3) of [BSV23], and their privacy.

Statistical tests compare the sampler's law with the exact Bingham density by a
Kolmogorov-Smirnov (or binomial) test, each with false-failure rate ``ALPHA_TEST``.
"""

import math

import numpy as np
import pytest
from scipy import stats
from scipy.integrate import cumulative_simpson
from scipy.special import i0e

from privsyn_core.mechanisms.microagg.aggregation import bingham_sample, complement_basis, proj, pvec, second_moment

ALPHA_TEST = 1e-6


def draws(M, n, seed):
    rng = np.random.default_rng(seed)
    return np.array([bingham_sample(M, rng)[0] for _ in range(n)])


def grid_cdf(log_density, lo, hi, size=200_001):
    """CDF of a 1-D density given on ``[lo, hi]`` by its log (Simpson on a fine grid)."""
    x = np.linspace(lo, hi, size)
    f = log_density(x)
    cumulative = cumulative_simpson(np.exp(f - f.max()), x=x, initial=0.0)
    return lambda v: np.interp(v, x, cumulative / cumulative[-1])


def rotation(q, seed):
    Q, R = np.linalg.qr(np.random.default_rng(seed).standard_normal((q, q)))
    return Q * np.sign(np.diag(R))


@pytest.mark.parametrize("eigen, seed", [((3.0, 0.5), 1), ((200.0, 0.0), 2), ((0.0, 0.0), 3)])
def test_circle_angle_follows_the_bingham_density(eigen, seed):
    R = rotation(2, seed)
    M = R @ np.diag(eigen) @ R.T
    u = draws(M, 2000, seed)
    np.testing.assert_allclose(np.linalg.norm(u, axis=1), 1.0, atol=1e-12)
    theta = np.mod(np.arctan2(u[:, 1], u[:, 0]), 2 * np.pi)

    def log_density(t):  # exp(u^T M u) for u = (cos t, sin t), uniform measure dt
        c, s = np.cos(t), np.sin(t)
        return M[0, 0] * c**2 + 2 * M[0, 1] * c * s + M[1, 1] * s**2

    assert stats.kstest(theta, grid_cdf(log_density, 0, 2 * np.pi)).pvalue > ALPHA_TEST


@pytest.mark.parametrize("eigen, seed", [((4.0, 1.5, 0.0), 4), ((60.0, 20.0, 0.0), 5), ((0.0, 0.0, 0.0), 6)])
def test_sphere_marginals_follow_the_bingham_density(eigen, seed):
    """On S^2, x = <u, e_1> has density ∝ exp(a1 x^2 + (1-x^2)(a2+a3)/2) I0((1-x^2)(a2-a3)/2)."""
    R = rotation(3, seed)
    u = draws(R @ np.diag(eigen) @ R.T, 2000, seed)
    for first in (0, 2):
        a1, a2, a3 = np.roll(eigen, -first)
        x = u @ R[:, first]

        def log_density(v, a1=a1, a2=a2, a3=a3):
            z = (1 - v**2) * (a2 - a3) / 2
            return a1 * v**2 + (1 - v**2) * (a2 + a3) / 2 + np.abs(z) + np.log(i0e(z))

        assert stats.kstest(x, grid_cdf(log_density, -1, 1)).pvalue > ALPHA_TEST


def test_one_dimensional_pvec_is_a_fair_sign():
    u = draws(np.array([[5.0]]), 2000, 7)
    assert set(np.unique(u)) == {-1.0, 1.0}
    assert stats.binomtest(int((u > 0).sum()), 2000, 0.5).pvalue > ALPHA_TEST


def test_pvec_stays_in_the_subspace_and_huge_scales_work():
    rng = np.random.default_rng(8)
    A = 1e6 * second_moment(rng.integers(0, 2, (500, 12)).astype(np.uint8))  # lambda_1 ~ 1e5
    Q, _ = np.linalg.qr(rng.standard_normal((12, 5)))
    v, u, used = pvec(A, Q, rng)
    assert np.linalg.norm(v) == pytest.approx(1, abs=1e-12) and np.linalg.norm(v - Q @ (Q.T @ v)) < 1e-12
    assert used >= 1 and np.allclose(v, Q @ u)


@pytest.mark.parametrize("q", [2, 3, 7])
def test_complement_basis(q):
    u = rotation(q, q)[:, 0]
    H = complement_basis(u)
    np.testing.assert_allclose(H.T @ H, np.eye(q - 1), atol=1e-13)
    np.testing.assert_allclose(H.T @ u, 0, atol=1e-13)


@pytest.mark.parametrize("t", [1, 2, 5, 8])
def test_proj_returns_an_orthogonal_projection_of_rank_t(t):
    rng = np.random.default_rng(t)
    S = second_moment(rng.integers(0, 2, (2000, 8)).astype(np.uint8))
    V, proposals = proj(1e5 * 1.0 / (6 * t) * S, t, rng)
    assert V.shape == (8, t) and len(proposals) == t
    np.testing.assert_allclose(V.T @ V, np.eye(t), atol=1e-12)
    P = V @ V.T
    np.testing.assert_allclose(P @ P, P, atol=1e-12)
    np.testing.assert_allclose(P, P.T, atol=1e-15)
    assert np.linalg.matrix_rank(P) == t and np.trace(P) == pytest.approx(t, abs=1e-12)


def circle_log_density(A, theta):
    """Normalised log density of PVEC(A) on the unit circle w.r.t. the uniform probability."""
    c, s = np.cos(theta), np.sin(theta)
    energy = A[0, 0] * c**2 + 2 * A[0, 1] * c * s + A[1, 1] * s**2
    return energy - (np.log(np.mean(np.exp(energy - energy.max()))) + energy.max())


@pytest.mark.slow
def test_pvec_privacy_for_neighbouring_datasets():
    """Spec 6 item 1: with A = (n eps/6t) S, neighbours' PVEC densities differ by at most e^{eps/(3t)}."""
    rng = np.random.default_rng(9)
    n, p, t, eps = 12, 2, 1, 1.0
    theta = np.linspace(0, 2 * np.pi, 20_001)[:-1]
    corners = np.array([[0, 0], [0, 1], [1, 0], [1, 1]], dtype=np.uint8)
    worst = 0.0
    for _ in range(10):
        X = rng.integers(0, 2, (n, p)).astype(np.uint8)
        A = n * eps / (6 * t) * second_moment(X)
        for row in range(n):
            for corner in corners:
                Y = X.copy()
                Y[row] = corner
                B = n * eps / (6 * t) * second_moment(Y)
                spread = np.ptp(np.linalg.eigvalsh(A - B))
                assert spread <= eps / (3 * t) + 1e-12
                gap = circle_log_density(A, theta) - circle_log_density(B, theta)
                worst = max(worst, np.abs(gap).max())
    assert worst <= eps / (3 * t) + 1e-9


def test_lemma_5_1_3_as_stated_is_too_strong_for_indefinite_differences():
    """Erratum (spec 11): ||A - B|| <= beta does not give ratio <= e^beta; the spread does."""
    beta = 2.0
    theta = np.linspace(0, 2 * np.pi, 20_001)[:-1]
    A, B = np.zeros((2, 2)), np.diag([-beta, beta])  # A - B = beta diag(1, -1), ||A - B|| = beta
    ratio = np.max(circle_log_density(A, theta) - circle_log_density(B, theta))
    assert ratio == pytest.approx(beta + math.log(np.i0(beta)), abs=1e-9)
    assert beta < ratio <= 2 * beta  # exceeds e^{||A-B||}; within e^{spread} = e^{2 beta}
