"""Command line: ``python -m privsyn_core mechanisms | synth | verify | evaluate | audit | budget | stream``.

``synth`` counts every release in the persistent privacy ledger (:mod:`privsyn_core.privacy.budget`; ``--ledger``,
default :func:`~privsyn_core.privacy.budget.default_path`) before any output is written, and is refused when the
release would exceed the dataset's budget.  The budget is the operator's: ``budget init | set | show``.  A dataset
is keyed by the identity of its records as the schema reads them (:mod:`privsyn_core.data.identity`: ``budget set
DATA.csv --schema S.json`` binds ``synth DATA.csv ... --schema S.json`` and a script's ``synthesize(pd.read_csv(
"DATA.csv"), schema=S)`` alike), or by the operator's ``--dataset`` name.

A value the schema does not admit is refused with a message that quotes it, for the data holder at the terminal.
With ``--release-mode`` (whoever reads the output may not see the data) nothing is refused on the data's content
and no message reads it: out-of-domain values follow the declared rule of :mod:`privsyn_core.data.conform`, which
the release's ``--report`` states.

Bad input, including a bad command line, ends with a one-line error naming the problem and
exit status 2, never a traceback.  With ``--schema``, ``synth`` reads its input in blocks of rows
(:func:`~privsyn_core.data.io.iter_csv`, :func:`~privsyn_core.api.synthesize_chunks`), so the whole
table is never held as text or as a DataFrame, only as the encoded float array.  ``synth`` writes the release's
manifest beside its output (``OUT.manifest.json``, :mod:`privsyn_core.manifest`: what was released and the SHA-256
of the file, recorded in the ledger with the spend); ``verify OUT.csv OUT.manifest.json [--ledger PATH]`` checks a
received file against it (exit 0 when it is the release, 1 when not, 2 on bad input).  Files are written
atomically (:func:`~privsyn_core.data.io.atomic_open`):
``synth`` refuses an output, manifest or report path that is one of its inputs or each other, and an
existing file unless ``--force`` is given.  SIGINT and SIGTERM end the command with one line
and exit status 130 or 143, after removing any file not yet complete.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import signal
import sys
import threading
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any, NoReturn

from privsyn_core import manifest
from privsyn_core.api import synthesize, synthesize_chunks
from privsyn_core.data.domain import Schema
from privsyn_core.data.identity import IdentityDigest, file_identity
from privsyn_core.data.io import atomic_open, iter_csv, read_csv, read_schema
from privsyn_core.errors import OutputError, PrivsynError, UsageError
from privsyn_core.privacy import budget
from privsyn_core.registry import get_mechanism, list_mechanisms

EXIT_USAGE = 2
#: Exit statuses after a signal, ``128 + signal number`` as shells report them.
EXIT_SIGINT, EXIT_SIGTERM = 128 + signal.SIGINT, 128 + signal.SIGTERM


class Terminated(BaseException):
    """Raised by the SIGTERM handler so that pending ``finally`` blocks remove unfinished files."""


def main(argv: Sequence[str] | None = None) -> int:
    with _signals_as_exceptions():
        try:
            args = _parser().parse_args(_numbers_attached(sys.argv[1:] if argv is None else list(argv)))
            return args.handler(args)
        except (PrivsynError, OSError, json.JSONDecodeError) as exc:
            print(f"error: {_one_line(exc)}", file=sys.stderr)
            return EXIT_USAGE
        except MemoryError:
            print("error: out of memory; use fewer rows, fewer cells or a smaller n_synthetic", file=sys.stderr)
            return EXIT_USAGE
        except KeyboardInterrupt:
            print("error: interrupted (SIGINT); unfinished files were removed", file=sys.stderr)
            return EXIT_SIGINT
        except Terminated:
            print("error: interrupted (SIGTERM); unfinished files were removed", file=sys.stderr)
            return EXIT_SIGTERM


@contextlib.contextmanager
def _signals_as_exceptions() -> Iterator[None]:
    """SIGINT raises ``KeyboardInterrupt`` and SIGTERM :class:`Terminated` (main thread only); restored after."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = {sig: signal.getsignal(sig) for sig in (signal.SIGINT, signal.SIGTERM)}
    signal.signal(signal.SIGINT, signal.default_int_handler)
    signal.signal(signal.SIGTERM, _raise_terminated)
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def _raise_terminated(signum: int, frame: object) -> NoReturn:
    raise Terminated


