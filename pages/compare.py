"""Compare page: real vs synthetic scatter and marginals, and the metric table beside the real-vs-real floor."""

import numpy as np
import pandas as pd
import plotly.graph_objects as go
import streamlit as st

import privsyn_core as ps
from pages import _ui as ui
from pages._support import words
from pages._support.text import md
from privsyn_core.reporting import figures as F, report

ui.require_entrypoint()
st.title("Compare")

found = ui.need_result()
if found:
    result, key = found
    names = [c["name"] for c in result.schema["columns"]]
    schema = ps.Schema.from_dict(result.schema)
    teaching = not ui.release_mode()
    st.write(f"Last run: **{result.mechanism}** at epsilon {result.epsilon:g} ({result.neighbouring}), "
             f"{len(result.data):,} synthetic rows.")

    @st.fragment
    def views() -> None:
        axes = ui.axis_pair(names, "cmp")
        if teaching:
            ui.not_private("the real points")
        labels = [names[axes[0]], names[axes[1]]]
        panels = ([("real", ui.real_of(result), F.REAL_COLOUR)] if teaching else []) + \
            [("synthetic", ui.synthetic_table(result), F.SYNTH_COLOUR)]
        for column_slot, (what, frame, colour) in zip(st.columns(len(panels)), panels, strict=True):
            points, settings = F.plot_coordinates(frame, result.schema, names)
            fig = F.units_scatter(points, settings, axes=axes, labels=labels, name=what, colour=colour,
                                  title=f"{what}: {len(frame):,} rows")
            column_slot.plotly_chart(fig, key=f"compare_scatter_{what}")
        st.caption("Each panel in the columns' own units on their public ranges, side by side so neither hides the "
                   "other; categories are in their public order, spread a little (jitter) so that points show.")
        column = ui.keep(st.selectbox, "Marginal of", "w_cmp_marginal", names[0], options=names)
        col = schema[column]
        edges = None if col.kind == "categorical" else np.linspace(col.lo, col.hi, 31)
        real_col = ui.real_of(result)[column] if teaching else None
        st.plotly_chart(F.marginal_figure(real_col, result.data[column], edges=edges, name=column,
                                          categories=col.categories if col.kind == "categorical" else None),
                        key="compare_marginal")
        st.caption("Categories in their public order." if col.kind == "categorical"
                   else "Histograms share 30 equal bins of the public range.")

    views()

    st.subheader("Metrics")
    evaluation = None
    if not teaching:
        st.info("Release mode: metrics read the raw data, so they are not shown.")
    else:
        ui.not_private("every metric reads the real data")
        if len(names) > 1:
            ui.keep(st.selectbox, "Train-on-synthetic / test-on-real (TSTR) target", "w_cmp_target", "none",
                    options=["none"] + names, help="Trains classifiers or regressors: opt-in because it is slower.")
        with ui.user_errors():
            evaluation = ui.evaluate_result(result, key)
            table = report.metrics_table(evaluation)
            st.table(table.set_index("metric"))
            note = evaluation.get("_subsample", {}).get("note")
            st.caption(f"Computed on {note}. The floor is the same metric between two random halves of the real "
                       "data: the level a perfect synthesizer would show. Tables per column and pair are in the JSON "
                       "report.")

        st.subheader("Several mechanisms at the same epsilon")
        specs = [s for s in ps.list_mechanisms() if s.data_kind == "continuous"]
        chosen = ui.keep(st.multiselect, "Mechanisms", "w_cmp_many", [result.mechanism],
                         options=[s.name for s in specs])
        if st.button("Run and compare", help="Each mechanism runs at this epsilon and seed with its default parameters "
                                             "(the last run keeps its own); each new run is a release in the ledger."):
            rows, errors, runs = {}, [], {}
            progress = st.progress(0.0)
            for i, name in enumerate(chosen):
                progress.progress(i / max(len(chosen), 1), text=f"running {name}")
                try:
                    spec = ps.get_mechanism(name)
                    defaults = {k: p.default for k, p in spec.params.items()}
                    params = key["params"] if name == key["mechanism"] else defaults
                    relation = key["neighbouring"] if key["neighbouring"] in spec.neighbouring else spec.neighbouring[0]
                    other_key = {**key, "mechanism": name, "params": params, "neighbouring": relation}
                    other = ui.execute(other_key, label=", Compare")
                    rows[name] = report.metrics_table(ui.evaluate_result(other, other_key))
                    runs[name] = {"epsilon": other.epsilon, "neighbours differ by": words.relation(relation),
                                  "privacy guarantee": words.guarantee(spec.is_private, other.dp_valid),
                                  "synthetic rows": len(other.data)}
                except ps.PrivsynError as exc:
                    errors.append(f"{name}: {exc}")
            progress.progress(1.0, text="done")
            st.session_state.compare = {"rows": rows, "errors": errors, "epsilon": key["epsilon"], "runs": runs}
        compare = st.session_state.compare
        if compare:
            for message in compare["errors"]:
                st.error(md(message))
            if compare["rows"]:
                wide = pd.concat({n: t.set_index("metric")["value"] for n, t in compare["rows"].items()}, axis=1)
                floors = pd.concat([t.set_index("metric")["real-vs-real floor"] for t in compare["rows"].values()],
                                   axis=1).bfill(axis=1).iloc[:, 0]
                wide["real-vs-real floor"] = floors
                st.table(wide)
                st.markdown("**The runs**: a run whose guarantee is not 'holds' is **not a private release**, "
                            "however good its metrics look.")
                st.table(pd.DataFrame.from_dict(compare.get("runs", {}), orient="index"))
                first = wide.index[0]
                values = wide.drop(columns="real-vs-real floor").loc[first]
                private = [compare.get("runs", {}).get(n, {}).get("privacy guarantee") == "holds" for n in values.index]
                bar_labels = [n if ok else f"{n} (NOT private)" for n, ok in zip(values.index, private, strict=True)]
                fig = go.Figure(go.Bar(x=bar_labels,
                                       y=values.to_numpy(dtype=float), name=first,
                                       marker_color=["#08519c" if ok else "#bdbdbd" for ok in private]))
                fig.update_layout(title=f"{first} at epsilon {compare['epsilon']:g} (lower is better)",
                                  margin=dict(l=40, r=10, t=50, b=40))
                st.plotly_chart(fig, key="compare_many_chart")

    with ui.user_errors():
        ui.downloads(result, key, metrics=evaluation)
