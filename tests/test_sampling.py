"""Largest-remainder rounding: exact totals, counts within one of their shares, ties broken at random."""

import numpy as np
import pytest
from scipy import stats

from privsyn_core.privacy.sampling import largest_remainder

ALPHA = 1e-6  # false-failure rate of each statistical test


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
