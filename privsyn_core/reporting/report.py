"""Run reports, evaluation helpers and the self-contained HTML stakeholder report (pure: no Streamlit).

* :func:`run_report` is the JSON the app offers for download: the release's metadata (schema,
  parameters, ledger), package versions and the ``python -m privsyn_core synth ...`` command
  (:func:`cli_command`); in teaching mode also a section of what was read off the raw data.
* :func:`metrics_table` flattens whatever :func:`privsyn_core.evaluation.scorecard.evaluate` returns; :func:`rank_table`
  ranks runs on one metric, tying runs whose intervals overlap.
* :func:`tradeoff_sweep` and :func:`theoretical_rate` feed the trade-off curve.
* :func:`html_report` writes one HTML file with plotly.js inlined, which opens offline.

Everything that reads the real data (metrics, floors, sweeps) is evaluation only: it is
not part of a private release, and the report says so.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import html
import json
import math
import platform
import shlex
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from importlib import metadata
from typing import Any

import numpy as np
import pandas as pd

from privsyn_core.api import synthesize
from privsyn_core.data.domain import Schema
from privsyn_core.data.json_values import jsonable, plain
from privsyn_core.evaluation.distances import w1
from privsyn_core.registry import get_mechanism
from privsyn_core.result import Release, SynthResult

#: Rows of each side given to the metrics; larger tables are subsampled (the metrics' cost grows with n).
EVAL_ROWS = 10_000
#: Rows per side of each exact W1 of the trade-off sweep and of its floor (exact W1's cost grows faster than
#: quadratically in the rows, so a sweep of many runs stays interactive at this size; benchmarks/bench_w1.py).
SWEEP_EVAL_ROWS = 500
PACKAGES = ("privsyn-core", "numpy", "scipy", "pandas", "pot", "plotly", "streamlit", "scikit-learn")


# -- run report and CLI reproduction -----------------------------------------------------------
def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def versions() -> dict[str, str]:
    """Installed versions of the packages a run depends on, and Python's (read once per process: reading the
    packages' metadata is slow next to a run the app shows)."""
    return dict(_versions())


