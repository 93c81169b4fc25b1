"""Field mapping that fits real logs: a record column may list fallback paths (a row's first
non-null value wins), and a list or an object where text is expected is kept as its JSON text,
never a reject of the row."""

from __future__ import annotations

import json

import pytest

from evalkit.config import instance
from evalkit.errors import ConfigError
from evalkit.sources.csv import CsvSource
from evalkit.sources.files import FileSourceConfig
from evalkit.sources.jsonl import JsonlSource, JsonlSourceConfig
from tests.sources.conftest import read

FIELDS = {"output": ["response.completion", "response.text", "completion"],
          "input": ["prompt", "request.messages"], "model": ["model", "meta.model"]}
ROWS = [
    {"id": "a", "response": {"completion": "first"}, "prompt": "p", "model": "m1"},
    {"id": "b", "response": {"completion": None, "text": "second"}, "prompt": None,
     "request": {"messages": [{"role": "user", "content": "hi"}]}, "meta": {"model": "m2"}},
    {"id": "c", "completion": {"choices": [{"text": "third"}]}, "prompt": "p3"},
    {"id": "d", "response": {"text": ""}, "other": 1},
]


def _jsonl(tmp_path, rows, name="d.jsonl"):
    path = tmp_path / name
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


@pytest.mark.parametrize("shape", ["mixed", "same"])
def test_first_non_null_path_wins_and_objects_are_json_text(ctx, tmp_path, shape):
    rows = ROWS if shape == "mixed" else [  # same-shape rows take the typed decoder
        {"id": f"r{i}", "response": {"completion": None if i % 2 else f"c{i}",
                                     "text": f"t{i}"}, "prompt": {"q": i}} for i in range(6)]
    cfg = JsonlSourceConfig(path=str(_jsonl(tmp_path, rows)), record_id="id", fields=FIELDS,
                            workers=0)
    got = read(JsonlSource("j", cfg, ctx))
    assert not got.rejects
    out = {r["record_id"]: r for r in got.table.to_pylist()}
    if shape == "mixed":
        assert [out[k]["output"] for k in "abcd"] == [
            "first", "second", '{"choices":[{"text":"third"}]}', ""]
        # a message list is read as the text of its last user message
        assert [out[k]["input"] for k in "abcd"] == ["p", "hi", "p3", None]
        assert [out[k]["model"] for k in "abcd"] == ["m1", "m2", None, None]
        assert json.loads(out["d"]["metadata"]) == {"other": 1}
    else:
        assert [out[f"r{i}"]["output"] for i in range(6)] == [
            "c0", "t1", "c2", "t3", "c4", "t5"]
        assert out["r1"]["input"] == '{"q":1}'


def test_csv_fallbacks(ctx, tmp_path):
    path = tmp_path / "d.csv"
    path.write_text("id,answer,fallback\n1,,from fallback\n2,direct,ignored\n")
    cfg = FileSourceConfig(path=str(path), record_id="id",
                           fields={"output": ["answer", "fallback"]})
    got = read(CsvSource("c", cfg, ctx))
    assert [r["output"] for r in got.table.to_pylist()] == ["from fallback", "direct"]


def test_a_required_field_is_missing_only_when_every_path_is(ctx, tmp_path):
    cfg = JsonlSourceConfig(path=str(_jsonl(tmp_path, ROWS)), record_id="id", fields=FIELDS,
                            required=["model"], workers=0)
    got = read(JsonlSource("j", cfg, ctx))
    assert [r["record_id"] for r in got.table.to_pylist()] == ["a", "b"]
    assert [r.reason for r in got.rejects] == [
        "required field 'model' is missing (mapped from 'model | meta.model')"] * 2


@pytest.mark.parametrize("paths", [[], [""], ["a", 3], 7, ""])
def test_a_bad_path_list_is_refused(paths):
    with pytest.raises(ConfigError, match="source.fields.output"):
        instance("sources", "source", {"plugin": "jsonl", "path": "x.jsonl",
                                       "fields": {"output": paths}}, "source")
