"""marginal_tree against OpenDP's MST, pmm and psmm on real tables; and its run time in n.

Usage (from the repository root; the peers' venv needs requirements-bench.txt plus sdmetrics and the table packages of
requirements-real-tables.txt)::

    python benchmarks/bench_marginal_tree.py --peer-python .venv-peers/bin/python              # quality grid
    python benchmarks/bench_marginal_tree.py --timing                                          # time only
    PYTHONPATH=. .venv-peers/bin/python benchmarks/bench_marginal_tree.py --narrow-mixed       # issue 15, goal 2

Narrow mixed (``--narrow-mixed``): 2-3 column subsets of the real tables of ``benchmarks/bench_real_tables.py``
with one categorical column (private 70% split), marginal_tree and psmm on defaults under add/remove, 5 seeds,
exact W1 (POT, Chebyshev cost in the unit cube of the schema) on the whole tables, mean +- 1.96 standard errors.

Quality: every table of ``benchmarks/peers/real_tables.py`` (public bounds by hand), every epsilon and seed;
ours under add/remove (MST's relation), MST on 16 public bins per numeric column (``run_opendp.py``).
Scores: mean 2-way and 1-way TVD (:func:`privsyn_core.evaluation.marginals.marginal_tvd`, 20 bins per numeric column),
exact W1 in the encoded cube (Chebyshev cost, POT ``emd2``) between uniform subsamples of ``--w1-rows`` rows
of each side, averaged over 3 subsamples, and SDMetrics' QualityReport score (run in the peers' venv).
Results go to ``--out/results.json`` and a Markdown table on stdout.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from a checkout without installing
import privsyn_core as ps
from privsyn_core.data.domain import Schema
from privsyn_core.evaluation.marginals import marginal_tvd

ROOT = Path(__file__).resolve().parents[1]

PEERS = ROOT / "benchmarks" / "peers"
QUALITY_SCRIPT = r"""
import json, sys, warnings
import pandas as pd
from sdmetrics.reports.single_table import QualityReport
warnings.filterwarnings("ignore")
jobs = json.load(open(sys.argv[1]))
out = {}
for key, (real, synth, meta) in jobs.items():
    schema = json.load(open(meta))["schema"]["columns"]
    dtype = {c["name"]: str for c in schema if c["kind"] == "categorical"}
    r, s = pd.read_csv(real, dtype=dtype), pd.read_csv(synth, dtype=dtype)
    r = r.sample(min(len(r), 2000), random_state=0)
    s = s.sample(min(len(s), 2000), random_state=0)
    md = {"columns": {c["name"]: {"sdtype": "categorical" if c["kind"] == "categorical" else "numerical"}
                      for c in schema}}
    report = QualityReport()
    report.generate(r, s[r.columns], md, verbose=False)
    out[key] = report.get_score()
json.dump(out, open(sys.argv[2], "w"))
"""


def load(folder: Path) -> tuple[pd.DataFrame, Schema, dict]:
    meta = json.loads((folder / "meta.json").read_text())
    dtype = {c["name"]: str for c in meta["schema"]["columns"] if c["kind"] == "categorical"}
    return pd.read_csv(folder / "real.csv", dtype=dtype), Schema.from_dict(meta["schema"]), meta


def run_ours(system: str, real: pd.DataFrame, schema: Schema, eps: float, seed: int) -> tuple[pd.DataFrame, float]:
    start = time.perf_counter()
    result = ps.synthesize(real, system, eps, schema=schema, neighbouring="add_remove", rng=seed)
    return result.data, time.perf_counter() - start


def run_mst(folder: Path, eps: float, seed: int, peer_python: str) -> tuple[pd.DataFrame | None, float, str]:
    """OpenDP MST in the peers' venv; OpenDP 0.16 sometimes refuses its own split by one ulp ('insufficient
    budget ... 0.05 > 0.04999...'), then it is retried at epsilon (1 + 1e-9) and that is recorded."""
    work = folder / f"mst_eps{eps:g}_s{seed}"
    work.mkdir(exist_ok=True)
    for name in ("real.csv", "meta.json"):
        if not (work / name).exists():
            (work / name).symlink_to(folder / name)
    note = ""
    for factor in (1.0, 1 + 1e-9):
        (work / "synth.csv").unlink(missing_ok=True)
        subprocess.run([peer_python, str(PEERS / "run_opendp.py"), "--algorithm", "mst", "--dataset", folder.name,
                        "--epsilon", repr(eps * factor), "--seed", str(seed), "--out", str(work)],
                       cwd=PEERS, capture_output=True, text=True, timeout=900, check=False)
        if (work / "synth.csv").exists():
            run = json.loads((work / "run.json").read_text())
            _, schema, _ = load(folder)
            dtype = {c.name: str for c in schema.columns if c.kind == "categorical"}
            return pd.read_csv(work / "synth.csv", dtype=dtype), run["seconds"], note
        note = "retried at epsilon (1 + 1e-9): OpenDP refused its own split by one ulp"
    return None, float("nan"), "failed"


