"""Baselines: exact noise calibration per neighbouring relation, output shapes."""

import math

import numpy as np
import pytest
from scipy import stats

import privsyn_core as ps
from goodness_of_fit import ALPHA, discrete_laplace_pvalue


@pytest.mark.parametrize("relation, sensitivity", [("replace", 2), ("add_remove", 1)])
def test_dp_histogram_noise_is_discrete_laplace_at_the_calibrated_scale(relation, sensitivity):
    X = np.random.default_rng(0).random((400, 2))
    eps = 0.8
    result = ps.synthesize(X, "dp_histogram", eps, schema=ps.unit_schema(2), neighbouring=relation,
                           bins=60, rng=1)
    cells = result.diagnostics["cells"]
    noise = cells["noisy_count"] - cells["true_count"]
    assert noise.dtype.kind == "i"
    assert discrete_laplace_pvalue(noise, sensitivity / eps) > ALPHA
    assert math.fsum(e for _, e in result.ledger) == eps


def test_dp_histogram_output_shapes_and_weights():
    X = np.random.default_rng(3).random((1000, 3))
    result = ps.synthesize(X, "dp_histogram", 2.0, schema=ps.unit_schema(3), rng=2)
    k = result.params["bins"]
    assert k == math.floor((2.0 * 1000) ** (1 / 4))
    assert len(result.data) == 1000 and result.diagnostics["cells"]["lo"].shape == (k**3, 3)
    assert math.isclose(result.weights.sum(), 1.0)
    assert result.diagnostics["cells"]["count"].sum() == 1000


#: Mean exact W1 (l-inf) between the uniform table ``X`` below (seed 3, n = 1000, d = 3) and 1000 points drawn
#: uniformly WITHOUT looking at it: 0.0666 (sd 0.0037 over seeds 100..109; ``python -m benchmarks.bench_reference_w1``
#: prints it).  A mechanism that reads its cell counts must do better than any data-blind sampler.
DATA_BLIND_W1 = 0.0666


@pytest.mark.slow
def test_dp_histogram_beats_a_reference_that_ignores_the_data():
    """On uniform data a synthetic table may be near-uniform for the wrong reasons (cells transposed, counts
    ignored), and the old bound ``w1 < 0.25`` passed such mechanisms.  Threshold: 0.9 x the data-blind
    reference.  dp_histogram (eps = 2, k = 6) scores 0.0562 on average with sd 0.0005 per run (seeds 0..9), so
    the mean of two runs (sd 0.00035) lies 10 sd below 0.9 x 0.0666 = 0.0599 (false failure far below 1e-6).
    Power, checked below on the same runs: the rows with their axes permuted (a cell-order bug: counts land in
    the wrong cells) score 0.064-0.070 and rows moved to their cell's lower corner (an off-by-half-cell bug)
    0.12; both fail (both passed ``w1 < 0.25``)."""
    X = np.random.default_rng(3).random((1000, 3))
    threshold = 0.9 * DATA_BLIND_W1
    runs = [ps.synthesize(X, "dp_histogram", 2.0, schema=ps.unit_schema(3), rng=seed) for seed in (0, 1)]
    k = runs[0].params["bins"]

    def mean_w1(transform) -> float:
        return float(np.mean([ps.metrics.w1(X, transform(run.unit_rows)) for run in runs]))

    assert mean_w1(lambda rows: rows) < threshold
    assert mean_w1(lambda rows: rows[:, ::-1]) > threshold  # broken: cells transposed
    assert mean_w1(lambda rows: np.floor(rows * k) / k) > threshold  # broken: rows at the cells' lower corners


def test_dp_histogram_refuses_too_many_cells():
    with pytest.raises(ps.ParameterError, match="cells"):
        ps.synthesize(np.random.default_rng(0).random((10, 3)), "dp_histogram", 1.0,
                      schema=ps.unit_schema(3), bins=200)


def test_laplace_points_noise_scale_is_d_over_epsilon():
    d, eps, res = 2, 200.0, 1024
    X = np.full((20_000, d), 0.5)
    result = ps.synthesize(X, "laplace_points", eps, schema=ps.unit_schema(d), resolution=res, rng=4)
    grid_noise = np.rint(result.unit * res).astype(np.int64) - res // 2
    assert discrete_laplace_pvalue(grid_noise.ravel(), d * res / eps) > ALPHA
    assert result.params["noise_scale_unit"] == d / eps


