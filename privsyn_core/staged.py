"""Count-based mechanisms in two stages, so that the counting can run anywhere (in memory or on Dask).

A count-based mechanism reads the private data only through the counts of a data-independent
partition (grid cells, tree leaves).  It is written as

1. ``layout(n, d, epsilon, neighbouring, params) -> layout``: the public partition (depth, cells per
   axis, ...), a function of the public quantities ``n, d, epsilon`` and the parameters, where ``n``
   is the public record count of :func:`privsyn_core.pipeline.public_size` (``None`` when the
   mechanism declared that these parameters read none);
2. ``count(unit, layout) -> CellCounts``: the finest counts of a block of encoded rows, as sorted
   sparse ``(ids, counts)``; counts of disjoint blocks merge by summation (:func:`merge_counts`);
3. ``release(counts, n, d, epsilon, *, neighbouring, n_synthetic, rng, layout, params)
   -> (MechanismOutput without rows, RowPlan)``: noise, consistency and everything after it,
   a function of the counts only.

The in-memory run function calls exactly these stages (:meth:`Stages.run`), and the Dask path
(:mod:`privsyn_core.dask_backend`) calls the same ``layout`` and ``release`` with the counts summed
over partitions, so both paths give the same release for the same data and seed by construction.

Synthetic rows come from a :class:`RowPlan`: released atoms with integer row counts, in a fixed order.
The rows are cut into blocks of at most :data:`ROW_BLOCK` rows; one block uses the plan's generator,
several blocks use ``rng.spawn(n_blocks)`` children, one per block, so that every block (a Dask
partition) can produce its rows alone.  Rows are shuffled within their block only.  Everything in a
plan is released output: generating rows is post-processing.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field, replace
from typing import Any, Callable

import numpy as np

from .result import MechanismOutput

#: Largest number of synthetic rows generated from one generator (64 MB of float64 rows at d = 2).
ROW_BLOCK = 2 ** 22


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
    def from_dense(cls, dense: np.ndarray) -> "CellCounts":
        return cls(full=np.asarray(dense, dtype=np.int64))

    @classmethod
    def from_ids(cls, cell_ids: np.ndarray) -> "CellCounts":
        ids, counts = np.unique(cell_ids, return_counts=True)
        return cls(ids.astype(np.int64), counts.astype(np.int64))

    @property
    def ids(self) -> np.ndarray:
        if self._ids is None:
            self._ids = np.flatnonzero(self._full).astype(np.int64)
        return self._ids

    @property
    def counts(self) -> np.ndarray:
        if self._counts is None:
            self._counts = self._full[self.ids]
        return self._counts

    def dense(self, size: int) -> np.ndarray:
        """All ``size`` counts as an int64 array (zeros for absent ids); do not modify it."""
        if self._full is not None and len(self._full) == size:
            return self._full
        out = np.zeros(size, dtype=np.int64)
        out[self.ids] = self.counts
        return out

    def sparse(self) -> "CellCounts":
        return CellCounts(self.ids, self.counts)

    @property
    def total(self) -> int:
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
    * ``"leaf"``: PMM's leaf sampling ``(U + points[i]) * side`` (``points`` are integer corners; with
      ``uniform=False`` the row is ``(0.5 + points[i]) * side``);
    * ``"cube"``: uniform on ``[0,1]^d`` (nothing was released; ``counts`` has one entry);
    * ``"jitter"``: ``points[i] + (U - 0.5) / bins``, uniform in the grid cell of side ``1/bins``
      centred at ``points[i]`` (``srw``'s rows).

    ``shuffle`` permutes the rows of each block, so row order does not reveal the atom order.
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

    @property
    def total(self) -> int:
        return int(self.counts.sum())

    @property
    def dim(self) -> int:
        return int(self.points.shape[1])

    @classmethod
    def from_counts(cls, counts: np.ndarray, lo: np.ndarray, hi: np.ndarray, *, sample: str,
                    rng: np.random.Generator) -> "RowPlan":
        """``counts[i]`` rows in cell ``[lo[i], hi[i]]``: at its centre (``sample="center"``) or uniform in it
        (``"uniform"``), drawn from ``rng``; cells without rows are left out."""
        used = counts > 0
        mode = "box" if sample == "uniform" else "point"
        return cls(mode, counts[used], (lo[used] + hi[used]) / 2, rng, lo=lo[used], hi=hi[used])

    def blocks(self) -> list[tuple[int, int]]:
        """Row ranges ``[start, stop)`` of the blocks (one empty block when there are no rows)."""
        total = self.total
        edges = list(range(0, total, self.block_rows)) + [total]
        return list(zip(edges[:-1], edges[1:])) or [(0, 0)]

    def block_generators(self) -> list[np.random.Generator]:
        """The plan's generator for a single block, else one spawned child per block."""
        n_blocks = len(self.blocks())
        return [self.rng] if n_blocks == 1 else self.rng.spawn(n_blocks)

    def piece(self, start: int, stop: int, rng: np.random.Generator) -> "RowPlan":
        """The plan of rows ``[start, stop)`` alone (only the atoms they use), drawing from ``rng``."""
        cumulative = np.cumsum(self.counts)
        first = int(np.searchsorted(cumulative, start, side="right"))
        last = int(np.searchsorted(cumulative, stop, side="left")) + 1 if stop > start else first
        last = min(last, len(self.counts))
        before = int(cumulative[first - 1]) if first > 0 else 0
        counts = self.counts[first:last].copy()
        if len(counts):
            counts[0] -= start - before
            counts[-1] -= int(cumulative[last - 1]) - stop
        if self.mode == "cube":
            counts = np.array([stop - start], dtype=np.int64)
            first, last = 0, 1

        def cut(a):
            return None if a is None else a[first:last]
        return replace(self, counts=counts, points=self.points[first:last], lo=cut(self.lo), hi=cut(self.hi),
                       rng=rng, block_rows=max(1, stop - start))

    def rows(self) -> np.ndarray:
        """All rows of a one-block plan (what a block or a Dask partition computes)."""
        total, d, rng = self.total, self.dim, self.rng
        if self.mode == "cube":
            return rng.random((total, d))
        if self.mode == "leaf":
            rows = rng.random((total, d)) if self.uniform else np.full((total, d), 0.5)
            rows += np.repeat(self.points, self.counts, axis=0)
            rows *= self.side
            return rows
        idx = np.repeat(np.arange(len(self.counts)), self.counts)
        if self.mode in ("point", "jitter"):
            rows = self.points[idx]
            if self.mode == "jitter":
                rows = rows + (rng.random(rows.shape) - 0.5) / self.bins
        else:
            lo, hi = self.lo[idx], self.hi[idx]
            rows = lo + rng.random(lo.shape) * (hi - lo)
        return rows[rng.permutation(len(rows))] if self.shuffle else rows

    def all_rows(self) -> np.ndarray:
        """Every row, block by block (the in-memory path)."""
        blocks = self.blocks()
        if len(blocks) == 1:
            return self.rows()
        return np.concatenate([self.piece(a, b, g).rows() for (a, b), g in zip(blocks, self.block_generators())])


