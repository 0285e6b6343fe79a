"""Unit tests of the pure Plotly figure builders (no Streamlit)."""

from __future__ import annotations

import itertools
import math
import re

import numpy as np
import pandas as pd
import plotly.graph_objects as go
import pytest

import privsyn_core as ps
from privsyn_core.data.datasets import two_blobs
from privsyn_core.reporting import figures as F, plot_data, svg_charts


def grid_cells(k: int, d: int = 2, seed: int = 0) -> dict:
    """A k^d equal grid with random counts, shaped like diagnostics["cells"]."""
    axes = np.meshgrid(*[np.arange(k)] * d, indexing="ij")
    lo = np.column_stack([a.ravel() for a in axes]) / k
    counts = np.random.default_rng(seed).integers(0, 50, len(lo))
    return {"lo": lo, "hi": lo + 1 / k, "true_count": counts, "noisy_count": counts + 1, "count": counts}


def test_rectangle_path_is_one_closed_loop_per_box_separated_by_nan():
    lo, hi = np.array([[0.0, 0.1], [0.5, 0.5]]), np.array([[0.2, 0.3], [1.0, 0.9]])
    x, y = F.rectangle_path(lo, hi)
    assert len(x) == len(y) == 12
    assert np.isnan(x[5::6]).all() and np.isnan(y[5::6]).all()
    np.testing.assert_array_equal(x[:5], [0.0, 0.2, 0.2, 0.0, 0.0])
    np.testing.assert_array_equal(y[:5], [0.1, 0.1, 0.3, 0.3, 0.1])
    np.testing.assert_array_equal(x[6:11], [0.5, 1.0, 1.0, 0.5, 0.5])


def test_partition_is_a_few_fill_traces_holding_every_rectangle_and_no_shapes():
    cells = grid_cells(40)  # 1600 rectangles
    fig = F.partition_figure(cells, value_key="count")
    fills = [t for t in fig.data if t.fill == "toself"]
    assert 1 <= len(fills) <= len(F.BIN_COLOURS)
    assert sum(int(np.isnan(np.asarray(t.x, float)).sum()) for t in fills) == 1600
    assert not fig.layout.shapes
    assert list(fig.layout.xaxis.range) == pytest.approx([-0.02, 1.02])
    assert list(fig.layout.yaxis.range) == pytest.approx([-0.02, 1.02])


def test_large_partitions_are_webgl_outlines_one_trace_per_colour():
    cells = grid_cells(100)  # 10^4 rectangles, above FILL_LIMIT
    fig = F.partition_figure(cells, value_key="noisy_count")
    assert all(isinstance(t, go.Scattergl) and t.mode == "lines" for t in fig.data)
    assert len(fig.data) <= len(F.BIN_COLOURS)
    assert sum(int(np.isnan(np.asarray(t.x, float)).sum()) for t in fig.data) == 10_000
    assert not fig.layout.shapes


def test_partition_colour_bins_follow_the_values():
    cells = grid_cells(4)
    cells["count"] = np.arange(16)
    fig = F.partition_figure(cells, value_key="count")
    # each fill trace holds exactly the cells whose value lies in its bin
    bins, edges = F.colour_bins(cells["count"])
    for trace, b in zip([t for t in fig.data if t.fill == "toself"], np.unique(bins), strict=True):
        assert int(np.isnan(np.asarray(trace.x, float)).sum()) == int((bins == b).sum())
    assert edges[0] == 0 and edges[-1] == 15


def test_projection_merges_boxes_and_keeps_the_total():
    cells = grid_cells(3, d=3)
    lo, hi, values = F.project_cells(cells, (0, 2), "count")
    assert len(lo) == 9  # 27 cells project onto 9 boxes of the (x0, x2) plane
    assert values.sum() == cells["count"].sum()
    x, _ = F.rectangle_path(lo, hi, (0, 2))
    assert len(x) == 9 * 6


def test_points_are_downsampled_to_the_stated_count_and_use_webgl_above_the_threshold():
    rng = np.random.default_rng(0)
    small = F.point_trace(rng.random((500, 2)), "real", plot_data.REAL_COLOUR, max_points=5000)
    big = F.point_trace(rng.random((20_000, 3)), "synthetic", plot_data.SYNTH_COLOUR, max_points=5000, axes=(1, 2))
    assert isinstance(small, go.Scatter) and len(small.x) == 500 and small.name == "real"
    assert isinstance(big, go.Scattergl) and len(big.x) == 5000
    assert "5,000 of 20,000 shown" in big.name
    assert big.x.dtype == np.float32


