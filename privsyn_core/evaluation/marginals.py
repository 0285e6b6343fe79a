r"""Marginal fidelity of a synthetic table (evaluation only: they read the real data).

* :func:`marginal_tvd`: total variation between the 1-way or 2-way marginal histograms on public bins (one grid,
  or the mean over the resolution-robust grids);
* :func:`correlation_gap`: gap between the Pearson correlation matrices in unit coordinates;
* :func:`boolean_marginal_errors`: the average squared k-way marginal error of Boolean data, eq (1.2) of
  Boedihardjo, Strohmer and Vershynin, "Covariance's Loss is Privacy's Gain" (Found. Comput. Math.), with
  :func:`marginal_table` and :func:`avg_sq_marginal_error`.

The weighted forms (:func:`weighted_marginal_tvds`, :func:`weighted_correlation_gaps`) take a column of row weights
per replicate, so the bootstrap of :func:`privsyn_core.evaluation.scorecard.evaluate` builds no replicate table.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from itertools import combinations, product as itertools_product

import numpy as np
import pandas as pd
from scipy import sparse

from privsyn_core.data.domain import Column, Schema
from privsyn_core.data.unit_codec import atom_layout, decode_continuous
from privsyn_core.errors import ParameterError

__all__ = ["FEW_INTEGERS", "ROBUST_OFFSETS", "ROBUST_RESOLUTIONS", "avg_sq_marginal_error", "boolean_marginal_errors",
           "correlation_gap", "marginal_table", "marginal_tvd"]

_CHUNK_ELEMENTS = 4_000_000  # numbers of a block of outer products held in memory at once (32 MB of float64)

#: Equal-bin resolutions of the resolution-robust marginals (``bins="robust"``).
ROBUST_RESOLUTIONS = (8, 13, 20, 32)
#: Offsets of the robust grids, in bins: the grid of ``k`` bins at offset ``o`` has its edges at
#: ``lo + (i - o) (hi - lo) / k`` (``k + 1`` bins over ``[lo, hi]`` when ``o > 0``, the two end bins partial).
ROBUST_OFFSETS = (0.0, 0.25, 0.5, 0.75)
#: An integer column with at most this many integers in its public range gets one bin per value.
FEW_INTEGERS = 32


def marginal_tvd(real_df: pd.DataFrame, synth_df: pd.DataFrame, order: int = 1, bins: int | str = 20,
                 schema: Schema | None = None) -> pd.DataFrame:
    r"""Total variation between the 1-way (per column) or 2-way (per pair) marginal histograms.

    .. math:: \mathrm{TV}(p, q) = \tfrac12 \sum_{\text{bins}} |p_b - q_b| \in [0, 1]

    Bins are public (from the schema alone). With an integer ``bins``: ``bins`` equal-width bins over each
    numeric column's unit coordinate (its schema bounds ``[lo, hi]``; values outside are clipped into the end
    bins, as the encoding does) and one bin per category: a single grid, which an output quantised on the same
    grid matches exactly and an output quantised on another grid of similar width does not (a ranking on one
    grid rewards whoever shares it). ``bins="robust"`` (what :func:`evaluate` reports) judges every numeric
    column on ``ROBUST_RESOLUTIONS`` equal bins, each at every offset of ``ROBUST_OFFSETS``, and averages the
    TVDs over these grids (2-way: both columns of a pair on the same grid); an integer column with at most
    ``FEW_INTEGERS`` integers in ``[lo, hi]`` gets one bin per integer, a public atom a bin of its own (the
    continuous part of such a column is gridded), a categorical column one bin per category, on every grid.
    The schema is inferred from the real data when not given (its bounds are then read off the data).

    Parameters
    ----------
    real_df, synth_df : DataFrame
    order : {1, 2}
    bins : int or "robust"
        Equal bins per numeric column of a single grid, or ``"robust"``.
    schema : Schema, optional

    Returns
    -------
    DataFrame
        ``column, bins, tvd`` (order 1) or ``column_a, column_b, bins, tvd`` (order 2); ``bins`` is the number of
        cells (an integer ``bins``) or how the cells were made (``"robust"``, which adds ``tvd_<k>``: the mean over
        the offsets at ``k`` bins).

    Examples
    --------
    >>> import pandas as pd
    >>> from privsyn_core import Schema
    >>> schema = Schema.from_dict({"columns": [{"name": "x", "lo": 0, "hi": 1}]})
    >>> real, synth = pd.DataFrame({"x": [0.1, 0.2, 0.6, 0.9]}), pd.DataFrame({"x": [0.1, 0.6, 0.7, 0.9]})
    >>> float(marginal_tvd(real, synth, bins=2, schema=schema)["tvd"].iloc[0])
    0.25
    """
    if order not in (1, 2):
        raise ParameterError(f"order must be 1 or 2, got {order!r}")
    schema = Schema.infer(real_df) if schema is None else schema
    real, synth = schema.encode(real_df)[0], schema.encode(synth_df)[0]
    grids = bin_grids(bins)
    ones_real, ones_synth = np.ones((len(real), 1), np.float32), np.ones((len(synth), 1), np.float32)
    return weighted_marginal_tvds(real, synth, schema, grids, ones_real, ones_synth)[order].table


@dataclass(frozen=True)
class Grids:
    """The grids of a marginal metric: ``(bins, offset)`` per grid; ``robust`` applies the per-kind rules."""

    grids: tuple[tuple[int, float], ...]
    robust: bool

    @property
    def resolutions(self) -> list[int]:
        return sorted({k for k, _ in self.grids})

    def describe(self) -> str:
        if not self.robust:
            return f"{self.grids[0][0]} equal bins of each numeric column's public range, one bin per category"
        return (f"mean over {len(self.grids)} public grids: {', '.join(map(str, self.resolutions))} equal bins of each "
                f"numeric column's range, each at offsets {', '.join(f'{o:g}' for o in ROBUST_OFFSETS)} of a bin; an "
                f"integer column with at most {FEW_INTEGERS} values one bin per value, each public atom a bin, one "
                "bin per category")


def bin_grids(bins: int | str) -> Grids:
    if isinstance(bins, str) and bins == "robust":
        return Grids(tuple(itertools_product(ROBUST_RESOLUTIONS, ROBUST_OFFSETS)), True)
    if isinstance(bins, (bool, np.bool_)) or not isinstance(bins, (int, np.integer)) or bins < 1:
        raise ParameterError(f"bins must be a positive integer or 'robust', got {bins!r}")
    return Grids(((int(bins), 0.0),), False)


def _few_integers(col: Column) -> int:
    """Number of integers in the public range of an integer column when at most FEW_INTEGERS, else 0."""
    if not col.integer or col.lo is None or col.hi is None:
        return 0
    count = math.floor(col.hi) - math.ceil(col.lo) + 1
    return count if count <= FEW_INTEGERS else 0


def _column_codes(u: np.ndarray, col: Column, grids: Grids) -> tuple[np.ndarray, np.ndarray, str]:
    """Public bin of every value of one column (unit coordinates ``u``) on every grid its bins depend on.

    Returns ``codes`` (n, g) int64, ``sizes`` (g,) bins per grid and a description, with ``g = len(grids)`` for a
    column binned by the grids and ``g = 1`` for one whose bins are the same on every grid (categories, few
    integer values, an integer ``bins``).
    """
    if col.kind == "categorical" or not grids.robust:
        k = len(col.category_list) if col.kind == "categorical" else grids.grids[0][0]
        what = f"{k} categories" if col.kind == "categorical" else f"{k} bins"
        return np.minimum((u * k).astype(np.int64), k - 1)[:, None], np.array([k]), what
    atoms = len(col.atoms)
    scaled = decode_continuous(u, atoms) if atoms else u
    values = _few_integers(col)
    if values:
        lo, hi = col.bounds
        codes = np.clip(np.rint(lo + scaled * (hi - lo)) - math.ceil(lo), 0, values - 1).astype(np.int64)[:, None]
        sizes, what = np.array([values]), f"{values} values"
    else:
        ks = np.array([k for k, _ in grids.grids])
        offsets = np.array([o for _, o in grids.grids])
        last = ks - (offsets == 0)  # an offset grid has k + 1 bins, the first and last partial
        codes = np.minimum(np.maximum(np.floor(scaled[:, None] * ks + offsets), 0), last).astype(np.int64)
        sizes, what = last + 1, f"{len(grids.grids)} grids"
    if atoms:
        slot, start = atom_layout(atoms)
        atom = np.minimum((u / slot).astype(np.int64), atoms - 1)
        codes = np.where((u < start)[:, None], atom[:, None], codes + atoms)
        sizes, what = sizes + atoms, f"{atoms} atom{'s' * (atoms > 1)} + {what}"
    return codes, sizes, what


@dataclass(frozen=True)
class MarginalTVDs:
    """TVDs of every block (column or pair) on every grid, for the value and each bootstrap replicate.

    ``tvd`` is (blocks, grids, 1 + replicates): column 0 the value, the others the replicates; a block whose
    bins do not depend on the grid repeats its one TVD on every grid.
    """

    tvd: np.ndarray
    table: pd.DataFrame
    grids: Grids

    def mean(self) -> np.ndarray:
        """Mean over blocks of the mean over grids: (1 + replicates,)."""
        return self.tvd.mean(axis=(0, 1))

    def per_resolution(self) -> dict[int, np.ndarray]:
        """Mean over blocks and over the offsets of each resolution."""
        ks = np.array([k for k, _ in self.grids.grids])
        return {k: self.tvd[:, ks == k].mean(axis=(0, 1)) for k in self.grids.resolutions}


def weighted_marginal_tvds(real: np.ndarray, synth: np.ndarray, schema: Schema, grids: Grids, real_weights: np.ndarray,
                   synth_weights: np.ndarray) -> dict[int, MarginalTVDs]:
    """1-way and 2-way TVDs (order -> :class:`MarginalTVDs`) with row weights (n, r) and (m, r) per side.

    A weight column of ones gives the TVD of the tables; a column of bootstrap counts (how often each row is
    drawn) the TVD of that replicate: the histograms of all columns of weights are one sparse product per
    block, so no replicate table is ever built.
    """
    columns = [(_column_codes(real[:, j], col, grids), _column_codes(synth[:, j], col, grids)[0])
               for j, col in enumerate(schema.columns)]
    names = schema.names
    out = {}
    blocks: dict[int, list[tuple[tuple[str, ...], str, np.ndarray, np.ndarray, np.ndarray]]] = {1: [], 2: []}
    for (codes, sizes, what), synth_codes in columns:
        blocks[1].append(((names[len(blocks[1])],), what, codes, synth_codes, sizes))
    for i, j in combinations(range(len(names)), 2):
        (ci, si, wi), ti = columns[i]
        (cj, sj, wj), tj = columns[j]
        blocks[2].append(((names[i], names[j]), f"{wi} x {wj}", ci * sj + cj, ti * sj + tj, si * sj))
    for order in (1, 2):
        if not blocks[order]:
            continue
        tvd = np.stack([np.broadcast_to(_block_tvd(codes, synth_codes, sizes, real_weights, synth_weights),
                                        (len(grids.grids), real_weights.shape[1]))
                        for _, _, codes, synth_codes, sizes in blocks[order]])
        heads = ["column"] if order == 1 else ["column_a", "column_b"]
        table = pd.DataFrame([(*block_names, what if grids.robust else int(sizes[0]))
                              for block_names, what, _, _, sizes in blocks[order]], columns=heads + ["bins"])
        table["tvd"] = tvd[:, :, 0].mean(axis=1)
        if grids.robust:
            ks = np.array([k for k, _ in grids.grids])
            for k in grids.resolutions:
                table[f"tvd_{k}"] = tvd[:, ks == k, 0].mean(axis=1)
        out[order] = MarginalTVDs(tvd, table, grids)
    return out


def _block_tvd(real_codes: np.ndarray, synth_codes: np.ndarray, sizes: np.ndarray, real_weights: np.ndarray,
               synth_weights: np.ndarray) -> np.ndarray:
    """TVD of one block on each of its grids for each weight column: (g, r).

    ``codes`` (n, g) are bins within each grid, ``sizes`` (g,) the bins per grid. The cells of all grids are
    numbered together (above ``_DENSE_CELLS`` cells only those that some row occupies are kept, so memory stays
    O(rows x r)), and the weighted counts of every cell for every weight column are one sparse (cells x rows) by
    dense (rows x r) product.
    """
    starts = np.r_[0, np.cumsum(sizes)]
    real_cells, synth_cells = real_codes + starts[:-1], synth_codes + starts[:-1]
    if starts[-1] > _DENSE_CELLS:
        occupied = np.zeros(starts[-1], dtype=bool)
        occupied[real_cells] = True
        occupied[synth_cells] = True
        before = np.r_[0, np.cumsum(occupied)]
        real_cells, synth_cells, starts = before[real_cells], before[synth_cells], before[starts]
    p = _weighted_counts(real_cells, int(starts[-1]), real_weights) / real_weights.sum(axis=0)
    q = _weighted_counts(synth_cells, int(starts[-1]), synth_weights) / synth_weights.sum(axis=0)
    return 0.5 * np.add.reduceat(np.abs(p - q), starts[:-1], axis=0)


_DENSE_CELLS = 2**16  # a block with more cells (over all its grids) keeps only the occupied ones


def _weighted_counts(cells: np.ndarray, size: int, weights: np.ndarray) -> np.ndarray:
    """``out[c, r] = sum of weights[i, r] over the rows i whose cell (in any grid column of cells) is c``."""
    n, g = cells.shape
    incidence = sparse.csc_array((np.ones(n * g, dtype=weights.dtype), cells.ravel(), np.arange(0, n * g + 1, g)),
                                 shape=(size, n))
    return np.asarray(incidence @ weights, dtype=float)


def correlation_gap(real: np.ndarray, synth: np.ndarray) -> dict:
    """Gap between the Pearson correlation matrices of two tables in unit coordinates.

    A constant column (variance at most ``1e-24`` in unit coordinates) has correlation 0 with every other column.
    Returns the largest and the mean absolute gap over the off-diagonal pairs (0 with a single column).
    """
    largest, mean = weighted_correlation_gaps(real, synth, np.ones((len(real), 1)), np.ones((len(synth), 1)))
    return {"max": float(largest[0]), "mean": float(mean[0])}


def weighted_correlation_gaps(real: np.ndarray, synth: np.ndarray, real_weights: np.ndarray,
                      synth_weights: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Largest and mean absolute gap of the weighted correlation matrices, one per weight column: (r,), (r,)."""
    upper = np.triu_indices(real.shape[1], 1)
    if upper[0].size == 0:
        return np.zeros(real_weights.shape[1]), np.zeros(real_weights.shape[1])
    gap = np.abs(_correlations(real, real_weights) - _correlations(synth, synth_weights))[:, upper[0], upper[1]]
    return gap.max(axis=1), gap.mean(axis=1)


