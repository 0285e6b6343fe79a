"""Pages never read each other's widget keys: shared values go through ``pages._support.shared``."""

from __future__ import annotations

import re
from collections import defaultdict
from pathlib import Path

import pandas as pd
from streamlit.testing.v1 import AppTest

ROOT = Path(__file__).resolve().parents[1]
APP = str(ROOT / "app.py")
#: A widget key as a string literal (or the literal start of an f-string): "w_columns", f"w_param_{name}".
KEY = re.compile(r"""(?<![A-Za-z0-9_])f?["'](w_[A-Za-z0-9_]*)""")


def app_files() -> list[Path]:
    pages = ROOT / "pages"
    return [ROOT / "app.py", *sorted(pages.glob("*.py")), *sorted((pages / "_support").glob("*.py"))]


def test_every_widget_key_is_named_in_one_file_only():
    owners: dict[str, set[str]] = defaultdict(set)
    for path in app_files():
        for key in KEY.findall(path.read_text(encoding="utf-8")):
            owners[key].add(str(path.relative_to(ROOT)))
    shared = {key: sorted(files) for key, files in owners.items() if len(files) > 1}
    assert not shared, f"widget keys read outside the file that draws them: {shared}"
    assert {"w_columns", "w_seed", "w_cmp_target"} <= set(owners)  # the check sees the keys it is about


def test_the_pattern_finds_reads_of_another_pages_key():
    assert KEY.findall('x = st.session_state["w_seed"]; y = saved_value("w_cmp_target", "none")') == \
        ["w_seed", "w_cmp_target"]
    assert KEY.findall('key=f"w_param_{spec.name}_{name}"') == ["w_param_"]


def test_columns_seed_and_tstr_target_reach_other_pages_through_the_accessors():
    at = AppTest.from_file(APP, default_timeout=60).run()
    shared = at.session_state["shared"]
    assert shared["columns"] == ["x", "y"]  # the default sample's columns, before the Data page was drawn
    at.switch_page("pages/data.py").run()
    at.multiselect(key="w_columns").set_value(["x"]).run()
    at.switch_page("pages/synthesize.py").run()  # the Data page's widget state is gone here
    assert at.session_state["shared"]["columns"] == ["x"]
    at.number_input(key="w_seed").set_value(5).run()
    assert at.session_state["shared"]["seed"] == 5
    next(b for b in at.button if b.label == "Run").click().run()
    at.switch_page("pages/compare.py").run()
    assert not at.exception
    at.switch_page("pages/data.py").run()
    assert at.multiselect(key="w_columns").value == ["x"]  # the choice survives the round trip


def test_a_new_table_resets_the_chosen_columns():
    at = AppTest.from_file(APP, default_timeout=60).run()
    at.switch_page("pages/data.py").run()
    at.multiselect(key="w_columns").set_value(["y"]).run()
    at.radio(key="w_source").set_value("Upload a CSV").run()
    csv = pd.DataFrame({"a": [1.0, 2.0, 3.0], "b": [4.0, 5.0, 6.0]}).to_csv(index=False).encode()
    at.file_uploader[0].set_value(("t.csv", csv, "text/csv")).run()
    assert not at.exception
    assert at.multiselect(key="w_columns").value == ["a", "b"]
    assert at.session_state["shared"]["columns"] == ["a", "b"]
