"""The one entry point: :func:`synthesize` (and :func:`synthesize_chunks` for a table in blocks of rows): the public
arguments checked, then the release path (:mod:`privsyn_core.engine.release`, :mod:`privsyn_core.engine.pipeline`).
:func:`dp_bounds` releases a public domain for numeric columns against the same ledger."""

from __future__ import annotations

import os
from collections.abc import Callable, Collection, Iterable, Iterator, Sequence
from contextlib import AbstractContextManager
from typing import Any

import numpy as np
import pandas as pd

from privsyn_core.data import dp_bounds as bounds
from privsyn_core.data.codec import Codec
from privsyn_core.data.conform import DomainPolicy, conform, conform_partition
from privsyn_core.data.domain import Schema, as_frame
from privsyn_core.data.identity import IdentityDigest, table_identity
from privsyn_core.engine.pipeline import Request
from privsyn_core.engine.release import (
    BudgetGuard,
    LedgerLike,
    encode_chunks,
    ledger_of,
    release_encoded,
    reserve_release,
)
from privsyn_core.errors import ParameterError, SchemaError
from privsyn_core.privacy import budget
from privsyn_core.privacy.accounting import check_epsilon
from privsyn_core.privacy.noise import RandomLike
from privsyn_core.registry import get_mechanism
from privsyn_core.result import SynthResult
from privsyn_core.validation import MAX_SYNTHETIC_ROWS, check_count, check_neighbouring, check_public_n

__all__ = ["synthesize", "synthesize_chunks", "count_replay", "dp_bounds", "check_epsilon", "MAX_SYNTHETIC_ROWS"]


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
        (:class:`~privsyn_core.errors.BudgetExceeded` when it would exceed the budget).  A run that
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
        column's fallback), stated in the release (``Release.domain_policy``).  Requires a schema (a Dask
        DataFrame's partitions are mapped where they lie).  With ``False`` (teaching, the data holder's own
        session) a value the schema does not admit is refused with a message that quotes it, so that the holder
        can fix the data.
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
        if ledger is not None and dataset is None:
            raise ParameterError("a Dask DataFrame released against a ledger needs dataset='<its name>' (its "
                                 "content is not hashed: that would read every partition once more)")
        guard = BudgetGuard.of(ledger, dataset, request, rng, content=None)
        policy = None
        if release_mode and schema is not None:  # (a missing schema is named by the Dask path)
            schema = Schema.from_dict(schema) if isinstance(schema, dict) else schema
            policy = DomainPolicy.of(schema, fallbacks)
            data = data.map_partitions(conform_partition, schema, policy, meta=policy.meta(schema))
        return dask_backend.synthesize_dask(data, request, schema=schema, rng=rng, before_noise=guard,
                                            domain_policy=None if policy is None else policy.to_dict())
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

    guard = BudgetGuard.of(ledger, dataset or content, request, rng, content)
    return release_encoded(request, schema, encode, rng, guard, policy)


