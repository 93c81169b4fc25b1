"""How fast, and how many calls at once, an endpoint takes when nobody said: a controller fed
by the endpoint's own answers, shared by every caller of the endpoint in the process (the LLM
judge engine, the Langfuse client) and, through a state file, by a sweep's processes.

- **Rate** (calls a second). Unpaced until the endpoint first refuses (429, or an overload:
  529, a 503 with ``Retry-After``). A refusal sets the rate a little under what the endpoint
  accepted over the last second (never below half the rate it cuts); one cut per round trip
  (the calls sent within one of the last cut knew nothing of it); once the refusals span a
  few round trips, a little under what it accepted since they began, if less (the last
  second may hold a bucket's burst, spent since). Each success grows the
  rate again: slowly for ``PLATEAU_S`` near the rate refused last, then faster the longer no
  call was refused, so a limit raised mid-run is found in seconds.
- **Half-open**. Refused whatever the pace (``_MIN_N`` refusals in a row, spanning ``_DOWN_S``
  at least before any answer; or a run of cuts
  that quartered the pace with no fewer refused: an outage, a bucket of a minute's calls
  spent), the crowd stops: one probe at a time, a round trip apart, doubling per refused
  probe up to ``PROBE_CAP_S``; the first answered reopens the endpoint at the rate accepted
  since the refusals began; after an outage from an eighth of the pace it went half-open at,
  doubling each round trip (TCP's slow start) back to the pace before the refusals began,
  or until refused when nothing was answered before them; then grown as after a cut. In a
  sweep each process probes on its own.
- **Calls in flight**. Refusals of calls sent with more calls in flight than (nearly: the top
  5%, a call overtaking one sent before it, aside) any accepted call had lately, three times
  as many as were accepted up there and hardly any refused with fewer, say the limit is on
  calls in flight, not on their rate: the window closes to the most accepted, and reopens
  one call a second; a refusal of the reopened call, or refusals too many for noise under
  the window, take it one lower (once a round trip).
- **Noise**. A provider may shed a few percent of requests at random, whatever the load. While
  at most 15% of the last 100 answers were refusals, a refusal is taken for that: it cuts
  nothing (it only holds the growth of a pace back), and its ``Retry-After`` holds the
  refused call alone (``refused`` returns False), not the endpoint, so 5% shed at random
  costs 5% retries, not a crawl. A limit overshot refuses far more than that, at once.
- **Pauses**. A ``Retry-After`` (or ``retry-after-ms``) pauses the whole endpoint, every
  caller, until then (but for noise, above, once 40 answers are on record); rate-limit
  headers (``x-ratelimit-remaining-*``, ``-reset-*``, and Anthropic's) pause it before it
  refuses when a quota is spent and pace it at the quota's refill rate when it runs low.

In a sweep (``shared``: the endpoint's state file, evalkit/judges/llm/_sharedlimit.py) the
rate, its pace slots and the pauses belong to the endpoint, not to one process: a refusal seen
by one job slows and pauses them all, and the accepted rate a cut starts from is the sum of
theirs. So does the window of calls in flight: a call takes one of the window's first
shared call slots, and counts the calls the other processes said they had in flight (at
most 0.1 s ago) with its own.

The configured ``concurrency`` (and ``rpm``/``tpm``, applied by the caller) are hard
ceilings: the controller only ever works below them. ``adaptive=False`` keeps only the
pauses (the endpoint said when to come back)."""

from __future__ import annotations

import asyncio
import collections
import math
import time
from typing import Any, NamedTuple, Protocol

from evalkit._http import Quota

