"""Property-based fuzzing (hypothesis, derandomised) of the CSV loader, the CSV writer and the schema.

The contract under fuzzing: every input either works or raises a :class:`PrivsynError`
with a one-line message; nothing else escapes (no KeyError, TypeError, numpy error, ...).
"""

from __future__ import annotations

import csv
import io
import math

import numpy as np
import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from privsyn_core import Column, Schema
from privsyn_core.data.io import read_csv, to_csv_bytes
from privsyn_core.errors import PrivsynError

FUZZ = settings(max_examples=150, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
CSV_CHARS = "ab1 .-+eE9,;\t|\"'\n\r=@\x00é\ufeff"
CSV_TOKENS = st.sampled_from(list(CSV_CHARS) + ["nan", "inf", "1e308", "NA", "\r\n"])
FORMULA_START = ("=", "+", "-", "@", "\t", "\r")

json_scalars = st.one_of(st.none(), st.booleans(), st.integers(-10**20, 10**20),
                         st.floats(allow_nan=True, allow_infinity=True), st.text(max_size=8))
json_values = st.recursive(json_scalars, lambda inner: st.lists(inner, max_size=4)
                           | st.dictionaries(st.text(max_size=6), inner, max_size=4), max_leaves=12)


def _loads_or_clear_error(source) -> pd.DataFrame | None:
    try:
        df = read_csv(source)
    except PrivsynError as exc:
        assert str(exc) and "\n" not in str(exc)
        return None
    assert len(df) >= 1 and df.columns.is_unique
    assert all(isinstance(c, str) and c == c.strip() and c for c in df.columns)
    return df


@FUZZ
@given(st.binary(max_size=400))
def test_read_csv_random_bytes(raw):
    _loads_or_clear_error(raw)


@FUZZ
@given(st.lists(CSV_TOKENS, max_size=120).map("".join))
def test_read_csv_csv_like_text(text):
    _loads_or_clear_error(text.encode("utf-8"))


@FUZZ
@given(st.lists(st.lists(st.text(alphabet=CSV_CHARS, max_size=6), min_size=3, max_size=3), min_size=1, max_size=8),
       st.sampled_from([",", ";", "\t", "|"]))
@pytest.mark.slow
def test_read_csv_well_formed_tables_round_trip_shape(cells, delimiter):
    buffer = io.StringIO()
    writer = csv.writer(buffer, delimiter=delimiter, lineterminator="\n")
    writer.writerow(["a", "b", "c"])
    writer.writerows(cells)
    df = _loads_or_clear_error(buffer.getvalue().encode("utf-8"))
    if df is not None:
        assert list(df.columns) == ["a", "b", "c"]


@FUZZ
@given(st.lists(st.text(max_size=10), min_size=1, max_size=6),
       st.lists(st.floats(allow_nan=False), min_size=1, max_size=6))
@pytest.mark.slow
def test_to_csv_bytes_never_writes_a_formula_cell(texts, numbers):
    size = min(len(texts), len(numbers))
    df = pd.DataFrame({"=text": texts[:size], "num": numbers[:size]})
    rows = list(csv.reader(io.StringIO(to_csv_bytes(df).decode("utf-8"), newline="")))
    assert len(rows) == size + 1
    assert not [r[0] for r in rows if r[0].startswith(FORMULA_START)]
    assert [float(r[1]) for r in rows[1:]] == df["num"].tolist()


@pytest.mark.slow
@FUZZ
@given(json_values)
def test_schema_from_arbitrary_json(value):
    try:
        schema = Schema.from_dict(value)
    except PrivsynError as exc:
        assert "\n" not in str(exc)
        return
    assert Schema.from_dict(schema.to_dict()) == schema


column_dicts = st.fixed_dictionaries(
    {"name": st.one_of(st.text(max_size=4), st.none(), st.integers())},
    optional={"kind": st.sampled_from(["numeric", "categorical", "text", 3]),
              "lo": st.one_of(st.floats(), st.text(max_size=3), st.none()),
              "hi": st.one_of(st.floats(), st.integers(), st.none()),
              "categories": st.one_of(st.lists(st.one_of(st.text(max_size=3), st.integers(), st.booleans()),
                                               max_size=4), st.none()),
              "integer": st.booleans(), "public": st.booleans()})


@pytest.mark.slow
@FUZZ
@given(st.lists(column_dicts, max_size=4))
def test_schema_from_column_like_dicts(columns):
    try:
        schema = Schema.from_dict({"columns": columns})
    except PrivsynError:
        return
    for col in schema.columns:
        if col.kind == "numeric":
            assert math.isfinite(col.lo) and math.isfinite(col.hi) and col.lo < col.hi
        else:
            assert len(col.categories) >= 1


cell_values = st.one_of(st.floats(), st.integers(-10**6, 10**6), st.text(max_size=4), st.none(), st.booleans())


@pytest.mark.slow
@FUZZ
@given(st.lists(st.tuples(cell_values, cell_values), min_size=0, max_size=12))
def test_encode_hostile_values(rows):
    schema = Schema((Column("x", "numeric", lo=-1.0, hi=1.0), Column("c", "categorical", categories=("a", "b", 1))))
    df = pd.DataFrame(rows, columns=["x", "c"]) if rows else pd.DataFrame({"x": [], "c": []})
    try:
        unit, clipped = schema.encode(df)
    except PrivsynError as exc:
        assert "\n" not in str(exc)
        return
    assert unit.shape == (len(df), 2) and np.all((unit >= 0) & (unit <= 1))
    decoded = schema.decode(unit)
    assert decoded["c"].isin(["a", "b", 1]).all() and decoded["x"].between(-1, 1).all()
    assert 0 <= clipped["x"] <= len(df)
