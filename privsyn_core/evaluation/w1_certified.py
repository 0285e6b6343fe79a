r"""Certified interval for W1 in the plane: a primal coupling (upper end) and a dual potential (lower end).

Used by :func:`privsyn_core.evaluation.distances.w1` (``method="certified"``, and ``"auto"`` for large inputs in
d = 2). The ground metric is l-infinity (chebyshev) or l1 (cityblock). Both are an l1 norm after a linear map
``T``: for chebyshev in d = 2, ``max(|dx|, |dy|) = (|du| + |dv|) / 2`` with ``u = x + y``, ``v = x - y``; for
cityblock ``T`` is the identity. Write :math:`\rho(p, q) = s \, \|T p - T q\|_1` with ``s = 1/2`` or ``1``.

A lattice of nodes ``lo + w (i, j)``, ``0 <= i, j <= k``, covers the bounding box of the ``T``-images of the atoms;
its 4-neighbour graph has arcs of cost ``s w``, and its path metric between lattice nodes is exactly
:math:`\rho` (l1 is additive along a monotone staircase). Every cost is an integer in units of ``s w / M``.

Upper end ``U`` (a coupling): the graph ``G`` = lattice + the atoms, each positive atom ``x`` with arcs to the 4
corners of its lattice cell (cost :math:`\lceil \rho(x, c) \rceil`), each negative atom ``y`` with arcs from the 4
corners of its cell, and an arc from each positive atom to each of its ``neighbours`` nearest negative atoms
and back-wise (cost :math:`\lceil \rho(x, y) \rceil`). Every arc costs at least :math:`\rho` between its ends, so
by the triangle inequality every path from ``x`` to ``y`` costs at least :math:`\rho(x, y)`, and a flow of
``mu - nu`` through ``G`` decomposes into paths that form a coupling of ``mu`` and ``nu`` whose cost is at most
the flow's cost. Hence :math:`W_1(\mu,\nu) \le U` = cost of the min-cost flow (OR-tools ``SimpleMinCostFlow``);
the flow returned is checked here (conservation of mass at every node, non-negative flows) and its cost is
recomputed from it, so ``U`` does not rest on the solver's claim of optimality. A path through the lattice is
exact (cost :math:`\rho(x, y)` up to the ceiling) when the cells of ``x`` and ``y`` differ in both coordinates:
leave ``x`` by the corner towards ``y`` and enter ``y`` by the corner towards ``x``. On large problems (from
``PREMATCH_MIN_ATOMS`` atoms) part of the coupling is fixed first, at its exact cost: close pairs of mutual
nearest atoms of opposite sign exchange their common mass directly (:func:`_match_mutual_nearest`); the flow
carries the rest. A coupling of each part is a coupling of the whole, so ``U`` is still the cost of a coupling;
at 10^5 vs 10^5 points it halves the flow problem and moves ``U`` by less than 1%.

Lower end ``L`` (a 1-Lipschitz function): each atom is moved to its nearest lattice node and W1 of the moved
measures is a min-cost flow on the lattice alone. Its optimal node potentials ``phi`` (shortest-path distances
in the residual graph of the optimal flow, by a vectorised Bellman-Ford; OR-tools does not return them) satisfy
:math:`|\phi(c) - \phi(c')| \le \rho(c, c')` on every lattice arc, checked here, hence on all pairs of lattice
nodes (sum along a monotone staircase). Extend by McShane and Whitney,

.. math:: f^+(z) = \min_c \phi(c) + \rho(z, c), \qquad f^-(z) = \max_c \phi(c) - \rho(z, c),

minimum and maximum of 1-Lipschitz functions, so 1-Lipschitz for :math:`\rho` on the whole plane (they agree with
``phi`` on the lattice). By Kantorovich-Rubinstein weak duality, for any coupling :math:`\gamma`,
:math:`\sum \gamma_{xy} \rho(x, y) \ge \sum \gamma_{xy} (f(x) - f(y)) = \int f d\mu - \int f d\nu`, so
:math:`L = \max_\pm \int f^\pm d(\mu - \nu) \le W_1(\mu, \nu)`. The minimum over all lattice nodes is attained at
a corner of the cell ``B`` that holds ``z``: for a node ``c``, let ``p`` be ``c`` clamped coordinate-wise (in ``T``
coordinates) to ``B``; it is a corner of ``B`` (a lattice coordinate inside ``B``'s range is one of its two
ends), each coordinate of ``p`` lies between those of ``z`` and ``c``, so :math:`\rho(z, c) = \rho(z, p) +
\rho(p, c)`, and :math:`\phi(c) + \rho(z, c) \ge \phi(p) - \rho(p, c) + \rho(z, p) + \rho(p, c)`. (Likewise for
the maximum.) So ``f`` costs 4 evaluations per atom. ``L`` needs no optimality of ``phi``, only the
1-Lipschitz check.

The two ends are independent flow problems; on large problems (from ``PARALLEL_MIN_ATOMS`` atoms, outside daemonic
processes such as Dask's workers) they are solved at the same time in two of joblib's worker processes (OR-tools
holds the GIL while it solves, so threads would take turns).

Both ends also hold the simple quantisation interval ``W_q +- q`` of the lattice problem (triangle inequality of
W1, as in the grid method); the reported interval is the intersection.

Rounding: masses are exact integers (unweighted inputs, in units of ``1 / lcm(n, m)``). Atom-to-node costs are
rounded up after a relative margin of 1e-9 and an absolute one of 1e-6 units, far above the floating-point error
of computing :math:`\rho` (about 1e-16 relative), so every integer cost is at least the true distance; the
potentials are exact integers; the final sums (floating point, relative error ~1e-15) are widened by 1e-9
relative.
"""

