"""Reading user CSV and schema files with clear errors, and writing files safely.

Every failure raises a :class:`~privsyn_core.errors.PrivsynError` with one line that says
what is wrong and what to change; nothing here prints a traceback to a user.

Writes are atomic (:func:`atomic_open`, :func:`write_csv`): the
bytes go to a temporary file in the target's folder, are flushed to disk, and only a
complete file is renamed over the target; on any error or signal the temporary file is
removed and the target is left as it was.
"""

from __future__ import annotations

import codecs
import contextlib
import csv
import glob
import io
import json
import os
import stat
import tempfile
import warnings
from collections import Counter
from collections.abc import Callable, Generator, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO

import pandas as pd

from privsyn_core.data.domain import Schema
from privsyn_core.errors import DataError, OutputError, PrivsynError, SchemaError

MAX_BYTES = 200 * 1024 * 1024
MAX_COLUMNS = 1000
_DELIMITERS = ",;\t|"
_SNIFF_CHARS = 64 * 1024
_FORMULA_PREFIXES = ("=", "+", "-", "@", "\t", "\r")
#: Rows per block when :func:`write_csv` streams a table (bounds the text held in memory).
CSV_CHUNK_ROWS = 100_000
#: Bytes per block of the checking pass over a CSV file (:func:`_scan`); the first block(s) are kept as text.
SCAN_BLOCK_BYTES = 8 * 2**20
#: pandas options of every CSV parse (the file or the bytes, decoded by pandas itself).
_PARSE_OPTIONS: dict[str, Any] = {"skipinitialspace": True, "index_col": False, "encoding": "utf-8-sig"}


def read_csv(source: str | Path | bytes, *, max_bytes: int = MAX_BYTES) -> pd.DataFrame:
    """Read a CSV file (path or raw bytes) into a DataFrame.

    Accepts UTF-8 with or without a byte-order mark, sniffs the delimiter among
    ``, ; TAB |``, and rejects empty files, header-only files, duplicate column names,
    NUL bytes, more than :data:`MAX_COLUMNS` columns and rows with more fields than the header
    (a wrong delimiter would otherwise silently turn the first column into an index).

    The bytes are checked in one streaming pass (:func:`_scan`) and parsed by pandas from the
    file or the bytes themselves, so no decoded copy of the whole text is held.
    """
    with _open_source(source, max_bytes) as handle:
        delimiter, names, _ = _layout(_scan(handle, max_bytes))
        handle.seek(0)
        with _parse_errors(delimiter, len(names)):
            df = pd.read_csv(handle, sep=delimiter, **_PARSE_OPTIONS)
    _check_width(df, names)
    df.columns = names
    if len(df) == 0:
        raise DataError("the file has a header but no data rows")
    return df


