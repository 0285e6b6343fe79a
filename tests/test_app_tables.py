"""AppTest checks of the real-tables work in the app (issue 14): mechanisms offered by their declared
requirements, public atoms in the schema editor, the guide panel on the Synthesize page."""

from __future__ import annotations

import dataclasses
import json

import numpy as np
import pandas as pd
import pytest
from streamlit.testing.v1 import AppTest
from streamlit.testing.v1.element_tree import Block, Expander

import privsyn_core as ps
from pages._support import guide_panel, offer
from pages._support.text import md, plain_lists
from privsyn_core.data.unit_codec import UnitCodec
from privsyn_core.evaluation import guide
from privsyn_core.reporting import words
from test_app import choose_columns, csv_bytes, new_app, problems, upload

BOOLEAN_SPECS = {s.name for s in ps.list_mechanisms() if s.data_kind == "boolean"}


def offered(at: AppTest) -> set[str]:
    return set(offered_in_order(at))


def offered_in_order(at: AppTest) -> list[str]:
    at.switch_page("pages/synthesize.py").run()
    return [o.rsplit("[", 1)[1].rstrip("]") for o in at.selectbox(key="w_mechanism").options]


def mixed_upload() -> AppTest:
    """Two numeric columns, a 0/1 integer column and a two-category column, every domain typed."""
    rng = np.random.default_rng(0)
    n = 400
    table = pd.DataFrame({"x": rng.random(n) * 10, "y": rng.random(n) * 10, "bit": rng.integers(0, 2, n),
                          "flag": rng.choice(["no", "yes"], n)})
    at = upload(new_app(), "mixed.csv", csv_bytes(table))
    typed = {"public": True, "source": "typed by the user"}
    at.session_state["schema_entries"] = {
        "x": {"name": "x", "kind": "numeric", "lo": 0.0, "hi": 10.0, "integer": False, **typed},
        "y": {"name": "y", "kind": "numeric", "lo": 0.0, "hi": 10.0, "integer": False, **typed},
        "bit": {"name": "bit", "kind": "numeric", "lo": 0.0, "hi": 1.0, "integer": True, **typed},
        "flag": {"name": "flag", "kind": "categorical", "categories": ["no", "yes"], **typed}}
    return at.run()


# -- mechanisms offered by what they declare ---------------------------------------------------------------
def test_boolean_mechanisms_are_offered_only_on_boolean_columns_and_the_others_say_why():
    at = mixed_upload()
    choose_columns(at, ["x", "y"])
    shown = offered(at)
    assert BOOLEAN_SPECS and not shown & BOOLEAN_SPECS and "pmm" in shown
    note = next(c.value for c in at.caption if c.value.startswith("Not offered"))
    for name in BOOLEAN_SPECS:
        assert name.replace("_", "\\_") in note
    assert "works on Boolean columns only" in note and "x, y are not" in note  # the codec's own sentence
    choose_columns(at, ["bit", "flag"])  # a 0/1 integer column and a two-category column are Boolean
    assert offered(at) >= BOOLEAN_SPECS
    choose_columns(at, ["x", "bit"])
    assert not offered(at) & BOOLEAN_SPECS
    assert not problems(at)


def test_one_column_mechanisms_follow_their_declared_max_dim():
    at = mixed_upload()
    one = {s.name for s in ps.list_mechanisms() if s.max_dim == 1 and s.codec is UnitCodec}
    choose_columns(at, ["x", "y"])
    assert one and not offered(at) & one
    choose_columns(at, ["x"])
    assert one <= offered(at)


def test_the_not_offered_note_says_lists_in_plain_words():
    at = new_app()  # the default sample: two numeric columns, too wide for the one-column mechanisms
    at.switch_page("pages/synthesize.py").run()
    note = next(c.value for c in at.caption if c.value.startswith("Not offered"))
    assert "['" not in note and "use one of pmm, psmm, " in note
    said = plain_lists("use one of ['a', 'b', 'c'] or ['d']; bounds [0, 1]")
    assert said == "use one of a, b or c or d; bounds [0, 1]"


