import json

import pytest

from evalkit.analysis.tool_results import ToolSuccessMismatchConfig
from evalkit.config import instance
from evalkit.errors import ConfigError
from evalkit.judges.tool_success_mismatch import ToolSuccessMismatchJudge
from evalkit.results.schemas import JUDGMENTS, RECORDS, conform

FAILED = {"tool": "run", "command": "git comit", "success": True, "exit_code": 1,
          "stdout": "", "stderr": "git: 'comit' is not a git command."}


def judge(rows, **cfg):
    table = conform([{"record_id": f"r{i}", **r} for i, r in enumerate(rows)], RECORDS)
    out = ToolSuccessMismatchJudge("t", ToolSuccessMismatchConfig(**cfg), None).judge(table)
    conform(out, JUDGMENTS)
    return out.to_pylist()


def test_success_claim_with_failure_and_model_carries_on():
    rows = judge([{"context": [json.dumps(FAILED)], "output": "Committed the fix."}])
    assert rows[0]["label"] == "mismatch" and rows[0]["value"] == 1.0
    assert rows[0]["passed"] is False
    assert "exit_code=1" in rows[0]["explanation"]
    assert json.loads(rows[0]["details"])["mismatches"][0]["evidence"][1].startswith("stderr")


def test_acknowledged_failure_is_not_a_mismatch():
    rows = judge([{"context": [json.dumps(FAILED)],
                   "output": "The commit failed with exit code 1; retrying."}])
    assert rows[0]["label"] == "acknowledged" and rows[0]["value"] == 0.0


@pytest.mark.parametrize("result, label", [
    ({"success": True, "exit_code": 0, "stderr": ""}, "consistent"),
    ({"success": False, "exit_code": 1, "stderr": "boom"}, "consistent"),  # honest failure
    ({"status": "OK", "returncode": "2"}, "mismatch"),  # exit code as text
    ({"ok": True, "result": json.dumps({"exitCode": 127, "stderr": "not found"})},
     "mismatch"),  # nested JSON string, camelCase key
    ({"success": True, "response": {"status_code": 500}}, "mismatch"),
    ({"success": True, "stderr": "   \n"}, "consistent"),  # blank stderr
    ({"success": True, "exit_code": True}, "consistent"),  # a boolean is no exit code
])
def test_result_shapes(result, label):
    assert judge([{"context": [json.dumps(result)], "output": "Done."}])[0]["label"] == label


def test_tool_messages_in_input_and_non_json_results():
    messages = [{"role": "user", "content": "commit"},
                {"role": "tool", "content": json.dumps(FAILED)}]
    rows = judge([{"input": json.dumps(messages), "output": "Done."},
                  {"context": ["plain text result", "ünï ✓"], "output": "Done."},
                  {"output": "no tools"}])
    assert [r["label"] for r in rows] == ["mismatch", "consistent", "no_tool_results"]
    assert rows[2]["status"] == "skipped" and rows[2]["value"] is None
    assert judge([{"input": json.dumps(messages), "output": "Done."}],
                 sources=["context"])[0]["label"] == "no_tool_results"


def test_ignored_stderr_lines():
    result = {"success": True, "exit_code": 0, "stderr": "WARNING: pip is out of date"}
    assert judge([{"context": [json.dumps(result)], "output": "ok"}],
                 ignore_stderr=["^WARNING"])[0]["label"] == "consistent"


def test_bad_config():
    with pytest.raises(ConfigError, match="sources"):
        instance("judges", "t", {"plugin": "tool_success_mismatch", "sources": ["metadata"]},
                 "judges.t")
    with pytest.raises(ConfigError, match="acknowledgement: not a valid regex"):
        instance("judges", "t", {"plugin": "tool_success_mismatch", "acknowledgement": "("},
                 "judges.t")


# Langfuse logs an observation's output as an object; the tool result sits inside it
def test_a_tool_result_inside_the_output_object_is_read():
    carried_on = {"tool_result": FAILED, "content": "Committed the fix."}
    admitted = {"tool_result": FAILED, "content": "The commit failed: git says 'comit' is "
                "not a command."}
    nested = {"messages": [{"role": "assistant", "content": "Pushed."},
                           {"role": "tool", "content": json.dumps(FAILED)}]}
    rows = judge([{"output": json.dumps(carried_on)}, {"output": json.dumps(admitted)},
                  {"output": json.dumps(nested)}])
    assert [r["label"] for r in rows] == ["mismatch", "acknowledged", "mismatch"]
    assert "exit_code=1" in rows[0]["explanation"]


def test_the_failed_result_itself_does_not_acknowledge_its_failure():
    # the whole object: its exit_code and stderr keys are the failure, not an admission
    rows = judge([{"output": json.dumps(FAILED)},
                  {"context": [json.dumps(FAILED)], "output": json.dumps(
                      {"result": FAILED, "answer": "Done, all committed."})}])
    assert [r["label"] for r in rows] == ["mismatch", "mismatch"]


def test_a_plain_text_output_and_a_tool_message_object_in_input():
    messages = [{"role": "user", "content": "commit it"},
                {"role": "tool", "content": FAILED}]  # content logged as an object
    rows = judge([{"input": json.dumps(messages), "output": "Committed."},
                  {"output": "plain text, no tools"}])
    assert [r["label"] for r in rows] == ["mismatch", "no_tool_results"]
