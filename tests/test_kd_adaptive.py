"""kd_adaptive (seed 002, Algorithms 2-3, Theorems 7-8; spec A.4): budget, tree geometry, exact empty subtrees.

Statistical tests use fixed seeds and a false-failure rate ALPHA = 1e-6 per test (as OpenDP does).
"""

import math

import numpy as np
import pandas as pd
import pytest
from scipy import stats

import privsyn_core as ps
from privsyn_core.mechanisms.kdtree.kd_adaptive import node_boxes, path_codes
from privsyn_core.mechanisms.kdtree.kd_empty import integer_threshold, tail_probability
from privsyn_core.privacy.accounting import split_epsilon
from privsyn_core.privacy.noise import discrete_laplace, discrete_laplace_pmf

ALPHA = 1e-6
RUN = ps.get_mechanism("kd_adaptive").run
DEFAULTS = {"h": None, "h_max": None, "tau": None, "t": None, "tree_fraction": 0.5, "sample": "center",
            "bandwidth": 0.1}


def run(X, eps, seed, **params):
    return RUN(X, eps, neighbouring="replace", n_synthetic=1, rng=np.random.default_rng(seed),
               **{**DEFAULTS, **params})


def two_sample_pvalue(a: np.ndarray, b: np.ndarray, min_total: int = 20) -> float:
    """Chi-square two-sample test of two samples of integers; sparse values are pooled into one bin."""
    values = np.union1d(a, b)
    table = np.array([[np.count_nonzero(s == v) for v in values] for s in (a, b)], dtype=float)
    dense = table.sum(0) >= min_total
    table = np.column_stack([table[:, dense], table[:, ~dense].sum(1)])
    table = table[:, table.sum(0) > 0]
    return stats.chi2_contingency(table).pvalue


# -- budget identities ------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("relation, sensitivity", [("replace", 2), ("add_remove", 1)])
@pytest.mark.parametrize("eps, fraction", [(0.1, 0.5), (1 / 3, 0.3), (1.0, 0.7), (7.0, 1 / 3)])
def test_ledger_sums_exactly_and_per_level_scales_follow_theorems_7_8(relation, sensitivity, eps, fraction):
    X = np.random.default_rng(0).random((500, 2))
    result = ps.synthesize(X, "kd_adaptive", eps, schema=ps.unit_schema(2), neighbouring=relation, h=4, h_max=9,
                           tree_fraction=fraction, tau=50.0, rng=1)
    (_, eps_tree), (_, eps_leaf) = result.ledger
    assert math.fsum([eps_tree, eps_leaf]) == eps == result.epsilon
    assert (eps_tree, eps_leaf) == tuple(e for _, e in split_epsilon(eps, [("a", fraction), ("b", 1 - fraction)]))
    assert result.params["noisy_levels"] == 5
    assert result.params["tree_noise_scale"] == sensitivity * 5 / eps_tree
    assert result.params["leaf_noise_scale"] == sensitivity / eps_leaf


def test_no_noisy_levels_gives_the_whole_budget_to_the_leaves():
    X = np.random.default_rng(0).random((20_000, 2))
    result = ps.synthesize(X, "kd_adaptive", 0.8, schema=ps.unit_schema(2), h=16, h_max=16, t=-1.0, rng=1)
    assert result.ledger == [("leaf counts, discrete Laplace scale 2/eps''", 0.8)]
    assert any("no private split decisions" in w for w in result.warnings)
    cells = result.diagnostics["cells"]
    nonempty = cells["true_count"] > 0
    noise = (cells["noisy_count"] - cells["true_count"])[nonempty]
    assert len(noise) > 10_000 and (cells["depth"] == 16).all()
    support = np.arange(-40, 41)
    observed = np.array([np.count_nonzero(noise == z) for z in support], dtype=float)
    expected = discrete_laplace_pmf(support, 2 / 0.8) * len(noise)
    keep = expected >= 5
    obs = np.append(observed[keep], len(noise) - observed[keep].sum())
    exp = np.append(expected[keep], len(noise) - expected[keep].sum())
    assert stats.chisquare(obs, exp).pvalue > ALPHA


