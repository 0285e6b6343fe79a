"""Plain words and the app's documentation (issue 16, items 8 and 11): papers by authors and title, relations in
words, the README's first steps, and ``docs/app.md`` naming every page and only tests that exist."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

import privsyn_core as ps
from privsyn_core.reporting import words

ROOT = Path(__file__).resolve().parents[1]
APP_DOC = ROOT / "docs" / "app.md"


@pytest.mark.parametrize("spec", ps.list_mechanisms(), ids=lambda s: s.name)
def test_every_mechanism_cites_its_paper_by_authors_title_and_venue(spec):
    """The spec's ``citation`` is what the app, the reports and the CLI print (no table of papers elsewhere)."""
    text = spec.citation
    if spec.paper.strip() in ("baseline", "reference"):
        assert text.startswith(("a textbook baseline", "a reference")), f"{spec.name}: {text}"
        return
    assert re.search(r'[A-Z][a-zč]+, .*"[^"]{20,}", .*(19|20)\d\d', text), f"{spec.name}: {text}"
    assert not re.search(r"\b00\d\b|\[[A-Z]+\d+\]", text), f"{spec.name}: a bare citation key is left in {text!r}"


def test_relations_and_the_guarantee_in_words():
    assert words.relation("add_remove").startswith("adding or removing one record")
    assert words.relation("replace").startswith("replacing one record")
    assert words.guarantee(True, True) == "holds" and "not private" in words.guarantee(False, True)


def test_the_readme_gives_clone_venv_the_two_commands_and_the_url():
    readme = (ROOT / "README.md").read_text()
    assert "git clone" in readme and "python3 -m venv .venv" in readme
    assert "pip install -r requirements.txt && streamlit run app.py" in readme
    assert "http://localhost:8501" in readme and "(docs/app.md)" in readme


def test_docs_app_names_every_page_the_ten_problems_and_only_tests_that_exist():
    doc = APP_DOC.read_text()
    titles = re.findall(r'st\.Page\("[^"]+", title="([^"]+)"', (ROOT / "app.py").read_text())
    assert len(titles) >= 7 and all(f"| {t} |" in doc for t in titles)
    section = doc.split("## Issue 16's ten problems")[1]
    assert [int(n) for n in re.findall(r"^(\d+)\. \*\*", section, flags=re.M)] == list(range(1, 11))
    files = set(re.findall(r"`(tests/[\w/]+\.py)", doc))
    assert files and all((ROOT / f).exists() for f in files), sorted(f for f in files if not (ROOT / f).exists())
    every_test = "".join((ROOT / f).read_text() for f in ROOT.glob("tests/**/test_*.py"))
    named = set(re.findall(r"\b(test_\w+)", doc)) - {Path(f).stem for f in files} - {"test_app_docs"}
    assert all(f"def {name}(" in every_test for name in named), sorted(n for n in named
                                                                       if f"def {n}(" not in every_test)
