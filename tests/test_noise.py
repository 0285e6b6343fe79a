"""Noise primitives: exact laws (chi-square / KS at alpha = 1e-6), variances, seeding."""

import dataclasses
import math
from fractions import Fraction

import numpy as np
import pytest
from scipy import stats

from goodness_of_fit import ALPHA, chi_square_pvalue
from privsyn_core.errors import ParameterError
from privsyn_core.privacy import laplace_tables, noise


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
    assert big.dtype == np.int64 and np.abs(big).max() > 10 ** 6
    with pytest.raises(ValueError):
        noise.discrete_laplace(-1.0, 3, rng)
    with pytest.raises(ValueError):
        noise.discrete_laplace(np.inf, 3, rng)
    with pytest.raises(ValueError):
        noise.discrete_laplace(1.0, 3, None)


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
    """G-test (likelihood ratio) of integer samples against the exact law ``Lap_Z(sigma)``, binned.

    Cells: ``{0}``, and on each side the integer intervals ``[k_j, k_{j+1})`` with ``k_j`` the distinct values of
    1 and ``floor(sigma x)`` for ``x = 0.05, 0.10, ..., 10``, or every integer up to ``30 sigma + 5`` when there
    are at most 200 of them (small scales are tested point by point), then the tails ``[k_last, inf)``.  Masses
    from the exact tail ``P(Z >= k) = p^k / (1 + p)``; cells with expected count below 5 are pooled.
    """
    p = math.exp(-1.0 / sigma)
    half = int(30 * sigma) + 5
    grid = np.arange(1, half + 1) if half <= 200 else np.floor(sigma * np.arange(1, 201) / 20)
    edges = np.unique(np.concatenate([[1], grid])).astype(np.int64)  # k_1 = 1
    tail = np.exp(-edges / sigma) / (1 + p)  # P(Z >= k_j), decreasing
    side = np.append(tail[:-1] - tail[1:], tail[-1])  # [k_j, k_{j+1}) and [k_last, inf)
    expected = np.concatenate([side[::-1], [(1 - p) / (1 + p)], side]) * len(samples)
    cuts = np.concatenate([1 - edges[::-1], edges])  # left ends of the cells after the first
    observed = np.bincount(np.searchsorted(cuts, samples, side="right"), minlength=len(expected)).astype(float)
    keep = expected >= 5
    obs = np.append(observed[keep], observed[~keep].sum())
    exp = np.append(expected[keep], expected[~keep].sum())
    if exp[-1] < 5:  # pool the remainder into the last kept cell
        obs[-2] += obs[-1]
        exp[-2] += exp[-1]
        obs, exp = obs[:-1], exp[:-1]
    return stats.power_divergence(obs, exp * (obs.sum() / exp.sum()), lambda_="log-likelihood").pvalue


#: Scales of the G-tests: small (about half the attempts rejected), integer (t = 1 and t = 1000), the
#: non-dyadic 1/0.3 (the float 7505999378950827 / 2^51), a large one and a dyadic fraction.
G_SCALES = [0.25, 1.0, 1 / 0.3, 50.0, 1000.0, 123456.789]


@pytest.mark.parametrize("sigma", G_SCALES)
def test_sampler_matches_the_pmf_g_test(sigma):
    """The integer-only sampler (CKS20 Algorithms 1-2, noise.fill_discrete_laplace) against the exact pmf.

    10^6 draws per scale, G-test at ALPHA = 1e-6: a false failure with probability 1e-6 per scale (per
    assertion).  The chunked, in-place variant (``add=True`` into counts) is tested on its own draws.
    """
    z = noise.discrete_laplace(sigma, 1_000_000, np.random.default_rng(2024))
    assert z.dtype == np.int64
    p = _g_test_pvalue(z, sigma)
    assert p > ALPHA, f"G-test p={p:.2e} < {ALPHA}: the sampler does not follow Lap_Z({sigma})"
    base = np.full(1_000_000, 7, dtype=np.int64)
    noise.fill_discrete_laplace(base, sigma, np.random.default_rng(99), add=True)
    p = _g_test_pvalue(base - 7, sigma)
    assert p > ALPHA, f"G-test p={p:.2e} < {ALPHA}: added noise does not follow Lap_Z({sigma})"


