r"""The l1 c-transform in the plane, exactly: :math:`F(t) = \min_s h(s) + |t_1 - s_1| + |t_2 - s_2|`.

Used by :mod:`privsyn_core.evaluation.w1_certified` to turn any potential on the negative atoms into a
1-Lipschitz function (the McShane extension), the lower end of a certified W1 interval. A k-d tree on the lifted
points ``(s, h(s))`` answers the same query but slows down by orders of magnitude on the potentials that matter:
optimal Kantorovich potentials have slope 1 along the transport rays, so many sources nearly tie and the tree
cannot prune (10^5 points, ``h(s) = s_1``: 100 s instead of 0.6 s here).

Method: the four quadrants. For a source ``s`` with ``s_1 <= t_1`` and ``s_2 <= t_2`` the cost is
``(h(s) - s_1 - s_2) + (t_1 + t_2)``, linear in each end, and likewise for the three other sign patterns; so
``F(t)`` is the minimum over the four quadrants of a 2-D dominance minimum. Each dominance minimum is computed
offline by divide and conquer over the order of the first coordinate (Bentley, "Multidimensional
divide-and-conquer", 1980): in a block of
positions split into a left and a right half, every source of one half and target of the other are on known
sides in the first coordinate, and sorting the block by the second coordinate turns the quadrant minimum into a
running minimum (``np.minimum.accumulate``) forwards or backwards. Ties go to the sources (sorted before the
targets), so each pair is counted in a quadrant whose signs are right. Blocks of ``_BASE`` positions are done by
brute force. Time ``O(N log^2 N)`` in vectorised passes (``N`` sources plus targets).

Every value is ``h(s)`` plus or minus the four coordinates, evaluated in floating point: it differs from
``h(s) + |t - s|_1`` by a few units in the last place of the magnitudes involved, which callers cover by a margin.
"""

from __future__ import annotations

import numpy as np

_BASE = 16  # positions per brute-force block (a power of two)
_SOURCE, _TARGET, _PAD = 0, 1, 2


def planar_c_transform(sources: np.ndarray, values: np.ndarray,
                       targets: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``min_s values(s) + ||t - s||_1`` for every target ``t``, and the index of a minimising source.

    Parameters
    ----------
    sources : array (n, 2), n >= 1
    values : array (n,)
    targets : array (m, 2)

    Returns
    -------
    best : array (m,)
    argmin : int array (m,)
    """
    n, total = len(sources), len(sources) + len(targets)
    size = max(2 * _BASE, 1 << (total - 1).bit_length())
    kind = np.full(size, _PAD, dtype=np.int8)
    kind[:n], kind[n:total] = _SOURCE, _TARGET
    first, second = np.full(size, np.inf), np.full(size, np.inf)
    first[:n], first[n:total] = sources[:, 0], targets[:, 0]
    second[:n], second[n:total] = sources[:, 1], targets[:, 1]
    item = np.lexsort((kind, first))  # position -> item, sources before targets on ties
    rank = np.empty(size, dtype=np.int64)
    rank[np.lexsort((kind, second))] = np.arange(size)
    kind, rank = kind[item], rank[item]
    is_source, is_target = kind == _SOURCE, kind == _TARGET
    h = np.full(size, np.inf)
    h[is_source] = values[item[is_source]]
    x = np.where(kind == _PAD, 0.0, first[item])
    y = np.where(kind == _PAD, 0.0, second[item])
    best, argpos = _brute_force_blocks(x, y, h, is_target)
    best, argpos = _divide_and_conquer(x, y, h, rank, is_source, is_target, best, argpos)
    out_best = np.empty(total - n)
    out_arg = np.empty(total - n, dtype=np.int64)
    targets_at = np.flatnonzero(is_target)
    out_best[item[targets_at] - n] = best[targets_at]
    out_arg[item[targets_at] - n] = item[argpos[targets_at]]
    return out_best, out_arg


def _brute_force_blocks(x: np.ndarray, y: np.ndarray, h: np.ndarray,
                        is_target: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Every (target, source) pair inside each block of ``_BASE`` consecutive positions, directly."""
    rows = len(x) // _BASE
    xs, ys, hs = (a.reshape(rows, 1, _BASE) for a in (x, y, h))
    xt, yt = (np.where(is_target, a, 0.0).reshape(rows, _BASE, 1) for a in (x, y))
    cost = hs + np.abs(xt - xs) + np.abs(yt - ys)
    column = cost.argmin(axis=2)
    best = np.take_along_axis(cost, column[..., None], axis=2).ravel()
    return best, (np.arange(rows)[:, None] * _BASE + column).ravel()


def _divide_and_conquer(x: np.ndarray, y: np.ndarray, h: np.ndarray, rank: np.ndarray, is_source: np.ndarray,
                        is_target: np.ndarray, best: np.ndarray,
                        argpos: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Pairs split between the halves of blocks of 2 ``_BASE``, 4 ``_BASE``, ... positions (see module doc).

    All arrays are kept in the current order ``position[i]`` (by block, then by the second coordinate), permuted
    at each level by a stable sort that merges the two sorted halves of every block.
    """
    size = len(x)
    position = np.arange(size, dtype=np.int64)
    kind = np.where(is_source, 1, np.where(is_target, 2, 0)).astype(np.int8)
    arrays = [rank, kind, best, argpos, x, y, h]
    half = _BASE
    while half < size:
        block = 2 * half
        order = np.argsort((position // block) * size + arrays[0], kind="stable")
        position = position[order]
        arrays = [a[order] for a in arrays]
        rank, kind, best, argpos, x, y, h = arrays
        left = (position % block) < half
        source, target = kind == 1, kind == 2
        columns = np.arange(block)
        rows = position.reshape(-1, block)
        for from_left in (True, False):
            sending = source & left if from_left else source & ~left
            receiving = target & ~left if from_left else target & left
            sign = -1.0 if from_left else 1.0
            shifted = h + sign * x
            for forwards in (True, False):
                key = shifted - y if forwards else shifted + y
                value = np.where(sending, key, np.inf).reshape(-1, block)
                if not forwards:
                    value = value[:, ::-1]
                running = np.minimum.accumulate(value, axis=1)
                at = np.maximum.accumulate(np.where(value <= running, columns, 0), axis=1)
                if not forwards:
                    running, at = running[:, ::-1], (block - 1 - at)[:, ::-1]
                part = -sign * x + (y if forwards else -y)
                candidate = np.where(receiving, running.ravel() + part, np.inf)
                better = candidate < best
                best = np.where(better, candidate, best)
                argpos = np.where(better, np.take_along_axis(rows, at, axis=1).ravel(), argpos)
        arrays[2], arrays[3] = best, argpos
        half = block
    restore = np.empty(size, dtype=np.int64)
    restore[position] = np.arange(size)
    return arrays[2][restore], arrays[3][restore]
