import json

from evalkit.analysis.pipeline_failure import PipelineFailureConfig
from evalkit.judges.pipeline_failure import PipelineFailureJudge
from evalkit.results.schemas import JUDGMENTS, RECORDS, conform


def test_judges_every_record_including_excluded():
    assert PipelineFailureJudge.applies_to_excluded is True
    envelope = json.dumps({"completion": None, "rawRequest": {"model": "x"}})
    table = conform([
        {"record_id": "a", "level": "ERROR", "status_message": "404", "output": envelope,
         "excluded_by": "pipeline_failure"},
        {"record_id": "b", "level": "DEFAULT", "output": "a real answer"},
        {"record_id": "c", "output": ""},
    ], RECORDS)
    out = PipelineFailureJudge("pf", PipelineFailureConfig(), None).judge(table)
    conform(out, JUDGMENTS)  # fits the judgments schema
    rows = out.to_pylist()
    assert [r["value"] for r in rows] == [1.0, 0.0, 1.0]
    assert [r["passed"] for r in rows] == [False, True, False]
    assert [r["label"] for r in rows] == ["pipeline_failure", "completion", "pipeline_failure"]
    assert rows[0]["explanation"] == "level=ERROR: 404"
    assert rows[1]["explanation"] is None
    assert rows[2]["explanation"] == "output is empty"
    assert {r["status"] for r in rows} == {"ok"}
