"""Memory budget: every large allocation is sized from public inputs and checked before it is made.

The budget is ``PRIVSYN_MEMORY_BUDGET_MB`` megabytes (default :data:`DEFAULT_BUDGET_MB`).  A run whose
synthetic rows or layout would exceed it is refused with a :class:`~privsyn_core.errors.ResourceError`
naming the limit and what to change, before anything is allocated.  The limits read only public
quantities (the schema's width, epsilon, the parameters, ``n_synthetic``, the public record count), so
whether a run is refused never depends on the private data.
"""

from __future__ import annotations

import math
import os

from privsyn_core.errors import ResourceError

DEFAULT_BUDGET_MB = 1024
#: Bytes per synthetic value in flight: the float64 rows, the decoded DataFrame and a copy while writing.
BYTES_PER_VALUE = 32


def budget_bytes() -> int:
    """The memory budget in bytes (``PRIVSYN_MEMORY_BUDGET_MB``, default :data:`DEFAULT_BUDGET_MB`)."""
    raw = os.environ.get("PRIVSYN_MEMORY_BUDGET_MB", str(DEFAULT_BUDGET_MB))
    try:
        megabytes = float(raw)
    except ValueError:
        raise ResourceError(f"PRIVSYN_MEMORY_BUDGET_MB must be a number of megabytes, got {raw!r}") from None
    if not (math.isfinite(megabytes) and megabytes > 0):
        raise ResourceError(f"PRIVSYN_MEMORY_BUDGET_MB must be positive, got {raw!r}")
    return int(megabytes * 2**20)


def max_rows(columns: int) -> int:
    """The most synthetic rows of ``columns`` columns the budget holds."""
    return max(1, budget_bytes() // (BYTES_PER_VALUE * max(columns, 1)))


def check_rows(rows: int, columns: int, what: str = "n_synthetic") -> None:
    """Refuse ``rows`` synthetic rows when they do not fit the budget."""
    limit = max_rows(columns)
    if rows > limit:
        raise ResourceError(f"{what} = {rows:,} rows of {columns} column(s) exceed the memory budget "
                            f"({budget_bytes() / 2**20:,.0f} MB: at most {limit:,} rows); ask for fewer rows or raise "
                            "PRIVSYN_MEMORY_BUDGET_MB")

