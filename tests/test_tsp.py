"""Folding (Sect. 6), nets and quantisation (Sect. 7, 9), rounding (Cor. 7.3) and ``srw_tsp``.

Seed 000, spec ``random-walk-tsp.md`` Sect. 16 items 6-10, 16-17.  Every check here is
deterministic (pathwise bounds and invariants), run on fixed seeds.
"""

import math

import numpy as np
import pytest
from scipy.sparse.csgraph import minimum_spanning_tree
from scipy.spatial.distance import cdist

import privsyn_core as ps
from privsyn_core.mechanisms.random_walks import walks

METRICS = ["chebyshev", "euclidean", "cityblock"]


# ------------------------------------------------------------------ snake path


@pytest.mark.parametrize("bins, dim", [(1, 1), (7, 1), (1, 3), (2, 2), (5, 2), (4, 3), (3, 4)])
def test_snake_visits_every_cell_once_through_adjacent_cells(bins, dim):
    path = walks.snake_order(bins, dim)
    assert path.shape == (bins ** dim, dim)
    ids = np.ravel_multi_index(tuple(path.T), (bins,) * dim)
    np.testing.assert_array_equal(np.sort(ids), np.arange(bins ** dim))
    steps = np.abs(np.diff(path, axis=0))
    assert np.all(steps.sum(axis=1) == 1)  # one cell in one coordinate
    for metric in METRICS:
        length = walks.path_length(walks.grid_centres(path, bins), metric)
        assert length == pytest.approx((bins ** dim - 1) / bins, rel=1e-12, abs=1e-15)


def test_snake_in_one_dimension_is_sorted_order():
    np.testing.assert_array_equal(walks.snake_order(6, 1)[:, 0], np.arange(6))


# ------------------------------------------------------------------ folding is 1-Lipschitz (Prop 6.5)


@pytest.mark.parametrize("metric", METRICS)
def test_folding_map_is_one_lipschitz(metric):
    rng = np.random.default_rng(0)
    for points in (walks.grid_centres(walks.snake_order(6, 2), 6), rng.random((80, 3))):
        order, _ = walks.mst_order(points, metric)
        for path in (points, points[order]):
            x = walks.path_positions(path, metric)
            assert x[0] == 0 and np.all(np.diff(x) >= 0)
            assert np.all(cdist(path, path, metric) <= np.abs(x[:, None] - x[None, :]) + 1e-12)


# ------------------------------------------------------------------ MST path (Lemma 6.1)


@pytest.mark.parametrize("metric", METRICS)
def test_mst_preorder_path_is_between_one_and_two_mst(metric):
    rng = np.random.default_rng(1)
    for points in (rng.random((150, 2)), rng.random((60, 4)), walks.grid_centres(walks.snake_order(8, 2), 8)):
        dist = walks.distance_matrix(points, metric)
        order, weight = walks.mst_order(points, metric)
        np.testing.assert_array_equal(np.sort(order), np.arange(len(points)))
        assert weight == pytest.approx(minimum_spanning_tree(dist).sum(), rel=1e-12)
        length = walks.path_length(points[order], metric)
        assert weight - 1e-12 <= length <= 2 * weight + 1e-12
        improved = walks.two_opt(order, dist)
        np.testing.assert_array_equal(np.sort(improved), np.arange(len(points)))
        assert walks.path_length(points[improved], metric) <= length + 1e-12


