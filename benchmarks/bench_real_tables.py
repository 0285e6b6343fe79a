"""Real tables: every private mechanism on its defaults against MST and AIM, OpenDP's and SmartNoise's (issue 27).

Usage (repository root; privsyn_core's interpreter with ``requirements-real-tables.txt``, and the separate venv of
``requirements-smartnoise.txt`` for SmartNoise's peers and for SDMetrics, passed as ``--aux-python``)::

    python -m benchmarks.bench_real_tables --quick          # smoke run: 2 small tables, eps 1, seed 0, 300 s cap
    python -m benchmarks.bench_real_tables                  # the full grid: 14 tables x eps 0.5, 1, 4 x seeds 0-2
    python -m benchmarks.bench_real_tables --skip-done      # resume it after an interruption (failures retried)
    python -m benchmarks.bench_real_tables --report-only    # docs/benchmark_real_tables.md from the results

Cost (CPU seconds of one run, measured at eps 1 on seattle_weather, crime1 and labsup): ours 0.05 s each (psmm
2-12 s); evaluation 0.5-3.6 s a run; SDMetrics 5-8 s per (table, eps, seed); OpenDP's MST 21-55 s; SmartNoise's
MST 15-43 s and AIM 14-40 s, but 286 s and 3.7 GB on labsup; each SmartNoise run also starts a Python with torch and
jax (about 5 s). The full grid, 72 (table, eps, seed) blocks of 15-17 runs, is then about 4-7 CPU hours, nearly all
of it the peers', run one process at a time: 4-7 hours on an idle 2-core machine, more if OpenDP's AIM runs on
whole tables. On a machine loaded by other jobs the wall time is several times the CPU time.

Tables: :data:`benchmarks.peers.real_tables.TABLES` (bundled in pip packages; public domains set by hand there).
Rows with a missing value are dropped; a seeded 70/30 split (seed 12345) gives the private table every system sees
and a real hold-out for train-on-synthetic/test-on-real (TSTR) that no system sees.

Systems, each asked for as many rows as the private table has (a convention of the benchmark, so that every metric
compares samples of one size):

* every private mechanism of the registry on its defaults (:func:`our_mechanisms`), ``microagg_dp`` and
  ``microagg_anon`` on the Boolean columns alone (tables with at least two), ``bootstrap`` (real rows, not private)
  as the reference;
* ``opendp_mst`` and ``opendp_aim`` through the registry, on their registry defaults;
* ``smartnoise_mst`` and ``smartnoise_aim``: SmartNoise's synthesizers (``benchmarks/peers/run_smartnoise.py``) on
  the keys the OpenDP peers see (the same public bins and levels), an independent implementation.

Relation: add/remove one row wherever the mechanism supports it (OpenDP's ``contributions=1``), else replace-one;
no ``public_n``. Every run is a child process with a time limit (``--timeout``): a refusal, a crash or a timeout is
recorded with its message, never dropped.

Metrics per run, real = the private table (:func:`privsyn_core.evaluation.scorecard.evaluate`): exact W1 on repeated
subsamples of ``min(500, n // 2)`` rows a side with its 95% interval (and the full-sample W1 where it is exact or
certified within 10%); the resolution-robust 1-way and 2-way TVD (mean over 16 public grids) with bootstrap
intervals and their per-resolution values; the correlation gap; coverage flags; TSTR on the hold-out against
train-on-real (random forest, the table's target); SDMetrics' QualityReport (``run_sdmetrics.py``); the synthesis
time.  The real-vs-real floors come with the ``bootstrap`` runs.  Results are written after every run
(``--results``), keyed by (table, system, epsilon, seed).
"""

from __future__ import annotations

import argparse
import json
import math
import multiprocessing
import os
import resource
import subprocess
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd

ROOT = Path(__file__).resolve().parents[1]
PEERS_DIR = ROOT / "benchmarks" / "peers"
DEFAULT_RESULTS = PEERS_DIR / "results_real_tables.json"
DEFAULT_WORK = Path(tempfile.gettempdir()) / "privsyn_real_tables"
#: SmartNoise's and SDMetrics' interpreter: ``$PRIVSYN_AUX_PYTHON``, else the venv of ``requirements-smartnoise.txt``
#: in the checkout.
DEFAULT_AUX_PYTHON = Path(os.environ.get("PRIVSYN_AUX_PYTHON", ROOT / ".venv-smartnoise" / "bin" / "python"))
SPLIT_SEED = 12345
HOLDOUT = 0.3
EPSILONS = (1.0, 0.5, 4.0)
SEEDS = (0, 1, 2)
TIMEOUT = 1200.0
#: The smoke run: the two smallest tables, one epsilon, one seed, a short time limit.
QUICK = {"tables": ["seattle_weather", "crime1"], "epsilons": [1.0], "seeds": [0], "timeout": 300.0}
REFERENCE = "bootstrap"
BOOLEAN_ONLY = ("microagg_dp", "microagg_anon")
REGISTRY_PEERS = ("opendp_mst", "opendp_aim")
SMARTNOISE = {"smartnoise_mst": "mst", "smartnoise_aim": "aim"}
PEERS = (*REGISTRY_PEERS, *SMARTNOISE)


# ----------------------------------------------------------------------------------------------------- data
def load_table(name: str) -> dict:
    """Private table (70%), real hold-out (30%), schema and TSTR target of one table of the benchmark."""
    from benchmarks.peers.real_tables import ALL_TABLES
    from privsyn_core.data.domain import Schema

    table = ALL_TABLES[name]
    frame = table.frame()
    order = np.random.default_rng(SPLIT_SEED).permutation(len(frame))
    cut = round(len(order) * (1 - HOLDOUT))
    return {"name": name, "real": frame.iloc[order[:cut]].reset_index(drop=True),
            "test": frame.iloc[order[cut:]].reset_index(drop=True), "schema": Schema.from_dict(table.schema_dict()),
            "columns": list(table.columns), "target": table.target}


def boolean_columns(table: dict) -> list[str]:
    """Categorical columns with exactly two public categories (the Boolean mechanisms' input)."""
    return [c["name"] for c in table["columns"] if c["kind"] == "categorical" and len(c["categories"]) == 2]


def boolean_table(table: dict) -> dict:
    """The table restricted to its Boolean columns (target: the table's own if Boolean, else the first)."""
    names = boolean_columns(table)
    return {**table, "real": table["real"][names], "test": table["test"][names],
            "schema": table["schema"].select(names), "columns": [c for c in table["columns"] if c["name"] in names],
            "target": table["target"] if table["target"] in names else names[0]}


def our_mechanisms(d: int) -> list[str]:
    """Every private mechanism of the registry for continuous tables that accepts ``d`` columns (peers aside)."""
    import privsyn_core as ps

    return [s.name for s in ps.list_mechanisms() if s.is_private and s.data_kind == "continuous"
            and s.name not in REGISTRY_PEERS and (s.max_dim is None or d <= s.max_dim)]


def systems_for(table: dict) -> list[str]:
    """Ours, the Boolean-only pair where the table has two Boolean columns, the reference and the peers."""
    boolean = list(BOOLEAN_ONLY) if len(boolean_columns(table)) >= 2 else []
    return [*our_mechanisms(len(table["columns"])), *boolean, REFERENCE, *PEERS]


# ------------------------------------------------------------------------------------------------------ runs
def run_system(table: dict, system: str, eps: float, seed: int, timeout: float, work: Path,
               aux_python: Path) -> tuple[dict, pd.DataFrame | None]:
    """One run in a child process: the record (relation, time, ledger, warnings, or the error) and the output."""
    run_table = boolean_table(table) if system in BOOLEAN_ONLY else table
    folder = work / table["name"] / f"{system}_eps{eps:g}_s{seed}"
    folder.mkdir(parents=True, exist_ok=True)
    for stale in folder.iterdir():
        stale.unlink()
    record = {"table": table["name"], "system": system, "epsilon": eps, "seed": seed, "n": len(run_table["real"]),
              "d": len(run_table["columns"])}
    if system in BOOLEAN_ONLY:
        record["columns"] = list(run_table["schema"].names)
    start = time.perf_counter()
    if system in SMARTNOISE:
        status = _smartnoise_child(run_table, SMARTNOISE[system], eps, seed, timeout, folder, aux_python)
    else:
        status = _registry_child(run_table, system, eps, seed, timeout, folder)
    record["wall_seconds"] = time.perf_counter() - start
    run = json.loads((folder / "run.json").read_text()) if (folder / "run.json").exists() else {}
    record.update(run)
    if status == "timeout":
        record["error"] = f"timeout: stopped after {timeout:g} s"
    elif "error" not in record and not (folder / "synth.csv").exists():
        record["error"] = status
    if "error" in record:
        return record, None
    synth = read_table(folder / "synth.csv", run_table)
    return record, synth


