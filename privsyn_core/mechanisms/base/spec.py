"""What a mechanism declares: :class:`MechanismSpec` (with its :class:`ParamSpec` parameters) and :func:`register`.

A mechanism module declares its spec and its run function with :func:`register` (or :func:`register_staged` for
a count-based mechanism, :mod:`privsyn_core.mechanisms.base.stages`); :mod:`privsyn_core.registry` discovers the
modules of :mod:`privsyn_core.mechanisms` and lists what they registered, so a new mechanism is one module and
nothing else.

A run function has the signature::

    run(unit, epsilon, *, neighbouring, n_synthetic, rng, **params) -> MechanismOutput

where ``unit`` is the encoded data (``[0,1]^d`` or ``{0,1}^p``), ``rng`` a
:class:`numpy.random.Generator` and ``params`` the resolved parameters.  Its ledger (``MechanismOutput.ledger``)
is what the mechanism's privacy map (:data:`PrivacyMap`, ``MechanismSpec.privacy_map``) states before it runs.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal, TypeVar

import numpy as np

from privsyn_core.data.boolean_codec import is_boolean_column
from privsyn_core.data.codec import CodecFactory
from privsyn_core.data.unit_codec import UnitCodec
from privsyn_core.errors import ParameterError, PrivsynError
from privsyn_core.mechanisms.base.audit import AuditCase
from privsyn_core.mechanisms.base.stages import Stages
from privsyn_core.privacy.accounting import Ledger
from privsyn_core.result import MechanismOutput

NEIGHBOURING = ("replace", "add_remove")
#: The fields that declare a floating-point exposure: all of them or none.
FLOATING_POINT_FIELDS = ("floating_point_exposure", "floating_point_severity", "floating_point_plain")
#: A run function (module docstring).  Its keyword parameters after ``rng`` are the mechanism's own
#: (``MechanismSpec.params``), so only the return type is common to all of them.
RunFunction = Callable[..., MechanismOutput]
Run = TypeVar("Run", bound=RunFunction)
#: A mechanism's privacy map: ``privacy_map(epsilon, neighbouring, params, n, d) -> Ledger``, the ledger stages its
#: run function returns (labels and epsilons, in order), from public inputs only (``MechanismSpec.privacy_map``).
PrivacyMap = Callable[[float, str, dict[str, Any], int | None, int], Ledger]
#: What a mechanism's ``released_geometry`` returns: ``{"cells": {"lo", "hi", "count"}, "levels": [...] or None,
#: "value": label}`` for a partition, ``{"path": (k, d) array}`` for a folding path.
Geometry = dict[str, Any]


@dataclass(frozen=True)
class ParamSpec:
    """One mechanism parameter.

    Attributes
    ----------
    default : Any
        Default value; ``None`` means "chosen by the mechanism" (shown as ``auto``).
    type : type
        ``int``, ``float``, ``str`` or ``bool``.
    bounds : (low, high), optional
        Inclusive numeric bounds.
    choices : tuple, optional
        Allowed values; for ``int``/``float`` parameters also named alternatives to a
        number (e.g. ``depth`` is ``"paper"``, ``"bound_opt"`` or an int).
    help : str
    limit : callable, optional
        ``limit(d)`` is ``(largest, reason)``: the largest value the mechanism accepts on ``d`` encoded
        columns and what bounds it (a memory budget, a solver's size).  It reads only public inputs; the app
        caps the parameter's widget there, and the mechanism refuses a larger value itself.
    """

    default: Any
    type: type
    bounds: tuple[float, float] | None = None
    choices: tuple[Any, ...] | None = None
    help: str = ""
    limit: Callable[[int], tuple[int, str]] | None = None

    def coerce(self, name: str, value: Any) -> Any:
        """Validate ``value`` (possibly a string from the CLI) and convert it."""
        if value is None or (isinstance(value, str) and value.lower() in ("none", "auto")):
            if self.default is None:
                return None
            raise ParameterError(f"parameter {name!r} needs a value ({self._describe()})")
        if self.choices and value in self.choices:
            return value
        if self.type is str:
            raise ParameterError(f"parameter {name!r} must be one of {list(self.choices or ())}, got {value!r}")
        converted = self._convert(name, value)
        if self.bounds is not None and not (self.bounds[0] <= converted <= self.bounds[1]):
            raise ParameterError(f"parameter {name!r} must be in [{self.bounds[0]:g}, {self.bounds[1]:g}], "
                                 f"got {converted!r}")
        return converted

    def _convert(self, name: str, value: Any) -> Any:
        try:
            if self.type is bool:
                if isinstance(value, str):
                    if value.lower() not in ("true", "false", "1", "0", "yes", "no"):
                        raise ValueError
                    return value.lower() in ("true", "1", "yes")
                return bool(value)
            if self.type is int:
                f = float(value)
                if not f.is_integer():
                    raise ValueError
                return int(f)
            f = float(value)
            if not np.isfinite(f):
                raise ValueError
            return f
        except (TypeError, ValueError):
            raise ParameterError(f"parameter {name!r} expects {self._describe()}, got {value!r}") from None

    def _describe(self) -> str:
        kind = {int: "an integer", float: "a number", bool: "true/false", str: "a string"}[self.type]
        if self.choices:
            kind += f" or one of {list(self.choices)}"
        return kind


@dataclass(frozen=True)
class W1Claim:
    """What bounds a mechanism's expected W1 (l-infinity, between the data's and the output's empirical measures).

    Attributes
    ----------
    kind : {"theorem", "derived", "measured"}
        ``"theorem"``: a published theorem bounds it; ``"derived"``: a derivation in this library's docstrings or
        docs (no published theorem covers this variant); ``"measured"``: nothing bounds it, its W1 is measured
        only (the benchmarks).
    source : str
        One sentence: the paper and theorem with the bound's order, or where the derivation is, or (measured)
        what the paper proves instead, if anything.
    """

    kind: Literal["theorem", "derived", "measured"]
    source: str


#: The claim of a mechanism that declares none: measured only.
MEASURED_ONLY = W1Claim("measured", "no accuracy theorem")


@dataclass(frozen=True)
class MechanismSpec:
    """What a mechanism is, what it guarantees, and how to call it.

    Attributes
    ----------
    name : str
        Registry key (see the contract).
    title : str
    paper : str
        Seed and algorithm, e.g. ``"004, Alg 3-4"``.
    data_kind : {"continuous", "boolean"}
    neighbouring : tuple of str
        Supported neighbouring relations, subset of ``("replace", "add_remove")``.
    is_private : bool
        ``False`` only for reference baselines and non-DP anonymisation.
    params : dict of str to ParamSpec
    guarantee : str
        One sentence: what the output satisfies (for the app).
    description : str
        A short plain-language description (for the app).
    run : callable
        The run function (see the module docstring).
    privacy_map : callable
        ``privacy_map(epsilon, neighbouring, params, n, d) -> Ledger``: the ledger the run returns, stated before
        it runs from public inputs only: the epsilon the run receives (what is left after the pipeline's noisy
        count stage, if any), the neighbouring relation, the parameters the run receives (the resolved user
        parameters, the codec's stage parameters and the pipeline's size parameters), the public record count
        ``n`` (:attr:`privsyn_core.engine.pipeline.PublicSize.value`: ``None`` when the run reads none) and the
        encoded width ``d``.  Like an OpenDP measurement's privacy map it reads no record: a ledger that differs
        from it (a stage or an amount chosen from the data) is refused before anything is released
        (:func:`privsyn_core.engine.pipeline.run_sequence`).  The run builds its ledger with the same function
        (one source for the labels and the amounts).  A non-private mechanism states its stages too (an
        infinite epsilon).  Mandatory: :func:`register` refuses a mechanism without one.
    stages : Stages, optional
        The count-based stages (:mod:`privsyn_core.mechanisms.base.stages`) for the mechanisms registered with
        :func:`register_staged`; their ``run`` is ``stages.run`` and they also run on Dask.
    codec : callable, optional
        ``codec(schema) -> Codec`` (:class:`privsyn_core.data.codec.Codec`: ``encode(df) -> (array, clipped)``
        and ``decode(array) -> DataFrame``, optionally ``stage_params``); by default the unit cube,
        :class:`~privsyn_core.data.unit_codec.UnitCodec`.
    max_dim : int, optional
        Largest number of encoded columns the mechanism accepts (``None``: any); a wider table is a
        :class:`~privsyn_core.errors.ParameterError` (:func:`privsyn_core.engine.pipeline.check_width`).
    released : tuple of str
        Names of the entries of ``MechanismOutput.params`` that may be published: public inputs
        (the user's parameters, the schema, epsilon) or functions of them and of the noisy released
        quantities only.  Everything else the run function returns stays teaching-only diagnostics
        (:meth:`privsyn_core.SynthResult.release`).  Mandatory: :func:`register` refuses a mechanism
        that does not declare it.
    released_noisy : tuple of str
        Output parameters that may be published but are functions of *noisy* released quantities
        (e.g. a privately selected structure): they may differ between neighbours even under the same
        noise, so the release-surface test does not compare them.  Keep this list short and justify
        each entry in the mechanism's docstring.
    uses_n : callable
        ``uses_n(params) -> bool``: whether the run reads the record count ``n`` (a layout rule, a
        normaliser, a default output size) with these resolved parameters.  Under add/remove ``n``
        is private, so :func:`privsyn_core.synthesize` then passes a public count instead: the
        caller's ``public_n`` or a noisy count released as its own ledger stage.  Under replace-one
        ``n`` is public and passed as it is.
    citation : str
        The paper by authors, title and venue, with the algorithm (``paper`` holds the seed's short code): what
        the app, the reports and the command line print.
    order : int
        Where the mechanism is listed (:func:`privsyn_core.list_mechanisms`; ties by name).
    released_geometry : callable, optional
        ``released_geometry(release) -> Geometry | None``: what the Partitions and TSP views draw, rebuilt from a
        :class:`~privsyn_core.result.Release` alone (its rows, atoms, weights and declared parameters, never the
        diagnostics), so release mode can draw it too.  ``None``: the mechanism releases no geometry to draw.
    w1_claim : W1Claim
        What bounds its expected W1: a theorem (paper, theorem, order), a derivation here, or nothing (measured
        only; the default).  The README and ``docs/tables/w1_claims.md`` list it (``benchmarks/w1_claims.py``).
    rate : callable, optional
        ``rate(epsilon, n, d) -> float``: the shape of the W1 bound of ``w1_claim`` (unspecified constant), for
        the trade-off curves and the reproduction report; only with a bound (:func:`register` refuses a rate of
        a mechanism whose W1 is measured only).
    audit : AuditCase, optional
        How the privacy audit runs it (:class:`privsyn_core.mechanisms.base.audit.AuditCase`); ``None``: through its
        released rows.
    floating_point_exposure : str, optional
        ``None`` when every noise draw is exact integer noise (discrete Laplace as a difference of
        geometrics), so the floating-point attack on textbook Laplace sampling (Mironov, "On
        significance of the least significant bits for differential privacy", CCS 2012) does not
        apply.  Otherwise one sentence naming the continuous noise the mechanism samples in
        floating point: its released values may leak through their low-order bits, and the app
        shows this sentence.  ``tests/test_float_safety.py`` checks the declaration both ways.
    floating_point_severity : {"choice", "structure", "values"}, optional
        How far the exposure reaches, required with ``floating_point_exposure`` (``docs/mechanisms.md``, column
        *float*): ``"choice"`` when the floating-point noise only picks a discrete structure and no released number
        carries it (an index); ``"structure"`` when it draws a continuous structure (a projection) while the released
        numbers get exact integer noise; ``"values"`` when released numbers carry floating-point noise.
    floating_point_plain : str, optional
        The exposure in plain words for the reports and the guide, required with ``floating_point_exposure``: one
        clause saying what is drawn in floating point and what of it is released, with no library, sampler or paper
        name (those stay in ``floating_point_exposure``).
    implemented_by : str, optional
        ``None`` when privsyn_core draws the mechanism's noise, from the caller's ``rng`` (a seed replays the
        release) with the samplers the privacy audit rescales.  Otherwise the outside library that runs the
        mechanism and draws its noise from a generator of its own (the OpenDP peers: ``"OpenDP"``): a seed then
        replays only privsyn_core's post-processing, and :func:`privsyn_core.evaluation.audit.audit_all` leaves the
        mechanism out (no detection case can rescale its noise).
    """

    name: str
    title: str
    paper: str
    data_kind: Literal["continuous", "boolean"]
    neighbouring: tuple[str, ...]
    is_private: bool
    params: dict[str, ParamSpec]
    guarantee: str
    description: str
    run: RunFunction = field(repr=False, compare=False)
    privacy_map: PrivacyMap = field(repr=False, compare=False)
    codec: CodecFactory = field(default=UnitCodec, repr=False, compare=False)
    stages: Stages | None = field(default=None, repr=False, compare=False)
    released: tuple[str, ...] = ()
    released_noisy: tuple[str, ...] = ()
    uses_n: Callable[[dict[str, Any]], bool] = field(default=lambda params: False, repr=False, compare=False)
    max_dim: int | None = None
    citation: str = ""
    order: int = 1000
    released_geometry: Callable[[Any], Geometry | None] | None = field(default=None, repr=False, compare=False)
    w1_claim: W1Claim = MEASURED_ONLY
    rate: Callable[[float, int, int], float] | None = field(default=None, repr=False, compare=False)
    audit: AuditCase | None = field(default=None, repr=False, compare=False)
    floating_point_exposure: str | None = None
    floating_point_severity: Literal["choice", "structure", "values"] | None = None
    floating_point_plain: str | None = None
    implemented_by: str | None = None

    def resolve_params(self, given: dict[str, Any]) -> dict[str, Any]:
        """Defaults filled in, every value validated; unknown names are an error."""
        unknown = sorted(set(given) - set(self.params))
        if unknown:
            raise ParameterError(f"mechanism {self.name!r} has no parameter(s) {unknown}; "
                                 f"it takes {sorted(self.params) or 'none'}")
        return {k: p.coerce(k, given.get(k, p.default)) for k, p in self.params.items()}

    def too_wide(self, d: int) -> str | None:
        """Why ``d`` encoded columns exceed ``max_dim`` (naming the private mechanisms of the same data kind that
        take them), or ``None``."""
        if self.max_dim is None or d <= self.max_dim:
            return None
        wider = [s.name for s in registered() if s.is_private and s.data_kind == self.data_kind
                 and (s.max_dim is None or s.max_dim >= d)]
        return f"works on at most {self.max_dim} encoded column(s), this table has {d}; {_alternatives(wider, d)}"

    def accepts(self, schema: Any) -> str | None:
        """Why the mechanism cannot run on the public ``schema`` (one line), or ``None`` when it can.

        One check for the API, the command line, the guide and the app, from what the spec declares:
        ``data_kind == "boolean"`` needs every column Boolean by its public declaration (numeric 0/1 declared
        integer with bounds ``[0, 1]``, or two categories); ``max_dim`` bounds the columns of a mechanism on the
        unit-cube encoding; the mechanism's ``codec`` must accept the schema (a codec's own refusal comes first,
        with its message).
        """
        try:  # a mechanism's own codec refuses what it cannot encode, with its message
            self.codec(schema)
        except PrivsynError as exc:
            return str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        columns = schema.columns
        if self.data_kind == "boolean":
            other = [c.name for c in columns if not is_boolean_column(c)]
            if other:
                shown = ", ".join(other[:3]) + (f" and {len(other) - 3} more" if len(other) > 3 else "")
                return (f"works on Boolean columns only (numeric 0/1 declared integer with bounds [0, 1], or two "
                        f"categories); not Boolean: {shown}")
        return self.too_wide(len(columns))


#: How many alternatives :meth:`MechanismSpec.too_wide` names.
NAMED_ALTERNATIVES = 6


def _alternatives(names: list[str], d: int) -> str:
    """The mechanisms to use instead, in words: ``use one of a, b or c`` (the first :data:`NAMED_ALTERNATIVES`,
    then how many more), ``use a``, or that none takes ``d`` columns."""
    if not names:
        return f"no registered private mechanism of this data kind takes {d} columns"
    if len(names) == 1:
        return f"use {names[0]}"
    shown, more = names[:NAMED_ALTERNATIVES], len(names) - NAMED_ALTERNATIVES
    if more > 0:
        return f"use one of {', '.join(shown)} or {more} more"
    return f"use one of {', '.join(shown[:-1])} or {shown[-1]}"


#: Every spec registered so far, by name (:func:`registered`).
_REGISTRY: dict[str, MechanismSpec] = {}
#: Mechanisms declared missing (:func:`register_missing`): name -> how to install what they need.
_MISSING: dict[str, str] = {}


def register(name: str, **spec_fields: Any) -> Callable[[Run], Run]:
    """Decorator: register a run function under ``name`` with the given spec fields."""
    def wrap(run: Run) -> Run:
        _add(MechanismSpec(name=name, run=run, **_declared(name, spec_fields)))
        return run
    return wrap


def register_staged(name: str, stages: Stages, **spec_fields: Any) -> MechanismSpec:
    """Register a count-based mechanism from its stages: its in-memory run is ``stages.run``."""
    spec = MechanismSpec(name=name, run=stages.run, stages=stages, **_declared(name, spec_fields))
    _add(spec)
    return spec


def _declared(name: str, spec_fields: dict[str, Any]) -> dict[str, Any]:
    if "released" not in spec_fields:
        raise RuntimeError(f"mechanism {name!r} must declare released=(...): the names of its output parameters "
                           "that may be published (public inputs or functions of noisy released quantities)")
    bad = set(spec_fields.get("neighbouring", ())) - set(NEIGHBOURING)
    if bad:
        raise RuntimeError(f"mechanism {name!r}: unknown neighbouring relation(s) {bad}")
    if spec_fields.get("rate") is not None and spec_fields.get("w1_claim", MEASURED_ONLY).kind == "measured":
        raise RuntimeError(f"mechanism {name!r} declares a W1 rate but no bound (w1_claim): a rate is the shape of "
                           "a theorem's or a derivation's bound")
    if "privacy_map" not in spec_fields:
        raise RuntimeError(f"mechanism {name!r} must declare privacy_map=...: the ledger its run returns, from "
                           "public inputs only (epsilon, the relation, the parameters, the public count, the width)")
    declared = [spec_fields.get(key) is not None for key in FLOATING_POINT_FIELDS]
    if any(declared) and not all(declared):
        raise RuntimeError(f"mechanism {name!r} must declare all of {FLOATING_POINT_FIELDS} or none of them")
    return spec_fields


def _add(spec: MechanismSpec) -> None:
    if spec.name in _REGISTRY:
        raise RuntimeError(f"mechanism {spec.name!r} registered twice")
    _REGISTRY[spec.name] = spec


def register_missing(name: str, install: str) -> None:
    """Declare the mechanism ``name`` missing here (an optional dependency is not installed), with the sentence
    ``install`` saying how to get it; the app says so where the mechanism would be listed."""
    _MISSING[name] = install


def missing() -> dict[str, str]:
    """The mechanisms declared missing so far (:func:`register_missing`), name -> how to install them."""
    return dict(_MISSING)


def registered() -> list[MechanismSpec]:
    """The mechanisms registered so far, by declared ``order`` (then name): all of them once
    :mod:`privsyn_core.registry` has discovered the package, which :func:`privsyn_core.list_mechanisms` and
    :func:`privsyn_core.get_mechanism` do first."""
    return sorted(_REGISTRY.values(), key=lambda s: (s.order, s.name))
