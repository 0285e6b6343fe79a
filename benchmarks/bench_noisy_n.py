"""Utility cost of keeping n private under add/remove: PMM with the exact n read as if public (the
pre-fix behaviour, here as ``public_n = n``) against a noisy count released with 5% of epsilon.

Usage::

    python benchmarks/bench_noisy_n.py [--seeds 10]

Prints the mean exact W1 (l-infinity, POT's network simplex, ``method="exact"``) with its standard error over
seeds, for n = 10^3 and 10^4, d = 2, epsilon = 1, on uniform data and on two Gaussian blobs (data and noise from
seed s); at n = 10^4 between random subsamples of ``W1_ROWS`` rows a side.
"""

from __future__ import annotations

import argparse

import numpy as np

import privsyn_core as ps
from privsyn_core.data.datasets import two_blobs
from privsyn_core.evaluation.distances import w1

#: Exact W1 on at most this many rows per side (POT's dense EMD).
W1_ROWS = 3000


def subsample(a: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """At most ``W1_ROWS`` rows of ``a``, drawn without replacement (all of them when there are fewer)."""
    return a if len(a) <= W1_ROWS else a[rng.choice(len(a), W1_ROWS, replace=False)]


def mean_w1(data: str, n: int, seeds: int, public: bool) -> tuple[float, float]:
    values = []
    for seed in range(seeds):
        X = two_blobs(n, 2, rng=seed) if data == "blobs" else np.random.default_rng(seed).random((n, 2))
        result = ps.synthesize(X, "pmm", 1.0, schema=ps.unit_schema(2), neighbouring="add_remove", rng=seed,
                               public_n=n if public else None)
        rows = np.random.default_rng(seed + 1000)
        values.append(w1(subsample(X, rows), subsample(result.unit_rows, rows), method="exact"))
    return float(np.mean(values)), float(np.std(values, ddof=1) / np.sqrt(seeds))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--seeds", type=int, default=10)
    args = parser.parse_args()
    print(f"PMM, add/remove, d = 2, epsilon = 1, paper depth; mean W1 +- standard error over {args.seeds} seeds")
    print(f"{'data':8s} {'n':>6s} {'exact n as public (before)':>28s} {'noisy n, 5% of eps (after)':>28s}")
    for data in ("uniform", "blobs"):
        for n in (1000, 10_000):
            before, after = mean_w1(data, n, args.seeds, True), mean_w1(data, n, args.seeds, False)
            print(f"{data:8s} {n:6d} {before[0]:19.4f} +- {before[1]:.4f} {after[0]:19.4f} +- {after[1]:.4f}")


if __name__ == "__main__":
    main()
