"""Marginal TVD, correlation gap, Boolean marginals, TSTR, evaluate() and the CLI's evaluate."""

import json
import math
from itertools import combinations

import numpy as np
import pandas as pd
import pytest

from privsyn_core import Schema
from privsyn_core.cli import main
from privsyn_core.errors import ParameterError
from privsyn_core.evaluation.marginals import (
    avg_sq_marginal_error,
    boolean_marginal_errors,
    correlation_gap,
    marginal_table,
    marginal_tvd,
)
from privsyn_core.evaluation.scorecard import METRICS, evaluate
from privsyn_core.evaluation.utility import tstr

SCHEMA = Schema.from_dict({"columns": [{"name": "x", "kind": "numeric", "lo": 0, "hi": 1},
                                       {"name": "y", "kind": "numeric", "lo": -5, "hi": 5},
                                       {"name": "c", "kind": "categorical", "categories": ["a", "b", "z"]}]})


def _table(n, seed, shift=0.0):
    rng = np.random.default_rng(seed)
    x = np.clip(rng.normal(0.4 + shift, 0.15, n), 0, 1)
    return pd.DataFrame({"x": x, "y": np.clip(6 * x - 2 + rng.normal(0, 0.5, n), -5, 5),
                         "c": np.where(x > 0.5, "a", rng.choice(["b", "z"], n))})


# -- marginals -------------------------------------------------------------------------------------
@pytest.mark.parametrize("order", [1, 2])
def test_marginal_tvd_of_identical_tables_is_zero(order):
    real = _table(500, 0)
    table = marginal_tvd(real, real.sample(frac=1, random_state=1), order=order, schema=SCHEMA)
    assert len(table) == math.comb(3, order) and np.all(table["tvd"] == 0)


@pytest.mark.parametrize("order", [1, 2])
def test_marginal_tvd_of_disjoint_supports_is_one(order):
    left = pd.DataFrame({"x": np.linspace(0, 0.4, 50), "y": np.linspace(-5, -1, 50), "c": "a"})
    right = pd.DataFrame({"x": np.linspace(0.6, 1, 30), "y": np.linspace(1, 5, 30), "c": "z"})
    assert np.allclose(marginal_tvd(left, right, order=order, bins=10, schema=SCHEMA)["tvd"], 1.0)


def test_marginal_tvd_uses_public_bins_and_matches_a_hand_count():
    real = pd.DataFrame({"x": [0.1, 0.1, 0.6, 0.9], "y": 0.0, "c": ["a", "a", "b", "z"]})
    synth = pd.DataFrame({"x": [0.1, 0.6, 0.6, 0.6], "y": 0.0, "c": ["a", "b", "b", "b"]})
    one = marginal_tvd(real, synth, order=1, bins=2, schema=SCHEMA).set_index("column")
    # x: bins [0, .5), [.5, 1] hold (2, 2)/4 vs (1, 3)/4 -> TV 1/4; c: (2,1,1)/4 vs (1,3,0)/4 -> TV 1/2
    assert one.loc["x", "tvd"] == 0.25 and one.loc["c", "tvd"] == 0.5 and one.loc["y", "tvd"] == 0
    assert list(one["bins"]) == [2, 2, 3]
    two = marginal_tvd(real, synth, order=2, bins=2, schema=SCHEMA)
    assert list(two.columns) == ["column_a", "column_b", "bins", "tvd"] and list(two["bins"]) == [4, 6, 6]
    with pytest.raises(ParameterError):
        marginal_tvd(real, synth, order=3, schema=SCHEMA)
    with pytest.raises(ParameterError):
        marginal_tvd(real, synth, bins=0, schema=SCHEMA)


def test_correlation_gap_is_zero_for_equal_tables_and_twice_the_correlation_for_a_flip():
    rng = np.random.default_rng(2)
    a = rng.random(400)
    real = np.column_stack([a, a + 0.1 * rng.random(400), np.full(400, 0.5)])  # constant third column
    flipped = real.copy()
    flipped[:, 1] = 1.1 - flipped[:, 1]
    assert correlation_gap(real, real) == {"max": 0.0, "mean": 0.0}
    rho = np.corrcoef(real[:, 0], real[:, 1])[0, 1]
    assert correlation_gap(real, flipped)["max"] == pytest.approx(2 * rho, rel=1e-12)


def test_marginal_table_and_metric():
    rng = np.random.default_rng(8)
    X = rng.integers(0, 2, (200, 6)).astype(float)
    for d in (1, 2, 3):
        brute = [np.mean(np.prod(X[:, list(c)], axis=1)) for c in combinations(range(6), d)]
        np.testing.assert_allclose(marginal_table(X, d), brute, rtol=0, atol=1e-15)
    Z = rng.integers(0, 2, (50, 6)).astype(float)
    expected = np.mean([(np.mean(X[:, i] * X[:, j]) - np.mean(Z[:, i] * Z[:, j])) ** 2
                        for i, j in combinations(range(6), 2)])
    assert avg_sq_marginal_error(X, Z, 2) == pytest.approx(expected, rel=1e-12)


