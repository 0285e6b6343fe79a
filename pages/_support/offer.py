"""Which mechanisms the Synthesize page offers for the chosen columns, from their declared requirements.

A mechanism is offered when the public schema meets what its :class:`~privsyn_core.MechanismSpec`
declares: ``data_kind == "boolean"`` needs every column Boolean by its public declaration
(:func:`privsyn_core.data.boolean_codec.is_boolean_column`: numeric 0/1 integer with bounds ``[0, 1]``, or
two categories), ``max_dim`` bounds the number of columns of a mechanism on the unit-cube encoding,
and a mechanism with its own ``codec`` must accept the schema (the codec refuses what the mechanism
cannot encode, with the message shown here).  No mechanism is named: a new one is offered or not by
what it declares.  Everything read is public (the schema), so release mode shows the same choice.
"""

from __future__ import annotations

import privsyn_core as ps
from privsyn_core.data.boolean_codec import is_boolean_column


def unmet(spec: ps.MechanismSpec, schema: ps.Schema) -> str | None:
    """Why ``spec`` cannot run on ``schema`` (one line), or ``None`` when it can."""
    columns = schema.columns
    if spec.data_kind == "boolean":
        other = [c.name for c in columns if not is_boolean_column(c)]
        if other:
            shown = ", ".join(other[:3]) + (f" and {len(other) - 3} more" if len(other) > 3 else "")
            return (f"works on Boolean columns only (numeric 0/1 declared integer with bounds [0, 1], or two "
                    f"categories); not Boolean: {shown}")
    if spec.codec is None and spec.max_dim is not None and len(columns) > spec.max_dim:
        return f"takes at most {spec.max_dim} column(s); {len(columns)} are chosen"
    if spec.codec is not None:
        try:
            spec.codec(schema)
        except ps.PrivsynError as exc:
            return str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    return None


def split(specs: list[ps.MechanismSpec], schema: ps.Schema | None) -> tuple[list[ps.MechanismSpec], dict[str, str]]:
    """The specs that can run on ``schema`` and, by name, the reason of each one that cannot.

    Without a schema (the domain is not complete yet) every mechanism is offered: the run is refused
    until the schema is complete anyway, with the message naming the missing domains.
    """
    if schema is None:
        return list(specs), {}
    reasons = {s.name: reason for s in specs if (reason := unmet(s, schema)) is not None}
    return [s for s in specs if s.name not in reasons], reasons


def current_schema() -> ps.Schema | None:
    """The public schema of the chosen columns, or ``None`` while it is incomplete."""
    from pages import _ui as ui

    try:
        return ui.schema()
    except ps.PrivsynError:
        return None


def note(reasons: dict[str, str], specs: list[ps.MechanismSpec]) -> None:
    """One caption naming every mechanism left out for the chosen columns, with its reason."""
    if not reasons:
        return
    import streamlit as st

    from .text import md

    titles = {s.name: s.title for s in specs}
    st.caption("Not offered for the chosen columns: " + "; ".join(
        f"{md(titles.get(name, name))} [{md(name)}]: {md(reason)}" for name, reason in reasons.items())
        + ". Choose other columns on the Data page to use them.")
