"""``otlp`` sink: a run's judgments as OpenTelemetry ``gen_ai.evaluation.result`` events.

Each judgment becomes one log record with the event name ``gen_ai.evaluation.result`` and the
GenAI semantic-convention attributes ``gen_ai.evaluation.name`` (the judge),
``gen_ai.evaluation.score.value``, ``gen_ai.evaluation.score.label``,
``gen_ai.evaluation.explanation``, ``gen_ai.response.id`` and, for an errored judgment,
``error.type``; evalkit's own attributes (``evalkit.*``: run, record, origin, status, judge
model) say where it came from. Records read from a trace (a 32-hex trace id and a 16-hex span
id, as ``otlp_json`` gives) parent their events to the evaluated span's context.

The records are emitted through the OpenTelemetry Python SDK's logs API (``LoggerProvider``,
``Logger.emit`` with ``event_name`` and a span context), in bounded batches; each batch is
written to ``otlp/evaluations.jsonl`` in the run directory (one ``ExportLogsServiceRequest``
in OTLP/JSON per line, as a collector's file exporter writes them) and sent with the SDK's
``OTLPLogExporter`` over OTLP/HTTP, which reads the standard ``OTEL_EXPORTER_OTLP_*``
environment variables (endpoint, headers, timeout, compression, certificates) for whatever the
config leaves unset. The OpenTelemetry packages are imported only when a push starts.
"""

from __future__ import annotations

import json
import os
import re
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from evalkit.errors import EvalkitError
from evalkit.plugin import Sink

__all__ = [
    "EVENT_NAME", "FILE_NAME", "event_attributes", "otlp_json", "OtlpSink", "OtlpSinkConfig",
    "parent_ids",
]

EVENT_NAME = "gen_ai.evaluation.result"
FILE_NAME = Path("otlp") / "evaluations.jsonl"
_EXPLANATION_LIMIT = 4_000  # characters of an explanation sent (dashboards show a line)
_FAILURES_KEPT = 50


@dataclass(frozen=True)
class OtlpSinkConfig:
    # OTLP/HTTP logs endpoint (http://collector:4318/v1/logs); null: the environment's
    # OTEL_EXPORTER_OTLP_LOGS_ENDPOINT, else OTEL_EXPORTER_OTLP_ENDPOINT + /v1/logs, else
    # http://localhost:4318/v1/logs
    endpoint: str | None = None
    send: bool = True  # send over OTLP/HTTP; false: write the run directory's file only
    file: bool = True  # write otlp/evaluations.jsonl (OTLP/JSON) in the run directory
    judges: list[str] = field(default_factory=list)  # export only these judges; []: all
    include_skipped: bool = False  # also export skipped judgments (no score; the reason)
    include_errors: bool = True  # export judge errors (no score; error.type set)
    batch_size: int = 512  # log records per export request
    timeout_s: float | None = None  # per request; null: OTEL_EXPORTER_OTLP_TIMEOUT or 10 s
    service_name: str = "evalkit"  # resource service.name unless OTEL_SERVICE_NAME is set

    def validate(self) -> None:
        if self.batch_size < 1:
            raise ValueError(f"batch_size: must be positive, got {self.batch_size}")
        if self.timeout_s is not None and self.timeout_s <= 0:
            raise ValueError(f"timeout_s: must be positive, got {self.timeout_s}")
        if not (self.send or self.file):
            raise ValueError("send and file are both false: nothing would be exported; set "
                             "send=true (OTLP/HTTP) or file=true (the run directory)")


def parent_ids(trace_id: Any, span_id: Any) -> tuple[int, int] | None:
    """The evaluated span's (trace id, span id) as integers, when the record came from a
    trace (32 and 16 hex digits, not all zero); else None."""
    if not isinstance(trace_id, str) or not isinstance(span_id, str):
        return None
    if len(trace_id) != 32 or len(span_id) != 16:
        return None
    try:
        tid, sid = int(trace_id, 16), int(span_id, 16)
    except ValueError:
        return None
    return (tid, sid) if tid and sid else None


_EXCEPTION = re.compile(r"[A-Za-z_][A-Za-z0-9_.]*(Error|Exception|Timeout|Exceeded)")


def _error_type(error: str | None, cause: str | None = None) -> str:
    """``error.type`` of an errored judgment: an error class, never the judge's name (an
    error text often starts with the judge's or a step's name before a colon). The
    judgment's ``error_cause`` (``timeout``, ``rate_limited``, ``invalid_answer``, ...) when
    it has one; else an exception class name that starts the error (``TimeoutError:
    ...``); else ``_OTHER``, as the conventions ask."""
    if cause:
        return str(cause)
    head = (error or "").split(":", 1)[0].strip()
    return head if _EXCEPTION.fullmatch(head) and len(head) <= 64 else "_OTHER"


