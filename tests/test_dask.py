"""The Dask path (privsyn_core.engine.dask_backend) against the in-memory path, on a LocalCluster of worker processes.

Every comparison is exact: the same data and seed must give bit-identical synthetic rows, atoms, weights and
ledger, because both paths run the same stages, row blocks and block generators.  Nothing here is statistical.
"""

import math
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import privsyn_core as ps
from privsyn_core import Column, DataError, ParameterError, Schema, SchemaError
from privsyn_core.data.datasets import two_blobs
from privsyn_core.engine import dask_backend
from privsyn_core.engine.dask_backend import is_dask_frame, staged_mechanisms
from privsyn_core.mechanisms.base import rows as row_plans, stages
from privsyn_core.mechanisms.hvz23.pmm_tree import leaf_counts, sparse_leaf_counts

# The dask extra (pip install -e ".[dask]"; requirements-dev.txt includes it): without it this module is skipped.
dask = pytest.importorskip("dask", reason="the dask extra is not installed")
dd = pytest.importorskip("dask.dataframe", reason="the dask extra is not installed")
distributed = pytest.importorskip("distributed", reason="the dask extra is not installed")
Client, LocalCluster = distributed.Client, distributed.LocalCluster

# Every test starts worker processes or compares full runs: seconds each.
pytestmark = pytest.mark.slow

EPSILON = 0.7
N = 2000
#: Small row blocks so that the synthetic rows span several blocks (several Dask partitions).
BLOCK_ROWS = 700
#: Small grids keep every mechanism to well under a second (psmm's LP grows with the cells).
PARAMS = {"pmm": {}, "psmm": {"cells_per_axis": 8}, "kd_grid": {}, "kd_adaptive": {}, "dp_histogram": {},
          "marginal_tree": {}, "srw_tsp": {"sample": "uniform"}}
SCHEMA = Schema((Column("a", "numeric", lo=-5.0, hi=5.0), Column("k", "numeric", lo=0, hi=1000, integer=True)))


@pytest.fixture(scope="module")
def client():
    with LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None) as cluster, \
            Client(cluster) as dask_client:
        yield dask_client


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    """The same table (two blobs, one float and one integer column) as 4 Parquet files and 3 CSV files."""
    rng = np.random.default_rng(7)
    unit = two_blobs(N, 2, rng=rng)
    frame = pd.DataFrame({"a": -5.0 + 10.0 * unit[:, 0], "k": np.round(1000 * unit[:, 1]).astype(np.int64)})
    root = tmp_path_factory.mktemp("dask_input")
    (root / "parquet").mkdir()
    (root / "csv").mkdir()
    for i, part in enumerate(np.array_split(np.arange(N), 4)):
        frame.iloc[part].to_parquet(root / "parquet" / f"part{i}.parquet", index=False)
    for i, part in enumerate(np.array_split(np.arange(N), 3)):
        frame.iloc[part].to_csv(root / "csv" / f"part{i}.csv", index=False)
    return root


@pytest.fixture
def small_blocks(monkeypatch):
    monkeypatch.setattr(row_plans, "ROW_BLOCK", BLOCK_ROWS)


def _read(files, kind):
    if kind == "parquet":
        return dd.read_parquet(str(files / "parquet"))
    return dd.read_csv(str(files / "csv" / "*.csv"))


def _assert_same_release(in_memory, on_dask, synthetic):
    """Rows, ledger, atoms and weights identical; the Dask output split along the row blocks."""
    pd.testing.assert_frame_equal(synthetic, in_memory.data, check_exact=True)
    assert on_dask.ledger == in_memory.ledger
    assert math.fsum(eps for _, eps in on_dask.ledger) == EPSILON
    assert on_dask.epsilon == EPSILON and on_dask.dp_valid
    if in_memory.weights is not None:  # pmm releases rows only
        assert np.array_equal(on_dask.weights, in_memory.weights)
        assert np.array_equal(on_dask.unit, in_memory.unit)
    assert on_dask.params == in_memory.params
    assert on_dask.clipped == in_memory.clipped
    assert on_dask.unit_rows is None
    assert on_dask.data.npartitions == max(1, math.ceil(len(in_memory.data) / BLOCK_ROWS))


@pytest.mark.parametrize("kind, neighbouring", [("parquet", "replace"), ("csv", "add_remove")])
@pytest.mark.parametrize("mechanism", sorted(PARAMS))
def test_same_seed_gives_the_in_memory_release(client, files, small_blocks, mechanism, kind, neighbouring):
    ddf = _read(files, kind)
    assert ddf.npartitions > 1 and is_dask_frame(ddf)
    frame = ddf.compute().reset_index(drop=True)
    kwargs = dict(schema=SCHEMA, neighbouring=neighbouring, rng=11, **PARAMS[mechanism])
    in_memory = ps.synthesize(frame, mechanism, EPSILON, **kwargs)
    on_dask = ps.synthesize(ddf, mechanism, EPSILON, **kwargs)
    assert len(in_memory.data) > BLOCK_ROWS
    _assert_same_release(in_memory, on_dask, on_dask.data.compute())


