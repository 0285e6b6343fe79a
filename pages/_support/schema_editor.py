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
"""

from __future__ import annotations

import math
from typing import Any

import pandas as pd
import streamlit as st

FIELDS = ("name", "kind", "lo", "hi", "categories", "integer", "decimals")
TYPED = "typed by the user"


def _number(value: Any) -> float | None:
    try:
        value = float(value)
    except (TypeError, ValueError):
        return None
    return None if math.isnan(value) else value


def base_rows(chosen: list[str], entries: dict[str, dict], table: pd.DataFrame) -> pd.DataFrame:
    """The grid's input: one row per chosen column from its entry (kind guessed from the dtype when unset)."""
    rows = []
    for name in chosen:
        e = entries.get(name, {})
        kind = e.get("kind") or ("numeric" if pd.api.types.is_numeric_dtype(table[name]) else "categorical")
        rows.append({"name": name, "kind": kind, "lo": _number(e.get("lo")), "hi": _number(e.get("hi")),
                     "categories": ", ".join(map(str, e.get("categories") or [])),
                     "integer": bool(e.get("integer", False)), "decimals": _number(e.get("decimals"))})
    return pd.DataFrame(rows, columns=list(FIELDS)).astype({"lo": float, "hi": float, "decimals": float})


def _row_entry(row: dict) -> dict:
    categories = [c.strip() for c in str(row["categories"] or "").split(",") if c.strip()]
    return {"name": row["name"], "kind": row["kind"], "lo": _number(row["lo"]), "hi": _number(row["hi"]),
            "categories": categories, "integer": bool(row["integer"]), "public": True, "source": TYPED,
            "decimals": None if _number(row["decimals"]) is None else int(_number(row["decimals"]))}


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
    grid = state.get("schema_grid")
    stale = (grid is None or grid["columns"] != chosen or grid["synced"] != entries
             or grid["key"] not in state)
    if stale:
        version = (grid["version"] + 1) if grid else 0
        grid = {"version": version, "key": f"schema_grid_{version}", "columns": list(chosen),
                "base": base_rows(chosen, entries, table), "synced": entries, "first": True}
    edited = st.data_editor(
        grid["base"], hide_index=True, disabled=["name"], key=grid["key"], width="stretch",
        column_config={"name": st.column_config.TextColumn("column"),
                       "kind": st.column_config.SelectboxColumn("kind", options=["numeric", "categorical"]),
                       "lo": st.column_config.NumberColumn("lo (public lower bound)", format="%.6g"),
                       "hi": st.column_config.NumberColumn("hi (public upper bound)", format="%.6g"),
                       "categories": st.column_config.TextColumn("categories (comma separated, in order)",
                                                                 width="large"),
                       "integer": st.column_config.CheckboxColumn("integer"),
                       "decimals": st.column_config.NumberColumn(
                           "decimals", min_value=0, max_value=12, step=1, format="%d",
                           help="decimals of this column in the synthetic CSV (empty: 4 significant digits of the "
                                "range); a public choice, it costs no privacy")})
    merged = merge(grid["base"], edited, entries)
    grid["synced"] = merged
    state.schema_grid = grid
    state.schema_entries = merged
    return merged
