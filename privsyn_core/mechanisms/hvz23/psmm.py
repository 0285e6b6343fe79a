r"""PSMM, the Private Signed Measure Mechanism ([HVZ23] Algorithm 1, with Algorithm 2 corrected).

1. Grid of ``m = k^d`` equal cubes, ``k = max(1, round((epsilon n)^{1/d}))`` (Cor. 3.7 takes
   ``m = ceil(epsilon n)`` equal subcubes), true counts
   ``n_i``, atoms ``y_i`` = cell centres (chosen independently of the data).  The automatic ``k``
   is raised to at least 2 (3-4 where the noise mass allows, :mod:`privsyn_core.data.layout`) and capped
   to the largest grid the LP solves in about 30 s (:func:`largest_fitting_k`), with a warning.
2. Exact discrete Laplace counts ``n_i + lambda_i`` (Alg. 1, "Add noise"):

   * ``neighbouring="replace"`` (n public): one record leaves one cell and enters another,
     :math:`\ell_1` sensitivity 2, so ``lambda_i ~ Lap_Z(2/epsilon)``.  The paper's
     ``Lap_Z(1/epsilon)`` would be ``2 epsilon``-DP here (the proof of Prop. 3.4, App. A.3, changes one count).
   * ``neighbouring="add_remove"``: sensitivity 1, ``lambda_i ~ Lap_Z(1/epsilon)``
     ([HVZ23] Prop. 3.4).

3. Signed measure ``nu_i = (n_i + lambda_i) / N`` with ``N = n`` (``normalise="n"``,
   paper-faithful; under add/remove ``n`` is the public count of :mod:`privsyn_core.engine.pipeline`) or
   ``N = max(1, sum_i (n_i + lambda_i))`` (``normalise="noisy_total"``, post-processing).
4. ``tau = argmin_{probability tau} d_BL(tau, nu)`` by the **corrected** LP, the dual of the primal LP in the
   proof of Prop. 3.5 (:func:`privsyn_core.mechanisms.hvz23.dbl_lp.project_dbl`).  [ERRATUM] The LP printed as
   Alg. 2 has no flow conservation and does not compute ``d_BL``.  On the equal-cube grid the flows are
   restricted to king-graph edges, which is exact (``lp="king"``, also the auto choice
   ``lp=None``/``"auto"``); ``lp="dense"`` uses all pairs.  On the ``2^d`` grid the king graph is
   complete and the exact star through the cube's centre replaces it (``2^{d+1}`` flows), so
   ``k = 2`` fits up to ``d = 14``.
5. Output: weighted atoms ``(y_i, tau_i)`` and ``n_synthetic`` rows by largest-remainder
   rounding of ``n_synthetic * tau`` (not the paper's lcm construction, whose size can be
   astronomically large), uniform inside each cell (``sample="uniform"``) or at the centre.

Privacy: step 2 is the Laplace mechanism on a histogram of a data-independent partition;
steps 3-5 are post-processing.  The grid size ``k`` (when ``cells_per_axis`` is auto), the
normaliser ``N = n`` and the default output size read the record count: under replace-one the
exact ``n`` (public), under add/remove the public count :func:`privsyn_core.synthesize` passes
(the caller's ``public_n`` or a noisy count released as its own ledger stage).

Accuracy ([HVZ23] Thm. 3.6, proof in App. A.5), pathwise:
``W1(mu_X, tau) <= max_i diam(Omega_i) + 2 d_BL(mu_Y, nu)``, with ``mu_Y`` the noiseless
histogram on the centres; in expectation ``C (eps n)^{-1/2}`` (d=1),
``C log(eps n) (eps n)^{-1/2}`` (d=2), ``C (eps n)^{-1/d}`` (d>=3) (Cor. 3.7).

References
----------
.. [HVZ23] Y. He, R. Vershynin, Y. Zhu, "Algorithmically Effective Differentially
   Private Synthetic Data", COLT 2023 (seed 004), Sec. 3, Alg. 1-2, Prop. 3.4-3.5,
   Thm. 3.6, Cor. 3.7.
"""