def test_svg_scatter_draws_every_point_in_the_columns_units_up_to_its_cap():
    frame = pd.DataFrame({"age": [17.0, 90.0, 53.5, 200.0], "sex": ["M", "F", "F", "M"]})
    schema = {"columns": [{"name": "age", "kind": "numeric", "lo": 17.0, "hi": 90.0},
                          {"name": "sex", "kind": "categorical", "categories": ["M", "F"]}]}
    points, settings = plot_data.plot_coordinates(frame, schema, ["age", "sex"], jitter=0.0)
    svg = svg_charts.svg_scatter(points, settings, axes=(0, 1), labels=["age", "<sex>"], colour="#123456", title="t",
                                 width=440, height=400)
    dots = [tuple(map(float, m)) for m in re.findall(r"M([-0-9.]+) ([-0-9.]+)h0", svg)]
    assert len(dots) == 4 and "&lt;sex&gt;" in svg and "<sex>" not in svg and "<script" not in svg
    left, plot_w = 58, 440 - 58 - 12
    x_lo, x_hi = settings[0]["range"]
    assert dots[0][0] == pytest.approx(left + (17 - x_lo) / (x_hi - x_lo) * plot_w, abs=0.06)
    assert dots[3][0] == left + plot_w > dots[1][0], "a value beyond the drawn range sits on its edge"
    assert dots[0][1] == dots[3][1] and dots[1][1] == dots[2][1] and dots[0][1] > dots[1][1], "M below F"
    assert ">M<" in svg and ">F<" in svg and ">20<" in svg and ">80<" in svg, "ticks in the columns' units"
    many = np.random.default_rng(0).random((5000, 2))
    capped = svg_charts.svg_scatter(many, [{"range": [0, 1]}] * 2, axes=(0, 1), labels=["a", "b"], colour="red",
                                    title="big", max_points=1000)
    assert capped.count("h0") == 1000 and "(1,000 drawn at random)" in capped
    assert capped.count("<path") == 1000 // svg_charts.SVG_POINTS_PER_PATH


def test_nice_ticks_are_round_and_inside_the_range():
    assert svg_charts.nice_ticks(15.54, 91.46).tolist() == [20.0, 40.0, 60.0, 80.0]
    assert svg_charts.nice_ticks(-0.5, 1.5).tolist() == [-0.5, 0.0, 0.5, 1.0, 1.5]
    assert svg_charts.nice_ticks(15.4, 100.6).tolist() == [20.0, 40.0, 60.0, 80.0, 100.0], \
        "5 ticks, not 50 and 100 alone"
    assert [f"{v:g}" for v in svg_charts.nice_ticks(-0.5, 4.5)] == ["0", "1", "2", "3", "4"], "never -0"
    assert svg_charts.nice_ticks(3.0, 3.0).tolist() == [3.0]


def test_tradeoff_is_log_log_with_error_bars_rates_and_floor():
    summary = pd.DataFrame({"mechanism": ["a", "a", "b", "b"], "epsilon": [0.1, 1.0, 0.1, 1.0],
                            "mean": [0.5, 0.1, 0.4, 0.3], "std": [0.05, 0.01, 0.0, 0.02]})
    rates = pd.DataFrame({"mechanism": ["a", "a"], "epsilon": [0.1, 1.0], "rate": [0.4, 0.12]})
    fig = F.tradeoff_figure(summary, rates=rates, floor=0.05)
    assert fig.layout.xaxis.type == "log" and fig.layout.yaxis.type == "log"
    assert [t.name for t in fig.data] == ["a (mean W1)", "a theoretical rate", "b (mean W1)"]
    np.testing.assert_allclose(fig.data[0].error_y.array, [0.05, 0.01])
    assert fig.layout.shapes[0].y0 == 0.05  # the one horizontal floor line
    label = fig.layout.annotations[0]  # on its line: a log axis places annotations at the log10 of the value
    assert label.text == "real vs real floor" and label.y == pytest.approx(math.log10(0.05))
    assert list(fig.layout.xaxis.tickvals) == [0.1, 1.0] and list(fig.layout.xaxis.ticktext) == ["0.1", "1"]
    assert list(fig.layout.yaxis.ticktext) == ["0.03", "0.05", "0.1", "0.2", "0.3", "0.5", "1"]


