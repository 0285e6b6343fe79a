"""``python -m privsyn_core`` and the ``privsyn`` console script: see :mod:`privsyn_core.cli`.

SIGINT and SIGTERM end the command with one line and exit 130 or 143 from the start: handlers are installed
here, before :mod:`privsyn_core.cli` loads numpy and pandas (about a second), and nothing has been written
yet then.  Once :func:`privsyn_core.cli.main` runs, its own handlers also remove unfinished files.
"""

from __future__ import annotations

import signal
import sys
from types import FrameType


def _interrupted_while_starting(signum: int, frame: FrameType | None) -> None:
    print(f"error: interrupted ({signal.Signals(signum).name}) while starting; nothing was written",
          file=sys.stderr)
    raise SystemExit(128 + signum)


for _signal in (signal.SIGINT, signal.SIGTERM):
    signal.signal(_signal, _interrupted_while_starting)

from privsyn_core.cli import main  # noqa: E402  (after the handlers: this import takes about a second)


def run() -> None:
    """Entry point of the ``privsyn`` console script: exit with :func:`privsyn_core.cli.main`'s status.

    A console script's exit status is its function's return value only if that is ``None`` or raised as
    ``SystemExit``; ``main`` returns an int (0, or 2 on bad input), so it is raised here.
    """
    raise SystemExit(main())


if __name__ == "__main__":
    run()
