"""AppTest (in-process, no browser) checks of the Streamlit app.

Every page renders on the default sample; an uploaded CSV with bounds runs every registered
mechanism and the Compare page shows its metric table and the synthetic points; release
mode hides every raw-data view; bad input shows one st.error line, never an exception.
"""

from __future__ import annotations

import base64
import json
import math
import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from streamlit.testing.v1 import AppTest

import privsyn_core as ps
from privsyn_core.data.datasets import two_blobs
from privsyn_core.data.identity import table_identity
from privsyn_core.data.io import read_csv
from privsyn_core.errors import ResourceError
from privsyn_core.reporting import comparison, figures as F, plot_data, svg_charts
from privsyn_core.reporting.plot_data import NOT_PRIVATE

PAGES = ["pages/data.py", "pages/synthesize.py", "pages/partitions.py", "pages/tsp.py", "pages/compare.py",
         "pages/tradeoff.py", "pages/learn.py"]
TIMEOUT = 60
APP = str(Path(__file__).resolve().parents[1] / "app.py")
W1 = comparison.info("w1").label  # the metric tables are indexed by plain names


def ledger_key(at: AppTest) -> str:
    """The app's current data in the ledger (every column chosen): an upload by the identity of its records, a
    bundled sample per session."""
    data = at.session_state["data"]
    identity = table_identity(read_csv(data["bytes"]))
    if not data.get("sample"):
        return identity
    return f"{identity}:session:{at.session_state['ledger_session']}"


def spends(at: AppTest) -> list[dict]:
    """The persistent ledger of the app's current data."""
    from pages._support import ledger

    return ledger.spends(ledger_key(at))


def new_app() -> AppTest:
    return AppTest.from_file(APP, default_timeout=TIMEOUT).run()


def problems(at: AppTest) -> list[str]:
    return [e.value for e in at.exception] + [e.value for e in at.error]


def figures(at: AppTest) -> list[dict]:
    return [json.loads(el.proto.spec) for el in at.get("plotly_chart")]


def svgs(at: AppTest) -> list[str]:
    """The inline SVG figures a page draws (Compare's scatter, marginals and correlations)."""
    return [m.value for m in at.markdown if m.value.startswith("<svg")]


def values(array) -> np.ndarray:
    """Plotly >= 6 sends numpy arrays as {"dtype", "bdata"} base64; lists stay lists."""
    if isinstance(array, dict) and "bdata" in array:
        return np.frombuffer(base64.b64decode(array["bdata"]), dtype=array["dtype"])
    return np.asarray(array, dtype=float)


def upload(at: AppTest, name: str, data: bytes) -> AppTest:
    at.switch_page("pages/data.py").run()
    at.radio(key="w_source").set_value("Upload a CSV").run()
    return at.file_uploader[0].set_value((name, data, "text/csv")).run()


def click(at: AppTest, label: str) -> AppTest:
    return next(b for b in at.button if b.label == label).click().run()


def csv_bytes(df: pd.DataFrame) -> bytes:
    return df.to_csv(index=False).encode()


def blobs(n: int = 300, seed: int = 0) -> pd.DataFrame:
    return pd.DataFrame(two_blobs(n, 2, rng=seed) * 10 - 2, columns=["x", "y"])


def type_bounds(at: AppTest, bounds: dict[str, tuple[float, float]]) -> AppTest:
    """What the schema editor stores when the user types public bounds."""
    at.session_state["schema_entries"] = {
        name: {"name": name, "kind": "numeric", "lo": lo, "hi": hi, "integer": False, "public": True,
               "source": "typed by the user"} for name, (lo, hi) in bounds.items()}
    return at.run()


def run_mechanism(at: AppTest, name: str, relation: str | None = None) -> AppTest:
    """Choose ``name`` and click Run; the relation is chosen explicitly (the page never changes it): ``relation``,
    or the mechanism's first when it is not calibrated for the one chosen."""
    at.switch_page("pages/synthesize.py").run()
    at.selectbox(key="w_mechanism").set_value(name).run()
    relations = ps.get_mechanism(name).neighbouring
    if relation is not None or at.radio(key="w_neighbouring").value not in relations:
        at.radio(key="w_neighbouring").set_value(relation or relations[0]).run()
    run = next(b for b in at.button if b.label == "Run")
    return at if run.disabled else run.click().run()


def choose_columns(at: AppTest, names: list[str]) -> AppTest:
    at.switch_page("pages/data.py").run()
    return at.multiselect(key="w_columns").set_value(names).run()


# -- every page on the default sample ------------------------------------------------------------
@pytest.fixture(scope="module")
def default_app() -> AppTest:
    return new_app()


@pytest.mark.parametrize("page", PAGES)
def test_every_page_renders_on_the_default_sample(default_app, page):
    default_app.switch_page(page).run()
    assert not problems(default_app), f"{page}: {problems(default_app)}"
    assert default_app.title[0].value


