"""SmartNoise's MST or AIM (``smartnoise-synth``) on the public keys of one table: an independent second peer.

Run by :mod:`benchmarks.bench_real_tables` in the SmartNoise venv (``requirements-smartnoise.txt``: it pins its own
OpenDP, so it cannot share privsyn_core's interpreter)::

    .venv-smartnoise/bin/python benchmarks/peers/run_smartnoise.py --algorithm mst --epsilon 1 --seed 0 \\
        --rows 1000 --out DIR

Input: ``DIR/codes.csv``, one integer key ``0..L-1`` per cell, and ``DIR/keys.json`` (``sizes``: the public number
of keys ``L`` of every column).  The keys are cut by the parent from the public schema exactly as the registered
OpenDP peers cut them (categories and few-valued integer columns one key per value, other numeric columns equal
bins of their public interval), so both peers see the same discretisation.  Each column is handed to SmartNoise
as a ``BinTransformer`` with public bounds ``[-0.5, L - 0.5]`` and ``L`` bins: key ``i`` is bin ``i``, nothing is
learnt from the data and no budget goes to preprocessing.

Output: ``DIR/synth.csv`` (keys of ``--rows`` sampled rows) and ``DIR/run.json`` (fit + sample seconds, wall and
CPU, peak RSS, the guarantee and the configuration).

Guarantee, as SmartNoise implements the algorithms (McKenna, Miklau, Sheldon 2021, MST; McKenna, Mullins, Sheldon,
Miklau 2022, AIM): Gaussian noise calibrated under rho-zCDP, rho from (epsilon, delta) by OpenDP's conversion
(``snsynth.utils.cdp_rho``), i.e. **(epsilon, delta)-DP, not pure epsilon-DP**, with SmartNoise's default
``delta = 1e-9``; marginals of sensitivity 1 (add/remove one row).  MST fits its graphical model with the exact row
count as ``known_total`` (public only under replace-one).  Noise comes from OpenDP's generator (not seedable); the
seed fixes numpy's global generator (selection, sampling).
"""

from __future__ import annotations

import argparse
import json
import time
from importlib import metadata
from pathlib import Path

import numpy as np
import pandas as pd
from common import write_run

#: SmartNoise's default delta of both synthesizers (snsynth 1.0.8).
DELTA = 1e-9
GUARANTEE = ("(epsilon, delta)-DP with delta = 1e-9: Gaussian noise under rho-zCDP converted by OpenDP "
             "(SmartNoise's defaults), add/remove one row")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--algorithm", choices=("mst", "aim"), required=True)
    parser.add_argument("--epsilon", type=float, required=True)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--rows", type=int, required=True, help="synthetic rows to sample")
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()
    from snsynth import Synthesizer
    from snsynth.transform import BinTransformer, TableTransformer

    codes = pd.read_csv(args.out / "codes.csv")
    sizes = json.loads((args.out / "keys.json").read_text())["sizes"]
    np.random.seed(args.seed)  # noqa: NPY002 (SmartNoise draws its selections and samples from the global one)
    transformer = TableTransformer([BinTransformer(bins=size, lower=-0.5, upper=size - 0.5) for size in sizes])
    start, cpu = time.perf_counter(), time.process_time()
    synthesizer = Synthesizer.create(args.algorithm, epsilon=args.epsilon, delta=DELTA)
    synthesizer.fit(codes, transformer=transformer, preprocessor_eps=0.0)
    sampled = synthesizer.sample(args.rows)
    seconds, cpu_seconds = time.perf_counter() - start, time.process_time() - cpu
    synth = pd.DataFrame(np.rint(np.asarray(sampled, dtype=float)).astype(np.int64), columns=codes.columns)
    version = metadata.version("smartnoise-synth")
    write_run(args.out, synth, seconds, GUARANTEE, cpu_seconds=cpu_seconds, delta=DELTA, version=version,
              configuration=f"smartnoise-synth {version} {args.algorithm.upper()} on its defaults (delta {DELTA:g}); "
                            f"public keys per column {sizes}")


if __name__ == "__main__":
    main()
