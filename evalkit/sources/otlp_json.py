"""``otlp_json``: OpenTelemetry traces in OTLP/JSON, one record per GenAI span.

Reads the files an OpenTelemetry Collector's file exporter writes: one
``ExportTraceServiceRequest`` in its JSON encoding per line (``resourceSpans`` →
``scopeSpans`` → ``spans``), plain or gzipped. A span with GenAI semantic-convention
attributes of a model call (``gen_ai.operation.name`` of chat, text_completion,
generate_content, embeddings, or any ``gen_ai.request.model`` / ``gen_ai.usage.*`` without
an operation) becomes a record: trace, span and parent span ids, span name, model, level from
the span status (``ERROR`` for status code 2), latency from start and end, tokens, response
id, and the prompt and completion from ``gen_ai.input.messages`` / ``gen_ai.output.messages``
(on the span or on its ``gen_ai.client.inference.operation.details`` event) or the older
``gen_ai.prompt`` / ``gen_ai.completion`` attributes and events.

OpenInference spans (``openinference.span.kind``: what Arize's instrumentations, among them
the OpenAI Agents SDK's, write) are read too: an ``LLM`` or ``EMBEDDING`` span is a model
call, with ``llm.model_name``, ``llm.token_count.*`` and its messages from the flattened
``llm.input_messages.<i>.message.*`` / ``llm.output_messages.<i>.message.*`` (else
``input.value`` / ``output.value``); ``TOOL`` spans are tool calls, ``AGENT`` and ``CHAIN``
spans agents.

Judges read text: a chat-shaped input or output (a list of messages) becomes the last user
message's text (``input``) and the assistant's text (``output``); the lists are kept in
``metadata.input_messages`` / ``metadata.output_messages``. ``content: raw`` keeps the JSON of
the lists as input and output instead.

Every other span (tool, agent, hook spans) is a record too, set aside by the source itself
(``excluded_by='non_genai_span'``): it is counted by ``span_breakdown`` and, for
``execute_tool`` spans, by ``tool_correctness``, and never judged.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any

import orjson

from evalkit.plugin import Reject, Source, SourceItem
from evalkit.results.schemas import json_text, record_batches
from evalkit.sources._chat import assistant_text, last_user_text, messages_of
from evalkit.sources._json_lines import MAX_LINE_BYTES, json_lines

__all__ = [
    "EXCLUDED_BY", "GENAI_OPERATIONS", "any_value", "attributes", "is_genai_call",
    "OtlpJsonConfig", "OtlpJsonSource", "span_record", "span_type",
]

GENAI_OPERATIONS = ("chat", "text_completion", "generate_content", "embeddings")
EXCLUDED_BY = "non_genai_span"
# attributes kept as record columns or content, not repeated in metadata.attributes
_CONTENT = ("gen_ai.input.messages", "gen_ai.output.messages", "gen_ai.system_instructions",
            "gen_ai.prompt", "gen_ai.completion")
_DETAILS_EVENT = "gen_ai.client.inference.operation.details"
CONTENT = ("text", "raw")
# OpenInference: the span kinds that are model calls, and what the others are
_OI_KIND = "openinference.span.kind"
_OI_TYPES = {"LLM": "llm", "EMBEDDING": "llm", "TOOL": "tool", "AGENT": "agent",
             "CHAIN": "agent"}
_OI_CONTENT = ("llm.input_messages.", "llm.output_messages.", "input.value", "output.value")


@dataclass(frozen=True)
class OtlpJsonConfig:
    path: str = "???"  # a file or a glob (traces/*.jsonl, *.json.gz), relative to the working dir
    # also keep spans that are not model calls (tool, agent, hook spans) as records set aside
    # with excluded_by='non_genai_span' (for span_breakdown and tool_correctness); false: only
    # count them in the manifest
    keep_other_spans: bool = True
    # text: a chat-shaped input or output is the last user message's text and the assistant's
    # text (the message lists in metadata); raw: the JSON of the message lists
    content: str = "text"
    max_line_bytes: int = MAX_LINE_BYTES  # a longer line is a reject, skipped unread
    batch_size: int = 5_000  # records per batch

    def validate(self) -> None:
        if self.content not in CONTENT:
            raise ValueError(f"content: {self.content!r} is not one of {', '.join(CONTENT)}")
        if self.max_line_bytes < 1:
            raise ValueError(f"max_line_bytes: must be positive, got {self.max_line_bytes}")
        if self.batch_size < 1:
            raise ValueError(f"batch_size: must be positive, got {self.batch_size}")


def any_value(value: Any) -> Any:
    """The Python value of an OTLP/JSON ``AnyValue`` (``intValue`` is a decimal string in
    JSON; ``bytesValue`` stays base64 text)."""
    if not isinstance(value, dict):
        return value
    for key in ("stringValue", "boolValue", "doubleValue", "bytesValue"):
        if key in value:
            return value[key]
    if "intValue" in value:
        try:
            return int(value["intValue"])
        except (TypeError, ValueError):
            return value["intValue"]
    if "arrayValue" in value:
        return [any_value(v) for v in (value["arrayValue"] or {}).get("values", [])]
    if "kvlistValue" in value:
        return attributes((value["kvlistValue"] or {}).get("values", []))
    return None


def attributes(items: Any) -> dict[str, Any]:
    """OTLP/JSON ``[{"key": k, "value": AnyValue}]`` as a dict."""
    out: dict[str, Any] = {}
    if isinstance(items, list):
        for item in items:
            if isinstance(item, dict) and isinstance(item.get("key"), str):
                out[item["key"]] = any_value(item.get("value"))
    return out


def _nanos(value: Any) -> int | None:
    try:
        return int(value)
    except (TypeError, ValueError):
        return None


def _count(value: Any) -> int | None:
    """A token count attribute as an int (a writer may give a string or a float)."""
    if isinstance(value, bool):
        return None
    try:
        return int(value) if value is not None else None
    except (TypeError, ValueError):
        return None


def _status_code(status: Any) -> int:
    code = status.get("code") if isinstance(status, dict) else None
    if isinstance(code, str):  # some writers give the enum's name
        return {"STATUS_CODE_OK": 1, "STATUS_CODE_ERROR": 2}.get(code, 0)
    return code if isinstance(code, int) else 0


def is_genai_call(attrs: dict[str, Any]) -> bool:
    """Whether a span's attributes describe a model call."""
    if _OI_KIND in attrs:
        return _OI_TYPES.get(str(attrs[_OI_KIND]).upper()) == "llm"
    op = attrs.get("gen_ai.operation.name")
    if op is not None:
        return op in GENAI_OPERATIONS
    return any(k == "gen_ai.request.model" or k.startswith("gen_ai.usage.") for k in attrs)


