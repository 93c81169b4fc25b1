"""``transcripts``: coding-agent sessions, one record per assistant turn.

Reads Claude Code session logs (``~/.claude/projects/<project>/<session id>.jsonl``: one JSON
event per line) and JSONL conversations in the OpenAI chat-messages shape (one conversation
per line: ``{"messages": [...]}`` with ``tool_calls`` and ``tool`` results). Each assistant
turn becomes a record: the user text that prompted it (``input``), the assistant's final text
(``output``), the tool results of the turn (``context``), session id, turn index, timestamp,
model and tokens; the turn's tool calls, with their success or failure, are kept in
``metadata.tool_calls`` for :mod:`evalkit.metrics.tool_correctness`.

The turn-splitting rules are in ``docs/agents.md``; the parsing itself is in
:func:`claude_turns` and :func:`openai_turns`, which take parsed events and return turns and
problems, so they are tested without files.
"""

from __future__ import annotations

import glob
import os
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

import orjson

from evalkit.errors import SourceError
from evalkit.plugin import Reject, Source, SourceItem
from evalkit.results.schemas import json_text, record_batches
from evalkit.sources._json_lines import MAX_LINE_BYTES, Line, json_lines

__all__ = [
    "FORMATS", "SIDECHAINS", "claude_turns", "openai_turns", "Parsed", "session_files", "ToolCall",
    "TranscriptsConfig", "TranscriptsSource", "Turn", "turn_record",
]

FORMATS = ("auto", "claude_code", "openai")
SIDECHAINS = ("separate", "skip")
# what a turn's input may begin with when Claude Code wrote it, not the user
_NOT_USER_TEXT = ("<command-name>", "<local-command-stdout>", "Caveat: The messages below",
                  "<command-message>")
_INTERRUPTED = "[Request interrupted by user"


@dataclass(frozen=True)
class TranscriptsConfig:
    # session files, a directory of them (searched recursively for *.jsonl and *.jsonl.gz) or
    # a glob; null when every session comes from discover_from
    path: str | None = None
    format: str = "auto"  # auto (per file, from its first event), claude_code or openai
    # telemetry log files (a glob: OTLP/JSON logs or traces, or flat JSON lines) whose
    # session.id / sessionId / session_id values name the sessions to read
    discover_from: str | None = None
    # where a discovered session's <id>.jsonl is looked for (recursively); default: path
    sessions_dir: str | None = None
    # separate: a sub-agent's (isSidechain) turns are records of their own, tagged
    # 'sidechain'; skip: they are not read (their count is in the manifest)
    sidechains: str = "separate"
    # a tool result longer than this many characters is cut (the rest counted in the marker)
    max_tool_output_chars: int = 20_000
    max_line_bytes: int = MAX_LINE_BYTES  # a longer line is a reject, skipped unread
    batch_size: int = 1_000  # records per batch

    def validate(self) -> None:
        if self.format not in FORMATS:
            raise ValueError(f"format: {self.format!r} is not one of {', '.join(FORMATS)}")
        if self.sidechains not in SIDECHAINS:
            raise ValueError(f"sidechains: {self.sidechains!r} is not one of "
                             f"{', '.join(SIDECHAINS)}")
        if self.path is None and self.discover_from is None:
            raise ValueError("path: set path (session files, a directory or a glob) or "
                             "discover_from (telemetry logs naming the sessions)")
        if self.max_tool_output_chars < 100:
            raise ValueError(f"max_tool_output_chars: {self.max_tool_output_chars} is too "
                             "small to keep a useful head of a tool result; use 100 or more")
        if self.max_line_bytes < 1:
            raise ValueError(f"max_line_bytes: must be positive, got {self.max_line_bytes}")
        if self.batch_size < 1:
            raise ValueError(f"batch_size: must be positive, got {self.batch_size}")


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
    texts: list[tuple[int, str]] = field(default_factory=list)  # (position, text)
    calls: list[ToolCall] = field(default_factory=list)
    results_at: int = -1  # position of the last tool result (text after it is the answer)
    orphans: list[ToolCall] = field(default_factory=list)  # results naming no call of the turn
    model: str | None = None
    last_time: str | None = None
    message_ids: list[str] = field(default_factory=list)
    usage: dict[str, int] = field(default_factory=dict)
    api_error: str | None = None
    position: int = 0  # events seen so far in the turn
    interrupted: bool = False
    first_line: int | None = None

    @property
    def answered(self) -> bool:
        return bool(self.message_ids or self.texts or self.calls)


