"""Every performance figure of the project in one command, and the table of ``docs/performance.md`` from it.

Usage::

    python -m benchmarks.bench_performance [--quick] [--no-browser] [--no-write]

Runs, each in a fresh Python process one after the other (so that no run inherits another's imports, caches or
heap), and prints their output as it comes:

1. ``bench_w1 --table``: certified W1 at 10^5 points a side in d = 2 (a PMM output, two blobs, a pure shift) and
   at 10^4 in d = 3 and 5: wall and CPU seconds, the interval and its width over the value
   (``docs/tables/w1_certified.md``);
2. ``bench_evaluate``: ``evaluate`` per metric on 10^4 and 10^5 rows x 8 mixed columns;
3. ``bench_pmm --sections endtoend``: PMM end to end at 10^7 x 2 against a bincount of its leaf ids;
4. ``bench_memory --mechanisms pmm``: PMM's peak memory at 10^6 and 10^7 rows over its input array;
5. ``bench_browser --table``: the journeys' seconds in Chromium (``docs/tables/browser_timings.md``; skipped with
   ``--no-browser`` or without Chromium);
6. the seconds of every system on the real tables (``benchmarks/peers/results_real_tables.json``, written by
   ``bench_real_tables``, not re-run here: the peers take hours): ours beside OpenDP's and SmartNoise's MST and
   AIM, on the same tables, the same epsilon and seed.

``--quick`` runs smaller sizes (a smoke test of the command, not figures to report).  Unless ``--no-write``,
``docs/tables/performance.md`` is rewritten with every section's output, the date and the load average before and
after each section (the cores may be shared: read wall times as upper bounds, CPU times as the cost).
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import statistics
import subprocess
import sys
import tempfile
from collections import defaultdict
from pathlib import Path

from benchmarks.docsection import ROOT, write_table

RESULTS = ROOT / "benchmarks" / "peers" / "results_real_tables.json"
PEERS = ("opendp_mst", "opendp_aim", "smartnoise_mst", "smartnoise_aim")
NOT_MECHANISMS = ("bootstrap",)


def sections(quick: bool, browser: bool) -> list[tuple[str, list[str]]]:
    """(title, command) of every measured section, in order."""
    python = [sys.executable, "-m"]
    if quick:
        runs = [("Certified W1", python + ["benchmarks.bench_w1", "--n", "5000", "--n-high", "2000"]),
                ("evaluate", python + ["benchmarks.bench_evaluate", "--rows", "2000", "--repeats", "1"]),
                ("PMM end to end", python + ["benchmarks.bench_pmm", "--sections", "endtoend", "--n", "100000",
                                             "--repeats", "1"]),
                ("PMM memory", python + ["benchmarks.bench_memory", "--mechanisms", "pmm", "--sizes", "10000",
                                         "100000", "--repeats", "1"])]
    else:
        runs = [("Certified W1", python + ["benchmarks.bench_w1", "--table"]),
                ("evaluate", python + ["benchmarks.bench_evaluate", "--rows", "10000", "100000"]),
                ("PMM end to end", python + ["benchmarks.bench_pmm", "--sections", "endtoend"]),
                ("PMM memory", python + ["benchmarks.bench_memory", "--mechanisms", "pmm"])]
    if browser:
        runs.append(("Browser journeys", python + ["benchmarks.bench_browser"]
                     + (["--rows", "2000", "--repeats", "1"] if quick else ["--table"])))
    return runs


def run_section(title: str, command: list[str]) -> str:
    """The section's output (stdout, with stderr's last lines on failure), echoed as it comes."""
    load_before = os.getloadavg()[0]
    print(f"\n== {title}: {' '.join(command[1:])} (load {load_before:.2f}) ==", flush=True)
    lines = []
    with tempfile.TemporaryFile(mode="w+") as errors:  # a file, not a pipe: a chatty stderr cannot block the child
        process = subprocess.Popen(command, cwd=ROOT, stdout=subprocess.PIPE, stderr=errors, text=True,
                                   env={**os.environ, "PYTHONPATH": str(ROOT)})
        assert process.stdout is not None
        for line in process.stdout:
            print(line, end="", flush=True)
            lines.append(line)
        code = process.wait()
        errors.seek(0)
        stderr = errors.read()
    if code != 0:
        tail = "\n".join(stderr.strip().splitlines()[-15:])
        raise SystemExit(f"{title} failed (exit {process.returncode}):\n{tail}")
    body = "".join(lines).rstrip()
    return f"### {title}\n\n`python -m {' '.join(command[2:])}` (load {load_before:.2f} before, " \
           f"{os.getloadavg()[0]:.2f} after)\n\n```text\n{body}\n```\n"


def real_table_seconds(results: Path = RESULTS) -> str:
    """Median synthesis seconds per system and table over the finished runs of the real-table benchmark."""
    if not results.exists():
        return "### Real tables\n\nNo results: run `python -m benchmarks.bench_real_tables` first.\n"
    seconds: dict[tuple[str, str], list[float]] = defaultdict(list)
    for run in json.loads(results.read_text()):
        if "error" not in run and run["system"] not in NOT_MECHANISMS and "seconds" in run:
            seconds[run["system"], run["table"]].append(float(run["seconds"]))
    tables = sorted({table for _, table in seconds})
    systems = sorted({system for system, _ in seconds}, key=lambda s: (s in PEERS, s))
    head = "| system | " + " | ".join(tables) + " |\n|---|" + "---|" * len(tables) + "\n"
    rows = []
    for system in systems:
        cells = [f"{statistics.median(seconds[system, t]):.2f}" if seconds.get((system, t)) else "—"
                 for t in tables]
        rows.append(f"| {'**' + system + '**' if system in PEERS else system} | " + " | ".join(cells) + " |")
    return ("### Real tables: seconds of one synthesis\n\nMedian over the finished runs (all epsilons and seeds) of "
            "`bench_real_tables` (`benchmarks/peers/results_real_tables.json`), each run a child process on the "
            "same private table; peers in bold, on their registry defaults (OpenDP) or SmartNoise's.\n\n"
            + head + "\n".join(rows) + "\n")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="small sizes: a smoke test of the command")
    parser.add_argument("--no-browser", action="store_true", help="skip the browser journeys")
    parser.add_argument("--no-write", action="store_true", help="print only; leave docs/tables/performance.md")
    args = parser.parse_args()
    chromium = Path(os.environ.get("CHROMIUM", "/usr/bin/chromium")).exists()
    if not args.no_browser and not chromium:
        print("Chromium not found: the browser journeys are skipped (apt-get install chromium)", flush=True)
    parts = [run_section(title, command)
             for title, command in sections(args.quick, browser=not args.no_browser and chromium)]
    peers = real_table_seconds()
    print("\n" + peers)
    if not args.no_write and not args.quick:
        stamp = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC")
        text = (f"Run {stamp} on {os.cpu_count()} cores; each section in a fresh process, one after the other.\n\n"
                + "\n".join(parts + [peers]))
        print(f"wrote {write_table('performance', text, 'python -m benchmarks.bench_performance')}")


if __name__ == "__main__":
    main()
