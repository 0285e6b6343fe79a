r"""Building blocks of ``marginal_tree``: axes, pair trees, PMM on a pair, consolidation, tree sampling.

An **axis** is one encoded column.  A numeric column is cut dyadically: after ``c`` cuts its bins
are ``[i 2^{-c}, (i+1) 2^{-c})``.  A categorical column with ``K`` public categories (encoded by
:meth:`privsyn_core.data.domain.Schema.encode` at the centre of the ``i``-th of ``K`` equal
sub-intervals) is cut on its *category index* written with ``p = ceil(log2 K)`` bits: after
``c <= p`` cuts bin ``v`` holds the categories ``i`` with ``i >> (p - c) == v``.  Virtual indices
``i >= K`` lie outside the public domain: their count is 0 for every dataset, so they are released
as 0 without noise (no record can change them).

A **pair tree** of columns ``(a, b)`` is PMM's binary hierarchy ([HVZ23] Alg. 4) on the square of
the two axes with a per-axis cut schedule: level ``l -> l+1`` cuts axis ``schedule[l]``; axes
alternate, and an axis that cannot be cut further (a categorical axis after ``p`` cuts, a numeric
one after :data:`MAX_AXIS_BITS`) is skipped.  Every leaf has the same cuts per axis, so the leaves
form a regular ``2^{c_a} x 2^{c_b}`` grid and the released leaf counts are a 2-D histogram.

References
----------
.. [HVZ23] Y. He, R. Vershynin, Y. Zhu, "Algorithmically Effective Differentially Private
   Synthetic Data", COLT 2023: Algorithms 3-4, Theorems 4.1-4.3, equation (A.4).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from privsyn_core.mechanisms.hvz23.pmm_tree import tree_counts
from privsyn_core.privacy.accounting import split_epsilon
from privsyn_core.privacy.noise import discrete_laplace
from privsyn_core.privacy.sensitivity import count_sensitivity

#: Most cuts of a numeric axis (a bin of width 2^-16 of the public range).
MAX_AXIS_BITS = 16


# -- axes ---------------------------------------------------------------------------------
def category_bits(levels: int) -> int:
    """``p = ceil(log2 K)`` bits of a categorical axis with ``K`` categories; numeric (``K = 0``): the cap."""
    if levels == 0:
        return MAX_AXIS_BITS
    return math.ceil(math.log2(levels)) if levels > 1 else 0


def axis_index(values: np.ndarray, levels: int, bits: int) -> np.ndarray:
    """Bin index of every encoded value after ``bits`` cuts (``x = 1`` joins the last bin)."""
    if levels == 0:
        idx = (values * float(2 ** bits)).astype(np.int64)
        return np.minimum(idx, 2 ** bits - 1, out=idx)
    code = np.minimum((values * levels).astype(np.int64), levels - 1)
    return code >> (category_bits(levels) - bits)


def valid_bins(levels: int, bits: int) -> np.ndarray:
    """Which of the ``2^bits`` bins of an axis meet the public domain (all, for a numeric axis)."""
    if levels == 0:
        return np.ones(2 ** bits, dtype=bool)
    return (np.arange(2 ** bits) << (category_bits(levels) - bits)) < levels


def bin_width(levels: int, bits: int) -> float:
    """Width that counts in the W1 geometry: ``2^-bits`` (numeric, or a categorical axis not fully cut), else 0."""
    if levels and bits >= category_bits(levels):
        return 0.0
    return 2.0 ** -bits


# -- pair trees ---------------------------------------------------------------------------
@dataclass(frozen=True)
class PairTree:
    """The public shape of the tree of one column pair: axes, cut schedule, cuts per axis."""

    a: int
    b: int
    levels: tuple[int, int]
    schedule: tuple[int, ...]

    @property
    def depth(self) -> int:
        return len(self.schedule)

    @property
    def cuts(self) -> tuple[int, int]:
        return self.schedule.count(0), self.schedule.count(1)

    def cuts_at(self, j: int) -> tuple[int, int]:
        head = self.schedule[:j]
        return head.count(0), head.count(1)

    def grid_ids(self, unit: np.ndarray) -> np.ndarray:
        """Row-major leaf-grid index ``i_a 2^{c_b} + i_b`` of every row."""
        ca, cb = self.cuts
        ia = axis_index(unit[:, self.a], self.levels[0], ca)
        ib = axis_index(unit[:, self.b], self.levels[1], cb)
        return (ia << cb) | ib

    def heap_to_grid(self) -> np.ndarray:
        """Grid index of each leaf, listed in heap order (children of ``t`` are ``2t, 2t+1``)."""
        ca, cb = self.cuts
        seen = [0, 0]
        out = np.zeros(1, dtype=np.int64)
        for axis in self.schedule:
            bits_of_axis = (ca, cb)[axis]
            bit = bits_of_axis - 1 - seen[axis] + (cb if axis == 0 else 0)
            seen[axis] += 1
            out = np.repeat(out, 2)
            out[1::2] += 1 << bit
        return out

    def valid_leaves(self) -> np.ndarray:
        """Leaf-grid cells inside the public domain, as a ``2^{c_a} x 2^{c_b}`` boolean matrix."""
        ca, cb = self.cuts
        return np.outer(valid_bins(self.levels[0], ca), valid_bins(self.levels[1], cb))

    def deltas(self) -> list[float]:
        r"""``Delta_{j-1}`` for ``j = 0..r``: ``2^{j-1}`` times the :math:`\ell_\infty` width of a level ``j-1`` cell.

        The weights of the optimal level scales of [HVZ23] (A.4), in this geometry (a fully cut
        categorical axis has width 0: a cell then holds one category).  ``Delta_{-1} = 1``.
        """
        out = [1.0]
        for j in range(self.depth):
            ca, cb = self.cuts_at(j)
            width = max(bin_width(self.levels[0], ca), bin_width(self.levels[1], cb))
            out.append(2.0 ** j * width)
        return out


def cut_schedule(depth: int, caps: tuple[int, int]) -> tuple[int, ...]:
    """Alternate the two axes for ``depth`` levels, skipping an axis once it has ``caps[axis]`` cuts."""
    cuts = [0, 0]
    schedule: list[int] = []
    axis = 0
    while len(schedule) < depth and (cuts[0] < caps[0] or cuts[1] < caps[1]):
        if cuts[axis] < caps[axis]:
            schedule.append(axis)
            cuts[axis] += 1
        axis = 1 - axis
    return tuple(schedule)


# -- PMM on one pair tree -----------------------------------------------------------------
@dataclass
class PairRelease:
    """One released pair: the leaf histogram and what the diagnostics show."""

    tree: PairTree
    joint: np.ndarray          # (2^{c_a}, 2^{c_b}) consistent non-negative integer leaf counts
    level_epsilons: np.ndarray
    sigmas: np.ndarray
    true_leaves: np.ndarray    # teaching only
    noisy_root: int
    #: The measured levels, heap order, deepest last (DP output, before consistency): PMM's clamped noisy counts
    #: of every level; a flat edge's one noisy leaf level, before its projection (what the audit reads).
    noisy_levels: tuple[np.ndarray, ...] = ()

    def measured_boxes(self) -> list[tuple[np.ndarray, np.ndarray]]:
        """:meth:`level_boxes` of the levels in :attr:`noisy_levels` (the deepest ones)."""
        return self.level_boxes()[len(self.level_boxes()) - len(self.noisy_levels):]

    def level_boxes(self) -> list[tuple[np.ndarray, np.ndarray]]:
        """``(lo, hi)`` in the pair's unit square of every node of every level (heap order)."""
        ca, cb = self.tree.cuts
        grid = self.tree.heap_to_grid()
        i, k = grid // (1 << cb), grid % (1 << cb)
        lo = np.stack([i / 2.0 ** ca, k / 2.0 ** cb], axis=1)
        hi = np.stack([(i + 1) / 2.0 ** ca, (k + 1) / 2.0 ** cb], axis=1)
        r = self.tree.depth
        return [(lo.reshape(2 ** j, -1, 2).min(axis=1), hi.reshape(2 ** j, -1, 2).max(axis=1)) for j in range(r + 1)]


