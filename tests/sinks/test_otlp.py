"""``otlp`` sink: judgments as ``gen_ai.evaluation.result`` log records, written as OTLP/JSON
in the run directory and sent over OTLP/HTTP to a receiver on 127.0.0.1 that decodes them
with the opentelemetry-proto definitions."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest
from omegaconf import OmegaConf

from evalkit.config import load
from evalkit.results.schemas import JUDGMENTS, conform
from evalkit.runner.pipeline import execute
from evalkit.sinks.otlp import OtlpSink, OtlpSinkConfig, parent_ids
from tests.sinks.otlp_receiver import otlp_receiver

DATA = Path(__file__).resolve().parents[2] / "evalkit" / "data" / "agent_sessions"
TRACE = "5b8efff798038103d269b633813fc60c"
SPANS = ["eee19b7ec3c1b174", "eee19b7ec3c1b175", "eee19b7ec3c1b176"]


def any_value(value: Any) -> Any:
    kind = value.WhichOneof("value")
    return getattr(value, kind) if kind else None


def attrs(items: Any) -> dict[str, Any]:
    return {kv.key: any_value(kv.value) for kv in items}


def _traces(tmp_path: Path) -> Path:
    """Three GenAI chat spans of one trace (one failed) and a tool span."""
    def span(sid: str, out: str | None, error: bool = False, rid: str | None = None) -> dict:
        a = [{"key": "gen_ai.operation.name", "value": {"stringValue": "chat"}},
             {"key": "gen_ai.request.model", "value": {"stringValue": "gpt-4o-mini"}},
             {"key": "gen_ai.input.messages", "value": {"stringValue": json.dumps(
                 [{"role": "user", "parts": [{"type": "text", "content": f"q {sid}"}]}])}}]
        if out is not None:
            a.append({"key": "gen_ai.output.messages", "value": {"stringValue": json.dumps(
                [{"role": "assistant", "parts": [{"type": "text", "content": out}]}])}})
        if rid:
            a.append({"key": "gen_ai.response.id", "value": {"stringValue": rid}})
        return {"traceId": TRACE, "spanId": sid, "parentSpanId": "aaaaaaaaaaaaaaaa",
                "name": "chat gpt-4o-mini", "startTimeUnixNano": "1700000000000000000",
                "endTimeUnixNano": "1700000001500000000", "attributes": a,
                "status": {"code": 2, "message": "429 rate limited"} if error else {}}

    tool = {"traceId": TRACE, "spanId": "bbbbbbbbbbbbbbbb", "parentSpanId": "aaaaaaaaaaaaaaaa",
            "name": "execute_tool search", "startTimeUnixNano": "1700000000000000000",
            "endTimeUnixNano": "1700000000100000000",
            "attributes": [{"key": "gen_ai.operation.name",
                            "value": {"stringValue": "execute_tool"}}]}
    line = {"resourceSpans": [{"resource": {}, "scopeSpans": [{"scope": {"name": "t"}, "spans": [
        span(SPANS[0], "Paris is the capital of France.", rid="chatcmpl-1"),
        span(SPANS[1], "It was founded in 1999 by Jane.", rid="chatcmpl-2"),
        span(SPANS[2], None, error=True), tool]}]}]}
    path = tmp_path / "traces.jsonl"
    path.write_text(json.dumps(line) + "\n")
    return path


def _run(tmp_path: Path, source: dict[str, Any], sinks: dict[str, Any],
         judges: dict[str, Any]) -> Any:
    cfg = OmegaConf.create({
        "experiment": "otlp", "source": source,
        "filters": {"pipeline_failure": {"plugin": "pipeline_failure"}},
        "judges": judges, "sinks": sinks,
        "runner": {"runs_dir": str(tmp_path / "runs"), "summary": False,
                   "cache_dir": str(tmp_path / "cache")}})
    return execute(load(cfg))


@pytest.mark.e2e  # whole runs
def test_end_to_end_export_is_received_decoded_and_parented(tmp_path, monkeypatch):
    """A run over OTLP/JSON traces pushes one event per judgment at its end; the receiver
    decodes every attribute and each event carries the evaluated span's trace and span id."""
    judges = {"faithful": {"plugin": "qag_faithfulness", "model": "openai/gpt-4o-mini",
                           "offline": True},
              "echo": {"plugin": "prompt_echo"}}
    with otlp_receiver() as rx:
        monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", rx.url)
        monkeypatch.setenv("OTEL_EXPORTER_OTLP_HEADERS", "x-team=evals")
        monkeypatch.setenv("OTEL_SERVICE_NAME", "agent-evals")
        result = _run(tmp_path, {"plugin": "otlp_json", "path": str(_traces(tmp_path))},
                      {"otlp": {"plugin": "otlp", "batch_size": 1}}, judges)
    report = result.manifest["sinks"]["otlp"]
    assert report["failed"] == 0 and report["host"] == f"{rx.url}/v1/logs"
    assert rx.paths == ["/v1/logs"] * len(rx.requests) and len(rx.requests) == 2
    assert all(h["x-team"] == "evals" for h in rx.headers)
    got = rx.log_records()
    judgments = {(j["judge"], j["record_id"]): j for j in
                 pq.read_table(result.run_dir / "judgments").to_pylist()}
    # echo scores the two genuine chat spans; the failed span and the tool span are skipped
    # (set aside), QAG has no context on any span: it is skipped too; nothing skipped is sent
    judged = sorted((attrs(r.attributes)["gen_ai.evaluation.name"], r.span_id.hex())
                    for _, _, r in got)
    assert judged == [("echo", SPANS[0]), ("echo", SPANS[1])]
    assert report["sent"] == report["pushed"] == 2 == report["parented"]
    for resource, scope, record in got:
        a = attrs(record.attributes)
        assert record.event_name == "gen_ai.evaluation.result"
        assert record.trace_id.hex() == TRACE
        assert record.span_id.hex() in SPANS[:2]
        assert record.severity_text == "INFO" and record.severity_number == 9
        assert attrs(resource.attributes)["service.name"] == "agent-evals"
        assert attrs(resource.attributes)["evalkit.run_id"] == result.run_id
        assert scope.name == "evalkit"
        rid = {SPANS[0]: "chatcmpl-1", SPANS[1]: "chatcmpl-2"}[record.span_id.hex()]
        j = judgments[("echo", f"{TRACE}:{record.span_id.hex()}")]
        expected = {
            "gen_ai.evaluation.name": "echo",
            "gen_ai.evaluation.score.value": j["value"],
            "gen_ai.evaluation.score.label": j["label"] or ("pass" if j["passed"] else "fail"),
            "gen_ai.response.id": rid,
            "evalkit.run_id": result.run_id,
            "evalkit.record_id": j["record_id"],
            "evalkit.judge.plugin": "prompt_echo",
            "evalkit.judgment.status": "ok",
            "evalkit.judgment.origin": "computed",
        }
        if j["explanation"]:
            expected["gen_ai.evaluation.explanation"] = j["explanation"]
        assert a == expected
    # the same events are in the run directory as OTLP/JSON, ids in hex
    lines = (result.run_dir / "otlp" / "evaluations.jsonl").read_text().splitlines()
    records = [r for line in lines for rl in json.loads(line)["resourceLogs"]
               for sl in rl["scopeLogs"] for r in sl["logRecords"]]
    assert sorted(r["spanId"] for r in records) == SPANS[:2]
    assert {r["traceId"] for r in records} == {TRACE}
    assert {r["eventName"] for r in records} == {"gen_ai.evaluation.result"}


