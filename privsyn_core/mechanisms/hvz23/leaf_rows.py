"""PMM's rows: :class:`LeafPlan`, the row plan of the leaves of the binary partition ([HVZ23] Algorithm 4, step 5).

References
----------
.. [HVZ23] Y. He, R. Vershynin, Y. Zhu, "Algorithmically Effective Differentially Private Synthetic Data",
   COLT 2023.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

import numpy as np

from privsyn_core.mechanisms.base.rows import ROW_CHUNK, RowPlan, shuffle_rows
from privsyn_core.mechanisms.hvz23.pmm_tree import leaf_corner_tables

#: Leaves per group of a plan's rows (:meth:`LeafPlan.rows`).
LEAF_GROUP = 2 ** 14


@dataclass
class LeafPlan(RowPlan):
    """PMM's leaf sampling ``(U + c_t) * side``.

    The atoms are the consecutive depth-``depth`` leaves ``t = first_leaf, first_leaf + 1, ...`` of the binary
    partition (heap order) and ``c_t`` is leaf ``t``'s integer corner
    (:func:`privsyn_core.mechanisms.hvz23.pmm_tree.leaf_axis_coordinates`); with ``uniform=False`` the row is
    ``(0.5 + c_t) * side``.  ``points`` is an empty ``(0, d)`` array and ``counts`` are dense (zeros included), so
    no per-leaf table is held.  The rows of a block are drawn grouped by leaf and then shuffled
    (:func:`~privsyn_core.mechanisms.base.rows.shuffle_rows`).
    """

    side: np.ndarray = field(kw_only=True)
    depth: int = field(kw_only=True)
    uniform: bool = field(default=True, kw_only=True)
    first_leaf: int = field(default=0, kw_only=True)

    def __post_init__(self) -> None:
        self.counts = _compact(self.counts)  # one byte a leaf at most depths instead of eight while rows are drawn

    def _piece(self, start: int, stop: int, rng: np.random.Generator, head: tuple | None,
               tail: tuple | None) -> RowPlan:
        first, _, counts = self._cut(start, stop, head, tail)
        return replace(self, counts=counts, rng=rng, block_rows=max(1, stop - start),
                       first_leaf=self.first_leaf + first)

    def rows(self, out: np.ndarray | None = None) -> np.ndarray:
        out = np.empty((self.total, self.dim)) if out is None else out
        self._fill_leaves(out)
        if self.shuffle:
            shuffle_rows(out, self.rng)
        return out

    def _fill_leaves(self, out: np.ndarray) -> None:
        """The rows ``(U + c_t) * side`` (``(0.5 + c_t) * side`` without ``uniform``), grouped by leaf.

        Leaves are taken in groups of :data:`LEAF_GROUP` consecutive leaves, a group halved until its rows fit
        :data:`~privsyn_core.mechanisms.base.rows.ROW_CHUNK` (or it is one leaf, whose rows are then drawn chunk by
        chunk).  A leaf's corner ``c_t`` is ``high[t >> k] + low[t & (2^k - 1)]`` with tables of at most a few
        thousand entries (:func:`privsyn_core.mechanisms.hvz23.pmm_tree.leaf_corner_tables`), so the corners of a
        group's consecutive leaves are a slice of the outer sum of a few ``high`` entries and the whole ``low``
        table; the group's rows take them by ``numpy.repeat`` with the leaves' counts.  Every pass stays in the CPU
        caches and nothing of the size of the leaves or the rows is allocated.  The ``U`` are i.i.d. uniform, drawn
        group by group and column by column.
        """
        counts, d, rng, side = self.counts, out.shape[1], self.rng, self.side
        k, tables = leaf_corner_tables(self.depth, d)
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


def _compact(counts: np.ndarray) -> np.ndarray:
    """Non-negative counts in the smallest unsigned dtype that holds them (released values: public)."""
    top = int(counts.max(initial=0))
    for dtype in (np.uint8, np.uint16, np.uint32):
        if top <= np.iinfo(dtype).max:
            return counts.astype(dtype)
    return counts
