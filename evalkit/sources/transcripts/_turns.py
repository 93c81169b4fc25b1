"""What every agent format is read into: turns (a prompt, the assistant's messages, tool calls
and results) collected by a :class:`Chain`, and the record of one turn (:func:`turn_record`).

A format's parser (``_claude_code``, ``_codex``, ``_gemini``, ``_openai_chat``) only says what
each event is; the rules a person reads a turn by live here, once.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, TypeVar

from evalkit.results.schemas import json_text
from evalkit.sources._json_lines import Line

# how a turn began: a prompt the user typed, a slash command the assistant answers, a
# notification Claude Code sent (a background task ended), or nothing (the file starts
# mid-turn: a fragment, or the tail of a resumed session)
TRIGGERS = ("prompt", "command", "task_notification")
# token counts a turn's input and output are summed from (each format's parser names its
# counts so that these are disjoint: a cached count that is part of input_tokens is not here)
_INPUT_KEYS = ("input_tokens", "cache_creation_input_tokens", "cache_read_input_tokens",
               "tool_use_prompt_tokens")
_OUTPUT_KEYS = ("output_tokens", "thoughts_tokens")
INTERRUPT_MARKS = ("[Request interrupted by user",
                   "The user doesn't want to proceed with this tool use")


@dataclass
class ToolCall:
    """One tool call of a turn and what came of it."""

    id: str | None
    name: str
    input: Any = None
    ok: bool | None = None  # None: no result arrived in the turn
    error: str | None = None  # the first line of a failed call's result
    result: str | None = None  # the result text (cut to the limit)
    truncated: int = 0  # characters cut from the result

    def as_metadata(self) -> dict[str, Any]:
        out: dict[str, Any] = {"id": self.id, "name": self.name, "ok": self.ok}
        if self.error is not None:
            out["error"] = self.error
        if self.truncated:
            out["truncated_chars"] = self.truncated
        return out


@dataclass
class Turn:
    """One assistant turn: the prompt, the assistant's messages and the turn's tool calls."""

    prompts: list[str] = field(default_factory=list)
    prompt_time: str | None = None
    trigger: str | None = None  # one of TRIGGERS; None: no prompt before the reply
    texts: list[tuple[int, str]] = field(default_factory=list)  # (position, text)
    calls: list[ToolCall] = field(default_factory=list)
    # positions of the last tool result and the last tool call: text after both is the answer
    # (text before a call is narration; a turn that stops at a call has no answer)
    results_at: int = -1
    calls_at: int = -1
    orphans: list[ToolCall] = field(default_factory=list)  # results naming no call of the turn
    model: str | None = None
    last_time: str | None = None
    message_ids: list[str] = field(default_factory=list)
    # each API message's token counts; a message written over several lines (Claude Code
    # streams a line per content block) keeps the counts of its last line, the final ones
    message_usage: dict[str, dict[str, int]] = field(default_factory=dict)
    api_error: str | None = None  # the last API error message of the turn
    api_errors: int = 0  # API error messages (a retried call writes one per failure)
    position: int = 0  # events seen so far in the turn
    interrupted: bool = False
    followed: bool = False  # another prompt came after this turn (the session went on)
    first_line: int | None = None

    @property
    def answered(self) -> bool:
        return bool(self.message_ids or self.texts or self.calls)

    @property
    def usage(self) -> dict[str, int]:
        """The token counts of the turn's messages, summed."""
        total: dict[str, int] = {}
        for counts in self.message_usage.values():
            for key, value in counts.items():
                total[key] = total.get(key, 0) + value
        return total

    def message(self, mid: str, usage: Any = None) -> None:
        """An API message of the turn (again, for a message written over several lines);
        ``usage``: its counts as written on this line."""
        if mid not in self.message_usage:
            self.message_ids.append(mid)
            self.message_usage[mid] = {}
        if isinstance(usage, dict):
            counts = {k: v for k, v in usage.items()
                      if isinstance(v, int) and not isinstance(v, bool)}
            if counts:
                self.message_usage[mid] = counts


