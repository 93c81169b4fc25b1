"""A provider's limits nobody configured: the fake server refuses over a rate of requests, of
tokens or of calls in flight (with and without rate-limit headers, a limit that changes
mid-run), and every judgment still comes back ok, with few refusals, the endpoint's
settled rate in its stats. Limits are scaled up and counts down: a test takes a second or
two. (Wall time against the ideal is bench/bench_rate_limits.py's, not a test's.)"""

from __future__ import annotations

import asyncio
import time

import pytest
from fake_limits import ProviderLimits, go_duration
from fake_llm_server import Reply
from llm_helpers import judge, make, records

from evalkit._adaptive import NOISE
from evalkit._http import Quota, duration_seconds, rate_limit_quotas
from evalkit.judges.llm.correctness import CorrectnessLlmJudge

ROWS = [{"input": f"question {i}", "output": "an answer", "reference": "an answer"}
        for i in range(400)]


def _run(ctx, server, limits: ProviderLimits, n: int, **options) -> tuple[list[dict], dict]:
    server.plan = limits
    options.setdefault("concurrency", 32)
    j = make(CorrectnessLlmJudge, ctx, server, cache=False, max_retries=2, **options)
    rows = judge(j, records(*ROWS[:n]))
    return rows, j.engine.stats()


def _all_ok(rows: list[dict]) -> None:
    errors = [r.get("error") for r in rows if r["status"] != "ok"]
    assert not errors, errors[:3]


@pytest.fixture
def slow_llm(fake_llm):
    fake_llm.latency = 0.05
    return fake_llm


def test_requests_a_second_without_headers(ctx, slow_llm):
    limits = ProviderLimits(slow_llm, rps=150, retry_after=False, burst_s=0.2)
    rows, stats = _run(ctx, slow_llm, limits, 240)
    _all_ok(rows)
    # (loose: the suite runs on two workers and this one's timing feels the other's load; the
    # goal of 0.25 a judgment is the bench's; before adaptive limits: 4 a judgment, and errors)
    assert limits.refused <= 1.0 * len(rows)
    assert stats["refusals"] == limits.refused
    assert 60 <= stats["rate_per_s"] <= 300  # settled near the 150 a second


def test_requests_a_second_with_retry_after(ctx, slow_llm):
    limits = ProviderLimits(slow_llm, rps=150, burst_s=0.2)
    rows, stats = _run(ctx, slow_llm, limits, 240)
    _all_ok(rows)
    assert limits.refused <= 1.0 * len(rows)  # (loose, as above)
    assert stats["paused_s"] > 0  # each Retry-After paused the endpoint


def test_tokens_a_minute_with_headers_pace_before_a_refusal(ctx, slow_llm):
    # ~250 tokens a call: 25,000 tokens a second is ~100 calls a second
    limits = ProviderLimits(slow_llm, tokens_per_s=25_000, headers=True, burst_s=0.2)
    rows, stats = _run(ctx, slow_llm, limits, 200)
    _all_ok(rows)
    # the headers said the quota was running low before it ran out
    assert limits.refused <= 0.25 * len(rows)
    assert stats["rate_per_s"] is not None


def test_tokens_a_minute_without_headers(ctx, slow_llm):
    limits = ProviderLimits(slow_llm, tokens_per_s=25_000, retry_after=False, burst_s=0.2)
    rows, _ = _run(ctx, slow_llm, limits, 200)
    _all_ok(rows)
    # (0.25-0.53 a judgment in 7 runs quiet and beside CPU hogs, 0.59 once in CI: the
    # client's timing feels the load; the goal of 0.25 is the bench's, 0.16 there)
    assert limits.refused <= 1.0 * len(rows)


def test_calls_in_flight(ctx, slow_llm):
    limits = ProviderLimits(slow_llm, in_flight=5, retry_after=False)
    rows, stats = _run(ctx, slow_llm, limits, 150, concurrency=16)
    _all_ok(rows)
    assert limits.refused <= 0.5 * len(rows)
    assert stats["in_flight"] or stats["rate_per_s"]  # paced to it, or the window closed


