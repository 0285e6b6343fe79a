r"""Online PMM: continual release of PMM synthetic data for a growing table, one epsilon for the whole stream.

After He, Vershynin and Zhu [HVZ24] (the online private measure mechanism): the binary hierarchical partition of
``[0,1]^d`` of PMM ([HVZ23] Section 4.1, :mod:`privsyn_core.mechanisms.hvz23.pmm_tree`), the count of every node
released at every step by a continual counter, then PMM's top-down consistency ([HVZ23] Algorithm 3) and
sampling in the leaves ([HVZ23] Algorithm 4), so every step's synthetic data set is a function of the noisy
counters only.

1. Partition: level ``j -> j+1`` cuts axis ``j mod d``.  Either a **fixed** depth ``r`` (public, chosen when the
   stream opens; every level counts from step 1), or a **growing** depth: level ``j <= MAX_STREAM_DEPTH`` opens
   at the first step whose released root count passes PMM's depth rule ([HVZ23] Cor. 4.4) at the level's budget
   and the counters' noise (:meth:`StreamPlan.opening_depth`), and counts the records of that step on.  The
   records before are represented in it by splitting the parent level's released estimate of the step before
   evenly between the two children (:func:`split_down`): post-processing.
2. Budget over levels, fixed at creation.  Fixed depth: PMM's schedule ([HVZ23] eq. (A.4)), ``eps_j`` proportional
   to ``sqrt(Delta_{j-1})`` (the counter's error is the same function of ``t`` at every level, so the offline
   optimisation of ``sum_j sigma_j Delta_{j-1}`` under ``sum_j 1/sigma_j = epsilon`` gives the same weights).
   Growing depth: ``eps_j`` proportional to the convergent series ``(j + 2)^{-2}``, normalised over
   ``j <= MAX_STREAM_DEPTH`` (every level that may ever open).  Each ``eps_j`` is halved between the counter's two
   parts.
3. Counters: every cell of every open level has a hybrid continual counter ([CSS11] Section 4, the binary tree
   mechanism of [DNPR10]/[CSS11] on doubling blocks, :mod:`.continual`) with exact discrete Laplace noise,
   started at the step its level opens.  A batch of records per step is one increment vector.
4. Release at step ``t``: the estimate of a cell is its counter's output plus its share of the pre-opening
   estimate; ``n'_theta = (estimate)_+``, consistent counts top-down ([HVZ23] Algorithm 3, rule
   ``proportional``), then ``m_theta`` uniform points in every leaf.

Privacy unit: **event-level add/remove** -- two streams are neighbours when one has one more record in one batch
at one step (the batches of every other step, and the number of steps, are the same).  A record changes one cell
per open level by one in one increment, so each level's counters spend at most ``eps_j`` (:mod:`.continual`),
whenever they start; the opening steps are functions of released values (post-processing), and the levels
compose adaptively: ``sum_j eps_j = epsilon`` for every release of the whole (unbounded) stream.  Replacing
(moving) a record is two such changes: ``2 epsilon``.  ``docs/online_pmm.md`` derives it.

Accuracy, at ``t`` records (one per step).  *Derived here* for the growing depth (:func:`derived_rate`;
``docs/online_pmm.md``, "Accuracy"): ``E W1 = O((log^{3.5}(t)/t)^{1/d})`` for ``d >= 2`` and ``O(log^{4.5}(t)/t)``
for ``d = 1``, an order-of-magnitude derivation from the pathwise bound of [HVZ23] Thm 4.2 with this module's
counters, budget and opening rule; its non-asymptotic form, :func:`expected_w1_bound`, is a proven bound for
openings fixed in advance (tested), not for the data-driven openings.  With a fixed depth ``r`` the error levels
off at about ``2^{-floor(r/d)}``.  *The paper's* rate, [HVZ24] abstract: ``O(log(t) t^{-1/d})`` for ``d >= 2``,
``O(log^{4.5}(t)/t)`` for ``d = 1`` (:func:`w1_rate`), for its own constants, which could not be read here: not
proven for this implementation.

References
----------
.. [HVZ24] Y. He, R. Vershynin, Y. Zhu, "Online Differentially Private Synthetic Data Generation",
   arXiv:2402.08012, 2024.
.. [HVZ23] Y. He, R. Vershynin, Y. Zhu, "Algorithmically Effective Differentially Private Synthetic Data",
   COLT 2023: Section 4.1 (partition), Algorithm 3 (consistency), Algorithm 4 (PMM), eq. (A.4) (noise schedule),
   Corollary 4.4 (depth).
.. [CSS11] T.-H. H. Chan, E. Shi, D. Song, "Private and Continual Release of Statistics", ACM TISSEC 2011.
.. [DNPR10] C. Dwork, M. Naor, T. Pitassi, G. N. Rothblum, "Differential Privacy Under Continual
   Observation", STOC 2010.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
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

#: Deepest tree of a stream, and the cap of a growing one: the state keeps ``2 (log2 t + 2)`` vectors of
#: ``2^(r+1)`` int64 counts, and a batch is counted in the ``2^20`` leaves.
MAX_STREAM_DEPTH = 20
#: The growing schedule: level ``j``'s budget is proportional to ``(j + SCHEDULE_OFFSET)^-2``.
SCHEDULE_OFFSET = 2
#: The neighbouring relation of every stream (see the module docstring).
RELATION = "event-level add/remove: one record added to (or removed from) one batch at one step"

#: ``rule(released root count, step) -> depth``: how deep the tree should be after this step.
OpeningRule = Callable[[int, int], int]


@dataclass(frozen=True)
class StreamPlan:
    """The public layout and budget of a stream, fixed when it is created.

    ``depth`` is the deepest level that may ever count: the fixed depth ``r``, or the cap of a growing stream.
    ``eps_log[j]``/``eps_bin[j]`` are level ``j``'s budgets for the counter's two parts; ``ledger`` lists them
    all and sums to ``epsilon`` exactly.
    """

    depth: int
    d: int
    epsilon: float
    ledger: Ledger
    eps_log: tuple[float, ...]
    eps_bin: tuple[float, ...]
    growing: bool = False

    @property
    def level_epsilons(self) -> np.ndarray:
        return np.array(self.eps_log) + np.array(self.eps_bin)

    def segments(self, first: int, last: int) -> Segments:
        """The counter segments of levels ``first..last`` in their group's vector (:func:`group_offset`)."""
        offset = group_offset(first)
        return Segments(tuple(2 ** j - offset for j in range(first, last + 2)), self.eps_log[first:last + 1],
                        self.eps_bin[first:last + 1])

    def opening_threshold(self, j: int, t: int) -> float:
        """The released root count at which level ``j`` opens at step ``t`` (growing streams).

        PMM's depth ([HVZ23] Cor. 4.4) ``floor(log2(eps n)) - [d = 1]`` reaches ``j`` at ``eps n >= 2^(j + [d = 1])``;
        taken at level ``j``'s own budget seen through the counter, ``eps = eps_j / g(t)`` (:func:`counter_inflation`).
        """
        return 2.0 ** (j + (self.d == 1)) * counter_inflation(t) / float(self.level_epsilons[j])

    def opening_depth(self, root: int, t: int) -> int:
        """The deepest level whose :meth:`opening_threshold` the released root count ``root`` passes at step ``t``.

        The thresholds grow with ``j`` (``2^j`` up, ``eps_j`` down), so this is every level up to it.  A fixed
        plan returns its depth.  A function of released values and public inputs only.
        """
        if not self.growing:
            return self.depth
        depth = 0
        while depth < self.depth and root >= self.opening_threshold(depth + 1, t):
            depth += 1
        return depth


