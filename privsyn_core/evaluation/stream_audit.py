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

The event is chosen on separate runs and evaluated on fresh ones with Clopper-Pearson bounds, as in
:func:`privsyn_core.evaluation.audit.audit` (same selection and bound); ``noise_factor < 1`` scales every noise
draw (:func:`~privsyn_core.evaluation.audit.scaled_noise`) for the detection case.
"""

from __future__ import annotations

import time

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
from privsyn_core.mechanisms.online.continual import CounterState, block_of, nodes_containing
from privsyn_core.privacy.accounting import check_epsilon


def stream_pair(steps: int, changed_step: int, batch: int, d: int, depth: int,
                relation: str = "add") -> tuple[np.ndarray, np.ndarray]:
    """The increments (``steps x 2^(depth+1)``) of ``D`` (origin records) and ``D'``: one far record added at
    ``changed_step`` (``relation="add"``), or one origin record of that step moved to the far corner
    (``"move"``: two add/remove changes, ``2 epsilon``)."""
    origin, far = np.zeros((batch, d)), np.ones((1, d))
    base = online_pmm.batch_increment(origin, depth)
    extra = online_pmm.batch_increment(far, depth)
    d_incr = np.tile(base, (steps, 1))
    d_prime = d_incr.copy()
    d_prime[changed_step - 1] += extra
    if relation == "move":
        d_prime[changed_step - 1] -= online_pmm.batch_increment(origin[:1], depth)
    elif relation != "add":
        raise ParameterError(f"relation must be 'add' or 'move', got {relation!r}")
    return d_incr, d_prime


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
                 relation: str = "add") -> AuditResult:
    """Audit online PMM over a whole stream of ``2^{k+1}`` steps, the record changed at step ``2^k + 1``.

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
    truth = np.cumsum(d_incr, axis=0)
    expected = node_values(truth[:, cells], labels)
    generator = rng if isinstance(rng, np.random.Generator) else np.random.default_rng(rng)
    alpha = 1.0 - confidence

    def sample(increments: np.ndarray, runs: int) -> np.ndarray:
        rows = []
        for _ in range(runs):
            state = CounterState.empty(plan.size)
            series = np.array([online_pmm.step(state, inc, plan, lambda label: generator) for inc in increments])
            rows.append(_features(series, expected, labels, cells, signs))
        return np.array(rows, dtype=float)

    start = time.perf_counter()
    with scaled_noise(noise_factor):
        event = choose_event(sample(d_incr, selection_trials), sample(d_prime, selection_trials))
        hits = (int(event.occurs(sample(d_incr, trials)).sum()), int(event.occurs(sample(d_prime, trials)).sum()))
    likely, rare = hits[event.likelier], hits[1 - event.likelier]
    eps_lower = float(epsilon_lower_bound(np.array([likely]), np.array([rare]), trials, alpha)[0])
    claim = epsilon if relation == "add" else 2 * epsilon
    unit = online_pmm.RELATION if relation == "add" else "one record moved at one step (two add/remove changes)"
    return AuditResult("online_pmm (whole stream)", unit, claim, eps_lower, confidence, trials,
                       selection_trials, event.describe(), hits, noise_factor, time.perf_counter() - start)


def move_loss(epsilon: float, depth: int, d: int) -> float:
    """The loss a moved record realises: two cells change by one on every level but the root."""
    return 2.0 * float(np.sum(online_pmm.plan_stream(depth, d, epsilon).level_epsilons[1:]))


def tight_coordinates(k: int, depth: int) -> int:
    """Independent noise coordinates of the tight event: one block and ``k`` p-sums per level."""
    return (depth + 1) * (1 + block_of((1 << k) + 1))


__all__ = ["audit_stream", "move_loss", "node_values", "stream_pair", "tight_coordinates"]
