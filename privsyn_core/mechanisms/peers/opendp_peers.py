"""OpenDP's MST and AIM as registered peers (``opendp_mst``, ``opendp_aim``).

See :mod:`privsyn_core.mechanisms.peers.opendp_support`.

Registered only when OpenDP with its ``mbi`` extra is importable, so the library, its registry and
its tests work without it (they are then declared missing, with how to install them).  OpenDP itself is
imported inside a run, never at discovery.

OpenDP 0.16's AIM failed under pure epsilon-DP on most tables of three or more columns (its last round
spent a rounding residue of the budget, asking ``make_noisy_max`` for a negative scale); here it runs as
:func:`~privsyn_core.mechanisms.peers._opendp_aim.finishing_aim_class`, which ends at the residue, on up to
:data:`AIM_MAX_COLUMNS` columns (the widest measured; see docs/opendp_peers.md for its times).
"""

from __future__ import annotations

import numpy as np

from privsyn_core.data.levelled_codec import LevelledCodec
from privsyn_core.mechanisms.base.spec import ParamSpec, register, register_missing
from privsyn_core.mechanisms.peers import opendp_support as peers
from privsyn_core.privacy.accounting import Ledger
from privsyn_core.result import MechanismOutput

#: Widest table ``opendp_aim`` accepts: the widest on which its time was measured (docs/opendp_peers.md).
AIM_MAX_COLUMNS = 14
#: The encoded widths each algorithm takes (least, most): MST's tree needs two columns.
WIDTHS: dict[str, tuple[int, int | None]] = {"mst": (2, None), "aim": (1, AIM_MAX_COLUMNS)}

_BINS = ParamSpec(peers.DEFAULT_BINS, int, (2, 256), help=(
    "equal bins per continuous numeric column, cut from its public bounds (categories and integer columns with at "
    "most 32 values keep one key per value, public atoms one key each). Default 32, measured at eps 1 "
    "(docs/opendp_peers.md): against 16 bins the robust 2-way TVD falls from 0.12 to 0.08 on randhie (14,133 rows) "
    "and from 0.08 to 0.07 on fair, W1 within the spread of OpenDP's runs (AIM on randhie: 0.140 against 0.132)"))
_COMMON = {
    "data_kind": "continuous",
    "neighbouring": ("replace", "add_remove"),
    "is_private": True,
    "params": {"bins": _BINS},
    "codec": LevelledCodec,
    "released": ("bins", "key_sizes"),
    "implemented_by": "OpenDP",
}


def mst_plan(algorithm: str, epsilon: float, d: int) -> peers.MstPlan | None:
    """MST's configuration on ``d`` columns (:func:`~privsyn_core.mechanisms.peers.opendp_support.mst_plan`: epsilon
    and ``d`` only), ``None`` for AIM."""
    return peers.mst_plan(epsilon, d) if algorithm == "mst" else None


def peer_ledger(algorithm: str, epsilon: float, d: int) -> Ledger:
    """The ledger of a run on ``d`` columns, its privacy map's value: OpenDP's split of ``epsilon``
    (:func:`~privsyn_core.mechanisms.peers.opendp_support.ledger`), a function of public inputs only.  A width the
    algorithm does not take (:data:`WIDTHS`) is refused here, before anything is drawn, as the run refuses it."""
    peers.check_width(d, *WIDTHS[algorithm], f"opendp_{algorithm}")
    return peers.ledger(algorithm, epsilon, mst_plan(algorithm, epsilon, d))