def test_learn_page_draws_the_noise_scales_pmm_spends_its_budget_with():
    """The Learn page's bars are PMM's own plan: a PMM release at the same depth, dimension and epsilon spends
    exactly 1/sigma_j on level j (add/remove), and the bars add up to the whole epsilon."""
    at = new_app()
    at.switch_page("pages/learn.py").run()
    at.slider(key="learn_depth").set_value(7).run()
    at.slider(key="learn_dim").set_value(3).run()
    at.select_slider(key="learn_tree_eps").set_value(0.5).run()
    (schedule,) = [f for f in figures(at) if f["layout"]["title"]["text"] == "noise scale per tree level"]
    sigmas = values(schedule["data"][0]["y"])
    frame = pd.DataFrame(two_blobs(200, 3, rng=0), columns=["x0", "x1", "x2"])
    release = ps.synthesize(frame, "pmm", 0.5, schema=ps.unit_schema(3), rng=0, depth=7, neighbouring="add_remove")
    assert [spent for _, spent in release.ledger] == pytest.approx(1 / sigmas, rel=1e-12)
    assert math.fsum(1 / sigmas) == pytest.approx(0.5, rel=1e-12)


def test_default_opens_on_a_sample_with_a_public_schema_and_runs_immediately():
    at = new_app()
    assert at.session_state["data"]["sample"] == "blobs"
    run_mechanism(at, "pmm" if "pmm" in [s.name for s in ps.list_mechanisms()] else "dp_histogram")
    assert not problems(at)
    assert at.session_state["result"].dp_valid
    assert [m.value for m in at.metric if m.label == "privacy guarantee"] == ["holds"]


# -- upload, bounds, every mechanism ---------------------------------------------------------------
@pytest.fixture(scope="module")
def uploaded_app() -> AppTest:
    at = new_app()
    table = blobs()
    table[list(BOOLEAN_COLUMNS)] = (table[["x", "y"]] > 3).astype(int).to_numpy()
    upload(at, "mine.csv", csv_bytes(table))
    assert not at.exception
    at = type_bounds(at, {"x": (-2.0, 8.0), "y": (-2.0, 8.0)})
    at.session_state["schema_entries"].update({  # 0/1 columns declared integer in [0, 1]
        name: {"name": name, "kind": "numeric", "lo": 0.0, "hi": 1.0, "integer": True, "public": True,
               "source": "typed by the user"} for name in BOOLEAN_COLUMNS})
    return at.run()


BOOLEAN_COLUMNS = ("x_high", "y_high")


def columns_for(spec: ps.MechanismSpec) -> list[str]:
    """The upload's columns a mechanism runs on, from what its spec declares (as tests/test_api.py derives them):
    the two 0/1 columns for Boolean data, else ``x`` and ``y`` up to its ``max_dim``."""
    if spec.data_kind == "boolean":
        return list(BOOLEAN_COLUMNS)
    return ["x", "y"][:spec.max_dim or 2]


@pytest.mark.parametrize("mechanism", [s.name for s in ps.list_mechanisms()])
def test_each_registered_mechanism_runs_and_compare_shows_metrics_and_points(uploaded_app, mechanism):
    spec = ps.get_mechanism(mechanism)
    choose_columns(uploaded_app, columns_for(spec))
    at = run_mechanism(uploaded_app, mechanism)
    assert not at.exception, at.exception
    assert not [e for e in at.error if "dp_valid" not in e.value and "NOT differentially" not in e.value], \
        problems(at)
    result = at.session_state["result"]
    assert result.mechanism == mechanism

    at.switch_page("pages/compare.py").run()
    assert not at.exception, at.exception
    table = at.table[0].value
    assert W1 in table.index
    assert np.isfinite(float(table.loc[W1, "value"]))
    real_panel, synthetic_panel = [m for m in svgs(at) if "h0" in m][:2]  # side by side, in the columns' units
    assert f"synthetic: {len(result.data):,} rows" in synthetic_panel and "real: 300 rows" in real_panel
    assert synthetic_panel.count("h0") == min(len(result.data), svg_charts.SVG_MAX_POINTS)
    assert real_panel.count("h0") == 300
    low, high = (0, 1) if spec.data_kind == "boolean" else (-2, 8)  # the first column's public bounds
    ticks = [float(t) for t in re.findall(r'y="369" text-anchor="middle">([-0-9.e+]+)<', real_panel)]
    assert len(ticks) >= 2 and low - 0.05 * (high - low) < min(ticks) < max(ticks) < high + 0.05 * (high - low), \
        "x ticks in the first column's units, on its public range"
    for page in ("pages/partitions.py", "pages/tsp.py"):
        at.switch_page(page).run()
        assert not at.exception, f"{page} after {mechanism}: {at.exception}"


def test_partition_chart_draws_every_cell_as_one_trace_per_colour(uploaded_app):
    at = run_mechanism(uploaded_app, "dp_histogram")
    cells = at.session_state["result"].diagnostics["cells"]
    at.switch_page("pages/partitions.py").run()
    fig = figures(at)[0]
    fills = [t for t in fig["data"] if t.get("fill") == "toself"]
    drawn = sum(int(np.isnan(values(t["x"])).sum()) for t in fills)
    boxes = F.project_cells(cells, (0, 1), "count")[0]  # the module's shared app may hold more than 2 columns
    assert drawn == len(boxes) and len(boxes) > 1
    assert not fig["layout"].get("shapes")


def test_dp_bounds_spend_epsilon_in_the_session_ledger():
    at = new_app()
    upload(at, "mine.csv", csv_bytes(blobs()))
    at.select_slider(key="w_bounds_eps").set_value(2.0).run()
    click(at, "Estimate DP bounds")
    assert not problems(at)
    entries = at.session_state["schema_entries"]
    assert all(entries[c]["public"] and entries[c]["lo"] < entries[c]["hi"] for c in ("x", "y"))
    ledger = spends(at)
    assert [e["mechanism"] for e in ledger] == ["dp_bounds"] and ledger[0]["epsilon"] == 2.0


