r"""Boolean encoding of a mixed table: records in ``{0,1}^p`` for the Boolean mechanisms.

The microaggregation papers work on Boolean records ([BSV23] footnote 2: "categorical data
by one-hot encoding, numeric data by binning").  The encoding is a function of the
*public* schema only (bounds, category lists, the number of bins), so it costs no
privacy and every record maps independently of the others.

Per column:

* categorical with ``K >= 3`` categories: ``K`` one-hot bits; a column with 2 categories
  is one bit (the index of the category); a column with 1 category has no bits;
* numeric: the public range ``[lo, hi]`` is cut into ``B`` equal bins (integer columns
  with at most ``B`` integer values get one level per value), and the bin index
  ``0..B-1`` is written either as a **thermometer** (``B-1`` bits, bit ``j`` is
  ``1[level >= j]``) or as **binary digits** (``ceil(log2 B)`` bits, most significant
  first).  Values outside ``[lo, hi]`` are clipped into the end bins and counted.

Decoding accepts fractional points of ``[0,1]^p`` as well as Boolean rows and always
returns valid values: one-hot groups by argmax (ties split uniformly by a generator
with a fixed seed, so the output is a deterministic function of the input), a
thermometer by monotone rearrangement (sort the bits in decreasing order; the level is
the rounded number of ones, the expected level for fractional input), binary digits by
thresholding at 1/2 (clipped to the last level).  Numeric levels decode to the bin
centre (or the integer value).  Decoding is post-processing.

References
----------
.. [BSV23] M. Boedihardjo, T. Strohmer, R. Vershynin, "Covariance's Loss is Privacy's
   Gain: Computationally Efficient, Private and Accurate Synthetic Data",
   Found. Comput. Math. (2023), seed 001, Sections 1.1 and 4.3.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Literal

import numpy as np
import pandas as pd

from privsyn_core.data.codec import Codec
from privsyn_core.data.domain import Column, Schema
from privsyn_core.data.values import category_array, category_codes, check_frame, numeric_values
from privsyn_core.errors import ParameterError, SchemaError

NumericEncoding = Literal["thermometer", "binary"]
BlockKind = Literal["onehot", "bit", "constant", "thermometer", "binary"]
DEFAULT_BINS = 8
_TIE_SEED = 0


@dataclass(frozen=True)
class BitBlock:
    """The bits of one column: ``width`` coordinates starting at ``start``."""

    column: Column
    kind: BlockKind
    start: int
    width: int
    levels: np.ndarray = field(default_factory=lambda: np.empty(0))  # numeric: representative value of each level
    edges: np.ndarray | None = None   # numeric (binned): the B+1 bin edges

    @property
    def stop(self) -> int:
        return self.start + self.width


class BooleanCodec(Codec):
    """Encode a table into ``{0,1}^p`` and decode points of ``[0,1]^p`` back.

    Parameters
    ----------
    schema : Schema
        Public domain of the columns.
    numeric : {"thermometer", "binary"}
        How a numeric column's bin index is written.
    bins : int
        Number of equal-width bins per numeric column (``>= 2``).

    Attributes
    ----------
    blocks : list of BitBlock
    p : int
        Number of bits.
    bit_names : list of str
        A readable label per bit (``"col=cat"``, ``"col>=edge"``, ``"col.bit2"``).
    """

    def __init__(self, schema: Schema, numeric: NumericEncoding = "thermometer", bins: int = DEFAULT_BINS) -> None:
        if numeric not in ("thermometer", "binary"):
            raise ParameterError(f"numeric encoding must be 'thermometer' or 'binary', got {numeric!r}")
        if int(bins) != bins or bins < 2:
            raise ParameterError(f"bins must be an integer >= 2, got {bins!r}")
        self.schema = schema
        self.numeric = numeric
        self.bins = int(bins)
        self.blocks: list[BitBlock] = []
        start = 0
        for col in schema.columns:
            block = self._block(col, start)
            self.blocks.append(block)
            start = block.stop
        self.p = start
        if self.p == 0:
            raise SchemaError("every column has a single category: the Boolean encoding has no bits; "
                              "add a column with at least two values")
        self.bit_names = [name for block in self.blocks for name in _bit_names(block)]

    @property
    def names(self) -> list[str]:
        return self.schema.names

    def _block(self, col: Column, start: int) -> BitBlock:
        if col.kind == "categorical":
            k = len(col.category_list)
            kind: BlockKind = "constant" if k == 1 else "bit" if k == 2 else "onehot"
            return BitBlock(col, kind, start, {1: 0, 2: 1}.get(k, k))
        levels, edges = _numeric_levels(col, self.bins)
        count = len(levels)
        width = count - 1 if self.numeric == "thermometer" else max(1, math.ceil(math.log2(count)))
        return BitBlock(col, self.numeric, start, width, levels, edges)

    # -- encoding ---------------------------------------------------------------------
    def encode(self, df: pd.DataFrame) -> tuple[np.ndarray, dict[str, int]]:
        """Map the table into ``{0,1}^p``.

        Returns
        -------
        bits : ndarray (n, p) of uint8
        clipped : dict
            Rows clipped into the public bounds, per numeric column.
        """
        df = check_frame(df, self.names)
        bits = np.zeros((len(df), self.p), dtype=np.uint8)
        clipped: dict[str, int] = {}
        for block in self.blocks:
            col = block.column
            if col.kind == "categorical":
                codes = category_codes(df[col.name], col).astype(np.int64)
                bits[:, block.start:block.stop] = _categorical_bits(codes, block)
            else:
                x = numeric_values(df[col.name])
                clipped[col.name] = int(np.count_nonzero((x < col.lo) | (x > col.hi)))
                bits[:, block.start:block.stop] = _level_bits(_level_of(x, block), block)
        return bits, clipped

    # -- decoding ---------------------------------------------------------------------
    def decode(self, points: np.ndarray) -> pd.DataFrame:
        """Map points of ``[0,1]^p`` (Boolean or fractional) back to a table of valid values."""
        points = np.clip(np.asarray(points, dtype=float).reshape(-1, self.p), 0.0, 1.0)
        tie_rng = np.random.default_rng(_TIE_SEED)
        out = {}
        for block in self.blocks:
            col = block.column
            u = points[:, block.start:block.stop]
            if col.kind == "categorical":
                out[col.name] = category_array(col.category_list)[_categorical_codes(u, block, tie_rng)]
            else:
                values = block.levels[_levels_from_bits(u, block)]
                out[col.name] = values.astype(np.int64) if col.integer else values
        return pd.DataFrame(out, columns=self.names)

    def levels(self, df: pd.DataFrame) -> pd.DataFrame:
        """The discretised table: numeric columns replaced by their level's value.

        ``decode(encode(df)[0])`` equals this exactly, so it is the target of a lossless
        round trip (binning is the only loss).
        """
        df = check_frame(df, self.names)
        out = {}
        for block in self.blocks:
            col = block.column
            if col.kind == "categorical":
                out[col.name] = df[col.name].to_numpy()
            else:
                values = block.levels[_level_of(numeric_values(df[col.name]), block)]
                out[col.name] = values.astype(np.int64) if col.integer else values
        return pd.DataFrame(out, columns=self.names)


def boolean_codec(schema: Schema) -> BooleanCodec:
    """The registry's ``codec=`` factory: thermometer encoding with :data:`DEFAULT_BINS` bins."""
    return BooleanCodec(schema)


