"""Automatic layouts never degenerate silently (privsyn_core.data.layout): wide, small tables keep structure
where the budget pays for it, and every coarse layout says so in the released warnings."""

import numpy as np
import pandas as pd
import pytest

import privsyn_core as ps
from privsyn_core.data import layout
from privsyn_core.mechanisms.hvz23.pmm import resolve_depth
from privsyn_core.mechanisms.hvz23.pmm_tree import accuracy_bound, cuts_per_axis, paper_depth

#: The layout parameter each grid mechanism releases (cells per axis).
GRID_KEY = {"kd_grid": "bins_per_axis", "dp_histogram": "bins", "psmm": "cells_per_axis", "srw_tsp": "bins"}
COARSE = ("single cell", "never cut", "only 2 cells")


def wide_table(n: int, d: int, seed: int = 0) -> pd.DataFrame:
    """One latent factor: the columns are correlated, so a layout with structure has something to show."""
    rng = np.random.default_rng(seed)
    z = rng.normal(size=(n, 1))
    return pd.DataFrame(1 / (1 + np.exp(-(z + 0.7 * rng.normal(size=(n, d))))), columns=[f"x{j}" for j in range(d)])


CASES = [(n, d, eps) for n, d in ((233, 7), (500, 9)) for eps in (0.5, 1.0, 4.0)]


@pytest.mark.parametrize("n, d, eps", CASES)
@pytest.mark.parametrize("name", sorted(GRID_KEY))
def test_wide_small_tables_get_two_or_more_cells_per_axis_and_three_where_affordable(name, n, d, eps):
    result = ps.synthesize(wide_table(n, d), name, eps, schema=ps.unit_schema(d), rng=1)
    k = result.params[GRID_KEY[name]]
    assert k >= 2, "an automatic layout never has one cell per axis on these tables"
    assert len(np.unique(result.data.round(9).to_numpy(), axis=0)) > 1
    if name in ("dp_histogram", "srw_tsp"):  # flat noisy counts: affordable while the noise mass <= 4 n
        afford = layout.affordable_noise_mass(n, d, eps, 2)
        assert k >= min(layout.target_cells_per_axis(d), afford)
    coarse = [w for w in result.warnings if any(c in w for c in COARSE)]
    assert bool(coarse) == (k <= 2), result.warnings
    assert all(w in result.release().warnings for w in coarse)  # released: a function of public inputs only


def test_kd_grid_reaches_three_bins_where_the_threshold_leaves_room():
    """k t(k) <= n/4 with t(k) = (2/eps) d log k: at n = 500, d = 9, eps = 0.5, t(3) = 39.5 and 3 t(3) <= 125."""
    result = ps.synthesize(wide_table(500, 9), "kd_grid", 0.5, schema=ps.unit_schema(9), rng=1)
    assert result.params["bins_per_axis"] == 3 and not [w for w in result.warnings if "only 2" in w]
    small = ps.synthesize(wide_table(233, 9), "kd_grid", 0.5, schema=ps.unit_schema(9), rng=1)
    assert small.params["bins_per_axis"] == 2 and any("only 2 cells per axis" in w for w in small.warnings)


@pytest.mark.parametrize("n, d, eps", CASES)
def test_pmm_bound_opt_falls_back_to_the_paper_depth_where_its_bound_is_vacuous(n, d, eps):
    result = ps.synthesize(wide_table(n, d), "pmm", eps, schema=ps.unit_schema(d), rng=1, depth="bound_opt")
    r = result.params["depth"]
    vacuous = min(accuracy_bound(n, eps, d, j, "replace") for j in range(40)) >= 1
    assert vacuous, "on these tables no depth has a bound below the diameter"
    assert r == paper_depth(n, eps, d) > 0
    assert any("vacuous" in w and f"paper's depth {r}" in w for w in result.warnings)
    cells = 2 ** cuts_per_axis(r, d)
    assert any(c in w for w in result.warnings for c in COARSE) == bool((cells <= 2).any())
    assert len(np.unique(result.data.round(9).to_numpy(), axis=0)) > 1


def test_pmm_names_the_uncut_columns_and_bound_opt_keeps_its_choice_where_the_bound_is_informative():
    r, warnings = resolve_depth("paper", 500, 0.5, 9, "replace")
    assert r == 7 and any("[7, 8]" in w and "never cut" in w for w in warnings)
    r, warnings = resolve_depth("bound_opt", 10**5, 1.0, 2, "add_remove")
    assert accuracy_bound(10**5, 1.0, 2, r) < 1 and warnings == []


@pytest.mark.parametrize("eps", [0.5, 1.0, 4.0])
def test_kd_adaptive_on_wide_tables_has_structure_and_deep_enough_leaves(eps):
    result = ps.synthesize(wide_table(500, 9), "kd_adaptive", eps, schema=ps.unit_schema(9), rng=1)
    assert result.params["h_max"] >= 2 * 9 and not [w for w in result.warnings if any(c in w for c in COARSE)]
    assert len(np.unique(result.data.round(9).to_numpy(), axis=0)) > 1
    shallow = ps.synthesize(wide_table(500, 9), "kd_adaptive", eps, schema=ps.unit_schema(9), rng=1, h=0, h_max=9)
    assert any("only 2 cells per axis" in w for w in shallow.warnings)


def test_a_collapsed_output_column_is_warned_about_from_the_released_rows():
    table = wide_table(300, 2)
    one = ps.synthesize(table, "kd_grid", 1.0, schema=ps.unit_schema(2), rng=1, w=1.0, sample="center")
    assert any("fewer than 3 distinct values" in w and "'x0' (1)" in w for w in one.release().warnings)
    fine = ps.synthesize(table, "kd_grid", 1.0, schema=ps.unit_schema(2), rng=1)
    assert not [w for w in fine.warnings if "distinct values" in w]
    schema = ps.Schema((ps.Column("flag", "numeric", lo=0, hi=1, integer=True),))
    flags = ps.synthesize(pd.DataFrame({"flag": np.arange(300) % 2}), "dp_histogram", 1.0, schema=schema, rng=1)
    assert not [w for w in flags.warnings if "distinct values" in w]  # 2 values is all a 0/1 column has
