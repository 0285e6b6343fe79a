"""Hostile input: every file of ``tests/data/bad_csv`` through the loader, synthesize and the CLI.

``manifest.json`` states per file what the loader must do (``ok`` or a fragment of its error
message) and then what ``synthesize`` must do.  A failure must be a :class:`PrivsynError`
with a one-line message (exit status 2 and one ``error:`` line from the CLI, never a
traceback); a file that is actually fine must go through.
"""

from __future__ import annotations

import csv
import io
import json
import os
import subprocess
import sys
import warnings
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import privsyn_core as ps
from privsyn_core import cli
from privsyn_core.data.io import read_csv, read_schema, to_csv_bytes
from privsyn_core.errors import DataError, PrivsynError

CORPUS = Path(__file__).parent / "data" / "bad_csv"
MANIFEST = json.loads((CORPUS / "manifest.json").read_text())
FILES = sorted(MANIFEST)
REPO = Path(__file__).resolve().parents[1]
FORMULA_START = ("=", "+", "-", "@", "\t", "\r")
#: Files run through a real ``python -m privsyn_core`` process (each costs a Python start-up): the two
#: largest files, one refused by the loader and one that goes through.
SUBPROCESS_FILES = ["many_columns_10k.csv", "long_line_2MB.csv"]
MAX_CHILD_RSS_MB = 1024
MAX_MESSAGE_CHARS = 300


def _assert_clear(message: str, fragment: str) -> None:
    assert "\n" not in message.strip(), f"multi-line message: {message!r}"
    assert len(message) <= MAX_MESSAGE_CHARS, f"message too long ({len(message)} chars)"
    assert fragment.lower() in message.lower(), f"{fragment!r} not in {message!r}"


def _synth_args(name: str, tmp_path: Path) -> list[str]:
    args = ["synth", str(CORPUS / name), str(tmp_path / "out.csv"), "--mechanism", "dp_histogram",
            "--epsilon", "1", "--seed", "0"]
    schema = MANIFEST[name]["schema"]
    if schema is not None:
        (tmp_path / "schema.json").write_text(json.dumps(schema))
        args += ["--schema", str(tmp_path / "schema.json")]
    return args


def _fails_with(name: str) -> str | None:
    entry = MANIFEST[name]
    return entry["load"] if entry["load"] != "ok" else entry["synth"] if entry["synth"] != "ok" else None


def test_corpus_has_at_least_30_files_all_in_the_manifest():
    on_disk = sorted(p.name for p in CORPUS.glob("*.csv"))
    assert on_disk == FILES
    assert len(FILES) >= 30
    assert {e["load"] == "ok" and e["synth"] == "ok" for e in MANIFEST.values()} == {True, False}


@pytest.mark.parametrize("name", FILES)
def test_loader_then_synthesize(name):
    entry = MANIFEST[name]
    if entry["load"] != "ok":
        with pytest.raises(DataError) as info:
            read_csv(CORPUS / name)
        _assert_clear(str(info.value), entry["load"])
        return
    df = read_csv(CORPUS / name)
    assert len(df) >= 1 and df.columns.is_unique and all(isinstance(c, str) and c for c in df.columns)
    if entry["synth"] != "ok":
        with pytest.raises(PrivsynError) as info:
            ps.synthesize(df, "dp_histogram", 1.0, schema=entry["schema"], rng=0)
        _assert_clear(str(info.value), entry["synth"])
        return
    result = ps.synthesize(df, "dp_histogram", 1.0, schema=entry["schema"], rng=0)
    assert list(result.data.columns) == list(df.columns)
    assert len(result.data) == len(df)


@pytest.mark.parametrize("name", FILES)
def test_cli_exit_status_and_one_line(name, tmp_path, capsys):
    code = cli.main(_synth_args(name, tmp_path))
    err = capsys.readouterr().err
    assert "Traceback" not in err
    fragment = _fails_with(name)
    if fragment is None:
        assert code == 0, err
        assert read_csv(tmp_path / "out.csv").shape == read_csv(CORPUS / name).shape
        return
    assert code == cli.EXIT_USAGE
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), err
    _assert_clear(lines[0], fragment)


