"""The stakeholder report a manager can read (issue 28, item 2): one page, no scripts, under 150 KB, in plain words,
a verdict per question with its evidence and uncertainty; a teaching-mode report opens with a real-data banner, a
release-mode report holds the release only.  The verdicts themselves are checked on tables whose answer is known."""

from __future__ import annotations

import re
from html.parser import HTMLParser

import numpy as np
import pandas as pd
import pytest

import privsyn_core as ps
from privsyn_core.reporting import report, stakeholder, verdicts

NAMES = ["age", "income", "hours", "score", "sex", "region", "children", "visits"]
SCHEMA = {"columns": [{"name": "age", "kind": "numeric", "lo": 18, "hi": 90, "integer": True},
                      {"name": "income", "kind": "numeric", "lo": 0, "hi": 200000},
                      {"name": "hours", "kind": "numeric", "lo": 0, "hi": 80},
                      {"name": "score", "kind": "numeric", "lo": 0, "hi": 1},
                      {"name": "sex", "kind": "categorical", "categories": ["F", "M"]},
                      {"name": "region", "kind": "categorical", "categories": ["north", "south", "east", "west"]},
                      {"name": "children", "kind": "numeric", "lo": 0, "hi": 8, "integer": True},
                      {"name": "visits", "kind": "numeric", "lo": 0, "hi": 20, "integer": True}]}
#: Words a manager should never meet in the body text: solver names and code.
JARGON = re.compile(r"\b(POT|ot\.emd2|HiGHS|simplex|NaN|nan|None|dp_valid|chebyshev|V-statistic)\b")
SNAKE = re.compile(r"\b[a-z]+_[a-z_]+\b")


def people(n: int = 400, seed: int = 0) -> pd.DataFrame:
    """Strongly related columns: income and hours follow age, score follows hours."""
    rng = np.random.default_rng(seed)
    age = rng.integers(18, 90, n)
    hours = np.clip(20 + 0.5 * (age - 18) + rng.normal(0, 4, n), 0, 80)
    income = np.clip(1500 * hours + rng.normal(0, 5000, n), 0, 200000)
    return pd.DataFrame({"age": age, "income": income.round(2), "hours": hours.round(1),
                         "score": np.clip(hours / 80 + rng.normal(0, 0.05, n), 0, 1).round(3),
                         "sex": rng.choice(["F", "M"], n), "region": rng.choice(["north", "south", "east", "west"], n),
                         "children": rng.poisson(1.2, n).clip(0, 8), "visits": rng.poisson(3, n).clip(0, 20)})


