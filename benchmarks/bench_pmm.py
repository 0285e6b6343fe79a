"""PMM benchmark: wall time, mean W1 against the spec's prototype table, and the rate in n.

Usage::

    python -m benchmarks.bench_pmm [--sections endtoend timing accuracy slope] [--seeds 10] [--replace-seeds 5] \
        [--slope-seeds-8000 10]

* endtoend: CPU seconds (``time.process_time``) of ``synthesize`` from a pandas DataFrame to a DataFrame,
  PMM, 10^7 rows, d = 2, eps = 1, add/remove (paper depth from the noisy count), divided by the CPU seconds of
  ``numpy.bincount`` of precomputed ids measured in the same run (best of ``--repeats``): the PMM leaf ids at the
  run's depth (``minlength = 2^r``, the counting floor of PMM) and, as in ``bench_throughput.py``, ids of a
  1024 x 1024 grid.  Ratios within one run, because the machine is shared (target: <= 10x).

* timing: wall and CPU seconds of the ``pmm`` run function (no DataFrame encode/decode) for
  n = 10^5, 10^6, 10^7 at d = 2 and d = 5, eps = 1, add/remove, paper depth, per stage.
* accuracy: mean W1 (l-infinity, :func:`privsyn_core.metrics.w1`) over seeds of PMM on uniform data, eps = 1,
  n in {1000, 4000}, d in {1, 2, 3}, depth "paper" and "bound_opt", both neighbouring
  relations, beside the spec's prototype numbers (B.5, add/remove, 5 seeds).  W1 is exact (the closed form in
  d = 1, POT's network simplex up to ``EXACT_HARD_LIMIT`` cost entries) or, above that, the midpoint of a certified
  interval (:func:`measured_w1`): each row says which, with the largest half-width relative to the value.
* slope: least-squares slope of log mean W1 against log n, n in {500, ..., 8000},
  paper depth, add/remove (theory: -1/d for d >= 2; spec P2: [-1.1, -0.7] for d = 1).

Seed ``s`` draws both the data (uniform on [0,1]^d) and the mechanism's randomness.
"""

from __future__ import annotations

import argparse
import math
import time

import numpy as np
import pandas as pd

import privsyn_core as ps
from privsyn_core import get_mechanism
from privsyn_core.evaluation.distances import EXACT_HARD_LIMIT, W1Value, w1
from privsyn_core.mechanisms.hvz23.pmm_tree import accuracy_bound, bound_opt_depth, paper_depth

#: Spec B.5 [PROTO] mean W1 (5 seeds, add/remove, proportional, uniform sampling): (d, n) -> (paper, bound_opt).
SPEC_PROTO = {(1, 1000): (0.0117, 0.0081), (1, 4000): (0.0035, 0.0022), (2, 1000): (0.0467, 0.0262),
              (2, 4000): (0.0240, 0.0128), (3, 1000): (0.0918, 0.0621), (3, 4000): (0.0540, 0.0378)}
SLOPE_NS = (500, 1000, 2000, 4000, 8000)


def run(X: np.ndarray, epsilon: float, seed: int, depth="paper", neighbouring="add_remove"):
    return get_mechanism("pmm").run(X, epsilon, neighbouring=neighbouring, n_synthetic=None,
                                    rng=np.random.default_rng(seed), depth=depth, consistency="proportional",
                                    sample="uniform")


def cpu_best(fn, repeats: int) -> tuple[float, object]:
    """Smallest CPU time (``time.process_time``) of ``repeats`` calls of ``fn()``, and the last result."""
    best, result = math.inf, None
    for _ in range(repeats):
        start = time.process_time()
        result = fn()
        best = min(best, time.process_time() - start)
    return best, result


