"""The Langfuse sink: which judgments become which scores, ids, retries and failures."""

from __future__ import annotations

from pathlib import Path

import pytest
from fake_server import FakeLangfuse, Fault

from evalkit.errors import SourceError
from evalkit.results.schemas import JUDGMENTS, RECORDS, conform
from evalkit.results.writer import RunWriter
from evalkit.sinks.langfuse import LangfuseSink, LangfuseSinkConfig, score_id

RECORD_ROWS = [
    {"record_id": "o1", "trace_id": "t1", "observation_id": "o1"},
    {"record_id": "o2", "trace_id": "t1", "observation_id": "o2",
     "excluded_by": "pipeline_failure", "exclude_reason": "level=ERROR: 429"},
    {"record_id": "t9", "trace_id": "t9", "observation_id": "root-9"},  # a trace record
    {"record_id": "f1"},  # from a file: nothing to attach a score to
]
JUDGMENT_ROWS = [
    {"record_id": "o1", "judge": "echo", "plugin": "prompt_echo", "value": 0.2,
     "passed": True, "label": "no_echo", "status": "ok", "origin": "computed"},
    {"record_id": "o1", "judge": "ok_check", "plugin": "regex", "passed": False,
     "status": "ok", "origin": "computed", "explanation": "no match"},
    {"record_id": "o1", "judge": "mode", "plugin": "failure_mode", "label": "off_topic",
     "status": "ok", "origin": "computed", "judge_model": "openai/gpt-4o-mini"},
    {"record_id": "o1", "judge": "llm", "plugin": "geval", "status": "error",
     "error": "unparseable answer", "origin": "computed"},
    {"record_id": "o1", "judge": "hallucination", "plugin": "langfuse", "value": 1.0,
     "status": "ok", "origin": "imported"},
    {"record_id": "o2", "judge": "echo", "plugin": "prompt_echo", "status": "skipped",
     "origin": "computed",
     "explanation": "excluded by filter pipeline_failure: level=ERROR: 429"},
    {"record_id": "t9", "judge": "echo", "plugin": "prompt_echo", "value": 0.0,
     "status": "ok", "origin": "computed"},
    {"record_id": "f1", "judge": "echo", "plugin": "prompt_echo", "value": 0.0,
     "status": "ok", "origin": "computed"},
]


def _run(tmp_path: Path, run_id: str = "run-1", host: str | None = None) -> Path:
    run_dir = tmp_path / "runs" / "exp" / run_id
    writer = RunWriter(run_dir)
    writer.add_records(conform(RECORD_ROWS, RECORDS, {"run_id": run_id}))
    writer.finish_records()
    writer.add_judgments(conform(JUDGMENT_ROWS, JUDGMENTS, {"run_id": run_id}))
    sources = {"source": {"plugin": "langfuse", "host": host}} if host else {}
    writer.write_manifest({"run_id": run_id, "experiment": "exp", "status": "ok",
                           "sources": sources})
    return run_dir


def _sink(**kw: object) -> LangfuseSink:
    cfg = LangfuseSinkConfig(**kw)  # type: ignore[arg-type]
    cfg.validate()
    return LangfuseSink("langfuse", cfg)


def test_judgments_become_scores(fake_v4: FakeLangfuse, tmp_path: Path) -> None:
    report = _sink().push(_run(tmp_path))
    assert report["pushed"] == 4 and report["failed"] == 1
    assert report["failures"][0]["record_id"] == "f1"
    assert report["skipped"] == {"imported from the source": 1, "judge error": 1,
                                 "skipped (record set aside by a filter)": 1}
    sent = {(b["observationId"] if "observationId" in b else b["traceId"], b["name"]): b
            for b in fake_v4.received}
    echo = sent[("o1", "echo")]
    assert (echo["dataType"], echo["value"], echo["traceId"]) == ("NUMERIC", 0.2, "t1")
    assert echo["id"] == score_id("run-1", "o1", "echo")
    assert echo["metadata"] == {"evalkit_run_id": "run-1", "experiment": "exp",
                                "record_id": "o1", "plugin": "prompt_echo", "status": "ok",
                                "label": "no_echo", "passed": True}
    check = sent[("o1", "ok_check")]
    assert (check["dataType"], check["value"], check["comment"]) == ("BOOLEAN", 0, "no match")
    mode = sent[("o1", "mode")]
    assert (mode["dataType"], mode["value"]) == ("CATEGORICAL", "off_topic")
    assert mode["metadata"]["judge_model"] == "openai/gpt-4o-mini"
    trace = sent[("t9", "echo")]
    assert "observationId" not in trace  # a trace record scores the trace


