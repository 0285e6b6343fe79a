"""Noise primitives: exact laws (chi-square / KS at alpha = 1e-6), variances, seeding."""

import math

import numpy as np
import pytest
from scipy import stats

from goodness_of_fit import ALPHA, chi_square_pvalue
from privsyn_core.privacy import noise


@pytest.mark.parametrize("sigma", [0.3, 1.0, 5.0])
def test_discrete_laplace_matches_its_pmf(sigma):
    rng = np.random.default_rng(12345)
    z = noise.discrete_laplace(sigma, 40_000, rng)
    assert z.dtype == np.int64
    support = np.arange(-int(12 * sigma) - 3, int(12 * sigma) + 4)
    p = chi_square_pvalue(z, lambda s: noise.discrete_laplace_pmf(s, sigma), support)
    assert p > ALPHA, f"chi-square p={p:.2e} < {ALPHA}: the sampler does not follow Lap_Z({sigma})"


@pytest.mark.parametrize("sigma", [0.3, 1.0, 5.0, 40.0])
def test_discrete_laplace_variance(sigma):
    """Sample variance within 5.3 standard errors (two-sided ~1e-7) of 2p/(1-p)^2."""
    n = 200_000
    z = noise.discrete_laplace(sigma, n, np.random.default_rng(7)).astype(float)
    var = noise.discrete_laplace_variance(sigma)
    support = np.arange(-int(60 * sigma) - 10, int(60 * sigma) + 11)
    fourth = float(np.sum(noise.discrete_laplace_pmf(support, sigma) * support.astype(float) ** 4))
    standard_error = math.sqrt((fourth - var**2) / n)
    assert abs(z.var() - var) < 5.3 * standard_error
    assert var < 2 * sigma**2  # eq. (B.1) of seed 004


def test_discrete_laplace_pmf_sums_to_one_and_edge_cases():
    support = np.arange(-2000, 2001)
    assert math.isclose(noise.discrete_laplace_pmf(support, 3.0).sum(), 1.0, rel_tol=1e-12)
    rng = np.random.default_rng(0)
    assert np.all(noise.discrete_laplace(0.0, 100, rng) == 0)
    big = noise.discrete_laplace(1e9, 10, rng)
    assert big.dtype == np.int64
    with pytest.raises(ValueError):
        noise.discrete_laplace(-1.0, 3, rng)
    with pytest.raises(ValueError):
        noise.discrete_laplace(np.inf, 3, rng)
    with pytest.raises(ValueError):
        noise.discrete_laplace(1.0, 3, None)


def test_laplace_law_and_tail():
    x = noise.laplace(2.0, 20_000, np.random.default_rng(3))
    assert stats.kstest(x, "laplace", args=(0, 2.0)).pvalue > ALPHA
    assert noise.laplace_tail(0.0, 2.0) == 0.5
    assert math.isclose(noise.laplace_tail(2.0, 2.0), 0.5 * math.exp(-1))
    assert math.isclose(noise.laplace_tail(-2.0, 2.0), 1 - 0.5 * math.exp(-1))


@pytest.mark.parametrize("t", [0.0, 3.0])
def test_conditional_laplace_nonnegative_threshold_is_shifted_exponential(t):
    x = noise.conditional_laplace(2.0, t, 20_000, np.random.default_rng(5))
    assert x.min() >= t
    assert stats.kstest(x - t, "expon", args=(0, 2.0)).pvalue > ALPHA


def test_conditional_laplace_negative_threshold_matches_conditional_cdf():
    b, t = 1.5, -2.0
    x = noise.conditional_laplace(b, t, 20_000, np.random.default_rng(6))
    assert x.min() >= t
    lower = stats.laplace.cdf(t, scale=b)
    cdf = lambda v: (stats.laplace.cdf(v, scale=b) - lower) / (1 - lower)
    assert stats.kstest(x, cdf).pvalue > ALPHA


def test_binomial_big_beyond_int64():
    rng = np.random.default_rng(11)
    count, p = 2**70, 2.0**-60  # mean 1024, variance ~ 1024
    draws = np.array([noise.binomial_big(count, p, rng) for _ in range(200)], dtype=float)
    assert abs(draws.mean() - 1024) < 5.3 * math.sqrt(1024 / 200)
    assert noise.binomial_big(0, 0.5, rng) == 0
    assert noise.binomial_big(10, 1.0, rng) == 10
    with pytest.raises(ValueError):
        noise.binomial_big(-1, 0.5, rng)


def test_resolve_rng_seeding():
    g1, s1 = noise.resolve_rng(42)
    g2, s2 = noise.resolve_rng(42)
    assert s1 == s2 == 42 and g1.random() == g2.random()
    g3, s3 = noise.resolve_rng(None)  # a release by default: the secure generator, no seed to replay it
    assert s3 is None and type(g3.bit_generator).__name__ == "ChaCha"
    gen = np.random.default_rng(0)
    assert noise.resolve_rng(gen) == (gen, None)
    secure, seed = noise.resolve_rng("secure")
    assert seed is None and isinstance(secure, np.random.Generator)
    for bad in (-1, True, 1.5, "seed"):
        with pytest.raises((TypeError, ValueError)):
            noise.resolve_rng(bad)


