"""Declarative value transforms in ``fields``: a unit scale, a value map and a default, with
no code, on every file source and both JSONL decoders; validated like every other key."""

from __future__ import annotations

import json
from datetime import datetime, timezone

import pyarrow as pa
import pytest

from evalkit.config import instance
from evalkit.errors import ConfigError
from evalkit.sources.csv import CsvSource
from evalkit.sources.files import FileSourceConfig
from evalkit.sources.jsonl import JsonlSource, JsonlSourceConfig
from tests.sources.conftest import read

FIELDS = {
    "output": "response.text",
    "latency_s": {"path": "meta.latency_ms", "scale": 0.001},
    "user_action": {"path": "meta.user_edited", "map": {True: "edited", False: "accepted"}},
    "level": {"path": ["status", "response.finish_reason"],
              "map": {"error": "ERROR", "stop": "DEFAULT"}, "default": "DEFAULT"},
}


def _rows(same_shape: bool) -> list[dict]:
    rows = [{"id": f"r{i}", "response": {"text": f"t{i}", "finish_reason": "stop"},
             "meta": {"latency_ms": 1830 + i, "user_edited": i % 2 == 1}} for i in range(4)]
    if not same_shape:  # the line-by-line path: a row lacking what the others have
        rows[2] = {"id": "r2", "response": {"text": "t2", "finish_reason": "error"},
                   "meta": {"latency_ms": "1832", "user_edited": None}, "extra": 1}
    return rows


@pytest.mark.parametrize("same_shape", [True, False])
def test_scale_map_and_default_apply_on_jsonl(ctx, tmp_path, same_shape):
    path = tmp_path / "d.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in _rows(same_shape)))
    cfg = JsonlSourceConfig(path=str(path), record_id="id", fields=FIELDS, workers=0)
    got = read(JsonlSource("j", cfg, ctx))
    assert not got.rejects
    out = {r["record_id"]: r for r in got.table.to_pylist()}
    assert [out[f"r{i}"]["latency_s"] for i in range(4)] == pytest.approx(
        [1.830, 1.831, 1.832, 1.833])
    actions = [out[f"r{i}"]["user_action"] for i in range(4)]
    levels = [out[f"r{i}"]["level"] for i in range(4)]
    if same_shape:
        assert actions == ["accepted", "edited", "accepted", "edited"]
        assert levels == ["DEFAULT"] * 4
    else:
        assert actions == ["accepted", "edited", None, "edited"]
        assert levels == ["DEFAULT", "DEFAULT", "ERROR", "DEFAULT"]


def test_a_default_fills_a_column_no_row_has(ctx, tmp_path):
    path = tmp_path / "d.jsonl"
    path.write_text('{"output": "a"}\n{"output": "b"}\n')
    cfg = JsonlSourceConfig(path=str(path), workers=0,
                            fields={"model": {"path": "meta.model", "default": "unknown"}})
    assert read(JsonlSource("j", cfg, ctx)).table.column("model").to_pylist() == [
        "unknown", "unknown"]


def test_csv_cells_meet_yaml_keys_and_a_bad_number_is_a_reject(ctx, tmp_path):
    path = tmp_path / "d.csv"
    path.write_text("id,answer,ms,edited\n1,a,1500,true\n2,b,soon,False\n3,c,,1\n")
    cfg = FileSourceConfig(path=str(path), record_id="id", fields={
        "output": "answer", "latency_s": {"path": "ms", "scale": 0.001},
        "user_action": {"path": "edited", "map": {True: "edited", False: "accepted",
                                                  "1": "edited"}}})
    got = read(CsvSource("c", cfg, ctx))
    rows = got.table.to_pylist()
    assert [(r["record_id"], r["latency_s"], r["user_action"]) for r in rows] == [
        ("1", 1.5, "edited"), ("3", None, "edited")]
    assert [r.reason for r in got.rejects] == [
        "field 'latency_s' (from 'ms'): scale 0.001: expected a number, got 'soon'"]


@pytest.mark.parametrize("spec, message", [
    ({"path": "meta.ms", "sacle": 0.001}, r"fields.latency_s.sacle: .*did you mean 'scale'"),
    ({"scale": 0.001}, r"fields.latency_s.path: None is not a dotted path"),
    ({"path": "meta.ms", "scale": "ms"}, r"fields.latency_s.scale: 'ms' is not a finite"),
    ({"path": "meta.ms", "scale": 0}, r"fields.latency_s.scale"),
    ({"path": "meta.ms", "map": []}, r"fields.latency_s.map: \[\] is not an object"),
    ({"path": "meta.ms", "default": {"a": 1}}, r"fields.latency_s.default"),
    ({"path": "status", "map": {"error": "FAILED"}},
     r"fields.level.map: 'FAILED' is not a level; map to one of DEBUG, DEFAULT, WARNING, ERROR"),
    ({"path": "edited", "map": {True: "yes"}}, r"fields.user_action.map: 'yes' is not a user "),
])
def test_a_bad_transform_is_refused_naming_the_key(spec, message):
    column = "level" if spec.get("path") == "status" else \
        "user_action" if spec.get("path") == "edited" else "latency_s"
    with pytest.raises(ConfigError, match=message):
        instance("sources", "source", {"plugin": "jsonl", "path": "x.jsonl",
                                       "fields": {column: spec}}, "source")


