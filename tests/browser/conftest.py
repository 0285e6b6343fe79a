"""Fixtures for the browser tests: a live ``streamlit run app.py`` and Debian's Chromium via Playwright.

The tests FAIL (never skip) when Chromium is missing: install it with ``apt-get install chromium``.  The app is
started by :func:`benchmarks.app_server.serve`, as the browser benchmark starts it.
"""

from __future__ import annotations

from collections.abc import Generator
from pathlib import Path

import pytest

from benchmarks.app_server import CHROMIUM, LAUNCH_ARGS, ROOT, AppDidNotStart, serve

SCREENSHOTS = ROOT / "test-output" / "screenshots"


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
