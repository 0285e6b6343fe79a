"""Plotly figure builders for the app and the HTML report (pure: no Streamlit).

Conventions (``docs/diagnostics.md``):

* all partition rectangles go into *one* trace per colour bin, separated by NaN, never
  into ``layout.shapes`` (which is quadratic to build and slow to pan);
* point clouds above :data:`WEBGL_THRESHOLD` points use ``Scattergl`` and are downsampled
  to at most ``max_points`` with the shown count stated in the legend;
* arrays are passed as float32 numpy arrays (Plotly >= 6 sends them as base64 typed arrays).

Every builder takes unit-cube coordinates (or decoded columns, for the comparisons) and
returns a :class:`plotly.graph_objects.Figure`.  This is the only module of the library that imports Plotly (the
``[app]`` extra); what the figures draw is computed in :mod:`privsyn_core.reporting.plot_data`, and the static
charts of the reports are :mod:`privsyn_core.reporting.svg_charts`.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
import pandas as pd
import plotly.graph_objects as go

from privsyn_core.reporting.plot_data import (
    MAX_CATEGORY_TICKS,
    MAX_POINTS,
    NOT_PRIVATE,
    REAL_COLOUR,
    SYNTH_COLOUR,
    downsample,
    tree_positions,
)

WEBGL_THRESHOLD = 1000
BIN_COLOURS = ("#f7fbff", "#c6dbef", "#9ecae1", "#6baed6", "#3182bd", "#08519c")
OUTLINE_COLOURS = ("#d9d9d9", "#9ecae1", "#6baed6", "#3182bd", "#08519c", "#08306b")
#: Above this many cells the rectangles are WebGL outlines coloured by bin instead of SVG fills.
FILL_LIMIT = 3000


def point_trace(points: np.ndarray, name: str, colour: str, *, max_points: int = MAX_POINTS,
                size: float = 4, opacity: float = 0.6, axes: tuple[int, int] = (0, 1)):
    """One marker trace of a point cloud; ``Scattergl`` above :data:`WEBGL_THRESHOLD` points."""
    points = np.asarray(points, dtype=float)
    shown = downsample(points, max_points)
    label = name if len(shown) == len(points) else f"{name} ({len(shown):,} of {len(points):,} shown)"
    cls = go.Scattergl if len(shown) > WEBGL_THRESHOLD else go.Scatter
    return cls(x=shown[:, axes[0]].astype(np.float32), y=shown[:, axes[1]].astype(np.float32), mode="markers",
               name=label, marker=dict(size=size, color=colour, opacity=opacity), hoverinfo="skip")


def rectangle_path(lo: np.ndarray, hi: np.ndarray, axes: tuple[int, int] = (0, 1)) -> tuple[np.ndarray, np.ndarray]:
    """x and y of closed rectangle outlines, one after another, separated by NaN.

    Each rectangle contributes 6 values: its 4 corners, the first corner again, NaN.
    """
    lo, hi = np.atleast_2d(lo), np.atleast_2d(hi)
    x0, x1 = lo[:, axes[0]], hi[:, axes[0]]
    y0, y1 = lo[:, axes[1]], hi[:, axes[1]]
    nan = np.full(len(lo), np.nan)
    x = np.column_stack([x0, x1, x1, x0, x0, nan]).ravel()
    y = np.column_stack([y0, y0, y1, y1, y0, nan]).ravel()
    return x, y


def project_cells(cells: dict, axes: tuple[int, int], value_key: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Cells projected onto two axes; identical projected boxes are merged and their values summed.

    Boxes are returned largest first, so smaller boxes are drawn on top.
    """
    lo, hi = np.asarray(cells["lo"], dtype=float), np.asarray(cells["hi"], dtype=float)
    values = np.asarray(cells[value_key], dtype=float)
    box = np.column_stack([lo[:, axes[0]], lo[:, axes[1]], hi[:, axes[0]], hi[:, axes[1]]])
    unique, inverse = np.unique(box, axis=0, return_inverse=True)
    merged = np.bincount(inverse.ravel(), weights=values, minlength=len(unique))
    order = np.argsort(-(unique[:, 2] - unique[:, 0]) * (unique[:, 3] - unique[:, 1]), kind="stable")
    unique, merged = unique[order], merged[order]
    d = max(axes) + 1
    plo, phi = np.zeros((len(unique), d)), np.zeros((len(unique), d))
    plo[:, axes[0]], plo[:, axes[1]] = unique[:, 0], unique[:, 1]
    phi[:, axes[0]], phi[:, axes[1]] = unique[:, 2], unique[:, 3]
    return plo, phi, merged


