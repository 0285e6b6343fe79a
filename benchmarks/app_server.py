"""A live ``streamlit run app.py`` for the browser tests and the browser benchmark, and Debian's Chromium.

Shared by ``tests/browser/conftest.py`` (its fixtures) and :mod:`benchmarks.bench_browser`; it lives here, not in
``tests/``, so that the benchmark imports it as ``benchmarks.app_server`` whatever else is installed under the
name ``tests``.
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

ROOT = Path(__file__).resolve().parents[1]
CHROMIUM = os.environ.get("CHROMIUM", "/usr/bin/chromium")
LAUNCH_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
               "--disable-sync", "--no-first-run"]


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


class AppDidNotStart(RuntimeError):
    """``streamlit run app.py`` exited or did not answer its health check in time (the message holds its log)."""


def serve(env: dict) -> Generator[str, None, None]:
    """Start the app on a free port with its own ledger folder (never the repository's ``app-data/``), output to
    a temp file (never a pipe), and yield its URL once /_stcore/health answers; stop it when closed."""
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