def test_log_ticks_are_few_and_round_and_cover_the_range():
    for lo, hi in [(0.13, 0.6), (0.001, 0.9), (1e-6, 5.0), (0.2, 0.21), (3.0, 3.0), (10, 100_000)]:
        ticks = F.log_ticks(lo, hi)
        assert 2 <= len(ticks) <= F.MAX_LOG_TICKS, (lo, hi, ticks)
        assert ticks[0] <= lo and ticks[-1] >= hi and np.all(np.diff(ticks) > 0), (lo, hi, ticks)
        assert {f"{t:.0e}"[0] for t in ticks} <= set("1235"), ticks
    assert [f"{t:g}" for t in F.log_ticks(0.13, 0.6)] == ["0.1", "0.2", "0.3", "0.5", "1"]


def test_laplace_teaching_figure_satisfies_the_privacy_ratio():
    epsilon = 0.7
    fig = F.laplace_count_figure(10, epsilon, sensitivity=1)
    d, neighbour = (np.asarray(t.y) for t in fig.data)
    assert d.sum() == pytest.approx(1.0, abs=1e-3)  # the window holds almost all the mass
    assert np.max(np.maximum(d / neighbour, neighbour / d)) <= math.exp(epsilon) * (1 + 1e-12)


def test_path_and_walk_figures_from_a_real_run():
    frame = pd.DataFrame(two_blobs(300, 2, rng=0), columns=["x0", "x1"])
    result = ps.synthesize(frame, "srw_tsp", 1.0, schema=ps.unit_schema(2), rng=0)
    diag = result.diagnostics
    fig = F.path_figure(diag["path"], net=diag.get("net"), points=result.unit_rows, weights=diag.get("projected"))
    path_trace = next(t for t in fig.data if t.name.startswith("folding path"))
    assert len(path_trace.x) == len(diag["path"])
    walk = F.walk_figure(diag["walk"], signed=diag.get("signed"), projected=diag.get("projected"))
    assert len(walk.data[0].y) == len(diag["walk"])
    release = F.walk_figure(None, projected=diag.get("projected"))
    assert [t.name for t in release.data] == ["projected weights"]


def test_level_noise_from_pmm_levels():
    frame = pd.DataFrame(two_blobs(500, 2, rng=1), columns=["x0", "x1"])
    levels = ps.synthesize(frame, "pmm", 1.0, schema=ps.unit_schema(2), rng=1).diagnostics["levels"]
    fig = F.level_noise_figure(levels)
    assert len(fig.data[0].y) == len(levels)
    assert all(v >= 0 for v in fig.data[0].y)


# -- figures of a release alone ------------------------------------------------------------------
def _release(mechanism: str, **params):
    df = pd.DataFrame(two_blobs(500, 2, rng=0), columns=["x0", "x1"])
    return ps.synthesize(df, mechanism, 1.0, schema=ps.unit_schema(2), rng=1, **params)


def test_released_pmm_partition_matches_the_released_leaf_counts_at_every_level():
    result = _release("pmm")
    found = plot_data.released_partition(result.release())
    cells = result.diagnostics["cells"]  # here only as the reference the release must reproduce
    assert np.array_equal(found["cells"]["count"], cells["count"])
    assert np.allclose(found["cells"]["lo"], cells["lo"]) and np.allclose(found["cells"]["hi"], cells["hi"])
    assert len(found["levels"]) == result.release().params["depth"] + 1
    assert all(level["count"].sum() == len(result.data) for level in found["levels"])


def test_released_grid_cells_are_cubes_around_the_released_atoms():
    for mechanism, key in (("dp_histogram", "bins"), ("kd_grid", "bins_per_axis"), ("psmm", "cells_per_axis")):
        release = _release(mechanism).release()
        cells = plot_data.released_partition(release)["cells"]
        side = 1.0 / release.params[key]
        assert np.allclose((cells["lo"] + cells["hi"]) / 2, release.unit)
        assert np.all(cells["hi"] - cells["lo"] <= side + 1e-12)
        assert np.array_equal(cells["count"], release.weights)


def test_released_partition_is_none_without_public_geometry_and_the_snake_path_is_public():
    assert plot_data.released_partition(_release("laplace_points").release()) is None
    result = _release("srw_tsp")
    assert np.allclose(plot_data.released_path(result.release()), result.diagnostics["path"])
    assert plot_data.released_path(_release("dp_histogram").release()) is None


