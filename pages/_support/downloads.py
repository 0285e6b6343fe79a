"""Downloads of a run: the synthetic CSV with its manifest, the JSON run report and the HTML stakeholder report.

What a run's view and downloads need is made once per run and kept in the session (:func:`synthetic_table`,
:func:`run_view`); the files are built only on a click.
"""

from __future__ import annotations

import functools
import hashlib
import json
from collections.abc import Callable
from typing import Any

import pandas as pd
import streamlit as st

import privsyn_core as ps
from privsyn_core import manifest
from privsyn_core.data.io import to_csv_bytes
from privsyn_core.manifest import manifest_path
from privsyn_core.reporting import report, stakeholder

from . import ledger as store, output, shared
from .data_state import ledger_id, real_of
from .state import release_mode

#: The synthetic CSV's file name (its manifest's is :func:`~privsyn_core.manifest.manifest_path` of it).
CSV_NAME = "synthetic.csv"
#: Largest synthetic CSV kept in memory between two download clicks of the same run (larger ones are rebuilt).
CSV_KEEP_BYTES = 64 * 2**20


#: Download views (shaped table, report, builders) a session keeps: Synthesize's and Compare's of one run.
VIEWS_KEPT = 2


def downloads(result: ps.SynthResult, key: dict, metrics: dict | None = None) -> None:
    """Synthetic CSV, JSON run report and the HTML stakeholder report, each built only when downloaded.

    Every file is built on the click, by Streamlit's deferred download (``data`` a callable, ``on_click="ignore"``)
    in a worker thread, never during a page run: a rerun only registers three small callables.  Before, the
    CSV was built on every rerun (0.41 s at 10^5 rows) and handed to Streamlit's media file manager, whose global
    lock every session's script thread also takes at the start of each run.  The callables and what they read
    are made once per run (:func:`run_view`), so a rerun that changed no setting does no work here.

    In teaching mode both reports carry the metrics: ``metrics`` when the page has them already (Compare), else
    they are computed when a report is downloaded, so a run never waits for an evaluation nobody asked for (under
    concurrent sessions those evaluations queued into minute-long stalls).  Release mode has no metrics.
    """
    view = run_view(result, key, metrics)
    cols = st.columns(4)
    cols[0].download_button("Download synthetic CSV", data=view["csv"], file_name=CSV_NAME, mime="text/csv",
                            on_click="ignore", key="dl_csv")
    cols[1].download_button("Download its manifest", data=view["manifest"], file_name=manifest_path(CSV_NAME).name,
                            mime="application/json", on_click="ignore", key="dl_manifest")
    cols[2].download_button("Download JSON report", data=view["json"], file_name="run_report.json",
                            mime="application/json", on_click="ignore", key="dl_json")
    cols[3].download_button("Export stakeholder report (HTML)", data=view["html"], file_name="privsyn_report.html",
                            mime="text/html", on_click="ignore", key="dl_html")
    st.caption("The stakeholder report is one small HTML file in plain words (no scripts); the JSON report holds "
               "every technical detail. The manifest lets anyone who receives the CSV check that it is this release: "
               f"python -m privsyn_core verify {CSV_NAME} {manifest_path(CSV_NAME).name}.")
    st.caption("The JSON report reproduces the run: save its 'schema' as schema.json and run")
    st.code(view["run"]["cli"], language="bash", wrap_lines=True)
    with st.expander("What the JSON report contains" + (" (release only)" if release_mode() else "")):
        st.json({k: v for k, v in view["run"].items() if k != "created"}, expanded=False)


#: Spends the report shown on the page lists (the latest; the downloaded reports list every one): the ledger
#: grows with every run, and the page is drawn again on every rerun.
SHOWN_SPENDS = 20


def run_view(result: ps.SynthResult, key: dict, metrics: dict | None = None) -> dict[str, Any]:
    """What the downloads of one run need, made once per run and kept in the session (:data:`VIEWS_KEPT`).

    ``run`` is the JSON report without metrics (shown on the page); ``csv``, ``json`` and ``html`` build the
    files when called.  Their inputs are gathered now, since they run later, on a click, in a thread without
    the script's session; the ledger is read at the click, so a file always carries the spends of that moment.
    The view is made again when anything it shows changes: the run, the mode, the declared decimals, the
    TSTR target, whether the page passed metrics, or the number of spends on the data.
    """
    did = ledger_id()
    target = shared.tstr_target()
    decimals = {k: e.get("decimals") for k, e in st.session_state.get("schema_entries", {}).items()}
    token = json.dumps([key, release_mode(), target, metrics is not None, decimals, store.count(did)],
                       sort_keys=True, default=str)
    views = st.session_state.setdefault("_run_views", {})
    found = views.get(token)
    if found is not None and found["result"] is result:
        return found
    run_report = report_builder(result, key)
    inputs = stakeholder_inputs(result)
    report_metrics = metrics_on_demand(result, metrics, inputs["real"])

    def json_report() -> str:
        return json.dumps(run_report(metrics=report_metrics(), extra_ledger=ledger_rows(did)), indent=1,
                          default=str)

    csv = csv_builder(result.data)
    manifest_file = manifest_builder(result, csv, CSV_NAME)

    def html_report() -> str:
        return stakeholder.build(**inputs, totals=store.totals(did), budget=store.budget(did),
                                 ledger=ledger_rows(did), evaluation=report_metrics(),
                                 manifest=json.loads(manifest_file()))

    view = {"result": result, "run": run_report(extra_ledger=ledger_rows(did, last=SHOWN_SPENDS)),
            "csv": csv, "manifest": manifest_file, "json": json_report, "html": html_report}
    while len(views) >= VIEWS_KEPT:
        views.pop(next(iter(views)))
    views[token] = view
    return view


