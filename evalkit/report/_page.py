"""The HTML page: sections rendered on the server side as escaped HTML with inline SVG charts,
the drill-down's data as JSON in a ``<script type="application/json">`` block (every ``<``
written as ``\\u003c``, so judged text can never close it), one small script that only ever
puts data into the page with ``textContent``, and a Content-Security-Policy that allows no
network request and no script without the page's nonce."""

from __future__ import annotations

import html
import math
import secrets
from collections import defaultdict
from importlib import resources
from typing import Any

from evalkit.judges.llm._progress import spend_text
from evalkit.report import _charts
from evalkit.report._data import RunData
from evalkit.report._gates import exit_status, gates

OPERATIONS = ("task_completion", "cost_per_success", "latency", "edit_rate", "bypass_rate")
SUFFIXES_AUX = (".raw", ".filter_effect")
MAX_METRIC_ROWS = 5_000  # rows of the full metrics table shown


def e(value: Any) -> str:
    """``value`` as escaped HTML text (quotes too, so it is safe in attributes)."""
    return html.escape("" if value is None else str(value), quote=True)


def fmt(v: Any) -> str:
    """How a metric value is shown: 4 significant digits, 0 for float noise, ∞ said."""
    if v is None:
        return "—"
    if isinstance(v, bool):
        return str(v).lower()
    if isinstance(v, int):
        return f"{v:,}"
    if math.isnan(v):
        return "—"
    if math.isinf(v):
        return "∞" if v > 0 else "−∞"
    if abs(v) < 5e-13:
        return "0"
    if abs(v) >= 1e4:
        return f"{v:,.0f}"
    return f"{v:.4g}"


def ci_text(lo: Any, hi: Any, details: Any = None) -> str:
    """An interval as text; a bound the data cannot reach (null, the row's
    ``details.ci_open`` says why) is shown open: ``[0.52, open)``. With the row's
    ``details``, a bootstrap's Monte-Carlo error follows where it reaches the 4 digits
    shown: ``[0.5213, 0.8407] ±0.002``."""
    if lo is None and hi is None:
        return ""
    from evalkit.numbers import mc_suffix

    return (f"[{fmt(lo)}" if lo is not None else "(open") + ", " + \
        (f"{fmt(hi)}]" if hi is not None else "open)") + \
        (mc_suffix(lo, hi, details) if details is not None else "")


def value_cell(row: dict[str, Any], key: str = "value") -> str:
    v = row.get(key)
    undefined = (row.get("details") or {}).get("undefined") or \
        (row.get("details") or {}).get("infinite")
    title = f' title="{e(undefined)}"' if undefined else ""
    data = "" if v is None else repr(float(v))
    return (f'<td class="num" data-metric="{e(row["metric"])}" data-slice="{e(row["slice"])}"'
            f' data-value="{e(data)}"{title}>{e(fmt(v))}</td>')


def chart(name: str, svg: str, caption: str = "") -> str:
    cap = f"<figcaption>{e(caption)}</figcaption>" if caption else ""
    return f'<figure class="chart" data-chart="{e(name)}">{svg}{cap}</figure>'


def section(key: str, title: str, body: str, note: str = "") -> str:
    if not body:
        return ""
    n = f'<p class="note">{e(note)}</p>' if note else ""
    return f'<section class="block" data-section="{e(key)}"><h2>{e(title)}</h2>{n}{body}</section>'


def table(head: list[str], rows: list[str], cls: str = "") -> str:
    th = "".join(f"<th>{e(h)}</th>" for h in head)
    return (f'<div class="scroll"><table class="{cls}"><thead><tr>{th}</tr></thead>'
            f"<tbody>{''.join(rows)}</tbody></table></div>")


# --- one run ---------------------------------------------------------------------------

def _by_key(metrics: list[dict[str, Any]]) -> dict[tuple[str, str], dict[str, Any]]:
    return {(m["metric"], m["slice"]): m for m in metrics}


def headline_rows(run: RunData) -> list[dict[str, Any]]:
    """The metric rows of slice ``all`` a reader looks at first: every metric but the raw and
    filter-effect companions (shown beside), crosstab categories (their own section) and
    pair counts."""
    out = []
    for m in run.metrics:
        name = m["metric"]
        if m["slice"] != "all" or name.endswith(SUFFIXES_AUX) or name.endswith(".n") \
                or m.get("plugin") == "crosstab":
            continue
        out.append(m)
    return out


