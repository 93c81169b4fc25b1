"""The table a run prints when it ends."""

from __future__ import annotations

import json
import os
import sys
from typing import TYPE_CHECKING, Any

import pyarrow as pa

if TYPE_CHECKING:
    from evalkit.config import RunConfig
    from evalkit.runner.result import RunResult

__all__ = ["print_job_line", "print_summary"]


def _num(value: float | None) -> str:
    if value is None:
        return "—"
    if value != value:  # NaN
        return "undefined"
    from evalkit.numbers import ZERO, plain

    if abs(value) < ZERO:  # rounding noise (a kappa of 8.86e-17) is 0
        return "0"
    return plain(value, 3)


def why_no_value(details: str | None) -> str:
    """Why a metric row has no value, from its ``details``: the metric's own reason, then
    what left its records unscored, most frequent first."""
    try:
        d = json.loads(details) if details else {}
    except ValueError:
        d = {}
    if not isinstance(d, dict):
        d = {}
    parts = [str(d["undefined"])] if d.get("undefined") else []
    for key in ("unscored_reasons", "unscored"):
        counts = d.get(key)
        if isinstance(counts, dict) and counts:
            flat = {k: v for k, v in counts.items() if isinstance(v, (int, float))}
            for sub in counts.values():  # {"prob": {...}, "correct": {...}}
                if isinstance(sub, dict):
                    flat.update({k: v for k, v in sub.items() if isinstance(v, (int, float))})
            top = sorted(flat.items(), key=lambda kv: -kv[1])[:2]
            parts.append("unscored: " + "; ".join(f"{k} ({v:g})" for k, v in top))
            break
    return " · ".join(parts) or "the metric gave no reason (see metrics.details)"


def offline_judges(rc: RunConfig) -> set[str]:
    """The judges of ``rc`` in offline mode (stand-in scores, not judgments)."""
    return {inst.name for inst in rc.judges if getattr(inst.config, "offline", False)}


def endpoint_line(endpoint: str, stats: dict) -> str | None:
    """How an endpoint's limits went, when it pushed back (None when it never did)."""
    refused, overloaded = stats.get("refusals") or 0, stats.get("overloads") or 0
    rate, window = stats.get("rate_per_s"), stats.get("in_flight")
    if not (refused or overloaded or rate or window):
        return None
    settled = [f"{rate:.3g} calls/s" if rate else "", f"{window} in flight" if window else ""]
    # (refused until the time budget ran out: the pace it was left at was never taken)
    where = "answered nothing" if stats.get("answered") == 0 else \
        f"settled at {', '.join(s for s in settled if s) or 'no limit'}"
    return (f"endpoint {endpoint}: {refused} refused (429), {overloaded} overloaded; "
            f"{where}; paused {stats.get('paused_s') or 0:.3g} s")


def merge_endpoint_stats(a: dict[str, Any] | None, b: dict[str, Any]) -> dict[str, Any]:
    """One endpoint's limits as two callers of it saw them (the judges', the generate
    stage's): refusals, overloads and pauses added, the lower rate and window they settled
    at (null: that caller was never slowed)."""
    if not a:
        return dict(b)

    def lower(key: str) -> Any:
        values = [v for v in (a.get(key), b.get(key)) if v is not None]
        return min(values) if values else None

    def total(key: str) -> Any:
        return (a.get(key) or 0) + (b.get(key) or 0)

    return {**a, **b, "rate_per_s": lower("rate_per_s"), "in_flight": lower("in_flight"),
            "refusals": total("refusals"), "overloads": total("overloads"),
            **({"answered": total("answered")} if "answered" in a or "answered" in b else {}),
            "paused_s": round(total("paused_s"), 3)}


def corrected_lines(rows: list[dict[str, Any]]) -> list[str]:
    """The corrected value beside the judge's, one line per ``corrected`` metric (slice
    ``all``)."""
    from evalkit.estimation.readout import corrected_readouts

    def one(part: dict[str, Any] | None) -> str:
        if part is None:
            return "-"
        if part["value"] is None:
            return "no value"
        ci = f" [{_num(part['low'])}, {_num(part['high'])}]" if part["low"] is not None else ""
        return _num(part["value"]) + ci

    lines = []
    for r in corrected_readouts(rows):
        c = r.get("corrected")
        how = (f" ({c['method']}, {c['n_labelled']} labels of {c['N']})"
               if c and c["value"] is not None else "")
        lines.append(f"corrected {r['name']}: {one(c)}{how} · judge alone {one(r.get('judge'))}"
                     f" · labels alone {one(r.get('human'))}"
                     + (f" · Rogan–Gladen {one(r['rogan_gladen'])}"
                        if r.get("rogan_gladen") else ""))
    return lines


