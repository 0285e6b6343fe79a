"""Bins per continuous column for the OpenDP peers: which default suits them under the robust metrics (issue 27).

Usage (from the repository root, with ``requirements-peers.txt`` and ``statsmodels`` installed)::

    PYTHONPATH=. python -m benchmarks.peers.bench_peer_bins                  # the grid (skips finished runs)
    PYTHONPATH=. python -m benchmarks.peers.bench_peer_bins --report-only    # docs/tables/peer_bins.md

Grid: ``opendp_mst`` and ``opendp_aim`` through privsyn_core's registry on the private 70% of statsmodels' ``fair``
(9 columns, 4,456 rows) and ``randhie`` (10 columns, 14,133 rows) of :func:`benchmarks.bench_real_tables.load_table`
(public domains set by hand in benchmarks/peers/real_tables.py), epsilon 1, add/remove one row, as many rows as the
private table, ``bins`` equal bins per continuous column (categories, integer columns with at most 32 values and
public atoms keep one key each), two seeds.  OpenDP's noise cannot be seeded, so the seeds are
two independent runs.  Each output is scored by :func:`privsyn_core.evaluation.scorecard.evaluate` against the private
table: W1 (mean over 20 repeated subsamples of min(1000, n/2) rows: with 20 repeats its interval is far narrower
than the differences between two runs of OpenDP) and the resolution-robust 1-way and 2-way TVD (the mean over 8,
13, 20 and 32 equal bins at four offsets), with the TVD at each resolution kept.  Synthetic tables are cached under
``test-output/peer_bins/`` so that ``--rescore`` never reruns OpenDP; results go to
``benchmarks/peers/results_peer_bins.json`` after every run.
"""

from __future__ import annotations

import argparse
import json
import math
import time
import warnings
from pathlib import Path

import numpy as np
import pandas as pd

from benchmarks.docsection import SCRATCH, write_table

ROOT = Path(__file__).resolve().parents[2]
RESULTS = ROOT / "benchmarks" / "peers" / "results_peer_bins.json"
CACHE = SCRATCH / "peer_bins"
#: Subsamples of evaluate's W1 per output, and their rows per side (at most half the private table).
W1_REPEATS, W1_ROWS = 20, 1000
COMMAND = "python -m benchmarks.peers.bench_peer_bins --report-only"


def _key(table: str, system: str, bins: int, seed: int, epsilon: float) -> str:
    return f"{table}_{system}_b{bins}_s{seed}_e{epsilon:g}"


def run_one(table: dict, system: str, bins: int, seed: int, epsilon: float) -> dict:
    """One peer run (cached as CSV) and its scores."""
    import privsyn_core as ps

    key = _key(table["name"], system, bins, seed, epsilon)
    record: dict = {"key": key, "table": table["name"], "system": system, "bins": bins, "seed": seed,
                    "epsilon": epsilon, "n": len(table["real"]), "d": len(table["columns"])}
    start = time.perf_counter()
    try:
        result = ps.synthesize(table["real"], system, epsilon, schema=table["schema"], neighbouring="add_remove",
                               n_synthetic=len(table["real"]), rng=seed, bins=bins)
    except ps.PrivsynError as exc:
        return {**record, "seconds": time.perf_counter() - start, "error": f"{type(exc).__name__}: {exc}"}
    record.update(seconds=time.perf_counter() - start, warnings=list(result.warnings),
                  ledger_total=math.fsum(e for _, e in result.ledger))
    CACHE.mkdir(parents=True, exist_ok=True)
    result.data.to_csv(CACHE / f"{key}.csv", index=False)
    return {**record, **score(table, result.data, seed)}


