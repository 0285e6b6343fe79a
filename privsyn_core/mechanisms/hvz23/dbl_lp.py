r"""Bounded-Lipschitz (``d_BL``) linear programs for PSMM ([HVZ23] Alg. 2, Prop. 3.5, App. A.4).

For signed measures on atoms ``y_1..y_m`` of a metric space with diameter ``D`` and the
:math:`\ell_\infty` metric :math:`\rho_{ij} = \|y_i - y_j\|_\infty`,

.. math:: d_{BL}(\mu, \nu) = \sup_{|f_i| \le D,\ f_i - f_j \le \rho_{ij}} \sum_i (\mu_i - \nu_i) f_i

(``||f||_Lip = max(Lip f, ||f||_inf / D) <= 1``; the values on the atoms extend to such an
``f`` on the whole space by McShane's extension clipped to ``[-D, D]``).

Three programs live here, all solved by ``scipy.optimize.linprog(method="highs")`` on
sparse matrices:

* :func:`dbl_distance`: ``d_BL`` itself, the primal LP of [HVZ23] App. A.4.
* :func:`project_dbl`: the **corrected** closest-probability-measure LP, the dual of the primal LP in the
  proof of Prop. 3.5 (``d_BL(tau, nu)`` minimised over probability vectors ``tau``).  Variables: a flow
  ``F_ij >= 0``, a disposal ``v_i >= 0`` and the probability vector ``tau_i >= 0``::

      min  sum_ij rho_ij F_ij + 2 D sum_i v_i
      s.t. sum_j F_ij - sum_j F_ji + v_i + tau_i >= nu_i   (every i),   sum_i tau_i = 1

  Its optimal value is ``d_BL(tau*, nu) + D (nu(Omega) - 1)``.
* :func:`project_dbl_printed`: the LP **as printed** in Alg. 2 (no inflow terms).
  [ERRATUM] It is not the dual of the paper's own primal: without flow conservation
  ``u_ij`` is free mass at cost ``rho_ij`` and the program reduces to
  ``min sum_i min(min_j rho_ij, 2D) (nu_i - tau_i)_+``, which is not ``d_BL``.  Kept only
  so the tests can show the erratum; never used by the mechanism.

Flows may be restricted to a graph's edges (``edges``) when the graph's shortest-path
metric with edge costs ``rho`` equals ``rho`` on all pairs: then a flow along a path
costs exactly the direct distance, so nothing is lost.  On a ``k^d`` grid of equal
cubes this holds for the "king" graph (:func:`king_edges`), with ``(3k-2)^d - k^d``
directed edges instead of ``m(m-1)``.  It does **not** hold for boxes of unequal sides.

On the ``2^d`` grid (``k = 2``) every two cell centres are ``1/2`` apart in :math:`\ell_\infty`, so
the king graph is complete (``2^d (2^d - 1)`` edges).  A transit node (``hub``) at the centre of the
cube, ``1/4`` from every cell centre, makes the star graph (:func:`star_edges`, ``2^{d+1}`` edges) exact:
a flow through the hub costs ``1/4 + 1/4 = 1/2``, the direct distance.  The hub holds no mass (flow
conservation is an equality there).

References
----------
.. [HVZ23] Y. He, R. Vershynin, Y. Zhu, "Algorithmically Effective Differentially
   Private Synthetic Data", COLT 2023 (seed 004).
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp
from scipy.optimize import linprog


@dataclass(frozen=True)
class Projection:
    """Result of :func:`project_dbl` / :func:`project_dbl_printed`.

    Attributes
    ----------
    tau : ndarray (m,)
        Probability vector (clipped at 0 and renormalised after the solve).
    value : float
        Optimal value of the LP (for the corrected LP: ``d_BL(tau, nu) + D (nu(Omega) - 1)``).
    n_flow : int
        Number of flow variables in the LP.
    """

    tau: np.ndarray
    value: float
    n_flow: int


def all_pairs(m: int) -> tuple[np.ndarray, np.ndarray]:
    """Every ordered pair ``(i, j)``, ``i != j``, of ``m`` atoms as two index arrays."""
    tails, heads = np.nonzero(~np.eye(m, dtype=bool))
    return tails, heads


def king_edges(k: int, d: int) -> tuple[np.ndarray, np.ndarray]:
    """Directed "king" edges of the ``k^d`` grid (row-major cell ids).

    Each cell is joined to its up to ``3^d - 1`` neighbours whose integer coordinates
    differ by at most 1 on every axis.  With edge cost = cell side, the shortest-path
    metric is the :math:`\\ell_\\infty` distance between cell centres (so the restricted LP is exact).
    """
    shape = (k,) * d
    coords = np.stack(np.unravel_index(np.arange(k ** d), shape), axis=1)
    tails, heads = [], []
    for offset in itertools.product((-1, 0, 1), repeat=d):
        if not any(offset):
            continue
        target = coords + np.asarray(offset)
        inside = np.all((target >= 0) & (target < k), axis=1)
        tails.append(np.flatnonzero(inside))
        heads.append(np.ravel_multi_index(tuple(target[inside].T), shape))
    return np.concatenate(tails), np.concatenate(heads)


def star_edges(m: int) -> tuple[np.ndarray, np.ndarray]:
    """Directed edges between each of ``m`` atoms and a hub, node ``m`` (both directions)."""
    atoms, hub = np.arange(m), np.full(m, m)
    return np.r_[atoms, hub], np.r_[hub, atoms]


def king_edge_count(k: int, d: int) -> int:
    """Number of directed king edges of the ``k^d`` grid: ``(3k-2)^d - k^d``."""
    return (3 * k - 2) ** d - k ** d


def chebyshev(atoms: np.ndarray, tails: np.ndarray, heads: np.ndarray) -> np.ndarray:
    """:math:`\\ell_\\infty` distance between ``atoms[tails]`` and ``atoms[heads]``."""
    return np.max(np.abs(atoms[tails] - atoms[heads]), axis=1)


def dbl_distance(mu: np.ndarray, nu: np.ndarray, atoms: np.ndarray, *, diam: float = 1.0,
                 edges: tuple[np.ndarray, np.ndarray] | None = None) -> float:
    r"""``d_BL(mu, nu)`` of two signed measures on the same atoms, by the primal LP.

    ``max sum_i (mu_i - nu_i) f_i`` s.t. ``f_i - f_j <= rho_ij`` and ``|f_i| <= diam``
    ([HVZ23] App. A.4, first display).  The feasible set is symmetric under
    ``f -> -f``, so this equals the paper's supremum of the absolute value.

    Parameters
    ----------
    mu, nu : array (m,)
        Masses on the atoms (may be negative, need not sum to 1).
    atoms : array (m, d)
    diam : float
        Diameter of the domain (1 for ``[0,1]^d`` in :math:`\ell_\infty`).
    edges : (tails, heads), optional
        Lipschitz constraints only on these ordered pairs (see the module docstring for
        when that is exact); all ordered pairs when omitted.
    """
    atoms = _as_atoms(atoms)
    gap = np.asarray(mu, dtype=float) - np.asarray(nu, dtype=float)
    m = len(atoms)
    tails, heads = all_pairs(m) if edges is None else edges
    rows = np.arange(len(tails))
    A = sp.csr_matrix((np.r_[np.ones(len(rows)), -np.ones(len(rows))], (np.r_[rows, rows], np.r_[tails, heads])),
                      shape=(len(rows), m))
    result = linprog(-gap, A_ub=A, b_ub=chebyshev(atoms, tails, heads), bounds=(-diam, diam), method="highs")
    _check(result, "d_BL primal")
    return float(-result.fun)


def project_dbl(nu: np.ndarray, atoms: np.ndarray, *, diam: float = 1.0,
                edges: tuple[np.ndarray, np.ndarray] | None = None, hub: np.ndarray | None = None) -> Projection:
    """Closest probability measure to the signed measure ``nu`` in ``d_BL`` (corrected LP).

    Spec B.3.2 (corrected [HVZ23] Alg. 2): flow conservation restored, disposal cost
    ``2 * diam`` summed over all atoms.

    Parameters
    ----------
    nu : array (m,)
        Signed masses on the atoms.
    atoms : array (m, d)
    diam : float
        Diameter of the domain.
    edges : (tails, heads), optional
        Restrict flows to these directed edges (exact when their shortest-path metric
        is the :math:`\\ell_\\infty` metric, e.g. :func:`king_edges` on an equal-cube
        grid); all ordered pairs when omitted.
    hub : array (d,), optional
        A transit point, node ``m`` of ``edges`` (e.g. :func:`star_edges` on the ``2^d`` grid, module
        docstring): flows may pass through it, it holds no mass.

    Returns
    -------
    Projection
        ``tau`` and the optimal value ``d_BL(tau, nu) + diam * (nu.sum() - 1)``.
    """
    atoms = _as_atoms(atoms)
    nu = np.asarray(nu, dtype=float)
    m = len(atoms)
    tails, heads = all_pairs(m) if edges is None else edges
    nodes = atoms if hub is None else np.vstack([atoms, np.asarray(hub, dtype=float)[None, :]])
    flow = _incidence(tails, heads, len(nodes))
    return _solve_projection(nu, flow, chebyshev(nodes, tails, heads), diam)


def project_dbl_printed(nu: np.ndarray, atoms: np.ndarray, *, diam: float = 1.0) -> Projection:
    """The LP exactly as printed in [HVZ23] Alg. 2 (erroneous; for the erratum test only).

    Variables ``u_ij, u'_ij, v_i, tau_i >= 0`` (``i != j``); constraint
    ``sum_j (u_ij - u'_ij) + v_i + tau_i >= nu_i`` with **no inflow terms**; objective
    ``sum rho_ij (u_ij + u'_ij) + 2 diam sum_i v_i`` (the printed objective also drops
    the sum over ``v``; we read it charitably).
    """
    atoms = _as_atoms(atoms)
    nu = np.asarray(nu, dtype=float)
    m = len(atoms)
    tails, heads = all_pairs(m)
    out_only = sp.csr_matrix((np.ones(len(tails)), (tails, np.arange(len(tails)))), shape=(m, len(tails)))
    rho = chebyshev(atoms, tails, heads)
    return _solve_projection(nu, sp.hstack([out_only, -out_only]), np.r_[rho, rho], diam)


def _incidence(tails: np.ndarray, heads: np.ndarray, m: int) -> sp.csr_matrix:
    """Node-arc incidence (m, E): +1 at the tail (outflow), -1 at the head (inflow)."""
    cols = np.arange(len(tails))
    return sp.csr_matrix((np.r_[np.ones(len(cols)), -np.ones(len(cols))], (np.r_[tails, heads], np.r_[cols, cols])),
                         shape=(m, len(tails)))


def _solve_projection(nu: np.ndarray, flow: sp.spmatrix, flow_cost: np.ndarray, diam: float) -> Projection:
    """min cost.flow + 2 diam sum v  s.t.  flow x + v + tau >= nu,  sum tau = 1 (all >= 0).

    Rows of ``flow`` beyond ``len(nu)`` are transit nodes: their net outflow is 0 (equality).
    """
    m = len(nu)
    n_flow = flow.shape[1]
    eye = sp.identity(m, format="csr")
    flow = sp.csr_matrix(flow)
    A_ub = -sp.hstack([flow[:m], eye, eye], format="csr")
    A_eq = sp.csr_matrix((np.ones(m), (np.zeros(m, dtype=np.int64), n_flow + m + np.arange(m))),
                         shape=(1, n_flow + 2 * m))
    transit = flow.shape[0] - m
    if transit:
        A_eq = sp.vstack([A_eq, sp.hstack([flow[m:], sp.csr_matrix((transit, 2 * m))])], format="csr")
    b_eq = np.r_[1.0, np.zeros(transit)]
    cost = np.r_[flow_cost, np.full(m, 2.0 * diam), np.zeros(m)]
    result = linprog(cost, A_ub=A_ub, b_ub=-nu, A_eq=A_eq, b_eq=b_eq, bounds=(0, None), method="highs")
    _check(result, "closest-probability-measure LP")
    tau = np.clip(result.x[n_flow + m:], 0.0, None)  # HiGHS may return -1e-12
    return Projection(tau=tau / tau.sum(), value=float(result.fun), n_flow=int(n_flow))


def _as_atoms(atoms: np.ndarray) -> np.ndarray:
    atoms = np.asarray(atoms, dtype=float)
    return atoms[:, None] if atoms.ndim == 1 else atoms


def _check(result, what: str) -> None:
    if result.status != 0:
        raise RuntimeError(f"{what} did not solve: {result.message}")
