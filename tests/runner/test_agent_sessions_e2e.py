"""``evalkit run +experiment=agent_sessions`` as a user runs it: offline (no key, no network
but the test receiver), on the bundled sessions, with the evaluation events sent to an OTLP/HTTP
receiver on 127.0.0.1 and decoded there with the opentelemetry-proto definitions."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections import Counter

import pyarrow.parquet as pq
import pytest

from tests.sinks.otlp_receiver import otlp_receiver

pytestmark = pytest.mark.e2e


def _attrs(items):
    return {kv.key: getattr(kv.value, kv.value.WhichOneof("value")) for kv in items}


def test_agent_sessions_offline_with_the_export_received(tmp_path):
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("OTEL_", "EVALKIT_", "OPENAI_", "ANTHROPIC_"))}
    with otlp_receiver() as rx:
        env.update(OTEL_EXPORTER_OTLP_ENDPOINT=rx.url, EVALKIT_CACHE_DIR=str(tmp_path / "c"))
        out = subprocess.run(
            [sys.executable, "-m", "evalkit", "run", "+experiment=agent_sessions",
             f"runner.runs_dir={tmp_path / 'runs'}", "sinks.otlp.send=true"],
            capture_output=True, text=True, timeout=300, env=env, cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    # the summary says the scores are offline stand-ins, and shows the alerts' hints
    assert "OFFLINE" in out.stdout and "[offline]" in out.stdout
    assert "hint:" in out.stdout
    (run_dir,) = (tmp_path / "runs" / "agent_sessions").iterdir()
    manifest = json.loads((run_dir / "manifest.json").read_text())
    assert manifest["offline_judges"] == ["geval_coherence", "geval_relevance",
                                          "hallucination", "qag_faithfulness"]
    judgments = pq.read_table(run_dir / "judgments").to_pylist()
    assert {j["origin"] for j in judgments if j["status"] == "ok"} == {"offline"}
    # hallucination = 1 − faithfulness, offline too, and both skip turns without tool results
    by = {(j["judge"], j["record_id"]): j for j in judgments}
    for (judge, rid), j in by.items():
        if judge == "qag_faithfulness" and j["status"] == "ok":
            assert by[("hallucination", rid)]["value"] == 1 - j["value"]
    records = {r["record_id"]: r for r in pq.read_table(run_dir / "records.parquet").to_pylist()}
    skipped = {rid for (judge, rid), j in by.items()
               if judge == "qag_faithfulness" and j["status"] == "skipped"}
    assert skipped == {rid for rid, r in records.items()
                       if not r["context"] or r["excluded_by"] is not None}
    # what the receiver decoded is every scored judgment, nothing imported or skipped
    got = [_attrs(r.attributes) for _, _, r in rx.log_records()]
    assert manifest["sinks"]["otlp"]["sent"] == len(got) > 0
    assert Counter(a["gen_ai.evaluation.name"] for a in got) == Counter(
        j["judge"] for j in judgments if j["status"] in ("ok", "error"))
    for a in got:
        j = by[(a["gen_ai.evaluation.name"], a["evalkit.record_id"])]
        assert a["gen_ai.evaluation.score.value"] == j["value"]
        assert a["evalkit.judgment.origin"] == "offline"
        assert a["gen_ai.conversation.id"] == records[j["record_id"]]["session_id"]
    metrics = {(m["metric"], m["slice"]): m for m in
               pq.read_table(run_dir / "metrics.parquet").to_pylist()}
    assert metrics[("tool_correctness", "all")]["value"] < 1.0
    assert ("tool_correctness", "tool=Bash") in metrics
    assert ("hallucination_rate", "metadata.task=billing") in metrics
    assert metrics[("span_breakdown", "type=tool")]["value"] > 0
    alerts = pq.read_table(run_dir / "alerts.parquet").to_pylist()
    assert all(a["hints"] for a in alerts) and alerts
    assert (run_dir / "otlp" / "evaluations.jsonl").is_file()


def test_agent_sessions_with_a_model(tmp_path):
    """EVALKIT_OFFLINE=false puts a model in the judges' seats (a fake OpenAI-compatible
    server here): real judgments, origin 'computed', nothing marked offline."""
    from tests.judges.llm.fake_llm_server import FakeLLMServer

    server = FakeLLMServer().start()
    try:
        env = {k: v for k, v in os.environ.items()
               if not k.startswith(("OTEL_", "EVALKIT_", "OPENAI_", "ANTHROPIC_"))}
        env.update(EVALKIT_OFFLINE="false", EVALKIT_JUDGE_API_BASE=server.url,
                   EVALKIT_JUDGE_MODEL="openai/gpt-4o-mini",
                   EVALKIT_CACHE_DIR=str(tmp_path / "c"))
        out = subprocess.run(
            [sys.executable, "-m", "evalkit", "run", "+experiment=agent_sessions",
             f"runner.runs_dir={tmp_path / 'runs'}"],
            capture_output=True, text=True, timeout=300, env=env, cwd=tmp_path)
    finally:
        server.stop()
    assert out.returncode == 0, out.stderr
    assert "OFFLINE" not in out.stdout
    (run_dir,) = (tmp_path / "runs" / "agent_sessions").iterdir()
    judgments = pq.read_table(run_dir / "judgments").to_pylist()
    ok = [j for j in judgments if j["status"] == "ok"]
    assert ok and {j["origin"] for j in ok} == {"computed"}
    assert {j["judge_model"] for j in ok} == {"openai/gpt-4o-mini"}
    assert json.loads((run_dir / "manifest.json").read_text())["offline_judges"] == []
