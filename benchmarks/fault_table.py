"""The fault and hostile-input table of issue 18: every case in its own child process, its outcome and its cost.

Usage::

    PYTHONPATH=. python benchmarks/fault_table.py [--jobs 2] [--only TEXT] [--no-write]

Every case is one ``python -m privsyn_core ...`` process (or, for what only the API accepts, one
``python -c`` child calling :func:`privsyn_core.synthesize`, which turns a
:class:`~privsyn_core.errors.PrivsynError` into ``error: <message>`` and exit status 2 as the CLI does).
For each case the table records

* the exit status (a negative status ``-k`` means killed by signal ``k``; a shell reports ``128 + k``);
* the number of non-empty stderr lines and the first one;
* whether every file the case must not touch (the input, the schema, an existing output it must keep)
  has the same SHA-256 afterwards;
* whether a partial file is left: a ``*.part`` temporary in the output's folder, or an output
  created by a run that failed;
* the wall time and the child's peak resident memory (``ru_maxrss`` of ``os.wait4`` on that child
  alone, so the cases can run two at a time).

The verdict applies the issue's rule: bad input ends with exactly one ``error:`` line naming the
problem and exit status 2 (SIGINT and SIGTERM with one line and 130 / 143), never a traceback;
an accepted input ends with exit 0, only ``warning:``/``diagnostic`` lines on stderr and finite
values in the written CSV; no protected file changes; no partial file is left; the child stays
under 2 GB.  The light cases (the corpora of ``tests/data/bad_csv`` and ``tests/data/bad_schema``,
the command-line cases) run ``--jobs`` at a time, the heavy ones (large files, signals, memory
caps) one at a time afterwards, so their wall times are not shared.

The full-disk case writes into a 1 MB ``tmpfs`` mounted for the run when the process may mount
one (root), else into an ordinary folder with ``ENOSPC`` injected after 64 KB as
``tests/test_cli.py`` does; the table says which.

Writes the summary (pass count, failures, peak memory, cases per group) into ``docs/tables/faults.md`` and the
table of every case into ``test-output/faults.md`` (not committed), unless ``--no-write``, and prints it.
"""

from __future__ import annotations

import argparse
import contextlib
import csv
import hashlib
import importlib.util
import json
import math
import os
import platform
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

from benchmarks.docsection import write_table

REPO = Path(__file__).resolve().parents[1]
DOC = REPO / "test-output" / "faults.md"
BAD_CSV = REPO / "tests" / "data" / "bad_csv"
BAD_SCHEMA = REPO / "tests" / "data" / "bad_schema"
MAX_RSS_MB = 2048
CLI = ["-m", "privsyn_core"]
#: The table the schema corpus is checked against (so a failure can only come from the schema under test).
ABC_SCHEMA = {"columns": [{"name": "a", "kind": "numeric", "lo": 0, "hi": 1},
                          {"name": "b", "kind": "numeric", "lo": 0, "hi": 10, "integer": True},
                          {"name": "c", "kind": "categorical", "categories": ["x", "y"]}]}
UNIT2 = {"columns": [{"name": "a", "lo": 0, "hi": 1}, {"name": "b", "lo": 0, "hi": 1}]}
#: Rows of the numeric evaluation tables (5 numeric columns and one categorical).
EVAL_SIZES = (100_000, 400_000, 1_000_000)
#: Synthetic rows written by the signal cases (about 80 MB of CSV, several seconds of writing).
SIGNAL_ROWS = 2_000_000
#: The signal is sent once the temporary ``.part`` file holds this many bytes.
SIGNAL_AT_BYTES = 8 * 2**20
TMPFS_SIZE, TMPFS_LABEL = "1m", "1 MB"

#: A child for what only the API accepts; a PrivsynError becomes one ``error:`` line and exit status 2.
API_CHILD = r"""
import sys
import numpy as np
import privsyn_core as ps
from privsyn_core.errors import PrivsynError

case, arg = sys.argv[1], sys.argv[2]
try:
    if case == "n_synthetic":
        n = int(float(arg))
        X = np.random.default_rng(0).random((200, 2))
        data = ps.synthesize(X, "dp_histogram", 1.0, schema=ps.unit_schema(2), n_synthetic=n).data
        assert len(data) == n and np.isfinite(data.to_numpy()).all()
        print(f"{n} finite synthetic rows")
    elif case == "dask_no_workers":
        import dask.dataframe as dd
        import pandas as pd
        from distributed import Client, LocalCluster

        frame = pd.DataFrame(np.random.default_rng(0).random((1000, 2)), columns=["x0", "x1"])
        with LocalCluster(n_workers=0, processes=False, dashboard_address=None) as cluster, Client(cluster):
            ps.synthesize(dd.from_pandas(frame, npartitions=4), arg, 1.0, schema=ps.unit_schema(2))
        print("finished")
except PrivsynError as exc:
    print(f"error: {exc}", file=sys.stderr)
    sys.exit(2)
"""

