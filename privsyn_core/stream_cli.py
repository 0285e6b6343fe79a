"""The ``stream`` commands of the command line (wired into :mod:`privsyn_core.cli` by :func:`add_subparser`).

``python -m privsyn_core stream open STATE --schema schema.json --epsilon 1 --horizon-n 100000`` (or
``--depth R``, or ``--growing``) creates a stream bound to the privacy ledger (``--ledger``), in release mode with
``--release-mode`` (values outside the schema clipped or replaced by each column's ``--fallback``, never refused);
``stream add STATE BATCH.csv OUT.csv [--report REPORT.json]`` adds one batch and writes that step's synthetic
rows (run again with the same batch after a crash, it writes the same rows; another batch at a step already
released, from a copied or restored state, is refused); ``stream release STATE OUT.csv`` writes the current step's
release again (the same rows: nothing new is drawn); ``stream status STATE`` prints the public facts (epsilon,
ledger, step).  Errors are one line with exit status 2 (:func:`privsyn_core.cli.main`), and leave the state file
unchanged.  Each file of rows is written with its manifest (``OUT.manifest.json``, :mod:`privsyn_core.manifest`),
which names no ledger entry: the ledger counts the stream's whole epsilon once, at ``open``.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from privsyn_core.errors import OutputError


def add_subparser(sub: Any, number: Callable[[str], Callable[[str], float]]) -> None:
    """Add ``stream open|add|release|status`` to the command line's subparsers ``sub``."""
    stream = sub.add_parser("stream", help="synthetic data for a growing table: one epsilon for every release "
                                           "of a stream of batches (online PMM)")
    commands = stream.add_subparsers(dest="stream_command", required=True)

    create = commands.add_parser("open", help="create a stream's state file")
    create.add_argument("state", type=Path)
    create.add_argument("--schema", type=Path, required=True, help="JSON schema with public bounds/categories")
    create.add_argument("--epsilon", type=number("epsilon"), required=True,
                        help="the budget of the whole stream, every future step included")
    size = create.add_mutually_exclusive_group(required=True)
    size.add_argument("--depth", type=int, help="tree depth r (public)")
    size.add_argument("--horizon-n", type=int, help="a public planned record count; the depth is PMM's for it")
    size.add_argument("--growing", action="store_true", help="a depth that grows with the stream: a level opens "
                                                             "when the released total passes PMM's depth rule")
    create.add_argument("--horizon-steps", type=int, help="with --horizon-n: the planned number of steps; the "
                                                         "depth then accounts for the counters' noise there")
    create.add_argument("--seed", help="integer seed: replays the noise, for teaching and tests only (default: a "
                                       "secret key from the operating system)")
    create.add_argument("--ledger", type=Path, help="the privacy ledger that counts the whole stream's epsilon once "
                                                    "(default: as for synth)")
    create.add_argument("--dataset", help="the dataset's name in the ledger (default: stream:<state path>)")
    create.add_argument("--release-mode", action="store_true",
                        help="never refuse a batch on its content: out-of-domain values are clipped or replaced by "
                             "each column's fallback, as synth --release-mode does (fixed for the whole stream)")
    create.add_argument("--fallback", action="append", default=[], metavar="COLUMN=VALUE",
                        help="--release-mode: the value a missing or out-of-domain value of COLUMN becomes (default: "
                             "the midpoint of its bounds, or its first category); repeatable")
    create.set_defaults(handler=_cmd_open)

    add = commands.add_parser("add", help="add one batch (CSV) and write this step's synthetic rows")
    add.add_argument("state", type=Path)
    add.add_argument("batch", type=Path)
    add.add_argument("output", type=Path)
    _release_options(add)
    add.set_defaults(handler=_cmd_add)

    again = commands.add_parser("release", help="write the current step's release again (identical rows)")
    again.add_argument("state", type=Path)
    again.add_argument("output", type=Path)
    _release_options(again)
    again.set_defaults(handler=_cmd_release)

    status = commands.add_parser("status", help="print the stream's public facts: epsilon, ledger, step")
    status.add_argument("state", type=Path)
    status.add_argument("--json", action="store_true", help="print JSON")
    status.set_defaults(handler=_cmd_status)