def test_two_opt_shortens_a_bad_path_and_mst_handles_duplicates_and_one_dimension():
    rng = np.random.default_rng(2)
    points = rng.random((40, 2))
    dist = walks.distance_matrix(points, "euclidean")
    shuffled = rng.permutation(40)
    assert walks.path_length(points[walks.two_opt(shuffled, dist)], "euclidean") < \
        0.5 * walks.path_length(points[shuffled], "euclidean")
    line = rng.permutation(np.linspace(0, 1, 30))[:, None]
    order, weight = walks.mst_order(line, "chebyshev")
    assert np.all(np.diff(line[order, 0]) > 0) or np.all(np.diff(line[order, 0]) < 0)  # sorted (spec 7.6)
    assert walks.path_length(line[order], "chebyshev") == pytest.approx(1.0) == pytest.approx(weight)
    dup = np.array([[0.0, 0.0], [0.0, 0.0], [1.0, 0.0], [1.0, 0.0], [0.5, 0.5]])
    order, weight = walks.mst_order(dup, "chebyshev")
    np.testing.assert_array_equal(np.sort(order), np.arange(5))
    assert weight == pytest.approx(1.0)
    assert walks.mst_order(np.zeros((1, 1)), "chebyshev")[0].tolist() == [0]
    far = np.array([[0.0, 0.0], [0.0, 0.0], [1.0, 1.0], [1.0, 1.0]])  # nearest neighbours at distance 0
    assert walks.mst_order(far, "euclidean")[1] == pytest.approx(math.sqrt(2))


# ------------------------------------------------------------------ nets and quantisation (B11, B12)


@pytest.mark.parametrize("metric", METRICS)
def test_quantisation_moves_mass_at_most_delta(metric):
    rng = np.random.default_rng(3)
    x = rng.random((400, 2))
    x[:3] = [[1.0, 1.0], [0.0, 1.0], [1.0, 0.0]]
    bins = 5
    res = ps.synthesize(x, "srw_tsp", 1.0, schema=ps.unit_schema(2), rng=0, bins=bins, metric=metric)
    d = res.diagnostics
    mu_n = d["cells"]["true_count"] / 400
    assert res.params["delta"] == walks.covering_radius(bins, 2, metric)
    assert ps.metrics.w1(x, d["net"], weights_y=mu_n, metric=metric) <= res.params["delta"] + 1e-12
    assert np.all((d["cells"]["lo"] <= d["path"]) & (d["path"] <= d["cells"]["hi"]))


def test_quantisation_is_a_tv_contraction_for_neighbouring_data():
    """Lemma 5.3 / (7.3): replacing one record changes the cell counts by at most 2 in l1."""
    rng = np.random.default_rng(4)
    x = rng.random((100, 3))
    y = x.copy()
    y[17] = rng.random(3)
    a = ps.synthesize(x, "srw_tsp", 1.0, schema=ps.unit_schema(3), rng=0, bins=4).diagnostics["cells"]["true_count"]
    b = ps.synthesize(y, "srw_tsp", 1.0, schema=ps.unit_schema(3), rng=0, bins=4).diagnostics["cells"]["true_count"]
    assert 0.5 * np.abs(a - b).sum() / 100 <= 0.5 * np.abs(x - y).any(axis=1).sum() * 2 / 100


# ------------------------------------------------------------------ rounding (Cor 7.3, B14)


@pytest.mark.parametrize("m", [1, 7, 50, 999])
def test_rounding_sums_to_m_and_adds_at_most_r_diam_over_m(m):
    rng = np.random.default_rng(m)
    for _ in range(20):
        k = int(rng.integers(1, 30))
        weights = rng.dirichlet(np.full(k, 0.4)) * (rng.random(k) > 0.3)
        if weights.sum() == 0:
            weights[0] = 1.0
        weights /= weights.sum()
        atoms = rng.random((k, 2))
        counts = walks.round_weights(weights, m)
        assert counts.dtype.kind == "i" and np.all(counts >= 0) and counts.sum() == m
        kappa = 1 - np.floor(m * weights).sum() / m
        r = int((weights > 0).sum())
        assert kappa <= r / m + 1e-12
        if counts.sum() > 0:
            keep = counts > 0
            w1 = ps.metrics.w1(atoms[weights > 0], atoms[keep], weights_x=weights[weights > 0],
                               weights_y=counts[keep] / m)
            assert w1 <= kappa * 1.0 + 1e-12 <= r * 1.0 / m + 1e-12  # diam of [0,1]^2 in l_inf is 1


