"""Each LLM judge against the fake server's rule-based model: what it scores, what it skips,
what it keeps in ``details``, and what it estimates for a dry run."""

from __future__ import annotations

import asyncio
import json
import math

import pytest
from fake_llm_server import Reply, certain_logprobs
from llm_helpers import judge, make, records

from evalkit.judges.llm.correctness import CorrectnessLlmJudge
from evalkit.judges.llm.failure_mode import (
    FAILURE_MODES,
    FailureModeLlmJudge,
    classify_failure_modes,
)
from evalkit.judges.llm.geval import GEvalConfig, GEvalJudge, weighted_score
from evalkit.judges.llm.hallucination import HallucinationLlmJudge
from evalkit.judges.llm.pairwise import PairwiseJudge
from evalkit.judges.llm.qag_faithfulness import QagFaithfulnessJudge

GROUNDED = {"input": "Tell me about Paris.", "context": [
    "Paris is the capital of France.", "The Eiffel Tower was completed in 1889."],
    "output": "Paris is the capital of France. The Eiffel Tower was completed in 1889."}
MIXED = {**GROUNDED, "output": "Paris is the capital of France. Bananas orbit Jupiter weekly."}


# --- geval ---------------------------------------------------------------------------------

def test_geval_builtin_rubric_scores_one_call_per_record(ctx, fake_llm):
    rows = judge(make(GEvalJudge, ctx, fake_llm, logprobs=False), records(GROUNDED, MIXED))
    assert len(fake_llm.requests) == 2  # the built-in rubric has its steps
    assert [(r["value"], r["label"], r["passed"]) for r in rows] == [(0.75, "4", True)] * 2
    system = fake_llm.requests[0]["body"]["messages"][0]["content"]
    assert "Relevance (1-5)" in system and "Evaluation steps:\n1. Read the input" in system
    assert "logprobs" not in fake_llm.requests[0]["body"]
    assert rows[0]["details"]["weighted_score"] is None


def test_geval_probability_weighted_score_from_logprobs(ctx, fake_llm):
    content = '{"score": 4, "reason": "mostly relevant"}'
    logprobs = certain_logprobs(content)
    digit = next(t for t in logprobs if t["token"] == "4")
    digit["top_logprobs"] = [{"token": "4", "logprob": math.log(0.6)},
                             {"token": "5", "logprob": math.log(0.3)},
                             {"token": "3", "logprob": math.log(0.1)}]
    fake_llm.push(Reply(content=content, logprobs=logprobs))
    [row] = judge(make(GEvalJudge, ctx, fake_llm), records(GROUNDED))
    body = fake_llm.requests[0]["body"]
    assert body["logprobs"] is True and body["top_logprobs"] == 5
    assert row["details"]["weighted_score"] == pytest.approx(4.2)
    assert row["value"] == pytest.approx((4.2 - 1) / 4)
    assert row["label"] == "4"


def test_weighted_score_is_none_without_a_score_token():
    assert weighted_score(None) is None
    assert weighted_score(certain_logprobs('{"reason": "x"}')) is None
    assert weighted_score(certain_logprobs('{"score": 3}')) == pytest.approx(3.0)
    tokens = [{"token": t, "logprob": 0.0} for t in ('{"', "score", '":', ' "', "2", '"}')]
    assert weighted_score(tokens) == pytest.approx(2.0)  # a quoted score, no alternatives


def test_geval_generates_steps_once_per_rubric_and_caches_them(ctx, fake_llm):
    options = {"criteria": "Politeness (1-5): is the output courteous?", "name": "politeness",
               "logprobs": False}
    j = make(GEvalJudge, ctx, fake_llm, **options)
    judge(j, records(GROUNDED, MIXED))
    second_batch = [{**GROUNDED, "output": f"Answer {i}."} for i in range(3)]
    rows = judge(j, records(*second_batch))
    prompts = [r["body"]["messages"][0]["content"] for r in fake_llm.requests]
    assert sum("design evaluation procedures" in p for p in prompts) == 1
    assert len(fake_llm.requests) == 1 + 2 + 3
    assert rows[0]["details"]["steps"] == ["Read the input.", "Read the output.",
                                           "Compare them and score."]
    assert rows[0]["details"]["steps_generated"] is True
    # another run (a new judge object) reuses the generated steps from the response cache
    judge(make(GEvalJudge, ctx, fake_llm, **options), records({**MIXED, "output": "New."}))
    assert len(fake_llm.requests) == 7


