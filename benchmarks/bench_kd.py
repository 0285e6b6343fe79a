"""KD-tree mechanisms (seed 002): wall time at 10^6 rows, on Balog et al.'s mixture and its public cube.

Usage::

    python -m benchmarks.bench_kd [--repeats 3] [--table]

* ``kd_adaptive`` at d = 5 (h = 15, h_max = 20) and ``kd_grid`` at d = 10 (w = 1/16, i.e. 16^10 = 2^40 bins, almost
  all empty and handled implicitly), n = 10^6 rows of ``balog_mixture(d, N=10**6)``, eps = 1, ``n_synthetic = 1``.
* Reported: best of ``--repeats`` wall times of ``ps.synthesize`` end to end and of the mechanism stage alone.

The MMD comparison with Balog's numbers is ``benchmarks/balog.py`` (run by ``benchmarks/reproduce.py``).
``--table`` also writes the printed lines into ``docs/tables/kd_timings.md`` (linked from docs/performance.md).
"""

from __future__ import annotations

import argparse
import math
import sys
import time

import privsyn_core as ps
from benchmarks.balog import schema
from benchmarks.docsection import write_table
from privsyn_core.data.datasets import balog_mixture

CASES = (("kd_adaptive", 5, {"h": 15, "h_max": 20}), ("kd_grid", 10, {"w": 1 / 16}))


def timing(mechanism: str, d: int, params: dict, repeats: int) -> str:
    """One line: best-of-``repeats`` wall seconds, total and mechanism stage."""
    X = balog_mixture(d, N=10**6)
    best_total, best_mech = math.inf, math.inf
    for seed in range(repeats):
        start = time.perf_counter()
        result = ps.synthesize(X, mechanism, 1.0, schema=schema(d), n_synthetic=1, rng=seed, **params)
        best_total = min(best_total, time.perf_counter() - start)
        best_mech = min(best_mech, result.timings["mechanism"])
    size = f"bins={result.params['cells']:.4g}" if mechanism == "kd_grid" else f"leaves={result.params['leaves']}"
    return (f"{mechanism:<12} n=10^6 d={d:<3} total {best_total:6.2f} s, mechanism {best_mech:6.2f} s, "
            f"{size}, released centres={len(result.weights)}, params={params}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--table", action="store_true", help="also write the output into docs/tables/kd_timings.md")
    args = parser.parse_args()
    lines = [f"ps.synthesize, eps = 1, n_synthetic = 1, public cube [-900, 1100]^d; best of {args.repeats} wall times "
             "(2 shared cores)"]
    print(lines[0], flush=True)
    for mechanism, d, params in CASES:
        lines.append(timing(mechanism, d, params, args.repeats))
        print(lines[-1], flush=True)
    if args.table:
        command = " ".join(["python -m benchmarks.bench_kd", *sys.argv[1:]])
        write_table("kd_timings", "```text\n" + "\n".join(lines) + "\n```", command)


if __name__ == "__main__":
    main()
