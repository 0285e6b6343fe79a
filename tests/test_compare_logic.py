"""The Compare page's logic without a browser: correlation matrices, metrics in words, honest ranks, the report."""

from __future__ import annotations

import math
import re

import numpy as np
import pandas as pd
import pytest

import privsyn_core as ps
from privsyn_core.data.datasets import two_blobs
from privsyn_core.evaluation.scorecard import rank_runs
from privsyn_core.reporting import comparison, figures as F, plot_data, svg_charts

SCHEMA = {"columns": [{"name": "x", "kind": "numeric", "lo": 0.0, "hi": 1.0},
                      {"name": "y", "kind": "numeric", "lo": 0.0, "hi": 1.0},
                      {"name": "c", "kind": "categorical", "categories": ["lo", "hi"]}]}


def real_table(n: int = 400) -> pd.DataFrame:
    table = pd.DataFrame(two_blobs(n, 2, rng=3), columns=["x", "y"])
    table["c"] = np.where(table["x"] > 0.5, "hi", "lo")
    return table


# -- correlations ------------------------------------------------------------------------------
def test_correlation_matrix_is_pearson_and_marks_constant_columns():
    rng = np.random.default_rng(0)
    X = rng.random((200, 3))
    X[:, 1] = 1 - X[:, 0]
    X = np.column_stack([X, np.full(200, 0.5)])
    C = plot_data.correlation_matrix(X)
    assert np.allclose(C[:3, :3], np.corrcoef(X[:, :3].T))
    assert C[0, 1] == pytest.approx(-1.0)
    assert np.isnan(C[3, :3]).all() and np.isnan(C[:3, 3]).all() and C[3, 3] == 1.0


def test_svg_correlations_show_real_synthetic_and_difference_on_one_scale():
    real = np.array([[1.0, 0.8], [0.8, 1.0]])
    synthetic = np.array([[1.0, 0.2], [0.2, 1.0]])
    svg = svg_charts.svg_correlations(synthetic, ["a", "<b>"], real=real)
    cells = re.findall(r'<rect x="\d+" y="\d+" width="\d+" height="\d+" fill="(#[0-9a-f]{6})"><title>([^<]*): '
                       r'([^<]*?) / ([^<]*?): ([-0-9.]+)</title>', svg)
    assert [c[1] for c in cells[::4]] == [f"real ({plot_data.NOT_PRIVATE})", "synthetic", "synthetic minus real"]
    values = np.array([float(c[4]) for c in cells]).reshape(3, 2, 2)
    np.testing.assert_allclose(values, [real, synthetic, synthetic - real], atol=5e-4)
    assert cells[0][0] == svg_charts.rdbu(np.array([1.0]))[0] == "#67001f", "+1 is the scale's darkest red"
    assert svg_charts.rdbu(np.array([-1.0, 0.0, np.nan])) == ["#053061", "#f7f7f7", "#cccccc"]
    assert "&lt;b&gt;" in svg and "<b>" not in svg and "<script" not in svg
    assert ">0.80<" in svg and ">-0.60<" in svg, "cells carry their values"


def test_svg_correlations_fit_the_page_with_whole_or_visibly_cut_names():
    names = ["alcohol", "malic_acid", "alcalinity_of_ash", "nonflavanoid_phenols", "od280/od315_of_diluted_wines",
             "proanthocyanins", "color_intensity", "hue", "proline", "magnesium", "ash", "total_phenols",
             "flavanoids", "cultivar"]  # the wine sample: 14 columns, long names
    d = len(names)
    svg = svg_charts.svg_correlations(np.eye(d), names, real=np.eye(d))
    width = int(re.search(r'<svg [^>]*width="(\d+)"', svg).group(1))
    assert width <= svg_charts.CORRELATION_WIDTH, "drawn at its size on a 1280 px page, never shrunk"
    labels = re.findall(r"<text [^>]*><title>([^<]*)</title>([^<]*)</text>", svg)
    assert len(labels) == 3 * d + d  # under each panel, and beside the first
    for whole, shown in labels:
        assert shown == whole or (shown == whole[:svg_charts.LABEL_CHARS - 1] + "\u2026"), (whole, shown)
    assert ("od280/od315_of_diluted_wines", "od280/od315_of_dilu\u2026") in labels
    assert ("nonflavanoid_phenols", "nonflavanoid_phenols") in labels
    cell = int(re.search(r'<rect x="\d+" y="\d+" width="(\d+)"', svg).group(1))
    fonts = {int(f) for f in re.findall(r'text-anchor="end" font-size="(\d+)"><title>', svg)}
    assert fonts and max(fonts) <= cell - 2, "one label a cell, each no taller than its cell: none overlap"
    assert 'rotate(-90' in svg and 'rotate(-45' not in svg, "the column labels run upright, one per cell"


