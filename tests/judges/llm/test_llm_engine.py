"""The engine through the real HTTP path against the fake server: retries, Retry-After,
timeouts, parse failures, the response cache (in and across processes), limits, cost."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from fake_llm_server import Reply
from llm_helpers import judge, make, records

from evalkit.errors import ConfigError, EvalkitError
from evalkit.judges.llm._engine import resolve_endpoint
from evalkit.judges.llm._pricing import token_prices
from evalkit.judges.llm._ratelimit import TokenBucket
from evalkit.judges.llm.hallucination import HallucinationLlmJudge

GOOD = '{"reasoning": "fine", "score": 0.25}'
ROW = {"input": "What is the capital of France?", "output": "Paris.",
       "context": ["Paris is the capital of France."]}


def test_retries_a_server_error_then_scores(ctx, fake_llm):
    fake_llm.push(Reply(status=500), Reply(status=503), Reply(content=GOOD))
    [row] = judge(make(HallucinationLlmJudge, ctx, fake_llm), records(ROW))
    assert (row["status"], row["value"], row["attempts"]) == ("ok", 0.25, 3)
    assert len(fake_llm.requests) == 3


def test_honours_retry_after_on_429(ctx, fake_llm):
    fake_llm.push(Reply(status=429, headers={"Retry-After": "0.4"}), Reply(content=GOOD))
    [row] = judge(make(HallucinationLlmJudge, ctx, fake_llm, backoff_s=0.001), records(ROW))
    assert row["status"] == "ok" and row["attempts"] == 2
    first, second = fake_llm.requests
    assert second["time"] - first["time"] >= 0.4  # not the 1 ms backoff


def test_client_errors_are_not_retried(ctx, fake_llm):
    fake_llm.push(Reply(status=400, body='{"error": {"message": "bad request"}}'))
    [row] = judge(make(HallucinationLlmJudge, ctx, fake_llm), records(ROW))
    assert row["status"] == "error" and row.get("value") is None
    assert "HTTP 400" in row["error"] and row["attempts"] == 1
    assert len(fake_llm.requests) == 1


def test_timeouts_exhaust_retries_into_an_error(ctx, fake_llm):
    fake_llm.push(*[Reply(delay=0.8)] * 3)
    [row] = judge(make(HallucinationLlmJudge, ctx, fake_llm, timeout_s=0.2, max_retries=2),
                  records(ROW))
    assert row["status"] == "error" and row.get("value") is None
    assert "timed out" in row["error"] and row["attempts"] == 3


def test_fenced_json_with_trailing_text_is_read(ctx, fake_llm):
    fake_llm.push(Reply(content=f"Sure! Here it is:\n```json\n{GOOD}\n```\nHope this helps."))
    [row] = judge(make(HallucinationLlmJudge, ctx, fake_llm), records(ROW))
    assert (row["status"], row["value"], row["attempts"]) == ("ok", 0.25, 1)


def test_unparseable_answers_become_an_error_with_the_raw_text(ctx, fake_llm):
    fake_llm.push(*[Reply(content="I think it is mostly fine, 7/10")] * 3)
    [row] = judge(make(HallucinationLlmJudge, ctx, fake_llm, parse_retries=2), records(ROW))
    assert row["status"] == "error" and row.get("value") is None and row.get("passed") is None
    assert row["raw"] == "I think it is mostly fine, 7/10"
    assert "unparseable" in row["error"] and row["attempts"] == 3
    # the re-ask shows the judge its own answer and asks for the JSON again
    retry = fake_llm.requests[1]["body"]["messages"]
    assert retry[-2] == {"role": "assistant", "content": "I think it is mostly fine, 7/10"}
    assert "JSON" in retry[-1]["content"]
    # a failure is never cached: the next run asks again
    judge(make(HallucinationLlmJudge, ctx, fake_llm), records(ROW))
    assert len(fake_llm.requests) == 4


def test_out_of_range_score_is_a_parse_failure(ctx, fake_llm):
    fake_llm.push(Reply(content='{"reasoning": "x", "score": 7}'), Reply(content=GOOD))
    [row] = judge(make(HallucinationLlmJudge, ctx, fake_llm), records(ROW))
    assert (row["status"], row["value"], row["attempts"]) == ("ok", 0.25, 2)


def test_identical_rerun_is_served_from_the_cache(ctx, fake_llm):
    table = records(ROW, {**ROW, "output": "Lyon."})
    priced = {"input_cost_per_mtok": 1.0, "output_cost_per_mtok": 2.0}
    first = judge(make(HallucinationLlmJudge, ctx, fake_llm, **priced), table)
    assert len(fake_llm.requests) == 2 and {r["origin"] for r in first} == {"computed"}
    second = judge(make(HallucinationLlmJudge, ctx, fake_llm, **priced), table)
    assert len(fake_llm.requests) == 2
    assert [r["origin"] for r in second] == ["cache", "cache"]
    assert [r["value"] for r in second] == [r["value"] for r in first]
    # a cached answer keeps the cost it was bought at (a resumed run's cost per success
    # equals a clean run's); the run's spend leaves it out (results.writer.judge_spend)
    assert all(r["attempts"] == 0 for r in second)
    assert [r["cost_usd"] for r in second] == [r["cost_usd"] for r in first]
    assert all(r["cost_usd"] > 0 for r in first)
    # another model or other parameters are other questions
    judge(make(HallucinationLlmJudge, ctx, fake_llm, temperature=0.5, **priced), table)
    assert len(fake_llm.requests) == 4


def test_cache_off_and_refresh(ctx, fake_llm):
    table = records(ROW)
    judge(make(HallucinationLlmJudge, ctx, fake_llm, cache=False), table)
    judge(make(HallucinationLlmJudge, ctx, fake_llm, cache=False), table)
    assert len(fake_llm.requests) == 2
    fake_llm.push(Reply(content=GOOD))
    [row] = judge(make(HallucinationLlmJudge, ctx, fake_llm, cache_refresh=True), table)
    assert row["origin"] == "computed" and row["value"] == 0.25
    [row] = judge(make(HallucinationLlmJudge, ctx, fake_llm), table)
    assert row["origin"] == "cache" and row["value"] == 0.25  # the refreshed answer
    assert len(fake_llm.requests) == 3


_CHILD = """
import asyncio, sys
sys.path.insert(0, {here!r})
from llm_helpers import make, records, judge
from evalkit.context import RunContext
from evalkit.judges.llm.hallucination import HallucinationLlmJudge
from pathlib import Path
ctx = RunContext(run_id="c", experiment="c", run_dir=Path("."), runs_dir=Path("."),
                 cache_dir=Path({cache!r}))
