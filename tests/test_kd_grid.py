"""kd_grid (seed 002, Algorithms 1, 4-5): budget, exact implicit empty bins (Lemma 9), boundaries, accuracy.

Statistical tests use fixed seeds and a false-failure rate ALPHA = 1e-6 per test (as OpenDP does).
"""

import math

import numpy as np
import pandas as pd
import pytest
from scipy import stats

import privsyn_core as ps
from privsyn_core.mechanisms.kdtree import kd_empty
from privsyn_core.mechanisms.kdtree.kd_empty import (
    conditional_weights,
    integer_threshold,
    sample_empty_cells,
    sample_ids_excluding,
    tail_probability,
)
from privsyn_core.privacy.noise import discrete_laplace, discrete_laplace_pmf

ALPHA = 1e-6


def two_sample_pvalue(a: np.ndarray, b: np.ndarray, min_total: int = 20) -> float:
    """Chi-square two-sample test of two samples of integers; sparse values are pooled into one bin."""
    values = np.union1d(a, b)
    table = np.array([[np.count_nonzero(s == v) for v in values] for s in (a, b)], dtype=float)
    dense = table.sum(0) >= min_total
    table = np.column_stack([table[:, dense], table[:, ~dense].sum(1)])
    table = table[:, table.sum(0) > 0]
    return stats.chi2_contingency(table).pvalue


def grid(X, eps, **kw):
    return ps.synthesize(X, "kd_grid", eps, schema=ps.unit_schema(np.shape(X)[1]), **kw)


# -- privacy calibration and budget ---------------------------------------------------------------------------------
@pytest.mark.parametrize("relation, sensitivity", [("replace", 2), ("add_remove", 1)])
@pytest.mark.parametrize("eps", [0.1, 1 / 3, 0.7, 5.0])
def test_ledger_sums_exactly_and_noise_scale_is_sensitivity_over_epsilon(relation, sensitivity, eps):
    X = np.random.default_rng(0).random((300, 2))
    result = grid(X, eps, neighbouring=relation, w=0.1, rng=3)
    assert math.fsum(e for _, e in result.ledger) == eps == result.epsilon
    assert result.params["noise_scale"] == sensitivity / eps
    assert result.dp_valid


@pytest.mark.parametrize("relation, sensitivity", [("replace", 2), ("add_remove", 1)])
def test_bin_noise_is_discrete_laplace_at_the_calibrated_scale(relation, sensitivity):
    eps = 0.8
    X = np.random.default_rng(1).random((5000, 2))
    result = grid(X, eps, neighbouring=relation, w=1 / 50, t=-1e9, rng=2)  # t so low every bin is listed
    cells = result.diagnostics["cells"]
    nonempty = cells["true_count"] > 0
    noise = (cells["noisy_count"] - cells["true_count"])[nonempty]
    assert noise.dtype.kind == "i" and len(noise) > 2000
    support = np.arange(-40, 41)
    observed = np.array([np.count_nonzero(noise == z) for z in support], dtype=float)
    expected = discrete_laplace_pmf(support, sensitivity / eps) * len(noise)
    keep = expected >= 5
    obs = np.append(observed[keep], len(noise) - observed[keep].sum())
    exp = np.append(expected[keep], len(noise) - expected[keep].sum())
    assert stats.chisquare(obs, exp).pvalue > ALPHA


# -- the discrete conditional law of Algorithm 5 ----------------------------------------------------------------------
@pytest.mark.parametrize("threshold, scale", [(1, 0.5), (4, 2.0), (30, 10.0)])
def test_tail_probability_is_the_exact_discrete_laplace_tail(threshold, scale):
    z = np.arange(threshold, threshold + 20_000)
    assert math.isclose(tail_probability(threshold, scale), discrete_laplace_pmf(z, scale).sum(), rel_tol=1e-12)


def test_integer_threshold_keeps_exactly_counts_at_least_t_and_positive():
    for t in (-3.0, 0.0, 0.2, 1.0, 2.5, 7.0):
        v = np.arange(-10, 20)
        assert np.array_equal(v >= integer_threshold(t), (v >= t) & (v > 0))


