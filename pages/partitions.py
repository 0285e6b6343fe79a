"""Partitions page: the mechanism's cells, coloured by released counts (and, teaching only, true / noisy ones).

For marginal_tree it draws the released tree of column pairs (``figures.released_tree_figure``, from the
release alone, in both modes).

Release mode draws only what the release holds (``figures.released_partition``: the public
geometry and the released rows, atoms and weights), never ``SynthResult.diagnostics``.
"""

import numpy as np
import streamlit as st

from pages._support import data_state, state, widgets
from pages._support.text import md
from privsyn_core.reporting import figures as F, plot_data

READABLE_CELLS = 1024

state.require_entrypoint()
st.title("Partitions")
st.write("Partition mechanisms (PMM, PSMM, KD-trees, the DP histogram) count the data in regions of the unit "
         "cube, add noise to the counts and release the regions with their noisy, consistent counts.")

found = widgets.need_result()
if found:
    result, _ = found
    names = [c["name"] for c in result.schema["columns"]]
    release_mode = state.release_mode()
    if release_mode:
        released = plot_data.released_partition(result.release())
        cells = levels = None
        if released is not None:
            cells, levels = released["cells"], released["levels"]
        value_label = released["value"] if released else ""
    else:
        diagnostics = result.diagnostics
        cells, levels = diagnostics.get("cells"), diagnostics.get("levels")
    tree = F.released_tree_figure(result.release())
    if tree is not None:  # drawn from the release alone, so in release mode too
        st.subheader("The released tree of column pairs")
        st.plotly_chart(tree, key="released_tree_chart")
        st.caption("marginal_tree chose these pairs of columns with differential privacy (part of the release) and "
                   "released each pair's joint distribution with PMM on the grid written under the lower column of "
                   "the pair; rows are drawn from the root down, each column given its parent.")
    elif cells is None and not levels:
        st.info(f"{result.mechanism} releases no partition"
                + (" whose cells can be drawn from the release alone" if release_mode else "")
                + ". The mechanisms whose release this page or the TSP folding page draws: "
                + ", ".join(s.name for s in state.mechanisms() if s.released_geometry)
                + "; choose one on the Synthesize page.")
    else:
        @st.fragment
        def view() -> None:
            axes = widgets.axis_pair(names, "part")
            shown: dict = cells or {}
            if levels:
                # open at the deepest level a reader can still see (at most READABLE_CELLS boxes), not the leaves
                readable = max([j for j, lv in enumerate(levels) if len(lv["lo"]) <= READABLE_CELLS] or [0])
                level = state.keep(st.slider, "Tree level (0 = the whole cube; each level halves every cell)",
                                   f"w_part_level_{len(levels)}", readable, min_value=0, max_value=len(levels) - 1)
                shown = levels[level]
                st.caption(f"Level {level}: {len(shown['lo']):,} cells. Move the slider to watch the tree refine: "
                           "deeper cells are smaller, hold fewer records and carry relatively more noise.")
            if release_mode:
                key = "count"
                st.caption(f"Release mode: cells drawn from the release alone, coloured by {value_label}.")
                show_data = False
            else:
                keys = ["count", "noisy_count", "true_count"]
                labels = {"count": "released count", "noisy_count": "noisy count", "true_count": "true count"}
                colour = state.keep(st.radio, "Colour by", "w_part_colour", "count", options=keys, horizontal=True,
                                    format_func=labels.get)
                show_data = state.keep(st.toggle, "Show the data points", "w_part_data", True)
                if colour == "true_count" or show_data:
                    widgets.not_private("true counts and data points")
                key = colour if colour in shown else "count"
            points = data_state.unit_real(result) if show_data else None
            fig = F.partition_figure(shown, value_key=key, axes=axes, points=points,
                                     labels=[names[axes[0]], names[axes[1]]],
                                     columns=[result.schema["columns"][a] for a in axes])
            st.plotly_chart(fig, key="partition_chart")
            if len(names) > 2:
                st.caption(f"Cells projected onto ({md(names[axes[0]])}, {md(names[axes[1]])}); identical projected "
                           "boxes are merged with their counts summed.")
            if levels and not release_mode:
                widgets.not_private("the noise-per-level chart compares noisy and true counts")
                st.plotly_chart(F.level_noise_figure(levels), key="level_noise_chart")
            counts = np.asarray(shown.get("count", []), dtype=float)
            st.caption(f"{len(counts):,} cells; released total {counts.sum():,.6g}.")

        view()
