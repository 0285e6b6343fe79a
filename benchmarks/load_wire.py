"""The ``--client wire`` sessions of :mod:`benchmarks.load_test`: Streamlit's own websocket protocol, no browser.

Each session is one websocket to ``ws://HOST:PORT/_stcore/stream`` speaking what the Streamlit 1.67 frontend
speaks (``streamlit/web/server/starlette/starlette_websocket.py``, ``streamlit/runtime/app_session.py``):

* the ``Sec-WebSocket-Protocol`` header names the subprotocol ``streamlit`` (the frontend appends an XSRF token
  and a session id to reconnect; the server checks the token only when the request carries an ``Origin``, and a
  fresh session has no id to resume);
* the client sends ``BackMsg.rerun_script`` (a ``ClientState``): the first with ``page_name`` "" (the URL's path,
  the default page), a page change with the ``page_script_hash`` read off the server's ``navigation`` message,
  and every widget interaction with the widgets' states (``WidgetStates``): ``trigger_value`` for a clicked
  button, ``int_value`` for an integer ``number_input``, ``string_value`` (the shown option) for a selectbox;
* the server answers with ``ForwardMsg``\\ s: ``new_session`` when a run starts, ``delta``\\ s (elements), and
  ``script_finished`` when it ends (``FINISHED_EARLY_FOR_RERUN`` when a run is cut short and another follows).

Widget ids are read from each run's deltas by type and label, so they follow the page if it changes them.  A run
is timed from sending its ``rerun_script`` until its ``script_finished``.  What the frontend does that this client
does not: it re-sends the unchanged values of every widget on the page with each rerun (the server keeps a
widget's value across runs when it is not sent, so the run is the same); it lists the message hashes it has cached
(``cached_message_hashes``), so the server may send a reference instead of a repeated large message (here every
message comes in full, slightly more work for the server); it sends heartbeats; it renders.

A run ends with the ``script_finished`` carrying the ``script_run_id`` of the last ``new_session``: with
``runner.fastReruns`` the server stops a running script for a newer request and drops the stopped run's events,
so a stopped run may never end.  The client is the ``websockets`` package, which Streamlit 1.67 itself requires
(its server runs on Starlette and uvicorn; Tornado is no longer one of its dependencies).
"""

from __future__ import annotations

import asyncio
import contextlib
import re
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import websockets
from streamlit.proto.BackMsg_pb2 import BackMsg
from streamlit.proto.ClientState_pb2 import ClientState
from streamlit.proto.ForwardMsg_pb2 import ForwardMsg
from streamlit.proto.WidgetStates_pb2 import WidgetState

#: ``script_finished`` statuses that end a run (not ``FINISHED_EARLY_FOR_RERUN``: another run follows it).
ENDS = frozenset({ForwardMsg.FINISHED_SUCCESSFULLY, ForwardMsg.FINISHED_WITH_COMPILE_ERROR,
                  ForwardMsg.FINISHED_FRAGMENT_RUN_SUCCESSFULLY})
#: The Synthesize page's status once the mechanism has run (``pages/synthesize.py``).
DONE = re.compile(r"Done in ([0-9.]+) s")
#: The largest message a session accepts (a 200-row table preview is far below it).
MAX_MESSAGE = 64 * 2**20


class Stuck(Exception):
    """The server did not finish (or did not start) a requested run within the stuck limit."""


class Failed(Exception):
    """A run ended badly: an exception element, a compile error, a closed socket, or a widget not on the page."""


@dataclass
class RunView:
    """What the server sent during one run: widget ids by (type, label), exceptions, texts of interest."""

    widgets: dict[tuple[str, str], str] = field(default_factory=dict)
    options: dict[str, list[str]] = field(default_factory=dict)
    exceptions: list[str] = field(default_factory=list)
    metrics: list[str] = field(default_factory=list)
    statuses: list[str] = field(default_factory=list)
    deltas: int = 0

    def add(self, element) -> None:
        kind = element.WhichOneof("type")
        if kind is None:
            return
        widget = getattr(element, kind)
        if kind == "exception":
            self.exceptions.append(f"{widget.type}: {widget.message}"[:300])
        elif kind == "metric":
            self.metrics.append(widget.label)
        elif kind == "markdown" and DONE.search(widget.body):  # the page's status caption ("Done in X s")
            self.statuses.append(widget.body)
        elif hasattr(widget, "id") and hasattr(widget, "label") and widget.id:
            self.widgets[(kind, widget.label)] = widget.id
            if kind == "selectbox":
                self.options[widget.id] = list(widget.options)

    def mechanism_seconds(self) -> float | None:
        """The mechanism's time as the page's status shows it ("Done in 0.05 s"); None if it did not run."""
        for label in self.statuses:
            if found := DONE.search(label):
                return float(found[1])
        return None

    def widget(self, kind: str, label: str) -> str:
        try:
            return self.widgets[(kind, label)]
        except KeyError:
            raise Failed(f"no {kind} labelled {label!r} on the page") from None


