"""Alerts: the thresholds a run's metrics cross, and whether they fail the run."""

from __future__ import annotations

import operator
from typing import Any

import pyarrow as pa

from evalkit.config import RunConfig
from evalkit.errors import RunFailed

__all__ = ["evaluate_alerts", "raise_on_fired"]

_OPS = {">": operator.gt, ">=": operator.ge, "<": operator.lt, "<=": operator.le,
        "==": operator.eq, "!=": operator.ne}
_SEVERITY_RANK = {"info": 0, "warning": 1, "error": 2}


def evaluate_alerts(rc: RunConfig, metrics: pa.Table, run_id: str) -> list[dict[str, Any]]:
    """One alert row per (threshold, metric row) that crosses it, and a warning for each
    threshold on a metric the run did not produce."""
    rows = []
    metric_rows = metrics.to_pylist()
    for alert in rc.alerts:
        watched = [m for m in metric_rows if m["metric"] == alert.metric]
        if not watched:
            rows.append({"run_id": run_id, "metric": alert.metric, "slice": alert.slice,
                         "value": None, "operator": alert.operator, "threshold": alert.value,
                         "severity": "warning",
                         "message": f"alert on '{alert.metric}' watches a metric this run "
                         "did not produce", "hints": list(alert.hints)})
        for m in watched:
            if alert.slice != "*" and m["slice"] != alert.slice:
                continue
            if m["value"] is None or not _OPS[alert.operator](m["value"], alert.value):
                continue
            msg = alert.message or (f"{m['metric']} [{m['slice']}] = {m['value']:.4g} "
                                    f"{alert.operator} {alert.value:g}")
            rows.append({"run_id": run_id, "metric": m["metric"], "slice": m["slice"],
                         "value": m["value"], "operator": alert.operator,
                         "threshold": alert.value, "severity": alert.severity,
                         "message": msg, "hints": list(alert.hints)})
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
