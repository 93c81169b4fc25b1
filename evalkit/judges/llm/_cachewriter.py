"""Storing judge answers in the response cache without holding up the event loop. A call's
answer is handed to a writer thread of the cache, which commits every answer waiting at that
moment in one transaction (a group commit) on a connection of its own, then wakes the calls
it stored. The call awaits its commit, so the guarantee of :meth:`ResponseCache.put` (the
plain version, and the tests' reference) holds: an answer a call returned is committed and
a run killed a moment later keeps it. At hundreds of calls a second the event loop no
longer stops for each commit (and for the disk, when a commit waits on it)."""

from __future__ import annotations

import asyncio
import json
import os
import queue
import sqlite3
import threading
import time
from typing import Any

from evalkit._faults import point
from evalkit.judges.llm._cache import INSERT, ResponseCache, _set_up

# answers one transaction takes at most (a commit of a few hundred small rows is ~1 ms)
GROUP_MAX = 512


class _Item:
    __slots__ = ("key", "model", "text", "created", "loop", "future")

    def __init__(self, key: str, model: str, text: str, loop: asyncio.AbstractEventLoop,
                 future: asyncio.Future[None]) -> None:
        self.key = key
        self.model = model
        self.text = text
        self.created = time.time()
        self.loop = loop
        self.future = future


class CacheWriter:
    """The writer thread of one response cache (see :func:`cache_writer`)."""

    def __init__(self, cache: ResponseCache) -> None:
        self.cache = cache
        self._queue: queue.SimpleQueue[_Item | None] = queue.SimpleQueue()
        self._thread: threading.Thread | None = None
        self._pid = 0
        self._lock = threading.Lock()

    async def put(self, key: str, model: str, value: dict[str, Any]) -> None:
        """Store (or replace) the answer for ``key``; returns once it is committed (raises
        what committing it raised)."""
        loop = asyncio.get_running_loop()
        future: asyncio.Future[None] = loop.create_future()
        self._start()
        self._queue.put(_Item(key, model, json.dumps(value, ensure_ascii=False), loop,
                              future))
        await future

    def _start(self) -> None:
        if self._thread is not None and self._pid == os.getpid() and self._thread.is_alive():
            return
        with self._lock:
            if self._thread is None or self._pid != os.getpid() or not self._thread.is_alive():
                # a forked child has no writer thread: it starts its own
                self._queue = queue.SimpleQueue()
                self._pid = os.getpid()
                self._thread = threading.Thread(target=self._run, name="evalkit-cache-writer",
                                                daemon=True)
                self._thread.start()

    def close(self) -> None:
        """Commit what is waiting, then stop the thread (a later put starts it again)."""
        with self._lock:
            thread = self._thread
            if thread is None or self._pid != os.getpid():
                return
            self._queue.put(None)
            thread.join()
            self._thread = None

    def _run(self) -> None:
        con: sqlite3.Connection | None = None
        try:
            while True:
                item = self._queue.get()
                if item is None:
                    return
                group = [item]
                while len(group) < GROUP_MAX:
                    try:
                        item = self._queue.get_nowait()
                    except queue.Empty:
                        break
                    if item is None:
                        self._queue.put(None)  # stop after this group
                        break
                    group.append(item)
                try:
                    if con is None:
                        con = self._connect()
                    with con:  # one transaction: committed together or not at all
                        con.executemany(INSERT, [(i.key, i.model, i.text, i.created)
                                                 for i in group])
                except BaseException as exc:  # handed to every call of the group
                    _settle(group, exc)
                    continue
                _settle(group, None)
        finally:
            if con is not None:
                con.close()

    def _connect(self) -> sqlite3.Connection:
        self.cache.path.parent.mkdir(parents=True, exist_ok=True)
        con = sqlite3.connect(self.cache.path, timeout=60)
        _set_up(con)
        con.execute("PRAGMA synchronous=NORMAL")
        return con


def _settle(group: list[_Item], error: BaseException | None) -> None:
    """Wake the calls of ``group``: their answers are committed (``error`` None), or not."""
    by_loop: dict[asyncio.AbstractEventLoop, list[tuple[asyncio.Future[None],
                                                       BaseException | None]]] = {}
    for item in group:
        outcome = error
        if outcome is None:
            try:
                point("response_cached")  # once per committed answer, as put() does
            except BaseException as exc:
                outcome = exc
        by_loop.setdefault(item.loop, []).append((item.future, outcome))
    for loop, outcomes in by_loop.items():
        try:
            loop.call_soon_threadsafe(_resolve, outcomes)
        except RuntimeError:  # the loop is closed: nobody waits any more
            pass


def _resolve(outcomes: list[tuple[asyncio.Future[None], BaseException | None]]) -> None:
    for future, error in outcomes:
        if future.done():  # the call was cancelled meanwhile
            continue
        if error is None:
            future.set_result(None)
        else:
            future.set_exception(error)


_WRITERS_LOCK = threading.Lock()


def cache_writer(cache: ResponseCache) -> CacheWriter:
    """The writer of ``cache`` (one per cache, made on first use)."""
    if cache.writer is None:
        with _WRITERS_LOCK:
            if cache.writer is None:
                cache.writer = CacheWriter(cache)
    return cache.writer
