"""Reading user CSV files with clear errors, and writing CSV safely.

Every failure raises :class:`~privsyn_core.errors.DataError` with one line that says
what is wrong and what to change; nothing here prints a traceback to a user.
"""

from __future__ import annotations

import csv
import io
import warnings
from collections import Counter
from pathlib import Path

import pandas as pd

from .errors import DataError

MAX_BYTES = 200 * 1024 * 1024
MAX_COLUMNS = 1000
_DELIMITERS = ",;\t|"
_SNIFF_CHARS = 64 * 1024
_FORMULA_PREFIXES = ("=", "+", "-", "@", "\t", "\r")


def read_csv(source: str | Path | bytes, *, max_bytes: int = MAX_BYTES) -> pd.DataFrame:
    """Read a CSV file (path or raw bytes) into a DataFrame.

    Accepts UTF-8 with or without a byte-order mark, sniffs the delimiter among
    ``, ; TAB |``, and rejects empty files, header-only files, duplicate column names,
    NUL bytes, more than :data:`MAX_COLUMNS` columns and rows with more fields than the header
    (a wrong delimiter would otherwise silently turn the first column into an index).
    """
    raw = _read_bytes(source, max_bytes)
    text = _decode(raw)
    if not text.strip():
        raise DataError("the file is empty")
    delimiter = _sniff_delimiter(text)
    names = _header(text, delimiter)
    dupes = sorted(h for h, count in Counter(names).items() if count > 1)
    if dupes:
        raise DataError(f"duplicate column names {dupes}; rename them so every column is unique")
    if any(h == "" for h in names):
        raise DataError("a column has an empty name in the header row; name every column")
    _check_rows_use(delimiter, text, len(names))
    if len(names) > MAX_COLUMNS:
        raise DataError(f"the file has {len(names)} columns; the limit is {MAX_COLUMNS}: keep only the columns to synthesize")
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error", pd.errors.ParserWarning)
            df = pd.read_csv(io.StringIO(text), sep=delimiter, skipinitialspace=True, index_col=False)
    except pd.errors.ParserWarning:
        raise DataError(f"some rows have more fields than the header's {len(names)} (delimiter {delimiter!r}); "
                        "check the delimiter and the header row") from None
    except (pd.errors.ParserError, ValueError) as exc:
        raise DataError(f"could not parse the CSV: {str(exc).splitlines()[0]}") from None
    if df.shape[1] != len(names):
        raise DataError(f"the header has {len(names)} fields but the rows were read as {df.shape[1]} columns; "
                        "check the delimiter and the header row")
    df.columns = names
    if len(df) == 0:
        raise DataError("the file has a header but no data rows")
    return df


def to_csv_bytes(df: pd.DataFrame) -> bytes:
    """CSV bytes with spreadsheet-formula cells neutralised.

    Text cells starting with ``= + - @`` (or tab / carriage return) are prefixed with a
    single quote, so a spreadsheet does not execute them (CSV/formula injection).
    Numeric columns are written as they are.  Lines end in CRLF (RFC 4180), so a cell
    holding a bare carriage return is quoted instead of breaking its row.
    """
    safe = df.copy()
    for name in safe.columns:
        if not pd.api.types.is_numeric_dtype(safe[name]) and not pd.api.types.is_bool_dtype(safe[name]):
            safe[name] = safe[name].map(_escape_cell)
    safe.columns = [_escape_cell(str(c)) for c in safe.columns]
    return safe.to_csv(index=False, lineterminator="\r\n").encode("utf-8")


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
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise DataError(f"the file is not UTF-8 text (bad byte at position {exc.start}); save it as UTF-8 CSV") from None
    if "\x00" in text:
        raise DataError(f"the file contains NUL bytes (first at character {text.index(chr(0))}): it is binary, "
                        "not CSV text; export it as UTF-8 CSV")
    return text


def _header(text: str, delimiter: str) -> list[str]:
    """The first non-blank row (pandas skips blank lines too), stripped."""
    try:
        rows = csv.reader(io.StringIO(text, newline=""), delimiter=delimiter)
        return [h.strip() for h in next((row for row in rows if any(cell.strip() for cell in row)), [])]
    except csv.Error as exc:
        raise DataError(f"could not parse the header row: {exc}") from None


def _check_rows_use(delimiter: str, text: str, columns: int) -> None:
    """A header split by ``delimiter`` whose first data rows never contain it: the rows use another one."""
    lines = [line for line in text[:_SNIFF_CHARS].split("\n")[:51] if line.strip()]
    if columns > 1 and len(lines) > 1 and not any(delimiter in line for line in lines[1:]):
        raise DataError(f"the header has {columns} columns separated by {delimiter!r} but the data rows contain no "
                        f"{delimiter!r}; use one delimiter throughout the file")


def _sniff_delimiter(text: str) -> str:
    sample = "\n".join(text[:_SNIFF_CHARS].split("\n")[:50])  # the Sniffer is slow on very long lines
    first_line = next((line for line in sample.split("\n") if line.strip()), "")
    in_header = [c for c in _DELIMITERS if c in first_line]
    try:
        sniffed = csv.Sniffer().sniff(sample, delimiters=_DELIMITERS).delimiter
    except csv.Error:
        sniffed = ","
    # A header is plain text: when it holds exactly one candidate, trust it over the Sniffer's guess.
    return in_header[0] if len(in_header) == 1 and sniffed not in first_line else sniffed
