r"""Marginal tree: private 1-way marginals and a private spanning tree of columns, each edge a 2-D histogram.

For tables with many columns, where the full-dimensional mechanisms' error ``(eps n)^{-1/d}``
is close to the diameter, the data is modelled by a tree of 2-D marginals (docs/marginal_tree.md):

0. Every ``n``-dependent choice (depths, bins, number of rows) reads the public record count of
   :func:`privsyn_core.engine.pipeline.public_size`: ``n`` under replace-one, under add/remove the caller's
   ``public_n`` or a noisy count ``n~ = n + Lap_Z(1/eps_n)`` released as its own ledger stage.
1. Counts, one pass over the data: every pair of columns ``(a, b)`` on the leaves of its pair tree
   (:class:`~privsyn_core.mechanisms.wide_tables.tree_pieces.PairTree`), every column on its fine 1-way bins.
2. 1-way marginals (share ``marginals`` of epsilon, split equally over the ``d`` columns; MST spends half of
   epsilon on them, [MMS21] Alg. 1 line 2): a column with public levels (categories, few-valued integers) one bin
   per level, a numeric column ``2^b`` equal bins at which a uniform column expects about one noise scale of
   records per bin (:func:`marginal_bits`); discrete Laplace ``Lap_Z(S/eps_a)`` per bin, then non-negative counts
   summing to ``n~``: projected (levels), or split down the bins' dyadic hierarchy by [HVZ23] Alg. 3 (numeric)
   (:func:`~privsyn_core.mechanisms.wide_tables.tree_pieces.release_marginal`).
3. Tree selection (``d >= 3``), as MST [MMS21] Alg. 1 lines 3-5: ``d - 1`` rounds of the exponential mechanism
   over the pairs joining two components (Kruskal), with the integer score :func:`pair_score` (the L1 distance of
   the coarse 2-way counts from the product of the released 1-way marginals, each cell net of the deviation that
   noise and sampling explain), sensitivity 1 (add/remove) or 2 (replace).  The exponential mechanism is sampled
   exactly in distribution with the Gumbel-max trick.
4. Edge releases, a share of epsilon each (basic composition over the ``d - 1`` edges): while
   ``eps_edge n~ < flat_below`` each edge is measured flat, discrete Laplace on its ``2^r`` leaves at the whole
   share, ``r = floor(log2(eps_edge n~ / 2))``, projected onto the non-negative counts summing to ``n~``; above,
   PMM ([HVZ23] Alg. 3-4) on its pair tree of depth ``floor(log2(eps_edge n~))`` (:func:`edge_depth`).
5. Triples (share ``triples`` of epsilon, split over ``d - 2`` stages, taken from the edges; only while
   :func:`measures_triples`): every column drawn after the first edge gets a second conditioning column (its
   grandparent, or the root's first child), and the coarse 3-D histogram of (second parent, parent, child) is
   released with discrete Laplace noise per cell, as PrivBayes conditions on two parents ([ZCPSX17]; module
   :mod:`~privsyn_core.mechanisms.wide_tables.triples`).
6. Consistency: a column's marginal is its released 1-way histogram, its coarse bins moved to the
   inverse-variance weighted mean of it and the marginals of the edges touching the column
   (:func:`column_marginal`); every edge's histogram is raked (iterative proportional fitting) to the marginals
   of its two columns; a triple is raked to its two edges' margins (:func:`triple_step`).
7. Rows: the root column (column 0) and its first child jointly from their raked edge histogram, then
   each further column given its parent, along the tree from the root outward: the parent's bin picks a row of
   the raked edge histogram, the child's bin is drawn from that row (with a triple: its coarse bin first, given
   the parent's bin and the second parent's coarse bin), then a fine bin inside it from the child's marginal,
   then a uniform point of the fine bin.  A categorical value is a uniform point of its category's own
   sub-interval, so it decodes to that category.

Steps 6-7 read only released quantities (post-processing).  Privacy: ``eps_marginals + eps_selection + sum_e
eps_e + sum_t eps_t`` is what the mechanism receives (the pipeline adds ``eps_n`` in front when it draws a noisy
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
.. [ZCPSX17] J. Zhang, G. Cormode, C. M. Procopiuc, D. Srivastava, X. Xiao, "PrivBayes: Private Data Release
   via Bayesian Networks", ACM TODS 42(4), 2017 (Section 4: degree-k networks, noisy conditionals).
"""

from __future__ import annotations

import itertools
import math
import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from privsyn_core.data.levelled_codec import LevelledCodec
from privsyn_core.errors import DataError, ParameterError
from privsyn_core.mechanisms.base.audit import AuditCase, cell_features
from privsyn_core.mechanisms.base.rows import OneAtomPlan, RowPlan
from privsyn_core.mechanisms.base.spec import ParamSpec, W1Claim, register_staged
from privsyn_core.mechanisms.base.stages import CellCounts, Stages
from privsyn_core.mechanisms.hvz23.psmm import PsmmLayout, psmm_counts, psmm_layout, psmm_release
from privsyn_core.mechanisms.wide_tables.tree_pieces import (
    ColumnModel,
    MarginalRelease,
    PairRelease,
    PairTree,
    axis_index,
    block_cdf,
    category_bits,
    coarsen,
    cut_schedule,
    rake,
    release_marginal,
    release_pair,
    sample_blocks,
    smoothed_conditional,
    spread,
    valid_bins,
)
from privsyn_core.mechanisms.wide_tables.triples import (
    TripleRelease,
    all_triples,
    coarsen_axes,
    rake_triple,
    release_triple,
    triple_bits,
    triple_conditional,
    triple_ids,
    triple_size,
)
from privsyn_core.privacy.accounting import Ledger, split_epsilon
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
    #: Cuts of every column's fine 1-way histogram (:func:`marginal_bits`); its counts follow the pair trees'.
    marginal_bits: tuple[int, ...] = ()
    #: Every column's share of the 1-way stage's epsilon (:func:`marginal_epsilons`).
    marginal_eps: tuple[float, ...] = ()
    #: Every unordered column triple counted on coarse cells (empty without a triples stage) and their cuts.
    triples: tuple[tuple[int, int, int], ...] = ()
    triple_bits: tuple[int, ...] = ()

    @property
    def counts_per_row(self) -> int:
        """Every row is counted once in each pair tree and each column's histogram, or once in the joint grid (the
        Dask path checks it)."""
        return 1 if self.joint is not None else len(self.pairs) + len(self.marginal_bits) + len(self.triples)

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