def _ledger(depth: int, epsilon: float, weights: list[float], when: str) -> tuple[Ledger, tuple, tuple]:
    stages = [(f"{j}/{part}", w / 2) for j, w in enumerate(weights) for part in ("log", "bin")]
    split = split_epsilon(epsilon, stages)
    eps_log = tuple(e for name, e in split if name.endswith("log"))
    eps_bin = tuple(e for name, e in split if name.endswith("bin"))
    ledger = []
    for j in range(depth + 1):
        ledger.append((f"level {j}: doubling-block sums of every cell, Lap_Z(1/{eps_log[j]:.4g}) ({when})",
                       eps_log[j]))
        ledger.append((f"level {j}: binary-tree p-sums in block k, Lap_Z(k/{eps_bin[j]:.4g}) ({when})", eps_bin[j]))
    if ledger_total(ledger) != epsilon:  # pragma: no cover - split_epsilon guarantees it
        raise ArithmeticError("stream ledger does not sum to epsilon")
    return ledger, eps_log, eps_bin


def _check_depth(depth: int) -> None:
    if not (isinstance(depth, int) and 0 <= depth <= MAX_STREAM_DEPTH):
        raise ParameterError(f"the stream's depth must be an integer in [0, {MAX_STREAM_DEPTH}], got {depth!r}")