@pytest.mark.parametrize("sigma", [0.25, 1 / 0.3, 1000.0])
def test_small_calls_match_the_pmf_g_test(sigma):
    """Calls of fewer than SMALL_COUNT draws take the few-entries forms (several Bernoulli(e^-1) trials per entry
    and round, a binary search for the trials): 4000 calls of 1 to 249 draws from one generator, concatenated
    (about 5 * 10^5 draws), G-test at ALPHA = 1e-6 (false-failure rate 1e-6 per scale)."""
    rng = np.random.default_rng(77)
    sizes = 1 + np.arange(4000) % (noise.SMALL_COUNT - 7)
    z = np.concatenate([noise.discrete_laplace(sigma, int(size), rng) for size in sizes])
    p = _g_test_pvalue(z, sigma)
    assert p > ALPHA, f"G-test p={p:.2e} < {ALPHA}: small calls do not follow Lap_Z({sigma})"


@pytest.mark.parametrize(("drawn", "tested"), [(1.1 * 3.0, 3.0), (1.02 * 1000.0, 1000.0)])
def test_g_test_detects_a_wrong_scale(drawn, tested):
    """Paired detection case: the same test rejects Lap_Z(1.1 * 3) and Lap_Z(1.02 * 1000) draws tested as
    Lap_Z(3) and Lap_Z(1000) (the binned large-scale form included)."""
    z = noise.discrete_laplace(drawn, 1_000_000, np.random.default_rng(5))
    assert _g_test_pvalue(z, tested) < ALPHA


def test_g_test_detects_rounded_continuous_laplace():
    """Detection case: ``round(Lap(3))`` (continuous noise rounded, P(0) = 1 - e^{-1/6} = 0.154 instead of
    (1-p)/(1+p) = 0.165) fails the same test."""
    z = np.rint(np.random.default_rng(6).laplace(0.0, 3.0, 1_000_000)).astype(np.int64)
    assert _g_test_pvalue(z, 3.0) < ALPHA


@pytest.mark.parametrize("sigma", [0.25, 1 / 0.3, 1000.0])
def test_discrete_geometric_matches_its_pmf(sigma):
    """``discrete_geometric`` (the magnitude of the sampler) against ``P(G = g) = (1 - p) p^g``: chi-square at
    ALPHA (false-failure rate 1e-6), on 10^6 draws, point by point up to 40 sigma + 5 and the tail pooled."""
    g = noise.discrete_geometric(sigma, 1_000_000, np.random.default_rng(31))
    p = math.exp(-1.0 / sigma)
    support = np.arange(0, int(40 * sigma) + 6)
    pvalue = chi_square_pvalue(g, lambda k: (1 - p) * p ** k.astype(float), support)
    assert pvalue > ALPHA, f"chi-square p={pvalue:.2e}: discrete_geometric({sigma}) is not geometric"


@pytest.mark.parametrize("levels", [2, 3, 12])
def test_bernoulli_exp_minus_one(levels):
    """``Bernoulli(e^-1)`` from one uniform integer below ``L!`` with the continuation past ``L`` trials: at
    ``L = 2`` and 3 the continuation runs for a sixth and a 24th of the draws.  Two-sided z-test of the mean over
    2 * 10^6 draws at |z| < 4.892 (ALPHA = 1e-6 under the normal approximation of the binomial)."""
    draws = noise._bernoulli_exp_minus_one(2_000_000, np.random.default_rng(levels), levels)
    q = math.exp(-1.0)
    z = (draws.mean() - q) / math.sqrt(q * (1 - q) / len(draws))
    assert abs(z) < stats.norm.isf(ALPHA / 2)


