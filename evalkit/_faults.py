"""Named points of a run where a test stops the process, so that crash tests hit the same
moment every time instead of sleeping and hoping.

``EVALKIT_FAULT=ACTION@POINT#N`` (``#N`` defaults to 1) acts the N-th time this process
reaches ``POINT``. ACTION is ``kill`` (SIGKILL: nothing runs after it), ``sigint`` (as if the
user pressed Ctrl-C), ``stop`` (SIGSTOP: the process waits, holding what it holds, until a
SIGCONT) or ``fail`` (a RuntimeError, as a bug would raise). Unset, :func:`point` costs a
comparison."""

from __future__ import annotations

import os
import signal
import threading

_SIGNALS = {"kill": signal.SIGKILL, "sigint": signal.SIGINT, "stop": signal.SIGSTOP,
            "fail": 0}
_lock = threading.Lock()
_seen: dict[str, int] = {}
_spec: tuple[int, str, int] | None = None
_parsed = False


def _parse() -> tuple[int, str, int] | None:
    text = os.environ.get("EVALKIT_FAULT")
    if not text:
        return None
    action, _, rest = text.partition("@")
    name, _, nth = rest.partition("#")
    if action not in _SIGNALS or not name:
        raise ValueError(f"EVALKIT_FAULT={text!r}: expected ACTION@POINT#N with ACTION one of "
                         f"{', '.join(_SIGNALS)}")
    return _SIGNALS[action], name, int(nth or 1)


def point(name: str) -> None:
    """Mark that the run reached ``name``; act here when ``EVALKIT_FAULT`` says so."""
    global _spec, _parsed
    if not _parsed:
        _spec, _parsed = _parse(), True
    if _spec is None or _spec[1] != name:
        return
    with _lock:
        _seen[name] = n = _seen.get(name, 0) + 1
    if n == _spec[2]:
        if not _spec[0]:
            raise RuntimeError(f"EVALKIT_FAULT: a failure injected at {name}")
        os.kill(os.getpid(), _spec[0])