def test_dp_bounds_never_overwrite_typed_bounds_and_show_the_clipped_share_in_teaching_only():
    at = new_app()
    upload(at, "mine.csv", csv_bytes(blobs()))
    type_bounds(at, {"x": (-2.0, 8.0)})
    click(at, "Estimate DP bounds")
    assert not problems(at)
    entries = at.session_state["schema_entries"]
    assert (entries["x"]["lo"], entries["x"]["hi"], entries["x"]["source"]) == (-2.0, 8.0, "typed by the user")
    assert entries["y"]["source"].startswith("DP bounds") and [e["mechanism"] for e in spends(at)] == ["dp_bounds"]
    assert any("left as typed" in w.value for w in at.warning)
    assert any("Rows outside the DP bounds" in c.value and "y:" in c.value for c in at.caption)
    at.toggle(key="w_release").set_value(True).run()
    assert not any("Rows outside the DP bounds" in c.value for c in at.caption)


def test_bounds_proposed_from_the_data_flag_dp_valid_false():
    at = new_app()
    upload(at, "mine.csv", csv_bytes(blobs()))
    click(at, "Propose from the data")
    assert any("dp_valid = False" in e.value for e in at.error)
    run_mechanism(at, "dp_histogram")
    assert at.session_state["result"].dp_valid is False
    assert any("dp_valid = False" in e.value for e in at.error)


def test_same_seed_is_one_release_and_a_new_seed_another():
    at = new_app()
    run_mechanism(at, "dp_histogram")
    click(at, "Run")
    assert len(spends(at)) == 1
    at.number_input(key="w_seed").set_value(7).run()
    click(at, "Run")
    assert len(spends(at)) == 2
    assert at.sidebar.metric[0].value == "2"


def test_tradeoff_sweep_draws_log_log_curves_with_rates():
    at = new_app()
    at.switch_page("pages/tradeoff.py").run()
    at.multiselect(key="w_trade_mech").set_value(["dp_histogram"]).run()
    at.multiselect(key="w_trade_eps").set_value([0.5, 5.0]).run()
    at.slider(key="w_trade_seeds").set_value(1).run()
    click(at, "Run the sweep")
    assert not problems(at)
    fig = figures(at)[0]
    assert fig["layout"]["xaxis"]["type"] == "log" and fig["layout"]["yaxis"]["type"] == "log"
    names = [t["name"] for t in fig["data"]]
    assert "dp_histogram (mean W1)" in names and "dp_histogram theoretical rate" in names


# -- release mode ------------------------------------------------------------------------------------
def test_release_mode_hides_raw_views():
    at = new_app()
    at.toggle(key="w_release").set_value(True).run()
    assert not [e for e in at.expander if "Preview" in e.label], "release mode must not preview the data"
    run_mechanism(at, "dp_histogram")
    assert not problems(at)
    assert at.session_state["result"].params["seed"] is None  # secure generator, no seed
    at.switch_page("pages/compare.py").run()
    assert not at.table, "release mode must not show metrics computed on raw data"
    for fig in figures(at):
        assert all(not t["name"].startswith("real") for t in fig["data"])
    at.switch_page("pages/partitions.py").run()
    assert not [r for r in at.radio if r.key == "w_part_colour"], "no true counts to colour by in release mode"
    assert all("data" not in t["name"] for t in figures(at)[0]["data"])
    at.switch_page("pages/tradeoff.py").run()
    assert not at.button or all(b.label != "Run the sweep" for b in at.button)
    assert not any(NOT_PRIVATE in c.value for c in at.caption)


def test_teaching_mode_labels_raw_views_and_offers_tstr():
    at = new_app()
    run_mechanism(at, "dp_histogram")
    at.switch_page("pages/compare.py").run()
    assert any(NOT_PRIVATE in c.value for c in at.caption)
    table = at.table[0].value
    assert {comparison.info(m).label for m in ("w1", "mmd", "marginal_tvd_1way", "marginal_tvd_2way",
                                               "correlation_gap")} <= set(table.index)
    assert table.loc[W1, "better"] == "lower is better" and np.isfinite(float(table.loc[W1, "real-vs-real floor"]))
    low, high = map(float, table.loc[W1, "95% interval"].strip("[]").split(","))
    assert low <= float(table.loc[W1, "value"]) <= high
    at.selectbox(key="w_cmp_target").set_value("y").run()
    assert not problems(at)
    tstr = at.table[0].value.loc[comparison.info("tstr").label]
    assert tstr["better"] == "higher is better" and tstr["real-vs-real floor"] != "-"  # the train-on-real reference
    low, high = map(float, tstr["95% interval"].strip("[]").split(","))  # over the held-out rows
    assert low <= float(tstr["value"]) <= high
    low, high = map(float, tstr["floor interval"].strip("[]").split(","))
    assert low <= float(tstr["real-vs-real floor"]) <= high


# -- bad input never shows a traceback ----------------------------------------------------------------
BAD_FILES = {
    "non-UTF-8": b"x,y\n\xff\xfe,1\n",
    "empty": b"",
    "header only": b"x,y\n",
    "duplicate names": b"x,x\n1,2\n3,4\n",
}


