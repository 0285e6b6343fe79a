"""privsyn_core: differentially private synthetic data with provable Wasserstein accuracy.

>>> import privsyn_core as ps
>>> [m.name for m in ps.list_mechanisms()][:2]
['pmm', 'psmm']

``import privsyn_core`` stays light (no POT, scikit-learn, Dask, Plotly or Streamlit):
:mod:`privsyn_core.evaluation.metrics` is loaded on first use of ``ps.metrics`` (module ``__getattr__``,
PEP 562), and the heavy libraries are imported inside the functions that use them (``tests/test_packaging.py``
checks it).
"""

from __future__ import annotations

import importlib
from types import ModuleType
from typing import TYPE_CHECKING

from privsyn_core import _aliases
from privsyn_core.api import synthesize
from privsyn_core.data.domain import Column, Schema, unit_schema
from privsyn_core.errors import DataError, ParameterError, PrivsynError, SchemaError
from privsyn_core.registry import MechanismSpec, ParamSpec, get_mechanism, list_mechanisms
from privsyn_core.result import MechanismOutput, SynthResult

if TYPE_CHECKING:
    from privsyn_core.evaluation import metrics

_aliases.install()  # the flat layout's module names stay importable (privsyn_core._moved)

#: The one place the version is written (pyproject.toml reads it: ``[tool.setuptools.dynamic]``).
__version__ = "0.1.0"

__all__ = ["synthesize", "Schema", "Column", "unit_schema", "list_mechanisms", "get_mechanism",
           "MechanismSpec", "ParamSpec", "SynthResult", "MechanismOutput", "PrivsynError", "DataError",
           "SchemaError", "ParameterError", "metrics", "__version__"]

_LAZY_SUBMODULES = frozenset({"metrics"})


def __getattr__(name: str) -> ModuleType:
    """Import ``metrics`` and the moved modules of the flat layout on first attribute access (PEP 562).

    ``privsyn_core.figures`` (now ``privsyn_core.reporting.figures``) and the other old names keep working
    as attributes as well as imports (:mod:`privsyn_core._aliases`).
    """
    if name in _LAZY_SUBMODULES or f"{__name__}.{name}" in _aliases.MOVED:
        module = importlib.import_module(f".{name}", __name__)
        globals()[name] = module
        return module
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | _LAZY_SUBMODULES)