class _Parser(argparse.ArgumentParser):
    """argparse with its errors as one line (a :class:`UsageError`) instead of the usage block."""

    def error(self, message: str) -> NoReturn:
        raise UsageError(f"{message} (see {self.prog} --help)")


def _parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="python -m privsyn_core",
                     description="Differentially private synthetic data with provable W1 accuracy.")
    sub = parser.add_subparsers(dest="command", required=True)

    mech = sub.add_parser("mechanisms", help="list the registered mechanisms and their parameters")
    mech.add_argument("--json", action="store_true", help="print JSON")
    mech.set_defaults(handler=_cmd_mechanisms)

    synth = sub.add_parser("synth", help="write a synthetic version of a CSV file")
    synth.add_argument("input", type=Path)
    synth.add_argument("output", type=Path)
    synth.add_argument("--mechanism", required=True)
    synth.add_argument("--epsilon", required=True, type=_number("epsilon"))
    synth.add_argument("--schema", type=Path, help="JSON schema with public bounds/categories (else inferred: not DP)")
    synth.add_argument("--neighbouring", default="replace", choices=("replace", "add_remove"))
    synth.add_argument("--n-synthetic", type=int)
    synth.add_argument("--seed", help="integer seed: replays the noise, for teaching and tests only (default: the "
                                      "secure generator, no seed)")
    synth.add_argument("--public-n", type=int, help="add_remove only: a record count you declare public, for the "
                                                    "layout rules (else a noisy count costs 5%% of epsilon)")
    synth.add_argument("--diagnostics", action="store_true",
                       help="also print diagnostics read off the raw data (clipped values): NOT private, never "
                            "publish them")
    synth.add_argument("--param", action="append", default=[], metavar="K=V", help="mechanism parameter (repeatable)")
    synth.add_argument("--report", type=Path, help="also write the release's JSON metadata (ledger, parameters, "
                                                   "schema): safe to publish with the rows")
    synth.add_argument("--force", action="store_true", help="overwrite the output and report files if they exist")
    synth.add_argument("--release-mode", action="store_true",
                       help="whoever reads this command's output may not see the data: no value is refused or quoted; "
                            "out-of-domain values are clipped or replaced by each column's fallback (needs --schema)")
    synth.add_argument("--fallback", action="append", default=[], metavar="COLUMN=VALUE",
                       help="--release-mode: the value a missing or out-of-domain value of COLUMN becomes (default: "
                            "the midpoint of its bounds, or its first category)")
    _ledger_options(synth)
    synth.set_defaults(handler=_cmd_synth)

    ev = sub.add_parser("evaluate", help="compare a synthetic CSV with the real one")
    ev.add_argument("real", type=Path)
    ev.add_argument("synthetic", type=Path)
    ev.add_argument("--schema", type=Path)
    ev.add_argument("--json", action="store_true", help="print JSON")
    ev.set_defaults(handler=_cmd_evaluate)

    aud = sub.add_parser("audit", help="empirical lower bound on the epsilon a mechanism really spends "
                                       "(exit 1 when it overspends)")
    aud.add_argument("mechanism", help="registry key of a private mechanism, or 'all'")
    aud.add_argument("--epsilon", type=_number("epsilon"), default=1.0)
    aud.add_argument("--neighbouring", choices=("replace", "add_remove"), help="default: every supported relation")
    aud.add_argument("--trials", type=int, help="runs per dataset counting the chosen event (default: per mechanism, "
                                                       "20000 for most)")
    aud.add_argument("--selection-trials", type=int,
                     help="runs per dataset choosing the event (default: per mechanism)")
    aud.add_argument("--confidence", type=_number("confidence"), default=0.95)
    aud.add_argument("--noise-factor", type=_number("noise factor"), default=1.0,
                     help="multiply every noise scale (< 1 gives a deliberately mis-calibrated variant)")
    aud.add_argument("--seed", type=int, default=0)
    aud.add_argument("--json", action="store_true", help="print JSON")
    aud.set_defaults(handler=_cmd_audit)

    bud = sub.add_parser("budget", help="the operator's privacy budget per dataset: init | set | show")
    bud_sub = bud.add_subparsers(dest="budget_command", required=True)
    init = bud_sub.add_parser("init", help="create a new, empty privacy ledger")
    init.add_argument("--ledger", type=Path, help=f"the ledger's file (default: {_default_ledger_words()})")
    init.add_argument("--force", action="store_true", help="replace an existing ledger (forgets every spend in it)")
    init.set_defaults(handler=_cmd_budget_init)
    bset = bud_sub.add_parser("set", help="set a dataset's budget (total epsilon of every release on it)")
    bset.add_argument("data", type=Path, help="the dataset's CSV file (identified by its content)")
    bset.add_argument("epsilon", help="the total epsilon, or 'none' to remove the dataset's own budget")
    _identity_options(bset)
    bset.set_defaults(handler=_cmd_budget_set)
    show = bud_sub.add_parser("show", help="a dataset's budget, totals per relation and last releases")
    show.add_argument("data", type=Path, help="the dataset's CSV file (identified by its content)")
    show.add_argument("--last", type=int, default=10, help="how many of the last releases to list (default 10)")
    show.add_argument("--json", action="store_true", help="print JSON")
    _identity_options(show)
    show.set_defaults(handler=_cmd_budget_show)
    check = sub.add_parser("verify", help="check that a received file is the release its manifest describes "
                                          "(exit 1 when it is not)")
    check.add_argument("release", type=Path, help="the received CSV file")
    check.add_argument("manifest", type=Path, help="its manifest (RELEASE.manifest.json)")
    check.add_argument("--ledger", type=Path, help="also check that this privacy ledger holds the release's spend "
                                                   "(read only)")
    check.set_defaults(handler=_cmd_verify)
    from privsyn_core import stream_cli  # stream open|add|release|status: handlers in their own module

    stream_cli.add_subparser(sub, _number)
    return parser


