"""Reading a table's values against the public schema, shared by every codec and by :meth:`Schema.infer`.

* :func:`check_frame`: a DataFrame with unique column names, restricted to the schema's columns, not empty;
* :func:`numeric_values` / :func:`reject_missing`: a numeric column as finite floats;
* :func:`category_codes`: each value's index in a column's public categories; :func:`category_array` the
  categories as an array whose dtype follows them.

Every failure is a one-line :class:`~privsyn_core.errors.DataError` naming the column.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from privsyn_core.errors import DataError

if TYPE_CHECKING:
    from privsyn_core.data.domain import Column


def select_columns(df: pd.DataFrame, names: list[str]) -> pd.DataFrame:
    """``df[names]``: a new table sharing the columns' data (copy-on-write), safe to change.

    When ``names`` are all the table's columns in their order (the usual case), a shallow copy gives the same
    table without pandas' label lookups (0.01 ms instead of 0.3 ms a call).
    """
    if names == df.columns.tolist():
        return df.copy(deep=False)
    return df[names]


def check_frame(df: pd.DataFrame, columns: Sequence[str] | None) -> pd.DataFrame:
    """``df`` (a DataFrame with unique column names) restricted to ``columns``; a one-line :class:`DataError`
    otherwise.  Shared by every codec and :meth:`~privsyn_core.data.domain.Schema.infer`."""
    if not isinstance(df, pd.DataFrame):
        raise DataError(f"expected a pandas DataFrame, got {type(df).__name__}")
    if df.columns.duplicated().any():
        dupes = sorted(set(map(str, df.columns[df.columns.duplicated()])))
        raise DataError(f"duplicate column names in the table: {dupes}; rename them")
    if columns is not None:
        missing = [c for c in columns if c not in df.columns]
        if missing:
            raise DataError(f"unknown column(s) {missing}; the table has {list(map(str, df.columns))}")
        df = select_columns(df, list(columns))
    if df.shape[1] == 0:
        raise DataError("the table has no columns")
    if len(df) == 0:
        raise DataError("the table has no rows")
    return df


def numeric_values(series: pd.Series, *, checked: bool = True) -> np.ndarray:
    """The column as finite floats (booleans as 0/1); a one-line :class:`DataError` for text, NaN or inf.

    ``checked=False`` leaves the NaN/inf check to the caller (the unit codec does it chunk by chunk).
    """
    name = series.name
    if pd.api.types.is_bool_dtype(series):
        return series.to_numpy(dtype=float)
    if series.dtype == np.float64:
        x = series.to_numpy()  # a view for a float64 column (NaN stands for missing)
    elif isinstance(series.dtype, np.dtype) and series.dtype.kind in "iuf":
        x = series.to_numpy(dtype=float)  # a NumPy column has no missing marker but NaN, which the cast keeps
    elif pd.api.types.is_numeric_dtype(series):
        x = series.to_numpy(dtype=float, na_value=np.nan)
    else:
        x = pd.to_numeric(series, errors="coerce").to_numpy(dtype=float, na_value=np.nan)
        bad = np.isnan(x) & series.notna().to_numpy()
        if bad.any():
            example = series[bad].iloc[0]
            raise DataError(f"column {name!r} is numeric in the schema but has {int(bad.sum())} non-numeric "
                            f"value(s), e.g. {str(example)[:40]!r}; fix the data or make it categorical")
    if checked:
        reject_missing(name, x)
    return x


def reject_missing(name: str, x: np.ndarray) -> None:
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


def category_codes(series: pd.Series, col: Column) -> np.ndarray:
    """Each value's index in the public categories of ``col``; a :class:`DataError` for a missing or unknown
    value (a category the schema does not declare).

    A value is matched by its text, ``str(value)``, against the categories' texts.  A text or boolean column has
    one text per distinct value, so its distinct values are found first (a hash table) and only those are turned
    into text; any other column (mixed objects, where ``1``, ``1.0`` and ``True`` are equal but read differently)
    is turned into text value by value.
    """
    if series.isna().any():
        raise DataError(f"column {col.name!r} has {int(series.isna().sum())} missing value(s); "
                        "drop them or add an explicit category for them")
    lookup = {str(c): i for i, c in enumerate(col.category_list)}
    if isinstance(series.dtype, pd.StringDtype) or pd.api.types.is_bool_dtype(series.dtype):
        inverse, distinct = pd.factorize(series)
        uniques = np.array([str(u) for u in distinct], dtype=str)
    else:
        uniques, inverse = np.unique(series.to_numpy(dtype=object).astype(str), return_inverse=True)
    codes_of_unique = np.array([lookup.get(u, -1) for u in uniques], dtype=np.int64)
    if (codes_of_unique < 0).any():
        unknown = sorted(uniques[codes_of_unique < 0].tolist())[:5]
        raise DataError(f"column {col.name!r} has values outside its public categories, e.g. {unknown}; "
                        "add them to the schema's category list")
    return codes_of_unique[inverse].astype(float)


def category_array(categories: tuple) -> np.ndarray:
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
