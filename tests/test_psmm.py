"""Tests of PSMM ([HVZ23] Alg. 1-2) and its corrected d_BL projection LP (spec pmm-psmm-kdtree.md B.3).

Deterministic identities are checked to the LP solver's tolerance (HiGHS primal/dual
feasibility 1e-7, so 1e-6 on objective identities).  The one statistical test (noise law)
uses a chi-square goodness-of-fit test with false-failure rate alpha = 1e-6.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

import privsyn_core as ps
from goodness_of_fit import ALPHA, discrete_laplace_pvalue
from privsyn_core.data.grid import cell_centres
from privsyn_core.evaluation.distances import w1
from privsyn_core.mechanisms.hvz23.dbl_lp import (
    all_pairs,
    dbl_distance,
    king_edge_count,
    king_edges,
    project_dbl,
    project_dbl_printed,
)
from privsyn_core.mechanisms.hvz23.psmm import (
    MAX_CELLS,
    MAX_DENSE_CELLS,
    MAX_KING_FLOWS,
    SPEC as PSMM,
    auto_cells_per_axis,
    check_lp_size,
    largest_fitting_k,
    lp_flow_variables,
)
from privsyn_core.privacy.noise import discrete_laplace

LP_TOL = 1e-6


def run_psmm(X, epsilon=1.0, *, neighbouring="replace", n_synthetic=None, seed=0, **params):
    given = {"cells_per_axis": None, "lp": None, "normalise": "n", "sample": "uniform", **params}
    return PSMM.run(np.asarray(X, dtype=float), epsilon, neighbouring=neighbouring, n_synthetic=n_synthetic,
                rng=np.random.default_rng(seed), **given)


def psmm_like_measure(m, rng, scale=2.0):
    """A signed measure like PSMM's: (multinomial counts + Lap_Z(scale)) / n on m atoms, n = 3m."""
    n = 3 * m
    counts = rng.multinomial(n, rng.dirichlet(np.ones(m)))
    return (counts + discrete_laplace(scale, m, rng)) / n


def noisy_grid_measure(k, d, rng):
    """Cell centres of the k^d grid and a PSMM-like signed measure on them."""
    return cell_centres(np.arange(k ** d), k, d), psmm_like_measure(k ** d, rng)


# -- budget and noise -----------------------------------------------------------------------------------------

@pytest.mark.parametrize("neighbouring, sensitivity", [("replace", 2), ("add_remove", 1)])
@pytest.mark.parametrize("epsilon", [0.1, 1 / 3, 0.7, 1.0, 2.9, 10.0])
def test_ledger_sums_exactly_to_epsilon_and_scale_matches_relation(neighbouring, sensitivity, epsilon):
    X = np.random.default_rng(1).random((60, 2))
    public = {"public_n": 60} if neighbouring == "add_remove" else {}
    result = ps.synthesize(X, "psmm", epsilon, schema=ps.unit_schema(2), neighbouring=neighbouring, rng=3, **public)
    assert math.fsum(e for _, e in result.ledger) == epsilon
    assert result.epsilon == epsilon
    assert result.params["noise_scale"] == sensitivity / epsilon
    assert result.dp_valid


@pytest.mark.parametrize("neighbouring, sigma, wrong_sigma", [("replace", 2.0, 1.0), ("add_remove", 1.0, 2.0)])
def test_cell_noise_is_discrete_laplace_with_the_relations_scale(neighbouring, sigma, wrong_sigma):
    # eps = 1, 2000 cells in d = 1: the noise lambda = noisy - true count has 2000 i.i.d. draws.
    X = np.random.default_rng(5).random((300, 1))
    out = run_psmm(X, 1.0, neighbouring=neighbouring, seed=11, cells_per_axis=2000)
    cells = out.diagnostics["cells"]
    noise = cells["noisy_count"] - cells["true_count"]
    assert noise.dtype.kind == "i"
    assert discrete_laplace_pvalue(noise, sigma) > ALPHA
    assert discrete_laplace_pvalue(noise, wrong_sigma) < ALPHA  # the test has power against the other calibration


# -- the corrected LP and the erratum ------------------------------------------------------------------------

def _random_atoms_case(rng, m, d):
    atoms = rng.random((m, d))
    nu = rng.normal(1 / m, 1.5 / m, m)
    return atoms, nu


