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
    ``0.7 * 1`` with sd 0.05 (spec ``pmm-psmm-kdtree.md`` B.5).
    """
    gen = np.random.default_rng(rng)
    first = n // 2
    X = np.vstack([gen.normal(0.4, 0.1, (first, d)), gen.normal(0.7, 0.05, (n - first, d))])
    return np.clip(X[gen.permutation(n)], 0.0, 1.0)


def balog_mixture(D: int, N: int = 100_000, seed: int = 0) -> np.ndarray:
    """Bit-exact regeneration of Balog et al.'s mixture of Gaussians ([BAL18], KD-tree paper G.1).

    Ten components with weights proportional to ``1, 1/2, ..., 1/10``; means drawn from
    ``N(100, 200^2 I)`` and points from ``N(mean, 30^2 I)`` (the papers' "covariance 200I /
    30I" means *standard deviations* 200 and 30: spec A.10 erratum).  Uses the legacy
    ``RandomState(seed)`` stream so the result equals Balog's ``.npz`` files.
    """
    rs = np.random.RandomState(seed)
    mus = rs.normal(100 * np.ones(D), 200, size=(10, D))
    ws = 1.0 / np.arange(1, 11)
    ws /= ws.sum()
    membership = rs.choice(10, size=N, p=ws)
    return rs.normal(mus[membership], 30)
