"""How to start worker processes: the one rule the file sources and the Langfuse page
workers share."""

from __future__ import annotations

import os
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


# Workers run below the priority of the process they work for, which stays on the critical
# path: the Langfuse reader's event loop (it requests each page's successor as soon as the
# page arrives) and the run's process that filters, judges and writes what the JSONL workers
# map. The workers still take all the CPU it leaves.
WORKER_NICENESS = 10


def lower_priority() -> None:
    """Called in a worker as it starts: run at :data:`WORKER_NICENESS` (where allowed)."""
    try:
        os.nice(WORKER_NICENESS)
    except (AttributeError, OSError):  # no os.nice (Windows), or not allowed here
        pass
