"""What a CI system reads beside the page: a Markdown summary (for a pull-request comment) and
a JUnit XML file in which every alert rule and every gate is a test case."""

from __future__ import annotations

from typing import Any
from xml.etree import ElementTree as ET

from evalkit.report._data import RunData
from evalkit.report._gates import exit_status, gates
from evalkit.report._page import ci_text, fmt, headline_rows
from evalkit.safetext import markdown_text, xml_text


def _md(text: Any) -> str:
    """Text from data for a pull-request comment: one line; no link, image, HTML, mention or
    issue reference (:func:`evalkit.safetext.markdown_text`)."""
    return markdown_text("" if text is None else text)


def markdown(runs: list[RunData], verdicts: list[dict[str, Any]], html_name: str) -> str:
    lines = []
    for run in runs:
        m = run.manifest
        code, why = exit_status(run)
        exit_text = "" if code is None else f", exit {code}"
        lines.append(f"### evalkit · {_md(run.experiment)} · run {_md(run.run_id)} "
                     f"({_md(m.get('status'))}{exit_text})")
        lines.append("")
        checked = gates(run)
        failed = [g for g in checked if g.failure]
        lines.append(f"**Gates**: {len(checked) - len(failed)} of {len(checked)} passed"
                     + (f"; exit {code}: {_md(why)}" if code else ""))
        lines += [f"- ✗ {_md(g.name)}: {_md(g.failure)}" for g in failed]
        lines.append("")
        excluded = ", ".join(f"{_md(k)} {v:,}" for k, v in (m.get("excluded_by") or {}).items())
        lines.append(f"records {fmt(m.get('n_records'))} · excluded {fmt(m.get('n_excluded'))}"
                     + (f" ({excluded})" if excluded else "")
                     + f" · rejected {fmt(m.get('n_rejects'))}")
        lines.append("")
        if run.offline_judges:
            lines.append(f"**OFFLINE**: {_md(', '.join(run.offline_judges))} scored without a "
                         "model (deterministic stand-ins, not judgments); metrics marked "
                         "[offline] rest on them.")
            lines.append("")
        fired = [a for a in run.alerts if a.get("value") is not None or a.get("severity")]
        for a in fired:
            lines.append(f"- **{_md(a.get('severity'))}**: {_md(a.get('message'))}")
        if fired:
            lines.append("")
        idx = {(r["metric"], r["slice"]): r for r in run.metrics}
        rows = headline_rows(run)
        if rows:
            lines += ["| metric | value | 95% CI | raw | n used / attempted | excluded |",
                      "| --- | ---: | ---: | ---: | ---: | ---: |"]
            for r in rows:
                raw = idx.get((r["metric"] + ".raw", "all"))
                name = r["metric"] + (" [offline]" if run.is_offline(r["metric"]) else "")
                lines.append(f"| {_md(name)} | {fmt(r['value'])} | "
                             f"{ci_text(r['ci_low'], r['ci_high'], r.get('details'))} | "
                             f"{fmt(raw['value']) if raw else ''} | "
                             f"{fmt(r['n_judged'])} / {fmt(r['n_attempted'])} | "
                             f"{fmt(r['n_excluded'])} |")
            lines.append("")
    significant = [v for v in verdicts if v.get("significant")]
    if verdicts:
        tested = [v for v in verdicts if v.get("p_adjusted") is not None]
        lines.append(f"**Against the first run**: {len(significant)} of {len(tested)} "
                     "quantities changed significantly (Holm-corrected; derived rows such "
                     "as `.raw` are not counted).")
        lines.append("")
        if significant:
            lines += ["| run | metric | slice | A | B | B − A | 95% CI |",
                      "| --- | --- | --- | ---: | ---: | ---: | ---: |"]
            lines += [f"| {_md(v['run'])} | {_md(v['metric'])} | {_md(v['slice'])} | "
                      f"{fmt(v['a'])} | {fmt(v['b'])} | {fmt(v['delta'])} | "
                      f"{ci_text(v['ci_low'], v['ci_high'])} |" for v in significant]
            lines.append("")
    lines.append(f"Full report: `{html_name}` (self-contained HTML).")
    return "\n".join(lines) + "\n"


def junit(runs: list[RunData]) -> bytes:
    """One test suite per run: every gate the run checked (:func:`gates`: its status, each
    alert rule of its config, ``runner.max_judge_error_rate`` and ``runner.fail_on``), failed
    where the gate failed; an info alert passes with its message. The suite's properties
    hold the run's exit status."""
    suites = ET.Element("testsuites", name="evalkit")
    for run in runs:
        suite = ET.SubElement(suites, "testsuite",
                              name=xml_text(f"evalkit.{run.experiment}.{run.run_id}"))
        code, why = exit_status(run)
        props = ET.SubElement(suite, "properties")
        ET.SubElement(props, "property", name="exit_status",
                      value="unknown" if code is None else str(code))
        ET.SubElement(props, "property", name="exit_reason", value=xml_text(why))
        cases = gates(run)
        failures = 0
        for g in cases:
            # every value from data through xml_text: ESC, NUL or a lone surrogate in a
            # message would make the file unreadable to the CI system
            case = ET.SubElement(suite, "testcase",
                                 classname=xml_text(f"evalkit.{run.experiment}"),
                                 name=xml_text(g.name))
            if g.failure:
                failures += 1
                node = ET.SubElement(case, "failure", message=xml_text(g.failure)[:500],
                                     type=xml_text(g.kind))
                node.text = xml_text(g.failure)
            if g.note:
                ET.SubElement(case, "system-out").text = xml_text(g.note)
        suite.set("tests", str(len(cases)))
        suite.set("failures", str(failures))
        suite.set("errors", "0")
        suite.set("time", str(run.manifest.get("duration_s") or 0))
    return ET.tostring(suites, encoding="utf-8", xml_declaration=True)
