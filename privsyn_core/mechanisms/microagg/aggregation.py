r"""Building blocks of private microaggregation ([BSV23], seed 001).

Section, algorithm, lemma and equation numbers below are those of [BSV23].  Geometric steps work on the
*scaled* Boolean data ``x/sqrt(p)`` in the unit ball (the renormalisation of Thm 4.6 and Section 5.5).

* parameters: :func:`alg1_params` (Alg 1 step 2), :func:`alg4_params` (Alg 4 steps 3, 8), :func:`resolve_t`;
* second moment and spectral projection: :func:`second_moment` (Alg 1 step 1),
  :func:`top_eigenvectors` (Lemma 3.3);
* covering and partition: :func:`lattice_covering` (Prop 3.7),
  :func:`nearest_point_labels` (Def 3.4), :func:`equipartition` (Section 3.6);
* averages: :func:`microaggregate` (4.1), :func:`damped_microaggregate` (5.4);
* privacy: :func:`bingham_sample` / :func:`pvec` (Alg 2), :func:`proj` (Alg 3);
* the Laplace noise of Alg 4 step 6 on public lattices (floating point within epsilon): :func:`noisy_weights`,
  :func:`noisy_centres`;
* projections (5.5)-(5.6): :func:`project_simplex_l1`, :func:`project_box`;
* post-processing: :func:`bootstrap_indices` (Section 4.2/5.9), :func:`randomized_rounding`
  (Lemma 4.7);
* accuracy quantities: :func:`covariance_loss`, :func:`moment_distance` (the accuracy metric (1.2) itself,
  :func:`~privsyn_core.evaluation.marginals.avg_sq_marginal_error`, is evaluation: it reads the true rows).

References
----------
.. [BSV23] M. Boedihardjo, T. Strohmer, R. Vershynin, "Covariance's Loss is Privacy's
   Gain: Computationally Efficient, Private and Accurate Synthetic Data",
   Found. Comput. Math. (2023).
.. [KGM13] J. T. Kent, A. M. Ganeiber, K. V. Mardia, "A new method to simulate the
   Bingham and related distributions in directional data analysis with applications",
   arXiv:1310.8110 (2013); J. Comput. Graph. Stat. 27 (2018).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction

import numpy as np
from scipy.optimize import brentq

from privsyn_core.errors import ParameterError
from privsyn_core.privacy import noise

#: The paper of both microaggregation mechanisms (microagg_anon, microagg_dp).
BSV23_REFERENCE = ("Boedihardjo, Strohmer, Vershynin, \"Covariance's loss is privacy's gain: computationally "
                   "efficient, private and accurate synthetic data\", Found. Comput. Math. 2024")
CHUNK_ROWS = 65_536
MAX_COVERING_POINTS = 200_000
_BINGHAM_BATCH = 32


# -- parameters -------------------------------------------------------------------------
def alg1_params(k: int) -> tuple[int, float, int]:
    r"""Algorithm 1 step 2: ``k' = floor(sqrt k)``, ``alpha = (log log k'/log k')^{1/4}``,
    ``t = floor(log k' / log(7/alpha))`` (natural log: only ``alpha`` depends on the base).  Needs ``k >= 9``.

    Returns
    -------
    k_prime, alpha, t
    """
    if k < 9:
        raise ParameterError(f"Algorithm 1 needs k >= 9 blocks (log log sqrt(k) > 0), got k={k}")
    k_prime = math.isqrt(int(k))
    alpha = (math.log(math.log(k_prime)) / math.log(k_prime)) ** 0.25
    return k_prime, alpha, math.floor(math.log(k_prime) / math.log(7 / alpha))


def alg4_params(n: int, p: int, epsilon: float, kappa: float) -> tuple[float, int, float]:
    r"""Algorithm 4 steps 3 and 8: ``alpha = (log n)^{-1/4}``,
    ``t = floor(kappa log n / log(7/alpha))``, ``b = sqrt(p n^{1-kappa} / epsilon)`` (5.17).

    Only the public ``n, p, epsilon, kappa`` enter (the privacy proof of Section 5.7 needs ``t``, ``alpha``,
    ``b`` and the covering to be data-independent).

    Returns
    -------
    alpha, t, b
    """
    if n < 2:
        raise ParameterError(f"Algorithm 4 needs n >= 2 records (alpha = (log n)^(-1/4)), got n={n}")
    alpha = math.log(n) ** -0.25
    t = math.floor(kappa * math.log(n) / math.log(7 / alpha))
    return alpha, t, math.sqrt(p * n ** (1 - kappa) / epsilon)


def resolve_t(t: int | str, t_paper: int, p: int) -> tuple[int, list[str]]:
    """The projection rank used: the paper's ``t_paper`` (``t="paper"``) or the given ``t``, at most the dimension
    ``p`` (with a warning when clamped)."""
    chosen = t_paper if t == "paper" else int(t)
    if chosen > p:
        return p, [f"t={chosen} exceeds the dimension p={p}: clamped to t={p}"]
    return chosen, []


# -- second moment and PCA -------------------------------------------------------------
def cooccurrence(X: np.ndarray) -> np.ndarray:
    """Exact integer co-occurrence matrix ``X^T X`` of a Boolean matrix, in row chunks."""
    p = X.shape[1]
    C = np.zeros((p, p), dtype=np.int64)
    for start in range(0, len(X), CHUNK_ROWS):
        block = X[start:start + CHUNK_ROWS].astype(np.int64)
        C += block.T @ block
    return C


def second_moment(X: np.ndarray) -> np.ndarray:
    r"""``S = (1/n) sum_i xhat_i xhat_i^T`` on the scaled data ``xhat = x/sqrt(p)``
    (uncentred; Alg 1 step 1, Alg 4 step 2).  ``S >= 0`` and ``tr S <= 1``."""
    n, p = X.shape
    return cooccurrence(X) / (n * p)


def top_eigenvectors(S: np.ndarray, t: int) -> tuple[np.ndarray, np.ndarray]:
    """Eigenvalues in decreasing order and the top-``t`` eigenvectors (p, t) of symmetric ``S``.

    Non-private: Algorithm 1 only (Lemma 3.3).  ``t = 0`` gives a (p, 0) basis.
    """
    lam, U = np.linalg.eigh((S + S.T) / 2)
    order = np.argsort(-lam, kind="stable")
    return lam[order], U[:, order[:t]]


# -- covering and partition ------------------------------------------------------------
def lattice_covering(t: int, alpha: float, max_points: int = MAX_COVERING_POINTS) -> np.ndarray:
    r"""The alpha-covering ``G = B_2^t ∩ (alpha/sqrt t) Z^t`` of the unit ball (Prop 3.7).

    Points are the integer vectors ``m`` with ``sum m_i^2 <= t/alpha^2`` (plus 1e-12),
    scaled by ``alpha/sqrt(t)``, in lexicographic order of ``m`` (Prop 3.7).  Every point
    of the unit ball is within distance ``< alpha`` of ``G`` (truncate toward zero), and
    ``|G| <= (7/alpha)^t``.  ``t = 0`` gives ``G = {0}`` (shape (1, 0)).

    Raises
    ------
    ParameterError
        If ``G`` would have more than ``max_points`` points.
    """
    if t == 0:
        return np.zeros((1, 0))
    if not alpha > 0:
        raise ParameterError(f"the covering radius alpha must be > 0, got {alpha}")
    radius_sq = t / alpha**2 + 1e-12
    partial = np.zeros((1, 0), dtype=np.int64)
    used = np.zeros(1)
    for _ in range(t):
        room = np.floor(np.sqrt(np.maximum(radius_sq - used, 0.0))).astype(np.int64)
        counts = 2 * room + 1
        if counts.sum() > max_points:
            raise ParameterError(f"the covering for t={t}, alpha={alpha:.3g} has more than {max_points} points; "
                                 "use a smaller t or a larger alpha")
        parent = np.repeat(np.arange(len(partial)), counts)
        offset = np.arange(counts.sum()) - np.repeat(np.cumsum(counts) - counts, counts)
        value = offset - room[parent]
        partial = np.column_stack([partial[parent], value])
        used = used[parent] + value.astype(float) ** 2
        keep = used <= radius_sq
        partial, used = partial[keep], used[keep]
    return partial * (alpha / math.sqrt(t))


def nearest_point_labels(coords: np.ndarray, G: np.ndarray) -> np.ndarray:
    r"""Nearest-point partition (Def 3.4): ``j(l) = argmin_j ||g_j - c_l||_2``.

    Ties go to the smallest index, a function of the point alone (Def 3.4, Remark 3.5; required for
    the sensitivity argument of Section 5.7).  Brute force in row chunks.
    """
    if G.shape[1] == 0:
        return np.zeros(len(coords), dtype=np.int64)
    g_sq = np.einsum("ij,ij->i", G, G)
    labels = np.empty(len(coords), dtype=np.int64)
    chunk = max(1, CHUNK_ROWS * 16 // max(1, len(G)))
    for start in range(0, len(coords), chunk):
        c = coords[start:start + chunk]
        labels[start:start + chunk] = np.argmin(g_sq[None, :] - 2 * c @ G.T, axis=1)
    return labels


def equipartition(labels: np.ndarray, k: int, order_key: np.ndarray | None = None) -> tuple[np.ndarray, int]:
    r"""Divide-and-merge equipartition (Section 3.6, Alg 1 step 6).

    With ``q = floor(n/k)``: split every cell ``F_i`` into ``floor(|F_i|/q)`` chunks of
    ``q`` records plus a residual, merge the residuals into ``R`` and split ``R`` into
    chunks of ``q``.  When ``k | n`` there are exactly ``k`` blocks of ``n/k``.  Otherwise
    (Remark 4.2 leaves the details open; this is our extension) the leftover ``< q`` records of ``R`` join the last
    chunk of ``R``, or, if ``R`` has fewer than ``q`` records, the last full chunk: every block has
    between ``q`` and ``2q - 1`` records.

    Parameters
    ----------
    labels : int array (n,)
        Cell of every record (nearest-point partition).
    k : int
        Target number of blocks, ``1 <= k <= n``.
    order_key : array (n,), optional
        Records inside each cell, and inside ``R``, are taken in increasing key order
        (stable); ``None`` keeps the input order ("arbitrary" in the paper).

    Returns
    -------
    blocks : int array (n,)
        Block id of every record, ``0..n_blocks-1``.
    merged_size : int
        Records in the merged set the loss bound pays for (Lemmas 3.8-3.9):
        ``loss_I <= loss_F + merged_size/n``.  It is ``|R|``, or ``|R| + q`` when a
        non-empty ``R`` smaller than ``q`` joins a full chunk.
    """
    n = len(labels)
    q = n // k
    key = np.zeros(n) if order_key is None else np.asarray(order_key, dtype=float)
    order = np.lexsort((key, labels))  # by cell, then key, then input order
    sorted_labels = labels[order]
    starts = np.flatnonzero(np.r_[True, sorted_labels[1:] != sorted_labels[:-1]])
    sizes = np.diff(np.r_[starts, n])
    rank = np.arange(n) - np.repeat(starts, sizes)
    full = np.repeat(sizes // q * q, sizes)
    in_chunk = rank < full
    chunks_before = np.repeat(np.cumsum(sizes // q) - sizes // q, sizes)
    blocks = np.empty(n, dtype=np.int64)
    blocks[order[in_chunk]] = chunks_before[in_chunk] + rank[in_chunk] // q
    n_full = int((sizes // q).sum())
    residual = order[~in_chunk]
    residual = residual[np.argsort(key[residual], kind="stable")]
    blocks[residual] = n_full + _residual_chunks(len(residual), q)
    merged = len(residual) + (q if 0 < len(residual) < q else 0)
    return blocks, merged


def _residual_chunks(size: int, q: int) -> np.ndarray:
    """Chunk ids (relative to ``n_full``) of the merged residual, leftovers appended."""
    n_chunks = size // q
    if n_chunks == 0:
        return np.full(size, -1, dtype=np.int64) if size else np.zeros(0, dtype=np.int64)
    return np.minimum(np.arange(size) // q, n_chunks - 1)


# -- averages ---------------------------------------------------------------------------
def microaggregate(X: np.ndarray, labels: np.ndarray, s: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    r"""Conditional expectation on a partition (4.1): ``w_j = |F_j|/n``, ``y_j = mean of F_j``.

    Empty cells get ``w_j = 0`` and ``y_j = 0``.

    Returns
    -------
    counts : int array (s,)
    weights : array (s,)
    means : array (s, p)
    """
    counts = np.bincount(labels, minlength=s)
    sums = _cell_sums(X, labels, s)
    means = sums / np.maximum(counts, 1)[:, None]
    return counts, counts / len(X), means


def damped_microaggregate(X_scaled: np.ndarray, labels: np.ndarray, s: int, b: float
                          ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    r"""Damped microaggregation (5.4): ``ytilde_j = sum_{i in F_j} xhat_i / max(|F_j|, b)``.

    For **all** ``j = 1..s``, empty cells included (``ytilde_j = 0``); this caps the
    sensitivity at ``2 max||x||/b`` per cell (Lemmas 5.10-5.11).

    Returns
    -------
    counts : int array (s,)
    weights : array (s,)
        ``w_j = |F_j|/n``.
    damped : array (s, p)
    """
    counts = np.bincount(labels, minlength=s)
    damped = _cell_sums(X_scaled, labels, s) / np.maximum(counts, b)[:, None]
    return counts, counts / len(X_scaled), damped


def _cell_sums(X: np.ndarray, labels: np.ndarray, s: int) -> np.ndarray:
    sums = np.zeros((s, X.shape[1]))
    np.add.at(sums, labels, X.astype(float))
    return sums


# -- the Laplace noise of Algorithm 4 step 6, on public lattices ----------------------------
@dataclass(frozen=True)
class LatticeRelease:
    """Noisy values released on the lattice ``2^-k Z`` (:func:`privsyn_core.privacy.noise.lattice_laplace`).

    Attributes
    ----------
    points : int64 array
        The data-side lattice points ``v`` (before the noise; teaching only).
    noisy : int64 array
        ``v + Z``, ``Z`` i.i.d. ``Lap_Z(discrete_scale)``: the release.
    exponent : int
        ``k``.
    discrete_scale : float
        ``sigma``, in steps.
    """

    points: np.ndarray
    noisy: np.ndarray
    exponent: int
    discrete_scale: float

    def values(self) -> np.ndarray:
        """The released values ``2^-k (v + Z)`` as floats (post-processing)."""
        return np.ldexp(self.noisy.astype(float), -self.exponent)


def noisy_weights(sizes: np.ndarray, epsilon: float, rng: np.random.Generator) -> LatticeRelease:
    r"""The cell sizes ``|F_j|`` plus the weight noise of Alg 4 step 6 (``w + rho`` times ``n``), within ``epsilon``
    in floating point.

    [BSV23] adds ``rho_j ~ Lap(2/(n epsilon))`` to ``w_j = |F_j| / n`` (l1 sensitivity ``2/n`` under replace:
    one record leaves a cell and joins one); here the sizes themselves, integers of l1 sensitivity 2, get
    ``Lap_Z(sigma)`` on the lattice ``2^-k Z`` with ``2^-k <= min(1, 2^-20 2/epsilon)``
    (:func:`~privsyn_core.privacy.noise.lattice_exponent`): ``v = |F| 2^k`` lies on it exactly, ``||v - v'||_1 <=
    2^{k+1}`` and ``sigma`` is the least float ``>= 2^{k+1} / epsilon``, so the loss is at most ``epsilon`` exactly
    (:func:`~privsyn_core.privacy.noise.lattice_laplace`).  Dividing the values by ``n`` (public) gives ``w + rho``.
    """
    exponent = noise.lattice_exponent(2 / epsilon)
    points = np.asarray(sizes, dtype=np.int64) << exponent
    noisy, sigma = noise.lattice_laplace(points, Fraction(2 << exponent) / Fraction(epsilon), rng)
    return LatticeRelease(points, noisy, exponent, sigma)


def noisy_centres(X: np.ndarray, labels: np.ndarray, sizes: np.ndarray, b: float, epsilon: float,
                  rng: np.random.Generator) -> LatticeRelease:
    r"""``sqrt(p) (ytilde_j + r_j)`` of Alg 4 step 6 ((5.4); the centres on the ``[0, 1]`` scale), within
    ``epsilon`` in floating point.

    On that scale the damped averages are ``u_ji = sqrt(p) ytilde_ji = C_ji / D_j`` with the integer cell sums
    ``C_ji = sum_{F_j} x_i`` (``x`` Boolean) and ``D_j = max(|F_j|, b)``; their l1 sensitivity under replace is
    ``sqrt(p) 4 sqrt(p) / b = 4p/b`` (Lemmas 5.10-5.11: ``4 sqrt(p)/b`` for ``ytilde``), and [BSV23] adds
    ``Lap(4p / (b epsilon))`` to each (``r_ji ~ Lap(4 sqrt(p) / (b epsilon))``).  Here ``u`` is snapped to the
    lattice ``2^-k Z``, ``2^-k <= 2^-20 min(4p / (b epsilon), 2/b)``: ``q = rint(2^k fl(C/D))``.  ``C`` and ``D``
    are exact floats and IEEE division is correctly rounded, so ``|fl(C/D) - C/D| <= 2^-53`` (``C <= D``);
    ``rint`` moves by at most ``1/2``, hence ``|q - 2^k u| <= 1/2 + 2^{k-53}``.  A replaced record changes ``(C,
    D)`` in at most the ``2p`` coordinates of the cell it leaves and the cell it joins (equal inputs give equal
    floats), so

    .. math:: \|q - q'\|_1 \le 2^k \frac{4p}{b} + 2p\,(1 + 2^{k-52}) =: \Delta_q,

    and ``Lap_Z(sigma)`` with ``sigma`` the least float ``>= Delta_q / epsilon`` spends at most ``epsilon``
    exactly (:func:`~privsyn_core.privacy.noise.lattice_laplace`; Mironov, "On significance of the least
    significant bits for differential privacy", CCS 2012, for why the data side is snapped before the noise).
    The rounding term adds a relative ``b 2^{-k-1} <= 2^-20`` to the scale ``4p / (b epsilon)``.
    """
    X = np.asarray(X)
    p = X.shape[1]
    exponent = noise.lattice_exponent(min(4 * p / (b * epsilon), 2 / b))
    sums = np.zeros((len(sizes), p), dtype=np.int64)
    np.add.at(sums, labels, X.astype(np.int64))
    quotient = sums / np.maximum(sizes, b)[:, None]  # fl(C / D), in [0, 1]
    points = np.rint(np.ldexp(quotient, exponent)).astype(np.int64)
    sensitivity = (Fraction(4 * p) / Fraction(b)) * 2 ** exponent + 2 * p * (1 + Fraction(2) ** (exponent - 52))
    noisy, sigma = noise.lattice_laplace(points, sensitivity / Fraction(epsilon), rng)
    return LatticeRelease(points, noisy.reshape(points.shape), exponent, sigma)


# -- PVEC and PROJ (Algorithms 2-3) -----------------------------------------------------
def bingham_sample(M: np.ndarray, rng: np.random.Generator) -> tuple[np.ndarray, int]:
    r"""One exact draw from the Bingham density ``∝ exp(u^T M u)`` on the unit sphere of ``R^q``.

    Rejection sampling from the angular central Gaussian [KGM13] (exact, as Lemma 5.1 needs): with
    ``a_i = max(mu) - mu_i`` for the eigenvalues ``mu`` of ``M``, solve
    ``sum_i 1/(b + 2 a_i) = 1`` for ``b in [1, q]``, propose ``u = y/||y||`` with
    ``y_i ~ N(0, 1/omega_i)``, ``omega_i = 1 + 2 a_i/b``, and accept when
    ``log U < -sum a_i u_i^2 + (q/2) log(sum omega_i u_i^2) - log M*``,
    ``log M* = -(q-b)/2 + (q/2) log(q/b)``.  Exact (no MCMC), in log space.

    Returns
    -------
    u : array (q,)
        Unit vector in the original coordinates.
    proposals : int
        Number of proposals used (data dependent: a timing side channel the paper does not address).
    """
    q = M.shape[0]
    if q == 1:
        return np.array([1.0 if rng.random() < 0.5 else -1.0]), 1
    mu, W = np.linalg.eigh((M + M.T) / 2)
    a = mu.max() - mu
    b = _acg_b(a)
    omega = 1 + 2 * a / b
    log_bound = -(q - b) / 2 + q / 2 * math.log(q / b)
    proposals = 0
    while True:
        y = rng.standard_normal((_BINGHAM_BATCH, q)) / np.sqrt(omega)
        u = y / np.linalg.norm(y, axis=1, keepdims=True)
        log_ratio = -(u**2) @ a + q / 2 * np.log((u**2) @ omega) - log_bound
        accepted = np.flatnonzero(np.log(rng.random(_BINGHAM_BATCH)) < log_ratio)
        if accepted.size:
            first = accepted[0]
            return W @ u[first], proposals + first + 1
        proposals += _BINGHAM_BATCH


def _acg_b(a: np.ndarray) -> float:
    """Root of ``sum 1/(b + 2 a_i) = 1`` in ``[1, q]`` (the envelope parameter of [KGM13])."""
    q = len(a)
    if not np.any(a > 0):
        return float(q)
    f = lambda b: float(np.sum(1.0 / (b + 2 * a)) - 1.0)
    if f(1.0) == 0.0:
        return 1.0
    if f(float(q)) == 0.0:
        return float(q)
    return brentq(f, 1.0, float(q), xtol=1e-14, rtol=1e-14)


def pvec(A: np.ndarray, Q: np.ndarray, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray, int]:
    r"""PVEC (Algorithm 2) on the subspace ``V = ran(Q)``: a unit ``v in V`` with density
    ``∝ exp(<A v, v>)`` w.r.t. the uniform measure on the sphere of ``V`` (Lemma 5.1).

    Parameters
    ----------
    A : array (p, p), symmetric PSD
    Q : array (p, q)
        Orthonormal basis of ``V``.

    Returns
    -------
    v : array (p,)
    u : array (q,)
        ``v = Q u``.
    proposals : int
    """
    u, proposals = bingham_sample(Q.T @ A @ Q, rng)
    return Q @ u, u, proposals


def complement_basis(u: np.ndarray) -> np.ndarray:
    """Orthonormal basis (q, q-1) of ``u^⊥`` for a unit ``u in R^q`` (Householder reflection)."""
    q = len(u)
    w = u.astype(float).copy()
    w[0] += 1.0 if u[0] >= 0 else -1.0
    H = np.eye(q) - 2.0 * np.outer(w, w) / (w @ w)
    return H[:, 1:]


def proj(A: np.ndarray, t: int, rng: np.random.Generator) -> tuple[np.ndarray, list[int]]:
    r"""PROJ (Algorithm 3): ``t`` successive PVEC draws, each on the orthogonal complement
    ``V_{i}`` of the vectors drawn so far (Lemma 5.3), so ``V = [v_1..v_t]`` is orthonormal
    and ``P = V V^T`` an orthogonal projection of rank ``t``.  If every PVEC call is
    ``beta``-DP, PROJ is ``t beta``-DP (Lemma 5.3).

    Returns
    -------
    V : array (p, t)
    proposals : list of int
        Proposals used per PVEC call.
    """
    p = A.shape[0]
    if not 0 <= t <= p:
        raise ParameterError(f"PROJ needs 0 <= t <= p={p}, got t={t}")
    Q = np.eye(p)
    vectors, proposals = [], []
    for _ in range(t):
        v, u, used = pvec(A, Q, rng)
        vectors.append(v)
        proposals.append(used)
        Q = Q @ complement_basis(u)
    return (np.column_stack(vectors) if vectors else np.zeros((p, 0))), proposals


# -- metric projections (5.5)-(5.6) -----------------------------------------------------
def project_simplex_l1(v: np.ndarray) -> np.ndarray:
    r"""``pi_{Delta,1}(v)``: an l1-nearest point of the probability simplex (5.5).

    Closed form of ``pi_{Delta,1}`` in (5.5)-(5.6): positive part, normalised; uniform when every entry is
    ``<= 0`` (then every point of the simplex is l1-nearest).
    """
    v = np.asarray(v, dtype=float)
    positive = np.maximum(v, 0.0)
    total = positive.sum()
    return positive / total if total > 0 else np.full(len(v), 1.0 / len(v))


def project_box(Y: np.ndarray, lo: float, hi: float) -> np.ndarray:
    """``pi_{K,2}`` for the box ``K = [lo, hi]^p``: coordinatewise clipping (closed form)."""
    return np.clip(Y, lo, hi)


# -- post-processing ---------------------------------------------------------------------
def bootstrap_indices(weights: np.ndarray, m: int, rng: np.random.Generator) -> np.ndarray:
    """``m`` i.i.d. indices with probabilities ``weights`` (renormalised; Sections 4.2, 5.9)."""
    w = np.asarray(weights, dtype=float)
    return rng.choice(len(w), size=m, p=w / w.sum())


def randomized_rounding(U: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    r"""Independent ``Bernoulli(u)`` per coordinate (Section 4.3): unbiased on every
    off-diagonal product (Lemma 4.7).  ``U`` is clipped to ``[0, 1]`` first."""
    U = np.clip(U, 0.0, 1.0)
    return (rng.random(U.shape) < U).astype(np.uint8)


# -- accuracy quantities -----------------------------------------------------------------
def covariance_loss(S: np.ndarray, weights: np.ndarray, means: np.ndarray) -> float:
    r"""``||S - sum_j w_j y_j y_j^T||_F`` (Lemma 3.1), all on the same (scaled) scale."""
    return float(np.linalg.norm(S - (means.T * weights) @ means))


def moment_distance(A: np.ndarray, a: np.ndarray, B: np.ndarray, b: np.ndarray, d: int) -> float:
    r"""``||sum_i a_i A_i^{⊗d} - sum_j b_j B_j^{⊗d}||_2`` (Frobenius) without forming tensors.

    With ``Z = [A; B]`` and ``c = [a; -b]`` it is ``sqrt(c^T (Z Z^T)^{∘d} c)`` (``<u^{⊗d}, v^{⊗d}> = <u, v>^d``).
    Duplicate rows of ``A`` are merged first, so Boolean data costs ``O(unique rows^2)``.
    """
    A, a = _merge_rows(np.asarray(A, dtype=float), np.asarray(a, dtype=float))
    Z = np.vstack([A, np.asarray(B, dtype=float)])
    c = np.concatenate([a, -np.asarray(b, dtype=float)])
    gram = (Z @ Z.T) ** d
    return float(math.sqrt(max(c @ gram @ c, 0.0)))


def _merge_rows(A: np.ndarray, a: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    unique, inverse = np.unique(A, axis=0, return_inverse=True)
    return unique, np.bincount(inverse.ravel(), weights=a, minlength=len(unique))


def tensorization_constant(d: int) -> float:
    r"""``c_d = 2^{d-2}(2^d - d - 1)`` of Thm 3.10 (``c_1 = 0``: means are preserved)."""
    return 0.0 if d == 1 else 2.0 ** (d - 2) * (2**d - d - 1)
