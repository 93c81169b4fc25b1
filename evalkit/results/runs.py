"""Which runs a reader sees. A run directory's ``manifest.json`` says its status: ``running``
(written first), then ``ok``, ``failed`` or ``interrupted``. A killed run cannot rewrite its
manifest, so a ``running`` run whose writer is gone (the pid in its ``.lock`` is no process
on this machine, or it has no lock) is listed as ``interrupted``: readers never write.
Only ``ok`` runs are complete, so queries read the tables of ``ok`` runs unless asked for
every run; a directory without a manifest is never read."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from evalkit.results.runfiles import RunFileError, load_manifest, read_small, regular, skipped

__all__ = ["FINISHED", "LOCK", "STATUSES", "TABLE_FILES", "list_runs", "read_manifest",
           "pid_gone", "run_manifests", "table_files", "writer_gone"]

STATUSES = ("running", "ok", "failed", "interrupted")
FINISHED = "ok"
LOCK = ".lock"  # held (flock) by the process writing the run; holds its pid

# where each table lives inside runs/<experiment>/<run_id>/
TABLE_FILES = {
    "records": "records.parquet",
    "judgments": "judgments/part-*.parquet",
    "repeats": "judgments/repeat-*.parquet",
    "metrics": "metrics.parquet",
    "alerts": "alerts.parquet",
    "rejects": "rejects.parquet",
}


def read_manifest(run_dir: Path) -> dict[str, Any] | None:
    """The run's manifest, or None when it has none, or one that cannot be read as a manifest
    (then a warning line names it: see :mod:`evalkit.results.runfiles`)."""
    try:
        return load_manifest(run_dir)
    except FileNotFoundError:
        return None
    except RunFileError as exc:
        skipped(str(exc))
    except OSError as exc:
        skipped(f"{run_dir / 'manifest.json'}: {exc.strerror or exc}")
    return None


def run_manifests(root: Path) -> list[Path]:
    """The ``manifest.json`` of each run directory under ``root``
    (``<experiment>/<run_id>/``), in path order. A hidden directory (``.merge-*``, a
    half-written merge; ``.``-anything) is never a run, nor anything in a hidden
    experiment."""
    return [p for p in sorted(root.glob("*/*/manifest.json"))
            if not p.parent.name.startswith(".") and not p.parent.parent.name.startswith(".")]


def list_runs(root: Path) -> list[tuple[Path, str | None]]:
    """Each run directory under ``root`` (``<experiment>/<run_id>/``) with a readable
    manifest, and its status."""
    out = []
    for path in run_manifests(root):
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
        text = read_small(run_dir / LOCK, 64).decode("ascii", "replace").strip()
    except FileNotFoundError:
        return True
    except (OSError, RunFileError):  # (a FIFO or a device is never read: alive, as unsure)
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
    """The files holding ``table`` in ``dirs``, in run then part order: regular files only
    (a FIFO would block the reader, a device never end); another is left out with a
    warning line."""
    pattern = TABLE_FILES[table]
    out = []
    for p in (p for d in dirs for p in sorted(d.glob(pattern))):
        if regular(p):
            out.append(p)
        elif p.exists() or p.is_symlink():
            from evalkit.results.runfiles import check_table

            skipped(check_table(None, p, table) or f"{p}: not a regular file")
    return out