def test_a_few_429s_at_random_do_not_slow_an_endpoint_without_a_limit(ctx, fake_llm):
    """A provider shedding 5% of requests whatever the load: every judgment ok, the endpoint
    never paced nor its window closed (before: each refusal cut the pace, and the endpoint
    crawled at one call in flight)."""
    fake_llm.latency = 0.01
    limits = ProviderLimits(fake_llm, shed=0.05, seed=3)
    rows, stats = _run(ctx, fake_llm, limits, 400, concurrency=16)
    _all_ok(rows)
    assert 5 <= limits.refused <= 45  # (about 21)
    assert stats["rate_per_s"] is None and stats["in_flight"] is None
    assert fake_llm.max_in_flight == 16


def test_a_retry_after_of_a_429_at_random_holds_the_call_not_the_endpoint(ctx, fake_llm):
    """Shed at random, each with "come back in 0.5 s": the refused call waits that long,
    the other calls go on (before: each paused the whole endpoint, 20 of them 10 s)."""
    fake_llm.latency = 0.01
    limits = ProviderLimits(fake_llm, shed=0.05, seed=3, shed_retry_after_s=0.5)
    t0 = time.perf_counter()
    rows, stats = _run(ctx, fake_llm, limits, 400, concurrency=16)
    _all_ok(rows)
    assert limits.refused >= 5
    # (a refusal among the first 40 answers still pauses it: too early to call it noise)
    assert stats["paused_s"] <= 1.0 and time.perf_counter() - t0 < 6.0


async def _refused_above_five_in_flight():
    """A limit that had calls answered with up to 5 in flight, then the sixth to eighth in
    flight refused."""
    from evalkit._adaptive import AdaptiveLimit

    limit = AdaptiveLimit(16)
    for _ in range(12):  # answered with up to 5 in flight
        tickets = [await limit.acquire() for _ in range(5)]
        for ticket in tickets:
            limit.ok(ticket)
    tickets = [await limit.acquire() for _ in range(8)]
    for ticket in tickets[5:]:  # the sixth to eighth in flight: refused
        limit.refused(ticket, False, None)
    for ticket in tickets[:5]:
        limit.ok(ticket)
    return limit


def test_a_refusal_above_the_most_ever_accepted_in_flight_closes_the_window():
    limit = asyncio.run(_refused_above_five_in_flight())
    assert limit.window == 5 and limit.rate is None  # the most accepted, the rate untouched
    assert limit.stats()["in_flight"] == 5


def test_reopened_after_refusals_it_is_paced_when_calls_were_answered_before():
    """A window closed on refusals (taken for a limit on calls in flight) makes no cut to
    the pace; refused on and on, the endpoint went half-open, and the probe's answer
    reopened it unpaced, as if nothing had ever been answered: the crowd went again at any
    pace (CI, load 6.5: 258 refusals for 300 calls under a lowered limit, the pace None at
    the end). Calls were answered before the refusals: it reopens at what it took since."""
    async def main():
        limit = await _refused_above_five_in_flight()  # the window closes at 5
        assert limit.window == 5 and limit.rate is None
        while not limit._probing:  # refused on and on: half-open
            limit.refused(await limit.acquire(), False, None)
        limit.ok(await limit.acquire())  # the probe answered
        return limit

    limit = asyncio.run(main())
    assert not limit._probing
    assert limit.rate is not None and limit.rate > 0


def test_a_limit_lowered_mid_run_is_followed(ctx, slow_llm):
    limits = ProviderLimits(slow_llm, rps=400, burst_s=0.2).then(60, rps=150)
    rows, stats = _run(ctx, slow_llm, limits, 300)
    _all_ok(rows)
    if stats["rate_per_s"] is None:
        # unpaced: on a loaded machine (CI, load 6.5) the run may hardly outpace the lowered
        # limit, and refusals as few as the provider shedding at random (NOISE) need no pace
        assert limits.refused <= NOISE * len(rows), (stats, limits.refused)
    else:
        assert stats["rate_per_s"] <= 1.5 * 150, stats
    assert limits.refused <= 0.5 * len(rows)


