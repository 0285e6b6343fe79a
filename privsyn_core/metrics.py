"""Utility metrics between real and synthetic data (evaluation only: they read the real data).

* :func:`w1`: 1-Wasserstein distance; exact (1-D closed form, POT network simplex) or, for large inputs, exact on a
  common grid with a stated additive error bound. The value is a :class:`W1Value` (a float that says how it was
  computed). :func:`sliced_w1` is a cheaper, different quantity.
* :func:`mmd` / :func:`mmd2`: Gaussian-kernel maximum mean discrepancy (biased V-statistic, unbiased U-statistic,
  linear-time block estimator); :func:`gaussian_kernel_mean` is the chunked kernel mean they use.
* :func:`marginal_tvd`, :func:`correlation_gap`, :func:`boolean_marginal_errors`: marginal fidelity.
* :func:`evaluate`: all of them (plus TSTR from :mod:`privsyn_core.utility` on request), each with a real-vs-real
  split-half floor.
"""

from __future__ import annotations

from dataclasses import dataclass
from itertools import combinations

import numpy as np
import ot
import pandas as pd
from scipy.spatial.distance import pdist
from scipy.stats import wasserstein_distance

from .domain import Schema
from .errors import DataError, ParameterError

_METRICS = ("chebyshev", "euclidean", "cityblock")
_METHODS = ("auto", "exact", "grid")
EXACT_MAX_ENTRIES = 4_000_000  # default cost-matrix budget of "auto" and "grid" (32 MB, about 2 s of POT)
EXACT_HARD_LIMIT = 25_000_000  # method="exact" refuses larger cost matrices (200 MB)
_EMD_ITERATIONS = 10**9
_CANCEL_TOLERANCE = 1e-15
_MAX_CELLS_PER_AXIS = 2**16


class W1Value(float):
    """A W1 value: a plain ``float`` that also says how it was computed.

    Attributes
    ----------
    method : str
        ``"closed_form_1d"`` (d = 1, exact), ``"exact_emd"`` (POT network simplex, exact) or ``"grid_emd"``
        (exact W1 between the two measures moved onto the centres of a common grid of ``cells_per_axis`` cells
        per axis; the true W1 lies within ``error_bound`` of the value).
    error_bound : float
        Additive bound: ``|W1(mu, nu) - value| <= error_bound``; 0 for the exact methods.
    cells_per_axis : int or None
        Grid resolution of ``"grid_emd"``.
    """

    method: str
    error_bound: float
    cells_per_axis: int | None

    def __new__(cls, value: float, method: str, error_bound: float = 0.0, cells_per_axis: int | None = None):
        out = super().__new__(cls, value)
        out.method, out.error_bound, out.cells_per_axis = method, float(error_bound), cells_per_axis
        return out

    def __reduce__(self):
        return (W1Value, (float(self), self.method, self.error_bound, self.cells_per_axis))

    def describe(self) -> dict:
        """The value with how it was computed, JSON-ready."""
        return {"value": float(self), "method": self.method, "error_bound": self.error_bound,
                "cells_per_axis": self.cells_per_axis}