@pytest.mark.parametrize("d, m, diam", [(1, 15, 1.0), (2, 32, 1.0), (3, 20, 1.0), (2, 25, 2.0)])
def test_corrected_lp_value_is_dbl_plus_mass_excess(d, m, diam):
    rng = np.random.default_rng(100 + d + m)
    for _ in range(5):
        atoms, nu = _random_atoms_case(rng, m, d)
        atoms = atoms * diam
        proj = project_dbl(nu, atoms, diam=diam)
        assert proj.tau.min() >= 0 and proj.tau.sum() == pytest.approx(1.0, abs=1e-12)
        dbl = dbl_distance(proj.tau, nu, atoms, diam=diam)
        assert proj.value == pytest.approx(dbl + diam * (nu.sum() - 1), abs=LP_TOL)


def test_three_atom_counterexample_shows_the_printed_lp_is_wrong():
    y = np.array([0.0, 0.5, 1.0])
    nu = np.array([-0.2, 0.3, 0.9])
    corrected = project_dbl(nu, y)
    # unique minimiser: f = (0,.5,1) and f = (-1,-.5,-1) give d_BL >= .1 + tau_1/2 with equality iff tau = (0,.1,.9)
    np.testing.assert_allclose(corrected.tau, [0.0, 0.1, 0.9], atol=1e-9)
    assert dbl_distance(corrected.tau, nu, y) == pytest.approx(0.1, abs=1e-9)
    assert corrected.value == pytest.approx(0.1 + (nu.sum() - 1), abs=1e-9)

    printed = project_dbl_printed(nu, y)
    printed_dbl = dbl_distance(printed.tau, nu, y)
    assert printed_dbl == pytest.approx(0.2, abs=1e-9)  # spec B.3.2: tau = (0, .3, .7)
    # the printed optimum (0.1) is not d_BL of its own solution: the LP does not compute d_BL
    assert printed.value == pytest.approx(0.1, abs=1e-9)
    assert printed.value + 0.05 < printed_dbl + (nu.sum() - 1)


def test_corrected_lp_beats_printed_lp_on_random_2d_cases():
    rng = np.random.default_rng(2024)
    gaps = []
    for _ in range(40):
        atoms, nu = rng.random((32, 2)), psmm_like_measure(32, rng)
        corrected = dbl_distance(project_dbl(nu, atoms).tau, nu, atoms)
        printed = dbl_distance(project_dbl_printed(nu, atoms).tau, nu, atoms)
        gaps.append(printed - corrected)
    # the corrected LP is optimal, so the printed one is never better; it is strictly worse on most random
    # cases, but reaches the optimum on about a quarter of them (measured with this seed: strictly worse on 31 of
    # these 40 with the CKS20 noise sampler, 27 with the inversion sampler; 8 and 7 of the first 10)
    assert min(gaps) > -1e-9
    assert sum(gap > 1e-6 for gap in gaps) >= 24


@pytest.mark.slow
def test_no_dirichlet_probability_vector_beats_the_projection():
    rng = np.random.default_rng(7)
    atoms, nu = _random_atoms_case(rng, 12, 2)
    best = dbl_distance(project_dbl(nu, atoms).tau, nu, atoms)
    for concentration in (0.3, 1.0, 3.0, 10.0):
        for tau in rng.dirichlet(np.full(12, concentration), 50):
            assert dbl_distance(tau, nu, atoms) >= best - LP_TOL
    # nu's own clipped-and-normalised version (what dp_histogram releases) is no better either
    clipped = np.clip(nu, 0, None) / np.clip(nu, 0, None).sum()
    assert dbl_distance(clipped, nu, atoms) >= best - LP_TOL


@pytest.mark.parametrize("d, k", [(1, 12), (2, 6), (3, 4)])
def test_dense_and_king_graph_lps_agree_on_grids(d, k):
    rng = np.random.default_rng(30 + d)
    edges = king_edges(k, d)
    assert len(edges[0]) == king_edge_count(k, d)
    for _ in range(3):
        atoms, nu = noisy_grid_measure(k, d, rng)
        dense = project_dbl(nu, atoms)
        king = project_dbl(nu, atoms, edges=edges)
        assert king.value == pytest.approx(dense.value, abs=LP_TOL)
        assert king.n_flow < dense.n_flow or k == 2
        assert dbl_distance(king.tau, nu, atoms) == pytest.approx(dbl_distance(dense.tau, nu, atoms), abs=LP_TOL)


