"""Noise primitives and seeding.

Every sampler takes a :class:`numpy.random.Generator`.  Integer counts get *exact*
integer noise (:func:`discrete_laplace`, the law of a difference of two geometric variables, sampled with
integer arithmetic only as in [CKS20]), never continuous noise rounded afterwards: rounding
``c + trunc(Lap(sigma))`` leaks an extra ``ln 2`` per count (for ``Z = trunc(Lap(sigma))``,
``P(Z = 0)/P(Z = 1) = 2 e^{1/sigma}``: twice the ratio ``e^{1/sigma}`` of the discrete Laplace law of [HVZ23] App. B).
Real values that a paper perturbs with continuous Laplace noise get the same exact integer noise on a fine public
lattice (:func:`lattice_laplace`), so that their loss holds in floating point too ([Mir12]).

References
----------
.. [HVZ23] Y. He, R. Vershynin, Y. Zhu, "Algorithmically Effective Differentially
   Private Synthetic Data", COLT 2023 (seed 004), Appendix B.
.. [CKS20] C. L. Canonne, G. Kamath, T. Steinke, "The Discrete Gaussian for Differential Privacy",
   NeurIPS 2020, Algorithms 1-2.
.. [Mir12] I. Mironov, "On significance of the least significant bits for differential privacy", ACM CCS 2012.
.. [KD23] Kreačić et al., "Differentially Private Synthetic Data Using KD-Trees",
   UAI 2023 (seed 002), Lemma 9.
"""

from __future__ import annotations

import functools
import math
import secrets
from fractions import Fraction

import numpy as np

from privsyn_core.errors import ParameterError
from privsyn_core.privacy.laplace_tables import fill_table_laplace, threshold_table

RandomLike = None | int | np.integer | np.random.Generator | str

#: The identity of the integer samplers' output: bumped whenever the same generator gives other draws (a new
#: sampler, another order of draws).  A seeded run is a free replay of an earlier one only when it draws the same
#: noise, so the ledger's run key holds it (:meth:`privsyn_core.privacy.budget.PrivacyLedger.reserve`).
SAMPLER_VERSION = 2

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
        :class:`~privsyn_core.errors.PrivsynError`, so the CLI answers with one line), and for a Generator on a
        bit generator the exact samplers cannot read (:func:`checked_generator`).
    """
    if isinstance(rng, np.random.Generator):
        return checked_generator(rng), None
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


#: The bit generators whose raw words (``bit_generator.random_raw``) are 64 uniform bits each, as the exact samplers
#: read them (one word per draw, 64 sign bits per word); the secure generator (randomgen's ChaCha) is added by
#: :func:`accepted_bit_generators`.
WORD64_BIT_GENERATORS: tuple[type, ...] = (np.random.PCG64, np.random.PCG64DXSM, np.random.Philox, np.random.SFC64)


@functools.cache
def accepted_bit_generators() -> tuple[type, ...]:
    """:data:`WORD64_BIT_GENERATORS` and, when ``randomgen`` is installed, its ``ChaCha`` (:func:`secure_generator`)."""
    try:
        from randomgen import ChaCha
    except ImportError:  # pragma: no cover - randomgen is a runtime requirement
        return WORD64_BIT_GENERATORS
    return (*WORD64_BIT_GENERATORS, ChaCha)


def checked_generator(rng: np.random.Generator) -> np.random.Generator:
    """``rng`` itself when its bit generator gives 64 uniform bits per raw word, else a one-line ParameterError.

    The exact samplers read raw words (:func:`_random_bits`,
    :func:`~privsyn_core.privacy.laplace_tables.fill_table_laplace`).  A bit generator with 32-bit words
    (``MT19937``) returns them in the low half of a 64-bit integer, so half of the sign bits would be 0
    (``P(Z > 0) = 3/4``) and the inversion sampler would read ``u < 2^31``, below
    every threshold, and never stop.  Accepted: :func:`accepted_bit_generators`.
    """
    accepted = accepted_bit_generators()
    if not isinstance(rng.bit_generator, accepted):
        names = ", ".join(kind.__name__ for kind in accepted)
        raise ParameterError(f"rng: the exact samplers need 64-bit raw words; {type(rng.bit_generator).__name__} "
                             f"is not accepted, use a numpy Generator on one of {names} (or rng='secure')")
    return rng


def discrete_laplace(sigma: float | np.ndarray, size=None, rng: np.random.Generator | None = None) -> np.ndarray:
    r"""Exact discrete Laplace noise :math:`\mathrm{Lap}_\mathbb{Z}(\sigma)`.

    .. math:: P(Z = z) = \frac{1-p}{1+p}\, p^{|z|}, \qquad p = e^{-1/\sigma},

    the law of :math:`G_1 - G_2` with i.i.d. geometric :math:`G_i` ([HVZ23] App. B).
    ``Var Z = 2p/(1-p)^2 < 2\sigma^2``.  ``sigma = inf`` is not allowed; ``sigma = 0``
    gives zeros.  Sampled with integer arithmetic only by :func:`fill_discrete_laplace` ([CKS20]
    Algorithms 1-2; see there for the treatment of extreme scales).

    Parameters
    ----------
    sigma : float or array of float
        Scale(s), broadcast against ``size``.
    size : int or tuple, optional
    rng : numpy.random.Generator

    Raises
    ------
    ValueError
        For a negative or non-finite scale.
    ParameterError
        For a scale above :data:`MAX_SCALE` (the epsilon is too small).
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


