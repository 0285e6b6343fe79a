"""Reference: resample the real records with replacement.  **Not private.**

It shows the best any synthesizer could do (the real-data sampling noise floor).  Its
ledger records an infinite epsilon and its result always has ``dp_valid = False``.
"""

from __future__ import annotations

import math

import numpy as np

from privsyn_core.mechanisms.base.spec import W1Claim, register
from privsyn_core.privacy.accounting import Ledger
from privsyn_core.result import MechanismOutput


def bootstrap_ledger() -> Ledger:
    """The ledger of every run (its privacy map's value): one stage with no guarantee (an infinite epsilon)."""
    return [("resample the real data (not private)", math.inf)]


@register(
    "bootstrap",
    privacy_map=lambda epsilon, neighbouring, params, n, d: bootstrap_ledger(),
    title="Bootstrap of the real data (reference, not private)",
    paper="reference",
    data_kind="continuous",
    neighbouring=("replace", "add_remove"),
    is_private=False,
    params={},
    guarantee="none: copies real records",
    description="Resamples the real data: the floor any synthesizer is compared with. Never release it.",
    citation="a reference, not a privacy mechanism: resampling the real data",
    order=110,
    w1_claim=W1Claim("theorem", "a resample of n rows from the data's empirical measure: E W1 = O(n^(-1/d)) for d >="
                                " 3, O(n^(-1/2) log n) for d = 2, O(n^(-1/2)) for d = 1 (Fournier, Guillin, \"On the"
                                " rate of convergence in Wasserstein distance of the empirical measure\", PTRF 2015,"
                                " Thm 1)"),
    rate=lambda epsilon, n, d: max(n, 2) ** (-1 / max(d, 2)) * (math.log(max(n, 2)) if d == 2 else 1.0),
    released=(),
)
def bootstrap(unit: np.ndarray, epsilon: float, *, neighbouring: str, n_synthetic: int | None,
              rng: np.random.Generator, size: int | str | None = None) -> MechanismOutput:
    n = len(unit)
    points = unit[rng.integers(0, n, n if n_synthetic is None else n_synthetic)]
    return MechanismOutput(unit=points, ledger=bootstrap_ledger(),
                           warnings=["bootstrap copies real records: it is not private"])
