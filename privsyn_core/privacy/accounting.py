"""Privacy ledgers: a list of ``(stage, epsilon)`` whose :func:`math.fsum` is the total.

Budget identities are checked *exactly* (``fsum(ledger) == epsilon``), so splits are
built with :func:`split_epsilon`, which gives the last stage the exact remainder.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from fractions import Fraction
from typing import Any

import numpy as np

from privsyn_core.errors import ParameterError

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
    shares = _exact_split(epsilon, [epsilon * f / total for _, f in stages])
    return [(name, share) for (name, _), share in zip(stages, shares, strict=True)]


def _exact_split(epsilon: float, shares: list[float]) -> list[float]:
    """``shares`` adjusted by a few units in the last place so that their exact sum rounds firmly to ``epsilon``.

    The last share becomes the remainder ``epsilon - fsum(others)``, nudged with :func:`math.nextafter` towards
    ``epsilon`` while the exact sum misses (e.g. seven shares of 0.3/7).  When no remainder works (every one
    leaves the exact sum on a rounding tie or beyond), the first share moves by one unit and the remainder is
    recomputed.

    "Firmly" (:func:`_rounds_firmly`): the exact sum lies strictly within half a float spacing of ``epsilon``,
    not on a tie, so ``fsum`` gives ``epsilon`` and a split of part of a budget composes exactly: the pipeline's
    count stage ``epsilon_n`` with a mechanism's stages summing to its exact complement ``epsilon - epsilon_n``
    adds up, by ``fsum``, to the whole budget (the same error on a larger total, whose spacing is no smaller).
    """
    parts = list(shares[:-1])
    for _ in range(8):
        last = epsilon - math.fsum(parts)
        for _ in range(4):
            error = sum((Fraction(s) for s in (*parts, last)), -Fraction(epsilon))
            if _rounds_firmly(error, epsilon):
                return [*parts, last]
            last = math.nextafter(last, -math.inf if error > 0 else math.inf)
        parts[0] = math.nextafter(parts[0], 0.0)
    raise ArithmeticError("ledger does not sum to epsilon")  # pragma: no cover - guards the arithmetic above


def _rounds_firmly(error: Fraction, epsilon: float) -> bool:
    """Whether ``epsilon + error`` (exact) is strictly within half a float spacing of ``epsilon`` on its side."""
    if error == 0:
        return True
    neighbour = math.nextafter(epsilon, math.inf if error > 0 else -math.inf)
    return abs(error) < abs(Fraction(neighbour) - Fraction(epsilon)) / 2


def ledger_total(ledger: Ledger) -> float:
    """Exactly rounded sum of the ledger's epsilons."""
    return math.fsum(e for _, e in ledger)


def check_epsilon(epsilon: Any) -> float:
    """``epsilon`` as a finite positive float, or a clear error."""
    if isinstance(epsilon, (bool, np.bool_)):
        raise ParameterError(f"epsilon must be a number, got {epsilon!r}")
    try:
        eps = float(epsilon)
    except (TypeError, ValueError):
        raise ParameterError(f"epsilon must be a number, got {epsilon!r}") from None
    if not (math.isfinite(eps) and eps > 0):
        raise ParameterError(f"epsilon must be finite and > 0, got {epsilon!r}")
    return eps
