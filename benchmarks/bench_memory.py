"""Peak memory and CPU cost of the count-based mechanisms from 10^6 to 10^7 rows, one subprocess per run.

Usage::

    PYTHONPATH=. python benchmarks/bench_memory.py [--sizes 1000000 10000000] [--d 2] [--mechanisms pmm psmm ...]
                                                   [--repeats 2] [--relation replace]

For every count-based mechanism (``pmm``, ``psmm``, ``kd_grid``, ``kd_adaptive``, ``dp_histogram``, ``srw_tsp``,
``srw``, with the parameters of ``bench_throughput.py``) and n in ``--sizes``, a fresh Python process

1. draws ``n`` uniform rows in ``[0,1]^d`` (the *input array*, ``8 n d`` bytes; ``d = 1`` for the one-column
   ``srw``);
2. restarts its peak-RSS counter from the current RSS (Linux ``/proc/self/clear_refs``), so the peak
   counts what the run adds on top of the interpreter, numpy and the input;
3. runs the registered run function (epsilon = 1, ``n`` synthetic rows, the output rows included) and reads
   ``VmHWM`` from ``/proc/self/status``;
4. repeats the run ``--repeats`` times and keeps the smallest CPU time (``time.process_time``: this process's
   user + system seconds, page faults included, so a shared machine's other jobs count less than in wall time).

Printed: the peak added by the run, in MB and as a multiple of the input array (target <= 3), the CPU seconds,
and per mechanism the cost exponent ``log(t_2/t_1) / log(n_2/n_1)`` between the two sizes (target <= 1.1).
The machine is shared: read the exponents of one run together (they are ratios within the run).
"""

from __future__ import annotations

import argparse
import json
import math
import subprocess
import sys

MECHANISMS = {"pmm": {}, "psmm": {"cells_per_axis": 64}, "kd_grid": {}, "kd_adaptive": {}, "dp_histogram": {},
              "srw_tsp": {}, "srw": {}}
#: Mechanisms of one column: they run with ``d = 1`` whatever ``--d`` says.
ONE_COLUMN = {"srw"}

CHILD = r"""
import json, sys, time
from pathlib import Path
import numpy as np
import privsyn_core as ps

name, relation, params = sys.argv[1], sys.argv[5], json.loads(sys.argv[6])
n, d, repeats = (int(a) for a in sys.argv[2:5])
status = Path("/proc/self/status")

def kb(field):
    for line in status.read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    raise RuntimeError("no " + field)

X = np.random.default_rng(n).random((n, d))
spec = ps.get_mechanism(name)
resolved = spec.resolve_params(params)
spec.run(X[:1000], 1.0, neighbouring=relation, n_synthetic=1000, rng=np.random.default_rng(1), **resolved)
Path("/proc/self/clear_refs").write_text("5")
base = kb("VmRSS")
times = []
for k in range(repeats):
    start = time.process_time()
    out = spec.run(X, 1.0, neighbouring=relation, n_synthetic=n, rng=np.random.default_rng(k), **resolved)
    times.append(time.process_time() - start)
    if k == 0:
        peak = kb("VmHWM")
    del out
print(json.dumps({"added_mb": (peak - base) / 1024, "input_mb": X.nbytes / 2**20, "cpu": min(times)}))
"""


def measure(name: str, n: int, d: int, repeats: int, relation: str) -> dict:
    """One subprocess run (module docstring); returns added peak MB, input MB and the best CPU seconds."""
    result = subprocess.run([sys.executable, "-c", CHILD, name, str(n), str(d), str(repeats), relation,
                             json.dumps(MECHANISMS[name])], capture_output=True, text=True, check=False)
    if result.returncode:
        raise RuntimeError(f"{name} at n={n} failed:\n{result.stderr[-2000:]}")
    return json.loads(result.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs=2, default=[10**6, 10**7])
    parser.add_argument("--d", type=int, default=2)
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--relation", default="replace", choices=["replace", "add_remove"])
    parser.add_argument("--mechanisms", nargs="+", default=list(MECHANISMS), choices=list(MECHANISMS))
    args = parser.parse_args()
    small, large = args.sizes
    print(f"d = {args.d}, epsilon = 1, {args.relation}, n synthetic rows = n; CPU = best of {args.repeats} "
          "(process_time of the child); peak = VmHWM added by the first run")
    print(f"{'mechanism':<14}{'n':>10}{'CPU s':>8}{'peak MB':>9}{'x input':>9}")
    for name in args.mechanisms:
        d = 1 if name in ONE_COLUMN else args.d
        rows = {n: measure(name, n, d, args.repeats, args.relation) for n in (small, large)}
        for n, row in rows.items():
            ratio = row["added_mb"] / row["input_mb"]
            print(f"{name:<14}{n:>10}{row['cpu']:>8.3f}{row['added_mb']:>9.0f}{ratio:>9.2f}", flush=True)
        slope = math.log(rows[large]["cpu"] / rows[small]["cpu"]) / math.log(large / small)
        print(f"{name} CPU exponent {small:.0e} -> {large:.0e}: {slope:.2f}", flush=True)


if __name__ == "__main__":
    main()
