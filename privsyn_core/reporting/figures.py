"""Plotly figure builders for the app and the HTML report (pure: no Streamlit).

Conventions (``docs/diagnostics.md``):

* all partition rectangles go into *one* trace per colour bin, separated by NaN, never
  into ``layout.shapes`` (which is quadratic to build and slow to pan);
* point clouds above :data:`WEBGL_THRESHOLD` points use ``Scattergl`` and are downsampled
  to at most ``max_points`` with the shown count stated in the legend;
* arrays are passed as float32 numpy arrays (Plotly >= 6 sends them as base64 typed arrays).

Every builder takes unit-cube coordinates (or decoded columns, for the comparisons) and
returns a :class:`plotly.graph_objects.Figure`.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
import pandas as pd
import plotly.graph_objects as go

WEBGL_THRESHOLD = 1000
MAX_POINTS = 5000
REAL_COLOUR = "#1f77b4"
SYNTH_COLOUR = "#d62728"
BIN_COLOURS = ("#f7fbff", "#c6dbef", "#9ecae1", "#6baed6", "#3182bd", "#08519c")
OUTLINE_COLOURS = ("#d9d9d9", "#9ecae1", "#6baed6", "#3182bd", "#08519c", "#08306b")
#: Above this many cells the rectangles are WebGL outlines coloured by bin instead of SVG fills.
FILL_LIMIT = 3000
NOT_PRIVATE = "uses the real data: not private"


# -- helpers -----------------------------------------------------------------------------------
def downsample(points: np.ndarray, max_points: int = MAX_POINTS, seed: int = 0) -> np.ndarray:
    """At most ``max_points`` rows, drawn without replacement with a fixed seed (display only)."""
    points = np.asarray(points)
    if len(points) <= max_points:
        return points
    keep = np.random.default_rng(seed).choice(len(points), max_points, replace=False)
    return points[np.sort(keep)]


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


#: Most category names an axis labels (a longer list labels every k-th).
MAX_CATEGORY_TICKS = 20


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
def scatter_compare(real: np.ndarray | None, synthetic: np.ndarray, *, axes: tuple[int, int] = (0, 1),
                    labels: Sequence[str] = ("x0", "x1"), ranges=((0.0, 1.0), (0.0, 1.0)),
                    max_points: int = MAX_POINTS, title: str = "") -> go.Figure:
    """Real (teaching only, may be None) and synthetic points on the same axes."""
    fig = go.Figure()
    if real is not None:
        fig.add_trace(point_trace(real, f"real ({NOT_PRIVATE})", REAL_COLOUR, max_points=max_points, axes=axes))
    fig.add_trace(point_trace(synthetic, "synthetic", SYNTH_COLOUR, max_points=max_points, axes=axes))
    fig.update_layout(title=title or "real vs synthetic")
    return _unit_axes(fig, labels, ranges)


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


def units_scatter(points: np.ndarray, settings: Sequence[dict], *, axes: tuple[int, int], labels: Sequence[str],
                  name: str, colour: str, title: str, max_points: int = MAX_POINTS) -> go.Figure:
    """One point cloud in the columns' own units (see :func:`plot_coordinates`), for side-by-side panels."""
    fig = go.Figure(point_trace(points, name, colour, max_points=max_points, axes=axes))
    fig.update_layout(title=title, height=450, margin=dict(l=50, r=10, t=50, b=40), showlegend=False)
    fig.update_xaxes(title_text=labels[0], **settings[axes[0]])
    fig.update_yaxes(title_text=labels[1], **settings[axes[1]])
    return fig


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


def svg_marginals(panels: Sequence[dict], *, width: int = 420, height: int = 220) -> list[str]:
    """Every column's marginal at once, as inline SVG charts (one per column, from :func:`marginal_panels`): the
    Compare page's small multiples and the report's, without JavaScript (cheap to draw, small to send).

    Each chart is titled by its column, its x axis in the column's units (``unit``) and its y axis in share of
    rows; a numeric column's bars are its public bins, a categorical column's its categories in public order, the
    series (synthetic first, then the real data in teaching mode) grouped side by side.
    """
    return [svg_bars(p["labels"], {k: p["shares"][k] for k in sorted(p["shares"], key=lambda k: k != "synthetic")},
                     title=p["name"], x_label=p["unit"], width=width, height=height) for p in panels]


