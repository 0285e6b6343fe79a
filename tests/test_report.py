"""The JSON run report (reproducible through the CLI), the metric table and the HTML report."""

from __future__ import annotations

import json
import math
import re
import shlex

import numpy as np
import pandas as pd
import pytest

import privsyn_core as ps
from privsyn_core.cli import main as cli_main
from privsyn_core.data.datasets import two_blobs
from privsyn_core.data.io import to_csv_bytes
from privsyn_core.reporting import figures as F, report

SCHEMA = {"columns": [{"name": "a", "kind": "numeric", "lo": -1.0, "hi": 2.0},
                      {"name": "b", "kind": "numeric", "lo": -1.0, "hi": 2.0}]}


@pytest.fixture(scope="module")
def frame() -> pd.DataFrame:
    return pd.DataFrame(two_blobs(400, 2, rng=3), columns=["a", "b"])


@pytest.mark.parametrize("mechanism, params, neighbouring, n_synthetic", [
    ("dp_histogram", {"bins": 7, "sample": "uniform"}, "add_remove", None),
    ("pmm", {}, "replace", 250),
    ("laplace_points", {"resolution": 256}, "replace", None),
])
def test_the_reports_cli_command_reproduces_the_run(tmp_path, frame, mechanism, params, neighbouring, n_synthetic):
    epsilon = 0.7  # not exactly representable: the command must carry it exactly
    result = ps.synthesize(frame, mechanism, epsilon, schema=SCHEMA, neighbouring=neighbouring,
                           n_synthetic=n_synthetic, rng=11, **params)
    run = report.run_report(result, params=params, data_name="data.csv", release_mode=True)
    (tmp_path / "data.csv").write_bytes(to_csv_bytes(frame))
    (tmp_path / "schema.json").write_text(json.dumps(run["schema"]))
    argv = shlex.split(run["cli"])
    assert argv[:4] == ["python", "-m", "privsyn_core", "synth"]
    argv = [str(tmp_path / a) if a in ("data.csv", "schema.json", "synthetic.csv") else a for a in argv[3:]]
    assert cli_main(argv) == 0
    assert (tmp_path / "synthetic.csv").read_bytes() == to_csv_bytes(result.data)


def test_run_report_is_json_with_everything_needed(frame):
    result = ps.synthesize(frame, "dp_histogram", 1.3, schema=SCHEMA, rng=5)
    metrics = report.evaluate_subsampled(frame, result.data, ps.Schema.from_dict(SCHEMA), max_rows=200)
    run = report.run_report(result, params={"bins": None}, data_name="d.csv", data_sha256="abc", release_mode=False,
                            metrics=metrics, extra_ledger=[{"release": "bounds", "epsilon": 0.5}])
    text = json.dumps(run)
    back = json.loads(text)
    assert back["params"]["seed"] == 5 and back["epsilon"] == 1.3
    assert any("replays the noise" in w for w in back["warnings"])  # an explicit seed is said to replay the noise
    assert math.fsum(e for _, e in back["ledger"]) == 1.3
    assert back["schema"]["columns"][0]["lo"] == -1.0
    assert {"numpy", "scipy", "pandas", "pot", "plotly", "python", "privsyn-core"} <= set(back["versions"])
    assert back["teaching"]["metrics"]["_subsample"]["real"] == 200 and back["teaching"]["data_sha256"] == "abc"
    assert "--seed 5" in back["cli"] and "--param" not in back["cli"]  # bins=None (auto) is left out
    assert back["session_ledger"] == [{"release": "bounds", "epsilon": 0.5}]


def test_a_secure_run_says_it_cannot_be_reproduced(frame):
    result = ps.synthesize(frame, "dp_histogram", 1.0, schema=SCHEMA, rng="secure")
    run = report.run_report(result, params={}, data_name="d.csv", data_sha256="abc", release_mode=True)
    assert "seed" not in run["params"] and "--seed" not in run["cli"] and "cannot be replayed" in run["cli_note"]
    assert "teaching" not in run and "abc" not in json.dumps(run)  # release mode: no hash of the data


