"""The Learn page's attacker game (:mod:`privsyn_core.evaluation.attack_game`): teaching mode only (it reads the data).

The student picks a mechanism, epsilon and the relation, the game runs it many times on the current table and on
its neighbour, and the student moves a threshold on what an attacker sees; the page shows the student's success,
the best attacker's, the ceiling epsilon-DP allows and the audit's empirical lower bound on epsilon.
"""

from __future__ import annotations

import json

import streamlit as st

import privsyn_core as ps
from privsyn_core.evaluation import attack_game as game
from privsyn_core.reporting import figures as F

from .data_state import frame
from .schema_state import schema
from .state import keep, release_mode
from .text import md
from .widgets import EPSILONS, user_errors


def section() -> None:
    st.header("Be the attacker")
    if release_mode():
        st.info("Release mode: the attacker game reads the raw data (it builds a neighbour of your table), so it is "
                "not shown.")
        return
    st.write("Differential privacy promises that no attacker can tell whether one person is in the table. Test it: "
             "the game adds one record far from the others (every column at its public maximum) to your table, runs "
             "a mechanism many times on both tables, and shows you what an attacker sees after each run, the "
             "number of synthetic rows in that record's corner. You guess: the record is in the table when there are "
             "at least t rows there.")
    try:
        public = schema()
    except ps.PrivsynError as exc:  # no data, or a domain not complete yet: the game needs the public domain
        st.caption(f"To play: {md(str(exc))}.")
        return
    # every registered mechanism that runs on this table, in the registry's order (the non-private reference too)
    offered = [s.name for s in ps.list_mechanisms() if s.accepts(public) is None]
    cols = st.columns(4)
    name = keep(cols[0].selectbox, "Mechanism", "w_game_mechanism", offered[0], options=offered)
    epsilon = keep(cols[1].select_slider, "epsilon", "w_game_epsilon", 1.0, options=EPSILONS)
    relations = list(ps.get_mechanism(name).neighbouring)
    relation = keep(cols[2].radio, "The neighbour", "w_game_relation", relations[0], options=relations,
                    format_func={"add_remove": "adds the record", "replace": "replaces a record"}.get)
    runs = keep(cols[3].select_slider, "Runs per table", "w_game_runs", 200, options=[40, 100, 200, 400])
    key = json.dumps([st.session_state.data["sha256"], public.to_dict(), name, epsilon, relation, runs],
                     sort_keys=True, default=str)
    if st.button("Play: run it on both tables", key="w_game_play"):
        bar = st.progress(0.0, text="running the mechanism on both tables")
        with user_errors():
            played = game.play(frame(), public, name, epsilon, relation=relation, runs=runs,
                               progress=lambda share: bar.progress(share, text=f"{share:.0%} of the runs"))
            st.session_state.attack_game = {"key": key, "game": played}
        bar.empty()
    kept = st.session_state.get("attack_game")
    if not kept or kept["key"] != key:
        st.caption("Press Play (a few seconds for most mechanisms; fewer runs for the slower ones).")
        return
    _show(kept["game"])


def _show(played: game.Game) -> None:
    top = int(max(played.without.max(), played.with_target.max())) + 1
    threshold = st.slider("Your guess: 'the record is in the table' from this many corner rows on", 0, top,
                          min(1, top), key="w_game_threshold")
    st.plotly_chart(F.attack_figure(played.without, played.with_target, threshold), key="game_chart")
    mine = game.success(played, threshold)
    best_t, best = game.best_attack(played)
    ceiling = game.dp_ceiling(played.epsilon) if ps.get_mechanism(played.mechanism).is_private else 1.0
    lower = game.epsilon_lower(played)
    cols = st.columns(4)
    cols[0].metric("your success", f"{mine:.0%}", help="half of the runs on each table: 50% is a coin toss")
    cols[1].metric("best attacker", f"{best:.0%}", help=f"the best threshold on these runs ({best_t:g} rows)")
    cols[2].metric("most any attacker can win", f"{ceiling:.0%}" if ceiling < 1 else "100% (not private)",
                   help="e^epsilon / (1 + e^epsilon) for an epsilon-DP mechanism")
    cols[3].metric("epsilon the runs prove", f"{lower:.2f}", help="the privacy audit's 95% lower bound, event chosen "
                                                                   "on half the runs and counted on the other half")
    private = ps.get_mechanism(played.mechanism).is_private
    if private:
        st.caption(f"Claimed epsilon {played.epsilon:g}; the runs prove at least {lower:.2f}. An attacker above "
                   f"{ceiling:.0%} would break the promise; {played.runs} runs per table took {played.seconds:.1f} s. "
                   "The best attacker's success on these runs is itself noisy: a few points above the ceiling are "
                   "chance, which the audit's bound accounts for.")
    else:
        st.warning(f"{played.mechanism} is not private: it copies real records, and the attacker wins "
                   f"{best:.0%} of the time (the runs prove epsilon of at least {lower:.2f}).")