def test_svg_bars_is_valid_escaped_xml_with_one_bar_per_positive_value():
    import xml.etree.ElementTree as ET

    svg = svg_charts.svg_bars(["a", "<b>", "c"], {"synthetic": [0.2, 0.5, 0.0], "real": [0.3, 0.4, 0.3]},
                              title="x <script>", x_label="![p](http://e/p.png)")
    root = ET.fromstring(svg)
    rects = [r for r in root.iter("{http://www.w3.org/2000/svg}rect") if r.find("{http://www.w3.org/2000/svg}title")
             is not None]
    assert len(rects) == 5 and "<script>" not in svg and "&lt;b&gt;" in svg


def test_plot_coordinates_keep_units_and_the_public_category_order():
    frame = pd.DataFrame({"age": [20.0, 60.0], "sex": ["M", "F"]})
    schema = {"columns": [{"name": "age", "kind": "numeric", "lo": 17.0, "hi": 90.0},
                          {"name": "sex", "kind": "categorical", "categories": ["M", "F"]}]}
    points, settings = plot_data.plot_coordinates(frame, schema, ["age", "sex"], jitter=0.3)
    assert points[:, 0].tolist() == [20.0, 60.0]
    assert np.all(np.abs(points[:, 1] - [0, 1]) <= 0.3)
    assert settings[1]["ticktext"] == ["M", "F"] and settings[0]["range"][0] < 17.0


def test_tree_positions_put_each_node_one_level_below_its_parent_and_parents_over_their_children():
    edges = [[0, 1], [0, 2], [2, 3], [2, 4]]
    xy = plot_data.tree_positions(edges, root=0, d=5)
    assert xy[:, 1].tolist() == [0, -1, -1, -2, -2]
    assert xy[2, 0] == (xy[3, 0] + xy[4, 0]) / 2 and xy[0, 0] == (xy[1, 0] + xy[2, 0]) / 2
    assert len({tuple(p) for p in xy}) == 5  # no two columns drawn on the same spot


def test_released_tree_figure_reads_only_the_schema_and_the_released_parameters():
    """A stand-in holding nothing but the schema and the released parameters draws the same figure as the release."""
    from types import SimpleNamespace

    rng = np.random.default_rng(0)
    base = rng.random(2000)
    df = pd.DataFrame({f"x{j}": np.clip(base + 0.05 * rng.standard_normal(2000), 0, 1) for j in range(4)})
    release = ps.synthesize(df, "marginal_tree", 4.0, schema=ps.unit_schema(4), rng=3).release()
    fig = F.released_tree_figure(release)
    params = {k: release.params[k] for k in ("tree_edges", "root", "edge_depths", "edge_cuts")}
    bare = F.released_tree_figure(SimpleNamespace(schema=release.schema, params=params))
    assert fig is not None and bare is not None
    assert fig.to_json() == bare.to_json()
    lines, labels, nodes = fig.data
    assert list(nodes.text) == [c["name"] for c in release.schema["columns"]]
    xy = np.column_stack([nodes.x, nodes.y])
    drawn = np.array(lines.x, dtype=float).reshape(-1, 3)[:, :2], np.array(lines.y, dtype=float).reshape(-1, 3)[:, :2]
    for k, (a, b) in enumerate(params["tree_edges"]):
        assert np.allclose([drawn[0][k], drawn[1][k]], [[xy[a, 0], xy[b, 0]], [xy[a, 1], xy[b, 1]]])
        ca, cb = params["edge_cuts"][k]
        assert labels.hovertext[k] == f"PMM depth {params['edge_depths'][k]}, {2 ** ca} x {2 ** cb} cells"
        assert labels.text[k] == labels.hovertext[k].replace(", ", "<br>")
        child = a if xy[a, 1] < xy[b, 1] else b  # each label under the column its edge leads down to
        assert labels.x[k] == xy[child, 0] and xy[child, 1] - 0.2 < labels.y[k] < xy[child, 1]
    # one label per column below the root, labels on one row a whole leaf spacing apart (the middles of sibling
    # edges are half of it apart, where the edges converge)
    spots = sorted(zip(labels.y, labels.x, strict=True))
    assert all(x2 - x1 >= 1 for (y1, x1), (y2, x2) in itertools.pairwise(spots) if y1 == y2)
    assert len(set(spots)) == len(params["tree_edges"]) == 3