def test_bootstrap_is_flagged_not_private():
    X = np.random.default_rng(5).random((100, 2))
    result = ps.synthesize(X, "bootstrap", 1.0, schema=ps.unit_schema(2), rng=0)
    assert not result.dp_valid and result.epsilon == math.inf
    assert not ps.get_mechanism("bootstrap").is_private
    assert {tuple(r) for r in result.unit} <= {tuple(r) for r in X}


@pytest.mark.slow
def test_utility_ordering_histogram_beats_naive_laplace():
    from privsyn_core.data.datasets import two_blobs

    X = two_blobs(4000, 2, 0)
    hist = ps.synthesize(X, "dp_histogram", 1.0, schema=ps.unit_schema(2), rng=0)
    naive = ps.synthesize(X, "laplace_points", 1.0, schema=ps.unit_schema(2), rng=0)
    sub = np.random.default_rng(0).choice(4000, 1500, replace=False)
    assert ps.metrics.w1(X[sub], hist.unit_rows[sub]) < ps.metrics.w1(X[sub], naive.unit_rows[sub])


@pytest.mark.slow
def test_dp_histogram_has_no_positional_bias_on_reflection_symmetric_data():
    """A 20 x 20 lattice is symmetric under x -> 1 - x and no point lies on an edge of the 10 x 10 grid, so the
    output law is symmetric and the synthetic mean of axis 0 has expectation 1/2.  Ties of equal noisy counts are
    frequent at this epsilon; breaking them by cell index shifted the mean towards the origin.  One-sample t-test
    over seeds at false-failure rate ALPHA."""
    axis = (np.arange(20) + 0.5) / 20
    X = np.stack(np.meshgrid(axis, axis), axis=-1).reshape(-1, 2)
    shifts = [ps.synthesize(X, "dp_histogram", 4.0, schema=ps.unit_schema(2), bins=10, sample="center",
                            rng=seed).unit_rows[:, 0].mean() - 0.5 for seed in range(300)]
    assert stats.ttest_1samp(shifts, 0.0).pvalue > ALPHA


@pytest.mark.parametrize("n, d, eps", [(1000, 1, 1.0), (10**4, 2, 1.0), (10**5, 2, 0.5), (10**6, 3, 1.0)])
def test_dp_histogram_auto_bins_balance_resolution_and_noise_mass(n, d, eps):
    """The error proxy 1/k + k^d/(eps n) of the module docstring at the automatic k is within a factor 2 of its
    minimum over all k (the balance k = (eps n)^{1/(d+1)} is within d^{1/(d+1)} of the exact minimiser)."""
    from privsyn_core.mechanisms.baselines.dp_histogram import auto_bins

    def proxy(k):
        return 1 / k + k ** d / (eps * n)
    best = min(proxy(k) for k in range(1, 2000))
    assert proxy(auto_bins(n, d, eps)) <= 2 * best


def test_laplace_points_says_when_it_is_no_better_than_uniform_points():
    """Issue 27, item 5: from the public noise scale d/epsilon >= 1/3 the release warns, and it is then indeed no
    closer to the data than a uniform sample on the box (W1, exact, fixed seeds)."""
    from privsyn_core.data.datasets import two_blobs

    X = two_blobs(1000, 2, rng=0)
    uniform = np.random.default_rng(1).random((1000, 2))
    loud = ps.synthesize(X, "laplace_points", 1.0, schema=ps.unit_schema(2), rng=0)
    assert any("drawn uniformly on the box" in w for w in loud.release().warnings)
    assert ps.metrics.w1(X, loud.unit_rows, method="exact") >= ps.metrics.w1(X, uniform, method="exact")
    quiet = ps.synthesize(X, "laplace_points", 20.0, schema=ps.unit_schema(2), rng=0)
    assert not any("uniformly" in w for w in quiet.release().warnings)
    assert ps.metrics.w1(X, quiet.unit_rows, method="exact") < ps.metrics.w1(X, uniform, method="exact")
