"""Shadow evaluation on source shapes other than OpenAI chat lists mapped in ``fields``:
OpenTelemetry GenAI spans (``parts``, tool calls and responses, separate system
instructions), OpenInference spans (flattened tool calls), and a message list left as the
input's JSON text (the bundled quickstart data). Every request the fake OpenAI-compatible
server received is a valid chat request, and matches the record it replays."""

from __future__ import annotations

import json
import shutil
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

import evalkit
from evalkit.generate.messages import openai_messages
from tests.sources.test_otlp_json import CHAT, request, span

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "judges" / "llm"))
from fake_llm_server import FakeLLMServer, Reply  # noqa: E402

pytestmark = pytest.mark.usefixtures("fresh_engines")  # (tests/conftest.py)

CORPUS = Path(__file__).resolve().parents[1] / "sources" / "corpus" / "otlp"
GENAI = [
    # a system instruction kept apart, a tool call and its answer, then the question
    ({"gen_ai.system_instructions": json.dumps([{"type": "text",
                                                  "content": "You are a flight desk."}]),
      "gen_ai.input.messages": json.dumps([
          {"role": "user", "parts": [{"type": "text", "content": "Status of SK1432?"}]},
          {"role": "assistant", "parts": [
              {"type": "reasoning", "content": "I should look it up."},
              {"type": "tool_call", "id": "c1", "name": "flight_status",
               "arguments": {"flight": "SK1432"}}]},
          {"role": "tool", "parts": [{"type": "tool_call_response", "id": "c1",
                                      "response": {"status": "delayed"}}]},
          {"role": "user", "parts": [{"type": "text", "content": "So, is SK1432 late?"}]}])}),
    # a tool result that answers no recorded call
    ({"gen_ai.input.messages": json.dumps([
        {"role": "user", "parts": [{"type": "text", "content": "Is SK99 on time?"}]},
        {"role": "tool", "parts": [{"type": "tool_call_response",
                                    "response": "on time"}]}])}),
    # a part no chat API takes: the candidate fails for this record, with the reason
    ({"gen_ai.input.messages": json.dumps([
        {"role": "user", "parts": [{"type": "blob", "mime_type": "audio/wav", "content": "AA"},
                                   {"type": "text", "content": "Transcribe this."}]}])}),
]
OUT = json.dumps([{"role": "assistant", "parts": [{"type": "text", "content": "Done."}]}])


def check_request(messages: list[dict[str, Any]]) -> None:
    """An OpenAI chat request's messages, as the API validates them."""
    open_calls: set[str] = set()
    for m in messages:
        assert set(m) <= {"role", "content", "tool_calls", "tool_call_id"}, m
        assert m["role"] in ("system", "user", "assistant", "tool"), m
        if m["role"] == "tool":
            assert m["tool_call_id"] in open_calls and isinstance(m["content"], str), m
            open_calls.discard(m["tool_call_id"])
            continue
        assert not open_calls, f"tool calls {open_calls} unanswered before {m}"
        if m.get("tool_calls"):
            assert m["role"] == "assistant"
            for call in m["tool_calls"]:
                assert call["type"] == "function" and call["id"], call
                assert isinstance(call["function"]["name"], str), call
                json.loads(call["function"]["arguments"])  # a JSON text
                open_calls.add(call["id"])
        else:
            assert isinstance(m["content"], str) and m["content"], m
    assert messages[-1]["role"] in ("user", "tool"), messages


def _shadow(server: FakeLLMServer, experiment: str | None, overrides: list[str]) -> Any:
    server.requests.clear()
    return evalkit.run(experiment, [*overrides, "generate=llm", "generate.model=openai/cand",
                                    f"generate.api_base={server.url}", "generate.cache=false",
                                    "generate.max_retries=0"])


@pytest.fixture
def server() -> Any:
    s = FakeLLMServer().start()
    s.plan = lambda body: Reply(content="A candidate's answer.")
    yield s
    s.stop()


