"""lowdim_pmm against marginal_tree, pmm and psmm on the real tables of bench_real_tables (issue 15, design (a)).

Usage (from the repository root, with an interpreter that has ``requirements-real-tables.txt``)::

    PYTHONPATH=. python -m benchmarks.bench_lowdim                       # eps 1, seeds 0-2, every table
    PYTHONPATH=. python -m benchmarks.bench_lowdim --tables seattle_weather crime1 --seeds 0

Every run is :func:`benchmarks.bench_real_tables.synthesize` (a child process; add/remove, no ``public_n``, as
many rows as the private table) scored by :func:`privsyn_core.evaluation.scorecard.evaluate` against the private
table with its 95% intervals (exact W1 on subsamples, Chebyshev cost in the unit cube; mean 2-way TVD; correlation
gap).  Prints one line per run and a per-table summary: the mean over seeds and whether lowdim_pmm's interval
separates from each other system's (``<``: lowdim better, ``>``: worse, ``~``: the intervals overlap) in every seed.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np

from benchmarks.bench_real_tables import load_table, synthesize
from benchmarks.peers.real_tables import TABLES

SYSTEMS = ("lowdim_pmm", "marginal_tree", "pmm", "psmm")
METRICS = (("w1", "w1"), ("marginal_tvd_2way", "tvd2"), ("correlation_gap", "corr"))
DEFAULT_OUT = Path(__file__).resolve().parent / "peers" / "results_lowdim.json"


def score(table: dict, synth, seed: int) -> dict:
    from privsyn_core.evaluation.scorecard import EVAL_SUBSAMPLE, evaluate

    report = evaluate(table["real"], synth, table["schema"], floor=False, seed=seed,
                      subsample=min(EVAL_SUBSAMPLE, len(table["real"]) // 2))
    return {name: {k: float(report[key][k]) for k in ("value", "low", "high") if k in report[key]}
            for key, name in METRICS if report.get(key)}


def compare(rows: list[dict], table: str, metric: str, other: str) -> str:
    """``<`` if lowdim's interval is below the other's in every seed, ``>`` if above in every seed, else ``~``."""
    ours = {r["seed"]: r[metric] for r in rows if r["table"] == table and r["system"] == "lowdim_pmm" and metric in r}
    theirs = {r["seed"]: r[metric] for r in rows if r["table"] == table and r["system"] == other and metric in r}
    seeds = sorted(set(ours) & set(theirs))
    if not seeds or any("low" not in ours[s] for s in seeds):
        return "?"
    if all(ours[s]["high"] < theirs[s]["low"] for s in seeds):
        return "<"
    if all(ours[s]["low"] > theirs[s]["high"] for s in seeds):
        return ">"
    return "~"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tables", nargs="+", default=list(TABLES))
    parser.add_argument("--epsilons", nargs="+", type=float, default=[1.0])
    parser.add_argument("--seeds", nargs="+", type=int, default=[0, 1, 2])
    parser.add_argument("--systems", nargs="+", default=list(SYSTEMS))
    parser.add_argument("--timeout", type=float, default=600.0)
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT)
    args = parser.parse_args()
    rows: list[dict] = []
    for name in args.tables:
        table = load_table(name)
        for eps in args.epsilons:
            for seed in args.seeds:
                for system in args.systems:
                    record, synth = synthesize(table, system, eps, seed, args.timeout)
                    if synth is not None:
                        record.update(score(table, synth, seed))
                    rows.append(record)
                    args.out.write_text(json.dumps(rows, indent=1, default=str))
                    if "error" in record:
                        print(f"{name:>9} eps={eps:g} s={seed} {system:>14} ERROR {record['error'][:120]}", flush=True)
                        continue
                    print(f"{name:>9} n={record['n']:<6} d={record['d']:<2} eps={eps:g} s={seed} {system:>14} "
                          + " ".join(f"{m}={record[m]['value']:.4f}[{record[m].get('low', np.nan):.4f},"
                                     f"{record[m].get('high', np.nan):.4f}]" for _, m in METRICS if m in record)
                          + f" t={record['seconds']:.2f}s", flush=True)
    print("\nmean over seeds (lowdim vs other: < better in every seed, > worse in every seed, ~ overlap)")
    for name in args.tables:
        for eps in args.epsilons:
            line = [f"{name:>9} eps={eps:g}"]
            for system in args.systems:
                runs = [r for r in rows if r["table"] == name and r["system"] == system and r["epsilon"] == eps
                        and "w1" in r]
                if not runs:
                    line.append(f"{system}: -")
                    continue
                means = " ".join(f"{m}={np.mean([r[m]['value'] for r in runs]):.4f}" for _, m in METRICS)
                marks = "" if system == "lowdim_pmm" else " (" + ",".join(
                    compare([r for r in rows if r["epsilon"] == eps], name, m, system) for _, m in METRICS) + ")"
                line.append(f"{system}: {means}{marks}")
            print(" | ".join(line))


if __name__ == "__main__":
    main()
