"""The budget under concurrency (issue 25): releases against one budget never exceed it, and what a reservation costs.

Prints three tables:

1. **Library threads**: 16 threads each call ``ps.synthesize(..., ledger=...)`` on one table against a budget that
   pays for fewer releases than there are threads; releases made, epsilon recorded, budget.
2. **Reservations per second**: ``reserve`` + ``confirm`` in a loop, from 1 and 4 threads and from 4 processes on
   one ledger file (every reservation is one ``BEGIN IMMEDIATE`` transaction with ``synchronous=FULL``).
3. **Two app servers x 8 sessions**: two release-only Streamlit servers on one data folder (one ledger), an upload
   kept there, 8 websocket sessions per server (Streamlit's own protocol, :mod:`benchmarks.load_wire`) each
   clicking Run ``--clicks`` times at epsilon 1 against ``PRIVSYN_BUDGET``; epsilon recorded against the budget.
4. **Every door at once**: one ledger file and one named dataset (``PRIVSYN_DATASET``, ``dataset=``,
   ``--dataset``) with one budget; at the same time the two app servers' 16 sessions click Run (epsilon 1),
   16 library threads call ``ps.synthesize`` three times each (0.25), 4 command-line processes run ``synth``
   three times each (0.3) and 2 threads create a stream (0.5 for the whole stream) and add batches to it; the
   releases made and refused per door, anything else that went wrong, and the epsilon recorded per door and in
   all, against the budget (``--doors-budget``).

Usage::

    python -m benchmarks.bench_budget [--clicks 3] [--budget 5] [--doors-budget 20] [--skip-app]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import math
import multiprocessing
import os
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pandas as pd

import privsyn_core as ps
from privsyn_core.data.datasets import two_blobs
from privsyn_core.data.identity import file_identity
from privsyn_core.errors import BudgetExceeded
from privsyn_core.privacy.budget import PrivacyLedger, dataset_id

REPO = Path(__file__).resolve().parents[1]


def library_threads(folder: Path, threads: int = 16, epsilon: float = 0.25, budget: float = 2.0) -> dict:
    ledger = PrivacyLedger.create(folder / "threads" / "ledger.sqlite")
    X = two_blobs(2000, 2, rng=0)
    data = dataset_id(X)
    ledger.set_budget(data, budget)
    outcomes: list[str] = []
    barrier = threading.Barrier(threads)

    def release() -> None:
        barrier.wait()
        try:
            ps.synthesize(X, "pmm", epsilon, schema=ps.unit_schema(2), ledger=ledger)
            outcomes.append("released")
        except BudgetExceeded:
            outcomes.append("refused")

    start = time.perf_counter()
    workers = [threading.Thread(target=release) for _ in range(threads)]
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    return {"threads": threads, "epsilon each": epsilon, "budget": budget, "released": outcomes.count("released"),
            "refused": outcomes.count("refused"), "recorded": ledger.spent(data),
            "seconds": round(time.perf_counter() - start, 2)}


def _reserve_loop(path: str, seconds: float) -> int:
    ledger, made, deadline = PrivacyLedger(path), 0, time.perf_counter() + seconds
    while time.perf_counter() < deadline:
        ledger.reserve("d", 1e-6, relation="replace", mechanism="bench").confirm()
        made += 1
    return made


def reservation_rate(folder: Path, seconds: float = 3.0) -> list[dict]:
    path = str(folder / "rate" / "ledger.sqlite")
    PrivacyLedger.create(path)
    rows = []
    for threads in (1, 4):
        counts: list[int] = []
        workers = [threading.Thread(target=lambda made=counts: made.append(_reserve_loop(path, seconds)))
                   for _ in range(threads)]
        for w in workers:
            w.start()
        for w in workers:
            w.join()
        rows.append({"writers": f"{threads} thread(s)", "reservations/s": round(sum(counts) / seconds)})
    with multiprocessing.get_context("spawn").Pool(4) as pool:
        counts = pool.starmap(_reserve_loop, [(path, seconds)] * 4)
    rows.append({"writers": "4 processes", "reservations/s": round(sum(counts) / seconds)})
    return rows


def app_servers(folder: Path, clicks: int, budget: float, sessions: int = 8) -> dict:
    """Two release-only servers on one data folder; 8 wire sessions each click Run ``clicks`` times."""
    env = {**os.environ, "PRIVSYN_DATA_DIR": str(folder / "app-data"), "PRIVSYN_RELEASE_ONLY": "1",
           "PRIVSYN_BUDGET": f"{budget:g}"}
    os.environ["PRIVSYN_DATA_DIR"] = env["PRIVSYN_DATA_DIR"]
    from pages._support import uploads

    table = pd.DataFrame(two_blobs(2000, 2, rng=3) * 10, columns=["x", "y"])
    raw = table.to_csv(index=False).encode()
    token = uploads.save(raw, "shared.csv")
    entries = {c: {"name": c, "kind": "numeric", "lo": 0.0, "hi": 10.0, "integer": False, "public": True,
                   "source": "typed by the user"} for c in ("x", "y")}
    uploads.save_schema(str(token), entries, ["x", "y"])
    with app_servers_running(folder, env) as urls:
        start = time.perf_counter()
        outcomes = asyncio.run(_sessions(urls, sessions, clicks, f"data={token}"))
        seconds = time.perf_counter() - start
    ledger = PrivacyLedger(Path(env["PRIVSYN_DATA_DIR"]) / "ledger.sqlite")
    data = file_identity(raw)  # the app's identity of an upload whose every column is chosen
    spends = ledger.spends(data)
    return {"servers": 2, "sessions": 2 * sessions, "clicks": sum(o[0] for o in outcomes),
            "failed sessions": sum(1 for o in outcomes if o[1]), "releases recorded": len(spends),
            "epsilon recorded": ledger.spent(data), "budget": budget, "seconds": round(seconds, 1),
            "errors": sorted({o[1] for o in outcomes if o[1]})[:3]}


@contextlib.contextmanager
def app_servers_running(folder: Path, env: dict[str, str], count: int = 2) -> Iterator[list[str]]:
    """``count`` Streamlit servers of the app with ``env``; their websocket addresses; killed on leaving."""
    from benchmarks.load_test import BOOT, free_port, wait_until_healthy

    servers, urls = [], []
    try:
        for _ in range(count):
            port = free_port()
            command = [sys.executable, "-c", BOOT, str(folder / f"dump{port}.txt"), "run", str(REPO / "app.py"),
                       "--server.headless", "true", "--server.address", "127.0.0.1", "--server.port", str(port),
                       "--browser.gatherUsageStats", "false", "--server.fileWatcherType", "none"]
            servers.append(wait_until_healthy(subprocess.Popen(command, cwd=REPO, env=env, stdout=subprocess.DEVNULL,
                                                               stderr=subprocess.DEVNULL), port))
            urls.append(f"ws://127.0.0.1:{port}/_stcore/stream")
        yield urls
    finally:
        for server in servers:
            server.kill()


async def _sessions(urls: list[str], sessions: int, clicks: int, query: str) -> list[tuple[int, str]]:
    tasks = [_click_run(url, clicks, query) for url in urls for _ in range(sessions)]
    return list(await asyncio.gather(*tasks))


async def _click_run(url: str, clicks: int, query: str) -> tuple[int, str]:
    """One session: open the upload named in ``query``, go to Synthesize, click Run ``clicks`` times."""
    import websockets
    from streamlit.proto.WidgetStates_pb2 import WidgetState

    from benchmarks.load_wire import MAX_MESSAGE, Failed, Stuck, WireSession, client_state

    wire, made = WireSession(url, stuck_s=120, timeout_s=300), 0
    try:
        async with websockets.connect(url, subprotocols=[websockets.Subprotocol("streamlit")], max_size=MAX_MESSAGE,
                                      open_timeout=60, close_timeout=5) as ws:
            reader = asyncio.create_task(wire.read(ws))
            try:
                state = client_state(page_name="")
                state.query_string = query
                await wire.rerun(ws, state)
                page = wire.pages["Synthesize"]
                state = client_state(page_script_hash=page)
                state.query_string = query
                await wire.rerun(ws, state)
                for _ in range(clicks):
                    button = wire.widget("button", "Run")
                    state = client_state(page_script_hash=page,
                                         widgets={button: WidgetState(id=button, trigger_value=True)})
                    state.query_string = query
                    await wire.rerun(ws, state)
                    made += 1
            finally:
                reader.cancel()
    except (Failed, Stuck, OSError) as exc:
        return made, f"{type(exc).__name__}: {exc}"[:200]
    return made, ""


POPULATION = "population"


def every_door(folder: Path, clicks: int, budget: float) -> dict:
    """Table 4: the app, the library, the command line and the stream against one budget at once."""
    ledger_path = folder / "doors" / "ledger.sqlite"
    ledger = PrivacyLedger.create(ledger_path)
    ledger.set_budget(POPULATION, budget)
    table = pd.DataFrame(two_blobs(2000, 2, rng=3) * 10, columns=["x", "y"])
    schema = ps.Schema.from_dict({"columns": [{"name": c, "kind": "numeric", "lo": 0.0, "hi": 10.0}
                                              for c in ("x", "y")]})
    csv, schema_file = folder / "doors" / "table.csv", folder / "doors" / "schema.json"
    table.to_csv(csv, index=False)
    schema_file.write_text(json.dumps(schema.to_dict()))
    env = {**os.environ, "PRIVSYN_DATA_DIR": str(folder / "doors" / "app-data"), "PRIVSYN_RELEASE_ONLY": "1",
           "PRIVSYN_LEDGER": str(ledger_path), "PRIVSYN_DATASET": POPULATION}
    token = _keep_upload(env["PRIVSYN_DATA_DIR"], table, schema)
    with app_servers_running(folder, env) as urls:
        outcomes: list[tuple[str, str]] = []  # (door, "released" | "refused" | what went wrong)
        doors = [threading.Thread(target=_app_sessions, args=(urls, clicks, token, outcomes))]
        doors += [threading.Thread(target=_library_releases, args=(table, schema, ledger_path, outcomes))
                  for _ in range(16)]
        doors += [threading.Thread(target=_cli_releases, args=(csv, schema_file, ledger_path, folder / "doors", i,
                                                               outcomes)) for i in range(4)]
        doors += [threading.Thread(target=_stream_writer, args=(table, schema, ledger_path, folder / "doors", i,
                                                                outcomes)) for i in range(2)]
        start = time.perf_counter()
        for worker in doors:
            worker.start()
        for worker in doors:
            worker.join()
        seconds = time.perf_counter() - start
    spends = PrivacyLedger(ledger_path).spends(POPULATION)
    by_door: dict[str, float] = {}  # the doors ask distinct epsilons, so a spend names its door
    for spend in spends:
        door = "stream" if spend.mechanism == "online_pmm" else "app" if spend.epsilon == 1.0 else \
            "library" if spend.epsilon == 0.25 else "command line"
        by_door[door] = by_door.get(door, 0.0) + spend.epsilon
    tally: dict[str, dict[str, int]] = {}
    for door, outcome in outcomes:
        tally.setdefault(door, {}).setdefault(outcome, 0)
        tally[door][outcome] += 1
    return {"budget": budget, "asked": 2 * 8 * clicks * 1.0 + 16 * 3 * 0.25 + 4 * 3 * 0.3 + 2 * 0.5,
            "outcomes": tally, "releases recorded": len(spends), "epsilon recorded": ledger.spent(POPULATION),
            "recorded by door": {k: round(v, 6) for k, v in sorted(by_door.items())}, "seconds": round(seconds, 1)}


def _keep_upload(data_dir: str, table: pd.DataFrame, schema: ps.Schema) -> str:
    """Keep ``table`` in the app's data folder with its typed schema; its token."""
    os.environ["PRIVSYN_DATA_DIR"] = data_dir
    from pages._support import uploads

    token = uploads.save(table.to_csv(index=False).encode(), "population.csv")
    entries = {c.name: {**c.to_dict(), "public": True, "source": "typed by the user"} for c in schema.columns}
    uploads.save_schema(str(token), entries, list(schema.names))
    return str(token)


