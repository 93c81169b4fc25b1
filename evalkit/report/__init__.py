"""Self-contained HTML reports of runs: ``write_report`` (one run, a before/after pair or a
sweep on one page, with a Markdown summary and a JUnit XML file beside it) and
``write_index`` (a page listing every run of a runs directory). Plotting (matplotlib) is
imported only here, when a report is written."""

from __future__ import annotations

import html
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from evalkit.errors import EvalkitError
from evalkit.report._data import Limits, RunData, load_run

__all__ = ["Limits", "ReportFiles", "write_index", "write_report"]

HTML_NAME = "report.html"
MD_NAME = "report.md"
JUNIT_NAME = "report.junit.xml"


@dataclass
class ReportFiles:
    """The files one report wrote, and how long it took."""

    html: Path
    markdown: Path
    junit: Path
    seconds: float = 0.0
    notes: list[str] = field(default_factory=list)
    # the runs' ranking shown on the page (a Ranking; None: not ranked), for a sweep's
    # closing table to show the same one (evalkit.report._sweep.shown_ranking)
    ranking: Any = None


def _write(path: Path, data: str | bytes) -> None:
    from evalkit.results.writer import atomic_path

    with atomic_path(path) as tmp:
        if isinstance(data, str):
            tmp.write_text(data, encoding="utf-8")
        else:
            tmp.write_bytes(data)


def _gates_of(run: RunData) -> list[Any]:
    """The gates in a run's config (``gates:``), as compare checks them."""
    from evalkit.comparison import GateConfig

    return [GateConfig(**g) for g in (run.manifest.get("config") or {}).get("gates") or []]


def _verdicts(runs: list[RunData], n_boot: int,
              compared: list[tuple[str, Any]] | None = None
              ) -> tuple[list[dict[str, Any]], str]:
    """``compare``'s rows (paired bootstrap) of every run against the first, and a note on
    what could not be compared; ``compared`` collects each run's whole comparison (its
    gates, splits and flips, for the comparison section)."""
    from evalkit.comparison import compare_runs

    if len(runs) < 2 or n_boot <= 0:
        return [], ("" if len(runs) < 2 else "compare's verdicts are off (n_boot 0)")
    out: list[dict[str, Any]] = []
    notes = []
    for run in runs[1:]:
        try:
            result = compare_runs(runs[0].run_dir, run.run_dir, n_boot=n_boot,
                                  max_boot=n_boot, gates=_gates_of(run))
        except (EvalkitError, TypeError, ValueError) as exc:
            notes.append(f"{run.run_id}: {exc}")
            continue
        if compared is not None:
            compared.append((run.run_id, result))
        out += [{"run": run.run_id, **row} for row in result.rows]
        out += [_corrected_verdict(run.run_id, c) for c in result.corrected]
    return out, "; ".join(notes) + (f" ({n_boot} paired resamples each)" if out else "")


def _ranking_of(runs: list[RunData], n_boot: int) -> tuple[str, str, Any]:
    """The ranking of runs on the same records (shadow runs, or ``sweep.rank_by`` set): its
    HTML section and Markdown lines, or a note on why they could not be ranked; empty when
    there is nothing to rank. Third, the ranking itself (None when there is none)."""
    from evalkit.comparison.ranking import rank_sweep
    from evalkit.report._page import e, run_labels, section
    from evalkit.report._ranking import ranking_markdown, ranking_section

    try:
        ranking = rank_sweep([r.run_dir for r in runs], n_boot=max(n_boot, 2))
    except (EvalkitError, OSError, ValueError) as exc:
        return (section("ranking", "Ranking", f"<p class='note'>Not ranked: {e(exc)}</p>"),
                f"Not ranked: {exc}\n\n", None)
    if ranking is None:
        return "", "", None
    labels = dict(zip([r.run_id for r in runs], run_labels(runs), strict=True))
    return ranking_section(ranking, labels), ranking_markdown(ranking, labels), ranking


def _corrected_verdict(run_id: str, c: dict[str, Any]) -> dict[str, Any]:
    """A ``corrected`` metric's change as a row of the verdicts table: PPI++ on the paired
    differences (not a tested row: no verdict, not counted among the significant ones)."""
    from evalkit.report._page import fmt

    judge = f"judge alone {fmt(c['judge_delta'])}"
    return {"run": run_id, "metric": f"{c['metric']} (corrected, paired PPI++)",
            "slice": c["slice"], "a": None, "b": None, "delta": c["value"],
            "ci_low": c["ci_low"], "ci_high": c["ci_high"], "significant": None,
            "verdict": f"{c.get('n_labelled') or 0} labelled pairs; {judge}",
            "note": c["undefined"]}


