"""The privacy ledger as a budget: every spend on a dataset, kept in SQLite across reloads and restarts.

A dataset is identified by its content (the SHA-256 of the file's bytes), so the same table
uploaded again, by anyone, under any name, meets its own past spends.  Each spend records the
neighbouring relation it was accounted under; totals are shown per relation.  Non-private runs
(a mechanism that is not private, or a domain read off the data: ``dp_valid = False``) are kept
apart: they carry no guarantee, so they never enter a total (which would become ``inf``).

A budget per dataset caps the private spends: a spend that would take the total of every private
release on that data, whatever its relation (a conservative sum), above the budget is refused
with :class:`BudgetExceeded` before the mechanism runs.

The database lives in ``$PRIVSYN_DATA_DIR/ledger.sqlite`` (default ``app-data/`` in the
repository, named in the README).  Each call is its own statement or transaction (a spend is committed
before :func:`add` returns); inside :func:`one_connection` (a script run of the app) the calls of a thread
share one connection instead of opening one each, and no call leaves a statement open, so no lock
outlives the call that took it.  Nothing in it is shown in release mode but totals, labels and
epsilons; the data's hash is the key, never displayed.
"""

from __future__ import annotations

import itertools
import math
import os
import sqlite3
import threading
from collections.abc import Iterator, Sequence
from contextlib import closing, contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import privsyn_core as ps

DATA_DIR_ENV = "PRIVSYN_DATA_DIR"
DEFAULT_DIR = Path(__file__).resolve().parents[2] / "app-data"
SCHEMA = """
create table if not exists spends (
    id integer primary key autoincrement,
    data text not null, label text not null, mechanism text not null, relation text not null,
    epsilon real not null, private integer not null, run_key text, created text not null);
create index if not exists spends_data on spends(data);
create index if not exists spends_private on spends(data, private, relation, epsilon);
create index if not exists spends_run on spends(data, run_key);
create table if not exists budgets (data text primary key, epsilon real not null);
"""


class BudgetExceeded(ps.PrivsynError):
    """A release would take the private spends on a dataset above its budget."""


def _file() -> Path:
    """The ledger's file (its folder may not exist yet)."""
    return Path(os.environ.get(DATA_DIR_ENV) or DEFAULT_DIR) / "ledger.sqlite"


def path() -> Path:
    """The ledger's file, its folder made if missing."""
    file = _file()
    file.parent.mkdir(parents=True, exist_ok=True)
    return file


#: SQLite files (the ledger, the uploads' index) whose tables this process has created.
_READY: set[str] = set()


def open_database(file: Path, schema: str) -> sqlite3.Connection:
    """A connection to an SQLite file (rows by name, 10 s busy timeout) whose tables are created by ``schema`` once
    per file and process, and again when the file is gone (a page opens the ledger several times per rerun)."""
    ready = str(file) in _READY and file.exists()
    if not ready:
        file.parent.mkdir(parents=True, exist_ok=True)
    connection = sqlite3.connect(file, timeout=10)
    connection.row_factory = sqlite3.Row
    if not ready:
        connection.executescript(schema)
        _READY.add(str(file))
    return connection


#: The connection a thread shares inside :func:`one_connection` (``scope.file``, ``scope.db``), if any.
_SHARED = threading.local()


@contextmanager
def one_connection() -> Iterator[None]:
    """Let the ledger calls of this thread inside the block share one connection (opened on first use, closed at
    the end), instead of one connection per call: a page reads the ledger a dozen times per script run.

    Every call still runs its own statements and transactions and reads every row it returns before it returns,
    so no lock is held between calls.  Nested blocks share the outer block's connection.
    """
    if getattr(_SHARED, "scope", None) is not None:
        yield
        return
    _SHARED.scope = scope = _Scope()
    try:
        yield
    finally:
        _SHARED.scope = None
        scope.close()


class _Scope:
    """The connection of one :func:`one_connection` block, to the ledger file it was opened on."""

    def __init__(self) -> None:
        self.file: Path | None = None
        self.db: sqlite3.Connection | None = None

    def connection(self, file: Path) -> sqlite3.Connection:
        """The block's connection to ``file`` (a new one when the data folder changed since the last call)."""
        if self.db is None or self.file != file:
            self.close()
            self.db, self.file = open_database(file, SCHEMA), file
        return self.db

    def close(self) -> None:
        if self.db is not None:
            self.db.close()
        self.db = self.file = None


