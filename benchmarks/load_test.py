"""Load test: N concurrent sessions drive the Streamlit app on localhost for a bounded time.

Starts ``streamlit run app.py`` on a free localhost port (with a private ledger folder) and in every session
clicks Run once on the Synthesize page and then repeatedly changes the seed, which re-runs the mechanism
(teaching mode re-runs automatically for small tables after a first run), ``--think`` seconds apart (default 0:
a closed loop, the next change as soon as the last run finished).  Each session loads for ``--duration``
seconds after it has opened the page.  Two kinds of session (``--client``):

* ``browser`` (the default): N Playwright contexts in one headless Chromium (Debian's ``/usr/bin/chromium``;
  Playwright downloads nothing) that type the seed and wait until the server finished and the page is idle.
  The browsers run on the same cores as the server, so a latency includes rendering and waiting for a core.
* ``wire``: N websockets speaking Streamlit's own protocol (:mod:`benchmarks.load_wire`), no browser: a run is
  timed from its ``rerun_script`` request to the server's ``script_finished``, with almost no client CPU.
  ``--overlap SECONDS`` sends the next seed change that long after the last even when its run has not ended
  (a user typing faster than the app runs: with ``runner.fastReruns`` the server stops the run and starts
  another, the path on which sessions used to hang); the report counts the requests overtaken so.

Every session reads the server's messages off its websocket (Streamlit's ``ForwardMsg`` protobufs), so
the report tells two failures apart:

* **stuck**: the server started a run (``new_session``) and sent no ``script_finished`` within
  :data:`STUCK_S` seconds (nor started another run).  The server's thread stacks are then written with
  ``faulthandler`` (the file is named in the report) and the session stops.
* **errors**: everything else that went wrong (an exception on the page, a locator or page timeout, a page
  that still shows "running" although the server finished); each failed browser session leaves a screenshot.

(In wire mode a rerun request that starts no run within :data:`STUCK_S` seconds is stuck too.)  It reports
runs, errors, stuck sessions, p50/p95/max latency of a run (seed change until the server finished the run and,
in a browser, the page is idle), the peak resident memory of the server process, the server's CPU seconds per
run, this process's CPU seconds and the 1-minute load average before, at most and after.  Every loop is
bounded by ``--duration``; every wait by a timeout.  Locators are exact (a label also matched "... the
mechanism's default" before).

Usage::

    python -m benchmarks.load_test --sessions 20 --duration 120 [--client wire [--overlap 0.3]] [--think 1.0]
        [--mechanism pmm]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import re
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

import psutil
from playwright.async_api import Error as PlaywrightError, Page, WebSocket, async_playwright
from streamlit.proto.ForwardMsg_pb2 import ForwardMsg

from benchmarks import load_wire

REPO = Path(__file__).resolve().parents[1]
CHROMIUM = "/usr/bin/chromium"
APP_STATE = "[data-testid='stApp']"
#: A run without ``script_finished`` this many seconds after its ``new_session`` is stuck.
STUCK_S = 30.0
PAGE_TIMEOUT_MS = 120_000
START_TIMEOUT_S = 90
#: Starts the server with ``faulthandler`` on SIGUSR1 (all threads' stacks into the file given first).
BOOT = ("import faulthandler, signal, sys; faulthandler.register(signal.SIGUSR1, file=open(sys.argv.pop(1), 'w'), "
        "all_threads=True); from streamlit.web.cli import main; sys.argv[0] = 'streamlit'; "
        "sys.exit(main(prog_name='streamlit'))")


class Stuck(Exception):
    """The server started a run and did not finish it within :data:`STUCK_S` seconds."""


@dataclass
class Stats:
    latencies: list[float] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    stuck: list[str] = field(default_factory=list)
    sessions_started: int = 0
    dumps: list[str] = field(default_factory=list)
    #: wire mode: the mechanism's own seconds in each seed-change run that ran it (its "Done in X s" status)
    mechanism: list[float] = field(default_factory=list)
    #: wire mode with an overlap: seed changes sent before the run of the last one had ended
    overtaken: int = 0

    def record(self, seconds: float | None, mechanism_s: float | None) -> None:
        if seconds is None:
            self.overtaken += 1
            return
        self.latencies.append(seconds)
        if mechanism_s is not None:
            self.mechanism.append(mechanism_s)


@dataclass
class Wire:
    """What one session's server said on its websocket: runs started and finished, and when."""

    started: int = 0
    finished: int = 0
    deltas_since_start: int = 0
    last_start: float = 0.0
    last_finish: float = 0.0
    last_message: float = 0.0

    def on_frame(self, payload: bytes | str) -> None:
        if isinstance(payload, str):
            return
        message = ForwardMsg()
        try:
            message.ParseFromString(payload)
        except Exception:  # a frame that is not a ForwardMsg says nothing about runs
            return
        kind = message.WhichOneof("type")
        now = self.last_message = time.monotonic()
        if kind == "new_session":
            self.started, self.last_start, self.deltas_since_start = self.started + 1, now, 0
        elif kind == "script_finished":
            self.finished, self.last_finish = self.finished + 1, now
        elif kind == "delta":
            self.deltas_since_start += 1

    @property
    def running(self) -> bool:
        """The last run the server started has not finished (a run superseded by a new one sends no finish)."""
        return self.started > 0 and self.last_start > self.last_finish


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_server(port: int, dump_file: Path, ledger_dir: str) -> subprocess.Popen:
    command = [sys.executable, "-c", BOOT, str(dump_file), "run", str(REPO / "app.py"), "--server.headless", "true",
               "--server.address", "127.0.0.1", "--server.port", str(port), "--browser.gatherUsageStats", "false",
               "--server.fileWatcherType", "none"]
    server = subprocess.Popen(command, cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                              env={**os.environ, "PRIVSYN_DATA_DIR": ledger_dir})
    return wait_until_healthy(server, port)


