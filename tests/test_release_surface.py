"""The release surface: nothing leaves the library, the CLI or the reports but what the ledger pays for.

For crafted neighbouring datasets ``D, D'`` every registered mechanism runs under every relation it
supports with the same explicit seed, so every noise draw is the same.  Every released field other
than the noise-derived rows (and their number) must then be identical: a field that differs is
read off the raw data, which is a leak (often a deterministic one: infinite epsilon).

Under add/remove the record count is private.  Rules that need it read either a count the caller
declares public (``public_n``, the same for ``D`` and ``D'``) or a noisy count; for the latter the
test *couples* the noise, the standard argument of a DP proof: ``D'`` has one more record, so its
count noise is shifted by -1 and both noisy counts coincide.  Everything derived from them must
then coincide too.

Channels: the API (:meth:`SynthResult.release` and its ``to_dict``, the output's columns and
dtypes, whether and how it fails), the CLI (``--report`` JSON, the release's manifest, stdout, stderr, the CSV's
header and dtypes; with ``--release-mode`` also on a record outside the schema) and the HTML report in release mode.
The app's release mode has its own test (``tests/test_app_release_surface.py``).  A new private mechanism is
covered by registering it; a non-private one (``bootstrap``, ``microagg_anon``) releases records or k-anonymous
averages, so its release only has to say that it is not private.
"""

from __future__ import annotations

import hashlib
import io
import json
import re
from contextlib import redirect_stderr, redirect_stdout
from typing import Any

import numpy as np
import pandas as pd
import pytest

import privsyn_core as ps
from privsyn_core.cli import main as cli_main
from privsyn_core.data.io import to_csv_bytes
from privsyn_core.engine import pipeline
from privsyn_core.mechanisms.base.spec import register
from privsyn_core.privacy import accounting, noise
from privsyn_core.reporting import report

SEED = 7
EPSILON = 1.0
#: A public record count for the add/remove runs that declare one (same for D and D').
PUBLIC_N = 600


def _base(n: int, d: int) -> pd.DataFrame:
    """``n`` records in the corner ``[0, 0.4]^d``: most of the cube is empty."""
    x = np.random.default_rng(123).random((n, d)) * 0.4
    return pd.DataFrame(x, columns=[f"x{j}" for j in range(d)])


def _schema(d: int, integer: bool = False) -> dict[str, Any]:
    return {"columns": [{"name": f"x{j}", "kind": "numeric", "lo": 0, "hi": 100 if integer else 1,
                         "integer": integer} for j in range(d)]}


def _pairs(relation: str, d: int) -> dict[str, tuple[pd.DataFrame, pd.DataFrame, dict[str, Any]]]:
    """Neighbouring pairs ``(D, D', schema)`` for a relation, on ``d`` columns."""
    base = _base(200, d)
    far = pd.DataFrame([[0.97] * d], columns=base.columns)
    outside = pd.DataFrame([[1.5] + [-0.2] * (d - 1)], columns=base.columns)
    ints = (_base(200, d) * 250).round().astype(np.int64)  # integer values in [0, 100]
    with_fraction = ints.astype(float)
    if relation == "replace":
        moved = base.copy()
        moved.iloc[0] = far.iloc[0]
        clipped = base.copy()
        clipped.iloc[0] = outside.iloc[0]
        with_fraction.iloc[0, 0] = 3.5
        return {"record moved into an empty region": (base, moved, _schema(d)),
                "record outside the public bounds": (base, clipped, _schema(d)),
                "integer column with one non-integer value": (ints, with_fraction, _schema(d, integer=False)),
                "declared integer column with one non-integer value": (ints, with_fraction, _schema(d, integer=True))}
    boundary = {f"n = {n} against {n + 1}": (_base(n, d), _base(n + 1, d), _schema(d)) for n in (255, 511)}
    return {"record added in an empty region": (base, pd.concat([base, far], ignore_index=True), _schema(d)),
            "record added outside the public bounds": (base, pd.concat([base, outside], ignore_index=True), _schema(d)),
            "integer column, added non-integer value": (
                ints, pd.concat([with_fraction, pd.DataFrame([[3.5] * d], columns=ints.columns)], ignore_index=True),
                _schema(d, integer=False)),
            **boundary}