def span_type(name: str, attrs: dict[str, Any]) -> str:
    """``llm``, ``tool``, ``agent``, ``hook`` or ``other``."""
    op = attrs.get("gen_ai.operation.name")
    if is_genai_call(attrs):
        return "llm"
    if _OI_KIND in attrs:
        return _OI_TYPES.get(str(attrs[_OI_KIND]).upper(), "other")
    if op == "execute_tool" or "gen_ai.tool.name" in attrs:
        return "tool"
    if op in ("invoke_agent", "create_agent"):
        return "agent"
    if name.lower().startswith("hook") or any(k.startswith("hook.") for k in attrs):
        return "hook"
    return "other"


def _text(value: Any) -> str | None:
    if value is None:
        return None
    return value if isinstance(value, str) else json_text(value)


def _oi_messages(attrs: dict[str, Any], prefix: str) -> list[dict[str, Any]] | None:
    """OpenInference's flattened ``<prefix>.<i>.message.<key>`` attributes as a message list
    (``contents.<j>.message_content.*`` as content parts, ``tool_calls.<j>.tool_call.*`` as
    tool calls)."""
    found: dict[int, dict[str, Any]] = {}
    for key, value in attrs.items():
        if not key.startswith(prefix):
            continue
        index, _, tail = key[len(prefix):].partition(".message.")
        if not index.isdigit():
            continue
        message = found.setdefault(int(index), {})
        head, _, rest = tail.partition(".")
        if head in ("contents", "tool_calls") and rest:
            j, _, field = rest.partition(".")
            if j.isdigit():
                item = message.setdefault(head, {}).setdefault(int(j), {})
                item[field.split(".", 1)[-1]] = value
        else:
            message[tail] = value
    out = []
    for _, message in sorted(found.items()):
        for head in ("contents", "tool_calls"):
            if isinstance(message.get(head), dict):
                message[head] = [v for _, v in sorted(message[head].items())]
        if "contents" in message and "content" not in message:
            message["content"] = message.pop("contents")
        out.append(message)
    return out or None


