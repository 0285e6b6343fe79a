"""Time of the slow teaching views in-process (issue 38 items 3 and 4): Compare with a TSTR target, the teaching
report with a target, the Over time page, and the library's ``evaluate`` under them.

Usage::

    python -m benchmarks.bench_views [--rows 10000] [--repeats 3] [--skip-app]

The table is :func:`wide_pair`: :func:`benchmarks.bench_evaluate.mixed_pair` (8 mixed columns) with two more
numeric columns, ``--rows`` x 10 columns, its public schema typed in.  Timed, wall and CPU seconds
(``time.perf_counter`` / ``time.process_time``; AppTest runs the page scripts in this process), median over
``--repeats``, each with the 1-minute load average beside it (the cores are shared: wall times on a loaded machine
are inflated, CPU times much less):

* library: ``evaluate`` without a target and with a categorical (``sector``, 5 classes) and a numeric (``income``)
  target, as the app calls it (:func:`privsyn_core.reporting.report.evaluate_subsampled`);
* the teaching report with a target: what the "Export stakeholder report (HTML)" click builds (the metrics, then
  :func:`privsyn_core.reporting.stakeholder.build`);
* app (AppTest, after a ``pmm`` run at epsilon 1): the Compare page's first render, then the rerun that follows
  choosing the TSTR target ``sector`` (every metric and TSTR computed, metrics cache cleared before each repeat);
  the Over time page's "Release step by step" with its defaults.
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pandas as pd
import streamlit as st
from streamlit.testing.v1 import AppTest

import privsyn_core as ps
from benchmarks.bench_evaluate import mixed_pair
from privsyn_core.reporting import report, stakeholder

APP = str(Path(__file__).resolve().parents[1] / "app.py")
TARGET = "sector"


def wide_pair(n: int, seed: int = 0) -> tuple[pd.DataFrame, pd.DataFrame, ps.Schema]:
    """:func:`mixed_pair` with two more numeric columns (``tenure``, ``rating``): ``n`` rows x 10 columns."""
    real, synth, schema = mixed_pair(n, seed)
    rng = np.random.default_rng(seed + 1)
    extra = [{"name": "tenure", "lo": 0, "hi": 40}, {"name": "rating", "lo": 1, "hi": 5, "integer": True}]
    for frame, shift in ((real, 0.0), (synth, 0.5)):
        frame["tenure"] = np.clip(rng.gamma(2.0, 4.0 + shift, n), 0, 40)
        frame["rating"] = np.clip(np.round(rng.normal(3 + shift / 2, 1, n)), 1, 5).astype(np.int64)
    return real, synth, ps.Schema.from_dict({"columns": schema.to_dict()["columns"] + extra})


def timed(call: Callable[[], object]) -> tuple[float, float, float]:
    """(wall, CPU, load) of one call; the load is the 1-minute average when it ends."""
    wall, cpu = time.perf_counter(), time.process_time()
    call()
    return time.perf_counter() - wall, time.process_time() - cpu, os.getloadavg()[0]


def show(label: str, times: list[tuple[float, float, float]]) -> None:
    wall, cpu = statistics.median(t[0] for t in times), statistics.median(t[1] for t in times)
    loads = ", ".join(f"{t[2]:.1f}" for t in times)
    print(f"| {label} | {wall:.2f} | {cpu:.2f} | {min(t[0] for t in times):.2f}-{max(t[0] for t in times):.2f} "
          f"| {loads} |", flush=True)


def library(rows: int, repeats: int) -> None:
    real, synth, schema = wide_pair(rows)
    report.evaluate_subsampled(real.iloc[:500], synth.iloc[:500], schema, target=TARGET)  # imports, warm caches
    for target in (None, TARGET, "income"):
        show(f"library: evaluate, target {target}",
             [timed(lambda t=target: report.evaluate_subsampled(real, synth, schema, target=t))
              for _ in range(repeats)])
    release = ps.synthesize(real, "pmm", 1.0, schema=schema, rng=0).release()

    def teaching_report() -> str:
        evaluation = report.evaluate_subsampled(real, release.data, schema, target=TARGET)
        return stakeholder.build(release=release, data_name="wide", totals={}, budget=None, real=real,
                                 evaluation=evaluation)

    show(f"teaching report (HTML), target {TARGET}", [timed(teaching_report) for _ in range(repeats)])


def loaded_app(real: pd.DataFrame, schema: ps.Schema) -> AppTest:
    """A fresh app with the table uploaded, its public schema typed in and a ``pmm`` run at epsilon 1."""
    at = AppTest.from_file(APP, default_timeout=600).run()
    at.switch_page("pages/data.py").run()
    at.radio(key="w_source").set_value("Upload a CSV").run()
    at.file_uploader[0].set_value(("wide.csv", real.to_csv(index=False).encode(), "text/csv")).run()
    at.session_state["schema_entries"] = {c["name"]: {**c, "public": True, "source": "typed by the user"}
                                          for c in schema.to_dict()["columns"]}
    at.run()
    at.switch_page("pages/synthesize.py").run()
    at.selectbox(key="w_mechanism").set_value("pmm").run()
    next(b for b in at.button if b.label == "Run").click().run()
    problems = [e.value for e in at.exception] + [e.value for e in at.error]
    if problems or at.session_state["result"] is None:
        raise RuntimeError(f"the run failed: {problems}")
    return at


def app(rows: int, repeats: int) -> None:
    real, _, schema = wide_pair(rows)
    first, target, over_time = [], [], []
    for _ in range(repeats):
        st.cache_data.clear()
        at = loaded_app(real, schema)
        first.append(timed(at.switch_page("pages/compare.py").run))
        target.append(timed(at.selectbox(key="w_cmp_target").set_value(TARGET).run))
        if not any("tstr" in str(t.value) or "trained on synthetic" in str(t.value) for t in at.table):
            raise RuntimeError("the Compare page shows no TSTR row")
        at.switch_page("pages/over_time.py").run()
        over_time.append(timed(next(b for b in at.button if b.label == "Release step by step").click().run))
        if not at.get("plotly_chart") or at.exception:
            raise RuntimeError(f"the Over time page drew no chart: {[e.value for e in at.exception]}")
    show("app: Compare, first render (every metric)", first)
    show(f"app: Compare, choosing the TSTR target {TARGET}", target)
    show("app: Over time, Release step by step (defaults)", over_time)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=10_000)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--skip-app", action="store_true", help="library timings only")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as work:
        os.environ["PRIVSYN_DATA_DIR"] = work
        print(f"{args.rows:,} rows x 10 columns, median of {args.repeats}, {os.cpu_count()} cores, "
              f"load at start {os.getloadavg()[0]:.2f}\n")
        print("| view | wall s | CPU s | wall min-max | load (1 min) per repeat |\n| --- | --- | --- | --- | --- |")
        library(args.rows, args.repeats)
        if not args.skip_app:
            app(args.rows, args.repeats)


if __name__ == "__main__":
    main()
