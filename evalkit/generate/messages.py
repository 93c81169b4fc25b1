"""A recorded message list as an OpenAI chat request, whatever shape the source kept it in:
OpenAI chat messages, OpenTelemetry GenAI messages (``parts``: text, ``tool_call``,
``tool_call_response``), OpenInference's flattened ones (``tool_calls`` items with
``function.name`` / ``function.arguments``), Anthropic content blocks (``tool_use``,
``tool_result``), or the JSON text of any of them as the record's input.

What a replay sends: system, user, assistant and tool messages with text content (OpenAI
image parts kept); an assistant's tool calls as OpenAI ``tool_calls``; each tool result as a
``tool`` message answering the call it names (or, by order, the call it follows). A tool
result that answers no recorded call (a trace that kept the result and not the call) cannot
be a ``tool`` message, which the API refuses: it is sent as user text, ``Tool result: ...``.
Reasoning blocks (``thinking``, ``reasoning``) are the recorded model's own and are left
out. A part of any other type cannot be replayed faithfully: :class:`ValueError`, and the
candidate fails for that record with the reason."""

from __future__ import annotations

from typing import Any

import orjson

from evalkit.sources._chat import CALL_PARTS, part_text

__all__ = ["UNREPLAYABLE", "openai_messages", "system_text"]

UNREPLAYABLE = "unreplayable"
"""``metadata.generate.cause`` of a candidate whose record holds nothing a chat API takes (no
input, or a message part of another kind): no call was made, and ``failure_recovery`` leaves
the record out of its share (counted apart)."""

_ROLES = {"system": "system", "developer": "system", "user": "user", "human": "user",
          "assistant": "assistant", "model": "assistant", "ai": "assistant",
          "tool": "tool", "function": "tool", "ipython": "tool"}
_SKIPPED = ("thinking", "redacted_thinking", "reasoning")


def _json(value: Any) -> str:
    if isinstance(value, str):
        return value
    return orjson.dumps(value, option=orjson.OPT_SORT_KEYS).decode()


def _text_of(value: Any) -> str:
    """A tool result's (or a content's) text: a string, or the text of its parts."""
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    if isinstance(value, list):
        return "\n".join(t for t in (_text_of(p.get("text", p.get("content")))
                                     if isinstance(p, dict) else _text_of(p)
                                     for p in value) if t)
    return _json(value)


def _call(item: dict[str, Any]) -> dict[str, Any]:
    """A recorded tool call as an OpenAI one."""
    fn = item.get("function") if isinstance(item.get("function"), dict) else {}
    name = fn.get("name") or item.get("function.name") or item.get("name")
    args = fn.get("arguments", item.get("function.arguments",
                                        item.get("arguments", item.get("input"))))
    if not name:
        raise ValueError("a recorded tool call has no function name")
    return {"id": str(item.get("id") or item.get("tool_call.id") or ""), "type": "function",
            "function": {"name": str(name), "arguments": _json(args if args is not None
                                                                else {})}}


def _parts(message: dict[str, Any]) -> tuple[list[Any], list[dict[str, Any]],
                                             list[tuple[str | None, str]]]:
    """A message's content as (OpenAI content parts, tool calls, tool results)."""
    parts: list[Any] = []
    calls: list[dict[str, Any]] = []
    results: list[tuple[str | None, str]] = []
    content = message.get("content", message.get("parts"))
    items = [content] if isinstance(content, str) else content if isinstance(content, list) \
        else [] if content is None else [_json(content)]
    if message.get("parts") is not None and message.get("content") is not None:
        items = items + list(message["parts"])
    for item in items:
        kind = item.get("type") if isinstance(item, dict) else None
        if isinstance(item, str):
            parts.append({"type": "text", "text": item})
        elif not isinstance(item, dict):
            raise ValueError(f"a message part is a {type(item).__name__}, not text or an object")
        elif (text := part_text(item)) is not None:
            parts.append({"type": "text", "text": text})
        elif kind == "image_url":
            parts.append({"type": "image_url", "image_url": item.get("image_url")})
        elif kind in CALL_PARTS:
            calls.append(_call(item))
        elif kind in ("tool_call_response", "tool_result", "function_call_output"):
            ident = item.get("id") or item.get("tool_use_id") or item.get("call_id")
            results.append((str(ident) if ident else None,
                            _text_of(item.get("response", item.get("content",
                                                                   item.get("output"))))))
        elif kind in _SKIPPED:
            continue
        else:
            raise ValueError(f"a message part of type {kind!r} cannot be replayed")
    calls += [_call(c) for c in message.get("tool_calls") or [] if isinstance(c, dict)]
    return parts, calls, results


def _content(parts: list[Any]) -> str | list[Any]:
    if all(p["type"] == "text" for p in parts):
        return "\n".join(p["text"] for p in parts)
    return parts


def system_text(value: Any) -> str | None:
    """A trace's system instructions as text: GenAI keeps them as a list of parts (often as
    its JSON text), others as a string."""
    if isinstance(value, str) and value.lstrip()[:1] in ("[", "{"):
        try:
            value = orjson.loads(value)
        except orjson.JSONDecodeError:
            return value
    text = _text_of(value)
    return text or None


def openai_messages(messages: list[dict[str, Any]], system: str | None = None
                    ) -> list[dict[str, Any]]:
    """``messages`` (a recorded list, any shape above) as OpenAI chat messages; ``system``
    (a trace's separate system instructions) opens them when they have no system message.
    Raises :class:`ValueError` naming what cannot be replayed."""
    out: list[dict[str, Any]] = []
    open_calls: list[str] = []  # ids of the last assistant's calls not yet answered
    for n, message in enumerate(messages):
        role = _ROLES.get(str(message.get("role", "")).lower())
        if role is None:
            raise ValueError(f"message {n}: role {message.get('role')!r} cannot be replayed "
                             f"(one of {', '.join(sorted(set(_ROLES)))})")
        parts, calls, results = _parts(message)
        if role == "tool":
            ident = message.get("tool_call_id") or message.get("tool_call.id")
            results = [(str(ident) if ident else i, t) for i, t in results] or \
                [(str(ident) if ident else None, _text_of([p.get("text") for p in parts]))]
            parts = []
        loose = []
        for ident, text in results:
            if ident is None and open_calls:
                ident = open_calls[0]
            if ident in open_calls:
                open_calls.remove(ident)
                out.append({"role": "tool", "tool_call_id": ident, "content": text})
            else:
                loose.append({"type": "text", "text": f"Tool result: {text}"})
        if role == "assistant":
            for k, call in enumerate(calls):
                call["id"] = call["id"] or f"call_{n}_{k}"
            entry: dict[str, Any] = {"role": "assistant",
                                     "content": _content(parts) if parts else None}
            if calls:
                entry["tool_calls"] = calls
                open_calls = [c["id"] for c in calls]
            if parts or calls:
                out.append(entry)
        elif role in ("system", "user") and parts:
            out.append({"role": role, "content": _content(parts)})
        if loose:
            out.append({"role": "user", "content": _content(loose)})
    if system and not any(m["role"] == "system" for m in out):
        out.insert(0, {"role": "system", "content": system})
    return out
