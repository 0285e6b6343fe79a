"""A release-only deployment in a real browser (issue 12): locked across reloads, names never Markdown."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from test_app_browser import goto, shoot, wait_idle

pytestmark = pytest.mark.browser

BAIT = "http://127.0.0.1:9/bait.png"


def test_release_only_survives_reloads_and_names_never_fetch_urls(tab, release_only_url, tmp_path, screenshots):
    fetched = []
    tab.on("request", lambda request: fetched.append(request.url) if "bait" in request.url else None)
    tab.goto(release_only_url)
    wait_idle(tab)
    assert tab.get_by_text("Release-only deployment").count() == 1
    assert tab.get_by_text("Release mode", exact=True).count() == 0, "no toggle in a release-only deployment"
    tab.reload()
    wait_idle(tab)
    assert tab.get_by_text("Release-only deployment").count() == 1, "a reload stays in release mode"

    path = tmp_path / "bait.csv"
    pd.DataFrame({f"![x]({BAIT})": np.linspace(0, 1, 40), "y": np.linspace(1, 0, 40)}).to_csv(path, index=False)
    tab.get_by_text("Upload a CSV", exact=True).click()
    wait_idle(tab)
    tab.locator("[data-testid='stFileUploaderDropzoneInput']").set_input_files(str(path))
    tab.get_by_text("Loaded bait.csv").wait_for()
    wait_idle(tab, settle=1.0)
    assert tab.get_by_role("button", name="Propose from the data").count() == 0
    assert tab.get_by_text("40 rows").count() == 0, "no exact row count in release mode"
    for title in ("Synthesize", "Partitions", "Compare", "Data"):
        goto(tab, title)
        shoot(tab, screenshots, f"release_only_{title.lower()}")
    assert not fetched, f"a column name made the browser fetch {fetched}"
