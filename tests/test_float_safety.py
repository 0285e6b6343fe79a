"""Floating-point exposure is declared truthfully, both ways (issue: reliability and security, item 2).

A mechanism whose spec says ``floating_point_exposure is None`` claims that every noise draw is exact
integer noise (discrete Laplace as a difference of geometrics).  It must then run to the end on a
generator whose continuous samplers raise.  A mechanism that declares an exposure must actually draw
continuous noise (so the app's warning is not stale).  ``random()`` and ``integers()`` stay allowed:
they are used for post-processing (sampling rows inside released cells) and by the geometric sampler.
``standard_exponential`` is allowed in one place only, :func:`privsyn_core.privacy.noise.geometric_minus_one`,
which computes numpy's own geometric draws from it (the same integers bit for bit, tests/test_noise.py).
"""

from __future__ import annotations

import sys

import numpy as np
import pytest

import privsyn_core as ps
from privsyn_core.data.datasets import two_blobs
from privsyn_core.privacy.accounting import ledger_total
from privsyn_core.privacy.noise import geometric_minus_one

CONTINUOUS_SAMPLERS = ("laplace", "exponential", "standard_exponential", "normal", "standard_normal", "gumbel",
                       "logistic", "standard_cauchy", "standard_t", "gamma", "standard_gamma")


class ContinuousNoiseDrawn(AssertionError):
    """A continuous sampler was called."""


def _forbidden(name: str):
    def sampler(self, *args, **kwargs):
        if name == "standard_exponential" and sys._getframe(1).f_code is geometric_minus_one.__code__:
            return np.random.Generator.standard_exponential(self, *args, **kwargs)
        raise ContinuousNoiseDrawn(name)
    return sampler


#: A Generator whose continuous samplers raise; ``spawn`` keeps the subclass, so children inherit it.
IntegerOnlyGenerator = type("IntegerOnlyGenerator", (np.random.Generator,),
                            {name: _forbidden(name) for name in CONTINUOUS_SAMPLERS})

PRIVATE = [s for s in ps.list_mechanisms() if s.is_private]


def _data(spec: ps.MechanismSpec):
    if spec.data_kind == "boolean":
        X = (np.random.default_rng(0).random((400, 6)) < 0.3).astype(int)
        return X, ps.Schema.from_dict({"columns": [{"name": f"x{j}", "kind": "numeric", "lo": 0, "hi": 1,
                                                    "integer": True} for j in range(6)]})
    d = spec.max_dim or 3  # three columns: marginal_tree selects its tree (its Gumbel draws) only from d = 3
    return two_blobs(400, d, rng=0), ps.unit_schema(d)


def _run(spec: ps.MechanismSpec, params: dict | None = None):
    X, schema = _data(spec)
    return ps.synthesize(X, spec.name, 1.0, schema=schema, rng=IntegerOnlyGenerator(np.random.PCG64(0)),
                         **(params or {}))


@pytest.mark.parametrize("spec", [s for s in PRIVATE if s.floating_point_exposure is None], ids=lambda s: s.name)
def test_mechanisms_declared_safe_draw_no_continuous_noise(spec):
    result = _run(spec)
    assert len(result.data) > 0 and ledger_total(result.ledger) == 1.0


@pytest.mark.parametrize("spec", [s for s in PRIVATE if s.floating_point_exposure], ids=lambda s: s.name)
def test_mechanisms_declared_exposed_do_draw_continuous_noise(spec):
    """Run with the audit case's parameters, which exercise the private machinery the declaration is about
    (marginal_tree's tree selection; on 2-3 numeric columns its default releases the joint with psmm instead)."""
    with pytest.raises(ContinuousNoiseDrawn):
        _run(spec, dict(spec.audit.params) if spec.audit is not None else None)


def test_the_forbidding_generator_forbids_and_its_children_inherit_it():
    rng = IntegerOnlyGenerator(np.random.PCG64(1))
    for generator in (rng, *rng.spawn(2)):
        with pytest.raises(ContinuousNoiseDrawn):
            generator.laplace(0.0, 1.0)
        assert generator.geometric(0.5) >= 1 and 0 <= generator.random() < 1
        with pytest.raises(ContinuousNoiseDrawn):
            generator.standard_exponential(3)  # allowed inside geometric_minus_one only
        draws = np.empty(3, dtype=np.int64)
        geometric_minus_one(draws, 0.1, generator)
        assert (draws >= 0).all()
