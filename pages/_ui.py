"""Shared Streamlit state, caches and widgets of the app (the only app module with logic).

Session state keeps small descriptors: the data bytes and name, the chosen columns, the
schema entries, the privacy ledger and the last result.  Parsed tables live in :data:`TABLES`,
shared by all sessions, keyed by the SHA-256 of the file bytes and bounded in bytes
(:mod:`pages._support.table_cache`); runs and metrics in ``st.cache_data`` functions keyed by a
run's JSON key (never by a DataFrame, which Streamlit hashes from a sample above 50k rows).
What a run's view and downloads need is made once per run and kept in the session
(:func:`synthetic_table`, :func:`run_view`); download files are built only on a click.
"""

from __future__ import annotations

import contextlib
import functools
import gc
import json
import math
import os
import runpy
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import streamlit as st

import privsyn_core as ps
from privsyn_core.data.dp_bounds import dp_bounds
from privsyn_core.data.io import read_csv, to_csv_bytes
from privsyn_core.engine import resources
from privsyn_core.privacy.accounting import ledger_total
from privsyn_core.reporting import report
from privsyn_core.reporting.figures import NOT_PRIVATE

from ._support import ledger as store, output, shared, stakeholder, table_cache, uploads
from ._support.text import md


def freeze_import_heap() -> None:
    """Move every object alive now (the imported modules of Streamlit, pandas, Plotly, privsyn) out of the
    cyclic garbage collector's reach (:func:`gc.freeze`), once per server process.

    A full collection walks every tracked object: about 200,000 after the imports, 0.46-0.62 s per
    collection measured on this 2-core machine under load, during which no other thread (the event loop that
    sends every session's messages included) runs.  Streamlit collected after every script run, including every
    run stopped by a rerun (``runner.postScriptGC``, now off in ``.streamlit/config.toml``), and the
    collector also starts by itself in any thread, possibly one holding Streamlit's media file lock.  Under
    20 sessions that saturated the interpreter: the root cause of the "stuck" sessions (docs/security.md).
    Frozen, a full collection walks only the objects made since (0.04-0.06 s measured).  Objects frozen here
    are still freed by reference counting; only cycles among them are never collected.
    """
    gc.collect()
    gc.freeze()

ROOT = Path(__file__).resolve().parent.parent
ASSETS = ROOT / "assets"
DEFAULT_SAMPLE = "blobs"
MAX_UPLOAD_MB = 50
EPSILONS = (0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1.0, 2.0, 5.0, 10.0, 20.0, 50.0, 100.0)
LIVE_MAX_ROWS = 10_000
SCHEMA_FIELDS = ("name", "kind", "lo", "hi", "categories", "integer", "source")
ENTRYPOINT_FLAG = "_entrypoint_running"
#: Server-side switch of a release-only deployment (documented in the README).
RELEASE_ONLY_ENV = "PRIVSYN_RELEASE_ONLY"
PROPOSED = "proposed from the data: NOT private"


def require_entrypoint() -> None:
    """Make sure this page runs inside ``app.py`` (shared state, sidebar, navigation).

    A folder named ``pages/`` next to the entry point switches Streamlit to its legacy
    multipage mode until some run calls ``st.navigation``.  In that mode (a deep link as
    the first request after the server starts, and every AppTest run) Streamlit runs the
    page script on its own.  The page then runs the entry point in its place, which
    navigates back to this page (with the flag set), and stops; widget triggers such as
    button clicks belong to this same run, so none is lost.
    """
    if not st.session_state.get(ENTRYPOINT_FLAG):
        runpy.run_path(str(ROOT / "app.py"), run_name="__main__")
        st.stop()


# -- state -------------------------------------------------------------------------------------
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


