"""Metric benchmark: wall time of W1 (exact POT and the grid method with its error bound) and of MMD.

Usage::

    PYTHONPATH=. python benchmarks/bench_metrics.py [--big 100000] [--exact 2000 5000] [--budgets 4000000 16000000]

* exact: ``w1(method="exact")`` (POT network simplex, l-infinity) at n = m = 2000 and 5000 in d = 2, uniform
  against clipped Gaussian points (no shared atoms, so nothing cancels).
* grid: ``w1`` ("auto", which is the grid method here) at n = m = 10^5 in d = 2 and d = 3, for each cost-matrix
  budget, with the additive error bound it reports; at the smallest size also the true error against exact.
* mmd: ``mmd`` (biased, chunked kernel sums) at n = m = 10^4 and the linear-time estimator at 10^5.

Times are wall-clock seconds on the machine at hand (shared cores inflate them); seed 0 throughout.
``--doc docs/reproduction.md`` also writes the printed lines into that report's ``w1-timings`` section.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

from privsyn_core.metrics import mmd, mmd2, w1

sys.path.insert(0, str(Path(__file__).resolve().parent))
from docsection import update_section  # noqa: E402

LINES: list[str] = []


def say(line: str) -> None:
    """Print ``line`` and keep it for the report section."""
    print(line, flush=True)
    LINES.append(line)


def clouds(n: int, d: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    return rng.random((n, d)), np.clip(rng.normal(0.5, 0.2, (n, d)), 0, 1)


def timed(fn):
    start = time.perf_counter()
    value = fn()
    return value, time.perf_counter() - start


def exact_section(sizes: list[int]) -> dict[int, float]:
    say("## exact W1 (POT ot.emd2, chebyshev, d = 2)")
    values = {}
    for n in sizes:
        X, Y = clouds(n, 2)
        value, seconds = timed(lambda: w1(X, Y, method="exact"))
        values[n] = float(value)
        say(f"n = m = {n:>6}: W1 = {value:.6f}  time {seconds:6.2f} s")
    return values


def grid_section(big: int, budgets: list[int]) -> None:
    say(f"## grid W1 at n = m = {big} (chebyshev)")
    for d in (2, 3):
        X, Y = clouds(big, d)
        for budget in budgets:
            value, seconds = timed(lambda: w1(X, Y, max_entries=budget))
            say(f"d = {d}, budget {budget:>9}: W1 = {value:.6f} +- {value.error_bound:.6f} ({value.method}, "
                  f"{value.cells_per_axis} cells/axis)  time {seconds:6.2f} s")


def grid_vs_exact(n: int, exact: float) -> None:
    X, Y = clouds(n, 2)
    for budget in (250_000, 1_000_000, 4_000_000):
        value, seconds = timed(lambda: w1(X, Y, method="grid", max_entries=budget))
        say(f"grid vs exact at n = {n}, budget {budget:>8}: |grid - exact| = {abs(value - exact):.2e} "
              f"<= bound {value.error_bound:.2e} ({value.cells_per_axis} cells/axis, {seconds:.2f} s)")


def mmd_section() -> None:
    say("## MMD (Gaussian kernel, median bandwidth)")
    X, Y = clouds(10_000, 2)
    value, seconds = timed(lambda: mmd(X, Y))
    say(f"biased, n = m = 10^4: MMD = {value:.6f}  time {seconds:6.2f} s")
    X, Y = clouds(100_000, 2)
    value, seconds = timed(lambda: mmd2(X, Y, bandwidth=0.3, estimator="linear"))
    say(f"linear MMD^2, n = m = 10^5, bandwidth 0.3: {value:.6f}  time {seconds:6.2f} s")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--big", type=int, default=100_000)
    parser.add_argument("--exact", type=int, nargs="+", default=[2000, 5000])
    parser.add_argument("--budgets", type=int, nargs="+", default=[4_000_000, 16_000_000])
    parser.add_argument("--doc", type=Path, help="also write the output into this Markdown file's w1-timings section")
    args = parser.parse_args()
    exact = exact_section(args.exact)
    grid_vs_exact(min(exact), exact[min(exact)])
    grid_section(args.big, args.budgets)
    mmd_section()
    if args.doc:
        command = " ".join(["python benchmarks/bench_metrics.py", *sys.argv[1:]])
        update_section("w1-timings", f"Output of `{command}` (wall seconds, 2 shared cores):\n\n```text\n"
                       + "\n".join(LINES) + "\n```", doc=args.doc)


if __name__ == "__main__":
    main()
