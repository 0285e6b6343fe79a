"""DP bounds: exact budget, exact noise law, the threshold's guarantee, pathwise correctness, errors.

Statistical tests use fixed seeds and a false-failure rate of 1e-6 (OpenDP's convention).
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from scipy import stats

import privsyn_core as ps
from privsyn_core.data.dp_bounds import SENSITIVITY, bucket_edges, bucket_index, dp_bounds, kept_counts, quantile_bounds
from privsyn_core.privacy.noise import discrete_laplace, discrete_laplace_pmf

ALPHA = 1e-6


def table(n: int = 3000, seed: int = 0) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    return pd.DataFrame({"income": rng.lognormal(10, 0.5, n), "age": rng.integers(18, 90, n),
                         "delta": rng.normal(-3, 2, n)})


@pytest.mark.parametrize("epsilon, columns", [(1.0, ["income"]), (0.3, ["income", "age", "delta"]),
                                              (0.7, ["age", "delta"]), (1e-3, ["income", "age"])])
def test_the_ledger_sums_exactly_to_epsilon(epsilon, columns):
    result = dp_bounds(table(), columns, epsilon, rng=1)
    assert math.fsum(e for _, e in result.ledger) == epsilon
    assert len(result.ledger) == len(columns)
    assert [c.name for c in result.schema.columns] == columns and result.schema.dp_valid


def test_bucket_edges_are_public_symmetric_and_increasing():
    edges = bucket_edges()
    assert np.all(np.diff(edges) > 0)
    np.testing.assert_array_equal(edges, -edges[::-1])
    assert edges[-1] == 2.0**40 and edges[len(edges) // 2] == 2.0**-10
    assert bucket_index(np.array([-1e300, 0.0, 1e300]), edges).tolist() == [0, len(edges) // 2 - 1, len(edges) - 2]


@pytest.mark.parametrize("neighbouring", ["replace", "add_remove"])
def test_bucket_noise_is_exactly_discrete_laplace_of_the_stated_scale(neighbouring):
    """chi-square goodness of fit of noisy - true counts over 40 columns x 202 buckets."""
    rng = np.random.default_rng(7)
    n_cols, epsilon = 40, 8.0
    df = pd.DataFrame(rng.normal(5, 3, (500, n_cols)), columns=[f"c{i}" for i in range(n_cols)])
    result = dp_bounds(df, list(df.columns), epsilon, neighbouring=neighbouring, rng=3)
    sigma = SENSITIVITY[neighbouring] / (epsilon / n_cols)
    noise = np.concatenate([result.noisy_counts[c] - np.bincount(bucket_index(df[c].to_numpy(), result.edges),
                                                                 minlength=len(result.edges) - 1)
                            for c in df.columns])
    support = np.arange(-40, 41)
    expected = discrete_laplace_pmf(support, sigma) * len(noise)
    observed = np.array([(noise == z).sum() for z in support], dtype=float)
    tails = len(noise) - observed.sum(), len(noise) - expected.sum()
    chi2 = ((observed - expected) ** 2 / expected).sum() + (tails[0] - tails[1]) ** 2 / tails[1]
    critical = stats.chi2(df=len(support)).isf(ALPHA)
    assert chi2 < critical, f"chi-square {chi2:.1f} >= {critical:.1f}: fails with probability {ALPHA} if correct"


def test_no_empty_bucket_survives_the_threshold_except_with_probability_beta():
    """Over 300 runs the share of runs where an empty bucket survives is at most beta = 0.05 (binomial test)."""
    edges = bucket_edges()
    true = np.zeros(len(edges) - 1, dtype=np.int64)
    true[100] = 500
    sigma, runs = 4.0, 300
    rng = np.random.default_rng(11)
    survived = sum(int((kept_counts(true + discrete_laplace(sigma, true.shape, rng), sigma)[true == 0] > 0).any())
                   for _ in range(runs))
    limit = stats.binom(runs, 0.05).isf(ALPHA)
    assert survived <= limit, f"{survived} of {runs} runs kept an empty bucket (limit {limit:.0f} at alpha={ALPHA})"


def test_without_noise_the_bounds_are_the_quantile_buckets_exactly():
    """epsilon = 1e9 makes every noise draw 0 (p = e^{-1/sigma} underflows), so the result is pathwise exact."""
    df = table(5000, seed=4)
    tail = 0.02
    result = dp_bounds(df, ["income", "delta"], 1e9, tail=tail, rng=0)
    for column in ("income", "delta"):
        x = np.sort(df[column].to_numpy())
        lo, hi = result.schema[column].lo, result.schema[column].hi
        first, last = bucket_index(np.array([x[math.ceil(tail * len(x)) - 1], x[math.ceil((1 - tail) * len(x)) - 1]]),
                                   result.edges)
        assert (lo, hi) == (result.edges[first], result.edges[last + 1])
        assert np.mean(x < lo) <= tail and np.mean(x > hi) <= tail


def test_quantile_bounds_widen_to_the_whole_range_when_nothing_is_kept():
    edges = bucket_edges()
    assert quantile_bounds(np.zeros(len(edges) - 1), edges, 0.01) == (edges[0], edges[-1])
    result = dp_bounds(table(20), ["income"], 0.01, rng=0)
    assert result.warnings and "whole public range" in result.warnings[0]
    assert (result.schema["income"].lo, result.schema["income"].hi) == (edges[0], edges[-1])


def test_same_seed_same_bounds_and_integrality_is_declared_not_read_off_the_data():
    a, b = dp_bounds(table(), ["age"], 1.0, rng=9), dp_bounds(table(), ["age"], 1.0, rng=9)
    assert a.schema == b.schema and a.seed == 9
    assert not a.schema["age"].integer  # an int64 column is not integer unless the caller says so (public)
    assert dp_bounds(table(), ["age"], 1.0, rng=9, integer={"age"}).schema["age"].integer


@pytest.mark.parametrize("kwargs, error", [
    ({"columns": ["missing"], "epsilon": 1.0}, ps.DataError),
    ({"columns": ["x"], "epsilon": 0.0}, ps.ParameterError),
    ({"columns": ["x"], "epsilon": 1.0, "tail": 0.5}, ps.ParameterError),
    ({"columns": [], "epsilon": 1.0}, ps.ParameterError),
    ({"columns": ["x", "x"], "epsilon": 1.0}, ps.ParameterError),  # one column, two ledger shares: refused
    ({"columns": ["x"], "epsilon": 1.0, "neighbouring": "swap"}, ps.ParameterError),
])
def test_bad_input_raises_a_clear_error(kwargs, error):
    df = pd.DataFrame({"name": ["a", "b"], "x": [1.0, 2.0], "nan": [1.0, np.nan]})
    with pytest.raises(error):
        dp_bounds(df, **kwargs)


def test_values_that_are_not_numbers_are_left_out_never_refused_or_quoted():
    """Issue 37: a refusal naming a column's missing or text values answered a question about the data exactly.
    They are left out of the counts instead (a per-record filter: the noise's calibration holds), so the bounds
    with them equal the bounds without them under the same seed."""
    clean = table()
    dirty = clean.astype({"income": object})
    dirty.loc[[3, 7, 11], "income"] = ["Jane Doe 1961-04-02", None, np.nan]
    without = clean.drop(index=[3, 7, 11])
    assert dp_bounds(dirty, ["income"], 1.0, rng=4).schema == dp_bounds(without, ["income"], 1.0, rng=4).schema
    infinite = clean.assign(income=clean["income"].where(clean.index != 5, np.inf))
    assert dp_bounds(infinite, ["income"], 1.0, rng=4).schema["income"].hi <= 2.0 ** 40
