"""The Compare page's logic without Streamlit: metrics in plain words, several runs side by side, honest ranks.

* :func:`metric_table`: every metric of :func:`privsyn_core.evaluation.scorecard.evaluate` with "lower/higher is
  better" (as :data:`~privsyn_core.evaluation.scorecard.METRICS` declares it), its interval and its real-vs-real
  floor (with the floor's interval), and where the value stands against it;
* :func:`run_many`: one run per mechanism at the same epsilon and seed (the caller's ``execute`` records each
  in the ledger), each with its evaluation;
* :func:`runs_table`: one row per run with epsilon, relation, dp_valid and a clear "NOT private" mark;
* :func:`ranking`: the ranks of :func:`privsyn_core.evaluation.scorecard.rank_runs` among the *private* runs (intervals
  that overlap tie; runs without a guarantee are listed apart, never ranked);
* :func:`comparison_html`: one small self-contained HTML report with every run.

Everything here reads the real data only through the evaluations the caller passes (teaching mode).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from html import escape
from typing import Any

import numpy as np
import pandas as pd

import privsyn_core as ps
from privsyn_core.evaluation.scorecard import METRICS, MetricInfo, rank_runs
from privsyn_core.reporting import plot_data, report, svg_charts, words
from privsyn_core.reporting.stakeholder import REAL_DATA_BANNER

#: Metrics whose evaluation carries a sampling interval, so runs can be ranked on them honestly (in the order of
#: the declaration: the most telling first).
RANKABLE = tuple(name for name, info in METRICS.items() if info.interval)


def info(metric: str) -> MetricInfo:
    """The declaration of ``metric`` (a dotted metrics-table name: its first part); one of its own for a name the
    evaluation does not declare (lower is better)."""
    return METRICS.get(metric.split(".")[0]) or MetricInfo(metric, "lower", "", "")


def better(metric: str) -> str:
    """``"lower"`` or ``"higher"``: which direction is better for ``metric`` (a dotted metrics-table name)."""
    return info(metric).better


def _number(value: Any) -> float:
    try:
        value = float(value)
    except (TypeError, ValueError):
        return math.nan
    return value


def _fmt(value: float) -> str:
    return "-" if not math.isfinite(value) else f"{value:.4g}"


def _interval(low: float, high: float, what: str) -> str:
    if math.isfinite(low) and math.isfinite(high):
        return f"[{_fmt(low)}, {_fmt(high)}]"
    return what


def _standing(row: dict, direction: str) -> str:
    """Where a metric's value stands against its real-vs-real floor.

    *At the floor* only when the value's whole 95% interval lies within the floor's: an interval that merely
    overlaps the floor's (a wide one, say) shows no such closeness, and the value is compared with the floor, the
    overlap named.
    """
    value, low, high = row["value"], row["low"], row["high"]
    floor, floor_low, floor_high = row["floor"], row["floor_low"], row["floor_high"]
    if not math.isfinite(floor):
        return "no floor"
    intervals = all(math.isfinite(v) for v in (low, high, floor_low, floor_high))
    if intervals and floor_low <= low and high <= floor_high:
        return "at the floor: as close as real data to itself"
    if value == floor:
        return "equal to the floor"
    worse = value > floor if direction == "lower" else value < floor
    standing = "worse than the floor" if worse else "better than the floor (check the coverage)"
    overlap = intervals and low <= floor_high and floor_low <= high
    return f"{standing}; the intervals overlap" if overlap else standing


def metric_table(evaluation: dict[str, Any]) -> pd.DataFrame:
    """One row per metric: ``key, metric, better, value, low, high, floor, floor_low, floor_high, compared
    with the floor, meaning`` (numbers as floats, NaN where there are none)."""
    rows = []
    for entry in report.metrics_table(evaluation).to_dict("records"):
        key = str(entry["metric"])
        head = key.split(".")[0]
        declared = info(head)
        row = {"key": key, "metric": declared.label + key[len(head):], "better": declared.better,
               "value": _number(entry["value"]), "low": _number(entry["low"]), "high": _number(entry["high"]),
               "floor": _number(entry["real-vs-real floor"]), "floor_low": _number(entry["floor low"]),
               "floor_high": _number(entry["floor high"]), "meaning": declared.meaning}
        if head == "tstr" and isinstance(evaluation.get("tstr"), dict):
            tstr = evaluation["tstr"]
            row["floor"] = _number((tstr.get("train_on_real") or {}).get(tstr.get("score")))
        row["compared with the floor"] = _standing(row, declared.better)
        rows.append(row)
    return pd.DataFrame(rows, columns=["key", "metric", "better", "value", "low", "high", "floor", "floor_low",
                                       "floor_high", "compared with the floor", "meaning"])


def shown(table: pd.DataFrame) -> pd.DataFrame:
    """:func:`metric_table` as the page shows it: value with its 95% interval, floor with its interval."""
    no_interval = {"coverage": "exact count (no interval)", "tstr": "one split (no interval)"}
    return pd.DataFrame({
        "metric": table["metric"],
        "better": table["better"] + " is better",
        "value": [_fmt(v) for v in table["value"]],
        "95% interval": [_interval(lo, hi, no_interval.get(k.split(".")[0], "-"))
                         for k, lo, hi in zip(table["key"], table["low"], table["high"], strict=True)],
        "real-vs-real floor": [_fmt(v) for v in table["floor"]],
        "floor interval": [_interval(lo, hi, "-") for lo, hi in zip(table["floor_low"], table["floor_high"],
                                                                     strict=True)],
        "compared with the floor": table["compared with the floor"],
    })


# -- several runs ------------------------------------------------------------------------------
def compare_key(key: dict, spec: ps.MechanismSpec) -> dict:
    """The run of ``spec`` beside the run ``key``: same data, schema, epsilon, seed and size; its own default
    parameters (the run ``key`` keeps its own) and the same relation, which is never changed: a mechanism not
    calibrated for it is not run (a :class:`~privsyn_core.errors.ParameterError`, an error line of :func:`run_many`).
    """
    if key["neighbouring"] not in spec.neighbouring:
        raise ps.ParameterError(f"calibrated only for neighbours that differ by "
                                f"{' or '.join(words.relation(r) for r in spec.neighbouring)}, not run at the chosen "
                                "relation")
    params = key["params"] if spec.name == key["mechanism"] else {k: p.default for k, p in spec.params.items()}
    return {**key, "mechanism": spec.name, "params": params}


def run_many(names: list[str], key: dict, *, execute: Callable[[dict], ps.SynthResult],
             evaluate: Callable[[ps.SynthResult, dict], dict],
             progress: Callable[[float, str], object] = lambda share, text: None) -> dict[str, Any]:
    """Run each mechanism of ``names`` beside the run ``key`` and evaluate it.

    Returns ``{"epsilon", "runs": {name: {"key", "result", "evaluation"}}, "errors": [one line each]}``; a
    mechanism that cannot run (wrong kind of data, budget exceeded) is an error line, the others still run.
    """
    runs, errors = {}, []
    for i, name in enumerate(names):
        progress(i / max(len(names), 1), f"running {name}")
        try:
            run_key = compare_key(key, ps.get_mechanism(name))
            result = execute(run_key)
            runs[name] = {"key": run_key, "result": result, "evaluation": evaluate(result, run_key)}
        except ps.PrivsynError as exc:
            errors.append(f"{name}: {str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__}")
    progress(1.0, "done")
    return {"epsilon": float(key["epsilon"]), "runs": runs, "errors": errors}


def is_private(result: ps.SynthResult) -> bool:
    """A private release: a private mechanism on a public domain (``dp_valid``)."""
    return ps.get_mechanism(result.mechanism).is_private and bool(result.dp_valid)


def runs_table(runs: dict[str, dict]) -> pd.DataFrame:
    """One row per run: epsilon, relation, dp_valid, the privacy mark, rows and warnings."""
    rows = {}
    for name, run in runs.items():
        result = run["result"]
        spec = ps.get_mechanism(result.mechanism)
        rows[name] = {
            "privacy": "private" if is_private(result) else "NOT PRIVATE",
            "epsilon": result.epsilon if is_private(result) else math.nan,
            "neighbours differ by": words.relation(result.neighbouring),
            "dp_valid": bool(result.dp_valid),
            "guarantee": words.guarantee(spec.is_private, result.dp_valid),
            "synthetic rows": len(result.data),
            "warnings": len(result.warnings),
        }
    return pd.DataFrame.from_dict(rows, orient="index")


def long_metrics(runs: dict[str, dict]) -> pd.DataFrame:
    """Every run's :func:`metric_table`, stacked with a ``run`` column."""
    tables = [metric_table(run["evaluation"]).assign(run=name) for name, run in runs.items()]
    return pd.concat(tables, ignore_index=True) if tables else pd.DataFrame()