def test_boolean_marginal_errors_follow_the_papers_definition():
    rng = np.random.default_rng(3)
    X, Z = (rng.random((300, 5)) < 0.3).astype(float), (rng.random((200, 5)) < 0.4).astype(float)
    errors = boolean_marginal_errors(X, Z)
    for k in (1, 2, 3):
        direct = [(X[:, list(s)].prod(axis=1).mean() - Z[:, list(s)].prod(axis=1).mean()) ** 2
                  for s in combinations(range(5), k)]
        assert errors[k] == pytest.approx(np.mean(direct), rel=1e-12)
    assert boolean_marginal_errors(X, X) == {1: 0.0, 2: 0.0, 3: 0.0}
    assert set(boolean_marginal_errors(X[:, :2], Z[:, :2])) == {1, 2}


# -- TSTR ------------------------------------------------------------------------------------------
@pytest.mark.parametrize("target, score", [("c", "accuracy"), ("y", "r2")])
def test_tstr_on_identical_data_equals_train_on_real(target, score):
    train, test = _table(600, 4), _table(300, 5)
    result = tstr(train, train.copy(), target, real_test=test, schema=SCHEMA, seed=0)
    assert result["train_on_synthetic"] == result["train_on_real"]
    assert result["score"] == score and result["value"] == result["train_on_real"][score]
    assert result["task"] == ("classification" if target == "c" else "regression")
    assert result["value"] > (0.6 if target == "c" else 0.5)  # the toy target is learnable


def test_tstr_with_one_synthetic_class_falls_back_to_a_constant_and_splits_without_hold_out():
    real = _table(400, 6)
    synth = real.assign(c="b")
    result = tstr(real, synth, "c", schema=SCHEMA)
    assert result["n_test"] == 120 and result["n_train_real"] == 280
    assert result["train_on_synthetic"]["accuracy"] < result["train_on_real"]["accuracy"]
    with pytest.raises(ParameterError):
        tstr(real, synth, "nope", schema=SCHEMA)


BAYES_SCHEMA = Schema.from_dict({"columns": [{"name": "x", "lo": 0, "hi": 1}, {"name": "z", "lo": 0, "hi": 1},
                                             {"name": "label", "kind": "categorical", "categories": ["no", "yes"]}]})
FLIP = 0.1  # label noise of the fixture: the best possible accuracy is 1 - FLIP


def _bayes_table(n, seed):
    """label = [x > 1/2], flipped with probability FLIP; z is noise."""
    rng = np.random.default_rng(seed)
    x = rng.random(n)
    label = (x > 0.5) ^ (rng.random(n) < FLIP)
    return pd.DataFrame({"x": x, "z": rng.random(n), "label": np.where(label, "yes", "no")})


def test_tstr_is_deterministic_for_a_seed_and_reaches_the_best_accuracy_with_a_calibrated_interval():
    """Real and synthetic rows from one law whose best accuracy is 1 - FLIP = 0.9. On 1200 test rows the accuracy
    of a model that learnt the threshold has standard error sqrt(0.09 / 1200) = 0.0087, so 4 standard errors
    (0.035, false failure below 1e-4 under the normal approximation) bound its distance to 0.9. The interval's
    half-width is t_0.975 x a bootstrap standard error of 200 replicates (relative sd 1/sqrt(400) = 5%), so it lies
    within 25% (5 sd) of 1.97 x 0.0087."""
    real, synthetic = _bayes_table(4000, 1), _bayes_table(4000, 2)
    first = tstr(real, synthetic, "label", schema=BAYES_SCHEMA, seed=3)
    assert tstr(real, synthetic, "label", schema=BAYES_SCHEMA, seed=3) == first
    assert first["n_test"] == 1200 and first["score"] == "accuracy"
    standard_error = math.sqrt(FLIP * (1 - FLIP) / first["n_test"])
    for side in ("train_on_synthetic", "train_on_real"):
        found = first[side]
        assert abs(found["accuracy"] - (1 - FLIP)) <= 4 * standard_error, side
        half = (found["high"] - found["low"]) / 2
        assert 0.75 * 1.97 * standard_error <= half <= 1.25 * 1.97 * standard_error, side
        assert found["low"] < found["accuracy"] < found["high"]
    assert (first["value"], first["low"], first["high"]) == tuple(
        first["train_on_synthetic"][k] for k in ("accuracy", "low", "high"))
    assert (first["floor"], first["floor_low"], first["floor_high"]) == tuple(
        first["train_on_real"][k] for k in ("accuracy", "low", "high"))
    assert first["guess"]["accuracy"] < 0.6  # a constant guess gets about half right


