"""``python -m privsyn_core``: see :mod:`privsyn_core.cli`."""

import sys

from .cli import main

sys.exit(main())