def event_attributes(row: dict[str, Any], run_id: str) -> dict[str, Any]:
    """The attributes of one judgment's ``gen_ai.evaluation.result`` event."""
    attrs: dict[str, Any] = {"gen_ai.evaluation.name": row["judge"]}
    status = row["status"]
    if status == "ok" and row.get("value") is not None:
        attrs["gen_ai.evaluation.score.value"] = float(row["value"])
    label = row.get("label")
    if label is None and status == "ok" and row.get("passed") is not None:
        label = "pass" if row["passed"] else "fail"
    if label is not None:
        attrs["gen_ai.evaluation.score.label"] = str(label)
    explanation = row.get("explanation")
    if status == "error":
        attrs["error.type"] = _error_type(row.get("error"), row.get("error_cause"))
        explanation = explanation or row.get("error")
    if explanation:
        attrs["gen_ai.evaluation.explanation"] = str(explanation)[:_EXPLANATION_LIMIT]
    if row.get("response_id"):
        attrs["gen_ai.response.id"] = str(row["response_id"])
    if row.get("session_id"):
        attrs["gen_ai.conversation.id"] = str(row["session_id"])
    attrs.update({"evalkit.run_id": run_id, "evalkit.record_id": row["record_id"],
                  "evalkit.judge.plugin": row.get("plugin") or "",
                  "evalkit.judgment.status": status,
                  "evalkit.judgment.origin": row.get("origin") or "computed"})
    if row.get("judge_model"):
        attrs["evalkit.judge.model"] = row["judge_model"]
    if row.get("excluded_by"):
        attrs["evalkit.record.excluded_by"] = row["excluded_by"]
    return attrs


def otlp_json(batch: Any) -> dict[str, Any]:
    """``batch`` (SDK log records) as an ``ExportLogsServiceRequest`` in OTLP/JSON: the SDK's
    protobuf encoding, printed by protobuf's JSON printer with the OTLP/JSON rules applied
    (integer enums, trace and span ids as hex rather than base64)."""
    import base64

    from google.protobuf.json_format import MessageToDict
    from opentelemetry.exporter.otlp.proto.common._log_encoder import encode_logs

    out = MessageToDict(encode_logs(batch), use_integers_for_enums=True)
    for resource_logs in out.get("resourceLogs", []):
        for scope_logs in resource_logs.get("scopeLogs", []):
            for record in scope_logs.get("logRecords", []):
                if not record.get("body"):
                    record.pop("body", None)  # an event without a body (the SDK's empty one)
                for key in ("traceId", "spanId"):
                    if key in record:
                        record[key] = base64.b64decode(record[key]).hex()
    return out


