"""Benchmark PSMM ([HVZ23] Alg. 1-2, corrected LP): running time, W1 accuracy and LP size limits.

Prints
1. PSMM time for 1024 and 4096 cells at d = 2 (whole mechanism and the LP alone, median of 3 runs);
2. mean W1 (l-infinity, exact: POT's network simplex, ``method="exact"``) of PSMM on uniform data, eps = 1,
   replace-one, over 10 seeds, for d in {1, 2, 3} and n in {500, 1000, 2000, 4000}, beside the spec's prototype
   numbers (pmm-psmm-kdtree.md B.3.5, n = 500 / 2000, 3 seeds), with the least-squares slope of log mean W1
   against log n (Cor. 3.7 rates: -1/2 for d = 1, about -1/2 for d = 2 up to the log,
   -1/3 for d = 3);
3. with --limits: the LP time at the sizes where psmm's guard (MAX_CELLS, MAX_KING_FLOWS,
   MAX_DENSE_CELLS) is set.

Usage: python -m benchmarks.bench_psmm [--seeds 10] [--limits]
"""

from __future__ import annotations

import argparse
import time

import numpy as np

import privsyn_core as ps
from privsyn_core.data.grid import cell_centres
from privsyn_core.evaluation.distances import w1
from privsyn_core.mechanisms.hvz23.dbl_lp import king_edges, project_dbl
from privsyn_core.privacy.noise import discrete_laplace

PROTOTYPE = {(1, 500): 0.045, (1, 2000): 0.019, (2, 500): 0.063, (2, 2000): 0.043, (3, 500): 0.110, (3, 2000): 0.062}
SIZES = (500, 1000, 2000, 4000)


def timing(repeats: int = 3) -> None:
    print(f"PSMM running time, d = 2, eps = 1, replace-one, king LP (median of {repeats} runs)")
    print(f"{'cells':>6} {'n':>6} {'flows':>7} {'total s':>8} {'LP s':>7}")
    for k in (32, 64):
        n = k * k
        X = np.random.default_rng(k).random((n, 2))
        runs = [ps.synthesize(X, "psmm", 1.0, schema=ps.unit_schema(2), rng=seed) for seed in range(repeats)]
        total = np.median([r.timings["mechanism"] for r in runs])
        lp = np.median([r.timings["mechanism.lp"] for r in runs])
        print(f"{k * k:>6} {n:>6} {runs[0].params['lp_flow_variables']:>7} {total:>8.3f} {lp:>7.3f}")


def accuracy(seeds: int) -> None:
    print(f"\nMean W1 (l-infinity, exact: network simplex) of PSMM on uniform data, eps = 1, replace-one, "
          f"{seeds} seeds")
    print(f"{'d':>2} {'n':>5} {'cells':>6} {'W1 atoms':>9} {'sd':>7} {'W1 rows':>8} {'prototype':>9} {'LP s':>6}")
    for d in (1, 2, 3):
        means = []
        for n in SIZES:
            atoms, rows, lp_time = [], [], []
            for seed in range(seeds):
                X = np.random.default_rng(1000 * d + seed).random((n, d))
                r = ps.synthesize(X, "psmm", 1.0, schema=ps.unit_schema(d), rng=seed)
                atoms.append(w1(X, r.unit, weights_y=r.weights, metric="chebyshev", method="exact"))
                rows.append(w1(X, r.unit_rows, metric="chebyshev", method="exact"))
                lp_time.append(r.timings["mechanism.lp"])
            means.append(np.mean(atoms))
            proto = PROTOTYPE.get((d, n))
            print(f"{d:>2} {n:>5} {r.params['cells']:>6} {np.mean(atoms):>9.4f} {np.std(atoms, ddof=1):>7.4f} "
                  f"{np.mean(rows):>8.4f} {'' if proto is None else f'{proto:.3f}':>9} {np.mean(lp_time):>6.2f}")
        slope = np.polyfit(np.log(SIZES), np.log(means), 1)[0]
        print(f"   d = {d}: log-log slope of mean W1 (atoms) against n = {slope:+.3f}"
              f" (Cor. 3.7: {'-0.5' if d < 3 else '-1/3'}{' up to log' if d == 2 else ''})")


def limits() -> None:
    print("\nLP time at the guard's limits (corrected LP, PSMM-like signed measure, one solve each)")
    rng = np.random.default_rng(0)
    for d, k, lp in ((1, 16_000, "king"), (2, 128, "king"), (3, 20, "king"), (4, 7, "king"), (2, 32, "dense")):
        m = k ** d
        nu = (rng.multinomial(m, np.ones(m) / m) + discrete_laplace(2.0, m, rng)) / m
        start = time.perf_counter()
        proj = project_dbl(nu, cell_centres(np.arange(m), k, d), edges=king_edges(k, d) if lp == "king" else None)
        print(f"  d={d} k={k} cells={m} lp={lp} flows={proj.n_flow}: {time.perf_counter() - start:.1f} s")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seeds", type=int, default=10)
    parser.add_argument("--limits", action="store_true", help="also time the LP at the guard's limits (minutes)")
    args = parser.parse_args()
    timing()
    accuracy(args.seeds)
    if args.limits:
        limits()


if __name__ == "__main__":
    main()
