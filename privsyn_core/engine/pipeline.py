"""The one run sequence below :func:`privsyn_core.synthesize`, shared by the in-memory and the Dask paths.

Both paths call :func:`run_sequence` once their records are checked and encoded (in memory) or counted (on
Dask); what differs between them is passed in as :class:`Records`: how the mechanism reads the records and
how the synthetic rows are materialised.  Every run goes through the same steps:

1. :func:`check_width`: the encoded width against ``MechanismSpec.max_dim``; then the ledger's reservation
   (``before_noise``) is entered, before anything is drawn, and left once the result is assembled (the result
   keeps where its spend is recorded, ``SynthResult.ledger_entry``);
2. :func:`public_size`: the record count the mechanism may read.  Under replace-one ``n`` is public
   (the relation fixes it).  Under add/remove ``n`` is private, so a mechanism that reads it
   (``MechanismSpec.uses_n``) gets the caller's ``public_n`` (a public declaration, which need not be
   exact) or, without one, a noisy count ``max(1, n + Lap_Z(1/epsilon_n))`` released as its own
   ledger stage with the share :data:`SIZE_SHARE` of epsilon; the mechanism runs on the rest.  A
   mechanism that does not read ``n`` costs nothing extra;
3. :func:`planned_ledger`: the mechanism's privacy map (``MechanismSpec.privacy_map``) states its ledger from
   public inputs alone, before it draws anything, and the count's stage and that plan must sum exactly to
   epsilon; then the mechanism (:meth:`Records.release`: its run function in memory, its stages over the
   partitions on Dask) with the user's parameters, the codec's public facts and :func:`size_params`, and
   :func:`check_planned`: the ledger it returns must be that plan, stage for stage (labels and amounts), or
   nothing is released (the reservation stays counted);
4. the synthetic rows (:meth:`Records.synthetic`), decoded with the schema alone (dtypes and integrality are
   public declarations, never read off the input's dtypes);
5. :func:`assemble`: :func:`check_ledger` (the ledger sums exactly to the epsilon claimed) and the
   :class:`SynthResult` whose :meth:`~SynthResult.release` is all that may be published.

The noisy count is the discrete Laplace mechanism on a count of sensitivity 1 under add/remove, so it
is ``epsilon_n``-DP and, by basic composition with the ``(epsilon - epsilon_n)``-DP mechanism, the
whole run is epsilon-DP.  Everything the mechanism derives from it is post-processing.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import Any, NamedTuple, Protocol, TypeVar

import numpy as np
import pandas as pd

from privsyn_core.data.codec import Codec, stage_params as codec_stage_params
from privsyn_core.data.domain import Schema
from privsyn_core.errors import ParameterError
from privsyn_core.mechanisms.base.spec import MechanismSpec
from privsyn_core.mechanisms.base.stages import SIZE_VARIANCE
from privsyn_core.privacy import budget
from privsyn_core.privacy.accounting import Ledger, ledger_total
from privsyn_core.privacy.noise import discrete_laplace, discrete_laplace_variance
from privsyn_core.result import MechanismOutput, SynthResult

#: Share of epsilon spent on the noisy record count under add/remove when no ``public_n`` is given.
SIZE_SHARE = 0.05
#: Share of a column's values outside its public bounds above which the (teaching) warning says so loudly.
CLIP_WARN_SHARE = 0.01


@dataclass(frozen=True)
class Request:
    """The checked arguments of one run (:func:`privsyn_core.synthesize` checks them, in the order its messages
    promise).

    Attributes
    ----------
    spec : MechanismSpec
        The mechanism.
    epsilon : float
        The total budget of the run.
    neighbouring : {"replace", "add_remove"}
        The relation the noise is calibrated for.
    public_n : int or None
        A record count the caller declared public (add/remove only).
    resolved : dict
        The mechanism's parameters, defaults filled in and validated.
    n_synthetic : int or None
        The number of synthetic rows asked for (``None``: the mechanism's default).
    """

    spec: MechanismSpec
    epsilon: float
    neighbouring: str
    public_n: int | None
    resolved: dict[str, Any]
    n_synthetic: int | None


#: What a path's mechanism step hands to its row step: the drawn unit rows in memory, a row plan on Dask.
Drawn = TypeVar("Drawn")


class Synthetic(NamedTuple):
    """A path's synthetic rows (step 4 of the module docstring).

    Attributes
    ----------
    data : DataFrame or Dask DataFrame
        The synthetic table decoded with the schema (lazy on Dask).
    unit_rows : ndarray or None
        The synthetic rows in unit coordinates, when the path holds them (in memory).
    diagnostics : dict
        The path's own teaching diagnostics.
    """

    data: Any
    unit_rows: np.ndarray | None
    diagnostics: dict[str, Any]


class Records(Protocol[Drawn]):
    """The private records of one path, as :func:`run_sequence` reads them.

    Attributes
    ----------
    n : int
        The exact record count (private: only :func:`public_size` and the teaching warnings read it).
    width : int
        The encoded width (public: a function of the schema).
    clipped : dict of str to int
        Values clipped into the public bounds, per column (teaching only); complete once :meth:`release`
        has returned (on Dask the partitions are encoded while they are counted).
    left_out : list of str
        The table's columns that the schema does not have.
    """

    n: int
    width: int
    clipped: dict[str, int]
    left_out: list[str]

    def release(self, request: Request, size: PublicSize, params: dict[str, Any],
                rng: np.random.Generator) -> tuple[MechanismOutput, Drawn]:
        """Step 3: the mechanism on the records with ``size.mechanism_epsilon``; its output and its rows."""
        ...

    def synthetic(self, out: MechanismOutput, drawn: Drawn, rng: np.random.Generator) -> Synthetic:
        """Step 4: the synthetic table from the mechanism's rows (``rng``: the run's generator)."""
        ...


def run_sequence(request: Request, schema: Schema, codec: Codec, records: Records[Drawn], *,
                 rng: np.random.Generator, seed: int | None,
                 before_noise: Callable[[Schema], AbstractContextManager[object]],
                 timings: dict[str, float], domain_policy: dict[str, Any] | None = None) -> SynthResult:
    """Steps 1-5 of the module docstring on either path's records.

    Parameters
    ----------
    request : Request
        The checked arguments.
    schema : Schema
        The public schema; ``codec`` is the mechanism's codec of it.
    records : Records
        The path's records and its two steps (module docstring).
    rng : numpy.random.Generator
        The run's generator (the noisy count, the mechanism, the row order); ``seed`` is the caller's explicit
        seed or ``None``.
    before_noise : callable
        ``before_noise(schema)`` is the ledger's reservation, entered before the first draw and left once the
        result is assembled (a run that fails inside it stays counted).
    timings : dict
        The path's timings so far; ``mechanism``, ``mechanism.*`` and ``decode`` are added (on Dask ``decode``
        builds the lazy table: its rows are decoded when it is computed).
    domain_policy : dict, optional
        Release mode's rule for out-of-domain values (:meth:`privsyn_core.data.conform.DomainPolicy.to_dict`),
        applied to the records before this step and stated in the release.

    Returns
    -------
    SynthResult
        The run's result.
    """
    spec = request.spec
    check_width(spec, records.width)
    with before_noise(schema) as reservation:
        size, params = mechanism_inputs(request, records.n, codec_stage_params(codec), rng)
        plan = planned_ledger(request, size, params, records.width)
        start = time.perf_counter()
        out, drawn = records.release(request, size, params, rng)
        check_planned(spec, out.ledger, plan)
        timings["mechanism"] = time.perf_counter() - start
        timings.update({f"mechanism.{k}": v for k, v in out.timings.items()})
        start = time.perf_counter()
        synthetic = records.synthetic(out, drawn, rng)
        timings["decode"] = time.perf_counter() - start
        result = assemble(spec, out, data=synthetic.data, schema=schema, epsilon=request.epsilon,
                          neighbouring=request.neighbouring, resolved=request.resolved, size=size,
                          n_synthetic=request.n_synthetic, seed=seed, unit_rows=synthetic.unit_rows,
                          clipped=records.clipped, timings=timings, n_records=records.n, left_out=records.left_out,
                          diagnostics=synthetic.diagnostics, domain_policy=domain_policy)
    result.ledger_entry = reservation.entry if isinstance(reservation, budget.Reservation) else None
    return result


def mechanism_inputs(request: Request, n: int, codec_params: dict[str, Any],
                     rng: np.random.Generator) -> tuple[PublicSize, dict[str, Any]]:
    """Step 2 of the module docstring and the parameters of step 3: the public count (:func:`public_size`) and
    what the mechanism runs with (the user's parameters, the codec's public facts ``codec_params`` and
    :func:`size_params`).  Shared by both paths and the privacy audit (:mod:`privsyn_core.evaluation.audit`)."""
    spec = request.spec
    size = public_size(spec, request.resolved, n, request.epsilon, request.neighbouring, request.public_n, rng)
    return size, {**request.resolved, **codec_params, **size_params(spec, size)}


def planned_ledger(request: Request, size: PublicSize, params: dict[str, Any], width: int) -> Ledger:
    """The mechanism's ledger as its privacy map states it before the run (step 3 of the module docstring).

    The map reads public inputs only: what is left of epsilon after the count (``size.mechanism_epsilon``), the
    relation, the parameters the run receives (``params``), the public count ``size.value`` and the encoded
    ``width``.

    Raises
    ------
    RuntimeError
        (internal error) when the count's stage and the plan of a private mechanism do not sum exactly to the
        requested epsilon: raised before the mechanism draws anything.
    """
    spec = request.spec
    plan = spec.privacy_map(size.mechanism_epsilon, request.neighbouring, params, size.value, width)
    check_ledger(spec, [*size.ledger, *plan], request.epsilon)
    return plan


def check_planned(spec: MechanismSpec, ledger: Ledger, plan: Ledger) -> None:
    """Refuse a run whose ledger is not the one its privacy map stated before it ran (:func:`planned_ledger`).

    Raises
    ------
    RuntimeError
        (internal error, naming the mechanism only: a ledger that differs may have been chosen from the data)
        when ``ledger != plan``, stage for stage, labels and amounts.
    """
    if list(ledger) != list(plan):
        raise RuntimeError(f"internal error: {spec.name} returned a ledger other than the one its privacy map "
                           "stated before it ran; nothing is released")


def run_on_array(request: Request, unit: np.ndarray, size: PublicSize, params: dict[str, Any],
                 rng: np.random.Generator) -> MechanismOutput:
    """Step 3 on an encoded array: the mechanism's run function with what is left of epsilon after the count."""
    return request.spec.run(unit, size.mechanism_epsilon, neighbouring=request.neighbouring,
                            n_synthetic=request.n_synthetic, rng=rng, size=size.value, **params)


