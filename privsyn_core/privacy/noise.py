"""Noise primitives and seeding.

Every sampler takes a :class:`numpy.random.Generator`.  Integer counts get *exact*
integer noise (:func:`discrete_laplace`, a difference of two geometric variables),
never continuous noise rounded afterwards: rounding ``c + trunc(Lap(sigma))`` leaks an
extra ``ln 2`` per count (for ``Z = trunc(Lap(sigma))``, ``P(Z = 0)/P(Z = 1) = 2 e^{1/sigma}``: twice the
ratio ``e^{1/sigma}`` of the discrete Laplace law of [HVZ23] App. B).

References
----------
.. [HVZ23] Y. He, R. Vershynin, Y. Zhu, "Algorithmically Effective Differentially
   Private Synthetic Data", COLT 2023 (seed 004), Appendix B.
.. [KD23] Kreačić et al., "Differentially Private Synthetic Data Using KD-Trees",
   UAI 2023 (seed 002), Algorithm 5, Lemma 9, Remark 1.
"""

from __future__ import annotations

import math
import secrets

import numpy as np

from privsyn_core.errors import ParameterError

RandomLike = None | int | np.integer | np.random.Generator | str

_INT64_SAFE = 2**62


def resolve_rng(rng: RandomLike = None) -> tuple[np.random.Generator, int | None]:
    """Turn ``rng`` into a Generator and report the seed that was used.

    Parameters
    ----------
    rng : None, int, numpy.random.Generator or "secure"
        ``None`` and ``"secure"`` return a cryptographically secure generator (see
        :func:`secure_generator`) and no seed: a real release must not be replayable, so
        the library never chooses a seed and records it.  An int is used as the seed
        (teaching, tests, reproduction); a Generator is used as is (seed ``None``).

    Returns
    -------
    generator : numpy.random.Generator
    seed : int or None
        The seed to pass again for the same output (``None`` when not reproducible).

    Raises
    ------
    ParameterError
        For a negative seed, a bool, a float or any other type (a user-facing
        :class:`~privsyn_core.errors.PrivsynError`, so the CLI answers with one line).
    """
    if isinstance(rng, np.random.Generator):
        return rng, None
    if rng is None or isinstance(rng, str):
        if rng is not None and rng != "secure":
            raise ParameterError(f"rng must be None, an int, a numpy Generator or 'secure', got {rng[:40]!r}")
        return secure_generator(), None
    if isinstance(rng, (bool, np.bool_)):
        raise ParameterError("rng must be None, an int seed or a numpy Generator, not a bool")
    elif isinstance(rng, (int, np.integer)):
        seed = int(rng)
        if seed < 0:
            raise ParameterError(f"a seed must be a non-negative integer, got {seed}")
    else:
        raise ParameterError(f"rng must be None, an int seed or a numpy Generator, got {type(rng).__name__}")
    return np.random.default_rng(seed), seed


def secure_generator() -> np.random.Generator:
    """A Generator on a cryptographically secure bit generator.

    Uses ``randomgen``'s ChaCha (20 rounds) keyed with 256 bits from the operating
    system.  It cannot be seeded on purpose: seeds are for teaching and tests.
    """
    try:
        from randomgen import ChaCha
    except ImportError as exc:  # pragma: no cover - randomgen is a runtime requirement
        raise ImportError("rng='secure' needs the 'randomgen' package (pip install randomgen)") from exc
    key = int.from_bytes(secrets.token_bytes(32), "little")
    return np.random.Generator(ChaCha(key=key, rounds=20))