CUT = 0.95  # a refusal: the rate drops to this share of what was accepted (or of itself)
GROWTH = 0.1  # per second without a refusal, times 1 + seconds since the last one
PLATEAU_S = 1.5  # seconds of slow growth around the rate refused last
MIN_RATE = 1 / 60  # calls a second: never slower than one a minute
_BUCKET_S = 0.05  # the accepted rate is counted in buckets of 50 ms over the last second
_BUCKETS = 20
_WINDOW_STEP_S = 1.0  # a closed window reopens one call per this many quiet seconds
_PEAK_S = 5.0  # the most calls in flight accepted is remembered for 5-10 s
_RECHECK_S = 0.25  # a caller waiting for a pace slot looks again at least this often
PROBE_CAP_S = 1.0  # half-open: the longest wait between two probes (a recovery seen this soon)
_PROBE_POLL_S = 0.05  # half-open: a caller waiting for its turn to probe looks this often
_DOWN_PROBES = 3  # probes refused in a row: the endpoint was down, not merely slower
_SLOW_START = 8  # ... then reopened at this fraction of its pace before, doubling each RTT
# before any answer, refusals in a row say "down" only over this long (a limit on calls in
# flight refuses every call but the first few until those few come back)
_DOWN_S = 0.25
# A refusal among mostly answered calls is the provider shedding at random, not load: when
# at most NOISE of the last _RECENT answers (counted as at least _MIN_N) were refusals, and
# not most of them, a refusal neither cuts the rate nor closes the window (a limit overshot
# refuses far more, at once). 5% shed at random passes for load once in ~10,000 refusals
NOISE = 0.15
_RECENT = 100
_MIN_N = 40
_FEW = 3


class SharedState(Protocol):
    """The endpoint's adaptive state shared by a sweep's processes."""

    def adaptive(self, update: dict[str, float | None] | None = None,
                 accepted: float | None = None,
                 in_flight: int | None = None) -> dict[str, Any]: ...

    def pace(self, rate: float) -> float: ...


_SYNC_S = 0.1  # a process looks at the shared state at most this often


class StillRefusing(Exception):
    """The endpoint stayed half-open (refusing every probe) past the time a caller could
    wait (``acquire``'s ``give_up_s``): its calls fail one by one, not one a probe."""


class Ticket(NamedTuple):
    """One call let through: when it went, and how many calls were in flight with it (a
    tuple: a frozen dataclass costs a microsecond a call more)."""

    sent: float  # time.monotonic()
    in_flight: int  # calls on the wire when it was sent, itself included


