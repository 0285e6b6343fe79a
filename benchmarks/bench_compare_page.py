"""Time of the Compare and Trade-off pages in-process (Streamlit's AppTest, no browser; issue 28 item 3).

Usage::

    python -m benchmarks.bench_compare_page [--rows 10000] [--repeats 3] [--profile]

Uploads :func:`benchmarks.bench_evaluate.mixed_pair`'s real table (``--rows`` x 8 mixed columns) with its public
schema, runs ``pmm`` at epsilon 1, then times:

* teaching mode: the first render of the Compare page (metrics computed) and a rerun (metrics cached);
* release mode (a locked deployment, ``PRIVSYN_RELEASE_ONLY=1``, budget 1000): a release with ``pmm``, then the
  Compare page's render (no metric is computed there);
* the Trade-off page's default sweep (its default mechanisms, epsilons and seeds on the same table), with the
  number of progress updates it drew.

Wall and CPU seconds (``time.perf_counter`` / ``time.process_time``: AppTest runs the script in this process) per
render, the median over ``--repeats`` renders (the first render of Compare once per fresh app); the load average is
printed. ``--profile`` prints the 15 costliest functions of one release-mode render (cProfile, cumulative).
"""

from __future__ import annotations

import argparse
import cProfile
import io
import os
import pstats
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from unittest import mock

import streamlit as st
from streamlit.testing.v1 import AppTest

from benchmarks.bench_evaluate import mixed_pair

APP = str(Path(__file__).resolve().parents[1] / "app.py")


def timed(call: Callable[[], object]) -> tuple[float, float]:
    wall, cpu = time.perf_counter(), time.process_time()
    call()
    return time.perf_counter() - wall, time.process_time() - cpu


def loaded_app(rows: int) -> AppTest:
    """A fresh app with the mixed table uploaded and its public schema typed in."""
    real, _, schema = mixed_pair(rows)
    at = AppTest.from_file(APP, default_timeout=300).run()
    at.switch_page("pages/data.py").run()
    at.radio(key="w_source").set_value("Upload a CSV").run()
    at.file_uploader[0].set_value(("mixed.csv", real.to_csv(index=False).encode(), "text/csv")).run()
    at.session_state["schema_entries"] = {c["name"]: {**c, "public": True, "source": "typed by the user"}
                                          for c in schema.to_dict()["columns"]}
    return at.run()


def run_pmm(at: AppTest) -> AppTest:
    at.switch_page("pages/synthesize.py").run()
    at.selectbox(key="w_mechanism").set_value("pmm").run()
    run = next(b for b in at.button if b.label == "Run")
    run.click().run()
    problems = [e.value for e in at.exception] + [e.value for e in at.error]
    if problems or at.session_state["result"] is None:
        raise RuntimeError(f"the run failed: {problems}")
    return at


def show(label: str, times: list[tuple[float, float]]) -> None:
    wall = statistics.median(t[0] for t in times)
    cpu = statistics.median(t[1] for t in times)
    print(f"  {label:46s} wall {wall:6.2f} s  CPU {cpu:6.2f} s  (n={len(times)}, load {os.getloadavg()[0]:.2f})")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=10_000)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--profile", action="store_true")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as work:
        os.environ["PRIVSYN_DATA_DIR"] = work
        print(f"Compare / Trade-off pages, {args.rows:,} rows x 8 columns (load {os.getloadavg()[0]:.2f})")
        first, again = [], []
        for _ in range(args.repeats):
            st.cache_data.clear()  # the metrics are cached per process: every first render computes them
            at = run_pmm(loaded_app(args.rows))
            first.append(timed(at.switch_page("pages/compare.py").run))
            again.extend(timed(at.run) for _ in range(2))
        show("teaching: Compare, first render (metrics)", first)
        show("teaching: Compare, rerun (metrics cached)", again)
        if not any(t.value is not None for t in at.table):
            raise RuntimeError("the Compare page shows no metric table")

        at.switch_page("pages/tradeoff.py").run()
        updates: list[float] = []
        from privsyn_core.reporting import report
        original = report.tradeoff_sweep

        def counting(*a, **k):
            inner = k.pop("progress")
            return original(*a, **k, progress=lambda share, text: (updates.append(share), inner(share, text)))

        with mock.patch.object(report, "tradeoff_sweep", counting):
            button = next(b for b in at.button if b.label == "Run the sweep")
            sweep = timed(lambda: button.click().run())
        show("teaching: Trade-off default sweep", [sweep])
        print(f"  progress updates: {len(updates)} ({', '.join(f'{u:.2f}' for u in updates)})")

        with mock.patch.dict(os.environ, {"PRIVSYN_RELEASE_ONLY": "1", "PRIVSYN_BUDGET": "1000"}):
            at = run_pmm(loaded_app(args.rows))
            show("release: Compare, first render", [timed(at.switch_page("pages/compare.py").run)])
            if not any("Release mode" in i.value for i in at.info):
                raise RuntimeError("the Compare page is not in release mode")
            show("release: Compare, rerun", [timed(at.run) for _ in range(args.repeats)])
            if args.profile:
                profile = cProfile.Profile()
                profile.enable()
                at.run()
                profile.disable()
                out = io.StringIO()
                pstats.Stats(profile, stream=out).sort_stats("cumulative").print_stats(15)
                print(out.getvalue())


if __name__ == "__main__":
    main()