def test_otel_genai_and_openinference_spans_replay_as_valid_chat_requests(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, server: FakeLLMServer) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "traces").mkdir()
    spans = [span(f"{k + 1:016x}", "chat gpt-4o-mini",
                  {**CHAT, **attrs, "gen_ai.output.messages": OUT})
             for k, attrs in enumerate(GENAI)]
    # a failed call with its request kept: the candidate is asked what production was not
    spans.append(span("e" * 16, "chat gpt-4o-mini", {**CHAT, "gen_ai.input.messages": json.dumps(
        [{"role": "user", "parts": [{"type": "text", "content": "Rebook me on SK1433."}]}])},
        status={"code": 2, "message": "503 upstream unavailable"}))
    # a failed call whose span kept no content (content capture off): nothing to replay
    spans.append(span("f" * 16, "chat gpt-4o-mini", {**CHAT},
                      status={"code": 2, "message": "429 rate limited"}))
    (tmp_path / "traces" / "genai.jsonl").write_text(request(*spans) + "\n")
    shutil.copy(CORPUS / "openai-agents-2025-09-30.otlp.jsonl", tmp_path / "traces")
    run = _shadow(server, None, ["source=otlp_json", f"source.path={tmp_path}/traces/*.jsonl",
                                 "judges=[prompt_echo]", "generate.replay_failed=true",
                                 "+metrics.recovery={plugin: failure_recovery}"])
    records = run.records.to_pylist()
    candidates = {r["record_id"].removesuffix("::candidate"): r for r in records
                  if r["side"] == "candidate"}
    empty = next(i for i in candidates if i.endswith("f" * 16))
    assert candidates[empty]["excluded_by"] == "generate"
    assert "no input to replay" in candidates[empty]["exclude_reason"]
    (recovery,) = [m for m in run.metrics.to_pylist() if m["metric"] == "recovery"]
    # the failed call with its request was answered; the one without content is counted
    # apart (the corpus's first model call, a get_weather tool call, is no failure)
    assert (recovery["n_attempted"], recovery["n_judged"], recovery["n_unscored"]) == (2, 1, 1)
    assert recovery["value"] == 1.0
    assert json.loads(recovery["details"])["unreplayable"] == 1
    recorded = {r["record_id"]: r for r in records if r["side"] == "recorded"
                and r["excluded_by"] in (None, "pipeline_failure")}  # (replay_failed)
    del candidates[empty], recorded[empty]
    assert set(candidates) == set(recorded)
    sent = [r["body"]["messages"] for r in server.requests]
    for messages in sent:
        check_request(messages)
    # one request per replayable record, each ending with that record's question
    failed = {i for i, c in candidates.items() if c["excluded_by"] == "generate"}
    assert len(failed) == 1
    (blob,) = failed
    assert "'blob' cannot be replayed" in candidates[blob]["exclude_reason"]
    assert Counter(_last_user(m) for m in sent) == Counter(
        r["input"] for i, r in recorded.items() if i not in failed)
    first = next(m for m in sent if _last_user(m) == "So, is SK1432 late?")
    assert first[0] == {"role": "system", "content": "You are a flight desk."}
    assert first[2]["tool_calls"][0]["function"] == {"name": "flight_status",
                                                     "arguments": '{"flight":"SK1432"}'}
    assert first[3] == {"role": "tool", "tool_call_id": "c1", "content": '{"status":"delayed"}'}
    loose = next(m for m in sent if _last_user(m) is None or "SK99" in json.dumps(m))
    assert loose[-1] == {"role": "user", "content": "Tool result: on time"}
    weather = [m for m in sent if any(x.get("tool_calls") for x in m)]
    assert any(c["function"]["name"] == "get_weather" for m in weather for x in m
               for c in x.get("tool_calls") or [])  # OpenInference's flattened calls


def _last_user(messages: list[dict[str, Any]]) -> str | None:
    users = [m["content"] for m in messages if m["role"] == "user"]
    return users[-1] if users and not users[-1].startswith("Tool result:") else \
        (users[-2] if len(users) > 1 else None)


def test_a_message_list_kept_as_the_inputs_json_text_is_replayed_as_messages(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, server: FakeLLMServer) -> None:
    monkeypatch.chdir(tmp_path)
    run = _shadow(server, "shadow", ["generate.offline=false", "generate.replay_failed=false"])
    recorded = [r for r in run.records.to_pylist()
                if r["side"] == "recorded" and r["excluded_by"] is None]
    sent = [r["body"]["messages"] for r in server.requests]
    assert len(sent) == len(recorded) == 120
    for messages in sent:
        check_request(messages)
    expected = Counter(json.dumps(json.loads(r["input"])) for r in recorded)
    assert Counter(json.dumps(m) for m in sent) == expected


