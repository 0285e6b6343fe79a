"""The wire client of the load test (``benchmarks/load_test.py --client wire``, :mod:`benchmarks.load_wire`).

* against a scripted websocket server: a run that starts and never finishes is **stuck**, a run that starts
  nothing is stuck too, an exception element is an **error**, a finished run is timed, and a run ends with the
  ``script_finished`` of the last run the server started (by ``script_run_id``);
* against the real app (``streamlit run app.py``): 2 sessions open the Synthesize page, click Run and change the
  seed for a few seconds: runs > 0, every one ran the mechanism, 0 errors, 0 stuck; and 2 sessions that send the
  next seed 0.05 s after the last without waiting for its run: 0 errors, 0 stuck, the last run of each ends.  A
  server that does not start fails the test (``RuntimeError`` from :func:`benchmarks.load_test.measure`), it never
  skips.  These two are ``slow`` (a real server under load for seconds); the scripted ones are the fast check.
"""

from __future__ import annotations

import asyncio
import time

import pytest
import websockets
from streamlit.proto.BackMsg_pb2 import BackMsg
from streamlit.proto.ForwardMsg_pb2 import ForwardMsg

from benchmarks import load_test, load_wire


def forward(reply: str) -> bytes:
    """The ForwardMsg ``reply`` names: a kind, optionally with the run id it carries ("new_session:a")."""
    kind, _, run_id = reply.partition(":")
    message = ForwardMsg()
    message.metadata.run.script_run_id = run_id
    if kind == "new_session":
        message.new_session.page_script_hash = "page"
    elif kind == "script_finished":
        message.script_finished = ForwardMsg.FINISHED_SUCCESSFULLY
    elif kind == "finished_early_for_rerun":
        message.script_finished = ForwardMsg.FINISHED_EARLY_FOR_RERUN
    else:
        message.delta.new_element.exception.type, message.delta.new_element.exception.message = "ValueError", "boom"
    return message.SerializeToString()


async def against(replies: list[str], stuck_s: float = 0.5, patience: float | None = None) -> float | None:
    """One rerun of a :class:`load_wire.WireSession` against a server that answers every BackMsg with ``replies``."""

    async def serve(ws) -> None:
        async for frame in ws:
            BackMsg().ParseFromString(frame)  # a real BackMsg came in
            for kind in replies:
                await ws.send(forward(kind))

    async with websockets.serve(serve, "127.0.0.1", 0, subprotocols=[websockets.Subprotocol("streamlit")]) as server:
        port = next(iter(server.sockets)).getsockname()[1]
        url = f"ws://127.0.0.1:{port}/_stcore/stream"
        wire = load_wire.WireSession(url, stuck_s=stuck_s, timeout_s=10)
        async with websockets.connect(url, subprotocols=[websockets.Subprotocol("streamlit")]) as ws:
            reader = asyncio.create_task(wire.read(ws))
            try:
                return await wire.rerun(ws, load_wire.client_state(page_name=""), patience)
            finally:
                reader.cancel()


def timed(replies: list[str]) -> float:
    seconds = asyncio.run(against(replies))
    assert seconds is not None
    return seconds


def test_a_run_that_starts_and_finishes_is_timed():
    assert 0 <= timed(["new_session", "script_finished"]) < 5


def test_with_patience_a_run_still_going_is_left_to_the_next_request():
    start = time.monotonic()
    assert asyncio.run(against(["new_session"], stuck_s=5, patience=0.2)) is None
    assert time.monotonic() - start < 2


def test_a_run_without_script_finished_is_stuck():
    start = time.monotonic()
    with pytest.raises(load_wire.Stuck, match="no script_finished"):
        asyncio.run(against(["new_session"]))
    assert time.monotonic() - start < 5


def test_a_rerun_request_that_starts_no_run_is_stuck():
    with pytest.raises(load_wire.Stuck, match="no new_session"):
        asyncio.run(against([]))


def test_a_run_cut_short_for_a_rerun_is_not_its_end():
    with pytest.raises(load_wire.Stuck, match="no script_finished"):
        asyncio.run(against(["new_session", "finished_early_for_rerun"]))


def test_a_run_cut_short_for_a_rerun_ends_with_the_run_that_follows():
    assert 0 <= timed(["new_session", "finished_early_for_rerun", "new_session", "script_finished"]) < 5


def test_a_stopped_run_that_never_ends_does_not_hold_up_the_run_that_replaced_it():
    # with runner.fastReruns the server drops the events of a run it stopped for another: no script_finished for a
    assert 0 <= timed(["new_session:a", "new_session:b", "script_finished:b"]) < 5
    with pytest.raises(load_wire.Stuck, match="no script_finished"):
        asyncio.run(against(["new_session:a", "new_session:b", "script_finished:a"]))


def test_an_exception_element_is_an_error():
    with pytest.raises(load_wire.Failed, match="ValueError: boom"):
        asyncio.run(against(["new_session", "exception", "script_finished"]))


@pytest.mark.slow  # a real app server under load for 4 s: about 5 s of CPU (client and server), 7 s of wall at best
def test_two_wire_sessions_load_the_real_app_without_errors_or_stuck_runs():
    stats, run = load_test.measure("wire", sessions=2, duration=4)
    assert not stats.errors, stats.errors
    assert not stats.stuck, stats.stuck
    assert stats.sessions_started == 2
    assert len(stats.latencies) > 0
    assert len(stats.mechanism) == len(stats.latencies), "every seed change re-ran the mechanism"
    assert run.peak > 0 and run.server_cpu > 0


@pytest.mark.slow  # as above, 3 s of load: about 4.5 s of CPU, 6 s of wall
def test_seed_changes_that_overtake_their_runs_leave_no_session_hung():
    # the path on which sessions used to hang: with runner.fastReruns each new request stops the running script
    stats, _ = load_test.measure("wire", sessions=2, duration=3, overlap=0.05)
    assert not stats.errors, stats.errors
    assert not stats.stuck, stats.stuck
    assert stats.overtaken > 10, "the requests did overtake their runs"
    assert len(stats.latencies) >= 2, "each session's last seed change ran to its end"
