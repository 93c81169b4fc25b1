"""ISO-8601 text as an aware datetime: the one reading shared by the sources (record
timestamps, the Langfuse API) and the time_range filter."""

from __future__ import annotations

from datetime import datetime, timezone


def iso_time(text: str) -> datetime:
    """``text`` (``2026-11-01``, ``2026-11-01T12:00:00Z``, with any offset) as an aware
    datetime, UTC when it names no zone; ``ValueError`` when it is not ISO-8601."""
    ts = datetime.fromisoformat(text.replace("Z", "+00:00"))
    return ts if ts.tzinfo else ts.replace(tzinfo=timezone.utc)
