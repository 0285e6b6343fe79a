r"""A throwaway mechanism for ``tests/test_new_mechanism.py``: one module and nothing else.

``throwaway_cells`` releases the ``2^d`` cell counts of the unit cube's halving grid with exact discrete Laplace
noise of scale ``Delta/epsilon`` (``Delta = 2`` under replace-one, ``1`` under add/remove: the Laplace mechanism
of Dwork, McSherry, Nissim, Smith, TCC 2006), clips them at 0 and draws rows uniformly in the cells.  It is loaded
as a pytest plugin (``-p throwaway_mechanism``) so that the registry-driven suites pick it up with no other edit.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from privsyn_core.data.grid import cell_boxes, cell_counts, released_grid_cells
from privsyn_core.mechanisms.base.audit import AuditCase, cell_features
from privsyn_core.mechanisms.base.rows import RowPlan
from privsyn_core.mechanisms.base.spec import ParamSpec, W1Claim, register_staged
from privsyn_core.mechanisms.base.stages import CellCounts, Stages, counts_ledger
from privsyn_core.privacy.accounting import Ledger
from privsyn_core.privacy.noise import discrete_laplace
from privsyn_core.privacy.sampling import largest_remainder
from privsyn_core.result import MechanismOutput

BINS = 2


def layout(n: int, d: int, epsilon: float, neighbouring: str, params: dict[str, Any]) -> int:
    """Two cells per axis, whatever the data."""
    return BINS


def ledger(epsilon: float, neighbouring: str, params: dict[str, Any], n: int | None, d: int) -> Ledger:
    """The privacy map: one stage, the cells' counts at the whole epsilon."""
    return counts_ledger("cell counts", epsilon, neighbouring)


def counts(unit: np.ndarray, k: int) -> CellCounts:
    """The cells' true counts (teaching diagnostics only)."""
    return CellCounts.from_dense(cell_counts(unit, k))


def release(true: CellCounts, n: int, d: int, epsilon: float, *, neighbouring: str, n_synthetic: int | None,
            rng: np.random.Generator, layout: int, params: dict[str, Any]) -> tuple[MechanismOutput, RowPlan]:
    """Noisy counts, clipped at zero, and a row plan drawn from them alone.

    The diagnostics hold the cells' boxes and noisy counts, which the audit's ``cell_features`` reads.
    """
    noise_rng, sample_rng = rng.spawn(2)
    sensitivity = 2 if neighbouring == "replace" else 1
    noisy = true.dense(layout ** d) + discrete_laplace(sensitivity / epsilon, (layout ** d,), noise_rng)
    released = np.clip(noisy, 0, None)
    if released.sum() == 0:
        released = np.ones_like(released)
    total = n_synthetic if n_synthetic is not None else (n if neighbouring == "replace" else int(released.sum()))
    lo, hi = cell_boxes(np.arange(layout ** d), layout, d)
    plan = RowPlan.from_counts(largest_remainder(released, total, sample_rng), lo, hi, sample=params["sample"],
                               rng=sample_rng)
    out = MechanismOutput(unit=(lo + hi) / 2, weights=released / released.sum(),
                          ledger=ledger(epsilon, neighbouring, params, n, d), params={"bins": layout},
                          diagnostics={"cells": {"lo": lo, "hi": hi, "noisy_count": noisy}})
    return out, plan


SPEC = register_staged(
    "throwaway_cells", Stages(layout=layout, count=counts, release=release),
    privacy_map=ledger,
    title="Throwaway: halving-grid counts", paper="test", data_kind="continuous",
    neighbouring=("replace", "add_remove"), is_private=True,
    params={"sample": ParamSpec("uniform", str, choices=("uniform", "center"), help="where rows go in a cell")},
    guarantee="epsilon-DP: discrete Laplace counts (scale 2/epsilon replace-one, 1/epsilon add/remove)",
    description="A test fixture.", citation="Dwork, McSherry, Nissim, Smith, TCC 2006 (the Laplace mechanism)",
    w1_claim=W1Claim("derived", "the flat grid's resolution 1/k against the noise mass k^d/(eps n), balanced at "
                                "k ~ (eps n)^(1/(d+1))"),
    rate=lambda epsilon, n, d: max(epsilon * n, 2.0) ** (-1 / (d + 1)),
    audit=AuditCase(params={"sample": "center"}, features=cell_features),
    released=("bins",),
    released_geometry=released_grid_cells("bins", "released weight"),
)
