"""Building blocks of [BSV23] (seed 001): parameters, covering, partitions, exact identities.

Everything here is deterministic (exact identities and inequalities, float tolerance
1e-12) except the two statistical tests at the end, whose false-failure rate is 1e-6.
"""

import math
from itertools import combinations, product

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st
from scipy import stats
from scipy.optimize import linprog

from privsyn_core.errors import ParameterError
from privsyn_core.mechanisms.microagg.aggregation import (
    alg1_params,
    alg4_params,
    bootstrap_indices,
    covariance_loss,
    damped_microaggregate,
    equipartition,
    lattice_covering,
    microaggregate,
    moment_distance,
    nearest_point_labels,
    project_box,
    project_simplex_l1,
    randomized_rounding,
    second_moment,
    tensorization_constant,
    top_eigenvectors,
)

ALPHA_TEST = 1e-6  # false-failure rate of the statistical tests


def factor_data(n, p, seed=0):
    """Correlated Boolean data, spec 8.2 R2: X = 1[Z W^T + 0.7 N > 0.2]."""
    rng = np.random.default_rng(seed)
    Z, W = rng.standard_normal((n, 2)), rng.standard_normal((p, 2))
    return (Z @ W.T + 0.7 * rng.standard_normal((n, p)) > 0.2).astype(np.uint8)


def partition(X, t, alpha):
    """Alg 1 steps 1-5: scaled data, S, exact top-t basis, covering, nearest-point cells."""
    scaled = X / math.sqrt(X.shape[1])
    S = second_moment(X)
    lam, U = top_eigenvectors(S, t)
    G = lattice_covering(t, alpha)
    return scaled, S, lam, U, G, nearest_point_labels(scaled @ U, G)


# -- parameters (spec R1: the tables of sections 4 and 5) --------------------------------
@pytest.mark.parametrize("k, t", [(9, 0), (99, 0), (100, 1), (7224, 1), (7225, 2), (784_995, 2), (784_996, 3)])
def test_alg1_parameter_table(k, t):
    k_prime, alpha, t_got = alg1_params(k)
    assert k_prime == math.isqrt(k) and t_got == t
    assert len(lattice_covering(t, alpha)) <= max(k_prime, 1)  # s <= k' (step 5)


def test_alg1_rejects_k_below_nine():
    with pytest.raises(ParameterError, match="k >= 9"):
        alg1_params(8)


@pytest.mark.parametrize("n, kappa, t, s, b", [(10**3, 1 / 3, 0, 1, 32), (10**4, 1 / 3, 1, 3, 68),
                                               (10**5, 1 / 3, 1, 3, 147), (10**6, 1 / 3, 1, 3, 316),
                                               (10**7, 1 / 3, 2, 25, 681), (10**5, 1 / 2, 2, 21, 56),
                                               (10**4, 0.9, 3, 123, 5)])
def test_alg4_parameter_table(n, kappa, t, s, b):
    alpha, t_got, b_got = alg4_params(n, 10, 1.0, kappa)
    assert alpha == math.log(n) ** -0.25 and t_got == t
    assert round(b_got) == b and b_got == math.sqrt(10 * n ** (1 - kappa))
    assert len(lattice_covering(t, alpha)) == s <= n**kappa


# -- lattice covering (Prop 3.7) -----------------------------------------------------------
@pytest.mark.parametrize("t, alpha, size", [(0, 0.6, 1), (1, 0.77, 3), (1, 0.55, 3), (2, 0.76, 9),
                                            (3, 0.73, 57), (4, 0.70, 321)])
def test_covering_sizes_order_and_ball(t, alpha, size):
    G = lattice_covering(t, alpha)
    assert G.shape == (size, t) and size <= (7 / alpha) ** t
    assert np.all(np.linalg.norm(G, axis=1) <= 1 + 1e-12)
    if t:
        m = np.rint(G * math.sqrt(t) / alpha).astype(int)
        assert [tuple(r) for r in m] == sorted(tuple(r) for r in m)  # lexicographic
        bound = int(math.sqrt(t) / alpha)
        brute = [v for v in product(range(-bound, bound + 1), repeat=t)
                 if sum(x * x for x in v) <= t / alpha**2 + 1e-12]
        assert len(brute) == size


