"""The current table: samples, uploads restored from the URL, the parsed-table cache and the chosen columns.

Session state keeps small descriptors (the data bytes, name and SHA-256); parsed tables live in :data:`TABLES`,
shared by all sessions, keyed by the SHA-256 of the file bytes and bounded in bytes
(:mod:`pages._support.table_cache`).  Uploads are kept on disk (:mod:`pages._support.uploads`) so that a
reload restores them with their schema.
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
from typing import Any

import numpy as np
import pandas as pd
import streamlit as st

import privsyn_core as ps
from privsyn_core.data.identity import table_identity
from privsyn_core.data.io import read_csv
from privsyn_core.data.values import select_columns
from privsyn_core.reporting import report

from . import shared, table_cache, uploads
from .state import ASSETS, current, keep, release_mode, set_schema_entries

DEFAULT_SAMPLE = "blobs"
MAX_UPLOAD_MB = 50


def init_state() -> None:
    """Defaults for a new session: the table named in the URL (after a reload), else the default sample."""
    if "data" not in st.session_state:
        restore_or_default()
    name_data_in_url()
    st.session_state.setdefault("result", None)
    st.session_state.setdefault("run", None)
    st.session_state.setdefault("compare", None)
    st.session_state.setdefault("sweep", None)
    st.session_state.setdefault("saved", {})


def load_sample(name: str) -> None:
    schema = json.loads((ASSETS / f"{name}.schema.json").read_text())
    set_data((ASSETS / f"{name}.csv").read_bytes(), f"{name}.csv", sample=name)
    set_schema_entries({c["name"]: {**c, "source": "sample: published public bounds"} for c in schema["columns"]})


def restore_or_default() -> None:
    """A new session (a reload) restores the table its URL names (``?data=<id>`` or ``?sample=<name>``).

    Uploads are kept on disk by :mod:`pages._support.uploads` (bounded, oldest evicted); an id that is no
    longer kept falls back to the default sample with a note.
    """
    token, sample = st.query_params.get("data"), st.query_params.get("sample")
    if token:
        found = uploads.load(token)
        if found is not None:
            with contextlib.suppress(ps.PrivsynError):
                set_data(*found, token=token)
                restore_schema(token)
                return
    load_sample(sample if sample and sample.isidentifier() and (ASSETS / f"{sample}.csv").exists()
                else DEFAULT_SAMPLE)
    if token:  # shown until another table is chosen
        st.session_state.restore_note = ("The table of this link is no longer kept on the server (the oldest "
                                         "uploads are removed to keep the disk bounded): upload it again.")


def restore_schema(token: str) -> None:
    """The schema entries and chosen columns kept with the upload ``token`` (:func:`remember_schema`), if any."""
    kept = uploads.load_schema(token)
    if kept is None:
        return
    names = [str(c) for c in table().columns]
    set_schema_entries({k: e for k, e in kept["entries"].items() if k in names and isinstance(e, dict)})
    chosen = [c for c in kept["columns"] if c in names]
    if chosen:
        shared.set_columns(chosen)
    st.session_state.kept_schema = _schema_json()


def remember_schema() -> None:
    """Keep the current upload's schema entries and chosen columns beside it (public: what the user declared), so
    that a reload restores them (:func:`restore_schema`).  Written only when they changed since the last write."""
    token = (st.session_state.get("data") or {}).get("token")
    if not token:
        return
    body = _schema_json()
    if body != st.session_state.get("kept_schema"):
        uploads.save_schema(token, st.session_state.get("schema_entries", {}), columns())
        st.session_state.kept_schema = body


def _schema_json() -> str:
    return json.dumps([st.session_state.get("schema_entries", {}), columns()], sort_keys=True, default=str)


def name_data_in_url() -> None:
    """Keep the URL naming the current table (``?data=<id>`` or ``?sample=<name>``) on every page: Streamlit
    drops the query parameters when the user changes page, and a reload there must find the same table."""
    data = st.session_state.get("data") or {}
    wanted = ({"sample": data["sample"]} if data.get("sample") else
              {"data": data["token"]} if data.get("token") else {})
    if st.query_params.to_dict() != wanted:
        st.query_params.from_dict(wanted)


def set_data(raw: bytes, name: str, sample: str | None = None, token: str | None = None) -> None:
    """Make ``raw`` the current table (validated by :func:`load_table`) and name it in the page's URL.

    A file that cannot be read clears the previous table, its schema and every result before the error
    is shown: nothing on screen may belong to another file than the one the user just chose.  An upload
    is kept on disk (:mod:`pages._support.uploads`) under a random id that goes into the URL
    (``?data=<id>``; ``token`` when it is restored from there), a sample by its name (``?sample=``), so a
    reload finds the same table.
    """
    st.session_state.pop("restore_note", None)
    digest = report.sha256(raw)
    try:
        frame = load_table(raw, digest)
    except ps.PrivsynError:
        clear_data()
        raise
    if sample is None and token is None:
        token = uploads.save(raw, name)
    st.session_state.data = {"bytes": raw, "name": name, "sha256": digest, "sample": sample, "token": token}
    name_data_in_url()
    st.session_state.data_version = st.session_state.get("data_version", 0) + 1
    # teaching mode leaves identifier-like columns out (the Data page says why); release mode reads nothing off
    # the rows to decide, so every column starts chosen
    left_out = [] if release_mode() else identifier_like(frame)
    st.session_state.identifier_columns = left_out
    shared.set_columns([str(c) for c in frame.columns if str(c) not in left_out])
    _clear_results()


#: A text column is identifier-like when nearly every row has its own value (names, record ids, e-mails).
IDENTIFIER_SHARE = 0.9
IDENTIFIER_MIN_ROWS = 20


def identifier_like(frame: pd.DataFrame) -> list[str]:
    """The text columns with at least :data:`IDENTIFIER_SHARE` distinct values per row (tables of at least
    :data:`IDENTIFIER_MIN_ROWS` rows).  Reads the raw rows: teaching mode only.

    Such a column carries no distribution to learn, and as a categorical column its public domain would have
    to list (nearly) every record's value.
    """
    if len(frame) < IDENTIFIER_MIN_ROWS:
        return []
    text = [c for c in frame.columns if not pd.api.types.is_numeric_dtype(frame[c])
            and not pd.api.types.is_bool_dtype(frame[c])]
    return [str(c) for c in text if frame[c].nunique(dropna=True) >= IDENTIFIER_SHARE * len(frame)]


def clear_data() -> None:
    """No current table (after an upload that could not be read)."""
    st.session_state.data = None
    st.session_state.data_version = st.session_state.get("data_version", 0) + 1
    name_data_in_url()
    shared.set_columns([])
    _clear_results()


def _clear_results() -> None:
    set_schema_entries({})
    st.session_state.bounds_notes = None
    st.session_state.result = st.session_state.run = None
    st.session_state.compare = st.session_state.sweep = None


#: Parsed tables of every session, bounded in bytes (``PRIVSYN_UPLOAD_CACHE_MB``, :mod:`pages._support.table_cache`).
TABLES = table_cache.TableCache()


def load_table(raw: bytes, digest: str | None = None) -> pd.DataFrame:
    """The parsed table of ``raw``, from :data:`TABLES` when present (keyed by ``digest``, the SHA-256 of ``raw``).

    The table is shared between sessions: never modify it in place.  A table larger than the cache's whole
    budget is refused (a :class:`~privsyn_core.errors.ResourceError` naming the limit).
    """
    digest = digest or report.sha256(raw)
    found = TABLES.get(digest)
    if found is not None:
        return found
    with st.spinner("Reading the CSV..."):
        return TABLES.put(digest, read_csv(raw, max_bytes=MAX_UPLOAD_MB * 2**20))


def table() -> pd.DataFrame:
    data = st.session_state.get("data")
    if data is None:
        raise ps.DataError("no data: the last file could not be read; choose a sample or upload a CSV on the Data page")
    return load_table(data["bytes"], data["sha256"])


def columns() -> list[str]:
    """The chosen columns (published by the Data page, :mod:`pages._support.shared`)."""
    return shared.columns()


def frame() -> pd.DataFrame:
    """The chosen columns of the current table."""
    chosen = columns()
    if not chosen:
        raise ps.DataError("choose at least one column on the Data page")
    return select_columns(table(), chosen)


def data_id() -> str:
    """The current dataset's identity in the ledger: the SHA-256 of its bytes (never shown)."""
    table()  # a clear error when there is no data
    return st.session_state.data["sha256"]


