"""What a release's accuracy can be known to be without the real data: derived from its noise plan, and measured
on the public benchmark tables nearest its shape.

A release-mode report never reads the real data, so it cannot measure the synthetic table's quality.  Two things
can still be known from public inputs alone, and :func:`outlook` says both in plain words, each with its figure:

* **derived** (:func:`noise_plan`): a count released with a share ``e`` of the budget gets discrete Laplace noise of
  scale ``b = S / e``, with ``S`` the L1 sensitivity of a table of counts (2 when neighbours replace one record, 1
  when they add or remove one).  Its standard deviation is ``sqrt(2 q) / (1 - q)`` with ``q = exp(-1/b)``, about
  ``sqrt(2) b`` (Canonne, Kamath, Steinke, NeurIPS 2020, the discrete Laplace law).  ``e`` is the median spend of
  the release's ledger, a typical step (the largest spend, the least noise any count of the release gets, is stated
  beside it; a mechanism's steps count different things, so no one figure fits every count).  It is set against
  the average count of a cell: the released
  row count over the cells of a column or of a pair of columns, with categories and few-valued integers as they
  are and every other numeric column cut into :data:`COARSE_BINS` ranges (the median over columns and pairs);
* **measured** (:func:`privsyn_core.evaluation.guide.measured_accuracy`): the mechanism's measured 1-way and
  2-way marginal TVD and W1 on the nearest public benchmark tables at the nearest measured epsilon, with their
  95% intervals.

The release is called weak, and the report says so first, when the typical step's noise is at least
:data:`WEAK_NOISE_SHARE` of the average cell of a pair (a relationship is then likely lost) or of a column, when the
nearest measured table has a 2-way TVD interval wholly above :data:`privsyn_core.reporting.verdicts.ROUGH_TVD`, or
when the table is smaller than every measured table.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from itertools import combinations
from statistics import median

from privsyn_core.data.domain import Schema
from privsyn_core.data.levelled_codec import level_count
from privsyn_core.evaluation import guide
from privsyn_core.reporting.verdicts import ROUGH_TVD
from privsyn_core.result import Release

#: Ranges a numeric column with many values is cut into for the derived figures (coarse: the favourable case).
COARSE_BINS = 5
#: Noise of at least this share of an average cell count makes the cells, and what they carry, unreadable.
WEAK_NOISE_SHARE = 0.5
#: L1 sensitivity of a table of counts under each neighbouring relation.
SENSITIVITY = {"replace": 2, "add_remove": 1}


@dataclass(frozen=True)
class NoisePlan:
    """The noise a release's counts get, set against the average cells it counts (module docstring).

    Attributes
    ----------
    rows : int
        The released row count (public: the release's own size).
    epsilon, stage_epsilon, largest_epsilon : float
        The release's epsilon, its median and its largest single spend; ``stages`` the number of spends.
    sensitivity : int
    noise_sd, largest_sd : float
        Standard deviation of discrete Laplace noise of scale ``sensitivity / stage_epsilon`` (a typical step) and
        of scale ``sensitivity / largest_epsilon`` (the least noise of any count of the release).
    column_cells, pair_cells : int
        Median number of cells of one column and of one pair of columns (0: the table has one column).
    """

    rows: int
    epsilon: float
    stage_epsilon: float
    largest_epsilon: float
    stages: int
    sensitivity: int
    noise_sd: float
    largest_sd: float
    column_cells: int
    pair_cells: int

    def share(self, cells: int) -> float:
        """The noise as a share of the average count of ``cells`` cells."""
        return self.noise_sd / (self.rows / cells)


@dataclass(frozen=True)
class Outlook:
    """Plain sentences, each with its figure: why the release is weak (empty when nothing says so), what the noise
    plan implies, and what was measured on public tables."""

    weak: tuple[str, ...]
    derived: tuple[str, ...]
    measured: tuple[str, ...]


def discrete_laplace_sd(scale: float) -> float:
    """Standard deviation of the discrete Laplace law of scale ``b``: ``sqrt(2 q) / (1 - q)``, ``q = exp(-1/b)``."""
    q = math.exp(-1.0 / scale)
    return math.sqrt(2.0 * q) / (1.0 - q)


def cells(schema: Schema) -> list[int]:
    """Cells of each column for the derived figures: its public levels, or :data:`COARSE_BINS` ranges."""
    return [level_count(c) or COARSE_BINS for c in schema.columns]


def noise_plan(release: Release) -> NoisePlan | None:
    """The release's :class:`NoisePlan`, or ``None`` without a ledger, rows or a finite epsilon."""
    spends = [float(e) for _, e in release.ledger if float(e) > 0]
    if not spends or not len(release.data) or not math.isfinite(release.epsilon):
        return None
    sensitivity = SENSITIVITY.get(release.neighbouring, 2)
    stage = median(spends)
    per_column = cells(Schema.from_dict(release.schema))
    pairs = [a * b for a, b in combinations(per_column, 2)]
    return NoisePlan(len(release.data), release.epsilon, stage, max(spends), len(spends), sensitivity,
                     discrete_laplace_sd(sensitivity / stage), discrete_laplace_sd(sensitivity / max(spends)),
                     round(median(per_column)),
                     round(median(pairs)) if pairs else 0)


def outlook(release: Release) -> Outlook:
    """What can be known about the release's accuracy without the real data (module docstring)."""
    plan = noise_plan(release)
    schema = Schema.from_dict(release.schema)
    measured = guide.measured_accuracy(release.mechanism, len(schema.columns), max(len(release.data), 1),
                                       guide.column_kinds(schema), release.epsilon) if plan else None
    weak = (*_weak_plan(plan), *_weak_measured(measured, len(release.data))) if plan else ()
    return Outlook(weak, _derived(plan) if plan else (), _measured(measured))


def _weak_plan(plan: NoisePlan) -> list[str]:
    found = []
    if plan.pair_cells and plan.share(plan.pair_cells) >= WEAK_NOISE_SHARE:
        found.append(f"Relationships between columns are likely lost: a typical step of this release adds random "
                     f"noise of about {_count(plan.noise_sd)} rows to each count, while a typical cell of a pair of "
                     f"columns holds about {_count(plan.rows / plan.pair_cells)} rows "
                     f"({_percent(plan.share(plan.pair_cells))} of it).")
    if plan.share(plan.column_cells) >= WEAK_NOISE_SHARE:
        found.append(f"Even single columns are likely distorted: a typical step adds random noise of about "
                     f"{_count(plan.noise_sd)} rows to each count, while a typical cell of a column holds about "
                     f"{_count(plan.rows / plan.column_cells)} rows ({_percent(plan.share(plan.column_cells))} of it).")
    return found


def _weak_measured(measured: guide.MeasuredAccuracy | None, rows: int) -> list[str]:
    if measured is None:
        return []
    found = []
    smallest = min(r for _, r, _ in measured.tables)
    if rows < smallest:
        found.append(f"The table is small for its privacy budget: its {rows:,} rows are fewer than on every public "
                     f"table this method was measured on (the smallest has {smallest:,}), and fewer rows mean "
                     "relatively more noise.")
    name, table_rows, columns = measured.tables[0]
    name = name.replace("_", " ")
    nearest = measured.nearest_tvd2_range
    if nearest is not None and nearest[0] > ROUGH_TVD:
        found.append(f"On the most similar public table ({name}, {table_rows:,} rows, {columns} columns) this "
                     f"method (default settings) misplaced {_percent(nearest[0])} to {_percent(nearest[1])} of the "
                     f"joint distribution of a pair of columns at epsilon {measured.epsilon:g}, more than the "
                     f"{_percent(ROUGH_TVD)} up to which a shape counts as roughly kept.")
    return found


def _derived(plan: NoisePlan) -> tuple[str, ...]:
    said = [f"The privacy budget, epsilon {plan.epsilon:g}, is spent in {plan.stages} step(s); a typical step (the "
            f"median) spends epsilon {plan.stage_epsilon:.3g} and adds random noise of about {_count(plan.noise_sd)} "
            "rows to each count it releases (one standard deviation)"
            + (f"; the largest step, epsilon {plan.largest_epsilon:.3g}, about {_count(plan.largest_sd)} rows."
               if plan.largest_epsilon > plan.stage_epsilon else "."),
            f"Cut into {plan.column_cells} groups (the median over columns: categories and few-valued whole numbers "
            f"as they are, other numeric columns in {COARSE_BINS} ranges), a column of the {plan.rows:,} released "
            f"rows holds about {_count(plan.rows / plan.column_cells)} rows per group, so a typical step's noise is "
            f"about {_percent(plan.share(plan.column_cells))} of a typical group."]
    if plan.pair_cells:
        said.append(f"A pair of columns has about {plan.pair_cells} combined groups holding about "
                    f"{_count(plan.rows / plan.pair_cells)} rows each, so that noise is about "
                    f"{_percent(plan.share(plan.pair_cells))} of a typical group of a pair.")
    return tuple(said)


def _measured(measured: guide.MeasuredAccuracy | None) -> tuple[str, ...]:
    if measured is None:
        return ("This method was not measured on the public benchmark tables, so no measured figure can be shown.",)
    where = "; ".join(f"{name.replace('_', ' ')} ({rows:,} rows, {columns} columns)"
                      for name, rows, columns in measured.tables)
    said = [f"Measured on the public tables most like this one in shape ({where}) at epsilon {measured.epsilon:g}, "
            "with the method's default settings, over repeated runs with 95% intervals:"]
    if measured.tvd2_range is not None:
        said.append(f"between {_percent(measured.tvd2_range[0])} and {_percent(measured.tvd2_range[1])} of the joint "
                    "distribution of a pair of columns was misplaced on average;")
    if measured.tvd1_range is not None:
        said.append(f"between {_percent(measured.tvd1_range[0])} and {_percent(measured.tvd1_range[1])} of a "
                    "column's distribution was misplaced on average;")
    if measured.w1_range is not None:
        said.append(f"rows would have to move between {measured.w1_range[0]:.2f} and {measured.w1_range[1]:.2f} on "
                    "average to match the real ones, with every column scaled to run from 0 to 1.")
    said.append("These are other tables: this one can do better or worse.")
    return tuple(said)


def _percent(share: float) -> str:
    return f"{100 * share:.0f}%" if share >= 0.01 else f"{100 * share:.1f}%"


def _count(rows: float) -> str:
    """A number of rows: one decimal below 100, whole and grouped from there."""
    return f"{rows:.1f}" if rows < 100 else f"{rows:,.0f}"
