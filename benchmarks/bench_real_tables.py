"""Every mechanism on its defaults on real mixed tables, against OpenDP's MST (issues 14 and 15).

Usage (from the repository root, with an interpreter that has privsyn_core's dependencies plus
``requirements-peers.txt``, ``sdmetrics``, ``statsmodels`` and ``palmerpenguins``)::

    PYTHONPATH=. python -m benchmarks.bench_real_tables                      # the whole grid, ours
    PYTHONPATH=. python -m benchmarks.bench_real_tables --systems opendp_mst \\
        --results benchmarks/peers/results_real_tables_mst.json               # MST (20-190 s a run)
    PYTHONPATH=. python -m benchmarks.bench_real_tables --psmm-timing          # psmm at 10^5, 10^6 rows
    PYTHONPATH=. python -m benchmarks.bench_real_tables --srw-scale            # srw W1: tight vs paper scale
    PYTHONPATH=. python -m benchmarks.bench_real_tables --report-only          # docs/tables/real_tables.md

Tables: the wide tables of :mod:`benchmarks.peers.real_tables` (statsmodels' randhie, fair, anes96, grunfeld and
palmerpenguins; 5-10 numeric and categorical columns, public bounds and categories set by hand from the codebooks,
never read off the data). Rows with a missing value are dropped; a seeded 70/30 split (seed 12345) gives the
private table every system sees and a real hold-out for train-on-synthetic/test-on-real that no system sees.

Runs: every registered private mechanism with default parameters, ``bootstrap`` as the non-private reference and
``opendp_mst`` (through privsyn_core's registry: 16 public bins per numeric column, the public categories, its null
cells filled within the public domain). Relation: add/remove one row wherever the mechanism supports it (that is
OpenDP's ``contributions=1``, so every system spends the same epsilon under the same relation), else replace-one
(``laplace_points``, ``microagg_dp``); no ``public_n``, so a mechanism that needs n spends part of epsilon on a noisy
count. Every system is asked for as many rows as the private table has (``n_synthetic``), so that every metric
compares samples of equal size; that output size is a convention of the benchmark, stated in the report.
``microagg_*`` run only on tables with at least two Boolean columns, on those columns alone.

Metrics per run (:func:`privsyn_core.evaluation.scorecard.evaluate`, real = the private table; real-vs-real floors on
the ``bootstrap`` reference runs, and every run on the floors' subsample size ``min(1000, n // 2)``): exact
W1 on repeated uniform subsamples (POT, Chebyshev cost in the unit cube of the schema) with its 95% interval, mean
1-way and 2-way TVD (resolution-robust: the mean over 16 public grids of 8, 13, 20 and 32 bins; results
written before that change used 20 bins per numeric column) and the correlation gap with bootstrap intervals,
the coverage flags (collapsed output, constant columns, missing categories), TSTR on the hold-out (random forest; the
table's target column), SDMetrics' QualityReport overall score (an independent evaluator; at most 2000 rows per
side, seeded) and the synthesis time. Results are written after every run (``--results``), keyed by
(table, system, epsilon, seed), so an interrupted grid keeps what it measured and ``--skip-done`` resumes it.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import signal
import time
import warnings
from pathlib import Path

import numpy as np
import pandas as pd

ROOT = Path(__file__).resolve().parents[1]
PEERS_DIR = ROOT / "benchmarks" / "peers"
DEFAULT_RESULTS = PEERS_DIR / "results_real_tables.json"
TIMING_RESULTS = PEERS_DIR / "results_psmm_timing.json"
SRW_RESULTS = PEERS_DIR / "results_srw_scale.json"
#: The full report (every epsilon, intervals, ranks, discussion): not committed. The short table per dataset goes to
#: ``docs/tables/real_tables.md``.
REPORT = ROOT / "test-output" / "real_tables.md"
SPLIT_SEED = 12345
HOLDOUT = 0.3
#: Our private mechanisms run on every table (microagg_* separately, on Boolean columns only).
OURS = ("pmm", "psmm", "srw_tsp", "kd_grid", "kd_adaptive", "dp_histogram", "laplace_points", "marginal_tree")
BOOLEAN_ONLY = ("microagg_dp", "microagg_anon")
REFERENCE = "bootstrap"
PEER = "opendp_mst"
SDMETRICS_ROWS = 2000


# ----------------------------------------------------------------------------------------------------- data
#: Tables of the grid: the wide tables of benchmarks/peers/real_tables.py, and the first 8 columns (codebook order)
#: of the two tables with 9-10 columns, on which OpenDP 0.16's MST fails under pure epsilon-DP (see the report).
FIRST8 = {"fair8": "fair", "randhie8": "randhie"}
TABLES = ("grunfeld", "penguins", "anes96", "fair", "randhie", *FIRST8)


def load_table(name: str) -> dict:
    """Private table (70%), real hold-out (30%), schema and TSTR target of one table of :data:`TABLES`."""
    from benchmarks.peers.real_tables import WIDE
    from privsyn_core.data.domain import Schema

    frame, columns, target = WIDE[FIRST8.get(name, name)]()
    if name in FIRST8:
        columns = columns[:8]
    frame = frame[[c["name"] for c in columns]].dropna().reset_index(drop=True)
    for c in columns:
        if c["kind"] == "categorical":
            frame[c["name"]] = frame[c["name"]].map(lambda v: str(int(v)) if isinstance(v, float) else str(v))
        else:
            frame[c["name"]] = frame[c["name"]].astype(float)
    order = np.random.default_rng(SPLIT_SEED).permutation(len(frame))
    cut = round(len(order) * (1 - HOLDOUT))
    return {"name": name, "real": frame.iloc[order[:cut]].reset_index(drop=True),
            "test": frame.iloc[order[cut:]].reset_index(drop=True),
            "schema": Schema.from_dict({"version": 1, "columns": columns}), "columns": columns, "target": target}


def boolean_columns(table: dict) -> list[str]:
    """Categorical columns with exactly two public categories (the Boolean mechanisms' input)."""
    return [c["name"] for c in table["columns"] if c["kind"] == "categorical" and len(c["categories"]) == 2]


def boolean_table(table: dict) -> dict:
    """The table restricted to its Boolean columns (target: the first of them)."""
    names = boolean_columns(table)
    return {**table, "name": table["name"], "real": table["real"][names], "test": table["test"][names],
            "schema": table["schema"].select(names), "columns": [c for c in table["columns"] if c["name"] in names],
            "target": table["target"] if table["target"] in names else names[0]}


# ------------------------------------------------------------------------------------------------------ runs
class _Timeout(Exception):
    pass


def _alarm(*_):
    raise _Timeout


def synthesize(table: dict, system: str, eps: float, seed: int, timeout: float) -> tuple[dict, pd.DataFrame | None]:
    """One default run; the record holds relation, time, ledger, warnings, or the error."""
    import privsyn_core as ps

    spec = next(s for s in ps.list_mechanisms() if s.name == system)
    relation = "add_remove" if "add_remove" in spec.neighbouring else spec.neighbouring[0]
    record = {"table": table["name"], "system": system, "epsilon": eps, "seed": seed, "relation": relation,
              "n": len(table["real"]), "d": len(table["schema"].names), "private": bool(spec.is_private)}
    signal.signal(signal.SIGALRM, _alarm)
    signal.alarm(math.ceil(timeout))
    start = time.perf_counter()
    try:
        try:
            result = ps.synthesize(table["real"], system, eps, schema=table["schema"], neighbouring=relation,
                                   n_synthetic=len(table["real"]), rng=seed)
        except ps.PrivsynError as exc:
            if system != PEER or "insufficient budget" not in repr(exc.__cause__):
                raise
            # OpenDP 0.16 refuses its own split of epsilon by one ulp on some widths ("insufficient budget for
            # query: 0.04999999999999998 > 0.049999999999999975"): retried once at epsilon (1 - 1e-9), which
            # spends less than declared, and recorded.
            record["note"] = (f"first attempt refused by OpenDP ({_budget_message(exc)}); retried at epsilon "
                              f"{eps * (1 - 1e-9)!r}")
            record["first_attempt_seconds"] = time.perf_counter() - start
            result = ps.synthesize(table["real"], system, eps * (1 - 1e-9), schema=table["schema"],
                                   neighbouring=relation, n_synthetic=len(table["real"]), rng=seed)
    except _Timeout:
        record.update(error=f"timeout: stopped after {timeout:g} s", seconds=time.perf_counter() - start)
        return record, None
    except Exception as exc:  # a refusal on defaults is a finding, recorded with its message
        record.update(error=f"{type(exc).__name__}: {exc}", seconds=time.perf_counter() - start)
        return record, None
    finally:
        signal.alarm(0)
    record.update(seconds=time.perf_counter() - start, ledger_total=math.fsum(e for _, e in result.ledger),
                  warnings=list(result.warnings), dp_valid=bool(result.dp_valid), n_synthetic=len(result.data))
    return record, result.data


def _budget_message(exc: Exception) -> str:
    import re

    found = re.search(r"insufficient budget for query: [0-9.e-]+ > [0-9.e-]+", repr(exc.__cause__))
    return found.group(0) if found else "insufficient budget"


def score(table: dict, synth: pd.DataFrame, seed: int, system: str) -> dict:
    """evaluate() (W1, TVDs, correlation gap, coverage), TSTR and SDMetrics' QualityReport of one output."""
    from privsyn_core.evaluation.scorecard import EVAL_SUBSAMPLE, evaluate

    start = time.perf_counter()
    # Every run uses the subsample size of a run with floors (min(1000, n // 2) rows per side), so all W1 values of
    # a table compare samples of one size; the real-vs-real floors are computed on the reference runs only.
    with_floor = system == REFERENCE
    report = evaluate(table["real"], synth, table["schema"], floor=with_floor, seed=seed,
                      subsample=min(EVAL_SUBSAMPLE, len(table["real"]) // 2))
    out = {}
    for key, name in (("w1", "w1"), ("marginal_tvd_1way", "tvd1"), ("marginal_tvd_2way", "tvd2"),
                      ("correlation_gap", "corr_gap")):
        entry = report.get(key)
        if entry:
            out[name] = {k: float(entry[k]) for k in ("value", "low", "high", "floor", "floor_low", "floor_high")
                         if k in entry}
    out["w1"]["subsample_rows"] = int(report["w1"]["subsample_rows"])
    cov = report["coverage"]
    out["coverage"] = {"flags": cov["flags"], "collapsed": cov["collapsed"], "top_share": cov["value"],
                       "distinct_rows_synthetic": int(cov["distinct_rows_synthetic"]),
                       "distinct_rows_real": int(cov["distinct_rows_real"])}
    out["tstr"] = tstr(table, synth, seed)
    out["sdmetrics"] = sdmetrics_quality(table, synth, seed)
    out["eval_seconds"] = time.perf_counter() - start
    return out


def tstr(table: dict, synth: pd.DataFrame, seed: int) -> dict:
    """Train on synthetic, test on the real hold-out, as :func:`privsyn_core.evaluation.utility.tstr` does it (same
    features, model and score), with the train-on-real reference fitted once per table and seed instead of once per
    run."""
    from privsyn_core.evaluation import utility

    schema, target = table["schema"], table["target"]
    task = utility._resolve_task("auto", schema[target])
    features = schema.select([n for n in schema.names if n != target])
    X_test, y_test = utility._features(table["test"], features), utility._labels(table["test"], schema[target], task)
    headline = "accuracy" if task == "classification" else "r2"
    key = (table["name"], tuple(schema.names), seed)
    if key not in _TRTR:
        model = utility._fit(utility._features(table["real"], features),
                             utility._labels(table["real"], schema[target], task), task, seed)
        _TRTR[key] = utility._score(model, X_test, y_test, task)[headline]
    model = utility._fit(utility._features(synth, features), utility._labels(synth, schema[target], task), task, seed)
    return {"value": float(utility._score(model, X_test, y_test, task)[headline]), "score": headline,
            "train_on_real": float(_TRTR[key])}


_TRTR: dict = {}


def sdmetrics_quality(table: dict, synth: pd.DataFrame, seed: int) -> dict:
    """SDMetrics' QualityReport (overall, column shapes, column pair trends) on <= 2000 seeded rows per side."""
    try:
        with warnings.catch_warnings():  # 0.32 announces a move of the class; the single-table report is the same
            warnings.simplefilter("ignore")
            from sdmetrics.reports.single_table import QualityReport
    except ImportError as exc:
        return {"error": f"sdmetrics not installed: {exc}"}
    columns = table["columns"]
    real = table["real"].sample(min(len(table["real"]), SDMETRICS_ROWS), random_state=seed)
    fake = synth[real.columns].sample(min(len(synth), SDMETRICS_ROWS), random_state=seed)
    for c in columns:
        if c["kind"] == "categorical":
            real[c["name"]], fake[c["name"]] = real[c["name"]].astype(str), fake[c["name"]].astype(str)
        else:
            real[c["name"]], fake[c["name"]] = real[c["name"]].astype(float), fake[c["name"]].astype(float)
    metadata = {"columns": {c["name"]: {"sdtype": "categorical" if c["kind"] == "categorical" else "numerical"}
                            for c in columns}}
    report = QualityReport()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        report.generate(real, fake, metadata, verbose=False)
    props = report.get_properties().set_index("Property")["Score"]
    return {"overall": float(report.get_score()), "column_shapes": float(props.get("Column Shapes", np.nan)),
            "column_pair_trends": float(props.get("Column Pair Trends", np.nan))}


def _key(r: dict) -> tuple:
    return (r["table"], r["system"], float(r["epsilon"]), int(r["seed"]))


def run_grid(args: argparse.Namespace) -> None:
    rows = json.loads(args.results.read_text()) if args.results.exists() else []
    done = {_key(r) for r in rows if args.skip_done and "error" not in r}  # failed runs are tried again
    tables = {name: load_table(name) for name in args.tables}
    for eps in args.epsilons:
        for seed in args.seeds:
            for name, table in tables.items():
                for system in args.systems:
                    run_table = table
                    if system in BOOLEAN_ONLY:
                        if len(boolean_columns(table)) < 2:
                            continue
                        run_table = boolean_table(table)
                    if (name, system, float(eps), int(seed)) in done:
                        continue
                    record, synth = synthesize(run_table, system, eps, seed, args.timeout)
                    if system in BOOLEAN_ONLY:
                        record["columns"] = list(run_table["schema"].names)
                    if synth is not None:
                        try:
                            record.update(score(run_table, synth, seed, system))
                        except Exception as exc:  # a malformed output is a result, not a crash
                            record["error"] = f"evaluation failed: {type(exc).__name__}: {exc}"
                    rows = [r for r in rows if _key(r) != _key(record)] + [record]
                    args.results.write_text(json.dumps(rows, indent=1, default=_jsonable))
                    print(_line(record), flush=True)


def _line(r: dict) -> str:
    head = f"{r['table']:>9} eps={r['epsilon']:<4g} s={r['seed']} {r['system']:>14}"
    if "error" in r:
        return f"{head}  ERROR {r['error'][:150]}"
    return (f"{head} W1={r['w1']['value']:.4f} TVD1={r['tvd1']['value']:.3f} TVD2={r['tvd2']['value']:.3f} "
            f"SDM={r['sdmetrics'].get('overall', float('nan')):.3f} TSTR={r['tstr']['value']:.3f} "
            f"t={r['seconds']:.2f}s flags=[{r['coverage']['flags']}]")


def _jsonable(value):
    if isinstance(value, (np.floating, np.integer)):
        return value.item()
    if isinstance(value, np.bool_):
        return bool(value)
    return str(value)


# ---------------------------------------------------------------------------------------------- psmm timing
def psmm_timing(path: Path, sizes: list[int], dims: list[int], epsilon: float) -> None:
    """Seconds of psmm's default run on uniform data in [0,1]^d (encode + mechanism + decode), default relation.

    Appends to ``path``: each call adds one repetition of every (n, d).
    """
    import privsyn_core as ps
    from privsyn_core.data.domain import Column, Schema

    rows = json.loads(path.read_text()) if path.exists() else []
    for d in dims:
        for n in sizes:
            data = pd.DataFrame(np.random.default_rng(0).random((n, d)), columns=[f"x{j}" for j in range(d)])
            schema = Schema(tuple(Column(c, "numeric", lo=0.0, hi=1.0) for c in data.columns))
            record = {"n": n, "d": d, "epsilon": epsilon, "relation": "replace (psmm's default)",
                      "load_average_1min": os.getloadavg()[0]}
            start = time.perf_counter()
            try:
                result = ps.synthesize(data, "psmm", epsilon, schema=schema, rng=0)
                record.update(seconds=time.perf_counter() - start, warnings=list(result.warnings),
                              params={k: v for k, v in result.params.items() if isinstance(v, (int, float, str))})
            except Exception as exc:
                record.update(seconds=time.perf_counter() - start, error=f"{type(exc).__name__}: {exc}")
            rows.append(record)  # every repetition is kept: run times on a shared machine vary
            path.write_text(json.dumps(rows, indent=1, default=_jsonable))
            print(json.dumps(record, default=_jsonable)[:400], flush=True)


# ------------------------------------------------------------------------------------------------ srw scale
#: One numeric column per table for the 1-D srw (the column a reader of the codebook would look at first).
SRW_COLUMNS = {"grunfeld": "invest", "penguins": "body_mass_g", "anes96": "age", "fair": "age", "randhie": "mdvis",
               "fair8": "age", "randhie8": "mdvis"}


def srw_scale(path: Path, tables: list[str], epsilons: list[float], seeds: list[int]) -> None:
    """Exact-subsample W1 of srw (one column) and srw_tsp (whole table) with scale='tight' (default) and 'paper'."""
    import privsyn_core as ps
    from privsyn_core.evaluation.scorecard import EVAL_SUBSAMPLE, evaluate

    rows = json.loads(path.read_text()) if path.exists() else []
    for name in tables:
        full = load_table(name)
        one = {**full, "real": full["real"][[SRW_COLUMNS[name]]], "schema": full["schema"].select([SRW_COLUMNS[name]])}
        for system, table in (("srw", one), ("srw_tsp", full)):
            for eps in epsilons:
                for seed in seeds:
                    for scale in ("tight", "paper"):
                        record = {"table": name, "columns": list(table["schema"].names), "system": system,
                                  "scale": scale, "epsilon": eps, "seed": seed, "relation": "add_remove"}
                        try:
                            result = ps.synthesize(table["real"], system, eps, schema=table["schema"],
                                                   neighbouring="add_remove", n_synthetic=len(table["real"]),
                                                   rng=seed, scale=scale)
                            report = evaluate(table["real"], result.data, table["schema"], floor=False, seed=seed,
                                              subsample=min(EVAL_SUBSAMPLE, len(table["real"]) // 2), bootstrap=2)
                            record["w1"] = {k: float(report["w1"][k]) for k in ("value", "low", "high")}
                        except Exception as exc:
                            record["error"] = f"{type(exc).__name__}: {exc}"
                        rows.append(record)
                        path.write_text(json.dumps(rows, indent=1, default=_jsonable))
                        print(json.dumps(record)[:300], flush=True)


# ---------------------------------------------------------------------------------------------------- main
def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tables", nargs="+", default=list(TABLES), choices=list(TABLES))
    parser.add_argument("--systems", nargs="+", default=[*OURS, *BOOLEAN_ONLY, REFERENCE])
    parser.add_argument("--epsilons", type=float, nargs="+", default=[1.0, 0.5, 4.0], help="run in this order")
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--timeout", type=float, default=600, help="seconds per synthesis (SIGALRM)")
    parser.add_argument("--results", type=Path, default=DEFAULT_RESULTS, help="JSON, updated after every run")
    parser.add_argument("--skip-done", action="store_true",
                        help="skip (table, system, eps, seed) already measured in it (failed runs are tried again)")
    parser.add_argument("--report-only", action="store_true",
                        help="write docs/tables/real_tables.md and test-output/real_tables.md from every "
                             "benchmarks/peers/results_real_tables*.json")
    parser.add_argument("--psmm-timing", action="store_true", help="psmm's default run time at 10^5, 10^6 rows")
    parser.add_argument("--timing-sizes", type=int, nargs="+", default=[10 ** 5, 10 ** 6])
    parser.add_argument("--timing-dims", type=int, nargs="+", default=[2, 5])
    parser.add_argument("--srw-scale", action="store_true",
                        help="srw / srw_tsp exact-subsample W1 with scale='tight' (default) against scale='paper'")
    args = parser.parse_args()
    if args.srw_scale:
        srw_scale(SRW_RESULTS, args.tables, args.epsilons, args.seeds)
        return
    if args.psmm_timing:
        psmm_timing(TIMING_RESULTS, args.timing_sizes, args.timing_dims, 1.0)
        return
    if not args.report_only:
        run_grid(args)
    from benchmarks.docsection import write_table
    from benchmarks.real_tables_report import compact_tables, write_report

    REPORT.parent.mkdir(parents=True, exist_ok=True)
    files = sorted(PEERS_DIR.glob("results_real_tables*.json"))
    write_report(files, TIMING_RESULTS, REPORT, SRW_RESULTS)
    write_table("real_tables", compact_tables(files), "python -m benchmarks.bench_real_tables --report-only")


if __name__ == "__main__":
    main()
