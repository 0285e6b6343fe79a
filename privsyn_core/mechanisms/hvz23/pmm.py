r"""PMM, the Private Measure Mechanism ([HVZ23] Algorithms 3-4, Theorems 4.1-4.3, Cor. 4.4).

1. Partition ``[0,1]^d`` by a binary hierarchy of depth ``r``: level ``j`` cuts axis
   ``j mod d`` through the middle (:mod:`privsyn_core.mechanisms.hvz23.pmm_tree`).
2. Count the records in every cell of every level (all levels from the leaf counts, so
   the true counts are exactly consistent).
3. Add exact discrete Laplace noise ``Lap_Z(sigma_j)`` to every count of level ``j`` and
   clamp at 0: ``n'_theta = (n_theta + lambda_theta)_+``.
4. Make the counts consistent from the top down (Algorithm 3, rule ``consistency``).
5. Put ``m_theta`` points in every leaf, uniformly (``sample="uniform"``) or at its
   centre (``"center"``).

Privacy.  Under add/remove (the paper's relation, Thm 4.1) the counts of each level
change in one cell by 1, so the mechanism is ``sum_j 1/sigma_j``-DP; the scales (A.4)
make this exactly epsilon.  Under replace-one ``n`` is public: the root is released
without noise and levels ``1..r`` have sensitivity 2 (Thm 4.1's argument with two changed cells per level).
The output size is exactly ``n`` under replace-one.  Under add/remove it is ``(n + lambda_root)_+`` after
consistency, or, when the pipeline released a noisy record count as well, the inverse-variance weighted
combination of the two (:func:`row_count`; the rule and the weights are in the released params).
Clamping, consistency, sampling and the ``n_synthetic`` rescaling are post-processing.

The depth rules ``"paper"`` and ``"bound_opt"`` read the record count.  Under add/remove ``n`` is
private, so they read the public count :func:`privsyn_core.synthesize` passes: the caller's
``public_n`` or a noisy count released as its own ledger stage (:mod:`privsyn_core.engine.pipeline`); an
explicit integer depth reads no count and costs nothing extra.

Accuracy.  ``E W1 <= 2 sqrt(2) S^2/(epsilon n) + 2^{-floor(r/d)}`` in the
:math:`\ell_\infty` metric (Thm 4.3 with the constant corrected by substituting (A.4) into Thm 4.2), which is
``~ log^2(epsilon n)/(epsilon n)`` for ``d = 1`` and ``~ (epsilon n)^{-1/d}`` for
``d >= 2`` with the paper's depth.

References
----------
.. [HVZ23] Y. He, R. Vershynin, Y. Zhu, "Algorithmically Effective Differentially
   Private Synthetic Data", COLT 2023 (seed 004).
"""

from __future__ import annotations

import math
import time
from typing import Any

import numpy as np

from privsyn_core.data.grid import RELEASED_MAX_CELLS
from privsyn_core.data.layout import coarse_warnings
from privsyn_core.errors import DataError, ResourceError
from privsyn_core.mechanisms.base.audit import AuditCase, cell_features
from privsyn_core.mechanisms.base.resources import budget_bytes
from privsyn_core.mechanisms.base.spec import ParamSpec, W1Claim, register_staged
from privsyn_core.mechanisms.base.stages import SIZE_VARIANCE, CellCounts, Stages
from privsyn_core.mechanisms.hvz23.leaf_rows import LeafPlan
from privsyn_core.mechanisms.hvz23.pmm_tree import (
    HVZ23_REFERENCE,
    MAX_DEPTH,
    HeapTree,
    NoisePlan,
    accuracy_bound,
    bound_opt_depth,
    consistency_in_place,
    cuts_per_axis,
    fill_upper_levels,
    leaf_counts,
    level_boxes,
    level_diameter,
    level_of,
    noise_plan,
    paper_depth,
    sparse_leaf_counts,
)
from privsyn_core.privacy.accounting import Ledger
from privsyn_core.privacy.noise import discrete_laplace_variance, fill_discrete_laplace
from privsyn_core.privacy.sampling import largest_remainder
from privsyn_core.result import MechanismOutput

#: Levels with more cells than this are left out of ``diagnostics`` (a figure cannot show them anyway).
DIAGNOSTIC_MAX_CELLS = 2 ** 18
#: PMM's bytes per leaf of its tree: the peak memory of a run over its ``2^r`` leaves, every level's counts, noise
#: and consistent counts included (``benchmarks/bench_pmm.py`` measures it).
PMM_BYTES_PER_LEAF = 96


