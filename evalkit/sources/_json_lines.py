"""JSON lines of the agent sources' files, read as the file sources read theirs
(:mod:`evalkit.sources._input`): gzip by its magic bytes, a byte-order mark skipped, a line
over the limit skipped without being held, damaged gzip data reported where it starts."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson

from evalkit.sources._input import bounded_line, decode_problem, head_text, open_input

MAX_LINE_BYTES = 32 << 20  # the file sources' default


@dataclass(frozen=True)
class Line:
    """One non-blank line: its number, the parsed value (None when it is not JSON), its text
    (cut for a line over the limit) and, when it cannot be read, why."""

    number: int
    value: Any
    raw: str
    problem: str | None = None


def _honest(raw: str, problem: str) -> str:
    """Why a line is not JSON, said as it is: a ``//`` or ``#`` comment is named as one, and
    only an object that never closes may have been cut off mid-write."""
    text = raw.strip()
    if text.startswith(("//", "#")):
        return f"a comment line ({text[:2]}): JSON Lines has no comments; remove the line"
    if text.startswith("{") and not text.endswith("}"):
        return f"{problem} (the object never closes: cut off mid-write?)"
    return problem


def json_lines(path: Path, max_line_bytes: int = MAX_LINE_BYTES) -> Iterator[Line]:
    """The lines of ``path``; a line that is not JSON, not UTF-8 or over ``max_line_bytes``
    comes with its ``problem`` (and a null value), as does damaged gzip data (then the file
    ends there)."""
    with open_input(path) as source:
        number = 0
        while True:
            data, length, read = bounded_line(source.stream, 0, max_line_bytes)
            if not read:
                break
            number += 1
            if length > max_line_bytes:
                yield Line(number, None, head_text(data),
                           f"a line of {length:,} bytes, over the limit of {max_line_bytes:,} "
                           "(max_line_bytes); it is skipped")
                continue
            if not data.strip():
                continue
            raw = data.decode("utf-8", "backslashreplace").rstrip("\r\n")
            try:
                yield Line(number, orjson.loads(data), raw)
            except orjson.JSONDecodeError as exc:
                yield Line(number, None, raw, _honest(raw, decode_problem(data, exc)))
        if source.fault is not None:
            yield Line(number + 1, None, "", source.fault_message())