def test_conditional_weights_follow_the_conditioned_discrete_laplace():
    threshold, scale = 4, 2.0
    draws = conditional_weights(threshold, scale, 100_000, np.random.default_rng(5))
    assert draws.min() >= threshold
    support = np.arange(threshold, threshold + 60)
    expected = discrete_laplace_pmf(support, scale) / tail_probability(threshold, scale) * len(draws)
    observed = np.array([np.count_nonzero(draws == z) for z in support], dtype=float)
    keep = expected >= 5
    obs = np.append(observed[keep], len(draws) - observed[keep].sum())
    exp = np.append(expected[keep], len(draws) - expected[keep].sum())
    assert stats.chisquare(obs, exp).pvalue > ALPHA


# -- Lemma 9: explicit (Alg 4) and implicit (Alg 5) empty bins have the same law --------------------------------------
@pytest.mark.parametrize("enumerate_limit", [kd_empty.ENUMERATE_LIMIT, 0])  # 0 forces the rejection sampler
def test_implicit_empty_bins_equal_explicit_in_distribution(monkeypatch, enumerate_limit):
    monkeypatch.setattr(kd_empty, "ENUMERATE_LIMIT", enumerate_limit)
    space, scale, threshold, reps = 529, 2.0, 4, 2000  # K = 500 empty bins, p = 0.084
    nonempty = np.sort(np.random.default_rng(0).choice(space, 29, replace=False))
    empty = np.setdiff1d(np.arange(space), nonempty)

    eta = discrete_laplace(scale, (reps, len(empty)), np.random.default_rng(1))  # Algorithm 4
    passed = eta >= threshold
    explicit_counts, explicit_weights = passed.sum(1), eta[passed]
    explicit_ids = np.broadcast_to(empty, eta.shape)[passed]

    rng = np.random.default_rng(2)
    implicit = [sample_empty_cells(space, nonempty, threshold, scale, rng, 1e7) for _ in range(reps)]
    for ids, weights in implicit:  # pathwise: distinct empty bins, weights above the threshold
        assert len(np.unique(ids)) == len(ids) and not np.isin(ids, nonempty).any()
        assert len(weights) == len(ids) and (weights >= threshold).all()
    implicit_counts = np.array([len(ids) for ids, _ in implicit])
    implicit_ids = np.concatenate([ids for ids, _ in implicit])
    implicit_weights = np.concatenate([w for _, w in implicit])

    assert two_sample_pvalue(explicit_counts, implicit_counts) > ALPHA
    assert two_sample_pvalue(explicit_weights, implicit_weights) > ALPHA
    assert two_sample_pvalue(explicit_ids, implicit_ids) > ALPHA  # which bins: uniform over the empty ones


def test_rejection_sampler_draws_distinct_free_ids_from_a_huge_space():
    excluded = np.sort(np.random.default_rng(0).choice(2**40, 1000, replace=False))
    ids = sample_ids_excluding(2**40, excluded, 5000, np.random.default_rng(1))
    assert len(np.unique(ids)) == 5000 and not np.isin(ids, excluded).any() and ids.min() >= 0 and ids.max() < 2**40
    # nearly full small space through the rejection path: every free id exactly once
    excluded = np.arange(0, 100, 3)
    free = np.setdiff1d(np.arange(100), excluded)
    kd_empty_limit = kd_empty.ENUMERATE_LIMIT
    try:
        kd_empty.ENUMERATE_LIMIT = 0
        ids = sample_ids_excluding(100, excluded, len(free), np.random.default_rng(2))
    finally:
        kd_empty.ENUMERATE_LIMIT = kd_empty_limit
    assert np.array_equal(np.sort(ids), free)


