"""Post-processing shared by mechanisms: released weights rounded to synthetic row counts.

Everything here only reads the *released* output, so it costs no privacy.
"""

from __future__ import annotations

import numpy as np


def largest_remainder(weights: np.ndarray, total: int, rng: np.random.Generator) -> np.ndarray:
    r"""Integer counts ``c_i >= 0`` with ``sum c = total`` closest to ``total * w_i / sum w``.

    Largest-remainder (Hamilton) rounding: floor every share, then give the leftover
    units to the largest fractional parts.  Each count is off by less than 1, so the
    total-variation distance between ``c/total`` and ``w/sum w`` is at most
    ``m / (2 total)`` for ``m`` atoms.

    Equal fractional parts are ordered uniformly at random (``rng``), so atoms with equal
    weights are treated alike wherever they stand: breaking ties by index would hand the
    leftover rows of a flat histogram to its first cells, a systematic shift of the
    synthetic data towards the origin corner.
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
        order = np.lexsort((rng.random(len(w)), -(share - counts)))
        counts[order[:left]] += 1
    return counts
