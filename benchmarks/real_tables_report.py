"""The page of the real-table benchmark (``docs/benchmark_real_tables.md``) and its full report (not committed).

Written by ``python -m benchmarks.bench_real_tables`` (``--report-only``: from the results alone).

Aggregation per (table, epsilon, system) and metric: the mean over seeds; the interval is the union of the 95%
Student-t interval of that mean over the seeds (with at least 2 seeds) and the mean of the per-run evaluation
intervals (:func:`privsyn_core.evaluation.scorecard.evaluate`: repeated-subsample t-interval for W1, bootstrap for the
TVDs). SDMetrics' score and TSTR have no per-run interval: shown, never ranked.

*Ours* are the private mechanisms of the registry on whole tables (the Boolean-only ``microagg_*`` run on another
table; ``bootstrap`` is not private). The *guide's pick* is what :func:`privsyn_core.evaluation.guide.recommend`
names for the table's shape and epsilon; the *best of ours* on a metric is, among ours, the lowest mean in the first
group of :func:`privsyn_core.evaluation.scorecard.rank_runs` (runs whose intervals overlap share a rank). A comparison
is a verdict on intervals: ``better`` or ``worse`` when they are disjoint, ``tied`` when they overlap.
"""

from __future__ import annotations

import json
import math
from collections import defaultdict
from pathlib import Path

import numpy as np

from benchmarks.bench_real_tables import HOLDOUT
from benchmarks.peers.real_tables import size_class

ROOT = Path(__file__).resolve().parents[1]
PAGE = ROOT / "docs" / "benchmark_real_tables.md"
FULL_REPORT = ROOT / "test-output" / "real_tables.md"
#: The per-table results at the other epsilons (the page details :data:`HEADLINE_EPSILON` only, to stay short).
OTHER_EPSILONS = ROOT / "docs" / "tables" / "real_tables_other_eps.md"
#: The epsilon whose per-table results the page shows (the others: :data:`OTHER_EPSILONS`).
HEADLINE_EPSILON = 1.0
COMMAND = "python -m benchmarks.bench_real_tables --report-only"
SOURCE = "benchmarks/peers/results_real_tables.json"
#: metric -> (label, has a per-run interval)
METRICS = {"w1": ("exact W1", True), "tvd2": ("2-way TVD", True), "tvd1": ("1-way TVD", True),
           "corr_gap": ("corr. gap", True), "sdm": ("SDMetrics", False), "tstr": ("TSTR", False)}
HEADLINE = ("w1", "tvd2", "tvd1")
HIGHER_IS_BETTER = ("sdm", "tstr")
NOT_OURS = ("bootstrap", "microagg_dp", "microagg_anon", "opendp_mst", "opendp_aim", "smartnoise_mst",
            "smartnoise_aim")
#: The peers shown on the page, with their labels.
PAGE_PEERS = {"opendp_mst": "MST (OpenDP)", "opendp_aim": "AIM (OpenDP)", "smartnoise_mst": "MST (SmartNoise)"}
#: The peers with a row per table in the results sections (SmartNoise's MST: in the counts and the full report).
TABLE_PEERS = ("opendp_mst", "opendp_aim")
#: Systems that are not private (never recommended) and the Boolean-only mechanisms (run on other columns).
NOT_PRIVATE = ("bootstrap", "microagg_anon")
BOOLEAN_SYSTEMS = ("microagg_dp", "microagg_anon")
GUIDE_EVIDENCE = ROOT / "privsyn_core" / "evaluation" / "data" / "guide_evidence.json"
SHORT = {"marginal_tree": "mt", "pmm": "pmm", "psmm": "psmm", "srw_tsp": "srw", "kd_grid": "kdg",
         "kd_adaptive": "kda", "dp_histogram": "hist", "laplace_points": "lap", "lowdim_pmm": "ld"}


