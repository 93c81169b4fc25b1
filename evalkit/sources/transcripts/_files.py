"""Finding session files: a path, a directory or a glob, and the sessions a telemetry log
names."""

from __future__ import annotations

import glob
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any


def session_files(pattern: str) -> list[Path]:
    """The session files of ``pattern``: a file, a directory (``*.jsonl``, ``*.jsonl.gz`` and
    Gemini CLI's ``session-*.json`` under it, recursively) or a glob."""
    expanded = Path(os.path.expanduser(pattern))
    if expanded.is_dir():
        found = [*expanded.rglob("*.jsonl"), *expanded.rglob("*.jsonl.gz"),
                 *expanded.rglob("session-*.json")]
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


def named_sessions(obj: Any) -> Iterator[tuple[str, str | None]]:
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
                yield from named_sessions(value)
    elif isinstance(obj, list):
        for value in obj:
            yield from named_sessions(value)

