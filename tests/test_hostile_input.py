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
import resource
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import privsyn_core as ps
from privsyn_core import cli
from privsyn_core.errors import DataError, PrivsynError
from privsyn_core.io import read_csv, to_csv_bytes

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


def test_subprocess_cli_no_traceback_no_hang_bounded_memory(tmp_path):
    """Real processes, started together: exit 0/2 as the manifest says, within a time limit and 1 GB of memory."""
    procs = {}
    for name in SUBPROCESS_FILES:
        work = tmp_path / name
        work.mkdir()
        procs[name] = subprocess.Popen([sys.executable, "-m", "privsyn_core", *_synth_args(name, work)], cwd=REPO,
                                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    for name, proc in procs.items():
        try:
            _, err = proc.communicate(timeout=240)
        except subprocess.TimeoutExpired:
            proc.kill()
            pytest.fail(f"{name}: the CLI did not finish within 240 s")
        assert "Traceback" not in err, err
        fragment = _fails_with(name)
        assert proc.returncode == (0 if fragment is None else 2), (name, err)
        if fragment is not None:
            assert len(err.strip().splitlines()) == 1
            _assert_clear(err.strip(), fragment)
    peak_mb = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
    assert peak_mb < MAX_CHILD_RSS_MB, f"a CLI process peaked at {peak_mb:.0f} MB"


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
