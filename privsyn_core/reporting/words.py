"""Plain words for non-experts, with the exact term one click away."""

from __future__ import annotations

RELATIONS = {"replace": "replacing one record (the number of records is public)",
             "add_remove": "adding or removing one record (the number of records is private too)"}


def relation(name: str) -> str:
    return RELATIONS.get(name, name)


def guarantee(private: bool, dp_valid: bool) -> str:
    if not private:
        return "none: this method is not private"
    return "holds" if dp_valid else "void: the domain was read off the data"
