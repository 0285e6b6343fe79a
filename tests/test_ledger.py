"""The app's view of the library's privacy ledger: one connection per script run that holds no lock between calls,
commits every spend at once, follows the data folder and the operator's environment, and fails closed."""

from __future__ import annotations

import sqlite3

import pytest

from pages._support import ledger
from privsyn_core.engine.release import reserve_release
from privsyn_core.errors import LedgerError


def spend(data: str, epsilon: float, *, private: bool = True, relation: str = "replace", key: str | None = None):
    """A spend recorded through the release path's one reservation site, confirmed at once."""
    reserve_release(ledger.store(), data, epsilon, relation=relation, mechanism="pmm", label="run", private=private,
                    run_key=key).confirm()


def connections(monkeypatch) -> list[str]:
    """The files the ledger opens for writing from now on (every ``sqlite3.connect`` but the read-only look at the
    file's schema that comes before it)."""
    opened, connect = [], sqlite3.connect
    monkeypatch.setattr(sqlite3, "connect", lambda file, **kw: (None if kw.get("uri") else opened.append(str(file)))
                        or connect(file, **kw))
    return opened


def test_one_connection_serves_every_call_of_the_block_and_is_closed_after(monkeypatch):
    spend("d", 1.0)
    opened = connections(monkeypatch)
    with ledger.one_connection():
        for _ in range(3):
            ledger.spends("d", last=8, private=True), ledger.count("d"), ledger.totals("d"), ledger.budget("d")
            spend("d", 0.5, key="same run")
        with ledger.one_connection():  # nested: the outer block's connection
            assert ledger.known("d", "same run")
    assert len(opened) == 1
    assert ledger.count("d") == 2 and len(opened) == 2, "outside a block, a connection per call"


def test_inside_one_connection_no_lock_outlives_a_call_and_a_spend_is_committed_when_it_returns():
    spend("d", 1.0)
    other = sqlite3.connect(ledger.path(), timeout=0, isolation_level=None)
    with ledger.one_connection():
        ledger.spends("d"), ledger.spends("d", last=1), ledger.count("d", private=True), ledger.totals("d")
        ledger.budget("d"), ledger.known("d", "x")
        other.execute("begin exclusive")  # would fail at once (timeout 0) if a read had left its lock behind
        other.execute("rollback")
        spend("d", 2.0)
        ledger.tighten_budget("d", 5.0)
        assert other.execute("select count(*) from spends").fetchone()[0] == 2
        assert other.execute("select epsilon from budgets").fetchone()[0] == 5.0
        other.execute("begin exclusive")
        other.execute("rollback")
    other.close()


def test_the_view_follows_the_data_folder_and_the_ledger_variable(monkeypatch, tmp_path):
    monkeypatch.setenv(ledger.DATA_DIR_ENV, str(tmp_path / "first"))
    spend("d", 1.0)
    monkeypatch.setenv(ledger.DATA_DIR_ENV, str(tmp_path / "second"))
    assert ledger.count("d") == 0, "another folder's ledger"
    monkeypatch.setenv("PRIVSYN_LEDGER", str(tmp_path / "first" / "ledger.sqlite"))
    assert ledger.totals("d") == {"replace": 1.0}, "PRIVSYN_LEDGER names the one ledger of the CLI and the app"


def test_the_operators_default_budget_is_followed_and_a_session_only_tightens(monkeypatch):
    monkeypatch.setenv("PRIVSYN_BUDGET", "2")
    assert ledger.budget("d") == 2.0 and ledger.budget_owner("d") == "default"
    assert ledger.tighten_budget("d", 3.0) == 2.0 and ledger.tighten_budget("d", 1.0) == 1.0
    monkeypatch.delenv("PRIVSYN_BUDGET")
    assert ledger.budget("d") == 1.0


def test_a_data_folder_with_uploads_but_no_ledger_is_refused_and_one_connection_still_runs(tmp_path, monkeypatch):
    folder = tmp_path / "data"
    (folder / "uploads").mkdir(parents=True)
    monkeypatch.setenv(ledger.DATA_DIR_ENV, str(folder))
    with ledger.one_connection():  # the page still runs; every ledger call names the problem
        with pytest.raises(LedgerError, match="its folder is not empty"):
            ledger.totals("d")


def test_the_app_and_the_cli_share_one_default_ledger(monkeypatch, tmp_path):
    """Without PRIVSYN_LEDGER and PRIVSYN_DATA_DIR the app's ledger is the library's default, the CLI's too."""
    from privsyn_core.privacy import budget

    monkeypatch.delenv(ledger.DATA_DIR_ENV)
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "share"))
    monkeypatch.setattr(ledger, "EARLIER_DEFAULT", tmp_path / "checkout" / "app-data" / "ledger.sqlite")
    assert ledger.path() == budget.default_path() == tmp_path / "share" / "privsyn" / "ledger.sqlite"
    assert ledger.data_dir() == budget.data_folder() == tmp_path / "share" / "privsyn"
    spend("d", 0.5)
    assert budget.PrivacyLedger().spent("d") == 0.5, "a script's and the CLI's default ledger is the app's"


def test_a_ledger_at_the_apps_earlier_default_refuses_the_new_one_until_pointed_at_or_moved(monkeypatch, tmp_path):
    from privsyn_core.privacy import budget

    monkeypatch.delenv(ledger.DATA_DIR_ENV)
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "share"))
    earlier = tmp_path / "checkout" / "app-data" / "ledger.sqlite"
    monkeypatch.setattr(ledger, "EARLIER_DEFAULT", earlier)
    reserve_release(budget.PrivacyLedger.create(earlier), "d", 0.75, relation="replace", mechanism="pmm",
                    label="run").confirm()
    current = tmp_path / "share" / "privsyn" / "ledger.sqlite"
    with ledger.one_connection(), pytest.raises(LedgerError) as refused:
        ledger.totals("d")
    message = str(refused.value)
    assert "\n" not in message and str(earlier) in message and str(current) in message
    assert f"PRIVSYN_LEDGER={earlier}" in message and "move it" in message
    assert not current.exists() and not current.parent.exists(), "no fresh ledger was made"
    monkeypatch.setenv("PRIVSYN_LEDGER", str(earlier))
    assert ledger.totals("d") == {"replace": 0.75}
    monkeypatch.delenv("PRIVSYN_LEDGER")
    monkeypatch.setenv(ledger.DATA_DIR_ENV, str(earlier.parent))
    assert ledger.totals("d") == {"replace": 0.75}
    monkeypatch.delenv(ledger.DATA_DIR_ENV)
    current.parent.mkdir(parents=True)
    earlier.rename(current)
    assert ledger.totals("d") == {"replace": 0.75}, "moved: the spends follow the file"
