"""The CI gate: alerts (checked against what the metrics will produce before the run, then
the thresholds the metrics cross) and the judge error budget, and whether they fail the run."""

from __future__ import annotations

import difflib
import operator
from typing import Any

import pyarrow as pa

from evalkit.config import AlertConfig, PluginInstance, RunConfig
from evalkit.errors import ConfigError, JudgeErrorBudgetExceeded, RunFailed
from evalkit.numbers import plain
from evalkit.plugin import Metric, Produces
from evalkit.redact import mask
from evalkit.runner.summary import why_no_value

__all__ = ["evaluate_alerts", "raise_on_fired"]

_OPS = {">": operator.gt, ">=": operator.ge, "<": operator.lt, "<=": operator.le,
        "==": operator.eq, "!=": operator.ne}
_SEVERITY_RANK = {"info": 0, "warning": 1, "error": 2}


def evaluate_alerts(rc: RunConfig, metrics: pa.Table, run_id: str) -> list[dict[str, Any]]:
    """One alert row per (threshold, metric row) that crosses it. An alert the run's rows
    cannot answer (the metric wrote no row by that name, or no row for the slice watched,
    e.g. ``model=x`` when no record has that model, or a row with no value: every judgment
    it reads is an error, a slice too small) gives a row at the alert's own severity saying
    so, with the metric's reason: a gate that could not check its metric does not pass."""
    rows = []
    metric_rows = metrics.to_pylist()
    for alert in rc.alerts:
        watched = [m for m in metric_rows if m["metric"] == alert.metric and
                   alert.slice in ("*", m["slice"])]
        if not watched:
            where = "" if alert.slice == "*" else f" [{alert.slice}]"
            rows.append({"run_id": run_id, "metric": alert.metric, "slice": alert.slice,
                         "value": None, "operator": alert.operator, "threshold": alert.value,
                         "severity": alert.severity,
                         "message": f"alert on '{alert.metric}'{where} cannot be checked: "
                         "this run wrote no such metric row",
                         "hints": [mask(h) for h in alert.hints]})
        for m in watched:
            if m["value"] is None or m["value"] != m["value"]:  # null or NaN: not a pass
                rows.append({"run_id": run_id, "metric": m["metric"], "slice": m["slice"],
                             "value": None, "operator": alert.operator,
                             "threshold": alert.value, "severity": alert.severity,
                             "message": mask(f"alert on '{m['metric']}' [{m['slice']}] cannot "
                                             "be checked: the metric has no value ("
                                             f"{why_no_value(m.get('details'))})"),
                             "hints": [mask(h) for h in alert.hints]})
                continue
            if not _OPS[alert.operator](m["value"], alert.value):
                continue
            msg = alert.message or (f"{m['metric']} [{m['slice']}] = {plain(m['value'])} "
                                    f"{alert.operator} {alert.value:g}")
            rows.append({"run_id": run_id, "metric": m["metric"], "slice": m["slice"],
                         "value": m["value"], "operator": alert.operator,
                         "threshold": alert.value, "severity": alert.severity,
                         "message": mask(msg), "hints": [mask(h) for h in alert.hints]})
    return rows


def raise_on_fired(alerts: pa.Table, fail_on: str | None) -> None:
    """Fail the run (:class:`RunFailed`) when an alert at or above ``fail_on`` fired."""
    if fail_on is None:
        return
    fired = [a for a in alerts.to_pylist()
             if _SEVERITY_RANK[a["severity"]] >= _SEVERITY_RANK[fail_on]]
    if fired:
        raise RunFailed(f"{len(fired)} alert(s) at or above runner.fail_on={fail_on}: "
                        + "; ".join(a["message"] for a in fired[:3]))


def check_alerts(alerts: list[AlertConfig], metrics: list[tuple[PluginInstance, Metric]],
                 anchored: bool = False) -> None:
    """Raise :class:`ConfigError` (before anything runs) for the first alert that watches a
    metric name or a slice the run's metrics cannot produce (:meth:`Metric.produces`);
    ``anchored``: the run re-judges an anchor set (``anchor.JUDGE.drift`` rows)."""
    if not alerts:
        return
    produced = [plugin.produces() or _undeclared(inst) for inst, plugin in metrics]
    if anchored:
        from evalkit.runner.anchor import PRODUCES

        produced.append(PRODUCES)
    for i, alert in enumerate(alerts):
        owners = [p for p in produced
                  if alert.metric in p.names or alert.metric.startswith(p.prefixes)]
        if not owners:
            valid = [n for p in produced for n in p.names] + \
                [f"{x}<category>" for p in produced for x in p.prefixes]
            close = difflib.get_close_matches(alert.metric, valid, n=1)
            hint = f"did you mean '{close[0]}'? " if close else ""
            raise ConfigError(f"alerts[{i}].metric: '{alert.metric}' is not a metric this run "
                              f"produces; {hint}valid: {', '.join(valid) or 'none (no metrics)'}")
        if alert.slice in ("*", "all") or any(p.slice_by is None for p in owners):
            continue
        column, eq, value = alert.slice.partition("=")
        columns = list(dict.fromkeys(c for p in owners for c in p.slice_by or ()))
        if not (eq and value and column in columns):
            valid = ", ".join(["all", "*", *(f"{c}=<value>" for c in columns)])
            raise ConfigError(f"alerts[{i}].slice: '{alert.slice}' cannot be a slice of "
                              f"'{alert.metric}'; valid slices: {valid}")


def _undeclared(inst: PluginInstance) -> Produces:
    """What a metric that does not say (``produces()`` is None) is taken to write."""
    slice_by = getattr(inst.config, "slice_by", None)
    return Produces((inst.name,), (f"{inst.name}.",),
                    None if slice_by is None else tuple(slice_by))


def judge_error_overruns(judgments: dict[str, dict[str, int]],
                         causes: dict[str, dict[str, int]], budget: float | None) -> list[str]:
    """Each judge whose error judgments are more than ``budget`` of the records it judged
    (``ok`` + ``error``), as ``"judge errors/judged (share; top causes: ...)"``: what
    :func:`check_judge_errors` raises on, and what a report shows for the gate."""
    if budget is None:
        return []
    over = []
    for judge, by_status in judgments.items():
        errors = by_status.get("error", 0)
        judged = errors + by_status.get("ok", 0)
        if judged and errors / judged > budget:
            top = sorted((causes.get(judge) or {}).items(), key=lambda kv: (-kv[1], kv[0]))
            over.append(f"{judge} {errors}/{judged} ({errors / judged:.0%}; top causes: "
                        + ", ".join(f"{cause} {n}" for cause, n in top[:3]) + ")")
    return over


def check_judge_errors(judgments: dict[str, dict[str, int]],
                       causes: dict[str, dict[str, int]], budget: float | None) -> None:
    """Raise :class:`JudgeErrorBudgetExceeded` when a judge's error judgments are more than
    ``budget`` of the records it judged (``ok`` + ``error``; skipped ones are not judged),
    naming each such judge with its top error causes."""
    over = judge_error_overruns(judgments, causes, budget)
    if over:
        raise JudgeErrorBudgetExceeded(
            f"judge errors above runner.max_judge_error_rate={budget:g}: {'; '.join(over)}; "
            "the errors are in judgments.error (evalkit query \"SELECT judge, error_cause, "
            "error FROM judgments WHERE status = 'error'\"); fix the judge or its endpoint, "
            "or set runner.max_judge_error_rate")
