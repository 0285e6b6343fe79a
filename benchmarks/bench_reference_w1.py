"""The data-blind reference of ``tests/test_baselines.py``: exact W1 (l-inf) between the uniform table of the test
(seed 3, n = 1000, d = 3) and 1000 points drawn uniformly without looking at it, over seeds 100.. .

Usage::

    python -m benchmarks.bench_reference_w1 [--seeds 10]
"""

from __future__ import annotations

import argparse

import numpy as np

from privsyn_core.evaluation.distances import w1


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=10)
    args = parser.parse_args()
    X = np.random.default_rng(3).random((1000, 3))
    values = np.array([w1(X, np.random.default_rng(100 + s).random((1000, 3))) for s in range(args.seeds)])
    print(f"data-blind W1 over {args.seeds} seeds: mean {values.mean():.4f}, sd {values.std(ddof=1):.4f}, "
          f"min {values.min():.4f}, max {values.max():.4f}")


if __name__ == "__main__":
    main()
