"""The JSONL source: mapping, gzip, globs, and every kind of bad line becoming a reject with
its file, line and reason while the rest of the file is read."""

from __future__ import annotations

import gzip
import json
import os
import sys
from pathlib import Path
from typing import Any

import pytest

from evalkit._fork import can_fork
from evalkit.context import RunContext
from evalkit.errors import ConfigError, SourceError
from evalkit.sources import _pieces
from evalkit.sources.jsonl import JsonlSource, JsonlSourceConfig
from tests.sources.conftest import read, read_all


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
    cfg = JsonlSourceConfig(path=str(path), record_id="id",
                           fields={"input_tokens": "usage.input", "output": "output.completion",
                                   "output_tokens": "usage.output"})
    got = read(JsonlSource("src", cfg, ctx))
    (row,) = got.table.to_pylist()
    assert row["record_id"] == "a" and row["source"] == "src"
    assert row["output"] == "hi" and row["input_tokens"] == 12 and row["output_tokens"] == 3
    assert row["timestamp"].isoformat() == "2026-01-02T03:04:05+00:00"
    assert row["context"] == ["p1", '{"doc":2}']
    assert json.loads(row["metadata"]) == {"team": "x"}
    assert got.rejects == []


def test_columns_and_extras_across_row_shapes_in_one_batch(tmp_path: Path,
                                                         ctx: RunContext) -> None:
    """Top-level keys are read once per batch and serve several columns; each row still
    gets its own unmapped keys, in its own order, and a nested path steps into JSON text."""
    rows = [{"id": "a", "usage": {"input": 1, "output": 2}, "team": "x", "env": "prod"},
            {"id": "b", "usage": '{"input": 3, "output": 4}', "env": "dev", "team": None},
            {"id": "c", "usage": 5, "metadata": {"kept": True}, "team": "y"},
            {"id": "d"}]
    path = _write(tmp_path / "a.jsonl", [json.dumps(r) for r in rows])
    cfg = JsonlSourceConfig(path=str(path), record_id="id",
                           fields={"input_tokens": "usage.input", "output_tokens": "usage.output"})
    got = read_all(JsonlSource("s", cfg, ctx)).to_pylist()
    assert [(r["input_tokens"], r["output_tokens"]) for r in got] == [
        (1, 2), (3, 4), (None, None), (None, None)]
    assert [r["metadata"] for r in got] == ['{"team":"x","env":"prod"}',
                                            '{"env":"dev","team":null}', '{"kept":true}', None]
    single = _write(tmp_path / "b.jsonl", [json.dumps({"id": "e", "team": None}),
                                          json.dumps({"id": "f"})])
    got = read_all(JsonlSource("s", JsonlSourceConfig(path=str(single), record_id="id"),
                               ctx)).to_pylist()
    assert [r["metadata"] for r in got] == ['{"team":null}', None]


def test_object_output_is_kept_as_json_text(tmp_path: Path, ctx: RunContext) -> None:
    path = _write(tmp_path / "a.jsonl", [json.dumps(GOOD)])
    (row,) = read_all(JsonlSource("s", JsonlSourceConfig(path=str(path)), ctx)).to_pylist()
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
    cfg = JsonlSourceConfig(path=str(path), record_id="id", required=["model"])
    got = read(JsonlSource("s", cfg, ctx))
    table = got.table
    assert table.column("record_id").to_pylist() == ["1", "9"]
    assert table.column("latency_s").to_pylist() == [None, 1.5]  # numeric strings coerce
    reasons = {r.location.rsplit(":", 1)[1]: r.reason for r in got.rejects}
    assert set(reasons) == {"2", "3", "4", "5", "6", "8", "9"}  # line 7 is blank
    assert reasons["2"].startswith("malformed JSON")
    assert reasons["3"].startswith("not UTF-8")
    assert "required field 'model' is missing" in reasons["4"]
    assert "field 'latency_s'" in reasons["5"] and "expected a number" in reasons["5"]
    assert "expected a JSON object, got list" in reasons["6"]
    assert "duplicate record id '1' (first seen at" in reasons["8"]
    assert "field 'timestamp'" in reasons["9"] and "ISO-8601" in reasons["9"]
    assert all(r.location.startswith(str(path)) for r in got.rejects)


def test_gzip_and_globs(tmp_path: Path, ctx: RunContext) -> None:
    with gzip.open(tmp_path / "part1.jsonl.gz", "wt") as fh:
        fh.write(json.dumps({"id": "g1", "output": "x"}) + "\n")
    _write(tmp_path / "part2.jsonl", [json.dumps({"id": "p2", "output": "y"})])
    cfg = JsonlSourceConfig(path=str(tmp_path / "part*"), record_id="id")
    table = read_all(JsonlSource("s", cfg, ctx))
    assert sorted(table.column("record_id").to_pylist()) == ["g1", "p2"]


def test_batches_split_and_ids_stay_unique_across_them(tmp_path: Path, ctx: RunContext) -> None:
    lines = [json.dumps({"id": str(i % 7), "output": "o"}) for i in range(20)]
    cfg = JsonlSourceConfig(path=str(_write(tmp_path / "a.jsonl", lines)), record_id="id",
                           batch_size=3)
    got = read(JsonlSource("s", cfg, ctx))
    assert len(got.batches) > 2
    assert sum(t.num_rows for t in got.batches) == 7 and len(got.rejects) == 13


