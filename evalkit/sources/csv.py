"""``csv``: comma-separated files with a header row."""

from __future__ import annotations

import csv
import io
from collections.abc import Iterator
from typing import Any

import pyarrow as pa

from evalkit.context import RunContext
from evalkit.sources._mapping import Where, batches
from evalkit.sources.files import FileSourceConfig, builder_for, fingerprint, resolve_paths


class CsvSource:
    """Reads CSV with a header row. Empty cells are null; a cell holding JSON text can be
    walked with a dotted path (``response.text``). A row with the wrong number of cells or
    bytes that are not UTF-8 becomes a reject (file:line, reason)."""

    Config = FileSourceConfig

    def __init__(self, name: str, config: FileSourceConfig, ctx: RunContext) -> None:
        self.name = name
        self.config = config
        self.ctx = ctx
        self.paths = resolve_paths(config.path, "CSV")

    def fingerprint(self) -> dict[str, Any]:
        return fingerprint(self.paths)

    def _rows(self) -> Iterator[tuple[Any, Where]]:
        for path in self.paths:
            ref = (str(path), path.name)
            with path.open("rb") as raw:
                text = io.TextIOWrapper(raw, encoding="utf-8", errors="surrogateescape",
                                        newline="")
                reader = csv.reader(text)
                header = next(reader, None)
                if header is None:
                    continue
                line = reader.line_num
                for cells in reader:
                    start, line = line + 1, reader.line_num
                    location = f"{path}:{start}"
                    joined = ",".join(cells)
                    if any("\udc80" <= ch <= "\udcff" for ch in joined):
                        self.ctx.reject(self.name, location, "not UTF-8; re-encode the file "
                                        "as UTF-8", joined.encode("utf-8", "surrogateescape")
                                        .decode("utf-8", "backslashreplace"))
                        continue
                    if not any(cells):
                        continue
                    if len(cells) != len(header):
                        self.ctx.reject(self.name, location, f"expected {len(header)} cells "
                                        f"(the header's), got {len(cells)}", joined)
                        continue
                    row = {k: (v or None) for k, v in zip(header, cells, strict=True)}
                    yield row, (ref, start)

    def read(self) -> Iterator[pa.Table]:
        yield from batches(builder_for(self.name, self.config, self.ctx), self._rows(),
                           self.config.batch_size)
