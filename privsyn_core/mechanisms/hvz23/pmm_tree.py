r"""Building blocks of the Private Measure Mechanism (PMM): the binary hierarchical
partition of ``[0,1]^d``, the per-level noise plan, the depth rules, consistency
(Algorithm 3) and the accuracy bounds.

Geometry ([HVZ23] Section 4.1 and App. A.9).  Level ``j -> j+1``
cuts axis ``j mod d`` through the middle of every cell; bit 0 is the lower half.
After ``j`` levels axis ``a`` has been cut ``c_a(j) = floor(j/d) + [a < j mod d]``
times, a level-``j`` cell has :math:`\ell_\infty` diameter ``2^{-floor(j/d)}`` and

.. math:: \Delta_j = \sum_{\theta \in \{0,1\}^j} \operatorname{diam}\Omega_\theta
          = 2^j \, 2^{-\lfloor j/d \rfloor}, \qquad \Delta_{-1} := \Delta_0 = 1.

Cells of a level are stored in heap (Morton / Z) order: the children of cell ``t`` at
level ``j`` are cells ``2t`` and ``2t+1`` at level ``j+1``, and the level-``j``
ancestor of leaf ``t`` is ``t >> (r-j)``.  Every level's counts are pairwise sums of the
leaf counts, so the true counts are exactly consistent.

References
----------
.. [HVZ23] Y. He, R. Vershynin, Y. Zhu, "Algorithmically Effective Differentially
   Private Synthetic Data", COLT 2023 (seed 004): Algorithms 3-4, Theorems 4.1-4.3,
   Corollary 4.4, Lemmas 4.6-4.9, equation (A.4).
"""

from __future__ import annotations

import math
import threading
from collections import OrderedDict
from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np

from privsyn_core.privacy.accounting import Ledger, split_epsilon
from privsyn_core.privacy.sensitivity import count_sensitivity

#: Deepest tree allowed: ``2^{r+1}`` counts must fit in memory (the depth of Cor. 4.4 is capped here).
MAX_DEPTH = 26
#: Constant of Theorem 4.2, hence of Theorem 4.3 once (A.4) is substituted.  [ERRATUM]
#: Theorem 4.3 and App. A.8 print ``sqrt(2)``; substituting (A.4) into Theorem 4.2
#: gives ``2 sqrt(2) S^2 / (epsilon n)`` (tests/test_pmm.py checks the bound with this constant).
THM43_CONSTANT = 2.0 * math.sqrt(2.0)

#: The paper of PMM and PSMM, as every citation names it.
HVZ23_REFERENCE = ('He, Vershynin, Zhu, "Algorithmically Effective Differentially Private Synthetic Data", '
                   'COLT 2023')


# -- geometry -------------------------------------------------------------------------
def cuts_per_axis(j: int, d: int) -> np.ndarray:
    """Number of halvings ``c_a(j) = floor(j/d) + [a < j mod d]`` of each axis after ``j`` levels."""
    return j // d + (np.arange(d) < j % d).astype(np.int64)


