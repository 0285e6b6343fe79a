r"""epsilon-DP Boolean synthetic data by damped noisy microaggregation ([BSV23] Algorithm 4).

Neighbouring relation: **replace one record, n public** (bounded DP; the proofs of
Thm 5.12 use substitution and ``n`` enters ``t``, ``b`` and the noise scales).  Steps
(Algorithm 4, Theorems 5.12-5.15):

1. ``xhat = x/sqrt(p)`` in ``K = (1/sqrt p)[0,1]^p``; uncentred ``S = (1/n) sum xhat xhat^T``;
2. ``alpha = (log n)^{-1/4}``, ``t = floor(kappa log n/log(7/alpha))``,
   ``b = sqrt(p n^{1-kappa}/epsilon)`` (5.17), from public quantities only;
3. private projection ``V = PROJ((n epsilon/(6t)) S, t)`` (Algorithms 2-3, exact Bingham
   sampling): ``epsilon/3`` (each of the ``t`` PVEC calls has spread ``epsilon/(3t)``: Lemmas 5.1
   and 5.3, Section 5.7); skipped when ``t = 0`` (its ``epsilon/3`` is then unused);
4. lattice covering ``G`` of the unit ball of ``ran(V)`` and nearest-point partition
   ``F_1..F_s`` (ties to the smallest index, a function of the point alone);
5. damped averages ``ytilde_j = sum_{F_j} xhat_i / max(|F_j|, b)`` for **all** ``s`` cells
   (5.4), weights ``w_j = |F_j|/n``;
6. ``rho_j ~ Lap(6/(n epsilon))`` (l1 sensitivity ``2/n``: ``epsilon/3``) and
   ``r_{j,i} ~ Lap(12 sqrt(p)/(b epsilon))`` (l1 sensitivity ``4 sqrt(p)/b``: ``epsilon/3``), both drawn as
   exact discrete Laplace noise on public lattices of step ``<= 2^-20`` of their scale, with the data side on
   (or, for the averages, snapped to) the lattice and the rounding counted in the sensitivity, so that the loss
   holds in floating point (:func:`~privsyn_core.mechanisms.microagg.aggregation.noisy_weights`,
   :func:`~privsyn_core.mechanisms.microagg.aggregation.noisy_centres`);
7. ``wbar = pi_{Delta,1}(w + rho)`` (positive part, normalised; uniform if all ``<= 0``),
   ``ybar_j = clip(ytilde_j + r_j, 0, 1/sqrt p)`` (5.5)-(5.6);
8. post-processing: bootstrap ``m`` indices from ``wbar`` and Bernoulli-round
   ``sqrt(p) ybar``.

The release is ``(wbar_j, sqrt(p) ybar_j)_{j <= s}`` (``unit`` and ``weights``, fixed
length ``s`` including empty cells) and the rows drawn from it.

Parameters beyond the paper: ``t``, ``kappa`` and ``b`` may be overridden.  Any public
``t`` in ``[0, p]``, ``kappa`` in ``(0, 1)`` and ``b > 0`` keeps the privacy proof (it needs
only that they do not depend on the data) and the deterministic bound (5.7); the paper's
rates are stated for its formulas.  With ``kappa = 1/3`` the paper's ``t`` is 1 (``s = 3``
cells) for ``1.5e3 <~ n <~ 7e6``, and the vector noise ``12 p/(b epsilon)`` on the
``[0,1]`` scale exceeds 0.1 unless ``n >~ 5e7`` (p = 10, epsilon = 1): at practical sizes
the output is noise-dominated.

Known limitations (not addressed by the paper): the Bingham sampler of the private PCA is
a float64 rejection sampler (Mironov 2012), and the number of its proposals depends on
the data (a timing side channel).

References
----------
.. [BSV23] M. Boedihardjo, T. Strohmer, R. Vershynin, "Covariance's Loss is Privacy's
   Gain", Found. Comput. Math. (2023), seed 001, Algorithms 2-4, Theorems 5.12-5.15.
"""

from __future__ import annotations

import math
from functools import partial
from typing import Any

import numpy as np

from privsyn_core.data.boolean_codec import strict_boolean_codec
from privsyn_core.mechanisms.base.audit import AuditCase, NeighbourPair
from privsyn_core.mechanisms.base.spec import MechanismSpec, ParamSpec, W1Claim, register
from privsyn_core.mechanisms.microagg.aggregation import (
    BSV23_REFERENCE,
    alg4_params,
    bootstrap_indices,
    damped_microaggregate,
    lattice_covering,
    nearest_point_labels,
    noisy_centres,
    noisy_weights,
    proj,
    project_box,
    project_simplex_l1,
    randomized_rounding,
    resolve_t,
    second_moment,
)
from privsyn_core.privacy.accounting import Ledger, split_epsilon
from privsyn_core.result import MechanismOutput


