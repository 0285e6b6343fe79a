"""Browser timing of the Synthesize page's epsilon redraw at 10^5 rows (issue 17, "app redraws").

Starts ``streamlit run app.py`` on a free localhost port (private ledger folder), opens Debian's Chromium
through Playwright, uploads ``--rows`` rows of two Gaussian blobs, estimates DP bounds, runs the page's default
mechanism once, turns on "Re-run automatically" and then moves the epsilon slider one step at a time
(1 -> 2 -> 5 -> 2 -> 1 ...).  A redraw is timed from the key press to the page showing the new epsilon in its
"epsilon spent" metric with the script idle again: the run of the mechanism plus everything the page does on a
rerun.  It also times plain reruns that change nothing (Streamlit's "r" shortcut): the floor of a redraw, and
what the page costs on a rerun that must not redo any work.

Usage::

    python -m benchmarks.bench_app_redraw [--rows 100000] [--repeats 6]
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
from playwright.sync_api import Page, sync_playwright

from benchmarks.load_test import CHROMIUM, REPO, free_port, wait_until_healthy
from privsyn_core.data.datasets import two_blobs

EPSILON_STEPS = ("ArrowRight", "ArrowRight", "ArrowLeft", "ArrowLeft")  # 1 -> 2 -> 5 -> 2 -> 1
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
    page.get_by_test_id("stSidebarNav").get_by_role("link", name="Synthesize", exact=True).click()
    idle(page)
    page.get_by_role("button", name="Run", exact=True).click()
    page.get_by_text("epsilon spent", exact=True).wait_for(timeout=120_000)
    idle(page)
    page.get_by_text("Re-run automatically when a setting changes", exact=True).click()  # off above 10^4 rows
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


def plain_rerun(page: Page) -> float:
    page.get_by_test_id("stMain").get_by_role("heading", name="Synthesize").click()  # focus off any input
    start = time.perf_counter()
    page.keyboard.press("r")
    page.wait_for_selector(f"{APP}:not([data-test-script-state='notRunning'])", timeout=5_000)
    idle(page, settle=0.0)
    return time.perf_counter() - start


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
            redraws = [redraw(page, EPSILON_STEPS[i % len(EPSILON_STEPS)]) for i in range(args.repeats)]
            reruns = [plain_rerun(page) for _ in range(args.repeats)]
            browser.close()
    finally:
        server.terminate()
        server.wait(timeout=20)
    print(f"rows={args.rows:,} repeats={args.repeats} (browser: Chromium; machine shared, load "
          f"{os.getloadavg()[0]:.1f})")
    print(f"epsilon redraw: median {statistics.median(redraws):.2f} s, min {min(redraws):.2f} s, "
          f"max {max(redraws):.2f} s")
    print(f"plain rerun (no setting changed): median {statistics.median(reruns):.2f} s, min {min(reruns):.2f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
