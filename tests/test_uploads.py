"""Uploads survive a reload: kept on disk by content, named in the URL by a random id, bounded, oldest evicted."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pandas as pd
import pytest
from streamlit.testing.v1 import AppTest

from pages._support import uploads

APP = str(Path(__file__).resolve().parents[1] / "app.py")


def csv(n: int, seed: int = 0) -> bytes:
    return pd.DataFrame({"a": [float(seed + i) for i in range(n)], "b": [2.0 * i for i in range(n)]}) \
        .to_csv(index=False).encode()


def test_save_and_load_round_trip_by_a_random_id_and_the_same_content_is_stored_once():
    raw = csv(10)
    first, second = uploads.save(raw, "one.csv"), uploads.save(raw, "two.csv")
    assert first and second and first != second
    assert hashlib.sha256(raw).hexdigest() not in first + second  # the URL names no function of the data
    assert uploads.load(first) == (raw, "one.csv") and uploads.load(second) == (raw, "two.csv")
    assert uploads.kept_bytes() == len(raw)
    assert len(list(uploads.folder().glob("*.csv"))) == 1


def test_unknown_malformed_and_damaged_ids_restore_nothing():
    assert uploads.load("no-such-token-0000000") is None
    assert uploads.load("../../etc/passwd") is None
    token = uploads.save(csv(5), "x.csv")
    assert token is not None
    next(uploads.folder().glob("*.csv")).write_bytes(b"tampered")
    assert uploads.load(token) is None
    assert uploads.kept_bytes() == 0  # the damaged file was dropped


def test_the_kept_bytes_stay_bounded_and_the_least_recently_used_go_first(monkeypatch):
    tables = [csv(40, seed) for seed in range(4)]
    size = max(len(t) for t in tables)
    monkeypatch.setenv(uploads.MAX_BYTES_ENV, str(3 * size))
    tokens = [uploads.save(tables[0], "t0.csv"), uploads.save(tables[1], "t1.csv"), uploads.save(tables[2], "t2.csv")]
    assert uploads.load(str(tokens[0])) is not None  # t0 used again: t1 is now the oldest
    tokens.append(uploads.save(tables[3], "t3.csv"))
    assert uploads.kept_bytes() <= 3 * size
    kept = [uploads.load(str(t)) is not None for t in tokens]
    assert kept == [True, False, True, True]


@pytest.mark.parametrize("bound", ["0", "100"])
def test_a_table_larger_than_the_bound_is_not_kept(monkeypatch, bound):
    monkeypatch.setenv(uploads.MAX_BYTES_ENV, bound)
    assert uploads.save(csv(50), "big.csv") is None
    assert uploads.kept_bytes() == 0


def test_a_new_session_restores_the_upload_named_in_its_url():
    at = AppTest.from_file(APP, default_timeout=60).run()
    at.switch_page("pages/data.py").run()
    at.radio(key="w_source").set_value("Upload a CSV").run()
    raw = csv(25)
    at.file_uploader[0].set_value(("mine.csv", raw, "text/csv")).run()
    assert not at.exception
    token = at.query_params["data"]
    token = token[0] if isinstance(token, list) else token
    assert uploads.load(token) == (raw, "mine.csv")

    reloaded = AppTest.from_file(APP, default_timeout=60)
    reloaded.query_params["data"] = token
    reloaded.run()
    assert not reloaded.exception
    data = reloaded.session_state["data"]
    assert (data["bytes"], data["name"], data["sample"]) == (raw, "mine.csv", None)
    assert reloaded.session_state["shared"]["columns"] == ["a", "b"]
    reloaded.switch_page("pages/data.py").run()
    assert reloaded.radio(key="w_source").value == "Upload a CSV"
    assert any("Loaded mine.csv" in s.value for s in reloaded.success)
    assert reloaded.session_state["data"]["bytes"] == raw  # the Data page did not fall back to a sample


def test_an_evicted_upload_falls_back_to_the_sample_and_says_so():
    at = AppTest.from_file(APP, default_timeout=60)
    at.query_params["data"] = "gone-gone-gone-gone-gone"
    at.run()
    assert not at.exception
    assert at.session_state["data"]["sample"] == "blobs"
    assert any("no longer kept" in w.value for w in at.sidebar.warning)


def test_a_sample_is_named_in_the_url_and_restored():
    at = AppTest.from_file(APP, default_timeout=60)
    at.query_params["sample"] = "blobs"
    at.run()
    assert at.session_state["data"]["sample"] == "blobs"
    bad = AppTest.from_file(APP, default_timeout=60)
    bad.query_params["sample"] = "../app"
    bad.run()
    assert not bad.exception and bad.session_state["data"]["sample"] == "blobs"


# -- the typed schema and the chosen columns go with the upload (issue 16, item 1) ----------------------------
def mixed_csv(n: int = 60) -> bytes:
    return pd.DataFrame({"age": [18 + i % 50 for i in range(n)], "score": [i / n for i in range(n)],
                         "group": ["b", "a", "c"] * (n // 3), "unused": range(n)}).to_csv(index=False).encode()


TYPED_SCHEMA: dict[str, dict] = {
    "age": {"name": "age", "kind": "numeric", "lo": 17.5, "hi": 42.0, "integer": True, "decimals": None,
            "categories": [], "public": True, "source": "typed by the user"},
    "score": {"name": "score", "kind": "numeric", "lo": 0.0, "hi": 1.0, "integer": False, "decimals": 3,
              "categories": [], "public": True, "source": "typed by the user"},
    "group": {"name": "group", "kind": "categorical", "lo": None, "hi": None, "categories": ["c", "a", "b"],
              "integer": False, "decimals": None, "public": True, "source": "typed by the user"},
}


def test_save_and_load_schema_round_trip_bounded_and_dropped_with_the_table(monkeypatch):
    raw = mixed_csv()
    token = uploads.save(raw, "mixed.csv")
    assert token is not None and uploads.load_schema(token) is None
    assert uploads.save_schema(token, TYPED_SCHEMA, ["age", "group"])
    assert uploads.load_schema(token) == {"entries": TYPED_SCHEMA, "columns": ["age", "group"]}
    assert uploads.save_schema(token, {}, ["age"]) and uploads.load_schema(token) == {"entries": {}, "columns": ["age"]}
    assert not uploads.save_schema("no-such-token-0000000", TYPED_SCHEMA, []), "only for a kept upload"
    assert not uploads.save_schema("../../x", TYPED_SCHEMA, [])
    monkeypatch.setattr(uploads, "MAX_SCHEMA_BYTES", 100)
    assert not uploads.save_schema(token, TYPED_SCHEMA, ["age"])
    assert uploads.load_schema(token) == {"entries": {}, "columns": ["age"]}, "the last schema that fitted"
    next(uploads.folder().glob("*.csv")).write_bytes(b"tampered")
    assert uploads.load(token) is None and uploads.load_schema(token) is None, "dropped with its table"


def test_a_reload_restores_the_typed_schema_and_the_chosen_columns_with_the_upload():
    at = AppTest.from_file(APP, default_timeout=60).run()
    at.switch_page("pages/data.py").run()
    at.radio(key="w_source").set_value("Upload a CSV").run()
    raw = mixed_csv()
    at.file_uploader[0].set_value(("mixed.csv", raw, "text/csv")).run()
    at.multiselect(key="w_columns").set_value(["age", "score", "group"]).run()
    at.session_state["schema_entries"] = TYPED_SCHEMA  # as the grid leaves them after typing (browser test types)
    at.run()
    assert not at.exception and any("Schema complete for 3" in s.value for s in at.success)
    at.switch_page("pages/learn.py").run()  # another page, as a user might reload there
    token = at.query_params["data"]
    token = token[0] if isinstance(token, list) else token

    reloaded = AppTest.from_file(APP, default_timeout=60)
    reloaded.query_params["data"] = token
    reloaded.run()
    reloaded.switch_page("pages/data.py").run()
    assert not reloaded.exception
    assert reloaded.session_state["schema_entries"] == TYPED_SCHEMA
    assert reloaded.session_state["shared"]["columns"] == ["age", "score", "group"]
    assert reloaded.multiselect(key="w_columns").value == ["age", "score", "group"]
    assert any("Schema complete for 3" in s.value for s in reloaded.success)
    grid = reloaded.session_state["schema_grid"]["base"].set_index("name")
    assert (grid.loc["age", "lo"], grid.loc["age", "hi"], bool(grid.loc["age", "integer"])) == (17.5, 42.0, True)
    assert grid.loc["group", "categories"] == "c, a, b" and grid.loc["score", "decimals"] == 3
    schema = reloaded.session_state["schema_entries"]
    assert schema["group"]["categories"] == ["c", "a", "b"], "the public category order, not sorted"

    other = AppTest.from_file(APP, default_timeout=60)  # a second upload of the same bytes: its own schema
    other.run()
    other.switch_page("pages/data.py").run()
    other.radio(key="w_source").set_value("Upload a CSV").run()
    other.file_uploader[0].set_value(("again.csv", raw, "text/csv")).run()
    assert not other.exception and other.session_state["schema_entries"] == {}


def test_the_tables_are_made_once_per_database_file_and_again_when_it_is_gone(monkeypatch, tmp_path):
    scripts = []
    real = uploads.sqlite3.connect

    class Counting(uploads.sqlite3.Connection):
        def executescript(self, script):
            if "table if not exists files" in script:  # the uploads' index (not the privacy ledger made first)
                scripts.append(script)
            return super().executescript(script)

    monkeypatch.setattr(uploads.sqlite3, "connect", lambda *a, **kw: real(*a, factory=Counting, **kw))
    monkeypatch.setenv("PRIVSYN_DATA_DIR", str(tmp_path / "first"))
    token = uploads.save(csv(5), "x.csv")
    assert uploads.load(str(token)) is not None and uploads.kept_bytes() > 0 and len(scripts) == 1
    (uploads.folder() / "uploads.sqlite").unlink()  # deleted under a running server: made again, not assumed
    assert uploads.load(str(token)) is None and uploads.save(csv(6), "y.csv") is not None and len(scripts) == 2
    monkeypatch.setenv("PRIVSYN_DATA_DIR", str(tmp_path / "second"))  # another folder: its own tables
    assert uploads.kept_bytes() == 0 and len(scripts) == 3
