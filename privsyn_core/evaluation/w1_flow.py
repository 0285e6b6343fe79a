"""Min-cost flow with node potentials on a sparse graph, exact in integer masses of any size below 2^53.

Used by the certified W1 intervals (:mod:`privsyn_core.evaluation.w1_certified`,
:mod:`privsyn_core.evaluation.w1_sparse`), which need the optimal flow *and* the dual potentials. Two solvers:

* POT's network simplex (Bonneel, van de Panne, Paris and Heidrich, "Displacement interpolation using Lagrangian
  mass transport", 2011), which returns both. It solves transport problems (sources to targets); a transshipment
  problem is put in that form by splitting every node that has arcs both in and out into a source and a target
  joined by a free arc, both holding ``hold`` extra units, so the free arc carries ``hold`` minus what passes
  through the node. This is the transshipment problem with each node's throughput capped at ``hold``. An acyclic
  optimal flow passes at most the total positive supply ``P`` through any node, so ``hold = P + 1`` loses nothing.
  POT's arithmetic on masses is exact while every sum stays below 2^53 (:func:`network_simplex` calls its solver
  without the rescaling of the target masses that ``ot.emd`` applies), so ``hold`` is lowered to fit
  ``POT_MAX_MASS`` when needed, and the solution then accepted only if every free arc carries flow. Then no cap
  binds, so the capped optimum is a local, hence (linear programme) global optimum of the uncapped problem; and
  every free arc is in the optimal basis, so the two halves' potentials agree.
* Otherwise (masses beyond that range: unweighted inputs of unequal sizes count mass in units of
  ``1 / lcm(n, m)``, up to 2^40 units, and a block with many transit nodes holds that many times more),
  OR-tools' ``SimpleMinCostFlow`` (cost scaling, 64-bit integers) on the arc costs rounded to a power-of-two step
  (exact for equal costs, as on the lattice, and for small integers), and the potentials from shortest paths in
  its residual graph (Ahuja, Magnanti and Orlin, *Network Flows*, 1993, section 9.3): with ``d`` the distances
  from a virtual node joined to every node at cost 0, ``pi = -d`` satisfies ``pi[t] - pi[h] <= cost`` on every
  arc with room left and ``>=`` on every arc carrying flow (its reverse is a residual arc of cost ``-cost``); the
  residual graph of an optimal flow has no negative cycle, so the label-correcting iteration (Bellman-Ford, one
  vectorised pass over all residual arcs per round) converges.
"""

from __future__ import annotations

import numpy as np
from ortools.graph.python import min_cost_flow
from ot.lp.emd_wrap import emd_c_sparse

POT_MAX_MASS = 2**52  # POT's network simplex on at most this total mass (both sides' sums stay below 2^53)
_COST_STEPS = 2**20  # OR-tools' integer costs: the largest arc cost in about this many power-of-two steps ...
_COST_TOTAL = 2**60  # ... fewer where steps x capacity x (nodes + 1) would pass this (int64 cost sums)
_ITERATIONS = 10**9
_OPTIMAL = 1  # POT's result code of an optimal solution


def transshipment(supply: np.ndarray, tails: np.ndarray, heads: np.ndarray,
                  cost: np.ndarray) -> tuple[np.ndarray, np.ndarray] | None:
    """Min-cost flow of ``supply`` (summing to 0) along the uncapacitated arcs ``tails -> heads``.

    Parameters
    ----------
    supply : array (nodes,)
        Integer-valued supplies (negative: demands), exact below 2^53.
    tails, heads : int arrays (arcs,)
        Distinct (tail, head) pairs.
    cost : array (arcs,)

    Returns
    -------
    (flow, potential) or None
        An integral flow on each arc conserving every supply and node potentials with
        ``potential[t] - potential[h] <= cost`` on every arc (equality where the flow is positive), or None unless
        a solver reached the optimum. The flow is optimal for ``cost`` when POT solves it, else for ``cost``
        rounded to a power-of-two step (the potentials likewise, within half a step).
    """
    nodes = len(supply)
    if not np.any(supply) and np.all(cost >= 0):  # nothing to move (POT calls a problem without mass infeasible)
        return np.zeros(len(tails)), np.zeros(nodes)
    source, target = supply > 0, supply < 0
    source[tails], target[heads] = True, True
    transit = np.flatnonzero(source & target)
    positive = float(np.maximum(supply, 0).sum())
    hold = min(positive + 1, float(np.floor((POT_MAX_MASS - positive) / max(len(transit), 1))))
    solution = split_network_simplex(supply, tails, heads, cost, transit, hold) if hold >= 1 else None
    if solution is not None:
        return solution
    return integer_transshipment(np.rint(supply).astype(np.int64), tails, heads, cost)


