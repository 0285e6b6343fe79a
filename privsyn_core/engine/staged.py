"""Count-based mechanisms in two stages, so that the counting can run anywhere (in memory or on Dask).

A count-based mechanism reads the private data only through the counts of a data-independent
partition (grid cells, tree leaves).  It is written as

1. ``layout(n, d, epsilon, neighbouring, params) -> layout``: the public partition (depth, cells per
   axis, ...), a function of the public quantities ``n, d, epsilon`` and the parameters, where ``n``
   is the public record count of :func:`privsyn_core.engine.pipeline.public_size` (``None`` when the
   mechanism declared that these parameters read none);
2. ``count(unit, layout) -> CellCounts``: the finest counts of a block of encoded rows, as sorted
   sparse ``(ids, counts)``; counts of disjoint blocks merge by summation (:func:`merge_counts`);
3. ``release(counts, n, d, epsilon, *, neighbouring, n_synthetic, rng, layout, params)
   -> (MechanismOutput without rows, RowPlan)``: noise, consistency and everything after it,
   a function of the counts only.  A release may consume its counts (:meth:`CellCounts.take_dense`
   hands their memory over), so counts are passed to one release only.

The in-memory run function calls exactly these stages (:meth:`Stages.run`), and the Dask path
(:mod:`privsyn_core.engine.dask_backend`) calls the same ``layout`` and ``release`` with the counts summed
over partitions, so both paths give the same release for the same data and seed by construction.

Synthetic rows come from a :class:`RowPlan`: released atoms with integer row counts, in a fixed order.
The rows are cut into blocks of at most :data:`ROW_BLOCK` rows; one block uses the plan's generator,
several blocks use ``rng.spawn(n_blocks)`` children, one per block, so that every block (a Dask
partition) can produce its rows alone.  Everything in a plan is released output: generating rows is
post-processing.

Row order.  The rows of a block are in a uniformly random order (:func:`shuffle_rows`, or labels shuffled
before the rows are drawn), and with several blocks the blocks are laid out in a uniformly random order
(:meth:`RowPlan.pieces`, from the plan's generator).  So a release of at most :data:`ROW_BLOCK` rows is a
uniformly random permutation and its row order carries no information about the values.  With several blocks
(more than ``ROW_BLOCK`` rows) each block still holds a contiguous run of the atoms (in their canonical order):
which rows share a block says which atoms they are near; assigning the rows to the blocks at random would need
a split of every atom's count between the blocks (a multivariate hypergeometric draw per atom, on the client)
and is not done.  Both paths (in memory and Dask) use the same blocks in the same order, so they give the same
rows.
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace
from typing import Any, TypeVar

import numpy as np

from privsyn_core.result import MechanismOutput

_T = TypeVar("_T")

#: Largest number of synthetic rows generated from one generator (64 MB of float64 rows at d = 2).  Rows are
#: shuffled within their block, so this size is part of the output's law (row order): keep it fixed.
ROW_BLOCK = 2 ** 22
#: Rows per chunk of :meth:`RowPlan.rows` (its column scratch stays in the CPU caches).
ROW_CHUNK = 2 ** 16
#: :meth:`CellCounts.from_ids` counts with a dense bincount when the ids are below this many times their number.
DENSE_FACTOR = 4
#: Atoms per group when locating the atom of a row (:meth:`RowPlan.pieces`).
_LOCATE_GROUP = 2 ** 12
#: Leaves per group of a ``"leaf"`` plan's rows (:meth:`RowPlan._fill_leaves`).
LEAF_GROUP = 2 ** 14
#: Rows per pile of :func:`shuffled_piles` on average: a pile's int32 labels stay in a core's L2 cache while
#: they are shuffled.
PILE_ROWS = 2 ** 16


class CellCounts:
    """Finest counts: sorted distinct cell ids and their positive counts (``ids``, ``counts``).

    Built from a dense array (:meth:`from_dense`) it keeps that array and computes the sparse
    view only when asked, so the in-memory path pays nothing for it; :meth:`sparse` drops the
    dense array (what a Dask partition sends back).
    """

    def __init__(self, ids: np.ndarray | None = None, counts: np.ndarray | None = None, *,
                 full: np.ndarray | None = None) -> None:
        self._ids, self._counts, self._full = ids, counts, full

    @classmethod
    def from_dense(cls, dense: np.ndarray) -> CellCounts:
        return cls(full=np.asarray(dense, dtype=np.int64))

    @classmethod
    def from_ids(cls, cell_ids: np.ndarray) -> CellCounts:
        """Counts of non-negative cell ids: a bincount when the ids are below :data:`DENSE_FACTOR` times
        their number (``O(n)``), else a sort (``numpy.unique``, ``O(n log n)``, for sparse huge id spaces)."""
        cell_ids = np.asarray(cell_ids, dtype=np.int64)
        if len(cell_ids) and int(cell_ids.max()) < DENSE_FACTOR * len(cell_ids) + 2 ** 16:
            dense = np.bincount(cell_ids)
            ids = np.flatnonzero(dense)
            return cls(ids, dense[ids])
        ids, counts = np.unique(cell_ids, return_counts=True)
        return cls(ids.astype(np.int64), counts.astype(np.int64))

    def take_dense(self, size: int) -> np.ndarray:
        """All ``size`` counts as a writable int64 array the caller owns from now on.

        The dense array these counts hold is handed over without a copy when it can be (grown in place
        to ``size`` entries, zeros added, if it is shorter), else a new array is filled; these counts
        can no longer be read afterwards (an accessor raises), so that only the caller holds the memory.
        """
        full = self._full
        if full is not None and len(full) <= size and full.flags.owndata and full.flags.writeable:
            if len(full) < size:
                full.resize(size, refcheck=False)  # realloc: no second copy of the counts at once
        else:
            full = self.dense(size).copy() if full is not None and len(full) == size else self._scatter(size)
        self._full = self._ids = self._counts = None
        self._taken = True
        return full

    def _scatter(self, size: int) -> np.ndarray:
        out = np.zeros(size, dtype=np.int64)
        out[self.ids] = self.counts
        return out

    @property
    def ids(self) -> np.ndarray:
        if getattr(self, "_taken", False):
            raise RuntimeError("internal error: these counts were handed over to a release (take_dense)")
        if self._ids is None:
            self._ids = np.flatnonzero(self._held()).astype(np.int64)
        return self._ids

    @property
    def counts(self) -> np.ndarray:
        if self._counts is None:
            self._counts = self._held()[self.ids]
        return self._counts

    def _held(self) -> np.ndarray:
        """The dense counts, when these were built from them (``ids`` and ``counts`` then derive from them)."""
        if self._full is None:
            raise RuntimeError("internal error: counts built from ids hold no dense array")
        return self._full

    def dense(self, size: int) -> np.ndarray:
        """All ``size`` counts as an int64 array (zeros for absent ids); do not modify it."""
        if self._full is not None and len(self._full) == size:
            return self._full
        return self._scatter(size)

    def sparse(self) -> CellCounts:
        return CellCounts(self.ids, self.counts)

    @property
    def total(self) -> int:
        if self._full is not None:  # no sparse view materialised just for the sum
            return int(self._full.sum())
        return int(self.counts.sum())


def merge_counts(parts: list[CellCounts]) -> CellCounts:
    """Sum sparse counts of disjoint blocks of rows (the result is what one block of all rows gives).

    The parts are sorted runs, so a stable sort of their concatenation is a merge (timsort); the
    sums are exact int64.
    """
    parts = [p for p in parts if len(p.ids)]
    if not parts:
        return CellCounts(np.empty(0, dtype=np.int64), np.empty(0, dtype=np.int64))
    if len(parts) == 1:
        return parts[0]
    ids = np.concatenate([p.ids for p in parts])
    order = np.argsort(ids, kind="stable")
    ids, counts = ids[order], np.concatenate([p.counts for p in parts])[order]
    starts = np.flatnonzero(np.r_[True, ids[1:] != ids[:-1]])
    return CellCounts(ids[starts], np.add.reduceat(counts, starts))


@dataclass
class RowPlan:
    """How synthetic rows are drawn from released atoms (post-processing only).

    Atom ``i`` gets ``counts[i]`` rows, atoms in order.  ``mode``:

    * ``"point"``: the row is ``points[i]``;
    * ``"box"``: uniform in the box ``[lo[i], hi[i]]`` (``lo + U (hi - lo)``);
    * ``"leaf"``: PMM's leaf sampling ``(U + c_t) * side``, where the atoms are the consecutive
      depth-``depth`` leaves ``t = first_leaf, first_leaf + 1, ...`` of the binary partition (heap
      order) and ``c_t`` is leaf ``t``'s integer corner
      (:func:`privsyn_core.mechanisms.hvz23.pmm_tree.leaf_axis_coordinates`); with ``uniform=False`` the row is
      ``(0.5 + c_t) * side``.  ``points`` is an empty ``(0, d)`` array
      and ``counts`` are dense (zeros included), so no per-leaf table is held;
    * ``"cube"``: uniform on ``[0,1]^d`` (nothing was released; ``counts`` has one entry);
    * ``"jitter"``: ``points[i] + (U - 0.5) / bins``, uniform in the grid cell of side ``1/bins``
      centred at ``points[i]`` (``srw``'s rows).

    ``shuffle`` permutes the rows of each block uniformly at random (:func:`shuffled_piles`, or
    :func:`shuffle_rows` for a ``"leaf"`` plan), so row order does not reveal the atom order; ``False`` only for
    plans whose rows are i.i.d. draws already (exchangeable).  Rows are computed column by column in a
    chunk-sized scratch column (in the CPU caches) and copied into the ``(rows, d)`` output.
    """

    mode: str
    counts: np.ndarray
    points: np.ndarray
    rng: np.random.Generator
    lo: np.ndarray | None = None
    hi: np.ndarray | None = None
    side: np.ndarray | None = None
    uniform: bool = True
    bins: int | None = None
    shuffle: bool = True
    block_rows: int = field(default_factory=lambda: ROW_BLOCK)
    depth: int | None = None
    first_leaf: int = 0

    @property
    def total(self) -> int:
        return int(np.sum(self.counts, dtype=np.int64))

    @property
    def dim(self) -> int:
        return int(self.points.shape[1])

    @classmethod
    def from_counts(cls, counts: np.ndarray, lo: np.ndarray, hi: np.ndarray, *, sample: str,
                    rng: np.random.Generator) -> RowPlan:
        """``counts[i]`` rows in cell ``[lo[i], hi[i]]``: at its centre (``sample="center"``) or uniform in it
        (``"uniform"``), drawn from ``rng``; cells without rows are left out."""
        used = counts > 0
        mode = "box" if sample == "uniform" else "point"
        return cls(mode, counts[used], (lo[used] + hi[used]) / 2, rng, lo=lo[used], hi=hi[used])

    def blocks(self) -> list[tuple[int, int]]:
        """Row ranges ``[start, stop)`` of the blocks (one empty block when there are no rows)."""
        total = self.total
        edges = list(range(0, total, self.block_rows)) + [total]
        return list(itertools.pairwise(edges)) or [(0, 0)]

    def block_generators(self) -> list[np.random.Generator]:
        """The plan's generator for a single block, else one spawned child per block."""
        n_blocks = len(self.blocks())
        return [self.rng] if n_blocks == 1 else self.rng.spawn(n_blocks)

    def pieces(self) -> list[tuple[int, int, RowPlan]]:
        """``(start, stop, piece)`` of every block, each piece drawing from its block generator.

        The atoms of all block edges are located in one pass over the counts (:meth:`_locate`).  With several
        blocks, the blocks are laid out in a uniformly random order (a permutation from the plan's generator):
        ``(start, stop)`` is where a block's rows go in the output, not where its atoms are.
        """
        blocks = self.blocks()
        rows = [start for start, stop in blocks if stop > start] + [stop - 1 for start, stop in blocks if stop > start]
        found = {}
        if rows:
            located = zip(*self._locate(np.array(rows, dtype=np.int64)), strict=True)
            found = dict(zip(rows, located, strict=True))
        pieces = [self._piece(start, stop, rng, found.get(start), found.get(stop - 1))
                  for (start, stop), rng in zip(blocks, self.block_generators(), strict=True)]
        if len(pieces) > 1:
            pieces = [pieces[i] for i in self.rng.permutation(len(pieces))]
        ends = np.cumsum([piece.total for piece in pieces]).tolist()
        return [(stop - piece.total, stop, piece) for piece, stop in zip(pieces, ends, strict=True)]

    def piece(self, start: int, stop: int, rng: np.random.Generator) -> RowPlan:
        """The plan of rows ``[start, stop)`` alone (only the atoms they use), drawing from ``rng``."""
        if stop <= start:
            return self._piece(start, stop, rng, None, None)
        atoms, before = self._locate(np.array([start, stop - 1], dtype=np.int64))
        return self._piece(start, stop, rng, (atoms[0], before[0]), (atoms[1], before[1]))

    def _locate(self, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """For each row number, the atom holding it and the number of rows before that atom.

        Groups of :data:`_LOCATE_GROUP` atoms are summed first, so only the groups holding the rows are
        scanned atom by atom: ``O(atoms)`` time and ``O(atoms / group)`` memory (no full cumulative sum).
        """
        counts = self.counts
        starts = np.arange(0, len(counts), _LOCATE_GROUP)
        group_end = np.cumsum(np.add.reduceat(counts, starts, dtype=np.int64)) if len(counts) else np.zeros(0, np.int64)
        atoms, before = np.empty(len(rows), dtype=np.int64), np.empty(len(rows), dtype=np.int64)
        for i, row in enumerate(rows.tolist()):
            g = int(np.searchsorted(group_end, row, side="right"))
            base = int(group_end[g - 1]) if g else 0
            ends = base + np.cumsum(counts[g * _LOCATE_GROUP:(g + 1) * _LOCATE_GROUP], dtype=np.int64)
            k = int(np.searchsorted(ends, row, side="right"))
            atoms[i], before[i] = g * _LOCATE_GROUP + k, int(ends[k - 1]) if k else base
        return atoms, before

    def _piece(self, start: int, stop: int, rng: np.random.Generator, head: tuple | None,
               tail: tuple | None) -> RowPlan:
        """The piece of rows ``[start, stop)`` given the located (atom, rows before it) of rows ``start`` and
        ``stop - 1``."""
        if self.mode == "cube":
            return replace(self, counts=np.array([stop - start], dtype=np.int64), rng=rng,
                           block_rows=max(1, stop - start))
        if stop <= start or head is None or tail is None:  # head and tail are located for a non-empty piece
            first = last = 0
            counts = self.counts[:0].astype(np.int64)
        else:
            (first, before), (last_atom, before_last) = head, tail
            last = int(last_atom) + 1
            counts = self.counts[first:last].astype(np.int64)
            counts[-1] = stop - before_last
            counts[0] -= start - before
        if self.mode == "leaf":
            return replace(self, counts=_compact(counts), rng=rng, block_rows=max(1, stop - start),
                           first_leaf=self.first_leaf + int(first))

        def cut(a):
            return None if a is None else a[first:last]
        return replace(self, counts=counts, points=self.points[first:last], lo=cut(self.lo), hi=cut(self.hi),
                       rng=rng, block_rows=max(1, stop - start))

    def rows(self, out: np.ndarray | None = None) -> np.ndarray:
        """All rows of a one-block plan (what a block or a Dask partition computes), into ``out`` if given.

        Every row gets the label of its atom (a run of ``counts[i]`` rows per atom).  A shuffled plan
        arranges the labels in a uniformly random order (:func:`shuffled_piles`: pile by pile, each pile
        in the CPU caches) instead of permuting finished rows.  Then, column by column, in chunks of at
        most :data:`ROW_CHUNK` rows so that every pass stays in the CPU caches: ``U`` from the plan's
        generator, then the labelled atom's offset and scale.  The ``U`` are i.i.d. and independent of
        the labels, so the order in which they are drawn does not change the law of the rows.
        """
        total, d, rng = self.total, self.dim, self.rng
        out = np.empty((total, d)) if out is None else out
        tables: list[tuple[np.ndarray, ...]] = [() for _ in range(d)]
        if self.mode == "leaf":
            self._fill_leaves(out)
            if self.shuffle:
                shuffle_rows(out, rng)
            return out
        if self.mode == "cube":
            self._fill(out, None, tables)
            return out
        if self.mode == "box":
            lo, hi = _required(self.lo, "box", "lo"), _required(self.hi, "box", "hi")
            tables = [(hi[:, a] - lo[:, a], lo[:, a]) for a in range(d)]
        else:
            tables = [(np.ascontiguousarray(self.points[:, a]),) for a in range(d)]
        if not self.shuffle:
            self._fill(out, _run_labels(self.counts, total), tables)
            return out
        for start, labels in shuffled_piles(self.counts, total, rng):
            self._fill(out[start:start + len(labels)], labels, tables)
        return out

    def _fill(self, out: np.ndarray, labels: np.ndarray | None, tables: list[tuple[np.ndarray, ...]]) -> None:
        """Rows ``out`` (``(len(out), d)``) of the atoms ``labels`` (``None`` for ``"cube"``), column by column
        in chunks of :data:`ROW_CHUNK` rows."""
        total, d, rng = len(out), out.shape[1], self.rng
        atoms = np.zeros(0, dtype=np.int64) if labels is None else labels  # "cube": no atoms are read
        size = min(ROW_CHUNK, max(total, 1))
        column, looked = np.empty(size), np.empty(size)
        for a in range(d):
            for start in range(0, total, size):
                stop = min(total, start + size)
                col, tmp = column[:stop - start], looked[:stop - start]
                lab = atoms[start:stop]
                if self.mode == "point":
                    np.take(tables[a][0], lab, out=col, mode="clip")
                else:
                    rng.random(out=col)
                    if self.mode == "jitter":
                        col -= 0.5
                        col /= _required(self.bins, "jitter", "bins")
                        col += np.take(tables[a][0], lab, out=tmp, mode="clip")
                    elif self.mode == "box":
                        col *= np.take(tables[a][0], lab, out=tmp, mode="clip")
                        col += np.take(tables[a][1], lab, out=tmp, mode="clip")
                out[start:stop, a] = col

    def _fill_leaves(self, out: np.ndarray) -> None:
        """The rows of a ``"leaf"`` plan, ``(U + c_t) * side`` (``(0.5 + c_t) * side`` without ``uniform``).

        Leaves are taken in groups of :data:`LEAF_GROUP` consecutive leaves, a group halved until its rows fit
        :data:`ROW_CHUNK` (or it is one leaf, whose rows are then drawn chunk by chunk).  A leaf's corner ``c_t`` is
        ``high[t >> k] + low[t & (2^k - 1)]`` with tables of at most a few thousand entries
        (:func:`privsyn_core.mechanisms.hvz23.pmm_tree.leaf_corner_tables`, the tree geometry lives with PMM), so
        the corners of a group's consecutive leaves are a slice of the outer sum of a few ``high`` entries and
        the whole ``low`` table; the group's rows take them by ``numpy.repeat`` with the leaves' counts.  Every
        pass stays in the CPU caches and nothing of the size of the leaves or the rows is allocated.  The ``U``
        are i.i.d. uniform, drawn group by group and column by column.
        """
        from privsyn_core.mechanisms.hvz23.pmm_tree import leaf_corner_tables

        counts, d, rng = self.counts, out.shape[1], self.rng
        side = _required(self.side, "leaf", "side")
        k, tables = leaf_corner_tables(_required(self.depth, "leaf", "depth"), d)
        mask = (1 << k) - 1
        column = np.empty(ROW_CHUNK)

        def draw(col: np.ndarray) -> None:
            if self.uniform:
                rng.random(out=col)
            else:
                col[:] = 0.5

        row = 0
        groups = [(g, min(len(counts), g + LEAF_GROUP)) for g in range(0, len(counts), LEAF_GROUP)][::-1]
        while groups:
            first, last = groups.pop()
            size = int(counts[first:last].sum(dtype=np.int64))
            if size == 0:
                continue
            if size > ROW_CHUNK and last - first > 1:
                middle = (first + last) // 2
                groups += [(middle, last), (first, middle)]
                continue
            if last - first == 1:  # one leaf: a constant corner, rows in chunks
                leaf = self.first_leaf + first
                for a in range(d):
                    corner = tables[a][0][leaf >> k] + tables[a][1][leaf & mask]
                    for start in range(0, size, ROW_CHUNK):
                        col = column[:min(ROW_CHUNK, size - start)]
                        draw(col)
                        col += corner
                        col *= side[a]
                        out[row + start:row + start + len(col), a] = col
                row += size
                continue
            lead, stop = self.first_leaf + first, self.first_leaf + last
            top, col = lead >> k, column[:size]
            for a in range(d):
                high, low = tables[a]
                corners = np.add.outer(high[top:((stop - 1) >> k) + 1], low).reshape(-1)  # leaves top * 2^k, ...
                draw(col)
                col += np.repeat(corners[lead - (top << k):stop - (top << k)], counts[first:last])
                col *= side[a]
                out[row:row + size, a] = col
            row += size

    def all_rows(self) -> np.ndarray:
        """Every row, block by block, into one ``(total, d)`` array (the in-memory path)."""
        out = np.empty((self.total, self.dim))
        for start, stop, piece in self.pieces():
            if stop > start:
                piece.rows(out[start:stop])
        return out


def _required(value: _T | None, mode: str, name: str) -> _T:
    """A field a plan of this ``mode`` must have (see :class:`RowPlan`)."""
    if value is None:
        raise RuntimeError(f"internal error: a {mode!r} row plan needs {name!r}")
    return value


def shuffle_rows(rows: np.ndarray, rng: np.random.Generator) -> None:
    """Put the rows of the ``(n, d)`` array ``rows`` in a uniformly random order, in place.

    One uniform permutation of the row numbers (Fisher-Yates, ``Generator.shuffle`` of an int32 or int64
    ``arange``), applied by one gather of whole rows: the extra memory is the permutation and one copy of
    ``rows`` while it is gathered (a block of at most :data:`ROW_BLOCK` rows for a row plan); gathering column by
    column would hold one column only but measured 2-4 times slower (10^6 rows, d = 2 and 8).  Every row order
    of the output goes through here or through :func:`shuffled_piles` (the rows of a mechanism without a row
    plan: :func:`privsyn_core.api.synthesize`).
    """
    n = len(rows)
    order: np.ndarray = np.arange(n, dtype=np.int32 if n < 2 ** 31 else np.int64)
    rng.shuffle(order)
    rows[:] = np.take(rows, order, axis=0)


def _run_labels(counts: np.ndarray, total: int) -> np.ndarray:
    """``numpy.repeat(arange(len(counts)), counts)`` (int32 when it fits) as a cumulative sum of steps at the
    runs' first rows: a few passes over the rows instead of a per-atom copy loop."""
    dtype = np.int32 if len(counts) < 2 ** 31 else np.int64
    labels = np.zeros(total, dtype=dtype)
    present = np.flatnonzero(counts)
    if len(present):
        starts = np.cumsum(counts, dtype=np.int64)[present] - counts[present]
        labels[starts] = np.diff(present, prepend=0)
        np.cumsum(labels, out=labels)
    return labels


def shuffled_piles(counts: np.ndarray, total: int,
                   rng: np.random.Generator) -> Iterator[tuple[int, np.ndarray]]:
    """The labels ``repeat(arange(m), counts)`` in a uniformly random order, as ``(start, labels)`` piles.

    The Rao-Sandelius method (C. R. Rao, "Generation of random permutations of given number of elements
    using random sampling numbers", Sankhya A 23, 1961; M. Sandelius, "A simple randomization procedure",
    JRSS B 24, 1962): every row draws an i.i.d. uniform pile among ``K = ceil(total / PILE_ROWS)`` (at most
    256), the piles are laid out in order, and the labels of every pile are shuffled uniformly
    (Fisher-Yates, ``Generator.shuffle``), independently.  Exact in law: this orders the rows by the keys
    ``(pile, u)`` with ``u`` i.i.d. continuous (the pile's shuffle), and i.i.d. keys that are almost surely
    distinct rank the rows in a uniformly random order, the law of one Fisher-Yates pass over all of them.
    A pile (about :data:`PILE_ROWS` labels) is shuffled in the CPU cache, where one pass over millions of
    labels misses the cache at almost every swap.

    The piles' contents are the counts ``N[k, i]`` of rows of atom ``i`` in pile ``k``, one ``bincount`` of
    ``k m + i`` over the rows (when the ``K m`` table is not larger than the rows), else a stable radix sort
    of the ``uint8`` piles; a pile's labels are then built from its counts, or taken from the sort, and
    shuffled.  Either way the pile of every row is drawn first, so both give the same law.
    """
    m = len(counts)
    piles = min(256, -(-total // PILE_ROWS))
    if piles <= 1:
        labels = _run_labels(counts, total)
        rng.shuffle(labels)
        yield 0, labels
        return
    if piles * m <= total:  # the table holds at most one int64 per row; int32 keys (piles * m < 2^31)
        key = rng.integers(0, piles, size=total, dtype=np.int32)
        key *= m
        key += _run_labels(counts, total)
        table = np.bincount(key, minlength=piles * m).reshape(piles, m)
        del key
        start = 0
        for pile_counts in table:
            size = int(pile_counts.sum())
            labels = _run_labels(pile_counts, size)
            rng.shuffle(labels)
            yield start, labels
            start += size
        return
    pile = rng.integers(0, piles, size=total, dtype=np.uint8)
    grouped = _run_labels(counts, total)[np.argsort(pile, kind="stable")]
    ends = np.cumsum(np.bincount(pile, minlength=piles)).tolist()
    del pile
    for start, stop in zip([0] + ends[:-1], ends, strict=True):
        labels = grouped[start:stop]
        rng.shuffle(labels)
        yield start, labels


def _compact(counts: np.ndarray) -> np.ndarray:
    """Non-negative counts in the smallest unsigned dtype that holds them (released values: public)."""
    top = int(counts.max(initial=0))
    for dtype in (np.uint8, np.uint16, np.uint32):
        if top <= np.iinfo(dtype).max:
            return counts.astype(dtype)
    return counts


#: Key of ``params`` holding the variance of the public count ``n`` when it is a noisy count (the pipeline's
#: stage, :func:`privsyn_core.engine.pipeline.size_params`); absent otherwise.  A release may combine it with its
#: own noisy estimates of ``n`` (PMM's root count).
SIZE_VARIANCE = "size_variance"

#: ``size`` of a run called directly, not through :func:`privsyn_core.synthesize`: the caller treats
#: ``len(unit)`` as public.  :mod:`privsyn_core.engine.pipeline` always passes the public count (or ``None``).
EXACT_N = "exact"


def _unchanged(unit: np.ndarray) -> np.ndarray:
    """The default ``prepare`` of :class:`Stages`: the unit rows as they are."""
    return unit


@dataclass(frozen=True)
class Stages:
    """The three stages of a count-based mechanism (module docstring).

    ``rows_as_unit``: the mechanism releases its rows themselves (no atoms or weights), so the run's
    ``unit`` is its rows (PMM).
    """

    layout: Callable[..., Any]
    count: Callable[[np.ndarray, Any], CellCounts]
    release: Callable[..., tuple[MechanismOutput, RowPlan]]
    prepare: Callable[[np.ndarray], np.ndarray] = _unchanged
    rows_as_unit: bool = False

    def run(self, unit: np.ndarray, epsilon: float, *, neighbouring: str, n_synthetic: int | None,
            rng: np.random.Generator, size: int | str | None = EXACT_N, **params: Any) -> MechanismOutput:
        """The in-memory run: layout, count all rows as one block, release, draw the rows.

        ``size`` is the public record count the layout and the release may read: the exact ``n``
        only for a direct call (:data:`EXACT_N`), else what :func:`privsyn_core.engine.pipeline.public_size`
        decided (``None`` when the parameters need none).
        """
        unit = self.prepare(unit)
        d = unit.shape[1]
        n = len(unit) if size == EXACT_N else size
        layout = self.layout(n, d, epsilon, neighbouring, params)
        start = time.perf_counter()
        counts = self.count(unit, layout)
        seconds = time.perf_counter() - start
        out, plan = self.release(counts, n, d, epsilon, neighbouring=neighbouring, n_synthetic=n_synthetic, rng=rng,
                                 layout=layout, params=params)
        out.timings["count"] = seconds
        rows = finish_rows(out, plan)
        if self.rows_as_unit:
            out.unit = rows
        else:
            out.rows = rows
        return out


def finish_rows(out: MechanismOutput, plan: RowPlan) -> np.ndarray:
    """Draw the plan's rows (in random order: ``out.rows_shuffled``), timing it as ``out.timings["sample"]``."""
    start = time.perf_counter()
    rows = plan.all_rows()
    out.timings["sample"] = out.timings.get("sample", 0.0) + time.perf_counter() - start
    out.rows_shuffled = True
    return rows