def _cut(text: str, limit: int) -> tuple[str, int]:
    if len(text) <= limit:
        return text, 0
    cut = len(text) - limit
    return text[:limit] + f"\n… [{cut} more characters cut by evalkit]", cut


def _block_text(content: Any) -> str:
    """The text of a message or tool result ``content``: a string, or the text of its
    text blocks (an image block counts as ``[image]``); anything else as JSON text."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = []
        for block in content:
            if isinstance(block, dict) and block.get("type") == "text":
                parts.append(str(block.get("text") or ""))
            elif isinstance(block, dict) and block.get("type") == "image":
                parts.append("[image]")
            elif isinstance(block, str):
                parts.append(block)
            else:
                parts.append(json_text(block) or "")
        return "\n".join(parts)
    return json_text(content) or ""


def _first_line(text: str) -> str:
    line = text.strip().splitlines()[0] if text.strip() else ""
    return line[:300]


class _Session:
    """Collects the turns of one chain of events (the main chain or a sidechain)."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.turns: list[Turn] = []
        self.current: Turn | None = None

    def prompt(self, text: str, when: str | None, line: int) -> None:
        turn = self.current
        if turn is not None and not turn.answered:
            turn.prompts.append(text)  # prompts in a row, before any reply, are one input
            return
        self._close()
        self.current = Turn(prompts=[text], prompt_time=when, first_line=line)

    def interrupted(self) -> None:
        if self.current is not None:
            self.current.interrupted = True

    def turn(self, line: int) -> Turn:
        if self.current is None:  # a reply with no prompt before it (a resumed session)
            self.current = Turn(first_line=line)
        return self.current

    def tool_result(self, tool_id: str | None, content: Any, is_error: bool, line: int,
                    when: str | None) -> None:
        turn = self.turn(line)
        text, cut = _cut(_block_text(content), self.limit)
        failed = is_error or "<tool_use_error>" in text[:200]
        call = next((c for c in turn.calls if c.id is not None and c.id == tool_id), None)
        if call is None:
            call = ToolCall(tool_id, "unknown")
            turn.orphans.append(call)
        call.ok = not failed
        call.result = text
        call.truncated = cut
        call.error = _first_line(text.replace("<tool_use_error>", "")
                                 .replace("</tool_use_error>", "")) if failed else None
        turn.position += 1
        turn.results_at = turn.position
        turn.last_time = when or turn.last_time

    def _close(self) -> None:
        if self.current is not None:
            self.turns.append(self.current)
        self.current = None

    def finish(self) -> list[Turn]:
        self._close()
        return self.turns


@dataclass
class Parsed:
    """What one session file gave: its turns per chain, and the problems met."""

    main: list[Turn]
    side: list[Turn]
    session_id: str | None
    problems: list[tuple[int, str, str]]  # (line, reason, raw)
    ignored: int = 0  # events of other types (summary, system, snapshots, progress)
    meta: dict[str, Any] = field(default_factory=dict)
    events: int = 0  # user and assistant events read


