"""Plain words for non-experts, with the exact term one click away (issue 16, item 8)."""

from __future__ import annotations

import re

#: The source papers by authors and title (the registry cites them by seed number).
PAPERS = {
    "000": "M. Boedihardjo, T. Strohmer, R. Vershynin, \"Private measures, random walks, and synthetic data\"",
    "001": "M. Boedihardjo, T. Strohmer, R. Vershynin, \"Covariance's loss is privacy's gain: computationally "
           "efficient, private and accurate synthetic data\"",
    "002": "E. Kreačić, N. Nouri, V. K. Potluru, T. Balch, M. Veloso, \"Differentially private synthetic data using "
           "KD-trees\"",
    "003": "M. Boedihardjo, T. Strohmer, R. Vershynin, \"Private measures, random walks, and synthetic data\"",
    "004": "Y. He, R. Vershynin, Y. Zhu, \"Algorithmically effective differentially private synthetic data\"",
}
#: Other papers a registry entry cites by a short key.
OTHERS = {"[MMS21]": "(R. McKenna, G. Miklau, D. Sheldon, \"Winning the NIST contest: a scalable and general approach "
                     "to differentially private synthetic data\")"}
BASELINES = {"baseline": "a textbook baseline, for comparison", "reference": "a reference, not a privacy mechanism"}

RELATIONS = {"replace": "replacing one record (the number of records is public)",
             "add_remove": "adding or removing one record (the number of records is private too)"}


def paper(cited: str) -> str:
    """``"004, Alg 3-4"`` as ``authors, "title", Alg 3-4``; a seed number or a short key inside a longer citation
    likewise."""
    match = re.match(r"\s*(\d{3})\s*,?\s*(.*)", cited)
    if match and match.group(1) in PAPERS:
        where = match.group(2).strip()
        return PAPERS[match.group(1)] + (f", {where}" if where else "")
    if cited.strip() in BASELINES:
        return BASELINES[cited.strip()]
    text = re.sub(r"\b(\d{3})\b", lambda m: PAPERS[m.group(1)] + "," if m.group(1) in PAPERS else m.group(1), cited)
    for key, words in OTHERS.items():
        text = text.replace(key, words)
    return text


def relation(name: str) -> str:
    return RELATIONS.get(name, name)


def guarantee(private: bool, dp_valid: bool) -> str:
    if not private:
        return "none: this method is not private"
    return "holds" if dp_valid else "void: the domain was read off the data"