def max_pmm_depth() -> int:
    """The deepest PMM tree whose counts fit the memory budget (``2^r`` leaves at :data:`PMM_BYTES_PER_LEAF`,
    :func:`~privsyn_core.mechanisms.base.resources.budget_bytes`)."""
    return max(0, math.floor(math.log2(budget_bytes() / PMM_BYTES_PER_LEAF)))


def pmm_depth_limit(d: int) -> tuple[int, str]:
    """``ParamSpec.limit`` of a PMM depth: :func:`max_pmm_depth`, whatever the number of columns ``d``."""
    return max_pmm_depth(), (f"2^depth leaves at {PMM_BYTES_PER_LEAF} bytes each within the memory budget of "
                             f"{budget_bytes() / 2**20:,.0f} MB (PRIVSYN_MEMORY_BUDGET_MB)")


def pmm_layout(n: int, d: int, epsilon: float, neighbouring: str,
               params: dict[str, Any]) -> tuple[int, tuple[str, ...]]:
    """Tree depth ``r`` (:func:`resolve_depth`) and its warnings."""
    r, warnings = resolve_depth(params["depth"], n, epsilon, d, neighbouring)
    return r, tuple(warnings)


def pmm_ledger(epsilon: float, neighbouring: str, params: dict[str, Any], n: int | None, d: int) -> Ledger:
    """PMM's privacy map: the ledger of :func:`~privsyn_core.mechanisms.hvz23.pmm_tree.noise_plan` (one stage per
    noisy level) at the depth of the stages' layout (:func:`pmm_layout`), both functions of public inputs only;
    :func:`pmm_release` spends that noise plan."""
    return noise_plan(STAGES.layout(n, d, epsilon, neighbouring, params)[0], d, epsilon, neighbouring).ledger


def pmm_counts(unit: np.ndarray, layout: tuple[int, tuple[str, ...]]) -> CellCounts:
    """Counts of the ``2^r`` leaves in heap order: dense, or sparse when ``2^r`` exceeds the rows."""
    r = layout[0]
    if 2 ** r > len(unit):
        return CellCounts(*sparse_leaf_counts(unit, r))
    return CellCounts.from_dense(leaf_counts(unit, r))


def pmm_release(counts: CellCounts, n: int, d: int, epsilon: float, *, neighbouring: str, n_synthetic: int | None,
                rng: np.random.Generator, layout: tuple[int, tuple[str, ...]],
                params: dict[str, Any]) -> tuple[MechanismOutput, LeafPlan]:
    """Steps 2-5 of the module docstring from the leaf counts: noise, consistency, the leaf row plan.

    Memory: one int64 heap-layout tree (:class:`HeapTree`, ``2^(r+1)`` entries, the leaves being the
    counts' own dense array) holds the true counts, then (in place, level by level) the clamped noisy
    counts, then the consistent counts; noise and consistency use scratch buffers of a fixed size.
    Copies are kept only of the levels shown in ``diagnostics``.
    """
    r, warnings = layout[0], list(layout[1])
    depth, sample = params["depth"], params["sample"]
    plan = noise_plan(r, d, epsilon, neighbouring)
    noise_rng, consistency_rng, sample_rng = rng.spawn(3)
    shown = min(r, int(np.log2(DIAGNOSTIC_MAX_CELLS)))
    timings: dict[str, float] = {}

    start = time.perf_counter()
    tree = HeapTree.allocate(r, counts.take_dense(2 ** r))
    fill_upper_levels(tree, r)
    true = [level_of(tree, j).copy() for j in range(shown + 1)]
    timings["tree"] = time.perf_counter() - start

    start = time.perf_counter()
    lambdas = add_level_noise(tree, plan, noise_rng, keep=shown)
    noisy = [level_of(tree, j).copy() for j in range(shown + 1)]
    timings["noise"] = time.perf_counter() - start

    start = time.perf_counter()
    consistency_in_place(tree, r, params["consistency"], consistency_rng)
    released = level_of(tree, r)
    size, rule, weights = row_count(n_synthetic, n, params.get(SIZE_VARIANCE), int(true[0][0] + lambdas[0][0]),
                                    float(plan.sigmas[0]))
    if size is not None and level_of(tree, 0)[0] > 0:  # the consistent leaves sum to the root count
        released = largest_remainder(released, size, sample_rng)
    timings["consistency"] = time.perf_counter() - start
    consistent = [level_of(tree, j).copy() for j in range(shown + 1)]

    rows = leaf_plan(released, r, d, sample, sample_rng)
    if rows.total == 0:
        warnings.append("the noisy total count was 0: PMM released no synthetic rows (W1 is undefined)")

    start = time.perf_counter()
    diagnostics = _diagnostics(r, true, noisy, consistent, released, lambdas, plan, d)
    timings["diagnostics"] = time.perf_counter() - start
    params = {"depth": r, "depth_rule": depth if isinstance(depth, str) else "explicit", "leaves": 2 ** r,
              "resolution": level_diameter(r, d), "synthetic_size": rows.total, "row_count_rule": rule}
    if weights is not None:
        params["row_count_weights"] = weights
    if n is not None:  # the bound reads the public count; without one it is not computed
        params["accuracy_bound"] = accuracy_bound(n, epsilon, d, r, neighbouring)
    out = MechanismOutput(unit=np.empty((0, d)), ledger=plan.ledger, diagnostics=diagnostics, params=params,
                          timings=timings, warnings=warnings)
    return out, rows


