"""Offline mode of the LLM judges: no model call, no engine, no cache; a deterministic stand-in
score seeded from a hash of the judged content, stored with origin 'offline'."""

from __future__ import annotations

import asyncio
import subprocess
import sys

import pyarrow as pa
import pytest

from evalkit.judges.llm.geval import GEvalConfig, GEvalJudge
from evalkit.judges.llm.qag_faithfulness import QagFaithfulnessConfig, QagFaithfulnessJudge

TABLE = pa.table({"record_id": ["a", "b", "c"], "input": ["q1", "q2", "q3"],
                  "output": ["answer one", "answer two", "answer three"],
                  "context": [["passage"], [], ["passage"]]})


def judge(cls, cfg_cls, ctx, **cfg):
    return cls("j", cfg_cls(model="openai/gpt-4o-mini", offline=True, **cfg), ctx)


def run(j, table=TABLE):
    return asyncio.run(j.ajudge(table))


def test_deterministic_marked_and_free(ctx):
    j = judge(GEvalJudge, GEvalConfig, ctx, rubric="relevance")
    rows = run(j)
    assert rows == run(judge(GEvalJudge, GEvalConfig, ctx, rubric="relevance"))
    assert [r["status"] for r in rows] == ["ok"] * 3
    assert all(r["origin"] == "offline" and r["cost_usd"] == 0.0 and r["attempts"] == 0
               and r["details"]["offline"] and "not a judgment" in r["explanation"]
               for r in rows)
    assert len({r["value"] for r in rows}) == 3 and all(0 <= r["value"] < 1 for r in rows)
    assert j.judge_model == "offline" and j._engine is None
    assert j.estimate(TABLE) == {"calls": 0, "cached_calls": 0, "input_tokens": 0,
                                 "output_tokens": 0, "cost_usd": 0.0}


def test_seeded_by_content_and_question_not_by_model_or_name(ctx):
    base = {r["record_id"]: r["value"] for r in run(judge(GEvalJudge, GEvalConfig, ctx))}
    other_model = GEvalJudge("k", GEvalConfig(model="ollama/llama3.2", offline=True), ctx)
    assert {r["record_id"]: r["value"] for r in run(other_model)} == base
    coherence = run(judge(GEvalJudge, GEvalConfig, ctx, rubric="coherence"))
    assert [r["value"] for r in coherence] != list(base.values())
    changed = TABLE.set_column(2, "output", pa.array(["answer one!", "answer two",
                                                     "answer three"]))
    values = [r["value"] for r in run(judge(GEvalJudge, GEvalConfig, ctx), changed)]
    assert values[0] != base["a"] and values[1:] == [base["b"], base["c"]]


def test_skip_rules_hold_and_hallucination_is_one_minus_faithfulness(ctx):
    faith = run(judge(QagFaithfulnessJudge, QagFaithfulnessConfig, ctx))
    hall = run(judge(QagFaithfulnessJudge, QagFaithfulnessConfig, ctx, score="hallucination"))
    assert faith[1]["status"] == hall[1]["status"] == "skipped"  # no context
    for f, h in zip(faith, hall, strict=True):
        if f["status"] == "ok":
            assert h["value"] == pytest.approx(1 - f["value"])


def test_offline_never_imports_litellm_or_opens_the_cache(tmp_path):
    code = (
        "import asyncio, sys, pyarrow as pa\n"
        "from types import SimpleNamespace\n"
        "from evalkit.judges.llm.geval import GEvalConfig, GEvalJudge\n"
        f"ctx = SimpleNamespace(cache_dir={str(tmp_path / 'cache')!r}, run_id='r')\n"
        "j = GEvalJudge('j', GEvalConfig(model='anthropic/claude-x', offline=True), ctx)\n"
        "asyncio.run(j.ajudge(pa.table({'record_id': ['a'], 'input': ['q'], 'output': ['a']})))\n"
        "print('litellm' in sys.modules, 'aiohttp' in sys.modules)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert out.stdout.strip() == "False False", out.stderr
    assert not (tmp_path / "cache").exists()
