"""Online PMM's continual counters and release ([HVZ24] with the hybrid counter of [CSS11]).

Statistical tests use fixed seeds; thresholds come from the exact moments of discrete Laplace sums, at a stated
false-failure rate (six standard errors: about 2e-9 per check under a normal approximation).
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from privsyn_core.evaluation.audit import scaled_noise
from privsyn_core.evaluation.distances import w1
from privsyn_core.mechanisms.hvz23.pmm_tree import pathwise_bound, tree_counts
from privsyn_core.mechanisms.online import continual, online_pmm
from privsyn_core.mechanisms.online.continual import (
    CounterState,
    Segments,
    advance,
    block_of,
    error_variance,
    is_power_of_two,
    keyed_rng,
    node_label,
    nodes_containing,
)
from privsyn_core.mechanisms.online.online_pmm import StreamCounters
from privsyn_core.privacy.accounting import ledger_total
from privsyn_core.privacy.noise import discrete_laplace_pmf

KEY = bytes(range(32))


def _moments(sigma: float) -> tuple[float, float]:
    """Exact variance and fourth moment of Lap_Z(sigma) (pmf summed until the tail is below 1e-18)."""
    z = np.arange(-int(60 * sigma + 60), int(60 * sigma + 61))
    p = discrete_laplace_pmf(z, sigma)
    return float(np.sum(p * z ** 2)), float(np.sum(p * z.astype(float) ** 4))


def _sum_moments(scales: list[float]) -> tuple[float, float]:
    """Variance and fourth central moment of a sum of independent Lap_Z(scale)."""
    moments = [_moments(s) for s in scales]
    var = sum(v for v, _ in moments)
    fourth = sum(m4 for _, m4 in moments) + 3 * (var ** 2 - sum(v ** 2 for v, _ in moments))
    return var, fourth


def test_the_counter_is_exact_without_noise():
    """With (almost) zero noise every output is the true prefix sum, at every step up to 130."""
    rng = np.random.default_rng(0)
    seg = Segments((0, 5), (0.5,), (0.5,))
    state = CounterState.empty(5)
    total = np.zeros(5, dtype=np.int64)
    with scaled_noise(1e-9):
        for _ in range(130):
            x = rng.integers(0, 50, 5)
            total += x
            assert np.array_equal(advance(state, x, seg, keyed_rng(KEY)), total)


def test_each_record_is_in_one_block_and_at_most_k_p_sums_and_the_scales_pay_eps():
    """A record at step s changes exactly the nodes of ``nodes_containing`` (seen by comparing two runs with the
    same noise), at most one per binary level; sum over them of 1/scale is eps_log + eps_bin at most."""
    eps_log, eps_bin, horizon = 0.3, 0.7, 70
    seg = Segments((0, 1), (eps_log,), (eps_bin,))
    for s in range(1, horizon + 1):
        states = [CounterState.empty(1), CounterState.empty(1)]
        changed = []
        for t in range(1, horizon + 1):
            before = [(st.log_noisy.copy(), [a.copy() for a in st.alpha_noisy]) for st in states]
            for world, st in enumerate(states):
                advance(st, np.array([int(world == 1 and t == s)]), seg, keyed_rng(KEY))
            released = [_released_value(st, b) for st, b in zip(states, before, strict=True)]
            if released[0] != released[1]:
                assert released[1] - released[0] == 1
                changed.append(node_label(t)[0])
        assert sorted(changed) == sorted(nodes_containing(s, horizon)), s
        k = block_of(s)
        binary = [n for n in changed if n.startswith("bin/")]
        assert len(binary) <= k and len([n for n in changed if n.startswith("log/")]) <= 1
        loss = eps_log + len(binary) * eps_bin / max(k, 1)
        assert loss <= eps_log + eps_bin + 1e-12


def _released_value(state: CounterState, before) -> int:
    """The value of the node released at the state's last step."""
    t = state.step
    if is_power_of_two(t):
        return int((state.log_noisy - before[0])[0])
    u = t - (1 << block_of(t))
    i = (u & -u).bit_length() - 1
    return int(state.alpha_noisy[i][0])


