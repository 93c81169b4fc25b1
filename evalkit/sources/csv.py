"""``csv``: comma-separated files with a header row (plain or gzip, with or without a UTF-8
byte-order mark: see :mod:`evalkit.sources._input`); tab-separated for ``.tsv``, and ``;`` or
``|`` when the header row holds no comma but those (a spreadsheet's European CSV)."""

from __future__ import annotations

import csv
import io
import itertools
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from evalkit.context import RunContext
from evalkit.errors import SourceError
from evalkit.plugin import Source, SourceItem
from evalkit.sources._input import HEAD, Input, head_text, open_input
from evalkit.sources._mapping import Where, batches
from evalkit.sources.files import FileSourceConfig, builder_for, fingerprint, resolve_paths

__all__ = ["CsvSource", "Note", "Rejecter", "delimiter"]

Note = tuple[int, str, str | None]  # (line, reason, raw) of a line the reader could not take
Rejecter = Callable[..., None]  # (location, reason, raw=None): input that is not a record
NEWLINES = ("\n", "\r")


class _Lines:
    """A CSV file's physical lines as text (bytes that are not UTF-8 kept as surrogates, so
    the row holding them is rejected, not the file), in segments: a segment ends before a
    line over ``limit`` characters (skipped, never held whole) or where damaged gzip data
    cuts a line short, and ``cut`` says which. The csv module reads each segment afresh, so a
    quote left open by a skipped line cannot swallow the rows after it."""

    def __init__(self, source: Input, limit: int) -> None:
        self.source, self.limit = source, limit
        self.text = io.TextIOWrapper(source.stream, encoding="utf-8", errors="surrogateescape",
                                     newline="")
        self.number = 0  # lines read so far
        self.cut: Note | None = None  # why the last segment ended before the file did
        self.ended = False  # the current segment has no more lines
        self.done = False  # nor has the file

    def segment(self) -> Iterator[str]:
        self.ended, self.cut = False, None
        limit, fault = self.limit, self.source.fault_message
        while True:
            line = self.text.readline(limit + 2)  # (a line of limit characters, then CRLF)
            if not line:
                self.done = True
                if self.source.fault:  # the damage came after a whole line
                    self.cut = (self.number + 1, fault(), None)
                break
            self.number += 1
            ended = line.endswith(NEWLINES)
            if len(line.rstrip("\r\n")) > limit:
                head = line[:HEAD]
                while not ended and (more := self.text.readline(1 << 20)):
                    ended = more.endswith(NEWLINES)
                self.cut = (self.number, f"line is over source.max_line_bytes ({limit:,} "
                            "characters); it was skipped, not read (raise "
                            "source.max_line_bytes to read it)", _raw(head) + "…")
                break
            if not ended and self.source.fault:  # cut short by the damage
                self.cut, self.done = (self.number, fault(), head_text(_bytes(line))), True
                break
            yield line
        self.ended = True


def delimiter(name: str, header: str) -> str:
    """The delimiter of a file named ``name`` whose header line is ``header``: a tab for
    ``.tsv``; else a comma, unless the header holds none and holds ``;``, a tab or ``|``."""
    if name.lower().removesuffix(".gz").endswith(".tsv"):
        return "\t"
    if "," in header:
        return ","
    counts = {sep: header.count(sep) for sep in (";", "\t", "|")}
    best = max(counts, key=counts.__getitem__)
    return best if counts[best] else ","


def _bytes(text: str) -> bytes:
    return text.encode("utf-8", "surrogateescape")


def _raw(text: str) -> str:
    """Text as read (bytes that are not UTF-8 as surrogates) for a reject: those bytes
    escaped."""
    return _bytes(text).decode("utf-8", "backslashreplace")


def _check_header(path: Path, header: list[str] | None) -> list[str] | None:
    """``header`` checked: UTF-8 and no name twice (else the rows could not be mapped)."""
    if header is None:
        return None
    joined = ",".join(header)
    bad = next((i for i, ch in enumerate(joined) if "\udc80" <= ch <= "\udcff"), None)
    if bad is not None:
        raise SourceError(f"{path}:1: the header row is not UTF-8 (byte "
                          f"0x{ord(joined[bad]) - 0xdc00:02x}); save the file as UTF-8 (a "
                          "spreadsheet's \"CSV UTF-8\")")
    twice = sorted({h for h in header if header.count(h) > 1})
    if twice:
        raise SourceError(f"{path}:1: the header names column '{twice[0]}' more than once; "
                          "rename one of them")
    return header