def endtoend(n: int, repeats: int) -> None:
    from privsyn_core.mechanisms.hvz23.pmm_tree import leaf_ids

    print(f"== synthesize(DataFrame) -> DataFrame, pmm, n = {n:.0e}, d = 2, eps = 1, add/remove, CPU seconds "
          f"(best of {repeats}) ==")
    X = np.random.default_rng(0).random((n, 2))
    frame = pd.DataFrame(X, columns=["x0", "x1"])
    schema = ps.unit_schema(2)
    seconds, result = cpu_best(lambda: ps.synthesize(frame, "pmm", 1.0, schema=schema, neighbouring="add_remove",
                                                     rng=1), repeats)
    r = result.params["depth"]
    ids = leaf_ids(X, r)
    grid = np.minimum((X * 1024).astype(np.int64), 1023) @ np.array([1024, 1])
    leaf_ref, _ = cpu_best(lambda: np.bincount(ids, minlength=2 ** r), repeats)
    grid_ref, _ = cpu_best(lambda: np.bincount(grid, minlength=1024 ** 2), repeats)
    stages = " ".join(f"{k}={v:.3f}" for k, v in result.timings.items())
    print(f"depth {r}, {len(result.data)} synthetic rows; pmm end to end {seconds:.3f} s CPU")
    print(f"bincount of the 2^{r} leaf ids: {leaf_ref:.3f} s -> ratio {seconds / leaf_ref:.1f}x")
    print(f"bincount of 1024^2 grid ids:   {grid_ref:.3f} s -> ratio {seconds / grid_ref:.1f}x")
    print(f"stages (wall s, last run): {stages}", flush=True)


def timing() -> None:
    print("== time of the pmm run function (eps = 1, add/remove, paper depth) ==")
    print("wall = elapsed seconds; cpu = this process's CPU seconds (what an idle machine's wall time would be,"
          " roughly: numpy runs these steps on one core)")
    print(f"{'d':>2} {'n':>9} {'r':>3} {'wall s':>7} {'cpu s':>6}  stages (wall s)")
    for d in (2, 5):
        for n in (10**5, 10**6, 10**7):
            X = np.random.default_rng(0).random((n, d))
            start, cpu = time.perf_counter(), time.process_time()
            out = run(X, 1.0, seed=1)
            wall, cpu = time.perf_counter() - start, time.process_time() - cpu
            stages = " ".join(f"{k}={v:.3f}" for k, v in out.timings.items())
            print(f"{d:>2} {n:>9} {out.params['depth']:>3} {wall:>7.3f} {cpu:>6.3f}  {stages}", flush=True)
            del X, out


def measured_w1(X: np.ndarray, Y: np.ndarray) -> W1Value:
    """Exact W1 (network simplex) while its cost matrix is allowed (``EXACT_HARD_LIMIT`` entries), else the
    certified interval."""
    if len(X) * len(Y) <= EXACT_HARD_LIMIT:
        return w1(X, Y, metric="chebyshev", method="exact")
    return w1(X, Y, metric="chebyshev", method="certified")


class W1Cache:
    """Mean W1 over seeds (exact, or a certified interval's midpoint), computed once per (d, n, depth, relation,
    seed)."""

    def __init__(self) -> None:
        self.values: dict[tuple, W1Value] = {}

    def get(self, d: int, n: int, depth: str, neighbouring: str, seed: int) -> W1Value:
        key = (d, n, depth, neighbouring, seed)
        if key not in self.values:
            X = np.random.default_rng(seed).random((n, d))
            out = run(X, 1.0, seed, depth, neighbouring)
            self.values[key] = measured_w1(X, out.unit)
        return self.values[key]

    def mean(self, d: int, n: int, depth: str, neighbouring: str, seeds: int) -> tuple[float, float, str]:
        """Mean, sd over seeds, and how the values were computed: ``exact``, or the methods and the largest error
        bound relative to its value (``certified <= x%``)."""
        values = [self.get(d, n, depth, neighbouring, s) for s in range(seeds)]
        relative = max(v.error_bound / float(v) for v in values)
        methods = "+".join(sorted({v.method.split("_")[0] for v in values}))
        how = "exact" if relative == 0 else f"{methods} <= {100 * relative:.1f}%"
        return float(np.mean(values)), float(np.std(values, ddof=1)), how