def test_a_limit_raised_mid_run_is_found(ctx, slow_llm):
    limits = ProviderLimits(slow_llm, rps=60, burst_s=0.2).then(60, rps=600)
    rows, stats = _run(ctx, slow_llm, limits, 300)
    _all_ok(rows)
    assert stats["rate_per_s"] is None or stats["rate_per_s"] > 60  # grew past the old limit


def test_retry_after_pauses_the_endpoint_not_one_call(ctx, fake_llm):
    fake_llm.latency = 0.1
    fake_llm.push(Reply(status=429, delay=0.0, headers={"Retry-After": "0.4"}))
    j = make(CorrectnessLlmJudge, ctx, fake_llm, cache=False, concurrency=4)
    rows = judge(j, records(*ROWS[:12]))
    _all_ok(rows)
    start = fake_llm.requests[0]["time"]
    late = [r["time"] - start for r in fake_llm.requests[4:]]
    # the three calls sent with the refused one came back at 0.1 s; nothing went until 0.4
    assert late and min(late) >= 0.39


def test_slow_down_is_retried_for_a_time_budget_not_a_count(ctx, fake_llm):
    fake_llm.plan = lambda body: Reply(status=429, delay=0.0,
                                       headers={"retry-after-ms": "50"})
    j = make(CorrectnessLlmJudge, ctx, fake_llm, cache=False, max_retries=1,
             rate_limit_budget_s=0.6)
    t0 = time.perf_counter()
    [row] = judge(j, records(ROWS[0]))
    assert time.perf_counter() - t0 >= 0.6
    assert row["status"] == "error" and row["error_cause"] == "rate_limited"
    assert row["attempts"] > 2 and "rate_limit_budget_s" in row["error"]


def test_the_budget_runs_from_the_first_refusal_not_from_the_queue(ctx, fake_llm):
    """A call that waited its turn (here behind one slow call) longer than the budget is
    still retried when it is then refused: queueing is not retrying."""
    fake_llm.push(Reply(delay=0.5), Reply(status=429, delay=0.0, headers={"Retry-After": "0"}))
    j = make(CorrectnessLlmJudge, ctx, fake_llm, cache=False, concurrency=1,
             rate_limit_budget_s=0.3)
    rows = judge(j, records(*ROWS[:2]))
    _all_ok(rows)
    assert [r["attempts"] for r in rows] == [1, 2]


def test_turned_off_it_keeps_to_the_configured_limits(ctx, slow_llm):
    limits = ProviderLimits(slow_llm, rps=150, retry_after=False, burst_s=0.2)
    rows, stats = _run(ctx, slow_llm, limits, 60, adaptive=False, rate_limit_budget_s=30)
    _all_ok(rows)  # still no judgment lost: each call backs off alone
    assert stats["rate_per_s"] is None and stats["in_flight"] is None


def test_configured_limits_stay_ceilings(ctx, slow_llm):
    limits = ProviderLimits(slow_llm, in_flight=100)  # never binds
    rows, stats = _run(ctx, slow_llm, limits, 60, concurrency=4, rpm=3000)
    _all_ok(rows)
    assert slow_llm.max_in_flight <= 4 and limits.refused == 0
    times = sorted(r["time"] for r in slow_llm.requests)
    assert times[-1] - times[0] >= (len(times) - 50) / 50 * 0.9  # 50 a second, burst aside


