"""Utility metrics between real and synthetic data (evaluation only: they read the real data).

* :func:`w1`: 1-Wasserstein distance; exact (1-D closed form, POT network simplex) or, for large inputs, exact on a
  common grid with a stated additive error bound. The value is a :class:`W1Value` (a float that says how it was
  computed). :func:`sliced_w1` is a cheaper, different quantity.
* :func:`mmd` / :func:`mmd2`: Gaussian-kernel maximum mean discrepancy (biased V-statistic, unbiased U-statistic,
  linear-time block estimator); :func:`gaussian_kernel_mean` is the chunked kernel mean they use.
* :func:`marginal_tvd`, :func:`correlation_gap`, :func:`boolean_marginal_errors`: marginal fidelity.
* :func:`evaluate`: all of them (plus TSTR from :mod:`privsyn_core.evaluation.utility` on request), each with a
  real-vs-real split-half floor.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from itertools import combinations, product as itertools_product
from typing import Any

import numpy as np
import ot
import pandas as pd
from scipy import sparse
from scipy.spatial.distance import pdist
from scipy.stats import t as student_t, wasserstein_distance
from threadpoolctl import threadpool_limits

from privsyn_core.data.domain import Column, Schema, atom_layout, decode_continuous
from privsyn_core.errors import DataError, ParameterError
from privsyn_core.evaluation.w1_certified import (
    CERTIFIED_CELLS,
    CERTIFIED_MAX_BYTES,
    CERTIFIED_NEIGHBOURS,
    certified_bytes,
    certified_w1,
)

_METRICS = ("chebyshev", "euclidean", "cityblock")
_METHODS = ("auto", "exact", "grid", "flow", "certified")
EXACT_MAX_ENTRIES = 4_000_000  # default cost-matrix budget of "auto" and "grid" (32 MB, about 2 s of POT)
EXACT_HARD_LIMIT = 25_000_000  # method="exact" refuses larger cost matrices (200 MB)
_EMD_ITERATIONS = 10**9
_CANCEL_TOLERANCE = 1e-15
_MAX_CELLS_PER_AXIS = 2**16
FLOW_NODES = 90_000  # default grid nodes of method="flow" (k = 300 in d = 2: about 14 s of OR-tools, n = m = 1e5)
FLOW_MAX_NODES = 1_000_000  # method="flow" refuses finer grids (memory: about 8 arcs per node)
_FLOW_SCALE = 2**40  # masses are integers in units of 2^-40 for the min-cost-flow solver


class W1Value(float):
    """A W1 value: a plain ``float`` that also says how it was computed.

    Attributes
    ----------
    method : str
        ``"closed_form_1d"`` (d = 1, exact), ``"exact_emd"`` (POT network simplex, exact), ``"grid_emd"``
        (exact W1 between the two measures moved onto the centres of a common grid of ``cells_per_axis`` cells
        per axis; the true W1 lies within ``error_bound`` of the value), ``"grid_flow"`` (the same by min-cost
        flow) or ``"certified_flow"`` (d = 2: the midpoint of a certified interval ``[lower, upper]``).
    error_bound : float
        Additive bound: ``|W1(mu, nu) - value| <= error_bound``; 0 for the exact methods.
    cells_per_axis : int or None
        Grid resolution of the grid methods.
    lower, upper : float
        Certified ends: ``lower <= W1(mu, nu) <= upper``; ``value -+ error_bound`` unless given.
    """

    method: str
    error_bound: float
    cells_per_axis: int | None
    lower: float
    upper: float

    def __new__(cls, value: float, method: str, error_bound: float = 0.0, cells_per_axis: int | None = None,
                lower: float | None = None, upper: float | None = None):
        out = super().__new__(cls, value)
        out.method, out.error_bound, out.cells_per_axis = method, float(error_bound), cells_per_axis
        out.lower = max(float(value) - out.error_bound, 0.0) if lower is None else float(lower)
        out.upper = float(value) + out.error_bound if upper is None else float(upper)
        return out

    def __reduce__(self):
        return (W1Value, (float(self), self.method, self.error_bound, self.cells_per_axis, self.lower, self.upper))

    def describe(self) -> dict:
        """The value with how it was computed, JSON-ready."""
        return {"value": float(self), "method": self.method, "error_bound": self.error_bound,
                "cells_per_axis": self.cells_per_axis, "lower": self.lower, "upper": self.upper}


def w1(X: np.ndarray, Y: np.ndarray, *, weights_x: np.ndarray | None = None, weights_y: np.ndarray | None = None,
       metric: str = "chebyshev", method: str = "auto", max_entries: int = EXACT_MAX_ENTRIES,
       cells_per_axis: int | None = None) -> W1Value:
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
    * ``"flow"`` (opt-in; chebyshev or cityblock): the same gridding, but W1 between the moved measures is
      solved as a min-cost flow on the grid graph instead of a dense cost matrix, so the grid can be much finer.
      For the l-infinity metric the distance between two cell centres is ``width`` times the length of a
      shortest path of king moves (the 3^d - 1 neighbours), for l1 of axis moves; W1 on a graph metric equals
      the min-cost flow that sends mu_q - nu_q along the graph's edges (Beckmann's formulation; each unit of
      flow over an edge costs ``width``). Solved exactly by OR-tools' ``SimpleMinCostFlow``: unweighted inputs
      as exact integer masses in units of 1/lcm(n, m); weighted ones in units of 2^-40 (the rounding, at most
      #cells * 2^-40 of mass, is added to ``error_bound`` times the diameter). ``cells_per_axis`` sets k
      (default: the largest with k^d <= FLOW_NODES).
    * ``"certified"`` (chebyshev or cityblock, unweighted inputs, any d >= 2): a certified interval
      ``lower <= W1 <= upper`` from the cost of a coupling of the actual points and a 1-Lipschitz function
      (Kantorovich-Rubinstein duality), refined until its width is at most 10% of ``lower`` (or a round limit);
      the value is the midpoint and ``error_bound`` the half-width. In d = 2 by domain decomposition of a
      min-cost flow through the atoms and a lattice of ``cells_per_axis`` cells per axis (default
      ``min(CERTIFIED_CELLS, sqrt(#atoms))``; :mod:`privsyn_core.evaluation.w1_certified`; 10^5 points a side
      in 5-12 s of CPU, two processes); its memory is estimated first, and above ``CERTIFIED_MAX_BYTES`` it
      refuses. In other d on a nearest-neighbour graph with column generation
      (:mod:`privsyn_core.evaluation.w1_sparse`; chebyshev visits every pair of atoms once per round, so at
      most ``TRANSFORM_MAX_PAIRS`` pairs; 10^4 points a side in 1-6 s).
    * ``"auto"``: the closed form in d = 1; else ``"exact"`` while the cost matrix of the cancelled atoms has at
      most ``max_entries`` entries (about 2000 points a side by default); above that ``"certified"`` for
      unweighted chebyshev or cityblock inputs in d = 2 (``"grid"`` if its memory estimate exceeds the budget),
      and ``"grid"`` for weighted inputs, the euclidean metric and d >= 3 (certified there is opt-in: slower).

    Parameters
    ----------
    X, Y : array (n, d), (m, d)
    weights_x, weights_y : array, optional
        Non-negative weights (normalised here); uniform when omitted.
    metric : {"chebyshev", "euclidean", "cityblock"}
        Ground metric; the papers' theory uses the l-infinity (chebyshev) metric.
    method : {"auto", "exact", "grid", "flow", "certified"}
    max_entries : int
        Cost-matrix budget (positive atoms x negative atoms) of "auto" and "grid": time and memory grow with it,
        the grid's error bound shrinks like ``max_entries ** (-1 / (2 d))``.
    cells_per_axis : int, optional
        Grid resolution k of ``"flow"`` and ``"certified"`` (time grows faster than k^d).

    Returns
    -------
    W1Value
        A ``float`` carrying ``.method`` and ``.error_bound`` (see :class:`W1Value`).
    """
    return _w1(X, Y, weights_x, weights_y, metric, method, max_entries, cells_per_axis)