#: Default shares of epsilon of the fine 1-way marginals and of the tree selection (the edges share the rest):
#: docs/marginal_tree.md, "Budget".
MARGINALS, SELECTION = 0.4, 0.1
#: While ``eps n~ / d`` is below SMALL_BELOW (:func:`small_table`), ``marginals`` and ``coarse_bits`` left automatic
#: take SMALL_MARGINALS and SMALL_COARSE_BITS instead of MARGINALS and COARSE_BITS.
SMALL_BELOW, SMALL_MARGINALS, SMALL_COARSE_BITS, COARSE_BITS = 160, 0.6, 2, 3
#: Default share of epsilon of the coarse 3-way histograms (:mod:`.triples`), taken from the edges' share.
TRIPLES = 0.1
#: Default of ``triples_above``: the triples are measured while ``eps_t n~`` reaches it (:func:`measures_triples`).
TRIPLES_ABOVE = 64
#: Most row-triples the 3-way stage counts (every column triple over every row, in the counting pass): beyond,
#: the triples are skipped, with a warning (:func:`triples_fit`).
TRIPLE_COUNT_BUDGET = 2 * 10 ** 9
#: Range of the cuts of a numeric column's 1-way histogram (:func:`marginal_bits`; at least ``coarse_bits`` in
#: :func:`tree_layout`, so that the selection's coarse bins are sums of measured bins).
MARGINAL_BITS = (3, 10)
#: Expected records per bin of a uniform column, in noise scales ``1/eps_col``, at the cuts of a numeric column's
#: 1-way histogram (:func:`marginal_bits`).
MARGINAL_NOISE_SCALES = 1.0
#: Default of ``flat_below``: edges are measured flat while ``eps_edge n~`` is below it (docs/marginal_tree.md).
FLAT_BELOW = 2048


def small_table(epsilon: float, n_hat: int, d: int) -> bool:
    """Whether ``eps n~ / d < SMALL_BELOW`` (a public rule: epsilon, the public count, ``d``): few records per
    column for the noise. There the automatic shares move budget to the 1-way stage and the pairs are scored on
    coarser cells, which lowered the 2-way and 1-way TVD on the benchmark's and on held-out tables; the threshold is
    tuned (docs/marginal_tree.md, "Small tables")."""
    return epsilon * max(n_hat, 0) / d < SMALL_BELOW


def resolved_shares(epsilon: float, n_hat: int, d: int, params: dict[str, Any]) -> tuple[float, int]:
    """``marginals`` and ``coarse_bits``, their automatic defaults (``None``) resolved by :func:`small_table`."""
    small = small_table(epsilon, n_hat, d)
    marginals = params["marginals"] if params["marginals"] is not None else SMALL_MARGINALS if small else MARGINALS
    coarse_bits = (params["coarse_bits"] if params["coarse_bits"] is not None
                   else SMALL_COARSE_BITS if small else COARSE_BITS)
    return float(marginals), int(coarse_bits)


def measures_triples(epsilon: float, n_hat: int, d: int, params: dict[str, Any]) -> bool:
    """Whether the ``d - 2`` triples are measured (a public rule: epsilon, the public count, ``d``, parameters).

    Each triple gets ``eps_t = triples * epsilon / (d - 2)``; below ``eps_t n~ = triples_above`` (default 64:
    the 512 coarse cells then hold on average less than 1/8 of a noise scale ``1/eps_t``) its shrunk conditional
    stays close to the tree's own while its share of epsilon is missed by the edges, and the pure tree is more
    accurate on the real tables (docs/marginal_tree.md, "Triples").
    """
    if d < 3 or params["triples"] <= 0:
        return False
    return params["triples"] * epsilon / (d - 2) * max(n_hat, 0) >= params["triples_above"]


def triples_fit(n_hat: int, d: int) -> bool:
    """Whether counting all ``C(d, 3)`` column triples over ``n~`` rows stays within :data:`TRIPLE_COUNT_BUDGET`
    (a public rule: the public count and ``d``). The tree that names the ``d - 2`` triples is chosen after the
    counting pass, so the pass counts every triple: ``C(d, 3)`` grows as ``d^3`` (19,600 triples at ``d = 50``)."""
    return math.comb(d, 3) * max(n_hat, 0) <= TRIPLE_COUNT_BUDGET


def flat_edges(eps_edge: float, n_hat: int, params: dict[str, Any]) -> bool:
    """Whether every edge is measured flat (a public rule: the edge budget, the public count and a parameter).

    PMM spreads ``eps_edge`` over the ``r + 1`` levels of its tree; below ``eps_edge n~ = flat_below`` a flat
    measurement of the leaves at the whole ``eps_edge`` (as PSMM and MST measure their tables) is more accurate
    in W1 and in 2-way TVD on the real tables (docs/marginal_tree.md, "Edges"); above, PMM's levels win in W1.
    """
    return eps_edge * max(n_hat, 0) < params.get("flat_below", FLAT_BELOW)


