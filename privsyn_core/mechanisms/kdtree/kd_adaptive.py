r"""Adaptive KD-tree binning with private split decisions (seed 002, Algorithms 2-3, Theorems 7-8).

Kreačić et al., "Differentially Private Synthetic Data Using KD-Trees", UAI 2023, §3.2, in the
canonical form below, with the erratum on the number of data-dependent levels fixed (see [ERRATUM] under
Privacy):

1. Root: the public cube ``[0,1]^d`` (the schema's bounds; Algorithm 2 lines 3-6 read them off
   the data, which is not private).  A node at depth ``ℓ`` is cut at its
   midpoint on axis ``ℓ mod d``; ``x_a <= mid`` goes left (ties go left), so a depth-``ℓ`` node
   has ``⌊ℓ/d⌋ + [a < ℓ mod d]`` halvings on axis ``a``.  Every level is read off one integer
   code per point, so no two levels can disagree at a float boundary.
2. Depths ``ℓ < h`` split unconditionally (data-independent part).
3. Depths ``h <= ℓ < h_max``: each node draws fresh ``η ~ Lap_Z(b_tree)`` and is a leaf iff
   ``count <= τ + η`` (Algorithm 3 line 5).  Depth ``h_max`` nodes are leaves.
4. Every leaf gets ``ṽ = count + Lap_Z(b_leaf)`` from a separate budget ε'' and is released as
   (centre, ṽ) iff ``ṽ >= t`` and ``ṽ > 0`` (Algorithm 1 lines 9-12, Theorem 8).  Rows are drawn
   from the atoms as in ``kd_grid`` (post-processing).

Privacy (Theorems 7-8, with the constants of this canonical form).  With ``L = h_max - h`` noisy levels, one
record changes the counts on at most two root-to-leaf paths (replace-one), each with ``<= L``
decisions, so the decision statistics move by ``<= 2L`` in l1 and ``b_tree = 2L/ε'`` gives ε'-DP;
the leaves partition the cube, so ``b_leaf = 2/ε''`` gives ε''-DP.  Under add/remove the
sensitivities are ``L`` and 1.  The total is ``ε' + ε'' = ε`` (``split_epsilon``, exact).
[ERRATUM] The paper's ``Lap(2(h'-h)/ε')`` with its literal ``s1, s2`` stopping rules makes
``(h'-h) + d`` decisions per path; here exactly ``L`` levels decide and the scale uses ``L``.

Empty nodes (exact implicit handling, as Lemma 9 and App. F do for the empty bins): an empty node decides like any other
(split iff ``0 > τ + η``), so empty subtrees are Galton-Watson trees.  Empty nodes created by
splitting a non-empty node below depth ``h`` are simulated node by node; of the
``K_h = 2^h - |S_h|`` empty depth-``h`` nodes, ``B ~ Binomial(K_h, q)`` split and
``E ~ Binomial(K_h - B, P[η >= T])`` leaves are released with conditional weights (Lemma 9), all
chosen uniformly.  The output law equals the explicit algorithm's, so the mechanism is pure ε-DP
(not the (ε, δ) of Lemma 10's "no empty bin splits" event).  Counts use the exact discrete
Laplace ``Lap_Z`` (no floating-point attack); see :mod:`privsyn_core.mechanisms.kdtree.kd_empty`.

Defaults (the paper gives none; our choice): ``ε' = ε'' = ε/2``; ``h = d ⌊log2 k⌋`` with
``k`` the bins per axis of ``kd_grid``'s Theorem 3 rule at budget ε''; ``h_max = h + 2d`` (at most
62); ``τ = b_tree h log 2`` (on average at most 1/2 of the empty depth-``h`` nodes split);
``t = b_leaf h log 2`` (at most 1/2 empty depth-``h`` leaf is released on average).  The
automatic ``h`` reads ``n``, public under replace-one only; under add/remove it reads the public count
:func:`privsyn_core.synthesize` passes (``public_n``, or a noisy count released as its own ledger stage).
``h`` is not raised like ``kd_grid``'s bins: with ``h = 0`` the ``2d`` noisy levels still split where the data is,
and on small wide tables neither ``h = 0`` nor ``h = d`` gives better 2-way marginals at every epsilon; a ``h_max``
whose deepest leaves have at most 2 cells on an axis is warned about.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from privsyn_core.data.layout import coarse_warnings
from privsyn_core.errors import ParameterError
from privsyn_core.mechanisms.base.audit import AuditCase, released_cells
from privsyn_core.mechanisms.base.rows import RowPlan
from privsyn_core.mechanisms.base.spec import ParamSpec, W1Claim, register_staged
from privsyn_core.mechanisms.base.stages import DENSE_FACTOR, CellCounts, Stages
from privsyn_core.mechanisms.hvz23.pmm_tree import leaf_counts, leaf_ids
from privsyn_core.mechanisms.kdtree.kd_empty import (
    KD_REFERENCE,
    conditional_weights,
    empty_subtree_leaves,
    integer_threshold,
    sample_ids_excluding,
    tail_probability,
)
from privsyn_core.mechanisms.kdtree.kd_grid import auto_bins, default_rows, weighted_plan
from privsyn_core.privacy.accounting import Ledger, split_epsilon
from privsyn_core.privacy.noise import binomial_big, discrete_laplace
from privsyn_core.privacy.sensitivity import count_sensitivity
from privsyn_core.result import MechanismOutput

#: Deepest supported tree (path ids are int64).
MAX_DEPTH = 62
#: Guards of the implicit empty-node sampler: expected split empty depth-h nodes, expected released empty leaves.
MAX_EMPTY_SPLITS = 1e6
MAX_EMITTED_EMPTY = 1e7
MAX_EMPTY_NODES = 50_000_000


@dataclass(frozen=True)
class AdaptiveLayout:
    """Depths, budget split, noise scales and thresholds: everything decided before counting."""

    h: int
    h_max: int
    ledger: list[tuple[str, float]]
    tree_scale: float
    leaf_scale: float
    tau: float
    t: float
    threshold: int
    warnings: tuple[str, ...]

    @property
    def levels(self) -> int:
        """Number of depths with private split decisions, ``L = h_max - h``."""
        return self.h_max - self.h


def adaptive_layout(n: int, d: int, epsilon: float, neighbouring: str, params: dict[str, Any]) -> AdaptiveLayout:
    """Resolve ``h``, ``h_max`` (read ``n``), the ledger, ``tau`` and ``t`` (module docstring, Defaults)."""
    sensitivity = count_sensitivity(neighbouring)
    h, h_max, tau, t = params["h"], params["h_max"], params["tau"], params["t"]
    warnings: list[str] = []
    tree_fraction = params["tree_fraction"]
    h, h_max = _depths(n, d, epsilon * (1 - tree_fraction) * 2 / sensitivity, params["bandwidth"], h, h_max)
    warnings += coarse_warnings([2 ** (h_max // d + (a < h_max % d)) for a in range(d)], "kd_adaptive",
                                "even the deepest leaves (h_max) are this coarse: raise h_max")
    ledger, tree_scale, leaf_scale = _budget(epsilon, tree_fraction, h_max - h, sensitivity, warnings)
    if tau is None:
        tau = tree_scale * h * math.log(2)
    t = leaf_scale * h * math.log(2) if t is None else t
    return AdaptiveLayout(h, h_max, ledger, tree_scale, leaf_scale, tau, t, integer_threshold(t), tuple(warnings))


def adaptive_ledger(epsilon: float, neighbouring: str, params: dict[str, Any], n: int | None, d: int) -> Ledger:
    """The privacy map: the ledger of the stages' layout, :func:`adaptive_layout` (split decisions and leaf counts,
    :func:`_budget`), which reads public inputs only; :func:`adaptive_release` spends that layout's budget."""
    return list(STAGES.layout(n, d, epsilon, neighbouring, params).ledger)


