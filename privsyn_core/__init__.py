"""privsyn_core: differentially private synthetic data with provable Wasserstein accuracy.

>>> import privsyn_core as ps
>>> [m.name for m in ps.list_mechanisms()][:2]
['pmm', 'psmm']
"""

from .api import synthesize
from .domain import Column, Schema, unit_schema
from .errors import DataError, ParameterError, PrivsynError, SchemaError
from .registry import MechanismSpec, ParamSpec, get_mechanism, list_mechanisms
from .result import MechanismOutput, SynthResult
from . import metrics

__version__ = "0.1.0"

__all__ = ["synthesize", "Schema", "Column", "unit_schema", "list_mechanisms", "get_mechanism",
           "MechanismSpec", "ParamSpec", "SynthResult", "MechanismOutput", "PrivsynError", "DataError",
           "SchemaError", "ParameterError", "metrics", "__version__"]