def test_bad_files_show_an_error_and_clear_the_previous_data_and_results():
    for kind, content in BAD_FILES.items():
        at = new_app()
        run_mechanism(at, "dp_histogram")
        upload(at, f"{kind}.csv", content)
        assert not at.exception, f"{kind}: {at.exception}"
        assert at.error, f"{kind}: no error shown"
        assert at.session_state["data"] is None and at.session_state["result"] is None, kind
        assert not [s for s in at.success if "Schema complete" in s.value], f"{kind}: no green schema for no data"
        assert any("could not be read" in c.value for c in at.sidebar.caption), kind
        for page in PAGES:
            at.switch_page(page).run()
            assert not at.exception, f"{kind}, {page}: {at.exception}"
            assert not at.get("download_button"), f"{kind}, {page}: downloads of the previous data"


def test_the_sidebar_names_the_data_just_uploaded_and_a_failed_run_leaves_no_status_or_downloads(monkeypatch):
    at = new_app()
    run_mechanism(at, "dp_histogram")
    upload(at, "fresh.csv", csv_bytes(blobs()))
    assert any("fresh.csv" in c.value for c in at.sidebar.caption)
    type_bounds(at, {"x": (-2.0, 8.0), "y": (-2.0, 8.0)})
    run_mechanism(at, "dp_histogram")
    assert at.get("download_button")
    at.selectbox(key="w_param_dp_histogram_bins_mode").set_value("number").run()
    bins = at.number_input(key="w_param_dp_histogram_bins")
    assert bins.max == 1414, "the widget stops at the mechanism's limit (2e6 cells in d = 2)"


    def refused(*args, **kwargs):
        raise ResourceError("refused for the test: use fewer bins")

    monkeypatch.setattr(ps, "synthesize", refused)  # the page runs in this process
    bins.set_value(bins.max).run()
    click(at, "Run")
    assert any("fewer bins" in e.value for e in at.error)
    assert not at.get("download_button") and at.session_state["result"] is None
    assert not [s for s in at.get("expandable") if "Running" in str(s.proto)]
    assert not [c for c in at.caption if "Running" in c.value]


BAD_VALUES = [
    (b"x;y\n1;2\n3;4\n5;6\n", None),  # a semicolon file is sniffed and reads fine
    (b"x,y\n1,2\n", "single row"),
    (b"x,y\n1,2\nnan,4\n5,6\n", "missing"),
    (b"x,y\n1,2\ninf,4\n5,6\n", "infinite"),
    (b"x,y\n1,2\nabc,4\n5,6\n", "non-numeric"),
    (b"x,y\n1e308,2\n-1e308,4\n5,6\n", "overflows"),
]


def test_bad_values_show_an_error_when_run():
    at = new_app()
    for i, (content, problem) in enumerate(BAD_VALUES):
        upload(at, f"values{i}.csv", content)
        assert not at.exception, at.exception
        messages = [e.value for e in at.error] + [w.value for w in at.warning]
        type_bounds(at, {"x": (-1e308, 1e308) if problem == "overflows" else (0.0, 10.0), "y": (0.0, 10.0)})
        run_mechanism(at, "dp_histogram")
        assert not at.exception, f"{problem}: {at.exception}"
        messages += [e.value for e in at.error] + [w.value for w in at.warning]
        if problem is None:
            assert not at.error and at.session_state["result"] is not None
        else:
            assert any(problem in m for m in messages), (problem, messages)


def test_a_mechanism_that_cannot_run_shows_its_message():
    at = new_app()
    at.switch_page("pages/synthesize.py").run()
    at.selectbox(key="w_mechanism").set_value("psmm").run()
    at.selectbox(key="w_param_psmm_lp").set_value("dense").run()
    at.selectbox(key="w_param_psmm_cells_per_axis_mode").set_value("number").run()
    cells = at.number_input(key="w_param_psmm_cells_per_axis")
    cells.set_value(cells.max).run()  # within the widget's limit (the king LP's), too large for the dense LP
    click(at, "Run")
    assert not at.exception
    assert any("lp='king'" in e.value for e in at.error)


def test_several_mechanisms_side_by_side_at_the_same_epsilon():
    at = new_app()
    run_mechanism(at, "dp_histogram", relation="replace")  # laplace_points is calibrated for replace-one only
    at.switch_page("pages/compare.py").run()
    at.multiselect(key="w_cmp_many").set_value(["dp_histogram", "laplace_points", "kd_grid"]).run()
    click(at, "Run and compare")
    assert not problems(at)
    wide = at.table[2].value
    assert list(wide.columns) == ["better", "dp_histogram", "laplace_points", "kd_grid", "real-vs-real floor"]
    assert re.fullmatch(r"\S+ \[\S+, \S+\]", wide.loc[W1, "laplace_points"])  # value [interval]
    assert [e["mechanism"] for e in spends(at)] == ["dp_histogram", "laplace_points", "kd_grid"]
    runs = at.table[1].value
    assert list(runs.index) == ["dp_histogram", "laplace_points", "kd_grid"]
    assert set(runs["privacy"]) == {"private"} and set(runs["dp_valid"]) == {True}
    assert {"epsilon", "neighbours differ by"} <= set(runs.columns)
    labels = {b.label for b in at.get("download_button")}
    assert {"CSV", "Manifest", "JSON report", "Download the comparison report (HTML, every run)"} <= labels
    assert sum(b.label == "CSV" for b in at.get("download_button")) == 3  # every run, not only the last
    assert sum(b.label == "Manifest" for b in at.get("download_button")) == 3