def run_ledger(size: PublicSize, out: MechanismOutput) -> Ledger:
    """The run's whole ledger: the noisy count's stage (if any), then the mechanism's."""
    return [*size.ledger, *out.ledger]


@dataclass(frozen=True)
class PublicSize:
    """The record count a mechanism may read, and what it cost.

    Attributes
    ----------
    value : int or None
        The count to pass as ``size`` (``None``: the mechanism reads no count).
    source : {"replace", "declared", "noisy", "unused"}
        ``n`` public under replace-one, the caller's ``public_n``, a noisy count, or not needed.
    ledger : list of (stage, epsilon)
        The noisy count's stage (empty unless ``source == "noisy"``).
    mechanism_epsilon : float
        What is left for the mechanism; ``fsum(ledger) + mechanism_epsilon == epsilon`` exactly.
    variance : float or None
        For a noisy count, the variance of its noise (public: a function of its scale,
        :func:`~privsyn_core.privacy.noise.discrete_laplace_variance`), so that a mechanism can weigh it against
        its own estimates of ``n`` (:data:`privsyn_core.mechanisms.base.stages.SIZE_VARIANCE`); else ``None``.
    """

    value: int | None
    source: str
    ledger: Ledger
    mechanism_epsilon: float
    variance: float | None = None