def _default_ledger_words() -> str:
    return "$PRIVSYN_LEDGER, else $PRIVSYN_DATA_DIR/ledger.sqlite, else ~/.local/share/privsyn/ledger.sqlite"


def _ledger_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--ledger", type=Path, help=f"the privacy ledger's file (default: {_default_ledger_words()})")
    parser.add_argument("--dataset", help="the dataset's name in the ledger (default: the identity of the records "
                                          "as the schema reads them, in any row order or float format); name "
                                          "versions of a changing table alike")


def _identity_options(parser: argparse.ArgumentParser) -> None:
    """A ``budget`` command's options: the ledger's, and the schema whose columns the dataset's identity reads."""
    _ledger_options(parser)
    parser.add_argument("--schema", type=Path, help="the schema the releases use: the identity reads its columns "
                                                    "(default: every column of the file)")


def _dataset(args: argparse.Namespace, path: Path, schema: Schema | None) -> str:
    """The dataset's key in the ledger: the operator's ``--dataset``, else the identity of the file's records
    on the schema's columns (:func:`~privsyn_core.data.identity.file_identity`, as ``synthesize`` computes it)."""
    return args.dataset or file_identity(path, None if schema is None else schema.names)


#: Options whose value may look like an option to argparse (``--epsilon -inf``, ``--epsilon -1``).
_NUMERIC_OPTIONS = frozenset({"--epsilon", "--confidence", "--noise-factor"})


def _numbers_attached(argv: list[str]) -> list[str]:
    """``--epsilon -inf`` as ``--epsilon=-inf``: argparse takes a value starting with ``-`` for an option unless
    it looks like a plain negative number, and would say "expected one argument" instead of naming the value."""
    out: list[str] = []
    tokens = iter(argv)
    for token in tokens:
        if token in _NUMERIC_OPTIONS:
            value = next(tokens, None)
            out.append(token if value is None else f"{token}={value}")
        else:
            out.append(token)
    return out


def _number(name: str):
    def parse(text: str) -> float:
        try:
            return float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{name} must be a number, got {text!r}") from None
    return parse


def _cmd_mechanisms(args: argparse.Namespace) -> int:
    specs = list_mechanisms()
    if args.json:
        print(json.dumps([_spec_dict(s) for s in specs], indent=2))
        return 0
    for s in specs:
        private = "" if s.is_private else "  [NOT PRIVATE]"
        print(f"{s.name:15s} {s.title}  (paper {s.paper}; {s.data_kind}; {', '.join(s.neighbouring)}){private}")
        for name, p in s.params.items():
            default = "auto" if p.default is None else p.default
            print(f"    {name}={default}  {p.help}")
    return 0


