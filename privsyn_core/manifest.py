"""Release manifests: what a release is, and how anyone who receives its file can check it.

Every door writes a release's CSV together with its manifest (``RELEASE.csv`` and ``RELEASE.manifest.json``:
:meth:`privsyn_core.SynthResult.save`, the CLI's ``synth``, the app's downloads).  The manifest is JSON with sorted
keys and a format tag (:data:`FORMAT`); it holds

* ``release``: the release's public metadata, :meth:`~privsyn_core.result.Release.to_dict` (mechanism, epsilon,
  neighbouring relation, the per-stage ledger, the parameters that may be published, the schema, the domain
  policy);
* ``library_version``: the version of privsyn_core that made it;
* ``file``: the file's name and the SHA-256 of the exact bytes written;
* ``ledger_entry``: when the release was counted in a privacy ledger, a random release id under which the ledger
  holds the file's SHA-256 with the spend (:meth:`~privsyn_core.privacy.budget.PrivacyLedger.record_release`);
  ``None`` otherwise.

Nothing in it is read off the records: the dataset's key in the ledger (a hash of the records,
:mod:`privsyn_core.data.identity`) is never written, and the release id is drawn at random.  :func:`verify` checks
that a received file has the manifest's SHA-256 (the bytes are the released bytes: SHA-256 is collision resistant,
FIPS 180-4) and, given the ledger, that the ledger holds that file with a spend of the manifest's mechanism,
relation and epsilon.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple

from privsyn_core import _version
from privsyn_core.data.io import atomic_open, write_csv
from privsyn_core.errors import DataError, OutputError, UsageError
from privsyn_core.privacy.budget import LedgerEntry, PrivacyLedger

if TYPE_CHECKING:
    from privsyn_core.result import Release, SynthResult

__all__ = ["FORMAT", "SUFFIX", "build_manifest", "manifest_bytes", "manifest_path", "save_release", "write_release",
           "record", "read_manifest", "sha256_file", "verify", "Verdict", "describe"]

#: The format tag every manifest carries.
FORMAT = "privsyn-manifest/1"
#: What a manifest's file name ends with, in place of the release's suffix.
SUFFIX = ".manifest.json"


def build_manifest(release: Release, sha256: str, *, file_name: str, release_id: str | None) -> dict[str, Any]:
    """The manifest of ``release`` written as the file ``file_name`` whose bytes have the SHA-256 ``sha256``.

    ``release_id`` is the file's id in the privacy ledger (:meth:`PrivacyLedger.record_release`), ``None`` when no
    ledger counted the release.  A pure function of the release's public fields and its arguments.
    """
    return {"format": FORMAT, "library_version": _version.__version__,
            "file": {"name": file_name, "sha256": sha256},
            "ledger_entry": None if release_id is None else {"release_id": release_id},
            "release": release.to_dict()}


def manifest_bytes(manifest: dict[str, Any]) -> bytes:
    """The manifest as written: JSON, sorted keys, two-space indent, one final newline."""
    return (json.dumps(manifest, indent=2, sort_keys=True, default=str) + "\n").encode("utf-8")


def manifest_path(path: str | os.PathLike[str]) -> Path:
    """Where the manifest of the release file ``path`` goes: ``RELEASE.csv`` gives ``RELEASE.manifest.json``."""
    path = Path(path)
    return path.with_name(path.stem + SUFFIX if path.suffix else path.name + SUFFIX)


class _Digesting:
    """A binary handle that hashes (SHA-256) every byte written through it."""

    def __init__(self, handle: Any) -> None:
        self.handle, self.digest = handle, hashlib.sha256()

    def write(self, data: bytes) -> int:
        self.digest.update(data)
        return int(self.handle.write(data))


def save_release(result: SynthResult, path: str | os.PathLike[str], *, manifest: str | os.PathLike[str] | None = None,
                 force: bool = False) -> tuple[Path, Path]:
    """Write the release's rows to ``path`` (CSV, the bytes of :func:`~privsyn_core.data.io.write_csv`) and its
    manifest beside it (:func:`manifest_path`, or ``manifest``); returns both paths.

    When the result was counted in a privacy ledger, the file's SHA-256 is recorded there with its spend before
    either file appears (:meth:`PrivacyLedger.record_release`).  Both files are complete on disk before either is
    renamed into place, and any failure leaves neither (:func:`~privsyn_core.data.io.atomic_open`).

    Raises
    ------
    OutputError
        When a file exists and ``force`` is false, or the two paths are one file.
    """
    path = Path(path)
    target = manifest_path(path) if manifest is None else Path(manifest)
    if path.absolute() == target.absolute():
        raise OutputError(f"the release and its manifest are the same file {path}; give two paths")
    for out in (path, target):
        if out.exists() and not force:
            raise OutputError(f"{out} exists; pass force=True (CLI: --force) to overwrite it")
    with contextlib.ExitStack() as stack:
        write_release(stack, result.release(), result.ledger_entry, path, target)
    return path, target


def write_release(stack: contextlib.ExitStack, release: Release, entry: LedgerEntry | None, path: Path,
                  manifest: Path) -> dict[str, Any]:
    """Write the release's CSV and its manifest through :func:`~privsyn_core.data.io.atomic_open` handles entered
    on ``stack`` (both appear when the stack closes, neither if it raises); returns the manifest.

    The file's SHA-256 is recorded with the spend ``entry`` (``SynthResult.ledger_entry``; ``None``: no ledger
    counted the release) before the stack closes.
    """
    rows = _Digesting(stack.enter_context(atomic_open(path)))
    write_csv(release.data, rows)  # type: ignore[arg-type]  # a writable binary handle
    sha256 = rows.digest.hexdigest()
    document = build_manifest(release, sha256, file_name=path.name, release_id=record(entry, sha256))
    stack.enter_context(atomic_open(manifest)).write(manifest_bytes(document))
    return document


def record(entry: LedgerEntry | None, sha256: str) -> str | None:
    """Record a file of the spend ``entry`` in its ledger; its release id (``None`` without a ledger entry)."""
    if entry is None:
        return None
    return PrivacyLedger(entry.path).record_release(entry.spend, sha256)


def sha256_file(path: str | os.PathLike[str]) -> str:
    """The SHA-256 of a regular file's bytes, read in blocks.

    Raises
    ------
    FileNotFoundError
        For a missing file.
    DataError
        For a path that is not a regular file (a folder, a device).
    """
    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(2, "no such file", str(path))
    if not path.is_file():
        raise DataError(f"not a regular file: {path}")
    with open(path, "rb") as handle:
        return hashlib.file_digest(handle, "sha256").hexdigest()


def read_manifest(path: str | os.PathLike[str]) -> dict[str, Any]:
    """A manifest file, checked for the fields :func:`verify` reads.

    Raises
    ------
    FileNotFoundError
        For a missing file.
    UsageError
        For a file that is not JSON, or JSON that is not a manifest of :data:`FORMAT`.
    """
    with open(path, encoding="utf-8") as handle:
        try:
            manifest = json.load(handle)
        except (json.JSONDecodeError, UnicodeDecodeError) as exc:
            raise UsageError(f"{path} is not a release manifest: not JSON ({exc})") from None
    if not isinstance(manifest, dict) or manifest.get("format") != FORMAT:
        raise UsageError(f"{path} is not a release manifest ({FORMAT})")
    file, release, entry = manifest.get("file"), manifest.get("release"), manifest.get("ledger_entry")
    if not (isinstance(file, dict) and isinstance(file.get("sha256"), str) and isinstance(file.get("name"), str)
            and isinstance(release, dict) and _release_fields(release)
            and (entry is None or (isinstance(entry, dict) and isinstance(entry.get("release_id"), str)))):
        raise UsageError(f"{path} is a damaged release manifest: it lacks the file's SHA-256 or the release's fields")
    return manifest


def _release_fields(release: dict[str, Any]) -> bool:
    """Whether a manifest's ``release`` has the fields :func:`verify` reads, of their types."""
    epsilon = release.get("epsilon")
    return (isinstance(release.get("mechanism"), str) and isinstance(release.get("neighbouring"), str)
            and isinstance(release.get("dp_valid"), bool)
            and isinstance(epsilon, (int, float)) and not isinstance(epsilon, bool))