class CsvChunks:
    """The rows of a checked CSV file, parsed in blocks of ``chunk_rows`` rows (:func:`iter_csv`).

    Iterate once; use as a context manager (or call :meth:`close`) to close the file.  Every
    block gets the checks :func:`read_csv` makes and the same column names; iterating raises
    :class:`~privsyn_core.errors.DataError` with :func:`read_csv`'s messages.  Type inference is
    pandas' per block: a column whose type differs between blocks is an object column in
    :func:`read_csv` too (pandas also parses a large file in pieces), and a table validated against
    a schema (:meth:`Schema.encode`) reads to the same values either way.

    Attributes
    ----------
    names : list of str
        The header's column names (stripped).
    max_rows : int
        An upper bound on the number of data rows: the larger of the counts of ``\\n`` and
        ``\\r`` in the file, plus one (blank lines and quoted line breaks make it larger than
        the true count; a file mixing both line ends can exceed it).
    """

    def __init__(self, handle: BinaryIO, delimiter: str, names: list[str], max_rows: int, chunk_rows: int) -> None:
        self.names, self.max_rows = names, max_rows
        self._handle, self._delimiter, self._chunk_rows = handle, delimiter, chunk_rows
        self._blocks: Generator[pd.DataFrame, None, None] | None = None

    def __iter__(self) -> Iterator[pd.DataFrame]:
        if self._blocks is not None:
            raise RuntimeError("a CsvChunks is read once")
        self._blocks = self._read()
        return self._blocks

    def _read(self) -> Generator[pd.DataFrame, None, None]:
        rows = 0
        self._handle.seek(0)
        with _parse_errors(self._delimiter, len(self.names)):
            reader = pd.read_csv(self._handle, sep=self._delimiter, chunksize=self._chunk_rows, **_PARSE_OPTIONS)
        with reader:
            while True:
                with _parse_errors(self._delimiter, len(self.names)):
                    chunk = next(reader, None)
                if chunk is None:
                    break
                _check_width(chunk, self.names)
                if len(chunk):
                    chunk.columns = self.names
                    rows += len(chunk)
                    yield chunk
        if rows == 0:
            raise DataError("the file has a header but no data rows")

    def close(self) -> None:
        """Stop the parser (if a read was left unfinished) and close the file."""
        if self._blocks is not None:
            self._blocks.close()
        self._handle.close()

    def __enter__(self) -> CsvChunks:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def iter_csv(source: str | Path | bytes, *, chunk_rows: int = CSV_CHUNK_ROWS, max_bytes: int = MAX_BYTES) -> CsvChunks:
    """A CSV file (path or raw bytes) as blocks of ``chunk_rows`` rows, with :func:`read_csv`'s checks.

    The file-level checks (size, UTF-8, NUL bytes, empty file, header, delimiter, column count)
    run here, in one streaming pass over the bytes, :data:`SCAN_BLOCK_BYTES` at a time, that keeps only
    the first block as text (more only if the header line is longer); the row-level checks (more fields than the header,
    unparseable rows, no data rows) run as the blocks are read.  Memory: one block of rows and
    the parser's buffer, whatever the file's size.
    """
    if chunk_rows < 1:
        raise ValueError(f"chunk_rows must be positive, got {chunk_rows}")
    handle = _open_source(source, max_bytes)
    try:
        delimiter, names, max_rows = _layout(_scan(handle, max_bytes))
    except BaseException:
        handle.close()
        raise
    return CsvChunks(handle, delimiter, names, max_rows, chunk_rows)


def read_schema(path: str | Path, *, max_bytes: int = MAX_BYTES) -> Schema:
    """Read a schema JSON file (UTF-8, optionally with a byte-order mark) and parse it strictly.

    Raises :class:`~privsyn_core.errors.SchemaError` for a file that is not UTF-8, not JSON,
    nested too deeply to parse, or not a valid schema (see :meth:`Schema.from_dict`), and
    :class:`~privsyn_core.errors.DataError` for a missing, non-regular or too large file.
    """
    path = _checked_file(path, max_bytes, what="a schema JSON file")
    raw = path.read_bytes()
    _check_size(len(raw), max_bytes)  # the file may have grown since it was checked
    text = _utf8_text(raw, SchemaError,
                      lambda at: f"schema file {path} is not UTF-8 text (bad byte at position {at}); save it as UTF-8",
                      lambda at: f"schema file {path} is not UTF-8 text (it has NUL bytes, as UTF-16 has); "
                                 "save it as UTF-8")
    try:
        obj = json.loads(text)
    except json.JSONDecodeError as exc:
        raise SchemaError(f"schema file {path} is not valid JSON: {exc.msg} at line {exc.lineno}") from None
    except RecursionError:
        raise SchemaError(f"schema file {path} is nested too deeply to be a schema") from None
    except ValueError as exc:  # e.g. an integer literal with more digits than Python converts
        raise SchemaError(f"schema file {path} is not valid JSON: {str(exc).splitlines()[0]}") from None
    try:
        return Schema.from_dict(obj)
    except RecursionError:
        raise SchemaError(f"schema file {path} is nested too deeply to be a schema") from None