def _spec_dict(spec) -> dict[str, Any]:
    return {"name": spec.name, "title": spec.title, "paper": spec.paper, "data_kind": spec.data_kind,
            "neighbouring": list(spec.neighbouring), "is_private": spec.is_private, "guarantee": spec.guarantee,
            "params": {k: {"default": p.default, "type": p.type.__name__, "bounds": p.bounds,
                           "choices": list(p.choices) if p.choices else None, "help": p.help}
                       for k, p in spec.params.items()}}


#: Names ``--param`` must not set (synth's own options, named here; ``None``: no option sets it).
_OPTIONS_NOT_PARAMS: dict[str, str | None] = {"epsilon": "--epsilon", "schema": "--schema", "mechanism": "--mechanism",
                       "neighbouring": "--neighbouring", "n_synthetic": "--n-synthetic", "rng": "--seed",
                       "seed": "--seed", "public_n": "--public-n", "ledger": "--ledger", "dataset": "--dataset",
                       "identity": "--dataset", "capacity": None, "release_mode": "--release-mode",
                       "fallbacks": "--fallback"}


def _cmd_synth(args: argparse.Namespace) -> int:
    manifest_file = manifest.manifest_path(args.output)
    _check_outputs([args.output, manifest_file, args.report], [args.input, args.schema], force=args.force)
    params: dict[str, Any] = dict(_split_param(p) for p in args.param)
    for key in params:
        if key in _OPTIONS_NOT_PARAMS:
            option = _OPTIONS_NOT_PARAMS[key]
            raise UsageError(f"--param {key}=... is not a mechanism parameter" + (f"; use {option}" if option else ""))
    get_mechanism(args.mechanism)  # an unknown name is named before the input is read
    if args.release_mode and (args.schema is None or args.diagnostics):
        raise UsageError("--release-mode needs --schema (a domain read off the data is not private) and refuses "
                         "--diagnostics (read off the raw data)")
    if args.fallback and not args.release_mode:
        raise UsageError("--fallback applies with --release-mode only")
    ledger = budget.PrivacyLedger(args.ledger)
    params.update(neighbouring=args.neighbouring, n_synthetic=args.n_synthetic, public_n=args.public_n,
                  rng=_seed(args.seed), ledger=ledger, release_mode=args.release_mode,
                  fallbacks=dict(_split_param(f, "--fallback") for f in args.fallback) or None)
    if args.schema is None:  # a schema proposed from the data needs the whole table
        table = read_csv(args.input)
        dataset = _dataset(args, args.input, None)
        result = synthesize(table, args.mechanism, args.epsilon, schema=None, dataset=dataset, **params)
    else:  # the file is read in blocks of rows, each encoded into the mechanism's array and dropped
        schema = read_schema(args.schema)
        identity = IdentityDigest(schema.names)  # the records' identity, computed in the same pass
        with iter_csv(args.input) as chunks:
            result = synthesize_chunks(chunks, args.mechanism, args.epsilon, schema=schema, capacity=chunks.max_rows,
                                       dataset=args.dataset, identity=identity, **params)
        dataset = args.dataset or identity.hexdigest()
    release = result.release()
    # Every file is complete on disk before any is renamed into place; any failure removes them all.
    with contextlib.ExitStack() as stack:
        manifest.write_release(stack, release, result.ledger_entry, args.output, manifest_file)
        if args.report:
            report = stack.enter_context(atomic_open(args.report))
            report.write(json.dumps(release.to_dict(), indent=2, default=str).encode("utf-8"))
    for warning in release.to_dict()["warnings"]:
        print(f"warning: {warning}", file=sys.stderr)
    if args.diagnostics:
        for warning in result.diagnostics["teaching_warnings"]:
            print(f"diagnostic (read off the raw data, not private): {warning}", file=sys.stderr)
    seed = f", seed={release.seed}" if release.seed is not None else ""
    print(f"wrote {release.n_synthetic} synthetic rows to {args.output} "
          f"({release.mechanism}, epsilon={release.epsilon:g}, {release.neighbouring}, "
          f"dp_valid={release.dp_valid}{seed}) and its manifest to {manifest_file}")
    print(_budget_line(ledger, dataset))
    return 0


