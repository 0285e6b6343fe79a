"""The privacy budget is a guarantee (issue 25): one persistent ledger for the library, the CLI and the app, atomic
reservations that never overspend (threads, processes, a detection case without the lock), fail closed on a
missing, empty or damaged ledger, durable under ``kill -9``."""

from __future__ import annotations

import math
import multiprocessing
import os
import signal
import sqlite3
import subprocess
import sys
import threading
import time
from contextlib import closing
from pathlib import Path

import numpy as np
import pytest

import privsyn_core as ps
from privsyn_core import _version
from privsyn_core.data.datasets import two_blobs
from privsyn_core.engine import release
from privsyn_core.errors import BudgetExceeded, LedgerError
from privsyn_core.privacy import budget
from privsyn_core.privacy.budget import PrivacyLedger

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture()
def ledger(tmp_path) -> PrivacyLedger:
    return PrivacyLedger.create(tmp_path / "ledger" / "ledger.sqlite")


def reserve(ledger: PrivacyLedger, epsilon: float, data: str = "d", **kw) -> budget.Reservation:
    return ledger.reserve(data, epsilon, relation=kw.pop("relation", "replace"), mechanism="pmm", **kw)


# -- the budget check ----------------------------------------------------------------------------------------------

def test_a_reservation_counts_at_once_and_the_budget_refuses_what_would_exceed_it(ledger):
    ledger.set_budget("d", 1.0)
    first = reserve(ledger, 0.6)
    assert ledger.spent("d") == 0.6, "a reservation counts before the run finishes"
    with pytest.raises(BudgetExceeded, match="would exceed its budget of 1"):
        reserve(ledger, 0.5)
    first.confirm()
    reserve(ledger, 0.4).confirm()  # exactly up to the budget (fsum 0.6 + 0.4 == 1.0)
    assert ledger.totals("d") == {"replace": 1.0} and ledger.count("d") == 2
    assert [e.status for e in ledger.spends("d")] == ["spent", "spent"]
    reserve(ledger, 5.0, private=False).confirm()  # a run with no guarantee: listed apart, never in the total
    assert ledger.spent("d") == 1.0 and ledger.count("d", private=False) == 1
    assert ledger.spent("other") == 0.0


def test_totals_are_exact_per_relation_and_one_budget_caps_both_relations(ledger):
    rng = np.random.default_rng(0)
    epsilons = [float(e) for e in rng.choice([0.1, 0.2, 1 / 3, 1e-3], size=200)]
    relations = [str(r) for r in rng.choice(["replace", "add_remove"], size=200)]
    for epsilon, relation in zip(epsilons, relations, strict=True):
        reserve(ledger, epsilon, relation=relation).confirm()
    assert ledger.totals("d") == {r: math.fsum(e for e, q in zip(epsilons, relations, strict=True) if q == r)
                                  for r in set(relations)}
    ledger.set_budget("d", ledger.spent("d"))
    with pytest.raises(BudgetExceeded):
        reserve(ledger, 1e-9, relation="add_remove")


def test_a_failed_run_stays_counted_and_only_a_run_that_never_started_hands_its_reservation_back(ledger):
    with pytest.raises(RuntimeError), reserve(ledger, 0.5):
        raise RuntimeError("the mechanism failed half-way")
    assert ledger.spends("d")[0].status == "failed" and ledger.spent("d") == 0.5
    never = reserve(ledger, 0.25)
    never.cancel()
    assert ledger.spent("d") == 0.5 and ledger.count("d") == 1


def test_the_same_seeded_run_spends_once_and_any_other_run_again(ledger):
    assert reserve(ledger, 1.0, run_key="same").spends
    assert not reserve(ledger, 1.0, run_key="same").spends
    assert reserve(ledger, 1.0, run_key="other").spends and ledger.spent("d") == 2.0


