r"""Empirical privacy audit: a statistical lower bound on the epsilon a mechanism really spends.

An epsilon-DP mechanism ``M`` satisfies ``P[M(D') in E] <= e^epsilon P[M(D) in E]`` for every
pair of neighbouring datasets ``D, D'`` and every output event ``E``.  The audit

1. builds a worst-case neighbouring pair for the mechanism's relation (:func:`neighbour_pair`):
   ``D`` has all ``n`` records at the origin corner; under replace-one ``D'`` moves record 0
   to the far corner, under add/remove ``D'`` adds a record there (``{0,1}^p`` likewise with
   all-zero and all-one records);
2. runs the mechanism many times on both, through the release path's steps (:func:`_release`) on unit
   arrays, no encoding;
3. maps every output to a few real *features* that only read the differentially private
   output (noisy counts before post-processing, or the released points; never true counts),
   and considers the events ``{feature >= t}`` and ``{feature < t}``;
4. **chooses** one event (feature, threshold, direction) on a first, separate set of runs,
   then counts it on fresh runs and reports the standard auditing bound
   ([JUO20], [NST21])

   .. math:: \varepsilon_{lower} = \log \frac{\underline{p}_1}{\overline{p}_0},

   where ``p_1`` is the event's probability on the dataset where it is likelier and the
   one-sided Clopper-Pearson bounds each hold with probability ``1 - alpha/2``.  Because
   the event is fixed before the evaluation runs, no multiple-testing correction is
   needed: ``eps_lower <= true epsilon`` with probability at least ``1 - alpha``.

A correctly calibrated mechanism gives ``eps_lower <= epsilon`` (up to the stated false
failure rate alpha); a mechanism that spends more than it claims is *detected* when
``eps_lower > epsilon``.  :func:`scaled_noise` builds deliberately mis-calibrated variants
(noise scales multiplied by a factor) to show that the audit can fail.

Each mechanism declares its audit case in its registration (``MechanismSpec.audit``, an
:class:`~privsyn_core.mechanisms.base.audit.AuditCase`, with the features of :mod:`privsyn_core.mechanisms.base.audit`
or its own); a mechanism without one is audited through its released rows
(:func:`~privsyn_core.mechanisms.base.audit.release_features`), which is valid but weaker.
An audit gives a *lower* bound: passing it does not prove privacy, failing it proves a bug.

References
----------
.. [JUO20] M. Jagielski, J. Ullman, A. Oprea, "Auditing Differentially Private Machine
   Learning: How Private is Private SGD?", NeurIPS 2020.
.. [NST21] M. Nasr, S. Song, A. Thakurta, N. Papernot, N. Carlini, "Adversary
   Instantiation: Lower Bounds for Differentially Private Machine Learning", IEEE S&P 2021.
"""

from __future__ import annotations

import contextlib
import functools
import importlib
import inspect
import math
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from types import ModuleType
from typing import Any

import numpy as np

from privsyn_core.engine.pipeline import (
    Request,
    check_planned,
    mechanism_inputs,
    planned_ledger,
    run_ledger,
    run_on_array,
)
from privsyn_core.errors import ParameterError
from privsyn_core.mechanisms.base.audit import SCALED_LAWS, AuditCase, FeatureFn, NeighbourPair, release_features
from privsyn_core.mechanisms.base.spec import MechanismSpec
from privsyn_core.privacy.accounting import check_epsilon
from privsyn_core.registry import get_mechanism, list_mechanisms
from privsyn_core.result import MechanismOutput

DEFAULT_CONFIDENCE = 0.95
N_THRESHOLDS = 64
#: Level of the Clopper-Pearson bounds that rank candidate events on the selection runs (any
#: rule is valid, since the evaluation runs are separate; a moderate level favours events
#: with enough mass to be estimated).
SELECTION_ALPHA = 0.05


@dataclass(frozen=True)
class Event:
    """``{feature[index] >= threshold}`` (``upper``) or its complement; ``likelier`` is 0 (D) or 1 (D')."""

    index: int
    threshold: float
    upper: bool
    likelier: int

    def occurs(self, features: np.ndarray) -> np.ndarray:
        above = features[:, self.index] >= self.threshold
        return above if self.upper else ~above

    def describe(self) -> str:
        op = ">=" if self.upper else "<"
        dataset = "D" if self.likelier == 0 else "D'"
        return f"feature[{self.index}] {op} {self.threshold:g}, likelier under {dataset}"