def release_pair(tree: PairTree, leaves_heap: np.ndarray, epsilon: float, neighbouring: str,
                 rng: np.random.Generator, *, flat: bool = False, total: int = 0) -> PairRelease:
    r"""PMM on one pair tree: discrete Laplace counts per level, clamped, made consistent top-down.

    add/remove ([HVZ23] Thm 4.1): each level's counts change in one cell by 1, so
    ``sum_j 1/sigma_j = epsilon``; replace-one: ``n`` is public, the root is exact and each level
    ``j >= 1`` changes in two cells by 1, so ``2 sum_{j>=1} 1/sigma_j = epsilon``.  The split over
    levels follows (A.4): ``eps_j`` proportional to ``sqrt(Delta_{j-1})`` (the last level takes the
    exact remainder, :func:`privsyn_core.privacy.accounting.split_epsilon`).  Cells outside the public domain
    have count 0 for every dataset and are released as 0 without noise.

    ``flat``: the whole ``epsilon`` on the leaves (one level, as PSMM and MST measure a table): each leaf
    gets ``Lap_Z(S / epsilon)`` (one record changes one leaf by 1, or two leaves under replace-one), and the
    noisy leaves are projected onto ``{x >= 0, sum x = total}`` (:func:`project_counts`; ``total`` is the
    public ``n`` or ``n~``), post-processing.  The upper levels are the sums of the projected leaves.
    """
    if flat:
        return _release_flat(tree, leaves_heap, epsilon, neighbouring, rng, total)
    r = tree.depth
    sensitivity = count_sensitivity(neighbouring)
    first = 0 if neighbouring == "add_remove" else 1  # replace-one: n is public, the root is exact
    deltas = tree.deltas()
    level_eps = np.zeros(r + 1)
    sigmas = np.full(r + 1, np.inf)
    if r >= first:
        weights = [(str(j), math.sqrt(deltas[j]) or 1e-12) for j in range(first, r + 1)]
        level_eps[first:] = [e for _, e in split_epsilon(epsilon, weights)]
        sigmas[first:] = sensitivity / level_eps[first:]
    true = tree_counts(leaves_heap, r)
    valid_heap = tree.valid_leaves().ravel()[tree.heap_to_grid()]
    valid = [v.astype(bool) for v in tree_counts(valid_heap.astype(np.int64), r)]
    noisy = []
    for j in range(r + 1):
        count = true[j].copy()
        if np.isfinite(sigmas[j]):
            count += discrete_laplace(sigmas[j], 2 ** j, rng)
        count[~valid[j]] = 0
        noisy.append(np.maximum(count, 0))
    weights_below = tree_counts(valid_heap.astype(np.int64), r)
    consistent = consistent_counts(noisy, weights_below)
    ca, cb = tree.cuts
    joint = np.zeros(2 ** (ca + cb), dtype=np.int64)
    joint[tree.heap_to_grid()] = consistent[r]
    true_grid = np.zeros_like(joint)
    true_grid[tree.heap_to_grid()] = leaves_heap
    return PairRelease(tree, joint.reshape(2 ** ca, 2 ** cb), level_eps, sigmas,
                       true_grid.reshape(2 ** ca, 2 ** cb), int(noisy[0][0]), tuple(noisy))