def svg_small_multiples(panels: Sequence[dict]) -> tuple[list[str], str]:
    """The first :data:`MARGINAL_MAX_COLUMNS` panels as SVG charts (:func:`svg_marginals`), and the sentence that
    says how many columns were left out (empty when none was): Compare's small multiples and the report's."""
    figs = svg_marginals(panels[:MARGINAL_MAX_COLUMNS])
    left_out = len(panels) - len(figs)
    return figs, f" The first {len(figs)} columns are drawn; {left_out} more are not." if left_out else ""


def svg_grid(svgs: Sequence[str]) -> str:
    """Inline SVG charts side by side, wrapping onto new rows (the Compare page's small multiples)."""
    return "<div style='display:flex;flex-wrap:wrap;gap:12px'>" + "".join(svgs) + "</div>"


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
    if floor is not None:
        fig.add_hline(y=floor, line=dict(color="#777", dash="dot"),
                      annotation_text="real vs real floor", annotation_position="bottom left")
    fig.update_layout(title=f"W1 against {x} (log-log; {NOT_PRIVATE})", xaxis=dict(type="log", title=x),
                      yaxis=dict(type="log", title="W1 (unit cube, chebyshev)"), margin=dict(l=40, r=10, t=50, b=40),
                      legend=dict(orientation="h", y=-0.25))
    return fig


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


def noise_schedule_figure(sigmas: Sequence[float], labels: Sequence[str] | None = None) -> go.Figure:
    """Noise scale per level of a hierarchical mechanism (level 0 is the root)."""
    level = np.arange(len(sigmas))
    fig = go.Figure(go.Bar(x=list(labels) if labels else level, y=np.asarray(sigmas, dtype=float), name="noise scale"))
    fig.update_layout(title="noise scale per tree level", xaxis_title="level", yaxis_title="discrete Laplace scale",
                      margin=dict(l=40, r=10, t=50, b=40))
    return fig


def hierarchical_noise_schedule(epsilon: float, depth: int, d: int) -> list[float]:
    r"""Illustrative per-level scales ``sigma_j`` proportional to ``2^{(1-1/d)(depth-j)/2}`` (constant for
    d = 1), normalised so that ``sum_j 1/sigma_j = epsilon`` exactly as in PMM (He, Vershynin, Zhu, COLT 2023,
    Thm 4.3 with the level scales of (A.4)).

    The shape is the paper's asymptotic one; the mechanism itself uses its exact level sizes.
    """
    level = np.arange(depth + 1)
    shape = 2.0 ** (0.5 * (1 - 1 / d) * (depth - level))
    return list(shape * np.sum(1 / shape) / epsilon)


# -- what a release alone shows ----------------------------------------------------------------
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
    mid_x, mid_y, mid_text = [], [], []
    for (a, b), depth, cut in zip(edges, depths, cuts, strict=True):
        line_x += [xy[a, 0], xy[b, 0], None]
        line_y += [xy[a, 1], xy[b, 1], None]
        mid_x.append((xy[a, 0] + xy[b, 0]) / 2)
        mid_y.append((xy[a, 1] + xy[b, 1]) / 2)
        grid = "" if cut is None else f"{2 ** int(cut[0])} x {2 ** int(cut[1])} cells"
        tree = "" if depth is None else f"PMM depth {int(depth)}"
        mid_text.append(", ".join(t for t in (tree, grid) if t))
    fig.add_trace(go.Scatter(x=line_x, y=line_y, mode="lines", line={"color": "#9ecae1", "width": 3},
                             hoverinfo="skip", showlegend=False, name="edges"))
    fig.add_trace(go.Scatter(x=mid_x, y=mid_y, mode="text", text=mid_text, textposition="middle right",
                             textfont={"size": 11, "color": "#555"}, hoverinfo="text", showlegend=False,
                             name="edge releases"))
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
        xaxis={"visible": False, "range": [xy[:, 0].min() - 0.7, xy[:, 0].max() + 1.2]},
        yaxis={"visible": False, "range": [xy[:, 1].min() - 0.6, 0.6]},
        height=max(260, 120 * (1 - int(xy[:, 1].min()))), margin={"l": 10, "r": 10, "t": 50, "b": 10},
        plot_bgcolor="white")
    return fig

