"""Releases anyone can verify (issue 38, item 7): every door writes a release's CSV with its manifest, and
``python -m privsyn_core verify`` checks a received file (exit 0), detects a changed one (exit 1) and refuses bad
input (exit 2) without ever writing to the ledger."""

from __future__ import annotations

import hashlib
import json
import re
import sqlite3
import subprocess
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import privsyn_core as ps
from privsyn_core import manifest
from privsyn_core.cli import main
from privsyn_core.data.identity import table_identity
from privsyn_core.data.io import to_csv_bytes
from privsyn_core.privacy import budget

SCHEMA = {"columns": [{"name": "a", "kind": "numeric", "lo": 0, "hi": 1},
                      {"name": "c", "kind": "categorical", "categories": ["x", "y"]}]}


def table(n: int = 300) -> pd.DataFrame:
    rng = np.random.default_rng(3)
    return pd.DataFrame({"a": rng.random(n), "c": rng.choice(["x", "y"], n)})


def run_main(capsys, *args) -> subprocess.CompletedProcess:
    code = main([str(a) for a in args])
    out = capsys.readouterr()
    return subprocess.CompletedProcess(args, code, out.out, out.err)


@pytest.fixture
def ledger(tmp_path) -> budget.PrivacyLedger:
    return budget.PrivacyLedger.create(tmp_path / "ledger.sqlite")


@pytest.fixture
def saved(tmp_path, ledger):
    """A release counted in ``ledger`` and saved by the library: (result, csv path, manifest path)."""
    result = ps.synthesize(table(), "dp_histogram", 0.5, schema=SCHEMA, ledger=ledger)
    csv, written = result.save(tmp_path / "release.csv")
    return result, csv, written


def test_the_library_writes_the_rows_and_a_manifest_of_them(saved, ledger):
    result, csv, written = saved
    release = result.release()
    assert written == csv.with_name("release.manifest.json")
    assert csv.read_bytes() == to_csv_bytes(release.data)
    text = written.read_text()
    document = json.loads(text)
    assert text == manifest.manifest_bytes(document).decode()  # sorted keys, as written
    assert document["format"] == manifest.FORMAT and document["library_version"] == ps.__version__
    assert document["file"] == {"name": "release.csv", "sha256": hashlib.sha256(csv.read_bytes()).hexdigest()}
    assert document["release"] == json.loads(json.dumps(release.to_dict()))
    recorded = ledger.find_release(document["ledger_entry"]["release_id"])
    assert recorded is not None and recorded.sha256 == document["file"]["sha256"]
    assert recorded.spend.epsilon == 0.5 and recorded.spend.status == budget.SPENT
    assert manifest.verify(csv, written, ledger.path).ok


def test_the_manifest_names_no_hash_of_the_data(saved, ledger):
    """The dataset's key in the ledger is a hash of the records: the manifest holds a random id instead."""
    _, _, written = saved
    text = written.read_text()
    (spend,) = ledger.spends(table_identity(table(), ["a", "c"]))
    assert spend.data not in text
    assert re.fullmatch(r"[0-9a-f]{32}", json.loads(text)["ledger_entry"]["release_id"])
    assert "timings" not in text and "diagnostics" not in text


def test_saving_again_keeps_the_release_id_and_refuses_an_existing_file_without_force(saved):
    result, csv, written = saved
    first = json.loads(written.read_text())
    with pytest.raises(ps.errors.OutputError, match="exists"):
        result.save(csv)
    result.save(csv, force=True)
    assert json.loads(written.read_text()) == first  # the same bytes of the same spend: the same id


def test_a_release_without_a_ledger_has_no_ledger_entry(tmp_path, ledger):
    result = ps.synthesize(table(), "dp_histogram", 0.5, schema=SCHEMA)
    csv, written = result.save(tmp_path / "free.csv")
    assert json.loads(written.read_text())["ledger_entry"] is None
    assert manifest.verify(csv, written).ok
    verdict = manifest.verify(csv, written, ledger.path)
    assert not verdict.ok and "names no ledger entry" in verdict.message


