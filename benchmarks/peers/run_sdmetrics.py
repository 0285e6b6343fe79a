"""SDMetrics' QualityReport of many synthetic tables at once: an independent evaluator for the real-table benchmark.

Run by :mod:`benchmarks.bench_real_tables` in the SmartNoise venv (``requirements-smartnoise.txt``; sdmetrics pins
pandas < 3, which privsyn_core's interpreter does not have)::

    .venv-smartnoise/bin/python benchmarks/peers/run_sdmetrics.py JOBS.json SCORES.json

``JOBS.json`` maps a key to ``[real.csv, synth.csv, meta.json]`` (``meta.json``: the public schema); ``SCORES.json``
receives, per key, the overall score (mean of Column Shapes and Column Pair Trends), the two property scores, or
``error``.  Each side is a seeded uniform subsample of at most ``ROWS`` rows (``random_state = SEED``).
"""

from __future__ import annotations

import json
import sys
import warnings

import pandas as pd

ROWS = 2000
SEED = 0


def quality(real_csv: str, synth_csv: str, meta_json: str) -> dict:
    """QualityReport of one synthetic table against the real one, numeric columns as numerical sdtypes."""
    from sdmetrics.reports.single_table import QualityReport

    with open(meta_json) as f:
        columns = json.load(f)["schema"]["columns"]
    dtype = {c["name"]: str for c in columns if c["kind"] == "categorical"}
    names = [c["name"] for c in columns]
    real, synth = pd.read_csv(real_csv, dtype=dtype)[names], pd.read_csv(synth_csv, dtype=dtype)[names]
    real = real.sample(min(len(real), ROWS), random_state=SEED)
    synth = synth.sample(min(len(synth), ROWS), random_state=SEED)
    metadata = {"columns": {c["name"]: {"sdtype": "categorical" if c["kind"] == "categorical" else "numerical"}
                            for c in columns}}
    report = QualityReport()
    report.generate(real, synth, metadata, verbose=False)
    properties = report.get_properties().set_index("Property")["Score"]
    return {"overall": float(report.get_score()), "column_shapes": float(properties["Column Shapes"]),
            "column_pair_trends": float(properties["Column Pair Trends"])}


def main() -> None:
    with open(sys.argv[1]) as f:
        jobs = json.load(f)
    scores = {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # sdmetrics' deprecation notes; the scores are unaffected
        for key, files in jobs.items():
            try:
                scores[key] = quality(*files)
            except Exception as exc:  # a table SDMetrics cannot score is a result, recorded with its message
                scores[key] = {"error": f"{type(exc).__name__}: {exc}"[:300]}
    with open(sys.argv[2], "w") as f:
        json.dump(scores, f)


if __name__ == "__main__":
    main()
