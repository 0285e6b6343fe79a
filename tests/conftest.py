"""Shared fixtures of the test suite.

Statistical helpers (chi-square goodness of fit, the false-failure rate ``ALPHA``) live in
``tests/goodness_of_fit.py``; import them (``from goodness_of_fit import ALPHA, discrete_laplace_pvalue``).

The ``slow`` marker tags tests that take more than 5 s of CPU each (statistical checks over many runs, end-to-end
runs of a real server or of the largest LP); ``python -m pytest -m "not slow and not browser" -n 2`` is the fast
loop (the README's ``python -m pytest -n 2`` runs everything).  With ``PRIVSYN_CHECK_SLOW=1`` a test that is neither
``slow`` nor ``browser`` fails when its call takes more than :data:`SLOW_CPU_SECONDS` of CPU.
"""

from __future__ import annotations

import itertools
import os
import re
from collections.abc import Callable, Generator
from pathlib import Path

import numpy as np
import pytest
from _pytest.mark.expression import Expression

import privsyn_core as ps

#: --doctest-modules would import the conftest files as plain modules, and two files named ``conftest`` (here and
#: in ``browser/``) collide in pytest's default import mode; they hold no doctests (pytest still loads them as
#: conftests).  ``data/`` holds inputs, not tests: importing ``data/throwaway_mechanism.py`` would register its
#: mechanism in every suite (tests/test_new_mechanism.py loads it on purpose, in a subprocess).
collect_ignore = ["conftest.py", "browser/conftest.py"]
collect_ignore_glob = ["data/*"]

#: A module marked whole by one line ``pytestmark = pytest.mark.<name>`` (tests/test_dask.py, tests/browser/).
_MODULE_MARK = re.compile(r"^pytestmark = pytest\.mark\.(\w+)$", re.MULTILINE)


def pytest_ignore_collect(collection_path: Path, config: pytest.Config) -> bool | None:
    """Do not even import a test module that ``-m`` deselects whole: the fast loop skips the imports of Dask and
    Playwright (0.9 s of CPU per process).  Only when the expression is false for the module's mark whatever other
    marks named in the expression a test of it carries; otherwise pytest collects and deselects as usual."""
    markexpr = config.option.markexpr
    if not markexpr or collection_path.suffix != ".py" or not collection_path.name.startswith("test_"):
        return None
    found = _MODULE_MARK.search(collection_path.read_text(encoding="utf-8"))
    names = set(re.findall(r"[^\s()]+", markexpr)) - {"and", "or", "not"}
    if found is None or any(not name.isidentifier() for name in names):
        return None
    expression = Expression.compile(markexpr)
    others = sorted(names - {found[1]})
    for present in itertools.chain.from_iterable(itertools.combinations(others, r) for r in range(len(others) + 1)):
        marks = {found[1], *present}
        if expression.evaluate(lambda name, /, **kwargs: name in marks):  # noqa: B023 (evaluated right here)
            return None
    return True

#: The CPU a test's call may take without the ``slow`` marker (the fast loop's rule, checked when PRIVSYN_CHECK_SLOW=1).
SLOW_CPU_SECONDS = 5.0


def _cpu_seconds() -> float:
    """CPU time of this process and of the child processes it has waited for (a CLI run, a server it stopped)."""
    times = os.times()
    return times.user + times.system + times.children_user + times.children_system


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Generator[None, None, None]:
    """With PRIVSYN_CHECK_SLOW=1, fail a test outside ``slow`` and ``browser`` whose call took too much CPU."""
    if os.environ.get("PRIVSYN_CHECK_SLOW") != "1" or item.get_closest_marker("slow") or \
            item.get_closest_marker("browser"):
        return (yield)
    start = _cpu_seconds()
    result = yield
    spent = _cpu_seconds() - start
    if spent > SLOW_CPU_SECONDS:
        pytest.fail(f"{spent:.1f} s of CPU in a test not marked slow (PRIVSYN_CHECK_SLOW=1 allows "
                    f"{SLOW_CPU_SECONDS:g} s): mark it @pytest.mark.slow or make it cheaper", pytrace=False)
    return result


@pytest.fixture(autouse=True, scope="module")
def _module_ledger(tmp_path_factory):
    """Apps started by module fixtures keep their privacy ledger in a temporary folder, never in app-data/."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("PRIVSYN_DATA_DIR", str(tmp_path_factory.mktemp("ledger")))
        patch.setenv("XDG_CONFIG_HOME", str(tmp_path_factory.mktemp("config")))  # the ledgers' markers
        yield


@pytest.fixture(autouse=True)
def _fresh_ledger(monkeypatch, tmp_path):
    """Every test starts with an empty persistent ledger (the app's SQLite store, PRIVSYN_DATA_DIR)."""
    monkeypatch.setenv("PRIVSYN_DATA_DIR", str(tmp_path / "app-data"))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))  # where a ledger's creation is remembered
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