def test_cli_synth_writes_the_manifest_and_verify_accepts_the_file(capsys, tmp_path, ledger):
    data, schema, out = tmp_path / "data.csv", tmp_path / "schema.json", tmp_path / "out.csv"
    data.write_bytes(to_csv_bytes(table()))
    schema.write_text(json.dumps(SCHEMA))
    done = run_main(capsys, "synth", data, out, "--mechanism", "dp_histogram", "--epsilon", "0.5", "--schema", schema,
                    "--ledger", ledger.path)
    assert done.returncode == 0 and "out.manifest.json" in done.stdout
    written = tmp_path / "out.manifest.json"
    assert json.loads(written.read_text())["file"]["sha256"] == hashlib.sha256(out.read_bytes()).hexdigest()
    for extra in ([], ["--ledger", ledger.path]):
        checked = run_main(capsys, "verify", out, written, *extra)
        assert checked.returncode == 0 and checked.stdout.startswith("verified: ") and checked.stderr == ""
        assert len(checked.stdout.splitlines()) == 1


def test_verify_detects_a_one_byte_edit(capsys, saved):
    """Detection: one byte changed in the released file fails verification, with one line saying why."""
    _, csv, written = saved
    data = bytearray(csv.read_bytes())
    data[-2] = ord("0") if data[-2] != ord("0") else ord("1")
    csv.write_bytes(bytes(data))
    checked = run_main(capsys, "verify", csv, written)
    assert checked.returncode == 1 and checked.stdout.startswith("NOT VERIFIED: ")
    assert "is not the released file" in checked.stdout and len(checked.stdout.splitlines()) == 1


def test_verify_fails_when_the_ledger_lacks_the_spend(capsys, tmp_path, saved):
    _, csv, written = saved
    other = budget.PrivacyLedger.create(tmp_path / "other.sqlite")
    checked = run_main(capsys, "verify", csv, written, "--ledger", other.path)
    assert checked.returncode == 1 and "holds no release" in checked.stdout


def test_verify_fails_on_a_manifest_that_understates_the_epsilon(capsys, saved):
    """The file matches an edited manifest's digest, but the ledger's spend says what was really spent."""
    _, csv, written = saved
    document = json.loads(written.read_text())
    document["release"]["epsilon"] = 0.1
    written.write_bytes(manifest.manifest_bytes(document))
    assert run_main(capsys, "verify", csv, written).returncode == 0  # the file alone is the file
    checked = run_main(capsys, "verify", csv, written, "--ledger", saved[0].ledger_entry.path)
    assert checked.returncode == 1 and "epsilon=0.5" in checked.stdout


@pytest.mark.parametrize("case", ["missing file", "missing manifest", "manifest not JSON", "not a manifest",
                                  "damaged manifest", "missing ledger", "ledger not a ledger"])
def test_verify_refuses_bad_input_with_one_line_and_exit_2(capsys, tmp_path, saved, case):
    _, csv, written = saved
    (tmp_path / "bad.json").write_text("{not json")
    (tmp_path / "other.json").write_text(json.dumps({"format": "something else"}))
    damaged = json.loads(written.read_text())
    damaged["release"]["epsilon"] = "one"
    (tmp_path / "damaged.json").write_bytes(manifest.manifest_bytes(damaged))
    args = {"missing file": [tmp_path / "none.csv", written],
            "missing manifest": [csv, tmp_path / "none.json"],
            "manifest not JSON": [csv, tmp_path / "bad.json"],
            "not a manifest": [csv, tmp_path / "other.json"],
            "damaged manifest": [csv, tmp_path / "damaged.json"],
            "missing ledger": [csv, written, "--ledger", tmp_path / "none.sqlite"],
            "ledger not a ledger": [csv, written, "--ledger", csv]}[case]
    checked = run_main(capsys, "verify", *args)
    assert checked.returncode == 2 and checked.stdout == ""
    assert checked.stderr.startswith("error: ") and len(checked.stderr.splitlines()) == 1
    assert not (tmp_path / "none.sqlite").exists()


def _files(path: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(path.parent.iterdir()) if p.name.startswith(path.name)}


