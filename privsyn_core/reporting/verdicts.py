"""Plain-word verdicts on a synthetic table, for a manager: is each column kept, are the relationships kept, would a
model trained on it predict like one trained on the real data, and what is lost.

Every verdict reads the real data (it is built from :func:`privsyn_core.evaluation.scorecard.evaluate`'s output and
the real correlations): teaching and review only, never part of a release.  Each answer comes with its evidence,
in words, with the uncertainty the evaluation measured.  The thresholds are stated where they are defined and in
the report:

* **columns** (mean total variation distance of each column's distribution, 0 = identical, 1 = disjoint): *kept*
  when its whole interval lies at or below the top of the real-vs-real floor's interval; *roughly kept* up to
  :data:`ROUGH_TVD`; else *not kept*;
* **relationships** (Pearson correlations, categories in their public order): among the pairs whose real
  correlation is at least :data:`STRONG` in size, the mean absolute change: *kept* up to :data:`KEPT_GAP`,
  *partly kept* up to :data:`PARTLY_GAP`, else *lost*;
* **prediction** (train a model on the synthetic table, test it on held-out real rows): *as good as real data*
  when its accuracy (or R^2) interval reaches the one of the same model trained on real rows; *better than
  guessing* when it is above the guess of the most common class (or of the mean); else *no better than guessing*.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

#: A column whose mean total variation distance is at most this is "roughly kept" (15% of its mass moved).
ROUGH_TVD = 0.15
#: Real correlations at least this large in size are the relationships a verdict is about.
STRONG = 0.3
#: Mean absolute change of the strong correlations up to which they are "kept" / "partly kept".
KEPT_GAP, PARTLY_GAP = 0.1, 0.3
#: Normal quantile of the 95% intervals.
Z95 = 1.96
#: The rules above in one sentence, as the report prints them.
RULES = (f"a column is roughly kept when at most {ROUGH_TVD:.0%} of its distribution moves on average, and kept when "
         "it is as close as two halves of the real data; relationships are the real correlations of size "
         f"{STRONG} or more, kept when they change by at most {KEPT_GAP} on average and partly kept up to "
         f"{PARTLY_GAP}; a model is as good as one trained on real data when their 95% intervals meet.")


@dataclass(frozen=True)
class Verdict:
    """One question about the synthetic table, its short answer, one plain sentence and the evidence."""

    question: str
    answer: str
    sentence: str
    evidence: str


def _interval(entry: dict[str, Any]) -> str:
    low, high = entry.get("low"), entry.get("high")
    if isinstance(low, (int, float)) and isinstance(high, (int, float)) and math.isfinite(low) and math.isfinite(high):
        return f"{entry['value']:.2f} (95% interval {low:.2f} to {high:.2f})"
    return f"{entry['value']:.2f}"


def columns(evaluation: dict[str, Any]) -> Verdict:
    """Are each column's distributions kept?  From the mean 1-way total variation distance."""
    question = "Is each column's distribution kept?"
    entry = evaluation.get("marginal_tvd_1way")
    if not entry:
        return Verdict(question, "not measured", "The columns were not compared.", "")
    value, floor_high = entry["value"], entry.get("floor_high")
    evidence = (f"On average {100 * value:.0f}% of a column's distribution differs from the real one: "
                f"{_interval(entry)}")
    if isinstance(entry.get("floor"), (int, float)) and math.isfinite(entry["floor"]):
        evidence += f"; two halves of the real data differ by {entry['floor']:.2f} (the best reachable at this size)"
    worst = _worst_columns(evaluation)
    if worst:
        evidence += f". Most changed: {worst}"
    moved = f"{100 * value:.0f}% of a column's distribution differs on average"
    if floor_high is not None and entry.get("high", value) <= floor_high:
        return Verdict(question, "yes", f"The columns' shapes are kept: {moved}, as close to the real ones as real "
                                        "data is to itself.", evidence + ".")
    if value <= ROUGH_TVD:
        return Verdict(question, "roughly", f"The columns' shapes are roughly kept: {moved}.", evidence + ".")
    return Verdict(question, "no", f"The columns' shapes are not kept: {moved}.", evidence + ".")


def _worst_columns(evaluation: dict[str, Any], count: int = 3) -> str:
    table = (evaluation.get("_tables") or {}).get("marginal_tvd_1way")
    if table is None or not len(table):
        return ""
    top = table.sort_values("tvd", ascending=False).head(count)
    return ", ".join(f"{name} ({100 * tvd:.0f}% differs)" for name, tvd in zip(top["column"], top["tvd"], strict=True)
                     if tvd > ROUGH_TVD)


