"""Reproduction report: every registered mechanism's W1 against n and epsilon, and the KD-tree paper's MMD protocol.

Usage::

    python -m benchmarks.reproduce [--quick] [--out test-output/reproduction/reproduction.md]
                                   [--figures test-output/reproduction/figures]

Writes the full report (tables, slopes, rate notes, the MMD protocol) and Plotly figures ``repro_*.html`` with the
raw numbers ``repro_*.csv`` under ``test-output/reproduction/`` (not committed), and, unless ``--quick``, the
slopes, rate notes and mean W1 against n into ``docs/tables/w1_rates.md`` (linked from docs/mechanisms.md).

* W1 sweeps: every continuous mechanism of ``ps.list_mechanisms()`` (Boolean ones take 0/1 tables and are left
  out; the non-private ``bootstrap`` reference only in the n sweep, where it shows the resampling floor) on
  ``datasets.uniform_cube`` and ``datasets.two_blobs`` (the PMM authors' script: centres 0.4*1 and 0.7*1, sd 0.1
  and 0.05) in d = 2 (d = 1 for mechanisms that work on one column only), public domain ``[0, 1]^d``, replace-one
  neighbours, default parameters, ``n_synthetic = n``. W1 is the l-infinity W1 between the real rows and the
  synthetic rows in unit coordinates, exact (POT) at these sizes; seed s spawns independent data and
  mechanism streams.
  The log-log least-squares slope of mean W1 against n (and against epsilon) is shown beside the slope of the
  mechanism's theoretical rate (``privsyn_core.reporting.report.theoretical_rate``) over the same grid.
* MMD protocol (KD-tree paper, spec A.10): ``benchmarks/balog.py``, beside Balog's published best numbers.
* Timings: ``bench_kd.py --table`` and ``bench_metrics.py --table`` write ``docs/tables/kd_timings.md`` and
  ``docs/tables/w1_timings.md``; the sections ``kd-timings`` and ``w1-timings`` of an earlier report are kept.

New mechanisms appear without code changes. ``--quick`` runs fewer sizes, seeds and Balog settings.
``--only a,b`` regenerates the W1 rows of the named mechanisms alone (when only their outputs changed): the other
rows come from the existing ``repro_w1_sweeps.csv`` and the MMD section from the existing report, and the header
says so.
"""

from __future__ import annotations

import argparse
import math
import os
import re
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
import plotly.graph_objects as go

import privsyn_core as ps
from benchmarks import balog
from benchmarks.docsection import write_table
from benchmarks.w1_claims import KIND_LABELS
from privsyn_core.data import datasets
from privsyn_core.errors import PrivsynError
from privsyn_core.evaluation.distances import w1
from privsyn_core.reporting.report import theoretical_rate

DATASETS = {"uniform": datasets.uniform_cube, "two_blobs": datasets.two_blobs}
W1_BUDGET = 16_000_000  # cost-matrix entries: exact W1 up to 4000 x 4000 rows
KEPT_SECTIONS = ("kd-timings", "w1-timings")  # of an earlier report; bench_kd/bench_metrics --table write docs/tables


@dataclass(frozen=True)
class Config:
    """Sizes and seeds of one report."""

    ns: tuple[int, ...]  # n sweep at epsilon = 1
    epsilons: tuple[float, ...]  # epsilon sweep at n = n_epsilon
    n_epsilon: int
    seeds: int
    balog_dims: tuple[int, ...]  # () skips the MMD protocol
    balog_seeds: int
    balog_quick: bool


QUICK = Config(ns=(250, 500, 1000), epsilons=(0.25, 1.0, 4.0), n_epsilon=1000, seeds=2, balog_dims=(2, 5),
               balog_seeds=2, balog_quick=True)
FULL = Config(ns=(250, 500, 1000, 2000, 4000), epsilons=(0.25, 0.5, 1.0, 2.0, 4.0), n_epsilon=2000, seeds=5,
              balog_dims=(2, 5), balog_seeds=5, balog_quick=False)


# -- W1 sweeps ---------------------------------------------------------------------------------------
def continuous_mechanisms() -> list[ps.MechanismSpec]:
    """Every registered mechanism of ours that takes continuous data, in the contract's order (the peers, implemented
    by another library, have their own benchmark: benchmarks/bench_real_tables.py)."""
    return [s for s in ps.list_mechanisms() if s.data_kind == "continuous" and s.implemented_by is None]


