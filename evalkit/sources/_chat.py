"""Chat-shaped values as the text a judge reads: a list of messages (OpenAI chat messages,
OpenTelemetry GenAI ``gen_ai.input.messages`` / ``gen_ai.output.messages``, OpenInference
``llm.input_messages``) gives the last user message as the input and the assistant's text as
the output (a list of content blocks alone, the text of its text blocks; OpenAI Responses'
list of output items, its messages'); the sources keep the whole list beside it, in
metadata."""

from __future__ import annotations

from typing import Any

import orjson

__all__ = ["CALL_PARTS", "assistant_text", "blocks_of", "chat_column", "langchain_messages",
           "last_user_text", "message_text", "messages_of", "part_text", "response_items",
           "tool_calls", "with_messages"]

_ASSISTANT = ("assistant", "model", "ai")


def _loaded(value: Any) -> Any:
    """``value``, or for text the JSON array it holds (None: text that holds none)."""
    if not isinstance(value, str):
        return value
    stripped = value.lstrip()
    if not stripped.startswith("["):
        return None
    try:
        return orjson.loads(stripped)
    except orjson.JSONDecodeError:
        return None


def messages_of(value: Any) -> list[dict[str, Any]] | None:
    """``value`` as a list of messages (objects with a ``role``; JSON text is parsed;
    LangChain's wrappings removed: see ``langchain_messages``), else None: a value that is
    not chat-shaped stays as it is."""
    value = langchain_messages(_loaded(value))
    if isinstance(value, list) and value and \
            all(isinstance(m, dict) and isinstance(m.get("role"), str) for m in value):
        return value
    return None


_LC_ROLES = {"human": "user", "ai": "assistant", "system": "system", "tool": "tool",
             "function": "function", "chat": "user"}


def langchain_messages(value: Any) -> Any:
    """``value`` with LangChain's wrappings removed: a batch of one conversation (a list that
    holds one list, as LangSmith logs an LLM run's ``messages``) is that conversation, and
    messages serialized as ``{"lc": 1, "type": "constructor", "kwargs": {"type": "human",
    "content": ...}}`` are ``{"role": "user", "content": ...}``; anything else unchanged."""
    if isinstance(value, list) and len(value) == 1 and isinstance(value[0], list):
        value = value[0]
    if not isinstance(value, list) or not value or not all(
            isinstance(m, dict) and m.get("lc") == 1 and isinstance(m.get("kwargs"), dict)
            for m in value):
        return value
    out = []
    for m in value:
        kwargs = m["kwargs"]
        name = m.get("id")[-1] if isinstance(m.get("id"), list) and m.get("id") else ""
        kind = kwargs.get("type") or str(name).removesuffix("MessageChunk").removesuffix(
            "Message").lower()
        role = _LC_ROLES.get(str(kind).lower())
        if role is None:
            return value  # not a message LangChain names: left as it is
        out.append({"role": role, "content": kwargs.get("content")})
    return out


def blocks_of(value: Any) -> list[dict[str, Any]] | None:
    """``value`` as a list of content blocks (Anthropic's ``content``, OpenAI's content
    parts: objects with a ``type``, no ``role``; JSON text is parsed) with some text in
    them, else None."""
    value = _loaded(value)
    if isinstance(value, list) and value and \
            all(isinstance(b, dict) and isinstance(b.get("type"), str) and "role" not in b
                for b in value) and any(part_text(b) for b in value):
        return value
    return None


def response_items(value: Any) -> list[dict[str, Any]] | None:
    """The messages among ``value`` when it is a list of typed items some of which are
    messages (OpenAI Responses' ``output``: a ``reasoning`` item, then a ``message`` with a
    role and ``output_text`` parts), or whose function calls are the reply (as one assistant
    message holding them); else None."""
    if isinstance(value, list) and value and all(
            isinstance(i, dict) and isinstance(i.get("type", i.get("role")), str)
            for i in value):
        messages = [i for i in value if isinstance(i.get("role"), str)]
        calls = [i for i in value if i.get("type") in CALL_PARTS]
        return messages or ([{"role": "assistant", "content": calls}] if calls else None)
    return None