def wait_until_healthy(server: subprocess.Popen, port: int, timeout: float = START_TIMEOUT_S) -> subprocess.Popen:
    """``server`` once Streamlit's health endpoint on ``port`` answers ``ok``; killed after ``timeout`` s."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/_stcore/health", timeout=2) as reply:
                if reply.read() == b"ok":
                    return server
        except OSError:
            time.sleep(0.5)
    server.kill()
    raise RuntimeError(f"streamlit did not answer on port {port} within {timeout} s")


class PeakMemory(threading.Thread):
    """Samples the server's resident memory (with its children) every ``interval`` seconds, the machine's
    1-minute load average and the server's CPU time (user + system, with its children)."""

    def __init__(self, pid: int, interval: float = 0.25) -> None:
        super().__init__(daemon=True)
        self.process, self.interval, self.peak, self.stopped = psutil.Process(pid), interval, 0, threading.Event()
        self.load_start = self.load_max = os.getloadavg()[0]
        self.cpu = 0.0

    def cpu_seconds(self) -> float:
        """The server's CPU seconds so far (its children's included); the last value read if it has exited."""
        try:
            times = self.process.cpu_times()
            self.cpu = times.user + times.system + times.children_user + times.children_system
        except psutil.Error:
            pass
        return self.cpu

    def run(self) -> None:
        while not self.stopped.wait(self.interval):
            self.load_max = max(self.load_max, os.getloadavg()[0])
            try:
                family = [self.process, *self.process.children(recursive=True)]
                self.peak = max(self.peak, sum(p.memory_info().rss for p in family))
                self.cpu_seconds()
            except psutil.Error:
                return