#: Marks the CLI process's own peak resident memory (KB, VmHWM of its address space) at the end of its stderr.
#: RUSAGE_CHILDREN would be the peak of every child this test worker ever started, and ru_maxrss survives fork and
#: exec (a child of a 1 GB worker reports 1 GB); VmHWM belongs to the address space that exec created.
_PEAK_MARK = "\n@@peak_kb="
_PEAK_REPORTING_CLI = (
    "import runpy, sys\n"
    "sys.argv[0] = 'privsyn_core'\n"
    "try:\n"
    "    runpy.run_module('privsyn_core', run_name='__main__', alter_sys=True)\n"
    "finally:\n"
    f"    sys.stderr.write({_PEAK_MARK!r} + open('/proc/self/status').read().split('VmHWM:')[1].split()[0])\n")


def test_subprocess_cli_no_traceback_no_hang_bounded_memory(tmp_path):
    """Real processes, started together: exit 0/2 as the manifest says, within a time limit and 1 GB of memory."""
    procs = {}
    for name in SUBPROCESS_FILES:
        work = tmp_path / name
        work.mkdir()
        procs[name] = subprocess.Popen([sys.executable, "-c", _PEAK_REPORTING_CLI, *_synth_args(name, work)], cwd=REPO,
                                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    peaks_mb = {}
    for name, proc in procs.items():
        try:
            _, err = proc.communicate(timeout=240)
        except subprocess.TimeoutExpired:
            proc.kill()
            pytest.fail(f"{name}: the CLI did not finish within 240 s")
        err, _, peak = err.rpartition(_PEAK_MARK)
        peaks_mb[name] = int(peak) / 1024
        assert "Traceback" not in err, err
        fragment = _fails_with(name)
        assert proc.returncode == (0 if fragment is None else 2), (name, err)
        if fragment is not None:
            assert len(err.strip().splitlines()) == 1
            _assert_clear(err.strip(), fragment)
    assert max(peaks_mb.values()) < MAX_CHILD_RSS_MB, f"CLI peaks (MB): {peaks_mb}"


def test_cli_output_escapes_formula_cells(tmp_path):
    for name in ("formula_injection.csv", "formula_in_header.csv"):
        assert cli.main([*_synth_args(name, tmp_path), "--force"]) == 0  # the second file replaces the first
        rows = list(csv.reader(io.StringIO((tmp_path / "out.csv").read_bytes().decode("utf-8"), newline="")))
        cells = [cell for row in rows for cell in row]
        assert not [c for c in cells if c.startswith(FORMULA_START)], name
    header = rows[0]
    assert header == ["'=1+2", "'@x"]


def test_to_csv_bytes_escapes_text_but_not_numbers():
    df = pd.DataFrame({"=x": ["=cmd|' /C calc'!A0", "+1", "-1", "@SUM(A1)", "\tTAB", "\rCR", "safe", "a=b"],
                       "num": [-1.5, 2.0, -3.0, 4.0, 5.0, 6.0, 7.0, 8.0]})
    rows = list(csv.reader(io.StringIO(to_csv_bytes(df).decode("utf-8"), newline="")))
    assert rows[0] == ["'=x", "num"]
    assert [r[0] for r in rows[1:]] == ["'=cmd|' /C calc'!A0", "'+1", "'-1", "'@SUM(A1)", "'\tTAB", "'\rCR",
                                        "safe", "a=b"]
    assert [float(r[1]) for r in rows[1:]] == df["num"].tolist()


def test_unit_bounds_schema_rejects_nan_inf_and_clips_1e308():
    schema = ps.unit_schema(1)
    for bad, fragment in ((np.nan, "missing"), (np.inf, "infinite"), (-np.inf, "infinite")):
        with pytest.raises(DataError, match=fragment):
            schema.encode(pd.DataFrame({"x0": [0.5, bad]}))
    unit, clipped = schema.encode(pd.DataFrame({"x0": [1e308, -1e308, 0.25]}))
    assert unit[:, 0].tolist() == [1.0, 0.0, 0.25] and clipped == {"x0": 2}


#: Corpus files uploaded through the app's Data page: refused by the loader, and one that is fine.
APP_REFUSED = ["non_utf8_latin1.csv", "nul_bytes.csv", "mixed_delimiters.csv", "many_columns_10k.csv",
               "unterminated_quote.csv", "html_page.csv"]


def test_app_data_page_upload_shows_one_error_and_no_exception():
    from streamlit.testing.v1 import AppTest

    at = AppTest.from_file(str(REPO / "app.py"), default_timeout=120).run()
    at.switch_page("pages/data.py").run()
    at.radio(key="w_source").set_value("Upload a CSV").run()
    for name in APP_REFUSED:
        at.file_uploader[0].set_value((name, (CORPUS / name).read_bytes(), "text/csv")).run()
        assert not at.exception, f"{name}: {at.exception}"
        errors = [e.value for e in at.error]
        assert len(errors) == 1, (name, errors)
        _assert_clear(errors[0], MANIFEST[name]["load"])
    at.file_uploader[0].set_value(("bom_utf8.csv", (CORPUS / "bom_utf8.csv").read_bytes(), "text/csv")).run()
    assert not at.exception and not at.error
    assert at.session_state["data"]["name"] == "bom_utf8.csv"


# -- schema files -------------------------------------------------------------------------------
SCHEMA_CORPUS = Path(__file__).parent / "data" / "bad_schema"
#: File name -> a fragment of the one-line error every reader of it must give.
SCHEMA_MANIFEST = json.loads((SCHEMA_CORPUS / "manifest.json").read_text())
GOOD_SCHEMA = {"columns": [{"name": "a", "kind": "numeric", "lo": 0, "hi": 1},
                           {"name": "b", "kind": "numeric", "lo": 0, "hi": 10, "integer": True},
                           {"name": "c", "kind": "categorical", "categories": ["x", "y"]}]}


@pytest.fixture
def table(tmp_path) -> Path:
    """A CSV the good schema fits (so a failure can only come from the schema under test)."""
    rng = np.random.default_rng(1)
    path = tmp_path / "real.csv"
    pd.DataFrame({"a": rng.random(50), "b": rng.integers(0, 10, 50), "c": rng.choice(["x", "y"], 50)}).to_csv(
        path, index=False)
    return path


def _one_error_line(code: int, err: str, fragment: str) -> None:
    assert "Traceback" not in err
    assert code == cli.EXIT_USAGE, err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), err
    _assert_clear(lines[0], fragment)