@functools.cache
def _versions() -> dict[str, str]:
    out = {"python": platform.python_version()}
    for name in PACKAGES:
        try:
            out[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            out[name] = "not installed"
    if out["privsyn-core"] == "not installed":
        from privsyn_core._version import __version__
        out["privsyn-core"] = __version__
    return out


def cli_command(*, mechanism: str, epsilon: float, params: dict[str, Any], seed: int | None,
                neighbouring: str = "replace", n_synthetic: int | None = None, data_file: str = "data.csv",
                schema_file: str = "schema.json", output_file: str = "synthetic.csv") -> str:
    """The ``python -m privsyn_core synth`` command that repeats a run (the same rows only with an int seed)."""
    parts = ["python", "-m", "privsyn_core", "synth", data_file, output_file, "--mechanism", mechanism,
             "--epsilon", repr(float(epsilon)), "--schema", schema_file, "--neighbouring", neighbouring]
    if seed is not None:
        parts += ["--seed", str(seed)]
    if n_synthetic is not None:
        parts += ["--n-synthetic", str(int(n_synthetic))]
    for key, value in params.items():
        if value is not None:
            parts += ["--param", f"{key}={value}"]
    return " ".join(shlex.quote(p) for p in parts)


def cli_note(release: Release) -> str:
    """What repeating the report's command gives: the same rows (a seed, noise drawn by privsyn_core), the same
    post-processing only (a seed, noise drawn by an outside library's own generator), or nothing (no seed)."""
    if release.seed is None:
        return "the run drew from the secure generator: it cannot be replayed, by design"
    if release.noise_source is not None:
        return (f"{release.noise_source} drew the noise from its own generator, which a seed cannot replay: the same "
                "CSV, seed and versions give other rows")
    return "save 'schema' of this report as schema.json; the same CSV, seed and versions give the same rows"


def run_report(result: SynthResult, *, params: dict[str, Any], data_name: str, release_mode: bool,
               data_sha256: str | None = None, metrics: dict | None = None,
               extra_ledger: Sequence[dict] = ()) -> dict[str, Any]:
    """The downloadable JSON report of one run (see the module docstring).

    Its body is the release's metadata (:meth:`privsyn_core.Release.to_dict`) plus public context: the
    data file's name and columns, the parameters as the user gave them (``None`` = auto), the other
    spends on the same data (``extra_ledger``, e.g. DP bounds), package versions and the CLI command.
    In release mode that is all.  In teaching mode a ``"teaching"`` section adds what was read off
    the raw data (the file's SHA-256, metrics, timings, clipped values, every diagnostic parameter),
    labelled as not private.
    """
    release = result.release()
    report = release.to_dict()
    report.update({
        "created": datetime.now(UTC).isoformat(timespec="seconds"),
        "release_mode": release_mode,
        "data": {"name": data_name, "columns": [c["name"] for c in release.schema["columns"]]},
        "mechanism_params": {k: plain(v) for k, v in params.items()},
        "session_ledger": [{k: v for k, v in e.items() if k != "data" or not release_mode} for e in extra_ledger],
        "versions": versions(),
        "cli": cli_command(mechanism=release.mechanism, epsilon=release.epsilon if math.isfinite(release.epsilon)
                           else 1.0, params=params, seed=release.seed, neighbouring=release.neighbouring,
                           n_synthetic=release.params.get("n_synthetic"), data_file=data_name),
        "cli_note": cli_note(release),
    })
    if not release_mode:
        report["teaching"] = {
            "note": "computed from the raw data: NOT private, never publish this section",
            "data_sha256": data_sha256, "metrics": jsonable(metrics) if metrics is not None else None,
            "timings": result.timings, "clipped": result.clipped,
            "all_params": {k: jsonable(v) for k, v in result.params.items()},
            "warnings": list(result.diagnostics.get("teaching_warnings", [])),
        }
    return report


# -- evaluation helpers ------------------------------------------------------------------------
def schema_encode(df: pd.DataFrame, schema: dict | Schema) -> np.ndarray:
    """``df`` in the unit coordinates of ``schema`` (a :class:`Schema` or its dict)."""
    schema = Schema.from_dict(schema) if isinstance(schema, dict) else schema
    return schema.encode(df[schema.names])[0]


def subsample_frame(df: pd.DataFrame, max_rows: int = EVAL_ROWS, seed: int = 0) -> pd.DataFrame:
    """At most ``max_rows`` rows drawn without replacement with a fixed seed."""
    if len(df) <= max_rows:
        return df
    keep = np.sort(np.random.default_rng(seed).choice(len(df), max_rows, replace=False))
    return df.iloc[keep].reset_index(drop=True)


def evaluate_subsampled(real: pd.DataFrame, synthetic: pd.DataFrame, schema: Schema | None,
                        max_rows: int = EVAL_ROWS, target: str | None = None) -> dict[str, Any]:
    """:func:`privsyn_core.evaluation.scorecard.evaluate` reading at most ``max_rows`` rows of each side (stated in the
    result); ``target`` adds train-on-synthetic/test-on-real for that column."""
    from privsyn_core.evaluation.scorecard import evaluate

    out = dict(evaluate(real, synthetic, schema=schema, target=target, max_rows=max_rows))
    out["_subsample"] = {"real": min(len(real), max_rows), "synthetic": min(len(synthetic), max_rows),
                         "note": f"uniform subsamples of at most {max_rows} rows per side "
                                 f"(W1, sliced W1, MMD: {out['_about']['repeats']} repeats of "
                                 f"{out['_about']['subsample_rows']} rows per side)"}
    return out


def with_tstr(evaluation: dict[str, Any], real: pd.DataFrame, synthetic: pd.DataFrame, schema: Schema | None,
              target: str, max_rows: int = EVAL_ROWS) -> dict[str, Any]:
    """``evaluation`` (an :func:`evaluate_subsampled` result without a target) with the train-on-synthetic/
    test-on-real entry of ``target`` added, as ``evaluate_subsampled(..., target=target)`` would hold it (the same
    rows: :func:`privsyn_core.evaluation.scorecard.evaluate_tstr`): the other metrics need not be computed again
    when only the target changes."""
    from privsyn_core.evaluation.scorecard import METRICS, evaluate_tstr

    about = evaluation["_about"]
    return {**evaluation, "tstr": evaluate_tstr(real, synthetic, target, schema, max_rows=max_rows),
            "_about": {**about, "metrics": {**about["metrics"], "tstr": dataclasses.asdict(METRICS["tstr"])}}}


METRICS_COLUMNS = ["metric", "value", "low", "high", "real-vs-real floor", "floor low", "floor high", "details"]


def metrics_table(evaluation: dict[str, Any]) -> pd.DataFrame:
    """One row per scalar metric: ``metric, value, low, high, real-vs-real floor, floor low, floor high, details``.

    Entries that are ``{"value": ..., ...}`` give their interval (``low``, ``high``; NaN when the entry has
    none), their floor when one of ``floor``, ``real_vs_real``, ``baseline``, ``train_on_real`` is present (for
    TSTR the train-on-real score is the reference) with its interval (``floor_low``, ``floor_high``), and their
    other scalar items as details; nested dicts are flattened with dotted names; tables, lists and keys starting
    with ``_`` (bookkeeping) are left out (see the JSON report).
    """
    rows = []
    for name, entry in evaluation.items():
        if str(name).startswith("_"):
            continue
        rows.extend(_metric_rows(str(name), entry))
    return pd.DataFrame(rows, columns=METRICS_COLUMNS)


def rank_table(evaluations: dict[str, dict[str, Any]], metric: str = "w1", *,
               higher_is_better: bool = False) -> pd.DataFrame:
    """Rank runs (name -> :func:`privsyn_core.evaluation.scorecard.evaluate` output) on one metric; overlapping
    intervals tie.

    Wraps :func:`privsyn_core.evaluation.scorecard.rank_runs`: runs whose intervals overlap (directly or through a chain
    of overlaps) share a rank and are never ordered. Adds the floor and whether each run's interval overlaps the
    floor's (``at floor``: indistinguishable from real data at this resolution) and the coverage flags, because a
    collapsed output can have a small W1.
    """
    from privsyn_core.evaluation.scorecard import rank_runs

    table = rank_runs({name: ev[metric] for name, ev in evaluations.items()}, higher_is_better=higher_is_better)
    floors = {name: ev[metric] for name, ev in evaluations.items()}
    table["floor"] = [floors[r].get("floor", np.nan) for r in table["run"]]
    table["at floor"] = [bool(e.get("floor_high") is not None and e["low"] <= e["floor_high"])
                         for e in (floors[r] for r in table["run"])]
    table["coverage flags"] = [evaluations[r].get("coverage", {}).get("flags", "") for r in table["run"]]
    return table


_FLOOR_KEYS = ("floor", "real_vs_real", "baseline", "real_floor", "train_on_real")
_INTERVAL_KEYS = ("low", "high", "floor_low", "floor_high")


def _metric_rows(name: str, entry: Any) -> list[dict]:
    empty = {"low": None, "high": None, "floor low": None, "floor high": None}
    if _is_number(entry):
        return [{"metric": name, "value": float(entry), **empty, "real-vs-real floor": None, "details": ""}]
    if not isinstance(entry, dict):
        return []
    if "value" in entry and _is_number(entry["value"]):
        floor = next((_floor_value(entry[k]) for k in _FLOOR_KEYS if k in entry), None)
        details = ", ".join(f"{k}={_short(v)}" for k, v in entry.items()
                            if k != "value" and k not in _FLOOR_KEYS and k not in _INTERVAL_KEYS and _is_scalar(v))
        bounds = {column: float(entry[key]) if _is_number(entry.get(key)) else None
                  for column, key in (("low", "low"), ("high", "high"), ("floor low", "floor_low"),
                                      ("floor high", "floor_high"))}
        return [{"metric": name, "value": float(entry["value"]), **bounds, "real-vs-real floor": floor,
                 "details": details}]
    if any(_is_number(v) or isinstance(v, dict) for v in entry.values()):
        return [row for key, value in entry.items() for row in _metric_rows(f"{name}.{key}", value)]
    return []


def _floor_value(value: Any) -> float | None:
    if _is_number(value):
        return float(value)
    if isinstance(value, dict):
        numbers = [v for v in value.values() if _is_number(v)]
        if _is_number(value.get("value")):
            return float(value["value"])
        if len(numbers) == 1:
            return float(numbers[0])
    return None


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float, np.integer, np.floating)) and not isinstance(value, (bool, np.bool_))


