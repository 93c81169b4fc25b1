"""Lists that sources keep inside a record's ``metadata`` JSON (an agent turn's
``tool_calls``, a trace's ``spans``), read back by the metrics that count them."""

from __future__ import annotations

from typing import Any

import orjson

__all__ = ["metadata_objects"]


def metadata_objects(metadata: str | None, key: str) -> list[dict[str, Any]]:
    """The objects of the list under ``key`` in a record's metadata JSON; [] when there is no
    metadata, it is not JSON, or ``key`` holds no list (a record without them)."""
    if not metadata:
        return []
    try:
        meta = orjson.loads(metadata)
    except orjson.JSONDecodeError:
        return []
    items = meta.get(key) if isinstance(meta, dict) else None
    return [x for x in items if isinstance(x, dict)] if isinstance(items, list) else []