def _app_sessions(urls: list[str], clicks: int, token: str, outcomes: list[tuple[str, str]]) -> None:
    """The 16 sessions; a click that does not release shows the budget's refusal (counted from the ledger)."""
    for made, error in asyncio.run(_sessions(urls, 8, clicks, f"data={token}")):
        outcomes += [("app", "clicked")] * made + ([("app", error)] if error else [])


def _library_releases(table: pd.DataFrame, schema: ps.Schema, ledger_path: Path,
                      outcomes: list[tuple[str, str]]) -> None:
    for _ in range(3):
        try:
            ps.synthesize(table, "pmm", 0.25, schema=schema, ledger=ledger_path, dataset=POPULATION)
            outcomes.append(("library", "released"))
        except BudgetExceeded:
            outcomes.append(("library", "refused"))
        except Exception as exc:  # the table counts what went wrong
            outcomes.append(("library", f"{type(exc).__name__}: {exc}"[:120]))


def _cli_releases(csv: Path, schema_file: Path, ledger_path: Path, folder: Path, worker: int,
                  outcomes: list[tuple[str, str]]) -> None:
    for run in range(3):
        done = subprocess.run([sys.executable, "-m", "privsyn_core", "synth", str(csv),
                               str(folder / f"cli{worker}-{run}.csv"), "--mechanism", "pmm", "--epsilon", "0.3",
                               "--schema", str(schema_file), "--ledger", str(ledger_path), "--dataset", POPULATION],
                              cwd=REPO, capture_output=True, text=True, check=False)
        refused = done.returncode == 2 and "budget" in done.stderr.lower()
        outcome = "released" if done.returncode == 0 else "refused" if refused else done.stderr.strip()[-120:]
        outcomes.append(("command line", outcome))


