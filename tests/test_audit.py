"""The empirical privacy audit: it passes every registered private mechanism and catches mis-calibration.

Every audit here runs at confidence ``1 - alpha`` with ``alpha = 1e-6``: for a correctly
calibrated mechanism ``eps_lower <= epsilon`` fails with probability at most 1e-6 (the
Clopper-Pearson bounds are exact and the event is chosen on separate runs), so a failure
of a "passes" case is evidence of a real overspend.

Full power (``slow``): every private mechanism x every relation it supports is audited at the
budgets each mechanism declares in its registration (``MechanismSpec.audit``; fallback:
``release_features`` of :mod:`privsyn_core.mechanisms.base.audit` at the default budget), and paired with a
*detection* case at the same budget and event-selection procedure whose noise is scaled by the factor ``f``
that makes the mechanism spend ``2 epsilon`` on what the features read: ``f = L / (2 epsilon)`` with ``L`` the
loss of those stages at the claimed noise (``epsilon``; srw's own ``privacy_loss_bound``; the leaf stage of
kd_adaptive; for microagg_dp the part of its centre stage that the pair realises), capped at 1/2.  Every noise
scale times ``f`` divides every Laplace loss by ``f``.  The detection case must give ``eps_lower > epsilon``.  Its
false-failure rate is ``1 - audit.detection_power``: for the tight event (at most ``k`` independent noise
coordinates past their shift, mass ``>= 2^-k``, ratio ``e^{2 epsilon}``) it is below 1e-6 at
every budget used (checked by ``test_detection_factor_has_power_at_the_budget``), provided the
selection runs find that event.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy.stats import beta

import privsyn_core as ps
from privsyn_core import cli
from privsyn_core.errors import ParameterError
from privsyn_core.evaluation import audit
from privsyn_core.mechanisms.base.audit import AuditCase
from privsyn_core.mechanisms.hvz23 import pmm as pmm_module
from privsyn_core.mechanisms.hvz23.pmm_tree import NoisePlan
from privsyn_core.privacy import noise

CONFIDENCE = 1 - 1e-6
#: A mechanism run by an outside library (the optional OpenDP peers, ``implemented_by``) is not audited here: its
#: noise is the library's, which the noise factor cannot scale, and a run takes seconds (see audit.audit_all,
#: tests/test_peers.py).
AUDITED = [s for s in ps.list_mechanisms() if s.is_private and s.implemented_by is None]
PRIVATE = [(s.name, s.neighbouring[0]) for s in AUDITED]
#: Every private mechanism x every relation it supports: a new mechanism is covered automatically.
ALL_RELATIONS = [(s.name, relation) for s in AUDITED for relation in s.neighbouring]
DETECTION_MISS = 1e-6


def _case(name: str) -> AuditCase:
    return audit.case_of(ps.get_mechanism(name))


def detection_factor(name: str, relation: str, epsilon: float = 1.0) -> float:
    return audit.detection_factor(ps.get_mechanism(name), relation, epsilon)


def test_registry_has_the_private_mechanisms_of_the_contract():
    names = {name for name, _ in PRIVATE}
    assert {"pmm", "psmm", "srw", "srw_tsp", "kd_grid", "kd_adaptive", "microagg_dp", "laplace_points",
            "dp_histogram"} <= names
    assert all(ps.get_mechanism(name).audit is not None for name in names), "every private mechanism declares its audit"


@pytest.mark.parametrize("name, relation", ALL_RELATIONS)
def test_detection_factor_has_power_at_the_budget(name, relation):
    """At ``2 epsilon`` the tight event is detected at the case's budget except with probability < 1e-6."""
    case = _case(name)
    k = case.tight_coordinates
    assert 0 < detection_factor(name, relation) <= 0.5
    miss = 1 - audit.detection_power(2.0 ** -k, 2.0, 1.0, case.trials, 1 - CONFIDENCE)
    assert miss < DETECTION_MISS, (name, relation, miss)


@pytest.mark.slow
@pytest.mark.parametrize("name, relation", ALL_RELATIONS)
def test_private_mechanism_passes_at_full_budget(name, relation):
    result = audit.audit(name, 1.0, neighbouring=relation, confidence=CONFIDENCE, rng=1, case=_case(name))
    print(f"AUDIT {name} {relation} x1 eps_lower={result.eps_lower:.4f} trials={result.trials} "
          f"seconds={result.seconds:.1f} event={result.event}")
    assert 0.0 <= result.eps_lower <= result.epsilon, result
    assert not result.detected and sum(result.counts) <= 2 * result.trials