def test_configuration_errors(tmp_path: Path, ctx: RunContext) -> None:
    with pytest.raises(SourceError, match="no JSONL file matches"):
        JsonlSource("s", JsonlSourceConfig(path=str(tmp_path / "none*.jsonl")), ctx)
    path = _write(tmp_path / "a.jsonl", ["{}"])
    with pytest.raises(ConfigError, match="'outptu' is not a record column"):
        list(JsonlSource("s", JsonlSourceConfig(path=str(path), fields={"outptu": "x"}),
                         ctx).read())


def test_fingerprint_changes_with_content(tmp_path: Path, ctx: RunContext) -> None:
    path = _write(tmp_path / "a.jsonl", ['{"output": "a"}'])
    before = JsonlSource("s", JsonlSourceConfig(path=str(path)), ctx).fingerprint()
    _write(path, ['{"output": "b"}'])
    after = JsonlSource("s", JsonlSourceConfig(path=str(path)), ctx).fingerprint()
    assert before != after and before[str(path)]["bytes"] == 16


def test_imported_label_only_score_and_empty_score(tmp_path: Path, ctx: RunContext) -> None:
    lines = [json.dumps({"id": "a", "output": "x",
                         "scores": [{"name": "Tone", "value": None, "label": "polite"}]}),
             json.dumps({"id": "b", "output": "y", "scores": [{"name": "Tone"}]})]
    cfg = JsonlSourceConfig(path=str(_write(tmp_path / "s.jsonl", lines)), record_id="id",
                           scores_list="scores")
    got = read(JsonlSource("s", cfg, ctx))
    assert got.table.column("record_id").to_pylist() == ["a"]
    (imported,) = got.imported
    assert imported.select(["record_id", "judge", "label", "value"]).to_pylist() == \
        [{"record_id": "a", "judge": "Tone", "label": "polite", "value": None}]
    assert "neither a value nor a label" in got.rejects[0].reason


def test_deep_paths_walk_lists_and_json_text(tmp_path: Path, ctx: RunContext) -> None:
    rows = [{"id": "a", "messages": [{"content": "q1"}, {"content": "a1"}]},
            {"id": "b", "messages": '[{"content": "q2"}, {"content": "a2"}]'},
            {"id": "c", "messages": [{"content": "only"}]},
            {"id": "d", "messages": {"1": {"content": "not a list"}}}]
    path = _write(tmp_path / "a.jsonl", [json.dumps(r) for r in rows])
    cfg = JsonlSourceConfig(path=str(path), record_id="id",
                           fields={"input": "messages.0.content", "output": "messages.1.content"})
    got = read_all(JsonlSource("s", cfg, ctx)).to_pylist()
    assert [(r["input"], r["output"]) for r in got] == [("q1", "a1"), ("q2", "a2"),
                                                        ("only", None), (None, None)]


def _read(path: Path, ctx: RunContext, **options: Any) -> tuple[list[dict[str, Any]],
                                                                list[dict[str, Any]],
                                                                list[dict[str, Any]]]:
    """Records, rejects (in file order) and imported judgments of one read."""
    cfg = JsonlSourceConfig(path=str(path), **options)
    got = read(JsonlSource("s", cfg, ctx))
    records = got.table.to_pylist()
    rejects = sorted(got.reject_rows, key=lambda r: int(r["location"].rsplit(":", 1)[1]))
    imported = got.scores
    return records, rejects, imported


def _spy_typed(monkeypatch: pytest.MonkeyPatch) -> list[bool]:
    """What each chunk's ``add_typed`` answered (True: decoded at once)."""
    import evalkit.sources._mapping as mapping

    answers: list[bool] = []
    add_typed = mapping.RecordBuilder.add_typed
    monkeypatch.setattr(mapping.RecordBuilder, "add_typed",
                        lambda self, *a: answers.append(add_typed(self, *a)) or answers[-1])
    return answers


def _both_ways(path: Path, ctx: RunContext, monkeypatch: pytest.MonkeyPatch,
               **options: Any) -> tuple[tuple[list[dict[str, Any]], list[dict[str, Any]],
                                              list[dict[str, Any]]], list[bool]]:
    """A read as it happens (what each chunk's ``add_typed`` answered beside it), checked
    equal to a read that parses every line on its own, and to the plain reference reader
    (the rule: every speed mechanic gives what the plain reader gives)."""
    import evalkit.sources._mapping as mapping
    from tests.reliability.readers import read_jsonl_checked

    with monkeypatch.context() as patch:
        spied = _spy_typed(patch)
        fast = _read(path, ctx, **options)
        typed = list(spied)
        patch.setattr(mapping, "_typed_plan", lambda paths: None)  # line by line only
        assert fast == _read(path, ctx, **options)
    read_jsonl_checked(path, path.parent, **options)
    return fast, typed


