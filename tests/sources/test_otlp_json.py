"""``otlp_json``: OTLP/JSON trace files (a collector's file exporter), one record per GenAI
span; other spans set aside for the span breakdown; ERROR spans caught by pipeline_failure."""

from __future__ import annotations

import gzip
import json
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest
from omegaconf import OmegaConf

from evalkit.config import load
from evalkit.runner.pipeline import execute
from evalkit.sources.otlp_json import OtlpJsonConfig, OtlpJsonSource, any_value
from tests.sources.conftest import RejectsCtx, read_collecting

read_all = read_collecting


@pytest.fixture
def ctx(tmp_path):
    return RejectsCtx(run_id="r1", run_dir=tmp_path / "run", cache_dir=tmp_path / "cache",
                      rejects=[])


DATA = Path(__file__).resolve().parents[2] / "evalkit" / "data" / "agent_sessions"
T = "0af7651916cd43dd8448eb211c80319c"


def kv(key: str, value: Any) -> dict[str, Any]:
    if isinstance(value, bool):
        return {"key": key, "value": {"boolValue": value}}
    if isinstance(value, int):
        return {"key": key, "value": {"intValue": str(value)}}
    if isinstance(value, list):
        return {"key": key, "value": {"arrayValue": {"values": [
            {"stringValue": v} for v in value]}}}
    return {"key": key, "value": {"stringValue": value}}


def span(sid: str, name: str, attrs: dict[str, Any], parent: str = "", status: Any = None,
         events: list[dict[str, Any]] | None = None, start: int = 1_700_000_000_000_000_000,
         dur_ns: int = 1_250_000_000) -> dict[str, Any]:
    out = {"traceId": T, "spanId": sid, "parentSpanId": parent, "name": name, "kind": 3,
           "startTimeUnixNano": str(start), "endTimeUnixNano": str(start + dur_ns),
           "attributes": [kv(k, v) for k, v in attrs.items()], "status": status or {}}
    if events is not None:
        out["events"] = events
    return out


def request(*spans: dict[str, Any]) -> str:
    return json.dumps({"resourceSpans": [{
        "resource": {"attributes": [kv("service.name", "travel-bot")]},
        "scopeSpans": [{"scope": {"name": "openai_v2"}, "spans": list(spans)}]}]})


CHAT = {"gen_ai.operation.name": "chat", "gen_ai.provider.name": "openai",
        "gen_ai.request.model": "gpt-4o-mini", "gen_ai.response.model": "gpt-4o-mini-2024-07-18",
        "gen_ai.response.id": "chatcmpl-9", "gen_ai.usage.input_tokens": 412,
        "gen_ai.usage.output_tokens": 38, "gen_ai.response.finish_reasons": ["stop"],
        "gen_ai.conversation.id": "conv-1"}
IN = json.dumps([{"role": "user", "parts": [{"type": "text", "content": "Is SK1432 on time?"}]},
                 {"role": "tool", "parts": [{"type": "tool_call_response",
                                             "response": "delayed to 09:25"}]}])
OUT = json.dumps([{"role": "assistant", "parts": [{"type": "text", "content": "Delayed."}]}])


def rows(ctx, path: Path, **cfg: Any) -> list[dict[str, Any]]:
    out = read_all(OtlpJsonSource("otlp_json", OtlpJsonConfig(path=str(path), **cfg), ctx))
    got = out.to_pylist()
    for r in got:
        r["metadata"] = json.loads(r["metadata"])
    return got