def edge_depth(eps_edge: float, n_hat: int, flat: bool, params: dict[str, Any]) -> int:
    """Leaves ``2^r`` of every pair tree: PMM's paper depth ``r = floor(log2(eps_edge n~))`` ([HVZ23], d = 2), one
    level fewer for a flat edge (about two noise scales ``1/eps_edge`` of records per leaf on average), or the
    ``depth`` parameter."""
    if params["depth"] != "paper":
        return int(params["depth"])
    scale = eps_edge * max(n_hat, 1) / (2 if flat else 1)
    return max(0, math.floor(math.log2(scale))) if scale >= 2 else 0


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
    marginals, coarse_bits = resolved_shares(epsilon, n, d, params)
    parts: list[tuple[str, float]] = [("marginals", marginals)]
    edge_share = 1.0 - marginals
    if d >= 3:
        parts.append(("selection", params["selection"]))
        edge_share -= params["selection"]
    if edge_share <= 0:
        raise ParameterError(f"marginal_tree: marginals ({marginals}) and selection "
                             f"({params['selection']}) leave no budget for the edges")
    warnings = []
    triple_share = params["triples"] if measures_triples(epsilon, n, d, params) else 0.0
    if triple_share > 0 and not triples_fit(n, d):
        warnings.append(f"marginal_tree: no 3-way stage: counting all {math.comb(d, 3):,} column triples over "
                        f"every row would pass the budget of {TRIPLE_COUNT_BUDGET:.0e} row-triples; its share "
                        "of epsilon goes to the edges")
        triple_share = 0.0
    edge_share -= triple_share
    if edge_share <= 0:
        raise ParameterError(f"marginal_tree: marginals, selection and triples ({triple_share}) leave no budget "
                             "for the edges")
    parts += [(f"edge {k}", edge_share / (d - 1)) for k in range(d - 1)]
    if triple_share > 0:
        parts += [(f"triple {k}", triple_share / (d - 2)) for k in range(d - 2)]
    shares = split_epsilon(epsilon, parts)
    n_hat = int(n)
    eps_edge = dict(shares)["edge 0"]
    caps = [category_bits(k) for k in levels]
    coarse = tuple(min(coarse_bits, c) for c in caps)
    column_eps = marginal_epsilons(dict(shares)["marginals"], levels)
    fine = tuple(max(marginal_bits(k, e, n_hat), c) for k, e, c in zip(levels, column_eps, coarse, strict=True))
    pairs_ab = [(a, b) for a in range(d) for b in range(a + 1, d)]
    flat = flat_edges(eps_edge, n_hat, params)
    r = edge_depth(eps_edge, n_hat, flat, params)
    r_budget = math.floor(math.log2(PAIR_CELL_BUDGET / len(pairs_ab)))
    if r > r_budget:
        warnings.append(f"marginal_tree: edge depth {r} capped at {r_budget} (all {len(pairs_ab)} pair trees are "
                        f"counted in one pass within {PAIR_CELL_BUDGET} cells)")
    pairs = []
    for a, b in pairs_ab:
        depth = min(max(r, coarse[a] + coarse[b]), r_budget)
        pairs.append(PairTree(a, b, (levels[a], levels[b]), cut_schedule(depth, (caps[a], caps[b]))))
    triples = all_triples(d) if triple_share > 0 else ()
    t_bits = triple_bits(coarse) if triples else ()
    sizes = ([2 ** p.depth for p in pairs] + [2 ** bits for bits in fine]
             + [triple_size(t, t_bits) for t in triples])
    offsets = tuple(np.cumsum([0] + sizes).tolist())
    return TreeLayout(levels, n_hat, shares, tuple(pairs), offsets, coarse, tuple(warnings),
                      flat=flat, marginal_bits=fine, marginal_eps=column_eps, triples=triples, triple_bits=t_bits)


def marginal_epsilons(epsilon: float, levels: tuple[int, ...]) -> tuple[float, ...]:
    """Each column's share of the 1-way stage: ``epsilon`` split equally (a public rule: the number of columns)."""
    return tuple(e for _, e in split_epsilon(epsilon, [(str(a), 1.0) for a in range(len(levels))]))


def marginal_bits(levels: int, epsilon: float, n_hat: int) -> int:
    """Cuts of a column's fine 1-way histogram (public: the schema, the column's budget, the public count).

    A column with ``K`` levels is measured one bin per level (``ceil(log2 K)`` cuts, virtual indices empty).  A
    numeric column gets ``2^b`` equal bins, ``b = floor(log2(eps_col n~ / c))`` with ``c`` =
    :data:`MARGINAL_NOISE_SCALES`, clipped to :data:`MARGINAL_BITS`: the finest bins at which a uniform column's
    expected count reaches ``c`` noise scales ``1/eps_col``; below, a bin's count is mostly noise wherever the
    column is not concentrated (docs/marginal_tree.md, "1-way marginals").
    """
    if levels:
        return category_bits(levels)
    low, high = MARGINAL_BITS
    scale = epsilon * max(n_hat, 1) / MARGINAL_NOISE_SCALES
    return int(min(max(math.floor(math.log2(scale)) if scale >= 1 else 0, low), high))


def tree_counts_stage(unit: np.ndarray, layout: TreeLayout) -> CellCounts:
    """Leaf-grid counts of every pair tree, concatenated (pair ``k`` at ``offsets[k]``)."""
    if layout.joint is not None:
        return psmm_counts(np.asarray(unit), layout.joint)
    ids = itertools.chain((pair.grid_ids(unit) for pair in layout.pairs),  # one at a time: memory of one pair
                          (axis_index(unit[:, a], layout.levels[a], bits)
                           for a, bits in enumerate(layout.marginal_bits)),
                          triple_ids(unit, layout.triples, layout.levels, layout.triple_bits))
    out = np.zeros(layout.offsets[-1], dtype=np.int64)
    for cells, start, stop in zip(ids, layout.offsets[:-1], layout.offsets[1:], strict=True):
        out[start:stop] = np.bincount(cells, minlength=stop - start)
    return CellCounts.from_dense(out)