def _headline(run: RunData) -> str:
    idx = _by_key(run.metrics)
    rows = []
    for m in headline_rows(run):
        raw = idx.get((m["metric"] + ".raw", "all"))
        effect = idx.get((m["metric"] + ".filter_effect", "all"))
        by_filter = ((effect or {}).get("details") or {}).get("by_filter") or {}
        moved = "; ".join(f"{f}: {v.get('n_excluded', 0)} set aside" for f, v in
                          by_filter.items())
        raw_ci = e(ci_text(raw["ci_low"], raw["ci_high"])) if raw else ""
        raw_cells = (value_cell(raw) + f'<td class="ci">{raw_ci}</td>') if raw else \
            '<td class="num muted">—</td><td></td>'
        what = (m.get("details") or {}).get("what") or ""
        name = m["metric"] + (" [offline]" if run.is_offline(m["metric"]) else "")
        rows.append(
            f'<tr><td class="metric" title="{e(what)}">{e(name)}</td>{value_cell(m)}'
            f'<td class="ci">{e(ci_text(m["ci_low"], m["ci_high"], m.get("details")))}</td>'
            f'{raw_cells}'
            f'<td class="num">{e(fmt(m["n_judged"]))} / {e(fmt(m["n_attempted"]))}</td>'
            f'<td class="num">{e(fmt(m["n_excluded"]))}</td>'
            f'<td class="num">{e(fmt(m["n_unscored"]))}</td><td class="muted">{e(moved)}</td></tr>')
    if not rows:
        return ""
    return table(["metric", "value (filtered)", "95% CI", "raw (before filters)", "raw CI",
                  "n used / attempted", "excluded", "unscored", "filter effect"], rows,
                 "headline")


def _offline(run: RunData) -> str:
    """A warning that some scores are offline stand-ins, so nobody reads them as judgments."""
    if not run.offline_judges:
        return ""
    return (f'<div class="offline" role="alert"><b>OFFLINE</b>: '
            f'{e(", ".join(run.offline_judges))} scored without a model: deterministic '
            "stand-ins from content hashes (origin='offline'), not judgments; metrics marked "
            "[offline] rest on them.</div>")


def _overview(run: RunData) -> str:
    m = run.manifest
    code, _why = exit_status(run)
    status = str(m.get("status"))
    if code:  # the files were written ("ok"), then a gate failed the run
        status = f"gate failed (exit {code})"
    items = [("status", status), ("exit status", "—" if code is None else str(code)),
             ("records", fmt(m.get("n_records"))),
             ("excluded", fmt(m.get("n_excluded"))), ("rejected", fmt(m.get("n_rejects"))),
             ("judgments", fmt(m.get("n_judgments"))),
             ("judge cost", spend_text(m.get("judge_cost_usd"),
                                       m.get("judge_calls_unpriced") or 0)),
             ("started", m.get("started_at")), ("duration", f"{m.get('duration_s') or 0:.2f} s")]
    cells = "".join(f'<div class="kv"><span>{e(k)}</span><b data-overview="{e(k)}">{e(v)}</b>'
                    f"</div>" for k, v in items)
    return f'<div class="overview">{cells}</div>'


def _gates(run: RunData) -> str:
    code, why = exit_status(run)
    rows = [f'<tr class="{"fail" if g.failure else "pass"}"><td>{e(g.name)}</td>'
            f'<td>{"failed" if g.failure else "passed"}</td>'
            f'<td class="wrap">{e(g.failure or g.note)}</td></tr>' for g in gates(run)]
    head = (f"<p>exit status {e('unknown' if code is None else code)}: {e(why)}</p>")
    return head + table(["gate", "result", "detail"], rows, "gates")


def _alerts(run: RunData) -> str:
    if not run.alerts:
        return ""
    rows = []
    for a in run.alerts:
        hints = a.get("hints") or a.get("hint") or []
        if isinstance(hints, str):
            hints = [hints]
        hint_html = "".join(f"<li>{e(h)}</li>" for h in hints)
        rows.append(f'<div class="alert sev-{e(a.get("severity"))}"><b>{e(a.get("severity"))}'
                    f'</b> {e(a.get("message"))} <span class="muted">({e(a.get("metric"))} '
                    f'[{e(a.get("slice"))}] = {e(fmt(a.get("value")))} {e(a.get("operator"))} '
                    f'{e(fmt(a.get("threshold")))})</span>'
                    + (f"<ul class='hints'>{hint_html}</ul>" if hint_html else "") + "</div>")
    return "".join(rows)


