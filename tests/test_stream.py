"""The stream object (:mod:`privsyn_core.stream`) and its commands (``python -m privsyn_core stream ...``):
persistence across restarts, no fresh noise on released counters, bad input as one line with nothing changed."""

from __future__ import annotations

import hashlib
import json
import math
import os
import sqlite3
import subprocess
import sys
from contextlib import closing
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import privsyn_core as ps
from privsyn_core import stream as stream_module
from privsyn_core.cli import main as cli_main
from privsyn_core.errors import DataError, ParameterError, PrivsynError, StreamError
from privsyn_core.result import Release
from privsyn_core.stream import open_stream

SCHEMA = {"columns": [{"name": "a", "kind": "numeric", "lo": 0, "hi": 10},
                      {"name": "b", "kind": "numeric", "lo": 0, "hi": 1}]}


def _batch(t: int, n: int = 200) -> pd.DataFrame:
    g = np.random.default_rng(100 + t)
    return pd.DataFrame({"a": g.random(n) * 10, "b": g.random(n) ** 2})


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.fixture
def state(tmp_path):
    return tmp_path / "stream.json"


def test_add_returns_a_release_with_the_whole_stream_ledger(state):
    stream = open_stream(state, SCHEMA, 1.0, create=True, depth=6, rng=1)
    for t in range(1, 4):
        release = stream.add(_batch(t))
        assert isinstance(release, Release)
        assert release.params["step"] == t and stream.step == t
        assert math.fsum(e for _, e in release.ledger) == 1.0 == release.epsilon
        assert list(release.data.columns) == ["a", "b"]
        assert release.data["a"].between(0, 10).all() and release.data["b"].between(0, 1).all()
    assert release.seed == 1


def test_a_restart_continues_the_stream_exactly(state, tmp_path):
    """Closing and reopening between steps gives the very release of an uninterrupted stream."""
    other = tmp_path / "other.json"
    one = open_stream(state, SCHEMA, 1.0, create=True, depth=5, rng=4)
    two = open_stream(other, SCHEMA, 1.0, create=True, depth=5, rng=4)
    for t in range(1, 6):
        r1 = one.add(_batch(t))
        two = open_stream(other, SCHEMA, 1.0)  # a new process next month
        r2 = two.add(_batch(t))
        assert r1.data.equals(r2.data)
    assert np.array_equal(one.counters(), two.counters())


def test_a_second_release_of_a_step_returns_the_same_counters_and_rows(state):
    stream = open_stream(state, SCHEMA, 1.0, create=True, depth=5)  # secure generator
    first = stream.add(_batch(1))
    counters = stream.counters()
    again = open_stream(state).release()
    assert again.data.equals(first.data) and np.array_equal(stream.counters(), counters)
    assert first.seed is None and again.seed is None


def test_a_restored_copy_recomputes_the_same_noise_instead_of_fresh_noise(state, tmp_path):
    """Re-adding a step on a backup of the state (the replay attack) reproduces the release bit for bit."""
    stream = open_stream(state, SCHEMA, 1.0, create=True, depth=5)
    stream.add(_batch(1))
    backup = state.read_bytes()
    second = stream.add(_batch(2))
    state.write_bytes(backup)
    replayed = open_stream(state).add(_batch(2))
    assert replayed.data.equals(second.data)


def test_secure_streams_do_not_share_noise(tmp_path):
    releases = [open_stream(tmp_path / f"s{i}.json", SCHEMA, 1.0, create=True, depth=5).add(_batch(1))
                for i in range(2)]
    assert not releases[0].data.equals(releases[1].data)


def test_horizon_n_sets_the_paper_depth(state):
    stream = open_stream(state, SCHEMA, 0.5, create=True, horizon_n=40_000)
    assert stream.plan.depth == math.floor(math.log2(0.5 * 40_000))
    assert stream.add(_batch(1)).params["horizon_n"] == 40_000