def cut(text: str, limit: int) -> tuple[str, int]:
    if len(text) <= limit:
        return text, 0
    n = len(text) - limit
    return text[:limit] + f"\n… [{n} more characters cut by evalkit]", n


def block_text(content: Any) -> str:
    """The text of a message or tool result ``content``: a string, or the text of its
    text blocks (an image block counts as ``[image]``); anything else as JSON text."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = []
        for block in content:
            if isinstance(block, dict) and block.get("type") in ("text", "input_text",
                                                                 "output_text"):
                parts.append(str(block.get("text") or ""))
            elif isinstance(block, dict) and block.get("type") in ("image", "input_image"):
                parts.append("[image]")
            elif isinstance(block, dict) and set(block) == {"text"}:  # Gemini CLI parts
                parts.append(str(block["text"] or ""))
            elif isinstance(block, str):
                parts.append(block)
            else:
                parts.append(json_text(block) or "")
        return "\n".join(parts)
    return json_text(content) or ""


def _first_line(text: str) -> str:
    line = text.strip().splitlines()[0] if text.strip() else ""
    return line[:300]


class Chain:
    """Collects the turns of one chain of events (a session's main chain, or a sidechain)."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.turns: list[Turn] = []
        self.current: Turn | None = None
        self.local_commands = 0  # commands answered by the agent program, not the model

    def prompt(self, text: str, when: str | None, line: int, trigger: str = "prompt") -> None:
        turn = self.current
        if turn is not None and not turn.answered:
            if turn.trigger == trigger == "prompt":
                turn.prompts.append(text)  # prompts in a row, before any reply, are one input
                return
            if turn.trigger == "command":  # a command no model answered: Claude Code's own
                self.current = None
                self.local_commands += 1
        if self.current is not None:
            self.current.followed = True
        self._close()
        self.current = Turn(prompts=[text], prompt_time=when, trigger=trigger, first_line=line)

    def local_output(self) -> bool:
        """Output of a command the agent program ran itself (``/model``, ``/mcp``, ``!ls``):
        the command before it, still unanswered, starts no turn. Whether one was dropped."""
        turn = self.current
        if turn is not None and not turn.answered and turn.trigger == "command":
            self.current = None
            self.local_commands += 1
            return True
        return False

    def interrupted(self) -> None:
        if self.current is not None:
            self.current.interrupted = True

    def turn(self, line: int) -> Turn:
        if self.current is None:  # a reply with no prompt before it: the file starts mid-turn
            self.current = Turn(first_line=line)
        return self.current

    def tool_result(self, tool_id: str | None, content: Any, is_error: bool, line: int,
                    when: str | None) -> None:
        turn = self.turn(line)
        text, n_cut = cut(block_text(content), self.limit)
        failed = is_error or "<tool_use_error>" in text[:200]
        if text.lstrip().startswith(INTERRUPT_MARKS):
            turn.interrupted = True
        call = next((c for c in turn.calls if c.id is not None and c.id == tool_id), None)
        if call is None:
            call = ToolCall(tool_id, "unknown")
            turn.orphans.append(call)
        call.ok = not failed
        call.result = text
        call.truncated = n_cut
        call.error = _first_line(text.replace("<tool_use_error>", "")
                                 .replace("</tool_use_error>", "")) if failed else None
        turn.position += 1
        turn.results_at = turn.position
        turn.last_time = when or turn.last_time

    def text(self, turn: Turn, text: str) -> None:
        turn.position += 1
        turn.texts.append((turn.position, text))

    def call(self, turn: Turn, call: ToolCall) -> None:
        turn.position += 1
        turn.calls_at = turn.position
        turn.calls.append(call)

    def _close(self) -> None:
        if self.current is not None:
            self.turns.append(self.current)
        self.current = None

    def finish(self) -> list[Turn]:
        self._close()
        return self.turns


def _seconds(start: str | None, end: str | None) -> float | None:
    if not start or not end:
        return None
    try:
        return (timestamp(end) - timestamp(start)).total_seconds()  # type: ignore[operator]
    except TypeError:
        return None


def timestamp(text: str | None) -> datetime | None:
    if not text:
        return None
    try:
        return datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return None


def _status(turn: Turn, output: str | None) -> str | None:
    if output is not None:
        return None  # an API error the agent retried past is in metadata.api_errors
    if turn.api_error:
        return turn.api_error
    if turn.interrupted:
        return "interrupted by the user before the turn's answer"
    if turn.followed:
        return ("the turn ended without a final text: the next prompt came before one "
                "(the session went on)")
    return "the turn ended without a final text (the session stopped or was cut off)"


def turn_record(turn: Turn, *, session_id: str, index: int, source: str, fmt: str,
                file: str, sidechain: bool, model: str | None = None,
                extra: dict[str, Any] | None = None, agent: str | None = None
                ) -> dict[str, Any]:
    """The record of one turn (``agent``: the sub-agent whose file a sidechain came from)."""
    after = max(turn.results_at, turn.calls_at)
    answer = [t for pos, t in turn.texts if pos > after and t.strip()]
    output = "\n\n".join(answer) if answer else None
    calls = [*turn.calls, *turn.orphans]
    context = [f"[{c.name}{' error' if c.ok is False else ''}] {c.result}"
               for c in calls if c.result is not None]
    usage = turn.usage
    input_tokens = sum(usage[k] for k in _INPUT_KEYS if k in usage) \
        if any(k in usage for k in _INPUT_KEYS) else None
    output_tokens = sum(usage[k] for k in _OUTPUT_KEYS if k in usage) \
        if any(k in usage for k in _OUTPUT_KEYS) else None
    level = "ERROR" if turn.api_error and output is None else "DEFAULT"
    spans = [{"type": "llm", "name": "assistant", "error": level == "ERROR"}
             for _ in turn.message_ids]
    spans += [{"type": "tool", "name": c.name, "error": c.ok is False} for c in calls]
    metadata: dict[str, Any] = {
        "turn_index": index, "format": fmt, "file": file, "sidechain": sidechain,
        "trigger": turn.trigger,
        "tool_calls": [c.as_metadata() for c in calls],
        "n_tool_calls": len(calls),
        "n_tool_errors": sum(c.ok is False for c in calls),
        "n_tool_without_result": sum(c.ok is None for c in calls),
        "truncated_tool_outputs": sum(bool(c.truncated) for c in calls),
        "interrupted": turn.interrupted,
        "api_errors": turn.api_errors,
        "message_ids": turn.message_ids,
        "spans": spans,
    }
    if usage:
        metadata["usage"] = usage
    if turn.first_line is not None:
        metadata["line"] = turn.first_line
    metadata.update(extra or {})
    side = (f":{agent}" if agent else ":side") if sidechain else ""
    tags = ["sidechain"] if sidechain else []
    if turn.trigger == "task_notification":
        tags.append("task_notification")
    return {
        "record_id": f"{session_id}{side}:{index}", "source": source, "session_id": session_id,
        "observation_id": turn.message_ids[-1] if turn.message_ids and fmt != "openai"
        else None,
        "timestamp": timestamp(turn.last_time or turn.prompt_time),
        "model": turn.model or model, "level": level, "status_message": _status(turn, output),
        "input": "\n\n".join(turn.prompts) if turn.prompts else None, "output": output,
        "context": context, "latency_s": _seconds(turn.prompt_time, turn.last_time),
        "input_tokens": input_tokens, "output_tokens": output_tokens,
        "tags": tags, "metadata": metadata,
    }


T = TypeVar("T")


def sessions_in(lines: Iterator[Line],
                session: Callable[[Iterator[Line]], tuple[T, Line | None]]) -> list[T]:
    """A file's sessions, one after another (logs joined into one file): ``session(lines)``
    reads one and returns it with the first line of the next, read already (``None`` at the
    end of the file), which then starts the next."""
    done: list[T] = []
    while True:
        parsed, first = session(lines)
        done.append(parsed)
        if first is None:
            return done
        lines = itertools.chain([first], lines)
