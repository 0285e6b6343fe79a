"""The documentation stays readable (issue 26, item 9): one short page per question, links that resolve, no
generated HTML committed under ``docs/``."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
MAX_BYTES = 12 * 1024
#: Pages over MAX_BYTES, each with its reason; keep this empty (split a long page into one page per question).
OVERSIZED: dict[str, str] = {}
#: [text](target) outside code spans; images too.
LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)\)")


def _pages() -> list[Path]:
    return sorted(DOCS.glob("*.md"))


def _links(path: Path) -> list[str]:
    text = re.sub(r"```.*?```", "", path.read_text(), flags=re.S)
    text = re.sub(r"`[^`\n]*`", "", text)
    return [t for t in LINK.findall(text) if not re.match(r"[a-z][a-z0-9+.-]*:", t) and not t.startswith("#")]


@pytest.mark.parametrize("page", _pages(), ids=lambda p: p.name)
def test_every_page_is_short(page):
    size = page.stat().st_size
    if page.name in OVERSIZED:
        return
    assert size <= MAX_BYTES, f"docs/{page.name} is {size} bytes; cut it under {MAX_BYTES} (history stays in git)"


def test_the_exceptions_are_still_exceptions():
    """An exception that fits (or no longer exists) leaves the list."""
    stale = [n for n in OVERSIZED if not (DOCS / n).exists() or (DOCS / n).stat().st_size <= MAX_BYTES]
    assert not stale, stale


@pytest.mark.parametrize("page", [ROOT / "README.md", *_pages(), *sorted((DOCS / "tables").glob("*.md"))],
                         ids=lambda p: str(p.relative_to(ROOT)))
def test_every_relative_link_resolves(page):
    missing = [t for t in _links(page) if not (page.parent / t.split("#")[0]).exists()]
    assert not missing, f"{page.relative_to(ROOT)} links to files that do not exist: {missing}"


def test_no_html_is_committed_under_docs():
    """Plotly HTML figures are written under test-output/ (not committed), never into docs/."""
    found = subprocess.run(["git", "ls-files", "docs"], cwd=ROOT, capture_output=True, text=True)
    if found.returncode != 0:  # not a git checkout (an sdist): look at the files
        files = [str(p.relative_to(ROOT)) for p in DOCS.rglob("*")]
    else:
        files = found.stdout.split()
    assert not [f for f in files if f.endswith((".html", ".htm"))]
    assert not (DOCS / "figures").exists() or not any((DOCS / "figures").iterdir())


def test_every_table_file_is_linked_from_a_page():
    text = "".join(p.read_text() for p in _pages())
    unlinked = [p.name for p in sorted((DOCS / "tables").glob("*.md")) if f"tables/{p.name}" not in text]
    assert not unlinked, unlinked
