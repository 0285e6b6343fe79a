"""The codec protocol: how a mechanism's records are encoded from a table and decoded back.

A codec is a function of the *public* schema only, so encoding and decoding cost no privacy:
``encode`` maps each record independently (and counts the values it clipped into the public
bounds), ``decode`` is post-processing of the released rows.

* :class:`privsyn_core.data.unit_codec.UnitCodec` is the default codec (the unit cube ``[0,1]^d``), also
  applied by ``Schema.encode`` / ``Schema.decode``;
* :class:`privsyn_core.data.boolean_codec.BooleanCodec` writes records in ``{0,1}^p`` for the
  Boolean mechanisms;
* :class:`privsyn_core.data.levelled_codec.LevelledCodec` (``marginal_tree``, the OpenDP peers) attaches each
  column's public number of levels (categories, or the values of a few-valued integer column).

A mechanism names its codec in the registry as a factory, ``MechanismSpec.codec(schema) -> Codec`` (default
``UnitCodec``); the API and the Dask path build every mechanism's codec the same way.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

import numpy as np
import pandas as pd

if TYPE_CHECKING:
    from privsyn_core.data.domain import Schema


@runtime_checkable
class Codec(Protocol):
    """Encode a table into the mechanism's space and decode released rows back into a table."""

    def encode(self, df: pd.DataFrame, /) -> tuple[np.ndarray, dict[str, int]]:
        """The encoded records ``(n, p)`` and the number of values clipped per column."""
        ...

    def decode(self, unit: np.ndarray, /) -> pd.DataFrame:
        """A table of valid values from released rows (post-processing)."""
        ...


@runtime_checkable
class StagedCodec(Codec, Protocol):
    """A codec that also hands public facts of the schema (e.g. category counts) to a mechanism's stages."""

    @property
    def stage_params(self) -> Mapping[str, Any]:
        """Parameters added to the stages' parameters on both the in-memory and the Dask path."""
        ...


#: ``MechanismSpec.codec``: builds a mechanism's codec from the public schema.
CodecFactory = Callable[["Schema"], Codec]


def stage_params(codec: Codec) -> dict[str, Any]:
    """The public parameters a codec adds to the stages (none for a plain :class:`Codec`)."""
    return dict(codec.stage_params) if isinstance(codec, StagedCodec) else {}


__all__ = ["Codec", "CodecFactory", "StagedCodec", "stage_params"]
