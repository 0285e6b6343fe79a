"""The one entry point: :func:`synthesize`."""

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
from privsyn_core.data.conform import DomainPolicy, conform
from privsyn_core.data.domain import Schema, as_frame
from privsyn_core.data.identity import table_identity
from privsyn_core.engine.pipeline import PublicSize, Request, Synthetic, run_on_array, run_sequence
from privsyn_core.errors import DataError, ParameterError, SchemaError
from privsyn_core.mechanisms.base.resources import check_rows
from privsyn_core.mechanisms.base.rows import shuffle_rows
from privsyn_core.privacy import budget
from privsyn_core.privacy.accounting import check_epsilon
from privsyn_core.privacy.noise import RandomLike, resolve_rng
from privsyn_core.registry import get_mechanism
from privsyn_core.result import MechanismOutput, SynthResult
from privsyn_core.validation import MAX_SYNTHETIC_ROWS, check_count, check_neighbouring, check_public_n

#: What ``ledger=`` takes: a ledger, the path of its file, or ``None`` (nothing recorded).
LedgerLike = budget.PrivacyLedger | str | os.PathLike[str] | None

__all__ = ["synthesize", "synthesize_chunks", "count_replay", "check_epsilon", "MAX_SYNTHETIC_ROWS"]


def synthesize(data: Any, mechanism: str, epsilon: float, *, schema: Schema | dict | None = None,
               neighbouring: str = "replace", n_synthetic: int | None = None, rng: RandomLike = None,
               public_n: int | None = None, ledger: LedgerLike = None, dataset: str | None = None,
               release_mode: bool = False, fallbacks: dict[str, Any] | None = None, **params: Any) -> SynthResult:
    """Release a differentially private synthetic version of ``data``.

    Parameters
    ----------
    data : DataFrame, array-like or Dask DataFrame
        The private table.  Only the schema's columns are used.  A Dask DataFrame runs the
        count-based mechanisms partition by partition (:mod:`privsyn_core.engine.dask_backend`; the schema
        is then required) and the result's ``data`` is a lazy Dask DataFrame.
    mechanism : str
        Registry key, see :func:`privsyn_core.list_mechanisms`.
    epsilon : float
        Total privacy budget, ``> 0``.
    schema : Schema or dict, optional
        Public domain of the columns; the output's dtypes and integrality come from it alone.
        ``None`` proposes one from the data (:meth:`Schema.infer`): the result then has
        ``dp_valid = False``.
    neighbouring : {"replace", "add_remove"}
        Neighbouring relation the noise is calibrated for.  Under add/remove the record count is
        private: see ``public_n``.
    n_synthetic : int, optional
        Number of synthetic rows (mechanism default when ``None``).
    rng : None, int, numpy.random.Generator or "secure"
        ``None`` and ``"secure"`` draw from a cryptographically secure generator and record no
        seed (a real release).  An int seed replays the same noise: for teaching, tests and
        reproduction only; the release then says so.
    public_n : int, optional
        Add/remove only: a record count the caller declares public (it need not be exact), used by
        every rule that needs one (layouts, normalisers, default output sizes).  Without it, a
        mechanism that reads ``n`` gets a noisy count released as its own ledger stage
        (:mod:`privsyn_core.engine.pipeline`).
    ledger : PrivacyLedger, path or None
        The persistent privacy ledger (:class:`~privsyn_core.privacy.budget.PrivacyLedger`, or its file) that
        counts this release against the dataset's budget: the epsilon is reserved, in one transaction that
        checks the budget, after the input is validated and encoded and before the mechanism draws anything
        (:class:`~privsyn_core.privacy.budget.BudgetExceeded` when it would exceed the budget).  A run that
        fails once the mechanism has started stays counted.  ``None`` (the default) records nothing.
    dataset : str, optional
        The dataset's name in the ledger.  Default: the identity of the records as the schema reads them
        (:func:`~privsyn_core.data.identity.table_identity`: the same for the table's CSV file through the CLI, in any
        row order, float format or line endings, with or without columns the schema does not use); name it yourself
        when you release on versions of a table that changes (required for a Dask DataFrame).
    release_mode : bool
        Whoever sees this call's messages may not see the data (a release-only server): nothing is refused on the
        data's content and no message quotes a value, a row number or a count read off the records; values outside
        the schema's domain follow the public rule of :mod:`privsyn_core.data.conform` (clipped, or replaced by the
        column's fallback), stated in the release (``Release.domain_policy``).  Requires a schema.  Without it
        (teaching, the data holder's own session) a value the schema does not admit is refused with a message that
        quotes it, so that the holder can fix the data.
    fallbacks : dict, optional
        Release mode: per column, the value a missing or out-of-domain value becomes (public; default
        :func:`~privsyn_core.data.conform.default_fallback`).
    **params
        Mechanism parameters (see ``MechanismSpec.params``).

    Returns
    -------
    SynthResult
        Its :meth:`~SynthResult.release` is what may be published.
    """
    request = _request(mechanism, epsilon, neighbouring, public_n, n_synthetic, params)
    from privsyn_core.engine import dask_backend
    if dask_backend.is_dask_frame(data):
        if release_mode:
            raise ParameterError("release_mode is not available for a Dask DataFrame; conform its partitions first "
                                 "(privsyn_core.data.conform)")
        if ledger is not None and dataset is None:
            raise ParameterError("a Dask DataFrame released against a ledger needs dataset='<its name>' (its "
                                 "content is not hashed: that would read every partition once more)")
        guard = _BudgetGuard.of(ledger, dataset, request, rng, content=None)
        return dask_backend.synthesize_dask(data, request, schema=schema, rng=rng, before_noise=guard)
    from privsyn_core.validation import resolve_schema
    if release_mode and schema is None:
        raise ParameterError("release_mode needs a public schema (a domain read off the data is not private)")
    frame = as_frame(data)
    schema = resolve_schema(schema, frame)
    columns = [str(c) for c in frame.columns]
    content = table_identity(frame, schema.names) if ledger is not None else None
    policy = DomainPolicy.of(schema, fallbacks) if release_mode else None
    if policy is not None:
        frame = conform(frame, schema, policy)

    def encode(codec: Codec) -> tuple[np.ndarray, dict[str, int], list[str]]:
        unit, clipped = codec.encode(frame)
        return unit, clipped, columns

    guard = _BudgetGuard.of(ledger, dataset or content, request, rng, content)
    return _release(request, schema, encode, rng, guard, policy)