def exact_w1(real: pd.DataFrame, synth: pd.DataFrame, schema: Schema, rows: int, repeats: int = 3) -> float:
    """Mean over ``repeats`` of the exact W1 (Chebyshev, POT emd2) between uniform subsamples of both sides."""
    import ot

    x, _ = schema.encode(real)
    y, _ = schema.encode(synth[schema.names])
    rng = np.random.default_rng(7)
    values = []
    for _ in range(repeats):
        a = x[rng.choice(len(x), min(rows, len(x)), replace=False)]
        b = y[rng.choice(len(y), min(rows, len(y)), replace=False)]
        cost = ot.dist(a, b, metric="chebyshev")
        values.append(ot.emd2(np.full(len(a), 1 / len(a)), np.full(len(b), 1 / len(b)), cost, numItermax=10 ** 7))
    return float(np.mean(values))


def scores(real: pd.DataFrame, synth: pd.DataFrame, schema: Schema, w1_rows: int) -> dict:
    out = {"tvd1": float(marginal_tvd(real, synth, 1, schema=schema)["tvd"].mean()),
           "w1": exact_w1(real, synth, schema, w1_rows)}
    if len(schema.names) > 1:
        out["tvd2"] = float(marginal_tvd(real, synth, 2, schema=schema)["tvd"].mean())
    return out


def quality_grid(args: argparse.Namespace) -> list[dict]:
    if not (args.out / "fair" / "meta.json").exists():
        subprocess.run([args.peer_python, str(PEERS / "real_tables.py"), str(args.out)], check=True)
    rows: list[dict] = []
    jobs: dict = {}
    tables = args.tables or sorted(p.name for p in args.out.iterdir() if (p / "meta.json").exists())
    for table in tables:
        folder = args.out / table
        real, schema, _ = load(folder)
        d = len(schema.names)
        systems = args.systems or (["marginal_tree", "pmm", "opendp_mst"] + (["psmm"] if d <= 3 else []))
        for eps in args.epsilons:
            for seed in args.seeds:
                for system in systems:
                    if system == "opendp_mst":
                        if eps != 1.0 and seed != args.seeds[0]:
                            continue  # MST takes 10-40 s a run: 3 seeds at eps = 1, one seed elsewhere
                        synth, seconds, note = run_mst(folder, eps, seed, args.peer_python)
                    else:
                        try:
                            synth, seconds = run_ours(system, real, schema, eps, seed)
                            note = ""
                        except ps.PrivsynError as exc:
                            synth, seconds, note = None, float("nan"), f"refused: {exc}"
                    record = {"table": table, "d": d, "n": len(real), "system": system, "epsilon": eps,
                              "seed": seed, "seconds": seconds, "note": note}
                    if synth is not None:
                        path = folder / f"synth_{system}_eps{eps:g}_s{seed}.csv"
                        synth.to_csv(path, index=False)
                        record.update(scores(real, synth, schema, args.w1_rows))
                        jobs[len(rows)] = [str(folder / "real.csv"), str(path), str(folder / "meta.json")]
                    rows.append(record)
                    print(json.dumps(record), flush=True)
    if not args.no_quality:
        (args.out / "quality_jobs.json").write_text(json.dumps(jobs))
        (args.out / "quality.py").write_text(QUALITY_SCRIPT)
        subprocess.run([args.peer_python, str(args.out / "quality.py"), str(args.out / "quality_jobs.json"),
                        str(args.out / "quality.json")], check=True)
        for key, value in json.loads((args.out / "quality.json").read_text()).items():
            rows[int(key)]["quality"] = value
    (args.out / "results.json").write_text(json.dumps(rows, indent=1))
    return rows


