"""Admission control: at most a few script runs execute the app's pages at once in one server process.

Streamlit starts a script thread per session and runs them all at once; under an overload (sessions sending
reruns faster than the server's cores run them) a dozen busy script threads share the GIL with the event loop
that starts new sessions' runs and sends every message, and sessions that arrive late starve
(docs/load.md, "Admission control and overload"). Here a run waits for one of
``PRIVSYN_RUN_SLOTS`` slots (default 2, the machine's cores) before it runs its page; waiting threads hold no
GIL, and they are served in the order they came (:class:`threading.Condition` wakes its waiters first in,
first out). A run that a newer rerun request overtook while it waited stops at its first Streamlit call after
it got its slot.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Iterator
from contextlib import contextmanager

RUN_SLOTS_ENV = "PRIVSYN_RUN_SLOTS"


def _slot_count() -> int:
    raw = os.environ.get(RUN_SLOTS_ENV, "2")
    if not raw.isdigit() or int(raw) < 1:
        raise ValueError(f"{RUN_SLOTS_ENV} must be a positive integer, got {raw!r}")
    return int(raw)


_SLOTS = threading.BoundedSemaphore(_slot_count())
_HELD = threading.local()


@contextmanager
def run_slot() -> Iterator[None]:
    """Hold one of the process's run slots for the block (re-entrant within a thread)."""
    if getattr(_HELD, "depth", 0):
        _HELD.depth += 1
        try:
            yield
        finally:
            _HELD.depth -= 1
        return
    with _SLOTS:
        _HELD.depth = 1
        try:
            yield
        finally:
            _HELD.depth = 0
