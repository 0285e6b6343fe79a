"""Min-cost flow with node potentials, by POT's network simplex (Bonneel, van de Panne, Paris and Heidrich,
"Displacement interpolation using Lagrangian mass transport", 2011) on a sparse bipartite graph.

Used by the certified W1 intervals (:mod:`privsyn_core.evaluation.w1_certified`,
:mod:`privsyn_core.evaluation.w1_sparse`): POT returns the optimal flow *and* the dual potentials, which OR-tools'
``SimpleMinCostFlow`` does not. POT solves transport problems (sources to targets); a transshipment problem is put
in that form by splitting every node that has arcs both in and out into a source and a target joined by a free
arc, both holding ``big`` extra units (more than any node can pass on: the total supply, plus one), so the free
arc carries what does not pass through the node. Its flow is positive, so it is in the optimal basis and the two
halves' potentials agree.
"""

from __future__ import annotations

import numpy as np
import ot
from scipy.sparse import coo_array

_ITERATIONS = 10**9


def transshipment(supply: np.ndarray, tails: np.ndarray, heads: np.ndarray,
                  cost: np.ndarray) -> tuple[np.ndarray, np.ndarray] | None:
    """Min-cost flow of ``supply`` (summing to 0) along the uncapacitated arcs ``tails -> heads``.

    Parameters
    ----------
    supply : array (nodes,)
        Integer-valued supplies (negative: demands); integers stay exact in POT's double arithmetic below 2^53.
    tails, heads : int arrays (arcs,)
        Distinct (tail, head) pairs.
    cost : array (arcs,)

    Returns
    -------
    (flow, potential) or None
        The flow on each arc and node potentials with ``potential[t] - potential[h] <= cost`` on every arc
        (equality where the flow is positive), or None unless the solver reached the optimum.
    """
    nodes = len(supply)
    if not np.any(supply) and np.all(cost >= 0):  # nothing to move (POT calls a problem without mass infeasible)
        return np.zeros(len(tails)), np.zeros(nodes)
    source, target = supply > 0, supply < 0
    source[tails], target[heads] = True, True
    transit = np.flatnonzero(source & target)
    source_id, target_id = np.cumsum(source) - 1, np.cumsum(target) - 1
    big = float(np.abs(supply).sum()) + 1
    extra = np.zeros(nodes)
    extra[transit] = big
    result = network_simplex(np.maximum(supply, 0)[source] + extra[source],
                             np.maximum(-supply, 0)[target] + extra[target],
                             np.r_[source_id[tails], source_id[transit]], np.r_[target_id[heads], target_id[transit]],
                             np.r_[cost, np.zeros(len(transit))])
    if result is None:
        return None
    flow, u, v = result
    potential = np.where(source, u[np.maximum(source_id, 0)], -v[np.maximum(target_id, 0)])
    return flow[:len(tails)], potential


def network_simplex(a: np.ndarray, b: np.ndarray, src: np.ndarray, dst: np.ndarray,
                    cost: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
    """POT's exact transport on the sparse arcs ``src -> dst`` (distinct pairs), masses ``a`` and ``b``: the flow on
    each arc and the potentials ``u``, ``v`` (``u_i + v_j <= cost_ij``), or None unless it reached the optimum."""
    plan, log = ot.emd(a, b, coo_array((cost, (src, dst)), shape=(len(a), len(b))), numItermax=_ITERATIONS,
                       log=True)
    if log["warning"] is not None:
        return None
    carried = plan.row * len(b) + plan.col  # the few arcs with flow, looked up from every arc (no sort of all arcs)
    order = np.argsort(carried)
    carried, data = carried[order], np.asarray(plan.data)[order]
    key = src * len(b) + dst
    at = np.searchsorted(carried, key).clip(max=max(len(carried) - 1, 0))
    flow = np.where(carried[at] == key, data[at], 0.0) if len(carried) else np.zeros(len(src))
    return flow, np.asarray(log["u"]), np.asarray(log["v"])