def part_text(part: Any) -> str | None:
    """The text of a message part: a string, or a text part (OpenAI's ``text`` /
    ``input_text`` / ``output_text``, GenAI's untyped ``content``); None for any other."""
    if isinstance(part, str):
        return part
    if not isinstance(part, dict):
        return None
    kind = part.get("type")
    if kind in (None, "text", "input_text", "output_text"):
        for key in ("text", "content"):  # OpenAI parts say text; GenAI parts say content
            if isinstance(part.get(key), str):
                return part[key]
    return None


def message_text(message: dict[str, Any]) -> str:
    """The text of one message: its ``content`` (a string or text parts) or GenAI ``parts``;
    tool calls and other parts are left out."""
    texts: list[str] = []
    for key in ("content", "parts"):
        value = message.get(key)
        if isinstance(value, str):
            texts.append(value)
        elif isinstance(value, list):
            texts += [t for t in map(part_text, value) if t]
    return "\n".join(t for t in texts if t.strip())


def last_user_text(messages: list[dict[str, Any]]) -> str | None:
    """The text of the last ``user`` message (null when there is none or it has no text)."""
    for message in reversed(messages):
        if message.get("role") == "user":
            return message_text(message) or None
    return None


# the types of a message part that is a tool call (Anthropic, GenAI, OpenAI Responses)
CALL_PARTS = ("tool_use", "tool_call", "function_call")


def tool_calls(message: dict[str, Any]) -> list[Any]:
    """The tool calls of one message: OpenAI's ``tool_calls`` (or the older
    ``function_call``), Anthropic's ``tool_use`` blocks, GenAI's ``tool_call`` parts."""
    calls = list(message.get("tool_calls") or [])
    if isinstance(message.get("function_call"), dict):
        calls.append(message["function_call"])
    for key in ("content", "parts"):
        if isinstance(message.get(key), list):
            calls += [p for p in message[key]
                      if isinstance(p, dict) and p.get("type") in CALL_PARTS]
    return calls


def assistant_text(messages: list[dict[str, Any]]) -> str | None:
    """The assistant messages' text, joined by a blank line; for a reply that is only tool
    calls, the calls as JSON text (a completion: a null output reads as a failed call); null
    when they carry neither."""
    replies = [m for m in messages if m.get("role") in _ASSISTANT]
    joined = "\n\n".join(t for t in map(message_text, replies) if t)
    if joined:
        return joined
    calls = [c for m in replies for c in tool_calls(m)]
    return orjson.dumps(calls).decode() if calls else None


def chat_column(side: str, values: list[Any]) -> tuple[list[Any], dict[int, list[Any]]]:
    """A record column's values (``side``: ``input`` or ``output``) with each chat-shaped one
    (a message list, or for an output one assistant message) as its text, and those rows'
    message lists by row."""
    out = list(values)
    lists: dict[int, list[Any]] = {}
    # only lists, objects and text that opens a JSON array can be chat-shaped
    candidates = [i for i, v in enumerate(values)
                  if v is not None and (type(v) is not str or v[:1] == "[")]
    for i in candidates:
        value = _loaded(values[i])  # (parsed once, for each of the shapes below)
        messages = messages_of(value)
        if messages is None and side == "output" and isinstance(value, dict) and \
                value.get("role") in _ASSISTANT:
            messages = [value]
        if messages is None and isinstance(value, list):  # typed items, messages among them
            messages = response_items(value)
        if messages is None:  # a message's content blocks alone: that message
            blocks = blocks_of(value)
            if blocks is not None:
                messages = [{"role": "user" if side == "input" else "assistant",
                             "content": blocks}]
        if messages is None:
            continue
        lists[i] = messages
        out[i] = last_user_text(messages) if side == "input" else assistant_text(messages)
    return out, lists


def with_messages(metadata: list[Any], lists: dict[str, dict[int, list[Any]]]) -> list[Any]:
    """The metadata texts (JSON objects) of a batch with ``<side>_messages`` set on the rows
    whose input or output was a message list (a metadata value that is not an object is kept
    under ``metadata``)."""
    out = list(metadata)
    for side, rows in lists.items():
        for i, messages in rows.items():
            current = orjson.loads(out[i]) if out[i] else {}
            if not isinstance(current, dict):
                current = {"metadata": current}
            current[f"{side}_messages"] = messages
            out[i] = orjson.dumps(current).decode()
    return out