def test_the_choice_reads_the_declaration_not_the_name():
    """pmm declared Boolean-only would be refused on numeric columns; a Boolean mechanism declared continuous
    and without its strict codec would be offered: the page decides from the spec, never from a list of names."""
    numeric = ps.Schema.from_dict({"columns": [{"name": "x", "kind": "numeric", "lo": 0, "hi": 10}]})
    pmm = ps.get_mechanism("pmm")
    assert pmm.accepts(numeric) is None
    assert "Boolean columns only" in str(dataclasses.replace(pmm, data_kind="boolean").accepts(numeric))
    for name in BOOLEAN_SPECS:
        spec = ps.get_mechanism(name)
        assert spec.accepts(numeric) is not None
        assert dataclasses.replace(spec, data_kind="continuous", codec=UnitCodec).accepts(numeric) is None
    assert offer.split(ps.list_mechanisms(), None) == (ps.list_mechanisms(), {})


# -- public atoms in the schema editor ---------------------------------------------------------------------
def edit_grid(at: AppTest, row: int, **cells) -> AppTest:
    """What the browser grid sends when the user edits cells of one row (the data editor's delta)."""
    at.switch_page("pages/data.py").run()
    key = at.session_state["schema_grid"]["key"]
    at.session_state[key] = {"edited_rows": {row: cells}, "added_rows": [], "deleted_rows": []}
    return at.run()


def test_atoms_typed_in_the_grid_are_saved_in_the_schema_and_reach_the_run():
    at = new_app()
    edit_grid(at, 0, atoms="0, 0.5")
    assert not problems(at)
    entry = at.session_state["schema_entries"]["x"]
    assert entry["atoms"] == [0.0, 0.5] and entry["source"] == "typed by the user"
    assert any("Schema complete" in s.value for s in at.success)
    at.switch_page("pages/synthesize.py").run()
    next(b for b in at.button if b.label == "Run").click().run()
    assert not problems(at)
    columns = at.session_state["result"].schema["columns"]
    assert columns[0]["atoms"] == [0.0, 0.5] and "atoms" not in columns[1]
    at.switch_page("pages/data.py").run()  # the grid is rebuilt from the entries after another page
    assert at.session_state["schema_grid"]["base"]["atoms"].tolist() == ["0, 0.5", ""]
    assert at.session_state["schema_entries"]["x"]["atoms"] == [0.0, 0.5]


@pytest.mark.parametrize(("cells", "message"), [
    ({"atoms": "0, zero"}, "'atoms' must be numbers"),
    ({"atoms": "2"}, "atoms must lie in the bounds"),
    ({"integer": True, "atoms": "0.5"}, "an integer column's atoms must be integers"),
    ({"kind": "categorical", "categories": "a, b", "atoms": "0"}, "do not apply to a categorical column"),
])
def test_invalid_atoms_are_refused_with_the_column_named_and_nothing_runs(cells, message):
    at = edit_grid(new_app(), 0, **cells)
    assert not at.exception
    warned = [w.value for w in at.warning if message in w.value]
    assert len(warned) == 1 and "x" in warned[0], [w.value for w in at.warning]
    at.switch_page("pages/synthesize.py").run()
    assert next(b for b in at.button if b.label == "Run").disabled


# -- the guide panel ---------------------------------------------------------------------------------------
def guide_text(at: AppTest) -> str:
    return next(m.value for m in at.markdown if m.value.startswith("**Try "))


