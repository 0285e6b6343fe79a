"""The levelled codec shared by the marginal mechanisms: public levels, exact round trip, clipping."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

import privsyn_core as ps
from privsyn_core.data.levelled_codec import MAX_VALUE_LEVELS, LevelledCodec

SCHEMA = ps.Schema.from_dict({"version": 1, "columns": [
    {"name": "few", "kind": "numeric", "lo": 0, "hi": 5, "integer": True},
    {"name": "many", "kind": "numeric", "lo": 0, "hi": 100, "integer": True},
    {"name": "real", "kind": "numeric", "lo": -1.0, "hi": 1.0},
    {"name": "cat", "kind": "categorical", "categories": ["x", "y", "z"]},
    {"name": "zero_inflated", "kind": "numeric", "lo": 0.5, "hi": 9.5, "integer": True, "atoms": [1]},
]})


def test_levels_are_public_facts_of_the_schema() -> None:
    codec = LevelledCodec(SCHEMA)
    # 6 integers in [0, 5]; 101 > MAX_VALUE_LEVELS; continuous; 3 categories; integers 1..9 in [0.5, 9.5]
    assert codec.levels == (6, 0, 0, 3, 9)
    assert codec.stage_params == {"levels": codec.levels, "atoms": (0, 0, 0, 0, 0)}  # the atom column is levelled
    assert LevelledCodec(SCHEMA, max_value_levels=5).levels == (0, 0, 0, 3, 0)
    assert LevelledCodec(SCHEMA, max_value_levels=5).atoms == (0, 0, 0, 0, 1)  # now on bins: its atom counts
    assert MAX_VALUE_LEVELS >= 6


def test_round_trip_is_exact_on_valid_values_and_clips_outside() -> None:
    rng = np.random.default_rng(0)
    frame = pd.DataFrame({"few": rng.integers(0, 6, 200), "many": rng.integers(0, 101, 200),
                          "real": rng.uniform(-1, 1, 200), "cat": rng.choice(["x", "y", "z"], 200),
                          "zero_inflated": rng.integers(1, 10, 200)})
    codec = LevelledCodec(SCHEMA)
    unit, clipped = codec.encode(frame)
    assert clipped["few"] == 0
    assert np.allclose(unit[:, 0] * 6 % 1, 0.5)  # level centres (i + 1/2)/k
    back = codec.decode(unit)
    for name in ("few", "many", "cat", "zero_inflated"):
        assert (back[name].to_numpy() == frame[name].to_numpy()).all(), name
    assert np.allclose(back["real"], frame["real"])
    assert back["few"].dtype == np.int64
    outside, clipped = codec.encode(frame.assign(few=frame["few"] + 10))
    assert clipped["few"] > 0 and (codec.decode(outside)["few"] == 5).all()


@pytest.mark.parametrize("u, value", [(0.0, 0), (1 / 6 - 1e-12, 0), (1 / 6, 1), (0.999, 5), (1.0, 5), (1.7, 5)])
def test_any_released_coordinate_decodes_to_the_level_whose_cell_holds_it(u: float, value: int) -> None:
    rows = np.array([[u, 0.5, 0.5, 0.5, 0.5]])
    assert LevelledCodec(SCHEMA).decode(rows)["few"].iloc[0] == value