#: Draws per chunk of :func:`fill_discrete_laplace` (its integer scratch stays in the CPU caches).
NOISE_CHUNK = 2 ** 16
#: Largest discrete Laplace scale sampled.  Beyond it a draw could exceed the int64 range of a noisy count
#: (``P(|Z| >= 2^62) = 2 p^{2^62} / (1 + p) < e^{-4096}`` at ``sigma = 2^50``); a larger scale means an epsilon
#: (share) below about ``10^-15`` per unit of sensitivity, and is refused with a :class:`ParameterError`.
MAX_SCALE = 2.0 ** 50
#: Largest denominator ``s`` of a scale ``t/s``: a float scale with a larger one (below ``2^-9``) is rounded up.
MAX_DENOMINATOR = 2 ** 62


def scale_fraction(sigma: float) -> tuple[int, int]:
    """The integers ``(t, s)`` of the scale ``t/s`` that :func:`fill_discrete_laplace` samples for ``sigma > 0``.

    A float is an exact dyadic rational, ``sigma = t / 2^k`` (:meth:`float.as_integer_ratio`), and that is the
    scale sampled, exactly (``1 / 0.3`` is the float ``7505999378950827 / 2^51``, not ``10/3``).  A denominator
    above :data:`MAX_DENOMINATOR` (a scale below about ``2^-9``, where ``P(Z != 0) < 2 e^{-512}``) is replaced by
    the least scale ``t' / 2^62 >= sigma``: more noise, so the privacy guarantee of ``sigma`` holds.

    Raises
    ------
    ParameterError
        For ``sigma > MAX_SCALE``: the draws could overflow int64 counts; the epsilon is too small.
    """
    if sigma > MAX_SCALE:
        raise ParameterError(f"the discrete Laplace scale {sigma:.3g} exceeds 2^50 (noise beyond int64 counts): "
                             "the epsilon is too small; raise it")
    t, s = float(sigma).as_integer_ratio()
    if s > MAX_DENOMINATOR:
        t, s = -(-t * MAX_DENOMINATOR // s), MAX_DENOMINATOR  # ceil(sigma 2^62) / 2^62 >= sigma
    return t, s


def fill_discrete_laplace(out: np.ndarray, sigma: float, rng: np.random.Generator, *, add: bool = False,
                          clip_at_zero: bool = False, sampler: str = "inversion") -> None:
    r"""Write (or, with ``add=True``, add) i.i.d. :math:`\mathrm{Lap}_\mathbb{Z}(\sigma)` draws into ``out``.

    ``out`` is a contiguous 1-D int64 array; no full-size temporary is allocated (the draws go
    through chunks of :data:`NOISE_CHUNK` entries).  ``clip_at_zero=True`` then replaces the negative
    entries of ``out`` by 0, chunk by chunk while the chunk is in the CPU caches (``(n + lambda)_+`` of a
    noisy count in one pass over the counts); the draws are the same.

    ``sampler="cks20"`` keeps the rejection sampler at every scale: the same generator then gives the draws of the
    versions before the inversion sampler (a stream re-draws a node's noise from its own generator, and a state
    restored across an upgrade must get the same noise, :mod:`privsyn_core.mechanisms.online.continual`).

    Two exact samplers of the scale ``t/s`` (``(t, s)`` from :func:`scale_fraction`), both with integer arithmetic
    only.  Up to :data:`~privsyn_core.privacy.laplace_tables.MAX_THRESHOLDS` thresholds (``sigma`` up to about 3900,
    every scale of a PMM level with many cells): inversion of ``|Z|`` against the exact integers
    ``floor(2^63 P(|Z| >= k))`` with one raw 64-bit word per draw and exact refinement of the rare ties
    (:mod:`privsyn_core.privacy.laplace_tables`; 8 ns a draw against 60 ns, ``benchmarks/bench_noise.py``).
    Larger scales: Canonne, Kamath, Steinke, "The Discrete Gaussian for Differential Privacy", NeurIPS 2020
    ([CKS20]), Algorithm 2 (discrete Laplace of scale ``t/s``),
    built on their Algorithm 1 (``Bernoulli(exp(-gamma))`` for a rational ``gamma``), with integer
    arithmetic only: every random choice is ``Generator.integers`` or raw bits of the bit generator, no
    float is drawn or rounded.  One attempt, for all pending entries at once (numpy arrays, rounds over the
    entries still active, no loop over the samples):

    1. ``U`` uniform on ``{0, ..., t-1}``; keep the entry with probability ``exp(-U/t)``
       (:func:`_bernoulli_exp_ratio`), else it is pending again;
    2. ``V`` the number of successes of ``Bernoulli(exp(-1))`` before the first failure
       (:func:`_bernoulli_exp_minus_one`); ``X = U + tV`` is then geometric, ``P(X = x) ∝ e^{-x/t}``;
    3. ``Y = floor(X / s)`` (a shift: ``s`` is a power of two), geometric with ``P(Y = y) ∝ e^{-ys/t} = p^y``;
    4. ``B`` a fair bit; the attempt is rejected when ``B = 1`` and ``Y = 0``; else ``Z = (1 - 2B) Y``.

    For ``z != 0`` exactly one accepted ``(B, Y)`` gives ``z``, with probability ``(1-p) p^{|z|} / 2``; ``z = 0``
    comes from ``(0, 0)`` only, probability ``(1-p)/2``.  Acceptance has probability ``(1+p)/2``, so

    .. math:: P(Z = z) = \frac{(1-p) p^{|z|} / 2}{(1+p)/2} = \frac{1-p}{1+p} p^{|z|},

    the discrete Laplace law of :func:`discrete_laplace_pmf` (steps 1-2 are the geometric sampler inside
    [CKS20] Algorithm 2).  Attempts are independent, so accepted draws are i.i.d.  ``tests/test_noise.py``
    compares the sampler with the pmf (G-tests at scales from 0.25 to about 10^5) and
    ``tests/test_float_safety.py`` runs it on a generator whose float samplers raise.

    Extreme scales (:func:`scale_fraction`): below ``2^-9`` the scale is rounded up (more noise; the
    guarantee of ``sigma`` holds); above :data:`MAX_SCALE` a :class:`ParameterError` says the epsilon is too
    small.  In step 2 ``tV`` stays below ``2^62`` unless ``V > 2^62 / t >= 2^9`` (probability below
    ``e^{-512}`` per draw); that event raises a ``RuntimeError`` rather than wrap around.

    Mechanisms call this public name; :func:`discrete_laplace` calls the implementation directly, so the
    privacy audit (:func:`privsyn_core.evaluation.audit.scaled_noise`) can rebind each public name and no draw is
    scaled twice.
    """
    _fill_discrete_laplace(out, sigma, rng, add=add, clip_at_zero=clip_at_zero, sampler=sampler)


def discrete_geometric(sigma: float, size: int, rng: np.random.Generator) -> np.ndarray:
    r"""``size`` i.i.d. geometric integers, ``P(G = g) = (1 - p) p^g`` on ``{0, 1, ...}``, ``p = e^{-1/\sigma}``.

    The magnitude of :func:`fill_discrete_laplace` before its sign: steps 1-3 there ([CKS20] Algorithm 2 without
    the sign), with integer arithmetic only and the same treatment of extreme scales (:func:`scale_fraction`).
    It is the law of a discrete Laplace count conditioned on ``>= T``, less ``T``
    (:func:`privsyn_core.mechanisms.kdtree.kd_empty.conditional_weights`).
    """
    rng = _require_generator(rng)
    if not (math.isfinite(sigma) and sigma > 0):
        raise ValueError("a geometric scale must be finite and > 0")
    out = np.empty(size, dtype=np.int64)
    t, s = scale_fraction(sigma)
    for start in range(0, size, NOISE_CHUNK):
        _lap_chunk(out[start:start + NOISE_CHUNK], t, s, rng, signed=False)
    return out


#: Bits by which the step of a lattice noise is finer than its scale (:func:`lattice_exponent`).
LATTICE_BITS = 20
#: Largest magnitude of a point of :func:`lattice_laplace` (int64 room for its noise: ``|Z| < 2^62``, see
#: :data:`MAX_SCALE`).
LATTICE_LIMIT = 2 ** 61


def lattice_exponent(scale: float, coarsest: int = 0) -> int:
    """``k`` of the public lattice step ``2^-k`` of a noise of scale ``scale``: the largest power of two at most
    ``2^-LATTICE_BITS scale`` and at most ``2^-coarsest`` (``coarsest`` alone for ``scale = 0``: no noise).

    The step only decides how finely the noise is resolved (the discrete Laplace law of step ``2^-k`` and scale
    ``sigma 2^-k`` has variance below ``2 (sigma 2^-k)^2``, that of ``Lap(sigma 2^-k)``); privacy comes from
    :func:`lattice_laplace`, for every step.
    """
    if scale == 0:
        return coarsest
    if not (math.isfinite(scale) and scale > 0):
        raise ValueError("a lattice noise scale must be finite and >= 0")
    top = math.frexp(scale)[1] - 1  # 2^top <= scale < 2^(top + 1), exactly
    return max(coarsest, LATTICE_BITS - top)


def scale_at_least(value: Fraction) -> float:
    """The least float ``>= value`` (a non-negative rational), by exact comparison."""
    sigma = float(value)
    if Fraction(sigma) < value:
        sigma = math.nextafter(sigma, math.inf)
    return sigma


def lattice_laplace(points: np.ndarray, scale: Fraction, rng: np.random.Generator) -> tuple[np.ndarray, float]:
    r"""The discrete Laplace mechanism on integer points: ``points + Z``, ``Z_i`` i.i.d. ``Lap_Z(sigma)``, with
    ``sigma`` the least float ``>= scale`` (:func:`scale_at_least`); returns the noisy points (int64) and ``sigma``.

    This is how continuous Laplace noise is drawn so that its loss holds in floating point ([Mir12]: a float
    ``x + Lap(b)`` reveals ``x`` through the pattern of its low-order bits).  The caller puts its data-side
    quantity on a public lattice of step ``2^-k`` (exactly, or by rounding with the rounding in its
    sensitivity) and passes the lattice points ``v`` (``x 2^k``) and the scale in steps.  For neighbouring
    ``v, v'`` and every output ``z``,

    .. math:: \frac{P(v + Z = z)}{P(v' + Z = z)} = p^{\|z - v\|_1 - \|z - v'\|_1} \le p^{-\|v - v'\|_1}
              = e^{\|v - v'\|_1 / \sigma}, \qquad p = e^{-1/\sigma},

    so the loss is at most ``Delta / sigma`` for ``||v - v'||_1 <= Delta``, in exact arithmetic, because the
    sampler draws the rational scale ``sigma`` exactly (:func:`fill_discrete_laplace`, integer arithmetic only).
    ``scale = Delta / epsilon`` then spends at most ``epsilon``.  Everything computed from the noisy points,
    in floats or not, is post-processing.

    Raises
    ------
    ParameterError
        When a point exceeds :data:`LATTICE_LIMIT` in magnitude (the lattice is too fine for int64).
    """
    points = np.ascontiguousarray(points, dtype=np.int64).reshape(-1)
    if len(points) and int(np.abs(points).max()) > LATTICE_LIMIT:
        raise ParameterError("the values on the noise lattice exceed 2^61: the data or epsilon is too large")
    sigma = scale_at_least(scale)
    noisy = points.copy()
    fill_discrete_laplace(noisy, sigma, rng, add=True)
    return noisy, sigma


def _fill_discrete_laplace(out: np.ndarray, sigma: float, rng: np.random.Generator, *, add: bool = False,
                           clip_at_zero: bool = False, sampler: str = "inversion") -> None:
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
    t, s = scale_fraction(sigma)
    checked_generator(rng)
    if sampler not in ("inversion", "cks20"):
        raise ValueError(f"unknown discrete Laplace sampler {sampler!r}")
    magnitude = threshold_table("magnitude", t, s) if sampler == "inversion" else None
    geometric = None if magnitude is None else threshold_table("geometric", t, s)
    chunk = min(NOISE_CHUNK, len(out))
    draw = np.empty(chunk if add else 0, dtype=np.int64)  # scratch for the draws added to ``out``
    for start in range(0, len(out), chunk):
        size = min(chunk, len(out) - start)
        target = out[start:start + size]
        into = draw[:size] if add else target
        if magnitude is not None and geometric is not None:
            fill_table_laplace(into, magnitude, geometric, rng)
        else:
            _lap_chunk(into, t, s, rng)
        if add:
            target += into
        if clip_at_zero:
            np.maximum(target, 0, out=target)


def _lap_chunk(out: np.ndarray, t: int, s: int, rng: np.random.Generator, signed: bool = True) -> None:
    """One chunk of :func:`fill_discrete_laplace` (``signed=False``: of :func:`discrete_geometric`): batches of
    attempts until ``out`` is full.

    A batch makes about ``1.1 / acceptance`` attempts per missing entry (the acceptance probability
    :func:`_acceptance`, a float used only for this size) and its accepted draws fill ``out`` in the order they
    were made; surplus ones are dropped.  Accepted draws are i.i.d. and which of them are kept depends on their
    number only, so the kept ones are i.i.d. with the law of :func:`discrete_laplace_pmf`.
    """
    rate, filled = _acceptance(t, s, signed), 0
    while filled < len(out):
        need = len(out) - filled
        values = _magnitudes(int(need / rate * 1.1) + 16, t, s, rng)
        if signed:
            values = _signed(values, rng)
        take = min(len(values), need)
        out[filled:filled + take] = values[:take]
        filled += take


def _acceptance(t: int, s: int, signed: bool) -> float:
    """Probability that an attempt is accepted (to size the batches of :func:`_lap_chunk` only).

    ``P(D = 1) = (1/t) sum_u e^{-u/t} = (1 - e^{-1}) / (t (1 - e^{-1/t}))``, times ``P(not (B = 1, Y = 0)) =
    (1 + p) / 2`` with ``p = e^{-s/t}`` when ``signed``.
    """
    keep = 1.0 if t == 1 else -math.expm1(-1.0) / (t * -math.expm1(-1.0 / t))
    return keep * (1.0 + math.exp(-s / t)) / 2 if signed else keep


def _magnitudes(count: int, t: int, s: int, rng: np.random.Generator) -> np.ndarray:
    """Steps 1-3 of :func:`fill_discrete_laplace` for ``count`` attempts: ``Y`` of the kept ones, in attempt order,
    i.i.d. geometric, ``P(Y = y) = (1 - p) p^y`` with ``p = e^{-s/t}``."""
    if t == 1:  # U = 0, kept with probability exp(0) = 1: X = V
        y = _geometric_count(count, t, rng)
    else:
        u = _uniform_below(t, count, rng)
        u = u[_bernoulli_exp_ratio(u, t, rng)]
        y = _geometric_count(len(u), t, rng)  # V
        np.multiply(y, t, out=y)
        np.add(y, u, out=y, casting="unsafe")  # X = U + tV
    if s > 1:
        np.right_shift(y, s.bit_length() - 1, out=y)  # Y = floor(X / s), s = 2^k
    return y


def _signed(y: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """Step 4 of :func:`fill_discrete_laplace`: ``(1 - 2B) Y`` for the accepted ones (not ``B = 1, Y = 0``)."""
    signs = _random_bits(len(y), rng)
    mask = np.subtract(0, signs, dtype=np.int64)  # -B: all ones where B = 1 (branch-free negation below)
    np.bitwise_xor(y, mask, out=y)
    np.subtract(y, mask, out=y)  # (Y ^ -B) + B = (1 - 2B) Y in two's complement
    return y[~np.logical_and(signs.view(np.bool_), y == 0)]


def _geometric_count(count: int, t: int, rng: np.random.Generator) -> np.ndarray:
    """``count`` i.i.d. ``V``: successes of ``Bernoulli(exp(-1))`` before the first failure, ``P(V >= v) = e^{-v}``.

    Rounds over the entries whose trials all succeeded so far, ``width`` trials per entry and round (1 for many
    entries, :data:`WIDTH` for fewer than :data:`WIDE_BELOW`; the trials are i.i.d. either way, so the law
    is the same).  Raises a ``RuntimeError`` when ``tV`` could leave
    int64 (``V > 2^62 / t``, probability below ``e^{-512}``, see :func:`fill_discrete_laplace`).
    """
    width = WIDTH if count < WIDE_BELOW else 1
    v = np.zeros(count, dtype=np.int64)
    active, rounds = np.arange(count), 0
    while len(active):
        if width == 1:  # the fastest form for many entries: one trial each
            active = active[_bernoulli_exp_minus_one(len(active), rng)]
            v[active] += 1
        else:
            trials = _bernoulli_exp_minus_one(len(active) * width, rng).reshape(len(active), width)
            np.logical_and.accumulate(trials, axis=1, out=trials)  # the leading successes
            v[active] += trials.sum(axis=1)
            active = active[trials[:, -1]]
        rounds += width
        if len(active) and rounds > _INT62 // t:
            raise RuntimeError("internal error: a geometric draw left the int64 range (probability < e^-512)")
    return v


#: Below this many entries, :func:`_geometric_count` and :func:`_bernoulli_exp_ratio` draw :data:`WIDTH` trials
#: per entry and round: fewer rounds, hence fewer numpy calls, whose fixed cost dominates for a few entries (a
#: mechanism's small levels, the privacy audit's many small runs); above it one trial per round is cheaper.
WIDE_BELOW = 1024
WIDTH = 6
#: Below this many draws :func:`_bernoulli_exp_minus_one` reads the trials off ``R`` by one binary search.
SMALL_COUNT = 256


_INT62 = 2 ** 62
#: ``Bernoulli(exp(-1))`` from one uniform integer below ``FACTORIAL_LEVELS! < 2^32``
#: (:func:`_bernoulli_exp_minus_one`).
FACTORIAL_LEVELS = 12
#: Trials of :func:`_bernoulli_exp_minus_one` read off ``R`` by comparisons (``k <= 5``); deeper ones
#: (probability ``1/5!``) by a binary search.
_COMPARED_LEVELS = 5


def _bernoulli_exp_minus_one(count: int, rng: np.random.Generator, levels: int = FACTORIAL_LEVELS) -> np.ndarray:
    """``count`` i.i.d. ``Bernoulli(exp(-1))`` ([CKS20] Algorithm 1 with ``gamma = 1``), as a bool array.

    Algorithm 1 draws ``A_k ~ Bernoulli(1/k)`` for ``k = 1, 2, ...`` until the first failure ``K`` and returns
    ``[K odd]``; ``P(K > k) = 1/k!`` and ``P(K odd) = e^{-1}``.  The first ``L = levels`` trials come from one
    ``R`` uniform on ``{0, ..., L! - 1}``: ``K > k`` iff ``R < L!/k!`` (an integer, so the event has probability
    ``1/k!`` exactly, and the events are nested as the trials' are), so ``K = 2 + #{2 <= k <= L : R < L!/k!}``
    unless ``R = 0`` (``K > L``, probability ``1/L!``); those entries go on with ``A_k = [integers(0, k) = 0]``
    for ``k = L + 1, ...``.  The first trials are read off ``R`` by comparisons (up to ``k = 5``, or ``k = 2``
    for fewer than :data:`SMALL_COUNT` entries), the deeper ones by a binary search.
    """
    ratios = _factorial_ratios(levels)  # L!/k! for k = 1, ..., L (decreasing), L >= 2
    compared = min(_COMPARED_LEVELS, levels) if count >= SMALL_COUNT else 2
    r = _uniform_below(int(ratios[0]), count, rng)
    passed = (r < ratios[1]).view(np.uint8)  # #{2 <= k <= compared : K > k} (k = 1 always passes: R < L!)
    for ratio in ratios[2:compared]:
        np.add(passed, r < ratio, out=passed, casting="unsafe")
    deep = np.flatnonzero(passed == compared - 1)
    passed[deep] = len(ratios) - 1 - np.searchsorted(ratios[::-1], r[deep], side="right")
    deep = deep[passed[deep] == levels - 1]  # R = 0: K > L
    k = levels + 1
    while len(deep):  # K > k - 1: Bernoulli(1/k) trials, rounds over the entries still going on
        go = _uniform_below(k, len(deep), rng) == 0
        passed[deep[go]] ^= 1  # one more passed trial: only the parity of their number is needed
        deep, k = deep[go], k + 1
    return (passed & 1).view(np.bool_)  # K = 2 + passed is odd


@functools.cache
def _factorial_ratios(levels: int) -> np.ndarray:
    """``L!/k!`` for ``k = 1, ..., L`` (decreasing), int64."""
    return np.array([math.factorial(levels) // math.factorial(k) for k in range(1, levels + 1)], dtype=np.int64)


def _bernoulli_exp_ratio(u: np.ndarray, t: int, rng: np.random.Generator) -> np.ndarray:
    """``Bernoulli(exp(-u/t))`` for integers ``0 <= u < t`` ([CKS20] Algorithm 1, ``gamma = u/t <= 1``), bool array.

    ``A_k ~ Bernoulli(u/(t k))`` is drawn as ``[integers(0, k) = 0] and [integers(0, t) < u]`` (no product
    ``t k``, so no overflow); the result is ``[K odd]`` for the first failure ``K``.  One round per ``k``, over
    the entries whose trials all succeeded so far (``P(K > k) <= 1/k!``).
    """
    if len(u) < WIDE_BELOW:
        return _bernoulli_exp_ratio_wide(u, t, rng)
    result = _uniform_below(t, len(u), rng) >= u  # K = 1 (odd: 1) where A_1 fails
    active, k = np.flatnonzero(~result), 2  # A_1 succeeded: K >= 2
    numerator = u[active]
    while len(active):
        result[active] = k % 2 == 1  # K = k unless A_k succeeds (then overwritten in a later round)
        hit = np.flatnonzero(_uniform_below(k, len(active), rng) == 0)
        hit = hit[_uniform_below(t, len(hit), rng) < numerator[hit]]
        active, numerator, k = active[hit], numerator[hit], k + 1
    return result


def _bernoulli_exp_ratio_wide(u: np.ndarray, t: int, rng: np.random.Generator) -> np.ndarray:
    """:func:`_bernoulli_exp_ratio` with :data:`WIDTH` trials ``A_k, ..., A_{k+WIDTH-1}`` per entry and round, for
    fewer than :data:`WIDE_BELOW` entries.

    ``A_j = [I_j = 0] and [W_j < u]`` with independent ``I_j`` uniform below ``j`` and ``W_j`` uniform below ``t``.
    The leading run of ``[I_j = 0]`` comes from one ``R`` uniform below ``P = k (k+1) ... (k+WIDTH-1)``: it is at
    least ``r`` iff ``R < P / (k ... (k+r-1))`` (probability ``1 / (k ... (k+r-1))`` exactly, nested as the trials'
    events are), as in :func:`_bernoulli_exp_minus_one`; the leading run of ``[W_j < u]`` from ``WIDTH`` draws.
    The first failure is at ``k`` plus the shorter of the two runs.
    """
    result = np.empty(len(u), dtype=bool)
    active, numerator, k = np.arange(len(u)), u, 1
    while len(active):
        m = len(active)
        cuts = _rising_cuts(k)  # P / (k ... (k+r-1)) for r = 0, ..., WIDTH (decreasing, the last is 1)
        r = rng.integers(0, cuts[0], size=(m, 1), dtype=np.int64)
        zeros = (r < cuts[1:]).sum(axis=1)  # leading run of [I_j = 0]
        below = _uniform_below(t, m * WIDTH, rng).reshape(m, WIDTH) < numerator[:, None]
        np.logical_and.accumulate(below, axis=1, out=below)
        passed = np.minimum(zeros, below.sum(axis=1))  # leading successes: K = k + passed when passed < WIDTH
        done = passed < WIDTH
        result[active[done]] = (k + passed[done]) % 2 == 1
        active, numerator, k = active[~done], numerator[~done], k + WIDTH
    return result


@functools.cache
def _rising_cuts(k: int) -> np.ndarray:
    """``P / (k (k+1) ... (k+r-1))`` for ``r = 0, ..., WIDTH`` with ``P = k (k+1) ... (k+WIDTH-1)`` (int64; ``k``
    stays far below the 1500 or so where ``P`` would pass 2^63: ``P(K > k) <= 1/k!``)."""
    product = math.prod(range(k, k + WIDTH))
    return np.array([product // math.prod(range(k, k + r)) for r in range(WIDTH + 1)], dtype=np.int64)


def _uniform_below(bound: int, count: int, rng: np.random.Generator) -> np.ndarray:
    """``count`` i.i.d. integers uniform on ``{0, ..., bound - 1}`` (``Generator.integers``: integer arithmetic),
    uint32 when the bound allows it (numpy's 32-bit path is several times faster than its 64-bit one)."""
    return rng.integers(0, bound, size=count, dtype=np.uint32 if bound <= 2 ** 32 else np.int64)


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
    return checked_generator(rng)