def _budget_line(ledger: budget.PrivacyLedger, dataset: str) -> str:
    """The dataset's spent total and budget, as ``synth`` and ``budget show`` print them."""
    spent, cap = ledger.spent(dataset), ledger.budget(dataset)
    limit = f"of the budget {cap:g}" if cap is not None else "(no budget set: python -m privsyn_core budget set)"
    return f"privacy ledger {ledger.path}: epsilon {spent:g} spent on this data {limit}"


def _cmd_budget_init(args: argparse.Namespace) -> int:
    ledger = budget.PrivacyLedger.create(args.ledger, replace=args.force)
    print(f"created an empty privacy ledger at {ledger.path}")
    return 0


def _cmd_budget_set(args: argparse.Namespace) -> int:
    text = args.epsilon.strip().lower()
    epsilon = None if text == "none" else _budget_epsilon(args.epsilon)
    ledger = budget.PrivacyLedger(args.ledger)
    dataset = _dataset(args, args.data, _load_schema(args.schema))
    ledger.set_budget(dataset, epsilon)
    print(_budget_line(ledger, dataset))
    return 0


def _budget_epsilon(text: str) -> float:
    """``budget set``'s EPSILON: a positive finite number (else one line naming the value)."""
    try:
        value = float(text)
    except ValueError:
        value = float("nan")
    if not (value > 0 and value != float("inf")):
        raise UsageError(f"a budget is a positive finite epsilon such as 2.0, or 'none' to remove it; got {text!r}")
    return value


def _cmd_budget_show(args: argparse.Namespace) -> int:
    ledger = budget.PrivacyLedger(args.ledger)
    ledger.ensure(create=False)  # a command that reads never makes a ledger
    dataset = _dataset(args, args.data, _load_schema(args.schema))
    spends = ledger.spends(dataset, last=max(args.last, 0))
    if args.json:
        print(json.dumps({"ledger": str(ledger.path), "budget": ledger.budget(dataset),
                          "budget_owner": ledger.budget_owner(dataset), "totals": ledger.totals(dataset),
                          "releases": ledger.count(dataset), "last": [
                              {"label": e.label, "mechanism": e.mechanism, "relation": e.relation,
                               "epsilon": e.epsilon, "private": e.private, "status": e.status, "created": e.created}
                              for e in spends]}, indent=2))
        return 0
    print(_budget_line(ledger, dataset))
    for relation, total in ledger.totals(dataset).items():
        print(f"  {relation}: epsilon {total:g}")
    for e in spends:
        kind = "" if e.private else "  [not private: outside the budget]"
        print(f"  {e.created}  {e.label}  epsilon {e.epsilon:g}  {e.relation}  {e.status}{kind}")
    return 0


def _cmd_verify(args: argparse.Namespace) -> int:
    verdict = manifest.verify(args.release, args.manifest, args.ledger)
    print(f"{'verified' if verdict.ok else 'NOT VERIFIED'}: {verdict.message}")
    return 0 if verdict.ok else 1


def _cmd_evaluate(args: argparse.Namespace) -> int:
    from privsyn_core.evaluation.scorecard import evaluate

    real, synthetic = read_csv(args.real), read_csv(args.synthetic)
    missing = [c for c in real.columns if c not in synthetic.columns]
    if missing:
        raise PrivsynError(f"the synthetic file lacks column(s) {missing} of the real file")
    report = evaluate(real, synthetic[list(real.columns)], schema=_load_schema(args.schema))
    if args.json:
        print(json.dumps(report, indent=2, default=_json_default))
    else:
        print(f"{'metric':24s} {'synthetic':>12s} {'real floor':>12s}  how")
        for name, entry in report.items():
            if not name.startswith("_"):
                print(f"{name:24s} {_format_entry(entry)}")
        print("(real floor: the same metric between two halves of the real data. Evaluation only: these metrics "
              "read the real data. --json adds the per-column tables.)")
    return 0