def test_king_edges_join_exactly_the_cells_at_one_step():
    k, d = 4, 2
    tails, heads = king_edges(k, d)
    centres = cell_centres(np.arange(k ** d), k, d)
    step = np.max(np.abs(centres[tails] - centres[heads]), axis=1)
    np.testing.assert_allclose(step, 1 / k)
    every = all_pairs(k ** d)
    at_one_step = np.isclose(np.max(np.abs(centres[every[0]] - centres[every[1]]), axis=1), 1 / k)
    assert set(zip(tails, heads, strict=True)) == set(zip(every[0][at_one_step], every[1][at_one_step], strict=True))


def test_dbl_equals_w1_for_probability_measures():
    # eq. (2.1): on a bounded domain d_BL = W1 between probability measures
    rng = np.random.default_rng(9)
    atoms = rng.random((15, 2))
    a, b = rng.dirichlet(np.ones(15), 2)
    assert dbl_distance(a, b, atoms) == pytest.approx(w1(atoms, atoms, weights_x=a, weights_y=b), abs=LP_TOL)


# -- pathwise accuracy (Thm 3.6 proof, App. A.5) ------------------------------------------------------------

PATHWISE_CASES = [(d, n, rel, norm) for d in (1, 2, 3) for n in (40, 150) for rel, norm in
                  (("replace", "n"), ("add_remove", "n"), ("add_remove", "noisy_total"))]


@pytest.mark.slow
def test_pathwise_bound_holds_on_every_seeded_run():
    for seed, (d, n, neighbouring, normalise) in enumerate(PATHWISE_CASES):
        rng = np.random.default_rng(seed)
        X = rng.beta(0.5, 2.0, (n, d))  # skewed, so many cells are empty
        out = run_psmm(X, 1.0, neighbouring=neighbouring, normalise=normalise, seed=seed)
        cells = out.diagnostics["cells"]
        centres = (cells["lo"] + cells["hi"]) / 2
        k = out.params["cells_per_axis"]
        mu_y = cells["true_count"] / n
        nu = out.diagnostics["signed"]
        noise_part = dbl_distance(mu_y, nu, centres)
        # nu-hat is the closest probability measure, so it is no farther from nu than mu_Y is
        assert dbl_distance(out.diagnostics["projected"], nu, centres) <= noise_part + LP_TOL
        realised = w1(X, out.unit, weights_x=None, weights_y=out.weights, metric="chebyshev")
        assert realised <= 1 / k + 2 * noise_part + LP_TOL, (d, n, neighbouring, normalise)


# -- guard ----------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("d, params, fits", [
    (2, {"cells_per_axis": 200}, 128),             # 40000 cells
    (2, {"cells_per_axis": 33, "lp": "dense"}, 32),  # 1089 cells, dense
    (5, {"cells_per_axis": 6}, 4),                 # 7776 cells but ~10^6 king flows
    (7, {"cells_per_axis": 3}, 2),                 # 2187 cells, 821356 king flows; 2^7 fits through the hub
    (15, {"cells_per_axis": 2}, 1),                # 32768 cells: no grid fits
])
def test_guard_refuses_explicit_lps_that_are_too_large_naming_a_value_that_fits(d, params, fits):
    X = np.random.default_rng(0).random((50, d))
    with pytest.raises(ps.ParameterError) as info:
        ps.synthesize(X, "psmm", 1.0, schema=ps.unit_schema(d), rng=0, **params)
    message = str(info.value)
    assert largest_fitting_k(d, params.get("lp", "king")) == fits
    assert (f"cells_per_axis <= {fits}" if fits >= 2 else "no grid with 2 or more cells per axis fits") in message
    assert "pmm" in message and "lp='king'" not in message.replace("or lp='king'", "") and "\n" not in message


@pytest.mark.parametrize("n, d, epsilon", [pytest.param(20_000, 2, 1.0, marks=pytest.mark.slow),
                                           (233, 7, 4.0), (500, 9, 0.5), (100, 12, 1.0)])
