"""Scale-out on Dask: pmm on 10^7 and 10^8 rows of d = 2 read from Parquet, on a LocalCluster of 2 worker processes.

For every size ``n`` the script writes ``n`` two-blob rows (:func:`privsyn_core.data.datasets.two_blobs`, one chunk
per file, never the whole table in memory) to Parquet files under a temporary directory, starts a fresh
``LocalCluster(n_workers=2, threads_per_worker=1, processes=True)`` (so every peak is that run's own), runs
``synthesize(dd.read_parquet(...), "pmm", ...)`` and writes the synthetic rows to Parquet.  It prints the wall
time of every stage and the peak resident memory (``VmHWM``, see :func:`peak_rss_mb`) of each worker process
and of the client.

The target is worker memory bounded by the partition size (and the row block
``privsyn_core.mechanisms.base.rows.ROW_BLOCK``), not by ``n``: compare the two sizes.  The client holds the
release (for pmm, ``2^(r+1)`` tree counts), which grows with the depth ``r``, not with ``n`` directly.

Last run (2 shared CPU cores with other jobs running, load average 2-6; 10^6 rows per file, epsilon = 1,
depth "paper"; wall-clock seconds; peak RSS per worker in MB, idle after start 232)::

    n      depth  count  release  write synthetic  worker peak counting  worker peak writing rows  client peak
    10^7   23       5.8    3.7     1.9             392, 400              539, 570                  1114
    3x10^7 24      18.1    7.8     8.2             405, 405              614, 657                  1898
    10^8   26      48.9   32.1    32.1             423, 450              750, 757                  6370
    10^7   26 (explicit depth)     11.4   30.9     2.7   436, 449        472, 636                  6140

(writing the 10^8 input: 24 s.)  Counting memory follows the per-partition cell count (the depth), not ``n``;
the row-writing peak is bounded by the 2^22-row block (at most one atom per row) and rose by about 200 MB from
10^7 to 10^8.

Client memory (the release works in place; three 2^22-row blocks): the client holds the summed
leaf counts (``2^r`` int64, the dense array of the running sum, handed over to the release without a copy), the upper
levels of the tree (another ``2^r`` int64) and scratch of a fixed size; noise and consistency overwrite the tree level
by level, and each lazy row block carries its leaves' released counts in the smallest unsigned dtype.  Measured on
the same shared machine (load average 5-10), 10^7 rows at explicit depth 26::

    n      depth  count  release  write synthetic  worker peak counting  worker peak writing rows  client peak
    10^7   26       11.5    4.1     3.1             439, 443              510, 564                  1419

(before: release 30.9 s, client peak 6140 MB).  The client peak is about 250 MB of interpreter and Dask plus
``2 x 8 x 2^r`` bytes (1 GiB at r = 26) plus the row blocks' compact counts; it does not grow with ``n``.

Usage::

    python -m benchmarks.bench_dask                      # n = 10^7 and 10^8, 10^6 rows per file
    python -m benchmarks.bench_dask --sizes 1e7 3e7 --rows-per-file 1000000 --depth paper
"""

from __future__ import annotations

import argparse
import resource
import shutil
import tempfile
import time
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

import privsyn_core as ps
from privsyn_core.data.datasets import two_blobs


def write_input(directory: Path, n: int, rows_per_file: int, seed: int) -> int:
    """``n`` two-blob rows in files of ``rows_per_file`` rows; returns the number of files."""
    directory.mkdir(parents=True)
    starts = range(0, n, rows_per_file)
    for i, start in enumerate(starts):
        chunk = two_blobs(min(rows_per_file, n - start), 2, rng=np.random.default_rng([seed, i]))
        pq.write_table(pa.table({"x0": chunk[:, 0], "x1": chunk[:, 1]}), directory / f"part{i:05d}.parquet")
    return len(starts)