def plan_stream(depth: int, d: int, epsilon: float) -> StreamPlan:
    """A fixed depth: PMM's (A.4) weights ``sqrt(Delta_{j-1})``, halved between the counter's parts.

    The ledger has two stages per level and sums to ``epsilon`` exactly (:func:`split_epsilon`).
    """
    _check_depth(depth)
    weights = [math.sqrt(level_delta(j - 1, d)) for j in range(depth + 1)]
    ledger, eps_log, eps_bin = _ledger(depth, epsilon, weights, "whole stream")
    return StreamPlan(depth, d, epsilon, ledger, eps_log, eps_bin)


def growing_plan(d: int, epsilon: float, max_depth: int = MAX_STREAM_DEPTH) -> StreamPlan:
    """A growing depth: level ``j <= max_depth`` gets ``eps_j`` proportional to ``(j + 2)^-2``, committed now.

    Every level that may ever open has its budget in the ledger from the start (``2 (max_depth + 1)`` stages,
    summing to ``epsilon`` exactly): whether and when it opens depends on released values, so its budget must be
    reserved whatever they turn out to be.
    """
    _check_depth(max_depth)
    weights = [(j + SCHEDULE_OFFSET) ** -2.0 for j in range(max_depth + 1)]
    ledger, eps_log, eps_bin = _ledger(max_depth, epsilon, weights, "whole stream, from the step the level opens")
    return StreamPlan(max_depth, d, epsilon, ledger, eps_log, eps_bin, growing=True)


def group_offset(first: int) -> int:
    """Where a group of levels ``first..`` starts in heap layout (0 for the root's group: entry 0 unused)."""
    return 0 if first == 0 else 2 ** first


@dataclass
class LevelGroup:
    """Levels ``first..last``, opened together at step ``opened``: one counter over their cells.

    ``frozen`` is the cells' share of the released estimate of the step before the opening (zero when opened at
    step 1); the counter counts the records from ``opened`` on.  Both in the group's slice of heap layout,
    ``[group_offset(first), 2^(last+1))``.
    """

    first: int
    last: int
    opened: int
    frozen: np.ndarray
    counter: CounterState

    def estimate(self) -> np.ndarray:
        assert self.counter.output is not None
        return self.frozen + self.counter.output


@dataclass
class StreamCounters:
    """Every open level's counter after ``step`` steps: the groups in order of their levels."""

    step: int
    groups: list[LevelGroup]

    @classmethod
    def start(cls, plan: StreamPlan) -> StreamCounters:
        """Before step 1: a growing stream counts the root, a fixed one every level of its depth."""
        last = 0 if plan.growing else plan.depth
        size = 2 ** (last + 1)
        return cls(0, [LevelGroup(0, last, 1, np.zeros(size, dtype=np.int64), CounterState.empty(size))])

    @property
    def depth(self) -> int:
        return self.groups[-1].last

    @property
    def opened(self) -> list[int]:
        """The step at which each open level ``0..depth`` opened."""
        return [g.opened for g in self.groups for _ in range(g.first, g.last + 1)]

    def released(self) -> np.ndarray:
        """The released estimate of every cell of every open level (heap layout, entry 0 unused)."""
        out = np.zeros(2 ** (self.depth + 1), dtype=np.int64)
        for group in self.groups:
            out[group_offset(group.first):2 ** (group.last + 1)] = group.estimate()
        return out


def split_down(released: np.ndarray, depth: int, target: int) -> np.ndarray:
    """Extend a released heap vector of levels ``0..depth`` to ``0..target``: each count split evenly between the
    two children (``ceil`` to the first, ``floor`` to the second), level by level.  Post-processing."""
    out = np.zeros(2 ** (target + 1), dtype=np.int64)
    out[:2 ** (depth + 1)] = released
    for j in range(depth + 1, target + 1):
        parents = out[2 ** (j - 1):2 ** j]
        out[2 ** j:2 ** (j + 1):2] = (parents + 1) // 2
        out[2 ** j + 1:2 ** (j + 1):2] = parents // 2
    return out


def heap_counts(leaves: np.ndarray, depth: int, last: int) -> np.ndarray:
    """Counts of levels ``0..last`` in heap layout from the ``2^depth`` leaf counts (``last <= depth``)."""
    bottom = leaves if last == depth else np.asarray(leaves).reshape(2 ** last, -1).sum(axis=1)
    return increment_from_leaves(bottom, last)


def _group_rng(node_rng: NodeRng, first: int) -> NodeRng:
    """The root's group keeps the labels of a fixed-depth stream; a later group prefixes its first level."""
    return node_rng if first == 0 else (lambda label: node_rng(f"levels/{first}/{label}"))