def test_automatic_grid_is_capped_to_the_lp_with_a_warning_and_runs_at_any_width(n, d, epsilon):
    """The automatic grid always runs: capped to the largest LP that fits, at least 2 per axis up to d = 14
    (d = 12 here: 0.5 s).  The d = 2 case solves the largest LP there is (128^2 cells, 20 s of CPU): slow."""
    X = np.random.default_rng(1).random((n, d))
    result = ps.synthesize(X, "psmm", epsilon, schema=ps.unit_schema(d), rng=0)
    k = result.params["cells_per_axis"]
    assert k == min(largest_fitting_k(d, "king"), max(2, k)) and k >= 2
    wanted = auto_cells_per_axis(n, d, epsilon)
    assert any("capped" in w for w in result.warnings) == (wanted > k)
    assert any("2 cells per axis" in w for w in result.warnings) == (k == 2)


def test_star_through_the_hub_is_the_exact_lp_on_the_two_cell_grid():
    """On the 2^d grid every centre pair is 1/2 apart; the star through the centre gives the king LP's value."""
    from privsyn_core.data.grid import cell_boxes
    from privsyn_core.mechanisms.hvz23.dbl_lp import king_edges, project_dbl, star_edges
    for d in (1, 2, 3, 4):
        lo, hi = cell_boxes(np.arange(2 ** d), 2, d)
        rng = np.random.default_rng(d)
        for _ in range(5):
            nu = rng.normal(2.0 ** -d, 2.0 ** (1 - d), 2 ** d)
            king = project_dbl(nu, (lo + hi) / 2, edges=king_edges(2, d))
            star = project_dbl(nu, (lo + hi) / 2, edges=star_edges(2 ** d), hub=np.full(d, 0.5))
            assert star.value == pytest.approx(king.value, abs=1e-9) and star.n_flow == 2 ** (d + 1)
            assert star.tau.sum() == pytest.approx(1.0) and (star.tau >= 0).all()


def test_guard_boundary_is_exactly_at_the_limits():
    k = auto_cells_per_axis(MAX_CELLS, 2, 1.0)  # eps n = 16384 in d = 2
    assert k ** 2 == MAX_CELLS
    check_lp_size(k, 2, "king")  # accepted: exactly at the cell limit
    with pytest.raises(ps.ParameterError):
        check_lp_size(k + 1, 2, "king")
    check_lp_size(32, 2, "dense")  # 1024 = MAX_DENSE_CELLS
    with pytest.raises(ps.ParameterError):
        check_lp_size(MAX_DENSE_CELLS + 1, 1, "dense")
    assert lp_flow_variables(7, 4, "king") <= MAX_KING_FLOWS < lp_flow_variables(8, 4, "king")
    with pytest.raises(ps.ParameterError):
        check_lp_size(8, 4, "king")


# -- boundary cases and output -------------------------------------------------------------------------------

def test_points_at_one_land_in_the_last_cell():
    X = np.array([[1.0, 1.0], [1.0, 0.0], [0.0, 1.0], [0.5, 0.5]])
    out = run_psmm(X, 1.0, cells_per_axis=4)
    true = out.diagnostics["cells"]["true_count"].reshape(4, 4)
    assert true.sum() == 4
    assert true[3, 3] == 1 and true[3, 0] == 1 and true[0, 3] == 1 and true[2, 2] == 1


@pytest.mark.parametrize("d, n, epsilon", [(1, 14, 0.1), (2, 19, 0.1), (3, 1, 1.0), (2, 1, 1.9)])
def test_small_epsilon_n_gives_two_cells_per_axis_and_a_warning(d, n, epsilon):
    """The paper's rule gives one cell here; the automatic grid never goes below 2 per axis and says so."""
    X = np.random.default_rng(2).random((n, d))
    result = ps.synthesize(X, "psmm", epsilon, schema=ps.unit_schema(d), rng=4)
    assert auto_cells_per_axis(n, d, epsilon) == 1
    assert result.params["cells"] == 2 ** d
    assert any("only 2 cells per axis" in w for w in result.warnings)
    assert len(result.data) == n
    assert np.all((result.unit_rows >= 0) & (result.unit_rows <= 1))


def test_single_record():
    result = ps.synthesize(np.array([[0.3, 0.9]]), "psmm", 5.0, schema=ps.unit_schema(2), rng=1)
    # rule round(sqrt(5)) = 2; the noise mass 3^2 * 2/5 = 3.6 <= 4 n pays for 3 (privsyn_core.data.layout)
    assert result.params["cells_per_axis"] == 3 and len(result.data) == 1
    assert result.weights.sum() == pytest.approx(1.0)