# ---------------------------------------------------------------------------------------------- aggregation
def _triple(r: dict, metric: str) -> tuple[float, float, float] | None:
    if metric == "sdm":
        value = r.get("sdmetrics", {}).get("overall")
        return None if value is None else (value, math.nan, math.nan)
    if metric == "tstr":
        return (r["tstr"]["value"], math.nan, math.nan) if "tstr" in r else None
    entry = r.get(metric)
    return None if entry is None else (entry["value"], entry.get("low", math.nan), entry.get("high", math.nan))


def aggregate(rows: list[dict]) -> dict:
    """(table, eps, system) -> {seeds, seconds, flags, metric -> {value, low, high}, trtr}."""
    from scipy.stats import t as student_t

    groups = defaultdict(list)
    for r in rows:
        if "error" not in r:
            groups[(r["table"], float(r["epsilon"]), r["system"])].append(r)
    out = {}
    for key, runs in groups.items():
        entry: dict = {"seeds": len(runs), "seconds": float(np.mean([r["seconds"] for r in runs])),
                       "cpu_seconds": float(np.mean([r.get("cpu_seconds", math.nan) for r in runs])),
                       "flags": sorted({f.strip() for r in runs for f in r["coverage_flags"].split(",") if f.strip()}),
                       "trtr": float(np.mean([r["tstr"]["train_on_real"] for r in runs if "tstr" in r] or [math.nan]))}
        for metric, (_, per_run) in METRICS.items():
            triples = [t for t in (_triple(r, metric) for r in runs) if t is not None]
            if not triples:
                continue
            values = np.array([t[0] for t in triples])
            mean, low, high = float(values.mean()), math.nan, math.nan
            if per_run:
                low, high = float(np.mean([t[1] for t in triples])), float(np.mean([t[2] for t in triples]))
                if len(values) >= 2:
                    half = float(student_t.ppf(0.975, len(values) - 1) * values.std(ddof=1) / math.sqrt(len(values)))
                    low, high = max(min(low, mean - half), 0.0), max(high, mean + half)
            entry[metric] = {"value": mean, "low": min(low, mean), "high": max(high, mean)} if per_run \
                else {"value": mean, "low": math.nan, "high": math.nan}
        out[key] = entry
    return out


def verdict(a: dict | None, b: dict | None) -> str:
    """``better`` / ``worse`` (intervals disjoint; lower is better), ``tied`` (overlap), ``n/a``."""
    if not a or not b:
        return "n/a"
    if a["high"] < b["low"]:
        return "better"
    if b["high"] < a["low"]:
        return "worse"
    return "tied"


def best_of_ours(agg: dict, table: str, eps: float, metric: str) -> str | None:
    """Our system with the lowest mean in the first rank group of ``metric``; the highest mean for SDMetrics and
    TSTR (no interval: no rank)."""
    from privsyn_core.evaluation.scorecard import rank_runs

    entries = {s: (e[metric]["value"], e[metric]["low"], e[metric]["high"]) for (t, x, s), e in agg.items()
               if t == table and x == eps and s not in NOT_OURS and metric in e}
    if not entries:
        return None
    if metric in HIGHER_IS_BETTER:
        return max(entries, key=lambda s: entries[s][0])
    ranked = rank_runs(entries)
    first = ranked[ranked["rank"] == 1]
    return str(first.loc[first["value"].idxmin(), "run"])


def guide_kinds(columns: list[dict]) -> list[str]:
    """The guide's kind of every column of a table: boolean (two categories), categorical, integer (few public
    values, one level each: :func:`privsyn_core.data.levelled_codec.level_count`) or numeric."""
    from privsyn_core.data.domain import Schema
    from privsyn_core.data.levelled_codec import level_count

    schema = Schema.from_dict({"version": 1, "columns": columns})
    return ["boolean" if c.kind == "categorical" and len(c.category_list) == 2 else
            "categorical" if c.kind == "categorical" else "integer" if level_count(c) else "numeric"
            for c in schema.columns]


def guide_pick(table: str, columns: list[dict], n: int, eps: float, evidence: tuple | None = None) -> str:
    """What :func:`privsyn_core.evaluation.guide.recommend` names for this table's shape and epsilon with the
    table's own runs left out of its evidence (leave-one-table-out: the guide is checked on a table it has not
    seen)."""
    from privsyn_core.evaluation.guide import recommend

    kinds = guide_kinds(columns)
    return recommend(len(columns), n, kinds, eps, exclude_tables=[table], evidence=evidence).mechanism