def _exclusions(run: RunData) -> str:
    if not run.exclusions:
        return ""
    rows = [f'<tr><td>{e(x["excluded_by"])}</td><td class="wrap">{e(x["exclude_reason"])}</td>'
            f'<td class="num">{e(fmt(x["n"]))}</td></tr>' for x in run.exclusions]
    n = run.manifest.get("n_records") or 0
    return (f"<p>{e(fmt(run.manifest.get('n_excluded')))} of {e(fmt(n))} records set aside "
            "before judging; they stay in the data and count in every raw number.</p>"
            + table(["filter", "reason", "records"], rows))


def _distributions(run: RunData) -> str:
    parts = []
    for d in run.judges:
        status = ", ".join(f"{k} {v:,}" for k, v in sorted(d.statuses.items()))
        if d.raw and sum(d.raw):
            parts.append(chart(f"dist:{d.name}", _charts.histogram(
                d.lo, d.hi, d.raw, d.filtered, f"{d.name}: scores"), status))
        if d.labels:
            parts.append(chart(f"labels:{d.name}", _charts.label_bars(
                d.labels, f"{d.name}: labels"), status))
    return f'<div class="grid">{"".join(parts)}</div>' if parts else ""


def _crosstabs(run: RunData) -> str:
    groups: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for m in run.metrics:
        if m.get("plugin") == "crosstab" and "category" in (m.get("details") or {}):
            groups[m["metric"].rsplit(".", 1)[0]].append(m)
    parts = []
    for name, rows in groups.items():
        cats = list(dict.fromkeys(r["details"]["category"] for r in rows))
        slices = list(dict.fromkeys(r["slice"] for r in rows))
        counts = {(r["slice"], r["details"]["category"]): int(r["details"].get("count") or 0)
                  for r in rows}
        d = rows[0]["details"]
        among = f", among {d['among']}" if d.get("among") else ""
        title = f"{name}: {d.get('judge')} {d.get('of')} × {d.get('by')}{among}"
        body = [f"<tr><td>{e(s)}</td>" + "".join(
            f'<td class="num">{e(counts.get((s, c), 0))}</td>' for c in cats)
            + f'<td class="num">{e(sum(counts.get((s, c), 0) for c in cats))}</td></tr>'
            for s in slices]
        parts.append('<div class="grid">' + chart(
            f"crosstab:{name}", _charts.stacked_shares(slices, cats, counts, title))
            + table(["slice", *cats, "records"], body, "crosstab") + "</div>")
    return "".join(parts)


def _calibration(run: RunData) -> str:
    parts = []
    for m in run.metrics:
        bins = (m.get("details") or {}).get("bins")
        if m.get("plugin") == "ece" and m["slice"] == "all" and bins:
            parts.append(chart(f"reliability:{m['metric']}", _charts.reliability(
                bins, f"{m['metric']}: ECE {fmt(m['value'])}"),
                f"{m['details'].get('prob')} against {m['details'].get('correct')}; "
                f"{m['n_judged']:,} of {m['n_attempted']:,} records usable, in {len(bins)} "
                f"bins ({m['details'].get('binning')})"))
    return f'<div class="grid">{"".join(parts)}</div>' if parts else ""


