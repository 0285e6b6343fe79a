"""What every mechanism builds on, and nothing that names one: the declarations of the mechanism protocol.

* :mod:`~privsyn_core.mechanisms.base.spec`: :class:`MechanismSpec`, :class:`ParamSpec` and :func:`register`;
* :mod:`~privsyn_core.mechanisms.base.stages`: the stage protocol of count-based mechanisms (``CellCounts``,
  ``Stages``);
* :mod:`~privsyn_core.mechanisms.base.rows`: ``RowPlan``, how synthetic rows are drawn from released atoms;
* :mod:`~privsyn_core.mechanisms.base.audit`: ``AuditCase`` and the generic features of the privacy audit;
* :mod:`~privsyn_core.mechanisms.base.resources`: the memory budget.

A mechanism imports these, :mod:`privsyn_core.privacy`, :mod:`privsyn_core.data`, :mod:`privsyn_core.errors`,
:mod:`privsyn_core.result` and its own folder only (the import contracts in ``pyproject.toml``).
"""
