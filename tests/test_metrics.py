"""W1, sliced W1 and MMD against closed forms, direct dense computations and stated concentration bounds."""

import pickle

import numpy as np
import ot
import pytest
from scipy.spatial.distance import cdist
from scipy.stats import wasserstein_distance

import privsyn_core.evaluation.distances as distances
from privsyn_core.errors import DataError, ParameterError
from privsyn_core.evaluation.distances import W1Value, gaussian_kernel_mean, median_bandwidth, mmd, mmd2, sliced_w1, w1

NORMS = {"chebyshev": np.inf, "cityblock": 1, "euclidean": 2}
ALPHA = 1e-6  # false-failure rate of every concentration test below


# -- W1 ------------------------------------------------------------------------------------------
@pytest.mark.parametrize("metric", list(NORMS))
def test_w1_two_diracs_is_their_distance(metric):
    x, y = np.array([[0.1, 0.2, 0.9]]), np.array([[0.4, 0.1, 0.5]])
    value = w1(x, y, metric=metric)
    assert value == pytest.approx(np.linalg.norm((x - y)[0], NORMS[metric]), abs=1e-15)
    assert value.method == "exact_emd" and value.error_bound == 0.0


@pytest.mark.parametrize("metric", list(NORMS))
def test_w1_of_a_rigid_shift_is_the_norm_of_the_shift(metric):
    # The shift coupling costs ||v||; the 1-Lipschitz test function <x, dual(v)> attains it: W1 = ||v|| exactly.
    X = np.random.default_rng(0).random((300, 3))
    shift = np.array([0.07, -0.12, 0.03])
    assert w1(X, X + shift, metric=metric) == pytest.approx(np.linalg.norm(shift, NORMS[metric]), rel=1e-9)


def test_w1_in_one_dimension_matches_scipy_with_weights():
    rng = np.random.default_rng(1)
    x, y, wx, wy = rng.random(500), rng.random(300) ** 2, rng.random(500), rng.random(300)
    value = w1(x, y, weights_x=wx, weights_y=wy)
    assert value.method == "closed_form_1d"
    assert value == pytest.approx(wasserstein_distance(x, y, wx, wy), rel=1e-12)


def test_exact_w1_equals_pot_on_the_raw_cost_matrix_despite_merging_and_cancelling():
    rng = np.random.default_rng(2)
    grid = rng.integers(0, 6, (400, 2)) / 5.0  # many duplicates within and across the two clouds
    X, Y = grid[:250], grid[150:]
    wx, wy = rng.random(250), rng.random(250)
    reference = ot.emd2(wx / wx.sum(), wy / wy.sum(), ot.dist(X, Y, metric="chebyshev"), numItermax=10**8)
    assert w1(X, Y, weights_x=wx, weights_y=wy) == pytest.approx(reference, rel=1e-9, abs=1e-12)


@pytest.mark.parametrize("seed", range(3))
@pytest.mark.parametrize("metric", list(NORMS))
def test_grid_w1_is_within_its_stated_error_bound_of_exact(seed, metric):
    rng = np.random.default_rng(seed)
    X = rng.random((700, 2))
    Y = np.clip(rng.normal(0.5, 0.2, (600, 2)), 0, 1)
    exact = w1(X, Y, metric=metric, method="exact")
    grid = w1(X, Y, metric=metric, method="grid", max_entries=20_000)
    assert grid.method == "grid_emd" and grid.cells_per_axis >= 2
    assert 0 < grid.error_bound <= np.linalg.norm(np.ones(2), NORMS[metric]) * 2 / grid.cells_per_axis
    assert abs(grid - exact) <= grid.error_bound + 1e-12


def test_grid_w1_bound_in_three_dimensions_and_auto_switches_to_grid():
    """Euclidean: no certified method, so "auto" above max_entries is the grid."""
    rng = np.random.default_rng(4)
    X, Y = rng.random((800, 3)), rng.random((800, 3)) ** 1.5
    exact = w1(X, Y, metric="euclidean", method="exact")
    auto = w1(X, Y, metric="euclidean", max_entries=10_000)
    assert auto.method == "grid_emd" and abs(auto - exact) <= auto.error_bound + 1e-12


def test_w1_value_is_a_float_that_pickles_with_its_provenance():
    value = w1(np.zeros((1, 2)), np.ones((1, 2)))
    assert isinstance(value, float) and value == 1.0
    again = pickle.loads(pickle.dumps(value))
    assert (float(again), again.method, again.error_bound) == (1.0, "exact_emd", 0.0)
    assert value.describe()["method"] == "exact_emd"
    assert isinstance(W1Value(0.5, "grid_emd", 0.1, 8) + 1, float)


def test_w1_weights_are_normalised():
    rng = np.random.default_rng(5)
    X, Y, wy = rng.random((50, 2)), rng.random((40, 2)), rng.random(40)
    assert w1(X, Y, weights_y=wy) == pytest.approx(w1(X, Y, weights_y=1000 * wy), rel=1e-12)


