"""The litellm transport against the fake server: same retries, parsing and accounting as the
aiohttp transport (litellm's own retries are off)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from fake_llm_server import Reply
from llm_helpers import judge, make, records

from evalkit.judges.llm._pricing import token_prices
from evalkit.judges.llm.geval import GEvalJudge
from evalkit.judges.llm.hallucination import HallucinationLlmJudge

ROW = {"input": "What is the capital of France?", "output": "Paris.",
       "context": ["Paris is the capital of France."]}


def test_litellm_transport_scores_and_accounts(ctx, fake_llm):
    j = make(HallucinationLlmJudge, ctx, fake_llm, transport="litellm",
             model="openai/gpt-4o-mini")
    [row] = judge(j, records(ROW))
    assert j.engine.endpoint.transport == "litellm"
    assert (row["status"], row["value"], row["attempts"]) == ("ok", 0.0, 1)
    body = fake_llm.requests[0]["body"]
    # litellm knows gpt-4o-mini takes a JSON schema (supports_response_schema)
    assert body["model"] == "gpt-4o-mini" and body["response_format"]["type"] == "json_schema"
    assert body["response_format"]["json_schema"]["schema"]["required"] == ["reasoning", "score"]
    prices = token_prices("openai/gpt-4o-mini")
    assert row["cost_usd"] == pytest.approx(row["input_tokens"] * prices[0]
                                            + row["output_tokens"] * prices[1])


def test_litellm_transport_unknown_model_cost_is_null(ctx, fake_llm):
    [row] = judge(make(HallucinationLlmJudge, ctx, fake_llm, transport="litellm",
                       model="openai/my-own-judge"), records(ROW))
    assert row["status"] == "ok" and row["cost_usd"] is None
    # a model litellm does not know to take a schema is asked for a JSON object
    assert fake_llm.requests[0]["body"]["response_format"] == {"type": "json_object"}


def test_litellm_transport_honours_retry_after_and_skips_client_errors(ctx, fake_llm):
    fake_llm.push(Reply(status=429, headers={"Retry-After": "0.4"}),
                  Reply(content='{"reasoning": "x", "score": 0.5}'))
    [row] = judge(make(HallucinationLlmJudge, ctx, fake_llm, transport="litellm",
                       backoff_s=0.001), records(ROW))
    assert (row["status"], row.get("value"), row["attempts"]) == ("ok", 0.5, 2)
    first, second = fake_llm.requests
    assert second["time"] - first["time"] >= 0.4
    fake_llm.push(Reply(status=401))
    [row] = judge(make(HallucinationLlmJudge, ctx, fake_llm, transport="litellm",
                       cache=False), records(ROW))
    assert row["status"] == "error" and row["attempts"] == 1 and len(fake_llm.requests) == 3
    assert row["error_cause"] == "client_error"
    fake_llm.push(*[Reply(status=503)] * 2)
    [row] = judge(make(HallucinationLlmJudge, ctx, fake_llm, transport="litellm",
                       cache=False, max_retries=1, backoff_s=0.001), records(ROW))
    assert (row["status"], row["error_cause"], row["attempts"]) == ("error", "server_error", 2)


def test_litellm_transport_passes_logprobs_back(ctx, fake_llm):
    [row] = judge(make(GEvalJudge, ctx, fake_llm, transport="litellm"), records(ROW))
    assert fake_llm.requests[0]["body"]["logprobs"] is True
    assert row["details"]["weighted_score"] == pytest.approx(4.0)


def test_litellm_transport_timeout_is_an_error(ctx, fake_llm):
    fake_llm.push(Reply(delay=0.9))
    [row] = judge(make(HallucinationLlmJudge, ctx, fake_llm, transport="litellm",
                       timeout_s=0.3, max_retries=0), records(ROW))
    assert row["status"] == "error" and row.get("value") is None and row["attempts"] == 1
    assert "Timeout" in row["error"] and row["error_cause"] == "timeout"


_TWO_JUDGES = """
import asyncio, sys, time
sys.path.insert(0, {here!r})
from pathlib import Path
from llm_helpers import make, records
from evalkit.context import RunContext
from evalkit.judges.llm.hallucination import HallucinationLlmJudge
ctx = RunContext(run_id="c", experiment="c", run_dir=Path("."), runs_dir=Path("."),
                 cache_dir=Path({cache!r}))
table = records(*({{"input": "q", "output": f"answer {{i}}", "context": ["c"]}}
                  for i in range(20)))
lean = make(HallucinationLlmJudge, ctx, None, name="lean", api_base={url!r})
slow = make(HallucinationLlmJudge, ctx, None, name="slow", api_base={url!r},
            transport="litellm", model="openai/other-judge")
async def timed(j):
    rows = await j.ajudge(table)
    assert all(r["status"] == "ok" for r in rows), rows
    return time.perf_counter()
async def main():
    t0 = time.perf_counter()
    slow_done, lean_done = await asyncio.gather(timed(slow), timed(lean))
    print(lean_done - t0, slow_done - t0, "litellm" in sys.modules)
asyncio.run(main())
"""


def test_litellm_import_does_not_stall_other_judges(ctx, fake_llm):
    """litellm is imported (seconds) off the event loop: an aiohttp judge in the same loop
    finishes its calls meanwhile instead of waiting for the import."""
    code = _TWO_JUDGES.format(here=str(Path(__file__).parent), cache=str(ctx.cache_dir),
                              url=fake_llm.url)
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).parent)}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         env=env, timeout=120)
    assert out.returncode == 0, out.stderr
    lean_done, slow_done, imported = out.stdout.split()
    assert imported == "True" and len(fake_llm.requests) == 40
    assert float(lean_done) < float(slow_done) / 2, out.stdout
