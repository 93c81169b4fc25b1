"""``evalkit compact --runs-dir s3://...``: a finished run's judgment parts merged into one
object, with the guarantees of a local compact (readers see the old parts or the merged
file, never both nor neither; a kill at any step leaves the run readable, and the next
``evalkit compact`` finishes or undoes what it left) on a store with no rename.

For each run: its parts are downloaded to a private directory and merged there
(:func:`evalkit.commands.compact.merge_parts`); the merged file is uploaded (whole or not at
all: :meth:`~evalkit.results.storage.RemoteRunsDir.write`) into the run's hidden
:data:`~evalkit.results.storage.SWAP_DIR`, which readers ignore. Writing the empty
:data:`~evalkit.results.storage.SWAP_MARKER` commits: from then on readers read the run's
judgments from ``SWAP_DIR`` (:class:`~evalkit.results.storage.RemoteRun`'s stand-ins) while
``judgments/`` is rewritten (the merged file copied to ``judgments/part-00000.parquet`` by a
server-side copy, the other parts deleted). Removing the marker hands ``judgments/`` back to
readers, and ``SWAP_DIR`` is deleted last. A run found with the marker is finished first; a
``SWAP_DIR`` without it is a compaction that never committed, and is deleted.

Staging objects that failed writes left (:func:`~evalkit.results.storage.is_staging`) are
deleted too, once older than :data:`STAGING_GRACE_S` (a younger one may be a live write's).
Two ``evalkit compact`` of one bucket at once are not guarded against (an object store has no
lock): run one at a time."""

from __future__ import annotations

import contextlib
import fnmatch
import shutil
import tempfile
from pathlib import Path

from evalkit._faults import point
from evalkit.commands.compact import FINISHED, merge_parts
from evalkit.results.storage import SWAP_DIR, SWAP_MARKER, RemoteRun, RemoteRunsDir, is_staging

__all__ = ["STAGING_GRACE_S", "compact_remote"]

# staging objects younger than this may belong to a write under way: left alone
STAGING_GRACE_S = 3600.0


def compact_remote(remote: RemoteRunsDir, refs: list[str]) -> tuple[int, int, int]:
    """Compact the runs ``refs`` names (every run when empty) under ``remote``; ``(runs
    merged, parts merged, runs considered)``."""
    listed = remote.objects(remote.root)  # (one listing, hidden objects included)
    runs = remote.list_runs(listed)
    chosen = [remote.find(runs, ref, "compact") for ref in refs] if refs else runs
    everything = {info.path for info in listed}
    remote.remove_staging(listed, STAGING_GRACE_S)
    merged = parts = 0
    scratch = Path(tempfile.mkdtemp(prefix="evalkit-compact-"))  # (0700: this user's)
    try:
        for run in chosen:
            files = sorted(f for f in everything if f.startswith(run.path + "/"))
            try:
                n = _compact_run(remote, run, files, scratch)
            except Exception as exc:  # a part Arrow cannot read: that run is left as it is
                if type(exc).__module__.split(".")[0] != "pyarrow" or refs:
                    raise
                from evalkit.results.runfiles import skipped

                skipped(f"{remote.url_of(run.path)}: "
                        f"{(str(exc).strip().splitlines() or [repr(exc)])[0]}")
                continue
            if n:
                merged, parts = merged + 1, parts + n
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    return merged, parts, len(chosen)


def _compact_run(remote: RemoteRunsDir, run: RemoteRun, files: list[str],
                 scratch: Path) -> int | None:
    """Merge ``run``'s parts (``files``: every object under it, hidden ones too); the number
    merged, or None when it is left as it is."""
    marker = f"{run.path}/{SWAP_MARKER}"
    staged = [f for f in files if f.startswith(f"{run.path}/{SWAP_DIR}/")
              and not is_staging(f.rsplit("/", 1)[1])]
    judgments = [f for f in files if f.startswith(f"{run.path}/judgments/")]
    if marker in files:
        if staged:  # committed, then stopped: finish it (readers read the merged file)
            _swap(remote, run, marker, staged, judgments)
            return None
        _delete(remote, [marker])  # (its merged file gone: readers read judgments/)
    _delete(remote, staged)  # a compaction that never committed
    parts = [f for f in judgments if fnmatch.fnmatchcase(f[len(run.path) + 1:],
                                                         "judgments/part-*.parquet")]
    if run.status not in FINISHED or len(parts) < 2:
        return None
    local = scratch / run.experiment / run.run_id
    shutil.rmtree(local, ignore_errors=True)
    local.mkdir(parents=True)
    downloaded = [local / path.rsplit("/", 1)[1] for path in parts]  # (in name order: a
    remote.download_all(list(zip(parts, downloaded, strict=True)))  # local compact's order)
    merge_parts(downloaded, local / "merged.parquet")
    new = f"{run.path}/{SWAP_DIR}/part-00000.parquet"
    remote.upload(local / "merged.parquet", new)
    shutil.rmtree(local, ignore_errors=True)
    point("compact_written")
    remote.put(marker, b"")  # the commit: readers read the merged file from here on
    point("compact_committed")
    _swap(remote, run, marker, [new], judgments)
    return len(parts)


def _swap(remote: RemoteRunsDir, run: RemoteRun, marker: str, staged: list[str],
          judgments: list[str]) -> None:
    """Make ``judgments/`` (``judgments``: every object under it) hold the merged files
    ``staged`` alone, as a local compact's swapped directory does (readers read ``staged``
    meanwhile), then hand it back to readers and delete ``staged``."""
    kept = {f"{run.path}/judgments/{f.rsplit('/', 1)[1]}" for f in staged}
    for path in staged:  # (a server-side copy on S3: nothing is downloaded)
        remote.fs.copy_file(path, f"{run.path}/judgments/{path.rsplit('/', 1)[1]}")
    point("compact_copied")  # (judgments/ holds the merged file and the old parts)
    # the old parts only: runner.repeats' repeat-*.parquet stay as they are
    _delete(remote, [f for f in judgments if f not in kept and fnmatch.fnmatchcase(
        f.rsplit("/", 1)[1], "part-*.parquet")])
    point("compact_swapped")
    _delete(remote, [marker])  # readers read judgments/ again: the merged file
    _delete(remote, staged)


def _delete(remote: RemoteRunsDir, paths: list[str]) -> None:
    for path in paths:
        with contextlib.suppress(FileNotFoundError):
            remote.fs.delete_file(path)
