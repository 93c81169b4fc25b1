"""How to start worker processes: the one rule the file sources and the Langfuse page
workers share."""

from __future__ import annotations

import sys
import threading


def start_method() -> str:
    """``fork`` on Linux while this process has one thread (a worker then starts at once and
    imports nothing; macOS system libraries are not fork-safe); else ``forkserver`` or
    ``spawn``, which re-import the main module in each worker: a script that calls evalkit
    then needs the ``if __name__ == "__main__":`` guard."""
    if sys.platform == "linux" and threading.active_count() == 1:
        return "fork"
    return "spawn" if sys.platform == "win32" else "forkserver"


def can_fork() -> bool:
    """Whether workers can be forked now: on Linux while this process runs one thread (a fork
    beside other threads may copy a lock one of them holds)."""
    return start_method() == "fork"
