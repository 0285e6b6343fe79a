"""The layers of the import graph (issue 26, item 7): the import-linter contracts of ``pyproject.toml`` hold.

``privsyn_core``'s tiers (privacy, data, errors, result < mechanisms < engine, registry, api, validation <
evaluation, reporting, stream < cli), ``mechanisms.base`` below every concrete mechanism, the app's pages above the
library, and no module importing a concrete mechanism outside its own folder but the few exceptions the contract
lists and justifies.  The graph holds every import, those inside functions and under ``TYPE_CHECKING`` too, so a
lazy import does not get around it.  Detection cases: the same contracts, on the same graph with one wrong import
added, are broken.
"""

from __future__ import annotations

import pkgutil
import tomllib
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from importlinter import configuration
from importlinter.adapters.building import GraphBuilder
from importlinter.application.app_config import settings
from importlinter.application.use_cases import create_report, lint_imports, read_user_options

import privsyn_core.mechanisms

PYPROJECT = Path(__file__).resolve().parents[1] / "pyproject.toml"
CONTRACTS = {c["id"]: c for c in tomllib.loads(PYPROJECT.read_text())["tool"]["importlinter"]["contracts"]}


class _GraphWithImport(GraphBuilder):
    """The project's import graph with one more import ``importer -> imported``."""

    def __init__(self, importer: str, imported: str) -> None:
        self.importer, self.imported = importer, imported

    def build(self, *args, **kwargs):
        graph = super().build(*args, **kwargs)
        graph.add_import(importer=self.importer, imported=self.imported, line_number=1, line_contents="(test)")
        return graph


@contextmanager
def _graph_builder(builder: GraphBuilder) -> Iterator[None]:
    configuration.configure()
    settings.configure(GRAPH_BUILDER=builder)
    try:
        yield
    finally:
        settings.configure(GRAPH_BUILDER=GraphBuilder())


def _broken(importer: str, imported: str) -> set[str]:
    """The ids of the contracts broken once ``importer`` imports ``imported``."""
    with _graph_builder(_GraphWithImport(importer, imported)):
        report = create_report(read_user_options(str(PYPROJECT)), cache_dir=None)
    assert not report.could_not_run
    return {contract.name for contract, check in report.get_contracts_and_checks() if not check.kept}


def _id(name: str) -> str:
    return next(key for key, contract in CONTRACTS.items() if contract["name"] == name)


def test_the_import_contracts_hold():
    """``lint-imports`` on the project's configuration (its report is printed when a contract is broken)."""
    configuration.configure()
    assert lint_imports(config_filename=str(PYPROJECT), cache_dir=None, no_logo=True)


@pytest.mark.parametrize(("importer", "imported", "contract"), [
    ("privsyn_core.data.dp_bounds", "privsyn_core.validation", "tiers"),  # the cycle of issue 26, item 1
    ("privsyn_core.mechanisms.hvz23.pmm", "privsyn_core.engine.pipeline", "tiers"),
    ("privsyn_core.registry", "privsyn_core.evaluation.audit", "tiers"),
    ("privsyn_core.reporting.figures", "pages._support.text", "app"),
    ("privsyn_core.mechanisms.base.rows", "privsyn_core.mechanisms.hvz23.pmm_tree", "mechanisms"),
    ("privsyn_core.engine.dask_backend", "privsyn_core.mechanisms.hvz23.pmm", "own-folder"),
    ("pages.tsp", "privsyn_core.mechanisms.random_walks.srw", "own-folder"),
    ("pages.tsp", "privsyn_core.mechanisms.hvz23.pmm_tree", "own-folder"),
    ("privsyn_core.reporting.stakeholder", "plotly", "app-libraries"),
    ("privsyn_core.api", "streamlit", "app-libraries"),
    ("privsyn_core.mechanisms.microagg.microagg_dp", "privsyn_core.mechanisms.random_walks.walks", "own-folder"),
])
def test_a_wrong_import_breaks_its_contract(importer, imported, contract):
    assert contract in {_id(name) for name in _broken(importer, imported)}


def test_every_mechanism_folder_is_declared_and_protected():
    """A new folder under ``mechanisms/`` joins the mechanisms contract (it is exhaustive) and the protected list."""
    folders = {info.name for info in pkgutil.iter_modules(privsyn_core.mechanisms.__path__)
               if info.ispkg and not info.name.startswith("_")}
    upper, lower = CONTRACTS["mechanisms"]["layers"]
    assert lower == "base" and "base" in folders
    assert {name.strip() for name in upper.split(":")} == folders - {"base"}
    assert set(CONTRACTS["own-folder"]["protected_modules"]) == {f"privsyn_core.mechanisms.{f}" for f in folders
                                                                  if f != "base"}