@pytest.mark.parametrize("m", [1, 7, 50, 999])
def test_path_rounding_sums_to_m_and_moves_the_line_cdf_at_most_one_over_2m(m):
    rng = np.random.default_rng(100 + m)
    for _ in range(20):
        k = int(rng.integers(1, 30))
        weights = rng.dirichlet(np.full(k, 0.4)) * (rng.random(k) > 0.3)
        weights = weights / weights.sum() if weights.sum() > 0 else np.eye(k)[0]
        positions = np.concatenate(([0.0], np.cumsum(rng.random(k - 1))))
        counts = walks.round_along_path(weights, m)
        assert counts.dtype.kind == "i" and np.all(counts >= 0) and counts.sum() == m
        assert np.all(counts[weights == 0] == 0)
        assert walks.signed_w1_line(weights, counts / m, positions) <= positions[-1] / (2 * m) + 1e-12


# ------------------------------------------------------------------ the srw_tsp mechanism


@pytest.mark.parametrize("path, metric, rounding", [("snake", "chebyshev", "paper"), ("snake", "euclidean", "path"),
                                                    ("mst", "chebyshev", "path"), ("mst", "euclidean", "paper")])
def test_srw_tsp_pathwise_accuracy_chain(path, metric, rounding):
    """Thm 7.2 / Cor 7.3 per run: W1_T(mu_X, mu_Y) <= delta + W1_line(nu_hat, mu_N) + kappa diam,
    and W1_line(nu_hat, mu_N) <= 2 W1_line(nu, mu_N); the line W1 is in the metric's units."""
    rng = np.random.default_rng(5)
    x = np.clip(rng.normal(0.5, 0.15, size=(600, 2)), 0, 1)
    res = ps.synthesize(x, "srw_tsp", 2.0, schema=ps.unit_schema(2), rng=1, path=path, metric=metric,
                        rounding=rounding)
    d, p = res.diagnostics, res.params
    mu_n = d["cells"]["true_count"] / 600
    line_signed = walks.signed_w1_line(d["signed"], mu_n, d["positions"], right_end=d["positions"][-1] + 1)
    line_proj = walks.signed_w1_line(d["projected"], mu_n, d["positions"])
    assert line_proj <= 2 * line_signed + 1e-12
    assert ps.metrics.w1(d["path"], d["path"], weights_x=d["projected"], weights_y=mu_n, metric=metric) \
        <= line_proj + 1e-12  # folding is 1-Lipschitz
    if rounding == "paper":
        kappa = 1 - np.floor(p["m"] * d["projected"]).sum() / p["m"]
        assert p["rounding_w1_bound"] == pytest.approx(kappa * walks.cube_diameter(2, metric))
    else:
        assert p["rounding_w1_bound"] == pytest.approx(p["path_length"] / (2 * p["m"]))
    w1 = ps.metrics.w1(x, res.unit_rows, metric=metric)
    assert w1 <= p["delta"] + line_proj + p["rounding_w1_bound"] + 1e-9
    for c in range(2):  # Lipschitz statistics are preserved (1.3): coordinate means
        assert abs(x[:, c].mean() - res.unit_rows[:, c].mean()) <= ps.metrics.w1(x, res.unit_rows) + 1e-9


