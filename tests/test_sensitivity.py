"""The histogram sensitivity per neighbouring relation (privsyn_core.privacy.sensitivity)."""

import numpy as np
import pytest

from privsyn_core.errors import ParameterError
from privsyn_core.privacy.sensitivity import count_sensitivity


def test_count_sensitivity_is_the_largest_l1_change_of_a_histogram():
    """Brute force on a small domain: every pair of neighbouring tables (one record added, or one record
    changed) changes the cell counts by at most 1 resp. 2 in l1, and some pair attains it."""
    cells, n = 4, 3
    rng = np.random.default_rng(0)
    worst = {"add_remove": 0, "replace": 0}
    for _ in range(200):
        table = rng.integers(0, cells, n)
        counts = np.bincount(table, minlength=cells)
        added = np.bincount(np.r_[table, rng.integers(0, cells)], minlength=cells)
        changed = table.copy()
        changed[rng.integers(0, n)] = rng.integers(0, cells)
        worst["add_remove"] = max(worst["add_remove"], int(np.abs(added - counts).sum()))
        worst["replace"] = max(worst["replace"], int(np.abs(np.bincount(changed, minlength=cells) - counts).sum()))
    assert worst == {"add_remove": count_sensitivity("add_remove"), "replace": count_sensitivity("replace")}


@pytest.mark.parametrize("relation", ["bounded", None, ""])
def test_an_unknown_relation_is_a_parameter_error(relation):
    with pytest.raises(ParameterError, match="neighbouring must be 'replace' or 'add_remove'"):
        count_sensitivity(relation)
