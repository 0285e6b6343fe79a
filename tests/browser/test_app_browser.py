"""End-to-end: upload a CSV, estimate DP bounds, run a mechanism, visit every page in Chromium.

Also measures the time from clicking Run to the Compare page showing its metric table
(printed; the figures are reported, never asserted as a speed test).
"""

from __future__ import annotations

import json
import re
import time
from pathlib import Path

import pandas as pd
import pytest

import privsyn_core as ps
from privsyn_core.data.datasets import two_blobs

pytestmark = pytest.mark.browser

PAGES = ["Data", "Synthesize", "Partitions", "TSP folding", "Compare", "Trade-off", "Learn"]
MECHANISM = "pmm" if "pmm" in [s.name for s in ps.list_mechanisms()] else "dp_histogram"


def wait_idle(tab, settle: float = 0.3) -> None:
    """Wait until the app is connected and its script is not running (Streamlit's e2e convention)."""
    tab.wait_for_selector("[data-testid='stApp'][data-test-connection-state='CONNECTED']")
    time.sleep(settle)
    tab.wait_for_selector("[data-testid='stApp'][data-test-script-state='notRunning']")
    tab.wait_for_function("document.querySelectorAll('[data-testid=\"stSkeleton\"]').length === 0")


def assert_no_errors(tab, where: str) -> None:
    exceptions = tab.locator("[data-testid='stException']")
    errors = tab.locator("[data-testid='stAlertContentError']")
    texts = [exceptions.nth(i).inner_text() for i in range(exceptions.count())]
    texts += [errors.nth(i).inner_text() for i in range(errors.count())]
    assert not texts, f"{where}: the app shows errors: {texts}"


def goto(tab, title: str) -> None:
    tab.get_by_test_id("stSidebarNav").get_by_text(title, exact=True).click()
    tab.wait_for_selector(f"h1:has-text('{title.split()[0]}')")
    wait_idle(tab)


def upload(tab, csv: Path) -> None:
    tab.get_by_text("Upload a CSV", exact=True).click()
    wait_idle(tab)
    tab.locator("[data-testid='stFileUploaderDropzoneInput']").set_input_files(str(csv))
    tab.get_by_text(f"Loaded {csv.name}").wait_for()
    wait_idle(tab)
    tab.get_by_role("button", name="Estimate DP bounds").click()
    tab.get_by_text("every domain is public").wait_for()
    wait_idle(tab)


def run_and_compare(tab) -> float:
    """Seconds from clicking Run to the Compare page showing the metric table."""
    goto(tab, "Synthesize")
    choose(tab, "Mechanism", f"[{MECHANISM}]")  # the page starts at the guide's pick
    start = time.perf_counter()
    tab.get_by_role("button", name="Run", exact=True).click()
    tab.get_by_text("Done in").wait_for()
    goto(tab, "Compare")
    tab.locator("[data-testid='stTable']").first.wait_for()
    return time.perf_counter() - start


def write_blobs(folder: Path, n: int) -> Path:
    path = folder / f"blobs_{n}.csv"
    pd.DataFrame(two_blobs(n, 2, rng=0), columns=["x", "y"]).to_csv(path, index=False)
    return path


