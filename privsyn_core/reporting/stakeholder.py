"""The stakeholder report: one self-contained HTML page, small (inline SVG, no JavaScript), in plain words.

The first screen opens with why the release is weak, when its figures say so (:mod:`privsyn_core.reporting.outlook`),
then says what was released, how much privacy it spent (this release and the total on this data), the neighbouring
relation, what the guarantee means and how the noise was drawn, with the severity of any floating-point exposure the
mechanism declares (:func:`privsyn_core.reporting.words.floating_point`).  In teaching mode a banner first says that
the report contains real data and must not be published, and a verdict per question follows, weakest first, with the
measured figures, their intervals and the real-vs-real floors (:mod:`privsyn_core.reporting.verdicts`).  In every
mode a section says what can be known about the accuracy without the real data: derived from the noise plan and
measured on public tables.  Then each column's distribution in its own units, the correlations and the method; the
technical details, the paper and the technical names of the noise come last, in the footer.  In release mode every
number comes from the release, the schema, the ledger or the public benchmark: nothing computed from the raw data.
Body text is plain words with a figure behind every claim (``tests/test_report_vocabulary.py`` checks it against
``tests/data/report_vocabulary.json``).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from html import escape
from typing import Any

import numpy as np
import pandas as pd

import privsyn_core as ps
from privsyn_core.manifest import describe
from privsyn_core.reporting import outlook, plot_data, svg_charts, verdicts, words
from privsyn_core.reporting.report import schema_encode
from privsyn_core.result import Release

STYLE = ("body{font-family:sans-serif;max-width:60em;margin:2em auto;padding:0 1em;color:#222}"
         ".first{border:2px solid #08519c;border-radius:6px;padding:1em 1.5em;background:#f7fbff}"
         ".warn{border-color:#b30000;background:#fff5f5}.figs svg{margin:0 1em 1em 0}"
         ".banner{border:3px solid #b30000;background:#fff0f0;color:#800;padding:0.8em 1.2em;font-weight:bold;"
         "border-radius:6px;margin-bottom:1em}.verdicts td{text-align:left;vertical-align:top}"
         ".weak{border-left:4px solid #b30000;padding-left:.6em}footer{margin-top:2em;color:#444}"
         "table{border-collapse:collapse}td,th{border:1px solid #ccc;padding:2px 6px;text-align:right}")

#: The banner of a report that holds real data (teaching mode).
REAL_DATA_BANNER = ("Contains real data: this report shows the real table's distributions and measures computed on "
                    "it. Do not publish or forward it outside the people who may see the data; share a report made "
                    "in release mode instead.")


def _correlations(df: pd.DataFrame, schema: dict) -> pd.DataFrame | None:
    numeric = [c["name"] for c in schema["columns"] if c["kind"] == "numeric"]
    return df[numeric].astype(float).corr().round(2) if len(numeric) > 1 else None


def _corr_matrix(frame: pd.DataFrame, schema: dict) -> np.ndarray:
    """Pearson correlations of every column in the unit cube (categories in their public order)."""
    return plot_data.correlation_matrix(schema_encode(frame, schema))


def build(*, release: Release, data_name: str, totals: dict[str, float], budget: float | None,
          real: pd.DataFrame | None = None, evaluation: dict[str, Any] | None = None,
          shaped: pd.DataFrame | None = None, ledger: Sequence[dict] = (),
          manifest: dict[str, Any] | None = None) -> str:
    """The report's HTML: one page, no scripts, in plain words.

    In release mode (``real`` and ``evaluation`` both ``None``) it holds the release only: what was released, the
    privacy promise, each column of the synthetic table, its correlations and the method.  In teaching mode it
    opens with a banner saying that it contains real data, and adds a verdict per question with its evidence and
    uncertainty (:mod:`privsyn_core.reporting.verdicts`), the real distributions beside the synthetic ones and the
    real correlations.  With the release's ``manifest`` (:mod:`privsyn_core.manifest`) it says how to check a copy
    of the file.
    """
    spec = ps.get_mechanism(release.mechanism)
    private = spec.is_private and release.dp_valid
    names = [c["name"] for c in release.schema["columns"]]
    rows = shaped if shaped is not None else release.data
    teaching = real is not None or evaluation is not None
    body = [f"<div class='banner'>{escape(REAL_DATA_BANNER)}</div>"] if teaching else []
    known = outlook.outlook(release) if private else None
    body.append(_first_box(release, spec, private, names, data_name, totals, budget, known))
    if teaching:
        body.append(_verdict_section(release, names, real, evaluation))
    if known is not None:
        body.append(_outlook_section(known, teaching))
    panels = plot_data.marginal_panels(rows, release.schema, real=real)
    figs, left_out = svg_charts.svg_small_multiples(panels)
    hint = plot_data.COMPARE_HINT + " (real data shown for review only)" if real is not None else ""
    caption = plot_data.MARGINALS_CAPTION + hint + ". " + plot_data.MARGINALS_NOTE
    body.append("<h2>Each column</h2><p>" + escape(caption + left_out, quote=False) + "</p>")
    body.append(f"<div class='figs'>{''.join(figs)}</div>")
    synthetic_corr = _correlations(rows, release.schema)
    if synthetic_corr is not None:
        real_corr = _correlations(real, release.schema) if real is not None else None
        how = ("compare the two tables cell by cell" if real_corr is not None
               else "1 when two columns rise together, -1 when one falls as the other rises")
        body.append(f"<h2>Correlations between numeric columns</h2><p>From -1 to 1; {how}.</p><h3>Synthetic</h3>"
                    + synthetic_corr.to_html(border=0, na_rep="-"))
        if real_corr is not None:
            body.append("<h3>Real (not private)</h3>" + real_corr.to_html(border=0, na_rep="-"))
    body.append(f"<h2>Method</h2><p>{escape(spec.title)}. {escape(words.METHOD_NOTE)}</p>")
    if manifest is not None:
        body.append(_manifest_section(manifest))
    body.append(f"<footer>{_details(release, spec, ledger)}{_sources(spec)}</footer>")
    return (f"<!DOCTYPE html><html><head><meta charset='utf-8'><title>Synthetic data report: "
            f"{escape(data_name)}</title><style>{STYLE}</style></head><body>{''.join(body)}</body></html>")


def _first_box(release: Release, spec: ps.MechanismSpec, private: bool, names: list[str], data_name: str,
               totals: dict[str, float], budget: float | None, known: outlook.Outlook | None) -> str:
    eps = release.epsilon
    total = math.fsum(totals.values())
    weak = known.weak if known else ()
    first = ([f"<p class='weak'><b>Weak release.</b></p><ul class='weak'>"
              f"{''.join(f'<li>{escape(w)}</li>' for w in weak)}</ul>"] if weak else [])
    first += [(f"<p><b>What was released:</b> {len(release.data):,} synthetic rows of {len(names)} column(s) "
              f"({escape(', '.join(names))}) standing in for the table <i>{escape(data_name)}</i>, made by "
              f"{escape(spec.title)}.</p>")]
    if private:
        first += [f"<p><b>Privacy spent:</b> epsilon = {eps:g} for this release; <b>{total:g}</b> in total on this "
                  "data" + (f" (budget {budget:g})" if budget else "") + ".</p>",
                  f"<p><b>Who is protected:</b> any one person, when tables differ by "
                  f"{escape(words.relation(release.neighbouring))}.</p>",
                  f"<p><b>What it means:</b> whatever anyone knew beforehand, seeing this release changes the odds "
                  f"of any conclusion about any one person by at most a factor of e<sup>epsilon</sup> = "
                  f"{math.exp(eps):.3g}. It says nothing about the table's accuracy: the section on accuracy below "
                  "gives what is known of it.</p>",
                  f"<p><b>How the noise was drawn:</b> {escape(words.floating_point(spec))}</p>"]
    else:
        first.append("<p><b>This is NOT a private release.</b> "
                     + escape(words.guarantee(spec.is_private, release.dp_valid)) + ". Do not share it as anonymised "
                     "data.</p>")
    return f"<div class='first{'' if private else ' warn'}'><h1>Synthetic data report</h1>{''.join(first)}</div>"


def _verdict_section(release: Release, names: list[str], real: pd.DataFrame | None,
                     evaluation: dict[str, Any] | None) -> str:
    """The verdicts (teaching mode: they read the real data), one sentence first."""
    evaluation = evaluation or {}
    real_corr = _corr_matrix(real, release.schema) if real is not None and len(names) > 1 else None
    synth_corr = _corr_matrix(release.data, release.schema) if len(names) > 1 else None
    found = verdicts.weakest_first(verdicts.all_verdicts(evaluation, real_corr, synth_corr, names))
    rows = (len(real) if real is not None else int(evaluation.get("_about", {}).get("n_real", len(release.data))))
    table = "".join(f"<tr><td><b>{escape(v.question)}</b></td><td>{escape(v.answer)}</td>"
                    f"<td>{escape(v.sentence)} {escape(v.evidence)}</td></tr>" for v in found)
    return ("<h2>Verdict (computed on the real data), weakest first</h2>"
            f"<p><b>{escape(verdicts.summary(found, release.epsilon, rows))}</b></p>"
            f"<table class='verdicts'><tr><th>Question</th><th>Answer</th><th>Evidence</th></tr>{table}</table>"
            f"<p>How the answers are decided: {escape(verdicts.RULES)}</p>" + _measured_table(evaluation))


def _measured_table(evaluation: dict[str, Any]) -> str:
    """The measured figures with their 95% intervals beside the same figure between two halves of the real data
    (the real-vs-real floor: the best reachable at this size), the farthest from its floor first."""
    rows = verdicts.measured(evaluation)
    if not rows:
        return ""
    body = "".join(f"<tr><td>{escape(m.label)}</td><td>{m.value:.3f} ({m.low:.3f} to {m.high:.3f})</td>"
                   f"<td>{m.floor:.3f} ({m.floor_low:.3f} to {m.floor_high:.3f})</td><td>{m.times_floor:.1f}</td></tr>"
                   for m in rows)
    return ("<h3>Measured figures, farthest from the real data first</h3><table class='verdicts'><tr><th>Measure "
            "(lower is better)</th><th>Synthetic against real (95% interval)</th><th>Two halves of the real data "
            f"(95% interval)</th><th>Times the two halves</th></tr>{body}</table>")


def _manifest_section(manifest: dict[str, Any]) -> str:
    """The release's manifest in plain words (:func:`privsyn_core.manifest.describe`): what was released and how
    anyone who receives the file can check it."""
    items = "".join(f"<li>{escape(line)}</li>" for line in describe(manifest))
    return f"<h2>What was released, and how to check it</h2><ul>{items}</ul>"


def _details(release: Release, spec: ps.MechanismSpec, ledger: Sequence[dict]) -> str:
    """Technical details in words (the exact names are in the JSON report)."""
    items = [("method", spec.title), ("epsilon", f"{release.epsilon:g}"),
             ("neighbouring tables differ by", words.relation(release.neighbouring)),
             ("privacy guarantee", words.guarantee(spec.is_private, release.dp_valid))]
    items += [(name.replace("_", " "), str(value)) for name, value in release.params.items() if value is not None]
    stages = "".join(f"<tr><td>{escape(str(stage).replace('_', ' '))}</td><td>{eps:g}</td></tr>"
                     for stage, eps in release.ledger)
    spends = "".join(f"<tr><td>{escape(str(e.get('release', '')))}</td><td>{float(e.get('epsilon', 0)):g}</td></tr>"
                     for e in ledger)
    return ("<details><summary>Technical details</summary><table>"
            + "".join(f"<tr><td>{escape(k)}</td><td>{escape(v)}</td></tr>" for k, v in items) + "</table>"
            + f"<p>Privacy spent per stage of this release:</p><table>{stages}</table>"
            + (f"<p>Releases on this data:</p><table>{spends}</table>" if spends else "") + "</details>")


def _outlook_section(known: outlook.Outlook, teaching: bool) -> str:
    """What can be known about the accuracy without the real data (:mod:`privsyn_core.reporting.outlook`)."""
    intro = ("What could be known without the real data, as a report made in release mode says it; the verdicts "
             "above are measured on the real data." if teaching else
             "This report cannot measure the quality of this table: in release mode it never reads the real data. "
             "What can be known without it follows, each figure with where it comes from.")
    signs = ("The warning signs are at the top of this report." if known.weak else
             "No figure below is a warning sign; they are expectations for a release of this kind, not "
             "measurements of this table.")
    derived = (f"<h3>Derived from the privacy budget (not measured)</h3><p>{escape(' '.join(known.derived))}</p>"
               if known.derived else "")
    return (f"<h2>How accurate is it?</h2><p>{escape(intro)} {escape(signs)}</p>{derived}"
            f"<h3>Measured on public tables</h3><p>{escape(' '.join(known.measured))}</p>")


def _sources(spec: ps.MechanismSpec) -> str:
    """The footnotes: the method's paper, the noise in technical terms, and the terms the body explains in words."""
    items = [f"Method: {spec.title}; {spec.citation}.",
             words.EXACT_NOISE_SOURCE if spec.floating_point_exposure is None else
             f"Floating-point exposure, in technical terms: {spec.floating_point_exposure}. {words.FLOAT_SOURCE}",
             *words.GLOSSARY]
    return "<h2>Notes and sources</h2><ul>" + "".join(f"<li>{escape(item)}</li>" for item in items) + "</ul>"
