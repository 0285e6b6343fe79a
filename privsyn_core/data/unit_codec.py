"""The default codec: each record of a table as a point of the unit cube ``[0, 1]^d``, one coordinate per column.

A function of the public schema only, so encoding and decoding cost no privacy: :meth:`UnitCodec.encode` maps
each record on its own, clipping numeric values into their public bounds (a per-record map, so it preserves
differential privacy), and :meth:`UnitCodec.decode` is post-processing of released rows.  Every mechanism without
a codec of its own goes through it (``MechanismSpec.codec`` defaults to :class:`UnitCodec`);
:meth:`Schema.encode <privsyn_core.data.domain.Schema.encode>` and ``Schema.decode`` are this codec.

A numeric column with public atoms (point masses) keeps each atom in a sub-interval of its own below ``1/2``
(:func:`atom_layout`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from privsyn_core.data.values import category_array, category_codes, check_frame, numeric_values, reject_missing

if TYPE_CHECKING:
    from privsyn_core.data.domain import Schema


@dataclass(frozen=True)
class UnitCodec:
    """The unit-cube codec of a public schema (:class:`privsyn_core.data.codec.Codec`)."""

    schema: Schema

    def encode(self, df: pd.DataFrame) -> tuple[np.ndarray, dict[str, int]]:
        """Map the table into ``[0, 1]^d``.

        Numeric ``x`` becomes ``clip((x - lo) / (hi - lo), 0, 1)``; the ``i``-th of
        ``K`` categories becomes the cell centre ``(i + 1/2) / K``.

        Returns
        -------
        unit : ndarray of shape (n, d)
        clipped : dict
            Number of rows clipped into the bounds, per numeric column.
        """
        df = check_frame(df, self.schema.names)
        unit = np.empty((len(df), len(self.schema.columns)))
        clipped: dict[str, int] = {}
        for j, col in enumerate(self.schema.columns):
            if col.kind == "numeric":
                x = numeric_values(df[col.name], checked=False)  # checked chunk by chunk in _scale_into
                clipped[col.name] = _scale_into(x, *col.bounds, unit[:, j], name=col.name)
                if col.atoms:
                    unit[:, j] = encode_atoms(x, unit[:, j], col.atoms)
            else:
                codes = category_codes(df[col.name], col)
                unit[:, j] = (codes + 0.5) / len(col.category_list)
        return unit, clipped

    def decode(self, unit: np.ndarray) -> pd.DataFrame:
        """Map points of ``[0, 1]^d`` back to a table with the original columns.

        Numeric columns scale back to ``[lo, hi]`` (float64, rounded to the declared ``decimals``, or rounded to
        int64 for integer columns); categorical coordinates decode to the category whose cell contains them (dtype
        from the categories).  Every dtype comes from the schema, a public declaration, never from
        the private input's dtypes.
        """
        unit = np.asarray(unit, dtype=float).reshape(-1, len(self.schema.columns))
        if all(col.kind == "numeric" and not col.integer and not col.atoms and col.decimals is None
               for col in self.schema.columns):
            # one float block: columns written straight into the (d, n) array pandas keeps (no consolidation copy)
            # rows chunk by chunk, all columns of a chunk at once: the rows are read once, in the CPU caches
            block = np.empty((len(self.schema.columns), len(unit)))
            for start in range(0, len(unit), _CHUNK):
                for j, col in enumerate(self.schema.columns):
                    _unscale_into(unit[start:start + _CHUNK, j], *col.bounds, block[j, start:start + _CHUNK])
            return pd.DataFrame(block.T, columns=self.schema.names, copy=False)
        out: dict[str, Any] = {}
        for j, col in enumerate(self.schema.columns):
            if col.kind == "numeric":
                lo, hi = col.bounds
                if col.atoms:
                    u = np.clip(unit[:, j], 0.0, 1.0)
                    x = decode_atoms(u, lo + decode_continuous(u, len(col.atoms)) * (hi - lo), col.atoms)
                else:
                    x = _unscale_into(unit[:, j], lo, hi, np.empty(len(unit)))
                if col.integer:
                    out[col.name] = np.round(x).astype(np.int64)
                elif col.decimals is not None:
                    out[col.name] = np.round(x, col.decimals) + 0.0  # + 0.0: no -0 in the table
                else:
                    out[col.name] = x
            else:
                u = np.clip(unit[:, j], 0.0, 1.0)
                k = len(col.category_list)
                idx = np.minimum((u * k).astype(np.int64), k - 1)
                values = category_array(col.category_list)
                # the k categories made into pandas' array once, then taken row by row (no conversion per row)
                out[col.name] = pd.Series(pd.array(values, dtype=_category_dtype(values)).take(idx))
        return pd.DataFrame(out, columns=self.schema.names)


def atom_layout(m: int) -> tuple[float, float]:
    r"""Where a numeric column with ``m`` public atoms lives in its unit coordinate.

    Like a category, atom ``i`` (in increasing order) gets a sub-interval of its own,
    ``[i s, (i+1) s)`` with ``s = 2^{-(\lceil \log_2 m \rceil + 1)}`` (the last atom up to ``1/2``), and
    encodes to its centre; the continuous part is ``[1/2, 1]``, with ``x`` at ``1/2 + (x - lo)/(2 (hi - lo))``.
    The split at ``1/2`` and the dyadic slots are cell edges of PMM's tree and of every grid with an even
    number of cells per axis, so a mechanism's cells keep an atom's mass apart from the continuous part
    without knowing about atoms.  Limits: an odd grid has one cell straddling ``1/2`` whose rows are split
    between the atom and the low end of the continuous part (kd_grid with 3 bins per axis on a 5-column
    table: zero share +0.2), and noise spread into the empty slots of ``[0, 1/2)`` by srw_tsp's walk decodes
    to the atom (+0.1-0.2); pmm, kd_grid with even bins, dp_histogram, psmm and kd_adaptive stay within about
    0.03 of a 60% spike at epsilon 4.  A value equal to an atom is the atom.

    Returns ``(s, 1/2)``: the slot width and where the continuous part starts.
    """
    return 2.0 ** -(math.ceil(math.log2(m)) + 1) if m > 1 else 0.5, 0.5


def encode_atoms(x: np.ndarray, scaled: np.ndarray, atoms: tuple) -> np.ndarray:
    """The unit coordinate of values ``x`` (``scaled = (clip(x) - lo)/(hi - lo)``) of a column with atoms."""
    slot, start = atom_layout(len(atoms))
    ends = np.r_[np.arange(1, len(atoms)) * slot, start]
    centres = (np.r_[0.0, ends[:-1]] + ends) / 2
    out = start + scaled * (1 - start)
    index = np.searchsorted(np.asarray(atoms), x)
    hit = (index < len(atoms)) & (np.asarray(atoms)[np.minimum(index, len(atoms) - 1)] == x)
    out[hit] = centres[index[hit]]
    return out


def decode_continuous(u: np.ndarray, m: int) -> np.ndarray:
    """The scaled value ``(x - lo)/(hi - lo)`` of the continuous part of a column with ``m`` atoms."""
    start = atom_layout(m)[1]
    return np.clip((u - start) / (1 - start), 0.0, 1.0)


def decode_atoms(u: np.ndarray, x: np.ndarray, atoms: tuple) -> np.ndarray:
    """``x`` with the coordinates in an atom's sub-interval replaced by that atom's exact value."""
    slot, start = atom_layout(len(atoms))
    index = np.minimum((u / slot).astype(np.int64), len(atoms) - 1)
    return np.where(u < start, np.asarray(atoms, dtype=float)[index], x)


#: Rows per chunk of the column maps of :meth:`UnitCodec.encode` / :meth:`UnitCodec.decode` (scratch in cache).
_CHUNK = 2 ** 16


def _scale_into(x: np.ndarray, lo: float, hi: float, out: np.ndarray, name: str | None = None) -> int:
    """``out = clip((x - lo) / (hi - lo), 0, 1)`` chunk by chunk; returns the number of values outside ``[lo, hi]``.

    One pass over ``x``: each chunk's minimum and maximum (in the CPU caches) decide whether it needs the
    count (teaching-only) and the clipping, which change nothing on values inside the bounds, so the values are
    those of the one-line formula.  With ``name``, a NaN or infinite value (a chunk's minimum or maximum is not
    finite) is a :class:`DataError` (:func:`~privsyn_core.data.values.reject_missing`), raised before anything is
    returned.
    """
    outside = 0
    scratch = np.empty(min(_CHUNK, len(x)))
    for start in range(0, len(x), _CHUNK):
        source = x[start:start + _CHUNK]
        low, high = source.min(), source.max()  # NaN propagates
        if name is not None and not (math.isfinite(low) and math.isfinite(high)):
            reject_missing(name, x)
        part = scratch[:len(source)]
        np.subtract(source, lo, out=part)
        np.divide(part, hi - lo, out=part)
        if not (low >= lo and high <= hi):
            outside += int(np.count_nonzero((source < lo) | (source > hi)))
            np.minimum(np.maximum(part, 0.0, out=part), 1.0, out=part)
        out[start:start + _CHUNK] = part
    return outside


def _unscale_into(u: np.ndarray, lo: float, hi: float, out: np.ndarray) -> np.ndarray:
    """``out = lo + clip(u, 0, 1) (hi - lo)`` chunk by chunk, in one pass over ``u`` (clipping only the chunks
    that leave ``[0, 1]``; clipping changes nothing inside, so the values are those of the formula)."""
    for start in range(0, len(u), _CHUNK):
        source, part = u[start:start + _CHUNK], out[start:start + _CHUNK]
        if source.min() >= 0.0 and source.max() <= 1.0:
            np.multiply(source, hi - lo, out=part)
        else:
            np.minimum(np.maximum(source, 0.0, out=part), 1.0, out=part)
            part *= hi - lo
        np.add(part, lo, out=part)
    return out


def _category_dtype(values: np.ndarray) -> Any:
    """The dtype pandas gives the categories themselves (e.g. ``str`` for text under pandas 3): a function of
    the public categories only, the same for an empty output and a full one."""
    return values.dtype if values.dtype != object else pd.Series(values).dtype