def _stream_writer(table: pd.DataFrame, schema: ps.Schema, ledger_path: Path, folder: Path, worker: int,
                   outcomes: list[tuple[str, str]]) -> None:
    try:
        stream = ps.open_stream(folder / f"stream{worker}.json", schema, 0.5, create=True, depth=4,
                                ledger=ledger_path, dataset=POPULATION)
    except BudgetExceeded:
        outcomes.append(("stream", "refused"))
        return
    for batch in range(4):
        stream.add(table.iloc[batch * 100:(batch + 1) * 100])
    outcomes.append(("stream", "released"))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--clicks", type=int, default=3)
    parser.add_argument("--budget", type=float, default=5.0)
    parser.add_argument("--doors-budget", type=float, default=20.0)
    parser.add_argument("--skip-app", action="store_true")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        print("1. library threads:", library_threads(folder))
        for row in reservation_rate(folder):
            print("2. reservations:", row)
        if not args.skip_app:
            result = app_servers(folder, args.clicks, args.budget)
            print("3. app servers:", result)
            doors = every_door(folder, args.clicks, args.doors_budget)
            print("4. every door at once:", doors)
            if any(r["epsilon recorded"] > r["budget"] or not math.isfinite(r["epsilon recorded"])
                   for r in (result, doors)):
                print("FAIL: the budget was exceeded")
                return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
