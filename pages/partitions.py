"""Partitions page: the mechanism's cells over the data, coloured by true / noisy / released counts."""

import numpy as np
import streamlit as st

from pages import _ui as ui
from privsyn_core import figures as F

ui.require_entrypoint()
st.title("Partitions")
st.write("Partition mechanisms (PMM, PSMM, KD-trees, the DP histogram) count the data in regions of the unit "
         "cube, add noise to the counts and release the regions with their noisy, consistent counts.")

found = ui.need_result()
if found:
    result, _ = found
    diagnostics = result.diagnostics
    names = [c["name"] for c in result.schema["columns"]]
    if "cells" not in diagnostics and "levels" not in diagnostics:
        st.info(f"{result.mechanism} releases no partition. Choose pmm, psmm, kd_grid, kd_adaptive or "
                "dp_histogram on the Synthesize page to see one.")
    else:
        @st.fragment
        def view() -> None:
            axes = ui.axis_pair(names, "part")
            keys = ["count", "noisy_count"] + ([] if ui.release_mode() else ["true_count"])
            labels = {"count": "released count", "noisy_count": "noisy count", "true_count": "true count"}
            colour = ui.keep(st.radio, "Colour by", "w_part_colour", "count", options=keys, horizontal=True,
                             format_func=labels.get)
            levels = diagnostics.get("levels")
            cells = diagnostics.get("cells")
            if levels:
                level = ui.keep(st.slider, "Tree level (0 = root)", f"w_part_level_{len(levels)}", len(levels) - 1,
                                min_value=0, max_value=len(levels) - 1)
                cells = levels[level]
            show_data = (not ui.release_mode()) and ui.keep(st.toggle, "Show the data points", "w_part_data", True)
            if colour == "true_count" or show_data:
                ui.not_private("true counts and data points")
            points = ui.unit_real() if show_data else None
            key = colour if colour in cells else "count"
            fig = F.partition_figure(cells, value_key=key, axes=axes, points=points,
                                     labels=[names[axes[0]], names[axes[1]]])
            st.plotly_chart(fig, key="partition_chart")
            if len(names) > 2:
                st.caption(f"Cells projected onto ({names[axes[0]]}, {names[axes[1]]}); identical projected "
                           "boxes are merged with their counts summed.")
            if levels and not ui.release_mode():
                ui.not_private("the noise-per-level chart compares noisy and true counts")
                st.plotly_chart(F.level_noise_figure(levels), key="level_noise_chart")
            counts = np.asarray(cells.get("count", []), dtype=float)
            st.caption(f"{len(counts):,} cells; released total {counts.sum():,.6g}.")

        view()
