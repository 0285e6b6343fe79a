"""Privacy audit of online PMM over a whole stream (:mod:`privsyn_core.evaluation.stream_audit`).

The attacker sees every release of every step; the neighbours differ by one record added at one step.  Each
passing audit runs at confidence ``1 - 1e-6`` (a correctly calibrated stream fails it with probability at most
1e-6) and is paired with a detection case at the same budget whose noise is scaled down, so that the stream
spends ``epsilon / factor``; its false-failure rate is ``1 - detection_power`` of the tight event, bounded below.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from privsyn_core.evaluation import audit
from privsyn_core.evaluation.stream_audit import (
    audit_stream,
    growing_loss,
    node_values,
    opening_surge,
    stream_pair,
    tight_coordinates,
)
from privsyn_core.mechanisms.online import online_pmm
from privsyn_core.mechanisms.online.continual import nodes_containing
from privsyn_core.mechanisms.online.online_pmm import StreamCounters
from privsyn_core.privacy.noise import discrete_laplace_pmf

CONFIDENCE = 1 - 1e-6
TRIALS, SELECTION = 6_000, 2_000


@pytest.mark.slow
def test_stream_audit_passes_at_full_budget():
    result = audit_stream(1.0, trials=TRIALS, selection_trials=SELECTION, confidence=CONFIDENCE, rng=1)
    print(f"AUDIT stream x1 eps_lower={result.eps_lower:.4f} event={result.event} counts={result.counts}")
    assert 0.0 <= result.eps_lower <= 1.0 and not result.detected, result


@pytest.mark.slow
@pytest.mark.parametrize("factor", [0.5, 0.1])
def test_stream_audit_detects_scaled_down_noise_at_the_same_budget(factor):
    result = audit_stream(1.0, trials=TRIALS, selection_trials=SELECTION, confidence=CONFIDENCE, rng=2,
                          noise_factor=factor)
    print(f"AUDIT stream x{factor} eps_lower={result.eps_lower:.4f} event={result.event} counts={result.counts}")
    assert result.detected and result.eps_lower > 1.0, result


def test_the_detection_case_has_power():
    """At factor 1/2 the tight event (4 coordinates, each past its shift under D' with probability
    ``1/(1+p_i)``, ``p_i = exp(-1/sigma_i)`` at the scaled noise) has ratio e^2: missed with probability < 1e-6
    at these trials (provided the selection runs find it)."""
    assert tight_coordinates(1, 1) == 4
    plan = online_pmm.plan_stream(1, 1, 1.0)
    scales = [0.5 / e for j in range(2) for e in (plan.eps_log[j], plan.eps_bin[j])]
    mass = math.prod(1 / (1 + math.exp(-1 / s)) for s in scales)
    miss = 1 - audit.detection_power(mass, 2.0, 1.0, TRIALS, 1 - CONFIDENCE)
    assert miss < 1e-6


def test_the_tight_event_has_ratio_exactly_e_to_the_epsilon():
    """P(all shifted node values >= 1 | D') / P(... | D) = prod P(Z >= 0)/P(Z >= 1) = exp(sum 1/sigma) = e^eps."""
    plan = online_pmm.plan_stream(1, 1, 1.0)
    scales = []
    for j in range(2):
        scales += [1 / plan.eps_log[j], 1 / plan.eps_bin[j]]  # k = 1: one p-sum, scale 1/eps_bin
    z = np.arange(0, 400)
    ratio = 1.0
    for s in scales:
        tail0, tail1 = discrete_laplace_pmf(z, s).sum(), discrete_laplace_pmf(z[1:], s).sum()
        ratio *= tail0 / tail1
    assert math.log(ratio) == pytest.approx(1.0, rel=1e-9)


def test_node_values_are_read_off_the_released_counters():
    """Without noise the recovered node values are the true node sums (block sums and p-sums)."""
    plan = online_pmm.plan_stream(1, 1, 1.0)
    leaves, _ = stream_pair(8, 5, 3, 1, 1)
    with audit.scaled_noise(1e-9):
        state = StreamCounters.start(plan)
        series = np.array([online_pmm.step(state, x, plan, lambda label: np.random.default_rng(0)) for x in leaves])
    labels = nodes_containing(5, 8)
    assert labels == ["log/3", "bin/2/1", "bin/2/2"]
    assert node_values(series[:, 1], labels).tolist() == [12, 3, 6]  # (4,8]: 4 steps; u=1: step 5; u in (0,2]


@pytest.mark.slow
def test_a_moved_record_is_audited_against_twice_epsilon_and_its_detection_case():
    """Moving a record (two add/remove changes) is claimed at 2 epsilon; the pair realises 2 (epsilon - eps_0)
    (the root does not change), so the detection case scales the noise by L / (2 claim) to spend twice the
    claim.  Both at the same budget and trials."""
    from privsyn_core.evaluation.stream_audit import move_loss

    loss = move_loss(1.0, 1, 1)
    assert loss == pytest.approx(1.0)
    passed = audit_stream(1.0, trials=TRIALS, selection_trials=SELECTION, confidence=CONFIDENCE, rng=3,
                          relation="move")
    print(f"AUDIT stream move x1 eps_lower={passed.eps_lower:.4f} claim={passed.epsilon}")
    assert passed.epsilon == 2.0 and not passed.detected, passed
    factor = loss / (2 * passed.epsilon)
    caught = audit_stream(1.0, trials=TRIALS, selection_trials=SELECTION, confidence=CONFIDENCE, rng=3,
                          relation="move", noise_factor=factor)
    print(f"AUDIT stream move x{factor:g} eps_lower={caught.eps_lower:.4f} claim={caught.epsilon}")
    assert caught.detected and caught.eps_lower > 2.0, caught


# -- a growing depth: levels open at the step of the changed record ------------------------------------------------
@pytest.mark.slow
def test_growing_stream_audit_passes_at_full_budget_with_the_levels_opening_at_the_records_step():
    """Level 1 opens at the very step where the neighbours differ (the surge makes the released total pass its
    threshold there; a run where it does not open gives the feature NOT_OPENED): the pair realises
    ``eps_0 + eps_1 / 2`` < epsilon, and the audit stays below the claim."""
    result = audit_stream(1.0, trials=TRIALS, selection_trials=SELECTION, confidence=CONFIDENCE, rng=4, growing=True)
    print(f"AUDIT growing x1 eps_lower={result.eps_lower:.4f} event={result.event} counts={result.counts}")
    assert 0.0 <= result.eps_lower <= growing_loss(1.0, 1, 1) and not result.detected, result


@pytest.mark.slow
def test_growing_stream_audit_detects_scaled_down_noise():
    result = audit_stream(1.0, trials=TRIALS, selection_trials=SELECTION, confidence=CONFIDENCE, rng=5, growing=True,
                          noise_factor=0.5)
    print(f"AUDIT growing x0.5 eps_lower={result.eps_lower:.4f} event={result.event} counts={result.counts}")
    assert result.detected and result.eps_lower > 1.0, result


@pytest.mark.slow
def test_an_opening_rule_reading_the_true_total_is_detected():
    """The detection case of the opening itself: ``D``'s true total is one below level 1's threshold at the changed
    step, so a rule reading it opens level 1 there under ``D'`` and never under ``D``."""
    result = audit_stream(1.0, trials=TRIALS, selection_trials=SELECTION, confidence=CONFIDENCE, rng=6, growing=True,
                          opening="true")
    print(f"AUDIT growing opening=true eps_lower={result.eps_lower:.4f} event={result.event} counts={result.counts}")
    assert result.detected and result.eps_lower > 3.0, result


def test_the_growing_pair_opens_level_1_at_the_records_step_and_not_before():
    """Without noise the released total passes level 1's threshold at the changed step only (surge "released"); the
    truth-reading variant's ``D`` stays one below it.  And the realised loss has the ratio of the tight event:
    the root's block and p-sum, and level 1's first block, each shifted by one."""
    plan = online_pmm.growing_plan(1, 1.0, 1)
    for opening, opens_at in (("released", 3), ("true", 4)):
        leaves, _ = stream_pair(4, 3, 3, 1, 1, surge=opening_surge(plan, 3, 3, opening))
        state = StreamCounters.start(plan)
        with audit.scaled_noise(1e-9):
            for x in leaves:
                online_pmm.step(state, x, plan, lambda label: np.random.default_rng(0))
        assert state.opened == [1, opens_at], opening
    assert opening_surge(plan, 3, 3, "true") + 9 == math.ceil(plan.opening_threshold(1, 3)) - 1
    scales = [1 / plan.eps_log[0], 1 / plan.eps_bin[0], 1 / plan.eps_log[1]]
    z = np.arange(0, 400)
    log_ratio = sum(math.log(discrete_laplace_pmf(z, s).sum() / discrete_laplace_pmf(z[1:], s).sum()) for s in scales)
    assert log_ratio == pytest.approx(growing_loss(1.0, 1, 1), rel=1e-9) and growing_loss(1.0, 1, 1) < 1.0


def test_the_growing_detection_case_has_power():
    """At factor 1/2 the tight event (3 coordinates) has ratio exp(2 L): missed with probability < 1e-6."""
    plan = online_pmm.growing_plan(1, 1.0, 1)
    scales = [0.5 / plan.eps_log[0], 0.5 / plan.eps_bin[0], 0.5 / plan.eps_log[1]]
    mass = math.prod(1 / (1 + math.exp(-1 / s)) for s in scales)
    miss = 1 - audit.detection_power(mass, growing_loss(1.0, 1, 1) / 0.5, 1.0, TRIALS, 1 - CONFIDENCE)
    assert miss < 1e-6