def peak_rss_mb() -> float:
    """Peak resident set size of the calling process, in MB.

    ``VmHWM`` of ``/proc/self/status`` (Linux), the high-water mark of this process's own memory: a
    worker's ``ru_maxrss`` would start at its parent's peak (it survives ``execve``).  Elsewhere
    ``ru_maxrss`` (kB on Linux, bytes on macOS; assumed kB).
    """
    status = Path("/proc/self/status")
    if status.exists():
        for line in status.read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def reset_peak() -> None:
    """Restart this process's ``VmHWM`` from its current RSS (Linux ``clear_refs``; a no-op elsewhere)."""
    clear = Path("/proc/self/clear_refs")
    if clear.exists():
        clear.write_text("5")


def run(n: int, rows_per_file: int, depth: str | int, epsilon: float, root: Path) -> dict:
    """One size on a fresh cluster: stage times (s) and peak RSS per worker and of the client (MB)."""
    import dask.dataframe as dd
    from distributed import Client, LocalCluster

    times = {}
    start = time.perf_counter()
    files = write_input(root / "input", n, rows_per_file, seed=n)
    times["write input"] = time.perf_counter() - start
    with LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None) as cluster, \
            Client(cluster) as client:
        idle = client.run(peak_rss_mb)
        start = time.perf_counter()
        ddf = dd.read_parquet(str(root / "input"))
        result = ps.synthesize(ddf, "pmm", epsilon, schema=ps.unit_schema(2), rng=0, depth=depth)
        times["synthesize"] = time.perf_counter() - start
        times.update({f"  {k}": v for k, v in result.timings.items() if k in ("n", "count", "release")})
        counting = client.run(peak_rss_mb)
        client.run(reset_peak)
        start = time.perf_counter()
        result.data.to_parquet(str(root / "synthetic"))
        times["write synthetic (lazy rows)"] = time.perf_counter() - start
        rows = client.run(peak_rss_mb)
    shutil.rmtree(root / "input")
    shutil.rmtree(root / "synthetic")
    return {"n": n, "files": files, "partitions": result.diagnostics["dask"]["input_partitions"],
            "row_blocks": result.diagnostics["dask"]["row_blocks"], "depth": result.params["depth"],
            "synthetic_rows": result.diagnostics["dask"]["synthetic_rows"], "times": times,
            "idle_mb": sorted(idle.values()), "count_mb": sorted(counting.values()), "rows_mb": sorted(rows.values()),
            "client_mb": peak_rss_mb()}


def report(row: dict) -> None:
    print(f"\nn = {row['n']:.0e}: {row['files']} Parquet files -> {row['partitions']} partitions, pmm depth "
          f"{row['depth']}, {row['synthetic_rows']} synthetic rows in {row['row_blocks']} blocks")
    for stage, seconds in row["times"].items():
        print(f"  {stage:<30s} {seconds:8.1f} s")
    print(f"  peak RSS per worker (MB): idle after start {_listed(row['idle_mb'])}; up to the release (reading "
          f"and counting) {_listed(row['count_mb'])}; while writing the synthetic rows {_listed(row['rows_mb'])}")
    print(f"  peak RSS of the client (this process, all sizes so far): {row['client_mb']:.0f} MB")


def _listed(values: list[float]) -> str:
    return ", ".join(f"{mb:.0f}" for mb in values)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sizes", type=float, nargs="+", default=[1e7, 1e8])
    parser.add_argument("--rows-per-file", type=int, default=10**6)
    parser.add_argument("--depth", default="paper", help="pmm depth: paper, bound_opt or an integer")
    parser.add_argument("--epsilon", type=float, default=1.0)
    args = parser.parse_args()
    depth = int(args.depth) if args.depth.isdigit() else args.depth
    print(f"pmm on Dask, d = 2, epsilon = {args.epsilon}, depth = {depth}, {args.rows_per_file} rows per file, "
          "LocalCluster of 2 worker processes x 1 thread (times: wall clock on this machine)")
    for size in args.sizes:
        root = Path(tempfile.mkdtemp(prefix="bench_dask_"))
        try:
            report(run(int(size), args.rows_per_file, depth, args.epsilon, root))
        finally:
            shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