def test_a_session_can_only_tighten_the_operators_budget(ledger, monkeypatch):
    assert ledger.tighten_budget("d", 3.0) == 3.0  # none yet: set
    assert ledger.tighten_budget("d", 5.0) == 3.0  # never raised
    assert ledger.tighten_budget("d", 1.0) == 1.0 and ledger.budget_owner("d") == "session"
    ledger.set_budget("d", 4.0)  # the operator may raise it
    assert ledger.budget("d") == 4.0 and ledger.budget_owner("d") == "operator"
    ledger.set_budget("d", None)
    assert ledger.budget("d") is None
    monkeypatch.setenv(budget.BUDGET_ENV, "2.5")
    governed = PrivacyLedger(ledger.path)
    assert governed.budget("d") == 2.5 and governed.budget_owner("d") == "default"
    assert governed.tighten_budget("d", 9.0) == 2.5, "a session cannot raise the operator's default either"


def test_a_release_only_ledger_refuses_releases_where_no_budget_is_set(ledger):
    strict = PrivacyLedger(ledger.path, require_budget=True)
    with pytest.raises(BudgetExceeded, match="no privacy budget"):
        reserve(strict, 0.1)
    reserve(strict, 0.1, private=False).confirm()  # nothing private, nothing to cap
    strict.set_budget("d", 1.0)
    reserve(strict, 0.1).confirm()


@pytest.mark.parametrize("text", ["abc", "0", "-1", "inf", "nan"])
def test_a_malformed_operator_budget_refuses_instead_of_meaning_none(monkeypatch, tmp_path, text):
    monkeypatch.setenv(budget.BUDGET_ENV, text)
    with pytest.raises(LedgerError, match="PRIVSYN_BUDGET"):
        PrivacyLedger(tmp_path / "l.sqlite")


# -- concurrency ---------------------------------------------------------------------------------------------------

def race(release, threads: int = 16) -> list[str]:
    """``release()`` in ``threads`` threads started together: "released" or "refused" for each."""
    barrier, outcomes = threading.Barrier(threads), []

    def attempt() -> None:
        barrier.wait()
        try:
            release()
            outcomes.append("released")
        except BudgetExceeded:
            outcomes.append("refused")

    workers = [threading.Thread(target=attempt) for _ in range(threads)]
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    return outcomes


def test_sixteen_threads_never_overspend_one_budget(ledger):
    ledger.set_budget("d", 2.0)
    outcomes = race(lambda: reserve(ledger, 0.3).confirm())
    assert outcomes.count("released") == 6 and ledger.spent("d") == math.fsum([0.3] * 6) <= 2.0