def compact_lines(cells: list[tuple[str, ...]], width: int) -> list[str]:
    """The metrics table too wide for the terminal, a row a line (two when the name and its
    numbers do not fit on one): ``name [slice]  value [ci]  raw r  n/e/j/u``. Names are never
    cut; a block of seven lines a row made a 46-row audit 322 lines long."""
    out = []
    for name, slice_, value, ci, raw, counts in cells:
        numbers = "  ".join(p for p in (f"{value} {ci}".strip(), f"raw {raw}" if raw else "",
                                        counts) if p)
        head = f"{name} [{slice_}]"
        if len(head) + 2 + len(numbers) <= width:
            out.append(f"{head}  {numbers}")
        else:
            out += [head, f"    {numbers}"]
    return out


def print_job_line(rc: RunConfig, result: RunResult) -> None:
    """A sweep job's one line: its run and counts (the closing table shows its metrics)."""
    m = result.manifest
    fired = result.alerts.num_rows
    job = (rc.sweep or {}).get("job")
    print(f"job {job}: run {result.run_id} · {m['n_records']} records · {m['n_excluded']} "
          "excluded" + (f" · {m['n_rejects']} rejected" if m["n_rejects"] else "")
          + (f" · {fired} alert{'s' if fired != 1 else ''}" if fired else "")
          + f" · {m['duration_s']:.2f} s", flush=True)