def guide_evidence(rows: list[dict]) -> tuple[dict[str, tuple[int, int, int, int]], list[tuple]]:
    """The guide's evidence from the runs: each table's public shape ``(d, n, categorical, integer)`` and, per
    (table, epsilon, private system, metric), the aggregated ``(value, low, high)`` of W1 and the 2-/1-way TVDs."""
    from benchmarks.peers.real_tables import ALL_TABLES

    agg = aggregate(rows)
    shapes = {}
    for table in sorted({t for t, _, _ in agg}):
        n = next(r["n"] for r in rows if r["table"] == table and r["system"] not in BOOLEAN_SYSTEMS)
        kinds = guide_kinds(list(ALL_TABLES[table].columns))
        shapes[table] = (len(kinds), int(n), sum(k in ("categorical", "boolean") for k in kinds),
                         kinds.count("integer"))
    kept = [(key, entry) for key, entry in sorted(agg.items())
            if key[2] not in NOT_PRIVATE and key[2] not in BOOLEAN_SYSTEMS]
    runs = [(t, e, s, m, round(entry[m]["value"], 4), round(entry[m]["low"], 4), round(entry[m]["high"], 4))
            for (t, e, s), entry in kept for m in HEADLINE if m in entry and np.isfinite(entry[m]["low"])]
    runs += [(t, e, s, "seconds", round(entry["seconds"], 3), math.nan, math.nan) for (t, e, s), entry in kept]
    return shapes, runs


def guide_evidence_json(rows: list[dict]) -> str:
    """The guide's evidence (:func:`guide_evidence`) as the JSON text of ``privsyn_core/evaluation/data/``, one run
    per line; a missing interval (the seconds) is ``null``."""
    shapes, runs = guide_evidence(rows)

    def run(entry: tuple) -> str:
        return json.dumps([None if isinstance(v, float) and math.isnan(v) else v for v in entry])

    header = {"generated_by": COMMAND, "source": SOURCE,
              "tables": "name -> [columns, rows of the private table, categorical columns, few-valued integer columns]",
              "runs": "[table, epsilon, system, metric, mean over seeds, interval low, interval high]; metrics: exact "
                      "W1 (unit cube, l-infinity), robust 2-way and 1-way marginal TVD (evaluate), and the mean "
                      "seconds of a synthesis (no interval: null)"}
    return "\n".join(["{", '"about": ' + json.dumps(header, indent=2) + ",", '"tables": {',
                      ",\n".join(f"  {json.dumps(t)}: {json.dumps(list(shape))}" for t, shape in shapes.items()),
                      '},', '"runs": [', ",\n".join(f"  {run(r)}" for r in runs), "]", "}", ""])


