"""Tolerant reading of a judge model's JSON answer: a bare object, an object inside a code
fence, or an object followed (or preceded) by prose. What still cannot be read raises
:class:`ParseError`, which the engine turns into a retry and, in the end, an error judgment."""

from __future__ import annotations

import json
import re
from typing import Any

_FENCE = re.compile(r"```(?:json|JSON)?\s*\n?(.*?)```", re.DOTALL)
_DECODER = json.JSONDecoder()


class ParseError(ValueError):
    """The judge's answer is not the JSON object the prompt asked for."""


def parse_json_object(text: str | None) -> dict[str, Any]:
    """The first JSON object in ``text``: fenced blocks are tried first, then the whole text,
    then every ``{`` in order (so trailing or leading prose is ignored)."""
    if not text or not text.strip():
        raise ParseError("empty answer")
    candidates = [m.group(1) for m in _FENCE.finditer(text)] + [text]
    for chunk in candidates:
        chunk = chunk.strip()
        try:
            obj = json.loads(chunk)
        except ValueError:
            obj = _first_object(chunk)
        if isinstance(obj, dict):
            return obj
    raise ParseError(f"no JSON object in the answer: {text[:120]!r}")


def _first_object(text: str) -> dict[str, Any] | None:
    start = text.find("{")
    while start != -1:
        try:
            obj, _ = _DECODER.raw_decode(text, start)
        except ValueError:
            start = text.find("{", start + 1)
            continue
        if isinstance(obj, dict):
            return obj
        start = text.find("{", start + 1)
    return None


def require(obj: dict[str, Any], key: str, kind: type | tuple[type, ...]) -> Any:
    """``obj[key]`` if present and of ``kind``; a :class:`ParseError` naming the key otherwise."""
    if key not in obj:
        raise ParseError(f"the answer has no '{key}' key: {json.dumps(obj)[:120]}")
    value = obj[key]
    if isinstance(value, bool) and bool not in (kind if isinstance(kind, tuple) else (kind,)):
        raise ParseError(f"'{key}' is {value!r}, expected {_kind_name(kind)}")
    if not isinstance(value, kind):
        raise ParseError(f"'{key}' is {value!r}, expected {_kind_name(kind)}")
    return value


def choice(obj: dict[str, Any], key: str, allowed: tuple[str, ...]) -> str:
    """``obj[key]`` normalised (lower case, ``-``/spaces as ``_``) when it is one of
    ``allowed``; a :class:`ParseError` otherwise."""
    value = require(obj, key, str).strip().lower().replace("-", "_").replace(" ", "_")
    if value not in allowed:
        raise ParseError(f"'{key}' is {obj[key]!r}, expected one of {', '.join(allowed)}")
    return value


def number(obj: dict[str, Any], key: str, low: float, high: float) -> float:
    """``obj[key]`` as a float within [low, high] (numeric strings accepted)."""
    value = obj.get(key)
    if isinstance(value, str):
        try:
            value = float(value.strip())
        except ValueError:
            raise ParseError(f"'{key}' is {value!r}, expected a number") from None
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ParseError(f"'{key}' is {value!r}, expected a number in [{low:g}, {high:g}]")
    if not low <= value <= high:
        raise ParseError(f"'{key}' is {value!r}, outside [{low:g}, {high:g}]")
    return float(value)


def _kind_name(kind: type | tuple[type, ...]) -> str:
    kinds = kind if isinstance(kind, tuple) else (kind,)
    return " or ".join(k.__name__ for k in kinds)
