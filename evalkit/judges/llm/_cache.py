"""The judge response cache: one SQLite file in WAL mode under the run's cache directory,
shared by every process of a sweep (WAL lets readers and writers proceed together; a busy
timeout serialises concurrent writers). litellm's own disk cache is not used: in a plain
install it imports proxy-only packages on a cache hit and crashes."""

from __future__ import annotations

import hashlib
import json
import sqlite3
import threading
import time
from pathlib import Path
from typing import Any

from evalkit._faults import point

CACHE_FILE = "llm_responses.sqlite"
_SCHEMA = ("CREATE TABLE IF NOT EXISTS responses (key TEXT PRIMARY KEY, model TEXT NOT NULL, "
           "value TEXT NOT NULL, created REAL NOT NULL)")
INSERT = "INSERT OR REPLACE INTO responses (key, model, value, created) VALUES (?, ?, ?, ?)"


def cache_key(model: str, api_base: str | None, messages: list[dict[str, Any]],
              params: dict[str, Any]) -> str:
    """A digest of everything that determines the answer: model, endpoint, messages and
    request parameters (never credentials)."""
    payload = json.dumps([model, api_base, messages, params], sort_keys=True,
                         ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(payload.encode()).hexdigest()


class ResponseCache:
    """Completed, parseable judge answers by :func:`cache_key`. Each answer is committed as
    soon as it is stored: a run killed a moment later keeps every answer it was given, and
    its resume asks for none of them again. A commit costs ~0.2 ms (WAL with
    ``synchronous=NORMAL``: no fsync per commit, and a committed answer survives the
    process, though not a power cut), small beside the call it saves, but not beside an
    event loop making thousands of calls a second: the engine's calls commit theirs in
    groups on a writer thread (``_cachewriter.py``)."""

    def __init__(self, directory: Path) -> None:
        self.path = Path(directory) / CACHE_FILE
        self._con: sqlite3.Connection | None = None
        self._lock = threading.Lock()
        self.writer: Any = None  # the CacheWriter of the engine's calls (_cachewriter.py)

    def _connect(self) -> sqlite3.Connection:
        if self._con is None:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            con = sqlite3.connect(self.path, timeout=60, isolation_level=None,
                                  check_same_thread=False)
            _set_up(con)
            con.execute("PRAGMA synchronous=NORMAL")
            self._con = con
        return self._con

    def get(self, key: str) -> dict[str, Any] | None:
        """The stored answer for ``key``, or None."""
        with self._lock:
            row = self._connect().execute(
                "SELECT value FROM responses WHERE key = ?", (key,)).fetchone()
        return json.loads(row[0]) if row else None

    def put(self, key: str, model: str, value: dict[str, Any]) -> None:
        """Store (or replace) the answer for ``key``, committed before this returns (other
        processes see it from then on). The engine's calls store theirs through a
        :class:`~evalkit.judges.llm._cachewriter.CacheWriter` (group commits off the event
        loop); this is the plain version."""
        text = json.dumps(value, ensure_ascii=False)
        with self._lock:
            self._connect().execute(INSERT, (key, model, text, time.time()))
        point("response_cached")

    def close(self) -> None:
        """Close the connection and stop the writer thread, once what it was given is
        committed (both start again on the next use)."""
        if self.writer is not None:
            self.writer.close()
        with self._lock:
            if self._con is not None:
                self._con.close()
                self._con = None


def _set_up(con: sqlite3.Connection, wait_s: float = 60.0) -> None:
    """WAL mode and the table, on a file other processes of a sweep may be setting up at the
    same moment. SQLite answers 'database is locked' at once, busy timeout or not, to one of
    two connections that would otherwise wait on each other (both reading the new file's
    schema, then both writing it): that one tries again, for up to ``wait_s``."""
    deadline = time.monotonic() + wait_s
    delay = 0.005
    while True:
        try:
            con.execute("PRAGMA journal_mode=WAL")
            con.execute(_SCHEMA)
            return
        except sqlite3.OperationalError as exc:
            if "locked" not in str(exc) or time.monotonic() > deadline:
                raise
        time.sleep(delay)
        delay = min(delay * 2, 0.2)


_CACHES: dict[Path, ResponseCache] = {}


def response_cache(directory: Path) -> ResponseCache:
    """The process-wide cache object for ``directory``."""
    key = Path(directory).expanduser().resolve()
    if key not in _CACHES:
        _CACHES[key] = ResponseCache(key)
    return _CACHES[key]
