"""The reproduction report (benchmarks/reproduce.py) at a tiny size: every registered continuous mechanism,
including one registered only inside the test, gets its rows without any change to the script."""

from __future__ import annotations

import importlib
import sys

import numpy as np
import pytest

from privsyn_core import registry
from privsyn_core.result import MechanismOutput


@pytest.fixture()
def reproduce():
    sys.modules.pop("benchmarks.reproduce", None)  # a fresh module: it reads the registry at import
    return importlib.import_module("benchmarks.reproduce")


@pytest.fixture()
def extra_mechanism(monkeypatch):
    """A data-independent mechanism (uniform rows: 0-DP, so any epsilon is honest) registered for this test only."""
    registry.list_mechanisms()  # discover the real ones before the registry is swapped
    monkeypatch.setattr(registry, "_REGISTRY", dict(registry._REGISTRY))

    @registry.register("test_uniform_rows", title="uniform rows (test)", paper="test", data_kind="continuous",
                       released=(), neighbouring=("replace", "add_remove"), is_private=True, params={},
                       guarantee="ignores the data", description="test only")
    def _run(unit: np.ndarray, epsilon: float, *, neighbouring: str, n_synthetic: int | None,
             rng: np.random.Generator, size: int | str | None = None) -> MechanismOutput:
        m = 100 if n_synthetic is None else n_synthetic  # a public default: under add/remove n is private
        return MechanismOutput(unit=rng.random((m, unit.shape[1])), ledger=[("nothing read", epsilon)])

    return "test_uniform_rows"


def test_tiny_report_has_a_row_per_continuous_mechanism(reproduce, extra_mechanism, tmp_path):
    config = reproduce.Config(ns=(24, 48), epsilons=(1.0, 4.0), n_epsilon=48, seeds=1, balog_dims=(), balog_seeds=1,
                              balog_quick=True)
    out, figures = tmp_path / "reproduction.md", tmp_path / "figures"
    out.write_text("old\n<!-- kd-timings:start -->\nkept line\n<!-- kd-timings:end -->\n")
    reproduce.build_report(config, out, figures, "tiny", progress=lambda line: None)
    text = out.read_text()
    slopes = text.split("## Slopes")[1].split("### Rate notes")[0]
    names = [s.name for s in reproduce.continuous_mechanisms()]
    assert extra_mechanism in names
    for name in names:
        for data in reproduce.DATASETS:
            assert f"| {name} | {data} |" in slopes, (name, data)
    assert f"- `{extra_mechanism}`: no rate stated" in text
    assert "kept line" in text and "(not measured yet)" in text  # the kd-timings block survives, w1-timings is new
    assert "old" not in text.splitlines()
    assert sorted(p.name for p in figures.glob("repro_w1_*.html")) == [
        f"repro_w1_{data}_{sweep}.html" for data in sorted(reproduce.DATASETS) for sweep in ("epsilon", "n")]


def test_loglog_slope_recovers_a_power_law(reproduce):
    x = np.array([100.0, 400.0, 1600.0])
    assert reproduce.loglog_slope(x, 3.0 * x ** -0.5) == pytest.approx(-0.5)
