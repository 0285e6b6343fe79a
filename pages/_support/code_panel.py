"""The "reproduce this run as code" panel: the Python script, the CLI line and the schema file of a run.

The code comes from :mod:`privsyn_core.reporting.code_export` (pure, tested by running it); this module only draws it.
It holds public inputs only (mechanism, epsilon, relation, parameters as given, the seed the user chose,
file names, the public schema), so it is shown in release mode too.
"""

from __future__ import annotations

from pathlib import PurePath

import streamlit as st

from privsyn_core.reporting import code_export

from .text import md


def files(data_name: str) -> tuple[str, str]:
    """The data file's name and the schema file's name beside it (``data.csv`` -> ``data.schema.json``)."""
    name = PurePath(str(data_name).replace("\\", "/")).name or "data.csv"
    return name, f"{PurePath(name).stem or 'data'}.schema.json"


def show(key: dict, data_name: str, *, slot: str) -> None:
    """Draw the panel for the run ``key`` (``slot`` makes the download keys unique on the page)."""
    data_file, schema_file = files(data_name)
    settings = dict(mechanism=key["mechanism"], epsilon=float(key["epsilon"]), params=key["params"],
                    neighbouring=key["neighbouring"], seed=key["seed"], n_synthetic=key["n_synthetic"],
                    data_file=data_file, schema_file=schema_file)
    with st.expander("Reproduce this run as code (Python script or command line)"):
        st.caption(f"Save the schema as **{md(schema_file)}** next to your CSV, then run either form: both read the "
                   "same files and call the same function."
                   + (f" With seed {key['seed']} they write the same rows as this run." if key["seed"] is not None
                      else " No seed: each run is a new release that spends epsilon again."))
        cols = st.columns(2)
        cols[0].download_button("Download the Python script", data=lambda: code_export.python_script(**settings),
                                file_name="repeat_run.py", mime="text/x-python", on_click="ignore",
                                key=f"dl_script_{slot}")
        cols[1].download_button("Download the schema (JSON)", data=lambda: code_export.schema_json(key["schema"]),
                                file_name=schema_file, mime="application/json", on_click="ignore",
                                key=f"dl_schema_{slot}")
        st.code(code_export.cli_line(**settings), language="bash", wrap_lines=True)
        st.code(code_export.python_script(**settings), language="python")
