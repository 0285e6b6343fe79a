"""Certified W1 in the plane (privsyn_core/evaluation/w1_certified.py and its parts): the exact l1 c-transform,
the network simplex with potentials, the domain decomposition; every interval holds POT's exact W1.

All instances use fixed seeds: the checks are deterministic (no false-failure rate)."""

import numpy as np
import pytest
from ortools.graph.python import min_cost_flow

import privsyn_core as ps
from privsyn_core.evaluation import w1_certified
from privsyn_core.evaluation.w1_flow import transshipment
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


def test_transshipment_is_optimal_and_its_potentials_are_feasible_and_tight():
    """A random transshipment problem with transit nodes: the flow conserves every supply, costs what OR-tools'
    optimum costs (integer costs, so equal up to the float sum), and the potentials satisfy
    ``pi[t] - pi[h] <= cost`` on every arc with equality on arcs that carry flow."""
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
    flow, potential = transshipment(supply, tails, heads, cost)
    balance = np.bincount(tails, weights=flow, minlength=nodes) - np.bincount(heads, weights=flow, minlength=nodes)
    np.testing.assert_array_equal(balance, supply)
    solver = min_cost_flow.SimpleMinCostFlow()
    solver.add_arcs_with_capacity_and_unit_cost(tails, heads, np.full(len(tails), 10**6), cost.astype(np.int64))
    solver.set_nodes_supplies(np.arange(nodes), supply)
    assert solver.solve() == solver.OPTIMAL
    assert flow @ cost == pytest.approx(solver.optimal_cost(), abs=1e-9)
    slack = cost - potential[tails] + potential[heads]
    assert slack.min() >= -1e-9 and np.abs(slack[flow > 0]).max() <= 1e-9


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
    """Blocks of 2 x 2 lattice cells (dozens of blocks, every arc near a border) and 1 to 4 rounds without early
    stop: every interval contains POT's exact W1, and the fourth round's is no wider than the first's."""
    monkeypatch.setattr(w1_certified, "CERTIFIED_BLOCK", 2)
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
    def half_transform(sources, values, targets):
        best, argmin = planar_c_transform(sources[::2], values[::2], targets)
        return best, 2 * argmin

    monkeypatch.setattr(w1_certified, "planar_c_transform", half_transform)
    caught = []
    for X, Y, metric in _instances():
        value, exact = w1(X, Y, metric=metric, method="certified"), w1(X, Y, metric=metric, method="exact")
        caught.append(not value.lower <= exact <= value.upper)
    assert any(caught)
