"""The public schema of the chosen columns: the editor's entries as a :class:`privsyn_core.Schema`, and the two
sources the Data page offers besides typing (a proposal read off the data, DP bounds that spend epsilon)."""

from __future__ import annotations

import pandas as pd
import streamlit as st

import privsyn_core as ps

from . import ledger as store, shared, state
from .data_state import columns, frame, ledger_id, table
from .state import PROPOSED, release_mode, set_schema_entries
from .text import md


def schema() -> ps.Schema:
    """The schema of the chosen columns from the editor's entries; a clear error when incomplete."""
    entries = st.session_state.get("schema_entries", {})
    missing = [c for c in columns() if c not in entries or not _complete(entries[c])]
    if missing:
        names = ", ".join(missing)
        ways = ("type bounds or categories on the Data page, or estimate them with DP" if release_mode() else
                "type bounds or categories on the Data page, estimate them with DP, or propose them from the data "
                "(not private)")
        raise ps.SchemaError(f"no public domain yet for {'column' if len(missing) == 1 else 'columns'} {names}: "
                             f"{ways}")
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
    decimals = entry.get("decimals")
    if entry.get("kind") != "categorical" and not entry.get("integer") and decimals is not None \
            and not pd.isna(decimals):  # a schema field: synthesize rounds the release to it, as the CLI does
        out["decimals"] = int(decimals)
    return out


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
    rng = state.release_rng() if release_mode() else shared.seed()
    found = ps.dp_bounds(frame(), numeric, epsilon, neighbouring=neighbouring, rng=rng, ledger=store.store(),
                         dataset=ledger_id())
    for col in found.schema.columns:
        entries[col.name] = {**col.to_dict(), "source": f"DP bounds (epsilon {epsilon:g})"}
    set_schema_entries(entries)
    notes = [md(w) for w in found.warnings]
    if typed:
        notes.append("Columns with typed bounds were left as typed: " + ", ".join(md(c) for c in sorted(typed)) + ".")
    clipped = None
    if not release_mode():
        raw = table()
        clipped = {c.name: float(((raw[c.name] < c.lo) | (raw[c.name] > c.hi)).mean()) for c in found.schema.columns}
    st.session_state.bounds_notes = {"notes": notes, "clipped": clipped}