def test_data_outside_the_bounds_is_clipped_and_output_stays_inside():
    schema = ps.Schema((ps.Column("age", "numeric", lo=0.0, hi=100.0), ps.Column("score", "numeric", lo=-1.0, hi=1.0)))
    rng = np.random.default_rng(3)
    df = pd.DataFrame({"age": np.r_[rng.uniform(0, 100, 200), [-20.0, 150.0, 100.0]],
                       "score": np.r_[rng.uniform(-1, 1, 200), [5.0, -3.0, 1.0]]})
    result = ps.synthesize(df, "psmm", 1.0, schema=schema, rng=8, n_synthetic=500)
    assert result.clipped == {"age": 2, "score": 2}
    assert list(result.data.columns) == ["age", "score"] and len(result.data) == 500
    assert result.data["age"].between(0, 100).all() and result.data["score"].between(-1, 1).all()
    assert result.diagnostics["cells"]["true_count"].sum() == len(df)
    assert result.dp_valid


def test_same_seed_same_output_and_other_seed_differs():
    X = np.random.default_rng(4).random((300, 2))
    first, again, other = (ps.synthesize(X, "psmm", 1.0, schema=ps.unit_schema(2), rng=s) for s in (21, 21, 22))
    np.testing.assert_array_equal(first.unit, again.unit)
    np.testing.assert_array_equal(first.weights, again.weights)
    pd.testing.assert_frame_equal(first.data, again.data)
    assert not np.array_equal(first.diagnostics["cells"]["noisy_count"], other.diagnostics["cells"]["noisy_count"])


def test_diagnostics_and_rows_follow_the_projection():
    X = np.random.default_rng(6).random((400, 2))
    out = run_psmm(X, 2.0, seed=5, n_synthetic=1000, sample="center")
    cells, tau = out.diagnostics["cells"], out.diagnostics["projected"]
    m = out.params["cells"]
    assert cells["lo"].shape == cells["hi"].shape == (m, 2)
    np.testing.assert_array_equal(cells["count"], tau)
    np.testing.assert_allclose(out.diagnostics["signed"], cells["noisy_count"] / 400)
    assert tau.sum() == pytest.approx(1.0, abs=1e-12) and tau.min() >= 0
    np.testing.assert_array_equal(out.weights, tau[tau > 0])
    # rows: largest-remainder rounding of 1000 tau at the centres, each cell off by less than one row
    centres = (cells["lo"] + cells["hi"]) / 2
    ids = np.argmin(np.abs(out.rows[:, None, :] - centres[None]).max(axis=2), axis=1)
    assert len(out.rows) == 1000
    assert np.max(np.abs(np.bincount(ids, minlength=m) - 1000 * tau)) < 1


def test_uniform_rows_stay_inside_their_cells():
    X = np.random.default_rng(8).random((400, 2))
    out = run_psmm(X, 1.0, seed=2, cells_per_axis=5)
    cells = out.diagnostics["cells"]
    ids = np.ravel_multi_index(tuple(np.clip(np.floor(out.rows * 5).astype(int), 0, 4).T), (5, 5))
    assert np.all(cells["count"][ids] > 0)  # every row lies in a cell of positive released weight


def test_noisy_total_normalisation_and_default_size():
    X = np.random.default_rng(10).random((500, 2))
    out = run_psmm(X, 1.0, neighbouring="add_remove", normalise="noisy_total", seed=3, cells_per_axis=8)
    noisy = out.diagnostics["cells"]["noisy_count"]
    assert out.params["normaliser"] == max(1, noisy.sum())
    np.testing.assert_allclose(out.diagnostics["signed"].sum(), noisy.sum() / max(1, noisy.sum()))
    assert len(out.rows) == max(1, noisy.sum())
    assert out.warnings == []  # n is not used when the grid and the normaliser are set without it


def test_add_remove_reads_a_noisy_count_not_n():
    """Under add/remove the grid, the normaliser and the output size read a noisy count (its own ledger stage)."""
    X = np.random.default_rng(10).random((100, 1))
    result = ps.synthesize(X, "psmm", 1.0, schema=ps.unit_schema(1), neighbouring="add_remove", rng=4)
    assert result.ledger[0][0].startswith("record count n") and result.ledger[0][1] == pytest.approx(0.05)
    noisy = result.release().params["noisy_n"]
    assert result.params["normaliser"] == noisy and len(result.data) == noisy
    assert result.params["cells_per_axis"] == auto_cells_per_axis(noisy, 1, 1.0 - result.ledger[0][1])
