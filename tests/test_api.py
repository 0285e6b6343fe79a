"""The public API contract, checked for every registered mechanism."""

import dataclasses
import math

import numpy as np
import pandas as pd
import pytest

import privsyn_core as ps
from privsyn_core import Column, ParameterError, Schema
from privsyn_core.privacy.accounting import ledger_total, split_epsilon

CONTRACT_KEYS = {"pmm", "psmm", "srw", "srw_tsp", "kd_grid", "kd_adaptive", "microagg_anon", "microagg_dp",
                 "laplace_points", "dp_histogram", "bootstrap"}
MECHANISMS = [s.name for s in ps.list_mechanisms()]
#: A mechanism run by an outside library draws its noise there: the optional OpenDP peers cannot be seeded and replay
#: only their post-processing (tests/test_peers.py).
SEEDED = [s.name for s in ps.list_mechanisms() if s.implemented_by is None]


def _table(spec: ps.MechanismSpec, n: int = 300) -> tuple[pd.DataFrame, Schema]:
    rng = np.random.default_rng(2024)
    df = pd.DataFrame({"x": rng.beta(2, 5, n), "c": rng.choice(["a", "b", "c"], n), "k": rng.integers(0, 5, n)})
    schema = Schema((Column("x", "numeric", lo=0, hi=1), Column("c", "categorical", categories=("a", "b", "c")),
                     Column("k", "numeric", lo=0, hi=4, integer=True)))
    if spec.max_dim is not None and spec.max_dim < 3:
        return df[["x"]], schema.select(["x"])
    if spec.data_kind == "boolean":  # Boolean-only mechanisms take 0/1 and two-category columns only
        df = pd.DataFrame({"b": (df["x"] > 0.3).astype(np.int64), "c": rng.choice(["a", "b"], n)})
        return df, Schema((Column("b", "numeric", lo=0, hi=1, integer=True),
                           Column("c", "categorical", categories=("a", "b"))))
    return df, schema


#: The contract's public names: attributes of the package (``ps.metrics`` included), whatever module they live in.
CONTRACT_NAMES = ("synthesize", "Schema", "list_mechanisms", "MechanismSpec", "SynthResult", "metrics")


def test_every_public_name_is_an_attribute_of_the_package():
    assert set(CONTRACT_NAMES) <= set(ps.__all__)
    for name in ps.__all__:
        assert name in dir(ps) and getattr(ps, name) is not None, name
    assert all(callable(getattr(ps.metrics, f)) for f in ("w1", "mmd", "marginal_tvd", "evaluate"))
    from privsyn_core import metrics

    assert metrics is ps.metrics and ps.metrics.__name__ == "privsyn_core.metrics"
    assert all(isinstance(spec, ps.MechanismSpec) for spec in ps.list_mechanisms())
    assert callable(ps.synthesize) and callable(ps.Schema.infer) and callable(ps.SynthResult.release)
    with pytest.raises(AttributeError):
        ps.no_such_name


def test_registry_lists_only_contract_keys_with_complete_specs():
    assert {"laplace_points", "dp_histogram", "bootstrap"} <= set(MECHANISMS)
    assert set(MECHANISMS) >= CONTRACT_KEYS  # the contract's keys exist; new mechanisms may join
    for spec in ps.list_mechanisms():
        assert spec.title and spec.paper and spec.guarantee and spec.description
        assert spec.data_kind in ("continuous", "boolean")
        assert set(spec.neighbouring) <= {"replace", "add_remove"} and spec.neighbouring
        for name, param in spec.params.items():
            assert param.help, f"{spec.name}.{name} has no help text"
            assert param.coerce(name, param.default) == param.default


