r"""Certified interval for W1 in the plane: a coupling (upper end) and a 1-Lipschitz function (lower end).

Used by :func:`privsyn_core.evaluation.distances.w1` (``method="certified"``, and ``"auto"`` for large unweighted
inputs in d = 2). The ground metric is l-infinity (chebyshev) or l1 (cityblock). Both are an l1 norm after a
linear map: for chebyshev in d = 2, ``max(|dx|, |dy|) = (|du| + |dv|) / 2`` with ``u = x + y``, ``v = x - y``.
All work happens on ``q = s T p`` (``T`` the rotation and ``s = 1/2`` for chebyshev, the identity for
cityblock), where :math:`\rho(p, p') = \|q - q'\|_1`.

**The network.** Nodes: the atoms of ``mu - nu`` and the nodes of a lattice ``lo + w (i, j)``, ``0 <= i, j <= k``,
over the atoms' bounding box. Arcs, each as long as :math:`\rho` between its ends: both directions between
4-neighbour lattice nodes, each positive atom to the 4 corners of its lattice cell and those corners to each
negative atom of the cell, each positive atom to its ``neighbours`` nearest negative atoms and back-wise (k-d
tree), and later the arcs the lower end asks for (below). A feasible flow of ``mu - nu`` through the network
decomposes into paths from positive to negative atoms, each at least as long as :math:`\rho` between its ends
(triangle inequality), so the paths form a coupling of cost at most the flow's cost: :math:`W_1 \le U`.

**Weak duality.** For any potential ``g`` on the negative atoms, ``F(x) = min_y g(y) + rho(x, y)`` on the
positive atoms and ``G(y) = max_x F(x) - rho(x, y)`` (the McShane and Whitney extensions) satisfy
``F(x) - G(y) <= rho(x, y)`` for every pair (McShane, "Extension of range of functions", 1934), so by
Kantorovich-Rubinstein duality
:math:`W_1 \ge L = \sum_x \mu_x F(x) - \sum_y \nu_y G(y)` whatever ``g`` is. ``L`` rests only on computing
``G`` exactly, which :func:`privsyn_core.evaluation.w1_transform.planar_c_transform` does (four-quadrant divide
and conquer; a k-d tree is hopeless on potentials of slope 1). ``L`` is close to ``W1`` when ``g`` is close to
an optimal dual of the full problem.

**Solving by domain decomposition.** One min-cost flow over 2 x 10^5 atoms takes OR-tools or POT 10-20 s;
blocks of ``CERTIFIED_BLOCK`` x ``CERTIFIED_BLOCK`` lattice cells (about 10^3 atoms at 10^5 points a side) take
milliseconds each. So the network's flow problem is solved block by block, on two partitions of each kind below,
the second cutting midway between the first's cuts, with POT's network simplex
(:func:`privsyn_core.evaluation.w1_flow.transshipment`, which also returns the potentials; OR-tools and residual
shortest paths where the masses pass POT's range). The dual sweeps' blocks are squares; the primal sweeps' are
products of strips along each axis, each strip an equal share of a weight per lattice cell that counts the atoms
for ``CERTIFIED_PRIMAL_DENSITY`` and the cells for the rest: the network simplex's time grows faster than the
size of a block, so the dense blocks, made smaller, cost much less, while the sparse ones grow (any partition
keeps every property below):

* *primal sweep* (the upper end): the flow on the arcs between blocks is held fixed; each block's flow is then an
  independent min-cost flow with supplies corrected by the fixed flow across its border, solved exactly. No
  block's cost rises, so neither does the total, and the flow stays feasible (domain decomposition as in
  Benamou, "A domain decomposition method for the polar factorization of vector-valued mappings", 1995).
* *dual sweep* (the lower end's ``g``): block coordinate ascent on the dual, :math:`\max \sum_i s_i \pi_i` over
  :math:`\pi_i - \pi_j \le c_{ij}` on every arc. With the potentials outside a block fixed, the block's optimal
  potentials are those of a min-cost flow on the block plus one outside node ``o`` with arcs ``i -> o`` of cost
  :math:`c_{ij} + \pi_j` and ``o -> i`` of cost :math:`c_{ji} - \pi_j` for the arcs leaving and entering the
  block (anchored at :math:`\pi_o = 0`); feasible potentials stay feasible, so no such flow has a negative cycle.
  Blocks are taken one after the other (Gauss-Seidel).

The start is the lattice problem: W1 of the atoms moved to their nearest lattice node, a min-cost flow on the
lattice alone (solved whole, once). Its flow, plus each atom's arc to its nearest node, is the first feasible
flow; its potentials, extended to the atoms by McShane through the cell's corners, the first feasible dual. A
round is two primal sweeps (one per partition), a dual sweep and the transforms, on ``_THREADS`` threads (POT's
network simplex releases the GIL): the dual sweep and the transforms in one, the primal sweeps' blocks
(independent, largest first) in whichever is free; the lattice problem is solved in one while the other finds
the nearest neighbours. The minimisers of ``F`` and ``G`` (the pairs whose dual constraint binds) then join the
network as arcs (column generation, as in Gottschlich and Schuhmacher, "The shortlist method for fast computation of the
Earth Mover's Distance and finding optimal solutions to transportation problems", 2014) and the positive atoms'
potentials drop to feasible again (they only have arcs out). Only a round that does not stop needs the minimisers:
the transforms that give ``L`` do not track them (a quarter of their time), and are taken again, side by side, when
another round follows.
Rounds stop once ``U - L <= tolerance * L``, or after ``rounds``; every round's ``[L, U]`` is certified and the
best ends are kept.

Exactness: masses are integers (unweighted inputs, in units of ``1 / lcm(n, m)``) and stay integers in every
min-cost flow solve (sums of integers below 2^53); the flow is checked for conservation at every node before
``U`` is taken from it. The lengths, transforms and sums are floating point: every arc is lengthened by 1e-14 of
the coordinates' scale (its computed length is within a few units in the last place of the true distance, and
a unit of flow pays it once per arc it crosses) and ``U`` is widened by 1e-9 relative; ``G`` is raised by 1e-12
of the largest magnitude in its transform, and ``L`` lowered by 1e-9 of the sum of its absolute terms.
"""

