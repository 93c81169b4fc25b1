"""OpenAI Codex CLI session logs (``~/.codex/sessions/YYYY/MM/DD/rollout-*.jsonl``): one
``{"timestamp", "type", "payload"}`` line per event (``session_meta``, ``turn_context``,
``response_item``, ``event_msg``, ``compacted``); files of Codex before 0.2x hold the bare
response items after a first ``{"id", "timestamp", "instructions"}`` line."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Iterator
from typing import Any

import orjson

from evalkit.sources._json_lines import Line
from evalkit.sources.transcripts._claude_code import Parsed
from evalkit.sources.transcripts._openai_chat import arguments
from evalkit.sources.transcripts._turns import Chain, ToolCall, block_text, sessions_in

_CALLS = ("function_call", "custom_tool_call", "local_shell_call", "web_search_call")
_OUTPUTS = ("function_call_output", "custom_tool_call_output")
# what Codex puts in user messages itself, not the user (repeated in every session)
_INJECTED = ("<environment_context>", "<user_instructions>", "# AGENTS.md instructions",
             "<user_shell_command>", "<turn_aborted>")
_EXIT = re.compile(r"(?:Process exited with code|Exit code:)\s*(-?\d+)")


def _item(event: dict[str, Any]) -> tuple[str | None, Any]:
    """(line type, payload); a bare response item of an old file is a ``response_item``."""
    if "payload" in event:
        return event.get("type"), event.get("payload")
    if event.get("type") in ("message", "reasoning", *_CALLS, *_OUTPUTS):
        return "response_item", event
    if "id" in event and "instructions" in event:
        return "session_meta", event
    return event.get("type") or event.get("record_type"), event


def _failed(output: Any) -> str | None:
    """The error of a failed tool call's output (a non-zero exit code), else None."""
    text = output if isinstance(output, str) else block_text(output)
    data: Any = None
    if text.lstrip().startswith("{"):
        try:
            data = orjson.loads(text)
        except orjson.JSONDecodeError:
            data = None
    if isinstance(data, dict):
        meta = data.get("metadata") if isinstance(data.get("metadata"), dict) else {}
        code = meta.get("exit_code")
        if isinstance(code, int) and code != 0:
            return f"exit code {code}: {str(data.get('output') or '').strip()[:200]}"
        return None
    found = _EXIT.search(text[:2000])
    if found and int(found.group(1)) != 0:
        return f"exit code {found.group(1)}"
    return None


def _has_typed_prompts(lines: Iterable[Line]) -> bool:
    for item in lines:
        value = item.value
        if isinstance(value, dict) and isinstance(value.get("payload"), dict) and \
                value["payload"].get("type") == "user_message":
            return True
    return False


def codex_sessions(read: Callable[[], Iterator[Line]], limit: int) -> list[Parsed]:
    """Split a Codex CLI file into sessions and turns; ``read`` gives the file's lines (it is
    read twice: first to learn whether Codex wrote ``user_message`` events, the prompts a
    person typed). A file holds one session, or several one after another (rollouts joined
    into one file): a ``session_meta`` of another id starts the next, its token counts
    afresh (they are the session's running totals)."""
    typed = _has_typed_prompts(read())
    return sessions_in(read(), lambda lines: _session(lines, limit, typed))


def _session(lines: Iterator[Line], limit: int, typed: bool) -> tuple[Parsed, Line | None]:
    """The session ``lines`` start, and the first line of the next session (``None`` at the
    end of the file)."""
    chain = Chain(limit)
    problems: list[tuple[int, str, str]] = []
    counts = {"events": 0, "ignored_events": 0, "repeated_events": 0}
    meta: dict[str, Any] = {}
    session_id = None
    model = None
    total: dict[str, int] | None = None  # the session's cumulative token counts so far
    rest: Line | None = None
    for item in lines:
        line, event = item.number, item.value
        if item.problem is not None:
            problems.append((line, f"{item.problem}; the rest of the file is read", item.raw))
            continue
        if not isinstance(event, dict):
            problems.append((line, f"expected a JSON object per line, got "
                             f"{type(event).__name__}", item.raw))
            continue
        kind, p = _item(event)
        when = event.get("timestamp") if isinstance(event.get("timestamp"), str) else None
        if not isinstance(p, dict):
            counts["ignored_events"] += 1
            continue
        sub = p.get("type")
        sid = p.get("id") or p.get("session_id") if kind == "session_meta" else None
        if session_id is not None and sid and sid != session_id:
            rest = item  # the next session's first line
            break
        counts["events"] += 1
        if kind == "session_meta":
            session_id = session_id or sid
            git = p.get("git") if isinstance(p.get("git"), dict) else {}
            for key, value in (("cwd", p.get("cwd")), ("version", p.get("cli_version")),
                               ("git_branch", git.get("branch"))):
                if value and key not in meta:
                    meta[key] = value
        elif kind == "turn_context":
            model = p.get("model") if isinstance(p.get("model"), str) else model
        elif kind == "event_msg" and sub == "user_message":
            chain.prompt(str(p.get("message") or ""), when, line)
        elif kind == "event_msg" and sub == "turn_aborted":
            chain.interrupted()
        elif kind == "event_msg" and sub == "token_count":
            info = p.get("info") if isinstance(p.get("info"), dict) else {}
            now = info.get("total_token_usage")
            if isinstance(now, dict) and now != total:
                before = total or {}
                delta = {k: v - before.get(k, 0) for k, v in now.items() if isinstance(v, int)}
                total = now
                turn = chain.turn(line)
                # one model call: input_tokens includes the cached ones (OpenAI's convention)
                turn.message(f"token_count:{line}", {
                    "input_tokens": delta.get("input_tokens", 0),
                    "cached_input_tokens": delta.get("cached_input_tokens", 0),
                    "output_tokens": delta.get("output_tokens", 0),
                    "reasoning_output_tokens": delta.get("reasoning_output_tokens", 0)})
        elif kind == "response_item" and sub == "message":
            text = block_text(p.get("content")).strip()
            if p.get("role") == "user" and not typed and text \
                    and not text.startswith(_INJECTED):
                chain.prompt(text, when, line)
            elif p.get("role") == "assistant" and text:
                turn = chain.turn(line)
                turn.model = model or turn.model
                chain.text(turn, text)
                turn.last_time = when or turn.last_time
            else:
                counts["ignored_events"] += 1
        elif kind == "response_item" and sub in _CALLS:
            turn = chain.turn(line)
            turn.model = model or turn.model
            args = arguments(p.get("arguments")) if "arguments" in p else \
                p.get("input", p.get("action"))
            call = ToolCall(p.get("call_id") or p.get("id"), str(p.get("name") or sub), args)
            if sub == "web_search_call" and p.get("status") in ("completed", "failed"):
                call.ok = p["status"] == "completed"  # a web search has no output item
            chain.call(turn, call)
            turn.last_time = when or turn.last_time
        elif kind == "response_item" and sub in _OUTPUTS:
            output = p.get("output")
            error = _failed(output)
            text = output if isinstance(output, str) else block_text(output)
            chain.tool_result(p.get("call_id"), text, error is not None, line, when)
        else:
            counts["ignored_events"] += 1
    return Parsed(chain.finish(), [], session_id, problems, counts, meta), rest