@pytest.mark.parametrize("same_shape", [True, False])
def test_a_level_or_action_its_map_does_not_list_is_a_reject(ctx, tmp_path, same_shape):
    """A map made from the first rows of a log ({200: DEFAULT, 429: ERROR}) meets a 503 later:
    kept as the level '503' it was judged as a completion. A value that the map does not
    list and that is no level (user action) is a reject naming the fix; one that is already
    a level passes, in the level's own spelling."""
    rows = [{"id": f"r{i}", "text": f"t{i}", "status": s, "edited": e}
            for i, (s, e) in enumerate([(200, True), (429, False), (503, False),
                                        ("error", "maybe"), (200, None)])]
    if not same_shape:
        rows[1]["extra"] = 1
    path = tmp_path / "d.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    cfg = JsonlSourceConfig(path=str(path), record_id="id", workers=0, fields={
        "output": "text", "level": {"path": "status", "map": {200: "DEFAULT", 429: "ERROR"}},
        "user_action": {"path": "edited", "map": {True: "edited", False: "accepted"}}})
    got = read(JsonlSource("j", cfg, ctx))
    assert [(r["record_id"], r["level"], r["user_action"]) for r in got.table.to_pylist()] \
        == [("r0", "DEFAULT", "edited"), ("r1", "ERROR", "accepted"), ("r4", "DEFAULT", None)]
    assert [(r.location.rsplit(":", 1)[1], r.reason) for r in got.rejects] == [
        ("3", "field 'level' (from 'status'): 503 is not in its map and not a level (DEBUG, "
              "DEFAULT, WARNING, ERROR); add it to fields.level.map"),
        ("4", "field 'user_action' (from 'edited'): 'maybe' is not in its map and not a user "
              "action (accepted, edited, bypassed); add it to fields.user_action.map")]


@pytest.mark.parametrize("same_shape", [True, False])
def test_an_empty_text_for_a_number_or_a_time_is_no_value(ctx, tmp_path, same_shape):
    """JSON logs write "" where nothing was measured, as a CSV leaves a cell empty: no value,
    not a reject that drops the record (a failed call's, from pipeline_failure_rate)."""
    rows = [{"id": "a", "text": "x", "ms": 1200, "cost": "0.5", "ts": "2026-11-01T00:00:00Z",
             "n": 3},
            {"id": "b", "text": "y", "ms": "", "cost": " ", "ts": "", "n": ""}]
    if not same_shape:
        rows[1]["extra"] = 1
    path = tmp_path / "d.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    cfg = JsonlSourceConfig(path=str(path), record_id="id", workers=0, fields={
        "output": "text", "latency_s": {"path": "ms", "scale": 0.001}, "cost_usd": "cost",
        "timestamp": "ts", "input_tokens": "n"})
    got = read(JsonlSource("j", cfg, ctx))
    assert not got.rejects
    assert [(r["latency_s"], r["cost_usd"], r["input_tokens"]) for r in got.table.to_pylist()] \
        == [(1.2, 0.5, 3), (None, None, None)]
    assert got.table.column("timestamp").to_pylist()[1] is None


@pytest.mark.parametrize("text, expected", [
    ("1764000000", datetime(2025, 11, 24, 16, 0, tzinfo=timezone.utc)),   # a CSV cell
    ("1764000000123", datetime(2025, 11, 24, 16, 0, 0, 123000, tzinfo=timezone.utc)),
    ("Mon, 24 Nov 2025 16:00:00 GMT", datetime(2025, 11, 24, 16, 0, tzinfo=timezone.utc)),
    ("2026", None),  # a year, not 33 minutes after 1970
    ("12.5", None),
    ("01/11/2026 10:00", None),  # day or month first: not guessed
])
def test_a_timestamp_written_as_text(text, expected):
    from evalkit.sources._mapping import BadValue, coercer

    read = coercer(pa.timestamp("us", tz="UTC"))
    if expected is None:
        with pytest.raises(BadValue, match="expected an ISO-8601"):
            read(text)
    else:
        assert read(text) == expected


@pytest.mark.parametrize("same_shape", [True, False])
def test_an_empty_id_is_a_missing_id(ctx, tmp_path, same_shape):
    """An id "" named one record "" and made the next a "duplicate record id ''": it is no
    id, and both rows say so."""
    rows = [{"id": "a", "text": "x"}, {"id": "", "text": "y"}, {"id": " ", "text": "z"}]
    if not same_shape:
        rows[1]["extra"] = 1
    path = tmp_path / "d.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    got = read(JsonlSource("j", JsonlSourceConfig(path=str(path), record_id="id", workers=0,
                                                  fields={"output": "text"}), ctx))
    assert got.table.column("record_id").to_pylist() == ["a"]
    assert [r.reason for r in got.rejects] == ["record id is missing (mapped from 'id')"] * 2