def test_detection_case_a_check_then_record_without_the_lock_overspends(ledger):
    """What the app did before (check, run, record: three steps): with the same 16 threads all pass the check
    on the same total, so the test above can fail."""
    ledger.set_budget("d", 2.0)
    barrier = threading.Barrier(16)

    def racy_release() -> None:
        if math.fsum([ledger.spent("d"), 0.3]) <= ledger.budget("d"):  # type: ignore[operator]
            barrier.wait()  # the mechanism runs here, in every thread that passed the check
            ledger.reserve("d", 0.3, relation="replace", mechanism="pmm", private=False)  # no check: a plain record
            ledger._write([("update spends set private = 1", ())])

    threads = [threading.Thread(target=racy_release) for _ in range(16)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert ledger.spent("d") > 2.0, "without the atomic reservation the budget is overspent"


def _release_until_refused(path: str, start: float) -> int:
    """A worker process: release epsilon 0.1 until the ledger refuses; how many releases it made."""
    ledger = PrivacyLedger(path)
    while time.time() < start:
        time.sleep(0.001)
    made = 0
    while True:
        try:
            reserve(ledger, 0.1).confirm()
        except BudgetExceeded:
            return made
        made += 1


def test_processes_on_one_ledger_file_never_overspend(ledger):
    ledger.set_budget("d", 3.0)
    with multiprocessing.get_context("spawn").Pool(4) as pool:
        made = pool.starmap(_release_until_refused, [(str(ledger.path), time.time() + 2.0)] * 4)
    assert sum(made) == ledger.count("d") and ledger.spent("d") <= 3.0
    assert ledger.spent("d") + 0.1 > 3.0, "the processes stop only when the budget is (nearly) exhausted"


# -- fail closed ---------------------------------------------------------------------------------------------------

def test_the_data_folders_ledger_is_made_on_first_use_only_in_a_missing_or_empty_folder(tmp_path, monkeypatch):
    monkeypatch.setenv("PRIVSYN_DATA_DIR", str(tmp_path / "new"))
    fresh = PrivacyLedger()
    assert fresh.spent("d") == 0.0 and fresh.path.exists()
    busy = tmp_path / "busy"
    busy.mkdir()
    (busy / "uploads").mkdir()
    monkeypatch.setenv("PRIVSYN_DATA_DIR", str(busy))
    with pytest.raises(LedgerError, match="its folder is not empty"):
        PrivacyLedger().spent("d")
    PrivacyLedger.create(busy / "ledger.sqlite")  # the operator's explicit command
    assert PrivacyLedger().spent("d") == 0.0
    with pytest.raises(LedgerError, match="already exists"):
        PrivacyLedger.create(busy / "ledger.sqlite")


@pytest.mark.parametrize("named", ["missing folder/ledger.sqlite", "ledger.sqlite"])
def test_a_ledger_named_by_a_path_that_does_not_exist_is_refused_and_never_made(tmp_path, monkeypatch, named):
    """Issue 37, item 8: a mistyped path (argument or PRIVSYN_LEDGER) is refused, never a fresh empty ledger."""
    typo = tmp_path / named
    before = sorted(tmp_path.rglob("*"))
    with pytest.raises(LedgerError, match=r"no privacy ledger at .*\(a typo\?\)"):
        reserve(PrivacyLedger(typo), 0.1)
    monkeypatch.setenv("PRIVSYN_LEDGER", str(typo))
    with pytest.raises(LedgerError, match="no privacy ledger at"):
        PrivacyLedger().spent("d")
    with pytest.raises(LedgerError, match="no privacy ledger at"):
        ps.synthesize(np.full((20, 1), 0.5), "pmm", 1.0, schema=ps.unit_schema(1), ledger=typo)
    assert sorted(tmp_path.rglob("*")) == before


def test_a_ledger_removed_from_its_data_folder_after_use_is_refused_until_budget_init(tmp_path, monkeypatch):
    """Issue 37, item 8: deleting the data folder's ledger (alone, or with its whole folder) does not reset the
    spends: the markers left at its creation refuse a fresh ledger until the operator runs ``budget init``."""
    monkeypatch.setenv("PRIVSYN_DATA_DIR", str(tmp_path / "data"))
    path = budget.data_folder_path()
    code = ("import sys; from privsyn_core.privacy.budget import PrivacyLedger as L; l = L(); "
            "l.reserve('d', 1.0, relation='replace', mechanism='pmm').confirm(); print(l.spent('d'))")
    def run() -> subprocess.CompletedProcess:  # a new process each time: nothing remembered in memory
        return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=60)
    assert run().stdout.strip() == "1.0"
    for removal in ("the file", "the folder"):
        for leftover in path.parent.glob(f"{path.name}*"):
            leftover.unlink()
        if removal == "the folder":
            import shutil
            shutil.rmtree(path.parent)
        refused = run()
        assert refused.returncode == 1 and "was made before and is gone" in refused.stderr, (removal, refused.stderr)
        assert not path.exists()
        PrivacyLedger.create(path)  # budget init: the operator starts a new ledger knowingly
        assert run().stdout.strip() == "1.0"


def test_another_programs_sqlite_file_is_refused_untouched(tmp_path):
    """Issue 37, item 8: the file is looked at read-only first, so it is not switched to WAL and gets no table."""
    foreign = tmp_path / "foreign.sqlite"
    with closing(sqlite3.connect(foreign)) as db:
        db.execute("create table t (x)")
        db.execute("create table spends (x)")  # a name the app's earlier ledgers used, other columns
        db.execute("create table budgets (x)")
        db.commit()
    before = foreign.read_bytes()
    for call in (lambda: PrivacyLedger(foreign).spent("d"), lambda: reserve(PrivacyLedger(foreign), 0.1)):
        with pytest.raises(LedgerError, match=r"not a privsyn ledger .* left untouched"):
            call()
    assert foreign.read_bytes() == before and sorted(p.name for p in tmp_path.iterdir()) == ["foreign.sqlite"]


