"""The memory budget: refusals named before allocating, and hostile sizes that stay under a hard limit."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import numpy as np
import pytest

import privsyn_core as ps
from privsyn_core.errors import ResourceError
from privsyn_core.mechanisms.base import resources
from privsyn_core.mechanisms.hvz23 import pmm

X = np.random.default_rng(0).random((200, 2))


def test_budget_reads_the_environment(monkeypatch):
    monkeypatch.setenv("PRIVSYN_MEMORY_BUDGET_MB", "64")
    assert resources.budget_bytes() == 64 * 2**20
    assert resources.max_rows(2) == 64 * 2**20 // (resources.BYTES_PER_VALUE * 2)
    monkeypatch.setenv("PRIVSYN_MEMORY_BUDGET_MB", "lots")
    with pytest.raises(ResourceError, match="megabytes"):
        resources.budget_bytes()


def test_too_many_rows_are_refused_before_running(monkeypatch):
    monkeypatch.setenv("PRIVSYN_MEMORY_BUDGET_MB", "16")
    limit = resources.max_rows(2)
    with pytest.raises(ResourceError, match=f"at most {limit:,} rows"):
        ps.synthesize(X, "pmm", 1.0, schema=ps.unit_schema(2), rng=0, n_synthetic=limit + 1)
    assert len(ps.synthesize(X, "pmm", 1.0, schema=ps.unit_schema(2), rng=0, n_synthetic=limit).data) == limit


def test_pmm_depth_is_capped_by_the_budget_with_a_warning_and_an_explicit_one_refused(monkeypatch):
    monkeypatch.setenv("PRIVSYN_MEMORY_BUDGET_MB", "16")
    cap = pmm.max_pmm_depth()
    assert cap == int(np.floor(np.log2(16 * 2**20 / pmm.PMM_BYTES_PER_LEAF)))
    result = ps.synthesize(X, "pmm", 1e6, schema=ps.unit_schema(2), rng=0)  # paper depth floor(log2(2e8)) = 27
    assert result.params["depth"] == cap and any("capped" in w for w in result.warnings)
    with pytest.raises(ResourceError, match=f"depth <= {cap}"):
        ps.synthesize(X, "pmm", 1.0, schema=ps.unit_schema(2), rng=0, depth=cap + 1)


@pytest.mark.slow
def test_hostile_epsilon_stays_under_a_hard_address_space_limit():
    """epsilon = 10^6 on 200 rows once made PMM allocate 5.1 GB; under a 3 GB address-space limit it now runs."""
    code = textwrap.dedent("""
        import resource
        resource.setrlimit(resource.RLIMIT_AS, (3 * 2**30, 3 * 2**30))
        import numpy as np, privsyn_core as ps
        X = np.random.default_rng(0).random((200, 2))
        r = ps.synthesize(X, "pmm", 1e6, schema=ps.unit_schema(2), rng=0)
        print(r.params["depth"], len(r.data))
    """)
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    assert int(done.stdout.split()[0]) == pmm.max_pmm_depth()
