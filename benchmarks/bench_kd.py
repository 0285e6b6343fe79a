"""KD-tree mechanisms (seed 002): wall time at 10^6 rows, on Balog et al.'s mixture and its public cube.

Usage::

    python -m benchmarks.bench_kd [--repeats 3] [--doc docs/reproduction.md]

* ``kd_adaptive`` at d = 5 (h = 15, h_max = 20) and ``kd_grid`` at d = 10 (w = 1/16, i.e. 16^10 = 2^40 bins, almost
  all empty and handled implicitly), n = 10^6 rows of ``balog_mixture(d, N=10**6)``, eps = 1, ``n_synthetic = 1``.
* Reported: best of ``--repeats`` wall times of ``ps.synthesize`` end to end and of the mechanism stage alone.

The MMD comparison with Balog's numbers is ``benchmarks/balog.py`` (run by ``benchmarks/reproduce.py``).
``--doc`` also writes the printed lines into that Markdown file's ``kd-timings`` section.
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from pathlib import Path

import privsyn_core as ps
from benchmarks.balog import schema
from benchmarks.docsection import update_section
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
    parser.add_argument("--doc", type=Path, help="also write the output into this Markdown file's kd-timings section")
    args = parser.parse_args()
    lines = [f"ps.synthesize, eps = 1, n_synthetic = 1, public cube [-900, 1100]^d; best of {args.repeats} wall times "
             "(2 shared cores)"]
    print(lines[0], flush=True)
    for mechanism, d, params in CASES:
        lines.append(timing(mechanism, d, params, args.repeats))
        print(lines[-1], flush=True)
    if args.doc:
        command = " ".join(["python -m benchmarks.bench_kd", *sys.argv[1:]])
        update_section("kd-timings", f"Output of `{command}`:\n\n```text\n" + "\n".join(lines) + "\n```", doc=args.doc)


if __name__ == "__main__":
    main()
