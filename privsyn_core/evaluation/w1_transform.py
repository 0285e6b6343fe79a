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
targets), so each pair is counted in a quadrant whose signs are right. Blocks of ``base`` positions are done by
brute force, ``base`` between ``_BASE`` and twice that, chosen so that the ``base 2^j`` positions exceed the ``N``
sources plus targets by less than ``2^j`` (padding to a power of two would add up to ``N`` positions). Time
``O(N log^2 N)`` in vectorised passes.

Every value is ``h(s)`` plus or minus the four coordinates, evaluated in floating point: it differs from
``h(s) + |t - s|_1`` by a few units in the last place of the magnitudes involved, which callers cover by a margin.
"""

from __future__ import annotations

import numpy as np

_BASE = 16  # positions per brute-force block, at least (and fewer than twice this)
_SOURCE, _TARGET, _PAD = 0, 1, 2


def planar_c_transform(sources: np.ndarray, values: np.ndarray, targets: np.ndarray,
                       argmin: bool = True) -> tuple[np.ndarray, np.ndarray | None]:
    """``min_s values(s) + ||t - s||_1`` for every target ``t``, and the index of a minimising source.

    Parameters
    ----------
    sources : array (n, 2), n >= 1
    values : array (n,)
    targets : array (m, 2)
    argmin : bool
        Also find a minimising source (tracking it takes about a quarter of the time).

    Returns
    -------
    best : array (m,)
    argmin : int array (m,), or None when not asked for
    """
    n, total = len(sources), len(sources) + len(targets)
    levels = max(1, (total - 1) // _BASE).bit_length()
    base = -(-total // (1 << levels))
    size = max(2 * base, base << levels)
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
    best, argpos = _brute_force_blocks(x, y, h, is_target, base)
    best, found = _divide_and_conquer(x, y, h, rank, is_source, is_target, best, argpos if argmin else None, base)
    targets_at = np.flatnonzero(is_target)
    out_best = np.empty(total - n)
    out_best[item[targets_at] - n] = best[targets_at]
    if found is None:
        return out_best, None
    out_arg = np.empty(total - n, dtype=np.int64)
    out_arg[item[targets_at] - n] = item[found[targets_at]]
    return out_best, out_arg


def _brute_force_blocks(x: np.ndarray, y: np.ndarray, h: np.ndarray, is_target: np.ndarray,
                        base: int) -> tuple[np.ndarray, np.ndarray]:
    """Every (target, source) pair inside each block of ``base`` consecutive positions, directly."""
    rows = len(x) // base
    xs, ys, hs = (a.reshape(rows, 1, base) for a in (x, y, h))
    xt, yt = (np.where(is_target, a, 0.0).reshape(rows, base, 1) for a in (x, y))
    cost = hs + np.abs(xt - xs) + np.abs(yt - ys)
    column = cost.argmin(axis=2)
    best = np.take_along_axis(cost, column[..., None], axis=2).ravel()
    return best, (np.arange(rows)[:, None] * base + column).ravel()


def _divide_and_conquer(x: np.ndarray, y: np.ndarray, h: np.ndarray, rank: np.ndarray, is_source: np.ndarray,
                        is_target: np.ndarray, best: np.ndarray, argpos: np.ndarray | None,
                        base: int) -> tuple[np.ndarray, np.ndarray | None]:
    """Pairs split between the halves of blocks of 2 ``base``, 4 ``base``, ... positions (see module doc); the
    minimisers are tracked unless ``argpos`` is None.

    All arrays are kept in the current order ``position[i]`` (by block, then by the second coordinate), permuted
    at each level by a stable sort that merges the two sorted halves of every block.
    """
    size = len(x)
    position = np.arange(size, dtype=np.int64)
    kind = np.where(is_source, 1, np.where(is_target, 2, 0)).astype(np.int8)
    tracked = argpos if argpos is not None else np.zeros(0, dtype=np.int64)
    half = base
    while half < size:
        block = 2 * half
        order = np.argsort((position // block) * size + rank, kind="stable")
        position, rank, kind = position[order], rank[order], kind[order]
        best, x, y, h = best[order], x[order], y[order], h[order]
        if argpos is not None:
            tracked = tracked[order]
        left = (position % block) < half
        source, target = kind == 1, kind == 2
        for from_left in (True, False):
            sending = source & left if from_left else source & ~left
            receiving = target & ~left if from_left else target & left
            sign = -1.0 if from_left else 1.0
            shifted = h + sign * x
            for forwards in (True, False):
                value = np.where(sending, shifted - y if forwards else shifted + y, np.inf).reshape(-1, block)
                running = np.minimum.accumulate(value if forwards else value[:, ::-1], axis=1)
                candidate = np.where(receiving, (running if forwards else running[:, ::-1]).ravel()
                                     - sign * x + (y if forwards else -y), np.inf)
                better = candidate < best
                best = np.where(better, candidate, best)
                if argpos is not None:
                    tracked = np.where(better, _running_argmin(value, running, position, forwards), tracked)
        half = block
    restore = np.empty(size, dtype=np.int64)
    restore[position] = np.arange(size)
    return best[restore], (tracked[restore] if argpos is not None else None)


def _running_argmin(value: np.ndarray, running: np.ndarray, position: np.ndarray, forwards: bool) -> np.ndarray:
    """The position holding each running minimum of the rows of ``value`` (``running``: that minimum, taken
    backwards along the rows unless ``forwards``), flattened."""
    block = value.shape[1]
    columns = np.arange(block)
    ahead = value if forwards else value[:, ::-1]
    at = np.maximum.accumulate(np.where(ahead <= running, columns, 0), axis=1)
    if not forwards:
        at = (block - 1 - at)[:, ::-1]
    return np.take_along_axis(position.reshape(-1, block), at, axis=1).ravel()