@pytest.mark.slow
def test_mechanism_output_law_equals_the_explicit_algorithm_1():
    """Whole mechanism on 20 bins vs Algorithm 1 run literally (noise on all 20 bins)."""
    eps, t, reps = 1.0, 3.0, 1500
    X = np.r_[np.full(12, 0.11), np.full(5, 0.52), np.full(2, 0.97)][:, None]
    counts = np.bincount(np.floor(X[:, 0] * 20).astype(int), minlength=20)
    noisy = counts + discrete_laplace(2 / eps, (reps, 20), np.random.default_rng(0))
    explicit_released = (noisy >= t).sum(1)
    explicit_total = np.where(noisy >= t, noisy, 0).sum(1)
    run = ps.get_mechanism("kd_grid").run
    outs = [run(X, eps, neighbouring="replace", n_synthetic=1, rng=np.random.default_rng(s), w=0.05, t=t,
                sample="center", bandwidth=0.1) for s in range(reps)]
    released = np.array([len(o.weights) for o in outs])
    total = np.array([o.weights.sum() for o in outs]).astype(np.int64)
    assert two_sample_pvalue(explicit_released, released) > ALPHA
    assert two_sample_pvalue(explicit_total, total) > ALPHA


# -- outputs, boundaries, edge cases ----------------------------------------------------------------------------------
def test_atoms_are_bin_centres_with_weights_at_least_t_and_rows_come_from_them():
    X = np.random.default_rng(4).beta(2, 5, size=(3000, 2))
    result = grid(X, 1.0, w=0.125, t=6.5, rng=7, sample="center")
    k = result.params["bins_per_axis"]
    assert k == 8 and result.params["threshold"] == 7
    assert np.allclose((result.unit * k - 0.5) % 1, 0) and (result.weights >= 7).all()
    assert len(result.data) == 3000
    assert np.isin(result.unit_rows.view([("", float)] * 2), result.unit.view([("", float)] * 2)).all()
    cells = result.diagnostics["cells"]
    assert cells["true_count"].sum() == 3000
    assert np.array_equal(np.sort(cells["count"][cells["count"] > 0]), np.sort(result.weights))


def test_uniform_sampling_puts_rows_inside_released_bins():
    X = np.random.default_rng(5).random((2000, 2))
    result = grid(X, 2.0, w=0.25, sample="uniform", n_synthetic=5000, rng=1)
    cells = np.floor(result.unit_rows * 4)
    centres = np.floor(result.unit * 4)
    assert len(result.unit_rows) == 5000
    assert np.isin(cells.view([("", float)] * 2), centres.view([("", float)] * 2)).all()


def test_boundary_points_and_clipping_through_a_schema():
    # x = 1.0 is in the last bin; a point on a bin edge goes to the upper bin (floor indexing); outside points clip
    df = pd.DataFrame({"a": [1.0, 0.5, 0.25, -3.0, 7.0]})
    schema = ps.Schema((ps.Column("a", "numeric", lo=0.0, hi=1.0),))
    result = ps.synthesize(df, "kd_grid", 1.0, schema=schema, w=0.25, t=-5, rng=0)
    cells = result.diagnostics["cells"]
    true = dict(zip(np.round(cells["lo"][:, 0], 3), cells["true_count"], strict=True))
    assert true[0.75] == 2 and true[0.5] == 1 and true[0.25] == 1 and true[0.0] == 1
    assert result.clipped == {"a": 2}


def test_n_equals_one_and_tiny_budget_release_nothing_but_still_give_rows():
    result = grid(np.array([[0.3, 0.9]]), 0.01, t=1000.0, rng=0)  # P[release] = e^{-999/200}/2 < 0.004
    assert len(result.weights) == 0 and len(result.data) == 1
    assert any("nothing was released" in w for w in result.warnings)
    assert math.fsum(e for _, e in result.ledger) == 0.01


def test_d1_and_same_seed_same_output():
    X = np.random.default_rng(6).normal(0.5, 0.1, size=(4000, 1)).clip(0, 1)
    a, b, c = (grid(X, 0.5, rng=s) for s in (11, 11, 12))
    assert np.array_equal(a.unit, b.unit) and np.array_equal(a.weights, b.weights)
    assert a.data.equals(b.data)
    assert not (np.array_equal(a.weights, c.weights) and a.data.equals(c.data))


def test_d10_with_2_to_the_40_bins_samples_empty_bins_implicitly():
    X = np.random.default_rng(7).random((20_000, 10)) ** 3
    result = grid(X, 1.0, w=1 / 16, t=40.0, rng=3)  # T = 40, K p ~ 2^40 e^{-20}/1.6 ~ 1400 empty bins
    assert result.params["cells"] == 2**40
    cells = result.diagnostics["cells"]
    empty = cells["true_count"] == 0
    assert 900 < empty.sum() < 2000  # Binomial(K, p) with mean ~1400: far beyond 10 sd either side
    assert (cells["noisy_count"][empty] >= 40).all()
    listed = np.floor(cells["lo"] * 16 + 0.5).astype(np.int64)
    assert len(np.unique(listed, axis=0)) == len(listed)  # empty bins never coincide with data bins or each other


