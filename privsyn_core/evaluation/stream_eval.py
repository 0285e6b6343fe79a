"""W1 per step of a stream (online PMM) against the naive re-run of offline PMM: a teaching evaluation.

It reads the raw data (W1 against the cumulative real table): never a release, never shown in release mode.
"""

from __future__ import annotations

import itertools
import tempfile
from pathlib import Path

import numpy as np
import pandas as pd

from privsyn_core.data.domain import Schema
from privsyn_core.errors import DataError, ParameterError
from privsyn_core.evaluation.distances import w1
from privsyn_core.privacy.accounting import split_epsilon
from privsyn_core.stream import open_stream

#: Rows per side of each W1 (a fixed subsample beyond it), so one evaluation takes seconds.
EVAL_ROWS = 1500
#: Most steps a table is split into.
MAX_STEPS = 48


def split_batches(frame: pd.DataFrame, steps: int, time_column: str | None = None) -> list[pd.DataFrame]:
    """The table cut into ``steps`` consecutive batches: by row order, or by a time column.

    With ``time_column``: rows sorted by it (stable), and one batch per distinct value when there are at most
    :data:`MAX_STEPS` of them, else ``steps`` batches of equal size.  The time column is dropped.
    """
    if not (isinstance(steps, int) and 1 <= steps <= MAX_STEPS):
        raise ParameterError(f"steps must be an integer in [1, {MAX_STEPS}], got {steps!r}")
    if time_column is not None:
        if time_column not in frame.columns:
            raise DataError(f"no column {time_column!r} in the table to split it by time")
        frame = frame.sort_values(time_column, kind="stable")
        values = frame[time_column]
        distinct = values.unique()
        rest = frame.drop(columns=[time_column])
        if len(distinct) <= MAX_STEPS:
            return [rest[(values == v).to_numpy()] for v in distinct]
        frame = rest
    if len(frame) < steps:
        raise DataError(f"the table has {len(frame)} rows, fewer than the {steps} steps asked for")
    edges = np.linspace(0, len(frame), steps + 1).astype(int)
    return [frame.iloc[a:b] for a, b in itertools.pairwise(edges)]


def over_time(batches: list[pd.DataFrame], schema: Schema, epsilon: float, *, seed: int = 0,
              horizon_steps: int | None = None) -> pd.DataFrame:
    """W1 (unit cube, l-infinity) at every step: online PMM (fixed and growing depth) vs offline PMM re-run with
    epsilon / T per step.

    All spend ``epsilon`` over the ``T = len(batches)`` steps: each stream once for all its releases, the re-run
    ``epsilon / T`` at each step (``split_epsilon``).  The fixed-depth stream's depth is PMM's depth for the planned
    size and steps (here the actual ones: a teaching evaluation); the growing stream needs no plan (its levels open
    as its released root count grows).  Columns ``step, method, w1, records``.
    """
    import privsyn_core as ps

    steps = len(batches)
    total = int(sum(len(b) for b in batches))
    shares = [e for _, e in split_epsilon(epsilon, [(str(t), 1.0) for t in range(steps)])]
    rng = np.random.default_rng(seed)
    rows: list[dict] = []
    seen: list[np.ndarray] = []
    with tempfile.TemporaryDirectory() as folder:
        stream = open_stream(Path(folder) / "stream.json", schema, epsilon, create=True, horizon_n=max(total, 1),
                             horizon_steps=horizon_steps or steps, rng=seed)
        growing = open_stream(Path(folder) / "growing.json", schema, epsilon, create=True, growing=True, rng=seed)
        for t, batch in enumerate(batches, 1):
            release = stream.add(batch)
            grown = growing.add(batch)
            if len(batch):
                seen.append(schema.encode(batch)[0])
            real = np.vstack(seen) if seen else np.empty((0, len(schema.columns)))
            naive = ps.synthesize(pd.concat(batches[:t]), "pmm", shares[t - 1], schema=schema,
                                  neighbouring="add_remove", public_n=max(len(real), 1), rng=seed * 1000 + t)
            for method, synthetic in (("stream (online PMM, depth for the plan)", release.unit),
                                      ("stream (online PMM, growing depth, no plan)", grown.unit),
                                      ("naive re-run (PMM, eps/T)", naive.unit_rows)):
                rows.append({"step": t, "method": method, "w1": _w1(real, synthetic, rng), "records": len(real)})
    return pd.DataFrame(rows)


def _w1(real: np.ndarray, synthetic: np.ndarray | None, rng: np.random.Generator) -> float:
    if synthetic is None or len(synthetic) == 0 or len(real) == 0:
        return float("nan")
    real = real if len(real) <= EVAL_ROWS else real[rng.choice(len(real), EVAL_ROWS, replace=False)]
    synthetic = synthetic if len(synthetic) <= EVAL_ROWS else synthetic[rng.choice(len(synthetic), EVAL_ROWS,
                                                                                   replace=False)]
    return float(w1(real, synthetic, metric="chebyshev"))


__all__ = ["EVAL_ROWS", "MAX_STEPS", "over_time", "split_batches"]
