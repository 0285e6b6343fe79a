r"""Building blocks of the superregular random walk mechanisms (``srw``, ``srw_tsp``).

Everything follows M. Boedihardjo, T. Strohmer, R. Vershynin, "Private measures, random
walks, and synthetic data", Probab. Theory Relat. Fields (2024), seed 000 (section, theorem and
equation numbers below are the paper's):

* the superregular random walk of Theorem 3.1 (Faber-Schauder hats with i.i.d. Laplace
  weights, Sect. 3.2-3.4), added to the counts on a public lattice (:func:`noisy_walk`), and its Haar analysis
  (the walk's density, Sect. 3.4);
* the signed-measure W1 on a line (2.7) and the projection onto probability measures of
  Proposition 5.2, solved exactly as weighted L1 isotonic regression;
* folding a finite metric space onto a line (Proposition 6.5): the boustrophedon (snake)
  path through grid cells, and an MST depth-first preorder (Lemma 6.1) with optional
  2-opt for any finite metric space;
* public grid nets of the cube (Sect. 9), the weight rounding of Corollary 7.3 and a
  CDF rounding along the path (post-processing, not in the paper).

All functions are pure.  The mechanisms calibrate the noise (budget, scale and sensitivity, see
:mod:`privsyn_core.mechanisms.random_walks.srw`) and pass it to :func:`noisy_walk`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction
from typing import Literal

import numpy as np
from scipy.sparse import coo_matrix, csr_matrix
from scipy.sparse.csgraph import connected_components, depth_first_order, minimum_spanning_tree, shortest_path
from scipy.spatial import cKDTree
from scipy.spatial.distance import cdist

from privsyn_core.errors import ParameterError
from privsyn_core.privacy import noise
from privsyn_core.privacy.sensitivity import count_sensitivity

ScaleMode = Literal["paper", "tight"]
METRICS = ("chebyshev", "euclidean", "cityblock")

# --------------------------------------------------------------------------------------
# Superregular random walk (Theorem 3.1)
# --------------------------------------------------------------------------------------


def _dyadic(values: np.ndarray, what: str) -> tuple[np.ndarray, int, int]:
    """``values`` as floats, their last-axis length ``N`` and ``log2 N``; ``N`` must be a power of two."""
    values = np.asarray(values, dtype=float)
    n = values.shape[-1]
    depth = walk_depth(n)
    if n != 1 << depth:
        raise ValueError(f"{what} must be a power of two, got {n}")
    return values, n, depth


def walk_depth(n_steps: int) -> int:
    """``L = ceil(log2 K)`` (``0`` for ``K = 1``): the walk is built on ``N = 2^L >= K`` steps."""
    if n_steps < 1:
        raise ValueError("a walk needs at least one step")
    return int(n_steps - 1).bit_length()


def coefficient_sensitivity(depth: int, neighbouring: str) -> float:
    r"""``max ||lambda(c) - lambda(c')||_1`` over neighbouring count vectors on ``N = 2^L`` cells.

    ``lambda`` is the Haar analysis map (:func:`haar_coefficients`; Boedihardjo, Strohmer,
    Vershynin, Sect. 3.4), under which the walk's coefficients are i.i.d. Laplace, so this is
    the :math:`\ell_1` sensitivity of the coefficient vector (``docs/srw_privacy.md``):

    * ``"add_remove"``: ``c' - c = +-e_k``; ``lambda(e_k)`` has level-0 coefficient 1 and
      exactly one coefficient ``+-1/2`` per level ``l = 1..L``, so ``1 + L/2`` for every ``k``;
    * ``"replace"``: ``c' - c = e_a - e_c``; the level-0 coefficient cancels, levels coarser
      than the first one separating ``a`` and ``c`` cancel, that level gives 1 and each finer
      level ``1/2 + 1/2``, so ``L - l* + 1``, at most ``L`` (``a``, ``c`` in different halves).
    """
    if neighbouring == "replace":
        return float(depth)
    if neighbouring == "add_remove":
        return 1.0 + depth / 2.0
    raise ValueError(f"neighbouring must be 'replace' or 'add_remove', got {neighbouring!r}")


def laplace_scale(depth: int, mode: ScaleMode = "paper", neighbouring: str = "add_remove") -> float:
    r"""Common Laplace scale ``b`` of the walk's ``2^L`` coefficients.

    The mechanisms add ``(Delta/epsilon) Z`` to the cell counts, ``Delta = ||c - c'||_1`` (2
    under replace, 1 under add/remove), so the coefficients of the released vector are
    ``lambda(c) + (Delta/epsilon) Lap(b)``: a Laplace mechanism on ``lambda(c)`` whose
    privacy loss is exactly ``epsilon S / (Delta b)`` with ``S`` the
    :func:`coefficient_sensitivity` (``docs/srw_privacy.md``).

    ``"paper"``: ``b = 2L + 1`` (Boedihardjo, Strohmer, Vershynin, Theorem 3.1 and Lemma 3.2:
    every column of the Haar analysis map has :math:`\ell_1` norm at most ``2L+1``); it spends
    ``epsilon L / (2(2L+1)) < epsilon/4`` under replace and
    ``epsilon (L+2) / (2(2L+1))`` under add/remove.  ``"tight"``: ``b = S / Delta``, the
    smallest scale with loss ``<= epsilon``, attained: ``L/2`` under replace (the
    :math:`\ell_1 \to \ell_1` norm of ``lambda`` on zero-sum vectors) and ``1 + L/2`` under
    add/remove (its norm on all vectors).  ``neighbouring`` only matters for ``"tight"``;
    its default ``"add_remove"`` is valid for either relation.  Under replace with ``L = 0``
    (one cell, whose count ``n`` is public) the tight scale is 0: no noise is needed.
    """
    if mode == "paper":
        return 2.0 * depth + 1.0
    if mode == "tight":
        return coefficient_sensitivity(depth, neighbouring) / count_sensitivity(neighbouring)
    raise ValueError(f"scale mode must be 'paper' or 'tight', got {mode!r}")


def hat_partial_sums(coefficients: np.ndarray) -> np.ndarray:
    r"""Partial sums ``S_k = W_N(k/N)``, ``k = 1..N``, of the walk (3.5)-(3.6).

    ``W_N(t) = sum_j Lambda_j phi_j(t)`` with the Faber-Schauder hats of Sect. 3.1:
    ``phi_1(t) = t`` and, at level ``l >= 1``, position ``i``, the hat of height 1 on
    ``((i-1)/2^{l-1}, i/2^{l-1})``.  Coefficients are in paper order (index 0 is level 0,
    ``[2^{l-1}, 2^l)`` is level ``l`` left to right).  The hats of a level are translates of one
    pattern (:func:`_level_hat`, length ``N / 2^{l-1}``), so a level adds the outer product of its
    coefficients with that pattern in place: ``O(N log N)`` time, two arrays of ``N`` floats (per walk),
    vectorised over leading axes.

    Parameters
    ----------
    coefficients : array (..., N), N a power of two
    """
    coefficients, n, depth = _dyadic(coefficients, "the walk length")
    lead = coefficients.shape[:-1]
    sums = coefficients[..., :1] * (np.arange(1, n + 1) / n)
    term = np.empty_like(sums)
    for level in range(1, depth + 1):
        block = n >> (level - 1)
        level_coeffs = coefficients[..., (1 << (level - 1)):(1 << level), None]
        np.multiply(level_coeffs, _level_hat(block), out=term.reshape(*lead, -1, block))
        sums += term
    return sums


def _level_hat(block: int) -> np.ndarray:
    """The hat of height 1 on a block of ``block`` steps at its points ``p = 1..block``: ``min(p, block - p)/half``."""
    half = block // 2
    pos = np.arange(1, block + 1)
    return np.where(pos <= half, pos, block - pos) / half


def walk_steps(coefficients: np.ndarray, n_steps: int) -> np.ndarray:
    """The first ``K = n_steps`` increments ``Z_k = S_k - S_{k-1}`` of the walk.

    Dropping the last ``N - K < N/2`` increments keeps ``S_1..S_K`` and the regularity
    of the (marginal) density (Sect. 3.2: "by dropping at most n/2 terms ...").
    """
    sums = hat_partial_sums(coefficients)
    return np.diff(sums, axis=-1, prepend=0.0)[..., :n_steps]


@dataclass(frozen=True)
class LatticeWalk:
    """The noisy counts ``c + s Z`` as released: their Haar coefficients on the lattice of step ``2^-k``.

    Attributes
    ----------
    coefficients : int64 array (..., N)
        ``lambda(c) 2^k + G``, ``G`` i.i.d. ``Lap_Z(discrete_scale)`` (paper order, zero-padded counts).
    exponent : int
        ``k``.
    discrete_scale : float
        The discrete Laplace scale ``sigma`` in steps, about ``s b 2^k``.
    scale : float
        ``b`` of :func:`laplace_scale`.
    """

    coefficients: np.ndarray
    exponent: int
    discrete_scale: float
    scale: float

    def noisy_counts(self, n_steps: int) -> np.ndarray:
        """The first ``K = n_steps`` noisy counts: the synthesis :func:`walk_steps` of the released coefficients
        (post-processing: floats from here on)."""
        return walk_steps(np.ldexp(self.coefficients.astype(float), -self.exponent), n_steps)


def haar_lattice(counts: np.ndarray, exponent: int) -> np.ndarray:
    """``lambda(c) 2^k`` exactly, in int64, for integer counts ``c`` (..., K) zero-padded to ``N = 2^L`` (``k >= 1``).

    :func:`haar_coefficients` of integers: the level-0 coefficient is the sum, a level-``l`` one half the
    difference of two sums, so ``2^k lambda(c)`` is an integer vector for ``k >= 1``.

    Raises
    ------
    ParameterError
        When ``2^k sum |c|`` reaches :data:`~privsyn_core.privacy.noise.LATTICE_LIMIT`.
    """
    counts = np.asarray(counts, dtype=np.int64)
    depth = walk_depth(counts.shape[-1])
    if exponent < 1:
        raise ValueError("the Haar lattice needs a step 2^-k with k >= 1")
    if counts.size and int(np.abs(counts).sum(axis=-1).max()) > noise.LATTICE_LIMIT >> exponent:
        raise ParameterError("the counts on the walk's noise lattice exceed 2^61: the data or epsilon is too large")
    padded = np.zeros((*counts.shape[:-1], 1 << depth), dtype=np.int64)
    padded[..., :counts.shape[-1]] = counts
    parts = [padded.sum(axis=-1, keepdims=True) << exponent]
    for level in range(1, depth + 1):
        halves = padded.reshape(*padded.shape[:-1], 1 << (level - 1), 2, padded.shape[-1] >> level).sum(axis=-1)
        parts.append((halves[..., 0] - halves[..., 1]) << (exponent - 1))
    return np.concatenate(parts, axis=-1)


def noisy_walk(counts: np.ndarray, rng: np.random.Generator, *, scale: float, count_sensitivity: int,
               epsilon: float) -> LatticeWalk:
    r"""The counts plus the superregular random walk of Theorem 3.1, ``c + s Z`` with ``s = Delta / epsilon``, drawn
    on a lattice so that the loss holds in floating point.

    In exact arithmetic the Haar coefficients of ``c + s Z`` are ``lambda(c) + s Lambda``, ``Lambda_j`` i.i.d.
    ``Lap(b)`` (Sect. 3.2-3.4): a Laplace mechanism on ``lambda(c)`` of loss ``epsilon S / (Delta b)``,
    ``S = max ||lambda(c) - lambda(c')||_1`` (:func:`coefficient_sensitivity`; ``docs/srw_privacy.md``).  Here
    the coefficients are drawn on the public lattice ``2^-k Z`` (:func:`privsyn_core.privacy.noise.lattice_exponent`
    of the coefficient scale ``beta = Delta b / epsilon``, with ``k >= 1``): ``lambda(c)`` of integer counts lies
    on it exactly (:func:`haar_lattice`, no rounding of the data side), so ``||v - v'||_1 = S 2^k`` for
    ``v = lambda(c) 2^k``, and the noise is ``Lap_Z(sigma)`` with ``sigma`` the least float ``>= beta 2^k``
    (:func:`privsyn_core.privacy.noise.lattice_laplace`).  The loss is
    ``S 2^k / sigma <= epsilon S / (Delta b)``, exactly: the tight ``b = S / Delta`` spends at most ``epsilon``, in
    floating point too, since the counts returned by :meth:`LatticeWalk.noisy_counts` are computed from the
    released integers only.  The noise ``2^-k G`` is the discretisation of ``Lap(beta')``,
    ``beta' = 2^-k sigma < beta (1 + 2^-52)``, on a lattice of step ``2^-k <= 2^-20 beta``, with variance below
    ``2 beta'^2``, so the bound (3.2) holds with ``b (1 + 2^-52)`` (``docs/srw_privacy.md`` §7).

    Parameters
    ----------
    counts : int array (..., K)
        Cell counts in path order (leading axes: independent walks).
    rng : numpy.random.Generator
    scale : float
        ``b`` (:func:`laplace_scale`).
    count_sensitivity : int
        ``Delta``, the l1 change of the counts between neighbours (2 under replace, 1 under add/remove).
    epsilon : float
        The walk's budget ``epsilon_w``.
    """
    counts = np.asarray(counts, dtype=np.int64)
    beta = Fraction(count_sensitivity) * Fraction(scale) / Fraction(epsilon)
    exponent = noise.lattice_exponent(float(beta), coarsest=1)
    points = haar_lattice(counts, exponent)
    noisy, sigma = noise.lattice_laplace(points, beta * 2 ** exponent, rng)
    return LatticeWalk(noisy.reshape(points.shape), exponent, sigma, scale)


def haar_coefficients(x: np.ndarray) -> np.ndarray:
    r"""Haar analysis ``lambda(x)_j = <psi_j, x> / ||psi_j||^2`` (Sect. 3.4).

    Closed form (derived from the discrete Haar system of Sect. 3.4): ``lambda_1 = sum_k x_k``; a level-``l``
    coefficient is half
    the difference of the sums of ``x`` over the left and right halves of its block.
    It inverts :func:`walk_steps` for ``K = N``: ``haar_coefficients(walk_steps(c, N)) == c``.

    Parameters
    ----------
    x : array (..., N), N a power of two
    """
    x, n, depth = _dyadic(x, "Haar analysis: the length")
    parts = [x.sum(axis=-1, keepdims=True)]
    for level in range(1, depth + 1):
        halves = x.reshape(*x.shape[:-1], 1 << (level - 1), 2, n >> level).sum(axis=-1)
        parts.append((halves[..., 0] - halves[..., 1]) / 2.0)
    return np.concatenate(parts, axis=-1)


def walk_potential(z: np.ndarray, scale: float) -> np.ndarray:
    r"""Potential ``V(z) = ||lambda(z)||_1 / b`` of the walk's density ``exp(-V)/beta`` (3.1).

    For ``K = N`` the increments are a linear bijection of the coefficients, so the
    density of ``Z`` is ``exp(-V(z))`` up to a constant (the regularity (3.1) of Theorem 3.1).  Differences of
    ``V`` give exact privacy-loss values (log density ratios).
    """
    return np.abs(haar_coefficients(z)).sum(axis=-1) / scale


def hat_square_sums(n: int) -> np.ndarray:
    r"""``sum_j phi_j(k/N)^2`` for ``k = 1..N``, so ``E S_k^2 = 2 b^2`` times this (3.2).

    Each level contributes at most one non-zero hat, bounded by 1, hence ``<= L + 1``.
    """
    total = (np.arange(1, n + 1) / n) ** 2
    for level in range(1, walk_depth(n) + 1):
        block = n >> (level - 1)
        total.reshape(-1, block)[...] += _level_hat(block) ** 2
    return total


# --------------------------------------------------------------------------------------
# Measures on a line: signed W1 (2.7) and the projection of Proposition 5.2
# --------------------------------------------------------------------------------------


def signed_w1_line(a: np.ndarray, b: np.ndarray, positions: np.ndarray, right_end: float | None = None) -> float:
    r"""``W1(a, b) = int |F_a - F_b|`` for signed measures on sorted positions (2.7).

    ``= sum_k (x_{k+1} - x_k) |sum_{j<=k} (a_j - b_j)|`` with ``x_{K+1} = right_end``
    (the W1 of a line (2.7), as used in the proof of Proposition 5.1).  ``right_end=None`` stops at the last
    position,
    which drops the constant ``(R - x_K)|mass(a) - mass(b)|``.
    """
    positions = np.asarray(positions, dtype=float)
    end = positions[-1] if right_end is None else float(right_end)
    gaps = np.diff(np.append(positions, end))
    return float(np.dot(gaps, np.abs(np.cumsum(np.asarray(a, float) - np.asarray(b, float)))))


def isotonic_l1(values: np.ndarray, weights: np.ndarray) -> np.ndarray:
    r"""Weighted L1 isotonic regression: the least ``G`` minimising ``sum w_k |G_k - F_k|`` over ``G_1 <= ... <= G_n``.

    Partitioning (Q. F. Stout, "Isotonic regression via partitioning", Algorithmica 66, 2013): an L1 fit can
    take its values among the ``F_k`` of positive weight, ``v_0 < ... < v_{m-1}``, and its level sets are
    nested solutions of binary problems: ``G_k > v_i`` exactly for the ``k >= c_i`` of a cut ``c_i``
    minimising ``sum_{k >= c} s_k w_k`` with ``s_k = +1`` if ``F_k <= v_i`` else ``-1`` (moving ``G_k``
    from ``v_i`` to ``v_{i+1}`` changes the cost by ``s_k w_k (v_{i+1} - v_i)``).  The largest minimising
    cut gives the least optimal fit.  Cuts are nested (``c_i <= c_j`` for ``i < j``), so one cut for the middle
    threshold of a value range splits an index segment into a lower and an upper segment, each
    solved for its half of the values.  Every round handles all segments at once with segmented
    prefix sums (maximise ``sum_{lo <= k < c} s_k w_k`` over ``c``), so ``ceil(log2 m)`` rounds of vectorised
    passes over the ``n`` points: ``O(n log n)``, no Python loop over the points.

    Floating point: prefix sums within ``4 n eps sum(w)`` of the maximum (a bound on their rounding) count
    as ties and the largest such cut is taken, so exact ties, such as a weighted median between two
    values of equal weight on a path of equal steps, go to the lower value whatever the rounding of the
    weights; the objective is then optimal up to that rounding.  Zero weights leave ``G_k`` free: it
    copies its left neighbour, and a leading run copies the first point of positive weight (``inf`` when
    every weight is zero).  Checked against HiGHS in the tests.
    """
    values = np.asarray(values, dtype=float)
    weights = np.asarray(weights, dtype=float)
    fit = np.full(len(values), np.inf)
    positive = np.flatnonzero(weights > 0)
    if len(positive) == 0:
        return fit
    first = int(positive[0])
    f, w = values[first:], weights[first:]
    levels = np.unique(f[w > 0])
    n = len(f)
    itype = np.int32 if max(n, len(levels)) < 2**31 - 1 else np.int64  # int32 halves the memory traffic
    rank = np.searchsorted(levels, f).astype(itype)  # F_k <= v_i iff rank_k <= i (positive weights)
    tol = 4.0 * n * np.finfo(float).eps * float(w.sum())
    # point k's fit lies in levels[lo_k..hi_k]; points with the same range form one index segment
    lo, hi = np.zeros(n, dtype=itype), np.full(n, len(levels) - 1, dtype=itype)
    index = np.arange(n, dtype=itype)
    mid, signed, upper = np.empty(n, dtype=itype), np.empty(n), np.empty(n, dtype=bool)
    new_segment = np.ones(n, dtype=bool)
    negative = -w
    for _ in range(int(len(levels) - 1).bit_length()):
        np.add(lo, hi, out=mid)
        np.right_shift(mid, 1, out=mid)
        np.less_equal(rank, mid, out=upper)
        np.copyto(signed, negative)
        np.copyto(signed, w, where=upper)  # s_k w_k for the segment's middle threshold
        np.not_equal(lo[1:], lo[:-1], out=new_segment[1:])
        starts = np.flatnonzero(new_segment)
        lengths = np.diff(starts, append=n)
        gain = np.cumsum(signed)
        gain -= np.repeat(gain[starts] - signed[starts], lengths)  # sum_{lo <= j <= k} s_j w_j
        floor = np.maximum(np.maximum.reduceat(gain, starts), 0.0) - tol  # the empty prefix (c = lo) gains 0
        last = np.maximum.reduceat(np.where(gain >= np.repeat(floor, lengths), index, -1), starts)
        cuts = np.where(last >= starts, last + 1, starts)
        np.greater_equal(index, np.repeat(cuts, lengths), out=upper)
        np.copyto(lo, np.minimum(np.add(mid, 1), hi), where=upper)  # finished points (lo = hi) stay put
        np.copyto(hi, mid, where=~upper)
    fit[first:] = levels[lo]
    fit[:first] = fit[first]
    return fit


def project_to_probability(signed: np.ndarray, positions: np.ndarray) -> np.ndarray:
    r"""The probability measure closest in W1 to a signed measure on a line (Prop. 5.2).

    With ``F_k = sum_{j<=k} nu_j`` and gaps ``g_k = x_{k+1} - x_k`` the problem is
    ``min sum_{k<K} g_k |G_k - F_k|`` over ``0 <= G_1 <= ... <= G_{K-1} <= 1`` (derived from
    (2.7); the projection of Proposition 5.2), i.e. box-constrained weighted L1 isotonic regression: the unconstrained
    fit of :func:`isotonic_l1` clipped to ``[0, 1]``.  Then ``nu_hat = diff(0, G, 1)``.
    Minimality gives ``W1(nu_hat, nu) <= W1(mu, nu)`` for every probability ``mu`` and so
    ``W1(nu_hat, mu) <= 2 W1(nu, mu)``.  This is *not* clip-and-renormalise, which loses
    the factor-2 guarantee of Proposition 5.2.

    Parameters
    ----------
    signed : array (K,)
        Signed masses ``nu_k`` in path order (any total mass).
    positions : array (K,)
        Non-decreasing positions ``x_k`` on the line (zero gaps allowed).

    Returns
    -------
    array (K,)
        Non-negative weights summing to 1.
    """
    signed = np.asarray(signed, dtype=float)
    cdf = np.cumsum(signed)[:-1]
    fit = np.clip(isotonic_l1(cdf, np.diff(np.asarray(positions, dtype=float))), 0.0, 1.0)
    weights = np.diff(np.concatenate(([0.0], fit, [1.0])))
    weights = np.clip(weights, 0.0, None)
    return weights / weights.sum()


# --------------------------------------------------------------------------------------
# Folding (Section 6) and nets (Sections 7, 9)
# --------------------------------------------------------------------------------------


def snake_order(bins: int, dim: int) -> np.ndarray:
    """Boustrophedon path through the ``bins^dim`` grid cells: integer coordinates ``(K, dim)``.

    The snake of ``{0..M-1}^d`` visits ``i = 0..M-1`` in the first coordinate and appends
    the ``(d-1)``-snake, reversed when ``i`` is odd (a space-filling path, Remark 7.5).  Consecutive cells
    differ by one in exactly one coordinate, so the path has length ``(K-1)/M`` in any
    l_p metric.  ``O(K d)``; ``d = 1`` is sorted order.
    """
    path = np.arange(bins)[:, None]
    first = np.arange(bins)
    for _ in range(dim - 1):
        rows = np.arange(len(path))
        index = np.where((first % 2 == 1)[:, None], len(path) - 1 - rows, rows)
        path = np.column_stack([np.repeat(first, len(path)), path[index.ravel()]])
    return path


def grid_centres(coords: np.ndarray, bins: int) -> np.ndarray:
    """Cell centres ``(i + 1/2) / M`` of integer cell coordinates: the public grid net."""
    return (np.asarray(coords, dtype=float) + 0.5) / bins


def covering_radius(bins: int, dim: int, metric: str) -> float:
    """``delta`` of the centred grid net of ``[0,1]^d``: ``1/(2M)`` in l_inf, ``sqrt(d)/(2M)``, ``d/(2M)``."""
    return {"chebyshev": 1.0, "euclidean": math.sqrt(dim), "cityblock": float(dim)}[metric] / (2 * bins)


def cube_diameter(dim: int, metric: str) -> float:
    """Diameter of ``[0,1]^d``: 1 (l_inf), ``sqrt(d)`` (l2), ``d`` (l1)."""
    return {"chebyshev": 1.0, "euclidean": math.sqrt(dim), "cityblock": float(dim)}[metric]


def path_positions(points: np.ndarray, metric: str) -> np.ndarray:
    r"""Folding positions ``x_1 = 0``, ``x_k = sum_{i<k} rho(z_{i+1}, z_i)`` (Prop. 6.5).

    The map ``x_k -> z_k`` is 1-Lipschitz: ``rho(z_j, z_k) <= |x_j - x_k|`` (telescoping).
    """
    points = np.asarray(points, dtype=float)
    steps = _pair_distances(points[:-1], points[1:], metric)
    return np.concatenate(([0.0], np.cumsum(steps)))


def _pair_distances(a: np.ndarray, b: np.ndarray, metric: str) -> np.ndarray:
    diff = np.abs(a - b)
    if metric == "chebyshev":
        return diff.max(axis=1, initial=0.0)
    if metric == "euclidean":
        return np.sqrt((diff ** 2).sum(axis=1))
    if metric == "cityblock":
        return diff.sum(axis=1)
    raise ValueError(f"metric must be one of {list(METRICS)}, got {metric!r}")


def distance_matrix(points: np.ndarray, metric: str) -> np.ndarray:
    """Dense pairwise distances (``scipy.spatial.distance.cdist``)."""
    if metric not in METRICS:
        raise ValueError(f"metric must be one of {list(METRICS)}, got {metric!r}")
    return cdist(points, points, metric=metric)


def mst_order(points: np.ndarray, metric: str) -> tuple[np.ndarray, float]:
    r"""Hamiltonian path of a finite metric space: MST depth-first preorder (Lemma 6.1).

    The DFS starts at an end of the tree's longest path (the node farthest from node 0),
    so a 1-D space comes out in sorted order (the shortest path on a line).  Shortcutting the DFS walk
    gives a path no longer than ``2 MST <= 2 TSP``.

    The tree is the MST of the complete graph, computed on the sparse graph of all pairs
    within a radius ``r`` (``scipy.spatial.cKDTree``): once that graph is connected it
    contains every MST edge, because no MST edge is longer than the smallest connecting
    radius.  ``r`` starts at the largest nearest-neighbour distance and doubles until the
    graph is connected.  ``scipy.sparse.csgraph`` reads zero weights as missing edges, so
    zero distances between distinct points become the smallest positive float.

    Returns
    -------
    order : array (K,)
        A permutation of the points.
    mst_weight : float
    """
    points = np.asarray(points, dtype=float)
    k = len(points)
    if k == 1:
        return np.zeros(1, dtype=np.int64), 0.0
    tree = minimum_spanning_tree(_radius_graph(points, metric))
    start = int(np.argmax(shortest_path(tree, directed=False, indices=0)))
    order = depth_first_order(tree, start, directed=False, return_predecessors=False)
    return order.astype(np.int64), float(tree.sum())


def _radius_graph(points: np.ndarray, metric: str) -> csr_matrix:
    """The smallest doubling-radius neighbour graph of ``points`` that is connected."""
    kd = cKDTree(points)
    p = {"chebyshev": np.inf, "euclidean": 2.0, "cityblock": 1.0}[metric]
    radius = float(kd.query(points, k=2, p=p)[0][:, 1].max())
    spread = float(np.ptp(points, axis=0).sum())  # >= every l_p distance between the points
    while True:
        pairs = kd.query_pairs(radius * (1 + 1e-9), p=p, output_type="ndarray")
        weights = np.maximum(_pair_distances(points[pairs[:, 0]], points[pairs[:, 1]], metric),
                             np.finfo(float).tiny)
        graph = coo_matrix((weights, (pairs[:, 0], pairs[:, 1])), shape=(len(points),) * 2).tocsr()
        if connected_components(graph, directed=False)[0] == 1:
            return graph
        radius = 2 * radius if radius > 0 else spread


def two_opt(order: np.ndarray, distances: np.ndarray, max_passes: int = 20) -> np.ndarray:
    """Improve an open path by 2-opt segment reversals (shortens the path of Proposition 6.5; not in the paper).

    A dummy node at zero distance from every point closes the path into a tour, so
    reversals touching either end are allowed.  Each pass tries, for every cut ``i``,
    the best second cut ``j`` (vectorised over ``j``); ``O(K^2)`` per pass.
    """
    k = len(order)
    if k < 4:
        return np.asarray(order)
    padded = np.zeros((k + 1, k + 1))
    padded[:k, :k] = distances
    tour = np.concatenate(([k], order, [k]))
    tol = 1e-12 * max(float(distances.max()), 1.0)
    for _ in range(max_passes):
        improved = False
        for i in range(k - 1):
            js = np.arange(i + 2, k + 1)
            a, b = tour[i], tour[i + 1]
            c, e = tour[js], tour[js + 1]
            gain = padded[a, b] + padded[c, e] - padded[a, c] - padded[b, e]
            best = int(np.argmax(gain))
            if gain[best] > tol:
                j = int(js[best])
                tour[i + 1:j + 1] = tour[i + 1:j + 1][::-1].copy()
                improved = True
        if not improved:
            break
    return tour[1:-1]


def path_length(points: np.ndarray, metric: str) -> float:
    """Length of the open path through ``points`` in the given order."""
    return float(path_positions(points, metric)[-1])


# --------------------------------------------------------------------------------------
# Synthetic rows (Corollary 7.3)
# --------------------------------------------------------------------------------------


def round_along_path(weights: np.ndarray, m: int) -> np.ndarray:
    r"""Integer counts ``m_i`` with ``sum m_i = m`` by rounding the CDF along the path.

    ``C_k = floor(m G_k + 1/2)`` with ``G_k = sum_{j<=k} w_j`` (``G_K = 1``) and
    ``m_k = C_k - C_{k-1} >= 0``.  Every CDF value moves by at most ``1/(2m)``, so on the
    folded line ``W1 <= x_K / (2m)`` (path length over ``2m``), and through the
    1-Lipschitz folding map the same bound holds in the metric space.  Not in the paper
    (post-processing); far smaller than Cor. 7.3's ``r diam / m`` when ``m`` is about ``n``.
    """
    cdf = np.minimum(np.cumsum(np.asarray(weights, dtype=float)), 1.0)
    cdf[-1] = 1.0
    totals = np.floor(m * cdf + 0.5).astype(np.int64)
    return np.diff(totals, prepend=0)


def round_weights(weights: np.ndarray, m: int) -> np.ndarray:
    r"""Integer counts ``m_i`` with ``sum m_i = m`` by the rounding of Corollary 7.3.

    ``m_i = floor(m w_i)`` and the whole remainder ``m kappa = m - sum floor(m w_i)`` goes
    to the first atom of the support, so ``W1(nu, nu') <= kappa diam <= r diam / m``
    (7.6) for ``r`` atoms.
    """
    weights = np.asarray(weights, dtype=float)
    counts = np.floor(m * weights).astype(np.int64)
    support = np.flatnonzero(weights > 0)
    first = int(support[0]) if len(support) else 0
    counts[first] += m - int(counts.sum())
    return counts