def keep(widget, label: str, key: str, default: Any, **kwargs: Any) -> Any:
    """Call ``widget(label, key=key, **kwargs)`` keeping its value across pages.

    Streamlit drops a widget's state when another page runs; the value is saved in
    ``session_state.saved`` and restored when the widget is drawn again.  Pass choices as
    ``options=`` so a saved value that is no longer an option falls back to ``default``.
    """
    saved = st.session_state.setdefault("saved", {})
    options = list(kwargs["options"]) if "options" in kwargs else None
    if key not in st.session_state or not _valid(st.session_state[key], options):
        value = saved.get(key, default)
        st.session_state[key] = value if _valid(value, options) else default
    saved[key] = widget(label, key=key, **kwargs)
    return saved[key]


def capped(widget, label: str, key: str, default: Any, *, max_value: int | float, **kwargs: Any) -> Any:
    """:func:`keep` for a number widget whose maximum may have shrunk since its value was set.

    A kept value above ``max_value`` (say, rows chosen before more columns were) is lowered to it first:
    Streamlit refuses a widget whose value exceeds its maximum.
    """
    saved = st.session_state.setdefault("saved", {})
    for holder in (st.session_state, saved):
        if key in holder and holder[key] is not None and holder[key] > max_value:
            holder[key] = type(holder[key])(max_value)
    return keep(widget, label, key, min(default, max_value), max_value=max_value, **kwargs)


def saved_value(key: str, default: Any = None) -> Any:
    return st.session_state.get("saved", {}).get(key, default)


def forget(key: str) -> None:
    """Drop a widget's kept value, so that :func:`keep` draws it with its default next time."""
    st.session_state.get("saved", {}).pop(key, None)
    st.session_state.pop(key, None)


def _valid(value: Any, options: list | None) -> bool:
    if options is None:
        return True
    if isinstance(value, list):
        return all(v in options for v in value)
    return value in options


def release_locked() -> bool:
    """True in a release-only deployment: ``PRIVSYN_RELEASE_ONLY=1`` in the server's environment.

    The server's setting, not the session's: a reload or a new session starts in release mode again
    and no widget can turn it off.
    """
    return os.environ.get(RELEASE_ONLY_ENV, "").strip().lower() in ("1", "true", "yes", "on")


def release_mode() -> bool:
    return release_locked() or bool(saved_value("w_release", False))


def release_rng() -> str | int:
    """The generator of a release: always the secure one (tests replace this to compare neighbours)."""
    return "secure"


def enforce_mode() -> None:
    """Entering release mode drops everything the teaching mode left behind.

    A result made in teaching mode (seeded, maybe non-private, maybe on a domain read off the data)
    must not stay on screen or be downloadable as "the private release"; the several-mechanism table
    and the sweep hold metrics on raw data; domains proposed from the data must not stay visible.
    """
    if not release_mode():
        return
    if st.session_state.get("result") is not None and st.session_state.get("result_mode") != "release":
        st.session_state.result = st.session_state.run = None
    st.session_state.compare = st.session_state.sweep = None
    if (st.session_state.get("bounds_notes") or {}).get("clipped") is not None:  # teaching notes read raw rows
        st.session_state.bounds_notes = None
    entries = st.session_state.get("schema_entries", {})
    if any(e.get("source") == PROPOSED for e in entries.values()):
        set_schema_entries({k: e for k, e in entries.items() if e.get("source") != PROPOSED})


def store_result(result: ps.SynthResult, key: dict) -> None:
    st.session_state.result, st.session_state.run = result, key
    st.session_state.result_mode = "release" if release_mode() else "teaching"


def drop_result() -> None:
    st.session_state.result = st.session_state.run = None


def mechanisms() -> list[ps.MechanismSpec]:
    """The mechanisms offered: in release mode only the differentially private ones."""
    return [s for s in ps.list_mechanisms() if s.is_private or not release_mode()]


def not_private(what: str = "this view") -> None:
    """The label every teaching view on raw data carries."""
    st.caption(f":orange[**:material/warning: {NOT_PRIVATE}**] ({what})")


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
    shared.set_columns([str(c) for c in frame.columns])
    _clear_results()


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


