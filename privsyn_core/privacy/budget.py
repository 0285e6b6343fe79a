"""The privacy budget: one persistent ledger of every release on a dataset, shared by the library, the CLI and the app.

Sequential composition (Dwork, Roth, "The Algorithmic Foundations of Differential Privacy", 2014, Thm. 3.16):
releases of :math:`\\varepsilon_1, \\dots, \\varepsilon_k`-DP mechanisms on the same data are jointly
:math:`\\sum_i \\varepsilon_i`-DP.  A budget :math:`B` on a dataset is a guarantee only if every release is counted
before its output leaves the process and no two releases can both pass the check :math:`\\sum_i \\varepsilon_i +
\\varepsilon \\le B` on the same total.  :class:`PrivacyLedger` gives that:

* **One file**, SQLite (embedded, durable: write-ahead log with ``synchronous=FULL``), keyed by the dataset's
  identity (the records as the schema reads them, :mod:`privsyn_core.data.identity`, or a name the operator
  chooses) and by the neighbouring relation of each spend.
* **Atomic reserve, then release.**  :meth:`PrivacyLedger.reserve` checks the budget and records the spend in one
  ``BEGIN IMMEDIATE`` transaction (SQLite's write lock: one reservation at a time across threads and processes)
  before the mechanism runs.  A reservation counts in the total at once; a run that dies afterwards (even by
  ``kill -9``) stays counted.  Only a run that never started may hand its reservation back.
* **The operator owns the budget**: :meth:`PrivacyLedger.set_budget` (``python -m privsyn_core budget set``) or
  the ``PRIVSYN_BUDGET`` environment variable (a default for every dataset without its own);
  :meth:`PrivacyLedger.tighten_budget` is all a browser session may do (set one where none is, or lower it).
* **Fail closed.**  A ledger that is missing after it existed, empty (0 bytes), unreadable, damaged or not a
  privsyn ledger refuses every release with one sentence (:class:`LedgerError`).  A new ledger is created only by
  :meth:`PrivacyLedger.create` (``python -m privsyn_core budget init``) or on the first use of the data folder's
  ledger (:func:`default_path` without ``PRIVSYN_LEDGER``: the one default of the library, the CLI and the app, in
  :func:`data_folder`) in a folder that does not exist or is empty and that never held one: creating a ledger
  leaves a marker in the folder and one in the user's configuration folder (:func:`marker_paths`), so a ledger
  deleted after use is refused until the operator runs ``budget init``.  A ledger named by its file
  (``PRIVSYN_LEDGER``, ``--ledger``, a path given to :class:`PrivacyLedger`) must exist: a mistyped path is
  refused, never a fresh ledger with no spends.  Another program's SQLite file is checked read-only and refused
  untouched.
* **Replays.**  A seeded run (its run key) already in the ledger spends nothing new only when it draws the same
  noise: the stored key holds the library's version and the samplers'
  (:data:`~privsyn_core.privacy.noise.SAMPLER_VERSION`), so the same call after an upgrade is charged again.
* **Streams.**  Each step of a stream bound to the ledger is recorded with its batch's identity
  (:meth:`PrivacyLedger.record_stream_step`): a step is released on one batch only, whatever copies of the
  stream's state exist.

The totals are exactly rounded sums (:func:`math.fsum`) over the private spends of every relation: one
budget caps the spends of both relations together (a conservative sum: a spend under replace-one and one under
add/remove are not the same guarantee, and no relation's spends are ever dropped from the check).  Spends of
non-private runs (a mechanism that is not private, a domain read off the data) are recorded apart and never
enter a total.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import math
import os
import sqlite3
import threading
import uuid
from collections.abc import Callable, Iterator
from contextlib import closing, contextmanager, suppress
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TypeVar

from privsyn_core.errors import BudgetExceeded, LedgerError, PrivsynError

#: Environment variables: the ledger's file, the data folder it lives in by default, the operator's default budget.
LEDGER_ENV, DATA_DIR_ENV, BUDGET_ENV = "PRIVSYN_LEDGER", "PRIVSYN_DATA_DIR", "PRIVSYN_BUDGET"
LEDGER_FILE = "ledger.sqlite"
#: Written beside a ledger when it is created: a folder holding it held a ledger.
MARKER_FILE = ".privsyn-ledger"
#: Written into every ledger; a file without it is not a privsyn ledger.
FORMAT = "privsyn-ledger/1"
#: How long a call waits for another writer's lock before it gives up (seconds).
BUSY_TIMEOUT = 30.0

SCHEMA_TABLES = """
create table meta (key text primary key, value text not null);
create table spends (
    id integer primary key autoincrement,
    data text not null, label text not null, mechanism text not null, relation text not null,
    epsilon real not null, private integer not null, status text not null, run_key text, created text not null);