def relationships(real_corr: np.ndarray | None, synth_corr: np.ndarray | None, names: list[str],
                  evaluation: dict[str, Any] | None = None) -> Verdict:
    """Are the relationships between columns kept?  From the real and synthetic correlation matrices."""
    question = "Are the relationships between columns kept?"
    if real_corr is None or synth_corr is None or len(names) < 2:
        return Verdict(question, "not measured", "The table has one column: there is no relationship to keep.", "")
    upper = np.triu_indices(len(names), 1)
    real, synth = np.asarray(real_corr)[upper], np.asarray(synth_corr)[upper]
    defined = np.isfinite(real) & np.isfinite(synth)
    strong = defined & (np.abs(real) >= STRONG)
    ranges = (f"real correlations from {np.nanmin(real):.2f} to {np.nanmax(real):.2f}, synthetic ones from "
              f"{np.nanmin(synth):.2f} to {np.nanmax(synth):.2f}") if defined.any() else "no correlation defined"
    gap = (evaluation or {}).get("correlation_gap")
    if gap:
        ranges += f"; the largest change of one correlation is {_interval(gap)}"
    if not strong.any():
        return Verdict(question, "nothing to keep", f"The real columns are nearly unrelated (no correlation of "
                                                    f"size {STRONG} or more), so there is little to keep.",
                       ranges[0].upper() + ranges[1:] + ".")
    change = float(np.mean(np.abs(real[strong] - synth[strong])))
    pairs = [f"{names[i]} and {names[j]}" for i, j, s in zip(*upper, strong, strict=True) if s][:3]
    evidence = (f"{ranges[0].upper() + ranges[1:]}. The {int(strong.sum())} strong real relationship(s) (such as "
                f"{'; '.join(pairs)}) change by {change:.2f} on average.")
    moved = f"the strong ones change by {change:.2f} on average"
    if change <= KEPT_GAP:
        return Verdict(question, "yes", f"The relationships between columns are kept: {moved}.", evidence)
    if change <= PARTLY_GAP:
        return Verdict(question, "partly", f"The relationships between columns are partly kept: weakened, {moved}.",
                       evidence)
    return Verdict(question, "no", f"The relationships between columns are lost: {moved}.", evidence)


def prediction(evaluation: dict[str, Any]) -> Verdict:
    """Would a model trained on the synthetic table predict like one trained on the real one?"""
    question = "Would a model trained on it predict like one trained on the real data?"
    tstr = evaluation.get("tstr")
    if not tstr:
        return Verdict(question, "not measured", "Not measured: choose a column to predict (the TSTR target on the "
                                                 "Compare page) to measure it.", "")
    score = tstr["score"]
    synthetic, real = tstr["train_on_synthetic"][score], tstr["train_on_real"][score]
    guess = tstr.get("guess", {}).get(score)
    n_test = int(tstr.get("n_test", 0))
    words = "accuracy" if score == "accuracy" else "R squared (share of the variation explained)"
    half = (lambda p: Z95 * math.sqrt(max(p * (1 - p), 0.0) / n_test)) if score == "accuracy" and n_test else None
    evidence = (f"Gradient-boosted trees predicting {tstr['target']} from the other columns, tested on {n_test} real "
                f"rows they never saw: {words} {synthetic:.2f}" + (f" +- {half(synthetic):.2f}" if half else "")
                + f" when trained on the synthetic table, {real:.2f}" + (f" +- {half(real):.2f}" if half else "")
                + " when trained on real rows")
    if guess is not None:
        evidence += (f"; always guessing the most common value scores {guess:.2f}" if score == "accuracy"
                     else f"; always guessing the mean scores {guess:.2f}")
    margin = (half(synthetic) + half(real)) if half else 0.0
    if guess is not None and real - (half(real) if half else 0.0) <= guess:
        return Verdict(question, "no signal", f"Even trained on real rows, the model does not beat guessing: the other "
                                              f"columns do not predict {tstr['target']}, so this question cannot be "
                                              "answered with this target.", evidence + ".")
    if synthetic >= real - margin:
        return Verdict(question, "yes", f"A model trained on the synthetic table predicts about as well as one "
                                        f"trained on real data ({words} {synthetic:.2f} against {real:.2f}).",
                       evidence + ".")
    guess_margin = half(synthetic) if half else 0.0
    if guess is None or synthetic - guess_margin > guess:
        return Verdict(question, "partly", "A model trained on it predicts worse than one trained on real data, "
                                           "but better than guessing.", evidence + ".")
    return Verdict(question, "no", "A model trained on it predicts no better than guessing.", evidence + ".")