@pytest.mark.parametrize("name", MECHANISMS)
def test_every_mechanism_honours_the_contract(name):
    spec = ps.get_mechanism(name)
    df, schema = _table(spec)
    for relation in spec.neighbouring:
        result = ps.synthesize(df, name, 0.7, schema=schema, neighbouring=relation, rng=5)
        assert isinstance(result, ps.SynthResult)
        assert list(result.data.columns) == list(df.columns)
        assert dict(result.data.dtypes) == dict(df.dtypes), "synthetic dtypes must match the input's"
        if spec.is_private:
            assert math.fsum(e for _, e in result.ledger) == 0.7 == result.epsilon
            assert result.dp_valid is True
        else:
            assert result.dp_valid is False and result.epsilon == math.inf
        assert result.neighbouring == relation and result.params["seed"] == 5
        assert set(result.params) >= set(spec.params)
        assert {"encode", "mechanism", "decode"} <= set(result.timings)
        assert result.unit.ndim == 2
        if result.weights is not None:
            assert result.weights.shape == (len(result.unit),) and np.all(result.weights >= 0)
        assert len(result.unit_rows) == len(result.data)


@pytest.mark.parametrize("name", SEEDED)
def test_same_seed_same_output_and_n_synthetic(name):
    spec = ps.get_mechanism(name)
    df, schema = _table(spec)
    a = ps.synthesize(df, name, 1.0, schema=schema, rng=11, n_synthetic=37)
    b = ps.synthesize(df, name, 1.0, schema=schema, rng=11, n_synthetic=37)
    pd.testing.assert_frame_equal(a.data, b.data)
    assert len(a.data) == 37


@pytest.mark.parametrize("kwargs, message", [
    (dict(mechanism="nope", epsilon=1), "unknown mechanism"),
    (dict(mechanism="dp_histogram", epsilon=0), "epsilon"),
    (dict(mechanism="dp_histogram", epsilon=float("nan")), "epsilon"),
    (dict(mechanism="dp_histogram", epsilon="abc"), "epsilon"),
    (dict(mechanism="dp_histogram", epsilon=1, bins=0), "bins"),
    (dict(mechanism="dp_histogram", epsilon=1, bins=2.5), "bins"),
    (dict(mechanism="dp_histogram", epsilon=1, sample="everywhere"), "sample"),
    (dict(mechanism="dp_histogram", epsilon=1, depth=3), "no parameter"),
    (dict(mechanism="laplace_points", epsilon=1, neighbouring="add_remove"), "neighbouring"),
    (dict(mechanism="dp_histogram", epsilon=1, n_synthetic=0), "n_synthetic"),
])
def test_bad_arguments_raise_parameter_errors(kwargs, message):
    with pytest.raises(ParameterError, match=message):
        ps.synthesize(np.random.default_rng(0).random((20, 2)), schema=ps.unit_schema(2), **kwargs)


def test_parameters_from_strings_are_coerced():
    result = ps.synthesize(np.random.default_rng(0).random((50, 2)), "dp_histogram", "0.5",
                           schema=ps.unit_schema(2), bins="4", sample="center", rng=0)
    assert result.params["bins"] == 4 and result.epsilon == 0.5


@pytest.mark.parametrize("epsilon", [1.0, 0.1, 1 / 3, 7.77, 1e-3])
@pytest.mark.parametrize("parts", [[1, 1, 1], [1, 2], [0.3, 0.3, 0.4], [1, 1, 1, 1, 1, 1, 1]])
def test_split_epsilon_sums_exactly(epsilon, parts):
    ledger = split_epsilon(epsilon, [(f"s{i}", f) for i, f in enumerate(parts)])
    assert ledger_total(ledger) == epsilon


def test_report_is_json_serialisable():
    import json

    result = ps.synthesize(np.random.default_rng(0).random((50, 2)), "dp_histogram", 1.0,
                           schema=ps.unit_schema(2), rng=3)
    report = json.loads(json.dumps(result.report()))
    assert report["mechanism"] == "dp_histogram" and report["params"]["seed"] == 3
    assert math.fsum(e for _, e in report["ledger"]) == 1.0


