"""Session state of the app: widget values kept across pages, the release/teaching mode, the last result.

Streamlit drops a widget's state when another page runs; :func:`keep` saves it in ``session_state.saved``.
The mode is the server's switch (``PRIVSYN_RELEASE_ONLY``) or the sidebar's toggle; entering release mode
drops what teaching mode left behind (:func:`enforce_mode`).
"""

from __future__ import annotations

import functools
import gc
import os
import runpy
from pathlib import Path
from typing import Any

import streamlit as st

import privsyn_core as ps


@functools.cache  # once per server process: app.py calls it on every script run
def freeze_import_heap() -> None:
    """Move every object alive now (the imported modules of Streamlit, pandas, Plotly, privsyn) out of the
    cyclic garbage collector's reach (:func:`gc.freeze`), once per server process.

    A full collection walks every tracked object (hundreds of thousands after the imports), during which no other
    thread (the event loop that sends every session's messages included) runs.  Streamlit's collection after
    every script run (``runner.postScriptGC``) is off in ``.streamlit/config.toml``, but the collector also starts
    by itself in any thread, possibly one holding Streamlit's media file lock; with many sessions the
    collections saturate the interpreter (docs/load.md).  Frozen, a full collection walks only the objects made
    since.  Objects frozen here
    are still freed by reference counting; only cycles among them are never collected.
    """
    gc.collect()
    gc.freeze()


ROOT = Path(__file__).resolve().parents[2]
ASSETS = ROOT / "assets"
ENTRYPOINT_FLAG = "_entrypoint_running"


#: Server-side switch of a release-only deployment (documented in the README).
RELEASE_ONLY_ENV = "PRIVSYN_RELEASE_ONLY"


PROPOSED = "proposed from the data: NOT private"
#: Session-state key of the widget keys whose value the user chose (:func:`keep_choice`).
CHOSEN = "chosen_by_user"


def require_entrypoint() -> None:
    """Make sure this page runs inside ``app.py`` (shared state, sidebar, navigation).

    A folder named ``pages/`` next to the entry point switches Streamlit to its legacy
    multipage mode until some run calls ``st.navigation``.  In that mode (a deep link as
    the first request after the server starts, and every AppTest run) Streamlit runs the
    page script on its own.  The page then runs the entry point in its place, which
    navigates back to this page (with the flag set), and stops; widget triggers such as
    button clicks belong to this same run, so none is lost.
    """
    if not st.session_state.get(ENTRYPOINT_FLAG):
        runpy.run_path(str(ROOT / "app.py"), run_name="__main__")
        st.stop()


def keep(widget, label: str, key: str, default: Any, **kwargs: Any) -> Any:
    """Call ``widget(label, key=key, **kwargs)`` keeping its value across pages.

    Streamlit drops a widget's state when another page runs; the value is saved in
    ``session_state.saved`` and restored when the widget is drawn again.  Pass choices as
    ``options=`` so a saved value that is no longer an option falls back to ``default``.
    """
    saved = st.session_state.setdefault("saved", {})
    options = list(kwargs["options"]) if "options" in kwargs else None
    if key not in st.session_state or not _valid(st.session_state[key], options):
        st.session_state[key] = current(key, default, options)
    saved[key] = widget(label, key=key, **kwargs)
    return saved[key]


def current(key: str, default: Any, options: list | None = None) -> Any:
    """The value :func:`keep` draws the widget ``key`` with in this run: its state, else its kept value, else
    ``default`` (a value that is not one of ``options`` does not count).

    Read-only: a setting that depends on a widget drawn further down the page reads it here first.
    """
    if key in st.session_state and _valid(st.session_state[key], options):
        return st.session_state[key]
    value = saved_value(key, default)
    return value if _valid(value, options) else default


def keep_choice(widget, label: str, key: str, default: Any, **kwargs: Any) -> Any:
    """:func:`keep` for a choice whose default follows other settings until the user makes the choice.

    Until the user changes the widget (its ``on_change``) or a button sets it (:func:`mark_chosen`), it is drawn
    with ``default``, whatever it showed before; once chosen, the value is kept as :func:`keep` keeps it.
    """
    if key not in st.session_state.get(CHOSEN, ()):
        forget(key)
    return keep(widget, label, key, default, on_change=mark_chosen, args=(key,), **kwargs)


