"""One dataset identity and release mode through the library and the CLI (issue 37, items 2 and 3).

* The seven versions of one table that each got a fresh budget (CRLF line endings, no trailing newline, rows
  reversed, an extra unused column, another float format, columns reordered, and the table itself) have one
  identity, in memory and as files; a changed record is another dataset (the detection case).
* ``budget set DATA.csv`` binds the CLI's ``synth`` and a script's ``synthesize(pd.read_csv(DATA.csv))`` alike.
* In release mode no message quotes a value, a row number or a count of the records, nothing is refused on the
  data's content, and the release states its domain rule; without it the refusal quotes the value to the data
  holder (the detection case).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import privsyn_core as ps
from privsyn_core.data.conform import DomainPolicy, conform
from privsyn_core.data.identity import file_identity, table_identity
from privsyn_core.data.io import read_csv
from privsyn_core.privacy import budget

SCHEMA = {"columns": [{"name": "age", "kind": "numeric", "lo": 0, "hi": 100, "integer": True},
                      {"name": "income", "kind": "numeric", "lo": 0, "hi": 100000},
                      {"name": "city", "kind": "categorical", "categories": ["a", "b", "c"]}]}
NAMES = [c["name"] for c in SCHEMA["columns"]]
SECRETS = ("Jane Doe 1961-04-02", "alice_smith")


def people() -> pd.DataFrame:
    rng = np.random.default_rng(0)
    return pd.DataFrame({"age": rng.integers(18, 90, 300), "income": np.round(rng.uniform(0, 1e5, 300), 2),
                         "city": rng.choice(["a", "b", "c"], 300)})


def variants(table: pd.DataFrame) -> dict[str, str]:
    """The same records as seven CSV texts."""
    text = table.to_csv(index=False)
    return {"table": text, "crlf": text.replace("\n", "\r\n"), "no_trailing_newline": text.rstrip("\n"),
            "reversed_rows": table.iloc[::-1].to_csv(index=False),
            "extra_column": table.assign(note="unused").to_csv(index=False),
            "float_format": table.to_csv(index=False, float_format="%.6f"),
            "columns_reordered": table[["city", "income", "age"]].to_csv(index=False)}


@pytest.fixture()
def files(tmp_path) -> tuple[dict[str, Path], Path]:
    paths = {}
    for name, text in variants(people()).items():
        paths[name] = tmp_path / f"{name}.csv"
        paths[name].write_bytes(text.encode())
    schema = tmp_path / "schema.json"
    schema.write_text(json.dumps(SCHEMA))
    return paths, schema


def cli(*args: object) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "privsyn_core", *map(str, args)], capture_output=True, text=True,
                          timeout=120, cwd=Path(__file__).resolve().parents[1])


def test_the_seven_versions_of_a_table_have_one_identity_and_a_changed_record_another(files):
    paths, _ = files
    identities = {file_identity(p, NAMES) for p in paths.values()}
    identities |= {table_identity(pd.read_csv(p), NAMES) for p in paths.values()}
    identities |= {table_identity(read_csv(p), NAMES) for p in paths.values()}
    assert len(identities) == 1
    changed = people()
    changed.loc[17, "income"] += 0.01
    assert table_identity(changed, NAMES) not in identities
    assert budget.dataset_id(people()) == file_identity(paths["table"])  # every column of the file


def test_budget_set_binds_the_cli_and_a_script_on_every_version(files, tmp_path):
    """A budget of 1.0 on ``table.csv`` (set with its schema) admits two releases of 0.4 in all, whichever door
    and whichever version of the file: before, a script on ``pd.read_csv`` released three times and each version
    through the CLI got a fresh budget."""
    paths, schema = files
    ledger = tmp_path / "ledger.sqlite"
    assert cli("budget", "init", "--ledger", ledger).returncode == 0
    assert cli("budget", "set", paths["table"], "1.0", "--ledger", ledger, "--schema", schema).returncode == 0
    passed = []
    for k, (name, path) in enumerate(paths.items()):
        if k % 2:
            try:
                ps.synthesize(pd.read_csv(path), "pmm", 0.4, schema=SCHEMA, ledger=ledger)
                passed.append(name)
            except budget.BudgetExceeded:
                pass
        elif cli("synth", path, tmp_path / "out.csv", "--mechanism", "pmm", "--epsilon", "0.4", "--schema", schema,
                 "--ledger", ledger, "--force").returncode == 0:
            passed.append(name)
    assert len(passed) == 2, passed
    shown = cli("budget", "show", paths["reversed_rows"], "--ledger", ledger, "--schema", schema, "--json")
    assert json.loads(shown.stdout)["totals"] == {"replace": 0.8}


def bad_file(tmp_path: Path) -> Path:
    table = people().astype({"age": object})
    table.loc[3, "age"], table.loc[7, "age"], table.loc[9, "city"], table.loc[11, "income"] = \
        SECRETS[0], None, SECRETS[1], 1e9
    path = tmp_path / "bad.csv"
    table.to_csv(path, index=False)
    return path


def test_release_mode_refuses_nothing_on_the_data_and_quotes_no_value(files, tmp_path):
    _, schema = files
    path, ledger, report = bad_file(tmp_path), tmp_path / "ledger.sqlite", tmp_path / "report.json"
    budget.PrivacyLedger.create(ledger)
    teaching = cli("synth", path, tmp_path / "out.csv", "--mechanism", "pmm", "--epsilon", "1", "--schema", schema,
                   "--ledger", ledger)
    assert teaching.returncode == 2 and SECRETS[0] in teaching.stderr  # the data holder's own terminal
    released = cli("synth", path, tmp_path / "out.csv", "--mechanism", "pmm", "--epsilon", "1", "--schema", schema,
                   "--ledger", ledger, "--release-mode", "--fallback", "city=b", "--report", report, "--force")
    assert released.returncode == 0, released.stderr
    said = released.stdout + released.stderr + report.read_text()
    assert not [s for s in SECRETS if s in said] and "rows [" not in said
    stated = json.loads(report.read_text())["domain_policy"]
    assert stated["fallbacks"] == {"age": 50.0, "income": 50000.0, "city": "b"}
    assert budget.PrivacyLedger(ledger).spent(file_identity(path, NAMES)) == 1.0  # the teaching refusal: free


def test_release_mode_maps_each_record_by_the_declared_rule():
    table = pd.DataFrame({"age": [20, SECRETS[0], None, 250, -4], "income": [1.0, 2.0, np.inf, 3.0, 4.0],
                          "city": ["a", SECRETS[1], None, "c", "b"]})
    schema = ps.Schema.from_dict(SCHEMA)
    mapped = conform(table, schema, DomainPolicy.of(schema, {"age": 30}))
    assert mapped["age"].tolist() == [20, 30, 30, 250, -4]  # the codec clips finite numbers, and counts them
    assert mapped["income"].tolist() == [1.0, 2.0, 100000.0, 3.0, 4.0]
    assert mapped["city"].tolist() == ["a", "a", "a", "c", "b"]
    with pytest.raises(ps.DataError, match="Jane Doe"):
        ps.synthesize(table, "pmm", 1.0, schema=SCHEMA)
    result = ps.synthesize(table, "pmm", 1.0, schema=SCHEMA, release_mode=True, fallbacks={"age": 30})
    assert result.release().domain_policy["fallbacks"] == {"age": 30.0, "income": 50000.0, "city": "a"}
    with pytest.raises(ps.SchemaError, match="fallback"):
        ps.synthesize(table, "pmm", 1.0, schema=SCHEMA, release_mode=True, fallbacks={"city": "z"})
    with pytest.raises(ps.ParameterError, match="public schema"):
        ps.synthesize(table, "pmm", 1.0, release_mode=True)


def test_a_stream_release_is_assembled_with_the_ledger_check_of_every_release(tmp_path, monkeypatch):
    """The stream built its Release by hand, with no check that its ledger sums to its epsilon; it now goes through
    the batch path's assemble step, which refuses a ledger that does not."""
    import dataclasses

    from privsyn_core import stream

    schema = {"columns": [{"name": "a", "kind": "numeric", "lo": 0, "hi": 1}]}
    opened = stream.open_stream(tmp_path / "s.json", schema, 1.0, create=True, depth=3, rng=1)
    release = opened.add(pd.DataFrame({"a": np.linspace(0, 1, 50)}))
    assert release.epsilon == 1.0 and release.neighbouring == "add_remove" and release.dp_valid
    refresh = stream.Stream._refresh

    def one_stage_lost(self, state):  # a plan whose ledger lost a stage, past the state file's own checks
        refresh(self, state)
        self.plan = dataclasses.replace(self.plan, ledger=self.plan.ledger[1:])

    monkeypatch.setattr(stream.Stream, "_refresh", one_stage_lost)
    with pytest.raises(RuntimeError, match="ledger sums to"):
        opened.release()


def test_a_kept_run_is_counted_as_the_library_counts_a_replay(tmp_path):
    """The app's cache of teaching runs counts a kept run through the library's reservation
    (``api.count_replay``): free when the seeded run is in this dataset's ledger, charged on another dataset, and
    refused over the budget."""
    from privsyn_core.api import count_replay

    ledger = budget.PrivacyLedger.create(tmp_path / "ledger.sqlite")
    table, arguments = people(), {"schema": SCHEMA, "rng": 3, "ledger": ledger}
    ps.synthesize(table, "pmm", 0.5, **arguments)
    identity = table_identity(table, NAMES)
    count_replay(table.iloc[::-1], "pmm", 0.5, **arguments)
    assert ledger.spent(identity) == 0.5
    count_replay(table, "pmm", 0.5, dataset="another session's ledger", **arguments)
    assert ledger.spent("another session's ledger") == 0.5
    ledger.set_budget(identity, 0.75)
    with pytest.raises(budget.BudgetExceeded):
        count_replay(table, "pmm", 0.5, **{**arguments, "rng": 4})
