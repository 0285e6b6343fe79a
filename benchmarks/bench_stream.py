"""Online PMM (``privsyn_core.stream``) against what users would otherwise do, step by step.

Usage::

    python -m benchmarks.bench_stream [--sections accuracy cost] [--records 1152] [--seeds 3] [--steps 12 48]

* accuracy: a stream of ``T`` steps (``T`` in ``--steps``) of ``records / T`` records each, d in {1, 2, 3},
  data ``uniform`` and ``two_blobs`` (:mod:`privsyn_core.data.datasets`), epsilon 1 for everything released:

  - **stream**: online PMM, depth for the public plans ``horizon_n = records`` and ``horizon_steps = T`` (PMM's depth
    at the counters' noise, ``online_pmm.horizon_depth``), one release per step;
  - **naive**: offline PMM re-run on the cumulative table at every step with epsilon split evenly over the
    horizon ``T`` (``split_epsilon``: the ``T`` shares sum to 1 exactly), add/remove, paper depth for the public
    planned size at that step;
  - **once**: offline PMM on the whole table at the end with epsilon 1 (one release only: the reference).

  W1 (l-infinity, :func:`privsyn_core.evaluation.distances.w1`, exact) between the cumulative real table and each
  step's synthetic rows, at every step, mean and a t-interval (95%) over ``--seeds`` seeds.  The table prints
  steps 1, T/4, T/2, T and the fitted exponent ``b`` of ``W1 ~ t^b`` (least squares on log mean W1 over every
  step), beside the exponent of the paper's rate shape over the same steps, evaluated at the records so far
  ``n = batch t`` (the paper's time counts records: ``log(n) n^(-1/d)``, ``log^4.5(n) / n`` for d = 1), and its
  asymptote (-1/d).
* cost: wall seconds and peak traced memory (``tracemalloc``: numpy's allocations) of one ``Stream.add`` (read
  the batch, count, counters, consistency, all synthetic rows, state written) at 10^5 and 10^6 records per batch,
  d = 2, three steps, depth for ``horizon_n = 10 x batch`` (capped at the stream's maximum depth 20).
"""

from __future__ import annotations

import argparse
import math
import tempfile
import time
import tracemalloc
from pathlib import Path

import numpy as np
import pandas as pd
from scipy import stats

import privsyn_core as ps
from privsyn_core.data.datasets import two_blobs, uniform_cube
from privsyn_core.evaluation.distances import w1
from privsyn_core.mechanisms.online.online_pmm import w1_rate
from privsyn_core.privacy.accounting import split_epsilon
from privsyn_core.stream import open_stream

DATASETS = {"uniform": uniform_cube, "two_blobs": two_blobs}
EPSILON = 1.0


def run_accuracy(records: int, steps: int, d: int, dataset: str, seed: int) -> dict[str, np.ndarray]:
    """W1 per step of the stream and the naive re-run, and of the one release at the end."""
    batch = records // steps
    data = DATASETS[dataset](batch * steps, d, rng=seed)
    schema = ps.unit_schema(d)
    shares = [e for _, e in split_epsilon(EPSILON, [(str(t), 1.0) for t in range(steps)])]
    out = {"stream": np.empty(steps), "naive": np.empty(steps)}
    with tempfile.TemporaryDirectory() as folder:
        stream = open_stream(Path(folder) / "s.json", schema, EPSILON, create=True, horizon_n=batch * steps,
                             horizon_steps=steps, rng=seed)
        for t in range(1, steps + 1):
            seen = data[:batch * t]
            release = stream.add(pd.DataFrame(data[batch * (t - 1):batch * t], columns=schema.names))
            out["stream"][t - 1] = _w1(seen, release.unit)
            naive = ps.synthesize(seen, "pmm", shares[t - 1], schema=schema, neighbouring="add_remove",
                                  public_n=batch * t, rng=seed * 1000 + t)
            out["naive"][t - 1] = _w1(seen, naive.unit_rows)
    once = ps.synthesize(data, "pmm", EPSILON, schema=schema, neighbouring="add_remove", public_n=batch * steps,
                         rng=seed * 1000)
    out["once"] = np.array([_w1(data, once.unit_rows)])
    return out


