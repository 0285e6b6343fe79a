"""Release mode's public rule for values outside the schema's domain: every record is made to fit, none refused.

In teaching mode a value the schema does not admit (text in a numeric column, a missing value, a category the
schema does not list) is refused with a message that quotes it to the data holder
(:mod:`privsyn_core.data.values`).  In release mode whoever reads the messages may not see the data, so nothing is
refused on the data's content and no message reads it; instead each value goes through a declared map
(:func:`conform`) before the mechanism:

* a numeric column: a missing or non-numeric value becomes the column's fallback, ``±inf`` the bound on its side;
  a finite number is left for the codec, which clips it into the public bounds ``[lo, hi]`` as in teaching mode
  (and counts the clipped values for the teaching diagnostics only);
* a categorical column: a value the category list does not name (compared as text, as the codecs do) or a
  missing value becomes the column's fallback category.

The fallbacks are public declarations: the caller's, else :func:`default_fallback` of the schema (the midpoint of
the bounds, rounded for an integer column; the first category).  The map is applied to each record on its own,
so two tables that differ in one record still differ in at most one record after it: a 1-stable transformation
(McSherry, "Privacy Integrated Queries", SIGMOD 2009, Thm. 1), which keeps the mechanism's epsilon under both
relations.  The release states the rule (:meth:`DomainPolicy.to_dict`, ``Release.domain_policy``).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from privsyn_core.data.domain import Column, Schema
from privsyn_core.data.values import check_frame
from privsyn_core.errors import SchemaError

__all__ = ["DomainPolicy", "conform", "conform_partition", "default_fallback"]


def default_fallback(column: Column) -> Any:
    """A column's default fallback: the midpoint of its bounds (rounded to an integer inside them for an integer
    column), or its first category."""
    if column.kind == "categorical":
        return column.category_list[0]
    lo, hi = column.bounds
    middle = lo + (hi - lo) / 2
    if column.integer and math.ceil(lo) <= math.floor(hi):
        return float(min(max(round(middle), math.ceil(lo)), math.floor(hi)))
    return middle


@dataclass(frozen=True)
class DomainPolicy:
    """The declared fallbacks of one release's schema (module docstring).

    Attributes
    ----------
    fallbacks : dict of str to value
        Per column of the schema, the value a missing or out-of-domain value becomes.
    """

    fallbacks: dict[str, Any]

    @classmethod
    def of(cls, schema: Schema, fallbacks: Mapping[str, Any] | None = None) -> DomainPolicy:
        """The policy of ``schema`` with the caller's ``fallbacks`` (public; each checked against the schema)."""
        given = dict(fallbacks or {})
        unknown = [name for name in given if name not in schema.names]
        if unknown:
            raise SchemaError(f"fallback(s) for column(s) {unknown} not in the schema (columns: {schema.names})")
        chosen = {}
        for column in schema.columns:
            value = given.get(column.name, default_fallback(column))
            chosen[column.name] = _checked_fallback(column, value)
        return cls(chosen)

    def meta(self, schema: Schema) -> pd.DataFrame:
        """The empty table :func:`conform` gives on ``schema`` (a Dask partition's meta): float64 numeric columns,
        object categorical ones."""
        return pd.DataFrame({c.name: pd.Series(dtype=float if c.kind == "numeric" else object)
                             for c in schema.columns})

    def to_dict(self) -> dict[str, Any]:
        """The rule as the release states it."""
        return {"rule": "numeric values clipped into their bounds; missing, non-numeric or unlisted values "
                        "replaced by the column's fallback",
                "fallbacks": {name: _plain(value) for name, value in self.fallbacks.items()}}


def _checked_fallback(column: Column, value: Any) -> Any:
    """``value`` if it lies in the column's public domain; a :class:`SchemaError` (public inputs only) otherwise."""
    if column.kind == "categorical":
        names = [str(c) for c in column.category_list]
        if str(value) not in names:
            raise SchemaError(f"column {column.name!r}: the fallback {value!r} is not one of its categories")
        return column.category_list[names.index(str(value))]
    lo, hi = column.bounds
    try:
        number = float(value)
    except (TypeError, ValueError):
        number = math.nan
    if isinstance(value, bool) or not lo <= number <= hi:
        raise SchemaError(f"column {column.name!r}: the fallback {value!r} is not a number in [{lo:g}, {hi:g}]")
    return number


def _plain(value: Any) -> Any:
    return value.item() if isinstance(value, np.generic) else value


def conform(frame: pd.DataFrame, schema: Schema, policy: DomainPolicy) -> pd.DataFrame:
    """The schema's columns of ``frame`` with every value mapped into the public domain (module docstring).

    Reads no value into a message: the only errors are about the table's columns (public) and an empty table.
    """
    frame = check_frame(frame, schema.names)
    out: dict[str, Any] = {}
    for column in schema.columns:
        series = frame[column.name]
        fallback = policy.fallbacks[column.name]
        if column.kind == "numeric":
            out[column.name] = _numeric(series, *column.bounds, fallback)
        else:
            out[column.name] = _categorical(series, column.category_list, fallback)
    return pd.DataFrame(out, columns=schema.names)


def conform_partition(frame: pd.DataFrame, schema: Schema, policy: DomainPolicy) -> pd.DataFrame:
    """:func:`conform` on one partition of a Dask table, which may be empty (then :meth:`DomainPolicy.meta`)."""
    return policy.meta(schema) if len(frame) == 0 else conform(frame, schema, policy)


def _numeric(series: pd.Series, lo: float, hi: float, fallback: float) -> np.ndarray:
    if pd.api.types.is_bool_dtype(series) or pd.api.types.is_numeric_dtype(series):
        x = series.to_numpy(dtype=float, na_value=np.nan)
    else:
        x = pd.to_numeric(series, errors="coerce").to_numpy(dtype=float, na_value=np.nan)
    if np.isfinite(x).all():
        return x  # may be a view of the caller's column: never written
    x = x.copy()
    x[np.isposinf(x)], x[np.isneginf(x)], x[np.isnan(x)] = hi, lo, fallback
    return x


def _categorical(series: pd.Series, categories: tuple, fallback: Any) -> np.ndarray:
    names = [str(c) for c in categories]
    uniques, inverse = np.unique(series.to_numpy(dtype=object).astype(str), return_inverse=True)
    position = {name: i for i, name in enumerate(names)}
    codes = np.array([position.get(u, -1) for u in uniques], dtype=np.int64)[inverse]  # a loop over the uniques
    codes[(codes < 0) | series.isna().to_numpy()] = names.index(str(fallback))
    values = np.empty(len(categories), dtype=object)
    values[:] = list(categories)
    return values[codes]