from __future__ import annotations

from multiprocessing import current_process

import numpy as np
from joblib import Parallel, delayed
from scipy.spatial import cKDTree

from privsyn_core.errors import ParameterError
from privsyn_core.evaluation.w1_sparse import TRANSFORM_MAX_PAIRS, sparse_certified_w1

CERTIFIED_CELLS = 150  # default lattice cells per axis of the upper end (10^5 vs 10^5 points: 15-25 s)
LOWER_REFINEMENT = 2  # the lower end's lattice (cheaper: no atom nodes) has this many times more cells per axis
CERTIFIED_NEIGHBOURS = 4  # direct arcs from each atom to its nearest atoms of the other sign
PREMATCH_QUANTILE = 0.5  # mutual nearest pairs closer than this quantile of nearest distances are matched first
PREMATCH_ROUNDS = 2  # ... repeated on the atoms left
PREMATCH_MIN_ATOMS = 20_000  # ... on problems of at least this many atoms (below, the flow alone is fast)
PARALLEL_MIN_ATOMS = 20_000  # from this many atoms the two ends are solved in two worker processes at once
CERTIFIED_MAX_BYTES = 1_000_000_000  # memory budget of one certified call (arrays and the solver's arcs)
_BYTES_PER_ARC = 160  # estimate (not measured): numpy tails, heads, costs, flows (40 B) + OR-tools' arcs and residuals
_BYTES_PER_NODE = 64
_COST_UNITS = 2**8  # integer cost units per lattice step (finer: slower cost scaling, at most 2 units per path gained)
_MARGIN_REL, _MARGIN_ABS = 1e-9, 1e-6


def certified_bytes(atoms: int, k: int, neighbours: int) -> int:
    """Memory estimate of :func:`certified_w1`: its two flow problems, solved at the same time."""
    lower_lattice = (max(1, round(LOWER_REFINEMENT * k)) + 1) ** 2
    nodes = (k + 1) ** 2 + atoms + lower_lattice
    arcs = 4 * (k + 1) ** 2 + 4 * atoms + 2 * neighbours * atoms + 4 * lower_lattice
    return arcs * _BYTES_PER_ARC + nodes * _BYTES_PER_NODE