def test_geval_failed_step_generation_scores_nothing(ctx, fake_llm):
    fake_llm.push(*[Reply(content="no idea")] * 2)
    rows = judge(make(GEvalJudge, ctx, fake_llm, criteria="Tone.", parse_retries=1),
                 records(GROUNDED, MIXED))
    assert [r["status"] for r in rows] == ["error", "error"]
    assert all("evaluation steps" in r["error"] and r.get("value") is None for r in rows)
    assert len(fake_llm.requests) == 2
    assert sum(r["attempts"] for r in rows) == 2  # the failed generation is billed once


def test_geval_user_rubric_file(ctx, fake_llm, tmp_path):
    path = tmp_path / "tone.yaml"
    path.write_text("name: tone\ncriteria: Tone (1-5) is calm and kind.\n"
                    "steps: [Read it., Score it.]\ninputs: [output]\n")
    [row] = judge(make(GEvalJudge, ctx, fake_llm, rubric=str(path)), records(GROUNDED))
    assert row["details"]["rubric"] == "tone"
    user = fake_llm.requests[0]["body"]["messages"][1]["content"]
    assert "<output>" in user and "<input>" not in user
    path.write_text("criteria: x\nstepz: []\n")
    with pytest.raises(ValueError, match="unknown key"):
        GEvalConfig(model="m", rubric=str(path)).validate()
    with pytest.raises(ValueError, match="neither a built-in rubric"):
        GEvalConfig(model="m", rubric="fluency").validate()


# --- qag_faithfulness -----------------------------------------------------------------------

def test_qag_keeps_claims_questions_answers(ctx, fake_llm):
    grounded, mixed = judge(make(QagFaithfulnessJudge, ctx, fake_llm), records(GROUNDED, MIXED))
    assert len(fake_llm.requests) == 4  # claims, then answers, per record
    assert (grounded["value"], grounded["passed"], grounded["label"]) == (1.0, True, "faithful")
    assert (mixed["value"], mixed["passed"], mixed["label"]) == (0.5, False, "unfaithful")
    claims = mixed["details"]["claims"]
    assert [c["answer"] for c in claims] == ["yes", "no"]
    assert claims[1]["claim"] == "Bananas orbit Jupiter weekly"
    assert claims[1]["question"] == "Is it true that Bananas orbit Jupiter weekly?"
    assert mixed["details"]["hallucination"] == 0.5
    assert "Bananas orbit Jupiter weekly" in mixed["explanation"]


def test_qag_skips_records_without_context_or_claims(ctx, fake_llm):
    rows = judge(make(QagFaithfulnessJudge, ctx, fake_llm),
                 records({**GROUNDED, "context": None}, {**GROUNDED, "context": ["  "]},
                         {**GROUNDED, "output": "Ok!"}))
    assert [r["status"] for r in rows] == ["skipped"] * 3
    assert rows[0]["explanation"] == "no context to ground the output against"
    assert rows[2]["explanation"] == "the output makes no factual claim to verify"
    assert len(fake_llm.requests) == 1  # only the claim extraction of the third


def test_qag_unknown_answers_stay_out_of_the_ratio(ctx, fake_llm):
    row = {**GROUNDED, "output": "Paris is the capital of France. Maybe it rains tomorrow. "
                                 "Bananas orbit Jupiter."}
    [out] = judge(make(QagFaithfulnessJudge, ctx, fake_llm, score="hallucination"), records(row))
    assert (out["details"]["yes"], out["details"]["no"], out["details"]["unknown"]) == (1, 1, 1)
    assert out["value"] == 0.5  # hallucination = 1 − 1/2
    [out] = judge(make(QagFaithfulnessJudge, ctx, fake_llm),
                  records({**GROUNDED, "output": "Maybe it rains tomorrow."}))
    assert out["status"] == "skipped" and "all unknown" in out["explanation"]


def test_qag_limits_claims_and_context(ctx, fake_llm):
    many = ". ".join(f"Claim number {i} holds" for i in range(30))
    context = [f"passage {i}" for i in range(25)]
    [row] = judge(make(QagFaithfulnessJudge, ctx, fake_llm, max_claims=20,
                       max_context_items=20),
                  records({**GROUNDED, "output": many, "context": context}))
    assert len(row["details"]["claims"]) == 20
    assert "at most 20 claims" in fake_llm.requests[0]["body"]["messages"][0]["content"]
    answer_prompt = fake_llm.requests[1]["body"]["messages"][1]["content"]
    assert answer_prompt.count("<passage ") == 20 and "passage 20" not in answer_prompt


