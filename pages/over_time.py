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
         "over a horizon fixed in advance. This page splits the table into batches and draws W1 per step for "
         "three ways to release, each run with several seeds.")

LINES = (f"**{stream_eval.FIXED_DEPTH}**: the tree's depth is fixed before the first batch to PMM's depth for the "
         "planned rows and steps (here the table's own, which a real stream would have to guess). Epsilon is split "
         "over the tree's levels, so a deeper tree draws finer detail but puts more noise on every level, and a "
         "wrong plan cannot be corrected once the stream has started.",
         f"**{stream_eval.GROWING_DEPTH}**: no plan; a level opens when the released total is large enough for it. "
         "Its price: budget is reserved from the start for levels that may never open.",
         f"**{stream_eval.NAIVE}**: offline PMM on the table so far, with epsilon / T at each of the T steps.")

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
    seeds = state.keep(st.slider, "Seeds", "w_time_seeds", stream_eval.SEEDS, min_value=2,
                       max_value=stream_eval.MAX_SEEDS,
                       help="runs of every method with different seeds: more seeds, narrower intervals, more time")
    epsilon = state.keep(st.select_slider, "Epsilon for the whole stream", "w_time_eps", 1.0, options=widgets.EPSILONS)
    if st.button("Release step by step", type="primary"):
        with widgets.user_errors():
            schema = schema_state.schema()
            table = data_state.table()
            column = None if time_column == "(row order)" else time_column
            frame = table[[*chosen, column]] if column else table[chosen]
            batches = stream_eval.split_batches(frame, steps, column)
            bar = st.progress(0.0, text="releasing step by step")
            runs = stream_eval.over_time(batches, schema, float(epsilon), seeds=int(seeds),
                                         progress=lambda share, text: bar.progress(share, text=text))
            bar.empty()
            st.session_state["over_time"] = stream_eval.summary(runs)
            st.session_state["over_time_clipped"] = {name: count for name, count in schema.encode(table[chosen])[1]
                                                     .items() if count}
    saved = st.session_state.get("over_time")
    if saved is not None:
        st.plotly_chart(F.over_time_figure(saved), key="over_time_chart")
        if clipped := st.session_state.get("over_time_clipped"):
            widgets.not_private("counts of raw rows outside the public bounds")
            st.warning("Rows outside the public bounds were clipped onto them for every method, as on Synthesize: "
                       + ", ".join(f"{name}: {count:,} rows" for name, count in clipped.items())
                       + ". Widen the bounds on the Data page if that is too many.")
        st.markdown("\n".join(f"- {line}" for line in LINES))
        short = int((saved["seeds"] < saved["runs"]).sum())
        st.caption(f"Each line is the mean W1 over {int(saved['runs'].max())} runs with different seeds; the shaded "
                   "band is the 95% Student-t interval of that mean (the mechanisms' noise and the evaluation's "
                   "subsamples). Where two bands overlap, these runs cannot tell the two methods apart on this "
                   "table. All three lines spend the same epsilon over the whole horizon; the streams could go on "
                   "releasing after it, the re-run could not."
                   + (f" At {short} of the {len(saved)} points some runs released no rows (a noisy total of 0), so "
                      "they have no W1 there: those points are means over fewer runs (the hover says how many), "
                      "with no band where one run is left." if short else ""))
        st.caption(f"W1: chebyshev, unit cube, between the same {stream_eval.EVAL_ROWS} real rows so far and as many "
                   "rows of each method at every step (uniform subsamples). W1 between samples of that size does not "
                   "reach 0 even for identical laws, so compare the lines with each other, not with 0. Teaching "
                   "evaluation, not a release (it spends nothing on the ledger).")
