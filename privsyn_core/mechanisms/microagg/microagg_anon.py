r"""Boolean (n/k)-anonymous synthetic data via microaggregation ([BSV23] Algorithm 1, Thm 4.6).

**Not differentially private**: the output is an ``floor(n/k)``-anonymous averaging
(Def 1.6) followed by post-processing.  Steps (Algorithm 1, Theorem 4.6):

1. scale ``xhat = x/sqrt(p)`` (Thm 4.6's renormalisation, missing from the pseudo-code)
   and form the uncentred second moment ``S`` (Alg 1 step 1);
2. ``k' = floor(sqrt k)``, ``alpha = (log log k'/log k')^{1/4}``,
   ``t = floor(log k'/log(7/alpha))`` (step 2; overridable with ``t``);
3. exact PCA: ``V`` = top-``t`` eigenvectors of ``S`` (step 3, Lemma 3.3);
4. lattice covering ``G`` of the unit ball of ``ran(P)`` (step 4, Prop 3.7);
5. nearest-point partition ``F_1..F_s`` of ``V^T xhat`` (step 5, Def 3.4);
6. divide-and-merge equipartition into ``k`` blocks of ``n/k`` (step 6, Section 3.6;
   ``k`` not dividing ``n``: blocks of ``floor(n/k)`` to ``2 floor(n/k) - 1``, Remark 4.2);
7. block averages ``y_j`` of the original rows (step 7): **means are preserved exactly**;
8. bootstrap ``m`` rows from the blocks (weights ``|I_j|/n``) and round each coordinate
   by an independent Bernoulli (Lemma 4.7).

The split order inside a cell is arbitrary in the paper; ``within_cell_order`` chooses it
(our extension): ``"pc"`` (default) sorts the records of each cell, and of the merged
residual, by their score on the next principal component ``U[:, t]``; ``"index"`` keeps
the input order; ``"random"`` shuffles with the run's generator.  Every order is a
refinement covered by the theorem; ``"pc"`` keeps 2-way marginals far better than ``"index"``, because with the
paper's parameters ``t <= 1`` (so ``s <= 3`` cells) for every ``k < 7225``, and the order inside a cell decides
which records are averaged together.

Accuracy (Thm 4.6, d <= p/2): ``E C(p,d)^{-1} sum E^2 <~ 32^d (log log k/log k + 1/m)``;
the run reports constant-free per-run quantities (Lemmas 3.2, 3.3, 3.6, 3.9) in
``diagnostics["groups"]["checks"]``.

References
----------
.. [BSV23] M. Boedihardjo, T. Strohmer, R. Vershynin, "Covariance's Loss is Privacy's
   Gain", Found. Comput. Math. (2023), seed 001, Algorithm 1, Theorems 4.1-4.6.
"""

from __future__ import annotations

import math
from functools import partial

import numpy as np

from privsyn_core.data.boolean_codec import strict_boolean_codec
from privsyn_core.errors import ParameterError
from privsyn_core.mechanisms.base.spec import ParamSpec, W1Claim, register
from privsyn_core.mechanisms.microagg.aggregation import (
    BSV23_REFERENCE,
    alg1_params,
    bootstrap_indices,
    covariance_loss,
    equipartition,
    lattice_covering,
    microaggregate,
    nearest_point_labels,
    randomized_rounding,
    resolve_t,
    second_moment,
    top_eigenvectors,
)
from privsyn_core.privacy.accounting import Ledger
from privsyn_core.result import MechanismOutput

DEFAULT_BLOCK_SIZE = 10


def anon_ledger() -> Ledger:
    """The ledger of every run (its privacy map's value): one stage with no guarantee (an infinite epsilon)."""
    return [("k-anonymous microaggregation (not differentially private)", math.inf)]