class Verdict(NamedTuple):
    """What :func:`verify` found: ``ok``, and one line saying why."""

    ok: bool
    message: str


def verify(release_file: str | os.PathLike[str], manifest_file: str | os.PathLike[str],
           ledger: str | os.PathLike[str] | None = None) -> Verdict:
    """Check that ``release_file`` is the file its manifest describes and, given ``ledger``, that the ledger
    holds its spend.

    The file passes when its SHA-256 equals the manifest's.  With a ledger (read only:
    :meth:`PrivacyLedger.find_release` never creates or writes it), the ledger must also hold the manifest's
    release id with the same SHA-256, on a released spend of the manifest's mechanism and relation, private
    exactly when the manifest says so, and, when private, of the manifest's epsilon.

    Raises
    ------
    FileNotFoundError, UsageError, DataError, LedgerError
        When a file is missing or not what it should be (a usage error, not a failed check).
    """
    manifest = read_manifest(manifest_file)
    found = sha256_file(release_file)
    expected = manifest["file"]["sha256"]
    name = Path(release_file).name
    if found != expected:
        return Verdict(False, f"{name} is not the released file: its SHA-256 {found[:16]}... differs from the "
                              f"manifest's {expected[:16]}...")
    release = manifest["release"]
    what = f"{release['mechanism']}, epsilon={float(release['epsilon']):g}, {release['neighbouring']}"
    if ledger is None:
        return Verdict(True, f"{name} is the released file ({what}; SHA-256 {found[:16]}... matches the manifest)")
    reason = _ledger_mismatch(manifest, found, PrivacyLedger(ledger))
    if reason is not None:
        return Verdict(False, f"{name} matches its manifest, but {reason}")
    return Verdict(True, f"{name} is the released file ({what}) and the ledger {ledger} holds its spend")