def _release_flat(tree: PairTree, leaves_heap: np.ndarray, epsilon: float, neighbouring: str,
                  rng: np.random.Generator, total: int) -> PairRelease:
    """The flat edge of :func:`release_pair`: one noisy level (the leaves), projected, summed upward."""
    r = tree.depth
    level_eps = np.zeros(r + 1)
    sigmas = np.full(r + 1, np.inf)
    level_eps[r] = epsilon
    sigmas[r] = count_sensitivity(neighbouring) / epsilon
    valid_heap = tree.valid_leaves().ravel()[tree.heap_to_grid()]
    noisy = np.asarray(leaves_heap, dtype=np.int64) + discrete_laplace(sigmas[r], 2 ** r, rng)
    noisy[~valid_heap] = 0
    leaves = project_counts(noisy, max(int(total), 0), valid_heap)
    ca, cb = tree.cuts
    joint = np.zeros(2 ** (ca + cb), dtype=np.int64)
    joint[tree.heap_to_grid()] = leaves
    true_grid = np.zeros_like(joint)
    true_grid[tree.heap_to_grid()] = leaves_heap
    return PairRelease(tree, joint.reshape(2 ** ca, 2 ** cb), level_eps, sigmas,
                       true_grid.reshape(2 ** ca, 2 ** cb), int(leaves.sum()), (noisy,))


