"""How a worker process hands a mapped chunk's table to the run's process: written as an
Arrow IPC stream to a file in memory (``/dev/shm``) and mapped by the reader without a copy,
rather than pickled through the pipe (which costs the worker several times the write and the
reader a copy). A file that cannot be written falls back to the pipe."""

from __future__ import annotations

import contextlib
import os
import tempfile

import pyarrow as pa


def transfer_dir() -> str:
    """A new directory for the tables the workers hand back: in ``/dev/shm`` (memory, never
    written to disk) where there is one, else in the system's temporary directory."""
    shm = "/dev/shm"
    usable = os.path.isdir(shm) and os.access(shm, os.W_OK | os.X_OK)
    return tempfile.mkdtemp(prefix="evalkit-jsonl-", dir=shm if usable else None)


def put(table: pa.Table, path: str) -> pa.Table | str:
    """Write ``table`` to ``path`` as an Arrow IPC stream and return the path; the table
    itself when the file cannot be written (a full ``/dev/shm``, say)."""
    try:
        with pa.OSFile(path, "wb") as sink, pa.ipc.new_stream(sink, table.schema) as out:
            out.write_table(table)
    except OSError:
        with contextlib.suppress(OSError):
            os.unlink(path)
        return table
    return path


def take(path: str) -> pa.Table:
    """The table :func:`put` wrote to ``path``, read without a copy: its buffers point into
    a memory map of the file, which they keep alive. The file is unlinked at once (its pages
    are freed when the table is), so nothing is left behind whatever happens next."""
    try:
        with pa.memory_map(path) as source:
            return pa.ipc.open_stream(source).read_all()
    finally:
        os.unlink(path)
