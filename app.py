"""privsyn Streamlit app: ``streamlit run app.py``.

The entry point sets up the shared session state and the sidebar (mode switch and privacy
ledger) and runs the chosen page from ``pages/`` through ``st.navigation``.  Mechanisms and
metrics come from the ``privsyn_core`` registry, so new mechanisms appear without page changes.
"""

import streamlit as st

from pages._support import admission, data_state, ledger, sidebar, state, widgets

state.freeze_import_heap()  # once per process, on the server's first script run: after the imports

st.set_page_config(page_title="privsyn: private synthetic data", page_icon=":material/shield_lock:",
                   layout="wide")

PAGES = [
    st.Page("pages/data.py", title="Data", icon=":material/table:", default=True),
    st.Page("pages/synthesize.py", title="Synthesize", icon=":material/auto_awesome:"),
    st.Page("pages/partitions.py", title="Partitions", icon=":material/grid_view:"),
    st.Page("pages/tsp.py", title="TSP folding", icon=":material/route:"),
    st.Page("pages/compare.py", title="Compare", icon=":material/compare:"),
    st.Page("pages/tradeoff.py", title="Trade-off", icon=":material/trending_down:"),
    st.Page("pages/over_time.py", title="Over time", icon=":material/timeline:"),
    st.Page("pages/learn.py", title="Learn", icon=":material/school:"),
]

st.session_state[state.ENTRYPOINT_FLAG] = True
try:
    with admission.run_slot(), ledger.one_connection():  # a bounded number of runs at once; one ledger connection
        page = st.navigation(PAGES)
        with widgets.user_errors():
            data_state.init_state()
        sidebar.sidebar_controls()
        page.run()
        data_state.remember_schema()
        sidebar.sidebar_data()
        sidebar.sidebar_ledger()
finally:
    st.session_state[state.ENTRYPOINT_FLAG] = False