@dataclass
class WireSession:
    """One websocket session: sends reruns, reads the server's messages, times runs and detects stuck ones."""

    url: str
    stuck_s: float
    timeout_s: float
    started: int = 0
    #: the ``script_run_id`` of the last run the server started, and of the runs that ended
    run_id: str = ""
    ended: set[str] = field(default_factory=set)
    last_start: float = 0.0
    last_message: float = 0.0
    #: when the last rerun request was sent, until a ``new_session`` follows it (None: none is waiting)
    pending_since: float | None = None
    deltas_since_start: int = 0
    pages: dict[str, str] = field(default_factory=dict)
    view: RunView = field(default_factory=RunView)
    #: the widget ids of the runs before this one, by (type, label) (the current run may not have drawn it yet)
    known: dict[tuple[str, str], str] = field(default_factory=dict)
    status: int = ForwardMsg.FINISHED_SUCCESSFULLY
    closed: str = ""
    changed: asyncio.Event = field(default_factory=asyncio.Event)

    def on_message(self, payload: bytes | str) -> None:
        if isinstance(payload, str):
            return
        message = ForwardMsg()
        message.ParseFromString(payload)
        kind = message.WhichOneof("type")
        now = self.last_message = time.monotonic()
        if kind == "new_session":
            self.known.update(self.view.widgets)
            self.started, self.last_start, self.deltas_since_start, self.view = self.started + 1, now, 0, RunView()
            self.run_id = message.metadata.run.script_run_id or f"run {self.started}"
            self.pending_since = None
        elif kind == "navigation":
            self.pages = {page.page_name: page.page_script_hash for page in message.navigation.app_pages}
        elif kind == "delta":
            self.deltas_since_start += 1
            self.view.deltas += 1
            delta = message.delta
            if delta.WhichOneof("type") == "new_element":
                self.view.add(delta.new_element)
            elif delta.WhichOneof("type") == "add_block" and delta.add_block.WhichOneof("type") == "expandable":
                self.view.statuses.append(delta.add_block.expandable.label)
        elif kind == "script_finished":
            if message.script_finished in ENDS:
                self.ended.add(message.metadata.run.script_run_id or self.run_id)
                self.status = message.script_finished
        else:
            return
        self.changed.set()

    def widget(self, kind: str, label: str) -> str:
        """The id of the widget ``kind`` labelled ``label``: as this run drew it, else as the last run that did."""
        if (kind, label) in self.view.widgets or (kind, label) not in self.known:
            return self.view.widget(kind, label)
        return self.known[(kind, label)]

    @property
    def running(self) -> bool:
        """The last run the server started has not ended (a run stopped for another may never send its end)."""
        return self.started > 0 and self.run_id not in self.ended

    async def read(self, ws) -> None:
        """Feed every message to :meth:`on_message` until the socket closes."""
        try:
            async for payload in ws:
                self.on_message(payload)
        except websockets.ConnectionClosed as exc:
            self.closed = f"websocket closed ({exc})"
        finally:
            self.closed = self.closed or "websocket closed"
            self.changed.set()

    async def rerun(self, ws, state: ClientState, patience: float | None = None) -> float | None:
        """Send one ``rerun_script`` and wait for the run it starts to end; the seconds it took.

        With ``patience``, give up waiting after that many seconds and return None (the caller sends its next
        request while this run is still going, as the frontend does when a user types faster than the app runs);
        such a request is never stuck: the server may stop its run, or drop it unstarted, for the next.
        Raises :class:`Stuck` when no run starts within ``stuck_s`` seconds of the request, or its run has gone
        ``stuck_s`` seconds without ``script_finished``; :class:`Failed` when the socket closes, the run shows an
        exception or does not compile.
        """
        started = self.started
        message = BackMsg()
        message.rerun_script.CopyFrom(state)
        sent = time.monotonic()
        await ws.send(message.SerializeToString())
        self.pending_since = sent
        while True:
            now = time.monotonic()
            if self.started > started and not self.running:
                break
            if self.closed:
                raise Failed(self.closed)
            if patience is not None and now - sent >= patience:
                return None
            if self.pending_since is not None and now - self.pending_since > self.stuck_s:
                raise Stuck(f"no new_session {now - self.pending_since:.0f} s after rerun_script")
            if self.running and now - max(self.last_start, sent) > self.stuck_s:
                raise Stuck(f"no script_finished {now - max(self.last_start, sent):.0f} s after new_session "
                            f"({self.deltas_since_start} deltas since; last message {now - self.last_message:.0f} s"
                            " ago)")
            if now - sent > self.timeout_s:
                raise Failed(f"run not over {now - sent:.0f} s after rerun_script")
            self.changed.clear()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self.changed.wait(), timeout=1.0 if patience is None else
                                       min(1.0, max(0.0, patience - (now - sent))))
        elapsed = time.monotonic() - sent
        if self.status == ForwardMsg.FINISHED_WITH_COMPILE_ERROR:
            raise Failed("script_finished with a compile error")
        if self.view.exceptions:
            raise Failed(f"exception shown: {self.view.exceptions[0]}")
        return elapsed