def test_the_synthesize_page_says_what_to_do_on_itself_and_names_missing_domains_in_words():
    """Issue 28, item 9: no "run a mechanism on the Synthesize page" on that page; no Python list in the message."""
    at = new_app()
    at.switch_page("pages/synthesize.py").run()
    assert any("choose a mechanism above and click **Run**" in i.value for i in at.info)
    upload(at, "mine.csv", csv_bytes(blobs()))
    at.switch_page("pages/synthesize.py").run()
    shown = " ".join([e.value for e in at.error] + [w.value for w in at.warning] + [c.value for c in at.caption])
    assert "['" not in shown


def test_an_identifier_column_is_not_pre_selected_and_the_reason_is_shown():
    """Issue 28, item 5: text with nearly as many distinct values as rows (names, ids) starts left out."""
    table = blobs()
    table["person"] = [f"person {i}" for i in range(len(table))]
    table["group"] = np.where(table["x"] > 3, "a", "b")
    at = upload(new_app(), "people.csv", csv_bytes(table))
    assert at.multiselect(key="w_columns").value == ["x", "y", "group"]
    assert any("Left out at first: person" in c.value for c in at.caption)


def test_the_downloads_follow_the_run_chosen_among_the_compared_ones():
    """Issue 28, item 7: the full downloads (CSV, reports, code) are the first ranked run's, or the chosen one's."""
    at = new_app()
    run_mechanism(at, "dp_histogram")
    at.switch_page("pages/compare.py").run()
    at.multiselect(key="w_cmp_many").set_value(["dp_histogram", "kd_grid"]).run()
    click(at, "Run and compare")
    pick = at.selectbox(key="w_cmp_pick")
    assert set(pick.options) == {"dp_histogram", "kd_grid"}
    ranked_first = at.session_state["compare"]["runs"][pick.value]["result"]
    views = at.session_state["_run_views"]
    assert list(views.values())[-1]["result"] is ranked_first
    other = next(n for n in pick.options if n != pick.value)
    at.selectbox(key="w_cmp_pick").set_value(other).run()
    assert list(at.session_state["_run_views"].values())[-1]["result"].mechanism == other


def test_a_non_private_run_is_marked_in_the_comparison():
    at = new_app()
    run_mechanism(at, "dp_histogram")
    at.switch_page("pages/compare.py").run()
    at.multiselect(key="w_cmp_many").set_value(["dp_histogram", "bootstrap"]).run()
    click(at, "Run and compare")
    runs = at.table[1].value
    assert runs.loc["bootstrap", "privacy"] == "NOT PRIVATE" and runs.loc["bootstrap", "guarantee"].startswith("none")
    chart = figures(at)[-1]["data"]
    assert list(chart[0]["x"]) == ["dp_histogram"]  # only private runs are ranked
    assert chart[1]["x"] == ["bootstrap (NOT private)"] and "not ranked" in chart[1]["name"]


@pytest.mark.parametrize("mechanism", [s.name for s in ps.list_mechanisms()])
def test_synthesize_page_warns_exactly_for_mechanisms_with_floating_point_exposure(mechanism):
    at = new_app()
    spec = ps.get_mechanism(mechanism)
    if spec.max_dim == 1:  # offered on one column only
        choose_columns(at, ["x"])
    if spec.data_kind == "boolean":  # offered only on columns declared Boolean
        at.session_state["schema_entries"] = {
            name: {"name": name, "kind": "numeric", "lo": 0.0, "hi": 1.0, "integer": True, "public": True,
                   "source": "typed by the user"} for name in ("x", "y")}
    at.switch_page("pages/synthesize.py").run()
    at.selectbox(key="w_mechanism").set_value(mechanism).run()
    shown = any("Floating-point exposure" in w.value for w in at.warning)
    assert not at.exception and shown == bool(spec.floating_point_exposure)


@pytest.mark.parametrize("release", [False, True])
def test_rows_clipped_into_the_bounds_are_counted_in_teaching_mode_only(release):
    df = blobs(300)
    at = upload(new_app(), "blobs.csv", csv_bytes(df))
    at = type_bounds(at, {"x": (0.0, 8.0), "y": (-2.0, 8.0)})
    if release:
        at.toggle(key="w_release").set_value(True).run()
    run_mechanism(at, "dp_histogram")
    expected = int(((df["x"] < 0.0) | (df["x"] > 8.0)).sum())
    assert not problems(at) and at.session_state["result"].clipped["x"] == expected > 0
    shown = [w.value for w in at.warning if "were clipped" in w.value]
    if release:
        assert not shown, "release mode must not show counts of raw rows"
    else:
        assert len(shown) == 1 and f"x: {expected:,} of 300" in shown[0]


# -- the ledger as a budget (issue 16, item 2) ---------------------------------------------------------
def test_browsing_mechanisms_never_spends_and_only_a_changed_setting_re_runs():
    at = new_app()
    run_mechanism(at, "dp_histogram")
    assert at.toggle(key="w_live").value, "live re-runs are on for the small default sample"
    for name in ("laplace_points", "kd_grid", "bootstrap", "psmm", "dp_histogram"):
        at.selectbox(key="w_mechanism").set_value(name).run()
    assert [e["mechanism"] for e in spends(at)] == ["dp_histogram"]
    at.select_slider(key="w_epsilon").set_value(2.0).run()  # a setting of the mechanism last run
    assert [e["epsilon"] for e in spends(at)] == [1.0, 2.0]


