"""Write one generated section of ``docs/benchmarks.md``.

The section lies between ``<!-- name:start -->`` / ``<!-- name:end -->`` markers.
"""

from __future__ import annotations

from pathlib import Path

DOC = Path(__file__).resolve().parents[1] / "docs" / "benchmarks.md"


def update_section(name: str, text: str, doc: Path = DOC) -> None:
    """Replace the section ``name`` (appended at the end when absent) with ``text``."""
    start, end = f"<!-- {name}:start -->", f"<!-- {name}:end -->"
    current = doc.read_text() if doc.exists() else "# Benchmarks\n"
    block = f"{start}\n{text.rstrip()}\n{end}"
    if start in current and end in current:
        head, rest = current.split(start, 1)
        current = head + block + rest.split(end, 1)[1]
    else:
        current = current.rstrip() + "\n\n" + block + "\n"
    doc.parent.mkdir(parents=True, exist_ok=True)
    doc.write_text(current)