def split_network_simplex(supply: np.ndarray, tails: np.ndarray, heads: np.ndarray, cost: np.ndarray,
                          transit: np.ndarray, hold: float) -> tuple[np.ndarray, np.ndarray] | None:
    """:func:`transshipment` by POT, the ``transit`` nodes split with ``hold`` extra units each; None unless POT
    reached the optimum and, if ``hold`` is at most the total positive supply, with flow on every free arc (module
    docstring)."""
    nodes = len(supply)
    source, target = supply > 0, supply < 0
    source[tails], target[heads] = True, True
    source_id, target_id = np.cumsum(source) - 1, np.cumsum(target) - 1
    extra = np.zeros(nodes)
    extra[transit] = hold
    result = network_simplex(np.maximum(supply, 0)[source] + extra[source],
                             np.maximum(-supply, 0)[target] + extra[target],
                             np.r_[source_id[tails], source_id[transit]], np.r_[target_id[heads], target_id[transit]],
                             np.r_[cost, np.zeros(len(transit))])
    capped = hold <= np.maximum(supply, 0).sum()
    if result is None or (capped and np.any(result[0][len(tails):] <= 0)):
        return None
    flow, u, v = result
    potential = np.where(source, u[np.maximum(source_id, 0)], -v[np.maximum(target_id, 0)])
    return flow[:len(tails)], potential


def integer_transshipment(supply: np.ndarray, tails: np.ndarray, heads: np.ndarray,
                          cost: np.ndarray) -> tuple[np.ndarray, np.ndarray] | None:
    """:func:`transshipment` by OR-tools on int64 ``supply`` and the costs in integer steps, with the potentials
    from shortest paths in the residual graph (module docstring)."""
    nodes = len(supply)
    capacity = max(int(supply[supply > 0].sum()), 1)  # an acyclic optimal flow carries at most this on any arc
    largest = float(np.abs(cost).max()) if len(cost) else 0.0
    resolution = max(1, min(_COST_STEPS, _COST_TOTAL // (capacity * (nodes + 1))))
    if largest == 0 or np.all(cost == cost[0]):
        step = largest or 1.0  # one step per arc: exact
    else:
        step = float(2.0 ** np.floor(np.log2(largest / resolution)))  # a power of two: small integers stay exact
    steps = np.rint(cost / step).astype(np.int64)
    solver = min_cost_flow.SimpleMinCostFlow()
    arcs = solver.add_arcs_with_capacity_and_unit_cost(tails.astype(np.int32), heads.astype(np.int32),
                                                       np.full(len(tails), capacity, dtype=np.int64), steps)
    solver.set_nodes_supplies(np.arange(nodes, dtype=np.int32), supply)
    if solver.solve() != solver.OPTIMAL:
        return None
    flow = solver.flows(arcs)
    open_arcs, used = flow < capacity, flow > 0
    distance = residual_distances(nodes, np.r_[tails[open_arcs], heads[used]], np.r_[heads[open_arcs], tails[used]],
                                  np.r_[steps[open_arcs], -steps[used]])
    if distance is None:
        return None
    return flow.astype(float), -step * distance.astype(float)


def residual_distances(nodes: int, tails: np.ndarray, heads: np.ndarray, cost: np.ndarray) -> np.ndarray | None:
    """Shortest distances from a virtual node joined to every node at cost 0, along integer-cost arcs (some
    negative), by Bellman-Ford rounds (each relaxes every arc at once); None on a negative cycle."""
    distance = np.zeros(nodes, dtype=np.int64)
    if len(tails) == 0:
        return distance
    order = np.argsort(heads, kind="stable")
    tails, heads, cost = tails[order], heads[order], cost[order]
    starts = np.r_[0, np.flatnonzero(np.diff(heads)) + 1]
    ends = heads[starts]
    for _ in range(nodes + 1):  # a shortest path has at most nodes arcs, the first from the virtual node
        candidate = np.minimum.reduceat(distance[tails] + cost, starts)
        better = candidate < distance[ends]
        if not better.any():
            return distance
        distance[ends[better]] = candidate[better]
    return None


def network_simplex(a: np.ndarray, b: np.ndarray, src: np.ndarray, dst: np.ndarray,
                    cost: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
    """POT's exact transport on the sparse arcs ``src -> dst`` (distinct pairs), masses ``a`` and ``b`` with equal
    sums: the flow on each arc and the potentials ``u``, ``v`` (``u_i + v_j <= cost_ij``), or None unless it reached
    the optimum.

    Calls POT's compiled sparse solver (``ot.lp.emd_wrap.emd_c_sparse``, POT 0.9) itself, without ``ot.emd``'s
    conversions and checks (they cost more than the solve of a small block) and without its rescaling of ``b`` to
    ``b * sum(a) / sum(b)``, which rounds an integer ``b_j`` once ``b_j sum(a)`` passes 2^53 (then the masses no
    longer balance and POT calls the problem infeasible, or its flow is off by a few units in the last place).
    Integer masses of equal sums below 2^53 reach the solver exactly."""
    rows, cols, data, _, u, v, status = emd_c_sparse(np.ascontiguousarray(a, dtype=float),
                                                     np.ascontiguousarray(b, dtype=float), src.astype(np.uint64),
                                                     dst.astype(np.uint64), np.ascontiguousarray(cost, dtype=float),
                                                     _ITERATIONS)
    if status != _OPTIMAL:
        return None
    targets = len(b)
    carried = rows.astype(np.int64) * targets + cols.astype(np.int64)  # the few arcs with flow, looked up from every
    order = np.argsort(carried)  # arc (no sort of all arcs)
    carried, data = carried[order], np.asarray(data)[order]
    key = src * targets + dst
    at = np.searchsorted(carried, key).clip(max=max(len(carried) - 1, 0))
    flow = np.where(carried[at] == key, data[at], 0.0) if len(carried) else np.zeros(len(src))
    return flow, np.asarray(u), np.asarray(v)