def test_bernoulli_exp_ratio():
    """``Bernoulli(exp(-u/t))`` for all ``u < t = 7`` at once: each mean within the z bound of ALPHA / 7 (a
    Bonferroni split, so the test fails falsely with probability at most 1e-6)."""
    t, reps = 7, 300_000
    u = np.repeat(np.arange(t), reps).astype(np.uint32)
    means = noise._bernoulli_exp_ratio(u, t, np.random.default_rng(17)).reshape(t, reps).mean(axis=1)
    q = np.exp(-np.arange(1, t) / t)
    z = (means[1:] - q) / np.sqrt(q * (1 - q) / reps)
    assert means[0] == 1.0 and np.all(np.abs(z) < stats.norm.isf(ALPHA / 2 / t))


def test_scale_fraction_exact_rounded_up_and_refused():
    """A float scale is sampled exactly as its dyadic fraction; a scale below 2^-9 is rounded up to a
    denominator of 2^62 (more noise); a scale above 2^50 is refused with a one-line ParameterError."""
    assert noise.scale_fraction(1 / 0.3) == (7505999378950827, 2 ** 51)
    assert noise.scale_fraction(1000.0) == (1000, 1)
    assert noise.scale_fraction(0.25) == (1, 4)
    t, s = noise.scale_fraction(1e-4)
    assert s == 2 ** 62 and Fraction(t, s) >= Fraction(1e-4) and Fraction(t - 1, s) < Fraction(1e-4)
    assert noise.scale_fraction(2.0 ** -70) == (1, 2 ** 62)
    assert np.all(noise.discrete_laplace(1e-4, 1000, np.random.default_rng(0)) == 0)
    assert noise.scale_fraction(noise.MAX_SCALE) == (2 ** 50, 1)
    with pytest.raises(ParameterError, match="epsilon is too small"):
        noise.discrete_laplace(2.0 ** 51, 3, np.random.default_rng(0))
    with pytest.raises(ParameterError, match="epsilon is too small"):
        noise.discrete_geometric(1e20, 3, np.random.default_rng(0))


def test_int64_guard_raises_instead_of_wrapping(monkeypatch):
    """``tV`` must not wrap around: with the Bernoulli(e^-1) trials forced to succeed, V grows until
    ``2^62 / t`` and the sampler raises instead (an event of probability below e^-512 with real trials)."""
    monkeypatch.setattr(noise, "_bernoulli_exp_minus_one", lambda count, rng: np.ones(count, dtype=bool))
    with pytest.raises(RuntimeError, match="int64"):
        noise.discrete_laplace(2.0 ** 50, 3, np.random.default_rng(0))


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


# -- the inversion sampler of privsyn_core.privacy.laplace_tables ---------------------------------------------


@pytest.mark.parametrize("sigma", [0.25, 1 / 0.3, 6.72173295, 50.0])
@pytest.mark.parametrize("kind", ["magnitude", "geometric"])
def test_threshold_tables_are_the_exact_floors(kind, sigma):
    """Every table entry is ``floor(2^63 T_k)`` exactly, against mpmath at 400 bits (``T_k = 2p^k/(1+p)`` or
    ``p^k``, ``p = e^{-s/t}``), the sentinel is 0, the table stops at the first ``T_L < 2^-TAIL_BITS``; and the
    refinement bits (:func:`threshold_bits` at 63 + 64 + 64 bits) are exact too.  Deterministic."""
    mpmath = pytest.importorskip("mpmath")
    t, s = noise.scale_fraction(sigma)
    table = laplace_tables.threshold_table(kind, t, s)
    with mpmath.workprec(400):
        p = mpmath.exp(-mpmath.mpf(s) / t)

        def exact(k, bits):
            value = 2 * p ** k / (1 + p) if kind == "magnitude" else p ** k
            return int(mpmath.floor(value * mpmath.mpf(2) ** bits))

        assert table.upper.tolist() == [exact(k, 63) for k in range(1, table.length + 1)] + [0]
        last = 2 * p ** table.length / (1 + p)
        assert last < mpmath.mpf(2) ** -laplace_tables.TAIL_BITS <= 2 * p ** (table.length - 1) / (1 + p)
        assert laplace_tables.threshold_bits(kind, 2, t, s, 191) == exact(2, 191)


