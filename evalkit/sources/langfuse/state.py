"""Read progress kept between runs, so an interrupted read resumes instead of starting over,
and the window of earlier runs, for incremental reads.

Progress lives under ``<runs_dir>/.state/<experiment>/``: ``langfuse-<key>.json`` (position
of every stream: pages done or the cursor, and the resolved window) and ``langfuse-<key>/``
(what was already read, one Parquet or JSON file per page). ``<key>`` hashes the source's
config and its shard (``source.shard=i/n``), so two differently configured sources, or two
shards of one sweep, never share progress. An exclusive lock keeps the processes of a sweep
from writing the same state; the ones that lose read without it.
"""

from __future__ import annotations

import contextlib
import json
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from evalkit.results.writer import write_json, write_parquet

__all__ = ["last_window_end", "ReadState", "spool_name"]

try:  # POSIX only; elsewhere a state is used without a lock
    import fcntl
except ImportError:  # pragma: no cover
    fcntl = None  # type: ignore[assignment]


class ReadState:
    """One source's progress file and spool directory."""

    def __init__(self, runs_dir: Path, experiment: str, key: str) -> None:
        base = runs_dir / ".state" / experiment
        self.path = base / f"langfuse-{key}.json"
        self.spool = base / f"langfuse-{key}"
        self._lock_path = base / f"langfuse-{key}.lock"
        self._lock_file: Any = None
        self.data: dict[str, Any] = {}

    def acquire(self) -> bool:
        """Take the lock; False when another process holds it."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._lock_file = open(self._lock_path, "a+")  # noqa: SIM115 - held until release()
        if fcntl is None:
            return True
        try:
            fcntl.flock(self._lock_file.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            self._lock_file.close()
            self._lock_file = None
            return False
        return True

    def release(self) -> None:
        if self._lock_file is not None:
            self._lock_file.close()  # closing drops the flock
            self._lock_file = None

    def load(self) -> dict[str, Any] | None:
        """The saved progress, or None when there is none (or it cannot be read)."""
        try:
            return json.loads(self.path.read_text())
        except (OSError, ValueError):
            return None

    def start(self, data: dict[str, Any]) -> None:
        """Begin a fresh read: drop old progress and spool."""
        self.clear()
        self.spool.mkdir(parents=True, exist_ok=True)
        self.data = data
        self.save()

    def save(self) -> None:
        write_json(self.data, self.path)

    def spool_table(self, name: str, table: pa.Table) -> None:
        write_parquet(table, self.spool / f"{name}.parquet")

    def spool_json(self, name: str, rows: list[Any]) -> None:
        write_json(rows, self.spool / f"{name}.json")

    def spooled_tables(self, prefix: str) -> Iterator[pa.Table]:
        for path in sorted(self.spool.glob(f"{prefix}*.parquet")):
            yield pq.read_table(path)

    def spooled_json(self, prefix: str) -> Iterator[list[Any]]:
        for path in sorted(self.spool.glob(f"{prefix}*.json")):
            yield json.loads(path.read_text())

    def clear(self) -> None:
        """Forget the progress (the read finished, or a fresh one starts)."""
        with contextlib.suppress(FileNotFoundError):
            self.path.unlink()
        shutil.rmtree(self.spool, ignore_errors=True)


def last_window_end(runs_dir: Path, experiment: str, identity: str) -> tuple[str, str] | None:
    """(end of the window, run id) of the latest successful run of ``experiment`` whose
    Langfuse source had the same ``identity`` (host and filters), shards apart (their merged
    run counts); None if there is none."""
    best: tuple[str, str] | None = None
    for manifest in (runs_dir / experiment).glob("*/manifest.json"):
        from evalkit.results.runs import read_manifest

        if manifest.parent.name.startswith("."):  # (a merge not finished: not a run)
            continue
        data = read_manifest(manifest.parent)
        if data is None:
            continue
        if data.get("status") != "ok" or data.get("dry_run"):
            continue
        # one shard (source.shard=i/n) covers only its part of the window: the next read
        # starts after a whole run or the shards' merged run, and every shard of a sweep
        # computes the same window whichever of them finished first
        if ((data.get("config") or {}).get("source") or {}).get("shard"):
            continue
        for fp in (data.get("sources") or {}).values():
            if not isinstance(fp, dict) or fp.get("plugin") != "langfuse" or \
                    fp.get("identity") != identity or not fp.get("complete"):
                continue
            end = (fp.get("window") or {}).get("to")
            if isinstance(end, str) and (best is None or end > best[0]):
                best = (end, str(data.get("run_id")))
    return best


def spool_name(stream: str, seq: int) -> str:
    """A file name for page ``seq`` of ``stream`` that sorts in reading order."""
    safe = "".join(c if c.isalnum() or c in "-_" else "_" for c in stream)
    return f"{safe}-{seq:08d}"