def _g_test_pvalue(samples: np.ndarray, sigma: float) -> float:
    """G-test (likelihood ratio) of integer samples against ``Lap_Z(sigma)``; cells with expected < 5 pooled."""
    half = int(30 * sigma) + 5
    support = np.arange(-half, half + 1)
    observed = np.bincount(np.clip(samples, -half - 1, half + 1) + half + 1, minlength=2 * half + 3).astype(float)
    inner = noise.discrete_laplace_pmf(support, sigma)
    tail = (1.0 - inner.sum()) / 2
    expected = np.concatenate([[tail], inner, [tail]]) * len(samples)
    keep = expected >= 5
    obs = np.append(observed[keep], observed[~keep].sum())
    exp = np.append(expected[keep], expected[~keep].sum())
    if exp[-1] < 5:  # pool the remainder into the last kept cell
        obs[-2] += obs[-1]
        exp[-2] += exp[-1]
        obs, exp = obs[:-1], exp[:-1]
    return stats.power_divergence(obs, exp, lambda_="log-likelihood").pvalue


@pytest.mark.parametrize("sigma", [0.25, 1.0, 3.0, 50.0])
def test_fast_sampler_matches_the_pmf_g_test(sigma):
    """The sign-and-magnitude sampler with rejection (noise.fill_discrete_laplace) against the exact pmf.

    10^6 draws per scale, G-test at ALPHA = 1e-6 (false-failure rate 1e-6 per scale); at sigma = 0.25 about
    49% of the pairs are rejected and redrawn, at 50 about 1%, so both regimes of the rejection loop are
    covered.  The chunked, in-place variant (``add=True`` into counts) is tested on the same draws' law.
    """
    z = noise.discrete_laplace(sigma, 1_000_000, np.random.default_rng(2024))
    assert z.dtype == np.int64
    p = _g_test_pvalue(z, sigma)
    assert p > ALPHA, f"G-test p={p:.2e} < {ALPHA}: the sampler does not follow Lap_Z({sigma})"
    base = np.full(1_000_000, 7, dtype=np.int64)
    noise.fill_discrete_laplace(base, sigma, np.random.default_rng(99), add=True)
    p = _g_test_pvalue(base - 7, sigma)
    assert p > ALPHA, f"G-test p={p:.2e} < {ALPHA}: added noise does not follow Lap_Z({sigma})"


def test_fast_sampler_g_test_detects_a_wrong_scale():
    """Paired detection case: the same test rejects Lap_Z(1.1 sigma) draws tested as Lap_Z(sigma)."""
    z = noise.discrete_laplace(1.1 * 3.0, 1_000_000, np.random.default_rng(5))
    assert _g_test_pvalue(z, 3.0) < ALPHA


def test_discrete_laplace_shapes_and_array_scales():
    rng = np.random.default_rng(1)
    assert noise.discrete_laplace(2.0, rng=rng).shape == ()
    assert noise.discrete_laplace(2.0, (2, 3), rng).shape == (2, 3)
    assert noise.discrete_laplace(2.0, 0, rng).shape == (0,)
    mixed = noise.discrete_laplace(np.array([0.0, 1e3]), (5000, 2), rng)
    assert np.all(mixed[:, 0] == 0) and mixed[:, 1].std() > 500


@pytest.mark.parametrize("sigma", [0.0, 0.25, 3.0])
def test_fill_clip_at_zero_is_the_clamped_sum_of_the_same_draws(sigma):
    """``clip_at_zero=True`` (PMM's ``(n + lambda)_+`` in one pass) gives ``max(n + lambda, 0)`` with the very
    draws of the unclamped call (same seed, bit for bit), over several chunks; deterministic."""
    counts = np.random.default_rng(3).integers(0, 4, size=3 * noise.NOISE_CHUNK + 17)
    plain, clamped = counts.copy(), counts.copy()
    noise.fill_discrete_laplace(plain, sigma, np.random.default_rng(8), add=True)
    noise.fill_discrete_laplace(clamped, sigma, np.random.default_rng(8), add=True, clip_at_zero=True)
    assert np.array_equal(clamped, np.maximum(plain, 0))
    assert sigma == 0.0 or (plain < 0).any()  # the clamp had something to do


@pytest.mark.parametrize("sigma", [1e-3, 0.25, 2.0, 2.5, 7.5, 300.0, 1e9, 1e15])
def test_geometric_minus_one_gives_numpy_geometric_draws_bit_for_bit(sigma):
    """The discrete Laplace magnitudes come from ``geometric_minus_one``, which must give exactly the integers of
    ``Generator.geometric(p) - 1`` from the same stream (deterministic): on both sides of numpy's switch from
    its search to its inversion algorithm (p = 1/3: sigma = 2.0 and 0.25 search, 2.5 and up invert), and
    beyond the inversion path's bound (sigma = 1e15 calls ``geometric`` itself), and at success probability 1
    (sigma = 1e-3: ``log1p(-1)`` must not be taken).  The law of the draws is
    covered by the G-tests above (sigma = 3 and 50 take the inversion path)."""
    success = -np.expm1(-1.0 / sigma)
    ours = np.empty(200_000, dtype=np.int64)
    generator = np.random.default_rng(11)
    noise.geometric_minus_one(ours, success, generator)
    reference = np.random.default_rng(11)
    assert np.array_equal(ours, reference.geometric(success, len(ours)) - 1)
    assert generator.random() == reference.random()  # the same amount of the stream was used