def _w1(real: np.ndarray, synthetic: np.ndarray | None) -> float:
    if synthetic is None or len(synthetic) == 0:
        return float("nan")
    return float(w1(real, synthetic, metric="chebyshev"))


def slope(t: np.ndarray, values: np.ndarray) -> float:
    ok = np.isfinite(values) & (values > 0)
    return float(np.polyfit(np.log(t[ok]), np.log(values[ok]), 1)[0])


def interval(values: np.ndarray) -> tuple[float, float]:
    """Mean and half-width of a 95% t-interval over seeds (rows)."""
    mean = np.nanmean(values, axis=0)
    k = values.shape[0]
    half = stats.t.ppf(0.975, k - 1) * np.nanstd(values, axis=0, ddof=1) / math.sqrt(k) if k > 1 else 0 * mean
    return mean, half


def accuracy_section(records: int, seeds: int, horizons: list[int]) -> None:
    print(f"\n== W1 per step (l-inf, exact), epsilon {EPSILON} for the whole stream, {records} records in all, "
          f"{seeds} seeds: mean +- 95% t-interval ==")
    print(f"{'T':>3} {'d':>2} {'data':9} {'method':7} {'t=1':>15} {'t=T/4':>15} {'t=T/2':>15} {'t=T':>15} "
          f"{'slope':>6} {'paper':>6} {'-1/d':>5}")
    for steps in horizons:
        t = np.arange(1, steps + 1)
        show = [0, steps // 4 - 1, steps // 2 - 1, steps - 1]
        for d in (1, 2, 3):
            batch = records // steps  # the paper's time counts records: its rate at n = batch * t
            paper = slope(t, np.array([w1_rate(batch * int(s), d) for s in t]))
            for dataset in DATASETS:
                start = time.perf_counter()
                runs = [run_accuracy(records, steps, d, dataset, seed) for seed in range(seeds)]
                for method in ("stream", "naive"):
                    mean, half = interval(np.array([r[method] for r in runs]))
                    cells = " ".join(f"{mean[i]:7.4f}+-{half[i]:<6.4f}" for i in show)
                    print(f"{steps:3d} {d:2d} {dataset:9} {method:7} {cells} {slope(t, mean):6.2f} {paper:6.2f} "
                          f"{-1 / d:5.2f}")
                once_mean, once_half = interval(np.array([r["once"] for r in runs]))
                print(f"{steps:3d} {d:2d} {dataset:9} {'once':7} {'':>47} {once_mean[0]:7.4f}+-{once_half[0]:<6.4f}"
                      f"  ({time.perf_counter() - start:.0f} s)")


def cost_section(batches: list[int], steps: int = 3, d: int = 2) -> None:
    print(f"\n== cost of one Stream.add (d = {d}, epsilon {EPSILON}): wall seconds, peak traced MB ==")
    print(f"{'batch':>9} {'depth':>5} {'step':>4} {'seconds':>8} {'peak MB':>8} {'rows out':>9} {'state MB':>8}")
    schema = ps.unit_schema(d)
    for batch in batches:
        with tempfile.TemporaryDirectory() as folder:
            path = Path(folder) / "s.json"
            stream = open_stream(path, schema, EPSILON, create=True, horizon_n=10 * batch)
            for step in range(1, steps + 1):
                frame = pd.DataFrame(two_blobs(batch, d, rng=step), columns=schema.names)
                tracemalloc.start()
                start = time.perf_counter()
                release = stream.add(frame)
                seconds = time.perf_counter() - start
                peak = tracemalloc.get_traced_memory()[1] / 2**20
                tracemalloc.stop()
                print(f"{batch:9d} {stream.plan.depth:5d} {step:4d} {seconds:8.2f} {peak:8.0f} "
                      f"{release.n_synthetic:9d} {path.stat().st_size / 2**20:8.1f}")
                del release


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sections", nargs="+", default=["accuracy", "cost"], choices=["accuracy", "cost"])
    parser.add_argument("--records", type=int, default=1152)
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--steps", type=int, nargs="+", default=[12, 48])
    parser.add_argument("--batches", type=int, nargs="+", default=[10**5, 10**6])
    args = parser.parse_args()
    if "accuracy" in args.sections:
        accuracy_section(args.records, args.seeds, args.steps)
    if "cost" in args.sections:
        cost_section(args.batches)


if __name__ == "__main__":
    main()
