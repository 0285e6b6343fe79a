"""The codec protocol (privsyn_core.codec): every registered codec and the schema satisfy it, round trip."""

import numpy as np
import pandas as pd
import pytest

import privsyn_core as ps
from privsyn_core.codec import Codec, StagedCodec, stage_params

SCHEMA = ps.Schema((ps.Column("x", "numeric", lo=0.0, hi=1.0),
                    ps.Column("c", "categorical", categories=("a", "b", "z"))))
FRAME = pd.DataFrame({"x": [0.1, 0.5, 0.9], "c": ["a", "z", "b"]})


def _codecs() -> list[tuple[str, Codec]]:
    out: list[tuple[str, Codec]] = [("schema", SCHEMA)]
    out += [(spec.name, spec.codec(SCHEMA)) for spec in ps.list_mechanisms() if spec.codec is not None]
    return out


@pytest.mark.parametrize("name, codec", _codecs(), ids=[name for name, _ in _codecs()])
def test_every_codec_satisfies_the_protocol_and_round_trips_the_categories(name, codec):
    assert isinstance(codec, Codec)
    unit, clipped = codec.encode(FRAME)
    assert unit.shape[0] == len(FRAME) and clipped == {"x": 0}
    back = codec.decode(np.asarray(unit))
    assert list(back.columns) == ["x", "c"] and back["c"].tolist() == FRAME["c"].tolist()


def test_stage_params_only_from_a_staged_codec():
    tree = ps.get_mechanism("marginal_tree").codec(SCHEMA)
    assert isinstance(tree, StagedCodec) and stage_params(tree) == {"levels": (0, 3)}
    assert not isinstance(SCHEMA, StagedCodec) and stage_params(SCHEMA) == {}
