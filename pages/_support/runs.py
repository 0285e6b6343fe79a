"""Runs and their metrics, cached by a run's JSON key (never by a DataFrame, which Streamlit hashes from a
sample above 50k rows), each recorded in the privacy ledger by the library's release path.

A run is kept as the object itself, not pickled (``st.cache_data``): a PMM result at 10^5 rows pickles to
12 MB (its tree diagnostics), which cost 0.14 s to store and 0.02 s to copy back on every read, a third of an
epsilon redraw.  The kept runs are bounded in bytes, not in entries (:data:`RUNS`: ``PRIVSYN_RUN_CACHE_MB``
megabytes, default :data:`RUN_CACHE_MB`, least recently used out first; a run larger than the whole budget is
returned and not kept): a run at the row cap holds hundreds of megabytes.  The cached result is shared by the
sessions that make the same run, so its arrays are made read-only (:func:`_frozen`): nothing may change a
result in place.
"""

from __future__ import annotations

import json
from typing import Any

import numpy as np
import pandas as pd
import streamlit as st

import privsyn_core as ps
from privsyn_core.api import count_replay
from privsyn_core.reporting import report

from . import ledger as store, shared, state, table_cache
from .data_state import columns, data_id, frame, ledger_id, real_of
from .schema_state import schema
from .state import release_mode


def run_key(mechanism: str, epsilon: float, params: dict, neighbouring: str, seed: int | None,
            n_synthetic: int | None) -> dict[str, Any]:
    """Everything that determines a run's output."""
    return {"sha256": data_id(), "columns": columns(), "schema": schema().to_dict(),
            "mechanism": mechanism, "params": params, "epsilon": float(epsilon), "neighbouring": neighbouring,
            "seed": seed, "n_synthetic": n_synthetic}


RUN_CACHE_ENV = "PRIVSYN_RUN_CACHE_MB"
#: Default budget of the kept runs, in megabytes (the server's target is < 1 GB with 20 sessions).
RUN_CACHE_MB = 128


def result_bytes(value: Any) -> int:
    """Bytes held by a result's arrays and tables (its synthetic table, encodings, weights and diagnostics)."""
    if isinstance(value, ps.SynthResult):
        return result_bytes([value.data, value.unit, value.unit_rows, value.weights, value.diagnostics])
    if isinstance(value, np.ndarray):
        return int(value.nbytes)
    if isinstance(value, pd.DataFrame):
        return table_cache.table_bytes(value)
    if isinstance(value, dict):
        return sum(result_bytes(v) for v in value.values())
    if isinstance(value, (list, tuple)):
        return sum(result_bytes(v) for v in value)
    return 0


RUNS: table_cache.BoundedCache[ps.SynthResult] = table_cache.BoundedCache(result_bytes, env=RUN_CACHE_ENV,
                                                                          default_mb=RUN_CACHE_MB)


def _cached_run(key: dict[str, Any], arguments: dict[str, Any]) -> ps.SynthResult:
    """The teaching run of ``key``: kept in :data:`RUNS` when it fits its budget.  A kept run is counted in the
    ledger again as the library counts a replay (:func:`privsyn_core.api.count_replay`: free when the seeded run
    is in this dataset's ledger already)."""
    key_json = json.dumps(key, sort_keys=True)
    found = RUNS.get(key_json)
    if found is not None:
        count_replay(frame(), key["mechanism"], key["epsilon"], rng=key["seed"], **arguments)
        return found
    result = _frozen(ps.synthesize(frame(), key["mechanism"], key["epsilon"], rng=key["seed"], **arguments))
    RUNS.keep_if_fits(key_json, result)
    return result


def _frozen(result: ps.SynthResult) -> ps.SynthResult:
    """``result`` with its arrays (and the synthetic table's columns) read-only, so sessions sharing it cannot
    change it in place (pandas copy-on-write already gives every derived table its own columns)."""
    for value in (result.unit, result.unit_rows, result.weights, *result.diagnostics.values()):
        if isinstance(value, np.ndarray):
            value.flags.writeable = False
    return result


def execute(key: dict[str, Any]) -> ps.SynthResult:
    """Run through the library's release path (:func:`privsyn_core.synthesize` with the app's ledger and the
    dataset's identity, :func:`pages._support.data_state.ledger_id`): the library checks the input, then reserves
    the epsilon in one transaction that checks the budget, then draws; a run it refuses before any noise costs
    nothing, a run that fails once started stays counted.

    Release mode: a fresh secure release with the library's ``release_mode`` (no value of the data is refused or
    quoted; out-of-domain values follow the declared rule the release states).  Teaching mode: cached
    (:func:`_cached_run`).
    """
    arguments = {"schema": key["schema"], "neighbouring": key["neighbouring"], "n_synthetic": key["n_synthetic"],
                 "ledger": store.store(), "dataset": ledger_id(), **key["params"]}
    if release_mode():
        return ps.synthesize(frame(), key["mechanism"], key["epsilon"], rng=state.release_rng(), release_mode=True,
                             **arguments)
    return _cached_run(key, arguments)


@st.cache_data(max_entries=24, show_spinner="Computing the metrics on the real data (not private)...")
def evaluation(key_json: str, _real: pd.DataFrame, _synthetic: pd.DataFrame, schema_json: str) -> dict:
    return report.evaluate_subsampled(_real, _synthetic, ps.Schema.from_dict(json.loads(schema_json)))


@st.cache_data(max_entries=24, show_spinner="Training a model on the synthetic and one on the real data (not "
                                            "private)...")
def with_tstr(key_json: str, _real: pd.DataFrame, _synthetic: pd.DataFrame, schema_json: str, target: str) -> dict:
    return report.with_tstr(evaluation(key_json, _real, _synthetic, schema_json), _real, _synthetic,
                            ps.Schema.from_dict(json.loads(schema_json)), target)


def evaluate_result(result: ps.SynthResult, key: dict) -> dict:
    """The metrics of a run (teaching mode only), cached by the run's key; with a TSTR target, its entry is cached
    by the key and the target on top of them, so changing the target computes that entry alone."""
    target = shared.tstr_target()
    target = target if target in [c["name"] for c in result.schema["columns"]] else None
    arguments = (json.dumps(key, sort_keys=True), real_of(result), result.data, json.dumps(result.schema))
    return evaluation(*arguments) if target is None else with_tstr(*arguments, target)