def colour_bins(values: np.ndarray, n_bins: int = len(BIN_COLOURS)) -> tuple[np.ndarray, np.ndarray]:
    """Bin index of every value and the bin edges (equal-width between min and max)."""
    values = np.asarray(values, dtype=float)
    lo, hi = (float(values.min()), float(values.max())) if len(values) else (0.0, 1.0)
    edges = np.linspace(lo, hi if hi > lo else lo + 1.0, n_bins + 1)
    return np.clip(np.searchsorted(edges, values, side="right") - 1, 0, n_bins - 1), edges


def _unit_axes(fig: go.Figure, labels: Sequence[str], ranges=((0.0, 1.0), (0.0, 1.0)),
               columns: Sequence[dict] | None = None) -> go.Figure:
    """Square axes over ``ranges``; with the two columns' schema entries, ticks and titles in the data's units."""
    pad = [0.02 * (r[1] - r[0]) for r in ranges]
    ticks = [unit_axis(c) for c in columns] if columns is not None else [{"title": str(lab)} for lab in labels]
    fig.update_layout(xaxis=dict(range=[ranges[0][0] - pad[0], ranges[0][1] + pad[0]], constrain="domain",
                                 **ticks[0]),
                      yaxis=dict(range=[ranges[1][0] - pad[1], ranges[1][1] + pad[1]], scaleanchor="x", scaleratio=1,
                                 constrain="domain", **ticks[1]), height=600,
                      uirevision="keep", margin=dict(l=40, r=10, t=50, b=40), legend=dict(orientation="h", y=-0.15))
    return fig