def set_schema_entries(entries: dict[str, dict]) -> None:
    st.session_state.schema_entries = entries
    st.session_state.schema_version = st.session_state.get("schema_version", 0) + 1


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
    return table()[chosen]


def schema() -> ps.Schema:
    """The schema of the chosen columns from the editor's entries; a clear error when incomplete."""
    entries = st.session_state.get("schema_entries", {})
    missing = [c for c in columns() if c not in entries or not _complete(entries[c])]
    if missing:
        raise ps.SchemaError(f"column(s) {missing} have no public domain yet: type bounds/categories on the Data "
                             "page, estimate them with DP, or propose them from the data (not private)")
    return ps.Schema.from_dict({"columns": [_column_dict(entries[c]) for c in columns()]})


def _complete(entry: dict) -> bool:
    if entry.get("kind") == "categorical":
        return bool(entry.get("categories"))
    return all(entry.get(k) is not None and not pd.isna(entry.get(k)) for k in ("lo", "hi"))


def _column_dict(entry: dict) -> dict:
    out = {k: entry[k] for k in ("name", "kind", "public") if k in entry}
    if entry.get("kind") == "categorical":
        out["categories"] = list(entry["categories"])
    else:
        out.update(lo=float(entry["lo"]), hi=float(entry["hi"]), integer=bool(entry.get("integer", False)))
    if entry.get("atoms"):  # the schema validates them (numbers, inside the bounds, numeric columns only)
        out["atoms"] = list(entry["atoms"])
    return out


@contextlib.contextmanager
def user_errors() -> Iterator[None]:
    """Show a :class:`PrivsynError` as an error box instead of a traceback."""
    try:
        yield
    except ps.PrivsynError as exc:
        st.error(md(str(exc).strip().splitlines()[0]) if str(exc).strip() else type(exc).__name__)
    except MemoryError:
        st.error("out of memory: use fewer rows, fewer cells or a smaller synthetic size")


# -- schema sources ----------------------------------------------------------------------------
def propose_from_data() -> None:
    if release_mode():
        raise ps.SchemaError("release mode: a domain read off the data is not private; type it or estimate it "
                             "with DP")
    proposal = ps.Schema.infer(frame())
    set_schema_entries({**st.session_state.schema_entries,
                        **{c.name: {**c.to_dict(), "source": PROPOSED}
                           for c in proposal.columns}})


def estimate_dp_bounds(epsilon: float, neighbouring: str) -> None:
    """DP bounds for the numeric columns that have no typed bounds (typed ones are never overwritten).

    The notes (the library's warnings and, in teaching mode only, the share of rows each estimate clips)
    are kept in ``session_state.bounds_notes`` for the page to show after its rerun.
    """
    entries = dict(st.session_state.schema_entries)
    typed = {c for c, e in entries.items() if e.get("source") == "typed by the user" and _complete(e)}
    numeric = [c for c in columns() if pd.api.types.is_numeric_dtype(table()[c]) and c not in typed]
    if not numeric:
        raise ps.DataError("every chosen numeric column has typed bounds: DP bounds fill only the others")
    rng = release_rng() if release_mode() else shared.seed()
    store.check(data_id(), epsilon, True)
    found = dp_bounds(frame(), numeric, epsilon, neighbouring=neighbouring, rng=rng)
    for col in found.schema.columns:
        entries[col.name] = {**col.to_dict(), "source": f"DP bounds (epsilon {epsilon:g})"}
    set_schema_entries(entries)
    store.add(data_id(), label=f"DP bounds of {len(numeric)} column(s)", mechanism="dp_bounds",
              relation=neighbouring, epsilon=ledger_total(found.ledger), private=True)
    notes = [md(w) for w in found.warnings]
    if typed:
        notes.append("Columns with typed bounds were left as typed: " + ", ".join(md(c) for c in sorted(typed)) + ".")
    clipped = None
    if not release_mode():
        raw = table()
        clipped = {c.name: float(((raw[c.name] < c.lo) | (raw[c.name] > c.hi)).mean()) for c in found.schema.columns}
    st.session_state.bounds_notes = {"notes": notes, "clipped": clipped}