def tree_release(counts: CellCounts, n: int, d: int, epsilon: float, *, neighbouring: str, n_synthetic: int | None,
                 rng: np.random.Generator, layout: TreeLayout,
                 params: dict[str, Any]) -> tuple[MechanismOutput, RowPlan]:
    """Selection, edge releases, consistency and the row plan, from the pair counts only."""
    if layout.joint is not None:
        return joint_release(counts, n, d, epsilon, neighbouring=neighbouring, n_synthetic=n_synthetic, rng=rng,
                             grid=layout.joint, ledger=tree_ledger(layout, d))
    marg_rng, select_rng, edge_rng, sample_rng, triple_rng = rng.spawn(5)
    dense = counts.dense(layout.offsets[-1])
    grids = [dense[s:e].reshape(2 ** p.cuts[0], 2 ** p.cuts[1])
             for p, s, e in zip(layout.pairs, layout.offsets[:-1], layout.offsets[1:], strict=False)]
    k = len(layout.pairs)
    histograms = [dense[s:e] for s, e in zip(layout.offsets[k:k + d], layout.offsets[k + 1:k + d + 1], strict=True)]
    timings: dict[str, float] = {}
    sensitivity = count_sensitivity(neighbouring)

    start = time.perf_counter()
    one_way = [release_marginal(h, levels, bits, eps_a, neighbouring, layout.n_hat, g) for h, levels, bits, eps_a, g
               in zip(histograms, layout.levels, layout.marginal_bits, layout.marginal_eps, marg_rng.spawn(d),
                      strict=True)]
    timings["marginals"] = time.perf_counter() - start

    start = time.perf_counter()
    if d >= 3:
        selected, select_diag = select_tree(grids, layout, one_way, sensitivity, select_rng)
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
    order = drawing_order(releases, d)
    triples = release_triples(dense, layout, order, neighbouring, triple_rng)
    timings["triples"] = time.perf_counter() - start

    start = time.perf_counter()
    sampler = build_sampler(order, one_way, layout.levels, d, triples)
    timings["consistency"] = time.perf_counter() - start
    total = n_synthetic if n_synthetic is not None else max(layout.n_hat, 0)
    warnings = list(layout.warnings)
    if total == 0:
        warnings.append("the noisy record count was 0: marginal_tree released no synthetic rows")
    plan = TreePlan(np.array([total], dtype=np.int64), np.zeros((1, d)), sample_rng, sampler=sampler,
                    shuffle=False)
    edges = [[r.tree.a, r.tree.b] for r in releases]
    out = MechanismOutput(
        unit=np.empty((0, d)), ledger=tree_ledger(layout, d),
        diagnostics={"tree": {"edges": edges, **select_diag},
                     "marginals": [{"bits": m.bits, "epsilon": eps_a, "sigma": m.sigma, "true_count": m.true_count,
                                    "noisy_count": m.noisy, "count": m.counts}
                                   for m, eps_a in zip(one_way, layout.marginal_eps, strict=True)],
                     "edges": [{"columns": [r.tree.a, r.tree.b], "cuts": list(r.tree.cuts),
                                "true_count": r.true_leaves, "count": r.joint, "sigma": r.sigmas,
                                "noisy_root": r.noisy_root,
                                "levels": [{"lo": lo, "hi": hi, "noisy_count": noisy}
                                           for (lo, hi), noisy in zip(r.measured_boxes(), r.noisy_levels,
                                                                      strict=True)]}
                               for r in releases],
                     "triples": [{"columns": list(t.columns), "sigma": t.sigma, "noisy_count": t.noisy,
                                  "true_count": t.true_count, "count": t.counts} for t in triples if t is not None]},
        params={"branch": "tree", "edge_levels": "flat" if layout.flat else "pmm", "tree_edges": edges, "root": 0,
                "edge_depths": [r.tree.depth for r in releases],
                "edge_cuts": [list(r.tree.cuts) for r in releases], "marginal_bits": list(layout.marginal_bits),
                "triples": [list(t.columns) for t in triples if t is not None],
                "triple_bits": list(layout.triple_bits)},
        timings=timings, warnings=warnings)
    return out, plan


def joint_release(counts: CellCounts, n: int, d: int, epsilon: float, *, neighbouring: str, n_synthetic: int | None,
                  rng: np.random.Generator, grid: PsmmLayout, ledger: Ledger) -> tuple[MechanismOutput, RowPlan]:
    """The narrow-table branch: PSMM ([HVZ23] Alg. 1 with the corrected d_BL projection) on the whole joint.

    Every stage is :func:`privsyn_core.mechanisms.hvz23.psmm.psmm_release` at the full ``epsilon``: discrete
    Laplace cell counts (sensitivity 1 add/remove, 2 replace), then post-processing.  The output
    keeps this mechanism's shape: its ``ledger`` (one stage, :func:`tree_ledger`), ``branch = "joint"``, no tree.
    """
    out, plan = psmm_release(counts, n, d, epsilon, neighbouring=neighbouring, n_synthetic=n_synthetic, rng=rng,
                             layout=grid, params=JOINT_PSMM_PARAMS)
    out.warnings = [w.replace("psmm:", "marginal_tree (joint branch, psmm):") for w in out.warnings]
    k = grid[0]
    out.ledger = ledger
    out.diagnostics = {"tree": {"edges": [], "scores": None}, "joint": out.diagnostics}
    out.params = {"branch": "joint", "tree_edges": [], "root": 0, "edge_depths": [], "edge_cuts": [],
                  "cells_per_axis": k, "cells": k ** d}
    return out, plan


def tree_privacy_map(epsilon: float, neighbouring: str, params: dict[str, Any], n: int | None, d: int) -> Ledger:
    """The privacy map: :func:`tree_ledger` of the stages' layout (:func:`tree_layout`, public inputs only)."""
    return tree_ledger(STAGES.layout(n, d, epsilon, neighbouring, params), d)


def tree_ledger(layout: TreeLayout, d: int) -> Ledger:
    """The run's ledger: every share of ``layout.shares`` labelled from the layout alone (public inputs).

    An edge's stage is named by its position in the selected tree, not by its pair: the pairs are chosen by the
    selection stage, released as ``tree_edges`` (and their depths as ``edge_depths``), while the ledger is stated
    before the run.
    """
    if layout.joint is not None:
        k = layout.joint[0]
        return [(f"joint distribution of the {d} columns: PSMM on {k}^{d} cells, discrete Laplace counts", eps)
                for _, eps in layout.shares]
    return [(_stage_label(name, layout), eps) for name, eps in layout.shares]


def _stage_label(name: str, layout: TreeLayout) -> str:
    if name == "marginals":
        return f"1-way marginals of {len(layout.levels)} columns: discrete Laplace per bin"
    if name == "selection":
        return f"tree selection: {len(layout.levels) - 1} exponential-mechanism rounds (Gumbel-max)"
    if name.startswith("triple "):
        return f"{name} of the selected tree: coarse 3-way histogram, discrete Laplace per cell"
    if layout.flat:
        return f"{name} of the selected tree: flat, discrete Laplace per leaf"
    return f"{name} of the selected tree: PMM, discrete Laplace per level"


def select_tree(grids: list[np.ndarray], layout: TreeLayout, one_way: list[MarginalRelease], sensitivity: int,
                select_rng: np.random.Generator) -> tuple[list[int], dict[str, Any]]:
    r"""MST's private Kruskal [MMS21]: indices of the ``d - 1`` chosen pairs, and the diagnostics.

    Each pair's integer score ``q_ab`` (:func:`pair_score`) reads the true coarse 2-way counts and released values
    only, and one record changes one coarse 2-way cell (two under replace), so ``|q(D) - q(D')| <= s``.  Each
    round draws a pair joining two components with probability ``proportional to exp(eps_round q / (2 s))``
    (exponential mechanism, McSherry-Talwar), sampled as the argmax of ``eps_round q / (2 s) + Gumbel``.
    """
    d, pairs, coarse = len(layout.levels), layout.pairs, layout.coarse
    scores = np.array([pair_score(g.reshape(2 ** coarse[p.a], 2 ** (p.cuts[0] - coarse[p.a]), 2 ** coarse[p.b], -1)
                                  .sum(axis=(1, 3)), one_way[p.a], one_way[p.b], coarse[p.a], coarse[p.b],
                                  layout.n_hat) for g, p in zip(grids, pairs, strict=True)], dtype=np.int64)
    round_eps = [e for _, e in split_epsilon(layout.share("selection"), [(str(i), 1.0) for i in range(d - 1)])]
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
    diag = {"pairs": [[p.a, p.b] for p in pairs], "scores": scores, "chosen": chosen, "perturbed_utility": utilities}
    return chosen, diag


