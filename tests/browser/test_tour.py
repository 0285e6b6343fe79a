"""The README's two-minute tours, walked in Chromium: a teacher on a bundled sample and a stakeholder on an uploaded
table.  Each step is checked (no error on the page) and photographed; the README embeds the photographs from
``docs/tour/`` (``PRIVSYN_TOUR_DIR=docs/tour python -m pytest tests/browser/test_tour.py`` writes them there; by
default they go to ``test-output/tour/``).
"""

from __future__ import annotations

import os
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from test_app_browser import assert_no_errors, choose, download, goto, wait_idle

pytestmark = pytest.mark.browser

ROOT = Path(__file__).resolve().parents[2]
TOUR = Path(os.environ.get("PRIVSYN_TOUR_DIR") or ROOT / "test-output" / "tour")


def snap(tab, name: str) -> None:
    """The visible window (1280 x 800) as a JPEG: what a person sees at that step."""
    TOUR.mkdir(parents=True, exist_ok=True)
    tab.wait_for_timeout(800)  # Plotly's first draw
    tab.screenshot(path=str(TOUR / f"{name}.jpg"), type="jpeg", quality=70)
    print(f"[tour] {TOUR / name}.jpg")


def test_the_teachers_tour(tab, app_url):
    tab.set_viewport_size({"width": 1280, "height": 800})
    start = time.perf_counter()
    tab.goto(app_url)
    wait_idle(tab)
    snap(tab, "teacher_1_data")
    goto(tab, "Synthesize")
    tab.get_by_role("button", name="Run", exact=True).click()
    tab.get_by_text("Done in").wait_for()
    wait_idle(tab)
    assert_no_errors(tab, "Synthesize")
    snap(tab, "teacher_2_synthesize")
    goto(tab, "Partitions")
    assert_no_errors(tab, "Partitions")
    snap(tab, "teacher_3_partitions")
    goto(tab, "Learn")
    tab.get_by_role("heading", name="Be the attacker").scroll_into_view_if_needed()
    tab.get_by_role("button", name="Play: run it on both tables").click()
    tab.get_by_text("your success").wait_for()
    wait_idle(tab)
    tab.get_by_text("your success").scroll_into_view_if_needed()
    assert_no_errors(tab, "Learn: the attacker game")
    snap(tab, "teacher_4_attacker")
    print(f"\n[tour] teacher's tour walked in {time.perf_counter() - start:.1f} s")


def _table(folder: Path) -> Path:
    rng = np.random.default_rng(0)
    n = 2000
    age = rng.integers(18, 90, n)
    hours = np.clip(20 + 0.4 * (age - 18) + rng.normal(0, 5, n), 0, 80).round(1)
    table = pd.DataFrame({"age": age, "hours": hours, "income": np.clip(1500 * hours + rng.normal(0, 8000, n), 0,
                                                                        None).round(0),
                          "visits": rng.poisson(3, n)})
    path = folder / "clinic.csv"
    table.to_csv(path, index=False)
    return path


def test_the_stakeholders_tour(tab, release_only_url, tmp_path):
    """A release-only server with an operator's budget: upload, DP bounds, one release, its report."""
    tab.set_viewport_size({"width": 1280, "height": 800})
    start = time.perf_counter()
    tab.goto(release_only_url)
    wait_idle(tab)
    tab.get_by_text("Upload a CSV", exact=True).click()
    wait_idle(tab)
    tab.locator("[data-testid='stFileUploaderDropzoneInput']").set_input_files(str(_table(tmp_path)))
    tab.get_by_text("Loaded clinic.csv").wait_for()
    wait_idle(tab)
    tab.get_by_role("button", name="Estimate DP bounds").click()
    tab.get_by_text("every domain is public").wait_for()
    wait_idle(tab)
    snap(tab, "stakeholder_1_domain")
    goto(tab, "Synthesize")
    choose(tab, "Mechanism", "marginal_tree")
    tab.get_by_role("button", name="Run", exact=True).click()
    tab.get_by_text("epsilon spent").first.wait_for()
    wait_idle(tab)
    assert_no_errors(tab, "Synthesize (release mode)")
    snap(tab, "stakeholder_2_release")
    goto(tab, "Compare")
    assert_no_errors(tab, "Compare (release mode)")
    snap(tab, "stakeholder_3_compare")
    goto(tab, "Synthesize")
    html = download(tab, "Export stakeholder report (HTML)")
    report = tmp_path / "report.html"
    report.write_text(html)
    tab.goto(report.as_uri())
    snap(tab, "stakeholder_4_report")
    assert "What was released" in html and "Contains real data" not in html, "a release-mode report"
    print(f"\n[tour] stakeholder's tour walked in {time.perf_counter() - start:.1f} s")
