"""Support modules of the app, one job each; the pages and ``app.py`` import what they use from them directly.

The Streamlit glue:

* :mod:`.state`: widget values kept across pages, the release/teaching mode, the last result;
* :mod:`.data_state`: the current table (samples, uploads restored from the URL, the shared parsed-table cache)
  and the chosen columns;
* :mod:`.schema_state`: the public schema of the chosen columns, proposed from the data or estimated with DP bounds;
* :mod:`.runs`: runs and metrics, cached by a run's JSON key and recorded in the ledger;
* :mod:`.sidebar`: the mode switch, the current data and the data's privacy ledger;
* :mod:`.widgets`: mechanism parameters (capped by the memory budget), epsilon in words, shared page helpers;
* :mod:`.downloads`: the synthetic CSV and the JSON and HTML reports, built only on a click.

Without page state:

* :mod:`.text`: user-supplied names shown as text, never as Markdown;
* :mod:`.ledger`: the privacy ledger as a persistent budget (SQLite);
* :mod:`.shared`: values several pages share, behind named accessors (no page reads another's widget keys);
* :mod:`.uploads`: uploaded tables kept on disk (bounded) so that a reload restores them;
* :mod:`.table_cache`: parsed tables shared by all sessions, bounded in bytes;
* :mod:`.code_panel`: the run as a Python script and a CLI line (:mod:`privsyn_core.reporting.code_export`).
"""