@dataclass(frozen=True)
class AuditResult:
    """One audit: the claimed epsilon, the empirical lower bound and how it was obtained."""

    mechanism: str
    neighbouring: str
    epsilon: float
    eps_lower: float
    confidence: float
    trials: int
    selection_trials: int
    event: str
    counts: tuple[int, int]
    noise_factor: float
    seconds: float

    @property
    def detected(self) -> bool:
        """True when the audit proves (at its confidence) that more than ``epsilon`` is spent."""
        return self.eps_lower > self.epsilon

    def row(self) -> dict[str, Any]:
        return {"mechanism": self.mechanism, "neighbouring": self.neighbouring, "epsilon": self.epsilon,
                "eps_lower": self.eps_lower, "confidence": self.confidence, "trials": self.trials,
                "selection_trials": self.selection_trials, "event": self.event,
                "counts": list(self.counts), "noise_factor": self.noise_factor,
                "detected": self.detected, "seconds": self.seconds}


# -- neighbouring datasets ---------------------------------------------------------------
def neighbour_pair(data_kind: str, relation: str, n: int, d: int) -> NeighbourPair:
    """``D`` = ``n`` records at the origin; ``D'`` moves (replace) or adds (add/remove) one at the far corner."""
    dtype = np.uint8 if data_kind == "boolean" else float
    base = np.zeros((n, d), dtype=dtype)
    far = np.ones((1, d), dtype=dtype)
    if relation == "replace":
        neighbour = np.concatenate([far, base[1:]])
    elif relation == "add_remove":
        neighbour = np.concatenate([far, base])
    else:
        raise ParameterError(f"unknown neighbouring relation {relation!r}; use 'replace' or 'add_remove'")
    return NeighbourPair(relation, base, neighbour)


def case_of(spec: MechanismSpec) -> AuditCase:
    """The mechanism's declared audit case, else :class:`AuditCase` with :func:`release_features`."""
    return spec.audit if spec.audit is not None else AuditCase(features=release_features)


def detection_factor(spec: MechanismSpec, relation: str, epsilon: float = 1.0) -> float:
    """``f = L / (2 epsilon)`` (at most 1/2): the noise factor that makes the read stages spend ``2 epsilon``.

    ``L`` is the loss of the stages the features read at the claimed noise: the mechanism's own
    ``privacy_loss_bound`` parameter when it reports one, the case's ``pair_loss`` when the pair
    realises less than the ledger, else the sum of the ledger stages named by ``read_stages``.
    Every noise scale times ``f`` divides every Laplace loss by ``f``.
    """
    case = case_of(spec)
    d = case.d if spec.data_kind == "continuous" else max(case.d, 2)
    pair = neighbour_pair(spec.data_kind, relation, case.n, d)
    params = spec.resolve_params(case.params)
    out = spec.run(pair.base, epsilon, neighbouring=relation, n_synthetic=None, rng=np.random.default_rng(0), **params)
    if "privacy_loss_bound" in out.params:
        loss = float(out.params["privacy_loss_bound"])
    elif case.pair_loss is not None:
        loss = case.pair_loss(spec, pair, epsilon, params)
    else:
        loss = math.fsum(e for stage, e in out.ledger if stage.startswith(case.read_stages))
    return min(0.5, loss / (2 * epsilon))