async def wait_run(page: Page, wire: Wire, before: int) -> None:
    """Wait until the server has finished a run started after ``before`` runs, and the page shows it idle.

    Raises :class:`Stuck` when the server's last run has gone :data:`STUCK_S` seconds without a finish.
    """
    deadline = time.monotonic() + PAGE_TIMEOUT_MS / 1000
    while time.monotonic() < deadline:
        if wire.started > before and not wire.running:
            break
        if wire.running and time.monotonic() - wire.last_start > STUCK_S:
            raise Stuck(f"no script_finished {time.monotonic() - wire.last_start:.0f} s after new_session "
                        f"({wire.deltas_since_start} deltas since; last message "
                        f"{time.monotonic() - wire.last_message:.0f} s ago)")
        await asyncio.sleep(0.05)
    else:
        raise TimeoutError(f"no run started within {PAGE_TIMEOUT_MS / 1000:.0f} s")
    await page.wait_for_selector(f"{APP_STATE}[data-test-script-state='notRunning']", timeout=PAGE_TIMEOUT_MS)


async def open_synthesize(page: Page, url: str, mechanism: str | None, wire: Wire, step: list[str]) -> None:
    """Open the app, go to the Synthesize page (choose ``mechanism``) and click Run; ``step`` names the last step."""
    step[0] = "open the app"
    before = wire.started
    await page.goto(url, timeout=PAGE_TIMEOUT_MS)
    await page.wait_for_selector(f"{APP_STATE}[data-test-connection-state='CONNECTED']", timeout=PAGE_TIMEOUT_MS)
    await wait_run(page, wire, before)
    step[0] = "go to Synthesize"
    before = wire.started
    await page.get_by_test_id("stSidebarNav").get_by_role("link", name="Synthesize", exact=True).click()
    await wait_run(page, wire, before)
    if mechanism:
        step[0] = f"choose {mechanism}"
        before = wire.started
        box = page.get_by_test_id("stSelectbox").filter(has=page.get_by_text("Mechanism", exact=True))
        await box.click()
        await page.get_by_role("option", name=re.compile(rf"\[{re.escape(mechanism)}\]$")).click()
        await wait_run(page, wire, before)
    # after a first run, setting changes re-run by themselves
    step[0] = "click Run"
    before = wire.started
    await page.get_by_role("button", name="Run", exact=True).click()
    await wait_run(page, wire, before)
    await page.get_by_text("epsilon spent", exact=True).first.wait_for(timeout=PAGE_TIMEOUT_MS)


async def app_state(page: Page) -> str:
    """The app's connection and script state as the page shows them (for error reports)."""
    try:
        return await page.evaluate(
            "(() => { const a = document.querySelector(\"[data-testid='stApp']\");"
            " return a ? `connection=${a.dataset.testConnectionState} script=${a.dataset.testScriptState}`"
            " : 'no app element'; })()")
    except PlaywrightError as exc:
        return f"state unreadable: {str(exc).splitlines()[0]}"


def dump_threads(pid: int, dump_file: Path, stats: Stats) -> None:
    """Ask the server (once) to write every thread's stack to ``dump_file``."""
    if not stats.dumps:
        os.kill(pid, signal.SIGUSR1)
        stats.dumps.append(str(dump_file))


async def session(browser, url: str, duration: float, think: float, mechanism: str | None, stats: Stats,
                  index: int, server_pid: int, dump_file: Path, shots: Path | None) -> None:
    context = await browser.new_context()
    page = await context.new_page()
    page.set_default_timeout(PAGE_TIMEOUT_MS)  # 20 pages on 2 shared cores can take longer than 30 s to act
    wire, step = Wire(), ["start"]

    def watch(ws: WebSocket) -> None:
        ws.on("framereceived", wire.on_frame)

    page.on("websocket", watch)
    page.on("pageerror", lambda exc: stats.errors.append(f"session {index}: page error {exc}"))
    try:
        await open_synthesize(page, url, mechanism, wire, step)
        stats.sessions_started += 1
        step[0] = "change the seed"
        deadline = time.monotonic() + duration
        seed_box = page.get_by_label("Seed (same seed, same output)", exact=True)
        seed = 1000 * index
        while time.monotonic() < deadline:
            if think:
                await asyncio.sleep(think)
            seed += 1
            start = time.perf_counter()
            before = wire.started
            await seed_box.fill(str(seed))
            await seed_box.press("Enter")
            await wait_run(page, wire, before)
            stats.latencies.append(time.perf_counter() - start)
            if await page.locator("[data-testid='stException']").count():
                stats.errors.append(f"session {index}: exception shown at seed {seed}")
    except Stuck as exc:
        stats.stuck.append(f"session {index} at '{step[0]}': {exc}")
        dump_threads(server_pid, dump_file, stats)
    except (PlaywrightError, TimeoutError) as exc:
        state = await app_state(page)
        with contextlib.suppress(PlaywrightError):
            shot = (shots or dump_file.parent) / f"session{index}.png"
            await page.screenshot(path=str(shot), full_page=True)
            state += f"; screenshot {shot}"
        stats.errors.append(f"session {index} at '{step[0]}': {str(exc).splitlines()[0]} ({state}; server running="
                            f"{wire.running}, runs started {wire.started}, finished {wire.finished})")
    finally:
        await context.close()