def project_counts(noisy: np.ndarray, total: int, valid: np.ndarray) -> np.ndarray:
    r"""Non-negative integer counts summing to ``total``, closest in :math:`\ell_2` to the noisy ones (in-domain).

    :func:`project_simplex`, rounded: the floors plus one for the largest fractional parts (ties by index).
    Reads released values only.
    """
    x = project_simplex(np.asarray(noisy, dtype=float), max(int(total), 0), valid)
    base = np.floor(x).astype(np.int64)
    short = int(total) - int(base.sum())
    if short > 0:
        order = np.lexsort((np.arange(len(x)), -(x - base)))
        base[order[:short]] += 1
    return base


def project_simplex(y: np.ndarray, total: float, valid: np.ndarray) -> np.ndarray:
    r"""The Euclidean projection of ``y`` (in-domain entries) onto :math:`\{x \ge 0, \sum x = \text{total}\}`.

    ``x = max(y - tau, 0)`` with the threshold ``tau`` that makes the sum ``total``, found by sorting (J. Duchi,
    S. Shalev-Shwartz, Y. Singer, T. Chandra, "Efficient projections onto the l1-ball for learning in high
    dimensions", ICML 2008, Fig. 1); it keeps a noisy count only where it stands above the noise floor, so empty
    cells do not collect the positive part of their noise as clamping does.  Out-of-domain entries are 0.
    """
    out = np.zeros(len(y))
    if total <= 0 or not valid.any():
        return out
    z = np.sort(y[valid])[::-1]
    cums = np.cumsum(z) - total
    k = np.arange(1, len(z) + 1)
    rho = int(np.nonzero(z - cums / k > 0)[0][-1])
    tau = cums[rho] / (rho + 1)
    out[valid] = np.maximum(y[valid] - tau, 0.0)
    return out


