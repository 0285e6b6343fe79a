"""Admission control of the app's script runs (pages/_support/admission.py)."""

from __future__ import annotations

import importlib
import threading
import time

import pytest

from pages._support import admission


def test_at_most_the_slot_count_of_runs_hold_a_slot_at_once():
    """Eight threads each hold a slot for 50 ms: never more than two inside at once, and all of them get in (a
    semaphore that let everyone in, or one that lost a release, fails)."""
    inside, most, done = 0, 0, []
    lock = threading.Lock()

    def run(i: int) -> None:
        nonlocal inside, most
        with admission.run_slot():
            with lock:
                inside += 1
                most = max(most, inside)
            time.sleep(0.05)
            with lock:
                inside -= 1
        done.append(i)

    threads = [threading.Thread(target=run, args=(i,)) for i in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=10)
    assert sorted(done) == list(range(8))
    assert most == 2


def test_a_slot_is_reentrant_within_a_thread_and_released_on_errors():
    """A page that runs the entry point inside its own run takes no second slot (two nested holds in each of two
    threads would otherwise wait for ever); an exception gives the slot back."""
    results = []

    def nested() -> None:
        with admission.run_slot(), admission.run_slot(), admission.run_slot():
            time.sleep(0.01)
        results.append(True)

    threads = [threading.Thread(target=nested) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=5)
    assert results == [True, True]
    for _ in range(3):
        with pytest.raises(RuntimeError), admission.run_slot():
            raise RuntimeError("a run that failed")
    assert admission._SLOTS.acquire(timeout=1) and admission._SLOTS.acquire(timeout=1)
    admission._SLOTS.release()
    admission._SLOTS.release()


def test_the_slot_count_comes_from_the_environment_and_bad_values_are_refused(monkeypatch):
    monkeypatch.setenv(admission.RUN_SLOTS_ENV, "3")
    assert admission._slot_count() == 3
    for bad in ("0", "-1", "two", ""):
        monkeypatch.setenv(admission.RUN_SLOTS_ENV, bad)
        with pytest.raises(ValueError, match=admission.RUN_SLOTS_ENV):
            admission._slot_count()
    monkeypatch.delenv(admission.RUN_SLOTS_ENV)
    assert importlib.reload(admission)._slot_count() == 2
