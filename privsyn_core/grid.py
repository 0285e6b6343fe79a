"""Equal-cube grids on ``[0, 1]^d``: cell indices, counts and boxes (shared by grid mechanisms)."""

from __future__ import annotations

import numpy as np


def cell_coords(unit: np.ndarray, k: int) -> np.ndarray:
    """Integer cell coordinates ``clip(floor(k x), 0, k-1)``; ``x = 1.0`` lands in the last cell."""
    return np.clip(np.floor(unit * k).astype(np.int64), 0, k - 1)


def cell_ids(unit: np.ndarray, k: int) -> np.ndarray:
    """Row-major linear cell id of every point on the ``k^d`` grid (needs ``k^d < 2^63``)."""
    coords = cell_coords(unit, k)
    return np.ravel_multi_index(tuple(coords.T), (k,) * unit.shape[1])


def cell_counts(unit: np.ndarray, k: int) -> np.ndarray:
    """Counts of all ``k^d`` cells, in row-major order."""
    return np.bincount(cell_ids(unit, k), minlength=k ** unit.shape[1])


def cell_boxes(ids: np.ndarray, k: int, d: int) -> tuple[np.ndarray, np.ndarray]:
    """Lower and upper corners ``(len(ids), d)`` of the given cells."""
    coords = np.stack(np.unravel_index(np.asarray(ids, dtype=np.int64), (k,) * d), axis=1)
    return coords / k, (coords + 1) / k


def cell_centres(ids: np.ndarray, k: int, d: int) -> np.ndarray:
    """Centres ``(len(ids), d)`` of the given cells."""
    lo, hi = cell_boxes(ids, k, d)
    return (lo + hi) / 2
