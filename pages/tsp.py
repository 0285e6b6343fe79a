"""TSP folding page: the path that folds the space onto a line, and the random walk on it.

Drawn for a mechanism whose ``released_geometry`` gives a path (``figures.released_path``).  Release mode draws
only what the release holds (the public path and the released atoms and weights), never
``SynthResult.diagnostics``.
"""

import numpy as np
import streamlit as st

from pages._support import data_state, state, widgets
from privsyn_core.reporting import figures as F, plot_data

state.require_entrypoint()
st.title("TSP folding")
st.write("The superregular random walk mechanism (srw) privatises a measure on a line: it adds the increments of "
         "a random walk, whose partial sums stay small, to the masses of the points in order, then projects the "
         "signed measure back to a probability measure in W1. srw_tsp first folds the cube onto a line by a short "
         "path through a public net (a travelling-salesman tour), so W1 on the line bounds W1 in the cube.")

found = widgets.need_result()
if found:
    result, _ = found
    names = [c["name"] for c in result.schema["columns"]]
    release_mode = state.release_mode()
    if plot_data.released_path(result.release()) is None:  # the mechanism's released_geometry draws no path
        st.info(f"{result.mechanism} does not fold the space onto a path. Choose srw_tsp (or srw in d = 1) on the "
                "Synthesize page to see the path, the walk and the projected weights.")
    else:
        @st.fragment
        def view() -> None:
            axes = widgets.axis_pair(names, "tsp")
            path: np.ndarray | None
            net: np.ndarray | None
            if release_mode:
                release = result.release()
                path, net, weights = plot_data.released_path(release), release.unit, release.weights
                walk = signed = None
                st.caption("Release mode: the public path and the released atoms with their weights only.")
                show_data = False
            else:
                diagnostics = result.diagnostics
                path, net = diagnostics.get("path"), diagnostics.get("net")
                weights, walk, signed = (diagnostics.get("projected"), diagnostics.get("walk"),
                                         diagnostics.get("signed"))
                show_data = state.keep(st.toggle, "Show the data points", "w_tsp_data", True)
                if show_data:
                    widgets.not_private("the data layer")
            if path is None or np.asarray(path).ndim == 1 or np.asarray(path).shape[1] == 1:
                st.caption("d = 1: the path is the interval itself.")
            else:
                st.plotly_chart(F.path_figure(np.asarray(path, dtype=float), net=net,
                                              points=data_state.unit_real(result) if show_data else None,
                                              weights=weights,
                                              axes=axes, labels=[names[axes[0]], names[axes[1]]],
                                              columns=[result.schema["columns"][a] for a in axes]),
                                key="path_chart")
            if walk is not None:
                widgets.not_private("the noise draw: with the signed weights it gives the true masses")
            if walk is not None or signed is not None or weights is not None:
                st.plotly_chart(F.walk_figure(walk, signed=signed, projected=weights,
                                              units="" if release_mode else
                                              str(result.diagnostics.get("walk_units", ""))), key="walk_chart")

        view()