def test_schema_corpus_matches_manifest():
    assert sorted(p.name for p in SCHEMA_CORPUS.glob("*.json") if p.name != "manifest.json") == sorted(SCHEMA_MANIFEST)
    assert len(SCHEMA_MANIFEST) >= 40


@pytest.mark.parametrize("name", sorted(SCHEMA_MANIFEST))
def test_bad_schema_file_synth_exits_2_with_one_line(name, table, tmp_path, capsys):
    code = cli.main(["synth", str(table), str(tmp_path / "out.csv"), "--mechanism", "dp_histogram", "--epsilon", "1",
                     "--seed", "0", "--schema", str(SCHEMA_CORPUS / name)])
    _one_error_line(code, capsys.readouterr().err, SCHEMA_MANIFEST[name])
    assert not (tmp_path / "out.csv").exists()


@pytest.mark.parametrize("name", sorted(SCHEMA_MANIFEST))
def test_bad_schema_file_evaluate_exits_2_with_one_line(name, table, capsys):
    code = cli.main(["evaluate", str(table), str(table), "--schema", str(SCHEMA_CORPUS / name)])
    _one_error_line(code, capsys.readouterr().err, SCHEMA_MANIFEST[name])


@pytest.mark.parametrize("name", sorted(SCHEMA_MANIFEST))
def test_bad_schema_file_library_raises_schema_error(name):
    with pytest.raises(ps.SchemaError) as info:
        read_schema(SCHEMA_CORPUS / name)
    _assert_clear(str(info.value), SCHEMA_MANIFEST[name])
    try:  # the same object handed to the library directly (files that parse as JSON)
        obj = json.loads((SCHEMA_CORPUS / name).read_bytes().decode("utf-8"))
    except (ValueError, RecursionError):
        return
    with pytest.raises(ps.SchemaError) as info:
        ps.synthesize(pd.DataFrame({"a": [0.5], "b": [1], "c": ["x"]}), "dp_histogram", 1.0, schema=obj, rng=0)
    _assert_clear(str(info.value), SCHEMA_MANIFEST[name] if isinstance(obj, dict) else "schema")