def _corrected(run: RunData) -> str:
    from evalkit.estimation.readout import corrected_readouts

    def cell(part: dict[str, Any] | None, name: str, sl: str) -> str:
        if part is None:
            return "<td></td><td></td>"
        if part["value"] is None:
            return f'<td class="muted" title="{e(part["undefined"])}">no value</td><td></td>'
        return (f'<td data-metric="{e(name)}" data-slice="{e(sl)}" '
                f'data-value="{part["value"]!r}">{fmt(part["value"])}</td>'
                f"<td>{ci_text(part['low'], part['high'])}</td>")

    rows = []
    for r in corrected_readouts(run.metrics, None):
        name, sl = r["name"], r["slice"]
        c = r.get("corrected") or {}
        cells = [cell(r.get(part), metric, sl) for part, metric in (
            ("corrected", name), ("judge", f"{name}.judge"), ("human", f"{name}.human"),
            ("rogan_gladen", f"{name}.rogan_gladen"))]
        rows.append(f"<tr><td>{e(name)}</td><td>{e(sl)}</td>{''.join(cells)}"
                    f"<td>{e(c.get('method') or '')}</td>"
                    f"<td>{e(c.get('n_labelled'))} / {e(c.get('N'))}</td></tr>")
    if not rows:
        return ""
    return table(["metric", "slice", "corrected", "CI", "judge alone", "CI", "labels alone",
                  "CI", "Rogan–Gladen", "CI", "method", "labelled / N"], rows)


def _agreement(run: RunData) -> str:
    cells: dict[tuple[str, str], dict[str, Any]] = {}
    names: list[str] = []
    for m in run.metrics:
        d = m.get("details") or {}
        if m.get("plugin") != "agreement" or m["slice"] != "all" or not d.get("a"):
            continue
        a, b = d["a"], d["b"]
        stat = m["metric"].rsplit(".", 1)[-1]
        cell = cells.setdefault((a, b), {"n": d.get("n_pairs")})
        cell[stat] = m["value"]
        names.extend(x for x in (a, b) if x not in names)
    parts = []
    if cells:
        parts.append(chart("agreement-matrix", _charts.agreement_matrix(
            names, cells, "agreement between judges and human labels"),
            "Cohen's kappa (colour) after each judge's threshold, Pearson's r of the scores, "
            "and the records both scored"))
    if run.scatter:
        s = run.scatter
        parts.append(chart("scatter", _charts.scatter(s["x"], s["y"], s["a"], s["b"], s["n"])))
    body = f'<div class="grid">{"".join(parts)}</div>' if parts else ""
    for m in run.metrics:
        d = m.get("details") or {}
        if m.get("plugin") == "judge_validation" and m["slice"] == "all" and \
                m["metric"].endswith(".accuracy") and d.get("confusion"):
            c = d["confusion"]
            body += (f"<h3>{e(m['metric'].rsplit('.', 1)[0])}: {e(d.get('a'))} against "
                     f"{e(d.get('b'))} ({e(fmt(m.get('n_judged')))} of "
                     f"{e(fmt(m.get('n_attempted')))} records both scored)</h3>" + table(
                         ["", "truth positive", "truth negative"],
                         [f"<tr><td>judge positive</td><td class='num'>{e(c.get('tp'))}</td>"
                          f"<td class='num'>{e(c.get('fp'))}</td></tr>",
                          f"<tr><td>judge negative</td><td class='num'>{e(c.get('fn'))}</td>"
                          f"<td class='num'>{e(c.get('tn'))}</td></tr>"]))
    by_key = _by_key(run.metrics)
    for name, queue in run.review.items():
        rows = queue["rows"]
        row = by_key.get((name, "all")) or {}
        used, attempted = row.get("n_judged"), row.get("n_attempted")
        if not rows:
            if not used:  # nothing could be compared: not "no disagreements"
                why = (row.get("details") or {}).get("undefined") or \
                    "no record has a usable score from both sides"
                body += (f"<h3>{e(name)}: no record could be compared (0 of "
                         f"{e(fmt(attempted or 0))}): {e(why)}</h3>")
            else:
                body += (f"<h3>{e(name)}: no disagreements among the {e(fmt(used))} of "
                         f"{e(fmt(attempted))} records both scored</h3>")
            continue
        a_name, b_name = rows[0].get("a_judge") or "a", rows[0].get("b_judge") or "b"
        head = ["record_id", a_name, b_name, "difference", "output", f"{a_name} says",
                f"{b_name} says"]
        trs = [f"<tr><td>{e(r.get('record_id'))}</td>"
               f"<td class='num'>{e(fmt(r.get('a_score')))}</td>"
               f"<td class='num'>{e(fmt(r.get('b_score')))}</td>"
               f"<td class='num'>{e(fmt(r.get('difference')))}</td>"
               f"<td class='wrap'>{e(_cut(r.get('output')))}</td>"
               f"<td class='wrap'>{e(_cut(r.get('a_explanation') or r.get('a_label')))}</td>"
               f"<td class='wrap'>{e(_cut(r.get('b_explanation') or r.get('b_label')))}</td>"
               "</tr>" for r in rows]
        shown = f"{len(rows):,} of {queue['n']:,}" if len(rows) < queue["n"] else \
            f"all {queue['n']:,}"
        compared = f" of {fmt(used)} compared" if used else ""
        body += (f"<h3>{e(name)}: review queue ({e(shown)} records{e(compared)}, largest "
                 f"difference first; the whole queue is review/{e(name)}.parquet)</h3>"
                 + table(head, trs))
    return body