def test_rate_limit_headers_of_openai_anthropic_and_litellm():
    openai = rate_limit_quotas({"x-ratelimit-limit-requests": "5000",
                                "x-ratelimit-remaining-requests": "4999",
                                "x-ratelimit-reset-requests": "12ms",
                                "x-ratelimit-limit-tokens": "160000",
                                "x-ratelimit-remaining-tokens": "159976",
                                "x-ratelimit-reset-tokens": "6m0s"})
    assert openai["requests"] == Quota(5000, 4999, 0.012)
    assert openai["tokens"] == Quota(160000, 159976, 360.0)
    assert openai["requests"].refill_per_s() == pytest.approx(1 / 0.012)
    when = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(time.time() + 30))
    anthropic = rate_limit_quotas({"anthropic-ratelimit-requests-limit": "50",
                                   "anthropic-ratelimit-requests-remaining": "0",
                                   "anthropic-ratelimit-requests-reset": when})
    assert anthropic["requests"].remaining == 0
    assert 28 <= anthropic["requests"].reset_s <= 31
    litellm = rate_limit_quotas({"x-ratelimit-remaining-requests": "3",
                                 "llm_provider-anthropic-ratelimit-requests-reset": when})
    assert litellm["requests"].remaining == 3 and litellm["requests"].reset_s > 28
    assert rate_limit_quotas({"x-ratelimit-remaining-requests": "lots"}) == {}
    assert rate_limit_quotas({}) == {} and rate_limit_quotas(None) == {}
    for text, seconds in (("1h2m3.5s", 3723.5), ("250ms", 0.25), ("2", 2.0),
                          (go_duration(0.02), 0.02), (go_duration(75), 75.0)):
        assert duration_seconds(text) == pytest.approx(seconds)
    assert duration_seconds("soon") is None and duration_seconds("2s later") is None


def test_a_pause_holds_every_caller(ctx):
    from evalkit._adaptive import AdaptiveLimit

    async def main() -> list[float]:
        limit = AdaptiveLimit(8)
        first = await limit.acquire()
        limit.refused(first, False, 0.3)
        t0 = time.monotonic()

        async def one() -> float:
            ticket = await limit.acquire()
            limit.ok(ticket)
            return time.monotonic() - t0

        return await asyncio.gather(*(one() for _ in range(5)))

    assert min(asyncio.run(main())) >= 0.29


def test_a_sweeps_processes_share_the_pause_the_rate_and_its_pace(tmp_path):
    from evalkit._adaptive import AdaptiveLimit
    from evalkit.judges.llm._sharedlimit import SharedLimits

    def job() -> AdaptiveLimit:  # as each process of a sweep builds its own
        return AdaptiveLimit(8, shared=SharedLimits(tmp_path, "m|u", 8, None, None))

    async def main() -> tuple[AdaptiveLimit, list[float]]:
        a, b = job(), job()
        for _ in range(4):  # job a is answered (8 calls at a time), then refused with a
            for ticket in [await a.acquire() for _ in range(8)]:  # Retry-After
                a.ok(ticket)
        refused = [await a.acquire() for _ in range(8)]  # (one refusal could be noise)
        for ticket in refused:
            a.refused(ticket, False, 0.3)
        assert a.rate is not None
        t0 = time.monotonic()
        sent = []
        for _ in range(6):  # job b goes after the pause, at a's rate, sharing its slots
            ticket = await b.acquire()
            sent.append(ticket.sent - t0)
            b.ok(ticket)
        return b, sent

    b, sent = asyncio.run(main())
    assert sent[0] >= 0.25  # paused by the other job's 429
    assert b.rate is not None and b.paused_s > 0
    gaps = [later - earlier for earlier, later in zip(sent, sent[1:], strict=False)]
    assert min(gaps) >= 0.5 / b.rate  # paced, not a burst


def test_both_transports_of_one_endpoint_share_its_limit(ctx, slow_llm):
    """The lean transport and litellm calling one model at one endpoint are two engines but
    one endpoint: a refusal either sees slows and pauses both, and the manifest's one entry
    for them counts every refusal (not the last engine's)."""
    limits = ProviderLimits(slow_llm, rps=150, burst_s=0.2)
    slow_llm.plan = limits
    lean = make(CorrectnessLlmJudge, ctx, slow_llm, name="lean", cache=False, concurrency=32)
    lite = make(CorrectnessLlmJudge, ctx, slow_llm, name="lite", cache=False, concurrency=32,
                transport="litellm")

    async def both() -> list:
        return await asyncio.gather(lean.ajudge(records(*ROWS[:120])),
                                    lite.ajudge(records(*ROWS[120:240])))

    for rows in asyncio.run(both()):
        _all_ok(list(rows))
    assert lean.engine is not lite.engine
    assert limits.refused > 0
    [(key, stats)] = {**lean.endpoint_stats(), **lite.endpoint_stats()}.items()
    assert stats["refusals"] == limits.refused


