"""The public data domain: a :class:`Schema` per table, read strictly from JSON or proposed from the data.

A schema fixes, for every column, its *public* domain: numeric bounds ``[lo, hi]`` (with optional integrality,
public atoms and decimals) or a category list.  Mechanisms see the data only through a codec built from the
schema alone (:mod:`privsyn_core.data.codec`); the default one, the unit cube ``[0, 1]^d``, is
:class:`~privsyn_core.data.unit_codec.UnitCodec`, which :meth:`Schema.encode` and :meth:`Schema.decode` apply.

A domain read off the private data (:meth:`Schema.infer`) is **not** differentially
private: the min, max and observed categories leak.  Such columns carry
``public=False`` and every result built on them reports ``dp_valid = False``.
"""

from __future__ import annotations

import math
import reprlib
import sys
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np
import pandas as pd

from privsyn_core.data.json_values import plain
from privsyn_core.data.unit_codec import UnitCodec
from privsyn_core.data.values import check_frame, reject_missing
from privsyn_core.errors import DataError, SchemaError

ColumnKind = Literal["numeric", "categorical"]
SCHEMA_VERSION = 1
MAX_INFERRED_CATEGORIES = 100
#: Most public atoms (point masses) one numeric column may declare.
MAX_ATOMS = 16
#: Most decimals a column may declare.
MAX_DECIMALS = 12
#: Largest ``|lo|``, ``|hi|`` of a numeric column: half the largest float, so that for any ``a, b`` in
#: ``[lo, hi]`` the span ``b - a``, the sum ``a + b`` (midpoints of cells) and hence every decoded value
#: ``lo + u (hi - lo)`` are finite.
MAX_ABS_BOUND = sys.float_info.max / 2


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
    atoms : tuple of float
        Public point masses of a numeric column (e.g. ``(0.0,)`` for a zero-inflated amount): values in
        ``[lo, hi]``, at most :data:`MAX_ATOMS`, each encoded in a cell of its own (:func:`atom_layout`).
    decimals : int, optional
        Decimals of a non-integer numeric column in the synthetic table (0 to :data:`MAX_DECIMALS`): decoding
        rounds to them (post-processing of the release, so it costs no privacy).  ``None`` keeps full precision.
    """

    name: str
    kind: ColumnKind
    lo: float | None = None
    hi: float | None = None
    categories: tuple | None = None
    integer: bool = False
    public: bool = True
    atoms: tuple = ()
    decimals: int | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name:
            raise SchemaError("every column needs a non-empty name")
        if self.kind == "numeric":
            self._check_bounds()
            self._check_atoms()
        elif self.kind == "categorical":
            self._check_categories()
        else:
            raise SchemaError(f"column {self.name!r}: kind must be 'numeric' or 'categorical', got {_show(self.kind)}")
        if self.atoms and self.kind != "numeric":
            raise SchemaError(f"column {self.name!r}: atoms apply to numeric columns only")
        if self.decimals is not None:
            self._check_decimals()

    def _check_decimals(self) -> None:
        value = self.decimals
        if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)) \
                or not 0 <= int(value) <= MAX_DECIMALS:
            raise SchemaError(f"column {self.name!r}: 'decimals' must be a whole number from 0 to {MAX_DECIMALS}, "
                              f"got {_show(value)}")
        if self.kind != "numeric" or self.integer:
            raise SchemaError(f"column {self.name!r}: 'decimals' applies to non-integer numeric columns only")
        object.__setattr__(self, "decimals", int(value))

    @property
    def bounds(self) -> tuple[float, float]:
        """``(lo, hi)``, the public bounds of a numeric column.

        Raises
        ------
        SchemaError
            For a categorical column (it has categories, not bounds).
        """
        lo, hi = self.lo, self.hi
        if self.kind != "numeric" or lo is None or hi is None:
            raise SchemaError(f"column {self.name!r} is {self.kind}: it has no numeric bounds")
        return lo, hi

    @property
    def category_list(self) -> tuple[Any, ...]:
        """The public categories of a categorical column, in their encoding order.

        Raises
        ------
        SchemaError
            For a numeric column (it has bounds, not categories).
        """
        cats = self.categories
        if self.kind != "categorical" or cats is None:
            raise SchemaError(f"column {self.name!r} is {self.kind}: it has no category list")
        return cats

    def _check_bounds(self) -> None:
        if isinstance(self.lo, (bool, np.bool_)) or isinstance(self.hi, (bool, np.bool_)):
            raise SchemaError(f"column {self.name!r}: numeric bounds must be numbers, not true/false")
        try:
            if self.lo is None or self.hi is None:
                raise TypeError("a numeric column needs both bounds")
            lo, hi = float(self.lo), float(self.hi)
        except (TypeError, ValueError):
            raise SchemaError(f"column {self.name!r}: numeric bounds must be numbers, "
                              f"got lo={_show(self.lo)}, hi={_show(self.hi)}") from None
        except OverflowError:
            raise SchemaError(f"column {self.name!r}: bounds must be finite floating-point numbers") from None
        if not (math.isfinite(lo) and math.isfinite(hi)):
            raise SchemaError(f"column {self.name!r}: bounds must be finite, got [{lo}, {hi}]")
        if not lo < hi:
            raise SchemaError(f"column {self.name!r}: bounds need lo < hi, got lo={lo:g}, hi={hi:g}")
        if max(abs(lo), abs(hi)) > MAX_ABS_BOUND:
            raise SchemaError(f"column {self.name!r}: bounds [{lo:g}, {hi:g}] are too wide (hi - lo or a midpoint "
                              f"overflows); keep them within +-{MAX_ABS_BOUND:.4g}, half the largest float")
        object.__setattr__(self, "lo", lo)
        object.__setattr__(self, "hi", hi)

    def _check_categories(self) -> None:
        """Categories are a non-empty list of distinct scalars (text, numbers, booleans) with distinct texts.

        A CSV file gives every value as text, so two categories whose ``str`` agree
        (``1`` and ``"1"``) could not be told apart when encoding; they are refused too.
        """
        cats = self.categories
        if not isinstance(cats, (tuple, list, np.ndarray)):
            raise SchemaError(f"column {self.name!r}: categories must be a list of values, got {_show(cats)}")
        cats = tuple(cats)
        object.__setattr__(self, "categories", cats)
        if not cats:
            raise SchemaError(f"column {self.name!r}: a categorical column needs a non-empty category list")
        bad = [t for t in set(map(type, cats)) if not issubclass(t, _CATEGORY_TYPES)]
        if bad:
            example = next(c for c in cats if type(c) in bad)
            raise SchemaError(f"column {self.name!r}: categories must be text, numbers or booleans, "
                              f"got {_show(example)}")
        floats = [c for c in cats if isinstance(c, (float, np.floating))]
        if not all(math.isfinite(c) for c in floats):
            raise SchemaError(f"column {self.name!r}: categories must be finite numbers, not NaN or infinity")
        if len(set(cats)) != len(cats):
            dup = _first_duplicate(cats)
            first = next(c for c in cats if c == dup)
            same = f"{_show(first)} and {_show(dup)} are equal" if repr(first) != repr(dup) else _show(dup)
            raise SchemaError(f"column {self.name!r}: the category list has duplicates: {same}")
        if len(set(map(str, cats))) != len(cats):
            text = _first_duplicate([str(c) for c in cats])
            clash = [c for c in cats if str(c) == text][:2]
            raise SchemaError(f"column {self.name!r}: categories {_show(clash[0])} and {_show(clash[1])} are the same "
                              f"text {text!r} in a CSV file; keep one")

    def _check_atoms(self) -> None:
        """Atoms: a list of at most :data:`MAX_ATOMS` distinct numbers in ``[lo, hi]`` (integers on an
        integer column), stored sorted as floats."""
        atoms = self.atoms
        if not isinstance(atoms, (tuple, list, np.ndarray)):
            raise SchemaError(f"column {self.name!r}: 'atoms' must be a list of numbers, got {_show(atoms)}")
        if any(isinstance(a, (bool, np.bool_)) or not isinstance(a, (int, float, np.integer, np.floating))
               for a in atoms):
            raise SchemaError(f"column {self.name!r}: 'atoms' must be numbers")
        values = sorted(float(a) for a in atoms)
        if len(values) > MAX_ATOMS or len(set(values)) != len(values):
            raise SchemaError(f"column {self.name!r}: 'atoms' must be at most {MAX_ATOMS} distinct numbers")
        lo, hi = self.bounds
        if values and not (lo <= values[0] and values[-1] <= hi):
            raise SchemaError(f"column {self.name!r}: atoms must lie in the bounds [{lo:g}, {hi:g}]")
        if self.integer and not all(float(v).is_integer() for v in values):
            raise SchemaError(f"column {self.name!r}: an integer column's atoms must be integers")
        object.__setattr__(self, "atoms", tuple(values))

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"name": self.name, "kind": self.kind, "public": self.public}
        if self.kind == "numeric":
            out.update(lo=self.lo, hi=self.hi, integer=self.integer)
            if self.atoms:
                out["atoms"] = list(self.atoms)
            if self.decimals is not None:
                out["decimals"] = self.decimals
        else:
            out["categories"] = [plain(c) for c in self.category_list]
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
              max_categories: int = MAX_INFERRED_CATEGORIES) -> Schema:
        """Propose a schema from the data itself.

        Numeric columns get ``[min, max]`` and text/boolean columns their observed
        categories, all flagged ``public=False``: the result is **not** differentially
        private (``dp_valid = False`` downstream).  Replace the proposal with public
        bounds for a private release.
        """
        df = check_frame(df, columns)
        return cls(tuple(_infer_column(name, df[name], max_categories) for name in df.columns),
                   notes=("domain proposed from the data: not differentially private",))

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Schema:
        """Read a schema written by :meth:`to_dict` (the CLI's ``--schema`` JSON).

        The reading is strict, so that a typo cannot silently change the domain: the
        object has the keys ``columns`` (and optionally ``version`` and ``description``, free text for people,
        which is not kept); each column has a
        non-empty string ``name``, ``kind`` ``"numeric"`` (the default) or
        ``"categorical"``; a numeric column has numbers ``lo < hi`` (finite, with a finite
        span ``hi - lo``) and optionally the JSON boolean ``integer``; a categorical column
        has ``categories``, a list of distinct text, number or boolean values (no
        ``null``); ``public`` is a JSON boolean (default ``true``).  Any other key, or a key
        of the other kind, is an error naming it.

        Raises
        ------
        SchemaError
            With a one-line message naming the column and the offending key.
        """
        if not isinstance(d, dict) or not isinstance(d.get("columns"), list):
            raise SchemaError("a schema must be a JSON object with a 'columns' list")
        unknown = set(d) - {"version", "columns", "description"}
        if unknown:
            raise SchemaError(f"unknown schema keys [{_keys(unknown)}]; a schema has 'columns', 'version' and "
                              "'description'")
        if not isinstance(d.get("description", ""), str):
            raise SchemaError("the schema's 'description' must be text")
        version = d.get("version", SCHEMA_VERSION)
        if isinstance(version, bool) or version != SCHEMA_VERSION:
            raise SchemaError(f"schema version {_show(version)} is not supported; this library reads version "
                              f"{SCHEMA_VERSION}")
        return cls(tuple(_column_from_dict(i, c) for i, c in enumerate(d["columns"])))

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

    def select(self, names: Iterable[str]) -> Schema:
        """The sub-schema of the given columns, in that order."""
        return Schema(tuple(self[n] for n in names), self.notes)

    # -- the unit-cube encoding ---------------------------------------------------
    def encode(self, df: pd.DataFrame) -> tuple[np.ndarray, dict[str, int]]:
        """The table in ``[0, 1]^d`` and the values clipped per numeric column (:meth:`UnitCodec.encode`)."""
        return UnitCodec(self).encode(df)

    def decode(self, unit: np.ndarray) -> pd.DataFrame:
        """Points of ``[0, 1]^d`` back to a table with the schema's columns (:meth:`UnitCodec.decode`)."""
        return UnitCodec(self).decode(unit)

_NUMERIC_KEYS = frozenset({"lo", "hi", "integer", "atoms", "decimals"})
_CATEGORICAL_KEYS = frozenset({"categories"})
_COLUMN_KEYS = frozenset({"name", "kind", "public"}) | _NUMERIC_KEYS | _CATEGORICAL_KEYS
_CATEGORY_TYPES = (str, bool, int, float, np.integer, np.floating, np.bool_)
_SHOW = reprlib.Repr()
_SHOW.maxstring, _SHOW.maxother, _SHOW.maxlist, _SHOW.maxdict, _SHOW.maxlevel = 40, 40, 3, 3, 2


def _show(value: Any) -> str:
    """A short one-line rendering of a value from a user's schema (bounded even for huge or deep values)."""
    return _SHOW.repr(value)


def _keys(keys: Iterable[Any]) -> str:
    return ", ".join(sorted(_show(k) for k in keys))


def _first_duplicate(values: Sequence[Any]) -> Any:
    seen: set = set()
    for v in values:
        if v in seen:
            return v
        seen.add(v)
    return None


def _column_from_dict(i: int, c: Any) -> Column:
    """One column of :meth:`Schema.from_dict`, every key type-checked (see there)."""
    if not isinstance(c, dict):
        raise SchemaError(f"schema column {i} must be an object with 'name' and 'kind', got {_show(c)}")
    name = c.get("name")
    if not isinstance(name, str) or not name:
        raise SchemaError(f"schema column {i}: 'name' must be a non-empty string, got {_show(name)}")
    unknown = set(c) - _COLUMN_KEYS
    if unknown:
        raise SchemaError(f"schema column {name!r}: unknown keys [{_keys(unknown)}]; "
                          f"allowed: {', '.join(sorted(_COLUMN_KEYS))}")
    kind = c.get("kind", "numeric")
    if not isinstance(kind, str) or kind not in ("numeric", "categorical"):
        raise SchemaError(f"column {name!r}: 'kind' must be 'numeric' or 'categorical', got {_show(kind)}")
    misplaced = set(c) & (_CATEGORICAL_KEYS if kind == "numeric" else _NUMERIC_KEYS)
    if misplaced:
        raise SchemaError(f"column {name!r}: key(s) {_keys(misplaced)} do not apply to a {kind} column")
    public = _flag(c, "public", True, name)
    if kind == "categorical":
        cats = c.get("categories")
        if not isinstance(cats, (list, tuple)):
            raise SchemaError(f"column {name!r}: 'categories' must be a list of values, got {_show(cats)}")
        return Column(name, "categorical", categories=tuple(cats), public=public)
    if "lo" not in c or "hi" not in c:
        raise SchemaError(f"column {name!r}: a numeric column needs 'lo' and 'hi' (public bounds)")
    lo, hi = (_number(c, key, name) for key in ("lo", "hi"))
    atoms = c.get("atoms", [])
    if not isinstance(atoms, list):
        raise SchemaError(f"column {name!r}: 'atoms' must be a list of numbers, got {_show(atoms)}")
    return Column(name, "numeric", lo=lo, hi=hi, integer=_flag(c, "integer", False, name), public=public,
                  atoms=tuple(atoms), decimals=c.get("decimals"))


def _flag(c: dict, key: str, default: bool, name: str) -> bool:
    value = c.get(key, default)
    if not isinstance(value, (bool, np.bool_)):
        raise SchemaError(f"column {name!r}: {key!r} must be true or false (a JSON boolean), got {_show(value)}")
    return bool(value)


def _number(c: dict, key: str, name: str) -> float:
    value = c[key]
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, float, np.integer, np.floating)):
        raise SchemaError(f"column {name!r}: {key!r} must be a number, got {_show(value)}")
    try:
        return float(value)
    except OverflowError:
        raise SchemaError(f"column {name!r}: {key!r} is too large for a floating-point number") from None


def _infer_column(name: str, series: pd.Series, max_categories: int) -> Column:
    name = str(name)
    if pd.api.types.is_bool_dtype(series):
        return Column(name, "categorical", categories=(False, True), public=False)
    if pd.api.types.is_numeric_dtype(series):
        x = series.to_numpy(dtype=float, na_value=np.nan)
        reject_missing(name, x)
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