from __future__ import annotations

from concurrent.futures import Executor, ThreadPoolExecutor
from dataclasses import dataclass

import numpy as np
from scipy.spatial import cKDTree

from privsyn_core.errors import ParameterError
from privsyn_core.evaluation.w1_flow import transshipment
from privsyn_core.evaluation.w1_sparse import TRANSFORM_MAX_PAIRS, sparse_certified_w1
from privsyn_core.evaluation.w1_transform import planar_c_transform

CERTIFIED_CELLS = 200  # at most this many lattice cells per axis (the start and the blocks) ...
CERTIFIED_CELLS_PER_ROOT = 90  # ... by default about this many lattice cells (in all) per sqrt(#atoms)
CERTIFIED_NEIGHBOURS = 12  # arcs from each atom to its nearest atoms of the other sign
CERTIFIED_BLOCK = 10  # lattice cells per side of a block of the dual sweeps
CERTIFIED_PRIMAL_BLOCK = 14  # lattice cells per strip of the primal sweeps' blocks on average, ...
CERTIFIED_PRIMAL_DENSITY = 0.5  # ... the strips sharing this fraction of the atoms and the rest of the cells
CERTIFIED_ROUNDS = 4  # at most this many rounds (two primal sweeps, a dual sweep, the transforms)
CERTIFIED_TOLERANCE = 0.1  # ... stopping once U - L <= this fraction of L
CERTIFIED_MAX_BYTES = 1_000_000_000  # memory budget of one certified call
_BYTES_PER_ARC = 120  # estimate: tails, heads, lengths, flows (32 B), sweeps' temporaries here and in the worker
_BYTES_PER_NODE = 200  # coordinates, supplies, places, potentials, block ids, the transforms' arrays
_REL_MARGIN, _LENGTH_ERROR, _TRANSFORM_MARGIN = 1e-9, 1e-14, 1e-12
_COORDINATE_ERROR = 2.0**-48  # |computed - exact| of a centred rotated coordinate, per unit of the largest input one
_CORNERS = ((0, 0), (1, 0), (0, 1), (1, 1))  # in the order (dx + 2 dy)
_THREADS = 2  # threads: k-d tree queries and the network simplex solves (scipy and POT release the GIL)
_Cuts = tuple[np.ndarray, np.ndarray]  # lattice lines where the blocks of a partition start, along each axis


