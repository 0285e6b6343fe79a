r"""The :math:`\ell_1` sensitivity of a histogram under each neighbouring relation.

A histogram counts the records in disjoint cells.  Under add/remove, neighbouring tables differ by
one record, present in one and absent from the other: one count changes by 1, so the
:math:`\ell_1` sensitivity is 1.  Under replace-one, one record of a table of public size ``n`` is
changed: it leaves one cell and enters another, so two counts change by 1 and the sensitivity is 2
(Dwork and Roth, "The Algorithmic Foundations of Differential Privacy", 2014, Section 3.3; He,
Vershynin and Zhu, "Algorithmically effective differentially private synthetic data", 2023, Thm 4.1
and its replace-one variant).  The Laplace mechanism then adds noise of scale ``sensitivity/epsilon``
to every count.
"""

from __future__ import annotations

from privsyn_core.errors import ParameterError

#: Sensitivity of a histogram's counts per neighbouring relation (the keys are the relations
#: :data:`privsyn_core.registry.NEIGHBOURING` names).
COUNT_SENSITIVITY = {"add_remove": 1, "replace": 2}


def count_sensitivity(neighbouring: str) -> int:
    r"""The :math:`\ell_1` sensitivity of a histogram: 1 under add/remove, 2 under replace-one.

    Parameters
    ----------
    neighbouring : {"add_remove", "replace"}

    Returns
    -------
    int
        ``max ||h(D) - h(D')||_1`` over neighbouring tables ``D, D'``, for the counts ``h`` over any
        partition of the domain into cells.

    Raises
    ------
    ParameterError
        For any other relation.
    """
    try:
        return COUNT_SENSITIVITY[neighbouring]
    except (KeyError, TypeError):
        raise ParameterError(f"neighbouring must be 'replace' or 'add_remove', got {neighbouring!r}") from None


__all__ = ["COUNT_SENSITIVITY", "count_sensitivity"]