def unit_axis(column: dict) -> dict:
    """Axis settings that show a unit-cube coordinate in the column's own units (the schema's public domain).

    The geometry stays in the unit cube (the mechanism's coordinates); ticks sit at unit positions and name the
    data values there, and the title names the column with its public bounds or categories.  A numeric column
    ``x`` sits at ``(x - lo)/(hi - lo)`` (with public atoms: each atom at its slot's centre in ``[0, 1/2)`` and
    the continuous part on ``[1/2, 1]``, :func:`privsyn_core.data.unit_codec.atom_layout`); the ``i``-th of ``K``
    categories at ``(i + 1/2)/K``.
    """
    from privsyn_core.data.unit_codec import atom_layout

    name = str(column["name"])
    if column.get("kind") == "categorical":
        categories = [str(c) for c in column["categories"]]
        step = max(1, -(-len(categories) // MAX_CATEGORY_TICKS))
        shown = range(0, len(categories), step)
        return {"title": f"{name} (categories)", "tickvals": [(i + 0.5) / len(categories) for i in shown],
                "ticktext": [categories[i] for i in shown]}
    lo, hi = float(column["lo"]), float(column["hi"])
    fractions = np.linspace(0.0, 1.0, 5)
    values = lo + fractions * (hi - lo)
    text = [f"{round(v):d}" if column.get("integer") else f"{v:.4g}" for v in values]
    atoms = column.get("atoms") or []
    if atoms:
        slot, start = atom_layout(len(atoms))
        ends = np.r_[np.arange(1, len(atoms)) * slot, start]
        centres = (np.r_[0.0, ends[:-1]] + ends) / 2
        positions = list(centres) + list(start + fractions[::2] * (1 - start))
        text = [f"{a:g} (atom)" for a in atoms] + text[::2]
    else:
        positions = list(fractions)
    return {"title": f"{name} [{lo:g}, {hi:g}]", "tickvals": [float(p) for p in positions], "ticktext": text}


# -- partitions --------------------------------------------------------------------------------
def partition_figure(cells: dict, *, value_key: str = "count", axes: tuple[int, int] = (0, 1),
                     points: np.ndarray | None = None, labels: Sequence[str] = ("x0", "x1"),
                     title: str = "", max_points: int = MAX_POINTS, columns: Sequence[dict] | None = None) -> go.Figure:
    """The cells of a partition, filled by ``cells[value_key]`` in a few colour bins.

    One ``Scatter(fill="toself")`` trace per colour bin holds every rectangle of that bin
    (NaN-separated); above :data:`FILL_LIMIT` cells each bin is one ``Scattergl`` outline
    trace in the bin's colour instead.  ``points`` (teaching only) are drawn on top.  With ``columns`` (the
    schema entries of the two axes) the axes read in the data's units (:func:`unit_axis`).
    """
    lo, hi, values = project_cells(cells, axes, value_key)
    bins, edges = colour_bins(values)
    filled = len(lo) <= FILL_LIMIT
    fig = go.Figure()
    for b, colour in enumerate(BIN_COLOURS):
        members = bins == b
        if not members.any():
            continue
        x, y = rectangle_path(lo[members], hi[members], axes)
        name = f"{value_key} {edges[b]:.4g} to {edges[b + 1]:.4g}"
        if filled:
            trace = go.Scatter(x=x.astype(np.float32), y=y.astype(np.float32), mode="lines", fill="toself",
                               fillcolor=colour, line=dict(width=0.5, color="#555"), hoverinfo="skip", name=name)
        else:  # many cells: WebGL outlines coloured by bin (SVG fills of 10^4+ polygons are slow to draw)
            trace = go.Scattergl(x=x.astype(np.float32), y=y.astype(np.float32), mode="lines", hoverinfo="skip",
                                 line=dict(width=1, color=OUTLINE_COLOURS[b]), name=name)
        fig.add_trace(trace)
    if points is not None and len(points):
        fig.add_trace(point_trace(points, f"data ({NOT_PRIVATE})", "#ff7f0e", max_points=max_points, size=3,
                                  axes=axes))
    fig.update_layout(title=title or f"{len(lo):,} cells coloured by {value_key.replace('_', ' ')}")
    return _unit_axes(fig, labels, columns=columns)


def level_noise_figure(levels: Sequence[dict]) -> go.Figure:
    """Mean absolute noise (noisy minus true count) per cell at each tree level."""
    depth = np.arange(len(levels))
    noise = [float(np.mean(np.abs(np.asarray(lv["noisy_count"], float) - np.asarray(lv["true_count"], float))))
             for lv in levels]
    sizes = [len(np.asarray(lv["lo"])) for lv in levels]
    fig = go.Figure(go.Scatter(x=depth, y=noise, mode="lines+markers", name="mean |noise| per cell",
                               text=[f"{s:,} cells" for s in sizes]))
    fig.update_layout(title=f"noise per cell down the tree ({NOT_PRIVATE})", xaxis_title="level",
                      yaxis_title="mean |noisy - true| count", margin=dict(l=40, r=10, t=50, b=40))
    return fig


# -- TSP folding -------------------------------------------------------------------------------
def path_figure(path: np.ndarray, *, net: np.ndarray | None = None, points: np.ndarray | None = None,
                weights: np.ndarray | None = None, axes: tuple[int, int] = (0, 1),
                labels: Sequence[str] = ("x0", "x1"), max_points: int = MAX_POINTS,
                columns: Sequence[dict] | None = None) -> go.Figure:
    """The folding path through the space, the net points (sized by weight) and the data; with ``columns`` (the
    schema entries of the two axes) the axes read in the data's units (:func:`unit_axis`)."""
    path = np.atleast_2d(np.asarray(path, dtype=float))
    fig = go.Figure()
    if points is not None and len(points):
        fig.add_trace(point_trace(points, f"data ({NOT_PRIVATE})", "#bbbbbb", max_points=max_points, size=3,
                                  axes=axes))
    line_cls = go.Scattergl if len(path) > WEBGL_THRESHOLD else go.Scatter
    fig.add_trace(line_cls(x=path[:, axes[0]].astype(np.float32), y=path[:, axes[1]].astype(np.float32),
                           mode="lines", name=f"folding path ({len(path):,} points)", line=dict(width=1, color="#333"),
                           hoverinfo="skip"))
    fig.add_trace(go.Scatter(x=path[[0, -1], axes[0]], y=path[[0, -1], axes[1]], mode="markers+text",
                             text=["start", "end"], textposition="top center", name="path start and end",
                             marker=dict(size=10, color="#333", symbol=["circle", "square"])))
    if net is not None:
        net = np.atleast_2d(np.asarray(net, dtype=float))
        size = 4 if weights is None else 3 + 12 * np.sqrt(np.asarray(weights, float) / max(np.max(weights), 1e-300))
        fig.add_trace(go.Scatter(x=net[:, axes[0]].astype(np.float32), y=net[:, axes[1]].astype(np.float32),
                                 mode="markers", name="net points (size: released weight)",
                                 marker=dict(size=size, color=SYNTH_COLOUR, opacity=0.7)))
    fig.update_layout(title="the path that folds the space onto a line")
    return _unit_axes(fig, labels, columns=columns)


def walk_figure(walk: np.ndarray | None, *, signed: np.ndarray | None = None, projected: np.ndarray | None = None,
                units: str = "") -> go.Figure:
    """The random-walk noise along the path (teaching only, may be None) and the weights per path point.

    One panel per quantity, each on its own single axis with zero marked (a shared plot with two
    y-axes put the two zero lines at different heights): the walk on top, then the signed weights
    (noisy, may be negative) against the projected weights (the released probability measure).
    """
    from plotly.subplots import make_subplots

    lengths = [len(a) for a in (walk, signed, projected) if a is not None]
    position = np.arange(max(lengths, default=0))
    panels = (["random-walk noise" + (f" ({units})" if units else "")] if walk is not None else []) + \
        (["weights along the path"] if signed is not None or projected is not None else [])
    fig = make_subplots(rows=max(len(panels), 1), cols=1, shared_xaxes=True, subplot_titles=panels,
                        vertical_spacing=0.12)
    row = 1
    if walk is not None:
        fig.add_trace(go.Scatter(x=position, y=np.asarray(walk, dtype=float), mode="lines", line=dict(color="#7f7f7f"),
                                 name=f"random-walk noise ({NOT_PRIVATE})"), row=1, col=1)
        fig.update_yaxes(title_text="noise", zeroline=True, zerolinecolor="#333", row=1, col=1)
        row = 2
    if signed is not None:
        fig.add_trace(go.Scatter(x=position, y=np.asarray(signed, float), mode="lines", name="signed weights",
                                 line=dict(color="#fdae6b")), row=row, col=1)
    if projected is not None:
        fig.add_trace(go.Scatter(x=position, y=np.asarray(projected, float), mode="lines", name="projected weights",
                                 line=dict(color=SYNTH_COLOUR)), row=row, col=1)
    if signed is not None or projected is not None:
        fig.update_yaxes(title_text="weight", zeroline=True, zerolinecolor="#333", row=row, col=1)
    fig.update_xaxes(title_text="position along the path (start to end)", row=max(len(panels), 1), col=1)
    fig.update_layout(title="noise and weights along the path", height=250 + 200 * max(len(panels), 1),
                      margin=dict(l=50, r=20, t=70, b=40), legend=dict(orientation="h", y=-0.15))
    return fig


# -- comparisons -------------------------------------------------------------------------------
def units_scatter(points: np.ndarray, settings: Sequence[dict], *, axes: tuple[int, int], labels: Sequence[str],
                  name: str, colour: str, title: str, max_points: int = MAX_POINTS) -> go.Figure:
    """One point cloud in the columns' own units (see :func:`~privsyn_core.reporting.plot_data.plot_coordinates`),
    for side-by-side panels."""
    fig = go.Figure(point_trace(points, name, colour, max_points=max_points, axes=axes))
    fig.update_layout(title=title, height=450, margin=dict(l=50, r=10, t=50, b=40), showlegend=False)
    fig.update_xaxes(title_text=labels[0], **settings[axes[0]])
    fig.update_yaxes(title_text=labels[1], **settings[axes[1]])
    return fig


def interval_figure(ranking: pd.DataFrame, *, metric: str, better: str, floor: tuple[float, float, float] | None = None,
                    not_private: pd.DataFrame | None = None) -> go.Figure:
    """One metric per run as a point with its interval, grouped by rank; runs whose intervals overlap are tied.

    Parameters
    ----------
    ranking : DataFrame
        :func:`privsyn_core.evaluation.scorecard.rank_runs` output (``run, value, low, high, rank, tied_with``), in
        its order: rank groups, and inside a group by name, never by value.
    metric : str
        The metric's name for the title and the y axis.
    better : {"lower", "higher"}
    floor : (value, low, high), optional
        The real-vs-real floor with its interval, drawn as a band.
    not_private : DataFrame, optional
        Runs without a privacy guarantee (``run, value, low, high``): drawn in grey at the right, never ranked.

    Returns
    -------
    Figure
        Each rank group on a shaded background labelled "rank k" (or "tied at rank k"); error bars are the
        intervals.  The x order is the groups' order, which the intervals justify, and names inside a group.
    """
    fig = go.Figure()
    x = [str(r) for r in ranking["run"]]
    fig.add_trace(go.Scatter(
        x=x, y=ranking["value"], mode="markers", name="private runs", marker=dict(size=10, color="#08519c"),
        error_y=dict(type="data", symmetric=False, array=ranking["high"] - ranking["value"],
                     arrayminus=ranking["value"] - ranking["low"], thickness=2, width=8),
        customdata=np.stack([ranking["rank"], ranking["low"], ranking["high"]], axis=1) if len(ranking) else None,
        hovertemplate="%{x}: %{y:.4g} [%{customdata[1]:.4g}, %{customdata[2]:.4g}], rank %{customdata[0]}"
                      "<extra></extra>"))
    for i, (rank, group) in enumerate(ranking.groupby("rank", sort=True)):
        members = [str(r) for r in group["run"]]
        label = f"tied at rank {rank}" if len(members) > 1 else f"rank {rank}"
        fig.add_vrect(x0=x.index(members[0]) - 0.45, x1=x.index(members[-1]) + 0.45, line_width=0,
                      fillcolor="#deebf7" if i % 2 == 0 else "#f0f0f0", layer="below",
                      annotation_text=label, annotation_position="top left")
    if not_private is not None and len(not_private):
        names = [f"{r} (NOT private)" for r in not_private["run"]]
        fig.add_trace(go.Scatter(
            x=names, y=not_private["value"], mode="markers", name="NOT private: not ranked",
            marker=dict(size=10, color="#969696", symbol="x"),
            error_y=dict(type="data", symmetric=False, array=not_private["high"] - not_private["value"],
                         arrayminus=not_private["value"] - not_private["low"], color="#969696")))
    if floor is not None:
        value, low, high = floor
        if np.isfinite(low) and np.isfinite(high):
            fig.add_hrect(y0=low, y1=high, fillcolor="#74c476", opacity=0.25, line_width=0, layer="below")
        fig.add_hline(y=value, line_dash="dot", line_color="#238b45",
                      annotation_text="real-vs-real floor", annotation_position="bottom right")
    fig.update_layout(title=f"{metric} ({better} is better): runs in one shaded group have overlapping intervals "
                            "and are not ordered",
                      yaxis_title=f"{metric} ({better} is better)", xaxis_title="run (by rank group, then name)",
                      margin=dict(l=50, r=10, t=60, b=60), showlegend=not_private is not None and len(not_private) > 0,
                      legend=dict(orientation="h", y=-0.3))
    fig.update_xaxes(categoryorder="array", categoryarray=x + ([f"{r} (NOT private)" for r in not_private["run"]]
                                                               if not_private is not None else []))
    return fig


# -- trade-off ---------------------------------------------------------------------------------
def tradeoff_figure(summary: pd.DataFrame, *, x: str = "epsilon", rates: pd.DataFrame | None = None,
                    floor: float | None = None) -> go.Figure:
    """Mean W1 with its spread over seeds against ``x`` on log-log axes, one line per mechanism.

    ``summary`` has columns ``mechanism, <x>, mean, std``; ``rates`` (optional) has
    ``mechanism, <x>, rate`` (the theoretical rate, constant fitted) drawn dashed.
    """
    fig = go.Figure()
    palette = ("#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b", "#e377c2", "#17becf")
    for i, (name, group) in enumerate(summary.groupby("mechanism", sort=False)):
        colour = palette[i % len(palette)]
        group = group.sort_values(x)
        fig.add_trace(go.Scatter(x=group[x], y=group["mean"], mode="lines+markers", name=f"{name} (mean W1)",
                                 line=dict(color=colour), error_y=dict(type="data", array=group["std"].to_numpy(),
                                                                       visible=True)))
        if rates is not None:
            rate = rates[rates["mechanism"] == name].sort_values(x)
            if len(rate):
                fig.add_trace(go.Scatter(x=rate[x], y=rate["rate"], mode="lines", name=f"{name} theoretical rate",
                                         line=dict(color=colour, dash="dash")))
    heights = [summary["mean"] - summary["std"], summary["mean"] + summary["std"]]
    if rates is not None:
        heights.append(rates["rate"])
    if floor is not None:
        fig.add_hline(y=floor, line=dict(color="#777", dash="dot"))
        # an annotation's position on a log axis is the log10 of the value (add_hline's own would sit at 10^floor)
        fig.add_annotation(x=0, xref="x domain", y=math.log10(floor), yref="y", text="real vs real floor",
                           showarrow=False, xanchor="left", yanchor="top", font=dict(color="#555", size=11))
        heights.append(pd.Series([floor]))
    x_ticks = np.unique(summary[x].to_numpy(dtype=float))
    if len(x_ticks) > MAX_LOG_TICKS:
        x_ticks = log_ticks(float(x_ticks.min()), float(x_ticks.max()))
    y_values = pd.concat(heights).to_numpy(dtype=float)
    y_values = y_values[np.isfinite(y_values) & (y_values > 0)]
    y_ticks = log_ticks(float(y_values.min()), float(y_values.max())) if len(y_values) else np.array([])
    fig.update_layout(title=f"W1 against {x} (log-log; {NOT_PRIVATE})",
                      xaxis=dict(type="log", title=x, tickvals=x_ticks, ticktext=[f"{v:g}" for v in x_ticks]),
                      yaxis=dict(type="log", title="W1 (unit cube, chebyshev)", tickvals=y_ticks,
                                 ticktext=[f"{v:g}" for v in y_ticks]),
                      margin=dict(l=40, r=10, t=50, b=40), legend=dict(orientation="h", y=-0.25))
    return fig


#: At most this many labelled ticks on a log axis (:func:`log_ticks`); the swept values label the x axis up to it.
MAX_LOG_TICKS = 7


def log_ticks(lo: float, hi: float) -> np.ndarray:
    """Round tick values for a log axis over ``[lo, hi]`` (``0 < lo <= hi``), one either side of the range.

    1, 2, 3 and 5 times the powers of ten, thinned to 1, 2, 5, then 1, 3, then the powers alone (then every other
    one) while there would be more than :data:`MAX_LOG_TICKS` (Plotly's own labels every digit on a short log axis).
    """
    first, last = math.floor(math.log10(lo)), math.ceil(math.log10(hi))
    powers = 10.0 ** np.arange(first, last + 1)
    for steps in ((1, 2, 3, 5), (1, 2, 5), (1, 3), (1,)):
        ticks = np.sort(np.concatenate([powers * step for step in steps]))
        inside = np.flatnonzero((ticks >= lo) & (ticks <= hi))
        start = max(int(inside[0]) - 1, 0) if len(inside) else int(np.searchsorted(ticks, lo)) - 1
        stop = min(int(inside[-1]) + 2, len(ticks)) if len(inside) else start + 2
        chosen = ticks[max(start, 0):stop]
        if len(chosen) <= MAX_LOG_TICKS:
            return chosen
    every = math.ceil((last - first) / (MAX_LOG_TICKS - 1))  # many decades: every other power, or fewer
    return 10.0 ** np.arange(first, last + every, every)


# -- teaching ----------------------------------------------------------------------------------
def attack_figure(without: np.ndarray, with_target: np.ndarray, threshold: float) -> go.Figure:
    """The attacker's game: how often each feature value came out of the table without and with the target
    record (:mod:`privsyn_core.evaluation.attack_game`), and the student's threshold."""
    values = np.arange(int(max(np.max(without), np.max(with_target))) + 2)
    fig = go.Figure()
    for name, runs, colour in (("table without the target", without, REAL_COLOUR),
                               ("table with the target", with_target, SYNTH_COLOUR)):
        shares = np.bincount(np.asarray(runs, dtype=np.int64), minlength=len(values))[:len(values)] / len(runs)
        fig.add_trace(go.Bar(x=values, y=shares, name=name, marker_color=colour, opacity=0.7))
    fig.add_vline(x=threshold - 0.5, line=dict(color="#333", dash="dash"),
                  annotation_text=f"guess 'with' from {threshold:g} rows on")
    fig.update_layout(barmode="overlay", title="What the attacker sees: synthetic rows in the target's corner, "
                                               "over many runs", xaxis_title="synthetic rows in the corner",
                      yaxis_title="share of runs", height=380, margin=dict(l=50, r=10, t=60, b=40),
                      legend=dict(orientation="h", y=-0.25))
    return fig


def laplace_count_figure(count: int, epsilon: float, sensitivity: float = 1.0, width: int | None = None) -> go.Figure:
    """The distribution of a count released with discrete Laplace noise of scale ``sensitivity/epsilon``,
    for a dataset and its neighbour (count + 1): their ratio never exceeds ``e^epsilon``."""
    sigma = sensitivity / epsilon
    width = width or int(max(5, np.ceil(6 * sigma)))
    z = np.arange(count - width, count + width + 2)
    p = np.exp(-1.0 / sigma)
    pmf = lambda centre: (1 - p) / (1 + p) * p ** np.abs(z - centre)
    fig = go.Figure([go.Bar(x=z, y=pmf(count), name=f"dataset D (count {count})", opacity=0.6,
                            marker_color=REAL_COLOUR),
                     go.Bar(x=z, y=pmf(count + sensitivity), name=f"neighbour D' (count {count + sensitivity:g})",
                            opacity=0.6, marker_color="#ff7f0e")])
    fig.update_layout(barmode="overlay", title=f"released count = count + discrete Laplace(scale {sigma:.3g})",
                      xaxis_title="released count", yaxis_title="probability", margin=dict(l=40, r=10, t=50, b=40),
                      legend=dict(orientation="h", y=-0.2))
    return fig


def noise_schedule_figure(sigmas: Sequence[float] | np.ndarray, labels: Sequence[str] | None = None) -> go.Figure:
    """Noise scale per level of a hierarchical mechanism (level 0 is the root), e.g. the ``sigmas`` of PMM's
    :func:`~privsyn_core.mechanisms.hvz23.pmm_tree.noise_plan`."""
    level = np.arange(len(sigmas))
    fig = go.Figure(go.Bar(x=list(labels) if labels else level, y=np.asarray(sigmas, dtype=float), name="noise scale"))
    fig.update_layout(title="noise scale per tree level", xaxis_title="level", yaxis_title="discrete Laplace scale",
                      margin=dict(l=40, r=10, t=50, b=40))
    return fig


# -- what a release alone shows ----------------------------------------------------------------
def released_tree_figure(release) -> go.Figure | None:
    """The tree of column pairs a ``marginal_tree`` release chose, drawn from the release alone.

    Reads only ``release.schema`` (column names and kinds, public) and the released parameters
    ``tree_edges`` (the privately selected pairs, a DP output: ``MechanismSpec.released_noisy``),
    ``root``, ``edge_depths`` and ``edge_cuts`` (functions of public inputs): edge ``k`` joins the
    columns ``tree_edges[k] = [a, b]`` and its PMM tree of depth ``edge_depths[k]`` ends on a
    ``2^{c_a} x 2^{c_b}`` grid, ``edge_cuts[k] = [c_a, c_b]``.  ``None`` for a release without a tree.
    """
    params = release.params
    edges = params.get("tree_edges")
    columns = (release.schema or {}).get("columns") or []
    if not edges or not columns:
        return None
    d = len(columns)
    root = int(params.get("root", 0))
    depths = list(params.get("edge_depths") or [None] * len(edges))
    cuts = list(params.get("edge_cuts") or [None] * len(edges))
    xy = tree_positions(edges, root, d)
    fig = go.Figure()
    line_x: list[float | None] = []
    line_y: list[float | None] = []
    label_x, label_y, label_text = [], [], []
    for (a, b), depth, cut in zip(edges, depths, cuts, strict=True):
        line_x += [xy[a, 0], xy[b, 0], None]
        line_y += [xy[a, 1], xy[b, 1], None]
        child = b if xy[b, 1] < xy[a, 1] else a  # the lower end: each column below the root has one edge above it
        label_x.append(xy[child, 0])
        label_y.append(xy[child, 1] - 0.12)  # below the marker
        grid = "" if cut is None else f"{2 ** int(cut[0])} x {2 ** int(cut[1])} cells"
        tree = "" if depth is None else f"PMM depth {int(depth)}"
        label_text.append(", ".join(t for t in (tree, grid) if t))
    fig.add_trace(go.Scatter(x=line_x, y=line_y, mode="lines", line={"color": "#9ecae1", "width": 3},
                             hoverinfo="skip", showlegend=False, name="edges"))
    # each edge's release is written under the column it leads down to, one part a line: sibling edges meet at
    # their parent, so labels at the edges' middles would overlap where the edges converge
    fig.add_trace(go.Scatter(x=label_x, y=label_y, mode="text", text=[t.replace(", ", "<br>") for t in label_text],
                             textposition="bottom center", textfont={"size": 10, "color": "#555"},
                             hovertext=label_text, hoverinfo="text", showlegend=False, name="edge releases"))
    names = [str(c.get("name", j)) for j, c in enumerate(columns)]
    kinds = [str(c.get("kind", "numeric")) for c in columns]
    fig.add_trace(go.Scatter(
        x=xy[:, 0], y=xy[:, 1], mode="markers+text", text=names, textposition="top center",
        marker={"size": 18, "color": [REAL_COLOUR if k == "numeric" else SYNTH_COLOUR for k in kinds],
                "line": {"width": 2, "color": "#ffffff"}},
        hovertext=[f"{n} ({k})" + (" - root" if j == root else "")
                   for j, (n, k) in enumerate(zip(names, kinds, strict=True))],
        hoverinfo="text", showlegend=False, name="columns"))
    fig.update_layout(
        title="Released tree of column pairs (chosen with differential privacy)",
        xaxis={"visible": False, "range": [xy[:, 0].min() - 0.7, xy[:, 0].max() + 0.7]},
        yaxis={"visible": False, "range": [xy[:, 1].min() - 0.6, 0.6]},
        height=max(260, 120 * (1 - int(xy[:, 1].min()))), margin={"l": 10, "r": 10, "t": 50, "b": 10},
        plot_bgcolor="white")
    return fig


def over_time_figure(table: pd.DataFrame) -> go.Figure:
    """W1 per step, one line per method (columns ``step, method, w1``); teaching only.

    With ``low`` and ``high`` (:func:`privsyn_core.evaluation.stream_eval.summary`: the mean over seeds and its
    interval) each line is drawn over a band of its colour from ``low`` to ``high``, the band's trace named
    ``"<method>: 95% interval"`` and left out of the legend (no band when every interval is undefined: one seed).
    The band leaves a gap at a step without an interval.  With ``seeds`` and ``runs`` a point's hover says over how
    many runs it is the mean.
    """
    fig = go.Figure()
    palette = ("#1f77b4", "#d62728", "#2ca02c", "#9467bd")
    bands = {"low", "high"} <= set(table.columns) and bool(table["low"].notna().any())
    counted = {"seeds", "runs"} <= set(table.columns)
    for i, (name, group) in enumerate(table.groupby("method", sort=False)):
        group = group.sort_values("step")
        colour = palette[i % len(palette)]
        steps = group["step"].to_numpy()
        if bands:
            x, y = _band_outline(steps, group["low"].to_numpy(float), group["high"].to_numpy(float))
            fig.add_trace(go.Scatter(x=x, y=y, fill="toself", fillcolor=_translucent(colour), line=dict(width=0),
                                     hoverinfo="skip", showlegend=False, legendgroup=str(name),
                                     name=f"{name}: 95% interval"))
        hover = {} if not counted else dict(
            customdata=group[["seeds", "runs"]].to_numpy(),
            hovertemplate="step %{x}: W1 %{y:.3f}, mean of %{customdata[0]} of %{customdata[1]} runs")
        fig.add_trace(go.Scatter(x=steps, y=group["w1"].to_numpy(), mode="lines+markers", name=str(name),
                                 legendgroup=str(name), line=dict(color=colour), **hover))
    what = "mean over seeds, 95% interval shaded" if bands else "one run"
    fig.update_layout(title=f"W1 to the table so far, step by step ({what}; {NOT_PRIVATE})",
                      xaxis=dict(title="step"), yaxis=dict(title="W1 (unit cube, chebyshev)"),
                      margin=dict(l=40, r=10, t=50, b=40), legend=dict(orientation="h", y=-0.25))
    return fig


def _band_outline(steps: np.ndarray, low: np.ndarray, high: np.ndarray) -> tuple[list, list]:
    """The outline of a band from ``low`` to ``high``: for every run of consecutive steps with both ends defined,
    ``high`` forward and ``low`` back; the pieces separated by ``None``, which ``fill="toself"`` closes one by one."""
    defined = ~(np.isnan(low) | np.isnan(high))
    x: list = []
    y: list = []
    edges = np.flatnonzero(np.diff(np.r_[False, defined, False].astype(np.int8)))
    for start, stop in zip(edges[::2], edges[1::2], strict=True):
        if x:
            x.append(None)
            y.append(None)
        x += steps[start:stop].tolist() + steps[start:stop][::-1].tolist()
        y += high[start:stop].tolist() + low[start:stop][::-1].tolist()
    return x, y


def _translucent(colour: str, alpha: float = 0.2) -> str:
    """``#rrggbb`` as ``rgba(r, g, b, alpha)``."""
    r, g, b = (int(colour[k:k + 2], 16) for k in (1, 3, 5))
    return f"rgba({r}, {g}, {b}, {alpha})"