def is_boolean_column(col: Column) -> bool:
    """A 0/1 column by its public declaration: numeric ``lo = 0, hi = 1, integer``, or two categories."""
    if col.kind == "categorical":
        return len(col.category_list) == 2
    return col.integer and col.bounds == (0.0, 1.0) and not col.atoms


def strict_boolean_codec(schema: Schema, mechanism: str) -> BooleanCodec:
    """The codec of the Boolean-only mechanisms: refuses any column that is not Boolean in the schema.

    [BSV23]'s guarantees are for records in ``{0,1}^p``; a continuous column binned into a thermometer
    code gives cells that average to the same few rows (the accuracy of Section 1.1 is about Boolean
    marginals, not about a numeric column's distribution).  The check reads the public schema only.
    """
    bad = [col.name for col in schema.columns if not is_boolean_column(col)]
    if bad:
        shown = ", ".join(bad[:5]) + (f" and {len(bad) - 5} more" if len(bad) > 5 else "")
        raise SchemaError(f"{mechanism} works on Boolean columns only (numeric 0/1 with lo=0, hi=1, integer, or two "
                          f"categories); {shown} {'is' if len(bad) == 1 else 'are'} not: choose Boolean columns, "
                          f"or use pmm (any numeric or categorical table) or psmm (few columns)")
    return BooleanCodec(schema)