def consistent_counts(noisy: list[np.ndarray], valid_below: list[np.ndarray]) -> list[np.ndarray]:
    r"""[HVZ23] Algorithm 3 with the proportional rule: ``x = floor(M a / (a + b))``.

    When both noisy children are 0, the parent's count ``M`` is split in proportion to the number of
    in-domain leaves below each child (any split of ``M`` is comparable with ``(0, 0)``), so no
    mass reaches a cell outside the public domain.
    """
    out = [noisy[0].astype(np.int64)]
    for children, below in zip(noisy[1:], valid_below[1:], strict=True):
        a, b, parent = children[0::2], children[1::2], out[-1]
        wa, wb = below[0::2], below[1::2]
        s, w = a + b, wa + wb
        left = np.where(s > 0, parent * a // np.maximum(s, 1), np.where(w > 0, parent * wa // np.maximum(w, 1), 0))
        level = np.empty(len(children), dtype=np.int64)
        level[0::2] = left
        level[1::2] = parent - left
        out.append(level)
    return out


# -- fine 1-way marginals -----------------------------------------------------------------
@dataclass
class MarginalRelease:
    """One column's released 1-way histogram on ``2^bits`` bins of its axis."""

    levels: int
    bits: int
    sigma: float
    noisy: np.ndarray          # the discrete Laplace counts, out-of-domain bins 0 (what the audit reads)
    counts: np.ndarray         # estimated counts: non-negative floats summing to the public total
    true_count: np.ndarray     # teaching only

    def coarse_variance(self, bits: int) -> float:
        """Noise variance of the noisy count of one bin after ``bits`` cuts: ``2^(b - bits)`` bins of ``2 sigma^2``
        (about the variance of a discrete Laplace of scale ``sigma``; public)."""
        return 2.0 ** (self.bits - bits) * 2.0 * self.sigma ** 2


def release_marginal(histogram: np.ndarray, levels: int, bits: int, epsilon: float, neighbouring: str, total: int,
                     rng: np.random.Generator) -> MarginalRelease:
    r"""A column's 1-way histogram: ``Lap_Z(S / epsilon)`` per in-domain bin, then non-negative counts summing to
    ``total``.

    One record changes one bin by 1 (add/remove) or two bins by 1 (replace-one), so the histogram is
    ``epsilon``-DP with ``S = 1`` or ``2`` (as MST measures its 1-way marginals, [MMS21] Sec. 4, with discrete
    Laplace instead of Gaussian noise); bins outside the public domain (virtual category indices) hold 0 for every
    dataset and are released as 0.  The estimate (post-processing; ``total`` is the public ``n`` or ``n~``): for a
    column with public levels the Euclidean projection of the noisy counts onto :math:`\{x \ge 0, \sum x =
    \text{total}\}` (:func:`project_simplex`); for a numeric column :func:`split_down` on the dyadic hierarchy of
    its bins, which leaves empty the intervals whose noisy sums stand below their noise.
    """
    valid = valid_bins(levels, bits)
    sigma = count_sensitivity(neighbouring) / epsilon
    noisy = np.asarray(histogram, dtype=np.int64) + discrete_laplace(sigma, len(valid), rng)
    noisy[~valid] = 0
    total = max(int(total), 0)
    if levels:
        counts = project_simplex(noisy.astype(float), total, valid)
    else:
        counts = split_down(noisy, total)
    return MarginalRelease(levels, bits, sigma, noisy, counts, np.asarray(histogram))


def split_down(noisy: np.ndarray, total: int) -> np.ndarray:
    r"""Non-negative integer counts summing to ``total`` from noisy counts on ``2^b`` equal bins: [HVZ23]
    Algorithm 3 (:func:`consistent_counts`, proportional rule) on the dyadic hierarchy of the bins, every node's
    count the sum of its noisy bins clamped at 0, the root ``total``.

    A node's count is split between its children in proportion to their clamped noisy sums (evenly where both
    are 0), so an interval gets a share of its parent's count, never more than its own clamped sum's share: a run
    of empty bins whose noise sums to at most 0 gets nothing, and noise in empty bins does not add to the total
    as clamping each bin alone does.  Reads released counts and the public total only.
    """
    bits = int(math.log2(len(noisy)))
    levels = [np.array([max(int(total), 0)], dtype=np.int64)]
    levels += [np.maximum(noisy.reshape(2 ** j, -1).sum(axis=1), 0) for j in range(1, bits + 1)]
    below = [np.full(2 ** j, 2 ** (bits - j), dtype=np.int64) for j in range(bits + 1)]
    return consistent_counts(levels, below)[-1].astype(float)


# -- consolidation and sampling -----------------------------------------------------------
def spread(marginal: np.ndarray, bits: int, fine_bits: int, valid_fine: np.ndarray) -> np.ndarray:
    """A marginal on ``2^bits`` bins spread over ``2^fine_bits`` fine bins, evenly over in-domain fine bins."""
    step = 2 ** (fine_bits - bits)
    share = valid_fine.reshape(-1, step).astype(float)
    share /= np.maximum(share.sum(axis=1, keepdims=True), 1)
    return (share * marginal[:, None]).ravel()


def coarsen(fine: np.ndarray, bits: int) -> np.ndarray:
    """Sum fine bins into ``2^bits`` bins."""
    return fine.reshape(2 ** bits, -1).sum(axis=1)


#: Share of the product of the targets mixed into a table before raking (:func:`rake`).
RAKE_PRIOR = 1e-3


def rake(joint: np.ndarray, rows: np.ndarray, cols: np.ndarray, iterations: int = 30) -> np.ndarray:
    """Iterative proportional fitting of a non-negative matrix to row and column sums (both sum to 1).

    The table is first mixed with :data:`RAKE_PRIOR` of the product of the targets, so every cell whose row and
    column targets are positive can hold mass: a row (column) without mass but with a positive target takes the
    product of the targets (a category that the released 1-way marginal keeps is never dropped by a pair table),
    and the fitted table exists.  Without it a column whose mass lies only in a row with a tiny target ends the
    iterations off that row's target (a two-valued integer column lost 2% of its rows to values no row holds).
    """
    out = joint / joint.sum() if joint.sum() > 0 else np.outer(rows, cols)
    out = (1 - RAKE_PRIOR) * out + RAKE_PRIOR * np.outer(rows, cols)
    for _ in range(iterations):
        s = out.sum(axis=1)
        out *= np.divide(rows, s, out=np.zeros_like(s), where=s > 0)[:, None]
        s = out.sum(axis=0)
        out *= np.divide(cols, s, out=np.zeros_like(s), where=s > 0)[None, :]
    return out


def smoothed_conditional(joint: np.ndarray, threshold: float) -> np.ndarray:
    """Row-normalised conditionals of a released ``(2^k, B)`` histogram.

    Each row is borrowed from its coarsest-needed ancestor.

    A PMM histogram is accurate in W1, not cell by cell: a fine row holds noisy counts of a few
    records, often none.  Row ``i`` takes the conditional of the finest dyadic block of rows containing it
    whose released total reaches ``threshold`` (a public number, the noise scale of the leaves), or of the
    whole histogram.  Reads released counts only.
    """
    rows = len(joint)
    levels = [np.asarray(joint, dtype=float)]
    while len(levels[-1]) > 1:
        levels.append(levels[-1].reshape(-1, 2, joint.shape[1]).sum(axis=1))
    out = np.zeros_like(levels[0])
    done = np.zeros(rows, dtype=bool)
    index = np.arange(rows)
    for k, level in enumerate(levels):
        block = level[index >> k]
        total = block.sum(axis=1)
        take = ~done & ((total >= threshold) | (k == len(levels) - 1)) & (total > 0)
        out[take] = block[take] / total[take, None]
        done |= take
    return out


def block_cdf(probs: np.ndarray, fallback: np.ndarray) -> np.ndarray:
    """Per-row CDFs of a ``(G, B)`` matrix, offset by the row number.

    A row without mass uses its ``fallback`` row; a row whose fallback has no mass either (a block of a
    categorical axis that lies wholly outside the public categories, where both the released marginal and
    the in-domain indicator are 0) is uniform over its ``B`` entries, a public choice that keeps every CDF
    finite and increasing (a NaN row would break the binary search of :func:`sample_blocks`).
    """
    probs = np.array(probs, dtype=float)
    empty = probs.sum(axis=1) <= 0
    probs[empty] = fallback[empty]
    probs[probs.sum(axis=1) <= 0] = 1.0
    cdf = np.cumsum(probs, axis=1)
    cdf /= cdf[:, -1:]
    cdf[:, -1] = 1.0
    return (cdf + np.arange(len(cdf))[:, None]).ravel()


def sample_blocks(cdf: np.ndarray, block: np.ndarray, width: int, rng: np.random.Generator) -> np.ndarray:
    """Index ``block * width + j``, ``j`` drawn from row ``block`` of a :func:`block_cdf`."""
    found = np.searchsorted(cdf, block + rng.random(len(block)), side="right")
    return np.clip(found, block * width, block * width + width - 1)


@dataclass
class ColumnModel:
    """The consolidated 1-D marginal of a column on its finest bins, as block CDFs by coarser bins."""

    levels: int
    fine_bits: int
    marginal: np.ndarray

    def valid(self) -> np.ndarray:
        return valid_bins(self.levels, self.fine_bits)

    def at(self, bits: int) -> np.ndarray:
        return coarsen(self.marginal, bits)

    def refine(self, coarse: np.ndarray, bits: int, rng: np.random.Generator, cache: dict) -> np.ndarray:
        """Fine bin of each row inside its coarse bin (``bits`` cuts), drawn from the consolidated marginal."""
        width = 2 ** (self.fine_bits - bits)
        if width == 1:
            return coarse
        if bits not in cache:
            fallback = np.broadcast_to(self.valid().reshape(-1, width).astype(float), (2 ** bits, width))
            cache[bits] = block_cdf(self.marginal.reshape(-1, width), fallback)
        return sample_blocks(cache[bits], coarse, width, rng)

    def to_unit(self, fine: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        """A uniform point of each fine bin in encoded coordinates (a category's own sub-interval)."""
        u = rng.random(len(fine))
        if self.levels == 0:
            return (fine + u) / 2.0 ** self.fine_bits
        code = fine << (category_bits(self.levels) - self.fine_bits)
        return (np.minimum(code, self.levels - 1) + u) / self.levels
