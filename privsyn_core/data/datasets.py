"""Synthetic benchmark datasets (all generated, nothing downloaded).

References
----------
.. [BAL18] M. Balog, I. Tolstikhin, B. Schölkopf, "Differentially Private Database
   Release via Kernel Mean Embeddings", ICML 2018 (code: matejbalog/RKHS-private-database).
"""

from __future__ import annotations

import numpy as np


def uniform_cube(n: int, d: int, rng: np.random.Generator | int | None = None) -> np.ndarray:
    """``n`` i.i.d. uniform points in ``[0, 1]^d``."""
    return np.random.default_rng(rng).random((n, d))


def two_blobs(n: int, d: int, rng: np.random.Generator | int | None = None) -> np.ndarray:
    """The PMM authors' simulation setting: two Gaussian blobs, clipped to ``[0,1]^d``.

    Half the points (rounded down) around ``0.4 * 1`` with sd 0.1, the rest around
    ``0.7 * 1`` with sd 0.05 (the simulation script in the code repository of He, Vershynin and Zhu; their paper,
    "Algorithmically effective differentially private synthetic data", COLT 2023, has no experiments).
    """
    gen = np.random.default_rng(rng)
    first = n // 2
    X = np.vstack([gen.normal(0.4, 0.1, (first, d)), gen.normal(0.7, 0.05, (n - first, d))])
    return np.clip(X[gen.permutation(n)], 0.0, 1.0)


def balog_mixture(D: int, N: int = 100_000, seed: int = 0) -> np.ndarray:
    """Bit-exact regeneration of Balog et al.'s mixture of Gaussians ([BAL18], KD-tree paper G.1).

    Ten components with weights proportional to ``1, 1/2, ..., 1/10``; means drawn from
    ``N(100, 200^2 I)`` and points from ``N(mean, 30^2 I)`` (the papers' "covariance 200I /
    30I" means *standard deviations* 200 and 30, as Balog et al.'s ``src/data.py`` draws them: an erratum in the
    text of both papers).  Uses the legacy
    ``RandomState(seed)`` stream so the result equals Balog's ``.npz`` files.
    """
    rs = np.random.RandomState(seed)
    mus = rs.normal(100 * np.ones(D), 200, size=(10, D))
    ws = 1.0 / np.arange(1, 11)
    ws /= ws.sum()
    membership = rs.choice(10, size=N, p=ws)
    return rs.normal(mus[membership], 30)


# -- bundled sample tables for the app (written to assets/ by write_sample_assets) ---------------

#: Name -> one-line description of each bundled sample (assets/<name>.csv + assets/<name>.schema.json).
SAMPLES = {
    "blobs": "two Gaussian blobs in the unit square (2 columns, 2000 rows)",
    "moons": "scikit-learn's two interleaving half-moons with noise (2 columns, 2000 rows)",
    "gaussian_mixture": "a three-component Gaussian mixture in the plane (2 columns, 3000 rows)",
    "breast_cancer": "scikit-learn's bundled Wisconsin breast-cancer table (30 numeric columns + diagnosis, 569 rows)",
    "wine": "scikit-learn's bundled wine-recognition table (13 numeric columns + cultivar, 178 rows)",
}


def moons(n: int, rng: np.random.Generator | int | None = None, noise: float = 0.1):
    """scikit-learn's ``make_moons`` as a DataFrame ``x, y`` (public box [-1.5, 2.5] x [-1, 1.5])."""
    import pandas as pd
    from sklearn.datasets import make_moons

    seed = int(np.random.default_rng(rng).integers(2**31))
    X, _ = make_moons(n_samples=n, noise=noise, random_state=seed)
    return pd.DataFrame(np.clip(X, [-1.5, -1.0], [2.5, 1.5]), columns=["x", "y"])


