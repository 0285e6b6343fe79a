"""Throughput of the count-based mechanisms against a plain ``numpy.bincount`` over the same rows.

Usage::

    python -m benchmarks.bench_throughput [--sizes 100000 1000000 10000000] [--d 2] [--repeats 3]

For every count-based mechanism (``pmm``, ``dp_histogram``, ``kd_grid``, ``kd_adaptive``, ``psmm``, ``srw_tsp``)
and n in ``--sizes``: the CPU time (``time.process_time``, user + system seconds of this process, so other jobs on
a shared machine count less than in wall time) of the registered run function on ``n`` uniform rows in ``[0,1]^d``
(default parameters, epsilon = 1, replace-one, ``n`` synthetic rows; no DataFrame encode/decode), best of ``--repeats``,
its throughput in rows per second, and its time divided by the physical reference.

The reference is what any counting mechanism must at least do: ``numpy.bincount`` of the rows' cell ids on a
``2^10``-per-axis grid (``floor(x * 1024)`` per axis, raveled), timed from the float rows (``ids+bincount``) and
from precomputed ids (``bincount``).  The exponent is the least-squares slope of log time against log n: 1.0 is
linear.  PSMM runs with a fixed 64 x 64 grid (its automatic grid grows with ``epsilon n`` until the LP guard
refuses), so its cost is counting plus a constant LP; ``srw_tsp``'s automatic grid grows with n.

Times are CPU seconds on the machine at hand (numpy counts on one core); read the ratios within one run.
Peak memory per run: ``bench_memory.py``.
"""

from __future__ import annotations

import argparse
import time

import numpy as np

import privsyn_core as ps

MECHANISMS = {"pmm": {}, "dp_histogram": {}, "kd_grid": {}, "kd_adaptive": {}, "psmm": {"cells_per_axis": 64},
              "srw_tsp": {}}
REFERENCE_BINS = 1024


def best_time(fn, repeats: int) -> float:
    """Smallest CPU time (``time.process_time``) of ``repeats`` calls of ``fn()``."""
    times = []
    for _ in range(repeats):
        start = time.process_time()
        fn()
        times.append(time.process_time() - start)
    return min(times)


def cell_ids(X: np.ndarray, bins: int) -> np.ndarray:
    """Row-major ids of the ``bins^d`` grid cells of the rows."""
    cells = np.minimum((X * bins).astype(np.int64), bins - 1)
    return np.ravel_multi_index(tuple(cells.T), (bins,) * X.shape[1])


def reference_times(X: np.ndarray, repeats: int) -> tuple[float, float]:
    """Seconds of ``ids + bincount`` from float rows, and of ``bincount`` alone on precomputed ids."""
    size = REFERENCE_BINS ** X.shape[1]
    ids = cell_ids(X, REFERENCE_BINS)
    full = best_time(lambda: np.bincount(cell_ids(X, REFERENCE_BINS), minlength=size), repeats)
    alone = best_time(lambda: np.bincount(ids, minlength=size), repeats)
    return full, alone


def mechanism_time(name: str, X: np.ndarray, repeats: int) -> float:
    spec = ps.get_mechanism(name)
    params = spec.resolve_params(MECHANISMS[name])
    return best_time(lambda: spec.run(X, 1.0, neighbouring="replace", n_synthetic=len(X),
                                      rng=np.random.default_rng(0), **params), repeats)


def exponent(sizes: list[int], seconds: list[float]) -> float:
    """Least-squares slope of log seconds against log n."""
    return float(np.polyfit(np.log(sizes), np.log(seconds), 1)[0])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[10**5, 10**6, 10**7])
    parser.add_argument("--d", type=int, default=2)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--mechanisms", nargs="+", default=list(MECHANISMS), choices=list(MECHANISMS))
    args = parser.parse_args()
    data = {n: np.random.default_rng(n).random((n, args.d)) for n in args.sizes}
    reference = {n: reference_times(X, args.repeats) for n, X in data.items()}
    print(f"d = {args.d}, epsilon = 1, replace-one, n synthetic rows = n; CPU seconds, best of {args.repeats}")
    print(f"{'system':<14}{'n':>10}{'seconds':>9}{'rows/s':>11}{'/ ids+bincount':>16}{'/ bincount':>12}")
    for n in args.sizes:
        full, alone = reference[n]
        print(f"{'ids+bincount':<14}{n:>10}{full:>9.3f}{n / full:>11.3g}{1:>16.2f}{full / alone:>12.2f}")
    print(f"ids+bincount exponent in n: {exponent(args.sizes, [reference[n][0] for n in args.sizes]):.2f}")
    for name in args.mechanisms:
        seconds = [mechanism_time(name, data[n], args.repeats) for n in args.sizes]
        for n, s in zip(args.sizes, seconds, strict=True):
            full, alone = reference[n]
            print(f"{name:<14}{n:>10}{s:>9.3f}{n / s:>11.3g}{s / full:>16.2f}{s / alone:>12.2f}", flush=True)
        print(f"{name} exponent in n: {exponent(args.sizes, seconds):.2f}", flush=True)


if __name__ == "__main__":
    main()
