"""A mechanism guide: which registered mechanism to try first for a table's public shape, from measured evidence.

The evidence is the real-table benchmark (``python -m benchmarks.bench_real_tables``): tables bundled in pip
packages with hand-set public domains, every private mechanism on its defaults and the peers at full strength,
judged by W1 and the resolution-robust 2-way and 1-way marginal TVD with their intervals
(``privsyn_core/evaluation/data/guide_evidence.json``, package data generated from the benchmark's results file,
read by :func:`shipped_evidence`).

:func:`recommend` takes the :data:`NEAREST` measured tables closest to the table's public shape (distance
:func:`shape_distance`: number of columns and rows on log scales, share of categorical and of few-valued integer
columns) at the measured epsilon nearest on a log scale. On each of them it ranks the candidates by 2-way TVD and
by W1 with :func:`~privsyn_core.evaluation.scorecard.rank_runs` (runs whose intervals overlap share a rank: the
evidence's uncertainty enters there, once). The candidates with the lowest mean rank (within :data:`RANK_SLACK`)
are equally good on this evidence, and of them the guide recommends the fastest measured (mean seconds of a
synthesis on those tables; ties: the lower mean 2-way TVD): a mechanism a thousand times slower is not worth a
difference the evidence cannot show. The why names the pick's measured seconds. Candidates are the
registered private mechanisms that accept a table of this shape (``MechanismSpec.accepts`` on a stand-in schema
of the same kinds) and have evidence. The expected ranges are the union of the pick's intervals on those tables:
measured figures with their uncertainty, not bounds. The benchmark page checks the guide table by table
(leave-one-table-out: the pick, with that table's own runs removed from the evidence, against the best
mechanism measured there).
"""

from __future__ import annotations

import functools
import json
import math
from collections.abc import Sequence
from dataclasses import dataclass
from importlib import resources
from statistics import mean

from privsyn_core.data.boolean_codec import is_boolean_column
from privsyn_core.data.domain import Schema
from privsyn_core.data.levelled_codec import level_count
from privsyn_core.evaluation.scorecard import rank_runs
from privsyn_core.registry import get_mechanism, list_mechanisms

#: Column kinds the guide reads: ``integer`` is an integer column with at most 32 public values.
KINDS = ("numeric", "integer", "categorical", "boolean")
#: How many of the nearest measured tables the recommendation rests on (half of them: the number the benchmark's
#: leave-one-table-out check, docs/benchmark_real_tables.md, finds right on every table).
NEAREST = 4
#: The guide's evidence: table -> (columns, rows, categorical, integer), and the runs
#: (table, epsilon, system, metric, value, low, high).
Evidence = tuple[dict[str, tuple[int, int, int, int]], list[tuple]]
#: The metrics ranked (lower is better), in the order that breaks ties.
RANKED = ("tvd2", "w1")
#: Candidates within this much of the lowest mean rank are not ordered by it (the fastest of them is picked).
#: 0: the ranks already tie runs whose intervals overlap; a slack on top would pass over a measurably better
#: mechanism for a faster one.
RANK_SLACK = 0.0


@dataclass(frozen=True)
class Recommendation:
    """What :func:`recommend` returns.

    Attributes
    ----------
    mechanism : str
        Registry key.
    expected_tvd2_range, expected_w1_range, expected_tvd1_range : (float, float) or None
        The union of the pick's measured intervals (resolution-robust 2-way and 1-way marginal TVD; W1 in the
        unit cube, l-infinity) on the tables the recommendation rests on; ``None`` without evidence.
    evidence : tuple of str
        The measured tables it rests on (nearest first) and the epsilon used.
    why : str
        One sentence.
    """

    mechanism: str
    expected_tvd2_range: tuple[float, float] | None
    expected_w1_range: tuple[float, float] | None
    expected_tvd1_range: tuple[float, float] | None
    evidence: tuple[str, ...]
    why: str


@dataclass(frozen=True)
class Shape:
    """A table's public shape: columns, (an estimate of) rows, and how many columns are categorical or
    few-valued integers."""

    n_columns: int
    n_rows: int
    categorical: int
    integer: int


@functools.cache
def shipped_evidence() -> Evidence:
    """The evidence the package ships (``data/guide_evidence.json`` beside this module, written by
    ``python -m benchmarks.bench_real_tables --report-only``), read once: a missing interval (``null``) is NaN."""
    data = json.loads((resources.files("privsyn_core.evaluation") / "data" / "guide_evidence.json").read_text())
    tables = {name: (int(d), int(n), int(categorical), int(integer))
              for name, (d, n, categorical, integer) in data["tables"].items()}
    runs = [tuple(math.nan if value is None else value for value in run) for run in data["runs"]]
    return tables, runs