def test_released_tree_figure_is_none_for_a_release_without_a_tree():
    assert F.released_tree_figure(_release("pmm").release()) is None


# -- small multiples of every column's marginal (issue 16, item 3) ---------------------------------------------
SMALL_SCHEMA = {"columns": [{"name": "age", "kind": "numeric", "lo": 17.0, "hi": 90.0, "integer": True},
                            {"name": "income", "kind": "numeric", "lo": 0.0, "hi": 1000.0},
                            {"name": "sex", "kind": "categorical", "categories": ["M", "F"]},
                            {"name": "kids", "kind": "numeric", "lo": 0.0, "hi": 5.0, "integer": True}]}


def small_frame(n: int, seed: int) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    return pd.DataFrame({"age": rng.integers(17, 91, n), "income": rng.uniform(0, 1000, n),
                         "sex": rng.choice(["F", "M"], n), "kids": rng.integers(0, 6, n)})


def test_marginal_panels_take_bins_and_order_from_the_public_schema_only():
    real, synthetic = small_frame(500, 0), small_frame(80, 1)
    panels = plot_data.marginal_panels(synthetic, SMALL_SCHEMA, real=real)
    other = plot_data.marginal_panels(small_frame(80, 2) * 1, SMALL_SCHEMA)  # other data: the same bins and labels
    for a, b in zip(panels, other, strict=True):
        assert a["labels"] == b["labels"] and (a["edges"] is None) == (b["edges"] is None)
        if a["edges"] is not None:
            np.testing.assert_array_equal(a["edges"], b["edges"])
    age, income, sex, kids = panels
    assert sex["labels"] == ["M", "F"] and sex["edges"] is None, "categories in the public order, not sorted"
    np.testing.assert_allclose(income["edges"], np.linspace(0, 1000, plot_data.MARGINAL_BINS + 1))
    assert kids["labels"] == ["0", "1", "2", "3", "4", "5"], "a small integer column: one bar per integer"
    widths = np.diff(age["edges"])
    assert np.all(widths[:-1] == widths[0]) and widths[-1] <= widths[0] and age["edges"][0] == 16.5
    assert list(age["shares"]) == [f"real ({plot_data.NOT_PRIVATE})", "synthetic"]
    for panel in panels:
        for share in panel["shares"].values():
            assert math.isclose(share.sum(), 1.0)
    counted = np.histogram(real["income"], bins=income["edges"])[0] / len(real)
    np.testing.assert_allclose(income["shares"][f"real ({plot_data.NOT_PRIVATE})"], counted)


def test_marginal_panels_clip_values_outside_the_range_and_skip_unknown_categories():
    frame = pd.DataFrame({"age": [5, 17, 200, 50], "income": [-10.0, 0.0, 5000.0, 500.0], "sex": ["M", "F", "x", "F"],
                          "kids": [0, 1, 2, 3]})
    age, income, sex, _ = plot_data.marginal_panels(frame, SMALL_SCHEMA)
    assert income["shares"]["synthetic"][0] == 0.5 and income["shares"]["synthetic"][-1] == 0.25
    assert age["shares"]["synthetic"][0] == 0.5 and age["shares"]["synthetic"][-1] == 0.25
    np.testing.assert_allclose(sex["shares"]["synthetic"], [0.25, 0.5])  # "x" is no public category
    many = {"columns": [{"name": "c", "kind": "categorical", "categories": [f"k{i}" for i in range(100)]}]}
    (long,) = plot_data.marginal_panels(pd.DataFrame({"c": ["k0", "k99"]}), many, max_categories=10)
    assert long["labels"] == [f"k{i}" for i in range(10)] and "first 10 of 100" in long["unit"]


def test_svg_marginals_are_one_titled_chart_per_column_in_the_columns_units():
    panels = plot_data.marginal_panels(small_frame(80, 1), SMALL_SCHEMA, real=small_frame(500, 0))
    svgs = svg_charts.svg_marginals(panels)
    titles = [re.search(r"<title>(.*?)</title>", s).group(1) for s in svgs]
    assert titles[:4] == ["age", "income", "sex", "kids"]
    assert "age: value (public range 17 to 90)" in svgs[0] and "income: value (public range 0 to 1000)" in svgs[1]
    assert all("share of rows" in s and ">synthetic<" in s and f"real ({plot_data.NOT_PRIVATE})" in s for s in svgs)
    assert svgs[2].count("<rect") > 2 and ">M<" in svgs[2] and ">F<" in svgs[2], "categories in public order"
    grid = svg_charts.svg_grid(svgs)
    assert grid.count("<svg") == len(svgs) and "flex-wrap" in grid and "<script" not in grid