def row_count(n_synthetic: int | None, n: int | None, size_variance: float | None, root: int,
              root_sigma: float) -> tuple[int | None, str, dict[str, float] | None]:
    r"""The number of synthetic rows when it is not the consistent root count: ``(rows or None, rule, weights)``.

    * ``n_synthetic`` given: that many rows (rule ``"n_synthetic"``);
    * replace-one (``root_sigma = inf``): the root count is ``n`` itself, released without noise (``"n"``);
    * add/remove with a noisy record count ``n`` of the pipeline (its noise variance ``size_variance``, public):
      two independent unbiased estimates of the true ``n`` are released, ``n~`` and the root count
      ``n + lambda_root`` (before clamping at 0; ``lambda_root ~ Lap_Z(root_sigma)``).  Their best unbiased linear
      combination weighs each by the inverse of its variance (both public,
      :func:`~privsyn_core.privacy.noise.discrete_laplace_variance`):

      .. math:: \hat n = \frac{n~ / V_n + (n + \lambda) / V_\lambda}{1 / V_n + 1 / V_\lambda}, \qquad
                \operatorname{Var} \hat n = \frac{1}{1 / V_n + 1 / V_\lambda},

      rounded to the nearest integer, at least 0 (rule ``"inverse_variance"``, weights released).  ``n~`` is
      clamped at 1 by the pipeline, so the combination is unbiased while ``n + Z >= 1`` (for ``n`` beyond a few
      noise scales, always in practice).  Post-processing of two epsilon-DP releases: no privacy cost.
    * otherwise (add/remove, no noisy count: an explicit depth reads none, a declared ``public_n`` has no
      known error): the consistent root count (``"root"``), as [HVZ23] Algorithm 4 releases it.

    A tree whose consistent root count is 0 has no leaf to put rows in and releases none whatever the rule.
    """
    if n_synthetic is not None:
        return n_synthetic, "n_synthetic", None
    if not math.isfinite(root_sigma):
        return None, "n", None
    if size_variance is None or n is None:
        return None, "root", None
    root_variance = discrete_laplace_variance(root_sigma)
    weight_n = root_variance / (root_variance + size_variance)
    estimate = weight_n * n + (1.0 - weight_n) * root
    return max(0, round(estimate)), "inverse_variance", {"noisy_n": weight_n, "root": 1.0 - weight_n}


def w1_rate(epsilon: float, n: int, d: int) -> float:
    """Shape of the expected-W1 bound ([HVZ23] Cor. 4.4): ``log^2(en)/(en)`` for d = 1, ``(en)^(-1/d)`` for d >= 2."""
    en = max(epsilon * n, 2.0)
    return math.log(en) ** 2 / en if d == 1 else en ** (-1 / d)


