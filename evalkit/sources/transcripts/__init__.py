"""``transcripts``: coding-agent sessions, one record per assistant turn.

Reads Claude Code session logs (``~/.claude/projects/<project>/<session id>.jsonl``), OpenAI
Codex CLI session logs (``~/.codex/sessions/**/rollout-*.jsonl``), Gemini CLI sessions
(``~/.gemini/tmp/<project>/chats/session-*.json``) and JSONL conversations in the OpenAI
chat-messages shape (one conversation per line: ``{"messages": [...]}`` with ``tool_calls``
and ``tool`` results). Each assistant turn becomes a record: the user text that prompted it
(``input``), the assistant's final text (``output``), the tool results of the turn
(``context``), session id, turn index, timestamp, model and tokens; the turn's tool calls,
with their success or failure, are kept in ``metadata.tool_calls`` for
:mod:`evalkit.metrics.tool_correctness`.

The turn-splitting rules are in ``docs/agents.md``. Each format's parser is a module of its
own (``_claude_code``, ``_codex``, ``_gemini``, ``_openai_chat``) that takes parsed events and
returns turns and problems, so it is tested without files; the turn model and the record are
in ``_turns``.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson

from evalkit.errors import SourceError
from evalkit.plugin import Reject, Source, SourceItem
from evalkit.results.schemas import record_batches
from evalkit.sources._input import open_input
from evalkit.sources._json_lines import MAX_LINE_BYTES, json_lines
from evalkit.sources.transcripts._claude_code import Parsed, claude_sessions
from evalkit.sources.transcripts._codex import codex_sessions
from evalkit.sources.transcripts._files import named_sessions, session_files
from evalkit.sources.transcripts._gemini import gemini_turns
from evalkit.sources.transcripts._openai_chat import openai_turns
from evalkit.sources.transcripts._turns import ToolCall, Turn, timestamp, turn_record

__all__ = [
    "FORMATS", "SIDECHAINS", "claude_sessions", "codex_sessions", "gemini_turns", "openai_turns",
    "Parsed", "session_files", "ToolCall", "TranscriptsConfig", "TranscriptsSource", "Turn",
    "turn_record",
]

FORMATS = ("auto", "claude_code", "codex", "gemini", "openai")
SIDECHAINS = ("separate", "skip")
_TRAILING_ID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$")
# why a turn is set aside by the source itself (counted, never judged)
_NO_PROMPT = ("no prompt before this reply: the file starts mid-turn (a fragment, or the tail "
              "of a resumed session); counted, never judged")
_COMPACTION = ("Claude Code's own compaction call (agent-acompact-*: the conversation "
               "summarised to free context), not a sub-agent turn; counted, never judged")

@dataclass(frozen=True)
class TranscriptsConfig:
    # session files, a directory of them (searched recursively for *.jsonl and *.jsonl.gz) or
    # a glob; null when every session comes from discover_from
    path: str | None = None
    format: str = "auto"  # auto (per file), claude_code, codex, gemini or openai
    # telemetry log files (a glob: OTLP/JSON logs or traces, or flat JSON lines) whose
    # session.id / sessionId / session_id values name the sessions to read
    discover_from: str | None = None
    # where a discovered session's <id>.jsonl (or Codex's rollout-<time>-<id>.jsonl) is looked
    # for (recursively); default: path
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
        # Claude Code event uuids read so far: a resumed session's file repeats the history
        # it continues, in the same file or a new one; each event is read once
        self._seen: set[int] = set()
        # the next turn index of each session (and sub-agent): a session continued in another
        # file goes on numbering its turns
        self._next: dict[str, int] = {}

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
            stem = p.name.split(".")[0]
            by_stem.setdefault(stem, p)
            named = _TRAILING_ID.search(stem)  # Codex: rollout-<time>-<session id>.jsonl
            if named:
                by_stem.setdefault(named.group(0), p)
        found: dict[str, Path] = {}
        for log in logs:
            for item in json_lines(log, cfg.max_line_bytes):
                n = item.number
                for sid, transcript in named_sessions(item.value):
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
        """The file's format: set, else guessed from its first line (a Gemini CLI session is
        one JSON document, its first line no JSON value of its own)."""
        if self.config.format != "auto":
            return self.config.format
        for item in json_lines(path, self.config.max_line_bytes):
            value = item.value
            if not isinstance(value, dict):
                return "gemini" if item.raw.strip() in ("{", "[") else "claude_code"
            if isinstance(value.get("messages"), list):
                return "gemini" if "sessionId" in value else "openai"
            if value.get("type") == "session_meta" or "payload" in value or \
                    ("instructions" in value and "id" in value):
                return "codex"
            return "claude_code"
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
                continue
            limit = self.config.max_tool_output_chars
            # one session a file, or several one after another (logs joined into one file)
            if fmt == "codex":
                sessions = codex_sessions(
                    lambda p=path: json_lines(p, self.config.max_line_bytes), limit)
            elif fmt == "gemini":
                document = self._document(path)
                if isinstance(document, Reject):
                    yield document
                    continue
                sessions = [gemini_turns(document, limit)]
            else:
                sessions = claude_sessions(json_lines(path, self.config.max_line_bytes), limit,
                                           self._seen)
            for parsed in sessions:
                yield from self._session(path, fmt, parsed)

    def _document(self, path: Path) -> dict[str, Any] | Reject:
        """A Gemini CLI session: one JSON document, read whole (up to max_line_bytes)."""
        limit = self.config.max_line_bytes
        with open_input(path) as source:
            data = source.stream.read(limit + 1)
        if len(data) > limit:
            return self._reject(str(path), f"a Gemini CLI session over {limit:,} bytes "
                                "(max_line_bytes); raise the limit to read it")
        try:
            document = orjson.loads(data)
        except orjson.JSONDecodeError as exc:
            return self._reject(str(path), f"not a JSON document ({exc}); a Gemini CLI "
                                "session is one JSON object (set source.format when "
                                "auto-detection guesses wrong)", data[:300].decode(
                                    "utf-8", "backslashreplace"))
        if not isinstance(document, dict) or not isinstance(document.get("messages"), list):
            return self._reject(str(path), "expected a Gemini CLI session: an object with a "
                                "'messages' list")
        return document

    def _session(self, path: Path, fmt: str, parsed: Parsed
                 ) -> Iterator[dict[str, Any] | Reject]:
        """The records of one session file's turns (and its problems as rejects)."""
        cfg = self.config
        for line, reason, raw in parsed.problems:
            yield self._reject(f"{path}:{line}", reason, raw)
        for key in ("ignored_events", "repeated_events", "local_commands", "api_retries"):
            self._count(key, parsed.counts.get(key, 0))
        if not parsed.events and parsed.counts.get("repeated_events"):
            yield self._reject(str(path), "every event of this file was read already from "
                               "another file (a copy, or a resumed session's history): no new "
                               "turn")
            return
        if not parsed.events:
            yield self._reject(str(path), f"no user or assistant event: not a {fmt} session "
                         "log (an OpenAI conversation file needs a 'messages' list per line; "
                         "set source.format when auto-detection guesses wrong)")
            return
        stem = path.name.split(".")[0]
        sid = parsed.session_id or stem
        # a sub-agent's own file (Claude Code 2.1+: <session>/subagents/agent-<id>.jsonl: only
        # sidechain events, with the parent's session id): its turns go by the file's name
        agent = stem if stem != sid and not parsed.main and parsed.side else None
        compaction = fmt == "claude_code" and stem.startswith("agent-acompact")
        chains = [(False, parsed.main)]
        if cfg.sidechains == "separate" or compaction:
            chains.append((True, parsed.side))
        else:
            self._count("sidechain_turns_skipped", len(parsed.side))
        for side, turns in chains:
            key = f"{sid}:{agent or 'side'}" if side else sid
            index = self._next.get(key, 0)
            for turn in turns:
                if not turn.answered:
                    yield self._reject(f"{path}:{turn.first_line}", "a user prompt with no "
                                 "assistant reply (the session ended or was interrupted "
                                 "before one): no turn to evaluate",
                                 "\n\n".join(turn.prompts))
                    continue
                record = turn_record(turn, session_id=sid, index=index, source=self.name,
                                     fmt=fmt, file=str(path), sidechain=side,
                                     extra=parsed.meta, agent=agent)
                reason = _COMPACTION if compaction else _NO_PROMPT if turn.trigger is None \
                    else None
                if reason is not None:
                    record["excluded_by"] = "compaction" if compaction else "no_prompt"
                    record["exclude_reason"] = reason
                    self._count(record["excluded_by"] + "_turns")
                yield record
                index += 1
            self._next[key] = index

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
                record["timestamp"] = timestamp(conv.get("timestamp")) \
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
