"""Distances between two point clouds (evaluation only: they read the real data).

* :func:`w1`: 1-Wasserstein distance; exact (1-D closed form, POT network simplex) or, for large inputs, exact on a
  common grid with a stated additive error bound, or a certified interval. The value is a :class:`W1Value` (a float
  that says how it was computed). :func:`sliced_w1` is a cheaper, different quantity.
* :func:`mmd` / :func:`mmd2`: Gaussian-kernel maximum mean discrepancy (biased V-statistic, unbiased U-statistic,
  linear-time block estimator, random Fourier features); :func:`gaussian_kernel_mean` is the chunked kernel mean
  they use.

The marginal fidelity metrics are in :mod:`privsyn_core.evaluation.marginals`, the report that runs them all in
:mod:`privsyn_core.evaluation.scorecard`; ``privsyn_core.metrics`` names them together.
"""

from __future__ import annotations

import math
from itertools import product as itertools_product

import numpy as np
import ot
from scipy.spatial.distance import pdist
from scipy.stats import wasserstein_distance

from privsyn_core.errors import DataError, ParameterError
from privsyn_core.evaluation.w1_certified import (
    CERTIFIED_CELLS,
    CERTIFIED_CELLS_PER_ROOT,
    CERTIFIED_MAX_BYTES,
    CERTIFIED_NEIGHBOURS,
    certified_bytes,
    certified_w1,
)

__all__ = ["EXACT_HARD_LIMIT", "EXACT_MAX_ENTRIES", "FLOW_MAX_NODES", "FLOW_NODES", "MMD_EXACT_PAIRS", "MMDValue",
           "RFF_FEATURES", "W1Value", "gaussian_kernel_mean", "median_bandwidth", "mmd", "mmd2", "sliced_w1", "w1"]

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
# "auto" in d >= 3: certified while #positive x #negative atoms is at most this (10^4 atoms a side: seconds of CPU
# and an interval a few percent wide, where the grid's interval is wider than the value), the grid above
# (docs/w1.md)
AUTO_CERTIFIED_PAIRS = 100_000_000


class W1Value(float):
    """A W1 value: a plain ``float`` that also says how it was computed.

    Attributes
    ----------
    method : str
        ``"closed_form_1d"`` (d = 1, exact), ``"exact_emd"`` (POT network simplex, exact), ``"grid_emd"``
        (exact W1 between the two measures moved onto the centres of a common grid of ``cells_per_axis`` cells
        per axis; the true W1 lies within ``error_bound`` of the value), ``"grid_flow"`` (the same by min-cost
        flow) or ``"certified_flow"`` (the midpoint of a certified interval ``[lower, upper]``).
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
      ``min(CERTIFIED_CELLS, sqrt(#atoms), sqrt(CERTIFIED_CELLS_PER_ROOT sqrt(#atoms)))``;
      :mod:`privsyn_core.evaluation.w1_certified`, timings in ``docs/w1.md``); its memory is estimated first, and
      above ``CERTIFIED_MAX_BYTES`` it
      refuses. In other d on a nearest-neighbour graph with column generation
      (:mod:`privsyn_core.evaluation.w1_sparse`; ``cells_per_axis`` unused; chebyshev visits every pair of atoms
      once per round, so at most ``TRANSFORM_MAX_PAIRS`` pairs; 10^4 points a side in 1-6 s).
    * ``"auto"``: the closed form in d = 1; else ``"exact"`` while the cost matrix of the cancelled atoms has at
      most ``max_entries`` entries (about 2000 points a side by default); above that ``"certified"`` for
      unweighted chebyshev or cityblock inputs, in d = 2 while its memory estimate fits the budget and in
      d >= 3 while #positive x #negative atoms is at most ``AUTO_CERTIFIED_PAIRS`` (about 10^4 points a side);
      else ``"grid"`` (weighted inputs, the euclidean metric, larger inputs in d >= 3).

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


def w1_exact_or_grid(X: np.ndarray, Y: np.ndarray, *, max_entries: int = EXACT_MAX_ENTRIES) -> W1Value:
    """:func:`w1` (chebyshev, unweighted) with ``"auto"`` kept on the exact or the grid method, never the certified
    interval (seconds of CPU at 10^4 rows per side, where the exact or grid value takes a fraction of that): the
    full-sample check of the evaluation report."""
    return _w1(X, Y, None, None, "chebyshev", "auto", max_entries, None, auto_certified=False)


def _w1(X: np.ndarray, Y: np.ndarray, weights_x: np.ndarray | None, weights_y: np.ndarray | None, metric: str,
        method: str, max_entries: int, cells_per_axis: int | None, auto_certified: bool = True) -> W1Value:
    """:func:`w1`; ``auto_certified=False`` keeps ``"auto"`` on exact-or-grid (:func:`w1_exact_or_grid`)."""
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
    affordable = X.shape[1] == 2 or entries <= AUTO_CERTIFIED_PAIRS
    if method == "certified" or (method == "auto" and certifiable and affordable and auto_certified):
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
    atoms, inverse = unique_rows(X)
    merged = np.bincount(inverse, weights=w, minlength=len(atoms))
    return merged / merged.sum(), atoms


def _signed_difference(X: np.ndarray, a: np.ndarray, Y: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Atoms of the union and mu - nu on them, with float dust (|.| <= 1e-15) set to 0."""
    atoms, inverse = unique_rows(np.vstack([X, Y]))
    diff = (np.bincount(inverse[:len(X)], weights=a, minlength=len(atoms))
            - np.bincount(inverse[len(X):], weights=b, minlength=len(atoms)))
    diff[np.abs(diff) <= _CANCEL_TOLERANCE] = 0.0
    return atoms, diff


def unique_rows(P: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
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
    if not pos.any() or not neg.any():  # one sign alone is the floating-point residue of two equal masses
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
    is rounded.  Integer supplies of this size are also what the cost-scaling solver handles fast (its running
    time grows with the log of the largest supply).  Weighted inputs use units of 2^-40 (rounding bounded).
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
    """Default lattice of the certified method: about one cell per atom up to 8100 atoms, then
    ``CERTIFIED_CELLS_PER_ROOT`` x the square root of #atoms cells (the lattice problem, solved whole, grows faster
    than the blocks' sweeps shrink), at most ``CERTIFIED_CELLS`` per axis."""
    by_root = round(math.sqrt(CERTIFIED_CELLS_PER_ROOT * math.sqrt(atoms)))
    return int(min(CERTIFIED_CELLS, max(2, math.isqrt(atoms)), by_root))


def _certified(X: np.ndarray, a: np.ndarray, Y: np.ndarray, b: np.ndarray, metric: str, k: int,
               sizes: tuple[int, int]) -> W1Value:
    """Certified interval of :mod:`privsyn_core.evaluation.w1_certified` on exact integer masses (1 / lcm(n, m))."""
    if not isinstance(k, (int, np.integer)) or k < 1:
        raise ParameterError(f"cells_per_axis must be a positive integer, got {k!r}")
    n, m = sizes
    unit = math.lcm(n, m)
    atoms, inverse = unique_rows(np.vstack([X, Y]))
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


