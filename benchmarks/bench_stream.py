"""Online PMM (``privsyn_core.stream``) against what users would otherwise do: its measured rate, step by step.

Usage::

    python -m benchmarks.bench_stream [--sections rate real cost] [--records 100000] [--steps 100] [--seeds 5]
                                      [--dims 1 2] [--first 1] [--write]

* rate: ``two_blobs`` (:mod:`privsyn_core.data.datasets`) in d in ``--dims``, a stream of ``--steps`` equal batches
  of ``records / steps`` records (``--records`` in all), epsilon 1 for everything released; at the checkpoints
  ``t = T, T/2, T/4, ...`` down to ``--first`` (rounded), i.e. records so far ``n = batch t``:

  - **growing**: online PMM with a growing depth (``growing=True``: no plan; a level opens when the released
    total passes its threshold), one release per step: the mechanism whose rate ``docs/online_pmm.md`` derives;
  - **fixed**: online PMM with a fixed depth, PMM's depth for the public plan ``horizon_n = records``,
    ``horizon_steps = T`` (``online_pmm.horizon_depth``), one release per step;
  - **naive**: offline PMM re-run on the cumulative table at every step with epsilon split evenly over the
    ``T`` steps (``split_epsilon``: the shares sum to 1 exactly), add/remove, PMM's depth for the public size;
  - **offline**: offline PMM on the cumulative table with the whole epsilon 1, as if this were the only release
    (the reference a stream cannot beat).

  Every release is drawn with ``n_synthetic = n`` rows (the planned batch sizes are public here), so real and
  synthetic measures have equal mass ``1/n`` per row.  W1 (l-infinity) is the library's
  :func:`privsyn_core.metrics.w1` between the cumulative real table and the release: the closed form in d = 1;
  in d = 2 exact while the cost matrix fits, else a certified interval ``[lower, upper]`` (its midpoint shown).
  Equal sizes also keep the certified solver's masses small (it failed on 10^5 against 100040 rows: POT's
  "a and b vector must have the same sum").  W1 per checkpoint: mean +- the
  half-width of a 95% t-interval over ``--seeds`` seeds (each seed draws its own data and noise), and the largest
  certified half-width relative to its value.  Slope: the least-squares exponent ``b`` of ``W1 ~ n^b`` (log W1
  against log n over the checkpoints) fitted per seed; its interval is the 95% t-interval over seeds of the
  per-seed slopes, widened by the certified intervals (the least-squares slope is linear in the log W1 values,
  so the smallest and largest slope over every W1 in its certified interval are exact; the interval runs from
  the t-interval's lower end of the smallest to the upper end of the largest).  Fitted over all checkpoints and
  over the last decade (``n >= records / 10``), beside the exponents of the rate shapes over the same ``n``:
  [HVZ24]'s ``log(n) n^(-1/d)`` (``log^4.5(n)/n`` for d = 1) and the one derived here,
  ``(log^3.5(n)/n)^(1/d)`` (``log^4.5(n)/n`` for d = 1; ``docs/online_pmm.md``), and their asymptote ``-1/d``.
* real: the same four methods on a real table with a time column, Seattle's daily weather 2012-2015 (1461 days,
  bundled in the pip package ``vega_datasets``): numeric columns temp_max, temp_min, precipitation and wind
  (d = 4) with hand-set public bounds (:data:`WEATHER_BOUNDS`), batches by month (T = 48) and by four months
  (T = 12), W1 exact (network simplex), checkpoints as above down to step 1.  The fixed stream's plan is the
  table's size and ``T`` (days per month are public).
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
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
from scipy import stats

import privsyn_core as ps
from privsyn_core.data.datasets import two_blobs
from privsyn_core.mechanisms.online.online_pmm import derived_rate, w1_rate
from privsyn_core.privacy.accounting import split_epsilon
from privsyn_core.stream import open_stream

EPSILON = 1.0
METHODS = ("growing", "fixed", "naive", "offline")
#: Public bounds of the weather table, set by hand from the climate of Seattle (not read off the data).
WEATHER_BOUNDS = {"temp_max": (-10.0, 40.0), "temp_min": (-15.0, 25.0), "precipitation": (0.0, 60.0),
                  "wind": (0.0, 10.0)}
LINES: list[str] = []


def say(line: str = "") -> None:
    print(line, flush=True)
    LINES.append(line)


@dataclass
class Runs:
    """W1 of every method at every checkpoint: ``lower``/``upper`` arrays (seeds, checkpoints) per method."""

    records: np.ndarray
    lower: dict[str, np.ndarray]
    upper: dict[str, np.ndarray]
    depths: dict[str, list[int]]

    def middle(self, method: str) -> np.ndarray:
        return 0.5 * (self.lower[method] + self.upper[method])


def checkpoints(steps: int, first: int) -> list[int]:
    """The steps ``T, T/2, T/4, ...`` (rounded) down to ``first``, in increasing order."""
    return sorted({round(steps / 2 ** k) for k in range(steps.bit_length()) if steps / 2 ** k >= first})


def run_stream(batches: list[pd.DataFrame], schema: ps.Schema, seed: int, at: list[int]) -> dict[str, list]:
    """W1 of the four methods (certified ends, :func:`_w1`) at the steps ``at``, and each stream's final depth."""
    steps = len(batches)
    total = sum(len(b) for b in batches)
    shares = [e for _, e in split_epsilon(EPSILON, [(str(t), 1.0) for t in range(steps)])]
    out: dict[str, list] = {method: [] for method in METHODS}
    seen: list[np.ndarray] = []
    with tempfile.TemporaryDirectory() as folder:
        streams = {"growing": open_stream(Path(folder) / "g.json", schema, EPSILON, create=True, growing=True,
                                          rng=seed),
                   "fixed": open_stream(Path(folder) / "f.json", schema, EPSILON, create=True, horizon_n=total,
                                        horizon_steps=steps, rng=seed)}
        for t, batch in enumerate(batches, 1):
            seen.append(schema.encode(batch)[0])
            for stream in streams.values():
                stream.add(batch)
            if t not in at:
                continue
            real = np.vstack(seen)
            n = len(real)
            table = pd.concat(batches[:t])
            for method, stream in streams.items():
                out[method].append(_w1(real, stream.release(n_synthetic=n).unit))
            for method, epsilon, salt in (("naive", shares[t - 1], t), ("offline", EPSILON, steps + t)):
                release = ps.synthesize(table, "pmm", epsilon, schema=schema, neighbouring="add_remove",
                                        public_n=n, n_synthetic=n, rng=seed * 100_000 + salt)
                out[method].append(_w1(real, release.unit_rows))
        out["depth"] = [streams["growing"].depth, streams["fixed"].depth]
    return out


