r"""Be the attacker: a membership game on two neighbouring tables, for teaching (it reads the real data).

The game makes differential privacy's promise tangible.  From a table ``D`` it builds a neighbour ``D'``: one
record far from the others (every numeric column at its public upper bound, every categorical column at its last
public category), *added* to ``D`` under add/remove, or *replacing* the first record under replace-one.  The
mechanism runs many times on each table; after each run the attacker sees only the synthetic rows and reads one
feature, the number of synthetic rows in the target's corner of the domain (every unit coordinate at least
:data:`CORNER`).  The student picks a threshold: "the target is in the table when the feature is at least t".

* The student's success is the balanced accuracy :math:`\tfrac12 (P[f \ge t \mid D'] + P[f < t \mid D])`
  over the runs; the best attacker's is the largest over all thresholds.  An epsilon-DP mechanism keeps every
  attacker's success at most :math:`e^\varepsilon / (1 + e^\varepsilon)` (Kairouz, Oh, Viswanath, "The
  composition theorem for differential privacy", ICML 2015, Thm. 2.1, the hypothesis-testing view).
* The empirical lower bound on epsilon is the privacy audit's (:mod:`privsyn_core.evaluation.audit`): the event
  ``{f >= t}`` or ``{f < t}`` is chosen on the first half of the runs and counted on the second half, and
  :math:`\varepsilon_{lower} = \log(\underline p_1 / \overline p_0)` with one-sided Clopper-Pearson bounds, so
  :math:`\varepsilon_{lower} \le \varepsilon` with probability at least ``1 - alpha`` for an epsilon-DP mechanism.
  The same game against ``bootstrap`` (which copies real records) shows an attacker winning.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from privsyn_core.data.domain import Schema
from privsyn_core.errors import ParameterError

#: The target's corner of the unit cube: every coordinate at least this.
CORNER = 0.9
#: Runs per table the game makes by default (half choose the audit's event, half count it).
RUNS = 200


@dataclass(frozen=True)
class Game:
    """The feature on every run of the mechanism on ``D`` (without the target) and on ``D'`` (with it)."""

    mechanism: str
    epsilon: float
    relation: str
    without: np.ndarray
    with_target: np.ndarray
    seconds: float

    @property
    def runs(self) -> int:
        return len(self.without)


def target_record(schema: Schema) -> dict[str, Any]:
    """The record far from the others: numeric columns at their public upper bound, categories at their last."""
    return {c.name: (c.hi if c.kind == "numeric" else c.category_list[-1]) for c in schema.columns}


def neighbours(frame: pd.DataFrame, schema: Schema, relation: str) -> tuple[pd.DataFrame, pd.DataFrame]:
    """``D`` and ``D'``: the target added (add/remove) or replacing the first record (replace-one)."""
    table = frame[schema.names].reset_index(drop=True)
    target = pd.DataFrame([target_record(schema)])[schema.names].astype(table.dtypes.to_dict(), errors="ignore")
    if relation == "add_remove":
        return table, pd.concat([table, target], ignore_index=True)
    changed = table.copy()
    changed.iloc[0] = target.iloc[0]
    return table, changed


def corner_count(rows: pd.DataFrame, schema: Schema) -> int:
    """The attacker's feature: synthetic rows in the target's corner (every unit coordinate >= :data:`CORNER`)."""
    unit = schema.encode(rows[schema.names])[0]
    return int(np.count_nonzero(np.all(unit >= CORNER, axis=1)))


def play(frame: pd.DataFrame, schema: Schema, mechanism: str, epsilon: float, *, relation: str = "add_remove",
         runs: int = RUNS, seed: int = 0, progress: Callable[[float], object] = lambda share: None,
         **params: Any) -> Game:
    """Run ``mechanism`` ``runs`` times on each neighbour and record the attacker's feature (seeded: teaching).

    ``progress(share)`` is called after every run (a share of all ``2 runs`` runs in ``[0, 1]``).
    """
    from privsyn_core.api import synthesize

    if runs < 4:
        raise ParameterError("the game needs at least 4 runs per table")
    tables = neighbours(frame, schema, relation)
    seeds = np.random.default_rng(seed).integers(0, 2**63 - 1, size=(2, runs))
    start = time.perf_counter()
    features = np.empty((2, runs), dtype=np.int64)
    for side, (table, row) in enumerate(zip(tables, seeds, strict=True)):
        for k, run_seed in enumerate(row):
            rows = synthesize(table, mechanism, epsilon, schema=schema, neighbouring=relation, rng=int(run_seed),
                              **params).data
            features[side, k] = corner_count(rows, schema)
            progress((side * runs + k + 1) / (2 * runs))
    return Game(mechanism, float(epsilon), relation, features[0], features[1], time.perf_counter() - start)


def success(game: Game, threshold: float) -> float:
    """Balanced accuracy of "the target is in the table when the feature is at least ``threshold``"."""
    return 0.5 * (float(np.mean(game.with_target >= threshold)) + float(np.mean(game.without < threshold)))


def best_attack(game: Game) -> tuple[float, float]:
    """The threshold with the highest success over every value seen, and that success."""
    candidates = np.unique(np.concatenate([game.without, game.with_target, [np.inf]]))
    scores = [success(game, t) for t in candidates]
    k = int(np.argmax(scores))
    return float(candidates[k]), float(scores[k])


def dp_ceiling(epsilon: float) -> float:
    """The highest success any attacker can have against an epsilon-DP mechanism: e^eps / (1 + e^eps)."""
    return 1.0 / (1.0 + math.exp(-epsilon))


def epsilon_lower(game: Game, alpha: float = 0.05) -> float:
    """The audit's lower bound on the epsilon the mechanism really spends, event chosen and counted on two halves."""
    from privsyn_core.evaluation.audit import choose_event, epsilon_lower_bound

    half = game.runs // 2
    base, neighbour = game.without[:, None].astype(float), game.with_target[:, None].astype(float)
    event = choose_event(base[:half], neighbour[:half])
    counts = [int(np.count_nonzero(event.occurs(x[half:2 * half]))) for x in (base, neighbour)]
    bound = epsilon_lower_bound(np.array(counts[event.likelier]), np.array(counts[1 - event.likelier]), half, alpha)
    return float(bound)
