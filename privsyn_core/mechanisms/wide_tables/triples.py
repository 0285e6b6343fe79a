r"""Three-way pieces of ``marginal_tree``: coarse counts of column triples, their release and their conditionals.

A tree of 2-D marginals draws each column given its parent alone, so a column that depends on its parent and its
grandparent jointly (an outcome driven by two interacting causes) comes out with rows in combinations no real row
holds.  PrivBayes (Zhang, Cormode, Procopiuc, Srivastava, Xiao, "PrivBayes: Private Data Release via Bayesian
Networks", SIGMOD 2014 / TODS 2017, Section 4) conditions every attribute on ``k`` parents; these pieces give every
column of the tree after the first edge a second conditioning column (its grandparent, or for a child of the root
the root's first child), measured on a coarse 3-D histogram of the three columns:

* counts: every unordered triple of columns on ``2^{t_a} x 2^{t_b} x 2^{t_c}`` coarse cells (:func:`triple_ids`),
  one pass, before the tree is known; only the ``d - 2`` triples the tree names are released;
* release: discrete Laplace ``Lap_Z(S / eps_t)`` per in-domain cell (one record changes one cell by 1 under
  add/remove, two cells under replace-one: ``S = 1, 2``), projected onto the non-negative counts summing to the
  public count (:func:`release_triple`);
* estimate (post-processing): the conditional of the child's coarse bin given the two conditioning bins, shrunk
  towards the tree's own conditional where the measured row holds few records beyond its noise
  (:func:`triple_conditional`).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np

from privsyn_core.mechanisms.wide_tables.tree_pieces import axis_index, project_counts, valid_bins
from privsyn_core.privacy.noise import discrete_laplace
from privsyn_core.privacy.sensitivity import count_sensitivity

#: Cells of all triples counted in one pass: at most 2^24 int64 (128 MiB); the triples' bits shrink to fit.
TRIPLE_CELL_BUDGET = 2 ** 24


def all_triples(d: int) -> tuple[tuple[int, int, int], ...]:
    """Every unordered triple ``a < b < c`` of ``d`` columns, in lexicographic order."""
    return tuple(itertools.combinations(range(d), 3))


def triple_bits(coarse: tuple[int, ...]) -> tuple[int, ...]:
    """Cuts per column of the triples' cells: the columns' coarse cuts, lowered together until all
    ``C(d, 3)`` triples fit in :data:`TRIPLE_CELL_BUDGET` cells (public: the schema and a parameter)."""
    d = len(coarse)
    count = math.comb(d, 3)
    if count == 0:
        return tuple(coarse)
    top = max(0, math.floor(math.log2(TRIPLE_CELL_BUDGET / count) / 3))
    return tuple(min(c, top) for c in coarse)


def triple_size(triple: tuple[int, int, int], bits: tuple[int, ...]) -> int:
    """Cells of a triple's coarse histogram."""
    return 2 ** sum(bits[a] for a in triple)


def triple_ids(unit: np.ndarray, triples: tuple[tuple[int, int, int], ...], levels: tuple[int, ...],
               bits: tuple[int, ...]) -> Iterator[np.ndarray]:
    """Cell index of every row in each triple's ``(a, b, c)`` C-ordered coarse grid, one triple at a time.

    Every column's coarse bin is computed once and the pair index of ``(a, b)`` once per run of triples sharing it,
    so ``C(d, 3)`` triples cost one shift-or and one ``bincount`` each.
    """
    if not triples:
        return
    dtype = np.uint16 if 3 * max(bits) <= 16 else np.int64  # narrow indices: half the memory traffic
    codes = [axis_index(unit[:, a], levels[a], bits[a]).astype(dtype) for a in range(len(bits))]
    pair, pair_index = None, np.empty(0, dtype=dtype)
    for a, b, c in triples:
        if pair != (a, b):
            pair, pair_index = (a, b), np.left_shift(codes[a], bits[b]) | codes[b]
        yield np.left_shift(pair_index, bits[c]) | codes[c]


def valid_cells(triple: tuple[int, int, int], levels: tuple[int, ...], bits: tuple[int, ...]) -> np.ndarray:
    """Which cells of a triple's grid meet the public domain, as a 3-D Boolean array."""
    a, b, c = (valid_bins(levels[k], bits[k]) for k in triple)
    return a[:, None, None] & b[None, :, None] & c[None, None, :]


