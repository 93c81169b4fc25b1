"""``evalkit review``: one self-contained HTML page to label a drawn sample by hand, opened
from disk with no server and no network (a Content-Security-Policy allows no request and no
script without the page's nonce, as in the report).

One record at a time with its input, output and context; keys to label; the judge's verdict
hidden until asked for, so it cannot anchor the labeler; progress kept in the browser's
localStorage under the sample's id; **Export** downloads the JSONL file ``evalkit label
import`` reads (each row names the sample, so the design travels with the labels, and the run
whose output was shown: the label is of that output)."""

from __future__ import annotations

import json
import secrets
from html import escape
from importlib import resources
from pathlib import Path
from typing import Any

from evalkit.errors import LabelError
from evalkit.labels.importing import judge_scales

__all__ = ["review_page", "write_review"]

TEXT_LIMIT = 20_000  # characters of each text shown; the rest is cut and said so


def _cut(text: Any) -> str | None:
    if text is None:
        return None
    text = str(text)
    return text if len(text) <= TEXT_LIMIT else \
        text[:TEXT_LIMIT] + f" … [{len(text) - TEXT_LIMIT} more characters cut]"


def review_data(run_dir: Path, sample: list[dict[str, Any]], runs_dir: Path) -> dict[str, Any]:
    """What the page shows: the sampled records' texts, the judge's verdicts, its scale."""
    from evalkit.results.query import connect, run_query

    judge = sample[0]["judge"]
    ids = [r["record_id"] for r in sample]
    con = connect(runs_dir, run=run_dir)
    try:
        _, rows = run_query(con, "SELECT r.record_id, r.model, r.input, r.output, r.context, "
                            "j.value, j.label, j.explanation FROM records r LEFT JOIN "
                            "(SELECT * FROM judgments WHERE judge = ? AND status = 'ok') j "
                            "USING (record_id) WHERE r.record_id IN (SELECT unnest(?))",
                            params=[judge, ids])
        scale = judge_scales(con).get(judge)
    finally:
        con.close()
    found = {r[0]: r for r in rows}
    missing = [i for i in ids if i not in found]
    if missing:
        raise LabelError(f"review: {len(missing)} sampled record(s) are not in run "
                         f"{run_dir.name} (first: {missing[0]!r})")
    records = []
    for rid in ids:
        _, model, inp, out, ctx, value, label, why = found[rid]
        records.append({"id": rid, "model": model, "input": _cut(inp), "output": _cut(out),
                        "context": [_cut(c) for c in (ctx or [])][:20],
                        "verdict": {"value": value, "label": label, "explanation": _cut(why)}})
    labels = sorted(scale.labels) if scale and scale.labels and scale.low is None else []
    return {"sample_id": sample[0]["sample_id"], "judge": judge,
            "design": sample[0]["design"], "run_id": sample[0]["run_id"], "labels": labels[:9],
            "records": records}


def review_page(data: dict[str, Any]) -> str:
    """The whole page for ``data`` (:func:`review_data`)."""
    nonce = secrets.token_urlsafe(16)
    here = resources.files("evalkit.labels")
    css = here.joinpath("review.css").read_text()
    js = here.joinpath("review.js").read_text()
    payload = (json.dumps(data, ensure_ascii=False).replace("<", "\\u003c")
               .replace("\u2028", "\\u2028").replace("\u2029", "\\u2029"))
    csp = (f"default-src 'none'; style-src 'unsafe-inline'; img-src data:; "
           f"script-src 'nonce-{nonce}'; connect-src 'none'; form-action 'none'; "
           "base-uri 'none'")
    title = f"label {data['judge']} · {data['sample_id']}"
    return (f'<!DOCTYPE html><html lang="en"><head><meta charset="utf-8">'
            f'<meta http-equiv="Content-Security-Policy" content="{csp}">'
            f'<meta name="viewport" content="width=device-width, initial-scale=1">'
            f'<link rel="icon" href="data:,"><title>evalkit · {escape(title)}</title>'
            f"<style>{css}</style></head><body>{_BODY}"
            f'<script type="application/json" id="data">{payload}</script>'
            f'<script nonce="{nonce}">{js}</script></body></html>')


_BODY = """<header><b>evalkit</b> review · <span id="title"></span></header><main>
<div class="bar"><label>labeler <input id="labeler" placeholder="your name" size="16"></label>
<span id="progress"></span><button id="export" type="button">Export labels</button></div>
<p class="help">Keys: <kbd>1</kbd> yes (the judge's question holds: flagged)
<kbd>0</kbd> no <kbd>s</kbd> skip <kbd>←</kbd> <kbd>→</kbd> move <kbd>v</kbd> show or hide
the judge's verdict. Progress stays in this browser; Export downloads the file
<code>evalkit label import</code> reads.</p>
<section id="record"><h2 id="rid"></h2><div id="answer" class="answer"></div>
<h3>input</h3><pre id="input"></pre><h3>output</h3><pre id="output"></pre>
<h3>context</h3><div id="context"></div>
<div id="choices" class="choices"></div>
<div id="verdict" class="verdict" hidden></div></section></main>"""


def write_review(run_dir: Path, sample: list[dict[str, Any]], runs_dir: Path,
                 out: Path) -> Path:
    """Write the review page of ``sample`` (rows of a drawn sample) to ``out``."""
    from evalkit.results.writer import atomic_path

    page = review_page(review_data(run_dir, sample, runs_dir))
    out.parent.mkdir(parents=True, exist_ok=True)
    with atomic_path(out) as tmp:
        tmp.write_text(page, encoding="utf-8")
    return out