def level_diameter(j: int, d: int) -> float:
    r""":math:`\ell_\infty` diameter ``2^{-floor(j/d)}`` of every level-``j`` cell (exact, not ``2^{-j/d}``)."""
    return 2.0 ** -(j // d)


def level_delta(j: int, d: int) -> float:
    r"""``Delta_j = 2^j 2^{-floor(j/d)}`` (eq. 4.1), with ``Delta_{-1} = Delta_0 = 1``."""
    return 1.0 if j < 0 else 2.0 ** j * level_diameter(j, d)


def level_corners(j: int, d: int) -> np.ndarray:
    """Integer lower corners ``(2^j, d)`` of the level-``j`` cells, in heap order.

    Cell ``t`` spans ``[corner * side, (corner + 1) * side]`` with
    ``side = 2^{-cuts_per_axis(j, d)}``.
    """
    return np.stack(axis_corners(j, d), axis=1)


def axis_corners(j: int, d: int) -> list[np.ndarray]:
    """Per axis, the integer lower corner coordinate of each level-``j`` cell (heap order).

    The cut at level ``l`` on axis ``l mod d`` is bit ``c_a(j) - 1 - floor(l/d)`` of that
    axis' coordinate, so each coordinate is a sum over the bits of the heap index.
    """
    cuts = cuts_per_axis(j, d)
    return [_bit_sum([(1 << (int(cuts[a]) - 1 - level // d)) if level % d == a else 0 for level in range(j)], np.int32)
            for a in range(d)]


def _bit_sum(weights: list[int], dtype: type) -> np.ndarray:
    """``sum_l bit_l(t) * weights[l]`` for ``t = 0..2^L-1``, where bit ``l`` is bit ``L-1-l`` of ``t``.

    A Kronecker sum: the first half of the weights gives the high bits, the second half the
    low bits, and the table is their broadcast sum; ``O(2^L)`` in total, one full-size write.
    """
    if len(weights) <= 4:
        out: np.ndarray = np.zeros(1, dtype=dtype)
        for w in weights:
            out = np.repeat(out, 2)
            if w:
                out[1::2] += w
        return out
    half = len(weights) // 2
    high, low = _bit_sum(weights[:half], dtype), _bit_sum(weights[half:], dtype)
    out = np.empty((len(high), len(low)), dtype=dtype)
    np.add(high[:, None], low[None, :], out=out)
    return out.reshape(-1)


def leaf_corner_tables(r: int, d: int, dtype: type = float) -> tuple[int, list[tuple[np.ndarray, np.ndarray]]]:
    """``k`` and per axis the tables ``(high, low)`` with corner ``high[t >> k] + low[t & (2^k - 1)]`` of leaf ``t``.

    ``k = min(r, max(floor(r/2), 12))``: both tables have at most ``2^max(12, ceil(r/2))`` entries (they
    stay in the CPU caches for every supported depth).
    """
    cuts = cuts_per_axis(r, d)
    k = min(r, max(r // 2, 12))
    tables: list[tuple[np.ndarray, np.ndarray]] = []
    for axis in range(d):
        weights = [(1 << (int(cuts[axis]) - 1 - level // d)) if level % d == axis else 0 for level in range(r)]
        tables.append((_bit_sum(weights[:r - k], np.int64).astype(dtype),
                       _bit_sum(weights[r - k:], np.int64).astype(dtype)))
    return k, tables


#: Bytes of cell boxes :func:`level_boxes` keeps (every level up to ``2^18`` cells in two dimensions takes 16 MB).
LEVEL_BOXES_KEPT_BYTES = 32 * 2**20
_kept_boxes: OrderedDict[tuple[int, int], tuple[np.ndarray, np.ndarray]] = OrderedDict()
_kept_boxes_lock = threading.Lock()


def level_boxes(j: int, d: int) -> tuple[np.ndarray, np.ndarray]:
    """Lower and upper corners ``(2^j, d)`` of the level-``j`` cells in unit coordinates (read-only arrays).

    A pure function of ``(j, d)``, asked for every level of every PMM run (its diagnostics) and every figure of
    one: the most recently used boxes are kept per process, up to :data:`LEVEL_BOXES_KEPT_BYTES` in all, and
    shared by the results that hold them (hence read-only).
    """
    key = (int(j), int(d))
    with _kept_boxes_lock:
        found = _kept_boxes.get(key)
        if found is not None:
            _kept_boxes.move_to_end(key)
            return found
    side = 2.0 ** -cuts_per_axis(j, d).astype(float)
    corners = level_corners(j, d)
    boxes = corners * side, (corners + 1) * side
    for corner in boxes:
        corner.flags.writeable = False
    size = boxes[0].nbytes + boxes[1].nbytes
    if size <= LEVEL_BOXES_KEPT_BYTES:
        with _kept_boxes_lock:
            _kept_boxes[key] = boxes
            held = sum(lo.nbytes + hi.nbytes for lo, hi in _kept_boxes.values())
            while held > LEVEL_BOXES_KEPT_BYTES:
                _, (lo, hi) = _kept_boxes.popitem(last=False)
                held -= lo.nbytes + hi.nbytes
    return boxes


#: Rows per chunk when computing cell ids (the float and integer scratch stay in the CPU caches).
ROW_CHUNK = 2 ** 16


#: Bits of an axis coordinate translated by one lookup table in :func:`_heap_ids` (tables of 2^12 entries).
TABLE_BITS = 12


def _heap_tables(r: int, d: int) -> list[list[tuple[int, int, np.ndarray]]]:
    """Per axis, ``(shift, width, table)`` pieces with ``heap id = sum table[(coordinate >> shift) & (2^width - 1)]``.

    Bit ``b`` of axis ``a``'s coordinate is the cut of level ``l = a + d (c_a - 1 - b)``, which is bit
    ``r - 1 - l`` of the heap id; a table maps ``width`` consecutive coordinate bits to their heap bits.
    """
    cuts = cuts_per_axis(r, d)
    tables = []
    for a in range(d):
        c = int(cuts[a])
        pieces = []
        for shift in range(0, c, TABLE_BITS):
            width = min(TABLE_BITS, c - shift)
            values = np.arange(1 << width, dtype=np.int64)
            table = np.zeros(1 << width, dtype=np.int64)
            for bit in range(width):
                level = a + d * (c - 1 - (shift + bit))
                table |= ((values >> bit) & 1) << (r - 1 - level)
            pieces.append((shift, width, table))
        tables.append(pieces)
    return tables


def _heap_id_chunks(unit: np.ndarray, r: int, ties: str = "upper") -> Iterator[tuple[int, np.ndarray]]:
    """``(start, ids)`` for consecutive chunks of :data:`ROW_CHUNK` rows: the heap (Morton) index of each row's
    depth-``r`` leaf, ``sum_a sum_pieces table[(coordinate_a >> shift) & mask]`` (:func:`_heap_tables`) with
    ``coordinate_a = min(floor(x_a 2^c_a), 2^c_a - 1)`` (``ties="upper"``: a point on a cut goes to the upper
    cell, PMM's rule; needs ``x >= 0``) or ``clip(ceil(x_a 2^c_a) - 1, 0, 2^c_a - 1)`` (``ties="lower"``: to the
    lower cell, the KD-tree rule).  Scaling by ``2^c_a`` is exact, so both are exact.  No per-bit loop and no
    sort; the yielded array is scratch that the next chunk overwrites.
    """
    n, d = unit.shape
    cuts, tables = cuts_per_axis(r, d), _heap_tables(r, d)
    chunk = min(ROW_CHUNK, max(n, 1))
    ids, scaled = np.empty(chunk, dtype=np.int64), np.empty(chunk)
    coordinate, piece, looked = (np.empty(chunk, dtype=np.int64) for _ in range(3))
    axes = [(axis, int(c)) for axis, c in enumerate(cuts) if c]
    lower = ties == "lower"
    for start in range(0, n, chunk):
        size = min(n, start + chunk) - start
        part, sc, co, pc, lk = ids[:size], scaled[:size], coordinate[:size], piece[:size], looked[:size]
        if not axes:
            part[:] = 0
        first = True
        for axis, c in axes:
            # one table (c <= TABLE_BITS): its lookup with mode="clip" clamps the coordinate into [0, 2^c - 1]
            clamp = len(tables[axis]) > 1
            np.multiply(unit[start:start + size, axis], float(2 ** c), out=sc)
            if lower:
                np.ceil(sc, out=sc)
                np.copyto(co, sc, casting="unsafe")
                co -= 1
                if clamp:
                    np.clip(co, 0, 2 ** c - 1, out=co)
            else:
                np.copyto(co, sc, casting="unsafe")  # floor, since unit >= 0
                if clamp:
                    np.minimum(co, 2 ** c - 1, out=co)
            for shift, width, table in tables[axis]:
                source = co
                if shift or width < c:
                    np.right_shift(co, shift, out=pc)
                    np.bitwise_and(pc, (1 << width) - 1, out=pc)
                    source = pc
                # "clip" also avoids a buffered copy; the first lookup writes the ids, the others add to them
                np.take(table, source, out=part if first else lk, mode="clip")
                if not first:
                    part += lk
                first = False
        yield start, part


def leaf_counts(unit: np.ndarray, r: int, out: np.ndarray | None = None, ties: str = "upper") -> np.ndarray:
    """True counts of the ``2^r`` leaves (heap order) for points ``unit`` in ``[0,1]^d``.

    ``O(n d + 2^r)``: the rows' heap ids chunk by chunk (:func:`_heap_id_chunks`, ``ties`` as there), each
    chunk added into the counts (``numpy.add.at``), so no array of ``n`` ids is held.  ``out`` (int64,
    ``2^r``) receives them when given.
    """
    out = np.zeros(2 ** r, dtype=np.int64) if out is None else out
    out[:] = 0
    for _, ids in _heap_id_chunks(unit, r, ties):
        np.add.at(out, ids, 1)
    return out


def leaf_ids(unit: np.ndarray, r: int, ties: str = "upper") -> np.ndarray:
    """Heap (Morton) index of the depth-``r`` leaf of each row (the binary partition of [HVZ23] Section 4.1).

    Bit ``r-1-j`` of the id is the side (0 lower, 1 upper) of the cut at level ``j``,
    along axis ``j mod d``.  A point on a cut plane goes to the upper cell (``ties="lower"``: to the
    lower cell); ``x = 1.0`` goes to the last cell.
    """
    out = np.empty(len(unit), dtype=np.int64)
    for start, ids in _heap_id_chunks(unit, r, ties):
        out[start:start + len(ids)] = ids
    return out


def sparse_leaf_counts(unit: np.ndarray, r: int) -> tuple[np.ndarray, np.ndarray]:
    """Sorted heap ids and counts of the non-empty depth-``r`` leaves, in ``O(n)`` memory (not ``O(2^r)``).

    The same counts as :func:`leaf_counts` (its non-zero entries), for blocks of rows much
    smaller than ``2^r`` (a Dask partition at large depth).
    """
    heap, counts = np.unique(leaf_ids(unit, r), return_counts=True)
    return heap.astype(np.int64), counts.astype(np.int64)


def tree_counts(leaves: np.ndarray, r: int) -> list[np.ndarray]:
    """Counts of every level ``0..r`` from the leaf counts (pairwise sums upward)."""
    tree = HeapTree.allocate(r, np.array(leaves, dtype=np.int64))
    fill_upper_levels(tree, r)
    return [level_of(tree, j) for j in range(r + 1)]


@dataclass
class HeapTree:
    """All levels of a depth-``r`` tree in heap layout, in two int64 arrays of ``2^r`` entries.

    Levels ``0..r-1`` live in ``upper`` (level ``j`` is ``upper[2^j : 2^(j+1)]``, entry 0 unused),
    the leaves in ``leaves``; the children of entry ``i`` of level ``j`` are entries ``2i`` and
    ``2i+1`` of level ``j+1``.  Every stage of PMM (counts, noise, consistency) works in these two
    arrays, and the leaves can be an array the counting produced (no copy).
    """

    upper: np.ndarray
    leaves: np.ndarray

    @classmethod
    def allocate(cls, r: int, leaves: np.ndarray | None = None) -> HeapTree:
        """A tree with uninitialised upper levels (and leaves, unless ``leaves`` is given)."""
        if leaves is None:
            leaves = np.empty(2 ** r, dtype=np.int64)
        if leaves.dtype != np.int64 or leaves.shape != (2 ** r,):
            raise ValueError(f"the leaves of a depth-{r} tree are {2 ** r} int64 counts")
        return cls(np.empty(2 ** r, dtype=np.int64), leaves)

    @property
    def depth(self) -> int:
        return len(self.leaves).bit_length() - 1


def level_of(tree: HeapTree, j: int) -> np.ndarray:
    """Level ``j`` of a heap-layout tree (a view)."""
    return tree.leaves if j == tree.depth else tree.upper[2 ** j:2 ** (j + 1)]


def fill_upper_levels(tree: HeapTree, r: int) -> None:
    """Levels ``r-1, ..., 0`` of a heap-layout tree as pairwise sums of the level below, in place."""
    for j in range(r - 1, -1, -1):
        children = level_of(tree, j + 1)
        np.add(children[0::2], children[1::2], out=level_of(tree, j))


# -- noise plan and depth ---------------------------------------------------------------
@dataclass(frozen=True)
class NoisePlan:
    r"""Per-level discrete Laplace scales of PMM and the privacy ledger they spend.

    Attributes
    ----------
    sigmas : ndarray (r+1,)
        ``sigma_j``; ``inf`` at the root under replace-one (``n`` is public, no noise).
    level_epsilons : ndarray (r+1,)
        ``sensitivity / sigma_j``: the budget of level ``j`` (0 where no noise).
    sensitivity : int
        Count change per level between neighbours: 1 (add/remove) or 2 (replace-one).
    ledger : list of (stage, epsilon)
        One entry per noisy level; ``math.fsum`` equals epsilon exactly.
    """

    sigmas: np.ndarray
    level_epsilons: np.ndarray
    sensitivity: int
    ledger: Ledger


def noise_plan(r: int, d: int, epsilon: float, neighbouring: str = "add_remove") -> NoisePlan:
    r"""Optimal per-level scales (A.4) calibrated to the neighbouring relation.

    add/remove ([HVZ23] Thm 4.1): every level's counts change in one cell by 1, so
    ``epsilon = sum_{j=0}^r 1/sigma_j``; (A.4) gives
    ``sigma_j = S / (epsilon sqrt(Delta_{j-1}))`` with ``S = sum_j sqrt(Delta_{j-1})``
    ([ERRATUM] (A.4) writes ``Delta_{i-1}`` inside the sum).

    replace-one (Thm 4.1's argument, two changed cells per level): ``n`` is public, the root gets no noise, and each
    level ``j >= 1`` has two cells changing by 1, so ``epsilon = 2 sum_{j=1}^r 1/sigma_j`` and
    ``sigma_j = 2 S' / (epsilon sqrt(Delta_{j-1}))`` with ``S' = sum_{j>=1} sqrt(Delta_{j-1})``.
    With ``r = 0`` nothing data-dependent is released (the whole budget is recorded,
    unused, on the root).

    The ledger is built first, with the last level taking the exact remainder, so that
    ``math.fsum(ledger) == epsilon`` bit for bit; ``sigma_j = sensitivity / eps_j``.
    """
    sensitivity = count_sensitivity(neighbouring)
    first = 0 if neighbouring == "add_remove" else 1
    weights = [math.sqrt(level_delta(j - 1, d)) for j in range(first, r + 1)]
    level_eps = np.zeros(r + 1)
    if not weights:
        ledger = [("level 0: n is public under replace-one, no count released", epsilon)]
        return NoisePlan(np.array([np.inf]), level_eps, sensitivity, ledger)
    split = split_epsilon(epsilon, [(str(j), w) for j, w in zip(range(first, r + 1), weights, strict=True)])
    level_eps[first:] = [e for _, e in split]
    sigmas = np.full(r + 1, np.inf)
    sigmas[first:] = sensitivity / level_eps[first:]
    ledger = [(f"level {j}: discrete Laplace, sigma_{j} = {sigmas[j]:.4g}", float(level_eps[j]))
              for j in range(first, r + 1)]
    return NoisePlan(sigmas, level_eps, sensitivity, ledger)


def accuracy_bound(n: int, epsilon: float, d: int, r: int, neighbouring: str = "add_remove") -> float:
    r"""Expected-W1 bound of Theorem 4.2 with the scales of :func:`noise_plan`.

    .. math:: E\,W_1(\mu_X, \mu_Y) \le \frac{2\sqrt2}{n}\sum_{j=0}^r \sigma_j\Delta_{j-1} + \delta,
              \qquad \delta = 2^{-\lfloor r/d \rfloor}

    (levels without noise are left out).  Under add/remove this equals Theorem 4.3
    with the corrected constant, ``2 sqrt(2) S^2 / (epsilon n) + delta``
    (:data:`THM43_CONSTANT`; the paper prints ``sqrt(2)``).
    """
    sigmas = noise_plan(r, d, epsilon, neighbouring).sigmas
    noisy = np.isfinite(sigmas)
    deltas = np.array([level_delta(j - 1, d) for j in range(r + 1)])
    return float(THM43_CONSTANT / n * np.sum(sigmas[noisy] * deltas[noisy]) + level_diameter(r, d))


def paper_depth(n: int, epsilon: float, d: int) -> int:
    """Depth of Corollary 4.4: ``floor(log2(epsilon n)) - [d = 1]``, and 0 when ``epsilon n < 2``.

    Not capped (see :data:`MAX_DEPTH`).  It depends on ``n``: under add/remove this
    treats ``n`` as public.
    """
    scale = epsilon * n
    if scale < 2:
        return 0
    return max(0, math.floor(math.log2(scale)) - (d == 1))


def bound_opt_depth(n: int, epsilon: float, d: int, neighbouring: str = "add_remove",
                    max_depth: int = MAX_DEPTH) -> int:
    """The depth ``0..max_depth`` minimising :func:`accuracy_bound` (smallest on ties)."""
    bounds = [accuracy_bound(n, epsilon, d, r, neighbouring) for r in range(max_depth + 1)]
    return int(np.argmin(bounds))


# -- consistency (Algorithm 3) ------------------------------------------------------------
def consistency(noisy: list[np.ndarray], rule: str = "proportional",
                rng: np.random.Generator | None = None) -> list[np.ndarray]:
    r"""Algorithm 3 of [HVZ23]: top-down consistent non-negative integer counts.

    ``m_root = n'_root``; then for every level and cell the children's noisy counts
    ``(a, b)`` are replaced by a point ``(x, M - x)`` of the discrete segment
    ``Z_+^2 \cap \{x + y = M\}`` *comparable* with ``(a, b)`` (both weakly up on a
    deficit, both weakly down on a surplus), where ``M`` is the parent's *consistent*
    count.

    Parameters
    ----------
    noisy : list of integer arrays
        Non-negative noisy counts ``n'`` of levels ``0..r`` in heap order.
    rule : {"proportional", "uniform"}
        ``proportional``: ``x = floor(M a / (a + b))`` (``floor(M/2)`` when ``a+b = 0``);
        ``uniform``: the Euclidean-closest point of the segment,
        ``x = (M + a - b)/2`` clipped to the comparable range, ties (odd ``M + a - b``)
        by a fair coin from ``rng``.  Both keep comparability exactly ([HVZ23] Section 4.2, Algorithm 3).
    rng : numpy.random.Generator
        Needed for ``uniform``.

    The work is done by :func:`consistency_in_place` on a heap-layout copy.
    """
    r = len(noisy) - 1
    tree = HeapTree.allocate(r)
    for j, level in enumerate(noisy):
        level_of(tree, j)[:] = level
    consistency_in_place(tree, r, rule, rng)
    return [level_of(tree, j) for j in range(r + 1)]


#: Parents per chunk of :func:`consistency_in_place` (its scratch stays in the CPU caches).
CONSISTENCY_CHUNK = 2 ** 15


def consistency_in_place(tree: HeapTree, r: int, rule: str = "proportional",
                         rng: np.random.Generator | None = None) -> None:
    """:func:`consistency` on a heap-layout tree (:class:`HeapTree`) of noisy counts, overwriting it.

    Level by level from the top: a level's consistent counts replace its noisy counts once the
    level above is consistent, so the children's noisy counts are read just before they are
    overwritten.  Scratch memory is :data:`CONSISTENCY_CHUNK` entries, whatever the depth.
    """
    if rule not in ("proportional", "uniform"):
        raise ValueError(f"unknown consistency rule {rule!r}")
    if rule == "uniform" and rng is None:
        raise ValueError("the 'uniform' consistency rule splits odd totals at random: it needs rng")
    tie_rng = rng if rule == "uniform" else None
    scratch = [np.empty(min(CONSISTENCY_CHUNK, 2 ** max(r - 1, 0)), dtype=np.int64) for _ in range(3)]
    quotient = np.empty(len(scratch[0]))
    for j in range(r):
        parents, children = level_of(tree, j), level_of(tree, j + 1)
        product = int(parents.max()) * (int(children.max()) + 1) if rule == "proportional" else 0
        wide = product >= 2 ** 62
        exact = quotient if product < 2 ** 53 else None  # float division is exact below 2^53
        for start in range(0, len(parents), CONSISTENCY_CHUNK):
            stop = min(len(parents), start + CONSISTENCY_CHUNK)
            total = parents[start:stop]
            a, b = children[2 * start:2 * stop:2], children[2 * start + 1:2 * stop:2]
            left = scratch[0][:stop - start]
            if tie_rng is not None:
                left[:] = uniform_split(a, b, total, tie_rng)
            elif wide:
                left[:] = proportional_split(a, b, total)
            else:
                _proportional_left(a, b, total, left, scratch[1][:stop - start], scratch[2][:stop - start],
                                   None if exact is None else exact[:stop - start])
            a[:] = left
            np.subtract(total, left, out=b)


def _proportional_left(a: np.ndarray, b: np.ndarray, total: np.ndarray, left: np.ndarray, s: np.ndarray,
                       zero: np.ndarray, quotient: np.ndarray | None = None) -> None:
    """``left = floor(total a / (a + b))``, ``floor(total / 2)`` where ``a + b = 0`` (no overflow: checked by the
    caller).

    Branch-free: with ``z = [a + b = 0]``, ``floor(total (a + z) / (a + b + 2z))`` is both.  With a float
    scratch ``quotient`` (the caller passes one when ``total (a + 1) < 2^53``) the floor of the correctly
    rounded float quotient replaces the slower integer division, with the same result: for integers
    ``0 <= x < 2^53`` and ``y >= 1`` both convert exactly, and if ``k < x/y < k + 1`` then
    ``k + 1 - x/y >= 1/y > (x/y) 2^{-53}`` (as ``x < 2^53``), which exceeds the rounding error, so the
    rounded quotient stays in ``[k, k + 1)``; an integer quotient is exact.
    """
    np.add(a, b, out=s)
    np.equal(s, 0, out=zero, casting="unsafe")
    np.add(s, zero, out=s)
    np.add(s, zero, out=s)
    np.add(a, zero, out=zero)
    np.multiply(total, zero, out=left)
    if quotient is None:
        np.floor_divide(left, s, out=left)
        return
    np.divide(left, s, out=quotient)
    np.floor(quotient, out=quotient)
    np.copyto(left, quotient, casting="unsafe")


def proportional_split(a: np.ndarray, b: np.ndarray, total: np.ndarray) -> np.ndarray:
    """Left child ``floor(total a / (a + b))``; floor keeps comparability since a, b are integers."""
    s = a + b
    positive = s > 0
    safe = np.where(positive, s, 1)
    if int(total.max(initial=0)) * int(a.max(initial=0)) < 2 ** 62:
        ratio = total * a // safe
    else:  # exact in Python integers when the product could overflow int64
        ratio = (total.astype(object) * a.astype(object) // safe.astype(object)).astype(np.int64)
    return np.where(positive, ratio, total // 2)


def uniform_split(a: np.ndarray, b: np.ndarray, total: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """Left child of the Euclidean-closest comparable point: ``(total + a - b)/2`` clipped."""
    twice = total + a - b
    left = twice // 2 + (twice % 2) * rng.integers(0, 2, size=len(twice))
    low = np.maximum(0, np.minimum(a, total - b))
    high = np.minimum(total, np.maximum(a, total - b))
    return np.clip(left, low, high)


def flux(a0: np.ndarray, a1: np.ndarray, b0: np.ndarray, b1: np.ndarray) -> np.ndarray:
    """``flux(a, b)`` of [HVZ23] §4.5: 0 if comparable, else ``min(|a0-b0|, |a1-b1|)`` (Lemma 4.6)."""
    a0, a1, b0, b1 = (np.asarray(v, dtype=np.int64) for v in (a0, a1, b0, b1))
    comparable = ((a0 <= b0) & (a1 <= b1)) | ((a0 >= b0) & (a1 >= b1))
    return np.where(comparable, 0, np.minimum(np.abs(a0 - b0), np.abs(a1 - b1)))


def pathwise_bound(lambdas: list[np.ndarray], n: int, d: int) -> float:
    r"""The realised W1 bound from the proof of Theorem 4.2.

    .. math:: W_1(\mu_X, \mu_Y) \le \frac{|\lambda_\emptyset|\Delta_0 + D}{n} + \delta, \quad
              D = \sum_{j=0}^{r-1}\sum_{\theta\in\{0,1\}^j}
                  \max(|\lambda_{\theta0}|, |\lambda_{\theta1}|)\operatorname{diam}\Omega_\theta

    It holds for every realisation with ``m > 0`` (uniform or centre sampling, no
    ``n_synthetic`` rescaling).  ``lambdas`` are the integer noise arrays of levels
    ``0..r`` (root entry 0 under replace-one).
    """
    r = len(lambdas) - 1
    moved = sum(level_diameter(j - 1, d) * float(np.maximum(np.abs(lam[0::2]), np.abs(lam[1::2])).sum())
                for j, lam in enumerate(lambdas) if j > 0)
    return (abs(float(lambdas[0][0])) * level_delta(0, d) + moved) / n + level_diameter(r, d)