# -- runs --------------------------------------------------------------------------------------
def run_key(mechanism: str, epsilon: float, params: dict, neighbouring: str, seed: int | None,
            n_synthetic: int | None) -> dict[str, Any]:
    """Everything that determines a run's output."""
    return {"sha256": data_id(), "columns": columns(), "schema": schema().to_dict(),
            "mechanism": mechanism, "params": params, "epsilon": float(epsilon), "neighbouring": neighbouring,
            "seed": seed, "n_synthetic": n_synthetic}


@st.cache_data(max_entries=24, show_spinner=False)
def _cached_run(key_json: str, _frame: pd.DataFrame) -> ps.SynthResult:
    key = json.loads(key_json)
    return ps.synthesize(_frame, key["mechanism"], key["epsilon"], schema=key["schema"],
                         neighbouring=key["neighbouring"], n_synthetic=key["n_synthetic"], rng=key["seed"],
                         **key["params"])


def execute(key: dict[str, Any], label: str = "") -> ps.SynthResult:
    """Run (cached in teaching mode; a fresh secure release in release mode) and record it in the ledger.

    A run already in the ledger (teaching mode: same data, settings and seed) spends nothing new; any
    other private run is refused before it starts when it would exceed the data's budget.
    """
    run_key = None if release_mode() else json.dumps(key, sort_keys=True)
    private = ps.get_mechanism(key["mechanism"]).is_private and ps.Schema.from_dict(key["schema"]).dp_valid
    if not store.known(data_id(), run_key):
        store.check(data_id(), float(key["epsilon"]), private)
    if release_mode():
        result = ps.synthesize(frame(), key["mechanism"], key["epsilon"], schema=key["schema"],
                               neighbouring=key["neighbouring"], n_synthetic=key["n_synthetic"],
                               rng=release_rng(), **key["params"])
    else:
        result = _cached_run(json.dumps(key, sort_keys=True), frame())
    kind = "release" if release_mode() else "teaching run"
    store.add(data_id(), label=f"{key['mechanism']} ({kind}{label})", mechanism=key["mechanism"],
              relation=key["neighbouring"], epsilon=result.epsilon,
              private=result.dp_valid and ps.get_mechanism(key["mechanism"]).is_private, run_key=run_key)
    return result


def data_id() -> str:
    """The current dataset's identity in the ledger: the SHA-256 of its bytes (never shown)."""
    table()  # a clear error when there is no data
    return st.session_state.data["sha256"]


@st.cache_data(max_entries=24, show_spinner="Computing the metrics on the real data (not private)...")
def evaluation(key_json: str, _real: pd.DataFrame, _synthetic: pd.DataFrame, schema_json: str,
               target: str | None) -> dict:
    return report.evaluate_subsampled(_real, _synthetic, ps.Schema.from_dict(json.loads(schema_json)), target=target)


def evaluate_result(result: ps.SynthResult, key: dict) -> dict:
    """The metrics of a run (teaching mode only), cached by the run's key and the TSTR target."""
    target = shared.tstr_target()
    target = target if target in [c["name"] for c in result.schema["columns"]] else None
    return evaluation(json.dumps(key, sort_keys=True), real_of(result), result.data, json.dumps(result.schema), target)


# -- sidebar -----------------------------------------------------------------------------------
def sidebar_controls() -> None:
    with st.sidebar:
        if release_locked():
            st.success("Release-only deployment: only private outputs are shown, and teaching mode is switched "
                       "off on this server.")
        else:
            keep(st.toggle, "Release mode", "w_release", False,
                 help="Release mode never shows raw data, true counts or metrics on raw data, and draws noise "
                      "from a cryptographically secure generator (runs cannot be reproduced by a seed).")
            if release_mode():
                st.success("Release mode: only private outputs are shown.")
            else:
                st.info(f"Teaching mode: views marked '{NOT_PRIVATE}' read the raw data.")
        enforce_mode()
        st.session_state.sidebar_data = st.empty()  # filled after the page ran: an upload there is the current data