def test_detection_case_a_read_write_open_switches_a_foreign_file_to_wal(tmp_path):
    """What the read-only look prevents: opening the file read-write and setting the journal, as the ledger did
    before it checked the schema, changes another program's file."""
    foreign = tmp_path / "foreign.sqlite"
    with closing(sqlite3.connect(foreign)) as db:
        db.execute("create table t (x)")
        db.commit()
    with closing(sqlite3.connect(foreign)) as db:
        db.execute("pragma journal_mode=wal")
    with closing(sqlite3.connect(foreign)) as db:
        assert db.execute("pragma journal_mode").fetchone()[0] == "wal"


def test_an_empty_a_damaged_a_foreign_and_a_removed_ledger_refuse_every_release(ledger, tmp_path):
    ledger.set_budget("d", 5.0)
    reserve(ledger, 1.0).confirm()
    ledger.path.write_bytes(b"")  # truncated
    with pytest.raises(LedgerError, match="is empty"):
        reserve(ledger, 0.1)
    ledger.path.write_bytes(b"garbage " * 512)
    for sidecar in ("-wal", "-shm"):
        Path(f"{ledger.path}{sidecar}").unlink(missing_ok=True)
    with pytest.raises(LedgerError, match="cannot be read"):
        ledger.spent("d")
    foreign = tmp_path / "foreign.sqlite"
    sqlite3.connect(foreign).execute("create table t (x)").connection.commit()
    with pytest.raises(LedgerError, match="not a privsyn ledger"):
        PrivacyLedger(foreign).spent("d")
    import shutil
    shutil.rmtree(ledger.path.parent)  # the whole data folder deleted while the process runs
    with pytest.raises(LedgerError, match="removed while in use"):
        reserve(ledger, 0.1)
    assert not ledger.path.exists(), "a refused call makes no fresh ledger"


_KILLED = """
import sys, time
from privsyn_core.privacy.budget import PrivacyLedger
ledger = PrivacyLedger(sys.argv[1])
if sys.argv[2] == "release":
    ledger.reserve("d", 0.5, relation="replace", mechanism="pmm")  # reserved; the mechanism "runs"
    print("RESERVED", flush=True)
    time.sleep(60)
else:
    print("LOOP", flush=True)
    while True:
        ledger.reserve("d", 0.001, relation="replace", mechanism="pmm").confirm()
"""


@pytest.mark.slow
@pytest.mark.parametrize("where", ["release", "reservation"])
def test_kill_9_leaves_a_whole_ledger_and_a_started_release_counted(ledger, where):
    ledger.set_budget("d", 1000.0)
    child = subprocess.Popen([sys.executable, "-c", _KILLED, str(ledger.path), where], stdout=subprocess.PIPE,
                             text=True, cwd=ROOT)
    try:
        assert child.stdout is not None and child.stdout.readline().strip() in ("RESERVED", "LOOP")
        if where == "release":
            time.sleep(0.05)
        else:  # kill the loop mid-stream, after some reservations whatever the machine's load
            deadline = time.monotonic() + 60
            while ledger.count("d") <= 10 and time.monotonic() < deadline:
                time.sleep(0.05)
        os.kill(child.pid, signal.SIGKILL)
        child.wait(timeout=30)
    finally:
        child.kill()
    with sqlite3.connect(ledger.path) as db:
        assert db.execute("pragma integrity_check").fetchone()[0] == "ok"
    spends = ledger.spends("d")
    statuses = [e.status for e in spends]
    if where == "release":
        assert statuses == ["reserved"] and ledger.spent("d") == 0.5, "a release killed mid-run stays counted"
    else:
        assert len(spends) > 10 and set(statuses[:-1]) == {"spent"} and statuses[-1] in ("spent", "reserved")
        assert ledger.spent("d") == math.fsum([0.001] * len(spends))
    reserve(ledger, 0.1).confirm()  # the ledger goes on