def _numeric_levels(col: Column, bins: int) -> tuple[np.ndarray, np.ndarray | None]:
    """Representative values of the levels, and bin edges (``None`` for one level per integer)."""
    lo, hi = col.bounds
    if col.integer:
        first, last = math.ceil(lo), math.floor(hi)
        if 2 <= last - first + 1 <= bins:
            return np.arange(first, last + 1, dtype=float), None
    edges = np.linspace(lo, hi, bins + 1)
    centres = (edges[:-1] + edges[1:]) / 2
    return (np.round(centres) if col.integer else centres), edges


def _level_of(x: np.ndarray, block: BitBlock) -> np.ndarray:
    count = len(block.levels)
    if block.edges is None:
        raw = np.round(x) - block.levels[0]
    else:
        lo, hi = block.column.bounds
        raw = np.floor((x - lo) / (hi - lo) * count)
    return np.clip(raw, 0, count - 1).astype(np.int64)


def _level_bits(level: np.ndarray, block: BitBlock) -> np.ndarray:
    if block.kind == "thermometer":
        return (level[:, None] >= np.arange(1, block.width + 1)).astype(np.uint8)
    powers = 2 ** np.arange(block.width - 1, -1, -1)
    return ((level[:, None] // powers) % 2).astype(np.uint8)


def _levels_from_bits(u: np.ndarray, block: BitBlock) -> np.ndarray:
    count = len(block.levels)
    if block.kind == "thermometer":
        level = np.floor(u.sum(axis=1) + 0.5)
    else:
        level = (u >= 0.5).astype(np.int64) @ (2 ** np.arange(block.width - 1, -1, -1))
    return np.clip(level, 0, count - 1).astype(np.int64)


def _categorical_bits(codes: np.ndarray, block: BitBlock) -> np.ndarray:
    if block.kind == "bit":
        return codes[:, None].astype(np.uint8)
    return (codes[:, None] == np.arange(block.width)).astype(np.uint8)


def _categorical_codes(u: np.ndarray, block: BitBlock, tie_rng: np.random.Generator) -> np.ndarray:
    n = len(u)
    if block.kind == "constant":
        return np.zeros(n, dtype=np.int64)
    if block.kind == "bit":
        return (u[:, 0] >= 0.5).astype(np.int64)
    is_max = u == u.max(axis=1, keepdims=True)
    keys = np.where(is_max, tie_rng.random(u.shape), -1.0)
    return keys.argmax(axis=1)


def _bit_names(block: BitBlock) -> list[str]:
    name = block.column.name
    if block.kind == "bit":
        return [f"{name}={block.column.category_list[1]}"]
    if block.kind == "onehot":
        return [f"{name}={c}" for c in block.column.category_list]
    if block.kind == "thermometer":
        bounds = block.levels if block.edges is None else block.edges
        return [f"{name}>={bounds[j]:g}" for j in range(1, block.width + 1)]
    return [f"{name}.bit{block.width - 1 - j}" for j in range(block.width)]


__all__ = ["DEFAULT_BINS", "BitBlock", "BooleanCodec", "boolean_codec", "is_boolean_column", "strict_boolean_codec"]