def summary(rows: list[dict]) -> str:
    frame = pd.DataFrame(rows)
    metrics = [m for m in ("tvd2", "tvd1", "w1", "quality", "seconds") if m in frame]
    table = frame.groupby(["table", "d", "epsilon", "system"])[metrics].agg(["mean", "std", "count"])
    lines = ["| table | d | eps | system | " + " | ".join(metrics) + " |", "|---" * (4 + len(metrics)) + "|"]
    for (name, d, eps, system), row in table.iterrows():
        cells = [f"{row[(m, 'mean')]:.3f} ± {0 if np.isnan(row[(m, 'std')]) else row[(m, 'std')]:.3f}"
                 if row[(m, "count")] else "—" for m in metrics]
        lines.append(f"| {name} | {d} | {eps:g} | {system} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


#: (rows, columns) of the timing runs: the speed targets are 10 s at 10^5 x 10 and 60 s, 2 GB at 10^6 x 20 (2 cores).
TIMING_SIZES = ((10 ** 4, 10), (10 ** 5, 10), (10 ** 6, 10), (10 ** 6, 20))


def timing(sizes: tuple[tuple[int, int], ...] = TIMING_SIZES, repeats: int = 3) -> None:
    """Seconds and peak memory of marginal_tree on ``n x d`` mixed data, eps = 1, replace; each size in its own
    process (so the peak resident memory is that run's), best of ``repeats`` (one at 10^6 rows)."""
    for n, d in sizes:
        runs = 1 if n >= 10 ** 6 else repeats
        out = subprocess.run([sys.executable, __file__, "--timing-one", str(n), str(d), str(runs)], check=True,
                             capture_output=True, text=True).stdout.strip()
        print(out, flush=True)


def timing_one(n: int, d: int, runs: int) -> str:
    """One timing line: half numeric, half 4-category columns, all following one latent uniform variable."""
    import resource

    from privsyn_core.data.domain import Column

    rng = np.random.default_rng(0)
    cols = [Column(f"x{j}", "numeric", lo=0.0, hi=1.0) if j % 2 == 0
            else Column(f"c{j}", "categorical", categories=("a", "b", "c", "d")) for j in range(d)]
    schema = Schema(tuple(cols))
    base = rng.random(n)
    frame = pd.DataFrame({c.name: (np.clip(base + 0.1 * rng.standard_normal(n), 0, 1) if c.kind == "numeric"
                                   else np.array(["a", "b", "c", "d"])[np.minimum((base * 4).astype(int), 3)])
                          for c in cols})
    best = min(_timed(frame, schema, seed) for seed in range(runs))
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2 ** 20  # KiB -> GiB (Linux)
    return (f"n = {n:>9,}  d = {d:>2}: marginal_tree {best:.2f} s (best of {runs}; encode + mechanism + decode), "
            f"peak resident memory {peak:.2f} GiB (with the input table)")


def _timed(frame: pd.DataFrame, schema: Schema, seed: int) -> float:
    start = time.perf_counter()
    ps.synthesize(frame, "marginal_tree", 1.0, schema=schema, rng=seed)
    return time.perf_counter() - start


#: 2-3 column subsets with one categorical column (issue 15: "on 2-3 column tables within 20% of psmm in W1").
NARROW_MIXED = (("seattle_weather", ("weather", "temp_max")),
                ("seattle_weather", ("weather", "temp_max", "precipitation")),
                ("k401ksubs", ("e401k", "inc")), ("k401ksubs", ("e401k", "inc", "nettfa")),
                ("alcohol", ("health", "age")), ("alcohol", ("region", "age", "unemrate")))


def narrow_mixed(systems: list[str], eps: float, seeds: list[int]) -> list[dict]:
    """Exact W1 of each system on each subset of :data:`NARROW_MIXED`, one line per (subset, system)."""
    from benchmarks.bench_real_tables import load_table
    from privsyn_core.evaluation.distances import w1

    rows = []
    for name, cols in NARROW_MIXED:
        table = load_table(name)
        real, schema = table["real"][list(cols)], table["schema"].select(list(cols))
        unit = np.asarray(schema.encode(real)[0], dtype=float)
        for system in systems:
            values = []
            for seed in seeds:
                out = ps.synthesize(real, system, eps, schema=schema, neighbouring="add_remove",
                                    n_synthetic=len(real), rng=seed)
                values.append(float(w1(unit, np.asarray(schema.encode(out.data)[0], dtype=float))))
            v = np.array(values)
            half = 1.96 * v.std(ddof=1) / np.sqrt(len(v)) if len(v) > 1 else float("nan")
            rows.append({"table": name, "columns": list(cols), "system": system, "epsilon": eps, "w1": values,
                         "mean": float(v.mean()), "half_width": float(half)})
            print(f"{name:>9} {'+'.join(cols):>45} n={len(real)} {system:>14} W1={v.mean():.4f} +- {half:.4f}",
                  flush=True)
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--peer-python", default=sys.executable, help="interpreter with the peers installed")
    parser.add_argument("--out", type=Path, default=Path(tempfile.gettempdir()) / "mt_bench")
    parser.add_argument("--epsilons", type=float, nargs="+", default=[1.0, 0.5, 4.0])
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--tables", nargs="+", default=None)
    parser.add_argument("--systems", nargs="+", default=None)
    parser.add_argument("--w1-rows", type=int, default=1000)
    parser.add_argument("--no-quality", action="store_true")
    parser.add_argument("--timing", action="store_true",
                        help="only the run time and peak memory at n = 10^4 .. 10^6, d = 10 and 20")
    parser.add_argument("--timing-one", nargs=3, type=int, metavar=("N", "D", "RUNS"), help=argparse.SUPPRESS)
    parser.add_argument("--summary-only", action="store_true", help="print the table of --out/results.json")
    parser.add_argument("--narrow-mixed", action="store_true",
                        help="marginal_tree vs psmm, exact W1, on 2-3 column real subsets with a categorical column")
    args = parser.parse_args()
    if args.narrow_mixed:
        rows = narrow_mixed(args.systems or ["marginal_tree", "psmm"], args.epsilons[0], args.seeds if
                            args.seeds != [0, 1, 2] else [0, 1, 2, 3, 4])
        args.out.mkdir(parents=True, exist_ok=True)
        (args.out / "narrow_mixed.json").write_text(json.dumps(rows, indent=1))
        return
    if args.timing_one:
        print(timing_one(*args.timing_one))
        return
    if args.timing:
        timing()
        return
    rows = json.loads((args.out / "results.json").read_text()) if args.summary_only else quality_grid(args)
    print(summary(rows))


if __name__ == "__main__":
    main()