def test_horizon_steps_accounts_for_the_counters_noise(state):
    """PMM's depth for epsilon / g(T), g the counter's noise inflation at step T (about log^1.5 T)."""
    from privsyn_core.mechanisms.online.online_pmm import counter_inflation, paper_depth

    stream = open_stream(state, SCHEMA, 1.0, create=True, horizon_n=100_000, horizon_steps=48)
    assert stream.plan.depth == paper_depth(100_000, 1.0 / counter_inflation(48), 2) < 16
    assert stream.add(_batch(1)).params["horizon_steps"] == 48
    assert 11 < counter_inflation(48) < 12


def test_the_release_holds_no_secret(state):
    stream = open_stream(state, SCHEMA, 1.0, create=True, depth=4)
    release = stream.add(_batch(1))
    text = json.dumps(release.to_dict(), default=str)
    key = json.loads(state.read_text())["key"]
    assert key not in text and "block_true" not in text and "alpha" not in text
    assert set(release.params) == {"depth", "depth_rule", "step", "leaves", "resolution", "counter", "consistency",
                                   "sample", "synthetic_size", "n_synthetic", "privacy_unit"}
    assert oct(state.stat().st_mode & 0o777) == "0o600"


@pytest.mark.parametrize("bad,error", [
    (pd.DataFrame({"a": [11.0], "b": [0.5]}), DataError),     # outside the public bounds
    (pd.DataFrame({"a": [1.0]}), PrivsynError),                # a column missing
    (pd.DataFrame({"a": [np.nan], "b": [0.5]}), DataError),    # missing value
    (pd.DataFrame({"a": ["x"], "b": [0.5]}), DataError),       # text in a numeric column
])
def test_a_bad_batch_is_one_line_and_changes_nothing(state, bad, error):
    stream = open_stream(state, SCHEMA, 1.0, create=True, depth=4, rng=0)
    stream.add(_batch(1))
    before = _digest(state)
    with pytest.raises(error) as info:
        stream.add(bad)
    assert "\n" not in str(info.value)
    assert _digest(state) == before and stream.step == 1
    assert sorted(os.listdir(state.parent)) == ["stream.json"]


def test_bad_states_are_refused_with_one_line(state, tmp_path):
    with pytest.raises(StreamError, match="no stream state"):
        open_stream(tmp_path / "missing.json")
    open_stream(state, SCHEMA, 1.0, create=True, depth=4, rng=0).add(_batch(1))
    before = _digest(state)
    other_schema = {"columns": [{"name": "a", "lo": 0, "hi": 20}, {"name": "b", "lo": 0, "hi": 1}]}
    with pytest.raises(StreamError, match="another schema"):
        open_stream(state, other_schema, 1.0)
    with pytest.raises(StreamError, match="epsilon"):
        open_stream(state, SCHEMA, 2.0)
    with pytest.raises(StreamError, match="already exists"):
        open_stream(state, SCHEMA, 1.0, create=True, depth=4)
    with pytest.raises(ParameterError):
        open_stream(state, SCHEMA, 1.0, depth=3)
    assert _digest(state) == before


