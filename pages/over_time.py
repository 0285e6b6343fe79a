"""Over time page: a table released step by step as a stream (online PMM) against re-running PMM each step."""

import streamlit as st

from pages._support import data_state, schema_state, state, widgets
from privsyn_core.evaluation import stream_eval
from privsyn_core.reporting import figures as F

state.require_entrypoint()
st.title("Over time")
st.write("A table that grows batch by batch can be released at every step under one epsilon for the whole "
         "stream: online PMM (He, Vershynin, Zhu 2024) keeps a continual counter on every cell of PMM's tree. "
         "The naive alternative re-runs offline PMM on the table so far at every step and must split epsilon "
         "over a horizon fixed in advance. This page splits the table into batches and draws W1 per step for both.")

if state.release_mode():
    st.info("Release mode: this page measures W1 against the raw data, so it is not available. Release a stream "
            "with `python -m privsyn_core stream ...` or `privsyn_core.stream.open_stream`.")
elif st.session_state.data is None:
    st.info("No data: choose a sample or upload a CSV on the **Data** page.")
else:
    widgets.not_private("every point measures W1 against the raw data")
    chosen = data_state.columns()
    options = ["(row order)", *[c for c in data_state.table().columns if c not in chosen]]
    time_column = state.keep(st.selectbox, "Split by", "w_time_col", "(row order)", options=options,
                             help="a column of the table (not synthesized) whose values order the batches")
    steps = state.keep(st.slider, "Steps", "w_time_steps", 12, min_value=2, max_value=stream_eval.MAX_STEPS)
    epsilon = state.keep(st.select_slider, "Epsilon for the whole stream", "w_time_eps", 1.0, options=widgets.EPSILONS)
    if st.button("Release step by step", type="primary"):
        with widgets.user_errors():
            schema = schema_state.schema()
            table = data_state.table()
            column = None if time_column == "(row order)" else time_column
            frame = table[[*chosen, column]] if column else table[chosen]
            batches = stream_eval.split_batches(frame, steps, column)
            with st.spinner("releasing step by step"):
                st.session_state["over_time"] = stream_eval.over_time(batches, schema, float(epsilon))
    saved = st.session_state.get("over_time")
    if saved is not None:
        st.plotly_chart(F.over_time_figure(saved), key="over_time_chart")
        st.caption("W1: chebyshev, unit cube, on at most "
                   f"{stream_eval.EVAL_ROWS} rows per side. Both lines spend the same epsilon over the whole "
                   "horizon; the stream could go on releasing after it, the re-run could not. Teaching evaluation, "
                   "not a release (it spends nothing on the ledger).")
