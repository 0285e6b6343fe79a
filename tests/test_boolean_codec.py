"""The Boolean codec: mixed table <-> {0,1}^p on public bins (issue 6, item 1)."""

import numpy as np
import pandas as pd
import pytest

import privsyn_core as ps
from privsyn_core.data.boolean_codec import BooleanCodec, boolean_codec
from privsyn_core.errors import DataError, ParameterError, SchemaError

SCHEMA = ps.Schema((
    ps.Column("age", "numeric", lo=18, hi=90, integer=True),
    ps.Column("kids", "numeric", lo=0, hi=3, integer=True),
    ps.Column("income", "numeric", lo=0.0, hi=1e5),
    ps.Column("colour", "categorical", categories=("red", "green", "blue")),
    ps.Column("member", "categorical", categories=(False, True)),
    ps.Column("country", "categorical", categories=("NL",)),
))


def mixed_frame(n=300, seed=1):
    rng = np.random.default_rng(seed)
    return pd.DataFrame({
        "age": rng.integers(18, 91, n), "kids": rng.integers(0, 4, n), "income": rng.uniform(0, 1e5, n),
        "colour": rng.choice(["red", "green", "blue"], n), "member": rng.choice([False, True], n),
        "country": ["NL"] * n})


@pytest.mark.parametrize("encoding", ["thermometer", "binary"])
def test_round_trip_mixed_table(encoding):
    df = mixed_frame()
    codec = BooleanCodec(SCHEMA, encoding)
    bits, clipped = codec.encode(df)
    assert bits.dtype == np.uint8 and set(np.unique(bits)) <= {0, 1}
    assert bits.shape == (len(df), codec.p) == (len(df), len(codec.bit_names))
    assert clipped == {"age": 0, "kids": 0, "income": 0}
    back = codec.decode(bits)
    pd.testing.assert_frame_equal(back, codec.levels(df))
    # categorical columns come back exactly; binned numerics within half a bin of the truth
    for name in ("colour", "member", "country", "kids"):
        assert (back[name].to_numpy() == df[name].to_numpy()).all()
    assert np.max(np.abs(back["income"] - df["income"])) <= 1e5 / 8 / 2
    assert np.max(np.abs(back["age"] - df["age"])) <= 72 / 8 / 2 + 0.5


def test_bit_layout_and_widths():
    thermo, binary = BooleanCodec(SCHEMA, "thermometer"), BooleanCodec(SCHEMA, "binary")
    # age: 8 bins, kids: 4 integer levels, income: 8 bins, colour one-hot 3, member 1 bit, country 0 bits
    assert thermo.p == 7 + 3 + 7 + 3 + 1 + 0
    assert binary.p == 3 + 2 + 3 + 3 + 1 + 0
    assert thermo.bit_names[7:10] == ["kids>=1", "kids>=2", "kids>=3"]
    assert thermo.bit_names[-4:] == ["colour=red", "colour=green", "colour=blue", "member=True"]


def test_thermometer_bits_are_monotone_and_one_hot_groups_sum_to_one():
    codec = BooleanCodec(SCHEMA, "thermometer")
    bits, _ = codec.encode(mixed_frame())
    for block in codec.blocks:
        part = bits[:, block.start:block.stop].astype(int)
        if block.kind == "thermometer":
            assert (np.diff(part, axis=1) <= 0).all()
        if block.kind == "onehot":
            assert (part.sum(axis=1) == 1).all()


@pytest.mark.parametrize("encoding", ["thermometer", "binary"])
def test_decoding_fractional_and_invalid_points_gives_valid_values(encoding):
    codec = BooleanCodec(SCHEMA, encoding)
    points = np.random.default_rng(2).random((500, codec.p))
    points[:50] = 0.0  # all-zero one-hot groups
    points[50:100] = 1.0  # all-one groups
    out = codec.decode(points)
    assert out["colour"].isin(["red", "green", "blue"]).all()
    assert out["member"].isin([False, True]).all() and (out["country"] == "NL").all()
    assert out["age"].between(18, 90).all() and out["kids"].between(0, 3).all()
    assert out["income"].between(0, 1e5).all()
    assert out["age"].dtype == np.int64 and out["kids"].dtype == np.int64
    assert set(out["kids"]) <= {0, 1, 2, 3}
    pd.testing.assert_frame_equal(out, codec.decode(points))  # deterministic


def test_thermometer_monotone_fix_is_the_sorted_pattern():
    codec = BooleanCodec(SCHEMA, "thermometer")
    kids = next(b for b in codec.blocks if b.column.name == "kids")
    rows = np.zeros((4, codec.p))
    patterns = np.array([[1, 0, 1], [0, 0, 1], [0, 1, 1], [1, 1, 0]])
    rows[:, kids.start:kids.stop] = patterns
    fixed = rows.copy()
    fixed[:, kids.start:kids.stop] = -np.sort(-patterns, axis=1)
    assert codec.decode(rows)["kids"].tolist() == codec.decode(fixed)["kids"].tolist() == [2, 1, 2, 2]


def test_one_hot_ties_are_split_over_the_tied_categories():
    codec = BooleanCodec(SCHEMA, "thermometer")
    decoded = codec.decode(np.zeros((300, codec.p)))["colour"]
    # ties go to a fixed-seed uniform choice, not always to the first category
    assert set(decoded) == {"red", "green", "blue"}
    colour = next(b for b in codec.blocks if b.column.name == "colour")
    rows = np.zeros((1, codec.p))
    rows[0, colour.start:colour.stop] = [0.2, 0.7, 0.1]
    assert codec.decode(rows)["colour"].tolist() == ["green"]


def test_clipping_is_counted_and_goes_to_the_end_bins():
    df = mixed_frame(20)
    df.loc[:2, "income"] = [-5.0, 2e5, 3e5]
    codec = boolean_codec(SCHEMA)
    bits, clipped = codec.encode(df)
    assert clipped["income"] == 3
    back = codec.decode(bits)
    assert back["income"].iloc[0] == 1e5 / 16 and back["income"].iloc[1] == 1e5 - 1e5 / 16


def test_user_errors_are_clear():
    with pytest.raises(SchemaError, match="no bits"):
        BooleanCodec(ps.Schema((ps.Column("c", "categorical", categories=("a",)),)))
    with pytest.raises(ParameterError, match="bins"):
        BooleanCodec(SCHEMA, bins=1)
    with pytest.raises(ParameterError, match="thermometer"):
        BooleanCodec(SCHEMA, numeric="unary")
    bad = mixed_frame(5)
    bad.loc[0, "colour"] = "purple"
    with pytest.raises(DataError, match="outside its public categories"):
        boolean_codec(SCHEMA).encode(bad)