create index spends_private on spends(data, private, relation, epsilon);
create index spends_run on spends(data, run_key);
create table budgets (data text primary key, epsilon real not null, owner text not null, updated text not null);
"""
#: The steps of streams bound to the ledger (added to a ledger of this format that lacks it).
STREAM_SCHEMA = """
create table if not exists stream_steps (
    stream text not null, step integer not null, batch text not null, status text not null, created text not null,
    primary key (stream, step));
"""
#: The columns a ledger of earlier app versions had (upgraded in place, :func:`_migrate_app_ledger`).
_APP_SPENDS = {"data", "label", "mechanism", "relation", "epsilon", "private", "run_key", "created"}
#: The files written of each spend (:meth:`PrivacyLedger.record_release`): a random id, the file's SHA-256 (added to
#: a ledger of this format that lacks it).
RELEASE_SCHEMA = """
create table if not exists releases (
    id text primary key, spend integer not null, sha256 text not null, created text not null,
    unique (spend, sha256));
"""
SCHEMA = SCHEMA_TABLES + STREAM_SCHEMA + RELEASE_SCHEMA

T = TypeVar("T")
#: Statuses of a spend; every one of them counts in the totals.
RESERVED, SPENT, FAILED = "reserved", "spent", "failed"
#: Statuses of a stream's step: recorded before the state is saved, published once its release left the process.
RECORDED, PUBLISHED = "recorded", "published"


def default_path() -> Path:
    """The default ledger of every door (the library, the command line, the app): ``$PRIVSYN_LEDGER``, else
    :func:`data_folder_path`."""
    if os.environ.get(LEDGER_ENV):
        return Path(os.environ[LEDGER_ENV])
    return data_folder_path()


def data_folder() -> Path:
    """The data folder shared by every door: ``$PRIVSYN_DATA_DIR``, else ``$XDG_DATA_HOME/privsyn``
    (``~/.local/share/privsyn/``).  It holds the default ledger and the app's uploads."""
    if os.environ.get(DATA_DIR_ENV):
        return Path(os.environ[DATA_DIR_ENV])
    base = os.environ.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
    return Path(base) / "privsyn"


def data_folder_path() -> Path:
    """The data folder's ledger, :func:`data_folder` ``/ ledger.sqlite``: the one ledger made on its folder's first
    use."""
    return data_folder() / LEDGER_FILE


def check_earlier_default(earlier: str | os.PathLike[str]) -> None:
    """Refuse the default ledger while a ledger sits at ``earlier``, where a door kept it by default before.

    Only when neither ``PRIVSYN_LEDGER`` nor ``PRIVSYN_DATA_DIR`` names the ledger: a deployment whose spends are
    at ``earlier`` would otherwise start again from zero in a new default ledger (fail closed).

    Raises
    ------
    LedgerError
        One line naming both files and the two ways out (point the environment at the earlier ledger, or move it).
    """
    earlier = Path(earlier)
    if os.environ.get(LEDGER_ENV) or os.environ.get(DATA_DIR_ENV) or not earlier.exists():
        return
    current = data_folder_path()
    if earlier.resolve() == current.resolve():
        return
    raise LedgerError(f"a privacy ledger is at {earlier}, the app's earlier default, but the default ledger is "
                      f"{current}: every release is refused so that no spend is forgotten. Set "
                      f"{LEDGER_ENV}={earlier} (or {DATA_DIR_ENV}={earlier.parent} to keep its uploads too), or "
                      f"stop every process using it and move it, with its -wal and -shm files, to {current}")


def marker_paths(path: str | os.PathLike[str]) -> tuple[Path, Path]:
    """Where the creation of the ledger ``path`` is remembered: :data:`MARKER_FILE` in its folder, and a file named
    by the SHA-256 of its absolute path in ``$XDG_CONFIG_HOME/privsyn/ledgers`` (``~/.config/privsyn/ledgers``),
    which outlives the whole folder's removal."""
    path = Path(path).absolute()
    config = Path(os.environ.get("XDG_CONFIG_HOME") or Path.home() / ".config") / "privsyn" / "ledgers"
    return path.parent / MARKER_FILE, config / hashlib.sha256(str(path).encode("utf-8")).hexdigest()


def _leave_markers(path: Path) -> None:
    """Remember that a ledger was made at ``path``, in each place that can be written."""
    beside, remembered = marker_paths(path)
    with suppress(OSError):
        beside.write_text(f"{FORMAT} made here; do not remove: it tells a deleted ledger from a new folder\n")
    with suppress(OSError):
        remembered.parent.mkdir(parents=True, exist_ok=True)
        remembered.write_text(f"{path.absolute()}\n")


def environment_budget() -> float | None:
    """The operator's default budget ``PRIVSYN_BUDGET`` (``None`` when unset or empty).

    Raises
    ------
    LedgerError
        For a value that is not a positive finite number: a typo must not silently mean "no budget".
    """
    text = os.environ.get(BUDGET_ENV, "").strip()
    if not text:
        return None
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not (math.isfinite(value) and value > 0):
        raise LedgerError(f"{BUDGET_ENV}={text!r} is not a positive number: every release is refused until the "
                          "operator sets it to a total epsilon such as 2.0 (or unsets it)")
    return value


