"""Which mechanisms the Synthesize page offers for the chosen columns, from their declared requirements.

A mechanism is offered when the public schema meets what its :class:`~privsyn_core.MechanismSpec`
declares (:meth:`~privsyn_core.MechanismSpec.accepts`, the one fit check of the API, the command line and the
app).  No mechanism is named: a new one is offered or not by what it declares.  Everything read is public
(the schema), so release mode shows the same choice.
"""

from __future__ import annotations

import privsyn_core as ps


def split(specs: list[ps.MechanismSpec], schema: ps.Schema | None) -> tuple[list[ps.MechanismSpec], dict[str, str]]:
    """The specs that can run on ``schema`` and, by name, the reason of each one that cannot.

    Without a schema (the domain is not complete yet) every mechanism is offered: the run is refused
    until the schema is complete anyway, with the message naming the missing domains.
    """
    if schema is None:
        return list(specs), {}
    reasons = {s.name: reason for s in specs if (reason := s.accepts(schema)) is not None}
    return [s for s in specs if s.name not in reasons], reasons


def current_schema() -> ps.Schema | None:
    """The public schema of the chosen columns, or ``None`` while it is incomplete."""
    from pages._support import schema_state

    try:
        return schema_state.schema()
    except ps.PrivsynError:
        return None


def note(reasons: dict[str, str], specs: list[ps.MechanismSpec]) -> None:
    """One caption naming every mechanism left out for the chosen columns, with its reason."""
    if not reasons:
        return
    import streamlit as st

    from .text import md, plain_lists

    titles = {s.name: s.title for s in specs}
    st.caption("Not offered for the chosen columns (choose other columns on the Data page to use them):\n"
               + "\n".join(f"- {md(titles.get(name, name))} [{md(name)}]: {md(plain_lists(reason))}"
                           for name, reason in reasons.items()))