def sidebar_data() -> None:
    """The sidebar's line naming the current data, drawn after the page (which may have loaded new data)."""
    data = st.session_state.get("data")
    slot = st.session_state.pop("sidebar_data", None) or st.sidebar.empty()
    note = st.session_state.get("restore_note")
    if note:
        st.sidebar.warning(note)
    if data is None:
        slot.caption("Data: none (the last file could not be read)")
        return
    rows = "" if release_mode() else f"{len(table()):,} rows, "
    slot.caption(f"Data: **{md(data['name'])}**, {rows}{len(columns())} column(s) chosen")


RELATION_WORDS = {"replace": "replacing one record", "add_remove": "adding or removing one record"}


def sidebar_ledger() -> None:
    """The data's privacy ledger and budget (drawn after the page ran, so it includes this run's spends).

    Kept in SQLite by the data's content (:mod:`pages._support.ledger`): a reload, a new session or
    a server restart meets the same spends.
    """
    if st.session_state.get("data") is None:
        return
    did = data_id()
    with st.sidebar:
        st.subheader("Privacy ledger of this data")
        cap = store.budget(did)
        value = st.number_input("Budget for this data (total epsilon; 0 = no budget)", min_value=0.0, step=0.5,
                                value=float(cap or 0.0), key=f"w_budget_{st.session_state.get('data_version', 0)}",
                                help="Private releases that would take the total above it are refused.")
        if value != float(cap or 0.0):
            store.set_budget(did, value or None)
            cap = value or None
        spends = store.spends(did)
        private = [e for e in spends if e["private"]]
        others = [e for e in spends if not e["private"]]
        totals = store.totals(did)
        if not private:
            st.caption("No private release on this data yet.")
        for relation, total in totals.items():
            st.metric(f"Total epsilon ({relation.replace('_', '/')})", f"{total:g}",
                      help=f"Private releases on this data whose neighbours differ by "
                           f"{RELATION_WORDS.get(relation, relation)}")
        spent = math.fsum(totals.values())
        if cap:
            st.progress(min(spent / cap, 1.0), text=f"{spent:g} of the budget {cap:g} spent")
        if private:
            shown = private[-8:]
            lines = [f"{i}. {md(e['label'])}: **epsilon {e['epsilon']:g}**"
                     for i, e in enumerate(shown, len(private) - len(shown) + 1)]
            st.markdown("\n".join(lines))
            st.caption("Releases on the same data compose: their epsilons add up. Re-running with a new seed "
                       "spends epsilon again; the same teaching run with the same seed does not.")
        if others:
            with st.expander(f"Not private: {len(others)} run(s), outside the budget"):
                st.markdown("\n".join(f"- {md(e['label'])}" for e in others[-8:]))
                st.caption("A mechanism that is not private, or a domain read off the data (dp_valid = False): "
                           "no privacy guarantee, so no epsilon to add up.")


# -- mechanism widgets -------------------------------------------------------------------------
def max_synthetic_rows() -> int:
    """The most synthetic rows the memory budget holds for the chosen columns (:func:`resources.max_rows`).

    Reads only public inputs: the number of columns and ``PRIVSYN_MEMORY_BUDGET_MB``.
    """
    return resources.max_rows(max(len(columns()), 1))


def row_cap_caption(limit: int) -> str:
    return (f"At most {limit:,} rows for {max(len(columns()), 1)} column(s): the memory budget of "
            f"{resources.budget_bytes() / 2**20:,.0f} MB (PRIVSYN_MEMORY_BUDGET_MB).")


def _budget_caps() -> dict[tuple[str, str], tuple[int, str]]:
    """Size parameters capped by the memory budget: (mechanism, parameter) -> (largest value, what it sizes)."""
    return {("pmm", "depth"): (resources.max_pmm_depth(), f"2^depth leaves at {resources.PMM_BYTES_PER_LEAF} bytes "
                                                          "each")}