def pair_score(joint: np.ndarray, one_a: MarginalRelease, one_b: MarginalRelease, bits_a: int, bits_b: int,
               n_hat: int) -> int:
    r"""How far a pair's coarse 2-way counts are from independence, beyond what noise and sampling explain.

    With ``p^_a`` the released noisy 1-way counts of column ``a`` summed into its ``2^bits_a`` coarse bins (clamped
    at 0, normalised), ``e_ij = round(n~ p^_ai p^_bj)`` and

    .. math:: q_{ab} = \sum_{ij} \maxig(|N_{ij} - e_{ij}| - \lceil\delta_{ij}
ceil, 0ig), \qquad
              \delta_{ij} = \sqrt{2/\pi}\,\sqrt{\hat p_{ai}^2 v_b + \hat p_{bj}^2 v_a
              + 	ilde n\, \hat p_{ai}\hat p_{bj}(1 - \hat p_{ai}\hat p_{bj})},

    ``v_a`` the public noise variance of one coarse bin of ``a`` (:meth:`MarginalRelease.coarse_variance`).
    ``delta_ij`` is the mean absolute deviation of ``N_ij - e_ij`` expected from the marginals' noise and from
    sampling alone under independence.  MST's score [MMS21] is the plain L1 term; with noisy 1-way marginals of
    many fine bins it grows with the noise of the columns' marginals (on a 10-column table it made every column
    with a spread marginal a hub of the tree, docs/marginal_tree.md, "Selection").  Each term is 1-Lipschitz in the
    integer count ``N_ij`` and ``e``, ``delta`` read released values only, so ``q`` is an integer with the
    sensitivity of the 2-way counts.
    """
    pa, pb = (_distribution(np.maximum(coarsen(m.noisy, bits), 0).astype(float), m.levels, bits)
              for m, bits in ((one_a, bits_a), (one_b, bits_b)))
    product = np.outer(pa, pb)
    n = max(n_hat, 0)
    expected = np.rint(n * product).astype(np.int64)
    spread = (np.outer(pa ** 2, np.full(len(pb), one_b.coarse_variance(bits_b)))
              + np.outer(np.full(len(pa), one_a.coarse_variance(bits_a)), pb ** 2) + n * product * (1 - product))
    delta = np.ceil(math.sqrt(2 / math.pi) * np.sqrt(spread)).astype(np.int64)
    return int(np.maximum(np.abs(joint - expected) - delta, 0).sum())


def _distribution(counts: np.ndarray, levels: int, bits: int) -> np.ndarray:
    """Released counts as probabilities (uniform over the in-domain bins when they hold nothing)."""
    if counts.sum() > 0:
        return counts / counts.sum()
    valid = valid_bins(levels, bits)
    return valid / valid.sum()


@dataclass
class TripleStep:
    """How a column is drawn given its parent and a second conditioning column (:mod:`.triples`)."""

    given: int  # the second conditioning column g
    bits: tuple[int, int, int]  # cuts of g, the parent and the child on the triple's coarse cells
    coarse_cdf: np.ndarray  # block CDFs of the child's coarse bin, one block per (g coarse bin, parent edge bin)
    fine_cdf: np.ndarray  # block CDFs of the child's edge bin, one block per (parent edge bin, child coarse bin)


