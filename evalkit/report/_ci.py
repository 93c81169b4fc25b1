"""What a CI system reads beside the page: a Markdown summary (for a pull-request comment) and
a JUnit XML file in which every alert rule and every gate is a test case."""

from __future__ import annotations

from typing import Any
from xml.etree import ElementTree as ET

from evalkit.report._data import RunData
from evalkit.report._page import ci_text, fmt, headline_rows
from evalkit.safetext import markdown_text, xml_text

_RANK = {"info": 0, "warning": 1, "error": 2}


def _md(text: Any) -> str:
    """Text from data for a pull-request comment: one line; no link, image, HTML, mention or
    issue reference (:func:`evalkit.safetext.markdown_text`)."""
    return markdown_text("" if text is None else text)


def markdown(runs: list[RunData], verdicts: list[dict[str, Any]], html_name: str) -> str:
    lines = []
    for run in runs:
        m = run.manifest
        lines.append(f"### evalkit · {_md(run.experiment)} · run {_md(run.run_id)} "
                     f"({_md(m.get('status'))})")
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
                             f"{ci_text(r['ci_low'], r['ci_high'])} | "
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
    """One test suite per run: the run's status, each alert rule of its config (failed when
    it fired at warning or error; an info alert passes with its message) and the
    ``runner.fail_on`` gate."""
    suites = ET.Element("testsuites", name="evalkit")
    for run in runs:
        cfg = run.manifest.get("config") or {}
        suite = ET.SubElement(suites, "testsuite",
                              name=xml_text(f"evalkit.{run.experiment}.{run.run_id}"))
        cases: list[tuple[str, str | None, str | None, str]] = []  # name, failure, type, out
        status = run.manifest.get("status")
        cases.append(("run status", None if status == "ok" else
                      f"run status is {status}: {run.manifest.get('error', '')}", "status", ""))
        rules = cfg.get("alerts") or []
        seen: set[int] = set()
        for k, rule in enumerate(rules):
            fired = [a for a in run.alerts if a.get("metric") == rule.get("metric") and
                     a.get("operator") == rule.get("operator", ">") and
                     a.get("threshold") == rule.get("value")]
            seen.update(id(a) for a in fired)
            name = (f"alert {rule.get('metric')} [{rule.get('slice', 'all')}] "
                    f"{rule.get('operator', '>')} {rule.get('value')}")
            failing = [a for a in fired if _RANK.get(a.get("severity") or "", 0) >= 1]
            failure = "; ".join(_alert_text(a) for a in failing) or None
            out = "; ".join(_alert_text(a) for a in fired if a not in failing)
            cases.append((f"{k + 1:02d} {name}", failure,
                          failing[0].get("severity") if failing else None, out))
        for a in run.alerts:  # alerts no rule of the config explains (older runs)
            if id(a) not in seen:
                cases.append((f"alert {a.get('metric')} [{a.get('slice')}]", _alert_text(a)
                              if _RANK.get(a.get("severity") or "", 0) >= 1 else None,
                              a.get("severity"), _alert_text(a)))
        gate = (cfg.get("runner") or {}).get("fail_on")
        if gate:
            over = [a for a in run.alerts
                    if _RANK.get(a.get("severity") or "", 0) >= _RANK.get(gate, 9)]
            cases.append((f"gate runner.fail_on={gate}",
                          f"{len(over)} alert(s) at or above {gate}: "
                          + "; ".join(_alert_text(a) for a in over[:5]) if over else None,
                          "gate", ""))
        failures = 0
        for name, failure, kind, out in cases:
            # every value from data through xml_text: ESC, NUL or a lone surrogate in a
            # message would make the file unreadable to the CI system
            case = ET.SubElement(suite, "testcase",
                                 classname=xml_text(f"evalkit.{run.experiment}"),
                                 name=xml_text(name))
            if failure:
                failures += 1
                node = ET.SubElement(case, "failure", message=xml_text(failure)[:500],
                                     type=xml_text(kind or ""))
                node.text = xml_text(failure)
            if out:
                ET.SubElement(case, "system-out").text = xml_text(out)
        suite.set("tests", str(len(cases)))
        suite.set("failures", str(failures))
        suite.set("errors", "0")
        suite.set("time", str(run.manifest.get("duration_s") or 0))
    return ET.tostring(suites, encoding="utf-8", xml_declaration=True)


def _alert_text(a: dict[str, Any]) -> str:
    hints = a.get("hints") or []
    if isinstance(hints, str):
        hints = [hints]
    text = f"{a.get('severity')}: {a.get('message')}"
    return text + (" (hint: " + "; ".join(hints) + ")" if hints else "")