def _cut(text: Any, n: int = 300) -> str:
    s = "" if text is None else str(text)
    return s if len(s) <= n else f"{s[:n]}… [{len(s) - n} characters cut]"


def _slices(run: RunData, plugins: tuple[str, ...] | None) -> str:
    """Forest plots of every metric with more than one slice (latency: bars per slice)."""
    by_metric: dict[str, list[dict[str, Any]]] = defaultdict(list)
    plugin_of: dict[str, str] = {}
    for m in run.metrics:
        if m["metric"].endswith(SUFFIXES_AUX) or m["metric"].endswith(".n") or \
                m.get("plugin") in ("crosstab", "agreement", "judge_validation", "corrected"):
            continue  # (corrected: every slice is in its own section's table)
        by_metric[m["metric"]].append(m)
        plugin_of[m["metric"]] = m.get("plugin") or ""
    parts = []
    empty = []  # metrics with no value in any slice: named, not drawn as empty charts
    latency: dict[str, dict[str, dict[str, Any]]] = defaultdict(dict)
    for name, rows in by_metric.items():
        plugin = plugin_of[name]
        if (plugins is None) == (plugin in OPERATIONS):
            continue
        if plugin == "latency" and "." in name:
            base, stat = name.rsplit(".", 1)
            for r in rows:
                latency[base].setdefault(r["slice"], {})[stat] = r["value"]
            continue
        if len(rows) < 2 and plugins is None:
            continue
        if not any(_finite(r["value"]) for r in rows):
            empty.append(name)
            continue
        parts.append(chart(f"slices:{name}", _charts.forest(
            [r["slice"] for r in rows], [r["value"] for r in rows],
            [r["ci_low"] for r in rows], [r["ci_high"] for r in rows],
            f"{name} by slice (95% CI)")))
    for base, per_slice in latency.items():
        slices = list(per_slice)
        stats = list(dict.fromkeys(s for v in per_slice.values() for s in v if s != "mean"))
        if not any(_finite(per_slice[x].get(s)) for x in slices for s in stats):
            empty.append(base)
            continue
        parts.insert(0, chart(f"latency:{base}", _charts.grouped_bars(
            slices, {s: [per_slice[x].get(s) for x in slices] for s in stats},
            f"{base}: percentiles by slice", "seconds")))
    body = f'<div class="grid">{"".join(parts)}</div>' if parts else ""
    if empty:
        body += (f"<p class='note'>No slice has a value for {e(', '.join(sorted(empty)))} "
                 "(the metrics table says why).</p>")
    return body


def _finite(v: Any) -> bool:
    return isinstance(v, (int, float)) and math.isfinite(v)


def _all_metrics(run: RunData) -> str:
    rows = []
    for m in run.metrics[:MAX_METRIC_ROWS]:
        rows.append(f'<tr><td>{e(m["metric"])}</td><td>{e(m["slice"])}</td>{value_cell(m)}'
                    f'<td class="ci">{e(ci_text(m["ci_low"], m["ci_high"], m["details"]))}'
                    f'</td><td class="num">{e(fmt(m["n_attempted"]))}</td>'
                    f'<td class="num">{e(fmt(m["n_excluded"]))}</td>'
                    f'<td class="num">{e(fmt(m["n_judged"]))}</td>'
                    f'<td class="num">{e(fmt(m["n_unscored"]))}</td></tr>')
    if not rows:
        return ""
    cut = len(run.metrics) - MAX_METRIC_ROWS
    note = f"<p class='note'>{cut:,} more rows not shown: evalkit query</p>" if cut > 0 else ""
    return (f"<details><summary>all {len(run.metrics):,} metric rows</summary>"
            + table(["metric", "slice", "value", "95% CI", "attempted", "excluded", "used",
                     "unscored"], rows, "all-metrics") + note + "</details>")