def test_qag_incomplete_answers_are_an_error(ctx, fake_llm):
    fake_llm.push(Reply(), *[Reply(content='{"answers": [{"index": 1, "answer": "yes"}]}')] * 3)
    [row] = judge(make(QagFaithfulnessJudge, ctx, fake_llm), records(MIXED))
    assert row["status"] == "error" and row.get("value") is None
    assert "no answer for question(s) [2]" in row["error"]
    assert row["details"]["claims"][1]["claim"] == "Bananas orbit Jupiter weekly"


# --- hallucination, correctness ------------------------------------------------------------

def test_hallucination_graded_and_binary(ctx, fake_llm):
    graded = judge(make(HallucinationLlmJudge, ctx, fake_llm),
                   records(GROUNDED, {**GROUNDED, "output": "Bananas orbit Jupiter weekly."}))
    assert [(r["value"], r["label"]) for r in graded] == [(0.0, "grounded"),
                                                         (1.0, "hallucinated")]
    binary = judge(make(HallucinationLlmJudge, ctx, fake_llm, mode="binary"),
                   records({**GROUNDED, "output": "Bananas orbit Jupiter weekly."}))
    assert (binary[0]["value"], binary[0]["passed"]) == (1.0, False)
    assert '"hallucinated"' in fake_llm.requests[-1]["body"]["messages"][0]["content"]


def test_correctness_against_the_reference(ctx, fake_llm):
    rows = judge(make(CorrectnessLlmJudge, ctx, fake_llm),
                 records({"input": "Capital of France?", "output": "Paris",
                          "reference": "paris"},
                         {"input": "Capital of France?", "output": "Lyon",
                          "reference": "Paris"},
                         {"input": "Capital of France?", "output": "Paris"}))
    assert [(r["status"], r.get("label")) for r in rows] == [
        ("ok", "correct"), ("ok", "incorrect"), ("skipped", None)]
    assert [r.get("value") for r in rows] == [1.0, 0.0, None]
    assert rows[2]["explanation"].startswith("no reference answer")
    assert len(fake_llm.requests) == 2


# --- pairwise ------------------------------------------------------------------------------

def test_pairwise_reports_position_bias(ctx, fake_llm):
    [row] = judge(make(PairwiseJudge, ctx, fake_llm),
                  records({"input": "q", "output": "long answer", "reference": "short"}))
    first, second = (r["body"]["messages"][1]["content"] for r in fake_llm.requests)
    assert "<response_a>\nlong answer" in first and "<response_a>\nshort" in second
    assert (row["label"], row["value"], row["passed"]) == ("inconsistent", 0.5, False)
    assert row["details"]["orders_agree"] is False
    assert row["details"]["position_bias"] == "first position"


def longer_wins(body: dict) -> str:
    """A fake pairwise judge: the longer response wins, whichever position it is in."""
    user = body["messages"][1]["content"]
    a = user.split("<response_a>\n")[1].split("\n</response_a>")[0]
    b = user.split("<response_b>\n")[1].split("\n</response_b>")[0]
    return json.dumps({"reasoning": "longer", "winner": "A" if len(a) > len(b) else "B"})


def test_pairwise_consistent_preference(ctx, fake_llm):
    fake_llm.answer = longer_wins
    rows = judge(make(PairwiseJudge, ctx, fake_llm),
                 records({"input": "q", "output": "a long answer", "reference": "short"},
                         {"input": "q", "output": "tiny", "reference": "a longer reference"},
                         {"input": "q", "output": "x", "reference": None}))
    assert [(r.get("label"), r.get("value")) for r in rows] == [
        ("candidate", 1.0), ("baseline", 0.0), (None, None)]
    assert rows[0]["details"]["orders_agree"] is True
    assert rows[2]["status"] == "skipped"


# --- failure_mode_llm ------------------------------------------------------------------------

def test_failure_mode_classifies_flagged_records(ctx, fake_llm):
    flagged = {"input": "q", "output": '{"rawRequest": {}}', "level": "ERROR",
               "status_message": "Error code: 404", "excluded_by": "pipeline_failure",
               "exclude_reason": "request envelope"}
    j = make(FailureModeLlmJudge, ctx, fake_llm, records="excluded")
    assert j.applies_to_excluded is True
    rows = judge(j, records(flagged, {"input": "q", "output": "fine"}))
    assert (rows[0]["status"], rows[0]["label"]) == ("ok", "pipeline_failure")
    assert rows[0].get("value") is None and rows[0]["explanation"] == "rule-based"
    assert rows[1]["status"] == "skipped"
    system = fake_llm.requests[0]["body"]["messages"][0]["content"]
    assert all(f"- {mode}:" in system for mode in FAILURE_MODES)


