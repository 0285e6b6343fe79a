"""Shared by the peer benchmark: datasets with public bounds, binning, and the run-record format.

Every system script is started in its own process by ``driver.py`` and gets the same
command line: ``--dataset NAME --epsilon EPS --out DIR`` (``--seed``, ``--bins`` optional).  It reads the
private table from ``DIR/real.csv`` (written once by the driver), writes ``DIR/synth.csv``
and ``DIR/run.json`` (``{"seconds": wall time of the synthesis only, "guarantee": ...}``).
Bounds and categories are public (fixed here, never read off the data).
"""

from __future__ import annotations

import argparse
import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

#: Public box of the regenerated Balog mixture (means ~ N(100, 200^2), sd 30; seed 0 spans about [-520, 690]).
BALOG_BOUNDS = (-800.0, 1000.0)
#: A few numeric columns of the bundled tables, with the class column used as the TSTR target.
TABLE_COLUMNS = {
    "breast_cancer": (["mean radius", "mean texture", "mean smoothness", "worst concave points"], "diagnosis"),
    "wine": (["alcohol", "malic_acid", "flavanoids", "color_intensity"], "cultivar"),
}
ASSETS = Path(__file__).resolve().parents[2] / "assets"


@dataclass
class Dataset:
    """A private table, its public schema (privsyn_core dict form) and the TSTR target column."""

    name: str
    frame: pd.DataFrame
    schema: dict
    target: str


def dataset_names(quick: bool) -> list[str]:
    """The datasets of the grid (four of them with ``quick``)."""
    if quick:
        return ["uniform_d2", "blobs_d3", "balog_d2", "breast_cancer"]
    return [f"{kind}_d{d}" for kind in ("uniform", "blobs") for d in (2, 3, 5)] + ["balog_d2", "breast_cancer", "wine"]


def load_dataset(name: str, n: int, seed: int = 0) -> Dataset:
    """Uniform / two-blob data in [0,1]^d, the Balog mixture, or a bundled scikit-learn table."""
    from privsyn_core.data import datasets

    if name in TABLE_COLUMNS:
        columns, target = TABLE_COLUMNS[name]
        frame = pd.read_csv(ASSETS / f"{name}.csv")[columns + [target]]
        full = json.loads((ASSETS / f"{name}.schema.json").read_text())
        keep = [c for c in full["columns"] if c["name"] in columns + [target]]
        return Dataset(name, frame, {"version": 1, "columns": keep}, target)
    kind, d = name.rsplit("_d", 1)
    d = int(d)
    if kind == "uniform":
        X, lo, hi = datasets.uniform_cube(n, d, rng=seed), 0.0, 1.0
    elif kind == "blobs":
        X, lo, hi = datasets.two_blobs(n, d, rng=seed), 0.0, 1.0
    else:
        X, (lo, hi) = datasets.balog_mixture(d, n, seed=seed), BALOG_BOUNDS
    names = [f"x{i}" for i in range(d)]
    schema = {"version": 1, "columns": [{"name": c, "kind": "numeric", "lo": lo, "hi": hi, "integer": False,
                                          "public": True} for c in names]}
    return Dataset(name, pd.DataFrame(np.clip(X, lo, hi), columns=names), schema, names[-1])


def to_bins(values: np.ndarray, lo: float, hi: float, bins: int) -> np.ndarray:
    """Bin index ``0..bins-1`` of each value on the public interval (values clipped into it)."""
    scaled = (np.clip(values, lo, hi) - lo) / (hi - lo) * bins
    return np.minimum(scaled.astype(np.int64), bins - 1)


def from_bins(index: np.ndarray, lo: float, hi: float, bins: int, rng: np.random.Generator) -> np.ndarray:
    """A uniform value inside each bin (post-processing of a binned release)."""
    width = (hi - lo) / bins
    return lo + (np.asarray(index, dtype=float) + rng.random(len(index))) * width


def fill_missing(synth: pd.DataFrame, columns: list[dict], rng: np.random.Generator) -> tuple[pd.DataFrame, int]:
    """Replace the missing values a peer emits by a uniform draw on the column's public domain.

    OpenDP's contingency tables always carry a null cell per column and DataSynthesizer a "missing"
    bin; after noise these cells can get mass and the sampled rows then hold NaN/None.  Such a
    value means "somewhere in the domain", so it becomes a uniform value on ``[lo, hi]`` (numeric)
    or a uniform public category: post-processing of the release, no privacy cost.  Returns the
    filled table and the number of cells that were missing (reported, not hidden).
    """
    out = synth.copy()
    missing = 0
    for c in columns:
        holes = out[c["name"]].isna().to_numpy()
        missing += int(holes.sum())
        if not holes.any():
            continue
        if c["kind"] == "numeric":
            out.loc[holes, c["name"]] = rng.uniform(c["lo"], c["hi"], holes.sum())
        else:  # a category may not fit the column's dtype (bin numbers in a float column holding NaN)
            out[c["name"]] = out[c["name"]].astype(object)
            out.loc[holes, c["name"]] = rng.choice(np.asarray(c["categories"], dtype=object), holes.sum())
    return out, missing


def parse_args(extra=None) -> argparse.Namespace:
    """The common command line of the system scripts; ``extra(parser)`` adds a script's own options."""
    parser = argparse.ArgumentParser()
    parser.add_argument("--dataset", required=True)
    parser.add_argument("--epsilon", type=float, required=True)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--bins", type=int, default=16, help="bins per numeric column for the binned peers")
    parser.add_argument("--out", type=Path, required=True)
    if extra:
        extra(parser)
    return parser.parse_args()


def read_real(out: Path) -> tuple[pd.DataFrame, dict, str]:
    """The private table, its public schema (dict form) and the TSTR target, as the driver wrote them."""
    meta = json.loads((out / "meta.json").read_text())
    return pd.read_csv(out / "real.csv"), meta["schema"], meta["target"]


def write_run(out: Path, synth: pd.DataFrame, seconds: float, guarantee: str, **extra) -> None:
    """``synth.csv`` and ``run.json`` (synthesis seconds, peak RSS, the guarantee in words, extras) for the driver."""
    synth.to_csv(out / "synth.csv", index=False)
    record = {"seconds": seconds, "peak_rss_mb": peak_rss_mb(), "guarantee": guarantee, **extra}
    (out / "run.json").write_text(json.dumps(record, default=str))


def peak_rss_mb() -> float:
    """Peak resident memory of this process since its ``exec`` (``VmHWM`` of ``/proc/self/status``).

    Not ``getrusage``/``wait4``'s ``ru_maxrss``: Linux carries the pre-``exec`` high-water mark
    into it, and Python's subprocess ``vfork``s, so that value is at least the driver's own RSS.
    """
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return float("nan")