def test_guide_panel_shows_the_recommendation_its_reason_and_figures_and_can_choose_it():
    at = new_app()
    at.switch_page("pages/synthesize.py").run()
    at.radio(key="w_neighbouring").set_value("replace").run()
    n = len(pd.read_csv("assets/blobs.csv"))
    expected = guide.recommend(2, n, ["numeric", "numeric"], 1.0)
    default = guide.recommend(2, n, ["numeric", "numeric"], 1.0, peers=False).mechanism
    text = guide_text(at)
    assert text.startswith(f"**Try {md(expected.mechanism)} first.**") and md(expected.why) in text
    assert any(f"Rows: {n:,} (public" in c.value for c in at.caption)  # under replace the public n is the table's
    figures = "\n".join(m.value for m in at.markdown if "2-way marginal TVD" in m.value)
    assert guide_panel.measured(expected.expected_tvd2_range) in figures
    assert guide_panel.measured(expected.expected_w1_range) in figures
    spec = ps.get_mechanism(expected.mechanism)
    exposure = md(words.floating_point(spec))
    assert any(i.value == exposure for i in at.info) == bool(spec.floating_point_exposure)
    chooser = at.selectbox(key="w_mechanism")
    assert chooser.value == default  # the guide's pick among our own (a peer only by its button) is the default
    assert bool([b for b in at.button if b.label.startswith("Use ")]) == (default != expected.mechanism)
    other = next(o for o in offered(at) if o != expected.mechanism)
    at.selectbox(key="w_mechanism").set_value(other).run()
    next(b for b in at.button if b.label == f"Use {expected.mechanism}").click().run()
    assert at.selectbox(key="w_mechanism").value == expected.mechanism
    assert not problems(at)


def walk(node) -> list:
    """The elements and blocks under ``node`` in the order the page draws them (depth first)."""
    found = []
    for child in getattr(node, "children", {}).values():
        found += [child, *walk(child)]
    return found


def test_the_guide_panel_is_open_right_under_the_mechanism_chooser_and_above_run():
    """Issue 38, item 2: the guide is visible where the mechanism is chosen: the block drawn right after the
    chooser is a bordered container (no expander) holding the recommendation, and it comes before the Run button."""
    at = new_app()
    at.switch_page("pages/synthesize.py").run()
    top = list(at.main.children.values())
    chooser = next(i for i, node in enumerate(top) if getattr(node, "key", None) == "w_mechanism")
    panel = top[chooser + 1]
    inside = walk(panel)
    assert any(getattr(n, "type", None) == "markdown" and n.value.startswith("**Try ") for n in inside)
    assert not [n for n in [panel, *inside] if isinstance(n, Expander)]
    assert any(n.proto.flex_container.border for n in [panel, *inside] if isinstance(n, Block) and n.proto)
    drawn = walk(at.main)
    advice = next(i for i, n in enumerate(drawn) if getattr(n, "type", None) == "markdown"
                  and n.value.startswith("**Try "))
    run = next(i for i, n in enumerate(drawn) if getattr(n, "type", None) == "button" and n.label == "Run")
    assert drawn.index(top[chooser]) < advice < run
    assert not problems(at)


def test_the_default_mechanism_is_the_guides_pick_until_the_user_chooses_one():
    """Issue 38, item 2: a fresh session shows the guide's pick for the current settings (it follows them while
    nothing is chosen); a mechanism the user picks stays, whatever the settings and pages visited since."""
    at = new_app()
    pick = guide.recommend(2, guide_panel.DEFAULT_ESTIMATE, ["numeric", "numeric"], 1.0, peers=False).mechanism
    choices = offered_in_order(at)
    assert pick in choices[1:], "the sample tells the guide's pick from the first offered"
    assert at.selectbox(key="w_mechanism").value == pick
    at.select_slider(key="w_epsilon").set_value(0.01).run()
    assert at.selectbox(key="w_mechanism").value == guide.recommend(
        2, guide_panel.DEFAULT_ESTIMATE, ["numeric", "numeric"], 0.01, peers=False).mechanism
    other = next(o for o in choices if o != pick)
    at.selectbox(key="w_mechanism").set_value(other).run()
    at.select_slider(key="w_epsilon").set_value(1.0).run()
    at.radio(key="w_neighbouring").set_value("replace").run()
    assert at.selectbox(key="w_mechanism").value == other
    at.switch_page("pages/data.py").run()
    at.switch_page("pages/synthesize.py").run()
    assert at.selectbox(key="w_mechanism").value == other
    assert not problems(at)


