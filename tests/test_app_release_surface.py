"""The app's release surface (issue 12): in release mode the app shows nothing but the Release.

For every private mechanism and each relation it supports, the app runs in release mode (through
AppTest, as a user would) on two neighbouring uploads with the same parameters and the same
noise: under ``replace`` one record moved into an empty corner, under ``add_remove`` one extra
record there.  Every text the app then shows (Markdown, captions, alerts, metrics, tables,
widgets, the JSON report preview) on every page must be identical between the two, except

* the synthetic rows themselves (the table equal to the release's first rows) and the charts,
  which are drawn from the noisy release (each SVG figure must equal one drawn from the Release alone);
* numbers equal to a number either Release carries (its row count, atom count, weight total, the
  values of its declared parameters): those are functions of the noisy release.

Anything else that differs was computed from the raw data: a leak.  The exact record counts of
both tables are checked not to be among the Release's numbers under ``add_remove``, so a leaked ``n`` cannot hide
behind that exemption; and the same comparison in teaching mode must find differences (it shows
``n``), so the test can fail.

Release mode draws from the secure generator; to compare the same noise on both tables,
``pages._support.state.release_rng`` is replaced by a fixed seed here, in the test only.
"""

from __future__ import annotations

import itertools
import math
import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from streamlit.testing.v1 import AppTest

import privsyn_core as ps
from privsyn_core.data.datasets import two_blobs
from privsyn_core.data.identity import table_identity
from privsyn_core.data.io import read_csv

APP = str(Path(__file__).resolve().parents[1] / "app.py")
PAGES = ["pages/data.py", "pages/synthesize.py", "pages/partitions.py", "pages/tsp.py", "pages/compare.py",
         "pages/tradeoff.py", "pages/over_time.py"]
SEED = 1  # chosen so that under add_remove no released number equals either exact n (see below)
N = 317
CORNER = (0.995, 0.005)  # two_blobs puts no record near this corner
ONE_COLUMN = {s.name for s in ps.list_mechanisms() if s.max_dim == 1}  # they take one column only
NUMBER = re.compile(r"-?\d[\d,]*(?:\.\d+)?(?:e[+-]?\d+)?")
#: Our private mechanisms (the neighbours' noise is coupled through our samplers; a peer implemented by another
#: library, e.g. OpenDP, draws its own noise, which this test cannot couple: its wrapper has tests/test_peers.py).
CASES = [(s.name, relation) for s in ps.list_mechanisms() if s.is_private and s.implemented_by is None
         for relation in s.neighbouring]


BOOLEAN = {s.name for s in ps.list_mechanisms() if s.data_kind == "boolean"}  # they take 0/1 columns only


def tables(relation: str, boolean: bool = False) -> tuple[pd.DataFrame, pd.DataFrame]:
    base = pd.DataFrame(two_blobs(N, 2, rng=3), columns=["x", "y"])
    assert (np.abs(base.to_numpy() - CORNER).max(axis=1) > 0.1).all(), "the corner must be empty"
    corner = pd.DataFrame([CORNER], columns=["x", "y"])
    if boolean:  # the same records thresholded at 1/2: the corner record is (1, 0)
        base, corner = (base > 0.5).astype(int), (corner > 0.5).astype(int)
    if relation == "replace":
        return base, pd.concat([base.iloc[1:], corner], ignore_index=True)
    return base, pd.concat([base, corner], ignore_index=True)


def released_numbers(release: ps.Release) -> list[float]:
    numbers = [len(release.data), len(release.unit)]
    if release.weights is not None:
        numbers.append(float(np.sum(release.weights)))
    for value in list(release.params.values()) + list(release.to_dict().values()):
        if isinstance(value, (int, float, np.integer, np.floating)) and not isinstance(value, bool):
            numbers.append(float(value))
    return [x for x in numbers if math.isfinite(x)]


def _normalise(text: str, numbers: list[float]) -> str:
    def token(match: re.Match) -> str:
        try:
            value = float(match.group().replace(",", ""))
        except ValueError:
            return match.group()
        same = any(abs(value - x) <= 1e-6 * max(1.0, abs(x)) for x in numbers)
        return "<released>" if same else match.group()
    return NUMBER.sub(token, text)


def _elements(node):
    children = getattr(node, "children", None)
    if children is not None and not hasattr(node, "value"):
        for k in sorted(children):
            yield from _elements(children[k])
    else:
        yield node