@pytest.mark.usefixtures("fresh_engines")
def test_both_transports_of_a_providers_default_endpoint_share_its_limit():
    """No api_base: the lean transport names the provider's key variable, litellm leaves it
    to its own default; one endpoint all the same, so one limit (as a sweep keys it)."""
    from evalkit.judges.llm._engine import get_engine, resolve_endpoint

    lean = get_engine(resolve_endpoint("openai/gpt-4o-mini", None, "aiohttp"), 8)
    lite = get_engine(resolve_endpoint("openai/gpt-4o-mini", None, "litellm"), 8)
    assert lean is not lite
    assert lean.limit is lite.limit


def test_an_endpoint_that_answered_nothing_did_not_settle_at_a_rate(ctx, fake_llm):
    """Refused until the budget ran out: the summary says nothing was answered, not a pace
    the controller was left at as if the endpoint had taken it."""
    from evalkit.runner.summary import endpoint_line

    fake_llm.plan = lambda body: Reply(status=429, delay=0.0, body='{"error": {}}')
    j = make(CorrectnessLlmJudge, ctx, fake_llm, cache=False, concurrency=8,
             rate_limit_budget_s=0.4)
    t0 = time.perf_counter()
    rows = judge(j, records(*ROWS[:16]))
    assert all(r["error_cause"] == "rate_limited" for r in rows)
    # each call fails when its budget is spent, waiting or not: the budget, the first refusals
    # and a probe's wait (up to 1 s) at most, with room for a busy machine (before: the
    # callers waiting their turn to probe failed one a probe, 14 s)
    assert time.perf_counter() - t0 < 4.0
    [(endpoint, stats)] = j.endpoint_stats().items()
    assert stats["answered"] == 0
    line = endpoint_line(endpoint, stats)
    assert "answered nothing" in line and "settled" not in line, line


def test_an_outage_is_probed_by_one_call_not_hit_by_the_crowd(ctx, slow_llm):
    """Every request refused for 2 s, no header, then 150 a second: the endpoint refuses
    whatever the pace, so once that is plain (40 refusals in a row over 0.25 s) one probe
    goes at a time, a round trip (at least 50 ms) after the last, each refused one doubling
    the wait. (Wall time against the ideal: the bench's.)"""
    limits = ProviderLimits(slow_llm, outage_s=2.0, rps=150, retry_after=False, burst_s=0.2)
    rows, _ = _run(ctx, slow_llm, limits, 120)
    _all_ok(rows)
    # the outage's second second holds the probes alone: gaps of 0.05, 0.1, 0.2, 0.4, then
    # 0.8 s and more span more than a second, so 5 at most, whenever the probing began (a
    # busy machine only delays them); 8 leaves room for a probe's own round trip at either
    # edge. Before: the crowd at a quarter of its first pace, 340 (and 718 in all)
    late = [t for t in limits.outage_refused_at if t >= 1.0]
    assert len(late) <= 8, (len(late), len(limits.outage_refused_at))


def test_a_bucket_of_a_minutes_calls_without_headers(ctx, slow_llm):
    # a "requests a minute" limit, scaled: a bucket of 2 s worth (200 calls) refilled at 100
    # a second; its burst spent, the rate accepted over the last second says nothing of the
    # refill: the episode's does, and the crowd waits while a probe finds the refill
    limits = ProviderLimits(slow_llm, rps=100, burst_s=2.0, retry_after=False)
    rows, _ = _run(ctx, slow_llm, limits, 400)
    _all_ok(rows)
    # (0.10-0.24 a judgment in 13 runs, quiet and beside 2 or 4 CPU hogs; before the probe
    # 0.45-0.61 in 6: a busier client sends slower, so both are refused less. The bound
    # sits between, 1.4x the most seen after; the goal of 0.25 is the bench's)
    assert limits.refused <= 0.35 * len(rows)
