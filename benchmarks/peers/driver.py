"""Peer benchmark: our mechanisms against OpenDP MST/AIM and DataSynthesizer's PrivBayes.

Usage (from the repository root)::

    python -m benchmarks.peers.driver --quick --peer-python /path/to/venv/bin/python   # a few minutes
    python -m benchmarks.peers.driver --peer-python /path/to/venv/bin/python   # full grid

Every (system, dataset, epsilon) run is one child process on the same private table
(written once per dataset and seed); the driver measures the child's wall time, the child
reports its synthesis time and peak resident memory (``VmHWM``), and the driver then scores the synthetic table
against the real one with :func:`privsyn_core.evaluation.scorecard.evaluate` (W1 with its method/bound,
MMD, 1-/2-way marginal TVD, TSTR on a real hold-out that no system saw).  Results go to
``benchmarks/peers/results.json``, the table ``docs/tables/peers.md`` and the full report with Plotly HTML
figures under ``test-output/peers/`` (not committed).

The peers need ``pip install -r requirements-bench.txt``; install them in a separate
virtual environment (they pull jax, polars, matplotlib) and pass its interpreter with
``--peer-python``.  A peer that cannot be imported or fails is recorded with its error.

``--via-registry`` runs ``opendp_mst`` and ``opendp_aim`` through privsyn_core's registry
(:mod:`privsyn_core.mechanisms.peers.opendp_support`, ``run_ours.py``) instead of ``run_opendp.py``: the same public
keys, relation, ledger and null filling as in the library.  The peer interpreter then needs privsyn_core's
dependencies too (``python -m venv --system-site-packages`` and ``pip install -r requirements-peers.txt``).
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd

from benchmarks.peers.common import dataset_names, load_dataset

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]

PEERS = {"opendp_mst": ("run_opendp.py", ["--algorithm", "mst"]),
         "opendp_aim": ("run_opendp.py", ["--algorithm", "aim"]),
         "opendp_aim_zcdp": ("run_opendp.py", ["--algorithm", "aim_zcdp"]),
         "privbayes": ("run_privbayes.py", [])}
HOLDOUT = 0.3
#: The peers that ``--via-registry`` runs through privsyn_core's registry
#: (privsyn_core.mechanisms.peers.opendp_support.PEERS).
REGISTRY_PEERS = ("opendp_mst", "opendp_aim")


def our_mechanisms(d: int | None = None) -> list[str]:
    """Every private continuous mechanism of the registry (that accepts ``d`` columns, when given)."""
    import privsyn_core as ps
    from privsyn_core.mechanisms.peers.opendp_support import PEERS as REGISTERED_PEERS

    return [s.name for s in ps.list_mechanisms() if s.data_kind == "continuous" and s.is_private
            and s.name not in REGISTERED_PEERS and (d is None or s.max_dim is None or d <= s.max_dim)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true",
                        help="4 datasets, eps = 1, no AIM; results to the system temporary folder, docs untouched")
    parser.add_argument("--n", type=int, default=2000, help="rows of the generated datasets (70%% private)")
    parser.add_argument("--w1-entries", type=int, default=2_000_000,
                        help="cost-matrix budget of W1: exact up to it (1400 x 1400 private rows fit), "
                             "else grid + bound")
    parser.add_argument("--epsilons", type=float, nargs="+", default=None, help="run in this order")
    parser.add_argument("--datasets", nargs="+", default=None)
    parser.add_argument("--systems", nargs="+", default=None)
    parser.add_argument("--peer-python", default=sys.executable, help="interpreter with the peers installed")
    parser.add_argument("--via-registry", action="store_true",
                        help="run opendp_mst/opendp_aim through privsyn_core's registry "
                             "(privsyn_core.mechanisms.peers.opendp_support)")
    parser.add_argument("--timeout", type=float, default=600, help="seconds per run")
    parser.add_argument("--aim-timeout", type=float, default=120, help="seconds per AIM run (recorded as a timeout)")
    parser.add_argument("--work", type=Path, default=Path(tempfile.gettempdir()) / "privsyn_peers")
    parser.add_argument("--results", type=Path, default=None,
                        help="default: results.json here (quick: in the system temporary folder)")
    parser.add_argument("--append", action="store_true", help="keep earlier results for other (system, dataset, eps)")
    parser.add_argument("--report-only", action="store_true",
                        help="rewrite docs/tables/peers.md and test-output/peers/ from --results")
    parser.add_argument("--rescore", action="store_true",
                        help="score the finished runs of --results again from their synth.csv under --work "
                             "(after a change of the metrics), then rewrite the report")
    args = parser.parse_args()
    quick_results = Path(tempfile.gettempdir()) / "privsyn_peers_quick.json"
    args.results = args.results or (quick_results if args.quick else HERE / "results.json")
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # unwinds through _wait, which kills the child
    unknown = sorted(set(args.systems or []) - set(PEERS) - set(our_mechanisms()))
    if unknown:
        parser.error(f"unknown system(s) {unknown}; choose from {sorted(PEERS) + our_mechanisms()}")
    rows = json.loads(args.results.read_text()) if (args.append or args.report_only) and args.results.exists() else []
    if args.rescore:
        rows = rescore(args, json.loads(args.results.read_text()))
    elif not args.report_only:
        rows = run_grid(args, rows)
    if not args.quick:
        from benchmarks.peers.peer_report import write_report

        write_report(rows)


def run_grid(args: argparse.Namespace, rows: list[dict]) -> list[dict]:
    """Every (epsilon, dataset, system) in that order; results and the report are saved after each epsilon."""
    from benchmarks.peers.peer_report import write_report

    epsilons = args.epsilons or ([1.0] if args.quick else [1.0, 0.5, 4.0])
    names = args.datasets or dataset_names(args.quick)
    prepared = {name: _prepare(name, args.n, args.work / name) for name in names}
    for eps in epsilons:
        for name, (real, test, meta) in prepared.items():
            d = len(meta["schema"]["columns"])
            systems = args.systems or (our_mechanisms() + ["opendp_mst", "privbayes"]
                                       + ([] if args.quick else ["opendp_aim", "opendp_aim_zcdp"]))
            for system in [s for s in systems if s in PEERS or s in our_mechanisms(d)]:
                record = run_one(system, name, eps, args, meta)
                record.update(score(real, test, record, meta, args.w1_entries))
                rows = [r for r in rows if (r["system"], r["dataset"], r["epsilon"]) != (system, name, eps)] + [record]
                args.results.write_text(json.dumps(rows, indent=1, default=_jsonable))
                print(_line(record), flush=True)
        if not args.quick:
            write_report(rows)
    return rows


def rescore(args: argparse.Namespace, rows: list[dict]) -> list[dict]:
    """Scores of the finished runs recomputed from their ``synth.csv`` (the runs themselves are not repeated)."""
    prepared: dict[str, tuple] = {}
    for record in rows:
        if "error" in record or "reused_from" in record:
            continue
        name = record["dataset"]
        if name not in prepared:
            prepared[name] = _prepare(name, args.n, args.work / name)
        real, test, meta = prepared[name]
        record.update(score(real, test, record, meta, args.w1_entries))
        print(_line(record), flush=True)
    args.results.write_text(json.dumps(rows, indent=1, default=_jsonable))
    return rows


def _prepare(name: str, n: int, folder: Path) -> tuple[pd.DataFrame, pd.DataFrame, dict]:
    """Split the dataset into the private table (70%) and a real hold-out for TSTR (30%)."""
    data = load_dataset(name, n)
    order = np.random.default_rng(12345).permutation(len(data.frame))
    cut = round(len(order) * (1 - HOLDOUT))
    real = data.frame.iloc[order[:cut]].reset_index(drop=True)
    test = data.frame.iloc[order[cut:]].reset_index(drop=True)
    folder.mkdir(parents=True, exist_ok=True)
    real.to_csv(folder / "real.csv", index=False)
    meta = {"schema": data.schema, "target": data.target, "n": len(real), "folder": str(folder)}
    (folder / "meta.json").write_text(json.dumps(meta))
    return real, test, meta


def run_one(system: str, dataset: str, eps: float, args: argparse.Namespace, meta: dict) -> dict:
    """One child process (wall time measured here); its run.json adds synthesis time and peak RSS."""
    folder = Path(meta["folder"]) / f"{system}_eps{eps:g}"
    folder.mkdir(parents=True, exist_ok=True)
    for link in ("real.csv", "meta.json"):
        target = folder / link
        if not target.exists():
            target.symlink_to(Path(meta["folder"]) / link)
    for stale in ("synth.csv", "run.json"):
        (folder / stale).unlink(missing_ok=True)
    if system not in PEERS:
        command = [sys.executable, str(HERE / "run_ours.py"), "--mechanism", system]
    elif args.via_registry and system in REGISTRY_PEERS:
        command = [args.peer_python, str(HERE / "run_ours.py"), "--mechanism", system]
    else:
        script, extra = PEERS[system]
        command = [args.peer_python, str(HERE / script), *extra]
    command += ["--dataset", dataset, "--epsilon", str(eps), "--out", str(folder)]
    record = {"system": system, "dataset": dataset, "epsilon": eps, "n": meta["n"], "d": len(meta["schema"]["columns"])}
    timeout = args.aim_timeout if system.startswith("opendp_aim") else args.timeout
    with open(folder / "log.txt", "w") as log:
        start = time.perf_counter()
        child = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, cwd=HERE,
                                 env={**os.environ, "PYTHONPATH": str(ROOT)})
        status = _wait(child, timeout)
        record["process_seconds"] = time.perf_counter() - start
    if status == "timeout":
        record["error"] = f"timeout: stopped after the {timeout:g} s budget"
        return record
    if status != 0 or not (folder / "run.json").exists():
        record["error"] = error_line((folder / "log.txt").read_text()) or f"exit status {status}"
        return record
    record.update(json.loads((folder / "run.json").read_text()))
    return record


def error_line(log: str) -> str:
    """The last line of a child's log that names an error (else its last line)."""
    lines = [line.strip() for line in log.strip().splitlines() if line.strip()]
    named = [line for line in lines if "Error" in line or "Exception" in line or "MakeMeasurement" in line]
    return (named or lines or [""])[-1]


