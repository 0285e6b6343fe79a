"""The app's parsed tables, shared by every session and bounded in bytes (not in entries).

A parsed upload can take many times its file size (a 49.9 MB CSV of short text took 1.2 GB as a DataFrame),
so a cache bounded by its number of entries is not bounded at all.  :class:`TableCache` keeps the most
recently used tables whose total ``DataFrame.memory_usage(deep=True)`` stays within a budget of
``PRIVSYN_UPLOAD_CACHE_MB`` megabytes (default :data:`DEFAULT_CACHE_MB`), evicting the least recently used
first; a single table larger than the whole budget is refused with a :class:`~privsyn_core.errors.ResourceError`
naming the limit, so the server never holds more than the budget in parsed tables.

Tables are keyed by the SHA-256 of their file bytes (computed once, when the file is chosen), never by
hashing the bytes again on every rerun.  The lock guards only dictionary updates: parsing and measuring
happen outside it, so a large upload never blocks other sessions.  Returned tables are shared between
sessions and must not be modified in place (pandas copy-on-write makes column selections independent).
"""

from __future__ import annotations

import os
import threading
from collections import OrderedDict

import pandas as pd

from privsyn_core.errors import ResourceError

CACHE_ENV = "PRIVSYN_UPLOAD_CACHE_MB"
#: Default budget of the parsed-table cache, in megabytes (the server's target is < 1 GB with 20 sessions).
DEFAULT_CACHE_MB = 256


def budget_bytes() -> int:
    """The cache's budget in bytes: ``PRIVSYN_UPLOAD_CACHE_MB`` (default :data:`DEFAULT_CACHE_MB`)."""
    raw = os.environ.get(CACHE_ENV, str(DEFAULT_CACHE_MB))
    try:
        megabytes = float(raw)
    except ValueError:
        raise ResourceError(f"{CACHE_ENV} must be a number of megabytes, got {raw!r}") from None
    if not megabytes > 0 or megabytes == float("inf"):
        raise ResourceError(f"{CACHE_ENV} must be a positive number of megabytes, got {raw!r}")
    return int(megabytes * 2**20)


def table_bytes(frame: pd.DataFrame) -> int:
    """Bytes a table holds, strings included (``memory_usage(deep=True)``)."""
    return int(frame.memory_usage(deep=True, index=True).sum())


class TableCache:
    """A least-recently-used map from a file's SHA-256 to its parsed table, bounded in bytes.

    Parameters
    ----------
    budget : int or None
        Most bytes held; ``None`` reads :func:`budget_bytes` at every insertion (so the environment
        variable can be changed on a running server's next upload).
    """

    def __init__(self, budget: int | None = None) -> None:
        self._budget = budget
        self._lock = threading.Lock()
        self._tables: OrderedDict[str, tuple[pd.DataFrame, int]] = OrderedDict()
        self._held = 0

    @property
    def budget(self) -> int:
        return budget_bytes() if self._budget is None else self._budget

    @property
    def held(self) -> int:
        """Bytes held now (the sum of the tables' :func:`table_bytes`)."""
        return self._held

    def __len__(self) -> int:
        return len(self._tables)

    def get(self, key: str) -> pd.DataFrame | None:
        """The table stored under ``key`` (now the most recently used), or ``None``."""
        with self._lock:
            found = self._tables.get(key)
            if found is None:
                return None
            self._tables.move_to_end(key)
            return found[0]

    def put(self, key: str, frame: pd.DataFrame) -> pd.DataFrame:
        """Store ``frame`` under ``key``, evicting least recently used tables until the budget holds it.

        Raises
        ------
        ResourceError
            When ``frame`` alone is larger than the budget (nothing is evicted then).
        """
        size, budget = table_bytes(frame), self.budget  # measured outside the lock
        if size > budget:
            raise ResourceError(f"the parsed table takes {size / 2**20:,.0f} MB, more than the app's table cache "
                                f"({budget / 2**20:,.0f} MB, {CACHE_ENV}); upload fewer rows or columns, or raise "
                                f"{CACHE_ENV}")
        evicted = []
        with self._lock:
            old = self._tables.pop(key, None)
            if old is not None:
                self._held -= old[1]
            while self._tables and self._held + size > budget:
                _, (table, held) = self._tables.popitem(last=False)
                self._held -= held
                evicted.append(table)
            self._tables[key] = (frame, size)
            self._held += size
        del evicted  # the evicted tables are freed here, outside the lock
        return frame

    def clear(self) -> None:
        with self._lock:
            self._tables.clear()
            self._held = 0
