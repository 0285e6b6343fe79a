"""The journeys' times in a real browser: a live ``streamlit run app.py`` driven by Chromium (issues 28, 38).

Usage::

    python -m benchmarks.bench_browser [--rows 10000] [--repeats 3] [--table [PATH]]

Needs Debian's Chromium (``apt-get install chromium``) and Playwright (the dev tools). The table is
:func:`benchmarks.bench_evaluate.mixed_pair`'s real table (``--rows`` x 8 columns), its categories written as codes
(sector 0-4, region 0-3, member 0/1) so that "Estimate DP bounds" sets every domain in both modes (release mode
offers no other quick way; typing categories in the grid is a person's time, not the app's). Timed, in seconds of wall
time from the click to the page being idle (connected, script not running, no skeleton left), as a person sees it:

* teaching mode: upload the CSV (until "Loaded"); estimate the DP bounds (until every domain is public); Run
  ``pmm`` at the default epsilon (until "Done in"); open Compare (until its metric table is drawn and the page is
  idle: every metric shown with its interval); open Compare again (metrics cached); choose the TSTR target
  :data:`TARGET` on Compare (from the click on its option, the menu opened beforehand, until the TSTR row is drawn;
  the codes make every column numeric, so it is a regression); on Synthesize, export the stakeholder report with
  that target (from the click until the file is downloaded: the metrics and TSTR are computed on the click); run the
  Trade-off page's default sweep (until idle); on Over time, "Release step by step" with the defaults (until its
  chart is drawn and the page is idle; the page's refusal instead of the chart stops the benchmark);
* release mode (``PRIVSYN_RELEASE_ONLY=1``, budget 1000): the same upload, bounds and run, then open Compare.

Each journey runs ``--repeats`` times in a fresh browser context against one server per mode; the median and the
range are printed, with the 1-minute load average (the figures are meaningful on an otherwise idle machine).
``--table`` also writes them, with the targets of issue 38 (:data:`TARGETS`), to ``docs/tables/browser_timings.md``
(or to ``PATH``).
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import pandas as pd
from playwright.sync_api import Page, sync_playwright

from benchmarks.app_server import CHROMIUM, LAUNCH_ARGS, AppDidNotStart, serve
from benchmarks.bench_evaluate import mixed_pair
from benchmarks.docsection import TABLES, write_table

ROOT = Path(__file__).resolve().parents[1]
MECHANISM = "pmm"
TARGET = "income"
TABLE = TABLES / "browser_timings.md"
#: Issue 38's targets, in seconds, for the teaching steps that have one: Compare with every metric and with a TSTR
#: target within 3 s, the stakeholder report with a target within 5 s, the Over time page within 5 s.
TARGETS = {"compare": 3.0, "compare again": 3.0, f"compare, TSTR target {TARGET}": 3.0,
           f"stakeholder report, TSTR target {TARGET}": 5.0, "over time (defaults)": 5.0}


@contextmanager
def served(env: dict[str, str]) -> Iterator[str]:
    """The app on a free port with its own data folder, as the browser tests start it
    (:func:`benchmarks.app_server.serve`); a clear exit if it does not start."""
    server = serve(env)
    try:
        url = next(server)
    except AppDidNotStart as exc:
        raise SystemExit(str(exc)) from None
    try:
        yield url
    finally:
        server.close()


def wait_idle(tab: Page) -> None:
    """Connected, the script not running, no skeleton left (Streamlit's end-to-end convention)."""
    tab.wait_for_selector("[data-testid='stApp'][data-test-connection-state='CONNECTED']")
    time.sleep(0.2)  # the click's rerun has started
    tab.wait_for_selector("[data-testid='stApp'][data-test-script-state='notRunning']")
    tab.wait_for_function("document.querySelectorAll('[data-testid=\"stSkeleton\"]').length === 0")


def timed(action: Callable[[], None], tab: Page) -> float:
    start = time.perf_counter()
    action()
    wait_idle(tab)
    return time.perf_counter() - start


def goto(tab: Page, title: str) -> Callable[[], None]:
    def action() -> None:
        tab.get_by_test_id("stSidebarNav").get_by_text(title, exact=True).click()
        tab.wait_for_selector(f"h1:has-text('{title.split()[0]}')")
    return action


def open_menu(tab: Page, label: str, typed: str) -> None:
    """Open the menu of the selectbox labelled ``label``, filtered to the options containing ``typed``.

    Typing opens the menu: a click alone leaves it closed, the box only focused, when the box first had to be
    scrolled into view (as the TSTR box far down the Compare page).
    """
    tab.get_by_test_id("stSelectbox").filter(has_text=label).first.click()
    tab.keyboard.type(typed)
    tab.get_by_role("listbox").wait_for()


def choose_mechanism(tab: Page) -> None:
    """Choose :data:`MECHANISM` on Synthesize (the page starts at the guide's pick)."""
    open_menu(tab, "Mechanism", f"[{MECHANISM}]")
    tab.get_by_role("option").filter(has_text=f"[{MECHANISM}]").first.click()
    wait_idle(tab)


def journey(tab: Page, url: str, csv: Path, *, release_mode: bool) -> dict[str, float]:
    """One person's way from the CSV to the Compare page (and, in teaching mode, a TSTR target, the stakeholder
    report, the sweep and the Over time page): seconds per step."""

    def upload() -> None:
        tab.locator("[data-testid='stFileUploaderDropzoneInput']").set_input_files(str(csv))
        tab.get_by_text(f"Loaded {csv.name}").wait_for()

    def bounds() -> None:
        tab.get_by_role("button", name="Estimate DP bounds").click()
        tab.get_by_text("every domain is public").wait_for()

    def run() -> None:
        tab.get_by_role("button", name="Run", exact=True).click()
        tab.get_by_text(re.compile(r"Done( in [0-9.]+ s)?$")).first.wait_for()  # release mode shows no timing

    def compare() -> None:
        goto(tab, "Compare")()
        # teaching mode: the metric table; release mode computes no metric, its last figure is the correlations
        tab.locator("svg[role='img']" if release_mode else "[data-testid='stTable']").filter(
            has_text="Correlations between columns" if release_mode else "w1").first.wait_for()

    def sweep() -> None:
        tab.get_by_role("button", name="Run the sweep").click()
        tab.get_by_text("Measurements", exact=True).wait_for()  # the sweep's expander, drawn when it is done

    def tstr_target() -> None:
        tab.get_by_role("option", name=TARGET, exact=True).click()
        tab.locator("[data-testid='stTable']").filter(has_text="trained on synthetic").first.wait_for()

    def stakeholder_report() -> None:
        with tab.expect_download() as download:
            tab.get_by_role("button", name="Export stakeholder report (HTML)").click()
        download.value.path()  # the whole file has arrived

    def over_time() -> None:
        tab.get_by_role("button", name="Release step by step").click()
        # its chart, or an error in its place: a refusal is not the page's time, so it stops the benchmark
        tab.locator("[data-testid='stPlotlyChart'], [data-testid='stAlertContentError']").first.wait_for()
        refusal = tab.locator("[data-testid='stAlertContentError']")
        if refusal.count():
            raise RuntimeError(f"Over time refused instead of drawing its chart: {refusal.first.inner_text()}")

    tab.goto(url)
    wait_idle(tab)
    goto(tab, "Data")()
    wait_idle(tab)
    tab.get_by_text("Upload a CSV", exact=True).click()
    wait_idle(tab)
    out = {"upload": timed(upload, tab), "bounds": timed(bounds, tab)}
    goto(tab, "Synthesize")()
    wait_idle(tab)
    choose_mechanism(tab)
    out["run"] = timed(run, tab)
    out["compare"] = timed(compare, tab)
    if not release_mode:
        goto(tab, "Synthesize")()
        wait_idle(tab)
        out["compare again"] = timed(compare, tab)
        open_menu(tab, "TSTR", TARGET)
        out[f"compare, TSTR target {TARGET}"] = timed(tstr_target, tab)
        goto(tab, "Synthesize")()
        wait_idle(tab)
        out[f"stakeholder report, TSTR target {TARGET}"] = timed(stakeholder_report, tab)
        goto(tab, "Trade-off")()
        wait_idle(tab)
        out["sweep"] = timed(sweep, tab)
        goto(tab, "Over time")()
        wait_idle(tab)
        out["over time (defaults)"] = timed(over_time, tab)
    return out


def run_mode(csv: Path, repeats: int, *, release_mode: bool) -> dict[str, list[float]]:

    env = {"PRIVSYN_RELEASE_ONLY": "1", "PRIVSYN_BUDGET": "1000"} if release_mode else {}
    times: dict[str, list[float]] = {}
    with served(env) as url, sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, headless=True, args=LAUNCH_ARGS)
        for _ in range(repeats):
            context = browser.new_context(viewport={"width": 1400, "height": 1000})
            tab = context.new_page()
            tab.set_default_timeout(300_000)
            try:
                steps = journey(tab, url, csv, release_mode=release_mode)
            except Exception:
                tab.screenshot(path=str(ROOT / "test-output" / "bench_browser_failure.png"), full_page=True)
                print(tab.locator("[data-testid='stMain']").inner_text()[:3000], file=sys.stderr)
                raise
            for step, seconds in steps.items():
                times.setdefault(step, []).append(seconds)
            context.close()
        browser.close()
    return times