class AdaptiveLimit:
    """The controller of one endpoint (see the module docstring). ``acquire`` before a call,
    then exactly one of ``ok``, ``refused`` or ``failed`` with its ticket."""

    def __init__(self, concurrency: int, adaptive: bool = True,
                 shared: SharedState | None = None) -> None:
        self.ceiling = concurrency
        self.adaptive = adaptive
        self.shared = shared
        self._synced = -math.inf
        self._others = 0  # calls the sweep's other processes had in flight, last we looked
        self._window_news = False  # this process moved the window since it last said so
        self.window = concurrency  # calls allowed in flight (waiting for a pace slot included)
        self.rate: float | None = None  # calls a second; None: unpaced
        self.hint: float | None = None  # calls a second the rate-limit headers allow
        self.paused_until = 0.0
        self.held = 0  # window places taken
        self.sent = 0  # calls on the wire
        self.refusals = 0  # 429s
        self.overloads = 0  # 503s with Retry-After, 529s
        self.paused_s = 0.0  # seconds the endpoint was paused, summed over pauses
        self._next = 0.0  # pacing: the earliest time the next call may go
        self._cut_at = -math.inf  # the last cut: refusals of calls sent before it are old news
        self._refused_at = -math.inf  # the last refusal that counted (a round trip after a cut)
        self._grown_at = 0.0
        self._window_at = 0.0  # the window last closed
        self._widened_at = 0.0  # ... last widened
        # calls answered and refused by the calls in flight they went with, over the last
        # 5-10 s (this period and the one before): where a limit on calls in flight shows
        self._levels = _Levels(concurrency)
        self._peak_at = 0.0
        self._counts = [0] * _BUCKETS  # accepted calls per 50 ms bucket, over the last second
        self._bucket = 0  # the index (monotonic // 50 ms) of the newest bucket
        self._first_sent: float = math.inf
        self._tried = 0  # calls sent (until the first refusal)
        self._oks = 0
        self._refused_rate = 0.0  # the rate at the last cut
        self._episode = (math.inf, 0.0)  # the rate and share refused at an episode's first cut
        self._congested_at = -math.inf  # the last refusal too many for noise
        self._latency: float | None = None  # seconds an answered call takes (moving average)
        self._tokens_per_call: float | None = None
        self._waiters: collections.deque[asyncio.Future[None]] = collections.deque()
        self._recent: collections.deque[bool] = collections.deque()  # True: refused
        self._recent_refused = 0
        # half-open (an endpoint refusing whatever the pace): one probe call at a time
        self._probing = False
        self._probe_gap = 0.0  # seconds between probes, doubled by each refused probe
        self._probe_next = 0.0  # the earliest time the next probe may go
        self._probe_out: float | None = None  # the probe on the wire (its ticket's sent)
        self._probes_refused = 0  # in a row, this half-open spell
        self._refused_run = 0  # answers in a row that were refusals
        self._run_at = 0.0  # ... the first of them
        self._episode_at = 0.0  # an episode's first cut, and the calls answered before it
        self._episode_oks = 0
        self._ssthresh: float | None = None  # reopened after an outage: doubling up to this
        self._ramped_at = -math.inf  # ... reached it (the accepted rate lags a second behind)

    # --- the caller's side ------------------------------------------------------------

    def try_acquire(self) -> Ticket | None:
        """The common case without a wait (no coroutine): nothing paces or pauses the
        endpoint and the window has room. None: ``await acquire()``."""
        now = time.monotonic()
        if self.held >= self.window or self.paused_until > now or self.rate is not None \
                or self._probing \
                or self.hint is not None or (self.shared is not None
                                             and now - self._synced >= _SYNC_S):
            return None
        self.held += 1
        self.sent += 1
        self._tried += 1
        if self._first_sent > now:
            self._first_sent = now
        return Ticket(now, self.sent + self._others)

    async def acquire(self, give_up_s: float | None = None) -> Ticket:
        """Wait for the endpoint: the end of a pause, a place in the window, a pace slot.
        Raises :class:`StillRefusing` when it is half-open and ``give_up_s`` seconds passed
        (the caller's budget for being refused: waiting its turn to probe, every caller
        would fail one a probe, seconds apart)."""
        give_up = None if give_up_s is None else time.monotonic() + give_up_s
        while self.held >= self.window:
            waiter = asyncio.get_running_loop().create_future()
            self._waiters.append(waiter)
            try:
                await waiter
            finally:
                if not waiter.done():
                    waiter.cancel()
        self.held += 1
        probe = False
        try:
            while True:
                now = time.monotonic()
                if self.shared is not None and now - self._synced >= _SYNC_S:
                    self._pull(now)
                if self.paused_until > now:
                    await asyncio.sleep(min(self.paused_until - now, _RECHECK_S))
                    continue
                if self._probing:  # half-open: the probe goes alone, every other call waits
                    if give_up is not None and now >= give_up:
                        raise StillRefusing(f"every call refused for {self._probe_span(now)}")
                    if self._probe_out is None and self._probe_next <= now:
                        self._probe_out = now
                        probe = True
                        break
                    await asyncio.sleep(max(min(self._probe_next - now, _RECHECK_S),
                                            _PROBE_POLL_S))
                    continue
                rate = self.effective_rate()
                if rate is None:
                    break
                if self.shared is not None:
                    wait = self.shared.pace(rate)
                    if wait <= 0:
                        break
                    await asyncio.sleep(min(wait, _RECHECK_S))
                    continue
                if self._next <= now:  # a pace slot: taken now, never reserved ahead (the
                    # rate may change while a caller waits)
                    self._next = max(self._next, now - 0.5 / rate) + 1 / rate
                    break
                await asyncio.sleep(min(self._next - now, _RECHECK_S))
        except BaseException:
            self._give_back()
            raise
        self.sent += 1
        now = time.monotonic()
        if probe:
            self._probe_out = now  # (known by its ticket's time)
        if self.rate is None:
            self._tried += 1
            self._first_sent = min(self._first_sent, now)
        return Ticket(now, self.sent + self._others)

    def ok(self, ticket: Ticket, quotas: dict[str, Quota] | None = None,
           tokens: int | None = None) -> None:
        """The call was answered."""
        now = time.monotonic()
        self._done()
        self._count(now)
        self._oks += 1
        self._refused_run = 0
        self._outcome(False)
        latency = now - ticket.sent
        self._latency = latency if self._latency is None else \
            0.9 * self._latency + 0.1 * latency
        if now - self._peak_at >= _PEAK_S:
            self._peak_at = now
            self._levels.rotate()
        self._levels.ok[min(ticket.in_flight, self._levels.top)] += 1
        if self._levels.any_refused and self._oks % 10 == 0 and self.adaptive:
            # (refusals stop once a cut pace keeps under the limit: look here too)
            self._found_in_flight_limit(now)
        if ticket.in_flight > self.window and self.shared is None:
            # taken with more in flight than the window has (in a sweep the other
            # processes' calls are counted as they were up to 0.1 s ago: not this sure)
            self.window = min(self.ceiling, ticket.in_flight)
        if self._probing and self.adaptive:
            self._reopen(now)
        if tokens:
            self._tokens_per_call = tokens if self._tokens_per_call is None else \
                0.9 * self._tokens_per_call + 0.1 * tokens
        if quotas:
            self.learn(quotas, now)
        if not self.adaptive:
            return
        if self.rate is not None and now - self._grown_at >= 0.05:
            quiet = now - self._cut_at
            # fast back to just under the rate refused last, slowly past it for a few
            # seconds (the limit is likely still there), then faster and faster (it moved);
            # slowly while refusals come, even too few to cut for
            near = (self.rate >= 0.97 * self._refused_rate and quiet < PLATEAU_S) or \
                now - self._refused_at < PLATEAU_S
            growth = GROWTH * (0.1 if near else 1 + min(quiet, 30.0))
            if self._ssthresh is not None:  # back from an outage: doubling each round trip
                self.rate = min(self._ssthresh, self.rate * 2 ** (
                    min(now - self._grown_at, 1.0) / max(self._latency or 0.0, 0.05)))
                if self.rate >= self._ssthresh:
                    self._ssthresh, self._ramped_at = None, now
            else:
                self.rate *= 1 + growth * min(now - self._grown_at, 1.0)
            # while another limit binds (the window, the caller's), the pace would run away
            accepted = self.accepted_rate(now)
            # (not while refusals come: few answered then says nothing of the demand)
            if accepted is not None and quiet > 1.0 and self.shared is None and \
                    now - self._refused_at > 1.0 and self._ssthresh is None and \
                    now - self._ramped_at > _BUCKETS * _BUCKET_S:
                self.rate = min(self.rate, max(2 * accepted, MIN_RATE))
            # (in a sweep, at least: no more than twice what the window lets through)
            self.rate = min(self.rate, 2 * self.window / max(self._latency or 0.0, 0.001))
            self._grown_at = now
            if self.shared is not None and now - self._synced >= _SYNC_S:
                self._push(now)
        if self.window < self.ceiling and self.held + self._others >= self.window and \
                now - max(self._window_at, self._widened_at) >= _WINDOW_STEP_S:
            self.window += 1
            self._widened_at = now
            self._window_news = True
            if self.shared is not None:
                self._push(now)
            self._wake()

    def refused(self, ticket: Ticket, overload: bool, retry_after: float | None,
                quotas: dict[str, Quota] | None = None) -> bool:
        """The endpoint said "slow down": a 429 (``overload`` False) or an overload. True
        when it paused the endpoint for ``retry_after``; False when the refusal passed for
        noise (see NOISE: a few percent shed at random, each with its Retry-After, would
        otherwise pause the endpoint all the time): then the refused call waits it alone."""
        now = time.monotonic()
        self._done()
        if overload:
            self.overloads += 1
        else:
            self.refusals += 1
        self._outcome(True)
        self._levels.count_refused(ticket.in_flight)
        paused = False
        if retry_after is not None and retry_after > 0 and not (
                self.adaptive and len(self._recent) >= _MIN_N and self.noise()):
            self.pause(now + retry_after, now)
            paused = True
        if quotas:
            self.learn(quotas, now)
        self._ssthresh = None  # (the first refusal ends a doubling)
        if self._probing and self.adaptive:
            if ticket.sent == self._probe_out:  # the probe refused: wait twice as long
                self._probe_out = None
                self._probes_refused += 1
                self._probe_gap = min(2 * self._probe_gap, PROBE_CAP_S)
                self._probe_next = now + self._probe_gap
            if self.shared is not None:
                self._push(now)
            return paused  # (calls sent before it went half-open: old news)
        self._refused_run += 1
        if self._refused_run == 1:
            self._run_at = now
        if self.adaptive and self._refused_run >= _MIN_N and \
                (self._oks or now - self._run_at >= _DOWN_S):  # nothing gets through
            self._half_open(now, self._latency or now - ticket.sent)
            if self.shared is not None:
                self._push(now)
            return paused
        try:
            self._react(ticket, now)
        finally:
            if self.shared is not None:
                self._push(now)
        return paused

    def _react(self, ticket: Ticket, now: float) -> None:
        # one cut per round trip: the calls sent within one of the last cut went before
        # anything it changed could show (before any answer, a round trip is at least as
        # long as the oldest call has waited)
        rtt = self._latency if self._latency is not None else now - self._first_sent
        if not self.adaptive or \
                ticket.sent < max(self._cut_at, self._window_at) + min(max(rtt, 0.01), 1.0):
            return
        closed = self.window < self.ceiling
        self._refused_at = now
        # a probe of a window reopened by one, or refusals too many for noise under a
        # window already closed: the endpoint takes fewer calls in flight than it has
        if closed and (ticket.in_flight >= self.window or not self.noise()):
            self._close(max(1, min(self.window - 1, ticket.in_flight - 1)), now)
            return
        if self._found_in_flight_limit(now):
            return
        if self.noise():
            return
        share = self._recent_refused / max(len(self._recent), 1)
        if now - self._congested_at > PLATEAU_S:  # the first of an episode of refusals
            self._episode = (self.rate if self.rate is not None else
                             self.accepted_rate(now) or math.inf, share)
            self._episode_at, self._episode_oks = now, self._oks
        self._congested_at = now
        if self.rate is not None and self.rate <= 0.25 * self._episode[0] and \
                share >= self._episode[1]:
            # the pace quartered and no fewer refused: not the pace's doing (the last calls
            # of a run, each refused a few times, have no others to share the count with):
            # half-open, one probe at a time, or the crowd keeps hitting it at this pace
            self._half_open(now, rtt)
            return
        self._cut_at = now
        accepted = self.accepted_rate(now)
        if self.shared is not None:  # every process's calls, not only this one's
            accepted = self.shared.adaptive(accepted=accepted)["accepted"] or accepted
        elif accepted and now - self._episode_at >= 2 * min(max(rtt, 0.01), 1.0):
            # the last second may hold a bucket's burst, spent since: what the endpoint took
            # since the episode began, once that spans a few round trips, is nearer its refill
            accepted = min(accepted, (self._oks - self._episode_oks) / (now - self._episode_at))
        current = self.rate if self.rate is not None else math.inf
        if accepted:  # a little under what the endpoint took (not compounding: refusals
            # go on for a while after a cut, until the provider's bucket refills)
            target = accepted * CUT
        elif math.isinf(current):  # refused before any answer: half the pace tried so far
            target = 0.5 * self._tried / max(now - self._first_sent, 0.05)
        else:
            target = current / 2
        # at most halved by one refusal: an endpoint refusing everything for a while is
        # not slowed to a crawl by each of its refusals
        target = max(target, current / 2, MIN_RATE) if not math.isinf(current) else \
            max(target, MIN_RATE)
        if target < current:
            self._refused_rate = min(current, accepted or current)
            self.rate = target
        self._grown_at = now

    def _half_open(self, now: float, rtt: float) -> None:
        """Refused whatever the pace (an outage, a bucket of a minute's calls spent): stop
        sending the crowd; one probe at a time, the first a round trip from now, each
        refused one doubling the wait up to PROBE_CAP_S."""
        self._probing = True
        if now - self._congested_at > PLATEAU_S:  # (from a run of refusals: an episode)
            self._episode = (self.rate if self.rate is not None else
                             self.accepted_rate(now) or math.inf,
                             self._recent_refused / max(len(self._recent), 1))
            self._episode_at, self._episode_oks = now, self._oks
        self._probe_gap = min(max(rtt, 0.05), PROBE_CAP_S)
        self._probe_next = now + self._probe_gap
        self._probe_out = None
        self._probes_refused = 0

    def _probe_span(self, now: float) -> str:
        return f"{now - self._episode_at:.1f} s ({self._probes_refused} probes refused)"

    def _reopen(self, now: float) -> None:
        """A probe answered: every caller goes again, at the rate the endpoint accepted since
        the episode began (a window long enough to see a bucket of a minute's calls refill,
        not its first second's burst). After several refused probes the endpoint was down,
        not slower, and took next to nothing meanwhile: from an eighth of the pace it went
        half-open at (a call a round trip at least), doubling each round trip (as TCP's slow
        start) back to the pace before the refusals began (until refused, when nothing was
        answered before them); past it, growth as after a cut."""
        before = self.rate
        self._probing = False
        self._probe_out = None
        span = max(now - self._episode_at, 0.05)
        rate = max((self._oks - self._episode_oks) / span, MIN_RATE)
        if before is None and not self._episode_oks:
            # nothing answered before: unpaced, as at the start of a run
            self.rate = None
            self._congested_at = -math.inf
            return
        rate = max(rate, 1 / max(self._latency or 0.0, 0.05))  # (a call a round trip, at least)
        if before is None:  # answered, never paced (a window held it): from what it took
            before = rate
        # down, not slower: back to the pace before the refusals began (unknown when nothing
        # was answered before them, as after an outage from the start: doubling until
        # refused), from an eighth of the pace it went half-open at, not a crowd at once
        goal = self._episode[0] if self._episode_oks else math.inf
        if self._probes_refused >= _DOWN_PROBES and rate < goal:
            rate = max(rate, before / _SLOW_START)
            self._ssthresh = goal
        self.rate = rate
        self._refused_rate = min(self._refused_rate, rate)
        self._next = now
        self._grown_at = self._cut_at = now  # (growth past it as after a cut, not a quiet run)
        self._congested_at = -math.inf  # the next refusal starts an episode anew

    def _found_in_flight_limit(self, now: float) -> bool:
        """Close the window when refusals went with more calls in flight than (nearly) any
        call the endpoint took lately, three times as many as were taken up there, and
        hardly any with fewer: a limit on calls in flight, not on their rate."""
        if self._oks < 10 or not self._levels.any_refused or self.window < self.ceiling:
            return False
        levels = self._levels
        peak = levels.peak()
        above, below = levels.refused_above(peak), levels.refused_above(0) - \
            levels.refused_above(peak)
        if above < max(_FEW, 3 * levels.ok_above(peak)) or \
                below > NOISE * (levels.ok_above(0) - levels.ok_above(peak)):
            # (a rate limit refuses calls whatever their number in flight)
            return False
        self._close(max(1, min(self.window, peak)), now)
        return True

    def _close(self, window: int, now: float) -> None:
        """The window holds the limit, not the pace: cuts made before it was found were its
        doing too (undone when it is first found)."""
        opened = self.window >= self.ceiling
        self.window = window
        self._levels.forget_above(window)
        self._window_at = now
        self._window_news = True
        accepted = self.accepted_rate(now)
        if opened and self.rate is not None and accepted:
            self.rate = max(self.rate, 2 * accepted)

    def noise(self) -> bool:
        """Whether the refusals lately are few enough to be the provider shedding at
        random (see NOISE)."""
        refused = self._recent_refused
        if refused >= _FEW and 2 * refused > len(self._recent):  # mostly refused
            return False
        return refused <= NOISE * max(len(self._recent), _MIN_N)

    def _outcome(self, refused: bool) -> None:
        self._recent.append(refused)
        self._recent_refused += refused
        if len(self._recent) > _RECENT:
            self._recent_refused -= self._recent.popleft()

    def failed(self, ticket: Ticket) -> None:
        """The call failed otherwise (an error, a timeout): no news about the limits."""
        if ticket.sent == self._probe_out:  # (half-open: the next probe may go)
            self._probe_out = None
        self._done()

    # --- what the endpoint said -------------------------------------------------------

    def pause(self, until: float, now: float | None = None) -> None:
        """No call goes before ``until`` (time.monotonic())."""
        now = time.monotonic() if now is None else now
        if until > self.paused_until:
            self.paused_s += until - max(now, self.paused_until)
            self.paused_until = until

    def learn(self, quotas: dict[str, Quota], now: float) -> None:
        """Read the provider's rate-limit headers: pause when a quota is spent, pace at its
        refill rate while it runs low, unpaced again when it is not."""
        hints = []
        for dim, quota in quotas.items():
            per_call = 1.0 if dim == "requests" else self._tokens_per_call
            if not per_call:
                continue
            calls_left = quota.remaining / per_call
            refill = quota.refill_per_s()
            if calls_left < 1:
                wait = per_call / refill if refill else quota.reset_s
                if wait:
                    self.pause(now + min(wait, 60.0), now)
            if refill and calls_left < max(self.window, 2):
                hints.append(0.98 * refill / per_call)
        self.hint = min(hints) if hints else None

    # --- reading it -------------------------------------------------------------------

    def effective_rate(self) -> float | None:
        """The calls a second let through now (None: unpaced)."""
        if self.hint is None:
            return self.rate
        return self.hint if self.rate is None else min(self.rate, self.hint)

    def accepted_rate(self, now: float) -> float | None:
        """Calls a second the endpoint answered over the last second (None: too early)."""
        self._count(now, 0)
        span = min(now - self._first_sent, _BUCKETS * _BUCKET_S)
        if span < 0.1:
            return None
        return sum(self._counts) / span

    def stats(self) -> dict[str, Any]:
        """For the manifest and the summary: the rate and window it settled at (null: the
        endpoint never pushed back), calls answered, refusals, overloads and seconds paused."""
        rate = self.effective_rate()
        return {"rate_per_s": None if rate is None else round(rate, 3),
                "in_flight": self.window if self.window < self.ceiling else None,
                "answered": self._oks, "refusals": self.refusals, "overloads": self.overloads,
                "paused_s": round(self.paused_s, 3)}

    # --- inside -----------------------------------------------------------------------

    def shared_window(self) -> int:
        """The window of calls in flight, for every process of a sweep together (the
        shared call slots hold it: evalkit/judges/llm/_sharedlimit.py)."""
        return self.window

    def _pull(self, now: float) -> None:
        """Adopt the sweep's rate, window and pause (another process may have been
        refused), and count the calls the other processes have in flight."""
        assert self.shared is not None
        view = self.shared.adaptive(accepted=self.accepted_rate(now) if self.rate else None,
                                    in_flight=self.sent)
        self._adopt(view, now)

    def _push(self, now: float) -> None:
        """Tell the sweep this process's rate, window and pause."""
        assert self.shared is not None
        offset = time.time() - now
        update: dict[str, float | None] = {
            "rate": self.rate,
            "paused_until": self.paused_until + offset if self.paused_until > now else None}
        if self._window_news:
            update["window"] = self.window
            self._window_news = False
        view = self.shared.adaptive(update, self.accepted_rate(now) if self.rate else None,
                                    self.sent)
        self._adopt(view, now)

    def _adopt(self, view: dict[str, Any], now: float) -> None:
        self._synced = now
        self._others = int(view.get("others_in_flight") or 0)
        if view.get("rate") is not None and self.adaptive:
            self.rate = float(view["rate"])
            self._first_sent = min(self._first_sent, now)
        window = view.get("window")
        if window is not None and self.adaptive and not self._window_news and \
                int(window) != self.window:
            # another process moved it: the next step waits a quiet second from here (one
            # widening a second for the sweep, not one for each process)
            wider = int(window) > self.window
            self.window = max(1, min(self.ceiling, int(window)))
            self._widened_at = now
            if wider:
                self._wake()
        until = float(view.get("paused_until") or 0.0) - (time.time() - now)
        if until > self.paused_until:
            self.pause(until, now)

    def _count(self, now: float, amount: int = 1) -> None:
        index = int(now / _BUCKET_S)
        if index != self._bucket:
            for i in range(self._bucket + 1, min(index, self._bucket + _BUCKETS) + 1):
                self._counts[i % _BUCKETS] = 0
            self._bucket = index
        self._counts[index % _BUCKETS] += amount

    def _done(self) -> None:
        self.sent -= 1
        self._give_back()

    def _give_back(self) -> None:
        self.held -= 1
        self._wake()

    def _wake(self) -> None:
        free = self.window - self.held
        while self._waiters and free > 0:
            waiter = self._waiters.popleft()
            if waiter.done():
                continue
            free -= 1
            loop = waiter.get_loop()
            try:
                running = asyncio.get_running_loop()
            except RuntimeError:
                running = None
            if loop is running:
                waiter.set_result(None)
            else:  # a caller in another thread's loop
                loop.call_soon_threadsafe(_wake, waiter)


