r"""Implicit empty bins and empty subtrees for the KD-tree mechanisms ``kd_grid`` and ``kd_adaptive``.

Both mechanisms add noise to *every* bin or leaf, empty ones included, then keep those whose
noisy count reaches a threshold.  The empty ones are far too many to enumerate (``k^d`` bins,
``2^h`` nodes), so they are handled implicitly, with exactly the output law of the explicit
algorithm (seed 002, Algorithms 4-5, Lemma 9 and its proof in App. F).

Integer noise.  Counts get the discrete Laplace law ``Lap_Z(b)`` (``P(z) ∝ p^{|z|}``,
``p = e^{-1/b}``) instead of the paper's continuous ``Lap(b)``: same privacy calibration, and no
floating-point attack on released counts.  A noisy count is then an integer, so "kept iff
``ṽ >= t`` and ``ṽ > 0``" is "kept iff ``ṽ >= T``" with the integer threshold
``T = max(ceil(t), 1)`` (:func:`integer_threshold`).  For an empty bin ``ṽ = η ~ Lap_Z(b)`` and

* ``P[η >= T] = p^T / (1 + p)`` for ``T >= 1`` (:func:`tail_probability`);
* ``η | η >= T  ~  T + G`` with ``G`` geometric on ``{0, 1, ...}``, ``P(G = g) = (1-p) p^g``
  (:func:`conditional_weights`): the discrete form of the paper's ``t + Exponential(2/ε)``.

Lemma 9 (binomial thinning) then gives the implicit sampler exactly: ``M ~ Binomial(K, P[η >= T])``
emitted empty bins, chosen uniformly without replacement, each with an independent conditional
weight (:func:`sample_empty_cells`).  Empty subtrees of the adaptive tree are Galton-Watson trees
(the same thinning applied level by level) simulated node by node with fresh noise
(:func:`empty_subtree_leaves`).

:func:`tail_probability` and :func:`conditional_weights` are the law of the empty cells' noise, so they are
declared to the privacy audit (:func:`~privsyn_core.mechanisms.base.audit.scaled_law`): its detection cases rescale
them with ``discrete_laplace``, keeping the implicit empty cells equal in law to explicit ones.
"""

from __future__ import annotations

import math

import numpy as np

from privsyn_core.errors import ParameterError
from privsyn_core.mechanisms.base.audit import scaled_law
from privsyn_core.privacy.noise import binomial_big, discrete_geometric, discrete_laplace

#: Id spaces up to this size are enumerated (``np.setdiff1d``); larger ones use rejection sampling.
ENUMERATE_LIMIT = 4_000_000
#: Largest id space (cells ``k^d`` or tree nodes ``2^h``) with int64 ids.
MAX_ID_SPACE = 2**62
_MAX_BATCH = 10_000_000


def integer_threshold(t: float) -> int:
    """``T = max(ceil(t), 1)``: an integer noisy count ``v`` satisfies ``v >= t and v > 0`` iff ``v >= T``."""
    return max(1, math.ceil(t))


@scaled_law(1)
def tail_probability(threshold: int, scale: float) -> float:
    r"""``P[Lap_Z(b) >= T] = p^T / (1 + p)`` with ``p = e^{-1/b}``, for an integer ``T >= 1``."""
    if threshold < 1:
        raise ValueError("the implicit sampler needs an integer threshold >= 1")
    return math.exp(-threshold / scale) / (1.0 + math.exp(-1.0 / scale))


@scaled_law(1)
def conditional_weights(threshold: int, scale: float, size: int, rng: np.random.Generator) -> np.ndarray:
    r"""Draws of ``Lap_Z(b)`` conditioned on ``>= T`` (``T >= 1``): ``T + Geometric_0(1 - p)``.

    The discrete counterpart of Algorithm 5's ``ConditionalLap(2/ε, t) = t + Exp(2/ε)``:
    for ``z >= T``, ``P(η = z | η >= T) = (1 - p) p^{z - T}``.  The geometric part is drawn with integer
    arithmetic only (:func:`~privsyn_core.privacy.noise.discrete_geometric`, Canonne, Kamath, Steinke, NeurIPS
    2020, Algorithm 2 without its sign).
    """
    return threshold + discrete_geometric(scale, size, rng)


def sample_ids_excluding(space: int, excluded: np.ndarray, m: int, rng: np.random.Generator) -> np.ndarray:
    """``m`` distinct ids drawn uniformly from ``{0, ..., space-1}`` minus ``excluded``, in random order.

    Small spaces are enumerated; large ones use the paper's rejection sampling (App. E.1):
    uniform candidates, dropping excluded ones and repeats, kept in draw order, which is exactly
    sequential sampling without replacement.

    Parameters
    ----------
    space : int
        Size of the id space, at most :data:`MAX_ID_SPACE`.
    excluded : ndarray of int64
        Sorted, distinct ids that must not be drawn (the non-empty bins or nodes).
    m : int
        Number of ids, at most ``space - len(excluded)``.
    """
    free = space - len(excluded)
    if not 0 <= m <= free:
        raise ValueError(f"cannot draw {m} distinct ids from {free} free ids")
    if m == 0:
        return np.empty(0, dtype=np.int64)
    if space <= ENUMERATE_LIMIT:
        free_ids = np.setdiff1d(np.arange(space, dtype=np.int64), excluded, assume_unique=True)
        return rng.choice(free_ids, m, replace=False)
    chosen = np.empty(0, dtype=np.int64)
    while len(chosen) < m:
        need = m - len(chosen)
        batch = min(_MAX_BATCH, math.ceil(1.2 * need * space / (free - len(chosen))) + 16)
        candidates = rng.integers(0, space, batch, dtype=np.int64)
        candidates = candidates[~np.isin(candidates, excluded) & ~np.isin(candidates, chosen)]
        _, first = np.unique(candidates, return_index=True)
        chosen = np.concatenate([chosen, candidates[np.sort(first)][:need]])
    return chosen