def synthesize_chunks(chunks: Iterable[pd.DataFrame], mechanism: str, epsilon: float, *, schema: Schema | dict,
                      capacity: int = 0, neighbouring: str = "replace", n_synthetic: int | None = None,
                      rng: RandomLike = None, public_n: int | None = None, ledger: LedgerLike = None,
                      dataset: str | None = None, content: str | None = None, release_mode: bool = False,
                      fallbacks: dict[str, Any] | None = None, **params: Any) -> SynthResult:
    """:func:`synthesize` on a table given as blocks of rows, never held whole (the CLI's large files).

    Each block is checked against the public ``schema`` and encoded (the codec maps each record on its
    own, see :mod:`privsyn_core.data.codec`) straight into one float array, then dropped; the result is
    the one :func:`synthesize` gives for the concatenated table with the same ``rng`` (the same encoded
    array, the same draws), and a refusal has the same message, except that a table of several blocks is
    refused at the first block with a bad value, whose rows the message names (its counts and row numbers
    are within that block).  Memory: the encoded array, ``capacity`` rows allocated up front (pages never
    written stay virtual) and doubled when the blocks hold more rows, plus one block.

    Parameters
    ----------
    chunks : iterable of DataFrame
        The blocks of rows, all with the same columns (for example
        :func:`privsyn_core.data.io.iter_csv`).  The first block's columns name the table's columns.
    schema : Schema or dict
        Required: a schema proposed from the data (:meth:`Schema.infer`) needs the whole table.
    capacity : int
        Rows to allocate before the first block (an upper bound such as
        :attr:`~privsyn_core.data.io.CsvChunks.max_rows` avoids any copy); ``0``: the first block's size.
    dataset : str, optional
        Required with a ``ledger``: the blocks are never held whole, so their content is not hashed here
        (the CLI passes the file's identity, :func:`~privsyn_core.data.identity.file_identity`).
    content : str, optional
        The content's identity when ``dataset`` is a name (lets a seeded run already in the ledger spend
        nothing new: the same seed on the same content gives the same output).
    **others
        As for :func:`synthesize`.
    """
    if ledger is not None and dataset is None:
        raise ParameterError("synthesize_chunks with a ledger needs dataset= (for a file: "
                             "privsyn_core.data.identity.file_identity(path, schema.names))")
    request = _request(mechanism, epsilon, neighbouring, public_n, n_synthetic, params)
    if not isinstance(schema, (Schema, dict)):
        raise SchemaError(f"synthesize_chunks needs a public schema (a Schema or a dict), got {type(schema).__name__}; "
                          "to propose one from the data, read the whole table and call synthesize")
    schema = Schema.from_dict(schema) if isinstance(schema, dict) else schema
    guard = _BudgetGuard.of(ledger, dataset, request, rng, content)
    policy = DomainPolicy.of(schema, fallbacks) if release_mode else None
    if policy is not None:
        chunks = (conform(chunk, schema, policy) for chunk in chunks)
    return _release(request, schema, lambda codec: _encode_chunks(codec, chunks, capacity), rng, guard, policy)


