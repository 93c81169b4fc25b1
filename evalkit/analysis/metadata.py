"""A record's ``metadata`` JSON read back: the object itself, and the lists sources keep
inside it (an agent turn's ``tool_calls``, a trace's ``spans``) for the metrics that count
them."""

from __future__ import annotations

from typing import Any

import orjson

__all__ = ["metadata_object", "metadata_objects"]


def metadata_object(metadata: Any) -> dict[str, Any] | None:
    """A record's metadata JSON as a dict: ``{}`` when there is none (null or empty), None
    when it is not JSON or not a JSON object (the caller says what that means)."""
    if not isinstance(metadata, str) or not metadata:
        return {}
    try:
        meta = orjson.loads(metadata)
    except orjson.JSONDecodeError:
        return None
    return meta if isinstance(meta, dict) else None


def metadata_objects(metadata: str | None, key: str) -> list[dict[str, Any]]:
    """The objects of the list under ``key`` in a record's metadata JSON; [] when there is no
    metadata, it is not JSON, or ``key`` holds no list (a record without them)."""
    items = (metadata_object(metadata) or {}).get(key)
    return [x for x in items if isinstance(x, dict)] if isinstance(items, list) else []
