"""The JSONL source: mapping, gzip, globs, and every kind of bad line becoming a reject with
its file, line and reason while the rest of the file is read."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest

from evalkit.context import RunContext
from evalkit.errors import ConfigError, SourceError
from evalkit.sources.jsonl import FileSourceConfig, JsonlSource
from tests.sources.conftest import read_all


def _write(path: Path, lines: list[str | bytes]) -> Path:
    with path.open("wb") as fh:
        for line in lines:
            fh.write((line.encode() if isinstance(line, str) else line) + b"\n")
    return path


GOOD = {"id": "a", "model": "m1", "output": {"completion": "hi", "reasoning": None},
        "usage": {"input": 12, "output": 3}, "latency_s": 0.5,
        "timestamp": "2026-01-02T03:04:05Z", "context": ["p1", {"doc": 2}], "team": "x"}


def test_nested_mapping_types_and_metadata(tmp_path: Path, ctx: RunContext) -> None:
    path = _write(tmp_path / "a.jsonl", [json.dumps(GOOD)])
    cfg = FileSourceConfig(path=str(path), record_id="id",
                           fields={"input_tokens": "usage.input", "output": "output.completion",
                                   "output_tokens": "usage.output"})
    (row,) = read_all(JsonlSource("src", cfg, ctx)).to_pylist()
    assert row["record_id"] == "a" and row["source"] == "src"
    assert row["output"] == "hi" and row["input_tokens"] == 12 and row["output_tokens"] == 3
    assert row["timestamp"].isoformat() == "2026-01-02T03:04:05+00:00"
    assert row["context"] == ["p1", '{"doc":2}']
    assert json.loads(row["metadata"]) == {"team": "x"}
    assert ctx.rejects == []


def test_columns_and_extras_across_row_shapes_in_one_batch(tmp_path: Path,
                                                         ctx: RunContext) -> None:
    """Top-level keys are read once per batch and serve several columns; each row still
    gets its own unmapped keys, in its own order, and a nested path steps into JSON text."""
    rows = [{"id": "a", "usage": {"input": 1, "output": 2}, "team": "x", "env": "prod"},
            {"id": "b", "usage": '{"input": 3, "output": 4}', "env": "dev", "team": None},
            {"id": "c", "usage": 5, "metadata": {"kept": True}, "team": "y"},
            {"id": "d"}]
    path = _write(tmp_path / "a.jsonl", [json.dumps(r) for r in rows])
    cfg = FileSourceConfig(path=str(path), record_id="id",
                           fields={"input_tokens": "usage.input", "output_tokens": "usage.output"})
    got = read_all(JsonlSource("s", cfg, ctx)).to_pylist()
    assert [(r["input_tokens"], r["output_tokens"]) for r in got] == [
        (1, 2), (3, 4), (None, None), (None, None)]
    assert [r["metadata"] for r in got] == ['{"team":"x","env":"prod"}',
                                            '{"env":"dev","team":null}', '{"kept":true}', None]
    single = _write(tmp_path / "b.jsonl", [json.dumps({"id": "e", "team": None}),
                                          json.dumps({"id": "f"})])
    got = read_all(JsonlSource("s", FileSourceConfig(path=str(single), record_id="id"),
                               ctx)).to_pylist()
    assert [r["metadata"] for r in got] == ['{"team":null}', None]


def test_object_output_is_kept_as_json_text(tmp_path: Path, ctx: RunContext) -> None:
    path = _write(tmp_path / "a.jsonl", [json.dumps(GOOD)])
    (row,) = read_all(JsonlSource("s", FileSourceConfig(path=str(path)), ctx)).to_pylist()
    assert json.loads(row["output"]) == GOOD["output"]
    assert row["record_id"] == "a.jsonl:1"  # default id: file name and line


def test_bad_lines_are_rejected_with_location_and_the_rest_is_read(
        tmp_path: Path, ctx: RunContext) -> None:
    lines: list[str | bytes] = [
        json.dumps({"id": "1", "model": "m", "output": "ok"}),
        '{"id": "2", "model": "m", "output": "unterminated',
        b'{"id": "3", "model": "m", "output": "caf\xe9"}',
        json.dumps({"id": "4", "output": "no model"}),
        json.dumps({"id": "5", "model": "m", "latency_s": "fast"}),
        json.dumps([1, 2, 3]),
        "",
        json.dumps({"id": "1", "model": "m", "output": "dup"}),
        json.dumps({"id": "8", "model": "m", "timestamp": "yesterday"}),
        json.dumps({"id": "9", "model": "m", "output": "also ok", "latency_s": "1.5"}),
    ]
    path = _write(tmp_path / "bad.jsonl", lines)
    cfg = FileSourceConfig(path=str(path), record_id="id", required=["model"])
    table = read_all(JsonlSource("s", cfg, ctx))
    assert table.column("record_id").to_pylist() == ["1", "9"]
    assert table.column("latency_s").to_pylist() == [None, 1.5]  # numeric strings coerce
    reasons = {r["location"].rsplit(":", 1)[1]: r["reason"] for r in ctx.rejects}
    assert set(reasons) == {"2", "3", "4", "5", "6", "8", "9"}  # line 7 is blank
    assert reasons["2"].startswith("malformed JSON")
    assert reasons["3"].startswith("not UTF-8")
    assert "required field 'model' is missing" in reasons["4"]
    assert "field 'latency_s'" in reasons["5"] and "expected a number" in reasons["5"]
    assert "expected a JSON object, got list" in reasons["6"]
    assert "duplicate record id '1' (first seen at" in reasons["8"]
    assert "field 'timestamp'" in reasons["9"] and "ISO-8601" in reasons["9"]
    assert all(r["location"].startswith(str(path)) for r in ctx.rejects)


def test_gzip_and_globs(tmp_path: Path, ctx: RunContext) -> None:
    with gzip.open(tmp_path / "part1.jsonl.gz", "wt") as fh:
        fh.write(json.dumps({"id": "g1", "output": "x"}) + "\n")
    _write(tmp_path / "part2.jsonl", [json.dumps({"id": "p2", "output": "y"})])
    cfg = FileSourceConfig(path=str(tmp_path / "part*"), record_id="id")
    table = read_all(JsonlSource("s", cfg, ctx))
    assert sorted(table.column("record_id").to_pylist()) == ["g1", "p2"]


def test_batches_split_and_ids_stay_unique_across_them(tmp_path: Path, ctx: RunContext) -> None:
    lines = [json.dumps({"id": str(i % 7), "output": "o"}) for i in range(20)]
    cfg = FileSourceConfig(path=str(_write(tmp_path / "a.jsonl", lines)), record_id="id",
                           batch_size=3)
    tables = list(JsonlSource("s", cfg, ctx).read())
    assert len(tables) > 2
    assert sum(t.num_rows for t in tables) == 7 and len(ctx.rejects) == 13


def test_configuration_errors(tmp_path: Path, ctx: RunContext) -> None:
    with pytest.raises(SourceError, match="no JSONL file matches"):
        JsonlSource("s", FileSourceConfig(path=str(tmp_path / "none*.jsonl")), ctx)
    path = _write(tmp_path / "a.jsonl", ["{}"])
    with pytest.raises(ConfigError, match="'outptu' is not a record column"):
        list(JsonlSource("s", FileSourceConfig(path=str(path), fields={"outptu": "x"}),
                         ctx).read())


def test_fingerprint_changes_with_content(tmp_path: Path, ctx: RunContext) -> None:
    path = _write(tmp_path / "a.jsonl", ['{"output": "a"}'])
    before = JsonlSource("s", FileSourceConfig(path=str(path)), ctx).fingerprint()
    _write(path, ['{"output": "b"}'])
    after = JsonlSource("s", FileSourceConfig(path=str(path)), ctx).fingerprint()
    assert before != after and before[str(path)]["bytes"] == 16


def test_imported_label_only_score_and_empty_score(tmp_path: Path, ctx: RunContext) -> None:
    lines = [json.dumps({"id": "a", "output": "x",
                         "scores": [{"name": "Tone", "value": None, "label": "polite"}]}),
             json.dumps({"id": "b", "output": "y", "scores": [{"name": "Tone"}]})]
    cfg = FileSourceConfig(path=str(_write(tmp_path / "s.jsonl", lines)), record_id="id",
                           scores_list="scores")
    table = read_all(JsonlSource("s", cfg, ctx))
    assert table.column("record_id").to_pylist() == ["a"]
    (imported,) = ctx.imported
    assert imported.select(["record_id", "judge", "label", "value"]).to_pylist() == \
        [{"record_id": "a", "judge": "Tone", "label": "polite", "value": None}]
    assert "neither a value nor a label" in ctx.rejects[0]["reason"]


def test_deep_paths_walk_lists_and_json_text(tmp_path: Path, ctx: RunContext) -> None:
    rows = [{"id": "a", "messages": [{"content": "q1"}, {"content": "a1"}]},
            {"id": "b", "messages": '[{"content": "q2"}, {"content": "a2"}]'},
            {"id": "c", "messages": [{"content": "only"}]},
            {"id": "d", "messages": {"1": {"content": "not a list"}}}]
    path = _write(tmp_path / "a.jsonl", [json.dumps(r) for r in rows])
    cfg = FileSourceConfig(path=str(path), record_id="id",
                           fields={"input": "messages.0.content", "output": "messages.1.content"})
    got = read_all(JsonlSource("s", cfg, ctx)).to_pylist()
    assert [(r["input"], r["output"]) for r in got] == [("q1", "a1"), ("q2", "a2"),
                                                        ("only", None), (None, None)]