def param_widgets(spec: ps.MechanismSpec) -> dict[str, Any]:
    """One widget per parameter; returns the values (None = auto)."""
    values = {}
    for name, p in spec.params.items():
        key = f"w_param_{spec.name}_{name}"
        label = f"{name}"
        if p.type is bool:
            values[name] = keep(st.checkbox, label, key, bool(p.default), help=p.help)
        elif p.type is str:
            choices = list(p.choices or [p.default])
            values[name] = keep(st.selectbox, label, key, p.default if p.default in choices else choices[0],
                                options=choices, help=p.help)
        else:
            values[name] = _number_param(name, p, key, spec.name)
    return values


def _number_param(name: str, p: ps.ParamSpec, key: str, spec_name: str) -> Any:
    options = (["auto"] if p.default is None else []) + [str(c) for c in (p.choices or ())] + ["number"]
    default = "auto" if p.default is None else (str(p.default) if p.choices and p.default in p.choices else "number")
    mode = default
    if len(options) > 1:
        mode = keep(st.selectbox, f"{name}", f"{key}_mode", default, options=options, help=p.help)
    if mode == "auto":
        return None
    if mode != "number":
        return next(c for c in (p.choices or ()) if str(c) == mode)
    lo, hi = p.bounds if p.bounds else (None, None)
    number_default = p.default if isinstance(p.default, (int, float)) and not isinstance(p.default, bool) else lo
    if p.type is int:
        cap = _budget_caps().get((spec_name, name))
        if cap is not None:
            hi = cap[0] if hi is None else min(int(hi), cap[0])
            value = int(capped(st.number_input, f"{name} value", key,
                               int(number_default if number_default is not None else 1),
                               min_value=None if lo is None else int(lo), max_value=int(hi), step=1, help=p.help))
            st.caption(f"{name} at most {hi}: the memory budget of {resources.budget_bytes() / 2**20:,.0f} MB "
                       f"(PRIVSYN_MEMORY_BUDGET_MB) holds {cap[1]} up to {name} = {cap[0]}.")
            return value
        return int(keep(st.number_input, f"{name} value", key,
                        int(number_default if number_default is not None else 1),
                        min_value=None if lo is None else int(lo), max_value=None if hi is None else int(hi),
                        step=1, help=p.help))
    return float(keep(st.number_input, f"{name} value", key,
                      float(number_default if number_default is not None else 1.0),
                      min_value=None if lo is None else float(lo), max_value=None if hi is None else float(hi),
                      help=p.help))


def epsilon_guidance(epsilon: float) -> str:
    ratio = math.exp(epsilon)
    level = ("very strong privacy" if epsilon <= 0.1 else "strong privacy" if epsilon <= 1
             else "moderate privacy" if epsilon <= 5 else "weak privacy: mostly for teaching")
    return (f"**epsilon = {epsilon:g}: {level}.** Whatever an observer believes about any one person, seeing the "
            f"release changes the odds by at most a factor e^epsilon = {ratio:.3g}. Smaller epsilon means more "
            "noise and less accuracy.")


# -- downloads ---------------------------------------------------------------------------------
#: Largest synthetic CSV kept in memory between two download clicks of the same run (larger ones are rebuilt).
CSV_KEEP_BYTES = 64 * 2**20
#: Download views (shaped table, report, builders) a session keeps: Synthesize's and Compare's of one run.
VIEWS_KEPT = 2


