"""Compare page: real vs synthetic in the columns' units, correlations, metrics with floors, several runs.

The logic lives in :mod:`pages._support.comparison` (metrics in words, runs, honest ranks, the report) and
:mod:`privsyn_core.reporting.figures`, :mod:`~privsyn_core.reporting.svg_charts` (the figures); this page draws them.
"""

import json

import streamlit as st

import privsyn_core as ps
from pages._support import code_panel, data_state, shared, state, widgets
from pages._support.downloads import csv_builder, downloads, manifest_builder, report_builder, synthetic_table
from pages._support.runs import evaluate_result, execute
from pages._support.text import md
from privsyn_core.manifest import manifest_path
from privsyn_core.registry import missing_mechanisms
from privsyn_core.reporting import comparison as cmp, figures as F, plot_data, report, svg_charts

state.require_entrypoint()
st.title("Compare")

found = widgets.need_result()
if found:
    result, key = found
    names = [c["name"] for c in result.schema["columns"]]
    schema = ps.Schema.from_dict(result.schema)
    teaching = not state.release_mode()
    st.write(f"Last run: **{result.mechanism}** at epsilon {result.epsilon:g} ({result.neighbouring}), "
             f"{len(result.data):,} synthetic rows.")

    @st.fragment
    def views() -> None:
        axes = widgets.axis_pair(names, "cmp")
        if teaching:
            widgets.not_private("the real points")
        labels = [names[axes[0]], names[axes[1]]]
        panels = ([("real", data_state.real_of(result), plot_data.REAL_COLOUR)] if teaching else []) + \
            [("synthetic", synthetic_table(result), plot_data.SYNTH_COLOUR)]
        zoomable = state.keep(st.toggle, "Zoomable scatter (interactive, slower to draw)", "w_cmp_zoom", False)
        for column_slot, (what, frame, colour) in zip(st.columns(len(panels)), panels, strict=True):
            points, settings = plot_data.plot_coordinates(frame, result.schema, names)
            title = f"{what}: {len(frame):,} rows"
            if zoomable:
                column_slot.plotly_chart(F.units_scatter(points, settings, axes=axes, labels=labels, name=what,
                                                         colour=colour, title=title), key=f"compare_scatter_{what}")
            else:  # static SVG: drawn at once, where Plotly panels run their JavaScript first
                column_slot.markdown(svg_charts.svg_scatter(points, settings, axes=axes, labels=labels,
                                                            colour=colour, title=title), unsafe_allow_html=True)
        st.caption("Each panel in the columns' own units on their public ranges, side by side so neither hides the "
                   "other; categories are in their public order, spread a little (jitter) so that points show.")
        column = state.keep(st.selectbox, "Marginal of", "w_cmp_marginal", names[0], options=names)
        one = {"columns": [c for c in result.schema["columns"] if c["name"] == column]}
        (panel,) = plot_data.marginal_panels(synthetic_table(result)[[column]], one,
                                             bins=plot_data.MARGINAL_DETAIL_BINS,
                                             real=data_state.real_of(result)[[column]] if teaching else None)
        st.markdown(svg_charts.svg_marginals([panel], width=720, height=260)[0], unsafe_allow_html=True)
        st.caption("Categories in their public order." if schema[column].kind == "categorical" else
                   f"Shares of rows in {plot_data.MARGINAL_DETAIL_BINS} bins of the public range (whole integers "
                   "for an integer column).")

    views()

    st.subheader("Every column at once")
    if teaching:
        widgets.not_private("the real distributions")
    panels = plot_data.marginal_panels(synthetic_table(result), result.schema,
                                       real=data_state.real_of(result) if teaching else None)
    figs, left_out = svg_charts.svg_small_multiples(panels)  # static SVG: no JavaScript to run per panel
    st.caption(plot_data.MARGINALS_CAPTION + (plot_data.COMPARE_HINT if teaching else "") + "." + left_out)
    st.markdown(svg_charts.svg_grid(figs), unsafe_allow_html=True)  # svg_bars escapes every text (st.html drops SVG)
    st.caption(plot_data.MARGINALS_NOTE + ("" if teaching else " Release mode: the release alone."))

    if len(names) > 1:
        st.subheader("Correlations")
        synthetic_corr = plot_data.correlation_matrix(report.schema_encode(result.data, result.schema))
        real_corr = plot_data.correlation_matrix(data_state.unit_real(result)) if teaching else None
        if teaching:
            widgets.not_private("the real correlations")
        st.markdown(svg_charts.svg_correlations(synthetic_corr, names, real=real_corr), unsafe_allow_html=True)
        st.caption("Red: the columns rise together; blue: one rises as the other falls; white: no linear relation. "
                   + ("The right panel is the difference: the paler, the better kept." if teaching else ""))

    st.subheader("Metrics")
    evaluation = None
    if not teaching:
        st.info("Release mode: metrics read the raw data, so they are not shown.")
    else:
        widgets.not_private("every metric reads the real data")
        if len(names) > 1:
            shared.set_tstr_target(state.keep(
                st.selectbox, "Train-on-synthetic / test-on-real (TSTR) target", "w_cmp_target", "none",
                options=["none"] + names, help="Trains classifiers or regressors: opt-in because it is slower."))
        with widgets.user_errors():
            evaluation = evaluate_result(result, key)
            st.table(cmp.shown(cmp.metric_table(evaluation)).set_index("metric"))
            note = evaluation.get("_subsample", {}).get("note")
            st.caption(f"Computed on {note}. Intervals are 95%. The floor is the same metric between two random "
                       "halves of the real data: the level a perfect synthesizer would show. Marginal errors average "
                       "16 public bin grids, so an output cut on one grid gains nothing. Tables per column and pair "
                       "(with each resolution) are in the JSON report.")

        st.subheader("Several mechanisms at the same epsilon")
        specs = [s for s in state.mechanisms() if s.data_kind == "continuous"]
        outside = [s for s in specs if s.implemented_by is not None]  # the peers, run by the field's libraries
        if outside:
            st.caption(f"The field's standard is listed too: {', '.join(s.name for s in outside)} "
                       f"({', '.join(dict.fromkeys(str(s.implemented_by) for s in outside))}).")
        elif missing := missing_mechanisms():
            st.caption(" ".join(md(note) for note in dict.fromkeys(missing.values())))
        chosen = state.keep(st.multiselect, "Mechanisms", "w_cmp_many", [result.mechanism],
                            options=[s.name for s in specs])
        if st.button("Run and compare", help="Each mechanism runs at this epsilon and seed with its default parameters "
                                             "(the last run keeps its own); each new run is a release in the ledger."):
            progress = st.progress(0.0)
            st.session_state.compare = cmp.run_many(
                chosen, key, execute=execute, evaluate=evaluate_result,
                progress=lambda share, text: progress.progress(share, text=text))
        compare = st.session_state.compare
        if compare:
            for message in compare["errors"]:
                st.error(md(message))
            runs = compare["runs"]
            if runs:
                st.markdown("**The runs.** A run marked NOT PRIVATE has no privacy guarantee, however good its "
                            "metrics look: never publish it.")
                st.table(cmp.runs_table(runs))
                st.markdown("**Metrics of every run**: value [95% interval].")
                st.table(cmp.wide_metrics(runs))
                rankable = [m for m in cmp.RANKABLE if all(m in r["evaluation"] for r in runs.values())] or ["w1"]
                metric = state.keep(st.selectbox, "Rank on", "w_cmp_rank", rankable[0], options=rankable,
                                    format_func=lambda m: f"{cmp.info(m).label} ({cmp.better(m)} is better)")
                with widgets.user_errors():
                    ranked, others, floor = cmp.ranking(runs, metric)
                    st.plotly_chart(F.interval_figure(ranked, metric=cmp.info(metric).label, better=cmp.better(metric),
                                                      floor=floor, not_private=others), key="compare_many_chart")
                    st.markdown("\n".join(f"- {md(line)}" for line in cmp.ranking_words(ranked)))
                    st.caption("Only private runs are ranked. Runs whose intervals overlap share a rank and are "
                               "listed by name: the data cannot tell them apart. "
                               + cmp.info(metric).meaning.capitalize() + ".")
                st.markdown("**Downloads of every run**")
                for name, run in runs.items():
                    cols = st.columns([2, 1, 1, 1])
                    mark = "" if cmp.is_private(run["result"]) else " (NOT private)"
                    cols[0].write(f"{md(name)}{mark}")
                    csv_name = f"synthetic_{name}.csv"
                    csv = csv_builder(run["result"].data)
                    cols[1].download_button("CSV", data=csv, file_name=csv_name,
                                            mime="text/csv", on_click="ignore", key=f"dl_cmp_csv_{name}")
                    cols[2].download_button("Manifest", data=manifest_builder(run["result"], csv, csv_name),
                                            file_name=manifest_path(csv_name).name, mime="application/json",
                                            on_click="ignore", key=f"dl_cmp_manifest_{name}")
                    run_json = json.dumps(report_builder(run["result"], run["key"])(metrics=run["evaluation"]),
                                          indent=1, default=str)
                    cols[3].download_button("JSON report", data=run_json, file_name=f"run_report_{name}.json",
                                            mime="application/json", on_click="ignore", key=f"dl_cmp_json_{name}")
                tables = {name: synthetic_table(run["result"]) for name, run in runs.items()}
                real = data_state.real_of(result)
                data_name = st.session_state.data["name"]
                st.download_button("Download the comparison report (HTML, every run)",
                                   file_name="privsyn_comparison.html", mime="text/html", on_click="ignore",
                                   key="dl_cmp_html",
                                   data=lambda: cmp.comparison_html(data_name=data_name, runs=runs, tables=tables,
                                                                    real=real, rank_metric=metric))

    target = (result, key, evaluation)
    runs = (st.session_state.compare or {}).get("runs") if teaching else None
    if runs:  # the full downloads follow the run chosen among the compared ones (the first ranked by default)
        st.subheader("Downloads")
        first = cmp.first_ranked(runs, st.session_state.get("w_cmp_rank", "w1")) or next(iter(runs))
        pick = state.keep(st.selectbox, "Downloads (CSV, reports, code) of the run", "w_cmp_pick", first,
                          options=list(runs), format_func=lambda n: n + ("" if cmp.is_private(runs[n]["result"])
                                                                         else " (NOT private)"))
        target = (runs[pick]["result"], runs[pick]["key"], runs[pick]["evaluation"])
    with widgets.user_errors():
        downloads(target[0], target[1], metrics=target[2])
        code_panel.show(target[1], st.session_state.data["name"], slot="compare")