def test_one_record_per_genai_span_with_ids_level_latency_and_content(ctx, tmp_path):
    path = tmp_path / "t.jsonl"
    path.write_text(request(
        span("a" * 16, "invoke_agent bot", {"gen_ai.operation.name": "invoke_agent"}),
        span("b" * 16, "chat gpt-4o-mini", {**CHAT, "gen_ai.input.messages": IN,
                                            "gen_ai.output.messages": OUT},
             parent="a" * 16, status={"code": 1}),
        span("c" * 16, "chat gpt-4o-mini", {**CHAT}, parent="a" * 16,
             status={"code": 2, "message": "429 rate limited"}),
        span("d" * 16, "execute_tool get_status", {"gen_ai.operation.name": "execute_tool",
                                                   "gen_ai.tool.name": "get_status"},
             parent="a" * 16, status={"code": "STATUS_CODE_ERROR", "message": "timeout"}),
        span("e" * 16, "hook guard", {"hook.name": "guard"}, parent="a" * 16),
    ) + "\n")
    got = {r["observation_id"]: r for r in rows(ctx, path)}
    chat = got["b" * 16]
    assert chat["record_id"] == f"{T}:{'b' * 16}" and chat["trace_id"] == T
    assert chat["metadata"]["span"] == {"name": "chat gpt-4o-mini", "type": "llm",
                                        "error": False, "parent_span_id": "a" * 16, "kind": 3}
    assert (chat["level"], chat["model"], chat["session_id"]) == (
        "DEFAULT", "gpt-4o-mini-2024-07-18", "conv-1")
    assert chat["latency_s"] == pytest.approx(1.25)
    assert (chat["input_tokens"], chat["output_tokens"]) == (412, 38)
    # judges read text: the last user message and the assistant's text; the lists beside
    assert chat["input"] == "Is SK1432 on time?" and chat["output"] == "Delayed."
    assert chat["metadata"]["input_messages"] == json.loads(IN)
    assert chat["metadata"]["output_messages"] == json.loads(OUT)
    assert chat["context"] == ["delayed to 09:25"]  # the tool results the model was given
    assert chat["metadata"]["response_id"] == "chatcmpl-9"
    assert chat["metadata"]["finish_reasons"] == ["stop"]
    assert chat["metadata"]["service"] == "travel-bot"
    assert chat["excluded_by"] is None
    failed = got["c" * 16]
    assert (failed["level"], failed["status_message"]) == ("ERROR", "429 rate limited")
    assert failed["input"] is None and failed["output"] is None  # a span without content
    tool = got["d" * 16]
    assert tool["excluded_by"] == "non_genai_span" and tool["level"] == "ERROR"
    assert tool["metadata"]["tool_calls"] == [{"id": None, "name": "get_status", "ok": False,
                                               "error": "timeout"}]
    assert {got[s]["metadata"]["span"]["type"] for s in ("a" * 16, "e" * 16)} == {
        "agent", "hook"}
    assert rows(ctx, path, keep_other_spans=False)[0]["observation_id"] == "b" * 16


def test_content_from_inference_details_events_and_older_conventions(ctx, tmp_path):
    path = tmp_path / "t.jsonl.gz"
    details = {"name": "gen_ai.client.inference.operation.details", "timeUnixNano": "1",
               "attributes": [kv("gen_ai.input.messages", IN), kv("gen_ai.output.messages", OUT)]}
    old = [{"name": "gen_ai.content.prompt", "attributes": [kv("gen_ai.prompt", "Hi?")]},
           {"name": "gen_ai.content.completion", "attributes": [kv("gen_ai.completion", "Hey")]}]
    path.write_bytes(gzip.compress((request(
        span("1" * 16, "chat", CHAT, events=[details]),
        span("2" * 16, "chat", {"gen_ai.system": "openai", "gen_ai.request.model": "m"},
             events=old)) + "\n").encode()))
    first, second = rows(ctx, path)
    assert (first["input"], first["output"]) == ("Is SK1432 on time?", "Delayed.")
    raw = rows(ctx, path, content="raw")[0]  # the config asks for the JSON of the lists
    assert (raw["input"], raw["output"]) == (IN, OUT)
    assert (second["input"], second["output"]) == ("Hi?", "Hey")
    assert second["metadata"]["provider"] == "openai"


def test_malformed_lines_other_signals_and_duplicates_are_rejects(ctx, tmp_path):
    path = tmp_path / "t.jsonl"
    good = request(span("1" * 16, "chat", CHAT))
    path.write_text("\n".join([good, "{not json", json.dumps({"resourceLogs": []}),
                               good, request({"name": "no ids"})]) + "\n")
    assert len(rows(ctx, path)) == 1
    assert [(r["location"].rsplit(":", 1)[1], r["reason"].split(":")[0].split(" (")[0])
            for r in ctx.rejects] == [
        ("2", "malformed JSON"), ("3", "not an ExportTraceServiceRequest"),
        ("4", f"duplicate span {T}"), ("5", "a span without traceId or spanId")]


