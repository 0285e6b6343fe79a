"""1-way and 2-way marginals of one mechanism on the real tables (issue 39): per-column 1-way TVD, 2-way TVD, W1.

Usage (repository root)::

    python -m benchmarks.bench_one_way --tables cars ceosal2 --epsilons 0.5 1 4 --seeds 0 1 2 --out OUT.json
    python -m benchmarks.bench_one_way --system opendp_aim --tables cars --epsilons 1 --seeds 0 --out AIM.json

Tables and split as :func:`benchmarks.bench_real_tables.load_table` (70% private, seed 12345); relation add/remove
where the mechanism supports it.  Metrics against the private table, all on public grids:

* ``tvd1``: per column, the 1-way TVD (:func:`privsyn_core.evaluation.marginals.marginal_tvd`) averaged over
  :data:`ONE_WAY_BINS` equal bins of the schema's bounds (one bin per category or few-valued integer), and its mean
  over the columns;
* ``tvd2``: the mean 2-way TVD over all pairs, averaged over :data:`TWO_WAY_BINS`;
* ``w1``: W1 (l-infinity) between the encoded tables in ``[0,1]^d``, exact (POT), on all rows up to
  :data:`W1_ROWS` a side (a seeded subsample beyond).

Results are appended to ``--out`` (JSON list of records), one per (table, system, eps, seed).
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numpy as np
import pandas as pd

ONE_WAY_BINS = (8, 13, 20, 32)
TWO_WAY_BINS = (8, 13)
W1_ROWS = 1000


def scores(real: pd.DataFrame, synth: pd.DataFrame, schema, seed: int) -> dict:
    """Per-column 1-way TVD (mean over :data:`ONE_WAY_BINS`), mean 2-way TVD and W1 of one output."""
    from privsyn_core.evaluation.distances import w1
    from privsyn_core.evaluation.marginals import marginal_tvd

    one = pd.concat([marginal_tvd(real, synth, 1, bins=b, schema=schema) for b in ONE_WAY_BINS])
    per_column = one.groupby("column", sort=False)["tvd"].mean()
    two = np.mean([marginal_tvd(real, synth, 2, bins=b, schema=schema)["tvd"].mean() for b in TWO_WAY_BINS])
    rng = np.random.default_rng(seed)
    a, b = schema.encode(real)[0], schema.encode(synth)[0]
    a = a[rng.permutation(len(a))[:W1_ROWS]]
    b = b[rng.permutation(len(b))[:W1_ROWS]]
    return {"tvd1": float(per_column.mean()), "tvd1_columns": {k: float(v) for k, v in per_column.items()},
            "tvd2": float(two), "w1": float(w1(a, b, method="exact", max_entries=W1_ROWS ** 2 + 1))}


def run(table: dict, system: str, eps: float, seed: int, params: dict) -> dict:
    import privsyn_core as ps

    spec = ps.get_mechanism(system)
    relation = "add_remove" if "add_remove" in spec.neighbouring else spec.neighbouring[0]
    start = time.perf_counter()
    result = ps.synthesize(table["real"], system, eps, schema=table["schema"], neighbouring=relation, rng=seed,
                           n_synthetic=len(table["real"]), **params)
    seconds = time.perf_counter() - start
    return {"table": table["name"], "system": system, "eps": eps, "seed": seed, "n": len(table["real"]),
            "seconds": seconds, "params": params, **scores(table["real"], result.data, table["schema"], seed)}


def main() -> None:
    from benchmarks.bench_real_tables import load_table

    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tables", nargs="+", required=True)
    parser.add_argument("--system", default="marginal_tree")
    parser.add_argument("--epsilons", type=float, nargs="+", default=[0.5, 1.0, 4.0])
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--params", type=json.loads, default={}, help="mechanism parameters, JSON")
    parser.add_argument("--label", default=None, help="system label in the records (default: --system)")
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()
    records = json.loads(args.out.read_text()) if args.out.exists() else []
    for name in args.tables:
        table = load_table(name)
        for eps in args.epsilons:
            for seed in args.seeds:
                record = run(table, args.system, eps, seed, args.params)
                record["system"] = args.label or args.system
                records.append(record)
                args.out.write_text(json.dumps(records, indent=1))
                print(f"{name} {record['system']} eps={eps:g} seed={seed}: tvd1 {record['tvd1']:.3f} "
                      f"tvd2 {record['tvd2']:.3f} w1 {record['w1']:.4f} ({record['seconds']:.1f} s)", flush=True)


if __name__ == "__main__":
    main()