def write_guide_evidence(rows: list[dict], path: Path = GUIDE_EVIDENCE) -> None:
    """The guide's evidence file (:func:`guide_evidence_json`) from the runs."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(guide_evidence_json(rows))


# --------------------------------------------------------------------------------------------------- cells
def _cell(m: dict | None, digits: int = 3) -> str:
    if not m:
        return "—"
    if not np.isfinite(m["low"]):
        return f"{m['value']:.{digits}f}".lstrip("0") or "0"
    half = max(m["high"] - m["value"], m["value"] - m["low"])
    return f"{m['value']:.{digits}f}±{half:.{digits}f}".replace("0.", ".")


def _seconds(value: float) -> str:
    return f"{value:.1f}" if value < 100 else f"{value:.0f}"


# ------------------------------------------------------------------------------------------------------ page
def write_page(rows: list[dict], source: str = SOURCE, page: Path = PAGE, full_report: Path = FULL_REPORT,
               other_epsilons: Path | None = None) -> None:
    """The concise page (committed; per-table results at :data:`HEADLINE_EPSILON`, the other epsilons in
    ``other_epsilons``) and the full report (every system and metric, ``test-output/``) from the runs of the results
    file ``source``."""
    from benchmarks.peers.real_tables import ALL_TABLES

    agg = aggregate(rows)
    tables = [t for t in ALL_TABLES if any(r["table"] == t for r in rows)]
    epsilons = sorted({float(r["epsilon"]) for r in rows})
    context = _Context(rows, agg, tables, epsilons)
    if other_epsilons is None:  # beside a page written elsewhere (tests), never into docs/
        other_epsilons = OTHER_EPSILONS if page == PAGE else page.parent / "tables" / OTHER_EPSILONS.name
    shown = [eps for eps in epsilons if eps == HEADLINE_EPSILON] or epsilons[:1]
    others = [eps for eps in epsilons if eps not in shown]
    more = ([f"Per table at eps {', '.join(f'{e:g}' for e in others)}: [tables/{other_epsilons.name}]"
             f"(tables/{other_epsilons.name}).", ""] if others else [])
    text = "\n".join([*_intro(context, source), *_setup(context), *_counts(context), *_guide_check(context),
                      *[line for eps in shown for line in _results(context, eps)], *more, *_failures(context)])
    header = f"<!-- generated by `{COMMAND}`: do not edit by hand -->\n\n"
    page.write_text(f"{header}{text.rstrip()}\n")
    if others:
        other_epsilons.parent.mkdir(parents=True, exist_ok=True)
        details = [line for eps in others for line in _results(context, eps)]
        other_epsilons.write_text(f"{header}Per-table results of [the real-table benchmark](../{page.name}) at the "
                                  f"epsilons its page does not detail (same columns and rules).\n\n"
                                  + "\n".join(details).rstrip() + "\n")
    if page == PAGE:
        write_guide_evidence(rows)
    full_report.parent.mkdir(parents=True, exist_ok=True)
    full_report.write_text("\n".join(_full(context)) + "\n")


class _Context:
    """What every section reads: the runs, their aggregate, the tables present, the epsilons, each table's n, d,
    columns and the guide's pick."""

    def __init__(self, rows: list[dict], agg: dict, tables: list[str], epsilons: list[float]) -> None:
        from benchmarks.peers.real_tables import ALL_TABLES

        self.rows, self.agg, self.tables, self.epsilons = rows, agg, tables, epsilons
        self.shape = {t: next((r["n"], r["d"]) for r in rows if r["table"] == t and r["system"] not in
                              ("microagg_dp", "microagg_anon")) for t in tables}
        self.columns = {t: list(ALL_TABLES[t].columns) for t in tables}
        self.size = {t: size_class(round(self.shape[t][0] / (1 - HOLDOUT)), len(self.columns[t])) for t in tables}
        evidence = guide_evidence(rows)
        self.pick = {(t, e): guide_pick(t, self.columns[t], self.shape[t][0], e, evidence)
                     for t in tables for e in epsilons}
        ours = (evidence[0], [r for r in evidence[1] if r[2] not in NOT_OURS])  # as without the peers installed
        self.pick_ours = {(t, e): guide_pick(t, self.columns[t], self.shape[t][0], e, ours)
                          for t in tables for e in epsilons}

    def entry(self, table: str, eps: float, system: str) -> dict:
        return self.agg.get((table, eps, system), {})


def _intro(c: _Context, source: str) -> list[str]:
    seeds = sorted({int(r["seed"]) for r in c.rows})
    failed = sum("error" in r for r in c.rows)
    carried = sorted({r["reused_from"] for r in c.rows if "reused_from" in r})
    reused = [f"{sum(r.get('reused_from') == note for r in c.rows)} runs {note}." for note in carried]
    return ["# Real tables: our mechanisms against MST and AIM", "",
            f"Generated from `{source}` ({len(c.rows)} runs, {failed} failed; "
            f"{len(c.tables)} table{'s' * (len(c.tables) > 1)}, eps {', '.join(f'{e:g}' for e in c.epsilons)}, seeds "
            f"{', '.join(map(str, seeds))}) by `python -m benchmarks.bench_real_tables` (setup and commands: "
            "its docstring). Times are seconds of one synthesis "
            "on a shared 2-core machine that other jobs were loading: indicative only. Every run, every system and "
            "the per-resolution TVDs: `test-output/real_tables.md` (written by the same command).", *reused, ""]


