"""Every mechanism states its ledger before it runs: its privacy map (``MechanismSpec.privacy_map``), read from
public inputs only, as an OpenDP measurement's privacy map is.

The release path (:func:`privsyn_core.engine.pipeline.run_sequence`, both in memory and on Dask) computes the map
after the public count and before the mechanism draws, requires the count's stage and the map to sum to epsilon,
and refuses a run whose ledger differs from the map; these tests check that every registered mechanism's map is
the ledger its run returns, on two tables with the same public inputs, and that the path refuses a mechanism whose
ledger differs from its map or whose map does not sum to epsilon.  Nothing here is statistical.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any

import numpy as np
import pandas as pd
import pytest

import privsyn_core as ps
from privsyn_core import registry
from privsyn_core.engine import pipeline, release
from privsyn_core.mechanisms.base import spec as declared
from privsyn_core.mechanisms.base.rows import RowPlan
from privsyn_core.mechanisms.base.stages import EXACT_N, CellCounts, Stages
from privsyn_core.mechanisms.peers import opendp_support as peers
from privsyn_core.privacy import budget
from privsyn_core.privacy.accounting import ledger_total, split_epsilon
from privsyn_core.result import MechanismOutput

EPSILON = 0.9
N = 120
CASES = [(spec.name, relation) for spec in ps.list_mechanisms() for relation in spec.neighbouring]


def _tables(spec: Any) -> tuple[pd.DataFrame, pd.DataFrame, dict]:
    """Two tables of ``N`` rows on one public schema (one column for a mechanism that takes one, else 3), far
    apart in distribution: a ledger chosen from the data would differ between them."""
    d = 1 if spec.max_dim == 1 else 3
    rng = np.random.default_rng(5)
    names = [f"x{i}" for i in range(d)]
    if spec.data_kind == "boolean":
        schema = {"columns": [{"name": c, "kind": "numeric", "lo": 0, "hi": 1, "integer": True} for c in names]}
        spread, clustered = rng.integers(0, 2, (N, d)), np.zeros((N, d), dtype=np.int64)
        clustered[: N // 10] = 1
    else:
        schema = {"columns": [{"name": c, "kind": "numeric", "lo": 0.0, "hi": 1.0} for c in names]}
        spread, clustered = rng.random((N, d)), 0.05 * rng.random((N, d))
    return pd.DataFrame(spread, columns=names), pd.DataFrame(clustered, columns=names), schema


def _opendp_stand_in(codes, sizes, epsilon, algorithm, neighbouring, rows, plan) -> np.ndarray:
    """OpenDP's release replaced by uniform keys (its runs take tens of seconds; the ledger is ours)."""
    return np.floor(np.random.default_rng(3).random((rows or 50, len(sizes))) * np.asarray(sizes))


@pytest.fixture
def stated(monkeypatch) -> list:
    """The ledgers the release path's privacy map stated, in order (the real :func:`planned_ledger`, recorded)."""
    plans: list = []
    planned = pipeline.planned_ledger

    def recorded(*args: Any) -> Any:
        plans.append(planned(*args))
        return plans[-1]

    monkeypatch.setattr(pipeline, "planned_ledger", recorded)
    monkeypatch.setattr(peers, "release_with_opendp", _opendp_stand_in)
    return plans


@pytest.mark.parametrize(("name", "relation"), CASES)
def test_the_privacy_map_states_the_ledger_the_run_returns(stated, name, relation):
    """With the public count drawn (add/remove) or ``n`` (replace): the map is the run's ledger after the count's
    stage, and the whole sums to epsilon exactly for a private mechanism."""
    spec = ps.get_mechanism(name)
    table, _, schema = _tables(spec)
    result = ps.synthesize(table, name, EPSILON, schema=schema, neighbouring=relation, rng=1)
    (plan,) = stated
    count_stages = result.ledger[:len(result.ledger) - len(plan)]
    assert result.ledger[len(count_stages):] == plan and len(count_stages) <= 1
    assert all(stage.startswith("record count") for stage, _ in count_stages)
    if spec.is_private:
        assert math.fsum(e for _, e in result.ledger) == EPSILON == result.epsilon
    else:
        assert plan and all(e == math.inf for _, e in plan)


