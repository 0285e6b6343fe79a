r"""Certified interval for W1 in any dimension: a sparse coupling (upper end) and its repaired dual (lower end).

Used by :func:`privsyn_core.evaluation.w1_certified.certified_w1` for d != 2. The ground metric :math:`\rho` is
l-infinity (chebyshev) or l1 (cityblock); ``supply`` is ``mu - nu`` in integer units.

Upper end ``U`` (a coupling). The sparse graph has the atoms and the nodes ("hubs") of a coarse grid of
``g`` cells per axis (:math:`g^d \le` ``HUB_NODES``), with arcs

* from each positive atom to its ``neighbours`` nearest negative atoms, and from the ``neighbours`` nearest
  positive atoms of each negative atom to it (k-d tree),
* from each positive atom to the hub of its cell, from the hub of each negative atom's cell to it, and between
  hubs of neighbouring cells (the 3^d - 1 king moves) in both directions, so every supply can reach every demand,

each of length :math:`\rho` between its ends (hubs at the cell centres). A flow of ``mu - nu`` through the graph
decomposes into paths from positive to negative atoms; by the triangle inequality each path is at least as long
as :math:`\rho` between its ends, so the paths form a coupling of cost at most :math:`U = \sum_a x_a \rho_a`
and :math:`W_1 \le U`. The flow is POT's network simplex, or OR-tools where the masses pass POT's range
(:func:`privsyn_core.evaluation.w1_flow.transshipment`), checked for conservation of mass before ``U`` is taken
from it.

Lower end ``L`` (a 1-Lipschitz function). The network simplex's node potentials ``f`` (its dual solution) are
optimal for the sparse problem but need not satisfy :math:`f(x) - f(y) \le \rho(x, y)` for pairs without an
arc. They are repaired by two transforms, the McShane extension from the negative atoms and the Whitney
extension of that from the positive atoms,

.. math:: F(z) = \min_y f(y) + \rho(z, y), \qquad G(z) = \max_x F(x) - \rho(z, x),

each a minimum (maximum) of 1-Lipschitz functions, so ``G`` is 1-Lipschitz on the whole space and equals ``F``
on the positive atoms (``F`` is 1-Lipschitz). By Kantorovich-Rubinstein weak duality,
:math:`W_1 \ge L = \sum_x \mu_x F(x) - \sum_y \nu_y G(y)`, whatever ``f`` is: ``L`` rests only on computing
the two transforms exactly, never on the solver. The transforms are exact nearest-neighbour queries: for
cityblock, :math:`f(y) + \|z - y\|_1 = \|(z, 0) - (y, f(y) - \min f)\|_1 + \min f`, an l1 nearest neighbour
in d + 1 dimensions (k-d tree; slow when the potentials have slope 1 along many directions, see
:mod:`privsyn_core.evaluation.w1_transform`); for chebyshev by a chunked exhaustive minimum over all pairs
(scipy's ``cdist``, hence the budget ``TRANSFORM_MAX_PAIRS`` on #positive x #negative atoms).

Column generation: the arcs ``(x, argmin_y)`` of ``F`` where ``F(x) < f(x)`` (and likewise for ``G``) are the
constraints the sparse dual violates; they are added to the graph and the flow is solved again, until
``U - L <= TOLERANCE * L``, nothing is violated, or ``ROUNDS`` rounds. Each round's interval is certified on its
own; the reported one is the intersection.

Rounding: masses are integers and stay integers in the network simplex; the lengths, transforms and sums are
floating point: ``U`` is widened by 1e-9 relative, ``L`` by 1e-9 of the sum of its absolute terms plus 1e-9 of
the diameter (per unit of mass).
"""

from __future__ import annotations

import itertools

import numpy as np
from scipy.spatial import cKDTree
from scipy.spatial.distance import cdist

from privsyn_core.evaluation.w1_flow import transshipment