def discrete_laplace(sigma: float | np.ndarray, size=None, rng: np.random.Generator | None = None) -> np.ndarray:
    r"""Exact discrete Laplace noise :math:`\mathrm{Lap}_\mathbb{Z}(\sigma)`.

    .. math:: P(Z = z) = \frac{1-p}{1+p}\, p^{|z|}, \qquad p = e^{-1/\sigma},

    the law of :math:`G_1 - G_2` with i.i.d. geometric :math:`G_i` ([HVZ23] App. B).
    ``Var Z = 2p/(1-p)^2 < 2\sigma^2``.  ``sigma = inf`` is not allowed; ``sigma = 0``
    gives zeros.

    Sampled by :func:`fill_discrete_laplace` (one geometric draw and one random bit per sample,
    with rejection of "minus zero"; the derivation there shows the law is exactly the one
    above).

    Parameters
    ----------
    sigma : float or array of float
        Scale(s), broadcast against ``size``.
    size : int or tuple, optional
    rng : numpy.random.Generator
    """
    rng = _require_generator(rng)
    sigma = np.asarray(sigma, dtype=float)
    if np.any(~np.isfinite(sigma)) or np.any(sigma < 0):
        raise ValueError("discrete Laplace scale must be finite and >= 0")
    shape = np.broadcast_shapes(sigma.shape, () if size is None else np.empty(size, dtype=np.uint8).shape)
    out = np.empty(shape, dtype=np.int64)
    if sigma.ndim == 0:
        _fill_discrete_laplace(out.reshape(-1), float(sigma), rng)
        return out if shape else out[()]
    flat, scales = out.reshape(-1), np.broadcast_to(sigma, shape).reshape(-1)
    for value in np.unique(scales):  # a few distinct scales in practice; each filled in index order
        where = np.flatnonzero(scales == value)
        draws = np.empty(len(where), dtype=np.int64)
        _fill_discrete_laplace(draws, float(value), rng)
        flat[where] = draws
    return out


#: Draws per chunk of :func:`fill_discrete_laplace` (its float and bit scratch stay in the CPU caches).
NOISE_CHUNK = 2 ** 16


def fill_discrete_laplace(out: np.ndarray, sigma: float, rng: np.random.Generator, *, add: bool = False,
                          clip_at_zero: bool = False) -> None:
    r"""Write (or, with ``add=True``, add) i.i.d. :math:`\mathrm{Lap}_\mathbb{Z}(\sigma)` draws into ``out``.

    ``out`` is a contiguous 1-D int64 array; no full-size temporary is allocated (the draws go
    through chunks of :data:`NOISE_CHUNK` entries).  ``clip_at_zero=True`` then replaces the negative
    entries of ``out`` by 0, chunk by chunk while the chunk is in the CPU caches (``(n + lambda)_+`` of a
    noisy count in one pass over the counts); the draws are the same.

    Algorithm (a sign-and-magnitude sampler with rejection, as in Canonne, Kamath, Steinke,
    "The Discrete Gaussian for Differential Privacy", NeurIPS 2020, Algorithm 2), one geometric
    draw per sample instead of the two of :math:`G_1 - G_2`.  Let ``p = e^{-1/sigma}``.

    1. ``V = G - 1`` with ``G = Generator.geometric(1 - p)``: ``P(V = v) = (1-p) p^v`` on ``{0, 1, ...}``.
    2. ``S`` a fair random bit, independent of ``V``; reject the pair when ``S = 1`` and
       ``V = 0`` (probability ``(1-p)/2``) and draw it again; else ``Z = (1 - 2S) V``.

    For ``z != 0`` exactly one accepted pair gives ``z``, with probability ``(1-p) p^{|z|} / 2``;
    ``z = 0`` comes from ``(S, V) = (0, 0)`` only, probability ``(1-p)/2``.  The acceptance
    probability is ``1 - (1-p)/2 = (1+p)/2``, so

    .. math:: P(Z = z) = \frac{(1-p) p^{|z|} / 2}{(1+p)/2} = \frac{1-p}{1+p} p^{|z|},

    the discrete Laplace law of :func:`discrete_laplace_pmf`, that of a difference of two i.i.d.
    geometric variables.  Rejection rounds are independent, so the accepted draws are i.i.d.
    ``tests/test_noise.py`` compares the sampler with the pmf (G-test).  Only geometric draws
    (:func:`geometric_minus_one`: the integers of ``Generator.geometric``, bit for bit) and raw random bits are
    used (no continuous noise reaches a count, see ``tests/test_float_safety.py``).

    Mechanisms call this public name; :func:`discrete_laplace` calls the implementation directly, so the
    privacy audit (:func:`privsyn_core.evaluation.audit.scaled_noise`) can rebind each public name and no draw is
    scaled twice.
    """
    _fill_discrete_laplace(out, sigma, rng, add=add, clip_at_zero=clip_at_zero)