def _ledger_mismatch(manifest: dict[str, Any], sha256: str, ledger: PrivacyLedger) -> str | None:
    """Why the ledger does not vouch for the manifest's release (``None`` when it does)."""
    entry, release = manifest["ledger_entry"], manifest["release"]
    if entry is None:
        return "the manifest names no ledger entry (the release was not counted in a ledger)"
    recorded = ledger.find_release(entry["release_id"])
    if recorded is None:
        return f"the ledger {ledger.path} holds no release {entry['release_id']}"
    spend = recorded.spend
    checks = [(recorded.sha256 == sha256, "the ledger recorded another file under this release id"),
              (spend.mechanism == release["mechanism"], f"the ledger's spend is of {spend.mechanism}"),
              (spend.relation == release["neighbouring"], f"the ledger's spend is under {spend.relation}"),
              (spend.private == bool(release["dp_valid"]),
               "the ledger's spend is " + ("private" if spend.private else "not private (outside every budget)")),
              (not spend.private or spend.epsilon == float(release["epsilon"]),
               f"the ledger's spend is epsilon={spend.epsilon:g}"),
              (spend.status == "spent", f"the ledger's spend is {spend.status}, not released")]
    return next((reason for ok, reason in checks if not ok), None)


def describe(manifest: dict[str, Any], *, ledger_hint: str = "LEDGER") -> list[str]:
    """The manifest in plain words, one sentence per item: what was released and how to check it."""
    release, file, entry = manifest["release"], manifest["file"], manifest["ledger_entry"]
    name = file["name"]
    stem = name[:-len(Path(name).suffix)] if Path(name).suffix else name
    lines = [f"What was released: the file {name}, {release.get('n_synthetic', 0):,} synthetic rows made with "
             f"epsilon {float(release['epsilon']):g} under the {release['neighbouring'].replace('_', '/')} "
             f"relation (privsyn {manifest['library_version']}).",
             f"Its fingerprint (SHA-256): {file['sha256']}. Any change to the file, even of one byte, changes it.",
             (f"The privacy ledger holds this file under the release id {entry['release_id']}, with the epsilon "
              "spent on it." if entry is not None else "No privacy ledger counted this release."),
             f"How to check a copy: privsyn verify {name} {stem}{SUFFIX}"
             + (f" --ledger {ledger_hint} (where the ledger is at hand)." if entry is not None else ".")]
    return lines
