"""Tolerant reading of a judge model's JSON answer: a bare object, an object inside a code
fence, or an object followed (or preceded) by prose. What still cannot be read raises
:class:`ParseError`, which the engine turns into a retry and, in the end, an error judgment."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import Any, TypeVar

_FENCE = re.compile(r"```(?:json|JSON)?\s*\n?(.*?)```", re.DOTALL)
_DECODER = json.JSONDecoder()
T = TypeVar("T")


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


def objects(obj: dict[str, Any], key: str) -> list[dict[str, Any]]:
    """``obj[key]`` as a list of objects; a :class:`ParseError` names an entry that is not."""
    items = require(obj, key, list)
    for i, item in enumerate(items):
        if not isinstance(item, dict):
            raise ParseError(f"{key}[{i}] is not an object")
    return items


def indexed(obj: dict[str, Any], key: str, first: int, last: int,
            read: Callable[[dict[str, Any]], T], missing: str) -> list[T]:
    """``obj[key]`` as a list of objects numbered by ``index`` (an integer or its digits)
    from ``first`` to ``last``, each read by ``read``, in index order. A :class:`ParseError`
    names an entry that is not an object, an index out of range, or the indices left without
    an entry (``missing`` opens that message, e.g. "no label for passage(s)")."""
    found: dict[int, T] = {}
    for i, item in enumerate(objects(obj, key)):
        index = item.get("index")
        if isinstance(index, str) and index.strip().isdigit():
            index = int(index)
        if isinstance(index, bool) or not isinstance(index, int) or not first <= index <= last:
            raise ParseError(f"{key}[{i}].index is {index!r}, expected {first}..{last}")
        found[index] = read(item)
    absent = [i for i in range(first, last + 1) if i not in found]
    if absent:
        raise ParseError(f"{missing} {absent}")
    return [found[i] for i in range(first, last + 1)]


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