def test_failure_mode_label_outside_the_taxonomy_is_an_error(ctx, fake_llm):
    fake_llm.push(*[Reply(content='{"label": "gremlins", "explanation": "x"}')] * 3)
    [row] = judge(make(FailureModeLlmJudge, ctx, fake_llm), records({"output": "x"}))
    assert row["status"] == "error" and "gremlins" in row["error"]


# --- dry-run estimates -----------------------------------------------------------------------

def test_estimates_follow_skip_rules_and_make_no_call(ctx, fake_llm):
    table = records(GROUNDED, MIXED, {**GROUNDED, "context": None})
    qag = make(QagFaithfulnessJudge, ctx, fake_llm, model="openai/gpt-4o-mini").estimate(table)
    assert qag["calls"] == 4 and qag["input_tokens"] > 0 and qag["cost_usd"] > 0
    unpriced = make(HallucinationLlmJudge, ctx, fake_llm, model="openai/own").estimate(table)
    assert unpriced["calls"] == 3 and unpriced["cost_usd"] is None
    steps = make(GEvalJudge, ctx, fake_llm, criteria="Tone.").estimate(table)
    assert steps["calls"] == 3 + 1  # plus generating the steps
    assert make(PairwiseJudge, ctx, fake_llm).estimate(table)["calls"] == 0  # no reference
    assert fake_llm.requests == []


def test_estimates_leave_out_what_the_cache_answers(ctx, fake_llm):
    table = records(GROUNDED, MIXED, {**GROUNDED, "output": "Ok!"})
    qag = make(QagFaithfulnessJudge, ctx, fake_llm)
    assert qag.estimate(table)["calls"] == 6
    judge(qag, table)
    n = len(fake_llm.requests)  # 5: the third output has no claim, so no second call
    assert qag.estimate(table) | {"input_tokens": 0, "output_tokens": 0} == {
        "calls": 0, "cached_calls": n, "input_tokens": 0, "output_tokens": 0, "cost_usd": None}
    geval = make(GEvalJudge, ctx, fake_llm, criteria="Tone.")
    judge(geval, records(GROUNDED))
    assert make(GEvalJudge, ctx, fake_llm, criteria="Tone.").estimate(table) | {
        "input_tokens": 0, "output_tokens": 0, "cost_usd": 0} == {
        "calls": 2, "cached_calls": 2, "input_tokens": 0, "output_tokens": 0, "cost_usd": 0}
    assert len(fake_llm.requests) == n + 2


def test_classify_failure_modes_for_the_deterministic_judge(ctx, fake_llm):
    table = records({"output": "x", "level": "ERROR"}, {"output": "y"})
    rows = asyncio.run(classify_failure_modes(table, ctx, model="openai/fake-judge",
                                              api_base=fake_llm.url))
    assert [r["label"] for r in rows] == ["pipeline_failure", "other"]
    with pytest.raises(ValueError, match="records"):
        asyncio.run(classify_failure_modes(table, ctx, model="m", records="some"))


def test_pairwise_pairs_two_models_records_by_input(ctx, fake_llm):
    fake_llm.answer = longer_wins
    table = records({"input": "q1", "model": "big", "output": "a thorough answer"},
                    {"input": "q1", "model": "small", "output": "short"},
                    {"input": "q2", "model": "big", "output": "x"},
                    {"input": "q3", "model": "small", "output": "alone"},
                    {"input": "q1", "model": "other", "output": "?"})
    j = make(PairwiseJudge, ctx, fake_llm, pair_by="input", candidate_model="big",
             baseline_model="small")
    rows = judge(j, table)
    assert (rows[0]["label"], rows[0]["value"]) == ("candidate", 1.0)
    assert rows[0]["details"]["baseline_record_id"] == "r1"
    assert [r["status"] for r in rows[1:]] == ["skipped"] * 4
    assert "baseline side" in rows[1]["explanation"]
    assert "no small record with the same input" in rows[2]["explanation"]
    assert "neither candidate_model nor baseline_model" in rows[4]["explanation"]
    assert len(fake_llm.requests) == 2
    with pytest.raises(ValueError, match="candidate_model and baseline_model"):
        PairwiseJudge.Config(model="m", pair_by="input", candidate_model="big").validate()