from __future__ import annotations

import math
import time
from typing import Any

import numpy as np

from privsyn_core.data.grid import cell_boxes, cell_counts, released_grid_cells
from privsyn_core.data.layout import BUDGET_HINT, affordable_noise_mass, coarse_warnings, structured
from privsyn_core.errors import ParameterError
from privsyn_core.mechanisms.base.audit import AuditCase, cell_features
from privsyn_core.mechanisms.base.rows import RowPlan
from privsyn_core.mechanisms.base.spec import ParamSpec, W1Claim, register_staged
from privsyn_core.mechanisms.base.stages import CellCounts, Stages, counts_ledger
from privsyn_core.mechanisms.hvz23.dbl_lp import king_edge_count, king_edges, project_dbl, star_edges
from privsyn_core.mechanisms.hvz23.pmm_tree import HVZ23_REFERENCE
from privsyn_core.privacy.accounting import Ledger
from privsyn_core.privacy.noise import discrete_laplace
from privsyn_core.privacy.sampling import largest_remainder
from privsyn_core.privacy.sensitivity import count_sensitivity
from privsyn_core.result import MechanismOutput

#: Size limits of the LP, set with ``benchmarks/bench_psmm.py --limits`` so that one HiGHS solve at the limit takes
#: about half a minute on a lightly loaded 2-core machine (the solve time grows super-linearly in the cells;
#: docs/performance.md).
MAX_CELLS = 16_384
MAX_KING_FLOWS = 200_000
MAX_DENSE_CELLS = 1_024


#: The public layout of a run: cells per axis ``k``, the LP kind and the layout's warnings.
PsmmLayout = tuple[int, str, tuple[str, ...]]


def psmm_layout(n: int, d: int, epsilon: float, neighbouring: str,
                params: dict[str, Any]) -> PsmmLayout:
    """Cells per axis ``k``, the LP kind and the layout's warnings (public: ``n`` is the public count).

    An explicit ``cells_per_axis`` must fit the LP limits (:func:`check_lp_size`, whose error names the
    largest value that fits).  The automatic ``k`` is :func:`auto_cells_per_axis` raised to at least 2
    and, where the noise mass allows, to 3-4 (:mod:`privsyn_core.data.layout`), then capped to the largest
    ``k`` the LP accepts (:func:`largest_fitting_k`), with a warning.
    """
    lp = params["lp"] or "king"  # auto: the equal-cube grid makes the king graph exact and it is never larger
    if params["cells_per_axis"] is not None:
        k = params["cells_per_axis"]
        check_lp_size(k, d, lp)
        return k, lp, tuple(coarse_warnings([k] * d, "psmm", "use more cells_per_axis"))
    wanted = structured(auto_cells_per_axis(n, d, epsilon),
                        affordable_noise_mass(n, d, epsilon, count_sensitivity(neighbouring)), d)
    k = min(wanted, largest_fitting_k(d, lp))
    warnings = []
    if k < wanted:
        warnings.append(f"psmm: grid capped at {k} cells per axis ({k ** d} cells), the largest its LP solves in "
                        f"about 30 s (lp={lp!r}); the rule asked for {wanted}")
    hint = "pmm scales to any width" if k < wanted else BUDGET_HINT
    return k, lp, tuple(warnings + coarse_warnings([k] * d, "psmm", hint))


def psmm_counts(unit: np.ndarray, layout: PsmmLayout) -> CellCounts:
    """Sparse counts of the ``k^d`` grid cells."""
    return CellCounts.from_dense(cell_counts(unit, layout[0]))