@pytest.mark.parametrize("t", [1, 2, 3, 6, 7, 12, 16, 23])
def test_counter_error_has_the_exact_variance(t):
    """The error of C(t) over 20000 independent cells: mean 0 and variance ``error_variance`` (6 SE)."""
    m, eps_log, eps_bin = 20_000, 0.4, 0.6
    seg = Segments((0, m), (eps_log,), (eps_bin,))
    state = CounterState.empty(m)
    x = np.random.default_rng(t).integers(0, 3, m)
    for _ in range(t):
        out = advance(state, x, seg, keyed_rng(bytes([t]) * 32))
    err = out - t * x
    k = block_of(t)
    scales = [1 / eps_log] * (k + 1)
    if not is_power_of_two(t):
        scales += [k / eps_bin] * bin(t - (1 << k)).count("1")
    var, fourth = _sum_moments(scales)
    assert var == pytest.approx(error_variance(t, eps_log, eps_bin), rel=1e-9)
    assert abs(err.mean()) <= 6 * math.sqrt(var / m)
    assert abs(err.var() - var) <= 6 * math.sqrt((fourth - var ** 2) / m)


def test_noise_is_a_function_of_the_key_and_the_node():
    """Recomputing a step reproduces the noise; another key gives other noise."""
    seg = Segments((0, 100), (0.5,), (0.5,))
    runs = []
    for key in (KEY, KEY, bytes(32)):
        st = CounterState.empty(100)
        for _ in range(5):
            out = advance(st, np.ones(100, dtype=np.int64), seg, keyed_rng(key))
        runs.append(out)
    assert np.array_equal(runs[0], runs[1]) and not np.array_equal(runs[0], runs[2])


@pytest.mark.parametrize("depth,d,epsilon", [(0, 1, 1.0), (5, 1, 0.3), (12, 2, 1.0), (13, 3, 0.1), (7, 2, 2.7)])
def test_the_stream_ledger_sums_exactly_to_epsilon(depth, d, epsilon):
    plan = online_pmm.plan_stream(depth, d, epsilon)
    assert ledger_total(plan.ledger) == epsilon
    assert len(plan.ledger) == 2 * (depth + 1)
    assert math.fsum(plan.level_epsilons) == pytest.approx(epsilon, rel=1e-12)
    # the (A.4) weights: level budgets proportional to sqrt(Delta_{j-1})
    w = np.array([math.sqrt(online_pmm.level_delta(j - 1, d)) for j in range(depth + 1)])
    assert np.allclose(plan.level_epsilons / plan.level_epsilons.sum(), w / w.sum())


def test_increment_holds_every_level_in_heap_layout():
    unit = np.random.default_rng(1).random((300, 2))
    inc = online_pmm.batch_increment(unit, 6)
    levels = tree_counts(online_pmm.leaf_counts(unit, 6), 6)
    for j, level in enumerate(levels):
        assert np.array_equal(inc[2 ** j:2 ** (j + 1)], level)
    assert inc[0] == 0 and inc[1] == 300


def test_release_is_consistent_and_nonnegative():
    plan = online_pmm.plan_stream(5, 2, 0.5)
    state = StreamCounters.start(plan)
    for t in range(6):
        unit = np.random.default_rng(t).random((40, 2))
        out = online_pmm.step(state, online_pmm.batch_leaves(unit, 5), plan, keyed_rng(KEY))
        leaves = online_pmm.consistent_leaves(out)
        assert leaves.min() >= 0 and leaves.sum() == max(int(out[1]), 0)


def _run_stream(plan, batches, key: bytes, rule=None):
    """Yield (step, released estimates, true cumulative counts at the open depth, records so far)."""
    state = StreamCounters.start(plan)
    seen = np.empty((0, plan.d))
    for t, batch in enumerate(batches, 1):
        seen = np.vstack([seen, batch])
        out = online_pmm.step(state, online_pmm.batch_leaves(batch, plan.depth), plan, keyed_rng(key), rule)
        yield t, out, online_pmm.batch_increment(seen, online_pmm.tree_depth(out)), seen, state