def _setup(c: _Context) -> list[str]:
    from benchmarks.peers.real_tables import ALL_TABLES

    lines = ["## Tables", "",
             "Bundled in pip packages; public bounds, categories, integrality and atoms set by hand in "
             "`benchmarks/peers/real_tables.py` (a rationale per column), never read off the data. Seeded 70/30 "
             "split: the private table (n) and a hold-out for TSTR.", "",
             "| table | package | size | n | d: num / int / cat | atoms | TSTR target (train on real) |",
             "|---|---|---|---|---|---|---|"]
    for t in c.tables:
        cols = c.columns[t]
        ints = sum(bool(x.get("integer")) for x in cols)
        nums = sum(x["kind"] == "numeric" for x in cols) - ints
        atoms = sum(bool(x.get("atoms")) for x in cols)
        trtr = np.nanmean([e["trtr"] for (tt, _, _), e in c.agg.items() if tt == t] or [math.nan])
        lines.append(f"| {t} | {ALL_TABLES[t].package} | {c.size[t]} | {c.shape[t][0]:,} | {len(cols)}: {nums} / "
                     f"{ints} / {len(cols) - nums - ints} | {atoms} | {ALL_TABLES[t].target} ({trtr:.2f}) |")
    return lines + ["", "## Systems and metrics", "", *_configurations(c), ""]


def _configurations(c: _Context) -> list[str]:
    import privsyn_core as ps
    from privsyn_core.registry import missing_mechanisms

    specs = {s.name: s for s in ps.list_mechanisms()}
    missing = missing_mechanisms()
    ours = sorted({r["system"] for r in c.rows if r["system"] not in NOT_OURS})
    lines = [f"* **Ours**, each on its defaults: {', '.join(f'`{s}`' for s in ours)} "
             f"({', '.join(f'{SHORT[s]} = {s}' for s in ours if s in SHORT and SHORT[s] != s)}); add/remove one "
             "row (replace-one where it is a mechanism's only relation), no `public_n`, as many rows as n. *Guide*: "
             "what `privsyn_core.evaluation.guide.recommend` picks for the table's shape and eps, with that table left "
             "out of its evidence (peers among its candidates, as when they are installed; in the counts against MST, "
             "its pick among ours, as without them); *best*: the best "
             "of ours on each metric (first rank group, lowest mean), named beside its value."]
    for system, label in (*PAGE_PEERS.items(), ("smartnoise_aim", "AIM (SmartNoise)")):
        run = next((r for r in c.rows if r["system"] == system and "error" not in r), None)
        if system in specs:
            params = ", ".join(f"{k} = {v}" for k, v in (run or {}).get("params", {}).items()
                               if k in specs[system].params)
            lines.append(f"* **{label}**: `{system}` through the registry on its defaults"
                         f"{f' ({params})' if params else ''}; {specs[system].guarantee}.")
        elif system in missing:  # a registered peer whose library is not installed where the page is written
            lines.append(f"* **{label}**: `{system}` through the registry on its defaults ({missing[system]}).")
        elif run:
            lines.append(f"* **{label}**: {run['configuration'].split('; public keys')[0]}, on the keys "
                         f"`opendp_mst` cuts (same bins and levels); {run['guarantee']}.")
        else:
            lines.append(f"* **{label}**: no finished run.")
    lines.append("* **Metrics** (real = the private table): exact W1 in the schema's unit cube on 5 subsamples of "
                 "min(500, n/2) rows a side; the resolution-robust mean 2-way and 1-way TVD (16 public grids; few-"
                 "valued integers one bin per value); SDMetrics' QualityReport; TSTR (gradient boosting, hold-out). "
                 "`a±h`: mean over seeds ± the half-width of its 95% interval (union of the seed and per-run "
                 "intervals). Lower is better except SDMetrics and TSTR.")
    return lines


