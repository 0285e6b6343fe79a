r"""Private low-dimensional representation: a private subspace, PMM inside it, lifted back to the cube.

He, Strohmer, Vershynin and Zhu [HSVZ23] generate synthetic data for a table in ``[0,1]^d`` in three steps:
a private principal component analysis (a noisy centred covariance matrix and its top ``k`` eigenvectors),
private synthetic data of the data projected onto that ``k``-dimensional affine subspace, and the result mapped
back into the original space.  The error depends on ``k`` and on how far the data lie from a ``k``-dimensional
affine subspace, not on ``d`` in the exponent (docs/lowdim.md).  This module is a pure epsilon-DP version:

1. **Moments** (one release, ``eps_m = moment_share * epsilon``).  Every record ``x`` in ``[0,1]^d`` becomes
   ``y = 2x - 1`` in ``[-1,1]^d``, quantised to integers ``t = rint(m y)`` (``m`` = :data:`QUANTISATION`, public),
   and augmented to ``t~ = (m, t)``.  The query is the vector of the ``d(d+3)/2`` entries ``(a, b)``, ``0 <= a <= b
   <= d``, ``(a, b) != (0, 0)``, of ``sum_i t~_i t~_i^T``: the first moments ``m sum t_j`` and the second moments
   ``sum t_j t_l``, integers.  Each entry gets exact discrete Laplace noise ``Lap_Z(sigma)``,
   ``sigma = m^2 Delta / eps_m`` (:func:`moment_sensitivity`: ``Delta = d(d+3)/2`` under add/remove,
   ``d(d+1)/2 + d(2d+3)/(2(d+1))`` under replace-one, both exact suprema over the cube).  [HSVZ23] release the
   mean and the centred covariance separately (Laplace noise, one share of epsilon each); the augmented matrix
   releases both at once, and centring the cube at its middle halves the entries, so the noise is smaller.
2. **Subspace** (post-processing).  With the public count ``n`` (n under replace-one; ``public_n`` or a noisy
   count under add/remove): the noisy mean ``mu^`` (clipped to the cube) and covariance ``C^`` in the cube's
   coordinates, its eigenvalues ``lambda^_1 >= ... >= lambda^_d`` and eigenvectors.  ``V`` = the top ``k``:
   ``k`` explicit (a public rule), or auto (``None``): the ``k`` minimising a plug-in estimate of the bound below
   with the *noisy* eigenvalues and PMM's rate shape (:func:`choose_k`; post-processing,
   no budget).
3. **Projection to a public box.**  ``z = V^T (x - mu^)``.  For every point of the cube, coordinate ``j`` of ``z``
   lies in ``[lo_j, lo_j + w_j]`` with ``lo_j = sum_i min(-v_ij mu^_i, v_ij (1 - mu^_i))`` and ``w_j = ||v_j||_1``
   (the exact range of ``v_j . (x - mu^)`` over the cube), a function of released values only, tighter than the
   ball of radius ``sqrt(d)`` of [HSVZ23].  ``u = (z - lo) / w`` lies in ``[0,1]^k``.
4. **PMM** ([HVZ23] Alg. 3-4, :mod:`privsyn_core.mechanisms.hvz23.pmm`) on ``u`` with ``eps_p = epsilon - eps_m``.
5. **Lift** (post-processing): ``x' = mu^ + V (lo + w u')``, clipped to ``[0,1]^d`` (the metric projection onto
   the cube, 1-Lipschitz), decoded by the schema.

Privacy: the moment release is ``eps_m``-DP (discrete Laplace, L1 sensitivity ``m^2 Delta``); PMM is ``eps_p``-DP
on the projected data for any fixed released ``(V, mu^)`` (one record changes one projected record, or adds one,
under the same relation); basic composition gives ``eps_m + eps_p = epsilon`` (the ledger, from
:func:`~privsyn_core.privacy.accounting.split_epsilon`).  The pipeline adds a noisy-count stage in front under
add/remove without ``public_n`` (``uses_n``).  All noise is exact integer noise.

Accuracy (docs/lowdim.md, our derivation of the three-term bound of [HSVZ23] for this variant; l2 metric on the
cube, so also for l-infinity): pathwise in the moment noise ``E = C^ - C`` and in expectation over PMM's noise,

.. math:: W_1(\mu_X, \mu_Y) \le \sqrt{\textstyle\sum_{i>k}\lambda_i(C) + 2k\|E\|_{op} + \|\hat\mu - \mu\|_2^2}
          + \|w\|_2\, B_{PMM}(n, \varepsilon_p, k, r),

``B_PMM`` the l-infinity bound of [HVZ23] Thm 4.3 (:func:`~privsyn_core.mechanisms.hvz23.pmm_tree.accuracy_bound`),
``||w||_2 <= sqrt(k d)``.  The first term reads the tail eigenvalues of the true covariance (private), so no
``accuracy_bound`` is released; the second, with ``||w||_2 <= sqrt(k d)``, is released as ``pmm_term_bound`` (a
function of the public count and of ``k``).  ``E ||E||_op <= nu`` with the public :func:`noise_norm_bound`.

Released noisy parameters (``released_noisy``): ``k`` (chosen from the noisy eigenvalues when ``k`` is auto),
``pmm_depth`` and ``pmm_term_bound`` (functions of ``k`` and public values).

References
----------
.. [HSVZ23] Y. He, T. Strohmer, R. Vershynin, Y. Zhu, "Differentially private low-dimensional representation of
   high-dimensional data" (arXiv:2305.17148, 2023; later titled "Differentially Private Low-dimensional Synthetic
   Data from High-dimensional Datasets"): private PCA without a spectral gap, PMM/PSMM in the subspace.
.. [HVZ23] Y. He, R. Vershynin, Y. Zhu, "Algorithmically Effective Differentially Private Synthetic Data",
   COLT 2023 (seed 004): Algorithms 3-4, Theorems 4.1-4.3.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from typing import Any

import numpy as np

from privsyn_core.errors import DataError, ParameterError
from privsyn_core.mechanisms.base.audit import AuditCase, NeighbourPair
from privsyn_core.mechanisms.base.spec import MechanismSpec, ParamSpec, W1Claim, register
from privsyn_core.mechanisms.base.stages import EXACT_N
from privsyn_core.mechanisms.hvz23 import pmm
from privsyn_core.mechanisms.hvz23.pmm_tree import MAX_DEPTH, accuracy_bound
from privsyn_core.privacy.accounting import Ledger, split_epsilon
from privsyn_core.privacy.noise import discrete_laplace
from privsyn_core.result import MechanismOutput

#: Quantisation of ``y = 2x - 1``: ``t = rint(m y)`` in ``{-m..m}`` (public; the error ``1/(4m)`` per coordinate of
#: ``x`` moves the covariance by at most ``d/(2m)`` in operator norm, docs/lowdim.md).
QUANTISATION = 2 ** 10
#: Rows per chunk of the exact moment sums (float64 products of integers below 2^20, so a chunk's sums stay
#: below 2^40 < 2^53 and are exact).
MOMENT_CHUNK = 2 ** 20
#: Largest ``k`` that the automatic choice considers.
AUTO_K_MAX = 8
#: Ledger label prefix of the moment stage (the audit reads this stage).
MOMENT_STAGE = "second moment"
#: A public warning when the moment noise per covariance entry (cube units) exceeds this standard deviation.
NOISY_MOMENT_STD = 0.05


def moment_sensitivity(d: int, neighbouring: str) -> float:
    r"""L1 sensitivity ``Delta`` of the augmented moment vector in units of ``y = 2x - 1`` (multiply by ``m^2``).

    The entries for one record ``y`` in ``[-1,1]^d`` are ``y_j`` (``d`` first moments) and ``y_j y_l``,
    ``j <= l`` (``d(d+1)/2`` second moments).

    * add/remove: a record adds ``sum_j |y_j| + sum_{j<=l} |y_j y_l| <= d + d(d+1)/2 = d(d+3)/2``, attained
      at any corner ``y`` in ``{-1,1}^d``.
    * replace-one: with ``a = y - z``, ``s = y + z`` (so ``|a_j| + |s_j| = 2 max(|y_j|, |z_j|) <= 2``) and
      ``y y^T - z z^T = (a s^T + s a^T)/2``, the change is at most
      ``A + (A S - P)/2 + P`` with ``A = sum |a_j|``, ``S = sum |s_j| <= 2d - A``, ``P = sum |a_j||s_j| <=
      sum |a_j|(2 - |a_j|)``, i.e. ``A + A(2d - A)/2 + sum_j |a_j|(2 - |a_j|)/2``, concave and symmetric in
      ``(|a_j|)``, so maximal at ``|a_j| = alpha`` for all ``j``: ``d alpha + d(d+1) alpha (2 - alpha)/2``,
      maximal at ``alpha = 1 + 1/(d+1)``, which gives ``d(d+1)/2 + d(2d+3)/(2(d+1))``.  Every step is an
      equality at ``y = (1, ..., 1)``, ``z = -y/(d+1)``, so this is the exact supremum.

    On the quantised integers the sensitivity is at most ``m^2 Delta`` (the supremum over a subset).
    """
    if neighbouring == "add_remove":
        return d * (d + 3) / 2
    if neighbouring == "replace":
        return d * (d + 1) / 2 + d * (2 * d + 3) / (2 * (d + 1))
    raise ParameterError(f"unknown neighbouring relation {neighbouring!r}; use 'replace' or 'add_remove'")


def quantise(unit: np.ndarray, m: int = QUANTISATION) -> np.ndarray:
    """``t = rint(m (2x - 1))``: int64 in ``{-m..m}`` (the query's public rounding, applied to every record)."""
    return np.rint((2.0 * unit - 1.0) * m).astype(np.int64)


def moment_sums(t: np.ndarray, m: int = QUANTISATION) -> np.ndarray:
    """The exact integer query: entries ``(a, b)``, ``a <= b``, not ``(0, 0)``, of ``sum_i t~_i t~_i^T``, ``t~=(m,t)``.

    Order: the ``d`` first moments ``m sum_i t_ij``, then the upper triangle of ``sum_i t_i t_i^T`` row by row.
    Sums are taken in float64 chunks of :data:`MOMENT_CHUNK` rows (every partial sum an integer below 2^53, so
    exact) and accumulated in int64.
    """
    d = t.shape[1]
    first = np.zeros(d, dtype=np.int64)
    second = np.zeros((d, d), dtype=np.int64)
    for start in range(0, len(t), MOMENT_CHUNK):
        block = t[start:start + MOMENT_CHUNK].astype(float)
        first += np.rint(block.sum(axis=0)).astype(np.int64)
        second += np.rint(block.T @ block).astype(np.int64)
    upper = np.triu_indices(d)
    return np.concatenate([m * first, second[upper]])


def unpack_moments(vector: np.ndarray, d: int, n: int, m: int = QUANTISATION) -> tuple[np.ndarray, np.ndarray]:
    """Mean and covariance in the cube's coordinates ``x`` from a (noisy) moment vector and the public count.

    ``mean_y = first / (m^2 n)`` clipped to ``[-1,1]^d``; ``second_y`` the symmetric matrix of
    ``second / (m^2 n)``; ``cov_y = second_y - mean_y mean_y^T``; ``x = (y + 1)/2`` gives ``mean = (mean_y + 1)/2``
    and ``cov = cov_y / 4``.
    """
    scale = float(m) * m * max(int(n), 1)
    mean_y = np.clip(vector[:d] / scale, -1.0, 1.0)
    second_y = np.zeros((d, d))
    second_y[np.triu_indices(d)] = vector[d:] / scale
    second_y = second_y + np.triu(second_y, 1).T
    cov_y = second_y - np.outer(mean_y, mean_y)
    return (mean_y + 1.0) / 2.0, cov_y / 4.0


def entry_std(sigma: float, n: int, m: int = QUANTISATION) -> float:
    """Standard deviation of one noisy moment entry in ``y`` units: ``sqrt(Var Lap_Z(sigma)) / (m^2 n)``,
    ``Var Lap_Z(sigma) = 2p/(1-p)^2``, ``p = exp(-1/sigma)``."""
    p = math.exp(-1.0 / sigma)
    return math.sqrt(2.0 * p) / (1.0 - p) / (float(m) * m * max(int(n), 1))


def noise_norm_bound(d: int, s: float, m: int = QUANTISATION) -> float:
    r"""``nu >= E ||C^ - C||_op`` in cube units, from the entry std ``s`` (``y`` units; docs/lowdim.md).

    ``C^_y - C_y = N - (mu^ mu^T - mu mu^T) + (C_q - C)``: ``E||N||_op <= E||N||_F <= d s``;
    ``||mu^ mu^^T - mu mu^T||_op <= 2 sqrt(d) ||mu^ - mu||`` with ``E||mu^ - mu|| <= sqrt(d) s``; the
    quantisation moves the covariance of ``x`` by at most ``d/(2m)``.  In ``x`` units (``/4``):
    ``nu = 3 d s / 4 + d / (2m)``.
    """
    return 3.0 * d * s / 4.0 + d / (2.0 * m)


@dataclass(frozen=True)
class Subspace:
    """The released affine subspace and its public box: ``x = mean + basis (lo + width u)``, ``u`` in ``[0,1]^k``."""

    mean: np.ndarray
    basis: np.ndarray
    lo: np.ndarray
    width: np.ndarray

    @classmethod
    def of(cls, mean: np.ndarray, basis: np.ndarray) -> Subspace:
        """``lo_j = sum_i min(-v_ij mean_i, v_ij (1 - mean_i))``, ``width_j = ||v_j||_1`` (module docstring, 3)."""
        lo = np.minimum(-basis * mean[:, None], basis * (1.0 - mean[:, None])).sum(axis=0)
        return cls(mean, basis, lo, np.abs(basis).sum(axis=0))

    def to_box(self, unit: np.ndarray) -> np.ndarray:
        """``u = (V^T (x - mean) - lo) / width``, clipped to ``[0,1]^k`` (only rounding can leave it)."""
        return np.clip(((unit - self.mean) @ self.basis - self.lo) / self.width, 0.0, 1.0)

    def lift(self, box: np.ndarray) -> np.ndarray:
        """``mean + V (lo + width u)``, clipped to the cube (the metric projection: post-processing)."""
        return np.clip(self.mean + (self.lo + box * self.width) @ self.basis.T, 0.0, 1.0)


def estimated_bound(k: int, eigenvalues: np.ndarray, widths: np.ndarray, mean_error: float, n: int,
                    eps_pmm: float) -> tuple[float, float]:
    """Plug-in estimate of the bound (module docstring) at ``k``: (subspace term, PMM term).

    Subspace term ``sqrt(sum_{i>k} lambda^_i + mean_error)`` with the *noisy* eigenvalues (the bound's ``2 k nu`` is
    Ky Fan's worst case, which would always pick ``k = 1``; noise already inflates the noisy tail); PMM term
    ``||w_{1..k}||_2`` times the shape of PMM's rate in ``k`` dimensions
    (:func:`~privsyn_core.mechanisms.hvz23.pmm.w1_rate`, constant 1: the proven constant of Thm 4.3 is far from
    the measured errors and would always pick ``k = 1``).
    """
    tail = float(np.clip(eigenvalues[k:], 0.0, None).sum())
    pmm_term = float(np.linalg.norm(widths[:k])) * pmm.w1_rate(eps_pmm, max(n, 1), k)
    return math.sqrt(tail + mean_error), pmm_term


def choose_k(eigenvalues: np.ndarray, widths: np.ndarray, mean_error: float, n: int, eps_pmm: float,
             k_max: int = AUTO_K_MAX) -> tuple[int, list[float]]:
    """Automatic ``k``: the ``k`` in ``1..min(d, k_max)`` minimising :func:`estimated_bound` (smallest on ties), and
    the estimates.  A function of the noisy eigenvalues and public values only (post-processing)."""
    top = min(len(eigenvalues), k_max)
    estimates = [sum(estimated_bound(k, eigenvalues, widths, mean_error, n, eps_pmm)) for k in range(1, top + 1)]
    return int(np.argmin(estimates)) + 1, estimates


def _prepare(unit: Any) -> np.ndarray:
    array = np.asarray(unit, dtype=float)
    if array.ndim != 2 or array.shape[1] == 0 or len(array) == 0:
        raise DataError(f"lowdim_pmm needs an (n, d) table with at least one row, got shape {array.shape}")
    if np.isnan(array).any():
        raise DataError("the data contain NaN; drop or impute those rows first")
    return np.clip(array, 0.0, 1.0)


# -- audit: the moment stage, read on the worst-case pair of evaluation/audit.py ---------------------------
def _pair_moments(pair: NeighbourPair) -> tuple[np.ndarray, np.ndarray]:
    return moment_sums(quantise(pair.base)), moment_sums(quantise(pair.neighbour))


def moment_features(out: MechanismOutput, pair: NeighbourPair) -> np.ndarray:
    """Audit features: every noisy moment entry that the pair moves, as ``(noisy - T_D) / (T_D' - T_D)`` (about 0
    under ``D``, 1 under ``D'``), and their minimum: ``{min >= t}`` has likelihood ratio ``exp(sum |shift| / sigma)``,
    the moment stage's whole loss on this pair (discrete Laplace per entry)."""
    before, after = _pair_moments(pair)
    moved = after != before
    noisy = np.asarray(out.diagnostics["moments"]["noisy"], dtype=float)
    ratio = (noisy[moved] - before[moved]) / (after[moved] - before[moved])
    return np.append(ratio, ratio.min())


def moment_pair_loss(spec: MechanismSpec, pair: NeighbourPair, epsilon: float, params: dict[str, Any]) -> float:
    """The loss the audit pair realises on the moment stage: ``||T_D' - T_D||_1 / sigma`` (the origin and the far
    corner: under replace-one only the first moments move, by ``2 m^2`` each, below the supremum ``m^2 Delta``)."""
    before, after = _pair_moments(pair)
    out = spec.run(pair.base, epsilon, neighbouring=pair.relation, n_synthetic=None, rng=np.random.default_rng(0),
                   **params)
    return float(np.abs(after - before).sum()) / out.diagnostics["moments"]["sigma"]


AUDIT_CASE = AuditCase(d=1, params={"k": 1, "depth": 2, "sample": "center"}, features=moment_features,
                       read_stages=(MOMENT_STAGE,), trials=5_000, selection_trials=1_500, tight_coordinates=2,
                       pair_loss=moment_pair_loss)


def lowdim_ledger(epsilon: float, d: int, moment_share: float) -> Ledger:
    """The ledger of a run on ``d`` columns (its privacy map's value): the moment stage's ``moment_share`` of
    ``epsilon``, then PMM in the subspace (its levels' split in ``diagnostics["pmm"]``); basic composition."""
    return split_epsilon(epsilon, [(f"{MOMENT_STAGE}: discrete Laplace on {d * (d + 3) // 2} quantised first "
                                    "and second moments", moment_share),
                                   ("PMM in the private subspace (levels in diagnostics['pmm'])", 1.0 - moment_share)])


@register(
    "lowdim_pmm",
    privacy_map=lambda epsilon, neighbouring, params, n, d: lowdim_ledger(epsilon, d, params["moment_share"]),
    title="Private low-dimensional subspace + PMM",
    paper="He-Strohmer-Vershynin-Zhu 2023 (private PCA) + 004 Alg 3-4 in the subspace",
    data_kind="continuous",
    neighbouring=("replace", "add_remove"),
    is_private=True,
    params={
        "k": ParamSpec(None, int, (1, 64),
                       help="dimension of the private subspace: auto = minimiser of the plug-in bound from the "
                            "noisy eigenvalues (no extra budget), or an integer (capped at the number of columns)"),
        "moment_share": ParamSpec(0.3, float, (0.05, 0.9),
                                  help="share of epsilon for the noisy mean and second-moment matrix; "
                                       "the rest goes to PMM in the subspace"),
        "depth": ParamSpec("paper", int, (0, MAX_DEPTH), choices=("paper", "bound_opt"),
                           help="PMM's tree depth in the subspace: 'paper' = floor(log2(eps_pmm n)), "
                                "'bound_opt', or an integer", limit=pmm.pmm_depth_limit),
        "sample": ParamSpec("uniform", str, choices=("uniform", "center"),
                            help="where PMM puts the points of a leaf of the subspace's box"),
    },
    guarantee="epsilon-DP (replace-one or add/remove): discrete Laplace on the d(d+3)/2 quantised first and second "
              "moments (exact L1 sensitivity per relation), then PMM on the data projected to the noisy top-k "
              "subspace; basic composition, ledger sums to epsilon; under add/remove n is public_n or a noisy count",
    description="Finds a k-dimensional subspace privately (noisy covariance, top eigenvectors), runs PMM on the data "
                "projected into it and maps the points back to the table's box. For wide tables whose columns are "
                "strongly correlated.",
    citation=('He, Strohmer, Vershynin, Zhu, "Differentially private low-dimensional representation of '
              'high-dimensional data", arXiv:2305.17148 (2023); He, Vershynin, Zhu, "Algorithmically Effective '
              'Differentially Private Synthetic Data", COLT 2023, Alg 3-4 in the subspace'),
    order=120,
    w1_claim=W1Claim("derived", "derived in docs/lowdim.md (after He, Strohmer, Vershynin, Zhu's three-term theorem,"
                                " whose text we could not read): W1 <= sqrt(covariance tail + private-PCA error) + "
                                "sqrt(k d) B_PMM; it reads the true covariance's tail, so no rate in n"),
    released=("quantisation", "moment_sensitivity", "moment_sigma", "k_rule"),
    released_noisy=("k", "pmm_depth", "pmm_term_bound"),
    uses_n=lambda params: True,
    audit=AUDIT_CASE,
)
def lowdim_pmm(unit: np.ndarray, epsilon: float, *, neighbouring: str, n_synthetic: int | None,
               rng: np.random.Generator, k: int | None, moment_share: float, depth: int | str, sample: str,
               size: int | str | None = EXACT_N) -> MechanismOutput:
    """Steps 1-5 of the module docstring; ``size`` is the public record count (n for a direct call)."""
    unit = _prepare(unit)
    n_rows, d = unit.shape
    n = n_rows if size == EXACT_N else size
    if not isinstance(n, (int, np.integer)):
        raise ParameterError(f"lowdim_pmm reads the record count: size must be a public count, got {size!r}")
    n = int(n)
    shares = lowdim_ledger(epsilon, d, moment_share)
    eps_m, eps_p = shares[0][1], shares[1][1]
    moment_rng, pmm_rng = rng.spawn(2)
    timings: dict[str, float] = {}
    m = QUANTISATION

    start = time.perf_counter()
    delta = moment_sensitivity(d, neighbouring)
    sigma = m * m * delta / eps_m
    true = moment_sums(quantise(unit, m), m)
    noisy = true + discrete_laplace(sigma, len(true), moment_rng)
    timings["moments"] = time.perf_counter() - start

    start = time.perf_counter()
    mean, cov = unpack_moments(noisy, d, n, m)
    eigenvalues, vectors = np.linalg.eigh(cov)
    order = np.argsort(eigenvalues)[::-1]
    eigenvalues, vectors = eigenvalues[order], vectors[:, order]
    s = entry_std(sigma, n, m)
    nu, mean_error = noise_norm_bound(d, s, m), d * s * s / 4.0
    widths = np.abs(vectors).sum(axis=0)
    if k is None:
        k_used, estimates = choose_k(eigenvalues, widths, mean_error, n, eps_p)
    else:
        k_used, estimates = min(int(k), d), []
    space = Subspace.of(mean, vectors[:, :k_used])
    box = space.to_box(unit)
    timings["subspace"] = time.perf_counter() - start

    start = time.perf_counter()
    inner = pmm.STAGES.run(box, eps_p, neighbouring=neighbouring, n_synthetic=n_synthetic, rng=pmm_rng,
                           size=n, depth=depth, consistency="proportional", sample=sample)
    timings["pmm"] = time.perf_counter() - start
    rows = space.lift(inner.unit)

    pmm_bound = accuracy_bound(max(n, 1), eps_p, k_used, inner.params["depth"], neighbouring)
    pmm_term = float(np.linalg.norm(space.width)) * pmm_bound
    true_mean, true_cov = unpack_moments(true, d, n_rows, m)
    true_eigenvalues = np.sort(np.linalg.eigvalsh(true_cov))[::-1]
    warnings = list(inner.warnings)
    if s / 4.0 > NOISY_MOMENT_STD:  # public: a function of sigma and the public count
        warnings.append(f"lowdim_pmm: the noise on each covariance entry (std {s / 4:.3g} in the cube's units) is "
                        "large against the variances of [0,1] columns (at most 0.25): the subspace is mostly noise; "
                        "raise epsilon or moment_share, or use fewer columns")
    diagnostics = {
        "moments": {"true": true, "noisy": noisy, "sigma": sigma, "sensitivity": m * m * delta, "quantisation": m,
                    "entry_std": s},
        "spectrum": {"noisy": eigenvalues, "true": true_eigenvalues, "noise_norm_bound": nu,
                     "auto_estimates": estimates},
        "subspace": {"mean": mean, "basis": space.basis, "lo": space.lo, "width": space.width,
                     "true_mean": true_mean},
        "bound": {"tail_true": float(true_eigenvalues[k_used:].clip(0).sum()), "noise_norm_bound": nu,
                  "mean_error": mean_error, "pmm_term": pmm_term,
                  "total_expected": math.sqrt(float(true_eigenvalues[k_used:].clip(0).sum()) + 2 * k_used * nu
                                              + mean_error) + pmm_term},
        "pmm": {"ledger": inner.ledger, **inner.diagnostics},
    }
    params = {"k": k_used, "k_rule": "auto" if k is None else "explicit", "quantisation": m,
              "moment_sensitivity": m * m * delta, "moment_sigma": sigma, "pmm_depth": inner.params["depth"],
              "pmm_term_bound": math.sqrt(k_used * d) * pmm_bound, "synthetic_size": len(rows)}
    timings.update({f"pmm.{key}": value for key, value in inner.timings.items()})
    return MechanismOutput(unit=rows, ledger=shares, diagnostics=diagnostics, params=params, timings=timings,
                           warnings=warnings)