def _pairs_for(name: str, relation: str) -> dict[str, tuple[pd.DataFrame, pd.DataFrame, dict[str, Any]]]:
    """The pairs of :func:`_pairs` for a mechanism; a Boolean-only one gets them thresholded to 0/1 columns
    declared ``lo=0, hi=1, integer`` (the only numeric columns it accepts)."""
    pairs = _pairs(relation, _dim(name))
    if ps.get_mechanism(name).data_kind != "boolean":
        return pairs
    schema = {"columns": [{**c, "lo": 0, "hi": 1, "integer": True} for c in _schema(_dim(name))["columns"]]}
    return {label: ((before > 0.2).astype(np.int64), (after > 0.2).astype(np.int64), schema)
            for label, (before, after, _) in pairs.items()}


def _cases() -> list[Any]:
    cases = []
    for spec in ps.list_mechanisms():
        if not spec.is_private:  # nothing of theirs is private (test_non_private_releases_say_so)
            continue
        if spec.implemented_by is not None:  # OpenDP's noise cannot be seeded: tests/test_peers.py runs these pairs
            continue
        for relation in spec.neighbouring:
            modes = ["public_n", "noisy_n"] if relation == "add_remove" else ["n_public"]
            cases += [pytest.param(spec.name, relation, mode, id=f"{spec.name}-{relation}-{mode}") for mode in modes]
    return cases


def _dim(name: str) -> int:
    spec = ps.get_mechanism(name)
    return 1 if spec.max_dim == 1 else 2


def _shifted_count_noise(monkeypatch: pytest.MonkeyPatch, shift: int) -> None:
    """Couple the noisy record count: ``D'`` (one more record) draws the same noise minus one."""
    draw = pipeline.discrete_laplace
    monkeypatch.setattr(pipeline, "discrete_laplace", lambda *a, **k: draw(*a, **k) + shift)


def _run(data: pd.DataFrame, name: str, relation: str, schema: dict, public_n: int | None,
         **params: Any) -> dict[str, Any]:
    """The API channel: the release's metadata, the output's columns and dtypes, or the failure."""
    try:
        result = ps.synthesize(data, name, EPSILON, schema=schema, neighbouring=relation, rng=SEED, public_n=public_n,
                               **params)
    except Exception as exc:  # an exception is a release too: it must not depend on the data
        return {"raised": f"{type(exc).__name__}: {exc}"}
    release = result.release()
    meta = release.to_dict()
    meta.pop("n_synthetic")  # noise-derived (under add/remove the output size is a noisy count)
    for noisy in ps.get_mechanism(name).released_noisy:  # declared functions of noisy released quantities
        meta["params"].pop(noisy, None)
    return {"release": meta, "columns": list(release.data.columns),
            "dtypes": [str(t) for t in release.data.dtypes], "result": result}


def _without(run: dict[str, Any], key: str) -> dict[str, Any]:
    return {k: v for k, v in run.items() if k != key}


@pytest.mark.parametrize("name, relation, mode", _cases())
def test_api_release_is_identical_on_neighbours(name, relation, mode, monkeypatch):
    public_n = PUBLIC_N if mode == "public_n" else None
    for label, (before, after, schema) in _pairs_for(name, relation).items():
        first = _run(before, name, relation, schema, public_n)
        if mode == "noisy_n":
            _shifted_count_noise(monkeypatch, len(before) - len(after))
        second = _run(after, name, relation, schema, public_n)
        monkeypatch.undo()
        assert _without(first, "result") == _without(second, "result"), f"{name}, {relation}: {label}"


@pytest.mark.parametrize("relation, mode", [("replace", "n_public"), ("add_remove", "public_n"),
                                            ("add_remove", "noisy_n")])
