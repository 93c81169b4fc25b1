"""``tool_correctness``: the share of tool calls that succeeded, by tool and slice; calls
without a result are unscored; calls of excluded records count unless asked otherwise."""

import pytest

from evalkit.config import instance
from evalkit.errors import ConfigError
from evalkit.metrics.tool_correctness import ToolCorrectnessConfig, ToolCorrectnessMetric
from tests.metrics.run_tables import connect, rows_by


def call(name, ok, error=None):
    return {"name": name, "ok": ok, **({"error": error} if error else {})}


RECS = [
    {"record_id": "t0", "model": "a", "metadata": {"format": "claude_code", "tool_calls": [
        call("Bash", False, "exit 1"), call("Read", True), call("Bash", True)]}},
    {"record_id": "t1", "model": "a", "metadata": {"format": "claude_code", "tool_calls": [
        call("Bash", False, "exit 1"), call("Edit", None)]}},
    {"record_id": "t2", "model": "b", "excluded_by": "pipeline_failure",
     "metadata": {"format": "openai", "tool_calls": [call("search", False, "timeout")]}},
    {"record_id": "t3", "model": "b", "metadata": {"format": "openai"}},
    {"record_id": "t4", "model": "b", "metadata": "not json"},
]


def compute(**cfg):
    return rows_by(ToolCorrectnessMetric("tc", ToolCorrectnessConfig(n_boot=200, **cfg), None)
                   .compute(connect(RECS)))


def test_share_of_calls_that_succeeded_by_tool_and_slice():
    rows = compute(slice_by=["model", "metadata.format"])
    overall = rows[("tc", "all")]
    assert overall["value"] == pytest.approx(2 / 5)
    assert (overall["n_attempted"], overall["n_judged"], overall["n_unscored"]) == (6, 5, 1)
    assert overall["details"]["calls_in_excluded_records"] == 1
    assert overall["details"]["top_errors"] == {"exit 1": 2, "timeout": 1}
    assert rows[("tc", "tool=Bash")]["value"] == pytest.approx(1 / 3)
    assert rows[("tc", "tool=Edit")]["value"] is None  # no result: unscored, not a failure
    assert rows[("tc", "model=b")]["value"] == 0.0
    assert rows[("tc", "metadata.format=claude_code")]["value"] == pytest.approx(2 / 4)
    assert 0 <= overall["ci_low"] <= overall["value"] <= overall["ci_high"] <= 1


def test_calls_of_excluded_records_can_be_left_out():
    rows = compute(include_excluded=False, by_tool=False)
    assert rows[("tc", "all")]["value"] == pytest.approx(2 / 4)
    assert rows[("tc", "all")]["n_excluded"] == 1
    assert not [k for k in rows if k[1].startswith("tool=")]


def test_no_calls_is_undefined_not_zero():
    rows = rows_by(ToolCorrectnessMetric("tc", ToolCorrectnessConfig(), None).compute(
        connect([{"record_id": "x"}])))
    assert rows[("tc", "all")]["value"] is None
    assert "no tool call" in rows[("tc", "all")]["details"]["undefined"]


def test_bad_config():
    with pytest.raises(ConfigError, match="metrics.tc.min_calls"):
        instance("metrics", "tc", {"plugin": "tool_correctness", "min_calls": 0}, "metrics.tc")
