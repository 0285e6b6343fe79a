"""Largest-remainder rounding: exact totals, counts within one of their shares, ties broken at random."""

import numpy as np
import pytest
from scipy import stats

from privsyn_core.privacy.sampling import kth_largest, largest_remainder

ALPHA = 1e-6  # false-failure rate of each statistical test


@pytest.mark.parametrize("kind", ["continuous", "few_values", "mostly_zero", "constant", "subnormal"])
def test_kth_largest_equals_the_sorted_entry(kind):
    """The radix selection returns the k-th largest value exactly, for every k, on values with long runs of ties
    (the remainders of a sparse PMM tree are three quarters zeros) and on tiny ones (keys differing in low bits)."""
    rng = np.random.default_rng(7)
    m = 300
    values = {"continuous": rng.random(m), "few_values": rng.integers(0, 4, m) * 0.25,
              "mostly_zero": np.where(rng.random(m) < 0.75, 0.0, rng.integers(1, 9, m) * 1e-3),
              "constant": np.full(m, 0.3), "subnormal": rng.integers(0, 2**20, m) * 5e-324}[kind]
    ordered = np.sort(values)[::-1]
    assert [kth_largest(values, k) for k in range(1, m + 1)] == ordered.tolist()


@pytest.mark.parametrize("seed", range(20))
def test_counts_sum_to_the_total_and_stay_within_one_of_the_share(seed):
    rng = np.random.default_rng(seed)
    weights = rng.exponential(size=rng.integers(1, 50))
    weights[rng.random(len(weights)) < 0.3] = 0.0
    total = int(rng.integers(0, 500))
    counts = largest_remainder(weights, total, rng)
    if weights.sum() == 0:
        assert not counts.any()
        return
    share = total * weights / weights.sum()
    assert counts.sum() == total and (counts >= 0).all() and (np.abs(counts - share) < 1).all()
    assert not counts[weights == 0].any()


def test_equal_weights_share_the_leftover_rows_uniformly_at_random():
    """Eight equal weights, four rows: each position gets a row with probability exactly 1/2 (binomial test)."""
    reps = 2000
    hits = sum(largest_remainder(np.ones(8), 4, np.random.default_rng(seed)) for seed in range(reps))
    assert hits.sum() == 4 * reps
    for position in (0, 7):
        assert stats.binomtest(int(hits[position]), reps, 0.5).pvalue > ALPHA


@pytest.mark.parametrize("seed", range(10))
def test_selection_equals_the_sorted_rule_when_remainders_are_distinct(seed):
    """The O(m) selection gives the rows to the same atoms as sorting all remainders (no ties to break)."""
    rng = np.random.default_rng(seed)
    weights = rng.exponential(size=1000)
    total = int(rng.integers(1, 5000))
    share = weights * (total / weights.sum())
    expected = np.floor(share).astype(np.int64)
    order = np.argsort(-(share - expected), kind="stable")
    expected[order[:total - expected.sum()]] += 1
    assert np.array_equal(largest_remainder(weights, total, rng), expected)