def _batches(rng, d, steps, low=20, high=80):
    return [rng.random((int(rng.integers(low, high)), d)) ** 2 for _ in range(steps)]


@pytest.mark.parametrize("growing", [False, True])
def test_pathwise_w1_bound_holds_at_every_step(growing):
    """At every step W1(true so far, synthetic) <= the pathwise bound of [HVZ23] Thm 4.2's proof with the
    estimates' errors as lambda (exact l-infinity W1): fixed depths, and growing ones whose levels open after step 1
    (so their errors hold the split of the records before)."""
    rng = np.random.default_rng(5 + growing)
    late_openings = 0
    for run in range(6):
        d = 1 + run % 3
        epsilon = float(rng.choice([0.5, 2.0])) * (40 if growing else 1)
        plan = online_pmm.growing_plan(d, epsilon, 9) if growing else \
            online_pmm.plan_stream(int(rng.integers(2, 8)), d, epsilon)
        runs = list(_run_stream(plan, _batches(rng, d, 8), bytes([run]) * 32))
        for t, out, truth, seen, _ in runs:
            error = out - truth
            depth = online_pmm.tree_depth(out)
            lambdas = [error[2 ** j:2 ** (j + 1)] for j in range(depth + 1)]
            rows = online_pmm.synthetic_plan(out, d, np.random.default_rng(t)).all_rows()
            if len(rows) == 0:
                continue
            assert w1(seen, rows, metric="chebyshev") <= pathwise_bound(lambdas, len(seen), d) + 1e-9
        late_openings += max(runs[-1][4].opened) > 1
    assert late_openings >= 4 or not growing


def test_expected_w1_bound_dominates_the_mean_pathwise_bound():
    """E[pathwise bound] <= expected_w1_bound (the latter uses E|X| <= sd): checked on the mean of 200 runs with
    the bound's own slack (the mean's 6-SE band)."""
    plan = online_pmm.plan_stream(6, 2, 1.0)
    unit = np.random.default_rng(0).random((500, 2))
    values = []
    for run in range(200):
        *_, (_, out, truth, _, _) = _run_stream(plan, [unit] * 5, run.to_bytes(32, "little"))
        error = out - truth
        values.append(pathwise_bound([error[2 ** j:2 ** (j + 1)] for j in range(7)], 2500, 2))
    values = np.array(values)
    assert values.mean() - 6 * values.std() / math.sqrt(len(values)) <= online_pmm.expected_w1_bound(5, 2500, plan)


def test_expected_w1_bound_of_a_growing_tree_dominates_the_mean_pathwise_bound():
    """The same with levels opening after step 1 on a schedule fixed in advance (levels 0-1 at step 1, 2-3 at
    step 3, 4-5 at step 5), on skewed data so that the split of the records before the openings costs: at steps
    3 to 7, mean of 200 runs within its 6-SE band."""
    plan = online_pmm.growing_plan(2, 20.0, 5)
    schedule = {1: 1, 2: 1, 3: 3, 4: 3}
    opened = [1, 1, 3, 3, 5, 5]
    unit = np.random.default_rng(1).random((400, 2)) ** 3
    values = {t: [] for t in range(3, 8)}
    for run in range(200):
        runs = list(_run_stream(plan, [unit] * 7, run.to_bytes(32, "little"), lambda root, t: schedule.get(t, 5)))
        for t, out, truth, _, _ in runs:
            if t >= 3:
                error = out - truth
                depth = online_pmm.tree_depth(out)
                values[t].append(pathwise_bound([error[2 ** j:2 ** (j + 1)] for j in range(depth + 1)], 400 * t, 2))
        assert runs[-1][4].opened == opened
    for t, v in values.items():
        v = np.array(v)
        open_now = [s for s in opened if s <= t]
        bound = online_pmm.expected_w1_bound(t, 400 * t, plan, open_now, [400 * (s - 1) for s in open_now])
        assert v.mean() - 6 * v.std() / math.sqrt(len(v)) <= bound, t


