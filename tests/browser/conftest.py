"""Fixtures for the browser tests: a live ``streamlit run app.py`` and Debian's Chromium via Playwright.

The tests FAIL (never skip) when Chromium is missing: install it with ``apt-get install chromium``.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Generator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
CHROMIUM = os.environ.get("CHROMIUM", "/usr/bin/chromium")
LAUNCH_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
               "--disable-sync", "--no-first-run"]
SCREENSHOTS = ROOT / "test-output" / "screenshots"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _healthy(url: str) -> bool:
    try:
        with urllib.request.urlopen(f"{url}/_stcore/health", timeout=2) as response:
            return response.read().strip() == b"ok"
    except OSError:
        return False


@pytest.fixture(scope="session")
def chromium_path() -> str:
    if not Path(CHROMIUM).exists():
        pytest.fail(f"Chromium not found at {CHROMIUM}: the browser tests need it. Install it with "
                    "`apt-get install chromium` (or set CHROMIUM=/path/to/chromium).")
    return CHROMIUM


@pytest.fixture(scope="module")
def app_url():
    """Start the app on a free port (output to a temp file, never a pipe) and wait for /_stcore/health."""
    yield from _started({})


@pytest.fixture(scope="module")
def release_only_url():
    """The app as a release-only deployment (``PRIVSYN_RELEASE_ONLY=1``)."""
    yield from _started({"PRIVSYN_RELEASE_ONLY": "1", "PRIVSYN_BUDGET": "1000"})


class AppDidNotStart(RuntimeError):
    """``streamlit run app.py`` exited or did not answer its health check in time (the message holds its log)."""


def serve(env: dict) -> Generator[str, None, None]:
    """Start the app on a free port with its own ledger folder (never the repository's ``app-data/``), output to
    a temp file (never a pipe), and yield its URL once /_stcore/health answers; stop it when closed. Also used by
    ``benchmarks/bench_browser.py``."""
    port = _free_port()
    data_dir = tempfile.mkdtemp(prefix="privsyn-ledger-")
    with tempfile.TemporaryFile() as log:
        process = subprocess.Popen(
            [sys.executable, "-m", "streamlit", "run", "app.py", "--server.headless", "true", "--server.port",
             str(port), "--server.address", "127.0.0.1", "--browser.gatherUsageStats", "false",
             "--server.fileWatcherType", "none"], cwd=ROOT, stdout=log, stderr=subprocess.STDOUT,
            env={**os.environ, "PRIVSYN_DATA_DIR": data_dir, **env})
        url = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 90
        while not _healthy(url):
            if process.poll() is not None or time.monotonic() > deadline:
                process.kill()
                log.seek(0)
                raise AppDidNotStart(f"streamlit did not start on {url}:\n"
                                     f"{log.read().decode(errors='replace')[-3000:]}")
            time.sleep(0.3)
        try:
            yield url
        finally:
            process.terminate()
            try:
                process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                process.kill()
            shutil.rmtree(data_dir, ignore_errors=True)


def _started(env: dict) -> Generator[str, None, None]:
    try:
        url = next(server := serve(env))
    except AppDidNotStart as exc:
        pytest.fail(str(exc))
    yield url
    server.close()


@pytest.fixture()
def tab(chromium_path):
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=chromium_path, headless=True, args=LAUNCH_ARGS)
        context = browser.new_context(viewport={"width": 1400, "height": 1000})
        tab = context.new_page()
        tab.set_default_timeout(120_000)
        yield tab
        context.close()
        browser.close()


@pytest.fixture(scope="session")
def screenshots() -> Path:
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    return SCREENSHOTS