@pytest.mark.parametrize("call, error", [
    (lambda: w1(np.zeros((3, 2)), np.zeros((3, 3))), ParameterError),
    (lambda: w1(np.zeros((3, 2)), np.zeros((3, 2)), metric="cosine"), ParameterError),
    (lambda: w1(np.zeros((3, 2)), np.zeros((3, 2)), method="sinkhorn"), ParameterError),
    (lambda: w1(np.array([[np.nan, 0.0]]), np.zeros((3, 2))), DataError),
    (lambda: w1(np.zeros((0, 2)), np.zeros((3, 2))), DataError),
    (lambda: w1(np.zeros((3, 2)), np.zeros((3, 2)), weights_x=[1, -1, 1]), ParameterError),
    (lambda: w1(np.random.default_rng(0).random((6000, 2)), np.random.default_rng(1).random((6000, 2)),
                method="exact"), ParameterError),
])
def test_w1_rejects_bad_input_with_a_user_error(call, error):
    with pytest.raises(error):
        call()


# -- sliced W1 -----------------------------------------------------------------------------------
def test_sliced_w1_matches_pot_on_the_same_directions_and_is_below_euclidean_w1():
    rng = np.random.default_rng(6)
    X, Y, wy = rng.random((400, 3)), rng.normal(0.5, 0.2, (300, 3)), rng.random(300)
    directions = np.random.default_rng(9).standard_normal((3, 200))
    directions /= np.linalg.norm(directions, axis=0)
    pot = ot.sliced_wasserstein_distance(X, Y, None, wy / wy.sum(), projections=directions, p=1)
    ours = sliced_w1(X, Y, weights_y=wy, n_projections=200, seed=9)
    assert ours == pytest.approx(pot, rel=1e-10)
    # every projection is 1-Lipschitz for the Euclidean metric, so each 1-D W1 is below W1_2
    assert ours <= w1(X, Y, weights_y=wy, metric="euclidean") + 1e-12


# -- MMD -------------------------------------------------------------------------------------------
def _dense_kernel_mean(X, Y, sigma, wx=None, wy=None):
    a = np.full(len(X), 1 / len(X)) if wx is None else wx / wx.sum()
    b = np.full(len(Y), 1 / len(Y)) if wy is None else wy / wy.sum()
    return a @ np.exp(-cdist(X, Y, "sqeuclidean") / (2 * sigma**2)) @ b


def test_chunked_kernel_mean_equals_the_dense_computation(monkeypatch):
    rng = np.random.default_rng(7)
    X, Y, wx, wy = rng.normal(size=(1500, 3)), rng.normal(0.3, 1, size=(700, 3)), rng.random(1500), rng.random(700)
    dense = _dense_kernel_mean(X, Y, 0.8, wx, wy)
    assert gaussian_kernel_mean(X, Y, bandwidth=0.8, weights_x=wx, weights_y=wy) == pytest.approx(dense, rel=1e-12)
    monkeypatch.setattr(distances, "_CHUNK_ELEMENTS", 7 * 700)  # 7 rows per chunk, a ragged last chunk
    assert gaussian_kernel_mean(X, Y, bandwidth=0.8, weights_x=wx, weights_y=wy) == pytest.approx(dense, rel=1e-12)


def test_balog_kernel_is_bandwidth_one_over_sqrt_two_gamma():
    # Balog et al.: k(x, y) = exp(-gamma ||x - y||^2), gamma = 1e-4 / D (spec A.8)
    X = np.random.default_rng(8).normal(100, 200, size=(300, 2))
    gamma = 1e-4 / 2
    direct = np.exp(-gamma * cdist(X, X, "sqeuclidean")).mean()
    assert gaussian_kernel_mean(X, X, bandwidth=1 / np.sqrt(2 * gamma)) == pytest.approx(direct, rel=1e-12)


def test_mmd_of_a_sample_with_itself_is_zero_and_mmd_is_symmetric():
    rng = np.random.default_rng(10)
    X, Y = rng.normal(size=(400, 2)), rng.normal(0.5, 1, size=(300, 2))
    assert mmd(X, X) <= 1e-6
    assert mmd(X, Y, bandwidth=0.7) == pytest.approx(mmd(Y, X, bandwidth=0.7), rel=1e-12)
    assert mmd(X, Y) == pytest.approx(mmd(Y, X), rel=1e-12)  # the pooled median is symmetric too


def test_mmd_of_two_diracs_has_its_closed_form():
    x, y, sigma = np.array([[0.0, 0.0]]), np.array([[0.3, 0.4]]), 0.5
    expected = np.sqrt(2 - 2 * np.exp(-0.25 / (2 * sigma**2)))
    assert mmd(x, y, bandwidth=sigma) == pytest.approx(expected, rel=1e-12)
    assert mmd(x, y) == pytest.approx(np.sqrt(2 - 2 * np.exp(-0.5)), rel=1e-12)  # median distance = 0.5


