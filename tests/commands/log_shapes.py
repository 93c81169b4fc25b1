"""Log files shaped like the exports of common tools, written for the `evalkit init` tests
(made up here, not copied: the keys follow each tool's documented export format). Each shape
has 20 rows, 2 models, and every fifth call failed; what the true mapping gives is returned
beside the rows so a test can check the numbers a run prints."""

from __future__ import annotations

import csv
import io
import json
from typing import Any

N = 20
MODELS = ("gpt-4o-mini", "claude-3-5-haiku")


def _failed(i: int) -> bool:
    return i % 5 == 4


def _question(i: int) -> str:
    return f"How do I rotate the API key of project {i}?"


def _answer(i: int) -> str:
    return f"Open the settings of project {i}, choose Keys, then Rotate; the old key stops."


def _latency_ms(i: int) -> int:
    return 400 + 100 * i


def issue_chat_log() -> list[dict[str, Any]]:
    """The shape issue 28 shows: id, request.messages, response.text/finish_reason, meta."""
    return [{"id": f"chat-{i:03d}",
             "request": {"messages": [{"role": "system", "content": "You are a helpful agent."},
                                      {"role": "user", "content": _question(i)}]},
             "response": {"text": None if _failed(i) else _answer(i),
                          "finish_reason": "error" if _failed(i) else "stop"},
             "meta": {"model": MODELS[i % 2], "latency_ms": _latency_ms(i),
                      "cost_usd": 0.0002 * (i + 1), "user_edited": i % 3 == 0}}
            for i in range(N)]


def openai_chat_log() -> list[dict[str, Any]]:
    """A logged Chat Completions call: the request body, and the response object."""
    rows = []
    for i in range(N):
        response: dict[str, Any] = {
            "id": f"chatcmpl-{i:05d}x", "object": "chat.completion", "created": 1764000000 + i,
            "model": MODELS[i % 2],
            "choices": [{"index": 0, "message": {"role": "assistant",
                                                 "content": None if _failed(i) else _answer(i)},
                         "finish_reason": "error" if _failed(i) else "stop"}],
            "usage": {"prompt_tokens": 30 + i, "completion_tokens": 12 + i,
                      "total_tokens": 42 + 2 * i}}
        rows.append({"request_id": f"req_{i:04d}",
                     "request": {"model": MODELS[i % 2],
                                 "messages": [{"role": "user", "content": _question(i)}]},
                     "response": response, "duration_ms": _latency_ms(i)})
    return rows


def langfuse_export() -> list[dict[str, Any]]:
    """Generations as Langfuse exports them: camelCase, level, latency in seconds."""
    return [{"id": f"obs-{i}", "traceId": f"trace-{i}", "type": "GENERATION",
             "name": "answer", "startTime": f"2026-11-01T00:00:{i:02d}.000Z",
             "model": MODELS[i % 2], "modelParameters": {"temperature": 0},
             "input": [{"role": "user", "content": _question(i)}],
             "output": None if _failed(i) else {"role": "assistant", "content": _answer(i)},
             "level": "ERROR" if _failed(i) else "DEFAULT",
             "statusMessage": "upstream 503" if _failed(i) else None,
             "latency": _latency_ms(i) / 1000,
             "usage": {"input": 30 + i, "output": 12 + i, "total": 42 + 2 * i, "unit": "TOKENS"},
             "calculatedTotalCost": 0.0002 * (i + 1), "metadata": {"env": "prod"}}
            for i in range(N)]


