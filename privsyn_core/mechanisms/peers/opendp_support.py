r"""The field's standard beside ours: OpenDP's MST and AIM as optional registered mechanisms.

``opendp_mst`` and ``opendp_aim`` (:mod:`privsyn_core.mechanisms.peers.opendp_peers`) are registered only
when OpenDP with its ``mbi`` extra is importable (``pip install -r requirements-peers.txt``); the
library works without it, and they are then declared missing with :data:`INSTALL_NOTE`
(:func:`privsyn_core.registry.missing_mechanisms`).  OpenDP is imported lazily, inside a run, never when the
registry is discovered.

What a peer sees is what our mechanisms see, from the public schema alone: every numeric column is cut
into ``bins`` equal bins of its public interval ``[lo, hi]`` (values clipped into it, as
:meth:`privsyn_core.Schema.encode` does) and every categorical column keeps its public categories; both
are handed to OpenDP as integer keys ``0..L-1`` (``Context.contingency_table(keys=...)``: the keys are
public, so no key is learnt from the data).  A synthetic bin decodes to a uniform value inside the bin,
a category to itself: post-processing.

Guarantee.  MST (McKenna, Miklau, Sheldon, "Winning the NIST Contest: A scalable and general approach
to differentially private synthetic data", J. Privacy and Confidentiality 2021, Alg. 1) and AIM
(McKenna, Mullins, Sheldon, Miklau, "AIM: an adaptive and iterative mechanism for differentially
private synthetic data", PVLDB 2022, Alg. 1) are stated under rho-zCDP with Gaussian noise.  OpenDP
(0.16, ``opendp.extras.mbi``) runs them under the output measure it is given; with
``loss_of(epsilon=...)`` that is ``max_divergence``, i.e. **pure epsilon-DP**: ``get_associated_metric``
maps it to the L1 metric, the marginals get OpenDP's Laplace noise on integer counts (``then_noise``;
``make_laplace``: "internally, all sampling is done using the discrete Laplace distribution", after
Canonne, Kamath, Steinke 2020) and the selections use ``make_noisy_max`` (McKenna, Sheldon,
"Permute-and-flip", NeurIPS 2020).  So no zCDP-to-DP conversion is involved: the peers here are
epsilon-DP, the same guarantee as ours.  Neighbouring relation as OpenDP defines it: add/remove one
row is ``unit_of(contributions=1)`` (symmetric distance 1), replace-one is ``unit_of(changes=1)``.
OpenDP's compositor refuses any measurement whose privacy map exceeds epsilon, so the whole release is
epsilon-DP; the ledger records OpenDP's own split of epsilon (one-way marginals 1/2, then MST's
selection 1/10 and measurement 9/10 of the rest, or AIM's adaptive rounds), summing exactly to epsilon.

Null cells.  OpenDP adds a null key to every column of a contingency table (its ``_with_null``), so
after noise a synthetic row can hold a null.  A null means "somewhere in the domain": it is filled
with a uniform bin or category (so a numeric value uniform on ``[lo, hi]``), and the number of filled
cells is reported in the release's warnings.  Both are functions of the released rows only.

Randomness.  OpenDP draws its noise from its own cryptographically secure generator, which cannot be
seeded; ``mbi`` samples the rows with numpy's global generator.  A caller's seed therefore replays
only our post-processing (in-bin positions, null filling), never the noise or the rows.
"""

from __future__ import annotations

import importlib.util

import numpy as np

from privsyn_core.errors import ParameterError, PrivsynError
from privsyn_core.privacy.accounting import Ledger, split_epsilon

#: Registry keys of the peers, in display order.
PEERS = ("opendp_mst", "opendp_aim")
#: What the app and the CLI say where OpenDP is missing.
INSTALL_NOTE = ("OpenDP's MST and AIM (the field's standard, pure epsilon-DP) are optional: install them with "
                "`pip install -r requirements-peers.txt` (opendp[mbi]: about 800 MB with jax and polars) and "
                "restart; they then appear beside our mechanisms.")
