"""A mechanism guide: which registered mechanism to try first for a table's shape, from measured results.

:func:`recommend` looks up the measured runs of ``benchmarks/peers``
(:data:`privsyn_core.evaluation._guide_measured.MEASURED`, regenerated from ``benchmarks/peers/results.json`` by
:func:`measured_from_results`) on the structured tables
(blobs, balog, breast-cancer, wine: the uniform tables have nothing to find), takes the runs nearest to the
table's shape (number of columns, then ``log10`` of the rows, then epsilon) and recommends the mechanism with the
lowest median 2-way TVD there, W1 breaking ties.  Those TVDs were measured on a single grid of 20 equal bins per
numeric column, before :func:`~privsyn_core.evaluation.scorecard.evaluate` averaged over grids: compare them with
``marginal_tvd(..., bins=20)``, not with the robust TVD ``evaluate`` reports now.  The expected ranges are the
minimum and maximum of that mechanism's measured values over the nearest runs: measured numbers, not bounds.
Outside the measured shapes (more than 5 columns, other sizes) the nearest measured shape is used and ``why``
says so.

Boolean tables (every column 0/1 or two categories) get ``microagg_dp`` only when asked about Boolean data by
``column_kinds``; it is not in the measured runs, so its ranges are ``None``.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from statistics import median

from privsyn_core.evaluation._guide_measured import MEASURED

#: Datasets of the measured runs whose records have structure (the uniform ones are excluded).
STRUCTURED = ("blobs_d2", "blobs_d3", "blobs_d5", "balog_d2", "breast_cancer", "wine")
KINDS = ("numeric", "categorical", "boolean")


@dataclass(frozen=True)
class Recommendation:
    """What :func:`recommend` returns.

    Attributes
    ----------
    mechanism : str
        Registry key.
    expected_tvd2_range, expected_w1_range : (float, float) or None
        Measured minimum and maximum of the mean 2-way marginal TVD (20 equal bins per numeric column) and of W1
        (unit cube, l-infinity) on the nearest measured shapes; ``None`` when there is no measurement.
    why : str
        One sentence.
    """

    mechanism: str
    expected_tvd2_range: tuple[float, float] | None
    expected_w1_range: tuple[float, float] | None
    why: str


def recommend(n_columns: int, n_rows: int, column_kinds: Sequence[str], epsilon: float) -> Recommendation:
    """The mechanism to try first for a table of ``n_columns`` columns and about ``n_rows`` rows.

    Parameters
    ----------
    n_columns : int
    n_rows : int
        A public estimate is enough (the recommendation is coarse).
    column_kinds : sequence of {"numeric", "categorical", "boolean"}
    epsilon : float
    """
    if n_columns < 1 or n_rows < 1 or not epsilon > 0:
        raise ValueError("n_columns, n_rows and epsilon must be positive")
    unknown = sorted(set(column_kinds) - set(KINDS))
    if unknown:
        raise ValueError(f"column kinds must be among {KINDS}, got {unknown}")
    if column_kinds and all(k == "boolean" for k in column_kinds) and n_rows >= 10_000:
        return Recommendation("microagg_dp", None, None,
                              "every column is Boolean and the table is large, which is what the microaggregation "
                              "mechanism of Boedihardjo, Strohmer and Vershynin is built for (not in the measured "
                              "runs).")
    runs = [r for r in MEASURED if r[1] in STRUCTURED]
    d = min({r[2] for r in runs}, key=lambda x: (abs(x - max(2, n_columns)), -x))
    runs = [r for r in runs if r[2] == d]
    size = min({r[3] for r in runs}, key=lambda x: abs(math.log10(x) - math.log10(n_rows)))
    runs = [r for r in runs if r[3] == size]
    eps = min({r[4] for r in runs}, key=lambda x: abs(math.log(x) - math.log(epsilon)))
    runs = [r for r in runs if r[4] == eps]
    by_mechanism: dict[str, list[tuple]] = {}
    for r in runs:
        by_mechanism.setdefault(r[0], []).append(r)
    best = min(by_mechanism, key=lambda m: (median(r[5] for r in by_mechanism[m]),
                                            median(r[6] for r in by_mechanism[m])))
    chosen = by_mechanism[best]
    tvd2 = (min(r[5] for r in chosen), max(r[5] for r in chosen))
    w1 = (min(r[6] for r in chosen), max(r[6] for r in chosen))
    nearest = f"{d} columns, {size} rows, epsilon {eps:g}"
    exact = (d == n_columns and size == n_rows and eps == epsilon)
    why = (f"{best} had the lowest median 2-way TVD (20 equal bins) of our mechanisms on the measured structured "
           f"tables with {nearest}"
           + ("" if exact else f" (the nearest measured shape to {n_columns} columns, {n_rows} rows, "
                               f"epsilon {epsilon:g})") + ".")
    return Recommendation(best, tvd2, w1, why)


def measured_from_results(results: list[dict]) -> list[tuple]:
    """The rows of :data:`MEASURED` from the peer benchmark's ``results.json`` (our mechanisms, finished runs)."""
    ours = {"pmm", "psmm", "srw_tsp", "kd_grid", "kd_adaptive", "dp_histogram"}
    return [(r["system"], r["dataset"], r["d"], r["n"], r["epsilon"], round(r["tvd2"], 4), round(r["w1"], 4))
            for r in results if r["system"] in ours and r.get("tvd2") is not None and r.get("w1") is not None]


__all__ = ["Recommendation", "measured_from_results", "recommend"]