def to_csv_bytes(df: pd.DataFrame, *, header: bool = True) -> bytes:
    """CSV bytes with spreadsheet-formula cells neutralised.

    Text cells starting with ``= + - @`` (or tab / carriage return) are prefixed with a
    single quote, so a spreadsheet does not execute them (CSV/formula injection).
    Numeric columns are written as they are.  Lines end in CRLF (RFC 4180), so a cell
    holding a bare carriage return is quoted instead of breaking its row.  ``header=False``
    leaves out the header row (for blocks after the first, see :func:`write_csv`).
    """
    safe = df.copy()
    for name in safe.columns:
        if not pd.api.types.is_numeric_dtype(safe[name]) and not pd.api.types.is_bool_dtype(safe[name]):
            safe[name] = safe[name].map(_escape_cell)
    safe.columns = [_escape_cell(str(c)) for c in safe.columns]
    return safe.to_csv(index=False, header=header, lineterminator="\r\n").encode("utf-8")


def write_csv(df: pd.DataFrame, target: str | Path | BinaryIO, *, chunk_rows: int = CSV_CHUNK_ROWS) -> None:
    """Write ``df`` as :func:`to_csv_bytes` does, in blocks of ``chunk_rows`` rows.

    ``target`` is a path (written atomically through :func:`atomic_open`) or an open
    binary file.  The bytes equal ``to_csv_bytes(df)``; only one block is held as text.
    """
    if not isinstance(target, (str, Path)):
        for start in range(0, max(len(df), 1), chunk_rows):
            target.write(to_csv_bytes(df.iloc[start:start + chunk_rows], header=start == 0))
        return
    with atomic_open(target) as fh:
        write_csv(df, fh, chunk_rows=chunk_rows)


@contextlib.contextmanager
def atomic_open(path: str | Path) -> Iterator[BinaryIO]:
    """A binary file whose content replaces ``path`` only when the ``with`` block completes.

    The file is a temporary ``.<name>.*.part`` in the folder of ``path`` (following a symbolic
    link to its target), so the final :func:`os.replace` is an atomic rename on one file system.
    It is flushed and ``fsync``-ed before the rename, and the folder is ``fsync``-ed after it,
    so a crash leaves either the old file or the complete new one.  If the block raises
    anything, including ``KeyboardInterrupt`` or another exception raised by a signal handler,
    the temporary file is removed and ``path`` is untouched.  The new file gets the mode of the
    file it replaces, else the default of the process's umask.

    Raises
    ------
    OutputError
        When the folder does not exist or cannot be written, ``path`` is a folder or a
        device, or a write fails (for example a full disk); the message names ``path``.
    """
    target = Path(os.path.realpath(path))
    folder = target.parent
    if not folder.is_dir():
        raise OutputError(f"no such folder: {folder}")
    if target.exists() and not target.is_file():
        raise OutputError(f"not a regular file: {target}; give the path of a file to write")
    _remove_stale_parts(folder, target.name)
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.{os.getpid()}.", suffix=".part", dir=folder)
    except OSError as exc:
        raise OutputError(f"cannot write in folder {folder}: {exc.strerror}") from None
    try:
        try:
            with os.fdopen(fd, "wb") as fh:
                os.fchmod(fh.fileno(), _mode_for(target))
                yield fh
                fh.flush()
                os.fsync(fh.fileno())
            os.replace(tmp, target)
        except OSError as exc:
            raise OutputError(f"could not write {target}: {exc.strerror or exc}; it was left unchanged") from None
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    _fsync_folder(folder)