def _drill(run: RunData, k: int) -> str:
    d = run.drill
    cut = []
    if d["shown"] < d["total"]:
        cut.append(f"the first {d['shown']:,} of {d['total']:,} records are here "
                   f"(max_records {d['max_records']:,}); query the rest with evalkit query")
    cut.append(f"texts are cut to {d['text_chars']:,} characters, and say so where cut")
    if d["exchange_cut"]:
        cut.append(f"{d['exchange_cut']:,} judge exchanges left out to keep the page small "
                   "(judgments.exchange has them)")
    return (f'<div class="drill" data-drill="{k}">'
            '<div class="controls"><input type="search" class="q" placeholder="search id, '
            'input, output, labels, explanations…" aria-label="search records">'
            '<select class="f-model" aria-label="model"><option value="">every model</option>'
            '</select><select class="f-state" aria-label="state">'
            '<option value="">every record</option><option value="included">included</option>'
            '<option value="excluded">excluded by a filter</option>'
            '<option value="flagged">flagged by a judge</option>'
            '<option value="error">a judge errored</option></select>'
            '<span class="count"></span></div>'
            f'<p class="note">{e("; ".join(cut))}.</p>'
            '<div class="scroll"><table class="records"><thead><tr><th>record</th>'
            '<th>model</th><th>state</th><th>input</th><th>output</th><th>judgments</th>'
            '</tr></thead><tbody></tbody></table></div>'
            '<div class="pager"><button class="prev">‹ previous</button><span class="page">'
            '</span><button class="next">next ›</button></div>'
            '<div class="detail" hidden></div></div>')


def run_body(run: RunData, k: int) -> str:
    """Every section of one run (absent where the run has nothing to show)."""
    parts = [
        _overview(run),
        _offline(run),
        section("gates", "Gates the run checked", _gates(run)),
        section("alerts", "Alerts that fired", _alerts(run)),
        section("headline", "Headline numbers", _headline(run),
                "Filtered values are over the records the filters kept; raw values are over "
                "every record with a usable value. n used / attempted are the denominators."),
        section("filters", "What the filters set aside", _exclusions(run)),
        section("distributions", "Score distributions per judge: raw against filtered",
                _distributions(run)),
        section("crosstabs", "Crosstabs: flags and failure modes", _crosstabs(run)),
        section("calibration", "Calibration: reliability diagrams", _calibration(run)),
        section("agreement", "Judge agreement", _agreement(run)),
        section("corrected", "Corrected by human labels", _corrected(run),
                "The judge's rate over every record beside the rate corrected by human labels "
                "on a random sample of them (docs/labels.md); the judge's own interval covers "
                "the judge's rate, not the truth."),
        section("operations", "Task completion, cost, latency, edits", _slices(run, OPERATIONS)),
        section("slices", "Metrics by slice", _slices(run, None)),
        section("records", "Records", _drill(run, k)),
        section("metrics", "Metrics table", _all_metrics(run)),
    ]
    return "".join(p for p in parts if p)


# --- several runs ------------------------------------------------------------------------