def public_size(spec: MechanismSpec, params: dict[str, Any], n: int, epsilon: float, neighbouring: str,
                public_n: int | None, rng: np.random.Generator) -> PublicSize:
    """The count of step 2 of the module docstring (``rng`` is used only for the noisy count)."""
    if neighbouring == "replace":
        return PublicSize(n, "replace", [], epsilon)
    if public_n is not None:
        return PublicSize(public_n, "declared", [], epsilon)
    if not (spec.is_private and spec.uses_n(params)):
        return PublicSize(None, "unused", [], epsilon)
    mechanism_epsilon = epsilon - SIZE_SHARE * epsilon
    size_epsilon = epsilon - mechanism_epsilon  # exact (Sterbenz), so the ledger sums to epsilon exactly
    noisy = max(1, n + int(discrete_laplace(1.0 / size_epsilon, size=1, rng=rng)[0]))
    stage = (f"record count n (add/remove: n is private), discrete Laplace scale 1/epsilon_n, "
             f"{SIZE_SHARE:.0%} of epsilon", size_epsilon)
    return PublicSize(noisy, "noisy", [stage], mechanism_epsilon, discrete_laplace_variance(1.0 / size_epsilon))


def size_params(spec: MechanismSpec, size: PublicSize) -> dict[str, Any]:
    """What a staged mechanism's stages get besides its parameters about the public count: the variance of a
    noisy count (:data:`~privsyn_core.mechanisms.base.stages.SIZE_VARIANCE`); nothing for a mechanism without
    stages or a count that is not noisy."""
    if spec.stages is None or size.variance is None:
        return {}
    return {SIZE_VARIANCE: size.variance}