def _counts(c: _Context) -> list[str]:
    """Win/tie/loss of marginal_tree and of the guide's pick among ours against each peer, per eps and metric, on
    every table and on the tables held out of tuning; how many seeds each peer ran."""
    from benchmarks.peers.real_tables import HELD_OUT

    held_out = [t for t in c.tables if t in HELD_OUT]
    peers = [p for p in ("opendp_aim", "opendp_mst", "smartnoise_mst") if any(s == p for _, _, s in c.agg)]
    lines = ["## At least as good as AIM and MST", "",
             "Per eps and metric, on the tables where both ran: `W-T-L` = tables where ours is better (intervals "
             "disjoint), tied (intervals overlap: never ordered) or worse; *at least as good* = W + T; the guide's "
             "pick (among ours) where its counts differ from marginal_tree's; in brackets "
             f"the same on the tables held out of tuning ({', '.join(held_out) or 'none measured'}). "
             + " ".join(_seeds_run(c, peer) for peer in peers), "",
             "| eps | ours | against | exact W1 | 2-way TVD | 1-way TVD |", "|---|---|---|---|---|---|"]
    for eps in c.epsilons:
        for peer in peers:
            shown = []
            for which in ("marginal_tree", "guide"):
                cells = [_win_tie_loss(c, c.tables, eps, peer, which, metric) for metric in HEADLINE]
                held = [_win_tie_loss(c, held_out, eps, peer, which, metric) for metric in HEADLINE]
                row = " | ".join(f"{cell or '—'}" + (f" ({h})" if h else "")
                                 for cell, h in zip(cells, held, strict=True))
                if any(cells) and row not in shown:  # the guide's row only where it differs
                    shown.append(row)
                    lines.append(f"| {eps:g} | {which} | {PAGE_PEERS[peer]} | {row} |")
    return lines + [""]


def _seeds_run(c: _Context, peer: str) -> str:
    """``AIM (OpenDP) ran 3 seeds on k (table, eps), ...``: how much of the peer's grid finished."""
    seeds = [c.agg[key]["seeds"] for key in c.agg if key[2] == peer]
    counts = ", ".join(f"{k} seed{'s' * (k > 1)} on {seeds.count(k)}" for k in sorted(set(seeds), reverse=True))
    return f"{PAGE_PEERS[peer]} ran {counts} (table, eps) pairs."


def _win_tie_loss(c: _Context, tables: list[str], eps: float, peer: str, which: str, metric: str) -> str:
    """``W-T-L of N`` of ``which`` (a system, or ``guide``/``best``) against ``peer`` on ``tables``; empty when
    no table has both."""
    verdicts = [verdict(c.entry(t, eps, _ours(c, t, eps, metric, which)).get(metric),
                        c.entry(t, eps, peer).get(metric)) for t in tables]
    verdicts = [v for v in verdicts if v != "n/a"]
    if not verdicts:
        return ""
    return f"{verdicts.count('better')}-{verdicts.count('tied')}-{verdicts.count('worse')}"


def _guide_check(c: _Context) -> list[str]:
    """Per eps and table size: on how many tables the guide's pick (leave-one-table-out) ties the best private
    system measured there, peers included (its interval overlaps the first rank group's best)."""
    from benchmarks.peers.real_tables import SIZE_CLASSES

    lines = ["## The guide, checked", "",
             "On each table the guide picks with that table's runs left out of its evidence; the pick counts as right "
             "when its interval overlaps that of the best private system measured there (ours or a peer). Last "
             "column: the tables where some private system is right on both metrics (where none is, the best by "
             "2-way TVD and the best by W1 differ beyond their intervals and no pick can be right on both).", "",
             "| eps | tables | 2-way TVD | exact W1 | both | both possible |", "|---|---|---|---|---|---|"]
    for eps in c.epsilons:
        for size in ("all", *SIZE_CLASSES):
            tables = [t for t in c.tables if size in ("all", c.size[t])]
            if tables:
                lines.append(f"| {eps:g} | {size} ({len(tables)}) | " + " | ".join(_guide_counts(c, tables, eps))
                             + " |")
    return lines + [""]


