"""``csv``: comma-separated files with a header row (plain or gzip, with or without a UTF-8
byte-order mark: see :mod:`evalkit.sources._input`)."""

from __future__ import annotations

import csv
import io
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from evalkit.context import RunContext
from evalkit.errors import SourceError
from evalkit.plugin import Source, SourceItem
from evalkit.sources._input import Input, head_text, open_input
from evalkit.sources._mapping import Where, batches
from evalkit.sources.files import FileSourceConfig, builder_for, fingerprint, resolve_paths

Note = tuple[int, str, str | None]  # (line, reason, raw) of a line the reader could not take
Rejecter = Callable[..., None]  # (location, reason, raw=None): input that is not a record


def _lines(source: Input, limit: int, notes: list[Note]) -> Iterator[str]:
    """The file's physical lines as text (bytes that are not UTF-8 kept as surrogates, so the
    row holding them is rejected, not the file), a line over ``limit`` characters given as
    blank and noted, never held whole; damaged gzip data noted where it starts."""
    text = io.TextIOWrapper(source.stream, encoding="utf-8", errors="surrogateescape",
                            newline="")
    number = 0
    while True:
        line = text.readline(limit + 1)
        if not line:
            break
        number += 1
        if len(line) > limit and not line.endswith(("\n", "\r")):
            head = line[:1000]
            while (more := text.readline(1 << 20)) and not more.endswith(("\n", "\r")):
                pass
            notes.append((number, f"line is over source.max_line_bytes ({limit:,} "
                          "characters); it was skipped, not read (raise "
                          "source.max_line_bytes to read it)",
                          head.encode("utf-8", "surrogateescape").decode("utf-8",
                                                                         "backslashreplace")
                          + "…"))
            line = "\n"
        elif source.fault and not line.endswith(("\n", "\r")):  # (the end: cut short)
            notes.append((number, source.fault_message(), head_text(
                line.encode("utf-8", "surrogateescape"))))
            return
        yield line
    if source.fault:  # the damage came after a whole line
        notes.append((number + 1, source.fault_message(), None))


def _header(path: Path, header: list[str] | None) -> list[str] | None:
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
                _header(path, next(csv.reader(_lines(source, config.max_line_bytes, [])),
                                   None))

    def fingerprint(self) -> dict[str, Any]:
        return fingerprint(self.paths)

    def _rows(self, reject: Rejecter) -> Iterator[tuple[Any, Where]]:
        for path in self.paths:
            ref = (str(path), path.name)
            with open_input(path) as source:
                notes: list[Note] = []
                reader = csv.reader(_lines(source, self.config.max_line_bytes, notes))
                header = _header(path, next(reader, None))
                if header is None:
                    self._noted(path, notes, None, reject)
                    continue
                line = reader.line_num
                while True:
                    start = line + 1
                    try:
                        cells = next(reader)
                    except StopIteration:
                        break
                    except csv.Error as exc:
                        line = reader.line_num
                        why = "a cell is over source.max_line_bytes (an unclosed quote?)" \
                            if "field limit" in str(exc) else f"not CSV: {exc}"
                        reject(f"{path}:{start}", why)
                        continue
                    line = reader.line_num
                    if self._noted(path, notes, line, reject):  # the row holds a line not read
                        continue
                    row = self._row(path, header, cells, start, reject)
                    if row is not None:
                        yield row, (ref, start)
                self._noted(path, notes, None, reject)

    def _noted(self, path: Path, notes: list[Note], upto: int | None,
               reject: Rejecter) -> bool:
        """Reject the noted lines up to line ``upto`` (all: ``None``); say whether the row
        ending there holds one of them."""
        held = False
        while notes and (upto is None or notes[0][0] <= upto):
            number, reason, raw = notes.pop(0)
            reject(f"{path}:{number}", reason, raw)
            held = held or upto is not None
        return held

    def _row(self, path: Path, header: list[str], cells: list[str], start: int,
             reject: Rejecter) -> dict[str, Any] | None:
        location = f"{path}:{start}"
        joined = ",".join(cells)
        if any("\udc80" <= ch <= "\udcff" for ch in joined):
            reject(location, "not UTF-8; re-encode the file as UTF-8",
                            joined.encode("utf-8", "surrogateescape")
                            .decode("utf-8", "backslashreplace"))
            return None
        if not any(cells):
            return None
        if len(cells) != len(header):
            reject(location, f"expected {len(header)} cells (the "
                            f"header's), got {len(cells)}", joined)
            return None
        return {k: (v or None) for k, v in zip(header, cells, strict=True)}

    def read(self) -> Iterator[SourceItem]:
        builder = builder_for(self.name, self.config)
        yield from batches(builder, self._rows(builder.reject), self.config.batch_size)
