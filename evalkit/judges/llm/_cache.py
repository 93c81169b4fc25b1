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

CACHE_FILE = "llm_responses.sqlite"
_SCHEMA = ("CREATE TABLE IF NOT EXISTS responses (key TEXT PRIMARY KEY, model TEXT NOT NULL, "
           "value TEXT NOT NULL, created REAL NOT NULL)")


def cache_key(model: str, api_base: str | None, messages: list[dict[str, Any]],
              params: dict[str, Any]) -> str:
    """A digest of everything that determines the answer: model, endpoint, messages and
    request parameters (never credentials)."""
    payload = json.dumps([model, api_base, messages, params], sort_keys=True,
                         ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(payload.encode()).hexdigest()


class ResponseCache:
    """Completed, parseable judge answers by :func:`cache_key`."""

    def __init__(self, directory: Path) -> None:
        self.path = Path(directory) / CACHE_FILE
        self._con: sqlite3.Connection | None = None
        self._lock = threading.Lock()

    def _connect(self) -> sqlite3.Connection:
        if self._con is None:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            con = sqlite3.connect(self.path, timeout=60, isolation_level=None,
                                  check_same_thread=False)
            con.execute("PRAGMA journal_mode=WAL")
            con.execute("PRAGMA synchronous=NORMAL")
            con.execute(_SCHEMA)
            self._con = con
        return self._con

    def get(self, key: str) -> dict[str, Any] | None:
        """The stored answer for ``key``, or None."""
        with self._lock:
            row = self._connect().execute(
                "SELECT value FROM responses WHERE key = ?", (key,)).fetchone()
        return json.loads(row[0]) if row else None

    def put(self, key: str, model: str, value: dict[str, Any]) -> None:
        """Store (or replace) the answer for ``key``."""
        text = json.dumps(value, ensure_ascii=False)
        with self._lock:
            self._connect().execute(
                "INSERT OR REPLACE INTO responses (key, model, value, created) "
                "VALUES (?, ?, ?, ?)", (key, model, text, time.time()))

    def close(self) -> None:
        """Close the connection (it reopens on the next use)."""
        with self._lock:
            if self._con is not None:
                self._con.close()
                self._con = None


_CACHES: dict[Path, ResponseCache] = {}


def response_cache(directory: Path) -> ResponseCache:
    """The process-wide cache object for ``directory``."""
    key = Path(directory).expanduser().resolve()
    if key not in _CACHES:
        _CACHES[key] = ResponseCache(key)
    return _CACHES[key]
