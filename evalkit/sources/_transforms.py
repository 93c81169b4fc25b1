"""Declarative value transforms of a file source's ``fields``: a column mapped to an object
instead of a path, ``{path, scale, map, default}``, changes the values its path gives, with no
code: a unit (``latency_s: {path: meta.latency_ms, scale: 0.001}``), categories
(``user_action: {path: meta.user_edited, map: {true: edited, false: accepted}}``) and a value
for rows that have none (``default``). They apply in that order: default, map, scale."""

from __future__ import annotations

import difflib
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

__all__ = ["FieldSpec", "field_spec", "paths_of", "spec_key"]

_KEYS = ("path", "scale", "map", "default")
# the columns whose values are a closed set: a mapped value must end in it, since a level the
# map missed (an HTTP 503 when the sample held 200 and 429) would be judged as a completion
_VOCABULARY = {"level": ("a level", ("DEBUG", "DEFAULT", "WARNING", "ERROR")),
               "user_action": ("a user action", ("accepted", "edited", "bypassed"))}


def spec_key(value: Any) -> str:
    """The text a value is looked up by in ``map``: YAML's ``true:`` and JSON's ``true``, or
    ``1:`` and ``1``, and ``"1"`` in a CSV cell, meet at the same key."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    if value is None:
        return "null"
    return str(value).strip().lower() if isinstance(value, str) else str(value)


@dataclass(frozen=True)
class FieldSpec:
    """One mapped column: its paths (fallbacks, the first non-null wins) and its transforms."""

    paths: tuple[str, ...]
    scale: float | None = None  # multiply numbers by this (ms -> s: 0.001)
    mapping: tuple[tuple[str, Any], ...] | None = None  # spec_key(value) -> new value
    default: Any = None  # the value of a row whose paths give none
    column: str = ""  # the record column (a closed set's name is in its reasons)

    @property
    def transforms(self) -> bool:
        return self.scale is not None or self.mapping is not None or self.default is not None

    def _closed(self, out: list[Any], bad: dict[int, str]) -> None:
        """Each mapped value of a closed set in its own spelling (``error`` as ``ERROR``); a
        value the map did not list and that is not in the set is a reason in ``bad``."""
        noun, values = _VOCABULARY[self.column]
        spelling = {v.lower(): v for v in values}
        for i, v in enumerate(out):
            if v is None:
                continue
            known = spelling.get(spec_key(v))
            if known is None:
                bad[i] = (f"{v if not isinstance(v, str) else repr(v[:40])} is not in its map "
                          f"and not {noun} ({', '.join(values)}); add it to "
                          f"fields.{self.column}.map")
            out[i] = known

    def apply(self, vals: Sequence[Any]) -> tuple[list[Any], dict[int, str]]:
        """``vals`` transformed, and the rows whose value cannot be scaled (row -> reason)."""
        out = list(vals)
        bad: dict[int, str] = {}
        if self.default is not None:
            out = [self.default if v is None else v for v in out]
        if self.mapping is not None:
            table = dict(self.mapping)
            out = [v if v is None else table.get(spec_key(v), v) for v in out]
            if self.column in _VOCABULARY:
                self._closed(out, bad)
        if self.scale is not None:
            for i, v in enumerate(out):
                if v is None or (isinstance(v, str) and not v.strip()):
                    out[i] = None  # no value, as for an unscaled column (sources/_mapping)
                    continue
                try:
                    if isinstance(v, bool):
                        raise ValueError
                    out[i] = float(v) * self.scale
                except (TypeError, ValueError):
                    bad[i] = f"scale {self.scale:g}: expected a number, got {str(v)[:40]!r}"
                    out[i] = None
        return out, bad


def paths_of(spec: Any) -> list[str]:
    """The dotted paths a ``fields`` entry reads (a path, a list of them, or an object)."""
    if isinstance(spec, Mapping):
        spec = spec.get("path")
    return [spec] if isinstance(spec, str) else list(spec)


def _is_paths(value: Any) -> bool:
    return (isinstance(value, str) and bool(value)) or (
        isinstance(value, list) and bool(value) and
        all(isinstance(p, str) and p for p in value))


def field_spec(col: str, value: Any) -> FieldSpec:
    """The :class:`FieldSpec` of ``fields.<col>``; ``ValueError`` naming the key and the fix
    for anything else (an unknown key with the one it resembles)."""
    where = f"fields.{col}"
    if _is_paths(value):
        return FieldSpec(tuple(paths_of(value)))
    if not isinstance(value, Mapping):
        raise ValueError(f"{where}: {value!r} is not a dotted path, a list of them (fallbacks, "
                         "first non-null wins: [response.text, output]) or an object "
                         "{path: ..., scale: ..., map: {...}, default: ...}")
    for key in value:
        if key not in _KEYS:
            close = difflib.get_close_matches(str(key), _KEYS, n=1, cutoff=0.6)
            hint = f"did you mean '{close[0]}'? " if close else ""
            raise ValueError(f"{where}.{key}: not a transform key; {hint}keys: "
                             f"{', '.join(_KEYS)}")
    if not _is_paths(value.get("path")):
        raise ValueError(f"{where}.path: {value.get('path')!r} is not a dotted path or a list "
                         f"of them; e.g. {{path: meta.latency_ms, scale: 0.001}}")
    scale = value.get("scale")
    if scale is not None and (isinstance(scale, bool) or not isinstance(scale, (int, float))
                              or not math.isfinite(scale) or scale == 0):
        raise ValueError(f"{where}.scale: {scale!r} is not a finite, non-zero number; "
                         "milliseconds to seconds is 0.001")
    table = value.get("map")
    if table is not None and not (isinstance(table, Mapping) and table):
        raise ValueError(f"{where}.map: {table!r} is not an object of value -> new value; "
                         "e.g. {true: edited, false: accepted}")
    for new in (table or {}).values():
        if isinstance(new, (Mapping, list)):
            raise ValueError(f"{where}.map: {new!r} is not a plain value (text, number, "
                             "boolean or null)")
    default = value.get("default")
    if isinstance(default, (Mapping, list)):
        raise ValueError(f"{where}.default: {default!r} is not a plain value")
    if col in _VOCABULARY and table:
        noun, values = _VOCABULARY[col]
        for new in table.values():
            if new is not None and spec_key(new) not in {v.lower() for v in values}:
                raise ValueError(f"{where}.map: {new!r} is not {noun}; map to one of "
                                 f"{', '.join(values)} (or null)")
    mapping = tuple((spec_key(k), v) for k, v in table.items()) if table else None
    return FieldSpec(tuple(paths_of(value)), float(scale) if scale is not None else None,
                     mapping, default, col)
