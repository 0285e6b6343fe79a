"""The stakeholder report: one self-contained HTML page, small (inline SVG, no JavaScript), in plain words.

The first screen says what was released, how much privacy it spent (this release and the total on
this data), the neighbouring relation and what the guarantee means.  Then each column's distribution
in its own units, the correlations, the metrics (teaching mode only, with their floors), the
mechanism with its paper by authors and title, and the technical details last.  In release mode
every number comes from the release, the schema or the ledger: nothing computed from the raw data.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from html import escape

import pandas as pd

import privsyn_core as ps
from privsyn_core.reporting import figures as F
from privsyn_core.result import Release, noise_statement

from . import words

STYLE = ("body{font-family:sans-serif;max-width:60em;margin:2em auto;padding:0 1em;color:#222}"
         ".first{border:2px solid #08519c;border-radius:6px;padding:1em 1.5em;background:#f7fbff}"
         ".warn{border-color:#b30000;background:#fff5f5}.figs svg{margin:0 1em 1em 0}"
         "table{border-collapse:collapse}td,th{border:1px solid #ccc;padding:2px 6px;text-align:right}")


def _correlations(df: pd.DataFrame, schema: dict) -> pd.DataFrame | None:
    numeric = [c["name"] for c in schema["columns"] if c["kind"] == "numeric"]
    return df[numeric].astype(float).corr().round(2) if len(numeric) > 1 else None


def build(*, release: Release, data_name: str, totals: dict[str, float], budget: float | None,
          real: pd.DataFrame | None = None, metrics: pd.DataFrame | None = None, shaped: pd.DataFrame | None = None,
          ledger: Sequence[dict] = ()) -> str:
    """The report's HTML.  ``real`` and ``metrics`` only in teaching mode (they read the raw data)."""
    spec = ps.get_mechanism(release.mechanism)
    private = spec.is_private and release.dp_valid
    names = [c["name"] for c in release.schema["columns"]]
    rows = shaped if shaped is not None else release.data
    eps = release.epsilon
    total = math.fsum(totals.values())
    first = [(f"<p><b>What was released:</b> {len(release.data):,} synthetic rows of {len(names)} column(s) "
              f"({escape(', '.join(names))}) standing in for the table <i>{escape(data_name)}</i>, made by "
              f"{escape(spec.title)}.</p>")]
    if private:
        spent = (f"<p><b>Privacy spent:</b> epsilon = {eps:g} for this release; <b>{total:g}</b> in total on this "
                 "data" + (f" (budget {budget:g})" if budget else "") + ".</p>")
        protected = (f"<p><b>Who is protected:</b> any one person, when tables differ by "
                     f"{escape(words.relation(release.neighbouring))}.</p>")
        meaning = (f"<p><b>What it means:</b> whatever anyone knew beforehand, seeing this release changes the odds "
                   f"of any conclusion about any one person by at most a factor of e<sup>epsilon</sup> = "
                   f"{math.exp(eps):.3g}. Statistics that do not depend on single people (averages, shares, trends) "
                   "stay usable; nothing in it is a real person's record.</p>")
        noise = f"<p><b>How the noise was drawn:</b> {escape(noise_statement(release.floating_point_exposure))}</p>"
        first += [spent, protected, meaning, noise]
    else:
        first += ["<p><b>This is NOT a private release.</b> "
                  + escape(words.guarantee(spec.is_private, release.dp_valid)) + ". Do not share it as anonymised "
                  "data.</p>"]
    body = [f"<div class='first{'' if private else ' warn'}'><h1>Synthetic data report</h1>{''.join(first)}</div>"]

    panels = F.marginal_panels(rows, release.schema, real=real)
    figs = F.svg_marginals(panels[:F.MARGINAL_MAX_COLUMNS])
    left_out = len(panels) - len(figs)
    caption = F.MARGINALS_CAPTION + (F.COMPARE_HINT + " (real data shown for teaching only)" if real is not None
                                     else "") + ". " + F.MARGINALS_NOTE
    body.append("<h2>Each column</h2><p>" + escape(caption, quote=False)
                + (f" The first {len(figs)} columns are drawn; {left_out} more are not." if left_out else "") + "</p>")
    body.append(f"<div class='figs'>{''.join(figs)}</div>")
    synthetic_corr = _correlations(rows, release.schema)
    if synthetic_corr is not None:
        body.append("<h2>Correlations between numeric columns</h2><p>From -1 to 1; compare the tables cell by "
                    "cell.</p><h3>Synthetic</h3>" + synthetic_corr.to_html(border=0))
        real_corr = _correlations(real, release.schema) if real is not None else None
        if real_corr is not None:
            body.append("<h3>Real (not private)</h3>" + real_corr.to_html(border=0))
    if metrics is not None:
        body.append("<h2>How close (teaching only: computed on the real data)</h2><p>Lower is better for every "
                    "distance; the floor is the value between two halves of the real data, the best any synthesizer "
                    "can show.</p>" + metrics.to_html(index=False, border=0))
    body.append(f"<h2>Method</h2><p>{escape(spec.title)}: {escape(words.paper(spec.paper))}.</p>")
    details = {"mechanism": release.mechanism, "epsilon": eps, "ledger": release.ledger,
               "neighbouring": release.neighbouring, "dp_valid": release.dp_valid, "params": release.params}
    body.append("<details><summary>Technical details</summary><pre>"
                + escape("\n".join(f"{k}: {v}" for k, v in details.items())) + "</pre>"
                + (pd.DataFrame(list(ledger)).to_html(index=False, border=0) if ledger else "")
                + "</details>")
    return (f"<!DOCTYPE html><html><head><meta charset='utf-8'><title>Synthetic data report: "
            f"{escape(data_name)}</title><style>{STYLE}</style></head><body>{''.join(body)}</body></html>")
