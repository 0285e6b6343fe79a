"""Real mixed tables bundled in pip packages, with public bounds set by hand (never read off the data).

Needs ``statsmodels`` and ``palmerpenguins`` (install them in the peers' venv, see requirements-bench.txt).
``python real_tables.py OUT`` writes ``OUT/<name>/real.csv`` and ``OUT/<name>/meta.json`` (schema, target) for
every table, the layout that ``run_opendp.py`` reads.  Rows with missing values are dropped.

Bounds are what a domain expert would write down from the codebook: body sizes of penguins, ages of
adults, the 0-60 scale of the affairs survey, the RAND insurance experiment's coding, and so on.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pandas as pd


def _num(name: str, lo: float, hi: float) -> dict:
    return {"name": name, "kind": "numeric", "lo": lo, "hi": hi, "integer": False, "public": True}


def _cat(name: str, categories: list) -> dict:
    return {"name": name, "kind": "categorical", "categories": [str(c) for c in categories], "public": True}


def _penguins() -> tuple[pd.DataFrame, list[dict], str]:
    import palmerpenguins

    frame = palmerpenguins.load_penguins().dropna()
    columns = [_cat("species", ["Adelie", "Chinstrap", "Gentoo"]), _cat("island", ["Biscoe", "Dream", "Torgersen"]),
               _num("bill_length_mm", 30, 60), _num("bill_depth_mm", 12, 23), _num("flipper_length_mm", 170, 235),
               _num("body_mass_g", 2500, 6500), _cat("sex", ["female", "male"]), _cat("year", [2007, 2008, 2009])]
    return frame, columns, "species"


def _statsmodels(name: str) -> pd.DataFrame:
    import statsmodels.api as sm

    return getattr(sm.datasets, name).load_pandas().data


def _fair() -> tuple[pd.DataFrame, list[dict], str]:
    frame = _statsmodels("fair")
    columns = [_cat("rate_marriage", [1, 2, 3, 4, 5]), _num("age", 16, 45), _num("yrs_married", 0, 25),
               _num("children", 0, 6), _cat("religious", [1, 2, 3, 4]), _num("educ", 8, 20),
               _cat("occupation", [1, 2, 3, 4, 5, 6]), _cat("occupation_husb", [1, 2, 3, 4, 5, 6]),
               _num("affairs", 0, 60)]
    return frame, columns, "rate_marriage"


def _anes() -> tuple[pd.DataFrame, list[dict], str]:
    frame = _statsmodels("anes96")
    columns = [_num("TVnews", 0, 7), _cat("selfLR", list(range(1, 8))), _cat("PID", list(range(7))),
               _num("age", 18, 95), _cat("educ", list(range(1, 8))), _num("income", 1, 24), _cat("vote", [0, 1]),
               _num("logpopul", -3, 10)]
    return frame, columns, "vote"


def _randhie() -> tuple[pd.DataFrame, list[dict], str]:
    frame = _statsmodels("randhie")
    columns = [_num("mdvis", 0, 80), _num("lncoins", 0, 5), _cat("idp", [0, 1]), _num("lpi", 0, 8),
               _num("fmde", 0, 9), _num("physlm", 0, 1), _num("disea", 0, 60), _cat("hlthg", [0, 1]),
               _cat("hlthf", [0, 1]), _cat("hlthp", [0, 1])]
    return frame, columns, "idp"


def _grunfeld() -> tuple[pd.DataFrame, list[dict], str]:
    frame = _statsmodels("grunfeld")
    firms = ["General Motors", "US Steel", "General Electric", "Chrysler", "Atlantic Refining", "IBM",
             "Union Oil", "Westinghouse", "Goodyear", "Diamond Match", "American Steel"]
    columns = [_num("invest", 0, 1500), _num("value", 0, 6500), _num("capital", 0, 2500), _cat("firm", firms),
               _num("year", 1935, 1954)]
    return frame, columns, "firm"


def _engel() -> tuple[pd.DataFrame, list[dict], str]:
    return _statsmodels("engel"), [_num("income", 0, 5000), _num("foodexp", 0, 2500)], "foodexp"


def _penguins_bills() -> tuple[pd.DataFrame, list[dict], str]:
    frame, columns, _ = _penguins()
    keep = ["bill_length_mm", "bill_depth_mm", "flipper_length_mm"]
    return frame, [c for c in columns if c["name"] in keep], "flipper_length_mm"


def _fair3() -> tuple[pd.DataFrame, list[dict], str]:
    frame, columns, _ = _fair()
    keep = ["age", "yrs_married", "educ"]
    return frame, [c for c in columns if c["name"] in keep], "educ"


#: Wide tables (5-10 columns) and narrow ones (2-3 columns).
WIDE = {"penguins": _penguins, "fair": _fair, "anes96": _anes, "randhie": _randhie, "grunfeld": _grunfeld}
NARROW = {"engel": _engel, "penguins_bills": _penguins_bills, "fair3": _fair3}


def write(out: Path) -> None:
    """Every table as ``real.csv`` + ``meta.json`` under ``out/<name>``."""
    for name, load in {**WIDE, **NARROW}.items():
        frame, columns, target = load()
        frame = frame[[c["name"] for c in columns]].dropna().reset_index(drop=True)
        for c in columns:
            if c["kind"] == "categorical":
                frame[c["name"]] = frame[c["name"]].map(lambda v: str(int(v)) if isinstance(v, float) else str(v))
        folder = out / name
        folder.mkdir(parents=True, exist_ok=True)
        frame.to_csv(folder / "real.csv", index=False)
        meta = {"schema": {"version": 1, "columns": columns}, "target": target, "n": len(frame),
                "wide": name in WIDE}
        (folder / "meta.json").write_text(json.dumps(meta))


if __name__ == "__main__":
    write(Path(sys.argv[1]))
