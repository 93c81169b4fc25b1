"""``time_range``: keeps records whose timestamp falls in ``[start, end)``."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

import pyarrow as pa
import pyarrow.compute as pc

from evalkit._time import iso_time
from evalkit.plugin import Filter

__all__ = ["parse_time", "TimeRangeConfig", "TimeRangeFilter"]


def parse_time(text: str, key: str) -> datetime:
    """An ISO-8601 timestamp (``2026-11-01``, ``2026-11-01T12:00:00Z``); UTC when no zone."""
    try:
        return iso_time(text)
    except ValueError:
        raise ValueError(f"{key}: {text!r} is not an ISO-8601 timestamp "
                         "(e.g. 2026-11-01 or 2026-11-01T12:00:00Z)") from None


@dataclass(frozen=True)
class TimeRangeConfig:
    start: str | None = None  # ISO-8601; records before it are set aside (inclusive bound)
    end: str | None = None  # ISO-8601; records at or after it are set aside
    exclude_null: bool = True  # set aside records that have no timestamp

    def validate(self) -> None:
        if self.start is None and self.end is None:
            raise ValueError("set start, end or both (ISO-8601 timestamps)")
        start = parse_time(self.start, "start") if self.start else None
        end = parse_time(self.end, "end") if self.end else None
        if start and end and start >= end:
            raise ValueError(f"start ({self.start}) must be before end ({self.end})")


class TimeRangeFilter(Filter):
    """Marks records outside ``[start, end)`` (and, by default, records with no timestamp)."""

    Config = TimeRangeConfig

    def __init__(self, name: str, config: TimeRangeConfig, ctx: object) -> None:
        self.config = config
        self.start = parse_time(config.start, "start") if config.start else None
        self.end = parse_time(config.end, "end") if config.end else None

    def mark(self, batch: pa.RecordBatch) -> pa.Array:
        """Why each record is outside the window, or null."""
        ts = batch.column("timestamp")
        typ = ts.type
        out = pa.nulls(batch.num_rows, pa.string())
        if self.start is not None:
            before = pc.fill_null(pc.less(ts, pa.scalar(self.start, typ)), False)
            out = pc.if_else(before, f"timestamp before {self.config.start}", out)
        if self.end is not None:
            after = pc.fill_null(pc.greater_equal(ts, pa.scalar(self.end, typ)), False)
            out = pc.if_else(after, f"timestamp at or after {self.config.end}", out)
        if self.config.exclude_null:
            out = pc.if_else(pc.is_null(ts), "timestamp is null", out)
        return out