def certified_w1(atoms: np.ndarray, supply: np.ndarray, unit: int, metric: str, k: int,
                 neighbours: int = CERTIFIED_NEIGHBOURS) -> tuple[float, float]:
    """Certified ``(lower, upper)`` for W1 between the positive and the negative part of a signed measure.

    In d = 2 by the lattice method of this module; in other d by
    :func:`privsyn_core.evaluation.w1_sparse.sparse_certified_w1` (``k`` unused there).

    Parameters
    ----------
    atoms : array (N, d)
        Distinct points.
    supply : int array (N,)
        Signed integer masses ``mu - nu`` in units of ``1 / unit``, summing to 0, none zero.
    unit : int
        Mass units per unit of mass.
    metric : {"chebyshev", "cityblock"}
    k : int
        Lattice cells per axis.
    neighbours : int
        Direct arcs per atom to its nearest atoms of the other sign (0: through the lattice only).
    """
    if metric not in ("chebyshev", "cityblock"):
        raise ParameterError("method='certified' needs metric 'chebyshev' or 'cityblock'")
    if atoms.shape[1] != 2:
        pairs = int(np.count_nonzero(supply > 0)) * int(np.count_nonzero(supply < 0))
        if metric == "chebyshev" and pairs > TRANSFORM_MAX_PAIRS:
            raise ParameterError(f"method='certified' in d = {atoms.shape[1]} (chebyshev) visits every pair of "
                                 f"atoms: {pairs:.3g} pairs exceed the budget of {TRANSFORM_MAX_PAIRS:.3g}")
        return sparse_certified_w1(atoms, supply, unit, metric)
    scale = 0.5 if metric == "chebyshev" else 1.0
    P = np.c_[atoms[:, 0] + atoms[:, 1], atoms[:, 0] - atoms[:, 1]] if metric == "chebyshev" else atoms
    lo = P.min(axis=0)
    span = float(np.max(P.max(axis=0) - lo)) or 1.0
    width = span / k
    cell = np.clip(np.floor((P - lo) / width), 0, k - 1).astype(np.int64)
    fine = max(1, round(LOWER_REFINEMENT * k))
    lower_args = (P, lo, span / fine, fine, supply, scale, scale * span / fine)
    upper_args = (atoms, P, lo, width, k, cell, supply, scale, metric, neighbours)
    if len(atoms) >= PARALLEL_MIN_ATOMS and not current_process().daemon:  # OR-tools holds the GIL: processes
        (lower, grid_value, quantisation), upper = Parallel(n_jobs=2)([delayed(_lower)(*lower_args),
                                                                       delayed(_upper_end)(*upper_args)])
    else:
        (lower, grid_value, quantisation), upper = _lower(*lower_args), _upper_end(*upper_args)
    low, high = max(lower, grid_value - quantisation, 0.0) / unit, min(upper, grid_value + quantisation) / unit
    return low * (1 - _MARGIN_REL), high * (1 + _MARGIN_REL)  # floating-point sums: relative error ~1e-15


def _upper_end(atoms: np.ndarray, P: np.ndarray, lo: np.ndarray, width: float, k: int, cell: np.ndarray,
               supply: np.ndarray, scale: float, metric: str, neighbours: int) -> float:
    """Upper end (mass units x rho): close mutual nearest pairs matched first on large problems, then the flow."""
    matched, matched_cost = (_match_mutual_nearest(atoms, supply, metric) if len(atoms) >= PREMATCH_MIN_ATOMS
                             else (np.zeros_like(supply), 0.0))
    rest = supply != matched
    if not rest.any():
        return matched_cost
    return matched_cost + _upper(atoms[rest], P[rest], lo, width, k, cell[rest], supply[rest] - matched[rest],
                                 scale, scale * width, metric, neighbours)


def _lattice_arcs(k: int) -> tuple[np.ndarray, np.ndarray]:
    """Both directions of the 4-neighbour arcs of the (k+1)^2 lattice (node id i + (k+1) j)."""
    nodes = np.arange((k + 1) ** 2, dtype=np.int64).reshape((k + 1, k + 1), order="F")
    a, b = np.r_[nodes[:-1, :].ravel(), nodes[:, :-1].ravel()], np.r_[nodes[1:, :].ravel(), nodes[:, 1:].ravel()]
    return np.r_[a, b], np.r_[b, a]


def _solve(tails: np.ndarray, heads: np.ndarray, costs: np.ndarray, supply: np.ndarray) -> np.ndarray:
    """Optimal flows of an uncapacitated min-cost flow by OR-tools, checked for conservation of mass."""
    from ortools.graph.python import min_cost_flow

    solver = min_cost_flow.SimpleMinCostFlow()
    capacity = int(supply[supply > 0].sum())
    arcs = solver.add_arcs_with_capacity_and_unit_cost(tails.astype(np.int32), heads.astype(np.int32),
                                                       np.full(len(tails), capacity, dtype=np.int64),
                                                       costs.astype(np.int64))
    solver.set_nodes_supplies(np.arange(len(supply), dtype=np.int32), supply.astype(np.int64))
    status = solver.solve()
    if status != solver.OPTIMAL:
        raise RuntimeError(f"OR-tools min-cost flow did not reach the optimum (status {status})")
    flows = np.asarray(solver.flows(arcs), dtype=np.int64)
    balance = (np.bincount(tails, weights=flows, minlength=len(supply))
               - np.bincount(heads, weights=flows, minlength=len(supply)))
    if np.any(flows < 0) or not np.array_equal(balance, supply.astype(float)):
        raise RuntimeError("OR-tools returned a flow that does not conserve mass")
    return flows


