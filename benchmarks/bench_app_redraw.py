"""Browser timing of the Synthesize page's epsilon redraw at 10^5 rows (issue 17, "app redraws").

Starts ``streamlit run app.py`` on a free localhost port (private ledger folder), opens Debian's Chromium
through Playwright, uploads ``--rows`` rows of two Gaussian blobs, estimates DP bounds, runs the page's default
mechanism once, turns on "Re-run automatically" and then moves the epsilon slider one step at a time, up
from 1 to 100 (2, 5, 10, 20, 50, 100: each a new run of the mechanism) and back down (runs made before, which
the app takes from its cache); the two kinds are reported apart.  A redraw is timed from the key press to the
page showing the new epsilon in its "epsilon spent" metric with the script idle again: the run of the mechanism
plus everything the page does on a rerun.  It also times plain reruns that change nothing (Streamlit's "r"
shortcut): the floor of a redraw, and what the page costs on a rerun that must not redo any work.

Then, in a second tab on the default bundled sample (2,000 rows, PMM, re-run automatically), it steps the
seed up ``--repeats`` times and reports the server's CPU time per seed-change rerun (``psutil`` CPU times of
the server process, user + system, over the steps, divided by their number).  Under concurrent sessions that
CPU decides latency (closed loop on 2 cores: p50 ~ sessions x CPU per rerun / 2).

Usage::

    python -m benchmarks.bench_app_redraw [--rows 100000] [--repeats 8]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pandas as pd
import psutil
from playwright.sync_api import Page, sync_playwright

from benchmarks.load_test import CHROMIUM, REPO, free_port, wait_until_healthy
from privsyn_core.data.datasets import two_blobs

#: Steps of the epsilon slider from 1: up to 100 (each a new run), then down and up again (runs made before).
EPSILON_STEPS = ("ArrowRight",) * 6 + ("ArrowLeft",) * 6
APP = "[data-testid='stApp']"


def serve(port: int, work: Path) -> subprocess.Popen:
    command = [sys.executable, "-m", "streamlit", "run", str(REPO / "app.py"), "--server.headless", "true",
               "--server.address", "127.0.0.1", "--server.port", str(port), "--browser.gatherUsageStats", "false",
               "--server.fileWatcherType", "none"]
    server = subprocess.Popen(command, cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                              env={**os.environ, "PRIVSYN_DATA_DIR": str(work / "ledger")})
    return wait_until_healthy(server, port, timeout=90)


def idle(page: Page, settle: float = 0.3) -> None:
    time.sleep(settle)
    page.wait_for_selector(f"{APP}[data-test-script-state='notRunning']", timeout=120_000)


def prepare(page: Page, url: str, csv: Path) -> None:
    page.goto(url)
    page.wait_for_selector(f"{APP}[data-test-connection-state='CONNECTED']", timeout=120_000)
    idle(page)
    page.get_by_text("Upload a CSV", exact=True).click()
    idle(page)
    page.locator("[data-testid='stFileUploaderDropzoneInput']").set_input_files(str(csv))
    page.get_by_text(f"Loaded {csv.name}").wait_for(timeout=120_000)
    idle(page)
    page.get_by_role("button", name="Estimate DP bounds", exact=True).click()
    page.get_by_text("every domain is public").wait_for(timeout=120_000)
    idle(page)
    run_on_synthesize(page)
    page.get_by_text("Re-run automatically when a setting changes", exact=True).click()  # off above 10^4 rows
    idle(page)


def run_on_synthesize(page: Page) -> None:
    """Go to the Synthesize page, click Run and wait for the run's result and an idle page."""
    page.get_by_test_id("stSidebarNav").get_by_role("link", name="Synthesize", exact=True).click()
    idle(page)
    page.get_by_role("button", name="Run", exact=True).click()
    page.get_by_text("epsilon spent", exact=True).wait_for(timeout=120_000)
    idle(page)


def shown_epsilon(page: Page) -> str:
    return page.get_by_test_id("stMain").get_by_test_id("stMetricValue").first.inner_text().strip()


def redraw(page: Page, key: str) -> float:
    slider = page.get_by_test_id("stMain").get_by_role("slider", name="epsilon (privacy budget, log scale)")
    slider.focus()
    before = shown_epsilon(page)
    start = time.perf_counter()
    slider.press(key)
    page.wait_for_function("(old) => { const m = document.querySelector(\"[data-testid='stMain'] "
                           "[data-testid='stMetricValue']\"); return m && m.innerText.trim() !== old; }",
                           arg=before, timeout=120_000)
    idle(page, settle=0.0)
    return time.perf_counter() - start


