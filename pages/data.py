"""Data page: choose a bundled sample or upload a CSV, pick columns, set the public domain."""

import streamlit as st

import privsyn_core as ps
from pages._support import data_state, grid_focus, schema_editor, schema_state, shared, sidebar, state, widgets
from pages._support.text import md
from privsyn_core.data.datasets import SAMPLES
from privsyn_core.reporting import report

state.require_entrypoint()
st.title("Data")
st.write("Pick a bundled sample or upload a CSV, choose the columns to synthesize, and give every column a "
         "**public** domain (bounds or categories). Mechanisms are private only if this domain does not come "
         "from the data.")

current_data = st.session_state.data
uploaded = current_data is not None and current_data["sample"] is None  # also after a reload restored it
source = state.keep(st.radio, "Source", "w_source", "Upload a CSV" if uploaded else "Bundled sample",
                    options=["Bundled sample", "Upload a CSV"], horizontal=True)
if source == "Bundled sample":
    names = list(SAMPLES)
    current = (st.session_state.data or {}).get("sample") or data_state.DEFAULT_SAMPLE
    choice = st.selectbox("Sample", names, index=names.index(current) if current in names else 0,
                          format_func=lambda n: f"{n}: {SAMPLES[n]}")
    if choice != (st.session_state.data or {}).get("sample"):
        with widgets.user_errors():
            data_state.load_sample(choice)
else:
    upload = st.file_uploader(f"CSV file (UTF-8, comma/semicolon/tab separated, at most {data_state.MAX_UPLOAD_MB} MB)",
                              type=["csv", "txt"], key="uploader")
    if upload is not None:
        current = st.session_state.data
        # the upload's id says whether it is the file already loaded: no 50 MB hash on every rerun
        if current is None or current.get("upload_id") != upload.file_id:
            raw = upload.getvalue()
            if current is None or report.sha256(raw) != current["sha256"]:
                with widgets.user_errors():
                    # a file that cannot be read clears the previous data and results
                    data_state.set_data(raw, upload.name)
            if st.session_state.data is not None:
                st.session_state.data["upload_id"] = upload.file_id
        if st.session_state.data is not None and st.session_state.data["sample"] is None:
            # shown on every run while this upload is current: a message that vanished on the next rerun moved
            # the schema grid under the user's pointer between a click and a double-click
            st.success(f"Loaded {md(st.session_state.data['name'])}: now set the public domain of every column "
                       "below.")
    elif uploaded:
        st.success(f"Loaded {md(current_data['name'])} (kept across reloads: this page's address names it). "
                   "Upload another file to replace it.")

if st.session_state.data is None:  # the file could not be read: its one error above says why
    sidebar.sidebar_data()
    sidebar.sidebar_ledger()
    st.stop()

with widgets.user_errors():
    full = data_state.table()
    if state.release_mode():
        st.markdown(f"**{md(st.session_state.data['name'])}**: {full.shape[1]} columns. The number of rows is not "
                    "shown in release mode: when neighbouring tables differ by adding or removing one record, it "
                    "is private too.")
    else:
        st.markdown(f"**{md(st.session_state.data['name'])}**: {len(full):,} rows, {full.shape[1]} columns.")
    if st.session_state.get("columns_drawn_for") != st.session_state.get("data_version"):
        state.forget("w_columns")  # a new table: the widget starts from the table's columns (shared.columns)
        st.session_state.columns_drawn_for = st.session_state.get("data_version")
    shared.set_columns(state.keep(st.multiselect, "Columns to synthesize", "w_columns", shared.columns(),
                                  options=[str(c) for c in full.columns]))
    identifiers = st.session_state.get("identifier_columns") or []
    if identifiers and not state.release_mode():
        widgets.not_private("distinct values per column")
        st.caption(f"Left out at first: {', '.join(md(c) for c in identifiers)}. Nearly every row has its own "
                   "value there (an identifier such as a name or a record number): there is no distribution to "
                   "learn, and its public categories would have to list every record. Add it back above if you "
                   "disagree.")
    if len(full) < 2 and not state.release_mode():
        st.warning("The table has a single row: every mechanism needs more data to say anything useful.")

    if state.release_mode():
        st.info("Release mode: the data preview is hidden.")
    else:
        with st.expander("Preview of the data", expanded=False):
            widgets.not_private("the raw rows")
            st.dataframe(data_state.frame().head(50), hide_index=True)

st.subheader("Public domain (schema)")
if state.release_mode():
    st.write("Two sources in release mode: **type** bounds/categories you know from public documentation, or "
             "**estimate** them with differential privacy (spends epsilon, recorded in the ledger).")
else:
    st.write("Three sources: **type** bounds/categories you know from public documentation, **estimate** them with "
             "differential privacy (spends epsilon, recorded in the ledger), or **propose** them from the data "
             "(not private: results get dp_valid = False).")
st.caption("A numeric column may also list public **atoms**: values that many records take exactly and that are "
           "known in public (0 for an amount most people do not have, or a bound). Each atom is released as a cell "
           "of its own, so the synthetic column keeps its spike there. Atoms lie inside the bounds; an integer "
           "column's atoms are integers.")

@st.fragment
def schema_grid() -> None:
    """The grid, its sources and whether the schema is complete.

    A fragment: an edit reruns only this part of the page, so the app answers within a fraction of the time
    and a person typing the next cell meets no full-page rerun.
    """
    with widgets.user_errors():
        chosen = data_state.columns()
        entries = schema_editor.editor(chosen, data_state.table())
        data_state.remember_schema()  # an edit reruns this fragment alone: keep it for a reload now
        sources = {name: entries.get(name, {}).get("source", "not set") for name in chosen}
        st.caption("Where each domain comes from: " + "; ".join(f"{md(n)}: {md(v)}" for n, v in sources.items()))
    try:
        current = schema_state.schema()
    except ps.SchemaError as exc:
        st.warning(md(exc))
    else:
        if current.dp_valid:
            st.success(f"Schema complete for {len(current.columns)} column(s); every domain is public.")
        else:
            st.error("dp_valid = False: some domains were read off the data. Type or DP-estimate them for a "
                     "private release.")


grid_focus.install()  # a double-click on a cell after an edit keeps the keyboard in its editor
schema_grid()

cols = st.columns(2)
with cols[0]:
    st.markdown("**Estimate bounds with DP** (numeric columns)")
    eps_bounds = state.keep(st.select_slider, "epsilon for the bounds", "w_bounds_eps", 0.5, options=widgets.EPSILONS)
    relation = data_state.keep_per_table(st.radio, "neighbouring", "w_bounds_rel", data_state.SAFE_RELATION,
                                         options=["replace", "add_remove"], horizontal=True)
    if st.button("Estimate DP bounds", help="Noisy log-scale histogram per column, DP quantiles at 1% and 99%"):
        with widgets.user_errors():
            schema_state.estimate_dp_bounds(eps_bounds, relation)
            st.rerun()
notes = st.session_state.get("bounds_notes")
if notes:
    for note in notes["notes"]:
        st.warning(note)
    if notes["clipped"] and not state.release_mode():
        widgets.not_private("shares of raw rows outside the DP bounds")
        st.caption("Rows outside the DP bounds (clipped onto them before a run): "
                   + "; ".join(f"{md(c)}: {share:.1%}" for c, share in notes["clipped"].items()))

if not state.release_mode():
    with cols[1]:
        st.markdown("**Propose from the data** (not private)")
        st.caption("Reads min/max and categories off the data: results get dp_valid = False.")
        if st.button("Propose from the data"):
            with widgets.user_errors():
                schema_state.propose_from_data()
                st.rerun()
