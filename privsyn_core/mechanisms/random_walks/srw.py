r"""Superregular random walk on the interval (seed 000, Sections 3-5, Theorem 5.4).

Boedihardjo, Strohmer, Vershynin, "Private measures, random walks, and synthetic data",
Probab. Theory Relat. Fields (2024), seed 000.

Pipeline (shared with ``srw_tsp``, which only changes the grid and the folding path):

1. quantise the records to ``K`` public cells (Thm 5.4: ``K = floor(alpha)`` on
   ``[0,1]``), listed in a public path order with positions ``x_k`` on a line;
2. add the superregular walk (Thm 3.1) to the cell counts:
   ``noisy = counts + (Delta/epsilon) Z``, ``Delta`` the :math:`\ell_1` change of the
   count vector between neighbours; the signed measure is ``nu = noisy / n`` (Prop. 5.1);
3. project ``nu`` onto probability measures in W1 along the line (Prop. 5.2);
4. round the weights to ``m`` synthetic rows and shuffle them: by default the CDF along the
   path is rounded (W1 cost at most path length / (2m), post-processing not in the
   paper); ``rounding="paper"`` is Cor. 7.3 (cost ``kappa diam <= r diam / m``, which
   needs the paper's ``m = ceil(r diam / delta)``, far more rows than ``n``).

Privacy (derivation: ``docs/srw_privacy.md``).  ``Z`` is the image of ``N = 2^L`` i.i.d.
``Lap(b)`` coefficients under the Haar synthesis map, whose inverse is the analysis map
``lambda`` (Sect. 3.4), so for ``K = N`` the noisy counts ``c + s Z`` have Haar
coefficients ``lambda(c) + s Lap(b)``: a Laplace mechanism on ``lambda(c)`` with loss
exactly ``max ||lambda(c) - lambda(c')||_1 / (s b)`` over neighbours (for ``K < N`` the
output is a prefix of that walk, post-processing, so the loss is at most this).  The
paper's proof bounds it through ``V(z) = ||lambda(z)||_1 / b`` being 1-Lipschitz (3.1),
(5.1) with ``b = 2L + 1`` (Lemma 3.2); the exact sensitivities give ``scale="tight"``
(the default): ``b = L/2`` under replace and ``b = 1 + L/2`` under add/remove, which spend
exactly the declared budget (attained for ``K = 2^L``), where ``b = 2L + 1`` (``scale="paper"``) spends
``epsilon L / (2(2L + 1)) < epsilon/4`` under replace.

* ``replace`` (the paper's relation: one record changed, ``n`` public).  The paper
  works with alpha-metric privacy in TV and sets ``alpha = epsilon n`` (Lemma 4.1:
  neighbouring empirical measures are ``1/n`` apart in TV).  Its noise ``(2/alpha) Z``
  on the measure is ``(2/epsilon) Z`` on the counts, whose :math:`\ell_1` change is 2.
  A change ``e_a - e_c`` has no level-0 coefficient and ``||lambda(e_a - e_c)||_1 <= L``
  (equality when ``a`` and ``c`` lie in different halves of the path), so the loss is
  ``epsilon L / (2b)``: ``epsilon`` for the tight ``b = L/2``.  The bound holds for every
  pair of measures (zero-sum differences), so the alpha-metric privacy in TV of Prop. 5.1
  holds too.
* ``add_remove`` (extension, not in the paper: ``n`` is then private).  The resolution, the
  normaliser and the default output size read the public count ``n~`` that
  :func:`privsyn_core.synthesize` passes as ``size``: the caller's ``public_n`` or a noisy count
  ``n + Lap_Z(1/epsilon_0)`` released as its own ledger stage (:mod:`privsyn_core.engine.pipeline`); the
  walk gets the rest, ``epsilon``, and noise ``(1/epsilon) Z`` on the counts (a count vector
  changes by one unit vector; ``||lambda(e_k)||_1 = 1 + L/2`` for every ``k``), so the walk's
  loss is ``epsilon (1 + L/2) / b``: ``epsilon`` for the tight ``b = 1 + L/2``.

With ``epsilon n < 2`` there is a single cell (``K = 1``): the output is its centre, which
is data-independent; the walk's one coefficient is still drawn so seeded streams stay
aligned (under replace the tight scale of that coefficient is 0: the count ``n`` is public).
The cells, ``K`` and the path are public (they depend on ``n`` only under ``replace``, where
``n`` is public), and empty cells stay on the walk.  Everything after the noise is
post-processing.  Floating point: the walk's coefficients are drawn on a public lattice of step ``2^-k`` with
exact integer discrete Laplace noise (:func:`privsyn_core.mechanisms.random_walks.walks.noisy_walk`; Mironov,
"On significance of the least significant bits for differential privacy", CCS 2012), so the loss above holds
for the floats released, not only in exact arithmetic.

Accuracy (Thm 5.4 with ``alpha = epsilon n``): ``E W1 <= 1/(2K) + 2 beta`` with
``beta = (2/alpha) b sqrt(2(L+1))`` (explicit from the bound (3.2) on ``E S_k^2``, Prop 5.1), i.e.
``O(log^{3/2}(alpha)/alpha)``; the tight scale divides the noise term by ``(2L + 1)/(L/2)``, about 4.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from typing import Any

import numpy as np

from privsyn_core.data.grid import cell_ids
from privsyn_core.errors import ParameterError
from privsyn_core.mechanisms.base.audit import AuditCase, NeighbourPair, cell_features
from privsyn_core.mechanisms.base.rows import JitterPlan, PointPlan, RowPlan
from privsyn_core.mechanisms.base.spec import ParamSpec, W1Claim, register
from privsyn_core.mechanisms.base.stages import EXACT_N
from privsyn_core.mechanisms.random_walks import walks
from privsyn_core.privacy.accounting import Ledger
from privsyn_core.privacy.sensitivity import count_sensitivity
from privsyn_core.result import MechanismOutput

#: Auto resolution cap on the interval (the paper's ``K = floor(alpha)`` of Thm 5.4, capped): accuracy is then
#: limited by ``1/(2 K_max)``.
MAX_AUTO_BINS_1D = 2**18
SCALE_PARAM = ParamSpec("tight", str, choices=("tight", "paper"),
                        help="Laplace scale of the walk: tight b = L/2 (replace) or 1 + L/2 (add/remove), the exact l1 "
                             "sensitivity of the walk's coefficients, spends exactly epsilon; paper b = 2L+1 (Thm 3.1, "
                             "Lemma 3.2) spends less than epsilon/4 under replace with about 4x more noise")
ROUNDING_PARAM = ParamSpec("path", str, choices=("path", "paper"),
                           help="weights to m rows: path = round the CDF along the folding path (W1 <= path "
                                "length/(2m); post-processing, not in the paper); paper = floor, remainder on the "
                                "first atom (Cor 7.3; W1 <= r diam/m, poor unless m >> number of atoms)")
SAMPLE_PARAM = ParamSpec("uniform", str, choices=("uniform", "center"),
                         help="rows uniform inside their cell (default; adds at most delta to W1) or at the net "
                              "points (the paper's output)")
#: The guarantee of both walk mechanisms (srw, srw_tsp); ``{result}`` names the paper's metric-privacy result for
#: the mechanism's path (Prop 5.1 on the interval, Thm 7.2 along a folding path).
WALK_GUARANTEE = ("epsilon-DP: replace-one via alpha = epsilon n metric privacy in TV (Lemma 4.1, {result}); "
                  "add/remove with a public or noisy record count (extension). Default walk scale b = L/2 (replace) "
                  "or 1 + L/2 (add/remove): the exact l1 sensitivity of the walk's coefficients, loss epsilon "
                  "(attained for 2^L cells; docs/srw_privacy.md); scale='paper' (b = 2L+1, Thm 3.1) spends under "
                  "epsilon/4 under replace")
WALK_REFERENCE = ('Boedihardjo, Strohmer, Vershynin, "Private measures, random walks, and synthetic data", '
                  'Probab. Theory Relat. Fields 2024')


def walk_rate(epsilon: float, n: int, d: int) -> float:
    """Shape of the walk mechanisms' expected W1 error, ``(log^{3/2}(epsilon n) / (epsilon n))^{1/d}``.

    Boedihardjo, Strohmer and Vershynin, "Private measures, random walks, and synthetic data", Corollary 9.2
    (the cube ``[0, 1]^d``; Theorem 5.4 on the interval, ``d = 1``), without its unspecified constant ``C``.
    """
    alpha = max(epsilon * n, 2.0)
    return (math.log(alpha) ** 1.5 / alpha) ** (1 / d)


def walk_ledger(epsilon: float, neighbouring: str) -> Ledger:
    """The walk mechanisms' ledger: one stage, the walk at the whole ``epsilon`` under the relation's calibration
    (:func:`calibrate`); a function of public inputs only, their privacy map."""
    if neighbouring == "replace":
        return [("superregular walk on the path (alpha = epsilon n, noise (2/alpha) Z; Prop 5.1, Lemma 4.1)",
                 epsilon)]
    return [("superregular walk on the cell counts, noise Z/epsilon (add/remove extension)", epsilon)]


#: The registration fields srw and srw_tsp share: data, relations, noise, paper, rate, the published outputs, that
#: both read the public record count, and their privacy map (:func:`walk_ledger`).
WALK_FIELDS: dict[str, Any] = {
    "privacy_map": lambda epsilon, neighbouring, params, n, d: walk_ledger(epsilon, neighbouring),
    "data_kind": "continuous",
    "neighbouring": ("replace", "add_remove"),
    "is_private": True,
    "rate": walk_rate,
    "released": ("bins", "cells", "depth", "walk_length", "laplace_scale", "alpha", "delta", "path_length"),
    "uses_n": lambda params: True,
}


@dataclass(frozen=True)
class Calibration:
    """Privacy calibration decided before the cell counts are read.

    Attributes
    ----------
    normaliser : float
        ``n`` (public under replace-one) or the noisy count ``n~`` (add/remove).
    walk_epsilon : float
        Budget of the walk stage.
    count_sensitivity : int
        :math:`\\ell_1` change of the count vector between neighbours (2 or 1).
    ledger : list of (stage, epsilon)
        Every stage, summing exactly to the total epsilon.
    """

    normaliser: float
    walk_epsilon: float
    count_sensitivity: int
    ledger: Ledger

    @property
    def alpha(self) -> float:
        """Metric-privacy parameter of the measure mechanism, ``alpha = epsilon n`` (Lemma 4.1)."""
        return self.walk_epsilon * self.normaliser

    @property
    def count_noise_scale(self) -> float:
        """Multiplier ``s`` of the walk on the counts: ``noisy = counts + s Z``."""
        return self.count_sensitivity / self.walk_epsilon


def calibrate(n: int, epsilon: float, neighbouring: str) -> Calibration:
    """The noise calibration for ``neighbouring`` (see the module docstring).

    ``n`` is the public record count: the exact one under replace-one, else the count
    :func:`privsyn_core.synthesize` passes (the caller's ``public_n`` or a noisy count).
    """
    normaliser = n if neighbouring == "replace" else max(1, n)
    return Calibration(float(normaliser), epsilon, count_sensitivity(neighbouring), walk_ledger(epsilon, neighbouring))


def privacy_loss_bound(cal: Calibration, depth: int, scale: float, neighbouring: str) -> float:
    r"""Worst-case privacy loss of the calibration, ``<= epsilon`` (``docs/srw_privacy.md``).

    The walk's loss is ``epsilon_w S / (Delta b)`` with ``S = max ||lambda(c) - lambda(c')||_1``
    (:func:`privsyn_core.mechanisms.random_walks.walks.coefficient_sensitivity`): ``L`` for a replace-one change
    ``e_a - e_c`` (no level-0 part), ``1 + L/2`` for ``e_k``.  Exact for ``K = 2^L`` cells,
    an upper bound otherwise; 0 when no change moves a coefficient (replace, one cell).
    """
    worst = walks.coefficient_sensitivity(depth, neighbouring)
    walk_loss = cal.walk_epsilon * worst / (cal.count_sensitivity * scale) if worst > 0 else 0.0
    return math.fsum([*(e for _, e in cal.ledger[:-1]), walk_loss])


def auto_bins(alpha: float, dim: int) -> int:
    """Cells per axis: ``floor(alpha)`` in 1-D (Thm 5.4); ``round((alpha / log^{3/2} alpha)^{1/d})`` else (the
    ``delta`` of Cor 9.1)."""
    if dim == 1:
        return int(min(max(1, math.floor(alpha)), MAX_AUTO_BINS_1D))
    if alpha < 3:
        return 1
    return max(1, round((alpha / math.log(alpha) ** 1.5) ** (1.0 / dim)))


@dataclass(frozen=True)
class Folding:
    """A public path through the grid cells.

    Attributes
    ----------
    coords : int array (K, d)
        Cell coordinates in path order.
    bins : int
        Cells per axis ``M``.
    metric : str
    extra : dict
        Path facts for ``params`` (e.g. the MST weight).
    """

    coords: np.ndarray
    bins: int
    metric: str
    extra: dict


def path_counts(unit: np.ndarray, folding: Folding) -> np.ndarray:
    """Records per cell, listed in path order (quantisation (5.5)/(7.2); ``x = 1`` joins the last cell).

    One ``bincount`` of the row-major cell ids (:func:`privsyn_core.data.grid.cell_ids`, chunked: one
    ``int64`` per row), then the ``K`` counts are read in path order; nothing else of the size of the rows.
    """
    shape = (folding.bins,) * unit.shape[1]
    counts = np.bincount(cell_ids(unit, folding.bins), minlength=math.prod(shape))
    return counts[np.ravel_multi_index(tuple(folding.coords.T), shape)]


def release_on_grid(unit: np.ndarray, cal: Calibration, folding: Folding, *, n_synthetic: int | None,
                    rng: np.random.Generator, neighbouring: str, scale: walks.ScaleMode, rounding: str, sample: str,
                    timings: dict[str, float]) -> MechanismOutput:
    """Steps 1-4 of the module docstring on the cells of ``folding`` (shared by srw and srw_tsp)."""
    start = time.perf_counter()
    counts = path_counts(unit, folding)
    timings["quantise"] = time.perf_counter() - start
    out, plan = release_path_counts(counts, unit.shape[1], cal, folding, n_synthetic=n_synthetic, rng=rng,
                                    neighbouring=neighbouring, scale=scale, rounding=rounding, sample=sample,
                                    timings=timings)
    start = time.perf_counter()
    out.rows, out.rows_shuffled = plan.all_rows(), True
    timings["rows"] += time.perf_counter() - start
    return out


def release_path_counts(counts: np.ndarray, dim: int, cal: Calibration, folding: Folding, *,
                        n_synthetic: int | None, rng: np.random.Generator, neighbouring: str, scale: walks.ScaleMode,
                        rounding: str, sample: str, timings: dict[str, float]) -> tuple[MechanismOutput, RowPlan]:
    """Steps 2-4 from the cell counts in path order: the output without rows and its row plan.

    ``scale`` picks the walk's Laplace scale for ``neighbouring``
    (:func:`privsyn_core.mechanisms.random_walks.walks.laplace_scale`).
    """
    bins, metric = folding.bins, folding.metric
    points = walks.grid_centres(folding.coords, bins)
    positions = walks.path_positions(points, metric)

    start = time.perf_counter()
    walk_rng, rows_rng = rng.spawn(2)
    depth = walks.walk_depth(len(counts))
    b = walks.laplace_scale(depth, scale, neighbouring)
    walk = walks.noisy_walk(counts, walk_rng, scale=b, count_sensitivity=cal.count_sensitivity,
                            epsilon=cal.walk_epsilon)
    noisy_counts = walk.noisy_counts(len(counts))
    signed = noisy_counts / cal.normaliser
    timings["walk"] = time.perf_counter() - start

    start = time.perf_counter()
    projected = walks.project_to_probability(signed, positions)
    timings["project"] = time.perf_counter() - start

    start = time.perf_counter()
    m = n_synthetic if n_synthetic is not None else round(cal.normaliser)
    row_counts = walks.round_weights(projected, m) if rounding == "paper" else walks.round_along_path(projected, m)
    plan = _row_plan(points, row_counts, bins, sample, rows_rng)
    timings["rows"] = time.perf_counter() - start

    support = projected > 0
    diam = walks.cube_diameter(dim, metric)
    diagnostics = {
        "path": points, "positions": positions,
        "walk": (noisy_counts - counts) / cal.normaliser, "walk_units": "mass",
        "signed": signed, "projected": projected,
        "cells": {"lo": folding.coords / bins, "hi": (folding.coords + 1) / bins, "true_count": counts,
                  "noisy_count": noisy_counts, "count": row_counts},
        "noise": {"lattice_coefficients": walk.coefficients, "lattice_exponent": walk.exponent,
                  "discrete_scale": walk.discrete_scale, "laplace_scale": b,
                  "count_noise_scale": cal.count_noise_scale},
    }
    params = {
        "bins": bins, "cells": len(counts), "depth": depth, "walk_length": walk.coefficients.shape[-1],
        "laplace_scale": b,
        "alpha": cal.alpha, "delta": walks.covering_radius(bins, dim, metric), "path_length": float(positions[-1]),
        "rounding_w1_bound": _rounding_bound(rounding, projected, m, diam, float(positions[-1])),
        "privacy_loss_bound": privacy_loss_bound(cal, depth, b, neighbouring),
        "m": m, **folding.extra,
    }
    out = MechanismOutput(unit=points[support], weights=projected[support], ledger=list(cal.ledger),
                          diagnostics=diagnostics, params=params, timings=timings)
    return out, plan


def _rounding_bound(rounding: str, weights: np.ndarray, m: int, diam: float, path_length: float) -> float:
    """W1 added by rounding the weights to ``m`` rows: ``kappa diam`` (Cor 7.3) or ``path length / (2m)``."""
    if rounding == "paper":
        return (m - float(np.floor(m * weights).sum())) / m * diam
    return path_length / (2 * m)


def _row_plan(points: np.ndarray, counts: np.ndarray, bins: int, sample: str,
              rng: np.random.Generator) -> RowPlan:
    """Each net point repeated ``counts`` times (optionally jittered in its cell), shuffled."""
    used = counts > 0
    if sample == "uniform":
        return JitterPlan(counts[used], points[used], rng, bins=bins)
    return PointPlan(counts[used], points[used], rng)



def walk_features(out: MechanismOutput, pair: NeighbourPair) -> np.ndarray:
    r"""srw / srw_tsp: :func:`cell_features` and the walk's likelihood-ratio statistic, exact.

    With ``c``, ``c'`` the cell counts of ``D`` and ``D'`` in path order (the auditor builds
    both datasets; the counts are placed by the corners' cells in the diagnostics) and ``mu`` the
    released Haar coefficients of the noisy counts (on the lattice ``2^-k Z``,
    :func:`privsyn_core.mechanisms.random_walks.walks.noisy_walk`),

    .. math:: T = \|\mu - \lambda(c')\|_1 - \|\mu - \lambda(c)\|_1,

    computed in integers on the lattice (:func:`privsyn_core.mechanisms.random_walks.walks.haar_lattice`) and
    scaled by ``2^-k`` (exact in float64).  ``T / (s b)`` is the log-likelihood ratio ``log p_D / p_D'`` of the
    walk for ``K = 2^L`` cells (``docs/srw_privacy.md``), so its tails reach the walk's full privacy loss
    (Neyman-Pearson); it reads no noise scale and is never rounded.
    """
    cells, walk = out.diagnostics["cells"], out.diagnostics["noise"]
    lo, hi = np.asarray(cells["lo"]), np.asarray(cells["hi"])
    origin, far = np.all(lo <= 0.0, axis=1), np.all(hi >= 1.0, axis=1)
    counts = origin * pair.n
    other = counts + far - (origin if pair.relation == "replace" else 0)
    exponent = int(walk["lattice_exponent"])
    points = walks.haar_lattice(np.stack([other, counts]).astype(np.int64), exponent)
    norms = np.abs(np.asarray(walk["lattice_coefficients"]) - points).sum(axis=1)
    return np.append(cell_features(out, pair), np.ldexp(float(norms[0] - norms[1]), -exponent))


def released_line(release: Any) -> dict[str, np.ndarray] | None:
    """srw's ``released_geometry``: on one column the folding path is the interval itself, through the released
    atoms (in path order); ``None`` for a release of more columns."""
    unit = np.asarray(release.unit, dtype=float)
    return {"path": unit} if unit.ndim == 2 and unit.shape[1] == 1 else None


@register(
    "srw",
    released_geometry=released_line,
    citation=f"{WALK_REFERENCE}, Sec 3-5 (Thm 3.1, Prop 5.1-5.2, Thm 5.4)",
    order=30,
    w1_claim=W1Claim("theorem", f"{WALK_REFERENCE}, Thm 5.4: E W1 <= C log^(3/2)(eps n) / (eps n) on the interval, at"
                                " the paper's walk scale b = 2L + 1 (the default b = L/2 or 1 + L/2 is smaller)"),
    title="Superregular random walk on the interval",
    paper="000, Sec 3-5 (Thm 3.1, Prop 5.1-5.2, Thm 5.4)",
    **WALK_FIELDS,
    params={
        "bins": ParamSpec(None, int, (1, 2**22), help="cells K on [0,1]; auto: floor(epsilon n) (Thm 5.4), "
                                                     f"at most {MAX_AUTO_BINS_1D}"),
        "scale": SCALE_PARAM,
        "rounding": ROUNDING_PARAM,
        "sample": SAMPLE_PARAM,
    },
    guarantee=WALK_GUARANTEE.format(result="Prop 5.1"),
    max_dim=1,
    audit=AuditCase(params={"bins": 2, "scale": "tight"}, features=walk_features),
    description="One column: cell counts plus a hierarchical (superregular) random walk, then the closest "
                "probability measure in W1. Error about log^1.5(epsilon n)/(epsilon n).",
)
def srw(unit: np.ndarray, epsilon: float, *, neighbouring: str, n_synthetic: int | None, rng: np.random.Generator,
        bins: int | None, scale: walks.ScaleMode, rounding: str, sample: str,
        size: int | str | None = EXACT_N) -> MechanismOutput:
    """The walk on the interval; ``size`` is the public record count
    (:meth:`privsyn_core.mechanisms.base.stages.Stages.run`)."""
    n, dim = unit.shape
    if dim != 1:
        raise ParameterError(f"srw works on one column, this data has {dim}; use mechanism 'srw_tsp' for d >= 2")
    public_n = n if size == EXACT_N else size
    if not isinstance(public_n, (int, np.integer)):
        raise ParameterError(f"srw reads the record count: size must be a public count, got {size!r}")
    cal = calibrate(int(public_n), epsilon, neighbouring)
    k = bins if bins is not None else auto_bins(cal.alpha, 1)
    folding = Folding(np.arange(k)[:, None], k, "chebyshev", {})
    return release_on_grid(unit, cal, folding, n_synthetic=n_synthetic, rng=rng, neighbouring=neighbouring,
                           scale=scale, rounding=rounding, sample=sample, timings={})