class CsvSource(Source):
    """Reads CSV with a header row. Empty cells are null; a cell holding JSON text can be
    walked with a dotted path (``response.text``). A row with the wrong number of cells, bytes
    that are not UTF-8 or a line over ``max_line_bytes`` becomes a reject (file:line,
    reason)."""

    Config = FileSourceConfig

    def __init__(self, name: str, config: FileSourceConfig, ctx: RunContext) -> None:
        self.name = name
        self.config = config
        self.ctx = ctx
        self.paths = resolve_paths(config.path, "CSV")
        # a cell (which may span lines) is held to the line limit too (the csv module's cap)
        csv.field_size_limit(config.max_line_bytes)
        for path in self.paths:  # a file or header that cannot be read stops the run now
            with open_input(path) as source:
                self._header(path, _Lines(source, config.max_line_bytes))

    def fingerprint(self) -> dict[str, Any]:
        return fingerprint(self.paths)

    def _header(self, path: Path, lines: _Lines) -> tuple[list[str] | None, Any, str]:
        """The file's header row (``None`` for a file without one), the reader of the rest
        of its first segment, and the file's delimiter."""
        segment = lines.segment()
        first = next(segment, "")
        sep = delimiter(path.name, first)
        reader = csv.reader(itertools.chain([first] if first else [], segment), delimiter=sep)
        try:
            header = next(reader, None)
        except csv.Error as exc:
            raise SourceError(f"{path}:1: the header row is not CSV ({exc}); fix the file's "
                              "first line") from None
        if header is None and lines.cut is not None and lines.cut[0] == 1:
            raise SourceError(f"{path}:1: the header row is over source.max_line_bytes "
                              f"({self.config.max_line_bytes:,} characters); raise it")
        return _check_header(path, header), reader, sep

    def _rows(self, reject: Rejecter) -> Iterator[tuple[Any, Where]]:
        for path in self.paths:
            ref = (str(path), path.name)
            with open_input(path) as source:
                lines = _Lines(source, self.config.max_line_bytes)
                header, reader, sep = self._header(path, lines)
                end = lines.number
                while header is not None:
                    for row, start in self._segment(path, header, reader, lines, end,
                                                    reject):
                        yield row, (ref, start)
                    if lines.cut is not None:
                        reject(f"{path}:{lines.cut[0]}", *lines.cut[1:])
                    if lines.done:
                        break
                    end = lines.number
                    reader = csv.reader(lines.segment(), delimiter=sep)
                if header is None and lines.cut is not None:  # damage in the header's line
                    reject(f"{path}:{lines.cut[0]}", *lines.cut[1:])

    def _segment(self, path: Path, header: list[str], reader: Any, lines: _Lines,
                 end: int, reject: Rejecter) -> Iterator[tuple[dict[str, Any], int]]:
        """The rows ``reader`` reads from a segment of the file (after line ``end``), each
        with its first line's number; the others rejected."""
        while True:
            start = end + 1
            try:
                cells = next(reader)
            except StopIteration:
                return
            except csv.Error as exc:
                end = lines.number
                why = "a cell is over source.max_line_bytes (an unclosed quote?)" \
                    if "field limit" in str(exc) else f"not CSV: {exc}"
                reject(f"{path}:{start}", why)
                continue
            end = lines.number
            if lines.ended and lines.cut is not None and any(cells):
                # the row was still open (a quoted cell) where the segment ended
                reject(f"{path}:{start}", f"the row runs into line "
                                f"{lines.cut[0]}, which cannot be read: {lines.cut[1]}",
                                _raw(",".join(cells)))
                continue
            row = self._row(path, header, cells, start, reject)
            if row is not None:
                yield row, start

    def _row(self, path: Path, header: list[str], cells: list[str], start: int,
             reject: Rejecter) -> dict[str, Any] | None:
        location = f"{path}:{start}"
        joined = ",".join(cells)
        if any("\udc80" <= ch <= "\udcff" for ch in joined):
            reject(location, "not UTF-8; re-encode the file as UTF-8", _raw(joined))
            return None
        if not any(cells):
            return None
        if len(cells) != len(header):
            reject(location, f"expected {len(header)} cells (the header's), got {len(cells)}",
                   joined)
            return None
        return {k: (v or None) for k, v in zip(header, cells, strict=True)}

    def read(self) -> Iterator[SourceItem]:
        builder = builder_for(self.name, self.config)
        yield from batches(builder, self._rows(builder.reject), self.config.batch_size)
