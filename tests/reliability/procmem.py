"""Peak resident memory of a command's whole process tree (worker processes too), for the
memory guarantees; shared with ``bench/reliability.py``."""

from __future__ import annotations

import os
import resource
import subprocess
import time
from pathlib import Path

PAGE = os.sysconf("SC_PAGE_SIZE")


def tree_rss(pid: int) -> int:
    """Resident bytes of process ``pid`` and all its descendants, from /proc."""
    total, todo = 0, [pid]
    while todo:
        p = todo.pop()
        try:
            with open(f"/proc/{p}/statm") as fh:
                total += int(fh.read().split()[1]) * PAGE
            with open(f"/proc/{p}/task/{p}/children") as fh:
                todo += [int(c) for c in fh.read().split()]
        except (FileNotFoundError, ProcessLookupError):
            continue  # it just ended
    return total


def run_measured(cmd: list[str], cwd: Path, env: dict[str, str] | None = None,
                 timeout: float = 300) -> tuple[subprocess.CompletedProcess[str], int]:
    """Run ``cmd``; its completed process and its peak memory in bytes: the larger of the
    process tree's resident memory sampled every 10 ms and the largest single process's peak
    as the kernel counts it (``RUSAGE_CHILDREN``: a spike between samples is not missed)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    full_env = {**os.environ, "COLUMNS": "200", **(env or {})}
    proc = subprocess.Popen(cmd, cwd=cwd, env=full_env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    peak, start = 0, time.monotonic()
    while proc.poll() is None:
        peak = max(peak, tree_rss(proc.pid))
        if time.monotonic() - start > timeout:
            proc.kill()
            break
        time.sleep(0.01)
    out, err = proc.communicate()
    single = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    if single > before:  # (else an earlier child's peak, not this one's)
        peak = max(peak, single * 1024)
    return subprocess.CompletedProcess(cmd, proc.returncode, out, err), peak