def read_table(path: Path, table: dict) -> pd.DataFrame:
    """A CSV of the table's columns, categories as strings."""
    dtype = {c["name"]: str for c in table["columns"] if c["kind"] == "categorical"}
    return pd.read_csv(path, dtype=dtype)[[c["name"] for c in table["columns"]]]


def _registry_child(table: dict, system: str, eps: float, seed: int, timeout: float, folder: Path) -> str:
    """ps.synthesize in a forked process (the table is not copied); "ok", "timeout" or the exit status."""
    child = multiprocessing.get_context("fork").Process(target=_registry_run, args=(table, system, eps, seed, folder))
    child.start()
    child.join(timeout)
    if child.is_alive():
        child.kill()
        child.join()
        return "timeout"
    return "ok" if child.exitcode == 0 else f"child process ended with status {child.exitcode}"


def _registry_run(table: dict, system: str, eps: float, seed: int, folder: Path) -> None:
    import privsyn_core as ps

    record: dict = {}
    try:
        spec = next((s for s in ps.list_mechanisms() if s.name == system), None)
        if spec is None:
            raise LookupError(f"{system} is not registered here (OpenDP's peers need requirements-peers.txt)")
        relation = "add_remove" if "add_remove" in spec.neighbouring else spec.neighbouring[0]
        record.update(relation=relation, private=bool(spec.is_private))
        start, cpu = time.perf_counter(), time.process_time()
        result = ps.synthesize(table["real"], system, eps, schema=table["schema"], neighbouring=relation,
                               n_synthetic=len(table["real"]), rng=seed)
        record.update(seconds=time.perf_counter() - start, cpu_seconds=time.process_time() - cpu,
                      ledger_total=math.fsum(e for _, e in result.ledger), warnings=list(result.warnings),
                      dp_valid=bool(result.dp_valid),
                      params={k: v for k, v in result.params.items() if isinstance(v, (int, float, str, list, tuple))})
        result.data.to_csv(folder / "synth.csv", index=False)
    except Exception as exc:  # a refusal on defaults is a finding, recorded with its (public) message
        record["error"] = f"{type(exc).__name__}: {exc}"
    (folder / "run.json").write_text(json.dumps(record, default=_jsonable))


def _smartnoise_child(table: dict, algorithm: str, eps: float, seed: int, timeout: float, folder: Path,
                      aux_python: Path) -> str:
    """run_smartnoise.py in the SmartNoise venv on the public keys; its keys decoded here as the OpenDP peers'."""
    from benchmarks.peers.driver import _wait, error_line
    from privsyn_core.mechanisms.peers import opendp_support as keys

    codec, levels, bins = peer_keys(table["schema"])
    unit, _ = codec.encode(table["real"])
    codes = keys.to_codes(unit, levels, bins)
    pd.DataFrame(codes, columns=[f"c{j}" for j in range(codes.shape[1])]).to_csv(folder / "codes.csv", index=False)
    (folder / "keys.json").write_text(json.dumps({"sizes": keys.key_sizes(levels, bins)}))
    command = [str(aux_python), str(PEERS_DIR / "run_smartnoise.py"), "--algorithm", algorithm, "--epsilon",
               repr(eps), "--seed", str(seed), "--rows", str(len(table["real"])), "--out", str(folder)]
    with open(folder / "log.txt", "w") as log:
        try:
            child = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, cwd=PEERS_DIR)
        except OSError as exc:
            _note_error(folder, f"SmartNoise's interpreter {aux_python} did not start ({exc}); see "
                                "requirements-smartnoise.txt")
            return "not started"
        status = _wait(child, timeout)
    if status == "timeout":
        return "timeout"
    if status != 0 or not (folder / "synth.csv").exists():
        _note_error(folder, error_line((folder / "log.txt").read_text()) or f"exit status {status}")
        return f"exit status {status}"
    released = pd.read_csv(folder / "synth.csv").to_numpy()
    (folder / "synth.csv").rename(folder / "synth_codes.csv")
    rng = np.random.default_rng(seed)
    codec.decode(keys.from_codes(released, levels, bins, rng)).to_csv(folder / "synth.csv", index=False)
    run = json.loads((folder / "run.json").read_text())
    run.update(relation="add_remove", private=True)
    (folder / "run.json").write_text(json.dumps(run))
    return "ok"