def test_metrics_table_flattens_any_evaluate_output():
    evaluation = {
        "w1": {"value": 0.12, "method": "exact", "floor": 0.05},
        "mmd": {"value": 0.01, "real_vs_real": {"value": 0.002, "rows": 100}},
        "tvd": {"order1": {"value": 0.2}, "order2": 0.3, "per_column": pd.DataFrame({"c": [1]})},
        "tstr": {"value": 0.8, "train_on_real": {"accuracy": 0.9}, "model": "m"},
        "note": "text only",
        "_subsample": {"real": 10},
    }
    table = report.metrics_table(evaluation).set_index("metric")
    assert list(table.index) == ["w1", "mmd", "tvd.order1", "tvd.order2", "tstr"]
    assert table.loc["w1", "real-vs-real floor"] == 0.05 and table.loc["w1", "details"] == "method=exact"
    assert table.loc["mmd", "real-vs-real floor"] == 0.002
    assert table.loc["tvd.order2", "value"] == 0.3
    assert table.loc["tstr", "real-vs-real floor"] == 0.9 and table.loc["tstr", "details"] == "model=m"


def test_html_report_is_self_contained_and_escapes_text(frame):
    result = ps.synthesize(frame, "dp_histogram", 1.0, schema=SCHEMA, rng=2)
    run = report.run_report(result, params={}, data_name="<b>evil</b>.csv", data_sha256="abc", release_mode=False)
    cells = result.diagnostics["cells"]
    scatter = F.units_scatter(result.unit_rows, [{"range": [0, 1]}] * 2, axes=(0, 1), labels=["x0", "x1"],
                              name="synthetic", colour="#d62728", title="synthetic")
    figures = [("Partition", F.partition_figure(cells)), ("Scatter", scatter)]
    summary = pd.DataFrame({"mechanism": ["dp_histogram"] * 2, "epsilon": [0.5, 2.0], "mean": [0.2, 0.1],
                            "std": [0.01, 0.01]})
    page = report.html_report(title="Report <script>", run=run, figures=figures,
                              ledger=[{"release": "dp_histogram", "epsilon": 1.0}],
                              metrics=report.metrics_table({"w1": {"value": 0.1, "floor": 0.05}}),
                              tradeoff=F.tradeoff_figure(summary), notes=["dp_valid = False: test"])
    assert page.startswith("<!DOCTYPE html>")
    assert len(re.findall(r"plotly\.js v\d", page)) == 1  # plotly.js inlined exactly once
    assert not re.search(r"<script[^>]+src=", page)  # nothing loaded from the network
    assert page.count('class="plotly-graph-div"') == 3
    assert "&lt;b&gt;evil&lt;/b&gt;.csv" in page and "<b>evil</b>" not in page
    assert "Report &lt;script&gt;" in page
    assert "--seed 2" in page and "dp_valid = False: test" in page and "0.05" in page


def test_theoretical_rates_follow_the_papers():
    assert report.theoretical_rate("pmm", 1.0, 10_000, 2) == pytest.approx(1e-2)
    assert report.theoretical_rate("pmm", 1.0, 1000, 1) == pytest.approx(math.log(1000) ** 2 / 1000)
    assert report.theoretical_rate("psmm", 2.0, 50, 3) == pytest.approx(100 ** (-1 / 3))
    assert report.theoretical_rate("srw_tsp", 1.0, 1000, 2) == pytest.approx((math.log(1000) ** 1.5 / 1000) ** 0.5)
    assert report.theoretical_rate("laplace_points", 4.0, 10, 2) == 0.25
    assert report.theoretical_rate("microagg_anon", 1.0, 10, 2) is None  # registered without a W1 rate


def test_fitted_rate_matches_measurements_that_follow_it_exactly():
    eps = np.array([0.1, 0.3, 1.0, 3.0])
    sweep = pd.DataFrame({"mechanism": "pmm", "epsilon": np.repeat(eps, 2), "n": 1000, "seed": [0, 1] * 4,
                          "w1": np.repeat(7.0 * (eps * 1000) ** -0.5, 2)})
    summary, rates = report.summarise_sweep(sweep, "epsilon", 2)
    np.testing.assert_allclose(rates["rate"], summary["mean"], rtol=1e-12)
    assert (summary["std"] == 0).all()


def test_tradeoff_sweep_runs_the_grid_and_reports_the_floor(frame):
    schema = ps.Schema.from_dict(SCHEMA)
    seen = []
    sweep = report.tradeoff_sweep(frame, schema, ["dp_histogram"], [0.5, 5.0], ns=[200, 400], seeds=[0, 1],
                                  eval_rows=150, progress=lambda f, text: seen.append(f))
    assert len(sweep) == 2 * 2 * 2
    assert set(sweep["n"]) == {200, 400} and (sweep["w1"] > 0).all()
    assert (sweep["floor"] > 0).all() and sweep.groupby("n")["floor"].nunique().eq(1).all()
    assert seen[0] == 0.0 and seen[-1] == 1.0

