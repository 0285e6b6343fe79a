"""Be the attacker (issue 28, item 8): the game's statistics are right, a private mechanism keeps the attacker at
its ceiling and the audit's bound at most its epsilon, bootstrap lets the attacker win (the detection case at the
same budget), and the Learn page plays it in teaching mode only."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from streamlit.testing.v1 import AppTest

import privsyn_core as ps
from privsyn_core.evaluation import attack_game as game

ASSETS = Path(__file__).resolve().parents[1] / "assets"
APP = str(ASSETS.parent / "app.py")


@pytest.fixture(scope="module")
def blobs():
    frame = pd.read_csv(ASSETS / "blobs.csv")
    return frame.iloc[:500], ps.Schema.from_dict(json.loads((ASSETS / "blobs.schema.json").read_text()))


def test_the_neighbours_differ_by_the_far_record_only(blobs):
    frame, schema = blobs
    base, added = game.neighbours(frame, schema, "add_remove")
    assert len(added) == len(base) + 1 and added.iloc[-1].tolist() == [c.hi for c in schema.columns]
    _, replaced = game.neighbours(frame, schema, "replace")
    assert len(replaced) == len(base) and (replaced.iloc[1:].to_numpy() == base.iloc[1:].to_numpy()).all()


def test_success_is_the_balanced_accuracy_and_the_best_threshold_is_found():
    played = game.Game("pmm", 1.0, "add_remove", np.array([0, 0, 1, 2]), np.array([1, 2, 3, 3]), 0.0)
    assert game.success(played, 1) == pytest.approx(0.5 * (1.0 + 0.5))
    assert game.best_attack(played) == (3.0, pytest.approx(0.5 * (0.5 + 1.0))) or game.best_attack(played)[1] >= 0.75
    assert game.dp_ceiling(1.0) == pytest.approx(np.e / (1 + np.e))


@pytest.mark.slow
def test_pmm_keeps_the_attacker_down_and_bootstrap_lets_it_win_at_the_same_budget(blobs):
    """The audit bound holds with probability >= 95% for a 1-DP mechanism (seeded: fixed outcome); bootstrap, which
    copies the target record into about 63% of its outputs, is caught far above epsilon 1."""
    frame, schema = blobs
    private = game.play(frame, schema, "pmm", 1.0, runs=200, seed=1)
    assert game.epsilon_lower(private) <= 1.0
    leaky = game.play(frame, schema, "bootstrap", 1.0, runs=200, seed=1)
    assert game.epsilon_lower(leaky) > 1.0 and game.best_attack(leaky)[1] > game.dp_ceiling(1.0)


def test_the_learn_page_plays_the_game_in_teaching_mode_only(monkeypatch):
    at = AppTest.from_file(APP, default_timeout=120).run()
    at.switch_page("pages/learn.py").run()
    at.select_slider(key="w_game_runs").set_value(40).run()
    next(b for b in at.button if b.label.startswith("Play")).click().run()
    assert not at.exception and not at.error
    labels = {m.label for m in at.metric}
    assert {"your success", "best attacker", "most any attacker can win", "epsilon the runs prove"} <= labels
    monkeypatch.setenv("PRIVSYN_RELEASE_ONLY", "1")
    locked = AppTest.from_file(APP, default_timeout=120).run()
    locked.switch_page("pages/learn.py").run()
    assert not [b for b in locked.button if b.label.startswith("Play")]
    assert any("attacker game reads the raw data" in i.value for i in locked.info)
