"""Load test: N concurrent browser sessions drive the Streamlit app on localhost for a bounded time.

Starts ``streamlit run app.py`` on a free localhost port, opens N Playwright contexts in one
headless Chromium (Debian's ``/usr/bin/chromium``; Playwright downloads nothing), and in every
session clicks Run once on the Synthesize page and then repeatedly changes the seed, which re-runs
the mechanism (teaching mode re-runs automatically for small tables after a first run).  Each
session loads for ``--duration`` seconds after it has opened the page.  It reports errors, p50/p95/max latency of a run
(seed change until the script is idle again) and the peak resident memory of the server
process.  Every loop is bounded by ``--duration``; every wait by a timeout.

Usage::

    python -m benchmarks.load_test --sessions 20 --duration 120 [--mechanism pmm]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import socket
import statistics
import subprocess
import sys
import threading
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

import psutil
from playwright.async_api import Error as PlaywrightError, Page, async_playwright

REPO = Path(__file__).resolve().parents[1]
CHROMIUM = "/usr/bin/chromium"
APP_STATE = "[data-testid='stApp']"
RUN_TIMEOUT_MS = 120_000
START_TIMEOUT_S = 90


@dataclass
class Stats:
    latencies: list[float] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    sessions_started: int = 0


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_server(port: int) -> subprocess.Popen:
    command = [sys.executable, "-m", "streamlit", "run", str(REPO / "app.py"), "--server.headless", "true",
               "--server.address", "127.0.0.1", "--server.port", str(port), "--browser.gatherUsageStats", "false",
               "--server.fileWatcherType", "none"]
    server = subprocess.Popen(command, cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    deadline = time.monotonic() + START_TIMEOUT_S
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/_stcore/health", timeout=2) as reply:
                if reply.read() == b"ok":
                    return server
        except OSError:
            time.sleep(0.5)
    server.kill()
    raise RuntimeError(f"streamlit did not answer on port {port} within {START_TIMEOUT_S} s")


class PeakMemory(threading.Thread):
    """Samples the server's resident memory (with its children) every ``interval`` seconds."""

    def __init__(self, pid: int, interval: float = 0.25) -> None:
        super().__init__(daemon=True)
        self.process, self.interval, self.peak, self.stopped = psutil.Process(pid), interval, 0, threading.Event()

    def run(self) -> None:
        while not self.stopped.wait(self.interval):
            try:
                family = [self.process, *self.process.children(recursive=True)]
                self.peak = max(self.peak, sum(p.memory_info().rss for p in family))
            except psutil.Error:
                return


async def wait_idle(page: Page) -> None:
    """Wait until the app's script has started (if it has not finished already) and is idle again."""
    with contextlib.suppress(PlaywrightError):  # the run may be quicker than the poll
        await page.wait_for_selector(f"{APP_STATE}:not([data-test-script-state='notRunning'])", timeout=1_500)
    await page.wait_for_selector(f"{APP_STATE}[data-test-script-state='notRunning']", timeout=RUN_TIMEOUT_MS)


async def open_synthesize(page: Page, url: str, mechanism: str | None) -> None:
    await page.goto(url, timeout=RUN_TIMEOUT_MS)
    await page.wait_for_selector(f"{APP_STATE}[data-test-connection-state='CONNECTED']", timeout=RUN_TIMEOUT_MS)
    await wait_idle(page)
    await page.get_by_role("link", name="Synthesize").click()
    await wait_idle(page)
    if mechanism:
        await page.get_by_label("Mechanism").click()
        await page.get_by_role("option", name=f"[{mechanism}]", exact=False).click()
        await wait_idle(page)
    # after a first run, setting changes re-run by themselves
    await page.get_by_role("button", name="Run", exact=True).click()
    await wait_idle(page)
    await page.get_by_text("epsilon spent", exact=True).first.wait_for(timeout=RUN_TIMEOUT_MS)


async def app_state(page: Page) -> str:
    """The app's connection and script state as the page shows them (for error reports)."""
    try:
        return await page.evaluate(
            "(() => { const a = document.querySelector(\"[data-testid='stApp']\");"
            " return a ? `connection=${a.dataset.testConnectionState} script=${a.dataset.testScriptState}`"
            " : 'no app element'; })()")
    except PlaywrightError as exc:
        return f"state unreadable: {str(exc).splitlines()[0]}"


async def session(browser, url: str, duration: float, mechanism: str | None, stats: Stats, index: int) -> None:
    context = await browser.new_context()
    page = await context.new_page()
    page.on("pageerror", lambda exc: stats.errors.append(f"session {index}: page error {exc}"))
    try:
        await open_synthesize(page, url, mechanism)
        stats.sessions_started += 1
        deadline = time.monotonic() + duration
        seed_box = page.get_by_label("Seed (same seed, same output)")
        seed = 1000 * index
        while time.monotonic() < deadline:
            seed += 1
            start = time.perf_counter()
            await seed_box.fill(str(seed))
            await seed_box.press("Enter")
            await wait_idle(page)
            stats.latencies.append(time.perf_counter() - start)
            if await page.locator("[data-testid='stException']").count():
                stats.errors.append(f"session {index}: exception shown at seed {seed}")
    except PlaywrightError as exc:
        stats.errors.append(f"session {index}: {str(exc).splitlines()[0]} ({await app_state(page)})")
    finally:
        await context.close()


async def drive(url: str, sessions: int, duration: float, mechanism: str | None) -> Stats:
    stats = Stats()
    async with async_playwright() as p:
        browser = await p.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox", "--disable-dev-shm-usage"])
        await asyncio.gather(*(session(browser, url, duration, mechanism, stats, i) for i in range(sessions)))
        await browser.close()
    return stats


def report(stats: Stats, sessions: int, duration: float, peak: int, wall: float) -> None:
    lat = sorted(stats.latencies)
    quantile = (lambda q: lat[min(len(lat) - 1, int(q * len(lat)))]) if lat else (lambda q: float("nan"))
    print(f"sessions={sessions} (started {stats.sessions_started}) duration={duration:.0f}s wall={wall:.0f}s")
    print(f"runs={len(lat)} errors={len(stats.errors)}")
    if lat:
        print(f"latency p50={statistics.median(lat):.2f}s p95={quantile(0.95):.2f}s max={lat[-1]:.2f}s")
    print(f"server peak RSS={peak / 2**20:.0f} MB")
    for error in stats.errors[:10]:
        print(f"  error: {error}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sessions", type=int, default=20)
    parser.add_argument("--duration", type=float, default=120.0, help="seconds of load per session, after it opened")
    parser.add_argument("--mechanism", help="registry key to select on the Synthesize page (default: the page's)")
    args = parser.parse_args(argv)
    if not 1 <= args.sessions <= 100 or not 1 <= args.duration <= 3600:
        parser.error("use 1..100 sessions and 1..3600 seconds")
    port = free_port()
    server = start_server(port)
    memory = PeakMemory(server.pid)
    memory.start()
    start = time.monotonic()
    try:
        stats = asyncio.run(drive(f"http://127.0.0.1:{port}/", args.sessions, args.duration, args.mechanism))
    finally:
        memory.stopped.set()
        memory.join()
        server.terminate()
        try:
            server.wait(timeout=20)
        except subprocess.TimeoutExpired:
            server.kill()
    report(stats, args.sessions, args.duration, memory.peak, time.monotonic() - start)
    return 1 if stats.errors else 0


if __name__ == "__main__":
    sys.exit(main())
