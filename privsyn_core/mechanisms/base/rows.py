"""Synthetic rows from released atoms: :class:`RowPlan` and one subclass per way of drawing a row.

A row plan holds released atoms with integer row counts, in a fixed order; everything in it is released output,
so generating rows is post-processing.  The plans are :class:`PointPlan` (the atom itself), :class:`JitterPlan`
(uniform in the grid cell centred at the atom), :class:`BoxPlan` (uniform in the atom's box), :class:`CubePlan`
(uniform on ``[0,1]^d``: nothing was released); a mechanism with its own way of drawing rows subclasses
:class:`RowPlan` in its folder (PMM's leaves, :class:`privsyn_core.mechanisms.hvz23.leaf_plan.LeafPlan`;
marginal_tree's tree sampler).

Blocks.  The rows are cut into blocks of at most :data:`ROW_BLOCK` rows; one block uses the plan's generator,
several blocks use ``rng.spawn(n_blocks)`` children, one per block, so that every block (a Dask partition) can
produce its rows alone.

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
from abc import ABC, abstractmethod
from collections.abc import Iterator
from dataclasses import dataclass, field, replace

import numpy as np

#: Largest number of synthetic rows generated from one generator (64 MB of float64 rows at d = 2).  Rows are
#: shuffled within their block, so this size is part of the output's law (row order): keep it fixed.
ROW_BLOCK = 2 ** 22
#: Rows per chunk of :meth:`RowPlan.rows` (its column scratch stays in the CPU caches).
ROW_CHUNK = 2 ** 16
#: Atoms per group when locating the atom of a row (:meth:`RowPlan.pieces`).
_LOCATE_GROUP = 2 ** 12
#: Rows per pile of :func:`shuffled_piles` on average: a pile's int32 labels stay in a core's L2 cache while
#: they are shuffled.
PILE_ROWS = 2 ** 16


@dataclass
class RowPlan(ABC):
    """How synthetic rows are drawn from released atoms (post-processing only).

    Atom ``i`` gets ``counts[i]`` rows, atoms in order; ``points`` is ``(atoms, d)`` (a subclass that holds no
    per-atom table keeps an empty ``(0, d)`` array there, for the width).  ``shuffle`` permutes the rows of each
    block uniformly at random (:func:`shuffled_piles` or :func:`shuffle_rows`), so row order does not reveal the
    atom order; ``False`` only for plans whose rows are i.i.d. draws already (exchangeable).  A subclass says how
    a block draws its rows (:meth:`rows`) and what a block keeps of the plan (:meth:`_piece`).
    """

    counts: np.ndarray
    points: np.ndarray
    rng: np.random.Generator
    shuffle: bool = True
    block_rows: int = field(default_factory=lambda: ROW_BLOCK)

    @property
    def total(self) -> int:
        return int(np.sum(self.counts, dtype=np.int64))

    @property
    def dim(self) -> int:
        return int(self.points.shape[1])

    @staticmethod
    def from_counts(counts: np.ndarray, lo: np.ndarray, hi: np.ndarray, *, sample: str,
                    rng: np.random.Generator) -> RowPlan:
        """``counts[i]`` rows in cell ``[lo[i], hi[i]]``: at its centre (``sample="center"``, a :class:`PointPlan`)
        or uniform in it (``"uniform"``, a :class:`BoxPlan`), drawn from ``rng``; cells without rows are left
        out."""
        used = counts > 0
        centres = (lo[used] + hi[used]) / 2
        if sample == "uniform":
            return BoxPlan(counts[used], centres, rng, lo=lo[used], hi=hi[used])
        return PointPlan(counts[used], centres, rng)

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

    @abstractmethod
    def _piece(self, start: int, stop: int, rng: np.random.Generator, head: tuple | None,
               tail: tuple | None) -> RowPlan:
        """The plan of rows ``[start, stop)`` alone, drawing from ``rng``, given the located (atom, rows before it)
        of rows ``start`` and ``stop - 1`` (``None`` for an empty piece)."""

    def _cut(self, start: int, stop: int, head: tuple | None, tail: tuple | None) -> tuple[int, int, np.ndarray]:
        """``(first, last, counts)``: rows ``[start, stop)`` use the atoms ``first .. last - 1``, with ``counts``
        of their rows."""
        if stop <= start or head is None or tail is None:  # head and tail are located for a non-empty piece
            return 0, 0, self.counts[:0].astype(np.int64)
        (first, before), (last_atom, before_last) = head, tail
        last = int(last_atom) + 1
        counts = self.counts[first:last].astype(np.int64)
        counts[-1] = stop - before_last
        counts[0] -= start - before
        return int(first), last, counts

    @abstractmethod
    def rows(self, out: np.ndarray | None = None) -> np.ndarray:
        """All rows of a one-block plan (what a block or a Dask partition computes), into ``out`` if given."""

    def all_rows(self) -> np.ndarray:
        """Every row, block by block, into one ``(total, d)`` array (the in-memory path)."""
        out = np.empty((self.total, self.dim))
        for start, stop, piece in self.pieces():
            if stop > start:
                piece.rows(out[start:stop])
        return out


@dataclass
class PointPlan(RowPlan):
    """Every row of atom ``i`` is ``points[i]``.

    Every row gets the label of its atom (a run of ``counts[i]`` rows per atom).  A shuffled plan arranges the
    labels in a uniformly random order (:func:`shuffled_piles`: pile by pile, each pile in the CPU caches) instead
    of permuting finished rows.  Then, column by column, in chunks of at most :data:`ROW_CHUNK` rows so that every
    pass stays in the CPU caches, the labelled atom's value (and, in a subclass, ``U`` from the plan's generator,
    :meth:`_draw`).  The ``U`` are i.i.d. and independent of the labels, so the order in which they are drawn does
    not change the law of the rows.
    """

    def _tables(self) -> list[tuple[np.ndarray, ...]]:
        """Per column, the per-atom arrays :meth:`_draw` reads."""
        return [(np.ascontiguousarray(self.points[:, a]),) for a in range(self.dim)]

    def _draw(self, col: np.ndarray, scratch: np.ndarray, labels: np.ndarray, table: tuple[np.ndarray, ...]) -> None:
        """One chunk of one column: the rows of atoms ``labels`` into ``col`` (``scratch``: a buffer of its size)."""
        np.take(table[0], labels, out=col, mode="clip")

    def _piece(self, start: int, stop: int, rng: np.random.Generator, head: tuple | None,
               tail: tuple | None) -> RowPlan:
        first, last, counts = self._cut(start, stop, head, tail)
        return replace(self, counts=counts, points=self.points[first:last], rng=rng, block_rows=max(1, stop - start))

    def rows(self, out: np.ndarray | None = None) -> np.ndarray:
        total = self.total
        out = np.empty((total, self.dim)) if out is None else out
        tables = self._tables()
        if not self.shuffle:
            self._fill(out, run_labels(self.counts, total), tables)
            return out
        for start, labels in shuffled_piles(self.counts, total, self.rng):
            self._fill(out[start:start + len(labels)], labels, tables)
        return out

    def _fill(self, out: np.ndarray, labels: np.ndarray, tables: list[tuple[np.ndarray, ...]]) -> None:
        """Rows ``out`` (``(len(out), d)``) of the atoms ``labels``, column by column in chunks of
        :data:`ROW_CHUNK` rows."""
        total = len(out)
        size = min(ROW_CHUNK, max(total, 1))
        column, scratch = np.empty(size), np.empty(size)
        for a in range(out.shape[1]):
            for start in range(0, total, size):
                stop = min(total, start + size)
                col = column[:stop - start]
                self._draw(col, scratch[:stop - start], labels[start:stop], tables[a])
                out[start:stop, a] = col


@dataclass
class JitterPlan(PointPlan):
    """A row of atom ``i`` is ``points[i] + (U - 0.5) / bins``: uniform in the grid cell of side ``1/bins`` centred
    at ``points[i]`` (``srw``'s rows)."""

    bins: int = field(kw_only=True)

    def _draw(self, col: np.ndarray, scratch: np.ndarray, labels: np.ndarray, table: tuple[np.ndarray, ...]) -> None:
        self.rng.random(out=col)
        col -= 0.5
        col /= self.bins
        col += np.take(table[0], labels, out=scratch, mode="clip")


@dataclass
class BoxPlan(PointPlan):
    """A row of atom ``i`` is uniform in the box ``[lo[i], hi[i]]`` (``lo + U (hi - lo)``); ``points`` are the
    boxes' centres."""

    lo: np.ndarray = field(kw_only=True)
    hi: np.ndarray = field(kw_only=True)

    def _tables(self) -> list[tuple[np.ndarray, ...]]:
        return [(self.hi[:, a] - self.lo[:, a], self.lo[:, a]) for a in range(self.dim)]

    def _draw(self, col: np.ndarray, scratch: np.ndarray, labels: np.ndarray, table: tuple[np.ndarray, ...]) -> None:
        self.rng.random(out=col)
        col *= np.take(table[0], labels, out=scratch, mode="clip")
        col += np.take(table[1], labels, out=scratch, mode="clip")

    def _piece(self, start: int, stop: int, rng: np.random.Generator, head: tuple | None,
               tail: tuple | None) -> RowPlan:
        first, last, counts = self._cut(start, stop, head, tail)
        return replace(self, counts=counts, points=self.points[first:last], lo=self.lo[first:last],
                       hi=self.hi[first:last], rng=rng, block_rows=max(1, stop - start))


@dataclass
class OneAtomPlan(RowPlan):
    """Every row comes from one atom (``counts`` has one entry): a block's piece is its number of rows, and the
    subclass draws them all (:meth:`rows`)."""

    def _piece(self, start: int, stop: int, rng: np.random.Generator, head: tuple | None,
               tail: tuple | None) -> RowPlan:
        return replace(self, counts=np.array([stop - start], dtype=np.int64), rng=rng,
                       block_rows=max(1, stop - start))


@dataclass
class CubePlan(OneAtomPlan):
    """Rows uniform on ``[0,1]^d``: nothing was released.  I.i.d. rows, drawn column by column in chunks of
    :data:`ROW_CHUNK` rows (no shuffle: they are exchangeable already)."""

    def rows(self, out: np.ndarray | None = None) -> np.ndarray:
        total = self.total
        out = np.empty((total, self.dim)) if out is None else out
        size = min(ROW_CHUNK, max(total, 1))
        column = np.empty(size)
        for a in range(out.shape[1]):
            for start in range(0, total, size):
                stop = min(total, start + size)
                col = column[:stop - start]
                self.rng.random(out=col)
                out[start:stop, a] = col
        return out


def shuffle_rows(rows: np.ndarray, rng: np.random.Generator) -> None:
    """Put the rows of the ``(n, d)`` array ``rows`` in a uniformly random order, in place.

    One uniform permutation of the row numbers (Fisher-Yates, ``Generator.shuffle`` of an int32 or int64
    ``arange``), applied by one gather of whole rows: the extra memory is the permutation and one copy of
    ``rows`` while it is gathered (a block of at most :data:`ROW_BLOCK` rows for a row plan); gathering column by
    column would hold one column only but is several times slower (a strided gather per column).  Every row order
    of the output goes through here or through :func:`shuffled_piles` (the rows of a mechanism without a row
    plan: :func:`privsyn_core.api.synthesize`).
    """
    n = len(rows)
    order: np.ndarray = np.arange(n, dtype=np.int32 if n < 2 ** 31 else np.int64)
    rng.shuffle(order)
    rows[:] = np.take(rows, order, axis=0)


def run_labels(counts: np.ndarray, total: int) -> np.ndarray:
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
        labels = run_labels(counts, total)
        rng.shuffle(labels)
        yield 0, labels
        return
    if piles * m <= total:  # the table holds at most one int64 per row; int32 keys (piles * m < 2^31)
        key = rng.integers(0, piles, size=total, dtype=np.int32)
        key *= m
        key += run_labels(counts, total)
        table = np.bincount(key, minlength=piles * m).reshape(piles, m)
        del key
        start = 0
        for pile_counts in table:
            size = int(pile_counts.sum())
            labels = run_labels(pile_counts, size)
            rng.shuffle(labels)
            yield start, labels
            start += size
        return
    pile = rng.integers(0, piles, size=total, dtype=np.uint8)
    grouped = run_labels(counts, total)[np.argsort(pile, kind="stable")]
    ends = np.cumsum(np.bincount(pile, minlength=piles)).tolist()
    del pile
    for start, stop in zip([0] + ends[:-1], ends, strict=True):
        labels = grouped[start:stop]
        rng.shuffle(labels)
        yield start, labels
