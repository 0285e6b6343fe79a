"""Uploaded tables kept on disk, so that a browser reload (a new Streamlit session) finds its data again.

A reload starts a new session with an empty ``session_state``.  The upload is therefore kept on the
server: its bytes once per content (``uploads/<sha256>.csv``, deduplicated by content hash), and for
each upload a *dataset id*: a random token (``secrets.token_urlsafe``) that names the file and its
display name.  The app puts the token in the page's URL (``?data=<token>``, ``st.query_params``) and a
new session restores the table from it.  The token is random, not a function of the data: the URL
carries nothing computed from the raw table (the content hash stays on the server).

**Bounded.** At most :data:`MAX_BYTES` bytes of tables are kept (200 MB by default; the environment
variable ``PRIVSYN_UPLOAD_MAX_BYTES`` sets another bound, ``0`` keeps nothing).  Storing a table evicts
the least recently used ones (by their last save or restore) until the total fits; a table larger than
the bound is not kept (the session still uses it; a reload then falls back to the default sample and
says so).  A restore checks the bytes against their hash, so a damaged file is dropped, never used.

**The schema the user typed goes with it.**  The public domain edited on the Data page (bounds,
integer flags, decimals, atoms, category order, each with its source) and the chosen columns are
kept per dataset id (:func:`save_schema`, :func:`load_schema`; at most :data:`MAX_SCHEMA_BYTES` of
JSON), so that a reload restores the table *and* what the user typed about it.  It is public
information the user declared (or a DP estimate, or, in teaching mode, a proposal labelled as read
off the data), stored beside the table and dropped with it.

The folder is ``uploads`` in the data folder of the ledger (:func:`privsyn_core.privacy.budget.data_folder`:
``$PRIVSYN_DATA_DIR``, else ``~/.local/share/privsyn/``).
Uploaded tables hold raw, possibly sensitive data: keep the data folder as private as the data, or set
``PRIVSYN_UPLOAD_MAX_BYTES=0`` on a server that must not keep uploads.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import secrets
import sqlite3
import time
from contextlib import closing
from pathlib import Path
from typing import Any

from . import ledger

MAX_BYTES_ENV = "PRIVSYN_UPLOAD_MAX_BYTES"
#: Default bound on the bytes of tables kept on disk (all uploads together).
MAX_BYTES = 200 * 2**20
#: The form of a dataset id (``secrets.token_urlsafe(16)``): anything else in a URL is ignored.
TOKEN = re.compile(r"[A-Za-z0-9_-]{16,64}")
#: Bound on the JSON of one dataset's schema and chosen columns (a larger one is not kept).
MAX_SCHEMA_BYTES = 2 * 2**20
#: The next value of the use counter: a strict order of saves and restores (clock ties cannot reorder them).
_NEXT_USE = "(select coalesce(max(last_used), 0) + 1 from files)"
SCHEMA = """
create table if not exists files (sha256 text primary key, size integer not null, last_used integer not null);
create table if not exists datasets (token text primary key, sha256 text not null, name text not null,
                                     created real not null);