async def drive(url: str, sessions: int, duration: float, think: float, mechanism: str | None, server_pid: int,
                dump_file: Path, shots: Path | None = None) -> Stats:
    stats = Stats()
    async with async_playwright() as p:
        browser = await p.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox", "--disable-dev-shm-usage"])
        await asyncio.gather(*(session(browser, url, duration, think, mechanism, stats, i, server_pid, dump_file,
                                       shots) for i in range(sessions)))
        await browser.close()
    return stats


async def wire_session(url: str, duration: float, think: float, mechanism: str | None, stats: Stats, index: int,
                       server_pid: int, dump_file: Path, overlap: float | None = None) -> None:
    """One :mod:`benchmarks.load_wire` session; its failure goes to ``stats`` like a browser session's."""
    step = ["start"]
    started = [False]

    def record(seconds: float | None, mechanism_s: float | None) -> None:
        if not started[0]:
            started[0] = True
            stats.sessions_started += 1
        stats.record(seconds, mechanism_s)

    try:
        await load_wire.session(url, duration, think, mechanism, index, stuck_s=STUCK_S,
                                timeout_s=PAGE_TIMEOUT_MS / 1000, record=record, step=step, overlap=overlap)
    except load_wire.Stuck as exc:
        stats.stuck.append(f"session {index} at '{step[0]}': {exc}")
        dump_threads(server_pid, dump_file, stats)
    except (load_wire.Failed, OSError, TimeoutError) as exc:
        stats.errors.append(f"session {index} at '{step[0]}': {exc}")


async def drive_wire(url: str, sessions: int, duration: float, think: float, mechanism: str | None,
                     server_pid: int, dump_file: Path, overlap: float | None = None) -> Stats:
    stats = Stats()
    await asyncio.gather(*(wire_session(url, duration, think, mechanism, stats, i, server_pid, dump_file, overlap)
                           for i in range(sessions)))
    return stats


@dataclass
class Run:
    """How a load run was made and what the machine did meanwhile (for the report)."""

    client: str
    sessions: int
    duration: float
    think: float
    wall: float
    peak: int
    server_cpu: float
    client_cpu: float
    load: tuple[float, float, float]
    overlap: float | None = None


def report(stats: Stats, run: Run) -> None:
    lat = sorted(stats.latencies)
    quantile = (lambda q: lat[min(len(lat) - 1, int(q * len(lat)))]) if lat else (lambda q: float("nan"))
    print(f"client={run.client} sessions={run.sessions} (started {stats.sessions_started}) "
          f"duration={run.duration:.0f}s think={run.think:g}s wall={run.wall:.0f}s"
          + (f" overlap={run.overlap:g}s" if run.overlap is not None else ""))
    print(f"runs={len(lat)} errors={len(stats.errors)} stuck={len(stats.stuck)}"
          + (f" (the mechanism ran in {len(stats.mechanism)})" if run.client == "wire" else "")
          + (f"; {stats.overtaken} seed changes overtaken by the next before their run ended"
             if run.overlap is not None else ""))
    if lat:
        print(f"latency p50={statistics.median(lat):.2f}s p95={quantile(0.95):.2f}s max={lat[-1]:.2f}s")
    if stats.mechanism:
        print(f"the mechanism's own time in a run (its status, wall clock of the script thread) "
              f"p50={statistics.median(stats.mechanism):.3f}s max={max(stats.mechanism):.2f}s")
    print(f"server peak RSS={run.peak / 2**20:.0f} MB, server CPU={run.server_cpu:.0f}s"
          + (f" ({run.server_cpu / len(lat):.2f}s per run)" if lat else "")
          + f", load-test process CPU={run.client_cpu:.0f}s")
    print("load average (1 min) start/max/end=" + "/".join(f"{x:.1f}" for x in run.load))
    for line in stats.stuck[:10]:
        print(f"  stuck: {line}")
    for error in stats.errors[:10]:
        print(f"  error: {error}")
    for dump in stats.dumps:
        print(f"  server thread stacks at the first stuck session: {dump}")