def _advance_group(group: LevelGroup, heap: np.ndarray, plan: StreamPlan, node_rng: NodeRng) -> None:
    cells = heap[group_offset(group.first):2 ** (group.last + 1)]
    advance(group.counter, cells, plan.segments(group.first, group.last), _group_rng(node_rng, group.first))


def step(state: StreamCounters, leaves: np.ndarray, plan: StreamPlan, node_rng: NodeRng,
         rule: OpeningRule | None = None) -> np.ndarray:
    """One step: the batch's ``2^plan.depth`` leaf counts in, the released estimates (heap layout) out.

    Every open group's counter advances; then ``rule`` (default :meth:`StreamPlan.opening_depth`) reads the
    *released* root count, and the levels it asks for beyond the open depth open now, as one group: their frozen
    part is :func:`split_down` of the previous step's release, their counter counts this batch on.
    """
    if leaves.shape != (2 ** plan.depth,) or leaves.dtype != np.int64:
        raise ValueError(f"a batch is counted in {2 ** plan.depth} int64 leaves")
    t = state.step + 1
    previous, depth = state.released(), state.depth
    heap = heap_counts(leaves, plan.depth, depth)
    for group in state.groups:
        _advance_group(group, heap, plan, node_rng)
    state.step = t
    target = min(plan.depth, int((rule or plan.opening_depth)(int(state.groups[0].estimate()[1]), t)))
    if target > depth:
        first = depth + 1
        frozen = split_down(previous, depth, target)[2 ** first:]
        group = LevelGroup(first, target, t, frozen, CounterState.empty(len(frozen)))
        _advance_group(group, heap_counts(leaves, plan.depth, target), plan, node_rng)
        state.groups.append(group)
    return state.released()


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
    """The counts of one batch in every cell of every level ``0..depth`` in heap layout (int64)."""
    return increment_from_leaves(batch_leaves(unit, depth), depth)


def batch_leaves(unit: np.ndarray, depth: int) -> np.ndarray:
    """The ``2^depth`` leaf counts of one batch of points in ``[0,1]^d`` (int64)."""
    unit = np.asarray(unit, dtype=float)
    if len(unit) == 0:
        return np.zeros(2 ** depth, dtype=np.int64)
    return leaf_counts(unit.reshape(len(unit), -1), depth)


def increment_from_leaves(leaves: np.ndarray, depth: int) -> np.ndarray:
    """Heap-layout counts of every level from the ``2^depth`` leaf counts (pairwise sums)."""
    tree = HeapTree.allocate(depth, np.array(leaves, dtype=np.int64))
    fill_upper_levels(tree, depth)
    flat = np.concatenate([tree.upper, tree.leaves])
    flat[0] = 0
    return flat


def tree_depth(counters: np.ndarray) -> int:
    """The depth ``r`` of a heap-layout vector of ``2^(r+1)`` counts."""
    return len(counters).bit_length() - 2


def consistent_leaves(counters: np.ndarray) -> np.ndarray:
    """PMM's post-processing of the released estimates: clamp at 0, then [HVZ23] Algorithm 3 top-down.

    Returns the ``2^r`` consistent leaf counts; their sum is ``max(root, 0)``.
    """
    depth = tree_depth(counters)
    clamped = np.maximum(np.asarray(counters, dtype=np.int64), 0)
    tree = HeapTree(clamped[:2 ** depth].copy(), clamped[2 ** depth:].copy())
    consistency_in_place(tree, depth, "proportional")
    return tree.leaves


def synthetic_plan(counters: np.ndarray, d: int, rng: np.random.Generator, n_synthetic: int | None = None):
    """The row plan of one release: ``m_theta`` uniform points in every leaf ([HVZ23] Algorithm 4).

    With ``n_synthetic`` the consistent leaf counts are rescaled to that many rows (largest remainder).
    """
    leaves = consistent_leaves(counters)
    if n_synthetic is not None and leaves.sum() > 0:
        leaves = largest_remainder(leaves, n_synthetic, rng)
    return leaf_plan(leaves, tree_depth(counters), d, "uniform", rng)


