"""Checks of the public inputs of a run: output size, relation, public record count, schema (epsilon:
:func:`privsyn_core.privacy.accounting.check_epsilon`).

Every failure is a :class:`~privsyn_core.errors.PrivsynError` subclass with a one-line message.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from privsyn_core.data.domain import Schema
from privsyn_core.errors import ParameterError, SchemaError
from privsyn_core.mechanisms.base.spec import MechanismSpec

#: Largest number of synthetic rows a run may produce.
MAX_SYNTHETIC_ROWS = 10**8


def check_count(name: str, value: Any, high: int = MAX_SYNTHETIC_ROWS) -> int | None:
    """``value`` as an int in ``[1, high]`` (``None`` passes through), or a clear error."""
    if value is None:
        return None
    try:
        ok = not isinstance(value, (bool, np.bool_)) and float(value).is_integer() and 1 <= int(value) <= high
    except (TypeError, ValueError, OverflowError):
        ok = False
    if not ok:
        raise ParameterError(f"{name} must be an integer in [1, {high:.0e}], got {value!r}")
    return int(value)


def check_neighbouring(spec: MechanismSpec, neighbouring: Any) -> str:
    """The relation, if the mechanism supports it."""
    if neighbouring not in spec.neighbouring:
        raise ParameterError(f"mechanism {spec.name!r} supports neighbouring relation(s) {list(spec.neighbouring)}, "
                             f"not {neighbouring!r}")
    return str(neighbouring)


def check_public_n(public_n: Any, neighbouring: str) -> int | None:
    """A public record count is for add/remove only (under replace-one ``n`` itself is public)."""
    value = check_count("public_n", public_n, 10**12)
    if value is not None and neighbouring == "replace":
        raise ParameterError("public_n is for neighbouring='add_remove'; under 'replace' the record count is public")
    return value


def resolve_schema(schema: Schema | dict | None, frame: pd.DataFrame) -> Schema:
    """The schema as given, or one proposed from the data (``dp_valid = False``)."""
    if schema is None:
        return Schema.infer(frame)
    if isinstance(schema, dict):
        return Schema.from_dict(schema)
    if isinstance(schema, Schema):
        return schema
    raise SchemaError(f"schema must be a Schema, a dict or None, got {type(schema).__name__}")
