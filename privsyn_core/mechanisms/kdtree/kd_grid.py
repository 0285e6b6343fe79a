r"""Data-independent binning with a threshold and implicit empty bins (seed 002, Algorithms 1, 4, 5).

Kreačić et al., "Differentially Private Synthetic Data Using KD-Trees", UAI 2023, Algorithm 1
(``DataIndependent(P, ε, t, w)``, Theorem 2) with the empty bins handled as in Algorithm 5 / Lemma 9.

1. The public cube is ``[0,1]^d`` (the schema's bounds, never the data's, which are not private),
   cut into ``k = ceil(1/w)`` bins per axis of width ``1/k`` (so the bins tile the cube exactly;
   the requested ``w`` is rounded down to ``1/k``).  A point goes to bin
   ``clip(floor(k x), 0, k-1)`` per axis, so ``x = 1.0`` is in the last bin.
2. Every bin count ``v_i`` gets noise ``Lap_Z(s/ε)``, ``s = 2`` under replace-one (one record
   leaves one bin and enters another: Theorem 2) and ``s = 1`` under add/remove.
3. Bins with noisy count ``ṽ_i < t`` (or ``<= 0``) are dropped; the others are released as
   weighted atoms (bin centre, ``ṽ_i``).
4. ``n_synthetic`` rows are drawn from the atoms (largest-remainder rounding), at the centres
   (``sample="center"``, the paper's output) or uniformly inside the bins (``"uniform"``).
   This is post-processing.

Floating-point safety: the paper adds continuous ``Lap(2/ε)`` to counts; here counts get the
exact discrete Laplace ``Lap_Z(2/ε)`` (same calibration, ε-DP exactly).  The empty bins' law is
then the discrete conditional one of :mod:`privsyn_core.mechanisms.kdtree.kd_empty` and Lemma 9's explicit /
implicit equivalence stays exact.

Defaults.  ``w``: the bins per axis ``k`` minimise Theorem 3's bound (t = 0, δ = 1/(n+1))

.. math:: \frac{8 J \log(1/δ)}{ε n - 4 J \log(1/δ)} + \frac{\sqrt d}{2 k σ \sqrt e},
          \qquad J = k^d < \frac{ε n}{4 \log(1/δ)},

where the second term is Lemma 16's rounding error for a Gaussian kernel of bandwidth ``σ``
(parameter ``bandwidth``, unit coordinates; the paper has σ = 1 on its own scale) and ``ε`` is
scaled by ``2/s`` under add/remove.  ``t``: ``b log J`` with noise scale ``b = s/ε``, so that the
expected number of emitted empty bins, ``K p^T/(1+p) <= J e^{-t/b}/2``, is at most 1/2 (the paper's
Theorem 5 choice ``(8/ε) log J`` is four times more conservative).  The bound alone picks one bin
(one repeated row) on wide tables, so the rule's ``k`` is raised to at least 2 and, where the threshold
leaves room, to 3-4 (:func:`structured_bins`, :mod:`privsyn_core.data.layout`); a coarse grid is warned about.
The automatic ``w`` reads
``n``, which is public under replace-one only: under add/remove it reads the public count
:func:`privsyn_core.synthesize` passes (``public_n``, or a noisy count released as its own ledger stage).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from privsyn_core.data.grid import cell_boxes, cell_ids, released_grid_cells
from privsyn_core.data.layout import BUDGET_HINT, affordable, coarse_warnings, structured
from privsyn_core.errors import ParameterError
from privsyn_core.mechanisms.base.audit import AuditCase, released_cells
from privsyn_core.mechanisms.base.rows import CubePlan, RowPlan
from privsyn_core.mechanisms.base.spec import ParamSpec, W1Claim, register_staged
from privsyn_core.mechanisms.base.stages import CellCounts, Stages, counts_ledger
from privsyn_core.mechanisms.kdtree.kd_empty import (
    KD_REFERENCE,
    MAX_ID_SPACE,
    integer_threshold,
    sample_empty_cells,
    tail_probability,
)
from privsyn_core.privacy.accounting import Ledger
from privsyn_core.privacy.noise import discrete_laplace
from privsyn_core.privacy.sampling import largest_remainder
from privsyn_core.privacy.sensitivity import count_sensitivity
from privsyn_core.result import MechanismOutput

#: Largest expected number of emitted empty bins before the mechanism refuses (Algorithm 5 emits them all).
MAX_EMITTED_EMPTY = 1e7
_MAX_AUTO_BINS = 4096


def grid_layout(n: int, d: int, epsilon: float, neighbouring: str, params: dict[str, Any]) -> int:
    """Bins per axis ``k``: ``ceil(1/w)`` or Theorem 3's rule (reads ``n``); at most 2^62 bins."""
    sensitivity = count_sensitivity(neighbouring)
    w = params["w"]
    k = math.ceil(1.0 / w - 1e-9) if w is not None else structured_bins(n, d, epsilon * 2 / sensitivity,
                                                                         params["bandwidth"])
    if k ** d > MAX_ID_SPACE:
        raise ParameterError(f"{k} bins per axis in d={d} make {k ** d:.3g} bins (limit 2^62); use a larger w")
    return k


