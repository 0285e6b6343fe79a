"""PMM (registry key ``pmm``): spec ``pmm-psmm-kdtree.md`` Part B, [HVZ23] Algorithms 3-4.

Statistical tests use fixed seeds and thresholds from the maths; where a test can fail by
chance its false-failure rate is stated (alpha = 1e-6).
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from scipy import stats

import privsyn_core as ps
from privsyn_core.data.datasets import two_blobs
from privsyn_core.errors import DataError
from privsyn_core.evaluation.distances import w1
from privsyn_core.mechanisms.hvz23.pmm import DIAGNOSTIC_MAX_CELLS, SPEC as PMM, max_pmm_depth, resolve_depth
from privsyn_core.mechanisms.hvz23.pmm_tree import (
    MAX_DEPTH,
    THM43_CONSTANT,
    accuracy_bound,
    bound_opt_depth,
    consistency,
    cuts_per_axis,
    flux,
    leaf_counts,
    leaf_ids,
    level_boxes,
    level_corners,
    level_delta,
    level_diameter,
    noise_plan,
    paper_depth,
    pathwise_bound,
    proportional_split,
    tree_counts,
    uniform_split,
)
from privsyn_core.privacy.noise import discrete_laplace, discrete_laplace_pmf, discrete_laplace_variance

ALPHA = 1e-6
RELATIONS = ("add_remove", "replace")


def run_pmm(X, epsilon=1.0, *, neighbouring="add_remove", n_synthetic=None, seed=0, depth="paper",
            consistency_rule="proportional", sample="uniform"):
    return PMM.run(np.asarray(X, dtype=float), epsilon, neighbouring=neighbouring, n_synthetic=n_synthetic,
               rng=np.random.default_rng(seed), depth=depth, consistency=consistency_rule, sample=sample)


def spec_leaf_ids(X, r, d):
    """The spec's reference bit loop (B.6), MSB = level-0 bit."""
    c = np.array([r // d + (a < r % d) for a in range(d)])
    k = np.clip(np.floor(X * 2.0 ** c).astype(np.int64), 0, 2 ** c - 1)
    ids = np.zeros(len(X), np.int64)
    for j in range(r):
        a = j % d
        ids = (ids << 1) | ((k[:, a] >> (c[a] - 1 - j // d)) & 1)
    return ids


# -- partition ---------------------------------------------------------------------------
@pytest.mark.parametrize("d", [1, 2, 3, 4])
def test_leaf_ids_match_the_spec_bit_interleaving(d):
    rng = np.random.default_rng(d)
    X = rng.random((400, d))
    X[:20] = rng.integers(0, 5, (20, d)) / 4  # dyadic points on cut planes, 0.0 and 1.0
    for r in range(0, 12):
        ids = leaf_ids(X, r)
        np.testing.assert_array_equal(ids, spec_leaf_ids(X, r, d))
        np.testing.assert_array_equal(leaf_counts(X, r), np.bincount(ids, minlength=2 ** r))
        lo, hi = level_boxes(r, d)
        assert np.all((lo[ids] <= X) & (hi[ids] >= X))


def test_level_geometry_matches_eq_4_1():
    for d in range(1, 6):
        for j in range(0, 13):
            lo, hi = level_boxes(j, d)
            diam = (hi - lo).max(axis=1)
            assert np.all(diam == level_diameter(j, d)) and level_diameter(j, d) == 2.0 ** -(j // d)
            assert level_delta(j, d) == diam.sum()
            assert np.isclose(np.prod(hi - lo, axis=1).sum(), 1.0)  # the cells tile the cube
    assert level_delta(-1, 3) == level_delta(0, 3) == 1.0


def test_kept_level_boxes_are_the_boxes_of_their_own_level_and_dimension_read_only_and_bounded(monkeypatch):
    from privsyn_core.mechanisms.hvz23 import pmm_tree

    monkeypatch.setattr(pmm_tree, "_kept_boxes", type(pmm_tree._kept_boxes)())
    monkeypatch.setattr(pmm_tree, "LEVEL_BOXES_KEPT_BYTES", 2 * 2**10 * 3 * 8 * 2)  # two levels of 2^10 cells, d = 3
    for _ in range(2):  # computed, then kept
        for j, d in [(10, 3), (10, 2), (3, 3), (10, 3), (12, 3), (0, 1)]:
            side = 2.0 ** -cuts_per_axis(j, d).astype(float)
            lo, hi = level_boxes(j, d)
            np.testing.assert_array_equal(lo, level_corners(j, d) * side)
            np.testing.assert_array_equal(hi, (level_corners(j, d) + 1) * side)
            assert lo.shape == (2 ** j, d) and not lo.flags.writeable and not hi.flags.writeable
            held = sum(a.nbytes + b.nbytes for a, b in pmm_tree._kept_boxes.values())
            assert held <= pmm_tree.LEVEL_BOXES_KEPT_BYTES
    assert (12, 3) not in pmm_tree._kept_boxes, "larger than the whole bound: returned, not kept"
    assert level_boxes(10, 2) is level_boxes(10, 2) and level_boxes(10, 2)[0] is not level_boxes(10, 3)[0]


def test_every_level_is_the_pairwise_sum_of_its_children():
    X = np.random.default_rng(1).random((300, 2))
    levels = tree_counts(leaf_counts(X, 7), 7)
    assert [len(c) for c in levels] == [2 ** j for j in range(8)]
    for j in range(7):
        np.testing.assert_array_equal(levels[j], levels[j + 1][0::2] + levels[j + 1][1::2])
    assert levels[0][0] == 300


# -- noise plan, budget identities ---------------------------------------------------------
@pytest.mark.parametrize("neighbouring", RELATIONS)
@pytest.mark.parametrize("d", [1, 2, 3, 4, 5])
def test_budget_identities_are_exact(d, neighbouring):
    for epsilon in (0.1, 1.0, 0.7, 3.3, 1e-3):
        for r in range(0, 20):
            plan = noise_plan(r, d, epsilon, neighbouring)
            assert math.fsum(e for _, e in plan.ledger) == epsilon
            finite = np.isfinite(plan.sigmas)
            assert math.isclose(math.fsum(plan.sensitivity / plan.sigmas[finite]), epsilon, rel_tol=1e-13) or r == 0
            assert plan.sensitivity == (1 if neighbouring == "add_remove" else 2)
            if neighbouring == "replace":
                assert plan.sigmas[0] == np.inf and len(plan.ledger) == max(r, 1)
            else:
                assert finite.all() and len(plan.ledger) == r + 1


def test_spec_example_sigmas_b42():
    np.testing.assert_allclose(noise_plan(8, 1, 1.0).sigmas, np.full(9, 9.0), rtol=1e-12)
    np.testing.assert_allclose(noise_plan(9, 2, 1.0).sigmas,
                               [22.49, 22.49, 15.90, 15.90, 11.24, 11.24, 7.95, 7.95, 5.62, 5.62], atol=6e-3)
    np.testing.assert_allclose(noise_plan(9, 3, 1.0).sigmas,
                               [31.9, 31.9, 22.56, 15.95, 15.95, 11.28, 7.97, 7.97, 5.64, 3.99], atol=6e-3)
    # d = 1 erratum: sigma_j = (r + 1)/eps = log2(eps n)/eps, not log2(eps n)^2/eps
    assert noise_plan(paper_depth(1024, 1.0, 1), 1, 1.0).sigmas[0] == pytest.approx(math.log2(1024))


def test_replace_variant_scales_b45():
    plan = noise_plan(9, 2, 1.0, "replace")
    q = np.sqrt([level_delta(j - 1, 2) for j in range(1, 10)])
    np.testing.assert_allclose(plan.sigmas[1:], 2 * q.sum() / q, rtol=1e-12)
    assert noise_plan(0, 2, 0.5, "replace").ledger[0][1] == 0.5


def test_ledger_through_synthesize_is_one_entry_per_level():
    df = pd.DataFrame({"x": np.linspace(0, 1, 200), "y": np.linspace(0, 1, 200) ** 2})
    schema = ps.Schema.from_dict({"columns": [{"name": "x", "lo": 0, "hi": 1}, {"name": "y", "lo": 0, "hi": 1}]})
    for neighbouring in RELATIONS:
        res = ps.synthesize(df, "pmm", 0.37, schema=schema, neighbouring=neighbouring, rng=5, depth=8)
        r = res.params["depth"]
        assert res.epsilon == 0.37 and math.fsum(e for _, e in res.ledger) == 0.37
        assert len(res.ledger) == (r + 1 if neighbouring == "add_remove" else r)
        assert all(stage.startswith(f"level {j}:") for j, (stage, _) in
                   zip(range(0 if neighbouring == "add_remove" else 1, r + 1), res.ledger, strict=True))
        assert res.dp_valid


# -- depth rules -------------------------------------------------------------------------
def test_paper_depth_cor_4_4():
    assert paper_depth(1000, 1.0, 1) == 8 and paper_depth(1000, 1.0, 2) == 9 and paper_depth(1000, 1.0, 5) == 9
    assert paper_depth(1024, 1.0, 2) == 10 and paper_depth(1023, 1.0, 2) == 9
    assert paper_depth(3, 0.5, 2) == 0 and paper_depth(1, 1.0, 1) == 0 and paper_depth(3, 1.0, 1) == 0


def test_bound_opt_depth_and_bounds_match_spec_table_b46():
    table = {(1000, 1): (8, 0.233, 5, 0.133), (1000, 2): (9, 1.49, 4, 0.38), (1000, 3): (9, 3.00, 3, 0.58),
             (1000, 5): (9, 5.30, 5, 0.92), (10**4, 1): (12, 0.048, 7, 0.026), (10**4, 2): (13, 0.72, 8, 0.16),
             (10**5, 3): (16, 0.85, 9, 0.15), (10**6, 5): (19, 1.51, 10, 0.26)}
    for (n, d), (r_paper, b_paper, r_opt, b_opt) in table.items():
        assert paper_depth(n, 1.0, d) == r_paper and bound_opt_depth(n, 1.0, d) == r_opt
        assert accuracy_bound(n, 1.0, d, r_paper) == pytest.approx(b_paper, abs=0.006, rel=0.01)
        assert accuracy_bound(n, 1.0, d, r_opt) == pytest.approx(b_opt, abs=0.006, rel=0.01)
        bounds = [accuracy_bound(n, 1.0, d, r) for r in range(MAX_DEPTH + 1)]
        assert min(bounds) == bounds[r_opt]


def test_resolve_depth_caps_and_explicit():
    assert resolve_depth(5, 10, 1.0, 2, "replace") == (5, [])
    r, warnings = resolve_depth("paper", 10**9, 1.0, 2, "add_remove")
    assert r == min(MAX_DEPTH, max_pmm_depth()) and "capped" in warnings[0]


# -- the corrected constant of Thm 4.3 -------------------------------------------------------
def test_thm43_constant_is_2_sqrt_2_erratum():
    """Substituting (A.4) into Thm 4.2 gives 2 sqrt(2) S^2/(eps n): twice the printed value."""
    assert 2 * math.sqrt(2) == THM43_CONSTANT
    for d, r, n, eps in [(1, 8, 1000, 1.0), (2, 9, 1000, 1.0), (3, 7, 5000, 0.5)]:
        q = np.sqrt([level_delta(j - 1, d) for j in range(r + 1)])
        S = q.sum()
        corrected = 2 * math.sqrt(2) * S ** 2 / (eps * n) + level_diameter(r, d)
        printed = math.sqrt(2) * S ** 2 / (eps * n) + level_diameter(r, d)
        assert accuracy_bound(n, eps, d, r) == pytest.approx(corrected, rel=1e-12)
        assert corrected - level_diameter(r, d) == pytest.approx(2 * (printed - level_diameter(r, d)), rel=1e-12)


def _mean_abs(sigma):
    p = math.exp(-1 / sigma)
    return 2 * p / (1 - p * p)  # E|Z| for Lap_Z(sigma): sum_k P(|Z| > k), P(|Z| > k) = 2 p^(k+1)/(1+p)


def _mean_max_abs(sigma):
    p = math.exp(-1 / sigma)  # E max(|Z1|,|Z2|) = sum_k 1 - (1 - t_k)^2, t_k = 2 p^(k+1)/(1+p)
    return 4 * p / (1 - p * p) - 4 * p * p / ((1 + p) ** 2 * (1 - p * p))


def test_printed_sqrt2_constant_is_below_the_proofs_own_expectation():
    """The expectation of the pathwise bound of the proof of Thm 4.2 (exact, closed form)
    exceeds the printed sqrt(2) S^2/(eps n) + delta, and stays below the corrected bound."""
    d, r, n, eps = 2, 9, 1000, 1.0
    plan = noise_plan(r, d, eps)
    expected = (_mean_abs(plan.sigmas[0]) * level_delta(0, d)
                + sum(level_delta(j - 1, d) * _mean_max_abs(plan.sigmas[j]) for j in range(1, r + 1))) / n
    S2 = (np.sqrt([level_delta(j - 1, d) for j in range(r + 1)]).sum()) ** 2
    assert expected > math.sqrt(2) * S2 / (eps * n)
    assert expected + level_diameter(r, d) < accuracy_bound(n, eps, d, r)
    # the closed forms agree with simulation (4-sigma band of the sample mean: false-failure rate < 1e-4)
    z = discrete_laplace(7.0, (2, 200_000), np.random.default_rng(3))
    m = np.abs(z).max(axis=0)
    assert abs(m.mean() - _mean_max_abs(7.0)) < 4 * m.std() / math.sqrt(len(m))
    assert abs(np.abs(z[0]).mean() - _mean_abs(7.0)) < 4 * np.abs(z[0]).std() / math.sqrt(z.shape[1])


@pytest.mark.slow
def test_realised_mean_w1_is_below_the_corrected_bound():
    X = np.random.default_rng(11).random((600, 2))
    for depth in ("paper", "bound_opt"):
        runs = [run_pmm(X, 1.0, seed=s, depth=depth) for s in range(6)]
        mean_w1 = np.mean([w1(X, out.unit) for out in runs])
        assert mean_w1 < runs[0].params["accuracy_bound"]


# -- consistency (Algorithm 3) --------------------------------------------------------------
def test_flux_example_lemma_4_6():
    assert flux(1, 9, 6, 7) == 2 and flux(6, 7, 1, 9) == 2
    assert flux(1, 2, 3, 4) == 0 and flux(3, 3, 3, 3) == 0 and flux(0, 5, 5, 0) == 5


def _random_tree(rng, r, d=2, n=None):
    X = rng.random((n or rng.integers(1, 400), d)) ** 3  # skewed: many empty cells
    true = tree_counts(leaf_counts(X, r), r)
    sigmas = noise_plan(r, d, float(rng.choice([0.2, 1.0, 5.0]))).sigmas
    lambdas = [discrete_laplace(s, 2 ** j, rng) for j, s in enumerate(sigmas)]
    noisy = [np.maximum(t + lam, 0) for t, lam in zip(true, lambdas, strict=True)]
    return true, lambdas, noisy


@pytest.mark.parametrize("rule", ["proportional", "uniform"])
def test_consistency_invariants_and_flux_bound_lemma_4_9(rule):
    rng = np.random.default_rng(7)
    for _ in range(60):
        r = int(rng.integers(0, 9))
        true, lambdas, noisy = _random_tree(rng, r)
        m = consistency(noisy, rule, rng)
        assert m[0][0] == noisy[0][0]
        for j in range(r):
            a, b, M = noisy[j + 1][0::2], noisy[j + 1][1::2], m[j]
            x, y = m[j + 1][0::2], m[j + 1][1::2]
            assert m[j + 1].dtype == np.int64 and np.all(m[j + 1] >= 0)
            np.testing.assert_array_equal(x + y, M)
            assert np.all(flux(x, y, a, b) == 0)  # comparable with the noisy children
            bound = np.maximum(np.abs(lambdas[j + 1][0::2]), np.abs(lambdas[j + 1][1::2]))
            assert np.all(flux(true[j + 1][0::2], true[j + 1][1::2], x, y) <= bound)


def test_split_rules_are_the_papers_choices():
    rng = np.random.default_rng(2)
    a, b, M = (rng.integers(0, 50, 5000) for _ in range(3))
    x = proportional_split(a, b, M)
    s = a + b
    expected = np.array([(int(mm) * int(aa)) // int(ss) if ss else int(mm) // 2
                         for aa, ss, mm in zip(a, s, M, strict=True)])
    np.testing.assert_array_equal(x, expected)
    u = uniform_split(a, b, M, rng)
    target = (M + a - b) / 2
    low, high = np.maximum(0, np.minimum(a, M - b)), np.minimum(M, np.maximum(a, M - b))
    inside = (target >= low) & (target <= high)
    assert np.all(np.abs(u - target)[inside] <= 0.5)  # the closest lattice point of the segment
    assert np.all(u[~inside] == np.where(target[~inside] < low[~inside], low[~inside], high[~inside]))
    ties = inside & ((M + a - b) % 2 == 1)
    ups = int((u[ties] > target[ties]).sum())  # fair coin: two-sided binomial test, alpha = 1e-6
    assert stats.binomtest(ups, int(ties.sum()), 0.5).pvalue > ALPHA


def test_proportional_split_is_exact_beyond_int64_products():
    a = np.array([3 * 10**9 + 7, 1, 0])
    b = np.array([10**9, 2, 0])
    M = np.array([5 * 10**9 + 3, 10, 7])
    x = proportional_split(a, b, M)
    assert x.tolist() == [(5 * 10**9 + 3) * (3 * 10**9 + 7) // (4 * 10**9 + 7), 3, 3]


# -- accuracy: the pathwise bound ------------------------------------------------------------
def test_pathwise_w1_bound_holds_on_every_run():
    """W1 <= (|lambda_root| + D)/n + delta (spec B.4.6) on 30 seeded runs, exact l-infinity W1."""
    rng = np.random.default_rng(2024)
    for run in range(30):
        d = int(rng.integers(1, 4))
        n = int(rng.integers(40, 801))
        X = rng.random((n, d)) ** float(rng.choice([1.0, 3.0]))
        out = run_pmm(X, float(rng.choice([0.3, 1.0, 4.0])), neighbouring=RELATIONS[run % 2], seed=run,
                      depth=["paper", "bound_opt", int(rng.integers(0, 10))][run % 3],
                      consistency_rule=str(rng.choice(["proportional", "uniform"])),
                      sample=str(rng.choice(["uniform", "center"])))
        assert len(out.unit) > 0
        bound = pathwise_bound(out.diagnostics["noise"]["lambda"], n, d)
        distance = w1(X, out.unit, metric="chebyshev")
        assert distance <= bound + 1e-9, (run, distance, bound)


# -- output size and relations ----------------------------------------------------------------
def test_replace_outputs_exactly_n_with_no_root_noise():
    X = np.random.default_rng(4).random((257, 3))
    for seed in range(5):
        out = run_pmm(X, 0.5, neighbouring="replace", seed=seed)
        assert out.unit.shape == (257, 3)
        assert out.diagnostics["noise"]["lambda"][0].tolist() == [0]
        assert out.diagnostics["levels"][0]["noisy_count"].tolist() == [257]


def test_add_remove_output_size_is_clamped_noisy_total():
    X = np.random.default_rng(4).random((30, 2))
    sizes = set()
    for seed in range(40):
        out = run_pmm(X, 0.2, seed=seed)
        root_noise = int(out.diagnostics["noise"]["lambda"][0][0])
        assert len(out.unit) == max(30 + root_noise, 0)
        sizes.add(len(out.unit))
    assert len(sizes) > 1


def _fourth_moment(sigma: float) -> float:
    """``E Z^4`` of ``Lap_Z(sigma)``, summed from the pmf over ``|z| <= 80 sigma + 10`` (the rest is below 1e-30)."""
    z = np.arange(-int(80 * sigma) - 10, int(80 * sigma) + 11).astype(float)
    return float(np.sum(discrete_laplace_pmf(z, sigma) * z ** 4))


def test_add_remove_row_count_is_the_inverse_variance_combination():
    """Under add/remove with the pipeline's noisy n, the row count is the inverse-variance weighted mean of the noisy
    n (variance V_n) and the noisy root count (V_r): unbiased, variance V = 1 / (1/V_n + 1/V_r).

    Over S = 1000 seeds on one table of n = 392 rows (eps = 1, 2 columns; the depth, hence V_r, may differ by
    seed), T = sum_i (rows_i - n)^2 has mean sum_i (V_i + 1/12) (rounding to an integer adds at most 1/4, about
    1/12) and variance sum_i (mu4_i - V_i^2), with mu4 of a Z_n + b Z_r from the exact fourth moments of the
    discrete Laplace laws.  |T - E T| < 4.892 sd (ALPHA = 1e-6 two-sided, normal approximation of the sum of 1000
    independent terms) passes with the combination; the detection case: the same statistic tested against the
    root count alone (the old rule) fails.  The mean is checked too (unbiased, same bound).
    """
    n, seeds = 392, 1000
    X = two_blobs(n, 2, rng=0)
    counts, variances, fourths, root_variances, root_fourths = [], [], [], [], []
    for seed in range(seeds):
        res = ps.synthesize(X, "pmm", 1.0, schema=ps.unit_schema(2), neighbouring="add_remove", rng=seed)
        assert res.release_params["row_count_rule"] == "inverse_variance"
        size_sigma = 1.0 / res.ledger[0][1]  # the noisy n stage: discrete Laplace of scale 1 / epsilon_n
        root_sigma = float(res.diagnostics["noise"]["sigma"][0])
        v_n, v_r = discrete_laplace_variance(size_sigma), discrete_laplace_variance(root_sigma)
        a = v_r / (v_n + v_r)  # weight of the noisy n
        assert math.isclose(res.release_params["row_count_weights"]["noisy_n"], a)
        counts.append(len(res.unit_rows))
        variances.append(a ** 2 * v_n + (1 - a) ** 2 * v_r)
        assert math.isclose(variances[-1], 1 / (1 / v_n + 1 / v_r))
        fourths.append(a ** 4 * _fourth_moment(size_sigma) + (1 - a) ** 4 * _fourth_moment(root_sigma)
                       + 6 * a ** 2 * (1 - a) ** 2 * v_n * v_r)
        root_variances.append(v_r)
        root_fourths.append(_fourth_moment(root_sigma))
    error = np.array(counts, dtype=float) - n
    bound = stats.norm.isf(ALPHA / 2)
    T, V = float(np.sum(error ** 2)), np.array(variances) + 1 / 12
    assert abs(T - V.sum()) < bound * math.sqrt(np.sum(np.array(fourths) - np.array(variances) ** 2))
    assert abs(error.mean()) < bound * math.sqrt(V.sum()) / seeds
    root_v = np.array(root_variances) + 1 / 12  # detection: the spread the root count alone would have
    assert T - root_v.sum() < -bound * math.sqrt(np.sum(np.array(root_fourths) - np.array(root_variances) ** 2))


def test_row_count_rules():
    """The rule of every case of ``row_count`` (n_synthetic, replace-one, add/remove without a noisy count)."""
    X = np.random.default_rng(2).random((300, 2))
    schema = ps.unit_schema(2)
    cases = {"n_synthetic": dict(neighbouring="add_remove", n_synthetic=77), "n": dict(neighbouring="replace"),
             "root": dict(neighbouring="add_remove", depth=4)}
    for rule, kwargs in cases.items():
        res = ps.synthesize(X, "pmm", 1.0, schema=schema, rng=0, **kwargs)
        assert res.release_params["row_count_rule"] == rule and "row_count_weights" not in res.release_params
    assert len(ps.synthesize(X, "pmm", 1.0, schema=schema, rng=0, n_synthetic=77).unit_rows) == 77
    declared = ps.synthesize(X, "pmm", 1.0, schema=schema, rng=0, neighbouring="add_remove", public_n=300)
    assert declared.release_params["row_count_rule"] == "root"


def test_n_synthetic_rescales_the_leaf_counts():
    X = np.random.default_rng(8).random((500, 2))
    out = run_pmm(X, 1.0, n_synthetic=1234, seed=1)
    cells = out.diagnostics["cells"]
    assert len(out.unit) == 1234 and cells["count"].sum() == 1234
    consistent = out.diagnostics["levels"][-1]["count"]
    shares = consistent * (1234 / consistent.sum())
    assert np.all(np.abs(cells["count"] - shares) < 1)  # largest remainder


# -- diagnostics -----------------------------------------------------------------------------
def test_diagnostics_follow_the_docs():
    X = np.random.default_rng(9).random((700, 2))
    out = run_pmm(X, 1.0, seed=2)
    r = out.params["depth"]
    diag = out.diagnostics
    cells = diag["cells"]
    assert cells["lo"].shape == cells["hi"].shape == (2 ** r, 2)
    for key in ("true_count", "noisy_count", "count"):
        assert cells[key].shape == (2 ** r,)
    assert cells["true_count"].sum() == 700 and np.all(cells["noisy_count"] >= 0)
    assert len(diag["levels"]) == r + 1 and not diag["levels_truncated"]
    for j, level in enumerate(diag["levels"]):
        assert level["lo"].shape == (2 ** j, 2)
        noise = diag["noise"]["lambda"][j]
        np.testing.assert_array_equal(level["noisy_count"], np.maximum(level["true_count"] + noise, 0))
    ids = leaf_ids(out.unit, r)
    np.testing.assert_array_equal(np.bincount(ids, minlength=2 ** r), cells["count"])
    assert len(diag["noise"]["sigma"]) == r + 1


def test_diagnostics_leave_out_levels_beyond_the_cap():
    X = np.random.default_rng(9).random((50, 1))
    r = int(np.log2(DIAGNOSTIC_MAX_CELLS)) + 1
    out = run_pmm(X, 1.0, depth=r)
    assert out.diagnostics["levels_truncated"] and "cells" not in out.diagnostics
    assert len(out.diagnostics["levels"]) == r and out.params["leaves"] == 2 ** r


# -- statistical checks of the noise and the sampling ----------------------------------------
def test_leaf_noise_has_the_planned_scale():
    """Chi-square of the leaf-level lambda against Lap_Z(sigma_r), alpha = 1e-6."""
    X = np.random.default_rng(5).random((5000, 2))
    out = run_pmm(X, 1.0, depth=13, seed=3)
    sigma = out.diagnostics["noise"]["sigma"][13]
    lam = out.diagnostics["noise"]["lambda"][13]
    edges = np.arange(-12, 13)
    observed = np.array([np.sum(lam < edges[0])] + [np.sum(lam == z) for z in edges] + [np.sum(lam > edges[-1])])
    inner = discrete_laplace_pmf(edges, sigma)
    tail = (1 - inner.sum()) / 2
    expected = np.concatenate([[tail], inner, [tail]]) * len(lam)
    assert stats.chisquare(observed, expected).pvalue > ALPHA


def test_uniform_sampling_inside_the_root_is_uniform():
    """With r = 0 the output is m i.i.d. uniform points: KS per axis, alpha = 1e-6 each."""
    X = np.full((4000, 2), 0.9)
    out = run_pmm(X, 1.0, depth=0, seed=6)
    for axis in range(2):
        assert stats.kstest(out.unit[:, axis], "uniform").pvalue > ALPHA


def test_center_sampling_puts_points_at_leaf_centres():
    X = np.random.default_rng(3).random((300, 2))
    out = run_pmm(X, 1.0, depth=6, sample="center", seed=1)
    lo, hi = level_boxes(6, 2)
    centres = (lo + hi) / 2
    ids = leaf_ids(out.unit, 6)
    np.testing.assert_allclose(out.unit, centres[ids])


# -- boundary cases -----------------------------------------------------------------------------
def test_points_at_one_are_kept_in_the_last_cell():
    X = np.ones((100, 2))
    out = run_pmm(X, 2.0, depth=6, neighbouring="replace", seed=0)
    assert out.diagnostics["cells"]["true_count"][-1] == 100 and out.diagnostics["cells"]["true_count"].sum() == 100


def test_points_on_a_split_plane_go_to_the_upper_cell():
    X = np.array([[0.5, 0.5], [0.25, 0.75], [0.75, 0.25]])
    np.testing.assert_array_equal(leaf_ids(X, 1), [1, 0, 1])
    np.testing.assert_array_equal(leaf_ids(X, 2), [3, 1, 2])
    np.testing.assert_array_equal(leaf_ids(X, 4), spec_leaf_ids(X, 4, 2))


def test_data_outside_the_bounds_is_clipped_through_synthesize():
    df = pd.DataFrame({"age": [-5.0, 20, 40, 60, 150] * 40, "w": [1.0, 2, 3, 4, 5] * 40})
    schema = ps.Schema.from_dict({"columns": [{"name": "age", "lo": 0, "hi": 100}, {"name": "w", "lo": 0, "hi": 10}]})
    res = ps.synthesize(df, "pmm", 1.0, schema=schema, neighbouring="replace", rng=1)
    assert res.clipped == {"age": 80, "w": 0}
    assert len(res.data) == 200 and res.data["age"].between(0, 100).all()
    assert res.diagnostics["levels"][0]["true_count"][0] == 200


def test_constant_column_with_public_bounds():
    df = pd.DataFrame({"c": np.full(300, 7.0), "x": np.linspace(0, 1, 300)})
    schema = ps.Schema.from_dict({"columns": [{"name": "c", "lo": 0, "hi": 10}, {"name": "x", "lo": 0, "hi": 1}]})
    res = ps.synthesize(df, "pmm", 1.0, schema=schema, neighbouring="replace", rng=2, sample="center")
    cells = res.diagnostics["cells"]
    occupied = cells["true_count"] > 0
    assert np.all((cells["lo"][occupied, 0] <= 0.7) & (cells["hi"][occupied, 0] >= 0.7))
    # projecting on a column is 1-Lipschitz for l-infinity, so the column's W1 obeys the pathwise bound
    bound = pathwise_bound(res.diagnostics["noise"]["lambda"], 300, 2)
    assert w1(df["c"].to_numpy() / 10, res.data["c"].to_numpy() / 10) <= bound
    assert len(res.data) == 300 and res.data["c"].between(0, 10).all()


def test_small_eps_n_gives_the_root_only():
    X = np.random.default_rng(0).random((3, 2))
    out = run_pmm(X, 0.5, seed=0)  # eps n = 1.5 < 2
    assert out.params["depth"] == 0 and len(out.diagnostics["levels"]) == 1


def test_single_record_and_empty_output():
    X = np.array([[0.3, 0.6]])
    sizes = []
    for seed in range(30):
        out = run_pmm(X, 1.0, seed=seed)
        sizes.append(len(out.unit))
        assert (len(out.unit) == 0) == any("no synthetic rows" in w for w in out.warnings)
    assert 0 in sizes and max(sizes) > 0
    res = ps.synthesize(pd.DataFrame({"a": [0.3]}), "pmm", 1.0, schema={"columns": [{"name": "a", "lo": 0, "hi": 1}]},
                        neighbouring="replace", rng=0)
    assert len(res.data) == 1


def test_empty_table_and_nan_are_data_errors():
    schema = {"columns": [{"name": "a", "lo": 0, "hi": 1}]}
    with pytest.raises(DataError):
        ps.synthesize(pd.DataFrame({"a": np.array([], dtype=float)}), "pmm", 1.0, schema=schema)
    with pytest.raises(DataError):
        run_pmm(np.array([[0.1], [np.nan]]))
    with pytest.raises(DataError):
        run_pmm(np.empty((0, 2)))


def test_same_seed_same_output():
    X = np.random.default_rng(1).random((400, 2))
    for rule in ("proportional", "uniform"):
        a = run_pmm(X, 1.0, seed=42, consistency_rule=rule)
        b = run_pmm(X, 1.0, seed=42, consistency_rule=rule)
        c = run_pmm(X, 1.0, seed=43, consistency_rule=rule)
        np.testing.assert_array_equal(a.unit, b.unit)
        assert a.unit.shape != c.unit.shape or not np.array_equal(a.unit, c.unit)


def test_registry_entry():
    spec = ps.get_mechanism("pmm")
    assert spec.paper == "004, Alg 3-4" and set(spec.neighbouring) == set(RELATIONS) and spec.is_private
    assert spec.resolve_params({}) == {"depth": "paper", "consistency": "proportional", "sample": "uniform"}
    assert spec.resolve_params({"depth": "7"})["depth"] == 7
    with pytest.raises(ps.ParameterError):
        spec.resolve_params({"depth": 27})
