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

    Only the ``left`` largest remainders matter, so they are selected in ``O(m)`` (``numpy.partition``):
    every remainder above the ``left``-th largest value gets a row, and the rows left over go to a
    uniformly random subset of the atoms whose remainder equals it, the same law as sorting all
    atoms by remainder with i.i.d. uniform tie-breaking keys, without the ``O(m log m)`` sort.
    """
    w = np.array(weights, dtype=float)  # a copy: modified in place below
    np.maximum(w, 0.0, out=w)
    if total < 0:
        raise ValueError("total must be >= 0")
    weight_sum = w.sum()
    if total == 0 or weight_sum <= 0:
        return np.zeros(len(w), dtype=np.int64)
    share = np.multiply(w, total / weight_sum, out=w)
    counts = np.floor(share).astype(np.int64)
    left = int(total - counts.sum())
    if left > 0:
        remainder = np.subtract(share, counts, out=share)
        cut = np.partition(remainder, len(remainder) - left)[len(remainder) - left]
        above = np.flatnonzero(remainder > cut)
        ties = np.flatnonzero(remainder == cut)
        counts[above] += 1
        counts[rng.choice(ties, left - len(above), replace=False)] += 1
    return counts
