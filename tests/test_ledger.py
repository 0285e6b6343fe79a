"""The privacy ledger's store: one connection per script run holds no lock between calls, commits every spend at
once, follows the data folder, and keeps totals exactly rounded however they are read."""

from __future__ import annotations

import math
import sqlite3

import numpy as np
import pytest

from pages._support import ledger


def spend(data: str, epsilon: float, *, private: bool = True, relation: str = "replace", key: str | None = None):
    return ledger.add(data, label="run", mechanism="pmm", relation=relation, epsilon=epsilon, private=private,
                      run_key=key)


def connections(monkeypatch) -> list[str]:
    """The files the ledger opens from now on (every ``sqlite3.connect``)."""
    opened, connect = [], sqlite3.connect
    monkeypatch.setattr(sqlite3, "connect", lambda file, **kw: opened.append(str(file)) or connect(file, **kw))
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
        shared = ledger._SHARED.scope.db
    assert len(opened) == 1 and ledger._SHARED.scope is None
    with pytest.raises(sqlite3.ProgrammingError):
        shared.execute("select 1")  # closed at the end of the block
    assert ledger.count("d") == 2 and len(opened) == 2, "outside a block, a connection per call as before"


def test_inside_one_connection_no_lock_outlives_a_call_and_a_spend_is_committed_when_add_returns():
    spend("d", 1.0)
    other = sqlite3.connect(ledger.path(), timeout=0, isolation_level=None)
    with ledger.one_connection():
        ledger.spends("d"), ledger.spends("d", last=1), ledger.count("d", private=True), ledger.totals("d")
        ledger.budget("d"), ledger.known("d", "x")
        other.execute("begin exclusive")  # would fail at once (timeout 0) if a read had left its lock behind
        other.execute("rollback")
        spend("d", 2.0)
        ledger.set_budget("d", 5.0)
        assert other.execute("select count(*) from spends").fetchone()[0] == 2
        assert other.execute("select epsilon from budgets").fetchone()[0] == 5.0
        other.execute("begin exclusive")
        other.execute("rollback")
    other.close()


def test_one_connection_follows_the_data_folder(monkeypatch, tmp_path):
    monkeypatch.setenv(ledger.DATA_DIR_ENV, str(tmp_path / "first"))
    with ledger.one_connection():
        spend("d", 1.0)
        monkeypatch.setenv(ledger.DATA_DIR_ENV, str(tmp_path / "second"))
        assert ledger.count("d") == 0, "a connection kept for another folder's ledger must not be used"
        spend("d", 2.0)
        monkeypatch.setenv(ledger.DATA_DIR_ENV, str(tmp_path / "first"))
        assert ledger.totals("d") == {"replace": 1.0}


def test_totals_are_the_exactly_rounded_sums_of_every_private_spend_in_any_order():
    rng = np.random.default_rng(0)
    epsilons = [float(e) for e in rng.choice([0.1, 0.2, 0.3, 1e-3, 1 / 3, 7.0], size=300)] + [1e-17, 1e16, 0.1]
    relations = rng.choice(["replace", "add_remove"], size=len(epsilons))
    for epsilon, relation in zip(epsilons, relations, strict=True):
        spend("d", epsilon, relation=str(relation))
    spend("d", 50.0, private=False)
    spend("other", 9.0)
    expected = {r: math.fsum(e for e, rel in zip(epsilons, relations, strict=True) if rel == r)
                for r in ("replace", "add_remove")}
    assert ledger.totals("d") == expected
    assert ledger.totals("other") == {"replace": 9.0} and ledger.totals("none") == {}
