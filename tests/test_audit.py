"""The empirical privacy audit: it passes every registered private mechanism and catches mis-calibration.

Every audit here runs at confidence ``1 - alpha`` with ``alpha = 1e-6``: for a correctly
calibrated mechanism ``eps_lower <= epsilon`` fails with probability at most 1e-6 (the
Clopper-Pearson bounds are exact and the event is chosen on separate runs), so a failure
of ``test_every_private_mechanism_passes`` is evidence of a real overspend.  The
mis-calibrated variants spend 2-3 times their claim and must be *detected*
(``eps_lower > epsilon``), which shows that the audit can fail.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy.stats import beta

import privsyn_core as ps
from privsyn_core import audit, cli, noise
from privsyn_core.errors import ParameterError
from privsyn_core.mechanisms import pmm as pmm_module
from privsyn_core.pmm_tree import NoisePlan

CONFIDENCE = 1 - 1e-6
#: Runs (evaluation, selection) per dataset: enough for a non-trivial bound, small enough for a quick suite.
QUICK = {"psmm": (150, 50), "kd_adaptive": (300, 100), "microagg_dp": (400, 150)}
DEFAULT_QUICK = (800, 300)
PRIVATE = [(s.name, s.neighbouring[0]) for s in ps.list_mechanisms() if s.is_private]


def test_registry_has_the_private_mechanisms_of_the_contract():
    names = {name for name, _ in PRIVATE}
    assert {"pmm", "psmm", "srw", "srw_tsp", "kd_grid", "kd_adaptive", "microagg_dp", "laplace_points",
            "dp_histogram"} <= names
    assert names <= set(audit.FEATURES), "every private mechanism has tuned audit features"


@pytest.mark.parametrize("name, relation", PRIVATE)
def test_every_private_mechanism_passes(name, relation):
    trials, selection = QUICK.get(name, DEFAULT_QUICK)
    result = audit.audit(name, 1.0, neighbouring=relation, trials=trials, selection_trials=selection,
                         confidence=CONFIDENCE, rng=1)
    assert 0.0 <= result.eps_lower <= result.epsilon, result
    assert not result.detected and sum(result.counts) <= 2 * trials


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
    from privsyn_core.mechanisms import dp_histogram as module

    before = module.discrete_laplace
    with audit.scaled_noise(1e-9):
        draws = module.discrete_laplace(5.0, 1000, np.random.default_rng(0))
    assert module.discrete_laplace is before is noise.discrete_laplace
    assert np.all(draws == 0)
    with pytest.raises(ParameterError):
        with audit.scaled_noise(-1.0):
            pass


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
