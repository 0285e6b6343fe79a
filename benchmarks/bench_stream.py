"""Online PMM (``privsyn_core.stream``) against what users would otherwise do, step by step.

Usage::

    python -m benchmarks.bench_stream [--sections accuracy real cost] [--records 1152] [--seeds 3] [--steps 12 48]
                                      [--write]

* accuracy: a stream of ``T`` steps (``T`` in ``--steps``) of ``records / T`` records each, d in {1, 2, 3},
  data ``uniform`` and ``two_blobs`` (:mod:`privsyn_core.data.datasets`), epsilon 1 for everything released:

  - **fixed**: online PMM with a fixed depth, PMM's depth for the public plans ``horizon_n = records`` and
    ``horizon_steps = T`` (``online_pmm.horizon_depth``), one release per step;
  - **growing**: online PMM with a growing depth (``growing=True``: no plan; a level opens when the released total
    passes its threshold), one release per step;
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
* real: the same four methods on a real table with a time column, Seattle's daily weather 2012-2015 (1461 days,
  bundled in the pip package ``vega_datasets``): numeric columns temp_max, temp_min, precipitation and wind
  (d = 4) with hand-set public bounds (:data:`WEATHER_BOUNDS`), batches by month (T = 48) and by four months
  (T = 12).  The fixed stream's plan is the table's size and ``T``.
* cost: wall seconds and peak traced memory (``tracemalloc``: numpy's allocations) of one ``Stream.add`` (read
  the batch, count, counters, consistency, all synthetic rows, state written) at 10^5 and 10^6 records per batch,
  d = 2, three steps: a fixed depth for ``horizon_n = 10 x batch`` (capped at 20), and a growing depth.

``--write`` puts the tables into ``docs/tables/stream.md`` (:func:`benchmarks.docsection.write_table`).
"""

from __future__ import annotations

import argparse
import math
import sys
import tempfile
import time
import tracemalloc
import warnings
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
METHODS = ("fixed", "growing", "naive")
#: Public bounds of the weather table, set by hand from the climate of Seattle (not read off the data).
WEATHER_BOUNDS = {"temp_max": (-10.0, 40.0), "temp_min": (-15.0, 25.0), "precipitation": (0.0, 60.0),
                  "wind": (0.0, 10.0)}
LINES: list[str] = []


def say(line: str = "") -> None:
    print(line, flush=True)
    LINES.append(line)


def run_accuracy(batches: list[pd.DataFrame], schema: ps.Schema, seed: int) -> dict[str, np.ndarray]:
    """W1 per step of the two streams and the naive re-run, and of the one release at the end."""
    steps = len(batches)
    total = sum(len(b) for b in batches)
    shares = [e for _, e in split_epsilon(EPSILON, [(str(t), 1.0) for t in range(steps)])]
    out = {method: np.empty(steps) for method in METHODS}
    seen: list[np.ndarray] = []
    with tempfile.TemporaryDirectory() as folder:
        fixed = open_stream(Path(folder) / "f.json", schema, EPSILON, create=True, horizon_n=total,
                            horizon_steps=steps, rng=seed)
        growing = open_stream(Path(folder) / "g.json", schema, EPSILON, create=True, growing=True, rng=seed)
        for t, batch in enumerate(batches, 1):
            seen.append(schema.encode(batch)[0])
            real = np.vstack(seen)
            out["fixed"][t - 1] = _w1(real, fixed.add(batch).unit)
            out["growing"][t - 1] = _w1(real, growing.add(batch).unit)
            naive = ps.synthesize(pd.concat(batches[:t]), "pmm", shares[t - 1], schema=schema,
                                  neighbouring="add_remove", public_n=len(real), rng=seed * 1000 + t)
            out["naive"][t - 1] = _w1(real, naive.unit_rows)
    once = ps.synthesize(pd.concat(batches), "pmm", EPSILON, schema=schema, neighbouring="add_remove",
                         public_n=total, rng=seed * 1000)
    out["once"] = np.array([_w1(np.vstack(seen), once.unit_rows)])
    return out


def _w1(real: np.ndarray, synthetic: np.ndarray | None) -> float:
    if synthetic is None or len(synthetic) == 0:
        return float("nan")
    return float(w1(real, synthetic, metric="chebyshev"))


def slope(t: np.ndarray, values: np.ndarray) -> float:
    ok = np.isfinite(values) & (values > 0)
    return float(np.polyfit(np.log(t[ok]), np.log(values[ok]), 1)[0])