def claude_turns(events: Iterable[Line], limit: int) -> Parsed:
    """Split a Claude Code session's lines (a ``problem``: the line cannot be read) into
    turns. See ``docs/agents.md`` for the rules."""
    chains = {False: _Session(limit), True: _Session(limit)}
    problems: list[tuple[int, str, str]] = []
    session_id = None
    ignored = 0
    meta: dict[str, Any] = {}
    seen_messages: dict[bool, set[str]] = {False: set(), True: set()}
    n_events = 0
    for item in events:
        line, event, raw = item.number, item.value, item.raw
        if item.problem is not None:
            problems.append((line, f"{item.problem} (cut off mid-write?); the rest of the "
                             "session is read", raw))
            continue
        if not isinstance(event, dict):
            problems.append((line, f"expected a JSON object per line, got "
                             f"{type(event).__name__}", raw))
            continue
        kind = event.get("type")
        session_id = session_id or event.get("sessionId")
        for key, name in (("cwd", "cwd"), ("gitBranch", "git_branch"), ("version", "version")):
            if event.get(key) and name not in meta:
                meta[name] = event[key]
        if kind not in ("user", "assistant"):
            ignored += 1
            continue
        message = event.get("message")
        if not isinstance(message, dict):
            problems.append((line, f"a '{kind}' event without a message object", raw))
            continue
        n_events += 1
        side = bool(event.get("isSidechain"))
        chain = chains[side]
        when = event.get("timestamp") if isinstance(event.get("timestamp"), str) else None
        content = message.get("content")
        if kind == "user":
            if event.get("isMeta") or event.get("isCompactSummary"):
                ignored += 1
                continue
            blocks = content if isinstance(content, list) else [content]
            texts = []
            for block in blocks:
                if isinstance(block, dict) and block.get("type") == "tool_result":
                    chain.tool_result(block.get("tool_use_id"), block.get("content"),
                                      bool(block.get("is_error")), line, when)
                else:
                    texts.append(_block_text([block] if isinstance(block, dict) else block))
            text = "\n".join(t for t in texts if t).strip()
            if not text:
                continue
            if text.startswith(_INTERRUPTED):
                chain.interrupted()
                continue
            if text.startswith(_NOT_USER_TEXT):
                ignored += 1
                continue
            chain.prompt(text, when, line)
            continue
        # an assistant event: one content block of one API message (Claude Code writes a line
        # per block, all with the message's id and usage)
        turn = chain.turn(line)
        mid = message.get("id") or f"line:{line}"
        if mid not in seen_messages[side]:
            seen_messages[side].add(mid)
            turn.message_ids.append(mid)
            usage = message.get("usage")
            if isinstance(usage, dict):
                for key, value in usage.items():
                    if isinstance(value, int) and not isinstance(value, bool):
                        turn.usage[key] = turn.usage.get(key, 0) + value
        model = message.get("model")
        if isinstance(model, str) and model != "<synthetic>":
            turn.model = model
        turn.last_time = when or turn.last_time
        for block in content if isinstance(content, list) else [content]:
            turn.position += 1
            if isinstance(block, str):
                turn.texts.append((turn.position, block))
            elif isinstance(block, dict) and block.get("type") == "text":
                if event.get("isApiErrorMessage"):
                    turn.api_error = str(block.get("text") or "API error")
                else:
                    turn.texts.append((turn.position, str(block.get("text") or "")))
            elif isinstance(block, dict) and block.get("type") == "tool_use":
                turn.calls.append(ToolCall(block.get("id"), str(block.get("name") or "unknown"),
                                           block.get("input")))
    return Parsed(chains[False].finish(), chains[True].finish(), session_id, problems,
                  ignored, meta, n_events)


def _openai_failed(content: str, message: dict[str, Any]) -> bool:
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


def openai_turns(messages: list[Any], limit: int) -> tuple[list[Turn], list[str]]:
    """Split one OpenAI chat-messages conversation into turns; also the problems met (a
    message that is not an object, an unknown role)."""
    chain = _Session(limit)
    problems = []
    for k, message in enumerate(messages):
        if not isinstance(message, dict):
            problems.append(f"messages[{k}] is not an object")
            continue
        role = message.get("role")
        content = message.get("content")
        if role == "user":
            text = _block_text(content).strip()
            if text:
                chain.prompt(text, None, k)
        elif role == "assistant":
            turn = chain.turn(k)
            turn.message_ids.append(f"messages[{k}]")
            text = _block_text(content).strip()
            if text:
                turn.position += 1
                turn.texts.append((turn.position, text))
            for call in message.get("tool_calls") or []:
                if not isinstance(call, dict):
                    continue
                fn = call.get("function") if isinstance(call.get("function"), dict) else {}
                args: Any = fn.get("arguments")
                if isinstance(args, str):
                    try:
                        args = orjson.loads(args)
                    except orjson.JSONDecodeError:
                        pass
                turn.position += 1
                turn.calls.append(ToolCall(call.get("id"), str(fn.get("name") or "unknown"),
                                           args))
        elif role == "tool":
            text = _block_text(content)
            chain.tool_result(message.get("tool_call_id"), text,
                              _openai_failed(text, message), k, None)
        elif role in ("system", "developer"):
            continue
        else:
            problems.append(f"messages[{k}] has an unknown role {role!r}")
    return chain.finish(), problems


