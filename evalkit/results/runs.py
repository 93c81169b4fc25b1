"""Which runs a reader sees. A run directory's ``manifest.json`` says its status: ``running``
(written first, and left so by a killed run), then ``ok``, ``failed`` or ``interrupted``.
Only ``ok`` runs are complete, so queries read the tables of ``ok`` runs unless asked for
every run; a directory without a manifest is never read."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

__all__ = ["FINISHED", "STATUSES", "TABLE_FILES", "list_runs", "read_manifest", "table_files"]

STATUSES = ("running", "ok", "failed", "interrupted")
FINISHED = "ok"

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
            out.append((path.parent, manifest.get("status")))
    return out


def table_files(dirs: list[Path], table: str) -> list[Path]:
    """The files holding ``table`` in ``dirs``, in run then part order."""
    pattern = TABLE_FILES[table]
    return [p for d in dirs for p in sorted(d.glob(pattern))]
