"""HTTP details shared by the clients evalkit runs (the LLM judge transports, Langfuse)."""

from __future__ import annotations

import random
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


def backoff_seconds(retry: int, first: float, longest: float) -> float:
    """The wait before retry number ``retry`` (0 for the first): exponential from ``first``,
    capped at ``longest``, with equal jitter (half fixed, half random) so that clients failing
    together do not come back together."""
    wait = min(longest, first * 2 ** retry)
    return wait / 2 + random.uniform(0, wait / 2)
