"""Small static figures as inline SVG strings, written by hand: no JavaScript and no Plotly, so a self-contained
report (:mod:`privsyn_core.reporting.stakeholder`, :mod:`privsyn_core.reporting.comparison`) stays small, opens
offline and needs only a core install; the app's Compare page shows the same charts.

Every text that reaches the SVG is escaped (:func:`_svg_text`), so names from user data cannot inject markup.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from privsyn_core.reporting.plot_data import (
    MARGINAL_MAX_COLUMNS,
    MAX_CATEGORY_TICKS,
    NOT_PRIVATE,
    REAL_COLOUR,
    SYNTH_COLOUR,
    downsample,
)


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


def svg_marginals(panels: Sequence[dict], *, width: int = 420, height: int = 220) -> list[str]:
    """Every column's marginal at once, as inline SVG charts (one per column, from
    :func:`~privsyn_core.reporting.plot_data.marginal_panels`): the Compare page's small multiples and the report's,
    without JavaScript (cheap to draw, small to send).

    Each chart is titled by its column, its x axis in the column's units (``unit``) and its y axis in share of
    rows; a numeric column's bars are its public bins, a categorical column's its categories in public order, the
    series (synthetic first, then the real data in teaching mode) grouped side by side.
    """
    return [svg_bars(p["labels"], {k: p["shares"][k] for k in sorted(p["shares"], key=lambda k: k != "synthetic")},
                     title=p["name"], x_label=p["unit"], width=width, height=height) for p in panels]


def svg_small_multiples(panels: Sequence[dict]) -> tuple[list[str], str]:
    """The first :data:`~privsyn_core.reporting.plot_data.MARGINAL_MAX_COLUMNS` panels as SVG charts
    (:func:`svg_marginals`), and the sentence that says how many columns were left out (empty when none was):
    Compare's small multiples and the report's."""
    figs = svg_marginals(panels[:MARGINAL_MAX_COLUMNS])
    left_out = len(panels) - len(figs)
    return figs, f" The first {len(figs)} columns are drawn; {left_out} more are not." if left_out else ""


def svg_grid(svgs: Sequence[str]) -> str:
    """Inline SVG charts side by side, wrapping onto new rows (the Compare page's small multiples)."""
    return "<div style='display:flex;flex-wrap:wrap;gap:12px'>" + "".join(svgs) + "</div>"


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
    """Tick positions and texts of one scatter axis (the settings of
    :func:`~privsyn_core.reporting.plot_data.plot_coordinates`)."""
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

    The static twin of :func:`~privsyn_core.reporting.figures.units_scatter`: ``points`` and ``settings`` come from
    :func:`~privsyn_core.reporting.plot_data.plot_coordinates` (each axis's public range, and its categories as tick
    texts).  At most ``max_points`` rows are drawn, a
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


#: The widest a correlation figure is drawn (CSS pixels): the Compare page's main area at a 1280 px window with the
#: sidebar open holds it unshrunk, so its labels keep their size.
CORRELATION_WIDTH = 816
#: Characters of a column name on the correlation axes; a longer name is cut with an ellipsis (whole on hover).
LABEL_CHARS = 20
#: Approximate width of one character of the 10 px axis labels, in pixels.
CHAR_PX = 6


def _axis_label(name: str) -> str:
    return name if len(name) <= LABEL_CHARS else name[:LABEL_CHARS - 1] + "\u2026"


def svg_correlations(synthetic: np.ndarray, names: Sequence[str], *, real: np.ndarray | None = None,
                     annotate_max: int = 12, max_width: int = CORRELATION_WIDTH) -> str:
    """Correlation matrices side by side as one inline SVG: real (teaching only), synthetic, and their difference.

    Parameters
    ----------
    synthetic, real : ndarray (d, d)
        Matrices from :func:`~privsyn_core.reporting.plot_data.correlation_matrix`; ``real`` is ``None`` in release
        mode (only the release drawn).
    names : sequence of str
        Column names, in the order of the matrices (escaped; cut to :data:`LABEL_CHARS` characters on the axes,
        whole in each cell's hover text).
    annotate_max : int
        Cells carry their value as text up to this many columns (and while a cell is wide enough for it); every
        cell names its pair and value on hover.
    max_width : int
        The figure's width in pixels: the panels share what the labels and the legend leave, so that a page of
        this width shows the labels at their size instead of shrinking the whole figure.

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
    shown = [_axis_label(n) for n in labels]
    d = len(labels)
    label_px = CHAR_PX * max((len(n) for n in shown), default=1)
    left, upper, legend, gap = label_px + 10, 50, 56, 24
    cell = int(np.clip((max_width - left - legend) // len(panels) - gap, 0, 300) // max(d, 1))
    cell = int(np.clip(cell, 8, 44))
    side = cell * d
    slot = max(side + gap, 200 if len(panels) > 1 else side + gap)  # room for each panel's title
    width, height = left + len(panels) * slot + legend, upper + side + label_px + 12
    label_font = min(10, cell - 2)  # the axis labels, one a cell: never taller than the cell they name
    font, digits = max(7, min(11, int(cell * 0.34))), 1 if d > 5 else 2
    annotate = d <= annotate_max and cell >= 4 * font * 0.6 + 2  # room for "-0.5" in the cell
    parts = [_svg_open(width, max(height, upper + 12 * 11 + 10), "Correlations between columns")]
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
            if annotate and not np.isnan(v):
                ink = "white" if abs(v) > 0.6 else "black"
                parts.append(f'<text x="{x0 + (j + 0.5) * cell:.1f}" y="{upper + (i + 0.5) * cell + font / 3:.1f}" '
                             f'text-anchor="middle" font-size="{font}" fill="{ink}" pointer-events="none">'
                             f'{round(v, digits) + 0.0:.{digits}f}</text>')  # + 0.0: never "-0.0"
        for j, name in enumerate(shown):
            x, y = x0 + (j + 0.5) * cell + label_font / 3, upper + side + 6
            parts.append(f'<text x="{x:.1f}" y="{y}" transform="rotate(-90 {x:.1f} {y})" text-anchor="end" '
                         f'font-size="{label_font}"><title>{_svg_text(labels[j])}</title>{_svg_text(name)}</text>')
    for i, name in enumerate(shown):
        parts.append(f'<text x="{left - 4}" y="{upper + (i + 0.5) * cell + label_font / 3:.1f}" text-anchor="end" '
                     f'font-size="{label_font}"><title>{_svg_text(labels[i])}</title>{_svg_text(name)}</text>')
    scale = np.linspace(1, -1, 11)
    x_legend = width - legend + 10
    for k, fill in enumerate(rdbu(scale)):
        parts.append(f'<rect x="{x_legend}" y="{upper + k * 12}" width="14" height="12" fill="{fill}"/>')
    parts.append(f'<text x="{x_legend + 18}" y="{upper + 9}">+1</text>'
                 f'<text x="{x_legend + 18}" y="{upper + 5 * 12 + 9}">0</text>'
                 f'<text x="{x_legend + 18}" y="{upper + 10 * 12 + 9}">-1</text></svg>')
    return "".join(parts)


