"""Scale-out on Dask: :func:`privsyn_core.synthesize` with a Dask DataFrame (many Parquet/CSV files).

Only the count-based mechanisms run here, those registered with their stages
(:mod:`privsyn_core.mechanisms.base.stages`): ``pmm``, ``psmm``, ``dp_histogram``, ``kd_grid``, ``kd_adaptive``,
``marginal_tree`` and ``srw_tsp``.  The run is the in-memory run's sequence
(:func:`privsyn_core.engine.pipeline.run_sequence`) on the partitions (:class:`Partitions`):

1. the record count ``n`` (one pass; from the Parquet metadata when Dask can read it there);
2. the public record count (:func:`privsyn_core.engine.pipeline.public_size`: ``n`` under replace-one,
   ``public_n`` or a noisy count under add/remove) and ``layout`` on the client, exactly as in memory
   (:meth:`~privsyn_core.mechanisms.base.stages.Stages.release_counted` with the counting of step 3);
3. per partition, on the workers: encode with the schema, ``prepare``, ``count`` -> sparse
   :class:`CellCounts`; the client adds them up as they arrive (:class:`RunningSum`; the total
   must be ``n``), so worker memory stays bounded by the partition size whatever ``n``;
4. ``release`` once on the client: noise, consistency, the ledger and the :class:`RowPlan`;
5. synthetic rows lazily, one Dask partition per block of ``RowPlan.pieces()`` (not per input
   partition), each drawn from its own block generator and decoded with the schema, with the
   global row numbers as index.  A block's rows are in uniformly random order and the blocks are laid out in
   a random order; a block holds a contiguous run of the atoms, so with several blocks the order is not a
   uniform permutation of all rows (:mod:`privsyn_core.mechanisms.base.rows`, "Row order").

Because the stages, the block structure and the generators are those of the in-memory run, the
same data and seed give bit-identical synthetic rows, atoms, weights and ledger.

The schema must be given: inferring bounds would read the data and not be private.  Dask is
imported here only, when a Dask DataFrame is passed, so the library and the app work without it.

What differs from the in-memory :class:`SynthResult`: ``data`` is a lazy Dask DataFrame (write it
with ``result.data.to_parquet(path)`` or bring it home with ``.compute()``); ``unit_rows`` is
``None`` (the rows are never gathered on the client); ``unit``/``weights`` are the released atoms
(for ``pmm``, which releases rows only, ``unit`` is empty); ``diagnostics["dask"]`` gives the
partition and block counts; ``timings`` has ``n``, ``mechanism`` (counting and release), ``mechanism.count`` and
``decode`` (building the lazy table: row generation is lazy).
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager
from typing import Any

import numpy as np
import pandas as pd

from privsyn_core.data.domain import Schema
from privsyn_core.engine.pipeline import PublicSize, Request, Synthetic, run_sequence
from privsyn_core.errors import ClusterError, DataError, ParameterError, SchemaError
from privsyn_core.mechanisms.base.rows import RowPlan
from privsyn_core.mechanisms.base.spec import MechanismSpec
from privsyn_core.mechanisms.base.stages import CellCounts, Stages, merge_counts
from privsyn_core.privacy.noise import resolve_rng
from privsyn_core.registry import list_mechanisms
from privsyn_core.result import MechanismOutput, SynthResult
from privsyn_core.validation import resolve_schema

#: Partitions' counts computed per batch without a distributed client (with one, batches follow completion).
MERGE_BATCH = 16
#: The client sums cell ids below ``min(DENSE_IDS, 16 n)`` in a dense int64 array (at most 1 GiB), others sparsely.
DENSE_IDS = 2 ** 27


def is_dask_frame(data: Any) -> bool:
    """True for a Dask DataFrame (checked without importing Dask)."""
    return type(data).__module__.split(".")[0] in ("dask", "dask_expr") and hasattr(data, "to_delayed")


def staged_mechanisms() -> list[str]:
    """Registry keys of the mechanisms that run on Dask (those registered with stages)."""
    return [spec.name for spec in list_mechanisms() if spec.stages is not None]


def synthesize_dask(ddf: Any, request: Request, *, schema: Schema | dict | None, rng: Any,
                    before_noise: Callable[[Schema], AbstractContextManager[object]],
                    domain_policy: dict[str, Any] | None = None) -> SynthResult:
    """The Dask path of :func:`privsyn_core.synthesize` (module docstring); ``request`` already checked there.

    The input is checked and its rows counted here, then :func:`~privsyn_core.engine.pipeline.run_sequence` runs
    on the partitions (:class:`Partitions`); ``before_noise(schema)`` (the ledger's reservation) is entered there,
    before the first noise is drawn, and left when the result is assembled.  ``domain_policy``: release mode's rule,
    already mapped over the partitions, stated in the release.
    """
    columns = list(ddf.columns)
    stages, schema, codec, ddf = _checked_input(ddf, request.spec, schema)
    generator, seed = resolve_rng(rng)

    start = time.perf_counter()
    _require_workers(_distributed_client())  # else len(ddf) below would wait for a worker forever
    n = len(ddf)
    timings = {"n": time.perf_counter() - start}
    if n == 0:
        raise DataError("the table has no rows")
    records = Partitions(ddf, stages, codec, n=n, width=len(schema.names),
                         left_out=[str(c) for c in columns if c not in schema.names])
    return run_sequence(request, schema, codec, records, rng=generator, seed=seed, before_noise=before_noise,
                        timings=timings, domain_policy=domain_policy)


class Partitions:
    """The Dask path's :class:`~privsyn_core.engine.pipeline.Records`: the partitions of the schema's columns.

    The mechanism's stages run with the counts summed over the partitions (steps 2-4 of the module docstring);
    the synthetic rows are a lazy Dask DataFrame of the row plan's blocks (step 5).
    """

    def __init__(self, ddf: Any, stages: Stages, codec: Any, *, n: int, width: int, left_out: list[str]) -> None:
        self.ddf, self.stages, self.codec = ddf, stages, codec
        self.n, self.width, self.left_out = n, width, left_out
        self.clipped: dict[str, int] = {}

    def release(self, request: Request, size: PublicSize, params: dict[str, Any],
                rng: np.random.Generator) -> tuple[MechanismOutput, RowPlan]:
        """The stages with the partitions' summed counts: the output without rows and its row plan."""
        return self.stages.release_counted(self._count, size.value, self.width, size.mechanism_epsilon,
                                           neighbouring=request.neighbouring, n_synthetic=request.n_synthetic,
                                           rng=rng, params=params)

    def _count(self, layout: Any) -> CellCounts:
        """The finest counts of all partitions (their clip counts kept); their total must be ``n`` per row."""
        counts, self.clipped = count_partitions(self.ddf, self.codec, self.stages, layout, self.n)
        per_row = getattr(layout, "counts_per_row", 1)  # a layout that counts every row in several partitions says so
        if counts.total != self.n * per_row:
            raise RuntimeError(f"internal error: the partitions' counts sum to {counts.total}, not {per_row} "
                               f"n={self.n}")
        return counts

    def synthetic(self, out: MechanismOutput, plan: RowPlan, rng: np.random.Generator) -> Synthetic:
        """The plan's rows as a lazy Dask DataFrame (:func:`synthetic_frame`; ``rng`` is not read: every block
        has its own generator)."""
        data = synthetic_frame(plan, self.codec)
        dask_info = {"input_partitions": self.ddf.npartitions, "row_blocks": data.npartitions, "n": self.n,
                     "synthetic_rows": plan.total}
        return Synthetic(data, None, {"dask": dask_info})


def _checked_input(ddf: Any, spec: MechanismSpec, schema: Schema | dict | None) -> tuple[Stages, Schema, Any, Any]:
    """The mechanism's stages, the schema, its codec and the schema's columns of ``ddf``, or a clear error."""
    stages = spec.stages
    if stages is None:
        raise ParameterError(f"mechanism {spec.name!r} cannot run on a Dask DataFrame; the count-based mechanisms "
                             f"can: {staged_mechanisms()} (or pass a pandas DataFrame)")
    if schema is None:
        raise SchemaError("a Dask DataFrame needs a public schema (schema=...): inferring the bounds would read "
                          "the data and would not be differentially private")
    schema = resolve_schema(schema, ddf._meta)
    missing = [name for name in schema.names if name not in ddf.columns]
    if missing:
        raise DataError(f"unknown column(s) {missing}; the table has {list(map(str, ddf.columns))}")
    return stages, schema, spec.codec(schema), ddf[list(schema.names)]


def count_partitions(ddf: Any, codec: Any, stages: Stages, layout: Any,
                     n: int) -> tuple[CellCounts, dict[str, int]]:
    """Sparse finest counts and clipped-row counts of all partitions, summed on the client.

    A worker task holds one partition and its counts only, so worker memory is bounded by the
    partition size; the client adds the partitions' counts into a :class:`RunningSum` as they
    arrive (the total has one entry per occupied cell, which the release needs anyway).
    """
    import dask

    shared = dask.delayed(layout, traverse=False)
    counted = [dask.delayed(count_partition)(part, codec, stages, shared) for part in ddf.to_delayed()]
    total = RunningSum(min(DENSE_IDS, 16 * n))
    clipped: dict[str, int] = {}
    for batch in _batches(counted):
        for counts, part_clipped in batch:
            total.add(counts)
            for name, value in part_clipped.items():
                clipped[name] = clipped.get(name, 0) + value
    return total.result(), clipped


class RunningSum:
    """Sum of sparse counts of disjoint blocks, added one block at a time.

    A block whose ids are all below ``dense_limit`` is added into a dense int64 array (``O(block)``);
    any other block joins a binary counter of sparse merges (:func:`merge_counts` of equally many
    blocks only, ``O(total log blocks)`` overall).
    """

    def __init__(self, dense_limit: int) -> None:
        self.dense_limit = dense_limit
        self.dense = np.zeros(0, dtype=np.int64)
        self.stack: list[tuple[int, CellCounts]] = []  # (blocks summed, their sum)

    def add(self, counts: CellCounts) -> None:
        ids = counts.ids
        if len(ids) == 0:
            return
        if ids[-1] < self.dense_limit:  # ids are sorted and distinct
            if ids[-1] >= len(self.dense):
                grown = np.zeros(min(self.dense_limit, max(int(ids[-1]) + 1, 2 * len(self.dense))), dtype=np.int64)
                grown[:len(self.dense)] = self.dense
                self.dense = grown
            self.dense[ids] += counts.counts
            return
        self.stack.append((1, counts))
        while len(self.stack) > 1 and self.stack[-1][0] == self.stack[-2][0]:
            (k, newer), (_, older) = self.stack.pop(), self.stack.pop()
            self.stack.append((2 * k, merge_counts([older, newer])))

    def result(self) -> CellCounts:
        """The sum of every block added."""
        dense = CellCounts.from_dense(self.dense)
        return merge_counts([dense, *(counts for _, counts in self.stack)]) if self.stack else dense


def _batches(tasks: list[Any]) -> Iterator[list[Any]]:
    """Results of ``tasks`` in batches: as they complete on a distributed client, else ``MERGE_BATCH`` at a time."""
    import dask

    client = _distributed_client()
    if client is None:
        for i in range(0, len(tasks), MERGE_BATCH):
            yield list(dask.compute(*tasks[i:i + MERGE_BATCH]))
        return
    yield from _completed(client, client.compute(tasks), worker_deadline())


def _require_workers(client: Any) -> None:
    """Wait up to :func:`worker_deadline` seconds for a worker of ``client`` (no client: nothing to wait for)."""
    if client is None:
        return
    deadline = worker_deadline()
    try:
        client.wait_for_workers(1, timeout=deadline)
    except TimeoutError:
        raise ClusterError(f"the Dask cluster has had no worker for {deadline:g} s: start workers, or raise "
                           "PRIVSYN_DASK_WORKER_TIMEOUT") from None


def worker_deadline() -> float:
    """Seconds a run waits while the cluster has no worker (``PRIVSYN_DASK_WORKER_TIMEOUT``, default 60)."""
    raw = os.environ.get("PRIVSYN_DASK_WORKER_TIMEOUT", "60")
    try:
        seconds = float(raw)
    except ValueError:
        raise ParameterError(f"PRIVSYN_DASK_WORKER_TIMEOUT must be a number of seconds, got {raw!r}") from None
    if not seconds > 0:
        raise ParameterError(f"PRIVSYN_DASK_WORKER_TIMEOUT must be positive, got {raw!r}")
    return seconds


def _completed(client: Any, futures: list[Any], deadline: float) -> Iterator[list[Any]]:
    """Results of ``futures`` in batches as they complete; a clear error, and the futures cancelled, when the
    cluster has had no worker for ``deadline`` seconds (a lost cluster must not hang the run forever)."""
    from distributed import wait

    pending, idle_since = list(futures), None
    while pending:
        try:
            done, not_done = wait(pending, timeout=min(1.0, deadline), return_when="FIRST_COMPLETED")
        except TimeoutError:
            done, not_done = set(), set(pending)
        if done:
            yield client.gather(list(done))
        pending = list(not_done)
        if not pending or client.scheduler_info().get("workers"):
            idle_since = None
            continue
        idle_since = idle_since or time.monotonic()
        if time.monotonic() - idle_since >= deadline:
            client.cancel(pending)
            raise ClusterError(f"the Dask cluster has had no worker for {deadline:g} s ({len(pending)} partition(s) "
                               "not counted): start workers, or raise PRIVSYN_DASK_WORKER_TIMEOUT")


def _distributed_client() -> Any:
    """The current ``distributed.Client``, or None."""
    try:
        from distributed import get_client
        return get_client()
    except (ImportError, ValueError):
        return None


def count_partition(frame: pd.DataFrame, codec: Any, stages: Stages, layout: Any) -> tuple[CellCounts, dict[str, int]]:
    """One partition: encode, prepare, count (sparse); an empty partition counts nothing."""
    if len(frame) == 0:
        return merge_counts([]), {}
    unit, clipped = codec.encode(frame)
    return stages.count(stages.prepare(unit), layout).sparse(), clipped


def synthetic_frame(plan: RowPlan, codec: Any) -> Any:
    """The plan's rows as a lazy Dask DataFrame, one partition per row block (index: global row number)."""
    import dask
    import dask.dataframe as dd

    pieces = plan.pieces()
    empty = block_frame(plan.piece(0, 0, np.random.default_rng(0)), codec, 0)
    parts = [dask.delayed(block_frame)(piece, codec, start) for start, _, piece in pieces]
    divisions = (*(start for start, _, _ in pieces), pieces[-1][1] - 1) if plan.total else None
    return dd.from_delayed(parts, meta=empty, divisions=divisions)


def block_frame(piece: RowPlan, codec: Any, start: int) -> pd.DataFrame:
    """One block's rows, decoded with the schema (columns and dtypes), indexed from ``start``."""
    frame = codec.decode(piece.rows())
    frame.index = pd.RangeIndex(start, start + len(frame))
    return frame


__all__ = ["is_dask_frame", "staged_mechanisms", "synthesize_dask", "MERGE_BATCH"]