def test_openai_messages_keeps_openai_lists_and_names_what_it_cannot_send() -> None:
    chat = [{"role": "system", "content": "s"}, {"role": "user", "content": "q"},
            {"role": "assistant", "content": None, "tool_calls": [
                {"id": "a", "type": "function", "function": {"name": "f", "arguments": "{}"}}]},
            {"role": "tool", "tool_call_id": "a", "content": "r"}]
    assert openai_messages(chat) == chat
    anthropic = [{"role": "user", "content": [{"type": "text", "text": "q"}]},
                 {"role": "assistant", "content": [
                     {"type": "thinking", "thinking": "hmm"},
                     {"type": "tool_use", "id": "t", "name": "f", "input": {"x": 1}}]},
                 {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t",
                                               "content": [{"type": "text", "text": "r"}]}]}]
    assert openai_messages(anthropic) == [
        {"role": "user", "content": "q"},
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": "t", "type": "function", "function": {"name": "f", "arguments": '{"x":1}'}}]},
        {"role": "tool", "tool_call_id": "t", "content": "r"}]
    with pytest.raises(ValueError, match="role 'narrator'"):
        openai_messages([{"role": "narrator", "content": "x"}])


AGENTS = Path(evalkit.__file__).parent / "data" / "agent_sessions"


@pytest.mark.parametrize("batch_size", [50_000, 3])  # (3: conversations cross batches)
def test_an_agent_sessions_turn_is_replayed_with_the_turns_before_it(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, server: FakeLLMServer,
        batch_size: int) -> None:
    monkeypatch.chdir(tmp_path)
    run = _shadow(server, None, [
        "source=transcripts", f"source.path={AGENTS}/openai/conversations.jsonl",
        f"source.discover_from={AGENTS}/telemetry/claude_code_logs.jsonl",
        f"source.sessions_dir={AGENTS}/claude", "judges=[prompt_echo]",
        f"runner.batch_size={batch_size}"])
    records = run.records.to_pylist()
    recorded = [r for r in records if r["side"] == "recorded"]
    turns: dict[str, dict[int, dict]] = {}
    for r in recorded:
        conversation, _, index = r["record_id"].rpartition(":")
        turns.setdefault(conversation, {})[int(index)] = r
    assert any(len(t) > 1 for t in turns.values())  # multi-turn conversations
    expected = []
    for conversation in turns.values():
        for k, r in conversation.items():
            if r["excluded_by"] is not None:
                continue  # (not replayed)
            messages = []
            for j in range(k):
                before = conversation[j]
                messages += [{"role": "user", "content": before["input"]}] * \
                    bool(before["input"])
                messages += [{"role": "assistant", "content": before["output"]}] * \
                    bool(before["output"])
            expected.append(messages + [{"role": "user", "content": r["input"] or ""}])
    sent = [r["body"]["messages"] for r in server.requests]
    assert sorted(map(json.dumps, sent)) == sorted(map(json.dumps, expected))
    for c in records:
        if c["side"] == "candidate":
            generate = json.loads(c["metadata"])["generate"]
            index = int(generate["recorded_id"].rpartition(":")[2])
            assert (generate["history_turns"], generate["history_missing"]) == (index, 0)
            assert "input_messages" not in json.loads(c["metadata"])  # (not stored again)


def test_langfuse_generations_replay_their_recorded_prompt(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, server: FakeLLMServer) -> None:
    from datetime import datetime, timezone

    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "sources" / "langfuse"))
    from fake_server import PUBLIC_KEY, SECRET_KEY, FakeLangfuse, make_dataset

    monkeypatch.chdir(tmp_path)
    langfuse = FakeLangfuse("v3")
    langfuse.info = make_dataset(langfuse, 12, datetime(2026, 5, 1, tzinfo=timezone.utc),
                                 datetime(2026, 5, 2, tzinfo=timezone.utc))
    monkeypatch.setenv("LANGFUSE_HOST", langfuse.start())
    monkeypatch.setenv("LANGFUSE_PUBLIC_KEY", PUBLIC_KEY)
    monkeypatch.setenv("LANGFUSE_SECRET_KEY", SECRET_KEY)
    try:
        run = _shadow(server, "langfuse_audit", [
            "source.from_time=2026-05-01T00:00:00Z", "source.to_time=2026-05-02T00:00:00Z",
            "source.resolve_retry_s=0", "generate.replay_failed=true"])  # (no lag to wait out)
    finally:
        langfuse.stop()
    assert langfuse.violations == []
    recorded = [r for r in run.records.to_pylist() if r["side"] == "recorded"
                and r["excluded_by"] in (None, "pipeline_failure")]
    sent = [r["body"]["messages"] for r in server.requests]
    assert len(sent) == len(recorded) > 20
    for messages in sent:
        check_request(messages)
    # each generation's recorded prompt (a message list, kept as the input's JSON text)
    assert Counter(json.dumps(m) for m in sent) == Counter(
        json.dumps(json.loads(r["input"])) for r in recorded)