def _w1(real: np.ndarray, synthetic: np.ndarray | None) -> tuple[float, float]:
    """The certified ends ``(lower, upper)`` of W1 (equal where it is exact); NaN for an empty release (a
    negative noisy total: no rows to compare)."""
    if synthetic is None or len(synthetic) == 0:
        return math.nan, math.nan
    value = ps.metrics.w1(real, synthetic)
    return value.lower, value.upper


def collect(make_batches, schema: ps.Schema, seeds: int, at: list[int]) -> Runs:
    """Every seed's run; ``make_batches(seed)`` gives that seed's batches."""
    results = []
    for seed in range(seeds):
        batches = make_batches(seed)
        results.append(run_stream(batches, schema, seed, at))
    sizes = np.cumsum([len(b) for b in make_batches(0)])
    records = sizes[np.array(at) - 1]
    lower = {m: np.array([[w[0] for w in r[m]] for r in results]) for m in METHODS}
    upper = {m: np.array([[w[1] for w in r[m]] for r in results]) for m in METHODS}
    depths = {"growing": [r["depth"][0] for r in results], "fixed": [r["depth"][1] for r in results]}
    return Runs(records, lower, upper, depths)


def t_interval(values: np.ndarray) -> tuple[float, float]:
    """Mean and half-width of a 95% t-interval of the finite values (NaN without two)."""
    values = values[np.isfinite(values)]
    k = len(values)
    if k < 2:
        return (float(values.mean()) if k else math.nan), math.nan
    return float(values.mean()), float(stats.t.ppf(0.975, k - 1) * values.std(ddof=1) / math.sqrt(k))


