"""The budget is a guarantee in the app too (issue 25): each bypass found by the independent check, reproduced
through the UI (AppTest) and refused.

1. a release-only session lifting the budget; 2. a stale session erasing it; 3. check-run-record races (the
library's reservation, tests/test_budget.py, here through the page); 4. a ledger that fails open; 5. a spend per
keystroke; 6. release mode reading the row count or changing the relation behind the user's back; 7. the CLI
outside every ledger (tests/test_cli.py).
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest
from streamlit.testing.v1 import AppTest

from privsyn_core.data.datasets import two_blobs
from privsyn_core.data.identity import table_identity

APP = str(Path(__file__).resolve().parents[1] / "app.py")
BUDGET_LABEL = "Budget for this data"


def new_app() -> AppTest:
    return AppTest.from_file(APP, default_timeout=90).run()


def reload_of(at: AppTest) -> AppTest:
    """Another browser session on the same upload (its URL names it)."""
    other = AppTest.from_file(APP, default_timeout=90)
    other.query_params["data"] = at.session_state["data"]["token"]
    return other.run()


def table() -> pd.DataFrame:
    return pd.DataFrame(two_blobs(300, 2, rng=0) * 10 - 2, columns=["x", "y"])


def upload(at: AppTest, text: str | None = None) -> AppTest:
    """Upload ``text`` (default: :func:`table` as CSV) with a typed schema of its columns ``x`` and ``y``."""
    at.switch_page("pages/data.py").run()
    at.radio(key="w_source").set_value("Upload a CSV").run()
    text = table().to_csv(index=False) if text is None else text
    at.file_uploader[0].set_value(("mine.csv", text.encode(), "text/csv")).run()
    at.multiselect(key="w_columns").set_value(["x", "y"]).run()
    at.session_state["schema_entries"] = {
        name: {"name": name, "kind": "numeric", "lo": -2.0, "hi": 8.0, "integer": False, "public": True,
               "source": "typed by the user"} for name in ("x", "y")}
    return at.run()


def release(at: AppTest, mechanism: str = "dp_histogram", epsilon: float = 1.0) -> AppTest:
    """Click Run once: a new release (in teaching mode with a new seed: the same seeded run spends nothing new)."""
    at.switch_page("pages/synthesize.py").run()
    at.selectbox(key="w_mechanism").set_value(mechanism).run()
    at.select_slider(key="w_epsilon").set_value(epsilon).run()
    if "w_seed" in at.session_state:
        at.toggle(key="w_live").set_value(False).run()
        at.number_input(key="w_seed").set_value(int(at.session_state["w_seed"]) + 1).run()
    return next(b for b in at.button if b.label == "Run").click().run()


def spent(at: AppTest) -> float:
    from pages._support import ledger

    return ledger.store().spent(table_identity(table()))


def budget_fields(at: AppTest) -> list:
    return [n for n in at.sidebar.number_input if n.label.startswith(BUDGET_LABEL)]


def errors(at: AppTest) -> list[str]:
    return [e.value for e in at.error] + [e.value for e in at.exception]


@pytest.fixture()
def locked(monkeypatch):
    monkeypatch.setenv("PRIVSYN_RELEASE_ONLY", "1")
    monkeypatch.setenv("PRIVSYN_BUDGET", "1.5")


def test_1_a_release_only_session_cannot_lift_or_raise_the_operators_budget(locked):
    at = upload(new_app())
    assert not budget_fields(at), "no budget field on a release-only server"
    assert any("epsilon 1.5**, set by the operator" in c.value for c in at.sidebar.caption)
    release(at)
    release(at)
    assert any("exceed its budget of 1.5" in e for e in errors(at)) and spent(at) == 1.0


def test_1_the_release_only_sidebar_suggests_no_teaching_run(locked):
    at = release(upload(new_app()))
    ledger_text = " ".join(c.value for c in at.sidebar.caption)
    assert "epsilons add up" in ledger_text and "Every run spends epsilon again" in ledger_text
    assert "teaching" not in ledger_text.lower() and "seed" not in ledger_text.lower()


def test_1_a_release_only_server_without_an_operators_budget_refuses_every_release(monkeypatch):
    monkeypatch.setenv("PRIVSYN_RELEASE_ONLY", "1")
    at = release(upload(new_app()))
    assert any("no privacy budget" in e for e in errors(at)) and spent(at) == 0.0
    assert at.session_state["result"] is None


def test_2_a_session_opened_earlier_never_writes_its_stale_budget():
    stale = upload(new_app())  # opened first: its budget field says 0 (none)
    other = reload_of(stale)
    budget_fields(other)[0].set_value(1.0).run()  # the other session sets a budget
    stale.switch_page("pages/data.py").run()  # the stale session clicks anything: nothing is written
    for _ in range(3):
        release(stale)
    assert spent(stale) == 1.0 and any("exceed its budget of 1" in e for e in errors(stale))
    budget_fields(stale)[0].set_value(5.0).run()  # raising from a browser: refused, the field shows the budget
    assert budget_fields(stale)[0].value == 1.0
    budget_fields(stale)[0].set_value(0.0).run()  # lifting: refused too
    release(stale)
    assert spent(stale) == 1.0


def test_3_the_run_is_reserved_before_the_mechanism_runs(monkeypatch):
    """Check, run, record were three steps: the page's run reserves in the library's release path before the
    mechanism draws anything, so a second session checking while the first runs sees the first's epsilon already
    counted."""
    from pages._support import ledger
    from privsyn_core.engine import pipeline

    at = upload(new_app())
    budget_fields(at)[0].set_value(1.5).run()
    seen = []
    real = pipeline.public_size  # the path's first step inside the reservation, before the mechanism

    def observing(*args, **kwargs):
        seen.append(ledger.store().spent(table_identity(table())))
        return real(*args, **kwargs)

    monkeypatch.setattr(pipeline, "public_size", observing)
    monkeypatch.setenv("PRIVSYN_RELEASE_ONLY", "1")  # release mode: a fresh synthesize per run
    monkeypatch.setenv("PRIVSYN_BUDGET", "1.5")
    at = reload_of(at)
    release(at)
    assert seen == [1.0], "the epsilon was counted while the mechanism ran"


def test_4_an_emptied_or_deleted_ledger_refuses_with_one_sentence_and_no_error_page(tmp_path, monkeypatch):
    from pages._support import ledger

    at = upload(new_app())
    release(at)
    assert spent(at) == 1.0
    ledger.path().write_bytes(b"")  # truncated under the running server
    release(at, epsilon=0.5)
    assert not at.exception and any("is empty (0 bytes" in e for e in errors(at))
    assert any("is empty" in e.value for e in at.sidebar.error), "the sidebar names the broken ledger"
    import shutil

    shutil.rmtree(ledger.data_dir())  # the whole data folder deleted while the server runs
    release(at, epsilon=0.5)
    assert not at.exception and any("removed while in use" in e for e in errors(at))
    assert not ledger.path().exists(), "no fresh ledger was made"


def test_5_release_mode_spends_only_on_run_and_never_per_keystroke(locked):
    at = upload(new_app())
    at.switch_page("pages/synthesize.py").run()
    at.selectbox(key="w_mechanism").set_value("dp_histogram").run()
    for epsilon in (1.0, 0.5, 0.2):  # moving the slider: no run
        at.select_slider(key="w_epsilon").set_value(epsilon).run()
    assert spent(at) == 0.0
    next(b for b in at.button if b.label == "Run").click().run()
    assert spent(at) == 0.2


def test_6_release_mode_reads_no_row_count_and_the_guide_never_changes_the_relation(locked):
    at = upload(new_app())
    at.switch_page("pages/synthesize.py").run()
    assert at.radio(key="w_neighbouring").value == "add_remove", "n is private under release-only by default"
    shown = " ".join([c.value for c in at.caption] + [m.value for m in at.markdown])
    assert "Rows: 300" not in shown and "300 rows" not in shown
    at.radio(key="w_neighbouring").set_value("replace").run()
    shown = " ".join([c.value for c in at.caption] + [m.value for m in at.markdown])
    assert "Rows: 300" not in shown, "the guide asks for a public estimate instead of reading n"
    at.radio(key="w_neighbouring").set_value("add_remove").run()
    use = [b for b in at.button if b.label.startswith("Use ")]
    if use:
        use[0].click().run()
    for name in ("kd_adaptive", "marginal_tree", "psmm"):  # choosing a mechanism keeps the relation
        at.selectbox(key="w_mechanism").set_value(name).run()
        assert at.radio(key="w_neighbouring").value == "add_remove"


def test_6_a_mechanism_calibrated_for_another_relation_is_not_run_until_the_user_chooses_it():
    at = new_app()
    at.switch_page("pages/synthesize.py").run()
    at.selectbox(key="w_mechanism").set_value("laplace_points").run()
    assert at.radio(key="w_neighbouring").value == "add_remove"
    assert next(b for b in at.button if b.label == "Run").disabled
    assert any("choose that relation above" in w.value for w in at.warning)


def versions(frame: pd.DataFrame) -> list[str]:
    """Seven CSV texts of the same records (line endings, trailing newline, row order, an unused column, float
    format, column order)."""
    text = frame.to_csv(index=False)
    return [text, text.replace("\n", "\r\n"), text.rstrip("\n"), frame.iloc[::-1].to_csv(index=False),
            frame.assign(note="unused").to_csv(index=False), frame.to_csv(index=False, float_format="%.17g"),
            frame[["y", "x"]].to_csv(index=False)]


def test_8_the_versions_of_one_table_share_one_budget(monkeypatch):
    """Issue 37: the app keyed an upload by its bytes, so the same rows in another order started at "0 of 2
    spent".  The seven versions of one table now meet one budget of 1.0 (two releases of 0.5 in all)."""
    monkeypatch.setenv("PRIVSYN_RELEASE_ONLY", "1")
    monkeypatch.setenv("PRIVSYN_BUDGET", "1")
    passed = []
    for k, text in enumerate(versions(table())):
        at = release(upload(new_app(), text), epsilon=0.5)
        if not errors(at):
            passed.append(k)
    assert len(passed) == 2, passed