def run_w1(spec: ps.MechanismSpec, data: str, d: int, n: int, epsilon: float, seed: int) -> float:
    """W1 between ``n`` rows of ``data`` and as many synthetic rows; ``seed`` spawns independent data and mechanism
    streams (one seed for both would hand the mechanism the very uniforms the data were made of)."""
    data_rng, mechanism_rng = (np.random.default_rng(s) for s in np.random.SeedSequence(seed).spawn(2))
    X = DATASETS[data](n, d, rng=data_rng)
    result = ps.synthesize(X, spec.name, epsilon, schema=ps.unit_schema(d), n_synthetic=n, rng=mechanism_rng)
    return float(w1(X, np.asarray(result.unit_rows, dtype=float), max_entries=W1_BUDGET))


def dimension_for(spec: ps.MechanismSpec) -> int | None:
    """d = 2 when the mechanism accepts it, else d = 1, else None (it fails on both)."""
    for d in (2, 1):
        try:
            run_w1(spec, "uniform", d, 64, 1.0, 0)
            return d
        except PrivsynError:
            continue
    return None


def w1_sweeps(config: Config, progress=print, only: tuple[str, ...] = ()) -> pd.DataFrame:
    """Mean and sd of W1 over seeds, one row per (mechanism, data, sweep point); ``only``: those mechanisms alone."""
    rows = []
    for spec in continuous_mechanisms():
        if only and spec.name not in only:
            continue
        d = dimension_for(spec)
        if d is None:
            progress(f"  {spec.name}: runs on neither d = 2 nor d = 1 at n = 64; left out")
            continue
        grid = [("n", n, 1.0) for n in config.ns]
        if spec.is_private:
            grid += [("epsilon", config.n_epsilon, e) for e in config.epsilons]
        for data in DATASETS:
            start = time.perf_counter()
            for sweep, n, epsilon in grid:
                values = [run_w1(spec, data, d, n, epsilon, seed) for seed in range(config.seeds)]
                rows.append({"mechanism": spec.name, "private": spec.is_private, "data": data, "d": d, "sweep": sweep,
                             "n": n, "epsilon": epsilon, "mean_w1": float(np.mean(values)),
                             "sd_w1": float(np.std(values, ddof=1)) if len(values) > 1 else 0.0})
            progress(f"  {spec.name} on {data} (d = {d}): {time.perf_counter() - start:.1f} s")
    return pd.DataFrame(rows)


def loglog_slope(x: np.ndarray, y: np.ndarray) -> float:
    """Least-squares slope of log y against log x (NaN if some y is not positive)."""
    if np.any(np.asarray(y, float) <= 0):
        return math.nan
    return float(np.polyfit(np.log(np.asarray(x, float)), np.log(np.asarray(y, float)), 1)[0])


def slopes_table(results: pd.DataFrame) -> pd.DataFrame:
    """Measured and theoretical log-log slopes per (mechanism, data)."""
    rows = []
    for (mechanism, data), group in results.groupby(["mechanism", "data"], sort=False):
        d = int(group["d"].iloc[0])
        by_n, by_eps = group[group.sweep == "n"], group[group.sweep == "epsilon"]
        row = {"mechanism": mechanism, "data": data, "d": d, "slope_n": loglog_slope(by_n.n, by_n.mean_w1),
               "theory_slope_n": _theory_slope(mechanism, d, by_n, "n"), "slope_epsilon": None,
               "theory_slope_epsilon": None}
        if len(by_eps):
            row.update(slope_epsilon=loglog_slope(by_eps.epsilon, by_eps.mean_w1),
                       theory_slope_epsilon=_theory_slope(mechanism, d, by_eps, "epsilon"))
        rows.append(row)
    return pd.DataFrame(rows)


def _theory_slope(mechanism: str, d: int, group: pd.DataFrame, over: str) -> float | None:
    rates = [theoretical_rate(mechanism, e, int(n), d) for n, e in zip(group.n, group.epsilon, strict=True)]
    if any(r is None for r in rates):
        return None
    return loglog_slope(group[over].to_numpy(), np.array(rates))