# rows of every shape the typed decoding must map as parsing line by line does
SHAPES = [
    {"id": "a", "model": "m", "usage": {"input": 1, "output": 2, "total": 3}, "team": "x",
     "output": "fine", "latency_s": 1, "timestamp": "2026-01-02T03:04:05Z"},
    {"id": "b", "model": "m", "usage": None, "team": None, "output": {"error": "boom"}},
    {"id": "c", "model": "m", "output": ["a", 1], "latency_s": "2.5", "tags": ["t"]},
    {"id": "d", "model": None, "output": "no model"},
    {"id": "e", "model": "m", "latency_s": "slow"},
    {"id": "a", "model": "m", "output": "duplicate of line 1"},
    {"id": 7, "model": "m", "input": [{"role": "user", "content": "caf\u00e9 \u2603"}]},
    {"model": "m", "output": "no id"},
    {"id": "i", "model": "m", "timestamp": 1767323045, "cost_usd": 4},
]


def test_typed_decoding_maps_exactly_as_line_by_line(tmp_path: Path, ctx: RunContext,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    """Chunks of one shape are decoded at once (msgspec structs); the records, rejects and
    their raw text are the same as parsing each line."""
    path = _write(tmp_path / "a.jsonl", [json.dumps(r) for r in SHAPES])
    (records, rejects, _), typed = _both_ways(
        path, ctx, monkeypatch, record_id="id", required=["model"],
        fields={"input_tokens": "usage.input", "output_tokens": "usage.output"})
    assert typed == [True]
    assert [r["record_id"] for r in records] == ["a", "b", "c", "7", "i"]
    assert [(r["input_tokens"], r["output_tokens"]) for r in records][:2] == [(1, 2),
                                                                              (None, None)]
    assert [r["metadata"] for r in records][:3] == ['{"team":"x"}', '{"team":null}', None]
    assert [r["location"].rsplit(":", 1)[1] for r in rejects] == ["4", "5", "6", "8"]
    assert json.loads(rejects[2]["raw"]) == SHAPES[5]


@pytest.mark.parametrize("extra_to_metadata", [True, False])
def test_keys_the_first_line_lacks_are_decoded_all_the_same(
        tmp_path: Path, ctx: RunContext, monkeypatch: pytest.MonkeyPatch,
        extra_to_metadata: bool) -> None:
    """Typed decoding first reads the mapped keys of the first line only; a later line with
    another mapped key (reference, tags) makes it read every mapped key, and the chunk maps
    as line by line does. A chunk whose lines have the first line's keys is read by the
    struct of those keys (when unmapped keys go to the metadata, as by default)."""
    import evalkit.sources._mapping as mapping

    made: list[int] = []
    typed_of = mapping._typed
    monkeypatch.setattr(mapping, "_typed", lambda plan, *a: made.append(len(plan)) or
                        typed_of(plan, *a))
    same = [{"id": f"s{i}", "model": "m", "output": f"o{i}", "team": "x"} for i in range(3)]
    path = _write(tmp_path / "same.jsonl", [json.dumps(r) for r in same])
    _, typed = _both_ways(path, ctx, monkeypatch, record_id="id",
                          extra_to_metadata=extra_to_metadata)
    # id, model, output; when unmapped keys are dropped, every line would be refused
    assert typed == [True] and (made[0] == 3 if extra_to_metadata else made[0] > 3)

    rows = [*same[:2], {"id": "r", "model": "m", "reference": "gold", "tags": ["t"],
                        "team": "y"}, same[2]]
    path = _write(tmp_path / "later.jsonl", [json.dumps(r) for r in rows])
    fast, typed = _both_ways(path, ctx, monkeypatch, record_id="id",
                             extra_to_metadata=extra_to_metadata)
    assert typed == [True]
    later = fast[0][2]
    assert (later["reference"], later["tags"]) == ("gold", ["t"])
    assert later.get("metadata") == ('{"team":"y"}' if extra_to_metadata else None)


# values of a text column read raw (the first line's input is a list): each becomes the text
# that parsing the line gives, whatever its JSON spelling
RAW_INPUTS = [
    '[{"role": "user", "content": "hi"}, {"role": "assistant", "content": "caf\\u00e9 \\/"}]',
    '"a plain prompt"', 'null', '12.50', '1e-05', '123456789012345678901234567890',
    '{"messages" : [ {"content":"x\\ny", "n": [1, 2.0, true, false, null]} ] }',
    '[]', '{}', '"\\u2603 snow"', '[[[["deep"]]]]',
]


def test_raw_text_columns_map_exactly_as_line_by_line(tmp_path: Path, ctx: RunContext,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """A text column whose first value is a list or an object is decoded raw and written
    back by orjson, value by value: the same text as parsing each line, for every spelling
    (escapes, spaces, numbers orjson reads as floats, strings, nulls, an absent key)."""

    lines = [f'{{"id": "r{i}", "model": "m", "input": {v}}}' for i, v in enumerate(RAW_INPUTS)]
    lines.append('{"id": "absent", "model": "m"}')
    path = _write(tmp_path / "a.jsonl", lines)
    fast, typed = _both_ways(path, ctx, monkeypatch, record_id="id")
    assert typed == [True]
    inputs = [r["input"] for r in fast[0]]
    assert inputs[:4] == ['[{"role":"user","content":"hi"},{"role":"assistant","content":'
                          '"caf\u00e9 /"}]', "a plain prompt", None, "12.5"]
    assert inputs[-1] is None and not fast[1]


@pytest.mark.parametrize("bad", [b"[1e400]", b'["\\ud800"]', b'["caf\xe9"]'])
def test_a_raw_value_orjson_cannot_read_sends_the_chunk_line_by_line(
        tmp_path: Path, ctx: RunContext, monkeypatch: pytest.MonkeyPatch, bad: bytes) -> None:
    """A number out of range, a lone surrogate, bytes that are not UTF-8 inside a raw value:
    the chunk is parsed line by line, which rejects that line and keeps the others."""
    lines = [b'{"id": "r%d", "model": "m", "input": %s}' % (i, v)
             for i, v in enumerate([b'[{"content": "ok"}]', bad, b'{"a": 1}'])]
    path = _write(tmp_path / "a.jsonl", lines)
    typed = _spy_typed(monkeypatch)
    records, rejects, _ = _read(path, ctx, record_id="id")
    assert typed == [False]
    assert [r["record_id"] for r in records] == ["r0", "r2"]
    assert [r["location"].rsplit(":", 1)[1] for r in rejects] == ["2"]


@pytest.mark.parametrize("odd", [
    "",  # a blank line: decoding at once would skip it and shift the line numbers
    "[1, 2]",  # not an object
    '{"id": "x", "model": "m", "new_key": 1}',  # a key the first line lacks (metadata)
    '{"id": "x", "model": "m", "usage": "{\\"input\\": 9}"}',  # JSON text under usage.input
    '{"id": "x", "model": "m", "output": "cut',  # malformed
])
def test_chunks_of_other_shapes_are_read_line_by_line(tmp_path: Path, ctx: RunContext,
                                                     monkeypatch: pytest.MonkeyPatch,
                                                     odd: str) -> None:

    lines = [json.dumps(r) for r in SHAPES[:3]] + [odd] + [json.dumps(SHAPES[8])]
    path = _write(tmp_path / "a.jsonl", lines)
    fast, typed = _both_ways(path, ctx, monkeypatch, record_id="id",
                             fields={"input_tokens": "usage.input"})
    assert typed == [False]
    ids = [r["record_id"] for r in fast[0]]
    assert ids == ["a", "b", "c", "x", "i"] if odd.endswith(("1}", "}\"}")) else \
        ids == ["a", "b", "c", "i"]


def test_worker_processes_read_what_the_run_process_reads(tmp_path: Path,
                                                          ctx: RunContext) -> None:
    """Chunks mapped on worker processes: same records, rejects (a duplicate id in a later
    chunk names the first line) and imported scores as in the run's own process."""
    lines: list[str | bytes] = []
    for i in range(40):
        row: dict[str, Any] = {"id": f"r{i % 31}", "model": "m", "output": f"o{i}",
                               "grade": i / 40}
        lines.append(json.dumps(row))
    lines[5] = '{"id": "broken'
    lines[17] = b'{"id": "x", "output": "\xff"}'
    path = _write(tmp_path / "a.jsonl", lines)
    options = {"record_id": "id", "batch_size": 4, "scores": {"grader": "grade"}}
    alone = _read(path, ctx, workers=0, **options)
    pooled = _read(path, ctx, workers=2, **options)
    assert pooled == alone
    records, rejects, imported = pooled
    assert len(records) == 30 and len(imported) == 30
    dup = next(r for r in rejects if r["location"].endswith(":32"))
    assert dup["reason"] == f"duplicate record id 'r0' (first seen at {path}:1)"
    assert [r["value"] for r in imported if r["record_id"] == "r0"] == [0.0]


def test_worker_processes_read_gzip_chunks_and_refuse_a_changed_file(tmp_path: Path,
                                                                      ctx: RunContext) -> None:
    import evalkit.sources.jsonl as jsonl

    lines = [json.dumps({"id": str(i), "output": "o"}) for i in range(10)]
    with gzip.open(tmp_path / "a.jsonl.gz", "wt") as fh:
        fh.write("\n".join(lines) + "\n")
    records, rejects, _ = _read(tmp_path / "a.jsonl.gz", ctx, workers=2, batch_size=3,
                                record_id="id")
    assert [r["record_id"] for r in records] == [str(i) for i in range(10)] and not rejects
    path = _write(tmp_path / "b.jsonl", lines)
    cfg = JsonlSourceConfig(path=str(path))
    (chunk,) = JsonlSource("s", cfg, ctx)._chunks()
    jsonl._start_worker("s", cfg, ctx)
    _write(path, lines[:5] + ["{}"] * 5)  # rewritten since the chunk was counted
    with pytest.raises(SourceError, match="changed while it was read"):
        jsonl._map_in_worker((str(path), path.name), chunk._replace(data=b""))
    _write(path, lines[:8] + [lines[8] + " " + lines[9]])  # same size, a line fewer
    with pytest.raises(SourceError, match="changed while it was read .9 lines where 10"):
        jsonl._map_in_worker((str(path), path.name), chunk._replace(data=b""))


def test_workers_default_to_none_for_small_inputs(tmp_path: Path, ctx: RunContext,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    import evalkit.sources.jsonl as jsonl

    path = _write(tmp_path / "a.jsonl", ['{"output": "a"}'])
    assert JsonlSource("s", JsonlSourceConfig(path=str(path)), ctx)._workers() == 0
    monkeypatch.setattr(jsonl, "PARALLEL_MIN_BYTES", 1)
    auto = JsonlSource("s", JsonlSourceConfig(path=str(path)), ctx)._workers()
    cores = os.cpu_count() or 1
    assert auto == (cores if cores > 1 and can_fork() else 0)
    monkeypatch.setattr(jsonl.os, "cpu_count", lambda: 1)
    assert JsonlSource("s", JsonlSourceConfig(path=str(path)), ctx)._workers() == 0
    assert JsonlSource("s", JsonlSourceConfig(path=str(path), workers=3), ctx)._workers() == 3
    with pytest.raises(ValueError, match="workers: -1 is negative"):
        JsonlSourceConfig(path=str(path), workers=-1).validate()


@pytest.mark.skipif(sys.platform != "linux", reason="workers are forked on Linux")
def test_workers_run_below_the_run_priority(tmp_path: Path, ctx: RunContext) -> None:
    """A JSONL worker lowers its own priority as it starts, so the run's process, which
    filters, judges and writes, comes first; the run's own priority is untouched."""
    import multiprocessing

    import evalkit.sources.jsonl as jsonl
    from evalkit._fork import WORKER_NICENESS

    path = _write(tmp_path / "a.jsonl", ['{"output": "a"}'])
    mine = os.nice(0)
    with multiprocessing.get_context("fork").Pool(
            1, initializer=jsonl._start_worker,
            initargs=("s", JsonlSourceConfig(path=str(path)), ctx)) as pool:
        assert pool.apply(os.nice, (0,)) == min(19, mine + WORKER_NICENESS)
    assert os.nice(0) == mine


@pytest.mark.parametrize("batch_size", [1, 3, 50_000])
@pytest.mark.parametrize("trailing_newline", [True, False])
def test_chunks_hold_whole_lines_and_number_them(tmp_path: Path, ctx: RunContext,
                                                 batch_size: int,
                                                 trailing_newline: bool) -> None:
    data = b"".join(b'{"n": %d, "pad": "%s"}\n' % (i, b"x" * (i % 50)) for i in range(2000))
    data = data if trailing_newline else data[:-1]
    (tmp_path / "a.jsonl").write_bytes(data)
    src = JsonlSource("s", JsonlSourceConfig(path=str(tmp_path / "a.jsonl"),
                                             batch_size=batch_size), ctx)
    chunks = list(src._chunks())
    assert b"".join(c.data for c in chunks) == data
    assert all(data[c.offset:c.offset + c.size] == c.data for c in chunks)  # what workers read
    assert all(0 < c.lines <= batch_size for c in chunks)
    assert [c.first for c in chunks] == \
        [1 + sum(c.lines for c in chunks[:i]) for i in range(len(chunks))]
    for c in chunks:  # the first line of each chunk is the line its number says
        assert json.loads(c.data.split(b"\n")[0])["n"] == c.first - 1
    assert len(chunks) == -(-2000 // batch_size)  # full batches: the file fits one read


def test_reads_follow_the_batch_size_in_bytes(tmp_path: Path, ctx: RunContext,
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    """After the first read, each asks for about batch_size lines' bytes: blocks are rarely
    cut and chunks stay close to batch_size lines."""
    import evalkit.sources.jsonl as jsonl

    monkeypatch.setattr(jsonl, "FIRST_READ", 4096)
    data = b"".join(b'{"n": %d, "pad": "%s"}\n' % (i, b"x" * (i % 50)) for i in range(20_000))
    (tmp_path / "a.jsonl").write_bytes(data)
    src = JsonlSource("s", JsonlSourceConfig(path=str(tmp_path / "a.jsonl"),
                                             batch_size=1000), ctx)
    sizes = [c.lines for c in src._chunks()]
    assert sum(sizes) == 20_000 and max(sizes) <= 1000
    assert min(sizes[1:-1]) > 800 and len(sizes) < 30


def test_integers_beyond_64_bits_are_rejected_or_kept_as_text(tmp_path: Path,
                                                              ctx: RunContext) -> None:
    big = 10**30
    rows = [{"id": "a", "input_tokens": big}, {"id": "b", "output": {"n": big}},
            {"id": "c", "input_tokens": str(big)}]
    path = _write(tmp_path / "a.jsonl", [json.dumps(r) for r in rows])
    records, rejects, _ = _read(path, ctx, record_id="id")
    assert [r["record_id"] for r in records] == ["b"]
    assert json.loads(records[0]["output"])["n"] == pytest.approx(big)
    assert all("out of the 64-bit range" in r["reason"] for r in rejects) and len(rejects) == 2


def test_duplicates_across_chunks_and_files_name_the_first_line(tmp_path: Path,
                                                                ctx: RunContext) -> None:
    """Ids are checked across chunks and files: each duplicate names where its id was first
    met, also for ids first met after an earlier duplicate turned up."""
    _write(tmp_path / "a.jsonl", [json.dumps({"id": str(i)}) for i in range(6)])
    b = [str(i) for i in (10, 11, 3, 12, 13, 14, 12, 5, 15)]
    _write(tmp_path / "b.jsonl", [json.dumps({"id": i}) for i in b])
    records, rejects, _ = _read(tmp_path / "*.jsonl", ctx, record_id="id", batch_size=2)
    assert [r["record_id"] for r in records] == \
        ["0", "1", "2", "3", "4", "5", "10", "11", "12", "13", "14", "15"]
    reasons = {r["location"]: r["reason"] for r in rejects}
    a, bb = tmp_path / "a.jsonl", tmp_path / "b.jsonl"
    assert reasons == {f"{bb}:3": f"duplicate record id '3' (first seen at {a}:4)",
                       f"{bb}:7": f"duplicate record id '12' (first seen at {bb}:4)",
                       f"{bb}:8": f"duplicate record id '5' (first seen at {a}:6)"}


def test_a_value_that_is_not_utf8_past_the_first_line_is_a_reject(tmp_path: Path,
                                                                  ctx: RunContext) -> None:
    """Decoding a chunk at once meets the bad bytes as a UnicodeDecodeError (not a msgspec
    error): the chunk goes line by line and the line becomes a reject (it crashed the read)."""
    path = _write(tmp_path / "a.jsonl", ['{"id": "a", "output": "ok"}',
                                         b'{"id": "b", "output": "bad \xff"}',
                                         '{"id": "c", "output": "ok"}'])
    for workers in (0, 2):
        records, rejects, _ = _read(path, ctx, record_id="id", workers=workers)
        assert [r["record_id"] for r in records] == ["a", "c"]
        assert [r["location"] for r in rejects] == [f"{path}:2"]
        assert rejects[0]["reason"].startswith("not UTF-8")


@pytest.mark.parametrize("values", [
    ["answer", "x", None, "é ünï ✓"],  # None: the row lacks the key
    ["say \"hi\"", "back\\slash", "tab\there", "nl\n"],  # escaped by orjson: general path
    ["a", 5, "b", "c"],  # a number among strings: general path
    ["a", "json-null", "b", "c"],  # a null is kept as {"k":null}
])
@pytest.mark.parametrize("key", ["task", 'odd "key" é'])
def test_the_one_extra_key_becomes_the_same_metadata_text_on_every_path(
        tmp_path: Path, ctx: RunContext, values: list[Any], key: str) -> None:
    """The metadata text of one extra key is {"key":value} in orjson's compact form, whether
    Arrow joins it (string values) or orjson dumps a dict per row."""
    import orjson

    rows = []
    for i, v in enumerate(values):
        row: dict[str, Any] = {"id": str(i), "output": "o"}
        if v is not None:
            row[key] = None if v == "json-null" else v
        rows.append(row)
    path = _write(tmp_path / "a.jsonl", [json.dumps(r) for r in rows])
    records, rejects, _ = _read(path, ctx, record_id="id")
    want = [None if v is None else orjson.dumps({key: None if v == "json-null" else v}).decode()
            for v in values]
    assert [r["metadata"] for r in records] == want and not rejects


def test_worker_chunks_counted_where_read_give_what_the_run_process_reads(
        tmp_path: Path, ctx: RunContext, monkeypatch: pytest.MonkeyPatch) -> None:
    """With workers, a block of a plain file that needs no cut is counted where it was read
    and sent without its bytes; its duplicates (against earlier chunks) are rejected with the
    line read back from the file: the same records and rejects as without workers."""
    import evalkit.sources.jsonl as jsonl

    lines: list[str | bytes] = [json.dumps({"id": f"r{i % 23}", "output": "o" * (i % 7)})
                                for i in range(60)]
    lines[9] = '{"id": "broken'
    path = _write(tmp_path / "a.jsonl", lines)
    monkeypatch.setattr(jsonl, "FIRST_READ", 120)
    chunks = list(JsonlSource("s", JsonlSourceConfig(path=str(path), batch_size=8),
                              ctx)._chunks(with_data=False))
    assert sum(not c.data for c in chunks) >= len(chunks) // 2 >= 3
    assert [c.first for c in chunks] == [1] + [sum(c.lines for c in chunks[:k]) + 1
                                             for k in range(1, len(chunks))]
    assert sum(c.lines for c in chunks) == 60
    read_back = []
    real = jsonl._chunk_bytes
    monkeypatch.setattr(jsonl, "_chunk_bytes",
                        lambda p, c: read_back.append(not c.data) or real(p, c))
    options = {"record_id": "id", "batch_size": 8}
    pooled = _read(path, ctx, workers=2, **options)
    assert any(read_back)  # a duplicate's line was read back from the file
    assert pooled == _read(path, ctx, workers=0, **options)
    records, rejects, _ = pooled
    assert len(records) == 23
    dup = next(r for r in rejects if r["location"].endswith(":60"))
    assert dup["reason"] == f"duplicate record id 'r13' (first seen at {path}:14)"
    assert json.loads(dup["raw"]) == json.loads(lines[59])


@pytest.mark.parametrize("workers", [0, 2])
def test_the_source_says_whether_it_parses_beside_the_run(tmp_path: Path, ctx: RunContext,
                                                           workers: int) -> None:
    """``parses_beside`` (what lets the runner judge beside the run's thread) is known once
    the read starts: true when worker processes map the lines."""
    path = _write(tmp_path / "a.jsonl", [json.dumps({"id": str(i)}) for i in range(5)])
    source = JsonlSource("s", JsonlSourceConfig(path=str(path), workers=workers), ctx)
    assert source.parses_beside is False
    batches = source.read()
    next(batches)
    assert source.parses_beside is bool(workers)
    batches.close()


@pytest.mark.parametrize("piece", [1, 90, 1 << 20])
def test_pieces_are_whole_lines_with_their_counts_and_first_lines(monkeypatch, piece: int):

    monkeypatch.setattr(_pieces, "PIECE_BYTES", piece)
    for data in (b'{"a": 1}\n\n{"b": 22}\n' * 7, b'{"a": 1}\n' * 9 + b'{"end": 0}', b"{}\n"):
        lines = data.count(b"\n") + (not data.endswith(b"\n"))
        pieces = list(_pieces.pieces(data, 5))
        assert b"".join(p for p, _, _ in pieces) == data
        assert all(p.endswith(b"\n") for p, _, _ in pieces[:-1])
        assert [n for _, n, _ in pieces] == [p.count(b"\n") + (not p.endswith(b"\n"))
                                             for p, _, _ in pieces]
        assert [f for _, _, f in pieces] == [5 + sum(n for _, n, _ in pieces[:k])
                                             for k in range(len(pieces))]
        # each cut is at the first line end at or past PIECE_BYTES: one line a piece at 1
        assert all(len(p) >= piece for p, _, _ in pieces[:-1])
        if piece >= len(data) or piece == 1:
            assert len(pieces) == (1 if piece >= len(data) else lines)


@pytest.mark.parametrize("scores", [True, False])  # (imported scores: line by line only)
def test_a_chunk_mapped_in_pieces_gives_what_one_piece_gives(tmp_path: Path, ctx: RunContext,
                                                             monkeypatch, scores: bool) -> None:
    """Pieces of a few lines: the same records (a column some pieces lack included), rejects,
    duplicates across pieces, imported scores and kept lines as the chunk in one piece; the
    table comes back as one chunk per column."""
    import evalkit.sources.jsonl as jsonl

    rows: list[str | bytes] = []
    for i in range(60):
        row: dict[str, Any] = {"id": f"r{i % 47}", "model": "m", "output": f"o{i}",
                               "grade": i / 60}
        if i % 9 == 0:
            row["reference"] = f"gold {i}"
        rows.append(json.dumps(row))
    rows[5], rows[17] = '{"id": "broken', b'{"id": "x", "output": "\xff"}'
    rows[30] = json.dumps({"id": "other", "input": [{"role": "user", "content": "q"}]})
    path = _write(tmp_path / "a.jsonl", rows)
    options: dict[str, Any] = {"record_id": "id"}
    if scores:
        options["scores"] = {"grader": "grade"}
    whole = _read(path, ctx, **options)
    cfg = JsonlSourceConfig(path=str(path), **options)
    (chunk,) = JsonlSource("s", cfg, ctx)._chunks()
    monkeypatch.setattr(_pieces, "PIECE_BYTES", 300)
    typed = _spy_typed(monkeypatch)
    table, lines, rejects, imported = jsonl.map_chunk("s", cfg, (str(path), "a.jsonl"), chunk)
    assert len(typed) > 10 and (not any(typed) if scores else 0 < sum(typed) < len(typed))
    assert all(col.num_chunks == 1 for col in table.columns)
    assert isinstance(lines, list) and len(lines) == table.num_rows == len(whole[0])
    assert _read(path, ctx, **options) == whole
    records, rejected, imported_scores = whole
    assert len(records) == 46 and len(imported_scores) == (46 - 1 if scores else 0)
    assert [r["location"].rsplit(":", 1)[1] for r in rejected][:2] == ["6", "18"]
    assert sum("duplicate record id" in r["reason"] for r in rejected) == 12
    assert [r["reference"] for r in records if r.get("reference")][:2] == ["gold 0", "gold 9"]


def test_message_lists_become_the_text_a_judge_reads(tmp_path: Path, ctx: RunContext) -> None:
    """An OpenAI message list mapped to input (or output) in fields gives the last user
    message (the assistant's text), the list kept in metadata; chat_messages: raw keeps the
    JSON, and so does a column read by its own name (the deterministic judges read lists)."""
    messages = [{"role": "system", "content": "Be brief."},
                {"role": "user", "content": "Hi"},
                {"role": "assistant", "content": "Hello! How can I help?"},
                {"role": "user", "content": [{"type": "text", "text": "Refund order 7?"}]}]
    reply = {"role": "assistant", "content": "Order 7 is refunded.", "tool_calls": None}
    rows = [{"id": "a", "messages": messages, "choice": {"message": reply}, "team": "x"},
            {"id": "b", "messages": "plain question", "choice": {"message": "plain answer"}}]
    path = _write(tmp_path / "a.jsonl", [json.dumps(r) for r in rows])
    fields = {"input": "messages", "output": "choice.message"}
    cfg = JsonlSourceConfig(path=str(path), record_id="id", fields=fields)
    first, second = read_all(JsonlSource("s", cfg, ctx)).to_pylist()
    assert (first["input"], first["output"]) == ("Refund order 7?", "Order 7 is refunded.")
    meta = json.loads(first["metadata"])
    assert meta["input_messages"] == messages and meta["output_messages"] == [reply]
    assert meta["team"] == "x"
    assert (second["input"], second["output"]) == ("plain question", "plain answer")
    raw = JsonlSourceConfig(path=str(path), record_id="id", fields=fields,
                            chat_messages="raw")
    first = read_all(JsonlSource("s", raw, ctx)).to_pylist()[0]
    assert json.loads(first["input"]) == messages
    unmapped = _write(tmp_path / "b.jsonl", [json.dumps({"id": "c", "input": messages})])
    (row,) = read_all(JsonlSource("s", JsonlSourceConfig(path=str(unmapped)), ctx)).to_pylist()
    assert json.loads(row["input"]) == messages


def test_a_batch_of_one_conversation_is_that_conversation(tmp_path: Path,
                                                          ctx: RunContext) -> None:
    """LangChain logs an LLM run's messages as a batch: a list holding one message list
    (LangSmith's ``inputs.messages``, here as JSON text as a CSV export has it), its messages
    plain or serialized by LangChain. Its last user message is the input; a batch of two
    conversations is left as it is."""
    one = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Refund?"}]
    serialized = [{"lc": 1, "type": "constructor",
                   "id": ["langchain", "schema", "messages", "SystemMessage"],
                   "kwargs": {"content": "Be brief.", "type": "system"}},
                  {"lc": 1, "type": "constructor",
                   "id": ["langchain", "schema", "messages", "HumanMessage"],
                   "kwargs": {"content": "Refund?"}}]  # its role from the class name
    rows = [{"id": "a", "inputs": json.dumps({"messages": [one]}), "out": "Yes."},
            {"id": "b", "inputs": {"messages": [one, one]}, "out": "Yes."},
            {"id": "c", "inputs": {"messages": [serialized]}, "out": "Yes."}]
    path = _write(tmp_path / "a.jsonl", [json.dumps(r) for r in rows])
    cfg = JsonlSourceConfig(path=str(path), record_id="id",
                            fields={"input": "inputs.messages", "output": "out"})
    first, second, third = read_all(JsonlSource("s", cfg, ctx)).to_pylist()
    assert first["input"] == "Refund?"
    assert json.loads(first["metadata"])["input_messages"] == one
    assert json.loads(second["input"]) == [one, one]
    # LangChain-serialized messages (``dumpd``) read as the role/content pairs they hold
    assert third["input"] == "Refund?"
    assert json.loads(third["metadata"])["input_messages"] == one


@pytest.mark.parametrize("bad", ["NaN", "Infinity", "-inf", "1e999"])
def test_a_non_finite_number_is_a_reject_never_a_value(tmp_path: Path, ctx: RunContext,
                                                        bad: str) -> None:
    """"Infinity" as a cost made cost_per_success print inf; "NaN" a latency that no mean
    can hold. Both are a reject naming the field, and the rest of the file is read."""
    lines = [json.dumps({"id": "1", "model": "m", "latency_s": 1.0, "cost_usd": 0.1}),
             json.dumps({"id": "2", "model": "m", "latency_s": 2.0, "cost_usd": bad}),
             json.dumps({"id": "3", "model": "m", "latency_s": bad})]
    cfg = JsonlSourceConfig(path=str(_write(tmp_path / "nf.jsonl", lines)), record_id="id")
    got = read(JsonlSource("s", cfg, ctx))
    assert got.table.column("record_id").to_pylist() == ["1"]
    reasons = {r.location.rsplit(":", 1)[1]: r.reason for r in got.rejects}
    assert "field 'cost_usd'" in reasons["2"] and "finite" in reasons["2"]
    assert "field 'latency_s'" in reasons["3"] and "finite" in reasons["3"]


def test_a_json_array_line_is_a_reject_that_says_so(ctx, tmp_path):
    """A UI export written as one JSON array on one line: one reject that says what it is
    and how to make JSONL, not "expected a JSON object, got list"."""
    path = tmp_path / "export.json"
    path.write_text(json.dumps([{"id": i, "output": f"o{i}"} for i in range(12)]))
    got = read(JsonlSource("j", JsonlSourceConfig(path=str(path), workers=0), ctx))
    (reject,) = got.rejects
    assert "a JSON array of 12 objects on one line" in reject.reason
    assert "jq -c '.[]'" in reject.reason
