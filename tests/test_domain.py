"""Schema: public domains, JSON round trip, encoding/decoding, clear errors."""

import json

import numpy as np
import pandas as pd
import pytest

import privsyn_core as ps
from privsyn_core import Column, DataError, Schema, SchemaError


@pytest.fixture
def mixed():
    rng = np.random.default_rng(0)
    return pd.DataFrame({
        "age": rng.integers(18, 90, 200),
        "income": rng.uniform(0, 1e5, 200),
        "city": rng.choice(["Oslo", "Lima", "Pune"], 200),
        "member": rng.random(200) < 0.3,
    })


@pytest.fixture
def mixed_schema():
    return Schema((Column("age", "numeric", lo=0, hi=120, integer=True),
                   Column("income", "numeric", lo=0, hi=2e5),
                   Column("city", "categorical", categories=("Lima", "Oslo", "Pune")),
                   Column("member", "categorical", categories=(False, True))))


def test_encode_decode_round_trip(mixed, mixed_schema):
    unit, clipped = mixed_schema.encode(mixed)
    assert unit.shape == (200, 4) and unit.min() >= 0 and unit.max() <= 1
    assert clipped == {"age": 0, "income": 0}
    back = mixed_schema.decode(unit)
    assert list(back.columns) == list(mixed.columns)
    np.testing.assert_array_equal(back["age"], mixed["age"])
    np.testing.assert_allclose(back["income"], mixed["income"], rtol=1e-12)
    np.testing.assert_array_equal(back["city"].astype(str), mixed["city"].astype(str))
    np.testing.assert_array_equal(back["member"], mixed["member"])


def test_categories_encode_to_cell_centres(mixed_schema):
    unit, _ = mixed_schema.select(["city"]).encode(pd.DataFrame({"city": ["Lima", "Oslo", "Pune"]}))
    np.testing.assert_allclose(unit[:, 0], [1 / 6, 3 / 6, 5 / 6])


def test_json_round_trip(mixed_schema):
    text = json.dumps(mixed_schema.to_dict())
    again = Schema.from_dict(json.loads(text))
    assert again == mixed_schema
    assert again.dp_valid


def test_infer_marks_domain_not_private(mixed):
    schema = Schema.infer(mixed)
    assert not schema.dp_valid
    assert schema["age"].integer and schema["age"].lo == mixed["age"].min()
    assert schema["city"].categories == ("Lima", "Oslo", "Pune")
    result = ps.synthesize(mixed, "dp_histogram", 1.0, rng=0)
    assert result.dp_valid is False
    assert any("not differentially private" in w for w in result.warnings)


def test_clipping_counts_rows_outside_bounds():
    schema = Schema((Column("x", "numeric", lo=0, hi=1),))
    unit, clipped = schema.encode(pd.DataFrame({"x": [-5.0, 0.5, 1.0, 7.0]}))
    np.testing.assert_array_equal(unit[:, 0], [0.0, 0.5, 1.0, 1.0])
    assert clipped == {"x": 2}


@pytest.mark.parametrize("column", [
    dict(name="x", kind="numeric", lo=1, hi=1),
    dict(name="x", kind="numeric", lo=2, hi=1),
    dict(name="x", kind="numeric", lo=0, hi=float("inf")),
    dict(name="x", kind="numeric", lo="a", hi=1),
    dict(name="x", kind="categorical", categories=()),
    dict(name="x", kind="categorical", categories=("a", "a")),
    dict(name="x", kind="ordinal"),
    dict(name="", kind="numeric", lo=0, hi=1),
])
def test_bad_columns_are_schema_errors(column):
    with pytest.raises(SchemaError):
        Column(**column)


def test_schema_level_errors():
    with pytest.raises(SchemaError, match="duplicate"):
        Schema((Column("x", "numeric", lo=0, hi=1), Column("x", "numeric", lo=0, hi=1)))
    with pytest.raises(SchemaError):
        Schema(())
    with pytest.raises(SchemaError, match="unknown keys"):
        Schema.from_dict({"columns": [{"name": "x", "lo": 0, "hi": 1, "bogus": 1}]})
    with pytest.raises(SchemaError):
        Schema.from_dict({"cols": []})


@pytest.mark.parametrize("frame, message", [
    (pd.DataFrame({"x": [1.0, np.nan]}), "missing"),
    (pd.DataFrame({"x": [1.0, np.inf]}), "infinite"),
    (pd.DataFrame({"x": ["1", "two"]}), "non-numeric"),
    (pd.DataFrame({"x": []}, dtype=float), "no rows"),
    (pd.DataFrame({"y": [0.5]}), "unknown column"),
])
def test_bad_data_is_a_data_error(frame, message):
    schema = Schema((Column("x", "numeric", lo=0, hi=2),))
    with pytest.raises(DataError, match=message):
        schema.encode(frame)


def test_infer_errors():
    with pytest.raises(DataError, match="constant"):
        Schema.infer(pd.DataFrame({"x": [3.0, 3.0]}))
    with pytest.raises(DataError, match="identifier"):
        Schema.infer(pd.DataFrame({"id": [f"u{i}" for i in range(500)]}))
    dup = pd.DataFrame([[1, 2]], columns=["a", "a"])
    with pytest.raises(DataError, match="duplicate"):
        Schema.infer(dup)


def test_unknown_category_is_reported():
    schema = Schema((Column("c", "categorical", categories=("a", "b")),))
    with pytest.raises(DataError, match="outside its public categories"):
        schema.encode(pd.DataFrame({"c": ["a", "z"]}))


def test_constant_column_with_public_bounds_is_fine():
    schema = Schema((Column("x", "numeric", lo=0, hi=10), Column("y", "numeric", lo=0, hi=1)))
    df = pd.DataFrame({"x": [4.0] * 50, "y": np.linspace(0, 1, 50)})
    result = ps.synthesize(df, "dp_histogram", 1.0, schema=schema, rng=1)
    assert result.data["x"].between(0, 10).all() and result.dp_valid