def test_9_an_operator_names_the_servers_one_dataset(monkeypatch):
    """``PRIVSYN_DATASET``: every upload counts against one budget, whatever its records."""
    from pages._support import ledger

    monkeypatch.setenv("PRIVSYN_RELEASE_ONLY", "1")
    monkeypatch.setenv("PRIVSYN_BUDGET", "1.5")
    monkeypatch.setenv("PRIVSYN_DATASET", "clinic")
    other = table().iloc[:200] * 0.5
    first = release(upload(new_app()))
    second = release(upload(new_app(), other.to_csv(index=False)))
    assert not errors(first) and any("exceed its budget of 1.5" in e for e in errors(second))
    assert ledger.store().spent("clinic") == 1.0


def relation_beside_run(at: AppTest) -> str:
    return next(c.value for c in at.caption if c.value.startswith("**Neighbours differ by"))


@pytest.mark.parametrize("operator_dataset", [None, "one population"])
def test_6_the_relation_belongs_to_one_table_and_is_never_carried_to_another(monkeypatch, operator_dataset):
    """Replace chosen on table A: table B starts at add/remove (also when the operator's PRIVSYN_DATASET gives both
    one ledger identity) and runs under it; loading A again brings back A's own choice, stated beside Run."""
    if operator_dataset:
        monkeypatch.setenv("PRIVSYN_DATASET", operator_dataset)
    other = pd.DataFrame(two_blobs(250, 2, rng=1) * 10 - 2, columns=["x", "y"]).to_csv(index=False)
    at = upload(new_app())
    at.radio(key="w_bounds_rel").set_value("replace").run()  # the Data page's DP bounds: their own choice
    at.switch_page("pages/synthesize.py").run()
    at.radio(key="w_neighbouring").set_value("replace").run()
    assert "row count counts as public and is published as is" in relation_beside_run(at)
    release(at)
    assert at.session_state["result"].neighbouring == "replace"

    upload(at, other)
    assert at.radio(key="w_bounds_rel").value == "add_remove"
    at.switch_page("pages/synthesize.py").run()
    assert at.radio(key="w_neighbouring").value == "add_remove"
    assert relation_beside_run(at).startswith("**Neighbours differ by adding or removing one record.**")
    release(at)
    assert not errors(at) and at.session_state["result"].neighbouring == "add_remove"
    at.switch_page("pages/data.py").run()
    at.switch_page("pages/synthesize.py").run()  # other pages and back: B keeps its relation
    assert at.radio(key="w_neighbouring").value == "add_remove"

    upload(at)  # the very bytes of A again: A's own choice, shown beside Run
    at.switch_page("pages/synthesize.py").run()
    assert at.radio(key="w_neighbouring").value == "replace"
    assert relation_beside_run(at).startswith("**Neighbours differ by replacing one record.**")
