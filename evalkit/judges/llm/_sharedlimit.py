"""Limits of one endpoint shared by every process of a sweep on one machine: how many calls
are in flight, and the requests- and tokens-per-minute buckets, in a directory the sweep names
(``EVALKIT_LIMITS_DIR``).

Calls in flight: the endpoint's ``concurrency`` slots are the first ``concurrency`` bytes of
one slot file, and a call holds a slot as a POSIX record lock (``fcntl.lockf``) on its byte:
taking and giving back a slot is one system call each, no file is read or written, and the
kernel drops every lock of a process that is gone (killed mid-call), so a dead job never holds
a slot. Record locks belong to a process, not to a file descriptor (a process re-locking a
byte it holds succeeds, closing any descriptor of the file drops them all), so each process
opens the slot file once and keeps the set of slots its own calls hold. A caller finding no
free slot waits until one of its process's calls gives one back (woken at once) or, for a slot
another process holds, polls (5 ms, doubling to 100 ms).

Rate buckets: one small JSON file per endpoint, read and rewritten in place under an
exclusive ``fcntl`` lock held for a few microseconds; a waiting caller sleeps outside the
lock.

Outside a sweep (no ``EVALKIT_LIMITS_DIR``) nothing here is used: the engine's limits are
the process's own."""

from __future__ import annotations

import asyncio
import collections
import contextlib
import errno
import fcntl
import hashlib
import json
import os
import threading
import time
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

LIMITS_DIR = "EVALKIT_LIMITS_DIR"
_POLL_S = (0.005, 0.1)  # a caller waiting for another process's slot: first, longest sleep


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


class _SlotFile:
    """One process's handle on an endpoint's slot file: its one descriptor, the slots this
    process's calls hold, and its callers waiting for a slot."""

    def __init__(self, path: Path) -> None:
        self.fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)  # open for the process's life
        self.free: collections.deque[int] = collections.deque()  # slots no call here holds
        self.size = 0  # slots known: 0 .. size - 1
        self.mutex = threading.Lock()
        self.waiters: collections.deque[asyncio.Future[None]] = collections.deque()

    def take(self, concurrency: int) -> int | None:
        """A slot below ``concurrency`` no process holds, now locked; None if none is free."""
        with self.mutex:
            if concurrency > self.size:
                self.free.extend(range(self.size, concurrency))
                self.size = concurrency
            for _ in range(len(self.free)):
                slot = self.free.popleft()
                if slot < concurrency:
                    try:
                        fcntl.lockf(self.fd, fcntl.LOCK_EX | fcntl.LOCK_NB, 1, slot)
                    except OSError as exc:
                        if exc.errno not in (errno.EACCES, errno.EAGAIN):  # not "held"
                            self.free.append(slot)
                            raise
                    else:
                        return slot
                self.free.append(slot)
            return None

    def give(self, slot: int) -> None:
        """Give ``slot`` back and wake one caller of this process waiting for a slot."""
        with self.mutex:
            fcntl.lockf(self.fd, fcntl.LOCK_UN, 1, slot)
            self.free.appendleft(slot)  # (the next call here takes it first)
            while self.waiters:
                waiter = self.waiters.popleft()
                if not waiter.done():
                    loop = waiter.get_loop()
                    if loop is _running_loop():
                        waiter.set_result(None)
                    else:  # a caller in another thread's loop
                        loop.call_soon_threadsafe(_wake, waiter)
                    break


def _running_loop() -> asyncio.AbstractEventLoop | None:
    try:
        return asyncio.get_running_loop()
    except RuntimeError:
        return None


def _wake(waiter: asyncio.Future[None]) -> None:
    if not waiter.done():
        waiter.set_result(None)


_SLOT_FILES: dict[tuple[int, Path], _SlotFile] = {}  # by (process id: a fork's are its own)
_SLOT_FILES_MUTEX = threading.Lock()


def _slot_file(path: Path) -> _SlotFile:
    key = (os.getpid(), path)
    with _SLOT_FILES_MUTEX:
        found = _SLOT_FILES.get(key)
        if found is None:
            found = _SLOT_FILES[key] = _SlotFile(path)
        return found