class _Text(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.parts: list[str] = []

    def handle_data(self, data: str) -> None:
        self.parts.append(data)


def body_text(html: str) -> str:
    parser = _Text()
    parser.feed(html.split("<body>", 1)[1])
    return " ".join(parser.parts)


@pytest.fixture(scope="module")
def made():
    real = people()
    schema = ps.Schema.from_dict(SCHEMA)
    result = ps.synthesize(real, "dp_histogram", 1.0, schema=schema, neighbouring="add_remove", rng=0)
    evaluation = report.evaluate_subsampled(real, result.data, schema, target="sex")
    return real, result.release(), evaluation


def test_a_teaching_report_opens_with_the_real_data_banner_and_a_verdict_per_question(made):
    real, release, evaluation = made
    html = stakeholder.build(release=release, data_name="people.csv", totals={"add_remove": 1.0}, budget=None,
                             real=real, evaluation=evaluation)
    size = len(html.encode())
    print(f"\n[report] teaching, 8 columns x 400 rows: {size / 1024:.0f} KiB")
    assert size < 150 * 1024 and "<script" not in html.lower()
    assert html.index(stakeholder.REAL_DATA_BANNER[:40]) < html.index("What was released")
    text = body_text(html)
    for question in ("Is each column's distribution kept?", "Are the relationships between columns kept?",
                     "Would a model trained on it predict like one trained on the real data?", "What is lost?"):
        assert question in text
    assert "At epsilon 1 on 400 rows," in text and "95% interval" in text
    assert "compare the two tables cell by cell" in text and "Real (not private)" in text
    assert "relationships between columns are lost" in text or "weakened" in text, "dp_histogram at eps 1 loses them"
    assert not JARGON.search(text), JARGON.search(text)
    assert not SNAKE.search(text), f"code names in the text: {SNAKE.findall(text)[:5]}"


def test_a_release_mode_report_holds_the_release_only(made):
    _, release, _ = made
    html = stakeholder.build(release=release, data_name="people.csv", totals={"add_remove": 1.0}, budget=2.0)
    text = body_text(html)
    assert stakeholder.REAL_DATA_BANNER[:40] not in html and "Verdict" not in text and "not private" not in text
    assert "400" not in text, "no exact row count read off the data"
    assert "How the noise was drawn" in text and not SNAKE.search(text) and not JARGON.search(text)
    assert "Correlations between numeric columns" in text and "cell by cell" not in text, "one table, nothing beside"
    assert len(html.encode()) < 150 * 1024


def test_the_verdicts_say_kept_for_the_real_table_itself_and_lost_for_independent_columns():
    real, other = people(2000, seed=1), people(2000, seed=2)
    schema = ps.Schema.from_dict(SCHEMA)
    same = report.evaluate_subsampled(real, other, schema)
    corr = stakeholder._corr_matrix(real, SCHEMA)
    kept = verdicts.all_verdicts(same, corr, stakeholder._corr_matrix(other, SCHEMA), NAMES)
    assert [v.answer for v in kept[:2]] == ["yes", "yes"], [(v.answer, v.evidence) for v in kept[:2]]
    rng = np.random.default_rng(3)
    shuffled = pd.DataFrame({c: rng.permutation(other[c].to_numpy()) for c in other})  # same columns, unrelated
    lost = verdicts.all_verdicts(report.evaluate_subsampled(real, shuffled, schema), corr,
                                 stakeholder._corr_matrix(shuffled, SCHEMA), NAMES)
    assert lost[0].answer in ("yes", "roughly") and lost[1].answer == "no"
    assert "relationships between columns are lost" in verdicts.summary(lost, 1.0, 2000)


def test_the_prediction_verdict_compares_with_real_training_and_with_guessing():
    base = {"score": "accuracy", "target": "sex", "n_test": 600}
    good = {"tstr": {**base, "train_on_synthetic": {"accuracy": 0.80}, "train_on_real": {"accuracy": 0.81},
                     "guess": {"accuracy": 0.5}}}
    useless = {"tstr": {**base, "train_on_synthetic": {"accuracy": 0.51}, "train_on_real": {"accuracy": 0.81},
                        "guess": {"accuracy": 0.5}}}
    middling = {"tstr": {**base, "train_on_synthetic": {"accuracy": 0.65}, "train_on_real": {"accuracy": 0.81},
                         "guess": {"accuracy": 0.5}}}
    assert verdicts.prediction(good).answer == "yes"
    assert verdicts.prediction(useless).answer == "no"
    assert verdicts.prediction(middling).answer == "partly"
    assert verdicts.prediction({}).answer == "not measured"
    noise = {"tstr": {**base, "train_on_synthetic": {"accuracy": 0.52}, "train_on_real": {"accuracy": 0.53},
                      "guess": {"accuracy": 0.5}}}
    assert verdicts.prediction(noise).answer == "no signal", "both at guessing: nothing to conclude"


def test_the_comparison_report_opens_with_the_real_data_banner():
    from privsyn_core.reporting import comparison

    real = people()
    schema = ps.Schema.from_dict(SCHEMA)
    runs = {}
    for name in ("dp_histogram", "pmm"):
        result = ps.synthesize(real, name, 1.0, schema=schema, rng=0)
        runs[name] = {"key": {}, "result": result, "evaluation": report.evaluate_subsampled(real, result.data, schema)}
    html = comparison.comparison_html(data_name="people.csv", runs=runs, tables={n: r["result"].data
                                                                                 for n, r in runs.items()},
                                      real=real, rank_metric="w1")
    assert html.index(stakeholder.REAL_DATA_BANNER[:40]) < html.index("What this compares")
    assert "<script" not in html.lower() and not JARGON.search(body_text(html).replace("ot.emd2", ""))


def test_the_columns_verdict_says_kept_only_when_the_whole_interval_is_no_further_than_the_floor():
    entry = {"value": 0.0282, "low": 0.0246, "high": 0.0318, "floor": 0.0208, "floor_low": 0.0149,
             "floor_high": 0.0267}  # an interval reaching past the floor's: not "as close as real data is"
    assert verdicts.columns({"marginal_tvd_1way": entry}).answer == "roughly"
    assert verdicts.columns({"marginal_tvd_1way": {**entry, "high": 0.0260}}).answer == "yes"