def slope_weights(records: np.ndarray) -> np.ndarray:
    """``w`` with ``slope = w @ log(W1)``: the least-squares slope of log W1 against log n is linear in log W1."""
    x = np.log(records)
    return (x - x.mean()) / ((x - x.mean()) ** 2).sum()


def slope_interval(runs: Runs, method: str, keep: np.ndarray) -> tuple[float, float, float]:
    """Mean per-seed slope over the checkpoints ``keep`` and its 95% interval, widened by the certified ends.

    Per seed, the smallest slope takes the lower end where the weight is positive and the upper end where it is
    negative (the largest the reverse); the interval is the t-interval's lower end of the smallest slopes and its
    upper end of the largest.  NaN if a seed's release was empty at one of the checkpoints.
    """
    w = slope_weights(runs.records[keep])
    low, high = np.log(runs.lower[method][:, keep]), np.log(runs.upper[method][:, keep])
    smallest = np.where(w > 0, low, high) @ w
    largest = np.where(w > 0, high, low) @ w
    if not np.isfinite(smallest).all():
        return math.nan, math.nan, math.nan
    mean_small, half_small = t_interval(smallest)
    mean_large, half_large = t_interval(largest)
    middle = np.log(runs.middle(method)[:, keep]) @ w
    return float(middle.mean()), mean_small - half_small, mean_large + half_large


def shape_slope(records: np.ndarray, d: int, rate) -> float:
    return float(slope_weights(records) @ np.log([rate(int(n), d) for n in records]))


def report(label: str, runs: Runs, d: int, seconds: float) -> None:
    """W1 per checkpoint (mean +- half-width, largest certified half-width in %), then the slopes."""
    say(f"{label}: W1 mean +- 95% t-half-width over {runs.lower['growing'].shape[0]} seeds; 'cert': the largest "
        f"certified half-width / value over methods and seeds; depth at the end: growing "
        f"{_depths(runs.depths['growing'])}, fixed {_depths(runs.depths['fixed'])}  ({seconds:.0f} s)")
    say(f"{'n':>8} " + " ".join(f"{m:>17}" for m in METHODS) + f" {'cert':>6}")
    for i, n in enumerate(runs.records):
        cells = []
        for method in METHODS:
            values = runs.middle(method)[:, i]
            mean, half = t_interval(values)
            empty = int(np.isnan(values).sum())
            cells.append(f"{mean:9.5f}+-{half:<6.5f}" if not empty else f"{mean:7.4f} ({empty} empty)")
        relative = max(float(np.nanmax((runs.upper[m][:, i] - runs.lower[m][:, i])
                                       / (runs.upper[m][:, i] + runs.lower[m][:, i]), initial=0.0))
                       for m in METHODS)
        say(f"{n:8d} " + " ".join(cells) + f" {100 * relative:5.1f}%")
    fits = {"all": np.ones(len(runs.records), dtype=bool),
            "last decade": runs.records >= runs.records[-1] / 10}
    say(f"{'slope of log W1 on log n':26} " + " ".join(f"{m:>22}" for m in METHODS)
        + f" {'[HVZ24]':>7} {'derived':>7} {'-1/d':>5}")
    for name, keep in fits.items():
        if keep.sum() < 3:
            continue
        cells = []
        for method in METHODS:
            mean, low, high = slope_interval(runs, method, keep)
            cells.append(f"{mean:6.2f} [{low:6.2f}, {high:6.2f}]" if np.isfinite(mean) else "(an empty release)")
        span = f"{name} ({runs.records[keep][0]}-{runs.records[keep][-1]})"
        say(f"{span:26} " + " ".join(f"{c:>22}" for c in cells)
            + f" {shape_slope(runs.records[keep], d, w1_rate):7.2f} "
              f"{shape_slope(runs.records[keep], d, derived_rate):7.2f} {-1 / d:5.2f}")
    say()


