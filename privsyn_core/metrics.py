"""Utility metrics between real and synthetic data (evaluation only: they read the real data).

W1 is exact: the closed form in d = 1, POT's network simplex (``ot.emd2``) in d >= 2.
"""

from __future__ import annotations

import numpy as np
import ot
from scipy.spatial.distance import pdist
from scipy.stats import wasserstein_distance

from .errors import ParameterError

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


_CHUNK_ELEMENTS = 4_000_000  # kernel entries held in memory at once (32 MB of float64)
_MEDIAN_SAMPLE = 1000  # points per side for the median heuristic
_MEDIAN_SEED = 0  # fixed, so the heuristic bandwidth is a deterministic function of the data


def gaussian_kernel_mean(X: np.ndarray, Y: np.ndarray, *, bandwidth: float, weights_x: np.ndarray | None = None,
                         weights_y: np.ndarray | None = None) -> float:
    r"""Weighted mean of the Gaussian kernel over all pairs, computed in row chunks.

    .. math:: \kappa(\mu, \nu) = \sum_{i,j} a_i b_j \exp\left(-\frac{\lVert x_i - y_j \rVert_2^2}{2\sigma^2}\right)

    This is the kernel mean :math:`\kappa(P, Q)` of eq (1) of the KD-tree paper (seed 002, spec A.8), with the
    weighted form used there for the released centres. Memory is bounded by processing rows of ``X`` in chunks
    of about ``4e6 / len(Y)`` rows; cost is O(n m d).

    Parameters
    ----------
    X, Y : array (n, d), (m, d)
    bandwidth : float
        Kernel width sigma > 0. Balog's kernel ``exp(-gamma ||x-y||^2)`` is ``bandwidth = 1 / sqrt(2 gamma)``.
    weights_x, weights_y : array, optional
        Non-negative weights, normalised here to sum to 1; uniform when omitted.

    Returns
    -------
    float
    """
    X, Y = _as_points(X), _as_points(Y)
    _check_same_dimension(X, Y)
    sigma = _check_bandwidth(bandwidth)
    a, b = _normalised(weights_x, len(X)), _normalised(weights_y, len(Y))
    y_sq = np.einsum("ij,ij->i", Y, Y)
    rows = max(1, _CHUNK_ELEMENTS // len(Y))
    total = 0.0
    for start in range(0, len(X), rows):
        block = X[start:start + rows]
        sq = np.einsum("ij,ij->i", block, block)[:, None] + y_sq[None, :] - 2.0 * block @ Y.T
        kernel = np.exp(-np.maximum(sq, 0.0) / (2.0 * sigma**2))
        total += a[start:start + rows] @ kernel @ b
    return float(total)


def median_bandwidth(X: np.ndarray, Y: np.ndarray | None = None, *, sample: int = _MEDIAN_SAMPLE) -> float:
    """Median heuristic: the median non-zero pairwise Euclidean distance of the pooled sample.

    The pooled sample is at most ``sample`` points drawn without replacement from each of ``X`` and ``Y``
    with a fixed seed (0), so the bandwidth is a deterministic function of the data (Gretton et al. 2012).
    Fix it once per dataset (from the real data) when comparing scores across epsilon.
    """
    picker = np.random.default_rng(_MEDIAN_SEED)
    sides = [_as_points(X)] + ([] if Y is None else [_as_points(Y)])
    pooled = np.vstack([s if len(s) <= sample else s[picker.choice(len(s), sample, replace=False)] for s in sides])
    distances = pdist(pooled)
    distances = distances[distances > 0]
    if len(distances) == 0:
        return 1.0
    return float(np.median(distances))


def mmd2(X: np.ndarray, Y: np.ndarray, *, bandwidth: float | str = "median", weights_x: np.ndarray | None = None,
         weights_y: np.ndarray | None = None, estimator: str = "biased") -> float:
    r"""Squared maximum mean discrepancy with the Gaussian kernel (signed for the unbiased estimator).

    ``"biased"`` is the V-statistic :math:`\kappa(P,P) + \kappa(Q,Q) - 2\kappa(P,Q)` of eq (1) of the KD-tree
    paper (spec A.8) and of Balog et al.'s "RKHS distance"; it includes i = j and is >= 0 up to rounding.
    ``"unbiased"`` is the U-statistic of Gretton et al. (2012, JMLR 13, eq 3): the diagonals of the unweighted
    sides are dropped (a weighted side is a measure, not a sample, and keeps its exact self-term); it can be < 0.
    ``"linear"`` is Gretton et al.'s linear-time estimator (Lemma 14) on unweighted samples.

    Parameters
    ----------
    X, Y : array (n, d), (m, d)
    bandwidth : float or "median"
        Kernel width sigma; "median" uses :func:`median_bandwidth` on the pooled sample.
    weights_x, weights_y : array, optional
        Weights of weighted atoms (e.g. released centres), normalised here.
    estimator : {"biased", "unbiased", "linear"}
    """
    X, Y = _as_points(X), _as_points(Y)
    _check_same_dimension(X, Y)
    sigma = median_bandwidth(X, Y) if isinstance(bandwidth, str) and bandwidth == "median" else bandwidth
    sigma = _check_bandwidth(sigma)
    if estimator == "linear":
        return _mmd2_linear(X, Y, sigma, weights_x, weights_y)
    if estimator not in ("biased", "unbiased"):
        raise ParameterError(f"estimator must be 'biased', 'unbiased' or 'linear', got {estimator!r}")
    k_xx = _self_term(X, weights_x, sigma, unbiased=estimator == "unbiased")
    k_yy = _self_term(Y, weights_y, sigma, unbiased=estimator == "unbiased")
    k_xy = gaussian_kernel_mean(X, Y, bandwidth=sigma, weights_x=weights_x, weights_y=weights_y)
    return float(k_xx + k_yy - 2.0 * k_xy)


def mmd(X: np.ndarray, Y: np.ndarray, *, bandwidth: float | str = "median", weights_x: np.ndarray | None = None,
        weights_y: np.ndarray | None = None, estimator: str = "biased") -> float:
    """Maximum mean discrepancy ``sqrt(max(mmd2, 0))`` with the Gaussian kernel (see :func:`mmd2`).

    With the default biased V-statistic this is eq (1) of the KD-tree paper and Balog et al.'s RKHS distance.
    A negative unbiased estimate (possible when the two laws are close) is reported as 0 here; call
    :func:`mmd2` for the signed value.
    """
    value = mmd2(X, Y, bandwidth=bandwidth, weights_x=weights_x, weights_y=weights_y, estimator=estimator)
    return float(np.sqrt(max(value, 0.0)))


def _self_term(X: np.ndarray, weights: np.ndarray | None, sigma: float, *, unbiased: bool) -> float:
    """kappa(P, P); for the U-statistic of an unweighted sample the i = j terms (each 1) are removed."""
    full = gaussian_kernel_mean(X, X, bandwidth=sigma, weights_x=weights, weights_y=weights)
    if not unbiased or weights is not None:
        return full
    n = len(X)
    if n < 2:
        raise ParameterError("the unbiased MMD needs at least 2 points on each unweighted side")
    return (n * n * full - n) / (n * (n - 1))


def _mmd2_linear(X: np.ndarray, Y: np.ndarray, sigma: float, weights_x, weights_y) -> float:
    """Linear-time MMD^2 (Gretton et al. 2012, Lemma 14): mean of h over disjoint pairs of samples."""
    if weights_x is not None or weights_y is not None:
        raise ParameterError("the linear MMD estimator needs unweighted samples; use estimator='biased'")
    half = min(len(X), len(Y)) // 2
    if half < 1:
        raise ParameterError("the linear MMD estimator needs at least 2 points on each side")
    x1, x2, y1, y2 = X[:half], X[half:2 * half], Y[:half], Y[half:2 * half]

    def k(u: np.ndarray, v: np.ndarray) -> np.ndarray:
        return np.exp(-np.sum((u - v) ** 2, axis=1) / (2.0 * sigma**2))

    return float(np.mean(k(x1, x2) + k(y1, y2) - k(x1, y2) - k(x2, y1)))


def _check_same_dimension(X: np.ndarray, Y: np.ndarray) -> None:
    if X.shape[1] != Y.shape[1]:
        raise ParameterError(f"dimension mismatch: {X.shape[1]} vs {Y.shape[1]} columns; compare the same columns")


def _check_bandwidth(bandwidth: float) -> float:
    sigma = float(bandwidth)
    if not np.isfinite(sigma) or sigma <= 0:
        raise ParameterError(f"bandwidth must be a positive number or 'median', got {bandwidth!r}")
    return sigma


def _normalised(weights: np.ndarray | None, n: int) -> np.ndarray:
    w = np.full(n, 1.0 / n) if weights is None else np.asarray(weights, dtype=float)
    if w.shape != (n,) or not np.all(np.isfinite(w)) or np.any(w < 0) or w.sum() <= 0:
        raise ParameterError("weights must be finite, non-negative, one per point, with a positive sum")
    return w / w.sum()


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