def test_refuses_thresholds_that_would_emit_mostly_noise():
    with pytest.raises(ps.ParameterError, match="raise t"):
        grid(np.random.default_rng(0).random((100, 10)), 1.0, w=1 / 16, t=0.0, rng=0)
    with pytest.raises(ps.ParameterError, match="2\\^62"):
        grid(np.random.default_rng(0).random((10, 20)), 1.0, w=1 / 16, rng=0)


def test_automatic_width_minimises_theorem_3_and_grows_with_epsilon_n():
    from privsyn_core.mechanisms.kdtree.kd_grid import auto_bins
    small, large = auto_bins(1000, 2, 1.0, 0.1), auto_bins(10**6, 2, 1.0, 0.1)
    assert 1 <= small < large
    n, d, eps, sigma = 10**5, 2, 1.0, 0.1
    k = auto_bins(n, d, eps, sigma)
    L = math.log(n + 1)

    def bound(k):
        J = k**d
        return 8 * J * L / (eps * n - 4 * J * L) + math.sqrt(d) / (2 * k * sigma * math.sqrt(math.e))
    assert bound(k) <= min(bound(k - 1), bound(k + 1))


# -- accuracy: Theorem 3 as a probabilistic inequality (spec A.9) -----------------------------------------------------
@pytest.mark.slow
def test_theorem_3_sup_kde_bound_holds_with_probability_one_minus_delta():
    """d=1, R=10, w=0.5 (k=20), n=10^4, eps=1, delta=0.05, t=0, Gaussian kernel sigma=1 in data units.

    Bound: 2/(eps n/(4J log(1/delta)) - 1) + (w/2) sqrt(d/e) ~ 0.20.  The sup over x is estimated by a max over
    2001 query points (a lower bound), so an observed violation is a real one.  The proof's Laplace tail
    P[|Lap(2/eps)| >= a] = e^{-a eps/2} becomes 2p^a/(1+p) <= 1.25 e^{-a eps/2} for Lap_Z, so violations are
    tested against delta' = 1.25 delta with a binomial test at ALPHA.
    """
    n, eps, delta, J, w, reps = 10_000, 1.0, 0.05, 20, 0.5, 120
    data = np.random.default_rng(8).normal(5.0, 1.5, n).clip(0, 10)
    bound = 2 / (eps * n / (4 * J * math.log(1 / delta)) - 1) + (w / 2) * math.sqrt(1 / math.e)
    query = np.linspace(-1, 11, 2001)
    kd_p = np.exp(-0.5 * (query[:, None] - data[None, :]) ** 2).mean(1)
    violations = 0
    for seed in range(reps):
        result = ps.synthesize(data[:, None] / 10, "kd_grid", eps, schema=ps.unit_schema(1), w=1 / J, t=0.0,
                               n_synthetic=1, rng=seed)
        centres, weights = result.unit[:, 0] * 10, result.weights / result.weights.sum()
        kd_q = np.exp(-0.5 * (query[:, None] - centres[None, :]) ** 2) @ weights
        violations += np.abs(kd_q - kd_p).max() > bound
    assert violations <= stats.binom.ppf(1 - ALPHA, reps, 1.25 * delta)


def test_release_is_in_canonical_bin_order_so_data_bins_and_sampled_empty_bins_look_alike():
    X = np.random.default_rng(9).random((3000, 3)) ** 4
    result = grid(X, 1.0, w=1 / 32, t=12.0, rng=4)  # J = 32768: non-empty and sampled empty bins both released
    cells = result.diagnostics["cells"]
    assert ((cells["true_count"] == 0) & (cells["count"] > 0)).any() and (cells["true_count"] > 0).any()
    ids = np.ravel_multi_index(tuple(np.floor(result.unit * 32).astype(np.int64).T), (32,) * 3)
    assert (np.diff(ids) > 0).all()
