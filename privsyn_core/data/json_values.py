"""Python values ready for :func:`json.dumps`, from the numpy and pandas values the library computes.

One place for the conversions the schema (:meth:`privsyn_core.Schema.to_dict`), the result
(:meth:`privsyn_core.SynthResult.release`) and the run reports (:mod:`privsyn_core.reporting.report`) need.
"""

from __future__ import annotations

import json
import math
from typing import Any

import numpy as np
import pandas as pd


def plain(value: Any) -> Any:
    """A numpy scalar as the Python scalar, a numpy array as nested lists; anything else unchanged."""
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, np.ndarray):
        return value.tolist()
    return value


def jsonable(value: Any) -> Any:
    """:func:`plain` applied recursively through dicts (keys as text), lists and tuples; a DataFrame becomes
    its records and a non-finite float its text (``"inf"``, ``"nan"``), which strict JSON cannot hold."""
    if isinstance(value, dict):
        return {str(k): jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [jsonable(v) for v in value]
    if isinstance(value, pd.DataFrame):
        return json.loads(value.to_json(orient="records"))
    value = plain(value)
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    return value


__all__ = ["jsonable", "plain"]