def accuracy(cache: W1Cache, seeds: int, replace_seeds: int) -> None:
    print(f"\n== mean W1 (l-infinity: exact, or the midpoint of a certified interval), uniform data, eps = 1, "
          f"{seeds} seeds (replace: {replace_seeds}): mean (sd) and how ==")
    print(f"{'d':>2} {'n':>5} {'relation':>10} | {'r_paper':>7} {'paper W1':>16} {'W1 is':>13} {'spec':>6} "
          f"{'bound':>6} | {'r*':>3} {'bound_opt W1':>16} {'W1 is':>13} {'spec':>6} {'bound':>6}")
    for neighbouring in ("add_remove", "replace"):
        for d in (1, 2, 3):
            for n in (1000, 4000):
                start = time.perf_counter()
                cells = []
                for k, depth in enumerate(("paper", "bound_opt")):
                    r = paper_depth(n, 1.0, d) if depth == "paper" else bound_opt_depth(n, 1.0, d, neighbouring)
                    mean, sd, how = cache.mean(d, n, depth, neighbouring, seeds if neighbouring == "add_remove"
                                               else replace_seeds)
                    spec = f"{SPEC_PROTO[(d, n)][k]:.4f}" if neighbouring == "add_remove" else "-"
                    bound = accuracy_bound(n, 1.0, d, r, neighbouring)
                    cells.append(f"{r:>{7 if k == 0 else 3}} {mean:>9.4f} ({sd:.4f}) {how:>13} {spec:>6} "
                                 f"{bound:>6.3f}")
                print(f"{d:>2} {n:>5} {neighbouring:>10} | {cells[0]} | {cells[1]}"
                      f"   [{time.perf_counter() - start:.0f} s]", flush=True)


def slope(cache: W1Cache, seeds: int, seeds_8000: int) -> None:
    print(f"\n== rate in n: paper depth, add/remove, eps = 1; {seeds} seeds ({seeds_8000} at n = 8000) ==")
    for d in (1, 2, 3):
        cells = [cache.mean(d, n, "paper", "add_remove", seeds_8000 if n == 8000 else seeds) for n in SLOPE_NS]
        fit = np.polyfit(np.log(SLOPE_NS), np.log([mean for mean, _, _ in cells]), 1)[0]
        theory = "-1/d = %.3f" % (-1 / d) if d > 1 else "spec P2 range [-1.1, -0.7]"
        listing = ", ".join(f"{n}: {mean:.4f} ({how})" for n, (mean, _, how) in zip(SLOPE_NS, cells, strict=True))
        print(f"d={d}: slope {fit:+.3f} (theory {theory}); mean W1 {listing}", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sections", nargs="+", default=["endtoend", "timing", "accuracy", "slope"],
                        choices=["endtoend", "timing", "accuracy", "slope"])
    parser.add_argument("--n", type=int, default=10**7, help="rows of the endtoend section")
    parser.add_argument("--repeats", type=int, default=3, help="repeats of the endtoend section (best CPU time)")
    parser.add_argument("--seeds", type=int, default=10)
    parser.add_argument("--replace-seeds", type=int, default=5, help="seeds for the replace-one rows")
    parser.add_argument("--slope-seeds-8000", type=int, default=10,
                        help="seeds at n = 8000 (an exact 8000 x 8000 W1 can take a minute on a busy machine)")
    args = parser.parse_args()
    cache = W1Cache()
    if "endtoend" in args.sections:
        endtoend(args.n, args.repeats)
    if "timing" in args.sections:
        timing()
    if "accuracy" in args.sections:
        accuracy(cache, args.seeds, args.replace_seeds)
    if "slope" in args.sections:
        slope(cache, args.seeds, args.slope_seeds_8000)


if __name__ == "__main__":
    main()