def _is_scalar(value: Any) -> bool:
    return isinstance(value, (str, int, float, bool, np.generic)) or value is None


def _short(value: Any) -> str:
    return f"{value:.4g}" if _is_number(value) else str(value)


# -- trade-off sweep ---------------------------------------------------------------------------
def theoretical_rate(mechanism: str, epsilon: float, n: int, d: int) -> float | None:
    """The shape of a mechanism's expected-W1 bound (unspecified constant), as its registration
    declares it (``MechanismSpec.rate``), or None."""
    rate = get_mechanism(mechanism).rate
    return None if rate is None else float(rate(epsilon, n, d))


def tradeoff_sweep(frame: pd.DataFrame, schema: Schema, mechanisms: Sequence[str], epsilons: Sequence[float],
                   *, ns: Sequence[int] | None = None, seeds: Sequence[int] = (0, 1, 2),
                   neighbouring: str = "replace", eval_rows: int = SWEEP_EVAL_ROWS,
                   progress: Callable[[float, str], None] | None = None) -> pd.DataFrame:
    """W1 between real and synthetic data over a grid of epsilons, sizes (by subsampling) and seeds.

    Returns one row per run: ``mechanism, epsilon, n, seed, w1`` (chebyshev W1 in the unit
    cube between at most ``eval_rows`` rows of each side), plus ``floor``: W1 between two
    disjoint real subsamples of the same size, the real-vs-real noise floor.
    """
    ns = list(ns) if ns else [len(frame)]
    runs = [(m, e, n, s) for m in mechanisms for n in ns for e in epsilons for s in seeds]
    rows = []
    for i, (mechanism, epsilon, n, seed) in enumerate(runs):
        if progress is not None:
            progress(i / len(runs), f"{mechanism}, epsilon={epsilon:g}, n={n:,}, seed {seed}")
        part = subsample_frame(frame, n, seed)
        result = synthesize(part, mechanism, epsilon, schema=schema, neighbouring=neighbouring, rng=seed)
        real_unit, _ = schema.encode(part)
        synth_unit = result.unit_rows
        if synth_unit is None:
            raise RuntimeError(f"internal error: {mechanism} returned no encoded rows")
        distance = w1(_rows(real_unit, eval_rows, seed), _rows(synth_unit, eval_rows, seed + 1))
        rows.append({"mechanism": mechanism, "epsilon": float(epsilon), "n": int(n), "seed": int(seed), "w1": distance})
    out = pd.DataFrame(rows)
    floors = {n: real_floor(schema.encode(subsample_frame(frame, n, 0))[0], eval_rows) for n in ns}
    out["floor"] = out["n"].map(floors)
    if progress is not None:
        progress(1.0, "done")
    return out