def _fill_discrete_laplace(out: np.ndarray, sigma: float, rng: np.random.Generator, *, add: bool = False,
                           clip_at_zero: bool = False) -> None:
    """The sampler of :func:`fill_discrete_laplace` (see there)."""
    if out.dtype != np.int64 or out.ndim != 1 or not out.flags.c_contiguous:
        raise ValueError("fill_discrete_laplace needs a contiguous 1-D int64 array")
    if not (math.isfinite(sigma) and sigma >= 0):
        raise ValueError("discrete Laplace scale must be finite and >= 0")
    if sigma == 0 or len(out) == 0:
        if not add:
            out[:] = 0
        if clip_at_zero:
            np.maximum(out, 0, out=out)
        return
    success = -math.expm1(-1.0 / sigma)  # 1 - p, accurate for large sigma
    chunk = min(NOISE_CHUNK, len(out))
    draw = np.empty(chunk if add else 0, dtype=np.int64)  # scratch for the draws added to ``out``
    for start in range(0, len(out), chunk):
        size = min(chunk, len(out) - start)
        target = out[start:start + size]
        if add:
            _lap_chunk(draw[:size], success, rng)
            target += draw[:size]
        else:
            _lap_chunk(target, success, rng)
        if clip_at_zero:
            np.maximum(target, 0, out=target)


def _lap_chunk(out: np.ndarray, success: float, rng: np.random.Generator) -> None:
    """One chunk of :func:`fill_discrete_laplace`: signed magnitudes, then redraws of the rejected pairs."""
    index = _signed_magnitudes(out, success, rng)
    while len(index):
        redo = np.empty(len(index), dtype=np.int64)
        rejected = _signed_magnitudes(redo, success, rng)
        out[index] = redo
        index = index[rejected]


def _signed_magnitudes(out: np.ndarray, success: float, rng: np.random.Generator) -> np.ndarray:
    """``out = (1 - 2S) V``; returns the positions of the rejected pairs (``S = 1``, ``V = 0``)."""
    geometric_minus_one(out, success, rng)
    signs = _random_bits(len(out), rng)
    mask = np.subtract(0, signs, dtype=np.int64)  # -S: all ones where S = 1 (branch-free negation below)
    np.bitwise_xor(out, mask, out=out)
    np.subtract(out, mask, out=out)  # (V ^ -S) + S = (1 - 2S) V in two's complement
    return np.flatnonzero(np.logical_and(signs.view(np.bool_), out == 0))  # a bool mask: numpy's fast nonzero


#: numpy's ``Generator.geometric`` draws by inversion below this success probability (its ``random_geometric``
#: switches to a sequential search at ``p >= 0.333333333333333333333333``, the double nearest 1/3).
INVERSION_BELOW = 0.333333333333333333333333
#: Largest mean ``1 / -log(1 - p)`` of the inversion path of :func:`geometric_minus_one`: every quotient it rounds up
#: stays below 2^53 (the exponential draws of numpy's ziggurat stay below 2^7), so the float arithmetic is exact.
_INVERSION_MAX_MEAN = 2.0 ** 46


def geometric_minus_one(out: np.ndarray, success: float, rng: np.random.Generator) -> None:
    r"""``out = G - 1`` for i.i.d. ``G = Generator.geometric(success)``, the same integers from the same draws.

    ``P(G - 1 = v) = (1 - success)^v success`` on ``{0, 1, ...}``.  Below :data:`INVERSION_BELOW` numpy's
    ``geometric`` computes, per draw, ``G = ceil(E / L)`` with ``E`` from its standard exponential sampler and
    ``L = -log1p(-success)`` (``random_geometric_inversion`` in numpy's ``distributions.c``), evaluating
    ``log1p`` again for every draw.  Here ``E`` comes from ``Generator.standard_exponential`` (the same
    routine, consuming the bit generator identically), ``L`` is computed once, and the quotient is rounded
    up in place: the same IEEE operations, hence the same integers bit for bit
    (``tests/test_noise.py`` checks it), in about half the time.  The law is the geometric one whatever
    the implementation: ``P(ceil(E/L) > k) = P(E > kL) = e^{-kL} = (1 - success)^k``.  At or above the
    threshold, or for a mean above :data:`_INVERSION_MAX_MEAN`, ``Generator.geometric`` itself is called.
    ``out`` is an int64 array.
    """
    rate = -math.log1p(-success) if success < INVERSION_BELOW else math.inf  # success may be 1 (a tiny scale)
    if not (success < INVERSION_BELOW and 1.0 / rate <= _INVERSION_MAX_MEAN):
        np.subtract(rng.geometric(success, len(out)), 1, out=out)
        return
    draws = rng.standard_exponential(len(out))
    np.divide(draws, rate, out=draws)
    np.ceil(draws, out=draws)
    np.subtract(draws, 1.0, out=draws)  # exact: the values are integers below 2^53
    np.copyto(out, draws, casting="unsafe")


