"""v4 pages parsed and mapped on forked worker processes: the same read as in the reader."""

from __future__ import annotations

import json
import os
import signal
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from fake_server import FakeLangfuse, Fault, _obs, parse

from evalkit.errors import SourceError
from evalkit.sources.langfuse import source as source_module
from evalkit.sources.langfuse.source import _Reader
from evalkit.sources.langfuse.workers import PagePool
from tests.sources.langfuse.conftest import _serve, make_source, odd_observations, read_all


@pytest.fixture
def fake_v4_odd(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeLangfuse]:
    """A v4 fake (values outside the spec allowed) whose pages also hold a timestamp Arrow
    does not parse, a value that fits no column and one a custom field cannot coerce."""
    t0 = parse("2026-05-01T10:00:00Z")
    naive, bad_level = odd_observations()
    confident = _obs("gen-confident-0", "trace-00002", "GENERATION", "llm-call", t0, t0, None,
                     "q", "a", 2)
    confident["metadata"] = {"confidence": "high"}  # not a number: a custom field rejects it
    # children of their trace's root span: a trace with several root observations would make
    # `read: traces` keep whichever root arrives first, which depends on timing
    for obs in (naive, bad_level, confident):
        obs["parentObservationId"] = "span-" + obs["traceId"].split("-")[1]
    for fake in _serve("v4", monkeypatch, n_traces=40, validate=False):  # _serve's teardown
        for obs in (naive, bad_level, confident):
            fake.add_observation(obs)
        yield fake


@pytest.fixture
def forking(monkeypatch: pytest.MonkeyPatch) -> None:
    """Workers even though the fake server runs on a thread of this process (the workers
    touch none of its locks)."""
    monkeypatch.setattr(source_module, "can_fork", lambda: True)


def _sorted(rows: list[dict[str, Any]]) -> list[str]:
    return sorted(json.dumps(r, default=str, sort_keys=True) for r in rows)


def _same_read(tmp_path: Path, **options: Any) -> tuple[Any, int]:
    """A read with pages mapped in the reader and one with workers: the same records,
    rejects, imported scores and stats; and how many pages the workers mapped."""
    here = read_all(tmp_path / "here", workers=0, **options)
    there = read_all(tmp_path / "there", workers=2, **options)
    assert "pages_on_workers" not in here.fingerprint["stats"]
    on_workers = there.fingerprint["stats"].pop("pages_on_workers")
    assert 0 < on_workers <= there.fingerprint["stats"]["pages"]
    key = lambda t: t.sort_by("record_id")  # noqa: E731 - streams interleave their pages
    assert key(there.records).equals(key(here.records))
    assert _sorted(there.rejects) == _sorted(here.rejects)
    assert _sorted(there.imported) == _sorted(here.imported)
    assert there.fingerprint["stats"] == here.fingerprint["stats"]
    return here, on_workers


def test_pages_mapped_on_workers_read_the_same(fake_v4_odd: FakeLangfuse, tmp_path: Path,
                                               forking: None) -> None:
    # small pages: most map whole on a worker; the ones with odd values are declined and
    # mapped in the reader, which rejects what does not map
    here, on_workers = _same_read(tmp_path, page_size=7, import_scores=False,
                                  fields={"confidence": "metadata.confidence"})
    assert on_workers < here.fingerprint["stats"]["pages"]  # one declined, at least
    rejects = {r["reason"].split(":")[0]: r["location"] for r in here.rejects}
    assert "gen-badlevel-0" in rejects["bad value"]
    assert "item" in rejects["cannot map to a record"]
    assert "gen-naive-0" in here.by_id() and "gen-confident-0" not in here.by_id()


def test_workers_with_custom_fields_and_traces(fake_v4_odd: FakeLangfuse, tmp_path: Path,
                                              forking: None) -> None:
    _same_read(tmp_path / "fields", page_size=10, import_scores=True,
               fields={"reference": "metadata.tenant", "final_output": "output.content"})
    _same_read(tmp_path / "traces", read="traces")