def grid_counts(unit: np.ndarray, k: int) -> CellCounts:
    """Sparse counts of the non-empty bins (sorted row-major ids)."""
    return CellCounts.from_ids(cell_ids(unit, k))


def grid_release(counts: CellCounts, n: int, d: int, epsilon: float, *, neighbouring: str, n_synthetic: int | None,
                 rng: np.random.Generator, layout: int, params: dict[str, Any]) -> tuple[MechanismOutput, RowPlan]:
    """Steps 2-4 of the module docstring from the non-empty bins' counts."""
    k, w, t, sample = layout, params["w"], params["t"], params["sample"]
    sensitivity = count_sensitivity(neighbouring)
    scale = sensitivity / epsilon
    n_cells = k ** d
    t = scale * math.log(n_cells) if t is None else t
    threshold = integer_threshold(t)
    noise_rng, empty_rng, sample_rng = rng.spawn(3)

    ids, true_count = counts.ids, counts.counts
    noisy_count = true_count + discrete_laplace(scale, len(ids), noise_rng)
    kept = noisy_count >= threshold
    empty_ids, empty_weights = sample_empty_cells(n_cells, ids, threshold, scale, empty_rng, MAX_EMITTED_EMPTY)

    atom_ids = np.concatenate([ids[kept], empty_ids])
    order = np.argsort(atom_ids)  # canonical order: the release must not tell data bins from empty ones
    atom_ids = atom_ids[order]
    weights = np.concatenate([noisy_count[kept], empty_weights]).astype(float)[order]
    lo, hi = cell_boxes(atom_ids, k, d)
    plan, warnings = weighted_plan((lo + hi) / 2, weights, lo, hi, sample=sample,
                                   n_rows=default_rows(n_synthetic, n, neighbouring, weights), rng=sample_rng)
    cell_lo, cell_hi = cell_boxes(np.concatenate([ids, empty_ids]), k, d)
    out = MechanismOutput(
        unit=(lo + hi) / 2, weights=weights,
        ledger=grid_ledger(epsilon, neighbouring, params, n, d),
        diagnostics={
            "cells": {"lo": cell_lo, "hi": cell_hi,
                      "true_count": np.concatenate([true_count, np.zeros(len(empty_ids), dtype=np.int64)]),
                      "noisy_count": np.concatenate([noisy_count, empty_weights]),
                      "count": np.concatenate([np.where(kept, noisy_count, 0), empty_weights])},
            "unlisted_empty_cells": n_cells - len(ids) - len(empty_ids),
            "expected_empty_emitted": (n_cells - len(ids)) * tail_probability(threshold, scale),
        },
        params={"w": 1.0 / k, "bins_per_axis": k, "cells": n_cells, "t": t, "threshold": threshold,
                "noise_scale": scale},
        warnings=coarse_warnings([k] * d, "kd_grid", BUDGET_HINT if w is None else "use a smaller w")
        + warnings)
    return out, plan


def auto_bins(n: int, d: int, epsilon: float, bandwidth: float) -> int:
    """Bins per axis minimising Theorem 3's bound (module docstring) for replace-one budget ``epsilon``."""
    log_inv_delta = math.log(n + 1)
    k = np.arange(1, _MAX_AUTO_BINS + 1, dtype=float)
    cells = k ** d
    slack = epsilon * n - 4 * cells * log_inv_delta
    bound = np.where(slack > 0, 8 * cells * log_inv_delta / np.where(slack > 0, slack, 1.0), np.inf)
    bound = bound + math.sqrt(d) / (2 * k * bandwidth * math.sqrt(math.e))
    return int(k[np.argmin(bound)]) if np.isfinite(bound).any() else 1