def downloads(result: ps.SynthResult, key: dict, metrics: dict | None = None) -> None:
    """Synthetic CSV, JSON run report and the HTML stakeholder report, each built only when downloaded.

    Every file is built on the click, by Streamlit's deferred download (``data`` a callable, ``on_click="ignore"``)
    in a worker thread, never during a page run: a rerun only registers three small callables.  Before, the
    CSV was built on every rerun (0.41 s at 10^5 rows) and handed to Streamlit's media file manager, whose global
    lock every session's script thread also takes at the start of each run.  The callables and what they read
    are made once per run (:func:`run_view`), so a rerun that changed no setting does no work here.

    In teaching mode both reports carry the metrics: ``metrics`` when the page has them already (Compare), else
    they are computed when a report is downloaded, so a run never waits for an evaluation nobody asked for (under
    concurrent sessions those evaluations queued into minute-long stalls).  Release mode has no metrics.
    """
    view = run_view(result, key, metrics)
    cols = st.columns(3)
    cols[0].download_button("Download synthetic CSV", data=view["csv"], file_name="synthetic.csv", mime="text/csv",
                            on_click="ignore", key="dl_csv")
    cols[1].download_button("Download JSON report", data=view["json"], file_name="run_report.json",
                            mime="application/json", on_click="ignore", key="dl_json")
    cols[2].download_button("Export stakeholder report (HTML)", data=view["html"], file_name="privsyn_report.html",
                            mime="text/html", on_click="ignore", key="dl_html")
    st.caption("The stakeholder report is one small HTML file in plain words (no scripts); the JSON report holds "
               "every technical detail.")
    st.caption("The JSON report reproduces the run: save its 'schema' as schema.json and run")
    st.code(view["run"]["cli"], language="bash", wrap_lines=True)
    with st.expander("What the JSON report contains" + (" (release only)" if release_mode() else "")):
        st.json({k: v for k, v in view["run"].items() if k != "created"}, expanded=False)


def run_view(result: ps.SynthResult, key: dict, metrics: dict | None = None) -> dict[str, Any]:
    """What the downloads of one run need, made once per run and kept in the session (:data:`VIEWS_KEPT`).

    ``run`` is the JSON report without metrics (shown on the page); ``csv``, ``json`` and ``html`` build the
    files when called.  Their inputs are gathered now, since they run later, on a click, in a thread without
    the script's session; the ledger is read at the click, so a file always carries the spends of that moment.
    The view is made again when anything it shows changes: the run, the mode, the declared decimals, the
    TSTR target, whether the page passed metrics, or the number of spends on the data.
    """
    did = data_id()
    target = shared.tstr_target()
    decimals = {k: e.get("decimals") for k, e in st.session_state.get("schema_entries", {}).items()}
    token = json.dumps([key, release_mode(), target, metrics is not None, decimals, len(store.spends(did))],
                       sort_keys=True, default=str)
    views = st.session_state.setdefault("_run_views", {})
    found = views.get(token)
    if found is not None and found["result"] is result:
        return found
    run_report = report_builder(result, key)
    report_metrics = metrics_on_demand(result, metrics)
    inputs = stakeholder_inputs(result)

    def json_report() -> str:
        return json.dumps(run_report(metrics=report_metrics(), extra_ledger=ledger_rows(did)), indent=1,
                          default=str)

    def html_report() -> str:
        return stakeholder.build(**inputs, totals=store.totals(did), budget=store.budget(did),
                                 ledger=ledger_rows(did), metrics=metrics_table_or_none(report_metrics()))

    view = {"result": result, "run": run_report(), "csv": csv_builder(inputs["shaped"]), "json": json_report,
            "html": html_report}
    while len(views) >= VIEWS_KEPT:
        views.pop(next(iter(views)))
    views[token] = view
    return view


def csv_builder(shaped: pd.DataFrame, keep_bytes: int = CSV_KEEP_BYTES):
    """A callable returning ``to_csv_bytes(shaped)``: built on its first call, kept if at most ``keep_bytes``."""
    kept: list[bytes] = []

    def build() -> bytes:
        if kept:
            return kept[0]
        data = to_csv_bytes(shaped)
        if len(data) <= keep_bytes:
            kept.append(data)
        return data

    return build