# -- figures ------------------------------------------------------------------------------------------
def w1_figure(results: pd.DataFrame, data: str, sweep: str) -> go.Figure:
    """Mean W1 (sd as error bars) against n or epsilon, one trace per mechanism, log-log."""
    fig = go.Figure()
    part = results[(results.data == data) & (results.sweep == sweep)]
    for mechanism, group in part.groupby("mechanism", sort=False):
        fig.add_trace(go.Scatter(x=group[sweep], y=group.mean_w1, name=f"{mechanism} (d={group.d.iloc[0]})",
                                 mode="lines+markers", error_y={"type": "data", "array": group.sd_w1}))
    fixed = "epsilon = 1" if sweep == "n" else f"n = {part.n.iloc[0] if len(part) else ''}"
    fig.update_layout(title=f"mean W1 (l-inf) against {sweep}, {data} data, {fixed}", xaxis_type="log",
                      yaxis_type="log", xaxis_title=sweep, yaxis_title="mean W1", template="plotly_white")
    return fig


def mmd_figure(curve: pd.DataFrame, D: int) -> go.Figure:
    """Fig 3a/3b axes: MMD against the number of released centres, one trace per (mechanism, eps)."""
    fig = go.Figure()
    for (mechanism, epsilon), group in curve[curve.D == D].groupby(["mechanism", "epsilon"], sort=False):
        group = group.sort_values("points")
        fig.add_trace(go.Scatter(x=group.points, y=group.mmd, mode="markers", name=f"{mechanism}, eps={epsilon:g}"))
    for epsilon, best in balog.BALOG_BEST[D].items():
        fig.add_hline(y=best, line_dash="dot", annotation_text=f"Balog best, eps={epsilon:g}")
    fig.update_layout(title=f"MMD on Balog's mixture, D = {D} (seed 0, every grid setting)", xaxis_type="log",
                      yaxis_type="log", xaxis_title="released centres", yaxis_title="MMD (Balog's kernel)",
                      template="plotly_white")
    return fig


def write_figures(results: pd.DataFrame, curve: pd.DataFrame, folder: Path) -> list[str]:
    """Write every figure as HTML (plotly.js from its CDN); the names, sorted."""
    folder.mkdir(parents=True, exist_ok=True)
    figures = {f"repro_w1_{data}_{sweep}": w1_figure(results, data, sweep)
               for data in DATASETS for sweep in ("n", "epsilon")}
    if len(curve):
        figures.update({f"repro_mmd_balog_D{D}": mmd_figure(curve, D) for D in sorted(curve.D.unique())})
    for name, fig in figures.items():
        fig.write_html(folder / f"{name}.html", include_plotlyjs="cdn")
    return sorted(figures)


# -- Markdown -----------------------------------------------------------------------------------------
def markdown(results: pd.DataFrame, balog_table: pd.DataFrame, config: Config, figures: list[str],
             figure_dir: str, header: str, kept: dict[str, str], balog_text: str | None = None) -> str:
    """The whole report; ``kept`` holds the timing sections carried over from the previous report, ``balog_text``
    the MMD section's body when it is carried over too (``--only``)."""
    lines = ["# Reproduction report", "", header, "",
             "W1 is the exact l-infinity W1 (POT network simplex; the closed form in d = 1) between the real rows and "
             "the synthetic rows in unit coordinates; public domain [0, 1]^d; replace-one neighbours; default "
             "parameters; `n_synthetic = n`; seed s spawns independent data and mechanism streams. `uniform` is "
             "`datasets.uniform_cube`; `two_blobs` is the PMM authors' setting, `datasets.two_blobs`: half the rows "
             "around 0.4*1 with sd 0.1, half around 0.7*1 with sd 0.05, clipped to the cube (their script used d = 4, "
             "n = 400; here d = 2). Mechanisms that take one column only run at d = 1. These metrics read the real "
             "data: evaluation only.", "",
             "## Slopes of mean W1 (log-log least squares) beside the theoretical rates", "",
             "`theory` is the slope of `privsyn_core.reporting.report.theoretical_rate` over the same grid "
             "(constants dropped, "
             "so only the slope is comparable); empty where no rate is stated. The rate notes follow the table.", "",
             _slopes_markdown(slopes_table(results)), "", "### Rate notes", ""]
    lines += [rate_note(name) for name in results.mechanism.unique()]
    lines += ["", "## Mean W1 (sd over seeds)", ""]
    for sweep in ("n", "epsilon"):
        lines += [f"### against {sweep}", "", _means_markdown(results[results.sweep == sweep], sweep), ""]
    lines += ["## MMD protocol of the KD-tree paper on Balog's mixture (spec A.10)", ""]
    if balog_text is not None:
        lines += [balog_text.strip(), ""]
    else:
        lines += _balog_markdown(balog_table, config) if len(balog_table) else ["(skipped at this size)", ""]
    lines += ["## Timings", "", "Wall seconds measured on 2 CPU cores shared with other jobs: upper bounds.", ""]
    for name in KEPT_SECTIONS:
        lines += [kept.get(name, f"<!-- {name}:start -->\n(not measured yet)\n<!-- {name}:end -->"), ""]
    lines += ["## Figures", "", "Interactive Plotly HTML (plotly.js loads from its CDN). PNG export needs kaleido, "
              "which is not installed (nor matplotlib), so no PNGs are written. The raw numbers are in "
              f"`{figure_dir}/repro_w1_sweeps.csv`, `{figure_dir}/repro_mmd_balog.csv` and "
              f"`{figure_dir}/repro_mmd_balog_curve.csv`.", ""]
    lines += [f"- [{name}]({figure_dir}/{name}.html)" for name in figures]
    return "\n".join(lines) + "\n"


