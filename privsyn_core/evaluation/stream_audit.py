r"""Empirical privacy audit of a whole stream (online PMM, :mod:`privsyn_core.mechanisms.online.online_pmm`).

The neighbouring streams are event-level add/remove neighbours: ``D`` has ``batch`` records at the origin
corner in every one of ``steps`` steps; ``D'`` is ``D`` with one more record, at the far corner, in the batch of
step ``changed_step``.  The attacker sees **every** release: the noisy counters of every cell of every level at
every step (each step's synthetic data is a function of them, so auditing the counters bounds the releases too).
From the released counter series ``C(1..T)`` it recovers the value of every released node (a block sum is
``C(2^k) - C(2^{k-1})``, a p-sum released at ``t = 2^k + u`` is ``C(t) - C(t - 2^i)`` with ``i`` the lowest set
bit of ``u``) and reads the far corner's cell of every level in the nodes that contain ``changed_step``, shifted
by their value under ``D``.  With ``changed_step = 2^k + 1`` and ``steps = 2^{k+1}`` the record is in one block and
``k`` p-sums per level, so the event "every shifted value >= 1" has likelihood ratio exactly ``e^epsilon`` (for
discrete Laplace ``P(Z >= 0) / P(Z >= 1) = e^{1/sigma}``): the tight event.

**Growing depth** (``growing=True``, levels ``1..depth`` may open): ``D`` has ``batch`` records per step and a surge
of ``surge`` more at ``changed_step``, so that the released total passes the opening thresholds of every level at
that very step; ``D'`` adds the far record there.  The record is in the root's nodes and in the first node (the
block ``{1}`` of its own counter) of every level opened at that step; the attacker recovers that node as the
released estimate minus the split of the previous release (public), and a level not opened at ``changed_step``
gives the feature :data:`NOT_OPENED`.  The pair realises ``eps_0 + sum_{j>=1} eps_j / 2`` (:func:`growing_loss`).
Detection case of the opening itself: ``opening="true"``, a rule that reads the true total instead of the released
one, with ``D``'s total one below the threshold at ``changed_step``: ``D'`` opens there, ``D`` never does.

The event is chosen on separate runs and evaluated on fresh ones with Clopper-Pearson bounds, as in
:func:`privsyn_core.evaluation.audit.audit` (same selection and bound); ``noise_factor < 1`` scales every noise
draw (:func:`~privsyn_core.evaluation.audit.scaled_noise`) for the detection case.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable

import numpy as np

from privsyn_core.errors import ParameterError
from privsyn_core.evaluation.audit import (
    DEFAULT_CONFIDENCE,
    AuditResult,
    choose_event,
    epsilon_lower_bound,
    scaled_noise,
)
from privsyn_core.mechanisms.online import online_pmm
from privsyn_core.mechanisms.online.continual import block_of, nodes_containing
from privsyn_core.mechanisms.online.online_pmm import StreamCounters, StreamPlan
from privsyn_core.privacy.accounting import check_epsilon

#: The feature of a level that did not open at the record's step (below every node value the runs produce).
NOT_OPENED = -1e9


def stream_pair(steps: int, changed_step: int, batch: int, d: int, depth: int,
                relation: str = "add", surge: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """The leaf counts (``steps x 2^depth``) of ``D`` (``batch`` origin records per step, ``surge`` more at
    ``changed_step``) and ``D'``: one far record added at ``changed_step`` (``relation="add"``), or one origin
    record of that step moved to the far corner (``"move"``: two add/remove changes, ``2 epsilon``)."""
    origin, far = np.zeros((1, d)), np.ones((1, d))
    one = online_pmm.batch_leaves(origin, depth)
    d_leaves = np.tile(batch * one, (steps, 1))
    d_leaves[changed_step - 1] += surge * one
    d_prime = d_leaves.copy()
    d_prime[changed_step - 1] += online_pmm.batch_leaves(far, depth)
    if relation == "move":
        d_prime[changed_step - 1] -= one
    elif relation != "add":
        raise ParameterError(f"relation must be 'add' or 'move', got {relation!r}")
    return d_leaves, d_prime


def node_values(series: np.ndarray, labels: list[str]) -> np.ndarray:
    """Values of the released nodes ``labels`` from the released counter outputs ``series[t-1] = C(t)``."""
    out = []
    for label in labels:
        kind, *rest = label.split("/")
        if kind == "log":
            k = int(rest[0])
            out.append(series[(1 << k) - 1] - (series[(1 << (k - 1)) - 1] if k else 0))
        else:
            k, u = int(rest[0]), int(rest[1])
            t, i = (1 << k) + u, (u & -u).bit_length() - 1
            out.append(series[t - 1] - series[t - (1 << i) - 1])
    return np.array(out)


def _features(series: np.ndarray, expected: np.ndarray, labels: list[str], cells: list[int],
              signs: np.ndarray) -> np.ndarray:
    """Shifted node values of the watched cells (``sign * (value - value under D without noise)``, growing by one
    from ``D`` to ``D'``), their minimum and sum."""
    shifted = ((node_values(series[:, cells], labels) - expected) * signs).reshape(-1)
    return np.concatenate([shifted, [shifted.min(), shifted.sum()]])


def audit_stream(epsilon: float = 1.0, *, k: int = 1, depth: int = 1, d: int = 1, batch: int = 3,
                 trials: int = 20_000, selection_trials: int = 5_000, confidence: float = DEFAULT_CONFIDENCE,
                 rng: int | np.random.Generator | None = 0, noise_factor: float = 1.0,
                 relation: str = "add", growing: bool = False, opening: str = "released") -> AuditResult:
    """Audit online PMM over a whole stream of ``2^{k+1}`` steps, the record changed at step ``2^k + 1``.

    ``growing=True``: a growing depth capped at ``depth``, levels opening at the changed step (module docstring);
    ``opening="true"`` is its detection case (a rule reading the true total).

    ``relation="add"``: the stream's relation, the claim is ``epsilon``.  ``"move"``: one record of that step
    moved from the origin to the far corner, two add/remove changes: the claim is ``2 epsilon`` (group privacy),
    and the far and origin cells below the root are watched (the root count does not change, so the loss the pair
    realises is ``2 (epsilon - eps_0)``: see :func:`move_loss`).  Returns an
    :class:`~privsyn_core.evaluation.audit.AuditResult`: ``eps_lower`` is below the true loss with probability
    at least ``confidence``; ``detected`` means an overspend of the claim is proven.
    """
    epsilon = check_epsilon(epsilon)
    if not (isinstance(k, int) and 1 <= k <= 6 and isinstance(depth, int) and 0 <= depth <= 6):
        raise ParameterError("audit_stream needs 1 <= k <= 6 and 0 <= depth <= 6")
    if growing:
        return _audit_growing(epsilon, k, depth, d, batch, trials, selection_trials, confidence, rng, noise_factor,
                              opening)
    steps, changed = 1 << (k + 1), (1 << k) + 1
    plan = online_pmm.plan_stream(depth, d, epsilon)
    d_incr, d_prime = stream_pair(steps, changed, batch, d, depth, relation)
    labels = nodes_containing(changed, steps)
    cells = [(1 << (j + 1)) - 1 for j in range(depth + 1)]  # the far corner's cell of every level (heap layout)
    signs = np.ones(len(cells))
    if relation == "move":  # below the root the origin's cell loses the record; the root does not change
        if depth < 1:
            raise ParameterError("a moved record changes no count of a depth-0 tree: audit it with depth >= 1")
        cells = cells[1:] + [1 << j for j in range(1, depth + 1)]
        signs = np.concatenate([np.ones(depth), -np.ones(depth)])
    expected = node_values(np.array([online_pmm.increment_from_leaves(x, depth) for x in d_incr]).cumsum(axis=0)
                           [:, cells], labels)
    generator = rng if isinstance(rng, np.random.Generator) else np.random.default_rng(rng)

    def features(leaves: np.ndarray) -> np.ndarray:
        state = StreamCounters.start(plan)
        series = np.array([online_pmm.step(state, x, plan, lambda label: generator) for x in leaves])
        return _features(series, expected, labels, cells, signs)

    claim = epsilon if relation == "add" else 2 * epsilon
    unit = online_pmm.RELATION if relation == "add" else "one record moved at one step (two add/remove changes)"
    return _run(features, (d_incr, d_prime), claim, unit, "online_pmm (whole stream)", trials, selection_trials,
                confidence, noise_factor)


def _run(features: Callable[[np.ndarray], np.ndarray], pair: tuple[np.ndarray, np.ndarray], claim: float, unit: str,
         name: str, trials: int, selection_trials: int, confidence: float, noise_factor: float) -> AuditResult:
    """Choose the event on ``selection_trials`` runs of each stream, count it on ``trials`` fresh ones."""
    def sample(leaves: np.ndarray, runs: int) -> np.ndarray:
        return np.array([features(leaves) for _ in range(runs)], dtype=float)

    start = time.perf_counter()
    with scaled_noise(noise_factor):
        event = choose_event(sample(pair[0], selection_trials), sample(pair[1], selection_trials))
        hits = (int(event.occurs(sample(pair[0], trials)).sum()), int(event.occurs(sample(pair[1], trials)).sum()))
    likely, rare = hits[event.likelier], hits[1 - event.likelier]
    eps_lower = float(epsilon_lower_bound(np.array([likely]), np.array([rare]), trials, 1.0 - confidence)[0])
    return AuditResult(name, unit, claim, eps_lower, confidence, trials, selection_trials, event.describe(), hits,
                       noise_factor, time.perf_counter() - start)


def opening_surge(plan: StreamPlan, changed: int, batch: int, opening: str) -> int:
    """The extra records of ``D`` at ``changed``: ``"released"``, enough for the released total to pass every
    level's threshold there (60 above it: the noise falls short with probability below 1e-8); ``"true"``, ``D``'s
    total one below level 1's threshold, so that ``D'`` reaches it."""
    if opening == "released":
        return math.ceil(plan.opening_threshold(plan.depth, changed)) + 60
    if opening == "true":
        return math.ceil(plan.opening_threshold(1, changed)) - 1 - batch * changed
    raise ParameterError(f"opening must be 'released' or 'true', got {opening!r}")


def _audit_growing(epsilon: float, k: int, depth: int, d: int, batch: int, trials: int, selection_trials: int,
                   confidence: float, rng: int | np.random.Generator | None, noise_factor: float,
                   opening: str) -> AuditResult:
    if depth < 1:
        raise ParameterError("a growing stream is audited with depth >= 1 (a level to open)")
    steps, changed = 1 << (k + 1), (1 << k) + 1
    plan = online_pmm.growing_plan(d, epsilon, depth)
    d_leaves, d_prime = stream_pair(steps, changed, batch, d, depth, surge=opening_surge(plan, changed, batch,
                                                                                          opening))
    labels = nodes_containing(changed, steps)
    truth = np.array([online_pmm.increment_from_leaves(x, depth) for x in d_leaves]).cumsum(axis=0)
    expected = node_values(truth[:, 1:2], labels)[:, 0]
    generator = rng if isinstance(rng, np.random.Generator) else np.random.default_rng(rng)
    far = [(1 << (j + 1)) - 1 for j in range(1, depth + 1)]  # the far corner's cell of levels 1..depth

    def features(leaves: np.ndarray) -> np.ndarray:
        state, series, totals = StreamCounters.start(plan), [], np.cumsum(leaves.sum(axis=1))
        for t, x in enumerate(leaves, 1):
            rule = None if opening == "released" else (lambda root, t: plan.opening_depth(int(totals[t - 1]), t))
            series.append(online_pmm.step(state, x, plan, lambda label: generator, rule))
        root = np.array([s[1] for s in series])
        shifted = list(node_values(root, labels) - expected)
        before = online_pmm.split_down(series[changed - 2], online_pmm.tree_depth(series[changed - 2]), depth)
        for j, cell in enumerate(far, 1):  # the first node of level j's counter, if it opened at the record's step
            opened = j < len(state.opened) and state.opened[j] == changed
            shifted.append(float(series[changed - 1][cell] - before[cell]) if opened else NOT_OPENED)
        values = np.array(shifted, dtype=float)
        return np.concatenate([values, [values.min(), values.sum()]])

    name = "online_pmm growing depth (whole stream)" + ("" if opening == "released" else ", opening reads the truth")
    return _run(features, (d_leaves, d_prime), epsilon, online_pmm.RELATION, name, trials, selection_trials,
                confidence, noise_factor)


def growing_loss(epsilon: float, depth: int, d: int) -> float:
    """The loss the growing pair realises: the root's ``eps_0``, and half of ``eps_j`` (its counter's block part)
    of every level opened at the record's step."""
    plan = online_pmm.growing_plan(d, epsilon, depth)
    return float(plan.level_epsilons[0] + sum(plan.eps_log[1:]))


def move_loss(epsilon: float, depth: int, d: int) -> float:
    """The loss a moved record realises: two cells change by one on every level but the root."""
    return 2.0 * float(np.sum(online_pmm.plan_stream(depth, d, epsilon).level_epsilons[1:]))


def tight_coordinates(k: int, depth: int) -> int:
    """Independent noise coordinates of the tight event: one block and ``k`` p-sums per level."""
    return (depth + 1) * (1 + block_of((1 << k) + 1))


__all__ = ["audit_stream", "growing_loss", "move_loss", "node_values", "opening_surge", "stream_pair",
           "tight_coordinates"]
