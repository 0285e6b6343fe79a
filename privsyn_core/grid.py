"""Equal-cube grids on ``[0, 1]^d``: cell indices, counts and boxes (shared by grid mechanisms)."""

from __future__ import annotations

import numpy as np


def cell_coords(unit: np.ndarray, k: int) -> np.ndarray:
    """Integer cell coordinates ``clip(floor(k x), 0, k-1)``; ``x = 1.0`` lands in the last cell."""
    return np.clip(np.floor(unit * k).astype(np.int64), 0, k - 1)


def cell_ids(unit: np.ndarray, k: int) -> np.ndarray:
    """Row-major linear cell id of every point on the ``k^d`` grid (needs ``k^d < 2^63``)."""
    return cell_coords(unit, k) @ _strides(k, unit.shape[1])


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
