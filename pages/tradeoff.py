"""Trade-off page: W1 against epsilon (and n, by subsampling) with each mechanism's theoretical rate."""

import streamlit as st

import privsyn_core as ps
from pages._support import data_state, schema_state, state, widgets
from privsyn_core.reporting import figures as F, report

state.require_entrypoint()
st.title("Privacy-utility trade-off")
st.write("Sweep epsilon (and the number of records, by subsampling) for a few mechanisms and plot the mean W1 "
         "with its spread over seeds on log-log axes. Dashed lines are each mechanism's theoretical rate with its "
         "constant fitted to the measurements (the theorems leave the constants unspecified). The default sweep "
         "(2 mechanisms x 4 epsilons x 3 seeds) takes a few seconds; each W1 is exact on at most "
         f"{report.SWEEP_EVAL_ROWS} rows per side, so more seeds, epsilons or mechanisms cost proportionally more.")


if state.release_mode():
    st.info("Release mode: the sweep measures W1 against the raw data, so it is not available.")
elif st.session_state.data is None:
    st.info("No data: choose a sample or upload a CSV on the **Data** page.")
else:
    widgets.not_private("every point of the sweep measures W1 against the raw data")
    continuous = [s for s in ps.list_mechanisms() if s.data_kind == "continuous"]
    specs = [s.name for s in continuous]
    rated = [s for s in continuous if s.is_private and s.rate is not None]  # each curve gets its theoretical rate
    # the first mechanism of the registry's order against the textbook baseline listed last (both quick to sweep)
    default = [s.name for s in rated[:1] + [s for s in rated if s.paper == "baseline"][-1:]]
    mechanisms = state.keep(st.multiselect, "Mechanisms", "w_trade_mech", default, options=specs)
    epsilons = state.keep(st.multiselect, "Epsilons", "w_trade_eps", [0.1, 0.5, 2.0, 10.0], options=widgets.EPSILONS)
    n_total = len(data_state.table())
    fractions = state.keep(st.multiselect, "Sample sizes (fractions of n, by subsampling)", "w_trade_frac", [1.0],
                           options=[0.1, 0.25, 0.5, 1.0])
    seeds = state.keep(st.slider, "Seeds per point", "w_trade_seeds", 3, min_value=1, max_value=10)
    x = state.keep(st.radio, "x axis", "w_trade_x", "epsilon", options=["epsilon", "n"], horizontal=True)
    if st.button("Run the sweep", type="primary"):
        with widgets.user_errors():
            ns = sorted({max(2, int(f * n_total)) for f in fractions}) or [n_total]
            schema = schema_state.schema()
            neighbouring = "replace"
            key = repr((st.session_state.data["sha256"], data_state.columns(), schema.to_dict(), mechanisms,
                        sorted(epsilons), ns, seeds))
            previous = st.session_state.sweep
            if previous is None or previous["key"] != key:  # the last sweep is kept per session
                bar = st.progress(0.0, text="starting the sweep")

                def report_progress(share: float, text: str) -> None:
                    bar.progress(share, text=text)

                data = report.tradeoff_sweep(data_state.frame(), schema, mechanisms, sorted(epsilons), ns=ns,
                                             seeds=range(seeds), neighbouring=neighbouring,
                                             progress=report_progress)
                bar.empty()
                st.session_state.sweep = {"key": key, "data": data, "d": len(schema.columns)}
    saved = st.session_state.sweep
    if saved is not None:
        data = saved["data"]
        summary, rates = report.summarise_sweep(data, x, saved["d"])
        floor = float(data["floor"].median())
        fig = F.tradeoff_figure(summary, x=x, rates=rates, floor=floor)
        saved["figure"] = fig
        st.plotly_chart(fig, key="tradeoff_chart")
        st.caption(f"W1: chebyshev, unit cube, on at most {report.SWEEP_EVAL_ROWS} rows per side; the dotted line "
                   f"is W1 between two disjoint real halves ({floor:.3g}), below which no synthesizer can be told "
                   "apart from the data at this sample size. These sweep runs are evaluations, not releases.")
        with st.expander("Measurements"):
            st.dataframe(data, hide_index=True)
