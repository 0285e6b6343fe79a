"""One module per mechanism; each registers itself with :func:`privsyn_core.mechanisms.base.spec.register`.

Modules here are discovered automatically by :func:`privsyn_core.list_mechanisms`.
"""