def score(table: dict, synth: pd.DataFrame, seed: int) -> dict:
    """W1 and the robust TVDs (with the value at each resolution) of one output against the private table."""
    from privsyn_core.evaluation.scorecard import evaluate

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        report = evaluate(table["real"], synth, table["schema"], floor=False, seed=seed, repeats=W1_REPEATS,
                          subsample=min(W1_ROWS, len(table["real"]) // 2))
    out = {"w1": float(report["w1"]["value"])}
    for order, name in ((1, "tvd1"), (2, "tvd2")):
        entry = report[f"marginal_tvd_{order}way"]
        out[name] = float(entry["value"])
        out[f"{name}_by_bins"] = {str(k): float(v["value"]) for k, v in entry["per_resolution"].items()}
    return out


def run_grid(args: argparse.Namespace) -> None:
    from benchmarks.bench_real_tables import load_table

    rows = json.loads(RESULTS.read_text()) if RESULTS.exists() else []
    done = {r["key"] for r in rows if "error" not in r}
    for name in args.tables:
        table = load_table(name)
        for system in args.systems:
            for bins in args.bins:
                for seed in args.seeds:
                    key = _key(name, system, bins, seed, args.epsilon)
                    if key in done:
                        continue
                    record = run_one(table, system, bins, seed, args.epsilon)
                    rows = [r for r in rows if r["key"] != key] + [record]
                    RESULTS.write_text(json.dumps(rows, indent=1))
                    print({k: (round(v, 4) if isinstance(v, float) else v) for k, v in record.items()
                           if k not in ("warnings", "tvd1_by_bins", "tvd2_by_bins")}, flush=True)


def rescore() -> None:
    """Score every cached output again (after a change of the metrics), without running OpenDP."""
    from benchmarks.bench_real_tables import load_table

    rows, tables = json.loads(RESULTS.read_text()), {}
    for i, record in enumerate(rows):
        if "error" in record:
            continue
        table = tables.setdefault(record["table"], load_table(record["table"]))
        synth = pd.read_csv(CACHE / f"{record['key']}.csv")
        for column in table["columns"]:
            if column["kind"] == "categorical":
                synth[column["name"]] = synth[column["name"]].astype(str)
        rows[i] = {**record, **score(table, synth, record["seed"])}
        RESULTS.write_text(json.dumps(rows, indent=1))


def report() -> str:
    """Mean over the runs per table, peer and number of bins (W1 with its range over the runs)."""
    rows = [r for r in json.loads(RESULTS.read_text()) if "error" not in r]
    frame = pd.DataFrame(rows)
    resolutions = sorted({int(k) for r in rows for k in r["tvd2_by_bins"]})
    for k in resolutions:
        frame[f"tvd2 @{k}"] = [r["tvd2_by_bins"][str(k)] for r in rows]
    columns = ["w1", "tvd1", "tvd2", *[f"tvd2 @{k}" for k in resolutions], "seconds"]
    grouped = frame.groupby(["table", "system", "bins"])
    means, low, high, runs = grouped[columns].mean(), grouped["w1"].min(), grouped["w1"].max(), grouped.size()
    lines = ["| table | peer | bins | runs | W1 (range over runs) | 1-way TVD | 2-way TVD | "
             + " | ".join(f"2-way @{k}" for k in resolutions) + " | seconds |",
             "|---|---|---|---|---|---|---|" + "---|" * len(resolutions) + "---|"]
    for index, row in means.iterrows():
        table, system, _ = index
        best = {c: means.loc[(table, system)][c].min() for c in ("w1", "tvd1", "tvd2")}
        cells = {c: f"**{row[c]:.3f}**" if np.isclose(row[c], best[c]) else f"{row[c]:.3f}" for c in best}
        lines.append(" | ".join([f"| {table} | {system} | {index[2]} | {runs[index]}",
                                 f"{cells['w1']} ({low[index]:.3f}-{high[index]:.3f})", cells["tvd1"], cells["tvd2"],
                                 *(f"{row[f'tvd2 @{k}']:.3f}" for k in resolutions), f"{row['seconds']:.0f} |"]))
    summary = _pivot(frame)
    failed = [r for r in json.loads(RESULTS.read_text()) if "error" in r]
    note = (f"\n\n{len(failed)} run(s) failed: " + "; ".join(f"{r['key']}: {r['error'][:120]}" for r in failed)
            if failed else "")
    return ("Epsilon 1, add/remove one row, mean over independent runs (OpenDP's noise cannot be seeded); bold: the "
            "best number of bins of that peer on that table. TVDs are `evaluate`'s resolution-robust means (8, 13, "
            "20 and 32 equal bins at 4 offsets) and the 2-way mean at each resolution; W1 the mean over 20 "
            "subsamples of min(1000, n/2) rows. Seconds: wall time of the run on 2 cores shared with other jobs "
            "(loaded by other agents).\n\nW1 / 2-way TVD by number of bins:\n\n" + summary + "\n\nAll figures:\n\n"
            + "\n".join(lines) + note)


def _pivot(frame: pd.DataFrame) -> str:
    """One row per table and peer, one column per number of bins: mean W1 / mean robust 2-way TVD."""
    means = frame.groupby(["table", "system", "bins"])[["w1", "tvd2"]].mean()
    bins = sorted(frame["bins"].unique())
    lines = ["| table | peer | n | " + " | ".join(str(b) for b in bins) + " |", "|---|---|---|" + "---|" * len(bins)]
    for (table, system), block in means.groupby(level=[0, 1]):
        n = int(frame.loc[frame["table"] == table, "n"].iloc[0])
        cells = {b: f"{row['w1']:.3f} / {row['tvd2']:.3f}" for (_, _, b), row in block.iterrows()}
        lines.append(f"| {table} | {system} | {n} | " + " | ".join(cells.get(b, "") for b in bins) + " |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tables", nargs="+", default=["fair", "randhie"])
    parser.add_argument("--systems", nargs="+", default=["opendp_mst", "opendp_aim"])
    parser.add_argument("--bins", nargs="+", type=int, default=[8, 16, 20, 32])
    parser.add_argument("--seeds", nargs="+", type=int, default=[0, 1])
    parser.add_argument("--epsilon", type=float, default=1.0)
    parser.add_argument("--report-only", action="store_true")
    parser.add_argument("--rescore", action="store_true", help="score the cached outputs again, then report")
    args = parser.parse_args()
    if args.rescore:
        rescore()
    elif not args.report_only:
        run_grid(args)
    write_table("peer_bins", report(), COMMAND)


if __name__ == "__main__":
    main()
