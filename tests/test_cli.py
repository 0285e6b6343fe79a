"""Command line: the contract's three subcommands; bad input exits 2 with one line."""

import errno
import json
import os
import signal
import stat
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import privsyn_core as ps
from privsyn_core.cli import main
from privsyn_core.data.io import atomic_open, to_csv_bytes, write_csv
from privsyn_core.errors import OutputError
from privsyn_core.privacy import budget

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
    table = pd.DataFrame({"a": rng.random(300), "b": rng.integers(0, 10, 300), "c": rng.choice(["x", "y"], 300)})
    table.to_csv(real, index=False)
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


def test_an_epsilon_too_small_for_int64_noise_exits_2_with_one_line(tmp_path):
    """kd_grid at epsilon 1e-20 (noise scale 2e20, beyond int64 noise): the noise sampler refuses the scale with a
    ParameterError (exit 2, one line), not an OverflowError from the conditional draws of the implicit empty bins."""
    real, schema = tmp_path / "in.csv", tmp_path / "s.json"
    pd.DataFrame(np.random.default_rng(0).random((200, 2)), columns=["a", "b"]).to_csv(real, index=False)
    schema.write_text(json.dumps({"columns": [{"name": c, "kind": "numeric", "lo": 0, "hi": 1} for c in "ab"]}))
    proc = run_cli("synth", real, tmp_path / "out.csv", "--mechanism", "kd_grid", "--epsilon", "1e-20", "--schema",
                   schema)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert proc.stderr.strip().splitlines() == [
        "error: the discrete Laplace scale 2e+20 exceeds 2^50 (noise beyond int64 counts): the epsilon is too small; "
        "raise it"]
    assert not (tmp_path / "out.csv").exists()


# -- file safety ----------------------------------------------------------------------------------
SYNTH = ["--mechanism", "dp_histogram", "--epsilon", "1", "--seed", "3", "--param", "sample=center"]


class _DiskFillsUp:
    """A file object whose writes hit ENOSPC once ``room`` bytes are written (the bytes before really are written)."""

    def __init__(self, fh, room: int):
        self._fh, self.room = fh, room

    def write(self, data) -> int:
        data = memoryview(data).cast("B")
        if len(data) > self.room:
            self._fh.write(data[:self.room])
            self._fh.flush()
            self.room = 0
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        self.room -= len(data)
        return self._fh.write(data)

    def __getattr__(self, name):
        return getattr(self._fh, name)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self._fh.close()


def _fill_disk_after(monkeypatch, room: int, nth_file: int = 0) -> None:
    """Make the ``nth_file``-th file opened by ``os.fdopen`` (atomic_open's temporary file) run out of space."""
    real_fdopen, opened = os.fdopen, []

    def fdopen(fd, *args, **kwargs):
        fh = real_fdopen(fd, *args, **kwargs)
        opened.append(fh)
        return _DiskFillsUp(fh, room) if len(opened) == nth_file + 1 else fh

    monkeypatch.setattr(os, "fdopen", fdopen)


def atomic_write(path: Path, data: bytes) -> None:
    with atomic_open(path) as fh:
        fh.write(data)


def _leftovers(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir() if p.name.endswith(".part"))


def test_full_disk_mid_write_leaves_the_old_file_and_no_partial_file(files, monkeypatch, capsys):
    tmp, real, schema = files
    out = tmp / "synth.csv"
    out.write_bytes(b"old content\n")
    _fill_disk_after(monkeypatch, room=1000)
    proc = run_main(capsys, "synth", real, out, *SYNTH, "--schema", schema, "--force")
    assert proc.returncode == 2
    expected = f"error: could not write {out}: No space left on device; it was left unchanged"
    assert proc.stderr.strip().splitlines() == [expected]
    assert out.read_bytes() == b"old content\n" and _leftovers(tmp) == []


def test_full_disk_on_the_report_writes_neither_file(files, monkeypatch, capsys):
    tmp, real, schema = files
    _fill_disk_after(monkeypatch, room=10, nth_file=1)
    proc = run_main(capsys, "synth", real, tmp / "synth.csv", *SYNTH, "--schema", schema, "--report", tmp / "r.json")
    assert proc.returncode == 2 and "No space left on device" in proc.stderr
    assert not (tmp / "synth.csv").exists() and not (tmp / "r.json").exists() and _leftovers(tmp) == []


def test_force_overwrites_atomically_and_keeps_the_mode(files, capsys):
    tmp, real, schema = files
    out, report = tmp / "synth.csv", tmp / "report.json"
    out.write_bytes(b"old\n")
    out.chmod(0o640)
    refused = run_main(capsys, "synth", real, out, *SYNTH, "--schema", schema)
    assert refused.returncode == 2 and out.read_bytes() == b"old\n"
    assert run_main(capsys, "synth", real, out, *SYNTH, "--schema", schema, "--force",
                    "--report", report).returncode == 0
    assert len(pd.read_csv(out)) == 300 and json.loads(report.read_text())["params"]["seed"] == 3
    assert stat.S_IMODE(out.stat().st_mode) == 0o640 and _leftovers(tmp) == []


