"""End to end through the CLI: read from a fake Langfuse, set failed pipelines aside, judge
the rest with deterministic judges, push the judgments back as scores, and check what the
server received."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import duckdb
import pytest
from fake_server import FakeLangfuse

from evalkit.sinks.langfuse import score_id
from tests.sources.langfuse.conftest import FROM, TO

pytestmark = pytest.mark.e2e  # runs evalkit end to end

EVALKIT = str(Path(sys.executable).parent / "evalkit")
FAILED_KINDS = {"envelope", "http_error", "null"}


def _evalkit(args: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True"}
    return subprocess.run([EVALKIT, *args], cwd=cwd, env=env, text=True, capture_output=True,
                          timeout=180)


def test_read_filter_judge_push(fake: FakeLangfuse, tmp_path: Path) -> None:
    kinds = fake.info["kinds"]
    done = _evalkit(["run", "+experiment=langfuse_audit", f"source.from_time={FROM}",
                     f"source.to_time={TO}", "source.resolve_retry_s=0", "runner.run_id=e2e",
                     "+sinks.langfuse.plugin=langfuse"], tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    run_dir = tmp_path / "runs" / "langfuse_audit" / "e2e"
    manifest = json.loads((run_dir / "manifest.json").read_text())
    assert manifest["status"] == "ok"
    assert manifest["sources"]["source"]["api"] == fake.generation
    assert "sk-lf" not in (run_dir / "manifest.json").read_text()

    con = duckdb.connect()
    records = con.sql(f"SELECT record_id, excluded_by FROM '{run_dir}/records.parquet'"
                      ).fetchall()
    # every generation in the window (the hidden one resolved through its score), each once
    assert sorted(r for r, _ in records) == sorted(kinds)
    excluded = {r for r, by in records if by is not None}
    assert excluded == {oid for oid, k in kinds.items() if k in FAILED_KINDS}
    imported = con.sql(f"SELECT judge, count(*) FROM read_parquet('{run_dir}/judgments/*.parquet')"
                       " WHERE origin = 'imported' GROUP BY ALL ORDER BY ALL").fetchall()
    assert dict(imported)["hallucination"] > 0 and "user_feedback" not in dict(imported)
    rejects = con.sql(f"SELECT location FROM '{run_dir}/rejects.parquet'").fetchall()
    assert ("observation gen-ghost-0",) in rejects

    report = manifest["sinks"]["langfuse"]
    included = len(kinds) - len(excluded)
    assert report["pushed"] == 2 * included and report["failed"] == 0
    received = fake.received
    assert len(received) == 2 * included
    assert len({b["id"] for b in received}) == len(received)
    assert {b["name"] for b in received} == {"prompt_echo", "refusal"}
    for body in received:
        oid = body["observationId"]
        assert kinds[oid] not in FAILED_KINDS  # set-aside records are never scored
        assert body["id"] == score_id("e2e", oid, body["name"])
        assert body["traceId"] == fake.observations[oid]["traceId"]
        assert body["metadata"]["evalkit_run_id"] == "e2e"
        assert "failed_pipeline" not in body["metadata"]
        assert body["dataType"] == "NUMERIC"
    echo = {b["observationId"]: b["value"] for b in received if b["name"] == "prompt_echo"}
    refusal = {b["observationId"]: b["value"] for b in received if b["name"] == "refusal"}
    for oid, value in echo.items():
        assert (value >= 0.9) == (kinds[oid] == "echo"), oid
    for oid, value in refusal.items():
        assert (value == 1.0) == (kinds[oid] == "refusal"), oid

    # pushing again with the skipped judgments: updates the same ids, adds the set-aside ones
    again = _evalkit(["push", "e2e", "--to", "langfuse", "--include-skipped", "--json"],
                     tmp_path)
    assert again.returncode == 0, again.stderr[-3000:]
    assert json.loads(again.stdout)["pushed"] == 2 * len(kinds)
    stored = [s for s in fake.scores.values() if (s["metadata"] or {}).get("evalkit_run_id")]
    assert len(stored) == 2 * len(kinds)  # no duplicates
    for sc in stored:
        failed = (sc["metadata"] or {}).get("failed_pipeline")
        if sc["observationId"] in excluded:
            assert failed and failed.startswith("pipeline_failure: ")
            assert sc["dataType"] == "TEXT" and sc["stringValue"].startswith("skipped")
            assert sc["comment"].startswith("excluded by filter pipeline_failure")
        else:
            assert failed is None


def test_push_rejects_unknown_run(tmp_path: Path) -> None:
    done = _evalkit(["push", "nope", "--to", "langfuse"], tmp_path)
    assert done.returncode == 2
    assert "no run 'nope'" in done.stderr


@pytest.mark.parametrize("key", ["secret_key", "public_key"])
def test_config_with_keys_is_refused(tmp_path: Path, key: str) -> None:
    # as a user's own YAML would add it
    done = _evalkit(["run", "+experiment=langfuse_audit", f"+source.{key}=sk-lf-x"], tmp_path)
    assert done.returncode == 2
    assert "LANGFUSE_PUBLIC_KEY and LANGFUSE_SECRET_KEY" in done.stderr


def test_a_failing_sink_leaves_the_run_ok(fake_v4: FakeLangfuse, tmp_path: Path) -> None:
    done = _evalkit(["run", "+experiment=langfuse_audit", f"source.from_time={FROM}",
                     f"source.to_time={TO}", "source.resolve_retry_s=0", "runner.run_id=r",
                     "+sinks.langfuse.plugin=langfuse", "+sinks.langfuse.max_retries=0",
                     "+sinks.langfuse.host=http://127.0.0.1:9"], tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    kinds = fake_v4.info["kinds"]
    scores = 2 * sum(k not in FAILED_KINDS for k in kinds.values())  # two judges
    assert f"sink langfuse: {scores} item(s) failed" in done.stderr
    manifest = json.loads((tmp_path / "runs" / "langfuse_audit" / "r" / "manifest.json")
                          .read_text())
    assert manifest["status"] == "ok"
    report = manifest["sinks"]["langfuse"]
    assert report["pushed"] == 0 and report["failed"] == scores
    assert "Cannot connect to host 127.0.0.1:9" in report["failures"][0]["reason"]