def check_width(spec: MechanismSpec, d: int) -> None:
    """Refuse an encoded table wider than the mechanism's declared ``max_dim`` (the width is public).

    Raises
    ------
    ParameterError
        Naming the limit and the private mechanisms of the same data kind that accept ``d`` columns.
    """
    reason = spec.too_wide(d)
    if reason is not None:
        raise ParameterError(f"{spec.name} {reason}")


@dataclass(frozen=True)
class Publisher:
    """What :func:`assemble` reads of a mechanism that is not in the registry (the stream's online PMM); a
    :class:`~privsyn_core.mechanisms.base.spec.MechanismSpec` has the same attributes.

    Attributes
    ----------
    name : str
        The mechanism's name in the release.
    is_private : bool
        Whether its ledger must sum to the epsilon claimed.
    released, released_noisy : tuple of str
        The names of its output parameters that may be published (see :func:`released_params`).
    floating_point_exposure : str or None
        ``None`` when every noise draw is exact integer noise.
    implemented_by : str or None
        ``None`` when privsyn_core draws the noise (the outside library that draws it otherwise).
    """

    name: str
    is_private: bool
    released: tuple[str, ...] = ()
    released_noisy: tuple[str, ...] = ()
    floating_point_exposure: str | None = None
    implemented_by: str | None = None


def check_ledger(spec: MechanismSpec | Publisher, ledger: Ledger, epsilon: float) -> float:
    """The ledger's exact sum; an internal error when a private mechanism's differs from ``epsilon``."""
    total = ledger_total(ledger)
    if spec.is_private and total != epsilon:
        raise RuntimeError(f"internal error: {spec.name} ledger sums to {total!r}, not epsilon={epsilon!r}")
    return total


def released_params(spec: MechanismSpec | Publisher, resolved: dict[str, Any], out: MechanismOutput, size: PublicSize,
                    n_synthetic: int | None, seed: int | None) -> dict[str, Any]:
    """What of the parameters may be published: the user's (resolved), the mechanism's declared ones,
    the public count when it was declared or released noisily, and an explicit seed."""
    names = (*spec.released, *spec.released_noisy)
    params = {**resolved, **{k: out.params[k] for k in names if k in out.params}, "n_synthetic": n_synthetic}
    if size.source in ("declared", "noisy"):
        params["public_n" if size.source == "declared" else "noisy_n"] = size.value
    if seed is not None:
        params["seed"] = seed
    return params


def assemble(spec: MechanismSpec | Publisher, out: MechanismOutput, *, data: Any, schema: Schema, epsilon: float,
             neighbouring: str, resolved: dict[str, Any], size: PublicSize, n_synthetic: int | None,
             seed: int | None, unit_rows: np.ndarray | None, clipped: dict[str, int], timings: dict[str, float],
             n_records: int, left_out: list[str] | None = None,
             diagnostics: dict[str, Any] | None = None, domain_policy: dict[str, Any] | None = None) -> SynthResult:
    """The :class:`SynthResult` of a run (both paths); checks the whole ledger first.

    ``n_records`` (the exact input size) and ``clipped`` only feed teaching warnings; ``left_out`` names
    the table's columns that the schema does not have (the column set is not private: neighbouring
    tables differ in one record, never in their columns); ``domain_policy`` is release mode's public rule for
    out-of-domain values, stated in the release.
    """
    ledger = run_ledger(size, out)
    total = check_ledger(spec, ledger, epsilon)
    warnings = list(out.warnings) + collapse_warnings(data, schema)
    if left_out:
        warnings.append(f"column(s) {left_out} of the table are not in the schema and were left out")
    if not schema.dp_valid:
        warnings.append("the domain (bounds/categories) was read off the data: "
                        "the result is not differentially private")
    teaching_warnings = clipping_warnings(clipped, n_records)
    return SynthResult(
        data=data, unit=out.unit, weights=out.weights, epsilon=total, ledger=ledger,
        neighbouring=neighbouring, dp_valid=bool(spec.is_private and schema.dp_valid),
        params={**resolved, **out.params, "n_synthetic": n_synthetic, "seed": seed, "size_source": size.source,
                "size": size.value},
        diagnostics={**out.diagnostics, **(diagnostics or {}), "teaching_warnings": teaching_warnings},
        timings=timings, mechanism=spec.name, schema=schema.to_dict(), unit_rows=unit_rows, clipped=clipped,
        warnings=warnings, release_params=released_params(spec, resolved, out, size, n_synthetic, seed),
        seed=seed, floating_point_exposure=spec.floating_point_exposure, domain_policy=domain_policy,
        noise_source=spec.implemented_by)


