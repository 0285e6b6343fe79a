"""Output rows carry no order (issue 28, item 4): the row number says nothing about the values.

Every registered mechanism's rows are a uniformly random permutation (a row plan's blocks,
:mod:`privsyn_core.mechanisms.base.rows`; every other mechanism's rows in
:meth:`privsyn_core.engine.release.Encoded.synthetic`).
Test: the Spearman correlation ``rho_j`` between the row number and column ``j``.  Under a uniformly random order
independent of the values, ``rho_j`` is the Pearson correlation of a random permutation of the row numbers with
fixed (mid)ranks: ``E rho_j = 0`` and ``Var rho_j = 1 / (m - 1)`` exactly for ``m`` rows, ties included.  With the
normal approximation of that permutation law (``m`` about 3000), ``|rho_j| sqrt(m - 1) < z_{1 - ALPHA / (2 d)}``
fails with probability at most ``ALPHA`` = 1e-6 per mechanism (Bonferroni over its ``d`` columns).
Detection cases: the same test fails on PMM's rows sorted by a column and on PMM's rows without the shuffle
(the order of issue 28: rank correlation 0.94 with the first column).
"""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np
import pytest
from scipy import stats

import privsyn_core as ps
from goodness_of_fit import ALPHA
from privsyn_core.data.datasets import two_blobs
from privsyn_core.mechanisms.base import rows as row_plans
from privsyn_core.mechanisms.hvz23 import pmm

ROWS = 3000


def _data(spec: ps.MechanismSpec):
    if spec.data_kind == "boolean":
        X = (np.random.default_rng(0).random((ROWS, 4)) < 0.3).astype(int)
        return X, ps.Schema.from_dict({"columns": [{"name": f"x{j}", "kind": "numeric", "lo": 0, "hi": 1,
                                                    "integer": True} for j in range(4)]})
    d = min(2, spec.max_dim or 2)
    return two_blobs(ROWS, d, rng=0), ps.unit_schema(d)


def order_z_scores(rows: np.ndarray) -> np.ndarray:
    """``rho_j sqrt(m - 1)`` for every non-constant column ``j`` (standard normal under a random order)."""
    m = len(rows)
    index = np.arange(m)
    return np.array([stats.spearmanr(index, rows[:, j]).statistic * math.sqrt(m - 1)
                     for j in range(rows.shape[1]) if np.ptp(rows[:, j]) > 0])


def assert_no_order(rows: np.ndarray) -> None:
    z = order_z_scores(rows)
    assert len(rows) >= 1000 and len(z), "too few rows or only constant columns: the test would say nothing"
    bound = stats.norm.isf(ALPHA / (2 * rows.shape[1]))
    assert np.all(np.abs(z) < bound), f"row order correlates with the values: z = {z.round(1)}, bound {bound:.2f}"


def _pmm_rows(seed: int = 1) -> np.ndarray:
    return ps.synthesize(two_blobs(ROWS, 2, rng=1), "pmm", 1.0, schema=ps.unit_schema(2), rng=seed).unit_rows


@pytest.mark.parametrize("spec", ps.list_mechanisms(), ids=lambda s: s.name)
def test_rows_come_in_an_order_that_says_nothing_about_the_values(spec):
    X, schema = _data(spec)
    result = ps.synthesize(X, spec.name, 1.0, schema=schema, rng=3, n_synthetic=ROWS)
    assert_no_order(result.data.to_numpy(dtype=float))


def test_the_order_test_detects_sorted_rows():
    rows = _pmm_rows()
    with pytest.raises(AssertionError, match="row order"):
        assert_no_order(rows[np.argsort(rows[:, 0], kind="stable")])


def test_the_order_test_detects_pmm_rows_left_in_tree_order(monkeypatch):
    """PMM's rows as they were before the shuffle (grouped by leaf, heap order) fail the same test."""
    unshuffled = pmm.leaf_plan
    monkeypatch.setattr(pmm, "leaf_plan", lambda *args: replace(unshuffled(*args), shuffle=False))
    with pytest.raises(AssertionError, match="row order"):
        assert_no_order(_pmm_rows())


def test_the_order_is_reproducible_and_blocks_are_laid_out_at_random(monkeypatch):
    """Same seed, same rows (the permutation uses the run's generator); with several row blocks the blocks
    come in a random order (not always the atoms' order), each block's rows shuffled."""
    assert np.array_equal(_pmm_rows(5), _pmm_rows(5))
    monkeypatch.setattr(row_plans, "ROW_BLOCK", 500)
    firsts = set()
    for seed in range(8):
        rows = _pmm_rows(seed)
        blocks = [rows[i:i + 500] for i in range(0, len(rows), 500)]
        firsts.add(int(np.argmin([block[:, 0].mean() + block[:, 1].mean() for block in blocks])))
    assert len(firsts) > 1  # the block of the low corner is not always first: P(all 8 equal) <= 6^-7