def _balog_markdown(table: pd.DataFrame, config: Config) -> list[str]:
    wins = table.mmd_mean < table.balog_best
    return [balog.PROTOCOL, "",
            "Balog's best over M (their better algorithm, Alg 2 with random features, at both D), (eps, 1e-6)-DP:", "",
            balog.table_markdown(table, config.balog_seeds), "",
            f"We beat Balog's best at: {_cases(table[wins])}.", "",
            f"We do not beat it at: {_cases(table[~wins])}.", ""]


def _cases(part: pd.DataFrame) -> str:
    return ", ".join(f"{r.mechanism} D={r.D} eps={r.epsilon:g}" for r in part.itertuples()) or "none"


def _fmt(value) -> str:
    return "" if value is None or (isinstance(value, float) and math.isnan(value)) else f"{value:.2f}"


def _slopes_markdown(slopes: pd.DataFrame) -> str:
    out = ["| mechanism | data | d | slope in n | theory | slope in epsilon | theory |",
           "|---|---|---|---|---|---|---|"]
    for r in slopes.itertuples():
        out.append(f"| {r.mechanism} | {r.data} | {r.d} | {_fmt(r.slope_n)} | {_fmt(r.theory_slope_n)} | "
                   f"{_fmt(r.slope_epsilon)} | {_fmt(r.theory_slope_epsilon)} |")
    return "\n".join(out)


def _means_markdown(part: pd.DataFrame, sweep: str) -> str:
    part = part.assign(cell=[f"{m:.4f} ({s:.4f})" for m, s in zip(part.mean_w1, part.sd_w1, strict=True)])
    table = part.pivot_table(index=["mechanism", "data"], columns=sweep, values="cell", aggfunc="first", sort=False)
    header = "| mechanism | data | " + " | ".join(f"{sweep}={c:g}" for c in table.columns) + " |"
    out = [header, "|" + "---|" * (len(table.columns) + 2)]
    out += [f"| {m} | {dset} | " + " | ".join(str(v) for v in row) + " |" for (m, dset), row in table.iterrows()]
    return "\n".join(out)


def kept_sections(path: Path) -> dict[str, str]:
    """The ``KEPT_SECTIONS`` blocks (markers included) of an existing report."""
    text = path.read_text() if path.exists() else ""
    found = {name: re.search(rf"<!-- {name}:start -->.*?<!-- {name}:end -->", text, re.S) for name in KEPT_SECTIONS}
    return {name: match.group(0) for name, match in found.items() if match}


def carried_over(out: Path, figures: Path, fresh: pd.DataFrame, only: tuple[str, ...]) -> tuple[pd.DataFrame, str, str]:
    """For ``--only``: the W1 rows (kept ones of the other mechanisms, fresh ones of ``only``, in registry order),
    the previous report's MMD section body and its header line."""
    kept = pd.read_csv(figures / "repro_w1_sweeps.csv")
    rows = pd.concat([kept[~kept.mechanism.isin(only)], fresh], ignore_index=True)
    rank = {s.name: i for i, s in enumerate(continuous_mechanisms())}
    rows = rows.sort_values("mechanism", key=lambda m: m.map(rank), kind="stable").reset_index(drop=True)
    text = out.read_text()
    section = re.search(r"## MMD protocol[^\n]*\n(.*?)\n## Timings", text, re.S)
    header = re.search(r'whose header read: "(.*?)" Run', text) or re.search(r"^Generated by (.*)$", text, re.M)
    return rows, section.group(1) if section else "(not in the previous report)", header.group(1) if header else ""