def _guide_counts(c: _Context, tables: list[str], eps: float) -> list[str]:
    """``k of m`` for the pick right on 2-way TVD, on W1, on both, and for some private system right on both."""
    picked = {t: {m: _ties_best(c, t, eps, c.pick[(t, eps)], m) for m in ("tvd2", "w1")} for t in tables}
    counts = [[right[m] for right in picked.values() if right[m] is not None] for m in ("tvd2", "w1")]
    both = [all(right.values()) for right in picked.values() if None not in right.values()]
    possible = [any(all(_ties_best(c, t, eps, s, m) for m in ("tvd2", "w1")) for (u, x, s) in c.agg
                    if u == t and x == eps and s not in NOT_PRIVATE and s not in BOOLEAN_SYSTEMS)
                for t in tables]
    return [f"{sum(v)} of {len(v)}" for v in (*counts, both, possible)]


def _ties_best(c: _Context, table: str, eps: float, system: str, metric: str) -> bool | None:
    """``system``'s ``metric`` on ``table`` overlaps the best private system's there (``None``: not measured)."""
    best = best_private(c.agg, table, eps, metric)
    mine = c.entry(table, eps, system).get(metric)
    return None if best is None or not mine else verdict(mine, c.entry(table, eps, best)[metric]) != "worse"


def best_private(agg: dict, table: str, eps: float, metric: str) -> str | None:
    """The private system (ours or a peer) with the lowest mean in the first rank group of ``metric``."""
    from privsyn_core.evaluation.scorecard import rank_runs

    entries = {s: (e[metric]["value"], e[metric]["low"], e[metric]["high"]) for (t, x, s), e in agg.items()
               if t == table and x == eps and s not in NOT_PRIVATE and s not in BOOLEAN_SYSTEMS and metric in e}
    if not entries:
        return None
    ranked = rank_runs(entries)
    first = ranked[ranked["rank"] == 1]
    return str(first.loc[first["value"].idxmin(), "run"])


def _ours(c: _Context, table: str, eps: float, metric: str, which: str) -> str:
    """Our system on ``table``: the guide's pick among ours (the peers left out of its evidence), our best, or the
    system named ``which``."""
    if which == "guide":
        return c.pick_ours[(table, eps)]
    return (best_of_ours(c.agg, table, eps, metric) or "") if which == "best" else which


def _results(c: _Context, eps: float) -> list[str]:
    lines = [f"## eps = {eps:g}", "",
             "| table | system | exact W1 | 2-way TVD | 1-way TVD | SDMetrics | TSTR | s |",
             "|---|---|---|---|---|---|---|---|"]
    for t in c.tables:
        pick = c.pick[(t, eps)]
        best = {m: best_of_ours(c.agg, t, eps, m) for m in (*HEADLINE, "sdm", "tstr")}
        if all(name in (pick, None) for name in best.values()):  # the guide's pick is the best of ours throughout
            rows = [_system_row(c, t, eps, pick, f"guide = best: {pick}")]
        else:
            rows = [_system_row(c, t, eps, pick, f"guide: {pick}"), _best_row(c, t, eps, pick, best)]
        rows += [_system_row(c, t, eps, peer, PAGE_PEERS[peer]) for peer in TABLE_PEERS if _tried(c, t, eps, peer)]
        lines += [f"| {t if i == 0 else ''} | {row} |" for i, row in enumerate(rows)]
    return lines + [""]


def _best_row(c: _Context, table: str, eps: float, pick: str, best: dict[str, str | None]) -> str:
    """The best of ours per metric, named; "= guide" where it is the guide's pick."""
    cells, times = [], []
    for metric, name in best.items():
        if name is None or name == pick:
            cells.append("—" if name is None else "= guide")
            continue
        digits = 2 if metric in HIGHER_IS_BETTER else 3
        cells.append(f"{_cell(c.entry(table, eps, name).get(metric), digits)} {SHORT.get(name, name)}")
        times.append(c.entry(table, eps, name)["seconds"])
    return "best | " + " | ".join(cells) + (f" | ≤{_seconds(max(times))}" if times else " | ")