def test_non_private_runs_are_kept_apart_and_never_make_the_total_infinite():
    at = new_app()
    run_mechanism(at, "dp_histogram")
    run_mechanism(at, "bootstrap")
    assert not at.exception
    values = [m.value for m in at.sidebar.metric]
    assert values == ["1"], values
    assert any("Not private: 1 run" in e.label for e in at.sidebar.expander)


def reload_of(at: AppTest) -> AppTest:
    """A browser reload of ``at``'s page: a new session whose URL names the same upload."""
    reloaded = AppTest.from_file(APP, default_timeout=TIMEOUT)
    reloaded.query_params["data"] = at.session_state["data"]["token"]
    return reloaded.run()


def test_the_ledger_of_uploaded_data_survives_a_reload_and_is_per_dataset_and_per_relation():
    at = new_app()
    upload(at, "mine.csv", csv_bytes(blobs()))
    type_bounds(at, {"x": (-2.0, 8.0), "y": (-2.0, 8.0)})
    run_mechanism(at, "dp_histogram", relation="replace")
    at.radio(key="w_neighbouring").set_value("add_remove").run()
    click(at, "Run")
    labels = [m.label for m in at.sidebar.metric]
    assert sorted(labels) == ["Total epsilon (add/remove)", "Total epsilon (replace)"]
    reloaded = reload_of(at)  # a browser reload: a new session on the same server
    assert len(spends(reloaded)) == 2 and len(reloaded.sidebar.metric) == 2
    upload(reloaded, "other.csv", csv_bytes(blobs(seed=1)))
    assert not spends(reloaded) and not reloaded.sidebar.metric
    assert any("No private release" in c.value for c in reloaded.sidebar.caption)


def test_a_bundled_samples_ledger_is_this_sessions_own():
    """A classroom of sessions on one sample does not share one list (issue 25, item 7)."""
    first = run_mechanism(new_app(), "dp_histogram")
    assert len(spends(first)) == 1
    second = new_app()
    assert not spends(second) and not second.sidebar.metric
    assert second.session_state["data"]["sha256"] == first.session_state["data"]["sha256"]


def test_a_release_over_the_budget_is_refused():
    at = new_app()
    budget = next(n for n in at.sidebar.number_input if n.label.startswith("Budget"))
    budget.set_value(1.5).run()
    run_mechanism(at, "dp_histogram")
    assert len(spends(at)) == 1
    at.toggle(key="w_live").set_value(False).run()
    at.number_input(key="w_seed").set_value(9).run()
    click(at, "Run")
    assert any("exceed its budget of 1.5" in e.value for e in at.error)
    assert len(spends(at)) == 1
    assert at.session_state["result"] is not None, "a refused run keeps the last good result on screen"
    assert any("Showing the last run" in c.value for c in at.caption)


# -- synthetic tables that look like the input (issue 16, item 6) -----------------------------------------
def test_synthetic_tables_have_integers_declared_decimals_and_no_negative_zero():
    from pages._support import output

    data = pd.DataFrame({"age": [17.4, 89.6], "score": [-0.00001, 0.123456789], "x": [-1e-9, 3.14159265]})
    schema = {"columns": [{"name": "age", "kind": "numeric", "lo": 17, "hi": 90, "integer": True},
                          {"name": "score", "kind": "numeric", "lo": 0, "hi": 1},
                          {"name": "x", "kind": "numeric", "lo": -10, "hi": 10}]}
    out = output.shaped(data, schema, {"x": 1})
    assert out["age"].dtype == np.int64 and out["age"].tolist() == [17, 90]
    assert out["score"].tolist() == [0.0, 0.123]  # 4 significant digits of the range [0, 1] (1.000)
    assert out["x"].tolist() == [0.0, 3.1]  # declared decimals
    text = out.to_csv(index=False)
    assert "-0" not in text and "e-" not in text
    assert output.default_decimals(0, 250_000) == 0 and output.default_decimals(17, 90) == 2


def test_the_synthetic_csv_follows_the_schema_and_the_row_count_is_explained():
    at = new_app()
    run_mechanism(at, "pmm")
    names = [c["name"] for c in at.session_state["result"].schema["columns"]]
    table = next(d.value for d in at.dataframe if list(d.value.columns) == names)
    assert all(len(f"{v}".split(".")[-1]) <= 4 for v in table[names[0]])
    assert any("noisy, private count" in c.value for c in at.caption), "pmm's default relation is add_remove"


def test_partitions_open_at_a_readable_level():
    at = new_app()
    run_mechanism(at, "pmm")
    at.switch_page("pages/partitions.py").run()
    levels = at.session_state["result"].diagnostics["levels"]
    slider = next(s for s in at.slider if s.key and s.key.startswith("w_part_level_"))
    assert len(levels[slider.value]["lo"]) <= 1024
    assert slider.value == len(levels) - 1 or len(levels[slider.value + 1]["lo"]) > 1024
    assert any(f"Level {slider.value}:" in c.value for c in at.caption)


