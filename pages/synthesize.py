"""Synthesize page: choose a mechanism, epsilon, neighbouring relation, seed and size; run; download."""

import time

import pyarrow as pa
import streamlit as st

import privsyn_core as ps
from pages._support import code_panel, data_state, guide_panel, offer, output, shared, state, widgets
from pages._support.downloads import downloads, synthetic_table
from pages._support.runs import execute, run_key
from pages._support.text import md, relation_statement
from privsyn_core.errors import BudgetExceeded, LedgerError
from privsyn_core.reporting import words

#: The neighbouring relations, in the order the page offers them.
RELATIONS = ("add_remove", "replace")
#: The epsilon of a new session.
EPSILON_DEFAULT = 1.0

state.require_entrypoint()
st.title("Synthesize")
schema = offer.current_schema()
offered, unmet = offer.split(state.mechanisms(), schema)
specs = {s.name: s for s in offered}
# until the user chooses, the guide's pick for the settings drawn further down (read before they are drawn)
epsilon_now = state.current("w_epsilon", EPSILON_DEFAULT, list(widgets.EPSILONS))
relation_now = data_state.current_per_table("w_neighbouring", data_state.SAFE_RELATION, list(RELATIONS))
rows_now = guide_panel.rows(guide_panel.public_rows(schema, relation_now))
default = guide_panel.default_choice(schema, tuple(specs), epsilon_now, rows_now)
name = state.keep_choice(st.selectbox, "Mechanism", "w_mechanism", default, options=list(specs),
                         format_func=lambda n: f"{specs[n].title} [{n}]")
guide_slot = st.container()  # the guide panel, filled once epsilon, relation and rows are drawn below
offer.note(unmet, state.mechanisms())
spec = specs[name]
st.markdown(f"**Source:** {md(spec.citation)} &nbsp; **Data:** {spec.data_kind}")
with st.expander("The exact guarantee and terms"):
    st.markdown(f"**Paper reference:** {md(spec.paper)}  \n**Neighbouring relations:** "
                f"{', '.join(spec.neighbouring)}  \n**Guarantee:** {md(spec.guarantee)}")
st.caption(spec.description)
if not spec.is_private:
    st.error(f"{spec.title} is NOT differentially private: never release its output (dp_valid = False).")
if spec.floating_point_exposure:
    st.warning(f"Floating-point exposure. {words.floating_point(spec)} The mechanisms without this warning use exact "
               "integer noise only. See docs/security.md.")

left, right = st.columns(2)
with left:
    epsilon = state.keep(st.select_slider, "epsilon (privacy budget, log scale)", "w_epsilon", EPSILON_DEFAULT,
                         options=widgets.EPSILONS)
    st.markdown(widgets.epsilon_guidance(epsilon))
    # One choice per table for every mechanism, made by the user: choosing another mechanism (or the guide's
    # "Use" button) never changes it; another table starts at adding or removing one record (n private).
    neighbouring = data_state.keep_per_table(st.radio, "Neighbouring datasets differ by", "w_neighbouring",
                                             data_state.SAFE_RELATION, options=RELATIONS, horizontal=True,
                                             format_func=lambda r: {"replace": "replacing one record (n public)",
                                                                    "add_remove": "adding or removing one record "
                                                                                  "(n private)"}[r])
    relation_fits = neighbouring in spec.neighbouring
    if not relation_fits:
        st.warning(f"{spec.title} is calibrated only for neighbours that differ by "
                   f"{' or '.join(words.relation(r) for r in spec.neighbouring)}: choose that relation above to run "
                   "it (the app never changes it for you).")
with right:
    if state.release_mode():
        seed = None
        st.caption("Release mode: noise from a cryptographically secure generator (no seed).")
    else:
        seed = int(state.keep(st.number_input, "Seed (same seed, same output)", "w_seed", 0, min_value=0, step=1))
        shared.set_seed(seed)  # the Data page's teaching DP bounds reuse it
        st.caption("Re-running with a new seed spends epsilon again.")
    row_cap = widgets.max_synthetic_rows()
    n_syn = int(state.capped(st.number_input, "Synthetic rows (0 = the mechanism's default)", "w_n_synthetic", 0,
                             min_value=0, max_value=row_cap, step=100))
    st.caption(widgets.row_cap_caption(row_cap))
    with st.expander("Mechanism parameters", expanded=bool(spec.params)):
        params = widgets.param_widgets(spec)
        if not spec.params:
            st.caption("This mechanism has no parameters.")

with guide_slot:
    guide_panel.show(schema, epsilon, neighbouring, guide_panel.public_rows(schema, neighbouring), list(specs),
                     "w_mechanism")
key = None
if relation_fits:
    with widgets.user_errors():
        key = run_key(name, epsilon, params, neighbouring, seed, n_syn or None)
