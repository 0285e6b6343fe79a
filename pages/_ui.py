"""The app's Streamlit glue as the pages and ``app.py`` use it (``from pages import _ui as ui``).

A facade: every name is defined once in a support module with one job, and re-exported here.

* :mod:`pages._support.state`: widget values kept across pages, the release/teaching mode, the last result;
* :mod:`pages._support.data_state`: the current table (samples, uploads restored from the URL, the shared
  parsed-table cache :data:`TABLES`) and the chosen columns;
* :mod:`pages._support.schema_state`: the public schema, proposed from the data or estimated with DP bounds;
* :mod:`pages._support.runs`: runs and metrics, cached by a run's JSON key, recorded in the ledger;
* :mod:`pages._support.ledger`: the privacy ledger in SQLite, one connection per script run (``one_ledger_connection``);
* :mod:`pages._support.admission`: at most ``PRIVSYN_RUN_SLOTS`` script runs at once (``run_slot``);
* :mod:`pages._support.sidebar`: the mode switch, the current data and the privacy ledger;
* :mod:`pages._support.widgets`: parameter widgets, memory caps, epsilon in words, shared page helpers;
* :mod:`pages._support.downloads`: the CSV and report downloads, built only on a click.

A test that replaces a function replaces it in the module that defines it (``pages._support.state.release_rng``,
``pages._support.downloads.to_csv_bytes``): the facade only names it.
"""

from __future__ import annotations

from privsyn_core.reporting import report

from ._support.admission import run_slot
from ._support.data_state import (
    DEFAULT_SAMPLE,
    MAX_UPLOAD_MB,
    TABLES,
    clear_data,
    columns,
    data_id,
    frame,
    init_state,
    load_sample,
    load_table,
    name_data_in_url,
    real_of,
    remember_schema,
    restore_or_default,
    restore_schema,
    set_data,
    table,
    unit_real,
)
from ._support.downloads import (
    CSV_KEEP_BYTES,
    VIEWS_KEPT,
    csv_builder,
    downloads,
    ledger_rows,
    metrics_on_demand,
    report_builder,
    run_view,
    stakeholder_inputs,
    synthetic_table,
)
from ._support.ledger import one_connection as one_ledger_connection
from ._support.runs import evaluate_result, evaluation, execute, run_key
from ._support.schema_state import estimate_dp_bounds, propose_from_data, schema
from ._support.sidebar import RELATION_WORDS, sidebar_controls, sidebar_data, sidebar_ledger
from ._support.state import (
    ASSETS,
    ENTRYPOINT_FLAG,
    PROPOSED,
    RELEASE_ONLY_ENV,
    ROOT,
    capped,
    drop_result,
    enforce_mode,
    forget,
    freeze_import_heap,
    keep,
    mechanisms,
    release_locked,
    release_mode,
    release_rng,
    release_toggle,
    require_entrypoint,
    saved_value,
    set_schema_entries,
    store_result,
)
from ._support.widgets import (
    EPSILONS,
    LIVE_MAX_ROWS,
    axis_pair,
    epsilon_guidance,
    max_synthetic_rows,
    need_result,
    not_private,
    param_widgets,
    row_cap_caption,
    user_errors,
)

__all__ = [
    # state
    "ASSETS", "ENTRYPOINT_FLAG", "PROPOSED", "RELEASE_ONLY_ENV", "ROOT", "capped", "drop_result", "enforce_mode",
    "forget", "freeze_import_heap", "keep", "mechanisms", "release_locked", "release_mode", "release_rng",
    "release_toggle", "require_entrypoint", "saved_value", "set_schema_entries", "store_result",
    # data
    "DEFAULT_SAMPLE", "MAX_UPLOAD_MB", "TABLES", "clear_data", "columns", "data_id", "frame", "init_state",
    "load_sample", "load_table", "name_data_in_url", "real_of", "remember_schema", "restore_or_default",
    "restore_schema", "set_data", "table", "unit_real",
    # schema
    "estimate_dp_bounds", "propose_from_data", "schema",
    # ledger and admission
    "one_ledger_connection", "run_slot",
    # runs
    "evaluate_result", "evaluation", "execute", "run_key",
    # sidebar
    "RELATION_WORDS", "sidebar_controls", "sidebar_data", "sidebar_ledger",
    # widgets
    "EPSILONS", "LIVE_MAX_ROWS", "axis_pair", "epsilon_guidance", "max_synthetic_rows", "need_result", "not_private",
    "param_widgets", "row_cap_caption", "user_errors",
    # downloads
    "CSV_KEEP_BYTES", "VIEWS_KEPT", "csv_builder", "downloads", "ledger_rows", "metrics_on_demand",
    "report_builder", "run_view", "stakeholder_inputs", "synthetic_table",
    # the report module (pages hash uploads with ``ui.report.sha256``)
    "report",
]

freeze_import_heap()  # once per process: this module is imported on the server's first script run