def langsmith_export() -> list[dict[str, Any]]:
    """LangSmith runs: inputs/outputs objects, status, token counts, extra.metadata."""
    return [{"id": f"0b6c{i:04d}-1f2e-4c3d-9a8b-7c6d5e4f3a2b", "name": "qa_chain",
             "run_type": "llm", "start_time": f"2026-11-01T00:00:{i:02d}",
             "inputs": {"question": _question(i)},
             "outputs": None if _failed(i) else {"output": _answer(i)},
             "error": "RateLimitError: 429" if _failed(i) else None,
             "status": "error" if _failed(i) else "success",
             "prompt_tokens": 30 + i, "completion_tokens": 12 + i, "total_cost": 0.0002 * i,
             "extra": {"metadata": {"ls_model_name": MODELS[i % 2], "ls_provider": "x"}},
             "trace_id": f"t{i}", "reference_example_id": None}
            for i in range(N)]


def promptfoo_results() -> list[dict[str, Any]]:
    """promptfoo's results: prompt.raw, vars, response.output, provider.id, latencyMs."""
    return [{"promptIdx": 0, "testIdx": i,
             "prompt": {"raw": f"Answer briefly: {_question(i)}", "label": "brief"},
             "vars": {"question": _question(i), "expected": _answer(i)},
             "provider": {"id": f"openai:{MODELS[i % 2]}", "label": ""},
             "response": {"output": None if _failed(i) else _answer(i) if i % 2 else "No idea.",
                          "tokenUsage": {"total": 42, "prompt": 30, "completion": 12}},
             "error": "API error 500" if _failed(i) else None,
             "latencyMs": _latency_ms(i), "cost": 0.0001, "success": not _failed(i),
             "score": 1.0, "namedScores": {}}
            for i in range(N)]


def qa_csv() -> str:
    """A plain QA file: id, question, answer, expected, latency in seconds, model."""
    out = io.StringIO()
    writer = csv.writer(out)
    writer.writerow(["id", "question", "answer", "expected", "latency", "model"])
    for i in range(N):
        writer.writerow([f"q{i}", _question(i), "" if _failed(i) else _answer(i),
                         _answer(i), f"{_latency_ms(i) / 1000:.3f}", MODELS[i % 2]])
    return out.getvalue()


def jsonl(rows: list[dict[str, Any]]) -> str:
    return "".join(json.dumps(r) + "\n" for r in rows)


# shape -> (file name, text, the id the first row gets, latency p50 of the kept calls in
# seconds or None when the shape has no latency)
def _p50() -> float:
    import statistics

    return statistics.median(_latency_ms(i) / 1000 for i in range(N) if not _failed(i))


SHAPES: dict[str, tuple[str, str, str | None, float | None]] = {
    "issue_chat_log": ("chat_logs.jsonl", jsonl(issue_chat_log()), "chat-000", _p50()),
    "openai": ("openai.jsonl", jsonl(openai_chat_log()), "req_0000", _p50()),
    "langfuse": ("langfuse.jsonl", jsonl(langfuse_export()), "obs-0", _p50()),
    "langsmith": ("langsmith.jsonl", jsonl(langsmith_export()),
                  "0b6c0000-1f2e-4c3d-9a8b-7c6d5e4f3a2b", None),
    "promptfoo": ("promptfoo.jsonl", jsonl(promptfoo_results()), None, _p50()),
    "qa_csv": ("qa.csv", qa_csv(), "q0", _p50()),
}
N_FAILED = sum(_failed(i) for i in range(N))


def anthropic_log() -> list[dict[str, Any]]:
    """Messages API calls as logged: a system prompt apart, content blocks, stop_reason."""
    return [{"id": f"msg_{i:03d}", "model": MODELS[i % 2],
             "request": {"system": "Be brief.",
                         "messages": [{"role": "user", "content": _question(i)}]},
             "response": None if _failed(i) else {
                 "content": [{"type": "text", "text": _answer(i)}], "stop_reason": "end_turn",
                 "usage": {"input_tokens": 30 + i, "output_tokens": 12 + i}},
             "error": {"type": "overloaded_error"} if _failed(i) else None,
             "latency_ms": _latency_ms(i)} for i in range(N)]


