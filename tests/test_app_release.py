"""Release mode of the app (issue 12): a release-only deployment, and what release mode never shows.

``PRIVSYN_RELEASE_ONLY=1`` is set with ``monkeypatch`` before ``AppTest.from_file``; a "reload" is a
new AppTest session on the same server settings.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from streamlit.testing.v1 import AppTest

import privsyn_core as ps
from privsyn_core.data.datasets import two_blobs
from privsyn_core.reporting import plot_data, report

APP = str(Path(__file__).resolve().parents[1] / "app.py")
PAGES = ["pages/data.py", "pages/synthesize.py", "pages/partitions.py", "pages/tsp.py", "pages/compare.py",
         "pages/tradeoff.py", "pages/over_time.py", "pages/learn.py"]
NOT_PRIVATE_MECHANISMS = [s.name for s in ps.list_mechanisms() if not s.is_private]


@pytest.fixture()
def locked(monkeypatch):
    """A release-only deployment whose operator set a budget (without one, every release is refused)."""
    monkeypatch.setenv("PRIVSYN_RELEASE_ONLY", "1")
    monkeypatch.setenv("PRIVSYN_BUDGET", "1000")


def new_app() -> AppTest:
    return AppTest.from_file(APP, default_timeout=90).run()


def problems(at: AppTest) -> list[str]:
    return [e.value for e in at.exception] + [e.value for e in at.error]


def upload(at: AppTest, name: str, data: bytes) -> AppTest:
    at.switch_page("pages/data.py").run()
    at.radio(key="w_source").set_value("Upload a CSV").run()
    return at.file_uploader[0].set_value((name, data, "text/csv")).run()


def type_bounds(at: AppTest, bounds: dict[str, tuple[float, float]]) -> AppTest:
    at.session_state["schema_entries"] = {
        name: {"name": name, "kind": "numeric", "lo": lo, "hi": hi, "integer": False, "public": True,
               "source": "typed by the user"} for name, (lo, hi) in bounds.items()}
    return at.run()


def run_mechanism(at: AppTest, name: str, **params) -> AppTest:
    at.switch_page("pages/synthesize.py").run()
    at.selectbox(key="w_mechanism").set_value(name).run()
    for param, value in params.items():
        if param == "neighbouring":
            at.radio(key="w_neighbouring").set_value(value).run()
            continue
        mode = f"w_param_{name}_{param}_mode"
        if mode in at.session_state:
            at.selectbox(key=mode).set_value("number").run()
        at.number_input(key=f"w_param_{name}_{param}").set_value(value).run()
    return next(b for b in at.button if b.label == "Run").click().run()


def texts(at: AppTest) -> list[str]:
    """Every text element's body (Markdown, captions, alerts, titles, metrics, code, JSON)."""
    out = []
    for kind in ("markdown", "caption", "title", "header", "subheader", "success", "info", "warning", "error",
                 "code", "json", "text"):
        out += [f"{kind}: {e.value}" for e in at.get(kind)]
    out += [f"metric: {m.label} = {m.value}" for m in at.metric]
    return out


def blobs(n: int = 317, seed: int = 3) -> pd.DataFrame:
    return pd.DataFrame(two_blobs(n, 2, rng=seed), columns=["x", "y"])


def csv(df: pd.DataFrame) -> bytes:
    return df.to_csv(index=False).encode()


# -- the deployment switch -------------------------------------------------------------------------
def test_locked_app_has_no_mode_toggle_and_a_reload_stays_in_release_mode(locked):
    at = new_app()
    assert not problems(at)
    assert not [t for t in at.toggle if t.label == "Release mode"]
    assert any("Release-only deployment" in s.value for s in at.sidebar.success)
    at.session_state["saved"]["w_release"] = False  # what a stale teaching session would carry
    at.run()
    assert any("Release-only deployment" in s.value for s in at.sidebar.success)
    reloaded = new_app()  # a browser reload is a new session
    assert not [t for t in reloaded.toggle if t.label == "Release mode"]
    assert any("Release-only deployment" in s.value for s in reloaded.sidebar.success)


@pytest.mark.parametrize("how", ["locked", "chosen"])
def test_release_mode_offers_no_propose_no_preview_no_row_count_and_no_non_private_mechanism(how, monkeypatch):
    if how == "locked":
        monkeypatch.setenv("PRIVSYN_RELEASE_ONLY", "1")
        monkeypatch.setenv("PRIVSYN_BUDGET", "1000")
    at = new_app()
    if how == "chosen":
        at.toggle(key="w_release").set_value(True).run()
    n = len(blobs(1234))
    upload(at, "mine.csv", csv(blobs(1234)))
    assert not problems(at)
    assert all(b.label != "Propose from the data" for b in at.button)
    assert not [e for e in at.expander if "Preview" in e.label]
    shown = "\n".join(texts(at))
    assert f"{n:,}" not in shown and str(n) not in shown, "the exact row count is private under add_remove"
    at.switch_page("pages/synthesize.py").run()
    offered = at.selectbox(key="w_mechanism").options
    assert offered and not [m for m in NOT_PRIVATE_MECHANISMS if any(f"[{m}]" in o for o in offered)]


