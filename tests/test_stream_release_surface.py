"""The release surface of a stream: every channel of every step is a function of public inputs and the noisy
counters only.

Neighbouring streams ``D`` and ``D'`` differ by one record added at one step.  The noise is *coupled*, the
standard argument of a DP proof: ``D'`` draws the same noise as ``D`` shifted by the record's contribution to
each node (at most one in one cell per level, checked below), so both streams' noisy counters coincide at every
step.  Everything released -- every field of every step's :class:`~privsyn_core.result.Release`, its
``to_dict``, the rows, the CLI's CSV, ``--report`` JSON, stdout, stderr and ``stream status`` -- must then be
identical.  A field that differs is read off the raw data.  With a growing depth the levels open when the released
total passes their thresholds: coupled neighbours open them at the same steps, and a rule reading the true total
is caught.
"""

from __future__ import annotations

import io
import json
import math
from contextlib import redirect_stderr, redirect_stdout
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from privsyn_core import stream as stream_module
from privsyn_core.cli import main as cli_main
from privsyn_core.mechanisms.online import continual, online_pmm
from privsyn_core.stream import open_stream

SCHEMA = {"columns": [{"name": "a", "kind": "numeric", "lo": 0, "hi": 10},
                      {"name": "g", "kind": "categorical", "categories": ["x", "y", "z"]}]}
STEPS, CHANGED = 7, 5
#: The two ways to size a stream's tree: a fixed depth, a depth growing with the stream.
MODES = {"fixed": ({"depth": 4}, ["--depth", "4"]), "growing": ({"growing": True}, ["--growing"])}


def _batches(extra: bool, mode: str = "fixed") -> list[pd.DataFrame]:
    """30 records per step; growing: 20, and 400 at ``CHANGED`` so that a level opens there (level 2's threshold
    at step 4 is 137, about 5 standard deviations of the released total above the 80 records; at step 5, 211)."""
    out = []
    for t in range(1, STEPS + 1):
        g = np.random.default_rng(t)
        n = 30 if mode == "fixed" else 400 if t == CHANGED else 20
        frame = pd.DataFrame({"a": g.random(n) * 4, "g": g.choice(["x", "y"], n)})
        if extra and t == CHANGED:
            frame = pd.concat([frame, pd.DataFrame({"a": [9.9], "g": ["z"]})], ignore_index=True)
        out.append(frame)
    return out


class Coupling:
    """Record ``D``'s noisy node values; in ``D'`` replace the drawn noise by ``D``'s shifted by the record."""

    def __init__(self) -> None:
        self.recorded: list[np.ndarray] = []
        self.shifts: list[np.ndarray] = []
        self.levels: list[int] = []
        self.world = 0
        self.calls = 0

    def install(self, monkeypatch: pytest.MonkeyPatch) -> None:
        original = continual._add_noise

        def coupled(values, segments, scales, rng):
            before = values.copy()
            original(values, segments, scales, rng)
            if self.world == 0:
                self.recorded.append(values.copy())
            elif self.calls < len(self.recorded) and len(self.recorded[self.calls]) == len(values):
                target = self.recorded[self.calls]
                self.shifts.append((target - before) - (values - before))  # coupled noise minus drawn noise
                self.levels.append(len(segments.eps_log))
                values[:] = target
            self.calls += 1
        monkeypatch.setattr(continual, "_add_noise", coupled)

    def start(self, world: int) -> None:
        self.world, self.calls = world, 0


def _api_channels(tmp: Path, batches: list[pd.DataFrame], mode: str = "fixed") -> list[dict]:
    stream = open_stream(tmp / "api.json", SCHEMA, 1.0, create=True, rng=11, **MODES[mode][0])
    channels = []
    for batch in batches:
        release = stream.add(batch)
        again = stream.release()
        channels.append({"to_dict": release.to_dict(), "data": release.data.to_csv(index=False),
                         "dtypes": [str(t) for t in release.data.dtypes], "unit": release.unit.tobytes(),
                         "weights": release.weights, "ledger": release.ledger, "params": release.params,
                         "warnings": release.warnings, "seed": release.seed, "again": again.data.to_csv(index=False),
                         "report": stream.report(), "counters": stream.counters().tobytes()})
    return channels


def _cli_channels(tmp: Path, batches: list[pd.DataFrame], mode: str = "fixed") -> list[dict]:
    (tmp / "schema.json").write_text(json.dumps(SCHEMA))
    state = tmp / "cli.json"
    channels = [_run(["stream", "open", str(state), "--schema", str(tmp / "schema.json"), "--epsilon", "1",
                      *MODES[mode][1], "--seed", "11"], tmp)]
    for t, batch in enumerate(batches, 1):
        batch.to_csv(tmp / f"b{t}.csv", index=False)
        out = _run(["stream", "add", str(state), str(tmp / f"b{t}.csv"), str(tmp / f"o{t}.csv"), "--report",
                    str(tmp / f"r{t}.json")], tmp)
        out["csv"] = (tmp / f"o{t}.csv").read_bytes()
        out["report"] = (tmp / f"r{t}.json").read_bytes()
        out["status"] = _run(["stream", "status", str(state), "--json"], tmp)
        channels.append(out)
    return channels