def test_weighted_mmd_matches_spec_a8_formula():
    rng = np.random.default_rng(11)
    P, Q, w = rng.normal(size=(300, 2)), rng.normal(size=(20, 2)), rng.random(20)
    sigma = 1.3
    squared = (_dense_kernel_mean(P, P, sigma) + _dense_kernel_mean(Q, Q, sigma, w, w)
               - 2 * _dense_kernel_mean(P, Q, sigma, None, w))
    assert mmd(P, Q, bandwidth=sigma, weights_y=w) == pytest.approx(np.sqrt(squared), rel=1e-10)


def test_unbiased_mmd_drops_the_diagonals():
    rng = np.random.default_rng(12)
    X, Y, sigma = rng.normal(size=(200, 2)), rng.normal(0.2, 1, size=(150, 2)), 0.9
    K = lambda A, B: np.exp(-cdist(A, B, "sqeuclidean") / (2 * sigma**2))
    n, m = len(X), len(Y)
    expected = ((K(X, X).sum() - n) / (n * (n - 1)) + (K(Y, Y).sum() - m) / (m * (m - 1)) - 2 * K(X, Y).mean())
    assert mmd2(X, Y, bandwidth=sigma, estimator="unbiased") == pytest.approx(expected, rel=1e-10)


def _gaussian_mmd2(delta, s, sigma, d):
    """Population MMD^2 between N(0, s^2 I) and N(delta, s^2 I) for the kernel exp(-|x-y|^2 / (2 sigma^2))."""
    c = sigma**2 + 2 * s**2
    return 2 * (sigma**2 / c) ** (d / 2) * (1 - np.exp(-np.dot(delta, delta) / (2 * c)))


@pytest.mark.parametrize("estimator, bound", [
    # Gretton et al. 2012, Thm 10: P(|MMD_u^2 - MMD^2| > t) <= 2 exp(-t^2 m2 / 8), m2 = floor(m / 2), 0 <= k <= 1
    ("unbiased", lambda m: np.sqrt(8 * np.log(2 / ALPHA) / (m // 2))),
    # linear statistic: mean of m // 2 i.i.d. terms in [-2, 2] (Hoeffding)
    ("linear", lambda m: np.sqrt(8 * np.log(2 / ALPHA) / (m // 2))),
])
def test_mmd_estimators_concentrate_on_the_gaussian_closed_form(estimator, bound):
    rng = np.random.default_rng(13)
    m, s, sigma, delta = 4000, 0.5, 1.0, np.array([3.0, 0, 0, 0, 0])
    X, Y = rng.normal(0, s, (m, 5)), rng.normal(delta, s, (m, 5))
    truth = _gaussian_mmd2(delta, s, sigma, 5)
    assert abs(mmd2(X, Y, bandwidth=sigma, estimator=estimator) - truth) <= bound(m)
    # a kernel with the wrong scale (exp(-|x-y|^2 / sigma^2)) would be off by more than the bound
    assert abs(_gaussian_mmd2(delta, s, sigma / np.sqrt(2), 5) - truth) > bound(m)


def test_bandwidth_handling():
    rng = np.random.default_rng(14)
    X, Y = rng.normal(size=(300, 2)), rng.normal(size=(200, 2))
    assert mmd(X, Y) == mmd(X, Y, bandwidth=median_bandwidth(X, Y))
    pooled = np.vstack([X, Y])
    direct = np.median(cdist(pooled, pooled)[np.triu_indices(len(pooled), 1)])
    assert median_bandwidth(X, Y) == pytest.approx(direct, rel=1e-12)  # <= 1000 points per side: no subsample
    assert median_bandwidth(np.zeros((5, 2))) == 1.0  # all distances zero: unit width
    for bad in (0.0, -1.0, np.nan, "mean"):
        with pytest.raises(ParameterError):
            mmd(X, Y, bandwidth=bad)
    with pytest.raises(ParameterError):
        mmd(X, Y, estimator="quadratic")
    with pytest.raises(ParameterError):
        mmd(X, Y, estimator="linear", weights_y=np.ones(200))


def test_a_residue_of_one_sign_left_by_cancelling_equal_masses_transports_nothing():
    """Equal masses on the same atoms can leave, after the cancellation of rounding, a positive residue of a few
    ulps with no negative entry: nothing is transported (POT refused the empty side before)."""
    atoms = np.array([[0.0, 0.0], [1.0, 1.0]])
    assert distances._signed_emd(atoms, np.array([4e-15, 0.0]), "chebyshev") == 0.0
    assert distances._signed_emd(atoms, np.array([0.5, -0.5]), "chebyshev") == pytest.approx(0.5)
