"""Reading a judge model's JSON answer, and taking a verdict from it only when it is
unambiguous.

The rule (documented in docs/reliability.md):

1. an answer that is one JSON object as a whole (what structured output returns) is the
   verdict, whatever its strings quote;
2. otherwise every top-level JSON object in the answer (bare, fenced or among prose; an
   object nested in another is part of it) that has all the verdict's keys is a candidate.
   One candidate, or several that agree on the verdict keys' values, is the verdict; several
   that disagree are an ``ambiguous verdict`` (a judge quoting JSON from the judged text
   before its own verdict), never the first one's value.

What cannot be read raises :class:`ParseError` with a cause (``empty_answer``,
``malformed_answer``, ``invalid_answer``, ``ambiguous_verdict``), which the engine turns into
a re-ask and, in the end, an error judgment with that cause."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import Any, TypeVar

_DECODER = json.JSONDecoder()
T = TypeVar("T")


class ParseError(ValueError):
    """The judge's answer is not the JSON object the prompt asked for; ``cause`` says how."""

    def __init__(self, message: str, cause: str = "invalid_answer") -> None:
        super().__init__(message)
        self.cause = cause


def parse_json_object(text: str | None, keys: tuple[str, ...] = ()) -> dict[str, Any]:
    """The verdict object in ``text`` by the rule above; ``keys`` are the verdict's keys (with
    none, every object is a candidate)."""
    if not text or not text.strip():
        raise ParseError("empty answer", "empty_answer")
    whole = text.strip()
    if whole[:1] == "{":
        try:
            obj = json.loads(whole)
        except ValueError:
            pass
        else:
            if isinstance(obj, dict):
                return obj
    found = _top_level_objects(text)
    if not found:
        raise ParseError(f"no JSON object in the answer: {text[:120]!r}", "malformed_answer")
    candidates = [o for o in found if all(k in o for k in keys)]
    if not candidates:
        raise ParseError(f"no JSON object in the answer has the key(s) {', '.join(keys)}: "
                         f"{text[:120]!r}")
    verdicts = [[o[k] for k in keys] if keys else o for o in candidates]
    if any(v != verdicts[0] for v in verdicts[1:]):
        shown = "; ".join(json.dumps(v)[:60] for v in verdicts[:4])
        raise ParseError(f"ambiguous verdict: {len(candidates)} JSON objects in the answer "
                         f"disagree ({shown})", "ambiguous_verdict")
    return candidates[-1]


def _top_level_objects(text: str) -> list[dict[str, Any]]:
    """Every JSON object in ``text`` that is not inside another one, in order."""
    found: list[dict[str, Any]] = []
    start = text.find("{")
    while start != -1:
        try:
            obj, end = _DECODER.raw_decode(text, start)
        except ValueError:
            start = text.find("{", start + 1)
            continue
        if isinstance(obj, dict):
            found.append(obj)
        start = text.find("{", end)
    return found


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


_DECIMAL = re.compile(r"[+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][+-]?[0-9]+)?")


def number(obj: dict[str, Any], key: str, low: float, high: float) -> float:
    """``obj[key]`` as a float within [low, high] (numeric strings accepted)."""
    value = obj.get(key)
    if isinstance(value, str):
        # a decimal number in ASCII digits only: float() also takes "1_0" (10), other
        # scripts' digits and "nan", which no judge wrote as a score
        if not _DECIMAL.fullmatch(value.strip()):
            raise ParseError(f"'{key}' is {value!r}, expected a number")
        value = float(value.strip())
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ParseError(f"'{key}' is {value!r}, expected a number in [{low:g}, {high:g}]")
    if not low <= value <= high:
        raise ParseError(f"'{key}' is {value!r}, outside [{low:g}, {high:g}]")
    return float(value)


def _kind_name(kind: type | tuple[type, ...]) -> str:
    kinds = kind if isinstance(kind, tuple) else (kind,)
    return " or ".join(k.__name__ for k in kinds)