def _depths(values: list[int]) -> str:
    return str(values[0]) if min(values) == max(values) else f"{min(values)}-{max(values)}"


def rate_section(records: int, steps: int, seeds: int, dims: list[int], first: int) -> None:
    batch = records // steps
    at = checkpoints(steps, first)
    say(f"\n== the rate: two_blobs, {steps} batches of {batch} records ({batch * steps} in all), epsilon "
        f"{EPSILON} for the whole stream, {seeds} seeds ==")
    for d in dims:
        schema = ps.unit_schema(d)

        def batches(seed: int, d: int = d, schema: ps.Schema = schema) -> list[pd.DataFrame]:
            data = two_blobs(batch * steps, d, rng=seed)
            return [pd.DataFrame(data[batch * i:batch * (i + 1)], columns=schema.names) for i in range(steps)]

        start = time.perf_counter()
        runs = collect(batches, schema, seeds, at)
        report(f"d = {d}", runs, d, time.perf_counter() - start)


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
        f"{EPSILON}, {seeds} seeds, W1 exact ==")
    for months_per_step in (1, 4):
        period = (months - months.min()) // months_per_step
        batches = [frame.loc[period == p, list(WEATHER_BOUNDS)] for p in sorted(period.unique())]
        start = time.perf_counter()
        runs = collect(lambda seed, batches=batches: batches, schema, seeds, checkpoints(len(batches), 1))
        report(f"T = {len(batches)} ({months_per_step} month{'s' if months_per_step > 1 else ''} per step)", runs,
               4, time.perf_counter() - start)


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
    parser.add_argument("--sections", nargs="+", default=["rate", "real", "cost"], choices=["rate", "real", "cost"])
    parser.add_argument("--records", type=int, default=100_000)
    parser.add_argument("--steps", type=int, default=100)
    parser.add_argument("--seeds", type=int, default=5)
    parser.add_argument("--dims", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--first", type=int, default=1, help="the first checkpoint's step (rate section)")
    parser.add_argument("--batches", type=int, nargs="+", default=[10**5, 10**6])
    parser.add_argument("--write", action="store_true", help="write docs/tables/stream.md")
    args = parser.parse_args()
    start = time.perf_counter()
    if "rate" in args.sections:
        rate_section(args.records, args.steps, args.seeds, args.dims, args.first)
    if "real" in args.sections:
        real_section(args.seeds)
    if "cost" in args.sections:
        cost_section(args.batches)
    say(f"\nwall time of the whole run: {time.perf_counter() - start:.0f} s")
    if args.write:
        from benchmarks.docsection import write_table

        command = " ".join(["python -m benchmarks.bench_stream", *sys.argv[1:]])
        note = ("Measured on 2 shared cores while other agents ran (timings under load). W1: the library's "
                "`ps.metrics.w1` (l-infinity; closed form in d = 1, in d = 2 exact up to 2000 rows a side, else a "
                "certified interval, exact in d = 4), "
                "mean +- half-width of a 95% t-interval over seeds. Slope: exponent of W1 ~ n^b fitted per seed "
                "(n = records so far), mean [95% interval over seeds, widened by the certified intervals]; "
                "[HVZ24]: the exponent of the paper's rate shape over the same n, derived: that of the rate derived "
                "in docs/online_pmm.md, -1/d: their asymptote.")
        write_table("stream", note + "\n\n```text\n" + "\n".join(LINES).strip() + "\n```", command)


if __name__ == "__main__":
    main()
