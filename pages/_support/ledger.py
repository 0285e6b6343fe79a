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
repository, named in the README).  Nothing in it is shown in release mode but totals, labels and
epsilons; the data's hash is the key, never displayed.
"""

from __future__ import annotations

import math
import os
import sqlite3
from contextlib import closing
from datetime import UTC, datetime
from pathlib import Path

import privsyn_core as ps

DATA_DIR_ENV = "PRIVSYN_DATA_DIR"
DEFAULT_DIR = Path(__file__).resolve().parents[2] / "app-data"
SCHEMA = """
create table if not exists spends (
    id integer primary key autoincrement,
    data text not null, label text not null, mechanism text not null, relation text not null,
    epsilon real not null, private integer not null, run_key text, created text not null);
create index if not exists spends_data on spends(data);
create table if not exists budgets (data text primary key, epsilon real not null);
"""


class BudgetExceeded(ps.PrivsynError):
    """A release would take the private spends on a dataset above its budget."""


def path() -> Path:
    folder = Path(os.environ.get(DATA_DIR_ENV) or DEFAULT_DIR)
    folder.mkdir(parents=True, exist_ok=True)
    return folder / "ledger.sqlite"


#: Ledger files whose tables this process has created (a page reads the ledger several times per rerun).
_READY: set[str] = set()


def _connect() -> sqlite3.Connection:
    file = Path(os.environ.get(DATA_DIR_ENV) or DEFAULT_DIR) / "ledger.sqlite"
    ready = str(file) in _READY and file.exists()
    if not ready:
        file = path()  # makes the folder
    connection = sqlite3.connect(file, timeout=10)
    connection.row_factory = sqlite3.Row
    if not ready:
        connection.executescript(SCHEMA)
        _READY.add(str(file))
    return connection


def spends(data: str, *, last: int | None = None, private: bool | None = None) -> list[dict]:
    """The spends on the dataset ``data`` (a SHA-256), oldest first: every one, or the ``last`` ones (of the
    private or the other spends only, with ``private``).  A page reads the tail: the ledger grows with every run."""
    where, args = "data = ?", [data]
    if private is not None:
        where, args = where + " and private = ?", [data, str(int(private))]
    with closing(_connect()) as db:
        if last is None:
            rows = db.execute(f"select * from spends where {where} order by id", args).fetchall()
        else:
            rows = db.execute(f"select * from (select * from spends where {where} order by id desc limit ?) "
                              "order by id", [*args, int(last)]).fetchall()
    return [{**dict(r), "private": bool(r["private"])} for r in rows]


def count(data: str, *, private: bool | None = None) -> int:
    """How many spends the dataset has (of the private or the other ones only, with ``private``)."""
    with closing(_connect()) as db:
        if private is None:
            return int(db.execute("select count(*) from spends where data = ?", (data,)).fetchone()[0])
        return int(db.execute("select count(*) from spends where data = ? and private = ?",
                              (data, int(private))).fetchone()[0])


def totals(data: str) -> dict[str, float]:
    """Exactly rounded (``math.fsum``) total epsilon of the private spends, per relation (two columns read)."""
    with closing(_connect()) as db:
        rows = db.execute("select relation, epsilon from spends where data = ? and private = 1 order by id",
                          (data,)).fetchall()
    out: dict[str, list[float]] = {}
    for relation, epsilon in rows:
        out.setdefault(relation, []).append(epsilon)
    return {relation: math.fsum(values) for relation, values in out.items()}


def budget(data: str) -> float | None:
    with closing(_connect()) as db:
        row = db.execute("select epsilon from budgets where data = ?", (data,)).fetchone()
    return None if row is None else float(row["epsilon"])


def set_budget(data: str, epsilon: float | None) -> None:
    """Set (or, with ``None``, remove) the dataset's budget."""
    with closing(_connect()) as db, db:
        if epsilon is None:
            db.execute("delete from budgets where data = ?", (data,))
        else:
            db.execute("insert into budgets(data, epsilon) values(?, ?) on conflict(data) do update set "
                       "epsilon = excluded.epsilon", (data, float(epsilon)))


def known(data: str, run_key: str | None) -> bool:
    """True when the same run (same data, settings and explicit seed) is in the ledger: it spends nothing new."""
    if run_key is None:
        return False
    with closing(_connect()) as db:
        return db.execute("select 1 from spends where data = ? and run_key = ?", (data, run_key)).fetchone() \
            is not None


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
    with closing(_connect()) as db, db:
        db.execute("insert into spends(data, label, mechanism, relation, epsilon, private, run_key, created) "
                   "values(?, ?, ?, ?, ?, ?, ?, ?)",
                   (data, label, mechanism, relation, float(epsilon), int(private and math.isfinite(epsilon)), run_key,
                    datetime.now(UTC).isoformat(timespec="seconds")))
    return True
