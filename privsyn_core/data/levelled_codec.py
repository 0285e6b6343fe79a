"""The levelled codec: the unit-cube encoding and every column's public number of discrete levels.

Marginal mechanisms (``marginal_tree``, the OpenDP peers) measure a column either on equal bins of its public
interval or on its discrete values.  Which one is a fact of the public schema, decided here once for all of them:

* a categorical column with ``K`` categories has ``K`` levels;
* an integer column whose public bounds hold at most :data:`MAX_VALUE_LEVELS` integers ``v_0 < ... < v_{k-1}``
  has ``k`` levels, one per value, as a careful user of a marginal mechanism would bin it;
* every other numeric column has 0 levels (continuous: the mechanism chooses its bins).

A column with ``k > 0`` levels is encoded at the centre of its level's cell, ``u = (i + 1/2) / k`` for the
``i``-th level, and a released coordinate decodes to the level whose cell ``[i/k, (i+1)/k)`` contains it; other
columns keep :meth:`privsyn_core.Schema.encode`'s coordinates.  The levels reach the mechanism as the public
parameter ``levels`` (:attr:`LevelledCodec.stage_params`), on the in-memory and the Dask path alike, with
``atoms``, the number of public atoms of every other numeric column.
Everything is a function of the public schema: encoding and decoding cost no privacy.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from privsyn_core.data.codec import Codec
from privsyn_core.data.values import numeric_values

if TYPE_CHECKING:
    from privsyn_core.data.domain import Column, Schema

#: Most integers an integer column's public bounds may hold to be measured one level per value.
MAX_VALUE_LEVELS = 32


def value_range(column: Column) -> tuple[int, int] | None:
    """The smallest and largest integer of an integer column's public bounds; None for any other column."""
    if column.kind != "numeric" or not column.integer:
        return None
    lo, hi = column.bounds
    return math.ceil(lo), math.floor(hi)


def level_count(column: Column, max_value_levels: int = MAX_VALUE_LEVELS) -> int:
    """The public number of levels of one column: categories, the values of a few-valued integer column, or 0."""
    if column.kind == "categorical":
        return len(column.category_list)
    values = value_range(column)
    if values is None:
        return 0
    count = values[1] - values[0] + 1
    return count if 1 <= count <= max_value_levels else 0


class LevelledCodec(Codec):
    """The schema's encoding with few-valued integer columns on level centres; the levels as stage parameters.

    Parameters
    ----------
    schema : Schema
        The public domain.
    max_value_levels : int
        An integer column with at most this many public values gets one level per value.
    """

    def __init__(self, schema: Schema, max_value_levels: int = MAX_VALUE_LEVELS) -> None:
        self.schema = schema
        self.levels = tuple(level_count(c, max_value_levels) for c in schema.columns)
        #: (column index, (smallest, largest) public integer) of the columns measured one level per value
        self._valued = [(j, values) for j, c in enumerate(schema.columns)
                        if self.levels[j] and (values := value_range(c)) is not None]
        #: Public atoms of every numeric column measured on bins (0 elsewhere): the OpenDP peers key each atom
        #: apart from the bins of the column's continuous part.
        self.atoms = tuple(0 if k or c.kind != "numeric" else len(c.atoms)
                           for k, c in zip(self.levels, schema.columns, strict=True))
        #: What both run paths add to the stages' parameters (public facts of the schema).
        self.stage_params = {"levels": self.levels, "atoms": self.atoms}

    def encode(self, df: pd.DataFrame) -> tuple[np.ndarray, dict[str, int]]:
        """The schema's unit rows, each few-valued integer column moved to its level's centre ``(i + 1/2)/k``."""
        unit, clipped = self.schema.encode(df)  # checks the table: names, kinds, missing values
        for j, (low, high) in self._valued:
            x = np.rint(numeric_values(df[self.schema.columns[j].name], checked=False))
            unit[:, j] = (np.clip(x, low, high) - low + 0.5) / self.levels[j]
        return unit, clipped

    def decode(self, unit: np.ndarray) -> pd.DataFrame:
        """The table of released rows: a level's cell decodes to its value, other columns as the schema does."""
        rows = np.asarray(unit, dtype=float).reshape(-1, len(self.levels))
        frame = self.schema.decode(rows)
        for j, (low, _) in self._valued:
            k = self.levels[j]
            index = np.minimum(np.floor(np.clip(rows[:, j], 0.0, 1.0) * k), k - 1)
            frame[self.schema.columns[j].name] = (low + index).astype(np.int64)
        return frame


__all__ = ["MAX_VALUE_LEVELS", "LevelledCodec", "level_count", "value_range"]