def _release_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--report", type=Path, help="also write the release's JSON metadata (ledger, step, "
                                                    "parameters, schema): safe to publish with the rows")
    parser.add_argument("--n-synthetic", type=int, help="number of synthetic rows (default: the noisy count)")
    parser.add_argument("--force", action="store_true", help="overwrite the output and report files if they exist")


def _cmd_open(args: argparse.Namespace) -> int:
    from privsyn_core.cli import _check_outputs, _seed, _split_param
    from privsyn_core.data.io import read_schema
    from privsyn_core.errors import UsageError
    from privsyn_core.privacy.budget import PrivacyLedger
    from privsyn_core.stream import open_stream

    _check_outputs([args.state], [args.schema], force=True)  # an existing state: refused by open_stream
    if args.fallback and not args.release_mode:
        raise UsageError("--fallback applies with --release-mode only")
    stream = open_stream(args.state, read_schema(args.schema), args.epsilon, create=True, depth=args.depth,
                         horizon_n=args.horizon_n, horizon_steps=args.horizon_steps, growing=args.growing,
                         rng=_seed(args.seed), ledger=PrivacyLedger(args.ledger), dataset=args.dataset,
                         release_mode=args.release_mode,
                         fallbacks=dict(_split_param(f, "--fallback") for f in args.fallback) or None)
    depth = f"depth growing up to {stream.plan.depth}" if stream.plan.growing else f"depth {stream.plan.depth}"
    mode = ", release mode: out-of-domain values clipped or replaced by fallbacks" if stream.policy else ""
    print(f"created stream {args.state} (online_pmm, epsilon={stream.epsilon:g} for the whole stream, {depth}, "
          f"{len(stream.schema.columns)} columns{mode}); the state file is secret: keep it like the raw data")
    return 0


def _cmd_add(args: argparse.Namespace) -> int:
    from privsyn_core.cli import _check_outputs
    from privsyn_core.data.io import iter_csv
    from privsyn_core.manifest import manifest_path
    from privsyn_core.stream import open_stream

    _check_outputs([args.output, manifest_path(args.output), args.report], [args.state, args.batch], force=args.force)
    stream = open_stream(args.state)
    with iter_csv(args.batch) as chunks:  # the files are written before a bound stream marks the step published
        stream.add(chunks, n_synthetic=args.n_synthetic, publish=lambda release: _write(release, args, recorded=True))
    return 0


def _cmd_release(args: argparse.Namespace) -> int:
    from privsyn_core.cli import _check_outputs
    from privsyn_core.manifest import manifest_path
    from privsyn_core.stream import open_stream

    _check_outputs([args.output, manifest_path(args.output), args.report], [args.state], force=args.force)
    _write(open_stream(args.state).release(n_synthetic=args.n_synthetic), args, recorded=False)
    return 0


def _cmd_status(args: argparse.Namespace) -> int:
    from privsyn_core.stream import open_stream

    report = open_stream(args.state).report()
    if args.json:
        print(json.dumps(report, indent=2))
        return 0
    print(f"stream {args.state}: online_pmm, step {report['step']}, epsilon {report['epsilon']:g} for the whole "
          f"stream ({report['neighbouring']}), depth {report['params']['depth']}")
    for stage, eps in report["ledger"]:
        print(f"  {eps:.6g}  {stage}")
    return 0


def _write(release: Any, args: argparse.Namespace, *, recorded: bool) -> None:
    from privsyn_core.data.io import atomic_open
    from privsyn_core.manifest import manifest_path, write_release

    try:
        with contextlib.ExitStack() as stack:
            write_release(stack, release, None, args.output, manifest_path(args.output))
            if args.report:
                report = stack.enter_context(atomic_open(args.report))
                report.write(json.dumps(release.to_dict(), indent=2, default=str).encode("utf-8"))
    except OutputError as exc:
        if not recorded:
            raise
        raise OutputError(f"{exc} (step {release.params['step']} is recorded: 'stream release {args.state} "
                          "OUT.csv' writes the same release)") from None
    for warning in release.to_dict()["warnings"]:
        print(f"warning: {warning}", file=sys.stderr)
    print(f"wrote {release.n_synthetic} synthetic rows of step {release.params['step']} to {args.output} "
          f"(online_pmm, epsilon={release.epsilon:g} for the whole stream, event-level add/remove) and its manifest "
          f"to {manifest_path(args.output)}")