def test_ties_are_decided_by_the_next_bits_of_the_threshold():
    """``u = c_k`` (probability 2^-63, so forced here): the next 64-bit words are compared with the next bits of
    ``T_k``; a word below them gives the count ``k``, above them ``k - 1``, and an equal word defers to the next
    one.  Deterministic."""
    t, s = noise.scale_fraction(6.72173295)
    table = laplace_tables.threshold_table("magnitude", t, s)
    k = 3
    c_k = int(table.upper[k - 1])
    following = table.exact_bits(k, 63 + 64) & (2 ** 64 - 1)  # bits 64..127 of T_k after the first 63
    after = table.exact_bits(k, 63 + 128) & (2 ** 64 - 1)
    cases = [([following - 1], k), ([following + 1], k - 1), ([following, after - 1], k),
             ([following, after + 1], k - 1)]
    for words, expected in cases:
        u = np.array([c_k, c_k - 1], dtype=np.int64)
        m = table.count_above(u)
        assert m.tolist() == [k - 1, k]  # the tie is not counted yet; c_k - 1 is below c_k
        supply = iter(words)
        laplace_tables.resolve_ties(table, u, m, lambda count, supply=supply: np.array([next(supply)], np.uint64))
        assert m.tolist() == [expected, k]
        assert next(supply, None) is None  # every word was read, no more


@pytest.mark.parametrize("sigma", [1.0, 20.0])
def test_short_tables_reach_the_geometric_tail_g_test(monkeypatch, sigma):
    """With ``TAIL_BITS = 1`` about half the draws go on to the geometric tail (and some through it more than
    once): 10^6 draws, G-test at ALPHA (false-failure rate 1e-6 per scale)."""
    monkeypatch.setattr(laplace_tables, "TAIL_BITS", 1)
    laplace_tables.threshold_table.cache_clear()
    try:
        t, s = noise.scale_fraction(sigma)
        assert laplace_tables.threshold_table("magnitude", t, s).length <= sigma + 1
        z = noise.discrete_laplace(sigma, 1_000_000, np.random.default_rng(41))
    finally:
        laplace_tables.threshold_table.cache_clear()
    assert _g_test_pvalue(z, sigma) > ALPHA


def test_g_test_detects_a_table_one_percent_off(monkeypatch):
    """Detection case: the table of Lap_Z(3) with its first threshold ``P(|Z| >= 1)`` lowered by 1% (so P(Z = 0)
    up by 0.8 points) fails the same G-test on 10^6 draws."""
    t, s = noise.scale_fraction(3.0)
    table = laplace_tables.threshold_table("magnitude", t, s)
    upper = table.upper.copy()
    upper[0] = int(upper[0] * 0.99)
    wrong = dataclasses.replace(table, upper=upper, guide=np.minimum(table.guide, 0), rounds=table.length + 1)
    real = laplace_tables.threshold_table
    monkeypatch.setattr(noise, "threshold_table", lambda kind, t, s: wrong if kind == "magnitude" else real(kind, t, s))
    z = noise.discrete_laplace(3.0, 1_000_000, np.random.default_rng(42))
    assert _g_test_pvalue(z, 3.0) < ALPHA


# -- generators: only 64-bit raw words (issue 37, item 7) ---------------------------------------------------------
WORD32 = [np.random.MT19937]
WORD64 = [np.random.PCG64, np.random.PCG64DXSM, np.random.Philox, np.random.SFC64]