# -- small static figures for self-contained reports -------------------------------------------
def _svg_text(text: str) -> str:
    """``text`` for an SVG element: XML-escaped, and ``[``, ``]``, ``$`` as character references, so that no
    Markdown link, image or formula can form when the SVG is shown through ``st.markdown`` (same glyphs)."""
    from html import escape

    return escape(text).replace("[", "&#91;").replace("]", "&#93;").replace("$", "&#36;")


def _svg_open(width: int, height: int, title: str) -> str:
    """An SVG chart's opening tag and title: ``width`` x ``height`` pixels at most, shrunk with its aspect ratio
    kept to fit a narrower container (``viewBox``, ``max-width: 100%``)."""
    return (f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" viewBox="0 0 {width} {height}" '
            f'style="max-width:100%;height:auto" role="img" font-family="sans-serif" font-size="10">'
            f'<title>{_svg_text(title)}</title>')


def svg_bars(labels: Sequence[str], series: dict[str, Sequence[float]], *, title: str = "", x_label: str = "",
             y_label: str = "share of rows", colours: Sequence[str] = (SYNTH_COLOUR, REAL_COLOUR),
             width: int = 420, height: int = 220) -> str:
    """A grouped bar chart as an inline SVG string (no JavaScript: a report stays small and opens offline).

    ``series`` maps a legend name to one value per label (e.g. shares of rows per bin or category).
    Text is XML-escaped (:func:`_svg_text`), so labels and titles from user data cannot inject markup.
    """

    names = list(series)
    values = np.asarray([np.asarray(series[n], dtype=float) for n in names]).reshape(len(names), len(labels))
    top = float(np.nanmax(values)) if values.size and np.isfinite(values).any() else 1.0
    top = top if top > 0 else 1.0
    left, right, upper, lower = 44, 8, 30, 44
    plot_w, plot_h = width - left - right, height - upper - lower
    slot = plot_w / max(len(labels), 1)
    bar = slot * 0.8 / max(len(names), 1)
    parts = [_svg_open(width, height, title),
             f'<text x="{width / 2:.0f}" y="14" text-anchor="middle" font-size="12">{_svg_text(title)}</text>',
             f'<line x1="{left}" y1="{upper + plot_h}" x2="{left + plot_w}" y2="{upper + plot_h}" stroke="#555"/>',
             f'<text x="{left - 4}" y="{upper + 4}" text-anchor="end">{top:.3g}</text>',
             f'<text x="{left - 4}" y="{upper + plot_h}" text-anchor="end">0</text>',
             f'<text x="10" y="{upper + plot_h / 2:.0f}" transform="rotate(-90 10 {upper + plot_h / 2:.0f})" '
             f'text-anchor="middle">{_svg_text(y_label)}</text>']
    for s, name in enumerate(names):
        colour = colours[s % len(colours)]
        for i, v in enumerate(values[s]):
            if not np.isfinite(v) or v <= 0:
                continue
            h = plot_h * v / top
            x = left + i * slot + slot * 0.1 + s * bar
            tip = f"{_svg_text(name)}, {_svg_text(str(labels[i]))}: {v:.3g}"
            parts.append(f'<rect x="{x:.1f}" y="{upper + plot_h - h:.1f}" width="{bar:.1f}" height="{h:.1f}" '
                         f'fill="{colour}"><title>{tip}</title></rect>')
        parts.append(f'<rect x="{left + 4 + 110 * s}" y="{height - 12}" width="8" height="8" fill="{colour}"/>'
                     f'<text x="{left + 15 + 110 * s}" y="{height - 4}">{_svg_text(name)}</text>')
    step = max(1, int(np.ceil(len(labels) / 8)))
    for i in range(0, len(labels), step):
        parts.append(f'<text x="{left + (i + 0.5) * slot:.1f}" y="{upper + plot_h + 12}" text-anchor="middle">'
                     f'{_svg_text(str(labels[i])[:12])}</text>')
    parts.append(f'<text x="{left + plot_w / 2:.0f}" y="{upper + plot_h + 26}" text-anchor="middle">'
                 f'{_svg_text(x_label)}</text></svg>')
    return "".join(parts)


