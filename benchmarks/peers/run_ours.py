"""One privsyn_core mechanism on one dataset (started by driver.py in its own process).

Runs under add/remove (the relation of OpenDP's ``contributions=1``) when the mechanism supports
it, so that every system spends the same epsilon under the same relation; a mechanism that only
supports replace-one (``laplace_points``) runs under replace-one, which ``run.json`` records.
Default parameters throughout: what a user of ``ps.synthesize`` gets.  The registered OpenDP peers
(``opendp_mst``, ``opendp_aim``; ``driver.py --via-registry``) get ``--bins`` and report the null cells
they filled.
"""

from __future__ import annotations

import time

import numpy as np
from common import parse_args, read_real, write_run

import privsyn_core as ps
from privsyn_core.mechanisms.peers.opendp_support import PEERS


def main() -> None:
    args = parse_args(lambda p: p.add_argument("--mechanism", required=True))
    real, schema, _ = read_real(args.out)
    spec = next(s for s in ps.list_mechanisms() if s.name == args.mechanism)
    neighbouring = "add_remove" if "add_remove" in spec.neighbouring else spec.neighbouring[0]
    params = {"bins": args.bins} if args.mechanism in PEERS else {}
    start = time.perf_counter()
    result = ps.synthesize(real, args.mechanism, args.epsilon, schema=schema, neighbouring=neighbouring,
                           n_synthetic=len(real), rng=np.random.default_rng(args.seed), **params)
    seconds = time.perf_counter() - start
    extra = {"null_cells": result.diagnostics["null_cells"], "bins": args.bins} if args.mechanism in PEERS else {}
    write_run(args.out, result.data, seconds, f"pure epsilon-DP ({neighbouring.replace('_', '/')})",
              ledger_total=result.epsilon, warnings=result.warnings, dp_valid=result.dp_valid, **extra)


if __name__ == "__main__":
    main()
