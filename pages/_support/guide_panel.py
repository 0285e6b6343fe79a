"""The guide panel of the Synthesize page: :func:`privsyn_core.evaluation.guide.recommend` on the public shape
of the table.

It reads only public inputs: the schema (number of columns and their kinds), epsilon, and the number of
rows where it is public (replace-one neighbours); under add/remove the row count is private, so the
user types a public estimate instead.  The recommendation, its reason and the measured ranges it rests
on are shown as the guide returns them (measured figures, not bounds), with the recommended mechanism's
floating-point exposure in the words of the reports (:func:`privsyn_core.reporting.words.floating_point`).
Until the user chooses a mechanism, the page's chooser shows the guide's pick (:func:`default_choice`).
"""

from __future__ import annotations

import functools

import streamlit as st

import privsyn_core as ps
from privsyn_core.evaluation import guide
from privsyn_core.evaluation.guide import column_kinds
from privsyn_core.reporting import words

from . import data_state, state
from .text import md

#: The row count the add/remove estimate starts from (the user replaces it with a public figure).
DEFAULT_ESTIMATE = 1000


@functools.lru_cache(maxsize=256)
def recommended(n_columns: int, n_rows: int, kinds: tuple[str, ...], epsilon: float,
                peers: bool = True) -> guide.Recommendation:
    """:func:`guide.recommend` (pure, on public inputs), kept per process: the panel asks on every rerun."""
    return guide.recommend(n_columns, n_rows, kinds, epsilon, peers=peers)


@functools.lru_cache(maxsize=256)
def default_choice(schema: ps.Schema | None, offered: tuple[str, ...], epsilon: float, n_rows: int) -> str:
    """The mechanism the page shows until the user chooses one: the guide's pick among this library's own
    mechanisms (a peer takes minutes: the panel offers it with a button, never as the default) for ``schema`` at
    ``epsilon`` and about ``n_rows`` rows when it is in ``offered``, else the first offered (the registry's display
    order).

    Pure, on public inputs only (the schema, epsilon, a public row count or estimate).
    """
    if schema is not None:
        kinds = tuple(column_kinds(schema))
        pick = recommended(len(kinds), n_rows, kinds, float(epsilon), peers=False).mechanism
        if pick in offered:
            return pick
    return offered[0]


def public_rows(schema: ps.Schema | None, neighbouring: str) -> int | None:
    """The record count the guide may read: under replace-one neighbours (where it is public) and outside release
    mode (which shows nothing read off the data); else ``None`` (a public estimate is asked for)."""
    if schema is None or neighbouring != "replace" or state.release_mode():
        return None
    return len(data_state.table())


def rows(n_public: int | None) -> int:
    """The row count the guide reads: ``n_public``, else the estimate typed in the panel (or its start value)."""
    return n_public if n_public is not None else int(st.session_state.get("w_guide_n", DEFAULT_ESTIMATE))


def measured(low_high: tuple[float, float] | None) -> str:
    """A measured range as text: ``a to b``, one value when there is no spread, or that nothing was measured."""
    if low_high is None:
        return "not measured"
    low, high = low_high
    if low == high:
        return f"{low:.3g} (a single measured run: no spread measured)"
    return f"{low:.3g} to {high:.3g}"


def show(schema: ps.Schema | None, epsilon: float, neighbouring: str, n_public: int | None,
         offered: list[str], choose_key: str) -> None:
    """Draw the panel.

    Parameters
    ----------
    schema : Schema or None
        The public schema of the chosen columns (``None`` while incomplete: the panel says so).
    epsilon : float
    neighbouring : {"replace", "add_remove"}
    n_public : int or None
        The record count when it is public (replace-one), else ``None``: a public estimate is asked for.
    offered : list of str
        Mechanisms the page offers; a "use it" button appears when the recommendation is one of them.
    choose_key : str
        Session-state key of the page's mechanism chooser (the button sets it).
    """
    if schema is None:
        st.caption("Guide: complete the public domain of every column on the Data page to get a recommendation.")
        return
    with st.container(border=True):
        st.markdown("**Guide: which mechanism to try first for this table**")
        if n_public is None:
            n_rows = int(st.number_input(
                "A public estimate of the number of rows", min_value=1, value=DEFAULT_ESTIMATE, step=100,
                key="w_guide_n", help="Neighbours differ by adding or removing one record, so the row count is "
                                      "private: the guide reads a figure you know from public sources."))
        else:
            n_rows = n_public
            st.caption(f"Rows: {n_rows:,} (public: neighbours differ by replacing one record).")
        kinds = column_kinds(schema)
        found = recommended(len(kinds), n_rows, tuple(kinds), float(epsilon))
        st.markdown(f"**Try {md(found.mechanism)} first.** {md(found.why)}")
        if found.mechanism and ps.get_mechanism(found.mechanism).floating_point_exposure:
            st.info(md(words.floating_point(ps.get_mechanism(found.mechanism))))
        st.markdown(f"- mean 2-way marginal TVD (robust: averaged over 16 bin grids): "
                    f"{measured(found.expected_tvd2_range)}\n"
                    f"- mean 1-way marginal TVD: {measured(found.expected_tvd1_range)}\n"
                    f"- W1 in the unit cube (l-infinity): {measured(found.expected_w1_range)}")
        st.caption("Ranges span this mechanism's 95% intervals on the real benchmark tables most like this shape "
                   f"({md(', '.join(found.evidence))}; docs/benchmark_real_tables.md): measured figures with their "
                   "uncertainty, not bounds, and only as good as those tables resemble yours.")
        if found.mechanism in offered and st.session_state.get(choose_key) != found.mechanism:
            st.button(f"Use {found.mechanism}", key="w_guide_use", on_click=_choose, args=(choose_key, found.mechanism))
        elif found.mechanism not in offered:
            st.caption(f"{md(found.mechanism)} is not offered for the chosen columns or in this mode.")


def _choose(key: str, name: str) -> None:
    """Callback of the "use it" button: the user's choice of the page's chooser (kept across pages)."""
    st.session_state[key] = name
    st.session_state.setdefault("saved", {})[key] = name
    state.mark_chosen(key)
