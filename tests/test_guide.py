"""The mechanism guide recommends from the measured benchmark results."""

import json
from pathlib import Path

import pytest

import privsyn_core as ps
from privsyn_core.evaluation._guide_measured import MEASURED
from privsyn_core.evaluation.guide import STRUCTURED, measured_from_results, recommend

RESULTS = Path(__file__).resolve().parents[1] / "benchmarks" / "peers" / "results.json"


def test_the_shipped_table_is_the_peer_benchmark_results():
    assert measured_from_results(json.loads(RESULTS.read_text())) == MEASURED


@pytest.mark.parametrize("d, n, eps", [(2, 1400, 1.0), (5, 1400, 4.0), (5, 398, 0.5), (3, 1400, 1.0)])
def test_a_measured_shape_gets_the_mechanism_with_the_lowest_median_tvd2_and_its_measured_ranges(d, n, eps):
    rec = recommend(d, n, ["numeric"] * d, eps)
    runs = [r for r in MEASURED if r[1] in STRUCTURED and (r[2], r[3], r[4]) == (d, n, eps)]
    chosen = [r for r in runs if r[0] == rec.mechanism]
    others = {r[0] for r in runs}
    medians = {m: sorted(r[5] for r in runs if r[0] == m) for m in others}
    mid = {m: v[(len(v) - 1) // 2] if len(v) % 2 else (v[len(v) // 2 - 1] + v[len(v) // 2]) / 2
           for m, v in medians.items()}
    assert mid[rec.mechanism] == min(mid.values())
    assert rec.expected_tvd2_range == (min(r[5] for r in chosen), max(r[5] for r in chosen))
    assert rec.expected_w1_range == (min(r[6] for r in chosen), max(r[6] for r in chosen))
    assert rec.mechanism in {s.name for s in ps.list_mechanisms()} and rec.why.endswith(".")


def test_unmeasured_shapes_use_the_nearest_and_say_so():
    rec = recommend(9, 20_000, ["numeric"] * 6 + ["categorical"] * 3, 2.0)
    assert "nearest measured shape" in rec.why and "5 columns" in rec.why
    boolean = recommend(8, 50_000, ["boolean"] * 8, 1.0)
    assert boolean.mechanism == "microagg_dp" and boolean.expected_tvd2_range is None
    with pytest.raises(ValueError):
        recommend(3, 100, ["text"], 1.0)
