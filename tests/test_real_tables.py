"""The real-table benchmark's tables and page (issue 27, item 4): hand-set schemas that hold their data, and the
page generator on a small fabricated results file."""

from __future__ import annotations

import math

import numpy as np
import pytest

from benchmarks.peers.real_tables import ALL_TABLES, SMALL_TABLES, TABLES
from benchmarks.real_tables_report import aggregate, best_of_ours, guide_evidence, guide_pick, verdict, write_page
from privsyn_core.data.domain import Schema


@pytest.fixture(scope="module")
def frames():
    return {name: table.frame() for name, table in ALL_TABLES.items()}


def _outside(frame, column: dict) -> dict[str, int]:
    """Values a hand-set public domain does not hold: outside the bounds (clipped by encoding), non-integers in an
    integer column, labels that are not public categories."""
    values = frame[column["name"]]
    if column["kind"] == "categorical":
        return {"unknown category": int((~values.isin(column["categories"])).sum())}
    x = values.to_numpy(float)
    return {"below lo": int((x < column["lo"]).sum()), "above hi": int((x > column["hi"]).sum()),
            "not integer": int((x != np.rint(x)).sum()) if column.get("integer") else 0}


def test_every_table_has_the_shape_the_benchmark_promises(frames):
    for name in SMALL_TABLES:
        assert 5 <= frames[name].shape[1] <= 20 and 100 <= len(frames[name]) < 500, (name, frames[name].shape)
        assert Schema.from_dict(SMALL_TABLES[name].schema_dict()).dp_valid, name
    for name, frame in ((name, frames[name]) for name in TABLES):
        kinds = {("integer" if c.get("integer") else c["kind"]) for c in TABLES[name].columns}
        assert 5 <= frame.shape[1] <= 20 and 10 ** 3 <= len(frame) <= 10 ** 5, (name, frame.shape)
        assert len(kinds) >= 2, f"{name} is not mixed: {kinds}"
        assert TABLES[name].target in frame.columns
        assert Schema.from_dict(TABLES[name].schema_dict()).dp_valid, name
    columns = [c for t in TABLES.values() for c in t.columns]
    few_valued = [c for c in columns if c.get("integer") and c["hi"] - c["lo"] + 1 <= 32]
    zero_atoms = [c for c in columns if 0 in c.get("atoms", ())]
    assert len(TABLES) >= 6 and len(few_valued) >= 5 and len(zero_atoms) >= 5


def test_the_hand_set_domains_hold_their_data(frames):
    """Count, per column, the values that encoding would clip or that the domain does not hold; report them all."""
    clipped = {(name, c["name"]): found for name, frame in frames.items() for c in ALL_TABLES[name].columns
               if any((found := _outside(frame, c)).values())}
    assert not clipped, f"values outside the hand-set domains: {clipped}"


def test_atoms_are_values_of_the_domain_that_the_data_takes(frames):
    """A public atom sits in [lo, hi] and is a real point mass here (at least 1% of the rows), not decoration."""
    for name, frame in frames.items():
        for c in ALL_TABLES[name].columns:
            for atom in c.get("atoms", ()):
                assert c["lo"] <= atom <= c["hi"]
                assert (frame[c["name"]] == atom).mean() >= 0.01, (name, c["name"], atom)


# ---------------------------------------------------------------------------------------------- the page
def _run(table: str, system: str, seed: int, w1: tuple, tvd2: tuple, tvd1: tuple, seconds: float = 1.0) -> dict:
    def entry(t):
        return {"value": t[0], "low": t[1], "high": t[2], "per_resolution": {"8": t[0], "32": t[0]}}

    return {"table": table, "system": system, "epsilon": 1.0, "seed": seed, "n": 1023, "d": 6, "seconds": seconds,
            "wall_seconds": seconds, "relation": "add_remove", "coverage_flags": "", "w1": entry(w1),
            "tvd2": entry(tvd2), "tvd1": entry(tvd1), "tstr": {"value": 0.5, "train_on_real": 0.7},
            "sdmetrics": {"overall": 0.8}}