def test_marginal_tree_tree_branch_release_is_identical_on_neighbours(relation, mode, monkeypatch):
    """The registry's pairs run marginal_tree on two columns, where its default releases the joint by psmm: its tree
    (1-way marginals, selection, edges) is checked here on four columns, one of them an integer column with 21
    public values (measured one level per value), under both relations."""
    public_n = PUBLIC_N if mode == "public_n" else None
    pairs = _pairs(relation, 4)
    levelled = {"columns": [*_schema(3)["columns"], {"name": "x3", "kind": "numeric", "lo": 0, "hi": 20,
                                                     "integer": True}]}
    before, after, _ = pairs[next(iter(pairs))]
    pairs["few-valued integer column"] = ((before * 50).round(), (after * 50).round(), levelled)
    for label, (before, after, schema) in pairs.items():
        first = _run(before, "marginal_tree", relation, schema, public_n, joint_columns=1)
        if mode == "noisy_n":
            _shifted_count_noise(monkeypatch, len(before) - len(after))
        second = _run(after, "marginal_tree", relation, schema, public_n, joint_columns=1)
        monkeypatch.undo()
        assert "raised" not in first and first["release"]["params"]["branch"] == "tree", label
        assert _without(first, "result") == _without(second, "result"), f"marginal_tree, {relation}: {label}"


def _cli(tmp_path, data: pd.DataFrame, name: str, relation: str, schema: dict, public_n: int | None,
         tag: str, *extra: str) -> dict[str, Any]:
    folder = tmp_path / tag
    folder.mkdir()
    (folder / "in.csv").write_bytes(to_csv_bytes(data))
    (folder / "schema.json").write_text(json.dumps(schema))
    argv = ["synth", str(folder / "in.csv"), str(folder / "out.csv"), "--mechanism", name, "--epsilon", str(EPSILON),
            "--schema", str(folder / "schema.json"), "--neighbouring", relation, "--seed", str(SEED),
            "--report", str(folder / "report.json")]
    argv += ["--public-n", str(public_n)] if public_n is not None else []
    argv += list(extra)
    out, err = io.StringIO(), io.StringIO()
    with redirect_stdout(out), redirect_stderr(err):
        status = cli_main(argv)
    seen: dict[str, Any] = {"status": status, "stderr": err.getvalue(),
                            "stdout": re.sub(r"wrote \d+ synthetic rows", "wrote N synthetic rows", out.getvalue())
                            .replace(str(folder), "FOLDER")}
    if status == 0:
        report_json = json.loads((folder / "report.json").read_text())
        report_json.pop("n_synthetic")
        synthetic = pd.read_csv(folder / "out.csv")
        seen.update(report=report_json, header=list(synthetic.columns), dtypes=[str(t) for t in synthetic.dtypes],
                    manifest=_manifest_seen(folder))
    return seen


def _manifest_seen(folder) -> dict[str, Any]:
    """The manifest channel: everything but the file's SHA-256 and row count (functions of the noisy rows) and the
    release id (drawn at random: checked for its form, 32 hex digits, and never a function of the data)."""
    manifest = json.loads((folder / "out.manifest.json").read_text())
    assert manifest["file"].pop("sha256") == hashlib.sha256((folder / "out.csv").read_bytes()).hexdigest()
    manifest["release"].pop("n_synthetic")
    entry = manifest["ledger_entry"]
    if entry is not None:
        assert re.fullmatch(r"[0-9a-f]{32}", entry.pop("release_id"))
    return manifest


@pytest.mark.parametrize("name, relation, mode", _cases())
def test_cli_report_and_output_are_identical_on_neighbours(name, relation, mode, monkeypatch, tmp_path):
    public_n = PUBLIC_N if mode == "public_n" else None
    pairs = _pairs_for(name, relation)
    label = next(iter(pairs))  # the empty-region pair; the others go through the same code as the API test
    before, after, schema = pairs[label]
    first = _cli(tmp_path, before, name, relation, schema, public_n, "d")
    if mode == "noisy_n":
        _shifted_count_noise(monkeypatch, len(before) - len(after))
    second = _cli(tmp_path, after, name, relation, schema, public_n, "d_prime")
    assert first == second, f"{name}, {relation}: {label}"