def synthetic_table(result: ps.SynthResult) -> pd.DataFrame:
    """The released rows as the user sees and downloads them (integers, declared decimals, no -0).

    Shaped once per run and declared decimals, then kept in the session: reruns reuse it.
    """
    entries = st.session_state.get("schema_entries", {})
    decimals = {k: e.get("decimals") for k, e in entries.items()}
    memo = st.session_state.get("_shaped")
    if memo is not None and memo["result"] is result and memo["decimals"] == decimals:
        return memo["table"]
    table = output.shaped(result.data, result.schema, decimals)
    st.session_state["_shaped"] = {"result": result, "decimals": decimals, "table": table}
    return table


def shown_ledger() -> list[dict]:
    """The data's ledger as reports show it (no data fingerprint, no internal keys)."""
    return ledger_rows(data_id())


def ledger_rows(did: str) -> list[dict]:
    """The ledger of the data ``did`` as reports show it (readable from any thread: no session needed)."""
    return [{"release": e["label"], "mechanism": e["mechanism"], "epsilon": e["epsilon"],
             "neighbouring": e["relation"], "dp_valid": e["private"]} for e in store.spends(did)]


def report_builder(result: ps.SynthResult, key: dict):
    """``run_report(metrics=None, extra_ledger=...)``: the JSON report of this run, release-only in release mode
    (no hash, no timings, no metrics, no teaching section)."""
    release = release_mode()
    return functools.partial(report.run_report, result, params=key["params"], release_mode=release,
                             data_name=st.session_state.data["name"],
                             data_sha256=None if release else st.session_state.data["sha256"],
                             extra_ledger=shown_ledger())


def metrics_on_demand(result: ps.SynthResult, metrics: dict | None):
    """A function returning the run's metrics (``None`` in release mode), evaluated at most once, on first call.

    Its inputs are gathered now: it runs later, on a download click, in a thread without the script's session.
    """
    if metrics is not None or release_mode():
        return lambda: metrics
    real, synthetic, schema = real_of(result), result.data, ps.Schema.from_dict(result.schema)
    target = shared.tstr_target()
    target = target if target in schema.names else None
    return functools.cache(lambda: report.evaluate_subsampled(real, synthetic, schema, target=target))


def metrics_table_or_none(metrics: dict | None) -> pd.DataFrame | None:
    return None if metrics is None else report.metrics_table(metrics)


def stakeholder_inputs(result: ps.SynthResult) -> dict:
    """Arguments of :func:`stakeholder.build` but the metrics and the ledger's figures, gathered now (the HTML is
    built on click, in another thread); in release mode nothing read off the raw data."""
    return dict(release=result.release(), data_name=st.session_state.data["name"],
                real=None if release_mode() else real_of(result), shaped=synthetic_table(result))


def need_result() -> tuple[ps.SynthResult, dict] | None:
    """The last run, or an explanation when there is none."""
    result, key = st.session_state.get("result"), st.session_state.get("run")
    if result is None or key is None:
        st.info("No synthetic data yet: run a mechanism on the **Synthesize** page first.")
        return None
    return result, key


def axis_pair(names: list[str], prefix: str) -> tuple[int, int]:
    """Two axes to draw (a chooser when d > 2)."""
    if len(names) == 1:
        return 0, 0
    if len(names) == 2:
        return 0, 1
    cols = st.columns(2)
    with cols[0]:
        a = keep(st.selectbox, "x axis", f"w_{prefix}_x", names[0], options=names)
    with cols[1]:
        b = keep(st.selectbox, "y axis", f"w_{prefix}_y", names[1], options=names)
    return names.index(a), names.index(b)


def real_of(result: ps.SynthResult) -> pd.DataFrame:
    """The real columns a run used (teaching only), whatever the Data page has chosen since."""
    return table()[[c["name"] for c in result.schema["columns"]]]


def unit_real(result: ps.SynthResult) -> np.ndarray:
    """The real rows (teaching only) in the unit coordinates of the run's schema (not the editor's current one)."""
    return report.schema_encode(table(), result.schema)


freeze_import_heap()  # once per process: this module is imported on the server's first script run
