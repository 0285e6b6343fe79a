"""The codec protocol (privsyn_core.data.codec): every registered codec, the default unit codec and the schema
satisfy it, round trip."""

import numpy as np
import pandas as pd
import pytest

import privsyn_core as ps
from privsyn_core.data.codec import Codec, StagedCodec, stage_params
from privsyn_core.data.unit_codec import UnitCodec

SCHEMA = ps.Schema((ps.Column("x", "numeric", lo=0.0, hi=1.0),
                    ps.Column("c", "categorical", categories=("a", "b", "z"))))
FRAME = pd.DataFrame({"x": [0.1, 0.5, 0.9], "c": ["a", "z", "b"]})
#: The Boolean mechanisms' codecs accept Boolean columns only (a 0/1 integer column and a two-category one).
BOOLEAN_SCHEMA = ps.Schema((ps.Column("x", "numeric", lo=0.0, hi=1.0, integer=True),
                            ps.Column("c", "categorical", categories=("a", "z"))))
BOOLEAN_FRAME = pd.DataFrame({"x": [0, 1, 1], "c": ["a", "z", "a"]})


def _codecs() -> list[tuple[str, Codec, pd.DataFrame]]:
    out: list[tuple[str, Codec, pd.DataFrame]] = [("schema", SCHEMA, FRAME), ("unit", UnitCodec(SCHEMA), FRAME)]
    for spec in ps.list_mechanisms():
        if spec.codec is not UnitCodec:
            boolean = spec.data_kind == "boolean"
            out.append((spec.name, spec.codec(BOOLEAN_SCHEMA if boolean else SCHEMA),
                        BOOLEAN_FRAME if boolean else FRAME))
    return out


@pytest.mark.parametrize("name, codec, frame", _codecs(), ids=[name for name, _, _ in _codecs()])
def test_every_codec_satisfies_the_protocol_and_round_trips_the_categories(name, codec, frame):
    assert isinstance(codec, Codec)
    unit, clipped = codec.encode(frame)
    assert unit.shape[0] == len(frame) and clipped == {"x": 0}
    back = codec.decode(np.asarray(unit))
    assert list(back.columns) == ["x", "c"] and back["c"].tolist() == frame["c"].tolist()


def test_stage_params_only_from_a_staged_codec():
    tree = ps.get_mechanism("marginal_tree").codec(SCHEMA)
    assert isinstance(tree, StagedCodec) and stage_params(tree) == {"levels": (0, 3), "atoms": (0, 0)}
    assert not isinstance(SCHEMA, StagedCodec) and stage_params(SCHEMA) == {}
    assert ps.get_mechanism("pmm").codec is UnitCodec and stage_params(UnitCodec(SCHEMA)) == {}


@pytest.mark.parametrize("dtype", ["str", "string[python]", "string[pyarrow]", object, "category"])
def test_a_category_is_matched_by_its_text_whatever_the_column_holds_it_in(dtype):
    """Text columns (codes from their distinct values) and object ones (value by value) give the same codes; an
    unknown value is named, the examples sorted."""
    codec = UnitCodec(SCHEMA)
    frame = FRAME.assign(c=FRAME["c"].astype(dtype))
    assert codec.encode(frame)[0][:, 1].tolist() == [1 / 6, 5 / 6, 3 / 6]
    with pytest.raises(ps.DataError, match=r"e\.g\. \['q', 'y'\]"):
        codec.encode(pd.DataFrame({"x": [0.1] * 3, "c": pd.Series(["y", "a", "q"], dtype=dtype)}))


def test_boolean_values_match_the_text_of_boolean_categories():
    schema = ps.Schema((ps.Column("b", "categorical", categories=(False, True)),))
    for column in (pd.Series([True, False, True]), pd.Series([True, False, True], dtype="boolean"),
                   pd.Series(["True", "False", "True"]), pd.Series([True, False, True], dtype=object)):
        assert UnitCodec(schema).encode(pd.DataFrame({"b": column}))[0][:, 0].tolist() == [0.75, 0.25, 0.75]


def test_decoded_categories_keep_the_dtype_pandas_gives_the_categories():
    for categories, dtype in ((("a", "bb"), pd.Series(["a"]).dtype), ((False, True), np.dtype(bool)),
                              ((1, 7), np.dtype(np.int64)), (("a", 1), np.dtype(object))):
        schema = ps.Schema((ps.Column("c", "categorical", categories=categories),))
        decoded = UnitCodec(schema).decode(np.array([[0.9], [0.1], [0.9]]))["c"]
        assert decoded.dtype == dtype and decoded.tolist() == [categories[1], categories[0], categories[1]]
