"""Plain words for non-experts, with the exact term one click away."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from privsyn_core.mechanisms.base.spec import MechanismSpec

RELATIONS = {"replace": "replacing one record (the number of records is public)",
             "add_remove": "adding or removing one record (the number of records is private too)"}

#: The noise of a mechanism whose every noise draw is exact integer noise (``floating_point_exposure is None``).
EXACT_NOISE = ("every random number added to the released counts and values is a whole number drawn exactly, so "
               "nothing about the data can leak through the last digits of a released number.")
#: What each ``MechanismSpec.floating_point_severity`` means for the reader (the ratings of docs/mechanisms.md).
SEVERITY = {
    "choice": "A minor exposure: the last digits of such noise can in principle carry a trace of the data, but only "
              "the choice it made is released, and every released number gets exact whole-number noise.",
    "structure": "A moderate exposure: the projection, not the released numbers, could carry a trace of the data in "
                 "its last digits; for sensitive data prefer a method without this exposure.",
    "values": "Released numbers carry this noise and could reveal the data through their last digits: treat this "
              "release as a teaching or low-stakes release.",
}


def relation(name: str) -> str:
    return RELATIONS.get(name, name)


def guarantee(private: bool, dp_valid: bool) -> str:
    if not private:
        return "none: this method is not private"
    return "holds" if dp_valid else "void: the domain was read off the data"


def floating_point(spec: MechanismSpec) -> str:
    """How the mechanism draws its noise, in plain words with the severity its registration declares: the sentence
    of the reports and of the guide (the technical statement is ``MechanismSpec.floating_point_exposure``)."""
    if spec.floating_point_plain is None or spec.floating_point_severity is None:
        return EXACT_NOISE[0].upper() + EXACT_NOISE[1:]
    return (f"One step draws its noise in floating point (computer decimals) instead of whole numbers: "
            f"{spec.floating_point_plain}. {SEVERITY[spec.floating_point_severity]}")


#: After the method's name in the report body (its paper is in the footnotes).
METHOD_NOTE = "The paper it comes from is named in the notes at the end of this report."
#: The footnote on exact noise (a mechanism without floating-point exposure).
EXACT_NOISE_SOURCE = ("Noise, in technical terms: discrete Laplace noise sampled with integer arithmetic only "
                      "(Canonne, Kamath, Steinke, \"The Discrete Gaussian for Differential Privacy\", NeurIPS 2020).")
#: The footnote's source for the floating-point exposure.
FLOAT_SOURCE = ("Floating-point noise can leak its input through its low-order bits (Mironov, \"On significance of the "
                "least significant bits for differential privacy\", CCS 2012).")
#: The footnotes' glossary: the technical names behind the plain words of the body.
GLOSSARY = (
    "Epsilon is the privacy-loss parameter of differential privacy (epsilon-DP): smaller means more private and "
    "more noise.",
    "The share of a distribution that differs or is misplaced is the total variation distance (TVD) between the "
    "synthetic and the real 1-way (one column) or 2-way (pair of columns) marginal distributions, averaged over "
    "columns or pairs.",
    "The distance rows would have to move is the Wasserstein-1 distance (W1) in the unit cube, each column scaled to "
    "[0, 1], with the largest coordinate difference (l-infinity) as the distance between two rows.",
    "Whole-number noise is discrete Laplace noise; its standard deviation at scale b is sqrt(2 q)/(1 - q) with "
    "q = exp(-1/b), about sqrt(2) b. The derived figures use the largest single spend of the ledger and the L1 "
    "sensitivity of a table of counts (2 when neighbouring tables replace one record, 1 when they add or remove one).",
    "The measured figures on public tables come from the project's benchmark of real tables (in its documentation: "
    "the real-tables benchmark page), bundled Python tables with hand-set public domains.",
)
