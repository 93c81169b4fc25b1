"""Claude Code session logs (``~/.claude/projects/<project>/<session id>.jsonl``): one JSON
event per line. The rules are in ``docs/agents.md``; each event kind's outcome is in its
table."""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

import orjson

from evalkit.sources._json_lines import Line
from evalkit.sources.transcripts._turns import (
    INTERRUPT_MARKS,
    Chain,
    ToolCall,
    Turn,
    block_text,
    sessions_in,
)

# user text Claude Code wrote, not the user: not a prompt
_NOT_USER_TEXT = ("Caveat: The messages below", "<local-command-caveat>")
# output of a command Claude Code ran itself (a built-in slash command, a `!` shell command)
_LOCAL_OUTPUT = ("<local-command-stdout>", "<local-command-stderr>", "<bash-stdout>",
                 "<bash-stderr>")
_COMMAND = re.compile(r"<command-name>\s*(.*?)\s*</command-name>", re.S)
_ARGS = re.compile(r"<command-args>(.*?)</command-args>", re.S)
_BASH = re.compile(r"<bash-input>(.*?)</bash-input>", re.S)
_SUMMARY = re.compile(r"<summary>(.*?)</summary>", re.S)
# context an IDE extension or Claude Code adds to a prompt as blocks of their own: not typed
_INJECTED = ("<ide_opened_file>", "<ide_selection>", "<system-reminder>")


def _key(data: bytes) -> int:
    """A 64-bit key (a set of ints holds a long session's keys in a fraction of the memory
    of their text)."""
    return int.from_bytes(hashlib.blake2b(data, digest_size=8).digest(), "little")


def _fingerprints(event: dict[str, Any], content: Any) -> list[int]:
    """One key per content block of an event: its kind, chain, time, message id and the
    block itself. A resumed session's file repeats earlier events, sometimes under new uuids
    and with a message's blocks regrouped; a block met again at the same time is a repeat."""
    when = event.get("timestamp")
    if not isinstance(when, str):
        return []
    head = f"{event.get('type')}|{bool(event.get('isSidechain'))}|{when}|" \
        f"{(event.get('message') or {}).get('id') or ''}|".encode()
    blocks = content if isinstance(content, list) else [content]
    return [_key(head + orjson.dumps(b, option=orjson.OPT_SORT_KEYS)) for b in blocks]


@dataclass
class Parsed:
    """What one session file gave: its turns per chain, and the problems met."""

    main: list[Turn]
    side: list[Turn]
    session_id: str | None
    problems: list[tuple[int, str, str]]  # (line, reason, raw)
    counts: dict[str, int] = field(default_factory=dict)  # events read, ignored, repeated
    meta: dict[str, Any] = field(default_factory=dict)

    @property
    def events(self) -> int:
        return self.counts.get("events", 0)


def _user_text(chain: Chain, text: str, when: str | None, line: int) -> bool:
    """Route the text of a user event; False when it was Claude Code's, not the user's."""
    if text.startswith(INTERRUPT_MARKS):
        chain.interrupted()
        return True
    if text.startswith(_LOCAL_OUTPUT):
        chain.local_output()
        return False
    if text.startswith(_NOT_USER_TEXT):
        return False
    command = _COMMAND.search(text)
    if command and text.lstrip().startswith(("<command-", "<command-name>")):
        args = _ARGS.search(text)
        typed = f"{command.group(1)} {args.group(1).strip() if args else ''}".strip()
        chain.prompt(typed, when, line, trigger="command")
        return True
    bash = _BASH.search(text)
    if bash and text.lstrip().startswith("<bash-input>"):
        chain.prompt(f"!{bash.group(1).strip()}", when, line, trigger="command")
        return True
    if text.lstrip().startswith("<task-notification>"):
        summary = _SUMMARY.search(text)
        chain.prompt(summary.group(1).strip() if summary else text, when, line,
                     trigger="task_notification")
        return True
    chain.prompt(text, when, line)
    return True


def claude_sessions(events: Iterable[Line], limit: int,
                    seen: set[int] | None = None) -> list[Parsed]:
    """Split a Claude Code file's lines into sessions and turns (``limit``: the most
    characters kept of a tool result; ``seen``: keys of the events read already, from this
    file or others: a resumed session's file repeats earlier lines, which are read once). A
    file holds one session, or several one after another (logs joined into one file): a user
    or assistant event of another ``sessionId`` starts the next. See ``docs/agents.md``."""
    seen = set() if seen is None else seen
    return sessions_in(iter(events), lambda lines: _session(lines, limit, seen))


