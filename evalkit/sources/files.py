"""What the file sources (``jsonl``, ``csv``) share: their settings, finding the files, the
manifest's fingerprint of them and the record builder that maps their rows."""

from __future__ import annotations

import glob
import hashlib
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from evalkit.errors import SourceError
from evalkit.sources._mapping import RecordBuilder
from evalkit.sources._transforms import field_spec

__all__ = ["FileSourceConfig", "builder_for", "fingerprint", "resolve_paths"]


@dataclass(frozen=True)
class FileSourceConfig:
    path: str = "???"  # a file or a glob (*.jsonl, data/**/*.csv), relative to the working dir
    # record column -> dotted path in a row, a list of paths (the first non-null one wins), or
    # {path, scale, map, default}: the value times scale, mapped to another, default if none
    fields: dict[str, Any] = field(default_factory=dict)
    record_id: str | None = None  # dotted path of a stable id; default: file name and line
    required: list[str] = field(default_factory=list)  # record columns a row must have
    scores: dict[str, str] = field(default_factory=dict)  # imported judge name -> dotted path
    scores_list: str | None = None  # path of a list of {name, value, comment} scores
    extra_to_metadata: bool = True  # keep unmapped top-level keys in the metadata column
    # text: an input or output mapped in fields to a list of chat messages becomes the last
    # user message / the assistant's text, the list kept in metadata.input_messages /
    # output_messages; raw: the JSON of the list
    chat_messages: str = "text"
    batch_size: int = 50_000  # rows per record batch
    # a longer line (bytes, without its newline) is a reject, skipped without being held in
    # memory; lines up to it are read whatever their size
    max_line_bytes: int = 32 << 20

    def validate(self) -> None:
        if self.chat_messages not in ("text", "raw"):
            raise ValueError(f"chat_messages: {self.chat_messages!r} is not one of text, raw")
        for col, spec in self.fields.items():
            field_spec(col, spec)
        if self.max_line_bytes < 1:
            raise ValueError(f"max_line_bytes: {self.max_line_bytes} is not a positive number "
                             "of bytes; use e.g. 33554432 (32 MiB, the default)")
        if self.batch_size < 1:
            raise ValueError(f"batch_size: {self.batch_size} is not a positive number of rows")


def resolve_paths(pattern: str, what: str) -> list[Path]:
    matched = sorted(Path(p) for p in glob.glob(os.path.expanduser(pattern), recursive=True))
    paths = [p for p in matched if p.is_file()]
    if not paths and matched and all(p.is_dir() for p in matched):
        raise SourceError(f"source.path: '{pattern}' is a directory, not a {what} file; point "
                          f"at the files in it ('{os.path.join(pattern, '*')}')")
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


def builder_for(name: str, cfg: FileSourceConfig) -> RecordBuilder:
    """A new builder for ``cfg``'s mapping. What the mapping decides (paths, plan, checks)
    is worked out once per config object and copied: a chunk per small file made it again
    for each of 5,000 files, most of their cost."""
    made = _BUILDER.get("made")
    if made is None or _BUILDER.get("for") != (name, id(cfg)) or _BUILDER.get("cfg") is not cfg:
        made = RecordBuilder(name, cfg.fields, list(cfg.required), cfg.record_id,
                             cfg.scores, cfg.scores_list, cfg.extra_to_metadata,
                             cfg.chat_messages)
        # (the config is kept too, so its id names it while the builder is kept)
        _BUILDER.update({"made": made, "for": (name, id(cfg)), "cfg": cfg})
    return made.fresh()


_BUILDER: dict[str, Any] = {}  # the last config's builder, to copy
