"""HTTP details shared by the clients evalkit runs (the LLM judge transports, Langfuse)."""

from __future__ import annotations

import random
import re
import time
from dataclasses import dataclass
from datetime import datetime
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


# a Go-style duration as OpenAI sends in x-ratelimit-reset-*: "20ms", "1s", "6m0s", "1h2m3.5s"
_DURATION = re.compile(r"(\d+(?:\.\d+)?)(ms|us|µs|ns|h|m|s)")
_UNIT_S = {"h": 3600.0, "m": 60.0, "s": 1.0, "ms": 1e-3, "us": 1e-6, "µs": 1e-6, "ns": 1e-9}


@dataclass(frozen=True)
class Quota:
    """One rate-limit dimension (requests or tokens) as a provider reported it."""

    limit: float | None  # the bucket's size (x-ratelimit-limit-*)
    remaining: float  # what is left now (x-ratelimit-remaining-*)
    reset_s: float | None  # seconds until the bucket is full again (x-ratelimit-reset-*)

    def refill_per_s(self) -> float | None:
        """The rate the bucket refills at, when the provider said enough to tell: OpenAI's
        and Anthropic's reset is the time until the bucket is full again."""
        if self.limit is None or not self.reset_s or self.limit <= self.remaining:
            return None
        return (self.limit - self.remaining) / self.reset_s


def duration_seconds(value: str) -> float | None:
    """Seconds in a reset header: a number of seconds, a Go duration (``6m0s``, ``20ms``)
    or an RFC 3339 / HTTP date (Anthropic's ``...-reset``: when the bucket is full)."""
    value = value.strip()
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    parts = _DURATION.findall(value)
    if parts and "".join(n + u for n, u in parts) == value:
        return sum(float(n) * _UNIT_S[u] for n, u in parts)
    try:
        when = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        try:
            when = parsedate_to_datetime(value)
        except (TypeError, ValueError):
            return None
    if when.tzinfo is None:
        return None
    return max(0.0, when.timestamp() - time.time())


def _header(headers: Any, names: tuple[str, ...]) -> str | None:
    for name in names:
        value = headers.get(name)
        if value:
            return str(value)
    return None


def _number(value: str | None) -> float | None:
    if value is None:
        return None
    try:
        number = float(value)
    except ValueError:
        return None
    return number if number >= 0 and number == number and number != float("inf") else None


def rate_limit_quotas(headers: Any) -> dict[str, Quota]:
    """The provider's rate-limit headers, by dimension (``requests``, ``tokens``): OpenAI's
    ``x-ratelimit-{limit,remaining,reset}-{requests,tokens}``, Anthropic's
    ``anthropic-ratelimit-{requests,tokens}-{limit,remaining,reset}``, and both as litellm
    passes them on (prefixed ``llm_provider-``). A dimension without a readable
    ``remaining`` is left out."""
    if not headers or not any("ratelimit" in str(k).lower() for k in headers.keys()):
        return {}  # (one pass over a few names: most answers carry none)
    out: dict[str, Quota] = {}
    for dim in ("requests", "tokens"):
        def names(kind: str, dim: str = dim) -> tuple[str, ...]:
            plain = (f"x-ratelimit-{kind}-{dim}", f"anthropic-ratelimit-{dim}-{kind}")
            return (*plain, *(f"llm_provider-{n}" for n in plain))

        remaining = _number(_header(headers, names("remaining")))
        if remaining is None:
            continue
        reset = _header(headers, names("reset"))
        out[dim] = Quota(_number(_header(headers, names("limit"))), remaining,
                         duration_seconds(reset) if reset else None)
    return out