#: Operator setting: every release of the server counts against one dataset of this name (one population served).
DATASET_ENV = "PRIVSYN_DATASET"


def ledger_id() -> str:
    """The current dataset's identity in the privacy ledger (never shown).

    An upload: the operator's ``PRIVSYN_DATASET`` name when set (a release-only server serving one population:
    every upload counts against one budget), else the identity of its records on the chosen columns
    (:func:`privsyn_core.data.identity.table_identity`, as the library and the CLI's ``budget set DATA.csv
    --schema S.json`` compute it: any row order, float format or line endings).  A bundled sample: its identity
    qualified by this browser session, so a classroom of sessions on one sample does not share one ledger (a
    reload is a new session and starts a new one).
    """
    table()  # a clear error when there is no data
    data = st.session_state.data
    named = os.environ.get(DATASET_ENV, "").strip()
    if named and not data.get("sample"):
        return named
    identity = _identity(data["sha256"], tuple(columns()))
    if not data.get("sample"):
        return identity
    session = st.session_state.setdefault("ledger_session", secrets.token_hex(16))
    return f"{identity}:session:{session}"


def _identity(sha256: str, chosen: tuple[str, ...]) -> str:
    """The identity of the current table on ``chosen`` columns, computed once per table and choice a session."""
    kept = st.session_state.setdefault("identities", {})
    key = f"{sha256}:{json.dumps(chosen)}"
    if key not in kept:
        kept[key] = table_identity(select_columns(table(), list(chosen)) if chosen else table())
    return kept[key]


