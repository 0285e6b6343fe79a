"""Result types: what a mechanism returns (:class:`MechanismOutput`) and what
:func:`privsyn_core.synthesize` returns (:class:`SynthResult`)."""

from __future__ import annotations

import os
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from privsyn_core.data.json_values import plain
from privsyn_core.privacy.accounting import Ledger
from privsyn_core.privacy.budget import LedgerEntry


@dataclass
class MechanismOutput:
    """The raw output of a run function, in encoded (unit) coordinates.

    Attributes
    ----------
    unit : ndarray (m, d)
        Released points; weighted atoms when ``weights`` is given.
    weights : ndarray (m,), optional
        Non-negative atom weights (noisy counts or probabilities).
    rows : ndarray (N, d), optional
        Synthetic rows when they differ from ``unit`` (weighted mechanisms must set it).
    ledger : list of (stage, epsilon)
        Privacy spent per stage; ``fsum`` equals the epsilon the mechanism claims.
    diagnostics : dict
        Teaching data for the figures (true counts included: never part of a release).
    params : dict
        Values the mechanism chose itself (depth, grid size, ...).
    timings : dict
        Seconds per internal stage.
    warnings : list of str
    rows_shuffled : bool
        The synthetic rows are in random order already (drawn through a
        :class:`~privsyn_core.mechanisms.base.rows.RowPlan`, which shuffles them); else :func:`privsyn_core.synthesize`
        shuffles them.
    """

    unit: np.ndarray
    ledger: Ledger
    weights: np.ndarray | None = None
    rows: np.ndarray | None = None
    diagnostics: dict[str, Any] = field(default_factory=dict)
    params: dict[str, Any] = field(default_factory=dict)
    timings: dict[str, float] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)
    rows_shuffled: bool = False


@dataclass
class SynthResult:
    """A synthetic dataset with its privacy accounting (the public contract: ``docs/contract.md``).

    Attributes
    ----------
    data : DataFrame
        Synthetic rows, same columns and dtypes as the input columns used.
    unit : ndarray (m, d)
        The released points in unit coordinates (weighted atoms when ``weights``).
    weights : ndarray (m,) or None
    epsilon : float
        Total privacy spent: ``math.fsum`` of the ledger.
    ledger : list of (stage, epsilon)
    neighbouring : {"replace", "add_remove"}
    dp_valid : bool
        False when the mechanism is not private or the domain came from the data.
    params : dict
        Every parameter as resolved, including ``seed`` (None if not reproducible).
    diagnostics : dict
        What the figures need (true counts are teaching-only, never a release).
    timings : dict
        Seconds per stage.
    mechanism : str
    schema : dict
        The schema used, as :meth:`Schema.to_dict`.
    unit_rows : ndarray (N, d)
        The rows of ``data`` in unit coordinates.
    clipped : dict
        Input rows clipped into the public bounds, per column (teaching only: read off the raw data).
    warnings : list of str
        Warnings that may be published (public inputs or noisy released quantities); warnings read
        off the raw data are in ``diagnostics["teaching_warnings"]``.
    release_params : dict
        The parameters that may be published (see :meth:`release`).
    seed : int or None
        The seed the caller passed explicitly (``None`` otherwise: the run drew from the secure
        generator, or from a caller's Generator).
    floating_point_exposure : str or None
        The mechanism's declaration (``MechanismSpec.floating_point_exposure``): ``None`` when every noise
        draw is exact integer noise, else the continuous noise it samples in floating point.
    domain_policy : dict or None
        Release mode only: the public rule the records went through before the mechanism (out-of-domain values
        clipped or replaced by declared fallbacks, :mod:`privsyn_core.data.conform`); ``None`` otherwise.
    ledger_entry : LedgerEntry or None
        Where the privacy ledger recorded this release's spend (``None`` without a ledger, or for a seeded run
        already in it); :meth:`save` records the written file there.  Never published.
    noise_source : str or None
        ``None`` when privsyn_core drew the noise from the run's generator (a seed replays it); else the outside
        library that drew it from a generator of its own (``MechanismSpec.implemented_by``), which no seed replays.
    """

    data: pd.DataFrame
    unit: np.ndarray
    weights: np.ndarray | None
    epsilon: float
    ledger: Ledger
    neighbouring: str
    dp_valid: bool
    params: dict[str, Any]
    diagnostics: dict[str, Any]
    timings: dict[str, float]
    mechanism: str = ""
    schema: dict[str, Any] = field(default_factory=dict)
    unit_rows: np.ndarray | None = None
    clipped: dict[str, int] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)
    release_params: dict[str, Any] = field(default_factory=dict)
    seed: int | None = None
    floating_point_exposure: str | None = None
    domain_policy: dict[str, Any] | None = None
    ledger_entry: LedgerEntry | None = None
    noise_source: str | None = None

    def release(self) -> Release:
        """What may be published, and nothing else (see :class:`Release`): each of its fields is the field of the
        same name here, except ``params``, which are the :attr:`release_params`."""
        published = {f.name: getattr(self, f.name) for f in fields(Release)}
        return Release(**{**published, "ledger": list(self.ledger), "params": dict(self.release_params),
                          "warnings": tuple(self.warnings)})

    def report(self) -> dict[str, Any]:
        """The release's JSON metadata (:meth:`Release.to_dict`): safe to publish with the rows."""
        return self.release().to_dict()

    def save(self, path: str | os.PathLike[str], *, manifest: str | os.PathLike[str] | None = None,
             force: bool = False) -> tuple[Path, Path]:
        """Write the release's rows to ``path`` (CSV) and its manifest beside it (``RELEASE.manifest.json``, or
        ``manifest``): what was released and the SHA-256 of the bytes written, recorded in the privacy ledger with
        the spend when one counted the release (:func:`privsyn_core.manifest.save_release`).  Returns both paths;
        an existing file is refused unless ``force``."""
        from privsyn_core.manifest import save_release

        return save_release(self, path, manifest=manifest, force=force)