@dataclass
class TripleRelease:
    """A released triple: its columns in drawing order ``(g, p, c)`` and the projected counts on that grid."""

    columns: tuple[int, int, int]
    counts: np.ndarray  # (2^t_g, 2^t_p, 2^t_c) non-negative integers summing to the public count
    sigma: float
    noisy: np.ndarray  # the noisy counts before projection, in the stored (sorted) order, flat
    true_count: np.ndarray  # teaching only: the exact counts, same order as ``noisy``


def release_triple(counts: np.ndarray, triple: tuple[int, int, int], order: tuple[int, int, int],
                   levels: tuple[int, ...], bits: tuple[int, ...], epsilon: float, neighbouring: str, total: int,
                   rng: np.random.Generator) -> TripleRelease:
    r"""The triple's coarse histogram: ``Lap_Z(S / epsilon)`` per in-domain cell, projected onto
    :math:`\{x \ge 0, \sum x = \text{total}\}`, returned on the axes of ``order`` (a permutation of ``triple``).

    ``epsilon``-DP with ``S = 1`` (add/remove) or ``2`` (replace-one), as every histogram of this mechanism; cells
    outside the public domain hold 0 for every dataset and are released as 0.
    """
    valid = valid_cells(triple, levels, bits)
    sigma = count_sensitivity(neighbouring) / epsilon
    noisy = np.asarray(counts, dtype=np.int64) + discrete_laplace(sigma, valid.size, rng)
    noisy[~valid.ravel()] = 0
    projected = project_counts(noisy, max(int(total), 0), valid.ravel())
    shape = tuple(2 ** bits[k] for k in triple)
    axes = tuple(triple.index(k) for k in order)
    return TripleRelease(order, projected.reshape(shape).transpose(axes), sigma, noisy, np.asarray(counts))


def coarsen_axes(table: np.ndarray, bits: tuple[int, ...]) -> np.ndarray:
    """Sum a ``2^{b_1} x ... x 2^{b_k}`` table into ``2^{bits_i}`` bins per axis (dyadic blocks)."""
    shape = []
    for size, b in zip(table.shape, bits, strict=True):
        shape += [2 ** b, size // 2 ** b]
    return table.reshape(shape).sum(axis=tuple(range(1, 2 * len(bits), 2)))


def rake_triple(table: np.ndarray, given_parent: np.ndarray, parent_child: np.ndarray,
                iterations: int = 30) -> np.ndarray:
    """Iterative proportional fitting of a ``(G, P, C)`` table to its ``(g, p)`` and ``(p, c)`` margins (each
    summing to 1): the tree's own 2-way marginals are kept, the table adds only the interaction of ``g`` and ``c``
    given ``p``."""
    out = table / table.sum() if table.sum() > 0 else given_parent[:, :, None] * np.ones(parent_child.shape[1])
    for _ in range(iterations):
        s = out.sum(axis=2)
        out *= np.divide(given_parent, s, out=np.zeros_like(s), where=s > 0)[:, :, None]
        s = out.sum(axis=0)
        out *= np.divide(parent_child, s, out=np.zeros_like(s), where=s > 0)[None, :, :]
    return out


def triple_conditional(release: TripleRelease, prior: np.ndarray, bits: tuple[int, int, int]) -> np.ndarray:
    r"""``P(c | g, p)`` on the coarse bins ``bits``, one row per ``(g, p)`` (C order), from the released triple.

    With ``T`` the released counts coarsened to ``bits``, ``M`` the tree's own conditional ``P(c | p)``
    (``prior``, ``2^{t_p} x 2^{t_c}``, rows summing to 1, the same for every ``g``) and ``kappa = sigma 2^{t_c}``
    (about the L1 noise of a row of ``T`` before projection, public), row ``(g, p)`` is
    :math:`(T_{gp\cdot} + \kappa M_{p\cdot}) / (\sum_c T_{gpc} + \kappa)`: the measured conditional where the
    row holds many records beyond its noise, the tree's where it holds few.  Post-processing of released values.
    """
    table = coarsen_axes(release.counts.astype(float), bits).reshape(-1, 2 ** bits[2])
    kappa = release.sigma * 2 ** bits[2]
    out = table + kappa * np.tile(prior, (2 ** bits[0], 1))
    total = out.sum(axis=1, keepdims=True)
    return np.divide(out, total, out=np.zeros_like(out), where=total > 0)
