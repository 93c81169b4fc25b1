"""``level``: sets aside records by their observation level (``ERROR``, ``WARNING``, …)."""

from __future__ import annotations

from dataclasses import dataclass, field

import pyarrow as pa
import pyarrow.compute as pc

from evalkit.plugin import Filter

__all__ = ["LevelConfig", "LevelFilter"]


@dataclass(frozen=True)
class LevelConfig:
    exclude: list[str] = field(default_factory=lambda: ["ERROR"])  # levels to set aside
    include: list[str] | None = None  # if set, set aside every level not listed here
    exclude_null: bool = False  # set aside records with no level at all

    def validate(self) -> None:
        if self.include is not None and not self.include:
            raise ValueError("include: an empty list would set aside every record; "
                             "leave it null to keep all levels")


class LevelFilter(Filter):
    """Marks records whose level is in ``exclude`` (or, with ``include``, not in it).
    Levels compare case-insensitively."""

    Config = LevelConfig

    def __init__(self, name: str, config: LevelConfig, ctx: object) -> None:
        self.config = config

    def mark(self, batch: pa.RecordBatch) -> pa.Array:
        """``level=X`` for each record set aside, null otherwise."""
        cfg = self.config
        level = pc.utf8_upper(batch.column("level"))
        why = pc.binary_join_element_wise("level=", level, "")
        out = pa.nulls(batch.num_rows, pa.string())
        if cfg.exclude:
            hit = pc.is_in(level, pa.array([v.upper() for v in cfg.exclude]))
            out = pc.if_else(pc.fill_null(hit, False), why, out)
        if cfg.include is not None:
            keep = pc.is_in(level, pa.array([v.upper() for v in cfg.include]))
            why_not = pc.fill_null(pc.binary_join_element_wise(why, " (not in include)", ""),
                                   "level is null (not in include)")
            out = pc.if_else(pc.and_(pc.is_null(out), pc.invert(pc.fill_null(keep, False))),
                             why_not, out)
        if cfg.exclude_null:
            out = pc.if_else(pc.and_(pc.is_null(out), pc.is_null(level)), "level is null", out)
        return out
