r"""The evaluation report: every metric between a real and a synthetic table, each with its uncertainty, its
real-vs-real floor, how it was computed and how to read it (evaluation only: it reads the real data).

* :func:`evaluate`: the report, built from :mod:`privsyn_core.evaluation.distances` (W1, sliced W1, MMD on repeated
  subsamples), :mod:`privsyn_core.evaluation.marginals` (marginal TVDs, correlation gap, Boolean marginals, by
  bootstrap), :func:`coverage` and, on request, TSTR (:mod:`privsyn_core.evaluation.utility`);
* :data:`METRICS`: what each metric of the report is (its name in words, whether lower or higher is better, its
  unit, one line of meaning, whether it carries a sampling interval); the report names the declarations of the
  metrics it holds in ``_about["metrics"]``, and whoever shows a report reads them from here;
* :func:`rank_runs`: ranks of several runs on one metric that never order runs whose intervals overlap.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

import numpy as np
import pandas as pd
from scipy.stats import t as student_t
from threadpoolctl import threadpool_limits

from privsyn_core.data.domain import Schema
from privsyn_core.errors import ParameterError
from privsyn_core.evaluation.distances import median_bandwidth, mmd, sliced_w1, unique_rows, w1, w1_exact_or_grid
from privsyn_core.evaluation.marginals import (
    Grids,
    bin_grids,
    boolean_bits,
    boolean_marginal_errors,
    weighted_correlation_gaps,
    weighted_marginal_tvds,
)

__all__ = ["COLLAPSE_SHARE", "EVAL_BOOTSTRAP", "EVAL_CONFIDENCE", "EVAL_MAX_ROWS", "EVAL_MMD_SAMPLE",
           "EVAL_PROJECTIONS", "EVAL_REPEATS", "EVAL_SUBSAMPLE", "EVAL_W1_ENTRIES", "FEW_VALUES", "GRID_USE_RATIO",
           "METRICS", "MetricInfo", "coverage", "evaluate", "evaluate_tstr", "rank_runs"]


@dataclass(frozen=True)
class MetricInfo:
    """How to read one metric of :func:`evaluate`.

    Attributes
    ----------
    label : str
        Its name in words.
    better : {"lower", "higher"}
        Which direction is better.
    unit : str
        What its value measures, with its range.
    meaning : str
        One line for a reader who does not know the metric.
    interval : bool
        Whether the report gives it a sampling interval (``low``, ``high``), so runs can be ranked on it honestly.
    """

    label: str
    better: str
    unit: str
    meaning: str
    interval: bool = True


#: Every metric :func:`evaluate` can report, the most telling for ranking runs first (the marginal TVDs: averaged
#: over public grids, and not biased by the subsample size as W1 between samples is).
METRICS: dict[str, MetricInfo] = {
    "marginal_tvd_2way": MetricInfo(
        "2-way marginal error (TVD)", "lower", "share of rows, 0 to 1",
        "the same for every pair of columns, on the same 16 grids: are combinations kept?"),
    "marginal_tvd_1way": MetricInfo(
        "1-way marginal error (TVD)", "lower", "share of rows, 0 to 1",
        "share of rows in the wrong bin or category, one column at a time, averaged over 16 public bin grids (8, 13, "
        "20, 32 bins, 4 offsets each) so that no grid is favoured"),
    "w1": MetricInfo(
        "Wasserstein distance W1", "lower", "l-infinity distance in the unit cube of the schema, 0 to 1",
        "how far rows must move, on average, to turn the real table into the synthetic one"),
    "correlation_gap": MetricInfo(
        "correlation gap", "lower", "difference of Pearson correlations, 0 to 2",
        "largest difference between the two correlation matrices"),
    "sliced_w1": MetricInfo(
        "sliced W1", "lower", "distance along random directions of the unit cube",
        "W1 averaged over random one-dimensional views"),
    "mmd": MetricInfo(
        "kernel distance (MMD)", "lower", "Gaussian-kernel RKHS distance, 0 to sqrt(2)",
        "difference of smooth averages of the two tables"),
    "boolean_marginals": MetricInfo(
        "Boolean marginal error", "lower", "mean squared difference of shares, 0 to 1",
        "error of k-way marginals of the 0/1 columns"),
    "coverage": MetricInfo(
        "most frequent row's share", "lower", "share of rows, 0 to 1",
        "a collapse check: a synthetic table repeating one row has a large share (floor: the real share)",
        interval=False),
    "tstr": MetricInfo(
        "model trained on synthetic, tested on real", "higher",
        "the score named in the entry (accuracy, 0 to 1, or R^2, at most 1)",
        "score of a model trained on the synthetic rows and tested on held-out real rows (reference: trained on real "
        "rows; interval over the test rows)"),
}

EVAL_MAX_ROWS = 50_000  # rows per side that evaluate reads; larger tables are uniformly subsampled
EVAL_SUBSAMPLE = 500  # rows per side of each W1 / sliced W1 repeat (exact W1's cost grows fast in the rows)
EVAL_REPEATS = 5  # repeated subsamples of W1, sliced W1 and MMD
EVAL_BOOTSTRAP = 20  # bootstrap replicates (Student-t multiplier: intervals 2% wider than with 30, 1/3 less CPU)
EVAL_W1_ENTRIES = 250_000  # cost-matrix budget of the full-sample W1 check (about 0.1 s of POT)
EVAL_MMD_SAMPLE = 500  # rows per side of each MMD repeat (3 kernel sums of 500^2 entries)
EVAL_PROJECTIONS = 50  # directions of sliced W1 in evaluate
GRID_USE_RATIO = 0.1  # the full-sample grid W1 is reported only when its error bound is below 10% of its value
EVAL_CONFIDENCE = 0.95
COLLAPSE_SHARE = 0.5  # a synthetic table whose most frequent row has this share (and twice the real's) collapsed
FEW_VALUES = 2  # a numeric column with at most this many synthetic values while the real has >= 10x more


def evaluate(real_df: pd.DataFrame, synth_df: pd.DataFrame, schema: Schema | None = None, *,
             target: str | None = None, real_test: pd.DataFrame | None = None, floor: bool = True,
             bins: int | str = "robust", seed: int = 0, w1_max_entries: int = EVAL_W1_ENTRIES,
             mmd_sample: int = EVAL_MMD_SAMPLE, max_rows: int = EVAL_MAX_ROWS, subsample: int = EVAL_SUBSAMPLE,
             repeats: int = EVAL_REPEATS, bootstrap: int = EVAL_BOOTSTRAP) -> dict:
    r"""Every metric between a real and a synthetic table, each with its uncertainty, floor and method.

    Both tables are encoded with the same schema (inferred from the real data when not given: its bounds are then
    not public) and compared in the unit cube of the schema. All metrics read the real data: they are for
    evaluation, never part of a private release.

    **Bounded input.** At most ``max_rows`` rows of each side are read (uniform subsamples without replacement,
    seeded by ``seed``; ``_about`` states the sizes), so memory is O(max_rows * d) whatever the input size.

    **Repeated subsamples** (``w1``, ``sliced_w1``, ``mmd``). Each of ``repeats`` repeats draws ``s`` rows of each
    side uniformly without replacement, ``s = min(subsample, n_real // 2, n_synth)``, and computes exact W1
    (POT's network simplex ``ot.emd2``, l-infinity ground metric in unit coordinates, as :func:`w1` defines it),
    sliced W1 and the biased MMD (bandwidth: median heuristic on the real rows). ``value`` is the mean over the
    repeats and ``low``/``high`` a 95% Student-t interval :math:`\bar v \pm t_{0.975, R-1} s_v / \sqrt R` for the
    expected subsample value. W1 between samples of s points is biased upwards (for two samples of one law it
    decays like :math:`s^{-1/d}`, not to 0), so the value is only meaningful beside ``floor``: the same statistic,
    computed the same way, between two *disjoint* random subsamples of s real rows (with its own interval).
    ``w1`` also reports ``full_sample``: W1 of all evaluated rows by :func:`w1` (grid method when large), kept
    only when it is exact or its stated error bound is below
    ``GRID_USE_RATIO`` (10%) of its value.

    **Bootstrap** (``marginal_tvd_1way``, ``marginal_tvd_2way``, ``correlation_gap``, ``boolean_marginals``):
    the value on all evaluated rows, and ``low``/``high`` = value :math:`\pm t_{0.975, B-1}` bootstrap standard
    errors (``B = bootstrap`` replicates, rows of both sides resampled with replacement; the Student-t quantile
    accounts for a standard error estimated from B replicates). ``floor`` is the same metric between two disjoint
    random halves of the evaluated real rows, with its own bootstrap interval. The TVDs are, by default,
    resolution-robust (``bins="robust"``, see :func:`marginal_tvd`): the mean over 16 public grids (8, 13, 20 and
    32 equal bins, each at 4 offsets), so that no single bin grid, and no output quantised on it, is favoured;
    ``per_resolution`` gives the mean at each number of bins with its interval and floor, ``_tables`` the TVD per
    column and per pair (``tvd_<k>`` per resolution). The correlation gap is the largest absolute difference
    between the Pearson correlation matrices in unit coordinates (``mean``: the mean over pairs).

    **Coverage** flags degenerate output (W1 alone rewards a collapsed table): distinct values per column,
    categories the real rows use that the synthetic rows never produce, and the share of the most frequent
    synthetic row (``value``; ``floor`` is the real one's). ``collapsed`` is set when the synthetic rows have a
    single distinct row while the real ones have several, or the most frequent synthetic row holds at least
    ``COLLAPSE_SHARE`` of the rows and twice the real share. Counts are exact for the evaluated rows (compared on
    equal numbers of rows), not estimates, so they carry no interval.

    Parameters
    ----------
    real_df, synth_df : DataFrame
    schema : Schema, optional
    target : str, optional
        Column for train-on-synthetic/test-on-real (TSTR, :func:`privsyn_core.evaluation.utility.tstr`); opt-in
        because it trains models (on the evaluated rows).
    real_test : DataFrame, optional
        Real hold-out for TSTR (rows not used to make the synthetic data); else a split of the real rows.
    floor : bool
        Add the real-vs-real floors (needs at least 4 real rows).
    bins : int or "robust"
        Bins of the marginal TVDs: ``"robust"`` (default) averages over the public grids of :func:`marginal_tvd`;
        an integer is a single grid of that many equal bins per numeric column (it rewards outputs quantised on
        that grid: use it to reproduce a single-grid figure, not to rank).
    seed : int
        Seeds every subsample, split and bootstrap.
    w1_max_entries : int
        Cost-matrix budget of the full-sample W1 check.
    mmd_sample : int
        Rows per side of each MMD repeat (at most the W1 subsample size).
    max_rows, subsample, repeats, bootstrap : int
        See above (rows read per side; rows per repeat, at most 5000; repeats >= 2; bootstrap replicates >= 2).

    Returns
    -------
    dict
        ``w1``, ``sliced_w1``, ``mmd``, ``marginal_tvd_1way``, ``marginal_tvd_2way``, ``correlation_gap``,
        ``boolean_marginals`` (all-Boolean data), ``coverage``, ``tstr`` (with ``target``), each a dict with
        ``value``, ``low``, ``high``, ``interval`` (how the interval was made), ``floor``, ``floor_low``,
        ``floor_high`` and details; ``_about`` (sizes, methods and, in ``metrics``, the :data:`METRICS` declaration
        of every metric present: label, better, unit, meaning, interval) and ``_tables`` (per-column and per-pair
        TVD tables).
    """
    for name, number, least in (("max_rows", max_rows, 4), ("subsample", subsample, 2), ("repeats", repeats, 2),
                                ("bootstrap", bootstrap, 2)):
        if not isinstance(number, (int, np.integer)) or number < least:
            raise ParameterError(f"{name} must be an integer >= {least}, got {number!r}")
    if subsample > 5000:
        raise ParameterError(f"subsample must be at most 5000 rows (exact W1 cost), got {subsample}")
    schema = Schema.infer(real_df) if schema is None else schema
    rng = np.random.default_rng(seed)
    real_rows, synth_rows = _bounded(real_df, max_rows, rng), _bounded(synth_df, max_rows, rng)
    real, synth = schema.encode(real_rows)[0], schema.encode(synth_rows)[0]
    with_floor = floor and len(real) >= 4
    # Every product here is small (kernels of mmd_sample rows, 8-column Gram matrices): OpenBLAS's threads cost
    # more than they save on them (a 500 x 8 x 500 product: 0.15 ms of CPU on one thread, 6 ms threaded on 2
    # loaded cores), so the metrics run on one BLAS thread.
    with threadpool_limits(limits=1, user_api="blas"):
        settings = _EvalSettings(schema, bin_grids(bins), median_bandwidth(real), with_floor, bootstrap)
        report = _repeated_metrics(real, synth, settings, rng, subsample, repeats, mmd_sample)
        report["w1"]["full_sample"] = _full_sample_w1(real, synth, w1_max_entries)
        marginals, tables = _bootstrap_metrics(real, synth, settings, rng)
        report.update(marginals)
        report["coverage"] = coverage(real, synth, schema)
    if target is not None:
        report["tstr"] = evaluate_tstr(real_df, synth_df, target, schema, real_test=real_test, seed=seed,
                                       max_rows=max_rows)
    report["_about"] = {
        "n_real": len(real_df), "n_synthetic": len(synth_df), "rows_evaluated": {"real": len(real),
                                                                                  "synthetic": len(synth)},
        "max_rows": int(max_rows), "columns": schema.names, "space": "unit cube of the schema",
        "public_domain": schema.dp_valid, "confidence": EVAL_CONFIDENCE, "seed": seed,
        "subsample_rows": report["w1"]["subsample_rows"], "repeats": int(repeats), "bootstrap": int(bootstrap),
        "floor": "same metric, same method, between disjoint random parts of the real data" if with_floor
        else "not computed",
        "evaluation_only": "metrics read the real data: not a private release",
        "metrics": {name: asdict(METRICS[name]) for name in report if name in METRICS}}
    report["_tables"] = tables
    return report


def evaluate_tstr(real_df: pd.DataFrame, synth_df: pd.DataFrame, target: str, schema: Schema | None = None, *,
                  real_test: pd.DataFrame | None = None, seed: int = 0, max_rows: int = EVAL_MAX_ROWS) -> dict:
    """The ``tstr`` entry of :func:`evaluate` with the same arguments, alone.

    It reads the same rows as :func:`evaluate` (at most ``max_rows`` of each side, the same seeded uniform
    subsamples) and calls :func:`privsyn_core.evaluation.utility.tstr` on them, so a caller may keep the rest of
    the report and compute the entry of another target on its own.
    """
    from privsyn_core.evaluation.utility import tstr

    schema = Schema.infer(real_df) if schema is None else schema
    rng = np.random.default_rng(seed)  # the first two draws of evaluate's generator: the same rows
    real_rows, synth_rows = _bounded(real_df, max_rows, rng), _bounded(synth_df, max_rows, rng)
    return tstr(real_rows, synth_rows, target, real_test=real_test, schema=schema, seed=seed)


@dataclass(frozen=True)
class _EvalSettings:
    schema: Schema
    grids: Grids
    bandwidth: float
    floor: bool
    bootstrap: int


def _bounded(df: pd.DataFrame, max_rows: int, rng: np.random.Generator) -> pd.DataFrame:
    """At most ``max_rows`` rows drawn uniformly without replacement (in their original order)."""
    if len(df) <= max_rows:
        return df
    return df.iloc[np.sort(rng.choice(len(df), max_rows, replace=False))]


def _t_interval(values: np.ndarray) -> tuple[float, float, float]:
    """Mean and the 95% Student-t interval of the mean of i.i.d. repeats."""
    mean = float(np.mean(values))
    half = float(student_t.ppf(0.5 + EVAL_CONFIDENCE / 2, len(values) - 1) * np.std(values, ddof=1)
                 / np.sqrt(len(values)))
    return mean, mean - half, mean + half


def _repeated_metrics(real: np.ndarray, synth: np.ndarray, s: _EvalSettings, rng: np.random.Generator,
                      subsample: int, repeats: int, mmd_rows: int) -> dict:
    """W1, sliced W1 and MMD on repeated uniform subsamples, each with a disjoint real-vs-real floor."""
    size = min(subsample, len(real) // 2 if s.floor else len(real), len(synth))
    mmd_size = min(mmd_rows, size)
    draws: dict[str, list[tuple[float, float, float]]] = {"value": [], "floor": []}
    for _ in range(repeats):
        a, b = real[rng.choice(len(real), size, replace=False)], synth[rng.choice(len(synth), size, replace=False)]
        draws["value"].append(_subsample_stats(a, b, s, mmd_size, rng))
        if s.floor:
            order = rng.permutation(len(real))
            draws["floor"].append(_subsample_stats(real[order[:size]], real[order[size:2 * size]], s, mmd_size, rng))
    interval = (f"{EVAL_CONFIDENCE:.0%} Student-t interval of the mean over {repeats} uniform subsamples of "
                f"{size} rows per side")
    details = {
        "w1": {"method": "exact_emd", "metric": "chebyshev", "solver": "POT ot.emd2 (network simplex)",
               "subsample_rows": size,
               "bias": "subsample W1 is biased upwards (it does not vanish for equal laws): compare with floor"},
        "sliced_w1": {"projections": EVAL_PROJECTIONS, "subsample_rows": size,
                      "note": "not W1: mean 1-D W1 over random directions"},
        "mmd": {"estimator": "biased (V-statistic)", "bandwidth": s.bandwidth,
                "bandwidth_from": "median heuristic on the real data", "subsample_rows": mmd_size},
    }
    out = {}
    for j, name in enumerate(details):
        value, low, high = _t_interval(np.array([row[j] for row in draws["value"]]))
        entry = {"value": value, "low": max(low, 0.0), "high": high, "interval": interval, **details[name]}
        if s.floor:
            fvalue, flow, fhigh = _t_interval(np.array([row[j] for row in draws["floor"]]))
            entry.update({"floor": fvalue, "floor_low": max(flow, 0.0), "floor_high": fhigh})
        out[name] = entry
    return out


def _subsample_stats(a: np.ndarray, b: np.ndarray, s: _EvalSettings, mmd_size: int,
                     rng: np.random.Generator) -> tuple[float, float, float]:
    sliced = sliced_w1(a, b, n_projections=EVAL_PROJECTIONS, seed=int(rng.integers(2**31)))
    return (float(w1(a, b, method="exact")), sliced,
            float(mmd(a[:mmd_size], b[:mmd_size], bandwidth=s.bandwidth, estimator="biased")))


def _full_sample_w1(real: np.ndarray, synth: np.ndarray, max_entries: int) -> dict:
    """W1 on every evaluated row, kept only when exact or its grid bound is below GRID_USE_RATIO of the value.

    Exact or the grid method, never the certified interval: that takes seconds of CPU at 10^4 rows per side,
    many times the cost of the rest of the report.
    """
    value = w1_exact_or_grid(real, synth, max_entries=max_entries)
    about = {**value.describe(), "rows": {"real": len(real), "synthetic": len(synth)}}
    if value.error_bound == 0.0 or value.error_bound < GRID_USE_RATIO * value:
        about.update({"used": True, "low": value.lower, "high": value.upper,
                      "interval": "deterministic error bound"})
        return about
    return {"used": False, "method": value.method, "error_bound": value.error_bound,
            "reason": f"grid error bound {value.error_bound:.3g} is not below {GRID_USE_RATIO:.0%} of its value "
                      f"{float(value):.3g}"}


def _bootstrap_metrics(real: np.ndarray, synth: np.ndarray, s: _EvalSettings,
                       rng: np.random.Generator) -> tuple[dict, dict[str, pd.DataFrame]]:
    """TVDs, correlation gap and Boolean marginals: value, bootstrap interval and a split-half floor; and the
    per-column and per-pair TVD tables."""
    stats, tables = _replicated(real, synth, s, rng)
    floor = None
    if s.floor:
        half = len(real) // 2
        order = rng.permutation(len(real))
        floor = _replicated(real[order[:half]], real[order[half:2 * half]], s, rng)[0]
    multiplier = float(student_t.ppf(0.5 + EVAL_CONFIDENCE / 2, s.bootstrap - 1))
    interval = (f"value +- {multiplier:.2f} bootstrap standard errors (Student-t quantile with {s.bootstrap - 1} "
                f"degrees of freedom: {s.bootstrap} replicates, rows of both sides resampled with replacement)")
    out: dict[str, dict[str, Any]] = {}
    for metric, found in stats.items():
        entry = {**_with_interval(found["value"], multiplier), "interval": interval}
        if floor is not None:
            entry.update(_as_floor(_with_interval(floor[metric]["value"], multiplier)))
            entry["floor_method"] = "two disjoint random halves of the evaluated real rows"
        entry.update(found["extra"])
        if "per_resolution" in found:
            entry["per_resolution"] = {
                str(k): {**_with_interval(v, multiplier),
                         **(_as_floor(_with_interval(floor[metric]["per_resolution"][k], multiplier))
                            if floor is not None else {})}
                for k, v in found["per_resolution"].items()}
            entry.update({"bins": s.grids.describe(), "grids": len(s.grids.grids)})
        out[metric] = {**entry, **_CHEAP_DETAILS[metric]}
    return out, tables


def _with_interval(replicates: np.ndarray, multiplier: float) -> dict[str, float]:
    """Value (``replicates[0]``) and value +- multiplier x the standard deviation of the replicates (the rest)."""
    value = float(replicates[0])
    half = multiplier * float(np.std(replicates[1:], ddof=1))
    return {"value": value, "low": max(value - half, 0.0), "high": value + half}


def _as_floor(entry: dict[str, float]) -> dict[str, float]:
    return {"floor": entry["value"], "floor_low": entry["low"], "floor_high": entry["high"]}


_CHEAP_DETAILS = {
    "marginal_tvd_1way": {"aggregate": "mean over columns"},
    "marginal_tvd_2way": {"aggregate": "mean over pairs"},
    "correlation_gap": {"aggregate": "max |corr gap| over pairs (Pearson, unit cube)"},
    "boolean_marginals": {"aggregate": "average squared k-way marginal error, value at the highest order "
                                       "(Boedihardjo, Strohmer, Vershynin, eq 1.2)"},
}


def _resampled(n: int, replicates: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """Bootstrap draws: row indices (replicates, n) and weights (n, 1 + replicates) as float32, column 0 all ones
    (the table itself), column r the number of times each row is drawn in replicate r (exact: counts <= n < 2^24)."""
    draws = rng.integers(0, n, (replicates, n))
    counts = np.bincount((draws + n * np.arange(replicates)[:, None]).ravel(), minlength=replicates * n)
    weights = np.empty((n, replicates + 1), dtype=np.float32)
    weights[:, 0] = 1.0
    weights[:, 1:] = counts.reshape(replicates, n).T
    return draws, weights


def _replicated(real: np.ndarray, synth: np.ndarray, s: _EvalSettings,
                rng: np.random.Generator) -> tuple[dict[str, dict[str, Any]], dict[str, pd.DataFrame]]:
    """The bootstrap metrics of one pair of tables and of ``s.bootstrap`` replicates (rows of both sides resampled
    with replacement): per metric ``value`` (1 + replicates,), ``extra`` (scalars of the tables themselves) and,
    for the TVDs, ``per_resolution``; and the TVD tables."""
    real_draws, real_weights = _resampled(len(real), s.bootstrap, rng)
    synth_draws, synth_weights = _resampled(len(synth), s.bootstrap, rng)
    tvds = weighted_marginal_tvds(real, synth, s.schema, s.grids, real_weights, synth_weights)
    out: dict[str, dict[str, Any]] = {}
    tables = {}
    for order, name in ((1, "marginal_tvd_1way"), (2, "marginal_tvd_2way")):
        if order in tvds:
            found = tvds[order]
            out[name] = {"value": found.mean(), "per_resolution": found.per_resolution(),
                         "extra": {"max": float(found.table["tvd"].max())}}
            tables[name] = found.table
    pairs = list(zip(real_draws, synth_draws, strict=True))
    if real.shape[1] >= 2:
        largest, mean = weighted_correlation_gaps(real, synth, real_weights, synth_weights)
        out["correlation_gap"] = {"value": largest, "extra": {"mean": float(mean[0])}}
    real_bits, synth_bits = boolean_bits(real, s.schema), boolean_bits(synth, s.schema)
    if real_bits is not None and synth_bits is not None:
        errors = [boolean_marginal_errors(real_bits, synth_bits)] + [
            boolean_marginal_errors(real_bits[i], synth_bits[j]) for i, j in pairs]
        top = max(errors[0])
        out["boolean_marginals"] = {"value": np.array([e[top] for e in errors]),
                                    "extra": {f"order_{k}": v for k, v in errors[0].items()}}
    return out, tables


def coverage(real: np.ndarray, synth: np.ndarray, schema: Schema) -> dict:
    """Coverage check of synthetic rows against real rows (unit coordinates of ``schema``).

    Compared on the same number of rows of each side (the first ``min(n, m)``; pass shuffled or uniformly
    subsampled rows). Per column: distinct values of each side, categories the real rows use that the synthetic
    rows never produce. Whole rows: distinct rows and the share of the most frequent row. Flags: ``collapsed``
    (one distinct synthetic row while the real rows have several, or a most frequent synthetic row holding at
    least ``COLLAPSE_SHARE`` of the rows and twice the real share), ``constant:<col>`` (one synthetic value, several
    real ones), ``few_values:<col>`` (a numeric column with at most ``FEW_VALUES`` synthetic values while the real
    rows have ten times more), ``missing_categories:<col>``.

    Returns
    -------
    dict
        ``value`` (synthetic top-row share), ``floor`` (real top-row share), ``collapsed``, ``flags`` (comma
        separated), ``distinct_rows_real`` / ``distinct_rows_synthetic``, ``rows_compared``, ``columns``
        (per-column list) and ``uncertainty``.
    """
    rows = min(len(real), len(synth))
    real, synth = real[:rows], synth[:rows]
    real_top, real_distinct = _top_share(real)
    synth_top, synth_distinct = _top_share(synth)
    flags, columns = [], []
    collapsed = (synth_distinct == 1 < real_distinct) or (synth_top >= COLLAPSE_SHARE and synth_top >= 2 * real_top)
    if collapsed:
        flags.append("collapsed")
    for j, col in enumerate(schema.columns):
        n_real, n_synth = np.unique(real[:, j]).size, np.unique(synth[:, j]).size
        entry = {"column": col.name, "distinct_real": int(n_real), "distinct_synthetic": int(n_synth)}
        if n_synth == 1 < n_real:
            flags.append(f"constant:{col.name}")
        elif col.kind == "numeric" and n_synth <= FEW_VALUES and n_real >= 10 * n_synth:
            flags.append(f"few_values:{col.name}")
        if col.kind == "categorical":
            categories = col.categories or ()
            k = len(categories)
            used = set(np.minimum((real[:, j] * k).astype(np.int64), k - 1).tolist())
            made = set(np.minimum((synth[:, j] * k).astype(np.int64), k - 1).tolist())
            missing = [str(categories[c]) for c in sorted(used - made)]
            entry["missing_categories"] = missing
            if missing:
                flags.append(f"missing_categories:{col.name}")
        columns.append(entry)
    return {"value": synth_top, "floor": real_top, "collapsed": bool(collapsed), "flags": ", ".join(flags),
            "distinct_rows_real": real_distinct, "distinct_rows_synthetic": synth_distinct, "rows_compared": rows,
            "columns": columns, "measure": "share of the most frequent synthetic row (floor: real)",
            "uncertainty": "exact counts on the evaluated rows (descriptive, no sampling interval)"}


def _top_share(P: np.ndarray) -> tuple[float, int]:
    """Share of the most frequent row and the number of distinct rows."""
    _, inverse = unique_rows(P)
    counts = np.bincount(inverse)
    return float(counts.max() / len(P)), len(counts)


def rank_runs(entries: dict, *, higher_is_better: bool = False) -> pd.DataFrame:
    """Rank runs by one metric without ordering runs whose intervals overlap.

    Runs are grouped into ties: the connected components of the "intervals overlap" relation (intervals on a
    line: sort by lower end and merge while the next interval starts at or before the running upper end). The
    groups are disjoint, so they are totally ordered; inside a group runs share one rank and are never ordered.
    Two runs in different groups have disjoint intervals.

    Parameters
    ----------
    entries : dict
        Run name -> an :func:`evaluate` entry (a dict with ``value``, ``low``, ``high``) or a ``(value, low,
        high)`` tuple.
    higher_is_better : bool
        Rank 1 for the highest values (e.g. TSTR accuracy); default lowest (distances).

    Returns
    -------
    DataFrame
        ``run, value, low, high, rank, tied_with`` (runs of the same group, comma separated), sorted by rank
        then run name (not by value inside a group).
    """
    rows = []
    for name, entry in entries.items():
        if isinstance(entry, dict):
            if not all(_finite_number(entry.get(k)) for k in ("value", "low", "high")):
                raise ParameterError(f"run {name!r} has no interval (value, low, high): cannot rank it honestly")
            value, low, high = entry["value"], entry["low"], entry["high"]
        else:
            value, low, high = entry
        if not low <= value <= high:
            raise ParameterError(f"run {name!r}: value {value} is not inside its interval [{low}, {high}]")
        rows.append({"run": str(name), "value": float(value), "low": float(low), "high": float(high)})
    table = pd.DataFrame(rows, columns=["run", "value", "low", "high"])
    if table.empty:
        return table.assign(rank=[], tied_with=[])
    key = -table["high"] if higher_is_better else table["low"]
    order = np.argsort(key.to_numpy(), kind="stable")
    group = np.empty(len(table), dtype=int)
    current, reach = 0, None
    for i in order:
        start, end = (-table.at[i, "high"], -table.at[i, "low"]) if higher_is_better \
            else (table.at[i, "low"], table.at[i, "high"])
        if reach is not None and start > reach:
            current += 1
        reach = end if reach is None else max(reach, end)
        group[i] = current + 1
    table["rank"] = group
    members = table.groupby("rank")["run"].agg(sorted)
    table["tied_with"] = [", ".join(r for r in members[g] if r != run)
                          for g, run in zip(table["rank"], table["run"], strict=True)]
    return table.sort_values(["rank", "run"]).reset_index(drop=True)


def _finite_number(value) -> bool:
    return isinstance(value, (int, float, np.integer, np.floating)) and not isinstance(value, bool) \
        and bool(np.isfinite(value))