def test_upload_run_and_visit_every_page(tab, app_url, tmp_path, screenshots):
    tab.goto(app_url)
    wait_idle(tab)
    upload(tab, write_blobs(tmp_path, 2000))
    elapsed = run_and_compare(tab)
    print(f"\n[browser] n=2000 {MECHANISM}: Run -> Compare metrics {elapsed:.2f} s")
    for title in PAGES:
        goto(tab, title)
        assert_no_errors(tab, title)
        shoot(tab, screenshots, title.lower().replace(" ", "_").replace("-", ""))
    goto(tab, "Compare")
    figures = tab.locator("[data-testid='stMain'] svg[role='img']")
    scatter = figures.filter(has_text=re.compile(r"synthetic: [0-9,]+ rows"))
    assert scatter.count() == 1, "the Compare page shows no scatter"
    assert figures.filter(has_text="synthetic minus real").count() == 1, "the Compare page shows no correlations"
    assert "w1" in tab.locator("[data-testid='stTable']").first.inner_text().lower()
    html = download(tab, "Export stakeholder report (HTML)")
    print(f"[browser] HTML stakeholder report: {len(html.encode()) / 2**20:.2f} MB")
    assert html.startswith("<!DOCTYPE html>") and "<script" not in html, "a small report that opens offline"
    assert len(html.encode()) < 2**20 and "What was released" in html and "Privacy spent" in html
    run = json.loads(download(tab, "Download JSON report"))
    assert run["mechanism"] == MECHANISM and "python -m privsyn_core synth" in run["cli"]
    assert len(download(tab, "Download synthetic CSV").splitlines()) == run["n_synthetic"] + 1
    goto(tab, "Synthesize")  # here the metrics are computed only when a report is downloaded
    on_click = json.loads(download(tab, "Download JSON report"))
    metrics = run["teaching"]["metrics"]  # teaching mode: metrics live in the report's teaching section
    assert metrics["w1"]["value"] > 0 and on_click["teaching"]["metrics"] == metrics

    choose(tab, "Mechanism", "srw_tsp")  # the folding path needs srw_tsp
    tab.get_by_role("button", name="Run", exact=True).click()
    tab.get_by_text("Done in").wait_for()
    goto(tab, "TSP folding")
    assert tab.locator(".js-plotly-plot").count() == 2, "the TSP page should show the path and the walk"
    assert_no_errors(tab, "TSP folding with srw_tsp")
    shoot(tab, screenshots, "tsp_folding_srw_tsp")


def download(tab, label: str) -> str:
    with tab.expect_download() as info:
        tab.get_by_role("button", name=label).click()
    return Path(info.value.path()).read_text()


def epsilon_redraw(tab) -> float:
    """Seconds from moving the epsilon slider one step (1 -> 2) to the new run's figures on the Synthesize page."""
    goto(tab, "Synthesize")
    slider = tab.get_by_test_id("stMain").get_by_role("slider", name="epsilon (privacy budget, log scale)")
    slider.focus()
    start = time.perf_counter()
    slider.press("ArrowRight")
    tab.wait_for_function("document.querySelector(\"[data-testid='stMain'] [data-testid='stMetricValue']\")"
                          "?.innerText.trim() === '2'")
    wait_idle(tab, settle=0.0)
    return time.perf_counter() - start


def shoot(tab, folder: Path, name: str) -> None:
    """Screenshot of the whole page (the viewport is made tall, since Streamlit scrolls inside the app)."""
    height = tab.evaluate("document.querySelector('[data-testid=\"stMain\"]')?.scrollHeight || 1000")
    tab.set_viewport_size({"width": 1400, "height": min(max(int(height) + 50, 1000), 6000)})
    tab.wait_for_timeout(1000)  # let Plotly redraw at the new size
    path = folder / f"{name}.png"
    tab.screenshot(path=str(path))
    tab.set_viewport_size({"width": 1400, "height": 1000})
    print(f"[browser] screenshot {path}")


def choose(tab, label: str, option_text: str) -> None:
    """Pick an option of a Streamlit selectbox by its label (typing filters the menu and opens it even where the click
    only focused the box, as after a download)."""
    box = tab.get_by_test_id("stSelectbox").filter(has_text=label).first
    box.click()
    tab.keyboard.type(option_text)
    tab.get_by_role("option").filter(has_text=option_text).first.click()
    wait_idle(tab)


@pytest.mark.parametrize("n", [10**4, 10**5])
def test_time_from_run_to_metrics(tab, app_url, tmp_path, screenshots, n):
    tab.goto(app_url)
    wait_idle(tab)
    upload(tab, write_blobs(tmp_path, n))
    elapsed = run_and_compare(tab)
    assert_no_errors(tab, f"Compare after {MECHANISM} at n={n}")
    print(f"\n[browser] n={n:,} d=2 {MECHANISM}: Run -> Compare page showing metrics in {elapsed:.2f} s")
    assert "w1" in tab.locator("[data-testid='stTable']").first.inner_text().lower()
    goto(tab, "Partitions")
    assert_no_errors(tab, f"Partitions at n={n}")
    shoot(tab, screenshots, f"partitions_n{n}")
    if n <= 10**4:  # live re-runs are on for n <= 10^4
        print(f"[browser] n={n:,}: epsilon 1 -> 2 redrawn in {epsilon_redraw(tab):.2f} s")