@pytest.mark.parametrize("name", [s.name for s in ps.list_mechanisms() if s.max_dim is not None])
def test_max_dim_is_enforced_before_the_mechanism_runs(name):
    """A table one column wider than ``MechanismSpec.max_dim`` is a ParameterError naming the limit (the peers
    included: the check runs before OpenDP would be imported)."""
    spec = ps.get_mechanism(name)
    d = spec.max_dim + 1
    data = np.random.default_rng(0).random((50, d))
    with pytest.raises(ParameterError, match=rf"{name} works on at most {spec.max_dim} encoded column\(s\), "
                                             rf"this table has {d}; use [^\[\]']+$"):
        ps.synthesize(data, name, 1.0, schema=ps.unit_schema(d), rng=0)


def test_too_wide_names_the_alternatives_in_words():
    """Issue 38, item 3: the mechanisms to use instead as words, never a Python list; none is said so."""
    spec = ps.get_mechanism("srw")
    said = spec.too_wide(2)
    wider = [s.name for s in ps.list_mechanisms() if s.is_private and s.data_kind == spec.data_kind
             and (s.max_dim is None or s.max_dim >= 2)]
    assert len(wider) >= 2 and "[" not in said and "'" not in said
    assert said.startswith(f"works on at most 1 encoded column(s), this table has 2; use one of {wider[0]}, ")
    nowhere = dataclasses.replace(spec, data_kind="no such kind")
    assert nowhere.too_wide(2).endswith("; no registered private mechanism of this data kind takes 2 columns")
    assert spec.too_wide(1) is None


def test_one_fit_check_serves_the_api_and_the_app():
    """Issue 26, item 2: ``MechanismSpec.accepts`` is the single fit check (the app's offer reads it too)."""
    from pages._support import offer

    schema = ps.unit_schema(3)
    spec = ps.get_mechanism("microagg_dp")
    reason = spec.accepts(schema)
    assert reason is not None and "works on Boolean columns only" in reason
    assert offer.split([spec], schema)[1] == {"microagg_dp": reason}
    with pytest.raises(ps.SchemaError) as refused:
        ps.synthesize(np.random.default_rng(0).random((50, 3)), "microagg_dp", 1.0, schema=schema)
    assert str(refused.value).splitlines()[0] == reason, "the same sentence in the app and from the API"
    wide = ps.get_mechanism("srw")
    assert wide.accepts(ps.unit_schema(2)).startswith("works on at most 1 encoded column(s)")
    assert ps.get_mechanism("pmm").accepts(schema) is None


def test_specs_carry_their_order_citation_and_released_geometry():
    names = [s.name for s in ps.list_mechanisms()]
    assert names[:4] == ["pmm", "psmm", "srw", "srw_tsp"] and names.index("bootstrap") < names.index("marginal_tree")
    drawn = {s.name for s in ps.list_mechanisms() if s.released_geometry is not None}
    assert {"pmm", "psmm", "kd_grid", "dp_histogram", "srw", "srw_tsp"} <= drawn


@pytest.mark.parametrize("spec", [s for s in ps.list_mechanisms() if s.released_geometry is not None],
                         ids=lambda s: s.name)
def test_released_geometry_is_drawn_from_the_release_alone(spec):
    """Every mechanism that declares a ``released_geometry`` (a new one included) gives the Partitions or TSP view
    cells or a path inside the unit cube, from its ``Release``: no name dispatch anywhere else."""
    from privsyn_core.reporting import plot_data

    d = min(2, spec.max_dim or 2)
    release = ps.synthesize(np.random.default_rng(1).random((400, d)), spec.name, 2.0, schema=ps.unit_schema(d),
                            rng=0).release()
    cells, path = plot_data.released_partition(release), plot_data.released_path(release)
    assert (cells is None) != (path is None)
    if cells is not None:
        lo, hi = np.asarray(cells["cells"]["lo"]), np.asarray(cells["cells"]["hi"])
        assert lo.shape == hi.shape and lo.shape[1] == d and (lo >= 0).all() and (hi <= 1).all() and (lo <= hi).all()
        assert len(cells["cells"]["count"]) == len(lo)
    else:
        assert path.shape[1] == d and (path >= 0).all() and (path <= 1).all()