#: Values of one record that no message may quote in release mode (issue 37).
SECRETS = ("Jane Doe 1961-04-02", "alice_smith")


@pytest.mark.parametrize("relation", ["replace", "add_remove"])
def test_cli_release_mode_answers_alike_whatever_one_record_holds(relation, monkeypatch, tmp_path):
    """Issue 37: a refusal quoted the values a schema did not admit (an exact answer about the data).  With
    ``--release-mode`` a neighbour whose one record holds text in a numeric column, a category the schema does not
    list and a missing value gets the same exit status, stdout, stderr and report as the table without it (the
    record goes through the declared rule); without it the refusal quotes the record (the detection case)."""
    schema = {"columns": [*_schema(2)["columns"], {"name": "c", "kind": "categorical", "categories": ["a", "b"]}]}
    before = _base(300, 2).assign(c=np.where(np.arange(300) % 2, "a", "b")).astype({"x0": object, "x1": object})
    secret = pd.DataFrame({"x0": [SECRETS[0]], "x1": [None], "c": [SECRETS[1]]})
    after = pd.concat([before.iloc[1:] if relation == "replace" else before, secret], ignore_index=True)
    seen = []
    for tag, data in (("d", before), ("d_prime", after)):
        if tag == "d_prime" and relation == "add_remove":
            _shifted_count_noise(monkeypatch, -1)
        seen.append(_cli(tmp_path, data, "dp_histogram", relation, schema, None, tag, "--release-mode"))
    assert seen[0]["status"] == 0 and seen[0] == seen[1]
    assert seen[1]["report"]["domain_policy"]["fallbacks"] == {"x0": 0.5, "x1": 0.5, "c": "a"}
    teaching = _cli(tmp_path, after, "dp_histogram", relation, schema, None, "teaching")  # refused before any noise
    assert teaching["status"] == 2 and any(s in teaching["stderr"] for s in SECRETS)


def _html(result: ps.SynthResult) -> str:
    run = report.run_report(result, params={}, data_name="data.csv", data_sha256="not shown", release_mode=True)
    page = report.html_report(title="release", run=run, ledger=[{"release": result.mechanism,
                                                                 "epsilon": result.epsilon}])
    page = re.sub(r"Generated [^ ]+ by", "Generated DATE by", page)
    return re.sub(r"<th>synthetic rows</th><td>\d+</td>", "<th>synthetic rows</th><td>N</td>", page)


@pytest.mark.parametrize("name, relation, mode", _cases())
def test_html_report_in_release_mode_is_identical_on_neighbours(name, relation, mode, monkeypatch):
    public_n = PUBLIC_N if mode == "public_n" else None
    before, after, schema = next(iter(_pairs_for(name, relation).values()))
    first = _run(before, name, relation, schema, public_n)
    if mode == "noisy_n":
        _shifted_count_noise(monkeypatch, len(before) - len(after))
    second = _run(after, name, relation, schema, public_n)
    if "raised" in first or "raised" in second:
        assert first == second
        return
    assert _html(first["result"]) == _html(second["result"])
    assert "not shown" not in _html(first["result"])


def test_the_check_detects_a_layout_read_off_the_exact_n(monkeypatch):
    """Detection: the pre-fix behaviour (PMM's depth rule reading the exact n under add/remove) is caught."""
    before, after, schema = _pairs("add_remove", 2)["n = 511 against 512"]
    honest = [_run(data, "pmm", "add_remove", schema, PUBLIC_N) for data in (before, after)]
    assert _without(honest[0], "result") == _without(honest[1], "result")
    exact = pipeline.PublicSize("exact", "declared", [], EPSILON)  # the mechanism then reads len(unit)
    monkeypatch.setattr(pipeline, "public_size", lambda *args: exact)
    # and no privacy map stated before the run, as before it existed (its map cannot read the exact n)
    monkeypatch.setattr(pipeline, "planned_ledger", lambda request, size, params, width: [])
    monkeypatch.setattr(pipeline, "check_planned", lambda spec, ledger, plan: None)
    leaky = [_run(data, "pmm", "add_remove", schema, PUBLIC_N) for data in (before, after)]
    assert leaky[0]["release"]["params"]["depth"] == 8 and leaky[1]["release"]["params"]["depth"] == 9


