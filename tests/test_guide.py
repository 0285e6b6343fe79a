"""The mechanism guide recommends from the real-table benchmark's measured evidence, by rank with ties."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import privsyn_core as ps
from privsyn_core.evaluation.guide import (
    Shape,
    candidates,
    measured_accuracy,
    recommend,
    shape_distance,
    shipped_evidence,
    stand_in_schema,
)

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "peers" / "results_real_tables.json"

#: Two tables, two mechanisms: pmm better on both by 2-way TVD and W1 (disjoint intervals), psmm tied with it on
#: one W1 only.
TABLES = {"small": (5, 1_000, 1, 1), "large": (10, 50_000, 5, 0), "far": (2, 100, 0, 0)}
RUNS = [
    ("small", 1.0, "pmm", "tvd2", 0.20, 0.18, 0.22), ("small", 1.0, "psmm", "tvd2", 0.40, 0.38, 0.42),
    ("small", 1.0, "pmm", "w1", 0.10, 0.09, 0.11), ("small", 1.0, "psmm", "w1", 0.105, 0.10, 0.12),
    ("small", 1.0, "pmm", "tvd1", 0.05, 0.04, 0.06),
    ("large", 1.0, "pmm", "tvd2", 0.30, 0.29, 0.31), ("large", 1.0, "psmm", "tvd2", 0.50, 0.49, 0.51),
    ("large", 1.0, "pmm", "w1", 0.20, 0.19, 0.21), ("large", 1.0, "psmm", "w1", 0.40, 0.39, 0.41),
    ("small", 4.0, "pmm", "tvd2", 0.50, 0.45, 0.55), ("small", 4.0, "psmm", "tvd2", 0.10, 0.09, 0.11),
    ("small", 4.0, "pmm", "w1", 0.50, 0.45, 0.55), ("small", 4.0, "psmm", "w1", 0.10, 0.09, 0.11),
    ("far", 1.0, "psmm", "tvd2", 0.01, 0.0, 0.02), ("far", 1.0, "psmm", "w1", 0.01, 0.0, 0.02),
]
EVIDENCE = (TABLES, RUNS)


def test_the_shipped_evidence_is_the_benchmark_results():
    """The package's data file is what the benchmark's report writes from its results file, and reads back as the
    same tables and runs (a missing interval as NaN)."""
    from benchmarks.real_tables_report import GUIDE_EVIDENCE, guide_evidence, guide_evidence_json

    rows = json.loads(RESULTS.read_text())
    assert GUIDE_EVIDENCE.read_text() == guide_evidence_json(rows)
    tables, runs = guide_evidence(rows)
    shipped_tables, shipped_runs = shipped_evidence()
    assert shipped_tables == tables and len(shipped_runs) == len(runs)
    for shipped, measured in zip(shipped_runs, runs, strict=True):
        assert shipped == pytest.approx(measured, nan_ok=True)
    assert shipped_evidence() is shipped_evidence()  # read once


def test_the_best_mean_rank_on_the_nearest_tables_wins_with_the_union_of_its_intervals():
    found = recommend(6, 2_000, ["numeric"] * 4 + ["integer", "categorical"], 1.0, evidence=EVIDENCE)
    assert found.mechanism == "pmm"  # rank 1 on small and large (tied on small's W1), last on far (no run)
    assert found.evidence[:2] == ("small", "large") and found.evidence[-1] == "epsilon 1"
    assert found.expected_tvd2_range == (0.18, 0.31) and found.expected_w1_range == (0.09, 0.21)
    assert found.expected_tvd1_range == (0.04, 0.06)
    assert "4 of 6" in found.why and found.why.endswith(".")  # not measured on far: ranked last there


def test_of_the_candidates_tied_everywhere_the_fastest_is_picked_and_a_better_rank_beats_speed():
    """pmm and psmm overlap on every comparison (the same mean rank): equal on this evidence, so the faster is
    picked and the why says so, with its seconds; psmm measurably worse on one comparison of four (mean ranks 1.0
    and 1.25), the better rank wins however slow it is, and the why gives its seconds."""
    tables = {"a": (5, 1_000, 0, 0), "b": (5, 1_200, 0, 0)}
    tied = [(t, 1.0, m, metric, 0.2, 0.1, 0.3) for t in tables for m in ("pmm", "psmm") for metric in ("tvd2", "w1")]
    timing = [("a", 1.0, "pmm", "seconds", 90.0, float("nan"), float("nan")),
              ("a", 1.0, "psmm", "seconds", 0.1, float("nan"), float("nan"))]
    found = recommend(5, 1_000, ["numeric"] * 5, 1.0, evidence=(tables, tied + timing))
    assert found.mechanism == "psmm" and "As good on this evidence: pmm" in found.why
    assert "about 0.1 s a run there" in found.why
    tied[-1] = ("b", 1.0, "psmm", "w1", 0.5, 0.45, 0.55)  # psmm second on one comparison of four
    found = recommend(5, 1_000, ["numeric"] * 5, 1.0, evidence=(tables, tied + timing))
    assert found.mechanism == "pmm" and "As good" not in found.why and "about 90 s a run there" in found.why


def test_the_nearest_measured_epsilon_is_used_and_named():
    found = recommend(6, 2_000, ["numeric"] * 6, 3.0, evidence=EVIDENCE)
    assert found.mechanism == "psmm" and found.evidence[-1] == "epsilon 4"
    assert "the measured epsilon nearest to 3" in found.why


def test_a_left_out_table_is_not_evidence():
    assert recommend(2, 100, ["numeric"] * 2, 1.0, evidence=EVIDENCE).evidence[0] == "far"
    assert "far" not in recommend(2, 100, ["numeric"] * 2, 1.0, evidence=EVIDENCE,
                                  exclude_tables=["far"]).evidence


def test_shape_distance_weighs_rows_columns_and_kinds():
    base = Shape(10, 10_000, 0, 0)
    assert shape_distance(base, base) == 0
    assert shape_distance(base, Shape(10, 100_000, 0, 0)) == pytest.approx(1.0)
    assert shape_distance(base, Shape(10, 10_000, 10, 0)) == pytest.approx(1.0)


def test_candidates_are_the_private_mechanisms_that_accept_the_shape():
    one_column = candidates(["numeric"])
    two_columns = candidates(["numeric", "numeric"])
    private = {s.name for s in ps.list_mechanisms() if s.is_private}
    assert set(two_columns) <= private and "bootstrap" not in two_columns
    for name in set(one_column) | set(two_columns):
        spec = ps.get_mechanism(name)
        assert (name in two_columns) == (spec.accepts(stand_in_schema(["numeric"] * 2)) is None)
    assert any(ps.get_mechanism(n).max_dim == 1 for n in one_column)  # srw on one column only
    assert not any(ps.get_mechanism(n).max_dim == 1 for n in two_columns)


def test_the_shipped_guide_recommends_a_registered_private_mechanism():
    found = recommend(8, 400, ["numeric"] * 5 + ["categorical"] * 3, 1.0)
    assert ps.get_mechanism(found.mechanism).is_private
    assert found.expected_w1_range is not None and found.expected_w1_range[0] <= found.expected_w1_range[1]


@pytest.mark.parametrize("args", [(3, 100, ["text"] * 3, 1.0), (2, 100, ["numeric"], 1.0), (0, 10, [], 1.0),
                                  (2, 10, [], 0.0)])
def test_bad_shapes_are_refused(args):
    with pytest.raises(ValueError):
        recommend(*args)


def test_measured_accuracy_reads_the_mechanisms_own_runs_on_the_nearest_tables_at_the_nearest_epsilon():
    """The union of its intervals on the nearest tables, the nearest one's 2-way interval alone, and nothing for a
    mechanism never measured."""
    found = measured_accuracy("pmm", 5, 1_200, ["numeric"] * 4 + ["categorical"], 0.8, evidence=(TABLES, RUNS))
    assert found is not None and found.epsilon == 1.0 and found.tables[0] == ("small", 1_000, 5)
    assert found.nearest_tvd2_range == (0.18, 0.22) and found.tvd1_range == (0.04, 0.06)
    assert found.tvd2_range is not None and found.tvd2_range[0] == 0.18 and found.tvd2_range[1] >= 0.31
    assert measured_accuracy("srw", 5, 1_200, [], 1.0, evidence=(TABLES, RUNS)) is None


def test_a_peer_pick_says_what_waiting_for_it_buys_over_our_best(monkeypatch):
    """A peer (psmm stands in for one: run by an outside library) better than pmm on both comparisons is picked,
    and the why gives both mean 2-way TVDs and W1s with their intervals, the tables where the
    peer is better beyond them, and both times; with pmm tied, pmm (faster) is picked, no wait told."""
    from privsyn_core.evaluation import guide

    monkeypatch.setattr(guide, "_implemented_by", lambda name: "Outside" if name == "psmm" else None)
    tables = {"a": (5, 1_000, 0, 0)}
    runs = [("a", 1.0, "psmm", "tvd2", 0.20, 0.19, 0.21), ("a", 1.0, "psmm", "w1", 0.10, 0.09, 0.11),
            ("a", 1.0, "pmm", "tvd2", 0.30, 0.29, 0.31), ("a", 1.0, "pmm", "w1", 0.15, 0.14, 0.16),
            ("a", 1.0, "psmm", "seconds", 300.0, float("nan"), float("nan")),
            ("a", 1.0, "pmm", "seconds", 0.2, float("nan"), float("nan"))]
    found = recommend(5, 1_000, ["numeric"] * 5, 1.0, evidence=(tables, runs))
    assert found.mechanism == "psmm"
    assert ("psmm runs in Outside (about 300 s a run): on these tables it has a mean 2-way TVD of 0.200 (intervals "
            "0.190-0.210) and a mean W1 of 0.100 (intervals 0.090-0.110), against a mean 2-way TVD of 0.300 "
            "(intervals 0.290-0.310) and a mean W1 of 0.150 (intervals 0.140-0.160) for pmm, the best of this "
            "library's own (about 0.2 s a run); it is better beyond the intervals on 1 of 1 table by 2-way TVD and "
            "on 1 of 1 table by W1.") in found.why
    runs[3] = ("a", 1.0, "pmm", "w1", 0.105, 0.095, 0.115)  # overlapping W1 intervals: not better beyond them
    found = recommend(5, 1_000, ["numeric"] * 5, 1.0, evidence=(tables, runs))
    assert found.mechanism == "psmm" and "on 1 of 1 table by 2-way TVD and on 0 of 1 table by W1." in found.why
    runs[2:4] = [("a", 1.0, "pmm", "tvd2", 0.205, 0.19, 0.22), ("a", 1.0, "pmm", "w1", 0.1, 0.09, 0.11)]
    found = recommend(5, 1_000, ["numeric"] * 5, 1.0, evidence=(tables, runs))
    assert found.mechanism == "pmm" and "runs in" not in found.why


def test_without_peers_only_this_librarys_own_mechanisms_are_picked(monkeypatch):
    """The page's default asks for our own mechanisms only: a better peer (psmm standing in) is then not picked."""
    from privsyn_core.evaluation import guide

    monkeypatch.setattr(guide, "_implemented_by", lambda name: "Outside" if name == "psmm" else None)
    runs = [("a", 1.0, m, metric, value, value - 0.01, value + 0.01)
            for m, value in (("psmm", 0.1), ("pmm", 0.3)) for metric in ("tvd2", "w1")]
    evidence = ({"a": (5, 1_000, 0, 0)}, runs)
    assert recommend(5, 1_000, ["numeric"] * 5, 1.0, evidence=evidence).mechanism == "psmm"
    assert recommend(5, 1_000, ["numeric"] * 5, 1.0, evidence=evidence, peers=False).mechanism == "pmm"


def test_the_row_estimate_moves_the_evidence_between_small_and_large_tables():
    """Issue 38, item 2: the declared or estimated n enters the pick: at 300 rows the guide rests on the measured
    tables of under 500 rows, at 40,000 on none of them (the shipped evidence holds both kinds)."""
    shapes, _ = shipped_evidence()
    small = {name for name, (_, rows, _, _) in shapes.items() if rows < 500}
    assert len(small) >= 3, "the shipped evidence has small tables"
    kinds = ["numeric"] * 6 + ["integer", "categorical"]
    at_300 = set(recommend(8, 300, kinds, 1.0).evidence[:-1])
    at_40000 = set(recommend(8, 40_000, kinds, 1.0).evidence[:-1])
    assert len(at_300 & small) >= 3 and not at_40000 & small
