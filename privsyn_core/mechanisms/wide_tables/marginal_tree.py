r"""Marginal tree: a private spanning tree of columns, each edge a W1-accurate PMM measure on its square.

For tables with many columns, where the full-dimensional mechanisms' error ``(eps n)^{-1/d}``
is close to the diameter, the data is modelled by a tree of 2-D marginals (docs/marginal_tree.md):

0. Every ``n``-dependent choice (depths, number of rows) reads the public record count of
   :func:`privsyn_core.engine.pipeline.public_size`: ``n`` under replace-one, under add/remove the caller's
   ``public_n`` or a noisy count ``n~ = n + Lap_Z(1/eps_n)`` released as its own ledger stage.
1. Pair counts: every pair of columns ``(a, b)`` is counted on the leaves of its pair tree
   (:class:`~privsyn_core.mechanisms.wide_tables.tree_pieces.PairTree`), one pass over the data.
2. Tree selection (``d >= 3``), as MST [MMS21]: noisy 1-way marginals on a coarse public
   discretisation (``coarse_bits`` cuts per axis; discrete Laplace), then ``d - 1`` rounds of the
   exponential mechanism over the pairs joining two components (Kruskal), with the integer score
   ``q_ab = sum |n_ab - round(n~ p_a p_b)|`` (the L1 distance of the coarse 2-way counts from the
   product of the released 1-way marginals), sensitivity 1 (add/remove) or 2 (replace).  The
   exponential mechanism is sampled exactly in distribution with the Gumbel-max trick.
3. Edge releases: PMM ([HVZ23] Alg. 3-4) on every chosen edge's pair tree, a share of epsilon each
   (basic composition over the ``d - 1`` edges); while ``eps_edge n~ < flat_below`` (small tables) each edge
   is measured flat instead: discrete Laplace on its leaves at the whole share, projected onto the
   non-negative counts summing to ``n~`` (:func:`flat_edges`).
4. Consistency: each column's 1-D marginal is the inverse-variance weighted average of the marginals of the
   edges touching it (spread to the column's finest bins), moved towards the released coarse 1-way marginal
   of step 2; every edge's histogram is raked (iterative proportional fitting) to the marginals of its two
   columns, a row or column without mass but with a positive target starting from the product of the targets.
5. Rows: the root column (column 0) and its first child jointly from their raked edge histogram, then
   each further column given its parent, along the tree from the root outward: the parent's bin picks a row of
   the raked edge histogram, the child's bin is drawn from that row, then a fine bin inside it from the child's
   consolidated marginal, then a uniform point of the fine bin.  A categorical value is a uniform point of its
   category's own sub-interval, so it decodes to that category.

Steps 4-5 read only released quantities (post-processing).  Privacy: ``eps_marginals + eps_selection +
sum_e eps_e`` is what the mechanism receives (the pipeline adds ``eps_n`` in front when it draws a noisy
count), the ledger built by :func:`privsyn_core.privacy.accounting.split_epsilon`.

Categorical and few-valued integer columns need the codec of this mechanism
(:class:`~privsyn_core.data.levelled_codec.LevelledCodec`), which passes their public levels to the stages
(parameter ``levels``); without it every column is continuous.

References
----------
.. [MMS21] R. McKenna, G. Miklau, D. Sheldon, "Winning the NIST Contest: A scalable and general
   approach to differentially private synthetic data", Journal of Privacy and Confidentiality 11(3), 2021
   (MST: Section 4, Algorithm 1).
.. [HVZ23] Y. He, R. Vershynin, Y. Zhu, "Algorithmically Effective Differentially Private Synthetic
   Data", COLT 2023 (seed 004): Algorithms 3-4, Theorems 4.1-4.3.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from privsyn_core.data.levelled_codec import LevelledCodec
from privsyn_core.errors import DataError, ParameterError
from privsyn_core.mechanisms.base.audit import AuditCase, cell_features
from privsyn_core.mechanisms.base.rows import OneAtomPlan, RowPlan
from privsyn_core.mechanisms.base.spec import ParamSpec, register_staged
from privsyn_core.mechanisms.base.stages import CellCounts, Stages
from privsyn_core.mechanisms.hvz23.psmm import PsmmLayout, psmm_counts, psmm_layout, psmm_release
from privsyn_core.mechanisms.wide_tables.tree_pieces import (
    ColumnModel,
    PairRelease,
    PairTree,
    block_cdf,
    category_bits,
    coarsen,
    cut_schedule,
    rake,
    release_pair,
    sample_blocks,
    smoothed_conditional,
    spread,
    valid_bins,
)
from privsyn_core.privacy.accounting import split_epsilon
from privsyn_core.privacy.noise import discrete_laplace
from privsyn_core.privacy.sensitivity import count_sensitivity
from privsyn_core.result import MechanismOutput

#: Leaves of all pair trees counted in one pass: at most 2^24 int64 (128 MiB), depths shrink to fit.
PAIR_CELL_BUDGET = 2 ** 24
#: What the floating-point exposure of the tree selection is (MechanismSpec.floating_point_exposure).
SELECTION_EXPOSURE = ("the tree selection perturbs integer scores with floating-point Gumbel noise (numpy "
                      "Generator.gumbel) and releases only the index of the maximum, not a noisy value")


@dataclass(frozen=True)
class TreeLayout:
    """Everything decided before counting: the budget split, the noisy n, the pair trees."""

    levels: tuple[int, ...]
    n_hat: int
    shares: list[tuple[str, float]]
    pairs: tuple[PairTree, ...]
    offsets: tuple[int, ...]
    coarse: tuple[int, ...]
    warnings: tuple[str, ...] = ()
    #: The narrow-table branch (:func:`joint_branch`): PSMM's grid of the whole joint, else ``None`` (the tree).
    joint: PsmmLayout | None = None
    #: Every edge measured flat (all its budget on the leaves) instead of by PMM's levels (:func:`flat_edges`).
    flat: bool = False

    @property
    def counts_per_row(self) -> int:
        """Every row is counted once in each pair tree, or once in the joint grid (the Dask path checks it)."""
        return 1 if self.joint is not None else len(self.pairs)

    def share(self, name: str) -> float:
        return dict(self.shares).get(name, 0.0)


#: PSMM's parameters in the narrow-table branch: king-graph LP, normaliser ``n``, uniform rows in a cell.
JOINT_PSMM_PARAMS = {"cells_per_axis": None, "lp": None, "normalise": "n", "sample": "uniform"}
#: Default of ``joint_columns``: tables of at most this many columns take the joint branch.
JOINT_COLUMNS = 3
#: Most cells of the joint branch's grid: its LP then solves in about 1.5 s (d = 2, k = 50) or 3 s (d = 3,
#: k = 13) on the 2-core benchmark machine (psmm's own cap, 16 384 cells, takes 30 s or more).
JOINT_MAX_CELLS = 2_500


def joint_branch(levels: tuple[int, ...], params: dict[str, Any]) -> bool:
    """Whether the whole joint is released by PSMM instead of a tree (a public rule: schema and parameters only).

    With ``d <= joint_columns`` columns a tree has at most two edges and loses to PSMM on the whole joint at
    the full budget (docs/marginal_tree.md, "Narrow tables": 1.5-1.9x the W1 of psmm at ``d = 2, 3`` on
    numeric tables, up to 1.9x on real tables with one categorical column).  A categorical column takes the
    joint branch too: PSMM's cells are equal cells of the encoded cube, and a synthetic point decodes to the
    category whose sub-interval holds it.
    """
    return len(levels) <= params.get("joint_columns", JOINT_COLUMNS)


#: Default of ``flat_below``: edges are measured flat while ``eps_edge n~`` is below it (PMM depth <= 6).
FLAT_BELOW = 128


def flat_edges(eps_edge: float, n_hat: int, params: dict[str, Any]) -> bool:
    """Whether every edge is measured flat (a public rule: the edge budget, the public count and a parameter).

    PMM spreads ``eps_edge`` over the ``r + 1`` levels of its tree; below ``eps_edge n~ = flat_below`` the
    leaves hold a few records each and a flat measurement of the leaves at the whole ``eps_edge`` (as PSMM
    and MST measure their tables) is more accurate (docs/marginal_tree.md, "Small tables").
    """
    return eps_edge * max(n_hat, 0) < params.get("flat_below", FLAT_BELOW)


def tree_layout(n: int, d: int, epsilon: float, neighbouring: str, params: dict[str, Any]) -> TreeLayout:
    """The ledger plan and the pair trees (or the joint grid of :func:`joint_branch`), from the public count ``n``."""
    if d < 2:
        raise ParameterError("marginal_tree needs at least 2 columns; use pmm for one column")
    levels = tuple(params.get("levels") or (0,) * d)
    if len(levels) != d:
        raise ParameterError(f"marginal_tree: {len(levels)} column levels for {d} columns")
    if joint_branch(levels, params):
        k = min(psmm_layout(n, d, epsilon, neighbouring, JOINT_PSMM_PARAMS)[0],
                math.floor(JOINT_MAX_CELLS ** (1 / d) + 1e-9))
        grid = psmm_layout(n, d, epsilon, neighbouring, {**JOINT_PSMM_PARAMS, "cells_per_axis": k})
        return TreeLayout(levels, int(n), split_epsilon(epsilon, [("joint", 1.0)]), (), (0, grid[0] ** d), (),
                          joint=grid)
    parts: list[tuple[str, float]] = []
    edge_share = 1.0
    if d >= 3:
        sel = params["selection"]
        parts += [("marginals", sel / 2), ("selection", sel / 2)]
        edge_share -= sel
    parts += [(f"edge {k}", edge_share / (d - 1)) for k in range(d - 1)]
    shares = split_epsilon(epsilon, parts)
    n_hat = int(n)
    eps_edge = dict(shares)["edge 0"]
    caps = [category_bits(k) for k in levels]
    coarse = tuple(min(params["coarse_bits"], c) for c in caps)
    pairs_ab = [(a, b) for a in range(d) for b in range(a + 1, d)]
    if params["depth"] == "paper":
        scale = eps_edge * max(n_hat, 1)
        r = max(0, math.floor(math.log2(scale))) if scale >= 2 else 0
    else:
        r = int(params["depth"])
    r_budget = math.floor(math.log2(PAIR_CELL_BUDGET / len(pairs_ab)))
    warnings = []
    if r > r_budget:
        warnings.append(f"marginal_tree: edge depth {r} capped at {r_budget} (all {len(pairs_ab)} pair trees are "
                        f"counted in one pass within {PAIR_CELL_BUDGET} cells)")
    pairs = []
    for a, b in pairs_ab:
        depth = min(max(r, coarse[a] + coarse[b]), r_budget)
        pairs.append(PairTree(a, b, (levels[a], levels[b]), cut_schedule(depth, (caps[a], caps[b]))))
    offsets = tuple(np.cumsum([0] + [2 ** p.depth for p in pairs]).tolist())
    return TreeLayout(levels, n_hat, shares, tuple(pairs), offsets, coarse, tuple(warnings),
                      flat=flat_edges(eps_edge, n_hat, params))


def tree_counts_stage(unit: np.ndarray, layout: TreeLayout) -> CellCounts:
    """Leaf-grid counts of every pair tree, concatenated (pair ``k`` at ``offsets[k]``)."""
    if layout.joint is not None:
        return psmm_counts(np.asarray(unit), layout.joint)
    out = np.zeros(layout.offsets[-1], dtype=np.int64)
    for pair, start, stop in zip(layout.pairs, layout.offsets[:-1], layout.offsets[1:], strict=True):
        out[start:stop] = np.bincount(pair.grid_ids(unit), minlength=stop - start)
    return CellCounts.from_dense(out)


def tree_release(counts: CellCounts, n: int, d: int, epsilon: float, *, neighbouring: str, n_synthetic: int | None,
                 rng: np.random.Generator, layout: TreeLayout,
                 params: dict[str, Any]) -> tuple[MechanismOutput, RowPlan]:
    """Selection, edge releases, consistency and the row plan, from the pair counts only."""
    if layout.joint is not None:
        return joint_release(counts, n, d, epsilon, neighbouring=neighbouring, n_synthetic=n_synthetic, rng=rng,
                             grid=layout.joint, shares=layout.shares)
    marg_rng, select_rng, edge_rng, sample_rng = rng.spawn(4)
    dense = counts.dense(layout.offsets[-1])
    grids = [dense[s:e].reshape(2 ** p.cuts[0], 2 ** p.cuts[1])
             for p, s, e in zip(layout.pairs, layout.offsets[:-1], layout.offsets[1:], strict=True)]
    timings: dict[str, float] = {}
    sensitivity = count_sensitivity(neighbouring)

    start = time.perf_counter()
    if d >= 3:
        selected, select_diag = select_tree(grids, layout, sensitivity, marg_rng, select_rng)
    else:
        selected, select_diag = [0], {"scores": None}
    timings["selection"] = time.perf_counter() - start

    start = time.perf_counter()
    edge_eps = [e for name, e in layout.shares if name.startswith("edge ")]
    releases = []
    for index, eps_e, g in zip(selected, edge_eps, edge_rng.spawn(len(selected)), strict=True):
        pair = layout.pairs[index]
        releases.append(release_pair(pair, grids[index].ravel()[pair.heap_to_grid()], eps_e, neighbouring, g,
                                     flat=layout.flat, total=layout.n_hat))
    timings["edges"] = time.perf_counter() - start

    start = time.perf_counter()
    one_way = None
    if d >= 3:
        variance = 2.0 * (sensitivity * d / layout.share("marginals")) ** 2
        one_way = [(noisy, bits, variance) for noisy, bits in
                   zip(select_diag["one_way"]["noisy_count"], select_diag["one_way"]["bits"], strict=True)]
    sampler = build_sampler(releases, layout.levels, d, one_way)
    timings["consistency"] = time.perf_counter() - start
    total = n_synthetic if n_synthetic is not None else max(layout.n_hat, 0)
    warnings = list(layout.warnings)
    if total == 0:
        warnings.append("the noisy record count was 0: marginal_tree released no synthetic rows")
    plan = TreePlan(np.array([total], dtype=np.int64), np.zeros((1, d)), sample_rng, sampler=sampler,
                    shuffle=False)
    ledger = [(_stage_label(name, layout, releases), eps) for name, eps in layout.shares]
    edges = [[r.tree.a, r.tree.b] for r in releases]
    out = MechanismOutput(
        unit=np.empty((0, d)), ledger=ledger,
        diagnostics={"tree": {"edges": edges, **select_diag},
                     "edges": [{"columns": [r.tree.a, r.tree.b], "cuts": list(r.tree.cuts),
                                "true_count": r.true_leaves, "count": r.joint, "sigma": r.sigmas,
                                "noisy_root": r.noisy_root,
                                "levels": [{"lo": lo, "hi": hi, "noisy_count": noisy}
                                           for (lo, hi), noisy in zip(r.measured_boxes(), r.noisy_levels,
                                                                      strict=True)]}
                               for r in releases]},
        params={"branch": "tree", "edge_levels": "flat" if layout.flat else "pmm", "tree_edges": edges, "root": 0,
                "edge_depths": [r.tree.depth for r in releases],
                "edge_cuts": [list(r.tree.cuts) for r in releases]},
        timings=timings, warnings=warnings)
    return out, plan


def joint_release(counts: CellCounts, n: int, d: int, epsilon: float, *, neighbouring: str, n_synthetic: int | None,
                  rng: np.random.Generator, grid: PsmmLayout,
                  shares: list[tuple[str, float]]) -> tuple[MechanismOutput, RowPlan]:
    """The narrow-table branch: PSMM ([HVZ23] Alg. 1 with the corrected d_BL projection) on the whole joint.

    Every stage is :func:`privsyn_core.mechanisms.hvz23.psmm.psmm_release` at the full ``epsilon``: discrete
    Laplace cell counts (sensitivity 1 add/remove, 2 replace), then post-processing.  The output
    keeps this mechanism's shape: one ledger stage, ``branch = "joint"``, no tree.
    """
    out, plan = psmm_release(counts, n, d, epsilon, neighbouring=neighbouring, n_synthetic=n_synthetic, rng=rng,
                             layout=grid, params=JOINT_PSMM_PARAMS)
    out.warnings = [w.replace("psmm:", "marginal_tree (joint branch, psmm):") for w in out.warnings]
    k = grid[0]
    out.ledger = [(f"joint distribution of the {d} columns: PSMM on {k}^{d} cells, discrete Laplace counts", eps)
                  for _, eps in shares]
    out.diagnostics = {"tree": {"edges": [], "scores": None}, "joint": out.diagnostics}
    out.params = {"branch": "joint", "tree_edges": [], "root": 0, "edge_depths": [], "edge_cuts": [],
                  "cells_per_axis": k, "cells": k ** d}
    return out, plan


def _stage_label(name: str, layout: TreeLayout, releases: list[PairRelease]) -> str:
    if name == "noisy n":
        return "record count n: discrete Laplace (add/remove; n is private)"
    if name == "marginals":
        return f"coarse 1-way marginals of {len(layout.levels)} columns: discrete Laplace"
    if name == "selection":
        return f"tree selection: {len(layout.levels) - 1} exponential-mechanism rounds (Gumbel-max)"
    k = int(name.split()[1])
    tree = releases[k].tree
    if layout.flat:
        return f"edge {tree.a}-{tree.b}: flat, {2 ** tree.depth} leaves, discrete Laplace per leaf"
    return f"edge {tree.a}-{tree.b}: PMM, depth {tree.depth}, discrete Laplace per level"


def select_tree(grids: list[np.ndarray], layout: TreeLayout, sensitivity: int, marg_rng: np.random.Generator,
                select_rng: np.random.Generator) -> tuple[list[int], dict[str, Any]]:
    r"""MST's private Kruskal [MMS21]: indices of the ``d - 1`` chosen pairs, and the diagnostics.

    Noisy coarse 1-way marginals: one record changes one bin of every column's histogram (add/remove;
    two bins under replace), so the ``d`` histograms together have L1 sensitivity ``s d`` and each
    count gets ``Lap_Z(s d / eps_marginals)``.  Score ``q_ab`` (integer): L1 distance between the true
    coarse 2-way counts and ``round(n~ p_a p_b)`` from the released marginals; one record changes one
    2-way cell (two under replace), so ``|q(D) - q(D')| <= s``.  Each round draws a pair joining two
    components with probability ``proportional to exp(eps_round q / (2 s))`` (exponential mechanism,
    McSherry-Talwar), sampled as the argmax of ``eps_round q / (2 s) + Gumbel``.
    """
    d, pairs, coarse = len(layout.levels), layout.pairs, layout.coarse
    eps_m, eps_s = layout.share("marginals"), layout.share("selection")
    first: dict[int, tuple[int, int]] = {}  # column -> (first pair holding it, its axis there)
    for k, p in enumerate(pairs):
        first.setdefault(p.a, (k, 0))
        first.setdefault(p.b, (k, 1))
    true_1way, noisy_1way, probs = [], [], []
    for a in range(d):
        k, axis = first[a]
        marginal = grids[k].sum(axis=1 - axis)
        marginal = coarsen(marginal, coarse[a])
        noisy = marginal + discrete_laplace(sensitivity * d / eps_m, len(marginal), marg_rng)
        noisy[~valid_bins(layout.levels[a], coarse[a])] = 0
        noisy = np.maximum(noisy, 0)
        true_1way.append(marginal)
        noisy_1way.append(noisy)
        probs.append(noisy / noisy.sum() if noisy.sum() > 0 else valid_bins(layout.levels[a], coarse[a]) /
                     valid_bins(layout.levels[a], coarse[a]).sum())
    scores = np.empty(len(pairs), dtype=np.int64)
    for k, p in enumerate(pairs):
        joint = grids[k].reshape(2 ** coarse[p.a], 2 ** (p.cuts[0] - coarse[p.a]), 2 ** coarse[p.b], -1)
        joint = joint.sum(axis=(1, 3))
        expected = np.rint(max(layout.n_hat, 0) * np.outer(probs[p.a], probs[p.b])).astype(np.int64)
        scores[k] = np.abs(joint - expected).sum()
    round_eps = [e for _, e in split_epsilon(eps_s, [(str(i), 1.0) for i in range(d - 1)])]
    component = list(range(d))
    chosen, utilities = [], []
    for eps_round in round_eps:
        candidates = np.array([k for k, p in enumerate(pairs) if component[p.a] != component[p.b]])
        utility = eps_round * scores[candidates] / (2.0 * sensitivity) + select_rng.gumbel(size=len(candidates))
        best = int(candidates[np.argmax(utility)])
        chosen.append(best)
        utilities.append(float(utility.max()))
        old, new = component[pairs[best].b], component[pairs[best].a]
        component = [new if c == old else c for c in component]
    diag = {"pairs": [[p.a, p.b] for p in pairs], "scores": scores, "chosen": chosen, "perturbed_utility": utilities,
            "one_way": {"true_count": true_1way, "noisy_count": noisy_1way, "bits": list(coarse)}}
    return chosen, diag


@dataclass
class TreeSampler:
    """Post-processing of the released edges: column models, the tree from the root, raked edge CDFs."""

    d: int
    columns: list[ColumnModel]
    root: int
    steps: list[tuple[int, int, int, int, np.ndarray]]  # parent, child, parent cuts, child cuts, block CDF
    first_joint: np.ndarray  # CDF of the raked histogram of the first edge (root and its first child drawn jointly)

    def sample(self, total: int, rng: np.random.Generator) -> np.ndarray:
        rows = np.empty((total, self.d))
        fine: dict[int, np.ndarray] = {}
        caches: list[dict] = [{} for _ in range(self.d)]
        root = self.columns[self.root]
        first = self.steps[0]
        cell = sample_blocks(self.first_joint, np.zeros(total, dtype=np.int64), len(self.first_joint), rng)
        fine[self.root] = root.refine(cell >> first[3], first[2], rng, caches[self.root])
        rows[:, self.root] = root.to_unit(fine[self.root], rng)
        for k, (parent, child, pc, cc, cdf) in enumerate(self.steps):
            if k == 0:
                child_bin = cell & (2 ** cc - 1)
            else:
                parent_bin = fine[parent] >> (self.columns[parent].fine_bits - pc)
                child_bin = sample_blocks(cdf, parent_bin, 2 ** cc, rng) - parent_bin * 2 ** cc
            model = self.columns[child]
            fine[child] = model.refine(child_bin, cc, rng, caches[child])
            rows[:, child] = model.to_unit(fine[child], rng)
        return rows


def build_sampler(releases: list[PairRelease], levels: tuple[int, ...], d: int,
                  one_way: list[tuple[np.ndarray, int, float]] | None = None) -> TreeSampler:
    """Consolidated column marginals, raked edge histograms and the sampling order (module docstring, 4-5).

    ``one_way``: the released coarse 1-way counts of every column (counts, bits, noise variance per bin) of the
    selection stage, or ``None`` (two columns: no selection).  A column's marginal is the inverse-variance
    weighted mean of the marginals of the edges touching it; with ``one_way`` its coarse bins are then moved to
    the inverse-variance weighted mean of the edges' and the 1-way's coarse distributions (the fine shape inside
    a coarse bin is kept).  The variances are public (noise scales and shapes), so this is post-processing.
    """
    touching: dict[int, list[tuple[np.ndarray, int, float]]] = {a: [] for a in range(d)}
    for rel in releases:
        joint = rel.joint.astype(float)
        mass = joint.sum()
        joint = joint / mass if mass > 0 else rel.tree.valid_leaves() / rel.tree.valid_leaves().sum()
        for axis, column in enumerate((rel.tree.a, rel.tree.b)):
            c0 = one_way[column][1] if one_way is not None else 0
            touching[column].append((joint.sum(axis=1 - axis), rel.tree.cuts[axis], _coarse_variance(rel, axis, c0)))
    columns = []
    for a in range(d):
        fine_bits = category_bits(levels[a]) if levels[a] else max(bits for _, bits, _ in touching[a])
        valid = valid_bins(levels[a], fine_bits)
        weights = np.array([1.0 / var for _, _, var in touching[a]])
        marginal = np.average([spread(m, bits, fine_bits, valid) for m, bits, _ in touching[a]], axis=0,
                              weights=weights)
        if one_way is not None:
            marginal = _towards_one_way(marginal, one_way[a], float(weights.sum()), valid)
        columns.append(ColumnModel(levels[a], fine_bits, marginal))
    neighbours: dict[int, list[tuple[int, PairRelease]]] = {a: [] for a in range(d)}
    for rel in releases:
        neighbours[rel.tree.a].append((rel.tree.b, rel))
        neighbours[rel.tree.b].append((rel.tree.a, rel))
    steps: list[tuple[int, int, int, int, np.ndarray]] = []
    seen, queue = {0}, [0]
    while queue:
        parent = queue.pop(0)
        for child, rel in neighbours[parent]:
            if child in seen:
                continue
            seen.add(child)
            queue.append(child)
            ca, cb = rel.tree.cuts
            joint = rel.joint.astype(float) if rel.tree.a == parent else rel.joint.T.astype(float)
            pc, cc = (ca, cb) if rel.tree.a == parent else (cb, ca)
            parent_marginal = columns[parent].at(pc)
            conditional = smoothed_conditional(joint, _leaf_sigma(rel))
            raked = rake(parent_marginal[:, None] * conditional, parent_marginal, columns[child].at(cc))
            fallback = np.broadcast_to(columns[child].at(cc), raked.shape)
            if not steps:
                direct = rake(joint, parent_marginal, columns[child].at(cc)).ravel()
                first_joint = block_cdf(direct[None, :], direct[None, :])
            steps.append((parent, child, pc, cc, block_cdf(raked, fallback)))
    return TreeSampler(d, columns, 0, steps, first_joint)


def _coarse_variance(rel: PairRelease, axis: int, bits: int) -> float:
    """Noise variance of an edge's count of one bin of ``axis`` cut ``bits`` times (public: scales and shape).

    The bin is read off the noisy level that holds it in the fewest nodes: ``2^m`` nodes of noise variance
    ``2 sigma_j^2`` each (about that of a discrete Laplace of scale ``sigma_j``).  Levels without noise (the
    exact root under replace-one, or the sums above a flat edge's leaves) are not measurements; a bin of no
    cuts (one category) is the same in every source (variance 1).
    """
    if bits == 0:
        return 1.0
    best = math.inf
    for j in range(rel.tree.depth + 1):
        cuts = rel.tree.cuts_at(j)
        if cuts[axis] < bits or not np.isfinite(rel.sigmas[j]):
            continue
        best = min(best, 2.0 * rel.sigmas[j] ** 2 * 2.0 ** (cuts[axis] - bits + cuts[1 - axis]))
    return best if np.isfinite(best) else 1.0


def _towards_one_way(marginal: np.ndarray, one_way: tuple[np.ndarray, int, float], edge_precision: float,
                     valid: np.ndarray) -> np.ndarray:
    """The fine marginal with its coarse bins moved to the precision-weighted mean of edges and 1-way marginal."""
    noisy, bits, variance = one_way
    if noisy.sum() <= 0:
        return marginal
    coarse = coarsen(marginal, bits)
    target = (edge_precision * coarse + noisy / noisy.sum() / variance) / (edge_precision + 1.0 / variance)
    step = len(marginal) // len(coarse)
    fine = marginal.reshape(-1, step)
    uniform = valid.reshape(-1, step).astype(float)
    uniform /= np.maximum(uniform.sum(axis=1, keepdims=True), 1)
    shape = np.where(coarse[:, None] > 0, fine / np.maximum(coarse, 1e-300)[:, None], uniform)
    return (shape * target[:, None]).ravel()


def _leaf_sigma(rel: PairRelease) -> float:
    """Noise scale of the deepest noisy level of an edge (public): the count a conditional row should reach."""
    finite = rel.sigmas[np.isfinite(rel.sigmas)]
    return float(finite[-1]) if len(finite) else 0.0


@dataclass
class TreePlan(OneAtomPlan):
    """A row plan whose rows come from a :class:`TreeSampler` (one atom: all rows, the sampler draws a block's)."""

    sampler: TreeSampler = field(kw_only=True, repr=False)

    def rows(self, out: np.ndarray | None = None) -> np.ndarray:
        """The block's rows from the sampler, into ``out`` if given."""
        rows = self.sampler.sample(self.total, self.rng)
        if out is None:
            return rows
        out[...] = rows
        return out


def edge_features(out: MechanismOutput, pair: Any) -> np.ndarray:
    """Audit features: :func:`~privsyn_core.mechanisms.base.audit.cell_features` of the first edge's measured levels
    (PMM's noisy counts per level, or a flat edge's noisy leaves before their projection); on two columns the one
    edge's square is the whole cube, so the corners' cells are the pair's."""
    levels = out.diagnostics["edges"][0]["levels"]
    edge = MechanismOutput(unit=out.unit, ledger=out.ledger, diagnostics={"levels": levels})
    return cell_features(edge, pair)


def _prepare(unit: np.ndarray) -> np.ndarray:
    """The data as an ``(n, d)`` array in ``[0,1]^d``; no rows or NaN is a DataError."""
    array = np.asarray(unit, dtype=float)
    if array.ndim != 2 or len(array) == 0:
        raise DataError(f"marginal_tree needs an (n, d) table with at least one row, got shape {array.shape}")
    if np.isnan(array).any():
        raise DataError("the data contain NaN; drop or impute those rows first")
    return np.clip(array, 0.0, 1.0)


STAGES = Stages(layout=tree_layout, count=tree_counts_stage, release=tree_release, prepare=_prepare)
SPEC = register_staged(
    "marginal_tree", STAGES,
    title="Marginal tree of PMM pieces",
    paper="MST [MMS21] tree selection + 004 Alg 3-4 per edge",
    data_kind="continuous",
    neighbouring=("replace", "add_remove"),
    is_private=True,
    params={
        "selection": ParamSpec(0.2, float, (0.01, 0.9),
                               help="share of epsilon for the tree selection (half on the coarse 1-way marginals, "
                                    "half on the exponential mechanism); unused with 2 columns"),
        "coarse_bits": ParamSpec(3, int, (1, 6), help="cuts per numeric axis of the public discretisation that "
                                                        "scores pairs (2^bits bins); categories up to 2^bits"),
        "joint_columns": ParamSpec(JOINT_COLUMNS, int, (1, 3),
                                   help="with at most this many columns (numeric or categorical), the whole joint is "
                                        "released by PSMM at the full budget instead of a tree (1: always a tree)"),
        "flat_below": ParamSpec(FLAT_BELOW, int, (0, 10 ** 9),
                                help="edges are measured flat (all their budget on the leaves) while eps_edge n "
                                     "(n noisy under add/remove) is below this; 0: always PMM's levels"),
        "depth": ParamSpec("paper", int, (2, 40), choices=("paper",),
                           help="depth of every edge's tree: 'paper' = floor(log2(eps_edge n)) (n noisy under "
                                "add/remove), or an integer"),
    },
    guarantee="epsilon-DP (replace-one or add/remove): noisy n (add/remove), discrete Laplace coarse 1-way marginals, "
              "d-1 exponential-mechanism rounds and d-1 PMM edge trees (flat discrete Laplace edge histograms on "
              "small tables), composed; ledger sums to epsilon; at most 3 columns: PSMM on the whole joint",
    description="Chooses a tree of column pairs privately (as MST does), releases each pair's joint distribution "
                "with PMM in its unit square (one flat noisy histogram per pair on small tables), and samples rows "
                "along the tree. For tables with many columns; with at most 3 it releases the whole joint by PSMM.",
    codec=LevelledCodec,
    floating_point_exposure=SELECTION_EXPOSURE,
    citation=('McKenna, Miklau, Sheldon, "Winning the NIST contest: a scalable and general approach to '
              'differentially private synthetic data", J. Privacy and Confidentiality 2021 (MST tree '
              'selection); He, Vershynin, Zhu, "Algorithmically Effective Differentially Private Synthetic '
              'Data", COLT 2023, Alg 3-4 per edge'),
    order=130,
    released=("branch", "edge_levels", "root", "edge_depths", "edge_cuts", "cells_per_axis", "cells"),
    released_noisy=("tree_edges",),
    uses_n=lambda params: True,
    audit=AuditCase(d=2, params={"depth": 2, "coarse_bits": 1, "joint_columns": 1, "flat_below": 0},
                    features=edge_features,
                    trials=5_000, selection_trials=1_500, tight_coordinates=2),
)