def synthesize_chunks(chunks: Iterable[pd.DataFrame], mechanism: str, epsilon: float, *, schema: Schema | dict,
                      capacity: int = 0, neighbouring: str = "replace", n_synthetic: int | None = None,
                      rng: RandomLike = None, public_n: int | None = None, ledger: LedgerLike = None,
                      dataset: str | None = None, identity: IdentityDigest | None = None,
                      release_mode: bool = False, fallbacks: dict[str, Any] | None = None,
                      **params: Any) -> SynthResult:
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
        The dataset's name in the ledger; default: the identity of the blocks' records, computed as they are
        encoded (:class:`~privsyn_core.data.identity.IdentityDigest`, the identity :func:`synthesize` gives the
        whole table), before the reservation.
    identity : IdentityDigest, optional
        The digest to update with the blocks (on the schema's columns), for a caller that needs the identity
        afterwards (the CLI prints the dataset's budget); a new one when not given.
    **others
        As for :func:`synthesize`.
    """
    request = _request(mechanism, epsilon, neighbouring, public_n, n_synthetic, params)
    if not isinstance(schema, (Schema, dict)):
        raise SchemaError(f"synthesize_chunks needs a public schema (a Schema or a dict), got {type(schema).__name__}; "
                          "to propose one from the data, read the whole table and call synthesize")
    schema = Schema.from_dict(schema) if isinstance(schema, dict) else schema
    policy = DomainPolicy.of(schema, fallbacks) if release_mode else None
    digest = identity or IdentityDigest(schema.names)
    if ledger is not None or identity is not None:
        chunks = _hashed(chunks, digest)

    def guard(schema: Schema) -> AbstractContextManager[object]:  # called once every block is encoded
        content = digest.hexdigest() if ledger is not None else None
        return BudgetGuard.of(ledger, dataset or content, request, rng, content)(schema)

    if policy is not None:
        chunks = (conform(chunk, schema, policy) for chunk in chunks)
    return release_encoded(request, schema, lambda codec: encode_chunks(codec, chunks, capacity), rng, guard, policy)


def _hashed(chunks: Iterable[pd.DataFrame], digest: IdentityDigest) -> Iterator[pd.DataFrame]:
    """The blocks as they come, each added to ``digest`` first (on its raw values, before any release-mode map)."""
    for chunk in chunks:
        digest.update(chunk)
        yield chunk


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
    with BudgetGuard.of(ledger, dataset or content, request, rng, content)(schema):
        pass


def dp_bounds(data: Any, columns: Sequence[str], epsilon: float, *, neighbouring: str = "replace",
              tail: float = 0.01, rng: RandomLike = None, integer: Collection[str] = (), ledger: LedgerLike = None,
              dataset: str | None = None, min_abs: float = 2.0**-10, max_abs: float = 2.0**40,
              per_octave: int = 2) -> bounds.DPBounds:
    """Public bounds for numeric columns, released with ``epsilon``-DP (the Laplace histogram of bucket counts and
    its DP quantiles, :mod:`privsyn_core.data.dp_bounds`), counted in ``ledger`` like a synthetic release.

    Parameters
    ----------
    data : DataFrame or array-like
        The private table.
    columns : sequence of str
        Numeric columns to bound; the epsilon is split equally over them.
    epsilon : float
        What the bounds spend, ``> 0``.
    neighbouring : {"replace", "add_remove"}
    tail : float
        Share of records allowed below ``lo`` and above ``hi`` each (before noise), in (0, 0.5).
    rng : None, int, numpy.random.Generator or "secure"
        As in :func:`synthesize`.
    integer : collection of str
        Columns the caller declares integer (public: never read off the data's dtypes).
    ledger : PrivacyLedger, path or None
        As in :func:`synthesize`: the epsilon is reserved against the dataset's budget, once every argument is
        checked and before any noise (:func:`~privsyn_core.engine.release.reserve_release`), or
        :class:`~privsyn_core.errors.BudgetExceeded` is raised and nothing is drawn.
    dataset : str, optional
        The dataset's name in the ledger.  Default: the identity of the table's records on all its columns
        (:func:`~privsyn_core.data.identity.table_identity`), the one :func:`synthesize` gives the same table when
        the schema has every column; name the dataset to count both under one budget otherwise.
    min_abs, max_abs, per_octave : float, float, int
        The public bucket grid (:func:`~privsyn_core.data.dp_bounds.bucket_edges`).

    Returns
    -------
    DPBounds
        ``schema`` holds the bounded columns (``public=True``); ``ledger`` sums to ``epsilon`` exactly.
    """
    frame, columns = as_frame(data), list(columns)
    guard = None if ledger is None else _bounds_guard(ledger, dataset or table_identity(frame), epsilon, neighbouring,
                                                      len(columns))
    return bounds.dp_bounds(frame, columns, epsilon, neighbouring=neighbouring, tail=tail, rng=rng,
                            min_abs=min_abs, max_abs=max_abs, per_octave=per_octave, integer=integer,
                            before_noise=guard)


def _bounds_guard(ledger: budget.PrivacyLedger | str | os.PathLike[str], dataset: str, epsilon: float,
                  neighbouring: str, width: int) -> Callable[[], AbstractContextManager[object]]:
    """The reservation of DP bounds on ``width`` columns, taken when called (after the arguments are checked)."""
    store = ledger_of(ledger)
    return lambda: reserve_release(store, dataset, check_epsilon(epsilon), relation=neighbouring,
                                   mechanism="dp_bounds", label=f"DP bounds of {width} column(s)")


def _request(mechanism: str, epsilon: float, neighbouring: str, public_n: int | None, n_synthetic: int | None,
             params: dict[str, Any]) -> Request:
    """The mechanism looked up and every public argument checked, in the order the messages promise."""
    spec = get_mechanism(mechanism)
    epsilon = check_epsilon(epsilon)
    neighbouring = check_neighbouring(spec, neighbouring)
    public_n = check_public_n(public_n, neighbouring)
    resolved = spec.resolve_params(params)
    return Request(spec, epsilon, neighbouring, public_n, resolved, check_count("n_synthetic", n_synthetic))
