"""``jsonl``: one JSON object per line, from files or a glob; ``.gz`` files are gunzipped.

The file is read in chunks of ``batch_size`` lines. Each chunk is parsed and mapped on its own
(:func:`map_chunk`), in this process or, for large inputs, on worker processes while this one
runs the rest of the pipeline; ids are then checked across chunks here, in file order, so a
duplicate is rejected the same way whichever process mapped its line (:class:`SeenIds`, shared with
the builder that checks them within a chunk)."""

from __future__ import annotations

import os
import shutil
from collections import deque
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, replace
from itertools import pairwise, repeat
from pathlib import Path
from typing import Any, NamedTuple

import orjson
import pyarrow as pa
import pyarrow.compute as pc

from evalkit._fork import can_fork, lower_priority, start_method
from evalkit._gc import gc_paused
from evalkit.context import RunContext
from evalkit.errors import SourceError
from evalkit.plugin import ImportedScores, Reject, Source, SourceItem
from evalkit.results.schemas import json_text
from evalkit.sources._input import (
    HEAD,
    bounded_line,
    check_input,
    decode_problem,
    head_text,
    open_input,
)
from evalkit.sources._mapping import (
    FileRef,
    SeenIds,
    TypedMismatch,
    Where,
    duplicate_id,
    location,
)
from evalkit.sources._pieces import newlines, pieces
from evalkit.sources._transfer import put, take, transfer_dir
from evalkit.sources.files import FileSourceConfig, builder_for, fingerprint, resolve_paths

__all__ = [
    "FIRST_READ", "PARALLEL_MIN_BYTES", "Chunk", "JsonlSource", "JsonlSourceConfig",
    "map_chunk", "Mapped", "Sent",
]


@dataclass(frozen=True)
class JsonlSourceConfig(FileSourceConfig):
    # processes that parse and map lines beside the run (below its priority); null: one per
    # core when the input is over 64 MiB and there are 2 cores or more, else 0 (all in the
    # run's process)
    workers: int | None = None

    def validate(self) -> None:
        super().validate()
        if self.workers is not None and self.workers < 0:
            raise ValueError(f"workers: {self.workers} is negative; use 0 (no worker "
                             "processes), a number of processes, or null (automatic)")


# below this much input, starting worker processes costs more than it saves
PARALLEL_MIN_BYTES = 64 << 20
# bytes of the first read of a file (then up to the end of the line); later reads ask for the
# bytes batch_size lines took so far
FIRST_READ = 1 << 20


# what mapping one chunk gives back: the records, the line of each (a range when no line of
# the chunk was left out), and the chunk's rejects and imported judgments (ids are unique
# within the chunk, not yet across chunks)
Mapped = tuple[pa.Table | None, Sequence[int], list[Reject], list[pa.Table]]


class Chunk(NamedTuple):
    index: int  # of the file in the source's paths
    first: int  # line number of the first line
    lines: int  # how many lines
    offset: int  # byte offset in the file (-1 in a gzip file)
    data: bytes  # the lines (empty on the way to a worker, which reads them from the file)
    size: int  # bytes of data
    # rejects of lines the reader could not take (too long, cut short): (location, reason,
    # raw); each such line is blank in data
    notes: tuple[tuple[str, str, str | None], ...] = ()


