"""OpenDP's MST or AIM (``opendp[mbi]``, Private-PGM post-processing) on binned columns.

Numeric columns are cut into ``--bins`` equal bins of their public interval and released as
integer keys; categorical columns keep their public categories.  Both algorithms run under pure
epsilon-DP (``loss_of(epsilon=)``) with ``unit_of(contributions=1)``: add/remove one row.
``aim_zcdp`` runs AIM under rho-zCDP with ``rho = epsilon^2 / 2``, the zCDP level that epsilon-DP
implies, because OpenDP 0.16's AIM fails under pure DP once d >= 3: a weaker guarantee than the
others' epsilon-DP, reported as such.
OpenDP adds a null cell to every column's keys (its input domain allows nulls), so a sampled row
can hold a null; those cells are filled uniformly on the public domain
(:func:`common.fill_missing`) and counted in ``run.json`` as ``null_cells``.  Synthetic bins are
mapped back to a uniform value inside the bin.
"""

from __future__ import annotations

import time

import numpy as np
import pandas as pd
from common import fill_missing, from_bins, parse_args, read_real, to_bins, write_run


def main() -> None:
    args = parse_args(lambda p: p.add_argument("--algorithm", choices=("mst", "aim", "aim_zcdp"), required=True))
    import opendp.prelude as dp
    import polars as pl

    dp.enable_features("contrib")
    real, schema, _ = read_real(args.out)
    columns = schema["columns"]
    start = time.perf_counter()
    binned, keys = _binned(real, columns, args.bins)
    algorithm = dp.mbi.MST() if args.algorithm == "mst" else dp.mbi.AIM()
    if args.algorithm == "aim_zcdp":
        rho = args.epsilon ** 2 / 2
        loss, guarantee = dp.loss_of(rho=rho), f"rho-zCDP, rho = eps^2/2 = {rho:g} (weaker than eps-DP; add/remove)"
    else:
        loss, guarantee = dp.loss_of(epsilon=args.epsilon), "pure epsilon-DP (add/remove one row)"
    context = dp.Context.compositor(data=pl.DataFrame(binned).lazy(), privacy_unit=dp.unit_of(contributions=1),
                                    privacy_loss=loss, split_evenly_over=1)
    table = context.query().select(list(keys)).contingency_table(keys=keys, algorithm=algorithm).release()
    released = table.synthesize(len(real), method="sample").to_pandas()
    rng = np.random.default_rng(args.seed)
    released, nulls = fill_missing(released, [_as_bins(c, args.bins) for c in columns], rng)
    synth = pd.DataFrame({c["name"]: (from_bins(released[c["name"]].to_numpy(float), c["lo"], c["hi"], args.bins, rng)
                                       if c["kind"] == "numeric" else released[c["name"]].astype(str))
                          for c in columns})
    write_run(args.out, synth, time.perf_counter() - start, guarantee, bins=args.bins, null_cells=nulls)


def _binned(real: pd.DataFrame, columns: list[dict], bins: int) -> tuple[dict, dict]:
    """Bin index of every numeric value on its public interval; categories as strings; the public keys."""
    binned, keys = {}, {}
    for c in columns:
        if c["kind"] == "numeric":
            binned[c["name"]] = to_bins(real[c["name"]].to_numpy(float), c["lo"], c["hi"], bins)
            keys[c["name"]] = list(range(bins))
        else:
            binned[c["name"]] = real[c["name"]].astype(str).to_numpy()
            keys[c["name"]] = list(c["categories"])
    return binned, keys


def _as_bins(column: dict, bins: int) -> dict:
    """The column's domain in bin coordinates: a null bin is filled with a uniform bin, i.e. uniform on [lo, hi]."""
    if column["kind"] != "numeric":
        return column
    return {"name": column["name"], "kind": "categorical", "categories": list(range(bins))}


if __name__ == "__main__":
    main()
