"""W1 per step of a stream (online PMM) against the naive re-run of offline PMM: a teaching evaluation.

It reads the raw data (W1 against the cumulative real table): never a release, never shown in release mode.
"""

from __future__ import annotations

import itertools
import os
import tempfile
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pandas as pd
from scipy.stats import t as student_t

from privsyn_core.data.domain import Schema
from privsyn_core.errors import DataError, ParameterError
from privsyn_core.evaluation.distances import w1
from privsyn_core.privacy.accounting import split_epsilon
from privsyn_core.stream import open_stream

#: Rows per side of each W1 (uniform subsamples beyond it; exact W1's cost grows faster than the square of the rows).
EVAL_ROWS = 300
#: Most steps a table is split into.
MAX_STEPS = 48
#: Runs of every method, each with its own seed, that the interval of a step is made from.
SEEDS = 3
#: Most seeds a caller may ask for (the work grows linearly with them).
MAX_SEEDS = 10
#: Confidence of the interval over seeds.
CONFIDENCE = 0.95
#: A memory-backed folder (Linux's shared memory) for the streams' state files when the system has one: a stream
#: writes its state atomically at every step (fsync), which on a disk waits on it; these files are scratch, and
#: their true counts and noise keys are better never written to a disk.
MEMORY_FOLDER = Path("/dev/shm")

#: The three ways to release at every step, as the table and the figure name them.
FIXED_DEPTH = "stream (online PMM, depth for the plan)"
GROWING_DEPTH = "stream (online PMM, growing depth, no plan)"
NAIVE = "naive re-run (PMM, eps/T)"
METHODS = (FIXED_DEPTH, GROWING_DEPTH, NAIVE)


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
              horizon_steps: int | None = None, seeds: int = SEEDS,
              progress: Callable[[float, str], object] | None = None) -> pd.DataFrame:
    """W1 (unit cube, l-infinity) at every step: online PMM (fixed and growing depth) vs offline PMM re-run with
    epsilon / T per step, each run ``seeds`` times.

    All spend ``epsilon`` over the ``T = len(batches)`` steps: each stream once for all its releases, the re-run
    ``epsilon / T`` at each step (``split_epsilon``).  The fixed-depth stream's depth is PMM's depth for the planned
    size and steps (here the actual ones: a teaching evaluation); the growing stream needs no plan (its levels open
    as its released root count grows).  Run ``r`` (``0 <= r < seeds``) seeds every mechanism with ``seed + r``.
    At each step of a run, one uniform subsample of at most :data:`EVAL_ROWS` real rows so far is compared with a
    subsample of the same size of each method's synthetic rows (exact W1,
    :func:`~privsyn_core.evaluation.distances.w1`), so the three methods are measured against the same real rows.

    Values outside the schema's public bounds are clipped onto them for every method and for the real rows alike:
    the re-run and the codec clip them (as :func:`privsyn_core.synthesize` does), and the streams are created with
    the batch path's public rule (``release_mode=True`` of :func:`~privsyn_core.stream.open_stream`,
    :class:`~privsyn_core.data.conform.DomainPolicy`) instead of refusing the batch, so that bounds estimated with
    DP, which may leave a few rows outside, serve all three.  The domain is the caller's schema, never read off the
    batches.

    Parameters
    ----------
    batches : list of DataFrame
        The table in the order it arrives (:func:`split_batches`).
    schema : Schema
    epsilon : float
        Budget of the whole stream, for each method.
    seed : int
        First seed.
    horizon_steps : int, optional
        Steps the fixed-depth stream plans for (default: the actual number).
    seeds : int
        Runs of each method, in ``[1, MAX_SEEDS]``.
    progress : callable, optional
        Called as ``progress(share_done, text)`` after every run of every step.

    Returns
    -------
    DataFrame
        ``seed, step, method, w1, records``: one row per run, step and method (:func:`summary` makes the intervals).
    """
    if not (isinstance(seeds, int) and 1 <= seeds <= MAX_SEEDS):
        raise ParameterError(f"seeds must be an integer in [1, {MAX_SEEDS}], got {seeds!r}")
    import privsyn_core as ps

    steps = len(batches)
    total = int(sum(len(b) for b in batches))
    shares = [e for _, e in split_epsilon(epsilon, [(str(t), 1.0) for t in range(steps)])]
    runs = [seed + r for r in range(seeds)]
    rngs = {run: np.random.default_rng(run) for run in runs}
    rows: list[dict] = []
    seen: list[np.ndarray] = []
    with tempfile.TemporaryDirectory(dir=_scratch_parent()) as folder:
        streams = {run: (open_stream(Path(folder) / f"fixed_{run}.json", schema, epsilon, create=True,
                                     horizon_n=max(total, 1), horizon_steps=horizon_steps or steps, rng=run,
                                     release_mode=True),
                         open_stream(Path(folder) / f"growing_{run}.json", schema, epsilon, create=True,
                                     growing=True, rng=run, release_mode=True))
                   for run in runs}
        # Step by step, every run at each step: the runs of one step draw noise at the same scales one after the
        # other, so the sampler's tables made for the first run serve the others.
        for t, batch in enumerate(batches, 1):
            if len(batch):
                seen.append(schema.encode(batch)[0])
            so_far = np.vstack(seen) if seen else np.empty((0, len(schema.columns)))
            table_so_far = pd.concat(batches[:t])
            for i, run in enumerate(runs):
                fixed, growing = streams[run][0].add(batch), streams[run][1].add(batch)
                naive = ps.synthesize(table_so_far, "pmm", shares[t - 1], schema=schema, neighbouring="add_remove",
                                      public_n=max(len(so_far), 1), rng=run * 1000 + t)
                real = _subsample(so_far, rngs[run])
                for method, synthetic in ((FIXED_DEPTH, fixed.unit), (GROWING_DEPTH, growing.unit),
                                          (NAIVE, naive.unit_rows)):
                    rows.append({"seed": run, "step": t, "method": method, "w1": _w1(real, synthetic, rngs[run]),
                                 "records": len(so_far)})
                if progress is not None:
                    progress(((t - 1) * seeds + i + 1) / (steps * seeds),
                             f"step {t} of {steps}, run {i + 1} of {seeds}")
    return pd.DataFrame(rows, columns=["seed", "step", "method", "w1", "records"])


