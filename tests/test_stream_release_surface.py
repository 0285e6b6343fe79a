"""The release surface of a stream: every channel of every step is a function of public inputs and the noisy
counters only.

Neighbouring streams ``D`` and ``D'`` differ by one record added at one step.  The noise is *coupled*, the
standard argument of a DP proof: ``D'`` draws the same noise as ``D`` shifted by the record's contribution to
each node (at most one in one cell per level, checked below), so both streams' noisy counters coincide at every
step.  Everything released -- every field of every step's :class:`~privsyn_core.result.Release`, its
``to_dict``, the rows, the CLI's CSV, ``--report`` JSON, stdout, stderr and ``stream status`` -- must then be
identical.  A field that differs is read off the raw data.
"""

from __future__ import annotations

import io
import json
from contextlib import redirect_stderr, redirect_stdout
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from privsyn_core import stream as stream_module
from privsyn_core.cli import main as cli_main
from privsyn_core.mechanisms.online import continual
from privsyn_core.stream import open_stream

SCHEMA = {"columns": [{"name": "a", "kind": "numeric", "lo": 0, "hi": 10},
                      {"name": "g", "kind": "categorical", "categories": ["x", "y", "z"]}]}
STEPS, CHANGED = 7, 5


def _batches(extra: bool) -> list[pd.DataFrame]:
    out = []
    for t in range(1, STEPS + 1):
        g = np.random.default_rng(t)
        frame = pd.DataFrame({"a": g.random(30) * 4, "g": g.choice(["x", "y"], 30)})
        if extra and t == CHANGED:
            frame = pd.concat([frame, pd.DataFrame({"a": [9.9], "g": ["z"]})], ignore_index=True)
        out.append(frame)
    return out


class Coupling:
    """Record ``D``'s noisy node values; in ``D'`` replace the drawn noise by ``D``'s shifted by the record."""

    def __init__(self) -> None:
        self.recorded: list[np.ndarray] = []
        self.shifts: list[np.ndarray] = []
        self.world = 0
        self.calls = 0

    def install(self, monkeypatch: pytest.MonkeyPatch) -> None:
        original = continual._add_noise

        def coupled(values, segments, scales, rng):
            before = values.copy()
            original(values, segments, scales, rng)
            if self.world == 0:
                self.recorded.append(values.copy())
            else:
                target = self.recorded[self.calls]
                self.shifts.append((target - before) - (values - before))  # coupled noise minus drawn noise
                values[:] = target
            self.calls += 1
        monkeypatch.setattr(continual, "_add_noise", coupled)

    def start(self, world: int) -> None:
        self.world, self.calls = world, 0


def _api_channels(tmp: Path, batches: list[pd.DataFrame]) -> list[dict]:
    stream = open_stream(tmp / "api.json", SCHEMA, 1.0, create=True, depth=4, rng=11)
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


def _cli_channels(tmp: Path, batches: list[pd.DataFrame]) -> list[dict]:
    (tmp / "schema.json").write_text(json.dumps(SCHEMA))
    state = tmp / "cli.json"
    channels = [_run(["stream", "open", str(state), "--schema", str(tmp / "schema.json"), "--epsilon", "1",
                      "--depth", "4", "--seed", "11"], tmp)]
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


@pytest.mark.parametrize("channels", [_api_channels, _cli_channels])
def test_every_channel_of_every_step_is_identical_on_coupled_neighbours(channels, tmp_path, monkeypatch):
    coupling = Coupling()
    coupling.install(monkeypatch)
    results = []
    for world in (0, 1):
        coupling.start(world)
        folder = tmp_path / f"w{world}"
        folder.mkdir()
        results.append(channels(folder, _batches(extra=world == 1)))
    # the coupling is a shift of the noise by the record's contribution: at most one, in one cell per level
    shifts = np.array(coupling.shifts)
    assert set(np.unique(shifts)) <= {-1, 0} and shifts.sum(axis=1).min() >= -5  # depth 4: five levels
    assert shifts.any(), "the added record must change some node"
    for step, (a, b) in enumerate(zip(*results, strict=True)):
        for name in a:
            assert _same(a[name], b[name]), (channels.__name__, step, name)


def _same(a, b) -> bool:
    if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
        return (a is None and b is None) or np.array_equal(a, b)
    return a == b


def test_the_check_detects_a_release_read_off_the_exact_count(tmp_path, monkeypatch):
    """A variant that publishes the batch's exact size is caught by the same comparison."""
    coupling = Coupling()
    coupling.install(monkeypatch)
    original = stream_module.Stream._release

    def leaky(self, counters, step, n_synthetic, state):
        release = original(self, counters, step, n_synthetic, state)
        release.params["records"] = int(self._exact)
        return release

    original_increment = stream_module.Stream._increment

    def counting(self, batch):
        increment = original_increment(self, batch)
        self._exact = increment[1]
        return increment
    monkeypatch.setattr(stream_module.Stream, "_release", leaky)
    monkeypatch.setattr(stream_module.Stream, "_increment", counting)
    results = []
    for world in (0, 1):
        coupling.start(world)
        folder = tmp_path / f"w{world}"
        folder.mkdir()
        results.append(_api_channels(folder, _batches(extra=world == 1)))
    differing = [step for step, (a, b) in enumerate(zip(*results, strict=True)) if a["params"] != b["params"]]
    assert differing == [CHANGED - 1]
