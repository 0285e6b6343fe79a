"""The one entry point: :func:`synthesize`."""

from __future__ import annotations

import math
import time
from typing import Any

import numpy as np
import pandas as pd

from .accounting import ledger_total
from .domain import Schema, as_frame
from .errors import ParameterError, SchemaError
from .noise import RandomLike, resolve_rng
from .registry import get_mechanism
from .result import SynthResult

MAX_SYNTHETIC_ROWS = 10**8


def synthesize(data: Any, mechanism: str, epsilon: float, *, schema: Schema | dict | None = None,
               neighbouring: str = "replace", n_synthetic: int | None = None, rng: RandomLike = None,
               **params: Any) -> SynthResult:
    """Release a differentially private synthetic version of ``data``.

    Parameters
    ----------
    data : DataFrame, array-like or Dask DataFrame
        The private table.  Only the schema's columns are used.  A Dask DataFrame runs the
        count-based mechanisms partition by partition (:mod:`privsyn_core.dask_backend`; the schema
        is then required) and the result's ``data`` is a lazy Dask DataFrame.
    mechanism : str
        Registry key, see :func:`privsyn_core.list_mechanisms`.
    epsilon : float
        Total privacy budget, ``> 0``.
    schema : Schema or dict, optional
        Public domain of the columns.  ``None`` proposes one from the data
        (:meth:`Schema.infer`): the result then has ``dp_valid = False``.
    neighbouring : {"replace", "add_remove"}
        Neighbouring relation the noise is calibrated for.
    n_synthetic : int, optional
        Number of synthetic rows (mechanism default when ``None``).
    rng : None, int, numpy.random.Generator or "secure"
        Same int seed, same output.  The seed used is reported in ``params["seed"]``.
    **params
        Mechanism parameters (see ``MechanismSpec.params``).

    Returns
    -------
    SynthResult
    """
    spec = get_mechanism(mechanism)
    epsilon = check_epsilon(epsilon)
    if neighbouring not in spec.neighbouring:
        raise ParameterError(f"mechanism {spec.name!r} supports neighbouring relation(s) {list(spec.neighbouring)}, "
                             f"not {neighbouring!r}")
    resolved = spec.resolve_params(params)
    n_synthetic = _check_n_synthetic(n_synthetic)
    from . import dask_backend  # no Dask import unless ``data`` is a Dask DataFrame
    if dask_backend.is_dask_frame(data):
        return dask_backend.synthesize_dask(data, spec, epsilon, schema=schema, neighbouring=neighbouring,
                                            n_synthetic=n_synthetic, rng=rng, params=resolved)
    frame = as_frame(data)
    schema = _resolve_schema(schema, frame)
    codec = spec.codec(schema) if spec.codec else schema
    generator, seed = resolve_rng(rng)

    timings: dict[str, float] = {}
    start = time.perf_counter()
    unit, clipped = codec.encode(frame)
    timings["encode"] = time.perf_counter() - start

    start = time.perf_counter()
    out = spec.run(unit, epsilon, neighbouring=neighbouring, n_synthetic=n_synthetic, rng=generator, **resolved)
    timings["mechanism"] = time.perf_counter() - start
    timings.update({f"mechanism.{k}": v for k, v in out.timings.items()})

    total = ledger_total(out.ledger)
    if spec.is_private and total != epsilon:
        raise RuntimeError(f"internal error: {spec.name} ledger sums to {total!r}, not epsilon={epsilon!r}")
    rows = out.rows if out.rows is not None else out.unit
    if out.weights is not None and out.rows is None:
        raise RuntimeError(f"internal error: weighted mechanism {spec.name} returned no rows")

    start = time.perf_counter()
    synthetic = _match_dtypes(codec.decode(rows), frame)
    timings["decode"] = time.perf_counter() - start

    warnings = list(out.warnings)
    if not schema.dp_valid:
        warnings.append("the domain (bounds/categories) was read off the data: the result is not differentially private")
    return SynthResult(
        data=synthetic, unit=out.unit, weights=out.weights, epsilon=total, ledger=list(out.ledger),
        neighbouring=neighbouring, dp_valid=bool(spec.is_private and schema.dp_valid),
        params={**resolved, **out.params, "n_synthetic": n_synthetic, "seed": seed},
        diagnostics=out.diagnostics, timings=timings, mechanism=spec.name, schema=schema.to_dict(),
        unit_rows=rows, clipped=clipped, warnings=warnings)


def check_epsilon(epsilon: Any) -> float:
    """``epsilon`` as a finite positive float, or a clear error."""
    try:
        eps = float(epsilon)
    except (TypeError, ValueError):
        raise ParameterError(f"epsilon must be a number, got {epsilon!r}") from None
    if not (math.isfinite(eps) and eps > 0):
        raise ParameterError(f"epsilon must be finite and > 0, got {epsilon!r}")
    return eps


def _check_n_synthetic(n: Any) -> int | None:
    if n is None:
        return None
    if isinstance(n, (bool, np.bool_)) or not float(n).is_integer() or not 1 <= int(n) <= MAX_SYNTHETIC_ROWS:
        raise ParameterError(f"n_synthetic must be an integer in [1, {MAX_SYNTHETIC_ROWS:.0e}], got {n!r}")
    return int(n)


def _resolve_schema(schema: Schema | dict | None, frame: pd.DataFrame) -> Schema:
    if schema is None:
        return Schema.infer(frame)
    if isinstance(schema, dict):
        return Schema.from_dict(schema)
    if isinstance(schema, Schema):
        return schema
    raise SchemaError(f"schema must be a Schema, a dict or None, got {type(schema).__name__}")


def _match_dtypes(synthetic: pd.DataFrame, original: pd.DataFrame) -> pd.DataFrame:
    """Give each synthetic column the dtype of the input column (rounding into integer dtypes)."""
    for name in synthetic.columns:
        target = original[name].dtype
        column = synthetic[name]
        if column.dtype == target:
            continue
        if pd.api.types.is_integer_dtype(target) and pd.api.types.is_float_dtype(column):
            column = column.round()
        try:
            synthetic[name] = column.astype(target)
        except (TypeError, ValueError):
            pass  # keep the decoded dtype when the input's cannot hold the value (e.g. object mixes)
    return synthetic