def peer_keys(schema) -> tuple:
    """The registered OpenDP peers' discretisation of ``schema``: codec, levels per column, bins of the others."""
    import privsyn_core as ps
    from privsyn_core.data.levelled_codec import LevelledCodec

    codec = LevelledCodec(schema)
    bins = next(s for s in ps.list_mechanisms() if s.name == "opendp_mst").params["bins"].default
    return codec, codec.levels, bins


def _note_error(folder: Path, message: str) -> None:
    (folder / "run.json").write_text(json.dumps({"error": message[:500]}))


def synthesize(table: dict, system: str, eps: float, seed: int, timeout: float) -> tuple[dict, pd.DataFrame | None]:
    """One run of ``system`` (see :func:`run_system`) in the default work folder and interpreter."""
    return run_system(table, system, eps, seed, timeout, DEFAULT_WORK, DEFAULT_AUX_PYTHON)


# --------------------------------------------------------------------------------------------------- scores
def score(table: dict, synth: pd.DataFrame, seed: int, system: str) -> dict:
    """evaluate() (W1, robust TVDs, correlation gap, coverage) and TSTR of one output."""
    from privsyn_core.evaluation.scorecard import EVAL_SUBSAMPLE, evaluate

    start, cpu = time.perf_counter(), time.process_time()
    report = evaluate(table["real"], synth, table["schema"], floor=system == REFERENCE, seed=seed,
                      subsample=min(EVAL_SUBSAMPLE, len(table["real"]) // 2))
    keep = ("value", "low", "high", "floor", "floor_low", "floor_high")
    out: dict = {}
    for key, name in (("w1", "w1"), ("marginal_tvd_1way", "tvd1"), ("marginal_tvd_2way", "tvd2"),
                      ("correlation_gap", "corr_gap")):
        entry = report.get(key)
        if entry:
            out[name] = {k: float(entry[k]) for k in keep if k in entry}
            if "per_resolution" in entry:
                out[name]["per_resolution"] = {k: round(v["value"], 5) for k, v in entry["per_resolution"].items()}
    out["w1"]["subsample_rows"] = int(report["w1"]["subsample_rows"])
    full = report["w1"]["full_sample"]
    if full.get("used"):
        out["w1_full"] = {"value": float(full["value"]), "method": full["method"], "low": float(full["low"]),
                          "high": float(full["high"])}
    out["coverage_flags"] = report["coverage"]["flags"]
    out["tstr"] = tstr(table, synth, seed)
    out["eval_seconds"], out["eval_cpu_seconds"] = time.perf_counter() - start, time.process_time() - cpu
    return out


def tstr(table: dict, synth: pd.DataFrame, seed: int) -> dict:
    """Train on synthetic, test on the real hold-out, as :func:`privsyn_core.evaluation.utility.tstr` does it, with
    the train-on-real reference fitted once per table and seed."""
    from threadpoolctl import threadpool_limits

    from privsyn_core.evaluation import utility

    with threadpool_limits(limits=1):  # as the library's tstr: OpenMP threads on a busy machine spin for seconds
        return _tstr(table, synth, seed, utility)


def _tstr(table: dict, synth: pd.DataFrame, seed: int, utility) -> dict:
    schema, target = table["schema"], table["target"]
    task = utility._resolve_task("auto", schema[target])
    features = schema.select([n for n in schema.names if n != target])
    X_test, y_test = utility._features(table["test"], features), utility._labels(table["test"], schema[target], task)
    headline = "accuracy" if task == "classification" else "r2"
    key = (table["name"], tuple(schema.names), seed)
    if key not in _TRAIN_ON_REAL:
        model = utility._fit(utility._features(table["real"], features),
                             utility._labels(table["real"], schema[target], task), task, seed)
        _TRAIN_ON_REAL[key] = utility._score(model, X_test, y_test, task)[headline]
    model = utility._fit(utility._features(synth, features), utility._labels(synth, schema[target], task), task, seed)
    return {"value": float(utility._score(model, X_test, y_test, task)[headline]), "score": headline,
            "train_on_real": float(_TRAIN_ON_REAL[key])}


_TRAIN_ON_REAL: dict = {}


def sdmetrics_scores(records: list[dict], work: Path, aux_python: Path, timeout: float) -> None:
    """SDMetrics' QualityReport of every finished run of ``records`` (one child process), written into them."""
    jobs = {}
    for r in records:
        folder = work / r["table"] / f"{r['system']}_eps{r['epsilon']:g}_s{r['seed']}"
        if "error" not in r and (folder / "synth.csv").exists():
            jobs[f"{r['system']}"] = [str(work / r["table"] / _REAL_NAME.get(r["system"], "real.csv")),
                                      str(folder / "synth.csv"),
                                      str(work / r["table"] / _META_NAME.get(r["system"], "meta.json"))]
    if not jobs:
        return
    table = records[0]["table"]
    jobs_file, scores_file = work / table / "sdmetrics_jobs.json", work / table / "sdmetrics_scores.json"
    jobs_file.write_text(json.dumps(jobs))
    scores_file.unlink(missing_ok=True)
    start, cpu = time.perf_counter(), _children_cpu()
    try:
        subprocess.run([str(aux_python), str(PEERS_DIR / "run_sdmetrics.py"), str(jobs_file), str(scores_file)],
                       capture_output=True, timeout=timeout, check=False)
        scores = json.loads(scores_file.read_text()) if scores_file.exists() else {}
    except (OSError, subprocess.TimeoutExpired) as exc:
        scores = {key: {"error": f"SDMetrics did not run: {type(exc).__name__}"} for key in jobs}
    print(f"{table:>15} SDMetrics on {len(jobs)} outputs: {time.perf_counter() - start:.1f} s wall, "
          f"{_children_cpu() - cpu:.1f} s CPU", flush=True)
    for r in records:
        if r["system"] in jobs:
            r["sdmetrics"] = scores.get(r["system"], {"error": "SDMetrics returned no score"})


def _children_cpu() -> float:
    """CPU seconds (user + system) of the finished child processes of this one."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


#: The Boolean-only systems are scored against the table's Boolean columns (files written by write_inputs).
_REAL_NAME = dict.fromkeys(BOOLEAN_ONLY, "real_boolean.csv")
_META_NAME = dict.fromkeys(BOOLEAN_ONLY, "meta_boolean.json")


def write_inputs(table: dict, work: Path) -> None:
    """The private table and its public schema as the SDMetrics child reads them (and their Boolean part)."""
    folder = work / table["name"]
    folder.mkdir(parents=True, exist_ok=True)
    table["real"].to_csv(folder / "real.csv", index=False)
    (folder / "meta.json").write_text(json.dumps({"schema": table["schema"].to_dict(), "target": table["target"]}))
    if len(boolean_columns(table)) >= 2:
        part = boolean_table(table)
        part["real"].to_csv(folder / "real_boolean.csv", index=False)
        (folder / "meta_boolean.json").write_text(json.dumps({"schema": part["schema"].to_dict()}))


# ---------------------------------------------------------------------------------------------------- grid
def _key(r: dict) -> tuple:
    return (r["table"], r["system"], float(r["epsilon"]), int(r["seed"]))


def run_grid(args: argparse.Namespace) -> None:
    rows = json.loads(args.results.read_text()) if args.results.exists() else []
    done = {_key(r) for r in rows if args.skip_done and "error" not in r}  # failed runs are tried again
    tables = {name: load_table(name) for name in args.tables}
    for table in tables.values():
        write_inputs(table, args.work)
    for eps in args.epsilons:
        for seed in args.seeds:
            for name, table in tables.items():
                block = []
                for system in [s for s in systems_for(table) if not args.systems or s in args.systems]:
                    if (name, system, float(eps), int(seed)) in done:
                        continue
                    record, synth = run_system(table, system, eps, seed, args.timeout, args.work, args.aux_python)
                    if synth is not None:
                        run_table = boolean_table(table) if system in BOOLEAN_ONLY else table
                        try:
                            record.update(score(run_table, synth, seed, system))
                        except Exception as exc:  # a malformed output is a result, not a crash
                            record["error"] = f"evaluation failed: {type(exc).__name__}: {exc}"
                    block.append(record)
                    rows = _save(args.results, rows, record)
                    print(_line(record), flush=True)
                sdmetrics_scores(block, args.work, args.aux_python, args.timeout)
                for record in block:
                    rows = _save(args.results, rows, record)


def _save(path: Path, rows: list[dict], record: dict) -> list[dict]:
    rows = [r for r in rows if _key(r) != _key(record)] + [record]
    path.write_text(json.dumps(rows, indent=1, default=_jsonable))
    return rows


def _line(r: dict) -> str:
    head = f"{r['table']:>15} eps={r['epsilon']:<4g} s={r['seed']} {r['system']:>14}"
    if "error" in r:
        return f"{head}  ERROR {r['error'][:150]}"
    return (f"{head} W1={r['w1']['value']:.4f} TVD1={r['tvd1']['value']:.3f} TVD2={r['tvd2']['value']:.3f} "
            f"TSTR={r['tstr']['value']:.3f} t={r['seconds']:.2f}s (wall {r['wall_seconds']:.1f}s, eval "
            f"{r['eval_seconds']:.1f}s) flags=[{r['coverage_flags']}]")


def _jsonable(value):
    if isinstance(value, (np.floating, np.integer)):
        return value.item()
    if isinstance(value, np.bool_):
        return bool(value)
    return str(value)


# ---------------------------------------------------------------------------------------------------- main
def main() -> None:
    from benchmarks.peers.real_tables import ALL_TABLES

    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true",
                        help=f"smoke run: tables {QUICK['tables']}, eps {QUICK['epsilons']}, seeds {QUICK['seeds']}, "
                             f"{QUICK['timeout']:g} s per run (other options still apply)")
    parser.add_argument("--tables", nargs="+", default=list(ALL_TABLES), choices=list(ALL_TABLES))
    parser.add_argument("--systems", nargs="+", default=None, help="default: every system of every table")
    parser.add_argument("--epsilons", type=float, nargs="+", default=list(EPSILONS), help="run in this order")
    parser.add_argument("--seeds", type=int, nargs="+", default=list(SEEDS))
    parser.add_argument("--timeout", type=float, default=TIMEOUT, help="seconds per synthesis (the child is killed)")
    parser.add_argument("--results", type=Path, default=DEFAULT_RESULTS, help="JSON, updated after every run")
    parser.add_argument("--work", type=Path, default=DEFAULT_WORK, help="inputs and outputs of the runs")
    parser.add_argument("--aux-python", type=Path, default=DEFAULT_AUX_PYTHON,
                        help="interpreter of requirements-smartnoise.txt (SmartNoise, SDMetrics)")
    parser.add_argument("--skip-done", action="store_true",
                        help="skip (table, system, eps, seed) already measured in --results (failed runs are retried)")
    parser.add_argument("--report-only", action="store_true", help="write the page from --results, run nothing")
    args = parser.parse_args()
    if args.quick:
        args.tables, args.epsilons, args.seeds = QUICK["tables"], QUICK["epsilons"], QUICK["seeds"]
        args.timeout = min(args.timeout, QUICK["timeout"])
    if not args.report_only:
        run_grid(args)
    from benchmarks.real_tables_report import write_page

    source = args.results.resolve()
    write_page(json.loads(args.results.read_text()),
               str(source.relative_to(ROOT)) if source.is_relative_to(ROOT) else str(source))


if __name__ == "__main__":
    main()
