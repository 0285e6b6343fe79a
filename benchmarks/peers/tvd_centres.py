"""Why kd_grid, kd_adaptive and srw_tsp showed a large 1-way TVD with a small W1: rows at cell centres.

Their former default, now an option, ``sample='center'``, puts every synthetic row at the centre of its
cell: with k cells per axis a column takes k distinct values, which fall into at most k of the 20 equal TVD bins of
:func:`privsyn_core.evaluation.marginals.marginal_tvd`.  Against uniform data (1/20 per bin) the TVD is then at
least ``1 - k/20`` for k < 20, whatever the counts (e.g. 0.8 for k = 4), while W1 only pays the
distance to the centre.  ``sample='uniform'`` (same release, post-processing; the default now) removes it.
W1 is exact on all rows (POT; the ``full_sample`` of ``evaluate``, with a 2e6-entry cost-matrix budget).

Usage: ``python -m benchmarks.peers.tvd_centres`` (prints one line per mechanism and sampling).
"""

from __future__ import annotations

import numpy as np

import privsyn_core as ps
from benchmarks.peers.common import load_dataset
from privsyn_core.data.domain import Schema
from privsyn_core.evaluation.scorecard import evaluate

TVD_BINS = 20


def main(name: str = "uniform_d2", n: int = 1400, epsilon: float = 1.0) -> None:
    data = load_dataset(name, n)
    schema = Schema.from_dict(data.schema)
    print(f"{name}, n = {n}, epsilon = {epsilon}, add/remove, seed 0; TVD on {TVD_BINS} bins per column")
    for mechanism in ("kd_grid", "kd_adaptive", "srw_tsp"):
        for sample in ("center", "uniform"):
            result = ps.synthesize(data.frame, mechanism, epsilon, schema=data.schema, neighbouring="add_remove",
                                   n_synthetic=n, rng=np.random.default_rng(0), sample=sample)
            x0 = result.data["x0"].to_numpy()
            report = evaluate(data.frame, result.data, schema, floor=False, w1_max_entries=2_000_000, bins=TVD_BINS)
            occupied = len(np.unique(np.minimum((x0 * TVD_BINS).astype(int), TVD_BINS - 1)))
            print(f"{mechanism:>12} sample={sample:<7} distinct x0 = {len(np.unique(x0)):>5}, TVD bins hit = "
                  f"{occupied:>2}/{TVD_BINS}, W1 = {report['w1']['full_sample']['value']:.4f}, "
                  f"1-way TVD = {report['marginal_tvd_1way']['value']:.3f}")


if __name__ == "__main__":
    main()