# -- the stakeholder report (issue 16, item 5) ---------------------------------------------------------------
def test_stakeholder_report_is_small_plain_and_release_only_without_raw_inputs():
    from privsyn_core.reporting import stakeholder

    rng = np.random.default_rng(0)
    n = 10_000
    df = pd.DataFrame({f"v{i}": rng.uniform(0, 100, n) for i in range(7)})
    df["sex"] = rng.choice(["F", "M"], n)
    df["region"] = rng.choice(["north", "south", "east"], n)
    schema = {"columns": [{"name": f"v{i}", "kind": "numeric", "lo": 0.0, "hi": 100.0} for i in range(7)]
              + [{"name": "sex", "kind": "categorical", "categories": ["M", "F"]},
                 {"name": "region", "kind": "categorical", "categories": ["north", "south", "east"]}]}
    result = ps.synthesize(df, "dp_histogram", 1.0, schema=schema, neighbouring="add_remove", rng=0,
                           bins=2)
    release = result.release()
    html = stakeholder.build(release=release, data_name="people.csv", totals={"add_remove": 1.5}, budget=3.0)
    assert len(html.encode()) < 2**20 and "<script" not in html
    first = html.split("</div>")[0]
    assert "epsilon = 1 for this release" in first and "1.5</b> in total" in first and "budget 3" in first
    assert "adding or removing one record" in first and "factor of e<sup>epsilon</sup>" in first
    assert f"{n:,}" not in html and str(n) not in html, "release mode: no exact n in the report"
    assert html.index(">M<") < html.index(">F<"), "categories in their public order"
    teaching = stakeholder.build(release=release, data_name="people.csv", totals={}, budget=None, real=df)
    assert f"real ({plot_data.NOT_PRIVATE})" in teaching and plot_data.NOT_PRIVATE not in html
    assert html.count("<svg") == len(schema["columns"]), "every column's marginal, in the columns' own units"
    assert "public range 0 to 100" in html and plot_data.MARGINALS_CAPTION in html and plot_data.MARGINALS_NOTE in html
    bootstrap = ps.synthesize(df, "bootstrap", 1.0, schema=schema, rng=0).release()
    assert "NOT a private release" in stakeholder.build(release=bootstrap, data_name="x", totals={}, budget=None)


