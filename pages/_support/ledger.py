"""The app's view of the library's privacy ledger (:class:`privsyn_core.privacy.budget.PrivacyLedger`).

One file for the app, the CLI and scripts, named by the library (:func:`privsyn_core.privacy.budget.default_path`):
``$PRIVSYN_LEDGER``, else ``ledger.sqlite`` in the data folder (``$PRIVSYN_DATA_DIR``, else
``~/.local/share/privsyn/``), which also holds the uploads.  A ledger left at ``app-data/ledger.sqlite`` next to
``app.py`` (:data:`EARLIER_DEFAULT`) refuses the default ledger until the operator points at it or moves it
(:func:`privsyn_core.privacy.budget.check_earlier_default`).  An uploaded table is identified by its
records (:func:`pages._support.data_state.ledger_id`: the CLI's ``budget set DATA.csv --schema S.json`` names
the same dataset), or by the operator's ``PRIVSYN_DATASET``; a bundled sample gets a ledger per browser session,
so a classroom does not share one list.  A run and DP bounds reserve their epsilon through the library's release
path (:func:`privsyn_core.synthesize` and :func:`privsyn_core.dp_bounds` with :func:`store`), in one transaction
that checks the budget, before the mechanism draws anything.  On a release-only server the budget is the operator's
(``PRIVSYN_BUDGET`` or ``python -m privsyn_core budget set``) and a release with no budget at all is refused;
a session can only tighten a budget (:func:`tighten_budget`).  Nothing here is shown in release mode but
totals, labels and epsilons; the data's hash is the key, never displayed.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from privsyn_core.privacy.budget import (
    DATA_DIR_ENV,
    LEDGER_ENV,
    LEDGER_FILE,
    BudgetExceeded,
    LedgerError,
    PrivacyLedger,
    check_earlier_default,
    data_folder,
    default_path,
    environment_budget,
)

from .state import release_locked

#: Where the app kept its ledger by default before the library named one default for every door.
EARLIER_DEFAULT = Path(__file__).resolve().parents[2] / "app-data" / LEDGER_FILE

__all__ = ["BudgetExceeded", "LedgerError", "DATA_DIR_ENV", "EARLIER_DEFAULT", "data_dir", "path", "store", "ensure",
           "one_connection", "spends", "count", "totals", "budget", "budget_owner", "known", "set_budget",
           "tighten_budget"]


def data_dir() -> Path:
    """The data folder of the app and the CLI (the ledger by default, the uploads)."""
    return data_folder()


def path() -> Path:
    """The ledger's file; refused while the app's earlier default holds a ledger (:data:`EARLIER_DEFAULT`)."""
    check_earlier_default(EARLIER_DEFAULT)
    return default_path()


_STORES: dict[tuple[str, bool], PrivacyLedger] = {}


def store() -> PrivacyLedger:
    """The ledger of the current data folder (one object per file and mode per process; it is thread-safe).

    Its default budget is re-read from ``PRIVSYN_BUDGET`` on each call, so a test or an operator changing the
    environment is followed.
    """
    key = (str(path()), release_locked())
    found = _STORES.get(key)
    if found is None:
        # the data folder's ledger is made on the folder's first use; one named by PRIVSYN_LEDGER must exist
        found = _STORES[key] = PrivacyLedger(key[0], require_budget=key[1], first_use=not os.environ.get(LEDGER_ENV))
    else:
        found.default_budget = environment_budget()
    return found


def ensure() -> None:
    """Make the ledger exist before anything else is written to the data folder (an empty folder's first use),
    and refuse to go on when it was removed (a data folder holding uploads but no ledger)."""
    store().ensure()


@contextmanager
def one_connection() -> Iterator[None]:
    """Let the ledger calls of this thread inside the block (a script run) share one connection.

    A ledger that cannot be opened (missing after it existed, empty, damaged) shares nothing: the block runs,
    and every ledger call in it raises the ledger's one-sentence :class:`~privsyn_core.errors.LedgerError`,
    which the sidebar and the Run button show (every release refused) instead of Streamlit's error page.
    """
    try:
        scope = store().shared_connection()
        scope.__enter__()
    except LedgerError:
        yield
        return
    try:
        yield
    finally:
        scope.__exit__(None, None, None)


def spends(data: str, *, last: int | None = None, private: bool | None = None) -> list[dict]:
    """The dataset's spends (as dicts), oldest first: every one or the ``last`` ones."""
    return [dataclasses.asdict(e) for e in store().spends(data, last=last, private=private)]


def count(data: str, *, private: bool | None = None) -> int:
    return store().count(data, private=private)


def totals(data: str) -> dict[str, float]:
    return store().totals(data)


def budget(data: str) -> float | None:
    return store().budget(data)


def budget_owner(data: str) -> str | None:
    return store().budget_owner(data)


def known(data: str, run_key: str | None) -> bool:
    return store().known(data, run_key)


def set_budget(data: str, epsilon: float | None) -> None:
    """Set or remove a budget: only for a ledger the session owns (a bundled sample's, per session)."""
    store().set_budget(data, epsilon)


def tighten_budget(data: str, epsilon: float) -> float:
    """Lower (or set where none is) the dataset's budget: all a session may do on shared data."""
    return store().tighten_budget(data, epsilon)