def interval(values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Mean and half-width of a 95% t-interval over seeds (rows)."""
    with warnings.catch_warnings():  # a step whose release is empty for every seed but one: no interval (nan)
        warnings.simplefilter("ignore", RuntimeWarning)
        mean = np.nanmean(values, axis=0)
        k = values.shape[0]
        half = stats.t.ppf(0.975, k - 1) * np.nanstd(values, axis=0, ddof=1) / math.sqrt(k) if k > 1 else 0 * mean
    return mean, half


def report(label: str, runs: list[dict[str, np.ndarray]], batch_sizes: list[int], d: int, seconds: float) -> None:
    """One row per method: W1 at steps 1, T/4, T/2, T (mean +- half-width), fitted and paper exponents."""
    steps = len(batch_sizes)
    t = np.arange(1, steps + 1)
    show = [0, steps // 4 - 1, steps // 2 - 1, steps - 1]
    records = np.cumsum(batch_sizes)  # the paper's time counts records: its rate at n = records so far
    paper = slope(t, np.array([w1_rate(int(n), d) for n in records]))
    for method in METHODS:
        mean, half = interval(np.array([r[method] for r in runs]))
        cells = " ".join(f"{mean[i]:6.3f}+-{half[i]:<5.3f}" for i in show)
        say(f"{label} {method:7} {cells} {slope(t, mean):6.2f} {paper:6.2f} {-1 / d:5.2f}")
    once_mean, once_half = interval(np.array([r["once"] for r in runs]))
    say(f"{label} {'once':7} {'':>38} {once_mean[0]:6.3f}+-{once_half[0]:<5.3f}  ({seconds:.0f} s)")


def header(what: str) -> None:
    say(f"{what:18} {'method':7} {'t=1':>12} {'t=T/4':>12} {'t=T/2':>12} {'t=T':>12} {'slope':>6} {'paper':>6} "
        f"{'-1/d':>5}")


def accuracy_section(records: int, seeds: int, horizons: list[int]) -> None:
    say(f"\n== W1 per step (l-inf, exact), epsilon {EPSILON} for the whole stream, {records} records in all, "
        f"{seeds} seeds: mean +- 95% t-interval ==")
    header(" T d data")
    for steps in horizons:
        batch = records // steps
        for d in (1, 2, 3):
            schema = ps.unit_schema(d)
            for dataset in DATASETS:
                start = time.perf_counter()
                runs = []
                for seed in range(seeds):
                    data = DATASETS[dataset](batch * steps, d, rng=seed)
                    frames = [pd.DataFrame(data[batch * i:batch * (i + 1)], columns=schema.names)
                              for i in range(steps)]
                    runs.append(run_accuracy(frames, schema, seed))
                report(f"{steps:2d} {d} {dataset:13}", runs, [batch] * steps, d, time.perf_counter() - start)


def weather() -> tuple[pd.DataFrame, ps.Schema]:
    """Seattle's daily weather (vega_datasets, bundled) and its hand-set public schema."""
    from vega_datasets import local_data

    frame = local_data("seattle-weather")
    schema = ps.Schema.from_dict({"columns": [{"name": name, "kind": "numeric", "lo": lo, "hi": hi}
                                              for name, (lo, hi) in WEATHER_BOUNDS.items()]})
    return frame, schema


def real_section(seeds: int) -> None:
    frame, schema = weather()
    months = frame["date"].dt.year * 12 + frame["date"].dt.month - 1
    say(f"\n== the real table: Seattle weather 2012-2015 ({len(frame)} days, d = 4, hand-set bounds), epsilon "
        f"{EPSILON}, {seeds} seeds ==")
    header(" T batches")
    for months_per_step in (1, 4):
        period = (months - months.min()) // months_per_step
        batches = [frame.loc[period == p, list(WEATHER_BOUNDS)] for p in sorted(period.unique())]
        start = time.perf_counter()
        runs = [run_accuracy(batches, schema, seed) for seed in range(seeds)]
        label = f"{len(batches):2d} {months_per_step} month{'s' if months_per_step > 1 else ' '}"
        report(f"{label:18}", runs, [len(b) for b in batches], 4, time.perf_counter() - start)


def cost_section(batches: list[int], steps: int = 3, d: int = 2) -> None:
    say(f"\n== cost of one Stream.add (d = {d}, epsilon {EPSILON}): wall seconds, peak traced MB ==")
    say(f"{'depth':7} {'batch':>9} {'step':>4} {'depth':>5} {'seconds':>8} {'peak MB':>8} {'rows out':>9} "
        f"{'state MB':>8}")
    schema = ps.unit_schema(d)
    for mode in ("fixed", "growing"):
        for batch in batches:
            with tempfile.TemporaryDirectory() as folder:
                path = Path(folder) / "s.json"
                sizing = {"growing": True} if mode == "growing" else {"horizon_n": 10 * batch}
                stream = open_stream(path, schema, EPSILON, create=True, **sizing)
                for step in range(1, steps + 1):
                    frame = pd.DataFrame(two_blobs(batch, d, rng=step), columns=schema.names)
                    tracemalloc.start()
                    start = time.perf_counter()
                    release = stream.add(frame)
                    seconds = time.perf_counter() - start
                    peak = tracemalloc.get_traced_memory()[1] / 2**20
                    tracemalloc.stop()
                    say(f"{mode:7} {batch:9d} {step:4d} {stream.depth:5d} {seconds:8.2f} {peak:8.0f} "
                        f"{release.n_synthetic:9d} {path.stat().st_size / 2**20:8.1f}")
                    del release


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    parser.add_argument("--sections", nargs="+", default=["accuracy", "real", "cost"],
                        choices=["accuracy", "real", "cost"])
    parser.add_argument("--records", type=int, default=1152)
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--steps", type=int, nargs="+", default=[12, 48])
    parser.add_argument("--batches", type=int, nargs="+", default=[10**5, 10**6])
    parser.add_argument("--write", action="store_true", help="write docs/tables/stream.md")
    args = parser.parse_args()
    if "accuracy" in args.sections:
        accuracy_section(args.records, args.seeds, args.steps)
    if "real" in args.sections:
        real_section(args.seeds)
    if "cost" in args.sections:
        cost_section(args.batches)
    if args.write:
        from benchmarks.docsection import write_table

        command = " ".join(["python -m benchmarks.bench_stream", *sys.argv[1:]])
        note = ("Measured on 2 shared cores while other agents ran (timings under load). W1: mean +- half-width "
                "of a 95% t-interval over seeds; slope: fitted exponent of mean W1 against t; paper: the exponent "
                "of [HVZ24]'s rate shape at the records so far, over the same steps; -1/d: its asymptote.")
        write_table("stream", note + "\n\n```text\n" + "\n".join(LINES).strip() + "\n```", command)


if __name__ == "__main__":
    main()