def file_id(path: str | os.PathLike[str]) -> str:
    """A CSV file's identity in the ledger: :func:`privsyn_core.data.identity.file_identity` on all its columns,
    the identity :func:`dataset_id` gives the table read from it (never shown to a user).

    Raises
    ------
    DataError
        For a path that is not a readable CSV file (a device such as ``/dev/zero`` is refused before any read).
    """
    from privsyn_core.data.identity import file_identity

    return file_identity(path)


def dataset_id(data: Any) -> str:
    """The identity of an in-memory table (:func:`privsyn_core.data.identity.table_identity` on all its columns):
    the same for its rows in any order, and for its CSV file read by the CLI.

    A table that differs in one record is another dataset: releases on *versions* of a table that grows or changes
    should be named by the operator (``dataset="..."``), so that they meet one budget.
    """
    from privsyn_core.data.domain import as_frame  # the frame synthesize reads: an array's columns get its names
    from privsyn_core.data.identity import table_identity

    return table_identity(as_frame(data))


@dataclass(frozen=True)
class Spend:
    """One row of the ledger: a release (or a non-private run) on a dataset."""

    id: int
    data: str
    label: str
    mechanism: str
    relation: str
    epsilon: float
    private: bool
    status: str
    created: str


@dataclass(frozen=True)
class RecordedRelease:
    """A file written of a spend (:meth:`PrivacyLedger.record_release`): its random id, its SHA-256, the spend."""

    id: str
    sha256: str
    spend: Spend


@dataclass(frozen=True)
class LedgerEntry:
    """Where a release's spend is recorded: the ledger's file and the spend's row (kept on the
    :class:`~privsyn_core.result.SynthResult`, never published; a manifest names the file it writes by a random
    release id instead, :meth:`PrivacyLedger.record_release`)."""

    path: str
    spend: int


#: Ledger files this process has opened: one that disappears afterwards was removed, not "never made".
_SEEN: set[str] = set()
_SEEN_LOCK = threading.Lock()