small = key is not None and len(data_state.table()) <= widgets.LIVE_MAX_ROWS
live = (not state.release_mode()) and state.keep(
    st.toggle, "Re-run automatically when a setting changes", "w_live", small,
    help="Teaching mode, n <= 10^4: after a run, changing a setting of the same mechanism runs it again (a new "
         "ledger entry unless that exact run was made before). Choosing another mechanism never runs it.")
run_column, relation_column = st.columns([1, 5], vertical_alignment="center")
clicked = run_column.button("Run", type="primary", disabled=key is None)
relation_column.caption(relation_statement(neighbouring))
# Browsing never spends: only a changed setting of the mechanism last run re-runs it (choosing another mechanism
# in the list does not), and release mode never re-runs on its own.
last = st.session_state.run
auto = live and key is not None and last is not None and key != last and last["mechanism"] == name

if key is not None and (clicked or auto):
    # a caption in an st.empty, not st.status: Streamlit's status sleeps 0.05 s on creation, on every redraw
    slot, finished, refused = st.empty(), False, False
    with widgets.user_errors():
        slot.caption(f":material/hourglass_top: Running {spec.title} at epsilon {epsilon:g}...")
        start = time.perf_counter()
        try:
            result = execute(key)
        except (BudgetExceeded, LedgerError):
            refused = True  # nothing ran: the last good result stays on screen
            raise
        # the run time depends on the raw data: release mode does not show it
        slot.caption(":material/check_circle: " + ("Done" if state.release_mode()
                                                    else f"Done in {time.perf_counter() - start:.2f} s"))
        state.store_result(result, key)
        finished = True
    if not finished:  # the error box says why; no stuck "Running..."; a failed run's predecessor is not kept
        slot.empty()
        if not refused:
            state.drop_result()

found = widgets.need_result(on_synthesize=True)
if found:
    result, run = found
    if run != key:
        st.caption("Showing the last run; the settings above have changed since.")
    cols = st.columns(4)
    cols[0].metric("epsilon spent", f"{result.epsilon:g}")
    cols[1].metric("neighbours differ by", result.neighbouring.replace("_", "/"),
                   help=words.relation(result.neighbouring))
    cols[2].metric("synthetic rows", f"{len(result.data):,}")
    cols[3].metric("privacy guarantee", words.guarantee(ps.get_mechanism(result.mechanism).is_private,
                                                        result.dp_valid).split(":")[0],
                   help=f"dp_valid = {result.dp_valid}: "
                        + words.guarantee(ps.get_mechanism(result.mechanism).is_private, result.dp_valid))
    if not result.dp_valid:
        reason = ("the mechanism is not private" if not ps.get_mechanism(result.mechanism).is_private
                  else "the domain was read off the data")
        st.error(f"dp_valid = False: {reason}. Do not publish this output as a private release.")
    for warning in result.warnings:
        st.warning(md(warning))
    clipped = {name: count for name, count in result.clipped.items() if count}
    if clipped and not state.release_mode():
        widgets.not_private("counts of raw rows outside the public bounds")
        st.warning("Rows outside the public bounds were clipped onto them before the mechanism ran: "
                   + ", ".join(f"{name}: {count:,} of {len(data_state.table()):,}" for name, count in clipped.items())
                   + ". Widen the bounds on the Data page if that is too many.")
    st.markdown("**Mechanism ledger** (the stages' epsilons sum exactly to the total)")
    # an Arrow table, as Streamlit sends it: a pandas one would be built and converted again on every new run
    st.dataframe(pa.table({"stage": [stage for stage, _ in result.ledger],
                           "epsilon": [epsilon for _, epsilon in result.ledger]}), hide_index=True, height=200)
    st.subheader("Synthetic data (the private release)")
    st.dataframe(synthetic_table(result).head(200), hide_index=True, height=250)
    st.caption(f"First {min(200, len(result.data))} of {len(result.data):,} rows. Integer columns are whole numbers; "
               "other numbers keep the decimals set in the schema (shown here with 4 significant digits of their "
               "range when none are set). The CSV holds the release exactly as the command line writes it.")
    note = output.row_count_note(len(result.data), result.neighbouring, run["n_synthetic"],
                                 None if state.release_mode() else len(data_state.table()))
    if note:
        st.caption(note)
    if state.release_mode():
        with st.expander("Parameters of the release"):
            st.json({k: str(v) for k, v in result.release().params.items()})
    else:
        with st.expander("Parameters as resolved and timings"):
            widgets.not_private("every parameter the mechanism chose, some from the raw data, and the timings")
            st.json({"params": {k: str(v) for k, v in result.params.items()}, "timings": result.timings})
    with widgets.user_errors():
        downloads(result, run)
        code_panel.show(run, st.session_state.data["name"], slot="synthesize")
