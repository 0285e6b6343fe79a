r"""Superregular random walk on [0,1]^d folded along a path (seed 000, Sections 6-7, 9).

Theorem 7.2 and Corollaries 7.3-7.4 of Boedihardjo, Strohmer, Vershynin (2024): quantise
the data to a public delta-net of the metric space, fold the net onto a line along a
Hamiltonian path (Prop. 6.5), run the interval mechanism of ``srw`` on the folded line
and map the result back; round the weights to synthetic rows.

* Net: the centres of the ``M^d`` grid cells, covering radius ``delta = 1/(2M)`` in
  l_inf (``sqrt(d)/(2M)`` in l2, ``d/(2M)`` in l1).  The nearest centre of a point is the
  centre of its cell in every l_p metric.  ``M`` follows Sect. 9:
  ``round((alpha/log^{3/2} alpha)^{1/d})`` with ``alpha = epsilon n`` (``floor(alpha)``
  cells in 1-D), which balances ``delta`` against the walk error of Cor. 9.1; in ``d >= 2``
  raised to at least 2 (3-4 where the noise mass allows, :mod:`privsyn_core.data.layout`), with a
  warning when the net is that coarse.
* Path (``path``): ``"snake"``, the boustrophedon through the cells (length ``(K-1)/M``,
  the space-filling curve of Remark 7.5); or ``"mst"``, the depth-first preorder of a
  minimum spanning tree of the net in the chosen metric (at most ``2 MST <= 2 TSP``,
  Lemma 6.1), optionally shortened by 2-opt.  Both are public: they never read the data.
* Folding positions ``x_k`` are the cumulative step lengths in ``metric``, so the
  folding map is 1-Lipschitz and the line's W1 bounds the W1 in the cube.

Privacy and calibration are those of ``srw`` (module :mod:`privsyn_core.mechanisms.random_walks.srw`):
replace-one with ``alpha = epsilon n`` (the paper), add/remove with a noisy record count
(extension).  The folding path is public, so the walk runs on ``K = M^d`` cells exactly as
in 1-D and the same exact sensitivities hold: the default ``scale="tight"`` (``b = L/2``
under replace, ``1 + L/2`` under add/remove, ``L = ceil(log2 K)``) spends epsilon (attained
for ``K = 2^L``), the paper's ``b = 2L + 1`` (Thm 3.1) under ``epsilon/4`` under replace
(``docs/srw_privacy.md``).  Accuracy (Cor. 9.2):
``E W1 <= C (log^{3/2}(epsilon n) / (epsilon n))^{1/d}`` plus the rounding term ``r diam / m``
(``params["rounding_w1_bound"]``).
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

import numpy as np

from privsyn_core.data.grid import RELEASED_MAX_CELLS, cell_ids, largest_per_axis
from privsyn_core.data.layout import BUDGET_HINT, affordable_noise_mass, coarse_warnings, structured
from privsyn_core.errors import ParameterError
from privsyn_core.mechanisms.base.audit import AuditCase
from privsyn_core.mechanisms.base.rows import RowPlan
from privsyn_core.mechanisms.base.spec import ParamSpec, W1Claim, register_staged
from privsyn_core.mechanisms.base.stages import CellCounts, Stages
from privsyn_core.mechanisms.random_walks import walks
from privsyn_core.mechanisms.random_walks.srw import (
    ROUNDING_PARAM,
    SAMPLE_PARAM,
    SCALE_PARAM,
    WALK_FIELDS,
    WALK_GUARANTEE,
    WALK_REFERENCE,
    Calibration,
    Folding,
    auto_bins,
    calibrate,
    release_path_counts,
    released_line,
    walk_features,
)
from privsyn_core.result import MechanismOutput

#: Snake paths are O(K), the MST path O(K log K) on a neighbour graph; 2-opt costs O(K^2) per pass.
MAX_CELLS = {"snake": 2**21, "mst": 2**18, "mst_2opt": 1024}


@dataclass(frozen=True)
class TspLayout:
    """The public part decided before counting: calibration, folding path, warnings, path time."""

    cal: Calibration
    folding: Folding
    warnings: tuple[str, ...]
    fold_seconds: float


def tsp_layout(n: int, dim: int, epsilon: float, neighbouring: str, params: dict[str, Any]) -> TspLayout:
    """Calibrate (reads the public count ``n``), resolve the bins, fold the grid."""
    path, two_opt = params["path"], params["two_opt"]
    if two_opt and path != "mst":
        raise ParameterError("two_opt improves the MST path only: set path='mst' or two_opt=False")
    cal = calibrate(n, epsilon, neighbouring)
    warnings: list[str] = []
    m_bins = _resolve_bins(params["bins"], cal, dim, "mst_2opt" if two_opt else path, warnings)
    if dim > 1:
        hint = BUDGET_HINT if params["bins"] is None else "use more bins"
        warnings += coarse_warnings([m_bins] * dim, "srw_tsp", hint)
    start = time.perf_counter()
    folding = _fold(m_bins, dim, path, params["metric"], two_opt)
    return TspLayout(cal, folding, tuple(warnings), time.perf_counter() - start)


def tsp_counts(unit: np.ndarray, layout: TspLayout) -> CellCounts:
    """Counts of the ``M^d`` grid cells in row-major order (``x = 1`` joins the last cell)."""
    bins = layout.folding.bins
    return CellCounts.from_dense(np.bincount(cell_ids(unit, bins), minlength=bins ** unit.shape[1]))


def tsp_release(counts: CellCounts, n: int, dim: int, epsilon: float, *, neighbouring: str,
                n_synthetic: int | None, rng: np.random.Generator, layout: TspLayout,
                params: dict[str, Any]) -> tuple[MechanismOutput, RowPlan]:
    """The walk, the W1 projection and the row plan from the cell counts (listed in path order)."""
    folding = layout.folding
    shape = (folding.bins,) * dim
    in_path_order = counts.dense(folding.bins ** dim)[np.ravel_multi_index(tuple(folding.coords.T), shape)]
    out, plan = release_path_counts(in_path_order, dim, layout.cal, folding, n_synthetic=n_synthetic, rng=rng,
                                    neighbouring=neighbouring, scale=params["scale"], rounding=params["rounding"],
                                    sample=params["sample"], timings={"fold": layout.fold_seconds})
    out.diagnostics["net"] = out.diagnostics["path"]
    out.warnings.extend(layout.warnings)
    return out, plan


def _resolve_bins(bins: int | None, cal: Calibration, dim: int, path: str, warnings: list[str]) -> int:
    """Cells per axis: the user's value (checked against the path's cell limit) or the auto rule, capped.

    In ``d >= 2`` the rule's ``M`` is raised to at least 2, and to 3-4 where the walk's noise mass on the
    counts allows (:mod:`privsyn_core.data.layout`, with the count sensitivity over the walk's epsilon as the
    noise scale): the rule gives one cell (a single output row) on wide tables at small ``epsilon n``.
    """
    kind = path if dim > 1 else "snake"  # 1-D always folds in sorted order (the shortest path on a line)
    shown = "path='mst' with two_opt" if kind == "mst_2opt" else f"path={path!r}"
    limit = MAX_CELLS[kind]
    if bins is not None:
        if float(bins) ** dim > limit:
            raise ParameterError(f"srw_tsp with {bins} bins per axis in d={dim} has {float(bins) ** dim:.3g} cells; "
                                 f"{shown} allows at most {limit}: use fewer bins")
        return bins
    auto = auto_bins(cal.alpha, dim)
    if dim > 1:
        auto = structured(auto, affordable_noise_mass(cal.normaliser, dim, cal.walk_epsilon, cal.count_sensitivity),
                          dim)
    capped = max(1, int(np.floor(limit ** (1.0 / dim) + 1e-9)))
    if auto > capped:
        warnings.append(f"resolution capped at {capped} bins per axis ({capped ** dim} cells) for {shown}; "
                        f"the rule asked for {auto}")
        return capped
    return auto


def _fold(bins: int, dim: int, path: str, metric: str, improve: bool) -> Folding:
    """The public folding path through the ``bins^dim`` cells (never reads the data)."""
    if path == "snake" or dim == 1:
        return Folding(walks.snake_order(bins, dim), bins, metric, {"path_kind": "snake"})
    coords = np.stack(np.unravel_index(np.arange(bins ** dim), (bins,) * dim), axis=1)
    centres = walks.grid_centres(coords, bins)
    order, mst_weight = walks.mst_order(centres, metric)
    if improve:
        order = walks.two_opt(order, walks.distance_matrix(centres, metric))
    return Folding(coords[order], bins, metric, {"path_kind": "mst_2opt" if improve else "mst",
                                                 "mst_weight": mst_weight})


STAGES = Stages(layout=tsp_layout, count=tsp_counts, release=tsp_release)


def released_path(release: Any) -> dict[str, np.ndarray] | None:
    """srw_tsp's ``released_geometry``: the folding path rebuilt from public parameters alone.

    The snake path through the ``M^d`` cell centres (``M = params["bins"]``) is a function of public parameters
    only ([BSV] Prop. 6.5 folding; :func:`~privsyn_core.mechanisms.random_walks.walks.snake_order`).  For the MST
    path, whose net is public too but whose tour is not declared released, the released atoms are joined in the
    order they are listed, which is path order.  On one column the path is the interval itself
    (:func:`~privsyn_core.mechanisms.random_walks.srw.released_line`).
    """
    unit = np.asarray(release.unit, dtype=float)
    if unit.ndim != 2 or unit.shape[1] < 2:
        return released_line(release)
    bins = release.params.get("bins")
    if release.params.get("path", "snake") == "snake" and isinstance(bins, (int, np.integer)) \
            and int(bins) ** unit.shape[1] <= RELEASED_MAX_CELLS:
        return {"path": (walks.snake_order(int(bins), unit.shape[1]) + 0.5) / int(bins)}
    return {"path": unit}


SPEC = register_staged(
    "srw_tsp", STAGES,
    citation=f"{WALK_REFERENCE}, Sec 6-7, 9 (Prop 6.5, Thm 7.2, Cor 7.3-7.4, Cor 9.2)",
    order=40,
    w1_claim=W1Claim("theorem", f"{WALK_REFERENCE}, Cor 7.3-7.4, 9.2: E W1 <= C (log^(3/2)(eps n) / (eps n))^(1/d) on"
                                " [0,1]^d, at the paper's walk scale b = 2L + 1 (the default is smaller)"),
    released_geometry=released_path,
    title="Superregular random walk along a folding path (TSP/MST)",
    paper="000, Sec 6-7, 9 (Prop 6.5, Thm 7.2, Cor 7.3-7.4, Cor 9.2)",
    **WALK_FIELDS,
    params={
        "bins": ParamSpec(None, int, (1, 2**22), help="cells per axis M; auto: round((epsilon n / log^1.5(epsilon n))"
                                                     "^(1/d)), floor(epsilon n) in 1-D",
                          limit=lambda d: (min(2**22, largest_per_axis(MAX_CELLS["snake"], d)),
                                           f"at most {MAX_CELLS['snake']:,} cells on path='snake' "
                                           f"({MAX_CELLS['mst']:,} on 'mst')")),
        "path": ParamSpec("snake", str, choices=("snake", "mst"),
                          help="folding path: boustrophedon through the cells, or MST depth-first preorder"),
        "metric": ParamSpec("chebyshev", str, choices=walks.METRICS,
                            help="metric of the cube: chebyshev = l-infinity (the paper's), euclidean, cityblock"),
        "two_opt": ParamSpec(False, bool, help="shorten the MST path by 2-opt (path='mst' only)"),
        "scale": SCALE_PARAM,
        "rounding": ROUNDING_PARAM,
        "sample": SAMPLE_PARAM,
    },
    guarantee=WALK_GUARANTEE.format(result="Thm 7.2"),
    description="Any dimension: fold the grid cells onto a line along a path, add a superregular random walk, "
                "project in W1, map back. Error about (log^1.5(epsilon n)/(epsilon n))^(1/d).",
    audit=AuditCase(d=2, params={"bins": 2, "scale": "tight"}, features=walk_features),
)