def measure(client: str, sessions: int, duration: float, think: float = 0.0, mechanism: str | None = None,
            shots: Path | None = None, overlap: float | None = None) -> tuple[Stats, Run]:
    """Start a server, load it with ``sessions`` sessions of kind ``client`` ("browser" or "wire"), stop it.

    Raises ``RuntimeError`` when the server does not answer within :data:`START_TIMEOUT_S` seconds.
    """
    port = free_port()
    work = Path(tempfile.mkdtemp(prefix="privsyn-load-"))
    dump_file = work / "server-threads.txt"
    server = start_server(port, dump_file, str(work / "ledger"))
    memory = PeakMemory(server.pid)
    cpu_before, client_before = memory.cpu_seconds(), time.process_time()
    memory.start()
    start = time.monotonic()
    try:
        if client == "wire":
            stats = asyncio.run(drive_wire(f"ws://127.0.0.1:{port}/_stcore/stream", sessions, duration,
                                           think, mechanism, server.pid, dump_file, overlap))
        else:
            stats = asyncio.run(drive(f"http://127.0.0.1:{port}/", sessions, duration, think,
                                      mechanism, server.pid, dump_file, shots))
        if stats.dumps:
            time.sleep(2)  # let faulthandler finish writing
        server_cpu = memory.cpu_seconds() - cpu_before
    finally:
        memory.stopped.set()
        memory.join()
        server.terminate()
        try:
            server.wait(timeout=20)
        except subprocess.TimeoutExpired:
            server.kill()
    return stats, Run(client, sessions, duration, think, time.monotonic() - start, memory.peak, server_cpu,
                      time.process_time() - client_before, (memory.load_start, memory.load_max, os.getloadavg()[0]),
                      overlap)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sessions", type=int, default=20)
    parser.add_argument("--duration", type=float, default=120.0, help="seconds of load per session, after it opened")
    parser.add_argument("--client", choices=("browser", "wire"), default="browser",
                        help="browser: Playwright pages in headless Chromium; wire: Streamlit's websocket protocol")
    parser.add_argument("--think", type=float, default=0.0,
                        help="seconds a session waits before each seed change (default 0: closed loop)")
    parser.add_argument("--overlap", type=float,
                        help="wire only: send the next seed change this many seconds after the last even if its run "
                             "has not ended (default: wait for it)")
    parser.add_argument("--mechanism", help="registry key to select on the Synthesize page (default: the page's)")
    parser.add_argument("--screenshots", type=Path,
                        help="folder for a screenshot of every session that failed (default: the run's temp folder)")
    args = parser.parse_args(argv)
    if not 1 <= args.sessions <= 100 or not 1 <= args.duration <= 3600 or not 0 <= args.think <= 60:
        parser.error("use 1..100 sessions, 1..3600 seconds and 0..60 seconds of think time")
    if args.overlap is not None and (args.client != "wire" or not 0.05 <= args.overlap <= 60):
        parser.error("--overlap takes 0.05..60 seconds and only --client wire")
    stats, run = measure(args.client, args.sessions, args.duration, args.think, args.mechanism, args.screenshots,
                         args.overlap)
    report(stats, run)
    return 1 if stats.errors or stats.stuck else 0

if __name__ == "__main__":
    sys.exit(main())