def test_many_and_empty_partitions_are_summed_exactly(client, small_blocks):
    """Twenty partitions, the last ones empty after a filter."""
    frame = pd.DataFrame(two_blobs(3 * N, 2, rng=3), columns=["x0", "x1"]).assign(keep=np.arange(3 * N) < N)
    ddf = dd.from_pandas(frame, npartitions=20)
    ddf = ddf[ddf.keep]
    for mechanism in ("kd_adaptive", "pmm"):
        in_memory = ps.synthesize(frame.iloc[:N], mechanism, EPSILON, schema=ps.unit_schema(2), rng=5)
        on_dask = ps.synthesize(ddf, mechanism, EPSILON, schema=ps.unit_schema(2), rng=5)
        assert on_dask.diagnostics["dask"]["n"] == N
        _assert_same_release(in_memory, on_dask, on_dask.data.compute())


def test_without_a_distributed_client_counts_run_in_batches(files, small_blocks, monkeypatch):
    """The local threaded scheduler, partitions' counts computed MERGE_BATCH at a time."""
    monkeypatch.setattr(dask_backend, "_distributed_client", lambda: None)
    monkeypatch.setattr(dask_backend, "MERGE_BATCH", 3)
    ddf = dd.from_pandas(pd.DataFrame(two_blobs(N, 2, rng=4), columns=["x0", "x1"]), npartitions=8)
    with dask.config.set(scheduler="threads"):
        on_dask = ps.synthesize(ddf, "kd_grid", EPSILON, schema=ps.unit_schema(2), rng=6)
        synthetic = on_dask.data.compute()
    in_memory = ps.synthesize(ddf.compute(), "kd_grid", EPSILON, schema=ps.unit_schema(2), rng=6)
    _assert_same_release(in_memory, on_dask, synthetic)


def test_merge_counts_sums_sorted_sparse_blocks_exactly():
    rng = np.random.default_rng(9)
    blocks = [rng.integers(0, 2**62, 50) % 97 * 2**40 for _ in range(5)] + [np.empty(0, dtype=np.int64)]
    merged = stages.merge_counts([stages.CellCounts.from_ids(block) for block in blocks])
    ids, counts = np.unique(np.concatenate(blocks), return_counts=True)
    assert np.array_equal(merged.ids, ids) and np.array_equal(merged.counts, counts)
    assert merged.counts.dtype == np.int64 and merged.total == 250


def test_running_sum_adds_dense_and_sparse_blocks_exactly():
    """Blocks with small ids go to the dense array, the others to the binary counter of sparse merges."""
    rng = np.random.default_rng(10)
    blocks = [rng.integers(0, 50, 40) for _ in range(4)] + [rng.integers(0, 10**9, 30) % 300 for _ in range(7)]
    total = dask_backend.RunningSum(dense_limit=64)
    for block in blocks + [np.empty(0, dtype=np.int64)]:
        total.add(stages.CellCounts.from_ids(block))
    assert len(total.stack) == 3 and len(total.dense) == 64  # 7 sparse blocks = 4 + 2 + 1
    merged = total.result()
    ids, counts = np.unique(np.concatenate(blocks), return_counts=True)
    assert np.array_equal(merged.ids, ids) and np.array_equal(merged.counts, counts)


@pytest.mark.parametrize("mechanism", ["kd_adaptive", "pmm"])
def test_counts_summed_sparsely_give_the_same_release(client, files, mechanism, monkeypatch):
    """With no dense summation at all, the binary counter of sparse merges gives the same release."""
    monkeypatch.setattr(dask_backend, "DENSE_IDS", 0)
    ddf = _read(files, "parquet")
    in_memory = ps.synthesize(ddf.compute(), mechanism, EPSILON, schema=SCHEMA, rng=8)
    on_dask = ps.synthesize(ddf, mechanism, EPSILON, schema=SCHEMA, rng=8)
    pd.testing.assert_frame_equal(on_dask.data.compute(), in_memory.data, check_exact=True)
    assert on_dask.ledger == in_memory.ledger