def turn_record(turn: Turn, *, session_id: str, index: int, source: str, fmt: str,
                file: str, sidechain: bool, model: str | None = None,
                extra: dict[str, Any] | None = None, agent: str | None = None
                ) -> dict[str, Any]:
    """The record of one turn (``agent``: the sub-agent whose file a sidechain came from)."""
    answer = [t for pos, t in turn.texts if pos > turn.results_at and t.strip()]
    output = "\n\n".join(answer) if answer else None
    calls = [*turn.calls, *turn.orphans]
    context = [f"[{c.name}{' error' if c.ok is False else ''}] {c.result}"
               for c in calls if c.result is not None]
    usage = turn.usage
    input_tokens = None
    if "input_tokens" in usage:
        input_tokens = usage["input_tokens"] + usage.get("cache_creation_input_tokens", 0) + \
            usage.get("cache_read_input_tokens", 0)
    level = "ERROR" if turn.api_error and output is None else "DEFAULT"
    status = turn.api_error if turn.api_error else None
    if output is None and not turn.api_error:
        status = ("interrupted by the user before the turn's answer" if turn.interrupted
                  else "the turn ended without a final text (the session stopped or was cut "
                  "off)")
    spans = [{"type": "llm", "name": "assistant", "error": level == "ERROR"}
             for _ in turn.message_ids]
    spans += [{"type": "tool", "name": c.name, "error": c.ok is False} for c in calls]
    latency = None
    if turn.prompt_time and turn.last_time:
        try:
            latency = (datetime.fromisoformat(turn.last_time.replace("Z", "+00:00"))
                       - datetime.fromisoformat(turn.prompt_time.replace("Z", "+00:00"))
                       ).total_seconds()
        except ValueError:
            latency = None
    metadata: dict[str, Any] = {
        "turn_index": index, "format": fmt, "file": file, "sidechain": sidechain,
        "tool_calls": [c.as_metadata() for c in calls],
        "n_tool_calls": len(calls),
        "n_tool_errors": sum(c.ok is False for c in calls),
        "n_tool_without_result": sum(c.ok is None for c in calls),
        "truncated_tool_outputs": sum(bool(c.truncated) for c in calls),
        "interrupted": turn.interrupted,
        "message_ids": turn.message_ids,
        "spans": spans,
    }
    if usage:
        metadata["usage"] = usage
    if turn.first_line is not None and fmt == "claude_code":
        metadata["line"] = turn.first_line
    metadata.update(extra or {})
    side = (f":{agent}" if agent else ":side") if sidechain else ""
    return {
        "record_id": f"{session_id}{side}:{index}", "source": source, "session_id": session_id,
        "observation_id": turn.message_ids[-1] if turn.message_ids and fmt == "claude_code"
        else None,
        "timestamp": _timestamp(turn.last_time or turn.prompt_time),
        "model": turn.model or model, "level": level, "status_message": status,
        "input": "\n\n".join(turn.prompts) if turn.prompts else None, "output": output,
        "context": context, "latency_s": latency, "input_tokens": input_tokens,
        "output_tokens": usage.get("output_tokens"),
        "tags": ["sidechain"] if sidechain else [], "metadata": metadata,
    }


def _timestamp(text: str | None) -> datetime | None:
    if not text:
        return None
    try:
        return datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return None


# --- files ---------------------------------------------------------------------------------

def session_files(pattern: str) -> list[Path]:
    """The session files of ``pattern``: a file, a directory (``*.jsonl`` and ``*.jsonl.gz``
    under it, recursively) or a glob."""
    expanded = Path(os.path.expanduser(pattern))
    if expanded.is_dir():
        found = [*expanded.rglob("*.jsonl"), *expanded.rglob("*.jsonl.gz")]
    else:
        found = [Path(p) for p in glob.glob(str(expanded), recursive=True)]
    return sorted(p for p in found if p.is_file())


def _attribute_ids(attributes: Any, keys: tuple[str, ...]) -> Iterator[str]:
    if isinstance(attributes, list):  # OTLP/JSON: [{"key": ..., "value": {"stringValue": ...}}]
        for item in attributes:
            if isinstance(item, dict) and item.get("key") in keys:
                value = item.get("value")
                if isinstance(value, dict) and isinstance(value.get("stringValue"), str):
                    yield value["stringValue"]
    elif isinstance(attributes, dict):
        for key in keys:
            if isinstance(attributes.get(key), str):
                yield attributes[key]


_SESSION_KEYS = ("session.id", "sessionId", "session_id", "gen_ai.conversation.id")