def psmm_release(counts: CellCounts, n: int, d: int, epsilon: float, *, neighbouring: str, n_synthetic: int | None,
                 rng: np.random.Generator, layout: PsmmLayout,
                 params: dict[str, Any]) -> tuple[MechanismOutput, RowPlan]:
    """Noise, signed measure, d_BL projection and the row plan (a function of the counts only)."""
    (k, lp, warnings), normalise, sample = layout, params["normalise"], params["sample"]
    noise_rng, sample_rng = rng.spawn(2)
    timings = {}

    start = time.perf_counter()
    sensitivity = count_sensitivity(neighbouring)
    scale = sensitivity / epsilon
    true_count = counts.dense(k ** d)
    noisy_count = true_count + discrete_laplace(scale, true_count.shape, noise_rng)
    normaliser = float(n) if normalise == "n" else float(max(1, noisy_count.sum()))
    signed = noisy_count / normaliser
    lo, hi = cell_boxes(np.arange(k ** d), k, d)
    centres = (lo + hi) / 2
    timings["counts"] = time.perf_counter() - start

    start = time.perf_counter()
    projection = project_dbl(signed, centres, **lp_graph(k, d, lp))
    tau = projection.tau
    timings["lp"] = time.perf_counter() - start

    total = n_synthetic if n_synthetic is not None else int(normaliser)
    plan = RowPlan.from_counts(largest_remainder(tau, total, sample_rng), lo, hi, sample=sample, rng=sample_rng)
    keep = tau > 0
    out = MechanismOutput(
        unit=centres[keep], weights=tau[keep],
        ledger=psmm_ledger(epsilon, neighbouring, params, n, d),
        diagnostics={"cells": {"lo": lo, "hi": hi, "true_count": true_count, "noisy_count": noisy_count,
                               "count": tau},
                     "signed": signed, "projected": tau},
        params={"cells_per_axis": k, "cells": k ** d, "lp": lp, "noise_scale": scale, "normaliser": normaliser,
                "lp_flow_variables": projection.n_flow, "lp_value": projection.value},
        timings=timings, warnings=list(warnings))
    return out, plan


def w1_rate(epsilon: float, n: int, d: int) -> float:
    """Shape of the expected-W1 bound ([HVZ23] Cor. 3.7): ``(en)^(-1/2)``, ``log(en) (en)^(-1/2)``, ``(en)^(-1/d)``
    for d = 1, 2, >= 3."""
    en = max(epsilon * n, 2.0)
    return en ** -0.5 if d == 1 else (math.log(en) * en ** -0.5 if d == 2 else en ** (-1 / d))


def auto_cells_per_axis(n: int, d: int, epsilon: float) -> int:
    """``k = max(1, round((epsilon n)^{1/d}))``, so ``k^d`` is about ``epsilon n`` (the ``m`` of Cor. 3.7)."""
    return max(1, int(np.round((epsilon * n) ** (1.0 / d))))


def lp_graph(k: int, d: int, lp: str) -> dict[str, Any]:
    """The flow graph of :func:`privsyn_core.mechanisms.hvz23.dbl_lp.project_dbl`: all pairs (dense), the king graph,
    or on the ``2^d`` grid the exact star through a hub at the cube's centre
    (:mod:`privsyn_core.mechanisms.hvz23.dbl_lp`)."""
    if lp == "dense":
        return {}
    if k == 2:
        return {"edges": star_edges(2 ** d), "hub": np.full(d, 0.5)}
    return {"edges": king_edges(k, d)}


def lp_flow_variables(k: int, d: int, lp: str) -> int:
    """Number of flow variables of the projection LP on the ``k^d`` grid."""
    m = k ** d
    if lp == "dense":
        return m * (m - 1)
    return 2 * m if k == 2 else king_edge_count(k, d)


def lp_fits(k: int, d: int, lp: str) -> bool:
    """Whether the LP of the ``k^d`` grid is within :data:`MAX_CELLS` / :data:`MAX_KING_FLOWS` /
    :data:`MAX_DENSE_CELLS`."""
    m = k ** d
    if lp == "dense":
        return m <= MAX_DENSE_CELLS
    return m <= MAX_CELLS and lp_flow_variables(k, d, lp) <= MAX_KING_FLOWS


def largest_fitting_k(d: int, lp: str) -> int:
    """The largest cells per axis whose LP fits (1 when not even 2 does: one cell needs no LP)."""
    k = 1
    while lp_fits(k + 1, d, lp):
        k += 1
    return k


