"""Throughput of the count-based mechanisms against a plain ``numpy.bincount`` over the same rows.

Usage::

    python -m benchmarks.bench_throughput [--sizes 1000000 10000000] [--d 2] [--repeats 3] [--no-endtoend]

For every count-based mechanism (``pmm``, ``dp_histogram``, ``kd_grid``, ``kd_adaptive``, ``psmm``, ``srw_tsp``,
``srw``) and n in ``--sizes``: the CPU time (``time.process_time``, user + system seconds of this process, so other jobs
on a shared machine count less than in wall time) of the registered run function on ``n`` uniform rows in
``[0,1]^d`` (default parameters, epsilon = 1, replace-one, ``n`` synthetic rows; no DataFrame encode/decode),
best of ``--repeats``,
its throughput in rows per second, and its time divided by the physical reference.  The repeats are
interleaved (every size once, then again), so a change in the machine's load hits all sizes alike.

The reference is what any counting mechanism must at least do: ``numpy.bincount`` of the rows' cell ids on a
``2^10``-per-axis grid (``floor(x * 1024)`` per axis, raveled), timed from the float rows (``ids+bincount``) and
from precomputed ids (``bincount``).  The exponent is the least-squares slope of log time against log n: 1.0 is
linear.  PSMM runs with a fixed 64 x 64 grid (its automatic grid grows with ``epsilon n`` until the LP guard
refuses), so its cost is counting plus a constant LP; ``srw_tsp``'s automatic grid grows with n.  ``srw`` works on
one column: it runs on the rows' first coordinate (its ratios are still to the ``d``-column reference), with
``floor(epsilon n)`` cells capped at ``2^18``.

PMM's work on its tree (noise on ``2^(r+1)`` counts, consistency, the leaf plan) is proportional to ``2^r``, and the
paper's depth ``r = floor(log2(epsilon n))`` makes ``2^r / n`` jump between 1/2 and 1: 0.52 at n = 10^6 but 0.84
at 10^7 (16 times the leaves for 10 times the rows), which alone adds up to ``log10(1.6) = 0.2`` to an exponent
between those two sizes.  The script prints ``2^r / n`` per size; sizes a power of 2 apart have the same ratio
(``--sizes 1250000 10000000``: 0.84 at both), so their exponent measures the scaling itself.

Last, the PMM end-to-end ratio (as ``bench_pmm.py --sections endtoend``): CPU seconds of
``privsyn_core.synthesize`` from a pandas DataFrame to a DataFrame, PMM, ``max(--sizes)`` rows, eps = 1,
add/remove (paper depth from the noisy count), divided by ``numpy.bincount`` of the precomputed depth-``r``
leaf ids (``minlength = 2^r``), both best of ``--repeats`` in this run (target: at most 10x).

Times are CPU seconds on the machine at hand (numpy counts on one core); read the ratios within one run.
Peak memory per run: ``bench_memory.py``.
"""

from __future__ import annotations

import argparse
import time

import numpy as np
import pandas as pd

import privsyn_core as ps
from privsyn_core.mechanisms.hvz23.pmm import resolve_depth
from privsyn_core.mechanisms.hvz23.pmm_tree import leaf_ids

MECHANISMS = {"pmm": {}, "dp_histogram": {}, "kd_grid": {}, "kd_adaptive": {}, "psmm": {"cells_per_axis": 64},
              "srw_tsp": {}, "srw": {}}
#: Mechanisms of one column: they run on the first coordinate of the rows.
ONE_COLUMN = {"srw"}
REFERENCE_BINS = 1024


def best_time(fn, repeats: int) -> float:
    """Smallest CPU time (``time.process_time``) of ``repeats`` calls of ``fn()``."""
    times = []
    for _ in range(repeats):
        start = time.process_time()
        fn()
        times.append(time.process_time() - start)
    return min(times)


def interleaved_best(fns: dict[int, object], repeats: int) -> dict[int, float]:
    """Smallest CPU time of every ``fns[n]()`` over ``repeats`` rounds, each round calling every one once."""
    best = dict.fromkeys(fns, float("inf"))
    for _ in range(repeats):
        for n, fn in fns.items():
            best[n] = min(best[n], best_time(fn, 1))
    return best


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


