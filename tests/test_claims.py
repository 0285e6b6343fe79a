"""Every W1 claim of the docs is the registry's (``MechanismSpec.w1_claim``): the table, the README's lists, rates."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from benchmarks.w1_claims import KIND_LABELS, claims_markdown, own_mechanisms
from privsyn_core.mechanisms.base.spec import W1Claim, register

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text()


def test_the_committed_claims_table_is_the_registry_s():
    table = (ROOT / "docs" / "tables" / "w1_claims.md").read_text()
    assert table.split("\n\n", 1)[1].strip() == claims_markdown().strip(), \
        "docs/tables/w1_claims.md is stale: python -m benchmarks.w1_claims --write"


@pytest.mark.parametrize("kind", sorted(KIND_LABELS))
def test_the_readme_lists_each_mechanism_under_its_claim(kind):
    """The README's item ``* **<label>**: `a`, `b` ...`` names exactly the mechanisms of that kind."""
    line = re.search(rf"^\* \*\*{re.escape(KIND_LABELS[kind])}\*\*.*?(?=^\* |\n\n)", README,
                     flags=re.MULTILINE | re.DOTALL)
    assert line is not None, f"the README has no line for {KIND_LABELS[kind]!r}"
    named = set(re.findall(r"`([a-z_0-9]+)`", line.group(0)))
    registered = {spec.name for spec in own_mechanisms()}
    assert named & registered == {spec.name for spec in own_mechanisms() if spec.w1_claim.kind == kind}


def test_the_readme_promises_w1_theorems_only_for_the_mechanisms_that_have_one():
    first = README.split("\n\n", 2)[1]
    named = set(re.findall(r"`([a-z_0-9]+)`", first)) & {spec.name for spec in own_mechanisms()}
    assert named == {spec.name for spec in own_mechanisms()
                     if spec.w1_claim.kind == "theorem" and spec.is_private}
    assert "provable Wasserstein accuracy" not in README


def test_only_a_mechanism_with_a_bound_declares_a_rate():
    for spec in own_mechanisms():
        assert spec.rate is None or spec.w1_claim.kind != "measured", spec.name


def test_register_refuses_a_rate_without_a_bound():
    with pytest.raises(RuntimeError, match="no bound"):
        register("rate_without_bound", released=(), rate=lambda epsilon, n, d: 1.0)(lambda unit: None)
    with pytest.raises(RuntimeError, match="no bound"):
        register("rate_without_bound", released=(), rate=lambda epsilon, n, d: 1.0,
                 w1_claim=W1Claim("measured", "none"))(lambda unit: None)
