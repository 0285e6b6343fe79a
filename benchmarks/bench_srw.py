"""srw / srw_tsp (seed 000): accuracy against the spec's prototype numbers and PMM, plus timings.

Protocol:

* Data: ``X ~ U[0,1]^d`` (fresh per seed), d = 1, 2, 3, eps = 1 and n = eps n in {1e3, 1e4, 1e5}; the schema is
  the public unit cube.  Seeds 0..9 (``--seeds`` to change).
* srw (d = 1) / srw_tsp (d >= 2, snake path, l_inf): defaults (paper scale b = 2L+1, spec-11 resolution, rows at
  the cell centres, paper rounding, m = n rows).  "tight" is the same with ``scale="tight"``.  PMM: its defaults
  (``ps.synthesize(X, "pmm", eps)``, rows uniform in the leaves), when registered.
* W1 is exact in the l_inf metric (``privsyn_core.metrics.w1``) between the data and the n synthetic rows, except
  where the supports are too large for a dense transport problem (d >= 2 and n >= 1e4): there BOTH sides are
  snapped to the centres of a common evaluation grid of ``G^d <= 4096`` cells and the exact W1 of those weighted
  atoms is reported.  ``|reported - exact| <= sx + sy``, the mean distances the points of each side move when
  snapped (a coupling); that uncertainty is printed in brackets.  For srw at n = 1e4 the exact W1 between X and
  srw's weighted atoms (the measure before rounding to rows) is printed beside it as a check.
* Prototype numbers: spec ``random-walk-tsp.md`` Sect. 13.2 (R1, R3, R5; W1 of the projected measure, 20-50 runs).
* Timing: ``ps.synthesize`` wall time at n = 1e5, d = 2 (median of 3), snake and MST paths.

Run: ``python benchmarks/bench_srw.py`` (about 15 minutes on 2 shared cores).

Last run (2026-11-21, 10 seeds, mean +- sd; [+-u] = grid evaluation uncertainty):

| d | eps n | srw (paper b) | srw (tight b) | prototype | PMM | srw exact (atoms) | eval | K |
|---|---|---|---|---|---|---|---|---|
| 1 | 1e3 | 0.04794 +- 0.011 | 0.01673 +- 0.0029 | 0.0604 | 0.01739 +- 0.002 | - | exact | 1000 |
| 1 | 1e4 | 0.00915 +- 0.0014 | 0.002869 +- 0.00037 | 0.0106 | 0.003137 +- 0.00035 | - | exact | 10000 |
| 1 | 1e5 | 0.001328 +- 0.00012 | 0.0003971 +- 3.2e-05 | 0.00148 | 0.000465 +- 4.3e-05 | - | exact | 100000 |
| 2 | 1e3 | 0.1023 +- 0.016 | 0.06374 +- 0.0057 | 0.108 | 0.07115 +- 0.0047 | - | exact | 49 |
| 2 | 1e4 | 0.03953 +- 0.0041 [+-0.01] | 0.02297 +- 0.00086 [+-0.01] | 0.042 | 0.02792 +- 0.00059 [+-0.01] | 0.03953 +- 0.0041 | grid 64^2 | 361 |
| 2 | 1e5 | 0.01405 +- 0.0003 [+-0.01] | 0.008074 +- 8.9e-05 [+-0.01] | - | 0.008426 +- 0.00015 [+-0.01] | - | grid 64^2 | 2601 |
| 3 | 1e3 | 0.1706 +- 0.018 | 0.1189 +- 0.007 | 0.173 | 0.1188 +- 0.012 | - | exact | 64 |
| 3 | 1e4 | 0.08428 +- 0.0023 [+-0.047] | 0.06292 +- 0.00093 [+-0.047] | 0.086 | 0.06518 +- 0.0024 [+-0.047] | 0.0865 +- 0.0017 | grid 16^3 | 343 |
| 3 | 1e5 | 0.04231 +- 0.00076 [+-0.047] | 0.03067 +- 0.00028 [+-0.047] | - | 0.02759 +- 0.00023 [+-0.047] | - | grid 16^3 | 2744 |

Timing, n = 1e5, d = 2: 0.08 s (snake and MST paths, K = 2601); d = 1 with K = 1e5 cells: 0.53 s.
PMM beats srw with the paper's constant b = 2L+1 at every setting; srw with the tight scale matches or
beats PMM except at d = 3, n = 1e5.
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from a checkout without installing
import privsyn_core as ps  # noqa: E402
from privsyn_core.metrics import w1  # noqa: E402

SIZES = (1_000, 10_000, 100_000)
PROTOTYPE = {1: {1_000: 0.0604, 10_000: 0.0106, 100_000: 0.00148},
             2: {1_000: 0.108, 10_000: 0.0420},
             3: {1_000: 0.173, 10_000: 0.086}}
MAX_EXACT_PAIRS = 2.5e7
EVAL_CELLS = 4096


def mechanism_name(d: int) -> str:
    return "srw" if d == 1 else "srw_tsp"


def eval_bins(d: int) -> int:
    return int(math.floor(EVAL_CELLS ** (1 / d) + 1e-9))


def snap(points: np.ndarray, weights: np.ndarray | None, bins: int) -> tuple[np.ndarray, np.ndarray, float]:
    """Weighted atoms at the centres of the evaluation grid, and the mean l_inf snapping distance."""
    cells = np.minimum(np.floor(points * bins), bins - 1)
    centres = (cells + 0.5) / bins
    w = np.ones(len(points)) if weights is None else np.asarray(weights, dtype=float)
    moved = float(np.average(np.abs(points - centres).max(axis=1), weights=w))
    atoms, inverse = np.unique(cells, axis=0, return_inverse=True)
    return (atoms + 0.5) / bins, np.bincount(inverse.ravel(), weights=w, minlength=len(atoms)), moved


def distance(X: np.ndarray, Y: np.ndarray, d: int, n: int, weights_y: np.ndarray | None = None) -> tuple[float, float]:
    """W1 (l_inf) and its uncertainty: exact (0) when small enough, else on the common evaluation grid.

    On the grid, ``|W1(X, Y) - W1(qX, qY)| <= W1(X, qX) + W1(Y, qY) <= sx + sy`` with ``sx`` the mean distance
    a point moves when snapped (a coupling), which is returned as the uncertainty.
    """
    if d == 1 or n < 10_000:
        return w1(X, Y, weights_y=weights_y), 0.0
    g = eval_bins(d)
    ax, wx, sx = snap(X, None, g)
    ay, wy, sy = snap(Y, weights_y, g)
    return w1(ax, ay, weights_x=wx, weights_y=wy), sx + sy


def run(mechanism: str, X: np.ndarray, seed: int, **params) -> ps.SynthResult:
    return ps.synthesize(X, mechanism, 1.0, schema=ps.unit_schema(X.shape[1]), rng=seed, **params)


def accuracy_table(seeds: range) -> None:
    has_pmm = "pmm" in [s.name for s in ps.list_mechanisms()]
    print("\n| d | eps n | srw W1 (paper b) | srw W1 (tight b) | prototype (spec 13.2) | PMM W1 | "
          "srw exact (atoms) | eval | cells K |")
    print("|---|---|---|---|---|---|---|---|---|")
    for d in (1, 2, 3):
        for n in SIZES:
            rows: dict[str, list[tuple[float, float]]] = {"paper": [], "tight": [], "pmm": []}
            exact = []
            cells = None
            for seed in seeds:
                X = np.random.default_rng(1000 + seed).random((n, d))
                for mode in ("paper", "tight"):
                    res = run(mechanism_name(d), X, seed, scale=mode)
                    rows[mode].append(distance(X, res.unit_rows, d, n))
                    cells = res.params["cells"]
                    if mode == "paper" and d >= 2 and n == 10_000:
                        exact.append(w1(X, res.unit, weights_y=res.weights))
                if has_pmm:
                    rows["pmm"].append(distance(X, run("pmm", X, seed).unit_rows, d, n))
            method = "exact" if d == 1 or n < 10_000 else f"grid {eval_bins(d)}^{d}"
            print(f"| {d} | {n:.0e} | {fmt(rows['paper'])} | {fmt(rows['tight'])} | "
                  f"{PROTOTYPE[d].get(n, '-')} | {fmt(rows['pmm']) if has_pmm else 'not registered'} | "
                  f"{fmt([(e, 0.0) for e in exact]) if exact else '-'} | {method} | {cells} |", flush=True)


def fmt(values: list[tuple[float, float]]) -> str:
    """mean +- sd over seeds, and the mean evaluation uncertainty (grid) in brackets."""
    w = np.array([v for v, _ in values])
    slack = np.mean([s for _, s in values])
    text = f"{w.mean():.4g} +- {w.std(ddof=1):.2g}" if len(w) > 1 else f"{w[0]:.4g}"
    return text + (f" [+-{slack:.2g}]" if slack > 0 else "")


def timing() -> None:
    X = np.random.default_rng(7).random((100_000, 2))
    for path in ("snake", "mst"):
        times = []
        for seed in range(3):
            start = time.perf_counter()
            res = run("srw_tsp", X, seed, path=path)
            times.append(time.perf_counter() - start)
        stages = {k: round(v, 3) for k, v in res.timings.items()}
        print(f"n = 1e5, d = 2, path = {path}: median {np.median(times):.3f} s over 3 runs "
              f"(K = {res.params['cells']}); stages of the last run: {stages}", flush=True)
    X1 = np.random.default_rng(7).random((100_000, 1))
    start = time.perf_counter()
    res = run("srw", X1, 0)
    print(f"n = 1e5, d = 1 (srw, K = {res.params['cells']}): {time.perf_counter() - start:.3f} s", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=10)
    args = parser.parse_args()
    timing()
    accuracy_table(range(args.seeds))


if __name__ == "__main__":
    main()