@pytest.mark.parametrize("damage", ["flip", "truncate", "edit_step", "not_json"])
def test_a_corrupted_state_is_refused_and_left_alone(state, damage):
    open_stream(state, SCHEMA, 1.0, create=True, depth=4, rng=0).add(_batch(1))
    raw = state.read_bytes()
    if damage == "flip":
        i = raw.index(b'"log_noisy": "') + 20
        raw = raw[:i] + bytes([raw[i] ^ 1]) + raw[i + 1:]
    elif damage == "truncate":
        raw = raw[:len(raw) // 2]
    elif damage == "edit_step":
        raw = raw.replace(b'"step": 1', b'"step": 0')
    else:
        raw = b"\x00\xff garbage"
    state.write_bytes(raw)
    with pytest.raises(StreamError, match=r"corrupted|not a privsyn"):
        open_stream(state).add(_batch(2))
    assert state.read_bytes() == raw


@pytest.mark.parametrize("step", [1, 4, 5, 8, 100])
def test_an_edited_step_with_a_recomputed_checksum_is_refused_with_one_line(tmp_path, capsys, step):
    """Issue 37, item 4: the checksum catches damage, not edits; a step that does not match the counters' binary
    levels is refused (it raised IndexError in the counter), through the library and the CLI (exit 2)."""
    f = _files(tmp_path)
    state = f / "st.json"
    stream = open_stream(state, SCHEMA, 1.0, create=True, depth=4, rng=0)
    for t in range(3):
        stream.add(_batch(t, 20))
    body = json.loads(state.read_text())
    body["step"] = step
    body["checksum"] = stream_module._checksum({k: v for k, v in body.items() if k != "checksum"})
    state.write_text(json.dumps(body))
    with pytest.raises(StreamError, match="corrupted"):
        open_stream(state)
    capsys.readouterr()
    assert cli_main(["stream", "add", str(state), str(f / "b1.csv"), str(f / "o.csv")]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: ") and "corrupted" in err and "\n" not in err


@pytest.mark.parametrize("kind", ["/dev/zero", "fifo", "folder"])
def test_a_state_that_is_not_a_regular_file_is_refused_without_reading_it(tmp_path, capsys, kind):
    """Issue 37, item 4: a state path linked to /dev/zero read without bound; a FIFO would wait for a writer."""
    f = _files(tmp_path)
    state = f / "st.json"
    if kind == "/dev/zero":
        state.symlink_to("/dev/zero")
    elif kind == "fifo":
        os.mkfifo(state)
    else:
        state.mkdir()
    with pytest.raises(StreamError, match="not a regular file"):
        open_stream(state)
    for argv in (["status", str(state)], ["add", str(state), str(f / "b1.csv"), str(f / "o.csv")],
                 ["release", str(state), str(f / "o.csv")]):
        assert cli_main(["stream", *argv]) == 2
        err = capsys.readouterr().err.strip()
        assert "not a regular file" in err and "\n" not in err


@pytest.mark.parametrize("kwargs", [{}, {"depth": 3, "horizon_n": 10}, {"depth": 99}, {"depth": 3, "rng": -1},
                                    {"horizon_n": 0}, {"depth": 3, "horizon_steps": 5},
                                    {"horizon_n": 100, "horizon_steps": 0}])
def test_bad_creation_parameters(tmp_path, kwargs):
    with pytest.raises(PrivsynError):
        open_stream(tmp_path / "s.json", SCHEMA, 1.0, create=True, **kwargs)
    assert not (tmp_path / "s.json").exists()


def test_a_stream_refuses_a_schema_read_off_the_data(tmp_path):
    with pytest.raises(PrivsynError):
        open_stream(tmp_path / "s.json", None, 1.0, create=True, depth=3)


def test_empty_batches_are_steps_without_records(state):
    stream = open_stream(state, SCHEMA, 1.0, create=True, depth=3, rng=2)
    release = stream.add(_batch(0).iloc[:0])
    assert release.params["step"] == 1


def test_batches_in_blocks_count_like_one_frame(tmp_path):
    whole = open_stream(tmp_path / "a.json", SCHEMA, 1.0, create=True, depth=5, rng=3).add(_batch(1))
    blocks = open_stream(tmp_path / "b.json", SCHEMA, 1.0, create=True, depth=5, rng=3)
    frame = _batch(1)
    assert blocks.add(iter([frame.iloc[:70], frame.iloc[70:]])).data.equals(whole.data)


def test_a_dask_batch_is_counted_where_it_lies(tmp_path):
    dd = pytest.importorskip("dask.dataframe")
    import dask

    frame = _batch(1, 1000)
    whole = open_stream(tmp_path / "a.json", SCHEMA, 1.0, create=True, depth=6, rng=3).add(frame)
    with dask.config.set(scheduler="synchronous"):
        lazy = open_stream(tmp_path / "b.json", SCHEMA, 1.0, create=True, depth=6, rng=3).add(
            dd.from_pandas(frame, npartitions=4))
    assert lazy.data.equals(whole.data)


# -- the command line ---------------------------------------------------------------------------------------
def _files(tmp_path: Path) -> Path:
    (tmp_path / "schema.json").write_text(json.dumps(SCHEMA))
    for t in range(3):
        _batch(t).to_csv(tmp_path / f"b{t}.csv", index=False)
    pd.DataFrame({"a": [11.0], "b": [0.5]}).to_csv(tmp_path / "bad.csv", index=False)
    return tmp_path


def test_cli_open_add_release_status(tmp_path, capsys):
    f = _files(tmp_path)
    st = str(f / "st.json")
    assert cli_main(["stream", "open", st, "--schema", str(f / "schema.json"), "--epsilon", "1", "--depth", "5",
                     "--seed", "3"]) == 0
    for t in range(2):
        assert cli_main(["stream", "add", st, str(f / f"b{t}.csv"), str(f / f"o{t}.csv"),
                         "--report", str(f / f"r{t}.json")]) == 0
    report = json.loads((f / "r1.json").read_text())
    assert report["params"]["step"] == 2 and math.fsum(e for _, e in report["ledger"]) == 1.0
    assert cli_main(["stream", "release", st, str(f / "again.csv")]) == 0
    assert (f / "again.csv").read_bytes() == (f / "o1.csv").read_bytes()
    capsys.readouterr()
    assert cli_main(["stream", "status", st, "--json"]) == 0
    status = json.loads(capsys.readouterr().out)
    assert status["step"] == 2 and status["epsilon"] == 1.0 and "key" not in status and "counter" not in status


def test_cli_errors_are_one_line_exit_2_and_change_nothing(tmp_path, capsys):
    f = _files(tmp_path)
    st = f / "st.json"
    assert cli_main(["stream", "open", str(st), "--schema", str(f / "schema.json"), "--epsilon", "1",
                     "--depth", "4"]) == 0
    assert cli_main(["stream", "add", str(st), str(f / "b0.csv"), str(f / "o0.csv")]) == 0
    before = _digest(st)
    capsys.readouterr()
    cases = [
        ["stream", "add", str(st), str(f / "bad.csv"), str(f / "x.csv")],              # batch outside the schema
        ["stream", "add", str(f / "none.json"), str(f / "b1.csv"), str(f / "x.csv")],  # missing state
        ["stream", "add", str(st), str(f / "b1.csv"), str(f / "o0.csv")],              # output exists
        ["stream", "add", str(st), str(f / "b1.csv"), str(st)],                        # output is the state
        ["stream", "open", str(st), "--schema", str(f / "schema.json"), "--epsilon", "1", "--depth", "4"],
        ["stream", "open", str(f / "n.json"), "--schema", str(f / "schema.json"), "--epsilon", "0", "--depth", "4"],
        ["stream", "add", str(st)],                                                    # usage
    ]
    for argv in cases:
        assert cli_main(argv) == 2, argv
        err = capsys.readouterr().err.strip()
        assert err.startswith("error: ") and "\n" not in err, (argv, err)
    assert _digest(st) == before and not (f / "x.csv").exists() and not (f / "n.json").exists()


def test_cli_runs_as_a_module(tmp_path):
    f = _files(tmp_path)
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1])}
    run = [sys.executable, "-m", "privsyn_core", "stream"]
    st = str(f / "st.json")
    subprocess.run([*run, "open", st, "--schema", str(f / "schema.json"), "--epsilon", "1", "--horizon-n", "600"],
                   check=True, env=env, capture_output=True)
    done = subprocess.run([*run, "add", st, str(f / "b0.csv"), str(f / "o.csv")], env=env, capture_output=True,
                          text=True)
    assert done.returncode == 0 and "step 1" in done.stdout
    bad = subprocess.run([*run, "add", st, str(f / "bad.csv"), str(f / "o2.csv")], env=env, capture_output=True,
                         text=True)
    assert bad.returncode == 2 and bad.stderr.count("\n") == 1 and "outside its public bounds" in bad.stderr
    assert list(ps.Schema.from_dict(SCHEMA).names) == list(pd.read_csv(f / "o.csv").columns)


