"""Peak memory and time of ``python -m privsyn_core synth`` on a ~200 MB CSV.

Usage::

    PYTHONPATH=. python benchmarks/bench_cli_memory.py [--rows 2500000] [--columns 10] [--mechanism pmm]
                                                       [--epsilon 1] [--keep] [--extra ...]

With ``--no-schema`` the CLI proposes the domain from the data, so it reads the table whole.

Writes ``--rows`` rows of ``--columns`` uniform numeric columns, each value with 5 decimals
(``0.12345``: 8 bytes and a separator, so 2.5e6 rows x 10 columns is 200 MB, 191 MiB, under the
CLI's 200 MiB limit), and the public schema ``[0, 1]`` per column, into a temporary folder; then runs
the CLI once in a child process and prints

* the child's peak resident set size (``ru_maxrss`` of :func:`resource.getrusage` for the children:
  the same figure ``/usr/bin/time -v`` reports as "Maximum resident set size"), in MB and as a
  multiple of the file size;
* its wall time and CPU time (user + system), and the exit status.

The machine is shared: read the CPU time rather than the wall time.  The files are removed unless
``--keep`` is given.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]


def write_csv(path: Path, rows: int, columns: int, seed: int = 0, block: int = 250_000) -> int:
    """Write ``rows`` x ``columns`` values ``0.ddddd`` (uniform) with a header; returns the file size in bytes.

    The text is built as a byte array (vectorised), block by block, not through a float formatter.
    """
    rng = np.random.default_rng(seed)
    with path.open("wb") as fh:
        fh.write((",".join(f"x{j}" for j in range(columns)) + "\n").encode("ascii"))
        for start in range(0, rows, block):
            m = min(block, rows - start)
            digits = rng.integers(0, 100_000, size=(m, columns))
            text = np.empty((m, columns, 8), dtype=np.uint8)
            text[:, :, 0], text[:, :, 1] = ord("0"), ord(".")
            for k in range(5):
                text[:, :, 6 - k] = ord("0") + digits % 10
                digits //= 10
            text[:, :, 7] = ord(",")
            text[:, -1, 7] = ord("\n")
            fh.write(text.tobytes())
    return path.stat().st_size


def run_cli(args: list[str]) -> dict[str, float]:
    """Run the CLI in a child process; its peak RSS and CPU time come from ``getrusage(RUSAGE_CHILDREN)``."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "privsyn_core", *args], capture_output=True, text=True,
                          env={**os.environ, "PYTHONPATH": str(ROOT)}, check=False)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if proc.returncode:
        print(proc.stderr.strip(), file=sys.stderr)
    return {"rc": proc.returncode, "wall_s": wall, "peak_mb": after.ru_maxrss / 1024,
            "cpu_s": (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=2_500_000)
    parser.add_argument("--columns", type=int, default=10)
    parser.add_argument("--mechanism", default="pmm")
    parser.add_argument("--epsilon", default="1")
    parser.add_argument("--no-schema", action="store_true",
                        help="no --schema: the domain is proposed from the data, read whole (not streamed)")
    parser.add_argument("--keep", action="store_true", help="keep the generated files")
    parser.add_argument("--extra", nargs=argparse.REMAINDER, default=[], help="more CLI arguments (last)")
    args = parser.parse_args()

    folder = Path(tempfile.mkdtemp(prefix="privsyn_bench_cli_"))
    data, schema, out = folder / "in.csv", folder / "schema.json", folder / "out.csv"
    size = write_csv(data, args.rows, args.columns)
    schema.write_text(json.dumps({"columns": [{"name": f"x{j}", "kind": "numeric", "lo": 0, "hi": 1}
                                              for j in range(args.columns)]}))
    try:
        schema_args = [] if args.no_schema else ["--schema", str(schema)]
        figures = run_cli(["synth", str(data), str(out), "--mechanism", args.mechanism, "--epsilon", args.epsilon,
                           *schema_args, "--seed", "0", *args.extra])
        out_rows = sum(1 for _ in out.open("rb")) - 1 if out.exists() else 0
        print(f"input: {args.rows} rows x {args.columns} columns, {size / 1e6:.0f} MB ({size / 2**20:.0f} MiB); "
              f"mechanism {args.mechanism}, epsilon {args.epsilon}, "
              f"{'no schema (read whole)' if args.no_schema else 'public schema (streamed)'}")
        print(f"exit {figures['rc']}, {out_rows} rows written")
        print(f"peak RSS {figures['peak_mb']:.0f} MB ({figures['peak_mb'] * 2**20 / size:.2f} x the file), "
              f"wall {figures['wall_s']:.1f} s, CPU {figures['cpu_s']:.1f} s")
    finally:
        if args.keep:
            print(f"files kept in {folder}")
        else:
            for p in (data, schema, out):
                p.unlink(missing_ok=True)
            folder.rmdir()


if __name__ == "__main__":
    main()