def sample_empty_cells(space: int, nonempty: np.ndarray, threshold: int, scale: float,
                       rng: np.random.Generator, max_emitted: float) -> tuple[np.ndarray, np.ndarray]:
    """Implicit empty bins (Algorithm 5): which empty bins pass the threshold, and their weights.

    Equal in law to giving each of the ``K = space - len(nonempty)`` empty bins an independent
    ``Lap_Z(scale)`` count and keeping those ``>= threshold`` (Algorithm 4, Lemma 9).

    Parameters
    ----------
    space : int
        Number of bins (``k^d``), at most :data:`MAX_ID_SPACE`.
    nonempty : ndarray of int64
        Sorted ids of the non-empty bins.
    threshold : int
        Integer threshold ``T >= 1`` (:func:`integer_threshold`).
    scale : float
        Discrete Laplace scale of the counts.
    max_emitted : float
        Largest allowed expected number of emitted empty bins; above it a
        :class:`ParameterError` explains how to raise the threshold.  The guard bounds the expectation
        with all ``space`` bins, so whether it refuses depends on public quantities only.

    Returns
    -------
    ids : ndarray of int64
        The emitted empty bins, distinct.
    weights : ndarray of int64
        Their noisy counts, each ``>= threshold``.
    """
    empty = space - len(nonempty)
    p = tail_probability(threshold, scale)
    if space * p > max_emitted:  # all bins, not the empty ones: the guard must not depend on the data
        raise ParameterError(f"up to {space * p:.3g} empty bins would pass the threshold t={threshold} "
                             f"(limit {max_emitted:.0e}): the output would be mostly noise; raise t or the bin width")
    m = binomial_big(empty, p, rng)
    ids = sample_ids_excluding(space, nonempty, m, rng)
    return ids, conditional_weights(threshold, scale, m, rng)


def empty_subtree_leaves(depths: np.ndarray, ids: np.ndarray, max_depth: int, tau: float, tree_scale: float,
                         rng: np.random.Generator, max_nodes: int) -> tuple[np.ndarray, np.ndarray]:
    """Leaves of the empty subtrees rooted at the given empty nodes (Galton-Watson trees).

    Every empty node at depth ``< max_depth`` makes the same private decision as a non-empty one,
    with fresh noise: it is a leaf iff ``0 <= tau + Lap_Z(tree_scale)``, otherwise it splits into
    two empty children.  Nodes at ``max_depth`` are leaves.  This is the explicit algorithm run
    on the empty nodes, level by level.

    Parameters
    ----------
    depths, ids : ndarray of int64
        Depth and path id (bit ``j`` from the top = child taken at depth ``j+1``) of each root.
    max_depth : int
        ``h_max``.
    tau : float
        Split threshold.
    tree_scale : float
        Discrete Laplace scale of the split decisions.
    max_nodes : int
        Guard on the number of simulated nodes.

    Returns
    -------
    depths, ids : ndarray of int64
        The leaves.
    """
    leaf_depths, leaf_ids = [], []
    current = np.empty(0, dtype=np.int64)
    visited = 0
    start = int(depths.min()) if len(depths) else max_depth + 1
    for depth in range(start, max_depth + 1):
        current = np.concatenate([current, ids[depths == depth]])
        visited += len(current)
        if visited > max_nodes:
            raise ParameterError(f"the empty subtrees exceed {max_nodes:.0e} nodes: raise tau")
        if depth == max_depth:
            is_leaf = np.ones(len(current), dtype=bool)
        else:
            is_leaf = tau + discrete_laplace(tree_scale, len(current), rng) >= 0
        leaf_depths.append(np.full(int(is_leaf.sum()), depth, dtype=np.int64))
        leaf_ids.append(current[is_leaf])
        parents = current[~is_leaf]
        current = np.concatenate([2 * parents, 2 * parents + 1])
    if not leaf_ids:
        return np.empty(0, dtype=np.int64), np.empty(0, dtype=np.int64)
    return np.concatenate(leaf_depths), np.concatenate(leaf_ids)


#: The paper of both KD-tree mechanisms (kd_grid, kd_adaptive).
KD_REFERENCE = ('Kreačić, Nouri, Potluru, Balch, Veloso, "Differentially private synthetic data using KD-trees", '
                'UAI 2023')