#: The modules a peer run imports.
REQUIRED_MODULES = ("opendp", "mbi", "polars")
#: Default number of equal bins per numeric column.
DEFAULT_BINS = 16
#: OpenDP's shares of epsilon (``opendp.extras.mbi``, 0.16): one-way marginals of every column first.
ONEWAY_SHARE = 0.5
#: MST's share of the rest spent on measuring the selected 2-way marginals (``MST.measure_split``).
MST_MEASURE_SPLIT = 0.9
#: The sentence every peer release carries about its randomness.
SEED_NOTE = ("OpenDP draws its noise from its own secure generator, which cannot be seeded: a seed replays only "
             "the post-processing (positions inside bins, null filling), not the noise")


def opendp_available() -> bool:
    """Whether OpenDP with its ``mbi`` extra can be imported (checked without importing it)."""
    return all(importlib.util.find_spec(name) is not None for name in REQUIRED_MODULES)


def key_sizes(levels: tuple[int, ...], bins: int) -> list[int]:
    """Number of public keys of every column: its categories, or ``bins`` for a numeric column."""
    return [k if k else bins for k in levels]


def to_codes(unit: np.ndarray, levels: tuple[int, ...], bins: int) -> np.ndarray:
    r"""Integer key of every cell: ``floor(u L)`` capped at ``L - 1`` with ``L`` the column's key count.

    For a numeric column ``u = (x - lo)/(hi - lo)`` clipped into ``[0, 1]``, so the key is the equal bin
    of the public interval; for a categorical column ``u = (i + 1/2)/K`` and the key is ``i``.
    """
    sizes = np.asarray(key_sizes(levels, bins), dtype=np.int64)
    return np.minimum((np.asarray(unit, dtype=float) * sizes).astype(np.int64), sizes - 1)


def from_codes(codes: np.ndarray, levels: tuple[int, ...], bins: int, rng: np.random.Generator) -> np.ndarray:
    """Unit coordinates of released keys: uniform inside a numeric bin, the centre of a category's cell."""
    sizes = np.asarray(key_sizes(levels, bins), dtype=float)
    offset = np.where(np.asarray(levels) > 0, 0.5, rng.random(codes.shape))
    return (codes + offset) / sizes


def fill_nulls(codes: np.ndarray, sizes: list[int], rng: np.random.Generator) -> tuple[np.ndarray, int]:
    """Replace null keys (NaN) by a uniform public key of their column; returns the keys and how many.

    A uniform key of a numeric column then decodes to a uniform value on ``[lo, hi]``.  Applied to the
    released rows only: post-processing.
    """
    codes = np.array(codes, dtype=float)
    holes = np.isnan(codes)
    draws = np.floor(rng.random(codes.shape) * np.asarray(sizes, dtype=float))
    codes[holes] = draws[holes]
    return codes.astype(np.int64), int(holes.sum())


def null_warning(count: int, cells: int) -> str:
    """The release's sentence about the null cells that were filled (a count of released cells)."""
    return (f"{count} of {cells} synthetic cells were null (OpenDP's 'missing' key of every column) and were "
            "filled uniformly within the column's public domain")


def ledger(algorithm: str, epsilon: float) -> Ledger:
    """OpenDP's split of ``epsilon`` for ``algorithm`` (``"mst"`` or ``"aim"``), summing exactly to it.

    OpenDP 0.16 (``make_contingency_table``) spends half of epsilon on the one-way marginals of every
    column; MST then spends 1/10 of the rest on choosing ``d - 1`` edges of a spanning tree by
    report-noisy-max and 9/10 on measuring those 2-way marginals; AIM spends the rest in adaptive rounds
    (select a marginal by noisy max, measure it) under a privacy filter.  OpenDP spends at most each
    share (it steps every share down by a few ulps), and its compositor enforces the total.
    """
    oneway = ("one-way marginals of every column, Laplace noise on integer counts (OpenDP)", ONEWAY_SHARE)
    if algorithm == "mst":
        rest = 1 - ONEWAY_SHARE
        return split_epsilon(epsilon, [
            oneway,
            ("MST edge selection, d-1 rounds of report-noisy-max (OpenDP)", rest * (1 - MST_MEASURE_SPLIT)),
            ("selected 2-way marginals, Laplace noise on integer counts (OpenDP)", rest * MST_MEASURE_SPLIT)])
    return split_epsilon(epsilon, [
        oneway, ("AIM rounds: select a marginal by noisy max, measure it with Laplace noise (OpenDP)",
                 1 - ONEWAY_SHARE)])


