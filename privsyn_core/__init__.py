"""privsyn_core: differentially private synthetic data with provable Wasserstein accuracy.

>>> import privsyn_core as ps
>>> [m.name for m in ps.list_mechanisms()][:2]
['pmm', 'psmm']

``import privsyn_core`` is light: the public names below (``ps.synthesize``, ``ps.Schema``, ...) and ``ps.metrics``
(the public names of the evaluation modules, see :func:`_metrics_namespace`) are attributes loaded on first use
(module ``__getattr__``, PEP 562), and
the heavy libraries (POT, scikit-learn, Dask, Plotly; no Streamlit ever) are imported inside the functions that use
them (``tests/test_packaging.py`` checks it).  So the command line can install its signal handlers before numpy and
pandas load (:mod:`privsyn_core.__main__`).
"""

from __future__ import annotations

import importlib
import types
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from privsyn_core.api import dp_bounds, synthesize
    from privsyn_core.data.domain import Column, Schema, unit_schema
    from privsyn_core.errors import (
        BudgetExceeded,
        ClusterError,
        DataError,
        InputError,
        LedgerError,
        OutputError,
        ParameterError,
        PrivsynError,
        ResourceError,
        SchemaError,
        StreamError,
        UsageError,
    )
    metrics: types.ModuleType
    from privsyn_core.mechanisms.base.spec import MechanismSpec, ParamSpec
    from privsyn_core.privacy.budget import PrivacyLedger
    from privsyn_core.registry import get_mechanism, list_mechanisms
    from privsyn_core.result import MechanismOutput, Release, SynthResult
    from privsyn_core.stream import Stream, open_stream

from privsyn_core._version import __version__

#: Where each public name lives (loaded on first use).
_PUBLIC = {
    "synthesize": "privsyn_core.api", "dp_bounds": "privsyn_core.api",
    "Schema": "privsyn_core.data.domain", "Column": "privsyn_core.data.domain",
    "unit_schema": "privsyn_core.data.domain",
    "list_mechanisms": "privsyn_core.registry", "get_mechanism": "privsyn_core.registry",
    "MechanismSpec": "privsyn_core.mechanisms.base.spec", "ParamSpec": "privsyn_core.mechanisms.base.spec",
    "SynthResult": "privsyn_core.result", "MechanismOutput": "privsyn_core.result", "Release": "privsyn_core.result",
    "open_stream": "privsyn_core.stream", "Stream": "privsyn_core.stream",
    "PrivacyLedger": "privsyn_core.privacy.budget",
    **dict.fromkeys(("PrivsynError", "InputError", "DataError", "SchemaError", "ParameterError", "UsageError",
                     "ResourceError", "OutputError", "BudgetExceeded", "LedgerError", "StreamError", "ClusterError"),
                    "privsyn_core.errors"),
}

__all__ = ["synthesize", "dp_bounds", "Schema", "Column", "unit_schema", "list_mechanisms", "get_mechanism",
           "MechanismSpec", "ParamSpec", "SynthResult", "MechanismOutput", "Release", "open_stream", "Stream",
           "PrivacyLedger", "PrivsynError", "InputError", "DataError", "SchemaError", "ParameterError", "UsageError",
           "ResourceError", "OutputError", "BudgetExceeded", "LedgerError", "StreamError", "ClusterError",
           "metrics", "__version__"]

#: The modules whose public names (``__all__``) make up ``ps.metrics``.
_METRICS_MODULES = ("privsyn_core.evaluation.distances", "privsyn_core.evaluation.marginals",
                    "privsyn_core.evaluation.scorecard")


def _metrics_namespace() -> types.ModuleType:
    """``ps.metrics``: one namespace over the distances, the marginal metrics and the evaluation report.

    A plain attribute of the package (there is no module ``privsyn_core.metrics`` to import); each name in it is
    the object its module defines.
    """
    namespace = types.ModuleType("privsyn_core.metrics", "Metrics between real and synthetic data (evaluation only: "
                                 "they read the real data): w1, mmd, marginal_tvd, evaluate and the rest of "
                                 "__all__.")
    names: list[str] = []
    for path in _METRICS_MODULES:
        module = importlib.import_module(path)
        names.extend(module.__all__)
        vars(namespace).update({name: getattr(module, name) for name in module.__all__})
    vars(namespace)["__all__"] = sorted(names)
    return namespace


def __getattr__(name: str) -> Any:
    """Load a public name or ``metrics`` on first access (PEP 562)."""
    if name in _PUBLIC:
        value = getattr(importlib.import_module(_PUBLIC[name]), name)
    elif name == "metrics":
        value = _metrics_namespace()
    else:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | {"metrics"} | set(_PUBLIC))