def gaussian_mixture(n: int, rng: np.random.Generator | int | None = None):
    """Three Gaussians in the plane with weights 1/2, 1/3, 1/6, clipped to ``[-5, 5]^2``."""
    import pandas as pd

    gen = np.random.default_rng(rng)
    means = np.array([[-2.0, -1.0], [1.5, 2.0], [2.0, -2.5]])
    sds = np.array([0.8, 0.6, 0.4])
    comp = gen.choice(3, size=n, p=[1 / 2, 1 / 3, 1 / 6])
    X = means[comp] + sds[comp, None] * gen.standard_normal((n, 2))
    return pd.DataFrame(np.clip(X, -5.0, 5.0), columns=["x", "y"])


def nice_bound(x: float) -> float:
    """The smallest of ``{1, 2, 2.5, 5, 10} * 10^k`` that is ``>= x`` (for round public bounds)."""
    if x <= 0:
        return 0.0
    power = 10.0 ** np.floor(np.log10(x))
    return float(next(m * power for m in (1, 2, 2.5, 5, 10) if m * power >= x * (1 - 1e-12)))


def sample_tables() -> dict:
    """Every bundled sample as ``name -> (DataFrame, schema dict)``.

    The 2-D samples have bounds fixed by their generators.  The scikit-learn tables get
    generous round bounds (0 up to a round number above the published maximum of each
    feature): they are part of the sample's documentation, so they are treated as public.
    """
    import pandas as pd
    from sklearn.datasets import load_breast_cancer, load_wine

    tables = {
        "blobs": (pd.DataFrame(two_blobs(2000, 2, rng=0), columns=["x", "y"]), {"x": (0.0, 1.0), "y": (0.0, 1.0)}),
        "moons": (moons(2000, rng=1), {"x": (-1.5, 2.5), "y": (-1.0, 1.5)}),
        "gaussian_mixture": (gaussian_mixture(3000, rng=2), {"x": (-5.0, 5.0), "y": (-5.0, 5.0)}),
    }
    out = {name: (df, _numeric_schema(df, bounds)) for name, (df, bounds) in tables.items()}
    cancer = load_breast_cancer(as_frame=True)
    df = cancer.frame.rename(columns={"target": "diagnosis"})
    df["diagnosis"] = np.where(cancer.target == 0, "malignant", "benign")
    out["breast_cancer"] = (df, _round_schema(df, {"diagnosis": ("benign", "malignant")}))
    wine = load_wine(as_frame=True)
    df = wine.frame.rename(columns={"target": "cultivar"})
    df["cultivar"] = "class_" + df["cultivar"].astype(str)
    out["wine"] = (df, _round_schema(df, {"cultivar": ("class_0", "class_1", "class_2")}))
    return out


def _numeric_schema(df, bounds: dict) -> dict:
    return {"version": 1, "columns": [{"name": c, "kind": "numeric", "lo": bounds[c][0], "hi": bounds[c][1],
                                       "integer": False, "public": True} for c in df.columns]}


def _round_schema(df, categorical: dict) -> dict:
    columns = []
    for c in df.columns:
        if c in categorical:
            columns.append({"name": c, "kind": "categorical", "categories": list(categorical[c]), "public": True})
        else:
            lo = float(df[c].min())
            columns.append({"name": c, "kind": "numeric", "lo": 0.0 if lo >= 0 else -nice_bound(-lo),
                            "hi": nice_bound(float(df[c].max()) * 1.05), "integer": False, "public": True})
    return {"version": 1, "columns": columns}


def write_sample_assets(folder) -> list:
    """Write ``<name>.csv`` and ``<name>.schema.json`` for every sample into ``folder``."""
    import json
    from pathlib import Path

    from privsyn_core.data.io import to_csv_bytes

    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    written = []
    for name, (df, schema) in sample_tables().items():
        (folder / f"{name}.csv").write_bytes(to_csv_bytes(df.round(6)))
        schema = {**schema, "description": SAMPLES[name]}
        (folder / f"{name}.schema.json").write_text(json.dumps(schema, indent=1))
        written.append(name)
    return written