@pytest.mark.parametrize("schema", [
    GOOD_SCHEMA,
    {"version": 1, **GOOD_SCHEMA},
    {"columns": [{"name": "n", "lo": -1.5, "hi": 2, "public": False},  # kind defaults to numeric
                 {"name": "k", "kind": "categorical", "categories": [7, 2.5, True, "t"]}]},
    {"columns": [{"name": "f", "kind": "categorical", "categories": [False, True]}]},
    {"columns": [{"name": "w", "kind": "numeric", "lo": -8e307, "hi": 8e307}]},
])
def test_valid_schemas_are_read_and_round_trip(schema, tmp_path):
    path = tmp_path / "schema.json"
    path.write_bytes(b"\xef\xbb\xbf" + json.dumps(schema).encode())  # a UTF-8 byte-order mark is fine
    parsed = read_schema(path)
    assert ps.Schema.from_dict(parsed.to_dict()) == parsed
    assert parsed.names == [c["name"] for c in schema["columns"]]


def test_read_schema_refuses_large_and_special_files(tmp_path):
    path = tmp_path / "schema.json"
    path.write_text(json.dumps(GOOD_SCHEMA))
    with pytest.raises(DataError, match="limit"):
        read_schema(path, max_bytes=10)
    with pytest.raises(DataError, match="not a regular file: /dev/zero"):
        read_schema("/dev/zero")


# -- command lines ------------------------------------------------------------------------------
def _command_cases(tmp: Path, real: Path) -> dict[str, tuple[list[str], str]]:
    """Label -> (arguments, fragment of the one error line); every case must leave ``real`` untouched."""
    synth = ["--mechanism", "dp_histogram", "--epsilon", "1", "--seed", "0"]
    (tmp / "exists.csv").write_text("keep me\n")
    (tmp / "link.csv").symlink_to(real)
    os.link(real, tmp / "hardlink.csv")
    (tmp / "schema.json").write_text(json.dumps(GOOD_SCHEMA))
    return {
        "--seed -1": (["synth", real, tmp / "o.csv", *synth[:4], "--seed", "-1"], "non-negative integer"),
        "--seed text": (["synth", real, tmp / "o.csv", *synth[:4], "--seed", "abc"], "--seed must be an integer"),
        "--epsilon abc": (["synth", real, tmp / "o.csv", "--mechanism", "dp_histogram", "--epsilon", "abc"],
                          "epsilon must be a number"),
        "--n-synthetic 1.5": (["synth", real, tmp / "o.csv", *synth, "--n-synthetic", "1.5"], "invalid int value"),
        "missing arguments": (["synth", real], "the following arguments are required"),
        "no subcommand": ([], "the following arguments are required: command"),
        "unknown subcommand": (["synthesise"], "invalid choice"),
        "unknown option": (["synth", real, tmp / "o.csv", *synth, "--epsilom", "1"], "unrecognized arguments"),
        "bad --neighbouring": (["synth", real, tmp / "o.csv", *synth, "--neighbouring", "swap"], "invalid choice"),
        "input /dev/zero": (["synth", "/dev/zero", tmp / "o.csv", *synth], "not a regular file: /dev/zero"),
        "input a folder": (["synth", tmp, tmp / "o.csv", *synth], f"not a regular file: {tmp}"),
        "evaluate input a folder": (["evaluate", real, tmp], f"not a regular file: {tmp}"),
        "schema /dev/zero": (["synth", real, tmp / "o.csv", *synth, "--schema", "/dev/zero"],
                             "not a regular file: /dev/zero"),
        "output folder missing": (["synth", real, tmp / "nope" / "o.csv", *synth], f"no such folder: {tmp / 'nope'}"),
        "output a folder": (["synth", real, tmp, *synth], "is a folder"),
        "output /dev/null": (["synth", real, "/dev/null", *synth, "--force"], "not a regular file: /dev/null"),
        "output == input": (["synth", real, real, *synth], "is the input file"),
        "output == input, --force": (["synth", real, real, *synth, "--force"], "is the input file"),
        "output == input by another path": (["synth", real, tmp / "sub" / ".." / "real.csv", *synth, "--force"],
                                            "is the input file"),
        "output a symlink to the input": (["synth", real, tmp / "link.csv", *synth, "--force"], "is the input file"),
        "output a hard link of the input": (["synth", real, tmp / "hardlink.csv", *synth, "--force"],
                                            "is the input file"),
        "output == schema": (["synth", real, tmp / "schema.json", *synth, "--schema", tmp / "schema.json", "--force"],
                             "is the input file"),
        "report == input": (["synth", real, tmp / "o.csv", *synth, "--report", real, "--force"], "is the input file"),
        "report == output": (["synth", real, tmp / "o.csv", *synth, "--report", tmp / "o.csv"],
                             "is named twice among the files to write"),
        "output exists": (["synth", real, tmp / "exists.csv", *synth], "exists; pass --force"),
        "report exists": (["synth", real, tmp / "o.csv", *synth, "--report", tmp / "exists.csv"],
                          "exists; pass --force"),
    }