def test_any_value():
    assert any_value({"intValue": "7"}) == 7
    assert any_value({"kvlistValue": {"values": [kv("a", 1)]}}) == {"a": 1}
    assert any_value({"arrayValue": {"values": [{"doubleValue": 0.5}]}}) == [0.5]


@pytest.mark.e2e  # a whole run
def test_error_spans_are_caught_by_pipeline_failure_and_tool_spans_counted(tmp_path):
    cfg = OmegaConf.create({
        "experiment": "traces",
        "source": {"plugin": "otlp_json", "path": str(DATA / "traces" / "*.jsonl")},
        "filters": {"pipeline_failure": {"plugin": "pipeline_failure"}},
        "judges": {"echo": {"plugin": "prompt_echo"}},
        "metrics": {"spans": {"plugin": "span_breakdown"},
                    "tools": {"plugin": "tool_correctness"}},
        "runner": {"runs_dir": str(tmp_path / "runs"), "summary": False}})
    result = execute(load(cfg))
    records = pq.read_table(result.run_dir / "records.parquet").to_pylist()
    errors = [r for r in records if r["level"] == "ERROR"]
    llm_errors = [r for r in errors if r["excluded_by"] != "non_genai_span"]
    assert llm_errors and all(r["excluded_by"] == "pipeline_failure" for r in llm_errors)
    assert result.manifest["excluded_by"]["non_genai_span"] > 0
    metrics = {(m["metric"], m["slice"]): m for m in result.metrics.to_pylist()}
    assert metrics[("spans", "type=tool")]["value"] == 3
    assert metrics[("spans.error_rate", "type=tool")]["value"] == pytest.approx(1 / 3)
    assert metrics[("spans", "type=hook")]["value"] == 3
    assert metrics[("tools", "all")]["value"] == pytest.approx(2 / 3)
    judged = pq.read_table(result.run_dir / "judgments").to_pylist()
    assert {j["status"] for j in judged if j["record_id"] in
            {r["record_id"] for r in records if r["excluded_by"]}} == {"skipped"}


def test_a_real_openai_agents_sdk_trace_matches_its_hand_count(ctx):
    """OpenInference spans of an OpenAI Agents SDK run (tests/sources/corpus, licence in its
    LICENSES.md): model calls judged on text, agents and tools set aside, as counted by hand
    in corpus/expectations.yaml."""
    import yaml

    corpus = Path(__file__).resolve().parent / "corpus"
    name = "otlp/openai-agents-2025-09-30.otlp.jsonl"
    spec = yaml.safe_load((corpus / "expectations.yaml").read_text())[name]
    src = OtlpJsonSource("otlp_json", OtlpJsonConfig(path=str(corpus / name)), ctx)
    got = {r["record_id"]: r for r in read_all(src).to_pylist()}
    assert src.counts == spec["counts"] and not ctx.rejects
    assert list(got) == [r["id"] for r in spec["records"]]
    for want in spec["records"]:
        row = got[want["id"]]
        meta = json.loads(row["metadata"])
        assert meta["span"]["type"] == want["type"]
        assert row["latency_s"] == pytest.approx(want["latency"], abs=1e-3)
        if want["type"] != "llm":
            assert row["excluded_by"] == "non_genai_span"
            if "tool" in want:
                assert [c["name"] for c in meta["tool_calls"]] == [want["tool"]]
            continue
        assert row["excluded_by"] is None and row["input"] == want["input"]
        assert (row["output"] is None) if want["output"] is None else \
            row["output"].startswith(want["output"])
        assert (row["input_tokens"], row["output_tokens"]) == (want["in"], want["out"])
        assert len(row["context"]) == want["context"]
        assert len(meta["input_messages"]) == want["input_messages"]
        assert not row["input"].startswith("[")  # text, never the JSON of a message list
