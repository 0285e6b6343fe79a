"""State that several pages share, behind named accessors: no page reads another page's widget keys.

A widget's key belongs to the page that draws it (``w_columns`` to Data, ``w_seed`` to Synthesize,
``w_cmp_target`` to Compare).  Reading it from elsewhere couples the pages to each other's widget
names and to Streamlit's rule that a widget's state is dropped when its page is not drawn.  Instead
the owning page *publishes* the value here after drawing its widget, and every other reader asks this
module.  Values live in ``st.session_state["shared"]``, a plain dict that no widget owns.

``tests/test_shared_state.py`` checks that every ``w_...`` key string appears in one page only.
"""

from __future__ import annotations

from typing import Any

import streamlit as st

_KEY = "shared"


def _state() -> dict[str, Any]:
    return st.session_state.setdefault(_KEY, {})


def columns() -> list[str]:
    """The columns chosen on the Data page (every column of a table just loaded)."""
    return list(_state().get("columns") or [])


def set_columns(names: list[str]) -> None:
    _state()["columns"] = [str(n) for n in names]


def seed() -> int:
    """The seed chosen on the Synthesize page (0 until it was drawn): teaching runs elsewhere reuse it."""
    return int(_state().get("seed", 0))


def set_seed(value: int) -> None:
    _state()["seed"] = int(value)


def tstr_target() -> str | None:
    """The column chosen on the Compare page for train-on-synthetic/test-on-real (``None``: no TSTR)."""
    target = _state().get("tstr_target")
    return None if target in (None, "none") else str(target)


def set_tstr_target(value: str | None) -> None:
    _state()["tstr_target"] = None if value in (None, "none") else str(value)