def expected_w1_bound(t: int, n: int, plan: StreamPlan, opened: Sequence[int] | None = None,
                      records_before: Sequence[int] | None = None) -> float:
    r"""A bound on ``E W1`` (l-infinity) at step ``t`` for ``n`` records so far, from the proof of [HVZ23] Thm 4.2.

    The realised bound is ``(|lambda_root| Delta_0 + sum_{j>=1} sum_{parents} max(|lambda_{theta0}|,
    |lambda_{theta1}|) diam_{j-1}) / n + diam_r`` (:func:`~privsyn_core.mechanisms.hvz23.pmm_tree.pathwise_bound`)
    with ``lambda`` the errors of the released estimates.  A level opened at ``t_j`` has
    ``lambda = nu + phi``: its counter's error ``nu`` (sd ``s_j``, at its own step ``t - t_j + 1``) and the frozen
    error ``phi`` of the split.  ``E|X| <= sd``, ``E max(|a|,|b|) <= sqrt(2) sd`` and, for a split parent
    ``p`` with true children ``a_p, b_p`` before ``t_j``, ``max(|phi_{p0}|, |phi_{p1}|) <= (|a_p - b_p| +
    |lambda_{j-1}(p)| + 1) / 2`` give

    .. math:: E W_1 \le \frac{s_0 + \sum_{j=1}^r \operatorname{diam}_{j-1} (2^{j-1}\sqrt 2 s_j + F_j / 2)}{n}
              + \operatorname{diam}_r,
       \quad F_j = n_{<t_j} + A_{j-1}(t_j - 1) + 2^{j-1}

    (``F_j = 0`` when ``t_j = 1``), where ``A_j(s)`` bounds ``E sum_theta |lambda_j(theta, s)|``: ``2^j s_j + F_j``
    for an open level, ``n_{<=s} + A_{j-1}(s) + 2^{j-1}`` for a level still split from its parent.

    ``opened[j]`` is the step level ``j`` opened, ``records_before[j]`` the records before it (default: every level
    of the plan at step 1).  With openings chosen by the released root count the root's noise and the openings
    are dependent; the bound is exact for a schedule of openings fixed in advance.
    """
    opened = list(opened) if opened is not None else [1] * (plan.depth + 1)
    before = list(records_before) if records_before is not None else [0] * len(opened)
    d, r = plan.d, len(opened) - 1

    def sd(j: int, s: int) -> float:
        return math.sqrt(error_variance(s - opened[j] + 1, plan.eps_log[j], plan.eps_bin[j]))

    def frozen(j: int) -> float:
        return 0.0 if opened[j] == 1 else before[j] + abs_errors(j - 1, opened[j] - 1) + 2 ** (j - 1)

    def abs_errors(j: int, s: int) -> float:
        if opened[j] <= s:
            return 2 ** j * sd(j, s) + frozen(j)
        return before[j] + abs_errors(j - 1, s) + 2 ** (j - 1)  # still split: opened[j] == s + 1

    moved = sum(level_diameter(j - 1, d) * (2 ** (j - 1) * math.sqrt(2.0) * sd(j, t) + frozen(j) / 2)
                for j in range(1, r + 1))
    return float((sd(0, t) + moved) / max(n, 1) + level_diameter(r, d))


def w1_rate(t: int, d: int) -> float:
    """The paper's rate shape ([HVZ24] abstract): ``log(t) t^{-1/d}`` for ``d >= 2``, ``log^{4.5}(t) / t`` for
    ``d = 1``, at ``t`` records (one per step).  Not proven for this implementation: see :func:`derived_rate`."""
    t = max(t, 2)
    return math.log(t) ** 4.5 / t if d == 1 else math.log(t) * t ** (-1.0 / d)


def derived_rate(t: int, d: int) -> float:
    r"""The rate shape derived for the growing depth of this module: ``(log^{3.5}(t) / t)^{1/d}`` for ``d >= 2``,
    ``log^{4.5}(t) / t`` for ``d = 1``, at ``t`` records (one per step).

    With the counter's noise inflation ``g(t) ~ log^{1.5} t`` and the growing budget ``eps_j ~ eps (j + 2)^{-2}``,
    level ``j``'s counter has sd ``s_j ~ g j^2 / eps`` and the opening rule gives ``2^r ~ eps t / (g r^2)``, so
    ``r ~ log t``.  In d = 1 the noise ``sum_{j <= r} s_j / t ~ g r^3 / (eps t)`` dominates the resolution
    ``2^{-r} ~ g r^2 / (eps t)``: ``log^{4.5}(t) / t``.  In ``d >= 2`` the level terms
    ``s_j Delta_{j-1} / t`` grow geometrically in ``j`` and balance the resolution ``2^{-r/d}`` at
    ``(g r^2 / (eps t))^{1/d}``: ``(log^{3.5}(t) / t)^{1/d}`` (``docs/online_pmm.md``, "Accuracy").
    """
    t = max(t, 2)
    return math.log(t) ** 4.5 / t if d == 1 else (math.log(t) ** 3.5 / t) ** (1.0 / d)