def wide_metrics(runs: dict[str, dict]) -> pd.DataFrame:
    """Metrics (rows) by run (columns) as ``value [low, high]``, with "better" and the floor beside them."""
    long = long_metrics(runs)
    if long.empty:
        return long
    long["cell"] = [f"{_fmt(v)} {_interval(lo, hi, '')}".strip()
                    for v, lo, hi in zip(long["value"], long["low"], long["high"], strict=True)]
    wide = long.pivot(index="metric", columns="run", values="cell")[list(runs)]
    first = long.drop_duplicates("metric").set_index("metric")
    floors = long.groupby("metric")["floor"].first()
    wide.insert(0, "better", first["better"].reindex(wide.index) + " is better")
    wide["real-vs-real floor"] = [_fmt(v) for v in floors.reindex(wide.index)]
    order = list(dict.fromkeys(long["metric"]))
    return wide.reindex(order)


def ranking(runs: dict[str, dict], metric: str) -> tuple[pd.DataFrame, pd.DataFrame, tuple[float, float, float]]:
    """Ranks of the private runs on ``metric`` (ties where intervals overlap), the non-private runs apart, and the
    floor ``(value, low, high)`` of the first run that has one.

    Raises
    ------
    ParameterError
        When a private run has no interval for ``metric`` (it cannot be ranked honestly).
    """
    direction = better(metric)
    entries = {name: run["evaluation"][metric] for name, run in runs.items() if metric in run["evaluation"]}
    private = {n: e for n, e in entries.items() if is_private(runs[n]["result"])}
    ranked = rank_runs(private, higher_is_better=direction == "higher")
    others = pd.DataFrame([{"run": n, "value": _number(e.get("value")), "low": _number(e.get("low")),
                            "high": _number(e.get("high"))} for n, e in entries.items() if n not in private],
                          columns=["run", "value", "low", "high"])
    floor = next(((_number(e.get("floor")), _number(e.get("floor_low")), _number(e.get("floor_high")))
                  for e in entries.values() if math.isfinite(_number(e.get("floor")))), (math.nan,) * 3)
    return ranked, others, floor