# -- synthesize with a ledger ----------------------------------------------------------------------------------------

def test_synthesize_reserves_before_the_mechanism_and_refuses_over_the_budget(ledger, monkeypatch):
    X = two_blobs(300, 2, rng=0)
    schema = ps.unit_schema(2)
    data = budget.dataset_id(X)
    ledger.set_budget(data, 1.5)
    ps.synthesize(X, "pmm", 1.0, schema=schema, ledger=ledger)
    assert ledger.totals(data) == {"replace": 1.0}
    ran = []
    monkeypatch.setattr(release.Encoded, "release", lambda *a, **k: ran.append(1))
    with pytest.raises(BudgetExceeded):
        ps.synthesize(X, "pmm", 1.0, schema=schema, ledger=ledger)
    assert ran == [], "a refused release never reaches the mechanism"
    assert ledger.spent(data) == 1.0


def test_synthesize_spends_nothing_on_bad_input_and_once_on_the_same_seeded_run(ledger):
    X = two_blobs(300, 2, rng=0)
    schema = ps.unit_schema(2)
    data = budget.dataset_id(X)
    bad = X.copy()
    bad[0, 0] = np.nan
    with pytest.raises(ps.DataError):
        ps.synthesize(bad, "pmm", 1.0, schema=schema, ledger=ledger)
    with pytest.raises(ps.ParameterError):
        ps.synthesize(X, "pmm", -1.0, schema=schema, ledger=ledger)
    assert ledger.count(budget.dataset_id(bad)) == 0
    for _ in range(2):
        ps.synthesize(X, "pmm", 0.5, schema=schema, ledger=ledger, rng=7)
    ps.synthesize(X, "pmm", 0.5, schema=schema, ledger=ledger, rng=8)
    ps.synthesize(X, "pmm", 0.5, schema=schema, ledger=ledger.path)  # a path is a ledger too
    assert ledger.spent(data) == 1.5 and ledger.count(data) == 3
    ps.synthesize(X, "pmm", 0.5, schema=schema, ledger=ledger, rng=7, dataset="named")  # a name: no dedup by content
    assert ledger.spent("named") == 0.5


@pytest.mark.parametrize("upgrade", ["sampler", "library"])
def test_a_seeded_replay_is_free_only_with_the_same_library_and_samplers(ledger, monkeypatch, upgrade):
    """Issue 37, item 5: the same seeded call is charged once; after a change of the samplers' version (or of the
    library's) it may draw other noise, so it is charged again."""
    from privsyn_core.privacy import noise

    X = np.random.default_rng(1).uniform(0, 1, (200, 1))
    data = budget.dataset_id(X)
    for _ in range(2):
        ps.synthesize(X, "dp_histogram", 1.0, schema=ps.unit_schema(1), ledger=ledger, rng=7)
    assert ledger.spent(data) == 1.0
    if upgrade == "sampler":
        monkeypatch.setattr(noise, "SAMPLER_VERSION", noise.SAMPLER_VERSION + 1)
    else:
        monkeypatch.setattr(_version, "__version__", ps.__version__ + ".post1")
    ps.synthesize(X, "dp_histogram", 1.0, schema=ps.unit_schema(1), ledger=ledger, rng=7)
    assert ledger.spent(data) == 2.0


def test_sixteen_library_threads_releasing_never_exceed_the_budget(ledger):
    X = two_blobs(500, 2, rng=1)
    schema, data = ps.unit_schema(2), budget.dataset_id(X)
    ledger.set_budget(data, 2.0)
    outcomes = race(lambda: ps.synthesize(X, "pmm", 0.25, schema=schema, ledger=ledger))
    assert outcomes.count("released") == 8 and ledger.spent(data) == 2.0


