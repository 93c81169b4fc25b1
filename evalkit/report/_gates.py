"""The gates a run checked and the exit status they gave it, recomputed from its manifest and
alerts the way the runner decides them (:mod:`evalkit.runner.alerts`): each alert rule of its
config, ``runner.fail_on`` (exit 3) and ``runner.max_judge_error_rate`` (exit 4). A run's
manifest says ``ok`` once its files are written; the gates are checked after, so a report
that showed only the manifest's status would call a run that exited 4 ``ok``."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from evalkit.errors import JudgeErrorBudgetExceeded, RunFailed
from evalkit.report._data import RunData
from evalkit.runner.alerts import judge_error_overruns

RANK = {"info": 0, "warning": 1, "error": 2}


@dataclass(frozen=True)
class Gate:
    """One check the run made: ``failure`` says why it failed (None: passed), ``note`` what
    it saw when it passed; ``kind`` is the JUnit failure type."""

    name: str
    failure: str | None
    kind: str
    note: str = ""


def alert_text(a: dict[str, Any]) -> str:
    """An alert as one line: severity, message and hints."""
    hints = a.get("hints") or []
    if isinstance(hints, str):
        hints = [hints]
    text = f"{a.get('severity')}: {a.get('message')}"
    return text + (" (hint: " + "; ".join(hints) + ")" if hints else "")


def gates(run: RunData) -> list[Gate]:
    """Every gate ``run`` checked, in the order the runner checks them: its status, each
    alert rule, then ``runner.max_judge_error_rate`` and ``runner.fail_on``."""
    m = run.manifest
    cfg = m.get("config") or {}
    runner = cfg.get("runner") or {}
    status = m.get("status")
    out = [Gate("run status", None if status == "ok" else
                f"run status is {status}: {m.get('error', '')}", "status")]
    seen: set[int] = set()
    for k, rule in enumerate(cfg.get("alerts") or []):
        fired = [a for a in run.alerts if a.get("metric") == rule.get("metric") and
                 a.get("operator") == rule.get("operator", ">") and
                 a.get("threshold") == rule.get("value")]
        seen.update(id(a) for a in fired)
        name = (f"{k + 1:02d} alert {rule.get('metric')} [{rule.get('slice', 'all')}] "
                f"{rule.get('operator', '>')} {rule.get('value')}")
        failing = [a for a in fired if RANK.get(a.get("severity") or "", 0) >= 1]
        out.append(Gate(name, "; ".join(alert_text(a) for a in failing) or None,
                        (failing[0].get("severity") or "") if failing else "",
                        "; ".join(alert_text(a) for a in fired if a not in failing)))
    for a in run.alerts:  # alerts no rule of the config explains (older runs)
        if id(a) not in seen:
            out.append(Gate(f"alert {a.get('metric')} [{a.get('slice')}]", alert_text(a)
                            if RANK.get(a.get("severity") or "", 0) >= 1 else None,
                            a.get("severity") or "", alert_text(a)))
    if "max_judge_error_rate" in runner and status == "ok":
        budget = runner["max_judge_error_rate"]
        over = judge_error_overruns(m.get("judgments") or {}, m.get("judgment_errors") or {},
                                    budget)
        out.append(Gate(f"gate runner.max_judge_error_rate={budget}",
                        f"judge errors above the budget (exit "
                        f"{JudgeErrorBudgetExceeded.exit_code}): " + "; ".join(over)
                        if over else None, "judge_errors", _error_rates(m)))
    gate = runner.get("fail_on")
    if gate:
        over_alerts = [a for a in run.alerts
                       if RANK.get(a.get("severity") or "", 0) >= RANK.get(gate, 9)]
        out.append(Gate(f"gate runner.fail_on={gate}",
                        f"{len(over_alerts)} alert(s) at or above {gate} (exit "
                        f"{RunFailed.exit_code}): "
                        + "; ".join(alert_text(a) for a in over_alerts[:5])
                        if over_alerts else None, "gate"))
    return out


def _error_rates(m: dict[str, Any]) -> str:
    parts = []
    for judge, by_status in sorted((m.get("judgments") or {}).items()):
        errors = by_status.get("error", 0)
        judged = errors + by_status.get("ok", 0)
        if judged:
            parts.append(f"{judge} {errors}/{judged} errors")
    return "; ".join(parts)


def exit_status(run: RunData) -> tuple[int | None, str]:
    """The exit status ``evalkit run`` gave ``run`` and why: 0, 4 (judge error budget) or 3
    (``fail_on``); None for a run that did not finish (its status says why)."""
    status = run.manifest.get("status")
    if status == "dry_run":
        return 0, "dry run"
    if status != "ok":
        return None, f"run status {status}"
    failed = [g for g in gates(run) if g.failure]
    for g in failed:
        if g.kind == "judge_errors":
            return JudgeErrorBudgetExceeded.exit_code, g.name
    for g in failed:
        if g.kind == "gate":
            return RunFailed.exit_code, g.name
    return 0, "every gate passed"