#: Most points an SVG scatter draws (a random subset beyond; the title says so): ~15 bytes each.
SVG_MAX_POINTS = 3000
#: Points per ``<path>`` of an SVG scatter: overlapping paths darken where points crowd, one path does not.
SVG_POINTS_PER_PATH = 250
#: ColorBrewer's RdBu, from red (+1) to blue (-1), as RGB rows: the correlation scale of :func:`svg_correlations`.
RDBU = np.array([[103, 0, 31], [178, 24, 43], [214, 96, 77], [244, 165, 130], [253, 219, 199], [247, 247, 247],
                 [209, 229, 240], [146, 197, 222], [67, 147, 195], [33, 102, 172], [5, 48, 97]], dtype=float)


def nice_ticks(lo: float, hi: float, count: int = 5) -> np.ndarray:
    r"""Round tick values in ``[lo, hi]``, multiples of a step :math:`\{1, 2, 5\} \times 10^k`: of the steps near
    ``(hi - lo) / (count - 1)``, the one whose number of ticks is closest to ``count`` (the larger step on a tie)."""
    if not hi > lo:
        return np.array([lo])
    power = 10.0 ** np.floor(np.log10((hi - lo) / max(count - 1, 1)))
    steps = [m * power for m in (0.5, 1.0, 2.0, 5.0, 10.0)]

    def ticks(step: float) -> np.ndarray:
        return np.arange(np.ceil(lo / step), np.floor(hi / step) + 1) * step

    return ticks(min(steps, key=lambda step: (abs(len(ticks(step)) - count), -step))) + 0.0  # never -0