def group_features(out: MechanismOutput, pair: NeighbourPair) -> np.ndarray:
    """Microaggregation: the largest released group centre coordinate sum, maximum and minimum, and noisy weights.

    The largest per-centre minimum coordinate is the tight one when the changed record's cell is
    the only one (``t = 0``): ``{min_i c_i >= shift}`` has ratio ``exp(sum_i shift_i / scale)``,
    as long as the shift stays below the clip at 1.
    """
    groups = out.diagnostics["groups"]
    centres = np.asarray(groups["centres"], dtype=float).reshape(-1, pair.base.shape[1])
    weights = np.asarray(groups["noisy_weights"], dtype=float)
    return np.array([centres.sum(axis=1).max(), centres.max(), weights.max(), weights.min(),
                     centres.min(axis=1).max()])


def microagg_pair_loss(spec: MechanismSpec, pair: NeighbourPair, epsilon: float, params: dict[str, Any]) -> float:
    """The loss microagg_dp's pair realises: it moves the damped averages of [BSV23] (5.4) (one cell when
    ``t = 0``), snapped to their lattice, by an l1 distance ``Delta`` in steps, far below their sensitivity, so
    the centre stage's discrete Laplace noise of scale ``sigma`` spends ``Delta / sigma``
    (:func:`~privsyn_core.mechanisms.microagg.aggregation.noisy_centres`; the weights of a single cell are
    always 1, and ``t = 0`` skips the projection)."""
    runs = [spec.run(data, epsilon, neighbouring=pair.relation, n_synthetic=None, rng=np.random.default_rng(0),
                     **params).diagnostics["noise"] for data in (pair.base, pair.neighbour)]
    delta = np.abs(runs[1]["centre_points"] - runs[0]["centre_points"]).sum()
    return float(delta) / runs[0]["centre_discrete_scale"]


STAGES = (("private PCA projection PROJ (Alg 3)", 1.0), ("cell weights, Laplace 6/(n eps)", 1.0),
          ("cell averages, Laplace 12 sqrt(p)/(b eps)", 1.0))


def dp_ledger(epsilon: float) -> Ledger:
    """The ledger of every run (its privacy map's value): ``epsilon`` split equally over :data:`STAGES` (Alg 4)."""
    return split_epsilon(epsilon, list(STAGES))