def test_atomic_open_removes_the_temporary_file_on_any_exception(tmp_path):
    target = tmp_path / "t.bin"
    target.write_bytes(b"old")
    for exc in (ValueError("boom"), KeyboardInterrupt()):
        with pytest.raises(type(exc)), atomic_open(target) as fh:
            fh.write(b"new, half")
            raise exc
        assert target.read_bytes() == b"old" and _leftovers(tmp_path) == []
    atomic_write(target, b"new")
    assert target.read_bytes() == b"new"
    link = tmp_path / "link"
    link.symlink_to(target)
    atomic_write(link, b"through the link")
    assert link.is_symlink() and target.read_bytes() == b"through the link"
    for bad, message in ((tmp_path / "no" / "t", "no such folder"), (tmp_path, "not a regular file")):
        with pytest.raises(OutputError, match=message):
            atomic_write(bad, b"x")


def test_write_csv_in_blocks_equals_to_csv_bytes(tmp_path):
    df = pd.DataFrame({"=a\r\nb": ["=1+1", "x\ry", "plain", "-3", "@"] * 7, "n": np.arange(35) / 3})
    write_csv(df, tmp_path / "blocks.csv", chunk_rows=4)
    assert (tmp_path / "blocks.csv").read_bytes() == to_csv_bytes(df)


#: A child process that runs the CLI and, at a chosen point, says READY and blocks until signalled.
_CHILD = """
import sys, time
import privsyn_core.cli as cli, privsyn_core.data.io as pio
where = sys.argv[1]
def block(*args, **kwargs):
    print("READY", flush=True)
    time.sleep(120)
if where == "write":      # the temporary file is fully written, not yet renamed
    pio.os.fsync = block
else:                     # the mechanism is running, nothing written yet
    cli.synthesize = cli.synthesize_chunks = block
sys.exit(cli.main(sys.argv[2:]))
"""


@pytest.mark.parametrize("sig, code, where", [(signal.SIGTERM, 143, "write"), (signal.SIGINT, 130, "write"),
                                              (signal.SIGTERM, 143, "run")])
def test_signal_ends_with_one_line_and_removes_partial_files(files, sig, code, where):
    tmp, real, schema = files
    out, report = tmp / "synth.csv", tmp / "report.json"
    out.write_bytes(b"old\n")
    budget.PrivacyLedger().ensure()  # made now: the child's first fsync must be its output's, not the new ledger's
    proc = subprocess.Popen([sys.executable, "-c", _CHILD, where, "synth", str(real), str(out), *SYNTH, "--schema",
                             str(schema), "--report", str(report), "--force"],
                            cwd=Path(__file__).resolve().parents[1], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)
    try:
        assert proc.stdout.readline().strip() == "READY"
        if where == "write":
            assert len(_leftovers(tmp)) == 3  # every temporary file (rows, manifest, report) is written, the first
            # fsync is blocked
        proc.send_signal(sig)
        _, err = proc.communicate(timeout=60)
    finally:
        proc.kill()
    assert proc.returncode == code
    assert err.strip().splitlines() == [f"error: interrupted ({sig.name}); unfinished files were removed"]
    assert out.read_bytes() == b"old\n" and not report.exists() and _leftovers(tmp) == []
    assert not (tmp / "synth.manifest.json").exists()


