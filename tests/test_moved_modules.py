"""The flat layout's module names stay importable after the move into sub-packages (CONTRACT: never rename)."""

from __future__ import annotations

import importlib
import importlib.resources
import subprocess
import sys

import pytest

import privsyn_core
from privsyn_core._moved import MOVED


@pytest.mark.parametrize("old, new", sorted(MOVED.items()))
def test_an_old_name_is_the_moved_module_itself(old: str, new: str) -> None:
    module = importlib.import_module(old)
    assert module is importlib.import_module(new)
    assert module.__name__ == new and module.__spec__ is not None and module.__spec__.name == new


def test_old_top_level_names_are_attributes_too() -> None:
    assert privsyn_core.figures is importlib.import_module("privsyn_core.reporting.figures")
    with pytest.raises(AttributeError):
        privsyn_core.no_such_module


def test_old_names_work_in_a_fresh_interpreter_and_patch_the_same_object() -> None:
    code = ("from privsyn_core.mechanisms import pmm; import privsyn_core.mechanisms.hvz23.pmm as new; "
            "import privsyn_core.noise as old_noise; from privsyn_core.privacy import noise; "
            "assert pmm is new and old_noise is noise; print('ok')")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.stdout.strip() == "ok", done.stderr


def test_every_moved_module_has_one_file_at_its_new_place() -> None:
    package = importlib.resources.files("privsyn_core")
    for old, new in MOVED.items():
        flat = old.removeprefix("privsyn_core.").replace(".", "/") + ".py"
        assert not (package / flat).is_file(), f"{flat} exists beside its moved copy"
        assert (package / (new.removeprefix("privsyn_core.").replace(".", "/") + ".py")).is_file()