def _tried(c: _Context, table: str, eps: float, system: str) -> bool:
    """Whether the system ran (or failed) on this table at this eps: systems never run get no row."""
    return any((r["table"], float(r["epsilon"]), r["system"]) == (table, eps, system) for r in c.rows)


def _system_row(c: _Context, table: str, eps: float, system: str, label: str) -> str:
    e = c.entry(table, eps, system)
    if not e:
        errors = [r["error"] for r in c.rows if (r["table"], float(r["epsilon"]), r["system"]) == (table, eps, system)
                  and "error" in r]
        why = f"failed ({errors[0].split(':')[0]})" if errors else "not run"
        return f"{label} | {why} | | | | | "
    cells = [_cell(e.get(m), 2 if m in HIGHER_IS_BETTER else 3) for m in (*HEADLINE, "sdm", "tstr")]
    return f"{label} | " + " | ".join(cells) + f" | {_seconds(e['seconds'])}"


def _failures(c: _Context) -> list[str]:
    errors = [r for r in c.rows if "error" in r]
    if not errors:
        return ["No run failed."]
    by_system = defaultdict(list)
    for r in errors:
        by_system[r["system"]].append(r)
    lines = [f"## Failed runs ({len(errors)} of {len(c.rows)})", ""]
    for system, runs in sorted(by_system.items()):
        where = sorted({f"{r['table']} eps {r['epsilon']:g}" for r in runs})
        lines.append(f"* `{system}` ({len(runs)}: {', '.join(where[:4])}{', ...' if len(where) > 4 else ''}): "
                     f"{' '.join(runs[0]['error'].split())[:160]}")
    return lines


# ------------------------------------------------------------------------------------------------ full report
def _full(c: _Context) -> list[str]:
    lines = ["# Real tables: every run (not committed; the page is docs/benchmark_real_tables.md)", ""]
    for t in c.tables:
        for eps in c.epsilons:
            systems = sorted({s for (tt, e, s) in c.agg if tt == t and e == eps})
            lines += [f"## {t}, eps = {eps:g} (guide: {c.pick[(t, eps)]})", "",
                      "| system | seeds | " + " | ".join(label for label, _ in METRICS.values())
                      + " | W1 of all rows | 2-way TVD per resolution | s | CPU s | flags |",
                      "|---" * (len(METRICS) + 7) + "|"]
            for s in systems:
                e = c.entry(t, eps, s)
                runs = [r for r in c.rows if (r["table"], float(r["epsilon"]), r["system"]) == (t, eps, s)]
                lines.append(f"| {s} | {e['seeds']} | " + " | ".join(_cell(e.get(m)) for m in METRICS)
                             + f" | {_full_sample(runs)} | {_per_resolution(runs)} | {_seconds(e['seconds'])} | "
                             f"{_seconds(e['cpu_seconds'])} | {', '.join(e['flags'])[:80]} |")
            floors = [r["w1"].get("floor") for r in c.rows if (r["table"], float(r["epsilon"])) == (t, eps)
                      and r["system"] == "bootstrap" and "w1" in r]
            if floors:
                lines.append(f"| *floor (real vs real)* | | {np.mean(floors):.3f} |" + " |" * (len(METRICS) + 4))
            lines.append("")
    return lines + _failures(c)


def _per_resolution(runs: list[dict]) -> str:
    """Mean over the runs of the 2-way TVD at each resolution of the robust grids."""
    found = [r["tvd2"]["per_resolution"] for r in runs if "per_resolution" in r.get("tvd2", {})]
    if not found:
        return ""
    return ", ".join(f"{k}: {np.mean([f[k] for f in found]):.3f}" for k in found[0])


def _full_sample(runs: list[dict]) -> str:
    """Mean over the runs of W1 between all evaluated rows, where evaluate kept it (exact, or within its bound)."""
    found = [r["w1_full"] for r in runs if "w1_full" in r]
    if not found:
        return ""
    return f"{np.mean([f['value'] for f in found]):.3f} ({found[0]['method']}, {len(found)} of {len(runs)} runs)"