@pytest.mark.slow
@pytest.mark.parametrize("name, relation", ALL_RELATIONS)
def test_overspending_variant_is_detected_at_the_same_budget(name, relation):
    factor = detection_factor(name, relation)
    result = audit.audit(name, 1.0, neighbouring=relation, confidence=CONFIDENCE, rng=2, noise_factor=factor,
                         case=_case(name))
    print(f"AUDIT {name} {relation} x{factor:g} eps_lower={result.eps_lower:.4f} trials={result.trials} "
          f"seconds={result.seconds:.1f} event={result.event}")
    assert result.detected and result.eps_lower > 1.0, result


@pytest.mark.parametrize("name, relation", [("dp_histogram", "replace"), ("dp_histogram", "add_remove"),
                                            ("laplace_points", "replace")])
def test_half_scale_noise_is_detected(name, relation):
    """Noise at half its scale spends 2 epsilon; the tight events see it."""
    result = audit.audit(name, 1.0, neighbouring=relation, trials=2_000, selection_trials=600,
                         confidence=CONFIDENCE, rng=2, noise_factor=0.5)
    assert result.detected and result.eps_lower > 1.0, result


def test_correct_dp_histogram_is_audited_close_to_its_claim():
    """The same budget of runs gives a bound close to (and below) the claim for the correct mechanism."""
    result = audit.audit("dp_histogram", 1.0, neighbouring="replace", trials=2_000, selection_trials=600,
                         confidence=CONFIDENCE, rng=2)
    assert 0.4 < result.eps_lower <= 1.0, result


def test_pmm_with_unnormalised_level_scales_is_detected(monkeypatch):
    """Depth 2 under add/remove: three noisy levels each spending epsilon, i.e. 3 epsilon in truth."""
    original = pmm_module.noise_plan
    monkeypatch.setattr(pmm_module, "noise_plan", lambda *a, **k: _unnormalised_plan_from(original, *a, **k))
    result = audit.audit("pmm", 1.0, neighbouring="add_remove", trials=1_000, selection_trials=300,
                         confidence=CONFIDENCE, rng=3)
    assert result.detected and result.eps_lower > 1.5, result


def _unnormalised_plan_from(original, r, d, epsilon, neighbouring="add_remove") -> NoisePlan:
    """The kasanhyy/PMM bug: every level gets the full epsilon, while the ledger still claims epsilon."""
    plan = original(r, d, epsilon, neighbouring)
    sigmas = np.where(np.isfinite(plan.sigmas), plan.sensitivity / epsilon, np.inf)
    return NoisePlan(sigmas, plan.level_epsilons, plan.sensitivity, plan.ledger)


def test_pmm_correct_scales_pass_at_the_same_budget():
    result = audit.audit("pmm", 1.0, neighbouring="add_remove", trials=1_000, selection_trials=300,
                         confidence=CONFIDENCE, rng=3)
    assert result.eps_lower <= 1.0 and not result.detected, result


def test_epsilon_lower_bound_is_clopper_pearson():
    alpha, trials = 0.05, 1000
    got = audit.epsilon_lower_bound(np.array([400, 0, 1000]), np.array([100, 5, 0]), trials, alpha)
    lower = beta.ppf(alpha / 2, 400, trials - 400 + 1)
    upper = beta.ppf(1 - alpha / 2, 101, trials - 100)
    assert got[0] == pytest.approx(math.log(lower / upper), rel=1e-12)
    assert got[1] == 0.0  # the likelier event never happened: no evidence
    assert got[2] == pytest.approx(math.log(beta.ppf(alpha / 2, 1000, 1) / beta.ppf(1 - alpha / 2, 1, 1000)))


def test_choose_event_finds_a_planted_shift():
    rng = np.random.default_rng(0)
    base = np.column_stack([rng.normal(size=2000), rng.laplace(size=2000)])
    neighbour = np.column_stack([rng.normal(size=2000), rng.laplace(size=2000) + 3.0])
    event = audit.choose_event(base, neighbour)
    # The upper tail under D' and the lower tail under D are both tight for a shifted Laplace.
    assert event.index == 1 and event.upper == (event.likelier == 1)


@pytest.mark.parametrize("kind, relation, rows", [("continuous", "replace", 5), ("continuous", "add_remove", 6),
                                                  ("boolean", "replace", 5), ("boolean", "add_remove", 6)])
def test_neighbour_pair_differs_in_one_record(kind, relation, rows):
    pair = audit.neighbour_pair(kind, relation, 5, 3)
    assert pair.base.shape == (5, 3) and pair.neighbour.shape == (rows, 3)
    assert np.all(pair.base == 0) and np.all(pair.neighbour[0] == 1) and np.all(pair.neighbour[1:] == 0)


