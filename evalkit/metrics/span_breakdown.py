"""``span_breakdown``: how many spans of each type and name a run's traces hold, and how many
failed.

Counts the spans each record accounts for in ``metadata.spans`` (``otlp_json``: the span
itself, GenAI or not; ``transcripts``: a turn's model calls and tool calls), whatever a filter
did to the record (the source sets non-GenAI spans aside, yet they are spans of the trace).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from evalkit.analysis.metadata import metadata_objects
from evalkit.metrics._intervals import wilson_ci
from evalkit.metrics._signals import metric_row
from evalkit.plugin import Metric

__all__ = ["GROUPINGS", "record_spans", "SpanBreakdownConfig", "SpanBreakdownMetric"]

GROUPINGS = ("type", "name")


@dataclass(frozen=True)
class SpanBreakdownConfig:
    by: list[str] = field(default_factory=lambda: list(GROUPINGS))  # rows by type, type/name
    top_names: int = 50  # at most this many name rows (the most frequent); the rest are summed

    def validate(self) -> None:
        bad = [b for b in self.by if b not in GROUPINGS]
        if bad or not self.by:
            raise ValueError(f"by: {list(self.by)} must be a non-empty subset of "
                             f"{list(GROUPINGS)}")
        if self.top_names < 1:
            raise ValueError(f"top_names: must be 1 or more, got {self.top_names}")


def record_spans(metadata: str | None) -> list[dict[str, Any]]:
    """The ``spans`` list of a record's metadata JSON ([] when there is none)."""
    return metadata_objects(metadata, "spans")


class SpanBreakdownMetric(Metric):
    """Rows ``NAME`` (a span count) with slices ``all``, ``type=<type>`` and
    ``span=<type>/<name>``, and ``NAME.error_rate`` (the share of those spans that failed)
    for the same slices; ``details`` holds the error count."""

    Config = SpanBreakdownConfig
    higher_is_better = None
    thread_safe = True  # compute() reads only the connection it is given

    def __init__(self, name: str, config: SpanBreakdownConfig, ctx: object) -> None:
        self.name = name
        self.config = config

    def compute(self, con: Any) -> list[dict[str, Any]]:
        cfg = self.config
        counts: dict[str, list[int]] = {"all": [0, 0]}
        by_type: dict[str, list[int]] = {}
        by_name: dict[str, list[int]] = {}
        records = 0
        for (meta,) in con.execute("SELECT metadata FROM records").fetchall():
            spans = record_spans(meta)
            records += bool(spans)
            for span in spans:
                kind = str(span.get("type") or "other")
                error = int(bool(span.get("error")))
                for key, table in (("all", counts), (kind, by_type),
                                   (f"{kind}/{span.get('name') or '?'}", by_name)):
                    entry = table.setdefault(key, [0, 0])
                    entry[0] += 1
                    entry[1] += error
        groups = [("all", counts["all"])]
        if "type" in cfg.by:
            groups += [(f"type={k}", v) for k, v in sorted(by_type.items())]
        if "name" in cfg.by:
            ranked = sorted(by_name.items(), key=lambda kv: (-kv[1][0], kv[0]))
            groups += [(f"span={k}", v) for k, v in ranked[:cfg.top_names]]
            rest = ranked[cfg.top_names:]
            if rest:
                groups.append(("span=(other names)", [sum(v[0] for _, v in rest),
                                                      sum(v[1] for _, v in rest)]))
        rows = []
        for label, (n, errors) in groups:
            details = {"spans": n, "errors": errors, "records_with_spans": records}
            rows.append(metric_row(self.name, label, float(n) if records else None,
                                   (None, None), n, 0, n, 0, details,
                                   "no record of this run carries spans (metadata.spans)"))
            # a proportion: Wilson's interval, as every proportion evalkit reports
            rows.append(metric_row(f"{self.name}.error_rate", label,
                                   errors / n if n else None,
                                   wilson_ci(errors, n) if n else (None, None), n, 0, n, 0,
                                   {"errors": errors, **({"ci_method": "wilson"} if n else {})},
                                   "no spans in this slice"))
        return rows