def client_state(*, page_name: str | None = None, page_script_hash: str = "",
                 widgets: dict[str, WidgetState] | None = None) -> ClientState:
    """The ``ClientState`` of a rerun as the frontend fills it (a browser in UTC at the root URL)."""
    state = ClientState(page_script_hash=page_script_hash, query_string="")
    if page_name is not None:
        state.page_name = page_name
    state.context_info.timezone, state.context_info.timezone_offset = "UTC", 0
    state.context_info.locale, state.context_info.is_embedded = "en-US", False
    state.widget_states.widgets.extend(widgets.values() if widgets else ())
    return state


async def session(url: str, duration: float, think: float, mechanism: str | None, index: int, *,
                  stuck_s: float, timeout_s: float, record: Callable[[float | None, float | None], None],
                  step: list[str], overlap: float | None = None) -> None:
    """Open the Synthesize page, click Run, then change the seed for ``duration`` s (``think`` s between changes).

    With ``overlap``, the next seed change goes ``overlap`` s after the last one even when its run has not ended
    (``record(None, None)`` for a request overtaken so); the last one is waited for.

    ``record(seconds, mechanism_seconds)`` is called for every seed-change run (``mechanism_seconds`` read off the
    page's "Done in X s" status, None when the mechanism did not run); ``step[0]`` names the current step for the
    caller's report.  Exceptions (:class:`Stuck`, :class:`Failed`, ``OSError``) go to the caller.
    """
    wire = WireSession(url, stuck_s, timeout_s)
    step[0] = "connect"
    async with websockets.connect(url, subprotocols=[websockets.Subprotocol("streamlit")], max_size=MAX_MESSAGE,
                                  open_timeout=timeout_s, close_timeout=5) as ws:
        reader = asyncio.create_task(wire.read(ws))
        try:
            step[0] = "open the app"
            await wire.rerun(ws, client_state(page_name=""))
            step[0] = "go to Synthesize"
            if "Synthesize" not in wire.pages:
                raise Failed(f"no Synthesize page in the navigation ({sorted(wire.pages)})")
            page = wire.pages["Synthesize"]
            await wire.rerun(ws, client_state(page_script_hash=page))
            states: dict[str, WidgetState] = {}
            if mechanism:
                step[0] = f"choose {mechanism}"
                box = wire.view.widget("selectbox", "Mechanism")
                chosen = [o for o in wire.view.options.get(box, []) if o.endswith(f"[{mechanism}]")]
                if not chosen:
                    raise Failed(f"mechanism {mechanism!r} is not offered")
                states[box] = WidgetState(id=box, string_value=chosen[0])
                await wire.rerun(ws, client_state(page_script_hash=page, widgets=states))
            step[0] = "click Run"
            run_button = wire.view.widget("button", "Run")
            await wire.rerun(ws, client_state(page_script_hash=page,
                                              widgets={**states, run_button: WidgetState(id=run_button,
                                                                                          trigger_value=True)}))
            if "epsilon spent" not in wire.view.metrics:
                raise Failed("the run shows no 'epsilon spent'")
            step[0] = "change the seed"
            seed, deadline = 1000 * index, time.monotonic() + duration
            while time.monotonic() < deadline:
                if think:
                    await asyncio.sleep(think)
                seed += 1
                box = wire.widget("number_input", "Seed (same seed, same output)")
                states[box] = WidgetState(id=box, int_value=seed)
                last = time.monotonic() >= deadline - (overlap or 0)
                seconds = await wire.rerun(ws, client_state(page_script_hash=page, widgets=states),
                                           None if last else overlap)
                record(seconds, None if seconds is None else wire.view.mechanism_seconds())
        finally:
            reader.cancel()
