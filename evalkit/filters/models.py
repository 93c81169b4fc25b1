"""``models``: keeps or sets aside records by model name, with shell-style wildcards
(``gpt-4o*``, ``*-instruct``)."""

from __future__ import annotations

import re
from dataclasses import dataclass, field

import pyarrow as pa
import pyarrow.compute as pc

from evalkit.plugin import Filter

__all__ = ["glob_regex", "ModelsConfig", "ModelsFilter"]


@dataclass(frozen=True)
class ModelsConfig:
    include: list[str] = field(default_factory=list)  # if set, only these models are kept
    exclude: list[str] = field(default_factory=list)  # these models are set aside
    ignore_case: bool = True  # compare names case-insensitively

    def validate(self) -> None:
        if not self.include and not self.exclude:
            raise ValueError("set include or exclude (model names, wildcards allowed)")


def glob_regex(pattern: str) -> str:
    """A shell wildcard (``*`` any run, ``?`` one character) as an anchored RE2 regex."""
    body = "".join(".*" if c == "*" else "." if c == "?" else re.escape(c) for c in pattern)
    return f"^(?:{body})$"


def _matches(model: pa.Array, patterns: list[str], ignore_case: bool) -> pa.Array:
    regex = "|".join(glob_regex(p) for p in patterns)
    return pc.fill_null(pc.match_substring_regex(model, regex, ignore_case=ignore_case), False)


class ModelsFilter(Filter):
    """Marks records whose model is not in ``include`` (when given) or is in ``exclude``.
    A record with no model is set aside only when ``include`` is given."""

    Config = ModelsConfig

    def __init__(self, name: str, config: ModelsConfig, ctx: object) -> None:
        self.config = config

    def mark(self, batch: pa.RecordBatch) -> pa.Array:
        """Why each record's model is set aside, or null."""
        cfg = self.config
        model = batch.column("model")
        out = pa.nulls(batch.num_rows, pa.string())
        if cfg.exclude:
            hit = _matches(model, list(cfg.exclude), cfg.ignore_case)
            out = pc.if_else(hit, pc.binary_join_element_wise("model ", model, " is excluded",
                                                              ""), out)
        if cfg.include:
            keep = _matches(model, list(cfg.include), cfg.ignore_case)
            why = pc.fill_null(
                pc.binary_join_element_wise("model ", model, " is not included", ""),
                "model is null (not included)")
            out = pc.if_else(pc.and_(pc.is_null(out), pc.invert(keep)), why, out)
        return out