def map_chunk(name: str, config: FileSourceConfig, ref: FileRef, chunk: Chunk) -> Mapped:
    """Parse and map the lines of ``chunk`` (of file ``ref``), piece by piece. Runs in a
    worker process or in the run's own; its rejects and imported scores come back with it.
    Ids are checked across the pieces by the one builder. The pieces' lines must be the
    chunk's: a worker reads a plain file's chunk itself, after it was counted."""
    builder = builder_for(name, config)
    add, loads = builder.add, orjson.loads
    tables: list[pa.Table] = []
    kept: list[Sequence[int]] = []  # the lines of each piece's records
    counted = 0
    # the parsed rows hold no cycles: collections while they pile up would free nothing
    with gc_paused():
        for data, lines, first in pieces(chunk.data, chunk.first):
            counted += lines
            typed = builder.add_typed(data, lines, ref, first)
            if typed:
                try:
                    table = builder.flush()
                except TypedMismatch:
                    builder.reset()
                    typed = False
            if not typed:  # line by line
                for lineno, line in enumerate(data.split(b"\n"), first):
                    try:
                        obj = loads(line)
                    except orjson.JSONDecodeError as exc:
                        if line.strip():
                            builder.reject(f"{ref[0]}:{lineno}", decode_problem(line, exc),
                                           line.decode("utf-8", "backslashreplace"))
                        continue
                    add(obj, (ref, lineno))
                table = builder.flush()
            if table is not None:
                tables.append(table)
                kept.append(_line_numbers(builder.kept))
    if counted != chunk.lines:
        raise SourceError(f"{ref[0]} changed while it was read ({counted} lines where "
                          f"{chunk.lines} were counted); read it once it is complete")
    if not tables:
        return None, [], builder.rejects, [s.table for s in builder.imported]
    # one table of one chunk per column, as the run's process takes it (a copy here, on a
    # worker, rather than there)
    table = tables[0] if len(tables) == 1 else \
        pa.concat_tables(tables, promote_options="default").combine_chunks()
    whole = all(isinstance(k, range) for k in kept) and \
        all(a.stop == b.start for a, b in pairwise(kept))
    lines: Sequence[int] = range(kept[0][0], kept[-1][-1] + 1) if whole else \
        [n for part in kept for n in part]
    return table, lines, builder.rejects, [s.table for s in builder.imported]


def _line_numbers(kept: Sequence[Where]) -> Sequence[int]:
    """The line numbers of the locations ``kept``: a range when no line was left out (the
    lines of a piece rise: first and last tell)."""
    if kept[-1][1] - kept[0][1] == len(kept) - 1:
        return range(kept[0][1], kept[-1][1] + 1)
    return [w[1] for w in kept]


_WORKER: tuple[str, FileSourceConfig] | None = None
_TRANSFER: str | None = None  # the directory a worker writes its tables to (see _put)


def _start_worker(name: str, config: FileSourceConfig, transfer: str | None = None) -> None:
    global _WORKER, _TRANSFER
    _WORKER, _TRANSFER = (name, config), transfer
    lower_priority()


def _map_in_worker(ref: FileRef, chunk: Chunk) -> Mapped | Sent:
    assert _WORKER is not None
    if chunk.size and not chunk.data:  # its bytes come from the file, not through a pipe
        data = _chunk_bytes(ref[0], chunk)
        if len(data) != chunk.size:  # (and map_chunk checks its lines as it maps them)
            raise SourceError(f"{ref[0]} changed while it was read (bytes {chunk.offset}:"
                              f"{chunk.offset + chunk.size}); read it once it is complete")
        chunk = chunk._replace(data=data)
    table, kept, rejects, imported = map_chunk(*_WORKER, ref, chunk)
    if table is None or _TRANSFER is None:
        return table, kept, rejects, imported
    return put(table, os.path.join(_TRANSFER, f"{chunk.index}-{chunk.first}.arrow")), \
        kept, rejects, imported


# how a worker hands a chunk's table back: the table itself (pickled through the pipe), or
# the path of the file it wrote it to (see evalkit.sources._transfer)
Sent = tuple[pa.Table | str | None, Sequence[int], list[Reject], list[pa.Table]]


def _chunk_bytes(path: str | Path, chunk: Chunk) -> bytes:
    """The lines of ``chunk``: those it carries, or (a plain file's chunk, which travels to a
    worker without them) read from the file."""
    if chunk.data or not chunk.size:
        return chunk.data
    with open(path, "rb") as fh:
        fh.seek(chunk.offset)
        return fh.read(chunk.size)


def _received(sent: Sent) -> Mapped:
    table, kept, rejects, imported = sent
    return take(table) if isinstance(table, str) else table, kept, rejects, imported


