"""privsyn Streamlit app: ``streamlit run app.py``.

The entry point sets up the shared session state and the sidebar (mode switch and privacy
ledger) and runs the chosen page from ``pages/`` through ``st.navigation``.  Mechanisms and
metrics come from the ``privsyn_core`` registry, so new mechanisms appear without page changes.
"""

import streamlit as st

from pages import _ui as ui

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

st.session_state[ui.ENTRYPOINT_FLAG] = True
try:
    with ui.run_slot(), ui.one_ledger_connection():  # a bounded number of runs at once; one ledger connection
        page = st.navigation(PAGES)
        with ui.user_errors():
            ui.init_state()
        ui.sidebar_controls()
        page.run()
        ui.remember_schema()
        ui.sidebar_data()
        ui.sidebar_ledger()
finally:
    st.session_state[ui.ENTRYPOINT_FLAG] = False
