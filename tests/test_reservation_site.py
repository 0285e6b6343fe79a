"""One reservation site: every door (synthesize, streams, DP bounds; library, command line, app) reserves its epsilon
through :func:`privsyn_core.engine.release.reserve_release`, the only caller of the ledger's ``reserve`` in the
library and the app."""

from __future__ import annotations

import ast
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import privsyn_core as ps
from privsyn_core.privacy.budget import PrivacyLedger

ROOT = Path(__file__).resolve().parents[1]
#: The one function allowed to call ``.reserve(``: (file relative to the checkout, function name).
SITE = ("privsyn_core/engine/release.py", "reserve_release")


def reserve_calls(path: Path, root: Path = ROOT) -> list[tuple[str, str]]:
    """Every call ``<anything>.reserve(...)`` in ``path``: (the file relative to ``root``, the enclosing function)."""
    found: list[tuple[str, str]] = []

    def visit(node: ast.AST, function: str) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)):
                visit(child, child.name)
                continue
            if isinstance(child, ast.Call) and isinstance(child.func, ast.Attribute) and child.func.attr == "reserve":
                found.append((path.relative_to(root).as_posix(), function))
            visit(child, function)

    visit(ast.parse(path.read_text(encoding="utf-8")), "<module>")
    return found


def sources(root: Path) -> list[Path]:
    return sorted([*(root / "privsyn_core").rglob("*.py"), *(root / "pages").rglob("*.py"), root / "app.py"])


def test_the_ledger_is_reserved_in_one_function_only():
    calls = [call for path in sources(ROOT) for call in reserve_calls(path)]
    assert calls == [SITE]


def test_the_scan_flags_an_extra_reservation(tmp_path):
    (tmp_path / "privsyn_core").mkdir()
    (tmp_path / "pages").mkdir()
    (tmp_path / "app.py").write_text("print('app')\n")
    (tmp_path / "pages" / "door.py").write_text(
        "def spend(store):\n    return store.reserve('d', 1.0, relation='replace', mechanism='pmm')\n")
    (tmp_path / "privsyn_core" / "fine.py").write_text("def reserve_release(ledger):\n    return ledger.reserve()\n")
    calls = [call for path in sources(tmp_path) for call in reserve_calls(path, tmp_path)]
    assert ("pages/door.py", "spend") in calls and len(calls) == 2


def test_every_door_reserves_through_the_site(tmp_path, monkeypatch):
    """synthesize, a stream's creation and DP bounds each pass through reserve_release once, before any noise."""
    from privsyn_core.engine import release

    seen: list[str] = []
    site = release.reserve_release

    def spy(*args, **kwargs):
        seen.append(kwargs["mechanism"])
        return site(*args, **kwargs)

    monkeypatch.setattr(release, "reserve_release", spy)
    import privsyn_core.api as api
    import privsyn_core.stream as stream

    monkeypatch.setattr(api, "reserve_release", spy)
    monkeypatch.setattr(stream, "reserve_release", spy)
    ledger = PrivacyLedger.create(tmp_path / "ledger.sqlite")
    frame = pd.DataFrame({"x0": np.random.default_rng(0).uniform(0, 1, 200)})
    ps.synthesize(frame, "dp_histogram", 0.5, schema=ps.unit_schema(1), ledger=ledger, rng=0)
    ps.dp_bounds(frame, ["x0"], 0.25, ledger=ledger, rng=0)
    ps.open_stream(tmp_path / "s.json", ps.unit_schema(1), 0.125, create=True, depth=2, rng=0,
                   ledger=ledger, dataset="stream")
    assert seen == ["dp_histogram", "dp_bounds", "online_pmm"]
    assert [s.mechanism for s in ledger.spends("stream")] == ["online_pmm"]


def test_dp_bounds_reserve_before_the_noise_and_refuse_over_the_budget(tmp_path, monkeypatch):
    from privsyn_core.data import dp_bounds as bounds
    from privsyn_core.privacy import budget

    ledger = PrivacyLedger.create(tmp_path / "ledger.sqlite")
    frame = pd.DataFrame({"x": np.random.default_rng(1).normal(0, 1, 500), "c": ["a", "b"] * 250})
    identity = budget.dataset_id(frame)
    ledger.set_budget(identity, 1.0)
    drawn: list[float] = []
    noise = bounds.discrete_laplace

    def counted(*args, **kwargs):
        drawn.append(ledger.spent(identity))  # what the ledger holds when the noise is drawn
        return noise(*args, **kwargs)

    monkeypatch.setattr(bounds, "discrete_laplace", counted)
    found = ps.dp_bounds(frame, ["x"], 0.75, ledger=ledger, rng=3)
    assert drawn == [0.75] and found.schema.dp_valid
    assert [(s.mechanism, s.epsilon, s.status) for s in ledger.spends(identity)] == [("dp_bounds", 0.75, "spent")]
    with pytest.raises(ps.BudgetExceeded):
        ps.dp_bounds(frame, ["x"], 0.5, ledger=ledger, rng=3)
    assert drawn == [0.75] and ledger.spent(identity) == 0.75, "refused before any noise, nothing recorded"
    with pytest.raises(ps.ParameterError):
        ps.dp_bounds(frame, ["x"], 0.1, neighbouring="nope", ledger=ledger)
    with pytest.raises(ps.DataError):
        ps.dp_bounds(frame, ["nope"], 0.1, ledger=ledger)
    assert ledger.count(identity) == 1, "a refused argument reserves nothing"
    ps.dp_bounds(frame, ["x"], 0.25, ledger=ledger, dataset="named", rng=3)
    assert ledger.spent("named") == 0.25 and ledger.spent(identity) == 0.75