def mechanism_call(name: str, X: np.ndarray):
    """A call of the registered run function on ``X`` (epsilon 1, replace-one, ``len(X)`` synthetic rows)."""
    spec = ps.get_mechanism(name)
    params = spec.resolve_params(MECHANISMS[name])
    return lambda: spec.run(X, 1.0, neighbouring="replace", n_synthetic=len(X), rng=np.random.default_rng(0),
                            **params)


def pmm_endtoend(n: int, d: int, repeats: int) -> tuple[float, float, int]:
    """CPU seconds of ``synthesize`` DataFrame -> DataFrame (pmm, add/remove), of the leaf-id bincount, depth."""
    X = np.random.default_rng(0).random((n, d))
    frame = pd.DataFrame(X, columns=[f"x{j}" for j in range(d)])
    schema = ps.unit_schema(d)
    result = ps.synthesize(frame, "pmm", 1.0, schema=schema, neighbouring="add_remove", rng=1)
    r = result.params["depth"]
    ids = leaf_ids(X, r)
    times = interleaved_best({0: lambda: ps.synthesize(frame, "pmm", 1.0, schema=schema, neighbouring="add_remove",
                                                       rng=1),
                              1: lambda: np.bincount(ids, minlength=2 ** r)}, repeats)
    return times[0], times[1], r


def exponent(sizes: list[int], seconds: list[float]) -> float:
    """Least-squares slope of log seconds against log n."""
    return float(np.polyfit(np.log(sizes), np.log(seconds), 1)[0])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[10**6, 10**7])
    parser.add_argument("--d", type=int, default=2)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--mechanisms", nargs="+", default=list(MECHANISMS), choices=list(MECHANISMS))
    parser.add_argument("--no-endtoend", action="store_true", help="skip the PMM end-to-end ratio")
    args = parser.parse_args()
    data = {n: np.random.default_rng(n).random((n, args.d)) for n in args.sizes}
    reference = {n: reference_times(X, args.repeats) for n, X in data.items()}
    print(f"d = {args.d}, epsilon = 1, replace-one, n synthetic rows = n; CPU seconds, best of {args.repeats} "
          "(interleaved)")
    print(f"{'system':<14}{'n':>10}{'seconds':>9}{'rows/s':>11}{'/ ids+bincount':>16}{'/ bincount':>12}")
    for n in args.sizes:
        full, alone = reference[n]
        print(f"{'ids+bincount':<14}{n:>10}{full:>9.3f}{n / full:>11.3g}{1:>16.2f}{full / alone:>12.2f}")
    print(f"ids+bincount exponent in n: {exponent(args.sizes, [reference[n][0] for n in args.sizes]):.2f}")
    exponents = {}
    for name in args.mechanisms:
        rows = {n: np.ascontiguousarray(X[:, :1]) if name in ONE_COLUMN else X for n, X in data.items()}
        best = interleaved_best({n: mechanism_call(name, rows[n]) for n in args.sizes}, args.repeats)
        del rows
        seconds = [best[n] for n in args.sizes]
        for n, s in zip(args.sizes, seconds, strict=True):
            full, alone = reference[n]
            print(f"{name:<14}{n:>10}{s:>9.3f}{n / s:>11.3g}{s / full:>16.2f}{s / alone:>12.2f}", flush=True)
        exponents[name] = exponent(args.sizes, seconds)
        print(f"{name} exponent in n: {exponents[name]:.2f}", flush=True)
        if name == "pmm":  # replace-one: the paper's depth reads the public n
            ratios = ", ".join(f"{2 ** resolve_depth('paper', n, 1.0, args.d, 'replace')[0] / n:.2f} at n = {n}"
                               for n in args.sizes)
            print(f"pmm leaves per row 2^r / n: {ratios}", flush=True)
    print("exponents (target <= 1.1): " + ", ".join(f"{k} {v:.2f}" for k, v in exponents.items()))
    if not args.no_endtoend:
        n = max(args.sizes)
        end_to_end, floor, r = pmm_endtoend(n, args.d, args.repeats)
        print(f"pmm end to end (synthesize DataFrame -> DataFrame, add/remove, n = {n:.0e}, depth {r}): "
              f"{end_to_end:.3f} s CPU; bincount of the 2^{r} leaf ids {floor:.3f} s; ratio {end_to_end / floor:.1f}x "
              "(target <= 10x)", flush=True)


if __name__ == "__main__":
    main()