@dataclass
class TreeSampler:
    """Post-processing of the released edges: column models, the tree from the root, raked edge CDFs."""

    d: int
    columns: list[ColumnModel]
    root: int
    steps: list[tuple[int, int, int, int, np.ndarray]]  # parent, child, parent cuts, child cuts, block CDF
    first_joint: np.ndarray  # CDF of the raked histogram of the first edge (root and its first child drawn jointly)
    triple_steps: list[TripleStep | None] = field(default_factory=list)  # per step, or None (edge only)

    def sample(self, total: int, rng: np.random.Generator) -> np.ndarray:
        rows = np.empty((total, self.d))
        fine: dict[int, np.ndarray] = {}
        caches: list[dict] = [{} for _ in range(self.d)]
        root = self.columns[self.root]
        first = self.steps[0]
        cell = sample_blocks(self.first_joint, np.zeros(total, dtype=np.int64), len(self.first_joint), rng)
        fine[self.root] = root.refine(cell >> first[3], first[2], rng, caches[self.root])
        rows[:, self.root] = root.to_unit(fine[self.root], rng)
        triple_steps = self.triple_steps or [None] * len(self.steps)
        for k, ((parent, child, pc, cc, cdf), triple) in enumerate(zip(self.steps, triple_steps, strict=True)):
            parent_bin = fine[parent] >> (self.columns[parent].fine_bits - pc)
            if k == 0:
                child_bin = cell & (2 ** cc - 1)
            elif triple is not None:
                child_bin = self._child_given_two(triple, fine, parent, parent_bin, cc, rng)
            else:
                child_bin = sample_blocks(cdf, parent_bin, 2 ** cc, rng) - parent_bin * 2 ** cc
            model = self.columns[child]
            fine[child] = model.refine(child_bin, cc, rng, caches[child])
            rows[:, child] = model.to_unit(fine[child], rng)
        return rows

    def _child_given_two(self, triple: TripleStep, fine: dict[int, np.ndarray], parent: int, parent_bin: np.ndarray,
                         cc: int, rng: np.random.Generator) -> np.ndarray:
        """The child's edge bin: its coarse bin given (g, parent) coarse cells, then the edge bin inside it given
        the parent's edge bin."""
        tg, _, tc = triple.bits
        pc = int(math.log2(len(triple.fine_cdf) // 2 ** cc))
        cell = (fine[triple.given] >> (self.columns[triple.given].fine_bits - tg)) << pc | parent_bin
        coarse = sample_blocks(triple.coarse_cdf, cell, 2 ** tc, rng) - cell * 2 ** tc
        block = parent_bin * 2 ** tc + coarse
        return sample_blocks(triple.fine_cdf, block, 2 ** (cc - tc), rng) - parent_bin * 2 ** cc


def drawing_order(releases: list[PairRelease], d: int) -> list[tuple[int, int, PairRelease]]:
    """The tree's edges as ``(parent, child, release)`` in breadth-first order from the root, column 0."""
    neighbours: dict[int, list[tuple[int, PairRelease]]] = {a: [] for a in range(d)}
    for rel in releases:
        neighbours[rel.tree.a].append((rel.tree.b, rel))
        neighbours[rel.tree.b].append((rel.tree.a, rel))
    order: list[tuple[int, int, PairRelease]] = []
    seen, queue = {0}, [0]
    while queue:
        parent = queue.pop(0)
        for child, rel in neighbours[parent]:
            if child not in seen:
                seen.add(child)
                queue.append(child)
                order.append((parent, child, rel))
    return order


def second_parents(order: list[tuple[int, int, PairRelease]]) -> list[int]:
    """The second conditioning column of every step after the first: the parent's parent, or for a child of the root
    the root's first child (drawn with the root).  ``d - 2`` columns, a public count."""
    parent_of = {child: parent for parent, child, _ in order}
    first_child = order[0][1]
    return [parent_of.get(parent, first_child) for parent, _, _ in order[1:]]


def release_triples(dense: np.ndarray, layout: TreeLayout, order: list[tuple[int, int, PairRelease]],
                    neighbouring: str, rng: np.random.Generator) -> list[TripleRelease | None]:
    """Release the ``d - 2`` triples (second parent, parent, child) the tree names, each at its stage's share of
    epsilon (:func:`~privsyn_core.mechanisms.wide_tables.triples.release_triple`); ``None`` for the first step
    (drawn jointly with the root) and for every step without triples."""
    if not layout.triples:
        return [None] * len(order)
    first = len(layout.pairs) + len(layout.levels)
    where = {t: (layout.offsets[first + k], layout.offsets[first + k + 1]) for k, t in enumerate(layout.triples)}
    triple_eps = [e for name, e in layout.shares if name.startswith("triple ")]
    out: list[TripleRelease | None] = [None]
    for (parent, child, _), given, eps_t, g in zip(order[1:], second_parents(order), triple_eps,
                                                   rng.spawn(len(triple_eps)), strict=True):
        low, mid, high = sorted((given, parent, child))
        start, stop = where[low, mid, high]
        out.append(release_triple(dense[start:stop], (low, mid, high), (given, parent, child), layout.levels,
                                  layout.triple_bits, eps_t, neighbouring, layout.n_hat, g))
    return out


def build_sampler(order: list[tuple[int, int, PairRelease]], one_way: list[MarginalRelease],
                  levels: tuple[int, ...], d: int, triples: list[TripleRelease | None] | None = None) -> TreeSampler:
    """Consolidated column marginals, raked edge histograms and the sampling order (module docstring, 4-5).

    A column's marginal (:func:`column_marginal`) is its released fine 1-way histogram, its coarse bins moved to the
    inverse-variance weighted mean of it and the marginals of the edges touching the column; each edge histogram is
    raked to the marginals of its two columns; a released triple refines the child's draw
    (:func:`triple_step`).  Post-processing of released values.
    """
    touching: dict[int, list[tuple[np.ndarray, int, PairRelease, int]]] = {a: [] for a in range(d)}
    for _, _, rel in order:
        joint = rel.joint.astype(float)
        mass = joint.sum()
        joint = joint / mass if mass > 0 else rel.tree.valid_leaves() / rel.tree.valid_leaves().sum()
        for axis, column in enumerate((rel.tree.a, rel.tree.b)):
            touching[column].append((joint.sum(axis=1 - axis), rel.tree.cuts[axis], rel, axis))
    columns = [column_marginal(one_way[a], touching[a]) for a in range(d)]
    steps: list[tuple[int, int, int, int, np.ndarray]] = []
    triple_steps: list[TripleStep | None] = []
    joints: dict[tuple[int, int], np.ndarray] = {}  # the model's (parent, child) joint of every edge drawn so far
    for (parent, child, rel), triple in zip(order, triples or [None] * len(order), strict=True):
        ca, cb = rel.tree.cuts
        joint = rel.joint.astype(float) if rel.tree.a == parent else rel.joint.T.astype(float)
        pc, cc = (ca, cb) if rel.tree.a == parent else (cb, ca)
        parent_marginal = columns[parent].at(pc)
        conditional = smoothed_conditional(joint, _leaf_sigma(rel))
        raked = rake(parent_marginal[:, None] * conditional, parent_marginal, columns[child].at(cc))
        fallback = np.broadcast_to(columns[child].at(cc), raked.shape)
        if not steps:
            direct = rake(joint, parent_marginal, columns[child].at(cc))
            first_joint = block_cdf(direct.ravel()[None, :], direct.ravel()[None, :])
        joints[parent, child] = direct if not steps else raked
        joints[child, parent] = joints[parent, child].T
        steps.append((parent, child, pc, cc, block_cdf(raked, fallback)))
        triple_steps.append(None if triple is None else
                            triple_step(triple, joints[triple.columns[:2]], raked, columns, pc, cc))
    return TreeSampler(d, columns, 0, steps, first_joint, triple_steps)


def triple_step(triple: TripleRelease, given_parent: np.ndarray, raked: np.ndarray, columns: list[ColumnModel],
                pc: int, cc: int) -> TripleStep:
    r"""The child's two-stage draw from a released triple ``(g, p, c)``, the model's ``(g, p)`` joint and the raked
    edge ``(p, c)`` (``2^pc x 2^cc``).

    The triple's conditional ``Q(c | g, p)`` on coarse bins (:func:`~privsyn_core.mechanisms.wide_tables.triples.
    triple_conditional`, the edge's coarse conditional ``P(c | p)`` as its prior), times the ``(g, p)`` joint, is
    raked to the ``(g, p)`` and ``(p, c)`` margins (:func:`~privsyn_core.mechanisms.wide_tables.triples.rake_triple`)
    so that the tree's 2-way and 1-way marginals stay as released.  The child's coarse bin is then drawn from

    .. math:: P(c \mid g, p_{\text{edge}}) \propto P_{\text{edge}}(c \mid p_{\text{edge}})\,
              \frac{Q(c \mid g, p)}{P(c \mid p)},

    the edge's conditional at the parent's edge bin times the interaction that ``g`` adds at the coarse bins, and
    its edge bin from the raked edge's row restricted to that coarse bin.
    """
    given, _, child = triple.columns
    stored = tuple(int(math.log2(s)) for s in triple.counts.shape)
    tg, tp, tc = (min(stored[0], int(math.log2(given_parent.shape[0]))),
                  min(stored[1], pc, int(math.log2(given_parent.shape[1]))), min(stored[2], cc))
    edge_coarse = coarsen_axes(raked, (tp, tc))
    prior = _rows(edge_coarse)
    gp = coarsen_axes(given_parent, (tg, tp))
    measured = triple_conditional(triple, prior, (tg, tp, tc)).reshape(gp.shape + (-1,))
    joint = rake_triple(gp[:, :, None] * measured, gp / max(gp.sum(), 1e-300),
                        edge_coarse / max(edge_coarse.sum(), 1e-300))
    interaction = np.divide(_rows(joint.reshape(-1, 2 ** tc)).reshape(joint.shape), prior[None],
                            out=np.zeros_like(joint), where=prior[None] > 0)
    at_edge = _rows(coarsen_axes(raked, (pc, tc)))  # P_edge(c coarse | parent edge bin)
    combined = (at_edge[None, :, :] * interaction[:, np.arange(2 ** pc) >> (pc - tp), :]).reshape(-1, 2 ** tc)
    width = 2 ** (cc - tc)
    fine_fallback = np.broadcast_to(columns[child].at(cc).reshape(-1, width), (2 ** pc, 2 ** tc, width))
    return TripleStep(given, (tg, tp, tc), block_cdf(combined, np.tile(at_edge, (2 ** tg, 1))),
                      block_cdf(raked.reshape(-1, width), fine_fallback.reshape(-1, width)))


def _rows(table: np.ndarray) -> np.ndarray:
    """Rows of a 2-D table normalised to sum to 1 (rows without mass stay 0)."""
    total = table.sum(axis=1, keepdims=True)
    return np.divide(table, total, out=np.zeros_like(table, dtype=float), where=total > 0)


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


def column_marginal(one_way: MarginalRelease, edges: list[tuple[np.ndarray, int, PairRelease, int]]) -> ColumnModel:
    """A column's consolidated marginal on its finest bins.

    The fine bins are those of the 1-way release, or an edge's when it cuts the axis more often (then the shape
    inside a 1-way bin is the edges' precision-weighted mean).  At ``c``, the fewest cuts of the touching edges and
    of the 1-way release, every coarse bin is moved to the precision-weighted mean of the 1-way's and the edges'
    coarse distributions (inverse variances of their noisy counts before projection, public:
    :meth:`MarginalRelease.coarse_variance`, :func:`_coarse_variance`), as MST's estimation combines its 1-way and
    2-way measurements; a coarse bin that the 1-way estimate leaves empty stays empty (the edges' noise
    would otherwise put mass on values no row holds).  Reads released values only.
    """
    levels, bits = one_way.levels, one_way.bits
    total = one_way.counts.sum()
    base = one_way.counts / total if total > 0 else valid_bins(levels, bits) / valid_bins(levels, bits).sum()
    fine_bits = max([bits] + [cuts for _, cuts, _, _ in edges])
    valid = valid_bins(levels, fine_bits)
    if fine_bits > bits:  # an edge is finer: its shape inside the 1-way bins
        finer = [(m, cuts, 1.0 / _coarse_variance(rel, axis, bits)) for m, cuts, rel, axis in edges if cuts > bits]
        shape = np.average([spread(m, cuts, fine_bits, valid) for m, cuts, _ in finer], axis=0,
                           weights=[w for _, _, w in finer])
        base = _with_coarse(shape, base, valid)
    if not edges:
        return ColumnModel(levels, fine_bits, base)
    c = min([bits] + [cuts for _, cuts, _, _ in edges])
    held = coarsen(base, c)
    weights = [1.0 / one_way.coarse_variance(c)] + [1.0 / _coarse_variance(rel, axis, c) for _, _, rel, axis in edges]
    target = np.average([held] + [coarsen(m, c) if cuts > c else m for m, cuts, _, _ in edges], axis=0,
                        weights=weights)
    target = np.where(held > 0, target, 0.0)
    if target.sum() <= 0:
        return ColumnModel(levels, fine_bits, base)
    return ColumnModel(levels, fine_bits, _with_coarse(base, target / target.sum(), valid))


def _with_coarse(fine: np.ndarray, coarse: np.ndarray, valid: np.ndarray) -> np.ndarray:
    """``fine`` rescaled inside each of the ``len(coarse)`` blocks to the block's mass ``coarse`` (uniform over the
    in-domain bins of a block where ``fine`` has no mass)."""
    step = len(fine) // len(coarse)
    blocks = fine.reshape(-1, step)
    mass = blocks.sum(axis=1)
    uniform = valid.reshape(-1, step).astype(float)
    uniform /= np.maximum(uniform.sum(axis=1, keepdims=True), 1)
    shape = np.where(mass[:, None] > 0, blocks / np.maximum(mass, 1e-300)[:, None], uniform)
    return (shape * coarse[:, None]).ravel()


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


def marginal_features(out: MechanismOutput, pair: Any) -> np.ndarray:
    """Audit features of the 1-way stage: :func:`~privsyn_core.mechanisms.base.audit.cell_features` of column 0's noisy
    histogram before its projection, its bins as slabs ``[i 2^-b, (i+1) 2^-b] x [0,1]^(d-1)`` of the cube."""

    first = out.diagnostics["marginals"][0]
    bins, d = len(first["noisy_count"]), pair.base.shape[1]
    lo, hi = np.zeros((bins, d)), np.ones((bins, d))
    lo[:, 0], hi[:, 0] = np.arange(bins) / bins, np.arange(1, bins + 1) / bins
    level = {"lo": lo, "hi": hi, "noisy_count": first["noisy_count"]}
    return cell_features(MechanismOutput(unit=out.unit, ledger=out.ledger, diagnostics={"levels": [level]}), pair)


def triple_features(out: MechanismOutput, pair: Any) -> np.ndarray:
    """Audit features of the triples stage: :func:`~privsyn_core.mechanisms.base.audit.cell_features` of the first
    released triple's noisy cells before their projection, each cell a box of the cube in its three columns
    (numeric columns: the corners' cells are the triple's first and last)."""
    first = out.diagnostics["triples"][0]
    triple = sorted(first["columns"])
    bits = [out.params["triple_bits"][a] for a in triple]
    index = np.indices([2 ** b for b in bits]).reshape(3, -1).T
    d = pair.base.shape[1]
    lo, hi = np.zeros((len(index), d)), np.ones((len(index), d))
    for k, (column, b) in enumerate(zip(triple, bits, strict=True)):
        lo[:, column], hi[:, column] = index[:, k] / 2 ** b, (index[:, k] + 1) / 2 ** b
    level = {"lo": lo, "hi": hi, "noisy_count": first["noisy_count"]}
    return cell_features(MechanismOutput(unit=out.unit, ledger=out.ledger, diagnostics={"levels": [level]}), pair)


def triple_pair_loss(spec: Any, pair: Any, epsilon: float, params: dict[str, Any]) -> float:
    """The loss that :func:`triple_features` reads: the first triple's stage (L1 sensitivity ``S`` at noise
    ``S / eps_t``)."""
    ledger = spec.privacy_map(epsilon, pair.relation, params, len(pair.base), pair.base.shape[1])
    return float(next(eps for label, eps in ledger if label.startswith("triple 0")))


def marginal_pair_loss(spec: Any, pair: Any, epsilon: float, params: dict[str, Any]) -> float:
    """The loss that :func:`marginal_features` reads: column 0's share of the 1-way stage (its histogram has L1
    sensitivity ``S`` at noise ``S / eps_0``)."""
    out = spec.run(pair.base, epsilon, neighbouring=pair.relation, n_synthetic=None, rng=np.random.default_rng(0),
                   **params)
    return float(out.diagnostics["marginals"][0]["epsilon"])


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
    privacy_map=tree_privacy_map,
    title="Marginal tree of PMM pieces",
    paper="MST [MMS21] tree selection + 004 Alg 3-4 per edge",
    data_kind="continuous",
    neighbouring=("replace", "add_remove"),
    is_private=True,
    params={
        "marginals": ParamSpec(None, float, (0.01, 0.9),
                               help="share of epsilon for the fine 1-way marginals of every column (split equally "
                                    f"over the columns); 'auto' = {MARGINALS}, or {SMALL_MARGINALS} while eps n / d "
                                    f"< {SMALL_BELOW} (n noisy under add/remove)"),
        "selection": ParamSpec(SELECTION, float, (0.01, 0.9),
                               help="share of epsilon for the tree selection (exponential mechanism, d - 1 rounds); "
                                    "unused with 2 columns"),
        "coarse_bits": ParamSpec(None, int, (1, 6),
                                 help="cuts per axis of the public discretisation that scores pairs (2^bits bins; "
                                      "levels up to 2^bits); every edge cuts each axis at least this often; 'auto' "
                                      f"= {COARSE_BITS}, or {SMALL_COARSE_BITS} while eps n / d < {SMALL_BELOW}"),
        "joint_columns": ParamSpec(JOINT_COLUMNS, int, (1, 3),
                                   help="with at most this many columns (numeric or categorical), the whole joint is "
                                        "released by PSMM at the full budget instead of a tree (1: always a tree)"),
        "flat_below": ParamSpec(FLAT_BELOW, int, (0, 10 ** 9),
                                help="edges are measured flat (all their budget on the leaves) while eps_edge n "
                                     "(n noisy under add/remove) is below this; 0: always PMM's levels"),
        "triples": ParamSpec(TRIPLES, float, (0.0, 0.9),
                             help="share of epsilon for the d - 2 coarse 3-way histograms (second parent, parent, "
                                  "child) that refine each column's draw along the tree; 0: a pure tree"),
        "triples_above": ParamSpec(TRIPLES_ABOVE, int, (0, 10 ** 9),
                                   help="the triples are measured while each one's epsilon times n (n noisy under "
                                        "add/remove) reaches this; below, their share goes to the edges"),
        "depth": ParamSpec("paper", int, (2, 40), choices=("paper",),
                           help="depth of every edge's tree: 'paper' = floor(log2(eps_edge n)) for PMM edges, "
                                "floor(log2(eps_edge n / 2)) for flat ones (n noisy under add/remove), or an integer"),
    },
    guarantee="epsilon-DP (replace-one or add/remove): noisy n (add/remove), discrete Laplace 1-way marginals of "
              "every column, d-1 exponential-mechanism rounds, d-1 edge histograms (flat discrete Laplace, or PMM "
              "trees on large tables) and, where eps n allows, d-2 coarse 3-way histograms (discrete Laplace), "
              "composed; ledger sums to epsilon; at most 3 columns: PSMM on the whole joint",
    description="Releases every column's 1-way marginal, chooses a tree of column pairs privately (as MST does), "
                "releases each pair's joint distribution (a noisy histogram, or PMM in its unit square on large "
                "tables) and, where the budget and rows allow, a coarse 3-way histogram for each column with its "
                "parent and grandparent, and samples rows along the tree. For tables with many columns; with at "
                "most 3 it releases the whole joint by PSMM.",
    codec=LevelledCodec,
    floating_point_exposure=SELECTION_EXPOSURE,
    floating_point_severity="choice",
    floating_point_plain="which pairs of columns the table is built from is chosen with random noise drawn in "
                         "floating point; only that choice is released, never a number carrying that noise",
    citation=('McKenna, Miklau, Sheldon, "Winning the NIST contest: a scalable and general approach to '
              'differentially private synthetic data", J. Privacy and Confidentiality 2021 (MST tree '
              'selection); He, Vershynin, Zhu, "Algorithmically Effective Differentially Private Synthetic '
              'Data", COLT 2023, Alg 3-4 per edge'),
    order=130,
    w1_claim=W1Claim("measured", "PMM's theorem bounds each released pair's 2-way marginal where a "
                                 "PMM tree measures it; nothing bounds the joint"),
    released=("branch", "edge_levels", "root", "edge_depths", "edge_cuts", "marginal_bits", "triple_bits",
              "cells_per_axis", "cells"),
    released_noisy=("tree_edges", "triples"),
    uses_n=lambda params: True,
    audit=AuditCase(d=2, params={"depth": 2, "coarse_bits": 1, "joint_columns": 1, "flat_below": 0},
                    features=edge_features, read_stages=("edge ",),
                    trials=5_000, selection_trials=1_500, tight_coordinates=2),
)
