"""Write the hostile-input corpus and its manifest (run from anywhere: ``python tests/data/bad_csv/make_corpus.py``).

Every entry: file name, raw bytes, what ``io.read_csv`` must do (``ok`` or an error whose
message contains ``load``), what ``synthesize`` with ``dp_histogram`` must then do (``ok`` or
an error containing ``synth``), and optionally a public schema to synthesize with.
The files are committed; this script documents how they were made.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

HERE = Path(__file__).parent
GOOD_ROWS = "".join(f"{i % 7},{(i * 3) % 11}\n" for i in range(40))


def _entries() -> list[dict]:
    rng = np.random.default_rng(0)
    wide = ",".join(f"c{j}" for j in range(10_000)) + "\n"
    wide += "".join(",".join(str((i + j) % 5) for j in range(10_000)) + "\n" for i in range(3))
    wide100 = ",".join(f"c{j}" for j in range(100)) + "\n"
    wide100 += "".join(",".join(map(str, row)) + "\n" for row in rng.integers(0, 10, (30, 100)))
    long_cell = "x" * 2_000_000
    ids = "".join(f"user{i:05d},{i % 3}\n" for i in range(500))
    numeric_schema = {"columns": [{"name": "a", "kind": "numeric", "lo": 0, "hi": 10},
                                  {"name": "b", "kind": "numeric", "lo": 0, "hi": 10}]}
    return [
        # name, bytes, load, synth, schema
        ("empty.csv", b"", "empty", None, None),
        ("whitespace_only.csv", b"   \n \t \n\n", "empty", None, None),
        ("only_newlines.csv", b"\n\n\n\n", "empty", None, None),
        ("header_only.csv", b"a,b\n", "no data rows", None, None),
        ("header_only_crlf.csv", b"a,b\r\n", "no data rows", None, None),
        ("one_row.csv", b"a,b\n1,2\n", "ok", "constant", None),
        ("one_row_with_schema.csv", b"a,b\n1,2\n", "ok", "ok", numeric_schema),
        ("duplicate_headers.csv", b"a,a\n1,2\n3,4\n", "duplicate column", None, None),
        ("duplicate_headers_spaces.csv", b"a, a\n1,2\n3,4\n", "duplicate column", None, None),
        ("empty_header_name.csv", b"a,\n1,2\n3,4\n", "empty name", None, None),
        ("non_utf8_latin1.csv", "name,v\ncaf\xe9,1\nna\xefve,2\n".encode("latin-1"), "not UTF-8", None, None),
        ("utf16.csv", "a,b\n1,2\n3,4\n".encode("utf-16"), "not UTF-8", None, None),
        ("binary_garbage.csv", bytes(rng.integers(128, 256, 4096, dtype=np.uint8)), "not UTF-8", None, None),
        ("nul_bytes.csv", b"a,b\n1,\x002\n3,4\n", "NUL bytes", None, None),
        ("bom_utf8.csv", b"\xef\xbb\xbfa,b\n" + GOOD_ROWS.encode(), "ok", "ok", None),
        ("crlf_endings.csv", b"a,b\r\n" + GOOD_ROWS.replace("\n", "\r\n").encode(), "ok", "ok", None),
        ("semicolon_delimiter.csv", (b"a;b\n" + GOOD_ROWS.replace(",", ";").encode()), "ok", "ok", None),
        ("trailing_delimiters.csv", b"a;b\n" + GOOD_ROWS.replace(",", ";").replace("\n", ";\n").encode(),
         "ok", "ok", None),
        ("tab_delimiter.csv", (b"a\tb\n" + GOOD_ROWS.replace(",", "\t").encode()), "ok", "ok", None),
        ("pipe_delimiter.csv", (b"a|b\n" + GOOD_ROWS.replace(",", "|").encode()), "ok", "ok", None),
        ("mixed_delimiters.csv", b"a,b\n" + GOOD_ROWS.replace(",", ";").encode(), "use one delimiter", None, None),
        ("more_fields_than_header.csv", b"a;b\n1;2;3\n4;5;6\n", "more fields than the header", None, None),
        ("ragged_long_rows.csv", b"a,b\n1,2\n3,4,5,6\n7,8\n", "could not parse", None, None),
        ("ragged_short_rows.csv", b"a,b,c\n1,2,3\n4\n5,6,7\n", "ok", "missing", None),
        ("unterminated_quote.csv", b'a,b\n1,"abc\n2,3\n', "could not parse", None, None),
        ("quoted_newlines_categorical.csv",
         b'n,kind\n1,"first\nline"\n2,"second"\n3,"first\nline"\n4,"second"\n5,"third, with comma"\n',
         "ok", "ok", None),
        ("escaped_quotes.csv", b'"we""ird",v\n"x""y",1\n"z",2\n"x""y",3\n', "ok", "ok", None),
        ("nan_values.csv", b"a,b\n1,NaN\n2,3\n4,5\n", "ok", "missing", None),
        ("na_strings.csv", b"a,b\n1,NA\n2,null\n3,\n4,5\n", "ok", "missing", None),
        ("all_missing_column.csv", b"a,b\n1,\n2,\n3,\n", "ok", "missing", None),
        ("inf_values.csv", b"a,b\n1,2\ninf,3\n4,5\n", "ok", "infinite", None),
        ("overflow_1e309.csv", b"a,b\n1,2\n1e309,3\n4,5\n", "ok", "infinite", None),
        ("huge_1e308.csv", b"a,b\n1e308,1\n-1e308,2\n0,3\n", "ok", "overflows", None),
        ("subnormal.csv", b"a,b\n1e-320,1\n0,2\n5e-324,3\n", "ok", "ok", None),
        ("huge_integer.csv", b"a,b\n123456789012345678901234567890,1\n2,2\n3,3\n", "ok", "ok", None),
        ("text_in_numeric_column.csv", b"a,b\n1,2\n3,abc\n5,6\n", "ok", "non-numeric", numeric_schema),
        ("thousands_separator.csv", b'a,b\n"1,000",2\n"2,500",3\n"3,000",4\n', "ok", "non-numeric", numeric_schema),
        ("constant_column.csv", b"a,b\n1,5\n2,5\n3,5\n", "ok", "constant", None),
        ("identifier_column.csv", b"id,v\n" + ids.encode(), "ok", "identifier", None),
        ("many_columns_10k.csv", wide.encode(), "the limit is 1000", None, None),
        ("many_columns_100.csv", wide100.encode(), "ok", "ok", None),
        ("long_line_2MB.csv", f"a,b\n1,{long_cell}\n2,{long_cell}y\n3,{long_cell}\n".encode(), "ok", "ok", None),
        ("formula_injection.csv",
         b"n,cell\n1,=cmd|' /C calc'!A0\n2,+1+1\n3,-2+3\n4,@SUM(A1:A9)\n5,=HYPERLINK(\"http://x\")\n6,safe\n",
         "ok", "ok", None),
        ("formula_in_header.csv", b"=1+2,@x\n1,a\n2,b\n3,a\n", "ok", "ok", None),
        ("html_page.csv", b"<!DOCTYPE html><html><body><h1>Not a CSV</h1></body></html>\n", "no data rows", None, None),
        ("json_document.csv", b'[{"a": 1, "b": 2}, {"a": 3, "b": 4}]', "no data rows", None, None),
        ("unicode_names.csv", "名前,值\nα,1\nβ,2\nα,3\n".encode(), "ok", "ok", None),
        ("boolean_words.csv", b"flag,v\ntrue,1\nfalse,2\nTrue,3\nFALSE,4\n", "ok", "ok", None),
    ]


def main() -> None:
    manifest = {}
    for name, raw, load, synth, schema in _entries():
        (HERE / name).write_bytes(raw)
        manifest[name] = {"load": load, "synth": synth, "schema": schema}
    (HERE / "manifest.json").write_text(json.dumps(manifest, indent=1, ensure_ascii=False) + "\n")


if __name__ == "__main__":
    main()