@pytest.mark.parametrize(("name", "relation"), CASES)
def test_the_ledger_is_the_same_on_tables_with_the_same_public_inputs(stated, name, relation):
    """Two tables far apart, the same public inputs (``public_n`` under add/remove): one plan, one ledger."""
    spec = ps.get_mechanism(name)
    spread, clustered, schema = _tables(spec)
    public_n = N if relation == "add_remove" else None
    ledgers = [ps.synthesize(t, name, EPSILON, schema=schema, neighbouring=relation, public_n=public_n, rng=2).ledger
               for t in (spread, clustered)]
    assert ledgers[0] == ledgers[1] == stated[0] == stated[1]


# -- the release path refuses a ledger its map did not state ---------------------------------------------------
def _layout(n: int | None, d: int, epsilon: float, neighbouring: str, params: dict[str, Any]) -> int:
    return 2


def _counts(unit: np.ndarray, k: int) -> CellCounts:
    return CellCounts.from_ids(np.zeros(len(unit), dtype=np.int64))


def _data_dependent_release(counts: CellCounts, n: int | None, d: int, epsilon: float, *, neighbouring: str,
                            n_synthetic: int | None, rng: np.random.Generator, layout: int,
                            params: dict[str, Any]) -> tuple[MechanismOutput, RowPlan]:
    """A release whose ledger's stages follow the data (a split chosen by a true count): the bug the map catches."""
    share = 0.25 if counts.total > 100 else 0.75
    out = MechanismOutput(unit=np.full((1, d), 0.5), weights=np.ones(1),
                          ledger=[("first pass", share * epsilon), ("second pass", epsilon - share * epsilon)])
    return out, RowPlan.from_counts(np.array([5]), np.zeros((1, d)), np.ones((1, d)), sample="center", rng=rng)


STATED_SPLIT = [("first pass", 0.5), ("second pass", 0.5)]


@pytest.fixture
def throwaway(monkeypatch) -> dict[str, int]:
    """Registers, for one test, ``ledger_follows_data``: a staged mechanism whose release picks its split from a
    count, while its map states an even split; and ``map_short_of_epsilon``, whose map states half of epsilon.
    Returns how often each ran."""
    registry.list_mechanisms()
    monkeypatch.setattr(declared, "_REGISTRY", dict(declared._REGISTRY))
    runs = {"ledger_follows_data": 0, "map_short_of_epsilon": 0}

    def counted(name: str, release: Any) -> Any:
        def run(*args: Any, **kwargs: Any) -> Any:
            runs[name] += 1
            return release(*args, **kwargs)
        return run

    fields = {"title": "t", "paper": "test", "data_kind": "continuous", "neighbouring": ("replace", "add_remove"),
              "is_private": True, "params": {}, "guarantee": "g", "description": "test only", "released": ()}
    declared.register_staged(
        "ledger_follows_data", Stages(_layout, _counts, counted("ledger_follows_data", _data_dependent_release)),
        privacy_map=lambda epsilon, neighbouring, params, n, d: [(s, f * epsilon) for s, f in STATED_SPLIT],
        **fields)
    declared.register_staged(
        "map_short_of_epsilon", Stages(_layout, _counts, counted("map_short_of_epsilon", _data_dependent_release)),
        privacy_map=lambda epsilon, neighbouring, params, n, d: [("first pass", epsilon / 2)], **fields)
    return runs


SCHEMA = {"columns": [{"name": "a", "kind": "numeric", "lo": 0.0, "hi": 1.0}]}


