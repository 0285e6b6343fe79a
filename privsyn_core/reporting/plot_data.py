"""What the figures draw, computed without a drawing library: shared by the Plotly figures
(:mod:`privsyn_core.reporting.figures`, the app) and the inline SVG charts
(:mod:`privsyn_core.reporting.svg_charts`, the app and the reports a core install writes).

Everything here is numpy and pandas: point clouds in the columns' own units, marginal shares on bins fixed by the
public schema, correlation matrices, and the geometry a mechanism's release alone shows.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
import pandas as pd

MAX_POINTS = 5000
REAL_COLOUR = "#1f77b4"
SYNTH_COLOUR = "#d62728"
NOT_PRIVATE = "uses the real data: not private"


def downsample(points: np.ndarray, max_points: int = MAX_POINTS, seed: int = 0) -> np.ndarray:
    """At most ``max_points`` rows, drawn without replacement with a fixed seed (display only)."""
    points = np.asarray(points)
    if len(points) <= max_points:
        return points
    keep = np.random.default_rng(seed).choice(len(points), max_points, replace=False)
    return points[np.sort(keep)]


#: Most category names an axis labels (a longer list labels every k-th).
MAX_CATEGORY_TICKS = 20


def plot_coordinates(frame: pd.DataFrame, schema: dict, names: Sequence[str], *, jitter: float = 0.3,
                     seed: int = 0) -> tuple[np.ndarray, list[dict]]:
    """Columns in their own units for a scatter, with the axis settings of each.

    Numeric columns are drawn as they are, on their public range ``[lo, hi]``; a categorical column as
    the position of each value in the public category order plus a uniform jitter in
    ``[-jitter, jitter]`` (display only), with the categories as tick labels.
    """
    columns = {c["name"]: c for c in schema["columns"]}
    rng = np.random.default_rng(seed)
    out, settings = np.empty((len(frame), len(names))), []
    for j, name in enumerate(names):
        column = columns[name]
        if column["kind"] == "categorical":
            order = {str(c): i for i, c in enumerate(column["categories"])}
            codes = frame[name].astype(str).map(order).to_numpy(dtype=float)
            out[:, j] = codes + rng.uniform(-jitter, jitter, len(frame))
            k = len(order)
            settings.append({"range": [-0.5, k - 0.5], "tickvals": list(range(k)), "ticktext": list(order)})
        else:
            out[:, j] = frame[name].to_numpy(dtype=float)
            pad = 0.02 * (column["hi"] - column["lo"])
            settings.append({"range": [column["lo"] - pad, column["hi"] + pad]})
    return out, settings



#: Equal bins of a numeric column's public range in the small multiples (an integer column with fewer values
#: than this gets one bar per integer instead).
MARGINAL_BINS = 20
#: Equal bins of one column's public range in Compare's larger single-column marginal.
MARGINAL_DETAIL_BINS = 30
#: At most this many columns are drawn as small multiples (the figure says when more were left out).
MARGINAL_MAX_COLUMNS = 36
#: At most this many categories of one column are drawn, the first ones in the public order (a public cut).
MARGINAL_MAX_CATEGORIES = 60
#: The small multiples' one-line caption (the figure's subtitle).
MARGINALS_CAPTION = "Share of rows per bin of each column's public range, or per category in its public order"
#: What the caption leaves out (shown under the figure and in the report).
MARGINALS_NOTE = ("Bins and categories come from the public schema alone; values outside a range count in its end "
                  "bins, as the mechanisms clip them.")
COMPARE_HINT = ": look for the same shape in both colours"


def marginal_panels(synthetic: pd.DataFrame, schema: dict, *, real: pd.DataFrame | None = None,
                    bins: int = MARGINAL_BINS, max_categories: int = MARGINAL_MAX_CATEGORIES) -> list[dict]:
    r"""The data of one marginal panel per column: shares of rows on bins fixed by the *public* schema alone.

    A numeric column with public range :math:`[lo, hi]` is cut into ``bins`` equal bins
    :math:`[lo + (hi - lo) k / b, lo + (hi - lo)(k + 1) / b)` (the last one closed); an integer column gets bins
    of :math:`w = \lceil (hi - lo + 1) / b \rceil` whole integers, :math:`[v - 1/2, v + w - 1/2)` (one bar per
    integer when there are at most ``bins`` of them; the last bin may hold fewer), so that no bin holds one
    integer more than its neighbour.  Values
    are clipped onto :math:`[lo, hi]` first (what every mechanism does before it runs), so a real value outside
    the range counts in an end bin.  A categorical column has one bar per category in the schema's order;
    a value outside the public categories counts in no bar (the shares then sum to less than 1); of a long list
    only the first ``max_categories`` are drawn, and the axis says so.  Every share
    is a count over all rows of its table, so the bins and their order are the same for the real and the
    synthetic table and are never read off either.

    Parameters
    ----------
    synthetic : DataFrame
        The synthetic rows (the release), decoded: columns in their own units.
    schema : dict
        The public schema (:meth:`privsyn_core.Schema.to_dict`); its column order is the panels' order.
    real : DataFrame, optional
        The real rows (teaching only: drawing them is not private); ``None`` in release mode.
    bins : int
        Equal bins of a numeric column's public range.
    max_categories : int
        Bars of a categorical column (its first categories in the public order).

    Returns
    -------
    list of dict
        One dict per column: ``name``, ``kind``, ``unit`` (the x axis's title), ``labels`` (one per bar: the
        category, or the bin's lower edge), ``edges`` (bin edges, ``None`` for a categorical column) and
        ``shares`` (series name -> share of rows per bar: real first when given, then synthetic).
    """
    frames = ([(f"real ({NOT_PRIVATE})", real)] if real is not None else []) + [("synthetic", synthetic)]
    panels = []
    for column in schema["columns"]:
        name = column["name"]
        if column["kind"] == "categorical":
            every = [str(c) for c in column["categories"]]
            labels = every[:max_categories]
            edges, unit = None, "category (public order)" if len(every) == len(labels) else \
                f"category (the first {len(labels)} of {len(every)} in public order)"
            shares = {what: frame[name].astype(str).value_counts().reindex(labels, fill_value=0).to_numpy(float)
                      / max(len(frame), 1) for what, frame in frames}
        else:
            lo, hi = float(column["lo"]), float(column["hi"])
            if column.get("integer") and hi - lo >= 1:
                first, last = math.ceil(lo), math.floor(hi)
                step = math.ceil((last - first + 1) / bins)
                edges = np.append(np.arange(first, last + 1, step) - 0.5, last + 0.5)
                labels = [f"{e + 0.5:g}" for e in edges[:-1]]
            else:
                edges = np.linspace(lo, hi, bins + 1)
                labels = [f"{e:.4g}" for e in edges[:-1]]
            unit = f"{name}: value (public range {lo:g} to {hi:g})"
            shares = {what: np.histogram(np.clip(frame[name].to_numpy(float), lo, hi), bins=edges)[0]
                      / max(len(frame), 1) for what, frame in frames}
        panels.append({"name": str(name), "kind": column["kind"], "unit": unit, "labels": labels, "edges": edges,
                       "shares": shares})
    return panels


def correlation_matrix(unit: np.ndarray) -> np.ndarray:
    r"""Pearson correlations between the columns of ``unit`` (rows in the schema's unit coordinates).

    :math:`\rho_{jk} = \mathrm{cov}(x_j, x_k) / (\sigma_j \sigma_k)`; a categorical column enters as the
    position of its value in the public category order (as in ``metrics.correlation_gap``).  A column with
    no spread (a single value) has no correlation: its row and column are NaN, the diagonal is 1.
    """
    X = np.asarray(unit, dtype=float)
    d = X.shape[1] if X.ndim == 2 else 0
    out = np.full((d, d), np.nan)
    if X.ndim != 2 or len(X) < 2:
        np.fill_diagonal(out, 1.0)
        return out
    centred = X - X.mean(axis=0)
    scale = np.sqrt((centred ** 2).sum(axis=0))
    ok = scale > 1e-12 * max(1.0, float(np.abs(X).max(initial=0.0)))
    if ok.any():
        z = centred[:, ok] / scale[ok]
        out[np.ix_(ok, ok)] = np.clip(z.T @ z, -1.0, 1.0)
    np.fill_diagonal(out, 1.0)
    return out


def released_partition(release) -> dict | None:
    """The cells of a partition mechanism rebuilt from a :class:`privsyn_core.result.Release` alone.

    Release mode may draw only what was released, never ``SynthResult.diagnostics`` (true counts, occupied
    cells): the mechanism's ``released_geometry`` hook (:class:`privsyn_core.MechanismSpec`) rebuilds it from the
    release's atoms, weights or rows and its declared public parameters.

    Returns
    -------
    dict or None
        ``{"cells": {"lo", "hi", "count"}, "levels": [cells per level] or None, "value": label}``;
        ``None`` for mechanisms that release no partition of public geometry.
    """
    geometry = _released_geometry(release)
    return geometry if geometry is not None and "cells" in geometry else None


def released_path(release) -> np.ndarray | None:
    """The folding path of a release, rebuilt by its mechanism's ``released_geometry`` hook from the release alone:
    ``(k, d)`` points in path order (on one column, ``(k, 1)``: the interval itself); ``None`` for a mechanism that
    folds nothing onto a path."""
    geometry = _released_geometry(release)
    return None if geometry is None or "path" not in geometry else np.asarray(geometry["path"], dtype=float)


def _released_geometry(release) -> dict | None:
    from privsyn_core.registry import get_mechanism

    hook = get_mechanism(release.mechanism).released_geometry
    return None if hook is None else hook(release)


def tree_positions(edges: Sequence[Sequence[int]], root: int, d: int) -> np.ndarray:
    """``(d, 2)`` drawing positions of a tree on ``d`` nodes: depth from ``root`` downwards, leaves evenly spaced.

    Children are visited in the order their edges are listed; a parent sits above the middle of its children.
    Nodes the edges do not reach (none in a spanning tree) are put in a row below.
    """
    children: dict[int, list[int]] = {a: [] for a in range(d)}
    neighbours: dict[int, list[int]] = {a: [] for a in range(d)}
    for a, b in edges:
        neighbours[int(a)].append(int(b))
        neighbours[int(b)].append(int(a))
    depth = {root: 0}
    order = [root]
    for node in order:
        for other in neighbours[node]:
            if other not in depth:
                depth[other] = depth[node] + 1
                children[node].append(other)
                order.append(other)
    xy = np.zeros((d, 2))
    leaves = 0

    def place(node: int) -> float:
        nonlocal leaves
        if not children[node]:
            x = float(leaves)
            leaves += 1
        else:
            x = float(np.mean([place(c) for c in children[node]]))
        xy[node] = (x, -depth[node])
        return x

    place(root)
    lost = [a for a in range(d) if a not in depth]
    bottom = -max(depth.values()) - 1
    for i, a in enumerate(lost):
        xy[a] = (i, bottom)
    return xy