def _svg_axis_ticks(setting: dict) -> tuple[np.ndarray, list[str]]:
    """Tick positions and texts of one scatter axis (:func:`plot_coordinates`'s settings)."""
    if "tickvals" in setting:
        step = max(1, -(-len(setting["tickvals"]) // MAX_CATEGORY_TICKS))
        return (np.asarray(setting["tickvals"][::step], dtype=float),
                [str(t)[:10] for t in setting["ticktext"][::step]])
    values = nice_ticks(*setting["range"])
    return values, [f"{v:.4g}" for v in values]


def svg_scatter(points: np.ndarray, settings: Sequence[dict], *, axes: tuple[int, int], labels: Sequence[str],
                colour: str, title: str, max_points: int = SVG_MAX_POINTS, width: int = 440,
                height: int = 400) -> str:
    """One point cloud in the columns' own units as an inline SVG string (no JavaScript: drawn at once).

    The static twin of :func:`units_scatter`: ``points`` and ``settings`` come from :func:`plot_coordinates`
    (each axis's public range, and its categories as tick texts).  At most ``max_points`` rows are drawn, a
    random subset with a fixed seed (display only; the title says how many); points outside a range sit on its
    edge.  Each point is a round dot, a zero-length segment of a ``<path>``; :data:`SVG_POINTS_PER_PATH` per
    path, half transparent, so that crowded places look darker.  Text is escaped (:func:`_svg_text`).
    """
    points = np.asarray(points, dtype=float)
    shown = downsample(points, max_points)
    if len(shown) < len(points):
        title = f"{title} ({len(shown):,} drawn at random)"
    left, right, upper, lower = 58, 12, 28, 44
    plot_w, plot_h = width - left - right, height - upper - lower
    (x_lo, x_hi), (y_lo, y_hi) = (tuple(map(float, settings[a]["range"])) for a in axes)
    x_hi, y_hi = max(x_hi, x_lo + 1e-12), max(y_hi, y_lo + 1e-12)

    def to_x(v: np.ndarray) -> np.ndarray:
        return left + (np.clip(v, x_lo, x_hi) - x_lo) / (x_hi - x_lo) * plot_w

    def to_y(v: np.ndarray) -> np.ndarray:
        return upper + plot_h - (np.clip(v, y_lo, y_hi) - y_lo) / (y_hi - y_lo) * plot_h

    parts = [_svg_open(width, height, title),
             f'<text x="{width / 2:.0f}" y="16" text-anchor="middle" font-size="12">{_svg_text(title)}</text>',
             f'<rect x="{left}" y="{upper}" width="{plot_w}" height="{plot_h}" fill="none" stroke="#999"/>']
    if len(shown):
        xy = np.round(np.column_stack([to_x(shown[:, axes[0]]), to_y(shown[:, axes[1]])]), 1)
        for start in range(0, len(xy), SVG_POINTS_PER_PATH):
            d = "".join(f"M{x:g} {y:g}h0" for x, y in xy[start:start + SVG_POINTS_PER_PATH].tolist())
            parts.append(f'<path d="{d}" stroke="{colour}" stroke-opacity="0.5" stroke-width="3.5" '
                         f'stroke-linecap="round"/>')
    x_ticks, x_text = _svg_axis_ticks(settings[axes[0]])
    for position, text in zip(to_x(x_ticks).tolist(), x_text, strict=True):
        parts.append(f'<text x="{position:.1f}" y="{upper + plot_h + 13}" text-anchor="middle">'
                     f'{_svg_text(text)}</text>')
    y_ticks, y_text = _svg_axis_ticks(settings[axes[1]])
    for position, text in zip(to_y(y_ticks).tolist(), y_text, strict=True):
        parts.append(f'<text x="{left - 4}" y="{position + 3:.1f}" text-anchor="end">{_svg_text(text)}</text>')
    middle = upper + plot_h / 2
    parts.append(f'<text x="{left + plot_w / 2:.0f}" y="{height - 8}" text-anchor="middle" font-size="11">'
                 f'{_svg_text(labels[0])}</text>'
                 f'<text x="11" y="{middle:.0f}" transform="rotate(-90 11 {middle:.0f})" text-anchor="middle" '
                 f'font-size="11">{_svg_text(labels[1])}</text></svg>')
    return "".join(parts)


def rdbu(values: np.ndarray) -> list[str]:
    """Hex colours of values on the correlation scale: -1 blue, 0 white, +1 red (saturating beyond; NaN grey)."""
    values = np.asarray(values, dtype=float)
    position = (1 - np.clip(np.nan_to_num(values), -1, 1)) / 2 * (len(RDBU) - 1)
    below = np.minimum(np.floor(position).astype(int), len(RDBU) - 2)
    weight = (position - below)[:, None]
    rgb = np.rint(RDBU[below] * (1 - weight) + RDBU[below + 1] * weight).astype(int)
    return ["#cccccc" if np.isnan(v) else f"#{r:02x}{g:02x}{b:02x}" for v, (r, g, b) in zip(values, rgb.tolist(),
                                                                                            strict=True)]


def svg_correlations(synthetic: np.ndarray, names: Sequence[str], *, real: np.ndarray | None = None,
                     annotate_max: int = 12) -> str:
    """Correlation matrices side by side as one inline SVG: real (teaching only), synthetic, and their difference.

    Parameters
    ----------
    synthetic, real : ndarray (d, d)
        Matrices from :func:`correlation_matrix`; ``real`` is ``None`` in release mode (only the release drawn).
    names : sequence of str
        Column names, in the order of the matrices (escaped; cut to 14 characters on the axes).
    annotate_max : int
        Cells carry their value as text up to this many columns; every cell names its pair and value on hover.

    Returns
    -------
    str
        One SVG: a panel per matrix on one colour scale, -1 (blue) to 1 (red) (differences beyond +-1 saturate,
        a column without spread is grey), with a legend of the scale.
    """
    panels = [("synthetic", np.asarray(synthetic, dtype=float))]
    if real is not None:
        real = np.asarray(real, dtype=float)
        panels = [(f"real ({NOT_PRIVATE})", real), panels[0], ("synthetic minus real", panels[0][1] - real)]
    labels = [str(n) for n in names]
    d = len(labels)
    cell = int(np.clip(300 // max(d, 1), 12, 44))
    left, upper, legend = 100, 50, 70
    side = cell * d
    slot = max(side + 24, 200)  # room for the panel's title
    width, height = left + len(panels) * slot + legend, upper + side + 96
    font, digits = max(7, min(11, int(cell * 0.34))), 1 if d > 5 else 2
    parts = [_svg_open(width, height, "Correlations between columns")]
    pairs = [divmod(k, d) for k in range(d * d)]  # (row, column) of each cell, row by row
    for p, (title, matrix) in enumerate(panels):
        x0 = left + p * slot
        head, _, tail = title.partition(" (")  # "real (uses the real data: not private)" on two lines
        parts.append(f'<text x="{x0 + side / 2:.0f}" y="{upper - 22}" text-anchor="middle" font-size="11">'
                     f'{_svg_text(head)}</text>')
        if tail:
            parts.append(f'<text x="{x0 + side / 2:.0f}" y="{upper - 8}" text-anchor="middle" font-size="9">'
                         f'({_svg_text(tail)}</text>')
        values = matrix.reshape(-1)
        for (i, j), v, fill in zip(pairs, values.tolist(), rdbu(values), strict=True):
            tip = f"{_svg_text(title)}: {_svg_text(labels[i])} / {_svg_text(labels[j])}: " + \
                ("no spread" if np.isnan(v) else f"{v:.3f}")
            parts.append(f'<rect x="{x0 + j * cell}" y="{upper + i * cell}" width="{cell}" height="{cell}" '
                         f'fill="{fill}"><title>{tip}</title></rect>')
            if d <= annotate_max and not np.isnan(v):
                ink = "white" if abs(v) > 0.6 else "black"
                parts.append(f'<text x="{x0 + (j + 0.5) * cell:.1f}" y="{upper + (i + 0.5) * cell + font / 3:.1f}" '
                             f'text-anchor="middle" font-size="{font}" fill="{ink}" pointer-events="none">'
                             f'{round(v, digits) + 0.0:.{digits}f}</text>')  # + 0.0: never "-0.0"
        for j, name in enumerate(labels):
            x, y = x0 + (j + 0.5) * cell, upper + side + 6
            parts.append(f'<text x="{x:.1f}" y="{y}" transform="rotate(-45 {x:.1f} {y})" text-anchor="end">'
                         f'{_svg_text(name[:14])}</text>')
    for i, name in enumerate(labels):
        parts.append(f'<text x="{left - 4}" y="{upper + (i + 0.5) * cell + 3:.1f}" text-anchor="end">'
                     f'{_svg_text(name[:14])}</text>')
    scale = np.linspace(1, -1, 11)
    x_legend = width - legend + 10
    for k, fill in enumerate(rdbu(scale)):
        parts.append(f'<rect x="{x_legend}" y="{upper + k * 12}" width="14" height="12" fill="{fill}"/>')
    parts.append(f'<text x="{x_legend + 18}" y="{upper + 9}">+1</text>'
                 f'<text x="{x_legend + 18}" y="{upper + 5 * 12 + 9}">0</text>'
                 f'<text x="{x_legend + 18}" y="{upper + 10 * 12 + 9}">-1</text></svg>')
    return "".join(parts)


def over_time_figure(table: pd.DataFrame) -> go.Figure:
    """W1 per step, one line per method (columns ``step, method, w1``), log y axis; teaching only."""
    fig = go.Figure()
    palette = ("#1f77b4", "#d62728", "#2ca02c", "#9467bd")
    for i, (name, group) in enumerate(table.groupby("method", sort=False)):
        group = group.sort_values("step")
        fig.add_trace(go.Scatter(x=group["step"].to_numpy(), y=group["w1"].to_numpy(), mode="lines+markers",
                                 name=str(name), line=dict(color=palette[i % len(palette)])))
    fig.update_layout(title=f"W1 to the table so far, step by step ({NOT_PRIVATE})", xaxis=dict(title="step"),
                      yaxis=dict(type="log", title="W1 (unit cube, chebyshev)"), margin=dict(l=40, r=10, t=50, b=40),
                      legend=dict(orientation="h", y=-0.25))
    return fig
