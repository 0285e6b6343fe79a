"""Synthetic tables that look like the input: integers as integers, a sensible number of decimals, no ``-0``.

Everything here reads only public declarations (the schema's bounds and ``integer`` flags, and the
``decimals`` a user types in the schema grid) and the released rows: never the raw data.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

#: Significant digits kept across a column's public range when no decimals are declared.
RANGE_DIGITS = 4


def default_decimals(lo: float, hi: float) -> int:
    """Decimals that keep :data:`RANGE_DIGITS` significant digits across ``[lo, hi]`` (0 for a range >= 10^4)."""
    width = float(hi) - float(lo)
    if not math.isfinite(width) or width <= 0:
        return 6
    return int(min(12, max(0, RANGE_DIGITS - 1 - math.floor(math.log10(width)))))


def shaped(data: pd.DataFrame, schema: dict, decimals: dict[str, int | None] | None = None) -> pd.DataFrame:
    """``data`` with integer columns as int64 and other numeric columns rounded to their decimals.

    Rounding and formatting are post-processing of the released rows, so they cost no privacy.
    Negative zeros (``-0.0``, which print as ``-0``) are turned into zeros.
    """
    decimals = decimals or {}
    out = data.copy()
    for column in schema["columns"]:
        name = column["name"]
        if column.get("kind") != "numeric" or name not in out:
            continue
        values = out[name].to_numpy(dtype=float)
        if column.get("integer"):
            out[name] = np.round(values).astype(np.int64)
            continue
        places = decimals.get(name)
        places = default_decimals(column["lo"], column["hi"]) if places is None else int(places)
        out[name] = np.round(values, places) + 0.0  # + 0.0 turns -0.0 into 0.0
    return out


def row_count_note(n_synthetic: int, neighbouring: str, requested: int | None, n_real: int | None) -> str | None:
    """Why the synthetic table has the number of rows it has (``n_real`` only in teaching mode)."""
    if requested:
        return f"{n_synthetic:,} rows, as requested (the 'Synthetic rows' setting)."
    if neighbouring == "add_remove":
        return ("The number of rows is itself a noisy, private count: neighbouring tables differ by adding or "
                "removing one record, so the exact number of records is protected too.")
    if n_real is not None and n_synthetic != n_real:
        return (f"{n_synthetic:,} synthetic rows for {n_real:,} records: this mechanism releases its own number of "
                "points (set 'Synthetic rows' to choose it).")
    return None
