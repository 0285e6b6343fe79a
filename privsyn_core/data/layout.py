r"""Automatic layouts that never degenerate silently: a floor on the resolution and the warnings of a coarse one.

The paper rules for the cells per axis ``k`` of a grid (kd_grid, dp_histogram, psmm, srw_tsp) minimise a
worst-case W1 bound.  On wide tables with few records that bound is minimised by ``k = 1``: one cell, and
the output carries no structure at all.  The automatic layouts therefore take

.. math:: k = \max\bigl(k_{\text{rule}},\ \min(k_{\text{target}}, k_{\text{afford}}),\ 2\bigr),

where ``k_target`` (:func:`target_cells_per_axis`: 4 for ``d <= 4``, else 3) is the resolution at which a
marginal starts to show a shape, and ``k_afford`` the largest ``k`` the budget pays for, a per-mechanism
criterion on public quantities only (``n`` the public count, ``d``, ``epsilon``):

* flat noisy histograms (dp_histogram, psmm, srw_tsp): the expected absolute noise of the ``k^d`` counts,
  ``k^d s / epsilon`` (``E|Lap_Z(b)| <= b``), is at most :data:`NOISE_MASS_FACTOR` times the ``n`` records
  (:func:`affordable_noise_mass`).  Clipping or projecting the negative part removes about half of it, and
  the occupied cells keep their counts, so a finer grid pays while its noise mass stays within a few ``n``
  and not once it is tens of times ``n``;
* thresholded histograms (kd_grid): ``k`` cells holding ``t(k)`` records each, the threshold, take at
  most a quarter of the records (``k t(k) <= n/4``), so a marginal can show ``k`` released cells even
  when the records spread over several times that many cells (with ``n/2``, a 7-column table of 233
  rows at epsilon 0.5 got 3 bins per axis and released no cell at all).

Everything here reads public inputs only, so the layout and its warnings may be released.  A layout with
one cell, or with two or fewer cells on an axis, is reported in ``MechanismOutput.warnings``
(:func:`coarse_warnings`).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

#: Never fewer cells per axis than this on an automatic layout (one cell carries no structure).
MIN_CELLS_PER_AXIS = 2
#: A flat noisy grid is affordable while its expected absolute noise is at most this many times ``n``.
NOISE_MASS_FACTOR = 4


def target_cells_per_axis(d: int) -> int:
    """The resolution an automatic layout reaches when the budget allows: 4 per axis for ``d <= 4``, else 3."""
    return 4 if d <= 4 else 3


def affordable_noise_mass(n: float | None, d: int, epsilon: float, sensitivity: float) -> int:
    """Largest ``k`` with ``k^d sensitivity / epsilon <= NOISE_MASS_FACTOR n`` (module docstring), at least 1."""
    if n is None:
        return 1
    k = max(1, math.floor((NOISE_MASS_FACTOR * epsilon * n / sensitivity) ** (1.0 / d) + 1e-9))
    return min(k, 4096)


def affordable(criterion: Callable[[int], bool], d: int) -> int:
    """Largest ``k <= target_cells_per_axis(d)`` satisfying ``criterion`` (1 when none does)."""
    best = 1
    for k in range(2, target_cells_per_axis(d) + 1):
        if criterion(k):
            best = k
    return best


def structured(rule_k: int, afford_k: int, d: int) -> int:
    """``max(rule_k, min(target, afford_k), MIN_CELLS_PER_AXIS)`` (module docstring)."""
    return max(int(rule_k), min(target_cells_per_axis(d), int(afford_k)), MIN_CELLS_PER_AXIS)


def coarse_warnings(cells_per_axis: Sequence[int], mechanism: str, hint: str = "") -> list[str]:
    """Warnings for a layout with one cell, axes with one cell, or at most two cells on every axis.

    ``cells_per_axis[j]`` is the number of cells of the layout on column ``j`` (schema order); a public
    quantity.  ``hint`` says what would help (e.g. a larger epsilon).
    """
    cells = [int(c) for c in cells_per_axis]
    tail = f"; {hint}" if hint else ""
    if all(c <= 1 for c in cells):
        return [f"{mechanism}: the layout has a single cell, so the output carries no structure (rows are spread "
                f"over the whole public box){tail}"]
    single = [j for j, c in enumerate(cells) if c <= 1]
    if single:
        return [f"{mechanism}: column(s) {single} (schema order) are never cut (one cell each), so their synthetic "
                f"values carry no structure{tail}"]
    halves = [j for j, c in enumerate(cells) if c == 2]
    if len(halves) == len(cells):
        return [f"{mechanism}: only 2 cells per axis, so each column shows only which half of its range a row "
                f"falls in{tail}"]
    if halves:
        return [f"{mechanism}: column(s) {halves} (schema order) have only 2 cells, so they show only which half "
                f"of their range a row falls in{tail}"]
    return []


#: The hint every automatic grid layout gives when it is coarse.
BUDGET_HINT = ("the budget (epsilon * n) cannot pay for more cells on this many columns: raise epsilon, use fewer "
               "columns, or try pmm")
