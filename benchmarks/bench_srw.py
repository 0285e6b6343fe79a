"""srw / srw_tsp (seed 000): accuracy against the spec's prototype numbers and PMM, plus timings.

Protocol:

* Data: ``X ~ U[0,1]^d`` (fresh per seed), d = 1, 2, 3, eps = 1 and n = eps n in {1e3, 1e4, 1e5}; the schema is
  the public unit cube.  Seeds 0..9 (``--seeds`` to change).
* srw (d = 1) / srw_tsp (d >= 2, snake path, l_inf): spec-11 resolution, rows at the cell centres, m = n rows,
  replace-one; "paper b" is ``scale="paper"`` (b = 2L+1), "tight b" the default ``scale="tight"`` (b = L/2 under
  replace since the scale change of docs/srw_privacy.md; the table below is from before it, when "tight" was
  b = 1 + L/2 under both relations).  PMM: its defaults (``ps.synthesize(X, "pmm", eps)``, rows
  uniform in the leaves), when registered.
* W1 is exact in the l_inf metric (``privsyn_core.evaluation.distances.w1``) between the data and the n synthetic rows,
  except where the supports are too large for a dense transport problem (d >= 2 and n >= 1e4): there BOTH sides are
  snapped to the centres of a common evaluation grid of ``G^d <= 4096`` cells and the exact W1 of those weighted
  atoms is reported.  ``|reported - exact| <= sx + sy``, the mean distances the points of each side move when
  snapped (a coupling); that uncertainty is printed in brackets.  For srw at n = 1e4 the exact W1 between X and
  srw's weighted atoms (the measure before rounding to rows) is printed beside it as a check.
* Prototype numbers: spec ``random-walk-tsp.md`` Sect. 13.2 (R1, R3, R5; W1 of the projected measure, 20-50 runs).
* Timing: ``ps.synthesize`` wall time at n = 1e5, d = 2 (median of 3), snake and MST paths.

Run: ``python benchmarks/bench_srw.py`` (about 15 minutes on 2 shared cores).  ``--gain`` prints only the two
tables of the scale change (``exact_table``, ``gain_table``; about 2 minutes):

* the exact privacy loss of the walk per depth L (max over every single-record change of the l1 norm of the
  Haar coefficient change, divided by Delta b), as a fraction of the walk's budget, for both scales and relations;
* W1 before (``scale="paper"``, b = 2L+1, the default until the change) and after (the tight default) for srw
  (d = 1) and srw_tsp (d = 2) at eps = 1, n in {1e3, 1e4, 1e5}, both relations, uniform and two-blob data, 5 seeds
  (same data and mechanism seed for both scales), W1 measured as in the protocol above.

Last run (2026-11-21, 10 seeds, mean +- sd; "grid G^d +-u": grid evaluation uncertainty u of the row's W1):

| d | eps n | srw (paper b) | srw (tight b) | prototype | PMM | eval | K |
|---|---|---|---|---|---|---|---|
| 1 | 1e3 | 0.04794 +- 0.011 | 0.01673 +- 0.0029 | 0.0604 | 0.01739 +- 0.002 | exact | 1000 |
| 1 | 1e4 | 0.00915 +- 0.0014 | 0.002869 +- 0.00037 | 0.0106 | 0.003137 +- 0.00035 | exact | 10000 |
| 1 | 1e5 | 0.001328 +- 0.00012 | 0.0003971 +- 3.2e-05 | 0.00148 | 0.000465 +- 4.3e-05 | exact | 100000 |
| 2 | 1e3 | 0.1023 +- 0.016 | 0.06374 +- 0.0057 | 0.108 | 0.07115 +- 0.0047 | exact | 49 |
| 2 | 1e4 | 0.03953 +- 0.0041 | 0.02297 +- 0.00086 | 0.042 | 0.02792 +- 0.00059 | grid 64^2 +-0.01 | 361 |
| 2 | 1e5 | 0.01405 +- 0.0003 | 0.008074 +- 8.9e-05 | - | 0.008426 +- 0.00015 | grid 64^2 +-0.01 | 2601 |
| 3 | 1e3 | 0.1706 +- 0.018 | 0.1189 +- 0.007 | 0.173 | 0.1188 +- 0.012 | exact | 64 |
| 3 | 1e4 | 0.08428 +- 0.0023 | 0.06292 +- 0.00093 | 0.086 | 0.06518 +- 0.0024 | grid 16^3 +-0.047 | 343 |
| 3 | 1e5 | 0.04231 +- 0.00076 | 0.03067 +- 0.00028 | - | 0.02759 +- 0.00023 | grid 16^3 +-0.047 | 2744 |

srw exact (atoms), the exact W1 between X and srw's weighted atoms (a check of the grid evaluation):
d = 2, eps n = 1e4: 0.03953 +- 0.0041; d = 3, eps n = 1e4: 0.0865 +- 0.0017.

``--gain`` (2026-11-22, 5 seeds; "before" = ``scale="paper"``, "after" = the tight default; docs/srw_privacy.md):

| d | n | relation | data | W1 paper b = 2L+1 (before) | W1 tight (after) | after / before | b before, after |
|---|---|---|---|---|---|---|---|
| 1 | 1e+03 | replace | uniform | 0.04405 +- 0.0056 | 0.01358 +- 0.0015 | 0.31 | 21, 5 |
| 1 | 1e+03 | replace | two_blobs | 0.03623 +- 0.0096 | 0.01036 +- 0.0022 | 0.29 | 21, 5 |
| 1 | 1e+03 | add_remove | uniform | 0.02767 +- 0.0031 | 0.01377 +- 0.0044 | 0.50 | 21, 6 |
| 1 | 1e+03 | add_remove | two_blobs | 0.02454 +- 0.0069 | 0.01252 +- 0.005 | 0.51 | 21, 6 |
| 1 | 1e+04 | replace | uniform | 0.008171 +- 0.00067 | 0.002317 +- 0.00016 | 0.28 | 29, 7 |
| 1 | 1e+04 | replace | two_blobs | 0.006631 +- 0.00097 | 0.001866 +- 0.0002 | 0.28 | 29, 7 |
| 1 | 1e+04 | add_remove | uniform | 0.004919 +- 0.00053 | 0.001815 +- 0.00038 | 0.37 | 29, 8 |
| 1 | 1e+04 | add_remove | two_blobs | 0.004109 +- 0.00094 | 0.001648 +- 0.0005 | 0.40 | 29, 8 |
| 1 | 1e+05 | replace | uniform | 0.001242 +- 7.2e-05 | 0.0003385 +- 1.7e-05 | 0.27 | 35, 8.5 |
| 1 | 1e+05 | replace | two_blobs | 0.001054 +- 0.00011 | 0.0002878 +- 2.8e-05 | 0.27 | 35, 8.5 |
| 1 | 1e+05 | add_remove | uniform | 0.0007174 +- 4.5e-05 | 0.0002378 +- 3.3e-05 | 0.33 | 35, 9.5 |
| 1 | 1e+05 | add_remove | two_blobs | 0.0006252 +- 5.9e-05 | 0.000219 +- 4.2e-05 | 0.35 | 35, 9.5 |
| 2 | 1e+03 | replace | uniform | 0.09689 +- 0.0093 | 0.05679 +- 0.0027 | 0.59 | 13, 3 |
| 2 | 1e+03 | replace | two_blobs | 0.07255 +- 0.006 | 0.05274 +- 0.00087 | 0.73 | 13, 3 |
| 2 | 1e+03 | add_remove | uniform | 0.07472 +- 0.0064 | 0.05499 +- 0.0023 | 0.74 | 13, 4 |
| 2 | 1e+03 | add_remove | two_blobs | 0.06294 +- 0.0034 | 0.05481 +- 0.0024 | 0.87 | 13, 4 |
| 2 | 1e+04 | replace | uniform | 0.03928 +- 0.0053 [+-0.01] | 0.02168 +- 0.00089 [+-0.01] | 0.55 | 19, 4.5 |
| 2 | 1e+04 | replace | two_blobs | 0.03061 +- 0.0042 [+-0.01] | 0.02046 +- 0.0012 [+-0.01] | 0.67 | 19, 4.5 |
| 2 | 1e+04 | add_remove | uniform | 0.03025 +- 0.0017 [+-0.01] | 0.02064 +- 0.00028 [+-0.01] | 0.68 | 19, 5.5 |
| 2 | 1e+04 | add_remove | two_blobs | 0.02647 +- 0.0028 [+-0.011] | 0.02181 +- 0.00067 [+-0.011] | 0.82 | 19, 5.5 |
| 2 | 1e+05 | replace | uniform | 0.01413 +- 0.00031 [+-0.01] | 0.007803 +- 7.7e-05 [+-0.01] | 0.55 | 25, 6 |
| 2 | 1e+05 | replace | two_blobs | 0.01164 +- 0.00072 [+-0.01] | 0.008177 +- 0.00016 [+-0.01] | 0.70 | 25, 6 |

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
import privsyn_core as ps
from privsyn_core.data import datasets
from privsyn_core.evaluation.distances import w1
from privsyn_core.mechanisms.random_walks import walks

SIZES = (1_000, 10_000, 100_000)
PROTOTYPE = {1: {1_000: 0.0604, 10_000: 0.0106, 100_000: 0.00148},
             2: {1_000: 0.108, 10_000: 0.0420},
             3: {1_000: 0.173, 10_000: 0.086}}
MAX_EXACT_PAIRS = 2.5e7
EVAL_CELLS = 4096


def mechanism_name(d: int) -> str:
    return "srw" if d == 1 else "srw_tsp"


def eval_bins(d: int) -> int:
    return math.floor(EVAL_CELLS ** (1 / d) + 1e-9)


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


def exact_table(max_depth: int = 7) -> None:
    """Exact privacy loss of the walk / its budget, from the Haar coefficients of every single-record change."""
    print("\n| L | relation | S = max l1 change of lambda | b tight | loss tight / eps_walk | b paper | "
          "loss paper / eps_walk |")
    print("|---|---|---|---|---|---|---|")
    for depth in range(max_depth + 1):
        cells = 2 ** depth
        eye = np.eye(cells)
        for relation, delta, changes in (("replace", 2.0, (eye[:, None, :] - eye[None, :, :]).reshape(-1, cells)),
                                         ("add_remove", 1.0, eye)):
            worst = float(np.abs(walks.haar_coefficients(changes)).sum(axis=1).max())
            tight, paper = (walks.laplace_scale(depth, mode, relation) for mode in ("tight", "paper"))
            loss_tight, loss_paper = (worst / (delta * b) if worst > 0 else 0.0 for b in (tight, paper))
            print(f"| {depth} | {relation} | {worst:g} | {tight:g} | {loss_tight:.4f} | {paper:g} | "
                  f"{loss_paper:.4f} |", flush=True)


GAIN_SIZES = {1: (1_000, 10_000, 100_000), 2: (1_000, 10_000, 100_000)}
GAIN_DATA = {"uniform": datasets.uniform_cube, "two_blobs": datasets.two_blobs}


def gain_table(seeds: range) -> None:
    """W1 of srw (d = 1) and srw_tsp (d = 2) with the paper's scale (before) and the tight default (after)."""
    print("\n| d | n | relation | data | W1 paper b = 2L+1 (before) | W1 tight (after) | after / before | "
          "b before, after |")
    print("|---|---|---|---|---|---|---|---|")
    for d, sizes in GAIN_SIZES.items():
        for n in sizes:
            for relation in ("replace", "add_remove"):
                for name, make in GAIN_DATA.items():
                    rows: dict[str, list[tuple[float, float]]] = {"paper": [], "tight": []}
                    scales: dict[str, float] = {}
                    for seed in seeds:
                        X = make(n, d, rng=2000 + seed)
                        for mode in rows:
                            res = ps.synthesize(X, mechanism_name(d), 1.0, schema=ps.unit_schema(d), rng=seed,
                                                neighbouring=relation, scale=mode)
                            rows[mode].append(distance(X, res.unit_rows, d, n))
                            scales[mode] = res.params["laplace_scale"]
                    ratio = np.mean([v for v, _ in rows["tight"]]) / np.mean([v for v, _ in rows["paper"]])
                    print(f"| {d} | {n:.0e} | {relation} | {name} | {fmt(rows['paper'])} | {fmt(rows['tight'])} | "
                          f"{ratio:.2f} | {scales['paper']:g}, {scales['tight']:g} |", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=10)
    parser.add_argument("--gain", action="store_true",
                        help="only the exact-loss and W1-gain tables of the scale change")
    args = parser.parse_args()
    if args.gain:
        exact_table()
        gain_table(range(min(args.seeds, 5)))
        return
    timing()
    accuracy_table(range(args.seeds))
    exact_table()
    gain_table(range(min(args.seeds, 5)))


if __name__ == "__main__":
    main()