def count_replay(data: Any, mechanism: str, epsilon: float, *, schema: Schema | dict | None, ledger: LedgerLike,
                 neighbouring: str = "replace", n_synthetic: int | None = None, rng: RandomLike = None,
                 public_n: int | None = None, dataset: str | None = None, **params: Any) -> None:
    """Count in ``ledger`` a run of :func:`synthesize` whose result the caller kept (the app's cache of runs).

    The reservation :func:`synthesize` takes for the same arguments, confirmed at once (no noise is drawn: the
    output exists): a seeded run already in the ledger spends nothing new, any other is charged, and a run over
    the budget is refused (:class:`~privsyn_core.privacy.budget.BudgetExceeded`) before the kept result is used.
    """
    request = _request(mechanism, epsilon, neighbouring, public_n, n_synthetic, params)
    from privsyn_core.validation import resolve_schema
    frame = as_frame(data)
    schema = resolve_schema(schema, frame)
    content = table_identity(frame, schema.names)
    with _BudgetGuard.of(ledger, dataset or content, request, rng, content)(schema):
        pass


def _request(mechanism: str, epsilon: float, neighbouring: str, public_n: int | None, n_synthetic: int | None,
             params: dict[str, Any]) -> Request:
    """The mechanism looked up and every public argument checked, in the order the messages promise."""
    spec = get_mechanism(mechanism)
    epsilon = check_epsilon(epsilon)
    neighbouring = check_neighbouring(spec, neighbouring)
    public_n = check_public_n(public_n, neighbouring)
    resolved = spec.resolve_params(params)
    return Request(spec, epsilon, neighbouring, public_n, resolved, check_count("n_synthetic", n_synthetic))


Encoder = Callable[[Codec], tuple[np.ndarray, dict[str, int], list[str]]]


class _BudgetGuard:
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
        store = ledger if isinstance(ledger, budget.PrivacyLedger) else budget.PrivacyLedger(ledger)
        seed = int(rng) if isinstance(rng, (int, np.integer)) and not isinstance(rng, bool) else None
        key = None if seed is None or content is None else json.dumps(
            [content, request.spec.name, request.epsilon, request.neighbouring, request.public_n,
             request.n_synthetic, seed, {k: repr(v) for k, v in request.resolved.items()}], sort_keys=True)
        return cls(store, dataset, request, key)

    def __call__(self, schema: Schema) -> budget.Reservation:
        request = self.request
        return self.ledger.reserve(self.dataset, request.epsilon, relation=request.neighbouring,
                                   mechanism=request.spec.name, label=request.spec.name,
                                   private=request.spec.is_private and schema.dp_valid,
                                   run_key=None if self.run_key is None else self.run_key + json.dumps(schema.to_dict(),
                                                                                                    sort_keys=True))


def _release(request: Request, schema: Schema, encode: Encoder, rng: RandomLike,
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
    records = _Encoded(*encode(codec), schema=schema, codec=codec)
    timings = {"encode": time.perf_counter() - start}
    return run_sequence(request, schema, codec, records, rng=generator, seed=seed, before_noise=guard, timings=timings,
                        domain_policy=None if policy is None else policy.to_dict())


class _Encoded:
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


def _encode_chunks(codec: Codec, chunks: Iterable[pd.DataFrame],
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