@pytest.mark.slow
def test_split_decision_uses_fresh_noise_at_the_tree_scale():
    """Root with 50 points, tau = 40, one noisy level: leaf iff 50 <= 40 + eta, eta ~ Lap_Z(2*1/0.5 = 4)."""
    X = np.full((50, 1), 0.3)
    reps = 1000
    root_leaf = sum(run(X, 1.0, s, h=0, h_max=1, tau=40.0, t=1.0).diagnostics["leaves"] == 1 for s in range(reps))
    p = tail_probability(10, 4.0)
    assert stats.binomtest(root_leaf, reps, p).pvalue > ALPHA


# -- geometry: midpoint splits cycling through the axes, ties go left -----------------------------------------------
def naive_paths(X: np.ndarray, depth: int) -> np.ndarray:
    """Algorithm 3's recursion, literally: compare with the node's float midpoint, ties left."""
    n, d = X.shape
    lo, hi = np.zeros((n, d)), np.ones((n, d))
    codes = np.zeros(n, dtype=np.int64)
    for j in range(depth):
        a = j % d
        mid = (lo[:, a] + hi[:, a]) / 2
        right = X[:, a] > mid
        codes = 2 * codes + right
        lo[:, a] = np.where(right, mid, lo[:, a])
        hi[:, a] = np.where(right, hi[:, a], mid)
    return codes


@pytest.mark.parametrize("d, depth", [(1, 12), (2, 11), (3, 20)])
def test_path_codes_match_the_literal_recursion_including_points_on_split_planes(d, depth):
    rng = np.random.default_rng(d)
    dyadic = rng.integers(0, 9, (3000, d)) / 8  # many points exactly on cuts, including 0 and 1
    X = np.vstack([dyadic, rng.random((3000, d)), np.zeros((1, d)), np.ones((1, d))])
    assert np.array_equal(path_codes(X, depth), naive_paths(X, depth))
    assert path_codes(np.full((1, 1), 0.5), 1)[0] == 0 and path_codes(np.ones((1, 1)), 1)[0] == 1


