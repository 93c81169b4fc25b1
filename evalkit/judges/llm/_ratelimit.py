"""A token bucket for requests-per-minute and tokens-per-minute limits. It queues callers
instead of rejecting them (litellm's Router rejects calls over its ``rpm``), and it is not
bound to an event loop, so one bucket serves every batch of a run."""

from __future__ import annotations

import asyncio
import time


class TokenBucket:
    """``per_minute`` units refill continuously; a burst takes at most ``burst_s`` seconds'
    worth (providers enforce per-minute limits over shorter windows)."""

    def __init__(self, per_minute: float, burst_s: float = 1.0) -> None:
        self.rate = per_minute / 60.0
        self.capacity = max(1.0, self.rate * burst_s)
        self.tokens = self.capacity
        self.updated = time.monotonic()

    def _refill(self) -> None:
        now = time.monotonic()
        self.tokens = min(self.capacity, self.tokens + (now - self.updated) * self.rate)
        self.updated = now

    async def acquire(self, amount: float = 1.0) -> None:
        """Wait until ``amount`` units are available, then take them. A request larger than
        the bucket waits for a full bucket (it would otherwise wait forever)."""
        amount = min(amount, self.capacity)
        while True:
            self._refill()
            if self.tokens >= amount:
                self.tokens -= amount
                return
            await asyncio.sleep((amount - self.tokens) / self.rate)

    def adjust(self, delta: float) -> None:
        """Correct an estimate after the fact (positive: the call used more than reserved).
        The balance may go negative, which delays later callers."""
        self._refill()
        self.tokens = min(self.capacity, self.tokens - delta)