def first_ranked(runs: dict[str, dict], metric: str) -> str | None:
    """The private run ranked first on ``metric`` (the first listed of a tie), or ``None`` when none can be ranked."""
    try:
        ranked = ranking(runs, metric)[0]
    except ps.PrivsynError:
        return None
    return str(ranked.sort_values("rank", kind="stable")["run"].iloc[0]) if len(ranked) else None


def ranking_words(ranked: pd.DataFrame) -> list[str]:
    """One sentence per rank group: who is tied, in words."""
    out = []
    for rank, group in ranked.groupby("rank", sort=True):
        names = ", ".join(str(r) for r in group["run"])
        out.append(f"rank {rank}: {names}" + (" (tied: their intervals overlap, so they are not ordered)"
                                              if len(group) > 1 else ""))
    return out


# -- the comparison report ---------------------------------------------------------------------
STYLE = ("body{font-family:sans-serif;max-width:64em;margin:2em auto;padding:0 1em;color:#222}"
         ".first{border:2px solid #08519c;border-radius:6px;padding:1em 1.5em;background:#f7fbff}"
         ".figs svg{margin:0 1em 1em 0}table{border-collapse:collapse;margin:0.5em 0}"
         "td,th{border:1px solid #ccc;padding:2px 6px;text-align:right}.np{color:#b30000;font-weight:bold}"
         ".banner{border:3px solid #b30000;background:#fff0f0;color:#800;padding:0.8em 1.2em;font-weight:bold;"
         "border-radius:6px;margin-bottom:1em}")
COLOURS = ("#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b", "#e377c2", "#17becf", "#bcbd22", "#7f7f7f")
BINS = 20


def _shares(values: pd.Series, column: dict) -> tuple[list[str], np.ndarray]:
    if column["kind"] == "categorical":
        labels = [str(c) for c in column["categories"]]
        counts = values.astype(str).value_counts().reindex(labels, fill_value=0).to_numpy(float)
    else:
        edges = np.linspace(column["lo"], column["hi"], BINS + 1)
        counts, _ = np.histogram(np.clip(values.to_numpy(float), column["lo"], column["hi"]), bins=edges)
        labels = [f"{e:.4g}" for e in edges[:-1]]
    total = counts.sum()
    return labels, counts / total if total else counts