def _random_bits(count: int, rng: np.random.Generator) -> np.ndarray:
    """``count`` independent fair bits (uint8 0/1), 64 per raw 64-bit draw of the bit generator."""
    raw = rng.bit_generator.random_raw((count + 63) // 64)
    return np.unpackbits(np.ascontiguousarray(raw).view(np.uint8), count=count)


def discrete_laplace_pmf(z: np.ndarray, sigma: float) -> np.ndarray:
    """Probability mass function of :func:`discrete_laplace`."""
    p = np.exp(-1.0 / sigma)
    return (1 - p) / (1 + p) * p ** np.abs(np.asarray(z))


def discrete_laplace_variance(sigma: float) -> float:
    """Exact variance ``2p/(1-p)^2`` with ``p = exp(-1/sigma)`` ([HVZ23] eq. B.1)."""
    p = np.exp(-1.0 / sigma)
    return float(2 * p / (1 - p) ** 2)


def laplace(scale: float | np.ndarray, size=None, rng: np.random.Generator | None = None) -> np.ndarray:
    """Continuous Laplace noise ``Lap(b)`` with density ``exp(-|x|/b) / (2b)``."""
    rng = _require_generator(rng)
    scale = np.asarray(scale, dtype=float)
    if np.any(~np.isfinite(scale)) or np.any(scale < 0):
        raise ValueError("Laplace scale must be finite and >= 0")
    return rng.laplace(0.0, scale, size)


def laplace_tail(t: float | np.ndarray, scale: float) -> np.ndarray:
    r"""``P[Lap(b) >= t]``: ``exp(-t/b)/2`` for ``t >= 0``, ``1 - exp(t/b)/2`` otherwise ([KD23] Remark 1)."""
    t = np.asarray(t, dtype=float)
    return np.where(t >= 0, 0.5 * np.exp(-np.abs(t) / scale), 1.0 - 0.5 * np.exp(-np.abs(t) / scale))


def conditional_laplace(scale: float, t: float, size=None, rng: np.random.Generator | None = None) -> np.ndarray:
    r"""Laplace noise conditioned on being at least ``t`` ([KD23] Algorithm 5).

    For ``t >= 0`` this is ``t + Exponential(b)`` (memorylessness).  For ``t < 0`` the
    inverse CDF is used: ``U ~ Unif(F(t), 1)`` and ``X = F^{-1}(U)`` with
    ``F(x) = e^{x/b}/2`` for ``x < 0`` and ``1 - e^{-x/b}/2`` otherwise.
    """
    rng = _require_generator(rng)
    if not scale > 0:
        raise ValueError("conditional Laplace needs a positive scale")
    if t >= 0:
        return t + rng.exponential(scale, size)
    lower = 0.5 * np.exp(t / scale)
    u = rng.uniform(lower, 1.0, size)
    return np.where(u < 0.5, scale * np.log(2 * u), -scale * np.log(2 * (1 - u)))


def binomial_big(count: int, p: float, rng: np.random.Generator | None = None) -> int:
    """Exact ``Binomial(count, p)`` for counts beyond numpy's int64 limit.

    ``count`` is split into chunks below ``2**62`` whose binomials are summed
    ([KD23] Lemma 9 with ``k^d`` empty bins, which may exceed ``2**63``).
    """
    rng = _require_generator(rng)
    count = int(count)
    if count < 0 or not 0 <= p <= 1:
        raise ValueError("binomial_big needs count >= 0 and 0 <= p <= 1")
    full, rest = divmod(count, _INT64_SAFE)
    total = int(rng.binomial(rest, p))
    if full:
        total += int(rng.binomial(_INT64_SAFE, p, size=full).sum(dtype=object))
    return total


def _require_generator(rng) -> np.random.Generator:
    if rng is None:
        raise ValueError("pass a numpy.random.Generator as rng (see resolve_rng)")
    if not isinstance(rng, np.random.Generator):
        raise TypeError(f"rng must be a numpy.random.Generator, got {type(rng).__name__}")
    return rng
