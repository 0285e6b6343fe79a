"""The public data domain: a :class:`Schema` per table, and the unit-cube encoding.

A schema fixes, for every column, its *public* domain: numeric bounds ``[lo, hi]`` or a
category list.  Mechanisms see the data only through :meth:`Schema.encode`, which maps a
record into ``[0, 1]^d`` (one coordinate per column), clipping numeric values into their
bounds.  Clipping is a per-record map, so it preserves differential privacy.

A domain read off the private data (:meth:`Schema.infer`) is **not** differentially
private: the min, max and observed categories leak.  Such columns carry
``public=False`` and every result built on them reports ``dp_valid = False``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Iterable, Literal, Sequence

import numpy as np
import pandas as pd

from .errors import DataError, SchemaError

ColumnKind = Literal["numeric", "categorical"]
SCHEMA_VERSION = 1
MAX_INFERRED_CATEGORIES = 100


@dataclass(frozen=True)
class Column:
    """Public domain of one column.

    Attributes
    ----------
    name : str
    kind : {"numeric", "categorical"}
    lo, hi : float, optional
        Public bounds of a numeric column, ``lo < hi``.
    categories : tuple, optional
        Public category list of a categorical column (at least one).
    integer : bool
        Numeric column whose synthetic values are rounded to integers on decoding.
    public : bool
        ``False`` when the domain was read off the data (not differentially private).
    """

    name: str
    kind: ColumnKind
    lo: float | None = None
    hi: float | None = None
    categories: tuple | None = None
    integer: bool = False
    public: bool = True

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name:
            raise SchemaError("every column needs a non-empty name")
        if self.kind == "numeric":
            self._check_bounds()
        elif self.kind == "categorical":
            if not self.categories:
                raise SchemaError(f"column {self.name!r}: a categorical column needs a non-empty category list")
            if len(set(self.categories)) != len(self.categories):
                raise SchemaError(f"column {self.name!r}: the category list has duplicates")
        else:
            raise SchemaError(f"column {self.name!r}: kind must be 'numeric' or 'categorical', got {self.kind!r}")

    def _check_bounds(self) -> None:
        try:
            lo, hi = float(self.lo), float(self.hi)
        except (TypeError, ValueError):
            raise SchemaError(f"column {self.name!r}: numeric bounds must be numbers, got lo={self.lo!r}, hi={self.hi!r}") from None
        if not (math.isfinite(lo) and math.isfinite(hi)):
            raise SchemaError(f"column {self.name!r}: bounds must be finite, got [{lo}, {hi}]")
        if not lo < hi:
            raise SchemaError(f"column {self.name!r}: bounds need lo < hi, got lo={lo:g}, hi={hi:g}")
        if not math.isfinite(hi - lo):
            raise SchemaError(f"column {self.name!r}: the range hi - lo overflows; use smaller bounds")
        object.__setattr__(self, "lo", lo)
        object.__setattr__(self, "hi", hi)

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"name": self.name, "kind": self.kind, "public": self.public}
        if self.kind == "numeric":
            out.update(lo=self.lo, hi=self.hi, integer=self.integer)
        else:
            out["categories"] = [_plain(c) for c in self.categories]
        return out


@dataclass(frozen=True)
class Schema:
    """Public domain of a table: an ordered tuple of :class:`Column`."""

    columns: tuple[Column, ...]
    notes: tuple[str, ...] = field(default=(), compare=False)

    def __post_init__(self) -> None:
        if not self.columns:
            raise SchemaError("the schema has no columns")
        names = [c.name for c in self.columns]
        dupes = sorted({n for n in names if names.count(n) > 1})
        if dupes:
            raise SchemaError(f"duplicate column names in the schema: {dupes}")

    # -- construction -------------------------------------------------------------
    @classmethod
    def infer(cls, df: pd.DataFrame, columns: Sequence[str] | None = None,
              max_categories: int = MAX_INFERRED_CATEGORIES) -> "Schema":
        """Propose a schema from the data itself.

        Numeric columns get ``[min, max]`` and text/boolean columns their observed
        categories, all flagged ``public=False``: the result is **not** differentially
        private (``dp_valid = False`` downstream).  Replace the proposal with public
        bounds for a private release.
        """
        df = _check_frame(df, columns)
        return cls(tuple(_infer_column(name, df[name], max_categories) for name in df.columns),
                   notes=("domain proposed from the data: not differentially private",))

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "Schema":
        """Read a schema written by :meth:`to_dict` (the CLI's ``--schema`` JSON)."""
        if not isinstance(d, dict) or not isinstance(d.get("columns"), list):
            raise SchemaError("a schema must be a JSON object with a 'columns' list")
        cols = []
        for i, c in enumerate(d["columns"]):
            if not isinstance(c, dict):
                raise SchemaError(f"schema column {i} must be an object")
            unknown = set(c) - {"name", "kind", "lo", "hi", "categories", "integer", "public"}
            if unknown:
                raise SchemaError(f"schema column {c.get('name', i)!r}: unknown keys {sorted(unknown)}")
            cats = c.get("categories")
            cols.append(Column(name=c.get("name"), kind=c.get("kind", "numeric"), lo=c.get("lo"), hi=c.get("hi"),
                               categories=tuple(cats) if cats is not None else None,
                               integer=bool(c.get("integer", False)), public=bool(c.get("public", True))))
        return cls(tuple(cols))

    def to_dict(self) -> dict[str, Any]:
        return {"version": SCHEMA_VERSION, "columns": [c.to_dict() for c in self.columns]}

    # -- queries ------------------------------------------------------------------
    @property
    def names(self) -> list[str]:
        return [c.name for c in self.columns]

    @property
    def dp_valid(self) -> bool:
        """True when every column's domain is public (not read off the data)."""
        return all(c.public for c in self.columns)

    def __getitem__(self, name: str) -> Column:
        for c in self.columns:
            if c.name == name:
                return c
        raise SchemaError(f"no column {name!r} in the schema (columns: {self.names})")

    def select(self, names: Iterable[str]) -> "Schema":
        """The sub-schema of the given columns, in that order."""
        return Schema(tuple(self[n] for n in names), self.notes)

    def with_column(self, column: Column) -> "Schema":
        """A copy with ``column`` replacing the column of the same name."""
        return Schema(tuple(column if c.name == column.name else c for c in self.columns), self.notes)

    # -- encoding -----------------------------------------------------------------
    def encode(self, df: pd.DataFrame) -> tuple[np.ndarray, dict[str, int]]:
        """Map the table into ``[0, 1]^d``.

        Numeric ``x`` becomes ``clip((x - lo) / (hi - lo), 0, 1)``; the ``i``-th of
        ``K`` categories becomes the cell centre ``(i + 1/2) / K``.

        Returns
        -------
        unit : ndarray of shape (n, d)
        clipped : dict
            Number of rows clipped into the bounds, per numeric column.
        """
        df = _check_frame(df, self.names)
        unit = np.empty((len(df), len(self.columns)))
        clipped: dict[str, int] = {}
        for j, col in enumerate(self.columns):
            if col.kind == "numeric":
                x = _numeric_values(df[col.name])
                clipped[col.name] = _scale_into(x, col.lo, col.hi, unit[:, j])
            else:
                codes = _category_codes(df[col.name], col)
                unit[:, j] = (codes + 0.5) / len(col.categories)
        return unit, clipped

    def decode(self, unit: np.ndarray) -> pd.DataFrame:
        """Map points of ``[0, 1]^d`` back to a table with the original columns.

        Numeric columns scale back to ``[lo, hi]`` (float64, or rounded to int64 for integer
        columns); categorical coordinates decode to the category whose cell contains them (dtype
        from the categories).  Every dtype comes from the schema, a public declaration, never from
        the private input's dtypes.
        """
        unit = np.asarray(unit, dtype=float).reshape(-1, len(self.columns))
        if all(col.kind == "numeric" and not col.integer for col in self.columns):
            # one float block: columns written straight into the (d, n) array pandas keeps (no consolidation copy)
            block = np.empty((len(self.columns), len(unit)))
            for j, col in enumerate(self.columns):
                _unscale_into(unit[:, j], col.lo, col.hi, block[j])
            return pd.DataFrame(block.T, columns=self.names, copy=False)
        out = {}
        for j, col in enumerate(self.columns):
            if col.kind == "numeric":
                x = _unscale_into(unit[:, j], col.lo, col.hi, np.empty(len(unit)))
                out[col.name] = np.round(x).astype(np.int64) if col.integer else x
            else:
                u = np.clip(unit[:, j], 0.0, 1.0)
                k = len(col.categories)
                idx = np.minimum((u * k).astype(np.int64), k - 1)
                out[col.name] = _category_array(col.categories)[idx]
        return pd.DataFrame(out, columns=self.names)


#: Rows per chunk of the column maps of :meth:`Schema.encode` / :meth:`Schema.decode` (scratch in cache).
_CHUNK = 2 ** 16


def _scale_into(x: np.ndarray, lo: float, hi: float, out: np.ndarray) -> int:
    """``out = clip((x - lo) / (hi - lo), 0, 1)`` chunk by chunk; returns the number of values outside ``[lo, hi]``.

    The count (teaching-only) and the clipping are skipped when ``min(x)`` and ``max(x)`` lie in the bounds,
    the common case; the values are those of the one-line formula either way.
    """
    outside = 0
    if len(x) and not (x.min() >= lo and x.max() <= hi):
        outside = int(np.count_nonzero((x < lo) | (x > hi)))
    scratch = np.empty(min(_CHUNK, len(x)))
    for start in range(0, len(x), _CHUNK):
        part = scratch[:min(_CHUNK, len(x) - start)]
        np.subtract(x[start:start + _CHUNK], lo, out=part)
        np.divide(part, hi - lo, out=part)
        if outside:
            np.minimum(np.maximum(part, 0.0, out=part), 1.0, out=part)
        out[start:start + _CHUNK] = part
    return outside


def _unscale_into(u: np.ndarray, lo: float, hi: float, out: np.ndarray) -> np.ndarray:
    """``out = lo + clip(u, 0, 1) (hi - lo)`` chunk by chunk (clipping only when ``u`` leaves ``[0, 1]``)."""
    inside = len(u) == 0 or (u.min() >= 0.0 and u.max() <= 1.0)
    for start in range(0, len(u), _CHUNK):
        part = out[start:start + _CHUNK]
        if inside:
            np.multiply(u[start:start + _CHUNK], hi - lo, out=part)
        else:
            np.minimum(np.maximum(u[start:start + _CHUNK], 0.0, out=part), 1.0, out=part)
            part *= hi - lo
        np.add(part, lo, out=part)
    return out


def _plain(value: Any) -> Any:
    """numpy scalars to Python scalars, for JSON."""
    return value.item() if isinstance(value, np.generic) else value


def _category_array(categories: tuple) -> np.ndarray:
    """The categories as an array whose dtype follows them (public): bool, int64, float64 or object."""
    values = list(categories)
    if all(isinstance(c, (bool, np.bool_)) for c in values):
        return np.array(values, dtype=bool)
    if all(isinstance(c, (int, np.integer)) and not isinstance(c, (bool, np.bool_)) for c in values):
        return np.array(values, dtype=np.int64)
    if all(isinstance(c, (int, float, np.integer, np.floating)) and not isinstance(c, (bool, np.bool_))
           for c in values):
        return np.array(values, dtype=float)
    arr = np.empty(len(values), dtype=object)
    arr[:] = values
    return arr


def _check_frame(df: pd.DataFrame, columns: Sequence[str] | None) -> pd.DataFrame:
    if not isinstance(df, pd.DataFrame):
        raise DataError(f"expected a pandas DataFrame, got {type(df).__name__}")
    if df.columns.duplicated().any():
        dupes = sorted(set(map(str, df.columns[df.columns.duplicated()])))
        raise DataError(f"duplicate column names in the table: {dupes}; rename them")
    if columns is not None:
        missing = [c for c in columns if c not in df.columns]
        if missing:
            raise DataError(f"unknown column(s) {missing}; the table has {list(map(str, df.columns))}")
        df = df[list(columns)]
    if df.shape[1] == 0:
        raise DataError("the table has no columns")
    if len(df) == 0:
        raise DataError("the table has no rows")
    return df


def _numeric_values(series: pd.Series) -> np.ndarray:
    name = series.name
    if pd.api.types.is_bool_dtype(series):
        return series.to_numpy(dtype=float)
    if series.dtype == np.float64:
        x = series.to_numpy()  # a view for a float64 column (NaN stands for missing)
    elif pd.api.types.is_numeric_dtype(series):
        x = series.to_numpy(dtype=float, na_value=np.nan)
    else:
        x = pd.to_numeric(series, errors="coerce").to_numpy(dtype=float, na_value=np.nan)
        bad = np.isnan(x) & series.notna().to_numpy()
        if bad.any():
            example = series[bad].iloc[0]
            raise DataError(f"column {name!r} is numeric in the schema but has {int(bad.sum())} non-numeric "
                            f"value(s), e.g. {str(example)[:40]!r}; fix the data or make it categorical")
    _reject_missing(name, x)
    return x


def _reject_missing(name: str, x: np.ndarray) -> None:
    if len(x) and np.isfinite(x.min()) and np.isfinite(x.max()):  # min/max propagate NaN: no full-size mask
        return
    nan = np.isnan(x)
    if nan.any():
        rows = np.flatnonzero(nan)[:5].tolist()
        raise DataError(f"column {name!r} has {int(nan.sum())} missing value(s) (NaN) at rows {rows}...; "
                        "drop or impute them first")
    inf = np.isinf(x)
    if inf.any():
        raise DataError(f"column {name!r} has {int(inf.sum())} infinite value(s); remove them first")


def _category_codes(series: pd.Series, col: Column) -> np.ndarray:
    if series.isna().any():
        raise DataError(f"column {col.name!r} has {int(series.isna().sum())} missing value(s); "
                        "drop them or add an explicit category for them")
    lookup = {c: i for i, c in enumerate(col.categories)}
    lookup.update({str(c): i for i, c in enumerate(col.categories)})
    values = series.to_numpy(dtype=object)
    uniques, inverse = np.unique(values.astype(str), return_inverse=True)
    codes_of_unique = np.array([lookup.get(u, -1) for u in uniques], dtype=np.int64)
    if (codes_of_unique < 0).any():
        unknown = uniques[codes_of_unique < 0][:5].tolist()
        raise DataError(f"column {col.name!r} has values outside its public categories, e.g. {unknown}; "
                        "add them to the schema's category list")
    return codes_of_unique[inverse].astype(float)


def _infer_column(name: str, series: pd.Series, max_categories: int) -> Column:
    name = str(name)
    if pd.api.types.is_bool_dtype(series):
        return Column(name, "categorical", categories=(False, True), public=False)
    if pd.api.types.is_numeric_dtype(series):
        x = series.to_numpy(dtype=float, na_value=np.nan)
        _reject_missing(name, x)
        lo, hi = float(x.min()), float(x.max())
        if lo == hi:
            raise DataError(f"column {name!r} is constant ({lo:g}): its bounds cannot be proposed from the data; "
                            "give public bounds with lo < hi or drop the column")
        return Column(name, "numeric", lo=lo, hi=hi, integer=pd.api.types.is_integer_dtype(series), public=False)
    if series.isna().any():
        raise DataError(f"column {name!r} has {int(series.isna().sum())} missing value(s); drop or impute them first")
    numeric = pd.to_numeric(series, errors="coerce")
    if numeric.notna().all():
        return _infer_column(name, numeric, max_categories)
    cats = sorted(series.astype(str).unique().tolist())
    if len(cats) > max_categories:
        raise DataError(f"column {name!r} is text with {len(cats)} distinct values (more than {max_categories}); "
                        "it looks like an identifier: drop it, or give its categories in a schema")
    return Column(name, "categorical", categories=tuple(cats), public=False)


def as_frame(data: Any) -> pd.DataFrame:
    """Accept a DataFrame, a 2-D array (columns ``x0, x1, ...``) or a 1-D array."""
    if isinstance(data, pd.DataFrame):
        return data
    arr = np.asarray(data)
    if arr.ndim == 1:
        arr = arr[:, None]
    if arr.ndim != 2:
        raise DataError(f"data must be a table or a 2-D array, got an array of shape {arr.shape}")
    return pd.DataFrame(arr, columns=[f"x{j}" for j in range(arr.shape[1])])


def unit_schema(d: int) -> Schema:
    """The public schema of ``[0, 1]^d`` with columns ``x0 .. x{d-1}``."""
    return Schema(tuple(Column(f"x{j}", "numeric", lo=0.0, hi=1.0) for j in range(d)))


__all__ = ["Column", "Schema", "as_frame", "unit_schema"]
