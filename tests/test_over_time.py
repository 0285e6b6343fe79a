"""The "Over time" page (AppTest, no browser), its figure builder and its evaluation (privsyn_core.evaluation)."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from streamlit.testing.v1 import AppTest

import privsyn_core as ps
from privsyn_core.errors import DataError, ParameterError
from privsyn_core.evaluation import stream_eval
from privsyn_core.reporting import figures as F
from privsyn_core.reporting.plot_data import NOT_PRIVATE

APP = str(Path(__file__).resolve().parents[1] / "app.py")


def _app() -> AppTest:
    at = AppTest.from_file(APP, default_timeout=120).run()
    return at.switch_page("pages/over_time.py").run()


def _problems(at: AppTest) -> list[str]:
    return [e.value for e in at.exception] + [e.value for e in at.error]


#: The lines of the figure: both streams spend epsilon once for every step, the re-run epsilon / T per step.
METHODS = ("stream (online PMM, depth for the plan)", "stream (online PMM, growing depth, no plan)",
           "naive re-run (PMM, eps/T)")


def test_the_page_draws_every_line_over_its_interval_and_explains_each_line():
    at = _app()
    assert not _problems(at)
    at.slider(key="w_time_steps").set_value(4).run()
    at.slider(key="w_time_seeds").set_value(2).run()
    next(b for b in at.button if b.label == "Release step by step").click().run()
    assert not _problems(at)
    fig = json.loads(at.get("plotly_chart")[0].proto.spec)
    lines = [t for t in fig["data"] if t.get("showlegend") is not False]
    bands = [t for t in fig["data"] if t.get("fill") == "toself"]
    assert [t["name"] for t in lines] == list(METHODS)
    assert [t["name"] for t in bands] == [f"{m}: 95% interval" for m in METHODS]
    assert any(NOT_PRIVATE in c.value for c in at.caption)
    legend = at.markdown[-1].value
    assert all(f"**{m}**" in legend for m in METHODS)  # one sentence per line, in the legend's words
    assert "deeper tree" in legend and "wrong plan cannot be corrected" in legend  # what the plan's depth costs
    captions = " ".join(c.value for c in at.caption)
    assert "mean W1 over 2 runs" in captions and "95% Student-t interval" in captions
    assert "Both lines" not in captions


def test_bounds_that_leave_rows_outside_clip_them_for_every_method_and_say_so():
    """Public bounds narrower than the data (as DP-estimated bounds may be) draw the chart, as a run on Synthesize
    does, with the count of clipped rows per column (teaching mode reads the raw rows)."""
    at = _app()
    entries = at.session_state["schema_entries"]
    at.session_state["schema_entries"] = {**entries, "x": {**entries["x"], "lo": 0.2, "hi": 0.8,
                                                           "source": "typed by the user"}}
    at.slider(key="w_time_steps").set_value(3).run()
    at.slider(key="w_time_seeds").set_value(2).run()
    next(b for b in at.button if b.label == "Release step by step").click().run()
    assert not _problems(at)
    assert at.get("plotly_chart")
    (warning,) = [w.value for w in at.warning if "clipped onto them for every method" in w.value]
    assert "x: " in warning and "y: " not in warning


def test_the_caption_says_where_points_are_means_over_fewer_runs():
    at = _app()
    runs = pd.DataFrame({"seed": [0, 1, 0, 1], "step": [1, 1, 2, 2], "method": [METHODS[0]] * 4,
                         "w1": [0.3, np.nan, 0.2, 0.25], "records": [5, 5, 10, 10]})
    at.session_state["over_time"] = stream_eval.summary(runs)
    at.run()
    assert not _problems(at)
    captions = " ".join(c.value for c in at.caption)
    assert "mean W1 over 2 runs" in captions and "At 1 of the 2 points some runs released no rows" in captions


def test_release_mode_shows_nothing_read_off_the_raw_data():
    at = AppTest.from_file(APP, default_timeout=120).run()
    at.toggle(key="w_release").set_value(True).run()
    at.switch_page("pages/over_time.py").run()
    assert not _problems(at)
    assert all(b.label != "Release step by step" for b in at.button)
    assert not at.get("plotly_chart") and not any(NOT_PRIVATE in c.value for c in at.caption)


def test_the_figure_has_one_line_per_method():
    table = pd.DataFrame({"step": [1, 2, 1, 2], "method": ["a", "a", "b", "b"], "w1": [0.3, 0.2, 0.4, 0.35]})
    fig = F.over_time_figure(table)
    assert [t.name for t in fig.data] == ["a", "b"]
    assert list(fig.data[0].y) == [0.3, 0.2] and "one run" in fig.layout.title.text


def test_the_figure_shades_each_interval_under_its_line():
    table = pd.DataFrame({"step": [2, 1, 1, 2], "method": ["a", "a", "b", "b"], "w1": [0.2, 0.3, 0.4, 0.35],
                          "low": [0.15, 0.25, 0.3, 0.3], "high": [0.25, 0.35, 0.5, 0.4]})
    fig = F.over_time_figure(table)
    assert [t.name for t in fig.data] == ["a: 95% interval", "a", "b: 95% interval", "b"]
    band, line = fig.data[0], fig.data[1]
    assert list(band.x) == [1, 2, 2, 1] and list(band.y) == [0.35, 0.25, 0.15, 0.25]  # high forward, low back
    assert band.fill == "toself" and band.showlegend is False and band.legendgroup == line.legendgroup == "a"
    assert list(line.y) == [0.3, 0.2] and "95% interval shaded" in fig.layout.title.text


def test_the_band_leaves_a_gap_where_a_step_has_no_interval_and_the_hover_counts_the_runs():
    table = pd.DataFrame({"step": [1, 2, 3, 4], "method": ["a"] * 4, "w1": [0.3, 0.2, 0.25, 0.2],
                          "low": [0.2, 0.1, np.nan, 0.1], "high": [0.4, 0.3, np.nan, 0.3],
                          "seeds": [3, 3, 1, 3], "runs": [3, 3, 3, 3]})
    band, line = F.over_time_figure(table).data
    assert list(band.x) == [1, 2, 2, 1, None, 4, 4] and list(band.y) == [0.4, 0.3, 0.1, 0.2, None, 0.3, 0.1]
    assert line.customdata.tolist() == [[3, 3], [3, 3], [1, 3], [3, 3]] and "of %{customdata[1]} runs" in \
        line.hovertemplate


def test_summary_gives_the_student_t_interval_of_the_mean_over_seeds():
    table = pd.DataFrame({"seed": [0, 1, 2, 0, 1, 2], "step": [1] * 6, "method": ["a"] * 3 + ["b"] * 3,
                          "w1": [0.2, 0.3, 0.4, 0.5, 0.5, 0.5], "records": [10] * 6})
    out = stream_eval.summary(table).set_index("method")
    half = 4.302652729911275 * 0.1 / math.sqrt(3)  # t_{0.975, 2} x sd / sqrt(3)
    assert out.loc["a", "w1"] == pytest.approx(0.3) and out.loc["a", "seeds"] == 3
    assert out.loc["a", "low"] == pytest.approx(0.3 - half) and out.loc["a", "high"] == pytest.approx(0.3 + half)
    assert out.loc["b", "low"] == pytest.approx(0.5) == out.loc["b", "high"]  # no spread, no width
    single = stream_eval.summary(table[table["seed"] == 0])
    assert single["low"].isna().all() and single["high"].isna().all()
    gap = stream_eval.summary(table.assign(w1=[0.2, np.nan, 0.4, 0.5, np.nan, np.nan])).set_index("method")
    assert gap.loc["a", "w1"] == pytest.approx(0.3) and gap.loc["a", ["seeds", "runs"]].tolist() == [2, 3]
    assert gap.loc["b", ["seeds", "runs"]].tolist() == [1, 3] and math.isnan(gap.loc["b", "low"])


def test_split_by_time_column_and_by_row_order():
    frame = pd.DataFrame({"x": np.arange(10.0), "month": [3, 1, 2, 1, 3, 2, 1, 2, 3, 1]})
    by_month = stream_eval.split_batches(frame, 5, "month")
    assert [len(b) for b in by_month] == [4, 3, 3] and all(list(b.columns) == ["x"] for b in by_month)
    assert by_month[0]["x"].tolist() == [1.0, 3.0, 6.0, 9.0]
    in_order = stream_eval.split_batches(frame[["x"]], 3)
    assert [len(b) for b in in_order] == [3, 3, 4]
    with pytest.raises(ParameterError):
        stream_eval.split_batches(frame, 0)
    with pytest.raises(DataError):
        stream_eval.split_batches(frame, 3, "day")


def test_over_time_spends_the_same_epsilon_both_ways():
    frame = pd.DataFrame({"x": np.random.default_rng(0).random(400)})
    schema = ps.Schema.from_dict({"columns": [{"name": "x", "lo": 0, "hi": 1}]})
    shares = []
    table = stream_eval.over_time(stream_eval.split_batches(frame, 4), schema, 1.0, seeds=2,
                                  progress=lambda share, text: shares.append(share))
    assert sorted(table["method"].unique()) == sorted(METHODS) == sorted(stream_eval.METHODS)
    assert table["records"].max() == 400 and table["w1"].between(0, 1).all()
    assert not math.isnan(table["w1"].iloc[-1])
    assert sorted(table["seed"].unique()) == [0, 1] and len(table) == 2 * 4 * 3
    assert shares == [k / 8 for k in range(1, 9)]  # after every run of every step
    assert (table.groupby(["method", "step"])["w1"].nunique() == 2).all()  # the seeds give different runs
    with pytest.raises(ParameterError):
        stream_eval.over_time(stream_eval.split_batches(frame, 4), schema, 1.0, seeds=0)


@pytest.mark.parametrize("memory", [True, False])
def test_the_streams_state_is_scratch_in_the_memory_folder_when_there_is_one(tmp_path, monkeypatch, memory):
    """With a memory folder the streams' state files are written there, and removed when the run ends; without one
    the run uses the system's temporary folder."""
    folder = tmp_path / "shm"
    if memory:
        folder.mkdir()
    monkeypatch.setattr(stream_eval, "MEMORY_FOLDER", folder)
    frame = pd.DataFrame({"x": np.random.default_rng(1).random(40)})
    schema = ps.Schema.from_dict({"columns": [{"name": "x", "lo": 0, "hi": 1}]})
    during: list[int] = []
    table = stream_eval.over_time(stream_eval.split_batches(frame, 2), schema, 1.0, seeds=1,
                                  progress=lambda share, text: during.append(len(list(folder.glob("*/*.json")))
                                                                             if memory else 0))
    assert len(table) == 2 * 3 and table["w1"].notna().all()
    assert during == ([2, 2] if memory else [0, 0])  # the fixed and the growing stream's states
    assert not memory or not any(folder.iterdir())


def test_rows_outside_the_public_bounds_are_clipped_for_every_method_not_refused():
    """Bounds that leave rows outside (as DP-estimated bounds may) serve the streams as they serve the re-run: every
    method releases at every step, and the real rows W1 is measured against are clipped the same way."""
    values = np.random.default_rng(2).random(200)
    values[::20] = 1.5  # 10 rows above the public upper bound
    schema = ps.Schema.from_dict({"columns": [{"name": "x", "lo": 0, "hi": 1}]})
    table = stream_eval.over_time(stream_eval.split_batches(pd.DataFrame({"x": values}), 2), schema, 1.0, seeds=1)
    assert sorted(table["method"].unique()) == sorted(METHODS) and len(table) == 2 * 3
    assert table["records"].max() == 200 and table["w1"].between(0, 1).all()