@pytest.mark.parametrize("seed", range(10))
def test_integer_weights_follow_the_exact_sorted_rule(seed):
    """Integer weights (counts) are rounded by value with exact rational remainders: the atoms given a leftover row
    are those of the sorted rule in exact arithmetic, up to the uniformly random choice among exactly equal
    remainders (also between different values: 100 rows on weights 1 and 4 of sum 75 have remainders 1/3 and 1/3,
    which float64 ranks apart)."""
    from fractions import Fraction

    rng = np.random.default_rng(seed)
    weights = rng.integers(0, int(rng.integers(1, 12)), 200)
    weights[0] += 1  # a positive sum
    total = int(rng.integers(0, 3000))
    counts = largest_remainder(weights, total, rng)
    share = [Fraction(int(w) * total, int(weights.sum())) for w in weights]
    floor = np.array([s.numerator // s.denominator for s in share])
    remainder = [s - int(f) for s, f in zip(share, floor, strict=True)]
    extra = counts - floor
    assert counts.sum() == total and set(np.unique(extra).tolist()) <= {0, 1}
    given = [remainder[i] for i in np.flatnonzero(extra)]
    refused = [remainder[i] for i in np.flatnonzero(extra == 0)]
    assert not given or not refused or min(given) >= max(refused)


def test_exactly_equal_remainders_of_different_weights_are_ties():
    """Weights (1, 4, 1) and 4 rows: shares 2/3, 8/3, 2/3, all three remainders exactly 2/3, so the 2 leftover rows go
    to 2 of the 3 atoms uniformly, each atom's with probability 2/3 (binomial tests); float64 ranks 8/3's remainder
    apart by rounding error."""
    weights = np.array([1, 4, 1])
    reps = 3000
    extra = sum(largest_remainder(weights, 4, np.random.default_rng(seed)) for seed in range(reps)) - [0, 2 * reps, 0]
    assert extra.sum() == 2 * reps
    for atom in range(3):
        assert stats.binomtest(int(extra[atom]), reps, 2 / 3).pvalue > ALPHA


# -- row order and leaf rows of privsyn_core.mechanisms.base.rows.RowPlan ---------------------------------------
@pytest.mark.parametrize(("counts", "pile_rows"), [((2, 1, 1), 2), ((3, 3), 2), ((1, 1, 1, 1), 1), ((2, 1, 1), 64)])
def test_shuffled_piles_give_every_arrangement_of_the_labels_with_equal_probability(monkeypatch, counts, pile_rows):
    """All ``total! / prod(c!)`` arrangements of the multiset are equally likely (chi-square, false failure 1e-6).

    ``PILE_ROWS`` is made tiny, so the cases take the bincount path ((3, 3): 3 piles x 2 labels <= 6 rows), the
    radix-sort path ((2, 1, 1), (1, 1, 1, 1): piles x labels > rows) and the single Fisher-Yates pass (64).
    The reference law (uniform over the arrangements) does not depend on the sampler.
    """
    from math import factorial, prod

    from privsyn_core.mechanisms.base import rows as row_plans

    monkeypatch.setattr(row_plans, "PILE_ROWS", pile_rows)
    counts = np.array(counts, dtype=np.int64)
    total = int(counts.sum())
    arrangements = factorial(total) // prod(factorial(int(c)) for c in counts)
    trials = 1000 * arrangements
    rng = np.random.default_rng(7)
    seen: dict[tuple, int] = {}
    for _ in range(trials):
        order = np.empty(total, dtype=np.int64)
        for start, labels in row_plans.shuffled_piles(counts, total, rng):
            order[start:start + len(labels)] = labels
        key = tuple(order.tolist())
        seen[key] = seen.get(key, 0) + 1
    assert len(seen) == arrangements and all(np.bincount(key, minlength=len(counts)).tolist() == counts.tolist()
                                             for key in seen)
    observed = np.array(list(seen.values()))
    assert stats.chisquare(observed).pvalue > ALPHA


def test_shuffled_rows_keep_every_atoms_row_count():
    """A shuffled box plan of several piles puts exactly ``counts[i]`` rows in box ``i`` (boxes disjoint)."""
    from privsyn_core.mechanisms.base.rows import PILE_ROWS, BoxPlan

    rng = np.random.default_rng(3)
    m = 50
    counts = rng.integers(0, 3 * PILE_ROWS // m, m)
    lo = np.stack([np.arange(m) / m, np.zeros(m)], axis=1)
    hi = lo + np.array([1 / m, 1.0])
    rows = BoxPlan(counts, (lo + hi) / 2, rng, lo=lo, hi=hi).all_rows()
    assert len(rows) == counts.sum() > PILE_ROWS
    assert np.array_equal(np.bincount(np.minimum((rows[:, 0] * m).astype(int), m - 1), minlength=m), counts)
    assert not np.array_equal(np.sort(rows[:, 0]), rows[:, 0])  # shuffled, not grouped by atom


@pytest.mark.parametrize("d", [1, 2, 3])
def test_leaf_rows_fall_in_their_leaves(d):
    """PMM's leaf rows: ``counts[t]`` rows in leaf ``t``, also when one leaf holds more rows than a chunk, when many
    leaves hold thousands, and when the rows are cut into several blocks (each with its own first leaf), a
    deterministic check of the row layout (columns drawn in complex pairs and a last odd column alone).  The rows
    are drawn from shuffled leaf labels (issue 28, item 4), so the check is on the sorted leaf ids; the order
    itself is tested in tests/test_row_order.py."""
    from dataclasses import replace

    from privsyn_core.mechanisms.base.rows import ROW_CHUNK
    from privsyn_core.mechanisms.hvz23.pmm import leaf_plan
    from privsyn_core.mechanisms.hvz23.pmm_tree import cuts_per_axis, leaf_ids

    r = 15
    rng = np.random.default_rng(5)
    counts = rng.integers(0, 3, 2 ** r)
    counts[3] = ROW_CHUNK + 17  # one leaf over a chunk
    counts[2 ** 14 + 1: 2 ** 14 + 40] = 2000  # many leaves over a chunk together
    for how in ("uniform", "center"):
        plan = leaf_plan(counts, r, d, how, rng)
        for blocks in (plan, replace(plan, block_rows=30_000)):  # one block, then several blocks
            rows = blocks.all_rows()
            ids = leaf_ids(rows, r)
            assert np.array_equal(np.sort(ids), np.repeat(np.arange(2 ** r), counts))
            assert not np.array_equal(ids, np.sort(ids))  # shuffled, not in heap order
            if how == "center":  # every row at its leaf's centre, exactly
                side = 2.0 ** -cuts_per_axis(r, d).astype(float)
                assert np.array_equal(rows % side, np.broadcast_to(side / 2, rows.shape))