def test_verify_never_writes_to_the_ledger(capsys, tmp_path, saved, ledger):
    """Read only: a ledger's files are byte for byte the same after verify, and a ledger of the format that has no
    table of released files yet is not upgraded."""
    _, csv, written = saved
    before = _files(ledger.path)
    assert run_main(capsys, "verify", csv, written, "--ledger", ledger.path).returncode == 0
    assert _files(ledger.path) == before
    older = budget.PrivacyLedger.create(tmp_path / "older.sqlite").path
    with sqlite3.connect(older) as db:
        db.execute("drop table releases")
    before = _files(older)
    checked = run_main(capsys, "verify", csv, written, "--ledger", older)
    assert checked.returncode == 1 and "holds no release" in checked.stdout
    assert _files(older) == before


def test_verify_reads_a_ledger_in_use_through_its_write_ahead_log(capsys, tmp_path, ledger):
    """While a connection holds the ledger open, its last writes are in the ``-wal`` file only: verify reads the
    release recorded there and changes neither file (SQLite's shared-memory index, ``-shm``, holds readers' locks)."""
    with ledger.shared_connection():
        result = ps.synthesize(table(), "dp_histogram", 0.5, schema=SCHEMA, ledger=ledger)
        csv, written = result.save(tmp_path / "open.csv")
        wal = ledger.path.with_name(ledger.path.name + "-wal")
        before = {p: p.read_bytes() for p in (ledger.path, wal)}
        assert wal.stat().st_size > 0
        assert run_main(capsys, "verify", csv, written, "--ledger", ledger.path).returncode == 0
        assert {p: p.read_bytes() for p in (ledger.path, wal)} == before


def test_describe_says_what_was_released_and_how_to_check_it(saved):
    written = saved[2]
    lines = manifest.describe(json.loads(written.read_text()))
    assert lines[0].startswith("What was released: the file release.csv")
    assert any("privsyn verify release.csv release.manifest.json --ledger" in line for line in lines)


def test_stream_add_writes_a_manifest_verify_accepts(capsys, tmp_path, ledger):
    state, batch, out = tmp_path / "stream.state", tmp_path / "batch.csv", tmp_path / "step.csv"
    schema = tmp_path / "schema.json"
    schema.write_text(json.dumps({"columns": [SCHEMA["columns"][0]]}))
    batch.write_bytes(to_csv_bytes(table()[["a"]]))
    assert run_main(capsys, "stream", "open", state, "--schema", schema, "--epsilon", "1", "--depth", "3",
                    "--ledger", ledger.path).returncode == 0
    assert run_main(capsys, "stream", "add", state, batch, out).returncode == 0
    checked = run_main(capsys, "verify", out, tmp_path / "step.manifest.json")
    assert checked.returncode == 0, checked.stdout


def test_the_stakeholder_report_says_what_was_released_and_how_to_check_it_in_plain_words(saved):
    from html.parser import HTMLParser

    from privsyn_core.reporting import stakeholder

    result, _, written = saved
    document = json.loads(written.read_text())
    html = stakeholder.build(release=result.release(), data_name="people.csv", totals={"replace": 0.5}, budget=None,
                             manifest=document)
    parts: list[str] = []
    parser = HTMLParser()
    parser.handle_data = parts.append  # type: ignore[method-assign]
    parser.feed(html.split("<body>", 1)[1])
    text = " ".join(parts)
    assert "What was released, and how to check it" in text and document["file"]["sha256"] in text
    assert document["ledger_entry"]["release_id"] in text and "privsyn verify release.csv" in text
    assert not re.search(r"\b[a-z]+_[a-z_]+\b", text), "no code names in a stakeholder's text"
    assert "What was released, and how to check it" not in stakeholder.build(
        release=result.release(), data_name="people.csv", totals={}, budget=None)


def test_a_ledger_made_before_the_table_of_released_files_gets_it_on_its_next_write(tmp_path):
    """The schema change is additive: an existing ledger keeps every spend and gains the ``releases`` table."""
    older = budget.PrivacyLedger.create(tmp_path / "older.sqlite")
    older.set_budget("kept", 2.0)
    with sqlite3.connect(older.path) as db:
        db.execute("drop table releases")
    result = ps.synthesize(table(), "dp_histogram", 0.5, schema=SCHEMA, ledger=older.path)
    csv, written = result.save(tmp_path / "release.csv")
    assert older.budget("kept") == 2.0 and manifest.verify(csv, written, older.path).ok
