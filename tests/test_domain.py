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


# -- public atoms (point masses) -------------------------------------------------------------------------------
def _zero_inflated(n: int, seed: int) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    amount = np.where(rng.random(n) < 0.6, 0.0, rng.gamma(2, 20, n).clip(0, 500))
    return pd.DataFrame({"amount": amount, "x": rng.normal(50 + 0.05 * amount, 10, n).clip(0, 100)})


ATOM_SCHEMA = {"columns": [{"name": "amount", "kind": "numeric", "lo": 0, "hi": 500, "atoms": [0]},
                           {"name": "x", "kind": "numeric", "lo": 0, "hi": 100}]}


def test_atoms_round_trip_through_json_and_are_validated():
    schema = Schema.from_dict(json.loads(json.dumps(ATOM_SCHEMA)))
    assert schema["amount"].atoms == (0.0,) and Schema.from_dict(schema.to_dict()) == schema
    assert "atoms" not in schema["x"].to_dict()  # absent when there are none: old schema files are unchanged
    for bad, message in [([600], "in the bounds"), ([1, 1], "distinct"), ("0", "list"), ([True], "numbers"),
                         (list(range(17)), "at most 16")]:
        with pytest.raises(SchemaError, match=message):
            Schema.from_dict({"columns": [{**ATOM_SCHEMA["columns"][0], "atoms": bad}]})
    with pytest.raises(SchemaError, match="integers"):
        Column("k", "numeric", lo=0, hi=9, integer=True, atoms=(0.5,))
    with pytest.raises(SchemaError):
        Schema.from_dict({"columns": [{"name": "c", "kind": "categorical", "categories": ["a"], "atoms": [0]}]})


def test_an_atom_is_a_cell_of_its_own_and_decodes_to_its_exact_value():
    schema = Schema((Column("a", "numeric", lo=-1, hi=10, atoms=(10, 0, -1)),))
    unit, _ = schema.encode(pd.DataFrame({"a": [-1.0, 0.0, 10.0, 3.0, 0.5]}))
    np.testing.assert_allclose(unit.ravel(), [1 / 16, 3 / 16, 3 / 8, 0.5 + 4 / 22, 0.5 + 1.5 / 22])
    back = schema.decode(np.array([[0.01], [0.13], [0.3], [0.49], [0.5 + 4 / 22], [1.0]]))["a"].tolist()
    assert back[:4] == [-1.0, 0.0, 10.0, 10.0] and back[4] == pytest.approx(3.0) and back[5] == 10.0


@pytest.mark.parametrize("mechanism", ["pmm", "kd_grid"])
def test_a_zero_inflated_column_keeps_its_spike(mechanism):
    """60% exact zeros: without atoms the output has no zero at all; with ``atoms: [0]`` the zero share
    matches the data's within the noise of the counts that decide it.

    The atom's coordinate interval ``[0, 1/2)`` is a union of cells of both layouts (PMM's first cut on the
    axis is at 1/2; kd_grid's bins per axis here are even), so the synthetic zero share is a ratio of noisy
    released counts.  PMM: it is the level-1 count of the left half over the root count, each off by a
    discrete Laplace of scale ``sigma_j`` (sd ``<= sqrt(2) sigma_j``), so 5 sd of each (false failure about
    1e-6 each) bound the error ``|dL|/R + L |dR|/R^2 <= (|dL| + |dR|)/R`` by ``5 sqrt(2) (sigma_0 + sigma_1)/R``.
    kd_grid: the ``k`` bins of the atom's column of cells (``k^(d-1)`` bins) each move the share by at most
    the threshold ``t`` (a dropped bin) plus 5 sd of its noise, ``5 sqrt(2) b``, over the released total;
    plus largest-remainder rounding, ``(released bins)/(2 N)``.
    """
    data = _zero_inflated(2000, 1)
    true = float((data["amount"] == 0).mean())
    plain = {"columns": [{k: v for k, v in c.items() if k != "atoms"} for c in ATOM_SCHEMA["columns"]]}
    assert (ps.synthesize(data, mechanism, 4.0, schema=plain, rng=3).data["amount"] == 0).mean() == 0
    result = ps.synthesize(data, mechanism, 4.0, schema=ATOM_SCHEMA, rng=3)
    share = float((result.data["amount"] == 0).mean())
    n_rows = len(result.data)
    if mechanism == "pmm":
        sigma = result.diagnostics["noise"]["sigma"]
        finite = [s for s in sigma[:2] if np.isfinite(s)]
        tolerance = 5 * np.sqrt(2) * sum(finite) / n_rows  # PMM's rows are its consistent leaf counts: no rounding
    else:
        k, b, t = result.params["bins_per_axis"], result.params["noise_scale"], result.params["t"]
        assert k % 2 == 0
        tolerance = 2 * k * (t + 5 * np.sqrt(2) * b) / len(data) + len(result.weights) / (2 * n_rows)
    assert abs(share - true) <= tolerance, (share, true, tolerance)
    assert result.data["amount"].between(0, 500).all()


def test_cli_schema_file_with_atoms(tmp_path):
    from privsyn_core.cli import main
    _zero_inflated(500, 2).to_csv(tmp_path / "in.csv", index=False)
    (tmp_path / "schema.json").write_text(json.dumps(ATOM_SCHEMA))
    code = main(["synth", str(tmp_path / "in.csv"), str(tmp_path / "out.csv"), "--mechanism", "pmm", "--epsilon", "4",
                 "--schema", str(tmp_path / "schema.json"), "--seed", "1"])
    assert code == 0
    out = pd.read_csv(tmp_path / "out.csv")
    assert 0.4 < (out["amount"] == 0).mean() < 0.8


def test_typed_accessors_narrow_by_kind():
    """``bounds`` and ``category_list`` give a column's domain typed, and refuse the other kind (the fields
    ``lo``, ``hi`` and ``categories`` stay readable as before)."""
    num = Column("x", "numeric", lo=0, hi=4, integer=True)
    cat = Column("c", "categorical", categories=["a", "b"])
    assert num.bounds == (0.0, 4.0) and (num.lo, num.hi) == (0.0, 4.0) and num.categories is None
    assert cat.category_list == ("a", "b") == cat.categories and cat.lo is None
    with pytest.raises(SchemaError, match="'x' is numeric: it has no category list"):
        num.category_list
    with pytest.raises(SchemaError, match="'c' is categorical: it has no numeric bounds"):
        cat.bounds


def test_check_frame_keeps_the_named_columns_in_their_order_and_never_the_callers_table():
    from privsyn_core.data.values import check_frame

    table = pd.DataFrame({"a": [1.0, 2.0], "b": ["x", "y"], "c": [3, 4]})
    before = table.copy()
    for names in (["a", "b", "c"], ["c", "a", "b"], ["b"]):
        out = check_frame(table, names)
        pd.testing.assert_frame_equal(out, table[names])
        assert out is not table
        out.loc[0, names[0]] = None
        out["added"] = 0
    pd.testing.assert_frame_equal(table, before)