def _remove_stale_parts(folder: Path, name: str) -> None:
    """Remove the temporary files of ``name`` left by writers that died without cleaning up (``kill -9``).

    A temporary file names its writer's process id (``.<name>.<pid>.<random>.part``); one whose process no longer
    exists is removed.  Files of a live process, including another write of this one, are left alone.
    """
    for part in folder.glob(f".{glob.escape(name)}.*.part"):
        pid = part.name[len(name) + 2:].split(".", 1)[0]
        if pid.isdigit() and not _alive(int(pid)):
            with contextlib.suppress(OSError):
                part.unlink()


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process
        return True
    return True


def _mode_for(target: Path) -> int:
    """Permission bits for a new file at ``target``: those of the file it replaces, else 0o666 minus the umask."""
    with contextlib.suppress(OSError):
        return stat.S_IMODE(target.stat().st_mode)
    return 0o666 & ~_umask()


def _umask() -> int:
    """The process umask, read without changing it (Linux ``/proc``; else the common 0o022)."""
    with contextlib.suppress(OSError, ValueError, StopIteration), open("/proc/self/status", encoding="ascii") as status:
        return int(next(line for line in status if line.startswith("Umask:")).split()[1], 8)
    return 0o022


def _fsync_folder(folder: Path) -> None:
    """Make the rename durable; some file systems cannot ``fsync`` a folder, which is harmless here."""
    with contextlib.suppress(OSError):
        fd = os.open(folder, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def _escape_cell(value: object) -> object:
    if isinstance(value, str) and value.startswith(_FORMULA_PREFIXES):
        return "'" + value
    return value


def _checked_file(source: str | Path, max_bytes: int, what: str) -> Path:
    """The path of an existing regular file of at most ``max_bytes``; a one-line :class:`DataError` otherwise."""
    path = Path(source)
    if not path.exists():
        raise DataError(f"no such file: {path}")
    if not path.is_file():
        raise DataError(f"not a regular file: {path}; give the path of {what}")
    size = path.stat().st_size
    if size > max_bytes:
        raise DataError(f"{path.name} is {size / 2**20:.0f} MB; the limit is {max_bytes / 2**20:.0f} MB")
    return path


def _check_size(size: int, max_bytes: int) -> None:
    if size > max_bytes:
        raise DataError(f"the file is {size / 2**20:.0f} MB; the limit is {max_bytes / 2**20:.0f} MB")


def _utf8_text(raw: bytes, error: type[PrivsynError], not_utf8: Callable[[int], str],
               has_nul: Callable[[int], str]) -> str:
    """``raw`` decoded as UTF-8 (a leading byte-order mark dropped).

    Raises ``error(not_utf8(position of the first bad byte))`` for bytes that are not UTF-8 and
    ``error(has_nul(position of the first NUL character))`` for text with NUL characters (UTF-16 or binary).
    """
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise error(not_utf8(exc.start)) from None
    nul = text.find("\x00")
    if nul >= 0:
        raise error(has_nul(nul))
    return text


def _open_source(source: str | Path | bytes, max_bytes: int) -> BinaryIO:
    """A binary handle on the CSV: the file (after the existence, type and size checks) or the bytes."""
    if isinstance(source, (bytes, bytearray)):
        _check_size(len(source), max_bytes)
        return io.BytesIO(source)
    return _checked_file(source, max_bytes, what="a CSV file").open("rb")


@dataclass(frozen=True)
class _Scanned:
    """What :func:`_scan` learns in its pass: the first blocks as text (at least the header line and the
    delimiter sample) and a bound on the number of lines."""

    head: str
    max_rows: int


def _scan(handle: BinaryIO, max_bytes: int) -> _Scanned:
    """One pass over the bytes, :data:`SCAN_BLOCK_BYTES` at a time, with the checks of the whole text.

    The bytes must decode as UTF-8 after an optional byte-order mark (the error names the first bad
    byte's position, counted after the mark as ``bytes.decode("utf-8-sig")`` does), hold no NUL
    (its position is counted in characters) and not be blank; at most ``max_bytes`` are read.  A
    multi-byte character cut by a block's end is carried over to the next block.
    """
    head: str | None = None
    carry = b""
    position = chars = line_feeds = returns = total = 0
    nul_at: int | None = None
    blank = at_start = True
    while True:
        block = handle.read(SCAN_BLOCK_BYTES)
        end = not block
        total += len(block)
        if total > max_bytes:
            raise DataError(f"the file is {total / 2**20:.0f} MB; the limit is {max_bytes / 2**20:.0f} MB")
        line_feeds += block.count(b"\n")
        returns += block.count(b"\r")
        data = carry + block
        if at_start:  # the byte-order mark, perhaps cut by a block's end
            if not end and len(data) < len(codecs.BOM_UTF8) and codecs.BOM_UTF8.startswith(data):
                carry = data
                continue
            data = data.removeprefix(codecs.BOM_UTF8)
            at_start = False
        try:
            text, carry = data.decode("utf-8"), b""
        except UnicodeDecodeError as exc:
            cut_at_end = exc.reason == "unexpected end of data" and exc.end == len(data)
            if end or not cut_at_end:
                raise DataError(f"the file is not UTF-8 text (bad byte at position {position + exc.start}); "
                                "save it as UTF-8 CSV") from None
            text, carry = data[:exc.start].decode("utf-8"), data[exc.start:]
        position += len(data) - len(carry)
        if nul_at is None and "\x00" in text:
            nul_at = chars + text.index("\x00")
        chars += len(text)
        blank = blank and not text.strip()
        if head is None or not _head_complete(head):
            head = text if head is None else head + text
        if end:
            break
    if nul_at is not None:
        raise DataError(f"the file contains NUL bytes (first at character {nul_at}): it is binary, "
                        "not CSV text; export it as UTF-8 CSV")
    if blank:
        raise DataError("the file is empty")
    return _Scanned(head or "", max(line_feeds, returns) + 1)


def _head_complete(head: str) -> bool:
    """The text holds the :func:`_sniff_delimiter` sample and the whole first non-blank line (the header)."""
    if len(head) < _SNIFF_CHARS:
        return False
    content = len(head) - len(head.lstrip())
    return "\n" in head[content:] or "\r" in head[content:]


def _layout(scanned: _Scanned) -> tuple[str, list[str], int]:
    """The delimiter, the header's names and the row bound, after the header checks (on the first block)."""
    delimiter = _sniff_delimiter(scanned.head)
    names = _header(scanned.head, delimiter)
    dupes = sorted(h for h, count in Counter(names).items() if count > 1)
    if dupes:
        raise DataError(f"duplicate column names {dupes}; rename them so every column is unique")
    if any(h == "" for h in names):
        raise DataError("a column has an empty name in the header row; name every column")
    _check_rows_use(delimiter, scanned.head, len(names))
    if len(names) > MAX_COLUMNS:
        raise DataError(f"the file has {len(names)} columns; the limit is {MAX_COLUMNS}: "
                        "keep only the columns to synthesize")
    return delimiter, names, scanned.max_rows


@contextlib.contextmanager
def _parse_errors(delimiter: str, columns: int) -> Iterator[None]:
    """pandas' parse failures as one-line :class:`DataError` s (a row longer than the header included)."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error", pd.errors.ParserWarning)
            yield
    except pd.errors.ParserWarning:
        raise DataError(f"some rows have more fields than the header's {columns} (delimiter {delimiter!r}); "
                        "check the delimiter and the header row") from None
    except (pd.errors.ParserError, ValueError) as exc:
        raise DataError(f"could not parse the CSV: {str(exc).splitlines()[0]}") from None


def _check_width(df: pd.DataFrame, names: list[str]) -> None:
    if df.shape[1] != len(names):
        raise DataError(f"the header has {len(names)} fields but the rows were read as {df.shape[1]} columns; "
                        "check the delimiter and the header row")


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
