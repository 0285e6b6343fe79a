"""Code export: the Python script and the CLI line repeat a run from the CSV and its schema, row for row."""

from __future__ import annotations

import ast
import json
import os
import shlex
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

import privsyn_core as ps
from privsyn_core.data.datasets import two_blobs
from privsyn_core.data.io import read_csv, to_csv_bytes
from privsyn_core.reporting.code_export import cli_line, python_script, schema_json

ROOT = Path(__file__).resolve().parents[1]
SCHEMA = {"columns": [{"name": "x", "kind": "numeric", "lo": 0.0, "hi": 1.0},
                      {"name": "y", "kind": "numeric", "lo": 0.0, "hi": 1.0, "integer": False},
                      {"name": "c", "kind": "categorical", "categories": ["a", "b", "c"]}]}


def small_csv(folder: Path) -> Path:
    table = pd.DataFrame(two_blobs(200, 2, rng=1), columns=["x", "y"])
    table["c"] = ["a", "b", "c", "a"] * 50
    table["ignored"] = 7  # not in the schema: the run never reads it
    path = folder / "my data.csv"
    table.to_csv(path, index=False)
    (folder / "schema.json").write_text(schema_json(SCHEMA), encoding="utf-8")
    return path


def run(cmd: list[str], cwd: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    done = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    return done


@pytest.mark.parametrize(("mechanism", "params", "relation"), [
    ("dp_histogram", {"bins": 6}, "replace"),
    ("pmm", {"depth": None}, "add_remove"),
])
def test_the_exported_script_and_cli_line_write_the_api_rows(tmp_path, mechanism, params, relation):
    data = small_csv(tmp_path)
    settings = dict(mechanism=mechanism, epsilon=2.0, params=params, neighbouring=relation, seed=11,
                    data_file=data.name, schema_file="schema.json")
    script = python_script(**settings)
    (tmp_path / "repeat.py").write_text(script, encoding="utf-8")
    run([sys.executable, "repeat.py"], tmp_path)
    given = {k: v for k, v in params.items() if v is not None}
    expected = ps.synthesize(read_csv(data), mechanism, 2.0, schema=SCHEMA, neighbouring=relation, rng=11,
                             **given).release().data
    assert (tmp_path / "synthetic.csv").read_bytes() == to_csv_bytes(expected)

    line = cli_line(**{**settings, "output_file": "from_cli.csv"})
    argv = shlex.split(line)
    assert argv[:4] == ["python", "-m", "privsyn_core", "synth"]
    assert argv[4] == data.name  # the space in the file name is quoted
    run([sys.executable, *argv[1:]], tmp_path)
    assert (tmp_path / "from_cli.csv").read_bytes() == to_csv_bytes(expected)


def test_without_a_seed_the_script_asks_for_the_secure_generator_and_the_cli_line_has_no_seed():
    script = python_script(mechanism="dp_histogram", epsilon=1.0, params={}, neighbouring="replace", seed=None)
    assert "rng='secure'" in script and "spends epsilon again" in script
    line = cli_line(mechanism="dp_histogram", epsilon=1.0, params={}, neighbouring="replace", seed=None)
    assert "--seed" not in shlex.split(line)


def test_file_names_and_values_cannot_inject_code():
    hostile = "x');import os;os.system('echo pwned');('.csv"
    script = python_script(mechanism="dp_histogram", epsilon=1.0, params={"bins": 3}, neighbouring="replace",
                           seed=0, data_file="../../" + hostile)
    tree = ast.parse(script)
    calls = [n.func.attr for n in ast.walk(tree) if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute)]
    assert "system" not in calls
    literal = next(n.args[0] for n in ast.walk(tree)
                   if isinstance(n, ast.Call) and getattr(n.func, "id", "") == "read_csv")
    assert isinstance(literal, ast.Constant) and literal.value == hostile  # the name as a string, without its folders
    line = cli_line(mechanism="dp_histogram", epsilon=1.0, params={}, neighbouring="replace", seed=0,
                    data_file=hostile)
    assert shlex.split(line)[4] == hostile


def test_unknown_parameters_and_odd_values_are_refused():
    with pytest.raises(ps.ParameterError):
        python_script(mechanism="dp_histogram", epsilon=1.0, params={"nope": 1}, neighbouring="replace", seed=0)
    with pytest.raises(ps.ParameterError):
        python_script(mechanism="dp_histogram", epsilon=1.0, params={"bins": [1]}, neighbouring="replace", seed=0)
    with pytest.raises(ps.ParameterError):
        python_script(mechanism="dp_histogram", epsilon=1.0, params={}, neighbouring="replace", seed=True)


def test_the_schema_file_round_trips():
    assert ps.Schema.from_dict(json.loads(schema_json(SCHEMA))).to_dict() == ps.Schema.from_dict(SCHEMA).to_dict()