@pytest.mark.e2e  # whole runs
def test_push_command_sends_a_finished_run_with_errors_and_skips(tmp_path, monkeypatch):
    """``evalkit push RUN --to otlp``: every judgment kind of a transcripts run, including
    offline stand-ins (their origin says so), an errored judgment with ``error.type``, and
    skipped ones only when asked. Records without a trace get no parent span."""
    result = _run(tmp_path, {"plugin": "transcripts", "path": str(DATA / "claude")}, {},
                  {"faithful": {"plugin": "qag_faithfulness", "model": "openai/gpt-4o-mini",
                                "offline": True}})
    judgments = result.run_dir / "judgments"
    # an errored judgment, as a judge that failed on a record leaves it
    first = pq.read_table(judgments).to_pylist()[0]
    pq.write_table(conform([{**first, "judge": "broken", "status": "error", "value": None,
                             "explanation": None, "error": "TimeoutError: no answer in 60 s",
                             "origin": "computed"}],
                           JUDGMENTS), judgments / "part-99999.parquet")
    with otlp_receiver() as rx:
        monkeypatch.setenv("OTEL_EXPORTER_OTLP_LOGS_ENDPOINT", f"{rx.url}/custom/logs")
        out = subprocess.run([sys.executable, "-m", "evalkit", "push", str(result.run_dir),
                              "--to", "otlp", "--include-skipped", "--json"],
                             capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    report = json.loads(out.stdout)
    got = [attrs(r.attributes) | {"_span": r.span_id, "_sev": r.severity_text}
           for _, _, r in rx.log_records()]
    assert rx.paths[0] == "/custom/logs"
    assert report["sent"] == len(got) == len(pq.read_table(judgments)) and report["failed"] == 0
    statuses = {a["evalkit.judgment.status"] for a in got}
    assert statuses == {"ok", "skipped", "error"}
    assert all(a["_span"] == b"" for a in got)  # transcripts have no trace: no parent
    offline = [a for a in got if a["evalkit.judgment.status"] == "ok"]
    assert offline and all(a["evalkit.judgment.origin"] == "offline" and
                           a["evalkit.judge.model"] == "offline" for a in offline)
    assert all(a["gen_ai.response.id"].startswith("msg_") for a in offline)
    (error,) = [a for a in got if a["evalkit.judgment.status"] == "error"]
    assert error["error.type"] == "TimeoutError" and error["_sev"] == "WARN"
    assert "gen_ai.evaluation.score.value" not in error
    assert error["gen_ai.evaluation.explanation"] == "TimeoutError: no answer in 60 s"
    skipped = [a for a in got if a["evalkit.judgment.status"] == "skipped"]
    assert skipped and all("gen_ai.evaluation.score.value" not in a for a in skipped)


@pytest.mark.e2e  # whole runs
def test_a_failed_export_is_reported_and_the_file_still_written(tmp_path):
    result = _run(tmp_path, {"plugin": "otlp_json", "path": str(_traces(tmp_path))}, {},
                  {"echo": {"plugin": "prompt_echo"}})
    with otlp_receiver() as rx:
        rx.fail_next = 100
        sink = OtlpSink("otlp", OtlpSinkConfig(endpoint=f"{rx.url}/v1/logs", timeout_s=5),
                        None)
        report = sink.push(result.run_dir)
    assert report["failed"] == 2 and report["sent"] == report["pushed"] == 0
    assert report["events"] == report["written"] == 2
    assert report["failures"][0]["judge"] == "echo"
    assert (result.run_dir / "otlp" / "evaluations.jsonl").is_file()
    assert not list((result.run_dir / "otlp").glob(".*partial"))


@pytest.mark.e2e  # whole runs
def test_file_only_needs_no_network(tmp_path):
    result = _run(tmp_path, {"plugin": "otlp_json", "path": str(_traces(tmp_path))}, {},
                  {"echo": {"plugin": "prompt_echo"}})
    report = OtlpSink("otlp", OtlpSinkConfig(send=False), None).push(result.run_dir)
    assert report["host"] == "(file only)" and report["written"] == report["pushed"] == 2
    assert report["sent"] == 0


@pytest.mark.parametrize("trace, span, expected", [
    (TRACE, SPANS[0], (int(TRACE, 16), int(SPANS[0], 16))),
    (TRACE, None, None), ("abc", SPANS[0], None), ("0" * 32, SPANS[0], None),
    ("z" * 32, SPANS[0], None), (TRACE, "msg_01ABCDEFGHIJ", None),
])
def test_parent_ids(trace, span, expected):
    assert parent_ids(trace, span) == expected


def test_importing_evalkit_does_not_import_opentelemetry():
    code = ("import sys, evalkit.cli, evalkit.sinks.otlp, evalkit.sources.otlp_json, "
            "evalkit.sources.transcripts; "
            "print([m for m in sys.modules if m.startswith('opentelemetry')])")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert out.stdout.strip() == "[]", out.stderr


@pytest.mark.parametrize(("error", "cause", "expected"), [
    ("hallucination_llm: unparseable answer after 3 tries", "invalid_answer", "invalid_answer"),
    ("hallucination_llm: the judge failed", None, "_OTHER"),  # a judge's name is no class
    ("qag_faithfulness: HTTP 429", "rate_limited", "rate_limited"),
    ("TimeoutError: no answer in 60 s", None, "TimeoutError"),
    ("openai.APIConnectionError: refused", None, "openai.APIConnectionError"),
    (None, None, "_OTHER"),
])
def test_error_type_is_an_error_class_never_the_judge(error, cause, expected):
    from evalkit.sinks.otlp import event_attributes

    row = {"judge": "hallucination_llm", "record_id": "r1", "status": "error",
           "error": error, "error_cause": cause, "origin": "computed"}
    assert event_attributes(row, "run")["error.type"] == expected
