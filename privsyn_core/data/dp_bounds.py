r"""Differentially private public bounds for numeric columns.

A mechanism needs a public domain ``[lo, hi]`` per column.  Reading it off the data
(:meth:`Schema.infer`) leaks the minimum and maximum.  Here the bounds are spent for:

1. A *public*, data-independent partition of the real line into buckets: a central
   bucket ``[-min_abs, min_abs]`` and, on each side, every octave ``[2^k, 2^{k+1}]`` from
   ``min_abs`` up to ``max_abs`` split into ``per_octave`` equal sub-buckets.  Values beyond
   ``max_abs`` fall into the outermost bucket (a per-record clip, which keeps DP).
2. The bucket counts of one column get exact integer noise ``Lap_Z(Delta/epsilon_col)``
   (:func:`privsyn_core.privacy.noise.discrete_laplace`): a record changed under replace-one moves
   between two buckets (:math:`\ell_1` sensitivity ``Delta = 2``); under add/remove one
   count moves by one (``Delta = 1``).  This is the Laplace histogram of Dwork, McSherry,
   Nissim and Smith (2006) on integer counts.
3. Post-processing: noisy counts below the threshold ``tau = sigma ln(B / beta)`` are set
   to 0 (``B`` buckets, ``sigma`` the noise scale).  An empty bucket survives with
   probability ``P[Z >= tau] <= e^{-tau/sigma} = beta / B``, so with probability at least
   ``1 - beta`` no empty bucket survives: without the threshold the positive noise of the
   many empty buckets would swamp the tails.  Accumulating the kept counts, ``lo`` is the
   left edge of the bucket where the cumulative share first reaches ``tail`` and ``hi``
   the right edge of the bucket where it first reaches ``1 - tail``: DP quantiles at
   ``tail`` and ``1 - tail`` rounded outwards to bucket edges.  When no bucket survives
   (too little budget for this ``n``) the whole public range is returned with a warning.

A value that is not a number (missing, or text) is left out of its column's counts and an infinite one falls
into the outermost bucket, so no value of the data is refused or quoted (a release-only server's users may not
see the data).  Leaving a record out is a per-record filter, a 1-stable transformation (McSherry, "Privacy
Integrated Queries", SIGMOD 2009, Thm. 1): two neighbouring tables stay within one record added, removed or
replaced of each other, which moves the histogram by at most ``Delta`` in :math:`\ell_1` under either relation.

Each column is a separate query on the same records, so the columns share the budget by
sequential composition: the ledger gives each column ``epsilon / d`` and sums to
``epsilon`` exactly (:func:`privsyn_core.privacy.accounting.split_epsilon`).  At most a ``tail``
share of records (plus the noise's share) falls below ``lo`` or above ``hi``; they are
clipped into the bounds when the data are encoded.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Sequence
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from privsyn_core.data.domain import Column, Schema
from privsyn_core.errors import DataError, ParameterError
from privsyn_core.privacy.accounting import Ledger, check_epsilon, split_epsilon
from privsyn_core.privacy.noise import RandomLike, discrete_laplace, resolve_rng

SENSITIVITY = {"replace": 2, "add_remove": 1}


@dataclass(frozen=True)
class DPBounds:
    """The released bounds and how they were obtained.

    Attributes
    ----------
    schema : Schema
        Numeric columns with the DP bounds, flagged ``public=True``.
    ledger : list of (stage, epsilon)
        One stage per column; ``math.fsum`` equals the epsilon spent.
    neighbouring : {"replace", "add_remove"}
    edges : ndarray
        The public bucket edges (shared by every column).
    noisy_counts : dict of str to ndarray
        The released noisy bucket counts per column (DP outputs, safe to show).
    seed : int or None
    warnings : list of str
    """

    schema: Schema
    ledger: Ledger
    neighbouring: str
    edges: np.ndarray
    noisy_counts: dict[str, np.ndarray]
    seed: int | None
    warnings: list[str] = field(default_factory=list)


def bucket_edges(min_abs: float = 2.0**-10, max_abs: float = 2.0**40, per_octave: int = 2) -> np.ndarray:
    """The public symmetric log-scale bucket edges (see the module docstring)."""
    if not (0 < min_abs < max_abs and np.isfinite(max_abs)):
        raise ParameterError(f"bucket edges need 0 < min_abs < max_abs < inf, got {min_abs!r}, {max_abs!r}")
    if per_octave < 1:
        raise ParameterError(f"per_octave must be >= 1, got {per_octave!r}")
    octaves = np.arange(np.floor(np.log2(min_abs)), np.ceil(np.log2(max_abs)))
    steps = 1.0 + np.arange(per_octave) / per_octave
    positive = np.append((2.0 ** octaves[:, None] * steps[None, :]).ravel(), 2.0 ** np.ceil(np.log2(max_abs)))
    return np.concatenate([-positive[::-1], positive])


def bucket_index(x: np.ndarray, edges: np.ndarray) -> np.ndarray:
    """Bucket of every value; values outside the edges go to the outermost buckets."""
    return np.clip(np.searchsorted(edges, x, side="right") - 1, 0, len(edges) - 2)


def kept_counts(noisy_counts: np.ndarray, sigma: float, beta: float = 0.05) -> np.ndarray:
    """Noisy counts with everything below ``tau = sigma ln(B / beta)`` set to 0 (post-processing)."""
    tau = sigma * np.log(len(noisy_counts) / beta)
    return np.where(noisy_counts >= tau, noisy_counts, 0)


def quantile_bounds(kept: np.ndarray, edges: np.ndarray, tail: float) -> tuple[float, float]:
    """``(lo, hi)`` from kept counts: the ``tail`` and ``1 - tail`` quantile buckets, rounded outwards."""
    released = np.clip(kept, 0, None).astype(float)
    total = released.sum()
    if total <= 0:
        return float(edges[0]), float(edges[-1])
    share = np.cumsum(released) / total
    first = int(np.searchsorted(share, tail, side="left"))
    last = int(np.searchsorted(share, 1.0 - tail, side="left"))
    last = min(max(last, first), len(edges) - 2)
    return float(edges[first]), float(edges[last + 1])


def dp_bounds(df: pd.DataFrame, columns: Sequence[str], epsilon: float, *, neighbouring: str = "replace",
              tail: float = 0.01, rng: RandomLike = None, min_abs: float = 2.0**-10,
              max_abs: float = 2.0**40, per_octave: int = 2, integer: Collection[str] = (),
              before_noise: Callable[[], AbstractContextManager[object]] | None = None) -> DPBounds:
    """Estimate public bounds for numeric columns with epsilon-DP.

    Parameters
    ----------
    df : DataFrame
        The private table.
    columns : sequence of str
        Numeric columns to bound (text columns need typed categories instead).
    epsilon : float
        Total budget, split equally over the columns.
    neighbouring : {"replace", "add_remove"}
    tail : float
        Share of records allowed below ``lo`` and above ``hi`` each (before noise), in (0, 0.5).
    rng : None, int, Generator or "secure"
    integer : collection of str
        Columns the caller declares integer (a public declaration: never read off the data's dtypes).
    min_abs, max_abs, per_octave : float, float, int
        The public bucket grid (:func:`bucket_edges`); values beyond ``max_abs`` are clipped.
    before_noise : callable, optional
        Called once every argument is checked, before the first draw; the noise is drawn inside the context it
        returns (the privacy ledger's reservation: :func:`privsyn_core.dp_bounds`).

    Returns
    -------
    DPBounds
    """
    epsilon = check_epsilon(epsilon)
    if neighbouring not in SENSITIVITY:
        raise ParameterError(f"neighbouring must be one of {list(SENSITIVITY)}, got {neighbouring!r}")
    if not 0 < tail < 0.5:
        raise ParameterError(f"tail must be in (0, 0.5), got {tail!r}")
    columns = list(columns)
    if not columns:
        raise ParameterError("choose at least one numeric column to bound")
    if len(set(columns)) != len(columns):
        raise ParameterError(f"each column is bounded once; {columns} repeats a name")
    values = {c: _numeric_column(df, c) for c in columns}
    edges = bucket_edges(min_abs, max_abs, per_octave)
    ledger = split_epsilon(epsilon, [(f"DP bounds of {c!r}: discrete Laplace bucket counts", 1.0) for c in columns])
    generator, seed = resolve_rng(rng)
    noisy, bounded, warnings = {}, [], []
    with before_noise() if before_noise is not None else nullcontext():
        for (name, x), (_, eps_col), child in zip(values.items(), ledger, generator.spawn(len(columns)), strict=True):
            true_count = np.bincount(bucket_index(x, edges), minlength=len(edges) - 1)
            sigma = SENSITIVITY[neighbouring] / eps_col
            noisy[name] = true_count + discrete_laplace(sigma, true_count.shape, child)
            kept = kept_counts(noisy[name], sigma)
            lo, hi = quantile_bounds(kept, edges, tail)
            if kept.sum() == 0:
                warnings.append(f"column {name!r}: no noisy bucket count passed the threshold, so the whole public "
                                f"range [{lo:g}, {hi:g}] was used; spend more epsilon or type the bounds")
            bounded.append(Column(name, "numeric", lo=lo, hi=hi, integer=name in integer, public=True))
    return DPBounds(Schema(tuple(bounded)), ledger, neighbouring, edges, noisy, seed, warnings)


def _numeric_column(df: pd.DataFrame, name: str) -> np.ndarray:
    """The column's values that are numbers (module docstring: the others are left out, never named)."""
    if name not in df.columns:
        raise DataError(f"unknown column {name!r}; the table has {list(map(str, df.columns))}")
    series = df[name]
    if pd.api.types.is_bool_dtype(series) or pd.api.types.is_numeric_dtype(series):
        x = series.to_numpy(dtype=float, na_value=np.nan)
    else:
        x = pd.to_numeric(series, errors="coerce").to_numpy(dtype=float, na_value=np.nan)
    return x[~np.isnan(x)]