def structured_bins(n: int, d: int, epsilon: float, bandwidth: float) -> int:
    """The automatic bins per axis: Theorem 3's rule, raised to what the threshold leaves room for.

    :func:`privsyn_core.data.layout.structured` with ``k_afford`` the largest ``k`` whose default threshold
    ``t(k) = (2/epsilon) log(k^d)`` (replace-one budget ``epsilon``) lets ``k`` released cells hold at most
    a quarter of the ``n`` records, ``k t(k) <= n/4``: the paper's rule is 1 on wide tables, one cell and no
    structure.  At least 2 bins per axis (warned about in :func:`grid_release`).
    """
    def room(k: int) -> bool:
        return k * (2.0 / epsilon) * d * math.log(k) <= n / 4
    return structured(auto_bins(n, d, epsilon, bandwidth), affordable(room, d), d)


def default_rows(n_synthetic: int | None, n: int, neighbouring: str, weights: np.ndarray) -> int:
    """``n_synthetic``, else ``n`` (public under replace-one), else the released total (at least 1)."""
    if n_synthetic is not None:
        return n_synthetic
    return n if neighbouring == "replace" else max(1, round(float(weights.sum())))


def weighted_plan(centres: np.ndarray, weights: np.ndarray, lo: np.ndarray, hi: np.ndarray, *, sample: str,
                  n_rows: int, rng: np.random.Generator) -> tuple[RowPlan, list[str]]:
    """The row plan of the released atoms: largest-remainder counts, at the centres or uniform in the bins."""
    if len(weights) == 0:
        plan = CubePlan(np.array([n_rows], dtype=np.int64), np.zeros((1, centres.shape[1])), rng)
        return plan, ["every noisy count was below the threshold: nothing was released, rows are uniform on the cube"]
    return RowPlan.from_counts(largest_remainder(weights, n_rows, rng), lo, hi, sample=sample, rng=rng), []


def grid_ledger(epsilon: float, neighbouring: str, params: dict[str, Any], n: int | None, d: int) -> Ledger:
    """The privacy map: one stage, every bin's count (empty bins included) at the whole ``epsilon`` (Alg 4)."""
    return counts_ledger("bin counts", epsilon, neighbouring)


STAGES = Stages(layout=grid_layout, count=grid_counts, release=grid_release)
SPEC = register_staged(
    "kd_grid", STAGES,
    privacy_map=grid_ledger,
    title="KD-tree paper: data-independent binning",
    paper="002, Alg 1, 4-5",
    data_kind="continuous",
    neighbouring=("replace", "add_remove"),
    is_private=True,
    params={
        "w": ParamSpec(None, float, (1e-6, 1.0), help="bin width in unit coordinates (rounded down to 1/ceil(1/w)); "
                                                       "auto: minimises the Theorem 3 bound"),
        "t": ParamSpec(None, float, help="filtering threshold on noisy counts; auto: (noise scale) * log(#bins)"),
        "sample": ParamSpec("uniform", str, choices=("uniform", "center"),
                            help="rows uniform in their bin (default) or at its centre (the paper's output)"),
        "bandwidth": ParamSpec(0.1, float, (1e-6, 10.0),
                               help="kernel bandwidth (unit coordinates) the automatic w is tuned for"),
    },
    guarantee="epsilon-DP: discrete Laplace bin counts of scale 2/epsilon (replace-one) or 1/epsilon (add/remove), "
              "empty bins included (sampled implicitly, exactly)",
    description="Counts on a regular grid plus noise, keeping only bins whose noisy count clears a threshold; "
                "empty bins that pass are sampled without enumerating them.",
    citation=f"{KD_REFERENCE}, Alg 1, 4-5",
    order=50,
    w1_claim=W1Claim("measured", "Kreačić et al.'s Thm 3, 5 and 6 bound the sup-norm gap between kernel "
                                 "densities (Gaussian kernel), not W1; Thm 6, for Gaussian data, gives O((eps "
                                 "n)^(-1/3))"),
    released_geometry=released_grid_cells("bins_per_axis", "released weight"),
    audit=AuditCase(params={"w": 0.5}, features=released_cells),
    released=("w", "bins_per_axis", "cells", "t", "threshold", "noise_scale"),
    uses_n=lambda params: params["w"] is None,
)