class JsonlSource(Source):
    """Reads JSON Lines. A line that is not valid UTF-8, not JSON, not an object, lacks a
    required field or has a value of the wrong type becomes a reject (file:line, reason)."""

    Config = JsonlSourceConfig

    def __init__(self, name: str, config: JsonlSourceConfig, ctx: RunContext) -> None:
        self.name = name
        self.config = config
        self.ctx = ctx
        self.paths = resolve_paths(config.path, "JSONL")
        for path in self.paths:  # a file that cannot be read as text stops the run now
            check_input(path)
        # whether the read maps its lines on worker processes (known once it starts): the
        # run's thread is then free to share the cores with judges beside it
        self.parses_beside = False

    def fingerprint(self) -> dict[str, Any]:
        return fingerprint(self.paths)

    def _chunks(self, with_data: bool = True) -> Iterator[Chunk]:
        """The lines of every file, at most ``batch_size`` at a time. Each read asks for the
        bytes that many lines took so far (at most ``max_line_bytes``: no line within a block
        can then be over it), then reads to the end of a line, or past it when that line is
        over the limit: it becomes a blank line and a reject. A block of more lines is cut
        into whole batches from the front. Lines are counted, not split, here. Without
        ``with_data`` (workers read a plain file's bytes themselves), a block that needs no
        cut is counted where it was read, not copied into one piece."""
        size, limit = self.config.batch_size, self.config.max_line_bytes
        want = min(FIRST_READ, limit)
        # every block is read into this one buffer (grown when a read asks for more): fresh
        # memory for each block would cost the kernel a page fault per 4 KiB it reads
        buf = bytearray(want)
        for index, path in enumerate(self.paths):
            with open_input(path) as source:
                fh, gz, faulted = source.stream, source.gz, False
                first, offset = 1, source.start
                while True:
                    if len(buf) < want:  # (with room: the next blocks ask a little more)
                        buf = bytearray(want + want // 8)
                    n = fh.readinto(memoryview(buf)[:want])
                    tail = n - 1 - buf.rfind(b"\n", 0, n)  # the last line's bytes so far
                    rest, length, rest_read = bounded_line(fh, tail, limit)
                    if not n and not rest_read:
                        break
                    block, read = memoryview(buf)[:n], n + rest_read
                    lines = newlines(block) + rest.count(b"\n") + \
                        ((rest or block)[-1:] != b"\n")
                    want = min(limit, max(1, read * size // lines * 15 // 16))
                    lost = None  # why the last line cannot be read (then it becomes blank)
                    if length > limit:  # (rest holds its first bytes, for the reject)
                        lost = (f"line of {length:,} bytes is over source.max_line_bytes "
                                f"({limit:,}); it was skipped, not read (raise "
                                "source.max_line_bytes to read it)")
                    elif source.fault and not rest.endswith(b"\n") and (tail or rest) and \
                            not fh.peek(1):
                        lost = source.fault_message()
                    if lost is not None:
                        note = (f"{path}:{first + lines - 1}", lost,
                                head_text(bytes(block[n - tail:n - tail + HEAD]) + rest[:HEAD]))
                        faulted = bool(source.fault) and not fh.peek(1)
                        yield from self._cut(index, first, lines, -1,
                                             block[:n - tail].tobytes() + b"\n", True, (note,))
                    elif lines <= size and not with_data and not gz:
                        yield Chunk(index, first, lines, offset, b"", read)
                    else:
                        yield from self._cut(index, first, lines, offset, block.tobytes() + rest,
                                             gz)
                    first += lines
                    offset += read * (not gz)
                if source.fault and not faulted:  # the damage came after a whole line
                    note = (f"{path}:{first}", source.fault_message(), None)
                    yield Chunk(index, first, 1, -1, b"\n", 1, (note,))

    def _cut(self, index: int, first: int, lines: int, offset: int, data: bytes,
             gz: bool, notes: tuple[tuple[str, str, str | None], ...] = ()) -> Iterator[Chunk]:
        """The block ``data`` (``lines`` lines from line ``first``) as chunks of at most
        ``batch_size`` lines (the last one carries the block's ``notes``)."""
        size = self.config.batch_size
        start = 0
        while lines > size:
            cut = start
            for _ in range(size):
                cut = data.index(b"\n", cut) + 1
            yield Chunk(index, first, size, offset + start * (not gz), data[start:cut],
                        cut - start)
            start, first, lines = cut, first + size, lines - size
        yield Chunk(index, first, lines, offset + start * (not gz),
                    data[start:] if start else data, len(data) - start, notes)

    def _workers(self) -> int:
        """Worker processes for this read: as configured, else for an input over
        ``PARALLEL_MIN_BYTES``, when they can be forked now (this process has no threads), one
        per core (none on one core: nothing to run beside). They run below the run's process's
        priority, so they take the CPU it leaves while it filters, judges and writes (at the
        same priority they starved it; bench/README.md has the figures)."""
        if self.config.workers is not None:
            return self.config.workers
        big = sum(p.stat().st_size for p in self.paths) >= PARALLEL_MIN_BYTES
        cores = os.cpu_count() or 1
        return cores if cores > 1 and big and can_fork() else 0

    def _mapped(self) -> Iterator[tuple[Chunk, Mapped]]:
        """Each chunk with its mapping, in file order."""
        refs = [(str(p), p.name) for p in self.paths]
        workers = self._workers()
        self.parses_beside = bool(workers)
        if not workers:
            for chunk in self._chunks():
                yield chunk, map_chunk(self.name, self.config, refs[chunk.index], chunk)
            return
        import multiprocessing  # here: a run without workers does not pay the imports
        from concurrent.futures import Future, ProcessPoolExecutor

        mp = multiprocessing.get_context(start_method())
        transfer = transfer_dir()
        try:
            pool = ProcessPoolExecutor(workers, mp_context=mp, initializer=_start_worker,
                                       initargs=(self.name, self.config, transfer))
            pending: deque[tuple[Chunk, Future[Sent]]] = deque()
            try:
                for chunk in self._chunks(with_data=False):
                    wire = chunk if chunk.offset < 0 else chunk._replace(data=b"")
                    pending.append((chunk, pool.submit(_map_in_worker, refs[chunk.index],
                                                       wire)))
                    if len(pending) > workers:  # bounded: at most one chunk queued per worker
                        chunk, future = pending.popleft()
                        yield chunk, _received(future.result())
                while pending:
                    chunk, future = pending.popleft()
                    yield chunk, _received(future.result())
            finally:
                pool.shutdown(wait=True, cancel_futures=True)
        finally:  # the files of chunks never taken (a failed worker, a read stopped early)
            shutil.rmtree(transfer, ignore_errors=True)

    def read(self) -> Iterator[SourceItem]:
        seen = SeenIds()
        for chunk, (table, kept, rejects, imported) in self._mapped():
            for where, reason, raw in chunk.notes:
                yield Reject(where, reason, raw)
            duplicates: list[Reject] = []
            if table is not None:
                table, imported, duplicates, moved = self._admit(table, kept, imported, seen,
                                                                 chunk)
                if moved:  # a duplicate within the chunk names the earlier chunk's line
                    rejects = [replace(r, reason=moved.get(r.reason, r.reason))
                               for r in rejects]
            yield from rejects
            yield from duplicates
            for scores in imported:
                yield ImportedScores(scores)
            if table is not None and table.num_rows:
                yield table

    def _admit(self, table: pa.Table, kept: Sequence[int], imported: list[pa.Table],
               seen: SeenIds, chunk: Chunk
               ) -> tuple[pa.Table, list[pa.Table], list[Reject], dict[str, str]]:
        """The rows of a chunk whose ids no earlier chunk had (and those rows' imports); the
        others are rejected as duplicates, as within a chunk. Also: the reason a duplicate
        within the chunk was given (first seen at a line rejected here) -> the reason naming
        the line where the id was first seen, as a plain line-by-line read gives it."""
        ids, index = table.column("record_id").to_pylist(), chunk.index
        ref: FileRef = (str(self.paths[index]), self.paths[index].name)
        if seen.add_new(ids, zip(repeat(ref), kept)):  # the usual chunk: one set update
            return table, imported, [], {}
        first = seen.first_met()
        keep, dups, lines = [], [], _chunk_bytes(self.paths[index], chunk).split(b"\n")
        rejects, moved = [], {}
        for rid, line in zip(ids, kept, strict=True):  # (no id twice within a chunk)
            earlier = first.get(rid)
            keep.append(earlier is None)
            if earlier is None:
                continue
            dups.append(rid)
            reason = duplicate_id(rid, location(earlier))
            rejects.append(Reject(location((ref, line)), reason,
                                  json_text(orjson.loads(lines[line - chunk.first]))))
            moved[duplicate_id(rid, location((ref, line)))] = reason
        seen.record([r for r, k in zip(ids, keep, strict=True) if k],
                    [(ref, line) for line, k in zip(kept, keep, strict=True) if k])
        gone = pa.array(dups, pa.string())
        imported = [t.filter(pc.invert(pc.is_in(t.column("record_id"), value_set=gone)))
                    for t in imported]
        return table.filter(pa.array(keep)), imported, rejects, moved
