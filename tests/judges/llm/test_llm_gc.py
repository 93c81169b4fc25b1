"""An LLM judge's calls run with full collections paused (evalkit/_gc.py): thousands of calls
in flight are thousands of suspended coroutine chains that every full collection would
traverse, freeing nothing."""

from __future__ import annotations

import gc

from fake_llm_server import rule_based_answer
from llm_helpers import judge, make, records

from evalkit.judges.llm.hallucination import HallucinationLlmJudge


def test_an_llm_judges_calls_run_with_full_collections_paused(fake_llm, ctx):
    before = gc.get_threshold()
    seen: list[int] = []

    def answer(body: dict) -> str:  # the fake server runs in a thread of this process
        seen.append(gc.get_threshold()[2])
        return rule_based_answer(body)

    fake_llm.answer = answer
    rows = judge(make(HallucinationLlmJudge, ctx, fake_llm),
                 records({"input": "q", "output": "a"}, {"input": "q2", "output": "a2"}))
    assert [r["status"] for r in rows] == ["ok", "ok"]
    assert len(seen) == 2 and min(seen) > 1_000_000
    assert gc.get_threshold() == before
