"""The schema grid of the Data page: public bounds and categories typed by the user, never lost.

Why edits were lost.  ``st.data_editor`` keeps the user's edits as a delta (``edited_rows``)
against the DataFrame it was given, and the browser grid resets its pending edits whenever that
DataFrame changes.  The page rebuilt the DataFrame from the stored entries on every run, so each
accepted edit (which changed the entries, and with them the "source" column) changed the grid's
input: the edit typed while that rerun was in flight was dropped by the reset, and the "source"
column showed the state of one edit before.

The fix: the grid's input (the *base*) is built once and kept unchanged while the user edits;
edits live only in the widget's delta, and the entries are recomputed from base + delta on every
run.  The base is rebuilt (under a new widget key, so old deltas never apply to new rows) only
when the entries change from outside the grid (a sample, an upload, DP bounds, a proposal, other
columns chosen) or when the widget's state is gone (the user visited another page, where Streamlit
drops it).  Sources are shown beside the grid from the entries, so they are always current.

Atoms.  The last column holds a numeric column's public atoms (point masses such as 0), typed as
comma-separated numbers (:func:`parse_atoms`).  They are saved in the entry and passed to the
:class:`~privsyn_core.Schema`, whose validation (numbers, inside the bounds, integers for an integer
column, numeric columns only) is what the Data page reports.
"""

from __future__ import annotations

import math
from typing import Any

import pandas as pd
import streamlit as st

FIELDS = ("name", "kind", "lo", "hi", "categories", "integer", "decimals", "atoms")
#: The grid's column order on screen: the short decisions first, the wide categories last.
COLUMN_ORDER = ("name", "kind", "lo", "hi", "integer", "decimals", "atoms", "categories")
#: Column widths in CSS pixels: 800 in all, inside the main area (818 px) of a 1280 px window with the sidebar open
#: (the grid spreads what is left evenly over the columns).  Each short column is as wide as its header with its
#: edit mark; the categories get the rest.
WIDTHS = {"name": 120, "kind": 105, "lo": 70, "hi": 70, "integer": 76, "decimals": 86, "atoms": 66,
          "categories": 207}
TYPED = "typed by the user"


def _number(value: Any) -> float | None:
    try:
        value = float(value)
    except (TypeError, ValueError):
        return None
    return None if math.isnan(value) else value


def atoms_text(atoms: Any) -> str:
    """A column's public atoms as the grid shows them: ``0, 100`` (empty when it has none)."""
    return ", ".join(f"{a:g}" if isinstance(a, (int, float)) else str(a) for a in (atoms or []))


def parse_atoms(text: Any) -> list:
    """The atoms typed in the grid: comma-separated numbers.

    A piece that is not a number is kept as typed, so that the schema's own validation
    (:class:`privsyn_core.data.domain.Column`) rejects it with a message naming the column; so are atoms
    outside the bounds, fractional atoms of an integer column and atoms of a categorical column.
    """
    out: list = []
    for piece in str(text or "").split(","):
        piece = piece.strip()
        if piece:
            number = _number(piece)
            out.append(piece if number is None else number)
    return out


def base_rows(chosen: list[str], entries: dict[str, dict], table: pd.DataFrame) -> pd.DataFrame:
    """The grid's input: one row per chosen column from its entry (kind guessed from the dtype when unset)."""
    rows = []
    for name in chosen:
        e = entries.get(name, {})
        kind = e.get("kind") or ("numeric" if pd.api.types.is_numeric_dtype(table[name]) else "categorical")
        rows.append({"name": name, "kind": kind, "lo": _number(e.get("lo")), "hi": _number(e.get("hi")),
                     "categories": ", ".join(map(str, e.get("categories") or [])),
                     "integer": bool(e.get("integer", False)), "decimals": _number(e.get("decimals")),
                     "atoms": atoms_text(e.get("atoms"))})
    return pd.DataFrame(rows, columns=list(FIELDS)).astype({"lo": float, "hi": float, "decimals": float})


def _row_entry(row: dict) -> dict:
    categories = [c.strip() for c in str(row["categories"] or "").split(",") if c.strip()]
    decimals = _number(row["decimals"])
    return {"name": row["name"], "kind": row["kind"], "lo": _number(row["lo"]), "hi": _number(row["hi"]),
            "categories": categories, "integer": bool(row["integer"]), "public": True, "source": TYPED,
            "decimals": None if decimals is None else int(decimals),
            "atoms": parse_atoms(row["atoms"])}


def merge(base: pd.DataFrame, edited: pd.DataFrame, entries: dict[str, dict]) -> dict[str, dict]:
    """Entries after the grid: a row the user changed becomes a typed entry, the others keep theirs."""
    out = dict(entries)
    for before, after in zip(base.to_dict("records"), edited.to_dict("records"), strict=True):
        if any(not _same(before[k], after[k]) for k in FIELDS[1:]):
            out[after["name"]] = _row_entry(after)
    return out


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b):
        return True
    return a == b


def editor(chosen: list[str], table: pd.DataFrame) -> dict[str, dict]:
    """Draw the grid and return the entries with the user's edits (also stored in ``session_state``)."""
    state = st.session_state
    entries = state.get("schema_entries", {})
    grid: dict[str, Any] | None = state.get("schema_grid")
    stale = (grid is None or grid["columns"] != chosen or grid["synced"] != entries
             or grid["key"] not in state)
    if grid is None or stale:
        version = (grid["version"] + 1) if grid else 0
        grid = {"version": version, "key": f"schema_grid_{version}", "columns": list(chosen),
                "base": base_rows(chosen, entries, table), "synced": entries, "first": True}
    # Every decision of a column fits 1280 px without scrolling: the short fields first, the categories (the only
    # wide one) last and of medium width; help texts carry the long explanations.
    edited = st.data_editor(
        grid["base"], hide_index=True, disabled=["name"], key=grid["key"], width="stretch",
        column_order=COLUMN_ORDER,
        column_config={"name": st.column_config.TextColumn("column", width=WIDTHS["name"]),
                       "kind": st.column_config.SelectboxColumn("kind", options=["numeric", "categorical"],
                                                                width=WIDTHS["kind"]),
                       "lo": st.column_config.NumberColumn("lo", format="%.6g", width=WIDTHS["lo"],
                                                           help="public lower bound (numeric columns)"),
                       "hi": st.column_config.NumberColumn("hi", format="%.6g", width=WIDTHS["hi"],
                                                           help="public upper bound (numeric columns)"),
                       "categories": st.column_config.TextColumn(
                           "categories", width=WIDTHS["categories"],
                           help="categorical columns: every public category, comma separated, in order"),
                       "integer": st.column_config.CheckboxColumn("integer", width=WIDTHS["integer"],
                                                                  help="whole numbers in the synthetic data"),
                       "decimals": st.column_config.NumberColumn(
                           "decimals", min_value=0, max_value=12, step=1, format="%d", width=WIDTHS["decimals"],
                           help="decimals of this column in the synthetic CSV (empty: 4 significant digits of the "
                                "range); a public choice, it costs no privacy"),
                       "atoms": st.column_config.TextColumn(
                           "atoms", width=WIDTHS["atoms"],
                           help="numeric columns only: values that many records take exactly, known in public "
                                "(e.g. 0 for an amount most people do not have), comma separated, inside the "
                                "bounds; each is kept as a point mass of its own")})
    merged = merge(grid["base"], edited, entries)
    grid["synced"] = merged
    state.schema_grid = grid
    state.schema_entries = merged
    return merged