def across_runs(runs: list[RunData], verdicts: list[dict[str, Any]], note: str) -> str:
    """Each headline metric across the runs (forest plots) and compare's verdicts against the
    first run."""
    names = list(dict.fromkeys(m["metric"] for r in runs for m in headline_rows(r)))
    labels = run_labels(runs)
    by_id = {r.run_id: label for r, label in zip(runs, labels, strict=True)}
    charts, empty = [], []
    for name in names[:30]:
        vals, lows, highs = [], [], []
        for r in runs:
            m = _by_key(r.metrics).get((name, "all"))
            vals.append(m["value"] if m else None)
            lows.append(m["ci_low"] if m else None)
            highs.append(m["ci_high"] if m else None)
        if all(v is None or not math.isfinite(v) for v in vals):
            empty.append(name)  # a chart of "undefined" rows says nothing: named below
            continue
        charts.append(chart(f"runs:{name}", _charts.forest(labels, vals, lows, highs,
                                                           f"{name} across runs (95% CI)")))
    body = f'<div class="grid">{"".join(charts)}</div>'
    if empty:
        body += (f"<p class='note'>No run has a value for {e(', '.join(empty))} (each run's "
                 "metrics table says why).</p>")
    rows = []
    for v in verdicts:
        sig = {True: "yes", False: "no", None: ""}[v.get("significant")]
        run_name = by_id.get(v["run"], v["run"])
        verdict = v.get("verdict") or sig
        rows.append(f"<tr><td>{e(run_name)}</td><td>{e(v['metric'])}</td><td>{e(v['slice'])}"
                    f"</td><td class='num'>{e(fmt(v['a']))}</td><td class='num'>{e(fmt(v['b']))}"
                    f"</td><td class='num'>{e(fmt(v['delta']))}</td><td class='ci'>"
                    f"{e(ci_text(v['ci_low'], v['ci_high']) or v.get('note') or '')}</td>"
                    f"<td class='sig-{e(sig)}'>"
                    f"{e(verdict)}</td></tr>")
    if rows:
        body += table(["run (B)", "metric", "slice", "A (first run)", "B", "B − A",
                       "95% CI (paired bootstrap)", "verdict (Holm-corrected)"], rows, "verdicts")
    if note:
        body += f"<p class='note'>{e(note)}</p>"
    return section("across", "Across runs", body)


def run_labels(runs: list[RunData]) -> list[str]:
    """Each run named by the overrides that tell it apart from the others
    (:func:`evalkit.run_names.names_by_overrides`)."""
    from evalkit.run_names import names_by_overrides

    return names_by_overrides([r.manifest.get("overrides") or [] for r in runs],
                              [r.run_id for r in runs])


def page(runs: list[RunData], across: str) -> str:
    """The whole page: header, the across-runs section, then each run (tabs when several)."""
    nonce = secrets.token_urlsafe(16)
    title = runs[0].experiment if len(runs) == 1 else \
        f"{len(runs)} runs: " + ", ".join(dict.fromkeys(r.experiment for r in runs))
    tabs = ""
    if len(runs) > 1:
        tabs = '<nav class="tabs">' + "".join(
            f'<button data-tab="{k}"{" class=on" if k == 0 else ""} title="{e(r.run_id)}">'
            f'{e(label)}</button>'
            for k, (r, label) in enumerate(zip(runs, run_labels(runs), strict=True))) + "</nav>"
    bodies = "".join(
        f'<div class="run" data-run="{k}" data-run-id="{e(r.run_id)}"'
        f'{"" if k == 0 else " hidden"}><h1 class="runtitle">{e(r.experiment)} · '
        f'<code>{e(r.run_id)}</code></h1>{run_body(r, k)}</div>' for k, r in enumerate(runs))
    data = "".join(
        f'<script type="application/json" id="drill-{k}">'
        f"{_json_for_script(r.drill['json'])}</script>"
        for k, r in enumerate(runs))
    css = resources.files("evalkit.report").joinpath("report.css").read_text()
    js = resources.files("evalkit.report").joinpath("report.js").read_text()
    csp = (f"default-src 'none'; style-src 'unsafe-inline'; img-src data:; "
           f"script-src 'nonce-{nonce}'; connect-src 'none'; form-action 'none'; "
           "base-uri 'none'")
    return (f'<!DOCTYPE html><html lang="en"><head><meta charset="utf-8">'
            f'<meta http-equiv="Content-Security-Policy" content="{csp}">'
            f'<meta name="viewport" content="width=device-width, initial-scale=1">'
            f'<link rel="icon" href="data:,"><title>evalkit · {e(title)}</title>'
            f"<style>{css}</style></head><body><header><b>evalkit</b> report · {e(title)}"
            f"</header><main>{across}{tabs}{bodies}</main>{data}"
            f'<script nonce="{nonce}">{js}</script></body></html>')


def _json_for_script(data: bytes) -> str:
    """JSON that is safe inside a ``<script>`` element: ``<`` (hence ``</script>`` and
    ``<!--``) and the two line separators JavaScript once treated as newlines are escaped;
    JSON.parse reads them back as the same characters."""
    return (data.replace(b"<", b"\\u003c").replace(b"\xe2\x80\xa8", b"\\u2028")
            .replace(b"\xe2\x80\xa9", b"\\u2029").decode())