def resolve_depth(depth: int | str, n: int, epsilon: float, d: int, neighbouring: str) -> tuple[int, list[str]]:
    """The tree depth ``r`` for a depth rule, capped at :data:`MAX_DEPTH`, and the layout's warnings.

    ``"bound_opt"`` minimises :func:`~privsyn_core.mechanisms.hvz23.pmm_tree.accuracy_bound`; where even that minimum is
    vacuous (at least the cube's l-infinity diameter 1: every depth below ``d`` leaves an axis
    uncut, so the resolution term alone is 1) it falls back to the paper's depth (Cor. 4.4) and warns.
    A depth that leaves columns uncut or with two cells is warned about (:mod:`privsyn_core.data.layout`);
    the depth is not raised: on a small wide table a tree deep enough to cut every axis spends the budget on
    cells too small to hold a count, and its 2-way marginals are worse than the paper's depth's.
    """
    warnings: list[str] = []
    if depth == "paper":
        r = paper_depth(n, epsilon, d)
    elif depth == "bound_opt":
        r = bound_opt_depth(n, epsilon, d, neighbouring)
        bound = accuracy_bound(n, epsilon, d, r, neighbouring)
        if bound >= 1.0:
            r_paper = paper_depth(n, epsilon, d)
            warnings.append(f"pmm: the W1 bound is vacuous at every depth (its minimum {bound:.3g} is at least the "
                            f"cube's diameter 1), so depth='bound_opt' fell back to the paper's depth {r_paper}")
            r = r_paper
    else:
        r = int(depth)
    cap = min(MAX_DEPTH, max_pmm_depth())
    if r > cap and depth not in ("paper", "bound_opt"):
        raise ResourceError(f"PMM depth {r} needs about {PMM_BYTES_PER_LEAF * 2 ** r / 2**30:.1f} GB, over the memory "
                            f"budget: use depth <= {cap} or raise PRIVSYN_MEMORY_BUDGET_MB")
    if r > cap:
        warnings.append(f"PMM depth {r} capped at {cap}: 2^(r+1) counts must fit the memory budget "
                        "(PRIVSYN_MEMORY_BUDGET_MB)")
        r = cap
    hint = "the budget (epsilon * n) pays for a tree this shallow only: raise epsilon or use fewer columns"
    return r, warnings + coarse_warnings((2 ** cuts_per_axis(r, d)).tolist(), "pmm", hint)


def add_level_noise(tree: HeapTree, plan: NoisePlan, rng: np.random.Generator, keep: int) -> list[np.ndarray]:
    """``n'_theta = (n_theta + lambda_theta)_+`` on every level of a heap-layout tree, in place.

    Levels are drawn in order ``0..r`` from ``rng`` (no draw where ``sigma = inf``); the noise of
    levels ``0..keep`` is returned (for ``diagnostics``), deeper levels get it added and are clamped chunk by
    chunk.
    """
    kept = []
    for j, sigma in enumerate(plan.sigmas):
        level = level_of(tree, j)
        if j <= keep:
            lam = np.zeros(len(level), dtype=np.int64)
            if np.isfinite(sigma):
                fill_discrete_laplace(lam, float(sigma), rng)
            level += lam
            kept.append(lam)
            np.maximum(level, 0, out=level)
        else:  # sigma is finite below the root; noise and clamping in one pass over the level
            fill_discrete_laplace(level, float(sigma), rng, add=True, clip_at_zero=True)
    return kept


def leaf_plan(counts: np.ndarray, r: int, d: int, how: str, rng: np.random.Generator) -> LeafPlan:
    """The rows of the leaves: ``counts[t]`` points in leaf ``t``, uniform inside it or at its centre.

    The rows of a block come in a uniformly random order: its leaf labels (``counts[t]`` copies of ``t``) are
    shuffled and each row is drawn in its label's leaf (:meth:`LeafPlan.rows`), so that a row's number tells nothing
    about its leaf (rows grouped by leaf would correlate with the first column).  The plan holds
    the dense leaf counts and finds the leaves' corners from tables of a few thousand entries (no per-leaf table).
    """
    side = 2.0 ** -cuts_per_axis(r, d).astype(float)
    return LeafPlan(counts, np.empty((0, d)), rng, side=side, uniform=how == "uniform", depth=r)


def _checked_unit(unit: Any) -> np.ndarray:
    """The data as an ``(n, d)`` float array clipped into ``[0,1]^d``; NaN or no rows is a DataError."""
    unit = np.asarray(unit, dtype=float)
    if unit.ndim != 2 or unit.shape[1] == 0:
        raise DataError(f"PMM needs an (n, d) array of points with d >= 1, got shape {unit.shape}")
    if len(unit) == 0:
        raise DataError("PMM needs at least one record; the table is empty")
    low, high = unit.min(), unit.max()
    if np.isnan(low):
        raise DataError("the data contain NaN; drop or impute those rows first")
    return np.clip(unit, 0.0, 1.0) if low < 0 or high > 1 else unit