def w1(X: np.ndarray, Y: np.ndarray, *, weights_x: np.ndarray | None = None, weights_y: np.ndarray | None = None,
       metric: str = "chebyshev", method: str = "auto", max_entries: int = EXACT_MAX_ENTRIES) -> W1Value:
    r"""1-Wasserstein distance between two (weighted) point clouds.

    .. math:: W_1(\mu, \nu) = \min_{\gamma \in \Gamma(\mu,\nu)} \sum_{ij} \gamma_{ij} \rho(x_i, y_j)

    Duplicate points are merged into weighted atoms and mass common to both measures at the same atom is
    cancelled first (for a metric, :math:`W_1(\mu,\nu) = W_1((\mu-\nu)^+, (\mu-\nu)^-)`, Kantorovich-Rubinstein).

    * d = 1: exact closed form :math:`\int |F_\mu - F_\nu|` (``scipy.stats.wasserstein_distance``; every
      ground metric is ``|x - y|`` on the line).
    * ``"exact"``: POT's network simplex ``ot.emd2`` on the cancelled atoms; raises if POT stops before the
      optimum. ``"auto"`` uses it while the cost matrix has at most ``max_entries`` entries.
    * ``"grid"``: both measures are moved to the centres of a common grid of equal cubes over their joint bounding
      box, the finest grid whose cancelled cost matrix fits ``max_entries``, and W1 between the moved
      measures is solved exactly. By the triangle inequality
      :math:`|W_1(\mu,\nu) - W_1(\mu_q,\nu_q)| \le \sum_i a_i \rho(x_i, c(x_i)) + \sum_j b_j \rho(y_j, c(y_j))`,
      which is computed exactly and returned as ``error_bound`` (at most one cell diameter).

    Parameters
    ----------
    X, Y : array (n, d), (m, d)
    weights_x, weights_y : array, optional
        Non-negative weights (normalised here); uniform when omitted.
    metric : {"chebyshev", "euclidean", "cityblock"}
        Ground metric; the papers' theory uses the l-infinity (chebyshev) metric.
    method : {"auto", "exact", "grid"}
    max_entries : int
        Cost-matrix budget (positive atoms x negative atoms) of "auto" and "grid": time and memory grow with it,
        the grid's error bound shrinks like ``max_entries ** (-1 / (2 d))``.

    Returns
    -------
    W1Value
        A ``float`` carrying ``.method`` and ``.error_bound`` (see :class:`W1Value`).
    """
    X, Y = _as_points(X), _as_points(Y)
    _check_same_dimension(X, Y)
    if metric not in _METRICS:
        raise ParameterError(f"metric must be one of {list(_METRICS)}, got {metric!r}")
    if method not in _METHODS:
        raise ParameterError(f"method must be one of {list(_METHODS)}, got {method!r}")
    a, X = _merge(X, weights_x)
    b, Y = _merge(Y, weights_y)
    if X.shape[1] == 1:
        return W1Value(wasserstein_distance(X[:, 0], Y[:, 0], a, b), "closed_form_1d")
    atoms, diff = _signed_difference(X, a, Y, b)
    entries = np.count_nonzero(diff > 0) * np.count_nonzero(diff < 0)
    if method == "exact" or (method == "auto" and entries <= max_entries):
        if entries > EXACT_HARD_LIMIT:
            raise ParameterError(f"exact W1 would need a {entries:.3g}-entry cost matrix (limit {EXACT_HARD_LIMIT:.3g}); "
                                 "use method='grid' or 'auto'")
        return W1Value(_signed_emd(atoms, diff, metric), "exact_emd")
    return _grid_w1(X, a, Y, b, metric, max_entries)


def sliced_w1(X: np.ndarray, Y: np.ndarray, *, weights_x: np.ndarray | None = None,
              weights_y: np.ndarray | None = None, n_projections: int = 200, seed: int = 0) -> float:
    r"""Sliced W1: the mean over random unit directions :math:`\theta` of the 1-D W1 of the projections.

    .. math:: SW_1(\mu,\nu) = \mathbb{E}_{\theta \sim U(S^{d-1})} W_1(\theta_\# \mu, \theta_\# \nu)

    A different quantity from W1 (never larger than Euclidean W1), O(n log n) per direction; use it for
    trends, never as "W1". The ``n_projections`` directions are uniform on the sphere, drawn from
    ``numpy.random.default_rng(seed)``; each 1-D W1 is the exact :math:`\int |F_\mu - F_\nu|`, all directions
    in one vectorised sort.
    """
    X, Y = _as_points(X), _as_points(Y)
    _check_same_dimension(X, Y)
    signed = np.concatenate([_normalised(weights_x, len(X)), -_normalised(weights_y, len(Y))])
    if X.shape[1] == 1:
        directions = np.ones((1, 1))
    else:
        directions = np.random.default_rng(seed).standard_normal((X.shape[1], n_projections))
        directions /= np.linalg.norm(directions, axis=0)
    projected = np.vstack([X, Y]) @ directions
    order = np.argsort(projected, axis=0)
    cdf_gap = np.cumsum(signed[order], axis=0)[:-1]
    steps = np.diff(np.take_along_axis(projected, order, axis=0), axis=0)
    return float(np.mean(np.sum(np.abs(cdf_gap) * steps, axis=0)))