def test_switching_into_release_mode_drops_teaching_results_and_proposed_domains():
    at = new_app()
    upload(at, "mine.csv", csv(blobs()))
    next(b for b in at.button if b.label == "Propose from the data").click().run()
    assert any(e["source"].startswith("proposed") for e in at.session_state["schema_entries"].values())
    run_mechanism(at, "bootstrap")
    assert at.session_state["result"].mechanism == "bootstrap"
    at.session_state["over_time"], at.session_state["over_time_clipped"] = pd.DataFrame({"w1": [0.1]}), {"x": 3}
    at.toggle(key="w_release").set_value(True).run()
    assert at.session_state["result"] is None, "a teaching result must not stay as the release"
    assert "over_time" not in at.session_state and "over_time_clipped" not in at.session_state
    assert not any(e.get("source", "").startswith("proposed") for e in at.session_state["schema_entries"].values())
    for page in ("pages/synthesize.py", "pages/compare.py"):
        at.switch_page(page).run()
        assert not list(at.get("download_button")), f"{page}: nothing to download until a release is made"
    at.switch_page("pages/data.py").run()
    grid = at.dataframe[0].value if at.dataframe else None
    assert grid is None or grid[["lo", "hi"]].isna().all().all(), "no exact min/max in the visible grid"


def test_release_reports_have_no_hash_no_timings_no_teaching_section(locked):
    raw = csv(blobs())
    at = upload(new_app(), "mine.csv", raw)
    type_bounds(at, {"x": (0.0, 1.0), "y": (0.0, 1.0)})
    run_mechanism(at, "dp_histogram")
    assert not problems(at)
    digest = report.sha256(raw)
    shown = texts(at) + texts_sidebar(at)
    assert not [t for t in shown if digest[:12] in t], "no fingerprint of the data in release mode"
    preview = next(json.loads(j.proto.body) for j in at.json if "release_mode" in j.proto.body)
    assert preview["release_mode"] is True and "teaching" not in preview
    assert "timings" not in json.dumps(preview) and digest[:12] not in json.dumps(preview)
    assert all("data" not in e for e in preview["session_ledger"])


def texts_sidebar(at: AppTest) -> list[str]:
    return [c.value for c in at.sidebar.caption] + [m.value for m in at.sidebar.markdown]


class _Untouchable(dict):
    """Diagnostics that fail the test when release mode reads them."""

    def __getitem__(self, key):
        raise AssertionError(f"release mode read diagnostics[{key!r}]")

    def get(self, key, default=None):
        raise AssertionError(f"release mode read diagnostics[{key!r}]")

    def __contains__(self, key):
        raise AssertionError(f"release mode asked for diagnostics[{key!r}]")


@pytest.mark.parametrize("mechanism", ["pmm", "dp_histogram", "kd_grid", "kd_adaptive", "psmm", "srw_tsp"])
def test_partitions_and_tsp_in_release_mode_draw_only_the_release(locked, mechanism):
    at = upload(new_app(), "mine.csv", csv(blobs()))
    type_bounds(at, {"x": (0.0, 1.0), "y": (0.0, 1.0)})
    run_mechanism(at, mechanism)
    assert not problems(at)
    result = at.session_state["result"]
    result.diagnostics = _Untouchable(result.diagnostics)
    for page in ("pages/partitions.py", "pages/tsp.py"):
        at.switch_page(page).run()
        assert not at.exception, f"{page}: {at.exception}"
    at.switch_page("pages/partitions.py").run()
    released = plot_data.released_partition(result.release())
    if released is not None:
        fig = json.loads(at.get("plotly_chart")[0].proto.spec)
        assert all("data" not in t.get("name", "") for t in fig["data"])
        assert any(f"{len(released['cells']['lo']):,} cells" in c.value for c in at.caption)


BAD = "![p](http://127.0.0.1:9/p.png) :red[**x**] $y$"


@pytest.mark.parametrize("release", [False, True])
def test_file_and_column_names_are_never_markdown(release):
    df = pd.DataFrame({BAD: np.linspace(0, 1, 50), "ok": np.linspace(1, 0, 50)})
    at = new_app()
    if release:
        at.toggle(key="w_release").set_value(True).run()
    upload(at, f"{BAD}.csv", csv(df))
    type_bounds(at, {BAD: (0.0, 1.0), "ok": (0.0, 1.0)})
    run_mechanism(at, "dp_histogram")
    at.session_state["schema_entries"] = {}
    for page in PAGES:
        at.switch_page(page).run()
        assert not at.exception, f"{page}: {at.exception}"
        for text in texts(at) + texts_sidebar(at):
            if text.startswith(("code:", "json:")):
                continue  # shown verbatim, never as Markdown
            assert not re.search(r"(?<!\\)!\\?\[|(?<!\\)\]\(|(?<!\\):red\[|(?<!\\)\$y", text), (page, text)