def test_synthetic_rows_write_to_parquet_and_read_back(client, files, small_blocks, tmp_path):
    on_dask = ps.synthesize(_read(files, "parquet"), "kd_grid", EPSILON, schema=SCHEMA, rng=2)
    expected = on_dask.data.compute()
    on_dask.data.to_parquet(str(tmp_path / "synthetic"))
    back = dd.read_parquet(str(tmp_path / "synthetic")).compute()
    assert len(list((tmp_path / "synthetic").glob("*.parquet"))) == on_dask.data.npartitions > 1
    pd.testing.assert_frame_equal(back, expected, check_exact=True, check_names=False)
    assert list(back.dtypes) == [np.float64, np.int64]


def test_bad_input_gives_clear_errors(client, files):
    ddf = _read(files, "parquet")
    with pytest.raises(SchemaError, match="needs a public schema"):
        ps.synthesize(ddf, "pmm", EPSILON)
    with pytest.raises(ParameterError, match=r"cannot run on a Dask DataFrame.*'pmm'.*'srw_tsp'"):
        ps.synthesize(ddf, "laplace_points", EPSILON, schema=SCHEMA)
    with pytest.raises(DataError, match=r"unknown column\(s\) \['z'\]"):
        ps.synthesize(ddf, "pmm", EPSILON, schema=Schema((Column("z", "numeric", lo=0, hi=1),)))
    with pytest.raises(DataError, match="no rows"):
        ps.synthesize(ddf[ddf.a > 10], "pmm", EPSILON, schema=SCHEMA)


@pytest.mark.parametrize("d, r", [(1, 0), (1, 9), (2, 13), (3, 14), (5, 17)])
def test_pmm_sparse_partition_counts_equal_the_dense_leaf_counts(d, r):
    """A partition smaller than 2^r is counted sparsely (memory O(rows)); the counts must not change."""
    unit = np.random.default_rng(d).random((600, d))
    unit[:10], unit[10:20] = 1.0, 0.5  # upper boundary and points on cut planes
    ids, counts = sparse_leaf_counts(unit, r)
    dense = leaf_counts(unit, r)
    assert np.array_equal(ids, np.flatnonzero(dense)) and np.array_equal(counts, dense[ids])


def test_the_staged_mechanisms_are_the_count_based_ones():
    assert sorted(staged_mechanisms()) == sorted(PARAMS)
    assert not is_dask_frame(pd.DataFrame({"a": [1.0]}))


def test_library_works_without_dask():
    """With dask unimportable, importing the library and an in-memory run still work."""
    code = ("import sys; sys.modules['dask'] = None; sys.modules['distributed'] = None\n"
            "import numpy as np, privsyn_core as ps\n"
            "X = np.random.default_rng(0).random((200, 2))\n"
            "r = ps.synthesize(X, 'pmm', 1.0, schema=ps.unit_schema(2), rng=0)\n"
            "assert len(r.data) == 200 and 'dask' not in [m.split('.')[0] for m in sys.modules if sys.modules[m]]\n")
    subprocess.run([sys.executable, "-c", code], check=True, cwd=Path(__file__).resolve().parents[1])


def test_a_cluster_without_workers_fails_clearly_instead_of_hanging(files, monkeypatch):
    """A run on a cluster that has (or is left with) no worker ends with a ClusterError after the deadline."""
    monkeypatch.setenv("PRIVSYN_DASK_WORKER_TIMEOUT", "2")
    with LocalCluster(n_workers=0, processes=False, dashboard_address=None) as cluster, Client(cluster):
        start = time.monotonic()
        with pytest.raises(ps.errors.ClusterError, match="no worker for 2 s"):
            ps.synthesize(_read(files, "parquet"), "pmm", EPSILON, schema=SCHEMA, rng=0)
        assert time.monotonic() - start < 60


def test_release_mode_maps_the_partitions_as_the_in_memory_path_maps_the_table(files, small_blocks, monkeypatch):
    """Issue 37: release mode on a Dask table gives the in-memory release mode's release with the same seed (the
    declared rule applied partition by partition, never a refusal that quotes a value)."""
    monkeypatch.setattr(dask_backend, "_distributed_client", lambda: None)
    frame = pd.DataFrame(two_blobs(N, 2, rng=4), columns=["x0", "x1"]).astype({"x0": object})
    frame.loc[[3, 50], "x0"] = ["Jane Doe 1961-04-02", None]
    ddf = dd.from_pandas(frame, npartitions=8)
    kwargs = dict(schema=ps.unit_schema(2), rng=6, release_mode=True, fallbacks={"x0": 0.25})
    with dask.config.set(scheduler="threads"):
        on_dask = ps.synthesize(ddf, "kd_grid", EPSILON, **kwargs)
        synthetic = on_dask.data.compute()
    in_memory = ps.synthesize(frame, "kd_grid", EPSILON, **kwargs)
    _assert_same_release(in_memory, on_dask, synthetic)
    assert on_dask.release().domain_policy == in_memory.release().domain_policy