def shape_distance(a: Shape, b: Shape) -> float:
    r"""``|ln d_a - ln d_b| + |log10 n_a - log10 n_b| + |c_a - c_b| + |i_a - i_b|`` with ``c``, ``i`` the shares of
    categorical and of few-valued integer columns: a factor 10 in rows weighs as much as ``e`` in columns or as
    turning every column categorical."""
    return (abs(math.log(a.n_columns / b.n_columns)) + abs(math.log10(a.n_rows / b.n_rows))
            + abs(a.categorical / a.n_columns - b.categorical / b.n_columns)
            + abs(a.integer / a.n_columns - b.integer / b.n_columns))


def stand_in_schema(column_kinds: Sequence[str]) -> Schema:
    """A public schema of the given kinds (bounds [0, 1], three or two categories, integers 0-9): what the
    mechanisms' ``accepts`` hooks read."""
    columns = []
    for j, kind in enumerate(column_kinds):
        name = f"c{j}"
        if kind == "numeric":
            columns.append({"name": name, "kind": "numeric", "lo": 0.0, "hi": 1.0})
        elif kind == "integer":
            columns.append({"name": name, "kind": "numeric", "lo": 0, "hi": 9, "integer": True})
        else:
            categories = ["0", "1"] if kind == "boolean" else ["a", "b", "c"]
            columns.append({"name": name, "kind": "categorical", "categories": categories})
    return Schema.from_dict({"version": 1, "columns": columns})


def column_kinds(schema: Schema) -> list[str]:
    """The guide's kind of every column of a public schema: ``boolean`` by its public declaration, ``integer`` for an
    integer column with few public values (one level each), else ``numeric``/``categorical``."""
    return ["boolean" if is_boolean_column(c) else "integer" if c.kind == "numeric" and level_count(c) else c.kind
            for c in schema.columns]


def candidates(column_kinds: Sequence[str]) -> list[str]:
    """Registered private mechanisms that accept a table of these kinds, in the registry's order."""
    schema = stand_in_schema(column_kinds)
    return [spec.name for spec in list_mechanisms() if spec.is_private and spec.accepts(schema) is None]


def recommend(n_columns: int, n_rows: int, column_kinds: Sequence[str], epsilon: float, *,
              exclude_tables: Sequence[str] = (), evidence: Evidence | None = None,
              peers: bool = True) -> Recommendation:
    """The mechanism to try first for a table of ``n_columns`` columns and about ``n_rows`` rows.

    Parameters
    ----------
    n_columns : int
    n_rows : int
        A public estimate is enough (under add/remove the exact count is private).
    column_kinds : sequence of {"numeric", "integer", "categorical", "boolean"}
        One per column (or empty: all numeric).
    epsilon : float
    exclude_tables : sequence of str
        Measured tables left out of the evidence (the benchmark's leave-one-table-out check).
    evidence : (tables, runs), optional
        Evidence in the layout of :data:`Evidence` (default: :func:`shipped_evidence`), e.g. a benchmark's results
        before they are written there.
    peers : bool, default True
        Whether mechanisms run by an outside library (``MechanismSpec.implemented_by``: minutes a run where ours
        take seconds) are candidates; ``False``: this library's own only.
    """
    shapes, measured_runs = evidence if evidence is not None else shipped_evidence()
    shape, kinds = _shape(n_columns, n_rows, column_kinds, epsilon)
    offered = [m for m in candidates(kinds) if peers or _implemented_by(m) is None]
    runs = [r for r in measured_runs if r[0] not in exclude_tables and r[2] in offered]
    tables = sorted({r[0] for r in runs}, key=lambda t: shape_distance(shape, Shape(*shapes[t])))[:NEAREST]
    if not tables:
        return Recommendation(offered[0] if offered else "", None, None, None, (),
                              "no measured evidence for the mechanisms that accept this table: the first of them in "
                              "the registry's order.")
    eps = min({r[1] for r in runs if r[0] in tables}, key=lambda e: abs(math.log(e / epsilon)))
    entries = {(t, m): {r[2]: r[4:7] for r in runs if r[0] == t and r[1] == eps and r[3] == m}
               for t in tables for m in RANKED}
    ranks = _ranks(entries)
    mean_rank = {m: mean(r) for m, r in ranks.items()}
    lowest = min(mean_rank.values())
    seconds_of = {m: _seconds(runs, tables, eps, m) for m in ranks if mean_rank[m] <= lowest + RANK_SLACK}
    best = min(seconds_of, key=lambda m: (seconds_of[m], mean_rank[m], _mean_value(entries, m, "tvd2")))
    return Recommendation(best, _range(runs, tables, eps, best, "tvd2"), _range(runs, tables, eps, best, "w1"),
                          _range(runs, tables, eps, best, "tvd1"), (*tables, f"epsilon {eps:g}"),
                          _why(best, [(t, shapes[t]) for t in tables], eps, epsilon, ranks[best], seconds_of[best])
                          + _why_fastest(best, [m for m in seconds_of if m != best])
                          + _why_wait(best, mean_rank, entries, {m: _seconds(runs, tables, eps, m) for m in ranks}))


