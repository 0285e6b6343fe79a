"""Support modules of the app, one job each (``pages/_ui.py`` keeps the Streamlit glue).

* :mod:`.text`: user-supplied names shown as text, never as Markdown;
* :mod:`.ledger`: the privacy ledger as a persistent budget (SQLite);
* :mod:`.shared`: values several pages share, behind named accessors (no page reads another's widget keys);
* :mod:`.uploads`: uploaded tables kept on disk (bounded) so that a reload restores them;
* :mod:`.comparison`: the Compare page's metrics in words, several runs, honest ranks and the comparison report;
* :mod:`.code_panel`: the run as a Python script and a CLI line (:mod:`privsyn_core.reporting.code_export`).
"""
