"""The app server's bounded resources and cheap reruns (issue 18 items 2-3, issue 17 item 3).

* the parsed-table cache is bounded in bytes, not entries (:mod:`pages._support.table_cache`);
* the size widgets cannot exceed the memory budget of :mod:`privsyn_core.mechanisms.base.resources`, and say so;
* download files are built only on a click: a rerun with unchanged settings shapes no table and builds no CSV.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from streamlit.testing.v1 import AppTest

from privsyn_core.data.io import to_csv_bytes
from privsyn_core.errors import ResourceError
from privsyn_core.mechanisms.base import resources
from privsyn_core.mechanisms.hvz23.pmm import max_pmm_depth
from privsyn_core.privacy import budget

APP = str(Path(__file__).resolve().parents[1] / "app.py")


def frame(rows: int, seed: int = 0) -> pd.DataFrame:
    return pd.DataFrame(np.random.default_rng(seed).uniform(size=(rows, 2)), columns=["x", "y"])


# -- the table cache --------------------------------------------------------------------------------------------
def test_the_table_cache_is_bounded_in_bytes_and_evicts_the_least_recently_used():
    from pages._support.table_cache import TableCache, table_bytes

    one = table_bytes(frame(10_000))  # 160 kB of floats plus the index
    cache = TableCache(budget=int(2.5 * one))
    for key in "abc":
        cache.put(key, frame(10_000))
        assert cache.held <= cache.budget
    assert len(cache) == 2 and cache.get("a") is None, "the third table evicts the oldest"
    assert cache.get("b") is not None  # b is now the most recently used
    cache.put("d", frame(10_000))
    assert cache.get("c") is None and cache.get("b") is not None and cache.held == 2 * one
    cache.put("b", frame(10_000, seed=1))  # the same key replaces, never counts twice
    assert cache.held == 2 * one


def test_a_table_larger_than_the_whole_cache_is_refused_with_the_limit(monkeypatch):
    from pages._support import table_cache

    monkeypatch.setenv(table_cache.CACHE_ENV, "1")
    cache = table_cache.TableCache()
    assert cache.budget == 2**20
    big = pd.DataFrame({"text": [f"row {i} of a short text column" for i in range(60_000)]})  # about 2.4 MB
    assert table_cache.table_bytes(big) > 2**20, "counted with its strings (deep)"
    with pytest.raises(ResourceError, match=r"PRIVSYN_UPLOAD_CACHE_MB"):
        cache.put("big", big)
    assert len(cache) == 0 and cache.held == 0
    monkeypatch.setenv(table_cache.CACHE_ENV, "lots")
    with pytest.raises(ResourceError, match="number of megabytes"):
        table_cache.budget_bytes()


def test_table_bytes_are_the_deep_memory_usage_of_the_index_and_every_column():
    from pages._support.table_cache import table_bytes

    mixed = pd.DataFrame({"x": np.arange(5.0), "text": ["a", "bb", None, "dddd", "e" * 50],
                          "kind": pd.Categorical(["u", "v", "u", "w", "v"]), "n": pd.array([1, None, 3, 4, 5])},
                         index=pd.Index(["r1", "r2", "r3", "r4", "r5"]))
    for table in (mixed, frame(1_000), mixed.iloc[:0], pd.DataFrame()):
        assert table_bytes(table) == int(table.memory_usage(deep=True, index=True).sum())


def test_a_selection_of_every_column_is_the_table_and_changing_it_leaves_the_shared_table_alone():
    from privsyn_core.data.values import select_columns as select

    shared = pd.DataFrame({"x": [1.0, 2.0], "y": [3.0, 4.0], "z": ["a", "b"]})
    before = shared.copy()
    for names in (["x", "y", "z"], ["z", "x", "y"], ["y"], ["x", "z"]):
        chosen = select(shared, names)
        pd.testing.assert_frame_equal(chosen, shared[names])
        assert list(chosen.columns) == names, "the chosen columns, in the order chosen"
        chosen.loc[0, names[0]] = None
        chosen["added"] = 0
    pd.testing.assert_frame_equal(shared, before)


def test_a_value_is_measured_once_when_kept_if_it_fits():
    from pages._support.table_cache import BoundedCache

    measured: list[str] = []
    cache = BoundedCache(lambda value: measured.append(value) or len(value), budget=10)
    assert cache.keep_if_fits("a", "x" * 6) and measured == ["x" * 6] and cache.held == 6
    assert not cache.keep_if_fits("b", "y" * 11) and cache.get("b") is None and cache.held == 6
    assert cache.keep_if_fits("c", "z" * 5) and cache.get("a") is None and cache.held == 5, "the oldest evicted"
    assert len(measured) == 3


def test_kept_runs_are_bounded_in_bytes_and_a_run_larger_than_the_budget_is_not_kept(monkeypatch):
    import privsyn_core as ps
    from pages._support import runs

    schema = {"columns": [{"name": c, "kind": "numeric", "lo": 0, "hi": 1} for c in ("x", "y")]}
    small = ps.synthesize(frame(2_000), "pmm", 1.0, schema=schema, rng=0, n_synthetic=2_000)
    size = runs.result_bytes(small)
    assert size >= small.data.memory_usage(deep=True).sum() + small.unit_rows.nbytes, "tables and arrays counted"
    monkeypatch.setenv(runs.RUN_CACHE_ENV, str(2.5 * size / 2**20))
    monkeypatch.setattr(runs, "RUNS", runs.table_cache.BoundedCache(runs.result_bytes, env=runs.RUN_CACHE_ENV))
    keys = [json.dumps({"seed": seed}) for seed in range(3)]
    for key in keys:
        runs.RUNS.put(key, small)
        assert runs.RUNS.held <= runs.RUNS.budget
    assert len(runs.RUNS) == 2 and runs.RUNS.get(keys[0]) is None
    key = {"sha256": "t", "columns": ["x", "y"], "schema": schema, "mechanism": "pmm", "params": {},
           "epsilon": 1.0, "neighbouring": "replace", "seed": 5, "n_synthetic": 20_000}  # ten times the rows
    monkeypatch.setattr(runs, "frame", lambda: frame(2_000))
    big = runs._cached_run(key, {"schema": schema, "neighbouring": "replace", "n_synthetic": 20_000})
    assert runs.result_bytes(big) > runs.RUNS.budget and runs.RUNS.get(json.dumps(key, sort_keys=True)) is None
    assert not big.unit_rows.flags.writeable, "a run handed to sessions is read-only, kept or not"


# -- widgets within the memory budget ----------------------------------------------------------------------------
def synthesize_page() -> AppTest:
    at = AppTest.from_file(APP, default_timeout=120).run()
    return at.switch_page("pages/synthesize.py").run()


def test_size_widgets_are_capped_by_the_memory_budget_and_name_it(monkeypatch):
    monkeypatch.setenv("PRIVSYN_MEMORY_BUDGET_MB", "1")
    at = synthesize_page()
    columns = len(at.session_state["saved"]["w_columns"])
    rows = at.number_input(key="w_n_synthetic")
    assert rows.max == resources.max_rows(columns) == 2**20 // (resources.BYTES_PER_VALUE * columns)
    cap = f"At most {int(rows.max):,} rows"
    assert any(cap in c.value and "PRIVSYN_MEMORY_BUDGET_MB" in c.value for c in at.caption)

    at.selectbox(key="w_mechanism").set_value("pmm").run()
    at.selectbox(key="w_param_pmm_depth_mode").set_value("number").run()
    depth = at.number_input(key="w_param_pmm_depth")
    assert depth.max == max_pmm_depth() == 13  # 2^13 leaves x 96 bytes fit 1 MB, 2^14 do not
    assert any("depth at most 13" in c.value for c in at.caption)


def test_a_kept_size_above_a_smaller_budget_is_lowered_to_it(monkeypatch):
    at = synthesize_page()
    at.number_input(key="w_n_synthetic").set_value(1_000_000).run()
    monkeypatch.setenv("PRIVSYN_MEMORY_BUDGET_MB", "1")
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    limit = at.number_input(key="w_n_synthetic").max
    assert limit is not None and limit == resources.max_rows(2) < 1_000_000
    assert at.number_input(key="w_n_synthetic").value == limit


# -- downloads built on demand -----------------------------------------------------------------------------------
def test_a_rerun_with_unchanged_settings_builds_no_download(monkeypatch):
    from pages._support import downloads, output

    calls = {"csv": 0, "shaped": 0}
    real_csv, real_shaped = downloads.to_csv_bytes, output.shaped

    def counting_csv(df: pd.DataFrame) -> bytes:
        calls["csv"] += 1
        return real_csv(df)

    def counting_shaped(*args, **kwargs) -> pd.DataFrame:
        calls["shaped"] += 1
        return real_shaped(*args, **kwargs)

    monkeypatch.setattr(downloads, "to_csv_bytes", counting_csv)
    monkeypatch.setattr(output, "shaped", counting_shaped)
    at = synthesize_page()
    next(b for b in at.button if b.label == "Run").click().run()
    assert not at.exception and at.session_state["result"] is not None
    assert len([b for b in at.get("download_button")
                if b.key in ("dl_csv", "dl_manifest", "dl_json", "dl_html")]) == 4
    assert calls == {"csv": 0, "shaped": 1}, "a run shapes its table once and builds no file"
    for _ in range(2):
        at.run()
    assert calls == {"csv": 0, "shaped": 1}, "a rerun that changed nothing does no work for the downloads"
    at.switch_page("pages/compare.py").run()
    at.switch_page("pages/synthesize.py").run()
    assert calls["csv"] == 0 and calls["shaped"] == 1, "the same run on another page reuses the shaped table"

    view = next(iter(at.session_state["_run_views"].values()))
    data = view["csv"]()  # what a click runs, in Streamlit's worker thread
    result = at.session_state["result"]
    assert data == real_csv(result.data), "the CSV is the release's rows, the bytes the command line writes"
    assert view["csv"]() is data and calls["csv"] == 1, "a second click of the same run reuses the bytes"
    manifest = json.loads(view["manifest"]())  # its manifest: the SHA-256 of those bytes, recorded with the spend
    assert manifest["file"] == {"name": "synthetic.csv", "sha256": hashlib.sha256(data).hexdigest()}
    recorded = budget.PrivacyLedger(result.ledger_entry.path).find_release(manifest["ledger_entry"]["release_id"])
    assert recorded is not None and recorded.sha256 == manifest["file"]["sha256"]
    assert "What was released, and how to check it" in view["html"]()


def test_the_csv_builder_keeps_only_small_files():
    from pages._support.downloads import csv_builder

    df = frame(1_000)
    small, large = csv_builder(df), csv_builder(df, keep_bytes=10)
    assert small() == to_csv_bytes(df) and small() is small()
    assert large() == to_csv_bytes(df) and large() is not large(), "over keep_bytes: rebuilt on every click"
