"""The release path's steps around :func:`~privsyn_core.engine.pipeline.run_sequence` for records held in memory
(a table, or blocks of rows encoded into one array): the public checks of the schema, the records encoded, the
ledger's reservation (:class:`BudgetGuard`), then the run sequence.  :func:`privsyn_core.synthesize`,
:func:`~privsyn_core.api.synthesize_chunks` and :func:`~privsyn_core.api.count_replay` call it (the Dask path has
its own records, :mod:`privsyn_core.engine.dask_backend`, and the same guard).

:func:`reserve_release` is the one place where a release's epsilon enters the privacy ledger, for every door: a
batch release (:class:`BudgetGuard`), a stream's creation (:func:`privsyn_core.open_stream`) and DP bounds
(:func:`privsyn_core.dp_bounds`), from the library, the command line and the app alike
(``tests/test_reservation_site.py`` checks that nothing else calls the ledger's ``reserve``).
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable, Iterable
from contextlib import AbstractContextManager, nullcontext
from typing import Any

import numpy as np
import pandas as pd

from privsyn_core.data.codec import Codec
from privsyn_core.data.conform import DomainPolicy
from privsyn_core.data.domain import Schema
from privsyn_core.engine.pipeline import PublicSize, Request, Synthetic, run_on_array, run_sequence
from privsyn_core.errors import DataError, ParameterError
from privsyn_core.mechanisms.base.resources import check_rows
from privsyn_core.mechanisms.base.rows import shuffle_rows
from privsyn_core.privacy import budget
from privsyn_core.privacy.noise import RandomLike, resolve_rng
from privsyn_core.result import MechanismOutput, SynthResult

#: What ``ledger=`` takes: a ledger, the path of its file, or ``None`` (nothing recorded).
LedgerLike = budget.PrivacyLedger | str | os.PathLike[str] | None

Encoder = Callable[[Codec], tuple[np.ndarray, dict[str, int], list[str]]]


def ledger_of(ledger: budget.PrivacyLedger | str | os.PathLike[str]) -> budget.PrivacyLedger:
    """The ledger ``ledger=`` names: the object itself, or the ledger in that file (which must exist)."""
    return ledger if isinstance(ledger, budget.PrivacyLedger) else budget.PrivacyLedger(ledger)


def reserve_release(ledger: budget.PrivacyLedger, dataset: str, epsilon: float, *, relation: str, mechanism: str,
                    label: str, private: bool = True, run_key: str | None = None,
                    stream: str | None = None) -> budget.Reservation:
    """Reserve a release's epsilon on ``dataset`` before any noise is drawn: the budget checked and the spend
    recorded in one transaction (:meth:`~privsyn_core.privacy.budget.PrivacyLedger.reserve`, sequential
    composition: Dwork and Roth 2014, Thm. 3.16), or :class:`~privsyn_core.errors.BudgetExceeded` and nothing
    recorded.

    The caller draws its noise only after this returns, inside the reservation (a context manager: confirmed
    when the block ends, marked failed but still counted when it raises), or cancels it only when nothing was
    drawn.  ``run_key`` makes a seeded replay free; ``stream`` records a new stream's step 0 with the spend.
    """
    return ledger.reserve(dataset, epsilon, relation=relation, mechanism=mechanism, label=label, private=private,
                          run_key=run_key, stream=stream)


class BudgetGuard:
    """The ledger's reservation of one release, taken when called: after the input is checked and encoded, before
    the mechanism draws anything (:meth:`~privsyn_core.privacy.budget.PrivacyLedger.reserve`)."""

    def __init__(self, ledger: budget.PrivacyLedger, dataset: str, request: Request, run_key: str | None) -> None:
        self.ledger, self.dataset, self.request, self.run_key = ledger, dataset, request, run_key

    @classmethod
    def of(cls, ledger: LedgerLike, dataset: str | None, request: Request, rng: RandomLike,
           content: str | None) -> Callable[[Schema], AbstractContextManager[object]]:
        """A reservation factory (a no-op without a ledger)."""
        if ledger is None:
            return lambda schema: nullcontext()
        assert dataset is not None
        store = ledger_of(ledger)
        seed = int(rng) if isinstance(rng, (int, np.integer)) and not isinstance(rng, bool) else None
        key = None if seed is None or content is None else json.dumps(
            [content, request.spec.name, request.epsilon, request.neighbouring, request.public_n,
             request.n_synthetic, seed, {k: repr(v) for k, v in request.resolved.items()}], sort_keys=True)
        return cls(store, dataset, request, key)

    def __call__(self, schema: Schema) -> budget.Reservation:
        request = self.request
        return reserve_release(self.ledger, self.dataset, request.epsilon, relation=request.neighbouring,
                               mechanism=request.spec.name, label=request.spec.name,
                               private=request.spec.is_private and schema.dp_valid,
                               run_key=None if self.run_key is None else self.run_key + json.dumps(schema.to_dict(),
                                                                                                sort_keys=True))


def release_encoded(request: Request, schema: Schema, encode: Encoder, rng: RandomLike,
             guard: Callable[[Schema], AbstractContextManager[object]], policy: DomainPolicy | None) -> SynthResult:
    """The in-memory path: the checks on the public inputs, then :func:`~privsyn_core.engine.pipeline.run_sequence`
    on the records that ``encode`` turns into the unit cube.

    ``encode(codec)`` returns the encoded records, the clip counts per column and the input's column names.
    ``guard(schema)`` reserves the release's epsilon in the ledger around the mechanism and the decoding.
    ``policy`` is release mode's rule for out-of-domain values, already applied by ``encode``.
    """
    spec = request.spec
    codec = spec.codec(schema)  # a codec refuses what it cannot encode with its own error
    reason = spec.accepts(schema)  # the one fit check of the API, the CLI and the app
    if reason is not None:
        raise ParameterError(f"{spec.name} {reason}")
    if request.n_synthetic is not None:
        check_rows(request.n_synthetic, len(schema.names))
    generator, seed = resolve_rng(rng)

    start = time.perf_counter()
    records = Encoded(*encode(codec), schema=schema, codec=codec)
    timings = {"encode": time.perf_counter() - start}
    return run_sequence(request, schema, codec, records, rng=generator, seed=seed, before_noise=guard, timings=timings,
                        domain_policy=None if policy is None else policy.to_dict())


class Encoded:
    """The in-memory path's :class:`~privsyn_core.engine.pipeline.Records`: the encoded array.

    The array is dropped once the mechanism has run, so it and the decoded table are never held together.
    """

    def __init__(self, unit: np.ndarray, clipped: dict[str, int], columns: list[str], *, schema: Schema,
                 codec: Codec) -> None:
        self.unit = unit
        self.n, self.width = unit.shape
        self.clipped = clipped
        self.left_out = [c for c in columns if c not in schema.names]
        self.codec = codec

    def release(self, request: Request, size: PublicSize, params: dict[str, Any],
                rng: np.random.Generator) -> tuple[MechanismOutput, np.ndarray]:
        """The mechanism's run function on the array; its output and its unit rows (its ``unit`` when it has no
        separate rows)."""
        unit = self.unit
        del self.unit  # the records are released once; the array goes when the run returns
        out = run_on_array(request, unit, size, params, rng)
        if out.weights is not None and out.rows is None:
            raise RuntimeError(f"internal error: weighted mechanism {request.spec.name} returned no rows")
        return out, out.rows if out.rows is not None else out.unit

    def synthetic(self, out: MechanismOutput, rows: np.ndarray, rng: np.random.Generator) -> Synthetic:
        """The rows in random order, decoded with the schema.

        Rows drawn through a row plan are in random order already (``out.rows_shuffled``; every staged
        mechanism, also on Dask, and srw: :mod:`privsyn_core.mechanisms.base.rows`); the rows of every other
        mechanism are put in a uniformly random order here, in place, with the run's generator
        (:func:`~privsyn_core.mechanisms.base.rows.shuffle_rows`), so that no row order carries information
        about the values.
        """
        if not out.rows_shuffled:
            rows = np.require(rows, requirements=["W", "O"])  # never reorder an array the mechanism did not allocate
            shuffle_rows(rows, rng)
            if out.rows is None:
                out.unit = rows
            else:
                out.rows = rows
        return Synthetic(self.codec.decode(rows), rows, {})


def encode_chunks(codec: Codec, chunks: Iterable[pd.DataFrame],
                   capacity: int) -> tuple[np.ndarray, dict[str, int], list[str]]:
    """The blocks encoded into one array (its first rows, a view), the summed clip counts, the columns."""
    unit: np.ndarray | None = None
    clipped: dict[str, int] = {}
    columns: list[str] = []
    rows = 0
    blocks = iter(chunks)
    for chunk in blocks:
        try:
            part, part_clipped = codec.encode(chunk)
        except DataError as exc:
            if rows == 0 and next(blocks, None) is None:
                raise  # the whole table was one block: the message is the in-memory path's
            raise DataError(f"{exc} [block of rows {rows + 1}-{rows + len(chunk)}: counts and row numbers are "
                            "within it]") from None
        if unit is None:
            columns = [str(c) for c in chunk.columns]
            unit = np.empty((max(capacity, len(part)), part.shape[1]), dtype=part.dtype)
        elif rows + len(part) > len(unit):
            grown = np.empty((max(2 * len(unit), rows + len(part)), unit.shape[1]), dtype=unit.dtype)
            grown[:rows] = unit[:rows]
            unit = grown
        unit[rows:rows + len(part)] = part
        rows += len(part)
        for name, count in part_clipped.items():
            clipped[name] = clipped.get(name, 0) + count
    if unit is None:
        raise DataError("the table has no rows")
    return unit[:rows], clipped, columns