@dataclass(frozen=True)
class MeasuredAccuracy:
    """What :func:`measured_accuracy` returns: one mechanism's measured accuracy on the public tables nearest a shape.

    Attributes
    ----------
    mechanism : str
    epsilon : float
        The measured epsilon nearest (log scale) to the one asked for.
    tables : tuple of (str, int, int)
        The measured tables (name, rows, columns), nearest first.
    tvd1_range, tvd2_range, w1_range : (float, float) or None
        The union of the mechanism's 95% intervals on those tables (mean 1-way and resolution-robust 2-way marginal
        TVD; W1 in the unit cube, l-infinity); ``None`` when not measured.
    nearest_tvd2_range : (float, float) or None
        The 2-way TVD interval on the nearest table alone.
    """

    mechanism: str
    epsilon: float
    tables: tuple[tuple[str, int, int], ...]
    tvd1_range: tuple[float, float] | None
    tvd2_range: tuple[float, float] | None
    w1_range: tuple[float, float] | None
    nearest_tvd2_range: tuple[float, float] | None


def measured_accuracy(mechanism: str, n_columns: int, n_rows: int, column_kinds: Sequence[str], epsilon: float, *,
                      evidence: Evidence | None = None) -> MeasuredAccuracy | None:
    """The accuracy ``mechanism`` was measured to reach on the :data:`NEAREST` measured tables nearest this public
    shape (:func:`shape_distance`, among the tables it was measured on) at the measured epsilon nearest ``epsilon``;
    ``None`` when it was never measured.  Arguments as :func:`recommend`; measured figures, not bounds."""
    shapes, measured_runs = evidence if evidence is not None else shipped_evidence()
    shape, _ = _shape(n_columns, n_rows, column_kinds, epsilon)
    runs = [r for r in measured_runs if r[2] == mechanism]
    if not runs:
        return None
    tables = sorted({r[0] for r in runs}, key=lambda t: shape_distance(shape, Shape(*shapes[t])))[:NEAREST]
    eps = min({r[1] for r in runs if r[0] in tables}, key=lambda e: abs(math.log(e / epsilon)))
    return MeasuredAccuracy(mechanism, eps, tuple((t, shapes[t][1], shapes[t][0]) for t in tables),
                            tvd1_range=_range(runs, tables, eps, mechanism, "tvd1"),
                            tvd2_range=_range(runs, tables, eps, mechanism, "tvd2"),
                            w1_range=_range(runs, tables, eps, mechanism, "w1"),
                            nearest_tvd2_range=_range(runs, tables[:1], eps, mechanism, "tvd2"))


def _shape(n_columns: int, n_rows: int, column_kinds: Sequence[str], epsilon: float) -> tuple[Shape, list[str]]:
    """The :class:`Shape` of a table and its column kinds (all numeric when none are given), checked."""
    if n_columns < 1 or n_rows < 1 or not epsilon > 0:
        raise ValueError("n_columns, n_rows and epsilon must be positive")
    kinds = list(column_kinds) or ["numeric"] * n_columns
    unknown = sorted(set(kinds) - set(KINDS))
    if unknown:
        raise ValueError(f"column kinds must be among {KINDS}, got {unknown}")
    if len(kinds) != n_columns:
        raise ValueError(f"{len(kinds)} column kinds for {n_columns} columns")
    categorical = sum(k in ("categorical", "boolean") for k in kinds)
    return Shape(n_columns, n_rows, categorical, kinds.count("integer")), kinds


def _ranks(entries: dict) -> dict[str, list[int]]:
    """Each mechanism's rank in every comparison (:func:`rank_runs`: overlapping intervals share a rank); one
    without a measurement in a comparison (it failed or was not run there) ranks after every measured one."""
    names = {name for measured in entries.values() for name in measured}
    ranks: dict[str, list[int]] = {name: [] for name in names}
    for measured in entries.values():
        if not measured:
            continue
        ranked = rank_runs(measured)
        found = dict(zip(ranked["run"], ranked["rank"], strict=True))
        last = max(found.values()) + 1
        for name in names:
            ranks[name].append(int(found.get(name, last)))
    return ranks


def _mean_value(entries: dict, mechanism: str, metric: str) -> float:
    values = [measured[mechanism][0] for (_, m), measured in entries.items() if m == metric and mechanism in measured]
    return mean(values) if values else math.inf