class PrivacyLedger:
    """A persistent privacy ledger (one SQLite file) with per-dataset budgets.

    Parameters
    ----------
    path : path-like, optional
        The ledger's file (default :func:`default_path`).
    default_budget : float, optional
        The budget of every dataset that has none of its own (default: ``PRIVSYN_BUDGET``, else none).
    require_budget : bool
        Refuse every private release on a dataset that has no budget at all (a release-only server).
    first_use : bool, optional
        Whether a missing file is created on first use (when its folder is missing or empty and never held a
        ledger).  Default: only for the data folder's ledger (``path`` not given and no ``PRIVSYN_LEDGER``); a ledger
        named by its file must exist (:meth:`create`, ``budget init``).

    Notes
    -----
    Every method opens its own connection (or the thread's one inside :meth:`shared_connection`), checks the
    file first (fail closed, see the module docstring) and runs its statements to the end before it returns,
    so no lock outlives a call.  Safe across threads and processes on one machine (SQLite's locking; keep the
    file on a local disk, as SQLite's write-ahead log requires).
    """

    def __init__(self, path: str | os.PathLike[str] | None = None, *, default_budget: float | None = None,
                 require_budget: bool = False, first_use: bool | None = None) -> None:
        self.path = Path(path) if path is not None else default_path()
        self.first_use = first_use if first_use is not None else path is None and not os.environ.get(LEDGER_ENV)
        self.default_budget = default_budget if default_budget is not None else environment_budget()
        self.require_budget = require_budget
        self._local = threading.local()

    def __repr__(self) -> str:
        return f"PrivacyLedger({str(self.path)!r})"

    # -- the file ---------------------------------------------------------------------------------------------

    @classmethod
    def create(cls, path: str | os.PathLike[str] | None = None, *, replace: bool = False) -> PrivacyLedger:
        """Create a new, empty ledger (the operator's explicit command; ``budget init``).

        The file is built beside its final name and renamed into place when complete, so a crash leaves
        either no ledger or a whole one.  An existing file is kept unless ``replace`` (which forgets every
        spend recorded in it).
        """
        target = Path(path) if path is not None else default_path()
        if target.exists() and not replace:
            raise LedgerError(f"a ledger already exists at {target}; pass replace=True (CLI: --force) to start a "
                              "new one, which forgets every spend recorded in it")
        target.parent.mkdir(parents=True, exist_ok=True)
        part = target.with_name(f".{target.name}.{uuid.uuid4().hex}.part")
        try:
            with closing(sqlite3.connect(part, isolation_level=None)) as db:
                db.execute("pragma journal_mode=delete")  # one file while it is built; WAL is set on first use
                db.executescript(f"begin; {SCHEMA} commit;")
                db.execute("insert into meta(key, value) values ('format', ?), ('created', ?)", (FORMAT, _now()))
            with open(part, "rb+") as handle:
                os.fsync(handle.fileno())
            if replace:
                for sidecar in ("-wal", "-shm"):
                    Path(f"{target}{sidecar}").unlink(missing_ok=True)
                os.replace(part, target)
            else:  # a hard link fails if another process made the ledger meanwhile: its spends are never replaced
                with suppress(FileExistsError):
                    os.link(part, target)
            _leave_markers(target)  # after the file: another process seeing a marker sees the ledger
            _fsync_folder(target.parent)
        finally:
            part.unlink(missing_ok=True)
        with _SEEN_LOCK:
            _SEEN.add(str(target.resolve()))
        return cls(target)

    def ensure(self, *, create: bool = True) -> None:
        """Check the file (fail closed) and create it on an empty folder's first use, as every call does.

        ``create=False`` (a command that only reads, ``budget show``) refuses a missing ledger instead."""
        self._check_file(create=create)

    def _check_file(self, *, create: bool = True) -> None:
        """Fail closed before any statement: a missing, empty or never-made file is refused or created."""
        path = self.path
        key = str(path.resolve())
        try:
            size = path.stat().st_size
        except FileNotFoundError:
            with _SEEN_LOCK:
                seen = key in _SEEN
            if seen:
                raise LedgerError(f"the privacy ledger {path} was removed while in use: every release is refused. "
                                  "Restore it from a backup (python -m privsyn_core budget init starts a new one, "
                                  "forgetting every spend)") from None
            if any(marker.exists() for marker in marker_paths(path)):
                raise LedgerError(f"the privacy ledger {path} was made before and is gone (removed?): every release "
                                  "is refused. Restore it from a backup, or start a new one with python -m "
                                  f"privsyn_core budget init --ledger {path} (forgetting every spend)") from None
            if not (create and self.first_use):
                raise LedgerError(f"no privacy ledger at {path}: nothing is read or released through a ledger that "
                                  "does not exist. Check the path (a typo?), or create it with python -m privsyn_core "
                                  f"budget init --ledger {path}") from None
            folder = path.parent
            if folder.exists() and any(folder.iterdir()):
                raise LedgerError(f"no privacy ledger at {path}, and its folder is not empty: it may have been "
                                  "removed, so every release is refused. Restore it, or start a new one with "
                                  f"python -m privsyn_core budget init --ledger {path}") from None
            try:
                PrivacyLedger.create(path)
            except LedgerError:
                if not path.exists():  # pragma: no cover - made and removed by others between two calls
                    raise
            return
        if size == 0:
            raise LedgerError(f"the privacy ledger {path} is empty (0 bytes, truncated?): every release is refused. "
                              "Restore it from a backup, or start a new one with python -m privsyn_core budget init "
                              f"--ledger {path} --force (forgetting every spend)")
        with _SEEN_LOCK:
            _SEEN.add(key)

    def _open(self) -> sqlite3.Connection:
        self._check_file()
        try:
            kind, tables = self._probe()
            if kind is None:
                raise LedgerError(f"{self.path} is not a privsyn ledger ({FORMAT}): every release is refused (the "
                                  "file was left untouched). Point PRIVSYN_LEDGER (or --ledger) at the right file")
            db = sqlite3.connect(self.path, timeout=BUSY_TIMEOUT, isolation_level=None)
            try:
                db.execute("pragma journal_mode=wal")
                db.execute("pragma synchronous=full")
                if kind == "app":
                    _migrate_app_ledger(db)
                if "stream_steps" not in tables:
                    db.executescript(STREAM_SCHEMA)
                if "releases" not in tables:
                    db.executescript(RELEASE_SCHEMA)
                if self.first_use and not marker_paths(self.path)[0].exists():
                    _leave_markers(self.path)  # a ledger made before the markers existed
            except BaseException:
                db.close()
                raise
        except sqlite3.DatabaseError as exc:
            raise LedgerError(f"the privacy ledger {self.path} cannot be read ({exc}): every release is "
                              "refused. Restore it from a backup") from None
        return db

    def _probe(self) -> tuple[str | None, set[str]]:
        """What the file is, read through a read-only connection before anything is written to it: ``"ledger"``
        (this format), ``"app"`` (the app's ledger of earlier versions, upgraded in place) or ``None`` (another
        program's file, refused untouched); and its tables."""
        uri = f"{self.path.absolute().as_uri()}?mode=ro"
        with closing(sqlite3.connect(uri, uri=True, timeout=BUSY_TIMEOUT)) as probe:
            tables = {row[0] for row in probe.execute("select name from sqlite_master where type = 'table'")}
            if "meta" in tables:
                found = probe.execute("select value from meta where key = 'format'").fetchone()
                return ("ledger" if found is not None and found[0] == FORMAT else None), tables
            if {"spends", "budgets"} <= tables:
                columns = {row[1] for row in probe.execute("pragma table_info(spends)")}
                return ("app" if columns >= _APP_SPENDS else None), tables
        return None, tables

    @contextmanager
    def _db(self) -> Iterator[sqlite3.Connection]:
        shared: sqlite3.Connection | None = getattr(self._local, "db", None)
        if shared is not None:
            self._check_file()
            yield shared
            return
        with closing(self._open()) as db:
            yield db

    @contextmanager
    def shared_connection(self) -> Iterator[None]:
        """Let this thread's calls inside the block share one connection (an app page reads the ledger a dozen
        times per script run).  Each call still checks the file and finishes its statements before returning."""
        if getattr(self._local, "db", None) is not None:
            yield
            return
        db = self._open()
        self._local.db = db
        try:
            yield
        finally:
            self._local.db = None
            db.close()

    def _rows(self, sql: str, args: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
        try:
            with self._db() as db, closing(db.execute(sql, args)) as cursor:
                return cursor.fetchall()
        except sqlite3.DatabaseError as exc:
            raise LedgerError(f"the privacy ledger {self.path} cannot be read ({exc}): every release "
                              "is refused. Restore it from a backup") from None

    def _write(self, statements: list[tuple[str, tuple[Any, ...]]]) -> None:
        """Run ``statements`` in one immediate transaction."""
        def run(db: sqlite3.Connection) -> None:
            for sql, args in statements:
                db.execute(sql, args)
        self._transaction(run)

    def _transaction(self, work: Callable[[sqlite3.Connection], T]) -> T:
        """``work(db)`` inside ``BEGIN IMMEDIATE`` (SQLite's write lock, across threads and processes), committed
        when it returns, rolled back when it raises; a database error refuses with one sentence."""
        try:
            with self._db() as db:
                db.execute("begin immediate")
                try:
                    out = work(db)
                except BaseException:
                    db.execute("rollback")
                    raise
                db.execute("commit")
                return out
        except sqlite3.DatabaseError as exc:
            raise LedgerError(f"the privacy ledger {self.path} cannot be written ({exc}): every "
                              "release is refused") from None

    # -- reading ----------------------------------------------------------------------------------------------

    def budget(self, data: str) -> float | None:
        """The dataset's budget: its own (set by the operator or tightened), else the default, else ``None``."""
        rows = self._rows("select epsilon from budgets where data = ?", (data,))
        return float(rows[0][0]) if rows else self.default_budget

    def budget_owner(self, data: str) -> str | None:
        """Who set the dataset's own budget (``"operator"`` or ``"session"``), ``"default"`` for the default
        budget, ``None`` for none."""
        rows = self._rows("select owner from budgets where data = ?", (data,))
        return str(rows[0][0]) if rows else ("default" if self.default_budget is not None else None)

    def totals(self, data: str) -> dict[str, float]:
        """Exactly rounded total epsilon of the private spends (reservations included), per relation.

        Read as distinct epsilons and their counts (an index): a few rows however long the ledger.
        """
        rows = self._rows("select relation, epsilon, count(*) from spends where data = ? and private = 1 "
                          "group by relation, epsilon", (data,))
        return _exact_totals(rows)

    def spent(self, data: str) -> float:
        """Exactly rounded total epsilon of every private spend on the dataset, all relations."""
        return math.fsum(self.totals(data).values())

    def spends(self, data: str, *, last: int | None = None, private: bool | None = None) -> list[Spend]:
        """The dataset's spends, oldest first: every one or the ``last`` ones (of the private or the other ones)."""
        where, args = "data = ?", [data]
        if private is not None:
            where, args = where + " and private = ?", [data, str(int(private))]
        columns = "id, data, label, mechanism, relation, epsilon, private, status, created"
        if last is None:
            rows = self._rows(f"select {columns} from spends where {where} order by id", tuple(args))
        else:
            rows = self._rows(f"select * from (select {columns} from spends where {where} order by id desc limit ?) "
                              "order by id", (*args, int(last)))
        return [Spend(id=int(row[0]), data=str(row[1]), label=str(row[2]), mechanism=str(row[3]), relation=str(row[4]),
                      epsilon=float(row[5]), private=bool(row[6]), status=str(row[7]), created=str(row[8]))
                for row in rows]

    def count(self, data: str, *, private: bool | None = None) -> int:
        """How many spends the dataset has (of the private or the other ones, with ``private``)."""
        if private is None:
            return int(self._rows("select count(*) from spends where data = ?", (data,))[0][0])
        return int(self._rows("select count(*) from spends where data = ? and private = ?",
                              (data, int(private)))[0][0])

    def known(self, data: str, run_key: str | None) -> bool:
        """True when the same run (same data, settings and explicit seed, the same library and samplers: the same
        output) is in the ledger."""
        if run_key is None:
            return False
        return bool(self._rows("select 1 from spends where data = ? and run_key = ? limit 1",
                               (data, versioned_run_key(run_key))))

    def stream_step(self, stream: str, step: int) -> tuple[str, str] | None:
        """The batch identity and status (:data:`RECORDED` or :data:`PUBLISHED`) recorded for a stream's step."""
        rows = self._rows("select batch, status from stream_steps where stream = ? and step = ?", (stream, int(step)))
        return (str(rows[0][0]), str(rows[0][1])) if rows else None

    def record_stream_step(self, stream: str, step: int, batch: str) -> str | None:
        """Record that the stream's ``step`` is released on ``batch`` (its identity), in one transaction.

        Returns ``None`` when the step was not recorded yet (it is now, :data:`RECORDED`), else the batch identity
        recorded earlier (the caller refuses another batch: a step is released once, whatever copies of the
        stream's state exist).
        """
        def record(db: sqlite3.Connection) -> str | None:
            found = db.execute("select batch from stream_steps where stream = ? and step = ?",
                               (stream, int(step))).fetchone()
            if found is not None:
                return str(found[0])
            db.execute("insert into stream_steps(stream, step, batch, status, created) values(?, ?, ?, ?, ?)",
                       (stream, int(step), batch, RECORDED, _now()))
            return None
        return self._transaction(record)

    def publish_stream_step(self, stream: str, step: int) -> None:
        """Mark a stream's step :data:`PUBLISHED`: its release left the process (a re-run adds a new step)."""
        self._write([("update stream_steps set status = ? where stream = ? and step = ?",
                      (PUBLISHED, stream, int(step)))])

    def find_release(self, release_id: str) -> RecordedRelease | None:
        """The file recorded under ``release_id`` (:meth:`record_release`) and its spend; ``None`` if there is none.

        Read-only: the file is never created, upgraded or written, and no file is added beside it (``verify`` checks
        a ledger it may not change).  A ledger with a write-ahead log is read through it (SQLite's ``mode=ro``); one
        without is read as an immutable file, so that SQLite makes no ``-wal`` or ``-shm`` file beside it.

        Raises
        ------
        LedgerError
            When there is no ledger at :attr:`path`, or the file is not a privsyn ledger or cannot be read.
        """
        if not self.path.is_file() or self.path.stat().st_size == 0:
            raise LedgerError(f"no privacy ledger at {self.path}: check the path")
        wal = Path(f"{self.path}-wal")
        uri = f"{self.path.absolute().as_uri()}?mode=ro" + ("" if wal.is_file() else "&immutable=1")
        try:
            with closing(sqlite3.connect(uri, uri=True, timeout=BUSY_TIMEOUT)) as db:
                tables = {row[0] for row in db.execute("select name from sqlite_master where type = 'table'")}
                found = (db.execute("select value from meta where key = 'format'").fetchone() if "meta" in tables
                         else None)
                app = "meta" not in tables and {"spends", "budgets"} <= tables  # earlier app versions: no releases
                if not app and (found is None or found[0] != FORMAT):
                    raise LedgerError(f"{self.path} is not a privsyn ledger ({FORMAT})")
                row = None if "releases" not in tables else db.execute(
                    "select r.id, r.sha256, s.id, s.data, s.label, s.mechanism, s.relation, s.epsilon, s.private, "
                    "s.status, s.created from releases r join spends s on s.id = r.spend where r.id = ?",
                    (release_id,)).fetchone()
        except sqlite3.DatabaseError as exc:
            raise LedgerError(f"the privacy ledger {self.path} cannot be read ({exc})") from None
        if row is None:
            return None
        spend = Spend(id=int(row[2]), data=str(row[3]), label=str(row[4]), mechanism=str(row[5]), relation=str(row[6]),
                      epsilon=float(row[7]), private=bool(row[8]), status=str(row[9]), created=str(row[10]))
        return RecordedRelease(id=str(row[0]), sha256=str(row[1]), spend=spend)

    # -- writing ----------------------------------------------------------------------------------------------

    def record_release(self, spend_id: int, sha256: str) -> str:
        """Record that a file with the SHA-256 ``sha256`` was written of the spend ``spend_id``, before the file is
        published; returns its release id.

        The id is random (:func:`uuid.uuid4`): the release's manifest names its entry here by it, never by the
        dataset's identity (a hash of the records, never shown).  The same bytes of one spend keep their first id.
        """
        def record(db: sqlite3.Connection) -> str:
            if db.execute("select 1 from spends where id = ?", (int(spend_id),)).fetchone() is None:
                raise LedgerError(f"the privacy ledger {self.path} holds no such spend: the release's file is not "
                                  "recorded")
            found = db.execute("select id from releases where spend = ? and sha256 = ?",
                               (int(spend_id), sha256)).fetchone()
            if found is not None:
                return str(found[0])
            release_id = uuid.uuid4().hex
            db.execute("insert into releases(id, spend, sha256, created) values(?, ?, ?, ?)",
                       (release_id, int(spend_id), sha256, _now()))
            return release_id
        return self._transaction(record)

    def set_budget(self, data: str, epsilon: float | None) -> None:
        """The operator sets (or, with ``None``, removes) the dataset's own budget.  Not for browser sessions."""
        if epsilon is None:
            self._write([("delete from budgets where data = ?", (data,))])
            return
        self._write([(_UPSERT_BUDGET, (data, _positive(epsilon), "operator", _now()))])

    def tighten_budget(self, data: str, epsilon: float) -> float:
        """Set the dataset's budget to ``epsilon`` only where that makes it stricter (none yet, or a larger one);
        returns the budget in force.  All a browser session may do: it can never lift or raise a budget."""
        epsilon = _positive(epsilon)
        self._write([("insert into budgets(data, epsilon, owner, updated) values(?, ?, 'session', ?) "
                      "on conflict(data) do update set epsilon = excluded.epsilon, owner = excluded.owner, "
                      "updated = excluded.updated where excluded.epsilon < budgets.epsilon",
                      (data, min(epsilon, self.default_budget or math.inf), _now()))])
        found = self.budget(data)
        assert found is not None
        return found

    def reserve(self, data: str, epsilon: float, *, relation: str, mechanism: str, label: str = "",
                private: bool = True, run_key: str | None = None, stream: str | None = None) -> Reservation:
        """Check the budget and record the spend, in one transaction, before the mechanism runs.

        Parameters
        ----------
        data : str
            The dataset's identity (:func:`file_id`, :func:`dataset_id` or an operator's name).
        epsilon : float
            What the release will spend.
        relation : {"replace", "add_remove"}
        mechanism, label : str
            What the ledger lists (public: never data-derived).
        private : bool
            False for a run with no guarantee (recorded apart, outside every total and budget).
        run_key : str, optional
            The run's full description when it is reproducible (an explicit seed): the same run again
            gives the same output, so it spends nothing new and returns an empty reservation.  Stored with the
            library's and the samplers' versions (:func:`versioned_run_key`): after an upgrade that may draw
            other noise, the same run is charged again.
        stream : str, optional
            A new stream's id: its step 0 is recorded in the same transaction, so a stream bound to this ledger is
            known to it (:meth:`record_stream_step` records its later steps).

        Returns
        -------
        Reservation
            Counted in the totals from now on; :meth:`Reservation.confirm` marks it released,
            :meth:`Reservation.cancel` hands it back (only for a run that never started).

        Raises
        ------
        BudgetExceeded
            When ``spent + epsilon`` would exceed the budget (exactly rounded sums), or no budget is set where
            one is required.  Nothing is recorded then.
        """
        if not (math.isfinite(epsilon) and epsilon > 0):
            private = False  # an infinite spend has no guarantee to add up
        spend_id = self._transaction(  # no other reservation between the check and the insert
            lambda db: self._reserve_locked(db, data, epsilon, relation, mechanism, label, private,
                                            None if run_key is None else versioned_run_key(run_key), stream))
        return Reservation(self, spend_id)

    def _reserve_locked(self, db: sqlite3.Connection, data: str, epsilon: float, relation: str, mechanism: str,
                        label: str, private: bool, run_key: str | None, stream: str | None) -> int | None:
        if run_key is not None and db.execute("select 1 from spends where data = ? and run_key = ? limit 1",
                                              (data, run_key)).fetchone():
            return None
        if private:
            own = db.execute("select epsilon from budgets where data = ?", (data,)).fetchone()
            cap = float(own[0]) if own else self.default_budget
            if cap is None and self.require_budget:
                raise BudgetExceeded("refused: the operator has set no privacy budget for this data (python -m "
                                     f"privsyn_core budget set DATA.csv EPSILON, or {BUDGET_ENV})")
            if cap is not None:
                rows = db.execute("select relation, epsilon, count(*) from spends where data = ? and private = 1 "
                                  "group by relation, epsilon", (data,)).fetchall()
                spent = math.fsum(_exact_totals(rows).values())
                if math.fsum([spent, epsilon]) > cap:
                    raise BudgetExceeded(f"refused: epsilon {epsilon:g} on top of {spent:g} already spent on this "
                                         f"data would exceed its budget of {cap:g}")
        cursor = db.execute("insert into spends(data, label, mechanism, relation, epsilon, private, status, run_key, "
                            "created) values(?, ?, ?, ?, ?, ?, ?, ?, ?)",
                            (data, label or mechanism, mechanism, relation, float(epsilon), int(private), RESERVED,
                             run_key, _now()))
        spend_id = int(cursor.lastrowid or 0)
        if stream is not None:
            db.execute("insert into stream_steps(stream, step, batch, status, created) values(?, 0, ?, ?, ?)",
                       (stream, _creation(spend_id), PUBLISHED, _now()))
        return spend_id

    def _set_status(self, spend_id: int, status: str) -> None:
        self._write([("update spends set status = ? where id = ?", (status, spend_id))])

    def _drop(self, spend_id: int) -> None:
        self._write([("delete from stream_steps where step = 0 and batch = ?", (_creation(spend_id),)),
                     ("delete from spends where id = ? and status = ?", (spend_id, RESERVED))])


class Reservation:
    """A spend recorded by :meth:`PrivacyLedger.reserve`: counted from the moment it exists.

    Used as a context manager, it is confirmed when the block ends normally and marked failed (still
    counted: the mechanism had started) when it raises.
    """

    def __init__(self, ledger: PrivacyLedger, spend_id: int | None) -> None:
        self.ledger, self.spend_id = ledger, spend_id

    @property
    def spends(self) -> bool:
        """False for a run already in the ledger (same run key): it spends nothing new."""
        return self.spend_id is not None

    @property
    def entry(self) -> LedgerEntry | None:
        """The spend's place in the ledger (``None`` for a run already in it, which spends nothing new)."""
        return None if self.spend_id is None else LedgerEntry(str(self.ledger.path.absolute()), self.spend_id)

    def confirm(self) -> None:
        """The release left the process: mark it released (it was counted already)."""
        if self.spend_id is not None:
            self.ledger._set_status(self.spend_id, SPENT)

    def cancel(self) -> None:
        """Hand the reservation back: only for a run that never started (nothing was drawn or shown)."""
        if self.spend_id is not None:
            self.ledger._drop(self.spend_id)
            self.spend_id = None

    def __enter__(self) -> Reservation:
        return self

    def __exit__(self, kind: type[BaseException] | None, *rest: object) -> None:
        if self.spend_id is None:
            return
        self.ledger._set_status(self.spend_id, SPENT if kind is None else FAILED)


def versioned_run_key(run_key: str) -> str:
    """The key a seeded run is stored under: its description with ``privsyn_core.__version__`` and
    :data:`~privsyn_core.privacy.noise.SAMPLER_VERSION`, so only a run that provably draws the same noise is a
    free replay."""
    from privsyn_core import _version
    from privsyn_core.privacy import noise

    return json.dumps([_version.__version__, noise.SAMPLER_VERSION, run_key])


_UPSERT_BUDGET = ("insert into budgets(data, epsilon, owner, updated) values(?, ?, ?, ?) on conflict(data) do update "
                  "set epsilon = excluded.epsilon, owner = excluded.owner, updated = excluded.updated")


def _migrate_app_ledger(db: sqlite3.Connection) -> None:
    """Upgrade, in one transaction, the app's ledger of earlier versions (``spends`` and ``budgets`` tables, no
    ``meta``) to this format: every earlier spend counts as released, every earlier budget as the operator's.
    Nothing is dropped, so no spend is forgotten."""
    db.execute("begin immediate")
    try:
        if not db.execute("select 1 from sqlite_master where type = 'table' and name = 'meta'").fetchone():
            db.execute(f"alter table spends add column status text not null default '{SPENT}'")
            db.execute("alter table budgets add column owner text not null default 'operator'")
            db.execute("alter table budgets add column updated text not null default ''")
            db.execute("create table meta (key text primary key, value text not null)")
            db.execute("insert into meta(key, value) values ('format', ?), ('created', ?)", (FORMAT, _now()))
            db.execute("insert into meta(key, value) values ('migrated', 'app ledger of earlier versions')")
    except BaseException:
        db.execute("rollback")
        raise
    db.execute("commit")


def _creation(spend_id: int) -> str:
    """What a stream's step 0 records: the spend of its whole epsilon."""
    return f"spend:{spend_id}"


def _exact_totals(rows: list[tuple[Any, ...]]) -> dict[str, float]:
    """Exactly rounded sums per relation of ``(relation, epsilon, count)`` rows (order-free: ``math.fsum``)."""
    grouped: dict[str, list[tuple[float, int]]] = {}
    for relation, epsilon, times in rows:
        grouped.setdefault(str(relation), []).append((float(epsilon), int(times)))
    return {relation: math.fsum(itertools.chain.from_iterable(itertools.repeat(e, n) for e, n in values))
            for relation, values in grouped.items()}


def _positive(epsilon: float) -> float:
    epsilon = float(epsilon)
    if not (math.isfinite(epsilon) and epsilon > 0):
        raise PrivsynError(f"a budget must be a positive finite epsilon, got {epsilon:g}")
    return epsilon


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


def _fsync_folder(folder: Path) -> None:
    """Make a rename in ``folder`` durable (POSIX: fsync the directory)."""
    try:
        handle = os.open(folder, os.O_RDONLY)
    except OSError:  # pragma: no cover - platforms without directory handles
        return
    try:
        os.fsync(handle)
    finally:
        os.close(handle)