def surface(at: AppTest, release: ps.Release | None) -> list[str]:
    """What every page shows, less the synthetic rows and the charts (see the module docstring)."""
    rows = release.data.reset_index(drop=True) if release is not None else None
    out = []
    for page in PAGES:
        at.switch_page(page).run()
        assert not at.exception, f"{page}: {at.exception}"
        for el in _elements(at._tree):
            if el.type == "plotly_chart":
                continue
            if el.type == "markdown" and "<svg" in el.value and release is not None:
                assert el.value in _release_svgs(release), f"{page}: a figure not drawn from the release alone"
                continue
            if el.type in ("dataframe", "arrow_data_frame"):
                df = el.value.reset_index(drop=True)
                if rows is not None and _first_rows(df, rows):
                    continue  # the synthetic rows (rounded to the shown decimals)
                text = df.to_csv(index=False)
            else:  # the proto, less the per-session ids of files served on click
                text = re.sub(r'(deferred_file_id|url): "[^"]*"', r'\1', str(el.proto))
                text = re.sub(r"\$\$ID-[0-9a-f]+-", "$$ID-", text)  # widget ids hash the same labels and keys
            out.append(f"{page} {el.type}: {text}")
    return out


def _first_rows(shown: pd.DataFrame, rows: pd.DataFrame) -> bool:
    """Whether ``shown`` is the first rows of the synthetic table ``rows`` (numbers to the shown decimals)."""
    if list(shown.columns) != list(rows.columns) or len(shown) > len(rows):
        return False
    head = rows.head(len(shown))
    for name in shown.columns:
        if pd.api.types.is_numeric_dtype(head[name]):
            same = np.allclose(shown[name].to_numpy(float), head[name].to_numpy(float), rtol=0, atol=1e-3)
        else:
            same = bool((shown[name].astype(str).to_numpy() == head[name].astype(str).to_numpy()).all())
        if not same:
            return False
    return True


def _release_svgs(release: ps.Release) -> set[str]:
    """The SVG figures Compare draws, made from the release alone and shaped as shown (integers, no declared
    decimals): the scatter, the first column's marginal, the small multiples and the correlations."""
    from pages._support import output
    from privsyn_core.reporting import plot_data, report, svg_charts

    shown = output.shaped(release.data, release.schema, {})  # as the page shows
    names = [c["name"] for c in release.schema["columns"]]
    axes = (0, 1) if len(names) > 1 else (0, 0)
    points, settings = plot_data.plot_coordinates(shown, release.schema, names)
    first = {"columns": release.schema["columns"][:1]}
    (marginal,) = plot_data.marginal_panels(shown[names[:1]], first, bins=plot_data.MARGINAL_DETAIL_BINS)
    correlations = plot_data.correlation_matrix(report.schema_encode(release.data, release.schema))
    return {svg_charts.svg_scatter(points, settings, axes=axes, labels=[names[a] for a in axes],
                                   colour=plot_data.SYNTH_COLOUR, title=f"synthetic: {len(shown):,} rows"),
            svg_charts.svg_marginals([marginal], width=720, height=260)[0],
            svg_charts.svg_grid(svg_charts.svg_small_multiples(plot_data.marginal_panels(shown, release.schema))[0]),
            svg_charts.svg_correlations(correlations, names)}


def app_on(df: pd.DataFrame, mechanism: str, relation: str, release_mode: bool, monkeypatch) -> AppTest:
    from pages._support import state

    monkeypatch.setattr(state, "release_rng", lambda: SEED)
    at = AppTest.from_file(APP, default_timeout=120).run()
    if release_mode:
        at.toggle(key="w_release").set_value(True).run()
    at.switch_page("pages/data.py").run()
    at.radio(key="w_source").set_value("Upload a CSV").run()
    at.file_uploader[0].set_value(("mine.csv", df.to_csv(index=False).encode(), "text/csv")).run()
    columns = ["x"] if mechanism in ONE_COLUMN else ["x", "y"]
    at.multiselect(key="w_columns").set_value(columns).run()
    at.session_state["schema_entries"] = {
        c: {"name": c, "kind": "numeric", "lo": 0.0, "hi": 1.0, "integer": mechanism in BOOLEAN, "public": True,
            "source": "typed by the user"} for c in columns}
    at.switch_page("pages/synthesize.py").run()
    at.selectbox(key="w_mechanism").set_value(mechanism).run()
    at.radio(key="w_neighbouring").set_value(relation).run()
    if not release_mode:
        at.number_input(key="w_seed").set_value(SEED).run()
    next(b for b in at.button if b.label == "Run").click().run()
    assert not at.exception and at.session_state["result"] is not None, [e.value for e in at.error]
    return at