def _content(attrs: dict[str, Any], events: list[dict[str, Any]]) -> tuple[Any, Any, Any]:
    """(input, output, system instructions) from the span's attributes, else its events."""
    if _OI_KIND in attrs:
        return (_oi_messages(attrs, "llm.input_messages.") or attrs.get("input.value"),
                _oi_messages(attrs, "llm.output_messages.") or attrs.get("output.value"),
                None)
    found = {k: attrs.get(k) for k in _CONTENT}
    for event in events:
        name = event.get("name")
        eattrs = attributes(event.get("attributes"))
        if name == _DETAILS_EVENT:
            for key in ("gen_ai.input.messages", "gen_ai.output.messages",
                        "gen_ai.system_instructions"):
                found[key] = found[key] if found[key] is not None else eattrs.get(key)
        elif name == "gen_ai.content.prompt" and found["gen_ai.prompt"] is None:
            found["gen_ai.prompt"] = eattrs.get("gen_ai.prompt")
        elif name == "gen_ai.content.completion" and found["gen_ai.completion"] is None:
            found["gen_ai.completion"] = eattrs.get("gen_ai.completion")
    prompt = found["gen_ai.input.messages"] if found["gen_ai.input.messages"] is not None \
        else found["gen_ai.prompt"]
    completion = found["gen_ai.output.messages"] \
        if found["gen_ai.output.messages"] is not None else found["gen_ai.completion"]
    return prompt, completion, found["gen_ai.system_instructions"]


def _tool_results(prompt: Any) -> list[str]:
    """The tool results among ``gen_ai.input.messages`` (the model's context for this call)."""
    messages = prompt
    if isinstance(prompt, str):
        try:
            messages = orjson.loads(prompt)
        except orjson.JSONDecodeError:
            return []
    out = []
    if isinstance(messages, list):
        for message in messages:
            if not isinstance(message, dict) or message.get("role") != "tool":
                continue
            for part in message.get("parts") or []:
                if isinstance(part, dict) and part.get("type") == "tool_call_response":
                    out.append(_text(part.get("response")) or "")
            if isinstance(message.get("content"), str):  # OpenAI and OpenInference messages
                out.append(message["content"])
    return out


def _as_text(value: Any, side: str, content: str, meta: dict[str, Any]) -> str | None:
    """A span's input or output as the text a judge reads: a message list's last user
    message (``side='input'``) or assistant text (``'output'``), the list kept in
    ``meta[side + '_messages']``; anything else (or ``content='raw'``) as text."""
    messages = messages_of(value)
    if messages is None or content == "raw":
        return _text(value)
    meta[f"{side}_messages"] = messages
    return last_user_text(messages) if side == "input" else assistant_text(messages)


def span_record(span: dict[str, Any], resource: dict[str, Any], scope: dict[str, Any],
                source: str, where: str, content: str = "text") -> dict[str, Any]:
    """The record of one span (GenAI or not; the caller sets non-GenAI ones aside);
    ``content``: ``text`` or ``raw`` (see the module docstring)."""
    attrs = attributes(span.get("attributes"))
    name = str(span.get("name") or "")
    events = [e for e in span.get("events") or [] if isinstance(e, dict)]
    start, end = _nanos(span.get("startTimeUnixNano")), _nanos(span.get("endTimeUnixNano"))
    code = _status_code(span.get("status"))
    status = span.get("status") if isinstance(span.get("status"), dict) else {}
    kind = span_type(name, attrs)
    prompt, completion, system = _content(attrs, events)
    trace_id = str(span.get("traceId") or "")
    span_id = str(span.get("spanId") or "")
    level = "ERROR" if code == 2 else "DEFAULT"
    message = status.get("message") or (attrs.get("error.type") if code == 2 else None)
    meta: dict[str, Any] = {
        "span": {"name": name, "type": kind, "error": code == 2,
                 "parent_span_id": span.get("parentSpanId") or None,
                 "kind": span.get("kind")},
        "spans": [{"type": kind, "name": name, "error": code == 2}],
        "operation": attrs.get("gen_ai.operation.name"),
        "provider": attrs.get("gen_ai.provider.name", attrs.get("gen_ai.system")),
        "response_id": attrs.get("gen_ai.response.id"),
        "finish_reasons": attrs.get("gen_ai.response.finish_reasons"),
        "error_type": attrs.get("error.type"),
        "service": resource.get("service.name"),
        "scope": scope.get("name"),
        "file": where,
        "attributes": {k: v for k, v in attrs.items()
                       if k not in _CONTENT and not k.startswith(_OI_CONTENT)},
    }
    if system is not None:
        meta["system_instructions"] = _text(system)
    if kind == "tool":
        meta["tool_calls"] = [{"id": attrs.get("gen_ai.tool.call.id"),
                               "name": attrs.get("gen_ai.tool.name") or attrs.get("tool.name")
                               or name, "ok": code != 2,
                               **({"error": message} if code == 2 else {})}]
    meta = {k: v for k, v in meta.items() if v is not None}
    if _OI_KIND in attrs:
        meta["provider"] = attrs.get("llm.provider", attrs.get("llm.system"))
    text_in = _as_text(prompt, "input", content, meta)
    text_out = _as_text(completion, "output", content, meta)
    session = attrs.get("gen_ai.conversation.id", attrs.get("session.id"))
    return {
        "record_id": f"{trace_id}:{span_id}", "source": source, "trace_id": trace_id,
        "observation_id": span_id, "session_id": _text(session),
        "timestamp": datetime.fromtimestamp(start / 1e9, timezone.utc) if start else None,
        "model": _text(attrs.get("gen_ai.response.model") or attrs.get("gen_ai.request.model")
                       or attrs.get("llm.model_name")),
        "level": level, "status_message": _text(message),
        "input": text_in, "output": text_out,
        "context": _tool_results(prompt),
        "latency_s": (end - start) / 1e9 if start is not None and end is not None else None,
        "input_tokens": _count(attrs.get("gen_ai.usage.input_tokens",
                                         attrs.get("llm.token_count.prompt"))),
        "output_tokens": _count(attrs.get("gen_ai.usage.output_tokens",
                                          attrs.get("llm.token_count.completion"))),
        "metadata": meta,
    }