def test_srw_tsp_diagnostics_follow_the_documented_keys():
    x = np.random.default_rng(6).random((500, 3))
    res = ps.synthesize(x, "srw_tsp", 1.0, schema=ps.unit_schema(3), rng=2)
    d, k = res.diagnostics, res.params["cells"]
    # the rule's round((500 / log^1.5 500)^(1/3)) = 3, raised to the target 4 per axis that the noise mass
    # 4^3 * 2/1 <= 4 * 500 pays for (privsyn_core.data.layout)
    assert round((500 / math.log(500) ** 1.5) ** (1 / 3)) == 3 and res.params["bins"] == 4 and k == 4 ** 3
    for key in ("path", "net"):
        assert d[key].shape == (k, 3)
    for key in ("walk", "signed", "projected", "positions"):
        assert d[key].shape == (k,)
    assert d["walk_units"] == "mass" and set(d["cells"]) == {"lo", "hi", "true_count", "noisy_count", "count"}
    assert d["cells"]["true_count"].sum() == 500 and d["cells"]["count"].sum() == len(res.data) == 500
    np.testing.assert_allclose(d["signed"], d["cells"]["true_count"] / 500 + d["walk"], atol=1e-12)
    assert res.params["path_length"] == pytest.approx((k - 1) / res.params["bins"])
    assert math.fsum(e for _, e in res.ledger) == 1.0


def test_srw_tsp_in_one_dimension_is_srw():
    x = np.random.default_rng(7).random((800, 1))
    a = ps.synthesize(x, "srw_tsp", 1.0, schema=ps.unit_schema(1), rng=3, path="mst")
    b = ps.synthesize(x, "srw", 1.0, schema=ps.unit_schema(1), rng=3)
    assert a.params["cells"] == b.params["cells"] == 800
    np.testing.assert_array_equal(a.unit_rows, b.unit_rows)


@pytest.mark.parametrize("kwargs, message", [
    (dict(path="snake", two_opt=True), "two_opt"),
    (dict(path="mst", bins=600), "at most 262144"),
    (dict(path="mst", two_opt=True, bins=40), "two_opt"),
    (dict(path="zigzag"), "path"),
    (dict(metric="cosine"), "metric"),
])
def test_srw_tsp_rejects_bad_parameters(kwargs, message):
    with pytest.raises(ps.ParameterError, match=message):
        ps.synthesize(np.zeros((10, 2)), "srw_tsp", 1.0, schema=ps.unit_schema(2), rng=0, **kwargs)


def test_srw_tsp_caps_the_auto_resolution_for_mst_and_handles_tiny_inputs():
    x = np.random.default_rng(8).random((20000, 2))
    res = ps.synthesize(x, "srw_tsp", 10.0, schema=ps.unit_schema(2), rng=0, path="mst", two_opt=True)
    assert res.params["cells"] == 1024 and "capped" in res.warnings[0] and res.params["path_kind"] == "mst_2opt"
    assert res.params["mst_weight"] <= res.params["path_length"] <= 2 * res.params["mst_weight"] + 1e-12
    plain = ps.synthesize(x, "srw_tsp", 10.0, schema=ps.unit_schema(2), rng=0, path="mst", bins=32)
    assert res.params["path_length"] <= plain.params["path_length"] + 1e-12
    one = ps.synthesize(np.ones((1, 3)), "srw_tsp", 1.0, schema=ps.unit_schema(3), rng=0)
    assert one.params["cells"] == 8 and len(one.data) == 1  # never 1 cell per axis in d >= 2, and warned
    assert any("only 2 cells per axis" in w for w in one.warnings)
    jitter = ps.synthesize(x[:300], "srw_tsp", 1.0, schema=ps.unit_schema(2), rng=0, sample="uniform",
                           rounding="paper")
    cells = np.floor(jitter.unit_rows * jitter.params["bins"])
    assert np.all((cells >= 0) & (cells < jitter.params["bins"])) and len(jitter.data) == 300


@pytest.mark.parametrize("relation", ["replace", "add_remove"])
def test_srw_tsp_ledger_is_exact(relation):
    x = np.random.default_rng(9).random((700, 2))
    for eps in (0.3, 1.0, 2.5):
        res = ps.synthesize(x, "srw_tsp", eps, schema=ps.unit_schema(2), rng=1, neighbouring=relation)
        assert math.fsum(e for _, e in res.ledger) == eps == res.epsilon
        assert res.params["privacy_loss_bound"] <= eps * (1 + 1e-12)
