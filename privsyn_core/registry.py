"""The mechanism registry: discovers the modules of :mod:`privsyn_core.mechanisms` and lists what they registered.

A mechanism module declares itself with :func:`privsyn_core.mechanisms.base.spec.register` (its
:class:`~privsyn_core.mechanisms.base.spec.MechanismSpec`); the modules are discovered automatically, so a new
mechanism is one module and nothing else.  Nothing outside a mechanism's own folder imports it: the registry finds
it by walking the package.
"""

from __future__ import annotations

import importlib
import pkgutil

from privsyn_core import mechanisms
from privsyn_core.errors import ParameterError
from privsyn_core.mechanisms.base.spec import MechanismSpec, missing, registered

_DISCOVERED = False


def _discover() -> None:
    """Import every module of :mod:`privsyn_core.mechanisms` once (names starting with ``_`` are left out)."""
    global _DISCOVERED
    if _DISCOVERED:
        return
    prefix = f"{mechanisms.__name__}."
    for info in sorted(pkgutil.walk_packages(mechanisms.__path__, prefix), key=lambda m: m.name):
        if not any(part.startswith("_") for part in info.name[len(prefix):].split(".")):
            importlib.import_module(info.name)
    _DISCOVERED = True


def list_mechanisms() -> list[MechanismSpec]:
    """Every registered mechanism, by its declared ``order`` (then name)."""
    _discover()
    return registered()


def get_mechanism(name: str) -> MechanismSpec:
    """The spec registered under ``name``; a clear error for an unknown name."""
    specs = {spec.name: spec for spec in list_mechanisms()}
    if name not in specs:
        raise ParameterError(f"unknown mechanism {name!r}; choose one of {list(specs)}")
    return specs[name]


def missing_mechanisms() -> dict[str, str]:
    """The mechanisms that exist but cannot run here (an optional dependency is missing), with how to install them."""
    _discover()
    return missing()