def adaptive_counts(unit: np.ndarray, layout: AdaptiveLayout) -> CellCounts:
    """Counts of the non-empty depth-``h_max`` nodes, by path id (:func:`path_codes`).

    Dense (``2^h_max`` counts, summed chunk by chunk, no array of ``n`` ids) when there are at most
    :data:`~privsyn_core.mechanisms.base.stages.DENSE_FACTOR` ids per row, else sorted sparse ids and counts.
    """
    if 2 ** layout.h_max <= DENSE_FACTOR * len(unit) + 2 ** 16:
        return CellCounts.from_dense(leaf_counts(unit, layout.h_max, ties="lower"))
    return CellCounts.from_ids(path_codes(unit, layout.h_max))


def adaptive_release(counts: CellCounts, n: int, d: int, epsilon: float, *, neighbouring: str,
                     n_synthetic: int | None, rng: np.random.Generator, layout: AdaptiveLayout,
                     params: dict[str, Any]) -> tuple[MechanismOutput, RowPlan]:
    """Steps 2-4 of the module docstring from the finest counts: the tree, the leaves, the row plan."""
    h, h_max, levels, tau, threshold = layout.h, layout.h_max, layout.levels, layout.tau, layout.threshold
    tree_scale, leaf_scale, ledger = layout.tree_scale, layout.leaf_scale, layout.ledger
    tree_rng, leaf_rng, empty_rng, sample_rng = rng.spawn(4)

    leaves, empty_roots, occupied_h = grow_nonempty(counts.ids, counts.counts, h, h_max, tau, tree_scale, tree_rng)
    split_h, emitted_h = _empty_depth_h(occupied_h, h, levels, tau, tree_scale, threshold, leaf_scale, empty_rng)
    roots = (np.concatenate([empty_roots[0], np.full(2 * len(split_h), h + 1, dtype=np.int64)]),
             np.concatenate([empty_roots[1], 2 * split_h, 2 * split_h + 1]))
    gw_depths, gw_ids = empty_subtree_leaves(*roots, h_max, tau, tree_scale, empty_rng, MAX_EMPTY_NODES)

    leaf_depths, leaf_ids, true_count = leaves
    noisy = np.concatenate([true_count + discrete_laplace(leaf_scale, len(leaf_ids), leaf_rng),
                            discrete_laplace(leaf_scale, len(gw_ids), leaf_rng),
                            conditional_weights(threshold, leaf_scale, len(emitted_h), empty_rng)])
    depths = np.concatenate([leaf_depths, gw_depths, np.full(len(emitted_h), h, dtype=np.int64)])
    ids = np.concatenate([leaf_ids, gw_ids, emitted_h])
    true_all = np.concatenate([true_count, np.zeros(len(gw_ids) + len(emitted_h), dtype=np.int64)])
    kept = noisy >= threshold
    lo, hi = node_boxes(depths, ids, d)
    released = np.flatnonzero(kept)
    released = released[np.argsort((1 << depths[released]) | ids[released])]  # canonical order hides the empty ones
    weights = noisy[released].astype(float)
    plan, row_warnings = weighted_plan((lo[released] + hi[released]) / 2, weights, lo[released], hi[released],
                                       sample=params["sample"],
                                       n_rows=default_rows(n_synthetic, n, neighbouring, weights), rng=sample_rng)
    out = MechanismOutput(
        unit=(lo[released] + hi[released]) / 2, weights=weights, ledger=list(ledger),
        diagnostics={
            "cells": {"lo": lo, "hi": hi, "true_count": true_all, "noisy_count": noisy,
                      "count": np.where(kept, noisy, 0), "depth": depths},
            "unlisted_empty_cells": 2**h - len(occupied_h) - len(split_h) - len(emitted_h),
            "leaves": len(ids),
        },
        params={"h": h, "h_max": h_max, "tau": tau, "t": layout.t, "threshold": threshold, "noisy_levels": levels,
                "epsilon_tree": ledger[0][1] if levels else 0.0, "epsilon_leaf": ledger[-1][1],
                "tree_noise_scale": tree_scale, "leaf_noise_scale": leaf_scale},
        warnings=list(layout.warnings) + row_warnings)
    return out, plan


