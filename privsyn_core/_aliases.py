"""Old module names of the flat layout stay importable: ``privsyn_core.evaluation.metrics`` is
``privsyn_core.evaluation.metrics`` (the contract's names never break when a module moves).

A meta-path finder resolves a name of :data:`privsyn_core._moved.MOVED` to the module at its new
place; the two names then refer to one module object, so monkeypatching either works.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import importlib.util
import sys
from types import ModuleType

from privsyn_core._moved import MOVED

__all__ = ["MOVED", "install"]


class _MovedModuleFinder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Loads an old name as the module at its new place."""

    def find_spec(self, fullname: str, path: object = None,
                  target: ModuleType | None = None) -> importlib.machinery.ModuleSpec | None:
        return importlib.util.spec_from_loader(fullname, self) if fullname in MOVED else None

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType:
        module = importlib.import_module(MOVED[spec.name])
        spec.loader_state = (module.__spec__, module.__loader__)  # importlib overwrites them with the alias's
        return module

    def exec_module(self, module: ModuleType) -> None:
        spec = module.__spec__
        if spec is not None and spec.loader_state is not None:
            module.__spec__, module.__loader__ = spec.loader_state


def install() -> None:
    """Put the finder on ``sys.meta_path`` once."""
    if not any(isinstance(f, _MovedModuleFinder) for f in sys.meta_path):
        sys.meta_path.append(_MovedModuleFinder())
