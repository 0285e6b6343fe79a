"""Code export: a Python script and the equivalent CLI line that repeat a run from the CSV and its schema.

As OpenDP's dp-wizard does, the app hands the user the code of what it did, so that a run made by
clicking can be repeated, reviewed and scheduled without the app.  Both forms read the same two files
(the data CSV and the public schema as JSON, :func:`schema_json`) and call the same function
(:func:`privsyn_core.synthesize`), so with the same integer seed they write the same rows; without a
seed both draw from the secure generator and cannot be replayed, by design.

Every value that came from the user (file names, parameter values) enters the script as a Python
literal (``repr``) and the command line through ``shlex.quote``: a file name cannot inject code.
Nothing here reads the data: the script holds only public inputs (the mechanism, epsilon, the
relation, the parameters as given, the seed the user chose, file names).
"""

from __future__ import annotations

import json
from pathlib import PurePath
from typing import Any

from privsyn_core.errors import ParameterError
from privsyn_core.registry import get_mechanism
from privsyn_core.reporting.report import cli_command

SCRIPT_TEMPLATE = '''"""Repeat a privsyn run: {mechanism} at epsilon {epsilon!r} ({relation}).

Reads {data_file!r} and its public schema {schema_file!r} (both in the working directory) and writes
{output_file!r}.  {seed_note}
"""

import json
from pathlib import Path

import privsyn_core as ps
from privsyn_core.data.io import read_csv, write_csv

data = read_csv({data_file!r})
schema = ps.Schema.from_dict(json.loads(Path({schema_file!r}).read_text(encoding="utf-8")))
result = ps.synthesize(
    data,
    {mechanism!r},
    {epsilon!r},
    schema=schema,
    neighbouring={relation!r},
    n_synthetic={n_synthetic!r},
    rng={rng!r},{params}
)
release = result.release()  # what may be published: rows, ledger, public parameters
write_csv(release.data, {output_file!r})
for warning in release.warnings:
    print("warning:", warning)
print(f"wrote {{len(release.data)}} rows to {output_file}; epsilon {{release.epsilon:g}} "
      f"({{release.neighbouring}}), dp_valid={{release.dp_valid}}")
'''


def _file_name(name: str, default: str) -> str:
    """The last component of a user-supplied file name (no folders), or ``default`` when nothing is left."""
    base = PurePath(str(name).replace("\\", "/")).name.strip()
    return base if base and base not in (".", "..") else default


def _given(mechanism: str, params: dict[str, Any]) -> dict[str, Any]:
    """The parameters the user set (``None`` = the mechanism's automatic choice, left out), validated."""
    spec = get_mechanism(mechanism)
    unknown = sorted(set(params) - set(spec.params))
    if unknown:
        raise ParameterError(f"mechanism {mechanism!r} has no parameter(s) {unknown}")
    out = {}
    for key, value in params.items():
        if value is None:
            continue
        if not isinstance(value, (bool, int, float, str)):
            raise ParameterError(f"parameter {key!r}: cannot export a value of type {type(value).__name__}")
        out[key] = value
    return out


def python_script(*, mechanism: str, epsilon: float, params: dict[str, Any], neighbouring: str,
                  seed: int | None, n_synthetic: int | None = None, data_file: str = "data.csv",
                  schema_file: str = "schema.json", output_file: str = "synthetic.csv") -> str:
    """The source of a Python script that repeats a run.

    Parameters
    ----------
    mechanism : str
        Registry key.
    epsilon : float
    params : dict
        The mechanism's parameters as the user gave them (``None`` = automatic: left out).
    neighbouring : {"replace", "add_remove"}
    seed : int or None
        The seed the user chose; ``None`` writes ``rng="secure"`` (a release that cannot be replayed).
    n_synthetic : int, optional
    data_file, schema_file, output_file : str
        File names (folders are dropped: the script reads and writes next to itself).

    Returns
    -------
    str
        A script that runs as ``python script.py`` with ``privsyn_core`` installed.
    """
    given = _given(mechanism, params)
    if seed is not None and (isinstance(seed, bool) or not isinstance(seed, int)):
        raise ParameterError(f"the seed must be an integer or None, got {seed!r}")
    lines = "".join(f"\n    {key}={value!r}," for key, value in given.items())
    seed_note = (f"Seed {seed}: the same files and package versions give the same rows." if seed is not None else
                 "No seed: the noise comes from the secure generator, so every run is a new release that spends "
                 "epsilon again.")
    return SCRIPT_TEMPLATE.format(
        mechanism=mechanism, epsilon=float(epsilon), relation=neighbouring, seed_note=seed_note,
        data_file=_file_name(data_file, "data.csv"), schema_file=_file_name(schema_file, "schema.json"),
        output_file=_file_name(output_file, "synthetic.csv"),
        n_synthetic=None if n_synthetic is None else int(n_synthetic),
        rng="secure" if seed is None else int(seed), params=lines)


def cli_line(*, mechanism: str, epsilon: float, params: dict[str, Any], neighbouring: str, seed: int | None,
             n_synthetic: int | None = None, data_file: str = "data.csv", schema_file: str = "schema.json",
             output_file: str = "synthetic.csv") -> str:
    """The ``python -m privsyn_core synth`` line equivalent to :func:`python_script` (same files, same rows)."""
    return cli_command(mechanism=mechanism, epsilon=float(epsilon), params=_given(mechanism, params), seed=seed,
                       neighbouring=neighbouring, n_synthetic=n_synthetic,
                       data_file=_file_name(data_file, "data.csv"),
                       schema_file=_file_name(schema_file, "schema.json"),
                       output_file=_file_name(output_file, "synthetic.csv"))


def schema_json(schema: dict) -> str:
    """The public schema as the JSON file both forms read (``Schema.from_dict`` of it is the run's schema)."""
    return json.dumps(schema, indent=2, ensure_ascii=False) + "\n"
