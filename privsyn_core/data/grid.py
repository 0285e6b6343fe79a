"""Equal-cube grids on ``[0, 1]^d``: cell indices, counts and boxes (shared by grid mechanisms)."""

from __future__ import annotations

import numpy as np


def largest_per_axis(cells: int, d: int) -> int:
    """The largest ``k >= 1`` with ``k ** d <= cells`` (exact in integers; 1 when even 2 does not fit)."""
    k = max(1, int(cells ** (1.0 / d)))
    while (k + 1) ** d <= cells:
        k += 1
    while k > 1 and k ** d > cells:
        k -= 1
    return k


#: Rows per chunk of :func:`cell_ids` (its scratch stays in the CPU caches).
ROW_CHUNK = 2 ** 16


def cell_ids(unit: np.ndarray, k: int) -> np.ndarray:
    """Row-major linear cell id of every point on the ``k^d`` grid (needs ``k^d < 2^63``).

    Axis ``j``'s cell coordinate is ``clip(floor(k x_j), 0, k-1)`` (``x = 1.0`` lands in the last cell); the id is
    the coordinates' dot product with the row-major strides, computed axis by axis in chunks of rows, so
    that no ``(n, d)`` temporary is allocated.
    """
    n, d = unit.shape
    strides = _strides(k, d).tolist()
    ids = np.zeros(n, dtype=np.int64)
    chunk = min(ROW_CHUNK, max(n, 1))
    scaled, coordinate = np.empty(chunk), np.empty(chunk, dtype=np.int64)
    for start in range(0, n, chunk):
        size = min(n, start + chunk) - start
        part, sc, co = ids[start:start + size], scaled[:size], coordinate[:size]
        for axis, stride in enumerate(strides):
            np.multiply(unit[start:start + size, axis], k, out=sc)
            np.floor(sc, out=sc)
            np.copyto(co, sc, casting="unsafe")
            np.clip(co, 0, k - 1, out=co)
            if stride != 1:
                co *= stride
            part += co
    return ids


def cell_counts(unit: np.ndarray, k: int) -> np.ndarray:
    """Counts of all ``k^d`` cells, in row-major order."""
    return np.bincount(cell_ids(unit, k), minlength=k ** unit.shape[1])


def cell_boxes(ids: np.ndarray, k: int, d: int) -> tuple[np.ndarray, np.ndarray]:
    """Lower and upper corners ``(len(ids), d)`` of the given cells."""
    coords = (np.asarray(ids, dtype=np.int64)[:, None] // _strides(k, d)) % k
    return coords / k, (coords + 1) / k


def cell_centres(ids: np.ndarray, k: int, d: int) -> np.ndarray:
    """Centres ``(len(ids), d)`` of the given cells."""
    lo, hi = cell_boxes(ids, k, d)
    return (lo + hi) / 2


def _strides(k: int, d: int) -> np.ndarray:
    """Row-major strides ``k^(d-1), ..., k, 1`` (numpy's ravel/unravel_index stop at 64 axes)."""
    if int(k) ** int(d) >= 2 ** 63:
        raise ValueError(f"a grid of {k}^{d} cells does not fit 64-bit cell ids")
    return k ** np.arange(d - 1, -1, -1, dtype=np.int64)


#: Most cells a geometry rebuilt from a release holds (a drawing, not a computation).
RELEASED_MAX_CELLS = 2 ** 16


def released_grid_cells(side_param: str, value: str):
    """A ``released_geometry`` hook for mechanisms whose released atoms are the centres of a public grid.

    The release's atoms are centres of a grid of ``k = release.params[side_param]`` cells per axis (a public
    parameter); each cell is the cube of side ``1/k`` around its atom, valued by the atom's released weight
    (``value`` names it).  Reads the release alone: its atoms, weights and declared parameters.
    """
    def geometry(release) -> dict | None:
        unit = np.asarray(release.unit, dtype=float)
        side = release.params.get(side_param)
        if unit.ndim != 2 or not len(unit) or release.weights is None or not isinstance(side, (int, np.integer)):
            return None
        half = 0.5 / int(side)
        cells = {"lo": np.clip(unit - half, 0.0, 1.0), "hi": np.clip(unit + half, 0.0, 1.0),
                 "count": np.asarray(release.weights, dtype=float)}
        return {"cells": cells, "levels": None, "value": value}
    return geometry
