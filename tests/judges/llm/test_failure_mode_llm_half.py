"""The deterministic failure_mode judge with its LLM half: only what no rule decides is sent
to the model, through the real HTTP path to the fake server."""

from __future__ import annotations

import json

from fake_llm_server import Reply
from llm_helpers import judge, records

from evalkit.judges.failure_mode import FailureModeConfig, FailureModeJudge

PROMPT = "Post a comment on the ticket, then upvote it and update the timestamp."
RECORDS_ROWS = [
    {"record_id": "failed", "input": PROMPT, "output": None, "level": "ERROR",
     "excluded_by": "pipeline_failure", "exclude_reason": "level=ERROR"},
    {"record_id": "echo", "input": PROMPT, "output": PROMPT},
    {"record_id": "skipped_steps", "input": PROMPT, "output": "Comment posted."},
    {"record_id": "invented_api", "input": PROMPT,
     "output": "Called POST /v2/tickets/upvoteAll with force=true."},
]


def _run(ctx, url: str) -> dict[str, dict]:
    cfg = FailureModeConfig(model="openai/judge-model", llm={"api_base": url, "progress": False})
    cfg.validate()
    rows = judge(FailureModeJudge("failure_mode", cfg, ctx), records(*RECORDS_ROWS))
    return {r["record_id"]: r for r in rows}


def test_only_undecided_records_reach_the_model(ctx, fake_llm):
    def diagnose(body: dict) -> Reply:
        label = ("instruction_skipping" if "Comment posted." in json.dumps(body)
                 else "fabricated_tool_api")
        return Reply(content=json.dumps({"label": label, "explanation": "see the output"}))

    fake_llm.push(diagnose, diagnose)
    rows = _run(ctx, fake_llm.url)
    assert len(fake_llm.requests) == 2  # the failed call and the echo were decided by rules
    assert rows["failed"]["label"] == "pipeline_failure"
    assert rows["echo"]["label"] == "prompt_echo"
    assert rows["skipped_steps"]["label"] == "instruction_skipping"
    assert rows["invented_api"]["label"] == "fabricated_tool_api"
    for rid in ("skipped_steps", "invented_api"):
        assert rows[rid]["details"]["rule"] == "llm"
        assert rows[rid]["judge_model"] == "openai/judge-model"
        assert rows[rid]["input_tokens"] and rows[rid]["status"] == "ok"
    sent = json.dumps(fake_llm.requests[0]["body"]["messages"])
    assert "Post a comment" in sent


def test_a_model_that_answers_outside_the_taxonomy_leaves_an_error_not_a_mode(ctx, fake_llm):
    bad = Reply(content=json.dumps({"label": "vibes", "explanation": "?"}))
    fake_llm.push(*[bad] * 12)
    rows = _run(ctx, fake_llm.url)
    for rid in ("skipped_steps", "invented_api"):
        assert rows[rid]["status"] == "error" and rows[rid]["label"] is None
        assert rows[rid]["value"] is None and rows[rid]["error"]
    assert rows["echo"]["label"] == "prompt_echo"


def test_the_model_can_call_a_genuine_output_fine(ctx, fake_llm):
    fine = Reply(content=json.dumps({"label": "none", "explanation": "does the task"}))
    fake_llm.push(fine, fine)
    rows = _run(ctx, fake_llm.url)
    assert rows["skipped_steps"]["label"] == "none"
    assert rows["skipped_steps"]["status"] == "ok"
    assert "unchecked" not in rows["skipped_steps"]["details"]
