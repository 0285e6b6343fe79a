"""Result types: what a mechanism returns (:class:`MechanismOutput`) and what
:func:`privsyn_core.synthesize` returns (:class:`SynthResult`)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from .accounting import Ledger


@dataclass
class MechanismOutput:
    """The raw output of a run function, in encoded (unit) coordinates.

    Attributes
    ----------
    unit : ndarray (m, d)
        Released points; weighted atoms when ``weights`` is given.
    weights : ndarray (m,), optional
        Non-negative atom weights (noisy counts or probabilities).
    rows : ndarray (N, d), optional
        Synthetic rows when they differ from ``unit`` (weighted mechanisms must set it).
    ledger : list of (stage, epsilon)
        Privacy spent per stage; ``fsum`` equals the epsilon the mechanism claims.
    diagnostics : dict
        Teaching data for the figures (true counts included: never part of a release).
    params : dict
        Values the mechanism chose itself (depth, grid size, ...).
    timings : dict
        Seconds per internal stage.
    warnings : list of str
    """

    unit: np.ndarray
    ledger: Ledger
    weights: np.ndarray | None = None
    rows: np.ndarray | None = None
    diagnostics: dict[str, Any] = field(default_factory=dict)
    params: dict[str, Any] = field(default_factory=dict)
    timings: dict[str, float] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)


@dataclass
class SynthResult:
    """A synthetic dataset with its privacy accounting (see ``CONTRACT.md``).

    Attributes
    ----------
    data : DataFrame
        Synthetic rows, same columns and dtypes as the input columns used.
    unit : ndarray (m, d)
        The released points in unit coordinates (weighted atoms when ``weights``).
    weights : ndarray (m,) or None
    epsilon : float
        Total privacy spent: ``math.fsum`` of the ledger.
    ledger : list of (stage, epsilon)
    neighbouring : {"replace", "add_remove"}
    dp_valid : bool
        False when the mechanism is not private or the domain came from the data.
    params : dict
        Every parameter as resolved, including ``seed`` (None if not reproducible).
    diagnostics : dict
        What the figures need (true counts are teaching-only, never a release).
    timings : dict
        Seconds per stage.
    mechanism : str
    schema : dict
        The schema used, as :meth:`Schema.to_dict`.
    unit_rows : ndarray (N, d)
        The rows of ``data`` in unit coordinates.
    clipped : dict
        Input rows clipped into the public bounds, per column.
    warnings : list of str
    """

    data: pd.DataFrame
    unit: np.ndarray
    weights: np.ndarray | None
    epsilon: float
    ledger: Ledger
    neighbouring: str
    dp_valid: bool
    params: dict[str, Any]
    diagnostics: dict[str, Any]
    timings: dict[str, float]
    mechanism: str = ""
    schema: dict[str, Any] = field(default_factory=dict)
    unit_rows: np.ndarray | None = None
    clipped: dict[str, int] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)

    def report(self) -> dict[str, Any]:
        """A JSON-serialisable summary: mechanism, epsilon, ledger, parameters, schema."""
        return {
            "mechanism": self.mechanism,
            "epsilon": self.epsilon,
            "ledger": [[stage, eps] for stage, eps in self.ledger],
            "neighbouring": self.neighbouring,
            "dp_valid": self.dp_valid,
            "params": {k: _jsonable(v) for k, v in self.params.items()},
            "schema": self.schema,
            "n_synthetic": int(len(self.data)),
            "clipped": self.clipped,
            "timings": self.timings,
            "warnings": self.warnings,
        }


def _jsonable(value: Any) -> Any:
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, np.ndarray):
        return value.tolist()
    return value