def test_the_release_states_its_floating_point_exposure():
    X = two_blobs(300, 2, rng=0)
    exact = ps.synthesize(X, "pmm", 1.0, schema=ps.unit_schema(2), rng=0).release().to_dict()
    assert exact["floating_point_exposure"] is None and exact["noise"].startswith("Exact integer noise")
    boolean = ps.Schema.from_dict({"columns": [{"name": f"x{j}", "kind": "numeric", "lo": 0, "hi": 1, "integer": True}
                                               for j in range(2)]})
    pca = ps.synthesize((X > 0.5).astype(int), "microagg_dp", 1.0, schema=boolean, rng=0).release().to_dict()
    assert pca["floating_point_exposure"] == ps.get_mechanism("microagg_dp").floating_point_exposure
    assert pca["noise"].startswith("Floating-point exposure")


@pytest.mark.slow
def test_two_app_servers_on_one_data_folder_never_overspend(tmp_path):
    """Issue 25, item 2: two release-only Streamlit servers sharing one data folder (one ledger), 4 sessions each
    clicking Run 3 times at epsilon 1 against PRIVSYN_BUDGET=5 over the websocket protocol: at most 5 releases."""
    from benchmarks.bench_budget import app_servers

    result = app_servers(tmp_path, clicks=3, budget=5.0, sessions=4)
    assert result["failed sessions"] == 0, result["errors"]
    assert result["clicks"] == 24 and result["releases recorded"] == 5 and result["epsilon recorded"] == 5.0


def test_the_apps_earlier_ledger_is_upgraded_in_place_and_forgets_nothing(tmp_path):
    """A deployment's ledger from before the library owned it (tables spends and budgets, no meta) keeps every
    spend and budget: it is upgraded, not refused and not replaced."""
    path = tmp_path / "app-data" / "ledger.sqlite"
    path.parent.mkdir()
    with sqlite3.connect(path) as db:
        db.executescript("""
            create table spends (id integer primary key autoincrement, data text not null, label text not null,
                mechanism text not null, relation text not null, epsilon real not null, private integer not null,
                run_key text, created text not null);
            create table budgets (data text primary key, epsilon real not null);
            insert into spends(data, label, mechanism, relation, epsilon, private, run_key, created)
                values ('d', 'pmm (release)', 'pmm', 'replace', 0.7, 1, null, '2026-11-01T00:00:00+00:00');
            insert into budgets(data, epsilon) values ('d', 1.0);""")
    ledger = PrivacyLedger(path)
    assert ledger.spent("d") == 0.7 and ledger.budget("d") == 1.0 and ledger.budget_owner("d") == "operator"
    with pytest.raises(BudgetExceeded):
        reserve(ledger, 0.5)
    reserve(ledger, 0.3).confirm()
    assert [e.status for e in ledger.spends("d")] == ["spent", "spent"]


def test_an_earlier_default_ledger_refuses_the_default_only(tmp_path, monkeypatch):
    """A door's earlier default holding a ledger refuses the new default (one line naming both files); a ledger
    named by PRIVSYN_LEDGER or PRIVSYN_DATA_DIR, or no ledger at the earlier place, is not refused."""
    earlier = tmp_path / "old" / "ledger.sqlite"
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "share"))
    budget.check_earlier_default(earlier)  # nothing there
    PrivacyLedger.create(earlier)
    budget.check_earlier_default(earlier)  # PRIVSYN_DATA_DIR (the fixture's) names the data folder
    monkeypatch.delenv("PRIVSYN_DATA_DIR")
    with pytest.raises(LedgerError) as refused:
        budget.check_earlier_default(earlier)
    assert "\n" not in str(refused.value) and str(earlier) in str(refused.value)
    assert str(budget.default_path()) in str(refused.value)
    monkeypatch.setenv("PRIVSYN_LEDGER", str(earlier))
    budget.check_earlier_default(earlier)
    monkeypatch.delenv("PRIVSYN_LEDGER")
    monkeypatch.setattr(budget, "data_folder", lambda: earlier.parent)
    budget.check_earlier_default(earlier)  # the earlier default is the default
