"""The CLI's streaming path: ``iter_csv`` + ``synthesize_chunks`` equal ``read_csv`` + ``synthesize``.

Both paths are deterministic given the seed, so the comparisons are exact (no statistics): the
encoded array built block by block must equal the one encoded at once, hence the same draws and
the same release, byte for byte in the written CSV.  Tiny blocks (1-7 rows) force many blocks and
the growth of the array.
"""

from __future__ import annotations

import json
import warnings
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import privsyn_core as ps
from privsyn_core.api import synthesize_chunks
from privsyn_core.cli import main
from privsyn_core.data.io import iter_csv, read_csv, to_csv_bytes
from privsyn_core.errors import DataError, PrivsynError

CORPUS = Path(__file__).parent / "data" / "bad_csv"
MANIFEST = json.loads((CORPUS / "manifest.json").read_text())

SCHEMA = {"columns": [{"name": "a", "kind": "numeric", "lo": 0, "hi": 1},
                      {"name": "b", "kind": "numeric", "lo": 0, "hi": 10, "integer": True},
                      {"name": "c", "kind": "categorical", "categories": ["x", "y", "z"]}]}


@pytest.fixture
def table(tmp_path) -> Path:
    """137 rows, a column the schema leaves out, values outside the bounds (clipped), CRLF line ends."""
    rng = np.random.default_rng(5)
    df = pd.DataFrame({"a": rng.random(137) * 1.2 - 0.1, "b": rng.integers(0, 11, 137),
                       "c": rng.choice(["x", "y", "z"], 137), "extra": rng.random(137)})
    path = tmp_path / "real.csv"
    path.write_bytes(df.to_csv(index=False, lineterminator="\r\n").encode())
    return path


def _same_result(a: ps.SynthResult, b: ps.SynthResult) -> None:
    pd.testing.assert_frame_equal(a.data, b.data)
    assert to_csv_bytes(a.data) == to_csv_bytes(b.data)
    assert a.ledger == b.ledger and a.warnings == b.warnings and a.clipped == b.clipped
    assert a.diagnostics["teaching_warnings"] == b.diagnostics["teaching_warnings"]
    assert a.release().to_dict() == b.release().to_dict()


@pytest.mark.parametrize("mechanism, params", [("pmm", {}), ("dp_histogram", {}), ("kd_grid", {}),
                                               ("psmm", {}), ("marginal_tree", {}), ("laplace_points", {})])
@pytest.mark.parametrize("chunk_rows, capacity", [(1, 0), (7, 3), (1000, 10_000)])
def test_chunks_equal_the_whole_table(table, mechanism, params, chunk_rows, capacity):
    whole = ps.synthesize(read_csv(table), mechanism, 1.0, schema=SCHEMA, rng=3, **params)
    with iter_csv(table, chunk_rows=chunk_rows) as chunks:
        streamed = synthesize_chunks(chunks, mechanism, 1.0, schema=SCHEMA, rng=3, capacity=capacity, **params)
    _same_result(whole, streamed)
    assert any("clipped" in w for w in streamed.diagnostics["teaching_warnings"])
    assert any("'extra'" in w for w in streamed.warnings)  # the left-out column is named on both paths


def test_chunks_equal_the_whole_table_under_add_remove(table):
    kwargs = {"schema": SCHEMA, "rng": 11, "neighbouring": "add_remove", "n_synthetic": 50}
    whole = ps.synthesize(read_csv(table), "pmm", 0.5, **kwargs)
    with iter_csv(table, chunk_rows=4) as chunks:
        _same_result(whole, synthesize_chunks(chunks, "pmm", 0.5, capacity=chunks.max_rows, **kwargs))


def test_boolean_codec_chunks_equal_the_whole_table(tmp_path):
    rng = np.random.default_rng(2)
    path = tmp_path / "bool.csv"
    pd.DataFrame({f"q{j}": rng.choice(["yes", "no"], 60) for j in range(4)}).to_csv(path, index=False)
    schema = {"columns": [{"name": f"q{j}", "kind": "categorical", "categories": ["no", "yes"]} for j in range(4)]}
    whole = ps.synthesize(read_csv(path), "microagg_dp", 2.0, schema=schema, rng=0)
    with iter_csv(path, chunk_rows=5) as chunks:
        _same_result(whole, synthesize_chunks(chunks, "microagg_dp", 2.0, schema=schema, rng=0))


