"""``tool_correctness``: the share of an agent's tool calls that succeeded, overall and by tool.

Reads the tool calls the agent sources keep in each record's ``metadata.tool_calls``
(``transcripts``: the calls of a turn with ``ok`` true, false, or null when no result came
back; ``otlp_json``: an ``execute_tool`` span, failed when its status is ERROR). A call
without a result is unscored: it is counted in ``n_unscored``, never as a success or a
failure. Calls count whatever a filter did to their record (a turn set aside as a failed
pipeline still made its calls; tool spans are always set aside, as they are never judged)
unless ``include_excluded: false``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from evalkit.analysis.metadata import metadata_objects
from evalkit.metrics._signals import SliceConfig, metric_row
from evalkit.metrics._stats import mean_ci, slice_sql
from evalkit.plugin import Metric

__all__ = ["tool_calls", "ToolCorrectnessConfig", "ToolCorrectnessMetric"]


@dataclass(frozen=True)
class ToolCorrectnessConfig(SliceConfig):
    by_tool: bool = True  # also a row per tool (slice tool=<name>)
    include_excluded: bool = True  # count the calls of records a filter set aside
    min_calls: int = 1  # a per-tool row needs at least this many calls

    def validate(self) -> None:
        super().validate()
        if self.min_calls < 1:
            raise ValueError(f"min_calls: must be 1 or more, got {self.min_calls}")


def tool_calls(metadata: str | None) -> list[dict[str, Any]]:
    """The ``tool_calls`` list of a record's metadata JSON ([] when there is none)."""
    return metadata_objects(metadata, "tool_calls")


class ToolCorrectnessMetric(Metric):
    """Rows ``NAME`` (share of tool calls with a result that succeeded) for ``all``, each
    ``tool=<name>`` and each slice of ``slice_by``; ``details`` holds the counts and the most
    common errors. ``n_attempted`` counts calls, not records."""

    Config = ToolCorrectnessConfig
    higher_is_better = True
    thread_safe = True  # compute() reads only the connection it is given

    def __init__(self, name: str, config: ToolCorrectnessConfig, ctx: object) -> None:
        self.name = name
        self.config = config

    def compute(self, con: Any) -> list[dict[str, Any]]:
        cfg = self.config
        cols = "".join(f", {slice_sql(c)}" for c in dict.fromkeys(cfg.slice_by))
        table = con.execute(f"SELECT excluded_by, metadata{cols} FROM records "
                            "ORDER BY record_id").to_arrow_table()
        excluded = table.column("excluded_by").to_pylist()
        slice_values = {c: table.column(c).to_pylist() for c in dict.fromkeys(cfg.slice_by)}
        # one entry per call: (ok or None, tool, error, excluded, row)
        calls: list[tuple[bool | None, str, str | None, bool, int]] = []
        for row, meta in enumerate(table.column("metadata").to_pylist()):
            for call in tool_calls(meta):
                ok = call.get("ok")
                calls.append((ok if isinstance(ok, bool) else None,
                              str(call.get("name") or "unknown"), call.get("error"),
                              excluded[row] is not None, row))
        groups: list[tuple[str, list[int]]] = [("all", list(range(len(calls))))]
        if cfg.by_tool:
            by_tool: dict[str, list[int]] = {}
            for k, call in enumerate(calls):
                by_tool.setdefault(call[1], []).append(k)
            groups += [(f"tool={t}", ks) for t, ks in sorted(by_tool.items())
                       if len(ks) >= cfg.min_calls]
        for col, values in slice_values.items():
            by_value: dict[Any, list[int]] = {}
            for k, call in enumerate(calls):
                by_value.setdefault(values[call[4]], []).append(k)
            groups += [(f"{col}={'null' if v is None else v}", ks) for v, ks in by_value.items()]
        return [self._row(label, [calls[k] for k in ks]) for label, ks in groups]

    def _row(self, label: str, calls: list[tuple[bool | None, str, str | None, bool, int]]
             ) -> dict[str, Any]:
        cfg = self.config
        n_excluded = sum(c[3] for c in calls)
        counted = [c for c in calls if cfg.include_excluded or not c[3]]
        scored = [c for c in counted if c[0] is not None]
        values = np.array([1.0 if c[0] else 0.0 for c in scored])
        lo, hi, method = mean_ci(values, cfg.n_boot, cfg.seed, cfg.confidence) \
            if len(values) else (None, None, None)
        errors: dict[str, int] = {}
        for c in scored:
            if not c[0] and c[2]:
                errors[c[2]] = errors.get(c[2], 0) + 1
        details: dict[str, Any] = {
            "what": "share of tool calls with a result that succeeded",
            "succeeded": int(values.sum()) if len(values) else 0,
            "failed": int(len(values) - values.sum()) if len(values) else 0,
            "without_result": len(counted) - len(scored),
            "include_excluded": cfg.include_excluded,
            "calls_in_excluded_records": n_excluded,
            "top_errors": dict(sorted(errors.items(), key=lambda kv: -kv[1])[:5]),
        }
        if method is not None:
            details["ci_method"] = method
        return metric_row(self.name, label, float(values.mean()) if len(values) else None,
                          (lo, hi), len(calls), 0 if cfg.include_excluded else n_excluded,
                          len(scored), len(counted) - len(scored), details,
                          "no tool call with a result in this slice")