def collapse_warnings(data: Any, schema: Schema) -> list[str]:
    """Columns of the synthetic table with fewer distinct values than they could show.

    A numeric column whose synthetic rows take fewer than ``min(3, rows, its integer values)`` distinct values
    shows no shape; a categorical column of at least 2 categories whose rows all take one category shows none
    either (a mechanism that smooths every record towards a centre, such as a projection onto a subspace, can
    land every record in one category's cell).  This reads the released rows only (post-processing); a lazy
    (Dask) table is not read.
    """
    if not isinstance(data, pd.DataFrame) or len(data) < 2:
        return []
    collapsed, constant = [], []
    for col in schema.columns:
        if col.name not in data:
            continue
        if col.kind != "numeric":
            if len(col.category_list) >= 2 and takes_one_value(data[col.name].to_numpy()):
                constant.append(f"{col.name!r} ({len(col.category_list)} categories)")
            continue
        lo, hi = col.bounds
        possible = math.floor(hi) - math.ceil(lo) + 1 if col.integer else math.inf
        distinct = distinct_up_to_three(data[col.name].to_numpy())
        if distinct < min(3, len(data), possible):
            collapsed.append(f"{col.name!r} ({distinct})")
    warnings = []
    if collapsed:
        warnings.append(f"synthetic column(s) {', '.join(collapsed)} take fewer than 3 distinct values: the output "
                        "shows no shape on them")
    if constant:
        warnings.append(f"synthetic categorical column(s) {', '.join(constant)} take a single category in every "
                        "row: the output shows nothing of their distribution")
    return warnings


def takes_one_value(x: np.ndarray) -> bool:
    """Whether every entry of ``x`` equals the first, chunk by chunk with an early exit (no hashing)."""
    first = x[:1]
    return not any(bool(np.any(x[start:start + _DISTINCT_CHUNK] != first))
                   for start in range(0, len(x), _DISTINCT_CHUNK))


def distinct_up_to_three(x: np.ndarray) -> int:
    """The number of distinct non-NaN values of a numeric array when it is at most 2, else 3.

    ``O(n)`` without hashing (``Series.nunique`` hashes every row: seconds at 10^7 rows), chunk by chunk with
    an early exit (usually after the first chunk): with ``a``, ``b`` the least and the largest value of a
    chunk, its values are ``a`` and ``b`` only unless one lies strictly between them (then there are 3), and
    the array's distinct values are the union of its chunks'.
    """
    if x.dtype.kind not in "biuf":
        return min(3, int(pd.Series(x).nunique()))
    seen: set[Any] = set()
    for start in range(0, len(x), _DISTINCT_CHUNK):
        part = x[start:start + _DISTINCT_CHUNK]
        low, high = np.fmin.reduce(part), np.fmax.reduce(part)  # NaN only when every value is NaN
        if low != low:
            continue
        if low != high and bool(np.any((part > low) & (part < high))):
            return 3
        seen.update((low.item(), high.item()))
        if len(seen) >= 3:
            return 3
    return len(seen)


#: Values per chunk of :func:`distinct_up_to_three`.
_DISTINCT_CHUNK = 2 ** 16


def clipping_warnings(clipped: dict[str, int], n_records: int) -> list[str]:
    """Teaching-only warnings about input values clipped into the public bounds (read off the raw data).

    Above :data:`CLIP_WARN_SHARE` of a column the warning says the bounds look wrong (all values outside
    them means the synthetic column says nothing about the data)."""
    out = []
    for name, count in clipped.items():
        if not count:
            continue
        share = count / max(n_records, 1)
        text = (f"{count} of {n_records} values ({share:.1%}) of column {name!r} lay outside its public bounds "
                "and were clipped")
        out.append(text + ("; check the bounds" if share > CLIP_WARN_SHARE else ""))
    return out