SPARSE_NEIGHBOURS = 8  # arcs from each atom to its nearest atoms of the other sign
HUB_NODES = 1024  # at most this many hubs (coarse grid cells) in the feasibility backbone
ROUNDS = 8  # at most this many column-generation rounds (flow, potentials, transforms)
TOLERANCE = 0.1  # ... stopping once U - L <= this fraction of L
TRANSFORM_MAX_PAIRS = 250_000_000  # chebyshev in d >= 3: each transform visits every (positive, negative) pair
_CHUNK_ENTRIES = 2**23  # pairs per block of the exhaustive chebyshev transform (64 MB)
_MARGIN_REL = 1e-9


def sparse_certified_w1(atoms: np.ndarray, supply: np.ndarray, unit: int, metric: str,
                        neighbours: int = SPARSE_NEIGHBOURS, rounds: int = ROUNDS,
                        tolerance: float = TOLERANCE) -> tuple[float, float]:
    """Certified ``(lower, upper)`` for W1 between the positive and the negative part of ``supply / unit``.

    Parameters
    ----------
    atoms : array (N, d)
        Distinct points.
    supply : int array (N,)
        Signed integer masses ``mu - nu`` in units of ``1 / unit``, summing to 0, none zero, both signs present.
    unit : int
        Mass units per unit of mass.
    metric : {"chebyshev", "cityblock"}
    neighbours : int
        Arcs per atom to its nearest atoms of the other sign.
    rounds, tolerance : int, float
        At most ``rounds`` column-generation rounds (at least 1); stop once ``upper - lower <= tolerance * lower``.
    """
    pos, neg = np.flatnonzero(supply > 0), np.flatnonzero(supply < 0)
    norm = np.inf if metric == "chebyshev" else 1
    pairs = _neighbour_pairs(atoms[pos], atoms[neg], norm, neighbours)
    hub_tails, hub_heads, hub_length, hubs = _hub_arcs(atoms, pos, neg, metric)
    span = float(np.max(atoms.max(axis=0) - atoms.min(axis=0))) * (atoms.shape[1] if norm == 1 else 1) or 1.0
    node_supply = np.r_[supply, np.zeros(hubs, dtype=np.int64)]
    lower, upper = 0.0, np.inf
    for _ in range(rounds):
        tails, heads = np.r_[pos[pairs[:, 0]], hub_tails], np.r_[neg[pairs[:, 1]], hub_heads]
        length = np.r_[_distance(atoms[tails[:len(pairs)]], atoms[heads[:len(pairs)]], norm), hub_length]
        solution = transshipment(node_supply, tails, heads, length)
        if solution is None:
            raise RuntimeError("the min-cost flow solver did not solve the sparse problem")
        flows, potential = solution
        _check_conservation(tails, heads, flows, node_supply)
        upper = min(upper, float(flows @ length) * (1 + _MARGIN_REL))
        f = potential[:len(atoms)]
        F, best_neg = _transform(atoms[neg], f[neg], atoms[pos], metric)
        G, best_pos = _transform(atoms[pos], -F, atoms[neg], metric)
        G = -G
        terms = np.r_[F * supply[pos], G * supply[neg]]
        lower = max(lower, float(terms.sum()) - _MARGIN_REL * (float(np.abs(terms).sum()) + span * unit))
        new = np.r_[np.c_[np.flatnonzero(f[pos] > F), best_neg[f[pos] > F]],
                    np.c_[best_pos[f[neg] < G], np.flatnonzero(f[neg] < G)]]
        if len(new) == 0 or upper - lower <= tolerance * lower:
            break
        pairs = np.unique(np.r_[pairs, new], axis=0)
    return max(lower, 0.0) / unit, upper / unit


def _check_conservation(tails: np.ndarray, heads: np.ndarray, flows: np.ndarray, supply: np.ndarray) -> None:
    """The flow must be non-negative and conserve every node's (integer) supply exactly."""
    balance = (np.bincount(tails, weights=flows, minlength=len(supply))
               - np.bincount(heads, weights=flows, minlength=len(supply)))
    if np.any(flows < 0) or not np.array_equal(balance, supply.astype(float)):
        raise RuntimeError("the network simplex returned a flow that does not conserve mass")


