"""``evalkit compact [RUN...]``: merge the judgment parts of finished runs into one file per
run, so a query over many runs opens few files (each judged batch of a run wrote its own
part). Rows, columns and their order stay as they were: the parts are read in their order
and written as one ``judgments/part-00000.parquet`` with the parts' unified schema (a column
a part lacks is null there, as the query layer's ``union_by_name`` read gave it). The other
files of ``judgments/`` (``runner.repeats``' ``repeat-*.parquet``) are kept as they are.

A run is rewritten only when finished (its manifest says ``ok``) and has more than one
part: a failed or interrupted run is resumable, and its resume counts its parts.
The new file is written in a sibling directory, then swapped with ``judgments/`` in one
``renameat2(RENAME_EXCHANGE)`` on Linux (a reader sees the old parts or the new file, never
neither); elsewhere by two renames, and a directory left half-swapped by a crash is put back
by the next ``evalkit compact``. Runs on object storage (``--runs-dir s3://...``) are
compacted by :mod:`evalkit.commands._compact_remote`, with the same guarantees."""

from __future__ import annotations

import argparse
import ctypes
import ctypes.util
import os
import shutil
import sys
from pathlib import Path

from evalkit._faults import point
from evalkit.commands._runs import find_run
from evalkit.results.runs import run_manifests

__all__ = ["FINISHED", "add_arguments", "compact_run", "main", "merge_parts"]

# A failed or interrupted run is resumable, and its resume keeps the judgment parts of the
# batches it finished by counting them (``.progress``): such a run is never rewritten.
FINISHED = ("ok", "dry_run")
# The parts are gathered into row groups of about this size (DuckDB's own), never more
# than ROW_GROUP_BYTES in memory: one row group per part would leave a query reading as
# many row groups as the parts were files, nearly as slow as the files themselves.
ROW_GROUP_ROWS = 122_880
ROW_GROUP_BYTES = 64 << 20
_RENAME_EXCHANGE = 2
_AT_FDCWD = -100


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("runs", nargs="*", help="run ids or directories (default: every "
                        "finished run under --runs-dir)")
    parser.add_argument("--runs-dir", default="runs", help="the runs directory, or a URL "
                        "(s3://BUCKET/PREFIX) of one on object storage (default: runs)")


def _exchange(a: Path, b: Path) -> bool:
    """Swap two directories atomically (Linux); False when the system cannot."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
        renameat2 = libc.renameat2
    except (OSError, AttributeError):
        return False
    renameat2.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p,
                          ctypes.c_uint]
    done = renameat2(_AT_FDCWD, os.fsencode(a), _AT_FDCWD, os.fsencode(b), _RENAME_EXCHANGE)
    return done == 0


def _recover(run_dir: Path) -> None:
    """Put back a swap a crash interrupted: ``judgments`` gone, the old parts beside it."""
    judgments = run_dir / "judgments"
    for old in sorted(run_dir.glob(".judgments-old-*")):
        if not judgments.exists():
            os.replace(old, judgments)
        else:
            shutil.rmtree(old, ignore_errors=True)
    for new in run_dir.glob(".judgments-new-*"):
        shutil.rmtree(new, ignore_errors=True)


def compact_run(run_dir: Path) -> int | None:
    """Merge ``run_dir``'s judgment parts; the number of parts merged (None: left as is,
    also when another ``evalkit compact`` holds the run: an exclusive ``flock`` on the run's
    directory, so two never swap or clean up the same run at once)."""
    import fcntl

    try:
        fd = os.open(run_dir, os.O_RDONLY)
    except OSError:
        return None
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            return None
        return _compact_locked(run_dir)
    finally:
        os.close(fd)


def merge_parts(parts: list[Path], out: Path) -> None:
    """Write the rows of the judgment ``parts`` (in their order) to the one file ``out``,
    with their unified schema (a column a part lacks is null there), in row groups of about
    :data:`ROW_GROUP_ROWS`."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from evalkit.results.writer import parquet_options

    schema = pa.unify_schemas([pq.read_schema(p) for p in parts])
    with pq.ParquetWriter(out, schema, **parquet_options(schema)) as writer:
        group: list[pa.Table] = []
        rows = size = 0
        for part in parts:
            table = pq.read_table(part)
            for name in schema.names:
                if name not in table.schema.names:
                    table = table.append_column(
                        schema.field(name), pa.nulls(table.num_rows, schema.field(name).type))
            group.append(table.select(schema.names).cast(schema))
            rows, size = rows + table.num_rows, size + table.nbytes
            if rows >= ROW_GROUP_ROWS or size >= ROW_GROUP_BYTES:
                writer.write_table(pa.concat_tables(group), row_group_size=max(rows, 1))
                group, rows, size = [], 0, 0
        if group:
            writer.write_table(pa.concat_tables(group), row_group_size=max(rows, 1))


