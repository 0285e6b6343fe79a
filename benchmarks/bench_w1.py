"""Certified W1 benchmark (issue 30, item 1): wall and CPU time and the certified interval of ``w1``.

Usage::

    python -m benchmarks.bench_w1 [--n 100000] [--n-high 10000] [--dims 2 3 5] [--method certified] [--only pmm]
                                  [--table]

``--table`` also writes the lines to ``docs/tables/w1_certified.md``.

Inputs (chebyshev ground metric, seed 0), each at ``--n`` points per side in d = 2 and at ``--n-high`` points
per side in the other ``--dims``:

* ``pmm``: a good output, PMM (eps = 1, seed 0) on ``two_blobs(n, d, rng=0)``, against those real points;
* ``pmm_add_remove``: the same under add/remove neighbouring (seed 1), whose release has a noisy size, so the
  masses count in units of ``1 / lcm(n, m)`` (about 10^10 at 10^5 rows);
* ``two_blobs``: ``two_blobs(n, d, rng=0)`` against an independent draw ``two_blobs(n, d, rng=1)``;
* ``shift``: ``n`` uniform points on ``[0, 0.98]^d`` against the same points shifted by 0.02 in every
  coordinate (inside the unit cube, nothing clipped). Its exact W1 is 0.02: the shift is a coupling of cost
  0.02, and ``f(z) = z_1`` is 1-Lipschitz for l-infinity with ``E_mu f - E_nu f = -0.02`` in absolute value.

Printed per input: n, d, wall seconds, CPU seconds (this process and its child processes, psutil), the
1-minute load average after the call (the machine is shared: wall time depends on it, CPU time much less), the
method, ``[L, U]`` and ``(U - L) / value`` (value = the midpoint). The d = 2 method runs on two threads.
"""

from __future__ import annotations

import argparse
import os
import sys

import numpy as np

import privsyn_core as ps
from benchmarks.bench_metrics import timed_cpu
from benchmarks.docsection import write_table
from privsyn_core.data.datasets import two_blobs
from privsyn_core.evaluation.distances import w1

SHIFT = 0.02


def inputs(n: int, d: int) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """The four benchmark pairs (real, other) at ``n`` points per side in dimension ``d``."""
    real = two_blobs(n, d, rng=0)
    pmm = ps.synthesize(real, "pmm", 1.0, schema=ps.unit_schema(d), rng=0).unit_rows
    pmm_add_remove = ps.synthesize(real, "pmm", 1.0, schema=ps.unit_schema(d), neighbouring="add_remove",
                                   rng=1).unit_rows
    assert pmm is not None and pmm_add_remove is not None
    base = (1 - SHIFT) * np.random.default_rng(0).random((n, d))
    return {"pmm": (real, pmm), "pmm_add_remove": (real, pmm_add_remove), "two_blobs": (real, two_blobs(n, d, rng=1)),
            "shift": (base, base + SHIFT)}


def run(n: int, d: int, method: str, only: list[str] | None) -> list[str]:
    lines = []
    for name, (X, Y) in inputs(n, d).items():
        if only and name not in only:
            continue
        value, seconds, cpu = timed_cpu(lambda X=X, Y=Y: w1(X, Y, method=method))
        load = os.getloadavg()[0]
        ratio = (value.upper - value.lower) / value
        lines.append(f"{name:14s} n = {n:6d} d = {d}: wall {seconds:6.2f} s  CPU {cpu:6.2f} s  load {load:4.2f}  "
                     f"{value.method:14s} [L, U] = [{value.lower:.6f}, {value.upper:.6f}]  "
                     f"(U - L) / value = {ratio:.3f}")
        print(lines[-1], flush=True)
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=100_000)
    parser.add_argument("--n-high", type=int, default=10_000)
    parser.add_argument("--dims", type=int, nargs="*", default=[2, 3, 5])
    parser.add_argument("--method", default="certified")
    parser.add_argument("--only", nargs="*", choices=("pmm", "pmm_add_remove", "two_blobs", "shift"))
    parser.add_argument("--table", action="store_true", help="also write docs/tables/w1_certified.md")
    args = parser.parse_args()
    lines = [line for d in args.dims for line in run(args.n if d == 2 else args.n_high, d, args.method, args.only)]
    if args.table:
        command = "python -m benchmarks.bench_w1 " + " ".join(sys.argv[1:])
        write_table("w1_certified", "2 cores shared with other jobs: wall seconds depend on the load average "
                    "printed; CPU seconds are this process's (two threads).\n\n```text\n" + "\n".join(lines) + "\n```",
                    command)


if __name__ == "__main__":
    main()