def test_the_growing_ledger_commits_every_level_and_sums_to_epsilon():
    plan = online_pmm.growing_plan(2, 0.7)
    assert plan.depth == online_pmm.MAX_STREAM_DEPTH and plan.growing
    assert ledger_total(plan.ledger) == 0.7 and len(plan.ledger) == 2 * (online_pmm.MAX_STREAM_DEPTH + 1)
    w = np.array([(j + 2.0) ** -2 for j in range(online_pmm.MAX_STREAM_DEPTH + 1)])
    assert np.allclose(plan.level_epsilons / 0.7, w / w.sum())


def test_levels_open_when_the_released_total_passes_their_threshold():
    """The rule is PMM's depth floor(log2(eps_j / g(t) * N)) - [d = 1] >= j, read off the released root only."""
    for d in (1, 2, 3):
        plan = online_pmm.growing_plan(d, 1.0)
        for t in (1, 5, 48):
            for j in range(1, 8):
                threshold = plan.opening_threshold(j, t)
                eps = plan.level_epsilons[j] / online_pmm.counter_inflation(t)
                assert online_pmm.paper_depth(math.ceil(threshold) + 1, eps, d) >= j
                assert online_pmm.paper_depth(math.floor(threshold) - 1, eps, d) < j
                assert plan.opening_depth(math.ceil(threshold), t) >= j > plan.opening_depth(math.floor(threshold), t)
    assert online_pmm.plan_stream(4, 2, 1.0).opening_depth(0, 1) == 4


def test_a_level_counts_only_the_records_from_its_opening_on():
    """Without noise: a level opened at step s holds the split of the release of step s-1 (ceil to the first
    child, floor to the second) plus the true counts of the steps from s on; the rule sees the released root."""
    plan = online_pmm.growing_plan(2, 1.0, 6)
    rng = np.random.default_rng(3)
    batches = [rng.random((50, 2)) for _ in range(6)]
    seen_roots = []

    def rule(root, t):
        seen_roots.append(root)
        return {1: 1, 3: 4}.get(t, 4 if t > 3 else 1)
    with scaled_noise(1e-9):
        runs = list(_run_stream(plan, batches, KEY, rule))
    released = {t: out for t, out, _, _, _ in runs}
    assert seen_roots == [50 * t for t in range(1, 7)] and runs[-1][4].opened == [1, 1, 3, 3, 3]
    expected = online_pmm.split_down(released[2], 1, 4)
    expected += online_pmm.batch_increment(np.vstack(batches[2:]), 4)
    expected[:4] = released[6][:4]
    assert np.array_equal(released[6], expected)
    assert online_pmm.split_down(np.array([0, 5]), 0, 2).tolist() == [0, 5, 3, 2, 2, 1, 1, 1]
    assert online_pmm.split_down(np.array([0, -3]), 0, 1).tolist() == [0, -3, -1, -2]


def test_node_labels_are_unique():
    labels = [node_label(t)[0] for t in range(1, 300)]
    assert len(set(labels)) == len(labels)
    assert continual.nodes_containing(1, 1) == ["log/0"]


def test_the_stream_draws_no_continuous_noise(tmp_path, monkeypatch):
    """Every counter node and the rows draw from a generator whose continuous samplers raise: the counts get exact
    integer noise (the discrete Laplace sampler uses integers only; rows inside released cells may use random())."""
    import pandas as pd

    import privsyn_core as ps
    from privsyn_core import stream as stream_module

    def forbidden(name):
        def sampler(self, *args, **kwargs):
            raise AssertionError(f"continuous sampler {name} called")
        return sampler

    integer_only = type("IntegerOnly", (np.random.Generator,),
                        {n: forbidden(n) for n in ("laplace", "exponential", "standard_exponential", "normal",
                                                   "standard_normal", "gumbel", "logistic", "gamma", "geometric")})
    monkeypatch.setattr(stream_module, "keyed_rng", lambda key: lambda label: integer_only(np.random.PCG64(7)))
    stream = stream_module.open_stream(tmp_path / "s.json", ps.unit_schema(2), 1.0, create=True, depth=6, rng=0)
    for t in range(5):
        release = stream.add(pd.DataFrame(np.random.default_rng(t).random((100, 2)), columns=["x0", "x1"]))
    assert release.params["step"] == 5