def _ceil_units(distance: np.ndarray, step: float) -> np.ndarray:
    return np.ceil(distance / step * _COST_UNITS * (1 + _MARGIN_REL) + _MARGIN_ABS).astype(np.int64)


def _upper(atoms: np.ndarray, P: np.ndarray, lo: np.ndarray, width: float, k: int, cell: np.ndarray,
           supply: np.ndarray, scale: float, step: float, metric: str, neighbours: int) -> float:
    """Cost (in mass units x rho) of the min-cost flow of the signed measure through lattice + atoms + direct arcs."""
    lattice = (k + 1) ** 2
    ids = lattice + np.arange(len(P))
    pos, neg = supply > 0, supply < 0
    lt, lh = _lattice_arcs(k)
    tails, heads, costs = [lt], [lh], [np.full(len(lt), _COST_UNITS, dtype=np.int64)]
    for corner in ((0, 0), (1, 0), (0, 1), (1, 1)):
        node = cell + corner
        dist = scale * np.abs(P - (lo + node * width)).sum(axis=1)
        node_id = node[:, 0] + (k + 1) * node[:, 1]
        tails += [ids[pos], node_id[neg]]
        heads += [node_id[pos], ids[neg]]
        costs += [_ceil_units(dist[pos], step), _ceil_units(dist[neg], step)]
    if neighbours > 0:
        pairs = _neighbour_pairs(atoms, pos, neg, metric, neighbours)
        gap = np.abs(atoms[pairs[:, 0]] - atoms[pairs[:, 1]])
        dist = gap.max(axis=1) if metric == "chebyshev" else gap.sum(axis=1)
        tails.append(ids[pairs[:, 0]])
        heads.append(ids[pairs[:, 1]])
        costs.append(_ceil_units(dist, step))
    all_tails, all_heads, all_costs = np.concatenate(tails), np.concatenate(heads), np.concatenate(costs)
    flows = _solve(all_tails, all_heads, all_costs, np.r_[np.zeros(lattice, dtype=np.int64), supply])
    return float(flows @ all_costs) * step / _COST_UNITS


def _match_mutual_nearest(atoms: np.ndarray, supply: np.ndarray, metric: str) -> tuple[np.ndarray, float]:
    """Part of the coupling fixed in advance: close pairs of mutual nearest atoms of opposite sign.

    In each of ``PREMATCH_ROUNDS`` rounds, on the atoms with mass left, a positive atom ``x`` and a negative atom
    ``y`` that are each other's nearest atom of the other sign, at a distance of at most the
    ``PREMATCH_QUANTILE`` quantile of the positive atoms' nearest distances, exchange
    ``min(supply[x], -supply[y])`` directly. Returns the mass so matched per atom (signed like ``supply``; the
    flow then carries ``supply - matched``) and its exact cost (mass units x rho). A coupling of the matched
    part and a coupling of the rest add up to a coupling of ``mu`` and ``nu``, so the upper end stays certified
    whatever is matched here; it stays close to the optimum because short mutual nearest pairs are almost
    always matched by an optimal coupling (measured at 10^5 vs 10^5 in docs/w1.md), and it shrinks the
    flow problem by about half.
    """
    matched = np.zeros_like(supply)
    cost = 0.0
    norm = np.inf if metric == "chebyshev" else 1
    for _ in range(PREMATCH_ROUNDS):
        left = supply - matched
        p_index, n_index = np.flatnonzero(left > 0), np.flatnonzero(left < 0)
        if len(p_index) == 0 or len(n_index) == 0:
            break
        distance, nearest_negative = cKDTree(atoms[n_index]).query(atoms[p_index], 1, p=norm)
        _, nearest_positive = cKDTree(atoms[p_index]).query(atoms[n_index], 1, p=norm)
        chosen = ((nearest_positive[nearest_negative] == np.arange(len(p_index)))
                  & (distance <= np.quantile(distance, PREMATCH_QUANTILE)))
        x, y = p_index[chosen], n_index[nearest_negative[chosen]]
        mass = np.minimum(left[x], -left[y])
        matched[x] += mass
        matched[y] -= mass
        cost += float(mass @ distance[chosen])
    return matched, cost


