"""Time of ``import privsyn_core`` (and of ``privsyn mechanisms``) in fresh interpreters, against the floor set by
its two unavoidable dependencies, numpy and pandas.

Usage::

    python -m benchmarks.bench_import [--repeats 5]

Prints the median wall and CPU (user + system) seconds of each command over ``--repeats`` fresh processes, and
which heavy libraries the import loaded (none is expected: POT, scikit-learn, Dask, Plotly, Streamlit).
"""

from __future__ import annotations

import argparse
import resource
import statistics
import subprocess
import sys
import time

HEAVY = ("ot", "sklearn", "dask", "distributed", "plotly", "streamlit", "scipy.optimize")
COMMANDS = {
    "python (empty)": "pass",
    "import numpy, pandas": "import numpy, pandas",
    "import privsyn_core": "import privsyn_core",
    "privsyn mechanisms": "import sys; from privsyn_core.cli import main; sys.stdout = open('/dev/null', 'w'); "
                          "main(['mechanisms'])",
}


def timed(code: str) -> tuple[float, float]:
    """Wall and CPU seconds of one fresh ``python -c code``."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    subprocess.run([sys.executable, "-c", code], check=True)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    for label, code in COMMANDS.items():
        runs = [timed(code) for _ in range(args.repeats)]
        wall = statistics.median(w for w, _ in runs)
        cpu = statistics.median(c for _, c in runs)
        print(f"{label:<22} wall {wall:6.2f} s   cpu {cpu:6.2f} s   (median of {args.repeats})")
    loaded = subprocess.run([sys.executable, "-c", f"import sys, privsyn_core; print([m for m in {HEAVY!r} "
                             "if m in sys.modules])"], check=True, capture_output=True, text=True).stdout.strip()
    print(f"heavy modules loaded by import privsyn_core: {loaded}")


if __name__ == "__main__":
    main()
