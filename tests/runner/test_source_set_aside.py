"""Records a source sets aside as no output of the system (OTLP spans that are not model
calls: agent and tool spans) are judged by no judge, not even one that judges the records
the filters set aside (``applies_to_excluded``, as ``pipeline_failure``): an agent span has
no output, and counted as a failed call it made the OpenAI Agents corpus's raw failure rate
0.4 where none of its two model calls failed."""

from __future__ import annotations

from pathlib import Path

import pytest

import evalkit

CORPUS = Path(__file__).resolve().parents[1] / "sources" / "corpus" / "otlp" / \
    "openai-agents-2025-09-30.otlp.jsonl"


def test_a_source_set_aside_is_judged_by_no_judge(tmp_path: Path,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    run = evalkit.run(None, ["source=otlp_json", f"source.path={CORPUS}",
                             "filters=[pipeline_failure]", "judges=[pipeline_failure]",
                             "metrics=[pipeline_failure_rate]",
                             "metrics.pipeline_failure_rate.slice_by=[]"])
    records = {r["record_id"]: r for r in run.records.to_pylist()}
    judgments = run.judgments.to_pylist()
    assert len(judgments) == len(records) == 5  # one per record, as ever
    by_source = {i for i, r in records.items() if r["excluded_by"] == "non_genai_span"}
    assert len(by_source) == 3
    for j in judgments:
        if j["record_id"] in by_source:
            assert j["status"] == "skipped" and "non_genai_span" in j["explanation"]
        else:
            assert j["status"] == "ok" and j["passed"]
    rows = {m["metric"]: m for m in run.metrics.to_pylist()}
    assert rows["pipeline_failure_rate"]["value"] == 0.0
    assert rows["pipeline_failure_rate.raw"]["value"] in (None, 0.0)  # never 0.4


def test_a_filters_set_asides_are_still_judged_in_record_order() -> None:
    import pyarrow as pa

    from evalkit.analysis.pipeline_failure import PipelineFailureConfig
    from evalkit.config import PluginInstance
    from evalkit.judges.pipeline_failure import PipelineFailureJudge
    from evalkit.results.schemas import RECORDS, conform
    from evalkit.runner.judging import JudgeRunner

    cfg = PipelineFailureConfig()
    inst = PluginInstance("judges", "pf", "pipeline_failure", PipelineFailureJudge, cfg)
    marks = ["src", "flt", None, "src", None, "flt"]
    records = conform(pa.table({
        "record_id": list("abcdef"), "output": [None, None, "x", None, "y", "z"],
        "excluded_by": marks, "exclude_reason": [m and "why" for m in marks],
        "run_id": ["r"] * 6}), RECORDS, {})
    runner = JudgeRunner([(inst, PipelineFailureJudge("pf", cfg, None))], "r", False, None,
                         frozenset({"flt"}))
    (part,) = runner.run(records)
    rows = part.select(["record_id", "status", "passed"]).to_pylist()
    assert [r["record_id"] for r in rows] == list("abcdef")
    assert [r["status"] for r in rows] == ["skipped", "ok", "ok", "skipped", "ok", "ok"]
    assert [r["passed"] for r in rows] == [None, False, True, None, True, True]