@pytest.mark.parametrize("t, alpha", [(1, 0.6), (2, 0.5), (3, 0.73)])
def test_covering_is_an_alpha_net_of_the_ball(t, alpha):
    rng = np.random.default_rng(t)
    direction = rng.standard_normal((4000, t))
    direction /= np.linalg.norm(direction, axis=1, keepdims=True)
    points = direction * rng.random((4000, 1)) ** (1 / t)
    points[:1000] = direction[:1000]  # the sphere, the hardest case
    G = lattice_covering(t, alpha)
    labels = nearest_point_labels(points, G)
    assert np.max(np.linalg.norm(points - G[labels], axis=1)) < alpha


def test_covering_guard():
    with pytest.raises(ParameterError, match="covering"):
        lattice_covering(8, 0.3, max_points=10_000)


def test_nearest_point_labels_match_brute_force_and_break_ties_by_index():
    rng = np.random.default_rng(3)
    G = lattice_covering(2, 0.5)
    C = rng.uniform(-1, 1, (500, 2))
    brute = np.argmin(np.linalg.norm(C[:, None, :] - G[None], axis=2), axis=1)
    assert (nearest_point_labels(C, G) == brute).all()
    assert nearest_point_labels(np.zeros((1, 1)), np.array([[-1.0], [1.0]]))[0] == 0


# -- microaggregation identities (4.1), (4.2), Lemmas 3.1-3.3, 3.6 ------------------------
def test_mean_preserved_and_law_of_total_covariance():
    X = factor_data(3000, 8)
    scaled, S, _, _U, G, cells = partition(X, 2, 0.5)
    counts, w, Y = microaggregate(scaled, cells, len(G))
    assert counts.sum() == len(X)
    np.testing.assert_allclose(w @ Y, scaled.mean(axis=0), rtol=0, atol=1e-14)  # (4.2)
    gap = scaled - Y[cells]
    lhs = S - (Y.T * w) @ Y
    np.testing.assert_allclose(lhs, gap.T @ gap / len(X), rtol=0, atol=1e-14)  # Lemma 3.1
    assert np.linalg.eigvalsh(lhs).min() >= -1e-12
    assert covariance_loss(S, w, Y) == pytest.approx(np.linalg.norm(lhs), abs=1e-15)


def test_second_moment_is_uncentred_and_scaled():
    X = factor_data(2000, 7)
    S = second_moment(X)
    counts = X.astype(np.int64).T @ X.astype(np.int64)
    np.testing.assert_allclose(S, counts / (2000 * 7), rtol=1e-15, atol=0)
    assert np.trace(S) <= 1 + 1e-15 and np.linalg.eigvalsh(S).min() >= -1e-14


def test_spectral_tail_lemma_3_3():
    S = second_moment(factor_data(2000, 10, seed=4))
    lam, _ = top_eigenvectors(S, 10)
    assert (np.diff(lam) <= 1e-15).all()
    for t in range(1, 11):
        assert np.sum(lam[t:] ** 2) <= 1 / t


@pytest.mark.parametrize("t, alpha", [(1, 0.77), (2, 0.5), (3, 0.73)])
def test_nearest_point_approximation_and_decomposition(t, alpha):
    X = factor_data(4000, 9, seed=t)
    scaled, S, lam, V, G, cells = partition(X, t, alpha)
    _, w, Y = microaggregate(scaled, cells, len(G))
    projected = (scaled - Y[cells]) @ V
    assert np.max(np.linalg.norm(projected, axis=1)) <= 2 * alpha  # Lemma 3.6
    assert np.max(np.linalg.norm(scaled @ V - G[cells], axis=1)) < alpha  # covering
    P = V @ V.T
    tail = np.linalg.norm((np.eye(len(P)) - P) @ S @ (np.eye(len(P)) - P))
    assert tail == pytest.approx(math.sqrt(np.sum(lam[t:] ** 2)), abs=1e-12)
    lhs = covariance_loss(S, w, Y)
    assert lhs <= np.mean(np.sum(projected**2, axis=1)) + tail + 1e-12  # Lemma 3.2


# -- equipartition (Section 3.6) -----------------------------------------------------------
@settings(max_examples=60, deadline=None)
@given(n=st.integers(9, 400), s=st.integers(1, 6), k=st.integers(1, 60), seed=st.integers(0, 10**6),
       keyed=st.booleans())