def _named_sessions(obj: Any) -> Iterator[tuple[str, str | None]]:
    """``(session id, transcript path or None)`` named anywhere in one telemetry line:
    attributes of OTLP/JSON log records and spans, or keys of a flat JSON object."""
    if isinstance(obj, dict):
        for key in _SESSION_KEYS:
            if isinstance(obj.get(key), str):
                path = obj.get("transcript_path")
                yield obj[key], path if isinstance(path, str) else None
        for sid in _attribute_ids(obj.get("attributes"), _SESSION_KEYS):
            yield sid, None
        for value in obj.values():
            if isinstance(value, (dict, list)):
                yield from _named_sessions(value)
    elif isinstance(obj, list):
        for value in obj:
            yield from _named_sessions(value)


class TranscriptsSource(Source):
    """Coding-agent session transcripts, one record per assistant turn (see the module
    docstring and ``docs/agents.md``)."""

    Config = TranscriptsConfig

    def __init__(self, name: str, config: TranscriptsConfig, ctx: Any) -> None:
        self.name = name
        self.config = config
        self.ctx = ctx
        self.missing: list[tuple[str, str]] = []  # (session id, where it was named)
        self.paths = self._resolve()
        self.counts: dict[str, int] = {}

    def _resolve(self) -> list[Path]:
        cfg = self.config
        paths: list[Path] = []
        if cfg.path is not None:
            paths = session_files(cfg.path)
            if not paths and cfg.discover_from is None:
                raise SourceError(f"source.path: no session file matches '{cfg.path}' "
                                  f"(working directory {os.getcwd()}); fix the path, the "
                                  "directory or the glob")
        if cfg.discover_from is not None:
            paths += self._discover(cfg.discover_from)
        unique: dict[Path, None] = {}
        for p in paths:
            unique.setdefault(p.resolve(), None)
        return list(unique)

    def _discover(self, pattern: str) -> list[Path]:
        cfg = self.config
        logs = session_files(pattern) if not Path(pattern).is_file() else [Path(pattern)]
        if not logs:
            raise SourceError(f"source.discover_from: no telemetry file matches '{pattern}'; "
                              "fix the path or the glob")
        where = cfg.sessions_dir or cfg.path
        if where is None:
            raise SourceError("source.sessions_dir: sessions named by telemetry logs are "
                              "looked for in sessions_dir (or path); set one of them")
        root = Path(os.path.expanduser(where))
        root = root if root.is_dir() else root.parent
        by_stem: dict[str, Path] = {}
        for p in session_files(str(root)):
            by_stem.setdefault(p.name.split(".")[0], p)
        found: dict[str, Path] = {}
        for log in logs:
            for item in json_lines(log, cfg.max_line_bytes):
                n = item.number
                for sid, transcript in _named_sessions(item.value):
                    if sid in found or any(m[0] == sid for m in self.missing):
                        continue
                    if transcript and Path(transcript).is_file():
                        found[sid] = Path(transcript)
                    elif sid in by_stem:
                        found[sid] = by_stem[sid]
                    else:
                        self.missing.append((sid, f"{log}:{n}"))
        return list(found.values())

    def fingerprint(self) -> dict[str, Any]:
        from evalkit.sources.files import fingerprint

        out: dict[str, Any] = {"files": fingerprint(self.paths)} if self.paths else {}
        if self.counts:
            out["counts"] = dict(self.counts)
        return out

    def _reject(self, location: str, reason: str, raw: Any = None) -> Reject:
        self.counts["rejects"] = self.counts.get("rejects", 0) + 1
        return Reject(location, reason, raw)

    def _count(self, key: str, n: int = 1) -> None:
        if n:
            self.counts[key] = self.counts.get(key, 0) + n

    def _format(self, path: Path) -> str:
        if self.config.format != "auto":
            return self.config.format
        for item in json_lines(path, self.config.max_line_bytes):
            if isinstance(item.value, dict):
                return "openai" if isinstance(item.value.get("messages"), list) \
                    else "claude_code"
        return "claude_code"

    def records(self) -> Iterator[dict[str, Any] | Reject]:
        """Every turn's record, file by file, and the rejects as they are met."""
        for sid, where in self.missing:
            yield self._reject(where, f"session {sid} is named in the telemetry but no {sid}.jsonl "
                         f"is under {self.config.sessions_dir or self.config.path}; copy the "
                         "transcript there or point sessions_dir at it")
        for path in self.paths:
            fmt = self._format(path)
            if fmt == "openai":
                yield from self._openai(path)
            else:
                yield from self._claude(path)

    def _claude(self, path: Path) -> Iterator[dict[str, Any] | Reject]:
        cfg = self.config
        parsed = claude_turns(json_lines(path, cfg.max_line_bytes), cfg.max_tool_output_chars)
        for line, reason, raw in parsed.problems:
            yield self._reject(f"{path}:{line}", reason, raw)
        self._count("ignored_events", parsed.ignored)
        if not parsed.events:
            yield self._reject(str(path), "no user or assistant event: not a Claude Code session "
                         "log (an OpenAI conversation file needs a 'messages' list per line; "
                         "set source.format when auto-detection guesses wrong)")
            return
        stem = path.name.split(".")[0]
        sid = parsed.session_id or stem
        # a sub-agent's own file (Claude Code 2.1+: <session>/subagents/agent-<id>.jsonl: only
        # sidechain events, with the parent's session id): its turns go by the file's name
        agent = stem if stem != sid and not parsed.main and parsed.side else None
        chains = [(False, parsed.main)]
        if cfg.sidechains == "separate":
            chains.append((True, parsed.side))
        else:
            self._count("sidechain_turns_skipped", len(parsed.side))
        for side, turns in chains:
            index = 0
            for turn in turns:
                if not turn.answered:
                    yield self._reject(f"{path}:{turn.first_line}", "a user prompt with no "
                                 "assistant reply (the session ended or was interrupted "
                                 "before one): no turn to evaluate",
                                 "\n\n".join(turn.prompts))
                    continue
                yield turn_record(turn, session_id=sid, index=index, source=self.name,
                                  fmt="claude_code", file=str(path), sidechain=side,
                                  extra=parsed.meta, agent=agent)
                index += 1

    def _openai(self, path: Path) -> Iterator[dict[str, Any] | Reject]:
        for item in json_lines(path, self.config.max_line_bytes):
            n, conv, raw = item.number, item.value, item.raw
            where = f"{path}:{n}"
            if item.problem is not None:
                yield self._reject(where, item.problem, raw)
                continue
            messages = conv.get("messages") if isinstance(conv, dict) else None
            if not isinstance(messages, list):
                yield self._reject(where, "expected an object with a 'messages' list (OpenAI "
                             "chat-messages shape)", raw)
                continue
            turns, problems = openai_turns(messages, self.config.max_tool_output_chars)
            for problem in problems:
                yield self._reject(where, problem, raw)
            sid = next((str(conv[k]) for k in ("session_id", "conversation_id", "id")
                        if conv.get(k) is not None), f"{path.name}:{n}")
            extra: dict[str, Any] = {"line": n}
            if isinstance(conv.get("metadata"), dict):
                extra.update(conv["metadata"])
            model = conv.get("model") if isinstance(conv.get("model"), str) else None
            index = 0
            for turn in turns:
                if not turn.answered:
                    yield self._reject(where, "a user message with no assistant reply: no turn to "
                                 "evaluate", "\n\n".join(turn.prompts))
                    continue
                record = turn_record(turn, session_id=sid, index=index, source=self.name,
                                     fmt="openai", file=str(path), sidechain=False,
                                     model=model, extra=extra)
                record["timestamp"] = _timestamp(conv.get("timestamp")) \
                    if isinstance(conv.get("timestamp"), str) else None
                yield record
                index += 1

    def read(self) -> Iterator[SourceItem]:
        yield from record_batches(self._first_reads(), self.config.batch_size)

    def _first_reads(self) -> Iterator[dict[str, Any] | Reject]:
        """:meth:`records`, each session once."""
        # record id -> where its session was read: the file (and an OpenAI conversation's
        # line); a session met again (a copied file, a conversation id used twice) is rejected
        seen: dict[str, str] = {}
        for record in self.records():
            if isinstance(record, Reject):
                yield record
                continue
            meta = record["metadata"]
            origin = meta["file"] + (f":{meta['line']}" if meta["format"] == "openai" else "")
            first = seen.setdefault(record["record_id"], origin)
            if first != origin:
                yield self._reject(f"{meta['file']}:{meta.get('line', '?')}",
                                   f"duplicate turn {record['record_id']}: its session was "
                                   f"read already from {first}; remove the copy or narrow "
                                   "source.path", record.get("input"))
                continue
            self._count("turns")
            yield record
