"""``python -m privsyn_core`` and the ``privsyn`` console script: see :mod:`privsyn_core.cli`."""

from __future__ import annotations

from privsyn_core.cli import main


def run() -> None:
    """Entry point of the ``privsyn`` console script: exit with :func:`privsyn_core.cli.main`'s status.

    A console script's exit status is its function's return value only if that is ``None`` or raised as
    ``SystemExit``; ``main`` returns an int (0, or 2 on bad input), so it is raised here.
    """
    raise SystemExit(main())


if __name__ == "__main__":
    run()