#: The neighbouring relation every table starts with: a neighbour adds or removes one record, so the number of
#: records is protected too.  A mechanism calibrated only for "replace" stays unrunnable until the user chooses it.
SAFE_RELATION = "add_remove"


def keep_per_table(widget, label: str, key: str, default: Any, **kwargs: Any) -> Any:
    """:func:`~pages._support.state.keep` for a choice that belongs to one table (the neighbouring relation).

    Each table has its own value, keyed by the SHA-256 of its bytes: a table loaded for the first time in the
    session starts at ``default``, and loading a table seen before brings back the value chosen for it.  Nothing
    chosen for one table reaches another (the ledger's :func:`ledger_id` would not do: an operator's
    ``PRIVSYN_DATASET`` gives every upload one identity, and it changes with the chosen columns).
    """
    table_key = (st.session_state.get("data") or {}).get("sha256")
    per_table = st.session_state.setdefault("table_choices", {}).setdefault(key, {})
    owners = st.session_state.setdefault("table_choice_owners", {})
    if owners.get(key, "") != table_key:  # another table since the widget was last drawn
        st.session_state[key] = st.session_state.setdefault("saved", {})[key] = per_table.get(table_key, default)
        owners[key] = table_key
    per_table[table_key] = keep(widget, label, key, default, **kwargs)
    return per_table[table_key]


def current_per_table(key: str, default: Any, options: list) -> Any:
    """The value :func:`keep_per_table` draws the widget ``key`` with in this run, read before it is drawn."""
    table_key = (st.session_state.get("data") or {}).get("sha256")
    if st.session_state.get("table_choice_owners", {}).get(key, "") != table_key:
        value = st.session_state.get("table_choices", {}).get(key, {}).get(table_key, default)
        return value if value in options else default
    return current(key, default, options)


def real_of(result: ps.SynthResult) -> pd.DataFrame:
    """The real columns a run used (teaching only), whatever the Data page has chosen since."""
    return select_columns(table(), [c["name"] for c in result.schema["columns"]])


def unit_real(result: ps.SynthResult) -> np.ndarray:
    """The real rows (teaching only) in the unit coordinates of the run's schema (not the editor's current one)."""
    return report.schema_encode(table(), result.schema)
