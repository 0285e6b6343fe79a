"""Privacy ledgers: a list of ``(stage, epsilon)`` whose :func:`math.fsum` is the total.

Budget identities are checked *exactly* (``fsum(ledger) == epsilon``), so splits are
built with :func:`split_epsilon`, which gives the last stage the exact remainder.
"""

from __future__ import annotations

import math
from typing import Sequence

Ledger = list[tuple[str, float]]


def split_epsilon(epsilon: float, stages: Sequence[tuple[str, float]]) -> Ledger:
    """Split ``epsilon`` over stages in the given proportions, summing to it exactly.

    Parameters
    ----------
    epsilon : float
        Total budget.
    stages : sequence of (name, fraction)
        Fractions are normalised; the last stage receives ``epsilon - fsum(others)``.

    Examples
    --------
    >>> split_epsilon(1.0, [("a", 1), ("b", 1), ("c", 1)])[-1][0]
    'c'
    """
    total = math.fsum(f for _, f in stages)
    if not stages or total <= 0 or any(f < 0 for _, f in stages):
        raise ValueError("stages need non-negative fractions with a positive sum")
    ledger = [(name, epsilon * f / total) for name, f in stages[:-1]]
    ledger.append((stages[-1][0], epsilon - math.fsum(e for _, e in ledger)))
    if math.fsum(e for _, e in ledger) != epsilon:  # pragma: no cover - guards the arithmetic above
        raise ArithmeticError("ledger does not sum to epsilon")
    return ledger


def ledger_total(ledger: Ledger) -> float:
    """Exactly rounded sum of the ledger's epsilons."""
    return math.fsum(e for _, e in ledger)