def _depths(n: int, d: int, leaf_epsilon: float, bandwidth: float, h: int | None,
            h_max: int | None) -> tuple[int, int]:
    """Resolve ``h`` and ``h_max`` (module docstring) and check ``h <= h_max``."""
    if h is None:
        bins = auto_bins(n, d, leaf_epsilon, bandwidth) if leaf_epsilon > 0 else 1
        h = min(MAX_DEPTH, d * math.floor(math.log2(bins)))
    if h_max is None:
        h_max = min(MAX_DEPTH, h + 2 * d)
    if h_max < h:
        raise ParameterError(f"h_max={h_max} must be at least h={h}")
    return h, h_max


def _budget(epsilon: float, tree_fraction: float, levels: int, sensitivity: int,
            warnings: list[str]) -> tuple[list[tuple[str, float]], float, float]:
    """Ledger and noise scales: ``b_tree = s L / ε'`` and ``b_leaf = s / ε''`` (module docstring, Privacy)."""
    leaf_stage = f"leaf counts, discrete Laplace scale {sensitivity}/eps''"
    if levels == 0:
        warnings.append("h_max = h: no private split decisions, the whole budget goes to the leaf counts")
        return [(leaf_stage, epsilon)], 0.0, sensitivity / epsilon
    if not 0 < tree_fraction < 1:
        raise ParameterError(f"tree_fraction must be strictly between 0 and 1, got {tree_fraction}")
    ledger = split_epsilon(epsilon, [(f"split decisions on {levels} levels, discrete Laplace scale "
                                      f"{sensitivity}*{levels}/eps'", tree_fraction), (leaf_stage, 1 - tree_fraction)])
    return ledger, sensitivity * levels / ledger[0][1], sensitivity / ledger[1][1]


