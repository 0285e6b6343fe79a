r"""What a mechanism declares for the privacy audit: its :class:`AuditCase`, the generic features and its noise laws.

The audit itself (:mod:`privsyn_core.evaluation.audit`) runs a mechanism many times on a worst-case
neighbouring pair (:class:`NeighbourPair`: ``D`` with every record at the origin corner, ``D'`` with one
record moved or added at the far corner), maps every output to a few real *features* that read only the
differentially private output, and bounds the epsilon really spent from below.  A mechanism declares how it is
audited in its registration (``MechanismSpec.audit``, an :class:`AuditCase`) with the features here or its own
(in its folder); a mechanism without one is audited through its released rows (:func:`release_features`).

The audit's detection cases multiply every noise scale by a factor; :data:`SCALED_LAWS` lists the noise laws it
rescales, and a mechanism that samples a noise law of its own declares it with :func:`scaled_law`.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, TypeVar

import numpy as np

from privsyn_core.result import MechanismOutput

DEFAULT_TRIALS = 20_000
DEFAULT_SELECTION_TRIALS = 5_000

_Law = TypeVar("_Law", bound=Callable[..., Any])

#: The noise laws the audit's detection cases rescale: ``(module, function, position of the scale argument)``,
#: privsyn_core's samplers first, then each law a mechanism declares with :func:`scaled_law`.
SCALED_LAWS: list[tuple[str, str, int]] = [("privsyn_core.privacy.noise", "discrete_laplace", 0),
                                           ("privsyn_core.privacy.noise", "fill_discrete_laplace", 1)]


def scaled_law(position: int) -> Callable[[_Law], _Law]:
    """Decorator: the function is a noise law whose scale is its argument ``position``, rescaled by the audit's
    detection cases (:data:`SCALED_LAWS`); the function itself is returned unchanged."""
    def declare(law: _Law) -> _Law:
        entry = (law.__module__, law.__name__, position)
        if entry not in SCALED_LAWS:  # a module imported again declares its laws again
            SCALED_LAWS.append(entry)
        return law
    return declare


@dataclass(frozen=True)
class NeighbourPair:
    """Two neighbouring unit datasets: ``base`` (D) and ``neighbour`` (D').

    The changed record is row 0 of ``neighbour``; ``n`` is the size of ``base``.
    """

    relation: str
    base: np.ndarray
    neighbour: np.ndarray

    @property
    def n(self) -> int:
        return len(self.base)


FeatureFn = Callable[[MechanismOutput, NeighbourPair], np.ndarray]


@dataclass(frozen=True)
class AuditCase:
    """How one mechanism is audited (declared in its registration, ``MechanismSpec.audit``).

    Attributes
    ----------
    n, d : int
        Size of the neighbouring pair (:func:`privsyn_core.evaluation.audit.neighbour_pair`).
    params : dict
        Mechanism parameters: few cells, so that thousands of runs take seconds, in the configuration
        whose calibration is tightest.
    features : callable, optional
        ``features(output, pair) -> array`` reading the DP output only; default :func:`release_features`.
    trials, selection_trials : int
        Runs per dataset counting the chosen event, and choosing it.
    read_stages : tuple of str
        Prefixes of the ledger stages whose noise the features read (``("",)``: all of them); their
        loss sets the detection factor (:func:`privsyn_core.evaluation.audit.detection_factor`).
    tight_coordinates : int
        Independent noise coordinates of the tight event (its mass is about ``2^-k``), for the
        detection power (:func:`privsyn_core.evaluation.audit.detection_power`).
    pair_loss : callable, optional
        ``pair_loss(spec, pair, epsilon, params) -> float``: the loss the pair realises, where it is below
        the ledger's (microagg_dp's damped centres).
    """

    n: int = 20
    d: int = 1
    params: dict[str, Any] = field(default_factory=dict)
    features: FeatureFn | None = None
    trials: int = DEFAULT_TRIALS
    selection_trials: int = DEFAULT_SELECTION_TRIALS
    read_stages: tuple[str, ...] = ("",)
    tight_coordinates: int = 4
    pair_loss: Callable[..., float] | None = None


# -- features: functions of the private output only ----------------------------------------
def release_features(out: MechanismOutput, pair: NeighbourPair) -> np.ndarray:
    """Fallback: mass of the released rows (or weighted atoms) in the far half-cube ``[1/2, 1]^d``."""
    rows = out.rows if out.rows is not None else out.unit
    rows = np.asarray(rows, dtype=float).reshape(-1, pair.base.shape[1])
    far_rows = np.mean(np.all(rows >= 0.5, axis=1)) if len(rows) else 0.0
    atoms = np.asarray(out.unit, dtype=float).reshape(-1, pair.base.shape[1])
    if out.weights is None or len(atoms) == 0:
        return np.array([far_rows, float(np.mean(rows)) if len(rows) else 0.0])
    w = np.asarray(out.weights, dtype=float)
    far_atoms = float(w[np.all(atoms >= 0.5, axis=1)].sum() / w.sum()) if w.sum() > 0 else 0.0
    return np.array([far_rows, far_atoms])


def cell_features(out: MechanismOutput, pair: NeighbourPair, key: str = "noisy_count") -> np.ndarray:
    """Counts of the cells holding the two corners, per level (or of the flat cells), shifted to ~0 under ``D``.

    Per level, with ``far``/``origin`` the count of the cell(s) holding the far/origin corner:
    ``far - (n if one cell holds both else 0)``, ``n - origin`` (0 if one cell holds both) and
    ``far - origin``.  The last feature is the minimum of those that grow by one from ``D``
    to ``D'`` under the pair's relation: with independent noise per cell its upper tail has
    likelihood ratio ``exp(sum of the budgets)``, the tight event for count mechanisms.

    ``key="noisy_count"`` reads the noisy counts of a fixed, data-independent set of cells
    (all released); ``key="count"`` reads the released counts of mechanisms that threshold
    or build their cells from the data: a corner in no listed cell counts 0, so whether an
    unreleased cell is listed in the diagnostics does not matter.
    """
    levels = out.diagnostics.get("levels") or [out.diagnostics["cells"]]
    values, growing = [], []
    for level in levels:
        lo, hi = np.asarray(level["lo"]), np.asarray(level["hi"])
        counts = np.asarray(level[key], dtype=float)
        holds_origin, holds_far = np.all(lo <= 0.0, axis=1), np.all(hi >= 1.0, axis=1)
        origin, far = float(counts[holds_origin].sum()), float(counts[holds_far].sum())
        same = bool(np.any(holds_origin & holds_far))
        values += [far - pair.n * same, 0.0 if same else pair.n - origin, far - origin]
        growing += [pair.relation == "add_remove" or not same, pair.relation == "replace" and not same, False]
    table = np.array(values)
    shifted = table[np.array(growing)]
    return np.append(table, shifted.min() if len(shifted) else 0.0)


#: ``cell_features`` on the released counts (kd_grid, kd_adaptive).
released_cells = functools.partial(cell_features, key="count")


def record_features(out: MechanismOutput, pair: NeighbourPair) -> np.ndarray:
    """The released coordinates of the changed record (row 0) and their minimum (per-record mechanisms)."""
    first = np.asarray(out.unit, dtype=float)[0]
    return np.append(first, first.min())
