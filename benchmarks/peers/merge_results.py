"""Merge freshly run rows of our mechanisms with peer rows re-used from an earlier full run.

Used when the whole grid does not fit the time at hand: our mechanisms (fast, seeded) are re-run with the current
defaults, and the rows of the peers, whose adapters, inputs and library versions did not change, are carried over
from the stored ``results.json``.  Every carried-over row gets a ``reused_from`` note (shown in the report); its
``mmd`` is moved to ``mmd_earlier_estimator`` because the MMD of ``evaluate`` has changed since (repeated 500-row
subsamples), so the old value is not comparable.  W1 (exact, all rows), 1-/2-way TVD and TSTR are unchanged
definitions and stay.

Usage::

    python -m benchmarks.peers.merge_results OLD.json NEW.json [NEW.json ...] --out results.json --note "..."
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from benchmarks.peers.driver import PEERS

ORDER_EPS = (1.0, 0.5, 4.0)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("old", type=Path, help="results with the peer rows to re-use")
    parser.add_argument("new", type=Path, nargs="+", help="results of the runs made now")
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--note", required=True, help="why and from where the peer rows are re-used")
    parser.add_argument("--commit", required=True, help="privsyn_core commit of the new rows")
    args = parser.parse_args()
    latest = {(r["system"], r["dataset"], r["epsilon"]): dict(r, privsyn_core=args.commit)
              for path in args.new for r in json.loads(path.read_text())}  # a later file wins
    new = list(latest.values())
    done = {(r["system"], r["dataset"], r["epsilon"]) for r in new}
    reused = []
    for row in json.loads(args.old.read_text()):
        if row["system"] not in PEERS or (row["system"], row["dataset"], row["epsilon"]) in done:
            continue
        row = dict(row, reused_from=args.note)
        if "mmd" in row:
            row["mmd_earlier_estimator"] = row.pop("mmd")
        reused.append(row)
    rows = new + reused
    datasets = list(dict.fromkeys(r["dataset"] for r in json.loads(args.old.read_text())))
    systems = list(dict.fromkeys(r["system"] for r in new)) + list(PEERS)
    rows.sort(key=lambda r: (ORDER_EPS.index(r["epsilon"]) if r["epsilon"] in ORDER_EPS else len(ORDER_EPS),
                             datasets.index(r["dataset"]) if r["dataset"] in datasets else len(datasets),
                             systems.index(r["system"]) if r["system"] in systems else len(systems)))
    args.out.write_text(json.dumps(rows, indent=1))
    print(f"{len(new)} new rows, {len(reused)} re-used peer rows -> {args.out}")


if __name__ == "__main__":
    main()