def real_floor(unit: np.ndarray, max_rows: int = SWEEP_EVAL_ROWS, seed: int = 0) -> float:
    """W1 between two disjoint random halves of the real data (at most ``max_rows`` each)."""
    order = np.random.default_rng(seed).permutation(len(unit))
    half = min(len(unit) // 2, max_rows)
    if half < 1:
        return float("nan")
    return w1(unit[order[:half]], unit[order[half:2 * half]])


def summarise_sweep(sweep: pd.DataFrame, x: str, d: int) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Mean and std of W1 per (mechanism, x), and each mechanism's theoretical rate with its
    constant fitted to the means (least squares in log space): the theorems leave it unspecified."""
    summary = (sweep.groupby(["mechanism", x], sort=False)["w1"].agg(["mean", "std"]).fillna(0.0).reset_index())
    keys = ["epsilon", "n"]
    fixed = sweep.groupby(["mechanism", x], sort=False)[keys].first().reset_index(drop=True)
    summary[[k for k in keys if k != x]] = fixed[[k for k in keys if k != x]].to_numpy()
    rates = []
    for name, group in summary.groupby("mechanism", sort=False):
        shape = np.array([theoretical_rate(name, e, int(n), d) or np.nan
                          for e, n in zip(group["epsilon"], group["n"], strict=True)])
        if np.isnan(shape).any() or (group["mean"] <= 0).any():
            continue
        constant = float(np.exp(np.mean(np.log(group["mean"].to_numpy()) - np.log(shape))))
        rates.append(pd.DataFrame({"mechanism": name, x: group[x].to_numpy(), "rate": constant * shape}))
    return summary, (pd.concat(rates, ignore_index=True) if rates else pd.DataFrame(columns=["mechanism", x, "rate"]))


def _rows(unit: np.ndarray, max_rows: int, seed: int) -> np.ndarray:
    if len(unit) <= max_rows:
        return unit
    return unit[np.random.default_rng(seed).choice(len(unit), max_rows, replace=False)]


# -- HTML report -------------------------------------------------------------------------------
def html_report(*, title: str, run: dict[str, Any], ledger: Sequence[dict], figures: Sequence[tuple[str, Any]] = (),
                metrics: pd.DataFrame | None = None, tradeoff: Any | None = None,
                notes: Sequence[str] = ()) -> str:
    """One self-contained HTML page: plotly.js is inlined once, so it opens offline.

    Parameters
    ----------
    title : str
    run : dict
        The :func:`run_report` of the run (parameters, ledger, schema, CLI command).
    ledger : sequence of dict
        The session's privacy ledger (``label, epsilon, neighbouring, dp_valid``).  In release mode
        (``run["release_mode"]``) only the release's fields are shown and nothing from ``run["teaching"]``.
    figures : sequence of (caption, plotly Figure)
    metrics : DataFrame, optional
        :func:`metrics_table` output (omitted in release mode).
    tradeoff : plotly Figure, optional
    notes : sequence of str
        Warnings shown at the top (e.g. ``dp_valid = False``).
    """
    figures = list(figures) + ([("Privacy-utility trade-off", tradeoff)] if tradeoff is not None else [])
    parts = [f"<h1>{html.escape(title)}</h1>",
             f"<p>Generated {html.escape(run.get('created', ''))} by privsyn_core "
             f"{html.escape(str(run.get('versions', {}).get('privsyn-core', '')))}.</p>"]
    parts += [f'<p class="warn">{html.escape(n)}</p>' for n in notes]
    parts += [f'<p class="warn">{html.escape(w)}</p>' for w in run.get("warnings", [])]
    parts.append(_section("Run", _kv_table({
        "mechanism": run.get("mechanism"), "epsilon": run.get("epsilon"), "neighbouring": run.get("neighbouring"),
        "dp_valid": run.get("dp_valid"), "seed": run.get("params", {}).get("seed", "none (secure generator)"),
        "synthetic rows": run.get("n_synthetic"), "data": (run.get("data") or {}).get("name")})))
    parts.append(_section("Parameters", _kv_table({**run.get("mechanism_params", {}), **run.get("params", {})})))
    ledger = [{k: v for k, v in e.items() if k != "data" or not run.get("release_mode", True)} for e in ledger]
    parts.append(_section("Privacy ledger of this session",
                          _frame_html(pd.DataFrame(list(ledger)) if ledger else pd.DataFrame({"release": ["none"]}))
                          + "<p>Every release on the same data composes: the epsilons add up.</p>"))
    parts.append(_section("Mechanism ledger of this run",
                          _frame_html(pd.DataFrame(run.get("ledger", []), columns=["stage", "epsilon"]))))
    if metrics is not None and not run.get("release_mode", True):
        parts.append(_section("Utility against the real-vs-real floor (evaluation only: reads the real data)",
                              _frame_html(metrics)))
    for i, (caption, fig) in enumerate(figures):
        body = fig.to_html(full_html=False, include_plotlyjs=i == 0, config={"displaylogo": False})
        parts.append(_section(caption, body))
    schema_json = html.escape(json.dumps(run.get("schema"), indent=1))
    parts.append(_section("Schema (public domain)", f"<pre>{schema_json}</pre>"))
    parts.append(_section("Reproduce with the command line",
                          f"<pre>{html.escape(run.get('cli', ''))}</pre><p>{html.escape(run.get('cli_note', ''))}</p>"))
    parts.append(_section("Versions", _kv_table(run.get("versions", {}))))
    style = ("body{font-family:system-ui,sans-serif;max-width:1100px;margin:2em auto;padding:0 1em;color:#222}"
             "table{border-collapse:collapse;margin:.5em 0}td,th{border:1px solid #ccc;padding:3px 8px;text-align:left}"
             ".warn{background:#fee;border-left:4px solid #c00;padding:.5em}pre{background:#f6f6f6;padding:.5em;"
             "white-space:pre-wrap}")
    return (f"<!DOCTYPE html><html lang=\"en\"><head><meta charset=\"utf-8\"><title>{html.escape(title)}</title>"
            f"<style>{style}</style></head><body>{''.join(parts)}</body></html>")


def _section(heading: str, body: str) -> str:
    return f"<section><h2>{html.escape(heading)}</h2>{body}</section>"


def _kv_table(items: dict[str, Any]) -> str:
    rows = "".join(f"<tr><th>{html.escape(str(k))}</th><td>{html.escape(str(v))}</td></tr>" for k, v in items.items())
    return f"<table>{rows}</table>"


def _frame_html(df: pd.DataFrame) -> str:
    return df.to_html(index=False, escape=True, na_rep="", float_format=lambda v: f"{v:.6g}")