#: ``size`` of a run called directly, not through :func:`privsyn_core.synthesize`: the caller treats
#: ``len(unit)`` as public.  :mod:`privsyn_core.pipeline` always passes the public count (or ``None``).
EXACT_N = "exact"


@dataclass(frozen=True)
class Stages:
    """The three stages of a count-based mechanism (module docstring).

    ``rows_as_unit``: the mechanism releases its rows themselves (no atoms or weights), so the run's
    ``unit`` is its rows (PMM).
    """

    layout: Callable[..., Any]
    count: Callable[[np.ndarray, Any], CellCounts]
    release: Callable[..., tuple[MechanismOutput, RowPlan]]
    prepare: Callable[[np.ndarray], np.ndarray] = staticmethod(lambda unit: unit)
    rows_as_unit: bool = False

    def run(self, unit: np.ndarray, epsilon: float, *, neighbouring: str, n_synthetic: int | None,
            rng: np.random.Generator, size: int | str | None = EXACT_N, **params: Any) -> MechanismOutput:
        """The in-memory run: layout, count all rows as one block, release, draw the rows.

        ``size`` is the public record count the layout and the release may read: the exact ``n``
        only for a direct call (:data:`EXACT_N`), else what :func:`privsyn_core.pipeline.public_size`
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
    """Draw the plan's rows, timing it as ``out.timings["sample"]``."""
    start = time.perf_counter()
    rows = plan.all_rows()
    out.timings["sample"] = out.timings.get("sample", 0.0) + time.perf_counter() - start
    return rows
