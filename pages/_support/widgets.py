"""Widgets the pages share: a mechanism's parameters (size parameters capped by the memory budget), epsilon in
words, the not-private label, errors shown as boxes, the last run and a pair of axes."""

from __future__ import annotations

import contextlib
import math
from collections.abc import Iterator
from typing import Any

import streamlit as st

import privsyn_core as ps
from privsyn_core.mechanisms.base import resources
from privsyn_core.reporting.plot_data import NOT_PRIVATE

from .data_state import columns
from .state import capped, keep
from .text import md

EPSILONS = (0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1.0, 2.0, 5.0, 10.0, 20.0, 50.0, 100.0)
LIVE_MAX_ROWS = 10_000


def max_synthetic_rows() -> int:
    """The most synthetic rows the memory budget holds for the chosen columns (:func:`resources.max_rows`).

    Reads only public inputs: the number of columns and ``PRIVSYN_MEMORY_BUDGET_MB``.
    """
    return resources.max_rows(max(len(columns()), 1))


def row_cap_caption(limit: int) -> str:
    return (f"At most {limit:,} rows for {max(len(columns()), 1)} column(s): the memory budget of "
            f"{resources.budget_bytes() / 2**20:,.0f} MB (PRIVSYN_MEMORY_BUDGET_MB).")


def param_widgets(spec: ps.MechanismSpec) -> dict[str, Any]:
    """One widget per parameter; returns the values (None = auto)."""
    values = {}
    for name, p in spec.params.items():
        key = f"w_param_{spec.name}_{name}"
        label = f"{name}"
        if p.type is bool:
            values[name] = keep(st.checkbox, label, key, bool(p.default), help=p.help)
        elif p.type is str:
            choices = list(p.choices or [p.default])
            values[name] = keep(st.selectbox, label, key, p.default if p.default in choices else choices[0],
                                options=choices, help=p.help)
        else:
            values[name] = _number_param(name, p, key)
    return values


def _number_param(name: str, p: ps.ParamSpec, key: str) -> Any:
    options = (["auto"] if p.default is None else []) + [str(c) for c in (p.choices or ())] + ["number"]
    default = "auto" if p.default is None else (str(p.default) if p.choices and p.default in p.choices else "number")
    mode = default
    if len(options) > 1:
        mode = keep(st.selectbox, f"{name}", f"{key}_mode", default, options=options, help=p.help)
    if mode == "auto":
        return None
    if mode != "number":
        return next(c for c in (p.choices or ()) if str(c) == mode)
    lo, hi = p.bounds if p.bounds else (None, None)
    number_default = p.default if isinstance(p.default, (int, float)) and not isinstance(p.default, bool) else lo
    if p.type is int:
        if p.limit is not None:
            largest, reason = p.limit(max(len(columns()), 1))
            hi = largest if hi is None else min(int(hi), largest)
            value = int(capped(st.number_input, f"{name} value", key,
                               int(number_default if number_default is not None else 1),
                               min_value=None if lo is None else int(lo), max_value=int(hi), step=1, help=p.help))
            st.caption(f"{name} at most {hi} for {max(len(columns()), 1)} column(s): {reason}.")
            return value
        return int(keep(st.number_input, f"{name} value", key,
                        int(number_default if number_default is not None else 1),
                        min_value=None if lo is None else int(lo), max_value=None if hi is None else int(hi),
                        step=1, help=p.help))
    return float(keep(st.number_input, f"{name} value", key,
                      float(number_default if number_default is not None else 1.0),
                      min_value=None if lo is None else float(lo), max_value=None if hi is None else float(hi),
                      help=p.help))


def epsilon_guidance(epsilon: float) -> str:
    ratio = math.exp(epsilon)
    level = ("very strong privacy" if epsilon <= 0.1 else "strong privacy" if epsilon <= 1
             else "moderate privacy" if epsilon <= 5 else "weak privacy: mostly for teaching")
    return (f"**epsilon = {epsilon:g}: {level}.** Whatever an observer believes about any one person, seeing the "
            f"release changes the odds by at most a factor e^epsilon = {ratio:.3g}. Smaller epsilon means more "
            "noise and less accuracy.")


def not_private(what: str = "this view") -> None:
    """The label every teaching view on raw data carries."""
    st.caption(f":orange[**:material/warning: {NOT_PRIVATE}**] ({what})")


@contextlib.contextmanager
def user_errors() -> Iterator[None]:
    """Show a :class:`PrivsynError` as an error box instead of a traceback."""
    try:
        yield
    except ps.PrivsynError as exc:
        st.error(md(str(exc).strip().splitlines()[0]) if str(exc).strip() else type(exc).__name__)
    except MemoryError:
        st.error("out of memory: use fewer rows, fewer cells or a smaller synthetic size")


def need_result(*, on_synthesize: bool = False) -> tuple[ps.SynthResult, dict] | None:
    """The last run, or an explanation when there is none (``on_synthesize``: the page that makes runs)."""
    result, key = st.session_state.get("result"), st.session_state.get("run")
    if result is None or key is None:
        here = on_synthesize
        st.info("No synthetic data yet: choose a mechanism above and click **Run**." if here else
                "No synthetic data yet: run a mechanism on the **Synthesize** page first.")
        return None
    return result, key


def axis_pair(names: list[str], prefix: str) -> tuple[int, int]:
    """Two axes to draw (a chooser when d > 2)."""
    if len(names) == 1:
        return 0, 0
    if len(names) == 2:
        return 0, 1
    cols = st.columns(2)
    with cols[0]:
        a = keep(st.selectbox, "x axis", f"w_{prefix}_x", names[0], options=names)
    with cols[1]:
        b = keep(st.selectbox, "y axis", f"w_{prefix}_y", names[1], options=names)
    return names.index(a), names.index(b)
