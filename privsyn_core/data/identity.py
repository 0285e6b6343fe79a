"""A dataset's identity in the privacy ledger: one function of the records as the schema reads them.

The ledger keys every budget by the dataset's identity, so every door (the library, the CLI's ``synth`` and
``budget set``, the app) must give one table one identity, whatever file or frame carries it.  The identity is a
SHA-256 over

* the names of the columns used (the schema's columns), sorted: the order of the columns and the columns the
  schema does not have are not part of it;
* the number of records and two order-free sums modulo :math:`2^{64}` of 64-bit row hashes (a multiset hash,
  Clarke, Devadas, van Dijk, Gassend, Suh, "Incremental Multiset Hash Functions and Their Application to Memory
  Integrity Checking", ASIACRYPT 2003, the MSet-Add-Hash): the order of the rows is not part of it, and a table
  given in blocks of rows (:class:`IdentityDigest`) gets the identity of the whole table.

Each value is read as the schema's codecs read it, before any check: a value that parses as a number
(:func:`pandas.to_numeric`) is that float64 (``-0.0`` as ``0.0``), so ``1``, ``"1.0"`` and ``1.00`` are one value
and the file's float formatting and line endings do not matter; any other value is its text (``str``), a missing
value one marker.  The identity does not read the schema's bounds or categories, nor a column's kind: a user who
retypes the schema gets no new budget.

The identity is a hash of the data: it is never shown to a user (teaching or release).  Two tables that differ in
one record are two datasets; an operator releasing on versions of a changing table names the dataset instead
(``dataset=``, ``--dataset``, ``PRIVSYN_DATASET``).
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Iterable, Sequence
from pathlib import Path

import numpy as np
import pandas as pd

from privsyn_core.errors import DataError

__all__ = ["IdentityDigest", "table_identity", "file_identity"]

#: Seeds of the two independent row-hash lanes (any two distinct odd 64-bit constants).
_LANES = (np.uint64(0x9E3779B97F4A7C15), np.uint64(0xC2B2AE3D27D4EB4F))
#: Marks a cell hash as a text value, so that no text collides with a number by construction.
_TEXT = np.uint64(0xD6E8FEB86659FD93)
#: The cell hash of a missing value.
_MISSING = np.uint64(0x8CB92BA72F3D8DD7)


def _mix(x: np.ndarray) -> np.ndarray:
    """SplitMix64's finaliser (Steele, Lea, Flood, "Fast Splittable Pseudorandom Number Generators", OOPSLA 2014),
    elementwise on a uint64 array: a bijection that spreads every input bit over the output."""
    x = x ^ (x >> np.uint64(30))
    x = x * np.uint64(0xBF58476D1CE4E5B9)
    x = x ^ (x >> np.uint64(27))
    x = x * np.uint64(0x94D049BB133111EB)
    return x ^ (x >> np.uint64(31))


def _number_hashes(numbers: np.ndarray) -> np.ndarray:
    """The cell hashes of float64 numbers (``-0.0`` as ``0.0``; NaN is left to the caller)."""
    return _mix((numbers + 0.0).view(np.uint64))


def cell_hashes(series: pd.Series) -> np.ndarray:
    """One uint64 per value of a column: a number by its float64 bits, text by pandas' SipHash of its UTF-8 bytes
    (:func:`pandas.util.hash_array`, fixed key), a missing value by a marker.

    A column that is not numeric is read through its distinct values (:func:`pandas.factorize`): each is parsed
    and hashed once.
    """
    if pd.api.types.is_bool_dtype(series) or pd.api.types.is_numeric_dtype(series):
        numbers = series.to_numpy(dtype=float, na_value=np.nan)
        hashes = _number_hashes(numbers)
        hashes[np.isnan(numbers)] = _MISSING
        return hashes
    codes, distinct = pd.factorize(series)  # a missing value: code -1
    values = pd.Series(np.asarray(distinct, dtype=object), dtype=object)
    numbers = pd.to_numeric(values, errors="coerce").to_numpy(dtype=float, na_value=np.nan)
    text = np.isnan(numbers)
    distinct_hashes = _number_hashes(np.where(text, 0.0, numbers))
    if text.any():
        distinct_hashes[text] = _mix(pd.util.hash_array(values[text].astype(str).to_numpy(dtype=object)) ^ _TEXT)
    hashes = distinct_hashes[codes]
    hashes[codes < 0] = _MISSING
    return hashes


class IdentityDigest:
    """The identity of a table given in blocks of rows (module docstring): :meth:`update` per block, then
    :meth:`hexdigest`.

    Parameters
    ----------
    columns : sequence of str
        The columns the identity reads (the schema's); every block must have them.
    """

    def __init__(self, columns: Sequence[str]) -> None:
        self.columns = sorted(str(c) for c in columns)
        self.rows = 0
        self.sums = [np.uint64(0), np.uint64(0)]

    def update(self, block: pd.DataFrame) -> None:
        """Add a block's rows (only its :attr:`columns` are read)."""
        missing = [c for c in self.columns if c not in block.columns]
        if missing:
            raise DataError(f"unknown column(s) {missing}; the table has {list(map(str, block.columns))}")
        cells = [cell_hashes(block[c]) for c in self.columns]
        for lane, seed in enumerate(_LANES):
            row = np.full(len(block), seed, dtype=np.uint64)
            for column in cells:
                row = _mix(row ^ column) * seed
            self.sums[lane] = np.uint64(self.sums[lane] + np.sum(_mix(row), dtype=np.uint64))
        self.rows += len(block)

    def hexdigest(self) -> str:
        """The SHA-256 of the column names, the record count and the two lane sums."""
        header = json.dumps({"columns": self.columns, "rows": self.rows}, sort_keys=True)
        digest = hashlib.sha256(b"privsyn-dataset/1\0" + header.encode("utf-8"))
        digest.update(np.array(self.sums, dtype="<u8").tobytes())
        return digest.hexdigest()


def table_identity(frame: pd.DataFrame, columns: Iterable[str] | None = None) -> str:
    """The identity of an in-memory table, read on ``columns`` (default: all of its columns)."""
    digest = IdentityDigest(list(frame.columns) if columns is None else list(columns))
    digest.update(frame)
    return digest.hexdigest()


def file_identity(path: str | os.PathLike[str] | bytes, columns: Iterable[str] | None = None) -> str:
    """The identity of a CSV file's table (its path or its bytes), read in blocks of rows
    (:func:`privsyn_core.data.io.iter_csv`) as the CLI's ``synth`` reads it; ``columns`` default to the file's."""
    from privsyn_core.data.io import iter_csv

    with iter_csv(path if isinstance(path, (str, bytes)) else Path(path)) as chunks:
        digest: IdentityDigest | None = None
        for block in chunks:
            digest = digest or IdentityDigest(list(block.columns) if columns is None else list(columns))
            digest.update(block)
    if digest is None:
        raise DataError("the table has no rows")
    return digest.hexdigest()