def gateway_log() -> list[dict[str, Any]]:
    """An LLM gateway's request log: bodies as sent and received, the HTTP status."""
    return [{"request_id": f"gw-{i}", "request_body": {
                "model": MODELS[i % 2], "messages": [{"role": "user", "content": _question(i)}]},
             "response_body": {"error": {"message": "rate limited"}} if _failed(i) else {
                 "choices": [{"message": {"role": "assistant", "content": _answer(i)}}]},
             "status": 429 if _failed(i) else 200, "latency": _latency_ms(i), "cost": 0.001,
             "user_id": f"u{i % 3}"} for i in range(N)]


def duration_csv() -> str:
    out = io.StringIO()
    writer = csv.writer(out)
    writer.writerow(["prompt", "completion", "model", "duration_s", "thumbs_up"])
    for i in range(N):
        writer.writerow([_question(i), _answer(i), MODELS[i % 2], _latency_ms(i) / 1000,
                         str(i % 2 == 0).lower()])
    return out.getvalue()


# shapes no issue showed: checked by the mapping test only
MORE_SHAPES = {"anthropic": ("anthropic.jsonl", jsonl(anthropic_log())),
               "gateway": ("gateway.jsonl", jsonl(gateway_log())),
               "duration_csv": ("durations.csv", duration_csv())}


def anthropic_blocks_log() -> list[dict[str, Any]]:
    """Messages API calls with content blocks both ways: the user's turn as a list of blocks,
    a thinking block before the answer's text block, and a failed call's error body (the
    API's ``{"type": "error", "error": {...}}``) in place of the message."""
    rows = []
    for i in range(N):
        if _failed(i):
            response: dict[str, Any] = {"type": "error", "error": {
                "type": "overloaded_error", "message": "Overloaded"}}
        else:
            response = {"id": f"msg_01{i:04d}", "type": "message", "role": "assistant",
                        "model": MODELS[i % 2],
                        "content": [{"type": "thinking", "thinking": "The user wants keys."},
                                    {"type": "text", "text": _answer(i)}],
                        "stop_reason": "end_turn",
                        "usage": {"input_tokens": 30 + i, "output_tokens": 12 + i}}
        rows.append({"log_id": f"anth-{i}", "timestamp": f"2026-11-01T00:00:{i:02d}Z",
                     "request": {"model": MODELS[i % 2], "max_tokens": 512,
                                 "system": [{"type": "text", "text": "Be brief."}],
                                 "messages": [{"role": "user", "content": [
                                     {"type": "text", "text": _question(i)}]}]},
                     "response": response, "http_status": 529 if _failed(i) else 200,
                     "duration_ms": _latency_ms(i)})
    return rows


def litellm_spend_log() -> list[dict[str, Any]]:
    """LiteLLM proxy spend logs (the ``LiteLLM_SpendLogs`` table as JSON): ``spend`` for the
    cost, messages and response stored as JSON text, ``status`` success/failure, the
    duration in ``request_duration_ms``, and start/end times."""
    rows = []
    for i in range(N):
        response = {} if _failed(i) else {
            "id": f"chatcmpl-{i}", "model": MODELS[i % 2], "object": "chat.completion",
            "choices": [{"index": 0, "finish_reason": "stop", "message": {
                "role": "assistant", "content": _answer(i)}}]}
        rows.append({"request_id": f"ll-{i:03d}", "call_type": "acompletion",
                     "api_key": "88dc28d0f030c55ed4ab77ed8faf098196cb1c05df778539800c9f1243fe6b4b",
                     "spend": 0.0003 * (i + 1), "total_tokens": 42 + 2 * i,
                     "prompt_tokens": 30 + i, "completion_tokens": 0 if _failed(i) else 12 + i,
                     "startTime": f"2026-11-01T00:00:{i:02d}.000000",
                     "endTime": f"2026-11-01T00:00:{i:02d}.900000",
                     "request_duration_ms": _latency_ms(i), "model": MODELS[i % 2],
                     "model_group": "default", "custom_llm_provider": "openai",
                     "user": f"u{i % 3}", "cache_hit": "False", "request_tags": "[]",
                     "messages": json.dumps([{"role": "user", "content": _question(i)}]),
                     "response": json.dumps(response), "status": (
                         "failure" if _failed(i) else "success"),
                     "metadata": json.dumps({"user_api_key_alias": "team-a",
                                             "error_information": {
                                                 "error_class": "RateLimitError"}
                                             if _failed(i) else {}})})
    return rows


