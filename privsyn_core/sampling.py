"""Post-processing helpers shared by mechanisms: weighted atoms to synthetic rows.

Everything here only reads the *released* output, so it costs no privacy.
"""

from __future__ import annotations

import numpy as np


def largest_remainder(weights: np.ndarray, total: int) -> np.ndarray:
    r"""Integer counts ``c_i >= 0`` with ``sum c = total`` closest to ``total * w_i / sum w``.

    Largest-remainder (Hamilton) rounding: floor every share, then give the leftover
    units to the largest fractional parts.  Each count is off by less than 1, so the
    total-variation distance between ``c/total`` and ``w/sum w`` is at most
    ``m / (2 total)`` for ``m`` atoms.
    """
    w = np.clip(np.asarray(weights, dtype=float), 0.0, None)
    if total < 0:
        raise ValueError("total must be >= 0")
    if total == 0 or w.sum() <= 0:
        return np.zeros(len(w), dtype=np.int64)
    share = w * (total / w.sum())
    counts = np.floor(share).astype(np.int64)
    left = int(total - counts.sum())
    if left > 0:
        order = np.argsort(-(share - counts), kind="stable")
        counts[order[:left]] += 1
    return counts


def rows_from_weights(points: np.ndarray, weights: np.ndarray, n_rows: int,
                      rng: np.random.Generator | None = None,
                      lo: np.ndarray | None = None, hi: np.ndarray | None = None) -> np.ndarray:
    """Turn weighted atoms into ``n_rows`` synthetic rows.

    Each atom is repeated by :func:`largest_remainder`; when cell boxes ``lo, hi``
    (shape ``(m, d)``) are given, each row is drawn uniformly inside its atom's box
    instead of at the atom (needs ``rng``).  Rows are returned in shuffled order when
    ``rng`` is given, so that row order does not reveal the cell order.
    """
    points = np.asarray(points, dtype=float)
    counts = largest_remainder(weights, n_rows)
    idx = np.repeat(np.arange(len(points)), counts)
    if lo is None:
        rows = points[idx]
    else:
        lo, hi = np.asarray(lo)[idx], np.asarray(hi)[idx]
        rows = lo + rng.random(lo.shape) * (hi - lo)
    if rng is not None:
        rows = rows[rng.permutation(len(rows))]
    return rows