def test_svg_correlations_in_release_mode_have_the_synthetic_panel_only():
    svg = svg_charts.svg_correlations(np.eye(3), ["a", "b", "c"])
    assert "synthetic" in svg and "real" not in svg and "minus" not in svg


# -- ranks -------------------------------------------------------------------------------------
def test_interval_figure_never_orders_runs_whose_intervals_overlap_by_value():
    entries = {"b_run": (0.30, 0.20, 0.40), "a_run": (0.35, 0.25, 0.45), "c_run": (0.10, 0.05, 0.12)}
    ranked = rank_runs(entries)
    fig = F.interval_figure(ranked, metric="W1", better="lower", floor=(0.05, 0.04, 0.06))
    x = list(fig.data[0].x)
    assert x == ["c_run", "a_run", "b_run"]  # c alone first; a and b tied, listed by name although b is lower
    labels = sorted(a.text for a in fig.layout.annotations)
    assert labels == ["rank 1", "real-vs-real floor", "tied at rank 2"]
    err = fig.data[0].error_y
    assert np.allclose(np.asarray(err.array), ranked["high"] - ranked["value"])
    assert np.allclose(np.asarray(err.arrayminus), ranked["value"] - ranked["low"])
    assert "lower is better" in fig.layout.yaxis.title.text


def test_interval_figure_shows_non_private_runs_apart_and_unranked():
    ranked = rank_runs({"pmm": (0.3, 0.2, 0.4)})
    others = pd.DataFrame([{"run": "bootstrap", "value": 0.01, "low": 0.0, "high": 0.02}])
    fig = F.interval_figure(ranked, metric="W1", better="lower", not_private=others)
    assert list(fig.data[1].x) == ["bootstrap (NOT private)"] and "not ranked" in fig.data[1].name
    assert list(fig.layout.xaxis.categoryarray) == ["pmm", "bootstrap (NOT private)"]


# -- metrics in words, several runs, the report ------------------------------------------------
@pytest.fixture(scope="module")
def runs() -> dict:
    real = real_table()
    out = {}
    for name, seed in (("dp_histogram", 1), ("laplace_points", 2), ("bootstrap", 3)):
        result = ps.synthesize(real, name, 1.0, schema=SCHEMA, rng=seed)
        evaluation = ps.metrics.evaluate(real, result.data, ps.Schema.from_dict(SCHEMA), repeats=3, bootstrap=5,
                                         subsample=100)
        out[name] = {"key": {"mechanism": name}, "result": result, "evaluation": evaluation}
    return out


def test_every_metric_has_a_direction_an_interval_and_a_floor(runs):
    table = comparison.metric_table(runs["dp_histogram"]["evaluation"])
    assert set(table["better"]) <= {"lower", "higher"}
    by_key = table.set_index("key")
    present = [key for key in comparison.RANKABLE if key in by_key.index]
    assert {"w1", "sliced_w1", "mmd", "marginal_tvd_1way", "marginal_tvd_2way", "correlation_gap"} <= set(present)
    for key in present:
        row = by_key.loc[key]
        assert row["low"] <= row["value"] <= row["high"], key
        assert math.isfinite(row["floor"]) and row["floor_low"] <= row["floor"] <= row["floor_high"], key
        assert row["metric"] == comparison.info(key).label
    shown = comparison.shown(table)
    assert shown["95% interval"].str.startswith("[").sum() >= len(present)
    assert set(shown["better"]) <= {"lower is better", "higher is better"}


def test_standing_against_the_floor():
    row = {"value": 0.5, "low": 0.4, "high": 0.6, "floor": 0.1, "floor_low": 0.05, "floor_high": 0.15}
    assert comparison._standing(row, "lower") == "worse than the floor"
    assert comparison._standing({**row, "floor_low": 0.35, "floor_high": 0.65}, "lower").startswith("at the floor")
    # an interval that only overlaps the floor's (a wide one, or one reaching past it) is not "at the floor"
    assert comparison._standing({**row, "floor_high": 0.45}, "lower") == "worse than the floor; the intervals overlap"
    assert comparison._standing({**row, "floor": 0.45, "floor_low": 0.42, "floor_high": 0.48},
                                "lower") == "worse than the floor; the intervals overlap"
    # srw_tsp at epsilon 1 on the blobs sample (seed 0): a visibly square blob, its W1 interval past the floor's
    square = {"value": 0.0282, "low": 0.0246, "high": 0.0318, "floor": 0.0208, "floor_low": 0.0149,
              "floor_high": 0.0267}
    assert not comparison._standing(square, "lower").startswith("at the floor")
    assert comparison._standing(row, "higher").startswith("better than the floor")