class OtlpJsonSource(Source):
    """OTLP/JSON trace files (a collector's file exporter), one record per GenAI span; see
    the module docstring."""

    Config = OtlpJsonConfig

    def __init__(self, name: str, config: OtlpJsonConfig, ctx: Any) -> None:
        from evalkit.sources.files import resolve_paths

        self.name = name
        self.config = config
        self.ctx = ctx
        self.paths = resolve_paths(config.path, "OTLP/JSON")
        self.counts: dict[str, int] = {}

    def fingerprint(self) -> dict[str, Any]:
        from evalkit.sources.files import fingerprint

        return {"files": fingerprint(self.paths), "counts": dict(self.counts)}

    def _count(self, key: str) -> None:
        self.counts[key] = self.counts.get(key, 0) + 1

    def records(self) -> Iterator[dict[str, Any] | Reject]:
        """Every span's record, in file order, and the rejects as they are met."""
        seen: set[str] = set()
        for path in self.paths:
            for line in json_lines(path, self.config.max_line_bytes):
                where, text, request = f"{path}:{line.number}", line.raw, line.value
                if line.problem is not None:
                    yield Reject(where, line.problem, text)
                    continue
                if not isinstance(request, dict) or \
                        not isinstance(request.get("resourceSpans"), list):
                    yield Reject(where, "not an ExportTraceServiceRequest (no "
                                    "resourceSpans list); is this a logs or metrics file?", text)
                    continue
                yield from self._request(request, where, text, seen)

    def _request(self, request: dict[str, Any], where: str, text: str,
                 seen: set[str]) -> Iterator[dict[str, Any] | Reject]:
        for rs in request["resourceSpans"]:
            if not isinstance(rs, dict):
                continue
            resource = attributes((rs.get("resource") or {}).get("attributes"))
            for ss in rs.get("scopeSpans") or []:
                if not isinstance(ss, dict):
                    continue
                scope = ss.get("scope") if isinstance(ss.get("scope"), dict) else {}
                for span in ss.get("spans") or []:
                    if not isinstance(span, dict) or not span.get("traceId") \
                            or not span.get("spanId"):
                        yield Reject(where, "a span without traceId or spanId",
                                        json_text(span))
                        continue
                    record = span_record(span, resource, scope, self.name, where,
                                         self.config.content)
                    if record["record_id"] in seen:
                        yield Reject(where, f"duplicate span "
                                        f"{record['record_id']} (already read)",
                                        json_text(span))
                        continue
                    seen.add(record["record_id"])
                    kind = record["metadata"]["span"]["type"]
                    self._count(f"{kind}_spans")
                    if kind != "llm":
                        if not self.config.keep_other_spans:
                            continue
                        record["excluded_by"] = EXCLUDED_BY
                        record["exclude_reason"] = (f"a {kind} span, not a model call: "
                                                    "counted, never judged")
                    yield record

    def read(self) -> Iterator[SourceItem]:
        yield from record_batches(self.records(), self.config.batch_size)