def _compact_locked(run_dir: Path) -> int | None:
    _recover(run_dir)
    from evalkit.results.runs import read_manifest

    status = (read_manifest(run_dir) or {}).get("status")  # (odd: a warning line, left)
    parts = sorted((run_dir / "judgments").glob("part-*.parquet"))
    if status not in FINISHED or len(parts) < 2:
        return None
    new = run_dir / f".judgments-new-{os.getpid()}"
    shutil.rmtree(new, ignore_errors=True)
    new.mkdir()
    try:
        merge_parts(parts, new / "part-00000.parquet")
        # every other file of judgments/ (runner.repeats' repeat-*.parquet) goes over as it
        # is: a hard link, so the old directory is untouched until the swap
        for other in sorted((run_dir / "judgments").iterdir()):
            if other.is_file() and other not in parts:
                try:
                    os.link(other, new / other.name)
                except OSError:
                    shutil.copy2(other, new / other.name)
        point("compact_written")
        old = run_dir / f".judgments-old-{os.getpid()}"
        if _exchange(new, run_dir / "judgments"):
            point("compact_swapped")
            shutil.rmtree(new)  # (now the old parts)
        else:
            os.replace(run_dir / "judgments", old)
            os.replace(new, run_dir / "judgments")
            shutil.rmtree(old)
    except BaseException:
        shutil.rmtree(new, ignore_errors=True)
        raise
    return len(parts)


def main(args: argparse.Namespace) -> int:
    from evalkit.results.storage import is_remote

    if is_remote(args.runs_dir):
        return _main_remote(args)
    runs_dir = Path(args.runs_dir)
    if not args.runs and not runs_dir.is_dir():
        print(f"evalkit: error: compact --runs-dir: {runs_dir} is not a directory; pass the "
              "runs directory your runs are in (runner.runs_dir)", file=sys.stderr)
        return 2
    if args.runs:
        dirs = [find_run(ref, runs_dir, "compact") for ref in args.runs]
    else:
        dirs = [p.parent for p in run_manifests(runs_dir)]  # (hidden directories are none)
    merged = files = 0
    for run_dir in dirs:
        try:
            n = compact_run(run_dir)
        except Exception as exc:  # a part Arrow cannot read: that run is left as it is
            if type(exc).__module__.split(".")[0] != "pyarrow" or args.runs:
                raise
            from evalkit.results.runfiles import skipped

            skipped(f"{run_dir}: {(str(exc).strip().splitlines() or [repr(exc)])[0]}")
            continue
        if n:
            merged += 1
            files += n
    print(f"compacted {merged} of {len(dirs)} runs: {files} judgment parts into {merged} files")
    return 0


def _main_remote(args: argparse.Namespace) -> int:
    """``compact --runs-dir URL`` (:mod:`evalkit.commands._compact_remote`)."""
    from evalkit.commands._compact_remote import compact_remote
    from evalkit.errors import RunDirError
    from evalkit.results.storage import error_reason, open_runs_dir

    remote = open_runs_dir(args.runs_dir, "compact --runs-dir")
    try:
        merged, files, considered = compact_remote(remote, args.runs)
    except OSError as exc:  # (an upload's failure is a RunDirError line already)
        raise RunDirError(f"compact --runs-dir: cannot compact the runs at {remote.shown} "
                          f"({error_reason(exc)[:200]})"
                          "; check the storage and its credentials, and run again (what was "
                          "left half done is finished or undone then)") from None
    print(f"compacted {merged} of {considered} runs: {files} judgment parts into {merged} "
          "files")
    return 0