def _as_points(X: np.ndarray) -> np.ndarray:
    X = np.asarray(X, dtype=float)
    if X.ndim == 1:
        X = X[:, None]
    if X.ndim != 2 or len(X) == 0:
        raise DataError("a metric needs a non-empty (n, d) array of points on each side")
    if not np.all(np.isfinite(X)):
        raise DataError("points contain NaN or infinite values; remove or impute them first")
    return X


def _merge(X: np.ndarray, w: np.ndarray | None) -> tuple[np.ndarray, np.ndarray]:
    """Merge duplicate points into weighted atoms; return normalised weights and atoms."""
    w = _normalised(w, len(X))
    atoms, inverse = _unique_rows(X)
    merged = np.bincount(inverse, weights=w, minlength=len(atoms))
    return merged / merged.sum(), atoms


def _signed_difference(X: np.ndarray, a: np.ndarray, Y: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Atoms of the union and mu - nu on them, with float dust (|.| <= 1e-15) set to 0."""
    atoms, inverse = _unique_rows(np.vstack([X, Y]))
    diff = (np.bincount(inverse[:len(X)], weights=a, minlength=len(atoms))
            - np.bincount(inverse[len(X):], weights=b, minlength=len(atoms)))
    diff[np.abs(diff) <= _CANCEL_TOLERANCE] = 0.0
    return atoms, diff


def _unique_rows(P: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Distinct rows (lexicographic order) and the index of each row's copy; a lexsort, faster than np.unique(axis=0)."""
    order = np.lexsort(P.T[::-1])
    ordered = P[order]
    starts = np.r_[True, np.any(ordered[1:] != ordered[:-1], axis=1)]
    inverse = np.empty(len(P), dtype=np.int64)
    inverse[order] = np.cumsum(starts) - 1
    return ordered[starts], inverse


def _signed_emd(atoms: np.ndarray, diff: np.ndarray, metric: str) -> float:
    """Exact W1((diff)^+, (diff)^-) by POT's network simplex, checked to have reached the optimum."""
    pos, neg = diff > 0, diff < 0
    if not pos.any():
        return 0.0
    p, q = diff[pos], -diff[neg]
    mass = 0.5 * (p.sum() + q.sum())
    cost = ot.dist(atoms[pos], atoms[neg], metric=metric)
    value, log = ot.emd2(p / p.sum(), q / q.sum(), cost, numItermax=_EMD_ITERATIONS, log=True)
    if log.get("warning"):
        raise RuntimeError(f"POT did not reach the optimal transport plan: {log['warning']}")
    return float(value) * mass


def _grid_w1(X: np.ndarray, a: np.ndarray, Y: np.ndarray, b: np.ndarray, metric: str, max_entries: int) -> W1Value:
    """W1 on the finest common grid whose cancelled cost matrix fits, with the exact quantisation bound."""
    lo = np.minimum(X.min(axis=0), Y.min(axis=0))
    span = float(np.max(np.maximum(X.max(axis=0), Y.max(axis=0)) - lo))
    k = _finest_grid(X, a, Y, b, lo, span, max_entries)
    width = span / k
    cx, cy = _cell_centres(X, lo, width, k), _cell_centres(Y, lo, width, k)
    atoms, diff = _signed_difference(cx, a, cy, b)
    value = _signed_emd(atoms, diff, metric)
    bound = a @ _pointwise_distance(X, cx, metric) + b @ _pointwise_distance(Y, cy, metric)
    return W1Value(value, "grid_emd", error_bound=bound, cells_per_axis=k)


def _finest_grid(X: np.ndarray, a: np.ndarray, Y: np.ndarray, b: np.ndarray, lo: np.ndarray, span: float,
                 max_entries: int) -> int:
    """Largest cells-per-axis k (doubling, then bisection) with #(mu_q > nu_q) * #(mu_q < nu_q) <= the budget."""
    def fits(k: int) -> bool:
        width = span / k
        keys = np.r_[_cell_key(X, lo, width, k), _cell_key(Y, lo, width, k)]
        cells, inverse = np.unique(keys, return_inverse=True)
        diff = (np.bincount(inverse[:len(X)], weights=a, minlength=len(cells))
                - np.bincount(inverse[len(X):], weights=b, minlength=len(cells)))
        return np.sum(diff > _CANCEL_TOLERANCE) * np.sum(diff < -_CANCEL_TOLERANCE) <= max_entries

    good, bad = 1, 2
    limit = min(_MAX_CELLS_PER_AXIS, int(2 ** (62 / X.shape[1])))
    while bad <= limit and fits(bad):
        good, bad = bad, 2 * bad
    if bad > limit:
        return good
    while bad - good > 1:
        mid = (good + bad) // 2
        good, bad = (mid, bad) if fits(mid) else (good, mid)
    return good


def _cell_index(P: np.ndarray, lo: np.ndarray, width: float, k: int) -> np.ndarray:
    return np.clip(np.floor((P - lo) / width), 0, k - 1)


def _cell_key(P: np.ndarray, lo: np.ndarray, width: float, k: int) -> np.ndarray:
    """One integer per cell (base-k digits of the cell index; k ** d < 2 ** 63 by _MAX_CELLS_PER_AXIS)."""
    return _cell_index(P, lo, width, k).astype(np.int64) @ (k ** np.arange(P.shape[1], dtype=np.int64))


def _cell_centres(P: np.ndarray, lo: np.ndarray, width: float, k: int) -> np.ndarray:
    return lo + (_cell_index(P, lo, width, k) + 0.5) * width


def _pointwise_distance(P: np.ndarray, Q: np.ndarray, metric: str) -> np.ndarray:
    gap = np.abs(P - Q)
    if metric == "chebyshev":
        return gap.max(axis=1)
    if metric == "cityblock":
        return gap.sum(axis=1)
    return np.sqrt(np.einsum("ij,ij->i", gap, gap))


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
    try:
        sigma = float(bandwidth)
    except (TypeError, ValueError):
        sigma = np.nan
    if not np.isfinite(sigma) or sigma <= 0:
        raise ParameterError(f"bandwidth must be a positive number or 'median', got {bandwidth!r}")
    return sigma


def _normalised(weights: np.ndarray | None, n: int) -> np.ndarray:
    w = np.full(n, 1.0 / n) if weights is None else np.asarray(weights, dtype=float)
    if w.shape != (n,) or not np.all(np.isfinite(w)) or np.any(w < 0) or w.sum() <= 0:
        raise ParameterError("weights must be finite, non-negative, one per point, with a positive sum")
    return w / w.sum()


# -- marginals --------------------------------------------------------------------------------
def marginal_tvd(real_df: pd.DataFrame, synth_df: pd.DataFrame, order: int = 1, bins: int = 20,
                 schema: Schema | None = None) -> pd.DataFrame:
    r"""Total variation between the 1-way (per column) or 2-way (per pair) marginal histograms.

    .. math:: \mathrm{TV}(p, q) = \tfrac12 \sum_{\text{bins}} |p_b - q_b| \in [0, 1]

    Bins are public: ``bins`` equal-width bins over each numeric column's schema bounds ``[lo, hi]`` (values
    outside are clipped into the end bins, as the encoding does) and one bin per category. The schema is
    inferred from the real data when not given (its bounds are then read off the data).

    Returns
    -------
    DataFrame
        ``column, bins, tvd`` (order 1) or ``column_a, column_b, bins, tvd`` (order 2).
    """
    if order not in (1, 2):
        raise ParameterError(f"order must be 1 or 2, got {order!r}")
    schema = Schema.infer(real_df) if schema is None else schema
    real_codes, sizes = _bin_codes(schema.encode(real_df)[0], schema, bins)
    synth_codes, _ = _bin_codes(schema.encode(synth_df)[0], schema, bins)
    return _tvd_table(real_codes, synth_codes, sizes, schema.names, order)


def correlation_gap(real: np.ndarray, synth: np.ndarray) -> dict:
    """Gap between the Pearson correlation matrices of two tables in unit coordinates.

    A constant column has correlation 0 with every other column. Returns the largest and the mean
    absolute gap over the off-diagonal pairs (0 with a single column).
    """
    upper = np.triu_indices(real.shape[1], 1)
    gap = np.abs(_correlation(real) - _correlation(synth))[upper]
    if gap.size == 0:
        return {"max": 0.0, "mean": 0.0}
    return {"max": float(gap.max()), "mean": float(gap.mean())}


def boolean_marginal_errors(real_bits: np.ndarray, synth_bits: np.ndarray, max_order: int = 3) -> dict[int, float]:
    r"""Average squared error of all k-way marginals of Boolean data, k = 1..max_order.

    Eq (1.2) of the covariance-loss paper (seed 001, spec covariance-loss.md 1.2):
    :math:`\binom{p}{k}^{-1} \sum_{i_1<\dots<i_k} E(i_1..i_k)^2`, with
    :math:`E = \frac1n\sum_i x_i(i_1)\cdots x_i(i_k) - \frac1m \sum_l z_l(i_1)\cdots z_l(i_k)`.
    Orders above the number of columns p are left out.
    """
    from .microagg import avg_sq_marginal_error

    p = real_bits.shape[1]
    return {k: avg_sq_marginal_error(real_bits, synth_bits, k) for k in range(1, min(max_order, p) + 1)}


def _bin_codes(unit: np.ndarray, schema: Schema, bins: int) -> tuple[np.ndarray, list[int]]:
    """Public bin index of every value: equal-width numeric bins on [0, 1] unit coordinates, one bin per category."""
    if not isinstance(bins, (int, np.integer)) or bins < 1:
        raise ParameterError(f"bins must be a positive integer, got {bins!r}")
    sizes = [bins if c.kind == "numeric" else len(c.categories) for c in schema.columns]
    k = np.array(sizes)
    return np.minimum((unit * k).astype(np.int64), k - 1), sizes


def _tvd_table(real: np.ndarray, synth: np.ndarray, sizes: list[int], names: list[str], order: int) -> pd.DataFrame:
    if order == 1:
        rows = [{"column": names[j], "bins": sizes[j], "tvd": _tvd(real[:, j], synth[:, j], sizes[j])}
                for j in range(len(names))]
        return pd.DataFrame(rows, columns=["column", "bins", "tvd"])
    rows = []
    for i, j in combinations(range(len(names)), 2):
        cells = sizes[i] * sizes[j]
        tvd = _tvd(real[:, i] * sizes[j] + real[:, j], synth[:, i] * sizes[j] + synth[:, j], cells)
        rows.append({"column_a": names[i], "column_b": names[j], "bins": cells, "tvd": tvd})
    return pd.DataFrame(rows, columns=["column_a", "column_b", "bins", "tvd"])


def _tvd(real_codes: np.ndarray, synth_codes: np.ndarray, size: int) -> float:
    p = np.bincount(real_codes, minlength=size) / len(real_codes)
    q = np.bincount(synth_codes, minlength=size) / len(synth_codes)
    return float(0.5 * np.abs(p - q).sum())


def _correlation(X: np.ndarray) -> np.ndarray:
    centred = X - X.mean(axis=0)
    scale = np.sqrt(np.einsum("ij,ij->j", centred, centred))
    z = np.divide(centred, scale, out=np.zeros_like(centred), where=scale > 0)
    return z.T @ z


def _boolean_bits(unit: np.ndarray, schema: Schema) -> np.ndarray | None:
    """{0,1} columns when every column is Boolean (two categories, or numeric [0, 1] holding only 0 and 1)."""
    bits = np.empty(unit.shape)
    for j, col in enumerate(schema.columns):
        if col.kind == "categorical" and len(col.categories) == 2:
            bits[:, j] = unit[:, j] > 0.5
        elif col.kind == "numeric" and (col.lo, col.hi) == (0.0, 1.0) and np.all((unit[:, j] == 0) | (unit[:, j] == 1)):
            bits[:, j] = unit[:, j]
        else:
            return None
    return bits


# -- evaluation report ---------------------------------------------------------------------------
EVAL_W1_ENTRIES = 250_000  # W1 cost-matrix budget in evaluate (about 0.1 s of POT)
EVAL_MMD_SAMPLE = 1000  # points per side for MMD in evaluate
EVAL_PROJECTIONS = 50  # directions of sliced W1 in evaluate


def evaluate(real_df: pd.DataFrame, synth_df: pd.DataFrame, schema: Schema | None = None, *,
             target: str | None = None, real_test: pd.DataFrame | None = None, floor: bool = True, bins: int = 20,
             seed: int = 0, w1_max_entries: int = EVAL_W1_ENTRIES, mmd_sample: int = EVAL_MMD_SAMPLE) -> dict:
    """Every metric between a real and a synthetic table, each with how it was computed.

    Both tables are encoded with the same schema (inferred from the real data when not given: its bounds are then
    not public) and compared in the unit cube of the schema. Each metric is a dict with ``value``, the details of
    its computation and, with ``floor=True``, ``floor``: the same metric between two random halves of the real data
    (seeded by ``seed``), the sampling-noise level a perfect synthesiser would show at half the size.
    All metrics read the real data: they are for evaluation, never part of a private release.

    Parameters
    ----------
    real_df, synth_df : DataFrame
    schema : Schema, optional
    target : str, optional
        Column for train-on-synthetic/test-on-real (TSTR, :func:`privsyn_core.utility.tstr`); opt-in because it
        trains models.
    real_test : DataFrame, optional
        Real hold-out for TSTR (rows not used to make the synthetic data); else a split of ``real_df``.
    floor : bool
        Add the real-vs-real (split-half) value to every metric.
    bins : int
        Bins per numeric column for the marginal TVDs.
    seed : int
        Seeds the split-half floor and the MMD subsample.
    w1_max_entries, mmd_sample : int
        Cost-matrix budget of :func:`w1` and points per side for :func:`mmd` (speed versus exactness).

    Returns
    -------
    dict
        ``w1``, ``sliced_w1``, ``mmd``, ``marginal_tvd_1way``, ``marginal_tvd_2way``, ``correlation_gap``,
        ``boolean_marginals`` (all-Boolean data), ``tstr`` (with ``target``), and ``_about`` / ``_tables``
        (bookkeeping: sizes, notes, per-column and per-pair TVD tables).
    """
    schema = Schema.infer(real_df) if schema is None else schema
    real, synth = schema.encode(real_df)[0], schema.encode(synth_df)[0]
    half_a, half_b = _halves(real, seed) if floor and len(real) >= 4 else (None, None)
    sigma = median_bandwidth(real)
    settings = _EvalSettings(schema, bins, seed, w1_max_entries, mmd_sample, sigma)
    report = {}
    for name, metric in _METRICS_FOR_REPORT.items():
        entry = metric(real, synth, settings)
        if entry is None:
            continue
        if half_a is not None:
            entry["floor"] = metric(half_a, half_b, settings)["value"]
        report[name] = entry
    tables = {"marginal_tvd_1way": _tvd_table(*_codes(real, synth, settings), schema.names, 1),
              "marginal_tvd_2way": _tvd_table(*_codes(real, synth, settings), schema.names, 2)}
    if target is not None:
        from .utility import tstr

        report["tstr"] = tstr(real_df, synth_df, target, real_test=real_test, schema=schema, seed=seed)
    report["_about"] = {"n_real": len(real), "n_synthetic": len(synth), "columns": schema.names,
                        "space": "unit cube of the schema", "public_domain": schema.dp_valid,
                        "floor": "same metric between two random halves of the real data" if half_a is not None
                        else "not computed", "evaluation_only": "metrics read the real data: not a private release"}
    report["_tables"] = tables
    return report


@dataclass(frozen=True)
class _EvalSettings:
    schema: Schema
    bins: int
    seed: int
    w1_max_entries: int
    mmd_sample: int
    bandwidth: float


def _halves(X: np.ndarray, seed: int) -> tuple[np.ndarray, np.ndarray]:
    order = np.random.default_rng(seed).permutation(len(X))
    half = len(X) // 2
    return X[order[:half]], X[order[half:2 * half]]


def _codes(real: np.ndarray, synth: np.ndarray, s: _EvalSettings):
    real_codes, sizes = _bin_codes(real, s.schema, s.bins)
    return real_codes, _bin_codes(synth, s.schema, s.bins)[0], sizes


def _w1_entry(real: np.ndarray, synth: np.ndarray, s: _EvalSettings) -> dict:
    value = w1(real, synth, metric="chebyshev", max_entries=s.w1_max_entries)
    return {**value.describe(), "metric": "chebyshev"}


def _sliced_entry(real: np.ndarray, synth: np.ndarray, s: _EvalSettings) -> dict:
    return {"value": sliced_w1(real, synth, n_projections=EVAL_PROJECTIONS, seed=s.seed),
            "projections": EVAL_PROJECTIONS, "note": "not W1: mean 1-D W1 over random directions"}


def _mmd_entry(real: np.ndarray, synth: np.ndarray, s: _EvalSettings) -> dict:
    picker = np.random.default_rng(s.seed)
    sample = [P if len(P) <= s.mmd_sample else P[picker.choice(len(P), s.mmd_sample, replace=False)]
              for P in (real, synth)]
    return {"value": mmd(*sample, bandwidth=s.bandwidth), "estimator": "biased (V-statistic)",
            "bandwidth": s.bandwidth, "bandwidth_from": "median heuristic on the real data",
            "sample_per_side": s.mmd_sample}


def _tvd1_entry(real: np.ndarray, synth: np.ndarray, s: _EvalSettings) -> dict:
    tvd = _tvd_table(*_codes(real, synth, s), s.schema.names, 1)["tvd"]
    return {"value": float(tvd.mean()), "max": float(tvd.max()), "bins": s.bins, "aggregate": "mean over columns"}


def _tvd2_entry(real: np.ndarray, synth: np.ndarray, s: _EvalSettings) -> dict | None:
    if real.shape[1] < 2:
        return None
    tvd = _tvd_table(*_codes(real, synth, s), s.schema.names, 2)["tvd"]
    return {"value": float(tvd.mean()), "max": float(tvd.max()), "bins": s.bins, "aggregate": "mean over pairs"}


def _correlation_entry(real: np.ndarray, synth: np.ndarray, s: _EvalSettings) -> dict | None:
    if real.shape[1] < 2:
        return None
    gap = correlation_gap(real, synth)
    return {"value": gap["max"], "mean": gap["mean"], "aggregate": "max |corr gap| over pairs (Pearson, unit cube)"}


def _boolean_entry(real: np.ndarray, synth: np.ndarray, s: _EvalSettings) -> dict | None:
    real_bits, synth_bits = _boolean_bits(real, s.schema), _boolean_bits(synth, s.schema)
    if real_bits is None or synth_bits is None:
        return None
    errors = boolean_marginal_errors(real_bits, synth_bits)
    return {"value": errors[max(errors)], **{f"order_{k}": v for k, v in errors.items()},
            "aggregate": "average squared k-way marginal error, value at the highest order (seed 001 eq 1.2)"}


_METRICS_FOR_REPORT = {"w1": _w1_entry, "sliced_w1": _sliced_entry, "mmd": _mmd_entry,
                       "marginal_tvd_1way": _tvd1_entry, "marginal_tvd_2way": _tvd2_entry,
                       "correlation_gap": _correlation_entry, "boolean_marginals": _boolean_entry}