rows = [{{"input": "q", "output": f"answer {{i}}", "context": ["c"]}} for i in range(40)]
out = judge(make(HallucinationLlmJudge, ctx, None, api_base={url!r}, concurrency=8,
                 transport={transport!r}), records(*rows))
assert all(r["status"] == "ok" for r in out), out
print(sum(r["origin"] == "cache" for r in out), "litellm" in sys.modules)
"""


def test_cache_is_shared_by_concurrent_processes(ctx, fake_llm):
    code = _CHILD.format(here=str(Path(__file__).parent), cache=str(ctx.cache_dir),
                         url=fake_llm.url, transport="aiohttp")
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).parent)}
    children = [subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE,
                                 stderr=subprocess.PIPE, text=True, env=env) for _ in range(2)]
    for child in children:
        out, err = child.communicate(timeout=60)
        assert child.returncode == 0, err
    assert 40 <= len(fake_llm.requests) <= 80  # both may ask before either has stored
    n_before = len(fake_llm.requests)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         env=env, timeout=60, check=True).stdout.split()
    assert out == ["40", "False"]  # all cached, and litellm never imported
    assert len(fake_llm.requests) == n_before


def test_concurrency_is_bounded_per_model(ctx, fake_llm):
    fake_llm.latency = 0.05
    a = make(HallucinationLlmJudge, ctx, fake_llm, name="a", concurrency=3)
    b = make(HallucinationLlmJudge, ctx, fake_llm, name="b", concurrency=3, mode="binary")
    assert a.engine is b.engine  # one engine per model and endpoint, shared by its judges
    table = records(*[{**ROW, "output": f"answer {i}"} for i in range(8)])

    async def both():
        return await asyncio.gather(a.ajudge(table), b.ajudge(table))

    out = asyncio.run(both())
    assert all(r["status"] == "ok" for rows in out for r in rows)
    assert fake_llm.max_in_flight == 3


def test_requests_per_minute_are_queued(ctx, fake_llm):
    rows = [{**ROW, "output": f"answer {i}"} for i in range(30)]
    t0 = time.monotonic()
    out = judge(make(HallucinationLlmJudge, ctx, fake_llm, rpm=1200), records(*rows))
    assert all(r["status"] == "ok" for r in out)  # none rejected
    times = sorted(r["time"] for r in fake_llm.requests)
    # a burst of up to 20 (the bucket starts full, after t0), then 20 per second: the 30th
    # request cannot leave before half a second after the bucket was made, however slowly
    # the first ones went (measuring from the first request failed under load: the bucket
    # had refilled while they were sent)
    assert times[-1] - t0 >= 0.45
    # the burst is not spaced out (spaced at 20 per second, 20 requests would take 0.95 s)
    assert times[19] - times[0] < 0.6


def test_token_bucket_queues_instead_of_rejecting():
    made = time.monotonic()
    bucket = TokenBucket(per_minute=1200, burst_s=10)  # 20 per second, 200 at once

    async def take(n: int) -> float:
        t0 = time.monotonic()
        for _ in range(n):
            await bucket.acquire(1)
        return time.monotonic() - t0

    # the burst passes at once (spaced at 20 per second, it would take 10 s)
    assert asyncio.run(take(int(bucket.capacity))) < 0.5
    asyncio.run(take(4))  # then 4 more wait for refill: 0.2 s after the bucket was made
    assert time.monotonic() - made >= 0.19


def test_cost_from_litellms_price_map(ctx, fake_llm):
    prices = token_prices("openai/gpt-4o-mini")
    assert prices is not None and prices[0] > 0
    [row] = judge(make(HallucinationLlmJudge, ctx, fake_llm, model="openai/gpt-4o-mini"),
                  records(ROW))
    expected = row["input_tokens"] * prices[0] + row["output_tokens"] * prices[1]
    assert row["cost_usd"] == pytest.approx(expected)


def test_unknown_model_has_null_cost_unless_priced_in_config(ctx, fake_llm):
    [row] = judge(make(HallucinationLlmJudge, ctx, fake_llm, model="openai/my-own-judge"),
                  records(ROW))
    assert row["status"] == "ok" and row["cost_usd"] is None
    [row] = judge(make(HallucinationLlmJudge, ctx, fake_llm, model="openai/my-own-judge",
                       input_cost_per_mtok=1.0, output_cost_per_mtok=2.0, cache=False),
                  records(ROW))
    assert row["cost_usd"] == pytest.approx(
        (row["input_tokens"] * 1.0 + row["output_tokens"] * 2.0) / 1e6)


def test_retried_calls_are_all_billed(ctx, fake_llm):
    fake_llm.push(Reply(content="not json"), Reply(content=GOOD))
    [row] = judge(make(HallucinationLlmJudge, ctx, fake_llm, model="openai/my-own-judge",
                       input_cost_per_mtok=1.0, output_cost_per_mtok=1.0), records(ROW))
    prompts = [r["body"]["messages"] for r in fake_llm.requests]
    assert row["attempts"] == 2
    assert row["input_tokens"] == sum(sum(len(m["content"]) for m in p) // 4 + 1
                                      for p in prompts)


def test_key_comes_from_the_environment_and_stays_out_of_results(ctx, fake_llm, monkeypatch):
    monkeypatch.setenv("EVALKIT_TEST_JUDGE_KEY", "sk-test-secret-123456")
    [row] = judge(make(HallucinationLlmJudge, ctx, fake_llm,
                       api_key_env="EVALKIT_TEST_JUDGE_KEY"), records(ROW))
    assert fake_llm.requests[0]["headers"]["Authorization"] == "Bearer sk-test-secret-123456"
    assert "sk-test-secret" not in json.dumps(row, default=str)


def test_a_missing_key_is_one_clear_error(ctx, fake_llm, monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    j = make(HallucinationLlmJudge, ctx, None, model="openai/gpt-4o-mini")
    with pytest.raises(EvalkitError, match="OPENAI_API_KEY is not set"):
        judge(j, records(ROW))


def test_transport_is_chosen_from_the_model_string():
    ep = resolve_endpoint("openai/gpt-4o-mini", None)
    assert (ep.transport, ep.base_url, ep.wire_model, ep.key_env) == (
        "aiohttp", "https://api.openai.com/v1", "gpt-4o-mini", "OPENAI_API_KEY")
    ep = resolve_endpoint("openrouter/meta-llama/llama-3-70b", None)
    assert (ep.transport, ep.wire_model) == ("aiohttp", "meta-llama/llama-3-70b")
    ep = resolve_endpoint("ollama/llama3.2", None)
    assert (ep.base_url, ep.key_env) == ("http://localhost:11434/v1", None)
    # a self-hosted endpoint never receives the provider's key unless asked to
    assert resolve_endpoint("openai/x", "http://127.0.0.1:8000/v1").key_env is None
    assert resolve_endpoint("anthropic/claude-3-5-haiku-latest", None).transport == "litellm"
    assert resolve_endpoint("openai/x", "http://h/v1", transport="litellm").transport == \
        "litellm"
    with pytest.raises(ConfigError, match="needs api_base"):
        resolve_endpoint("bedrock/x", None, transport="aiohttp")


def test_json_schema_mode_sends_the_answer_schema(ctx, fake_llm):
    judge(make(HallucinationLlmJudge, ctx, fake_llm, response_format="json_schema"),
          records(ROW))
    fmt = fake_llm.requests[0]["body"]["response_format"]
    assert fmt["type"] == "json_schema" and fmt["json_schema"]["name"] == "hallucination"
    assert fmt["json_schema"]["schema"]["required"] == ["reasoning", "score"]
    judge(make(HallucinationLlmJudge, ctx, fake_llm, response_format="none", cache=False),
          records(ROW))
    assert "response_format" not in fake_llm.requests[1]["body"]


def test_progress_bar_on_a_terminal(ctx, fake_llm, capsys, monkeypatch):
    monkeypatch.setattr(sys.stderr, "isatty", lambda: True)
    fake_llm.push(Reply(status=400))
    judge(make(HallucinationLlmJudge, ctx, fake_llm, name="halluc_judge",
               model="openai/gpt-4o-mini"),
          records(ROW, {**ROW, "output": "Lyon."}, {**ROW, "output": "Nice."}))
    err = capsys.readouterr().err
    assert "halluc_judge" in err and "3/3" in err and "errors 1" in err and "$0.0" in err


def test_retry_after_forms():
    from email.utils import formatdate

    from evalkit._http import retry_after_seconds

    assert retry_after_seconds({"retry-after": "3"}) == 3.0
    assert retry_after_seconds({"retry-after-ms": "250", "retry-after": "9"}) == 0.25
    in_ten = retry_after_seconds({"retry-after": formatdate(time.time() + 10, usegmt=True)})
    assert 8 <= in_ten <= 10
    assert retry_after_seconds({"retry-after": "soon"}) is None
    assert retry_after_seconds(None) is None


def test_an_endpoint_refusing_structured_output_is_asked_with_less(ctx, fake_llm):
    """A refused JSON schema is asked for as a JSON object, a refused JSON object not at all;
    the engine remembers both for the calls after."""
    fake_llm.refused_formats = {"json_schema", "json_object"}
    j = make(HallucinationLlmJudge, ctx, fake_llm)
    [row] = judge(j, records(ROW))
    assert row["status"] == "ok" and row["attempts"] == 3
    formats = [(r["body"].get("response_format") or {}).get("type") for r in fake_llm.requests]
    assert formats == ["json_schema", "json_object", None]
    assert j.engine.unsupported == {"json_schema", "response_format"}
    rows = judge(j, records({**ROW, "output": "Lyon."}, {**ROW, "output": "Nice."}))
    assert [r["attempts"] for r in rows] == [1, 1] and len(fake_llm.requests) == 5
    # the answers are cached under the requests as configured: a rerun is free
    judge(make(HallucinationLlmJudge, ctx, fake_llm), records(ROW))
    assert len(fake_llm.requests) == 5


def test_a_cached_rerun_through_litellm_never_imports_it(ctx, fake_llm):
    rows = [{"input": "q", "output": f"answer {i}", "context": ["c"]} for i in range(40)]
    judge(make(HallucinationLlmJudge, ctx, fake_llm, transport="litellm", concurrency=8),
          records(*rows))
    n_before = len(fake_llm.requests)
    code = _CHILD.format(here=str(Path(__file__).parent), cache=str(ctx.cache_dir),
                         url=fake_llm.url, transport="litellm")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=60, check=True).stdout.split()
    assert out == ["40", "False"] and len(fake_llm.requests) == n_before