def _correlations(X: np.ndarray, weights: np.ndarray) -> np.ndarray:
    """Pearson correlation matrices of ``X`` (n, d) under each weight column of ``weights`` (n, r): (r, d, d).

    The columns are centred once on their plain mean, so each weighted covariance is a small correction of
    ``sum_i w_i x_i x_i^T / sum(w)``: the products ``x_i x_i^T`` of a block of rows (at most ``_CHUNK_ELEMENTS``
    numbers) times the weights of those rows, one matrix product per block.
    """
    centred = X - X.mean(axis=0)
    weights = np.asarray(weights, dtype=float)
    n, d = centred.shape
    total = weights.sum(axis=0)
    means = weights.T @ centred / total[:, None]
    second = np.zeros((d * d, weights.shape[1]))
    rows = max(1, _CHUNK_ELEMENTS // (d * d))
    for start in range(0, n, rows):
        block = centred[start:start + rows]
        second += (block[:, :, None] * block[:, None, :]).reshape(len(block), d * d).T @ weights[start:start + rows]
    cov = second.T.reshape(-1, d, d) / total[:, None, None] - means[:, :, None] * means[:, None, :]
    variance = np.diagonal(cov, axis1=1, axis2=2)
    scale = np.sqrt(np.where(variance > _CONSTANT_VARIANCE, variance, np.inf))
    return cov / scale[:, :, None] / scale[:, None, :]


_CONSTANT_VARIANCE = 1e-24  # a column whose (weighted) variance in unit coordinates is at most this is constant


def marginal_table(X: np.ndarray, d: int, weights: np.ndarray | None = None) -> np.ndarray:
    r"""All ``d``-way marginals ``sum_i w_i x_i(j_1)...x_i(j_d)`` over sorted distinct
    index sets ``j_1 < ... < j_d`` (in :func:`itertools.combinations` order), ``d <= 3``.

    ``weights`` default to ``1/n``.  Works for fractional ``X`` too (the weighted product
    of coordinates).
    """
    X = np.asarray(X, dtype=float)
    n, p = X.shape
    w = np.full(n, 1.0 / n) if weights is None else np.asarray(weights, dtype=float)
    if d == 1:
        return w @ X
    if d == 2:
        M = (X.T * w) @ X
        return M[np.triu_indices(p, 1)]
    if d == 3:
        index = np.array(list(combinations(range(p), 3)), dtype=np.int64).reshape(-1, 3)
        out = np.empty(len(index))
        for i in range(p - 2):
            rows = index[:, 0] == i
            M = (X.T * (w * X[:, i])) @ X
            out[rows] = M[index[rows, 1], index[rows, 2]]
        return out
    raise ValueError(f"marginal_table supports d in {{1, 2, 3}}, got d={d}")


def avg_sq_marginal_error(X: np.ndarray, Z: np.ndarray, d: int, weights_z: np.ndarray | None = None) -> float:
    r"""The covariance-loss paper's accuracy metric (1.2): ``C(p,d)^{-1} sum_{i_1<...<i_d} E(i_1..i_d)^2``
    between true rows ``X`` and synthetic rows ``Z`` (or weighted atoms ``Z``)."""
    return float(np.mean((marginal_table(X, d) - marginal_table(Z, d, weights_z)) ** 2))


def boolean_marginal_errors(real_bits: np.ndarray, synth_bits: np.ndarray, max_order: int = 3) -> dict[int, float]:
    r"""Average squared error of all k-way marginals of Boolean data, k = 1..max_order.

    Eq (1.2) of the covariance-loss paper (Boedihardjo, Strohmer, Vershynin, Found. Comput. Math. 2024):
    :math:`\binom{p}{k}^{-1} \sum_{i_1<\dots<i_k} E(i_1..i_k)^2`, with
    :math:`E = \frac1n\sum_i x_i(i_1)\cdots x_i(i_k) - \frac1m \sum_l z_l(i_1)\cdots z_l(i_k)`.
    Orders above the number of columns p are left out.
    """
    p = real_bits.shape[1]
    return {k: avg_sq_marginal_error(real_bits, synth_bits, k) for k in range(1, min(max_order, p) + 1)}


def boolean_bits(unit: np.ndarray, schema: Schema) -> np.ndarray | None:
    """{0,1} columns when every column is Boolean (two categories, or numeric [0, 1] holding only 0 and 1)."""
    bits = np.empty(unit.shape)
    for j, col in enumerate(schema.columns):
        if col.kind == "categorical" and len(col.categories or ()) == 2:
            bits[:, j] = unit[:, j] > 0.5
        elif col.kind == "numeric" and (col.lo, col.hi) == (0.0, 1.0) and np.all((unit[:, j] == 0) | (unit[:, j] == 1)):
            bits[:, j] = unit[:, j]
        else:
            return None
    return bits

