"""The response cache's file, set up by several processes at once (the jobs of a sweep
starting together): none of them fails with 'database is locked'."""

from __future__ import annotations

import multiprocessing
import sqlite3
from pathlib import Path

import pytest

from evalkit._fork import can_fork
from evalkit.judges.llm import _cache
from evalkit.judges.llm._cache import ResponseCache


def _use(directory: str, barrier, results) -> None:
    cache = ResponseCache(Path(directory))
    barrier.wait()  # every process opens the new file at the same moment
    try:
        cache.get("k")
        cache.put("k", "m", {"score": 1})
        results.put("ok")
    except Exception as exc:  # reported, not raised: the parent counts them
        results.put(f"{type(exc).__name__}: {exc}")


@pytest.mark.skipif(not can_fork(), reason="needs fork")
def test_processes_setting_up_one_new_cache_file_together_all_succeed(tmp_path: Path):
    """Six processes open a new cache file at once, fifteen times over (before the fix, one
    of them got 'database is locked' in about a quarter of such rounds)."""
    mp = multiprocessing.get_context("fork")
    outcomes = []
    for k in range(15):
        barrier, results = mp.Barrier(6), mp.Queue()
        procs = [mp.Process(target=_use, args=(str(tmp_path / str(k)), barrier, results))
                 for _ in range(6)]
        for p in procs:
            p.start()
        outcomes += [results.get(timeout=60) for _ in procs]
        for p in procs:
            p.join(timeout=60)
    assert outcomes == ["ok"] * 90
    assert ResponseCache(tmp_path / "0").get("k") == {"score": 1}


class _Refusing:
    """A connection that says 'database is locked' to its first statements, as SQLite does
    to one of two connections that would wait on each other."""

    def __init__(self, refusals: int, message: str = "database is locked") -> None:
        self.refusals, self.message, self.executed = refusals, message, []

    def execute(self, sql: str):
        if self.refusals:
            self.refusals -= 1
            raise sqlite3.OperationalError(self.message)
        self.executed.append(sql)


def test_set_up_tries_again_while_the_file_is_locked_and_no_longer():
    con = _Refusing(3)
    _cache._set_up(con, wait_s=5)  # type: ignore[arg-type]
    assert con.executed == ["PRAGMA journal_mode=WAL", _cache._SCHEMA]
    with pytest.raises(sqlite3.OperationalError, match="locked"):
        _cache._set_up(_Refusing(10**6), wait_s=0.05)  # type: ignore[arg-type]
    with pytest.raises(sqlite3.OperationalError, match="disk I/O"):
        _cache._set_up(_Refusing(1, "disk I/O error"), wait_s=5)  # type: ignore[arg-type]