#: The CLI with ``ENOSPC`` injected after 64 KB of the first temporary file (when no tmpfs can be mounted).
ENOSPC_CHILD = r"""
import errno, os, sys
import privsyn_core.cli as cli

real_fdopen = os.fdopen

class Full:
    def __init__(self, fh):
        self.fh, self.room = fh, 65536
    def write(self, data):
        if len(data) > self.room:
            self.fh.write(data[:self.room]); self.fh.flush(); self.room = 0
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        self.room -= len(data)
        return self.fh.write(data)
    def __getattr__(self, name):
        return getattr(self.fh, name)
    def __enter__(self):
        return self
    def __exit__(self, *exc):
        self.fh.close()

os.fdopen = lambda fd, *a, **k: Full(real_fdopen(fd, *a, **k))
sys.exit(cli.main(sys.argv[1:]))
"""


@dataclass
class Case:
    """One command and what it must do."""

    group: str
    name: str
    args: list[str]  # after the interpreter
    expect: str  # the expected behaviour, in words
    code: int  # the expected exit status
    fragment: str | None = None  # in the one error line (failure) or in some stderr line (success)
    stdout: str | None = None  # in the standard output (success)
    protect: list[Path] = field(default_factory=list)  # files that must be byte-identical afterwards
    out: Path | None = None  # the file the command would write
    kind: str | None = None  # for the largest accepted input of each kind
    size: str = ""  # that input's size, in words
    env: dict[str, str] = field(default_factory=dict)
    heavy: bool = False
    signal_at: tuple[signal.Signals, int | float] | None = None  # (signal, .part bytes, or seconds if a float)
    note: str = ""
    timeout: float = 300.0


@dataclass
class Outcome:
    case: Case
    code: int
    lines: list[str]
    intact: bool | None
    left: list[str]
    wall: float
    rss_mb: float
    output: str
    problems: list[str]

    @property
    def verdict(self) -> str:
        return "PASS" if not self.problems else "FAIL"


# -- inputs ---------------------------------------------------------------------------------------------------------
def make_inputs(shared: Path) -> dict[str, Path]:
    """Write every input file once; returns name -> path.

    Run in a child process (``--inputs``): the parent imports neither numpy nor pandas and stays small, because
    Linux carries a parent's peak RSS into a forked child's ``ru_maxrss`` (it is copied at ``exec``)."""
    import numpy as np
    import pandas as pd

    rng = np.random.default_rng(18)
    files: dict[str, Path] = {}

    def put(name: str, text: str | bytes) -> Path:
        path = shared / name
        path.write_bytes(text.encode() if isinstance(text, str) else text)
        files[name] = path
        return path

    pd.DataFrame({"a": rng.random(200), "b": rng.random(200)}).to_csv(shared / "small.csv", index=False)
    files["small.csv"] = shared / "small.csv"
    pd.DataFrame({"a": rng.random(50), "b": rng.integers(0, 10, 50), "c": rng.choice(["x", "y"], 50)}).to_csv(
        shared / "abc.csv", index=False)
    files["abc.csv"] = shared / "abc.csv"
    put("unit2.json", json.dumps(UNIT2))
    put("abc.json", json.dumps(ABC_SCHEMA))
    put("outside.json", json.dumps({"columns": [{"name": "a", "lo": 10, "hi": 20}, {"name": "b", "lo": 10, "hi": 20}]}))
    put("omits_b.json", json.dumps({"columns": [{"name": "a", "lo": 0, "hi": 1}]}))
    # Evaluation tables: two independent draws, cut to each size (a prefix of the largest).
    n = max(EVAL_SIZES)
    for side, seed in (("real", 1), ("synth", 2)):
        g = np.random.default_rng(seed)
        frame = pd.DataFrame({f"x{j}": g.random(n) for j in range(5)})
        frame["c"] = g.choice(["red", "green", "blue"], n)
        text = frame.to_csv(index=False, float_format="%.6g").encode()
        lines = text.split(b"\n")
        for size in EVAL_SIZES:
            put(f"eval_{side}_{size}.csv", b"\n".join(lines[:size + 1]) + b"\n")
    # The largest numeric CSV the loader accepts: 4 copies of the 10^6-row table, just under its 200 MB limit.
    body = files[f"eval_real_{n}.csv"].read_bytes().split(b"\n", 1)[1]
    put("numeric_190MB.csv", files[f"eval_real_{n}.csv"].read_bytes() + body * 3)
    # An upload-sized (50 MB) CSV of short text: 3 columns of two-letter words, 5.6 million rows.
    words = np.array([a + b for a in "abcdefgh" for b in "xy"])
    rows = 5_600_000
    codes = rng.integers(0, len(words), (rows, 3))
    combos = np.array([f"{u},{v},{w}" for u in words for v in words for w in words])
    put("text_50MB.csv", ("u,v,w\n" + "\n".join(combos[(codes[:, 0] * 16 + codes[:, 1]) * 16 + codes[:, 2]]) + "\n"))
    # A 1 GB file (sparse: only its size matters, the loader must refuse it before reading).
    big = shared / "sparse_1GB.csv"
    with big.open("wb") as fh:
        fh.truncate(2**30)
    files["sparse_1GB.csv"] = big
    return files