def path_codes(unit: np.ndarray, depth: int) -> np.ndarray:
    """Path id of each point's depth-``depth`` node: bit ``j`` from the top is 1 iff right at depth ``j+1``.

    Axis ``a`` is cut ``c_a = ⌊depth/d⌋ + [a < depth mod d]`` times; the point's cell on it is
    ``clip(ceil(x_a 2^{c_a}) - 1, 0, 2^{c_a} - 1)`` so points on a cut go left, and the
    cut at depth ``j`` reads bit ``c_a - 1 - ⌊j/d⌋`` of that cell (exact: scaling by ``2^c`` is exact).
    That is the heap (Morton) index of PMM's partition with ties to the lower cell
    (:func:`privsyn_core.mechanisms.hvz23.pmm_tree.leaf_ids`), computed in cache-sized chunks by table lookups.
    """
    return leaf_ids(unit, depth, ties="lower")


def grow_nonempty(ids: np.ndarray, counts: np.ndarray, h: int, h_max: int, tau: float, tree_scale: float,
                  rng: np.random.Generator) -> tuple[tuple[np.ndarray, np.ndarray, np.ndarray],
                                                     tuple[np.ndarray, np.ndarray], np.ndarray]:
    """The non-empty part of the tree, level by level from depth ``h`` (Algorithm 3).

    Parameters
    ----------
    ids, counts : ndarray of int64
        Sorted distinct depth-``h_max`` path codes of the points (:func:`path_codes`) and their
        positive counts; the depth-``ℓ`` node of a code is the code shifted right by ``h_max - ℓ``,
        so every level stays sorted and a node's count is the sum of its codes' counts.

    Returns
    -------
    leaves : (depths, ids, counts)
        The non-empty leaves with their true counts.
    empty_roots : (depths, ids)
        Empty children of split non-empty nodes (depth ``> h``).
    occupied_h : ndarray of int64
        Sorted ids of the non-empty depth-``h`` nodes.
    """
    leaf_parts: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = []
    empty_parts: list[tuple[np.ndarray, np.ndarray]] = [(np.empty(0, dtype=np.int64), np.empty(0, dtype=np.int64))]
    occupied_h = _runs(ids >> (h_max - h), counts)[0]
    for depth in range(h, h_max + 1):
        nodes, node_counts, members = _runs(ids >> (h_max - depth), counts)
        if depth == h_max:
            is_leaf = np.ones(len(nodes), dtype=bool)
        else:
            is_leaf = node_counts <= tau + discrete_laplace(tree_scale, len(nodes), rng)
        leaf_parts.append((np.full(int(is_leaf.sum()), depth, dtype=np.int64), nodes[is_leaf], node_counts[is_leaf]))
        if depth == h_max:
            break
        inner = np.repeat(~is_leaf, members)
        ids, counts = ids[inner], counts[inner]
        children = _runs(ids >> (h_max - depth - 1), counts)[0]
        lonely = _lonely_children(children)
        empty_parts.append((np.full(len(lonely), depth + 1, dtype=np.int64), lonely ^ 1))
    leaf_depths, leaf_ids, leaf_counts = (np.concatenate(part) for part in zip(*leaf_parts, strict=True))
    empty_depths, empty_ids = (np.concatenate(part) for part in zip(*empty_parts, strict=True))
    return (leaf_depths, leaf_ids, leaf_counts), (empty_depths, empty_ids), occupied_h


