"""How JSONL worker processes hand their tables back: as Arrow IPC files in a directory the read
creates (in /dev/shm where there is one), mapped by the run's process and unlinked at once. The
tables that arrive are the ones mapped, and no file or directory is left behind, after a normal
read or a failed one."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

import evalkit.sources.jsonl as jsonl
from evalkit.context import RunContext
from evalkit.errors import SourceError
from evalkit.sources import _transfer
from evalkit.sources.jsonl import JsonlSource, JsonlSourceConfig

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="workers are forked on Linux")


def _lines(n: int) -> bytes:
    return b"".join(json.dumps({"id": f"r{i}", "model": "m", "input": [{"role": "user",
                                "content": f"q{i}"}], "usage": {"input": i}, "team": "t"}
                               ).encode() + b"\n" for i in range(n))


@pytest.fixture
def dirs(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The transfer directories the reads create (recorded, then checked by the test)."""
    made: list[str] = []
    make = jsonl.transfer_dir

    def spy() -> str:
        made.append(make())
        return made[-1]

    monkeypatch.setattr(jsonl, "transfer_dir", spy)
    return made


@pytest.fixture
def taken(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The files the run's process took tables from."""
    paths: list[str] = []
    take = jsonl.take

    def spy(path: str) -> pa.Table:
        paths.append(path)
        return take(path)

    monkeypatch.setattr(jsonl, "take", spy)
    return paths


def _source(path: Path, ctx: RunContext, **options: Any) -> JsonlSource:
    cfg = JsonlSourceConfig(path=str(path), record_id="id",
                            fields={"input_tokens": "usage.input"}, **options)
    return JsonlSource("s", cfg, ctx)


def test_tables_arrive_through_files_equal_to_the_mapped_ones(tmp_path: Path, ctx: RunContext,
                                                              dirs: list[str],
                                                              taken: list[str]) -> None:
    path = tmp_path / "a.jsonl"
    path.write_bytes(_lines(1000))
    pooled = list(_source(path, ctx, workers=2, batch_size=100).read())
    alone = list(_source(path, ctx, workers=0, batch_size=100).read())
    assert len(taken) == 10 and all(p.startswith(dirs[0] + os.sep) for p in taken)
    assert len(pooled) == len(alone) == 10
    for got, want in zip(pooled, alone, strict=True):
        assert got.equals(want, check_metadata=True)
    if os.path.isdir("/dev/shm") and os.access("/dev/shm", os.W_OK | os.X_OK):
        assert dirs[0].startswith("/dev/shm/")
    assert len(dirs) == 1 and not os.path.exists(dirs[0])


def test_a_read_stopped_early_leaves_nothing_behind(tmp_path: Path, ctx: RunContext,
                                                    dirs: list[str]) -> None:
    """Chunks mapped ahead and never taken have their files removed with the directory."""
    path = tmp_path / "a.jsonl"
    path.write_bytes(_lines(1000))
    reader = _source(path, ctx, workers=2, batch_size=50).read()
    first = next(reader)
    assert first.num_rows == 50 and os.path.isdir(dirs[0])
    reader.close()
    assert not os.path.exists(dirs[0])
    assert first.column("record_id")[49].as_py() == "r49"  # still readable: files unlinked


def test_a_failed_worker_leaves_nothing_behind(tmp_path: Path, ctx: RunContext,
                                               dirs: list[str],
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "a.jsonl"
    path.write_bytes(_lines(1000))
    mapped = jsonl.map_chunk

    def failing(name: str, config: Any, ref: Any, chunk: jsonl.Chunk) -> jsonl.Mapped:
        if chunk.first > 500:  # (set before the workers are forked: they run this)
            raise SourceError("a worker failed")
        return mapped(name, config, ref, chunk)

    monkeypatch.setattr(jsonl, "map_chunk", failing)
    # a thread another test left running in this process makes the source read in-process
    # (no fork beside threads) and the workers under test would never start
    monkeypatch.setattr(jsonl, "can_fork", lambda: True)
    monkeypatch.setattr(jsonl, "start_method", lambda: "fork")
    with pytest.raises(SourceError, match="a worker failed"):
        list(_source(path, ctx, workers=2, batch_size=50).read())
    assert len(dirs) == 1 and not os.path.exists(dirs[0])


def test_put_and_take_round_trip_and_fall_back_to_the_pipe(tmp_path: Path) -> None:
    table = pa.table({"a": ["x", None, "z"], "b": [1.5, None, 3.0],
                      "c": pa.array([[], ["p"], None], pa.list_(pa.string()))})
    sent = _transfer.put(table, str(tmp_path / "t.arrow"))
    assert sent == str(tmp_path / "t.arrow")
    got = _transfer.take(sent)
    assert got.equals(table) and os.listdir(tmp_path) == []
    # a file that cannot be written (here: no such directory): the table goes itself
    assert _transfer.put(table, str(tmp_path / "gone" / "t.arrow")) is table
    assert os.listdir(tmp_path) == []


def test_kept_lines_travel_as_a_range_when_no_line_is_left_out(tmp_path: Path,
                                                              ctx: RunContext) -> None:
    data = _lines(5)
    ref = (str(tmp_path / "a.jsonl"), "a.jsonl")
    cfg = JsonlSourceConfig(path=ref[0], record_id="id")
    _, kept, _, _ = jsonl.map_chunk("s", cfg, ref, jsonl.Chunk(0, 7, 5, 0, data, len(data)))
    assert kept == range(7, 12)
    bad = data.replace(b'"id": "r2"', b'"id": null')
    _, kept, rejects, _ = jsonl.map_chunk("s", cfg, ref, jsonl.Chunk(0, 7, 5, 0, bad, len(bad)))
    assert kept == [7, 8, 10, 11] and [r.location for r in rejects] == [f"{ref[0]}:9"]
