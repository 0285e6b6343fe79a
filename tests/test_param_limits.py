"""``ParamSpec.limit``: the largest value a size parameter takes is the one the mechanism accepts.

The app caps a size widget at ``limit(d)`` (``pages/_support/widgets.py``); these tests check, for every
registered parameter that declares a limit, that the mechanism refuses ``limit + 1`` with a one-line error and
accepts the limit itself where that is cheap to run (small limits: a low memory budget, wide tables).
"""

from __future__ import annotations

import numpy as np
import pytest

import privsyn_core as ps
from privsyn_core.data.grid import largest_per_axis
from privsyn_core.errors import PrivsynError
from privsyn_core.registry import get_mechanism


def limited_params() -> list[tuple[str, str]]:
    return [(spec.name, name) for spec in ps.list_mechanisms() for name, p in spec.params.items()
            if p.limit is not None]


def table(d: int, n: int = 400) -> tuple[np.ndarray, dict]:
    schema = {"columns": [{"name": f"x{i}", "kind": "numeric", "lo": 0, "hi": 1} for i in range(d)]}
    return np.random.default_rng(3).random((n, d)), schema


def test_the_size_parameters_declare_their_limits():
    assert set(limited_params()) >= {("pmm", "depth"), ("psmm", "cells_per_axis"), ("dp_histogram", "bins"),
                                     ("srw_tsp", "bins"), ("lowdim_pmm", "depth")}


@pytest.mark.parametrize("mechanism,param", limited_params())
@pytest.mark.parametrize("d", [3, 6])
def test_one_past_the_limit_is_refused_in_one_line(mechanism, param, d, monkeypatch):
    monkeypatch.setenv("PRIVSYN_MEMORY_BUDGET_MB", "1")
    spec = get_mechanism(mechanism)
    largest, reason = spec.params[param].limit(d)
    assert largest >= 1 and reason
    data, schema = table(d)
    with pytest.raises(PrivsynError) as refused:
        ps.synthesize(data, mechanism, 1.0, schema=schema, rng=0, n_synthetic=10, **{param: largest + 1})
    assert "\n" not in str(refused.value)


@pytest.mark.parametrize("mechanism,param,d", [("pmm", "depth", 2), ("psmm", "cells_per_axis", 6),
                                               ("dp_histogram", "bins", 6), ("srw_tsp", "bins", 6)])
def test_the_limit_itself_is_accepted(mechanism, param, d, monkeypatch):
    monkeypatch.setenv("PRIVSYN_MEMORY_BUDGET_MB", "1")
    largest, _ = get_mechanism(mechanism).params[param].limit(d)
    data, schema = table(d)
    result = ps.synthesize(data, mechanism, 1.0, schema=schema, rng=0, n_synthetic=10, **{param: largest})
    assert len(result.data) == 10


@pytest.mark.parametrize("cells,d", [(1, 3), (7, 1), (8, 3), (2_000_000, 2), (2_000_000, 3), (2**21, 6), (10**18, 3)])
def test_largest_per_axis_is_the_exact_integer_root(cells, d):
    k = largest_per_axis(cells, d)
    assert k ** d <= cells or k == 1
    assert (k + 1) ** d > cells