@register(
    "microagg_dp",
    privacy_map=lambda epsilon, neighbouring, params, n, d: dp_ledger(epsilon),
    title="DP Boolean microaggregation (PVEC/PROJ)",
    paper="001, Alg 2-4",
    data_kind="boolean",
    neighbouring=("replace",),
    is_private=True,
    floating_point_exposure="the Bingham sampler of the private PCA (t >= 1) is a float64 rejection sampler",
    floating_point_severity="structure",
    floating_point_plain="the direction the rows are projected on before they are grouped is drawn with random "
                         "noise in floating point; the released group sizes and averages get exact whole-number noise",
    params={
        "kappa": ParamSpec(1 / 3, float, (1e-6, 1 - 1e-6),
                           help="trade-off exponent in (0,1): t = floor(kappa log n/log(7/alpha)) and "
                                "b = sqrt(p n^(1-kappa)/eps); paper (Remark 5.16): 1/3"),
        "t": ParamSpec("paper", int, (0, 64), choices=("paper",),
                       help="dimension of the private PCA subspace; 'paper' = floor(kappa log n/log(7/alpha)), "
                            "which is 1 (3 cells) for 1.5e3 < n < 7e6 at kappa=1/3. Larger t = more cells "
                            "(about (7/alpha)^t), each with its own noise; privacy holds for any t"),
        "b": ParamSpec("paper", float, (1e-9, 1e12), choices=("paper",),
                       help="damping threshold: a cell's sum is divided by max(size, b); vector noise scale is "
                            "12 sqrt(p)/(b eps). 'paper' = sqrt(p n^(1-kappa)/eps). Larger b = less noise, "
                            "more shrinkage of small cells toward 0; privacy holds for any b > 0"),
    },
    guarantee="epsilon-DP (replace one record, n public): private PCA by exact Bingham sampling (eps/3), "
              "Laplace noise on cell weights (eps/3) and on damped cell averages (eps/3)",
    description="Private PCA picks a few directions, records are grouped by a lattice in that subspace, and noisy "
                "group averages and sizes are released and rounded back to 0/1. Needs very large n to beat "
                "simple baselines.",
    codec=partial(strict_boolean_codec, mechanism="microagg_dp"),
    citation=f"{BSV23_REFERENCE}, Alg 2-4",
    order=80,
    w1_claim=W1Claim("measured", "Boedihardjo, Strohmer, Vershynin's Thm 5.13-5.15 bound the error of the low-degree "
                                 "marginals of Boolean data, not W1"),
    audit=AuditCase(n=4, d=2, features=group_features, pair_loss=microagg_pair_loss),
    released=("alpha", "t", "s", "b", "kappa", "weight_noise_scale", "vector_noise_scale", "m"),
)
def microagg_dp(unit: np.ndarray, epsilon: float, *, neighbouring: str, n_synthetic: int | None,
                rng: np.random.Generator, kappa: float, t: int | str, b: float | str,
                size: int | str | None = None) -> MechanismOutput:
    """Algorithm 4 of [BSV23] (see the module docstring)."""
    X = np.asarray(unit)
    n, p = X.shape
    alpha, t_paper, b_paper = alg4_params(n, p, epsilon, kappa)
    t_used, warnings = resolve_t(t, t_paper, p)
    b_used = b_paper if b == "paper" else float(b)
    ledger = dp_ledger(epsilon)
    proj_rng, weight_rng, vector_rng, boot_rng, round_rng = rng.spawn(5)
    scaled = X / math.sqrt(p)

    V, proposals = _private_projection(second_moment(X), n, epsilon, t_used, proj_rng)
    G = lattice_covering(t_used, alpha)
    cells = nearest_point_labels(scaled @ V, G)
    s = len(G)
    sizes, w, damped = damped_microaggregate(scaled, cells, s, b_used)

    weight_scale, vector_scale = 6 / (n * epsilon), 12 * math.sqrt(p) / (b_used * epsilon)
    weights_release = noisy_weights(sizes, ledger[1][1], weight_rng)
    centres_release = noisy_centres(X, cells, sizes, b_used, ledger[2][1], vector_rng)
    noisy_w = weights_release.values() / n  # w + rho
    noisy_u = centres_release.values()  # sqrt(p) (ytilde + r)
    w_bar = project_simplex_l1(noisy_w)
    centres = project_box(noisy_u, 0.0, 1.0)  # sqrt(p) pi_{K,2}(ytilde + r), K = [0, 1/sqrt(p)]^p (5.6)

    m = n if n_synthetic is None else n_synthetic
    rows = randomized_rounding(centres[bootstrap_indices(w_bar, m, boot_rng)], round_rng)
    if t_used == 0:
        warnings.append("t = 0 (n too small for the paper's t): one cell, no projection; the PROJ share "
                        "epsilon/3 is unused and the output is a product of noisy marginals")
    return MechanismOutput(
        unit=centres, weights=w_bar, rows=rows, ledger=ledger,
        diagnostics={"groups": {"sizes": sizes, "centres": centres, "noisy_weights": w_bar, "subspace": V,
                                "covering": G, "raw_noisy_weights": noisy_w},
                     "noise": {"rho": noisy_w - w, "r": noisy_u / math.sqrt(p) - damped, "w": w, "damped": damped,
                               "labels": cells, "centre_points": centres_release.points,
                               "centre_lattice_exponent": centres_release.exponent,
                               "centre_discrete_scale": centres_release.discrete_scale,
                               "bingham_proposals": np.asarray(proposals, dtype=np.int64)}},
        params={"alpha": alpha, "t": t_used, "s": s, "b": b_used, "kappa": kappa,
                "weight_noise_scale": weight_scale, "vector_noise_scale": vector_scale, "m": m},
        warnings=warnings)


def _private_projection(S: np.ndarray, n: int, epsilon: float, t: int, rng: np.random.Generator
                        ) -> tuple[np.ndarray, list[int]]:
    """``PROJ((n eps/(6t)) S, t)`` (Alg 4 step 5); a (p, 0) basis when ``t = 0`` (PROJ is skipped: ``P = 0``)."""
    if t == 0:
        return np.zeros((S.shape[0], 0)), []
    return proj(n * epsilon / (6 * t) * S, t, rng)