@pytest.mark.slow
@pytest.mark.parametrize("mechanism, relation", CASES)
def test_release_mode_shows_nothing_but_the_release(mechanism, relation, monkeypatch):
    a, b = tables(relation, mechanism in BOOLEAN)
    shown, numbers = [], []
    for df in (a, b):
        at = app_on(df, mechanism, relation, True, monkeypatch)
        release = at.session_state["result"].release()
        if relation == "add_remove":  # under replace n is public (and the same in both tables)
            assert not {len(a), len(b)} & set(released_numbers(release)), \
                "an exact n among the release's numbers would hide a leak: pick another SEED"
        shown.append(surface(at, release))
        numbers += released_numbers(release)
    shown = [[_normalise(text, numbers) for text in side] for side in shown]
    assert len(shown[0]) == len(shown[1]), "the two tables show different elements"
    diff = [_lines_apart(x, y) for x, y in zip(*shown, strict=True) if x != y]
    assert not diff, diff[:3]


def _lines_apart(x: str, y: str) -> tuple[str, list[tuple[str, str]]]:
    """The element and its lines that differ (readable failure messages)."""
    split = re.compile(r"\n|, ")
    lines = [(u, v) for u, v in itertools.zip_longest(split.split(x), split.split(y), fillvalue="") if u != v]
    return x.split(":", 1)[0], lines


def test_the_surface_comparison_detects_what_teaching_mode_shows(monkeypatch):
    a, b = tables("add_remove")
    shown = [surface(app_on(df, "dp_histogram", "add_remove", False, monkeypatch), None) for df in (a, b)]
    diff = [(x, y) for x, y in zip(*shown, strict=False) if x != y]  # teaching mode may show more elements
    assert any(f"{len(a):,} rows" in x for x, _ in diff), "teaching mode shows n: the comparison must see it"


#: Values of records that no message may quote in release mode (issue 37).
SECRETS = ("Jane Doe 1961-04-02", "alice_smith", "bob_jones")


def table_with_secrets() -> pd.DataFrame:
    """Records outside a schema with categories ``['a', 'b']`` and bounds ``[0, 1]``: text in a numeric column, a
    missing value (row 7), unlisted categories, a value above its bound."""
    df = pd.DataFrame({"x": two_blobs(40, 1, rng=5)[:, 0].astype(object), "c": ["a", "b"] * 20})
    df.loc[3, "x"], df.loc[7, "x"], df.loc[9, "x"] = SECRETS[0], None, 7.5
    df.loc[5, "c"], df.loc[11, "c"] = SECRETS[1], SECRETS[2]
    return df


def run_on_secrets(monkeypatch, release_only: bool) -> AppTest:
    if release_only:
        monkeypatch.setenv("PRIVSYN_RELEASE_ONLY", "1")
        monkeypatch.setenv("PRIVSYN_BUDGET", "3")
    at = AppTest.from_file(APP, default_timeout=120).run()
    at.switch_page("pages/data.py").run()
    at.radio(key="w_source").set_value("Upload a CSV").run()
    at.file_uploader[0].set_value(("people.csv", table_with_secrets().to_csv(index=False).encode(), "text/csv")).run()
    at.session_state["schema_entries"] = {
        "x": {"name": "x", "kind": "numeric", "lo": 0.0, "hi": 1.0, "integer": False, "public": True,
              "source": "typed by the user"},
        "c": {"name": "c", "kind": "categorical", "categories": ["a", "b"], "public": True,
              "source": "typed by the user"}}
    at.switch_page("pages/synthesize.py").run()
    at.selectbox(key="w_mechanism").set_value("dp_histogram").run()
    next(b for b in at.button if b.label == "Run").click().run()
    return at


def test_a_release_only_server_quotes_no_value_and_states_its_domain_rule(monkeypatch):
    """Issue 37: on a release-only server the error box showed the values a schema did not admit (an answer that is
    exact, not DP).  Now nothing is refused on the data's content: the records go through the declared rule
    (clipped, or the column's fallback), which the release states, and no page shows a value, a row number or a
    count of the records."""
    at = run_on_secrets(monkeypatch, release_only=True)
    assert not at.exception and not at.error, [e.value for e in at.error]
    release = at.session_state["result"].release()
    assert release.domain_policy == {"rule": release.domain_policy["rule"], "fallbacks": {"x": 0.5, "c": "a"}}
    shown = "\n".join(surface(at, release)).replace("\\", "")  # Markdown escapes the underscores
    assert not [s for s in SECRETS if s in shown] and "rows [" not in shown


def test_the_same_records_are_quoted_to_the_data_holder_in_teaching_mode(monkeypatch):
    """The detection case of the test above: in teaching mode the refusal quotes a value (the data holder's own
    session), so the check for secrets on the page can fail."""
    from pages._support import ledger

    at = run_on_secrets(monkeypatch, release_only=False)
    assert any(s in e.value.replace("\\", "") for e in at.error for s in SECRETS), [e.value for e in at.error]
    identity = table_identity(read_csv(at.session_state["data"]["bytes"]))
    assert ledger.store().count(identity) == 0, "a run the library refuses before any noise is not charged"
