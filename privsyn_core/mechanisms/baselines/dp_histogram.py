r"""Baseline: a flat DP histogram on an equal-cube grid.

The ``k^d`` cell counts get exact discrete Laplace noise ``Lap_Z(2/epsilon)`` under
replace-one (one record leaves one cell and enters another: :math:`\ell_1` sensitivity 2)
or ``Lap_Z(1/epsilon)`` under add/remove (sensitivity 1).  Negative counts are clipped
to 0 and the counts normalised; synthetic rows are drawn uniformly inside the cells by
largest-remainder rounding.  Clipping, normalising and sampling are post-processing.

The W1 error is about ``k^{-1} + k^d/(epsilon n)`` up to constants (resolution plus the
noise mass of ``k^d`` cells); the automatic ``k = (epsilon n)^{1/(d+1)}`` balances the two
terms, for an error of order ``(epsilon n)^{-1/(d+1)}``.  Every empty cell gets noise, so in
high dimension the noise dominates.  On wide tables the rule gives ``k = 1`` (rows uniform on the box),
so the automatic ``k`` is at least 2, and 3-4 where the grid's noise mass stays below ``n``
(:func:`structured_bins`); a coarse grid is warned about.
``k`` chosen from ``n`` reads the exact ``n`` only under replace-one, where it is public;
under add/remove it reads the public count :func:`privsyn_core.synthesize` passes (``public_n``, or a noisy
count released as its own ledger stage).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from privsyn_core.data.grid import cell_boxes, cell_counts, largest_per_axis, released_grid_cells
from privsyn_core.data.layout import BUDGET_HINT, affordable_noise_mass, coarse_warnings, structured
from privsyn_core.errors import ParameterError
from privsyn_core.mechanisms.base.audit import AuditCase, cell_features
from privsyn_core.mechanisms.base.rows import RowPlan
from privsyn_core.mechanisms.base.spec import ParamSpec, W1Claim, register_staged
from privsyn_core.mechanisms.base.stages import CellCounts, Stages, counts_ledger
from privsyn_core.privacy.accounting import Ledger
from privsyn_core.privacy.noise import discrete_laplace
from privsyn_core.privacy.sampling import largest_remainder
from privsyn_core.privacy.sensitivity import count_sensitivity
from privsyn_core.result import MechanismOutput

MAX_CELLS = 2_000_000


def histogram_layout(n: int, d: int, epsilon: float, neighbouring: str, params: dict[str, Any]) -> int:
    """Bins per axis ``k`` (checked against :data:`MAX_CELLS`)."""
    k = params["bins"]
    if k is None:
        k = structured_bins(n, d, epsilon, count_sensitivity(neighbouring))
    if k ** d > MAX_CELLS:
        raise ParameterError(f"dp_histogram with {k} bins per axis in d={d} has {k ** d:.3g} cells "
                             f"(limit {MAX_CELLS:.0e}); use fewer bins")
    return k


def histogram_counts(unit: np.ndarray, k: int) -> CellCounts:
    """Sparse counts of the ``k^d`` cells (row-major ids)."""
    return CellCounts.from_dense(cell_counts(unit, k))


def histogram_release(counts: CellCounts, n: int, d: int, epsilon: float, *, neighbouring: str,
                      n_synthetic: int | None, rng: np.random.Generator, layout: int,
                      params: dict[str, Any]) -> tuple[MechanismOutput, RowPlan]:
    """Noisy counts, clipping, normalising and the row plan (a function of the counts only)."""
    k = layout
    noise_rng, sample_rng = rng.spawn(2)
    sensitivity = count_sensitivity(neighbouring)
    true_count = counts.dense(k ** d)
    noisy_count = true_count + discrete_laplace(sensitivity / epsilon, true_count.shape, noise_rng)
    released = np.clip(noisy_count, 0, None)
    warnings = coarse_warnings([k] * d, "dp_histogram", BUDGET_HINT if params["bins"] is None else "use more bins")
    if released.sum() == 0:
        released = np.ones_like(released)
        warnings.append("every noisy count was <= 0: released the uniform distribution over the grid")
    public_total = n if neighbouring == "replace" else max(1, int(released.sum()))  # n is public under replace
    total = n_synthetic if n_synthetic is not None else public_total
    lo, hi = cell_boxes(np.arange(k ** d), k, d)
    row_counts = largest_remainder(released, total, sample_rng)
    plan = RowPlan.from_counts(row_counts, lo, hi, sample=params["sample"], rng=sample_rng)
    centres = (lo + hi) / 2
    keep = released > 0
    out = MechanismOutput(
        unit=centres[keep], weights=released[keep] / released.sum(),
        ledger=histogram_ledger(epsilon, neighbouring, params, n, d),
        diagnostics={"cells": {"lo": lo, "hi": hi, "true_count": true_count, "noisy_count": noisy_count,
                               "count": row_counts}},
        params={"bins": k, "cells": k ** d}, warnings=warnings)
    return out, plan


def structured_bins(n: int, d: int, epsilon: float, sensitivity: int) -> int:
    """The automatic bins per axis: :func:`auto_bins` raised to at least 2, and to 3-4 where the noise mass
    ``k^d sensitivity/epsilon`` of the grid stays below ``n`` (:mod:`privsyn_core.data.layout`), within
    :data:`MAX_CELLS` (at ``d >= 21`` even 2 per axis exceeds it: then 1, warned about)."""
    k = structured(auto_bins(n, d, epsilon), affordable_noise_mass(n, d, epsilon, sensitivity), d)
    while k > 1 and k ** d > MAX_CELLS:
        k -= 1
    return k


def auto_bins(n: int, d: int, epsilon: float) -> int:
    """``floor((epsilon n)^{1/(d+1)})``, at least 1, capped so ``k^d <= 10^6`` (module docstring)."""
    k = max(1, int(np.floor((epsilon * n) ** (1.0 / (d + 1)) + 1e-9)))
    return min(k, max(1, int(np.floor(1e6 ** (1.0 / d) + 1e-9))))


def histogram_ledger(epsilon: float, neighbouring: str, params: dict[str, Any], n: int | None, d: int) -> Ledger:
    """The privacy map: one stage, the grid's cell counts at the whole ``epsilon``."""
    return counts_ledger("cell counts", epsilon, neighbouring)