def certified_bytes(atoms: int, k: int, neighbours: int) -> int:
    """Memory estimate of :func:`certified_w1` for ``atoms`` atoms on a ``k``-cell lattice."""
    lattice = (k + 1) ** 2
    arcs = 4 * lattice + (4 + neighbours + 2 * CERTIFIED_ROUNDS) * atoms
    return arcs * _BYTES_PER_ARC + (atoms + lattice) * _BYTES_PER_NODE


def certified_w1(atoms: np.ndarray, supply: np.ndarray, unit: int, metric: str, k: int,
                 neighbours: int = CERTIFIED_NEIGHBOURS, tolerance: float = CERTIFIED_TOLERANCE,
                 rounds: int = CERTIFIED_ROUNDS) -> tuple[float, float]:
    """Certified ``(lower, upper)`` for W1 between the positive and the negative part of a signed measure.

    In d = 2 by the method of this module; in other d by
    :func:`privsyn_core.evaluation.w1_sparse.sparse_certified_w1` (``k``, ``tolerance``, ``rounds`` unused there).

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
        Arcs per atom to its nearest atoms of the other sign.
    tolerance, rounds : float, int
        Stop once ``upper - lower <= tolerance * lower``, or after ``rounds`` rounds (at least one).
    """
    if metric not in ("chebyshev", "cityblock"):
        raise ParameterError("method='certified' needs metric 'chebyshev' or 'cityblock'")
    if atoms.shape[1] != 2:
        pairs = int(np.count_nonzero(supply > 0)) * int(np.count_nonzero(supply < 0))
        if metric == "chebyshev" and pairs > TRANSFORM_MAX_PAIRS:
            raise ParameterError(f"method='certified' in d = {atoms.shape[1]} (chebyshev) visits every pair of "
                                 f"atoms: {pairs:.3g} pairs exceed the budget of {TRANSFORM_MAX_PAIRS:.3g}")
        return sparse_certified_w1(atoms, supply, unit, metric)
    q = 0.5 * np.c_[atoms[:, 0] + atoms[:, 1], atoms[:, 0] - atoms[:, 1]] if metric == "chebyshev" else atoms
    lower, upper = 0.0, np.inf
    with ThreadPoolExecutor(_THREADS) as pool:
        net = _start(q - q.min(axis=0), supply.astype(np.int64), k, neighbours,
                     _COORDINATE_ERROR * float(np.abs(atoms).max()), pool)
        potential = net.potential
        for round_number in range(max(rounds, 1)):
            partitions = (round_number % 2, (round_number + 1) % 2)
            dual = pool.submit(_dual_sweep_and_lower_end, net, potential, partitions[0])
            for partition in partitions:
                _primal_sweep(net, partition, pool)
            potential, low, f_positive = dual.result()
            upper, lower = min(upper, net.certified_cost()), max(lower, low)
            if upper - lower <= tolerance * lower or round_number >= rounds - 1:
                break
            net.add_arcs(_binding_pairs(net, potential, f_positive, pool))
            potential = _tightest_on_positive_atoms(net, potential)
    return max(lower, 0.0) / unit, upper / unit