def test_equipartition_structure(n, s, k, seed, keyed):
    k = min(k, n)
    rng = np.random.default_rng(seed)
    labels = rng.integers(0, s, n)
    key = rng.random(n) if keyed else None
    blocks, merged = equipartition(labels, k, key)
    q = n // k
    sizes = np.bincount(blocks)
    assert sizes.sum() == n and len(sizes) == n // q and sizes.min() >= q and sizes.max() < 2 * q
    if n % k == 0:
        assert len(sizes) == k and (sizes == q).all()
    residual = int(sum(np.bincount(labels) % q))
    assert merged == residual + (q if 0 < residual < q else 0)
    # every block that is not made of residual records is one chunk of one cell
    pure = [b for b in range(len(sizes)) if len(set(labels[blocks == b])) == 1]
    assert len(pure) >= len(sizes) - (residual + q - 1) // q - 1


def test_equipartition_loss_bound_and_means():
    X = factor_data(5000, 10, seed=5)
    _k_prime, alpha, t = alg1_params(1000)
    scaled, S, _lam, _U, G, cells = partition(X, t, alpha)
    _, w_f, y_f = microaggregate(scaled, cells, len(G))
    loss_f = covariance_loss(S, w_f, y_f)
    _, U_all = top_eigenvectors(S, 10)
    for key in (None, scaled @ U_all[:, t]):
        blocks, merged = equipartition(cells, 1000, key)
        sizes, w, Y = microaggregate(scaled, blocks, 1000)
        assert (sizes == 5).all() and merged < len(G) * 5
        np.testing.assert_allclose(w @ Y, scaled.mean(axis=0), rtol=0, atol=1e-14)
        assert covariance_loss(S, w, Y) <= loss_f + merged / len(X) + 1e-12  # Lemmas 3.8-3.9


def test_prop_3_14_lower_bound_on_a_separated_set():
    """Any partition of a 1/2-separated set into k0 parts loses >= (n - k0)/(8 n sqrt p)."""
    rng = np.random.default_rng(6)
    n, p, k = 200, 100, 100
    X = rng.integers(0, 2, (n, p)).astype(np.uint8)
    scaled = X / math.sqrt(p)
    distances = np.linalg.norm(scaled[:, None] - scaled[None], axis=2)[np.triu_indices(n, 1)]
    assert distances.min() > 0.5  # the construction's precondition (Lemma 3.15)
    _k_prime, alpha, t = alg1_params(k)
    _, S, _, _V, _G, cells = partition(X, t, alpha)
    blocks, _ = equipartition(cells, k, None)
    _sizes, w, Y = microaggregate(scaled, blocks, k)
    assert np.trace(S - (Y.T * w) @ Y) >= (n - k) / (8 * n)
    assert covariance_loss(S, w, Y) >= (n - k) / (8 * n * math.sqrt(p))


# -- tensorization (Thm 3.10) and the metric (1.2) ------------------------------------------
def dense_moment(points, weights, d):
    """``sum_i weights_i points_i^{(x)d}`` as a dense p^d tensor."""
    letters = "abcd"[:d]
    subscripts = "n," + ",".join("n" + c for c in letters) + "->" + letters
    return np.einsum(subscripts, weights, *([points] * d))


def test_moment_distance_and_tensorization():
    X = factor_data(1500, 6, seed=7)
    scaled, S, _, _V, _G, cells = partition(X, 1, 0.77)
    blocks, _ = equipartition(cells, 100, None)
    _, w, Y = microaggregate(scaled, blocks, 100)
    a = np.full(len(X), 1 / len(X))
    dist = {d: moment_distance(scaled, a, Y, w, d) for d in (1, 2, 3, 4)}
    for d in (2, 3):
        dense = np.linalg.norm(dense_moment(scaled, a, d) - dense_moment(Y, w, d))
        assert dist[d] == pytest.approx(dense, rel=1e-9, abs=1e-12)
    assert dist[1] <= 1e-7  # means preserved (sqrt of rounding noise)
    assert dist[2] == pytest.approx(covariance_loss(S, w, Y), rel=1e-9)
    assert dist[3] <= tensorization_constant(3) * dist[2] and dist[4] <= tensorization_constant(4) * dist[2]
    assert [tensorization_constant(d) for d in (1, 2, 3, 4, 5)] == [0, 1, 8, 44, 208]