def _wait(child: subprocess.Popen, timeout: float) -> int | str:
    """Exit status of the child, or ``"timeout"`` (the child is then killed)."""
    try:
        return child.wait(timeout)
    except subprocess.TimeoutExpired:
        return "timeout"
    finally:
        if child.poll() is None:  # timeout, or the driver itself interrupted: never leave an orphan
            child.kill()
            child.wait()


def score(real: pd.DataFrame, test: pd.DataFrame, record: dict, meta: dict, w1_entries: int) -> dict:
    """W1 (with method and bound), MMD, marginal TVDs and TSTR of one run (reads the real data: evaluation only)."""
    if "error" in record:
        return {}
    from privsyn_core.data.domain import Schema
    from privsyn_core.evaluation.scorecard import evaluate

    synth = pd.read_csv(Path(meta["folder"]) / f"{record['system']}_eps{record['epsilon']:g}" / "synth.csv")
    schema = Schema.from_dict(meta["schema"])
    try:
        report = evaluate(real, synth, schema, target=meta["target"], real_test=test, floor=False,
                          w1_max_entries=w1_entries)
    except Exception as exc:  # a malformed peer output is a result, not a crash of the benchmark
        return {"error": f"evaluation failed: {exc}"}
    sub, full = report["w1"], report["w1"].get("full_sample") or {}
    w1 = full if full.get("used") else {"value": None, "method": None, "error_bound": None}
    return {"w1": w1["value"], "w1_method": w1["method"], "w1_error_bound": w1["error_bound"],
            "w1_sub": sub["value"], "w1_sub_low": sub.get("low"), "w1_sub_high": sub.get("high"),
            "mmd": report["mmd"]["value"], "tvd1": report["marginal_tvd_1way"]["value"],
            "tvd2": (report.get("marginal_tvd_2way") or {}).get("value"),
            "tstr": report["tstr"]["value"], "tstr_score": report["tstr"]["score"],
            "trtr": report["tstr"]["train_on_real"][report["tstr"]["score"]]}


def _line(r: dict) -> str:
    if "error" in r:
        return f"{r['dataset']:>14} eps={r['epsilon']:<4g} {r['system']:>13}  ERROR {r['error'][:160]}"
    w1 = float("nan") if r["w1"] is None else r["w1"]
    return (f"{r['dataset']:>14} eps={r['epsilon']:<4g} {r['system']:>13}  W1={w1:.4f} MMD={r['mmd']:.4f} "
            f"TVD1={r['tvd1']:.3f} TSTR={r['tstr']:.3f} t={r['seconds']:.2f}s rss={r['peak_rss_mb']:.0f}MB")


def _jsonable(value):
    if isinstance(value, (np.floating, np.integer)):
        return value.item()
    return str(value)


if __name__ == "__main__":
    main()