@dataclass
class _Network:
    """Atoms ``0 .. atoms-1`` and lattice nodes after them; arcs with their lengths and the current feasible flow."""

    atoms: int
    points: np.ndarray  # (nodes, 2) coordinates in the l1 plane
    supply: np.ndarray  # (nodes,) integer supplies, 0 at the lattice nodes
    place: np.ndarray  # (nodes, 2) lattice coordinates of each node (of an atom: its nearest node)
    tails: np.ndarray
    heads: np.ndarray
    length: np.ndarray
    flow: np.ndarray
    potential: np.ndarray  # a feasible dual: potential[tail] - potential[head] <= length on every arc
    error: float  # bound on the error of every computed coordinate (rotation and centring of the input)
    primal_cuts: tuple[_Cuts, _Cuts]  # the two partitions of the primal sweeps (see _partitions) ...
    dual_cuts: tuple[_Cuts, _Cuts]  # ... and of the dual sweeps

    def add_arcs(self, pairs: np.ndarray) -> None:
        """New arcs ``(tail, head)`` at zero flow; pairs already in the network are skipped."""
        size = len(self.supply)
        present = np.sort(self.tails * size + self.heads)
        key = np.sort(pairs[:, 0] * size + pairs[:, 1])
        key = key[np.r_[True, key[1:] != key[:-1]]]
        key = key[present[np.searchsorted(present, key).clip(max=len(present) - 1)] != key]
        tails, heads = key // size, key % size
        self.tails, self.heads = np.r_[self.tails, tails], np.r_[self.heads, heads]
        self.length = np.r_[self.length, np.abs(self.points[tails] - self.points[heads]).sum(axis=1)]
        self.flow = np.r_[self.flow, np.zeros(len(key))]

    def certified_cost(self) -> float:
        """An upper bound on the cost of the coupling the flow decomposes into, after checking the flow
        (non-negative, conserving every node's supply exactly): the flow's cost with each arc lengthened by
        ``_LENGTH_ERROR`` of the coordinates' scale (the rounding of the lengths) and by 4 ``error`` (its ends'
        coordinates), then widened by ``_REL_MARGIN`` for the floating-point sum."""
        size = len(self.supply)
        balance = (np.bincount(self.tails, weights=self.flow, minlength=size)
                   - np.bincount(self.heads, weights=self.flow, minlength=size))
        if np.any(self.flow < 0) or not np.array_equal(balance, self.supply.astype(float)):
            raise RuntimeError("the decomposed flow does not conserve mass")
        arc_error = _LENGTH_ERROR * float(np.abs(self.points).max()) + 4 * self.error
        return (float(self.flow @ self.length) + arc_error * float(self.flow.sum())) * (1 + _REL_MARGIN)