def check_lp_size(k: int, d: int, lp: str) -> None:
    """Refuse grids whose LP would not solve in reasonable time (about 30 s, see ``MAX_*``)."""
    if lp_fits(k, d, lp):
        return
    m, flows = k ** d, lp_flow_variables(k, d, lp)
    limit = (f"at most {MAX_DENSE_CELLS} cells for lp='dense'" if lp == "dense"
             else f"at most {MAX_CELLS} cells and {MAX_KING_FLOWS} flow variables")
    fits = largest_fitting_k(d, lp)
    if fits >= 2:
        advice = f"use cells_per_axis <= {fits}" + (" or lp='king'" if lp == "dense" else "")
    else:
        advice = f"no grid with 2 or more cells per axis fits in d={d}"
    raise ParameterError(
        f"psmm with {k} cells per axis in d={d} has {m} cells and {flows} LP flow variables ({limit}): "
        f"{advice}, or leave cells_per_axis automatic, or use pmm (scales linearly)")


def psmm_ledger(epsilon: float, neighbouring: str, params: dict[str, Any], n: int | None, d: int) -> Ledger:
    """PSMM's privacy map: one stage, the grid's cell counts at the whole ``epsilon`` ([HVZ23] Alg. 1)."""
    return counts_ledger("cell counts", epsilon, neighbouring)


STAGES = Stages(layout=psmm_layout, count=psmm_counts, release=psmm_release)
SPEC = register_staged(
    "psmm", STAGES,
    privacy_map=psmm_ledger,
    title="Private Signed Measure Mechanism (PSMM)",
    paper="004, Alg 1-2",
    data_kind="continuous",
    neighbouring=("replace", "add_remove"),
    is_private=True,
    params={
        "cells_per_axis": ParamSpec(None, int, (1, 16_384),
                                    help="grid cells per axis k (m = k^d cells); auto: round((epsilon n)^(1/d))",
                                    limit=lambda d: (max(largest_fitting_k(d, "king"), largest_fitting_k(d, "dense")),
                                                     f"the projection LP's size (at most {MAX_CELLS:,} cells, "
                                                     f"{MAX_KING_FLOWS:,} flow variables)")),
        "lp": ParamSpec(None, str, choices=("king", "dense"),
                        help="LP flows on neighbouring cells only (king, exact on the grid) or on all pairs "
                             "(dense); auto: king"),
        "normalise": ParamSpec("n", str, choices=("n", "noisy_total"),
                               help="divide noisy counts by n (paper; n public) or by the noisy total"),
        "sample": ParamSpec("uniform", str, choices=("uniform", "center"), help="where rows go inside a cell"),
    },
    guarantee="epsilon-DP: discrete Laplace cell counts (scale 2/epsilon replace-one, 1/epsilon add/remove); "
              "the d_BL projection and sampling are post-processing",
    description="Noisy grid counts form a signed measure; a linear program finds the closest probability "
                "measure in the bounded-Lipschitz distance. Accurate, but the LP limits the grid size.",
    citation=f"{HVZ23_REFERENCE}, Alg 1-2",
    order=20,
    w1_claim=W1Claim("theorem", f"{HVZ23_REFERENCE}, Thm 3.6, Cor 3.7: E W1 <= C (eps n)^(-1/2) for d = 1, C log(eps "
                                "n) (eps n)^(-1/2) for d = 2, C (eps n)^(-1/d) for d >= 3 (about eps n cells)"),
    released_geometry=released_grid_cells("cells_per_axis", "released weight"),
    rate=w1_rate,
    audit=AuditCase(params={"cells_per_axis": 2, "sample": "center"}, features=cell_features, trials=4_000,
                    selection_trials=1_000, tight_coordinates=2),
    released=("cells_per_axis", "cells", "lp", "noise_scale", "normaliser"),
    uses_n=lambda params: params["cells_per_axis"] is None or params["normalise"] == "n",
)
