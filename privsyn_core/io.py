"""Reading user CSV files with clear errors, and writing CSV safely.

Every failure raises :class:`~privsyn_core.errors.DataError` with one line that says
what is wrong and what to change; nothing here prints a traceback to a user.
"""

from __future__ import annotations

import csv
import io
from pathlib import Path

import pandas as pd

from .errors import DataError

MAX_BYTES = 200 * 1024 * 1024
_DELIMITERS = ",;\t|"
_FORMULA_PREFIXES = ("=", "+", "-", "@", "\t", "\r")


def read_csv(source: str | Path | bytes, *, max_bytes: int = MAX_BYTES) -> pd.DataFrame:
    """Read a CSV file (path or raw bytes) into a DataFrame.

    Accepts UTF-8 with or without a byte-order mark, sniffs the delimiter among
    ``, ; TAB |``, and rejects empty files, header-only files and duplicate column names.
    """
    raw = _read_bytes(source, max_bytes)
    text = _decode(raw)
    if not text.strip():
        raise DataError("the file is empty")
    delimiter = _sniff_delimiter(text)
    header = next(csv.reader(io.StringIO(text), delimiter=delimiter), [])
    names = [h.strip() for h in header]
    dupes = sorted({h for h in names if names.count(h) > 1})
    if dupes:
        raise DataError(f"duplicate column names {dupes}; rename them so every column is unique")
    if any(h == "" for h in names):
        raise DataError("a column has an empty name in the header row; name every column")
    try:
        df = pd.read_csv(io.StringIO(text), sep=delimiter, skipinitialspace=True)
    except (pd.errors.ParserError, ValueError) as exc:
        raise DataError(f"could not parse the CSV: {str(exc).splitlines()[0]}") from None
    df.columns = names
    if len(df) == 0:
        raise DataError("the file has a header but no data rows")
    return df


def to_csv_bytes(df: pd.DataFrame) -> bytes:
    """CSV bytes with spreadsheet-formula cells neutralised.

    Text cells starting with ``= + - @`` (or tab / carriage return) are prefixed with a
    single quote, so a spreadsheet does not execute them (CSV/formula injection).
    Numeric columns are written as they are.
    """
    safe = df.copy()
    for name in safe.columns:
        if not pd.api.types.is_numeric_dtype(safe[name]) and not pd.api.types.is_bool_dtype(safe[name]):
            safe[name] = safe[name].map(_escape_cell)
    safe.columns = [_escape_cell(str(c)) for c in safe.columns]
    return safe.to_csv(index=False).encode("utf-8")


def _escape_cell(value: object) -> object:
    if isinstance(value, str) and value.startswith(_FORMULA_PREFIXES):
        return "'" + value
    return value


def _read_bytes(source: str | Path | bytes, max_bytes: int) -> bytes:
    if isinstance(source, (bytes, bytearray)):
        raw = bytes(source)
    else:
        path = Path(source)
        if not path.is_file():
            raise DataError(f"no such file: {path}")
        if path.stat().st_size > max_bytes:
            raise DataError(f"{path.name} is {path.stat().st_size / 2**20:.0f} MB; the limit is {max_bytes / 2**20:.0f} MB")
        raw = path.read_bytes()
    if len(raw) > max_bytes:
        raise DataError(f"the file is {len(raw) / 2**20:.0f} MB; the limit is {max_bytes / 2**20:.0f} MB")
    return raw


def _decode(raw: bytes) -> str:
    try:
        return raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise DataError(f"the file is not UTF-8 text (bad byte at position {exc.start}); save it as UTF-8 CSV") from None


def _sniff_delimiter(text: str) -> str:
    sample = "\n".join(text.splitlines()[:50])
    try:
        return csv.Sniffer().sniff(sample, delimiters=_DELIMITERS).delimiter
    except csv.Error:
        return ","