def _start(q: np.ndarray, supply: np.ndarray, k: int, neighbours: int, error: float, pool: Executor) -> _Network:
    """The network with its first flow and potential, from the lattice problem (``error``: see ``_Network``; the
    lattice problem is solved in ``pool`` while this thread finds the nearest neighbours)."""
    lo = q.min(axis=0)
    width = float(np.max(q.max(axis=0) - lo)) / k or 1.0 / k
    side, count = k + 1, len(q)
    cell = np.clip(np.floor((q - lo) / width), 0, k - 1).astype(np.int64)
    nearest = np.clip(np.rint((q - lo) / width), 0, k).astype(np.int64)  # one of the cell's corners
    lattice_place = np.c_[np.arange(side * side) % side, np.arange(side * side) // side]
    points = np.r_[q, lo + width * lattice_place]
    lattice_tails, lattice_heads = _lattice_arcs(k)
    node_supply = np.bincount(nearest @ (1, side), weights=supply, minlength=side * side).astype(np.int64)
    lattice = pool.submit(_lattice_solution, node_supply, lattice_tails, lattice_heads, width)
    pos, neg = np.flatnonzero(supply > 0), np.flatnonzero(supply < 0)
    corners = [count + (cell + corner) @ (1, side) for corner in _CORNERS]
    pairs = _neighbour_pairs(q, pos, neg, neighbours)
    tails = np.concatenate([count + lattice_tails, *(np.r_[pos, node[neg]] for node in corners), pairs[:, 0]])
    heads = np.concatenate([count + lattice_heads, *(np.r_[node[pos], neg] for node in corners), pairs[:, 1]])
    length = np.abs(points[tails] - points[heads]).sum(axis=1)
    flow = np.zeros(len(tails))
    arc_to_nearest = len(lattice_tails) + ((nearest - cell) @ (1, 2)) * (len(pos) + len(neg))
    flow[arc_to_nearest[pos] + np.arange(len(pos))] = supply[pos]
    flow[arc_to_nearest[neg] + len(pos) + np.arange(len(neg))] = -supply[neg]
    lattice_flow, phi = lattice.result()
    flow[:len(lattice_tails)] = lattice_flow
    mcshane = np.min([phi[node - count] + np.abs(q - points[node]).sum(axis=1) for node in corners], axis=0)
    return _Network(count, points, np.r_[supply, np.zeros(side * side, dtype=np.int64)],
                    np.r_[nearest, lattice_place], tails, heads, length, flow, np.r_[mcshane, phi], error,
                    _partitions(nearest, k, CERTIFIED_PRIMAL_BLOCK, CERTIFIED_PRIMAL_DENSITY),
                    _partitions(nearest, k, CERTIFIED_BLOCK, 0.0))


def _lattice_arcs(k: int) -> tuple[np.ndarray, np.ndarray]:
    """Both directions of the 4-neighbour arcs of the (k+1)^2 lattice (node id i + (k+1) j)."""
    nodes = np.arange((k + 1) ** 2, dtype=np.int64).reshape((k + 1, k + 1), order="F")
    a, b = np.r_[nodes[:-1, :].ravel(), nodes[:, :-1].ravel()], np.r_[nodes[1:, :].ravel(), nodes[:, 1:].ravel()]
    return np.r_[a, b], np.r_[b, a]


def _lattice_solution(node_supply: np.ndarray, tails: np.ndarray, heads: np.ndarray,
                      width: float) -> tuple[np.ndarray, np.ndarray]:
    """Min-cost flow of the lattice supplies (arc cost ``width``): the flow on each arc and node potentials."""
    solution = transshipment(node_supply, tails, heads, np.full(len(tails), width))
    if solution is None:
        raise RuntimeError("the min-cost flow solver did not solve the lattice problem")
    return solution


def _neighbour_pairs(q: np.ndarray, pos: np.ndarray, neg: np.ndarray, count: int) -> np.ndarray:
    """(positive atom, negative atom) pairs: each atom's ``count`` nearest atoms of the other sign, deduplicated."""
    keys = []
    for here, there, scale in ((pos, neg, len(q)), (neg, pos, 1)):
        c = min(count, len(there))
        _, j = cKDTree(q[there]).query(q[here], c, p=1)
        keys.append(np.repeat(here, c) * scale + there[j.reshape(len(here), c).ravel()] * (len(q) + 1 - scale))
    key = np.sort(np.concatenate(keys))
    key = key[np.r_[True, key[1:] != key[:-1]]]
    return np.c_[key // len(q), key % len(q)]


def _partitions(place: np.ndarray, k: int, block: int, density: float) -> tuple[_Cuts, _Cuts]:
    """Two partitions of the ``k`` x ``k`` lattice cells into blocks, as the lattice lines where a block starts
    along each axis: about ``k / block`` strips per axis, each an equal share of a weight per cell that is the
    fraction ``density`` of the atoms' (``place``: their lattice coordinates) plus ``1 - density`` spread evenly;
    the second partition cuts midway between the first's cuts (``density = 0``: squares of about ``block`` cells,
    the second shifted by half a block)."""
    first, second = [], []
    strips = -(-k // block)
    for axis in range(2):
        weight = (1 - density) / k + density * np.bincount(place[:, axis].clip(max=k - 1), minlength=k) / len(place)
        cuts = np.unique(np.searchsorted(np.cumsum(weight), np.arange(1, strips) / strips * weight.sum()) + 1)
        first.append(cuts[cuts < k])
        middle = np.unique((np.r_[0, first[-1]] + np.r_[first[-1], k]) // 2)
        second.append(middle[middle > 0])
    return (first[0], first[1]), (second[0], second[1])


def _block_ids(net: _Network, cuts: _Cuts) -> np.ndarray:
    """Block of every node in the partition ``cuts`` (see :func:`_partitions`)."""
    cut_x, cut_y = cuts
    return (np.searchsorted(cut_x, net.place[:, 0], side="right")
            + (len(cut_x) + 1) * np.searchsorted(cut_y, net.place[:, 1], side="right"))


def _groups(keys: np.ndarray, count: int) -> tuple[np.ndarray, np.ndarray]:
    """Indices sorted by ``keys`` (values below ``count``) and the start of each key's run (numpy's stable sort
    is a radix sort on 16-bit keys: several times faster than on 64-bit ones)."""
    order = np.argsort(keys.astype(np.uint16) if count <= 2**16 else keys, kind="stable")
    return order, np.r_[0, np.cumsum(np.bincount(keys, minlength=count))]


def _primal_sweep(net: _Network, partition: int, pool: Executor) -> None:
    """Each block of primal ``partition`` (0 or 1) with its flow re-solved, the flow between blocks held fixed (in
    place; the blocks, independent, are solved in ``pool``, the largest first)."""
    block = _block_ids(net, net.primal_cuts[partition])
    tail_block, head_block = block[net.tails], block[net.heads]
    cut = tail_block != head_block
    size = len(net.supply)
    corrected = (net.supply - np.bincount(net.tails[cut], weights=net.flow[cut], minlength=size)
                 + np.bincount(net.heads[cut], weights=net.flow[cut], minlength=size))
    blocks = int(block.max()) + 1
    node_order, node_start = _groups(block, blocks)
    inside = np.flatnonzero(~cut)
    arc_order, arc_start = _groups(tail_block[inside], blocks)
    arc_order = inside[arc_order]
    local = np.empty(size, dtype=np.int64)  # written at each block's own nodes only

    def solve(b: int) -> None:
        nodes, arcs = node_order[node_start[b]:node_start[b + 1]], arc_order[arc_start[b]:arc_start[b + 1]]
        local[nodes] = np.arange(len(nodes))
        solution = transshipment(corrected[nodes], local[net.tails[arcs]], local[net.heads[arcs]], net.length[arcs])
        if solution is not None:
            net.flow[arcs] = solution[0]

    busy = np.flatnonzero(np.diff(arc_start))
    for job in [pool.submit(solve, int(b)) for b in busy[np.argsort(-np.diff(arc_start)[busy], kind="stable")]]:
        job.result()


def _dual_sweep(net: _Network, potential: np.ndarray, partition: int) -> np.ndarray:
    """Block coordinate ascent on the dual: each block's (of dual ``partition``, 0 or 1) optimal potentials given
    those outside (module doc)."""
    block = _block_ids(net, net.dual_cuts[partition])
    tail_block, head_block = block[net.tails], block[net.heads]
    cut = tail_block != head_block
    blocks = int(block.max()) + 1
    node_order, node_start = _groups(block, blocks)
    inside, crossing = np.flatnonzero(~cut), np.flatnonzero(cut)
    arc_order, arc_start = _groups(tail_block[inside], blocks)
    out_order, out_start = _groups(tail_block[crossing], blocks)
    in_order, in_start = _groups(head_block[crossing], blocks)
    arc_order, out_order, in_order = inside[arc_order], crossing[out_order], crossing[in_order]
    potential = potential.copy()
    local = np.empty(len(net.supply), dtype=np.int64)
    for b in range(blocks):
        nodes = node_order[node_start[b]:node_start[b + 1]]
        if len(nodes) == 0:
            continue
        arcs = arc_order[arc_start[b]:arc_start[b + 1]]
        leaving, entering = out_order[out_start[b]:out_start[b + 1]], in_order[in_start[b]:in_start[b + 1]]
        outside = len(nodes)
        local[nodes] = np.arange(outside)
        out_tail, out_cost = _cheapest(local[net.tails[leaving]], net.length[leaving] + potential[net.heads[leaving]])
        in_head, in_cost = _cheapest(local[net.heads[entering]],
                                     net.length[entering] - potential[net.tails[entering]])
        supply = net.supply[nodes].astype(float)
        solution = transshipment(np.r_[supply, -supply.sum()],
                                 np.r_[local[net.tails[arcs]], out_tail, np.full(len(in_head), outside)],
                                 np.r_[local[net.heads[arcs]], np.full(len(out_tail), outside), in_head],
                                 np.r_[net.length[arcs], out_cost, in_cost])
        if solution is not None:
            potential[nodes] = solution[1][:outside] - solution[1][outside]
    return potential


def _dual_sweep_and_lower_end(net: _Network, potential: np.ndarray,
                              partition: int) -> tuple[np.ndarray, float, np.ndarray]:
    """:func:`_dual_sweep` on ``partition``, then :func:`_lower_end` of its potential: the potential, ``L``, ``F``
    on the positive atoms."""
    potential = _dual_sweep(net, potential, partition)
    return (potential, *_lower_end(net, potential))


def _cheapest(local_ends: np.ndarray, cost: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """One arc per local node: the cheapest of its parallel arcs to (or from) the outside node."""
    if len(local_ends) == 0:
        return local_ends, cost
    order = np.lexsort((cost, local_ends))
    first = np.r_[True, local_ends[order][1:] != local_ends[order][:-1]]
    return local_ends[order][first], cost[order][first]


def _tightest_on_positive_atoms(net: _Network, potential: np.ndarray) -> np.ndarray:
    """Feasible again after new arcs: a positive atom only has arcs out, so lowering its potential to the least
    ``potential[head] + length`` over them breaks no other arc (and is the best it can take)."""
    atom_tails = net.tails < net.atoms
    repaired = potential.copy()
    np.minimum.at(repaired, net.tails[atom_tails], potential[net.heads[atom_tails]] + net.length[atom_tails])
    return repaired


def _lower_end(net: _Network, potential: np.ndarray) -> tuple[float, np.ndarray]:
    """``L`` (mass units x rho) from the potential on the negative atoms, and ``F`` on the positive atoms."""
    supply = net.supply[:net.atoms]
    pos, neg = np.flatnonzero(supply > 0), np.flatnonzero(supply < 0)
    points = net.points[:net.atoms]
    best, _ = planar_c_transform(points[neg], _centred(potential[neg]), points[pos], argmin=False)
    minus_g, _ = planar_c_transform(points[pos], -best, points[neg], argmin=False)
    margin = _TRANSFORM_MARGIN * (float(np.abs(best).max()) + 4 * float(np.abs(points).max())) + 4 * net.error
    terms = np.r_[best * supply[pos], (margin - minus_g) * supply[neg]]
    return float(terms.sum()) - _REL_MARGIN * float(np.abs(terms).sum()), best


def _binding_pairs(net: _Network, potential: np.ndarray, f_positive: np.ndarray, pool: Executor) -> np.ndarray:
    """The pairs ``(positive, negative)`` where ``F`` and ``G`` of :func:`_lower_end` bind: each positive atom with
    a negative one minimising ``g(y) + rho(x, y)``, each negative atom with a positive one maximising
    ``F(x) - rho(x, y)`` (the two transforms again, now tracking their minimisers, in ``pool`` side by side: only a
    round that does not stop needs them)."""
    supply = net.supply[:net.atoms]
    pos, neg = np.flatnonzero(supply > 0), np.flatnonzero(supply < 0)
    points = net.points[:net.atoms]
    to_positive = pool.submit(planar_c_transform, points[neg], _centred(potential[neg]), points[pos])
    to_negative = pool.submit(planar_c_transform, points[pos], -f_positive, points[neg])
    nearest_negative, nearest_positive = to_positive.result()[1], to_negative.result()[1]
    assert nearest_negative is not None and nearest_positive is not None
    return np.r_[np.c_[pos, neg[nearest_negative]], np.c_[pos[nearest_positive], neg]]


def _centred(g: np.ndarray) -> np.ndarray:
    """``g`` less its median (the transforms' magnitudes, and so their rounding margin, stay small)."""
    return g - np.median(g)
