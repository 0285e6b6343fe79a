"""PMM benchmark: wall time, mean W1 against the spec's prototype table, and the rate in n.

Usage::

    python -m benchmarks.bench_pmm [--sections timing accuracy slope] [--seeds 10] [--replace-seeds 5] \
        [--slope-seeds-8000 10]

* timing: wall and CPU seconds of the ``pmm`` run function (no DataFrame encode/decode) for
  n = 10^5, 10^6, 10^7 at d = 2 and d = 5, eps = 1, add/remove, paper depth, per stage.
* accuracy: mean exact W1 (l-infinity, POT) over seeds of PMM on uniform data, eps = 1,
  n in {1000, 4000}, d in {1, 2, 3}, depth "paper" and "bound_opt", both neighbouring
  relations, beside the spec's prototype numbers (B.5, add/remove, 5 seeds).
* slope: least-squares slope of log mean W1 against log n, n in {500, ..., 8000},
  paper depth, add/remove (theory: -1/d for d >= 2; spec P2: [-1.1, -0.7] for d = 1).

Seed ``s`` draws both the data (uniform on [0,1]^d) and the mechanism's randomness.
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from privsyn_core import get_mechanism
from privsyn_core.metrics import w1
from privsyn_core.pmm_tree import accuracy_bound, bound_opt_depth, paper_depth

#: Spec B.5 [PROTO] mean W1 (5 seeds, add/remove, proportional, uniform sampling): (d, n) -> (paper, bound_opt).
SPEC_PROTO = {(1, 1000): (0.0117, 0.0081), (1, 4000): (0.0035, 0.0022), (2, 1000): (0.0467, 0.0262),
              (2, 4000): (0.0240, 0.0128), (3, 1000): (0.0918, 0.0621), (3, 4000): (0.0540, 0.0378)}
SLOPE_NS = (500, 1000, 2000, 4000, 8000)


def run(X: np.ndarray, epsilon: float, seed: int, depth="paper", neighbouring="add_remove"):
    return get_mechanism("pmm").run(X, epsilon, neighbouring=neighbouring, n_synthetic=None,
                                    rng=np.random.default_rng(seed), depth=depth, consistency="proportional",
                                    sample="uniform")


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


class W1Cache:
    """Mean exact W1 over seeds, computed once per (d, n, depth, relation, seed)."""

    def __init__(self) -> None:
        self.values: dict[tuple, float] = {}

    def get(self, d: int, n: int, depth: str, neighbouring: str, seed: int) -> float:
        key = (d, n, depth, neighbouring, seed)
        if key not in self.values:
            X = np.random.default_rng(seed).random((n, d))
            out = run(X, 1.0, seed, depth, neighbouring)
            self.values[key] = w1(X, out.unit, metric="chebyshev")
        return self.values[key]

    def mean(self, d: int, n: int, depth: str, neighbouring: str, seeds: int) -> tuple[float, float]:
        values = [self.get(d, n, depth, neighbouring, s) for s in range(seeds)]
        return float(np.mean(values)), float(np.std(values, ddof=1))


def accuracy(cache: W1Cache, seeds: int, replace_seeds: int) -> None:
    print(f"\n== mean W1 (l-infinity, exact), uniform data, eps = 1, {seeds} seeds (replace: {replace_seeds}): "
          "mean (sd) ==")
    print(f"{'d':>2} {'n':>5} {'relation':>10} | {'r_paper':>7} {'paper W1':>16} {'spec':>6} {'bound':>6} |"
          f" {'r*':>3} {'bound_opt W1':>16} {'spec':>6} {'bound':>6}")
    for neighbouring in ("add_remove", "replace"):
        for d in (1, 2, 3):
            for n in (1000, 4000):
                start = time.perf_counter()
                cells = []
                for k, depth in enumerate(("paper", "bound_opt")):
                    r = paper_depth(n, 1.0, d) if depth == "paper" else bound_opt_depth(n, 1.0, d, neighbouring)
                    mean, sd = cache.mean(d, n, depth, neighbouring, seeds if neighbouring == "add_remove"
                                          else replace_seeds)
                    spec = f"{SPEC_PROTO[(d, n)][k]:.4f}" if neighbouring == "add_remove" else "-"
                    bound = accuracy_bound(n, 1.0, d, r, neighbouring)
                    cells.append(f"{r:>{7 if k == 0 else 3}} {mean:>9.4f} ({sd:.4f}) {spec:>6} {bound:>6.3f}")
                print(f"{d:>2} {n:>5} {neighbouring:>10} | {cells[0]} | {cells[1]}"
                      f"   [{time.perf_counter() - start:.0f} s]", flush=True)


def slope(cache: W1Cache, seeds: int, seeds_8000: int) -> None:
    print(f"\n== rate in n: paper depth, add/remove, eps = 1; {seeds} seeds ({seeds_8000} at n = 8000) ==")
    for d in (1, 2, 3):
        means = []
        for n in SLOPE_NS:
            means.append(cache.mean(d, n, "paper", "add_remove", seeds_8000 if n == 8000 else seeds)[0])
        fit = np.polyfit(np.log(SLOPE_NS), np.log(means), 1)[0]
        theory = "-1/d = %.3f" % (-1 / d) if d > 1 else "spec P2 range [-1.1, -0.7]"
        listing = ", ".join(f"{n}: {m:.4f}" for n, m in zip(SLOPE_NS, means, strict=True))
        print(f"d={d}: slope {fit:+.3f} (theory {theory}); mean W1 {listing}", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sections", nargs="+", default=["timing", "accuracy", "slope"],
                        choices=["timing", "accuracy", "slope"])
    parser.add_argument("--seeds", type=int, default=10)
    parser.add_argument("--replace-seeds", type=int, default=5, help="seeds for the replace-one rows")
    parser.add_argument("--slope-seeds-8000", type=int, default=10,
                        help="seeds at n = 8000 (an exact 8000 x 8000 W1 can take a minute on a busy machine)")
    args = parser.parse_args()
    cache = W1Cache()
    if "timing" in args.sections:
        timing()
    if "accuracy" in args.sections:
        accuracy(cache, args.seeds, args.replace_seeds)
    if "slope" in args.sections:
        slope(cache, args.seeds, args.slope_seeds_8000)


if __name__ == "__main__":
    main()