@pytest.mark.parametrize("kind", WORD32)
def test_a_32_bit_bit_generator_is_refused_at_every_sampler(kind):
    """MT19937's raw words hold 32 bits: CKS20's signs would be positive 3/4 of the time and the inversion sampler
    would never return.  Every door refuses it with one line naming the accepted bit generators."""
    doors = [lambda g: noise.discrete_laplace(3.0, 10, g),
             lambda g: noise.discrete_laplace(1e5, 10, g),  # the CKS20 path
             lambda g: noise.fill_discrete_laplace(np.zeros(10, dtype=np.int64), 3.0, g),
             lambda g: noise.discrete_geometric(3.0, 10, g),
             lambda g: noise.resolve_rng(g)]
    for door in doors:
        with pytest.raises(ParameterError, match="PCG64, PCG64DXSM, Philox, SFC64, ChaCha") as info:
            door(np.random.Generator(kind(1)))
        assert "\n" not in str(info.value) and kind.__name__ in str(info.value)


@pytest.mark.parametrize("kind", WORD64)
def test_64_bit_bit_generators_give_fair_signs(kind):
    """The accepted bit generators: the sign of Lap_Z(3) is fair, P(Z > 0) = P(Z < 0) = p/(1+p) (the MT19937 defect
    gave 3/4 of the non-zero draws positive).  z-test on 40,000 draws at alpha = 1e-6."""
    z = noise.discrete_laplace(3.0, 40_000, np.random.Generator(kind(11)))
    nonzero = z[z != 0]
    share = float(np.mean(nonzero > 0))
    assert abs(share - 0.5) < stats.norm.isf(ALPHA / 2) * math.sqrt(0.25 / len(nonzero))
    assert noise.resolve_rng(np.random.Generator(kind(1)))[1] is None


def test_synthesize_refuses_a_32_bit_generator():
    import privsyn_core as ps

    X = np.random.default_rng(0).random((50, 1))
    with pytest.raises(ParameterError, match="MT19937"):
        ps.synthesize(X, "dp_histogram", 1.0, schema=ps.unit_schema(1), rng=np.random.Generator(np.random.MT19937(0)))
    out = ps.synthesize(X, "dp_histogram", 1.0, schema=ps.unit_schema(1), rng=np.random.Generator(np.random.SFC64(0)))
    assert len(out.data) > 0


# -- lattice noise (issue 37, item 6) ------------------------------------------------------------------------------
@pytest.mark.parametrize("value", [Fraction(1, 3), Fraction(3, 2), Fraction(10**20 + 1, 7), Fraction(2**60)])
def test_scale_at_least_is_the_least_float_above(value):
    sigma = noise.scale_at_least(value)
    assert Fraction(sigma) >= value and Fraction(math.nextafter(sigma, 0.0)) < value


@pytest.mark.parametrize("scale", [1e-9, 0.015, 1.0, 1.5, 2.0, 3e7])
def test_lattice_exponent_is_the_largest_step_below_2_to_the_minus_20_of_the_scale(scale):
    k = noise.lattice_exponent(scale)
    assert 2.0 ** -k <= scale * 2.0 ** -noise.LATTICE_BITS < 2.0 ** (1 - k) or k == 0
    assert noise.lattice_exponent(scale, coarsest=40) >= 40 and noise.lattice_exponent(0.0, coarsest=3) == 3


def test_lattice_laplace_draws_the_exact_scale_and_refuses_points_beyond_int64_room():
    """The noise is Lap_Z(sigma) with sigma = scale_at_least(scale): the same draws as fill_discrete_laplace at that
    scale from the same seed, added to the points."""
    points = np.array([0, 5, -7, 2**40], dtype=np.int64)
    noisy, sigma = noise.lattice_laplace(points, Fraction(10, 3), np.random.default_rng(4))
    assert sigma == noise.scale_at_least(Fraction(10, 3)) and Fraction(sigma) >= Fraction(10, 3)
    draws = np.zeros(4, dtype=np.int64)
    noise.fill_discrete_laplace(draws, sigma, np.random.default_rng(4))
    assert np.array_equal(noisy, points + draws)
    with pytest.raises(ParameterError, match="2\\^61"):
        noise.lattice_laplace(np.array([2**61 + 1]), Fraction(1), np.random.default_rng(0))