@contextlib.contextmanager
def small_tmpfs(folder: Path) -> Iterator[bool]:
    """Mount a :data:`TMPFS_SIZE` tmpfs on ``folder`` for the block; yields whether it could."""
    folder.mkdir(parents=True, exist_ok=True)
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={TMPFS_SIZE}", "tmpfs", str(folder)],
                             capture_output=True).returncode == 0
    try:
        yield mounted
    finally:
        if mounted:
            subprocess.run(["umount", str(folder)], check=False)


# -- cases ----------------------------------------------------------------------------------------------------------
def fails(fragment: str) -> dict:
    return {"code": 2, "fragment": fragment}


def cases(f: dict[str, Path], work: Path, tmpfs: Path | None) -> list[Case]:
    small, abc, unit2, abc_json = f["small.csv"], f["abc.csv"], f["unit2.json"], f["abc.json"]
    out: list[Case] = []

    def folder(name: str) -> Path:
        path = work / name
        path.mkdir(parents=True, exist_ok=True)
        return path

    def synth(group: str, name: str, inp: Path | str, *extra: str, expect: str, mechanism: str = "dp_histogram",
              epsilon: str = "1", target: Path | None = None, old: str | None = None, **kw) -> Case:
        """A ``synth`` case writing ``target`` (default: a fresh folder's out.csv); ``old`` = "keep" or "replace"
        writes an old file there first, which the command must keep (it is then protected) or replace."""
        if target is None:
            target = folder(f"{len(out):03d}") / "out.csv"
        protect = [p for p in (Path(inp),) if p.is_file()]
        if old is not None:
            target.write_bytes(b"old content\n")
            if old == "keep":
                protect.append(target)
        args = [*CLI, "synth", str(inp), str(target), "--mechanism", mechanism, "--epsilon", epsilon, *extra]
        kw.setdefault("code", 0)
        case = Case(group, name, args, expect, out=target, protect=protect + kw.pop("protect", []), **kw)
        out.append(case)
        return case

    # 1. Nothing lost: an output or report path that is an input, or each other, or exists.
    g = "1 nothing lost"
    synth(g, "output = input", small, "--schema", str(unit2), target=small, expect="refused: is the input file",
          **fails("is the input file"))
    synth(g, "output = input, --force", small, "--force", target=small, expect="refused even with --force",
          **fails("is the input file"))
    link = folder("hardlink") / "link.csv"
    os.link(small, link)
    synth(g, "output = a hard link of the input, --force", small, "--force", target=link,
          expect="refused (same inode)", **fails("is the input file"))
    synth(g, "report = input", small, "--report", str(small), "--force", expect="refused: is the input file",
          **fails("is the input file"))
    report_eq = synth(g, "report = output", small, "--force", expect="refused: the same file",
                      **fails("is named twice among the files to write"))
    report_eq.args += ["--report", str(report_eq.out)]
    synth(g, "existing output without --force", small, "--schema", str(unit2), old="keep",
          expect="refused, old file kept", **fails("exists; pass --force"))
    synth(g, "existing output with --force", small, "--schema", str(unit2), "--force", old="replace",
          expect="replaced atomically")

    # 2. Atomic writes: a full disk, signals mid-write.
    g = "2 atomic writes"
    if tmpfs is not None:
        target = tmpfs / "out.csv"
        target.write_bytes(b"old content, must survive\n")
        out.append(Case(g, f"full disk ({TMPFS_LABEL} tmpfs), --force over an old file",
                        [*CLI, "synth", str(small), str(target), "--mechanism", "dp_histogram", "--epsilon", "1",
                         "--schema", str(unit2), "--n-synthetic", "100000", "--force"],
                        "exit 2, old file kept, no partial file", protect=[small, target], out=target,
                        **fails("No space left on device")))
    else:
        d = folder("enospc")
        target = d / "out.csv"
        target.write_bytes(b"old content, must survive\n")
        out.append(Case(g, "full disk (ENOSPC injected after 64 KB: no tmpfs), --force over an old file",
                        ["-c", ENOSPC_CHILD, "synth", str(small), str(target), "--mechanism", "dp_histogram",
                         "--epsilon", "1", "--schema", str(unit2), "--n-synthetic", "100000", "--force"],
                        "exit 2, old file kept, no partial file", protect=[small, target], out=target,
                        note="no tmpfs could be mounted", **fails("No space left on device")))
    out.append(Case(g, "output /dev/full", [*CLI, "synth", str(small), "/dev/full", "--mechanism", "dp_histogram",
                                            "--epsilon", "1", "--force"],
                    "refused: not a regular file", protect=[small], **fails("not a regular file")))
    for sig, code in ((signal.SIGTERM, 143), (signal.SIGINT, 130)):
        c = synth(g, f"{sig.name} mid-write ({SIGNAL_ROWS:,} rows, --force over an old file)", small, "--schema",
                  str(unit2), "--n-synthetic", str(SIGNAL_ROWS), "--force", old="keep",
                  expect=f"exit {code}, one line, old file kept, no partial file",
                  code=code, fragment=f"interrupted ({sig.name})", heavy=True)
        c.signal_at = (sig, SIGNAL_AT_BYTES)
    for sig, code in ((signal.SIGINT, 130), (signal.SIGTERM, 143)):
        c = synth(g, f"{sig.name} during start-up (0.3 s, while importing)", small, "--schema", str(unit2),
                  expect=f"exit {code}, one line", code=code, fragment=f"interrupted ({sig.name})",
                  note="privsyn_core.__main__ installs its handlers before cli loads numpy and pandas (about 1 s); "
                       "nothing is written yet")
        c.signal_at = (sig, 0.3)

    # 3. Bounded memory.
    g = "3 bounded memory"
    for n in EVAL_SIZES:
        real, syn = f[f"eval_real_{n}.csv"], f[f"eval_synth_{n}.csv"]
        out.append(Case(g, f"evaluate {n:,} rows against {n:,} (6 columns)",
                        [*CLI, "evaluate", str(real), str(syn)],
                        "exit 0, subsampled to 50,000 rows a side (stated: rows_compared=50000)",
                        code=0, stdout="rows_compared=50000", protect=[real, syn], kind="CLI evaluate",
                        size=f"{n:,} + {n:,} rows, {real.stat().st_size / 1e6:.0f} MB each", heavy=True))
    synth(g, "--n-synthetic 2e7 (CLI)", small, "--schema", str(unit2), "--n-synthetic", "20000000",
          expect="refused by the memory budget", **fails("exceed the memory budget"))
    out.append(Case(g, "n_synthetic = 1e8 (API)", ["-c", API_CHILD, "n_synthetic", "1e8"],
                    "ResourceError before allocating", **fails("exceed the memory budget")))
    out.append(Case(g, "n_synthetic at the budget's cap, 16,777,216 rows of 2 columns (API)",
                    ["-c", API_CHILD, "n_synthetic", "16777216"], "accepted, finite rows", code=0,
                    kind="API n_synthetic", size="16,777,216 x 2 synthetic rows", heavy=True,
                    note="API, not CLI: the CLI would also write a 0.6 GB CSV"))
    synth(g, "epsilon 1e6 on 200 rows, pmm", small, "--schema", str(unit2), mechanism="pmm", epsilon="1e6",
          expect="depth capped by the budget, warned", fragment="capped", kind="PMM depth (epsilon)",
          size="epsilon 1e6, 200 rows", heavy=True)
    text = f["text_50MB.csv"]
    synth(g, "50 MB CSV of short text (5.6M rows x 3)", text, "--n-synthetic", "10000",
          expect="parsed, accepted, under 2 GB", kind="CLI text CSV", size=f"{text.stat().st_size / 1e6:.0f} MB",
          heavy=True, note="10,000 synthetic rows: the case is the parse")
    for name, rows in (("eval_real_1000000.csv", "1M"), ("numeric_190MB.csv", "4M")):
        numeric = f[name]
        synth(g, f"pmm, epsilon 100 (the app's maximum) on a {numeric.stat().st_size / 2**20:.0f} MiB numeric CSV "
                 f"({rows} rows x 6)", numeric, "--n-synthetic", "10000", mechanism="pmm", epsilon="100",
              expect="parsed, depth capped, under 2 GB", fragment="capped", kind="CLI numeric CSV, pmm epsilon 100",
              size=f"{numeric.stat().st_size / 2**20:.0f} MiB", heavy=True,
              note="10,000 synthetic rows; 190 MiB is just under the loader's 200 MiB limit" if rows == "4M" else
              "10,000 synthetic rows")
    synth(g, "1 GB file", f["sparse_1GB.csv"], expect="refused by size before reading", **fails("the limit is"))

    # 5. One line and exit 2.
    g = "5 one line, exit 2"
    synth(g, "a valid schema (control)", abc, "--schema", str(abc_json), expect="accepted")
    synth(g, "--seed -1", small, "--seed", "-1", **fails("non-negative integer"), expect="refused")
    synth(g, "--epsilon abc", small, epsilon="abc", **fails("epsilon must be a number"), expect="refused, no usage")
    out.append(Case(g, "evaluate --schema non-UTF-8 (Latin-1)",
                    [*CLI, "evaluate", str(abc), str(abc), "--schema", str(BAD_SCHEMA / "latin1.json")],
                    "refused", protect=[abc], **fails("not UTF-8")))
    g = "8 messages"
    synth(g, "/dev/zero as input", "/dev/zero", **fails("not a regular file: /dev/zero"), expect="refused")
    synth(g, "/dev/zero as schema", small, "--schema", "/dev/zero", **fails("not a regular file: /dev/zero"),
          expect="refused")
    synth(g, "missing output folder", small, target=work / "no_such_folder" / "out.csv", **fails("no such folder"),
          expect="refused, names the folder")

    # 6. No silent wrong result.
    g = "6 no silent wrong result"
    for mech in ("microagg_anon", "microagg_dp"):
        synth(g, f"{mech} with hi = 1.797e308", abc, "--schema", str(BAD_SCHEMA / "hi_near_float_max.json"),
              mechanism=mech, **fails("half the largest float"), expect="refused by the schema")
    synth(g, "data entirely outside the bounds, --diagnostics", small, "--schema", str(f["outside.json"]),
          "--diagnostics", expect="exit 0, clipping diagnostic on stderr", fragment="lay outside its public bounds")
    synth(g, "data entirely outside the bounds, no --diagnostics", small, "--schema", str(f["outside.json"]),
          expect="exit 0; clip counts read the raw data, so they are shown only with --diagnostics")
    synth(g, "schema omitting a data column", small, "--schema", str(f["omits_b.json"]),
          expect="exit 0, warning names the column", fragment="not in the schema")

    # 7. Dask without workers.
    g = "7 dask"
    if importlib.util.find_spec("distributed") is not None:
        out.append(Case(g, "cluster with no workers (PRIVSYN_DASK_WORKER_TIMEOUT=3)",
                        ["-c", API_CHILD, "dask_no_workers", "pmm"], "ClusterError after the deadline",
                        env={"PRIVSYN_DASK_WORKER_TIMEOUT": "3"}, timeout=120, heavy=True,
                        **fails("no worker for 3 s")))

    # Corpora: every bad CSV (outcome from its manifest) and every bad schema file.
    manifest = json.loads((BAD_CSV / "manifest.json").read_text())
    for name, entry in sorted(manifest.items()):
        extra: list[str] = []
        if entry["schema"] is not None:
            schema = folder("schemas") / f"{name}.json"
            schema.write_text(json.dumps(entry["schema"]))
            extra = ["--schema", str(schema)]
        failure = entry["load"] if entry["load"] != "ok" else entry["synth"] if entry["synth"] != "ok" else None
        expected = {"code": 0} if failure is None else fails(failure)
        synth("corpus bad_csv", name, BAD_CSV / name, *extra, expect="accepted" if failure is None else
              f"refused: {failure}", **expected)
    schemas = json.loads((BAD_SCHEMA / "manifest.json").read_text())
    for name, fragment in sorted(schemas.items()):
        synth("corpus bad_schema", name, abc, "--schema", str(BAD_SCHEMA / name), expect=f"refused: {fragment}",
              protect=[BAD_SCHEMA / name], **fails(fragment))
    return out


