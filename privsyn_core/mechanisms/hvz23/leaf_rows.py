"""PMM's rows: :class:`LeafPlan`, the row plan of the leaves of the binary partition ([HVZ23] Algorithm 4, step 5).

References
----------
.. [HVZ23] Y. He, R. Vershynin, Y. Zhu, "Algorithmically Effective Differentially Private Synthetic Data",
   COLT 2023.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

import numpy as np

from privsyn_core.mechanisms.base.rows import ROW_CHUNK, RowPlan
from privsyn_core.mechanisms.hvz23.pmm_tree import leaf_corner_tables


@dataclass
class LeafPlan(RowPlan):
    """PMM's leaf sampling ``(U + c_t) * side``.

    The atoms are the consecutive depth-``depth`` leaves ``t = first_leaf, first_leaf + 1, ...`` of the binary
    partition (heap order) and ``c_t`` is leaf ``t``'s integer corner
    (:func:`privsyn_core.mechanisms.hvz23.pmm_tree.leaf_corner_tables`); with ``uniform=False`` the row is
    ``(0.5 + c_t) * side``.  ``points`` is an empty ``(0, d)`` array and ``counts`` are dense (zeros included), so
    no per-leaf table is held.  A block's rows are labelled by their leaves, the labels put in a uniformly random
    order, and the rows drawn from the labels (:meth:`rows`).
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
        """The block's rows in a uniformly random order (``shuffle``), into ``out`` (C-contiguous) if given.

        Every row gets the heap index of its leaf (``counts[t]`` labels ``first_leaf + t``, int64 by
        ``numpy.repeat``), the labels are put in a uniformly random order (Fisher-Yates, ``Generator.shuffle``, 8
        bytes a row: no float row is moved), and row ``i`` is then drawn in the leaf of label ``i``
        (:meth:`_fill`).  The ``U`` are i.i.d. and independent of the labels, so the rows are those of the leaves
        in a uniformly random order.  One shuffle of the block, not the row plans' cache-sized piles
        (:func:`~privsyn_core.mechanisms.base.rows.shuffled_piles`): with PMM's millions of leaves the piles' sort
        and int32-to-int64 labels cost more than they save (10^7 rows: drawing 0.60 s with piles, 0.52 s without).
        """
        out = np.empty((self.total, self.dim)) if out is None else out
        first = self.first_leaf
        labels = np.repeat(np.arange(first, first + len(self.counts), dtype=np.int64), self.counts)
        if self.shuffle:
            self.rng.shuffle(labels)
        self._fill(out, labels)
        return out

    def _fill(self, out: np.ndarray, labels: np.ndarray) -> None:
        """Row ``i`` of ``out`` is ``(U_i + c_{labels[i]}) * side`` (``U_i = 0.5`` without ``uniform``).

        Chunk by chunk (:data:`~privsyn_core.mechanisms.base.rows.ROW_CHUNK` rows, in the CPU caches): the ``U``
        of all columns in one draw into the chunk of ``out``, scaled by ``side``, then the scaled corner
        ``c_t side = high[t >> k] side + low[t & (2^k - 1)] side`` added (tables of a few thousand entries,
        :func:`privsyn_core.mechanisms.hvz23.pmm_tree.leaf_corner_tables`).  Columns go in pairs: two adjacent
        float64 columns of a row are read as one complex128, so one lookup and one addition serve both (a last
        odd column alone).  ``side`` is a power of two per column, so ``U side + c side`` is exactly the float
        ``(U + c) side``.
        """
        d = out.shape[1]
        paired = d - d % 2
        size = min(ROW_CHUNK, max(len(labels), 1))
        high_ids, low_ids = np.empty(size, dtype=np.int64), np.empty(size, dtype=np.int64)
        corner, part = np.empty(size, dtype=complex), np.empty(size, dtype=complex)
        k, tables = _scaled_corner_tables(self.depth, self.side)
        for start in range(0, len(labels), size):
            chunk, block = labels[start:start + size], out[start:start + size]
            n = len(chunk)
            np.right_shift(chunk, k, out=high_ids[:n])
            np.bitwise_and(chunk, (1 << k) - 1, out=low_ids[:n])
            if self.uniform:
                self.rng.random(out=block)
                block *= self.side
            else:
                block[:] = 0.5 * self.side
            columns = [block[:, :paired].view(complex)[:, p] for p in range(paired // 2)] + [block[:, d - 1]] * (d % 2)
            for column, (high, low) in zip(columns, tables, strict=True):
                sum_, add = corner[:n].view(high.dtype)[:n], part[:n].view(high.dtype)[:n]
                np.take(high, high_ids[:n], out=sum_, mode="clip")
                sum_ += np.take(low, low_ids[:n], out=add, mode="clip")
                column += sum_


def _scaled_corner_tables(r: int, side: np.ndarray) -> tuple[int, list[tuple[np.ndarray, np.ndarray]]]:
    """``k`` and the tables ``(high, low)`` of :func:`~privsyn_core.mechanisms.hvz23.pmm_tree.leaf_corner_tables`
    times ``side`` (exact: powers of two), per pair of columns as complex128 (column ``2p`` the real part, ``2p + 1``
    the imaginary part) and for a last odd column as float64."""
    d = len(side)
    k, tables = leaf_corner_tables(r, d)
    scaled = [(high * s, low * s) for (high, low), s in zip(tables, side.tolist(), strict=True)]
    pairs = [(_complex(scaled[a][0], scaled[a + 1][0]), _complex(scaled[a][1], scaled[a + 1][1]))
             for a in range(0, d - 1, 2)]
    return k, pairs + scaled[d - d % 2:]


def _complex(real: np.ndarray, imag: np.ndarray) -> np.ndarray:
    """The complex128 array with these real and imaginary parts (exactly: no arithmetic)."""
    out = np.empty(len(real), dtype=complex)
    out.real, out.imag = real, imag
    return out


def _compact(counts: np.ndarray) -> np.ndarray:
    """Non-negative counts in the smallest unsigned dtype that holds them (released values: public)."""
    top = int(counts.max(initial=0))
    for dtype in (np.uint8, np.uint16, np.uint32):
        if top <= np.iinfo(dtype).max:
            return counts.astype(dtype)
    return counts