def _fabricated() -> list[dict]:
    """marginal_tree against MST on seattle_weather: W1 disjoint and lower (better), 2-way TVD overlapping (tied),
    1-way TVD disjoint and higher (worse); pmm worse than marginal_tree everywhere; AIM refused."""
    rows = []
    for seed in (0, 1):
        rows += [_run("seattle_weather", "marginal_tree", seed, (0.10, 0.09, 0.11), (0.30, 0.28, 0.32),
                      (0.20, 0.19, 0.21)),
                 _run("seattle_weather", "pmm", seed, (0.30, 0.29, 0.31), (0.60, 0.58, 0.62), (0.40, 0.39, 0.41)),
                 _run("seattle_weather", "opendp_mst", seed, (0.20, 0.19, 0.21), (0.31, 0.29, 0.33),
                      (0.05, 0.04, 0.06), seconds=80.0),
                 {"table": "seattle_weather", "system": "opendp_aim", "epsilon": 1.0, "seed": seed, "n": 1023,
                  "d": 6, "error": "ParameterError: opendp_aim works on at most 2 encoded column(s)"}]
    return rows


def test_aggregate_takes_the_union_of_the_seed_and_per_run_intervals():
    rows = [_run("fair", "pmm", 0, (0.1, 0.09, 0.11), (0.3, 0.2, 0.4), (0.2, 0.1, 0.3)),
            _run("fair", "pmm", 1, (0.3, 0.29, 0.31), (0.3, 0.2, 0.4), (0.2, 0.1, 0.3))]
    w1 = aggregate(rows)[("fair", 1.0, "pmm")]["w1"]
    half = 12.706 * 0.1414 / math.sqrt(2)  # t_{0.975, 1} x sd / sqrt(2): the seeds disagree far more than per run
    assert w1["value"] == pytest.approx(0.2)
    assert w1["low"] == 0.0 and w1["high"] == pytest.approx(0.2 + half, rel=1e-3)


def test_verdicts_order_only_disjoint_intervals():
    low, mid, high = ({"value": v, "low": v - 0.01, "high": v + 0.01} for v in (0.1, 0.105, 0.2))
    assert (verdict(low, high), verdict(high, low), verdict(low, mid), verdict(low, None)) == \
        ("better", "worse", "tied", "n/a")


def test_the_page_counts_ties_as_at_least_as_good_and_lists_every_failure(tmp_path):
    rows = _fabricated()
    page, full = tmp_path / "page.md", tmp_path / "full.md"
    write_page(rows, "results.json", page, full)
    text = page.read_text()
    agg = aggregate(rows)
    assert best_of_ours(agg, "seattle_weather", 1.0, "w1") == "marginal_tree"
    pick = guide_pick("seattle_weather", list(TABLES["seattle_weather"].columns), 1023, 1.0, guide_evidence(rows))
    count = {"marginal_tree": "| 1-0-0 | 0-1-0 | 0-0-1 |", "pmm": "| 0-0-1 | 0-0-1 | 0-0-1 |"}
    assert f"| 1 | marginal_tree | MST (OpenDP) {count['marginal_tree']}" in text
    if pick in count and pick != "marginal_tree":  # the guide's row only where it differs
        assert f"| 1 | guide | MST (OpenDP) {count[pick]}" in text
    assert "MST (OpenDP) ran 2 seeds on 1 (table, eps) pairs." in text
    assert "| 1 | mid-sized (1) |" in text  # the guide's check by table size
    assert f"guide: {pick}" in text and "## The guide, checked" in text
    assert "AIM (OpenDP) | failed (ParameterError)" in text and "## Failed runs (2 of 8)" in text
    assert ".100±.010 mt" in text  # best of ours on W1, named
    assert len(text.encode()) < 10 * 1024
    assert "8: 0.300, 32: 0.300" in full.read_text()  # the per-resolution TVDs reach the full report
