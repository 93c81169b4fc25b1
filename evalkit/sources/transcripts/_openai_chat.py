"""OpenAI chat-messages conversations: one conversation per line,
``{"messages": [...]}`` with ``tool_calls`` on assistant messages and ``tool`` results."""

from __future__ import annotations

from typing import Any

import orjson

from evalkit.sources.transcripts._turns import Chain, ToolCall, Turn, block_text


def _failed(content: str, message: dict[str, Any]) -> bool:
    """A tool message reports a failure: ``is_error: true``, a JSON object with a non-null
    ``error``, or text starting with ``Error``."""
    if message.get("is_error") is True:
        return True
    stripped = content.lstrip()
    if stripped.startswith("{"):
        try:
            obj = orjson.loads(stripped)
        except orjson.JSONDecodeError:
            obj = None
        if isinstance(obj, dict) and obj.get("error") not in (None, False, ""):
            return True
    return stripped[:6].lower() == "error:" or stripped[:6] == "Error "


def arguments(args: Any) -> Any:
    """Tool-call arguments, parsed when they are JSON text."""
    if isinstance(args, str):
        try:
            return orjson.loads(args)
        except orjson.JSONDecodeError:
            return args
    return args


def openai_turns(messages: list[Any], limit: int) -> tuple[list[Turn], list[str]]:
    """Split one OpenAI chat-messages conversation into turns; also the problems met (a
    message that is not an object, an unknown role)."""
    chain = Chain(limit)
    problems = []
    for k, message in enumerate(messages):
        if not isinstance(message, dict):
            problems.append(f"messages[{k}] is not an object")
            continue
        role = message.get("role")
        content = message.get("content")
        if role == "user":
            text = block_text(content).strip()
            if text:
                chain.prompt(text, None, k)
        elif role == "assistant":
            turn = chain.turn(k)
            turn.message(f"messages[{k}]")
            text = block_text(content).strip()
            if text:
                chain.text(turn, text)
            for call in message.get("tool_calls") or []:
                if not isinstance(call, dict):
                    continue
                fn = call.get("function") if isinstance(call.get("function"), dict) else {}
                chain.call(turn, ToolCall(call.get("id"), str(fn.get("name") or "unknown"),
                                          arguments(fn.get("arguments"))))
        elif role == "tool":
            text = block_text(content)
            chain.tool_result(message.get("tool_call_id"), text, _failed(text, message), k,
                              None)
        elif role in ("system", "developer"):
            continue
        else:
            problems.append(f"messages[{k}] has an unknown role {role!r}")
    return chain.finish(), problems
