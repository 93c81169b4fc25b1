"""``evalkit run -m +experiment=llm_judge judges.x.model=a,b`` as a subprocess against the
fake server: one run per judge model, spend in the manifest, and an identical rerun that
makes no model call (and never imports litellm)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import duckdb
import pytest

pytestmark = pytest.mark.e2e  # runs evalkit end to end

EVALKIT = [sys.executable, "-m", "evalkit"]


def _run(args: list[str], cwd: Path, api_base: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "EVALKIT_JUDGE_API_BASE": api_base, "EVALKIT_CACHE_DIR":
           str(cwd / "cache"), "LITELLM_LOCAL_MODEL_COST_MAP": "True"}
    return subprocess.run([*EVALKIT, "run", *args], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=240)


def _manifests(runs: Path) -> list[dict]:
    return [json.loads(p.read_text()) for p in sorted(runs.glob("llm_judge/*/manifest.json"))]


def test_sweep_over_two_judge_models_then_a_free_rerun(tmp_path, fake_llm):
    sweep = ["-m", "+experiment=llm_judge",
             "judges.qag_faithfulness.model=openai/judge-a,openai/gpt-4o-mini",
             "judges.hallucination_llm.model=openai/judge-a", "runner.summary=false",
             f"runner.runs_dir={tmp_path / 'runs'}"]
    done = _run(sweep, tmp_path, fake_llm.url)
    assert done.returncode == 0, done.stderr[-2000:]
    manifests = _manifests(tmp_path / "runs")
    assert len(manifests) == 2 and all(m["status"] == "ok" for m in manifests)
    calls = len(fake_llm.requests)
    assert calls > 0
    con = duckdb.connect()
    glob = str(tmp_path / "runs" / "llm_judge" / "*" / "judgments" / "*.parquet")
    by_model = dict(con.sql(
        f"SELECT judge_model, count(*) FROM read_parquet('{glob}') "
        "WHERE judge = 'qag_faithfulness' AND status = 'ok' GROUP BY ALL").fetchall())
    assert set(by_model) == {"openai/judge-a", "openai/gpt-4o-mini"}
    assert min(by_model.values()) > 100  # most records have claims checked against context
    spend = {m["config"]["judges"]["qag_faithfulness"]["model"]: m["judge_cost_usd"]
             for m in manifests}
    assert spend["openai/gpt-4o-mini"] > 0  # priced from litellm's map
    unpriced = {m["config"]["judges"]["qag_faithfulness"]["model"]: m["judge_calls_unpriced"]
                for m in manifests}
    # the second job's hallucination_llm (the same model in both jobs) paid for nothing
    assert unpriced["openai/judge-a"] > 0 and unpriced["openai/gpt-4o-mini"] == 0
    second = next(m["run_id"] for m in manifests
                  if m["config"]["judges"]["qag_faithfulness"]["model"] == "openai/gpt-4o-mini")
    assert con.sql(f"SELECT DISTINCT origin FROM read_parquet('{glob}') WHERE run_id = "
                   f"'{second}' AND judge = 'hallucination_llm'").fetchall() == [("cache",)]

    # the same sweep again: everything is in the shared cache
    again = _run(sweep, tmp_path, fake_llm.url)
    assert again.returncode == 0, again.stderr[-2000:]
    assert len(fake_llm.requests) == calls
    reruns = [m for m in _manifests(tmp_path / "runs") if m not in manifests]
    assert len(reruns) == 2 and all(m["judge_cost_usd"] == 0 for m in reruns)
    origins = con.sql(f"SELECT DISTINCT origin FROM read_parquet('{glob}') "
                      "WHERE status = 'ok' AND run_id IN "
                      f"({', '.join(repr(m['run_id']) for m in reruns)})").fetchall()
    assert origins == [("cache",)]


def test_dry_run_counts_calls_and_makes_none(tmp_path, fake_llm):
    done = _run(["+experiment=llm_judge", "runner.dry_run=true", "runner.summary=false",
                 f"runner.runs_dir={tmp_path / 'runs'}"], tmp_path, fake_llm.url)
    assert done.returncode == 0, done.stderr[-2000:]
    [manifest] = _manifests(tmp_path / "runs")
    estimates = manifest["dry_run_estimates"]
    n = manifest["n_records"]
    assert estimates["qag_faithfulness"]["calls"] == 2 * n  # every record has context
    assert estimates["hallucination_llm"]["calls"] == n
    assert fake_llm.requests == []
