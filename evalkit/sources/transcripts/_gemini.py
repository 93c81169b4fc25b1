"""Gemini CLI sessions (``~/.gemini/tmp/<project hash>/chats/session-*.json``): one JSON
document per session, ``{"sessionId", "startTime", "messages": [...]}``; a message is
``user`` (the prompt), ``gemini`` (text, ``thoughts``, ``toolCalls`` with their results
inside, ``tokens``, ``model``) or ``info`` / ``warning`` / ``error`` (the CLI's own)."""

from __future__ import annotations

from typing import Any

from evalkit.sources.transcripts._claude_code import Parsed
from evalkit.sources.transcripts._turns import Chain, ToolCall, block_text


def _result(call: dict[str, Any]) -> tuple[Any, bool]:
    """A tool call's result text and whether it failed."""
    failed = call.get("status") in ("error", "cancelled")
    parts = call.get("result") if isinstance(call.get("result"), list) else []
    texts = []
    for part in parts:
        response = ((part or {}).get("functionResponse") or {}).get("response") \
            if isinstance(part, dict) else None
        if isinstance(response, dict):
            if response.get("error"):
                failed = True
                texts.append(str(response["error"]))
            else:
                texts.append(block_text(response.get("output", response)))
    if not texts and call.get("resultDisplay") is not None:
        texts.append(block_text(call["resultDisplay"]))
    return "\n".join(texts), failed


def _tokens(tokens: Any) -> dict[str, int] | None:
    """Gemini's counts named so they sum: ``input`` includes ``cached``; ``output`` leaves
    out ``thoughts`` and ``tool`` (tool-use prompt tokens), which are counted on their own."""
    if not isinstance(tokens, dict):
        return None
    names = {"input": "input_tokens", "cached": "cached_input_tokens",
             "output": "output_tokens", "thoughts": "thoughts_tokens",
             "tool": "tool_use_prompt_tokens"}
    return {names[k]: v for k, v in tokens.items()
            if k in names and isinstance(v, int) and not isinstance(v, bool)}


def gemini_turns(document: Any, limit: int) -> Parsed:
    """Split one Gemini CLI session document into turns."""
    chain = Chain(limit)
    problems: list[tuple[int, str, str]] = []
    counts = {"events": 0, "ignored_events": 0, "repeated_events": 0}
    messages = document.get("messages")
    for k, message in enumerate(messages):
        if not isinstance(message, dict):
            problems.append((k, f"messages[{k}] is not an object", str(message)[:300]))
            continue
        counts["events"] += 1
        kind = message.get("type")
        when = message.get("timestamp") if isinstance(message.get("timestamp"), str) else None
        if kind == "user":
            text = block_text(message.get("content")).strip()
            if text:
                chain.prompt(text, when, k)
        elif kind == "gemini":
            turn = chain.turn(k)
            turn.message(str(message.get("id") or f"messages[{k}]"),
                         _tokens(message.get("tokens")))
            if isinstance(message.get("model"), str):
                turn.model = message["model"]
            text = block_text(message.get("content")).strip()
            if text:
                chain.text(turn, text)
            calls = message.get("toolCalls") if isinstance(message.get("toolCalls"), list) \
                else []
            for call in calls:
                if not isinstance(call, dict):
                    continue
                chain.call(turn, ToolCall(call.get("id"), str(call.get("name") or "unknown"),
                                          call.get("args")))
            for call in calls:
                if isinstance(call, dict) and ("result" in call or "status" in call):
                    result, failed = _result(call)
                    chain.tool_result(call.get("id"), result, failed, k,
                                      call.get("timestamp") or when)
            turn.last_time = when or turn.last_time
        elif kind == "error" and chain.current is not None:
            chain.current.api_error = block_text(message.get("content")) or "error"
            chain.current.api_errors += 1
        else:
            counts["ignored_events"] += 1
    meta = {"project_hash": document.get("projectHash")} if document.get("projectHash") else {}
    sid = document.get("sessionId")
    return Parsed(chain.finish(), [], sid if isinstance(sid, str) else None, problems, counts,
                  meta)
