"""The report's comparison page: for each run compared with the first (or with its
``runner.baseline``), the gates' verdicts first, then the judge/system split of each change
and the records that flipped, each linking to the record in the run's drill-down."""

from __future__ import annotations

from typing import Any

from evalkit.report._page import ci_text, e, fmt, section, table

MAX_FLIPS = 200  # flipped records listed per run (the rest are counted)


def comparison_section(compared: list[tuple[str, Any]], labels: dict[str, str]) -> str:
    """The section for ``compared``: (run id, :class:`~evalkit.comparison.Comparison`)."""
    gates, splits, flips = [], [], []
    for run_id, result in compared:
        name = labels.get(run_id, run_id)
        for g in result.gates:
            status = "pass" if g["passed"] else "FAIL"
            gates.append(f"<tr><td>{e(name)}</td><td><code>{e(g['gate'])}</code></td>"
                         f"<td class='gate-{status.lower()}'><b>{status}</b></td>"
                         f"<td>{e(g['verdict'])}</td></tr>")
        for r in result.rows:
            if r.get("judge_delta") is None or r.get("role") != "primary":
                continue
            splits.append(
                f"<tr><td>{e(name)}</td><td>{e(r['metric'])}</td><td>{e(r['slice'])}</td>"
                f"<td class='num'>{e(fmt(r['delta']))}</td><td class='num'>"
                f"{e(fmt(r['judge_delta']))}</td><td class='ci'>"
                f"{e(ci_text(r['judge_ci_low'], r['judge_ci_high']))}</td><td class='num'>"
                f"{e(fmt(r['system_delta']))}</td><td class='ci'>"
                f"{e(ci_text(r['system_ci_low'], r['system_ci_high']))}</td><td class='num'>"
                f"{e(fmt(r['n_same_output']))} / {e(fmt(r['n_pairs']))}</td></tr>")
        for f in result.flips[:MAX_FLIPS]:
            flips.append(
                f"<tr><td>{e(name)}</td><td>{e(f['metric'])}</td><td><a class='drill' "
                f"data-run-id='{e(run_id)}' data-record='{e(f['record_id'])}' "
                f"href='#record-{e(f['record_id'])}'>{e(f['record_id'])}</a></td>"
                f"<td class='change-{e(f['change'])}'>{e(f['change'])}</td>"
                f"<td>{'yes' if f['same_output'] else 'no'}</td></tr>")
        if len(result.flips) > MAX_FLIPS:
            flips.append(f"<tr><td colspan='5' class='note'>{len(result.flips) - MAX_FLIPS} "
                         "more: evalkit compare A B --flips</td></tr>")
    body = ""
    if gates:
        body += table(["run (B)", "gate", "", "verdict"], gates, "gates")
    changed = [f"<li>{e(labels.get(run_id, run_id))}: judge <b>{e(c['judge'])}</b> "
               f"{e(c['field'])} {e(c['a'])} → {e(c['b'])}</li>"
               for run_id, result in compared for c in result.judge_changes]
    if splits:
        body += ("<h3>Judge or system?</h3><p class='note'>The change on records whose output "
                 "is byte-identical in both runs can only be the judge's (model, prompt, "
                 "version); the rest is the system's. The two add up to B − A.</p>"
                 + (f"<ul>{''.join(changed)}</ul>" if changed else "")
                 + table(["run (B)", "metric", "slice", "B − A", "judge", "95% CI",
                          "system", "95% CI", "unchanged outputs"], splits, "split"))
    if flips:
        body += ("<h3>Records that flipped</h3>"
                 + table(["run (B)", "metric", "record", "change", "same output"], flips,
                         "flips"))
    return section("comparison", "Comparison: gates, judge or system, flips", body,
                   "Each run against the first (paired records; docs/trust.md).")
