"""The judge's full exchange (``judgments.exchange``): the messages sent and the raw reply of
every call behind a judgment, size-bounded, so a report can show it and a reader audit it."""

from __future__ import annotations

import json

from fake_llm_server import Reply
from llm_helpers import judge, make, records

from evalkit.judges.llm.hallucination import HallucinationLlmJudge
from evalkit.judges.llm.qag_faithfulness import QagFaithfulnessJudge
from evalkit.results.schemas import EXCHANGE_CALLS_LIMIT, EXCHANGE_TEXT_LIMIT, JUDGMENTS, conform

GOOD = '{"reasoning": "fine", "score": 0.25}'
ROW = {"input": "What is the capital of France?", "output": "Paris.",
       "context": ["Paris is the capital of France."]}


def _calls(row: dict) -> list[dict]:
    return json.loads(row["exchange"])["calls"]


def test_exchange_holds_the_messages_sent_and_the_raw_reply(ctx, fake_llm):
    fake_llm.push(Reply(content=GOOD))
    [row] = judge(make(HallucinationLlmJudge, ctx, fake_llm), records(ROW))
    [call] = _calls(row)
    assert call["messages"] == fake_llm.requests[0]["body"]["messages"]
    assert call["reply"] == GOOD == row["raw"]
    assert call["cached"] is False and call["error"] is None
    # the column is part of the judgments schema, so the runner writes it
    table = conform([row], JUDGMENTS)
    assert table.column("exchange").to_pylist() == [row["exchange"]]


def test_exchange_of_a_re_ask_and_of_a_failure(ctx, fake_llm):
    fake_llm.push(Reply(content="seven out of ten"), Reply(content=GOOD))
    [row] = judge(make(HallucinationLlmJudge, ctx, fake_llm), records(ROW))
    [call] = _calls(row)
    assert call["messages"] == fake_llm.requests[1]["body"]["messages"]  # the re-ask
    assert call["messages"][-2]["content"] == "seven out of ten"
    fake_llm.push(Reply(status=400))
    [row] = judge(make(HallucinationLlmJudge, ctx, fake_llm, cache=False), records(ROW))
    [call] = _calls(row)
    assert row["status"] == "error" and "HTTP 400" in call["error"] and call["reply"] is None


def test_exchange_is_size_bounded_and_says_what_was_cut(ctx, fake_llm):
    long_output = "x" * (EXCHANGE_TEXT_LIMIT * 3)
    long_reply = '{"reasoning": "' + "y" * (EXCHANGE_TEXT_LIMIT * 2) + '", "score": 0.5}'
    fake_llm.push(Reply(content=long_reply))
    [row] = judge(make(HallucinationLlmJudge, ctx, fake_llm), records({**ROW,
                                                                      "output": long_output}))
    [call] = _calls(row)
    user = "".join(m["content"] for m in call["messages"])
    assert "characters cut]" in user and len(user) < EXCHANGE_TEXT_LIMIT * len(call["messages"]) \
        + 200
    assert call["reply"].startswith(long_reply[:EXCHANGE_TEXT_LIMIT])
    assert call["reply"].endswith(f"[{len(long_reply) - EXCHANGE_TEXT_LIMIT} characters cut]")
    assert len(row["exchange"]) < EXCHANGE_CALLS_LIMIT * 3 * (EXCHANGE_TEXT_LIMIT + 100)


def test_exchange_of_a_cached_answer_and_of_a_two_call_judge(ctx, fake_llm):
    judge(make(HallucinationLlmJudge, ctx, fake_llm), records(ROW))
    [row] = judge(make(HallucinationLlmJudge, ctx, fake_llm), records(ROW))
    [call] = _calls(row)
    assert row["origin"] == "cache" and call["cached"] is True and call["reply"] == row["raw"]
    n = len(fake_llm.requests)
    [row] = judge(make(QagFaithfulnessJudge, ctx, fake_llm), records(
        {"input": "q", "output": "Paris is the capital of France.",
         "context": ["Paris is the capital of France."]}))
    calls = _calls(row)
    assert [c["messages"] for c in calls] == [r["body"]["messages"]
                                              for r in fake_llm.requests[n:]]
    assert len(calls) == 2 and calls[1]["reply"] == row["raw"]
