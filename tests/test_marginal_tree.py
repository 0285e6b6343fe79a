"""marginal_tree: ledger, relations, tree recovery, schema, determinism (docs/marginal_tree.md)."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

import privsyn_core as ps
from privsyn_core.data.domain import Column, Schema
from privsyn_core.errors import ParameterError
from privsyn_core.mechanisms.wide_tables import marginal_tree as mt
from privsyn_core.mechanisms.wide_tables.tree_pieces import (
    PairTree,
    consistent_counts,
    cut_schedule,
    release_marginal,
    release_pair,
    split_down,
)

CATS = ("a", "b", "c", "d")


def chain_table(n: int, seed: int = 0, keep: float = 0.9) -> tuple[pd.DataFrame, Schema]:
    """Four categorical columns on the chain c0 - c1 - c2 - c3 - x4: each copies its parent w.p. ``keep``, else is
    uniform (the numeric x4 in [0, 10] copies the quarter of c3's category)."""
    rng = np.random.default_rng(seed)
    codes = [rng.integers(0, 4, n)]
    for _ in range(3):
        copy = rng.random(n) < keep
        codes.append(np.where(copy, codes[-1], rng.integers(0, 4, n)))
    copy = rng.random(n) < keep
    x4 = (np.where(copy, codes[3], rng.integers(0, 4, n)) + rng.random(n)) / 4
    frame = pd.DataFrame({f"c{j}": np.array(CATS)[c] for j, c in enumerate(codes)} | {"x4": 10 * x4})
    schema = Schema(tuple([Column(f"c{j}", "categorical", categories=CATS) for j in range(4)]
                          + [Column("x4", "numeric", lo=0.0, hi=10.0)]))
    return frame, schema


#: The registered defaults of marginal_tree's parameters.
DEFAULTS = ps.get_mechanism("marginal_tree").resolve_params({})
TRUE_TREE = {frozenset(e) for e in ([0, 1], [1, 2], [2, 3], [3, 4])}


@pytest.mark.parametrize("neighbouring", ["replace", "add_remove"])
@pytest.mark.parametrize("epsilon", [0.3, 1.0, 7.0])
@pytest.mark.parametrize("d", [2, 3, 5])
def test_ledger_sums_exactly(neighbouring, epsilon, d):
    """The tree's ledger (``joint_columns = 1``: since categorical columns also take the joint branch on at most
    3 columns, the tree is asked for), and the default's joint-branch ledger on the same mixed table."""
    frame, schema = chain_table(500)
    frame, schema = frame.iloc[:, -d:], schema.select(schema.names[-d:])
    result = ps.synthesize(frame, "marginal_tree", epsilon, schema=schema, neighbouring=neighbouring, rng=1,
                           joint_columns=1, triples_above=0)
    default = ps.synthesize(frame, "marginal_tree", epsilon, schema=schema, neighbouring=neighbouring, rng=1)
    assert math.fsum(e for _, e in default.ledger) == epsilon
    assert default.params["branch"] == ("joint" if d <= 3 else "tree")
    assert math.fsum(e for _, e in result.ledger) == epsilon
    stages = [s for s, _ in result.ledger]
    assert sum(s.startswith("edge ") for s in stages) == d - 1
    assert any(s.startswith("record count") for s in stages) == (neighbouring == "add_remove")
    assert any(s.startswith("tree selection") for s in stages) == (d >= 3)
    assert sum(s.startswith("triple ") for s in stages) == max(d - 2, 0)


def test_replace_releases_n_rows_add_remove_the_noisy_count():
    frame, schema = chain_table(3000)
    replace = ps.synthesize(frame, "marginal_tree", 1.0, schema=schema, neighbouring="replace", rng=3)
    assert len(replace.data) == len(frame) and "noisy_n" not in replace.release().params
    add_remove = ps.synthesize(frame, "marginal_tree", 1.0, schema=schema, neighbouring="add_remove", rng=3)
    assert len(add_remove.data) == add_remove.release().params["noisy_n"]


@pytest.mark.parametrize("n", [511, 512, 513])
def test_add_remove_layout_reads_only_the_public_count(n):
    """Depths are floor(log2(eps_edge n~)) of the public count the pipeline passes, never of n itself."""
    frame = pd.DataFrame(np.random.default_rng(n).random((n, 4)), columns=[f"x{j}" for j in range(4)])
    for seed in range(5):
        result = ps.synthesize(frame, "marginal_tree", 1.0, schema=ps.unit_schema(4), neighbouring="add_remove",
                               rng=seed)
        noisy = result.release().params["noisy_n"]
        mechanism_epsilon = 1.0 - result.ledger[0][1]  # the rest after the noisy count's stage
        layout = mt.tree_layout(noisy, 4, mechanism_epsilon, "add_remove", {**DEFAULTS, "levels": (0,) * 4})
        assert set(result.release().params["edge_depths"]) == {p.depth for p in layout.pairs}


def test_known_tree_is_chosen_at_high_epsilon():
    """Chain data: adjacent categorical columns agree w.p. 0.9 + 0.1/4, non-adjacent ones w.p. at most 0.81 + 0.19/4.

    The scores (L1 distance from independence on the 4 x 4 tables) are 1.5 a n for agreement excess a, so at
    n = 20000 adjacent pairs beat non-adjacent ones by about 0.1 * 1.5 * 20000 * 0.75 > 2000 counts; the
    exponential mechanism at epsilon = 5 (0.167 per round) then errs with probability below exp(-150).  Not
    vacuous: at epsilon = 1e-4 the choice is close to uniform and the true tree comes out in well under half of
    the 20 seeds (checked below).
    """
    frame, schema = chain_table(20_000)
    hits = [{frozenset(e) for e in ps.synthesize(frame, "marginal_tree", 5.0, schema=schema, rng=s)
             .params["tree_edges"]} == TRUE_TREE for s in range(10)]
    assert all(hits)
    low = [{frozenset(e) for e in ps.synthesize(frame, "marginal_tree", 1e-4, schema=schema, rng=s)
            .params["tree_edges"]} == TRUE_TREE for s in range(20)]
    assert sum(low) < 10


def test_dependence_along_edges_survives_at_high_epsilon():
    """At epsilon = 20, n = 20000 every edge tree has level noise of a few counts, so the agreement rate of each
    adjacent pair in the synthetic data is within 0.03 of the real one (real: about 0.925)."""
    frame, schema = chain_table(20_000)
    synth = ps.synthesize(frame, "marginal_tree", 20.0, schema=schema, rng=4).data
    for j in range(3):
        real_rate = (frame[f"c{j}"] == frame[f"c{j + 1}"]).mean()
        assert abs((synth[f"c{j}"] == synth[f"c{j + 1}"]).mean() - real_rate) < 0.03


@pytest.mark.parametrize("neighbouring", ["replace", "add_remove"])
def test_output_respects_the_schema(neighbouring):
    frame, schema = chain_table(2000)
    frame["x4"] = frame["x4"] * 1.5  # some values beyond the public bound: clipped on encoding
    result = ps.synthesize(frame, "marginal_tree", 0.5, schema=schema, neighbouring=neighbouring, rng=0)
    assert list(result.data.columns) == schema.names
    for column in schema.columns:
        values = result.data[column.name]
        if column.kind == "categorical":
            assert set(values) <= set(column.categories)
        else:
            assert values.between(column.lo, column.hi).all()
    assert np.all((result.unit_rows >= 0) & (result.unit_rows <= 1))


def test_categories_outside_a_power_of_two_never_appear():
    """Five categories use 3 bits: the virtual indices 5, 6, 7 are outside the domain and get no mass."""
    rng = np.random.default_rng(0)
    cats = ("p", "q", "r", "s", "t")
    frame = pd.DataFrame({"k": np.array(cats)[rng.integers(0, 5, 4000)], "x": rng.random(4000)})
    schema = Schema((Column("k", "categorical", categories=cats), Column("x", "numeric", lo=0.0, hi=1.0)))
    for seed in range(5):
        result = ps.synthesize(frame, "marginal_tree", 0.2, schema=schema, rng=seed)
        assert np.all(result.unit_rows[:, 0] < 1.0)
        assert set(result.data["k"]) <= set(cats)


def test_same_seed_same_release_and_another_seed_differs():
    frame, schema = chain_table(3000)
    a = ps.synthesize(frame, "marginal_tree", 1.0, schema=schema, rng=11)
    b = ps.synthesize(frame, "marginal_tree", 1.0, schema=schema, rng=11)
    c = ps.synthesize(frame, "marginal_tree", 1.0, schema=schema, rng=12)
    pd.testing.assert_frame_equal(a.data, b.data)
    assert a.params == b.params
    assert not a.data.equals(c.data)


def test_params_hold_only_the_released_tree():
    frame, schema = chain_table(1000)
    result = ps.synthesize(frame, "marginal_tree", 1.0, schema=schema, neighbouring="add_remove", rng=0)
    released = {"tree_edges", "root", "edge_depths", "edge_cuts", "noisy_n"}
    assert released <= set(result.release().params)
    assert "true_count" not in str(result.params)
    tree = result.diagnostics["tree"]
    assert tree["edges"] == result.params["tree_edges"] and len(tree["scores"]) == 10


def test_one_column_is_refused():
    frame, schema = chain_table(100)
    with pytest.raises(ParameterError, match="at least 2 columns"):
        ps.synthesize(frame[["x4"]], "marginal_tree", 1.0, schema=schema.select(["x4"]), rng=0)


def test_pair_release_is_consistent_and_stays_in_domain():
    """Leaf counts sum to the root, cells outside the 3-category domain stay 0, replace keeps n exactly."""
    tree = PairTree(0, 1, (3, 0), cut_schedule(8, (2, 16)))
    rng = np.random.default_rng(0)
    unit = np.column_stack([(rng.integers(0, 3, 500) + 0.5) / 3, rng.random(500)])
    leaves = np.bincount(tree.grid_ids(unit), minlength=2 ** tree.depth)[tree.heap_to_grid()]
    for neighbouring in ("replace", "add_remove"):
        release = release_pair(tree, leaves, 0.5, neighbouring, np.random.default_rng(1))
        assert release.joint[3].sum() == 0  # category index 3 does not exist
        if neighbouring == "replace":
            assert release.joint.sum() == 500
        assert math.fsum(release.level_epsilons) == pytest.approx(0.5, rel=1e-12)


def test_consistency_splits_an_empty_pair_by_domain_weights():
    noisy = [np.array([10]), np.array([0, 0])]
    below = [np.array([3]), np.array([3, 0])]
    assert consistent_counts(noisy, below)[1].tolist() == [10, 0]


@pytest.mark.parametrize("n", [4000, 300])  # PMM edges; flat edges (eps_edge n~ about 58 < 128)
@pytest.mark.parametrize("neighbouring", ["replace", "add_remove"])
def test_dask_path_gives_the_in_memory_release(neighbouring, n):
    dd = pytest.importorskip("dask.dataframe")
    frame, schema = chain_table(n)
    memory = ps.synthesize(frame, "marginal_tree", 1.0, schema=schema, neighbouring=neighbouring, rng=5)
    lazy = ps.synthesize(dd.from_pandas(frame, npartitions=3), "marginal_tree", 1.0, schema=schema,
                         neighbouring=neighbouring, rng=5)
    assert lazy.ledger == memory.ledger and lazy.params["tree_edges"] == memory.params["tree_edges"]
    computed = lazy.data.compute().reset_index(drop=True)
    assert (computed.astype(object).to_numpy() == memory.data.astype(object).to_numpy()).all()


def test_block_cdf_of_a_row_without_mass_and_an_empty_fallback_is_uniform():
    """A block wholly outside the public categories has neither mass nor in-domain fallback: uniform, never NaN."""
    from privsyn_core.mechanisms.wide_tables.tree_pieces import block_cdf

    probs = np.array([[1.0, 3.0], [0.0, 0.0], [0.0, 0.0]])
    fallback = np.array([[1.0, 0.0], [0.0, 1.0], [0.0, 0.0]])
    with np.errstate(all="raise"):
        cdf = block_cdf(probs, fallback)
    assert cdf.tolist() == [0.25, 1.0, 1.0, 2.0, 2.5, 3.0]


def test_eleven_categories_sample_without_invalid_arithmetic():
    """Grunfeld's shape (11 firms: 4 bits, indices 11-15 virtual) once warned "invalid value in divide" when a
    column's finest bins were refined inside a coarse bin holding virtual indices only; every value stays valid."""
    rng = np.random.default_rng(0)
    cats = tuple(f"firm{k}" for k in range(11))
    n = 220
    frame = pd.DataFrame({"firm": np.array(cats)[np.repeat(np.arange(11), n // 11)], "x": rng.random(n),
                          "y": rng.random(n)})
    schema = Schema((Column("x", "numeric", lo=0.0, hi=1.0), Column("firm", "categorical", categories=cats),
                     Column("y", "numeric", lo=0.0, hi=1.0)))
    for seed in range(3):
        with np.errstate(all="raise"):
            result = ps.synthesize(frame[["x", "firm", "y"]], "marginal_tree", 1.0, schema=schema, rng=seed)
        assert set(result.data["firm"]) <= set(cats)
        assert np.isfinite(np.asarray(result.unit_rows, dtype=float)).all()


def test_projection_is_the_euclidean_projection_onto_the_scaled_simplex():
    """project_counts: non-negative integers summing to the total, zero outside the domain, within 1 of the real
    projection max(y - tau, 0) (computed here by bisection on tau, independently of the sort in the code)."""
    from privsyn_core.mechanisms.wide_tables.tree_pieces import project_counts

    rng = np.random.default_rng(0)
    for total in (0, 1, 57, 400):
        y = rng.integers(-30, 60, 64)
        valid = rng.random(64) < 0.8
        x = project_counts(y, total, valid)
        assert x.dtype == np.int64 and (x >= 0).all() and x.sum() == total and (x[~valid] == 0).all()
        if total:
            lo, hi = float(y.min()) - total, float(y.max())
            for _ in range(200):
                tau = (lo + hi) / 2
                lo, hi = (tau, hi) if np.maximum(y[valid] - tau, 0).sum() > total else (lo, tau)
            exact = np.where(valid, np.maximum(y - lo, 0), 0)
            assert np.abs(x - exact).max() < 1 + 1e-6


@pytest.mark.parametrize("neighbouring", ["replace", "add_remove"])
def test_flat_edge_spends_its_epsilon_on_the_leaves(neighbouring):
    """A flat edge: one noisy level (the leaves) at scale S / eps, counts summing to the public total, in domain."""
    tree = PairTree(0, 1, (3, 0), cut_schedule(6, (2, 16)))
    rng = np.random.default_rng(0)
    unit = np.column_stack([(rng.integers(0, 3, 300) + 0.5) / 3, rng.random(300)])
    leaves = np.bincount(tree.grid_ids(unit), minlength=2 ** tree.depth)[tree.heap_to_grid()]
    release = release_pair(tree, leaves, 0.4, neighbouring, np.random.default_rng(1), flat=True, total=300)
    sensitivity = 1 if neighbouring == "add_remove" else 2
    assert release.level_epsilons.tolist() == [0.0] * tree.depth + [0.4]
    assert np.isinf(release.sigmas[:-1]).all() and release.sigmas[-1] == sensitivity / 0.4
    assert release.joint.sum() == 300 and release.joint[3].sum() == 0 and (release.joint >= 0).all()


def test_flat_rule_reads_only_public_inputs_and_is_released():
    """Edges are flat iff eps_edge n~ < flat_below (eps, the public count, the parameter); params say which."""
    base = {**DEFAULTS, "levels": (0,) * 4}
    eps_edge = dict(mt.tree_layout(1000, 4, 1.0, "replace", base).shares)["edge 0"]
    assert mt.tree_layout(1000, 4, 1.0, "replace", base).flat == (eps_edge * 1000 < mt.FLAT_BELOW)
    assert mt.tree_layout(100, 4, 1.0, "replace", base).flat
    assert not mt.tree_layout(100, 4, 1.0, "replace", {**base, "flat_below": 0}).flat
    frame, schema = chain_table(300)
    small = ps.synthesize(frame, "marginal_tree", 1.0, schema=schema, rng=0)
    assert small.release().params["edge_levels"] == "flat"
    assert all(s.startswith("edge ") and "flat" in s for s, _ in small.ledger if s.startswith("edge "))
    large = ps.synthesize(frame, "marginal_tree", 1.0, schema=schema, rng=0, flat_below=0)
    assert large.release().params["edge_levels"] == "pmm"


def test_raking_gives_an_empty_row_with_positive_target_the_product_of_the_targets():
    """A category that the column's marginal keeps is never dropped by a pair table without mass in its row."""
    from privsyn_core.mechanisms.wide_tables.tree_pieces import rake

    joint = np.array([[4.0, 0.0], [0.0, 0.0], [1.0, 5.0]])
    rows, cols = np.array([0.5, 0.2, 0.3]), np.array([0.6, 0.4])
    out = rake(joint, rows, cols)
    assert np.allclose(out.sum(axis=1), rows, atol=1e-6) and np.allclose(out.sum(axis=0), cols, atol=1e-6)
    assert out[1].sum() > 0.19


def test_small_mixed_table_keeps_every_category():
    """Penguins-sized table: six columns, n = 240, three categorical columns of 5 categories holding 40-49 rows
    each, eps = 1 (leaf noise of scale 1/eps_edge = 6.5).  Fixed seeds, deterministic: a category is lost in at
    most 3 of the 30 (seed, column) runs (measured: 0 of 30 with the CKS20 noise sampler, 1 with the inversion
    sampler; 13 and 11 of 120 over seeds 0-39, so about 10% of runs lose one).  Not vacuous: the code before the
    small-table changes (PMM edges with clamped zero counts, empty raked rows) lost a category in 15 of these 30 runs.
    """
    rng = np.random.default_rng(3)
    n = 240
    cats = ("a", "b", "c", "d", "e")
    frame = pd.DataFrame({f"k{j}": np.array(cats)[rng.integers(0, 5, n)] for j in range(3)}
                         | {f"x{j}": rng.random(n) for j in range(3)})
    schema = Schema(tuple([Column(f"k{j}", "categorical", categories=cats) for j in range(3)]
                          + [Column(f"x{j}", "numeric", lo=0.0, hi=1.0) for j in range(3)]))
    lost = []
    for seed in range(10):
        synth = ps.synthesize(frame, "marginal_tree", 1.0, schema=schema, neighbouring="add_remove", rng=seed,
                              n_synthetic=n).data
        lost += [(seed, j) for j in range(3) if set(synth[f"k{j}"]) != set(cats)]
    assert len(lost) <= 3, lost


def _flat_case():
    """The registered audit case with every edge measured flat (its features read the noisy leaves)."""
    import dataclasses

    case = ps.get_mechanism("marginal_tree").audit
    return dataclasses.replace(case, params={**case.params, "flat_below": 10 ** 9})


def _marginals_case():
    """The registered audit case with features reading column 0's noisy 1-way histogram (its share of the 1-way
    stage is the loss they can see)."""
    import dataclasses

    case = ps.get_mechanism("marginal_tree").audit
    return dataclasses.replace(case, features=mt.marginal_features, read_stages=("1-way",),
                               pair_loss=mt.marginal_pair_loss)


@pytest.mark.slow
@pytest.mark.parametrize("relation", ["replace", "add_remove"])
def test_flat_edges_pass_the_audit_and_half_their_noise_is_detected(relation):
    """The flat path at full budget (confidence 1 - 1e-6, as tests/test_audit.py) and its detection case at the
    same budget: noise scaled by the audit's detection factor (1/2: the edge then spends 2 epsilon) must be caught.
    Measured: eps_lower 0.70 / 0.75 correct, 1.67 / 1.70 at half noise (replace / add_remove)."""
    from privsyn_core.evaluation import audit

    spec, case = ps.get_mechanism("marginal_tree"), _flat_case()
    correct = audit.audit("marginal_tree", 1.0, neighbouring=relation, confidence=1 - 1e-6, rng=1, case=case)
    assert 0.0 <= correct.eps_lower <= 1.0, correct
    factor = audit.detection_factor(spec, relation)
    overspent = audit.audit("marginal_tree", 1.0, neighbouring=relation, confidence=1 - 1e-6, rng=2, case=case,
                            noise_factor=factor)
    assert overspent.detected and overspent.eps_lower > 1.0, overspent


@pytest.mark.parametrize("neighbouring", ["replace", "add_remove"])
def test_one_way_release_is_calibrated_in_domain_and_sums_to_the_total(neighbouring):
    """A column's 1-way histogram: scale S / eps, virtual category indices released as 0, estimated counts
    non-negative and summing to the public total (five categories on 3 bits: indices 5-7 are virtual)."""
    histogram = np.array([40, 0, 25, 30, 5, 0, 0, 0])
    release = release_marginal(histogram, 5, 3, 0.5, neighbouring, 100, np.random.default_rng(0))
    assert release.sigma == (1 if neighbouring == "add_remove" else 2) / 0.5
    assert (release.noisy[5:] == 0).all() and (release.counts[5:] == 0).all()
    assert (release.counts >= 0).all() and release.counts.sum() == pytest.approx(100)
    numeric = release_marginal(np.bincount(np.arange(300) % 7, minlength=128), 0, 7, 1.0, neighbouring, 300,
                               np.random.default_rng(1))
    assert (numeric.counts >= 0).all() and numeric.counts.sum() == pytest.approx(300)


def test_a_numeric_one_way_histogram_is_split_down_its_dyadic_hierarchy():
    """split_down: non-negative integer counts summing to the total; without noise the histogram itself; a half
    whose noisy sum is at most 0 gets nothing however its bins' noise is spread (deterministic: the noisy counts
    are given)."""
    rng = np.random.default_rng(4)
    for _ in range(200):
        counts = split_down(rng.integers(-30, 60, 32), 500)
        assert (counts >= 0).all() and counts.sum() == 500 and (counts == np.rint(counts)).all()
    histogram = np.bincount(rng.integers(0, 20, 300), minlength=64)
    np.testing.assert_array_equal(split_down(histogram, 300), histogram)
    counts = split_down(np.array([60, 30, 10, 0, 4, -3, 2, -3]), 100)
    assert counts[4:].sum() == 0 and counts[:4].tolist() == [60, 30, 10, 0]
    assert split_down(np.full(8, -5), 40).tolist() == [5.0] * 8


@pytest.mark.parametrize("neighbouring", ["replace", "add_remove"])
def test_pair_score_has_the_sensitivity_of_the_counts(neighbouring):
    """The selection's score reads the true counts only through 1-Lipschitz terms: adding a record (add/remove)
    or moving one (replace) changes it by at most S = 1 or 2, for 2000 random tables and fixed released marginals.
    Not vacuous: a score normalised by the table's own marginals (MST's product with the true 1-way counts) moves
    by up to about 4 S on the same neighbours, checked below."""
    rng = np.random.default_rng(0)
    one_a = release_marginal(rng.integers(0, 50, 8), 0, 3, 1.0, neighbouring, 200, rng)
    one_b = release_marginal(rng.integers(0, 50, 8), 0, 3, 1.0, neighbouring, 200, rng)
    sensitivity, largest, own = (1 if neighbouring == "add_remove" else 2), 0, 0.0
    for _ in range(2000):
        joint = rng.integers(0, 30, (8, 8))
        other = joint.copy()
        other[tuple(rng.integers(0, 8, 2))] += 1
        if neighbouring == "replace":
            full = np.argwhere(other > 0)
            other[tuple(full[rng.integers(len(full))])] -= 1
        largest = max(largest, abs(mt.pair_score(joint, one_a, one_b, 3, 3, 200)
                                   - mt.pair_score(other, one_a, one_b, 3, 3, 200)))
        own = max(own, abs(_own_product_score(joint) - _own_product_score(other)))
    assert largest <= sensitivity
    assert own > sensitivity


def _own_product_score(joint: np.ndarray) -> float:
    return float(np.abs(joint - np.outer(joint.sum(axis=1), joint.sum(axis=0)) / joint.sum()).sum())


def test_few_valued_integer_columns_keep_their_values():
    """Integer columns with 32 and 17 public values (5 bits each, 15 virtual indices for the second) are measured
    one level per value: a column whose rows hold only 0 and 31 keeps them (the levels' histogram is projected, so
    a value no row holds gets mass only when its noise, of scale 1/eps_col = 0.8 here, beats the projection's
    threshold), where equal dyadic bins spread each value over its neighbours.  Deterministic seeds."""
    rng = np.random.default_rng(2)
    n = 4000
    x = rng.random(n)
    frame = pd.DataFrame({"a": np.where(x < 0.5, 0, 31), "b": 1 + (x * 16.99).astype(int), "x": x,
                          "y": rng.random(n)})
    schema = Schema((Column("a", "numeric", lo=0, hi=31, integer=True), Column("b", "numeric", lo=1, hi=17,
                                                                                integer=True),
                     Column("x", "numeric", lo=0.0, hi=1.0), Column("y", "numeric", lo=0.0, hi=1.0)))
    for seed in range(3):
        result = ps.synthesize(frame, "marginal_tree", 8.0, schema=schema, rng=seed)
        assert result.params["marginal_bits"][:2] == [5, 5]
        assert set(result.data["b"]) <= set(range(1, 18))
        assert result.data["a"].isin([0, 31]).mean() > 0.99, seed


def and_table(n: int, rng: np.random.Generator) -> tuple[pd.DataFrame, Schema]:
    """Three Boolean columns ``c = g AND p`` (``g``, ``p`` independent fair coins), ``c`` first (the root).  ``g`` and
    ``p`` are independent, each depends on ``c``: the tree is ``c - g, c - p``, and ``c``'s second child is drawn
    given ``c`` and its first child."""
    g, p = rng.integers(0, 2, n), rng.integers(0, 2, n)
    frame = pd.DataFrame({"c": g & p, "g": g, "p": p}).astype(str)
    schema = Schema(tuple(Column(name, "categorical", categories=("0", "1")) for name in frame.columns))
    return frame, schema


def test_triples_keep_a_joint_dependence_that_no_tree_holds():
    """``c = g AND p``: a tree draws ``p`` given ``c`` alone, so rows with ``c = 0, g = 1, p = 1`` appear with
    probability ``3/4 * 1/3 * 1/3 = 1/12``; the triple ``(g, c, p)`` draws ``p`` given both.  ``n = 20000``, eps 4
    (the triple's cells hold 2,500-5,000 rows against noise of scale 1/0.3), seeds 0-2, deterministic.  Measured:
    below 0.5% with the triple, 8-9% without (the detection case)."""
    frame, schema = and_table(20_000, np.random.default_rng(0))

    def broken(triples: float, seed: int) -> float:
        out = ps.synthesize(frame, "marginal_tree", 4.0, schema=schema, neighbouring="add_remove", rng=seed,
                            joint_columns=1, triples=triples).data.astype(int)
        return float(np.mean(out["c"] != (out["g"] & out["p"])))

    with_triples = [broken(mt.TRIPLES, seed) for seed in range(3)]
    without = [broken(0.0, seed) for seed in range(3)]
    assert max(with_triples) < 0.02, with_triples
    assert min(without) > 0.05, without


def test_triples_name_the_second_parent_and_read_released_edges():
    frame, schema = chain_table(3000)
    result = ps.synthesize(frame, "marginal_tree", 2.0, schema=schema, neighbouring="replace", rng=4)
    edges = {frozenset(e) for e in result.params["tree_edges"]}
    triples = result.params["triples"]
    assert len(triples) == len(schema.names) - 2
    for given, parent, child in triples:
        assert frozenset((parent, child)) in edges and frozenset((given, parent)) in edges
    assert "true_count" not in str(result.release().params)
    without = ps.synthesize(frame, "marginal_tree", 2.0, schema=schema, neighbouring="replace", rng=4, triples=0.0)
    assert without.params["triples"] == [] and not any("triple" in s for s, _ in without.ledger)


@pytest.mark.parametrize(("n", "measured"), [(3000, True), (900, False)])
def test_triples_are_measured_only_where_each_holds_enough_records_for_its_noise(n, measured):
    """The public rule: eps_t n >= triples_above with eps_t = triples eps / (d - 2); on 5 columns at eps 1 that is
    n >= 64 * 3 / 0.1 = 1920 (replace-one: n is public).  Below, the ledger is the pure tree's."""
    frame, schema = chain_table(n)
    result = ps.synthesize(frame, "marginal_tree", 1.0, schema=schema, neighbouring="replace", rng=2)
    assert mt.measures_triples(1.0, n, 5, DEFAULTS) is measured
    assert (len(result.params["triples"]) == 3) is measured
    assert any(s.startswith("triple ") for s, _ in result.ledger) is measured
    assert math.fsum(e for _, e in result.ledger) == 1.0


@pytest.mark.parametrize(("n", "small"), [(300, True), (2000, False)])
def test_small_tables_give_the_one_way_stage_more_budget_and_score_pairs_on_coarser_cells(n, small):
    """The public rule eps n / d < SMALL_BELOW (5 columns at eps 1: n < 800) for the automatic shares; explicit
    values win over it."""
    frame, schema = chain_table(n)
    result = ps.synthesize(frame, "marginal_tree", 1.0, schema=schema, neighbouring="replace", rng=2)
    assert mt.small_table(1.0, n, 5) is small
    one_way = [e for stage, e in result.ledger if stage.startswith("1-way marginals")]
    assert one_way == [pytest.approx(mt.SMALL_MARGINALS if small else mt.MARGINALS)]
    layout = mt.tree_layout(n, 5, 1.0, "replace", {**DEFAULTS, "levels": (0,) * 5})
    assert layout.coarse == (mt.SMALL_COARSE_BITS if small else mt.COARSE_BITS,) * 5
    chosen = mt.tree_layout(n, 5, 1.0, "replace", {**DEFAULTS, "levels": (0,) * 5, "marginals": 0.3,
                                                   "coarse_bits": 4})
    assert chosen.share("marginals") == pytest.approx(0.3) and chosen.coarse == (4,) * 5


def test_triples_are_skipped_with_a_warning_where_counting_them_all_would_pass_the_budget():
    """C(d, 3) n row-triples within TRIPLE_COUNT_BUDGET: 50 columns (19,600 triples) fit at 10^5 rows, not at
    10^6; the skipped stage's share goes to the edges, and the warning says so without the row count."""
    base = {**DEFAULTS, "levels": (0,) * 50}
    fits = mt.tree_layout(100_000, 50, 1.0, "replace", base)
    skipped = mt.tree_layout(1_000_000, 50, 1.0, "replace", base)
    assert len(fits.triples) == math.comb(50, 3) and not fits.warnings
    assert skipped.triples == () and not any(name.startswith("triple") for name, _ in skipped.shares)
    assert math.fsum(e for name, e in skipped.shares if name.startswith("edge")) == pytest.approx(
        math.fsum(e for name, e in fits.shares if name.startswith(("edge", "triple"))))
    assert len(skipped.warnings) == 1 and "19,600 column triples" in skipped.warnings[0]
    assert "1000000" not in skipped.warnings[0] and "1,000,000" not in skipped.warnings[0]


def _triples_case():
    """The registered audit case on three columns with the tree asked for: features read the first triple's noisy
    cells (its stage's loss is what they can see)."""
    import dataclasses

    case = ps.get_mechanism("marginal_tree").audit
    return dataclasses.replace(case, d=3, params={**case.params, "joint_columns": 1, "triples_above": 0},
                               features=mt.triple_features,
                               read_stages=("triple ",), pair_loss=mt.triple_pair_loss)


@pytest.mark.parametrize("case_of", [_marginals_case, _triples_case], ids=["1-way", "triples"])
@pytest.mark.parametrize("relation", ["replace", "add_remove"])
def test_stage_cases_have_power_at_the_budget(relation, case_of):
    """Column 0's histogram (the triple's corner cells) changes in one cell (add/remove) or two (replace): at twice
    its loss the tight event is detected at the case's budget except with probability < 1e-6 (as
    tests/test_audit.py requires)."""
    from privsyn_core.evaluation import audit

    coordinates = 1 if relation == "add_remove" else 2
    assert 1 - audit.detection_power(2.0 ** -coordinates, 2.0, 1.0, case_of().trials, 1e-6) < 1e-6


@pytest.mark.slow
@pytest.mark.parametrize("case_of", [_marginals_case, _triples_case], ids=["1-way", "triples"])
@pytest.mark.parametrize("relation", ["replace", "add_remove"])
def test_stages_pass_the_audit_and_their_overspend_is_detected(relation, case_of):
    """The 1-way stage (column 0's histogram) and the triples stage (the first triple's noisy cells), each at
    confidence 1 - 1e-6, and their detection cases: every noise scale times f = L / (2 epsilon), L the stage's
    share, makes it spend 2 epsilon, which must be caught."""
    from privsyn_core.evaluation import audit

    spec, case = ps.get_mechanism("marginal_tree"), case_of()
    pair = audit.neighbour_pair(spec.data_kind, relation, case.n, case.d)
    loss = case.pair_loss(spec, pair, 1.0, spec.resolve_params(case.params))
    correct = audit.audit("marginal_tree", 1.0, neighbouring=relation, confidence=1 - 1e-6, rng=1, case=case)
    assert 0.0 <= correct.eps_lower <= 1.0, correct
    overspent = audit.audit("marginal_tree", 1.0, neighbouring=relation, confidence=1 - 1e-6, rng=2, case=case,
                            noise_factor=min(0.5, loss / 2))
    assert overspent.detected and overspent.eps_lower > 1.0, overspent