def _labels() -> list[str]:
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        real = Path(tmp) / "real.csv"
        real.write_text("a\n1\n")
        (Path(tmp) / "sub").mkdir()
        return list(_command_cases(Path(tmp), real))


@pytest.mark.parametrize("label", _labels())
def test_bad_command_line_exits_2_with_one_line(label, table, capsys):
    tmp = table.parent
    (tmp / "sub").mkdir()
    before = table.read_bytes()
    args, fragment = _command_cases(tmp, table)[label]
    code = cli.main([str(a) for a in args])
    _one_error_line(code, capsys.readouterr().err, fragment)
    assert table.read_bytes() == before
    assert (tmp / "exists.csv").read_text() == "keep me\n"
    assert not (tmp / "o.csv").exists() and not list(tmp.glob(".*.part"))


def test_seed_errors_are_parameter_errors():
    from privsyn_core.privacy.noise import resolve_rng

    for bad in (-1, True, 1.5, "seed", [1]):
        with pytest.raises(ps.ParameterError):
            resolve_rng(bad)


@pytest.mark.parametrize("spec", ps.list_mechanisms(), ids=lambda s: s.name)
def test_widest_accepted_bounds_give_finite_output_without_warnings(spec):
    """At ``|lo|, |hi| = MAX_ABS_BOUND`` every mechanism writes finite values and numpy does not overflow."""
    from privsyn_core.data.domain import MAX_ABS_BOUND

    d = spec.max_dim or 2
    rng = np.random.default_rng(0)
    frame = pd.DataFrame({f"x{j}": rng.uniform(-MAX_ABS_BOUND, MAX_ABS_BOUND, 200) for j in range(d)})
    schema = {"columns": [{"name": f"x{j}", "lo": -MAX_ABS_BOUND, "hi": MAX_ABS_BOUND} for j in range(d)]}
    if spec.data_kind == "boolean":  # Boolean mechanisms refuse wide numeric columns from the schema alone
        with pytest.raises(ps.SchemaError, match="Boolean columns only"):
            ps.synthesize(frame, spec.name, 1.0, schema=schema, rng=0)
        return
    with np.errstate(over="raise", invalid="raise", divide="raise"), warnings.catch_warnings():
        warnings.simplefilter("error")
        out = ps.synthesize(frame, spec.name, 1.0, schema=schema, rng=0).data.to_numpy(dtype=float)
    assert np.isfinite(out).all() and np.abs(out).max() <= MAX_ABS_BOUND