def _run(argv: list[str], tmp: Path) -> dict:
    out, err = io.StringIO(), io.StringIO()
    with redirect_stdout(out), redirect_stderr(err):
        code = cli_main(argv)
    return {"code": code, "stdout": out.getvalue().replace(str(tmp), "TMP"),
            "stderr": err.getvalue().replace(str(tmp), "TMP")}


@pytest.mark.parametrize("mode", list(MODES))
@pytest.mark.parametrize("channels", [_api_channels, _cli_channels])
def test_every_channel_of_every_step_is_identical_on_coupled_neighbours(channels, mode, tmp_path, monkeypatch):
    coupling = Coupling()
    coupling.install(monkeypatch)
    results = []
    for world in (0, 1):
        coupling.start(world)
        folder = tmp_path / f"w{world}"
        folder.mkdir()
        results.append(channels(folder, _batches(world == 1, mode), mode))
    # the coupling is a shift of the noise by the record's contribution: at most one, in one cell per level
    assert coupling.calls == len(coupling.recorded), "both worlds release the same nodes"
    for shift, levels in zip(coupling.shifts, coupling.levels, strict=True):
        assert set(np.unique(shift)) <= {-1, 0} and shift.sum() >= -levels
    assert any(shift.any() for shift in coupling.shifts), "the added record must change some node"
    for step, (a, b) in enumerate(zip(*results, strict=True)):
        for name in a:
            assert _same(a[name], b[name]), (channels.__name__, step, name)


def test_coupled_neighbours_open_the_levels_of_a_growing_stream_at_the_same_steps(tmp_path, monkeypatch):
    """The opening steps are released (``params["opened"]``); with coupled noise both worlds open every level at
    the same step, among them levels opened after step 1 and at the step where the worlds differ."""
    coupling = Coupling()
    coupling.install(monkeypatch)
    opened = []
    for world in (0, 1):
        coupling.start(world)
        (tmp_path / f"w{world}").mkdir()
        channels = _api_channels(tmp_path / f"w{world}", _batches(world == 1, "growing"), "growing")
        opened.append([c["params"]["opened"] for c in channels])
    assert opened[0] == opened[1]
    final = opened[0][-1]
    assert any(step > 1 for step in final), final
    assert CHANGED in final, "a level opens at the step of the added record"


def test_the_check_detects_an_opening_rule_that_reads_the_true_total(tmp_path, monkeypatch):
    """A variant whose rule reads the true total: ``D``'s total is one below level 1's threshold at step 4, ``D'``
    has one more record there, so the worlds open level 1 at different steps and the releases differ."""
    coupling = Coupling()
    coupling.install(monkeypatch)
    plan = online_pmm.growing_plan(2, 1.0)
    sizes = [5, 5, 5, math.ceil(plan.opening_threshold(1, 4)) - 16, 5]
    assert all(sum(sizes[:t]) < plan.opening_threshold(1, t) for t in range(1, 5))
    original = online_pmm.step

    def leaky(state, leaves, plan, node_rng, rule=None):
        leaky.total += int(leaves.sum())
        return original(state, leaves, plan, node_rng, lambda root, t: plan.opening_depth(leaky.total, t))
    monkeypatch.setattr(online_pmm, "step", leaky)
    opened = []
    for world in (0, 1):
        coupling.start(world)
        leaky.total = 0
        (tmp_path / f"w{world}").mkdir()
        batches = [pd.DataFrame({"a": [1.0] * n, "g": ["x"] * n}) for n in sizes]
        if world:
            batches[3] = pd.concat([batches[3], pd.DataFrame({"a": [9.9], "g": ["z"]})], ignore_index=True)
        opened.append([c["params"]["opened"] for c in _api_channels(tmp_path / f"w{world}", batches, "growing")])
    assert opened[0][3] == [1] and opened[1][3] == [1, 4]


def _same(a, b) -> bool:
    if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
        return (a is None and b is None) or np.array_equal(a, b)
    return a == b


def test_the_check_detects_a_release_read_off_the_exact_count(tmp_path, monkeypatch):
    """A variant that publishes the batch's exact size is caught by the same comparison."""
    coupling = Coupling()
    coupling.install(monkeypatch)
    original = stream_module.Stream._release

    def leaky(self, counters, n_synthetic, state):
        release = original(self, counters, n_synthetic, state)
        release.params["records"] = int(self._exact)
        return release

    original_leaves = stream_module.Stream._leaves

    def counting(self, batch):
        leaves = original_leaves(self, batch)
        self._exact = leaves.sum()
        return leaves
    monkeypatch.setattr(stream_module.Stream, "_release", leaky)
    monkeypatch.setattr(stream_module.Stream, "_leaves", counting)
    results = []
    for world in (0, 1):
        coupling.start(world)
        folder = tmp_path / f"w{world}"
        folder.mkdir()
        results.append(_api_channels(folder, _batches(extra=world == 1)))
    differing = [step for step, (a, b) in enumerate(zip(*results, strict=True)) if a["params"] != b["params"]]
    assert differing == [CHANGED - 1]