STAGES = Stages(layout=pmm_layout, count=pmm_counts, release=pmm_release, prepare=_checked_unit, rows_as_unit=True)
def released_tree(release) -> dict | None:
    """PMM's ``released_geometry``: the public binary tree of depth ``r = params["depth"]`` ([HVZ23] Alg. 3: level
    ``j`` halves axis ``j mod d``), each cell valued by the number of released rows in it, so the released
    (consistent) counts of every level ``j <= r`` are recomputed from the rows alone (levels above
    :data:`~privsyn_core.data.grid.RELEASED_MAX_CELLS` cells are left out)."""
    unit = np.asarray(release.unit, dtype=float)
    depth = release.params.get("depth")
    if unit.ndim != 2 or not len(unit) or not isinstance(depth, (int, np.integer)):
        return None
    levels = []
    for j in range(int(depth) + 1):
        if 2 ** j > RELEASED_MAX_CELLS:
            break
        lo, hi = level_boxes(j, unit.shape[1])
        levels.append({"lo": lo, "hi": hi, "count": leaf_counts(unit, j).astype(float)})
    return {"cells": levels[-1], "levels": levels, "value": "released rows"}


SPEC = register_staged(
    "pmm", STAGES,
    privacy_map=pmm_ledger,
    title="Private Measure Mechanism (PMM)",
    paper="004, Alg 3-4",
    data_kind="continuous",
    neighbouring=("add_remove", "replace"),
    is_private=True,
    params={
        "depth": ParamSpec("paper", int, (0, MAX_DEPTH), choices=("paper", "bound_opt"),
                           help="tree depth r: 'paper' = floor(log2(eps n)) (minus 1 if d = 1), 'bound_opt' = "
                                "minimiser of the W1 bound, or an integer (does not read n)",
                           limit=pmm_depth_limit),
        "consistency": ParamSpec("proportional", str, choices=("proportional", "uniform"),
                                 help="how a parent's count is split between noisy children (Algorithm 3)"),
        "sample": ParamSpec("uniform", str, choices=("uniform", "center"),
                            help="where the points of a leaf go: uniformly inside it, or at its centre"),
    },
    guarantee="epsilon-DP: discrete Laplace counts on every level of a binary partition, sum_j 1/sigma_j = epsilon "
              "(add/remove; replace-one: no root noise, sensitivity 2); under add/remove the depth rules read public_n "
              "or a noisy record count (its own ledger stage)",
    description="Noisy counts on a binary tree of boxes, made consistent top-down, then points drawn in the leaves. "
                "W1 error about (eps n)^(-1/d), in time linear in n.",
    citation=f"{HVZ23_REFERENCE}, Alg 3-4",
    released_geometry=released_tree,
    order=10,
    w1_claim=W1Claim("theorem", f"{HVZ23_REFERENCE}, Thm 4.2-4.3, Cor 4.4: E W1 <= C (eps n)^(-1/d) for d >= 2, C "
                                "log^2(eps n) / (eps n) for d = 1 (the depth and noise levels (A.4) of the paper)"),
    rate=w1_rate,
    audit=AuditCase(params={"depth": 2, "sample": "center"}, features=cell_features),
    released=("depth", "depth_rule", "leaves", "resolution", "accuracy_bound", "row_count_rule", "row_count_weights"),
    uses_n=lambda params: isinstance(params["depth"], str),
)


def _diagnostics(r: int, true: list[np.ndarray], noisy: list[np.ndarray], consistent: list[np.ndarray],
                 released: np.ndarray, lambdas: list[np.ndarray], plan: NoisePlan, d: int) -> dict[str, Any]:
    """``levels`` (0..r), ``cells`` (the leaves) and ``noise``, per ``docs/diagnostics.md``.

    Levels with more than :data:`DIAGNOSTIC_MAX_CELLS` cells are left out
    (``levels_truncated`` is then True and ``cells`` is absent).
    """
    shown = len(true) - 1
    levels = []
    for j in range(shown + 1):
        lo, hi = level_boxes(j, d)
        levels.append({"lo": lo, "hi": hi, "true_count": true[j], "noisy_count": noisy[j], "count": consistent[j]})
    out: dict[str, Any] = {
        "levels": levels,
        "levels_truncated": shown < r,
        "noise": {"sigma": plan.sigmas, "lambda": lambdas[:shown + 1], "sensitivity": plan.sensitivity},
    }
    if shown == r:
        out["cells"] = {**levels[r], "count": released}
    return out
