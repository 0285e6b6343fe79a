"""Time of ``evaluate`` per metric on mixed tables (issue 30 item 2, issue 28 item 3).

Usage::

    python -m benchmarks.bench_evaluate [--rows 10000 100000] [--repeats 3] [--tstr]

Two tables of ``--rows`` rows x 8 mixed columns (:func:`mixed_pair`: three continuous columns, one of them with a
public atom at 0, a few-valued and a wide integer column, three categorical columns; the synthetic side is the
real law with noise, a shifted mean and reweighted categories) are evaluated with the library's defaults; the app
evaluates at most ``report.EVAL_ROWS`` (10^4) rows per side, so 10^5 rows is the library's own default path.

Per metric, wall and CPU seconds (``time.perf_counter`` / ``time.process_time``, CPU of every thread of this
process) are accumulated over the calls of the functions that compute it, by wrapping the module attributes
``evaluate`` looks up (:data:`STAGES`): an outer stage includes the inner ones it calls (``marginals (bootstrap)``
includes the correlation gap it bootstraps).  Each configuration runs ``--repeats`` times after one warm-up; the
median is printed, with the machine's 1-minute load average (the cores are shared: wall times are inflated, CPU
times much less).
"""

from __future__ import annotations

import argparse
import functools
import os
import statistics
import time
from collections import defaultdict
from collections.abc import Callable
from typing import Any

import numpy as np
import pandas as pd

import privsyn_core as ps
from privsyn_core.evaluation import scorecard, utility

#: (label, module, attribute): the functions ``evaluate`` calls per metric, timed where it looks them up.
STAGES: tuple[tuple[str, Any, str], ...] = (
    ("W1 subsamples (exact)", scorecard, "w1"),
    ("sliced W1", scorecard, "sliced_w1"),
    ("MMD", scorecard, "mmd"),
    ("W1 full sample (auto)", scorecard, "_full_sample_w1"),
    ("marginals + corr (bootstrap)", scorecard, "_bootstrap_metrics"),
    ("correlation gap", scorecard, "weighted_correlation_gaps"),  # every replicate at once
    ("coverage", scorecard, "coverage"),
    ("TSTR", utility, "tstr"),
)


def mixed_pair(n: int, seed: int = 0) -> tuple[pd.DataFrame, pd.DataFrame, ps.Schema]:
    """A real and a synthetic table of ``n`` rows x 8 mixed columns, and their public schema."""
    rng = np.random.default_rng(seed)
    schema = ps.Schema.from_dict({"columns": [
        {"name": "age", "lo": 18, "hi": 90, "integer": True},
        {"name": "kids", "lo": 0, "hi": 6, "integer": True},
        {"name": "income", "lo": 0, "hi": 200_000, "atoms": [0]},
        {"name": "score", "lo": -4, "hi": 4},
        {"name": "hours", "lo": 0, "hi": 80},
        {"name": "sector", "kind": "categorical", "categories": ["a", "b", "c", "d", "e"]},
        {"name": "region", "kind": "categorical", "categories": ["n", "s", "e", "w"]},
        {"name": "member", "kind": "categorical", "categories": [False, True]},
    ]})

    def table(shift: float, weights: list[float]) -> pd.DataFrame:
        age = np.clip(rng.normal(45 + shift * 5, 14, n), 18, 90).round()
        score = np.clip(rng.normal(shift, 1, n) + 0.02 * (age - 45), -4, 4)
        income = np.where(rng.random(n) < 0.2, 0.0, np.clip(rng.lognormal(10.5 + 0.01 * (age - 45), 0.6, n), 0, 2e5))
        return pd.DataFrame({
            "age": age.astype(np.int64), "kids": np.minimum(rng.poisson(1.2 + shift, n), 6),
            "income": income, "score": score, "hours": np.clip(rng.normal(38, 10, n) + 3 * score, 0, 80),
            "sector": rng.choice(list("abcde"), n, p=weights), "region": rng.choice(list("nsew"), n),
            "member": rng.random(n) < 0.3 + 0.05 * score.clip(-2, 2)})

    return table(0.0, [0.3, 0.25, 0.2, 0.15, 0.1]), table(0.3, [0.25, 0.25, 0.2, 0.2, 0.1]), schema


def timed_run(call: Callable[[], Any]) -> dict[str, tuple[float, float]]:
    """Run ``call`` with :data:`STAGES` wrapped; (wall, cpu) seconds per stage and in total."""
    spent: dict[str, list[float]] = defaultdict(lambda: [0.0, 0.0])
    depth: dict[str, int] = defaultdict(int)
    originals = [(module, attr, getattr(module, attr)) for _, module, attr in STAGES if hasattr(module, attr)]

    def wrap(label: str, function: Callable) -> Callable:
        @functools.wraps(function)
        def timed(*args, **kwargs):
            depth[label] += 1
            wall, cpu = time.perf_counter(), time.process_time()
            try:
                return function(*args, **kwargs)
            finally:
                depth[label] -= 1
                if depth[label] == 0:  # recursive or nested calls of the same stage count once
                    spent[label][0] += time.perf_counter() - wall
                    spent[label][1] += time.process_time() - cpu
        return timed

    for label, module, attr in STAGES:
        if hasattr(module, attr):
            setattr(module, attr, wrap(label, getattr(module, attr)))
    try:
        wall, cpu = time.perf_counter(), time.process_time()
        call()
        spent["evaluate (total)"] = [time.perf_counter() - wall, time.process_time() - cpu]
    finally:
        for module, attr, original in originals:
            setattr(module, attr, original)
    return {k: (v[0], v[1]) for k, v in spent.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, nargs="+", default=[10_000, 100_000])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--tstr", action="store_true", help="also train-on-synthetic/test-on-real (target sector)")
    args = parser.parse_args()
    print(f"load average (1 min) at start: {os.getloadavg()[0]:.2f} on {os.cpu_count()} cores")
    for n in args.rows:
        real, synth, schema = mixed_pair(n)
        target = "sector" if args.tstr else None
        call = functools.partial(scorecard.evaluate, real, synth, schema, target=target)
        call()  # warm-up (imports, caches)
        runs = [timed_run(call) for _ in range(args.repeats)]
        print(f"\nevaluate, {n:,} rows x 8 columns per side, median of {args.repeats} "
              f"(load {os.getloadavg()[0]:.2f}):")
        print(f"  {'stage':32s} {'wall s':>8s} {'CPU s':>8s}")
        labels = list(dict.fromkeys(label for label, _, _ in STAGES)) + ["evaluate (total)"]
        for label in labels:
            if label in runs[0]:
                wall = statistics.median(r[label][0] for r in runs)
                cpu = statistics.median(r[label][1] for r in runs)
                print(f"  {label:32s} {wall:8.3f} {cpu:8.3f}")


if __name__ == "__main__":
    main()
