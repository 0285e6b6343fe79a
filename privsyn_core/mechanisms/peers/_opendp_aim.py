"""OpenDP 0.16's AIM with its last round spending the budget's remainder, as AIM's Algorithm 1 does.

McKenna, Mullins, Sheldon, Miklau, "AIM: an adaptive and iterative mechanism for
differentially private synthetic data", PVLDB 2022, Alg. 1: when the remaining budget is too small for two
more rounds, the last round is given all of it, after which nothing remains.  OpenDP 0.16
(``opendp.extras.mbi._aim``, ``AIM.make_marginals``) clips the last round to ``prior(d_out - d_spent)``; its
compositor then records a spent budget a few ulps below ``d_out`` (each round's measurement is calibrated by
binary search to at most its share), and the loop starts one more round with that residue (about 5e-17 at
epsilon 1).  Such a round's selection budget rounds to 0, ``make_noisy_max`` is asked for a negative scale and
the whole release fails ("scale (-0.5) must not be finite and non-negative"), which happened on most tables of
three or more columns.

``FinishingAIM`` is OpenDP's ``AIM.make_marginals`` (same steps, same calls, MIT licence) with one change:
the loop ends once the remainder is at most :data:`RESIDUE` of the budget.  That spends at most what OpenDP's
loop spends (its privacy filter still enforces ``d_out``), so the guarantee is unchanged; what is left unspent
is below ``RESIDUE * epsilon``.  OpenDP is imported when the class is first built (:func:`finishing_aim_class`,
inside a peer run), so this module imports without it.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, replace
from typing import Any, cast

#: A remainder of the rounds' budget at most this share of it is a rounding residue, not a round.
RESIDUE = 1e-9


def finishing_aim() -> Any:
    """A new ``FinishingAIM`` (:func:`finishing_aim_class`) with OpenDP's default settings."""
    return finishing_aim_class()()


@functools.cache
def finishing_aim_class() -> type:
    """OpenDP's ``AIM`` whose rounds stop once the remainder is a rounding residue (module docstring).

    Built once, on first use: it subclasses OpenDP's class, so it imports OpenDP.
    """
    from opendp._internal import _new_pure_function
    from opendp.combinators import make_fully_adaptive_composition, make_privacy_filter
    from opendp.extras.mbi import AIM, _aim
    from opendp.extras.mbi._utilities import get_associated_metric, make_stable_marginals, prior

    @dataclass(kw_only=True, frozen=True)
    class FinishingAIM(AIM):
        """OpenDP's AIM whose rounds stop once the remainder is a rounding residue (module docstring)."""

        def make_marginals(self, input_domain: Any, input_metric: Any, output_measure: Any, d_in: Any,
                           d_out: float, *, marginals: Any, model: Any) -> Any:
            """OpenDP 0.16's ``AIM.make_marginals`` with the residue guard on the budget of the next round."""
            queries = _aim._expand_queries(self.queries, input_domain.columns)
            algorithm = replace(cast(AIM, self), queries=queries)
            t_marginals = make_stable_marginals(input_domain, input_metric, get_associated_metric(output_measure),
                                                [query.by for query in queries])
            d_marginals = t_marginals.map(d_in)
            rounds = algorithm.rounds or 16 * len(input_domain.columns)

            def function(qbl: Any) -> tuple[Any, Any]:
                current_model, current_marginals = model, marginals.copy()
                d_step, d_spent = d_out / rounds, 0.0
                while d_step:
                    m_step = _aim._make_aim_marginal(*t_marginals.output_space, output_measure, d_marginals, d_step,
                                                     marginals=current_marginals, model=current_model,
                                                     max_size=algorithm.max_size * (d_spent + d_step) / d_out,
                                                     algorithm=algorithm)
                    if not m_step:
                        break
                    current_marginals, current_model, is_significant = cast(tuple[Any, Any, bool], qbl(m_step))
                    if not is_significant:
                        d_step *= 4
                    d_spent = qbl.privacy_loss(d_marginals)
                    remaining = d_out - d_spent
                    d_step = min(d_step, max(prior(remaining), 0)) if remaining > RESIDUE * d_out else 0
                return current_marginals, current_model

            return (t_marginals
                    >> make_privacy_filter(make_fully_adaptive_composition(*t_marginals.output_space, output_measure),
                                           d_in=d_marginals, d_out=d_out)
                    >> _new_pure_function(function))

    return FinishingAIM
