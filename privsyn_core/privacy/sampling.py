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

    Only the ``left`` largest remainders matter, so they are selected in ``O(m)``: every remainder above the
    ``left``-th largest value gets a row, and the rows left over go to a uniformly random subset of the atoms
    whose remainder equals it (``rng.choice`` of their indices, in index order), the same law as sorting all
    atoms by remainder with i.i.d. uniform tie-breaking keys, without the ``O(m log m)`` sort.  Non-negative
    integer weights (counts) below ``max(m, 2^16)`` are rounded by value (:func:`_largest_remainder_by_value`:
    exact rational shares, no float array of the atoms); other weights in float64 (:func:`kth_largest`).
    """
    if total < 0:
        raise ValueError("total must be >= 0")
    weights = np.asarray(weights)
    if weights.dtype.kind in "iu" and len(weights) and int(weights.min()) >= 0 \
            and int(weights.max()) < max(len(weights), 2 ** 16):
        return _largest_remainder_by_value(weights, total, rng)
    w = np.array(weights, dtype=float)  # a copy: modified in place below
    np.maximum(w, 0.0, out=w)
    weight_sum = w.sum()
    if total == 0 or weight_sum <= 0:
        return np.zeros(len(w), dtype=np.int64)
    share = np.multiply(w, total / weight_sum, out=w)
    counts = share.astype(np.int64)  # floor: the shares are >= 0
    left = int(total - counts.sum())
    if left > 0:
        remainder = np.subtract(share, counts, out=share)
        cut = kth_largest(remainder, left)
        above = np.flatnonzero(remainder > cut)
        ties = np.flatnonzero(remainder == cut)
        counts[above] += 1
        counts[rng.choice(ties, left - len(above), replace=False)] += 1
    return counts


def _largest_remainder_by_value(weights: np.ndarray, total: int, rng: np.random.Generator) -> np.ndarray:
    """:func:`largest_remainder` of non-negative integer weights (below ``max(m, 2^16)``), grouped by value.

    Atoms of equal weight ``v`` have the same share ``v T / S`` (``T = total``, ``S = sum w``), so the floors
    ``v T // S`` and remainders ``(v T mod S) / S`` are computed once per distinct value, exactly in Python
    integers (a PMM tree's ``2^23`` leaf counts take a few dozen values).  The values are ranked by remainder;
    the atoms of the values above the cut get a row, and the leftover rows go to a uniformly random subset of
    the atoms whose remainder equals the cut (``rng.choice`` of their indices in index order, as the float
    path).  Passes over the atoms: one ``bincount``, one table lookup, one scan for the tied atoms.
    """
    atoms_of = np.bincount(weights)
    values = np.flatnonzero(atoms_of).tolist()
    sizes = atoms_of[values].tolist()
    weight_sum = sum(v * k for v, k in zip(values, sizes, strict=True))
    if total == 0 or weight_sum == 0:
        return np.zeros(len(weights), dtype=np.int64)
    parts = [divmod(v * total, weight_sum) for v in values]
    left = total - sum(q * k for (q, _), k in zip(parts, sizes, strict=True))
    table = np.zeros(len(atoms_of), dtype=np.int64)
    table[values] = [q for q, _ in parts]
    tied: list[int] = []
    if left > 0:
        ranked = sorted(range(len(values)), key=lambda i: parts[i][1], reverse=True)
        reached = 0
        for cut_at in ranked:  # the value holding the left-th largest remainder
            reached += sizes[cut_at]
            if reached >= left:
                break
        cut = parts[cut_at][1]
        above = [i for i in ranked if parts[i][1] > cut]
        tied = [values[i] for i in ranked if parts[i][1] == cut]
        table[[values[i] for i in above]] += 1
        left -= sum(sizes[i] for i in above)
    counts = table[weights]
    if left > 0:
        ties = np.flatnonzero(weights == tied[0]) if len(tied) == 1 else np.flatnonzero(np.isin(weights, tied))
        counts[rng.choice(ties, left, replace=False)] += 1
    return counts


#: Bits of the keys sorted per pass of :func:`kth_largest` (a histogram of ``2^16`` buckets).
_DIGIT_BITS = 16


def kth_largest(values: np.ndarray, k: int) -> float:
    """The ``k``-th largest entry (``1 <= k <= len(values)``) of a float64 array of non-negative finite values.

    A most-significant-digit radix selection: the bit pattern of a non-negative float, read as an int64, orders
    as the float does, so at most four passes over 16-bit digits (one ``numpy.bincount`` each, keeping the entries
    whose digit holds the ``k``-th largest key, until they are all equal) find its key exactly, in ``O(m)`` time
    whatever the values.
    ``numpy.partition`` returns the same value, but remainders with many ties (a PMM tree's are mostly zeros) are a
    slow case of its introselect, slower than a full sort.
    """
    keys = np.ascontiguousarray(values, dtype=np.float64).view(np.int64)
    mask = (1 << _DIGIT_BITS) - 1
    for shift in range(64 - _DIGIT_BITS, -1, -_DIGIT_BITS):
        digits = np.right_shift(keys, shift)
        np.bitwise_and(digits, mask, out=digits)
        at_least = np.cumsum(np.bincount(digits, minlength=mask + 1)[::-1])  # keys with digit >= mask - i
        top = int(np.searchsorted(at_least, k))  # the k-th largest key has digit mask - top
        k -= int(at_least[top - 1]) if top else 0
        keys = keys[digits == mask - top]
        if keys.min() == keys.max():  # all the keys left are the k-th largest (a run of equal values)
            break
    return float(keys[:1].view(np.float64)[0])