def test_stakeholder_report_stays_under_1_mb_at_the_widest_table_it_draws():
    """The worst case of the small multiples: more columns than are drawn, each with the most bars drawn, real and
    synthetic, plus a metrics table; the report must still be under 1 MB (issue 16, item 5)."""
    from privsyn_core.reporting import stakeholder

    rng = np.random.default_rng(0)
    n, k, wide = 5000, 200, plot_data.MARGINAL_MAX_COLUMNS + 4
    categories = [f"category number {i}" for i in range(k)]
    df = pd.DataFrame({f"c{i}": rng.choice(categories, n) for i in range(wide // 2)}
                      | {f"v{i}": rng.uniform(0, 1, n) for i in range(wide - wide // 2)})
    schema = {"columns": [{"name": f"c{i}", "kind": "categorical", "categories": categories} for i in range(wide // 2)]
              + [{"name": f"v{i}", "kind": "numeric", "lo": 0.0, "hi": 1.0} for i in range(wide - wide // 2)]}
    release = ps.synthesize(df, "bootstrap", 1.0, schema=schema, rng=0).release()
    html = stakeholder.build(release=release, data_name="wide.csv", totals={}, budget=None, real=df, evaluation={})
    size = len(html.encode())
    print(f"\n[report] {wide} columns ({k} categories each for half): {size / 2**10:.0f} KiB")
    assert size < 2**20 and "<script" not in html
    assert html.count("<svg") == plot_data.MARGINAL_MAX_COLUMNS and "4 more are not" in html
    assert f"the first {plot_data.MARGINAL_MAX_CATEGORIES} of {k} in public order" in html


# -- Compare: every column's marginal at once (issue 16, item 3) ----------------------------------------------
def marginals_svgs(at: AppTest) -> list[str]:
    found = [m.value for m in at.markdown if m.value.startswith("<div") and "<svg" in m.value]
    assert len(found) == 1, "Compare draws one grid of small multiples"
    return found[0].split("<svg")[1:]


@pytest.mark.parametrize("release", [False, True])
def test_compare_draws_every_columns_marginal_real_beside_synthetic_only_in_teaching_mode(release):
    at = new_app()
    if release:
        at.toggle(key="w_release").set_value(True).run()
    run_mechanism(at, "dp_histogram")
    at.switch_page("pages/compare.py").run()
    assert not problems(at)
    charts = marginals_svgs(at)
    schema = at.session_state["result"].schema
    assert len(charts) == len(schema["columns"]), "one chart per column"
    assert [c.split("<title>")[1].split("</title>")[0] for c in charts] == [c["name"] for c in schema["columns"]]
    assert all((f"real ({NOT_PRIVATE})" in c) != release for c in charts), "the real data in teaching mode only"
    first = schema["columns"][0]
    assert f"{first['name']}: value (public range {first['lo']:g} to {first['hi']:g})" in charts[0]
    assert any(c.value.startswith(plot_data.MARGINALS_CAPTION) for c in at.caption)
    assert any(plot_data.MARGINALS_NOTE in c.value for c in at.caption)


def test_the_ledger_is_read_by_its_tail_and_totals_stay_exact(tmp_path, monkeypatch):
    """A page reads the last spends, the counts and the totals, never every row: the ledger grows with every run."""
    from pages._support import ledger
    from privsyn_core.engine.release import reserve_release

    monkeypatch.setenv(ledger.DATA_DIR_ENV, str(tmp_path))
    for i in range(30):
        reserve_release(ledger.store(), "d", 0.1, relation="replace", mechanism="pmm", label=f"run {i}",
                        private=i % 3 != 0).confirm()
    assert ledger.count("d") == 30 and ledger.count("d", private=True) == 20 and ledger.count("d", private=False) == 10
    tail = ledger.spends("d", last=8, private=True)
    assert [e["label"] for e in tail] == [f"run {i}" for i in range(30) if i % 3][-8:], "the latest, oldest first"
    assert [e["label"] for e in ledger.spends("d", last=3)] == ["run 27", "run 28", "run 29"]
    assert ledger.totals("d") == {"replace": math.fsum([0.1] * 20)}
    assert len(ledger.spends("d")) == 30 and ledger.count("other") == 0


def test_a_run_and_its_reruns_read_the_ledger_by_its_tail_only(monkeypatch):
    """The page's JSON report lists the latest spends: no rerun reads every spend (the download does, on a click)."""
    from pages._support import ledger

    reads, spends_of = [], ledger.spends
    monkeypatch.setattr(ledger, "spends", lambda data, **kw: reads.append(kw.get("last")) or spends_of(data, **kw))
    at = new_app()
    run_mechanism(at, "pmm")
    at.number_input(key="w_seed").set_value(5).run()  # a live re-run
    assert reads and None not in reads, reads
    assert not problems(at) and len(spends_of(ledger_key(at))) == 2


def test_a_rerun_opens_one_ledger_connection(monkeypatch):
    """The page and the sidebar read the ledger a dozen times per script run, over one connection."""
    import sqlite3

    at = new_app()
    run_mechanism(at, "pmm")
    opened, connect = [], sqlite3.connect
    monkeypatch.setattr(sqlite3, "connect", lambda file, **kw: (None if kw.get("uri") else opened.append(str(file)))
                        or connect(file, **kw))  # the read-only look at the file's schema before it is not counted
    at.number_input(key="w_seed").set_value(5).run()  # a live re-run: checked, recorded, shown in the sidebar
    assert not problems(at) and len(at.sidebar.metric) == 1
    assert [f for f in opened if f.endswith("ledger.sqlite")] == [opened[0]], opened


def test_the_mechanism_ledger_table_lists_every_stage_and_its_epsilon():
    at = run_mechanism(new_app(), "pmm")
    shown = next(d.value for d in at.dataframe if list(d.value.columns) == ["stage", "epsilon"])
    ledger = at.session_state["result"].ledger
    assert list(shown["stage"]) == [stage for stage, _ in ledger] and len(ledger) > 2
    assert list(shown["epsilon"]) == [epsilon for _, epsilon in ledger], "the exact epsilons, as released"


def test_compare_draws_static_figures_and_a_zoomable_scatter_on_demand():
    at = new_app()
    run_mechanism(at, "dp_histogram")
    at.switch_page("pages/compare.py").run()
    assert not figures(at), "the first view loads no Plotly (its JavaScript took ~1.4 s per session)"
    assert sum("h0" in m for m in svgs(at)) == 2 and any("synthetic minus real" in m for m in svgs(at))
    at.toggle(key="w_cmp_zoom").set_value(True).run()
    assert not problems(at)
    assert [f["data"][0]["name"] for f in figures(at)] == ["real", "synthetic"]
    assert sum("h0" in m for m in svgs(at)) == 0


def test_a_fresh_machine_runs_the_bundled_sample_on_the_default_ledger(tmp_path, monkeypatch):
    """No PRIVSYN_DATA_DIR nor PRIVSYN_LEDGER: the app makes the library's default ledger on first use and runs."""
    from pages._support import ledger
    from privsyn_core.privacy import budget

    monkeypatch.delenv(ledger.DATA_DIR_ENV)
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "share"))
    monkeypatch.setattr(ledger, "EARLIER_DEFAULT", tmp_path / "checkout" / "app-data" / "ledger.sqlite")
    at = run_mechanism(new_app(), "dp_histogram")
    assert not problems(at) and len(spends(at)) == 1
    assert budget.default_path() == tmp_path / "share" / "privsyn" / "ledger.sqlite"
    assert budget.PrivacyLedger().count(ledger_key(at)) == 1


def test_a_ledger_at_the_apps_earlier_default_refuses_every_run_with_one_line(tmp_path, monkeypatch):
    from pages._support import ledger
    from privsyn_core.privacy import budget

    monkeypatch.delenv(ledger.DATA_DIR_ENV)
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "share"))
    earlier = tmp_path / "checkout" / "app-data" / "ledger.sqlite"
    budget.PrivacyLedger.create(earlier)
    monkeypatch.setattr(ledger, "EARLIER_DEFAULT", earlier)
    at = run_mechanism(new_app(), "dp_histogram")
    assert not at.exception and at.session_state["result"] is None
    shown = [e.value for e in at.error if str(earlier) in e.value]
    assert shown and all("PRIVSYN_LEDGER" in e and "\n" not in e for e in shown)
    assert not (tmp_path / "share" / "privsyn").exists()