def test_a_busy_stream_is_refused(state):
    """Another process holding the step's lock: one line, nothing changed (no lost update)."""
    import fcntl

    stream = open_stream(state, SCHEMA, 1.0, create=True, depth=3, rng=0)
    before = _digest(state)
    fd = os.open(state, os.O_RDONLY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        with pytest.raises(StreamError, match="another process"):
            stream.add(_batch(1))
    finally:
        os.close(fd)
    assert _digest(state) == before
    assert stream.add(_batch(1)).params["step"] == 1


def test_a_failed_write_leaves_the_old_state_and_no_temporary_file(state, monkeypatch):
    stream = open_stream(state, SCHEMA, 1.0, create=True, depth=3, rng=0)
    stream.add(_batch(1))
    before = _digest(state)

    def full_disk(src, dst):
        raise OSError(28, "No space left on device")
    monkeypatch.setattr(os, "replace", full_disk)
    with pytest.raises(PrivsynError, match="left unchanged"):
        stream.add(_batch(2))
    monkeypatch.undo()
    assert _digest(state) == before and sorted(os.listdir(state.parent)) == ["stream.json"]
    assert open_stream(state).add(_batch(2)).params["step"] == 2


# -- streams bound to the ledger (issue 37, item 4) ----------------------------------------------------------------

def _cli_stream(f: Path, name: str, seed: str = "3") -> str:
    state = str(f / name)
    assert cli_main(["stream", "open", state, "--schema", str(f / "schema.json"), "--epsilon", "1", "--depth", "4",
                     "--seed", seed]) == 0
    return state


def _one_more(f: Path) -> Path:
    """Batch b0 plus one record: its neighbour under the stream's relation."""
    out = f / "b0plus.csv"
    pd.concat([pd.read_csv(f / "b0.csv"), pd.DataFrame({"a": [5.0], "b": [0.5]})]).to_csv(out, index=False)
    return out


def test_a_copied_state_cannot_release_a_step_again_on_another_batch(tmp_path, capsys):
    """A copy of the state shares the stream's noise: releasing step 1 on b0 from one copy and on b0 plus one
    record from the other would publish two releases that differ by exactly that record.  The second is refused."""
    f = _files(tmp_path)
    state = _cli_stream(f, "st.json")
    copy = f / "copy.json"
    copy.write_bytes(Path(state).read_bytes())
    assert cli_main(["stream", "add", state, str(f / "b0.csv"), str(f / "o.csv")]) == 0
    capsys.readouterr()
    assert cli_main(["stream", "add", str(copy), str(_one_more(f)), str(f / "fork.csv")]) == 2
    err = capsys.readouterr().err.strip()
    assert "step 1 of the stream" in err and "already released on another batch" in err and "\n" not in err
    assert not (f / "fork.csv").exists() and open_stream(copy).step == 0
    assert cli_main(["stream", "add", str(copy), str(f / "b0.csv"), str(f / "again.csv")]) == 0  # the recorded batch
    assert (f / "again.csv").read_bytes() == (f / "o.csv").read_bytes(), "the same release, no fresh noise"


def test_detection_case_an_unbound_copy_releases_one_step_twice_with_the_same_noise(tmp_path):
    """What the binding prevents: two copies of a stream made without a ledger release step 1 on neighbouring
    batches, and their released counts differ by exactly the one record (one cell per level, by one)."""
    f = _files(tmp_path)
    state = tmp_path / "free.json"
    open_stream(state, SCHEMA, 1.0, create=True, depth=4, rng=3)
    copy = tmp_path / "free-copy.json"
    copy.write_bytes(state.read_bytes())
    open_stream(state).add(pd.read_csv(f / "b0.csv"))
    open_stream(copy).add(pd.read_csv(_one_more(f)))
    difference = open_stream(copy).counters() - open_stream(state).counters()
    assert sorted(set(difference.tolist())) == [0, 1] and difference.sum() == 5, "one cell of each of 5 levels"


_CRASH = """
import os, sys
from privsyn_core import cli, stream, stream_cli
if sys.argv[1] == "before the output":
    stream_cli._write = lambda *args, **kwargs: os._exit(9)
else:
    stream._save = lambda *args, **kwargs: os._exit(9)
sys.exit(cli.main(sys.argv[2:]))
"""


@pytest.mark.parametrize("where", ["before the output", "before the state"])
def test_a_stream_add_killed_mid_step_re_emits_the_same_release_when_run_again(tmp_path, capsys, where):
    """``stream add`` killed after the step is recorded (before the state is saved, or after it and before the
    output is written): running it again with the same batch writes the release the step would have had, and the
    stream stays at step 1 (the batch is not counted twice); another batch is then a new step."""
    f = _files(tmp_path)
    state, twin = _cli_stream(f, "st.json"), _cli_stream(f, "twin.json")  # twin: the same seed, no crash
    assert cli_main(["stream", "add", twin, str(f / "b0.csv"), str(f / "expected.csv")]) == 0
    add = ["stream", "add", state, str(f / "b0.csv"), str(f / "o.csv")]
    killed = subprocess.run([sys.executable, "-c", _CRASH, where, *add], capture_output=True, text=True,
                            cwd=Path(__file__).resolve().parents[1], timeout=120)
    assert killed.returncode == 9 and not (f / "o.csv").exists()
    assert open_stream(state).step == (1 if where == "before the output" else 0)
    capsys.readouterr()
    assert cli_main(add) == 0 and "step 1" in capsys.readouterr().out
    assert (f / "o.csv").read_bytes() == (f / "expected.csv").read_bytes() and open_stream(state).step == 1
    assert cli_main(["stream", "add", state, str(f / "b1.csv"), str(f / "o2.csv")]) == 0
    assert open_stream(state).step == 2


def test_stream_open_with_a_mistyped_ledger_is_refused_and_makes_nothing(tmp_path, capsys):
    f = _files(tmp_path)
    before = sorted(f.rglob("*"))
    assert cli_main(["stream", "open", str(f / "s.json"), "--schema", str(f / "schema.json"), "--epsilon", "1",
                     "--depth", "3", "--ledger", str(f / "typo" / "ledger.sqlite")]) == 2
    err = capsys.readouterr().err.strip()
    assert "no privacy ledger at" in err and "\n" not in err and sorted(f.rglob("*")) == before


def test_a_bound_stream_refuses_a_ledger_that_does_not_know_it(tmp_path, capsys):
    """The stream's step 0 is recorded with its reservation, in one transaction: a ledger started again (budget init
    --force), or another file at its path, has lost the steps a fork is checked against, so nothing is added."""
    f = _files(tmp_path)
    state = _cli_stream(f, "st.json")
    assert cli_main(["stream", "add", state, str(f / "b0.csv"), str(f / "o.csv")]) == 0
    assert cli_main(["budget", "init", "--force"]) == 0
    capsys.readouterr()
    assert cli_main(["stream", "add", state, str(f / "b1.csv"), str(f / "o1.csv")]) == 2
    err = capsys.readouterr().err.strip()
    assert "has no record of this stream" in err and "\n" not in err and open_stream(state).step == 1


def test_a_creation_handed_back_leaves_no_stream_in_the_ledger(tmp_path):
    ledger = ps.PrivacyLedger.create(tmp_path / "ledger.sqlite")
    (tmp_path / "taken.json").write_text("{}")
    with pytest.raises(StreamError, match="already exists"):
        open_stream(tmp_path / "taken.json", SCHEMA, 1.0, create=True, depth=3, ledger=ledger)
    with closing(sqlite3.connect(ledger.path)) as db:
        assert db.execute("select count(*) from stream_steps").fetchone() == (0,)
        assert db.execute("select count(*) from spends").fetchone() == (0,)


def test_two_copies_adding_at_once_release_the_step_once(tmp_path):
    """Two writers on two copies of one state, released together: the ledger's transaction lets one batch through."""
    import threading

    ledger = ps.PrivacyLedger.create(tmp_path / "ledger.sqlite")
    first = tmp_path / "a.json"
    open_stream(first, SCHEMA, 1.0, create=True, depth=3, rng=0, ledger=ledger)
    second = tmp_path / "b.json"
    second.write_bytes(first.read_bytes())
    barrier, outcomes = threading.Barrier(2), []

    def add(state: Path, batch: pd.DataFrame) -> None:
        stream = open_stream(state)
        barrier.wait()
        try:
            outcomes.append(stream.add(batch).params["step"])
        except StreamError:
            outcomes.append("refused")
    writers = [threading.Thread(target=add, args=(first, _batch(1, 30))),
               threading.Thread(target=add, args=(second, _batch(1, 31)))]
    for w in writers:
        w.start()
    for w in writers:
        w.join()
    assert sorted(outcomes, key=str) == [1, "refused"]


def test_the_same_batch_added_after_its_release_was_published_is_a_new_step(tmp_path):
    """Only an unpublished step is re-emitted: a batch repeated on purpose (say, an empty day after an empty day)
    is a step of its own."""
    ledger = ps.PrivacyLedger.create(tmp_path / "ledger.sqlite")
    stream = open_stream(tmp_path / "s.json", SCHEMA, 1.0, create=True, depth=3, rng=0, ledger=ledger)
    empty = _batch(1, 0)
    assert [stream.add(empty).params["step"] for _ in range(3)] == [1, 2, 3]


def test_the_whole_streams_epsilon_is_counted_once_in_the_privacy_ledger(tmp_path):
    """Issue 25 meets issue 29: a stream reserves its epsilon when it is created, against the dataset's budget."""
    ledger = ps.PrivacyLedger.create(tmp_path / "ledger" / "ledger.sqlite")
    ledger.set_budget("clinic", 1.5)
    stream = open_stream(tmp_path / "s.json", SCHEMA, 1.0, create=True, depth=4, rng=0, ledger=ledger,
                         dataset="clinic")
    for t in range(3):
        stream.add(_batch(t))
    assert ledger.spent("clinic") == 1.0 and ledger.count("clinic") == 1, "every step is inside the one epsilon"
    with pytest.raises(ps.BudgetExceeded):
        open_stream(tmp_path / "t.json", SCHEMA, 1.0, create=True, depth=4, rng=0, ledger=ledger, dataset="clinic")
    assert not (tmp_path / "t.json").exists() and ledger.spent("clinic") == 1.0
    with pytest.raises(ParameterError, match="go with create=True"):
        open_stream(tmp_path / "s.json", ledger=ledger)


# -- format versions and the growing depth -----------------------------------------------------------------------
V1 = Path(__file__).parent / "data" / "stream" / "v1_depth4_step3.json"


def _batch40(t: int) -> pd.DataFrame:
    return _batch(t, 40)


def test_a_version_1_state_continues_with_the_same_noise_and_is_written_as_version_4(tmp_path):
    """A state written by format version 1 (fixed depth, one counter): step 4 releases exactly the counters that
    version 1 released (recorded with it), so a backup restored across the upgrade gets no fresh noise; its rows,
    post-processing of those counters, are pinned by the hash of the current leaf sampler."""
    expected = json.loads(V1.with_suffix(".expected.json").read_text())
    state = tmp_path / "v1.json"
    state.write_bytes(V1.read_bytes())
    stream = open_stream(state, SCHEMA, 1.0)
    assert (stream.step, stream.depth, stream.opened) == (3, 4, [1] * 5)
    release = stream.add(_batch40(4))
    assert stream.counters().tolist() == expected["counters_step4"]
    assert hashlib.sha256(release.data.to_csv(index=False).encode()).hexdigest() == expected["rows_sha256_step4"]
    written = json.loads(state.read_text())
    assert written["version"] == 4 and written["binding"] is None, "an earlier stream was not bound to a ledger"
    assert written["domain_policy"] is None, "an earlier stream refuses values outside its schema"
    assert open_stream(state).release().data.equals(release.data)


def test_a_state_of_an_unknown_version_is_refused_with_one_line(state):
    open_stream(state, SCHEMA, 1.0, create=True, depth=3, rng=0).add(_batch(1))
    body = json.loads(state.read_text())
    body["version"] = 5
    state.write_text(json.dumps(body))
    with pytest.raises(StreamError, match="format version 5; this library reads versions 1, 2, 3, 4") as info:
        open_stream(state)
    assert "\n" not in str(info.value)


def test_a_growing_stream_opens_levels_as_its_released_total_grows(state, tmp_path):
    stream = open_stream(state, SCHEMA, 1.0, create=True, growing=True, rng=5)
    assert len(stream.ledger) == 42 and math.fsum(e for _, e in stream.ledger) == 1.0
    depths = []
    for t in range(1, 7):
        release = stream.add(_batch(t, 100 * 2 ** t))
        params = release.params
        assert params["depth"] == len(params["opened"]) - 1 == stream.depth and params["leaves"] == 2 ** stream.depth
        assert params["depth_rule"] == "growing" and params["max_depth"] == 20
        depths.append(params["depth"])
    assert depths == sorted(depths) and depths[-1] > depths[0] and max(stream.opened) > 1
    assert stream.report()["params"]["opened"] == stream.opened
    copy = tmp_path / "copy.json"  # a restart, and a replayed step: the same counters
    copy.write_bytes(state.read_bytes())
    again = open_stream(copy).add(_batch(7, 100))
    assert again.data.equals(stream.add(_batch(7, 100)).data)
    assert np.array_equal(open_stream(copy).counters(), stream.counters())


@pytest.mark.parametrize("kwargs", [{"growing": True, "depth": 3}, {"growing": True, "horizon_n": 100},
                                    {"growing": True, "horizon_steps": 5}, {"growing": "yes"}])
def test_bad_growing_parameters(tmp_path, kwargs):
    with pytest.raises(PrivsynError):
        open_stream(tmp_path / "s.json", SCHEMA, 1.0, create=True, **kwargs)
    assert not (tmp_path / "s.json").exists()


def test_a_state_with_inconsistent_groups_is_refused(state):
    """Groups that skip a level or open after the current step, even with a valid checksum: corrupted."""
    from privsyn_core.stream import _checksum

    stream = open_stream(state, SCHEMA, 1.0, create=True, growing=True, rng=0)
    for t in range(1, 4):
        stream.add(_batch(t, 2000))
    good = json.loads(state.read_text())
    assert len(good["groups"]) >= 2
    for damage in ("skip", "late"):
        body = json.loads(json.dumps(good))
        if damage == "skip":
            body["groups"][1]["first"] += 1
        else:
            body["groups"][-1]["opened"] = body["step"] + 1
        body.pop("checksum")
        state.write_text(json.dumps({**body, "checksum": _checksum(body)}))
        with pytest.raises(StreamError, match="corrupted"):
            open_stream(state)


def test_cli_opens_a_growing_stream(tmp_path, capsys):
    f = _files(tmp_path)
    st = str(f / "st.json")
    assert cli_main(["stream", "open", st, "--schema", str(f / "schema.json"), "--epsilon", "1", "--growing",
                     "--seed", "2"]) == 0
    assert "depth growing up to 20" in capsys.readouterr().out
    assert cli_main(["stream", "add", st, str(f / "b0.csv"), str(f / "o0.csv")]) == 0
    assert cli_main(["stream", "status", st]) == 0
    assert "depth " in capsys.readouterr().out