def mark_chosen(key: str) -> None:
    """Record that the user chose the value of the widget ``key`` (:func:`keep_choice` keeps it from now on)."""
    st.session_state.setdefault(CHOSEN, set()).add(key)


def capped(widget, label: str, key: str, default: Any, *, max_value: int | float, **kwargs: Any) -> Any:
    """:func:`keep` for a number widget whose maximum may have shrunk since its value was set.

    A kept value above ``max_value`` (say, rows chosen before more columns were) is lowered to it first:
    Streamlit refuses a widget whose value exceeds its maximum.
    """
    saved = st.session_state.setdefault("saved", {})
    for holder in (st.session_state, saved):
        if key in holder and holder[key] is not None and holder[key] > max_value:
            holder[key] = type(holder[key])(max_value)
    return keep(widget, label, key, min(default, max_value), max_value=max_value, **kwargs)


def saved_value(key: str, default: Any = None) -> Any:
    return st.session_state.get("saved", {}).get(key, default)


def forget(key: str) -> None:
    """Drop a widget's kept value, so that :func:`keep` draws it with its default next time."""
    st.session_state.get("saved", {}).pop(key, None)
    st.session_state.pop(key, None)


def _valid(value: Any, options: list | None) -> bool:
    if options is None:
        return True
    if isinstance(value, list):
        return all(v in options for v in value)
    return value in options


def release_locked() -> bool:
    """True in a release-only deployment: ``PRIVSYN_RELEASE_ONLY=1`` in the server's environment.

    The server's setting, not the session's: a reload or a new session starts in release mode again
    and no widget can turn it off.
    """
    return os.environ.get(RELEASE_ONLY_ENV, "").strip().lower() in ("1", "true", "yes", "on")


def release_mode() -> bool:
    return release_locked() or bool(saved_value("w_release", False))


def release_toggle() -> None:
    """The sidebar's release-mode switch, drawn here beside :func:`release_mode`, which reads its kept value."""
    keep(st.toggle, "Release mode", "w_release", False,
         help="Release mode never shows raw data, true counts or metrics on raw data, and draws noise "
              "from a cryptographically secure generator (runs cannot be reproduced by a seed).")


def release_rng() -> str | int:
    """The generator of a release: always the secure one (tests replace this to compare neighbours)."""
    return "secure"


def enforce_mode() -> None:
    """Entering release mode drops everything the teaching mode left behind.

    A result made in teaching mode (seeded, maybe non-private, maybe on a domain read off the data)
    must not stay on screen or be downloadable as "the private release"; the several-mechanism table,
    the sweep and the Over time page's W1 and clipped-row counts hold figures read off raw data; domains
    proposed from the data must not stay visible.
    """
    if not release_mode():
        return
    if st.session_state.get("result") is not None and st.session_state.get("result_mode") != "release":
        st.session_state.result = st.session_state.run = None
    st.session_state.compare = st.session_state.sweep = None
    for key in ("over_time", "over_time_clipped"):
        st.session_state.pop(key, None)
    if (st.session_state.get("bounds_notes") or {}).get("clipped") is not None:  # teaching notes read raw rows
        st.session_state.bounds_notes = None
    entries = st.session_state.get("schema_entries", {})
    if any(e.get("source") == PROPOSED for e in entries.values()):
        set_schema_entries({k: e for k, e in entries.items() if e.get("source") != PROPOSED})


def set_schema_entries(entries: dict[str, dict]) -> None:
    st.session_state.schema_entries = entries
    st.session_state.schema_version = st.session_state.get("schema_version", 0) + 1


def store_result(result: ps.SynthResult, key: dict) -> None:
    st.session_state.result, st.session_state.run = result, key
    st.session_state.result_mode = "release" if release_mode() else "teaching"


def drop_result() -> None:
    st.session_state.result = st.session_state.run = None


def mechanisms() -> list[ps.MechanismSpec]:
    """The mechanisms offered: in release mode only the differentially private ones."""
    return [s for s in ps.list_mechanisms() if s.is_private or not release_mode()]