def test_svg_marginals_in_release_mode_draw_the_release_alone():
    svgs = svg_charts.svg_marginals(plot_data.marginal_panels(small_frame(80, 1), SMALL_SCHEMA))
    assert all(">synthetic<" in s for s in svgs) and plot_data.NOT_PRIVATE not in "".join(svgs)


def test_svg_marginals_are_one_escaped_chart_per_column_without_scripts():
    schema = {"columns": [{"name": "<b>x</b>", "kind": "numeric", "lo": 0.0, "hi": 1.0},
                          {"name": "s", "kind": "categorical", "categories": ["<i>", "b"]}]}
    frame = pd.DataFrame({"<b>x</b>": [0.1, 0.9], "s": ["<i>", "b"]})
    svgs = svg_charts.svg_marginals(plot_data.marginal_panels(frame, schema, real=frame))
    assert len(svgs) == 2 and all(s.startswith("<svg") for s in svgs)
    assert "<b>" not in "".join(svgs) and "<i>" not in "".join(svgs) and "<script" not in "".join(svgs)


def test_the_folding_path_shows_its_direction_and_the_walk_has_one_axis_per_panel():
    frame = pd.DataFrame(two_blobs(300, 2, rng=0), columns=["x0", "x1"])
    diag = ps.synthesize(frame, "srw_tsp", 1.0, schema=ps.unit_schema(2), rng=0).diagnostics
    path = F.path_figure(diag["path"], net=diag.get("net"))
    ends = next(t for t in path.data if t.name == "path start and end")
    assert list(ends.text) == ["start", "end"], "the path's direction: where it starts and ends"
    walk = F.walk_figure(diag["walk"], signed=diag.get("signed"), projected=diag.get("projected"))
    axes = [walk.layout[name] for name in ("yaxis", "yaxis2")]
    assert all(a.overlaying is None and a.zeroline for a in axes), "one y axis per panel, zero marked"
    assert {t.yaxis for t in walk.data} == {"y", "y2"} and walk.layout.title.text


def test_partitions_and_paths_read_in_the_data_units_of_their_columns():
    """Issue 28, item 6: the axes name the columns with their public bounds and tick the data's values."""
    age = {"name": "age", "kind": "numeric", "lo": 18.0, "hi": 90.0, "integer": True}
    income = {"name": "income", "kind": "numeric", "lo": 0.0, "hi": 2e5, "atoms": [0.0]}
    job = {"name": "job", "kind": "categorical", "categories": ["a", "b", "c", "d"]}
    axis = F.unit_axis(age)
    assert axis["title"] == "age [18, 90]" and axis["ticktext"] == ["18", "36", "54", "72", "90"]
    assert axis["tickvals"] == [0.0, 0.25, 0.5, 0.75, 1.0]
    kinds = F.unit_axis(job)
    assert kinds["ticktext"] == ["a", "b", "c", "d"] and kinds["tickvals"] == [0.125, 0.375, 0.625, 0.875]
    spiked = F.unit_axis(income)
    assert spiked["ticktext"][0] == "0 (atom)" and spiked["tickvals"][0] < 0.5 <= spiked["tickvals"][1]
    cells = {"lo": np.array([[0.0, 0.0], [0.5, 0.5]]), "hi": np.array([[0.5, 0.5], [1.0, 1.0]]),
             "count": np.array([3.0, 4.0])}
    fig = F.partition_figure(cells, labels=["age", "job"], columns=[age, job])
    assert fig.layout.xaxis.title.text == "age [18, 90]" and list(fig.layout.yaxis.ticktext) == ["a", "b", "c", "d"]
    path = F.path_figure(np.array([[0.0, 0.0], [1.0, 1.0]]), labels=["age", "job"], columns=[age, job])
    assert path.layout.xaxis.title.text == "age [18, 90]"
    assert F.partition_figure(cells).layout.xaxis.title.text == "x0", "without columns: the unit cube as before"