# -- running --------------------------------------------------------------------------------------------------------
def digest(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as fh:
        for block in iter(lambda: fh.read(2**20), b""):
            h.update(block)
    return h.hexdigest()


def parts(folder: Path | None) -> list[Path]:
    return sorted(folder.glob(".*.part")) if folder is not None and folder.is_dir() else []


def send_signal_when(proc: subprocess.Popen, folder: Path | None, sig: signal.Signals, at: int | float,
                     deadline: float) -> str:
    """Send ``sig`` after ``at`` seconds (a float) or once the ``.part`` files hold ``at`` bytes (an int)."""
    start = time.monotonic()
    while proc.poll() is None and time.monotonic() < deadline:
        if isinstance(at, float):
            if time.monotonic() - start >= at:
                proc.send_signal(sig)
                return f"{sig.name} at {at:g} s"
        else:
            written = 0
            for p in parts(folder):
                with contextlib.suppress(OSError):
                    written += p.stat().st_size
            if written >= at:
                proc.send_signal(sig)
                return f"{sig.name} at {written / 2**20:.0f} MB written"
        time.sleep(0.005)
    return f"{sig.name} never sent: the process ended first"


def run(case: Case) -> Outcome:
    before = {p: digest(p) for p in case.protect}
    folder = case.out.parent if case.out is not None else None
    existed = case.out is not None and case.out.exists()
    env = {**os.environ, "PYTHONPATH": str(REPO), **case.env}
    with tempfile.TemporaryFile() as stdout, tempfile.TemporaryFile() as stderr:
        start = time.perf_counter()
        proc = subprocess.Popen([sys.executable, *case.args], cwd=REPO, stdout=stdout, stderr=stderr, env=env)
        killed = threading.Event()

        def kill() -> None:
            killed.set()
            proc.kill()

        timer = threading.Timer(case.timeout, kill)
        timer.start()
        sent = ""
        if case.signal_at is not None:
            sent = send_signal_when(proc, folder, *case.signal_at, deadline=time.monotonic() + case.timeout)
        _, status, usage = os.wait4(proc.pid, 0)
        timer.cancel()
        wall = time.perf_counter() - start
        proc.returncode = code = os.waitstatus_to_exitcode(status)
        stderr.seek(0)
        err = stderr.read().decode("utf-8", "replace")
        stdout.seek(0)
        said = stdout.read().decode("utf-8", "replace")
    lines = [line for line in err.splitlines() if line.strip()]
    changed = [p.name for p in case.protect if not p.exists() or digest(p) != before[p]]
    left = [p.name for p in parts(folder)]
    problems: list[str] = []
    if killed.is_set():
        problems.append(f"killed after {case.timeout:g} s")
    if code != case.code:
        problems.append(f"exit {code}, expected {case.code}")
    if "Traceback" in err:
        problems.append("traceback")
    output = sent
    if case.code != 0:
        if len(lines) != 1 or not lines[0].startswith("error: "):
            problems.append(f"{len(lines)} stderr lines, expected one 'error:' line")
        elif case.fragment and case.fragment.lower() not in lines[0].lower():
            problems.append(f"message lacks {case.fragment!r}")
        if case.out is not None and not existed and case.out.exists() and case.out.is_file():
            left.append(case.out.name)
    else:
        stray = [line for line in lines if not line.startswith(("warning: ", "diagnostic "))]
        if stray:
            problems.append(f"unexpected stderr: {stray[0][:80]!r}")
        if case.fragment and case.fragment.lower() not in err.lower():
            problems.append(f"stderr lacks {case.fragment!r}")
        if case.stdout and case.stdout not in said:
            problems.append(f"stdout lacks {case.stdout!r}")
        if case.out is not None:
            output = check_csv(case.out, problems)
    if changed:
        problems.append(f"changed: {', '.join(changed)}")
    if left:
        problems.append(f"left: {', '.join(left)}")
    rss_mb = usage.ru_maxrss / 1024  # kilobytes on Linux
    if rss_mb > MAX_RSS_MB:
        problems.append(f"peak RSS {rss_mb:.0f} MB > {MAX_RSS_MB} MB")
    return Outcome(case, code, lines, None if not case.protect else not changed, left, wall, rss_mb, output,
                   problems)


def check_csv(path: Path, problems: list[str]) -> str:
    """Rows of a written CSV and whether every cell that parses as a number is finite (appends to ``problems``).

    Read with the standard library (the outputs are small), to keep pandas out of the parent process."""
    if not path.is_file():
        problems.append("no output written")
        return "missing"
    csv.field_size_limit(2**31 - 1)  # the corpus has a 2 MB cell
    try:
        with path.open(newline="", encoding="utf-8") as fh:
            rows = list(csv.reader(fh))[1:]
    except (csv.Error, UnicodeDecodeError) as exc:
        problems.append(f"output unreadable: {exc}")
        return "unreadable"
    finite = not any(math.isinf(number) for row in rows for number in map(_number, row))
    if not finite:
        problems.append("infinite values written")
    return f"{len(rows):,} rows{'' if finite else ', NOT finite'}"


def _number(text: str) -> float:
    try:
        return float(text)
    except ValueError:
        return 0.0


# -- report ---------------------------------------------------------------------------------------------------------
def cell(text: object) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def render(outcomes: list[Outcome], total: float, disk: str, root: str, load: tuple[float, float],
           jobs: int) -> str:
    """The Markdown page; ``root`` (the temporary folder of the run) is written ``$TMP``, paths in the repository
    relative to it."""

    def short(text: str) -> str:
        return text.replace(root, "$TMP").replace(f"{REPO}/", "")

    passed = sum(o.verdict == "PASS" for o in outcomes)
    lines = [
        "# Fault and hostile-input table (issue 18)", "",
        "Generated by `PYTHONPATH=. python benchmarks/fault_table.py` (do not edit by hand). Every case is one child "
        "process: `python -m privsyn_core ...`, or `python -c` calling the API where only the API accepts the input "
        "(a `PrivsynError` there becomes one `error:` line and exit 2). **Rule** (issue 18): bad input ends with "
        "exactly one `error:` line naming the problem and exit 2, SIGINT/SIGTERM with one line and 130/143, never a "
        "traceback; accepted input ends with exit 0, only `warning:`/`diagnostic` lines on stderr and finite values "
        "in the written CSV; the input, the schema and any existing output the command must keep are byte-identical "
        "afterwards (SHA-256); no `*.part` file or failed output is left; the child's peak RSS (`ru_maxrss` from "
        f"`os.wait4`, the child alone) stays under {MAX_RSS_MB} MB.", "",
        f"{passed} of {len(outcomes)} cases pass; the run took {total:.0f} s wall on {os.cpu_count()} shared cores "
        f"({platform.python_implementation()} {platform.python_version()}, memory budget "
        f"{os.environ.get('PRIVSYN_MEMORY_BUDGET_MB', '1024 (default)')} MB; 1-minute load average {load[0]:.1f} at "
        f"the start, {load[1]:.1f} at the end: other jobs share the machine, so read wall times with it). "
        f"Full disk: {disk}. Exit `-k` means killed by signal k (a shell reports 128 + k). Light cases ran {jobs} at "
        "a time, heavy ones alone.", "",
    ]
    failed = [o for o in outcomes if o.verdict == "FAIL"]
    if failed:
        lines += ["## Failures", ""]
        lines += [f"* **{cell(o.case.name)}** ({o.case.group}): {cell(short('; '.join(o.problems)))}"
                  for o in failed]
        lines += [""]
    lines += ["## Peak memory of the largest accepted input of each kind", "",
              "| kind | input | case | wall s | peak RSS MB |", "|---|---|---|---:|---:|"]
    largest: dict[str, Outcome] = {}
    for o in outcomes:
        if o.case.kind and o.code == 0:
            largest[o.case.kind] = o  # cases of a kind are listed smallest first
    for kind, o in largest.items():
        lines.append(f"| {kind} | {cell(o.case.size)} | {cell(o.case.name)} | {o.wall:.1f} | {o.rss_mb:.0f} |")
    lines += ["", "## Every case", "",
              "| # | group | case | expected | exit | stderr lines | first stderr line | input unchanged | "
              "partial file left | output | wall s | peak RSS MB | verdict |",
              "|---:|---|---|---|---:|---:|---|---|---|---|---:|---:|---|"]
    for k, o in enumerate(outcomes, 1):
        first = short(o.lines[0]) if o.lines else ""
        first = first if len(first) <= 140 else first[:137] + "..."
        intact = "-" if o.intact is None else "yes" if o.intact else "**NO**"
        left = "no" if not o.left else "**" + ", ".join(o.left) + "**"
        name = o.case.name + (f" ({o.case.note})" if o.case.note else "")
        verdict = o.verdict if not o.problems else short(f"**FAIL**: {'; '.join(o.problems)}")
        lines.append(f"| {k} | {o.case.group} | {cell(name)} | {cell(o.case.expect)} | {o.code} | {len(o.lines)} | "
                     f"{cell(first)} | {intact} | {left} | {cell(o.output)} | {o.wall:.1f} | {o.rss_mb:.0f} | "
                     f"{cell(verdict)} |")
    return "\n".join(lines) + "\n"


def summary(text: str, outcomes: list[Outcome]) -> str:
    """``docs/tables/faults.md``: the page above its table of every case, and the cases per group."""
    head = text.split("## Every case")[0].split("\n", 2)[2].strip()
    groups: dict[str, list[Outcome]] = {}
    for o in outcomes:
        groups.setdefault(o.case.group, []).append(o)
    rows = [f"| {g} | {len(os_)} | {sum(o.verdict == 'PASS' for o in os_)} |" for g, os_ in groups.items()]
    return "\n".join([head, "", "## Cases per group", "", "| group | cases | pass |", "|---|---:|---:|", *rows])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=2, help="light cases run this many at a time")
    parser.add_argument("--only", help="run only the cases whose name contains this text")
    parser.add_argument("--no-write", action="store_true", help=f"print the table, do not write {DOC}")
    parser.add_argument("--inputs", type=Path, help=argparse.SUPPRESS)  # the child that writes the inputs
    args = parser.parse_args()
    if args.inputs is not None:
        make_inputs(args.inputs)
        return 0
    start, load_start = time.perf_counter(), os.getloadavg()[0]
    with tempfile.TemporaryDirectory(prefix="fault_table.") as tmp:
        work = Path(tmp)
        (work / "shared").mkdir()
        print("writing the inputs ...", file=sys.stderr, flush=True)
        subprocess.run([sys.executable, __file__, "--inputs", str(work / "shared")], check=True,
                       env={**os.environ, "PYTHONPATH": str(REPO)})
        files = {p.name: p for p in (work / "shared").iterdir()}
        with small_tmpfs(work / "tmpfs") as mounted:
            disk = (f"a {TMPFS_LABEL} tmpfs mounted for the run" if mounted else
                    "ENOSPC injected after 64 KB (no tmpfs could be mounted)")
            todo = cases(files, work / "cases", work / "tmpfs" if mounted else None)
            if args.only:
                todo = [c for c in todo if args.only.lower() in c.name.lower()]
            print(f"{len(todo)} cases ...", file=sys.stderr, flush=True)
            light = [c for c in todo if not c.heavy]
            with ThreadPoolExecutor(max_workers=args.jobs) as pool:
                done = dict(zip(map(id, light), pool.map(run, light), strict=True))
            for c in todo:
                if c.heavy:
                    done[id(c)] = run(c)
                    print(f"  {c.name}: {done[id(c)].verdict}", file=sys.stderr, flush=True)
            outcomes = [done[id(c)] for c in todo]
    text = render(outcomes, time.perf_counter() - start, disk, root=tmp, load=(load_start, os.getloadavg()[0]),
                  jobs=args.jobs)
    if not args.no_write and not args.only:
        DOC.parent.mkdir(parents=True, exist_ok=True)
        DOC.write_text(text)
        write_table("faults", summary(text, outcomes), "PYTHONPATH=. python benchmarks/fault_table.py")
    print(text)
    return 0 if all(o.verdict == "PASS" for o in outcomes) else 1


if __name__ == "__main__":
    raise SystemExit(main())