def watch_run(page: Page) -> None:
    """Note when the script starts running (a fast rerun can start and finish between two polls)."""
    page.evaluate("""() => { window.__ran = false; const app = document.querySelector("[data-testid='stApp']");
        if (window.__watch) window.__watch.disconnect();
        window.__watch = new MutationObserver(() => {
            if (app.getAttribute('data-test-script-state') !== 'notRunning') window.__ran = true; });
        window.__watch.observe(app, {attributes: true, attributeFilter: ['data-test-script-state']}); }""")


def ran(page: Page) -> None:
    """Wait for the run noted by :func:`watch_run` to end."""
    page.wait_for_function("() => window.__ran && document.querySelector(\"[data-testid='stApp']\")"
                           ".getAttribute('data-test-script-state') === 'notRunning'", timeout=120_000)


def plain_rerun(page: Page) -> float:
    page.get_by_test_id("stMain").get_by_role("heading", name="Synthesize").click()  # focus off any input
    watch_run(page)
    start = time.perf_counter()
    page.keyboard.press("r")
    ran(page)
    return time.perf_counter() - start


def seed_cpu(page: Page, url: str, server: psutil.Process, steps: int) -> tuple[float, float]:
    """Server CPU seconds and wall seconds per seed-change rerun on the default sample (PMM, live re-runs)."""
    page.goto(url)
    page.wait_for_selector(f"{APP}[data-test-connection-state='CONNECTED']", timeout=120_000)
    idle(page)
    run_on_synthesize(page)
    step_up = page.get_by_test_id("stMain").get_by_test_id("stNumberInput").filter(
        has_text="Seed (same seed").get_by_test_id("stNumberInputStepUp")
    walls, cpu = [], 0.0
    for _ in range(steps):
        watch_run(page)
        before, start = server.cpu_times(), time.perf_counter()
        step_up.click()
        ran(page)
        walls.append(time.perf_counter() - start)
        after = server.cpu_times()
        cpu += (after.user - before.user) + (after.system - before.system)
    return cpu / steps, statistics.median(walls)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=100_000)
    parser.add_argument("--repeats", type=int, default=8, help="epsilon steps timed (and as many plain reruns)")
    args = parser.parse_args(argv)
    work = Path(tempfile.mkdtemp(prefix="privsyn-redraw-"))
    csv = work / f"blobs_{args.rows}.csv"
    pd.DataFrame(two_blobs(args.rows, 2, rng=0), columns=["x", "y"]).to_csv(csv, index=False)
    port = free_port()
    server = serve(port, work)
    try:
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox", "--disable-dev-shm-usage"])
            page = browser.new_page(viewport={"width": 1400, "height": 1000})
            prepare(page, f"http://127.0.0.1:{port}/", csv)
            steps = [EPSILON_STEPS[i % len(EPSILON_STEPS)] for i in range(max(args.repeats, 7))]
            redraws = [redraw(page, key) for key in steps]
            print(f"rows={args.rows:,} repeats={args.repeats} (browser: Chromium; machine shared, load "
                  f"{os.getloadavg()[0]:.1f})")
            for kind, times in (("new run", redraws[:6]), ("cached run", redraws[6:])):
                print(f"epsilon redraw, {kind}: median {statistics.median(times):.2f} s, min {min(times):.2f} s, "
                      f"max {max(times):.2f} s (n={len(times)})", flush=True)
            reruns = [plain_rerun(page) for _ in range(args.repeats)]
            print(f"plain rerun (no setting changed): median {statistics.median(reruns):.2f} s, "
                  f"min {min(reruns):.2f} s", flush=True)
            page.close()
            cpu, wall = seed_cpu(browser.new_page(viewport={"width": 1400, "height": 1000}),
                                 f"http://127.0.0.1:{port}/", psutil.Process(server.pid), args.repeats)
            print(f"seed change on the default sample (2,000 rows, PMM): server CPU {cpu * 1000:.0f} ms per rerun, "
                  f"browser wall median {wall:.2f} s")
            browser.close()
    finally:
        server.terminate()
        server.wait(timeout=20)
    return 0


if __name__ == "__main__":
    sys.exit(main())
