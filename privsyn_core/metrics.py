"""Utility metrics between real and synthetic data (evaluation only: they read the real data).

W1 is exact: the closed form in d = 1, POT's network simplex (``ot.emd2``) in d >= 2.
"""

from __future__ import annotations

import numpy as np
import ot
from scipy.stats import wasserstein_distance

_METRICS = {"chebyshev": "chebyshev", "euclidean": "euclidean", "cityblock": "cityblock"}


def w1(X: np.ndarray, Y: np.ndarray, *, weights_x: np.ndarray | None = None, weights_y: np.ndarray | None = None,
       metric: str = "chebyshev", method: str = "auto") -> float:
    r"""Exact 1-Wasserstein distance between two (weighted) point clouds.

    .. math:: W_1(\mu, \nu) = \min_{\gamma \in \Gamma(\mu,\nu)} \sum_{ij} \gamma_{ij} \rho(x_i, y_j)

    Parameters
    ----------
    X, Y : array (n, d), (m, d)
    weights_x, weights_y : array, optional
        Non-negative weights (normalised here); uniform when omitted.
    metric : {"chebyshev", "euclidean", "cityblock"}
        Ground metric; the papers' theory uses the l-infinity (chebyshev) metric.
    method : {"auto", "exact"}
    """
    X, Y = _as_points(X), _as_points(Y)
    if X.shape[1] != Y.shape[1]:
        raise ValueError(f"dimension mismatch: {X.shape[1]} vs {Y.shape[1]}")
    if metric not in _METRICS:
        raise ValueError(f"metric must be one of {list(_METRICS)}, got {metric!r}")
    a, X = _merge(X, weights_x)
    b, Y = _merge(Y, weights_y)
    if X.shape[1] == 1:
        return float(wasserstein_distance(X[:, 0], Y[:, 0], a, b))
    M = ot.dist(X, Y, metric=_METRICS[metric])
    value, log = ot.emd2(a, b, M, numItermax=10**8, log=True)
    if log.get("warning"):
        raise RuntimeError(f"POT did not reach the optimum: {log['warning']}")
    return float(value)


def _as_points(X: np.ndarray) -> np.ndarray:
    X = np.asarray(X, dtype=float)
    if X.ndim == 1:
        X = X[:, None]
    if len(X) == 0:
        raise ValueError("W1 needs at least one point on each side")
    return X


def _merge(X: np.ndarray, w: np.ndarray | None) -> tuple[np.ndarray, np.ndarray]:
    """Merge duplicate points into weighted atoms; return normalised weights and atoms."""
    w = np.ones(len(X)) if w is None else np.asarray(w, dtype=float)
    if w.shape != (len(X),) or np.any(w < 0) or w.sum() <= 0:
        raise ValueError("weights must be non-negative, one per point, with a positive sum")
    atoms, inverse = np.unique(X, axis=0, return_inverse=True)
    merged = np.bincount(inverse.ravel(), weights=w, minlength=len(atoms))
    return merged / merged.sum(), atoms


def evaluate(real_df, synth_df, schema=None) -> dict:
    """Every metric between a real and a synthetic table, with how each was computed.

    Both tables are encoded with the same schema (inferred from the real data when not
    given) and compared in unit coordinates.
    """
    from .domain import Schema

    schema = Schema.infer(real_df) if schema is None else schema
    real, _ = schema.encode(real_df)
    synth, _ = schema.encode(synth_df)
    return {"w1": {"value": w1(real, synth), "metric": "chebyshev", "space": "unit cube", "method": "exact"}}
