"""User-supplied text (file and column names, messages that quote them) shown as text, never as Markdown.

Streamlit renders ``st.markdown``, ``st.write``, captions, alerts and widget labels as Markdown: a
column named ``![x](https://host/p.png)`` would make every visitor's browser fetch that URL, and
``:red[...]``, ``$...$`` or ``**`` would restyle the page.  Every name is escaped with
:func:`md` before it goes into Markdown.
"""

from __future__ import annotations

import ast
import re

#: The punctuation that starts Markdown syntax (CommonMark lets a backslash escape it): links and images,
#: emphasis, code, HTML, tables, headings, Streamlit's ``:colour[...]`` directives and LaTeX ``$``.
_SPECIAL = re.compile(r"([\\`*_{}\[\]()<>#!|~$])")


#: A Python list literal in a message (``['pmm', 'psmm']``), to be said in words by :func:`plain_lists`.
_LIST = re.compile(r"\[[^\[\]]*\]")


def plain_lists(text: str) -> str:
    """``text`` with every Python list of strings in it said in words: ``['a', 'b', 'c']`` becomes ``a, b or c``.

    Other brackets (an interval ``[0, 1]``, a name in brackets) are left as they are.
    """
    def words(match: re.Match[str]) -> str:
        try:
            items = ast.literal_eval(match.group(0))
        except (ValueError, SyntaxError):
            return match.group(0)
        if not items or not all(isinstance(item, str) for item in items):
            return match.group(0)
        return items[0] if len(items) == 1 else f"{', '.join(items[:-1])} or {items[-1]}"

    return _LIST.sub(words, text)


def md(text: object) -> str:
    """``text`` with every Markdown-active character backslash-escaped and newlines flattened."""
    escaped = _SPECIAL.sub(r"\\\1", " ".join(str(text).split()))
    return "\\" + escaped if escaped[:1] in ("-", "+", "=") else escaped


def relation_statement(relation: str) -> str:
    """What a run under the neighbouring ``relation`` protects, in plain words (shown beside the Run button)."""
    if relation == "replace":
        return ("**Neighbours differ by replacing one record.** The release hides what any one record says, not "
                "whether a person is in the table. This table's row count counts as public and is published as is: "
                "unless 'Synthetic rows' is set, the release has exactly that many rows.")
    return ("**Neighbours differ by adding or removing one record.** The release hides whether any one person is in "
            "the table at all, and the number of records is private too.")
