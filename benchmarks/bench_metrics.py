"""Metric benchmark: MMD at scale (random Fourier features), W1 at 10^5 (grid and min-cost flow), evaluate's memory.

Usage::

    PYTHONPATH=. python benchmarks/bench_metrics.py [--n 100000] [--flow-cells 200 300] [--eval-rows 1000000]
        [--certified-cells 150 200] [--repeats 2] [--sections w1-certified]

* mmd: ``mmd2`` by random Fourier features (the "auto" choice above ``MMD_EXACT_PAIRS``) at n = m = ``--n`` in
  d = 2 with its stated 95% error, and at 10^4 against the exact V-statistic (the measured error beside the
  stated one).
* w1: a good output, PMM (eps = 1, seed 0) on ``--n`` uniform points in d = 2, against the real points:
  ``w1`` "auto" (dense grid, default budget) and ``method="flow"`` (OR-tools min-cost flow on the king graph)
  for each ``--flow-cells``, with error bound / value and wall and CPU time (unweighted inputs: exact integer
  supplies).  ``--sections w1`` runs this part alone.
* w1-certified: ``method="certified"`` (the certified interval in d = 2: a coupling of the points through a
  lattice for the upper end, the lattice's dual potentials extended 1-Lipschitz for the lower end) on PMM
  (eps = 1, seed 0) outputs for ``--n`` uniform points and ``--n`` ``two_blobs`` points, at each
  ``--certified-cells`` (default: the library's default lattice): n, k, wall and CPU seconds (best of
  ``--repeats``), value, lower, upper, error bound (half-width) and bound / value.
* evaluate: peak RSS of a child process that builds two tables of ``--eval-rows`` rows and 5 columns and runs
  ``evaluate`` on them (``resource.getrusage(RUSAGE_CHILDREN)``; includes the interpreter and the input tables).

Times are wall-clock seconds on the machine at hand (shared cores inflate them); seed 0 throughout.
``--table`` also writes the printed lines into ``docs/tables/w1_timings.md`` (linked from docs/performance.md).
"""

from __future__ import annotations

import argparse
import resource
import subprocess
import sys
import time
from functools import partial
from pathlib import Path

import numpy as np
import pandas as pd

import privsyn_core as ps
from privsyn_core.data.datasets import two_blobs
from privsyn_core.evaluation.distances import mmd2, w1

sys.path.insert(0, str(Path(__file__).resolve().parent))
from docsection import write_table

LINES: list[str] = []
EVAL_CHILD = """
import sys, time, numpy as np, pandas as pd
from privsyn_core import Schema
from privsyn_core.evaluation.scorecard import evaluate
n = int(sys.argv[1]); rng = np.random.default_rng(0)
cols = [f"x{i}" for i in range(5)]
real = pd.DataFrame(rng.random((n, 5)), columns=cols)
synth = pd.DataFrame(rng.random((n, 5)) ** 1.1, columns=cols)
schema = Schema.from_dict({"columns": [{"name": c, "kind": "numeric", "lo": 0, "hi": 1} for c in cols]})
start = time.perf_counter()
out = evaluate(real, synth, schema)
print(time.perf_counter() - start, out["_about"]["rows_evaluated"]["real"], out["w1"]["value"])
"""


def say(line: str) -> None:
    """Print ``line`` and keep it for the report section."""
    print(line, flush=True)
    LINES.append(line)


def timed(fn):
    start = time.perf_counter()
    value = fn()
    return value, time.perf_counter() - start


def timed_cpu(fn):
    """The value, wall seconds and CPU seconds of this process (all its threads: the certified W1 solves its
    blocks on two)."""
    start, cpu = time.perf_counter(), time.process_time()
    value = fn()
    return value, time.perf_counter() - start, time.process_time() - cpu


def mmd_section(n: int) -> None:
    say("## MMD (Gaussian kernel, bandwidth 0.4, d = 2: uniform vs clipped normal)")
    rng = np.random.default_rng(0)
    X, Y = rng.random((10_000, 2)), np.clip(rng.normal(0.5, 0.25, (10_000, 2)), 0, 1)
    exact, seconds = timed(lambda: mmd2(X, Y, bandwidth=0.4, estimator="biased"))
    approx, rff_seconds = timed(lambda: mmd2(X, Y, bandwidth=0.4, estimator="rff"))
    say(f"n = m = 10^4: exact MMD^2 {exact:.6f} ({seconds:.2f} s); RFF {approx:.6f} +- {approx.error:.6f} "
        f"(stated 95%), measured |error| {abs(approx - exact):.6f} ({rff_seconds:.2f} s)")
    X, Y = rng.random((n, 2)), np.clip(rng.normal(0.5, 0.25, (n, 2)), 0, 1)
    approx, seconds = timed(lambda: mmd2(X, Y, bandwidth=0.4))
    say(f"n = m = {n}: {approx.estimator} MMD^2 {approx:.6f} +- {approx.error:.6f} (stated 95%, "
        f"{approx.features} features, relative {approx.error / approx:.1%})  time {seconds:.2f} s")


