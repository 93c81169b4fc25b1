"""``jsonl``: one JSON object per line, from files or a glob; ``.gz`` files are gunzipped."""

from __future__ import annotations

import glob
import gzip
import hashlib
import os
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson
import pyarrow as pa

from evalkit.context import RunContext
from evalkit.errors import SourceError
from evalkit.sources._mapping import RecordBuilder, Where, batches


@dataclass(frozen=True)
class FileSourceConfig:
    path: str = "???"  # a file or a glob (*.jsonl, data/**/*.csv), relative to the working dir
    fields: dict[str, str] = field(default_factory=dict)  # record column -> dotted path in a row
    record_id: str | None = None  # dotted path of a stable id; default: file name and line
    required: list[str] = field(default_factory=list)  # record columns a row must have
    scores: dict[str, str] = field(default_factory=dict)  # imported judge name -> dotted path
    scores_list: str | None = None  # path of a list of {name, value, comment} scores
    extra_to_metadata: bool = True  # keep unmapped top-level keys in the metadata column
    batch_size: int = 50_000  # rows per record batch


def resolve_paths(pattern: str, what: str) -> list[Path]:
    paths = sorted(Path(p) for p in glob.glob(os.path.expanduser(pattern), recursive=True))
    paths = [p for p in paths if p.is_file()]
    if not paths:
        raise SourceError(f"source.path: no {what} file matches '{pattern}' (working directory "
                          f"{os.getcwd()}); fix the path or the glob")
    return paths


def fingerprint(paths: list[Path]) -> dict[str, Any]:
    """Name, size, mtime and a hash of each file's first MiB and size (cheap, stable)."""
    out = {}
    for p in paths:
        st = p.stat()
        with p.open("rb") as fh:
            head = hashlib.sha256(fh.read(1 << 20) + str(st.st_size).encode()).hexdigest()
        out[str(p)] = {"bytes": st.st_size, "mtime": st.st_mtime, "sha256_head": head}
    return out


def builder_for(name: str, cfg: FileSourceConfig, ctx: RunContext) -> RecordBuilder:
    return RecordBuilder(name, ctx, cfg.fields, list(cfg.required), cfg.record_id,
                         cfg.scores, cfg.scores_list, cfg.extra_to_metadata)


def _decode_problem(line: bytes, exc: Exception) -> str:
    try:
        line.decode("utf-8")
    except UnicodeDecodeError as bad:
        return (f"not UTF-8 ({bad.reason} at byte {bad.start}); re-encode the file as UTF-8")
    return f"malformed JSON: {exc}"


class JsonlSource:
    """Reads JSON Lines. A line that is not valid UTF-8, not JSON, not an object, lacks a
    required field or has a value of the wrong type becomes a reject (file:line, reason)."""

    Config = FileSourceConfig

    def __init__(self, name: str, config: FileSourceConfig, ctx: RunContext) -> None:
        self.name = name
        self.config = config
        self.ctx = ctx
        self.paths = resolve_paths(config.path, "JSONL")

    def fingerprint(self) -> dict[str, Any]:
        return fingerprint(self.paths)

    def _rows(self) -> Iterator[tuple[Any, Where]]:
        loads = orjson.loads
        for path in self.paths:
            opener = gzip.open if path.suffix == ".gz" else open
            ref = (str(path), path.name)
            with opener(path, "rb") as fh:
                for lineno, line in enumerate(fh, 1):
                    try:
                        obj = loads(line)
                    except orjson.JSONDecodeError as exc:
                        if line.strip():
                            self.ctx.reject(self.name, f"{path}:{lineno}",
                                            _decode_problem(line, exc),
                                            line.decode("utf-8", "backslashreplace"))
                        continue
                    yield obj, (ref, lineno)

    def read(self) -> Iterator[pa.Table]:
        yield from batches(builder_for(self.name, self.config, self.ctx), self._rows(),
                           self.config.batch_size)
