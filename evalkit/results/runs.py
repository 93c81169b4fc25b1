"""Which runs a reader sees. A run directory's ``manifest.json`` says its status: ``running``
(written first), then ``ok``, ``failed`` or ``interrupted``. A killed run cannot rewrite its
manifest, so a ``running`` run whose writer is gone (the pid in its ``.lock`` is no process
on this machine, or it has no lock) is listed as ``interrupted``: readers never write.
Only ``ok`` runs are complete, so queries read the tables of ``ok`` runs unless asked for
every run; a directory without a manifest is never read."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

__all__ = ["FINISHED", "LOCK", "STATUSES", "TABLE_FILES", "list_runs", "read_manifest",
           "pid_gone", "table_files", "writer_gone"]

STATUSES = ("running", "ok", "failed", "interrupted")
FINISHED = "ok"
LOCK = ".lock"  # held (flock) by the process writing the run; holds its pid

# where each table lives inside runs/<experiment>/<run_id>/
TABLE_FILES = {
    "records": "records.parquet",
    "judgments": "judgments/part-*.parquet",
    "metrics": "metrics.parquet",
    "alerts": "alerts.parquet",
    "rejects": "rejects.parquet",
}


def read_manifest(run_dir: Path) -> dict[str, Any] | None:
    """The run's manifest, or None when it has none (or one that cannot be read)."""
    try:
        data = json.loads((run_dir / "manifest.json").read_text())
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def list_runs(root: Path) -> list[tuple[Path, str | None]]:
    """Each run directory under ``root`` (``<experiment>/<run_id>/``) with a readable
    manifest, and its status."""
    out = []
    for path in sorted(root.glob("*/*/manifest.json")):
        manifest = read_manifest(path.parent)
        if manifest is not None:
            status = manifest.get("status")
            if status == "running" and writer_gone(path.parent):
                status = "interrupted"
            out.append((path.parent, status))
    return out


def writer_gone(run_dir: Path) -> bool:
    """Whether the process that wrote ``run_dir`` has ended: its lock file is missing or
    names a pid that is no process here. A lock being written (no pid yet), a live pid or
    one that cannot be checked counts as alive: a run is never called dead by mistake, only
    left ``running`` (a reused pid) until it is resumed."""
    try:
        text = (run_dir / LOCK).read_text().strip()
    except FileNotFoundError:
        return True
    except OSError:
        return False
    return text.isdigit() and pid_gone(int(text))


def pid_gone(pid: int) -> bool:
    """Whether ``pid`` is no process on this machine; one that cannot be checked (another
    user's, an out-of-range number) counts as alive."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except (OSError, OverflowError):
        return False
    return False


def table_files(dirs: list[Path], table: str) -> list[Path]:
    """The files holding ``table`` in ``dirs``, in run then part order."""
    pattern = TABLE_FILES[table]
    return [p for d in dirs for p in sorted(d.glob(pattern))]
