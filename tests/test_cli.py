"""Command line: the contract's three subcommands; bad input exits 2 with one line."""

import json
import subprocess
import sys

import numpy as np
import pandas as pd
import pytest

from privsyn_core.cli import main

SCHEMA = {"columns": [{"name": "a", "kind": "numeric", "lo": 0, "hi": 1},
                      {"name": "b", "kind": "numeric", "lo": 0, "hi": 10, "integer": True},
                      {"name": "c", "kind": "categorical", "categories": ["x", "y"]}]}


def run_cli(*args: str) -> subprocess.CompletedProcess:
    """The real ``python -m privsyn_core`` in a subprocess."""
    return subprocess.run([sys.executable, "-m", "privsyn_core", *map(str, args)], capture_output=True, text=True,
                          timeout=120)


def run_main(capsys, *args) -> subprocess.CompletedProcess:
    """The CLI's ``main`` in-process (fast); argparse usage errors exit through SystemExit."""
    try:
        code = main([str(a) for a in args])
    except SystemExit as stop:
        code = stop.code
    out = capsys.readouterr()
    return subprocess.CompletedProcess(args, code, out.out, out.err)


@pytest.fixture
def files(tmp_path):
    rng = np.random.default_rng(1)
    real = tmp_path / "real.csv"
    pd.DataFrame({"a": rng.random(300), "b": rng.integers(0, 10, 300), "c": rng.choice(["x", "y"], 300)}).to_csv(real, index=False)
    schema = tmp_path / "schema.json"
    schema.write_text(json.dumps(SCHEMA))
    return tmp_path, real, schema


def test_mechanisms_lists_registry():
    out = run_cli("mechanisms")
    assert out.returncode == 0 and "dp_histogram" in out.stdout
    listed = json.loads(run_cli("mechanisms", "--json").stdout)
    assert {"name", "params", "neighbouring", "is_private"} <= set(listed[0])


def test_synth_then_evaluate(files, capsys):
    tmp, real, schema = files
    out_csv, report = tmp / "synth.csv", tmp / "report.json"
    proc = run_cli("synth", real, out_csv, "--mechanism", "dp_histogram", "--epsilon", "1", "--schema", schema,
                   "--seed", "3", "--param", "sample=center", "--report", report)
    assert proc.returncode == 0, proc.stderr
    synth = pd.read_csv(out_csv)
    assert list(synth.columns) == ["a", "b", "c"] and len(synth) == 300
    rep = json.loads(report.read_text())
    assert rep["params"]["seed"] == 3 and rep["dp_valid"] is True and rep["params"]["sample"] == "center"
    again = tmp / "again.csv"
    assert run_main(capsys, "synth", real, again, "--mechanism", "dp_histogram", "--epsilon", "1", "--schema", schema,
                   "--seed", "3", "--param", "sample=center").returncode == 0
    assert again.read_bytes() == out_csv.read_bytes()
    ev = run_main(capsys, "evaluate", real, out_csv, "--schema", schema, "--json")
    assert ev.returncode == 0, ev.stderr
    assert "w1" in json.loads(ev.stdout)


def test_inferred_schema_warns_not_private(files, capsys):
    tmp, real, _ = files
    proc = run_main(capsys, "synth", real, tmp / "o.csv", "--mechanism", "dp_histogram", "--epsilon", "1")
    assert proc.returncode == 0 and "not differentially private" in proc.stderr
    assert "dp_valid=False" in proc.stdout


def _bad_cases(tmp, real, schema):
    nonnumeric = tmp / "nonnumeric.csv"
    nonnumeric.write_text("a,b,c\n0.1,3,x\nhello,4,y\n")
    nan = tmp / "nan.csv"
    nan.write_text("a,b,c\n0.1,3,x\n,4,y\n")
    empty = tmp / "empty.csv"
    empty.write_text("")
    header_only = tmp / "header.csv"
    header_only.write_text("a,b,c\n")
    bad_bounds = tmp / "bad_bounds.json"
    bad_bounds.write_text(json.dumps({"columns": [{"name": "a", "kind": "numeric", "lo": 1, "hi": 0}]}))
    unknown_col = tmp / "unknown.json"
    unknown_col.write_text(json.dumps({"columns": [{"name": "zzz", "kind": "numeric", "lo": 0, "hi": 1}]}))
    not_json = tmp / "broken.json"
    not_json.write_text("{nope")
    synth = ["--mechanism", "dp_histogram", "--epsilon", "1"]
    return {
        "missing file": ["synth", tmp / "missing.csv", tmp / "o.csv", *synth],
        "non-numeric": ["synth", nonnumeric, tmp / "o.csv", *synth, "--schema", schema],
        "NaN": ["synth", nan, tmp / "o.csv", *synth, "--schema", schema],
        "empty": ["synth", empty, tmp / "o.csv", *synth],
        "header only": ["synth", header_only, tmp / "o.csv", *synth],
        "epsilon <= 0": ["synth", real, tmp / "o.csv", "--mechanism", "dp_histogram", "--epsilon", "0"],
        "epsilon text": ["synth", real, tmp / "o.csv", "--mechanism", "dp_histogram", "--epsilon", "lots"],
        "lo >= hi": ["synth", real, tmp / "o.csv", *synth, "--schema", bad_bounds],
        "unknown column": ["synth", real, tmp / "o.csv", *synth, "--schema", unknown_col],
        "schema not JSON": ["synth", real, tmp / "o.csv", *synth, "--schema", not_json],
        "unknown mechanism": ["synth", real, tmp / "o.csv", "--mechanism", "magic", "--epsilon", "1"],
        "bad param": ["synth", real, tmp / "o.csv", *synth, "--param", "bins"],
        "evaluate missing": ["evaluate", real, tmp / "missing.csv"],
    }


def test_bad_input_exits_2_with_one_line(files, capsys):
    tmp, real, schema = files
    for label, args in _bad_cases(tmp, real, schema).items():
        proc = run_main(capsys, *args)
        assert proc.returncode == 2, f"{label}: exit {proc.returncode}\n{proc.stderr}"
        assert "Traceback" not in proc.stderr, label
        lines = [line for line in proc.stderr.strip().splitlines() if line]
        assert lines and lines[-1].startswith(("error:", "usage:", "python -m privsyn_core")), label
        if lines[-1].startswith("error:"):
            assert len(lines) == 1, f"{label}: more than one line: {lines}"


def test_bad_input_through_python_m_has_no_traceback(files):
    tmp, real, _ = files
    proc = run_cli("synth", real, tmp / "o.csv", "--mechanism", "dp_histogram", "--epsilon", "-1")
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert proc.stderr.strip() == "error: epsilon must be finite and > 0, got -1.0"