def test_runs_table_marks_the_non_private_run_and_gives_it_no_epsilon(runs):
    table = comparison.runs_table(runs)
    assert list(table.index) == list(runs)
    assert table.loc["bootstrap", "privacy"] == "NOT PRIVATE" and not table.loc["bootstrap", "dp_valid"]
    assert math.isnan(table.loc["bootstrap", "epsilon"])
    assert table.loc["dp_histogram", "privacy"] == "private" and table.loc["dp_histogram", "epsilon"] == 1.0
    assert table.loc["dp_histogram", "neighbours differ by"].startswith("replacing one record")


def test_ranking_is_among_private_runs_only(runs):
    ranked, others, floor = comparison.ranking(runs, "marginal_tvd_2way")
    assert set(ranked["run"]) == {"dp_histogram", "laplace_points"}
    assert list(others["run"]) == ["bootstrap"]
    assert math.isfinite(floor[0]) and floor[1] <= floor[0] <= floor[2]
    for line in comparison.ranking_words(ranked):
        assert line.startswith("rank ")


def test_wide_metrics_show_every_run_with_its_interval(runs):
    wide = comparison.wide_metrics(runs)
    assert list(wide.columns) == ["better", *runs, "real-vs-real floor"]
    assert wide.loc[comparison.info("w1").label, "dp_histogram"].count("[") == 1


def test_run_many_runs_each_mechanism_and_reports_the_ones_that_cannot_run():
    real = real_table(200)
    key = {"mechanism": "dp_histogram", "params": {}, "epsilon": 1.0, "neighbouring": "add_remove", "seed": 0,
           "schema": SCHEMA, "n_synthetic": None}

    def execute(k: dict) -> ps.SynthResult:
        return ps.synthesize(real, k["mechanism"], k["epsilon"], schema=k["schema"], neighbouring=k["neighbouring"],
                             rng=k["seed"], **{p: v for p, v in k["params"].items() if v is not None})

    seen = []
    out = comparison.run_many(["dp_histogram", "microagg_dp", "laplace_points"], key, execute=execute,
                              evaluate=lambda result, k: {"rows": len(result.data)},
                              progress=lambda share, text: seen.append(share))
    assert list(out["runs"]) == ["dp_histogram"]
    assert len(out["errors"]) == 2 and out["errors"][0].startswith("microagg_dp: ")  # replace-one only
    assert out["errors"][1].startswith("laplace_points: calibrated only for neighbours that differ by replacing")
    assert seen[-1] == 1.0
    assert out["runs"]["dp_histogram"]["result"].neighbouring == "add_remove", "the relation is never changed"
    key["neighbouring"] = "replace"
    out = comparison.run_many(["dp_histogram", "microagg_dp", "laplace_points"], key, execute=execute,
                              evaluate=lambda result, k: {"rows": len(result.data)})
    assert list(out["runs"]) == ["dp_histogram", "laplace_points"]
    assert len(out["errors"]) == 1 and out["errors"][0].startswith("microagg_dp: ")  # not Boolean data


def test_comparison_report_has_every_run_marks_and_ranks_and_stays_small(runs):
    tables = {name: run["result"].data for name, run in runs.items()}
    html = comparison.comparison_html(data_name="<b>mine</b>.csv", runs=runs, tables=tables, real=real_table(),
                                      rank_metric="marginal_tvd_2way")
    assert html.startswith("<!DOCTYPE html>") and "<script" not in html
    assert "&lt;b&gt;mine&lt;/b&gt;.csv" in html and "<b>mine</b>" not in html
    for name in runs:
        assert ps.get_mechanism(name).title in html, "every run, named by its title (no registry keys in a report)"
    boot = ps.get_mechanism("bootstrap").title
    assert f"NOT private (no guarantee, never publish): {boot}" in html
    assert f"Not ranked (not private): {boot}" in html
    assert "lower is better" in html and "[" in html
    assert len(html.encode()) < 1_000_000


def test_a_value_equal_to_the_floor_is_said_so_not_better():
    """Issue 28, item 9: 'better than the floor' only when it is."""
    nan = float("nan")
    row = {"value": 0.1, "low": nan, "high": nan, "floor": 0.1, "floor_low": nan, "floor_high": nan}
    assert comparison._standing(row, "lower") == "equal to the floor"
    assert comparison._standing({**row, "value": 0.05}, "lower").startswith("better than the floor")
    assert comparison._standing({**row, "value": 0.2}, "lower") == "worse than the floor"