def test_default_choice_is_the_pick_when_offered_else_the_first_offered():
    schema = ps.unit_schema(2)
    pick = guide.recommend(2, 500, ["numeric", "numeric"], 1.0, peers=False).mechanism
    assert guide_panel.default_choice(schema, ("pmm", pick), 1.0, 500) == pick
    others = tuple(name for name in ("pmm", "psmm", "dp_histogram") if name != pick)
    assert guide_panel.default_choice(schema, others, 1.0, 500) == others[0]
    assert guide_panel.default_choice(None, ("psmm", "pmm"), 1.0, 500) == "psmm"


@pytest.mark.parametrize("release", [False, True])
def test_guide_under_add_remove_reads_a_typed_public_estimate_never_the_private_count(release):
    at = new_app()
    if release:
        at.toggle(key="w_release").set_value(True).run()
    at.switch_page("pages/synthesize.py").run()
    at.radio(key="w_neighbouring").set_value("add_remove").run()
    at.number_input(key="w_guide_n").set_value(123_456).run()
    text = guide_text(at)
    assert md(guide.recommend(2, 123_456, ["numeric", "numeric"], 1.0).why) in text
    n = len(pd.read_csv("assets/blobs.csv"))
    assert f"{n} rows" not in text and f"{n:,} rows" not in text
    assert not problems(at)


def test_guide_kinds_follow_the_public_declaration():
    schema = ps.Schema.from_dict({"columns": [
        {"name": "a", "kind": "numeric", "lo": 0, "hi": 1, "integer": True},
        {"name": "b", "kind": "numeric", "lo": 0, "hi": 1},
        {"name": "c", "kind": "categorical", "categories": ["u", "v"]},
        {"name": "d", "kind": "categorical", "categories": ["u", "v", "w"]}]})
    assert guide_panel.column_kinds(schema) == ["boolean", "numeric", "boolean", "categorical"]
    counts = ps.Schema.from_dict({"columns": [{"name": "k", "kind": "numeric", "lo": 0, "hi": 5, "integer": True}]})
    assert guide_panel.column_kinds(counts) == ["integer"]  # six public values: one level each
    assert guide_panel.measured(None) == "not measured"
    assert guide_panel.measured((0.1, 0.1)).startswith("0.1 (a single measured run")
    assert guide_panel.measured((0.1234, 0.5)) == "0.123 to 0.5"


# -- the released tree of marginal_tree --------------------------------------------------------------------
@pytest.mark.parametrize("release", [False, True])
def test_partitions_page_draws_the_released_tree_in_both_modes_from_the_release_alone(release):
    from test_app_release import _Untouchable

    at = new_app()
    if release:
        at.toggle(key="w_release").set_value(True).run()
    at.switch_page("pages/synthesize.py").run()
    at.selectbox(key="w_mechanism").set_value("marginal_tree").run()
    at.number_input(key="w_param_marginal_tree_joint_columns").set_value(1).run()  # a tree even on 2 columns
    next(b for b in at.button if b.label == "Run").click().run()
    assert not problems(at)
    if release:  # release mode draws from the release alone (teaching mode may read the diagnostics)
        result = at.session_state["result"]
        result.diagnostics = _Untouchable(result.diagnostics)
    at.switch_page("pages/partitions.py").run()
    assert not at.exception, at.exception
    spec = json.loads(at.get("plotly_chart")[0].proto.spec)
    assert spec["layout"]["title"]["text"].startswith("Released tree of column pairs")
    assert [t["text"] for t in spec["data"] if t.get("name") == "columns"] == [["x", "y"]]


def test_the_schema_grid_fits_1280_px_and_gives_the_categories_the_most_room():
    from pages._support.schema_editor import COLUMN_ORDER, WIDTHS

    main_area = 818  # the main area of a 1280 px window with the sidebar open
    assert set(WIDTHS) == set(COLUMN_ORDER) and sum(WIDTHS.values()) <= main_area
    assert max(WIDTHS, key=WIDTHS.__getitem__) == "categories" == COLUMN_ORDER[-1]
    assert WIDTHS["categories"] >= 200, "room for a few categories, comma separated"