def test_scaled_noise_scales_and_restores():
    from privsyn_core.mechanisms.baselines import dp_histogram as module

    before = module.discrete_laplace
    with audit.scaled_noise(1e-9):
        draws = module.discrete_laplace(5.0, 1000, np.random.default_rng(0))
    assert module.discrete_laplace is before is noise.discrete_laplace
    assert np.all(draws == 0)
    with pytest.raises(ParameterError):
        with audit.scaled_noise(-1.0):
            pass


def test_scaled_noise_reaches_the_walk_and_the_empty_cells():
    """srw's lattice walk calls ``noise.fill_discrete_laplace`` through the module; kd_empty's laws are rescaled once,
    not twice."""
    from privsyn_core.mechanisms.kdtree import kd_empty
    from privsyn_core.mechanisms.random_walks import walks
    from privsyn_core.privacy import noise

    scales: list[float] = []
    original = noise._fill_discrete_laplace

    def spy(out, sigma, rng, **kwargs):
        scales.append(sigma)
        return original(out, sigma, rng, **kwargs)

    def walk():
        return walks.noisy_walk(np.zeros((3, 4), dtype=np.int64), np.random.default_rng(5), scale=2.0,
                                count_sensitivity=1, epsilon=1.0)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(noise, "_fill_discrete_laplace", spy)
        plain = walk()
        with audit.scaled_noise(0.5):
            walk()
    assert scales == [plain.discrete_scale, 0.5 * plain.discrete_scale]
    with audit.scaled_noise(0.5):
        tail = kd_empty.tail_probability(2, 1.0)
        ids, weights = kd_empty.sample_empty_cells(1000, np.arange(3), 2, 1.0, np.random.default_rng(6), 1e6)
    assert tail == pytest.approx(kd_empty.tail_probability(2, 0.5))
    expected = kd_empty.sample_empty_cells(1000, np.arange(3), 2, 0.5, np.random.default_rng(6), 1e6)
    assert np.array_equal(ids, expected[0]) and np.array_equal(weights, expected[1])


def test_audit_refuses_non_private_and_bad_arguments():
    with pytest.raises(ParameterError, match="not differentially private"):
        audit.audit("bootstrap")
    with pytest.raises(ParameterError, match="supports"):
        audit.audit("laplace_points", neighbouring="add_remove")
    with pytest.raises(ParameterError, match="confidence"):
        audit.audit("dp_histogram", confidence=1.0)
    with pytest.raises(ParameterError, match="trials"):
        audit.audit("dp_histogram", trials=5)


def test_cli_audit_table_and_exit_status(capsys):
    args = ["audit", "dp_histogram", "--neighbouring", "replace", "--trials", "1000", "--selection-trials", "300"]
    assert cli.main(args) == 0
    out = capsys.readouterr().out
    assert "dp_histogram" in out and "eps_lower" in out and "OVERSPENDS" not in out
    assert cli.main(args + ["--noise-factor", "0.3"]) == 1
    assert "OVERSPENDS" in capsys.readouterr().out
    assert cli.main(["audit", "bootstrap"]) == cli.EXIT_USAGE
    assert capsys.readouterr().err.startswith("error: ")


@pytest.mark.parametrize("name", [s.name for s in AUDITED])
def test_the_noise_factor_reaches_every_private_mechanism(name):
    """Same seed, noise x 0.5: the released output must change (a sampler the audit cannot scale is a hole in the
    detection cases, as PMM's in-place sampler was before it joined ``SCALED_LAWS``,
    :mod:`privsyn_core.mechanisms.base.audit`)."""
    spec = ps.get_mechanism(name)
    case = _case(name)
    pair = audit.neighbour_pair(spec.data_kind, spec.neighbouring[0], case.n,
                                case.d if spec.data_kind == "continuous" else max(case.d, 2))
    params = spec.resolve_params(case.params)

    def features(factor: float) -> np.ndarray:
        with audit.scaled_noise(factor):
            out = spec.run(pair.base, 1.0, neighbouring=spec.neighbouring[0], n_synthetic=None,
                           rng=np.random.default_rng(7), **params)
        return np.concatenate([np.ravel(np.asarray(a, dtype=float)) for a in _numbers(out.diagnostics)]
                              + [np.ravel(out.unit)])

    assert not np.array_equal(features(1.0), features(0.5)), f"{name}: noise x 0.5 left the output unchanged"


def _numbers(value) -> list:
    """Every numeric array or number inside nested dicts and lists (the run's noise and noisy statistics)."""
    if isinstance(value, dict):
        return [a for v in value.values() for a in _numbers(v)]
    if isinstance(value, (list, tuple)):
        return [a for v in value for a in _numbers(v)]
    array = np.asarray(value)
    return [array] if array.dtype.kind in "iuf" else []
