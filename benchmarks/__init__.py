"""Benchmarks: scripts that print figures (speed lives here, not in timed tests).

Run them as modules from the repository root, e.g. ``python -m benchmarks.bench_pmm``: the root is then on
``sys.path`` (``benchmarks`` and ``privsyn_core`` both import, installed or not), so no script edits ``sys.path``.
"""