def test_cli_writes_the_bytes_of_the_in_memory_path(table, tmp_path, capsys):
    schema = tmp_path / "schema.json"
    schema.write_text(json.dumps(SCHEMA))
    assert main(["synth", str(table), str(tmp_path / "out.csv"), "--mechanism", "pmm", "--epsilon", "1",
                 "--schema", str(schema), "--seed", "4"]) == 0
    capsys.readouterr()
    whole = ps.synthesize(read_csv(table), "pmm", 1.0, schema=SCHEMA, rng=4)
    assert (tmp_path / "out.csv").read_bytes() == to_csv_bytes(whole.release().data)


@pytest.mark.parametrize("name", sorted(MANIFEST))
def test_corpus_through_blocks_as_through_read_csv(name):
    """Every hostile file: the same refusal (message included), or the same table, read in blocks of 3 rows."""
    try:
        expected: pd.DataFrame | str = read_csv(CORPUS / name)
    except DataError as exc:
        expected = str(exc)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", pd.errors.DtypeWarning)
            with iter_csv(CORPUS / name, chunk_rows=3) as chunks:
                got: pd.DataFrame | str = pd.concat(list(chunks))
                assert chunks.max_rows >= len(got)
    except DataError as exc:
        got = str(exc)
    if isinstance(expected, str) or isinstance(got, str):
        assert got == expected
        return
    assert list(got.columns) == list(expected.columns) and len(got) == len(expected)
    assert got.astype(str).equals(expected.astype(str).set_axis(got.index))


@pytest.mark.parametrize("name", sorted(n for n, e in MANIFEST.items() if e["schema"] is not None))
def test_corpus_with_a_schema_through_synthesize_chunks(name):
    """The corpus files that come with a schema: the same release or the same one-line error."""
    schema = MANIFEST[name]["schema"]
    try:
        expected: ps.SynthResult | str = ps.synthesize(read_csv(CORPUS / name), "dp_histogram", 1.0, schema=schema,
                                                       rng=0)
    except PrivsynError as exc:
        expected = str(exc)
    for chunk_rows in (2, 1000):
        try:
            with iter_csv(CORPUS / name, chunk_rows=chunk_rows) as chunks:
                got: ps.SynthResult | str = synthesize_chunks(chunks, "dp_histogram", 1.0, schema=schema, rng=0)
        except PrivsynError as exc:
            got = str(exc)
        if isinstance(expected, str) and isinstance(got, str) and chunk_rows == 2:
            # several blocks: refused at the first bad block, named in the message (its counts are within it)
            assert "[block of rows " in got and "\n" not in got
            assert got.split(" has ")[0] == expected.split(" has ")[0]
        elif isinstance(expected, str) or isinstance(got, str):
            assert got == expected
        else:
            _same_result(expected, got)


def test_header_only_and_missing_schema_are_refused(tmp_path):
    path = tmp_path / "h.csv"
    path.write_text("a,b\n\n\n")
    with pytest.raises(DataError, match="no data rows"), iter_csv(path) as chunks:
        list(chunks)
    path.write_text("a\n0.5\n")
    with iter_csv(path) as chunks, pytest.raises(PrivsynError, match="needs a public schema"):
        synthesize_chunks(chunks, "pmm", 1.0, schema=None, rng=0)  # type: ignore[arg-type]


@pytest.mark.parametrize("block", [1, 2, 3, 5])
def test_multibyte_characters_cut_by_the_scan_blocks(tmp_path, monkeypatch, block):
    """The checking pass reads fixed-size blocks: a UTF-8 character across two blocks is not an error, a bad byte is
    found at its position counted as ``bytes.decode("utf-8-sig")`` counts it, and a NUL at its character index."""
    import privsyn_core.data.io as pio

    monkeypatch.setattr(pio, "SCAN_BLOCK_BYTES", block)
    text = "\ufeffname,é\nà€,1\nü,2\n"
    path = tmp_path / "u.csv"
    path.write_bytes(text.encode("utf-8"))
    assert read_csv(path).columns.tolist() == ["name", "é"] and len(read_csv(path)) == 2
    raw = text.encode("utf-8")[:-3] + b"\xff\n"
    for data in (raw, raw.replace(b"\xef\xbb\xbf", b"")):
        with pytest.raises(DataError) as info:
            read_csv(data)
        try:
            data.decode("utf-8-sig")
        except UnicodeDecodeError as exc:
            assert f"position {exc.start})" in str(info.value)
    nul = "\ufeffa,é\n1,\x002\n"
    with pytest.raises(DataError, match=f"first at character {nul.index(chr(0)) - 1}"):
        read_csv(nul.encode())
    assert read_csv("\ufeff".encode() + b"a\n1\n").columns.tolist() == ["a"]