@contextmanager
def _database() -> Iterator[sqlite3.Connection]:
    """A connection to the ledger: the thread's shared one inside :func:`one_connection`, else a new one closed
    after use."""
    scope: _Scope | None = getattr(_SHARED, "scope", None)
    if scope is not None:
        yield scope.connection(_file())
        return
    with closing(open_database(_file(), SCHEMA)) as db:
        yield db


def _rows(db: sqlite3.Connection, sql: str, args: Sequence[Any]) -> list[sqlite3.Row]:
    """Every row of a query, its statement finished (a statement left open would keep its read lock)."""
    with closing(db.execute(sql, args)) as cursor:
        return cursor.fetchall()


def spends(data: str, *, last: int | None = None, private: bool | None = None) -> list[dict]:
    """The spends on the dataset ``data`` (a SHA-256), oldest first: every one, or the ``last`` ones (of the
    private or the other spends only, with ``private``).  A page reads the tail: the ledger grows with every run."""
    where, args = "data = ?", [data]
    if private is not None:
        where, args = where + " and private = ?", [data, str(int(private))]
    with _database() as db:
        if last is None:
            rows = _rows(db, f"select * from spends where {where} order by id", args)
        else:
            rows = _rows(db, f"select * from (select * from spends where {where} order by id desc limit ?) "
                         "order by id", [*args, int(last)])
    return [{**dict(r), "private": bool(r["private"])} for r in rows]


def count(data: str, *, private: bool | None = None) -> int:
    """How many spends the dataset has (of the private or the other ones only, with ``private``)."""
    with _database() as db:
        if private is None:
            return int(_rows(db, "select count(*) from spends where data = ?", (data,))[0][0])
        return int(_rows(db, "select count(*) from spends where data = ? and private = ?", (data, int(private)))[0][0])


def totals(data: str) -> dict[str, float]:
    """Exactly rounded (``math.fsum``) total epsilon of the private spends, per relation.

    The spends are read as distinct epsilons and their counts (from the index ``spends_private``: a few rows
    however long the ledger); the exactly rounded sum of a multiset does not depend on the order of its terms.
    """
    with _database() as db:
        rows = _rows(db, "select relation, epsilon, count(*) from spends where data = ? and private = 1 "
                     "group by relation, epsilon", (data,))
    out: dict[str, list[tuple[float, int]]] = {}
    for relation, epsilon, times in rows:
        out.setdefault(relation, []).append((epsilon, times))
    return {relation: math.fsum(itertools.chain.from_iterable(itertools.repeat(e, n) for e, n in values))
            for relation, values in out.items()}


def budget(data: str) -> float | None:
    with _database() as db:
        rows = _rows(db, "select epsilon from budgets where data = ?", (data,))
    return float(rows[0]["epsilon"]) if rows else None


def set_budget(data: str, epsilon: float | None) -> None:
    """Set (or, with ``None``, remove) the dataset's budget."""
    with _database() as db, db:
        if epsilon is None:
            db.execute("delete from budgets where data = ?", (data,))
        else:
            db.execute("insert into budgets(data, epsilon) values(?, ?) on conflict(data) do update set "
                       "epsilon = excluded.epsilon", (data, float(epsilon)))


def known(data: str, run_key: str | None) -> bool:
    """True when the same run (same data, settings and explicit seed) is in the ledger: it spends nothing new."""
    if run_key is None:
        return False
    with _database() as db:
        return bool(_rows(db, "select 1 from spends where data = ? and run_key = ? limit 1", (data, run_key)))


def check(data: str, epsilon: float, private: bool) -> None:
    """Refuse a private spend of ``epsilon`` that would exceed the dataset's budget."""
    cap = budget(data)
    if cap is None or not private:
        return
    spent = math.fsum(totals(data).values())
    if math.fsum([spent, epsilon]) > cap:
        raise BudgetExceeded(f"refused: epsilon {epsilon:g} on top of {spent:g} already spent on this data would "
                             f"exceed its budget of {cap:g}")


def add(data: str, *, label: str, mechanism: str, relation: str, epsilon: float, private: bool,
        run_key: str | None = None) -> bool:
    """Record a spend; a run already in the ledger (same ``run_key``) is not added again.  True if added."""
    if known(data, run_key):
        return False
    with _database() as db, db:
        db.execute("insert into spends(data, label, mechanism, relation, epsilon, private, run_key, created) "
                   "values(?, ?, ?, ?, ?, ?, ?, ?)",
                   (data, label, mechanism, relation, float(epsilon), int(private and math.isfinite(epsilon)), run_key,
                    datetime.now(UTC).isoformat(timespec="seconds")))
    return True