# -- the audit -------------------------------------------------------------------------
def audit(mechanism: str, epsilon: float = 1.0, *, neighbouring: str | None = None,
          trials: int | None = None, selection_trials: int | None = None,
          confidence: float = DEFAULT_CONFIDENCE, rng: int | np.random.Generator | None = 0,
          noise_factor: float = 1.0, case: AuditCase | None = None) -> AuditResult:
    """Audit one private mechanism under one neighbouring relation.

    Parameters
    ----------
    mechanism : str
        Registry key of a private mechanism.
    epsilon : float
        The budget the mechanism is asked to spend (and claims).
    neighbouring : str, optional
        Relation to audit; the mechanism's first supported one by default.
    trials, selection_trials : int, optional
        Runs per dataset used to count the chosen event, and (separately) to choose it;
        the case's defaults when ``None``.
    confidence : float
        ``1 - alpha``: ``eps_lower`` is below the true epsilon with at least this probability.
    rng : int, Generator or None
        Seed of the runs (the audit is reproducible for a fixed seed).
    noise_factor : float
        Multiply every noise scale by this factor (:func:`scaled_noise`); ``< 1`` makes a
        deliberately mis-calibrated variant that spends more than it claims.
    case : AuditCase, optional
        Overrides the mechanism's declared case (:func:`case_of`).
    """
    spec = get_mechanism(mechanism)
    epsilon = check_epsilon(epsilon)
    relation = _relation(spec, neighbouring)
    case = case or case_of(spec)
    trials = case.trials if trials is None else trials
    selection_trials = case.selection_trials if selection_trials is None else selection_trials
    _check_counts(trials, selection_trials, confidence)
    d = case.d if spec.data_kind == "continuous" else max(case.d, 2)
    pair = neighbour_pair(spec.data_kind, relation, case.n, d)
    params = spec.resolve_params(case.params)
    features = case.features or release_features
    generator = rng if isinstance(rng, np.random.Generator) else np.random.default_rng(rng)
    alpha = 1.0 - confidence

    start = time.perf_counter()
    with scaled_noise(noise_factor):
        sample = functools.partial(_features_of_runs, spec, epsilon=epsilon, relation=relation, params=params,
                                   features=features, pair=pair, rng=generator)
        event = choose_event(sample(pair.base, selection_trials), sample(pair.neighbour, selection_trials))
        hits = (int(event.occurs(sample(pair.base, trials)).sum()),
                int(event.occurs(sample(pair.neighbour, trials)).sum()))
    likely, rare = hits[event.likelier], hits[1 - event.likelier]
    eps_lower = float(epsilon_lower_bound(np.array([likely]), np.array([rare]), trials, alpha)[0])
    return AuditResult(spec.name, relation, epsilon, eps_lower, confidence, trials, selection_trials,
                       event.describe(), hits, noise_factor, time.perf_counter() - start)


def audit_all(epsilon: float = 1.0, **kwargs: Any) -> list[AuditResult]:
    """:func:`audit` of every registered private mechanism under every relation it supports.

    A mechanism an outside library runs (``MechanismSpec.implemented_by``: the optional OpenDP peers) is left
    out: its noise is drawn by that library's samplers, which the audit's noise factor cannot scale (so no
    detection case exists), and a peer's run takes seconds to tens of seconds, so the audit's thousands of runs
    do not fit.
    """
    return [audit(spec.name, epsilon, neighbouring=relation, **kwargs)
            for spec in list_mechanisms() if spec.is_private and spec.implemented_by is None
            for relation in spec.neighbouring]


def epsilon_lower_bound(likely: np.ndarray, rare: np.ndarray, trials: int, alpha: float) -> np.ndarray:
    """``max(0, log(CP_lower(likely) / CP_upper(rare)))``, each one-sided bound at level ``alpha/2``."""
    likely, rare = np.asarray(likely), np.asarray(rare)
    lower = np.where(likely > 0, _beta().ppf(alpha / 2, np.maximum(likely, 1), trials - likely + 1), 0.0)
    upper = np.where(rare < trials, _beta().ppf(1 - alpha / 2, rare + 1, np.maximum(trials - rare, 1)), 1.0)
    with np.errstate(divide="ignore"):
        return np.maximum(np.log(lower) - np.log(upper), 0.0)