def w1_section(n: int, cells: list[int]) -> None:
    say(f"## W1 (chebyshev) at n = m = {n}, d = 2: PMM eps = 1 on uniform data against the real points")
    frame = pd.DataFrame(np.random.default_rng(0).random((n, 2)), columns=["a", "b"])
    schema = ps.Schema.from_dict({"columns": [{"name": c, "kind": "numeric", "lo": 0, "hi": 1} for c in "ab"]})
    synth = ps.synthesize(frame, "pmm", 1.0, schema=schema, rng=0).unit_rows
    real = schema.encode(frame)[0]
    for label, call in [("auto (dense grid)", lambda: w1(real, synth))] + [
            (f"flow, k = {k}", lambda k=k: w1(real, synth, method="flow", cells_per_axis=k)) for k in cells]:
        value, seconds, cpu = timed_cpu(call)
        say(f"{label:18s}: W1 = {value:.6f} +- {value.error_bound:.6f} ({value.method}, {value.cells_per_axis} "
            f"cells/axis), bound / value = {value.error_bound / value:.3f}  time {seconds:6.2f} s (CPU {cpu:6.2f} s)")


def certified_section(n: int, cells: list[int | None], repeats: int) -> None:
    say(f"## W1 (chebyshev) certified interval at n = m = {n}, d = 2: PMM eps = 1 against the real points")
    schema = ps.Schema.from_dict({"columns": [{"name": c, "kind": "numeric", "lo": 0, "hi": 1} for c in "ab"]})
    for name, points in (("uniform", np.random.default_rng(0).random((n, 2))), ("two_blobs", two_blobs(n, 2, rng=0))):
        frame = pd.DataFrame(points, columns=["a", "b"])
        synth = ps.synthesize(frame, "pmm", 1.0, schema=schema, rng=0).unit_rows
        real = schema.encode(frame)[0]
        assert synth is not None
        for k in cells:
            runs = [timed_cpu(partial(w1, real, synth, method="certified", cells_per_axis=k)) for _ in range(repeats)]
            value, seconds, cpu = runs[0][0], min(r[1] for r in runs), min(r[2] for r in runs)
            say(f"{name:9s} n = {n} k = {value.cells_per_axis}: W1 = {value:.6f} in [{value.lower:.6f}, "
                f"{value.upper:.6f}], bound {value.error_bound:.6f}, bound / value = {value.error_bound / value:.3f}  "
                f"time {seconds:6.2f} s (CPU {cpu:6.2f} s, best of {repeats})")


def evaluate_section(rows: int) -> None:
    say(f"## evaluate at {rows} vs {rows} rows, 5 numeric columns (child process)")
    proc = subprocess.run([sys.executable, "-c", EVAL_CHILD, str(rows)], capture_output=True, text=True, check=True,
                          cwd=Path(__file__).resolve().parent.parent)
    seconds, used, value = proc.stdout.split()
    peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
    say(f"peak RSS {peak:.0f} MB (interpreter, imports, both input tables and evaluate); "
        f"evaluate {float(seconds):.1f} s on {used} rows per side; W1 {float(value):.4f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=100_000)
    parser.add_argument("--flow-cells", type=int, nargs="+", default=[200, 300])
    parser.add_argument("--eval-rows", type=int, default=1_000_000)
    parser.add_argument("--certified-cells", type=int, nargs="+", default=[None])
    parser.add_argument("--repeats", type=int, default=1)
    parser.add_argument("--sections", nargs="+", choices=("evaluate", "mmd", "w1", "w1-certified"),
                        default=["evaluate", "mmd", "w1", "w1-certified"])
    parser.add_argument("--table", action="store_true", help="also write the output into docs/tables/w1_timings.md")
    args = parser.parse_args()
    if "evaluate" in args.sections:
        evaluate_section(args.eval_rows)
    if "mmd" in args.sections:
        mmd_section(args.n)
    if "w1" in args.sections:
        w1_section(args.n, args.flow_cells)
    if "w1-certified" in args.sections:
        certified_section(args.n, args.certified_cells, args.repeats)
    if args.table:
        command = " ".join(["python benchmarks/bench_metrics.py", *sys.argv[1:]])
        write_table("w1_timings", "Wall seconds, 2 shared cores.\n\n```text\n" + "\n".join(LINES) + "\n```", command)


if __name__ == "__main__":
    main()
