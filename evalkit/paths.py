"""JSON text and dotted paths into nested JSON (``output.completion``, ``messages.0.content``,
``metadata.booking.id``): the one walker that sources, judges and metrics share. A step into
a string that holds JSON parses it, since fields are often logged as JSON text."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import orjson

__all__ = ["getter", "Getter", "parse_json", "Parts", "parts_of", "value_at", "walk"]

Getter = Callable[[Any], Any]
Parts = list[str | int]


def parts_of(path: str) -> Parts:
    """``"messages.0.content"`` -> ``["messages", 0, "content"]``."""
    return [int(p) if p.isdigit() else p for p in path.split(".")]


_ABSENT = object()


def walk(obj: Any, parts: Parts) -> Any:
    """The value at ``parts`` in ``obj``; ``None`` when any step is absent. An object that
    lacks a step's key may hold a key with dots in it (a CSV header ``meta.model``,
    OpenTelemetry's ``gen_ai.request.model``): then the longest run of the remaining steps,
    joined by dots, that is one of its keys is taken (a plain key always wins)."""
    steps = iter(parts)  # (an iterator: what is left of it when a key is absent is the rest)
    for part in steps:
        if type(obj) is dict:  # the usual step, first: one lookup
            value = obj.get(part, _ABSENT)
            if value is _ABSENT:
                return _dotted_walk(obj, [part, *steps])
            obj = value
            continue
        if type(obj) is str and obj[:1] in ("{", "["):
            try:
                obj = orjson.loads(obj)
            except orjson.JSONDecodeError:
                return None
        if type(part) is int and type(obj) is list:
            if part >= len(obj):
                return None
            obj = obj[part]
        elif isinstance(obj, dict):
            value = obj.get(part, _ABSENT)
            if value is _ABSENT:
                return _dotted_walk(obj, [part, *steps])
            obj = value
        else:
            return None
    return obj


def _dotted_walk(obj: dict[Any, Any], rest: Parts) -> Any:
    """The rest of a walk from ``obj``, which lacks the key ``rest[0]``: through its key that
    joins the most of the steps ``rest`` with dots, else ``None``."""
    for j in range(len(rest), 1, -1):
        key = ".".join(map(str, rest[:j]))
        if key in obj:
            return walk(obj[key], rest[j:])
    return None


def value_at(obj: Any, path: str) -> Any:
    """The value at dotted ``path`` in ``obj`` (a dict, a list, or JSON text), or ``None``."""
    return walk(obj, parts_of(path))


def getter(path: str) -> Getter:
    """A function reading dotted ``path`` from a parsed row (a dict). The common shapes, one
    key or two plain keys, get closures without the general walk: they run once per cell on
    the sources' hot path."""
    parts = parts_of(path)
    if len(parts) == 1 and type(parts[0]) is str:
        key = parts[0]
        return lambda obj: obj.get(key)
    if len(parts) == 2 and all(type(p) is str for p in parts):
        outer, inner = parts

        def two_keys(obj: dict[str, Any]) -> Any:
            v = obj.get(outer)
            if type(v) is dict:
                return v.get(inner)
            if v is None:
                return obj.get(path)  # a key with a dot in it
            return walk(v, [inner]) if type(v) is str else None

        return two_keys
    return lambda obj: walk(obj, parts)


def parse_json(text: str | None, unwrap: bool = True) -> tuple[bool, Any]:
    """``(True, value)`` when ``text`` is JSON, else ``(False, None)``. With ``unwrap``, a
    JSON string that itself holds a JSON object or array (double-encoded logging) is parsed
    once more."""
    if text is None:
        return False, None
    try:
        value = orjson.loads(text)
    except orjson.JSONDecodeError:
        return False, None
    if unwrap and isinstance(value, str) and value.strip()[:1] in ("{", "["):
        try:
            value = orjson.loads(value)
        except orjson.JSONDecodeError:
            pass
    return True, value


def path_list(paths: str | Sequence[str]) -> list[str]:
    """A mapped field's paths: one dotted path, or its fallbacks in order."""
    return [paths] if isinstance(paths, str) else list(paths)


def fallback_getter(paths: str | Sequence[str]) -> Getter:
    """A getter of ``paths`` (one dotted path, or fallbacks): a row's first non-null value."""
    getters = [getter(p) for p in path_list(paths)]
    if len(getters) == 1:
        return getters[0]

    def first(obj: Any) -> Any:
        for get in getters:
            value = get(obj)
            if value is not None:
                return value
        return None

    return first
