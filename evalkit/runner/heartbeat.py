"""The heartbeat of a run on object storage: while it runs, a background thread uploads its
``running`` manifest again every few seconds with a fresh ``heartbeat_at``, so that a reader
on any machine can tell a run that is still going from one whose process was killed (its
heartbeat goes stale: :func:`evalkit.results.storage.run_stopped`). A pid says that only on
the machine that ran it.

The thread is stopped, and its last upload waited for, before the run uploads its final
manifest, so a beat can never put ``running`` back over ``ok`` or ``failed``."""

from __future__ import annotations

import contextlib
import copy
import json
import math
import os
import threading
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Any

from evalkit.errors import ConfigError, RunDirError

if TYPE_CHECKING:
    from evalkit.results.storage import RemoteRunsDir

__all__ = ["HEARTBEAT_ENV", "Heartbeat", "heartbeat_interval", "now_iso"]

HEARTBEAT_ENV = "EVALKIT_HEARTBEAT_S"
_DEFAULT_S = 30.0  # a request a run every 30 s; a killed run reads interrupted after ~90 s


def heartbeat_interval() -> float:
    """Seconds between beats: ``$EVALKIT_HEARTBEAT_S``, else 30."""
    text = os.environ.get(HEARTBEAT_ENV, "").strip()
    if not text:
        return _DEFAULT_S
    try:
        every = float(text)
    except ValueError:
        every = math.nan
    if not math.isfinite(every) or every <= 0:
        raise ConfigError(f"{HEARTBEAT_ENV}: '{text}' is not a number of seconds above 0; "
                          f"set it to e.g. 30, or unset it")
    return every


def now_iso() -> str:
    return datetime.now(timezone.utc).isoformat()


class Heartbeat:
    """Uploads ``manifest`` (a copy taken now: the run goes on changing its own) to ``path``
    every ``every`` seconds with ``heartbeat_at`` set to the time, until :meth:`stop`."""

    def __init__(self, remote: RemoteRunsDir, path: str, manifest: dict[str, Any],
                 every: float) -> None:
        self._remote, self._path, self._every = remote, path, every
        self._manifest = copy.deepcopy(manifest)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._beat, name="evalkit-heartbeat",
                                        daemon=True)
        self._thread.start()

    def _beat(self) -> None:
        while not self._stop.wait(self._every):
            self._manifest["heartbeat_at"] = now_iso()
            data = json.dumps(self._manifest, default=str).encode()
            if self._stop.is_set():  # (stopped while the manifest was being made)
                return
            # a beat that fails is skipped: the next may pass, and a run is not stopped for
            # it (enough of them and readers take the run for interrupted, which is said in
            # docs/scaling.md)
            with contextlib.suppress(RunDirError):
                self._remote.put(self._path, data)

    def stop(self) -> None:
        """No beat after this returns (one under way is waited for)."""
        self._stop.set()
        if self._thread is not threading.current_thread():
            self._thread.join()