def csv_builder(table: pd.DataFrame, keep_bytes: int = CSV_KEEP_BYTES):
    """A callable returning ``to_csv_bytes(table)`` (the release's rows: the bytes the command line writes), built
    on its first call, kept if at most ``keep_bytes``."""
    kept: list[bytes] = []

    def build() -> bytes:
        if kept:
            return kept[0]
        data = to_csv_bytes(table)
        if len(data) <= keep_bytes:
            kept.append(data)
        return data

    return build


def manifest_builder(result: ps.SynthResult, csv: Callable[[], bytes], file_name: str) -> Callable[[], bytes]:
    """A callable returning the manifest of the CSV download ``csv()`` named ``file_name``
    (:func:`privsyn_core.manifest.build_manifest`), built on its first call, when the file's SHA-256 is recorded in
    the ledger with the run's spend (the same bytes keep one release id), then kept."""
    kept: list[bytes] = []

    def build() -> bytes:
        if not kept:
            sha256 = hashlib.sha256(csv()).hexdigest()
            document = manifest.build_manifest(result.release(), sha256, file_name=file_name,
                                               release_id=manifest.record(result.ledger_entry, sha256))
            kept.append(manifest.manifest_bytes(document))
        return kept[0]

    return build


def synthetic_table(result: ps.SynthResult) -> pd.DataFrame:
    """The released rows as the user sees and downloads them (integers, declared decimals, no -0).

    Shaped once per run and declared decimals, then kept in the session: reruns reuse it.
    """
    entries = st.session_state.get("schema_entries", {})
    decimals = {k: e.get("decimals") for k, e in entries.items()}
    memo = st.session_state.get("_shaped")
    if memo is not None and memo["result"] is result and memo["decimals"] == decimals:
        return memo["table"]
    table = output.shaped(result.data, result.schema, decimals)
    st.session_state["_shaped"] = {"result": result, "decimals": decimals, "table": table}
    return table


def ledger_rows(did: str, last: int | None = None) -> list[dict]:
    """The ledger of the data ``did`` as reports show it, or its ``last`` spends (readable from any thread: no
    session needed)."""
    return [{"release": e["label"], "mechanism": e["mechanism"], "epsilon": e["epsilon"],
             "neighbouring": e["relation"], "dp_valid": e["private"]} for e in store.spends(did, last=last)]


def report_builder(result: ps.SynthResult, key: dict):
    """``run_report(metrics=None, extra_ledger=...)``: the JSON report of this run, release-only in release mode
    (no hash, no timings, no metrics, no teaching section)."""
    release, did = release_mode(), ledger_id()
    build = functools.partial(report.run_report, result, params=key["params"], release_mode=release,
                              data_name=st.session_state.data["name"],
                              data_sha256=None if release else st.session_state.data["sha256"])

    def run_report(**kwargs: Any) -> dict[str, Any]:
        """The report; the ledger is read when it is built (every spend unless ``extra_ledger`` is given: the page
        passes its tail, and the whole ledger, which grows with every run, is then not read at all)."""
        if "extra_ledger" not in kwargs:
            kwargs["extra_ledger"] = ledger_rows(did)
        return build(**kwargs)

    return run_report


def metrics_on_demand(result: ps.SynthResult, metrics: dict | None, real: pd.DataFrame | None):
    """A function returning the run's metrics (``None`` in release mode), evaluated at most once, on first call.

    Its inputs are gathered now: it runs later, on a download click, in a thread without the script's session.
    ``real`` is :func:`~pages._support.data_state.real_of` the run (as :func:`stakeholder_inputs` gathered it),
    unused when ``metrics`` are given or in release mode.
    """
    if metrics is not None or release_mode() or real is None:
        return lambda: metrics
    synthetic, schema = result.data, ps.Schema.from_dict(result.schema)
    target = shared.tstr_target()
    target = target if target in schema.names else None
    return functools.cache(lambda: report.evaluate_subsampled(real, synthetic, schema, target=target))


def stakeholder_inputs(result: ps.SynthResult) -> dict:
    """Arguments of :func:`stakeholder.build` but the metrics and the ledger's figures, gathered now (the HTML is
    built on click, in another thread); in release mode nothing read off the raw data."""
    return dict(release=result.release(), data_name=st.session_state.data["name"],
                real=None if release_mode() else real_of(result), shaped=synthetic_table(result))
