"""A JSON schema of evalkit's config tree, built from the plugins' Config dataclasses, for an
editor's completion and checks of your YAML (``evalkit plugins --json-schema``).

The top-level schema describes an experiment file or a whole config: ``source``, ``filters``,
``judges``, ``metrics``, ``sinks``, ``runner``, ``alerts``. Every instance is one of the
installed plugins of its kind (``plugin:`` picks which), with that plugin's keys, types,
defaults and comments; an unknown key is an error, as it is for ``evalkit run``. A group's
preset file (``conf/judges/x.yaml``) matches ``#/$defs/judges``. A value may always be an
interpolation (``${oc.env:KEY}``)."""

from __future__ import annotations

import json
import re
import sys
from dataclasses import MISSING, fields
from typing import Any

__all__ = ["config_schema"]

_INTERPOLATION = {"type": "string", "pattern": r"^\$\{.*\}$"}
_SIMPLE = {"str": {"type": "string"}, "int": {"type": "integer"}, "float": {"type": "number"},
           "bool": {"type": "boolean"}, "None": {"type": "null"}, "Any": {},
           "object": {}}


def _split_top(text: str, sep: str) -> list[str]:
    """``text`` split at ``sep`` outside brackets."""
    parts, depth, start = [], 0, 0
    for i, ch in enumerate(text):
        depth += ch == "["
        depth -= ch == "]"
        if ch == sep and depth == 0:
            parts.append(text[start:i].strip())
            start = i + 1
    parts.append(text[start:].strip())
    return parts


def type_schema(annotation: str) -> dict[str, Any]:
    """The JSON schema of a type annotation as written (``list[str] | None``)."""
    options = _split_top(annotation.replace("Optional[", "").rstrip(), "|")
    if len(options) > 1:
        return {"anyOf": [type_schema(o) for o in options]}
    text = options[0]
    if text in _SIMPLE:
        return dict(_SIMPLE[text])
    match = re.fullmatch(r"(list|tuple|set|frozenset|Sequence|dict|Mapping)\[(.*)\]", text)
    if match:
        outer, inner = match.groups()
        if outer in ("dict", "Mapping"):
            value = _split_top(inner, ",")[-1]
            return {"type": "object", "additionalProperties": type_schema(value)}
        item = _split_top(inner, ",")[0]
        return {"type": "array", "items": type_schema(item)}
    if text in ("list", "tuple"):
        return {"type": "array"}
    if text == "dict":
        return {"type": "object"}
    return {}


def _dataclass_schema(cls: type, plugin: str | None = None) -> dict[str, Any]:
    from evalkit.configdoc import config_keys

    comments = {k.name: k.comment for k in config_keys(cls)}
    props: dict[str, Any] = {}
    required: list[str] = []
    for f in fields(cls):
        schema = type_schema(f.type if isinstance(f.type, str) else
                             getattr(f.type, "__name__", ""))
        if schema.get("type") != "string" and "anyOf" not in schema and schema:
            schema = {"anyOf": [schema, _INTERPOLATION]}
        if comments.get(f.name):
            schema["description"] = comments[f.name]
        if f.default is not MISSING and f.default != "???":
            schema["default"] = f.default
        elif f.default_factory is not MISSING:
            schema["default"] = f.default_factory()
        elif f.default == "???" or f.default is MISSING:
            required.append(f.name)
        props[f.name] = schema
    out: dict[str, Any] = {"type": "object", "properties": props,
                           "additionalProperties": False}
    if plugin is not None:
        out["properties"] = {"plugin": {"const": plugin}, **props}
        # an experiment may set a preset's keys without repeating its plugin, and a required
        # key may come from the command line
        required = []
    if required:
        out["required"] = required
    return json.loads(json.dumps(out, default=str))


def config_schema() -> dict[str, Any]:
    """The JSON schema (draft 2020-12) of the config tree, for the installed plugins."""
    from evalkit.config import _TOP_KEYS, AlertConfig, RunnerConfig
    from evalkit.registry import KINDS, registry

    reg = registry()
    defs: dict[str, Any] = {"runner": _dataclass_schema(RunnerConfig),
                            "alert": _dataclass_schema(AlertConfig)}
    for kind in KINDS:
        refs = []
        for name in sorted(reg.entries(kind)):
            cls = reg.get(kind, name)
            key = f"{kind}.{name}"
            defs[key] = _dataclass_schema(cls.Config, plugin=name)
            refs.append({"$ref": f"#/$defs/{key}"})
        defs[f"{kind}.instance"] = {"anyOf": refs} if refs else {"type": "object"}
        defs[kind] = {"type": "object", "additionalProperties": {
            "anyOf": [{"$ref": f"#/$defs/{kind}.instance"}, {"type": "null"}]}}
    top = {key: {} for key in _TOP_KEYS}  # a top-level key added later is at least allowed
    top["flag_at"] = {"enum": [">", ">="], "description": "whether a score at the threshold "
                      "is flagged: the default of every metric and alert"}
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "title": "evalkit config",
        "type": "object",
        "properties": {
            **top,
            "defaults": {"type": "array", "description": "Hydra's defaults list"},
            "experiment": {"type": "string", "description": "names the run's directory"},
            "source": {"$ref": "#/$defs/sources.instance"},
            "generate": {"anyOf": [{"$ref": "#/$defs/generators.instance"},
                                   {"type": "null"}]},
            "filters": {"$ref": "#/$defs/filters"},
            "judges": {"$ref": "#/$defs/judges"},
            "metrics": {"$ref": "#/$defs/metrics"},
            "sinks": {"$ref": "#/$defs/sinks"},
            "runner": {"$ref": "#/$defs/runner"},
            "alerts": {"type": "array", "items": {"$ref": "#/$defs/alert"}},
            "hydra": {"type": "object", "description": "Hydra's own settings"},
        },
        "additionalProperties": False,
        "$defs": defs,
    }


if __name__ == "__main__":
    json.dump(config_schema(), sys.stdout, indent=1)
    sys.stdout.write("\n")