create table if not exists schemas (token text primary key, body text not null, updated real not null);
"""


def max_bytes() -> int:
    """The bound on kept bytes (:data:`MAX_BYTES` unless ``PRIVSYN_UPLOAD_MAX_BYTES`` says otherwise)."""
    text = os.environ.get(MAX_BYTES_ENV, "").strip()
    try:
        return max(0, int(text)) if text else MAX_BYTES
    except ValueError:
        return MAX_BYTES


def folder() -> Path:
    """The uploads' folder in the data folder; the privacy ledger is made first on an empty folder's first use
    (a data folder with uploads but no ledger is one whose ledger was removed: refused)."""
    ledger.ensure()
    path = ledger.data_dir() / "uploads"
    path.mkdir(parents=True, exist_ok=True)
    return path


#: Index files whose tables this process has created.
_READY: set[str] = set()


def _connect() -> sqlite3.Connection:
    """A connection to the uploads' index (rows by name, 10 s busy timeout), its tables created once per file
    and process, and again when the file is gone."""
    file = folder() / "uploads.sqlite"
    ready = str(file) in _READY and file.exists()
    connection = sqlite3.connect(file, timeout=10)
    connection.row_factory = sqlite3.Row
    if not ready:
        connection.executescript(SCHEMA)
        _READY.add(str(file))
    return connection


def _file(sha: str) -> Path:
    return folder() / f"{sha}.csv"


def save(raw: bytes, name: str) -> str | None:
    """Keep ``raw`` (as ``name``) and return its new dataset id, or ``None`` when it is larger than the bound."""
    cap = max_bytes()
    if len(raw) > cap:
        return None
    sha = hashlib.sha256(raw).hexdigest()
    target = _file(sha)
    if not target.exists():
        partial = target.with_suffix(f".{secrets.token_hex(4)}.part")
        partial.write_bytes(raw)
        partial.replace(target)  # atomic: a reader never sees half a file
    token = secrets.token_urlsafe(16)
    with closing(_connect()) as db, db:
        db.execute(f"insert into files(sha256, size, last_used) values(?, ?, {_NEXT_USE}) on conflict(sha256) do "
                   f"update set last_used = {_NEXT_USE}", (sha, len(raw)))
        db.execute("insert into datasets(token, sha256, name, created) values(?, ?, ?, ?)",
                   (token, sha, name, time.time()))
        _evict(db, cap, keep=sha)
    return token


def _evict(db: sqlite3.Connection, cap: int, keep: str) -> None:
    """Delete the least recently used tables (never ``keep``) until the kept bytes are at most ``cap``."""
    rows = db.execute("select sha256, size from files order by last_used, sha256").fetchall()
    total = sum(r["size"] for r in rows)
    for row in rows:
        if total <= cap:
            break
        if row["sha256"] == keep:
            continue
        _drop(db, row["sha256"])
        total -= row["size"]


def _drop(db: sqlite3.Connection, sha: str) -> None:
    db.execute("delete from schemas where token in (select token from datasets where sha256 = ?)", (sha,))
    db.execute("delete from files where sha256 = ?", (sha,))
    db.execute("delete from datasets where sha256 = ?", (sha,))
    _file(sha).unlink(missing_ok=True)


def load(token: str) -> tuple[bytes, str] | None:
    """The bytes and display name of the dataset ``token``, or ``None`` when it is unknown, evicted or damaged."""
    if not TOKEN.fullmatch(str(token)):
        return None
    with closing(_connect()) as db, db:
        row = db.execute("select sha256, name from datasets where token = ?", (token,)).fetchone()
        if row is None:
            return None
        try:
            raw = _file(row["sha256"]).read_bytes()
        except FileNotFoundError:
            raw = None
        if raw is None or hashlib.sha256(raw).hexdigest() != row["sha256"]:
            _drop(db, row["sha256"])
            return None
        db.execute(f"update files set last_used = {_NEXT_USE} where sha256 = ?", (row["sha256"],))
    return raw, str(row["name"])


def kept_bytes() -> int:
    """Bytes of tables kept now."""
    with closing(_connect()) as db:
        return int(db.execute("select coalesce(sum(size), 0) from files").fetchone()[0])


def save_schema(token: str, entries: dict[str, dict], columns: list[str]) -> bool:
    """Keep the schema entries and chosen columns of the dataset ``token`` (replacing earlier ones).

    Returns ``False`` (and keeps nothing) when the id is unknown or the JSON is larger than :data:`MAX_SCHEMA_BYTES`.
    """
    if not TOKEN.fullmatch(str(token)):
        return False
    body = json.dumps({"entries": entries, "columns": list(columns)}, default=_plain)
    if len(body.encode()) > MAX_SCHEMA_BYTES:
        return False
    with closing(_connect()) as db, db:
        if db.execute("select 1 from datasets where token = ?", (token,)).fetchone() is None:
            return False
        db.execute("insert into schemas(token, body, updated) values(?, ?, ?) on conflict(token) do update set "
                   "body = excluded.body, updated = excluded.updated", (token, body, time.time()))
    return True


def load_schema(token: str) -> dict[str, Any] | None:
    """``{"entries": {...}, "columns": [...]}`` kept for the dataset ``token``; ``None`` if none or unreadable."""
    if not TOKEN.fullmatch(str(token)):
        return None
    with closing(_connect()) as db:
        row = db.execute("select body from schemas where token = ?", (token,)).fetchone()
    try:
        kept = json.loads(row["body"]) if row is not None else None
    except ValueError:
        return None
    if not isinstance(kept, dict) or not isinstance(kept.get("entries"), dict) \
            or not isinstance(kept.get("columns"), list):
        return None
    return kept


def _plain(value: Any) -> Any:
    """numpy scalars (a grid's values) as Python numbers."""
    if hasattr(value, "item"):
        return value.item()
    raise TypeError(f"not JSON: {type(value).__name__}")