def summary(table: pd.DataFrame) -> pd.DataFrame:
    r"""Mean W1 over the seeds at every step and method, with its interval.

    ``low``/``high`` is the :data:`CONFIDENCE` Student-t interval of the mean over the ``S`` seeds,
    :math:`\bar w \pm t_{0.975, S-1} s / \sqrt S` (NaN with a single seed): the spread of the mechanisms' noise
    and of the evaluation's subsamples.  ``S`` (``seeds``) counts the runs with a W1 at that step: a run whose
    method released no rows there (its noisy total was 0) has none, so ``seeds`` can be below ``runs``.

    Parameters
    ----------
    table : DataFrame
        :func:`over_time`'s output (``step, method, w1, records`` and, for several runs, ``seed``).

    Returns
    -------
    DataFrame
        ``step, method, w1, low, high, seeds, runs, records``, methods in their order of appearance.
    """
    grouped = table.groupby(["method", "step"], sort=False)["w1"]
    out = grouped.agg(w1="mean", sd="std", seeds="count", runs="size").reset_index()
    out["records"] = table.groupby(["method", "step"], sort=False)["records"].first().to_numpy()
    several = out["seeds"] > 1
    multiplier = student_t.ppf(0.5 + CONFIDENCE / 2, np.where(several, out["seeds"] - 1, 1))
    half = np.where(several, multiplier * out["sd"] / np.sqrt(out["seeds"]), np.nan)
    out["low"], out["high"] = (out["w1"] - half).clip(lower=0.0), out["w1"] + half
    return out[["step", "method", "w1", "low", "high", "seeds", "runs", "records"]]


def _scratch_parent() -> Path | None:
    """Where the streams' scratch folder goes: :data:`MEMORY_FOLDER` when it is a writable folder, else the
    system's temporary folder (``None``)."""
    return MEMORY_FOLDER if MEMORY_FOLDER.is_dir() and os.access(MEMORY_FOLDER, os.W_OK | os.X_OK) else None


def _subsample(rows: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    return rows if len(rows) <= EVAL_ROWS else rows[rng.choice(len(rows), EVAL_ROWS, replace=False)]


def _w1(real: np.ndarray, synthetic: np.ndarray | None, rng: np.random.Generator) -> float:
    if synthetic is None or len(synthetic) == 0 or len(real) == 0:
        return float("nan")
    return float(w1(real, _subsample(synthetic, rng), metric="chebyshev"))


__all__ = ["CONFIDENCE", "EVAL_ROWS", "FIXED_DEPTH", "GROWING_DEPTH", "MAX_SEEDS", "MAX_STEPS", "METHODS", "NAIVE",
           "SEEDS", "over_time", "split_batches", "summary"]
