r"""A continual counter for an unbounded stream: the *hybrid mechanism* of Chan, Shi and Song [CSS11],
vectorised over many cells and with exact discrete Laplace noise.

A counter receives, at every step ``t = 1, 2, ...``, an increment vector ``x_t`` (integer counts, one entry per
cell) and releases a noisy prefix sum ``C(t) ~ sum_{s <= t} x_s``.  One record changes one ``x_s`` in one cell
by one.  The horizon is unknown, so the binary mechanism of [DNPR10]/[CSS11] (whose noise scale grows with
``log T``) is run on blocks of doubling length, and a logarithmic mechanism releases the block sums
([CSS11] Section 4, "hybrid mechanism"):

* **logarithmic part** (budget ``eps_log``): blocks ``B_0 = {1}``, ``B_k = (2^{k-1}, 2^k]``; at ``t = 2^k`` the
  block sum ``beta_k = sum_{s in B_k} x_s`` is released as ``beta_k + Lap_Z(1/eps_log)``;
* **binary part** (budget ``eps_bin``): for ``2^k < t < 2^{k+1}`` let ``u = t - 2^k`` (``1 <= u < 2^k``).  Instance
  ``k`` is the binary (tree) mechanism over the steps ``2^k + 1, ..., 2^{k+1} - 1`` with ``k`` levels: at step
  ``u`` it releases the *p-sum* of the dyadic interval ``(u - 2^i, u]`` with ``i`` the lowest set bit of ``u``,
  plus ``Lap_Z(k / eps_bin)``;
* **output** ``C(t) = sum_{b <= k} beta_hat_b + sum_{i : bit i of u set} alpha_hat_i`` (no binary term when
  ``t = 2^k``).

Privacy ([CSS11] Section 4, the hybrid mechanism's privacy argument; derived in ``docs/online_pmm.md``).  A record
at step ``s`` lies in exactly one block (one logarithmic release changes by one: ``eps_log``-DP) and, unless ``s`` is a
power of two, in at most one dyadic interval per level of one binary instance ``k`` (at most ``k`` p-sums change by
one, each with scale ``k / eps_bin``: ``eps_bin``-DP).  So the counter is ``(eps_log + eps_bin)``-DP for the whole
infinite stream; with many cells, one record changes one cell only (parallel composition).

Error.  At step ``t`` (``k = floor(log2 t)``, ``u = t - 2^k``) the noise of ``C(t)`` is a sum of ``k + 1``
independent ``Lap_Z(1/eps_log)`` and ``popcount(u)`` independent ``Lap_Z(k/eps_bin)`` (:func:`error_variance`),
``O(log^{1.5}(t) / eps)`` in standard deviation.

State: per cell, the open block's true sum, the released logarithmic sum, and per binary level the true and
noisy p-sum of the current binary decomposition (``O(log t)`` vectors).  It holds true partial sums: it is as
secret as the raw data.

References
----------
.. [DNPR10] C. Dwork, M. Naor, T. Pitassi, G. N. Rothblum, "Differential Privacy Under Continual Observation",
   STOC 2010.
.. [CSS11] T.-H. H. Chan, E. Shi, D. Song, "Private and Continual Release of Statistics", ACM TISSEC 14(3), 2011
   (ICALP 2010): the binary mechanism (Section 3) and the hybrid mechanism for an unknown horizon (Section 4).
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np

from privsyn_core.privacy.noise import discrete_laplace_variance, fill_discrete_laplace

#: ``node_rng(label)`` -> the generator of one released node's noise (a pure function of the label).
NodeRng = Callable[[str], np.random.Generator]


@dataclass
class CounterState:
    """The hybrid counter's state after ``step`` steps (all arrays int64, one entry per cell).

    ``block_true``: true sum of the open logarithmic block; ``log_noisy``: sum of the released noisy block
    sums; ``alpha_true[i]``/``alpha_noisy[i]``: true and noisy p-sum of binary level ``i`` in the current
    decomposition of ``u`` (zero where bit ``i`` of ``u`` is 0); ``output``: the released ``C(step)``.
    """

    step: int
    block_true: np.ndarray
    log_noisy: np.ndarray
    alpha_true: list[np.ndarray] = field(default_factory=list)
    alpha_noisy: list[np.ndarray] = field(default_factory=list)
    output: np.ndarray | None = None

    @classmethod
    def empty(cls, size: int) -> CounterState:
        zeros = np.zeros(size, dtype=np.int64)
        return cls(0, zeros.copy(), zeros.copy(), [], [], zeros.copy())

    def well_formed(self) -> bool:
        """True when the binary levels match the step: ``k = floor(log2 step)`` of them from step 1 on (instance
        ``k`` of the binary mechanism has ``k`` levels), none before, as :func:`advance` leaves them."""
        levels = block_of(self.step) if self.step >= 1 else 0
        return len(self.alpha_true) == len(self.alpha_noisy) == levels


@dataclass(frozen=True)
class Segments:
    """The cells cut into consecutive segments, each with its own budgets (one segment per PMM level).

    ``bounds[s]:bounds[s+1]`` are the cells of segment ``s``; ``eps_log[s]`` and ``eps_bin[s]`` its budgets.
    """

    bounds: tuple[int, ...]
    eps_log: tuple[float, ...]
    eps_bin: tuple[float, ...]

    def slices(self) -> list[slice]:
        return [slice(a, b) for a, b in zip(self.bounds[:-1], self.bounds[1:], strict=True)]


def block_of(t: int) -> int:
    """``k = floor(log2 t)``: the doubling block (and binary instance) of step ``t >= 1``."""
    return int(t).bit_length() - 1


def is_power_of_two(t: int) -> bool:
    return t > 0 and t & (t - 1) == 0


def node_label(t: int) -> list[str]:
    """Labels of the nodes released at step ``t``: ``log/k`` at ``t = 2^k``, else ``bin/k/u``."""
    k = block_of(t)
    return [f"log/{k}"] if is_power_of_two(t) else [f"bin/{k}/{t - (1 << k)}"]


def nodes_containing(s: int, horizon: int) -> list[str]:
    """Labels of the released nodes (up to step ``horizon``) whose sum contains step ``s``.

    One logarithmic block, and at most ``k`` binary p-sums (one per level) when ``s`` is not a power of two.
    """
    k_block = (s - 1).bit_length()  # B_0 = {1}, B_k = (2^{k-1}, 2^k]
    out = [f"log/{k_block}"] if (1 << k_block) <= horizon else []
    if not is_power_of_two(s):
        k = block_of(s)
        u = s - (1 << k)
        for i in range(k):
            end = (((u - 1) >> i) << i) + (1 << i)  # the level-i dyadic interval (end - 2^i, end] holding u
            # released as its own node at step ``end`` only when ``i`` is the lowest set bit of ``end``
            if (end >> i) & 1 and end < (1 << k) and end + (1 << k) <= horizon:
                out.append(f"bin/{k}/{end}")
    return out


def advance(state: CounterState, x: np.ndarray, segments: Segments, node_rng: NodeRng) -> np.ndarray:
    """One step: add the increment ``x`` (int64, one entry per cell) and return the released ``C(t)``.

    Mutates ``state``; the noise of each node is drawn from ``node_rng(label)`` segment by segment with
    :func:`~privsyn_core.privacy.noise.fill_discrete_laplace` (scale ``1/eps_log`` or ``k/eps_bin``).
    """
    t = state.step + 1
    k = block_of(t)
    state.block_true += x
    if is_power_of_two(t):  # the logarithmic release of block B_k, and a fresh binary instance k
        noisy = state.block_true.copy()
        _add_noise(noisy, segments, [1.0 / e for e in segments.eps_log], node_rng(f"log/{k}"))
        state.log_noisy += noisy
        state.block_true[:] = 0
        state.alpha_true = [np.zeros_like(x) for _ in range(k)]
        state.alpha_noisy = [np.zeros_like(x) for _ in range(k)]
        output = state.log_noisy.copy()
    else:
        u = t - (1 << k)
        i = (u & -u).bit_length() - 1
        merged = x.copy()
        for low in range(i):
            merged += state.alpha_true[low]
            state.alpha_true[low][:] = 0
            state.alpha_noisy[low][:] = 0
        state.alpha_true[i] = merged
        noisy = merged.copy()
        _add_noise(noisy, segments, [k / e for e in segments.eps_bin], node_rng(f"bin/{k}/{u}"))
        state.alpha_noisy[i] = noisy
        output = state.log_noisy + np.sum(state.alpha_noisy, axis=0, dtype=np.int64)
    state.step = t
    state.output = output
    return output


def _add_noise(values: np.ndarray, segments: Segments, scales: Sequence[float], rng: np.random.Generator) -> None:
    for part, scale in zip(segments.slices(), scales, strict=True):
        # CKS20's sampler: a node's noise is re-drawn from its label's generator, and must stay the same across
        # versions for a restored state (tests/test_stream.py, the version 1 state)
        fill_discrete_laplace(values[part], float(scale), rng, add=True, sampler="cks20")


def error_variance(t: int, eps_log: float, eps_bin: float) -> float:
    """Exact variance of one cell's ``C(t) - sum_{s<=t} x_s`` (independent discrete Laplace terms)."""
    k = block_of(t)
    variance = (k + 1) * discrete_laplace_variance(1.0 / eps_log)
    if not is_power_of_two(t):
        variance += bin(t - (1 << k)).count("1") * discrete_laplace_variance(k / eps_bin)
    return float(variance)


def keyed_rng(key: bytes) -> NodeRng:
    """Node generators keyed by a 256-bit secret: ChaCha20 keyed with ``BLAKE2b(key, label)``.

    The noise of a node is a pure function of the key and the node's label, so recomputing a step (after a
    crash, or on a copy of the state) reproduces the released noise instead of drawing fresh noise on the
    same counts (which would let an observer average it away).
    """
    from randomgen import ChaCha

    def node(label: str) -> np.random.Generator:
        digest = hashlib.blake2b(label.encode("utf-8"), key=key, digest_size=32).digest()
        return np.random.Generator(ChaCha(key=int.from_bytes(digest, "little"), rounds=20))
    return node