def test_a_ledger_chosen_from_the_data_is_refused_after_the_run_and_stays_counted(throwaway, tmp_path):
    small, large = pd.DataFrame({"a": np.linspace(0, 1, 50)}), pd.DataFrame({"a": np.linspace(0, 1, 150)})
    ledger = budget.PrivacyLedger.create(tmp_path / "ledger.sqlite")
    for table in (small, large):  # the stated split is even; the run spends 3/4 or 1/4 first, as the count says
        with pytest.raises(RuntimeError, match="other than the one its privacy map stated"):
            ps.synthesize(table, "ledger_follows_data", 1.0, schema=SCHEMA, ledger=ledger, dataset="t")
    assert throwaway["ledger_follows_data"] == 2
    assert ledger.spent("t") == 2.0, "a refused run keeps its reservation"


def test_a_layout_read_off_the_exact_n_is_refused(monkeypatch):
    """PMM's depth read off the exact ``n`` under add/remove (the leak ``tests/test_release_surface.py`` detects by
    comparing neighbours) spends on another number of levels than its map states from the public count."""
    run = release.run_on_array
    monkeypatch.setattr(release, "run_on_array", lambda request, unit, size, params, rng: run(
        request, unit, dataclasses.replace(size, value=EXACT_N), params, rng))
    table = pd.DataFrame({"a": np.linspace(0, 1, 512)})  # paper depth floor(log2(eps n)): 9 here, 8 at n = 256
    with pytest.raises(RuntimeError, match="its privacy map stated"):
        ps.synthesize(table, "pmm", 1.0, schema=SCHEMA, neighbouring="add_remove", public_n=256)


def test_a_map_that_does_not_sum_to_epsilon_is_refused_before_the_mechanism_runs(throwaway):
    for relation in ("replace", "add_remove"):
        with pytest.raises(RuntimeError, match="ledger sums to"):
            ps.synthesize(pd.DataFrame({"a": np.linspace(0, 1, 50)}), "map_short_of_epsilon", 1.0, schema=SCHEMA,
                          neighbouring=relation)
    assert throwaway["map_short_of_epsilon"] == 0


def test_the_dask_path_refuses_a_ledger_its_map_did_not_state(throwaway):
    dask = pytest.importorskip("dask", reason="the dask extra is not installed")
    dd = pytest.importorskip("dask.dataframe", reason="the dask extra is not installed")
    frame = dd.from_pandas(pd.DataFrame({"a": np.linspace(0, 1, 150)}), npartitions=3)
    with dask.config.set(scheduler="synchronous"), pytest.raises(RuntimeError, match="its privacy map stated"):
        ps.synthesize(frame, "ledger_follows_data", 1.0, schema=SCHEMA)
    assert throwaway["ledger_follows_data"] == 1


def test_registering_without_a_privacy_map_is_refused():
    with pytest.raises(RuntimeError, match="privacy_map"):
        declared.register("no_map", title="t", paper="p", data_kind="continuous", neighbouring=("replace",),
                          is_private=True, params={}, guarantee="g", description="d", released=())(lambda: None)


def test_a_split_of_the_rest_composes_exactly_with_the_count_stage():
    """The pipeline's count stage ``epsilon_n`` and a mechanism's stages split from ``epsilon - epsilon_n``
    (:func:`~privsyn_core.privacy.accounting.split_epsilon`) sum exactly to epsilon: the split's exact sum is off a
    rounding tie.  Fixed cases (seeded); a split whose exact sum may sit on a tie misses on about 1.5% of them."""
    rng = np.random.default_rng(11)
    for _ in range(2000):
        epsilon = float(rng.choice([0.9, 0.3, 1.0, 7.77, 1e-3, rng.uniform(0.01, 10.0)]))
        rest = epsilon - pipeline.SIZE_SHARE * epsilon
        fractions = rng.uniform(0.01, 1.0, rng.integers(1, 10))
        stages = split_epsilon(rest, [(str(j), float(f)) for j, f in enumerate(fractions)])
        assert ledger_total(stages) == rest and ledger_total([("n", epsilon - rest), *stages]) == epsilon