def _distance(A: np.ndarray, B: np.ndarray, norm: float) -> np.ndarray:
    gap = np.abs(A - B)
    return gap.max(axis=1) if norm == np.inf else gap.sum(axis=1)


def _neighbour_pairs(P: np.ndarray, Q: np.ndarray, norm: float, count: int) -> np.ndarray:
    """(positive, negative) index pairs: each point's ``count`` nearest of the other sign, deduplicated."""
    cp, cq = min(count, len(Q)), min(count, len(P))
    _, j = cKDTree(Q).query(P, cp, p=norm)
    _, i = cKDTree(P).query(Q, cq, p=norm)
    both = np.r_[np.c_[np.repeat(np.arange(len(P)), cp), j.reshape(len(P), cp).ravel()],
                 np.c_[i.reshape(len(Q), cq).ravel(), np.repeat(np.arange(len(Q)), cq)]]
    return np.unique(both, axis=0)


def _hub_arcs(atoms: np.ndarray, pos: np.ndarray, neg: np.ndarray,
              metric: str) -> tuple[np.ndarray, np.ndarray, np.ndarray, int]:
    """The backbone: atom -> hub, hub -> atom and hub <-> neighbouring hub arcs (hub ids after the atoms)."""
    d = atoms.shape[1]
    g = max(1, int(HUB_NODES ** (1 / d) + 1e-9))
    lo = atoms.min(axis=0)
    width = float(np.max(atoms.max(axis=0) - lo)) / g or 1.0
    weights = g ** np.arange(d)
    cell = np.clip(np.floor((atoms - lo) / width), 0, g - 1).astype(np.int64)
    centre = lo + (np.arange(g)[:, None] + 0.5) * width  # centre[i, axis]
    grid = np.array(list(itertools.product(range(g), repeat=d)), dtype=np.int64)
    offsets = np.array([o for o in itertools.product((-1, 0, 1), repeat=d) if any(o)], dtype=np.int64)
    ends = grid[:, None, :] + offsets[None, :, :]
    inside = np.all((ends >= 0) & (ends < g), axis=2)
    src, dst = np.repeat(grid, inside.sum(axis=1), axis=0), ends[inside]
    norm = np.inf if metric == "chebyshev" else 1
    axes = np.arange(d)
    hub = len(atoms) + cell @ weights
    tails = np.r_[pos, hub[neg], len(atoms) + src @ weights]
    heads = np.r_[hub[pos], neg, len(atoms) + dst @ weights]
    length = np.r_[_distance(atoms[pos], centre[cell[pos], axes], norm),
                   _distance(atoms[neg], centre[cell[neg], axes], norm),
                   _distance(centre[src, axes], centre[dst, axes], norm)]
    return tails, heads, length, g**d


def _transform(sources: np.ndarray, values: np.ndarray, targets: np.ndarray,
               metric: str) -> tuple[np.ndarray, np.ndarray]:
    r""":math:`\min_s values(s) + \rho(t, s)` at every target ``t``, exactly, and the minimising source's index."""
    if metric == "cityblock" or sources.shape[1] == 2:
        shift = float(values.min())
        scale = 0.5 if metric == "chebyshev" else 1.0
        to_l1 = _rotate if metric == "chebyshev" else np.asarray
        lifted = np.c_[to_l1(sources), (values - shift) / scale]
        distance, index = cKDTree(lifted).query(np.c_[to_l1(targets), np.zeros(len(targets))], 1, p=1)
        return scale * distance + shift, index
    chunk = max(1, _CHUNK_ENTRIES // len(sources))
    best, index = np.empty(len(targets)), np.empty(len(targets), dtype=np.int64)
    for first in range(0, len(targets), chunk):
        block = cdist(targets[first:first + chunk], sources, "chebyshev")
        block += values
        index[first:first + chunk] = block.argmin(axis=1)
        best[first:first + chunk] = block[np.arange(len(block)), index[first:first + chunk]]
    return best, index


def _rotate(P: np.ndarray) -> np.ndarray:
    """The 45-degree map of the plane under which chebyshev is half the l1 distance."""
    return np.c_[P[:, 0] + P[:, 1], P[:, 0] - P[:, 1]]
