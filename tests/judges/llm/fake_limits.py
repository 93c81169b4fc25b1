"""A provider's rate limits for the fake server (``FakeLLMServer.plan``), scaled to seconds
so a test takes seconds: requests a second, tokens a second (a "tokens a minute" limit
sixty times faster), calls in flight. Each rate is a token bucket holding ``burst_s``
seconds of it, as OpenAI's and Anthropic's limits are (their reset header: the time until
the bucket is full again). Over a limit it answers 429, with ``retry-after-ms`` (and
``Retry-After``, whole seconds) saying when the bucket holds enough, and, when ``headers``,
OpenAI's ``x-ratelimit-{limit,remaining,reset}-{requests,tokens}`` on every answer. The
limits can change mid-run (``set``). ``shed`` refuses that share of requests at random,
whatever the load: a 429 with no header, as an overloaded gateway sends, or saying to come
back after ``shed_retry_after_s``. ``outage_s`` refuses every request (a 429, no header) for
that many seconds from the first one: an outage, then the limits."""

from __future__ import annotations

import math
import random
import threading
import time
from typing import Any

from fake_llm_server import FakeLLMServer, Reply


def go_duration(seconds: float) -> str:
    """A duration as OpenAI writes it in ``x-ratelimit-reset-*``: ``20ms``, ``1s``,
    ``6m0s``, ``1.5s``."""
    if seconds < 1:
        return f"{max(0, round(seconds * 1000))}ms"
    minutes, rest = divmod(seconds, 60)
    return f"{int(minutes)}m{rest:g}s" if minutes else f"{rest:.3g}s"


class _Bucket:
    def __init__(self, rate: float, burst_s: float) -> None:
        self.rate = rate
        self.capacity = max(1.0, rate * burst_s)
        self.level = self.capacity
        self.at = time.monotonic()

    def refill(self, now: float) -> None:
        self.level = min(self.capacity, self.level + (now - self.at) * self.rate)
        self.at = now

    def wait(self, amount: float) -> float:
        return max(0.0, (min(amount, self.capacity) - self.level) / self.rate)

    def headers(self, dim: str) -> dict[str, str]:
        return {f"x-ratelimit-limit-{dim}": str(int(self.capacity)),
                f"x-ratelimit-remaining-{dim}": str(max(0, int(self.level))),
                f"x-ratelimit-reset-{dim}": go_duration(
                    (self.capacity - self.level) / self.rate)}


class ProviderLimits:
    """The limits; ``refused`` and ``accepted`` count answers."""

    def __init__(self, server: FakeLLMServer, rps: float | None = None,
                 tokens_per_s: float | None = None, in_flight: int | None = None,
                 headers: bool = False, retry_after: bool = True, burst_s: float = 1.0,
                 shed: float = 0.0, seed: int = 0,
                 shed_retry_after_s: float | None = None, outage_s: float = 0.0) -> None:
        self.server = server
        self.outage_s = outage_s
        self._outage_end: float | None = None
        self.shed = shed
        self.shed_retry_after_s = shed_retry_after_s
        self._random = random.Random(seed)
        self.headers = headers
        self.retry_after = retry_after
        self.burst_s = burst_s
        self.refused = 0
        self.outage_refused_at: list[float] = []  # seconds into the outage, each refusal
        self.accepted = 0
        self.tokens_accepted = 0
        self._lock = threading.Lock()
        self.set(rps, tokens_per_s, in_flight)

    def set(self, rps: float | None = None, tokens_per_s: float | None = None,
            in_flight: int | None = None) -> None:
        """New limits from now on (buckets start full)."""
        with self._lock:
            self.requests = _Bucket(rps, self.burst_s) if rps else None
            self.tokens = _Bucket(tokens_per_s, self.burst_s) if tokens_per_s else None
            self.in_flight = in_flight

    def then(self, after: int, **limits: Any) -> ProviderLimits:
        """Change to ``limits`` (as :meth:`set`) once ``after`` calls were accepted."""
        self._then = (after, limits)
        return self

    def __call__(self, body: dict[str, Any]) -> Reply:
        then = getattr(self, "_then", None)
        if then is not None and self.accepted >= then[0]:
            self._then = None
            self.set(**then[1])
        content = self.server.answer(body)
        prompt_chars = sum(len(m.get("content") or "") for m in body["messages"])
        cost = prompt_chars // 4 + 1 + len(content) // 4 + 1  # what usage will say
        now = time.monotonic()
        with self._lock:
            if self._outage_end is None:
                self._outage_end = now + self.outage_s
            if now < self._outage_end:
                self.refused += 1
                self.outage_refused_at.append(now - self._outage_end + self.outage_s)
                return Reply(status=429, delay=0.0, body='{"error": {"message": '
                             '"Rate limit reached", "type": "requests"}}')
            waits = []
            for bucket, amount in ((self.requests, 1.0), (self.tokens, cost)):
                if bucket is not None:
                    bucket.refill(now)
                    waits.append(bucket.wait(amount))
            over_flight = self.in_flight is not None and self.server.in_flight > self.in_flight
            wait = max(waits, default=0.0)
            shed = self.shed and self._random.random() < self.shed
            if wait > 0 or over_flight or shed:
                self.refused += 1
                headers = self._headers()
                if self.retry_after and wait > 0:
                    headers["retry-after-ms"] = str(math.ceil(wait * 1000))
                    headers["retry-after"] = str(math.ceil(wait))
                elif shed and self.shed_retry_after_s is not None:
                    headers["retry-after-ms"] = str(math.ceil(self.shed_retry_after_s * 1000))
                return Reply(status=429, delay=0.0, headers=headers, body='{"error": '
                             '{"message": "Rate limit reached", "type": "requests"}}')
            for bucket, amount in ((self.requests, 1.0), (self.tokens, cost)):
                if bucket is not None:
                    bucket.level -= amount
            self.accepted += 1
            self.tokens_accepted += cost
            return Reply(content=content, headers=self._headers())

    def _headers(self) -> dict[str, str]:
        headers: dict[str, str] = {}
        if self.headers:
            for bucket, dim in ((self.requests, "requests"), (self.tokens, "tokens")):
                if bucket is not None:
                    headers.update(bucket.headers(dim))
        return headers