def _session(lines: Iterator[Line], limit: int,
             seen: set[int]) -> tuple[Parsed, Line | None]:
    """The session ``lines`` start, and the first line of the next session (``None`` at the
    end of the file)."""
    chains = {False: Chain(limit), True: Chain(limit)}
    problems: list[tuple[int, str, str]] = []
    counts = {"events": 0, "ignored_events": 0, "repeated_events": 0}
    session_id = None
    meta: dict[str, Any] = {}
    owner: dict[tuple[bool, str], Turn] = {}  # the turn each message id belongs to
    rest: Line | None = None
    for item in lines:
        line, event, raw = item.number, item.value, item.raw
        if item.problem is not None:
            problems.append((line, f"{item.problem}; the rest of the file is read", raw))
            continue
        if not isinstance(event, dict):
            problems.append((line, f"expected a JSON object per line, got "
                             f"{type(event).__name__}", raw))
            continue
        kind = event.get("type")
        uid = event.get("uuid")
        message = event.get("message")
        blocks = _fingerprints(event, message.get("content")) \
            if kind in ("user", "assistant") and isinstance(message, dict) else []
        ident = _key(b"uuid|" + uid.encode()) if isinstance(uid, str) else None
        if (ident is not None and ident in seen) or (blocks and all(k in seen for k in blocks)):
            counts["repeated_events"] += 1
            continue
        sid = event.get("sessionId") if kind in ("user", "assistant") else None
        if session_id is not None and isinstance(sid, str) and sid != session_id:
            rest = item  # the next session's first event
            break
        seen.update(blocks)
        if ident is not None:
            seen.add(ident)
        session_id = session_id or (sid if isinstance(sid, str) else None)
        for key, name in (("cwd", "cwd"), ("gitBranch", "git_branch"), ("version", "version")):
            if event.get(key) and name not in meta:
                meta[name] = event[key]
        if kind == "system" and event.get("subtype") == "api_error":
            # a failed API call Claude Code retries (retryAttempt of maxRetries): the turn's
            current = chains[bool(event.get("isSidechain"))].current
            if current is not None:
                current.api_errors += 1
            counts["api_retries"] = counts.get("api_retries", 0) + 1
            continue
        if kind not in ("user", "assistant"):
            counts["ignored_events"] += 1
            continue
        if not isinstance(message, dict):
            problems.append((line, f"a '{kind}' event without a message object", raw))
            continue
        counts["events"] += 1
        side = bool(event.get("isSidechain"))
        chain = chains[side]
        when = event.get("timestamp") if isinstance(event.get("timestamp"), str) else None
        content = message.get("content")
        if kind == "user":
            if event.get("isMeta") or event.get("isCompactSummary"):
                counts["ignored_events"] += 1
                continue
            texts = []
            for block in content if isinstance(content, list) else [content]:
                if isinstance(block, dict) and block.get("type") == "tool_result":
                    chain.tool_result(block.get("tool_use_id"), block.get("content"),
                                      bool(block.get("is_error")), line, when)
                else:
                    texts.append(block_text([block] if isinstance(block, dict) else block))
            typed = [t for t in texts if t and not t.lstrip().startswith(_INJECTED)]
            text = "\n".join(typed or [t for t in texts if t]).strip()
            if text and not _user_text(chain, text, when, line):
                counts["ignored_events"] += 1
            continue
        # an assistant event: one content block of one API message (Claude Code writes a line
        # per block as it streams, each with the message's id and its usage so far)
        if message.get("model") == "<synthetic>" and not event.get("isApiErrorMessage"):
            # Claude Code's own placeholder ("No response requested." when a session resumes
            # after an interrupt), no model's answer
            counts["ignored_events"] += 1
            continue
        mid = message.get("id") or f"line:{line}"
        turn = owner.get((side, mid)) or chain.turn(line)
        owner[(side, mid)] = turn
        turn.message(mid, message.get("usage"))
        model = message.get("model")
        if isinstance(model, str) and model != "<synthetic>":
            turn.model = model
        turn.last_time = when or turn.last_time
        for block in content if isinstance(content, list) else [content]:
            if isinstance(block, str):
                chain.text(turn, block)
            elif isinstance(block, dict) and block.get("type") == "text":
                if event.get("isApiErrorMessage"):
                    turn.api_error = str(block.get("text") or "API error")
                    turn.api_errors += 1
                else:
                    chain.text(turn, str(block.get("text") or ""))
            elif isinstance(block, dict) and block.get("type") == "tool_use":
                chain.call(turn, ToolCall(block.get("id"), str(block.get("name") or "unknown"),
                                          block.get("input")))
    counts["local_commands"] = chains[False].local_commands + chains[True].local_commands
    return Parsed(chains[False].finish(), chains[True].finish(), session_id, problems,
                  counts, meta), rest