def numeric_codes(frame: pd.DataFrame) -> pd.DataFrame:
    """The table with each categorical column written as the integer codes of its sorted values."""
    out = frame.copy()
    for name in ("sector", "region", "member"):
        out[name] = pd.Categorical(out[name]).codes
    return out


def table_text(times: dict[tuple[str, str], list[float]], rows: int, repeats: int, loads: tuple[float, float]) -> str:
    """The generated table: every (mode, step)'s median and range, issue 38's target where one exists."""
    lines = [f"Chromium against `streamlit run app.py`, {rows:,} rows x 8 mixed columns, {MECHANISM}, {repeats} fresh "
             "sessions per mode; wall seconds from the click to an idle page (the module docstring of "
             "`benchmarks/bench_browser.py` says where each step starts and ends). 2 cores; 1-minute load average "
             f"{loads[0]:.2f} before, {loads[1]:.2f} after.", "",
             "| mode | step | median s | min-max s | target (issue 38) |", "| --- | --- | --- | --- | --- |"]
    for (mode, step), values in times.items():
        target = TARGETS.get(step) if mode == "teaching" else None
        lines.append(f"| {mode} | {step} | {statistics.median(values):.2f} | {min(values):.2f}-{max(values):.2f} | "
                     + (f"<= {target:g} s |" if target else "— |"))
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=10_000)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--table", nargs="?", type=Path, const=TABLE, default=None, metavar="PATH",
                        help=f"also write the table (a .md file; default {TABLE.relative_to(ROOT)})")
    args = parser.parse_args()
    if not Path(CHROMIUM).exists():
        raise SystemExit(f"Chromium not found at {CHROMIUM}: apt-get install chromium (or set CHROMIUM)")
    if args.table is not None and args.table.suffix != ".md":
        raise SystemExit(f"--table writes a markdown file: {args.table} does not end in .md")
    real = numeric_codes(mixed_pair(args.rows)[0])
    load_before = os.getloadavg()[0]
    times: dict[tuple[str, str], list[float]] = {}
    with tempfile.TemporaryDirectory() as folder:
        csv = Path(folder) / f"mixed_{args.rows}.csv"
        real.to_csv(csv, index=False)
        print(f"{args.rows:,} rows x {real.shape[1]} mixed columns, {MECHANISM}, {args.repeats} journeys per mode, "
              f"load {load_before:.2f}")
        print("| mode | step | median s | min-max s |\n| --- | --- | --- | --- |")
        for release_mode in (False, True):
            mode = "release" if release_mode else "teaching"
            for step, values in run_mode(csv, args.repeats, release_mode=release_mode).items():
                times[mode, step] = values
                print(f"| {mode} | {step} | {statistics.median(values):.2f} | {min(values):.2f}-{max(values):.2f} |")
    load_after = os.getloadavg()[0]
    print(f"load after: {load_after:.2f}")
    if args.table is not None:
        command = f"python -m benchmarks.bench_browser --rows {args.rows} --repeats {args.repeats} --table"
        text = table_text(times, args.rows, args.repeats, (load_before, load_after))
        print(f"wrote {write_table(args.table.stem, text, command, folder=args.table.parent)}")


if __name__ == "__main__":
    main()