def lost(verdicts: list[Verdict]) -> Verdict:
    """What is lost, from the other verdicts."""
    question = "What is lost?"
    parts = {"Is each column's distribution kept?": "the shape of some columns",
             "Are the relationships between columns kept?": "the relationships between columns",
             "Would a model trained on it predict like one trained on the real data?": "predictive value"}
    gone = [parts[v.question] for v in verdicts if v.answer in ("no", "partly") and v.question in parts]
    if not gone:
        return Verdict(question, "nothing measured", "Nothing that was measured here is lost; rare combinations and "
                                                     "single records are left out by design.", "")
    return Verdict(question, ", ".join(gone), f"Lost or weakened: {', '.join(gone)}. Rare combinations and single "
                                               "records are left out by design.", "")


def summary(verdicts: list[Verdict], epsilon: float, rows: int) -> str:
    """One sentence a manager needs: at this epsilon and size, what is lost and what is kept, the weakest first."""
    shape = {"yes": "the columns' shapes are kept", "roughly": "the columns' shapes are roughly kept",
             "no": "the columns' shapes are not kept"}
    relation = {"yes": "the relationships between columns are kept",
                "partly": "the relationships between columns are weakened",
                "no": "the relationships between columns are lost",
                "nothing to keep": "the columns had few relationships to keep"}
    by_question = {v.question: v for v in verdicts}
    asked = (("Is each column's distribution kept?", shape), ("Are the relationships between columns kept?", relation))
    found = [(by_question.get(q, _NONE).answer, words) for q, words in asked]
    pieces = [words[answer] for answer, words in sorted(found, key=lambda f: _weakness(f[0])) if answer in words]
    said = " and ".join(pieces) or "the synthetic table was not compared with the real one"
    return f"At epsilon {epsilon:g} on {rows:,} rows, {said}."


_NONE = Verdict("", "", "", "")


def all_verdicts(evaluation: dict[str, Any], real_corr: np.ndarray | None, synth_corr: np.ndarray | None,
                 names: list[str]) -> list[Verdict]:
    """The four verdicts, in the order the report shows them."""
    found = [columns(evaluation), relationships(real_corr, synth_corr, names, evaluation), prediction(evaluation)]
    return [*found, lost(found)]


#: How weak each answer is (lower: weaker); answers that judge nothing come last.
WEAKNESS = {"no": 0, "partly": 1, "roughly": 1, "yes": 2}


def _weakness(answer: str) -> int:
    return WEAKNESS.get(answer, len(WEAKNESS))


def weakest_first(verdicts: list[Verdict]) -> list[Verdict]:
    """The verdicts with the weakest answer first (ties in their order); "What is lost?" stays last."""
    judged = [v for v in verdicts if v.question != "What is lost?"]
    return sorted(judged, key=lambda v: _weakness(v.answer)) + [v for v in verdicts if v.question == "What is lost?"]


@dataclass(frozen=True)
class Measured:
    """One measured figure (lower is better) with its 95% interval and the same figure between two halves of the real
    data (the real-vs-real floor) with its interval; ``times_floor`` is ``value / floor``."""

    label: str
    value: float
    low: float
    high: float
    floor: float
    floor_low: float
    floor_high: float

    @property
    def times_floor(self) -> float:
        return self.value / self.floor if self.floor > 0 else math.inf


#: The figures of :func:`measured`, by their key in the evaluation, in plain words.
MEASURED = {"marginal_tvd_2way": "Share of a pair of columns' joint distribution that differs",
            "marginal_tvd_1way": "Share of a column's distribution that differs",
            "correlation_gap": "Largest change of one correlation",
            "w1": "Distance rows would have to move to match, each column scaled to run from 0 to 1"}


def measured(evaluation: dict[str, Any]) -> list[Measured]:
    """The figures of :data:`MEASURED` that the evaluation holds with an interval and a floor, the farthest from its
    floor (the weakest) first."""
    keys = ("value", "low", "high", "floor", "floor_low", "floor_high")
    found = [Measured(label, *(float(entry[k]) for k in keys)) for key, label in MEASURED.items()
             if isinstance(entry := evaluation.get(key), dict)
             and all(isinstance(entry.get(k), (int, float)) and math.isfinite(entry[k]) for k in keys)]
    return sorted(found, key=lambda m: -m.times_floor)