def _run(algorithm: str, unit: np.ndarray, epsilon: float, *, neighbouring: str, n_synthetic: int | None,
         rng: np.random.Generator, bins: int, size: int | None, levels: tuple[int, ...] | None,
         atoms: tuple[int, ...] | None) -> MechanismOutput:
    """Keys from the public schema, OpenDP's release, nulls filled, keys decoded (module docstring).

    ``levels``: each column's public levels from :class:`~privsyn_core.data.levelled_codec.LevelledCodec` (0: equal
    ``bins``), ``atoms``: the public atoms of each such column (one key each); None (a caller without the codec,
    e.g. the audits' unit-cube data) means every column is continuous without atoms.
    """
    levels = tuple(levels) if levels is not None else (0,) * unit.shape[1]
    atoms = tuple(atoms) if atoms is not None else (0,) * unit.shape[1]
    sizes = peers.key_sizes(levels, bins, atoms)
    codes = peers.to_codes(unit, levels, bins, atoms)
    # n_synthetic, else n where it is public (replace: size is n), else the model's noisy total
    rows = n_synthetic if n_synthetic is not None else size
    plan = mst_plan(algorithm, epsilon, len(sizes))
    released = peers.release_with_opendp(codes, sizes, epsilon, algorithm, neighbouring, rows=rows, plan=plan)
    keys, nulls = peers.fill_nulls(released, sizes, rng)
    out = peers.from_codes(keys, levels, bins, rng, atoms)
    deviation = peers.mst_deviation(plan, len(sizes)) if plan else []
    return MechanismOutput(
        unit=out, ledger=peer_ledger(algorithm, epsilon, len(sizes)),
        params={"bins": bins, "key_sizes": sizes},
        diagnostics={"null_cells": nulls},
        warnings=[*deviation, peers.null_warning(nulls, keys.size), peers.SEED_NOTE])


if peers.opendp_available():
    @register(
        "opendp_mst",
        title="OpenDP MST (peer: the field's standard)",
        paper="peer: McKenna, Miklau, Sheldon 2021, MST (Alg. 1), as implemented by OpenDP",
        citation=('McKenna, Miklau, Sheldon, "Winning the NIST contest: a scalable and general approach to '
                  'differentially private synthetic data", J. Privacy and Confidentiality 2021, MST, as '
                  "implemented by OpenDP"),
        order=200,
        guarantee=("pure epsilon-DP (OpenDP's max_divergence): Laplace noise on one-way and selected 2-way "
                   "marginals of the public bins, report-noisy-max for the spanning tree"),
        description=("The field's standard: noisy one- and two-way marginals on a spanning tree of the columns, "
                     "a graphical model fitted to them, rows sampled from it. Optional (OpenDP)."),
        privacy_map=lambda epsilon, neighbouring, params, n, d: peer_ledger("mst", epsilon, d),
        **_COMMON,
    )
    def opendp_mst(unit: np.ndarray, epsilon: float, *, neighbouring: str, n_synthetic: int | None,
                   rng: np.random.Generator, bins: int, size: int | None = None,
                   levels: tuple[int, ...] | None = None, atoms: tuple[int, ...] | None = None) -> MechanismOutput:
        peers.check_columns(unit, *WIDTHS["mst"], "opendp_mst")
        return _run("mst", unit, epsilon, neighbouring=neighbouring, n_synthetic=n_synthetic, rng=rng, bins=bins,
                    size=size, levels=levels, atoms=atoms)

    @register(
        "opendp_aim",
        title="OpenDP AIM (peer)",
        paper="peer: McKenna, Mullins, Sheldon, Miklau 2022, AIM (Alg. 1), as implemented by OpenDP",
        citation=('McKenna, Mullins, Sheldon, Miklau, "AIM: an adaptive and iterative mechanism for differentially '
                  'private synthetic data", PVLDB 2022, Alg. 1, as implemented by OpenDP'),
        order=210,
        guarantee=("pure epsilon-DP (OpenDP's max_divergence): Laplace noise on one-way marginals, then adaptive "
                   "rounds of noisy-max selection and Laplace-noised marginals under a privacy filter"),
        description=("Adaptive marginal selection (AIM), fitted by a graphical model; slower than MST (minutes on "
                     f"9-14 columns), at most {AIM_MAX_COLUMNS} columns. Optional (OpenDP)."),
        max_dim=AIM_MAX_COLUMNS,
        privacy_map=lambda epsilon, neighbouring, params, n, d: peer_ledger("aim", epsilon, d),
        **_COMMON,
    )
    def opendp_aim(unit: np.ndarray, epsilon: float, *, neighbouring: str, n_synthetic: int | None,
                   rng: np.random.Generator, bins: int, size: int | None = None,
                   levels: tuple[int, ...] | None = None, atoms: tuple[int, ...] | None = None) -> MechanismOutput:
        peers.check_columns(unit, *WIDTHS["aim"], "opendp_aim")
        return _run("aim", unit, epsilon, neighbouring=neighbouring, n_synthetic=n_synthetic, rng=rng, bins=bins,
                    size=size, levels=levels, atoms=atoms)
else:
    for _name in peers.PEERS:
        register_missing(_name, peers.INSTALL_NOTE)