def test_tstr_regression_reaches_the_explained_share_of_variance():
    """y = x + N(0, 0.1^2) with x uniform on [0, 1]: the best R^2 is (1/12) / (1/12 + 0.01) = 0.893. With 1200 test
    rows R^2's sampling sd is about 2 (1 - R^2) / sqrt(n) = 0.006 (delta method, normal errors); 0.03 leaves room
    for the model's own error and 5 sd of sampling."""
    rng = np.random.default_rng(5)
    schema = Schema.from_dict({"columns": [{"name": "x", "lo": 0, "hi": 1}, {"name": "y", "lo": -1, "hi": 2}]})

    def table(n):
        x = rng.random(n)
        return pd.DataFrame({"x": x, "y": x + rng.normal(0, 0.1, n)})

    result = tstr(table(4000), table(4000), "y", schema=schema, seed=0)
    best = (1 / 12) / (1 / 12 + 0.01)
    assert result["score"] == "r2" and abs(result["value"] - best) <= 0.03
    assert result["low"] < result["value"] < result["high"] and result["high"] - result["low"] < 0.05


def test_the_tstr_entry_alone_equals_the_one_inside_evaluate_and_can_be_added_later():
    from privsyn_core.evaluation.scorecard import evaluate_tstr
    from privsyn_core.reporting import report

    real, synth = _table(900, 11), _table(700, 12, shift=0.1)
    kwargs = {"schema": SCHEMA, "subsample": 200, "repeats": 2, "bootstrap": 3, "max_rows": 600, "seed": 4}
    whole = evaluate(real, synth, target="c", **kwargs)
    assert whole["tstr"] == evaluate_tstr(real, synth, "c", SCHEMA, seed=4, max_rows=600)
    assert whole["tstr"]["n_train_real"] + whole["tstr"]["n_test"] == 600  # the evaluated rows, not all of them
    without = report.evaluate_subsampled(real, synth, SCHEMA)
    added = report.with_tstr(without, real, synth, SCHEMA, "c")
    direct = report.evaluate_subsampled(real, synth, SCHEMA, target="c")
    assert added["tstr"] == direct["tstr"] and added["_about"]["metrics"] == direct["_about"]["metrics"]
    assert "tstr" not in without and "tstr" not in without["_about"]["metrics"]  # the cached report is unchanged


# -- evaluate and the CLI --------------------------------------------------------------------------
def test_evaluate_reports_every_metric_with_provenance_and_floor():
    real, synth = _table(1000, 7), _table(800, 8, shift=0.1)
    report = evaluate(real, synth, schema=SCHEMA)
    for name in ("w1", "sliced_w1", "mmd", "marginal_tvd_1way", "marginal_tvd_2way", "correlation_gap"):
        assert np.isfinite(report[name]["value"]) and np.isfinite(report[name]["floor"]), name
    assert report["w1"]["method"] == "exact_emd" and report["w1"]["metric"] == "chebyshev"
    # a shifted synthetic table is further from the real one than the real halves are from each other
    for name in ("w1", "mmd", "marginal_tvd_1way"):
        assert report[name]["value"] > report[name]["floor"], name
    assert "boolean_marginals" not in report and "tstr" not in report
    assert report["_about"]["n_real"] == 1000 and len(report["_tables"]["marginal_tvd_2way"]) == 3


def test_evaluate_of_a_table_with_itself_is_at_its_floor_and_boolean_data_gets_k_way_errors():
    rng = np.random.default_rng(9)
    bits = pd.DataFrame(rng.random((300, 4)) < 0.5, columns=list("abcd"))
    report = evaluate(bits, bits, target="a")
    # subsample W1 / MMD of a table with itself is sampling noise, never above the disjoint real-vs-real floor
    for name in ("w1", "mmd"):
        assert report[name]["low"] <= report[name]["floor_high"], name
    assert report["w1"]["full_sample"]["value"] == 0 and report["w1"]["full_sample"]["method"] == "exact_emd"
    assert report["marginal_tvd_2way"]["value"] == 0 and not report["coverage"]["collapsed"]
    assert report["boolean_marginals"]["order_3"] == 0 and report["boolean_marginals"]["floor"] > 0
    assert report["tstr"]["task"] == "classification"
    # every metric of the report, and only those, comes with its declaration (how the app and the CLI read it)
    held = {name for name in report if not name.startswith("_")}
    assert held == set(report["_about"]["metrics"]) == set(METRICS)
    for name in held:
        declared = report["_about"]["metrics"][name]
        assert declared["better"] in ("lower", "higher") and declared["label"] and declared["unit"], name
        assert declared["interval"] == all(k in report[name] for k in ("low", "high")), name
    assert report["_about"]["metrics"]["tstr"]["better"] == "higher" and report["_about"]["metrics"]["w1"]["better"] \
        == "lower"


def test_cli_evaluate_prints_a_table_and_json(tmp_path, capsys):
    real, synth = tmp_path / "real.csv", tmp_path / "synth.csv"
    _table(300, 10).to_csv(real, index=False)
    _table(300, 11, shift=0.05).to_csv(synth, index=False)
    assert main(["evaluate", str(real), str(synth)]) == 0
    text = capsys.readouterr().out
    assert "w1" in text and "floor" in text and "_tables" not in text
    assert main(["evaluate", str(real), str(synth), "--json"]) == 0
    parsed = json.loads(capsys.readouterr().out)
    assert parsed["w1"]["method"] == "exact_emd" and "marginal_tvd_1way" in parsed["_tables"]
