"""The stage protocol of a count-based mechanism, so that the counting can run anywhere (in memory or on Dask).

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

Both paths call the stages through one method, :meth:`Stages.release_counted`, which is given how to count:
the in-memory run function (:meth:`Stages.run`) counts all rows as one block, the Dask path
(:mod:`privsyn_core.engine.dask_backend`) sums the counts over partitions, so both paths give the same release
for the same data and seed by construction.
Synthetic rows come from the release's :class:`~privsyn_core.mechanisms.base.rows.RowPlan`.

The ledger a release returns is what the mechanism's privacy map (``MechanismSpec.privacy_map``) states before the
run; a map whose ledger depends on the partition computes it from ``layout`` (public inputs), the release from the
same layout with the same function.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, cast

import numpy as np

from privsyn_core.mechanisms.base.rows import RowPlan
from privsyn_core.privacy.accounting import Ledger
from privsyn_core.privacy.sensitivity import count_sensitivity
from privsyn_core.result import MechanismOutput

#: :meth:`CellCounts.from_ids` counts with a dense bincount when the ids are below this many times their number.
DENSE_FACTOR = 4


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


def counts_ledger(counted: str, epsilon: float, neighbouring: str) -> Ledger:
    """The one-stage ledger of a mechanism that releases one set of counts (``counted`` names them) with discrete
    Laplace noise of scale ``Delta/epsilon``, ``Delta`` the counts' sensitivity (2 replace-one, 1 add/remove:
    :func:`~privsyn_core.privacy.sensitivity.count_sensitivity`).  A function of public inputs only: the
    mechanism's privacy map and its run both call it."""
    return [(f"{counted}, discrete Laplace scale {count_sensitivity(neighbouring)}/epsilon", epsilon)]


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
        n = len(unit) if size == EXACT_N else cast(int | None, size)  # EXACT_N is the only string size
        out, plan = self.release_counted(lambda layout: self.count(unit, layout), n, unit.shape[1], epsilon,
                                         neighbouring=neighbouring, n_synthetic=n_synthetic, rng=rng, params=params)
        rows = finish_rows(out, plan)
        if self.rows_as_unit:
            out.unit = rows
        else:
            out.rows = rows
        return out

    def release_counted(self, count: Callable[[Any], CellCounts], n: int | None, d: int, epsilon: float, *,
                        neighbouring: str, n_synthetic: int | None, rng: np.random.Generator,
                        params: dict[str, Any]) -> tuple[MechanismOutput, RowPlan]:
        """Layout, count, release (stages 1-3 of the module docstring), wherever the rows are.

        ``count(layout)`` gives the finest counts of all the rows: one block in memory (:meth:`run`), the sum
        over the partitions on Dask (:mod:`privsyn_core.engine.dask_backend`); its time is
        ``out.timings["count"]``.  ``n`` is the public record count (``None`` when the parameters read none).
        """
        layout = self.layout(n, d, epsilon, neighbouring, params)
        start = time.perf_counter()
        counts = count(layout)
        seconds = time.perf_counter() - start
        out, plan = self.release(counts, n, d, epsilon, neighbouring=neighbouring, n_synthetic=n_synthetic, rng=rng,
                                 layout=layout, params=params)
        out.timings["count"] = seconds
        return out, plan


def finish_rows(out: MechanismOutput, plan: RowPlan) -> np.ndarray:
    """Draw the plan's rows (in random order: ``out.rows_shuffled``), timing it as ``out.timings["sample"]``."""
    start = time.perf_counter()
    rows = plan.all_rows()
    out.timings["sample"] = out.timings.get("sample", 0.0) + time.perf_counter() - start
    out.rows_shuffled = True
    return rows