def _seconds(runs: list[tuple], tables: list[str], eps: float, mechanism: str) -> float:
    """Mean seconds of a synthesis by ``mechanism`` on ``tables`` at ``eps`` (infinite when never timed)."""
    found = [r[4] for r in runs if r[0] in tables and r[1] == eps and r[2] == mechanism and r[3] == "seconds"]
    return mean(found) if found else math.inf


def _range(runs: list[tuple], tables: list[str], eps: float, mechanism: str,
           metric: str) -> tuple[float, float] | None:
    found = [r for r in runs if r[0] in tables and r[1] == eps and r[2] == mechanism and r[3] == metric]
    return (min(r[5] for r in found), max(r[6] for r in found)) if found else None


def _why_fastest(best: str, others: list[str]) -> str:
    """The second sentence when candidates as good on the evidence were passed over for speed."""
    if not others:
        return ""
    return f" As good on this evidence: {', '.join(sorted(others))}; {best} is the fastest of them."


def _why_wait(best: str, mean_rank: dict[str, float], entries: dict, seconds: dict[str, float]) -> str:
    """When the pick runs in an outside library (a peer): what waiting for it buys over the best of privsyn_core's
    own mechanisms on the same evidence (lowest mean rank, then fastest): both mean 2-way TVDs and W1s with the
    span of their 95% intervals, on how many tables the peer is better beyond the intervals, and both times."""
    library = _implemented_by(best)
    ours = [m for m in mean_rank if _implemented_by(m) is None]
    if library is None or not ours:
        return ""
    own = min(ours, key=lambda m: (mean_rank[m], seconds[m]))

    def took(m: str) -> str:
        return f"about {_duration(seconds[m])} a run" if math.isfinite(seconds[m]) else "not timed"

    def figures(m: str) -> str:
        return (f"a mean 2-way TVD of {_with_span(entries, m, 'tvd2')} and a mean W1 of "
                f"{_with_span(entries, m, 'w1')}")

    return (f" {best} runs in {library} ({took(best)}): on these tables it has {figures(best)}, against "
            f"{figures(own)} for {own}, the best of this library's own ({took(own)}); it is better beyond the "
            f"intervals on {_clearly_better(entries, best, own, 'tvd2')} by 2-way TVD and on "
            f"{_clearly_better(entries, best, own, 'w1')} by W1.")


def _with_span(entries: dict, mechanism: str, metric: str) -> str:
    """``0.200 (intervals 0.150-0.260)``: the mean over the tables and the span of the 95% intervals there."""
    measured = [found[mechanism] for (_, m), found in entries.items() if m == metric and mechanism in found]
    if not measured:
        return "not measured"
    low = min(interval[1] for interval in measured)
    high = max(interval[2] for interval in measured)
    span = "" if math.isnan(low) or math.isnan(high) else f" (intervals {low:.3f}-{high:.3f})"
    return f"{mean(interval[0] for interval in measured):.3f}{span}"


def _clearly_better(entries: dict, better: str, worse: str, metric: str) -> str:
    """``2 of 4 tables``: on how many tables measuring both the upper end of ``better``'s 95% interval lies below
    the lower end of ``worse``'s."""
    both = [found for (_, m), found in entries.items() if m == metric and better in found and worse in found]
    wins = sum(found[better][2] < found[worse][1] for found in both)
    return f"{wins} of {len(both)} table{'s' if len(both) != 1 else ''}"


def _duration(seconds: float) -> str:
    """Seconds to two significant figures, in plain digits: ``0.12 s``, ``4.5 s``, ``300 s``, ``1,200 s``."""
    rounded = float(f"{seconds:.2g}")
    return f"{rounded:,.0f} s" if rounded >= 10 else f"{rounded:g} s"


def _implemented_by(name: str) -> str | None:
    """The outside library that runs a registered mechanism, ``None`` for privsyn_core's own."""
    return get_mechanism(name).implemented_by


def _why(best: str, tables: list[tuple[str, tuple[int, ...]]], eps: float, epsilon: float, ranks: list[int],
         seconds: float) -> str:
    firsts = sum(rank == 1 for rank in ranks)
    where = ", ".join(f"{t} ({shape[1]:,} rows, {shape[0]} columns)" for t, shape in tables)
    at = f"epsilon {eps:g}" + ("" if eps == epsilon else f", the measured epsilon nearest to {epsilon:g}")
    timed = f"; about {_duration(seconds)} a run there" if math.isfinite(seconds) else ""
    return (f"{best} ranked first (ties within the intervals included) in {firsts} of {len(ranks)} comparisons by "
            f"2-way marginal TVD and W1 on the most similar measured tables, {where}, at {at}{timed}.")


__all__ = ["KINDS", "NEAREST", "RANK_SLACK", "MeasuredAccuracy", "Recommendation", "Shape", "candidates",
           "column_kinds", "measured_accuracy", "recommend", "shape_distance", "stand_in_schema"]
