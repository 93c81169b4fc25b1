"""HTTP details shared by the clients evalkit runs (the LLM judge transports, Langfuse)."""

from __future__ import annotations

import time
from email.utils import parsedate_to_datetime
from typing import Any


def retry_after_seconds(headers: Any) -> float | None:
    """Seconds to wait from ``Retry-After`` (seconds or an HTTP date) or ``retry-after-ms``."""
    if not headers:
        return None
    ms = headers.get("retry-after-ms")
    if ms:
        try:
            return max(0.0, float(ms) / 1000)
        except ValueError:
            pass
    value = headers.get("retry-after")
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        return max(0.0, parsedate_to_datetime(value).timestamp() - time.time())
    except (TypeError, ValueError):
        return None