def detection_power(mass: float, true_epsilon: float, epsilon: float, trials: int, alpha: float) -> float:
    r"""Probability that the audit detects (``eps_lower > epsilon``) an event of ratio ``e^{true_epsilon}``.

    For a fixed event with probability ``p_1 = mass`` on the dataset where it is likelier and
    ``p_0 = p_1 e^{-true_epsilon}`` on the other, the counts are independent
    ``X_1 ~ Bin(T, p_1)`` and ``X_0 ~ Bin(T, p_0)``; the audit detects when
    :func:`epsilon_lower_bound` of ``(X_1, X_0)`` exceeds ``epsilon``.  Exact: for every ``x_1``,
    the largest detecting ``x_0`` comes from the monotone upper Clopper-Pearson bound, so

    .. math:: P = \sum_{x_1} P(X_1 = x_1)\, P\big(X_0 \le x_0^*(x_1)\big).

    ``1 - P`` is the false-failure rate of a detection test whose chosen event is that one.
    """
    from scipy.stats import binom

    x = np.arange(trials + 1)
    lower = np.where(x > 0, _beta().ppf(alpha / 2, np.maximum(x, 1), trials - x + 1), 0.0)
    upper = np.where(x < trials, _beta().ppf(1 - alpha / 2, x + 1, np.maximum(trials - x, 1)), 1.0)
    # log(lower[x1]) - log(upper[x0]) > epsilon  <=>  upper[x0] < lower[x1] e^{-epsilon}; upper increases in x0.
    largest = np.searchsorted(upper, lower * math.exp(-epsilon), side="left") - 1
    p0 = mass * math.exp(-true_epsilon)
    detect = np.where(largest >= 0, binom.cdf(largest, trials, p0), 0.0)
    return float(np.sum(binom.pmf(x, trials, mass) * detect))


def choose_event(base: np.ndarray, neighbour: np.ndarray, alpha: float = SELECTION_ALPHA) -> Event:
    """The event with the largest :func:`epsilon_lower_bound` (at level ``alpha``) on the selection runs.

    Candidates: every feature, thresholds at the distinct values (or quantiles) of the
    pooled runs, events ``{f >= t}`` and ``{f < t}``, either dataset as the likelier one.
    """
    trials = len(base)
    best, best_score = Event(0, -math.inf, True, 1), -1.0
    for index in range(base.shape[1]):
        thresholds = _thresholds(np.concatenate([base[:, index], neighbour[:, index]]))
        above = [np.count_nonzero(x[:, index][:, None] >= thresholds, axis=0) for x in (base, neighbour)]
        for upper, counts in ((True, above), (False, [trials - c for c in above])):
            for likelier in (0, 1):
                scores = epsilon_lower_bound(counts[likelier], counts[1 - likelier], trials, alpha)
                k = int(np.argmax(scores))
                if scores[k] > best_score:
                    best, best_score = Event(index, float(thresholds[k]), upper, likelier), float(scores[k])
    return best


@contextlib.contextmanager
def scaled_noise(factor: float) -> Iterator[None]:
    """Multiply the scale of every noise draw in privsyn_core's mechanisms by ``factor``.

    Rebinds the noise laws of :data:`~privsyn_core.mechanisms.base.audit.SCALED_LAWS` (privsyn_core's samplers
    and those mechanisms declare: ``kd_empty``'s tail mass and conditional draws of the empty cells' discrete
    Laplace counts, Lemma 9 of Kreačić et al., "Differentially Private Synthetic Data Using KD-Trees", so that
    the implicit empty cells stay equal in law to explicit ones at the scaled noise) in their own module
    (reaching calls through the module attribute, ``noise.fill_discrete_laplace(...)``, as in
    :func:`privsyn_core.privacy.noise.lattice_laplace`) and in every loaded module that imported them by name (a
    mechanism registered from outside the package included), and restores them on exit.
    Each wrapper calls the original function, so no draw is scaled twice.  For audits and
    tests only (not thread-safe).
    """
    if factor == 1.0:
        yield
        return
    if not (math.isfinite(factor) and factor > 0):
        raise ParameterError(f"noise_factor must be finite and > 0, got {factor!r}")
    originals = {name: getattr(importlib.import_module(home), name) for home, name, _ in SCALED_LAWS}
    scaled = {name: _scaled(originals[name], factor, position) for _, name, position in SCALED_LAWS}
    patched = [(module, name) for module in list(sys.modules.values()) if isinstance(module, ModuleType)
               for name, fn in originals.items() if vars(module).get(name) is fn]
    try:
        for module, name in patched:
            setattr(module, name, scaled[name])
        yield
    finally:
        for module, name in patched:
            setattr(module, name, originals[name])