class OtlpSink(Sink):
    """Exports a run's judgments as ``gen_ai.evaluation.result`` log records (see the module
    docstring)."""

    Config = OtlpSinkConfig

    def __init__(self, name: str, config: OtlpSinkConfig, ctx: Any) -> None:
        self.name = name
        self.config = config
        self.ctx = ctx

    def _rows(self, run_dir: Path) -> Iterator[dict[str, Any]]:
        from evalkit.results.writer import run_connection

        cfg = self.config
        statuses = ["ok"] + (["error"] if cfg.include_errors else []) + \
            (["skipped"] if cfg.include_skipped else [])
        where = ["j.origin <> 'imported'", "j.status IN (SELECT unnest(?))"]
        params: list[Any] = [statuses]
        if cfg.judges:
            where.append("j.judge IN (SELECT unnest(?))")
            params.append(list(cfg.judges))
        con = run_connection(run_dir)
        try:
            cursor = con.execute(
                "SELECT j.record_id, j.judge, j.plugin, j.judge_model, j.value, j.label, "
                "j.passed, j.explanation, j.status, j.error, j.error_cause, j.origin, r.trace_id, "
                "r.observation_id, r.session_id, r.excluded_by, "
                "coalesce(json_extract_string(r.metadata, '$.response_id'), "
                "CASE WHEN r.source IS NOT NULL AND r.trace_id IS NULL "
                "THEN r.observation_id END) AS response_id "
                "FROM judgments j LEFT JOIN records r USING (record_id) "
                f"WHERE {' AND '.join(where)} ORDER BY j.judge, j.record_id", params)
            names = [d[0] for d in cursor.description]
            while True:
                chunk = cursor.fetchmany(self.config.batch_size)
                if not chunk:
                    break
                for values in chunk:
                    yield dict(zip(names, values, strict=True))
        finally:
            con.close()

    def _skipped(self, run_dir: Path) -> dict[str, int]:
        from evalkit.results.writer import run_connection

        cfg = self.config
        con = run_connection(run_dir)
        try:
            out = {}
            for status, origin, n in con.execute(
                    "SELECT status, origin = 'imported', count(*) FROM judgments "
                    "GROUP BY ALL").fetchall():
                if origin:
                    out["imported judgments (never exported)"] = \
                        out.get("imported judgments (never exported)", 0) + n
                elif (status == "skipped" and not cfg.include_skipped) or \
                        (status == "error" and not cfg.include_errors):
                    out[f"{status} judgments"] = n
            return out
        finally:
            con.close()

    def push(self, run_dir: Path) -> dict[str, Any]:
        """Export the run in ``run_dir``; the report says how many events were written and
        sent, where, and what failed."""
        from importlib.metadata import version

        from opentelemetry import trace
        from opentelemetry._logs import SeverityNumber
        from opentelemetry.sdk._logs import LoggerProvider
        from opentelemetry.sdk._logs.export import (
            InMemoryLogRecordExporter,
            SimpleLogRecordProcessor,
        )
        from opentelemetry.sdk.resources import Resource
        from opentelemetry.trace import NonRecordingSpan, SpanContext, TraceFlags

        cfg = self.config
        manifest_path = run_dir / "manifest.json"
        if not manifest_path.is_file():
            raise EvalkitError(f"{run_dir}: no manifest.json; is this a run directory?")
        manifest = json.loads(manifest_path.read_text())
        run_id = manifest.get("run_id") or run_dir.name
        resource = Resource.create({"service.name": os.environ.get("OTEL_SERVICE_NAME")
                                    or cfg.service_name,
                                    "evalkit.experiment": manifest.get("experiment") or "",
                                    "evalkit.run_id": run_id})
        memory = InMemoryLogRecordExporter()
        provider = LoggerProvider(resource=resource, shutdown_on_exit=False)
        provider.add_log_record_processor(SimpleLogRecordProcessor(memory))
        logger = provider.get_logger("evalkit", version("evalkit"))
        sender = self._sender() if cfg.send else None
        endpoint = getattr(sender, "_endpoint", None) if sender is not None else None
        report: dict[str, Any] = {"events": 0, "pushed": 0, "written": 0, "sent": 0, "failed": 0,
                                  "parented": 0, "host": endpoint or "(file only)",
                                  "skipped": self._skipped(run_dir), "failures": []}
        target = run_dir / FILE_NAME
        partial = target.with_name(f".{target.name}.partial")
        out = None
        if cfg.file:
            target.parent.mkdir(parents=True, exist_ok=True)
            out = partial.open("w", encoding="utf-8")
        try:
            pending = 0
            for row in self._rows(run_dir):
                context = None
                ids = parent_ids(row.get("trace_id"), row.get("observation_id"))
                if ids is not None:
                    span = NonRecordingSpan(SpanContext(ids[0], ids[1], is_remote=True,
                                                        trace_flags=TraceFlags(
                                                            TraceFlags.SAMPLED)))
                    context = trace.set_span_in_context(span)
                    report["parented"] += 1
                error = row["status"] == "error"
                logger.emit(timestamp=time.time_ns(), context=context,
                            severity_number=SeverityNumber.WARN if error
                            else SeverityNumber.INFO,
                            severity_text="WARN" if error else "INFO",
                            event_name=EVENT_NAME, attributes=event_attributes(row, run_id))
                pending += 1
                if pending >= cfg.batch_size:
                    self._flush(memory, out, sender, report)
                    pending = 0
            self._flush(memory, out, sender, report)
        finally:
            if out is not None:
                out.close()
            if sender is not None:
                sender.shutdown()
            provider.shutdown()
        if out is not None:
            os.replace(partial, target)
            report["file"] = str(target)
        # what reached its destination: the collector, or the file when nothing is sent
        report["pushed"] = report["sent"] if cfg.send else report["written"]
        report["failures"] = report["failures"][:_FAILURES_KEPT]
        return report

    def _sender(self) -> Any:
        from opentelemetry.exporter.otlp.proto.http._log_exporter import OTLPLogExporter

        return OTLPLogExporter(endpoint=self.config.endpoint, timeout=self.config.timeout_s)

    def _flush(self, memory: Any, out: Any, sender: Any, report: dict[str, Any]) -> None:
        from opentelemetry.sdk._logs.export import LogRecordExportResult

        batch = list(memory.get_finished_logs())
        memory.clear()
        if not batch:
            return
        report["events"] += len(batch)
        if out is not None:
            out.write(json.dumps(otlp_json(batch), separators=(",", ":")) + "\n")
            report["written"] += len(batch)
        if sender is None:
            return
        result = sender.export(batch)
        if result == LogRecordExportResult.SUCCESS:
            report["sent"] += len(batch)
            return
        report["failed"] += len(batch)
        for record in batch[: max(0, _FAILURES_KEPT - len(report["failures"]))]:
            attrs = record.log_record.attributes or {}
            report["failures"].append({
                "judge": attrs.get("gen_ai.evaluation.name"),
                "record_id": attrs.get("evalkit.record_id"),
                "reason": f"the OTLP/HTTP export to {report['host']} failed (the exporter's "
                          "log says why; check the endpoint and OTEL_EXPORTER_OTLP_* "
                          "settings)"})