STAGES = Stages(layout=histogram_layout, count=histogram_counts, release=histogram_release)
SPEC = register_staged(
    "dp_histogram", STAGES,
    privacy_map=histogram_ledger,
    title="Flat DP histogram (baseline)",
    paper="baseline",
    data_kind="continuous",
    neighbouring=("replace", "add_remove"),
    is_private=True,
    params={
        "bins": ParamSpec(None, int, (1, 4096),
                          help="cells per axis; auto: floor((epsilon n)^(1/(d+1))), at most 10^6 cells",
                          limit=lambda d: (min(4096, largest_per_axis(MAX_CELLS, d)),
                                           f"at most {MAX_CELLS:.0e} cells")),
        "sample": ParamSpec("uniform", str, choices=("uniform", "center"), help="where rows go inside a cell"),
    },
    guarantee="epsilon-DP: discrete Laplace counts (scale 2/epsilon replace-one, 1/epsilon add/remove)",
    description="Counts on a regular grid plus noise: simple, but every empty cell gets noise too.",
    citation="a textbook baseline: a noisy flat histogram",
    order=100,
    w1_claim=W1Claim("derived", "derived in the module docstring: the resolution 1/k plus the noise mass k^d/(eps "
                                "n), O((eps n)^(-1/(d+1))) at k = (eps n)^(1/(d+1))"),
    released_geometry=released_grid_cells("bins", "released probability"),
    rate=lambda epsilon, n, d: max(epsilon * n, 2.0) ** (-1 / (d + 1)),
    audit=AuditCase(params={"bins": 2, "sample": "center"}, features=cell_features),
    released=("bins", "cells"),
    uses_n=lambda params: params["bins"] is None,
)