def _w1(X: np.ndarray, Y: np.ndarray, weights_x: np.ndarray | None, weights_y: np.ndarray | None, metric: str,
        method: str, max_entries: int, cells_per_axis: int | None, auto_certified: bool = True) -> W1Value:
    """:func:`w1`; ``auto_certified=False`` keeps ``"auto"`` on exact-or-grid (evaluate's time budget)."""
    X, Y = _as_points(X), _as_points(Y)
    _check_same_dimension(X, Y)
    sizes = (len(X), len(Y)) if weights_x is None and weights_y is None else None  # unit masses: integer counts
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
            raise ParameterError(f"exact W1 would need a {entries:.3g}-entry cost matrix "
                                 f"(limit {EXACT_HARD_LIMIT:.3g}); use method='grid' or 'auto'")
        return W1Value(_signed_emd(atoms, diff, metric), "exact_emd")
    if method == "flow":
        return _flow_w1(X, a, Y, b, metric, cells_per_axis, sizes)
    certifiable = metric != "euclidean" and sizes is not None and math.lcm(*sizes) <= _FLOW_SCALE
    if method == "certified" or (method == "auto" and certifiable and X.shape[1] == 2 and auto_certified):
        if not certifiable or sizes is None:
            raise ParameterError("method='certified' needs metric 'chebyshev' or 'cityblock' and unweighted inputs")
        k = cells_per_axis if cells_per_axis is not None else _certified_cells(len(atoms))
        need = certified_bytes(int(np.count_nonzero(diff)), k, CERTIFIED_NEIGHBOURS)
        if need <= CERTIFIED_MAX_BYTES:
            return _certified(X, a, Y, b, metric, k, sizes)
        if method == "certified":
            raise ParameterError(f"method='certified' with {k} cells per axis needs about {need / 1e6:.0f} MB "
                                 f"(budget {CERTIFIED_MAX_BYTES / 1e6:.0f} MB); pass a smaller cells_per_axis")
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
    """Distinct rows (lexicographic order) and the index of each row's copy.

    A lexsort, faster than ``np.unique(axis=0)``.
    """
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