def print_summary(rc: RunConfig, result: RunResult, rejects: pa.Table) -> None:
    from rich.console import Console
    from rich.table import Table

    from evalkit.safetext import markup as escape  # every text from data goes through it
    from evalkit.safetext import visible

    # a pipe gets 120 columns unless COLUMNS says otherwise (rich reads it)
    console = Console(width=None if sys.stdout.isatty() or os.environ.get("COLUMNS") else 120)
    m = result.manifest
    console.print(f"[bold]evalkit[/] · {escape(rc.experiment)} · run {escape(result.run_id)} "
                  f"({m['duration_s']:.2f} s)")
    excluded = ", ".join(f"{escape(k)} {v}" for k, v in m["excluded_by"].items()) or "none"
    console.print(
        f"records {m['n_records']} · excluded {m['n_excluded']} ({excluded}) · "
        f"judged {m['n_records'] - m['n_excluded']} · rejected {m['n_rejects']}"
        + (" [yellow](see the rejects table)[/]" if m["n_rejects"] else "")
    )
    cached = m.get("judgments_cached") or {}
    offline = offline_judges(rc)
    if result.judgment_counts:
        causes = m.get("judgment_errors") or {}
        jt = Table(title="judgments", title_justify="left", header_style="bold")
        for col in ("judge", "ok", "error", "skipped"):
            jt.add_column(col, justify="left" if col == "judge" else "right")
        if causes:
            jt.add_column("errors by cause", overflow="fold")
        if cached:
            jt.add_column("from cache", justify="right")
        for judge, by_status in result.judgment_counts.items():
            row = [escape(judge + (" [OFFLINE]" if judge in offline else "")),
                   *(str(by_status.get(s, 0)) for s in ("ok", "error", "skipped"))]
            if causes:
                by_cause = sorted((causes.get(judge) or {}).items(), key=lambda kv: -kv[1])
                row.append(", ".join(f"{escape(cause)} {n}" for cause, n in by_cause))
            if cached:
                row.append(str(cached.get(judge, 0)))
            jt.add_row(*row)
        console.print(jt)
    for endpoint, stats in (m.get("endpoints") or {}).items():
        line = endpoint_line(endpoint, stats)
        if line:
            console.print(line, markup=False, highlight=False, soft_wrap=True)
    if cached:
        console.print(f"{sum(cached.values())} judgments came from the response cache "
                      "(no call, no cost)")
    if offline:
        console.print(f"[bold yellow]OFFLINE[/]: {escape(', '.join(sorted(offline)))} scored "
                      "without a model: deterministic stand-ins from content hashes "
                      "(origin='offline'), not judgments; metrics marked \\[offline] rest on "
                      "them")
    if m.get("dry_run"):
        et = Table(title="dry run: no judge was called; what a real run would send",
                   title_justify="left", header_style="bold")
        for col in ("judge", "calls", "cached", "input tokens", "output tokens", "cost"):
            et.add_column(col, justify="left" if col == "judge" else "right")
        for judge, est in (m["dry_run_estimates"] or {}).items():
            cost = est.get("cost_usd")
            et.add_row(escape(judge), *(str(est.get(k, 0)) for k in ("calls", "cached_calls",
                                                             "input_tokens", "output_tokens")),
                       "unknown" if cost is None else f"${cost:.4f}")
        console.print(et)
        console.print(f"written to {escape(result.run_dir)}/", soft_wrap=True)
        return
    elif m["judge_cost_usd"] or m["judge_calls_unpriced"]:
        from evalkit.judges.llm._progress import spend_text

        unpriced = m["judge_calls_unpriced"]
        console.print(f"judge spend {spend_text(m['judge_cost_usd'], unpriced)}"
                      + (f" ({unpriced} judgments with no known price; set the judge's "
                         "input_cost_per_mtok and output_cost_per_mtok)" if unpriced else ""))
    all_rows = result.metrics.to_pylist()
    raw = {(r["metric"][:-4], r["slice"]): r["value"] for r in all_rows
           if r["metric"].endswith(".raw")}
    rows = [r for r in all_rows
            if (rc.runner.summary_slices or r["slice"] == "all")
            and not r["metric"].endswith((".raw", ".filter_effect"))]
    offline_metrics = {inst.name for inst in rc.metrics
                       if offline & {getattr(inst.config, k, None)
                                     for k in ("judge", "judge_a", "judge_b")}}
    if rows:
        header = ("metric", "slice", "value", "95% CI", "raw", "n/excluded/judged/unscored")
        cells = []
        for r in rows:
            # a bound the data cannot reach is open (details.ci_open says why); a bootstrap's
            # bounds carry their Monte-Carlo error where it reaches the digits shown
            from evalkit.numbers import mc_suffix

            ci = ("" if r["ci_low"] is None and r["ci_high"] is None else
                  ("(open" if r["ci_low"] is None else f"[{_num(r['ci_low'])}") + ", "
                  + ("open)" if r["ci_high"] is None else f"{_num(r['ci_high'])}]")
                  + mc_suffix(r["ci_low"], r["ci_high"], r.get("details"), 3))
            key = (r["metric"], r["slice"])
            counts = "/".join(_num(r[k]) for k in ("n_attempted", "n_excluded", "n_judged",
                                                      "n_unscored"))
            name = r["metric"] + (" [offline]" if r["metric"].split(".")[0] in
                                  offline_metrics else "")
            cells.append((visible(name), visible(r["slice"]), _num(r["value"]), ci,
                           _num(raw[key]) if key in raw else "", counts))
        mt = Table(title="metrics (raw: before filters)", title_justify="left",
                   header_style="bold")
        for col in header:
            # names are never cut: a table too wide for them becomes one block per row
            mt.add_column(col, justify="left" if col in ("metric", "slice") else "right",
                          no_wrap=True)
        for row in cells:
            mt.add_row(escape(row[0]), escape(row[1]), *row[2:])
        # the table's natural width: every cell whole, and rich's borders and padding
        widths = [max(len(c) for c in col) for col in zip(header, *cells, strict=True)]
        natural = sum(widths) + 3 * len(widths) + 1
        if natural <= console.width:
            console.print(mt)
        else:
            console.print("[bold]metrics[/] (raw: before filters; counts: n/excluded/judged/"
                          "unscored)")
            console.print("\n".join(compact_lines(cells, console.width)), markup=False,
                          highlight=False, soft_wrap=True)
        hidden = sum(1 for r in all_rows if r["slice"] != "all") if not \
            rc.runner.summary_slices else 0
        if hidden:
            console.print(f"[dim]{hidden} per-slice rows not shown (runner.summary_slices=true,"
                          " or query the metrics table)[/]")
    # (wrapped at the console's width, as the table is: a reason can run to 200 characters)
    for line in corrected_lines(all_rows):
        console.print(escape(line))
    missing = [r for r in rows if r["value"] is None]
    for r in missing[:8]:
        console.print(f"[yellow]no value[/] {escape(r['metric'])} \\[{escape(r['slice'])}]: "
                      f"{escape(why_no_value(r.get('details')))}")
    if len(missing) > 8:
        console.print(f"[dim]… and {len(missing) - 8} more metrics with no value (their "
                      "reason is in metrics.details)[/]")
    for a in result.alerts.to_pylist():
        style = {"error": "bold red", "warning": "yellow"}.get(a["severity"], "cyan")
        console.print(f"[{style}]alert {escape(a['severity'])}[/]: {escape(a['message'])}")
        for hint in a.get("hints") or []:
            console.print(f"  [dim]hint:[/] {escape(hint)}")
    if rejects.num_rows:
        first = rejects.slice(0, 3).to_pylist()
        for r in first:
            console.print(f"[yellow]rejected[/] {escape(r['location'])}: {escape(r['reason'])}")
        if rejects.num_rows > 3:
            console.print(f"[dim]… and {rejects.num_rows - 3} more in the rejects table[/]")
    console.print(f"written to {escape(result.run_dir)}/ · evalkit query \"SELECT * FROM "
                  f"metrics WHERE run_id = '{escape(result.run_id)}'\"", soft_wrap=True)