def write_report(run_dirs: list[Path], out_dir: Path | None = None,
                 limits: Limits | None = None, n_boot: int = 200) -> ReportFiles:
    """Write ``report.html``, ``report.md`` and ``report.junit.xml`` for ``run_dirs`` (one
    page; several runs are compared against the first with ``compare``'s paired bootstrap)
    into ``out_dir`` (default: the last run's directory)."""
    from evalkit.report._ci import junit, markdown
    from evalkit.report._page import across_runs, page

    if not run_dirs:
        raise EvalkitError("report: name at least one run")
    t0 = time.perf_counter()
    limits = limits or Limits()
    if len(run_dirs) > 1:  # the drill-down's records are shared out among the runs
        limits = Limits(max(1, limits.max_records // len(run_dirs)), limits.text_chars,
                        limits.exchange_bytes // len(run_dirs))
    runs = [load_run(Path(d), limits) for d in run_dirs]
    compared: list[tuple[str, Any]] = []
    verdicts, note = _verdicts(runs, n_boot, compared)
    across = across_runs(runs, verdicts, note) if len(runs) > 1 else ""
    ranked, ranked_md, ranking = _ranking_of(runs, n_boot) if len(runs) > 1 else \
        ("", "", None)
    across = ranked + across
    if compared:
        from evalkit.report._comparison import comparison_section
        from evalkit.report._page import run_labels

        labels = dict(zip([r.run_id for r in runs], run_labels(runs), strict=True))
        across = comparison_section(compared, labels) + across  # the gates' verdict first
    target = Path(out_dir) if out_dir is not None else runs[-1].run_dir
    target.mkdir(parents=True, exist_ok=True)
    files = ReportFiles(target / HTML_NAME, target / MD_NAME, target / JUNIT_NAME,
                        ranking=ranking)
    _write(files.html, page(runs, across))
    _write(files.markdown, ranked_md + markdown(runs, verdicts, HTML_NAME))
    _write(files.junit, junit(runs))
    files.seconds = time.perf_counter() - t0
    return files


def _usable(con: Any, path: Path, table: str, check: Any, say: Any) -> bool:
    """Whether ``path`` reads as a ``table`` table; a warning line when not."""
    problem = check(con, path, table)
    if problem:
        say(problem)
    return problem is None


def write_index(runs_dir: Path) -> Path:
    """``RUNS_DIR/index.html``: every run (experiment, time, status, headline metrics,
    alerts), newest first, linking to each run's report where one was written."""
    import duckdb

    from evalkit.report._page import e, fmt
    from evalkit.results.runfiles import check_table, skipped
    from evalkit.results.runs import read_manifest as checked_manifest
    from evalkit.results.runs import run_manifests

    runs_dir = Path(runs_dir)
    if not runs_dir.is_dir():
        raise EvalkitError(f"report: no runs directory {runs_dir}")
    entries = []
    for path in run_manifests(runs_dir):  # (an odd manifest: a warning line, left out)
        m = checked_manifest(path.parent)
        if m is not None:
            entries.append((path.parent, m))
    entries.sort(key=lambda x: x[1].get("started_at") or "", reverse=True)
    con = duckdb.connect()
    rows = []
    for run_dir, m in entries:
        headline: list[str] = []
        alerts: list[str] = []
        mp, ap = run_dir / "metrics.parquet", run_dir / "alerts.parquet"
        # each run's tables checked on their own: an odd one is a warning line, the other
        # runs are listed
        ok = {p: (p.exists() or p.is_symlink()) and _usable(con, p, table, check_table, skipped)
              for p, table in ((mp, "metrics"), (ap, "alerts"))}
        if ok[mp]:
            for name, value, lo, hi in con.execute(
                    "SELECT metric, value, ci_low, ci_high FROM read_parquet(?) WHERE slice = "
                    "'all' AND NOT regexp_matches(metric, '\\.(raw|filter_effect|n)$') "
                    "AND plugin IS DISTINCT FROM 'crosstab' LIMIT 6", [str(mp)]).fetchall():
                ci = f" [{fmt(lo)}, {fmt(hi)}]" if lo is not None and hi is not None else ""
                headline.append(f"{e(name)} <b>{e(fmt(value))}</b>{e(ci)}")
        if ok[ap]:
            alerts = [f"<span class='sev-{e(s)}'>{e(s)}</span>: {e(msg)}" for s, msg in
                      con.execute("SELECT severity, message FROM read_parquet(?)",
                                  [str(ap)]).fetchall()]
        rel = (run_dir / HTML_NAME).relative_to(runs_dir).as_posix()
        link = (f'<a href="{e(rel)}">{e(m.get("run_id", run_dir.name))}</a>'
                if (run_dir / HTML_NAME).exists() else
                f'{e(m.get("run_id", run_dir.name))}<br><span class="muted">no report: '
                f'evalkit report {e(run_dir)}</span>')
        rows.append(f"<tr><td>{e(m.get('experiment'))}</td><td>{link}</td>"
                    f"<td>{e(m.get('started_at'))}</td><td class='st-{e(m.get('status'))}'>"
                    f"{e(m.get('status'))}</td><td class='num'>{e(fmt(m.get('n_records')))}</td>"
                    f"<td>{'<br>'.join(headline)}</td><td>{'<br>'.join(alerts)}</td></tr>")
    con.close()
    sweeps = sorted(runs_dir.glob(f"*/sweep-*/{HTML_NAME}"), reverse=True)
    links = "".join(f'<li><a href="{e(p.relative_to(runs_dir).as_posix())}">'
                    f"{e(p.parent.parent.name)} · {e(p.parent.name)}</a></li>" for p in sweeps)
    body = (f"<h3>Sweeps</h3><ul>{links}</ul>" if links else "") + (
            "<table><thead><tr><th>experiment</th><th>run</th><th>started</th><th>status</th>"
            "<th>records</th><th>headline metrics (slice all)</th><th>alerts</th></tr></thead>"
            f"<tbody>{''.join(rows)}</tbody></table>")
    from importlib import resources

    css = resources.files("evalkit.report").joinpath("report.css").read_text()
    out = runs_dir / "index.html"
    _write(out, "<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'>"
                "<meta http-equiv='Content-Security-Policy' content=\"default-src 'none'; "
                "style-src 'unsafe-inline'; img-src data:\"><link rel='icon' href='data:,'>"
                f"<title>evalkit runs · {html.escape(str(runs_dir))}</title><style>{css}"
                ".sev-error{color:#cf222e}.st-failed,.st-interrupted{color:#cf222e}</style>"
                f"</head><body><header><b>evalkit</b> runs in {e(runs_dir)} "
                f"({len(entries):,})</header><main>{body}</main></body></html>")
    return out
