"""Shared fixtures of the test suite.

Statistical helpers (chi-square goodness of fit, the false-failure rate ``ALPHA``) live in
``tests/goodness_of_fit.py``; import them (``from goodness_of_fit import ALPHA, discrete_laplace_pvalue``).

The ``slow`` marker tags statistical and end-to-end tests that take more than a few seconds each;
``python -m pytest -m "not slow"`` is the fast subset (the README's ``python -m pytest`` runs everything).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest

import privsyn_core as ps

#: --doctest-modules would import the conftest files as plain modules, and two files named ``conftest`` (here and
#: in ``browser/``) collide in pytest's default import mode; they hold no doctests (pytest still loads them as
#: conftests).  ``data/`` holds inputs, not tests: importing ``data/throwaway_mechanism.py`` would register its
#: mechanism in every suite (tests/test_new_mechanism.py loads it on purpose, in a subprocess).
collect_ignore = ["conftest.py", "browser/conftest.py"]
collect_ignore_glob = ["data/*"]

@pytest.fixture(autouse=True, scope="module")
def _module_ledger(tmp_path_factory):
    """Apps started by module fixtures keep their privacy ledger in a temporary folder, never in app-data/."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("PRIVSYN_DATA_DIR", str(tmp_path_factory.mktemp("ledger")))
        yield


@pytest.fixture(autouse=True)
def _fresh_ledger(monkeypatch, tmp_path):
    """Every test starts with an empty persistent ledger (the app's SQLite store, PRIVSYN_DATA_DIR)."""
    monkeypatch.setenv("PRIVSYN_DATA_DIR", str(tmp_path / "app-data"))
    monkeypatch.delenv("PRIVSYN_LEDGER", raising=False)  # the library's and the CLI's ledger follow the data folder
    monkeypatch.delenv("PRIVSYN_BUDGET", raising=False)


#: The seed of the ``rng`` fixture: fixed, so a statistical test fails the same way every time it fails.
FIXTURE_SEED = 20_261_123


@pytest.fixture()
def rng() -> np.random.Generator:
    """A fresh generator with a fixed seed (one per test: tests do not share a random stream)."""
    return np.random.default_rng(FIXTURE_SEED)


@pytest.fixture()
def unit_table() -> Callable[..., tuple[np.ndarray, ps.Schema]]:
    """Factory ``unit_table(n, d, seed=0)``: ``n`` i.i.d. uniform rows in ``[0, 1]^d`` and their public schema."""

    def make(n: int, d: int, seed: int = 0) -> tuple[np.ndarray, ps.Schema]:
        return np.random.default_rng(seed).random((n, d)), ps.unit_schema(d)

    return make