def _flow_w1(X: np.ndarray, a: np.ndarray, Y: np.ndarray, b: np.ndarray, metric: str,
             cells_per_axis: int | None, sizes: tuple[int, int] | None = None) -> W1Value:
    """W1 on a k^d grid by an exact min-cost flow on the grid graph (OR-tools), with the quantisation bound.

    With ``sizes = (n, m)`` (unweighted inputs) the masses are exact integers: ``a_i = c_i / n`` with integer
    multiplicities ``c_i``, so ``mu_q - nu_q`` is an integer supply in units of ``1 / lcm(n, m)`` and nothing
    is rounded.  Integer supplies of this size are also what the cost-scaling solver handles fast (12 s
    instead of 82 s of CPU at k = 300, n = m = 10^5).  Weighted inputs use units of 2^-40 (rounding bounded).
    """
    if metric == "euclidean":
        raise ParameterError("method='flow' needs metric 'chebyshev' or 'cityblock' (a grid-graph metric)")
    d = X.shape[1]
    k = int(FLOW_NODES ** (1 / d) + 1e-9) if cells_per_axis is None else cells_per_axis
    if not isinstance(k, (int, np.integer)) or k < 1 or k**d > FLOW_MAX_NODES:
        raise ParameterError(f"cells_per_axis must be a positive integer with k^d <= {FLOW_MAX_NODES:,}; "
                             f"got {cells_per_axis!r} in d = {d}")
    try:
        from ortools.graph.python import min_cost_flow
    except ImportError as exc:  # pragma: no cover - ortools is a runtime requirement
        raise ParameterError("method='flow' needs OR-tools: pip install 'ortools>=9.10,<10'") from exc
    lo = np.minimum(X.min(axis=0), Y.min(axis=0))
    span = float(np.max(np.maximum(X.max(axis=0), Y.max(axis=0)) - lo)) or 1.0
    width = span / k
    cells = k**d
    if sizes is not None and math.lcm(*sizes) <= _FLOW_SCALE:
        n, m = sizes
        unit = math.lcm(n, m)  # a_i = c_i / n = c_i (unit / n) / unit
        supply = (np.bincount(_cell_key(X, lo, width, k), weights=np.rint(a * n), minlength=cells).astype(np.int64)
                  * (unit // n)
                  - np.bincount(_cell_key(Y, lo, width, k), weights=np.rint(b * m), minlength=cells).astype(np.int64)
                  * (unit // m))
        scale, rounding = float(unit), 0.0
    else:
        diff = (np.bincount(_cell_key(X, lo, width, k), weights=a, minlength=cells)
                - np.bincount(_cell_key(Y, lo, width, k), weights=b, minlength=cells))
        supply = np.rint(diff * _FLOW_SCALE).astype(np.int64)
        imbalance = int(supply.sum())
        supply[np.argmax(supply) if imbalance > 0 else np.argmin(supply)] -= imbalance
        scale, rounding = float(_FLOW_SCALE), float(np.abs(supply / _FLOW_SCALE - diff).sum())
    tails, heads = _grid_graph(k, d, metric)
    solver = min_cost_flow.SimpleMinCostFlow()
    capacity = int(supply[supply > 0].sum())
    solver.add_arcs_with_capacity_and_unit_cost(tails, heads, np.full(len(tails), capacity, dtype=np.int64),
                                                np.ones(len(tails), dtype=np.int64))
    solver.set_nodes_supplies(np.arange(cells, dtype=np.int32), supply)
    status = solver.solve()
    if status != solver.OPTIMAL:
        raise RuntimeError(f"OR-tools min-cost flow did not reach the optimum (status {status})")
    value = solver.optimal_cost() / scale * width
    cx, cy = _cell_centres(X, lo, width, k), _cell_centres(Y, lo, width, k)
    diameter = span * (d if metric == "cityblock" else 1)
    bound = (a @ _pointwise_distance(X, cx, metric) + b @ _pointwise_distance(Y, cy, metric)
             + rounding * diameter)
    return W1Value(value, "grid_flow", error_bound=bound, cells_per_axis=k)


def _certified_cells(atoms: int) -> int:
    """Default lattice of the certified method: about one cell per atom, at most CERTIFIED_CELLS per axis."""
    return int(min(CERTIFIED_CELLS, max(2, math.isqrt(atoms))))


def _certified(X: np.ndarray, a: np.ndarray, Y: np.ndarray, b: np.ndarray, metric: str, k: int,
               sizes: tuple[int, int]) -> W1Value:
    """Certified interval of :mod:`privsyn_core.evaluation.w1_certified` on exact integer masses (1 / lcm(n, m))."""
    if not isinstance(k, (int, np.integer)) or k < 1:
        raise ParameterError(f"cells_per_axis must be a positive integer, got {k!r}")
    n, m = sizes
    unit = math.lcm(n, m)
    atoms, inverse = _unique_rows(np.vstack([X, Y]))
    supply = (np.bincount(inverse[:len(X)], weights=np.rint(a * n) * (unit // n), minlength=len(atoms))
              - np.bincount(inverse[len(X):], weights=np.rint(b * m) * (unit // m), minlength=len(atoms)))
    supply = np.rint(supply).astype(np.int64)
    keep = supply != 0
    if not keep.any():
        return W1Value(0.0, "certified_flow", 0.0, int(k), lower=0.0, upper=0.0)
    lower, upper = certified_w1(atoms[keep], supply[keep], unit, metric, int(k))
    return W1Value(0.5 * (lower + upper), "certified_flow", 0.5 * (upper - lower), int(k), lower=lower, upper=upper)


def _grid_graph(k: int, d: int, metric: str) -> tuple[np.ndarray, np.ndarray]:
    """Directed arcs between neighbouring nodes of a k^d grid (base-k node ids, axis 0 least significant).

    Neighbours are the 3^d - 1 king moves for chebyshev, the 2d axis moves for cityblock; both directions.
    """
    nodes = np.arange(k**d, dtype=np.int32).reshape((k,) * d, order="F")
    if metric == "chebyshev":
        offsets = [o for o in itertools_product((-1, 0, 1), repeat=d) if any(o)]
    else:
        offsets = [tuple(s if i == j else 0 for i in range(d)) for j in range(d) for s in (-1, 1)]
    tails, heads = [], []
    for offset in offsets:
        src = tuple(slice(max(0, -o), k - max(0, o)) for o in offset)
        dst = tuple(slice(max(0, o), k - max(0, -o)) for o in offset)
        tails.append(nodes[src].ravel())
        heads.append(nodes[dst].ravel())
    return np.concatenate(tails), np.concatenate(heads)


def _finest_grid(X: np.ndarray, a: np.ndarray, Y: np.ndarray, b: np.ndarray, lo: np.ndarray, span: float,
                 max_entries: int) -> int:
    """Largest cells-per-axis k (doubling, then bisection) with #(mu_q > nu_q) * #(mu_q < nu_q) <= the budget."""
    def fits(k: int) -> bool:
        width = span / k
        keys = np.r_[_cell_key(X, lo, width, k), _cell_key(Y, lo, width, k)]
        cells, inverse = np.unique(keys, return_inverse=True)
        diff = (np.bincount(inverse[:len(X)], weights=a, minlength=len(cells))
                - np.bincount(inverse[len(X):], weights=b, minlength=len(cells)))
        return bool(np.sum(diff > _CANCEL_TOLERANCE) * np.sum(diff < -_CANCEL_TOLERANCE) <= max_entries)

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

    This is the kernel mean :math:`\kappa(P, Q)` of eq (1) of the KD-tree paper (Kreačić et al., UAI 2023), with the
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


MMD_EXACT_PAIRS = 25_000_000  # "auto" uses the exact kernel sums while n * m <= this (about 1-2 s), else RFF
RFF_FEATURES = 1024  # random Fourier features of the "rff" estimator
_RFF_CHUNK = 4_000_000  # rows x features held at once (16 MB of float32)
_Z95 = 1.959963984540054  # standard normal 97.5% quantile


class MMDValue(float):
    """An MMD (or MMD^2) value: a plain ``float`` that also says how it was estimated.

    Attributes
    ----------
    estimator : str
        ``"biased"``, ``"unbiased"``, ``"linear"`` (exact sums / Gretton et al.'s statistics) or ``"rff"``.
    error : float
        Half-width of an approximate 95% interval for the exact biased (V-statistic) value on the same data
        that the ``"rff"`` estimate stands for (0 for the exact sums; see :func:`mmd2`).
    standard_error : float
        The standard error behind ``error`` (0 for the exact sums).
    features : int or None
        Number of random features of ``"rff"``.
    """

    estimator: str
    error: float
    standard_error: float
    features: int | None

    def __new__(cls, value: float, estimator: str, error: float = 0.0, standard_error: float = 0.0,
                features: int | None = None):
        out = super().__new__(cls, value)
        out.estimator, out.error, out.standard_error, out.features = estimator, float(error), float(standard_error), \
            features
        return out

    def __reduce__(self):
        return (MMDValue, (float(self), self.estimator, self.error, self.standard_error, self.features))

    def describe(self) -> dict:
        """The value with how it was estimated, JSON-ready."""
        return {"value": float(self), "estimator": self.estimator, "error": self.error,
                "standard_error": self.standard_error, "features": self.features}


def mmd2(X: np.ndarray, Y: np.ndarray, *, bandwidth: float | str = "median", weights_x: np.ndarray | None = None,
         weights_y: np.ndarray | None = None, estimator: str = "auto", features: int = RFF_FEATURES,
         seed: int = 0) -> MMDValue:
    r"""Squared maximum mean discrepancy with the Gaussian kernel (signed for the unbiased estimator).

    ``"biased"`` is the V-statistic :math:`\kappa(P,P) + \kappa(Q,Q) - 2\kappa(P,Q)` of eq (1) of the KD-tree
    paper and of Balog et al.'s "RKHS distance"; it includes i = j and is >= 0 up to rounding.
    ``"unbiased"`` is the U-statistic of Gretton et al. (2012, JMLR 13, eq 3): the diagonals of the unweighted
    sides are dropped (a weighted side is a measure, not a sample, and keeps its exact self-term); it can be < 0.
    ``"linear"`` is Gretton et al.'s linear-time estimator (Lemma 14) on unweighted samples.

    ``"rff"`` estimates the biased value in O((n + m) D d) with D random Fourier features (Rahimi and Recht
    2007): by Bochner's theorem :math:`k(x, y) = \mathbb{E}_\omega \cos(\omega^\top (x - y))` with
    :math:`\omega \sim N(0, \sigma^{-2} I)`, so each feature gives

    .. math:: t(\omega) = \Big|\sum_i a_i e^{i\omega^\top x_i} - \sum_j b_j e^{i\omega^\top y_j}\Big|^2,
              \qquad \mathbb{E}_\omega\, t(\omega) = \mathrm{MMD}_b^2(P, Q)

    exactly, for the data at hand. The estimate is the mean of the D i.i.d. terms :math:`t(\omega_l) \in [0, 4]`,
    its ``standard_error`` their sample standard deviation over :math:`\sqrt{D}` and ``error`` the 95% normal
    half-width :math:`1.96\,\mathrm{se}` (central limit theorem over the features; the features are drawn from
    ``numpy.random.default_rng(seed)``, independent of the data). Trigonometric sums run in float32 (absolute
    rounding about 1e-6 per term, far below ``error``).

    ``"auto"`` (default) is ``"biased"`` while ``n * m <= MMD_EXACT_PAIRS`` and ``"rff"`` above.

    Parameters
    ----------
    X, Y : array (n, d), (m, d)
    bandwidth : float or "median"
        Kernel width sigma; "median" uses :func:`median_bandwidth` on the pooled sample.
    weights_x, weights_y : array, optional
        Weights of weighted atoms (e.g. released centres), normalised here.
    estimator : {"auto", "biased", "unbiased", "linear", "rff"}
    features : int
        D of ``"rff"``.
    seed : int
        Seeds the random features of ``"rff"``.

    Returns
    -------
    MMDValue
        A ``float`` carrying ``.estimator`` and ``.error`` (see :class:`MMDValue`).
    """
    X, Y = _as_points(X), _as_points(Y)
    _check_same_dimension(X, Y)
    sigma = median_bandwidth(X, Y) if isinstance(bandwidth, str) and bandwidth == "median" else bandwidth
    sigma = _check_bandwidth(sigma)
    if estimator == "auto":
        estimator = "biased" if len(X) * len(Y) <= MMD_EXACT_PAIRS else "rff"
    if estimator == "linear":
        return MMDValue(_mmd2_linear(X, Y, sigma, weights_x, weights_y), "linear")
    if estimator == "rff":
        return _mmd2_rff(X, Y, sigma, _normalised(weights_x, len(X)), _normalised(weights_y, len(Y)), features, seed)
    if estimator not in ("biased", "unbiased"):
        raise ParameterError(f"estimator must be 'auto', 'biased', 'unbiased', 'linear' or 'rff', got {estimator!r}")
    k_xx = _self_term(X, weights_x, sigma, unbiased=estimator == "unbiased")
    k_yy = _self_term(Y, weights_y, sigma, unbiased=estimator == "unbiased")
    k_xy = gaussian_kernel_mean(X, Y, bandwidth=sigma, weights_x=weights_x, weights_y=weights_y)
    return MMDValue(float(k_xx + k_yy - 2.0 * k_xy), estimator)


def mmd(X: np.ndarray, Y: np.ndarray, *, bandwidth: float | str = "median", weights_x: np.ndarray | None = None,
        weights_y: np.ndarray | None = None, estimator: str = "auto", features: int = RFF_FEATURES,
        seed: int = 0) -> MMDValue:
    """Maximum mean discrepancy ``sqrt(max(mmd2, 0))`` with the Gaussian kernel (see :func:`mmd2`).

    With the biased V-statistic (the default up to ``MMD_EXACT_PAIRS`` pairs) this is eq (1) of the KD-tree paper
    and Balog et al.'s RKHS distance. A negative unbiased estimate (possible when the two laws are close) is
    reported as 0 here; call :func:`mmd2` for the signed value. For ``"rff"`` the 95% interval
    ``[v - e, v + e]`` of MMD^2 maps to ``[sqrt(max(v - e, 0)), sqrt(v + e)]`` for MMD; ``error`` is the larger
    distance from the value to an end of that interval.
    """
    squared = mmd2(X, Y, bandwidth=bandwidth, weights_x=weights_x, weights_y=weights_y, estimator=estimator,
                   features=features, seed=seed)
    value = float(np.sqrt(max(squared, 0.0)))
    if squared.error == 0.0:
        return MMDValue(value, squared.estimator, features=squared.features)
    low, high = np.sqrt(max(squared - squared.error, 0.0)), np.sqrt(max(squared + squared.error, 0.0))
    return MMDValue(value, squared.estimator, error=max(value - low, high - value),
                    standard_error=squared.standard_error, features=squared.features)


def _mmd2_rff(X: np.ndarray, Y: np.ndarray, sigma: float, a: np.ndarray, b: np.ndarray, features: int,
              seed: int) -> MMDValue:
    """Random-Fourier-feature estimate of the biased MMD^2 with its CLT standard error (see :func:`mmd2`)."""
    if not isinstance(features, (int, np.integer)) or features < 2:
        raise ParameterError(f"features must be an integer >= 2, got {features!r}")
    omega = (np.random.default_rng(seed).standard_normal((X.shape[1], features)) / sigma).astype(np.float32)
    gap = _fourier_mean(X, a, omega) - _fourier_mean(Y, b, omega)
    terms = gap.real**2 + gap.imag**2
    se = float(terms.std(ddof=1) / np.sqrt(features))
    return MMDValue(float(terms.mean()), "rff", error=_Z95 * se, standard_error=se, features=int(features))


def _fourier_mean(P: np.ndarray, w: np.ndarray, omega: np.ndarray) -> np.ndarray:
    """sum_i w_i exp(i omega^T p_i) for every feature, in row chunks (float32 trigonometry, float64 totals)."""
    rows = max(1, _RFF_CHUNK // omega.shape[1])
    total = np.zeros(omega.shape[1], dtype=complex)
    for start in range(0, len(P), rows):
        phase = P[start:start + rows].astype(np.float32) @ omega
        weight = w[start:start + rows].astype(np.float32)
        total += weight @ np.cos(phase) + 1j * (weight @ np.sin(phase, out=phase))
    return total


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


def _check_bandwidth(bandwidth: float | str) -> float:
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
#: Equal-bin resolutions of the resolution-robust marginals (``bins="robust"``).
ROBUST_RESOLUTIONS = (8, 13, 20, 32)
#: Offsets of the robust grids, in bins: the grid of ``k`` bins at offset ``o`` has its edges at
#: ``lo + (i - o) (hi - lo) / k`` (``k + 1`` bins over ``[lo, hi]`` when ``o > 0``, the two end bins partial).
ROBUST_OFFSETS = (0.0, 0.25, 0.5, 0.75)
#: An integer column with at most this many integers in its public range gets one bin per value.
FEW_INTEGERS = 32


def marginal_tvd(real_df: pd.DataFrame, synth_df: pd.DataFrame, order: int = 1, bins: int | str = 20,
                 schema: Schema | None = None) -> pd.DataFrame:
    r"""Total variation between the 1-way (per column) or 2-way (per pair) marginal histograms.

    .. math:: \mathrm{TV}(p, q) = \tfrac12 \sum_{\text{bins}} |p_b - q_b| \in [0, 1]

    Bins are public (from the schema alone). With an integer ``bins``: ``bins`` equal-width bins over each
    numeric column's unit coordinate (its schema bounds ``[lo, hi]``; values outside are clipped into the end
    bins, as the encoding does) and one bin per category: a single grid, which an output quantised on the same
    grid matches exactly and an output quantised on another grid of similar width does not (a ranking on one
    grid rewards whoever shares it). ``bins="robust"`` (what :func:`evaluate` reports) judges every numeric
    column on ``ROBUST_RESOLUTIONS`` equal bins, each at every offset of ``ROBUST_OFFSETS``, and averages the
    TVDs over these grids (2-way: both columns of a pair on the same grid); an integer column with at most
    ``FEW_INTEGERS`` integers in ``[lo, hi]`` gets one bin per integer, a public atom a bin of its own (the
    continuous part of such a column is gridded), a categorical column one bin per category, on every grid.
    The schema is inferred from the real data when not given (its bounds are then read off the data).

    Parameters
    ----------
    real_df, synth_df : DataFrame
    order : {1, 2}
    bins : int or "robust"
        Equal bins per numeric column of a single grid, or ``"robust"``.
    schema : Schema, optional

    Returns
    -------
    DataFrame
        ``column, bins, tvd`` (order 1) or ``column_a, column_b, bins, tvd`` (order 2); ``bins`` is the number of
        cells (an integer ``bins``) or how the cells were made (``"robust"``, which adds ``tvd_<k>``: the mean over
        the offsets at ``k`` bins).

    Examples
    --------
    >>> import pandas as pd
    >>> from privsyn_core import Schema
    >>> schema = Schema.from_dict({"columns": [{"name": "x", "lo": 0, "hi": 1}]})
    >>> real, synth = pd.DataFrame({"x": [0.1, 0.2, 0.6, 0.9]}), pd.DataFrame({"x": [0.1, 0.6, 0.7, 0.9]})
    >>> float(marginal_tvd(real, synth, bins=2, schema=schema)["tvd"].iloc[0])
    0.25
    """
    if order not in (1, 2):
        raise ParameterError(f"order must be 1 or 2, got {order!r}")
    schema = Schema.infer(real_df) if schema is None else schema
    real, synth = schema.encode(real_df)[0], schema.encode(synth_df)[0]
    grids = _grids(bins)
    ones_real, ones_synth = np.ones((len(real), 1), np.float32), np.ones((len(synth), 1), np.float32)
    return _marginal_tvds(real, synth, schema, grids, ones_real, ones_synth)[order].table


@dataclass(frozen=True)
class _Grids:
    """The grids of a marginal metric: ``(bins, offset)`` per grid; ``robust`` applies the per-kind rules."""

    grids: tuple[tuple[int, float], ...]
    robust: bool

    @property
    def resolutions(self) -> list[int]:
        return sorted({k for k, _ in self.grids})

    def describe(self) -> str:
        if not self.robust:
            return f"{self.grids[0][0]} equal bins of each numeric column's public range, one bin per category"
        return (f"mean over {len(self.grids)} public grids: {', '.join(map(str, self.resolutions))} equal bins of each "
                f"numeric column's range, each at offsets {', '.join(f'{o:g}' for o in ROBUST_OFFSETS)} of a bin; an "
                f"integer column with at most {FEW_INTEGERS} values one bin per value, each public atom a bin, one "
                "bin per category")


def _grids(bins: int | str) -> _Grids:
    if isinstance(bins, str) and bins == "robust":
        return _Grids(tuple(itertools_product(ROBUST_RESOLUTIONS, ROBUST_OFFSETS)), True)
    if isinstance(bins, (bool, np.bool_)) or not isinstance(bins, (int, np.integer)) or bins < 1:
        raise ParameterError(f"bins must be a positive integer or 'robust', got {bins!r}")
    return _Grids(((int(bins), 0.0),), False)


def _few_integers(col: Column) -> int:
    """Number of integers in the public range of an integer column when at most FEW_INTEGERS, else 0."""
    if not col.integer or col.lo is None or col.hi is None:
        return 0
    count = math.floor(col.hi) - math.ceil(col.lo) + 1
    return count if count <= FEW_INTEGERS else 0


def _column_codes(u: np.ndarray, col: Column, grids: _Grids) -> tuple[np.ndarray, np.ndarray, str]:
    """Public bin of every value of one column (unit coordinates ``u``) on every grid its bins depend on.

    Returns ``codes`` (n, g) int64, ``sizes`` (g,) bins per grid and a description, with ``g = len(grids)`` for a
    column binned by the grids and ``g = 1`` for one whose bins are the same on every grid (categories, few
    integer values, an integer ``bins``).
    """
    if col.kind == "categorical" or not grids.robust:
        k = len(col.category_list) if col.kind == "categorical" else grids.grids[0][0]
        what = f"{k} categories" if col.kind == "categorical" else f"{k} bins"
        return np.minimum((u * k).astype(np.int64), k - 1)[:, None], np.array([k]), what
    atoms = len(col.atoms)
    scaled = decode_continuous(u, atoms) if atoms else u
    values = _few_integers(col)
    if values:
        lo, hi = col.bounds
        codes = np.clip(np.rint(lo + scaled * (hi - lo)) - math.ceil(lo), 0, values - 1).astype(np.int64)[:, None]
        sizes, what = np.array([values]), f"{values} values"
    else:
        ks = np.array([k for k, _ in grids.grids])
        offsets = np.array([o for _, o in grids.grids])
        last = ks - (offsets == 0)  # an offset grid has k + 1 bins, the first and last partial
        codes = np.minimum(np.maximum(np.floor(scaled[:, None] * ks + offsets), 0), last).astype(np.int64)
        sizes, what = last + 1, f"{len(grids.grids)} grids"
    if atoms:
        slot, start = atom_layout(atoms)
        atom = np.minimum((u / slot).astype(np.int64), atoms - 1)
        codes = np.where((u < start)[:, None], atom[:, None], codes + atoms)
        sizes, what = sizes + atoms, f"{atoms} atom{'s' * (atoms > 1)} + {what}"
    return codes, sizes, what


@dataclass(frozen=True)
class _MarginalTVDs:
    """TVDs of every block (column or pair) on every grid, for the value and each bootstrap replicate.

    ``tvd`` is (blocks, grids, 1 + replicates): column 0 the value, the others the replicates; a block whose
    bins do not depend on the grid repeats its one TVD on every grid.
    """

    tvd: np.ndarray
    table: pd.DataFrame
    grids: _Grids

    def mean(self) -> np.ndarray:
        """Mean over blocks of the mean over grids: (1 + replicates,)."""
        return self.tvd.mean(axis=(0, 1))

    def per_resolution(self) -> dict[int, np.ndarray]:
        """Mean over blocks and over the offsets of each resolution."""
        ks = np.array([k for k, _ in self.grids.grids])
        return {k: self.tvd[:, ks == k].mean(axis=(0, 1)) for k in self.grids.resolutions}


def _marginal_tvds(real: np.ndarray, synth: np.ndarray, schema: Schema, grids: _Grids, real_weights: np.ndarray,
                   synth_weights: np.ndarray) -> dict[int, _MarginalTVDs]:
    """1-way and 2-way TVDs (order -> :class:`_MarginalTVDs`) with row weights (n, r) and (m, r) per side.

    A weight column of ones gives the TVD of the tables; a column of bootstrap counts (how often each row is
    drawn) the TVD of that replicate: the histograms of all columns of weights are one sparse product per
    block, so no replicate table is ever built.
    """
    columns = [(_column_codes(real[:, j], col, grids), _column_codes(synth[:, j], col, grids)[0])
               for j, col in enumerate(schema.columns)]
    names = schema.names
    out = {}
    blocks: dict[int, list[tuple[tuple[str, ...], str, np.ndarray, np.ndarray, np.ndarray]]] = {1: [], 2: []}
    for (codes, sizes, what), synth_codes in columns:
        blocks[1].append(((names[len(blocks[1])],), what, codes, synth_codes, sizes))
    for i, j in combinations(range(len(names)), 2):
        (ci, si, wi), ti = columns[i]
        (cj, sj, wj), tj = columns[j]
        blocks[2].append(((names[i], names[j]), f"{wi} x {wj}", ci * sj + cj, ti * sj + tj, si * sj))
    for order in (1, 2):
        if not blocks[order]:
            continue
        tvd = np.stack([np.broadcast_to(_block_tvd(codes, synth_codes, sizes, real_weights, synth_weights),
                                        (len(grids.grids), real_weights.shape[1]))
                        for _, _, codes, synth_codes, sizes in blocks[order]])
        heads = ["column"] if order == 1 else ["column_a", "column_b"]
        table = pd.DataFrame([(*block_names, what if grids.robust else int(sizes[0]))
                              for block_names, what, _, _, sizes in blocks[order]], columns=heads + ["bins"])
        table["tvd"] = tvd[:, :, 0].mean(axis=1)
        if grids.robust:
            ks = np.array([k for k, _ in grids.grids])
            for k in grids.resolutions:
                table[f"tvd_{k}"] = tvd[:, ks == k, 0].mean(axis=1)
        out[order] = _MarginalTVDs(tvd, table, grids)
    return out


def _block_tvd(real_codes: np.ndarray, synth_codes: np.ndarray, sizes: np.ndarray, real_weights: np.ndarray,
               synth_weights: np.ndarray) -> np.ndarray:
    """TVD of one block on each of its grids for each weight column: (g, r).

    ``codes`` (n, g) are bins within each grid, ``sizes`` (g,) the bins per grid. The cells of all grids are
    numbered together (above ``_DENSE_CELLS`` cells only those that some row occupies are kept, so memory stays
    O(rows x r)), and the weighted counts of every cell for every weight column are one sparse (cells x rows) by
    dense (rows x r) product.
    """
    starts = np.r_[0, np.cumsum(sizes)]
    real_cells, synth_cells = real_codes + starts[:-1], synth_codes + starts[:-1]
    if starts[-1] > _DENSE_CELLS:
        occupied = np.zeros(starts[-1], dtype=bool)
        occupied[real_cells] = True
        occupied[synth_cells] = True
        before = np.r_[0, np.cumsum(occupied)]
        real_cells, synth_cells, starts = before[real_cells], before[synth_cells], before[starts]
    p = _weighted_counts(real_cells, int(starts[-1]), real_weights) / real_weights.sum(axis=0)
    q = _weighted_counts(synth_cells, int(starts[-1]), synth_weights) / synth_weights.sum(axis=0)
    return 0.5 * np.add.reduceat(np.abs(p - q), starts[:-1], axis=0)


_DENSE_CELLS = 2**16  # a block with more cells (over all its grids) keeps only the occupied ones


def _weighted_counts(cells: np.ndarray, size: int, weights: np.ndarray) -> np.ndarray:
    """``out[c, r] = sum of weights[i, r] over the rows i whose cell (in any grid column of cells) is c``."""
    n, g = cells.shape
    incidence = sparse.csc_array((np.ones(n * g, dtype=weights.dtype), cells.ravel(), np.arange(0, n * g + 1, g)),
                                 shape=(size, n))
    return np.asarray(incidence @ weights, dtype=float)


def correlation_gap(real: np.ndarray, synth: np.ndarray) -> dict:
    """Gap between the Pearson correlation matrices of two tables in unit coordinates.

    A constant column (variance at most ``1e-24`` in unit coordinates) has correlation 0 with every other column.
    Returns the largest and the mean absolute gap over the off-diagonal pairs (0 with a single column).
    """
    largest, mean = _correlation_gaps(real, synth, np.ones((len(real), 1)), np.ones((len(synth), 1)))
    return {"max": float(largest[0]), "mean": float(mean[0])}


def _correlation_gaps(real: np.ndarray, synth: np.ndarray, real_weights: np.ndarray,
                      synth_weights: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Largest and mean absolute gap of the weighted correlation matrices, one per weight column: (r,), (r,)."""
    upper = np.triu_indices(real.shape[1], 1)
    if upper[0].size == 0:
        return np.zeros(real_weights.shape[1]), np.zeros(real_weights.shape[1])
    gap = np.abs(_correlations(real, real_weights) - _correlations(synth, synth_weights))[:, upper[0], upper[1]]
    return gap.max(axis=1), gap.mean(axis=1)


def _correlations(X: np.ndarray, weights: np.ndarray) -> np.ndarray:
    """Pearson correlation matrices of ``X`` (n, d) under each weight column of ``weights`` (n, r): (r, d, d).

    The columns are centred once on their plain mean, so each weighted covariance is a small correction of
    ``sum_i w_i x_i x_i^T / sum(w)``: the products ``x_i x_i^T`` of a block of rows (at most ``_CHUNK_ELEMENTS``
    numbers) times the weights of those rows, one matrix product per block.
    """
    centred = X - X.mean(axis=0)
    weights = np.asarray(weights, dtype=float)
    n, d = centred.shape
    total = weights.sum(axis=0)
    means = weights.T @ centred / total[:, None]
    second = np.zeros((d * d, weights.shape[1]))
    rows = max(1, _CHUNK_ELEMENTS // (d * d))
    for start in range(0, n, rows):
        block = centred[start:start + rows]
        second += (block[:, :, None] * block[:, None, :]).reshape(len(block), d * d).T @ weights[start:start + rows]
    cov = second.T.reshape(-1, d, d) / total[:, None, None] - means[:, :, None] * means[:, None, :]
    variance = np.diagonal(cov, axis1=1, axis2=2)
    scale = np.sqrt(np.where(variance > _CONSTANT_VARIANCE, variance, np.inf))
    return cov / scale[:, :, None] / scale[:, None, :]


_CONSTANT_VARIANCE = 1e-24  # a column whose (weighted) variance in unit coordinates is at most this is constant


def boolean_marginal_errors(real_bits: np.ndarray, synth_bits: np.ndarray, max_order: int = 3) -> dict[int, float]:
    r"""Average squared error of all k-way marginals of Boolean data, k = 1..max_order.

    Eq (1.2) of the covariance-loss paper (Boedihardjo, Strohmer, Vershynin, Found. Comput. Math. 2024):
    :math:`\binom{p}{k}^{-1} \sum_{i_1<\dots<i_k} E(i_1..i_k)^2`, with
    :math:`E = \frac1n\sum_i x_i(i_1)\cdots x_i(i_k) - \frac1m \sum_l z_l(i_1)\cdots z_l(i_k)`.
    Orders above the number of columns p are left out.
    """
    from privsyn_core.mechanisms.microagg.aggregation import avg_sq_marginal_error

    p = real_bits.shape[1]
    return {k: avg_sq_marginal_error(real_bits, synth_bits, k) for k in range(1, min(max_order, p) + 1)}


def _boolean_bits(unit: np.ndarray, schema: Schema) -> np.ndarray | None:
    """{0,1} columns when every column is Boolean (two categories, or numeric [0, 1] holding only 0 and 1)."""
    bits = np.empty(unit.shape)
    for j, col in enumerate(schema.columns):
        if col.kind == "categorical" and len(col.categories or ()) == 2:
            bits[:, j] = unit[:, j] > 0.5
        elif col.kind == "numeric" and (col.lo, col.hi) == (0.0, 1.0) and np.all((unit[:, j] == 0) | (unit[:, j] == 1)):
            bits[:, j] = unit[:, j]
        else:
            return None
    return bits


# -- evaluation report ---------------------------------------------------------------------------
EVAL_MAX_ROWS = 50_000  # rows per side that evaluate reads; larger tables are uniformly subsampled
EVAL_SUBSAMPLE = 500  # rows per side of each W1 / sliced W1 repeat (exact W1: 0.025 s of CPU at 500, 0.12 at 1000)
EVAL_REPEATS = 5  # repeated subsamples of W1, sliced W1 and MMD
EVAL_BOOTSTRAP = 20  # bootstrap replicates (Student-t multiplier: intervals 2% wider than with 30, 1/3 less CPU)
EVAL_W1_ENTRIES = 250_000  # cost-matrix budget of the full-sample W1 check (about 0.1 s of POT)
EVAL_MMD_SAMPLE = 500  # rows per side of each MMD repeat (3 kernel sums of 500^2 entries)
EVAL_PROJECTIONS = 50  # directions of sliced W1 in evaluate
GRID_USE_RATIO = 0.1  # the full-sample grid W1 is reported only when its error bound is below 10% of its value
EVAL_CONFIDENCE = 0.95
COLLAPSE_SHARE = 0.5  # a synthetic table whose most frequent row has this share (and twice the real's) collapsed
FEW_VALUES = 2  # a numeric column with at most this many synthetic values while the real has >= 10x more


def evaluate(real_df: pd.DataFrame, synth_df: pd.DataFrame, schema: Schema | None = None, *,
             target: str | None = None, real_test: pd.DataFrame | None = None, floor: bool = True,
             bins: int | str = "robust", seed: int = 0, w1_max_entries: int = EVAL_W1_ENTRIES,
             mmd_sample: int = EVAL_MMD_SAMPLE, max_rows: int = EVAL_MAX_ROWS, subsample: int = EVAL_SUBSAMPLE,
             repeats: int = EVAL_REPEATS, bootstrap: int = EVAL_BOOTSTRAP) -> dict:
    r"""Every metric between a real and a synthetic table, each with its uncertainty, floor and method.

    Both tables are encoded with the same schema (inferred from the real data when not given: its bounds are then
    not public) and compared in the unit cube of the schema. All metrics read the real data: they are for
    evaluation, never part of a private release.

    **Bounded input.** At most ``max_rows`` rows of each side are read (uniform subsamples without replacement,
    seeded by ``seed``; ``_about`` states the sizes), so memory is O(max_rows * d) whatever the input size.

    **Repeated subsamples** (``w1``, ``sliced_w1``, ``mmd``). Each of ``repeats`` repeats draws ``s`` rows of each
    side uniformly without replacement, ``s = min(subsample, n_real // 2, n_synth)``, and computes exact W1
    (POT's network simplex ``ot.emd2``, l-infinity ground metric in unit coordinates, as :func:`w1` defines it),
    sliced W1 and the biased MMD (bandwidth: median heuristic on the real rows). ``value`` is the mean over the
    repeats and ``low``/``high`` a 95% Student-t interval :math:`\bar v \pm t_{0.975, R-1} s_v / \sqrt R` for the
    expected subsample value. W1 between samples of s points is biased upwards (for two samples of one law it
    decays like :math:`s^{-1/d}`, not to 0), so the value is only meaningful beside ``floor``: the same statistic,
    computed the same way, between two *disjoint* random subsamples of s real rows (with its own interval).
    ``w1`` also reports ``full_sample``: W1 of all evaluated rows by :func:`w1` (grid method when large), kept
    only when it is exact or its stated error bound is below
    ``GRID_USE_RATIO`` (10%) of its value.

    **Bootstrap** (``marginal_tvd_1way``, ``marginal_tvd_2way``, ``correlation_gap``, ``boolean_marginals``):
    the value on all evaluated rows, and ``low``/``high`` = value :math:`\pm t_{0.975, B-1}` bootstrap standard
    errors (``B = bootstrap`` replicates, rows of both sides resampled with replacement; the Student-t quantile
    accounts for a standard error estimated from B replicates). ``floor`` is the same metric between two disjoint
    random halves of the evaluated real rows, with its own bootstrap interval. The TVDs are, by default,
    resolution-robust (``bins="robust"``, see :func:`marginal_tvd`): the mean over 16 public grids (8, 13, 20 and
    32 equal bins, each at 4 offsets), so that no single bin grid, and no output quantised on it, is favoured;
    ``per_resolution`` gives the mean at each number of bins with its interval and floor, ``_tables`` the TVD per
    column and per pair (``tvd_<k>`` per resolution). The correlation gap is the largest absolute difference
    between the Pearson correlation matrices in unit coordinates (``mean``: the mean over pairs).

    **Coverage** flags degenerate output (W1 alone rewards a collapsed table): distinct values per column,
    categories the real rows use that the synthetic rows never produce, and the share of the most frequent
    synthetic row (``value``; ``floor`` is the real one's). ``collapsed`` is set when the synthetic rows have a
    single distinct row while the real ones have several, or the most frequent synthetic row holds at least
    ``COLLAPSE_SHARE`` of the rows and twice the real share. Counts are exact for the evaluated rows (compared on
    equal numbers of rows), not estimates, so they carry no interval.

    Parameters
    ----------
    real_df, synth_df : DataFrame
    schema : Schema, optional
    target : str, optional
        Column for train-on-synthetic/test-on-real (TSTR, :func:`privsyn_core.evaluation.utility.tstr`); opt-in
        because it trains models (on the evaluated rows).
    real_test : DataFrame, optional
        Real hold-out for TSTR (rows not used to make the synthetic data); else a split of the real rows.
    floor : bool
        Add the real-vs-real floors (needs at least 4 real rows).
    bins : int or "robust"
        Bins of the marginal TVDs: ``"robust"`` (default) averages over the public grids of :func:`marginal_tvd`;
        an integer is a single grid of that many equal bins per numeric column (it rewards outputs quantised on
        that grid: use it to reproduce a single-grid figure, not to rank).
    seed : int
        Seeds every subsample, split and bootstrap.
    w1_max_entries : int
        Cost-matrix budget of the full-sample W1 check.
    mmd_sample : int
        Rows per side of each MMD repeat (at most the W1 subsample size).
    max_rows, subsample, repeats, bootstrap : int
        See above (rows read per side; rows per repeat, at most 5000; repeats >= 2; bootstrap replicates >= 2).

    Returns
    -------
    dict
        ``w1``, ``sliced_w1``, ``mmd``, ``marginal_tvd_1way``, ``marginal_tvd_2way``, ``correlation_gap``,
        ``boolean_marginals`` (all-Boolean data), ``coverage``, ``tstr`` (with ``target``), each a dict with
        ``value``, ``low``, ``high``, ``interval`` (how the interval was made), ``floor``, ``floor_low``,
        ``floor_high`` and details; ``_about`` / ``_tables`` (sizes, methods, per-column and per-pair TVD tables).
    """
    for name, number, least in (("max_rows", max_rows, 4), ("subsample", subsample, 2), ("repeats", repeats, 2),
                                ("bootstrap", bootstrap, 2)):
        if not isinstance(number, (int, np.integer)) or number < least:
            raise ParameterError(f"{name} must be an integer >= {least}, got {number!r}")
    if subsample > 5000:
        raise ParameterError(f"subsample must be at most 5000 rows (exact W1 cost), got {subsample}")
    schema = Schema.infer(real_df) if schema is None else schema
    rng = np.random.default_rng(seed)
    real_rows, synth_rows = _bounded(real_df, max_rows, rng), _bounded(synth_df, max_rows, rng)
    real, synth = schema.encode(real_rows)[0], schema.encode(synth_rows)[0]
    with_floor = floor and len(real) >= 4
    # Every product here is small (kernels of mmd_sample rows, 8-column Gram matrices): OpenBLAS's threads cost
    # more than they save on them (a 500 x 8 x 500 product: 0.15 ms of CPU on one thread, 6 ms threaded on 2
    # loaded cores), so the metrics run on one BLAS thread.
    with threadpool_limits(limits=1, user_api="blas"):
        settings = _EvalSettings(schema, _grids(bins), median_bandwidth(real), with_floor, bootstrap)
        report = _repeated_metrics(real, synth, settings, rng, subsample, repeats, mmd_sample)
        report["w1"]["full_sample"] = _full_sample_w1(real, synth, w1_max_entries)
        marginals, tables = _bootstrap_metrics(real, synth, settings, rng)
        report.update(marginals)
        report["coverage"] = coverage(real, synth, schema)
    if target is not None:
        from privsyn_core.evaluation.utility import tstr

        report["tstr"] = tstr(real_rows, synth_rows, target, real_test=real_test, schema=schema, seed=seed)
    report["_about"] = {
        "n_real": len(real_df), "n_synthetic": len(synth_df), "rows_evaluated": {"real": len(real),
                                                                                  "synthetic": len(synth)},
        "max_rows": int(max_rows), "columns": schema.names, "space": "unit cube of the schema",
        "public_domain": schema.dp_valid, "confidence": EVAL_CONFIDENCE, "seed": seed,
        "subsample_rows": report["w1"]["subsample_rows"], "repeats": int(repeats), "bootstrap": int(bootstrap),
        "floor": "same metric, same method, between disjoint random parts of the real data" if with_floor
        else "not computed",
        "evaluation_only": "metrics read the real data: not a private release"}
    report["_tables"] = tables
    return report


@dataclass(frozen=True)
class _EvalSettings:
    schema: Schema
    grids: _Grids
    bandwidth: float
    floor: bool
    bootstrap: int


def _bounded(df: pd.DataFrame, max_rows: int, rng: np.random.Generator) -> pd.DataFrame:
    """At most ``max_rows`` rows drawn uniformly without replacement (in their original order)."""
    if len(df) <= max_rows:
        return df
    return df.iloc[np.sort(rng.choice(len(df), max_rows, replace=False))]


def _t_interval(values: np.ndarray) -> tuple[float, float, float]:
    """Mean and the 95% Student-t interval of the mean of i.i.d. repeats."""
    mean = float(np.mean(values))
    half = float(student_t.ppf(0.5 + EVAL_CONFIDENCE / 2, len(values) - 1) * np.std(values, ddof=1)
                 / np.sqrt(len(values)))
    return mean, mean - half, mean + half


def _repeated_metrics(real: np.ndarray, synth: np.ndarray, s: _EvalSettings, rng: np.random.Generator,
                      subsample: int, repeats: int, mmd_rows: int) -> dict:
    """W1, sliced W1 and MMD on repeated uniform subsamples, each with a disjoint real-vs-real floor."""
    size = min(subsample, len(real) // 2 if s.floor else len(real), len(synth))
    mmd_size = min(mmd_rows, size)
    draws: dict[str, list[tuple[float, float, float]]] = {"value": [], "floor": []}
    for _ in range(repeats):
        a, b = real[rng.choice(len(real), size, replace=False)], synth[rng.choice(len(synth), size, replace=False)]
        draws["value"].append(_subsample_stats(a, b, s, mmd_size, rng))
        if s.floor:
            order = rng.permutation(len(real))
            draws["floor"].append(_subsample_stats(real[order[:size]], real[order[size:2 * size]], s, mmd_size, rng))
    interval = (f"{EVAL_CONFIDENCE:.0%} Student-t interval of the mean over {repeats} uniform subsamples of "
                f"{size} rows per side")
    details = {
        "w1": {"method": "exact_emd", "metric": "chebyshev", "solver": "POT ot.emd2 (network simplex)",
               "subsample_rows": size,
               "bias": "subsample W1 is biased upwards (it does not vanish for equal laws): compare with floor"},
        "sliced_w1": {"projections": EVAL_PROJECTIONS, "subsample_rows": size,
                      "note": "not W1: mean 1-D W1 over random directions"},
        "mmd": {"estimator": "biased (V-statistic)", "bandwidth": s.bandwidth,
                "bandwidth_from": "median heuristic on the real data", "subsample_rows": mmd_size},
    }
    out = {}
    for j, name in enumerate(details):
        value, low, high = _t_interval(np.array([row[j] for row in draws["value"]]))
        entry = {"value": value, "low": max(low, 0.0), "high": high, "interval": interval, **details[name]}
        if s.floor:
            fvalue, flow, fhigh = _t_interval(np.array([row[j] for row in draws["floor"]]))
            entry.update({"floor": fvalue, "floor_low": max(flow, 0.0), "floor_high": fhigh})
        out[name] = entry
    return out


def _subsample_stats(a: np.ndarray, b: np.ndarray, s: _EvalSettings, mmd_size: int,
                     rng: np.random.Generator) -> tuple[float, float, float]:
    sliced = sliced_w1(a, b, n_projections=EVAL_PROJECTIONS, seed=int(rng.integers(2**31)))
    return (float(w1(a, b, method="exact")), sliced,
            float(mmd(a[:mmd_size], b[:mmd_size], bandwidth=s.bandwidth, estimator="biased")))


def _full_sample_w1(real: np.ndarray, synth: np.ndarray, max_entries: int) -> dict:
    """W1 on every evaluated row, kept only when exact or its grid bound is below GRID_USE_RATIO of the value.

    Exact or the grid method, never the certified interval: that takes 1-2 s of CPU at 10^4 rows per side in
    d = 2 (measured on three inputs), plus worker processes to start on a process's first call.
    """
    value = _w1(real, synth, None, None, "chebyshev", "auto", max_entries, None, auto_certified=False)
    about = {**value.describe(), "rows": {"real": len(real), "synthetic": len(synth)}}
    if value.error_bound == 0.0 or value.error_bound < GRID_USE_RATIO * value:
        about.update({"used": True, "low": value.lower, "high": value.upper,
                      "interval": "deterministic error bound"})
        return about
    return {"used": False, "method": value.method, "error_bound": value.error_bound,
            "reason": f"grid error bound {value.error_bound:.3g} is not below {GRID_USE_RATIO:.0%} of its value "
                      f"{float(value):.3g}"}


def _bootstrap_metrics(real: np.ndarray, synth: np.ndarray, s: _EvalSettings,
                       rng: np.random.Generator) -> tuple[dict, dict[str, pd.DataFrame]]:
    """TVDs, correlation gap and Boolean marginals: value, bootstrap interval and a split-half floor; and the
    per-column and per-pair TVD tables."""
    stats, tables = _replicated(real, synth, s, rng)
    floor = None
    if s.floor:
        half = len(real) // 2
        order = rng.permutation(len(real))
        floor = _replicated(real[order[:half]], real[order[half:2 * half]], s, rng)[0]
    multiplier = float(student_t.ppf(0.5 + EVAL_CONFIDENCE / 2, s.bootstrap - 1))
    interval = (f"value +- {multiplier:.2f} bootstrap standard errors (Student-t quantile with {s.bootstrap - 1} "
                f"degrees of freedom: {s.bootstrap} replicates, rows of both sides resampled with replacement)")
    out: dict[str, dict[str, Any]] = {}
    for metric, found in stats.items():
        entry = {**_with_interval(found["value"], multiplier), "interval": interval}
        if floor is not None:
            entry.update(_as_floor(_with_interval(floor[metric]["value"], multiplier)))
            entry["floor_method"] = "two disjoint random halves of the evaluated real rows"
        entry.update(found["extra"])
        if "per_resolution" in found:
            entry["per_resolution"] = {
                str(k): {**_with_interval(v, multiplier),
                         **(_as_floor(_with_interval(floor[metric]["per_resolution"][k], multiplier))
                            if floor is not None else {})}
                for k, v in found["per_resolution"].items()}
            entry.update({"bins": s.grids.describe(), "grids": len(s.grids.grids)})
        out[metric] = {**entry, **_CHEAP_DETAILS[metric]}
    return out, tables


def _with_interval(replicates: np.ndarray, multiplier: float) -> dict[str, float]:
    """Value (``replicates[0]``) and value +- multiplier x the standard deviation of the replicates (the rest)."""
    value = float(replicates[0])
    half = multiplier * float(np.std(replicates[1:], ddof=1))
    return {"value": value, "low": max(value - half, 0.0), "high": value + half}


def _as_floor(entry: dict[str, float]) -> dict[str, float]:
    return {"floor": entry["value"], "floor_low": entry["low"], "floor_high": entry["high"]}


_CHEAP_DETAILS = {
    "marginal_tvd_1way": {"aggregate": "mean over columns"},
    "marginal_tvd_2way": {"aggregate": "mean over pairs"},
    "correlation_gap": {"aggregate": "max |corr gap| over pairs (Pearson, unit cube)"},
    "boolean_marginals": {"aggregate": "average squared k-way marginal error, value at the highest order "
                                       "(seed 001 eq 1.2)"},
}


def _resampled(n: int, replicates: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """Bootstrap draws: row indices (replicates, n) and weights (n, 1 + replicates) as float32, column 0 all ones
    (the table itself), column r the number of times each row is drawn in replicate r (exact: counts <= n < 2^24)."""
    draws = rng.integers(0, n, (replicates, n))
    counts = np.bincount((draws + n * np.arange(replicates)[:, None]).ravel(), minlength=replicates * n)
    weights = np.empty((n, replicates + 1), dtype=np.float32)
    weights[:, 0] = 1.0
    weights[:, 1:] = counts.reshape(replicates, n).T
    return draws, weights


def _replicated(real: np.ndarray, synth: np.ndarray, s: _EvalSettings,
                rng: np.random.Generator) -> tuple[dict[str, dict[str, Any]], dict[str, pd.DataFrame]]:
    """The bootstrap metrics of one pair of tables and of ``s.bootstrap`` replicates (rows of both sides resampled
    with replacement): per metric ``value`` (1 + replicates,), ``extra`` (scalars of the tables themselves) and,
    for the TVDs, ``per_resolution``; and the TVD tables."""
    real_draws, real_weights = _resampled(len(real), s.bootstrap, rng)
    synth_draws, synth_weights = _resampled(len(synth), s.bootstrap, rng)
    tvds = _marginal_tvds(real, synth, s.schema, s.grids, real_weights, synth_weights)
    out: dict[str, dict[str, Any]] = {}
    tables = {}
    for order, name in ((1, "marginal_tvd_1way"), (2, "marginal_tvd_2way")):
        if order in tvds:
            found = tvds[order]
            out[name] = {"value": found.mean(), "per_resolution": found.per_resolution(),
                         "extra": {"max": float(found.table["tvd"].max())}}
            tables[name] = found.table
    pairs = list(zip(real_draws, synth_draws, strict=True))
    if real.shape[1] >= 2:
        largest, mean = _correlation_gaps(real, synth, real_weights, synth_weights)
        out["correlation_gap"] = {"value": largest, "extra": {"mean": float(mean[0])}}
    real_bits, synth_bits = _boolean_bits(real, s.schema), _boolean_bits(synth, s.schema)
    if real_bits is not None and synth_bits is not None:
        errors = [boolean_marginal_errors(real_bits, synth_bits)] + [
            boolean_marginal_errors(real_bits[i], synth_bits[j]) for i, j in pairs]
        top = max(errors[0])
        out["boolean_marginals"] = {"value": np.array([e[top] for e in errors]),
                                    "extra": {f"order_{k}": v for k, v in errors[0].items()}}
    return out, tables


def coverage(real: np.ndarray, synth: np.ndarray, schema: Schema) -> dict:
    """Coverage check of synthetic rows against real rows (unit coordinates of ``schema``).

    Compared on the same number of rows of each side (the first ``min(n, m)``; pass shuffled or uniformly
    subsampled rows). Per column: distinct values of each side, categories the real rows use that the synthetic
    rows never produce. Whole rows: distinct rows and the share of the most frequent row. Flags: ``collapsed``
    (one distinct synthetic row while the real rows have several, or a most frequent synthetic row holding at
    least ``COLLAPSE_SHARE`` of the rows and twice the real share), ``constant:<col>`` (one synthetic value, several
    real ones), ``few_values:<col>`` (a numeric column with at most ``FEW_VALUES`` synthetic values while the real
    rows have ten times more), ``missing_categories:<col>``.

    Returns
    -------
    dict
        ``value`` (synthetic top-row share), ``floor`` (real top-row share), ``collapsed``, ``flags`` (comma
        separated), ``distinct_rows_real`` / ``distinct_rows_synthetic``, ``rows_compared``, ``columns``
        (per-column list) and ``uncertainty``.
    """
    rows = min(len(real), len(synth))
    real, synth = real[:rows], synth[:rows]
    real_top, real_distinct = _top_share(real)
    synth_top, synth_distinct = _top_share(synth)
    flags, columns = [], []
    collapsed = (synth_distinct == 1 < real_distinct) or (synth_top >= COLLAPSE_SHARE and synth_top >= 2 * real_top)
    if collapsed:
        flags.append("collapsed")
    for j, col in enumerate(schema.columns):
        n_real, n_synth = np.unique(real[:, j]).size, np.unique(synth[:, j]).size
        entry = {"column": col.name, "distinct_real": int(n_real), "distinct_synthetic": int(n_synth)}
        if n_synth == 1 < n_real:
            flags.append(f"constant:{col.name}")
        elif col.kind == "numeric" and n_synth <= FEW_VALUES and n_real >= 10 * n_synth:
            flags.append(f"few_values:{col.name}")
        if col.kind == "categorical":
            categories = col.categories or ()
            k = len(categories)
            used = set(np.minimum((real[:, j] * k).astype(np.int64), k - 1).tolist())
            made = set(np.minimum((synth[:, j] * k).astype(np.int64), k - 1).tolist())
            missing = [str(categories[c]) for c in sorted(used - made)]
            entry["missing_categories"] = missing
            if missing:
                flags.append(f"missing_categories:{col.name}")
        columns.append(entry)
    return {"value": synth_top, "floor": real_top, "collapsed": bool(collapsed), "flags": ", ".join(flags),
            "distinct_rows_real": real_distinct, "distinct_rows_synthetic": synth_distinct, "rows_compared": rows,
            "columns": columns, "measure": "share of the most frequent synthetic row (floor: real)",
            "uncertainty": "exact counts on the evaluated rows (descriptive, no sampling interval)"}


def _top_share(P: np.ndarray) -> tuple[float, int]:
    """Share of the most frequent row and the number of distinct rows."""
    _, inverse = _unique_rows(P)
    counts = np.bincount(inverse)
    return float(counts.max() / len(P)), len(counts)


def rank_runs(entries: dict, *, higher_is_better: bool = False) -> pd.DataFrame:
    """Rank runs by one metric without ordering runs whose intervals overlap.

    Runs are grouped into ties: the connected components of the "intervals overlap" relation (intervals on a
    line: sort by lower end and merge while the next interval starts at or before the running upper end). The
    groups are disjoint, so they are totally ordered; inside a group runs share one rank and are never ordered.
    Two runs in different groups have disjoint intervals.

    Parameters
    ----------
    entries : dict
        Run name -> an :func:`evaluate` entry (a dict with ``value``, ``low``, ``high``) or a ``(value, low,
        high)`` tuple.
    higher_is_better : bool
        Rank 1 for the highest values (e.g. TSTR accuracy); default lowest (distances).

    Returns
    -------
    DataFrame
        ``run, value, low, high, rank, tied_with`` (runs of the same group, comma separated), sorted by rank
        then run name (not by value inside a group).
    """
    rows = []
    for name, entry in entries.items():
        if isinstance(entry, dict):
            if not all(_finite_number(entry.get(k)) for k in ("value", "low", "high")):
                raise ParameterError(f"run {name!r} has no interval (value, low, high): cannot rank it honestly")
            value, low, high = entry["value"], entry["low"], entry["high"]
        else:
            value, low, high = entry
        if not low <= value <= high:
            raise ParameterError(f"run {name!r}: value {value} is not inside its interval [{low}, {high}]")
        rows.append({"run": str(name), "value": float(value), "low": float(low), "high": float(high)})
    table = pd.DataFrame(rows, columns=["run", "value", "low", "high"])
    if table.empty:
        return table.assign(rank=[], tied_with=[])
    key = -table["high"] if higher_is_better else table["low"]
    order = np.argsort(key.to_numpy(), kind="stable")
    group = np.empty(len(table), dtype=int)
    current, reach = 0, None
    for i in order:
        start, end = (-table.at[i, "high"], -table.at[i, "low"]) if higher_is_better \
            else (table.at[i, "low"], table.at[i, "high"])
        if reach is not None and start > reach:
            current += 1
        reach = end if reach is None else max(reach, end)
        group[i] = current + 1
    table["rank"] = group
    members = table.groupby("rank")["run"].agg(sorted)
    table["tied_with"] = [", ".join(r for r in members[g] if r != run)
                          for g, run in zip(table["rank"], table["run"], strict=True)]
    return table.sort_values(["rank", "run"]).reset_index(drop=True)


def _finite_number(value) -> bool:
    return isinstance(value, (int, float, np.integer, np.floating)) and not isinstance(value, bool) \
        and bool(np.isfinite(value))
