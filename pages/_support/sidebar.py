"""The sidebar: the mode switch, the line naming the current data and the data's privacy ledger and budget."""

from __future__ import annotations

import math

import streamlit as st

from privsyn_core.reporting.plot_data import NOT_PRIVATE

from . import ledger as store
from .data_state import columns, ledger_id, table
from .state import enforce_mode, release_locked, release_mode, release_toggle
from .text import md


def sidebar_controls() -> None:
    with st.sidebar:
        if release_locked():
            st.success("Release-only deployment: only private outputs are shown, and teaching mode is switched "
                       "off on this server.")
        else:
            release_toggle()
            if release_mode():
                st.success("Release mode: only private outputs are shown.")
            else:
                st.info(f"Teaching mode: views marked '{NOT_PRIVATE}' read the raw data.")
        enforce_mode()
        st.session_state.sidebar_data = st.empty()  # filled after the page ran: an upload there is the current data


def sidebar_data() -> None:
    """The sidebar's line naming the current data, drawn after the page (which may have loaded new data)."""
    data = st.session_state.get("data")
    slot = st.session_state.pop("sidebar_data", None) or st.sidebar.empty()
    note = st.session_state.get("restore_note")
    if note:
        st.sidebar.warning(note)
    if data is None:
        slot.caption("Data: none (the last file could not be read)")
        return
    rows = "" if release_mode() else f"{len(table()):,} rows, "
    slot.caption(f"Data: **{md(data['name'])}**, {rows}{len(columns())} column(s) chosen")


RELATION_WORDS = {"replace": "replacing one record", "add_remove": "adding or removing one record"}


def sidebar_ledger() -> None:
    """The data's privacy ledger and budget (drawn after the page ran, so it includes this run's spends).

    Kept by the library's ledger (:mod:`pages._support.ledger`): a reload, another session or a server restart
    meets the same spends on uploaded data; a bundled sample's ledger is this session's.  A ledger that cannot
    be trusted is named in one sentence, and every release is refused.
    """
    if st.session_state.get("data") is None:
        return
    with st.sidebar:
        st.subheader("Privacy ledger of this data")
        try:
            _ledger_panel(ledger_id())
        except store.LedgerError as exc:
            st.error(str(exc))


def _ledger_panel(did: str) -> None:
    cap = store.budget(did)  # read once per rerun (a change of the field was applied by its callback already)
    _budget_control(did, cap)
    private, n_private = store.spends(did, last=LAST_SPENDS, private=True), store.count(did, private=True)
    others, n_others = store.spends(did, last=LAST_SPENDS, private=False), store.count(did, private=False)
    totals = store.totals(did)
    if not private:
        st.caption("No private release on this data yet.")
    for relation, total in totals.items():
        st.metric(f"Total epsilon ({relation.replace('_', '/')})", f"{total:g}",
                  help=f"Private releases on this data whose neighbours differ by "
                       f"{RELATION_WORDS.get(relation, relation)}")
    spent = math.fsum(totals.values())
    if cap:
        st.progress(min(spent / cap, 1.0), text=f"{spent:g} of the budget {cap:g} spent")
    if private:
        lines = [f"{i}. {md(e['label'])}: **epsilon {e['epsilon']:g}**"
                 for i, e in enumerate(private, n_private - len(private) + 1)]
        st.markdown((f"(the last {len(private)} of {n_private})\n" if n_private > len(private) else "")
                    + "\n".join(lines))
        st.caption("Releases on the same data compose: their epsilons add up. "
                   + ("Every run spends epsilon again." if release_mode() else
                      "Re-running with a new seed spends epsilon again; the same teaching run with the same seed "
                      "does not."))
    if others:
        with st.expander(f"Not private: {n_others} run(s), outside the budget"):
            st.markdown("\n".join(f"- {md(e['label'])}" for e in others))
            st.caption("A mechanism that is not private, or a domain read off the data (dp_valid = False): "
                       "no privacy guarantee, so no epsilon to add up.")


#: How many of the last spends the sidebar lists (the totals count every one).
LAST_SPENDS = 8
OPERATOR_COMMAND = "python -m privsyn_core budget set DATA.csv EPSILON --schema SCHEMA.json"


def _budget_control(did: str, cap: float | None) -> None:
    """The budget: read-only on a release-only server (the operator's), tighten-only on uploaded data, free on a
    bundled sample's per-session ledger.  Written only by the user's own change of the field (a callback),
    never from a value the session drew earlier."""
    owner = store.budget_owner(did)
    if release_locked():
        if cap is None:
            st.error("No privacy budget is set by the operator for this data: every release is refused. "
                     f"The operator sets one with `{OPERATOR_COMMAND}` or PRIVSYN_BUDGET.")
        else:
            st.caption(f"Budget for this data: **epsilon {cap:g}**, set by the operator (read-only here).")
        return
    sample = bool(st.session_state.data.get("sample"))
    key = f"w_budget_{st.session_state.get('data_version', 0)}"
    if key not in st.session_state:  # drawn once from the ledger; afterwards only the user's change is written
        st.session_state[key] = float(cap or 0.0)
    st.number_input("Budget for this data (total epsilon; 0 = no budget)" if sample else
                    "Budget for this data (total epsilon; lower only)", min_value=0.0, step=0.5,
                    key=key, on_change=_budget_changed, args=(did, key, sample),
                    help="Private releases that would take the total above it are refused."
                    + ("" if sample else " From here a budget can only be set or lowered; the operator raises "
                       f"or removes it (`{OPERATOR_COMMAND}`)."))
    if owner == "operator" or owner == "default":
        st.caption("Set by the operator.")


def _budget_changed(did: str, key: str, sample: bool) -> None:
    """The user changed the budget field: a sample's ledger is the session's own; shared data only tightens."""
    value = float(st.session_state.get(key) or 0.0)
    if sample:
        store.set_budget(did, value or None)
    elif value > 0:
        st.session_state[key] = store.tighten_budget(did, value)
    else:
        st.session_state[key] = float(store.budget(did) or 0.0)