@register(
    "microagg_anon",
    privacy_map=lambda epsilon, neighbouring, params, n, d: anon_ledger(),
    title="k-anonymous Boolean microaggregation (not DP)",
    paper="001, Alg 1",
    data_kind="boolean",
    neighbouring=("replace", "add_remove"),
    is_private=False,
    params={
        "k": ParamSpec(None, int, (9, 10**9),
                       help="number of blocks; every released average covers floor(n/k) records "
                            f"(auto: n // {DEFAULT_BLOCK_SIZE}, at least 9)"),
        "t": ParamSpec("paper", int, (0, 64), choices=("paper",),
                       help="PCA dimension of the covering; 'paper' = floor(log k'/log(7/alpha)), which is 1 "
                            "for 100 <= k < 7225 (3 covering cells). Larger t gives more cells; privacy is unaffected "
                            "(there is none), the paper's rate is stated for 'paper'"),
        "within_cell_order": ParamSpec("pc", str, choices=("pc", "index", "random"),
                                       help="order in which each cell is cut into blocks: 'pc' = by the next "
                                            "principal component (most accurate), 'index' = input order, "
                                            "'random' = shuffled"),
    },
    guarantee="NOT differentially private: floor(n/k)-anonymous averaging (each released average covers at least "
              "floor(n/k) records), then bootstrap and randomized rounding",
    description="Groups similar records into blocks of equal size and releases block averages, rounded back to "
                "0/1: means are kept exactly, correlations approximately. Anonymity, not differential privacy.",
    codec=partial(strict_boolean_codec, mechanism="microagg_anon"),
    citation=f"{BSV23_REFERENCE}, Alg 1",
    order=70,
    w1_claim=W1Claim("measured", "Boedihardjo, Strohmer, Vershynin's Thm 4.1-4.6 bound the error of the low-degree "
                                 "marginals of Boolean data, not W1 (and it is not DP)"),
    released=("k", "k_prime", "alpha", "t", "s", "m"),
)
def microagg_anon(unit: np.ndarray, epsilon: float, *, neighbouring: str, n_synthetic: int | None,
                  rng: np.random.Generator, k: int | None, t: int | str, within_cell_order: str,
                  size: int | str | None = None) -> MechanismOutput:
    """Algorithm 1 of [BSV23]; ``epsilon`` is ignored (no privacy budget is used)."""
    X = np.asarray(unit)
    n, p = X.shape
    k = _resolve_k(k, n)
    k_prime, alpha, t_paper = alg1_params(k)
    t_used, warnings = resolve_t(t, t_paper, p)
    order_rng, boot_rng, round_rng = rng.spawn(3)

    S = second_moment(X)
    lam, U = top_eigenvectors(S, p)
    V = U[:, :t_used]
    scaled = X / math.sqrt(p)
    G = lattice_covering(t_used, alpha)
    cells = nearest_point_labels(scaled @ V, G)
    key = _order_key(within_cell_order, scaled, U, t_used, order_rng)
    blocks, merged = equipartition(cells, k, key)
    sizes, weights, centres = microaggregate(X, blocks, int(blocks.max()) + 1)

    m = n if n_synthetic is None else n_synthetic
    rows = randomized_rounding(centres[bootstrap_indices(weights, m, boot_rng)], round_rng)
    checks = _checks(S, lam, V, scaled, cells, len(G), weights, centres / math.sqrt(p), merged, alpha, t_used)
    return MechanismOutput(
        unit=centres, weights=weights, rows=rows,
        ledger=anon_ledger(),
        diagnostics={"groups": {"sizes": sizes, "centres": centres, "noisy_weights": weights, "subspace": V,
                                "covering": G, "cell_sizes": np.bincount(cells, minlength=len(G)),
                                "merged_size": merged, "checks": checks}},
        params={"k": k, "k_prime": k_prime, "alpha": alpha, "t": t_used, "s": len(G), "blocks": len(sizes),
                "anonymity": int(sizes.min()), "m": m},
        warnings=warnings + ["microagg_anon is k-anonymous, not differentially private"])


def _resolve_k(k: int | None, n: int) -> int:
    if n < 9:
        raise ParameterError(f"microagg_anon needs at least 9 records (k >= 9 blocks of >= 1 record), got n={n}")
    if k is None:
        k = max(9, n // DEFAULT_BLOCK_SIZE)
    if k > n:
        raise ParameterError(f"k={k} blocks need at least k records, the data has n={n}; choose k <= n")
    return k


def _order_key(order: str, scaled: np.ndarray, U: np.ndarray, t: int, rng: np.random.Generator) -> np.ndarray | None:
    if order == "index":
        return None
    if order == "random":
        return rng.permutation(len(scaled)).astype(float)
    return scaled @ U[:, t] if t < U.shape[1] else None


def _checks(S, lam, V, scaled, cells, s, weights, centres_scaled, merged, alpha, t) -> dict:
    """Per-run constant-free quantities of the accuracy chain (Lemmas 3.2, 3.3, 3.6, 3.9)."""
    n = len(scaled)
    _, w_f, y_f = microaggregate(scaled, cells, s)
    projected_gap = (scaled - y_f[cells]) @ V
    tail = S - V @ (V.T @ S) - (S @ V) @ V.T + V @ (V.T @ S @ V) @ V.T
    return {"loss_F": covariance_loss(S, w_f, y_f), "loss_I": covariance_loss(S, weights, centres_scaled),
            "merged_fraction": merged / n, "pca_tail": float(np.linalg.norm(tail)),
            "pca_tail_bound": (1.0 / math.sqrt(t)) if t else math.inf,
            "eigen_tail": float(math.sqrt(np.sum(lam[t:] ** 2))),
            "mean_projected_sq": float(np.mean(np.sum(projected_gap**2, axis=1))),
            "max_projected": float(np.max(np.linalg.norm(projected_gap, axis=1))), "two_alpha": 2 * alpha}
