"""TSP folding page: the path that folds the space onto a line, and the random walk on it."""

import numpy as np
import streamlit as st

from pages import _ui as ui
from privsyn_core import figures as F

ui.require_entrypoint()
st.title("TSP folding")
st.write("The superregular random walk mechanism (srw) privatises a measure on a line: it adds the increments of "
         "a random walk, whose partial sums stay small, to the masses of the points in order, then projects the "
         "signed measure back to a probability measure in W1. srw_tsp first folds the cube onto a line by a short "
         "path through a public net (a travelling-salesman tour), so W1 on the line bounds W1 in the cube.")

found = ui.need_result()
if found:
    result, _ = found
    diagnostics = result.diagnostics
    names = [c["name"] for c in result.schema["columns"]]
    if "path" not in diagnostics:
        st.info(f"{result.mechanism} does not fold the space onto a path. Choose srw_tsp (or srw in d = 1) on the "
                "Synthesize page to see the path, the walk and the projected weights.")
    else:
        @st.fragment
        def view() -> None:
            axes = ui.axis_pair(names, "tsp")
            show_data = (not ui.release_mode()) and ui.keep(st.toggle, "Show the data points", "w_tsp_data", True)
            if show_data:
                ui.not_private("the data layer")
            path = np.asarray(diagnostics["path"], dtype=float)
            if path.ndim == 1 or path.shape[1] == 1:
                st.caption("d = 1: the path is the interval itself.")
            else:
                st.plotly_chart(F.path_figure(path, net=diagnostics.get("net"), points=ui.unit_real() if show_data
                                              else None, weights=diagnostics.get("projected"), axes=axes,
                                              labels=[names[axes[0]], names[axes[1]]]), key="path_chart")
            walk = None if ui.release_mode() else diagnostics.get("walk")
            if walk is not None:
                ui.not_private("the noise draw: with the signed weights it gives the true masses")
            if walk is not None or "signed" in diagnostics or "projected" in diagnostics:
                st.plotly_chart(F.walk_figure(walk, signed=diagnostics.get("signed"),
                                              projected=diagnostics.get("projected"),
                                              units=str(diagnostics.get("walk_units", ""))), key="walk_chart")

        view()
