import json

import pytest

from evalkit.config import instance
from evalkit.errors import ConfigError
from evalkit.judges.json_schema import JsonSchemaConfig, JsonSchemaJudge, field_type
from evalkit.results.schemas import JUDGMENTS, RECORDS, conform

SCHEMA = {"type": "object", "required": ["name", "city"],
          "properties": {"name": {"type": "string"}, "city": {"type": "string"},
                         "date": {"type": "string", "pattern": "^\\d{4}-\\d{2}-\\d{2}$"}}}


def judge(outputs, **cfg):
    table = conform([{"record_id": f"r{i}", "output": o} for i, o in enumerate(outputs)],
                    RECORDS)
    out = JsonSchemaJudge("j", JsonSchemaConfig(**cfg), None).judge(table)
    conform(out, JUDGMENTS)
    return out.to_pylist()


def test_valid_invalid_not_json_null():
    rows = judge(['{"name": "Tomás", "city": "Lisboa", "date": "2026-05-02"}',
                  '{"name": "Tomás", "date": "May 2nd"}',
                  "Sure! Here is the JSON you asked for",
                  None, ""], schema=SCHEMA)
    assert [r["label"] for r in rows] == ["valid", "invalid", "not_json", None, "not_json"]
    assert [r["value"] for r in rows] == [1.0, 0.0, 0.0, None, 0.0]
    assert rows[3]["status"] == "error" and rows[3]["error"] == "output is null"
    details = json.loads(rows[1]["details"])
    assert details["n_errors"] == 2
    assert {e["path"] for e in details["errors"]} == {"$", "$.date"}


def test_request_envelope_is_valid_json_but_not_the_schema():
    envelope = json.dumps({"completion": None, "rawRequest": {"model": "m"}})
    rows = judge([envelope], schema=SCHEMA)
    assert rows[0]["label"] == "invalid" and "'name' is a required property" in \
        rows[0]["explanation"]


def test_code_fence_and_double_encoded_json():
    fenced = '```json\n{"name": "A", "city": "B"}\n```'
    double = json.dumps(json.dumps({"name": "A", "city": "B"}))
    assert [r["label"] for r in judge([fenced, double], schema=SCHEMA)] == ["valid", "valid"]
    assert judge([fenced], schema=SCHEMA, strip_code_fence=False)[0]["label"] == "not_json"


def test_pydantic_style_fields():
    rows = judge(['{"name": "A", "age": 3, "tags": ["x"]}', '{"name": "A", "age": "3"}',
                  '{"name": "A", "tags": [1]}', '{"name": "A", "extra": 1}'],
                 fields={"name": "str", "age": "int?", "tags": "Optional[list[str]]"},
                 additional_properties=False)
    assert [r["label"] for r in rows] == ["valid", "invalid", "invalid", "invalid"]


@pytest.mark.parametrize("spec, schema, required", [
    ("str", {"type": "string"}, True),
    ("float | None", {"anyOf": [{"type": "number"}, {"type": "null"}]}, False),
    ("list[int]", {"type": "array", "items": {"type": "integer"}}, True),
    ("any", {}, True),
])
def test_field_types(spec, schema, required):
    assert field_type(spec) == (schema, required)


def test_schema_file(tmp_path):
    path = tmp_path / "s.json"
    path.write_text(json.dumps(SCHEMA))
    assert judge(['{"name": "a", "city": "b"}'], schema_path=str(path))[0]["label"] == "valid"


@pytest.mark.parametrize("cfg, message", [
    ({}, "exactly one of schema, schema_path or fields"),
    ({"schema": {"type": "objekt"}}, "not a valid JSON Schema"),
    ({"fields": {"a": "strng"}}, "fields.a: 'strng' is not a field type"),
    ({"schema_path": "/nonexistent/s.json"}, "schema_path: cannot read"),
])
def test_bad_config(cfg, message):
    with pytest.raises(ConfigError, match=message):
        instance("judges", "j", {"plugin": "json_schema", **cfg}, "judges.j")


def test_inline_schema_through_config():
    inst = instance("judges", "j", {"plugin": "json_schema", "schema": SCHEMA}, "judges.j")
    assert inst.config.resolved_schema()["required"] == ["name", "city"]
