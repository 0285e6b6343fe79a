"""Speed of the integer-only discrete Laplace sampler against the float-based one it replaced.

Prints
1. the time to draw 10^7 ``Lap_Z(sigma)`` counts (``noise.fill_discrete_laplace`` into an int64 array) at
   sigma = 1, 10, 1000 with the integer-only sampler (Canonne, Kamath, Steinke, NeurIPS 2020, Algorithms 1-2)
   and with the previous one, copied below from the parent commit for the comparison only (magnitude
   ``ceil(E / L) - 1`` from numpy's float ``standard_exponential`` ``E``, or ``Generator.geometric`` at success
   probability 1/3 and above, sign from a raw bit, "minus zero" rejected);
2. PMM end to end on ``two_blobs(10**6, 2)`` (eps = 1, replace-one, seed 0).

Each figure is the least of ``--repeats`` runs (the machine is shared: the least is the least disturbed run).

Usage: python -m benchmarks.bench_noise [--repeats 5]
"""

from __future__ import annotations

import argparse
import math
import time
from collections.abc import Callable

import numpy as np

import privsyn_core as ps
from privsyn_core.data.datasets import two_blobs
from privsyn_core.privacy import noise

DRAWS = 10 ** 7
SCALES = (1.0, 10.0, 1000.0)


def float_sampler(out: np.ndarray, sigma: float, rng: np.random.Generator) -> None:
    """The previous sampler, as it was at the parent commit 2bb866e (for comparison only), chunk by chunk."""
    success = -math.expm1(-1.0 / sigma)
    for start in range(0, len(out), noise.NOISE_CHUNK):
        target = out[start:start + noise.NOISE_CHUNK]
        index = _float_signed_magnitudes(target, success, rng)
        while len(index):
            redo = np.empty(len(index), dtype=np.int64)
            rejected = _float_signed_magnitudes(redo, success, rng)
            target[index] = redo
            index = index[rejected]


def _float_signed_magnitudes(out: np.ndarray, success: float, rng: np.random.Generator) -> np.ndarray:
    """``out = (1 - 2S) V`` with ``V = ceil(E / L) - 1`` (numpy's inversion path of ``geometric``, ``E`` a float
    exponential draw; ``Generator.geometric`` itself from success probability 1/3 up); rejected positions."""
    if success < 1 / 3:
        draws = rng.standard_exponential(len(out))
        np.divide(draws, -math.log1p(-success), out=draws)
        np.ceil(draws, out=draws)
        np.subtract(draws, 1.0, out=draws)
        np.copyto(out, draws, casting="unsafe")
    else:
        np.subtract(rng.geometric(success, len(out)), 1, out=out)
    raw = rng.bit_generator.random_raw((len(out) + 63) // 64)
    signs = np.unpackbits(np.ascontiguousarray(raw).view(np.uint8), count=len(out))
    mask = np.subtract(0, signs, dtype=np.int64)
    np.bitwise_xor(out, mask, out=out)
    np.subtract(out, mask, out=out)
    return np.flatnonzero(np.logical_and(signs.view(np.bool_), out == 0))


def least_time(run: Callable[[], object], repeats: int) -> float:
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        run()
        times.append(time.perf_counter() - start)
    return min(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    out = np.zeros(DRAWS, dtype=np.int64)  # touched once: page faults are not timed
    print(f"10^7 discrete Laplace draws (least of {args.repeats} runs)")
    print(f"{'sigma':>7} {'float s':>8} {'integer s':>10} {'ratio':>6}")
    for sigma in SCALES:
        old = least_time(lambda s=sigma: float_sampler(out, s, np.random.default_rng(0)), args.repeats)
        new = least_time(lambda s=sigma: noise.fill_discrete_laplace(out, s, np.random.default_rng(0)), args.repeats)
        print(f"{sigma:7g} {old:8.3f} {new:10.3f} {new / old:6.1f}")
    X = two_blobs(10 ** 6, 2, rng=0)
    schema = ps.unit_schema(2)
    pmm = least_time(lambda: ps.synthesize(X, "pmm", 1.0, schema=schema, rng=0), args.repeats)
    depth = ps.synthesize(X, "pmm", 1.0, schema=schema, rng=0).params["depth"]
    print(f"pmm, two_blobs(10^6, 2), eps = 1: {pmm:.3f} s end to end (depth {depth}: "
          f"{2 ** (depth + 1) - 2} noisy counts)")


if __name__ == "__main__":
    main()
