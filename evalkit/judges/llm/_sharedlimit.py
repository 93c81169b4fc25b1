"""Limits of one endpoint shared by every process of a sweep on one machine: how many calls
are in flight, and the requests- and tokens-per-minute buckets. The state is one small JSON
file per endpoint in a directory the sweep names (``EVALKIT_LIMITS_DIR``), read and written
under an exclusive ``fcntl`` lock held for a few microseconds; a waiting caller sleeps
outside the lock. Calls in flight are counted per process id, and the counts of a process
that is gone (killed mid-call) are dropped, so a dead job never holds a slot.

Outside a sweep (no ``EVALKIT_LIMITS_DIR``) nothing here is used: the engine's limits are
the process's own."""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import hashlib
import json
import os
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

LIMITS_DIR = "EVALKIT_LIMITS_DIR"
_POLL_S = (0.005, 0.1)  # a waiting caller's first and longest sleep


def limits_dir() -> Path | None:
    value = os.environ.get(LIMITS_DIR)
    return Path(value) if value else None


def writable_dir(directory: Path, setting: str) -> None:
    """Make ``directory`` if need be; a one-line ConfigError naming ``setting`` when it cannot
    be made or written (checked when a judge is built, not at its first call, where every
    call would fail alone and the run end in judge errors)."""
    from evalkit.errors import ConfigError

    try:
        directory.mkdir(parents=True, exist_ok=True)
        usable = os.access(directory, os.W_OK | os.X_OK)
        why = "is not writable"
    except OSError as exc:
        usable, why = False, f"cannot be made ({exc.strerror or exc})"
    if not usable:
        raise ConfigError(f"{setting}: {directory} {why}; point it at a writable local "
                          "directory")


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # someone else's process: alive
        return True
    return True


class SharedLimits:
    """The shared concurrency slots and rate buckets of one endpoint (``key``)."""

    def __init__(self, directory: Path, key: str, concurrency: int, rpm: int | None,
                 tpm: int | None) -> None:
        directory.mkdir(parents=True, exist_ok=True)
        digest = hashlib.sha256(key.encode()).hexdigest()[:24]
        self.path = directory / f"{digest}.json"
        self.lock_path = directory / f"{digest}.lock"
        self.concurrency = concurrency
        self.rpm = rpm
        self.tpm = tpm
        self.pid = os.getpid()

    @contextlib.contextmanager
    def _state(self) -> Any:
        """The state, locked; what the block leaves in it is written back."""
        fd = os.open(self.lock_path, os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            try:
                state = json.loads(self.path.read_text())
            except (FileNotFoundError, ValueError):
                state = {}
            yield state
            tmp = self.path.with_suffix(f".{self.pid}.tmp")
            tmp.write_text(json.dumps(state))
            os.replace(tmp, self.path)
        finally:
            os.close(fd)  # (releases the lock)

    def _try_slot(self) -> bool:
        with self._state() as state:
            flying: dict[str, int] = state.setdefault("in_flight", {})
            for pid in [p for p in flying if int(p) != self.pid and not _alive(int(p))]:
                del flying[pid]
            if sum(flying.values()) >= self.concurrency:
                return False
            flying[str(self.pid)] = flying.get(str(self.pid), 0) + 1
            return True

    def _release_slot(self) -> None:
        with self._state() as state:
            flying = state.setdefault("in_flight", {})
            left = flying.get(str(self.pid), 0) - 1
            if left > 0:
                flying[str(self.pid)] = left
            else:
                flying.pop(str(self.pid), None)

    @contextlib.asynccontextmanager
    async def slot(self) -> AsyncIterator[None]:
        """One of the endpoint's ``concurrency`` calls in flight, across processes."""
        wait = _POLL_S[0]
        while not self._try_slot():
            await asyncio.sleep(wait)
            wait = min(wait * 2, _POLL_S[1])
        try:
            yield
        finally:
            self._release_slot()

    def _take(self, name: str, per_minute: int, amount: float, burst_s: float) -> float:
        """Take ``amount`` from bucket ``name`` if it holds it (0.0), else the seconds to
        wait before trying again."""
        rate = per_minute / 60.0
        capacity = max(1.0, rate * burst_s)
        amount = min(amount, capacity)
        with self._state() as state:
            bucket = state.setdefault(name, {"tokens": capacity, "at": time.time()})
            now = time.time()
            tokens = min(capacity, bucket["tokens"] + max(0.0, now - bucket["at"]) * rate)
            if tokens >= amount:
                state[name] = {"tokens": tokens - amount, "at": now}
                return 0.0
            state[name] = {"tokens": tokens, "at": now}
            return (amount - tokens) / rate

    async def acquire(self, name: str, amount: float = 1.0) -> None:
        """Wait for ``amount`` of the shared ``rpm`` or ``tpm`` bucket."""
        per_minute = self.rpm if name == "rpm" else self.tpm
        if not per_minute:
            return
        burst_s = 1.0 if name == "rpm" else 10.0  # as the process-local buckets
        while (wait := self._take(name, per_minute, amount, burst_s)) > 0:
            await asyncio.sleep(wait)

    def adjust(self, name: str, delta: float) -> None:
        """Correct a reservation after the call (positive: it used more)."""
        per_minute = self.tpm if name == "tpm" else self.rpm
        if not per_minute:
            return
        with self._state() as state:
            bucket = state.get(name)
            if bucket is not None:
                capacity = max(1.0, per_minute / 60.0 * 10.0)
                bucket["tokens"] = min(capacity, bucket["tokens"] - delta)
