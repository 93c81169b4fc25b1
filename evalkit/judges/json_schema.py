"""``json_schema``: is the structured output valid JSON that satisfies a schema? The schema
is a JSON Schema (inline or a file) or pydantic-style ``fields`` (``name: str``,
``age: int?``, ``tags: list[str]``)."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyarrow as pa

from evalkit.judges._det import strip_code_fence, verdicts
from evalkit.paths import parse_json
from evalkit.plugin import Judge

__all__ = ["field_type", "fields_schema", "JsonSchemaConfig", "JsonSchemaJudge"]

_BASE_TYPES = {"str": "string", "string": "string", "int": "integer", "integer": "integer",
               "float": "number", "number": "number", "bool": "boolean",
               "boolean": "boolean", "dict": "object", "object": "object", "list": "array",
               "array": "array", "null": "null", "none": "null"}
_OPTIONAL = re.compile(r"^(?:optional\[(?P<a>.+)\]|(?P<b>.+?)\s*\|\s*none|(?P<c>.+)\?)$", re.I)
_LIST = re.compile(r"^list\[(?P<item>.+)\]$", re.I)
_MAX_ERRORS = 5


def field_type(spec: str) -> tuple[dict[str, Any], bool]:
    """A pydantic-style type (``int``, ``list[str]``, ``str?``, ``Optional[int]``,
    ``float | None``, ``any``) as ``(JSON Schema, required)``; ValueError naming the
    accepted forms otherwise."""
    text = spec.strip()
    opt = _OPTIONAL.match(text)
    if opt:
        inner, _ = field_type(opt.group("a") or opt.group("b") or opt.group("c"))
        return {"anyOf": [inner, {"type": "null"}]}, False
    lst = _LIST.match(text)
    if lst:
        item, _ = field_type(lst.group("item"))
        return {"type": "array", "items": item}, True
    if text.lower() == "any":
        return {}, True
    if text.lower() not in _BASE_TYPES:
        raise ValueError(f"{spec!r} is not a field type; use str, int, float, bool, list, "
                         "dict, any, list[T], and T? or Optional[T] for optional fields")
    return {"type": _BASE_TYPES[text.lower()]}, True


def fields_schema(fields: dict[str, str], additional: bool) -> dict[str, Any]:
    """The JSON Schema of an object with ``fields`` (name -> pydantic-style type)."""
    props, required = {}, []
    for name, spec in fields.items():
        try:
            props[name], needed = field_type(str(spec))
        except ValueError as exc:
            raise ValueError(f"fields.{name}: {exc}") from None
        if needed:
            required.append(name)
    return {"type": "object", "properties": props, "required": required,
            "additionalProperties": additional}


@dataclass(frozen=True)
class JsonSchemaConfig:
    schema: dict[str, Any] | None = None  # an inline JSON Schema
    schema_path: str | None = None  # a JSON Schema file (relative to the working directory)
    fields: dict[str, str] = field(default_factory=dict)  # pydantic-style: name -> type
    additional_properties: bool = True  # with fields: allow keys not listed
    column: str = "output"  # record column holding the structured output
    strip_code_fence: bool = True  # accept output wrapped in a ```json block

    def validate(self) -> None:
        given = [k for k in ("schema", "schema_path", "fields") if getattr(self, k)]
        if len(given) != 1:
            raise ValueError("set exactly one of schema, schema_path or fields "
                             f"(got {', '.join(given) or 'none'})")
        _validator(self)

    def resolved_schema(self) -> dict[str, Any]:
        """The JSON Schema this config describes."""
        if self.fields:
            return fields_schema(dict(self.fields), self.additional_properties)
        if self.schema_path:
            path = Path(self.schema_path)
            try:
                return json.loads(path.read_text(encoding="utf-8"))
            except OSError as exc:
                raise ValueError(f"schema_path: cannot read {path}: {exc.strerror}") from None
            except ValueError as exc:
                raise ValueError(f"schema_path: {path} is not JSON: {exc}") from None
        return dict(self.schema or {})


def _validator(cfg: JsonSchemaConfig) -> Any:
    from jsonschema import exceptions, validators

    schema = cfg.resolved_schema()
    cls = validators.validator_for(schema)
    try:
        cls.check_schema(schema)
    except exceptions.SchemaError as exc:
        where = "/".join(str(p) for p in exc.absolute_path) or "(root)"
        raise ValueError(f"not a valid JSON Schema at {where}: {exc.message}") from None
    return cls(schema)


def _path(error: Any) -> str:
    return "$" + "".join(f"[{p}]" if isinstance(p, int) else f".{p}"
                         for p in error.absolute_path)


class JsonSchemaJudge(Judge):
    """value 1.0 (label ``valid``) when the output parses and validates; 0.0 with label
    ``not_json`` or ``invalid`` (the first violations in ``details``) otherwise. A null
    output is an error judgment. A JSON string holding JSON is parsed once more."""

    Config = JsonSchemaConfig

    def __init__(self, name: str, config: JsonSchemaConfig, ctx: object) -> None:
        self.config = config
        self.validator = _validator(config)

    def _one(self, text: str | None) -> tuple[str, bool | None, str | None, Any]:
        if text is None:
            return "error", None, f"{self.config.column} is null", None
        body = strip_code_fence(text) if self.config.strip_code_fence else text
        ok, value = parse_json(body)
        if not ok:
            return "not_json", False, "output is not JSON", None
        errors = list(self.validator.iter_errors(value))
        if not errors:
            return "valid", True, None, None
        found = [{"path": _path(e), "message": e.message[:300]} for e in errors[:_MAX_ERRORS]]
        return "invalid", False, f"{found[0]['path']}: {found[0]['message']}", {
            "errors": found, "n_errors": len(errors)}

    def judge(self, table: pa.Table) -> pa.Table:
        """One judgment per record."""
        rows = [self._one(t) for t in table.column(self.config.column).to_pylist()]
        labels = [r[0] if r[0] != "error" else None for r in rows]
        return verdicts(
            table.column("record_id"), [r[1] for r in rows], labels=labels,
            status=["error" if r[0] == "error" else "ok" for r in rows],
            explanation=[r[2] if r[0] != "error" else None for r in rows],
            error=[r[2] if r[0] == "error" else None for r in rows],
            details=[r[3] for r in rows])
