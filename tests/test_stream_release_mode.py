"""Streams in release mode: the batch path's rule for values outside the schema (numbers clipped into their bounds,
missing, non-numeric or unlisted values replaced by the column's fallback), chosen when the stream is created,
kept in its state and stated in every step's release; no refusal quotes a value, a row number or a count.
Through the library and the command line (``python -m privsyn_core stream ...``)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import privsyn_core as ps
from privsyn_core import stream as stream_module
from privsyn_core.cli import main as cli_main
from privsyn_core.data.conform import DomainPolicy
from privsyn_core.errors import DataError, ParameterError, SchemaError, StreamError
from privsyn_core.stream import open_stream

SCHEMA = {"columns": [{"name": "a", "kind": "numeric", "lo": 0, "hi": 10},
                      {"name": "c", "kind": "categorical", "categories": ["u", "v", "w"]}]}
FALLBACKS = {"a": 2.5, "c": "w"}
#: Values no message may quote.
SECRETS = ("987654.321", "-4242.5", "secret-label")
RULE = DomainPolicy.of(ps.Schema.from_dict(SCHEMA), FALLBACKS).to_dict()


def _raw(n: int = 240, seed: int = 7) -> pd.DataFrame:
    """A batch with every kind of value outside the schema among ordinary ones (object columns, as a CSV with
    text in them is read)."""
    g = np.random.default_rng(seed)
    a = (g.random(n) * 10).astype(object)
    c = g.choice(["u", "v", "w"], n).astype(object)
    a[:6] = [987654.321, -4242.5, np.inf, -np.inf, None, "secret-label"]
    c[:4] = ["secret-label", None, "U", "x"]
    return pd.DataFrame({"a": a, "c": c})


def _mapped(raw: pd.DataFrame) -> pd.DataFrame:
    """The batch mapped by hand as the rule says: clip finite numbers, inf to its bound, the rest to fallbacks."""
    a = pd.to_numeric(raw["a"], errors="coerce").to_numpy(dtype=float)
    a = np.where(np.isnan(a), FALLBACKS["a"], np.clip(a, 0, 10))
    c = raw["c"].where(raw["c"].isin(["u", "v", "w"]), FALLBACKS["c"])
    return pd.DataFrame({"a": a, "c": c.astype(object)})


def test_a_release_mode_stream_maps_each_value_by_the_rule_and_refuses_none(tmp_path):
    """Step for step, the release-mode stream on the raw batches is the teaching stream on the batches mapped by
    the rule (same seed, so the same noise): the counts are those of the mapped records, none refused."""
    released = open_stream(tmp_path / "r.json", SCHEMA, 1.0, create=True, depth=4, rng=3, release_mode=True,
                           fallbacks=FALLBACKS)
    taught = open_stream(tmp_path / "t.json", SCHEMA, 1.0, create=True, depth=4, rng=3)
    with pytest.raises(DataError):
        taught.add(_raw(seed=1))  # the teaching stream refuses (quoting the value to the data holder)
    assert taught.step == 0
    for t in range(1, 4):
        one, other = released.add(_raw(seed=t)), taught.add(_mapped(_raw(seed=t)))
        assert one.params["step"] == other.params["step"] == t
        pd.testing.assert_frame_equal(one.data, other.data)
        np.testing.assert_array_equal(released.counters(), taught.counters())
        assert one.domain_policy == RULE and other.domain_policy is None
        assert one.to_dict()["domain_policy"] == RULE


def test_the_rule_is_fixed_at_creation_kept_in_the_state_and_stated_after_a_restart(tmp_path):
    path = tmp_path / "s.json"
    open_stream(path, SCHEMA, 1.0, create=True, depth=3, rng=0, release_mode=True).add(_raw())
    default = DomainPolicy.of(ps.Schema.from_dict(SCHEMA)).to_dict()
    assert json.loads(path.read_text())["domain_policy"] == default
    again = open_stream(path, SCHEMA, 1.0)
    assert again.release().domain_policy == default and again.report()["domain_policy"] == default
    assert again.add(_raw(seed=2)).domain_policy == default
    with pytest.raises(ParameterError, match="fixed when a stream is created"):
        open_stream(path, release_mode=True)
    with pytest.raises(ParameterError, match="fixed when a stream is created"):
        open_stream(path, fallbacks=FALLBACKS)
    with pytest.raises(ParameterError, match="fallbacks go with release_mode=True"):
        open_stream(tmp_path / "f.json", SCHEMA, 1.0, create=True, depth=3, fallbacks=FALLBACKS)
    with pytest.raises(SchemaError, match="not one of its categories"):
        open_stream(tmp_path / "g.json", SCHEMA, 1.0, create=True, depth=3, release_mode=True, fallbacks={"c": "z"})
    assert not (tmp_path / "f.json").exists() and not (tmp_path / "g.json").exists()


def test_a_state_whose_rule_was_altered_is_refused_as_corrupted(tmp_path):
    path = tmp_path / "s.json"
    open_stream(path, SCHEMA, 1.0, create=True, depth=3, rng=0, release_mode=True, fallbacks=FALLBACKS)
    body = json.loads(path.read_text())
    body.pop("checksum")
    body["domain_policy"]["fallbacks"]["a"] = 99.0  # outside the bounds
    path.write_text(json.dumps({**body, "checksum": stream_module._checksum(body)}))
    with pytest.raises(StreamError, match="corrupted"):
        open_stream(path)


def test_no_refusal_in_release_mode_quotes_a_value_a_row_or_a_count(tmp_path):
    stream = open_stream(tmp_path / "s.json", SCHEMA, 1.0, create=True, depth=3, rng=0, release_mode=True)
    raw = _raw(n=237)
    for batch in (raw[["a"]], raw.rename(columns={"c": "C"})):  # a missing column: the only refusal on a batch
        with pytest.raises(DataError) as refused:
            stream.add(batch)
        message = str(refused.value)
        assert "\n" not in message and not any(s in message for s in SECRETS) and "237" not in message
        assert "row" not in message.split(";")[0]
    assert stream.step == 0


def _files(tmp_path: Path) -> Path:
    (tmp_path / "schema.json").write_text(json.dumps(SCHEMA))
    _raw(seed=1).to_csv(tmp_path / "b1.csv", index=False)
    return tmp_path


def test_the_command_line_creates_a_release_mode_stream_and_states_its_rule(tmp_path, capsys):
    f = _files(tmp_path)
    st = str(f / "st.json")
    base = ["stream", "open", st, "--schema", str(f / "schema.json"), "--epsilon", "1", "--depth", "4", "--seed", "3"]
    assert cli_main([*base, "--fallback", "c=w"]) == 2, "--fallback needs --release-mode"
    assert "--fallback applies with --release-mode only" in capsys.readouterr().err
    assert cli_main([*base, "--release-mode", "--fallback", "a=2.5", "--fallback", "c=w"]) == 0
    assert "release mode" in capsys.readouterr().out
    assert cli_main(["stream", "add", st, str(f / "b1.csv"), str(f / "o.csv"), "--report", str(f / "r.json")]) == 0
    printed = capsys.readouterr()
    assert not any(s in printed.out + printed.err for s in SECRETS)
    report = json.loads((f / "r.json").read_text())
    assert report["domain_policy"] == RULE and report["params"]["step"] == 1
    assert not any(s in (f / "r.json").read_text() + (f / "o.csv").read_text() for s in SECRETS)
    expected = open_stream(f / "t.json", SCHEMA, 1.0, create=True, depth=4, rng=3).add(_mapped(_raw(seed=1)))
    pd.testing.assert_frame_equal(pd.read_csv(f / "o.csv"), expected.data, check_dtype=False)


def test_python_m_privsyn_core_stream_in_release_mode(tmp_path):
    f = _files(tmp_path)
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1])}
    run = [sys.executable, "-m", "privsyn_core", "stream"]
    st = str(f / "st.json")
    subprocess.run([*run, "open", st, "--schema", str(f / "schema.json"), "--epsilon", "1", "--depth", "4",
                    "--release-mode"], check=True, env=env, capture_output=True)
    done = subprocess.run([*run, "add", st, str(f / "b1.csv"), str(f / "o.csv")], env=env, capture_output=True,
                          text=True)
    assert done.returncode == 0 and "step 1" in done.stdout, done.stderr
    assert not any(s in done.stdout + done.stderr for s in SECRETS)
    (f / "cols.csv").write_text("a\n987654.321\n-4242.5\n")
    bad = subprocess.run([*run, "add", st, str(f / "cols.csv"), str(f / "o2.csv")], env=env, capture_output=True,
                         text=True)
    assert bad.returncode == 2 and bad.stderr.count("\n") == 1 and "column" in bad.stderr
    assert not any(s in bad.stderr for s in SECRETS) and not (f / "o2.csv").exists()