@pytest.mark.parametrize("sig, status", [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
def test_a_signal_while_the_command_is_still_importing_ends_with_one_line(sig, status):
    """The handlers of ``privsyn_core.__main__`` are in place before numpy loads: the signal is sent from inside
    the first ``import numpy`` of the run, so the test does not depend on timing."""
    child = textwrap.dedent(f"""
        import builtins, os, runpy, sys
        sys.argv = ["privsyn", "mechanisms"]
        original = builtins.__import__
        def signal_at_numpy(name, *args, **kwargs):
            if name == "numpy":
                builtins.__import__ = original
                os.kill(os.getpid(), {int(sig)})
            return original(name, *args, **kwargs)
        builtins.__import__ = signal_at_numpy
        runpy.run_module("privsyn_core", run_name="__main__", alter_sys=True)
    """)
    done = subprocess.run([sys.executable, "-c", child], capture_output=True, text=True, timeout=120,
                          cwd=Path(__file__).resolve().parents[1])
    assert done.returncode == status
    assert done.stderr.splitlines() == [f"error: interrupted ({sig.name}) while starting; nothing was written"]
    assert done.stdout == ""


@pytest.mark.parametrize("schema_file", sorted((Path(__file__).resolve().parents[1] / "assets").glob("*.schema.json")),
                         ids=lambda p: p.name)
def test_every_bundled_sample_runs_through_the_cli_with_its_published_schema(tmp_path, capsys, schema_file):
    """A new user's first command: a bundled sample and the schema file beside it."""
    data = schema_file.with_name(schema_file.name.replace(".schema.json", ".csv"))
    out = tmp_path / "out.csv"
    code = main(["synth", str(data), str(out), "--schema", str(schema_file), "--mechanism", "dp_histogram",
                 "--epsilon", "1", "--seed", "0"])
    assert code == 0, capsys.readouterr().err
    assert list(pd.read_csv(out).columns) == list(pd.read_csv(data, nrows=1).columns)


# -- the privacy ledger and the operator's budget (issue 25) -------------------------------------------------------
def test_synth_counts_every_release_in_the_ledger_and_the_operators_budget_refuses_the_next(files, capsys):
    tmp, real, schema = files
    ledger = tmp / "ops" / "ledger.sqlite"
    assert run_main(capsys, "budget", "init", "--ledger", ledger).returncode == 0
    again = run_main(capsys, "budget", "init", "--ledger", ledger)
    assert again.returncode == 2 and "already exists" in again.stderr
    assert run_main(capsys, "budget", "set", real, "1.5", "--ledger", ledger).returncode == 0
    args = ["synth", real, tmp / "out.csv", "--mechanism", "dp_histogram", "--epsilon", "1", "--schema", schema,
            "--ledger", ledger, "--force"]
    first = run_main(capsys, *args)
    assert first.returncode == 0 and "epsilon 1 spent on this data of the budget 1.5" in first.stdout
    (tmp / "out.csv").write_bytes(b"kept\n")
    refused = run_main(capsys, *args)
    assert refused.returncode == 2 and refused.stderr.count("\n") == 1
    assert "exceed its budget of 1.5" in refused.stderr and (tmp / "out.csv").read_bytes() == b"kept\n"
    shown = json.loads(run_main(capsys, "budget", "show", real, "--ledger", ledger, "--json").stdout)
    assert shown["budget"] == 1.5 and shown["totals"] == {"replace": 1.0} and shown["releases"] == 1
    assert shown["last"][0]["status"] == "spent" and "data" not in shown["last"][0], "no hash of the data is printed"


def test_synth_uses_the_documented_default_ledger_and_refuses_an_emptied_one(files, capsys, monkeypatch):
    tmp, real, schema = files
    monkeypatch.setenv("PRIVSYN_DATA_DIR", str(tmp / "default"))
    args = ["synth", real, tmp / "o.csv", "--mechanism", "dp_histogram", "--epsilon", "0.5", "--schema", schema,
            "--force"]
    assert run_main(capsys, *args).returncode == 0
    assert budget.PrivacyLedger().spent(budget.file_id(real)) == 0.5
    (tmp / "default" / "ledger.sqlite").write_bytes(b"")
    refused = run_main(capsys, *args)
    assert refused.returncode == 2 and "is empty" in refused.stderr and "budget init" in refused.stderr


@pytest.mark.parametrize("how", ["--ledger", "PRIVSYN_LEDGER"])
@pytest.mark.parametrize("named", ["typo/ledger.sqlite", "ledgr.sqlite"])
def test_a_mistyped_ledger_is_refused_with_one_line_and_never_made(files, capsys, monkeypatch, how, named):
    """Issue 37, item 8: a ledger in a missing folder, or a missing file, is refused (exit 2, one line) by every
    command, the reading ones included; nothing is created and no output written."""
    tmp, real, schema = files
    typo = tmp / named
    option = ["--ledger", typo] if how == "--ledger" else []
    if how == "PRIVSYN_LEDGER":
        monkeypatch.setenv("PRIVSYN_LEDGER", str(typo))
    before = sorted(tmp.rglob("*"))
    for command in (["budget", "show", real], ["budget", "set", real, "1.0"],
                    ["synth", real, tmp / "o.csv", *SYNTH, "--schema", schema]):
        refused = run_main(capsys, *command, *option)
        assert refused.returncode == 2 and refused.stderr.count("\n") == 1, (command, refused.stderr)
        assert "no privacy ledger at" in refused.stderr and "budget init" in refused.stderr
    assert sorted(tmp.rglob("*")) == before


def test_budget_show_never_makes_the_default_ledger(files, capsys):
    _, real, _ = files
    refused = run_main(capsys, "budget", "show", real)
    assert refused.returncode == 2 and "no privacy ledger at" in refused.stderr
    assert not budget.default_path().exists() and not budget.default_path().parent.exists()


@pytest.mark.parametrize("value", ["abc", "-1", "0", "inf", "nan", ""])
def test_every_budget_argument_error_is_one_line_with_exit_2(files, capsys, value):
    _, real, _ = files
    refused = run_main(capsys, "budget", "set", real, value)
    assert refused.returncode == 2 and refused.stderr.count("\n") == 1 and "Traceback" not in refused.stderr
    assert "a budget is a positive finite epsilon" in refused.stderr and repr(value) in refused.stderr
    for args in (["budget", "show", real, "--last", "x"], ["budget", "set", real], ["budget", "frobnicate"]):
        usage = run_main(capsys, *args)
        assert usage.returncode == 2 and usage.stderr.count("\n") == 1, usage.stderr


def test_a_deleted_default_ledger_refuses_every_command_until_budget_init(files):
    """Issue 37, item 8, through the real command line (a new process per command: nothing kept in memory)."""
    tmp, real, schema = files
    synth = ["synth", real, tmp / "o.csv", *SYNTH, "--schema", schema, "--force"]
    assert run_cli("budget", "set", real, "1.0").returncode == 0
    assert run_cli(*synth).returncode == 0
    for leftover in budget.default_path().parent.glob("ledger.sqlite*"):
        leftover.unlink()  # the ledger, alone in its folder, removed: its spends must not be forgotten silently
    for command in (synth, ["budget", "show", real], ["budget", "set", real, "5"]):
        refused = run_cli(*command)
        assert refused.returncode == 2 and "was made before and is gone" in refused.stderr, refused.stderr
        assert refused.stderr.count("\n") == 1
    assert run_cli("budget", "init").returncode == 0
    assert run_cli(*synth).returncode == 0


@pytest.mark.parametrize("key, option", [("epsilon", "--epsilon"), ("schema", "--schema"), ("mechanism", "--mechanism"),
                                         ("neighbouring", "--neighbouring"), ("n_synthetic", "--n-synthetic"),
                                         ("rng", "--seed"), ("public_n", "--public-n")])
def test_param_refuses_the_options_naming_the_real_one(files, capsys, key, option):
    tmp, real, schema = files
    out = run_main(capsys, "synth", real, tmp / "o.csv", "--mechanism", "dp_histogram", "--epsilon", "1", "--schema",
                   schema, "--param", f"{key}=3")
    assert out.returncode == 2 and f"use {option}" in out.stderr and out.stderr.count("\n") == 1


@pytest.mark.parametrize("value", ["-inf", "-1", "nan"])
def test_a_bad_epsilon_is_named(files, capsys, value):
    tmp, real, schema = files
    out = run_main(capsys, "synth", real, tmp / "o.csv", "--mechanism", "dp_histogram", "--epsilon", value,
                   "--schema", schema)
    assert out.returncode == 2 and "epsilon must be" in out.stderr and "expected one argument" not in out.stderr


def test_a_temporary_file_left_by_a_killed_writer_is_removed_by_the_next_write(tmp_path):
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    stale = tmp_path / f".out.csv.{int(dead.stdout)}.abc123.part"
    stale.write_bytes(b"half a file")
    live = tmp_path / f".out.csv.{os.getpid()}.def456.part"  # a write of a running process: left alone
    live.write_bytes(b"in progress")
    atomic_write(tmp_path / "out.csv", b"done")
    assert not stale.exists() and live.exists() and (tmp_path / "out.csv").read_bytes() == b"done"


def test_declared_decimals_give_the_same_csv_bytes_from_the_library_the_cli_and_the_app(files, capsys):
    """Issue 26, item 5: ``decimals`` is a schema field that synthesize honours, so every channel writes one CSV."""
    from privsyn_core.data.io import to_csv_bytes

    tmp, real, schema_file = files
    schema = {"columns": [{**SCHEMA["columns"][0], "decimals": 2}, *SCHEMA["columns"][1:]]}
    schema_file.write_text(json.dumps(schema))
    out = tmp / "cli.csv"
    assert run_main(capsys, "synth", real, out, "--mechanism", "dp_histogram", "--epsilon", "1", "--schema",
                    schema_file, "--seed", "4").returncode == 0
    result = ps.synthesize(pd.read_csv(real), "dp_histogram", 1.0, schema=schema, rng=4)
    assert to_csv_bytes(result.data) == out.read_bytes(), "the app's CSV builder writes the release's rows as is"
    values = pd.read_csv(out)["a"].to_numpy()
    assert np.array_equal(values, np.round(values, 2)) and not np.signbit(values[values == 0]).any()
    assert ps.Schema.from_dict(schema).to_dict()["columns"][0]["decimals"] == 2
    with pytest.raises(ps.SchemaError, match="non-integer numeric"):
        ps.Schema.from_dict({"columns": [{**SCHEMA["columns"][1], "decimals": 1}]})
    with pytest.raises(ps.SchemaError, match="whole number from 0"):
        ps.Schema.from_dict({"columns": [{**SCHEMA["columns"][0], "decimals": 1.5}]})