class SharedLimits:
    """The shared concurrency slots and rate buckets of one endpoint (``key``)."""

    def __init__(self, directory: Path, key: str, concurrency: int, rpm: int | None,
                 tpm: int | None) -> None:
        directory.mkdir(parents=True, exist_ok=True)
        digest = hashlib.sha256(key.encode()).hexdigest()[:24]
        self.path = directory / f"{digest}.json"
        self.slots_path = directory / f"{digest}.slots"
        self.concurrency = concurrency
        self.rpm = rpm
        self.tpm = tpm

    @contextlib.contextmanager
    def _state(self) -> Any:
        """The rate buckets' state, locked; what the block leaves in it is written back, in
        place (every reader holds the lock: no rename, which on ext4 costs about a
        millisecond of blocking I/O; a state that cannot be read is a full bucket)."""
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            old = os.pread(fd, 1 << 16, 0)
            try:
                state = json.loads(old) if old.strip() else {}
            except ValueError:
                state = {}
            yield state
            # padded with blanks over a longer old state (JSON ignores trailing blanks)
            os.pwrite(fd, json.dumps(state).encode().ljust(len(old)), 0)
        finally:
            os.close(fd)  # (releases the lock)

    @contextlib.asynccontextmanager
    async def slot(self, window: Callable[[], int] | None = None) -> AsyncIterator[None]:
        """One of the endpoint's ``concurrency`` calls in flight, across processes (and,
        with ``window``, one of the first ``window()``: the adaptive window, shared)."""
        slots = _slot_file(self.slots_path)
        wait = _POLL_S[0]
        while (held := slots.take(self.concurrency if window is None else
                                  max(1, min(self.concurrency, window())))) is None:
            waiter = asyncio.get_running_loop().create_future()
            slots.waiters.append(waiter)
            try:
                # woken by a slot given back here; another process's is found by polling
                await asyncio.wait_for(waiter, wait)
            except TimeoutError:
                wait = min(wait * 2, _POLL_S[1])
            finally:
                with contextlib.suppress(ValueError):
                    slots.waiters.remove(waiter)
        try:
            yield
        finally:
            slots.give(held)

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

    # --- the adaptive limits (evalkit/_adaptive.py), shared by a sweep's processes ---------

    def adaptive(self, update: dict[str, float | None] | None = None,
                 accepted: float | None = None, in_flight: int | None = None) -> dict[str, Any]:
        """Merge this process's news into the endpoint's adaptive state and return it:
        ``update`` may set the ``rate`` (calls a second, for every process together), the
        ``window`` of calls in flight (for every process together: the call slots hold
        it) and a pause (``paused_until``, wall clock; the latest wins); ``accepted`` is
        the rate this process's calls were answered at over the last second (the
        endpoint's is the sum over the processes that said so in the last 3 s);
        ``in_flight`` its calls on the wire (``others_in_flight``: the other processes',
        as they said in the last second)."""
        with self._state() as state:
            shared = state.setdefault("adaptive", {})
            now = time.time()
            me = str(os.getpid())
            rates = {pid: v for pid, v in (shared.get("accepted") or {}).items()
                     if now - v[1] < 3.0}
            if accepted is not None:
                rates[me] = [accepted, now]
            shared["accepted"] = rates
            flying = {pid: v for pid, v in (shared.get("in_flight") or {}).items()
                      if now - v[1] < 1.0 and pid != me}
            others = sum(v[0] for v in flying.values())
            if in_flight is not None:
                flying[me] = [in_flight, now]
            shared["in_flight"] = flying
            if update:
                if update.get("paused_until"):
                    shared["paused_until"] = max(shared.get("paused_until") or 0.0,
                                                 update["paused_until"])
                if "rate" in update:
                    shared["rate"] = update["rate"]
                if "window" in update:
                    shared["window"] = update["window"]
            return {"rate": shared.get("rate"), "paused_until": shared.get("paused_until") or 0.0,
                    "accepted": sum(v[0] for v in rates.values()) if rates else None,
                    "window": shared.get("window"), "others_in_flight": others}

    def pace(self, rate: float) -> float:
        """Take the endpoint's next pace slot at ``rate`` calls a second if it is due (0.0),
        else the seconds until it is."""
        with self._state() as state:
            shared = state.setdefault("adaptive", {})
            now = time.time()
            due = shared.get("next") or 0.0
            if due <= now:
                shared["next"] = max(due, now - 0.5 / rate) + 1 / rate
                return 0.0
            return due - now