def format_table(results: list[AuditResult]) -> str:
    """The audit table: mechanism, relation, claimed epsilon, eps_lower, confidence, trials."""
    lines = [f"{'mechanism':15s} {'neighbouring':12s} {'epsilon':>8s} {'eps_lower':>9s} {'conf':>5s} "
             f"{'trials':>7s}  verdict"]
    for r in results:
        verdict = "OVERSPENDS" if r.detected else "ok"
        factor = f" (noise x{r.noise_factor:g})" if r.noise_factor != 1.0 else ""
        lines.append(f"{r.mechanism:15s} {r.neighbouring:12s} {r.epsilon:8.4g} {r.eps_lower:9.4f} "
                     f"{r.confidence:5.3g} {r.trials:7d}  {verdict}{factor}")
    return "\n".join(lines)


def _features_of_runs(spec: MechanismSpec, data: np.ndarray, trials: int, *, epsilon: float, relation: str,
                      params: dict, features: FeatureFn, pair: NeighbourPair, rng: np.random.Generator) -> np.ndarray:
    return np.array([features(_release(spec, data, epsilon, relation, params, rng), pair)
                     for _ in range(trials)], dtype=float)


def _release(spec: MechanismSpec, data: np.ndarray, epsilon: float, relation: str, params: dict,
             rng: np.random.Generator) -> MechanismOutput:
    """One run as :func:`privsyn_core.synthesize` makes it, through the same steps
    (:func:`~privsyn_core.engine.pipeline.mechanism_inputs`, :func:`~privsyn_core.engine.pipeline.run_on_array`):
    the public record count (a noisy count under add/remove when the mechanism reads one, so the audited release
    includes that stage), the ledger its privacy map states (:func:`~privsyn_core.engine.pipeline.planned_ledger`),
    then the mechanism on the rest of epsilon, on unit rows (no codec), whose ledger must be that plan."""
    request = Request(spec, epsilon, relation, None, params, None)
    size, run_params = mechanism_inputs(request, len(data), {}, rng)
    plan = planned_ledger(request, size, run_params, data.shape[1])
    out = run_on_array(request, data, size, run_params, rng)
    check_planned(spec, out.ledger, plan)
    out.ledger = run_ledger(size, out)
    return out


def _thresholds(values: np.ndarray) -> np.ndarray:
    distinct = np.unique(values)
    if len(distinct) <= N_THRESHOLDS:
        return distinct
    return np.unique(np.quantile(values, np.linspace(0.0, 1.0, N_THRESHOLDS)))


def _scaled(fn: Callable, factor: float, position: int) -> Callable:
    name = list(inspect.signature(fn).parameters)[position]

    def law(*args, **kwargs):
        if len(args) > position:
            args = (*args[:position], args[position] * np.float64(factor), *args[position + 1:])
        else:
            kwargs[name] = kwargs[name] * np.float64(factor)
        return fn(*args, **kwargs)
    return law


def _relation(spec: MechanismSpec, neighbouring: str | None) -> str:
    if not spec.is_private:
        raise ParameterError(f"mechanism {spec.name!r} is not differentially private: there is no epsilon to audit")
    if neighbouring is None:
        return spec.neighbouring[0]
    if neighbouring not in spec.neighbouring:
        raise ParameterError(f"mechanism {spec.name!r} supports {list(spec.neighbouring)}, not {neighbouring!r}")
    return neighbouring


def _check_counts(trials: int, selection_trials: int, confidence: float) -> None:
    if not (isinstance(trials, int) and isinstance(selection_trials, int) and trials >= 10 and selection_trials >= 10):
        raise ParameterError("trials and selection_trials must be integers >= 10, "
                             f"got {trials!r}, {selection_trials!r}")
    if not 0 < confidence < 1:
        raise ParameterError(f"confidence must be in (0, 1), got {confidence!r}")


__all__ = ["AuditResult", "Event", "case_of", "detection_factor", "audit", "audit_all", "choose_event",
           "epsilon_lower_bound", "format_table", "neighbour_pair", "scaled_noise", "detection_power"]


def _beta() -> Any:
    """scipy's beta distribution, imported on first use (keeps ``import privsyn_core`` light)."""
    from scipy.stats import beta
    return beta
