"""A browser reload keeps the uploaded table: the URL names it, the server keeps it (pages/_support/uploads.py)."""

from __future__ import annotations

import re
import time

import pandas as pd
import pytest
from test_app_browser import assert_no_errors, goto, run_and_compare, shoot, wait_idle

pytestmark = pytest.mark.browser


def sidebar_data(tab) -> str:
    line = tab.get_by_test_id("stSidebar").get_by_text(re.compile(r"^Data: "))
    line.wait_for()
    return line.inner_text()


def test_an_upload_survives_reloads_on_any_page(tab, app_url, tmp_path, screenshots):
    rows = 1234
    csv = tmp_path / "reload_me.csv"
    pd.DataFrame({"age": [18 + i % 60 for i in range(rows)], "score": [i / rows for i in range(rows)],
                  "group": ["a", "b", "c"] * (rows // 3) + ["a"] * (rows % 3)}).to_csv(csv, index=False)
    tab.goto(app_url)
    wait_idle(tab)
    tab.get_by_text("Upload a CSV", exact=True).click()
    wait_idle(tab)
    start = time.perf_counter()
    tab.locator("[data-testid='stFileUploaderDropzoneInput']").set_input_files(str(csv))
    tab.get_by_text("Loaded reload_me.csv").first.wait_for()
    wait_idle(tab)
    print(f"\n[browser] upload of {rows} rows x 3 columns shown in {time.perf_counter() - start:.2f} s")
    assert "data=" in tab.url, f"the URL does not name the upload: {tab.url}"
    assert "reload_me.csv" in sidebar_data(tab) and f"{rows:,} rows" in sidebar_data(tab)

    start = time.perf_counter()
    tab.reload()
    wait_idle(tab)
    tab.get_by_text(f"{rows:,} rows, 3 columns").wait_for()
    print(f"[browser] reload on the Data page restored the upload in {time.perf_counter() - start:.2f} s")
    assert "reload_me.csv" in sidebar_data(tab) and f"{rows:,} rows" in sidebar_data(tab)
    assert tab.get_by_text("Loaded reload_me.csv").count() >= 1
    assert_no_errors(tab, "Data page after a reload")
    shoot(tab, screenshots, "data_after_reload")

    goto(tab, "Learn")  # another page: Streamlit drops query parameters on page changes; the app names the data again
    tab.wait_for_url(re.compile(r"data="))
    tab.reload()
    wait_idle(tab)
    assert "reload_me.csv" in sidebar_data(tab) and f"{rows:,} rows" in sidebar_data(tab)
    assert_no_errors(tab, "Learn page after a reload")

    goto(tab, "Data")  # the restored table runs like a new one: propose its domain, run, compare (mixed columns)
    tab.get_by_role("button", name="Propose from the data").click()
    tab.get_by_text("dp_valid = False").first.wait_for()
    wait_idle(tab)
    elapsed = run_and_compare(tab)
    print(f"[browser] {rows} rows x 3 mixed columns: Run -> Compare metrics {elapsed:.2f} s")
    grid = tab.locator("svg").filter(has_text="score: value (public range")  # the small multiples, inline SVG
    grid.wait_for()
    assert grid.count() == 1 and tab.locator("svg").filter(has_text="group").count() >= 1
    assert_no_errors(tab, "Compare on the restored upload")
    shoot(tab, screenshots, "compare_mixed_columns")