class _Levels:
    """Calls answered (``ok``) and refused by the number of calls in flight each went with,
    this period and the one before (``rotate``); the top level holds every count above."""

    def __init__(self, ceiling: int) -> None:
        self.top = min(max(ceiling, 1), 1024) + 1  # (its scans stay short at any ceiling)
        self.ok = [0] * (self.top + 1)
        self.refused = [0] * (self.top + 1)
        self._ok_before = [0] * (self.top + 1)
        self._refused_before = [0] * (self.top + 1)
        self.any_refused = False  # a refusal on record (this period or the one before)

    def rotate(self) -> None:
        self._ok_before, self.ok = self.ok, [0] * (self.top + 1)
        self._refused_before, self.refused = self.refused, [0] * (self.top + 1)
        self.any_refused = any(self._refused_before)

    def count_refused(self, level: int) -> None:
        self.refused[min(level, self.top)] += 1
        self.any_refused = True

    def peak(self) -> int:
        """The most calls in flight answered calls went with, but for the top 5% (a call
        reaching the endpoint ahead of one sent before it went with one too many)."""
        oks = [a + b for a, b in zip(self.ok, self._ok_before, strict=True)]
        allowance = max(1, int(0.05 * sum(oks)))
        above = 0
        for level in range(self.top, 0, -1):
            above += oks[level]
            if above > allowance:
                return level
        return 0

    def refused_above(self, level: int) -> int:
        return sum(self.refused[level + 1:]) + sum(self._refused_before[level + 1:])

    def ok_above(self, level: int) -> int:
        return sum(self.ok[level + 1:]) + sum(self._ok_before[level + 1:])

    def forget_above(self, level: int) -> None:
        """Drop what went with more than ``level`` in flight (the window closed there)."""
        for counts in (self.ok, self.refused, self._ok_before, self._refused_before):
            for i in range(level + 1, self.top + 1):
                counts[i] = 0


def _wake(waiter: asyncio.Future[None]) -> None:
    if not waiter.done():
        waiter.set_result(None)