def _runs(sorted_ids: np.ndarray, counts: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Distinct values of a sorted array, the sums of their ``counts`` and their multiplicities."""
    if len(sorted_ids) == 0:
        empty = np.empty(0, dtype=np.int64)
        return sorted_ids, empty, empty
    starts = np.flatnonzero(np.r_[True, sorted_ids[1:] != sorted_ids[:-1]])
    return sorted_ids[starts], np.add.reduceat(counts, starts), np.diff(np.r_[starts, len(sorted_ids)])


def _lonely_children(children: np.ndarray) -> np.ndarray:
    """Children (sorted, distinct) whose sibling is absent, i.e. whose parent has one non-empty child."""
    if len(children) == 0:
        return children
    parent = children >> 1
    new_parent = np.r_[True, parent[1:] != parent[:-1]]
    parent_ends = np.r_[new_parent[1:], True]
    return children[new_parent & parent_ends]


def _empty_depth_h(occupied_h: np.ndarray, h: int, levels: int, tau: float, tree_scale: float, threshold: int,
                   leaf_scale: float, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """Which empty depth-``h`` nodes split and which are released leaves (Lemma 9: binomial thinning)."""
    empty = 2**h - len(occupied_h)
    split_prob = tail_probability(math.floor(tau) + 1, tree_scale) if levels else 0.0
    emit_prob = tail_probability(threshold, leaf_scale)
    # the guards bound the expectations with all 2^h nodes, so they depend on public quantities only
    if 2**h * split_prob > MAX_EMPTY_SPLITS:
        raise ParameterError(f"up to {2**h * split_prob:.3g} empty nodes at depth h={h} would split "
                             f"(limit {MAX_EMPTY_SPLITS:.0e}): raise tau or lower h")
    if 2**h * emit_prob > MAX_EMITTED_EMPTY:
        raise ParameterError(f"up to {2**h * emit_prob:.3g} empty leaves would pass the threshold t "
                             f"(limit {MAX_EMITTED_EMPTY:.0e}): raise t or lower h")
    n_split = binomial_big(empty, split_prob, rng)
    n_emit = binomial_big(empty - n_split, emit_prob, rng)
    chosen = sample_ids_excluding(2**h, occupied_h, n_split + n_emit, rng)
    return chosen[:n_split], chosen[n_split:]


def node_boxes(depths: np.ndarray, ids: np.ndarray, d: int) -> tuple[np.ndarray, np.ndarray]:
    """Lower and upper corners ``(m, d)`` of the nodes with the given depths and path ids."""
    coords = np.zeros((len(ids), d), dtype=np.int64)
    cuts = np.zeros((len(ids), d), dtype=np.int64)
    for j in range(int(depths.max()) if len(depths) else 0):
        inside = depths > j
        bit = (ids >> np.where(inside, depths - 1 - j, 0)) & 1
        a = j % d
        coords[inside, a] = 2 * coords[inside, a] + bit[inside]
        cuts[inside, a] += 1
    size = 0.5 ** cuts
    return coords * size, (coords + 1) * size


STAGES = Stages(layout=adaptive_layout, count=adaptive_counts, release=adaptive_release)
SPEC = register_staged(
    "kd_adaptive", STAGES,
    privacy_map=adaptive_ledger,
    title="KD-tree paper: adaptive binning",
    paper="002, Alg 2-3",
    data_kind="continuous",
    neighbouring=("replace", "add_remove"),
    is_private=True,
    params={
        "h": ParamSpec(None, int, (0, MAX_DEPTH),
                       help="data-independent depth; auto: d*floor(log2 k), k from kd_grid's rule"),
        "h_max": ParamSpec(None, int, (0, MAX_DEPTH), help="maximum depth (>= h); auto: h + 2d"),
        "tau": ParamSpec(None, float, (0.0, 1e15), help="a node splits if count > tau + noise; auto: b_tree*h*log 2"),
        "t": ParamSpec(None, float, help="leaf filtering threshold; auto: b_leaf*h*log 2"),
        "tree_fraction": ParamSpec(0.5, float, (0.0, 1.0), help="share of epsilon for the split decisions (eps')"),
        "sample": ParamSpec("uniform", str, choices=("uniform", "center"),
                            help="rows uniform in their leaf (default) or at its centre (the paper's output)"),
        "bandwidth": ParamSpec(0.1, float, (1e-6, 10.0),
                               help="kernel bandwidth (unit coordinates) the automatic h is tuned for"),
    },
    guarantee="epsilon-DP: split decisions with discrete Laplace scale 2L/eps' and leaf counts with scale 2/eps'' "
              "(replace-one; L and 1 under add/remove), eps' + eps'' = epsilon; empty subtrees simulated exactly",
    description="A KD-tree that keeps splitting boxes with many points (decided privately) and releases noisy "
                "leaf counts above a threshold: fine bins where the data is, coarse bins elsewhere.",
    citation=f"{KD_REFERENCE}, Alg 2-3",
    order=60,
    w1_claim=W1Claim("measured", "Kreačić et al. prove its privacy (Thm 7-8) and leave its utility open "
                                 "(Sec 5)"),
    audit=AuditCase(features=released_cells, trials=10_000, selection_trials=2_500, read_stages=("leaf counts",),
                    tight_coordinates=2),
    released=("h", "h_max", "tau", "t", "threshold", "noisy_levels", "epsilon_tree", "epsilon_leaf", "tree_noise_scale",
              "leaf_noise_scale"),
    uses_n=lambda params: params["h"] is None or params["h_max"] is None,
)
