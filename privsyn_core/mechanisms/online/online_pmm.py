r"""Online PMM: continual release of PMM synthetic data for a growing table, one epsilon for the whole stream.

After He, Vershynin and Zhu [HVZ24] (the online private measure mechanism): the binary hierarchical partition of
``[0,1]^d`` of PMM ([HVZ23] Section 4.1, :mod:`privsyn_core.mechanisms.hvz23.pmm_tree`), the count of every node
released at every step by a continual counter, then PMM's top-down consistency ([HVZ23] Algorithm 3) and
sampling in the leaves ([HVZ23] Algorithm 4), so every step's synthetic data set is a function of the noisy
counters only.

1. Partition: a tree of fixed depth ``r`` (a public parameter, fixed when the stream opens; level ``j -> j+1``
   cuts axis ``j mod d``).
2. Budget over levels: the weights of PMM's noise schedule ([HVZ23] eq. (A.4)), ``eps_j`` proportional to
   ``sqrt(Delta_{j-1})``, ``sum_j eps_j = epsilon`` (the online error of a level is the counter's error, the same
   function of ``t`` for every level, so the offline optimisation of ``sum_j sigma_j Delta_{j-1}`` under
   ``sum_j 1/sigma_j = epsilon`` gives the same weights).  Each level's ``eps_j`` is halved between the two parts
   of the counter.
3. Counters: every cell of every level has a hybrid continual counter ([CSS11] Section 4, the binary tree
   mechanism of [DNPR10]/[CSS11] on doubling blocks, :mod:`.continual`) with exact discrete Laplace noise.
   A batch of records per step is one increment vector (its leaf counts and their pairwise sums).
4. Release at step ``t``: ``n'_theta = (C_theta(t))_+``, consistent counts top-down ([HVZ23] Algorithm 3, rule
   ``proportional``), then ``m_theta`` uniform points in every leaf.

Privacy unit: **event-level add/remove** -- two streams are neighbours when one has one more record in one batch
at one step (the batches of every other step, and the number of steps, are the same).  One record changes one
cell per level by one in one increment, so each level's counters spend ``eps_j`` (:mod:`.continual`), and the
levels compose: ``epsilon`` for every release of the whole (unbounded) stream, including releases chosen after
seeing earlier ones.  Replacing (moving) a record is two such changes: ``2 epsilon``.  ``docs/online_pmm.md``
derives it.

Accuracy (the shape, [HVZ24] abstract: ``O(log(t) t^{-1/d})`` for ``d >= 2`` and ``O(log^{4.5}(t)/t)`` for
``d = 1`` with one record per step and a depth growing with ``t``): here the depth is fixed, so after the
counters' noise falls below the resolution the error levels off at about ``2^{-floor(r/d)}``.

References
----------
.. [HVZ24] Y. He, R. Vershynin, Y. Zhu, "Online Differentially Private Synthetic Data Generation",
   arXiv:2402.08012, 2024.
.. [HVZ23] Y. He, R. Vershynin, Y. Zhu, "Algorithmically Effective Differentially Private Synthetic Data",
   COLT 2023: Section 4.1 (partition), Algorithm 3 (consistency), Algorithm 4 (PMM), eq. (A.4) (noise schedule).
.. [CSS11] T.-H. H. Chan, E. Shi, D. Song, "Private and Continual Release of Statistics", ACM TISSEC 2011.
.. [DNPR10] C. Dwork, M. Naor, T. Pitassi, G. N. Rothblum, "Differential Privacy Under Continual
   Observation", STOC 2010.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from privsyn_core.errors import ParameterError
from privsyn_core.mechanisms.hvz23.pmm import leaf_plan
from privsyn_core.mechanisms.hvz23.pmm_tree import (
    HeapTree,
    consistency_in_place,
    fill_upper_levels,
    leaf_counts,
    level_delta,
    level_diameter,
    paper_depth,
)
from privsyn_core.mechanisms.online.continual import CounterState, NodeRng, Segments, advance, error_variance
from privsyn_core.privacy.accounting import Ledger, ledger_total, split_epsilon
from privsyn_core.privacy.noise import discrete_laplace_variance
from privsyn_core.privacy.sampling import largest_remainder

#: Deepest tree of a stream: the state keeps ``2 (log2 t + 2)`` vectors of ``2^(r+1)`` int64 counts.
MAX_STREAM_DEPTH = 20
#: The neighbouring relation of every stream (see the module docstring).
RELATION = "event-level add/remove: one record added to (or removed from) one batch at one step"


@dataclass(frozen=True)
class StreamPlan:
    """The public layout and budget of a stream: depth ``r``, dimension ``d``, epsilon and the ledger.

    ``segments`` cut the heap-layout vector of ``2^(r+1)`` counts (entry 0 unused, level ``j`` at
    ``[2^j, 2^(j+1))``) into the levels, with each level's two budgets.
    """

    depth: int
    d: int
    epsilon: float
    ledger: Ledger
    segments: Segments

    @property
    def size(self) -> int:
        return 2 ** (self.depth + 1)

    @property
    def level_epsilons(self) -> np.ndarray:
        return np.array(self.segments.eps_log) + np.array(self.segments.eps_bin)


def plan_stream(depth: int, d: int, epsilon: float) -> StreamPlan:
    """Budget of every level (PMM's (A.4) weights ``sqrt(Delta_{j-1})``), halved between the counter's parts.

    The ledger has two stages per level and sums to ``epsilon`` exactly (:func:`split_epsilon`).
    """
    if not (isinstance(depth, int) and 0 <= depth <= MAX_STREAM_DEPTH):
        raise ParameterError(f"the stream's depth must be an integer in [0, {MAX_STREAM_DEPTH}], got {depth!r}")
    weights = [math.sqrt(level_delta(j - 1, d)) for j in range(depth + 1)]
    stages = [(f"{j}/{part}", w / 2) for j, w in enumerate(weights) for part in ("log", "bin")]
    split = split_epsilon(epsilon, stages)
    eps_log = tuple(e for name, e in split if name.endswith("log"))
    eps_bin = tuple(e for name, e in split if name.endswith("bin"))
    ledger = []
    for j in range(depth + 1):
        ledger.append((f"level {j}: doubling-block sums of every cell, Lap_Z(1/{eps_log[j]:.4g}) (whole stream)",
                       eps_log[j]))
        ledger.append((f"level {j}: binary-tree p-sums in block k, Lap_Z(k/{eps_bin[j]:.4g}) (whole stream)",
                       eps_bin[j]))
    if ledger_total(ledger) != epsilon:  # pragma: no cover - split_epsilon guarantees it
        raise ArithmeticError("stream ledger does not sum to epsilon")
    bounds = tuple(2 ** j for j in range(depth + 2))
    return StreamPlan(depth, d, epsilon, ledger, Segments(bounds, eps_log, eps_bin))


def default_depth(horizon_n: int, epsilon: float, d: int) -> int:
    """PMM's depth ([HVZ23] Cor. 4.4) for the record count the stream is expected to reach, capped.

    ``horizon_n`` is a public input (a planned size, not a count of the data).
    """
    return min(MAX_STREAM_DEPTH, paper_depth(int(horizon_n), epsilon, d))


def counter_inflation(steps: int) -> float:
    """How much larger the counter's noise is at step ``steps`` than one release's with the same budget.

    The ratio of standard deviations ``sd(C(t) - truth) / sd(Lap_Z(1/eps))`` for one cell with budget ``eps``
    (halved between the counter's parts as in :func:`plan_stream`), taken at ``eps = 1``; about
    ``log^1.5(t)``.
    """
    return math.sqrt(error_variance(int(steps), 0.5, 0.5) / discrete_laplace_variance(1.0))


def horizon_depth(horizon_n: int, horizon_steps: int, epsilon: float, d: int) -> int:
    """PMM's depth ([HVZ23] Cor. 4.4) at the planned end of the stream, with the counters' noise.

    Cor. 4.4 balances a level's noise against the resolution; the counters' noise at step ``T`` is
    :func:`counter_inflation` ``g(T)`` times one release's, the noise of one release at budget ``epsilon / g(T)``,
    so the depth is ``paper_depth(horizon_n, epsilon / g(T), d)``, capped.  Both plans are public.
    """
    eps = epsilon / counter_inflation(horizon_steps)
    return min(MAX_STREAM_DEPTH, paper_depth(int(horizon_n), eps, d))


def batch_increment(unit: np.ndarray, depth: int) -> np.ndarray:
    """The increment vector of one batch: the counts of every cell of every level in heap layout (int64)."""
    leaves = leaf_counts(np.asarray(unit, dtype=float).reshape(-1, _width(unit)), depth) if len(unit) else \
        np.zeros(2 ** depth, dtype=np.int64)
    return increment_from_leaves(leaves, depth)


def increment_from_leaves(leaves: np.ndarray, depth: int) -> np.ndarray:
    """Heap-layout counts of every level from the ``2^depth`` leaf counts (pairwise sums)."""
    tree = HeapTree.allocate(depth, np.array(leaves, dtype=np.int64))
    fill_upper_levels(tree, depth)
    flat = np.concatenate([tree.upper, tree.leaves])
    flat[0] = 0
    return flat


def _width(unit: np.ndarray) -> int:
    return int(np.asarray(unit).shape[1]) if np.asarray(unit).ndim == 2 else 1


def step(state: CounterState, increment: np.ndarray, plan: StreamPlan, node_rng: NodeRng) -> np.ndarray:
    """Advance every counter by one step; returns the released noisy counts (heap layout)."""
    if increment.shape != (plan.size,) or increment.dtype != np.int64:
        raise ValueError(f"an increment is {plan.size} int64 counts")
    return advance(state, increment, plan.segments, node_rng)


def consistent_leaves(counters: np.ndarray, depth: int) -> np.ndarray:
    """PMM's post-processing of the released counters: clamp at 0, then [HVZ23] Algorithm 3 top-down.

    Returns the ``2^depth`` consistent leaf counts; their sum is ``max(C_root(t), 0)``.
    """
    clamped = np.maximum(np.asarray(counters, dtype=np.int64), 0)
    tree = HeapTree(clamped[:2 ** depth].copy(), clamped[2 ** depth:].copy())
    consistency_in_place(tree, depth, "proportional")
    return tree.leaves


def synthetic_plan(counters: np.ndarray, plan: StreamPlan, rng: np.random.Generator,
                   n_synthetic: int | None = None):
    """The row plan of one release: ``m_theta`` uniform points in every leaf ([HVZ23] Algorithm 4).

    With ``n_synthetic`` the consistent leaf counts are rescaled to that many rows (largest remainder).
    """
    leaves = consistent_leaves(counters, plan.depth)
    if n_synthetic is not None and leaves.sum() > 0:
        leaves = largest_remainder(leaves, n_synthetic, rng)
    return leaf_plan(leaves, plan.depth, plan.d, "uniform", rng)


def counter_std(t: int, plan: StreamPlan) -> np.ndarray:
    """Standard deviation of every level's counter error at step ``t`` (exact, :func:`error_variance`)."""
    return np.array([math.sqrt(error_variance(t, el, eb))
                     for el, eb in zip(plan.segments.eps_log, plan.segments.eps_bin, strict=True)])


def expected_w1_bound(t: int, n: int, plan: StreamPlan) -> float:
    r"""A bound on ``E W1`` (l-infinity) at step ``t`` for ``n`` records so far, from the proof of [HVZ23] Thm 4.2.

    The realised bound is ``(|lambda_root| Delta_0 + sum_{j>=1} sum_{parents} max(|lambda_{theta0}|,
    |lambda_{theta1}|) diam_{j-1}) / n + delta`` (:func:`~privsyn_core.mechanisms.hvz23.pmm_tree.pathwise_bound`)
    with ``lambda`` the counters' errors; ``E|X| <= sd`` and ``E max(|a|,|b|) <= sqrt(2) sd`` give

    .. math:: E W_1 \le \frac{s_0 + \sqrt 2 \sum_{j=1}^r s_j \Delta_{j-1}}{n} + 2^{-\lfloor r/d \rfloor}.
    """
    sd = counter_std(t, plan)
    d, r = plan.d, plan.depth
    moved = sum(math.sqrt(2.0) * sd[j] * level_delta(j - 1, d) for j in range(1, r + 1))
    return float((sd[0] + moved) / max(n, 1) + level_diameter(r, d))


def w1_rate(t: int, d: int) -> float:
    """The paper's rate shape ([HVZ24]): ``log(t) t^{-1/d}`` for ``d >= 2``, ``log^{4.5}(t) / t`` for ``d = 1``."""
    t = max(t, 2)
    return math.log(t) ** 4.5 / t if d == 1 else math.log(t) * t ** (-1.0 / d)
