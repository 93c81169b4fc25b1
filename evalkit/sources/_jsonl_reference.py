"""The plain JSONL reader: one line at a time, parsed with orjson and mapped by one
:class:`RecordBuilder`. It is the reference for :class:`evalkit.sources.jsonl.JsonlSource`,
whose blocks, pieces, typed decoding and worker processes are there for speed only: on every
input the two must give the same records, rejects and imported scores (the tests compare
them). It is not used by runs."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import orjson

from evalkit.plugin import SourceItem
from evalkit.sources._input import bounded_line, decode_problem, head_text, open_input
from evalkit.sources._mapping import Where, batches
from evalkit.sources.files import FileSourceConfig, builder_for, resolve_paths


def read_plainly(name: str, config: FileSourceConfig) -> Iterator[SourceItem]:
    """The records of the files ``config.path`` names, ``batch_size`` at a time, with the
    rejects and imported scores, as the fast reader yields them."""
    builder = builder_for(name, config)
    yield from batches(builder, _objects(config, builder.reject), config.batch_size)


def _objects(config: FileSourceConfig,
             reject: Callable[..., None]) -> Iterator[tuple[Any, Where]]:
    limit = config.max_line_bytes
    for path in resolve_paths(config.path, "JSONL"):
        ref = (str(path), path.name)
        with open_input(path) as source:
            lineno, cut_short = 0, False
            while True:
                line, length, read = bounded_line(source.stream, 0, limit)
                if not read:
                    break
                lineno += 1
                where = f"{path}:{lineno}"
                if length > limit:
                    reject(where, f"line of {length:,} bytes is over "
                           f"source.max_line_bytes ({limit:,}); it was skipped, not read "
                           "(raise source.max_line_bytes to read it)", head_text(line))
                    continue
                if not line.endswith(b"\n") and source.fault:  # cut short by the damage
                    reject(where, source.fault_message(), head_text(line))
                    cut_short = True
                    break
                line = line[:-1] if line.endswith(b"\n") else line
                try:
                    obj = orjson.loads(line)
                except orjson.JSONDecodeError as exc:
                    if line.strip():
                        reject(where, decode_problem(line, exc),
                               line.decode("utf-8", "backslashreplace"))
                    continue
                yield obj, (ref, lineno)
            if source.fault and not cut_short:  # the damage came after a whole line
                reject(f"{path}:{lineno + 1}", source.fault_message())