def otel_genai_spans() -> list[dict[str, Any]]:
    """Vercel AI SDK spans exported one a line with OpenTelemetry GenAI attributes: the
    attribute keys hold dots (``gen_ai.request.model``, ``ai.response.text``), the prompt is
    JSON text, times are Unix nanoseconds, a failed call has status code 2 (ERROR)."""
    rows = []
    for i in range(N):
        start = 1_764_000_000_000_000_000 + i * 10**10
        attributes: dict[str, Any] = {
            "operation.name": "ai.generateText", "ai.model.id": MODELS[i % 2],
            "gen_ai.system": "openai", "gen_ai.request.model": MODELS[i % 2],
            "ai.prompt": json.dumps({"system": "Be brief.", "messages": [
                {"role": "user", "content": [{"type": "text", "text": _question(i)}]}]}),
            "gen_ai.usage.input_tokens": 30 + i}
        if not _failed(i):
            attributes.update({"ai.response.text": _answer(i),
                               "ai.response.finishReason": "stop",
                               "gen_ai.response.finish_reasons": ["stop"],
                               "gen_ai.usage.output_tokens": 12 + i})
        rows.append({"traceId": f"{i:032x}", "spanId": f"{i:016x}", "name": "ai.generateText",
                     "startTimeUnixNano": start,
                     "endTimeUnixNano": start + _latency_ms(i) * 10**6,
                     "attributes": attributes,
                     "status": {"code": 2, "message": "AI_APICallError: 503"} if _failed(i)
                     else {"code": 0}})
    return rows


def thumbs_csv() -> str:
    """A CSV of prompt, completion, latency in milliseconds and a thumbs vote (up, down or
    none): no id, no model; a failed call is an empty completion."""
    out = io.StringIO()
    writer = csv.writer(out)
    writer.writerow(["prompt", "completion", "latency_ms", "thumbs"])
    for i in range(N):
        writer.writerow([_question(i), "" if _failed(i) else _answer(i), _latency_ms(i),
                         ("up", "down", "")[i % 3]])
    return out.getvalue()


# shapes no test had before the second round of checks
NEW_SHAPES = {"anthropic_blocks": ("anthropic_blocks.jsonl", jsonl(anthropic_blocks_log())),
              "litellm": ("litellm_spend.jsonl", jsonl(litellm_spend_log())),
              "otel_genai": ("ai_sdk_spans.jsonl", jsonl(otel_genai_spans())),
              "thumbs_csv": ("thumbs.csv", thumbs_csv())}