def noise_statement(exposure: str | None) -> str:
    """The release's floating-point exposure in one sentence (``Release.to_dict()["noise"]``, the reports)."""
    if exposure is None:
        return ("Exact integer noise: every noise draw of this release is discrete Laplace noise sampled with integer "
                "arithmetic, so no floating-point noise reaches a released value.")
    return (f"Floating-point exposure: {exposure}. Floating-point noise can leak its input through its low-order "
            "bits (Mironov, CCS 2012); how far that reaches is the mechanism's floating_point_severity "
            "(docs/budget.md).")


#: Sentence every release made with an explicit seed carries.
SEED_WARNING = ("made with an explicit seed: the seed replays the noise byte for byte, so this release is not private "
                "if the seed is published or guessable; use rng='secure' (the default) for a real release")


@dataclass(frozen=True)
class Release:
    """A differentially private release: the synthetic rows and only fields that may be published.

    Every field is a public input (schema, epsilon, relation, mechanism, the user's parameters, an
    explicit seed) or a function of the noisy released quantities (rows, atoms, weights, the
    ledger, the parameters the mechanism declares in ``MechanismSpec.released``).  True counts,
    occupied cells, the exact record count, clipped counts, timings, hashes of the data and seeds
    the library chose stay on :class:`SynthResult` as teaching diagnostics and never reach this
    object, the CLI's ``--report``, the reports or the app in release mode.

    Attributes
    ----------
    data : DataFrame
        The synthetic rows.
    unit : ndarray (m, d)
        Released points or atoms in unit coordinates.
    weights : ndarray (m,) or None
        Released atom weights (noisy counts or probabilities).
    mechanism, epsilon, ledger, neighbouring, dp_valid, schema, params, warnings
        As on :class:`SynthResult`, restricted to what may be published.
    seed : int or None
        The caller's explicit seed; a release made with one says that it replays the noise, unless an outside
        library drew the noise (``noise_source``): its mechanism's warnings then say that the seed replays only
        privsyn_core's post-processing.
    floating_point_exposure : str or None
        ``None`` when every noise draw is exact integer noise; else the continuous noise the mechanism
        samples in floating point (public: a property of the mechanism, never of the data).
    domain_policy : dict or None
        As on :class:`SynthResult` (public: the rule and the declared fallbacks, never what they changed).
    noise_source : str or None
        As on :class:`SynthResult` (public: a property of the mechanism).
    """

    data: pd.DataFrame
    unit: np.ndarray
    weights: np.ndarray | None
    mechanism: str
    epsilon: float
    ledger: Ledger
    neighbouring: str
    dp_valid: bool
    schema: dict[str, Any]
    params: dict[str, Any]
    warnings: tuple[str, ...]
    seed: int | None = None
    floating_point_exposure: str | None = None
    domain_policy: dict[str, Any] | None = None
    noise_source: str | None = None

    @property
    def n_synthetic(self) -> int:
        """Number of synthetic rows (under add/remove a noisy quantity)."""
        return len(self.data)

    def to_dict(self) -> dict[str, Any]:
        """JSON-serialisable metadata of the release (everything but the rows and atoms)."""
        replayable = self.seed is not None and self.noise_source is None
        warnings = list(self.warnings) + ([SEED_WARNING] if replayable else [])
        return {
            "mechanism": self.mechanism,
            "epsilon": self.epsilon,
            "ledger": [[stage, eps] for stage, eps in self.ledger],
            "neighbouring": self.neighbouring,
            "dp_valid": self.dp_valid,
            "params": {k: plain(v) for k, v in self.params.items()},
            "schema": self.schema,
            "n_synthetic": self.n_synthetic,
            "warnings": warnings,
            "floating_point_exposure": self.floating_point_exposure,
            "domain_policy": self.domain_policy,
            "noise": noise_statement(self.floating_point_exposure),
        }