def test_node_boxes_contain_their_points_and_halve_after_the_last_axis():
    X = np.random.default_rng(3).random((2000, 3))
    for depth in (1, 3, 4, 7):
        codes = path_codes(X, depth)
        lo, hi = node_boxes(np.full(len(codes), depth), codes, 3)
        assert ((lo < X) | (lo == 0)).all() and (hi >= X).all()
        sides = hi - lo
        expected = 0.5 ** np.array([depth // 3 + (a < depth % 3) for a in range(3)])
        assert np.array_equal(sides, np.broadcast_to(expected, sides.shape))


def test_leaves_partition_the_cube_and_hold_every_point():
    X = np.random.default_rng(4).beta(2, 6, (3000, 2))
    result = ps.synthesize(X, "kd_adaptive", 2.0, schema=ps.unit_schema(2), h=0, h_max=12, tau=30.0, rng=5)
    cells = result.diagnostics["cells"]
    assert result.diagnostics["unlisted_empty_cells"] == 0  # h = 0: every leaf is listed
    assert math.isclose(np.prod(cells["hi"] - cells["lo"], axis=1).sum(), 1.0, rel_tol=1e-12)
    assert cells["true_count"].sum() == 3000
    depth = cells["depth"]
    assert depth.min() >= 1 and depth.max() <= 12 and len(np.unique(depth)) > 3  # adaptive: leaves at many depths


# -- exact implicit empty subtrees vs the explicit algorithm ----------------------------------------------------------
def explicit_adaptive(X, eps, h, h_max, tau, t, rng):
    """The canonical algorithm (spec A.4.3) on every node, empty ones included; leaves as (key, true, noisy)."""
    (_, eps_tree), (_, eps_leaf) = split_epsilon(eps, [("tree", 0.5), ("leaf", 0.5)])
    tree_scale, leaf_scale = 2 * (h_max - h) / eps_tree, 2 / eps_leaf
    paths = path_codes(X, h_max)
    active, keys, true = np.arange(2**h), [], []
    for depth in range(h, h_max + 1):
        counts = np.bincount(paths >> (h_max - depth), minlength=2**depth)[active]
        is_leaf = np.ones(len(active), bool) if depth == h_max else counts <= tau + discrete_laplace(
            tree_scale, len(active), rng)
        keys.append((1 << depth) | active[is_leaf])
        true.append(counts[is_leaf])
        active = np.concatenate([2 * active[~is_leaf], 2 * active[~is_leaf] + 1])
    keys, true = np.concatenate(keys), np.concatenate(true)
    noisy = true + discrete_laplace(leaf_scale, len(keys), rng)
    return keys, true, noisy, noisy >= integer_threshold(t)


@pytest.mark.slow
def test_implicit_empty_subtrees_equal_the_explicit_algorithm_in_distribution():
    """d=2, h=4, h_max=8, tau=20 (empty nodes split w.p. q=0.14), t=6 (empty leaves pass w.p. 0.125)."""
    X = np.r_[np.tile([0.3, 0.3], (150, 1)), np.tile([0.8, 0.6], (50, 1)), [[0.55, 0.9]]]
    eps, h, h_max, tau, t, reps = 1.0, 4, 8, 20.0, 6.0, 1500
    stats_explicit = {"leaves": [], "released": [], "empty_keys": [], "empty_weights": [], "empty_depths": []}
    stats_implicit = {key: [] for key in stats_explicit}
    rng = np.random.default_rng(0)
    for _ in range(reps):
        keys, true, noisy, kept = explicit_adaptive(X, eps, h, h_max, tau, t, rng)
        _collect(stats_explicit, keys, true, noisy, kept, unlisted=0, h=h)
    for seed in range(reps):
        out = run(X, eps, seed, h=h, h_max=h_max, tau=tau, t=t)
        cells = out.diagnostics["cells"]
        keys = (1 << cells["depth"]) | _ids(cells, h_max)
        _collect(stats_implicit, keys, cells["true_count"], cells["noisy_count"], cells["count"] > 0,
                 unlisted=out.diagnostics["unlisted_empty_cells"], h=h)
        assert len(out.weights) == np.count_nonzero(cells["count"])
    for key in stats_explicit:
        explicit, implicit = np.concatenate(stats_explicit[key]), np.concatenate(stats_implicit[key])
        assert two_sample_pvalue(explicit, implicit) > ALPHA, key


def _ids(cells, h_max):
    """Path ids recovered from the leaf boxes (inverse of node_boxes), checked against it."""
    depth = cells["depth"]
    ids = np.zeros(len(depth), dtype=np.int64)
    d = cells["lo"].shape[1]
    for j in range(h_max):
        inside = depth > j
        a = j % d
        cuts = j // d + 1
        bit = np.floor(cells["lo"][:, a] * 2**cuts).astype(np.int64) & 1
        ids = np.where(inside, 2 * ids + bit, ids)
    lo, hi = node_boxes(depth, ids, d)
    assert np.array_equal(lo, cells["lo"]) and np.array_equal(hi, cells["hi"])
    return ids


def _collect(store, keys, true, noisy, kept, unlisted, h):
    empty = true == 0
    store["leaves"].append([len(keys) + unlisted])
    store["released"].append([np.count_nonzero(kept)])
    store["empty_keys"].append(keys[empty & kept])
    store["empty_weights"].append(noisy[empty & kept])
    depths = np.floor(np.log2(keys[empty])).astype(np.int64)
    store["empty_depths"].append(np.r_[depths, np.full(unlisted, h)])


# -- boundaries and edge cases ----------------------------------------------------------------------------------------
def test_points_on_planes_x_equal_one_and_outside_points_through_a_schema():
    df = pd.DataFrame({"a": [0.5, 0.5, 1.0, 7.0, -2.0, 0.25], "b": [0.5, 0.0, 1.0, 0.5, 0.5, 0.75]})
    schema = ps.Schema((ps.Column("a", "numeric", lo=0.0, hi=1.0), ps.Column("b", "numeric", lo=0.0, hi=1.0)))
    result = ps.synthesize(df, "kd_adaptive", 1.0, schema=schema, h=2, h_max=2, t=-1.0, rng=0)
    cells = result.diagnostics["cells"]
    lookup = {tuple(lo): c for lo, c in zip(cells["lo"], cells["true_count"], strict=True)}
    # (0.5,0.5), (0.5,0) and the clipped (0,0.5) go left on both cuts; (1,1) and the clipped (1,0.5) go right on a
    assert lookup[(0.0, 0.0)] == 3 and lookup[(0.5, 0.0)] == 1 and lookup[(0.5, 0.5)] == 1
    assert lookup[(0.0, 0.5)] == 1  # (0.25, 0.75)
    assert result.clipped == {"a": 2, "b": 0}


def test_n_equals_one_tiny_budget_releases_nothing_but_gives_rows():
    result = ps.synthesize(np.array([[0.2, 0.7]]), "kd_adaptive", 0.01, schema=ps.unit_schema(2), h=2, h_max=4,
                           t=5000.0, rng=0)  # P[a leaf passes] <= 5 e^{-5000/400} < 1e-5
    assert len(result.weights) == 0 and len(result.data) == 1
    assert any("nothing was released" in w for w in result.warnings)
    assert math.fsum(e for _, e in result.ledger) == 0.01


def test_d1_defaults_and_same_seed_same_output():
    X = np.random.default_rng(6).normal(0.5, 0.1, (5000, 1)).clip(0, 1)
    a, b, c = (ps.synthesize(X, "kd_adaptive", 1.0, schema=ps.unit_schema(1), rng=s) for s in (3, 3, 4))
    assert np.array_equal(a.unit, b.unit) and np.array_equal(a.weights, b.weights) and a.data.equals(b.data)
    assert not (np.array_equal(a.weights, c.weights) and a.data.equals(c.data))
    assert a.params["h_max"] == a.params["h"] + 2 and len(a.data) == 5000
    assert ps.metrics.w1(X, a.unit, weights_y=a.weights) < 0.05


def test_rows_sampled_uniformly_stay_inside_released_leaves():
    X = np.random.default_rng(7).random((3000, 2))
    result = ps.synthesize(X, "kd_adaptive", 2.0, schema=ps.unit_schema(2), h=4, h_max=8, sample="uniform",
                           n_synthetic=4000, rng=2)
    cells = result.diagnostics["cells"]
    released = cells["count"] > 0
    lo, hi = cells["lo"][released], cells["hi"][released]
    rows = result.unit_rows
    inside = ((rows[:, None, :] >= lo[None]) & (rows[:, None, :] <= hi[None])).all(2)
    assert len(rows) == 4000 and inside.any(1).all()


def test_parameter_errors():
    X = np.random.default_rng(0).random((100, 2))
    with pytest.raises(ps.ParameterError, match="h_max"):
        ps.synthesize(X, "kd_adaptive", 1.0, schema=ps.unit_schema(2), h=6, h_max=4)
    with pytest.raises(ps.ParameterError, match="raise tau"):
        ps.synthesize(X, "kd_adaptive", 1.0, schema=ps.unit_schema(2), h=30, h_max=32, tau=0.0)
    with pytest.raises(ps.ParameterError, match="tree_fraction"):
        ps.synthesize(X, "kd_adaptive", 1.0, schema=ps.unit_schema(2), h=2, h_max=4, tree_fraction=1.0)


@pytest.mark.parametrize("tau, scale", [(0.0, 3.0), (20.0, 16.0), (7.5, 2.0)])
def test_empty_node_split_probability_is_the_exact_discrete_tail(tau, scale):
    """An empty node splits iff 0 > tau + eta: probability sum_{z < -tau} P(z) = P[eta >= floor(tau) + 1]."""
    z = np.arange(-100_000, 0)
    exact = discrete_laplace_pmf(z[z < -tau], scale).sum()
    assert math.isclose(tail_probability(math.floor(tau) + 1, scale), exact, rel_tol=1e-9)


def test_release_is_in_canonical_node_order_so_data_leaves_and_empty_leaves_look_alike():
    X = np.r_[np.tile([0.3, 0.3], (150, 1)), np.tile([0.8, 0.6], (50, 1))]
    for seed in range(3, 43):  # the first seed that releases both kinds of leaf (28 of seeds 3..32 do)
        out = run(X, 1.0, seed, h=4, h_max=8, tau=20.0, t=6.0)
        cells = out.diagnostics["cells"]
        released = cells["count"] > 0
        if (released & (cells["true_count"] == 0)).any() and (released & (cells["true_count"] > 0)).any():
            break
    else:
        raise AssertionError("no seed released both an empty and a data leaf")
    keys = (1 << cells["depth"]) | _ids(cells, 8)
    order = np.argsort(keys[released])
    centres = ((cells["lo"] + cells["hi"]) / 2)[released][order]
    assert np.array_equal(out.unit, centres) and np.array_equal(out.weights, cells["count"][released][order])
