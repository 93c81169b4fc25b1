import json

import pytest

from evalkit.config import instance
from evalkit.errors import ConfigError
from evalkit.judges.failure_mode import FailureModeConfig, FailureModeJudge
from evalkit.results.schemas import JUDGMENTS, RECORDS, conform

CHAT = json.dumps([{"role": "system", "content": "Summarize the ticket in one sentence."},
                   {"role": "user", "content": "Exports to CSV time out for big reports."}])
FAILED_TOOL = json.dumps({"success": True, "exit_code": 2, "stderr": "unknown flag"})


def judge(rows, **cfg):
    table = conform([{"record_id": f"r{i}", "input": CHAT, **r} for i, r in enumerate(rows)],
                    RECORDS)
    out = FailureModeJudge("fm", FailureModeConfig(**cfg), None).judge(table)
    conform(out, JUDGMENTS)
    return out.to_pylist()


def test_deterministic_modes_and_precedence():
    envelope = json.dumps({"completion": None, "rawRequest": {"model": "m"}})
    rows = judge([
        {"level": "ERROR", "output": envelope, "excluded_by": "pipeline_failure",
         "exclude_reason": "level=ERROR"},
        {"output": "Exports to CSV time out for big reports."},
        {"output": "Deployed; all good.", "context": [FAILED_TOOL]},
        # an echo with a failed tool result: echo wins
        {"output": "Exports to CSV time out for big reports.", "context": [FAILED_TOOL]},
        {"output": "CSV exports of large reports time out."},
        {"output": "The deploy failed with exit code 2.", "context": [FAILED_TOOL]},
    ])
    assert [r["label"] for r in rows] == [
        "pipeline_failure", "prompt_echo", "tool_output_misinterpretation", "prompt_echo",
        "none", "none"]
    assert all(r["status"] == "ok" and r["value"] is None for r in rows)
    fine = json.loads(rows[4]["details"])
    # rules only: a genuine output is none, and says which modes no rule could check
    assert fine["unchecked"] == ["fabricated_tool_api", "instruction_skipping", "other"]
    assert "not checked without a model (set model)" in rows[4]["explanation"]
    assert "does not run yet" not in rows[4]["explanation"] + fine["why"]
    assert json.loads(rows[5]["details"])["tool_check"] == "acknowledged"


def test_excluded_for_another_reason_is_skipped():
    assert FailureModeJudge.applies_to_excluded is True
    rows = judge([{"output": "fine answer", "excluded_by": "sample",
                   "exclude_reason": "not in the 0.1 sample (seed 0)"}])
    assert rows[0]["status"] == "skipped" and rows[0]["label"] is None
    assert rows[0]["explanation"] == "excluded by filter sample: not in the 0.1 sample (seed 0)"


def test_thresholds_are_configurable():
    row = {"output": "Exports to CSV time out for big reports, and more words here now."}
    assert judge([row])[0]["label"] == "none"
    assert judge([row], echo_threshold=0.3)[0]["label"] == "prompt_echo"


def test_llm_settings_are_validated():
    with pytest.raises(ConfigError, match="judges.fm.llm: settings for the LLM half need model"):
        instance("judges", "fm", {"plugin": "failure_mode", "llm": {"concurrency": 2}},
                 "judges.fm")
    with pytest.raises(ConfigError, match="judges.fm.llm: .*unexpected keyword.*'concurency'"):
        instance("judges", "fm", {"plugin": "failure_mode", "model": "openai/gpt-4o-mini",
                                  "llm": {"concurency": 2}}, "judges.fm")
