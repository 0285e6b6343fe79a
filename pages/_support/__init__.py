"""Support modules of the app, one job each (``pages/_ui.py`` keeps the Streamlit glue).

* :mod:`.text`: user-supplied names shown as text, never as Markdown;
* :mod:`.ledger`: the privacy ledger as a persistent budget (SQLite).
"""
