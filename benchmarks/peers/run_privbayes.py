"""DataSynthesizer's PrivBayes (correlated attribute mode) with a user-provided public domain.

Without ``numerical_attribute_ranges`` DataSynthesizer reads min/max off the data, which is
not private; here every numeric range and category list is the public schema's, so the
release is epsilon-DP as DataSynthesizer states (Laplace noise on the Bayesian network's
conditionals, k = 2 parents, ``--bins`` histogram bins).  Its correlated mode also computes
noisy one-way histograms with a further epsilon, but only into the description file, which is
not released here: the generator samples from the network's conditionals alone.  A value drawn
in DataSynthesizer's "missing" bin (NaN) is filled by :func:`common.fill_missing` and counted.
"""

from __future__ import annotations

import json
import time

import numpy as np
import pandas as pd
from common import fill_missing, parse_args, read_real, write_run

GUARANTEE = ("epsilon-DP by DataSynthesizer's accounting: eps/2 exponential mechanism for the network "
             "(mutual-information sensitivity with n public), eps/2 Laplace on the conditional counts")


def main() -> None:
    args = parse_args(lambda p: p.add_argument("--parents", type=int, default=2))
    from DataSynthesizer.DataDescriber import DataDescriber
    from DataSynthesizer.DataGenerator import DataGenerator

    # DataSynthesizer 0.1.13 keys conditionals by str(list of numpy ints) and eval()s them back;
    # under numpy 2 that string reads "[np.int64(3), ...]" and the eval fails (NameError 'np').
    np.set_printoptions(legacy="1.25")

    real, schema, _ = read_real(args.out)
    columns = schema["columns"]
    numeric = {c["name"]: [c["lo"], c["hi"]] for c in columns if c["kind"] == "numeric"}
    categorical = {c["name"]: list(c["categories"]) for c in columns if c["kind"] == "categorical"}
    domain_file = args.out / "categories.json"
    domain_file.write_text(json.dumps(categorical))
    start = time.perf_counter()
    threshold = max([2] + [len(v) for v in categorical.values()])
    describer = DataDescriber(histogram_bins=args.bins, category_threshold=threshold)
    describer.describe_dataset_in_correlated_attribute_mode(
        str(args.out / "real.csv"), k=args.parents, epsilon=args.epsilon,
        attribute_to_datatype={c["name"]: "Float" if c["kind"] == "numeric" else "String" for c in columns},
        attribute_to_is_categorical={c["name"]: c["kind"] == "categorical" for c in columns},
        attribute_to_is_candidate_key={c["name"]: False for c in columns},
        categorical_attribute_domain_file=str(domain_file) if categorical else None,
        numerical_attribute_ranges=numeric, seed=args.seed)
    description = args.out / "description.json"
    describer.save_dataset_description_to_file(str(description))
    generator = DataGenerator()
    generator.generate_dataset_in_correlated_attribute_mode(len(real), str(description), seed=args.seed)
    synth = generator.synthetic_dataset[[c["name"] for c in columns]].copy()
    for name in numeric:
        synth[name] = pd.to_numeric(synth[name])
    synth, missing = fill_missing(synth, columns, np.random.default_rng(args.seed))
    for name, (lo, hi) in numeric.items():
        synth[name] = synth[name].clip(lo, hi)
    write_run(args.out, synth, time.perf_counter() - start, GUARANTEE, bins=args.bins, parents=args.parents,
              null_cells=missing)


if __name__ == "__main__":
    main()
