"""The engine stores its answers through the cache's writer thread (group commits off the
event loop), checked against the plain ``ResponseCache.put``: the same rows, each committed
before its call returns, a failure handed to the call, the kill point once per answer, and a
call's slot held until its answer is stored."""

from __future__ import annotations

import asyncio
import sqlite3
import threading
import time
from pathlib import Path

import pytest
from llm_helpers import judge, make, records

from evalkit.judges.llm import _cachewriter
from evalkit.judges.llm._cache import CACHE_FILE, ResponseCache
from evalkit.judges.llm._cachewriter import cache_writer
from evalkit.judges.llm.hallucination import HallucinationLlmJudge

ANSWERS = [(f"k{i:04d}", f"model-{i % 3}", {"text": f'{{"score": {i % 2}}}', "logprobs": None,
                                             "input_tokens": i, "output_tokens": None,
                                             "note": "é ✓"})
           for i in range(300)]


def _rows(directory: Path) -> list[tuple[str, str, str]]:
    con = sqlite3.connect(directory / CACHE_FILE)
    try:
        return con.execute("SELECT key, model, value FROM responses ORDER BY key").fetchall()
    finally:
        con.close()


def test_the_writer_stores_what_put_stores(tmp_path: Path):
    """300 answers given at once (so in groups): the rows are those of the plain put, and each
    is committed (another connection reads it) when its call's await returns."""
    plain = ResponseCache(tmp_path / "plain")
    for key, model, value in ANSWERS:
        plain.put(key, model, value)
    fast = ResponseCache(tmp_path / "fast")
    seen_after: list[bool] = []

    async def store(key: str, model: str, value: dict) -> None:
        await cache_writer(fast).put(key, model, value)
        con = sqlite3.connect(tmp_path / "fast" / CACHE_FILE)
        try:
            seen_after.append(con.execute("SELECT count(*) FROM responses WHERE key = ?",
                                          (key,)).fetchone()[0] == 1)
        finally:
            con.close()

    async def main() -> None:
        await asyncio.gather(*(store(*answer) for answer in ANSWERS))

    asyncio.run(main())
    assert seen_after == [True] * len(ANSWERS)
    assert _rows(tmp_path / "fast") == _rows(tmp_path / "plain")
    assert fast.get("k0007") == plain.get("k0007") == ANSWERS[7][2]
    fast.close()
    plain.close()


def test_a_failed_commit_reaches_the_call_and_the_writer_goes_on(tmp_path: Path):
    blocked = tmp_path / "cache"
    blocked.write_text("a file where the cache directory should be")
    cache = ResponseCache(blocked)

    async def put(key: str) -> None:
        await cache_writer(cache).put(key, "m", {"text": "x"})

    with pytest.raises(OSError):
        asyncio.run(put("a"))
    blocked.unlink()
    asyncio.run(put("b"))  # a new event loop, the same writer thread
    assert cache.get("b") == {"text": "x"} and cache.get("a") is None
    cache.close()


def test_the_kill_point_is_reached_once_per_stored_answer(tmp_path: Path, monkeypatch):
    """``response_cached`` counts answers, not commits: a failure injected at the 5th of 12
    answers given together reaches that call alone; the others are stored."""
    reached: list[str] = []

    def point(name: str) -> None:
        reached.append(name)
        if len(reached) == 5:
            raise RuntimeError("injected")

    monkeypatch.setattr(_cachewriter, "point", point)
    cache = ResponseCache(tmp_path)

    async def main() -> list[BaseException | None]:
        return await asyncio.gather(*(cache_writer(cache).put(f"k{i}", "m", {"i": i})
                                      for i in range(12)), return_exceptions=True)

    outcomes = asyncio.run(main())
    assert reached == ["response_cached"] * 12
    assert [type(o).__name__ for o in outcomes].count("RuntimeError") == 1
    assert [o for o in outcomes if o is not None][0].args == ("injected",)
    assert len(_rows(tmp_path)) == 12
    cache.close()


def test_close_commits_and_stops_the_writer_thread(tmp_path: Path):
    cache = ResponseCache(tmp_path)
    asyncio.run(cache_writer(cache).put("k", "m", {"v": 1}))
    assert any(t.name == "evalkit-cache-writer" for t in threading.enumerate())
    cache.close()
    assert not any(t.name == "evalkit-cache-writer" and t.is_alive()
                   for t in threading.enumerate())
    asyncio.run(cache_writer(cache).put("k2", "m", {"v": 2}))  # starts again
    assert cache.get("k2") == {"v": 2}
    cache.close()


def test_a_call_holds_its_slot_until_its_answer_is_stored(fake_llm, ctx, monkeypatch):
    """At concurrency 1, the second call starts only after the first answer is committed:
    a run killed at any moment has at most ``concurrency`` answers it was given and lost."""
    stored: list[float] = []

    def point(name: str) -> None:  # in the writer thread, after the commit
        time.sleep(0.2)
        stored.append(time.monotonic())

    monkeypatch.setattr(_cachewriter, "point", point)
    j = make(HallucinationLlmJudge, ctx, fake_llm, concurrency=1)
    rows = judge(j, records({"input": "q1", "output": "a1"}, {"input": "q2", "output": "a2"}))
    assert [r["status"] for r in rows] == ["ok", "ok"]
    asked = [r["time"] for r in fake_llm.requests]
    assert len(asked) == 2 and len(stored) == 2
    assert asked[1] >= stored[0]