def comparison_html(*, data_name: str, runs: dict[str, dict], tables: dict[str, pd.DataFrame],
                    real: pd.DataFrame | None, rank_metric: str) -> str:
    """The comparison report: one self-contained HTML page (inline SVG, no scripts) with every run.

    Parameters
    ----------
    data_name : str
    runs : dict
        :func:`run_many`'s ``runs``.
    tables : dict
        Run name -> its synthetic table as the user downloads it (integers, decimals).
    real : DataFrame, optional
        The real columns (teaching only), drawn beside the synthetic ones.
    rank_metric : str
        The metric the ranks are given for.
    """
    # the report names every method by its title, never by its registry key
    titles = {name: ps.get_mechanism(run["result"].mechanism).title for name, run in runs.items()}
    if len(set(titles.values())) == len(titles):
        runs = {titles[n]: run for n, run in runs.items()}
        tables = {titles[n]: table for n, table in tables.items()}
    names = list(runs)
    table = runs_table(runs).rename(columns={"dp_valid": "guarantee holds"})
    epsilons = ", ".join(sorted({f"{run['result'].epsilon:g}" for run in runs.values()}))
    first = [f"<p><b>What this compares:</b> {len(names)} synthetic version(s) of <i>{escape(data_name)}</i> made at "
             f"epsilon {escape(epsilons)}, one per "
             "method, on the same public domain.</p>"]
    not_private = [n for n in names if table.loc[n, "privacy"] != "private"]
    if not_private:
        first.append(f"<p class='np'>NOT private (no guarantee, never publish): {escape(', '.join(not_private))}"
                     "</p>")
    body = [f"<div class='banner'>{escape(REAL_DATA_BANNER)}</div>",
            f"<div class='first'><h1>Comparison of synthetic data methods</h1>{''.join(first)}</div>",
            "<h2>The runs</h2>" + table.to_html(border=0, na_rep="-", escape=True)]
    wide = wide_metrics(runs)
    if not wide.empty:
        body.append("<h2>How close each run is</h2><p>Each cell: value [95% interval]. The floor is the same metric "
                    "between two halves of the real data: the best any method can show at this size.</p>"
                    + wide.to_html(border=0, escape=True))
    try:
        ranked, others, _ = ranking(runs, rank_metric)
    except ps.PrivsynError as exc:
        body.append(f"<p>No ranking: {escape(str(exc))}</p>")
    else:
        declared = info(rank_metric)
        items = "".join(f"<li>{escape(line)}</li>" for line in ranking_words(ranked))
        body.append(f"<h2>Ranks on the {escape(declared.label)} ({declared.better} is better)</h2><p>Only private runs "
                    "are ranked; runs whose intervals overlap share a rank and are not ordered.</p><ul>" + items
                    + "</ul>"
                    + (f"<p>Not ranked (not private): {escape(', '.join(others['run']))}</p>" if len(others) else ""))
    schema = next(iter(runs.values()))["result"].schema if runs else {"columns": []}
    figs = []
    for column in schema["columns"]:
        series: dict[str, Any] = {}
        labels: list[str] = []
        if real is not None:
            labels, series["real"] = _shares(real[column["name"]], column)
        for name in names:
            labels, series[name] = _shares(tables[name][column["name"]], column)
        colours = (plot_data.REAL_COLOUR,) * (real is not None) + COLOURS
        unit = "category (public order)" if column["kind"] == "categorical" else "value (bins of the public range)"
        figs.append(svg_charts.svg_bars(labels, series, title=column["name"], colours=colours, x_label=unit,
                                        width=max(420, 115 * (len(series) + 1))))
    body.append("<h2>Each column</h2><p>Share of rows per category or bin of the public range.</p>"
                f"<div class='figs'>{''.join(figs)}</div>")
    methods = "".join(f"<li>{escape(n)}: {escape(ps.get_mechanism(r['result'].mechanism).title)}, "
                      f"{escape(ps.get_mechanism(r['result'].mechanism).citation)}</li>"
                      for n, r in runs.items())
    body.append(f"<h2>Methods</h2><ul>{methods}</ul>")
    return (f"<!DOCTYPE html><html><head><meta charset='utf-8'><title>Comparison: {escape(data_name)}</title>"
            f"<style>{STYLE}</style></head><body>{''.join(body)}</body></html>")