def _cmd_audit(args: argparse.Namespace) -> int:
    from privsyn_core.evaluation import audit

    counts = {k: v for k, v in (("trials", args.trials), ("selection_trials", args.selection_trials)) if v is not None}
    # "all" leaves out what an outside library runs (the optional OpenDP peers), as audit.audit_all does
    names = ([s.name for s in list_mechanisms() if s.is_private and s.implemented_by is None]
             if args.mechanism == "all" else [args.mechanism])
    relations = {name: [args.neighbouring] if args.neighbouring else get_mechanism(name).neighbouring for name in names}
    results = [audit.audit(name, args.epsilon, neighbouring=relation, confidence=args.confidence, rng=args.seed,
                           noise_factor=args.noise_factor, **counts)
               for name in names for relation in relations[name]]
    print(json.dumps([r.row() for r in results], indent=2) if args.json else audit.format_table(results))
    return 1 if any(r.detected for r in results) else 0


def _format_entry(entry: Any) -> str:
    if isinstance(entry, dict) and "value" in entry:
        floor = entry.get("floor")
        extras = ", ".join(f"{k}={_short(v)}" for k, v in entry.items()
                           if k not in ("value", "floor") and v is not None and not isinstance(v, list))
        floor_text = f"{floor:12.6g}" if isinstance(floor, (int, float)) else f"{'-':>12s}"
        return f"{entry['value']:12.6g} {floor_text}  {extras}"
    return json.dumps(entry, default=_json_default)


def _short(value: Any) -> str:
    if isinstance(value, dict):
        return "{" + ", ".join(f"{k}={_short(v)}" for k, v in value.items()) + "}"
    return f"{value:.4g}" if isinstance(value, float) else str(value)


def _json_default(value: Any) -> Any:
    if hasattr(value, "tolist"):
        return value.tolist()
    if hasattr(value, "to_dict"):
        return value.to_dict()
    return str(value)


def _load_schema(path: Path | None) -> Schema | None:
    return None if path is None else read_schema(path)


def _check_outputs(outputs: list[Path | None], inputs: list[Path | None], *, force: bool) -> None:
    """Refuse, before any work, output paths that would destroy an input, each other or an existing file.

    Two paths name the same file when they resolve to the same path or, for existing files,
    have the same device and inode (hard links, bind mounts, case-insensitive file systems).
    """
    outputs_given = [p for p in outputs if p is not None]
    inputs_given = [p for p in inputs if p is not None]
    for k, out in enumerate(outputs_given):
        for other in inputs_given:
            if _same_file(out, other):
                raise OutputError(f"refusing to write {out}: it is the input file {other}; choose another path")
        for other in outputs_given[:k]:
            if _same_file(out, other):
                raise OutputError(f"{out} is named twice among the files to write (the output, its manifest, the "
                                  "report); give distinct paths")
        folder = out.resolve().parent
        if not folder.is_dir():
            raise OutputError(f"no such folder: {folder}")
        if out.is_dir():
            raise OutputError(f"{out} is a folder; give the path of a file to write")
        if out.exists() and not out.is_file():
            raise OutputError(f"not a regular file: {out}; give the path of a file to write")
        if out.exists() and not force:
            raise OutputError(f"{out} exists; pass --force to overwrite it")
        if not os.access(folder, os.W_OK):
            raise OutputError(f"cannot write in folder {folder}: permission denied")


def _same_file(a: Path, b: Path) -> bool:
    if a.resolve() == b.resolve():
        return True
    try:
        sa, sb = a.stat(), b.stat()
    except OSError:
        return False
    return (sa.st_dev, sa.st_ino) == (sb.st_dev, sb.st_ino)


def _split_param(text: str, option: str = "--param") -> tuple[str, str]:
    key, sep, value = text.partition("=")
    if not sep or not key:
        raise PrivsynError(f"{option} expects K=V, got {text!r}")
    return key.strip(), value.strip()


def _seed(text: str | None):
    if text is None or text == "secure":
        return text
    try:
        return int(text)
    except ValueError:
        raise PrivsynError(f"--seed must be an integer or 'secure', got {text!r}") from None


def _one_line(exc: BaseException) -> str:
    if isinstance(exc, FileNotFoundError) and exc.filename:
        return f"no such file: {exc.filename}"
    text = str(exc).strip().splitlines()
    return text[0] if text else type(exc).__name__