def build_report(config: Config, out: Path, figures: Path, command: str, progress=print,
                 only: tuple[str, ...] = ()) -> pd.DataFrame:
    """Run the sweeps and the protocol, write the report ``out`` and the figures and CSVs under ``figures``."""
    start = time.perf_counter()
    progress("W1 sweeps" + (f" of {', '.join(only)}" if only else ""))
    results = w1_sweeps(config, progress, only)
    balog_text = None
    if only:
        results, balog_text, previous = carried_over(out, figures, results, only)
        table, curve = pd.DataFrame(), pd.DataFrame()
    else:
        progress("MMD protocol on Balog's mixture")
        table, curve = (balog.comparison(config.balog_dims, config.balog_seeds, config.balog_quick, progress)
                        if config.balog_dims else (pd.DataFrame(), pd.DataFrame()))
    names = write_figures(results, curve, figures)
    if only:
        names = sorted(set(names) | {f.stem for f in figures.glob("repro_mmd_balog_D*.html")})
    results.to_csv(figures / "repro_w1_sweeps.csv", index=False)
    if len(table):
        table.to_csv(figures / "repro_mmd_balog.csv", index=False)
        curve.to_csv(figures / "repro_mmd_balog_curve.csv", index=False)
    header = (f"Generated by `{command}` in {(time.perf_counter() - start) / 60:.0f} minutes on 2 shared CPU cores: "
              f"{config.seeds} seeds; n in {list(config.ns)} at epsilon = 1; epsilon in {list(config.epsilons)} at "
              f"n = {config.n_epsilon}. All numbers below are regenerated by that command.")
    if only:
        header = (f"The W1 rows of {', '.join(only)} were regenerated by `{command}` in "
                  f"{(time.perf_counter() - start) / 60:.0f} minutes on 2 shared CPU cores ({config.seeds} seeds; n in "
                  f"{list(config.ns)} at epsilon = 1; epsilon in {list(config.epsilons)} at n = {config.n_epsilon}); "
                  "the rows of the other mechanisms and the MMD protocol are carried over from the previous full run "
                  "(their outputs at these settings did not change since), whose header read: "
                  f"\"{previous}\" Run `python -m benchmarks.reproduce` to regenerate "
                  "everything.")
    out.parent.mkdir(parents=True, exist_ok=True)
    text = markdown(results, table, config, names, os.path.relpath(figures, out.parent), header, kept_sections(out),
                    balog_text)
    out.write_text(text)
    return results


def rate_note(mechanism: str) -> str:
    """One line of the rate notes: what bounds the mechanism's W1, from the registry (``MechanismSpec.w1_claim``)."""
    claim = ps.get_mechanism(mechanism).w1_claim
    return f"- `{mechanism}`: {KIND_LABELS[claim.kind]}: {claim.source}"


def rates_table(results: pd.DataFrame) -> str:
    """``docs/tables/w1_rates.md``: the slopes beside the theory, the rate notes and the mean W1 against n."""
    notes = [rate_note(name) for name in results.mechanism.unique()]
    return "\n".join(["Slopes of mean W1 (log-log least squares) beside the slope of the theoretical rate over the "
                      "same grid (constants dropped).", "", _slopes_markdown(slopes_table(results)), "",
                      "Rate notes:", "",
                      *notes, "", "Mean W1 (sd over seeds) against n, epsilon = 1:", "",
                      _means_markdown(results[results.sweep == "n"], "n")])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer sizes, seeds and Balog settings")
    parser.add_argument("--out", type=Path, default=Path("test-output/reproduction/reproduction.md"))
    parser.add_argument("--figures", type=Path, default=Path("test-output/reproduction/figures"))
    parser.add_argument("--only", default="", help="comma-separated mechanisms whose W1 rows are regenerated; the "
                                                    "others and the MMD section are kept from the existing report")
    args = parser.parse_args()
    only = tuple(name for name in args.only.split(",") if name)
    command = ("python -m benchmarks.reproduce" + (" --quick" if args.quick else "")
               + (f" --only {','.join(only)}" if only else ""))
    results = build_report(QUICK if args.quick else FULL, args.out, args.figures, command,
                           lambda line: print(line, flush=True), only)
    print(f"wrote {args.out}")
    if not args.quick:
        print(f"wrote {write_table('w1_rates', rates_table(results), command)}")


if __name__ == "__main__":
    main()
