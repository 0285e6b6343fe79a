"""Certified W1 in the plane (privsyn_core/evaluation/w1_certified.py and its parts): the exact l1 c-transform,
the network simplex with potentials, the domain decomposition; every interval holds POT's exact W1.

All instances use fixed seeds: the checks are deterministic (no false-failure rate)."""

import numpy as np
import ot
import pytest
from ortools.graph.python import min_cost_flow

import privsyn_core as ps
from privsyn_core.data.datasets import two_blobs
from privsyn_core.evaluation import w1_certified, w1_flow
from privsyn_core.evaluation.w1_flow import integer_transshipment, transshipment
from privsyn_core.evaluation.w1_transform import planar_c_transform

w1 = ps.metrics.w1


def test_planar_c_transform_equals_the_brute_force_minimum():
    """Against the full (target, source) matrix: sizes around the brute-force block and the powers of two, a single
    source, coordinates on a coarse grid (ties in both coordinates) and targets placed on sources."""
    rng = np.random.default_rng(3)
    for n, m in ((1, 1), (1, 9), (7, 5), (16, 16), (33, 31), (100, 80), (700, 1300), (2000, 2100)):
        grid = n % 2 == 0
        sources = np.round(rng.random((n, 2)) * 12) / 12 if grid else rng.random((n, 2))
        targets = np.round(rng.random((m, 2)) * 12) / 12 if grid else rng.random((m, 2))
        targets[: min(n, m) // 3] = sources[: min(n, m) // 3]
        values = rng.normal(0, 0.5, n)
        best, argmin = planar_c_transform(sources, values, targets)
        full = values[None, :] + np.abs(targets[:, None, :] - sources[None, :, :]).sum(axis=2)
        np.testing.assert_allclose(best, full.min(axis=1), rtol=0, atol=1e-12)
        np.testing.assert_allclose(full[np.arange(m), argmin], full.min(axis=1), rtol=0, atol=1e-12)


def test_planar_c_transform_of_a_slope_one_potential_is_exact_and_fast_enough():
    """The case a lifted k-d tree cannot prune: h(s) = s_1 (slope 1), where every source to the left ties."""
    rng = np.random.default_rng(4)
    sources, targets = rng.random((3000, 2)), rng.random((3000, 2))
    best, _ = planar_c_transform(sources, sources[:, 0], targets)
    full = sources[None, :, 0] + np.abs(targets[:, None, :] - sources[None, :, :]).sum(axis=2)
    np.testing.assert_allclose(best, full.min(axis=1), rtol=0, atol=1e-12)


def _random_transshipment(scale: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """A random transshipment problem with transit nodes, integer costs, supplies times ``scale``."""
    rng = np.random.default_rng(5)
    nodes = 60
    tails, heads = rng.integers(0, nodes, 600), rng.integers(0, nodes, 600)
    keep = tails != heads
    key = np.unique(tails[keep] * nodes + heads[keep])
    tails, heads = key // nodes, key % nodes
    cost = rng.integers(1, 50, len(tails)).astype(float)
    supply = np.zeros(nodes, dtype=np.int64)
    supply[:10], supply[10:20] = rng.integers(1, 9, 10), 0
    supply[20:30] = -rng.multinomial(int(supply[:10].sum()), np.full(10, 0.1))
    return supply * scale, tails, heads, cost


def _check_optimal_with_tight_potentials(solution, supply, tails, heads, cost) -> None:
    """The flow conserves every supply, costs what OR-tools' optimum costs (integer costs, so equal up to the
    float sum), and the potentials satisfy ``pi[t] - pi[h] <= cost`` on every arc with equality on arcs that
    carry flow (to 1e-9 of the largest potential)."""
    flow, potential = solution
    nodes = len(supply)
    balance = np.bincount(tails, weights=flow, minlength=nodes) - np.bincount(heads, weights=flow, minlength=nodes)
    np.testing.assert_array_equal(balance, supply)
    solver = min_cost_flow.SimpleMinCostFlow()
    solver.add_arcs_with_capacity_and_unit_cost(tails, heads, np.full(len(tails), int(supply[supply > 0].sum())),
                                                cost.astype(np.int64))
    solver.set_nodes_supplies(np.arange(nodes), supply)
    assert solver.solve() == solver.OPTIMAL
    assert flow @ cost == pytest.approx(solver.optimal_cost(), rel=1e-12)
    slack = cost - potential[tails] + potential[heads]
    assert slack.min() >= -1e-9 and np.abs(slack[flow > 0]).max() <= 1e-9


@pytest.mark.parametrize(("scale", "pot_limit"), [(1, w1_flow.POT_MAX_MASS), (2**36, w1_flow.POT_MAX_MASS),
                                                  (2**43, w1_flow.POT_MAX_MASS), (2**36, 0)])
def test_transshipment_is_optimal_and_its_potentials_are_feasible_and_tight(scale, pot_limit, monkeypatch):
    """Masses of 1, 2^36 and 2^43 units: POT with the full hold (the first two) and with the hold lowered to fit
    its range (the total mass near 2^52); and 2^36 units by OR-tools with residual shortest paths (POT's range
    set to 0)."""
    monkeypatch.setattr(w1_flow, "POT_MAX_MASS", pot_limit)
    supply, tails, heads, cost = _random_transshipment(scale)
    _check_optimal_with_tight_potentials(transshipment(supply, tails, heads, cost), supply, tails, heads, cost)


def test_network_simplex_conserves_integer_masses_that_pots_rescaling_would_round():
    """POT rescales the target masses by ``sum(a) / sum(b)``; with a total ``S`` near 2^31 and a target mass
    ``b_1`` for which ``b_1 * S / S != b_1`` in floating point, the flow must still conserve every mass exactly."""
    total, first = 1886378685.0, 509508204.0
    assert first * total / total != first  # the rounding this instance is chosen for
    a, b = np.array([total - 3, 3.0]), np.array([first, total - first])
    flow, _, _ = w1_flow.network_simplex(a, b, np.array([0, 0, 1, 1]), np.array([0, 1, 0, 1]),
                                         np.array([1.0, 2.0, 2.0, 1.0]))
    np.testing.assert_array_equal([flow[0] + flow[1], flow[2] + flow[3]], a)
    np.testing.assert_array_equal([flow[0] + flow[2], flow[1] + flow[3]], b)


def test_certified_interval_with_masses_of_ten_billion_units_holds_the_exact_value():
    """Masses in units of 1 / 9,998,900,000 (= 1 / lcm(100000, 99989), the unit of 10^5 real rows against an
    add/remove release of 99,989): 2000 atoms a side on a lattice of 20 cells, where the blocks' transport
    problems pass 2^53 in POT's rescaling. The interval holds ``ot.emd2`` of the same masses."""
    rng = np.random.default_rng(0)
    unit, atoms = 9_998_900_000, 2000
    points = rng.random((2 * atoms, 2))
    positive = rng.multinomial(unit, np.full(atoms, 1 / atoms))
    negative = rng.multinomial(unit, np.full(atoms, 1 / atoms))
    lower, upper = w1_certified.certified_w1(points, np.r_[positive, -negative], unit, "chebyshev", 20)
    exact = ot.emd2(positive / unit, negative / unit, ot.dist(points[:atoms], points[atoms:], metric="chebyshev"),
                    numItermax=10**7)
    assert lower <= exact * (1 + 1e-9) and exact <= upper * (1 + 1e-9), (lower, exact, upper)
    assert upper - lower <= 0.1 * lower


def test_integer_transshipment_is_optimal_and_its_potentials_are_feasible_and_tight():
    """OR-tools and the residual shortest paths on the small problem (integer costs: the power-of-two step keeps
    them exact), and on equal costs (one step per arc, as on the lattice)."""
    supply, tails, heads, cost = _random_transshipment(1)
    _check_optimal_with_tight_potentials(integer_transshipment(supply, tails, heads, cost), supply, tails, heads,
                                         cost)
    equal = np.full(len(cost), 0.37)
    flow, potential = integer_transshipment(supply, tails, heads, equal)
    _check_optimal_with_tight_potentials((flow / 0.37 * 0.37, potential / 0.37), supply, tails, heads,
                                         np.ones(len(cost)))


def test_residual_distances_report_a_negative_cycle():
    """A cycle of cost -1 has no shortest paths: None, not a wrong answer."""
    assert w1_flow.residual_distances(3, np.array([0, 1, 2]), np.array([1, 2, 0]), np.array([1, -1, -1])) is None
    np.testing.assert_array_equal(
        w1_flow.residual_distances(3, np.array([0, 1, 2]), np.array([1, 2, 0]), np.array([1, -1, 1])), [0, 0, -1])


def test_unequal_sizes_hold_pots_exact_value_on_both_solver_paths(monkeypatch):
    """n = 1500 against m = 1499 in d = 2 (masses in units of 1 / lcm = 1 / 2,248,500, so the split lattice
    problem holds about 2^33 units): the certified interval holds ``ot.emd2`` on the raw points, as it is
    and with every flow solved by OR-tools (``POT_MAX_MASS`` = 0)."""
    rng = np.random.default_rng(8)
    X, Y = rng.random((1500, 2)), np.clip(rng.normal(0.5, 0.2, (1499, 2)), 0, 1)
    exact = ot.emd2(np.full(1500, 1 / 1500), np.full(1499, 1 / 1499), ot.dist(X, Y, metric="chebyshev"),
                    numItermax=10**7)
    for limit in (w1_flow.POT_MAX_MASS, 0):
        monkeypatch.setattr(w1_flow, "POT_MAX_MASS", limit)
        value = w1(X, Y, metric="chebyshev", method="certified")
        assert value.lower <= exact * (1 + 1e-9) and exact <= value.upper * (1 + 1e-9), (limit, value.lower, exact,
                                                                                           value.upper)
        assert value.upper - value.lower <= 0.1 * value.lower


@pytest.mark.slow
def test_twenty_thousand_against_19950_rows_is_certified():
    """The lattice problem of 20,000 against 19,950 uniform points (units of 1 / 7,980,000) is solved: the
    certified interval intersects the grid method's (both hold W1) and meets the default tolerance (10%)."""
    rng = np.random.default_rng(0)
    X, Y = rng.random((20000, 2)), rng.random((19950, 2))
    value = w1(X, Y)
    assert value.method == "certified_flow"
    grid = w1(X, Y, method="grid")
    assert value.lower <= float(grid) + grid.error_bound and float(grid) - grid.error_bound <= value.upper
    assert value.upper - value.lower <= 0.1 * value.lower



@pytest.mark.slow
def test_pmm_release_under_add_remove_against_its_real_rows_is_certified():
    """10^5 real rows against a PMM release under add/remove neighbouring (a noisy size, so masses in units of
    1 / lcm(n, m), about 10^10): the certified interval intersects the grid method's (both hold W1) and meets
    the default tolerance (10%)."""
    real = two_blobs(100_000, 2, rng=0)
    release = ps.synthesize(real, "pmm", 1.0, schema=ps.unit_schema(2), neighbouring="add_remove", rng=1).unit_rows
    assert release is not None and len(release) != len(real)
    value = w1(real, release)
    assert value.method == "certified_flow"
    grid = w1(real, release, method="grid")
    assert value.lower <= float(grid) + grid.error_bound and float(grid) - grid.error_bound <= value.upper
    assert value.upper - value.lower <= 0.1 * value.lower

CASES = (("normal", "chebyshev"), ("shared", "cityblock"), ("grid", "chebyshev"), ("shift", "cityblock"),
         ("normal", "cityblock"), ("shared", "chebyshev"), ("grid", "cityblock"), ("shift", "chebyshev"))


def _instances():
    """Small d = 2 instances, fixed seeds, n != m: a uniform cloud against a clipped normal one, with a quarter of
    the points shared (cancelled mass), or on a 6 x 6 grid (duplicates), or a pure shift; both metrics."""
    rng = np.random.default_rng(21)
    for kind, metric in CASES:
        n, m = (int(v) for v in rng.integers(150, 500, 2))
        X, Y = rng.random((n, 2)), np.clip(rng.normal(0.5, rng.uniform(0.1, 0.4), (m, 2)), 0, 1)
        if kind == "shared":
            Y[: m // 4] = X[rng.integers(0, n, m // 4)]
        elif kind == "grid":
            X = np.round(X * 6) / 6
        elif kind == "shift":
            X, Y = 0.9 * X, 0.9 * X + 0.04
        yield X, Y, metric


def test_many_blocks_and_rounds_each_hold_the_exact_value(monkeypatch):
    """Blocks of 2 x 2 lattice cells in the dual sweeps and about 3 x 3 in the primal sweeps (16 to 49 blocks, every
    arc near a border) and 1 to 4 rounds without early
    stop: every interval contains POT's exact W1, and the fourth round's is no wider than the first's."""
    monkeypatch.setattr(w1_certified, "CERTIFIED_BLOCK", 2)
    monkeypatch.setattr(w1_certified, "CERTIFIED_PRIMAL_BLOCK", 3)
    for X, Y, metric in _instances():
        exact = w1(X, Y, metric=metric, method="exact")
        widths = []
        for rounds in (1, 4):
            monkeypatch.setattr(w1_certified, "CERTIFIED_ROUNDS", rounds)
            monkeypatch.setattr(w1_certified, "CERTIFIED_TOLERANCE", 0.0)
            value = w1(X, Y, metric=metric, method="certified", cells_per_axis=12)
            assert value.lower <= exact <= value.upper, (metric, rounds, value.lower, float(exact), value.upper)
            widths.append(value.upper - value.lower)
        assert widths[1] <= widths[0] * (1 + 1e-9)


def test_a_transform_that_skips_sources_is_caught(monkeypatch):
    """Detection case: a c-transform taken over every other source only (a plausible bug: a minimum over part of
    the candidates) over-estimates the McShane extension; the interval it yields misses the exact value on some
    instance, and the check used above catches it."""
    def half_transform(sources, values, targets, argmin=True):
        best, found = planar_c_transform(sources[::2], values[::2], targets, argmin)
        return best, None if found is None else 2 * found

    monkeypatch.setattr(w1_certified, "planar_c_transform", half_transform)
    caught = []
    for X, Y, metric in _instances():
        value, exact = w1(X, Y, metric=metric, method="certified"), w1(X, Y, metric=metric, method="exact")
        caught.append(not value.lower <= exact <= value.upper)
    assert any(caught)