#: OpenDP 0.16's own split of MST's selection budget over its ``d - 1`` rounds overshoots by one ulp from
#: ``d = 9`` on (``prior(x / k)`` composed ``k`` times exceeds ``x``), at every epsilon and every ``measure_split``
#: tried; reported upstream as opendp/opendp#2789 ("Budget accounting error in MST and AIM implementation").
#: The failure depends on the public width alone and nothing leaves OpenDP's compositor, so it is refused cleanly.
OPENDP_BUDGET_BUG = ("OpenDP's {algorithm} refused its own budget split on {d} columns (a rounding error in "
                     "OpenDP's accounting, opendp/opendp#2789); use at most 8 columns with this peer, or marginal_tree")


def release_with_opendp(codes: np.ndarray, sizes: list[int], epsilon: float, algorithm: str, neighbouring: str,
                        rows: int | None) -> np.ndarray:
    """Run OpenDP's ``algorithm`` on the integer keys and sample synthetic keys (NaN where null).

    ``rows`` ``None`` samples as many rows as the fitted model's total, a function of the noisy marginals
    (under add/remove the exact count is private).
    """
    import opendp.prelude as dp
    import polars as pl

    dp.enable_features("contrib")
    names = [f"c{j}" for j in range(codes.shape[1])]
    frame = pl.DataFrame({name: codes[:, j] for j, name in enumerate(names)}).lazy()
    unit = dp.unit_of(contributions=1) if neighbouring == "add_remove" else dp.unit_of(changes=1)
    context = dp.Context.compositor(data=frame, privacy_unit=unit, privacy_loss=dp.loss_of(epsilon=epsilon),
                                    split_evenly_over=1)
    keys = {name: list(range(size)) for name, size in zip(names, sizes, strict=True)}
    model = dp.mbi.MST() if algorithm == "mst" else dp.mbi.AIM()
    try:
        table = context.query().select(names).contingency_table(keys=keys, algorithm=model).release()
    except dp.OpenDPException as exc:
        if "insufficient budget" in str(exc):
            raise PrivsynError(OPENDP_BUDGET_BUG.format(algorithm=algorithm.upper(), d=len(names))) from exc
        raise PrivsynError(f"OpenDP's {algorithm.upper()} failed under pure epsilon-DP ({type(exc).__name__}); "
                           "try another epsilon or mechanism") from exc
    if rows is None:
        rows = max(1, round(float(table.model.total)))
    released = table.synthesize(rows, method="sample")
    return np.column_stack([released[name].cast(pl.Float64).to_numpy() for name in names])


def check_columns(unit: np.ndarray, minimum: int, maximum: int | None, name: str) -> None:
    """Refuse a table of the wrong width before OpenDP sees it (the width is public)."""
    d = unit.shape[1]
    if d < minimum or (maximum is not None and d > maximum):
        allowed = f"at least {minimum}" if maximum is None else f"{minimum} to {maximum}"
        raise ParameterError(f"{name} needs {allowed} columns, got {d}")


__all__ = [
    "DEFAULT_BINS",
    "INSTALL_NOTE",
    "PEERS",
    "fill_nulls",
    "from_codes",
    "ledger",
    "opendp_available",
    "release_with_opendp",
    "to_codes",
]