def _neighbour_pairs(atoms: np.ndarray, pos: np.ndarray, neg: np.ndarray, metric: str, count: int) -> np.ndarray:
    """(positive atom, negative atom) index pairs: each one's ``count`` nearest of the other sign, deduplicated."""
    p_index, n_index = np.flatnonzero(pos), np.flatnonzero(neg)
    norm = np.inf if metric == "chebyshev" else 1
    pairs = []
    for here, there in ((p_index, n_index), (n_index, p_index)):
        c = min(count, len(there))
        _, j = cKDTree(atoms[there]).query(atoms[here], c, p=norm)
        j = j.reshape(len(here), c)
        pairs.append(np.c_[np.repeat(here, c), there[j.ravel()]])
    both = np.r_[pairs[0], pairs[1][:, ::-1]]
    return np.unique(both, axis=0)


def _lower(P: np.ndarray, lo: np.ndarray, width: float, k: int, supply: np.ndarray, scale: float,
           step: float) -> tuple[float, float, float]:
    """Dual lower bound, lattice value W_q and quantisation q (all in mass units x rho) of the lattice problem."""
    nearest = np.clip(np.rint((P - lo) / width), 0, k).astype(np.int64)
    lattice = (k + 1) ** 2
    node_supply = np.bincount(nearest[:, 0] + (k + 1) * nearest[:, 1], weights=supply,
                              minlength=lattice).astype(np.int64)
    quantisation = float(np.abs(supply) @ (scale * np.abs(P - (lo + nearest * width)).sum(axis=1)))
    if not node_supply.any():
        return 0.0, 0.0, quantisation
    tails, heads = _lattice_arcs(k)
    flows = _solve(tails, heads, np.ones(len(tails), dtype=np.int64), node_supply)
    grid_value = float(flows.sum()) * step
    distance = _residual_potentials(tails, heads, flows, lattice, np.ones(len(tails), dtype=np.int64))
    if np.any(np.abs(distance[tails] - distance[heads]) > 1):
        raise RuntimeError("the lattice potentials are not 1-Lipschitz; no certified lower bound")
    phi = -distance * step  # exact integers times the step: 1-Lipschitz for rho on the lattice
    cell = np.clip(np.floor((P - lo) / width), 0, k - 1).astype(np.int64)
    low, high = np.full(len(P), np.inf), np.full(len(P), -np.inf)
    for corner in ((0, 0), (1, 0), (0, 1), (1, 1)):
        node = cell + corner
        dist = scale * np.abs(P - (lo + node * width)).sum(axis=1)
        value = phi[node[:, 0] + (k + 1) * node[:, 1]]
        low, high = np.minimum(low, value + dist), np.maximum(high, value - dist)
    return max(float(supply @ low), float(supply @ high)), grid_value, quantisation


def _residual_potentials(tails: np.ndarray, heads: np.ndarray, flows: np.ndarray, nodes: int,
                         costs: np.ndarray) -> np.ndarray:
    """Shortest-path distances from a virtual source (0-cost arcs to every node) in the residual graph of a flow.

    Residual arcs: every arc (uncapacitated) at its integer cost, and the reverse of every arc with positive flow
    at minus its cost.
    Bellman-Ford, one vectorised relaxation of all arcs per round, until nothing changes; the optimal flow has no
    negative residual cycle, so it stops within ``nodes`` rounds.
    """
    used = flows > 0
    rt, rh = np.r_[tails, heads[used]], np.r_[heads, tails[used]]
    rc = np.r_[costs, -costs[used]]
    order = np.argsort(rh, kind="stable")
    rt, rh, rc = rt[order], rh[order], rc[order]
    starts = np.flatnonzero(np.r_[True, rh[1:] != rh[:-1]])
    targets = rh[starts]
    distance = np.zeros(nodes, dtype=np.int64)
    for _ in range(nodes + 1):
        best = np.minimum(distance[targets], np.minimum.reduceat(distance[rt] + rc, starts))
        if np.array_equal(best, distance[targets]):
            return distance
        distance[targets] = best
    raise RuntimeError("negative cycle in the residual graph: the flow is not optimal")