def test_noisy_count_is_its_own_ledger_stage_and_sums_to_epsilon():
    X = _base(300, 2)
    result = ps.synthesize(X, "pmm", 0.7, schema=_schema(2), neighbouring="add_remove", rng=1)
    stage, share = result.ledger[0]
    assert stage.startswith("record count n") and share == 0.7 - (0.7 - pipeline.SIZE_SHARE * 0.7)
    assert sum(1 for s, _ in result.ledger if s.startswith("record count")) == 1
    assert accounting.ledger_total(result.ledger) == 0.7
    assert result.params["size"] == result.release().params["noisy_n"]


def test_a_mechanism_that_reads_no_count_spends_nothing_on_it():
    result = ps.synthesize(_base(300, 2), "pmm", 1.0, schema=_schema(2), neighbouring="add_remove", rng=1, depth=6)
    assert not any(s.startswith("record count") for s, _ in result.ledger)
    assert "noisy_n" not in result.release().params and "accuracy_bound" not in result.params


def test_public_n_is_refused_under_replace():
    with pytest.raises(ps.errors.ParameterError, match="public_n"):
        ps.synthesize(_base(50, 2), "pmm", 1.0, schema=_schema(2), public_n=50)


def test_no_seed_is_chosen_or_recorded_by_default():
    result = ps.synthesize(_base(100, 2), "pmm", 1.0, schema=_schema(2))
    assert result.seed is None and "seed" not in result.release().params
    assert type(noise.resolve_rng(None)[0].bit_generator).__name__ == "ChaCha"


def test_registering_without_a_release_declaration_is_refused():
    with pytest.raises(RuntimeError, match="released"):
        register("undeclared", title="t", paper="p", data_kind="continuous", neighbouring=("replace",),
                             is_private=True, params={}, guarantee="g", description="d")(lambda unit, epsilon: None)


@pytest.mark.parametrize("name", [s.name for s in ps.list_mechanisms() if not s.is_private])
def test_non_private_releases_say_so(name):
    before, _, schema = next(iter(_pairs_for(name, "replace").values()))
    release = ps.synthesize(before, name, EPSILON, schema=schema, rng=1).release()
    assert release.dp_valid is False and release.epsilon == float("inf")
    assert any("not" in w and "private" in w for w in release.warnings)


def test_raw_data_warnings_are_teaching_only_and_the_cli_prints_them_on_request(tmp_path):
    df = _base(100, 2)
    df.loc[:9, "x0"] = 3.0  # 10% outside the public bounds
    df["extra"] = 1
    result = ps.synthesize(df, "pmm", 1.0, schema=_schema(2), rng=1)
    assert result.release().warnings == ("column(s) ['extra'] of the table are not in the schema and were left out",)
    assert result.diagnostics["teaching_warnings"] == [
        "10 of 100 values (10.0%) of column 'x0' lay outside its public bounds and were clipped; check the bounds"]
    (tmp_path / "in.csv").write_bytes(to_csv_bytes(df))
    (tmp_path / "schema.json").write_text(json.dumps(_schema(2)))
    argv = ["synth", str(tmp_path / "in.csv"), str(tmp_path / "out.csv"), "--mechanism", "pmm", "--epsilon", "1",
            "--schema", str(tmp_path / "schema.json")]
    for extra, shown in (([], False), (["--diagnostics", "--force"], True)):
        err = io.StringIO()
        with redirect_stderr(err), redirect_stdout(io.StringIO()):
            assert cli_main(argv + extra) == 0
        assert ("10 of 100 values" in err.getvalue()) == shown and "not in the schema" in err.getvalue()