def test_workers_resume_an_interrupted_read(fake_v4_odd: FakeLangfuse, tmp_path: Path,
                                            forking: None) -> None:
    opts = {"page_size": 10, "shards": 1, "concurrency": 1, "max_retries": 0,
            "fields": {"confidence": "metadata.confidence"}, "import_scores": False}
    whole = read_all(tmp_path / "whole", workers=0, **opts)
    fake_v4_odd.faults.append(Fault("/api/public/v2/observations", 500, times=100, after=4))
    with pytest.raises(SourceError, match="failed after 1 attempts"):
        read_all(tmp_path / "resumed", workers=2, **opts)
    fake_v4_odd.faults.clear()
    resumed = read_all(tmp_path / "resumed", workers=2, **opts)
    assert resumed.fingerprint["resumed"] and resumed.fingerprint["complete"]
    assert resumed.records.sort_by("record_id").equals(whole.records.sort_by("record_id"))
    assert _sorted(resumed.rejects) == _sorted(whole.rejects)


def test_no_workers_when_forking_is_unsafe(fake_v4_odd: FakeLangfuse,
                                                   tmp_path: Path) -> None:
    # the fake server's thread makes this process multi-threaded: no fork
    read = read_all(tmp_path / "a", workers=2, import_scores=False)
    assert "pages_on_workers" not in read.fingerprint["stats"]


def _reader(tmp_path: Path) -> _Reader:
    source, _ = make_source(tmp_path, host="http://127.0.0.1:9", import_scores=False)
    reader = _Reader(source, lambda item: None)
    reader.columns = source_module._schema(source.config, "v4")  # as run() sets it on v4
    return reader


def _page(ids: list[str]) -> bytes:
    t0 = parse("2026-05-01T10:00:00Z")
    data = [_obs(i, "trace-1", "GENERATION", "llm-call", t0, t0, None, "q", "a", 1)
            for i in ids]
    for obs in data:  # v2 names the model providedModelName
        obs["providedModelName"] = obs.pop("model")
    return json.dumps({"data": data, "meta": {}}).encode()


def test_a_page_table_is_the_readers_own_mapping(tmp_path: Path) -> None:
    reader = _reader(tmp_path)
    body = _page(["a", "b", "c"])
    table = reader.page_table(body)
    items, columns = reader._decode(source_module._Stream(
        "rec-x", "records", "/p", {}, False, 10), body)
    assert table.equals(reader._records(items, "w", columns=columns))
    # a page read twice (a shifted listing): its records once, the rest counted
    assert reader._records([], "w", table=table).num_rows == 0
    assert reader.counts["duplicates"] == 3
    again = reader._records([], "w", table=reader.page_table(_page(["c", "d"])))
    assert again.column("record_id").to_pylist() == ["d"]
    with pytest.raises(ValueError):
        reader.page_table(b'{"data": [{"id": 1}]}')


async def _map_all(pool: PagePool, bodies: list[bytes]) -> list[pa.Table | None]:
    return [await pool.map(b) for b in bodies]


def test_the_pool_declines_what_does_not_map_and_survives_a_dead_worker(
        tmp_path: Path) -> None:
    import asyncio

    reader = _reader(tmp_path)
    pool = PagePool(1, reader.page_table)
    try:
        good, bad = _page(["a", "b"]), b'{"data": [{"id": "x", "startTime": 5}]}'
        first = asyncio.run(_map_all(pool, [good, bad, b"not json"]))
        assert first[0] is not None and first[0].equals(reader.page_table(good))
        assert first[1:] == [None, None] and (pool.pages, pool.declined) == (1, 2)
    finally:
        pool.close()
    pool = PagePool(1, reader.page_table)
    try:
        os.kill(pool._procs[0].pid, signal.SIGKILL)
        pool._procs[0].join()
        assert asyncio.run(_map_all(pool, [good, good])) == [None, None]  # mapped here
    finally:
        pool.close()


def _niceness(body: bytes) -> pa.Table:
    return pa.table({"niceness": [os.nice(0)]})


def test_workers_run_below_the_readers_priority() -> None:
    import asyncio

    from evalkit._fork import WORKER_NICENESS

    pool = PagePool(1, _niceness)
    try:
        (table,) = asyncio.run(_map_all(pool, [b"{}"]))
    finally:
        pool.close()
    assert table is not None
    assert table.column("niceness")[0].as_py() == min(19, os.nice(0) + WORKER_NICENESS)
