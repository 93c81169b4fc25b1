"""The report's ranking section, for runs on the same records (a sweep over candidates):
the runs best first by one metric, each with its interval and the range of ranks the paired
tests allow, then every pair's paired comparison (:mod:`evalkit.comparison.ranking`)."""

from __future__ import annotations

from typing import Any

from evalkit.report._page import ci_text, e, fmt, section, table


def ranking_section(ranking: Any, labels: dict[str, str]) -> str:
    """The section for ``ranking`` (a :class:`~evalkit.comparison.ranking.Ranking`); runs are
    named by ``labels`` (run id -> name)."""
    def name(run_id: str) -> str:
        return labels.get(run_id, run_id)

    level = f"{ranking.confidence:.0%}"
    rows = []
    for k, r in enumerate(ranking.runs):
        rows.append(f"<tr><td class='num'>{k + 1 if r.rank_low is not None else '—'}</td>"
                    f"<td><b>{e(r.rank)}</b></td><td>{e(name(r.run_id))}</td>"
                    f"<td class='num'>{e(fmt(r.value))}</td><td class='ci'>"
                    f"{e(ci_text(r.ci_low, r.ci_high))}</td><td class='num'>{e(fmt(r.n))}</td>"
                    f"<td>{e(ranking.versus_first(r) if k else r.note or '')}</td></tr>")
    pairs = []
    for p in ranking.pairs:
        sig = {True: "yes", False: "no", None: ""}[p["significant"]]
        words = (f"{name(p['better'])} better" if p["better"] else
                 "not distinguishable" if p["p_adjusted"] is not None else p["note"] or "")
        pairs.append(f"<tr><td>{e(name(p['a']))}</td><td>{e(name(p['b']))}</td>"
                     f"<td class='num'>{e(fmt(p['delta']))}</td><td class='ci'>"
                     f"{e(ci_text(p['ci_low'], p['ci_high']))}</td><td>{e(p['test'] or '')}"
                     f"</td><td class='num'>{e(fmt(p['p_value']))}</td><td class='num'>"
                     f"{e(fmt(p['p_adjusted']))}</td><td class='sig-{e(sig)}'>{e(words)}</td>"
                     f"<td class='num'>{e(fmt(p['n_pairs']))}</td></tr>")
    body = table(["#", "rank", "run", ranking.metric, f"{level} CI", "n", "against #1"], rows,
                 "ranking")
    if pairs:
        body += ("<h3>Every pair, paired on the shared records</h3>"
                 + table(["A", "B", "B − A", f"{level} CI (paired bootstrap)", "test", "p",
                          f"p ({ranking.correction})", "verdict", "pairs"], pairs,
                          "ranking-pairs"))
    why = f" ({ranking.why_metric})" if ranking.why_metric else ""
    note = (f"{ranking.caption()[0].upper()}{ranking.caption()[1:]}{why}. A run's rank range "
            "runs from 1 + the runs significantly better to the runs ranked less those "
            "significantly worse: runs whose range includes 1 are not distinguishable from "
            "#1.")
    return section("ranking", f"Ranking by {ranking.metric}", body, note)


def ranking_markdown(ranking: Any, labels: dict[str, str]) -> str:
    """The ranking as the Markdown summary's first lines (a PR comment, a job summary)."""
    from evalkit.report._ci import _md

    lines = [f"### Ranking by {_md(ranking.metric)}", "", _md(ranking.caption()), "",
             f"| rank | run | {_md(ranking.metric)} | 95% CI | against #1 |",
             "| --- | --- | ---: | ---: | --- |"]
    for k, r in enumerate(ranking.runs):
        lines.append(f"| {r.rank} | {_md(labels.get(r.run_id, r.run_id))} | {fmt(r.value)} | "
                     f"{ci_text(r.ci_low, r.ci_high)} | "
                     f"{_md(ranking.versus_first(r) if k else r.note or '')} |")
    return "\n".join(lines) + "\n\n"