def _flat(row: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    """``row`` flattened as pandas' ``json_normalize`` does: nested keys joined by dots, lists
    kept whole."""
    out: dict[str, Any] = {}
    for key, value in row.items():
        if isinstance(value, dict):
            out.update(_flat(value, f"{prefix}{key}."))
        else:
            out[f"{prefix}{key}"] = value
    return out


def flattened_csv() -> str:
    """The issue's chat log flattened to a CSV (``json_normalize`` then ``to_csv``): headers
    ``request.messages``, ``meta.model``; the message list as JSON text."""
    rows = [_flat(r) for r in issue_chat_log()]
    out = io.StringIO()
    writer = csv.DictWriter(out, fieldnames=list(rows[0]))
    writer.writeheader()
    for row in rows:
        writer.writerow({k: json.dumps(v) if isinstance(v, list) else
                         str(v).lower() if isinstance(v, bool) else v
                         for k, v in row.items()})
    return out.getvalue()


NEW_SHAPES.update({"flattened_csv": ("chat_logs_flat.csv", flattened_csv()),
                   "flattened_jsonl": ("chat_logs_flat.jsonl",
                                       jsonl([_flat(r) for r in issue_chat_log()]))})


def openai_responses_log() -> list[dict[str, Any]]:
    """OpenAI Responses API calls as logged: the output a list of typed items (a reasoning
    item, then a message with ``output_text`` parts), ``status`` failed with an error object
    for a failed call, the time in ``elapsed_ms``."""
    rows = []
    for i in range(N):
        output = [] if _failed(i) else [
            {"type": "reasoning", "id": f"rs_{i}", "summary": []},
            {"type": "message", "id": f"msg_{i}", "role": "assistant", "status": "completed",
             "content": [{"type": "output_text", "text": _answer(i), "annotations": []}]}]
        rows.append({"request": {"model": MODELS[i % 2], "input": _question(i),
                                 "instructions": "Be brief."},
                     "response": {"id": f"resp_{i}", "object": "response",
                                  "model": MODELS[i % 2],
                                  "status": "failed" if _failed(i) else "completed",
                                  "error": {"code": "server_error", "message": "upstream"}
                                  if _failed(i) else None, "output": output,
                                  "usage": {"input_tokens": 30 + i, "output_tokens": 12 + i}},
                     "elapsed_ms": _latency_ms(i)})
    return rows


NEW_SHAPES["openai_responses"] = ("responses.jsonl", jsonl(openai_responses_log()))


def openai_batch_output() -> list[dict[str, Any]]:
    """An OpenAI Batch API output file: each line a ``custom_id`` and the ``response`` (HTTP
    status and the Chat Completions body), or ``response: null`` and an ``error`` for a
    request that failed. It holds no prompt: that is in the batch's input file."""
    rows = []
    for i in range(N):
        if _failed(i):
            rows.append({"id": f"batch_req_{i:03d}", "custom_id": f"task-{i}", "response": None,
                         "error": {"code": "server_error", "message": "upstream timeout"}})
            continue
        body = {"id": f"chatcmpl-{i}", "object": "chat.completion", "model": MODELS[i % 2],
                "choices": [{"index": 0, "finish_reason": "stop", "message": {
                    "role": "assistant", "content": _answer(i)}}],
                "usage": {"prompt_tokens": 30 + i, "completion_tokens": 12 + i,
                          "total_tokens": 42 + 2 * i}}
        rows.append({"id": f"batch_req_{i:03d}", "custom_id": f"task-{i}", "error": None,
                     "response": {"status_code": 200, "request_id": f"r{i}", "body": body}})
    return rows


def langsmith_runs_csv() -> str:
    """LangSmith runs exported to CSV: ``inputs``/``outputs`` as JSON text, an LLM run's
    ``inputs.messages`` a batch of one conversation (a list in a list), ``error`` set on a
    failed run, start and end times, no model column."""
    out = io.StringIO()
    writer = csv.writer(out)
    writer.writerow(["id", "name", "run_type", "inputs", "outputs", "error", "start_time",
                     "end_time", "total_tokens", "total_cost", "feedback_stats"])
    for i in range(N):
        messages = [[{"role": "system", "content": "Be brief."},
                     {"role": "user", "content": _question(i)}]]
        writer.writerow([f"1f0e{i:04d}-aaaa-4bbb-8ccc-000000000000", "ChatOpenAI", "llm",
                         json.dumps({"messages": messages}),
                         "" if _failed(i) else json.dumps({"output": _answer(i)}),
                         "RateLimitError: 429" if _failed(i) else "",
                         f"2026-11-01T10:00:{i:02d}.000000", f"2026-11-01T10:00:{i:02d}.800000",
                         42 + 2 * i, f"{0.0002 * (i + 1):.6f}",
                         json.dumps({"correctness": {"n": 1, "avg": 1.0}}) if i % 3 == 0 else ""])
    return out.getvalue()


def ragas_csv() -> str:
    """A Ragas / DeepEval evaluation dataset: ``user_input``, ``response``, the
    ``retrieved_contexts`` as a JSON list, ``reference``; no id, model or failure."""
    out = io.StringIO()
    writer = csv.writer(out)
    writer.writerow(["user_input", "response", "retrieved_contexts", "reference"])
    for i in range(N):
        writer.writerow([_question(i), _answer(i) if i % 3 else "I don't know.",
                         json.dumps([f"Keys of project {i} rotate under Settings.", "Billing."]),
                         _answer(i)])
    return out.getvalue()


def helicone_log() -> list[dict[str, Any]]:
    """A Helicone / Portkey-style request log: ``request.body.messages``, ``response.body``,
    the latency in milliseconds as a string, ``status`` the HTTP code."""
    return [{"request": {"id": f"hl-{i}", "created_at": f"2026-11-01T10:00:{i:02d}Z",
                         "body": {"model": MODELS[i % 2], "messages": [
                             {"role": "system", "content": "Be brief."},
                             {"role": "user", "content": _question(i)}]}},
             "response": {"status": 500 if _failed(i) else 200, "body": {
                 "error": {"message": "Internal error"}} if _failed(i) else {
                 "model": MODELS[i % 2],
                 "choices": [{"message": {"role": "assistant", "content": _answer(i)}}],
                 "usage": {"prompt_tokens": 30 + i, "completion_tokens": 12 + i}}},
             "latency": str(_latency_ms(i)), "status": 500 if _failed(i) else 200,
             "cost": 0.0002 * (i + 1), "model": MODELS[i % 2]} for i in range(N)]


# shapes no test had before the third round of checks
NEW_SHAPES.update({"openai_batch": ("batch_output.jsonl", jsonl(openai_batch_output())),
                   "langsmith_csv": ("langsmith_runs.csv", langsmith_runs_csv()),
                   "ragas_csv": ("ragas_eval.csv", ragas_csv()),
                   "helicone": ("helicone.jsonl", jsonl(helicone_log()))})


def _lc(kind: str, content: str) -> dict[str, Any]:
    """A message as LangChain serializes it (``dumpd``)."""
    return {"lc": 1, "type": "constructor", "id": ["langchain", "schema", "messages", kind],
            "kwargs": {"content": content, "type": {"SystemMessage": "system",
                                                    "HumanMessage": "human",
                                                    "AIMessage": "ai"}[kind]}}


def langsmith_llm_runs() -> list[dict[str, Any]]:
    """LangSmith LLM runs as the SDK returns them: ``inputs.messages`` a batch of one
    conversation of LangChain-serialized messages, ``outputs.generations`` a list of lists,
    the model and token usage in ``outputs.llm_output``; a failed run has no outputs."""
    rows = []
    for i in range(N):
        outputs = None if _failed(i) else {
            "generations": [[{"text": _answer(i), "type": "ChatGeneration",
                              "generation_info": {"finish_reason": "stop"},
                              "message": _lc("AIMessage", _answer(i))}]],
            "llm_output": {"model_name": MODELS[i % 2], "token_usage": {
                "prompt_tokens": 30 + i, "completion_tokens": 12 + i}}}
        rows.append({"id": f"run-{i:03d}", "name": "ChatOpenAI", "run_type": "llm",
                     "inputs": {"messages": [[_lc("SystemMessage", "Be brief."),
                                              _lc("HumanMessage", _question(i))]]},
                     "outputs": outputs, "error": "RateLimitError: 429" if _failed(i) else None,
                     "status": "error" if _failed(i) else "success"})
    return rows


NEW_SHAPES["langsmith_llm"] = ("langsmith_llm_runs.jsonl", jsonl(langsmith_llm_runs()))
