"""No tracked file names a folder of one machine: no absolute path into a home, root or work folder and no
hard-coded temporary folder.  A checkout runs anywhere: scripts take such folders from ``tempfile``, a command-line
argument or an environment variable, and instructions name folders relative to the checkout."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
#: An absolute path into a home, root or work folder, a user's home (``~/``) or the system temporary folder, not
#: preceded by a character that would make it part of a longer path or URL (``docs/work/`` is fine).
MACHINE_PATH = re.compile(r"(?<![\w.~$/-])(?:/home/|/root/|/work/|/tmp\b|/var/tmp\b|~/)")
#: The home paths the package documents on purpose, every user's own XDG folders: the ledger's default in the data
#: folder (:func:`privsyn_core.privacy.budget.default_path`) and the ledgers' markers in the config folder.
ALLOWED = ("~/.local/share/privsyn/", "~/.config/privsyn/")


def machine_paths(text: str) -> list[str]:
    """The lines of ``text`` that name a machine's folder (after removing the allowed paths)."""
    lines = text.splitlines()
    return [line.strip() for line in lines
            if MACHINE_PATH.search(re.sub("|".join(map(re.escape, ALLOWED)), "", line))]


@pytest.mark.parametrize("line", [
    'CACHE = Path("/work/cache/mst")', "python3.11 -m venv /work/venvs/smartnoise", 'default=Path("/tmp/x")',
    "cd ~/privsyn", "see /home/alice/data.csv", "export TMPDIR=/var/tmp", "/root/.cache/pip", 'dir="/tmp"'])
def test_a_machine_path_is_caught(line):
    assert machine_paths(line) == [line]


@pytest.mark.parametrize("line", [
    "python -m venv .venv-peers", "docs/work/notes.md", "https://example.org/home/page", "$HOME/.cache",
    "~/.local/share/privsyn/ledger.sqlite", "Path(tempfile.gettempdir()) / 'x'"])
def test_relative_paths_urls_and_the_documented_default_pass(line):
    assert machine_paths(line) == []


def test_no_tracked_file_names_a_machine_path():
    """Runs in the checkout the README's test command runs in; without git or outside a checkout it fails."""
    tracked = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True).stdout
    assert tracked, "git lists no tracked file: run the tests from a git checkout"
    found = []
    this_file = Path(__file__).resolve().relative_to(ROOT).as_posix()  # its detection cases are machine paths
    for name in filter(None, tracked.decode().split("\0")):
        path = ROOT / name
        if name == this_file or not path.is_file():
            continue
        raw = path.read_bytes()
        if b"\0" in raw:  # binary
            continue
        found += [f"{name}: {line}" for line in machine_paths(raw.decode("utf-8", errors="replace"))]
    assert found == []