# -- damping, projections ---------------------------------------------------------------------
def test_damped_microaggregation():
    X = np.array([[1, 0], [1, 1], [0, 1], [1, 1], [1, 0]], dtype=float)
    labels = np.array([0, 0, 0, 0, 2])
    counts, w, damped = damped_microaggregate(X, labels, 4, b=2.5)
    np.testing.assert_array_equal(counts, [4, 0, 1, 0])
    np.testing.assert_allclose(w, [0.8, 0, 0.2, 0])
    np.testing.assert_allclose(damped, [[3 / 4, 3 / 4], [0, 0], [1 / 2.5, 0], [0, 0]])  # 1/max(|F|, b)


def test_damping_sensitivity_for_fractional_b_erratum():
    """Lemma 5.10's proof misses b < |I| < b+1 for non-integer b; the bound 2/b still holds (spec 6.3)."""
    rng = np.random.default_rng(9)
    b, size = 10.5, 11  # b < |I| < b + 1: the uncovered case
    worst = 0.0
    for _ in range(2000):
        x = rng.standard_normal((size, 5))
        x /= np.maximum(np.linalg.norm(x, axis=1, keepdims=True), 1.0)  # ||x_i|| <= 1
        full = x.sum(axis=0) / max(size, b)
        left = x[1:].sum(axis=0) / max(size - 1, b)  # one index leaves the set
        worst = max(worst, np.linalg.norm(full - left))
    assert worst <= 2 / b


@pytest.mark.slow
def test_l1_simplex_projection_is_an_l1_minimiser():
    rng = np.random.default_rng(10)
    for s in (1, 2, 5, 9):
        for _ in range(25):
            v = rng.normal(0.1, 0.3, s)
            w = project_simplex_l1(v)
            assert w.min() >= 0 and w.sum() == pytest.approx(1, abs=1e-15)
            # LP: min sum e  s.t.  e >= w - v, e >= v - w, sum w = 1, w >= 0
            eye = np.eye(s)
            result = linprog(np.r_[np.zeros(s), np.ones(s)], A_ub=np.block([[eye, -eye], [-eye, -eye]]),
                             b_ub=np.r_[v, -v], A_eq=np.r_[np.ones(s), np.zeros(s)][None], b_eq=[1],
                             bounds=[(0, None)] * (2 * s), method="highs")
            assert np.abs(w - v).sum() <= result.fun + 1e-9
    np.testing.assert_array_equal(project_simplex_l1(np.array([-1.0, -2.0, 0.0, -0.5])), np.full(4, 0.25))


def test_box_projection_is_clipping():
    Y = np.array([[-0.2, 0.1, 0.9]])
    np.testing.assert_array_equal(project_box(Y, 0.0, 1 / math.sqrt(3)), [[0.0, 0.1, 1 / math.sqrt(3)]])


# -- post-processing, statistical (false-failure rate ALPHA_TEST each) ---------------------
def test_randomized_rounding_is_unbiased_off_the_diagonal_only():
    rng = np.random.default_rng(11)
    u = np.array([0.5, 0.2, 0.9, 0.35, 0.65])
    m = 20_000
    Z = randomized_rounding(np.tile(u, (m, 1)), rng).astype(float)
    sets = [c for d in (2, 3) for c in combinations(range(5), d)]
    # Hoeffding for m i.i.d. products in [0, 1], union bound over the index sets
    radius = math.sqrt(math.log(2 * len(sets) / ALPHA_TEST) / (2 * m))
    for c in sets:
        assert abs(np.prod(Z[:, list(c)], axis=1).mean() - np.prod(u[list(c)])) <= radius
    # the diagonal is biased: E z_i^2 = u_i, not u_i^2 (why (1.2) uses distinct indices)
    assert abs((Z[:, 0] ** 2).mean() - u[0] ** 2) > 0.25 - radius


def test_bootstrap_indices_follow_the_weights():
    weights = np.array([0.5, 0.0, 0.2, 0.3]) * 3  # unnormalised on purpose
    counts = np.bincount(bootstrap_indices(weights, 30_000, np.random.default_rng(12)), minlength=4)
    assert counts[1] == 0
    expected = 30_000 * np.array([0.5, 0.2, 0.3])
    assert stats.chisquare(counts[[0, 2, 3]], expected).pvalue > ALPHA_TEST
