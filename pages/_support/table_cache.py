"""The app's parsed tables, shared by every session and bounded in bytes (not in entries).

A parsed upload can take many times its file size (a CSV of short text becomes one Python object per cell),
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
from collections.abc import Callable
from typing import Generic, TypeVar

import pandas as pd

from privsyn_core.errors import ResourceError

CACHE_ENV = "PRIVSYN_UPLOAD_CACHE_MB"
#: Default budget of the parsed-table cache, in megabytes (the server's target is < 1 GB with 20 sessions).
DEFAULT_CACHE_MB = 256


Value = TypeVar("Value")


def budget_bytes(env: str = CACHE_ENV, default_mb: float = DEFAULT_CACHE_MB) -> int:
    """A cache's budget in bytes: the megabytes in ``env`` (default ``PRIVSYN_UPLOAD_CACHE_MB``, else
    :data:`DEFAULT_CACHE_MB`)."""
    raw = os.environ.get(env, str(default_mb))
    try:
        megabytes = float(raw)
    except ValueError:
        raise ResourceError(f"{env} must be a number of megabytes, got {raw!r}") from None
    if not megabytes > 0 or megabytes == float("inf"):
        raise ResourceError(f"{env} must be a positive number of megabytes, got {raw!r}")
    return int(megabytes * 2**20)


def table_bytes(frame: pd.DataFrame) -> int:
    """Bytes a table holds, strings included: ``frame.memory_usage(deep=True, index=True).sum()``, summed over the
    index and the columns without building that Series (a tenth of the time on a table of a few columns)."""
    return int(frame.index.memory_usage(deep=True)) + sum(int(column.memory_usage(index=False, deep=True))
                                                           for _, column in frame.items())


class BoundedCache(Generic[Value]):
    """A least-recently-used map from a key to a value, bounded in the bytes ``size_of`` counts.

    Parameters
    ----------
    size_of : callable
        Bytes a value holds.
    env, default_mb : str, float
        Where the budget is read (:func:`budget_bytes`) when ``budget`` is ``None``: at every insertion, so
        the environment variable can be changed on a running server.
    budget : int or None
        Most bytes held.
    """

    def __init__(self, size_of: Callable[[Value], int], *, env: str = CACHE_ENV,
                 default_mb: float = DEFAULT_CACHE_MB, budget: int | None = None) -> None:
        self._size_of = size_of
        self._env, self._default_mb = env, default_mb
        self._budget = budget
        self._lock = threading.Lock()
        self._values: OrderedDict[str, tuple[Value, int]] = OrderedDict()
        self._held = 0

    @property
    def budget(self) -> int:
        return budget_bytes(self._env, self._default_mb) if self._budget is None else self._budget

    @property
    def held(self) -> int:
        """Bytes held now (the sum of the values' sizes)."""
        return self._held

    def __len__(self) -> int:
        return len(self._values)

    def get(self, key: str) -> Value | None:
        """The value stored under ``key`` (now the most recently used), or ``None``."""
        with self._lock:
            found = self._values.get(key)
            if found is None:
                return None
            self._values.move_to_end(key)
            return found[0]

    def fits(self, value: Value) -> tuple[bool, int, int]:
        """Whether ``value`` alone fits the budget, its size and the budget (measured outside the lock)."""
        size, budget = self._size_of(value), self.budget
        return size <= budget, size, budget

    def put(self, key: str, value: Value) -> Value:
        """Store ``value`` under ``key``, evicting least recently used values until the budget holds it.

        Raises
        ------
        ResourceError
            When ``value`` alone is larger than the budget (nothing is evicted then).
        """
        fits, size, budget = self.fits(value)
        if not fits:
            raise ResourceError(f"it takes {size / 2**20:,.0f} MB, more than the cache's budget "
                                f"({budget / 2**20:,.0f} MB, {self._env})")
        self._store(key, value, size, budget)
        return value

    def keep_if_fits(self, key: str, value: Value) -> bool:
        """:meth:`put` when ``value`` alone fits the budget (measured once); else nothing is stored.

        Returns
        -------
        bool
            Whether ``value`` was stored.
        """
        fits, size, budget = self.fits(value)
        if fits:
            self._store(key, value, size, budget)
        return fits

    def _store(self, key: str, value: Value, size: int, budget: int) -> None:
        """Store ``value`` (``size`` bytes) under ``key``, evicting least recently used values to stay in ``budget``."""
        evicted = []
        with self._lock:
            old = self._values.pop(key, None)
            if old is not None:
                self._held -= old[1]
            while self._values and self._held + size > budget:
                _, (dropped, held) = self._values.popitem(last=False)
                self._held -= held
                evicted.append(dropped)
            self._values[key] = (value, size)
            self._held += size
        del evicted  # the evicted values are freed here, outside the lock

    def clear(self) -> None:
        with self._lock:
            self._values.clear()
            self._held = 0


class TableCache(BoundedCache[pd.DataFrame]):
    """The parsed tables, keyed by their file's SHA-256 (:data:`CACHE_ENV` megabytes of :func:`table_bytes`)."""

    def __init__(self, budget: int | None = None) -> None:
        super().__init__(table_bytes, budget=budget)

    def put(self, key: str, value: pd.DataFrame) -> pd.DataFrame:
        """Store a parsed table; one larger than the whole budget is refused with the limit named."""
        fits, size, budget = self.fits(value)
        if not fits:
            raise ResourceError(f"the parsed table takes {size / 2**20:,.0f} MB, more than the app's table cache "
                                f"({budget / 2**20:,.0f} MB, {CACHE_ENV}); upload fewer rows or columns, or raise "
                                f"{CACHE_ENV}")
        self._store(key, value, size, budget)
        return value