def test_opt_in_pushes_skipped_and_errors(fake_v4: FakeLangfuse, tmp_path: Path) -> None:
    report = _sink(include_skipped=True, include_errors=True, judges=["echo", "llm"]).push(
        _run(tmp_path))
    assert report["pushed"] == 4 and report["skipped"] == {"judge not selected": 3}
    sent = {(b["observationId"], b["name"]): b for b in fake_v4.received
            if "observationId" in b}
    skipped = sent[("o2", "echo")]
    assert skipped["dataType"] == "TEXT" and skipped["value"].startswith("skipped: excluded")
    assert skipped["metadata"]["failed_pipeline"] == "pipeline_failure: level=ERROR: 429"
    assert sent[("o1", "llm")]["value"] == "error: unparseable answer"


def test_repush_updates_and_id_scopes(fake_v4: FakeLangfuse, tmp_path: Path) -> None:
    def ours() -> list[dict]:
        return [s for s in fake_v4.scores.values() if "evalkit_run_id" in (s["metadata"] or {})]

    run_dir = _run(tmp_path)
    _sink().push(run_dir)
    _sink().push(run_dir)
    assert len(fake_v4.received) == 8 and len(ours()) == 4  # updated, not duplicated
    other = _run(tmp_path, "run-2")
    _sink().push(other)
    assert len(ours()) == 8  # another run keeps its own scores
    _sink(id_scope="experiment").push(run_dir)
    _sink(id_scope="experiment").push(other)
    assert len(ours()) == 12  # per experiment: the later run overwrote the earlier one
    assert sum(s["metadata"]["evalkit_run_id"] == "run-2" for s in ours()) == 8


def test_rate_limits_and_failures(fake_v4: FakeLangfuse, tmp_path: Path) -> None:
    fake_v4.faults += [Fault("/api/public/scores", 429, times=2, retry_after="0.1"),
                       Fault("/api/public/scores", 400, body={"message": "Invalid request"})]
    report = _sink(concurrency=1).push(_run(tmp_path))
    assert report["pushed"] == 3
    assert [f["reason"] for f in report["failures"] if f["record_id"] != "f1"] == [
        "SourceError: langfuse: POST /api/public/scores answered 400: "
        '{"message": "Invalid request"}']


def test_rate_limited_past_max_retries_still_pushes_every_score(
        fake_v4: FakeLangfuse, tmp_path: Path) -> None:
    fake_v4.faults += [Fault("/api/public/scores", 429, times=6, retry_after="0.02")]
    report = _sink(concurrency=2, max_retries=1).push(_run(tmp_path))
    assert report["pushed"] == 4  # as without a 429 (f1 has no trace to score)
    assert all("no Langfuse trace" in f["reason"] for f in report["failures"])


def test_host_from_the_run_and_bad_keys(fake_v4: FakeLangfuse, tmp_path: Path,
                                        monkeypatch: pytest.MonkeyPatch) -> None:
    run_dir = _run(tmp_path, host=fake_v4.url)
    monkeypatch.delenv("LANGFUSE_HOST")
    assert _sink().push(run_dir)["host"] == fake_v4.url
    monkeypatch.setenv("LANGFUSE_PUBLIC_KEY", "pk-lf-other")
    with pytest.raises(SourceError, match="answered 401"):
        _sink().push(run_dir)


@pytest.mark.parametrize("changes, message", [
    ({"public_key": "pk"}, "LANGFUSE_PUBLIC_KEY and LANGFUSE_SECRET_KEY"),
    ({"id_scope": "forever"}, "id_scope"),
])
def test_config_validation(changes: dict, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        LangfuseSinkConfig(**changes).validate()  # type: ignore[arg-type]
