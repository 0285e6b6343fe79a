"""Resolution-robust marginal TVDs (issue 27 item 1): no bin grid can be gamed, and their intervals cover.

The evaluation's 1-way and 2-way TVDs average over public grids of 8, 13, 20 and 32 equal bins, each at four
offsets; an output quantised on one grid must not win because it shares the metric's grid.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from scipy.stats import beta, binom, t as student_t

from privsyn_core import Schema
from privsyn_core.evaluation.marginals import ROBUST_OFFSETS, ROBUST_RESOLUTIONS, marginal_tvd
from privsyn_core.evaluation.scorecard import EVAL_BOOTSTRAP, EVAL_CONFIDENCE, evaluate, rank_runs

COLS = ["a", "b", "c"]
UNIT3 = Schema.from_dict({"columns": [{"name": c, "lo": 0, "hi": 1} for c in COLS]})
TVDS = ("marginal_tvd_1way", "marginal_tvd_2way")
CHEAP_W1 = {"repeats": 2, "subsample": 100}  # the W1 repeats are not under test here


def _real(n: int = 3000, seed: int = 1) -> np.ndarray:
    rng = np.random.default_rng(seed)
    z = rng.standard_normal((n, 2))
    return np.clip(np.column_stack([0.5 + 0.15 * z[:, 0], 0.4 + 0.12 * (0.8 * z[:, 0] + 0.6 * z[:, 1]),
                                    rng.beta(2, 5, n)]), 0, 1)


def _ranks(evaluations: dict[str, dict], metric: str) -> dict[str, int]:
    table = rank_runs({name: ev[metric] for name, ev in evaluations.items()})
    return dict(zip(table["run"], table["rank"], strict=True))


def test_outputs_differing_only_in_bin_alignment_tie_and_a_worse_one_still_loses():
    """S: the real rows snapped to the centres of the 20-bin grid; S': to the centres of that grid shifted by half
    a bin; W: uniform rows, blind to the data. On the single 20-bin grid S matches the metric's own bins
    (TVD 0) and beats S' with disjoint intervals; on the robust grids S and S' tie, and W ranks below both."""
    X = _real()
    runs = {"S": np.minimum((np.floor(X * 20) + 0.5) / 20, 1.0), "S'": np.rint(X * 20) / 20,
            "W": np.random.default_rng(2).random(X.shape)}
    real = pd.DataFrame(X, columns=COLS)
    for bins in (20, "robust"):
        evaluations = {name: evaluate(real, pd.DataFrame(rows, columns=COLS), UNIT3, bins=bins, **CHEAP_W1)
                       for name, rows in runs.items()}
        for metric in TVDS:
            ranks = _ranks(evaluations, metric)
            if bins == 20:
                assert evaluations["S"][metric]["value"] == 0.0  # S's histogram on this grid is the real one
                assert ranks["S"] < ranks["S'"], (metric, ranks)
            else:
                assert ranks["S"] == ranks["S'"] < ranks["W"], (metric, ranks)
                assert evaluations["S"][metric]["grids"] == len(ROBUST_RESOLUTIONS) * len(ROBUST_OFFSETS)


def test_few_valued_integer_column_is_one_bin_per_value_atoms_and_categories_their_own():
    schema = Schema.from_dict({"columns": [
        {"name": "kids", "lo": 0, "hi": 6, "integer": True},
        {"name": "age", "lo": 0, "hi": 100, "integer": True},
        {"name": "income", "lo": 0, "hi": 10, "atoms": [0]},
        {"name": "colour", "kind": "categorical", "categories": ["r", "g", "b"]}]})
    real = pd.DataFrame({"kids": [0, 1, 2, 2], "age": [10, 20, 30, 40], "income": [0.0, 0.0, 3.0, 7.0],
                         "colour": ["r", "r", "g", "b"]})
    synth = pd.DataFrame({"kids": [0, 1, 3, 3], "age": [10, 20, 30, 40], "income": [0.0, 0.001, 3.0, 7.0],
                          "colour": ["r", "g", "g", "b"]})
    table = marginal_tvd(real, synth, bins="robust", schema=schema).set_index("column")
    assert table.loc["kids", "bins"] == "7 values" and table.loc["age", "bins"] == "16 grids"
    assert table.loc["income", "bins"] == "1 atom + 16 grids" and table.loc["colour", "bins"] == "3 categories"
    per_k = [f"tvd_{k}" for k in ROBUST_RESOLUTIONS]
    # kids: half the mass moves from 2 to 3, neighbours on the line but separate bins: TV 1/2 on every grid
    assert np.allclose(table.loc["kids", ["tvd", *per_k]].to_numpy(float), 0.5)
    # income: one of the two zeros becomes 0.001, off the atom into the continuous part: TV 1/4 on every grid
    assert np.allclose(table.loc["income", ["tvd", *per_k]].to_numpy(float), 0.25)
    assert table.loc["age", "tvd"] == 0 and np.isclose(table.loc["colour", "tvd"], 0.25)


def test_bins_must_be_a_positive_integer_or_robust():
    real = pd.DataFrame(_real(10), columns=COLS)
    for bad in (0, 2.5, "fine", True):
        with pytest.raises(Exception, match="bins"):
            marginal_tvd(real, real, bins=bad, schema=UNIT3)


def _robust_truth(law_p, law_q) -> float:
    """The robust 1-way TVD between two laws on [0, 1]: the mean over the grids of the TV of their bin masses."""
    values = []
    for k in ROBUST_RESOLUTIONS:
        for o in ROBUST_OFFSETS:
            edges = np.r_[0.0, (np.arange(1, k + (o > 0)) - o) / k, 1.0]
            values.append(0.5 * np.abs(np.diff(law_p.cdf(edges)) - np.diff(law_q.cdf(edges))).sum())
    return float(np.mean(values))


def test_bootstrap_intervals_of_the_robust_tvd_cover_the_truth_at_their_level():
    """Real ~ Beta(2, 5), synthetic ~ Beta(4, 3), n = m = 2000: the truth is the grids' mean TV of the two laws'
    bin masses. Over R = 80 seeds, the 95% intervals must cover it at least as often as a binomial(80, 0.90)
    lower 1e-6 quantile allows (a 95% procedure fails this with probability below 1e-6 even if its true
    coverage were only 90%), and the stated half-widths must match the spread of the values across seeds
    (ratio of mean stated standard error to the seeds' standard deviation in [0.6, 1.6]: with 80 seeds the
    standard deviation itself is known to about +-8%, 5 such errors either side)."""
    law_p, law_q = beta(2, 5), beta(4, 3)
    truth = _robust_truth(law_p, law_q)
    schema = Schema.from_dict({"columns": [{"name": "x", "lo": 0, "hi": 1}]})
    seeds, covered, values, stated = 80, 0, [], []
    multiplier = student_t.ppf(0.5 + EVAL_CONFIDENCE / 2, EVAL_BOOTSTRAP - 1)
    for seed in range(seeds):
        rng = np.random.default_rng(1000 + seed)
        real = pd.DataFrame({"x": law_p.rvs(2000, random_state=rng)})
        synth = pd.DataFrame({"x": law_q.rvs(2000, random_state=rng)})
        entry = evaluate(real, synth, schema, seed=seed, floor=False, **CHEAP_W1)["marginal_tvd_1way"]
        covered += entry["low"] <= truth <= entry["high"]
        values.append(entry["value"])
        stated.append((entry["high"] - entry["value"]) / multiplier)
    assert covered >= binom.ppf(1e-6, seeds, 0.90), (covered, truth, np.mean(values))
    assert 0.6 <= np.mean(stated) / np.std(values, ddof=1) <= 1.6


def test_replicate_weights_give_the_metrics_of_the_resampled_tables():
    """The bootstrap never builds a resampled table: replicate r's histograms are the real rows weighted by how
    often replicate r draws them. Each replicate's TVDs and correlation matrices must equal those of the table
    that replicate draws (real.iloc[draws[r]]), computed the plain way."""
    from privsyn_core.evaluation.marginals import _correlations, bin_grids, weighted_marginal_tvds
    from privsyn_core.evaluation.scorecard import _resampled

    schema = Schema.from_dict({"columns": [
        {"name": "a", "lo": 0, "hi": 1}, {"name": "k", "lo": 0, "hi": 5, "integer": True},
        {"name": "c", "kind": "categorical", "categories": ["x", "y", "z"]}]})
    rng = np.random.default_rng(3)
    real = pd.DataFrame({"a": rng.beta(2, 3, 400), "k": rng.integers(0, 6, 400), "c": rng.choice(list("xyz"), 400)})
    synth = pd.DataFrame({"a": rng.random(300), "k": rng.integers(0, 6, 300), "c": rng.choice(list("xyz"), 300)})
    R, S = schema.encode(real)[0], schema.encode(synth)[0]
    real_draws, real_weights = _resampled(len(R), 3, rng)
    synth_draws, synth_weights = _resampled(len(S), 3, rng)
    found = weighted_marginal_tvds(R, S, schema, bin_grids("robust"), real_weights, synth_weights)
    correlations = _correlations(R, real_weights)
    for r in range(3):
        resampled_real, resampled_synth = real.iloc[real_draws[r]], synth.iloc[synth_draws[r]]
        for order in (1, 2):
            plain = marginal_tvd(resampled_real, resampled_synth, order=order, bins="robust", schema=schema)
            assert np.allclose(found[order].tvd[:, :, r + 1].mean(axis=1), plain["tvd"], atol=1e-12)
        assert np.allclose(correlations[r + 1], np.corrcoef(R[real_draws[r]].T), atol=1e-12)
    assert np.allclose(correlations[0], np.corrcoef(R.T), atol=1e-12)
