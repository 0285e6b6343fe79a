r"""Exact discrete Laplace draws by inversion against exact integer thresholds (the fast path of
:func:`privsyn_core.privacy.noise.fill_discrete_laplace` for scales up to about 3900).

For ``Z ~ Lap_Z(sigma)``, ``p = e^{-1/sigma}``, the magnitude ``M = |Z|`` has the survival function
``P(M >= k) = T_k = 2 p^k / (1 + p)`` (``k >= 1``) and the sign is a fair coin independent of ``M`` (only
``M > 0`` reads it): ``P(Z = z) = (T_{|z|} - T_{|z|+1}) / 2 = (1-p)/(1+p) p^{|z|}`` for ``z != 0`` and
``1 - T_1 = (1-p)/(1+p)`` for ``z = 0``, the law of ``G_1 - G_2`` with i.i.d. geometric ``G_i`` ([HVZ23] App. B).

A uniform ``U`` on ``[0, 1)`` is the infinite bit string of raw words of the bit generator, and
``M = #{k >= 1 : U < T_k}`` (inversion).  No float is drawn or rounded: each ``T_k`` is irrational (``p`` is
transcendental), and with the exact integer ``c_k = floor(T_k 2^63)`` (:func:`exp_neg_bounds`, interval
arithmetic on Python integers) the first 63 bits ``u`` of ``U`` decide ``U < T_k`` unless ``u = c_k``:
``u < c_k`` gives ``U < (u + 1) 2^-63 <= c_k 2^-63 <= T_k``, ``u > c_k`` gives ``U >= (c_k + 1) 2^-63 > T_k``.
The rare ``u = c_k`` (probability ``2^-63`` per threshold) is decided by the next 64-bit words against the next
bits of ``T_k`` (:func:`resolve_ties`), which ends with probability 1.  The table holds ``T_1, ..., T_L`` down to
``2^-TAIL_BITS``; the draws with ``M >= L`` add ``L`` plus a geometric ``G``, ``P(G >= g) = p^g`` (memorylessness:
``P(M >= L + g | M >= L) = p^g``), drawn the same way from the thresholds ``p^1, ..., p^L`` (and again ``L``
plus a fresh one while ``G`` reaches ``L``).  One 64-bit word per draw: bit 0 is the sign, bits 1-63 are ``u``.

The count ``#{k : u < c_k}`` starts from a guide table ([Devroye 1986, III.2.4], the "indexed search" of
Chen and Asau 1974): ``guide[b]`` is the number of thresholds above every ``u`` whose top :data:`GUIDE_BITS` bits
are ``b``, and the few thresholds inside bucket ``b`` are passed one comparison round at a time.

References
----------
.. [HVZ23] Y. He, R. Vershynin, Y. Zhu, "Algorithmically Effective Differentially Private Synthetic Data",
   COLT 2023 (seed 004), Appendix B.
.. [Devroye 1986] L. Devroye, "Non-Uniform Random Variate Generation", Springer 1986, Section III.2.4 (inversion
   by a guide table); H.-C. Chen and Y. Asau, "On generating random variates from an empirical distribution",
   AIIE Transactions 6, 1974.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass
from fractions import Fraction

import numpy as np

#: Bits of ``u`` (bits 1-63 of a raw word; bit 0 is the sign).
U_BITS = 63
#: The table stops at the first ``T_L < 2^-TAIL_BITS``: a draw needs the geometric tail with probability below that.
TAIL_BITS = 12
#: Largest table: scales whose table would be longer (``sigma`` above about ``2^15 / (12 ln 2) = 3900``) use the
#: rejection sampler of [CKS20] (:func:`privsyn_core.privacy.noise.fill_discrete_laplace`).
MAX_THRESHOLDS = 2 ** 15
#: Top bits of ``u`` that index the guide table.
GUIDE_BITS = 14
#: Guard bits of the interval arithmetic of the tables (more are taken when an interval straddles an integer).
_GUARD_BITS = 64
#: Tables kept by :func:`threshold_table` (least recently used dropped first): more than the distinct scales of one
#: run of :func:`privsyn_core.evaluation.stream_eval.over_time` with the app's defaults (every step, seed and
#: method), so that a run finds the tables its previous run made; a cycle through more scales than the cache holds
#: would rebuild every table.  A table holds ``2^GUIDE_BITS + L + 1`` int64 (``L <= MAX_THRESHOLDS``): 128 KiB
#: plus at most 256 KiB, so the cache holds at most 48 MiB.
TABLE_CACHE_SIZE = 128


def exp_neg_bounds(num: int, den: int, bits: int) -> tuple[int, int]:
    """Integers ``lo <= 2^bits e^{-num/den} <= hi`` (``num >= 0``, ``den >= 1``), with ``hi - lo`` a few units.

    ``x = num/den`` is halved ``j`` times to ``y = x / 2^j <= 1``; there the Taylor series of ``e^{-y}`` alternates
    with decreasing terms, so a partial sum is within its last term of the value (exact rationals); the bounds
    are then squared ``j`` times in fixed point with ``bits + j + 64`` bits, rounding ``lo`` down and ``hi`` up.
    """
    j = 0
    while num > den << j:
        j += 1
    work = bits + j + _GUARD_BITS
    y = Fraction(num, den << j)
    partial, term, i = Fraction(1), Fraction(1), 0
    tolerance = Fraction(1, 1 << (work + 2))
    while term > tolerance:
        i += 1
        term = term * y / i
        partial += -term if i % 2 else term
    lo = (partial - term) * (1 << work)
    hi = (partial + term) * (1 << work)
    lo_int, hi_int = lo.numerator // lo.denominator, -(-hi.numerator // hi.denominator)
    for _ in range(j):
        lo_int, hi_int = (lo_int * lo_int) >> work, -(-(hi_int * hi_int) >> work)
    shift = work - bits
    return lo_int >> shift, -(-hi_int >> shift)


def threshold_bits(kind: str, k: int, t: int, s: int, bits: int) -> int:
    """``floor(T 2^bits)`` exactly for the threshold ``T = 2 p^k / (1 + p)`` (``kind="magnitude"``) or ``p^k``
    (``"geometric"``) of the scale ``sigma = t/s`` (``p = e^{-s/t}``): interval bounds of ``T``
    (:func:`exp_neg_bounds`) with more guard bits until both ends have the same floor (they do eventually: ``T`` is
    irrational)."""
    extra = _GUARD_BITS
    while True:
        work = bits + extra
        pk_lo, pk_hi = exp_neg_bounds(k * s, t, work)
        if kind == "geometric":
            lo, hi = pk_lo, pk_hi
        else:
            p_lo, p_hi = exp_neg_bounds(s, t, work)
            one = 1 << work
            lo, hi = (2 * pk_lo << work) // (one + p_hi), -(-(2 * pk_hi << work) // (one + p_lo))
        if lo >> extra == hi >> extra:
            return lo >> extra
        extra *= 2


@dataclass(frozen=True)
class ThresholdTable:
    """``c_k = floor(T_k 2^63)`` for ``k = 1..L`` (decreasing), the guide table and the rounds it needs.

    ``upper[k]`` is ``c_{k+1}`` for ``k = 0..L-1`` and 0 for ``k = L`` (no ``u`` is below it), so
    ``upper[M]`` is the next threshold a count ``M`` is compared with.
    """

    kind: str
    t: int
    s: int
    upper: np.ndarray
    guide: np.ndarray
    rounds: int

    @property
    def length(self) -> int:
        return len(self.upper) - 1

    def count_above(self, u: np.ndarray) -> np.ndarray:
        """``#{k <= L : u < c_k}`` for 63-bit integers ``u`` (int64), exact; ``u`` equal to a threshold counts it
        as not above (the caller resolves those, :func:`resolve_ties`)."""
        m = self.guide.take(u >> (U_BITS - GUIDE_BITS))
        step = np.less(u, self.upper.take(m))
        m += step
        if self.rounds > 1:  # further thresholds in the bucket: only the draws that passed one may pass another
            active = np.flatnonzero(step)
            while len(active):
                at = m[active]
                passed = u[active] < self.upper.take(at)
                m[active] = at + passed
                active = active[passed]
        return m

    def exact_bits(self, k: int, bits: int) -> int:
        """``floor(T_k 2^bits)`` (:func:`threshold_bits`)."""
        return threshold_bits(self.kind, k, self.t, self.s, bits)


@functools.lru_cache(maxsize=TABLE_CACHE_SIZE)
def threshold_table(kind: str, t: int, s: int) -> ThresholdTable | None:
    """The table of the scale ``t/s`` (``kind`` as in :func:`threshold_bits`), or ``None`` when it would hold more
    than :data:`MAX_THRESHOLDS` thresholds.  Both kinds stop at the same ``L``: the first magnitude threshold below
    ``2^-TAIL_BITS``.

    ``p^k`` is carried in fixed point with ``63 + 64 + log2 L`` bits, its lower and upper bounds rounded down and up
    at every multiplication; a threshold whose bounds have different floors at 63 bits is computed again on its
    own (:func:`threshold_bits`).
    """
    work = U_BITS + _GUARD_BITS + MAX_THRESHOLDS.bit_length()
    one = 1 << work
    p_lo, p_hi = exp_neg_bounds(s, t, work)
    stop = 1 << (U_BITS - TAIL_BITS)
    pk_lo, pk_hi = one, one
    values: list[int] = []
    magnitude_stop = False
    while not magnitude_stop:
        if len(values) == MAX_THRESHOLDS:
            return None
        k = len(values) + 1
        pk_lo, pk_hi = (pk_lo * p_lo) >> work, -(-(pk_hi * p_hi) >> work)
        m_lo, m_hi = (2 * pk_lo << work) // (one + p_hi), -(-(2 * pk_hi << work) // (one + p_lo))
        magnitude_stop = (m_hi >> (work - U_BITS)) < stop
        lo, hi = (m_lo, m_hi) if kind == "magnitude" else (pk_lo, pk_hi)
        c_lo, c_hi = lo >> (work - U_BITS), hi >> (work - U_BITS)
        values.append(c_lo if c_lo == c_hi else threshold_bits(kind, k, t, s, U_BITS))
    upper = np.array(values + [0], dtype=np.int64)
    descending = np.array(values, dtype=np.int64)
    ascending = descending[::-1]
    bucket_top = (np.arange(1, (1 << GUIDE_BITS) + 1, dtype=np.int64) << (U_BITS - GUIDE_BITS)) - 1
    guide = len(values) - np.searchsorted(ascending, bucket_top, side="right")  # thresholds above the whole bucket
    bucket_low = np.arange(1 << GUIDE_BITS, dtype=np.int64) << (U_BITS - GUIDE_BITS)
    inside = len(values) - np.searchsorted(ascending, bucket_low, side="right") - guide  # thresholds in the bucket
    return ThresholdTable(kind, t, s, upper, guide.astype(np.int64), int(inside.max()))


def resolve_ties(table: ThresholdTable, u: np.ndarray, m: np.ndarray, more_words: Callable[[int], np.ndarray]) -> None:
    """Decide, in place, the counts ``m`` of the draws whose ``u`` equals the threshold ``c_{m+1}``.

    ``U < T_{m+1}`` is read off the next 64-bit words of ``U`` (``more_words(1)``, one word at a time) against
    the next bits of ``T_{m+1}``: the first word that differs decides; where ``U < T_{m+1}`` the count is
    ``m + 1`` (``c_{m+2} < c_{m+1} = u`` as the thresholds are strictly decreasing, so no further threshold is
    above ``U``).  Probability ``2^-63`` per draw and threshold: a Python loop over those draws.
    """
    tied = np.flatnonzero((m < table.length) & (u == table.upper.take(m)))
    for i in tied.tolist():
        k, prefix, bits = int(m[i]) + 1, int(u[i]), U_BITS
        while True:
            prefix, bits = (prefix << 64) | int(more_words(1)[0]), bits + 64
            threshold = table.exact_bits(k, bits)
            if prefix != threshold:
                m[i] += prefix < threshold
                break


def fill_table_laplace(out: np.ndarray, magnitude: ThresholdTable, geometric: ThresholdTable,
                       rng: np.random.Generator) -> None:
    """``len(out)`` i.i.d. ``Lap_Z(t/s)`` draws into the int64 array ``out`` (module docstring), from the raw
    64-bit words of ``rng``'s bit generator, one per draw (more for the tail and the ties)."""
    def more_words(count: int) -> np.ndarray:
        return rng.bit_generator.random_raw(count)

    raw = more_words(len(out))
    negative = np.bitwise_and(raw, 1).view(np.int64)
    np.negative(negative, out=negative)  # -B: all ones where the sign bit B is 1
    u = np.right_shift(raw, 1, out=raw).view(np.int64)
    m = magnitude.count_above(u)
    resolve_ties(magnitude, u, m, more_words)
    tail = np.flatnonzero(m == magnitude.length)
    while len(tail):
        v = np.right_shift(more_words(len(tail)), 1).view(np.int64)
        g = geometric.count_above(v)
        resolve_ties(geometric, v, g, more_words)
        m[tail] += g
        tail = tail[g == geometric.length]
    np.bitwise_xor(m, negative, out=out)
    np.subtract(out, negative, out=out)  # (M ^ -B) + B = (1 - 2B) M in two's complement
